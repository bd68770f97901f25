//! The protocol stream: the only module that may touch the process's stdout.
//!
//! `sp(1)`, STDOUT: every byte on stdout must be one complete
//! JSON-RPC message followed by `\n`. Rust code can be kept off stdout by a lint, but a C
//! library, a dependency's stray `print!` or a child process cannot. So the very first
//! thing `main` does is [`take_stdout`]:
//!
//! ```text
//!   fd 1 (the client's pipe) --dup, close-on-exec--> private fd  -> ProtocolWriter
//!   fd 2 (stderr)            --dup2-------------------> fd 1     (strays land on stderr)
//! ```
//!
//! From then on writing to "stdout" anywhere in the process, including children that
//! inherit fd 1, reaches stderr. The private descriptor is `O_CLOEXEC`, so no child can
//! inherit the protocol stream. `clippy.toml` disallows `std::io::stdout`, `print!` and
//! `println!` everywhere else; this module is the single exception.
//!
//! [`ProtocolWriter`] is generic over `Write` so tests drive it with a `Vec<u8>`; it writes
//! whole messages, one per line, each flushed.
//!
//! # What may reach it
//! Only the wire's typed messages: [`ProtocolWriter::send`] takes an `mcp::model::Wire`,
//! which the model's types alone implement (a `Response`, the `tools/list` answers, a
//! `Notification`, sp's own `Request`), never a `serde_json::Value`. Outside text is in
//! them only as a tool result's `Scrubbed` pieces (`mcp::model::ToolResult`, built from
//! what the Vault scrubbed). Everything else is sp's own vocabulary: the session's
//! results, refusals that describe the agent's own request, progress notifications
//! (counts and sp's words), the approval question.

use std::fs::File;
use std::io::{self, Write};
use std::os::fd::{AsFd, OwnedFd};

use crate::mcp::model::Wire;

/// The process's original stdout, moved to a private close-on-exec descriptor.
/// Holding one is the capability to write to the client.
#[derive(Debug)]
pub struct StdoutHandle(OwnedFd);

/// Moves the protocol stream off fd 1 and points fd 1 at stderr (or `/dev/null` if stderr
/// is closed). Must run before anything else can print.
///
/// Fails if stdout is not open: then there is no protocol stream to own and the caller
/// must exit without serving.
pub fn take_stdout() -> io::Result<StdoutHandle> {
    #[expect(clippy::disallowed_methods, reason = "the one place that owns stdout")]
    let original = io::stdout();
    // `try_clone_to_owned` uses F_DUPFD_CLOEXEC: the copy is close-on-exec and >= 3.
    let private = original.as_fd().try_clone_to_owned()?;
    let redirected = match rustix::stdio::dup2_stdout(io::stderr()) {
        Ok(()) => Ok(()),
        Err(_) => File::options().write(true).open("/dev/null").and_then(|null| rustix::stdio::dup2_stdout(null).map_err(io::Error::from)),
    };
    redirected?;
    Ok(StdoutHandle(private))
}

fn is_dev_null(fd: &OwnedFd) -> bool {
    use std::os::unix::fs::{FileTypeExt, MetadataExt};
    let Ok(ours) = fd.try_clone().map(File::from).and_then(|f| f.metadata()) else {
        return false;
    };
    let Ok(null) = std::fs::metadata("/dev/null") else {
        return false;
    };
    ours.file_type().is_char_device() && ours.rdev() == null.rdev()
}

impl StdoutHandle {
    /// The protocol stream for `sp mcp`. Refused when it is `/dev/null`: the Rust
    /// runtime reopens a closed fd 1 there before `main`, and then nobody could read the
    /// answers, so serving (and acting) would be blind. (`sp --version >/dev/null` and
    /// the other human commands are fine.)
    pub fn into_protocol(self) -> io::Result<ProtocolWriter<Patient>> {
        if is_dev_null(&self.0) {
            return Err(io::Error::other("standard output is not usable: it is /dev/null or was closed: nothing could read the answers"));
        }
        Ok(ProtocolWriter::new(Patient(File::from(self.0))))
    }

    /// Plain text for the human-facing commands (`sp check`, `--help`, `--version`),
    /// which never run in the same process as `sp mcp`.
    pub fn into_text(self) -> File {
        File::from(self.0)
    }
}

/// The protocol stream as a writer that waits instead of failing.
///
/// A client may hand `sp` a non-blocking stdout (`O_NONBLOCK` is a property of the open
/// pipe, shared with the client). A write that would block then fails with `EAGAIN`
/// partway through a message; taking that as "client gone" left a cut line. Here
/// `EAGAIN` waits in `poll(2)` until the stream takes bytes again, `EINTR` (a signal)
/// retries, and only a real error (`EPIPE`: the client closed its end) is returned.
#[derive(Debug)]
pub struct Patient(pub File);

impl Patient {
    fn wait_writable(&self) -> io::Result<()> {
        use rustix::event::{poll, PollFd, PollFlags};
        let mut fds = [PollFd::new(&self.0, PollFlags::OUT)];
        match poll(&mut fds, None) {
            Ok(_) | Err(rustix::io::Errno::INTR) => Ok(()),
            Err(e) => Err(e.into()),
        }
    }
}

impl Write for Patient {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        loop {
            match self.0.write(buf) {
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => self.wait_writable()?,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                r => return r,
            }
        }
    }

    fn flush(&mut self) -> io::Result<()> {
        self.0.flush()
    }
}

/// Writes whole JSON-RPC messages, one compact line each, flushed after every message.
#[derive(Debug)]
pub struct ProtocolWriter<W: Write> {
    inner: W,
    /// The bytes of the message being written not yet handed to `inner`; empty between
    /// messages. Kept for the whole session rather than allocated per message: a 64 KiB
    /// allocation is an `mmap` and a `munmap` per message with musl's allocator (the
    /// static build), half the cost of a `ping` (`make bench`).
    buf: Vec<u8>,
    written: u64,
}

/// [`ProtocolWriter`]'s buffer: larger pieces go straight to the stream.
const WRITE_BUFFER: usize = 64 * 1024;

impl<W: Write> ProtocolWriter<W> {
    pub fn new(inner: W) -> Self {
        ProtocolWriter { inner, buf: Vec::with_capacity(WRITE_BUFFER), written: 0 }
    }

    /// Sends one message. serde_json's compact form escapes every control character
    /// inside strings, so the only newline in the line is the terminator. The line is
    /// written whole or, if the client is gone, not at all from its point of view: a
    /// signal arriving meanwhile does not cut it (`write_all` and [`Patient`] retry `EINTR`;
    /// `sp mcp` acts on the signal between messages).
    ///
    /// The line is serialised straight into the stream through a 64 KiB buffer (issue
    /// #12): an 8 MiB answer is not built a second time in memory as bytes. A message
    /// that fails partway leaves nothing buffered behind for the next one.
    ///
    /// A typed answer (`mcp::model::Response`) renders its tool result's text block from
    /// its `structuredContent` as it is written; the `tools/list` answer writes its
    /// cached text.
    pub(crate) fn send<M: Wire>(&mut self, message: &M) -> io::Result<()> {
        self.write_message(message)
    }

    fn write_message<T: serde::Serialize>(&mut self, message: &T) -> io::Result<()> {
        let mut w = Chunked { buf: &mut self.buf, inner: &mut self.inner };
        let sent = serde_json::to_writer(&mut w, message)
            .map_err(io::Error::from)
            .and_then(|()| w.write_all(b"\n"))
            .and_then(|()| w.drain())
            .and_then(|()| self.inner.flush());
        self.buf.clear();
        sent?;
        self.written += 1;
        Ok(())
    }

    /// How many messages were written.
    pub fn written(&self) -> u64 {
        self.written
    }

    pub fn into_inner(self) -> W {
        self.inner
    }
}

/// A `BufWriter` over a buffer that outlives it (see [`ProtocolWriter::buf`]).
struct Chunked<'a, W> {
    buf: &'a mut Vec<u8>,
    inner: &'a mut W,
}

impl<W: Write> Chunked<'_, W> {
    fn drain(&mut self) -> io::Result<()> {
        self.inner.write_all(self.buf)?;
        self.buf.clear();
        Ok(())
    }

    /// A piece that does not fit in what is left of the buffer.
    #[cold]
    #[inline(never)]
    fn overflow(&mut self, data: &[u8]) -> io::Result<()> {
        self.drain()?;
        if data.len() >= WRITE_BUFFER {
            self.inner.write_all(data)
        } else {
            self.buf.extend_from_slice(data);
            Ok(())
        }
    }
}

impl<W: Write> Write for Chunked<'_, W> {
    fn write(&mut self, data: &[u8]) -> io::Result<usize> {
        self.write_all(data)?;
        Ok(data.len())
    }

    /// serde_json hands over every piece with `write_all`: some 80 per refused call, most
    /// of them one byte; short ones are pushed ([`crate::sys::put_bytes`]).
    #[inline]
    fn write_all(&mut self, data: &[u8]) -> io::Result<()> {
        if self.buf.len() + data.len() > WRITE_BUFFER {
            return self.overflow(data);
        }
        crate::sys::put_bytes(self.buf, data);
        Ok(())
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mcp::model::{Answer, Notification, Response};
    use crate::mcp::session::Era;
    use serde_json::{json, Value};

    fn answer(id: Value, result: Value) -> Response {
        Response::new(id, Answer::Result(result), Era::Handshake)
    }

    #[test]
    fn each_message_is_one_line_even_with_newlines_in_strings() {
        let mut w = ProtocolWriter::new(Vec::new());
        w.send(&answer(json!(1), json!({"text": "a\nb\r\n\u{0}"}))).unwrap();
        w.send(&Notification::tools_list_changed()).unwrap();
        let bytes = w.into_inner();
        let lines: Vec<&[u8]> = bytes.split_inclusive(|b| *b == b'\n').collect();
        assert_eq!(lines.len(), 2);
        for line in lines {
            assert_eq!(line.iter().filter(|b| **b == b'\n').count(), 1);
            let v: Value = serde_json::from_slice(line).unwrap();
            assert_eq!(v["jsonrpc"], "2.0");
        }
    }

    /// A stream that takes `budget` bytes, then fails once (`EPIPE`), then works again.
    struct FailsOnce {
        got: Vec<u8>,
        budget: usize,
        failed: bool,
    }

    impl Write for FailsOnce {
        fn write(&mut self, data: &[u8]) -> io::Result<usize> {
            if !self.failed && self.got.len() + data.len() > self.budget {
                self.failed = true;
                return Err(io::ErrorKind::BrokenPipe.into());
            }
            self.got.extend_from_slice(data);
            Ok(data.len())
        }
        fn flush(&mut self) -> io::Result<()> {
            Ok(())
        }
    }

    #[test]
    fn the_kept_buffer_writes_every_size_byte_for_byte() {
        // Sizes around the buffer: pieces below, at and above it, and messages that end
        // exactly on a buffer boundary.
        let mut w = ProtocolWriter::new(Vec::new());
        let mut expected = Vec::new();
        for n in [0, 1, WRITE_BUFFER - 40, WRITE_BUFFER - 20, WRITE_BUFFER, WRITE_BUFFER + 1, 3 * WRITE_BUFFER + 7] {
            for body in ["x".repeat(n), "\"".repeat(n / 2)] {
                let m = answer(json!(n), json!({"body": body, "after": [1, 2]}));
                w.send(&m).unwrap();
                expected.extend(serde_json::to_vec(&m).unwrap());
                expected.push(b'\n');
            }
        }
        assert_eq!(w.buf.capacity(), WRITE_BUFFER, "the buffer never grows");
        assert!(w.into_inner() == expected);
    }

    #[test]
    fn pieces_of_every_short_length_land_in_order_across_buffer_ends() {
        // The byte-by-byte path (up to sys::SHORT_PIECE) and the copied one, interleaved,
        // written on past several buffer ends so that pieces end just before, at and
        // after each one.
        let (mut buf, mut inner, mut expected) = (Vec::with_capacity(WRITE_BUFFER), Vec::new(), Vec::new());
        let mut w = Chunked { buf: &mut buf, inner: &mut inner };
        let mut k = 0u8;
        while expected.len() < 3 * WRITE_BUFFER + 100 {
            for n in 0..=crate::sys::SHORT_PIECE + 3 {
                let piece: Vec<u8> = (0..n).map(|i| k.wrapping_add(i as u8)).collect();
                k = k.wrapping_add(7);
                w.write_all(&piece).unwrap();
                expected.extend_from_slice(&piece);
            }
        }
        w.drain().unwrap();
        assert_eq!(buf.capacity(), WRITE_BUFFER, "the buffer never grows");
        assert!(inner == expected);
    }

    #[test]
    fn a_message_cut_by_a_failing_stream_leaves_nothing_for_the_next() {
        for budget in [0, 10, WRITE_BUFFER - 1, WRITE_BUFFER + 5] {
            let mut w = ProtocolWriter::new(FailsOnce { got: Vec::new(), budget, failed: false });
            let big = answer(json!(1), json!({"body": "y".repeat(2 * WRITE_BUFFER)}));
            assert!(w.send(&big).is_err(), "budget {budget}");
            let cut = w.inner.got.len();
            let next = answer(json!(2), json!({}));
            w.send(&next).unwrap();
            assert_eq!(w.written(), 1);
            let after = &w.inner.got[cut..];
            assert_eq!(after, [serde_json::to_vec(&next).unwrap(), b"\n".to_vec()].concat(), "budget {budget}");
        }
    }
}
