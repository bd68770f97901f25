//! The audit journal (issue #5): every decision `sp` takes, one JSON line each,
//! hash-chained, written before the effect it announces.
//!
//! ```text
//!  frame ─ malformed ─────────────────────────────────> reject  (reason, bytes_in, request_fp of the raw bytes)
//!  request ─ refused (rpc, arguments, policy) ────────> reject  (decision = counter key, code, reason)
//!  authorized ─ approve-flagged? ─ approver ──────────> approval (approved | refused | timeout | failed | observed)
//!             └─ intent row, durable ── write failed ─> reject  audit_unavailable, SP_UNAVAILABLE, nothing runs
//!                   └─ execute ───────────────────────> result  (status / exit_status, bytes_out, truncated, duration_ms)
//!  startup / exit ────────────────────────────────────> start / end
//! ```
//!
//! # The file
//! JSON Lines, append-only (`O_APPEND`), created `0600`, opened with `O_NOFOLLOW`: a
//! symbolic link, a hard link (link count > 1), a FIFO, a device (so `/dev/full` and
//! `/dev/null` too), a file with any group or other permission bit, or one owned by
//! neither root nor the user `sp` runs as is refused (issue 8 point 10). It is opened
//! with `O_NONBLOCK`, so a FIFO is refused at once, never waited on (point 7). Each row is
//! appended with one `write` under an exclusive `flock`, taken for that append only, so
//! several `sp mcp` processes (one per agent session) can share one journal and one
//! chain: before appending, a writer checks that the path still names the file it opened
//! (device and inode) and that the file did not shrink; if it grew, the rows another `sp`
//! appended meanwhile are read and must chain on from the last row this writer knows. A
//! replaced or truncated file, or rows that do not chain, stop the journal for the rest
//! of the process: every later action is refused with `SP_UNAVAILABLE`. The lock is
//! waited for at most [`LOCK_WAIT`]; an `sp` that cannot get it refuses the action too.
//! With `fsync` (the default) each row is `fdatasync`ed before the action runs.
//!
//! # Rows
//! Fields, in this order, absent ones left out ([`FIELDS`]): `seq` (one sequence per
//! file), `ts` (RFC 3339 UTC, milliseconds), `session` (random per process), `kind`
//! (`start` `reject` `approval` `intent` `result` `end` `recover`), `tool`, `target`
//! (HTTP: method and `scheme://host[:port]/path`, never the query; SSH: host name and
//! command), `decision`, `rule`, `reason`, `code`, `request_fp`, `credential` (name),
//! `status` (HTTP), `exit_status` (SSH), `bytes_in` (malformed frames), `bytes_out`,
//! `truncated`, `duration_ms`, `host_key_fp`, `approver_exit`, `prev`, `hash`.
//! Free text (`target`, `reason`) is cut at [`MAX_TEXT`] bytes.
//!
//! `hash` = hex SHA-256 of `prev` (64 hex digits) immediately followed by the row as
//! written without its `hash` member. `prev` is the previous row's `hash`, or 64 zeros
//! ([`GENESIS`]) for a new file. A row is written in exactly one byte form (the field
//! order above, compact serde_json), so `sp audit verify` re-serializes what it parsed
//! and any byte edit is caught, even one that keeps the JSON meaning.
//!
//! # `request_fp`
//! For a well-formed request: SHA-256 of the compact JSON, keys sorted, of
//! `{"method": M, "params": P}` with `params._meta` removed. The JSON-RPC `id` and
//! `_meta` are left out, so the same request sent twice has the same fingerprint. It is
//! taken from what the agent sent, before authorization, so it never covers an injected
//! secret (the agent never has one). For a malformed frame: SHA-256 of the raw bytes
//! read for that frame (at most the line cap). A fingerprint of a guessable value can be
//! confirmed by guessing; it is meant for matching a request you hold, not for hiding it.
//!
//! # Decisions left open by the issue
//! - No `audit` section: the journal is `$XDG_STATE_HOME/sallyport/audit.jsonl`, else
//!   `$HOME/.local/state/sallyport/audit.jsonl` (the XDG default), the directories
//!   created `0700`. With neither variable set (MCP clients and `env -i` launchers often
//!   pass a filtered environment; images often have no `HOME`), `sp mcp` refuses to serve,
//!   exactly as for a journal it cannot open (issue 11: one rule, never a silent "no
//!   journal"). A relative `XDG_STATE_HOME` is ignored, as the XDG Base Directory spec
//!   says, and the messages say so. `"path": null` turns the journal off explicitly (a syslog copy, if set, still gets each row, without
//!   `seq`, `prev` and `hash`). A journal that is configured or defaulted but cannot be
//!   opened stops `sp mcp` at startup (exit 1): it never serves unjournaled.
//! - syslog copy: `"syslog": true` (or `{"socket": PATH, "facility": NAME}`) sends every
//!   row, after it is in the file, as one datagram to `/dev/log` in the traditional
//!   format `<PRI>sp[PID]: ROW` that journald, rsyslog, syslog-ng and busybox syslogd all
//!   accept (facility `authpriv` by default; severity notice for rejections and refused
//!   approvals, info otherwise). It is synchronous with a 1 s send timeout and best
//!   effort: the file is the record; a copy that cannot be sent is a warning (once per
//!   process), never a reason to refuse an action. Rows longer than 8 KiB are cut in the
//!   copy (the file has them whole). journald's native protocol was not chosen: `/dev/log`
//!   reaches every syslog daemon, and journald listens there too.

use std::fmt;
use std::fs::File;
use std::io::{BufRead, Read, Seek, SeekFrom, Write};
use std::os::unix::net::UnixDatagram;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use serde_json::{json, Map, Value};
use sha2::{Digest, Sha256};


/// `prev` of the first row of a file.
pub const GENESIS: &str = "0000000000000000000000000000000000000000000000000000000000000000";

/// The order fields are written in; unknown fields (none today) would follow, sorted.
pub const FIELDS: [&str; 22] = [
    "seq", "ts", "session", "kind", "tool", "target", "decision", "rule", "reason", "code", "request_fp", "credential", "status",
    "exit_status", "bytes_in", "bytes_out", "truncated", "duration_ms", "host_key_fp", "approver_exit", "prev", "hash",
];

/// Longest `target` or `reason` written (bytes, cut at a character boundary).
pub const MAX_TEXT: usize = 1024;

/// How long an append waits for another `sp` to finish its own.
pub const LOCK_WAIT: Duration = Duration::from_secs(2);

/// Longest line `sp audit` and the tail reader accept.
pub const MAX_ROW_BYTES: usize = 1024 * 1024;

const SYSLOG_MAX: usize = 8 * 1024;

// ---------------------------------------------------------------------------------------
// Policy section

pub use crate::policy::audit::{AuditPolicy, JournalPath, SyslogConfig};

/// Where the journal goes when the policy does not say: `$XDG_STATE_HOME/sallyport/`,
/// else `$HOME/.local/state/sallyport/` (only absolute values count).
pub fn default_path(env: impl Fn(&str) -> Option<String>) -> Option<PathBuf> {
    default_location(env).ok()
}

/// [`default_path`], or why there is none (for the refusal and `sp check`).
pub fn default_location(env: impl Fn(&str) -> Option<String>) -> Result<PathBuf, String> {
    let xdg = env("XDG_STATE_HOME").filter(|s| !s.is_empty());
    if let Some(x) = xdg.as_ref().filter(|s| s.starts_with('/')) {
        return Ok(PathBuf::from(x).join("sallyport/audit.jsonl"));
    }
    if let Some(h) = env("HOME").filter(|s| s.starts_with('/')) {
        return Ok(PathBuf::from(h).join(".local/state/sallyport/audit.jsonl"));
    }
    Err(match xdg {
        Some(x) => format!(
            "the policy has no audit.path, XDG_STATE_HOME ({x:?}) is ignored because it is not an absolute path \
             (XDG Base Directory spec), and HOME is not set to an absolute path"
        ),
        None => "the policy has no audit.path and neither XDG_STATE_HOME nor HOME is set".into(),
    })
}

/// The warning for a relative `XDG_STATE_HOME` that was skipped for `$HOME`, if any.
fn relative_xdg_note(env: impl Fn(&str) -> Option<String>) -> Option<String> {
    env("XDG_STATE_HOME")
        .filter(|s| !s.is_empty() && !s.starts_with('/'))
        .map(|x| format!("XDG_STATE_HOME ({x:?}) is ignored because it is not an absolute path (XDG Base Directory spec)"))
}

/// `sp check`'s line for the section.
pub fn check_summary(p: &AuditPolicy, env: impl Fn(&str) -> Option<String>) -> String {
    let path = match &p.journal {
        JournalPath::Path(path) => path.display().to_string(),
        JournalPath::Off => "off (audit.path is null)".into(),
        JournalPath::Default => match default_location(&env) {
            Ok(path) => match relative_xdg_note(&env) {
                Some(note) => format!("{} (default; {note})", path.display()),
                None => format!("{} (default)", path.display()),
            },
            Err(why) => format!("none: {why}; sp mcp refuses to serve (set audit.path, or \"path\": null for no journal)"),
        },
    };
    let syslog = match &p.syslog {
        Some(s) => format!("{} facility {}", s.socket.display(), s.facility_name),
        None => "no".into(),
    };
    format!("audit: journal {path}, fsync {}, syslog copy {syslog}\n", if p.fsync { "yes" } else { "no" })
}

// ---------------------------------------------------------------------------------------
// Hashing, canonical form, time

pub fn sha256_hex(parts: &[&[u8]]) -> String {
    let mut h = Sha256::new();
    for p in parts {
        h.update(p);
    }
    hex(&h.finalize())
}

fn hex(bytes: &[u8]) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut s = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        s.push(DIGITS[usize::from(b >> 4)] as char);
        s.push(DIGITS[usize::from(b & 15)] as char);
    }
    s
}

/// Compact JSON with object keys sorted at every depth.
pub fn canonical_json(v: &Value) -> String {
    let mut out = String::new();
    write_canonical(v, &mut out);
    out
}

fn write_canonical(v: &Value, out: &mut String) {
    match v {
        Value::Object(m) => {
            let mut keys: Vec<&String> = m.keys().collect();
            keys.sort();
            out.push('{');
            for (i, k) in keys.into_iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                out.push_str(&Value::String(k.clone()).to_string());
                out.push(':');
                write_canonical(&m[k], out);
            }
            out.push('}');
        }
        Value::Array(a) => {
            out.push('[');
            for (i, x) in a.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_canonical(x, out);
            }
            out.push(']');
        }
        scalar => out.push_str(&scalar.to_string()),
    }
}

/// `request_fp` of a well-formed request (see the module docs).
pub fn request_fp(method: &str, params: Option<&Value>) -> String {
    let mut params = params.cloned().unwrap_or(Value::Null);
    if let Value::Object(m) = &mut params {
        m.remove("_meta");
    }
    sha256_hex(&[canonical_json(&json!({"method": method, "params": params})).as_bytes()])
}

/// `request_fp` of a malformed frame: its raw bytes.
pub fn raw_fp(raw: &[u8]) -> String {
    sha256_hex(&[raw])
}

/// RFC 3339 in UTC with milliseconds: `2026-05-01T12:34:56.789Z`.
pub fn rfc3339(t: SystemTime) -> String {
    let d = t.duration_since(UNIX_EPOCH).unwrap_or_default();
    let secs = d.as_secs();
    let (days, rem) = (secs / 86_400, secs % 86_400);
    // Howard Hinnant's civil_from_days, for days since 1970-01-01 (non-negative here).
    let z = days as i64 + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}.{:03}Z",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60,
        d.subsec_millis()
    )
}

/// A random session id: 16 hex digits from the kernel's generator.
pub fn session_id() -> String {
    let mut bytes = [0u8; 8];
    let ok = File::open("/dev/urandom").and_then(|mut f| f.read_exact(&mut bytes)).is_ok();
    if !ok {
        // No /dev/urandom (a very bare chroot): std's per-process random hasher keys.
        use std::hash::{BuildHasher, Hasher};
        let mut h = std::collections::hash_map::RandomState::new().build_hasher();
        h.write_u32(std::process::id());
        h.write_u128(SystemTime::now().duration_since(UNIX_EPOCH).unwrap_or_default().as_nanos());
        bytes = h.finish().to_be_bytes();
    }
    hex(&bytes)
}

/// Cuts `s` to at most [`MAX_TEXT`] bytes at a character boundary, saying how much went.
pub fn cap(s: &str) -> String {
    let kept = crate::sys::cut(s, MAX_TEXT);
    if kept.len() == s.len() {
        return s.to_owned();
    }
    format!("{kept}…[+{} bytes]", s.len() - kept.len())
}

/// The one byte form of a row: [`FIELDS`] order, then any other keys sorted; compact.
pub fn serialize_row(row: &Map<String, Value>, with_hash: bool) -> String {
    let mut out = String::from("{");
    let push = |k: &str, v: &Value, out: &mut String| {
        if out.len() > 1 {
            out.push(',');
        }
        out.push_str(&Value::String(k.to_owned()).to_string());
        out.push(':');
        write_canonical(v, out);
    };
    for k in FIELDS {
        if k == "hash" && !with_hash {
            continue;
        }
        if let Some(v) = row.get(k) {
            push(k, v, &mut out);
        }
    }
    let mut rest: Vec<&String> = row.keys().filter(|k| !FIELDS.contains(&k.as_str())).collect();
    rest.sort();
    for k in rest {
        push(k, &row[k], &mut out);
    }
    out.push('}');
    out
}

/// `hash` of a row whose `prev` is set.
pub fn row_hash(prev: &str, row: &Map<String, Value>) -> String {
    sha256_hex(&[prev.as_bytes(), serialize_row(row, false).as_bytes()])
}

// ---------------------------------------------------------------------------------------
// Rows

/// A row being built; [`Journal::write`] adds `seq`, `ts`, `session`, `prev`, `hash`.
#[derive(Debug, Clone, PartialEq)]
pub struct Row(Map<String, Value>);

impl Row {
    pub fn new(kind: &str) -> Row {
        let mut m = Map::new();
        m.insert("kind".into(), Value::String(kind.to_owned()));
        Row(m)
    }

    /// Sets a field (`None` leaves it out). Text is capped at [`MAX_TEXT`] when written,
    /// after scrubbing (a cap first could cut a secret past recognition).
    pub fn set(mut self, key: &'static str, value: impl Into<Value>) -> Row {
        debug_assert!(FIELDS.contains(&key), "{key} is not a journal field");
        let v = value.into();
        if v.is_null() {
            self.0.remove(key);
        } else {
            self.0.insert(key.to_owned(), v);
        }
        self
    }

    pub fn get(&self, key: &str) -> Option<&Value> {
        self.0.get(key)
    }

    pub fn kind(&self) -> &str {
        self.0.get("kind").and_then(Value::as_str).unwrap_or_default()
    }
}

/// What the server knows about the request being handled; every row written for it
/// carries these fields. Reset for each message.
#[derive(Debug, Default, Clone)]
pub struct Context {
    pub request_fp: Option<String>,
    pub tool: Option<String>,
    pub target: Option<String>,
    pub credential: Option<String>,
    pub rule: Option<String>,
    /// The intent row's `decision`: `allow`, `approved` or `observe`.
    pub intent: Option<&'static str>,
    /// HTTP: status, body bytes, truncated, of the last hop.
    pub http: Option<(u16, u64, bool)>,
    /// A malformed frame's length.
    pub bytes_in: Option<u64>,
    pub started: Option<Instant>,
}

impl Context {
    pub fn row(&self, kind: &str) -> Row {
        Row::new(kind)
            .set("tool", self.tool.clone())
            .set("target", self.target.clone())
            .set("rule", self.rule.clone())
            .set("request_fp", self.request_fp.clone())
            .set("credential", self.credential.clone())
            .set("bytes_in", self.bytes_in)
    }

    pub fn elapsed_ms(&self) -> Option<u64> {
        self.started.map(|t| t.elapsed().as_millis() as u64)
    }
}

/// HTTP `target`: method and `scheme://host[:port]/path`, no query, no userinfo.
pub fn http_target(method: &str, url: &url::Url) -> String {
    let port = url.port().map(|p| format!(":{p}")).unwrap_or_default();
    format!("{method} {}://{}{port}{}", url.scheme(), url.host_str().unwrap_or_default(), url.path())
}

/// `target` of a typed call, before authorization.
pub fn call_target(call: &crate::tools::ToolCall) -> Option<String> {
    match call {
        crate::tools::ToolCall::Http(r) => Some(http_target(r.method.as_str(), &r.url)),
        crate::tools::ToolCall::Ssh(s) => Some(format!("{} {}", s.host, s.command)),
        crate::tools::ToolCall::Inventory => None,
    }
}

// ---------------------------------------------------------------------------------------
// Errors

#[derive(Debug, PartialEq, Eq)]
pub enum AuditError {
    /// The journal cannot be opened (startup).
    Open { path: PathBuf, why: String },
    /// No `audit.path` and no usable default location (startup).
    NoLocation { why: String },
    /// Another process kept the lock past [`LOCK_WAIT`].
    Locked { path: PathBuf },
    /// The file was replaced, removed, truncated or edited under us: stopped for good.
    Tampered { path: PathBuf, why: String },
    /// Writing failed (disk full, I/O error).
    Write { path: PathBuf, why: String },
}

impl fmt::Display for AuditError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            AuditError::Open { path, why } => write!(f, "audit journal {}: {why}", path.display()),
            AuditError::NoLocation { why } => write!(
                f,
                "no audit journal location: {why}; set audit.path in the policy (or \"audit\": {{\"path\": null}} to serve without a journal)"
            ),
            AuditError::Locked { path } => write!(
                f,
                "audit journal {}: another process has held its lock for more than {}s",
                path.display(),
                LOCK_WAIT.as_secs()
            ),
            AuditError::Tampered { path, why } => {
                write!(f, "audit journal {}: {why}; journaling stopped, no further action runs", path.display())
            }
            AuditError::Write { path, why } => write!(f, "audit journal {}: write failed: {why}", path.display()),
        }
    }
}

fn io_why(e: &std::io::Error) -> String {
    match e.raw_os_error() {
        Some(code) => rustix::io::Errno::from_raw_os_error(code).to_string(),
        None => e.to_string(),
    }
}

// ---------------------------------------------------------------------------------------
// The journal

/// The writer `sp mcp` holds. [`Journal::off`] writes nowhere (no journal configured,
/// and in-process tests).
pub struct Journal {
    file: Option<FileJournal>,
    syslog: Option<Syslog>,
    session: String,
    /// Rows this process wrote.
    pub written: u64,
}

struct FileJournal {
    file: File,
    path: PathBuf,
    dev: u64,
    ino: u64,
    /// Bytes of the file known to hold verified rows.
    size: u64,
    seq: u64,
    prev: String,
    fsync: bool,
    /// Set once the file was found replaced or edited: never written again.
    stopped: Option<String>,
}

impl fmt::Debug for Journal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Journal").field("path", &self.path()).field("session", &self.session).finish()
    }
}

impl Journal {
    pub fn off() -> Journal {
        Journal { file: None, syslog: None, session: session_id(), written: 0 }
    }

    /// Opens the journal the policy asks for (resolving the default with `env`), or
    /// none. Errors mean: do not serve.
    pub fn for_policy(p: &AuditPolicy, env: impl Fn(&str) -> Option<String>) -> Result<Journal, AuditError> {
        let mut j = Journal::off();
        let path = match &p.journal {
            JournalPath::Off => {
                log::info!("the audit journal is off (audit.path is null)");
                None
            }
            JournalPath::Path(path) => Some(path.clone()),
            // Issue 11: no location is refused like an unwritable one.
            JournalPath::Default => match default_location(&env) {
                Ok(path) => {
                    if let Some(note) = relative_xdg_note(&env) {
                        log::warn!("{note}; the journal goes to {}", path.display());
                    }
                    create_private_dirs(&path)?;
                    Some(path)
                }
                Err(why) => return Err(AuditError::NoLocation { why }),
            },
        };
        if let Some(path) = path {
            j.file = Some(FileJournal::open(&path, p.fsync, &j.session)?);
        }
        if let Some(s) = &p.syslog {
            j.syslog = Some(Syslog::new(s));
        }
        Ok(j)
    }

    /// Opens (creating it if needed) the journal file at `path`.
    pub fn open(path: &Path, fsync: bool) -> Result<Journal, AuditError> {
        let mut j = Journal::off();
        j.file = Some(FileJournal::open(path, fsync, &j.session)?);
        Ok(j)
    }

    pub fn path(&self) -> Option<&Path> {
        self.file.as_ref().map(|f| f.path.as_path())
    }

    pub fn session(&self) -> &str {
        &self.session
    }

    /// Appends one row (durably when `fsync` is on) and copies it to syslog. `Ok` with
    /// no journal configured. Returns the row as written.
    pub fn write(&mut self, row: Row) -> Result<Option<String>, AuditError> {
        let mut m = row.0;
        scrub_row(&mut m);
        let kind = m.get("kind").and_then(Value::as_str).unwrap_or_default();
        let decision = m.get("decision").and_then(Value::as_str).unwrap_or_default();
        let notice = kind == "reject" || (kind == "approval" && decision != "approved" && decision != "observed");
        m.insert("session".into(), Value::String(self.session.clone()));
        let Some(file) = self.file.as_mut() else {
            m.insert("ts".into(), Value::String(rfc3339(SystemTime::now())));
            // No file ("path": null, or no default location): the syslog copy, if any,
            // still gets the row, without the chain fields only a file can give.
            if let Some(s) = self.syslog.as_mut() {
                s.send(&serialize_row(&m, false), notice);
            }
            return Ok(None);
        };
        let line = file.append(m)?;
        self.written += 1;
        if let Some(s) = self.syslog.as_mut() {
            s.send(&line, notice);
        }
        Ok(Some(line))
    }

    /// Like [`Journal::write`] for rows no action depends on (rejections, results): a
    /// failure is logged, not returned.
    pub fn record(&mut self, row: Row) {
        if let Err(e) = self.write(row) {
            log::error!("{e}");
        }
    }
}

/// Fields `sp` itself computes (hashes, counters, its own words): never scrubbed, so a
/// short secret cannot rewrite a fingerprint.
const OWN_FIELDS: [&str; 5] = ["kind", "decision", "request_fp", "host_key_fp", "session"];

/// Issue 8 point 3: every other text field of every row (target, reason, code, rule,
/// credential, ... and any field added later) goes through the answers' redactor, against
/// every secret read in this process, here in the one place rows are written.
fn scrub_row(m: &mut Map<String, Value>) {
    let vault = crate::secret::process_vault();
    for (k, v) in m.iter_mut() {
        if !OWN_FIELDS.contains(&k.as_str()) {
            vault.scrub(v);
        }
        if let Value::String(s) = v {
            *s = cap(s);
        }
    }
}

fn create_private_dirs(path: &Path) -> Result<(), AuditError> {
    use std::os::unix::fs::DirBuilderExt;
    let Some(dir) = path.parent() else { return Ok(()) };
    std::fs::DirBuilder::new().recursive(true).mode(0o700).create(dir).map_err(|e| AuditError::Open {
        path: path.to_owned(),
        why: format!("cannot create {}: {}", dir.display(), io_why(&e)),
    })
}

/// Held while appending; released on drop (and by the kernel if the process dies).
fn lock<'f>(file: &'f File, path: &Path) -> Result<crate::sys::FileLock<'f>, AuditError> {
    crate::sys::lock_exclusive(file, LOCK_WAIT).map_err(|e| match e {
        crate::sys::LockError::Busy { .. } => AuditError::Locked { path: path.to_owned() },
        e => AuditError::Write { path: path.to_owned(), why: format!("cannot lock: {e}") },
    })
}

impl FileJournal {
    fn open(path: &Path, fsync: bool, session: &str) -> Result<FileJournal, AuditError> {
        use rustix::fs::{FileType, Mode, OFlags};
        let fail = |why: String| AuditError::Open { path: path.to_owned(), why };
        if !path.is_absolute() {
            return Err(fail("must be an absolute path".into()));
        }
        // Not opened at all when the name is something else than a regular file now
        // (issue 8 point 7): opening a device for writing can have effects.
        if let Ok(st) = rustix::fs::lstat(path) {
            match FileType::from_raw_mode(st.st_mode) {
                FileType::RegularFile => {}
                FileType::Symlink => return Err(fail("is a symbolic link (refused: the journal must be the file named)".into())),
                _ => return Err(fail(format!("is a {}, not a regular file (refused without opening it)", crate::sys::kind_name(st.st_mode)))),
            }
        }
        // O_NONBLOCK: opening a FIFO swapped in meanwhile must not hang; it is refused below.
        let flags = OFlags::RDWR | OFlags::APPEND | OFlags::CREATE | OFlags::NOFOLLOW | OFlags::CLOEXEC | OFlags::NOCTTY | OFlags::NONBLOCK;
        let fd = rustix::fs::open(path, flags, Mode::from_raw_mode(0o600)).map_err(|e| match e {
            rustix::io::Errno::LOOP => fail("is a symbolic link (refused: the journal must be the file named)".into()),
            e => fail(format!("cannot open: {e}")),
        })?;
        let st = rustix::fs::fstat(&fd).map_err(|e| fail(format!("cannot stat: {e}")))?;
        match FileType::from_raw_mode(st.st_mode) {
            FileType::RegularFile => {}
            _ => return Err(fail(format!("is a {}, not a regular file", crate::sys::kind_name(st.st_mode)))),
        }
        if st.st_nlink > 1 {
            return Err(fail(format!("has {} hard links (refused: a second name could be used to edit it)", st.st_nlink)));
        }
        // Issue 8 point 10: the journal records what the agent sent (URLs, commands):
        // no group or other access at all, owned by this user (or root).
        if st.st_mode & 0o077 != 0 {
            return Err(fail(format!(
                "permissions {:04o} give group or others access (fix: chmod go-rwx {})",
                st.st_mode & 0o7777,
                path.display()
            )));
        }
        if st.st_uid != 0 && st.st_uid != crate::sys::euid() {
            return Err(fail(format!("is owned by uid {}, neither root nor the user sp runs as (fix: chown it, or name another journal)", st.st_uid)));
        }
        let file = File::from(fd);
        let mut j = FileJournal {
            file,
            path: path.to_owned(),
            dev: st.st_dev,
            ino: st.st_ino,
            size: 0,
            seq: 0,
            prev: GENESIS.to_owned(),
            fsync,
            stopped: None,
        };
        let created = st.st_size == 0;
        {
            // A second descriptor of the same open file: the lock belongs to both.
            let locked = j.file.try_clone().map_err(|e| fail(io_why(&e)))?;
            let _lock = lock(&locked, path).map_err(|e| fail(e.to_string()))?;
            j.load_tail(session).map_err(fail)?;
        }
        if created && fsync {
            // The new directory entry must survive a crash as well as the rows.
            if let Some(dir) = path.parent() {
                let _ = File::open(dir).and_then(|d| d.sync_all());
            }
        }
        Ok(j)
    }

    /// Under the lock, at open: learn `seq`, `prev` and `size` from the last row. A torn
    /// last row (a crash mid-write, power loss) is cut off and recorded by a `recover`
    /// row; a last row that does not verify stops `sp` (run `sp audit verify`).
    fn load_tail(&mut self, session: &str) -> Result<(), String> {
        let size = self.file.metadata().map_err(|e| io_why(&e))?.len();
        if size == 0 {
            return Ok(());
        }
        let start = size.saturating_sub(MAX_ROW_BYTES as u64 + 1);
        let mut tail = Vec::new();
        let mut f = &self.file;
        f.seek(SeekFrom::Start(start)).and_then(|_| f.take(size - start).read_to_end(&mut tail)).map_err(|e| io_why(&e))?;
        let mut torn = None;
        if tail.last() != Some(&b'\n') {
            let keep = tail.iter().rposition(|b| *b == b'\n').map_or(0, |i| i + 1);
            if keep == 0 && start > 0 {
                return Err("the last row is longer than 1 MiB and has no end: not a journal sp wrote".into());
            }
            torn = Some((tail.len() - keep, raw_fp(&tail[keep..])));
            tail.truncate(keep);
        }
        let whole = start + tail.len() as u64;
        if let Some(body) = tail.strip_suffix(b"\n") {
            let last = match body.iter().rposition(|b| *b == b'\n') {
                Some(i) => &body[i + 1..],
                None if start == 0 => body,
                None => return Err("the last row is longer than 1 MiB: not a journal sp wrote".into()),
            };
            let row = parse_row(last).map_err(|why| format!("its last row {why}; run `sp audit verify` and move the file away"))?;
            self.seq = row.seq;
            self.prev = row.hash;
        }
        self.size = whole;
        if let Some((len, fp)) = torn {
            log::warn!("audit journal {}: cutting off a torn last row ({len} bytes) left by a crash", self.path.display());
            self.file.set_len(whole).map_err(|e| io_why(&e))?;
            let mut m = Row::new("recover")
                .set("reason", format!("a torn last row ({len} bytes, no newline) left by an interrupted writer was cut off"))
                .set("bytes_in", len as u64)
                .set("request_fp", fp)
                .0;
            m.insert("session".into(), Value::String(session.to_owned()));
            self.append_locked(m).map_err(|e| e.to_string())?;
        }
        Ok(())
    }

    fn append(&mut self, row: Map<String, Value>) -> Result<String, AuditError> {
        if let Some(why) = &self.stopped {
            return Err(AuditError::Tampered { path: self.path.clone(), why: why.clone() });
        }
        let file = self.file.try_clone().map_err(|e| AuditError::Write { path: self.path.clone(), why: io_why(&e) })?;
        let _lock = lock(&file, &self.path)?;
        if let Err(why) = self.check_file() {
            self.stopped = Some(why.clone());
            return Err(AuditError::Tampered { path: self.path.clone(), why });
        }
        self.append_locked(row)
    }

    /// Same file as opened, not shrunk; rows other writers appended meanwhile chain on.
    fn check_file(&mut self) -> Result<(), String> {
        let now = rustix::fs::lstat(&self.path).map_err(|e| format!("the path no longer names the file (it was removed or moved: {e})"))?;
        if (now.st_dev, now.st_ino) != (self.dev, self.ino) {
            return Err("the file was replaced under sp (another file now has its name)".into());
        }
        let size = self.file.metadata().map_err(|e| io_why(&e))?.len();
        if size < self.size {
            return Err(format!("the file was truncated under sp ({} bytes, {} expected)", size, self.size));
        }
        if size > self.size {
            self.catch_up(size)?;
        }
        Ok(())
    }

    /// Reads the rows another `sp` appended since our last write; each must verify and
    /// chain on from the last row we know.
    fn catch_up(&mut self, size: u64) -> Result<(), String> {
        let mut f = &self.file;
        f.seek(SeekFrom::Start(self.size)).map_err(|e| io_why(&e))?;
        let mut r = std::io::BufReader::new(f.take(size - self.size));
        while let Some((line, terminated)) = read_line(&mut r).map_err(|e| io_why(&e))? {
            if !terminated {
                return Err("another writer left a partial row".into());
            }
            let row = parse_row(&line).map_err(|why| format!("a row appended by another writer {why}"))?;
            if row.prev != self.prev || row.seq != self.seq + 1 {
                return Err(format!("a row appended by another writer (seq {}) does not chain on from seq {}", row.seq, self.seq));
            }
            self.seq = row.seq;
            self.prev = row.hash;
        }
        self.size = size;
        Ok(())
    }

    fn append_locked(&mut self, mut row: Map<String, Value>) -> Result<String, AuditError> {
        let write_err = |why: String| AuditError::Write { path: self.path.clone(), why };
        // Stamped under the lock: across writers, `ts` follows `seq`.
        row.insert("ts".into(), Value::String(rfc3339(SystemTime::now())));
        row.insert("seq".into(), Value::from(self.seq + 1));
        row.insert("prev".into(), Value::String(self.prev.clone()));
        let hash = row_hash(&self.prev, &row);
        row.insert("hash".into(), Value::String(hash.clone()));
        let line = serialize_row(&row, true);
        let mut bytes = line.clone().into_bytes();
        bytes.push(b'\n');
        if let Err(e) = (&self.file).write_all(&bytes) {
            // Never leave half a row: take back whatever part was written.
            let _ = self.file.set_len(self.size);
            return Err(write_err(io_why(&e)));
        }
        self.size += bytes.len() as u64;
        self.seq += 1;
        self.prev = hash;
        if self.fsync {
            self.file.sync_data().map_err(|e| write_err(format!("fdatasync: {}", io_why(&e))))?;
        }
        Ok(line)
    }
}

// ---------------------------------------------------------------------------------------
// syslog copy

struct Syslog {
    socket: Option<UnixDatagram>,
    path: PathBuf,
    facility: u8,
    warned: bool,
}

impl Syslog {
    fn new(c: &SyslogConfig) -> Syslog {
        let mut s = Syslog { socket: None, path: c.socket.clone(), facility: c.facility, warned: false };
        if let Err(e) = s.connect() {
            log::warn!("syslog copy: cannot connect to {}: {e}; will retry with each row", s.path.display());
            s.warned = true;
        }
        s
    }

    fn connect(&mut self) -> std::io::Result<()> {
        let sock = UnixDatagram::unbound()?;
        sock.set_write_timeout(Some(Duration::from_secs(1)))?;
        sock.connect(&self.path)?;
        self.socket = Some(sock);
        Ok(())
    }

    fn send(&mut self, line: &str, notice: bool) {
        let severity = if notice { 5 } else { 6 };
        let body = crate::sys::cut(line, SYSLOG_MAX);
        let msg = format!("<{}>sp[{}]: {body}", u32::from(self.facility) * 8 + severity, std::process::id());
        let mut result = Err(std::io::Error::other("not connected"));
        for _ in 0..2 {
            if self.socket.is_none() && self.connect().is_err() {
                continue;
            }
            if let Some(s) = &self.socket {
                result = s.send(msg.as_bytes()).map(|_| ());
                if result.is_ok() {
                    return;
                }
            }
            // The daemon restarted (ECONNREFUSED) or went away: reconnect once.
            self.socket = None;
        }
        if !self.warned {
            self.warned = true;
            if let Err(e) = result {
                log::warn!("syslog copy to {} failed: {e} (the journal file has every row)", self.path.display());
            }
        }
    }
}

// ---------------------------------------------------------------------------------------
// Verification (`sp audit verify`, and the writer's own checks)

/// A row that parsed and whose hash matches its content.
#[derive(Debug, Clone, PartialEq)]
pub struct ParsedRow {
    pub seq: u64,
    pub prev: String,
    pub hash: String,
    pub fields: Map<String, Value>,
}

/// Parses one line (without its newline) and checks it against itself: one JSON object
/// in the exact form `sp` writes, with `seq`, `prev`, `hash`, and a hash that matches.
/// The error completes "row N ...".
pub fn parse_row(line: &[u8]) -> Result<ParsedRow, String> {
    let text = std::str::from_utf8(line).map_err(|_| "is not UTF-8 (edited or corrupted)".to_owned())?;
    let value = crate::json::parse(text).map_err(|e| format!("is not a journal row ({e}): edited or corrupted"))?;
    let Value::Object(fields) = value else {
        return Err("is not a JSON object: edited or corrupted".into());
    };
    let seq = fields.get("seq").and_then(Value::as_u64).filter(|s| *s > 0);
    let prev = fields.get("prev").and_then(Value::as_str).filter(|s| is_hash(s));
    let hash = fields.get("hash").and_then(Value::as_str).filter(|s| is_hash(s));
    let (Some(seq), Some(prev), Some(hash)) = (seq, prev, hash) else {
        return Err("lacks a valid seq, prev or hash: edited or corrupted".into());
    };
    if serialize_row(&fields, true).as_bytes() != line {
        return Err("is edited: its bytes differ from the one form sp writes".into());
    }
    if row_hash(prev, &fields) != hash {
        return Err("is edited: its hash does not match its content".into());
    }
    Ok(ParsedRow { seq, prev: prev.to_owned(), hash: hash.to_owned(), fields })
}

fn is_hash(s: &str) -> bool {
    s.len() == 64 && s.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
}

/// The outcome of verifying a whole file.
#[derive(Debug, PartialEq)]
pub struct Verified {
    pub rows: u64,
    pub first_seq: Option<u64>,
    pub last_seq: Option<u64>,
    /// `hash` of the last row (or the start point for an empty file): the anchor for the
    /// next verification.
    pub last_hash: String,
    /// Line number of the row whose hash is the anchor (0: the anchor is the start).
    pub anchor_row: Option<u64>,
}

/// The first defect found: its 1-based line number and what is wrong.
#[derive(Debug, PartialEq, Eq)]
pub struct Broken {
    pub row: u64,
    pub why: String,
}

/// One line of a journal: its bytes without the newline, and whether it had one.
/// Lines longer than [`MAX_ROW_BYTES`] come back cut, as not terminated.
pub fn read_line(r: &mut impl BufRead) -> std::io::Result<Option<(Vec<u8>, bool)>> {
    let mut line = Vec::new();
    let n = r.by_ref().take(MAX_ROW_BYTES as u64 + 1).read_until(b'\n', &mut line)?;
    if n == 0 {
        return Ok(None);
    }
    let terminated = line.last() == Some(&b'\n');
    if terminated {
        line.pop();
    }
    Ok(Some((line, terminated)))
}

/// Verifies a journal held in memory (see [`verify_reader`]).
pub fn verify(bytes: &[u8], anchor: Option<&str>) -> Result<Verified, Broken> {
    verify_reader(std::io::Cursor::new(bytes), anchor)
}

/// Verifies a journal from its first row, streaming (memory does not grow with the
/// file). The first row's `prev` must be [`GENESIS`] or `anchor`; with `anchor`, it
/// must also be the first row's `prev` or some row's `hash` (the file holds the state
/// the operator recorded, unchanged). Rows other writers interleaved are one chain:
/// `seq` rises by one per row across sessions. When a row does not chain on, a second
/// pass finds where its `prev` is, to tell a swap from a removal.
pub fn verify_reader<R: BufRead + Seek>(mut r: R, anchor: Option<&str>) -> Result<Verified, Broken> {
    if anchor.is_some_and(|a| !is_hash(a)) {
        return Err(Broken { row: 0, why: "the anchor must be 64 lowercase hex digits (a row's hash)".into() });
    }
    let mut prev_hash: Option<String> = None;
    let (mut prev_seq, mut first_seq, mut anchor_row, mut n) = (0, None, None, 0u64);
    loop {
        let line = read_line(&mut r).map_err(|e| Broken { row: n + 1, why: format!("cannot be read: {}", io_why(&e)) })?;
        let Some((line, terminated)) = line else { break };
        n += 1;
        if !terminated {
            let why = if line.len() > MAX_ROW_BYTES {
                "is longer than 1 MiB: not a row sp wrote (edited or corrupted)".to_owned()
            } else {
                format!(
                    "is torn: the file ends inside it ({} bytes, no newline): the writer stopped mid-row (a crash); rows 1..{} are whole",
                    line.len(),
                    n - 1
                )
            };
            return Err(Broken { row: n, why });
        }
        let row = parse_row(&line).map_err(|why| Broken { row: n, why })?;
        match &prev_hash {
            None => {
                let starts = row.prev == GENESIS || Some(row.prev.as_str()) == anchor;
                if !starts {
                    return Err(Broken {
                        row: n,
                        why: "does not start a chain: its prev is neither the genesis value nor the anchor (rows before it were \
                              removed; if that was an archive cut, pass its last hash with --anchor)"
                            .into(),
                    });
                }
                if Some(row.prev.as_str()) == anchor {
                    anchor_row = Some(0);
                }
                first_seq = Some(row.seq);
            }
            Some(expected) if row.prev != *expected => {
                let why = match find_hash(&mut r, &row.prev) {
                    Some(j) if j > n => format!("is out of order: it chains on from row {j}, which comes after it (rows were swapped or moved)"),
                    Some(j) => format!("is out of order: it chains on from row {j} instead of row {} (rows were moved or duplicated)", n - 1),
                    None if row.seq > prev_seq + 1 => format!(
                        "follows a gap: seq jumps from {prev_seq} to {} and its prev matches no row (row(s) removed before it)",
                        row.seq
                    ),
                    None if row.seq <= prev_seq => format!("is out of order: seq {} after seq {prev_seq}", row.seq),
                    None => format!(
                        "does not chain on from row {}: its prev is not that row's hash (a row was edited and re-hashed, or replaced)",
                        n - 1
                    ),
                };
                return Err(Broken { row: n, why });
            }
            Some(_) if row.seq != prev_seq + 1 => {
                return Err(Broken { row: n, why: format!("has seq {} where {} was due", row.seq, prev_seq + 1) });
            }
            Some(_) => {}
        }
        if Some(row.hash.as_str()) == anchor {
            anchor_row = Some(n);
        }
        prev_hash = Some(row.hash);
        prev_seq = row.seq;
    }
    if let (Some(a), None) = (anchor, anchor_row) {
        return Err(Broken {
            row: n + 1,
            why: format!("the anchor {a} is neither the first row's prev nor any row's hash: the rows it pinned were removed or rewritten"),
        });
    }
    Ok(Verified {
        rows: n,
        first_seq,
        last_seq: (n > 0).then_some(prev_seq),
        last_hash: prev_hash.unwrap_or_else(|| anchor.unwrap_or(GENESIS).to_owned()),
        anchor_row,
    })
}

/// The line number of the row whose `hash` is `hash`, if any (a second pass).
fn find_hash<R: BufRead + Seek>(r: &mut R, hash: &str) -> Option<u64> {
    r.seek(SeekFrom::Start(0)).ok()?;
    let mut n = 0;
    while let Ok(Some((line, _))) = read_line(r) {
        n += 1;
        if parse_row(&line).is_ok_and(|row| row.hash == hash) {
            return Some(n);
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rfc3339_known_values() {
        let at = |s: u64, ms: u64| rfc3339(UNIX_EPOCH + Duration::from_millis(s * 1000 + ms));
        assert_eq!(at(0, 0), "1970-01-01T00:00:00.000Z");
        assert_eq!(at(951_782_400, 5), "2000-02-29T00:00:00.005Z");
        assert_eq!(at(1_709_251_199, 999), "2024-02-29T23:59:59.999Z");
        assert_eq!(at(4_102_444_800, 0), "2100-01-01T00:00:00.000Z");
        assert_eq!(at(1_234_567_890, 0), "2009-02-13T23:31:30.000Z");
    }

    #[test]
    fn canonical_json_sorts_keys_at_every_depth() {
        let v = json!({"b": [1, {"z": 1, "a": "x\n"}], "a": null});
        assert_eq!(canonical_json(&v), r#"{"a":null,"b":[1,{"a":"x\n","z":1}]}"#);
    }

    #[test]
    fn request_fp_ignores_meta_and_key_order() {
        let a = request_fp("tools/call", Some(&json!({"name": "x", "arguments": {"a": 1, "b": 2}, "_meta": {"progressToken": 7}})));
        let b = request_fp("tools/call", Some(&json!({"arguments": {"b": 2, "a": 1}, "name": "x"})));
        assert_eq!(a, b);
        assert_ne!(a, request_fp("tools/call", Some(&json!({"name": "y"}))));
        assert_eq!(raw_fp(b""), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
    }

    #[test]
    fn cap_cuts_at_a_char_boundary() {
        let s = "é".repeat(MAX_TEXT);
        let c = cap(&s);
        assert!(c.starts_with("éé") && c.contains("…[+"));
        assert_eq!(cap("short"), "short");
    }

    fn journal_text(n: usize) -> (Vec<u8>, Vec<String>) {
        let dir = std::env::temp_dir().join(format!("sp-audit-unit-{}-{}", std::process::id(), session_id()));
        std::fs::create_dir(&dir).unwrap();
        let path = dir.join("j.jsonl");
        let mut j = Journal::open(&path, false).unwrap();
        let mut lines = Vec::new();
        for i in 0..n {
            lines.push(j.write(Row::new("reject").set("decision", "denied").set("reason", format!("row {i}"))).unwrap().unwrap());
        }
        let bytes = std::fs::read(&path).unwrap();
        std::fs::remove_dir_all(&dir).unwrap();
        (bytes, lines)
    }

    #[test]
    fn a_whole_chain_verifies() {
        let (bytes, lines) = journal_text(5);
        let v = verify(&bytes, None).unwrap();
        assert_eq!((v.rows, v.first_seq, v.last_seq), (5, Some(1), Some(5)));
        let last = parse_row(lines[4].as_bytes()).unwrap();
        assert_eq!(v.last_hash, last.hash);
        // the anchor may be a row's hash, or the prev of the first row
        let third = parse_row(lines[2].as_bytes()).unwrap().hash;
        assert_eq!(verify(&bytes, Some(&third)).unwrap().anchor_row, Some(3));
        let cut: Vec<u8> = lines[3..].iter().flat_map(|l| format!("{l}\n").into_bytes()).collect();
        assert_eq!(verify(&cut, Some(&third)).unwrap().anchor_row, Some(0));
        assert_eq!(verify(&cut, None).unwrap_err().row, 1);
        assert_eq!(verify(b"", None).unwrap().rows, 0);
    }

    #[test]
    fn every_single_byte_edit_is_found_at_its_row() {
        let (bytes, lines) = journal_text(3);
        let second_start = lines[0].len() + 1;
        let second_end = second_start + lines[1].len();
        for at in second_start..second_end {
            for replacement in [b'0', b'x', b' ', b'"'] {
                if bytes[at] == replacement {
                    continue;
                }
                let mut edited = bytes.clone();
                edited[at] = replacement;
                let e = verify(&edited, None).unwrap_err();
                assert_eq!(e.row, 2, "byte {at} -> {:?}: {}", replacement as char, e.why);
            }
        }
    }

    #[test]
    fn removal_swap_and_tear_are_named() {
        let (bytes, lines) = journal_text(4);
        let join = |ls: &[&String]| ls.iter().flat_map(|l| format!("{l}\n").into_bytes()).collect::<Vec<u8>>();
        let e = verify(&join(&[&lines[0], &lines[2], &lines[3]]), None).unwrap_err();
        assert_eq!(e.row, 2);
        assert!(e.why.contains("gap"), "{}", e.why);
        let e = verify(&join(&[&lines[0], &lines[2], &lines[1], &lines[3]]), None).unwrap_err();
        assert_eq!(e.row, 2);
        assert!(e.why.contains("out of order"), "{}", e.why);
        let e = verify(&bytes[..bytes.len() - 10], None).unwrap_err();
        assert_eq!(e.row, 4);
        assert!(e.why.contains("torn"), "{}", e.why);
        let anchor = "ab".repeat(32);
        assert!(verify(&bytes, Some(&anchor)).unwrap_err().why.contains("anchor"));
    }

    #[test]
    fn default_location() {
        let env = |pairs: &'static [(&'static str, &'static str)]| {
            move |k: &str| pairs.iter().find(|(n, _)| *n == k).map(|(_, v)| v.to_string())
        };
        assert_eq!(default_path(env(&[("XDG_STATE_HOME", "/s"), ("HOME", "/h")])), Some("/s/sallyport/audit.jsonl".into()));
        assert_eq!(default_path(env(&[("HOME", "/h")])), Some("/h/.local/state/sallyport/audit.jsonl".into()));
        assert_eq!(default_path(env(&[("XDG_STATE_HOME", "rel"), ("HOME", "/h")])), Some("/h/.local/state/sallyport/audit.jsonl".into()));
        assert_eq!(default_path(env(&[])), None);
    }
}
