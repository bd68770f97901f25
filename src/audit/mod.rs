//! The audit journal: every decision `sp` takes, one JSON line each,
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
//! This file is the [`Journal`] API and the journal's location; `row.rs` the typed row
//! builder and the row's byte form and hash; `file.rs` the file (open, lock, re-check,
//! append, fsync); `syslog.rs` the syslog copy (`journald.rs` its native wire);
//! `otlp.rs` the OTLP copy; `verify.rs` the chain check; `export/` the forms a SIEM or a
//! collector reads.
//!
//! # The file
//! JSON Lines, append-only (`O_APPEND`), created `0600`, opened with `O_NOFOLLOW`: a
//! symbolic link, a hard link (link count > 1), a FIFO, a device (so `/dev/full` and
//! `/dev/null` too), a file with any group or other permission bit, or one owned by
//! neither root nor the user `sp` runs as is refused. It is opened
//! with `O_NONBLOCK`, so a FIFO is refused at once, never waited on (point 7). Each row is
//! appended with one `write` under an exclusive `flock`, taken for that append only, so
//! several `sp mcp` processes (one per agent session) can share one journal and one
//! chain: before appending, a writer checks that the path still names the file it opened
//! (device and inode) and that the file did not shrink; if it grew, the rows another `sp`
//! appended meanwhile are read and must chain on from the last row this writer knows. A
//! replaced or truncated file, or rows that do not chain, stop the journal for the rest
//! of the process: every later action is refused with `SP_UNAVAILABLE`. The lock is
//! waited for at most `file::LOCK_WAIT` (2 s); an `sp` that cannot get it refuses the action too.
//! With `fsync` (the default) the `intent` row, and with it every row before it, is
//! `fdatasync`ed before the action runs, and the `end` row at exit; other rows wait for
//! the next such flush (starting and refusing cost no flush).
//!
//! # Rows
//! Fields, in this order, absent ones left out ([`FIELDS`]): `seq` (one sequence per
//! file), `ts` (RFC 3339 UTC, milliseconds), `session` (random per process), `kind`
//! (`start` `reject` `approval` `grant` `intent` `token` `result` `upstream` `end` `recover`), `tool`,
//! `target` (HTTP: method and `scheme://host[:port]/path`, never the query; SSH: host name
//! and command; an upstream's tool: upstream, tool and an arguments fingerprint),
//! `decision`, `rule`, `reason`, `code`, `request_fp`, `credential` (name), `status`
//! (HTTP), `exit_status` (SSH), `is_error` (an upstream's tool), `bytes_in` (malformed
//! frames), `bytes_out`, `truncated`, `duration_ms`, `host_key_fp`, `approver_exit`,
//! `channel` (an approval row: `command` or `elicitation`), `grant` (the id of the grant
//! made or used), `prev`, `hash`.
//! Free text (`target`, `reason`) is cut at [`MAX_TEXT`] bytes. Those two fields can
//! quote outside text (the agent's URL or command, a peer's error), so they alone are
//! scrubbed of every secret read in this process ([`OUTSIDE_TEXT`], `Row`'s own slot);
//! every other field is sp's own (kind, decision, tool, code, rule and credential names,
//! counters, hashes) and is written as sp spelled it, whatever the secrets.
//!
//! `hash` = hex SHA-256 of `prev` (64 hex digits) immediately followed by the row as
//! written without its `hash` member. `prev` is the previous row's `hash`, or 64 zeros
//! ([`GENESIS`]) for a new file. A row is written in exactly one byte form (the field
//! order above, compact serde_json), so `sp audit verify` re-serializes what it parsed
//! and any byte edit is caught, even one that keeps the JSON meaning.
//!
//! # `request_fp`
//! For a well-formed request: SHA-256 of the compact JSON, keys sorted, of
//! `{"method": M, "params": P}` with `params._meta` removed (and a `tools/call`'s
//! 2026-07-28 `inputResponses` and `requestState`, taken out by the loop before: a
//! retry that carries an approval has its first call's). The JSON-RPC `id` and
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
//!   exactly as for a journal it cannot open (one rule, never a silent "no
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
//!   copy (the file has them whole). When journald is the receiver (the socket is
//!   `/dev/log` and `/run/systemd/journal/socket` exists; or `"journald": PATH`), the
//!   copy goes by journald's native protocol instead, with the row's fields as `SP_*`
//!   journal fields (`journald.rs`, issue 35 §4); `"journald": false` keeps the
//!   traditional format. Chosen once, at startup.
//! - OTLP copy (issue 35 §4): `"otlp": {"url": URL}` queues each row, after it is in
//!   the file, for a background thread that POSTs OpenTelemetry log records to
//!   `URL/v1/logs` (`otlp.rs`); a call never waits for it, rows it cannot deliver are
//!   dropped and counted. The row forms (and the severity every form shares) are
//!   `export/`, also used by `sp audit export`.

mod file;
mod row;
mod journald;
mod otlp;
mod syslog;
mod verify;
pub(crate) mod export;

use std::fmt;
use std::path::{Path, PathBuf};
use std::time::SystemTime;

use serde_json::Value;

pub(crate) use file::AuditError;
use file::{create_private_dirs, FileJournal};
pub(crate) use row::*;
use otlp::Otlp;
use syslog::Syslog;
pub(crate) use verify::*;

// ---------------------------------------------------------------------------------------
// Policy section

pub(crate) use crate::policy::audit::{AuditPolicy, JournalPath};

/// Where the journal goes when the policy does not say: `$XDG_STATE_HOME/sallyport/`,
/// else `$HOME/.local/state/sallyport/` (only absolute values count); or why there is
/// none (for the refusal and `sp check`).
pub(crate) fn default_location(env: impl Fn(&str) -> Option<String>) -> Result<PathBuf, NoLocation> {
    let xdg = env("XDG_STATE_HOME").filter(|s| !s.is_empty());
    if let Some(x) = xdg.as_ref().filter(|s| s.starts_with('/')) {
        return Ok(PathBuf::from(x).join("sallyport/audit.jsonl"));
    }
    if let Some(h) = env("HOME").filter(|s| s.starts_with('/')) {
        return Ok(PathBuf::from(h).join(".local/state/sallyport/audit.jsonl"));
    }
    Err(match xdg {
        Some(xdg) => NoLocation::RelativeXdg { xdg },
        None => NoLocation::Unset,
    })
}

/// Why there is no default journal location.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NoLocation {
    /// `XDG_STATE_HOME` is unset or empty, and `HOME` is not an absolute path.
    Unset,
    /// `XDG_STATE_HOME` is not an absolute path (ignored), nor is `HOME`.
    RelativeXdg { xdg: String },
}

impl fmt::Display for NoLocation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            NoLocation::Unset => f.write_str("the policy has no audit.path and neither XDG_STATE_HOME nor HOME is set"),
            NoLocation::RelativeXdg { xdg } => write!(
                f,
                "the policy has no audit.path, XDG_STATE_HOME ({xdg:?}) is ignored because it is not an absolute path \
                 (XDG Base Directory spec), and HOME is not set to an absolute path"
            ),
        }
    }
}

impl std::error::Error for NoLocation {}

/// The warning for a relative `XDG_STATE_HOME` that was skipped for `$HOME`, if any.
fn relative_xdg_note(env: impl Fn(&str) -> Option<String>) -> Option<String> {
    env("XDG_STATE_HOME")
        .filter(|s| !s.is_empty() && !s.starts_with('/'))
        .map(|x| format!("XDG_STATE_HOME ({x:?}) is ignored because it is not an absolute path (XDG Base Directory spec)"))
}

/// `sp check`'s line for the section.
pub(crate) fn check_summary(p: &AuditPolicy, env: impl Fn(&str) -> Option<String>) -> String {
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
        Some(s) => {
            let native = match &s.journald {
                crate::policy::audit::Journald::Auto if s.socket == Path::new("/dev/log") => {
                    format!(" (journald's native protocol when {} exists)", crate::policy::audit::JOURNALD_SOCKET)
                }
                crate::policy::audit::Journald::Socket(j) => format!(" (journald's native protocol to {})", j.display()),
                _ => String::new(),
            };
            format!("{} facility {}{native}", s.socket.display(), s.facility_name)
        }
        None => "no".into(),
    };
    let otlp = match &p.otlp {
        Some(o) => format!(", OTLP copy {}", o.endpoint),
        None => String::new(),
    };
    format!("audit: journal {path}, fsync {}, syslog copy {syslog}{otlp}\n", if p.fsync { "yes" } else { "no" })
}

// ---------------------------------------------------------------------------------------
// Errors

// ---------------------------------------------------------------------------------------
// The journal

/// The writer `sp mcp` holds. [`Journal::off`] writes nowhere (no journal configured,
/// and in-process tests).
pub struct Journal {
    file: Option<FileJournal>,
    syslog: Option<Syslog>,
    otlp: Option<Otlp>,
    session: String,
    /// Rows this process wrote.
    pub written: u64,
}

impl fmt::Debug for Journal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Journal").field("path", &self.path()).field("session", &self.session).finish()
    }
}

impl Journal {
    pub fn off() -> Journal {
        Journal { file: None, syslog: None, otlp: None, session: session_id(), written: 0 }
    }

    /// Whether rows go anywhere (a file or the syslog copy). When not, the server skips
    /// building them (a request's fingerprint is a canonical JSON and a hash).
    pub fn is_on(&self) -> bool {
        self.file.is_some() || self.syslog.is_some() || self.otlp.is_some()
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
            // No location is refused like an unwritable one.
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
        if let Some(o) = &p.otlp {
            j.otlp = Some(Otlp::new(o));
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
        // The outside text of every row goes through the answers'
        // redactor, against every secret read in this process; sp's own fields never do.
        let mut m = row.finish(crate::gate::vault::scrub_journal_text);
        let kind = m.get("kind").and_then(Value::as_str).unwrap_or_default();
        let decision = m.get("decision").and_then(Value::as_str).unwrap_or_default();
        let notice = kind == "reject" || kind == "grant" || (kind == "approval" && decision != "approved" && decision != "observed");
        // Only the rows an action waits for are flushed at once (`intent`,
        // and `end`, the last); a flush carries every row before it, so `start`,
        // `reject`, `approval`, `token` and `result` rows reach the disk with the next
        // action's intent row or the end row, and starting or refusing costs no flush.
        let sync = matches!(kind, "intent" | "end");
        m.put("session", Value::String(self.session.clone()));
        let Some(file) = self.file.as_mut() else {
            m.put("ts", Value::String(rfc3339(SystemTime::now())));
            // No file ("path": null, or no default location): the copies, if any,
            // still get the row, without the chain fields only a file can give.
            let line = m.line();
            if let Some(s) = self.syslog.as_mut() {
                s.send(&line, notice);
            }
            if let Some(o) = self.otlp.as_mut() {
                o.send(&line);
            }
            return Ok(None);
        };
        let line = file.append(m, sync)?;
        self.written += 1;
        if let Some(s) = self.syslog.as_mut() {
            s.send(&line, notice);
        }
        if let Some(o) = self.otlp.as_mut() {
            o.send(&line);
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn default_location_rule() {
        let env = |pairs: &'static [(&'static str, &'static str)]| move |k: &str| pairs.iter().find(|(n, _)| *n == k).map(|(_, v)| v.to_string());
        let path = |pairs| default_location(env(pairs)).ok();
        assert_eq!(path(&[("XDG_STATE_HOME", "/s"), ("HOME", "/h")]), Some("/s/sallyport/audit.jsonl".into()));
        assert_eq!(path(&[("HOME", "/h")]), Some("/h/.local/state/sallyport/audit.jsonl".into()));
        assert_eq!(path(&[("XDG_STATE_HOME", "rel"), ("HOME", "/h")]), Some("/h/.local/state/sallyport/audit.jsonl".into()));
        assert_eq!(default_location(env(&[])), Err(NoLocation::Unset));
        assert_eq!(NoLocation::Unset.to_string(), "the policy has no audit.path and neither XDG_STATE_HOME nor HOME is set");
        let relative = default_location(env(&[("XDG_STATE_HOME", "rel"), ("HOME", "h")]));
        assert_eq!(relative, Err(NoLocation::RelativeXdg { xdg: "rel".into() }));
        assert_eq!(
            relative.unwrap_err().to_string(),
            "the policy has no audit.path, XDG_STATE_HOME (\"rel\") is ignored because it is not an absolute path \
             (XDG Base Directory spec), and HOME is not set to an absolute path"
        );
    }
}
