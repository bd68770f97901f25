//! The `audit` section (`sp-policy(5)`): where the journal goes, whether each
//! row is synced, the optional syslog copy (journald's native protocol when journald
//! is the receiver) and the optional OTLP copy. The journal itself is `audit/`.
//!
//! ```json
//! "audit": {"path": "/var/log/sallyport/audit.jsonl", "fsync": true,
//!           "syslog": {"socket": "/dev/log", "facility": "authpriv", "journald": "auto"},
//!           "otlp": {"url": "http://127.0.0.1:4318"}}
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
    pub otlp: Option<OtlpConfig>,
}

/// `audit.otlp`: where the OpenTelemetry log records go.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OtlpConfig {
    /// The logs endpoint: the policy's `url` with `/v1/logs` appended (unless it
    /// already ends so).
    pub endpoint: String,
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
    pub journald: Journald,
}

/// `audit.syslog.journald`: whether rows go by journald's native protocol.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Journald {
    /// `"auto"` (the default): natively to [`JOURNALD_SOCKET`] when the syslog socket is
    /// `/dev/log` and that socket exists (journald is the receiver); syslog otherwise.
    Auto,
    /// `false`: the traditional syslog datagram, always.
    Off,
    /// A path: natively to that socket (a journald socket mounted elsewhere, tests).
    Socket(PathBuf),
}

/// The socket journald reads native entries on (systemd.journal-fields(7)).
pub(crate) const JOURNALD_SOCKET: &str = "/run/systemd/journal/socket";

impl Default for AuditPolicy {
    fn default() -> AuditPolicy {
        AuditPolicy { journal: JournalPath::Default, fsync: true, syslog: None, otlp: None }
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
    let map = object(v, "audit", &["path", "fsync", "syslog", "otlp"])?;
    match map.get("path") {
        None => {}
        Some(Value::Null) => p.journal = JournalPath::Off,
        Some(path) => p.journal = JournalPath::Path(file_path(path, "audit.path")?),
    }
    p.fsync = flag(map, "fsync", "audit", p.fsync)?;
    let default_syslog = || SyslogConfig { socket: PathBuf::from("/dev/log"), facility: 10, facility_name: "authpriv".into(), journald: Journald::Auto };
    match map.get("syslog") {
        None | Some(Value::Bool(false)) => {}
        Some(Value::Bool(true)) => p.syslog = Some(default_syslog()),
        Some(section @ Value::Object(_)) => {
            let s = object(section, "audit.syslog", &["socket", "facility", "journald"])?;
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
            c.journald = match s.get("journald") {
                None => Journald::Auto,
                Some(Value::String(a)) if a == "auto" => Journald::Auto,
                Some(Value::Bool(false)) => Journald::Off,
                Some(path @ Value::String(_)) => Journald::Socket(file_path(path, "audit.syslog.journald")?),
                Some(_) => return err("audit.syslog.journald", "must be \"auto\", false or the absolute path of journald's socket"),
            };
            p.syslog = Some(c);
        }
        Some(_) => return err("audit.syslog", "must be true, false or {\"socket\": PATH, \"facility\": NAME}"),
    }
    if let Some(section) = map.get("otlp") {
        let o = object(section, "audit.otlp", &["url"])?;
        let Some(Value::String(url)) = o.get("url") else {
            return err("audit.otlp.url", "is required: the collector's OTLP/HTTP address, e.g. \"http://127.0.0.1:4318\"");
        };
        p.otlp = Some(OtlpConfig { endpoint: otlp_endpoint(url)? });
    }
    Ok(p)
}

/// The collector's base URL (`http://127.0.0.1:4318`, as `OTEL_EXPORTER_OTLP_ENDPOINT`)
/// to its logs endpoint. http or https, a host, no user information (it would be a
/// secret in the policy: the OTLP copy sends no credential), no query or fragment.
fn otlp_endpoint(raw: &str) -> Check<String> {
    let field = "audit.otlp.url";
    let Ok(url) = url::Url::parse(raw) else {
        return err(field, "must be an http:// or https:// URL");
    };
    if !matches!(url.scheme(), "http" | "https") || url.host_str().is_none_or(str::is_empty) {
        return err(field, "must be an http:// or https:// URL with a host");
    }
    if !url.username().is_empty() || url.password().is_some() || url.query().is_some() || url.fragment().is_some() {
        return err(field, "must have no user, password, query or fragment");
    }
    let base = url.as_str().trim_end_matches('/');
    Ok(if base.ends_with("/v1/logs") { base.to_owned() } else { format!("{base}/v1/logs") })
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
        assert_eq!(parse(Some(&json!({"syslog": true}))).unwrap().syslog.unwrap().journald, Journald::Auto);
        let j = |v: Value| parse(Some(&json!({"syslog": {"journald": v}}))).unwrap().syslog.unwrap().journald;
        assert_eq!((j(json!(false)), j(json!("auto"))), (Journald::Off, Journald::Auto));
        assert_eq!(j(json!("/run/j.sock")), Journald::Socket("/run/j.sock".into()));
        let otlp = |u: &str| parse(Some(&json!({"otlp": {"url": u}}))).unwrap().otlp.unwrap().endpoint;
        assert_eq!(otlp("http://127.0.0.1:4318"), "http://127.0.0.1:4318/v1/logs");
        assert_eq!(otlp("https://c.example/otlp/"), "https://c.example/otlp/v1/logs");
        assert_eq!(otlp("http://c:4318/v1/logs"), "http://c:4318/v1/logs");
        for (v, field) in [
            (json!({"path": "rel"}), "audit.path"),
            (json!({"path": "/dir/"}), "audit.path"),
            (json!({"fsync": 1}), "audit.fsync"),
            (json!({"pth": "/x"}), "audit.pth"),
            (json!({"syslog": {"facility": "kern"}}), "audit.syslog.facility"),
            (json!({"syslog": {"socket": "x"}}), "audit.syslog.socket"),
            (json!({"syslog": "yes"}), "audit.syslog"),
            (json!({"syslog": {"journald": "rel"}}), "audit.syslog.journald"),
            (json!({"syslog": {"journald": true}}), "audit.syslog.journald"),
            (json!({"otlp": {}}), "audit.otlp.url"),
            (json!({"otlp": {"url": "ftp://h/"}}), "audit.otlp.url"),
            (json!({"otlp": {"url": "http://u:p@h:4318"}}), "audit.otlp.url"),
            (json!({"otlp": {"url": "http://h:4318", "headers": {}}}), "audit.otlp.headers"),
            (json!([]), "audit"),
        ] {
            assert_eq!(parse(Some(&v)).unwrap_err().0, field, "{v}");
        }
    }
}
