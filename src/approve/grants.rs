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
//!  "subject":"sidecar","channel":"command","uid":1000}
//! ]}
//! ```
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

// Until the approval gate calls `find`, `add` and `parse_answer` (approve.rs): then this
// expectation fails the build and goes.
#![cfg_attr(not(test), expect(dead_code, reason = "the approval gate does not call the grants yet"))]

use std::fmt;
use std::fs::File;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::{json, Map, Value};

use crate::policy::approval::{GrantsPolicy, MAX_GRANT_S};
use crate::sys::{self, SysError};

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
const FILE_VERSION: u64 = 1;

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

    /// The grant as stored (and as `sp approve list --json` prints it, with more).
    fn to_json(&self) -> Value {
        let mut m = Map::new();
        m.insert("id".into(), json!(self.id));
        m.insert("scope".into(), json!(self.scope.as_str()));
        m.insert("policy".into(), json!(self.policy));
        m.insert("created".into(), json!(self.created));
        m.insert("expires".into(), json!(self.expires));
        m.insert("ttl_s".into(), json!(self.ttl_s));
        if let Some(r) = self.requested_ttl_s {
            m.insert("requested_ttl_s".into(), json!(r));
        }
        if let Some(a) = &self.action {
            m.insert("action".into(), json!(a));
        }
        m.insert("tool".into(), json!(self.tool));
        m.insert("target".into(), json!(self.target));
        m.insert("subject".into(), json!(self.subject));
        m.insert("channel".into(), json!(self.channel.as_str()));
        m.insert("uid".into(), json!(self.uid));
        Value::Object(m)
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
    Corrupt { path: PathBuf, why: String },
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
            GrantError::NoLocation => f.write_str(
                "no grants file location: neither XDG_STATE_HOME nor HOME is set to an absolute path (set approval.grants.path in the policy)",
            ),
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
            GrantError::Corrupt { path, why } => write!(
                f,
                "grants file {}: corrupt: {why}; no grant applies until `sp approve revoke --all` replaces it",
                path.display()
            ),
            GrantError::Locked { path } => {
                write!(f, "grants file {}: another process has held its lock for more than {}s", path.display(), LOCK_WAIT.as_secs())
            }
            GrantError::Write { path, why } => write!(f, "grants file {}: write failed: {why}", path.display()),
            GrantError::Full { path } => write!(
                f,
                "grants file {}: full ({MAX_GRANTS} grants or {MAX_FILE_BYTES} bytes); revoke some first",
                path.display()
            ),
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
            _ => None,
        }
    }
}

/// Why an approver's grant line was not taken. The gate treats it as a plain yes for
/// this one call and logs this.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum AnswerError {
    TooLong { max: usize },
    NotUtf8,
    Json { why: String },
    /// Valid JSON of the wrong shape: names what is wrong, never echoes a value.
    Shape { why: &'static str },
}

impl fmt::Display for AnswerError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("the approver's grant line is ignored (this approval covers one call): ")?;
        match self {
            AnswerError::TooLong { max } => write!(f, "longer than {max} bytes"),
            AnswerError::NotUtf8 => f.write_str("not UTF-8"),
            AnswerError::Json { why } => f.write_str(why),
            AnswerError::Shape { why } => f.write_str(why),
        }
    }
}

impl std::error::Error for AnswerError {}

// ---------------------------------------------------------------------------------------
// The approver's answer

/// The grant an approver asked for on its standard output, if any. The request is the
/// last non-empty line, and only when it starts with `{` (earlier lines, and a last line
/// that is not JSON, are the approver's own chatter: no request, a plain yes). That line
/// must be exactly `{"grant": "once"}` or `{"grant": "exact"|"session", "ttl_s": N}`
/// with N from 1 to 2^32-1 (cut to the operator's max later): an unknown key, a
/// duplicate key, a float, a string where a number belongs, a missing `ttl_s` is an
/// [`AnswerError`], which the gate must treat as a yes for this one call (never a
/// refusal, never a grant) and log.
pub(crate) fn parse_answer(stdout: &[u8]) -> Result<Option<GrantRequest>, AnswerError> {
    let is_blank = |l: &&[u8]| l.iter().all(|b| b.is_ascii_whitespace());
    let Some(line) = stdout.split(|b| *b == b'\n').rev().find(|l| !is_blank(l)) else { return Ok(None) };
    let line = line.trim_ascii();
    if !line.starts_with(b"{") {
        return Ok(None);
    }
    if line.len() > MAX_ANSWER_BYTES {
        return Err(AnswerError::TooLong { max: MAX_ANSWER_BYTES });
    }
    let text = std::str::from_utf8(line).map_err(|_| AnswerError::NotUtf8)?;
    let value = crate::json::parse(text).map_err(|e| AnswerError::Json { why: e.to_string() })?;
    let shape = |why| Err(AnswerError::Shape { why });
    let Value::Object(map) = value else { return shape("not an object") };
    if map.keys().any(|k| k != "grant" && k != "ttl_s") {
        return shape("a key other than \"grant\" and \"ttl_s\"");
    }
    let ttl = match map.get("ttl_s") {
        None => None,
        Some(v) => match v.as_u64() {
            Some(n) if (1..=u64::from(u32::MAX)).contains(&n) => Some(n),
            _ => return shape("\"ttl_s\" is not an integer from 1 to 4294967295"),
        },
    };
    match (map.get("grant").and_then(Value::as_str), ttl) {
        (Some("once"), None) => Ok(Some(GrantRequest::Once)),
        (Some("once"), Some(_)) => shape("\"once\" takes no \"ttl_s\""),
        (Some("exact"), Some(ttl_s)) => Ok(Some(GrantRequest::Lasting { scope: Scope::Exact, ttl_s })),
        (Some("session"), Some(ttl_s)) => Ok(Some(GrantRequest::Lasting { scope: Scope::Session, ttl_s })),
        (Some("exact" | "session"), None) => shape("\"exact\" and \"session\" need \"ttl_s\""),
        _ => shape("\"grant\" is not \"once\", \"exact\" or \"session\""),
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

// ---------------------------------------------------------------------------------------
// The store

/// The grants file and the operator's limits (module docs). Cheap: nothing is read
/// until a method needs it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Grants {
    path: PathBuf,
    exact_max_s: Option<u64>,
    session_max_s: Option<u64>,
}

/// What [`Grants::revoke_all`] ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct RevokedAll {
    /// Live grants removed.
    pub count: usize,
    /// The file was corrupt (why) and is replaced by an empty one.
    pub replaced_corrupt: Option<String>,
}

impl Grants {
    /// A handle on the grants file at `path` (absolute) under the operator's `limits`.
    /// Reads nothing: each method reads the file as it is then.
    pub(crate) fn open(path: &Path, limits: &GrantsPolicy) -> Result<Grants, GrantError> {
        if !path.is_absolute() {
            return Err(GrantError::NotAbsolute { path: path.to_owned() });
        }
        Ok(Grants { path: path.to_owned(), exact_max_s: limits.exact_max_s, session_max_s: limits.session_max_s })
    }

    pub(crate) fn path(&self) -> &Path {
        &self.path
    }

    fn max_s(&self, scope: Scope) -> Option<u64> {
        match scope {
            Scope::Exact => self.exact_max_s,
            Scope::Session => self.session_max_s,
        }
    }

    /// The grant that covers this call at `now`, if any: an `exact` grant for `key`
    /// first, then a `session` grant, each under `policy_hash`, made by this user, said
    /// yes to through one of the `accept`ed channels, and of a scope the limits still
    /// allow for its TTL. An error means none applies (fail closed): the caller logs it
    /// and asks.
    ///
    /// `accept` is the channels the call's subject may be approved through: a subject
    /// that requires the out-of-band command must not ride on a grant the MCP client's
    /// own host could have given through elicitation.
    pub(crate) fn find(&self, policy_hash: &str, key: &ActionKey, accept: &[Channel], now: u64) -> Result<Option<Grant>, GrantError> {
        let uid = sys::euid();
        let grants = self.read()?;
        let applies = |g: &&Grant, scope: Scope| {
            g.scope == scope
                && g.live(now)
                && g.uid == uid
                && g.policy == policy_hash
                && accept.contains(&g.channel)
                && self.max_s(scope).is_some_and(|max| g.ttl_s <= max)
        };
        let exact = grants.iter().find(|g| applies(g, Scope::Exact) && g.action.as_deref() == Some(key.hash()));
        Ok(exact.or_else(|| grants.iter().find(|g| applies(g, Scope::Session))).cloned())
    }

    /// The live grants at `now`, soonest to expire first (every user's and policy's: the
    /// file is this user's).
    pub(crate) fn list(&self, now: u64) -> Result<Vec<Grant>, GrantError> {
        let mut grants: Vec<Grant> = self.read()?.into_iter().filter(|g| g.live(now)).collect();
        grants.sort_by(|a, b| (a.expires, &a.id).cmp(&(b.expires, &b.id)));
        Ok(grants)
    }

    /// Stores a grant of `scope` for `ttl_s` seconds (cut to the operator's max, and the
    /// grant then says what was asked) under `policy_hash` for `key`'s call, said yes to
    /// through `channel`. An older grant of the same scope, policy and action is replaced.
    pub(crate) fn add(&self, scope: Scope, ttl_s: u64, policy_hash: &str, key: &ActionKey, channel: Channel, now: u64) -> Result<Grant, GrantError> {
        let max = self.max_s(scope).ok_or(GrantError::NotAllowed { scope })?;
        let ttl = ttl_s.clamp(1, max);
        let action = (scope == Scope::Exact).then(|| key.hash.clone());
        let grant = Grant {
            id: String::new(),
            scope,
            policy: policy_hash.to_owned(),
            created: now,
            expires: now.saturating_add(ttl),
            ttl_s: ttl,
            requested_ttl_s: (ttl_s > ttl).then_some(ttl_s),
            action,
            tool: key.tool.clone(),
            target: key.target.clone(),
            subject: key.subject.clone(),
            channel,
            uid: sys::euid(),
        };
        if !is_hex(&grant.policy, 64) {
            return Err(GrantError::BadPolicyHash);
        }
        self.update(now, |grants| {
            // The channel counts: a command's grant must not be replaced by one an
            // elicitation gave (subjects that require the command accept only the former).
            let same = |g: &Grant| g.scope == grant.scope && g.policy == grant.policy && g.action == grant.action && g.uid == grant.uid && g.channel == grant.channel;
            grants.retain(|g| !same(g));
            if grants.len() >= MAX_GRANTS {
                return Err(GrantError::Full { path: self.path.clone() });
            }
            let mut grant = grant.clone();
            grant.id = loop {
                let id = crate::audit::session_id();
                if !grants.iter().any(|g| g.id == id) {
                    break id;
                }
            };
            grants.push(grant.clone());
            Ok(grant)
        })
    }

    /// Ends the grant `id` (a live one; unknown ids are [`GrantError::NotFound`]).
    pub(crate) fn revoke(&self, id: &str, now: u64) -> Result<Grant, GrantError> {
        self.update(now, |grants| {
            let at = grants.iter().position(|g| g.id == id).ok_or_else(|| GrantError::NotFound { id: id.to_owned() })?;
            Ok(grants.remove(at))
        })
    }

    /// Ends every grant; a corrupt file is replaced by an empty one (the one write that
    /// may replace it). A file refused for what it is (a link, another owner, too open)
    /// is left alone.
    pub(crate) fn revoke_all(&self, now: u64) -> Result<RevokedAll, GrantError> {
        let mut corrupt = None;
        let count = self.update_with(now, |parsed| {
            let mut grants = match parsed {
                Ok(g) => g,
                Err(why) => {
                    corrupt = Some(why);
                    Vec::new()
                }
            };
            let n = grants.len();
            grants.clear();
            Ok((grants, n))
        })?;
        Ok(RevokedAll { count, replaced_corrupt: corrupt })
    }

    // -- reading --------------------------------------------------------------------

    /// The grants in the file (all of them, expired too); none when there is no file.
    fn read(&self) -> Result<Vec<Grant>, GrantError> {
        self.check_dirs()?;
        // On a helper thread with a timeout: a home on a file system that does not answer
        // must not hang the session (`sys::read_within`).
        let bytes = match sys::read_within(&self.path, rules(MAX_FILE_BYTES), sys::READ_TIMEOUT) {
            Ok(b) => b,
            Err(SysError::Missing) => return Ok(Vec::new()),
            Err(why) => return Err(GrantError::File { path: self.path.clone(), why }),
        };
        parse_file(&bytes).map_err(|why| GrantError::Corrupt { path: self.path.clone(), why })
    }

    fn check_dirs(&self) -> Result<(), GrantError> {
        sys::check_dirs(&self.path).map_err(|why| GrantError::Dir { path: self.path.clone(), why })
    }

    // -- writing --------------------------------------------------------------------

    /// Read-modify-write under the lock; a corrupt file is an error (never rewritten).
    fn update<T>(&self, now: u64, change: impl FnOnce(&mut Vec<Grant>) -> Result<T, GrantError>) -> Result<T, GrantError> {
        let path = self.path.clone();
        self.update_with(now, |parsed| {
            let mut grants = parsed.map_err(|why| GrantError::Corrupt { path, why })?;
            let out = change(&mut grants)?;
            Ok((grants, out))
        })
    }

    /// The lock, the re-check, the read, then `change` on the live grants (or on why the
    /// file is corrupt), then the atomic replacement (module docs).
    fn update_with<T>(&self, now: u64, change: impl FnOnce(Result<Vec<Grant>, String>) -> Result<(Vec<Grant>, T), GrantError>) -> Result<T, GrantError> {
        let write_err = |why: String| GrantError::Write { path: self.path.clone(), why };
        let file_err = |why: SysError| GrantError::File { path: self.path.clone(), why };
        if let Some(dir) = self.path.parent() {
            use std::os::unix::fs::DirBuilderExt;
            std::fs::DirBuilder::new()
                .recursive(true)
                .mode(0o700)
                .create(dir)
                .map_err(|e| write_err(format!("cannot create {}: {}", dir.display(), sys::os_reason(&e))))?;
        }
        self.check_dirs()?;
        // A writer that renamed a new file in between our open and our lock holds no lock
        // on that one: open it again. Each round means another writer finished.
        for _ in 0..50 {
            // Any size here: `revoke --all` must replace an oversized file too.
            let (file, info) = sys::open(&self.path, sys::Access::AppendCreate { mode: 0o600 }, rules(u64::MAX)).map_err(file_err)?;
            if info.nlink > 1 {
                return Err(GrantError::HardLinked { path: self.path.clone(), links: info.nlink });
            }
            let _lock = sys::lock_exclusive(&file, LOCK_WAIT).map_err(|e| match e {
                sys::LockError::Busy { .. } => GrantError::Locked { path: self.path.clone() },
                e => write_err(format!("cannot lock: {e}")),
            })?;
            use std::os::unix::fs::MetadataExt;
            match std::fs::symlink_metadata(&self.path) {
                Ok(m) if (m.dev(), m.ino()) == (info.dev, info.ino) => {}
                _ => continue,
            }
            let parsed = match sys::read_capped(&file, MAX_FILE_BYTES) {
                Ok(bytes) => parse_file(&bytes),
                Err(SysError::TooLarge { max }) => Err(format!("larger than {max} bytes")),
                Err(why) => return Err(file_err(why)),
            };
            let parsed = parsed.map(|mut g| {
                g.retain(|g| now < g.expires);
                g
            });
            let (grants, out) = change(parsed)?;
            self.remove_stale_temps();
            let bytes = render_file(&grants);
            if bytes.len() as u64 > MAX_FILE_BYTES {
                return Err(GrantError::Full { path: self.path.clone() });
            }
            self.replace(&bytes).map_err(write_err)?;
            return Ok(out);
        }
        Err(GrantError::Locked { path: self.path.clone() })
    }

    /// The temporary name of a replacement: `.NAME.<16 hex>.tmp` beside the file.
    fn temp_name(&self, tag: &str) -> PathBuf {
        self.path.with_file_name(format!("{}{tag}.tmp", self.temp_prefix()))
    }

    fn temp_prefix(&self) -> String {
        format!(".{}.", self.path.file_name().map_or("grants.json".into(), |n| n.to_string_lossy()))
    }

    /// Removes replacements a writer that died left behind. Only under a valid lock: a
    /// writer creates its temporary file while holding the lock on the file the name
    /// points at, and renames it before letting go, so any such file seen now is stale.
    fn remove_stale_temps(&self) {
        let Some(dir) = self.path.parent() else { return };
        let Ok(entries) = std::fs::read_dir(dir) else { return };
        let prefix = self.temp_prefix();
        for e in entries.flatten() {
            let name = e.file_name().to_string_lossy().into_owned();
            let tag = name.strip_prefix(&prefix).and_then(|rest| rest.strip_suffix(".tmp"));
            if tag.is_some_and(|t| is_hex(t, 16)) {
                let _ = std::fs::remove_file(e.path());
            }
        }
    }

    /// Writes `bytes` to a new private file beside the grants file and renames it over
    /// the name; both the file and the directory are synced.
    fn replace(&self, bytes: &[u8]) -> Result<(), String> {
        use rustix::fs::{Mode, OFlags};
        let dir = self.path.parent().unwrap_or(Path::new("/"));
        let temp = self.temp_name(&crate::audit::session_id());
        let flags = OFlags::WRONLY | OFlags::CREATE | OFlags::EXCL | OFlags::NOFOLLOW | OFlags::CLOEXEC;
        let fd = rustix::fs::open(&temp, flags, Mode::from_raw_mode(0o600)).map_err(|e| format!("cannot create {}: {e}", temp.display()))?;
        let mut file = File::from(fd);
        let written = file.write_all(bytes).and_then(|()| file.sync_all()).and_then(|()| std::fs::rename(&temp, &self.path));
        if let Err(e) = written {
            let _ = std::fs::remove_file(&temp);
            return Err(sys::os_reason(&e));
        }
        // The rename must survive a crash as well as the bytes.
        File::open(dir).and_then(|d| d.sync_all()).map_err(|e| format!("cannot sync {}: {}", dir.display(), sys::os_reason(&e)))
    }
}

/// Owned by root or this user, no group or other bit, at most `max` bytes.
fn rules(max: u64) -> sys::Rules {
    sys::Rules::owned(0o077, max)
}

// ---------------------------------------------------------------------------------------
// The file's form

fn is_hex(s: &str, len: usize) -> bool {
    s.len() == len && s.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
}

/// One line per grant, so the file reads (and diffs) by eye.
fn render_file(grants: &[Grant]) -> Vec<u8> {
    let mut out = format!("{{\"version\":{FILE_VERSION},\"grants\":[");
    for (i, g) in grants.iter().enumerate() {
        out.push_str(if i == 0 { "\n" } else { ",\n" });
        out.push_str(&g.to_json().to_string());
    }
    out.push_str("\n]}\n");
    out.into_bytes()
}

/// The strict parse (module docs). An empty file (created under the lock by a writer
/// that has not written yet) holds no grants.
fn parse_file(bytes: &[u8]) -> Result<Vec<Grant>, String> {
    if bytes.iter().all(|b| b.is_ascii_whitespace()) {
        return Ok(Vec::new());
    }
    let text = std::str::from_utf8(bytes).map_err(|_| "not UTF-8".to_owned())?;
    let root = crate::json::parse(text).map_err(|e| e.to_string())?;
    let Value::Object(top) = &root else { return Err("not a JSON object".into()) };
    if let Some(k) = top.keys().find(|k| *k != "version" && *k != "grants") {
        return Err(format!("unknown key {:?}", sys::short(k, 32, sys::Ellipsis::Marked)));
    }
    if top.get("version").and_then(Value::as_u64) != Some(FILE_VERSION) {
        return Err(format!("\"version\" is not {FILE_VERSION}"));
    }
    let Some(Value::Array(items)) = top.get("grants") else { return Err("\"grants\" is not an array".into()) };
    if items.len() > MAX_GRANTS {
        return Err(format!("more than {MAX_GRANTS} grants"));
    }
    let mut grants: Vec<Grant> = Vec::with_capacity(items.len());
    for (i, item) in items.iter().enumerate() {
        let g = parse_grant(item).map_err(|why| format!("grants[{i}]: {why}"))?;
        if grants.iter().any(|o| o.id == g.id) {
            return Err(format!("grants[{i}]: a second grant with id {}", g.id));
        }
        grants.push(g);
    }
    Ok(grants)
}

const GRANT_KEYS: [&str; 13] =
    ["id", "scope", "policy", "created", "expires", "ttl_s", "requested_ttl_s", "action", "tool", "target", "subject", "channel", "uid"];

fn parse_grant(v: &Value) -> Result<Grant, String> {
    let Value::Object(m) = v else { return Err("not an object".into()) };
    if let Some(k) = m.keys().find(|k| !GRANT_KEYS.contains(&k.as_str())) {
        return Err(format!("unknown key {:?}", sys::short(k, 32, sys::Ellipsis::Marked)));
    }
    let text = |k: &str, max: usize| -> Result<String, String> {
        match m.get(k) {
            Some(Value::String(s)) if s.len() <= max => Ok(s.clone()),
            Some(Value::String(_)) => Err(format!("{k} is longer than {max} bytes")),
            _ => Err(format!("{k} is not a string")),
        }
    };
    let number = |k: &str| m.get(k).and_then(Value::as_u64).ok_or_else(|| format!("{k} is not a non-negative integer"));
    let id = text("id", 16)?;
    if !is_hex(&id, 16) {
        return Err("id is not 16 hex digits".into());
    }
    let scope = Scope::parse(&text("scope", 16)?).ok_or("scope is not \"exact\" or \"session\"")?;
    let policy = text("policy", 64)?;
    if !is_hex(&policy, 64) {
        return Err("policy is not 64 hex digits".into());
    }
    let (created, expires, ttl_s) = (number("created")?, number("expires")?, number("ttl_s")?);
    if !(1..=MAX_GRANT_S).contains(&ttl_s) {
        return Err(format!("ttl_s is not from 1 to {MAX_GRANT_S}"));
    }
    if created.saturating_add(ttl_s) != expires {
        return Err("expires is not created + ttl_s".into());
    }
    let requested_ttl_s = match m.get("requested_ttl_s") {
        None => None,
        Some(_) => Some(number("requested_ttl_s")?).filter(|r| *r > ttl_s).map(Some).ok_or("requested_ttl_s is not more than ttl_s")?,
    };
    let action = match (scope, m.get("action")) {
        (Scope::Exact, Some(_)) => Some(text("action", 64)?).filter(|a| is_hex(a, 64)).map(Some).ok_or("action is not 64 hex digits")?,
        (Scope::Exact, None) => return Err("an exact grant without action".into()),
        (Scope::Session, Some(_)) => return Err("a session grant with an action".into()),
        (Scope::Session, None) => None,
    };
    let channel = Channel::parse(&text("channel", 16)?).ok_or("channel is not \"command\" or \"elicitation\"")?;
    let uid = u32::try_from(number("uid")?).map_err(|_| "uid is out of range".to_owned())?;
    Ok(Grant {
        id,
        scope,
        policy,
        created,
        expires,
        ttl_s,
        requested_ttl_s,
        action,
        tool: text("tool", MAX_SHOWN_NAME)?,
        target: text("target", MAX_SHOWN_TARGET)?,
        subject: text("subject", MAX_SHOWN_NAME)?,
        channel,
        uid,
    })
}

#[cfg(test)]
mod tests;
