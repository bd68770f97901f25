//! Approval grants: a yes that lasts a while. The approver may answer a yes with a scope
//! (`sp-policy(5)`, APPROVAL, "Grants"); `sp approve list|revoke` shows and ends them.
//!
//! ```text
//!  approve-flagged call ── find(policy hash, ActionKey, channels, now) ── a live grant ──> run, no question
//!        │ none (or the file is refused / corrupt: logged, fail closed)
//!        └─ ask ── yes + {"grant": "exact"|"session", "ttl_s": N} ── add(...) ──> grant, run
//!                  yes, no line / "once" / a malformed line ──────────────────> run this call only
//! ```
//!
//! # Scopes
//! - `once`: nothing is stored (every approval before grants existed).
//! - `exact`: the same call again: same tool, target, subject (credential or SSH host)
//!   and `request_fp` (the journal's fingerprint of the whole request, every argument
//!   included), hashed into an [`ActionKey`]. Any change asks again.
//! - `session`: every call that needs approval, while the policy is the same file. A
//!   "session" is an approval window of the user's, not one `sp` process: every `sp mcp`
//!   of that user reads the same file.
//!
//! A grant applies only while `created <= now < expires`, to the uid that made it, under
//! the policy whose hash it carries (SHA-256 of the policy file's bytes: any edit ends
//! every grant), to a call whose subject accepts the channel that granted it (one that
//! requires the approver command never rides on an elicitation's grant), and while the
//! policy still allows its scope for at least its TTL. A TTL
//! asked above the operator's `approval.grants.*_max_s` is cut to it and the grant says
//! so (`requested_ttl_s`); a scope without a max is never granted (`NotAllowed`).
//!
//! # The file
//! `approval.grants.path`, else `grants.json` next to the default audit journal
//! (`$XDG_STATE_HOME/sallyport/`, else `$HOME/.local/state/sallyport/`: one rule,
//! `audit::default_location`). JSON, one grant per line:
//!
//! ```text
//! {"version":1,"grants":[
//! {"id":"3f9a0c1e2b4d5a6f","scope":"exact","policy":"<64 hex>","created":1796300000,"expires":1796300900,
//!  "ttl_s":900,"action":"<64 hex>","tool":"http_request","target":"PUT http://h/v1/jobs/7",
//!  "subject":"sidecar","channel":"command","uid":1000,"mac":"<64 hex>"}
//! ]}
//! ```
//!
//! `mac` is an HMAC-SHA256 of the rest of the record with a key only `sp` holds
//! (`grants.json.key` beside the file, `mac.rs`; issue 31: an upstream running as the
//! user wrote a session grant into this file). A record without it, or with a wrong
//! one, is no grant: it is ignored, warned about, journaled once per process (a `grant`
//! row, decision `forged`) and dropped by the next write.
//!
//! Read with `sys`'s checks (no symbolic link, a regular file, owned by root or the user,
//! no group or other bit, at most [`MAX_FILE_BYTES`]) in a directory only they can write
//! (`sys::check_dirs`), and parsed strictly: duplicate keys, unknown keys, a bad id or
//! hash, `expires != created + ttl_s`, more than [`MAX_GRANTS`] grants: all make the file
//! corrupt, and a corrupt file grants nothing. It is never rewritten then, except by
//! [`Grants::revoke_all`] (`sp approve revoke --all`).
//!
//! Writes (add, revoke) are read-modify-write under an exclusive `flock` on the file,
//! so several `sp` processes never lose each other's grants: open (created `0600`,
//! `O_NOFOLLOW`), lock, check that the name still points at the locked file (a writer
//! that renamed a new one in meanwhile: start again), read, drop expired grants, change,
//! write a temporary file in the same directory (`O_EXCL`, `0600`), `fsync`, `rename`
//! over the name, `fsync` the directory (a replacement a killed writer left is removed
//! under the lock). Readers take no lock: a rename is atomic, so
//! they see the old file or the new one, whole.
//!
//! `Grants` is a handle (a path and the operator's limits); every method reads the file
//! as it is now, so a grant added by another session applies at once and a revoked one
//! stops at once.

mod answer;
mod form;
mod mac;
mod store;

use std::fmt;
use std::path::PathBuf;
use std::time::Duration;

use serde_json::json;

use crate::policy::approval::GrantsPolicy;
use crate::sys::{self, SysError};

pub(crate) use answer::parse_answer;
pub(crate) use form::FormError;
pub(crate) use mac::KeyError;
pub(crate) use store::Grants;

/// Largest grants file read or written.
pub(crate) const MAX_FILE_BYTES: u64 = 1024 * 1024;
/// Most grants kept at once (live ones: expired ones are dropped on every write).
pub(crate) const MAX_GRANTS: usize = 1000;
/// How long a write waits for another `sp` to finish its own.
pub(crate) const LOCK_WAIT: Duration = Duration::from_secs(2);
/// A grant keeps this much of its call's target, for `sp approve list`.
pub(crate) const MAX_SHOWN_TARGET: usize = 256;
/// A grant keeps this much of its call's tool and subject names (names are at most 64
/// bytes: `policy::is_name`, tool names).
pub(crate) const MAX_SHOWN_NAME: usize = 64;
/// The longest grant line an approver may print.
pub(crate) const MAX_ANSWER_BYTES: usize = 256;

// ---------------------------------------------------------------------------------------
// Types

/// What a stored grant covers (`once` is never stored).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Scope {
    /// The same action ([`ActionKey`]) again.
    Exact,
    /// Every call that needs approval under the same policy.
    Session,
}

impl Scope {
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Scope::Exact => "exact",
            Scope::Session => "session",
        }
    }

    fn parse(s: &str) -> Option<Scope> {
        match s {
            "exact" => Some(Scope::Exact),
            "session" => Some(Scope::Session),
            _ => None,
        }
    }
}

/// Who said yes: the operator's approver command, or the user through the MCP client's
/// elicitation form.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Channel {
    Command,
    Elicitation,
}

impl Channel {
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Channel::Command => "command",
            Channel::Elicitation => "elicitation",
        }
    }

    fn parse(s: &str) -> Option<Channel> {
        match s {
            "command" => Some(Channel::Command),
            "elicitation" => Some(Channel::Elicitation),
            _ => None,
        }
    }
}

/// One action, as an `exact` grant matches it: the hash of tool, target, subject
/// (credential or SSH host name) and `request_fp` (every argument), plus the texts
/// `sp approve list` shows.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ActionKey {
    hash: String,
    tool: String,
    target: String,
    subject: String,
}

impl ActionKey {
    /// The key of a call: `tool`, `target`, `subject` and `request_fp` as the journal
    /// has them (`audit::Context`).
    pub(crate) fn new(tool: &str, target: &str, subject: &str, request_fp: &str) -> ActionKey {
        // A JSON array: the parts cannot run into each other ("ab"+"c" vs "a"+"bc").
        let framed = json!(["sp-grant/1", tool, target, subject, request_fp]).to_string();
        ActionKey {
            hash: crate::audit::sha256_hex(&[framed.as_bytes()]),
            // Cut for display only (the hash covers them whole): the file's parser refuses
            // longer texts, and a grant must never make its own file corrupt.
            tool: sys::cut(tool, MAX_SHOWN_NAME).to_owned(),
            target: sys::cut(target, MAX_SHOWN_TARGET).to_owned(),
            subject: sys::cut(subject, MAX_SHOWN_NAME).to_owned(),
        }
    }

    pub(crate) fn hash(&self) -> &str {
        &self.hash
    }
}

/// A stored grant.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Grant {
    /// 16 hex digits, random.
    pub id: String,
    pub scope: Scope,
    /// The hash of the policy it was granted under ([`crate::policy::hash`]).
    pub policy: String,
    /// Unix seconds.
    pub created: u64,
    /// `created + ttl_s`.
    pub expires: u64,
    pub ttl_s: u64,
    /// What the approver asked for, when it was more than the operator allows.
    pub requested_ttl_s: Option<u64>,
    /// `exact`: the [`ActionKey`] hash; `session`: none.
    pub action: Option<String>,
    /// The call that was approved (for `session`, the one that opened the window); shown
    /// by `sp approve list`. The target is the journal's (no query, no body), cut.
    pub tool: String,
    pub target: String,
    pub subject: String,
    pub channel: Channel,
    pub uid: u32,
}

impl Grant {
    /// Whether it is in force at `now` (and not dated in the future: a clock set back
    /// never lengthens a grant).
    pub(crate) fn live(&self, now: u64) -> bool {
        self.created <= now && now < self.expires
    }
}

/// What the approver asked for with its yes ([`parse_answer`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum GrantRequest {
    /// `{"grant": "once"}`: this call only, said explicitly.
    Once,
    /// `{"grant": "exact"|"session", "ttl_s": N}`.
    Lasting { scope: Scope, ttl_s: u64 },
}

// ---------------------------------------------------------------------------------------
// Errors

/// Why the grants file could not be used. No grant applies then.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum GrantError {
    /// No `approval.grants.path` and neither `XDG_STATE_HOME` nor `HOME` is usable.
    NoLocation,
    /// `approval.grants.path` or the default is not absolute (a relative one never is).
    NotAbsolute { path: PathBuf },
    /// The file itself is refused (a symbolic link, not a regular file, too open, another
    /// owner, too large) or cannot be opened.
    File { path: PathBuf, why: SysError },
    /// The file has a second name (hard link).
    HardLinked { path: PathBuf, links: u64 },
    /// A directory above it could let another user replace it.
    Dir { path: PathBuf, why: sys::UnsafeDir },
    /// The content is not a grants file this `sp` wrote.
    Corrupt { path: PathBuf, why: FormError },
    /// The key that signs grants (`path`: the key file) cannot be read or made.
    Key { path: PathBuf, why: KeyError },
    /// Another process held the lock past [`LOCK_WAIT`].
    Locked { path: PathBuf },
    /// Creating the directory, writing, syncing or renaming failed.
    Write { path: PathBuf, why: String },
    /// [`MAX_GRANTS`] live grants, or [`MAX_FILE_BYTES`], already.
    Full { path: PathBuf },
    /// The operator allows no grant of this scope (no `approval.grants.*_max_s`).
    NotAllowed { scope: Scope },
    /// No live grant has this id.
    NotFound { id: String },
    /// [`Grants::add`] was given something else than a policy hash (64 hex digits).
    BadPolicyHash,
}

impl fmt::Display for GrantError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            GrantError::NoLocation => {
                f.write_str("no grants file location: neither XDG_STATE_HOME nor HOME is set to an absolute path (set approval.grants.path in the policy)")
            }
            GrantError::NotAbsolute { path } => write!(f, "grants file {}: must be an absolute path", path.display()),
            GrantError::File { path, why } => {
                let fix = match why {
                    SysError::Symlink | SysError::NotRegular { .. } | SysError::TooOpen { .. } | SysError::WrongOwner { .. } => {
                        format!(" (refused; fix: rm {} and approve again)", path.display())
                    }
                    _ => String::new(),
                };
                write!(f, "grants file {}: {why}{fix}", path.display())
            }
            GrantError::HardLinked { path, links } => {
                write!(f, "grants file {}: has {links} hard links (refused: a second name could change it)", path.display())
            }
            GrantError::Dir { path, why } => write!(f, "grants file {}: {why} (refused: another user could replace the file)", path.display()),
            GrantError::Corrupt { path, why } => {
                write!(f, "grants file {}: corrupt: {why}; no grant applies until `sp approve revoke --all` replaces it", path.display())
            }
            GrantError::Key { path, why } => write!(f, "grants key {}: {why}; no grant applies", path.display()),
            GrantError::Locked { path } => {
                write!(f, "grants file {}: another process has held its lock for more than {}s", path.display(), LOCK_WAIT.as_secs())
            }
            GrantError::Write { path, why } => write!(f, "grants file {}: write failed: {why}", path.display()),
            GrantError::Full { path } => write!(f, "grants file {}: full ({MAX_GRANTS} grants or {MAX_FILE_BYTES} bytes); revoke some first", path.display()),
            GrantError::NotAllowed { scope } => {
                write!(f, "the policy allows no {} grant (approval.grants.{}_max_s is not set)", scope.as_str(), scope.as_str())
            }
            GrantError::NotFound { id } => write!(f, "no grant {}", sys::short(id, 32, sys::Ellipsis::Marked).escape_debug()),
            GrantError::BadPolicyHash => f.write_str("no policy hash to bind the grant to (64 hex digits)"),
        }
    }
}

impl std::error::Error for GrantError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            GrantError::File { why, .. } => Some(why),
            GrantError::Dir { why, .. } => Some(why),
            GrantError::Corrupt { why, .. } => Some(why),
            GrantError::Key { why, .. } => Some(why),
            _ => None,
        }
    }
}

// ---------------------------------------------------------------------------------------
// Location, time

/// Where the grants are kept: `approval.grants.path`, else `grants.json` beside the
/// default audit journal (the same `XDG_STATE_HOME` / `HOME` rule).
pub(crate) fn location(policy: &GrantsPolicy, env: impl Fn(&str) -> Option<String>) -> Result<PathBuf, GrantError> {
    if let Some(p) = &policy.path {
        return Ok(p.clone());
    }
    crate::audit::default_location(env).map(|p| p.with_file_name("grants.json")).map_err(|_| GrantError::NoLocation)
}

/// Now, in Unix seconds.
pub(crate) fn now() -> u64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs())
}

/// `sp check`'s line.
pub(crate) fn check_summary(policy: &GrantsPolicy, env: impl Fn(&str) -> Option<String>) -> String {
    let max = |m: Option<u64>| m.map_or("never".to_owned(), |s| format!("up to {s}s"));
    if policy.exact_max_s.is_none() && policy.session_max_s.is_none() {
        return "grants: none (each approval covers one call)\n".into();
    }
    let file = match (&policy.path, location(policy, env)) {
        (Some(p), _) => p.display().to_string(),
        (None, Ok(p)) => format!("{} (default)", p.display()),
        (None, Err(e)) => format!("NONE: {e}"),
    };
    format!("grants: exact {}, session {}; file {file}\n", max(policy.exact_max_s), max(policy.session_max_s))
}

#[cfg(test)]
mod tests;
