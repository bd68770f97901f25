//! The operator's policy: one JSON file, validated whole at startup, deny by default.
//!
//! The format is documented in `sp-policy(5)`; this module is its reference. Validation
//! is hand-written so every error names the field it is about
//! (`http.allow[0].methods[1]: unknown method "FETCH"`), unknown fields are refused at
//! every level (a typo must not silently widen or narrow access), and the file goes
//! through the same strict JSON parser as the protocol (duplicate keys refused).
//!
//! One submodule per section, each with its types and its parser: [`credentials`],
//! [`http`](mod@http) (and the host, path and method patterns), [`ssh`] (and the command
//! patterns of [`commands`]), [`audit`], [`approval`] (`mode`, `approval`; the
//! `approve` flag is an ordinary field of a credential or an SSH host), [`upstreams`]
//! (other MCP servers and their tool filters). [`fields`] holds
//! the checks they share.
//!
//! This module is a leaf: it imports nothing of the crate above it (only `sys` for the
//! file checks, `json` for the strict parser and `escape` for its error messages), so
//! every stage can depend on it and it on none of them.

pub(crate) mod approval;
pub(crate) mod audit;
pub(crate) mod commands;
pub(crate) mod credentials;
pub(crate) mod fields;
pub(crate) mod schemes;
pub(crate) mod http;
pub(crate) mod limits;
pub(crate) mod ssh;
mod sandbox;
pub(crate) mod upstreams;

use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::Value;

pub use credentials::*;
pub(crate) use http::*;

pub(crate) use fields::is_name;
use fields::{err, object, Check};
use crate::json;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Policy {
    /// Where it came from; `None` for the built-in deny-everything policy.
    pub origin: Option<PathBuf>,
    /// Sorted by name: "the first bound credential" means the first by name.
    pub credentials: BTreeMap<String, Credential>,
    pub http: HttpPolicy,
    /// `ssh_exec` hosts and host-key handling (`policy/ssh.rs`).
    pub ssh: ssh::SshPolicy,
    /// The `audit` section (`policy/audit.rs`).
    pub audit: audit::AuditPolicy,
    /// `mode` and `approval` (`policy/approval.rs`).
    pub approval: approval::ApprovalPolicy,
    /// Other MCP servers behind the gate, by name (`policy/upstreams.rs`).
    pub upstreams: BTreeMap<String, upstreams::Upstream>,
    /// Rate limits over every session of the user (`policy/limits.rs`).
    pub limits: limits::LimitsPolicy,
    /// The text it was parsed from, for [`Policy::hash`]; empty for the built-in
    /// deny-everything policy.
    text: TextHash,
}

/// The policy's hash: lower-case hex SHA-256 of the file's bytes, exactly as read (a
/// changed byte, even in white space, is another policy).
pub(crate) fn hash(bytes: &[u8]) -> String {
    use sha2::{Digest, Sha256};
    Sha256::digest(bytes).iter().map(|b| format!("{b:02x}")).collect()
}

/// A policy's text and its [`hash`], made at the first [`Policy::hash`]: only approval
/// grants use it, so a session that never asks pays nothing for it before its first
/// answer (the SHA-256 implementation's CPU feature probe is two `cpuid`s, which a
/// virtual machine may trap; bench/cold-start-profile.md). Equal when the texts are.
#[derive(Clone, Default)]
struct TextHash {
    text: Option<std::sync::Arc<str>>,
    hex: std::sync::OnceLock<String>,
}

impl TextHash {
    fn of(text: &str) -> TextHash {
        TextHash { text: Some(text.into()), hex: std::sync::OnceLock::new() }
    }
}

impl PartialEq for TextHash {
    fn eq(&self, other: &TextHash) -> bool {
        self.text == other.text
    }
}

impl Eq for TextHash {}

impl fmt::Debug for TextHash {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let bytes = self.text.as_ref().map(|t| t.len());
        f.debug_struct("TextHash").field("bytes", &bytes).field("hash", &self.hex.get()).finish()
    }
}

impl Policy {
    /// [`hash`] of the text it was parsed from; `None` for the built-in deny-everything
    /// policy. Approval grants are bound to it: any edit of the file ends them all.
    pub fn hash(&self) -> Option<&str> {
        let text = self.text.text.as_deref()?;
        Some(self.text.hex.get_or_init(|| hash(text.as_bytes())))
    }

    /// Whether calls using this credential wait for approval (`"approve": true` or
    /// `"command"`).
    pub fn credential_needs_approval(&self, name: &str) -> bool {
        self.credentials.get(name).is_some_and(|c| c.approve.needed())
    }

    /// Whether calls to this SSH host wait for approval (`"approve": true` or `"command"`).
    pub fn ssh_host_needs_approval(&self, name: &str) -> bool {
        self.ssh.hosts.get(name).is_some_and(|h| h.approve.needed())
    }

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
            ssh: ssh::SshPolicy::default(),
            audit: audit::AuditPolicy::default(),
            approval: approval::ApprovalPolicy::default(),
            text: TextHash::default(),
            upstreams: BTreeMap::new(),
            limits: limits::LimitsPolicy::default(),
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
        policy.text = TextHash::of(text);
        Ok(policy)
    }
}

/// Largest policy file read.
pub(crate) const MAX_POLICY_BYTES: u64 = 1024 * 1024;

/// The policy's bytes, if nobody but root and the user `sp` runs as could have written
/// them (like OpenSSH's `StrictModes`): the file is a regular file (a
/// FIFO or device is refused without waiting, point 7) owned by root or the effective
/// user and not writable by group or others; the directory holding it is owned by one
/// of them and not writable by group or others (sticky or not); directories above may be
/// writable only with the sticky bit (`/tmp`). A symbolic link is followed, and both the
/// link's directories and the target's are checked: whoever can change the link chooses
/// the policy. Every refusal names the file or directory and the fix.
pub(crate) fn trusted_bytes(path: &Path) -> Result<Vec<u8>, PolicyError> {
    use crate::sys::{self, SysError};
    let whole = |message: String| PolicyError { file: path.to_owned(), field: String::new(), message };
    let dir_refusal = |bad: sys::UnsafeDir| {
        let d = bad.dir.display();
        let fix = match bad.why {
            // A shared sticky directory such as /tmp is meant to be writable by all:
            // `chmod go-w /tmp` would be bad advice (issue 32, section 1).
            SysError::TooOpen { mode, .. } if mode & 0o1000 != 0 => {
                format!(
                    "move the policy to a private directory, such as ~/.config/sallyport/ or /etc/sallyport/; {d} is shared by design, leave its mode alone"
                )
            }
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
    // On this thread, not `read_within`'s helper: at start-up there is no session to keep
    // answering, and the `stat`s above already ran here (a thread per start).
    let bytes = sys::read(&target, rules).map_err(|e| {
        let t = target.display();
        match e {
            SysError::TooOpen { .. } => whole(format!("{e}; refused, since others could rewrite the policy (fix: chmod go-w {t})")),
            SysError::WrongOwner { .. } => {
                whole(format!("{e}; refused, since its owner could rewrite the policy (fix: chown root {t}, or to the user sp runs as)"))
            }
            SysError::Missing | SysError::Denied | SysError::Io { .. } => whole(format!("cannot read: {e}")),
            e => whole(e.to_string()),
        }
    })?;
    Ok(bytes.to_vec())
}

pub(crate) use crate::sys::io_reason;

/// A validation error naming the file and the field.
#[derive(Debug, PartialEq, Eq)]
pub struct PolicyError {
    pub file: PathBuf,
    pub field: String,
    pub message: String,
}

/// Shown escaped (`escape.rs`): a field is built from the policy's own keys and a
/// message may quote its values, so a key holding ESC or U+202E must not drive the
/// terminal `sp check` prints to (`credentials.a\u{1b}[2J\u{202e}b: ...`).
impl fmt::Display for PolicyError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        use crate::escape::escape;
        let file = self.file.display().to_string();
        if self.field.is_empty() {
            write!(f, "{}: {}", escape(&file), escape(&self.message))
        } else {
            write!(f, "{}: {}: {}", escape(&file), escape(&self.field), escape(&self.message))
        }
    }
}

impl std::error::Error for PolicyError {}

fn parse(root: &Value) -> Check<Policy> {
    let top = object(root, "", &["credentials", "http", "ssh", "audit", "approval", "mode", "upstreams", "limits", "limits_state"])?;
    let approval = approval::parse(top.get("mode"), top.get("approval"))?;
    let audit = audit::parse(top.get("audit"))?;
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
        Some(v) => ssh::parse(v)?,
        None => ssh::SshPolicy::default(),
    };
    let upstreams = match top.get("upstreams") {
        Some(v) => upstreams::parse(v, &credentials)?,
        None => BTreeMap::new(),
    };
    let limits = limits::parse(top.get("limits"), top.get("limits_state"), &|c| credentials.contains_key(c), &|u| upstreams.contains_key(u))?;
    let policy = Policy { origin: None, credentials, http, ssh, audit, approval, upstreams, limits, text: TextHash::default() };
    // An `approve` flag in enforce mode needs someone to ask.
    // An `approve` flag in enforce mode needs someone to ask: the approver command, unless
    // `approval.via` is elicitation alone and the subject does not require the command.
    let by_command = |a: approval::Approve| a == approval::Approve::Command || (a.needed() && policy.approval.via.contains(&approval::Via::Command));
    let flagged = policy.credentials.values().filter(|c| by_command(c.approve)).map(|c| format!("credentials.{}.approve", c.name));
    let flagged = flagged.chain(policy.ssh.hosts.values().filter(|h| by_command(h.approve)).map(|h| format!("ssh.hosts.{}.approve", h.name)));
    let flagged = flagged.chain(policy.http.allow.iter().filter(|r| by_command(r.approve)).map(|r| format!("http.allow[{}].approve", r.index)));
    let mut flagged = flagged.chain(
        policy
            .upstreams
            .values()
            .filter(|u| !u.tools.approve.is_empty() && (u.approve_command_only || policy.approval.via.contains(&approval::Via::Command)))
            .map(|u| format!("upstreams.{}.tools.approve", u.name)),
    );
    if let (Some(field), None, approval::Mode::Enforce) = (flagged.next(), &policy.approval.command, policy.approval.mode) {
        return err(&field, "needs an approver: set approval.command (or \"mode\": \"observe\" while rolling out)");
    }
    Ok(policy)
}

/// Where `sp` looks for a policy when `--config` is not given:
/// `$SP_CONFIG`, then `$XDG_CONFIG_HOME/sallyport/policy.json` (or
/// `$HOME/.config/sallyport/policy.json`), then `/etc/sallyport/policy.json`.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Lookup {
    /// Named explicitly (`--config` or `$SP_CONFIG`): it must load.
    Explicit(PathBuf),
    /// Found at a default location: it must load.
    Found(PathBuf),
    /// Nothing found anywhere: deny everything. Carries the places searched.
    None(Vec<PathBuf>),
}

pub(crate) fn lookup(flag: Option<PathBuf>, env: impl Fn(&str) -> Option<String>, exists: impl Fn(&Path) -> bool) -> Lookup {
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
            (
                json!({"credentials": {"x": {"source": {"env": "B"}, "inject": {"header": {"name": "X", "format": "no placeholder"}}, "hosts": ["a"]}}}),
                "credentials.x.inject.header.format",
            ),
            (
                json!({"credentials": {"x": {"source": {"env": "B"}, "inject": {"header": {"name": "Host"}}, "hosts": ["a"]}}}),
                "credentials.x.inject.header.name",
            ),
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
            (
                json!({"credentials": {"x": {"source": {"systemd": "../etc/shadow"}, "inject": {"bearer": {}}, "hosts": ["a"]}}}),
                "credentials.x.source.systemd",
            ),
            (json!({"credentials": {"x": {"source": {"command": []}, "inject": {"bearer": {}}, "hosts": ["a"]}}}), "credentials.x.source.command"),
            (
                json!({"credentials": {"x": {"source": {"command": ["pass", 1]}, "inject": {"bearer": {}}, "hosts": ["a"]}}}),
                "credentials.x.source.command[1]",
            ),
            (
                json!({"credentials": {"x": {"source": {"command": ["pass"], "timeout_s": 0}, "inject": {"bearer": {}}, "hosts": ["a"]}}}),
                "credentials.x.source.timeout_s",
            ),
            (
                json!({"credentials": {"x": {"source": {"env": "A", "timeout_s": 5}, "inject": {"bearer": {}}, "hosts": ["a"]}}}),
                "credentials.x.source.timeout_s",
            ),
            (
                json!({"credentials": {"x": {"source": {"env": "A"}, "inject": {"query": {"name": "a&b"}}, "hosts": ["a"]}}}),
                "credentials.x.inject.query.name",
            ),
            (json!({"credentials": {"x": {"source": {"env": "A"}, "inject": {"basic": {"user": "u"}}, "hosts": ["a"]}}}), "credentials.x.inject.basic.user"),
            (json!({"credentials": {"x": {"source": {"env": "A"}, "inject": {"bearer": {}, "basic": {}}, "hosts": ["a"]}}}), "credentials.x.inject"),
            (
                json!({"credentials": {"x": {"source": {"env": "A"}, "inject": {"bearer": {}}, "hosts": ["a"], "methods": ["GET", "FETCH"]}}}),
                "credentials.x.methods[1]",
            ),
            (json!({"credentials": {"x": {"source": {"env": "A"}, "inject": {"bearer": {}}, "hosts": ["a"], "on_echo": "drop"}}}), "credentials.x.on_echo"),
            (json!({"credentials": {"x": {"source": {"env": "A"}, "inject": {"bearer": {}}, "hosts": ["a"], "on_echo": true}}}), "credentials.x.on_echo"),
        ];
        for (v, field) in cases {
            let shown = v.to_string();
            assert_eq!(parse_err(v).0, field, "{shown}");
        }
    }

    /// `approval.via` and `"approve": "command"` (sp-policy(5), APPROVAL): who must be
    /// able to ask, checked at load.
    #[test]
    fn approval_channels() {
        use approval::{Approve, Via};
        let cred = |approve: Value| json!({"source": {"env": "A"}, "inject": {"bearer": {}}, "hosts": ["x"], "approve": approve});
        assert_eq!(parse(&json!({})).unwrap().approval.via, vec![Via::Command]);
        let p = parse(&json!({"approval": {"via": ["elicitation"]}, "credentials": {"a": cred(json!(true))}})).unwrap();
        assert_eq!((p.approval.via.clone(), p.approval.command.clone()), (vec![Via::Elicitation], None));
        assert_eq!(p.credentials["a"].approve, Approve::Yes);
        let p = parse(&json!({"approval": {"via": ["elicitation", "command"], "command": ["/a"]}, "credentials": {"a": cred(json!("command"))}})).unwrap();
        assert_eq!((p.approval.via.clone(), p.credentials["a"].approve), (vec![Via::Elicitation, Via::Command], Approve::Command));
        assert!(p.credential_needs_approval("a"));
        let need = "needs an approver: set approval.command (or \"mode\": \"observe\" while rolling out)".to_owned();
        for (v, field, message) in [
            (json!({"approval": {"via": ["elicitation"]}, "credentials": {"a": cred(json!("command"))}}), "credentials.a.approve", need.clone()),
            (
                json!({"approval": {"via": ["elicitation"]}, "upstreams": {"u": {"command": ["/a"], "approve": "command", "tools": {"allow": ["*"], "approve": ["x"]}}}}),
                "upstreams.u.tools.approve",
                need.clone(),
            ),
            (
                json!({"upstreams": {"u": {"command": ["/a"], "approve": true}}}),
                "upstreams.u.approve",
                "must be \"command\" (tools.approve chooses the tools)".to_owned(),
            ),
            (json!({"approval": {"via": []}}), "approval.via", "must name at least one channel".to_owned()),
            (json!({"approval": {"via": "command"}}), "approval.via", "must be an array of \"elicitation\" and \"command\"".to_owned()),
            (json!({"approval": {"via": ["command", "command"], "command": ["/a"]}}), "approval.via[1]", "names a channel twice".to_owned()),
            (json!({"approval": {"via": ["email"]}}), "approval.via[0]", "must be \"elicitation\" or \"command\"".to_owned()),
            (json!({"approval": {"via": ["command"]}}), "approval.command", "is required (or \"via\": [\"elicitation\"])".to_owned()),
            (json!({"credentials": {"a": cred(json!("elicitation"))}}), "credentials.a.approve", "must be true, false or \"command\"".to_owned()),
        ] {
            let shown = v.to_string();
            assert_eq!(parse_err(v), (field.to_owned(), message), "{shown}");
        }
    }

    #[test]
    fn approve_is_a_field_of_credentials_and_ssh_hosts() {
        let cred = |approve: Value| json!({"source": {"env": "A"}, "inject": {"bearer": {}}, "hosts": ["x"], "approve": approve});
        let host = json!({"address": "h", "user": "u", "auth": {"agent": true}, "approve": true});
        let p = parse(&json!({
            "mode": "enforce",
            "approval": {"command": ["/usr/local/bin/sp-approve", "--x"], "timeout_s": 30},
            "credentials": {"a": cred(json!(true)), "b": cred(json!(false))},
            "ssh": {"known_hosts": "/kh", "hosts": {"web": host}}
        }))
        .unwrap();
        assert!(p.credential_needs_approval("a") && !p.credential_needs_approval("b") && !p.credential_needs_approval("zz"));
        assert!(p.ssh_host_needs_approval("web") && !p.ssh_host_needs_approval("zz"));
        assert_eq!(p.approval.timeout, Duration::from_secs(30));
        assert_eq!(p.approval.grants, approval::GrantsPolicy::default(), "no grants unless the operator allows them");
        let p = parse(&json!({"approval": {"command": ["/a"], "grants": {"exact_max_s": 3600, "session_max_s": 900, "path": "/s/g.json"}}})).unwrap();
        let want = approval::GrantsPolicy { exact_max_s: Some(3600), session_max_s: Some(900), path: Some(PathBuf::from("/s/g.json")) };
        assert_eq!(p.approval.grants, want);
        let p = parse(&json!({"mode": "observe", "credentials": {"a": cred(json!(true))}})).unwrap();
        assert!(p.credential_needs_approval("a"));
        assert_eq!((p.approval.mode, p.approval.command), (approval::Mode::Observe, None));
    }

    #[test]
    fn approval_errors_name_the_field() {
        let cred = |approve: Value| json!({"source": {"env": "A"}, "inject": {"bearer": {}}, "hosts": ["x"], "approve": approve});
        let host = json!({"address": "h", "user": "u", "auth": {"agent": true}, "approve": true});
        for (v, field, why) in [
            (json!({"mode": "audit"}), "mode", "must be \"enforce\" or \"observe\""),
            (json!({"approval": {"command": []}}), "approval.command", "must be a non-empty array: [PROGRAM, ARGS...]"),
            (json!({"approval": {"command": ["sp-approve"]}}), "approval.command[0]", "must be an absolute path to the approver"),
            (json!({"approval": {"command": ["/a", 1]}}), "approval.command[1]", "must be a string"),
            (json!({"approval": {"command": ["/a"], "timeout_s": 0}}), "approval.timeout_s", "must be an integer from 1 to 3600"),
            (json!({"approval": {"cmd": ["/a"]}}), "approval.cmd", "unknown field (expected one of: command, timeout_s, grants, via)"),
            (json!({"approval": {"command": ["/a"], "grants": {"exact_max_s": 0}}}), "approval.grants.exact_max_s", "must be an integer from 1 to 86400"),
            (
                json!({"approval": {"command": ["/a"], "grants": {"session_max_s": 86401}}}),
                "approval.grants.session_max_s",
                "must be an integer from 1 to 86400",
            ),
            (json!({"approval": {"command": ["/a"], "grants": {"exact_max_s": "900"}}}), "approval.grants.exact_max_s", "must be an integer from 1 to 86400"),
            (json!({"approval": {"command": ["/a"], "grants": {"path": "grants.json"}}}), "approval.grants.path", "must be an absolute path to a file"),
            (json!({"approval": {"command": ["/a"], "grants": {"path": "/state/"}}}), "approval.grants.path", "must be an absolute path to a file"),
            (
                json!({"approval": {"command": ["/a"], "grants": {"once_max_s": 1}}}),
                "approval.grants.once_max_s",
                "unknown field (expected one of: exact_max_s, session_max_s, path)",
            ),
            (json!({"approval": {"command": ["/a"], "grants": []}}), "approval.grants", "must be an object"),
            (json!({"approval": {}}), "approval.command", "is required (or \"via\": [\"elicitation\"])"),
            (json!({"credentials": {"a": cred(json!("yes"))}}), "credentials.a.approve", "must be true, false or \"command\""),
            (
                json!({"credentials": {"a": cred(json!(true))}}),
                "credentials.a.approve",
                "needs an approver: set approval.command (or \"mode\": \"observe\" while rolling out)",
            ),
            (
                json!({"ssh": {"known_hosts": "/kh", "hosts": {"w": host}}}),
                "ssh.hosts.w.approve",
                "needs an approver: set approval.command (or \"mode\": \"observe\" while rolling out)",
            ),
            (
                json!({"upstreams": {"u": {"command": ["/a"], "tools": {"allow": ["*"], "approve": ["x"]}}}}),
                "upstreams.u.tools.approve",
                "needs an approver: set approval.command (or \"mode\": \"observe\" while rolling out)",
            ),
        ] {
            let shown = v.to_string();
            let (f, w) = parse_err(v);
            assert_eq!((f.as_str(), w.as_str()), (field, why), "{shown}");
        }
    }

    /// Grants are bound to the hash of the bytes read: any edit, even of white space, is
    /// another policy; the built-in deny-everything policy has none.
    #[test]
    fn the_hash_is_of_the_bytes_as_read() {
        let a = Policy::from_text("{}", Path::new("/p")).unwrap();
        let b = Policy::from_text("{ }", Path::new("/p")).unwrap();
        // Made at the first use, not at load (only grants need it).
        assert!(a.text.hex.get().is_none() && b.text.hex.get().is_none());
        // sha256("{}"), as `printf '{}' | sha256sum` gives it.
        assert_eq!(a.hash(), Some("44136fa355b3678a1146ad16f7e8649e94fb4fc21fe77e8310c060f61caaff8a"));
        assert_ne!(a.hash(), b.hash());
        assert_eq!(Policy::deny_all().hash(), None);
        // A clone made before the first use hashes alike; equality is the text's.
        let c = Policy::from_text("{}", Path::new("/p")).unwrap();
        assert_eq!(c.clone().hash(), a.hash());
        assert_eq!(c, a);
        assert_ne!(a, b);
    }

    #[test]
    fn lookup_order() {
        let env = |pairs: &'static [(&'static str, &'static str)]| move |k: &str| pairs.iter().find(|(n, _)| *n == k).map(|(_, v)| v.to_string());
        let none = |_: &Path| false;
        assert_eq!(lookup(Some("/x".into()), env(&[("SP_CONFIG", "/y")]), none), Lookup::Explicit("/x".into()));
        assert_eq!(lookup(None, env(&[("SP_CONFIG", "/y")]), none), Lookup::Explicit("/y".into()));
        let all = |_: &Path| true;
        assert_eq!(lookup(None, env(&[("XDG_CONFIG_HOME", "/xdg"), ("HOME", "/h")]), all), Lookup::Found("/xdg/sallyport/policy.json".into()));
        assert_eq!(lookup(None, env(&[("HOME", "/h")]), all), Lookup::Found("/h/.config/sallyport/policy.json".into()));
        let etc_only = |p: &Path| p == Path::new("/etc/sallyport/policy.json");
        assert_eq!(lookup(None, env(&[("HOME", "/h")]), etc_only), Lookup::Found("/etc/sallyport/policy.json".into()));
        assert!(matches!(lookup(None, env(&[]), none), Lookup::None(c) if c.len() == 1));
    }
}
