//! The SSH executor: libssh2 through the `ssh2` crate, blocking, one process, one thread.
//!
//! ```text
//!  run(Authorized<SshAction>)
//!   ├─ kept session for this inventory host? ── keepalive + open a channel ──ok──┐
//!   │        └─ failed (server restarted, connection dropped): drop it, go on ↓   │
//!   ├─ connect: resolve, try each address (connect_timeout_s, TCP_NODELAY)        │
//!   │  handshake (offering host key types already in known_hosts first)           │
//!   │  host key vs known_hosts ── revoked / changed / unknown under strict ─> SP_HOST_KEY
//!   │  authenticate (key file / password file / agent) ────── failure ──────> SP_AUTH
//!   │  accept-new and unknown: record the key now (locked append) ─ conflict ─> SP_HOST_KEY
//!   │  open a channel ────────────────────────────────────────────────────────────┤
//!   └─ pty (unless the host says "pty": false) ─> exec "printf MARKER; COMMAND"
//!        ─> feed stdin, EOF ─> drain stdout+stderr (one budget, MARKER stripped)
//!        ─> remote close ─> exit status
//!              └─ timeout_s reached or cancelled: abort_remote
//!                   ├─ MARKER seen: second channel runs KILL_COMMAND ─> Killed{n} | HungUp
//!                   └─ not seen: nothing sent ────────────────────────> HungUp
//!                 close the channel (with the pty the terminal hangs up) + the connection
//!                 ─> SP_TIMEOUT + output (or, cancelled, no answer; the journal says which)
//! ```
//!
//! Decisions (`sp(1)` repeats them):
//! - Host keys are checked before *any* authentication request, none-method included:
//!   a refused server never sees the user name. See `ssh/known_hosts.rs` for the rules.
//! - Sessions are kept per inventory host for the life of the `sp mcp` process. With a
//!   single thread, nothing runs between calls: keepalives (`ssh.keepalive_s`) go out
//!   while a command runs and before each call, not while `sp` waits for the client. A
//!   session the server or a middlebox dropped meanwhile is detected when the next call
//!   opens its channel; `sp` then reconnects once, transparently. Nothing is retried
//!   once the `exec` request has been sent: a command that may have started never runs
//!   twice (the call fails with `SP_UPSTREAM` instead).
//! - `timeout_s` counts from the `exec` request to the remote close; connecting
//!   (TCP, handshake, authentication, channel) is bounded by `ssh.connect_timeout_s` per
//!   step. Name resolution uses the system resolver and has only the resolver's own
//!   timeout (resolv.conf), not ours.
//! - On timeout (and on a cancel) the command is killed ([`abort_remote`]) and the whole
//!   connection is closed: nothing of the command stays attached to `sp`, and the server
//!   frees the session slot (OpenSSH counts a still-running command against
//!   `MaxSessions`). A hang-up alone is not enough (`trap "" HUP`, `nohup`, `set -m`
//!   jobs, `setsid` children survive it), and the RFC 4254 "signal" request is no way
//!   out: the `ssh2` crate does not bind `libssh2_channel_signal_ex`, its generic
//!   request call refuses a second request on a channel ("Channel can not be reused"),
//!   and OpenSSH's sshd (session.c `session_signal_req`) only `killpg`s the shell's
//!   process group, which misses jobs in other groups and sessions, and refuses forced
//!   commands. So `sp` sends `printf '\036sp:NONCE\036'; COMMAND` ([`Marker`]; the
//!   agent's text is authorized and journaled as it came) and, once the marker has
//!   arrived, runs [`KILL_COMMAND`](super::kill::KILL_COMMAND) on a second channel of the same connection: it
//!   finds the command's session as the sibling of its own shell under the server's
//!   connection process and kills (SIGSTOP, then SIGKILL) that session, every
//!   descendant, and every session a descendant leads. What it cannot see is a daemon
//!   that detached itself before (its parent gone, its session left), so the result says
//!   "sp killed its N process(es) ...; a process that detached itself from both ... may
//!   still run", and never "stopped" ([`Stop`]). Without the marker (a forced command
//!   would run again on a second channel) or when the kill fails, nothing more is sent:
//!   closing the channel hangs up the pty, and the result says "hung up ...; the remote
//!   side may still run" ("cut off" without a pty). When `sp` exits or is killed while a
//!   command runs, the TCP connection drops and sshd hangs up the session's pty: the
//!   command is only hung up.
//! - What the pty changes for the agent: stdout and stderr arrive merged, in `stdout`
//!   (`stderr` is empty, `stderr_bytes` 0); the command sees a terminal (`TERM=dumb`,
//!   [`PTY_COLUMNS`] x [`PTY_ROWS`]), so some programs format for it or start a pager
//!   (pass `--no-pager`, `PAGER=cat`). The terminal's modes are set so that nothing
//!   else changes: no echo, no CR added to output (`OPOST` off), no signal characters,
//!   no flow control, no CR/NL mapping. stdin passes through the line discipline
//!   byte for byte ([`pty_input`] escapes `^D` and `^V` and flushes long lines before
//!   the kernel's 4095-byte line limit), and its end is a `^D`: a command sees end of
//!   input once (a second reader would wait).
//! - A host with `"pty": false` runs commands without a terminal: separate stdout and
//!   stderr, plain pipes. sshd starts such a command in a session of its own too, so
//!   the kill works alike; when it cannot run, the command is only cut off: it loses its
//!   stdin (EOF), stdout and stderr and ends with SIGPIPE at its next write.
//!   The next call reconnects in both cases.
//! - Without `stdin` the command's standard input is empty (EOF at once), so `cat`
//!   and friends do not wait for input that never comes.
//! - stdout and stderr share one budget (`ssh.max_output_bytes`), filled in arrival
//!   order; past it `sp` keeps draining (so the command is not blocked on a full
//!   window), counts every byte (`stdout_bytes`, `stderr_bytes`) and sets `truncated`.
//!   Output is returned as text: invalid UTF-8 becomes U+FFFD (after the secrets were
//!   scrubbed from the raw bytes), and a cut inside a character is trimmed.
//! - `exit_status` is `null` when the command was killed by a signal; `exit_signal`
//!   ("TERM", "KILL", ...) is present only then.
//! - Key, passphrase and password files are read through the [`Vault`] at each
//!   connection (owner-only, bounded) and remembered for redaction. libssh2 copies the
//!   key into its own buffers for the duration of the authentication call; those copies
//!   are outside what `sp` can zero.
//! - Host key algorithms: the types recorded for the host first, then Ed25519, ECDSA,
//!   RSA-SHA2; SHA-1 `ssh-rsa` and DSA only for a host whose recorded key needs them.
//! - A `sudo` command (issue 34 §4, `authorize.rs` [`SUDO_PREFIX`](super::authorize::SUDO_PREFIX)):
//!   the credential's secret is read through the Vault before anything is sent (a
//!   secret that cannot be read fails the call before the connection) and written as
//!   the first line of the channel's stdin, before the agent's `stdin`; never on the
//!   command line, so no `ps` on the remote side shows it. Being read through the
//!   Vault, it is redacted from the output, the recording and the journal in every
//!   spelling the redactor knows.

use std::collections::HashMap;
use std::io::{Read, Write};
use std::time::{Duration, Instant};

use ssh2::{Channel, Session};

use crate::gate::authorize::Authorized;
use crate::gate::vault::Vault;
use crate::tools::ssh::authorize::SshAction;
use crate::tools::ssh::connect::{connect, Conn};
use crate::tools::ssh::libssh2::{is_code, ms, ERROR_CHANNEL_REQUEST_DENIED, ERROR_EAGAIN};
use crate::tools::ssh::kill::{kill_remote, KillFailed, Marker, KILL_STEP, MARKER_WINDOW};
use crate::tools::ssh::pty::{pty_input, pty_modes, PTY_COLUMNS, PTY_ROWS, PTY_TERM};
use crate::tools::ssh::result::{Chunk, SshError, SshOutcome, Stop};

/// Keeps one session per inventory host.
#[derive(Default)]
pub(crate) struct SshExecutor {
    /// Also `transfer/sftp.rs`'s: SFTP runs on the same kept session.
    pub(in crate::tools::ssh) sessions: HashMap<String, Conn>,
}

fn would_block(e: &std::io::Error) -> bool {
    e.kind() == std::io::ErrorKind::WouldBlock
}

impl SshExecutor {
    pub(crate) fn run(
        &mut self,
        authorized: &Authorized<SshAction>,
        vault: &mut Vault,
        progress: &mut crate::gate::exec::Progress<'_>,
    ) -> Result<SshOutcome, SshError> {
        let a = authorized.action();
        if progress.cancelled() {
            return Err(SshError::Cancelled(Stop::NotStarted));
        }
        // Read before anything is sent: a password that cannot be read stops the call here.
        let password = match &a.sudo {
            Some(s) => Some(vault.read(&s.credential, &s.source).map_err(SshError::Secret)?),
            None => None,
        };
        let started = Instant::now();
        let mut channel = None;
        if let Some(conn) = self.sessions.get(&a.host) {
            match open_channel(conn, a) {
                Ok(ch) => channel = Some(ch),
                Err(why) => {
                    log::info!("ssh {}: the kept session is gone ({why}); reconnecting once", a.host);
                    self.sessions.remove(&a.host);
                }
            }
        }
        let channel = match channel {
            Some(ch) => ch,
            None => {
                let cancel = progress.cancel();
                let conn = connect(a, vault, cancel).map_err(|e| if cancel.is_cancelled() { SshError::Cancelled(Stop::NotStarted) } else { e })?;
                let ch = open_channel(&conn, a).map_err(|why| SshError::Upstream(format!("ssh {}: no channel on a fresh connection: {why}", a.host)))?;
                self.sessions.insert(a.host.clone(), conn);
                ch
            }
        };
        let conn = &self.sessions[&a.host];
        let (result, keep) = execute(conn, channel, a, password.as_ref(), started, progress);
        // A cancel may surface as a failed read on the shut-down socket first: the kill
        // had no connection to go through.
        let (result, keep) = match result {
            Err(SshError::Cancelled(stop)) => (Err(SshError::Cancelled(stop)), false),
            Err(_) if progress.cancelled() => {
                let why = "the connection failed before the kill could be sent".to_owned();
                (Err(SshError::Cancelled(Stop::HungUp { pty: a.pty, why })), false)
            }
            r => (r, keep),
        };
        if !keep {
            log::info!("ssh {}: closing the connection", a.host);
            self.sessions.remove(&a.host);
        }
        result
    }
}

/// Liveness check and channel in one: both fail on a dead connection, and neither can
/// have started a command.
fn open_channel(conn: &Conn, a: &SshAction) -> Result<Channel, String> {
    let s = &conn.session;
    s.set_blocking(true);
    s.set_timeout(ms(a.connect_timeout));
    if !a.keepalive.is_zero() {
        s.keepalive_send().map_err(|e| e.message().to_owned())?;
    }
    s.channel_session().map_err(|e| e.message().to_owned())
}

/// Output of one command, under one budget.
struct Collector {
    budget: u64,
    out: SshOutcome,
    gate: Gate,
    /// When the command was sent: the origin of [`Chunk::at`].
    sent: Instant,
}

/// Where stdout stands with the [`Marker`].
enum Gate {
    /// Not seen yet: stdout is held back (up to [`MARKER_WINDOW`]).
    Awaiting {
        marker: Vec<u8>,
        held: Vec<u8>,
    },
    Seen,
    /// Not within the window, or the output ended first.
    Missing,
}

impl Collector {
    fn push(&mut self, stderr: bool, data: &[u8]) {
        if stderr {
            return self.take(true, data);
        }
        let Gate::Awaiting { marker, held } = &mut self.gate else { return self.take(false, data) };
        held.extend_from_slice(data);
        if let Some(at) = held.windows(marker.len()).position(|w| w == marker.as_slice()) {
            let held = std::mem::take(held);
            let after = at + marker.len();
            self.gate = Gate::Seen;
            self.take(false, &held[..at]);
            self.take(false, &held[after..]);
        } else if held.len() > MARKER_WINDOW {
            self.release();
        }
    }

    /// Gives up waiting for the marker: what was held back is output.
    fn release(&mut self) {
        if let Gate::Awaiting { held, .. } = &mut self.gate {
            let held = std::mem::take(held);
            self.gate = Gate::Missing;
            self.take(false, &held);
        }
    }

    fn marker_seen(&self) -> bool {
        matches!(self.gate, Gate::Seen)
    }

    fn take(&mut self, stderr: bool, data: &[u8]) {
        let used = (self.out.stdout.len() + self.out.stderr.len()) as u64;
        let room = self.budget.saturating_sub(used) as usize;
        let take = room.min(data.len());
        if take < data.len() {
            self.out.truncated = true;
        }
        let (buf, total) = if stderr { (&mut self.out.stderr, &mut self.out.stderr_bytes) } else { (&mut self.out.stdout, &mut self.out.stdout_bytes) };
        buf.extend_from_slice(&data[..take]);
        *total += data.len() as u64;
        if take > 0 {
            let end = buf.len();
            self.out.chunks.push(Chunk { at: self.sent.elapsed(), stderr, end });
        }
    }
}

/// Reads everything available now on both streams. `Ok(true)`: something arrived.
fn drain(channel: &mut Channel, collector: &mut Collector) -> Result<bool, String> {
    let mut buf = [0u8; 32 * 1024];
    let mut any = false;
    for stderr in [false, true] {
        let mut stream = channel.stream(i32::from(stderr));
        loop {
            match stream.read(&mut buf) {
                Ok(0) => break,
                Ok(n) => {
                    collector.push(stderr, &buf[..n]);
                    any = true;
                }
                Err(e) if would_block(&e) => break,
                Err(e) => return Err(e.to_string()),
            }
        }
    }
    Ok(any)
}

/// Waits until the socket is ready in the direction libssh2 is blocked on, or `until`.
fn wait(conn: &Conn, until: Instant) {
    use rustix::event::{poll, PollFd, PollFlags, Timespec};
    let mut flags = PollFlags::IN;
    if matches!(conn.session.block_directions(), ssh2::BlockDirections::Outbound | ssh2::BlockDirections::Both) {
        flags |= PollFlags::OUT;
    }
    // Wake at least every 50 ms: keepalives, the deadline and a cancel are
    // checked by the caller.
    let left = until.saturating_duration_since(Instant::now()).min(Duration::from_millis(50));
    let ts = Timespec { tv_sec: left.as_secs() as i64, tv_nsec: i64::from(left.subsec_nanos()) };
    let mut fds = [PollFd::new(&conn.socket, flags)];
    let _ = poll(&mut fds, Some(&ts));
}

enum Step {
    Done,
    TimedOut,
    Cancelled,
}

/// Runs the command on an open channel. Returns the result and whether the connection
/// can be kept.
fn execute(
    conn: &Conn,
    mut channel: Channel,
    a: &SshAction,
    sudo_password: Option<&crate::gate::vault::Secret>,
    started: Instant,
    progress: &mut crate::gate::exec::Progress<'_>,
) -> (Result<SshOutcome, SshError>, bool) {
    let target = a.target(false);
    let s = &conn.session;
    let exec_timeout = a.timeout.min(a.connect_timeout.max(Duration::from_secs(1)));
    s.set_timeout(ms(exec_timeout));
    if a.pty
        && let Err(e) = channel.request_pty(PTY_TERM, Some(pty_modes()), Some((PTY_COLUMNS, PTY_ROWS, 0, 0)))
    {
        // Nothing started either way.
        let keep = is_code(&e, ERROR_CHANNEL_REQUEST_DENIED);
        let msg = if keep {
            format!(
                "{target}: the server refused a terminal (pty) for the command, so it could not be stopped at its \
                     timeout; nothing ran (the operator can set \"pty\": false for this host)"
            )
        } else {
            format!("{target}: the connection failed while asking for a terminal ({}); nothing ran", e.message())
        };
        return (Err(SshError::Upstream(msg)), keep);
    }
    let marker = Marker::new();
    if let Err(e) = channel.exec(&marker.wrap(&a.remote_command())) {
        // A denied request started nothing; anything else may have reached the server.
        let keep = is_code(&e, ERROR_CHANNEL_REQUEST_DENIED);
        let msg = if keep {
            format!("{target}: the server refused to run the command")
        } else {
            format!("{target}: the connection failed while starting the command ({}); it is not retried, it may have started", e.message())
        };
        return (Err(SshError::Upstream(msg)), keep);
    }
    let deadline = Instant::now() + a.timeout;
    let mut collector = Collector {
        budget: a.max_output_bytes,
        out: SshOutcome { host: a.host.clone(), host_key_fingerprint: conn.fingerprint.clone(), ..SshOutcome::default() },
        gate: Gate::Awaiting { marker: marker.bytes(), held: Vec::new() },
        sent: Instant::now(),
    };
    let mut raw_stdin = zeroize::Zeroizing::new(Vec::new());
    if let Some(p) = sudo_password {
        raw_stdin.extend_from_slice(p.expose().as_bytes());
        raw_stdin.push(b'\n');
    }
    raw_stdin.extend_from_slice(a.stdin.as_deref().map(str::as_bytes).unwrap_or_default());
    let input = zeroize::Zeroizing::new(if a.pty { pty_input(&raw_stdin) } else { raw_stdin.to_vec() });
    s.set_blocking(false);
    let step = pump(conn, &mut channel, a, &input, deadline, &mut collector, progress);
    let finish = |mut c: Collector| {
        c.release();
        c.out.duration_ms = started.elapsed().as_millis() as u64;
        c.out
    };
    match step {
        Ok(Step::Done) => {
            let status = channel.exit_status().ok();
            let signal = channel.exit_signal().ok().and_then(|s| s.exit_signal).filter(|s| !s.is_empty());
            s.set_blocking(true);
            let _ = channel.close();
            let mut out = finish(collector);
            out.exit_signal = signal;
            out.exit_status = if out.exit_signal.is_some() { None } else { status };
            (Ok(out), true)
        }
        Ok(Step::TimedOut) => {
            let stop = abort_remote(s, &mut channel, a, collector.marker_seen());
            let message = format!("{target}: the command ran longer than {}s; {stop}", a.timeout.as_secs());
            log::warn!("{message}");
            (Err(SshError::Timeout { message, partial: Box::new(finish(collector)) }), false)
        }
        Ok(Step::Cancelled) => {
            let stop = abort_remote(s, &mut channel, a, collector.marker_seen());
            log::warn!("{target}: cancelled: {stop}");
            (Err(SshError::Cancelled(stop)), false)
        }
        Err(why) => {
            s.set_blocking(true);
            (Err(SshError::Upstream(format!("{target}: the connection failed while the command ran ({why}); it is not retried"))), false)
        }
    }
}

/// Ends the remote command of `channel` early (timeout or cancel; module docs): kills
/// its processes through a second channel when its marker showed that the command runs
/// under a shell that sp's prefix reached ([`KILL_COMMAND`](super::kill::KILL_COMMAND)), then closes the channel
/// (with a pty, sshd then closes the terminal and the kernel hangs up the command's
/// session). The caller drops the connection (`keep` false), which does the same if the
/// close did not get through. Says what was done, for the result and the journal.
fn abort_remote(session: &Session, channel: &mut Channel, a: &SshAction, marker_seen: bool) -> Stop {
    session.set_blocking(true);
    session.set_timeout(ms(KILL_STEP));
    let stop = if marker_seen {
        match kill_remote(session) {
            Ok(processes) => Stop::Killed { processes },
            Err(KillFailed(why)) => Stop::HungUp { pty: a.pty, why },
        }
    } else {
        Stop::HungUp { pty: a.pty, why: "the command's start marker had not arrived, so nothing was killed".into() }
    };
    if let Err(e) = channel.close() {
        log::debug!("closing the channel of a command ended early: {}", e.message());
    }
    stop
}

/// Feeds `input` (stdin, as encoded for the pty), drains output, waits for the remote
/// end to close.
fn pump(
    conn: &Conn,
    channel: &mut Channel,
    a: &SshAction,
    input: &[u8],
    deadline: Instant,
    c: &mut Collector,
    report: &mut crate::gate::exec::Progress<'_>,
) -> Result<Step, String> {
    let s = &conn.session;
    let mut stdin: &[u8] = input;
    let mut eof_sent = false;
    loop {
        let mut progress = false;
        while !stdin.is_empty() {
            match channel.write(stdin) {
                Ok(0) => break,
                Ok(n) => {
                    stdin = &stdin[n..];
                    progress = true;
                }
                Err(e) if would_block(&e) => break,
                // The command closed its stdin: the rest is not wanted.
                Err(_) => stdin = &[],
            }
        }
        if stdin.is_empty() && !eof_sent {
            match channel.send_eof() {
                Err(e) if is_code(&e, ERROR_EAGAIN) => {}
                _ => eof_sent = true,
            }
        }
        progress |= drain(channel, c)?;
        if channel.eof() {
            break;
        }
        // `wait` wakes at least once a second, so this ticks at least that often.
        report.tick(c.out.stdout_bytes + c.out.stderr_bytes);
        if !a.keepalive.is_zero() {
            let _ = s.keepalive_send();
        }
        if report.cancelled() {
            return Ok(Step::Cancelled);
        }
        if Instant::now() >= deadline {
            return Ok(Step::TimedOut);
        }
        if !progress {
            wait(conn, deadline);
        }
    }
    // Output is complete; the exit status arrives with (or before) the remote close.
    loop {
        match channel.wait_close() {
            Ok(()) => return Ok(Step::Done),
            Err(e) if is_code(&e, ERROR_EAGAIN) => {}
            Err(e) => return Err(e.message().to_owned()),
        }
        drain(channel, c)?;
        if report.cancelled() {
            return Ok(Step::Cancelled);
        }
        if Instant::now() >= deadline {
            return Ok(Step::TimedOut);
        }
        wait(conn, deadline);
    }
}

#[cfg(test)]
mod tests;
