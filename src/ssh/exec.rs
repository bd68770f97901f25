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
//!   └─ pty (unless the host says "pty": false) ─> exec ─> feed stdin, EOF
//!        ─> drain stdout+stderr (one budget) ─> remote close ─> exit status
//!                         └─ timeout_s reached: abort_remote (close the channel; with the
//!                            pty the command's session is hung up) + close the connection
//!                            ─> SP_TIMEOUT + output
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
//! - On timeout the command is stopped ([`abort_remote`]) and the whole connection is
//!   closed: nothing of the command stays attached to `sp`, and the server frees the
//!   session slot (OpenSSH counts a still-running command against `MaxSessions`).
//!   Stopping needs a terminal. The RFC 4254 "signal" request would do without one, but
//!   it needs `libssh2_channel_signal_ex`, which the `ssh2` crate does not bind (and its
//!   generic request call refuses a second request on a channel). So by default every
//!   command runs on a pty: when its channel or the connection closes, sshd closes the
//!   pty's master side and the kernel hangs up the terminal: the command's shell (the
//!   session leader) gets SIGHUP, and when it ends, so does the foreground process
//!   group, where the command's children are. `sleep 25; touch F` does not touch `F`.
//!   A process that ignores SIGHUP or moved to its own session (`nohup`, `setsid`)
//!   survives, as it would a closed `ssh -t` session. The same happens when `sp`
//!   exits or is killed while a command runs: the TCP connection drops, sshd cleans up
//!   the session's pty.
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
//!   stderr, plain pipes, but a timed-out command is only cut off, not stopped: it
//!   loses its stdin (EOF), stdout and stderr and ends with SIGPIPE at its next write;
//!   one that neither reads nor writes runs on the server to its own end.
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
use std::time::{Duration, Instant};

use base64::Engine as _;
use ssh2::{Channel, ErrorCode, HashType, MethodType, Session};

use crate::authorize::Authorized;
use crate::policy::SecretSource;
use crate::secret::Vault;
use crate::ssh::known_hosts::{self, KnownHosts, Recorded, Verdict};
use crate::policy::ssh::{HostKeyPolicy, SshAuth};
use crate::ssh::authorize::SshAction;
use crate::ssh::result::{SshError, SshOutcome};

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
        progress: &mut crate::exec::Progress<'_>,
    ) -> Result<SshOutcome, SshError> {
        let a = authorized.action();
        if progress.cancelled() {
            return Err(SshError::Cancelled);
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
                let conn = connect(a, vault, cancel).map_err(|e| if cancel.is_cancelled() { SshError::Cancelled } else { e })?;
                let ch = open_channel(&conn, a)
                    .map_err(|why| SshError::Upstream(format!("ssh {}: no channel on a fresh connection: {why}", a.host)))?;
                self.sessions.insert(a.host.clone(), conn);
                ch
            }
        };
        let conn = &self.sessions[&a.host];
        let (result, keep) = execute(conn, channel, a, started, progress);
        // A cancel may surface as a failed read on the shut-down socket first.
        let (result, keep) = match result {
            Err(_) if progress.cancelled() => (Err(SshError::Cancelled), false),
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
    let addrs = crate::http::dest::lookup_host(&crate::http::dest::SystemLookup, &a.address, a.port)
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

fn connect(a: &SshAction, vault: &mut Vault, cancel: &crate::exec::Cancel) -> Result<Conn, SshError> {
    let target = a.target(false);
    let known = KnownHosts::load(&a.known_hosts).map_err(|e| SshError::HostKey(format!("{target}: known_hosts {e}")))?;
    let stream = resolve_and_connect(a)?;
    // Without it a reused session costs ~40 ms per command (Nagle + delayed ACK).
    stream.set_nodelay(true).map_err(|e| SshError::Unavailable(format!("{target}: {e}")))?;
    let socket = stream.try_clone().map_err(|e| SshError::Unavailable(format!("{target}: {e}")))?;
    // Issue #10: a cancel during the handshake or login shuts the socket down, so
    // libssh2's blocking calls return at once.
    if let Ok(s) = socket.try_clone() {
        cancel.on_cancel(move || {
            let _ = s.shutdown(std::net::Shutdown::Both);
        });
    }
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
}

impl Collector {
    fn push(&mut self, stderr: bool, data: &[u8]) {
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
    progress: &mut crate::exec::Progress<'_>,
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
    if let Err(e) = channel.exec(&a.command) {
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
    };
    let raw_stdin = a.stdin.as_deref().map(str::as_bytes).unwrap_or_default();
    let input = if a.pty { pty_input(raw_stdin) } else { raw_stdin.to_vec() };
    s.set_blocking(false);
    let step = pump(conn, &mut channel, a, &input, deadline, &mut collector, progress);
    let finish = |mut c: Collector| {
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
            abort_remote(s, &mut channel);
            let message = if a.pty {
                format!(
                    "{target}: the command ran longer than {}s and was stopped (its terminal was hung up: SIGHUP); \
                     the connection was closed",
                    a.timeout.as_secs()
                )
            } else {
                format!(
                    "{target}: the command ran longer than {}s; its channel and the connection were closed \
                     (without a pty the command is not stopped: it loses its input and output)",
                    a.timeout.as_secs()
                )
            };
            (Err(SshError::Timeout { message, partial: Box::new(finish(collector)) }), false)
        }
        Ok(Step::Cancelled) => {
            abort_remote(s, &mut channel);
            (Err(SshError::Cancelled), false)
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

/// Stops the remote command of `channel` (module docs): closes the channel, which
/// with a pty makes sshd close the terminal and the kernel hang up the command's
/// session. The caller then drops the connection (`keep` false), which does the same
/// if the close did not get through. Without a pty the command is only cut off.
fn abort_remote(session: &Session, channel: &mut Channel) {
    session.set_blocking(true);
    session.set_timeout(1000);
    if let Err(e) = channel.close() {
        log::debug!("closing the channel of a stopped command: {}", e.message());
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
    report: &mut crate::exec::Progress<'_>,
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
        let mut c = Collector { budget: 10, out: SshOutcome::default() };
        c.push(false, b"123456");
        c.push(true, b"abcdef");
        c.push(false, b"zz");
        assert_eq!((c.out.stdout.as_slice(), c.out.stderr.as_slice()), (&b"123456"[..], &b"abcd"[..]));
        assert_eq!((c.out.stdout_bytes, c.out.stderr_bytes, c.out.truncated), (8, 6, true));
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
