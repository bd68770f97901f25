//! Verification (`sp audit verify`, and the writer's own checks): parse a row, re-check
//! its byte form and its link to the previous one; for `sp audit verify`, also the
//! session recording a `result` row names (issue 34 §1, [`check_recording`]): present,
//! not a symbolic link, of the size and SHA-256 the row holds.

use std::io::{BufRead, Read, Seek, SeekFrom};

use serde_json::{Map, Value};

use super::row::{row_hash, serialize_row, GENESIS};
use crate::sys::os_reason as io_why;

/// Longest line `sp audit` and the tail reader accept.
pub(crate) const MAX_ROW_BYTES: usize = 1024 * 1024;

// ---------------------------------------------------------------------------------------
// Verification (`sp audit verify`, and the writer's own checks)

/// A row that parsed and whose hash matches its content.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct ParsedRow {
    pub seq: u64,
    pub prev: String,
    pub hash: String,
    pub fields: Map<String, Value>,
}

/// Why a line is not a well-formed row (completes "row N ...").
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BadRow {
    NotUtf8,
    /// Not one JSON value (the parser's reason, which names a position).
    NotJson {
        why: String,
    },
    NotObject,
    /// `seq`, `prev` or `hash` is missing or malformed.
    NoChain,
    /// Its bytes are not the one form `sp` writes.
    NotCanonical,
    /// Its hash does not match its content.
    WrongHash,
}

impl std::fmt::Display for BadRow {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            BadRow::NotUtf8 => f.write_str("is not UTF-8 (edited or corrupted)"),
            BadRow::NotJson { why } => write!(f, "is not a journal row ({why}): edited or corrupted"),
            BadRow::NotObject => f.write_str("is not a JSON object: edited or corrupted"),
            BadRow::NoChain => f.write_str("lacks a valid seq, prev or hash: edited or corrupted"),
            BadRow::NotCanonical => f.write_str("is edited: its bytes differ from the one form sp writes"),
            BadRow::WrongHash => f.write_str("is edited: its hash does not match its content"),
        }
    }
}

impl std::error::Error for BadRow {}

/// Parses one line (without its newline) and checks it against itself: one JSON object
/// in the exact form `sp` writes, with `seq`, `prev`, `hash`, and a hash that matches.
pub(crate) fn parse_row(line: &[u8]) -> Result<ParsedRow, BadRow> {
    let text = std::str::from_utf8(line).map_err(|_| BadRow::NotUtf8)?;
    let value = crate::json::parse(text).map_err(|e| BadRow::NotJson { why: e.to_string() })?;
    let Value::Object(fields) = value else {
        return Err(BadRow::NotObject);
    };
    let seq = fields.get("seq").and_then(Value::as_u64).filter(|s| *s > 0);
    let prev = fields.get("prev").and_then(Value::as_str).filter(|s| is_hash(s));
    let hash = fields.get("hash").and_then(Value::as_str).filter(|s| is_hash(s));
    let (Some(seq), Some(prev), Some(hash)) = (seq, prev, hash) else {
        return Err(BadRow::NoChain);
    };
    if serialize_row(&fields, true).as_bytes() != line {
        return Err(BadRow::NotCanonical);
    }
    if row_hash(prev, &fields) != hash {
        return Err(BadRow::WrongHash);
    }
    Ok(ParsedRow { seq, prev: prev.to_owned(), hash: hash.to_owned(), fields })
}

fn is_hash(s: &str) -> bool {
    s.len() == 64 && s.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
}

/// The outcome of verifying a whole file.
#[derive(Debug, PartialEq)]
pub(crate) struct Verified {
    pub rows: u64,
    pub first_seq: Option<u64>,
    pub last_seq: Option<u64>,
    /// `hash` of the last row (or the start point for an empty file): the anchor for the
    /// next verification.
    pub last_hash: String,
    /// Line number of the row whose hash is the anchor (0: the anchor is the start).
    pub anchor_row: Option<u64>,
    /// Calls whose outcome the journal does not hold (at most [`MAX_UNKNOWN_LISTED`];
    /// `unknown_count` counts them all).
    pub unknown: Vec<Unknown>,
    pub unknown_count: u64,
    /// Session recordings checked (each matched its row).
    pub recordings: u64,
}

/// Checks the session recording `fields` (a row) names, if any (`tools/ssh/record.rs`):
/// `Ok(false)` when the row names none, `Ok(true)` when it matches, else why not
/// (completes "row N ..."). A row whose recording could not be written (no
/// `recording_sha256`) fails too: the row promises a recording that is not there.
pub(crate) fn check_recording(fields: &Map<String, Value>) -> Result<bool, String> {
    use sha2::{Digest, Sha256};
    use std::io::Read;
    let Some(path) = fields.get("recording").and_then(Value::as_str) else { return Ok(false) };
    let shown = crate::escape::escape(path);
    let Some(want) = fields.get("recording_sha256").and_then(Value::as_str) else {
        return Err(format!("names the recording {shown}, which sp could not write after the command ran (see sp's log of that session)"));
    };
    let want_bytes = fields.get("recording_bytes").and_then(Value::as_u64);
    let file = match crate::sys::open(std::path::Path::new(path), crate::sys::Access::Read, crate::sys::Rules::any(u64::MAX)) {
        Ok((f, _)) => f,
        Err(crate::sys::SysError::Missing) => return Err(format!("names the recording {shown}, which is missing (removed or moved)")),
        Err(e) => return Err(format!("names the recording {shown}, which cannot be checked: {e}")),
    };
    let mut h = Sha256::new();
    let mut n = 0u64;
    let mut buf = vec![0u8; 64 * 1024];
    let mut r = std::io::BufReader::new(file);
    loop {
        match r.read(&mut buf) {
            Ok(0) => break,
            Ok(k) => {
                h.update(&buf[..k]);
                n += k as u64;
            }
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(format!("names the recording {shown}, which cannot be read: {}", io_why(&e))),
        }
    }
    if let Some(m) = want_bytes.filter(|m| *m != n) {
        return Err(format!("names the recording {shown}, which has {n} bytes where {m} were recorded (truncated, extended or replaced)"));
    }
    if crate::sys::hex(&h.finalize()) != want {
        return Err(format!("names the recording {shown}, which was changed or replaced (its SHA-256 is not the row's recording_sha256)"));
    }
    Ok(true)
}

/// Outcome-unknown calls listed by [`verify_reader`]; more are counted only.
pub(crate) const MAX_UNKNOWN_LISTED: usize = 100;

/// A call whose `intent` row has no `result` row after it in its session: the `intent`
/// is flushed to the disk before the action runs, the `result` row only with the next
/// flush (the next `intent`, or the session's `end`), so a crash, a kill or a power loss
/// after the action started can leave the action done (or not) and no row saying so.
/// Not a break in the chain: `sp audit verify` names each such call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Unknown {
    /// Line number of the call's first `intent` row.
    pub row: u64,
    pub seq: u64,
    pub session: String,
    pub target: Option<String>,
    /// The session has an `end` row (else: it stopped without one, or it still runs).
    pub ended: bool,
}

impl std::fmt::Display for Unknown {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "row {} (seq {}, session {}", self.row, self.seq, self.session)?;
        if let Some(t) = &self.target {
            write!(f, ", {}", crate::escape::escape(t))?;
        }
        let why = if self.ended {
            "its session ended without a result row"
        } else {
            "no result row: sp stopped after the action may have run (a crash, a kill, a power loss), or the call still runs"
        };
        write!(f, "): outcome unknown, {why}")
    }
}

/// Per session, the call whose `intent` has no `result` yet (module docs of [`Unknown`]).
#[derive(Default)]
struct Outcomes {
    open: std::collections::HashMap<String, Unknown>,
    listed: Vec<Unknown>,
    count: u64,
}

impl Outcomes {
    fn see(&mut self, n: u64, row: &ParsedRow) {
        let field = |k: &str| row.fields.get(k).and_then(Value::as_str);
        let (Some(kind), Some(session)) = (field("kind"), field("session")) else { return };
        match kind {
            // A redirect hop's intent belongs to the call already open.
            "intent" if !self.open.contains_key(session) => {
                let target = field("target").map(str::to_owned);
                let u = Unknown { row: n, seq: row.seq, session: session.to_owned(), target, ended: false };
                self.open.insert(session.to_owned(), u);
            }
            "result" => {
                self.open.remove(session);
            }
            "end" => {
                if let Some(mut u) = self.open.remove(session) {
                    u.ended = true;
                    self.add(u);
                }
            }
            _ => {}
        }
    }

    fn add(&mut self, u: Unknown) {
        self.count += 1;
        if self.listed.len() < MAX_UNKNOWN_LISTED {
            self.listed.push(u);
        }
    }

    /// Every call still open at the end of the file, in file order.
    fn finish(mut self) -> (Vec<Unknown>, u64) {
        let mut open: Vec<Unknown> = self.open.drain().map(|(_, u)| u).collect();
        open.sort_by_key(|u| u.row);
        for u in open {
            self.add(u);
        }
        self.listed.sort_by_key(|u| u.row);
        (self.listed, self.count)
    }
}

/// The first defect found: its 1-based line number and what is wrong.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct Broken {
    pub row: u64,
    pub why: String,
}

impl std::fmt::Display for Broken {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.row {
            0 => f.write_str(&self.why),
            n => write!(f, "row {n} {}", self.why),
        }
    }
}

impl std::error::Error for Broken {}

/// One line of a journal: its bytes without the newline, and whether it had one.
/// Lines longer than [`MAX_ROW_BYTES`] come back cut, as not terminated.
pub(crate) fn read_line(r: &mut impl BufRead) -> std::io::Result<Option<(Vec<u8>, bool)>> {
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
#[cfg(test)]
pub(crate) fn verify(bytes: &[u8], anchor: Option<&str>) -> Result<Verified, Broken> {
    verify_reader(std::io::Cursor::new(bytes), anchor)
}

/// Verifies a journal from its first row, streaming (memory does not grow with the
/// file). The first row's `prev` must be [`GENESIS`] or `anchor`; with `anchor`, it
/// must also be the first row's `prev` or some row's `hash` (the file holds the state
/// the operator recorded, unchanged). Rows other writers interleaved are one chain:
/// `seq` rises by one per row across sessions. When a row does not chain on, a second
/// pass finds where its `prev` is, to tell a swap from a removal.
pub(crate) fn verify_reader<R: BufRead + Seek>(mut r: R, anchor: Option<&str>) -> Result<Verified, Broken> {
    let mut chain = Chain::new(anchor)?;
    let mut outcomes = Outcomes::default();
    let mut recordings = 0;
    loop {
        let line = read_line(&mut r).map_err(|e| Broken { row: chain.rows + 1, why: format!("cannot be read: {}", io_why(&e)) })?;
        let Some((line, terminated)) = line else { break };
        let row = chain.step(&line, terminated, &mut r)?;
        if check_recording(&row.fields).map_err(|why| Broken { row: chain.rows, why })? {
            recordings += 1;
        }
        outcomes.see(chain.rows, &row);
    }
    chain.finish()?;
    let (unknown, unknown_count) = outcomes.finish();
    Ok(Verified {
        rows: chain.rows,
        first_seq: chain.first_seq,
        last_seq: (chain.rows > 0).then_some(chain.prev_seq),
        last_hash: chain.prev_hash.unwrap_or_else(|| chain.anchor.unwrap_or_else(|| GENESIS.to_owned())),
        anchor_row: chain.anchor_row,
        unknown,
        unknown_count,
        recordings,
    })
}

/// The chain check one line at a time ([`verify_reader`] over a whole file; `sp audit
/// export` as it streams, `--follow` included): each [`Chain::step`] takes the next
/// line and returns the row, or the first defect, by its line number.
#[derive(Debug)]
pub(crate) struct Chain {
    anchor: Option<String>,
    prev_hash: Option<String>,
    prev_seq: u64,
    first_seq: Option<u64>,
    anchor_row: Option<u64>,
    /// Lines taken so far (the line number of the last one).
    pub rows: u64,
}

impl Chain {
    /// A check from the start of a file; `anchor` as for [`verify_reader`].
    pub(crate) fn new(anchor: Option<&str>) -> Result<Chain, Broken> {
        if anchor.is_some_and(|a| !is_hash(a)) {
            return Err(Broken { row: 0, why: "the anchor must be 64 lowercase hex digits (a row's hash)".into() });
        }
        Ok(Chain { anchor: anchor.map(str::to_owned), prev_hash: None, prev_seq: 0, first_seq: None, anchor_row: None, rows: 0 })
    }

    /// The next line (without its newline; `terminated`: it had one). `r` is the file,
    /// read again from its start only to name where a row that does not chain on
    /// belongs (its position is lost then: the check stops at the first defect).
    pub(crate) fn step<R: BufRead + Seek>(&mut self, line: &[u8], terminated: bool, r: &mut R) -> Result<ParsedRow, Broken> {
        self.rows += 1;
        let n = self.rows;
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
        let row = parse_row(line).map_err(|e| Broken { row: n, why: e.to_string() })?;
        let anchor = self.anchor.as_deref();
        let prev_seq = self.prev_seq;
        match &self.prev_hash {
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
                    self.anchor_row = Some(0);
                }
                self.first_seq = Some(row.seq);
            }
            Some(expected) if row.prev != *expected => {
                let why = match find_hash(r, &row.prev) {
                    Some(j) if j > n => format!("is out of order: it chains on from row {j}, which comes after it (rows were swapped or moved)"),
                    Some(j) => format!("is out of order: it chains on from row {j} instead of row {} (rows were moved or duplicated)", n - 1),
                    None if row.seq > prev_seq + 1 => {
                        format!("follows a gap: seq jumps from {prev_seq} to {} and its prev matches no row (row(s) removed before it)", row.seq)
                    }
                    None if row.seq <= prev_seq => format!("is out of order: seq {} after seq {prev_seq}", row.seq),
                    None => format!("does not chain on from row {}: its prev is not that row's hash (a row was edited and re-hashed, or replaced)", n - 1),
                };
                return Err(Broken { row: n, why });
            }
            Some(_) if row.seq != prev_seq + 1 => {
                return Err(Broken { row: n, why: format!("has seq {} where {} was due", row.seq, prev_seq + 1) });
            }
            Some(_) => {}
        }
        if Some(row.hash.as_str()) == anchor {
            self.anchor_row = Some(n);
        }
        self.prev_hash = Some(row.hash.clone());
        self.prev_seq = row.seq;
        Ok(row)
    }

    /// At the end of the file: an anchor that no row had is a defect.
    pub(crate) fn finish(&self) -> Result<(), Broken> {
        if let (Some(a), None) = (&self.anchor, self.anchor_row) {
            return Err(Broken {
                row: self.rows + 1,
                why: format!("the anchor {a} is neither the first row's prev nor any row's hash: the rows it pinned were removed or rewritten"),
            });
        }
        Ok(())
    }
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
    use super::super::{Journal, Row};

    fn journal_text(n: usize) -> (Vec<u8>, Vec<String>) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("j.jsonl");
        let mut j = Journal::open(&path, false).unwrap();
        let mut lines = Vec::new();
        for i in 0..n {
            lines.push(j.write(Row::new("reject").set("decision", "denied").set("reason", format!("row {i}"))).unwrap().unwrap());
        }
        (std::fs::read(&path).unwrap(), lines)
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

    /// The class: a call whose durable `intent` has no `result` in its session, whatever
    /// came after it (its session's `end`, another session's rows, the end of the file),
    /// is listed as outcome unknown and the chain still verifies; a call with a result is
    /// not listed, however many intent rows (redirect hops) and token rows it has.
    #[test]
    fn an_intent_without_a_result_is_an_unknown_outcome_not_a_break() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("j.jsonl");
        let intent = |t: &str| Row::new("intent").set("decision", "allow").set("target", t.to_owned());
        let result = || Row::new("result").set("decision", "ok");
        let mut one = Journal::open(&path, false).unwrap();
        let mut two = Journal::open(&path, false).unwrap();
        one.write(intent("GET http://a/")).unwrap();
        one.write(intent("GET http://a/hop")).unwrap();
        one.write(Row::new("token").set("decision", "ok")).unwrap();
        one.write(result()).unwrap();
        one.write(intent("GET http://b/\u{1b}[2J")).unwrap();
        two.write(intent("GET http://c/")).unwrap();
        one.write(Row::new("end").set("decision", "eof")).unwrap();
        let mut three = Journal::open(&path, false).unwrap();
        three.write(intent("GET http://d/")).unwrap();
        three.write(result()).unwrap();
        let v = verify(&std::fs::read(&path).unwrap(), None).unwrap();
        assert_eq!(v.rows, 9);
        let unknown =
            |row: u64, seq: u64, j: &Journal, t: &str, ended: bool| Unknown { row, seq, session: j.session().to_owned(), target: Some(t.into()), ended };
        assert_eq!(v.unknown, vec![unknown(5, 5, &one, "GET http://b/\u{1b}[2J", true), unknown(6, 6, &two, "GET http://c/", false)]);
        assert_eq!(v.unknown_count, 2);
        let shown = v.unknown[0].to_string();
        assert!(shown.starts_with("row 5 (seq 5, session ") && shown.contains("http://b/\\u{1b}[2J): outcome unknown"), "{shown}");
    }

    /// Issue 34 §1: a row naming a session recording verifies only while the file is
    /// the one it hashed: changed (same size), truncated, extended, swapped with another
    /// recording, removed, replaced by a symbolic link, or never written are each found
    /// at that row, by name.
    #[test]
    fn a_recording_must_match_its_row() {
        let dir = tempfile::tempdir().unwrap();
        let (a, b) = (dir.path().join("a.cast"), dir.path().join("b.cast"));
        std::fs::write(&a, b"{\"version\":2}\n[0.1,\"o\",\"one\"]\n").unwrap();
        std::fs::write(&b, b"{\"version\":2}\n[0.1,\"o\",\"two\"]\n").unwrap();
        let path = dir.path().join("j.jsonl");
        let mut j = Journal::open(&path, false).unwrap();
        for f in [&a, &b] {
            let bytes = std::fs::read(f).unwrap();
            let row = Row::new("result")
                .set("decision", "ok")
                .set("recording", f.display().to_string())
                .set("recording_sha256", crate::audit::sha256_hex(&[&bytes]))
                .set("recording_bytes", bytes.len() as u64);
            j.write(row).unwrap();
        }
        j.write(Row::new("result").set("decision", "ok").set("recording", "/nowhere/c.cast")).unwrap();
        let journal = std::fs::read(&path).unwrap();
        let first_two: Vec<u8> = journal.split_inclusive(|b| *b == b'\n').take(2).flatten().copied().collect();
        assert_eq!(verify(&first_two, None).unwrap().recordings, 2);
        let e = verify(&journal, None).unwrap_err();
        assert_eq!(
            (e.row, e.why.as_str()),
            (3, "names the recording /nowhere/c.cast, which sp could not write after the command ran (see sp's log of that session)")
        );
        let check = |why: &str| {
            let e = verify(&first_two, None).unwrap_err();
            assert_eq!(e.row, 1);
            assert!(e.why.contains(why), "{}", e.why);
        };
        let good = std::fs::read(&a).unwrap();
        std::fs::write(&a, String::from_utf8(good.clone()).unwrap().replace("one", "0ne")).unwrap();
        check("which was changed or replaced (its SHA-256 is not the row's recording_sha256)");
        std::fs::write(&a, &good[..good.len() - 3]).unwrap();
        check(&format!("which has {} bytes where {} were recorded (truncated, extended or replaced)", good.len() - 3, good.len()));
        std::fs::write(&a, [good.as_slice(), b"[9,\"o\",\"x\"]\n"].concat()).unwrap();
        check("were recorded (truncated, extended or replaced)");
        // swapped: a and b have the same size, so only the hash tells them apart
        std::fs::rename(&b, dir.path().join("t")).unwrap();
        std::fs::write(&a, &good).unwrap();
        std::fs::rename(&a, &b).unwrap();
        std::fs::rename(dir.path().join("t"), &a).unwrap();
        check("which was changed or replaced");
        std::fs::remove_file(&a).unwrap();
        check("which is missing (removed or moved)");
        std::os::unix::fs::symlink(&b, &a).unwrap();
        check("which cannot be checked: is a symbolic link");
    }

    /// Each way a line fails to be a row, named as a value.
    #[test]
    fn a_bad_row_names_what_is_wrong() {
        let (_, lines) = journal_text(1);
        let good = &lines[0];
        assert!(parse_row(good.as_bytes()).is_ok());
        let spaced = good.replacen(",", ", ", 1);
        let rehashed = good.replacen("\"row 0\"", "\"row 9\"", 1);
        let no_seq = good.replacen("\"seq\":", "\"seq_\":", 1);
        let cases: Vec<(&[u8], BadRow)> = vec![
            (b"\xff", BadRow::NotUtf8),
            (b"[1]", BadRow::NotObject),
            (no_seq.as_bytes(), BadRow::NoChain),
            (spaced.as_bytes(), BadRow::NotCanonical),
            (rehashed.as_bytes(), BadRow::WrongHash),
        ];
        for (line, want) in cases {
            assert_eq!(parse_row(line), Err(want), "{}", String::from_utf8_lossy(line));
        }
        assert!(matches!(parse_row(b"{"), Err(BadRow::NotJson { .. })));
        assert_eq!(BadRow::WrongHash.to_string(), "is edited: its hash does not match its content");
    }
}
