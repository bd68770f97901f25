//! `upstreams.NAME.sandbox` and `upstreams.NAME.user` (issue 31; sp-policy(5),
//! "SANDBOX"): how a command upstream is confined, and as whom it runs. The launcher
//! that applies them is `sys/confine.rs`.

use std::path::PathBuf;

use serde_json::Value;

use super::fields::{abs_path, err, int, list, object, string, Check};

/// Paths per list: a policy, not a data file.
const MAX_PATHS: usize = 256;

/// How a command upstream is confined (`upstreams.NAME.sandbox`, sp-policy(5)).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Sandbox {
    /// Readable (and executable) beneath, beyond the system's directories.
    pub read: Vec<PathBuf>,
    /// Writable beneath, beyond `/dev/null`.
    pub write: Vec<PathBuf>,
    /// TCP connect and bind allowed.
    pub network: bool,
    pub memory_mb: u64,
    pub processes: u64,
    pub files: u64,
}

pub(crate) const DEFAULT_MEMORY_MB: u64 = 4096;
pub(crate) const DEFAULT_PROCESSES: u64 = 512;
pub(crate) const DEFAULT_FILES: u64 = 1024;
const MAX_LIMIT: u64 = 1 << 20;

impl Default for Sandbox {
    /// Read-only system directories, nothing writable, the network allowed (most
    /// upstreams are API clients), 4 GiB of address space, 512 processes, 1024 files.
    fn default() -> Sandbox {
        Sandbox { read: vec![], write: vec![], network: true, memory_mb: DEFAULT_MEMORY_MB, processes: DEFAULT_PROCESSES, files: DEFAULT_FILES }
    }
}

/// `sandbox`: absent is [`Sandbox::default`], `"none"` is no confinement.
pub(super) fn sandbox(v: Option<&Value>, field: &str) -> Check<Option<Sandbox>> {
    let mut out = Sandbox::default();
    let v = match v {
        None => return Ok(Some(out)),
        Some(Value::String(s)) if s == "none" => return Ok(None),
        Some(v @ Value::Object(_)) => v,
        Some(_) => return err(field, "must be \"none\" or an object ({\"read\": [paths], \"write\": [paths], \"network\": bool, ...})"),
    };
    let map = object(v, field, &["read", "write", "network", "memory_mb", "processes", "files"])?;
    let paths = |k: &str| -> Check<Vec<PathBuf>> {
        let at = format!("{field}.{k}");
        match map.get(k) {
            None => return Ok(vec![]),
            Some(Value::Array(a)) if a.is_empty() => return Ok(vec![]),
            Some(v) => v,
        };
        let v = &map[k];
        let items = list(v, &at)?;
        if items.len() > MAX_PATHS {
            return err(&at, format!("must hold at most {MAX_PATHS} paths"));
        }
        items.iter().enumerate().map(|(i, p)| abs_path(p, &format!("{at}[{i}]"))).collect()
    };
    out.read = paths("read")?;
    out.write = paths("write")?;
    out.network = super::fields::flag(map, "network", field, true)?;
    let limit = |k: &str, min: u64, default: u64| map.get(k).map_or(Ok(default), |v| int(v, &format!("{field}.{k}"), min, MAX_LIMIT));
    out.memory_mb = limit("memory_mb", 64, DEFAULT_MEMORY_MB)?;
    out.processes = limit("processes", 1, DEFAULT_PROCESSES)?;
    out.files = limit("files", 16, DEFAULT_FILES)?;
    Ok(Some(out))
}

/// `user`: a POSIX user name (`[a-z_][a-z0-9_-]*`, at most 32), looked up at start.
pub(super) fn user_name(v: &Value, field: &str) -> Check<String> {
    let s = string(v, field)?;
    let mut b = s.bytes();
    let ok = matches!(b.next(), Some(c) if c.is_ascii_lowercase() || c == b'_')
        && b.all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == b'_' || c == b'-')
        && s.len() <= 32;
    if !ok {
        return err(field, "must be a user name ([a-z_][a-z0-9_-]*, at most 32 characters)");
    }
    if s == "root" {
        return err(field, "must not be root (leave it out to run as sp's user)");
    }
    Ok(s.to_owned())
}
