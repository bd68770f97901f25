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
//! Decisions (issue #4 leaves them open; `sp(1)` repeats them):
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
//!   arrived, runs [`KILL_COMMAND`] on a second channel of the same connection: it
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

use std::collections::HashMap;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use base64::Engine as _;
use ssh2::{Channel, ErrorCode, HashType, MethodType, Session};

use crate::gate::authorize::Authorized;
use crate::policy::SecretSource;
use crate::gate::vault::Vault;
use crate::tools::ssh::known_hosts::{self, KnownHosts, Recorded, Verdict};
use crate::policy::ssh::{HostKeyPolicy, SshAuth};
use crate::tools::ssh::authorize::SshAction;
use crate::tools::ssh::result::{SshError, SshOutcome, Stop};

const LIBSSH2_ERROR_EAGAIN: i32 = -37;
const LIBSSH2_ERROR_TIMEOUT: i32 = -9;
const LIBSSH2_ERROR_CHANNEL_REQUEST_DENIED: i32 = -22;

/// The terminal a command runs on (module docs): a type no program draws on.
pub(crate) const PTY_TERM: &str = "dumb";
/// Wide and tall, so that programs which fit their output to the terminal cut little
/// and pagers that quit on a short text (`less -F`) quit.
pub(crate) const PTY_COLUMNS: u32 = 1000;
pub(crate) const PTY_ROWS: u32 = 1000;
/// Linux keeps at most 4095 bytes of an unfinished line (the rest is dropped): a
/// longer line is flushed to the reader in parts (`^D` after a non-empty part).
const PTY_FLUSH_EVERY: usize = 4000;
const CTRL_D: u8 = 0x04;
const CTRL_V: u8 = 0x16;

/// Terminal modes for the pty: a line discipline that changes no byte. Canonical mode
/// stays on, since its `^D` is the only way to give a terminal reader end of input;
/// `^V` (literal next, needs `IEXTEN`) escapes `^D` and itself in the data. Every
/// other special character is disabled (255 = `_POSIX_VDISABLE` for sshd).
fn pty_modes() -> ssh2::PtyModes {
    use ssh2::PtyModeOpcode as O;
    let mut m = ssh2::PtyModes::new();
    for (op, on) in [
        (O::ICANON, true),
        (O::IEXTEN, true),
        (O::ECHO, false),
        (O::ECHOE, false),
        (O::ECHOK, false),
        (O::ECHONL, false),
        (O::ISIG, false),
        (O::IXON, false),
        (O::ICRNL, false),
        (O::INLCR, false),
        (O::IGNCR, false),
        (O::ISTRIP, false),
        (O::IMAXBEL, false),
        (O::OPOST, false),
        (O::ONLCR, false),
        (O::CS8, true),
    ] {
        m.set_boolean(op, on);
    }
    // IXOFF is opcode 40 in RFC 4254 (the crate's `IXOFF` constant says 49).
    m.set_boolean(40u8, false);
    for op in [
        O::VINTR,
        O::VQUIT,
        O::VERASE,
        O::VKILL,
        O::VEOL,
        O::VEOL2,
        O::VSTART,
        O::VSTOP,
        O::VSUSP,
        O::VREPRINT,
        O::VWERASE,
        O::VDISCARD,
    ] {
        m.set_character(op, None);
    }
    m.set_character(O::VEOF, Some(char::from(CTRL_D)));
    m.set_character(O::VLNEXT, Some(char::from(CTRL_V)));
    m
}

/// What to write to the pty so that the command reads exactly `stdin`, then end of
/// input (with [`pty_modes`]): `^D` and `^V` are escaped with `^V`; a line is flushed
/// with `^D` every [`PTY_FLUSH_EVERY`] bytes (never on an empty line, where `^D`
/// would mean end of input); at the end one `^D` on an empty line, two after a
/// partial one (the first hands it over, the second is the end).
pub(crate) fn pty_input(stdin: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(stdin.len() + stdin.len() / PTY_FLUSH_EVERY + 2);
    let mut pending = 0;
    for &b in stdin {
        if b == CTRL_D || b == CTRL_V {
            out.push(CTRL_V);
        }
        out.push(b);
        pending += 1;
        if b == b'\n' {
            pending = 0;
        } else if pending >= PTY_FLUSH_EVERY {
            out.push(CTRL_D);
            pending = 0;
        }
    }
    out.push(CTRL_D);
    if pending > 0 {
        out.push(CTRL_D);
    }
    out
}

/// One authenticated connection.
struct Conn {
    session: Session,
    /// A second descriptor for the same socket, to wait on with `poll`.
    socket: TcpStream,
    fingerprint: String,
}

impl Drop for Conn {
    fn drop(&mut self) {
        self.session.set_blocking(true);
        self.session.set_timeout(1000);
        let _ = self.session.disconnect(None, "sp: closing", None);
    }
}

/// Keeps one session per inventory host.
#[derive(Default)]
pub(crate) struct SshExecutor {
    sessions: HashMap<String, Conn>,
}

fn ms(d: Duration) -> u32 {
    d.as_millis().clamp(1, u128::from(u32::MAX)) as u32
}

fn is_code(e: &ssh2::Error, code: i32) -> bool {
    e.code() == ErrorCode::Session(code)
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
                let ch = open_channel(&conn, a)
                    .map_err(|why| SshError::Upstream(format!("ssh {}: no channel on a fresh connection: {why}", a.host)))?;
                self.sessions.insert(a.host.clone(), conn);
                ch
            }
        };
        let conn = &self.sessions[&a.host];
        let (result, keep) = execute(conn, channel, a, started, progress);
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

fn resolve_and_connect(a: &SshAction) -> Result<TcpStream, SshError> {
    let target = a.target(false);
    // `localhost` and `*.localhost` never reach the resolver (RFC 6761, dest.rs).
    let addrs = crate::net::dest::lookup_host(&crate::net::dest::SystemLookup, &a.address, a.port)
        .map_err(|_| SshError::Unavailable(format!("{target}: the address does not resolve")))?;
    let mut last = String::from("no address");
    for addr in &addrs {
        #[expect(clippy::disallowed_methods, reason = "the one socket sp opens itself (HTTP's are ureq's, behind dest.rs)")]
        let connected = TcpStream::connect_timeout(addr, a.connect_timeout);
        match connected {
            Ok(s) => return Ok(s),
            Err(e) => {
                let why = if e.kind() == std::io::ErrorKind::TimedOut {
                    format!("timed out after {}s", a.connect_timeout.as_secs())
                } else {
                    crate::policy::io_reason(&e)
                };
                // The address goes to the operator's log; the agent sees it only when
                // the host's address is not hidden.
                log::debug!("{target}: {addr}: {why}");
                last = if a.hide_address { why } else { format!("{addr}: {why}") };
            }
        }
    }
    Err(SshError::Unavailable(format!("{target}: cannot connect ({last})")))
}

fn connect(a: &SshAction, vault: &mut Vault, cancel: &crate::gate::exec::Cancel) -> Result<Conn, SshError> {
    let target = a.target(false);
    let known = KnownHosts::load(&a.known_hosts).map_err(|e| SshError::HostKey(format!("{target}: known_hosts {e}")))?;
    let stream = resolve_and_connect(a)?;
    // Without it a reused session costs ~40 ms per command (Nagle + delayed ACK).
    stream.set_nodelay(true).map_err(|e| SshError::Unavailable(format!("{target}: {e}")))?;
    let socket = stream.try_clone().map_err(|e| SshError::Unavailable(format!("{target}: {e}")))?;
    // Issue #10: a cancel during the handshake or login shuts the socket down, so
    // libssh2's blocking calls return at once. Only then: once connected, a cancel is
    // seen by `pump`, and the connection must stay up to carry the kill (`abort_remote`).
    let connecting = Arc::new(AtomicBool::new(true));
    if let Ok(s) = socket.try_clone() {
        let connecting = connecting.clone();
        cancel.on_cancel(move || {
            if connecting.load(Ordering::SeqCst) {
                let _ = s.shutdown(std::net::Shutdown::Both);
            }
        });
    }
    let conn = connect_on(a, vault, known, stream, socket)?;
    connecting.store(false, Ordering::SeqCst);
    Ok(conn)
}

/// [`connect`] on an open TCP stream (`socket`: a second descriptor for it).
fn connect_on(a: &SshAction, vault: &mut Vault, known: KnownHosts, stream: TcpStream, socket: TcpStream) -> Result<Conn, SshError> {
    let target = a.target(false);
    let mut session = Session::new().map_err(|e| SshError::Unavailable(format!("{target}: libssh2: {e}")))?;
    session.set_tcp_stream(stream);
    session.set_blocking(true);
    session.set_timeout(ms(a.connect_timeout));
    let supported = session.supported_algs(MethodType::HostKey).unwrap_or_default();
    let wanted = known_hosts::host_key_preference(&known.known_types(&a.address, a.port));
    let prefs: Vec<&str> = wanted.split(',').filter(|alg| supported.contains(alg)).collect();
    if !prefs.is_empty() {
        let _ = session.method_pref(MethodType::HostKey, &prefs.join(","));
    }
    session.handshake().map_err(|e| {
        if is_code(&e, LIBSSH2_ERROR_TIMEOUT) {
            SshError::Unavailable(format!("{target}: SSH handshake timed out"))
        } else {
            SshError::Unavailable(format!("{target}: SSH handshake failed: {}", e.message()))
        }
    })?;
    let (blob, fingerprint) = match (session.host_key(), session.host_key_hash(HashType::Sha256)) {
        (Some((blob, _)), Some(hash)) => {
            (blob.to_vec(), format!("SHA256:{}", base64::engine::general_purpose::STANDARD_NO_PAD.encode(hash)))
        }
        _ => return Err(SshError::Upstream(format!("{target}: the server sent no host key"))),
    };
    let key_type = known_hosts::blob_type(&blob).unwrap_or("?").to_owned();
    let file = a.known_hosts.display();
    let conn = Conn { session, socket, fingerprint: fingerprint.clone() };
    // The verdict comes before any authentication request: a refused server never
    // learns the user name (drop(conn) disconnects).
    let record = match known.check(&a.address, a.port, &blob) {
        Verdict::Known { .. } => false,
        Verdict::Unknown if a.host_key_policy == HostKeyPolicy::AcceptNew => true,
        Verdict::Unknown => {
            return Err(SshError::HostKey(format!(
                "{target}: host key {key_type} {fingerprint} is not in {file}; the strict host key policy refuses unknown keys \
                 (add it to known_hosts after checking the fingerprint out of band)"
            )))
        }
        Verdict::Changed { line } => {
            return Err(SshError::HostKey(format!(
                "{target}: HOST KEY CHANGED: the server presents {key_type} {fingerprint}, {file} line {line} holds another key \
                 of that type; refused (someone may be intercepting the connection, or the host was reinstalled)"
            )))
        }
        Verdict::OtherTypes { types } => {
            return Err(SshError::HostKey(format!(
                "{target}: the server presents a {key_type} key ({fingerprint}) but {file} only knows {} key(s) for it; refused",
                types.join(", ")
            )))
        }
        Verdict::Revoked { line } => {
            return Err(SshError::HostKey(format!(
                "{target}: host key {key_type} {fingerprint} is marked @revoked in {file} line {line}; refused"
            )))
        }
    };
    authenticate(&conn.session, a, vault)?;
    if record {
        match known_hosts::record(&a.known_hosts, &a.address, a.port, &blob) {
            Ok(Recorded::Added) => log::warn!("{target}: accept-new: recorded host key {key_type} {fingerprint} in {file}"),
            Ok(Recorded::AlreadyKnown) => {}
            Err(e) => return Err(SshError::HostKey(format!("{target}: accept-new could not record the host key: {e}"))),
        }
    }
    if !a.keepalive.is_zero() {
        conn.session.set_keepalive(false, a.keepalive.as_secs().min(u64::from(u32::MAX)) as u32);
    }
    log::info!("{target}: connected as {} ({key_type} {fingerprint})", a.user);
    Ok(conn)
}

fn authenticate(session: &Session, a: &SshAction, vault: &mut Vault) -> Result<(), SshError> {
    let target = a.target(true);
    let credential = format!("ssh:{}", a.host);
    let failed = |what: &str, e: ssh2::Error| {
        if is_code(&e, LIBSSH2_ERROR_TIMEOUT) {
            SshError::Unavailable(format!("{target}: {what} timed out"))
        } else {
            SshError::Auth(format!("{target}: {what} failed: {}", e.message()))
        }
    };
    match &a.auth {
        SshAuth::Key { key_file, passphrase_file } => {
            let key = vault.read_key_file(&credential, key_file).map_err(SshError::Secret)?;
            let passphrase = match passphrase_file {
                Some(p) => Some(vault.read(&credential, &SecretSource::File(p.clone())).map_err(SshError::Secret)?),
                None => None,
            };
            session.userauth_pubkey_memory(&a.user, None, key.expose(), passphrase.as_ref().map(|p| p.expose())).map_err(|e| {
                // LIBSSH2_ERROR_FILE: the key could not be decoded.
                if is_code(&e, -16) {
                    SshError::Auth(format!(
                        "{target}: the key file could not be decoded (wrong or missing passphrase_file, or an unsupported format)"
                    ))
                } else {
                    failed("public key authentication", e)
                }
            })?;
        }
        SshAuth::Password { password_file } => {
            let pw = vault.read(&credential, &SecretSource::File(password_file.clone())).map_err(SshError::Secret)?;
            session.userauth_password(&a.user, pw.expose()).map_err(|e| failed("password authentication", e))?;
        }
        SshAuth::Agent => {
            let mut agent = session.agent().map_err(|e| failed("agent authentication", e))?;
            agent
                .connect()
                .map_err(|_| SshError::Auth(format!("{target}: no SSH agent reachable (is SSH_AUTH_SOCK set for sp?)")))?;
            agent.list_identities().map_err(|e| failed("listing agent keys", e))?;
            let ids = agent.identities().map_err(|e| failed("listing agent keys", e))?;
            let ok = ids.iter().any(|id| agent.userauth(&a.user, id).is_ok());
            let _ = agent.disconnect();
            if !ok {
                return Err(SshError::Auth(format!("{target}: none of the agent's {} key(s) was accepted", ids.len())));
            }
        }
    }
    if !session.authenticated() {
        return Err(SshError::Auth(format!("{target}: the server did not accept the authentication")));
    }
    Ok(())
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
}

/// Where stdout stands with the [`Marker`].
enum Gate {
    /// Not seen yet: stdout is held back (up to [`MARKER_WINDOW`]).
    Awaiting { marker: Vec<u8>, held: Vec<u8> },
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
        let (buf, total) = if stderr {
            (&mut self.out.stderr, &mut self.out.stderr_bytes)
        } else {
            (&mut self.out.stdout, &mut self.out.stdout_bytes)
        };
        buf.extend_from_slice(&data[..take]);
        *total += data.len() as u64;
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
    // Wake at least every 50 ms: keepalives, the deadline and a cancel (issue #10) are
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
    started: Instant,
    progress: &mut crate::gate::exec::Progress<'_>,
) -> (Result<SshOutcome, SshError>, bool) {
    let target = a.target(false);
    let s = &conn.session;
    let exec_timeout = a.timeout.min(a.connect_timeout.max(Duration::from_secs(1)));
    s.set_timeout(ms(exec_timeout));
    if a.pty
        && let Err(e) = channel.request_pty(PTY_TERM, Some(pty_modes()), Some((PTY_COLUMNS, PTY_ROWS, 0, 0))) {
            // Nothing started either way.
            let keep = is_code(&e, LIBSSH2_ERROR_CHANNEL_REQUEST_DENIED);
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
    if let Err(e) = channel.exec(&marker.wrap(&a.command)) {
        // A denied request started nothing; anything else may have reached the server.
        let keep = is_code(&e, LIBSSH2_ERROR_CHANNEL_REQUEST_DENIED);
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
    };
    let raw_stdin = a.stdin.as_deref().map(str::as_bytes).unwrap_or_default();
    let input = if a.pty { pty_input(raw_stdin) } else { raw_stdin.to_vec() };
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
            (
                Err(SshError::Upstream(format!("{target}: the connection failed while the command ran ({why}); it is not retried"))),
                false,
            )
        }
    }
}

/// Ends the remote command of `channel` early (timeout or cancel; module docs): kills
/// its processes through a second channel when its marker showed that the command runs
/// under a shell that sp's prefix reached ([`KILL_COMMAND`]), then closes the channel
/// (with a pty, sshd then closes the terminal and the kernel hangs up the command's
/// session). The caller drops the connection (`keep` false), which does the same if the
/// close did not get through. Says what was done, for the result and the journal.
fn abort_remote(session: &Session, channel: &mut Channel, a: &SshAction, marker_seen: bool) -> Stop {
    session.set_blocking(true);
    session.set_timeout(ms(KILL_STEP));
    let stop = if marker_seen {
        match kill_remote(session) {
            Ok(processes) => Stop::Killed { processes },
            Err(why) => Stop::HungUp { pty: a.pty, why },
        }
    } else {
        Stop::HungUp { pty: a.pty, why: "the command's start marker had not arrived, so nothing was killed".into() }
    };
    if let Err(e) = channel.close() {
        log::debug!("closing the channel of a command ended early: {}", e.message());
    }
    stop
}

/// What `sp` prints before the agent's command (module docs): `\x1esp:` + 16 random hex
/// digits + `\x1e`, stripped from the output. Its arrival proves that the exec string
/// reached a shell that ran sp's prefix, so the command's processes are the session of
/// a child of the server's connection process ([`KILL_COMMAND`]); a forced command
/// (`authorized_keys` `command=`, `ForceCommand`) that ignores the string never prints
/// it, and is never sent a second one. Random, so no output can forge it.
struct Marker(String);

impl Marker {
    fn new() -> Marker {
        let mut bytes = [0u8; 8];
        // Without the kernel's generator (before 3.17) the clock and the pid: the marker
        // needs to be unforeseeable to the remote output, not secret.
        if !matches!(rustix::rand::getrandom(&mut bytes, rustix::rand::GetRandomFlags::NONBLOCK), Ok(8)) {
            let t = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default();
            bytes = (t.as_nanos() as u64 ^ (u64::from(std::process::id()) << 32)).to_le_bytes();
        }
        Marker(bytes.iter().map(|b| format!("{b:02x}")).collect())
    }

    /// The exec string: the marker (`printf`, whose `\036` is RS in every shell's and
    /// coreutils' printf), then the agent's command unchanged after `;`, on the same
    /// line (so `$LINENO` and a syntax error's line number stay as they were).
    fn wrap(&self, command: &str) -> String {
        format!("printf '\\036sp:{}\\036'; {command}", self.0)
    }

    fn bytes(&self) -> Vec<u8> {
        format!("\x1esp:{}\x1e", self.0).into_bytes()
    }
}

/// Output before the marker that `sp` holds back while waiting for it (a login shell's
/// rc files may print first); past this the marker is given up and nothing is killed.
const MARKER_WINDOW: usize = 16 * 1024;

/// Each blocking step of the kill (channel, exec, each read) and the whole of it.
const KILL_STEP: Duration = Duration::from_secs(2);
const KILL_TOTAL: Duration = Duration::from_secs(6);

/// The kill, run on a second channel of the same connection through the user's login
/// shell (`exec /bin/sh -c '...'`: one line, no `'` or `!`, so sh, bash, dash, ksh, zsh,
/// csh and fish all pass it on). In order:
/// 1. its parent must be the server's connection process (`sshd`, `sshd-session`,
///    `dropbear`), whose other children are the sessions of its channels: with one
///    command at a time per connection, the command's shell (sshd starts every session
///    with `setsid`, pty or not, so the shell's pid is its session id);
/// 2. every process of those sessions, and every descendant of one (found by parent,
///    in any session, so `setsid CMD` and `set -m` jobs are found too), and every
///    session such a descendant leads, is stopped (SIGSTOP, so none can fork meanwhile),
///    scanning `/proc` again until a pass finds nothing new;
/// 3. all of them get SIGKILL, and the script waits (up to 1 s) until none is left
///    (gone or a zombie) and prints `sp-stop: killed N left M`.
///
/// What it cannot find: a process whose parent had already exited and that left the
/// session before the scan (`setsid` after a double fork, `setsid -f`, a daemon).
/// Linux `/proc` only; elsewhere it prints why and `sp` says "hung up".
pub(crate) const KILL_COMMAND: &str = "exec /bin/sh -c '\
me=$$; p=$PPID; \
[ -r /proc/$me/stat ] || { echo sp-stop: no /proc; exit 3; }; \
c=; read -r c < /proc/$p/comm; \
case \"$c\" in sshd|sshd-session|dropbear) ;; *) echo \"sp-stop: the parent is $c, not sshd\"; exit 3;; esac; \
st() { l=; read -r l < /proc/$1/stat 2>/dev/null || return 1; set -- ${l##*) }; s=$1; pp=$2; sid=$4; }; \
sids=\" \"; all=\" \"; n=0; \
for d in /proc/[0-9]*; do q=${d#/proc/}; [ \"$q\" = \"$me\" ] && continue; st $q || continue; \
[ \"$pp\" = \"$p\" ] && [ \"$sid\" = \"$q\" ] && sids=\"$sids$q \"; done; \
while :; do new=0; \
for d in /proc/[0-9]*; do q=${d#/proc/}; \
case \"$all\" in *\" $q \"*) continue;; esac; [ \"$q\" = \"$me\" ] && continue; st $q || continue; \
case \"$sids\" in *\" $sid \"*) ;; *) case \"$all\" in *\" $pp \"*) ;; *) continue;; esac;; esac; \
kill -STOP $q 2>/dev/null; all=\"$all$q \"; new=1; [ \"$s\" = Z ] || n=$((n+1)); \
[ \"$sid\" = \"$q\" ] && sids=\"$sids$q \"; done; \
[ $new = 0 ] && break; done; \
for q in $all; do kill -KILL $q 2>/dev/null; done; \
i=0; while :; do left=0; for q in $all; do st $q || continue; case $s in Z) ;; *) left=$((left+1));; esac; done; \
[ $left = 0 ] && break; i=$((i+1)); [ $i -ge 50 ] && break; sleep 0.02 2>/dev/null || sleep 1; done; \
echo \"sp-stop: killed $n left $left\"'";

/// Runs [`KILL_COMMAND`] on a new channel; `Ok(n)`: `n` processes killed, none left.
fn kill_remote(session: &Session) -> Result<u32, String> {
    let started = Instant::now();
    let mut ch = session.channel_session().map_err(|e| format!("no channel for the kill: {}", e.message()))?;
    ch.exec(KILL_COMMAND).map_err(|e| format!("the kill did not start: {}", e.message()))?;
    let mut out = Vec::new();
    let mut buf = [0u8; 1024];
    loop {
        match ch.read(&mut buf) {
            Ok(0) => break,
            Ok(n) if out.len() < 4096 => out.extend_from_slice(&buf[..n]),
            Ok(_) => {}
            Err(e) => return Err(format!("the kill did not answer: {e}")),
        }
        if started.elapsed() > KILL_TOTAL {
            return Err("the kill did not answer in time".into());
        }
    }
    let _ = ch.close();
    let text = String::from_utf8_lossy(&out);
    let last = text.lines().rev().find(|l| l.starts_with("sp-stop: ")).unwrap_or("");
    log::debug!("kill on the server: {last:?}");
    parse_kill_report(last)
}

/// `sp-stop: killed N left 0` -> `Ok(N)`; anything else is why nothing is known killed.
fn parse_kill_report(line: &str) -> Result<u32, String> {
    let words: Vec<&str> = line.split(' ').collect();
    match words.as_slice() {
        ["sp-stop:", "killed", n, "left", "0"] => n.parse().map_err(|_| "the kill's report was garbled".into()),
        ["sp-stop:", "killed", _, "left", m] => Err(format!("{m} process(es) were still there after SIGKILL")),
        // The remote's words (a process name): printable ASCII only, short.
        ["sp-stop:", ..] => {
            let said: String = line["sp-stop: ".len()..].chars().filter(|c| c.is_ascii_graphic() || *c == ' ').take(80).collect();
            Err(format!("the kill did not run ({said})"))
        }
        _ => Err("the kill did not report (is the remote system Linux with /proc?)".into()),
    }
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
                Err(e) if is_code(&e, LIBSSH2_ERROR_EAGAIN) => {}
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
            Err(e) if is_code(&e, LIBSSH2_ERROR_EAGAIN) => {}
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
mod tests {
    use super::*;

    #[test]
    fn one_budget_for_both_streams() {
        let mut c = Collector { budget: 10, out: SshOutcome::default(), gate: Gate::Missing };
        c.push(false, b"123456");
        c.push(true, b"abcdef");
        c.push(false, b"zz");
        assert_eq!((c.out.stdout.as_slice(), c.out.stderr.as_slice()), (&b"123456"[..], &b"abcd"[..]));
        assert_eq!((c.out.stdout_bytes, c.out.stderr_bytes, c.out.truncated), (8, 6, true));
    }

    #[test]
    fn the_marker_is_stripped_wherever_the_reads_split_it() {
        let m = Marker("0123456789abcdef".into());
        assert_eq!(m.wrap("uptime; w"), "printf '\\036sp:0123456789abcdef\\036'; uptime; w");
        let marker = m.bytes();
        let stream = [b"rc says hi\n".as_slice(), &marker, b"out\n"].concat();
        for split in 0..=stream.len() {
            let mut c = Collector { budget: 100, out: SshOutcome::default(), gate: Gate::Awaiting { marker: marker.clone(), held: Vec::new() } };
            c.push(false, &stream[..split]);
            c.push(true, b"e");
            c.push(false, &stream[split..]);
            c.release();
            assert_eq!((c.out.stdout.as_slice(), c.out.stdout_bytes, c.out.stderr.as_slice()), (&b"rc says hi\nout\n"[..], 15, &b"e"[..]), "{split}");
            assert!(c.marker_seen(), "{split}");
        }
        // Never seen: everything is output, once, and nothing is killed.
        let mut c = Collector { budget: 100, out: SshOutcome::default(), gate: Gate::Awaiting { marker: marker.clone(), held: Vec::new() } };
        c.push(false, b"forced\n");
        c.release();
        c.push(false, &marker);
        assert_eq!((c.out.stdout_bytes, c.marker_seen()), (7 + marker.len() as u64, false));
        // A window's worth of output without it: given up, the output passes.
        let mut c = Collector { budget: 100, out: SshOutcome::default(), gate: Gate::Awaiting { marker, held: Vec::new() } };
        c.push(false, &vec![b'x'; MARKER_WINDOW + 1]);
        assert_eq!((c.out.stdout_bytes, c.out.truncated, c.marker_seen()), (MARKER_WINDOW as u64 + 1, true, false));
    }

    #[test]
    fn the_kill_passes_through_any_login_shell_and_reports_exactly() {
        // One line, one single-quoted argument, no history character (csh).
        let inner = KILL_COMMAND.strip_prefix("exec /bin/sh -c '").and_then(|s| s.strip_suffix('\'')).unwrap();
        assert!(!inner.contains(['\'', '\n', '!']), "{inner}");
        let cases = [
            ("sp-stop: killed 12 left 0", Ok(12)),
            ("sp-stop: killed 3 left 1", Err("1 process(es) were still there after SIGKILL".to_owned())),
            ("sp-stop: no /proc", Err("the kill did not run (no /proc)".to_owned())),
            ("sp-stop: the parent is \u{1b}[2Jbash, not sshd", Err("the kill did not run (the parent is [2Jbash, not sshd)".to_owned())),
            ("sp-stop: killed x left 0", Err("the kill's report was garbled".to_owned())),
            ("", Err("the kill did not report (is the remote system Linux with /proc?)".to_owned())),
        ];
        for (line, want) in cases {
            assert_eq!(parse_kill_report(line), want, "{line:?}");
        }
    }

    #[test]
    fn pty_input_escapes_controls_flushes_long_lines_and_ends_with_ctrl_d() {
        assert_eq!(pty_input(b""), b"\x04");
        assert_eq!(pty_input(b"a\n"), b"a\n\x04");
        // a partial last line: one ^D hands it over, the second is the end
        assert_eq!(pty_input(b"a"), b"a\x04\x04");
        assert_eq!(pty_input(b"\x04\x16\x03"), b"\x16\x04\x16\x16\x03\x04\x04");
        // a long line is flushed every PTY_FLUSH_EVERY bytes, never on an empty line
        let long = vec![b'x'; 2 * PTY_FLUSH_EVERY];
        let mut want = vec![b'x'; PTY_FLUSH_EVERY];
        want.push(CTRL_D);
        want.extend(vec![b'x'; PTY_FLUSH_EVERY]);
        want.extend([CTRL_D, CTRL_D]);
        assert_eq!(pty_input(&long), want);
        let mut line = vec![b'y'; PTY_FLUSH_EVERY - 1];
        line.push(b'\n');
        assert_eq!(pty_input(&line), [line.as_slice(), b"\x04"].concat());
    }
}
