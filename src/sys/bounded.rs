//! A short-lived helper program run to its end (a credential `command`, `systemd-creds`):
//! its stdin fed from a buffer, its stdout read into one buffer of its final size (at
//! most `max + 1` bytes, so a caller sees that it printed too much), its stderr kept
//! up to a cap, all within one deadline. Each pipe has its own thread, so none can
//! block another; the deadline ends them all (the child's death closes the pipes).
//!
//! Its exit is waited for first, then its output: when it exits, whatever it started
//! is killed (its group, and what left the group and came to `sp` the subreaper:
//! [`Child::kill_group`]), so a daemon holding its stdout cannot hold the read.

use std::io::{Read, Write};
use std::process::{Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use zeroize::Zeroizing;

use super::{Child, Waited};

/// What a run gave.
pub(crate) struct Ran {
    pub status: ExitStatus,
    /// At most `max + 1` bytes.
    pub stdout: Zeroizing<Vec<u8>>,
    /// At most the cap asked for; empty when it was not asked for.
    pub stderr: Vec<u8>,
}

/// Why a run gave nothing.
#[derive(Debug)]
pub(crate) enum RunError {
    Spawn(std::io::Error),
    /// The pipes asked for were not there.
    Pipes,
    /// No exit within the deadline (the child was killed).
    TimedOut,
    /// Its stdout could not be read.
    Read(std::io::Error),
    /// It exited, but its stdout did not end within the deadline.
    OutputLate,
}

/// Runs `cmd` (stdin, stdout and stderr are set here): `input` on its stdin (none:
/// `/dev/null`), its stdout up to `max + 1` bytes, its stderr up to `stderr_max`
/// (0: `/dev/null`), within `timeout`.
pub(crate) fn run_bounded(cmd: &mut Command, input: Option<Zeroizing<Vec<u8>>>, max: u64, stderr_max: u64, timeout: Duration) -> Result<Ran, RunError> {
    cmd.stdin(if input.is_some() { Stdio::piped() } else { Stdio::null() });
    cmd.stdout(Stdio::piped());
    cmd.stderr(if stderr_max > 0 { Stdio::piped() } else { Stdio::null() });
    let mut child = Child::spawn(cmd).map_err(RunError::Spawn)?;
    let stdin = child.child.stdin.take();
    let stderr = child.child.stderr.take();
    let (Some(mut stdout), true, true) = (child.child.stdout.take(), stdin.is_some() == input.is_some(), stderr.is_some() == (stderr_max > 0)) else {
        child.kill();
        return Err(RunError::Pipes);
    };
    let writer = stdin.zip(input).map(|(mut stdin, feed)| {
        std::thread::spawn(move || {
            let _ = stdin.write_all(&feed);
        })
    });
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        // Its final size at once: a growing buffer would leave copies of what it printed
        // (a secret) in freed memory that nothing zeroes.
        let mut buf = Zeroizing::new(Vec::with_capacity(usize::try_from(max).unwrap_or(0).saturating_add(1)));
        let read = (&mut stdout).take(max.saturating_add(1)).read_to_end(&mut buf);
        let _ = tx.send(read.map(|_| buf));
    });
    let (etx, erx) = std::sync::mpsc::channel();
    if let Some(mut stderr) = stderr {
        std::thread::spawn(move || {
            let mut buf = Vec::new();
            let _ = (&mut stderr).take(stderr_max).read_to_end(&mut buf);
            let _ = etx.send(buf);
        });
    }
    let deadline = Instant::now() + timeout;
    let status = match child.wait_until(deadline, || false) {
        Waited::Exited(status) => status,
        _ => {
            child.kill();
            return Err(RunError::TimedOut);
        }
    };
    child.kill_group();
    if let Some(writer) = writer {
        let _ = writer.join();
    }
    let left = || deadline.saturating_duration_since(Instant::now()).max(Duration::from_millis(100));
    let stdout = match rx.recv_timeout(left()) {
        Ok(Ok(out)) => out,
        Ok(Err(e)) => return Err(RunError::Read(e)),
        Err(_) => return Err(RunError::OutputLate),
    };
    let stderr = if stderr_max > 0 { erx.recv_timeout(left()).unwrap_or_default() } else { Vec::new() };
    Ok(Ran { status, stdout, stderr })
}
