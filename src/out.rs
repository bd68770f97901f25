//! The protocol stream: the only module that may touch the process's stdout.
//!
//! MISSION.md, "Stdout carries only protocol": every byte on stdout must be one complete
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
//! [`ProtocolWriter`] is generic over `Write` so tests drive it with a `Vec<u8>`; it can
//! only write serialized [`serde_json::Value`] messages, one per line, each flushed.

use std::fs::File;
use std::io::{self, Write};
use std::os::fd::{AsFd, OwnedFd};

use serde_json::Value;

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
        Err(_) => File::options()
            .write(true)
            .open("/dev/null")
            .and_then(|null| rustix::stdio::dup2_stdout(null).map_err(io::Error::from)),
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

/// The protocol stream as a writer that waits instead of failing (issue 8 point 8).
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
    written: u64,
}

impl<W: Write> ProtocolWriter<W> {
    pub fn new(inner: W) -> Self {
        ProtocolWriter { inner, written: 0 }
    }

    /// Sends one message. serde_json's compact form escapes every control character
    /// inside strings, so the only newline in the line is the terminator. The line is
    /// written whole or, if the client is gone, not at all from its point of view: a
    /// signal arriving meanwhile does not cut it (`write_all` and [`Patient`] retry `EINTR`;
    /// `sp mcp` acts on the signal between messages).
    pub fn send(&mut self, message: &Value) -> io::Result<()> {
        let mut line = serde_json::to_vec(message).map_err(io::Error::other)?;
        line.push(b'\n');
        self.inner.write_all(&line)?;
        self.inner.flush()?;
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

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn each_message_is_one_line_even_with_newlines_in_strings() {
        let mut w = ProtocolWriter::new(Vec::new());
        w.send(&json!({"jsonrpc": "2.0", "id": 1, "result": {"text": "a\nb\r\n\u{0}"}}))
            .unwrap();
        w.send(&json!({"jsonrpc": "2.0", "method": "x"})).unwrap();
        let bytes = w.into_inner();
        let lines: Vec<&[u8]> = bytes.split_inclusive(|b| *b == b'\n').collect();
        assert_eq!(lines.len(), 2);
        for line in lines {
            assert_eq!(line.iter().filter(|b| **b == b'\n').count(), 1);
            let v: Value = serde_json::from_slice(line).unwrap();
            assert_eq!(v["jsonrpc"], "2.0");
        }
    }
}
