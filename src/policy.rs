//! The operator's policy: one JSON file, validated whole at startup, deny by default.
//!
//! The format is documented in `sp-policy(5)`; this module is its reference. Validation
//! is hand-written so every error names the field it is about
//! (`http.allow[0].methods[1]: unknown method "FETCH"`), unknown fields are refused at
//! every level (a typo must not silently widen or narrow access), and the file goes
//! through the same strict JSON parser as the protocol (duplicate keys refused).
//!
//! Nothing here reads a secret: a credential's `source` is only a description of where
//! the secret lives, read at the moment an authorized call needs it (`secret.rs`).
//!
//! Matching rules (also in `sp-policy(5)`):
//! - host patterns are exact (`api.example.com`) or wildcard (`*.example.org`, which
//!   matches `a.example.org` and `a.b.example.org` but never the apex); a pattern without
//!   a port matches only the scheme's default port (80 or 443), `host:8080` only 8080;
//!   hosts are normalised like URLs are (lowercase, IDNA, numeric IPv4 forms);
//! - path patterns are exact (`/v1/status`) or prefix (`/v1/*`, matching `/v1` and
//!   everything under `/v1/`; `/*` matches every path); they match the request's
//!   normalised, percent-decoded path (see `tools.rs`).

use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::Value;

use crate::fields::{err, int, list, object, string, Check};
use crate::json;

pub const DEFAULT_TIMEOUT_S: u64 = 30;
pub const MAX_TIMEOUT_S: u64 = 3600;
pub const DEFAULT_MAX_RESPONSE_BYTES: u64 = 8 * 1024 * 1024;
pub const MAX_RESPONSE_BYTES_CEILING: u64 = 64 * 1024 * 1024;
pub const DEFAULT_MAX_REQUEST_BODY_BYTES: u64 = 1024 * 1024;
pub const DEFAULT_MAX_REDIRECTS: u32 = 5;
pub const MAX_REDIRECTS_CEILING: u64 = 20;
pub const MAX_REQUEST_BODY_BYTES_CEILING: u64 = 64 * 1024 * 1024;

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Method {
    Get,
    Head,
    Post,
    Put,
    Patch,
    Delete,
}

impl Method {
    pub const ALL: [Method; 6] =
        [Method::Get, Method::Head, Method::Post, Method::Put, Method::Patch, Method::Delete];

    pub fn parse(s: &str) -> Option<Method> {
        Method::ALL.into_iter().find(|m| m.as_str() == s)
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Method::Get => "GET",
            Method::Head => "HEAD",
            Method::Post => "POST",
            Method::Put => "PUT",
            Method::Patch => "PATCH",
            Method::Delete => "DELETE",
        }
    }
}

impl fmt::Display for Method {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A host pattern, normalised at load time.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HostPattern {
    /// Exact host, or for a wildcard the suffix including the leading dot (`.example.org`).
    host: String,
    wildcard: bool,
    port: Option<u16>,
    /// As the operator wrote it, for messages and `sp_inventory`.
    pub text: String,
}

impl HostPattern {
    pub fn parse(text: &str) -> Result<HostPattern, String> {
        let (host_part, port) = split_port(text)?;
        let (wildcard, bare) = match host_part.strip_prefix("*.") {
            Some(rest) => (true, rest),
            None => (false, host_part),
        };
        if bare.contains('*') {
            return Err(format!("{text:?}: a wildcard is only allowed as a leading \"*.\""));
        }
        let host = normalize_host(bare).ok_or_else(|| format!("{text:?} is not a valid host"))?;
        if wildcard && (host.starts_with('[') || host.parse::<std::net::Ipv4Addr>().is_ok()) {
            return Err(format!("{text:?}: a wildcard cannot apply to an IP address"));
        }
        let host = if wildcard { format!(".{host}") } else { host };
        Ok(HostPattern { host, wildcard, port, text: text.to_owned() })
    }

    /// `host` is normalised (as `url::Url::host_str` gives it, trailing dot removed);
    /// `port` is the effective port, `default_port` the scheme's.
    pub fn matches(&self, host: &str, port: u16, default_port: u16) -> bool {
        let port_ok = match self.port {
            Some(p) => p == port,
            None => port == default_port,
        };
        let host_ok = if self.wildcard {
            host.len() > self.host.len() && host.ends_with(&self.host)
        } else {
            host == self.host
        };
        port_ok && host_ok
    }

    pub fn is_exact(&self) -> bool {
        !self.wildcard
    }
}

fn split_port(text: &str) -> Result<(&str, Option<u16>), String> {
    let bad_port = || format!("{text:?}: the port must be a number from 1 to 65535");
    if let Some(rest) = text.strip_prefix('[') {
        let (inside, after) = rest.split_once(']').ok_or_else(|| format!("{text:?}: unclosed '['"))?;
        let host = &text[..inside.len() + 2];
        return match after {
            "" => Ok((host, None)),
            p => match p.strip_prefix(':').and_then(|p| p.parse::<u16>().ok()) {
                Some(port) if port > 0 => Ok((host, Some(port))),
                _ => Err(bad_port()),
            },
        };
    }
    match text.rsplit_once(':') {
        None => Ok((text, None)),
        Some((host, p)) => match p.parse::<u16>() {
            Ok(port) if port > 0 && !host.contains(':') => Ok((host, Some(port))),
            _ => Err(bad_port()),
        },
    }
}

/// Normalises a host the way request URLs are normalised, so both sides compare equal.
pub fn normalize_host(host: &str) -> Option<String> {
    if host.is_empty() || host.bytes().any(|b| !(b.is_ascii_alphanumeric() || b"-.[]:_".contains(&b)) && b.is_ascii()) {
        return None;
    }
    let url = url::Url::parse(&format!("http://{host}/")).ok()?;
    let h = url.host_str()?;
    Some(h.strip_suffix('.').unwrap_or(h).to_owned())
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PathPattern {
    Exact(String),
    /// `/v1/*` is stored as `/v1`: matches `/v1` and anything starting `/v1/`.
    Prefix(String),
}

impl PathPattern {
    pub fn parse(text: &str) -> Result<PathPattern, String> {
        if !text.starts_with('/') {
            return Err(format!("{text:?} must start with '/'"));
        }
        let body = text.strip_suffix("/*");
        let check = body.unwrap_or(text);
        if check.contains('*') {
            return Err(format!("{text:?}: '*' is only allowed as a final \"/*\""));
        }
        if check.split('/').any(|seg| seg == "." || seg == "..") || check.contains('%') || check.contains('?') || check.contains('#') {
            return Err(format!("{text:?}: write the plain decoded path, without '.', '..', '%', '?' or '#'"));
        }
        Ok(match body {
            Some(prefix) => PathPattern::Prefix(prefix.to_owned()),
            None => PathPattern::Exact(text.to_owned()),
        })
    }

    pub fn matches(&self, path: &str) -> bool {
        match self {
            PathPattern::Exact(p) => p == path,
            PathPattern::Prefix(p) => {
                path == p || (path.starts_with(p.as_str()) && path[p.len()..].starts_with('/'))
            }
        }
    }

    pub fn text(&self) -> String {
        match self {
            PathPattern::Exact(p) => p.clone(),
            PathPattern::Prefix(p) => format!("{p}/*"),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SecretSource {
    /// An owner-only file.
    File(PathBuf),
    /// An environment variable of the `sp` process.
    Env(String),
    /// A systemd credential: `$CREDENTIALS_DIRECTORY/<name>` (`LoadCredential=`,
    /// `LoadCredentialEncrypted=`, `SetCredential=`), read like a file.
    Systemd(String),
    /// A command's stdout (argv, no shell), e.g. `pass show x`, `op read ...`,
    /// `vault kv get -field=token ...`.
    Command { argv: Vec<String>, timeout: Duration },
}

impl SecretSource {
    /// For `sp check` and logs: where, never what.
    pub fn describe(&self) -> String {
        match self {
            SecretSource::File(p) => format!("file {}", p.display()),
            SecretSource::Env(v) => format!("env {v}"),
            SecretSource::Systemd(n) => format!("systemd credential {n}"),
            SecretSource::Command { argv, .. } => format!("command {}", argv[0]),
        }
    }
}

pub const DEFAULT_COMMAND_TIMEOUT_S: u64 = 10;
pub const MAX_COMMAND_TIMEOUT_S: u64 = 300;

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Injection {
    /// `Authorization: Bearer <secret>`
    Bearer,
    /// `Authorization: Basic base64(<secret>)`, the secret being `user:password`.
    Basic,
    /// `<name>: <format with {secret} replaced>`
    Header { name: String, format: String },
    /// `?<name>=<secret>` appended to the query (percent-encoded).
    Query { name: String },
    /// AWS Signature Version 4 (issue #13, `sigv4.rs`).
    AwsSigV4(crate::sigv4::SigV4Config),
    /// OAuth2 client credentials, sent as `Authorization: Bearer` (issue #13, `oauth2.rs`).
    OAuth2(crate::oauth2::TokenRequest),
}

impl Injection {
    /// The header this injection sets, lowercase; `None` for query injection.
    pub fn header_name(&self) -> Option<String> {
        match self {
            Injection::Bearer | Injection::Basic | Injection::OAuth2(_) => Some("authorization".into()),
            Injection::Header { name, .. } => Some(name.to_ascii_lowercase()),
            Injection::Query { .. } | Injection::AwsSigV4(_) => None,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Credential {
    pub name: String,
    pub source: SecretSource,
    pub inject: Injection,
    pub hosts: Vec<HostPattern>,
    pub paths: Vec<PathPattern>,
    /// Methods the credential may be used with; `None`: any the allow rules permit.
    pub methods: Option<Vec<Method>>,
    /// What to do when a response echoes this credential's secret in any spelling.
    pub on_echo: OnEcho,
}

/// `on_echo` of a credential (issue 8): replace the echo, or withhold what carried it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum OnEcho {
    /// Every spelling found is replaced by `[REDACTED:<name>]` (the default).
    #[default]
    Redact,
    /// A response body (or the headers) carrying any spelling is withheld whole.
    Withhold,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AllowRule {
    pub index: usize,
    pub hosts: Vec<HostPattern>,
    pub methods: Vec<Method>,
    pub paths: Vec<PathPattern>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HttpPolicy {
    pub allow: Vec<AllowRule>,
    pub timeout: Duration,
    pub max_response_bytes: u64,
    pub max_request_body_bytes: u64,
    /// Hops an uncredentialed request may follow (same origin only, each re-authorized).
    pub max_redirects: u32,
    /// Refuse every `http://` URL.
    pub https_only: bool,
    /// Private CA roots (DER), replacing the built-in Mozilla roots when set.
    pub ca_certs: Option<CaBundle>,
}

/// Certificates loaded from `http.ca_file` at startup.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CaBundle {
    pub path: PathBuf,
    pub der: Vec<Vec<u8>>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Policy {
    /// Where it came from; `None` for the built-in deny-everything policy.
    pub origin: Option<PathBuf>,
    /// Sorted by name: "the first bound credential" means the first by name.
    pub credentials: BTreeMap<String, Credential>,
    pub http: HttpPolicy,
    /// `ssh_exec` hosts and host-key handling (issue #4, `ssh/policy.rs`).
    pub ssh: crate::ssh::SshPolicy,
    /// The `audit` section (issue #5, `audit.rs`).
    pub audit: crate::audit::AuditPolicy,
    /// `mode`, `approval` and the `approve` flags (issue #5, `approve.rs`).
    pub approval: crate::approve::ApprovalPolicy,
}

impl Policy {
    /// The policy in force when no file is found: nothing is allowed.
    pub fn deny_all() -> Policy {
        Policy {
            origin: None,
            credentials: BTreeMap::new(),
            http: HttpPolicy {
                allow: Vec::new(),
                timeout: Duration::from_secs(DEFAULT_TIMEOUT_S),
                max_response_bytes: DEFAULT_MAX_RESPONSE_BYTES,
                max_request_body_bytes: DEFAULT_MAX_REQUEST_BODY_BYTES,
                max_redirects: DEFAULT_MAX_REDIRECTS,
                https_only: false,
                ca_certs: None,
            },
            ssh: crate::ssh::SshPolicy::default(),
            audit: crate::audit::AuditPolicy::default(),
            approval: crate::approve::ApprovalPolicy::default(),
        }
    }

    /// Reads the file with the checks of [`trusted_bytes`], then parses it.
    pub fn load(path: &Path) -> Result<Policy, PolicyError> {
        let bytes = trusted_bytes(path)?;
        let text = String::from_utf8(bytes).map_err(|_| PolicyError { file: path.to_owned(), field: String::new(), message: "not UTF-8".into() })?;
        Policy::from_text(&text, path)
    }

    /// Parses and validates policy text; `origin` names it in errors.
    pub fn from_text(text: &str, origin: &Path) -> Result<Policy, PolicyError> {
        let error = |field: String, message: String| PolicyError { file: origin.to_owned(), field, message };
        let value = json::parse(text).map_err(|e| error(String::new(), e.to_string()))?;
        let mut policy = parse(&value).map_err(|(field, message)| error(field, message))?;
        policy.origin = Some(origin.to_owned());
        Ok(policy)
    }
}

/// Largest policy file read.
pub const MAX_POLICY_BYTES: u64 = 1024 * 1024;

/// The policy's bytes, if nobody but root and the user `sp` runs as could have written
/// them (issue 8 point 10, like OpenSSH's `StrictModes`): the file is a regular file (a
/// FIFO or device is refused without waiting, point 7) owned by root or the effective
/// user and not writable by group or others; the directory holding it is owned by one
/// of them and not writable by group or others (sticky or not); directories above may be
/// writable only with the sticky bit (`/tmp`). A symbolic link is followed, and both the
/// link's directories and the target's are checked: whoever can change the link chooses
/// the policy. Every refusal names the file or directory and the fix.
pub fn trusted_bytes(path: &Path) -> Result<Vec<u8>, PolicyError> {
    use crate::sys::{self, SysError};
    let whole = |message: String| PolicyError { file: path.to_owned(), field: String::new(), message };
    let dir_refusal = |bad: sys::UnsafeDir| {
        let d = bad.dir.display();
        let fix = match bad.why {
            SysError::TooOpen { .. } => format!("chmod go-w {d}, or move the policy to a private directory"),
            SysError::WrongOwner { .. } => format!("chown root {d} (or the user sp runs as), or move the policy"),
            _ => "check the path".into(),
        };
        whole(format!("directory {d} {}; refused, since whoever can write it can replace the policy (fix: {fix})", bad.why))
    };
    sys::check_dirs(path).map_err(dir_refusal)?;
    let target = std::fs::canonicalize(path).map_err(|e| whole(format!("cannot read: {}", io_reason(&e))))?;
    if target != std::path::absolute(path).unwrap_or_else(|_| path.to_owned()) {
        sys::check_dirs(&target).map_err(dir_refusal)?;
    }
    let rules = sys::Rules::owned(0o022, MAX_POLICY_BYTES);
    let bytes = sys::read_within(&target, rules, sys::READ_TIMEOUT).map_err(|e| {
        let t = target.display();
        match e {
            SysError::TooOpen { .. } => whole(format!("{e}; refused, since others could rewrite the policy (fix: chmod go-w {t})")),
            SysError::WrongOwner { .. } => whole(format!("{e}; refused, since its owner could rewrite the policy (fix: chown root {t}, or to the user sp runs as)")),
            SysError::Missing | SysError::Denied | SysError::Io { .. } => whole(format!("cannot read: {e}")),
            e => whole(e.to_string()),
        }
    })?;
    Ok(bytes.to_vec())
}

pub fn io_reason(e: &std::io::Error) -> String {
    match e.kind() {
        std::io::ErrorKind::NotFound => "no such file".into(),
        std::io::ErrorKind::PermissionDenied => "permission denied".into(),
        k => k.to_string(),
    }
}

/// A validation error naming the file and the field.
#[derive(Debug, PartialEq, Eq)]
pub struct PolicyError {
    pub file: PathBuf,
    pub field: String,
    pub message: String,
}

impl fmt::Display for PolicyError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.field.is_empty() {
            write!(f, "{}: {}", self.file.display(), self.message)
        } else {
            write!(f, "{}: {}: {}", self.file.display(), self.field, self.message)
        }
    }
}

fn hosts(v: &Value, field: &str) -> Check<Vec<HostPattern>> {
    list(v, field)?
        .iter()
        .enumerate()
        .map(|(i, h)| {
            let f = format!("{field}[{i}]");
            HostPattern::parse(string(h, &f)?).map_err(|m| (f, m))
        })
        .collect()
}

fn paths(v: Option<&Value>, field: &str) -> Check<Vec<PathPattern>> {
    let Some(v) = v else {
        return Ok(vec![PathPattern::Prefix(String::new())]);
    };
    list(v, field)?
        .iter()
        .enumerate()
        .map(|(i, p)| {
            let f = format!("{field}[{i}]");
            PathPattern::parse(string(p, &f)?).map_err(|m| (f, m))
        })
        .collect()
}

/// An HTTP header field name: an RFC 9110 token.
pub fn is_token(s: &str) -> bool {
    !s.is_empty() && s.bytes().all(|b| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b))
}

/// Credential names: what the agent uses to pick one. Kept plain so they are safe in
/// messages, logs and the journal.
pub fn is_name(s: &str) -> bool {
    (1..=64).contains(&s.len()) && s.bytes().all(|b| b.is_ascii_alphanumeric() || b"_.-".contains(&b))
}

fn parse(root: &Value) -> Check<Policy> {
    // Issue #5: `mode`, `approval` and `audit`; the `approve` flags are taken out of
    // credentials and SSH hosts here, so their own parsers below never see them.
    object(root, "", &["credentials", "http", "ssh", "audit", "approval", "mode"])?;
    let (stripped, approval) = crate::approve::parse_policy(root)?;
    let audit = crate::audit::parse_policy(root.get("audit"))?;
    let root = &stripped;
    let top = object(root, "", &["credentials", "http", "ssh", "audit", "approval", "mode"])?;
    let mut credentials = BTreeMap::new();
    if let Some(c) = top.get("credentials") {
        let Value::Object(defs) = c else {
            return err("credentials", "must be an object mapping names to credentials");
        };
        for (name, def) in defs {
            let field = format!("credentials.{name}");
            if !is_name(name) {
                return err(&field, "a credential name is 1-64 letters, digits, '_', '.' or '-'");
            }
            credentials.insert(name.clone(), credential(name, def, &field)?);
        }
    }
    let http = match top.get("http") {
        Some(h) => http(h)?,
        None => Policy::deny_all().http,
    };
    let ssh = match top.get("ssh") {
        Some(v) => crate::ssh::policy::parse(v)?,
        None => crate::ssh::SshPolicy::default(),
    };
    Ok(Policy { origin: None, credentials, http, ssh, audit, approval })
}

fn credential(name: &str, def: &Value, field: &str) -> Check<Credential> {
    let map = object(def, field, &["source", "inject", "hosts", "paths", "methods", "on_echo"])?;
    let source_field = format!("{field}.source");
    let source = source(map.get("source").ok_or_else(|| (source_field.clone(), "is required".to_owned()))?, &source_field)?;
    let inject_field = format!("{field}.inject");
    let inject = injection(map.get("inject").ok_or_else(|| (inject_field.clone(), "is required".to_owned()))?, &inject_field)?;
    let hosts_field = format!("{field}.hosts");
    let hosts = hosts(map.get("hosts").ok_or_else(|| (hosts_field.clone(), "is required: a credential is bound to hosts".to_owned()))?, &hosts_field)?;
    let paths = paths(map.get("paths"), &format!("{field}.paths"))?;
    let methods = map.get("methods").map(|m| methods(m, &format!("{field}.methods"))).transpose()?;
    let on_echo = match map.get("on_echo") {
        None => OnEcho::Redact,
        Some(v) => match v.as_str() {
            Some("redact") => OnEcho::Redact,
            Some("withhold") => OnEcho::Withhold,
            _ => return err(&format!("{field}.on_echo"), "must be \"redact\" or \"withhold\""),
        },
    };
    Ok(Credential { name: name.to_owned(), source, inject, hosts, paths, methods, on_echo })
}

const SOURCES: &str = "exactly one of {\"file\": PATH}, {\"env\": VAR}, {\"systemd\": NAME} or {\"command\": [ARGV...]}";

fn source(v: &Value, field: &str) -> Check<SecretSource> {
    let map = object(v, field, &["file", "env", "systemd", "command", "timeout_s"])?;
    let kinds: Vec<&str> = ["file", "env", "systemd", "command"].into_iter().filter(|k| map.contains_key(*k)).collect();
    let [kind] = kinds[..] else {
        return err(field, format!("must be {SOURCES}"));
    };
    if kind != "command" && map.contains_key("timeout_s") {
        return err(&format!("{field}.timeout_s"), "only applies to a command source");
    }
    let sub = format!("{field}.{kind}");
    let value = &map[kind];
    Ok(match kind {
        "file" => {
            let p = string(value, &sub)?;
            if !p.starts_with('/') {
                return err(&sub, "must be an absolute path");
            }
            SecretSource::File(PathBuf::from(p))
        }
        "env" => {
            let var = string(value, &sub)?;
            if var.contains('=') || var.contains('\0') {
                return err(&sub, "is not a valid variable name");
            }
            SecretSource::Env(var.to_owned())
        }
        "systemd" => {
            let n = string(value, &sub)?;
            if n.contains('/') || n == "." || n == ".." || n.contains('\0') {
                return err(&sub, "must be a credential name (a file name under $CREDENTIALS_DIRECTORY)");
            }
            SecretSource::Systemd(n.to_owned())
        }
        _ => {
            let argv: Vec<String> = list(value, &sub)?
                .iter()
                .enumerate()
                .map(|(i, a)| match a {
                    Value::String(s) if !s.contains('\0') => Ok(s.clone()),
                    _ => err(&format!("{sub}[{i}]"), "must be a string"),
                })
                .collect::<Check<_>>()?;
            if argv[0].is_empty() {
                return err(&format!("{sub}[0]"), "must name a program");
            }
            let timeout_s = match map.get("timeout_s") {
                None => DEFAULT_COMMAND_TIMEOUT_S,
                Some(t) => int(t, &format!("{field}.timeout_s"), 1, MAX_COMMAND_TIMEOUT_S)?,
            };
            SecretSource::Command { argv, timeout: Duration::from_secs(timeout_s) }
        }
    })
}

fn injection(v: &Value, field: &str) -> Check<Injection> {
    let map = object(v, field, &["bearer", "basic", "header", "query", "aws_sigv4", "oauth2"])?;
    let (kind, value) = match map.iter().next() {
        Some((k, v)) if map.len() == 1 => (k.as_str(), v),
        _ => return err(field, "must be exactly one of {\"bearer\": {}}, {\"basic\": {}}, {\"header\": {...}}, {\"query\": {...}}, {\"aws_sigv4\": {...}} or {\"oauth2\": {...}}"),
    };
    let sub = format!("{field}.{kind}");
    Ok(match kind {
        "bearer" => {
            object(value, &sub, &[])?;
            Injection::Bearer
        }
        "basic" => {
            object(value, &sub, &[])?;
            Injection::Basic
        }
        "aws_sigv4" => Injection::AwsSigV4(crate::sigv4::SigV4Config::from_policy(value).map_err(|e| e.at(&sub))?),
        "oauth2" => Injection::OAuth2(crate::oauth2::TokenRequest::from_policy(value).map_err(|e| e.at(&sub))?),
        "header" => {
            let hm = object(value, &sub, &["name", "format"])?;
            let hname = string(hm.get("name").unwrap_or(&Value::Null), &format!("{sub}.name"))?;
            if !is_token(hname) || hname.len() > 128 {
                return err(&format!("{sub}.name"), "must be a valid header name");
            }
            if crate::tools::is_hop_header(&hname.to_ascii_lowercase()) {
                return err(&format!("{sub}.name"), format!("{hname:?} cannot carry a credential"));
            }
            let format = match hm.get("format") {
                None => "{secret}".to_owned(),
                Some(f) => string(f, &format!("{sub}.format"))?.to_owned(),
            };
            if format.matches("{secret}").count() != 1 || format.chars().any(|c| c.is_control()) {
                return err(&format!("{sub}.format"), "must contain \"{secret}\" exactly once and no control characters");
            }
            Injection::Header { name: hname.to_owned(), format }
        }
        _ => {
            let qm = object(value, &sub, &["name"])?;
            let qname = string(qm.get("name").unwrap_or(&Value::Null), &format!("{sub}.name"))?;
            if qname.len() > 128 || !qname.bytes().all(|b| b.is_ascii_alphanumeric() || b"-._~".contains(&b)) {
                return err(&format!("{sub}.name"), "must be a plain parameter name (letters, digits, '-', '.', '_', '~')");
            }
            Injection::Query { name: qname.to_owned() }
        }
    })
}

fn methods(m: &Value, field: &str) -> Check<Vec<Method>> {
    let mut out = Vec::new();
    for (j, s) in list(m, field)?.iter().enumerate() {
        let f = format!("{field}[{j}]");
        let s = string(s, &f)?;
        if s == "*" {
            out.extend(Method::ALL);
            continue;
        }
        out.push(
            Method::parse(s)
                .ok_or_else(|| (f, format!("unknown method {s:?} (GET, HEAD, POST, PUT, PATCH, DELETE or \"*\")")))?,
        );
    }
    out.sort();
    out.dedup();
    Ok(out)
}

fn http(v: &Value) -> Check<HttpPolicy> {
    let map = object(
        v,
        "http",
        &["allow", "timeout_s", "max_response_bytes", "max_request_body_bytes", "max_redirects", "https_only", "ca_file"],
    )?;
    let mut allow = Vec::new();
    if let Some(a) = map.get("allow") {
        let Value::Array(rules) = a else {
            return err("http.allow", "must be an array of rules");
        };
        for (i, r) in rules.iter().enumerate() {
            let field = format!("http.allow[{i}]");
            let rm = object(r, &field, &["hosts", "methods", "paths"])?;
            let hosts_field = format!("{field}.hosts");
            let hosts = hosts(rm.get("hosts").ok_or_else(|| (hosts_field.clone(), "is required".to_owned()))?, &hosts_field)?;
            let methods = match rm.get("methods") {
                None => vec![Method::Get, Method::Head],
                Some(m) => methods(m, &format!("{field}.methods"))?,
            };
            let paths = paths(rm.get("paths"), &format!("{field}.paths"))?;
            allow.push(AllowRule { index: i, hosts, methods, paths });
        }
    }
    let timeout_s = match map.get("timeout_s") {
        None => DEFAULT_TIMEOUT_S,
        Some(t) => int(t, "http.timeout_s", 1, MAX_TIMEOUT_S)?,
    };
    let max_response_bytes = match map.get("max_response_bytes") {
        None => DEFAULT_MAX_RESPONSE_BYTES,
        Some(t) => int(t, "http.max_response_bytes", 1, MAX_RESPONSE_BYTES_CEILING)?,
    };
    let max_request_body_bytes = match map.get("max_request_body_bytes") {
        None => DEFAULT_MAX_REQUEST_BODY_BYTES,
        Some(t) => int(t, "http.max_request_body_bytes", 0, MAX_REQUEST_BODY_BYTES_CEILING)?,
    };
    let max_redirects = match map.get("max_redirects") {
        None => DEFAULT_MAX_REDIRECTS,
        Some(t) => int(t, "http.max_redirects", 0, MAX_REDIRECTS_CEILING)? as u32,
    };
    let https_only = match map.get("https_only") {
        None => false,
        Some(Value::Bool(b)) => *b,
        Some(_) => return err("http.https_only", "must be true or false"),
    };
    let ca_certs = match map.get("ca_file") {
        None => None,
        Some(f) => Some(ca_bundle(string(f, "http.ca_file")?).map_err(|m| ("http.ca_file".to_owned(), m))?),
    };
    Ok(HttpPolicy {
        allow,
        timeout: Duration::from_secs(timeout_s),
        max_response_bytes,
        max_request_body_bytes,
        max_redirects,
        https_only,
        ca_certs,
    })
}

/// Reads a PEM bundle at startup, so a bad `ca_file` stops `sp` before it serves.
fn ca_bundle(path: &str) -> Result<CaBundle, String> {
    if !path.starts_with('/') {
        return Err("must be an absolute path".into());
    }
    // Issue 8 point 7: a FIFO or device is refused at once, never waited on. Public
    // certificates: any owner, any mode, and a symbolic link is followed (distributions
    // link their bundles), then the target is opened as `sys` says.
    let rules = crate::sys::Rules::any(4 * 1024 * 1024).following();
    let pem = crate::sys::read_within(Path::new(path), rules, crate::sys::READ_TIMEOUT).map_err(|e| format!("cannot read {path}: {e}"))?;
    let mut der = Vec::new();
    for item in ureq::tls::parse_pem(&pem) {
        match item {
            Ok(ureq::tls::PemItem::Certificate(c)) => der.push(c.der().to_vec()),
            Ok(_) => {}
            Err(_) => return Err(format!("{path} is not a valid PEM file")),
        }
    }
    if der.is_empty() {
        return Err(format!("{path} holds no certificate"));
    }
    Ok(CaBundle { path: PathBuf::from(path), der })
}

/// Where `sp` looks for a policy when `--config` is not given (issue #2):
/// `$SP_CONFIG`, then `$XDG_CONFIG_HOME/sallyport/policy.json` (or
/// `$HOME/.config/sallyport/policy.json`), then `/etc/sallyport/policy.json`.
#[derive(Debug, PartialEq, Eq)]
pub enum Lookup {
    /// Named explicitly (`--config` or `$SP_CONFIG`): it must load.
    Explicit(PathBuf),
    /// Found at a default location: it must load.
    Found(PathBuf),
    /// Nothing found anywhere: deny everything. Carries the places searched.
    None(Vec<PathBuf>),
}

pub fn lookup(
    flag: Option<PathBuf>,
    env: impl Fn(&str) -> Option<String>,
    exists: impl Fn(&Path) -> bool,
) -> Lookup {
    if let Some(p) = flag {
        return Lookup::Explicit(p);
    }
    if let Some(p) = env("SP_CONFIG").filter(|s| !s.is_empty()) {
        return Lookup::Explicit(PathBuf::from(p));
    }
    let mut candidates = Vec::new();
    match env("XDG_CONFIG_HOME").filter(|s| s.starts_with('/')) {
        Some(x) => candidates.push(PathBuf::from(x).join("sallyport/policy.json")),
        None => {
            if let Some(h) = env("HOME").filter(|s| s.starts_with('/')) {
                candidates.push(PathBuf::from(h).join(".config/sallyport/policy.json"));
            }
        }
    }
    candidates.push(PathBuf::from("/etc/sallyport/policy.json"));
    match candidates.iter().find(|p| exists(p)) {
        Some(p) => Lookup::Found(p.clone()),
        None => Lookup::None(candidates),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn parse_err(v: Value) -> (String, String) {
        parse(&v).unwrap_err()
    }

    #[test]
    fn full_example_parses() {
        let p = parse(&json!({
            "credentials": {
                "gh": {"source": {"file": "/run/secrets/gh"}, "inject": {"bearer": {}},
                       "hosts": ["api.github.com"], "paths": ["/repos/*"]},
                "k": {"source": {"env": "K"}, "inject": {"header": {"name": "X-Api-Key", "format": "Token {secret}"}},
                      "hosts": ["*.example.org", "127.0.0.1:8080"]}
            },
            "http": {"allow": [{"hosts": ["api.github.com"], "methods": ["GET", "POST"], "paths": ["/repos/*"]}],
                     "timeout_s": 5, "max_response_bytes": 1000}
        }))
        .unwrap();
        assert_eq!(p.credentials.len(), 2);
        assert_eq!(p.http.timeout, Duration::from_secs(5));
        assert_eq!(p.http.allow[0].methods, vec![Method::Get, Method::Post]);
        assert_eq!(p.credentials["k"].paths, vec![PathPattern::Prefix(String::new())]);
        let p = parse(&json!({"credentials": {
            "sd": {"source": {"systemd": "api-token"}, "inject": {"basic": {}}, "hosts": ["a.com"], "methods": ["GET"]},
            "cmd": {"source": {"command": ["pass", "show", "api"], "timeout_s": 20}, "inject": {"query": {"name": "api_key"}}, "hosts": ["a.com"]}
        }}))
        .unwrap();
        assert_eq!(p.credentials["sd"].source, SecretSource::Systemd("api-token".into()));
        assert_eq!(p.credentials["sd"].methods, Some(vec![Method::Get]));
        assert_eq!(
            p.credentials["cmd"].source,
            SecretSource::Command { argv: vec!["pass".into(), "show".into(), "api".into()], timeout: Duration::from_secs(20) }
        );
        assert_eq!(p.credentials["cmd"].inject, Injection::Query { name: "api_key".into() });
    }

    #[test]
    fn on_echo_defaults_to_redact_and_accepts_withhold() {
        let c = |e: Option<&str>| {
            let mut def = json!({"source": {"env": "A"}, "inject": {"bearer": {}}, "hosts": ["a"]});
            if let Some(e) = e {
                def["on_echo"] = json!(e);
            }
            parse(&json!({"credentials": {"x": def}})).map(|p| p.credentials["x"].on_echo)
        };
        assert_eq!(c(None), Ok(OnEcho::Redact));
        assert_eq!(c(Some("redact")), Ok(OnEcho::Redact));
        assert_eq!(c(Some("withhold")), Ok(OnEcho::Withhold));
        let (field, why) = c(Some("Withhold")).unwrap_err();
        assert_eq!((field.as_str(), why.as_str()), ("credentials.x.on_echo", "must be \"redact\" or \"withhold\""));
    }

    #[test]
    fn errors_name_the_field() {
        let cases = vec![
            (json!({"credential": {}}), "credential"),
            (json!({"http": {"allow": [{"hosts": ["a.com"], "methods": ["FETCH"]}]}}), "http.allow[0].methods[0]"),
            (json!({"http": {"allow": [{"hosts": []}]}}), "http.allow[0].hosts"),
            (json!({"http": {"allow": [{"hosts": ["a.*.com"]}]}}), "http.allow[0].hosts[0]"),
            (json!({"http": {"allow": [{"hosts": ["a.com"], "paths": ["v1"]}]}}), "http.allow[0].paths[0]"),
            (json!({"http": {"allow": [{"hosts": ["a.com"], "paths": ["/v1/../x"]}]}}), "http.allow[0].paths[0]"),
            (json!({"http": {"timeout_s": 0}}), "http.timeout_s"),
            (json!({"http": {"max_response_bytes": 1_000_000_000u64}}), "http.max_response_bytes"),
            (json!({"http": {"allow": [{"hosts": ["a.com"], "method": ["GET"]}]}}), "http.allow[0].method"),
            (json!({"credentials": {"x": {"inject": {"bearer": {}}, "hosts": ["a"]}}}), "credentials.x.source"),
            (json!({"credentials": {"x": {"source": {"file": "rel"}, "inject": {"bearer": {}}, "hosts": ["a"]}}}), "credentials.x.source.file"),
            (json!({"credentials": {"x": {"source": {"file": "/a", "env": "B"}, "inject": {"bearer": {}}, "hosts": ["a"]}}}), "credentials.x.source"),
            (json!({"credentials": {"x": {"source": {"env": "B"}, "inject": {"header": {"name": "X", "format": "no placeholder"}}, "hosts": ["a"]}}}), "credentials.x.inject.header.format"),
            (json!({"credentials": {"x": {"source": {"env": "B"}, "inject": {"header": {"name": "Host"}}, "hosts": ["a"]}}}), "credentials.x.inject.header.name"),
            (json!({"credentials": {"x": {"source": {"env": "B"}, "inject": {"bearer": {}}}}}), "credentials.x.hosts"),
            (json!({"credentials": {"bad name": {}}}), "credentials.bad name"),
            (json!({"http": {"allow": [{"hosts": ["a.com:0"]}]}}), "http.allow[0].hosts[0]"),
            (json!({"http": {"allow": [{"hosts": ["*.10.0.0.1"]}]}}), "http.allow[0].hosts[0]"),
            (json!({"http": {"max_request_body_bytes": -1}}), "http.max_request_body_bytes"),
            (json!({"http": {"max_redirects": 21}}), "http.max_redirects"),
            (json!({"http": {"https_only": "yes"}}), "http.https_only"),
            (json!({"http": {"ca_file": "/nonexistent/ca.pem"}}), "http.ca_file"),
            (json!({"http": {"ca_file": "/etc/hostname"}}), "http.ca_file"),
            (json!({"http": {"ca_file": "relative.pem"}}), "http.ca_file"),
            (json!({"credentials": {"x": {"source": {"systemd": "../etc/shadow"}, "inject": {"bearer": {}}, "hosts": ["a"]}}}), "credentials.x.source.systemd"),
            (json!({"credentials": {"x": {"source": {"command": []}, "inject": {"bearer": {}}, "hosts": ["a"]}}}), "credentials.x.source.command"),
            (json!({"credentials": {"x": {"source": {"command": ["pass", 1]}, "inject": {"bearer": {}}, "hosts": ["a"]}}}), "credentials.x.source.command[1]"),
            (json!({"credentials": {"x": {"source": {"command": ["pass"], "timeout_s": 0}, "inject": {"bearer": {}}, "hosts": ["a"]}}}), "credentials.x.source.timeout_s"),
            (json!({"credentials": {"x": {"source": {"env": "A", "timeout_s": 5}, "inject": {"bearer": {}}, "hosts": ["a"]}}}), "credentials.x.source.timeout_s"),
            (json!({"credentials": {"x": {"source": {"env": "A"}, "inject": {"query": {"name": "a&b"}}, "hosts": ["a"]}}}), "credentials.x.inject.query.name"),
            (json!({"credentials": {"x": {"source": {"env": "A"}, "inject": {"basic": {"user": "u"}}, "hosts": ["a"]}}}), "credentials.x.inject.basic.user"),
            (json!({"credentials": {"x": {"source": {"env": "A"}, "inject": {"bearer": {}, "basic": {}}, "hosts": ["a"]}}}), "credentials.x.inject"),
            (json!({"credentials": {"x": {"source": {"env": "A"}, "inject": {"bearer": {}}, "hosts": ["a"], "methods": ["GET", "FETCH"]}}}), "credentials.x.methods[1]"),
            (json!({"credentials": {"x": {"source": {"env": "A"}, "inject": {"bearer": {}}, "hosts": ["a"], "on_echo": "drop"}}}), "credentials.x.on_echo"),
            (json!({"credentials": {"x": {"source": {"env": "A"}, "inject": {"bearer": {}}, "hosts": ["a"], "on_echo": true}}}), "credentials.x.on_echo"),
        ];
        for (v, field) in cases {
            let shown = v.to_string();
            assert_eq!(parse_err(v).0, field, "{shown}");
        }
    }

    #[test]
    fn host_patterns() {
        let exact = HostPattern::parse("API.Example.com").unwrap();
        assert!(exact.matches("api.example.com", 443, 443));
        assert!(!exact.matches("api.example.com", 8443, 443));
        assert!(!exact.matches("x.api.example.com", 443, 443));
        let wild = HostPattern::parse("*.example.org").unwrap();
        assert!(wild.matches("a.example.org", 80, 80));
        assert!(wild.matches("a.b.example.org", 80, 80));
        assert!(!wild.matches("example.org", 80, 80));
        assert!(!wild.matches("badexample.org", 80, 80));
        let port = HostPattern::parse("127.0.0.1:8080").unwrap();
        assert!(port.matches("127.0.0.1", 8080, 80));
        assert!(!port.matches("127.0.0.1", 80, 80));
        let v6 = HostPattern::parse("[::1]:9000").unwrap();
        assert!(v6.matches("[::1]", 9000, 80));
        // numeric spellings normalise like URLs do
        let num = HostPattern::parse("2130706433").unwrap();
        assert!(num.matches("127.0.0.1", 80, 80));
        assert!(HostPattern::parse("").is_err());
        assert!(HostPattern::parse("a b").is_err());
        assert!(HostPattern::parse("a/b").is_err());
        assert!(HostPattern::parse("a:b").is_err());
    }

    #[test]
    fn path_patterns() {
        let p = PathPattern::parse("/v1/*").unwrap();
        assert!(p.matches("/v1"));
        assert!(p.matches("/v1/"));
        assert!(p.matches("/v1/a/b"));
        assert!(!p.matches("/v10"));
        assert!(!p.matches("/v"));
        let all = PathPattern::parse("/*").unwrap();
        assert!(all.matches("/"));
        assert!(all.matches("/anything"));
        let exact = PathPattern::parse("/status").unwrap();
        assert!(exact.matches("/status"));
        assert!(!exact.matches("/status/"));
        assert!(PathPattern::parse("/a*").is_err());
        assert!(PathPattern::parse("/a/%2e").is_err());
    }

    #[test]
    fn lookup_order() {
        let env = |pairs: &'static [(&'static str, &'static str)]| {
            move |k: &str| pairs.iter().find(|(n, _)| *n == k).map(|(_, v)| v.to_string())
        };
        let none = |_: &Path| false;
        assert_eq!(lookup(Some("/x".into()), env(&[("SP_CONFIG", "/y")]), none), Lookup::Explicit("/x".into()));
        assert_eq!(lookup(None, env(&[("SP_CONFIG", "/y")]), none), Lookup::Explicit("/y".into()));
        let all = |_: &Path| true;
        assert_eq!(
            lookup(None, env(&[("XDG_CONFIG_HOME", "/xdg"), ("HOME", "/h")]), all),
            Lookup::Found("/xdg/sallyport/policy.json".into())
        );
        assert_eq!(lookup(None, env(&[("HOME", "/h")]), all), Lookup::Found("/h/.config/sallyport/policy.json".into()));
        let etc_only = |p: &Path| p == Path::new("/etc/sallyport/policy.json");
        assert_eq!(lookup(None, env(&[("HOME", "/h")]), etc_only), Lookup::Found("/etc/sallyport/policy.json".into()));
        assert!(matches!(lookup(None, env(&[]), none), Lookup::None(c) if c.len() == 1));
    }
}
