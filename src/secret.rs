//! Secrets: read at the moment an authorized call needs one, remembered for redaction.
//!
//! A [`Secret`] prints as `Secret(***)` in `Debug` and has no `Display`: it cannot end up
//! in a log line or an error message by accident. The [`Vault`] is the only reader; every
//! value it reads is remembered for the rest of the process so [`Vault::scrub`] can
//! replace any echo of it in a result before the result leaves (DESIGN.md, "redact").
//!
//! Secret files must be regular files owned by the effective user (or root) with no group
//! or world permission bits, like OpenSSH demands of private keys. The checks run on the
//! opened descriptor, so a file swapped between check and read is still checked.

use std::fmt;
use std::io::Read;
use std::os::unix::fs::MetadataExt;

use serde_json::Value;

use crate::policy::{io_reason, SecretSource};

pub const MAX_SECRET_FILE_BYTES: u64 = 64 * 1024;

pub struct Secret(String);

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Secret(***)")
    }
}

impl Secret {
    /// The value, for the one place that injects it into a request.
    pub fn expose(&self) -> &str {
        &self.0
    }
}

/// Why a secret could not be read. Never contains the secret or any part of the file.
#[derive(Debug, PartialEq, Eq)]
pub enum SecretError {
    Unreadable { credential: String, why: String },
    TooOpen { credential: String, mode: u32 },
    WrongOwner { credential: String },
    EnvMissing { credential: String, var: String },
    Empty { credential: String },
    Invalid { credential: String, why: &'static str },
}

impl fmt::Display for SecretError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SecretError::Unreadable { credential, why } => {
                write!(f, "credential {credential:?}: secret file cannot be read: {why}")
            }
            SecretError::TooOpen { credential, mode } => write!(
                f,
                "credential {credential:?}: secret file permissions {mode:04o} are too open (it must not be readable by group or others)"
            ),
            SecretError::WrongOwner { credential } => {
                write!(f, "credential {credential:?}: secret file is not owned by this user or root")
            }
            SecretError::EnvMissing { credential, var } => {
                write!(f, "credential {credential:?}: environment variable {var} is not set")
            }
            SecretError::Empty { credential } => write!(f, "credential {credential:?}: secret is empty"),
            SecretError::Invalid { credential, why } => write!(f, "credential {credential:?}: {why}"),
        }
    }
}

/// Reads secrets and remembers each value read in this process, for redaction.
#[derive(Default)]
pub struct Vault {
    /// (credential name, value), longest values first so overlapping secrets are
    /// scrubbed whole.
    seen: Vec<(String, String)>,
}

impl fmt::Debug for Vault {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Vault({} secrets seen)", self.seen.len())
    }
}

impl Vault {
    pub fn new() -> Vault {
        Vault::default()
    }

    pub fn read(&mut self, credential: &str, source: &SecretSource) -> Result<Secret, SecretError> {
        let value = match source {
            SecretSource::File(path) => read_file(credential, path)?,
            SecretSource::Env(var) => std::env::var(var).map_err(|_| SecretError::EnvMissing {
                credential: credential.to_owned(),
                var: var.clone(),
            })?,
        };
        if value.is_empty() {
            return Err(SecretError::Empty { credential: credential.to_owned() });
        }
        if value.chars().any(|c| c.is_control()) {
            return Err(SecretError::Invalid {
                credential: credential.to_owned(),
                why: "secret contains control characters (only one trailing newline is trimmed)",
            });
        }
        self.remember(credential, &value);
        Ok(Secret(value))
    }

    fn remember(&mut self, credential: &str, value: &str) {
        if !self.seen.iter().any(|(_, v)| v == value) {
            self.seen.push((credential.to_owned(), value.to_owned()));
            self.seen.sort_by_key(|(_, v)| std::cmp::Reverse(v.len()));
        }
    }

    /// Replaces every occurrence of every secret seen so far, in every string of `value`
    /// (object keys included), with `[REDACTED:<credential>]`.
    pub fn scrub(&self, value: &mut Value) {
        if self.seen.is_empty() {
            return;
        }
        match value {
            Value::String(s) => self.scrub_str(s),
            Value::Array(items) => items.iter_mut().for_each(|v| self.scrub(v)),
            Value::Object(map) => {
                let old = std::mem::take(map);
                for (mut k, mut v) in old {
                    self.scrub_str(&mut k);
                    self.scrub(&mut v);
                    map.insert(k, v);
                }
            }
            _ => {}
        }
    }

    fn scrub_str(&self, s: &mut String) {
        for (name, secret) in &self.seen {
            if s.contains(secret.as_str()) {
                *s = s.replace(secret.as_str(), &format!("[REDACTED:{name}]"));
            }
        }
    }
}

fn read_file(credential: &str, path: &std::path::Path) -> Result<String, SecretError> {
    let unreadable = |why: String| SecretError::Unreadable { credential: credential.to_owned(), why };
    let file = std::fs::File::open(path).map_err(|e| unreadable(io_reason(&e)))?;
    let meta = file.metadata().map_err(|e| unreadable(io_reason(&e)))?;
    if !meta.is_file() {
        return Err(unreadable("not a regular file".into()));
    }
    let mode = meta.mode() & 0o7777;
    if mode & 0o077 != 0 {
        return Err(SecretError::TooOpen { credential: credential.to_owned(), mode });
    }
    let me = rustix::process::geteuid().as_raw();
    if meta.uid() != me && meta.uid() != 0 {
        return Err(SecretError::WrongOwner { credential: credential.to_owned() });
    }
    if meta.len() > MAX_SECRET_FILE_BYTES {
        return Err(unreadable(format!("larger than {MAX_SECRET_FILE_BYTES} bytes")));
    }
    let mut bytes = Vec::new();
    file.take(MAX_SECRET_FILE_BYTES + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| unreadable(io_reason(&e)))?;
    if bytes.len() as u64 > MAX_SECRET_FILE_BYTES {
        return Err(unreadable(format!("larger than {MAX_SECRET_FILE_BYTES} bytes")));
    }
    let mut text = String::from_utf8(bytes)
        .map_err(|_| SecretError::Invalid { credential: credential.to_owned(), why: "secret file is not UTF-8" })?;
    if text.ends_with('\n') {
        text.pop();
        if text.ends_with('\r') {
            text.pop();
        }
    }
    Ok(text)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    use std::os::unix::fs::PermissionsExt;

    fn temp(name: &str, content: &str, mode: u32) -> std::path::PathBuf {
        let dir = std::env::temp_dir().join(format!("sp-secret-test-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let p = dir.join(name);
        std::fs::write(&p, content).unwrap();
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(mode)).unwrap();
        p
    }

    #[test]
    fn file_rules() {
        let mut v = Vault::new();
        let ok = temp("ok", "s3cr3t-value\n", 0o600);
        assert_eq!(v.read("c", &SecretSource::File(ok)).unwrap().expose(), "s3cr3t-value");
        let open = temp("open", "x", 0o644);
        assert_eq!(v.read("c", &SecretSource::File(open)).unwrap_err(), SecretError::TooOpen { credential: "c".into(), mode: 0o644 });
        let empty = temp("empty", "\n", 0o400);
        assert_eq!(v.read("c", &SecretSource::File(empty)).unwrap_err(), SecretError::Empty { credential: "c".into() });
        let two = temp("two", "a\nb\n", 0o600);
        assert!(matches!(v.read("c", &SecretSource::File(two)), Err(SecretError::Invalid { .. })));
        let missing = std::path::PathBuf::from("/nonexistent/sp/secret");
        assert!(matches!(v.read("c", &SecretSource::File(missing)), Err(SecretError::Unreadable { .. })));
        let big = temp("big", &"x".repeat(MAX_SECRET_FILE_BYTES as usize + 1), 0o600);
        assert!(matches!(v.read("c", &SecretSource::File(big)), Err(SecretError::Unreadable { .. })));
    }

    #[test]
    fn debug_never_shows_the_value() {
        let s = Secret("hunter2".into());
        assert_eq!(format!("{s:?}"), "Secret(***)");
        let mut v = Vault::new();
        v.remember("c", "hunter2");
        assert!(!format!("{v:?}").contains("hunter2"));
    }

    #[test]
    fn scrub_everywhere() {
        let mut v = Vault::new();
        v.remember("short", "abc");
        v.remember("long", "abcdef");
        let mut doc = json!({"abcdef-key": ["xx abcdef yy", {"n": "abc"}], "k": 1});
        v.scrub(&mut doc);
        assert_eq!(doc, json!({"[REDACTED:long]-key": ["xx [REDACTED:long] yy", {"n": "[REDACTED:short]"}], "k": 1}));
    }
}
