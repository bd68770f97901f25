//! `sp audit export FILE [--format ndjson|cef|ocsf] [--since TIME] [--follow]`: the
//! journal's rows for a SIEM, one event per line on stdout, the chain checked as they
//! go (`audit::Chain`, the check `sp audit verify` runs).
//!
//! ```text
//!  read a line ─ whole ──> Chain::step ─ ok ──> ts >= since? ─ yes ─> render, write
//!      │                        └─ broken ─> stderr "sp: FILE: row N ...", exit 1
//!      └─ end of file ─ no --follow: done, exit 0 (a row being appended: waited for, 1 s at most)
//!                     └─ --follow: sleep POLL, read on; the file shrank -> exit 1;
//!                        the path names a new file (rotated) -> drain the old one, then
//!                        the new one from its first row (a new chain)
//! ```
//!
//! Every row before a break is printed (a SIEM has what verified), the break itself
//! goes to stderr only: stdout stays one event per line. `--since` filters what is
//! printed, never what is checked: the chain is checked from the first row. The file
//! is never locked (a writer waits at most 2 s for the journal lock, and `--follow`
//! runs for days), and read as `sp audit show` reads it. Memory stays bounded: one
//! line at a time, at most `audit::MAX_ROW_BYTES`.

use std::fs::File;
use std::io::{BufRead, BufReader, Read, Seek, Write};
use std::os::unix::fs::MetadataExt;
use std::path::Path;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use super::Failed;
use crate::cli::args::Since;
use crate::audit::export::{parse_rfc3339, render, Format};
use crate::audit::{Chain, MAX_ROW_BYTES};

/// How often `--follow` looks for new rows.
const POLL: Duration = Duration::from_millis(200);

/// How long an unterminated last line is given to become whole (a writer appends a row
/// with one `write`, so a reader may catch it half written) before it is called torn.
const TORN_GRACE: Duration = Duration::from_secs(1);

/// What to export and how.
pub(crate) struct Export<'a> {
    pub path: &'a Path,
    pub name: &'a str,
    pub format: Format,
    pub since: Option<Since>,
    pub follow: bool,
}

/// `--since` as milliseconds since the epoch (an age against the clock now).
fn since_ms(since: Option<Since>) -> Option<i64> {
    match since? {
        Since::At(ms) => Some(ms),
        Since::Ago(secs) => {
            let now = SystemTime::now().duration_since(UNIX_EPOCH).unwrap_or_default().as_millis();
            Some(i64::try_from(now).unwrap_or(i64::MAX).saturating_sub(i64::try_from(secs).unwrap_or(i64::MAX).saturating_mul(1000)))
        }
    }
}

fn identity(m: &std::fs::Metadata) -> (u64, u64) {
    (m.dev(), m.ino())
}

fn fail(name: &str, why: impl std::fmt::Display) -> Failed {
    eprintln!("sp: {name}: {why}");
    Failed
}

/// Runs the export of `file` (opened from `x.path`) to `out`.
pub(crate) fn run(out: &mut impl Write, file: File, x: &Export<'_>) -> Result<(), Failed> {
    let since = since_ms(x.since);
    let mut out = std::io::BufWriter::new(out);
    let mut ours = file.metadata().map(|m| identity(&m)).map_err(|e| fail(x.name, crate::sys::io_reason(&e)))?;
    let mut reader = BufReader::new(file);
    let mut chain = Chain::new(None).map_err(|b| fail(x.name, b))?;
    let mut pending: Vec<u8> = Vec::new();
    let mut waited = Duration::ZERO;
    let mut rotated = false;
    let read_err = |e: std::io::Error| fail(x.name, format!("reading failed: {}", crate::sys::io_reason(&e)));
    loop {
        let room = (MAX_ROW_BYTES + 1).saturating_sub(pending.len()) as u64;
        reader.by_ref().take(room).read_until(b'\n', &mut pending).map_err(read_err)?;
        let whole = pending.last() == Some(&b'\n');
        if whole || pending.len() > MAX_ROW_BYTES {
            if whole {
                pending.pop();
            }
            let line = std::mem::take(&mut pending);
            waited = Duration::ZERO;
            let row = chain.step(&line, whole, &mut reader).map_err(|b| {
                let _ = out.flush();
                fail(x.name, format!("{b} (the journal is not whole; the rows before it were exported)"))
            })?;
            let ts = row.fields.get("ts").and_then(serde_json::Value::as_str).and_then(parse_rfc3339);
            if since.is_some_and(|s| ts.is_none_or(|t| t < s)) {
                continue;
            }
            // parse_row took it as UTF-8.
            let text = String::from_utf8_lossy(&line);
            let mut event = render(x.format, &text, &row.fields);
            event.push('\n');
            out.write_all(event.as_bytes()).map_err(|e| fail(x.name, format!("writing failed: {}", crate::sys::io_reason(&e))))?;
            continue;
        }
        // The end of the file for now.
        out.flush().map_err(|e| fail(x.name, format!("writing failed: {}", crate::sys::io_reason(&e))))?;
        if !pending.is_empty() && waited < TORN_GRACE {
            std::thread::sleep(POLL.min(TORN_GRACE - waited));
            waited += POLL;
            continue;
        }
        if !x.follow {
            if !pending.is_empty() {
                let line = std::mem::take(&mut pending);
                let b = chain.step(&line, false, &mut reader).err().map_or_else(|| "is torn".to_owned(), |b| b.to_string());
                return Err(fail(x.name, format!("{b} (the journal is not whole; the rows before it were exported)")));
            }
            return Ok(());
        }
        if rotated {
            if !pending.is_empty() {
                let line = std::mem::take(&mut pending);
                let b = chain.step(&line, false, &mut reader).err().map_or_else(|| "is torn".to_owned(), |b| b.to_string());
                return Err(fail(x.name, format!("{b}, and the file was rotated (the rows before it were exported)")));
            }
            let (file, _) = crate::sys::open(x.path, crate::sys::Access::Read, crate::sys::Rules::any(u64::MAX).following())
                .map_err(|e| fail(x.name, format!("was rotated, and the new file cannot be opened: {e}")))?;
            ours = file.metadata().map(|m| identity(&m)).map_err(|e| fail(x.name, crate::sys::io_reason(&e)))?;
            log::info!("{}: rotated: following the new file from its first row", x.name);
            reader = BufReader::new(file);
            chain = Chain::new(None).map_err(|b| fail(x.name, b))?;
            rotated = false;
            continue;
        }
        std::thread::sleep(POLL);
        let at = reader.stream_position().map_err(read_err)?;
        let len = reader.get_ref().metadata().map_err(read_err)?.len();
        if len < at {
            return Err(fail(
                x.name,
                format!("the file shrank under export --follow ({len} bytes, {at} read): truncated or cut back; the rows before were exported"),
            ));
        }
        // A new file at the path: read the old one to its end first (a row appended
        // just before the move), then switch.
        if std::fs::metadata(x.path).is_ok_and(|m| identity(&m) != ours) {
            rotated = true;
        }
    }
}
