//! A host's `files` rules (issue 34 §2): which remote paths `ssh_get` may read and
//! `ssh_put` may write over SFTP, the mode a written file gets, and the largest file
//! either moves. Plain data and pure checks: the policy stays a leaf.
//!
//! ```json
//! "files": {"read": ["/var/log/app/*.log"], "write": ["/srv/uploads/*"],
//!           "mode": "0640", "max_bytes": 1048576}
//! ```
//!
//! Decisions:
//! - A pattern is an absolute path in which `*` matches any run of characters except
//!   `/` and `?` one character except `/`: a pattern never reaches into a deeper
//!   directory than it spells out. No `**`, no character classes.
//! - A pattern and a requested path are both refused when they are not canonical:
//!   relative, a `.` or `..` component, an empty component (`//`), a trailing `/`, a
//!   NUL or another control character. A path the agent sends is matched as it came;
//!   the executor then matches the server's `realpath` of it as well (symlinks).
//! - No rule, no transfer: a host without `files`, or with only `read`, refuses the
//!   other direction.
//! - `mode` (default `"0600"`) is the permission bits of every file `ssh_put` writes
//!   (no setuid, setgid or sticky bits); `max_bytes` (default 8 MiB, at most 64 MiB)
//!   bounds both directions.

use serde_json::Value;

use crate::policy::fields::{err, int, list, object, string, Check};

pub(crate) const DEFAULT_MAX_FILE_BYTES: u64 = 8 * 1024 * 1024;
pub(crate) const MAX_FILE_BYTES_CEILING: u64 = 64 * 1024 * 1024;
pub(crate) const DEFAULT_FILE_MODE: u32 = 0o600;
/// Longest remote path (Linux `PATH_MAX`).
pub(crate) const MAX_PATH_BYTES: usize = 4096;

/// One `read` or `write` pattern (module docs).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PathGlob {
    pub text: String,
}

impl PathGlob {
    pub(crate) fn parse(text: &str) -> Result<PathGlob, PathError> {
        check_path(text)?;
        Ok(PathGlob { text: text.to_owned() })
    }

    /// Whether the canonical `path` matches (`*` and `?` never match `/`).
    pub fn matches(&self, path: &str) -> bool {
        glob(self.text.as_bytes(), path.as_bytes())
    }
}

/// Iterative wildcard matching with one backtrack point per `*` (no exponential cases);
/// a `*` may not swallow a `/`.
fn glob(p: &[u8], s: &[u8]) -> bool {
    let (mut pi, mut si) = (0, 0);
    let mut star: Option<(usize, usize)> = None;
    while si < s.len() {
        match p.get(pi) {
            Some(b'*') => {
                star = Some((pi, si));
                pi += 1;
            }
            Some(b'?') if s[si] != b'/' => {
                pi += 1;
                si += 1;
            }
            Some(&c) if c != b'*' && c != b'?' && c == s[si] => {
                pi += 1;
                si += 1;
            }
            _ => match star {
                // The star takes one more character, unless that is a `/`.
                Some((sp, ss)) if s[ss] != b'/' => {
                    star = Some((sp, ss + 1));
                    pi = sp + 1;
                    si = ss + 1;
                }
                _ => return false,
            },
        }
    }
    p[pi..].iter().all(|&c| c == b'*')
}

/// Why a path (a pattern's or a requested one) is refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum PathError {
    NotAbsolute,
    Empty,
    TooLong,
    Control,
    DotComponent,
    EmptyComponent,
    TrailingSlash,
}

impl std::fmt::Display for PathError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            PathError::NotAbsolute => "must be an absolute path (starting with /)",
            PathError::Empty => "must not be empty",
            PathError::TooLong => "is longer than 4096 bytes",
            PathError::Control => "must not contain NUL or another control character",
            PathError::DotComponent => "must not contain a . or .. component",
            PathError::EmptyComponent => "must not contain // (an empty component)",
            PathError::TrailingSlash => "must name a file (no trailing /)",
        })
    }
}

impl std::error::Error for PathError {}

/// A canonical absolute file path (module docs): what both patterns and requests must be.
pub(crate) fn check_path(path: &str) -> Result<(), PathError> {
    if path.is_empty() {
        return Err(PathError::Empty);
    }
    if path.len() > MAX_PATH_BYTES {
        return Err(PathError::TooLong);
    }
    if path.chars().any(char::is_control) {
        return Err(PathError::Control);
    }
    let Some(rest) = path.strip_prefix('/') else { return Err(PathError::NotAbsolute) };
    if rest.is_empty() || rest.ends_with('/') {
        return Err(PathError::TrailingSlash);
    }
    for part in rest.split('/') {
        match part {
            "" => return Err(PathError::EmptyComponent),
            "." | ".." => return Err(PathError::DotComponent),
            _ => {}
        }
    }
    Ok(())
}

/// A host's `files` section.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileRules {
    pub read: Vec<PathGlob>,
    pub write: Vec<PathGlob>,
    /// Permission bits of a file `ssh_put` writes.
    pub mode: u32,
    pub max_bytes: u64,
}

impl FileRules {
    /// The index of the first rule of `list` that matches `path`.
    pub fn find(list: &[PathGlob], path: &str) -> Option<usize> {
        list.iter().position(|g| g.matches(path))
    }
}

pub(crate) fn parse(v: &Value, field: &str) -> Check<FileRules> {
    let map = object(v, field, &["read", "write", "mode", "max_bytes"])?;
    let globs = |key: &str| -> Check<Vec<PathGlob>> {
        let Some(v) = map.get(key) else { return Ok(Vec::new()) };
        let f = format!("{field}.{key}");
        let mut out = Vec::new();
        for (i, item) in list(v, &f)?.iter().enumerate() {
            let fi = format!("{f}[{i}]");
            out.push(PathGlob::parse(string(item, &fi)?).map_err(|e| (fi, e.to_string()))?);
        }
        Ok(out)
    };
    let read = globs("read")?;
    let write = globs("write")?;
    if read.is_empty() && write.is_empty() {
        return err(field, "needs \"read\" or \"write\" patterns (leave \"files\" out to allow no transfer)");
    }
    let mode = match map.get("mode") {
        None => DEFAULT_FILE_MODE,
        Some(m) => {
            let mf = format!("{field}.mode");
            let text = string(m, &mf)?;
            match u32::from_str_radix(text, 8) {
                Ok(n) if n <= 0o777 && text.len() >= 3 && text.len() <= 4 && text.bytes().all(|b| (b'0'..=b'7').contains(&b)) => n,
                _ => return err(&mf, "must be octal permission bits as a string, \"0000\" to \"0777\" (no setuid, setgid or sticky)"),
            }
        }
    };
    let max_bytes = match map.get("max_bytes") {
        None => DEFAULT_MAX_FILE_BYTES,
        Some(m) => int(m, &format!("{field}.max_bytes"), 1, MAX_FILE_BYTES_CEILING)?,
    };
    Ok(FileRules { read, write, mode, max_bytes })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn globs_stay_in_their_directory() {
        let g = |p: &str| PathGlob::parse(p).unwrap();
        for (pattern, path, want) in [
            ("/var/log/app/*.log", "/var/log/app/x.log", true),
            ("/var/log/app/*.log", "/var/log/app/.log", true),
            ("/var/log/app/*.log", "/var/log/app/sub/x.log", false),
            ("/var/log/app/*.log", "/var/log/app/x.log.gz", false),
            ("/var/log/app/*.log", "/var/log/app2/x.log", false),
            ("/srv/uploads/*", "/srv/uploads/a", true),
            ("/srv/uploads/*", "/srv/uploads/a/b", false),
            ("/srv/uploads/*", "/srv/uploads", false),
            ("/srv/*/in/*", "/srv/x/in/y", true),
            ("/srv/*/in/*", "/srv/x/y/in/z", false),
            ("/a/?.txt", "/a/b.txt", true),
            ("/a/?.txt", "/a//.txt", false),
            ("/a/*b*c", "/a/xxbyyc", true),
            ("/a/*b*c", "/a/xxbyy/c", false),
            ("/exact/file", "/exact/file", true),
            ("/exact/file", "/exact/file2", false),
        ] {
            assert_eq!(g(pattern).matches(path), want, "{pattern} vs {path}");
        }
    }

    #[test]
    fn paths_must_be_canonical() {
        for (p, want) in [
            ("/a/b", Ok(())),
            ("/a/.hidden", Ok(())),
            ("/a/b..c", Ok(())),
            ("a/b", Err(PathError::NotAbsolute)),
            ("", Err(PathError::Empty)),
            ("/", Err(PathError::TrailingSlash)),
            ("/a/", Err(PathError::TrailingSlash)),
            ("/a//b", Err(PathError::EmptyComponent)),
            ("/a/./b", Err(PathError::DotComponent)),
            ("/a/../b", Err(PathError::DotComponent)),
            ("/a/..", Err(PathError::DotComponent)),
            ("/a/b\0c", Err(PathError::Control)),
            ("/a/b\nc", Err(PathError::Control)),
        ] {
            assert_eq!(check_path(p), want, "{p:?}");
        }
        assert_eq!(check_path(&format!("/{}", "a".repeat(MAX_PATH_BYTES))), Err(PathError::TooLong));
    }

    #[test]
    fn section() {
        let r = parse(&json!({"read": ["/var/log/*.log"], "write": ["/srv/up/*"], "mode": "0640", "max_bytes": 10}), "f").unwrap();
        assert_eq!((r.read.len(), r.write.len(), r.mode, r.max_bytes), (1, 1, 0o640, 10));
        let r = parse(&json!({"read": ["/x"]}), "f").unwrap();
        assert_eq!((r.write.len(), r.mode, r.max_bytes), (0, 0o600, DEFAULT_MAX_FILE_BYTES));
        for (v, field) in [
            (json!({}), "f"),
            (json!({"read": []}), "f.read"),
            (json!({"read": "/x"}), "f.read"),
            (json!({"read": ["/x/../y"]}), "f.read[0]"),
            (json!({"write": ["/x", "rel"]}), "f.write[1]"),
            (json!({"read": ["/x"], "mode": "4755"}), "f.mode"),
            (json!({"read": ["/x"], "mode": 420}), "f.mode"),
            (json!({"read": ["/x"], "mode": "0648"}), "f.mode"),
            (json!({"read": ["/x"], "max_bytes": 0}), "f.max_bytes"),
            (json!({"read": ["/x"], "reed": ["/y"]}), "f.reed"),
        ] {
            let shown = v.to_string();
            assert_eq!(parse(&v, "f").unwrap_err().0, field, "{shown}");
        }
    }
}
