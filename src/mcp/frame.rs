//! Stage 1: stdin bytes -> frames.
//!
//! One line is one frame (MCP stdio transport: messages are newline-delimited and contain
//! no embedded newline). The reader is bounded: it never holds more than `max_bytes` of
//! one line, and on an oversized line it stops reading at once instead of buffering the
//! rest (the peer has lost framing, the session will close).
//!
//! ```text
//!   bytes --read up to '\n'--> line --strip one '\r'--> no NUL --> no other '\r' --> UTF-8 --> Frame
//!            |                                 |             |                 |
//!            +-- > max_bytes: TooLong          +-- Nul       +-- StrayCr       +-- InvalidUtf8
//!            +-- EOF with a partial line: EofMidLine (never executed)
//! ```
//!
//! A clean EOF (no partial line) ends the stream: `next_frame` returns `None`.

use std::fmt;
use std::io::{self, BufRead};

use crate::gate::outcome::Reason;

/// Default line cap: 4 MiB. `sp mcp --max-line-bytes` changes it.
pub(crate) const DEFAULT_MAX_LINE_BYTES: usize = 4 * 1024 * 1024;

/// A complete line: valid UTF-8, no NUL, without its `\n` (and without one trailing `\r`).
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct Frame {
    pub text: String,
    /// Raw length on the wire, without the terminating newline.
    pub raw_len: usize,
}

#[derive(Debug, PartialEq, Eq)]
pub(crate) enum FrameError {
    /// The line exceeded the cap; nothing after the cap was read.
    TooLong { limit: usize },
    /// The line is not UTF-8; `offset` is the first bad byte.
    InvalidUtf8 { offset: usize },
    /// The line contains a NUL byte at `offset`.
    Nul { offset: usize },
    /// A carriage return other than the one tolerated before the newline.
    StrayCr { offset: usize },
    /// Input ended in the middle of a line (no terminating newline).
    EofMidLine { len: usize },
    /// Reading stdin failed.
    Io(io::ErrorKind),
}

impl fmt::Display for FrameError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            FrameError::TooLong { limit } => write!(f, "line longer than {limit} bytes"),
            FrameError::InvalidUtf8 { offset } => {
                write!(f, "line is not valid UTF-8 (byte {offset})")
            }
            FrameError::Nul { offset } => write!(f, "line contains a NUL byte (byte {offset})"),
            FrameError::StrayCr { offset } => {
                write!(f, "line contains a carriage return (byte {offset}); only one before the newline is allowed")
            }
            FrameError::EofMidLine { len } => {
                write!(f, "input ended inside a line ({len} bytes without a newline)")
            }
            FrameError::Io(kind) => write!(f, "reading input failed: {kind}"),
        }
    }
}

impl std::error::Error for FrameError {}

impl FrameError {
    /// A short stable name, used in counters and logs.
    pub(crate) fn reason(&self) -> Reason {
        match self {
            FrameError::TooLong { .. } => Reason::FrameTooLong,
            FrameError::InvalidUtf8 { .. } => Reason::FrameBadUtf8,
            FrameError::Nul { .. } => Reason::FrameNul,
            FrameError::StrayCr { .. } => Reason::FrameStrayCr,
            FrameError::EofMidLine { .. } => Reason::FrameTruncated,
            FrameError::Io(_) => Reason::FrameIo,
        }
    }
}

pub(crate) struct FrameReader<R> {
    inner: R,
    max_bytes: usize,
    line: Vec<u8>,
    /// `line` holds the start of a line whose read was interrupted ([`Read::Parked`]):
    /// the next read goes on with it.
    partial: bool,
}

/// What [`FrameReader::read`] got.
pub(crate) enum Read {
    Frame(Result<Frame, FrameError>),
    /// A clean end of input.
    Eof,
    /// The source said `WouldBlock` (`signals::Nudge`): nothing is lost, the line read
    /// so far is kept for the next read.
    Parked,
}

impl<R: BufRead> FrameReader<R> {
    pub(crate) fn new(inner: R, max_bytes: usize) -> Self {
        FrameReader { inner, max_bytes, line: Vec::new(), partial: false }
    }

    /// The bytes read for the last frame (or the part read before it failed), without
    /// the newline: what a malformed frame's journal fingerprint covers.
    pub(crate) fn raw(&self) -> &[u8] {
        &self.line
    }

    /// The next frame, `None` on a clean end of input. After an error the caller must
    /// stop reading: framing is lost.
    #[cfg(test)]
    pub(crate) fn next_frame(&mut self) -> Option<Result<Frame, FrameError>> {
        loop {
            match self.read() {
                Read::Frame(f) => return Some(f),
                Read::Eof => return None,
                Read::Parked => {}
            }
        }
    }

    /// The next frame (`None` on a clean end of input), except that a source's `WouldBlock`
    /// returns [`Read::Parked`] (the partial line kept) instead of being an error.
    pub(crate) fn read(&mut self) -> Read {
        if !std::mem::take(&mut self.partial) {
            self.line.clear();
        }
        loop {
            let available = match self.inner.fill_buf() {
                Ok(buf) => buf,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    self.partial = true;
                    return Read::Parked;
                }
                Err(e) => return Read::Frame(Err(FrameError::Io(e.kind()))),
            };
            if available.is_empty() {
                if self.line.is_empty() {
                    return Read::Eof;
                }
                return Read::Frame(Err(FrameError::EofMidLine { len: self.line.len() }));
            }
            let (chunk, found_newline) = match available.iter().position(|b| *b == b'\n') {
                Some(i) => (&available[..i], true),
                None => (available, false),
            };
            if self.line.len() + chunk.len() > self.max_bytes {
                // Take nothing more: the rest of this line is never buffered.
                return Read::Frame(Err(FrameError::TooLong { limit: self.max_bytes }));
            }
            self.line.extend_from_slice(chunk);
            let used = chunk.len() + usize::from(found_newline);
            self.inner.consume(used);
            if found_newline {
                return Read::Frame(self.take_line());
            }
        }
    }
}

impl<R> FrameReader<R> {
    /// Checks the line just read and moves it into the frame: no second copy of a large
    /// line. A buffer grown past [`KEEP_CAPACITY`] is not kept for the
    /// next line, so one large message does not stay resident for the whole session.
    fn take_line(&mut self) -> Result<Frame, FrameError> {
        let raw_len = self.line.len();
        let body_len = raw_len - usize::from(self.line.ends_with(b"\r"));
        let body = &self.line[..body_len];
        if let Some(offset) = body.iter().position(|b| *b == 0) {
            return Err(FrameError::Nul { offset });
        }
        // JSON would take a bare CR as whitespace, but a peer that emits one is not speaking
        // newline-delimited frames (`a\rb\n` may be two messages to it).
        if let Some(offset) = body.iter().position(|b| *b == b'\r') {
            return Err(FrameError::StrayCr { offset });
        }
        let mut bytes = if self.line.capacity() > KEEP_CAPACITY {
            std::mem::take(&mut self.line)
        } else {
            let copy = body.to_vec();
            self.line.clear();
            copy
        };
        bytes.truncate(body_len);
        // UTF-8 is checked once, by the conversion itself; on failure the bytes go back
        // (with the CR that was cut) so `raw()` still covers the whole line.
        match String::from_utf8(bytes) {
            Ok(text) => Ok(Frame { text, raw_len }),
            Err(e) => {
                let offset = e.utf8_error().valid_up_to();
                self.line = e.into_bytes();
                if raw_len > body_len {
                    self.line.push(b'\r');
                }
                Err(FrameError::InvalidUtf8 { offset })
            }
        }
    }
}

/// Line buffers up to this size are reused from line to line; a larger one moves into
/// its frame and is freed with it.
const KEEP_CAPACITY: usize = 64 * 1024;

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{BufReader, Read};

    fn frames(input: &[u8], max: usize) -> Vec<Result<String, FrameError>> {
        let mut r = FrameReader::new(input, max);
        let mut out = Vec::new();
        while let Some(f) = r.next_frame() {
            let stop = f.is_err();
            out.push(f.map(|f| f.text));
            if stop {
                break;
            }
        }
        out
    }

    #[test]
    fn table() {
        type Case<'a> = (&'a [u8], Vec<Result<&'a str, FrameError>>);
        let cases: &[Case] = &[
            (b"", vec![]),
            (b"a\n", vec![Ok("a")]),
            (b"a\r\n", vec![Ok("a")]),
            (b"a\r\r\n", vec![Err(FrameError::StrayCr { offset: 1 })]),
            (b"a\rb\n", vec![Err(FrameError::StrayCr { offset: 1 })]),
            (b"a\nb\n", vec![Ok("a"), Ok("b")]),
            (b"\n", vec![Ok("")]),
            (b"abc", vec![Err(FrameError::EofMidLine { len: 3 })]),
            (b"a\nbc", vec![Ok("a"), Err(FrameError::EofMidLine { len: 2 })]),
            (b"a\0b\n", vec![Err(FrameError::Nul { offset: 1 })]),
            (b"ab\xff\n", vec![Err(FrameError::InvalidUtf8 { offset: 2 })]),
            // a lone surrogate encoded as UTF-8 bytes (CESU-style) is not UTF-8
            (b"\xed\xa0\x80\n", vec![Err(FrameError::InvalidUtf8 { offset: 0 })]),
            (b"\xef\xbb\xbf{}\n", vec![Ok("\u{feff}{}")]),
            (b"12345678\n", vec![Ok("12345678")]),
            (b"123456789\n", vec![Err(FrameError::TooLong { limit: 8 })]),
            (b"1234567\r\n", vec![Ok("1234567")]),
        ];
        for (input, want) in cases {
            let want: Vec<Result<String, FrameError>> = want.iter().map(|r| r.as_ref().map(|s| s.to_string()).map_err(clone_err)).collect();
            assert_eq!(frames(input, 8), want, "input {:?}", String::from_utf8_lossy(input));
        }
    }

    /// After a line that is not UTF-8, `raw()` still holds all of it, CR included (the
    /// journal fingerprints those bytes), also for a line too large to keep its buffer.
    #[test]
    fn raw_keeps_a_line_that_is_not_utf8() {
        for len in [2, KEEP_CAPACITY + 10] {
            let mut line = vec![b'a'; len];
            line.extend_from_slice(b"\xff\r");
            let input = [line.as_slice(), b"\n"].concat();
            let mut r = FrameReader::new(input.as_slice(), 1 << 20);
            assert_eq!(r.next_frame().map(|f| f.err()), Some(Some(FrameError::InvalidUtf8 { offset: len })));
            assert_eq!(r.raw(), line.as_slice(), "len {len}");
        }
    }

    fn clone_err(e: &FrameError) -> FrameError {
        match e {
            FrameError::TooLong { limit } => FrameError::TooLong { limit: *limit },
            FrameError::InvalidUtf8 { offset } => FrameError::InvalidUtf8 { offset: *offset },
            FrameError::Nul { offset } => FrameError::Nul { offset: *offset },
            FrameError::StrayCr { offset } => FrameError::StrayCr { offset: *offset },
            FrameError::EofMidLine { len } => FrameError::EofMidLine { len: *len },
            FrameError::Io(k) => FrameError::Io(*k),
        }
    }

    /// Every prefix of a stream yields exactly the complete lines it contains, and a
    /// partial last line is reported as truncated, never as a frame (ureq-proto style).
    #[test]
    fn every_prefix() {
        let input = b"{\"a\":1}\r\n{\"b\":[1,2]}\n\n{\"c\":\"x\"}\n";
        for cut in 0..=input.len() {
            let prefix = &input[..cut];
            let got = frames(prefix, 1024);
            let complete: Vec<&[u8]> = prefix.split_inclusive(|b| *b == b'\n').filter(|l| l.ends_with(b"\n")).collect();
            let partial = prefix.len() - complete.iter().map(|l| l.len()).sum::<usize>();
            let oks: Vec<&String> = got.iter().filter_map(|r| r.as_ref().ok()).collect();
            assert_eq!(oks.len(), complete.len(), "cut {cut}");
            if partial > 0 {
                assert_eq!(got.last(), Some(&Err(FrameError::EofMidLine { len: partial })));
            } else {
                assert!(got.iter().all(|r| r.is_ok()), "cut {cut}");
            }
        }
    }

    /// A reader that returns one byte per read: chunk boundaries never matter.
    struct Trickle<'a>(&'a [u8]);
    impl Read for Trickle<'_> {
        fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
            if self.0.is_empty() || buf.is_empty() {
                return Ok(0);
            }
            buf[0] = self.0[0];
            self.0 = &self.0[1..];
            Ok(1)
        }
    }

    #[test]
    fn byte_at_a_time() {
        let input = b"one\r\ntwo\nthree";
        let mut r = FrameReader::new(BufReader::with_capacity(1, Trickle(input)), 16);
        assert_eq!(r.next_frame().unwrap().unwrap().text, "one");
        assert_eq!(r.next_frame().unwrap().unwrap().text, "two");
        assert_eq!(r.next_frame(), Some(Err(FrameError::EofMidLine { len: 5 })));
    }

    /// An oversized line is refused without reading the rest of it.
    #[test]
    fn oversize_stops_reading() {
        let mut input = vec![b'x'; 100];
        input.extend_from_slice(b"\nnext\n");
        let mut cursor = io::Cursor::new(input);
        {
            let buffered = BufReader::with_capacity(4, &mut cursor);
            let mut r = FrameReader::new(buffered, 10);
            assert_eq!(r.next_frame(), Some(Err(FrameError::TooLong { limit: 10 })));
        }
        assert!(cursor.position() <= 16, "read {} bytes", cursor.position());
    }

    /// One byte per read, and `WouldBlock` (a nudge) before every other byte.
    struct Nudged<'a>(&'a [u8], bool);
    impl Read for Nudged<'_> {
        fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
            self.1 = !self.1;
            if self.1 {
                return Err(io::ErrorKind::WouldBlock.into());
            }
            Trickle(self.0).read(buf).inspect(|n| self.0 = &self.0[*n..])
        }
    }

    #[test]
    fn a_nudged_read_keeps_the_line_read_so_far() {
        let input = b"{\"a\":1}\r\n{\"b\":22}\nend";
        let mut r = FrameReader::new(BufReader::with_capacity(1, Nudged(input, false)), 64);
        let (mut frames, mut parked) = (Vec::new(), 0);
        loop {
            match r.read() {
                super::Read::Parked => parked += 1,
                super::Read::Frame(f) => {
                    let last = f.is_err();
                    frames.push(f);
                    if last {
                        break;
                    }
                }
                super::Read::Eof => break,
            }
        }
        assert!(parked > 10, "{parked}");
        assert_eq!(frames.len(), 3);
        assert_eq!(frames[0].as_ref().unwrap().text, r#"{"a":1}"#);
        assert_eq!(frames[1].as_ref().unwrap().text, r#"{"b":22}"#);
        assert_eq!(frames[2], Err(FrameError::EofMidLine { len: 3 }));
        assert_eq!(r.raw(), b"end");
    }
}
