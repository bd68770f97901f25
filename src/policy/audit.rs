//! The `audit` section (`sp-policy(5)`): where the journal goes, whether each
//! row is synced, and the optional syslog copy. The journal itself is `audit/`.
//!
//! ```json
//! "audit": {"path": "/var/log/sallyport/audit.jsonl", "fsync": true,
//!           "syslog": {"socket": "/dev/log", "facility": "authpriv"}}
//! ```

use std::path::PathBuf;

use serde_json::Value;

use super::fields::{err, flag, object, Check};

/// `"audit": {...}` as validated at startup.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AuditPolicy {
    pub journal: JournalPath,
    pub fsync: bool,
    pub syslog: Option<SyslogConfig>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum JournalPath {
    /// No `audit.path`: `$XDG_STATE_HOME/sallyport/audit.jsonl` or the `$HOME` fallback.
    Default,
    Path(PathBuf),
    /// `"path": null`.
    Off,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SyslogConfig {
    pub socket: PathBuf,
    pub facility: u8,
    pub facility_name: String,
}

impl Default for AuditPolicy {
    fn default() -> AuditPolicy {
        AuditPolicy { journal: JournalPath::Default, fsync: true, syslog: None }
    }
}

const FACILITIES: [(&str, u8); 12] = [
    ("user", 1),
    ("daemon", 3),
    ("auth", 4),
    ("authpriv", 10),
    ("local0", 16),
    ("local1", 17),
    ("local2", 18),
    ("local3", 19),
    ("local4", 20),
    ("local5", 21),
    ("local6", 22),
    ("local7", 23),
];

/// Stricter than `fields::abs_path`: a file, so no trailing '/'.
fn file_path(v: &Value, field: &str) -> Check<PathBuf> {
    match v {
        Value::String(s) if s.starts_with('/') && !s.contains('\0') && !s.ends_with('/') => Ok(PathBuf::from(s)),
        Value::String(_) => err(field, "must be an absolute path to a file"),
        _ => err(field, "must be a string"),
    }
}

/// Parses the `audit` section (absent: the defaults).
pub(crate) fn parse(v: Option<&Value>) -> Check<AuditPolicy> {
    let mut p = AuditPolicy::default();
    let Some(v) = v else { return Ok(p) };
    let map = object(v, "audit", &["path", "fsync", "syslog"])?;
    match map.get("path") {
        None => {}
        Some(Value::Null) => p.journal = JournalPath::Off,
        Some(path) => p.journal = JournalPath::Path(file_path(path, "audit.path")?),
    }
    p.fsync = flag(map, "fsync", "audit", p.fsync)?;
    let default_syslog = || SyslogConfig { socket: PathBuf::from("/dev/log"), facility: 10, facility_name: "authpriv".into() };
    match map.get("syslog") {
        None | Some(Value::Bool(false)) => {}
        Some(Value::Bool(true)) => p.syslog = Some(default_syslog()),
        Some(section @ Value::Object(_)) => {
            let s = object(section, "audit.syslog", &["socket", "facility"])?;
            let mut c = default_syslog();
            if let Some(sock) = s.get("socket") {
                c.socket = file_path(sock, "audit.syslog.socket")?;
            }
            if let Some(f) = s.get("facility") {
                let name = f.as_str().unwrap_or_default();
                let Some((n, code)) = FACILITIES.iter().find(|(n, _)| *n == name) else {
                    let names: Vec<&str> = FACILITIES.iter().map(|(n, _)| *n).collect();
                    return err("audit.syslog.facility", format!("must be one of: {}", names.join(", ")));
                };
                c.facility = *code;
                c.facility_name = (*n).to_owned();
            }
            p.syslog = Some(c);
        }
        Some(_) => return err("audit.syslog", "must be true, false or {\"socket\": PATH, \"facility\": NAME}"),
    }
    Ok(p)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn policy_section() {
        assert_eq!(parse(None).unwrap(), AuditPolicy::default());
        let p = parse(Some(&json!({"path": "/var/log/sp.jsonl", "fsync": false, "syslog": {"facility": "local3"}}))).unwrap();
        assert_eq!(p.journal, JournalPath::Path("/var/log/sp.jsonl".into()));
        assert_eq!((p.fsync, p.syslog.unwrap().facility), (false, 19));
        assert_eq!(parse(Some(&json!({"path": null}))).unwrap().journal, JournalPath::Off);
        assert_eq!(parse(Some(&json!({"syslog": true}))).unwrap().syslog.unwrap().socket, PathBuf::from("/dev/log"));
        for (v, field) in [
            (json!({"path": "rel"}), "audit.path"),
            (json!({"path": "/dir/"}), "audit.path"),
            (json!({"fsync": 1}), "audit.fsync"),
            (json!({"pth": "/x"}), "audit.pth"),
            (json!({"syslog": {"facility": "kern"}}), "audit.syslog.facility"),
            (json!({"syslog": {"socket": "x"}}), "audit.syslog.socket"),
            (json!({"syslog": "yes"}), "audit.syslog"),
            (json!([]), "audit"),
        ] {
            assert_eq!(parse(Some(&v)).unwrap_err().0, field, "{v}");
        }
    }
}
