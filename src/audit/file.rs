//! The journal file: opened and checked (`sys`), locked for each append, re-checked
//! under the lock (same file, not shrunk, others' rows chain on), appended with one
//! `write`, synced.

use std::fs::File;
use std::io::{Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::SystemTime;

use std::fmt;
use std::time::Duration;

use serde_json::Value;

use super::row::{line_text, raw_fp, rfc3339, seal_fields, Fields, Row, GENESIS};
use super::verify::{parse_row, read_line, BadRow, MAX_ROW_BYTES};
use crate::sys::os_reason as io_why;

/// How long an append waits for another `sp` to finish its own.
pub(crate) const LOCK_WAIT: Duration = Duration::from_secs(2);

#[derive(Debug, PartialEq, Eq)]
pub enum AuditError {
    /// The journal cannot be opened (startup).
    Open { path: PathBuf, why: String },
    /// No `audit.path` and no usable default location (startup).
    NoLocation { why: super::NoLocation },
    /// Another process kept the lock past [`LOCK_WAIT`].
    Locked { path: PathBuf },
    /// The file was replaced, removed, truncated or edited under us: stopped for good.
    Tampered { path: PathBuf, why: Tamper },
    /// Writing failed (disk full, I/O error).
    Write { path: PathBuf, why: String },
}

impl fmt::Display for AuditError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            AuditError::Open { path, why } => write!(f, "audit journal {}: {why}", path.display()),
            AuditError::NoLocation { why } => {
                write!(f, "no audit journal location: {why}; set audit.path in the policy (or \"audit\": {{\"path\": null}} to serve without a journal)")
            }
            AuditError::Locked { path } => {
                write!(f, "audit journal {}: another process has held its lock for more than {}s", path.display(), LOCK_WAIT.as_secs())
            }
            AuditError::Tampered { path, why } => {
                write!(f, "audit journal {}: {why}; journaling stopped, no further action runs", path.display())
            }
            AuditError::Write { path, why } => write!(f, "audit journal {}: write failed: {why}", path.display()),
        }
    }
}

impl std::error::Error for AuditError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            AuditError::Tampered { why, .. } => Some(why),
            _ => None,
        }
    }
}

/// What changed under `sp` that no writer of `sp` does: journaling stops for good.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Tamper {
    /// The path names no file now (`lstat` failed: the reason).
    Gone {
        why: String,
    },
    /// Another file has the name.
    Replaced,
    Truncated {
        size: u64,
        expected: u64,
    },
    /// Rows appended by another writer end inside a row.
    PartialRow,
    /// A row appended by another writer does not verify.
    BadRow(BadRow),
    /// A row appended by another writer (`seq`) does not follow the last one known.
    Unchained {
        seq: u64,
        last: u64,
    },
    /// Reading what another writer appended failed.
    Io {
        why: String,
    },
}

impl fmt::Display for Tamper {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Tamper::Gone { why } => write!(f, "the path no longer names the file (it was removed or moved: {why})"),
            Tamper::Replaced => f.write_str("the file was replaced under sp (another file now has its name)"),
            Tamper::Truncated { size, expected } => write!(f, "the file was truncated under sp ({size} bytes, {expected} expected)"),
            Tamper::PartialRow => f.write_str("another writer left a partial row"),
            Tamper::BadRow(why) => write!(f, "a row appended by another writer {why}"),
            Tamper::Unchained { seq, last } => write!(f, "a row appended by another writer (seq {seq}) does not chain on from seq {last}"),
            Tamper::Io { why } => f.write_str(why),
        }
    }
}

impl std::error::Error for Tamper {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Tamper::BadRow(why) => Some(why),
            _ => None,
        }
    }
}

pub(super) struct FileJournal {
    /// Shared with the lock guard of an append (not a `dup` and a `close`
    /// per row); never handed out otherwise.
    file: Arc<File>,
    pub(super) path: PathBuf,
    dev: u64,
    ino: u64,
    /// Bytes of the file known to hold verified rows.
    size: u64,
    seq: u64,
    prev: String,
    fsync: bool,
    /// Set once the file was found replaced or edited: never written again.
    stopped: Option<Tamper>,
}

pub(super) fn create_private_dirs(path: &Path) -> Result<(), AuditError> {
    use std::os::unix::fs::DirBuilderExt;
    let Some(dir) = path.parent() else { return Ok(()) };
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
        .map_err(|e| AuditError::Open { path: path.to_owned(), why: format!("cannot create {}: {}", dir.display(), io_why(&e)) })
}

/// Held while appending; released on drop (and by the kernel if the process dies).
fn lock<'f>(file: &'f File, path: &Path) -> Result<crate::sys::FileLock<'f>, AuditError> {
    crate::sys::lock_exclusive(file, LOCK_WAIT).map_err(|e| match e {
        crate::sys::LockError::Busy { .. } => AuditError::Locked { path: path.to_owned() },
        e => AuditError::Write { path: path.to_owned(), why: format!("cannot lock: {e}") },
    })
}

impl FileJournal {
    pub(super) fn open(path: &Path, fsync: bool, session: &str) -> Result<FileJournal, AuditError> {
        use rustix::fs::{FileType, Mode, OFlags};
        let fail = |why: String| AuditError::Open { path: path.to_owned(), why };
        if !path.is_absolute() {
            return Err(fail("must be an absolute path".into()));
        }
        // Not opened at all when the name is something else than a regular file now:
        // opening a device for writing can have effects.
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
        // The journal records what the agent sent (URLs, commands):
        // no group or other access at all, owned by this user (or root).
        if st.st_mode & 0o077 != 0 {
            return Err(fail(format!("permissions {:04o} give group or others access (fix: chmod go-rwx {})", st.st_mode & 0o7777, path.display())));
        }
        if st.st_uid != 0 && st.st_uid != crate::sys::euid() {
            return Err(fail(format!("is owned by uid {}, neither root nor the user sp runs as (fix: chown it, or name another journal)", st.st_uid)));
        }
        let file = Arc::new(File::from(fd));
        let mut j =
            FileJournal { file, path: path.to_owned(), dev: st.st_dev, ino: st.st_ino, size: 0, seq: 0, prev: GENESIS.to_owned(), fsync, stopped: None };
        let created = st.st_size == 0;
        {
            let locked = Arc::clone(&j.file);
            let _lock = lock(&locked, path).map_err(|e| fail(e.to_string()))?;
            j.load_tail(session)?;
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
    fn load_tail(&mut self, session: &str) -> Result<(), AuditError> {
        let path = self.path.clone();
        let fail = |why: String| AuditError::Open { path: path.clone(), why };
        let size = self.file.metadata().map_err(|e| fail(io_why(&e)))?.len();
        if size == 0 {
            return Ok(());
        }
        let (start, mut tail) = tail_window(&self.file, size).map_err(|e| fail(io_why(&e)))?;
        let mut torn = None;
        if tail.last() != Some(&b'\n') {
            let keep = tail.iter().rposition(|b| *b == b'\n').map_or(0, |i| i + 1);
            if keep == 0 && start > 0 {
                return Err(fail("the last row is longer than 1 MiB and has no end: not a journal sp wrote".into()));
            }
            torn = Some((tail.len() - keep, raw_fp(&tail[keep..])));
            tail.truncate(keep);
        }
        let whole = start + tail.len() as u64;
        if let Some(body) = tail.strip_suffix(b"\n") {
            let last = match body.iter().rposition(|b| *b == b'\n') {
                Some(i) => &body[i + 1..],
                None if start == 0 => body,
                None => return Err(fail("the last row is longer than 1 MiB: not a journal sp wrote".into())),
            };
            let row = parse_row(last).map_err(|why| fail(format!("its last row {why}; run `sp audit verify` and move the file away")))?;
            self.seq = row.seq;
            self.prev = row.hash;
        }
        self.size = whole;
        if let Some((len, fp)) = torn {
            log::warn!("audit journal {}: cutting off a torn last row ({len} bytes) left by a crash", self.path.display());
            self.file.set_len(whole).map_err(|e| fail(io_why(&e)))?;
            let mut m = Row::new("recover")
                .set("reason", format!("a torn last row ({len} bytes, no newline) left by an interrupted writer was cut off"))
                .set("bytes_in", len as u64)
                .set("request_fp", fp)
                .finish(crate::gate::vault::scrub_journal_text);
            m.put("session", Value::String(session.to_owned()));
            self.append_locked(m, true).map_err(|e| fail(e.to_string()))?;
        }
        Ok(())
    }

    /// Appends a row; with `fsync` on and `sync` set it is flushed to the disk together
    /// with every row before it.
    pub(super) fn append(&mut self, row: Fields, sync: bool) -> Result<String, AuditError> {
        if let Some(why) = &self.stopped {
            return Err(AuditError::Tampered { path: self.path.clone(), why: why.clone() });
        }
        let file = Arc::clone(&self.file);
        let _lock = lock(&file, &self.path)?;
        if let Err(why) = self.check_file() {
            self.stopped = Some(why.clone());
            return Err(AuditError::Tampered { path: self.path.clone(), why });
        }
        self.append_locked(row, sync)
    }

    /// Same file as opened, not shrunk; rows other writers appended meanwhile chain on.
    fn check_file(&mut self) -> Result<(), Tamper> {
        let now = rustix::fs::lstat(&self.path).map_err(|e| Tamper::Gone { why: e.to_string() })?;
        if (now.st_dev, now.st_ino) != (self.dev, self.ino) {
            return Err(Tamper::Replaced);
        }
        // fstat(2), not std's statx(2) with every field: only the size is read.
        let st = rustix::fs::fstat(&*self.file).map_err(|e| Tamper::Io { why: io_why(&e.into()) })?;
        let size = u64::try_from(st.st_size).unwrap_or(0);
        if size < self.size {
            return Err(Tamper::Truncated { size, expected: self.size });
        }
        if size > self.size {
            self.catch_up(size)?;
        }
        Ok(())
    }

    /// Reads the rows another `sp` appended since our last write; each must verify and
    /// chain on from the last row we know.
    fn catch_up(&mut self, size: u64) -> Result<(), Tamper> {
        let io = |e: std::io::Error| Tamper::Io { why: io_why(&e) };
        let mut f = &*self.file;
        f.seek(SeekFrom::Start(self.size)).map_err(io)?;
        let mut r = std::io::BufReader::new(f.take(size - self.size));
        while let Some((line, terminated)) = read_line(&mut r).map_err(io)? {
            if !terminated {
                return Err(Tamper::PartialRow);
            }
            let row = parse_row(&line).map_err(Tamper::BadRow)?;
            if row.prev != self.prev || row.seq != self.seq + 1 {
                return Err(Tamper::Unchained { seq: row.seq, last: self.seq });
            }
            self.seq = row.seq;
            self.prev = row.hash;
        }
        self.size = size;
        Ok(())
    }

    fn append_locked(&mut self, mut row: Fields, sync: bool) -> Result<String, AuditError> {
        let write_err = |why: String| AuditError::Write { path: self.path.clone(), why };
        // Stamped under the lock: across writers, `ts` follows `seq`.
        row.put("ts", Value::String(rfc3339(SystemTime::now())));
        row.put("seq", Value::from(self.seq + 1));
        row.put("prev", Value::String(self.prev.clone()));
        let (hash, mut bytes) = seal_fields(&self.prev, &row);
        if let Err(e) = (&*self.file).write_all(&bytes) {
            // Never leave half a row: take back whatever part was written.
            let _ = self.file.set_len(self.size);
            return Err(write_err(io_why(&e)));
        }
        self.size += bytes.len() as u64;
        self.seq += 1;
        self.prev = hash;
        if self.fsync && sync {
            self.file.sync_data().map_err(|e| write_err(format!("fdatasync: {}", io_why(&e))))?;
        }
        bytes.pop();
        Ok(line_text(bytes))
    }
}

/// The end of a journal of `size` bytes that holds its last complete row and anything
/// after it (a torn row), and where that window starts. Read backwards in steps of
/// [`TAIL_STEP`] until the row before the last one ends inside the window (a
/// start costs a few KiB of reading, not 1 MiB), never more than `MAX_ROW_BYTES + 1`
/// bytes, the most a window needs: [`FileJournal::load_tail`] refuses what does not fit.
fn tail_window(file: &File, size: u64) -> std::io::Result<(u64, Vec<u8>)> {
    use std::os::unix::fs::FileExt;
    let floor = size.saturating_sub(MAX_ROW_BYTES as u64 + 1);
    let mut start = size;
    let mut tail = Vec::new();
    while start > floor && !holds_last_row(&tail) {
        let from = start.saturating_sub(TAIL_STEP).max(floor);
        let mut chunk = vec![0; (start - from) as usize];
        file.read_exact_at(&mut chunk, from)?;
        chunk.extend_from_slice(&tail);
        tail = chunk;
        start = from;
    }
    Ok((start, tail))
}

/// How far back [`tail_window`] reads at a time; most rows are a few hundred bytes.
const TAIL_STEP: u64 = 16 * 1024;

/// Does `tail` reach back past the start of its last complete row? True when a newline
/// precedes the newline that ends that row.
fn holds_last_row(tail: &[u8]) -> bool {
    let Some(end) = tail.iter().rposition(|b| *b == b'\n') else { return false };
    tail[..end].contains(&b'\n')
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The window read backwards gives the same last row and torn part as reading the
    /// whole last `MAX_ROW_BYTES + 1` bytes did, for rows shorter and longer
    /// than a step, one row or many, a torn end or none, and no newline at all.
    #[test]
    fn the_backward_tail_finds_what_the_whole_window_found() {
        let row = |n: usize, fill: u8| {
            let mut r = vec![fill; n];
            r.push(b'\n');
            r
        };
        let cases: Vec<(&str, Vec<u8>)> = vec![
            ("one short row", row(10, b'a')),
            ("many short rows", (0..5000).flat_map(|i| row(300 + i % 7, b'a' + (i % 26) as u8)).collect()),
            ("a last row longer than a step", [row(50, b'a'), row(3 * TAIL_STEP as usize + 5, b'b')].concat()),
            ("a row a step long, exactly", [row(TAIL_STEP as usize - 1, b'a'), row(TAIL_STEP as usize - 1, b'b')].concat()),
            ("a torn end", [row(100, b'a'), row(200, b'b'), b"{\"seq\":9,\"ts".to_vec()].concat()),
            ("a torn end longer than a step", [row(100, b'a'), row(200, b'b'), vec![b'c'; 2 * TAIL_STEP as usize]].concat()),
            ("no newline at all", vec![b'x'; 40_000]),
            ("a huge file of rows", (0..20_000).flat_map(|i| row(150, b'a' + (i % 26) as u8)).collect()),
            ("a last row longer than the limit", [row(10, b'a'), row(MAX_ROW_BYTES + 10, b'b')].concat()),
        ];
        // What both readings decide: the last complete row and the bytes after it.
        fn decide(start: u64, tail: &[u8]) -> (Option<Vec<u8>>, Vec<u8>) {
            let keep = tail.iter().rposition(|b| *b == b'\n').map_or(0, |i| i + 1);
            let (whole, torn) = tail.split_at(keep);
            let last = whole.strip_suffix(b"\n").and_then(|body| match body.iter().rposition(|b| *b == b'\n') {
                Some(i) => Some(body[i + 1..].to_vec()),
                None if start == 0 => Some(body.to_vec()),
                None => None,
            });
            (last, torn.to_vec())
        }
        let dir = tempfile::tempdir().unwrap();
        for (what, bytes) in cases {
            let path = dir.path().join("j");
            std::fs::write(&path, &bytes).unwrap();
            let file = File::open(&path).unwrap();
            let size = bytes.len() as u64;
            let old_start = size.saturating_sub(MAX_ROW_BYTES as u64 + 1);
            let old = decide(old_start, &bytes[old_start as usize..]);
            let (start, tail) = tail_window(&file, size).unwrap();
            assert_eq!(&bytes[start as usize..], &tail[..], "{what}: the window is the file's end");
            assert_eq!(decide(start, &tail), old, "{what}");
            if size > 4 * TAIL_STEP && what.contains("many") || what.contains("huge") {
                assert!(tail.len() as u64 <= TAIL_STEP, "{what}: read {} bytes for a short last row", tail.len());
            }
        }
    }

    /// Each way the file changes under `sp` stops the journal with its reason, as a
    /// value; the next write is refused for the same reason.
    #[test]
    fn a_file_changed_under_sp_stops_the_journal_for_a_named_reason() {
        use super::super::Journal;
        let dir = tempfile::tempdir().unwrap();
        let row = || Row::new("reject").set("decision", "denied");
        let fresh = |name: &str| {
            let path = dir.path().join(name);
            let mut j = Journal::open(&path, false).unwrap();
            j.write(row()).unwrap();
            (j, path.clone(), std::fs::metadata(&path).unwrap().len())
        };
        let tampered = |path: &Path, why| Err(AuditError::Tampered { path: path.to_owned(), why });

        let (mut j, path, size) = fresh("truncated");
        std::fs::OpenOptions::new().write(true).open(&path).unwrap().set_len(10).unwrap();
        let why = Tamper::Truncated { size: 10, expected: size };
        assert_eq!(j.write(row()), tampered(&path, why.clone()));
        assert_eq!(j.write(row()), tampered(&path, why), "stopped for good");

        let (mut j, path, _) = fresh("replaced");
        let other = dir.path().join("other");
        std::fs::write(&other, b"").unwrap();
        std::fs::rename(&other, &path).unwrap();
        assert_eq!(j.write(row()), tampered(&path, Tamper::Replaced));

        let (mut j, path, _) = fresh("partial");
        std::fs::OpenOptions::new().append(true).open(&path).unwrap().write_all(b"{\"seq\":2").unwrap();
        assert_eq!(j.write(row()), tampered(&path, Tamper::PartialRow));

        let (mut j, path, _) = fresh("forged");
        std::fs::OpenOptions::new().append(true).open(&path).unwrap().write_all(b"[1]\n").unwrap();
        assert_eq!(j.write(row()), tampered(&path, Tamper::BadRow(BadRow::NotObject)));
        assert_eq!(Tamper::Unchained { seq: 9, last: 2 }.to_string(), "a row appended by another writer (seq 9) does not chain on from seq 2");
    }
}
