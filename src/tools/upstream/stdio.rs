//! The stdio transport: the upstream is a child process `sp` starts (MCP "stdio"
//! transport: one JSON-RPC message per line on its stdin and stdout).
//!
//! - argv, no shell; the working directory `cwd` when given;
//! - a clean environment: only [`PASSED_ENV`] from `sp`'s own (when set), then the
//!   policy's `env` (literals, and secrets read through the `Vault`, so every later
//!   output is scrubbed of them); nothing else of `sp`'s environment;
//! - started through `sp`'s launcher (`sys/confine.rs`): a session and process group of
//!   its own, so what it starts is ended with it; killed by the kernel when `sp` dies
//!   (parent-death signal); confined as `upstreams.NAME.sandbox` says (rlimits,
//!   no_new_privs, Landlock; by default read-only system directories, the program and
//!   `cwd`, nothing writable but `/dev/null`) and run as `user` when given; where the
//!   kernel cannot confine as asked it does not start;
//! - stdin and stdout are socket pairs, every read and write `MSG_DONTWAIT` (issue 31:
//!   a pipe's O_NONBLOCK belongs to its open file description, which another process
//!   holding it could clear; a per-call flag belongs to nobody else): a write waits in
//!   `poll(2)` with the call's deadline and cancel (an upstream that stops reading
//!   cannot hang `sp`), and reads what the upstream writes meanwhile (an upstream
//!   blocked writing a notification is not a deadlock); a read keeps a partial line and
//!   waits in `poll(2)` the same way; every descriptor `sp` keeps is close-on-exec, so
//!   no other child (another upstream, the approver) inherits them;
//! - stderr is read by a thread into `sp`'s log, each line prefixed with the
//!   upstream's name, cut at [`MAX_STDERR_LINE`] bytes after it is scrubbed (the line is
//!   read whole up to a window that holds any secret's spelling crossing the cut:
//!   `gate::outside`, issue 31), at most
//!   [`STDERR_LINES_PER_S`] lines a second (the rest counted, the count logged); the
//!   logger scrubs every secret and escapes control characters (`logging.rs`);
//! - [`Transport::close`] (and drop): stdin closed, SIGTERM to the process group, up to
//!   [`GRACE`] for it to go, then SIGKILL to the group and the child reaped. A helper that
//!   leaves the group (`setsid`) is out of reach here; reaping such strays is the
//!   child-subreaper's work in `sys/child.rs`.

use std::io::BufReader;
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::net::UnixStream;
use std::process::Stdio as Pipe;
use std::time::{Duration, Instant};

use serde_json::Value;

use super::transport::{Recv, StartError, Transport, TransportError};
use crate::gate::exec::Cancel;
use crate::mcp::frame::{FrameReader, Read};
use crate::sys;

/// What the child inherits of `sp`'s environment (when set): enough to find programs,
/// a home for caches, the locale and the time zone. Documented in `sp-policy(5)`.
pub(crate) const PASSED_ENV: &[&str] = &["PATH", "HOME", "LANG", "TZ"];
/// From SIGTERM to SIGKILL.
pub(crate) const GRACE: Duration = Duration::from_secs(2);
/// How long an ended upstream's stderr is waited for, to log its last lines.
const STDERR_DRAIN: Duration = Duration::from_millis(500);
pub(crate) const MAX_STDERR_LINE: usize = 1024;
pub(crate) const STDERR_LINES_PER_S: u64 = 50;
/// Bytes of messages read ahead while a write waits for the upstream to read.
const MAX_AHEAD_BYTES: usize = 16 * 1024 * 1024;
/// How often a wait looks at the cancel.
const SLICE: Duration = Duration::from_millis(20);

/// What to start: resolved from the policy, secrets already read.
pub(crate) struct Launch<'a> {
    pub name: &'a str,
    pub argv: &'a [String],
    /// Variables beyond [`PASSED_ENV`].
    pub env: Vec<(String, EnvText)>,
    pub cwd: Option<&'a std::path::Path>,
    pub max_line_bytes: usize,
    /// How the launcher confines it (`None`: `"sandbox": "none"`) and as whom it runs.
    pub confine: Option<sys::Confinement>,
    pub user: Option<&'a str>,
}

/// One end of a socket pair, read with `MSG_DONTWAIT` (never blocks, whatever the
/// descriptor's flags say).
struct DontWait(UnixStream);

impl std::io::Read for DontWait {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        Ok(rustix::net::recv(&self.0, buf, rustix::net::RecvFlags::DONTWAIT)?.0)
    }
}

/// A value of the child's environment.
pub(crate) enum EnvText {
    Literal(String),
    /// Read through the `Vault` (remembered for redaction).
    Secret(crate::gate::vault::Secret),
}

pub(crate) struct StdioTransport {
    name: String,
    child: Option<sys::Child>,
    stdin: Option<UnixStream>,
    reader: FrameReader<BufReader<DontWait>>,
    /// A duplicate (close-on-exec) of the stdout descriptor, to wait on in `poll(2)`.
    stdout_fd: OwnedFd,
    max_json: usize,
    group: i32,
    /// Messages read while a write waited (see `send`), handed out first by `recv`.
    ahead: std::collections::VecDeque<Result<Value, TransportError>>,
    /// Wire bytes of what went into `ahead` since it was last empty.
    ahead_bytes: usize,
    /// The thread that logs its stderr: waited for briefly when it ends, so that its
    /// last words (a launcher's refusal, a crash's message) are logged before its end.
    stderr_reader: Option<std::thread::JoinHandle<()>>,
}

impl StdioTransport {
    pub(crate) fn spawn(launch: Launch<'_>) -> Result<StdioTransport, StartError> {
        let program = &launch.argv[0];
        let path = sys::env_var("PATH");
        let spawn_error = |why: String| StartError::Spawn { program: sys::short(program, 64, sys::Ellipsis::Marked), why };
        let user = launch.user.map(sys::lookup_user).transpose().map_err(spawn_error)?;
        // Its cwd is readable too (the launcher adds the program file itself).
        let confine = launch.confine.map(|mut c| {
            c.read.extend(launch.cwd.map(std::path::Path::to_path_buf));
            c
        });
        let plan = sys::Plan { session: true, confine, user };
        let mut cmd = sys::launcher_command(program, path.as_deref(), &plan).map_err(|e| spawn_error(e.to_string()))?;
        let pair = || -> std::io::Result<((UnixStream, UnixStream), (UnixStream, UnixStream))> { Ok((UnixStream::pair()?, UnixStream::pair()?)) };
        let ((stdin, their_stdin), (stdout, their_stdout)) = pair().map_err(|e| StartError::Pipes { why: Some(sys::io_reason(&e)) })?;
        cmd.args(&launch.argv[1..]).env_clear();
        cmd.stdin(Pipe::from(OwnedFd::from(their_stdin))).stdout(Pipe::from(OwnedFd::from(their_stdout))).stderr(Pipe::piped());
        for var in PASSED_ENV {
            if let Some(v) = sys::env_var(var) {
                cmd.env(var, v);
            }
        }
        for (k, v) in &launch.env {
            match v {
                EnvText::Literal(s) => cmd.env(k, s),
                EnvText::Secret(s) => cmd.env(k, s.expose()),
            };
        }
        if let Some(dir) = launch.cwd {
            cmd.current_dir(dir);
        }
        let mut child = sys::Child::spawn_in_session(&mut cmd).map_err(|e| spawn_error(sys::io_reason(&e)))?;
        // The child's ends (held by `cmd`) close here: only the child has them now.
        drop(cmd);
        let group = i32::try_from(child.child.id()).unwrap_or(0);
        let Some(stderr) = child.child.stderr.take() else {
            child.kill();
            return Err(StartError::Pipes { why: None });
        };
        // `try_clone` duplicates with F_DUPFD_CLOEXEC (issue 31: a plain dup was
        // inherited by every later child, which read this upstream's raw answers).
        let stdout_fd = match stdout.try_clone() {
            Ok(fd) => OwnedFd::from(fd),
            Err(e) => {
                child.kill();
                return Err(StartError::Pipes { why: Some(sys::io_reason(&e)) });
            }
        };
        let stderr_reader = spawn_stderr_reader(launch.name.to_owned(), stderr);
        Ok(StdioTransport {
            name: launch.name.to_owned(),
            child: Some(child),
            stdin: Some(stdin),
            reader: FrameReader::new(BufReader::with_capacity(64 * 1024, DontWait(stdout)), launch.max_line_bytes),
            stdout_fd,
            max_json: launch.max_line_bytes.saturating_mul(2),
            group,
            ahead: std::collections::VecDeque::new(),
            ahead_bytes: 0,
            stderr_reader,
        })
    }

    /// One message if a whole line is there, without waiting; with its length.
    fn read_one(&mut self) -> Option<Result<Value, TransportError>> {
        match self.reader.read() {
            Read::Frame(Ok(frame)) => {
                self.ahead_bytes = self.ahead_bytes.saturating_add(frame.raw_len);
                Some(crate::json::parse_limited(&frame.text, self.max_json).map_err(TransportError::Json))
            }
            Read::Frame(Err(e)) => Some(Err(TransportError::Frame(e))),
            Read::Eof => {
                let status = self.exit_status();
                Some(Err(TransportError::Closed { status }))
            }
            Read::Parked => None,
        }
    }

    /// Reads what is there into [`StdioTransport::ahead`], up to [`MAX_AHEAD_BYTES`]
    /// (past that the upstream waits, as it would for any slow reader, and the write
    /// fails at its deadline); an error ends it.
    fn read_ahead(&mut self) {
        if self.ahead.is_empty() {
            self.ahead_bytes = 0;
        }
        while self.ahead_bytes < MAX_AHEAD_BYTES && !self.ahead.back().is_some_and(Result::is_err) {
            match self.read_one() {
                Some(m) => self.ahead.push_back(m),
                None => return,
            }
        }
    }

    fn exit_status(&mut self) -> Option<String> {
        let child = self.child.as_mut()?;
        // The output closed; the exit follows at once in practice.
        let deadline = Instant::now() + Duration::from_millis(200);
        match child.wait_until(deadline, || false) {
            sys::Waited::Exited(s) => Some(s.to_string()),
            _ => None,
        }
    }
}

/// Waits until `fd` is ready for `flags`, `deadline` passes or `cancel` fires, at most
/// [`SLICE`] at a time.
fn wait_fd(fd: impl AsFd, flags: rustix::event::PollFlags, deadline: Instant) {
    use rustix::event::{poll, PollFd, Timespec};
    let left = deadline.saturating_duration_since(Instant::now()).min(SLICE);
    let ts = Timespec { tv_sec: 0, tv_nsec: i64::from(left.subsec_nanos()) };
    let mut fds = [PollFd::new(&fd, flags)];
    let _ = poll(&mut fds, Some(&ts));
}

/// Waits until `stdin` takes bytes or `stdout` has some, at most [`SLICE`].
fn wait_fds(stdin: impl AsFd, stdout: impl AsFd, deadline: Instant) {
    use rustix::event::{poll, PollFd, PollFlags, Timespec};
    let left = deadline.saturating_duration_since(Instant::now()).min(SLICE);
    let ts = Timespec { tv_sec: 0, tv_nsec: i64::from(left.subsec_nanos()) };
    let mut fds = [PollFd::new(&stdin, PollFlags::OUT), PollFd::new(&stdout, PollFlags::IN)];
    let _ = poll(&mut fds, Some(&ts));
}

impl Transport for StdioTransport {
    fn send(&mut self, message: &Value, deadline: Instant, cancel: &Cancel) -> Result<(), TransportError> {
        let mut line = serde_json::to_vec(message).map_err(|e| TransportError::Io(e.to_string()))?;
        line.push(b'\n');
        let mut sent = 0;
        while sent < line.len() {
            let Some(stdin) = self.stdin.as_ref() else { return Err(TransportError::Closed { status: None }) };
            let flags = rustix::net::SendFlags::DONTWAIT | rustix::net::SendFlags::NOSIGNAL;
            match rustix::net::send(stdin, &line[sent..], flags).map_err(std::io::Error::from) {
                Ok(0) => return Err(TransportError::Closed { status: None }),
                Ok(n) => sent += n,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                    if cancel.is_cancelled() || Instant::now() >= deadline {
                        return Err(TransportError::Stalled);
                    }
                    // The upstream may be blocked writing to us (a notification while it
                    // has not read our request yet): read what it wrote meanwhile, so
                    // neither side waits for the other.
                    wait_fds(stdin, &self.stdout_fd, deadline);
                    self.read_ahead();
                }
                Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => {
                    let status = self.exit_status();
                    return Err(TransportError::Closed { status });
                }
                Err(e) => return Err(TransportError::Io(sys::io_reason(&e))),
            }
        }
        Ok(())
    }

    fn recv(&mut self, deadline: Instant, cancel: &Cancel) -> Result<Recv, TransportError> {
        loop {
            if let Some(m) = self.ahead.pop_front() {
                return m.map(Recv::Message);
            }
            if let Some(m) = self.read_one() {
                return m.map(Recv::Message);
            }
            if cancel.is_cancelled() {
                return Ok(Recv::Cancelled);
            }
            if Instant::now() >= deadline {
                return Ok(Recv::TimedOut);
            }
            wait_fd(&self.stdout_fd, rustix::event::PollFlags::IN, deadline);
        }
    }

    fn process_group(&self) -> Option<i32> {
        Some(self.group)
    }

    fn close(&mut self) {
        self.stdin = None;
        let Some(mut child) = self.child.take() else { return };
        let group = rustix::process::Pid::from_raw(self.group);
        if let Some(group) = group {
            let _ = rustix::process::kill_process_group(group, rustix::process::Signal::TERM);
        }
        let deadline = Instant::now() + GRACE;
        // The leader first, then whatever else is still in its group, within the grace.
        let _ = child.wait_until(deadline, || false);
        while let Some(g) = group {
            if rustix::process::test_kill_process_group(g).is_err() || Instant::now() >= deadline {
                break;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        child.kill();
        // Its stderr closes with its group: its last lines are logged first (at most
        // STDERR_DRAIN; something that left the group may hold it open).
        if let Some(reader) = self.stderr_reader.take() {
            let deadline = Instant::now() + STDERR_DRAIN;
            while !reader.is_finished() && Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(5));
            }
            if reader.is_finished() {
                let _ = reader.join();
            }
        }
        log::debug!("upstream {}: ended", self.name);
    }
}

impl Drop for StdioTransport {
    fn drop(&mut self) {
        Transport::close(self);
    }
}

/// Reads the child's stderr into the log until it closes (the thread ends with it).
fn spawn_stderr_reader(name: String, stderr: std::process::ChildStderr) -> Option<std::thread::JoinHandle<()>> {
    let spawned = std::thread::Builder::new().name(format!("upstream-{name}-stderr")).spawn(move || {
        let mut window = Instant::now();
        let (mut in_window, mut dropped) = (0u64, 0u64);
        stderr_lines(BufReader::new(stderr), |shown| {
            if window.elapsed() >= Duration::from_secs(1) {
                if dropped > 0 {
                    log::info!("upstream {name}: {dropped} stderr lines dropped (more than {STDERR_LINES_PER_S} a second)");
                }
                window = Instant::now();
                (in_window, dropped) = (0, 0);
            }
            in_window += 1;
            if in_window > STDERR_LINES_PER_S {
                dropped += 1;
                return;
            }
            log::info!("upstream {name}: {shown}");
        });
    });
    match spawned {
        Ok(handle) => Some(handle),
        Err(e) => {
            log::warn!("upstream stderr reader not started: {e}");
            None
        }
    }
}

/// Each line of an upstream's stderr as the log shows it: its first [`MAX_STDERR_LINE`]
/// bytes, scrubbed as if the line were whole before the cut (`gate::outside`: a window
/// long enough to hold any secret's spelling that begins before the cut is kept), a
/// final `\r` dropped, ` [cut]` when something was.
pub(super) fn stderr_lines(reader: impl std::io::Read, mut shown: impl FnMut(&str)) {
    crate::gate::outside::for_each_line(reader, MAX_STDERR_LINE, |line| {
        let (text, cut) = line.shown(MAX_STDERR_LINE);
        shown(&format!("{}{}", text.as_str().trim_end_matches('\r'), if cut { " [cut]" } else { "" }));
    });
}
