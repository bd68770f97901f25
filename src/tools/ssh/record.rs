//! Session recordings (issue 34 §1): every `ssh_exec` on a policy with `ssh.recordings`
//! is written as an asciicast v2 file, after redaction, and its SHA-256 goes into the
//! call's `result` row, so `sp audit verify` finds a recording changed, cut, swapped or
//! removed (`audit/verify.rs`).
//!
//! ```text
//!  run.rs: Recording::create ── dir missing / not private / full ──> SP_UNAVAILABLE,
//!     │        (before the executor: the command never starts)       nothing runs
//!     v
//!  executor ──> SshOutcome (raw output + Chunk timings) ──> Recording::finish
//!     header line + one event per chunk, each stream scrubbed as one text
//!     ──> cut at max_bytes (whole lines) ──> write, fdatasync ──> RecordingFacts (row)
//! ```
//!
//! Decisions (`sp-policy(5)` RECORDINGS repeats them):
//! - The file is `DIR/<UTC time>-<host>-<random>.cast`, created `0600` with `O_EXCL`
//!   through the checked directory (`sys::create_private`: owned by the user `sp` runs
//!   as or root, no group or other bit), and `max_bytes` of disk is reserved for it then,
//!   before the command is sent: a recording that could not be written fails the call
//!   before the command starts, as the journal does. It is written whole once the
//!   command ended (a call's output is in memory anyway, within `max_output_bytes`).
//! - Header: asciicast v2 (`version`, `width`, `height`, `timestamp`, `command`,
//!   `title`, `env.TERM` with a pty) plus an `sp` object: host, user, address, port,
//!   host-key fingerprint, rule, exit status, output byte counts. Events: `[t, "o",
//!   text]` for stdout (everything with a pty, which merges the streams) and `[t, "e",
//!   text]` for stderr (asciicast v2 defines no stderr event; players skip it), `t` in
//!   seconds since the command was sent, one event per read.
//! - Redaction: each stream's events are scrubbed as one text (an echo split across
//!   two reads is found), and the result must equal, byte for byte, the text the agent
//!   got; where it does not (an echo spanning reads gets a marker per piece), the
//!   stream is recorded as one event at the time of its last read, holding exactly the
//!   agent's text. The command in the header is scrubbed too.
//! - `max_bytes`: lines that do not fit are left out (the file stays valid asciicast)
//!   and the row says `recording_cut`.
//! - Transfers (`ssh_get`, `ssh_put`) are recorded too (`transfer/record.rs`): the
//!   header's `command` is `ssh_get PATH` or `ssh_put PATH` and its `sp` object has the
//!   path, bytes and SHA-256 of what moved; one event holds the content as it crossed:
//!   `"o"` with the text the agent got for a get (scrubbed; base64 for bytes that are
//!   not UTF-8 text), `"i"` with what a put wrote (scrubbed, base64 likewise). A file
//!   larger than `max_bytes` leaves the event out (`recording_cut`).
//! - A write that fails after the command ran (an I/O error despite the reserved space)
//!   leaves the row with `recording` and no `recording_sha256`: `sp audit verify` reports
//!   that call, since its recording is not what the row promises.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use serde_json::{json, Value};

use crate::gate::exec::RecordingFacts;
use crate::gate::vault::Vault;
use crate::policy::ssh::Recordings;
use crate::tools::ssh::authorize::SshAction;
use crate::tools::ssh::pty::{PTY_COLUMNS, PTY_ROWS, PTY_TERM};
use crate::tools::ssh::result::SshOutcome;

/// A recording file created (and its space reserved) before the command is sent.
#[derive(Debug)]
pub(crate) struct Recording {
    file: std::fs::File,
    path: PathBuf,
    max_bytes: u64,
    started: SystemTime,
}

/// Why no recording could be started: the call is refused, nothing ran.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct CannotRecord {
    pub dir: PathBuf,
    pub why: crate::sys::SysError,
}

impl std::fmt::Display for CannotRecord {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "the session recording cannot be written (ssh.recordings.dir {}: {}); the command was not run", self.dir.display(), self.why)
    }
}

impl std::error::Error for CannotRecord {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        Some(&self.why)
    }
}

/// `20261205T123456.789Z`: the row's time, without the characters a file name should not hold.
fn stamp(t: SystemTime) -> String {
    crate::audit::rfc3339(t).replace(['-', ':'], "")
}

impl Recording {
    /// Creates `DIR/<time>-<host>-<random>.cast` (module docs).
    pub(crate) fn create(spec: &Recordings, host: &str) -> Result<Recording, CannotRecord> {
        let started = SystemTime::now();
        let random = crate::audit::session_id();
        let name = format!("{}-{host}-{}.cast", stamp(started), &random[..8]);
        let file = crate::sys::create_private(&spec.dir, &name, spec.max_bytes).map_err(|why| CannotRecord { dir: spec.dir.clone(), why })?;
        Ok(Recording { file, path: spec.dir.join(name), max_bytes: spec.max_bytes, started })
    }

    pub(crate) fn path(&self) -> &Path {
        &self.path
    }

    /// Writes the recording of `outcome` (raw, not yet scrubbed: it is scrubbed here as
    /// the result is), or of a call that produced none (`None`: the header alone).
    pub(crate) fn finish(self, a: &SshAction, outcome: Option<&SshOutcome>, vault: &Vault) -> RecordingFacts {
        let header = header(a, outcome, self.started, vault);
        let events = outcome.map(|o| events(o, vault)).unwrap_or_default();
        self.write(&a.host, &header, &events)
    }

    /// When the recording started (the header's `timestamp`).
    pub(crate) fn started(&self) -> SystemTime {
        self.started
    }

    /// Writes `header` and the `events` that fit in `max_bytes` (already scrubbed), and
    /// says what the result row records of the file.
    pub(crate) fn write(mut self, host: &str, header: &Value, events: &[Event]) -> RecordingFacts {
        let (bytes, cut) = render(header, events, self.max_bytes);
        let path = self.path.display().to_string();
        let written = self.file.write_all(&bytes).and_then(|()| self.file.set_len(bytes.len() as u64)).and_then(|()| self.file.sync_data());
        match written {
            Ok(()) => RecordingFacts { path, sha256: Some(crate::audit::sha256_hex(&[&bytes])), bytes: bytes.len() as u64, cut },
            Err(e) => {
                log::error!("ssh {host}: the recording {path} could not be written: {}", crate::sys::io_reason(&e));
                RecordingFacts { path, sha256: None, bytes: 0, cut }
            }
        }
    }
}

/// One event: seconds since the command was sent, `"o"`, `"e"` or (a transfer's
/// upload) `"i"`, text.
pub(crate) type Event = (Duration, &'static str, String);

fn header(a: &SshAction, o: Option<&SshOutcome>, started: SystemTime, vault: &Vault) -> Value {
    let command = vault.scrub_text(a.command.clone()).into_inner();
    let mut sp = json!({"host": a.host, "user": a.user, "address": a.address, "port": a.port, "rule": a.rule});
    if let Some(o) = o {
        sp["host_key_fp"] = json!(o.host_key_fingerprint);
        sp["exit_status"] = json!(o.exit_status);
        sp["stdout_bytes"] = json!(o.stdout_bytes);
        sp["stderr_bytes"] = json!(o.stderr_bytes);
        sp["truncated"] = json!(o.truncated);
    }
    let timestamp = started.duration_since(SystemTime::UNIX_EPOCH).map(|d| d.as_secs()).unwrap_or_default();
    let mut h = json!({
        "version": 2, "width": PTY_COLUMNS, "height": PTY_ROWS, "timestamp": timestamp,
        "command": command, "title": format!("sp ssh_exec {}", a.host), "sp": sp,
    });
    if a.pty {
        h["env"] = json!({"TERM": PTY_TERM});
    }
    h
}

/// The events of `o`, in arrival order, each stream scrubbed (module docs).
pub(crate) fn events(o: &SshOutcome, vault: &Vault) -> Vec<Event> {
    let mut streams = [(false, &o.stdout), (true, &o.stderr)].map(|(stderr, raw)| {
        let ends: Vec<(Duration, usize)> = o.chunks.iter().filter(|c| c.stderr == stderr).map(|c| (c.at, c.end)).collect();
        (segments(raw, &ends, o.truncated, vault), ends)
    });
    let mut next = [0usize; 2];
    let mut out = Vec::new();
    for c in &o.chunks {
        let s = usize::from(c.stderr);
        let (texts, ends) = &mut streams[s];
        let i = next[s];
        next[s] += 1;
        let (Some(text), Some((at, _))) = (texts.get_mut(i), ends.get(i)) else { continue };
        if !text.is_empty() {
            out.push((*at, if c.stderr { "e" } else { "o" }, std::mem::take(text)));
        }
    }
    out
}

/// One stream cut at `ends`, as text, scrubbed as one; equal in sum to what the agent
/// got, or else that text whole as the last piece.
fn segments(raw: &[u8], ends: &[(Duration, usize)], cut: bool, vault: &Vault) -> Vec<String> {
    let mut texts = Vec::with_capacity(ends.len());
    let mut carry: Vec<u8> = Vec::new();
    let mut from = 0;
    for (i, &(_, end)) in ends.iter().enumerate() {
        carry.extend_from_slice(&raw[from.min(end)..end]);
        from = end;
        let last = i + 1 == ends.len();
        let keep = match std::str::from_utf8(&carry) {
            Ok(_) => carry.len(),
            // A character split between two reads goes with the next one.
            Err(e) if e.error_len().is_none() && !last => e.valid_up_to(),
            Err(_) => carry.len(),
        };
        let rest = carry.split_off(keep);
        texts.push(if last { crate::tools::ssh::result::text(&carry, cut) } else { String::from_utf8_lossy(&carry).into_owned() });
        carry = rest;
    }
    vault.scrub_segments(&mut texts);
    // What the agent got for this stream (`run.rs`: tail, bytes, text, fields).
    let mut whole = raw.to_vec();
    if cut {
        vault.scrub_truncated_tail(&mut whole);
    }
    vault.scrub_bytes(&mut whole);
    let expected = vault.scrub_text(crate::tools::ssh::result::text(&whole, cut)).into_inner();
    if texts.concat() != expected {
        log::debug!("a recording's stream is kept as one event (an echo spans two reads)");
        texts.iter_mut().for_each(String::clear);
        if let Some(last) = texts.last_mut() {
            *last = expected;
        }
    }
    texts
}

/// The file: the header line, then the events that fit in `max` bytes (whole lines);
/// whether some were left out.
pub(crate) fn render(header: &Value, events: &[Event], max: u64) -> (Vec<u8>, bool) {
    let mut out = header.to_string().into_bytes();
    out.push(b'\n');
    for (at, kind, text) in events {
        let t = at.as_micros() as f64 / 1e6;
        let line = format!("{}\n", json!([t, kind, text]));
        if (out.len() + line.len()) as u64 > max {
            return (out, true);
        }
        out.extend_from_slice(line.as_bytes());
    }
    (out, false)
}

#[cfg(test)]
mod tests;
