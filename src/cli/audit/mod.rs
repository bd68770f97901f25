//! `sp audit verify|tail|show|export`: read a journal written by `sp mcp`.
//!
//! ```text
//! sp audit verify FILE [--anchor HASH]   exit 0: whole; 1: broken (first bad row named) or unreadable
//! sp audit tail FILE [-n N] [--json]     the last N rows (default 10)
//! sp audit show FILE [--json]            every row
//! sp audit show FILE SEQ [--json]        the row SEQ
//! sp audit show FILE SEQ --recording     its session recording, checked against the row first
//! sp audit export FILE [--format F] [--since T] [--follow]   rows for a SIEM, chain checked (export.rs)
//! ```
//!
//! `verify` checks the whole chain from the first row (see `audit/mod.rs` for the hash),
//! names the first broken row by its line number and why (edited, out of order, a gap,
//! a torn last row after a crash, a chain that does not start at genesis or the anchor),
//! and on success prints the row count, the last hash, and each call whose outcome the
//! journal does not hold (an `intent` row with no `result` row after it in its session:
//! "outcome unknown", not a break; `audit::Unknown`): record that hash elsewhere
//! (or rely on the syslog copy) and pass it as `--anchor` next time, so that a file
//! rewritten from scratch or cut at its end is caught too.
//!
//! `tail` and `show` print a table for people, with control characters escaped (targets
//! and reasons hold text the agent chose), or with `--json` the rows exactly as stored.
//! They do not verify; a line that is not a row is reported on stderr and makes the exit
//! status 1. Usage errors exit 2, a malformed `--anchor` among them. `cli::args::parse` hands
//! `parse_audit` everything after `audit`, so global flags (`sp -q audit ...`) come
//! first. Output goes to stdout: these commands never run inside `sp mcp`.

use std::io::{BufReader, Write};

use serde_json::Value;

use super::args::{AuditArgs, Sub, AUDIT_USAGE};

mod export;
use crate::audit;
use crate::mcp::out::StdoutHandle;

/// The command failed (exit status 1, `cli::EXIT_FATAL`); the reason is already on stderr
/// or stdout.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Failed;

impl std::fmt::Display for Failed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("sp audit failed")
    }
}

impl std::error::Error for Failed {}

/// `sp audit ...`, after `args::parse_audit` (called by `args::parse` with what follows `audit`).
pub(crate) fn run(stdout: StdoutHandle, args: &AuditArgs) -> Result<(), Failed> {
    let mut out = stdout.into_text();
    if args.sub == Sub::Help {
        return finish(out.write_all(AUDIT_USAGE.as_bytes()));
    }
    // Opened without blocking and only if it is a regular file (a FIFO
    // at the path would block `open` forever); symbolic links are followed (a journal
    // may be read through one), any owner and mode (verifying a copy is fine).
    let rules = crate::sys::Rules::any(u64::MAX).following();
    let file = match crate::sys::open(&args.file, crate::sys::Access::Read, rules) {
        Ok((f, _)) => f,
        Err(e) => {
            eprintln!("sp: {}: {e}", args.file.display());
            return Err(Failed);
        }
    };
    let name = args.file.display().to_string();
    match &args.sub {
        Sub::Verify { anchor } => match audit::verify_reader(BufReader::new(file), anchor.as_deref()) {
            Ok(v) => {
                let seqs = match (v.first_seq, v.last_seq) {
                    (Some(a), Some(b)) => format!(", seq {a}..{b}"),
                    _ => String::new(),
                };
                let anchored = match v.anchor_row {
                    Some(0) => ", continuing the anchor".to_owned(),
                    Some(n) => format!(", anchor found at row {n}"),
                    None => String::new(),
                };
                let recorded = if v.recordings > 0 { format!(", {} session recording(s) match", v.recordings) } else { String::new() };
                let mut text = format!("{name}: ok: {} row(s){seqs}{anchored}{recorded}\nlast hash: {}\n", v.rows, v.last_hash);
                // Not a break: the intent is durable, the result row was not yet (sp-audit(1)).
                for u in &v.unknown {
                    text.push_str(&format!("{u}\n"));
                }
                if v.unknown_count > v.unknown.len() as u64 {
                    text.push_str(&format!("... {} more call(s) with outcome unknown\n", v.unknown_count - v.unknown.len() as u64));
                }
                finish(out.write_all(text.as_bytes()))
            }
            Err(b) => {
                let text = format!("{name}: {b}\n");
                let _ = out.write_all(text.as_bytes());
                eprintln!("sp: {name}: the journal is not whole (row {})", b.row);
                Err(Failed)
            }
        },
        Sub::Tail { lines, json } => match last_lines(file, *lines) {
            Ok(tail) => print_rows(&mut out, &name, tail.into_iter().map(Ok), *json),
            Err(e) => {
                eprintln!("sp: {name}: {}", crate::sys::io_reason(&e));
                Err(Failed)
            }
        },
        Sub::Show { json, seq: Some(seq), recording } => {
            let Some((line, row)) = find_row(file, *seq) else {
                eprintln!("sp: {name}: no row has seq {seq}");
                return Err(Failed);
            };
            if *recording { show_recording(&mut out, &name, *seq, &row) } else { print_rows(&mut out, &name, std::iter::once(Ok(line)), *json) }
        }
        Sub::Show { json, .. } => {
            let mut reader = BufReader::new(file);
            let lines = std::iter::from_fn(move || audit::read_line(&mut reader).transpose());
            print_rows(&mut out, &name, lines.map(|l| l.map(|(bytes, _)| bytes)), *json)
        }
        Sub::Export { format, since, follow } => {
            let x = export::Export { path: &args.file, name: &name, format: *format, since: *since, follow: *follow };
            export::run(&mut out, file, &x)
        }
        Sub::Help => unreachable!("handled above"),
    }
}

/// The row whose `seq` is `seq`: its line and its members (the first such row).
fn find_row(file: std::fs::File, seq: u64) -> Option<(Vec<u8>, serde_json::Map<String, Value>)> {
    let mut reader = BufReader::new(file);
    while let Ok(Some((line, _))) = audit::read_line(&mut reader) {
        let row = std::str::from_utf8(&line).ok().and_then(|t| crate::json::parse(t).ok());
        if let Some(Value::Object(row)) = row
            && row.get("seq").and_then(Value::as_u64) == Some(seq)
        {
            return Some((line, row));
        }
    }
    None
}

/// `show FILE SEQ --recording`: the recording the row names, only if it is the one the
/// row holds (size and SHA-256, `audit::check_recording`), each line made safe for a
/// terminal as `--json` rows are (the output events hold remote text).
fn show_recording(out: &mut impl Write, name: &str, seq: u64, row: &serde_json::Map<String, Value>) -> Result<(), Failed> {
    match audit::check_recording(row) {
        Ok(true) => {}
        Ok(false) => {
            eprintln!("sp: {name}: the row with seq {seq} names no session recording");
            return Err(Failed);
        }
        Err(why) => {
            eprintln!("sp: {name}: the row with seq {seq} {why}: not shown");
            return Err(Failed);
        }
    }
    let path = std::path::Path::new(row.get("recording").and_then(Value::as_str).unwrap_or_default());
    let want = row.get("recording_sha256").and_then(Value::as_str).unwrap_or_default();
    let bytes = match crate::sys::read(path, crate::sys::Rules::any(row.get("recording_bytes").and_then(Value::as_u64).unwrap_or(0))) {
        Ok(b) if audit::sha256_hex(&[&b]) == want => b,
        Ok(_) => {
            eprintln!("sp: {name}: the recording of seq {seq} changed while it was read: not shown");
            return Err(Failed);
        }
        Err(e) => {
            eprintln!("sp: {name}: {}: {e}", path.display());
            return Err(Failed);
        }
    };
    let text = String::from_utf8_lossy(&bytes);
    let mut shown = String::with_capacity(text.len());
    for line in text.lines() {
        shown.push_str(&json_safe(line));
        shown.push('\n');
    }
    finish(out.write_all(shown.as_bytes()))
}

fn finish(r: std::io::Result<()>) -> Result<(), Failed> {
    r.map_err(|_| Failed)
}

/// The last `n` lines of a file, read backwards from its end in blocks.
fn last_lines(mut file: std::fs::File, n: usize) -> std::io::Result<Vec<Vec<u8>>> {
    use std::io::{Read, Seek, SeekFrom};
    let size = file.seek(SeekFrom::End(0))?;
    let mut start = size;
    let mut buf: Vec<u8> = Vec::new();
    // n lines need n newlines before them (plus the file's final one), or the start.
    while start > 0 && buf.iter().filter(|b| **b == b'\n').count() <= n {
        let block = start.min(64 * 1024);
        start -= block;
        let mut chunk = vec![0; block as usize];
        file.seek(SeekFrom::Start(start))?;
        file.read_exact(&mut chunk)?;
        chunk.extend_from_slice(&buf);
        buf = chunk;
    }
    let body = buf.strip_suffix(b"\n").unwrap_or(&buf);
    let mut lines: Vec<Vec<u8>> = body.split(|b| *b == b'\n').map(<[u8]>::to_vec).collect();
    if start > 0 || lines.len() > n {
        // The first piece may be a partial line (or there are more than asked).
        let skip = lines.len().saturating_sub(n);
        lines.drain(..skip);
    }
    if buf.is_empty() {
        lines.clear();
    }
    Ok(lines)
}

fn print_rows(out: &mut impl Write, name: &str, lines: impl Iterator<Item = std::io::Result<Vec<u8>>>, json: bool) -> Result<(), Failed> {
    let mut out = std::io::BufWriter::new(out);
    if !json {
        let header = format!(
            "{:>6}  {:<24}  {:<8}  {:<8}  {:<14}  {:<12}  {:<16}  {}\n",
            "SEQ", "TIME (UTC)", "SESSION", "KIND", "DECISION", "TOOL", "CODE/STATUS", "TARGET / REASON"
        );
        if out.write_all(header.as_bytes()).is_err() {
            return Err(Failed);
        }
    }
    let mut bad = 0;
    for (i, line) in lines.enumerate() {
        let Ok(line) = line else {
            eprintln!("sp: {name}: reading failed");
            return Err(Failed);
        };
        let row = std::str::from_utf8(&line).ok().and_then(|t| crate::json::parse(t).ok());
        let Some(Value::Object(row)) = row else {
            eprintln!("sp: {name}: line {} of this listing is not a journal row", i + 1);
            bad += 1;
            continue;
        };
        let mut text = String::new();
        if json {
            text.push_str(&json_safe(&String::from_utf8_lossy(&line)));
            text.push('\n');
            if out.write_all(text.as_bytes()).is_err() {
                return Err(Failed);
            }
            continue;
        }
        let s = |k: &str| match row.get(k) {
            Some(Value::String(v)) => v.clone(),
            Some(Value::Null) | None => String::new(),
            Some(v) => v.to_string(),
        };
        let outcome = if row.contains_key("code") {
            s("code")
        } else if row.contains_key("status") {
            s("status")
        } else if row.contains_key("exit_status") {
            format!("exit {}", s("exit_status"))
        } else {
            String::new()
        };
        let mut detail = s("target");
        let reason = s("reason");
        if !reason.is_empty() {
            detail = if detail.is_empty() { reason } else { format!("{detail} ({reason})") };
        }
        let mut extra = Vec::new();
        if let Some(b) = row.get("bytes_out") {
            extra.push(format!("{b} bytes"));
        }
        if row.get("truncated") == Some(&Value::Bool(true)) {
            extra.push("truncated".into());
        }
        if let Some(ms) = row.get("duration_ms") {
            extra.push(format!("{ms} ms"));
        }
        if !extra.is_empty() {
            detail = format!("{detail} [{}]", extra.join(", "));
        }
        let session: String = s("session").chars().take(8).collect();
        text.push_str(&format!(
            "{:>6}  {:<24}  {:<8}  {:<8}  {:<14}  {:<12}  {:<16}  {}\n",
            s("seq"),
            safe(&s("ts")),
            safe(&session),
            safe(&s("kind")),
            safe(&s("decision")),
            safe(&s("tool")),
            safe(&outcome),
            safe(&detail)
        ));
        if out.write_all(text.as_bytes()).is_err() {
            return Err(Failed);
        }
    }
    finish(out.flush())?;
    if bad > 0 {
        return Err(Failed);
    }
    Ok(())
}

/// Control, bidi, zero-width and separator characters escaped (`escape.rs`, the same
/// class as the log and the approver's input): agent-chosen text must not drive the
/// operator's terminal.
pub(crate) fn safe(s: &str) -> String {
    crate::escape::escape(s).into_owned()
}

/// A row for `--json`: the same JSON value, with the characters of `escape.rs` (legal
/// raw inside JSON strings) written as `\uXXXX`, and the only controls JSON allows
/// outside strings (tab, CR: whitespace between tokens) as spaces.
pub(crate) fn json_safe(line: &str) -> String {
    crate::escape::json_safe(line)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn safe_escapes_controls_bidi_and_line_separators() {
        let row = "GET /a\u{1b}[2J\u{85}\u{2028}\u{2029}\u{202a}\u{202e}\u{2066}\u{2069}exe.gnp";
        let out = safe(row);
        assert!(!out.chars().any(crate::escape::is_unsafe), "{out:?}");
        assert!(out.contains("\\u{202e}") && out.contains("\\u{2028}") && out.ends_with("exe.gnp"), "{out:?}");
    }

    #[test]
    fn json_safe_keeps_the_value_and_escapes_bidi_and_c1() {
        let line = "{\"target\":\"GET /\u{202e}\u{9b}\u{7f}\u{2028}x\",\r\t\"seq\":1}";
        let out = json_safe(line);
        assert!(!out.chars().any(crate::escape::is_unsafe), "{out:?}");
        let parse = |t: &str| crate::json::parse(t).unwrap();
        assert_eq!(parse(&out), parse(line));
    }

    #[test]
    fn last_lines_reads_from_the_end() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("journal");
        let long = "x".repeat(70_000);
        for (text, n, want) in [
            ("a\nb\nc\n".to_owned(), 2, vec!["b", "c"]),
            ("a\nb\nc\n".to_owned(), 10, vec!["a", "b", "c"]),
            ("a\nb\nc".to_owned(), 1, vec!["c"]),
            (String::new(), 3, vec![]),
            ("a\n".to_owned(), 0, vec![]),
            (format!("{long}\n{long}\nend\n"), 2, vec![long.as_str(), "end"]),
        ] {
            std::fs::write(&path, &text).unwrap();
            let got = last_lines(std::fs::File::open(&path).unwrap(), n).unwrap();
            let got: Vec<String> = got.into_iter().map(|l| String::from_utf8(l).unwrap()).collect();
            assert_eq!(got, want, "{:?} -n {n}", &text[..text.len().min(20)]);
        }
    }

    #[test]
    fn control_characters_are_escaped() {
        assert_eq!(safe("GET /a\u{1b}[31m\u{9b}x\n"), "GET /a\\u{1b}[31m\\u{9b}x\\n");
    }
}
