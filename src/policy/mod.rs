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
//! (other MCP servers and their tool filters), [`reload`]. [`fields`] holds the checks they share.
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
pub(crate) mod reload;
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
    /// When `sp mcp` reads the file again (`policy/reload.rs`).
    pub reload: reload::Reload,
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
            reload: reload::Reload::Signal,
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
    let top = object(root, "", &["credentials", "http", "ssh", "audit", "approval", "mode", "upstreams", "limits", "limits_state", "reload"])?;
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
        Some(v) => ssh::parse_with(v, &credentials)?,
        None => ssh::SshPolicy::default(),
    };
    let upstreams = match top.get("upstreams") {
        Some(v) => upstreams::parse(v, &credentials)?,
        None => BTreeMap::new(),
    };
    let limits = limits::parse(top.get("limits"), top.get("limits_state"), &|c| credentials.contains_key(c), &|u| upstreams.contains_key(u))?;
    let reload = reload::parse(top.get("reload"))?;
    let policy = Policy { origin: None, credentials, http, ssh, audit, approval, upstreams, limits, reload, text: TextHash::default() };
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
mod tests;
