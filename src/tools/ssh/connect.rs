//! Opening an SSH connection for an authorized action (`exec.rs` module docs): resolve
//! and connect (each address, `connect_timeout_s`), the handshake, the host key checked
//! against `known_hosts` before any authentication, then the key, agent or password.

use std::net::TcpStream;
use std::os::fd::{AsRawFd, OwnedFd};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use base64::Engine as _;
use ssh2::{HashType, MethodType, Session};

use crate::policy::SecretSource;
use crate::gate::vault::Vault;
use crate::tools::ssh::known_hosts::{self, KnownHosts, Recorded, Verdict};
use crate::policy::ssh::{HostKeyPolicy, SshAuth};
use crate::tools::ssh::authorize::SshAction;
use crate::tools::ssh::result::SshError;

use super::libssh2::{is_code, ms, ERROR_FILE, ERROR_TIMEOUT};

/// One authenticated connection.
pub(crate) struct Conn {
    pub(crate) session: Session,
    /// A second descriptor for the same socket (the TCP connection, or through a jump
    /// host the local end of the tunnel, `via.rs`), to wait on with `poll`.
    pub(crate) socket: OwnedFd,
    pub(crate) fingerprint: String,
}

impl Drop for Conn {
    fn drop(&mut self) {
        self.session.set_blocking(true);
        self.session.set_timeout(1000);
        let _ = self.session.disconnect(None, "sp: closing", None);
    }
}

pub(crate) fn resolve_and_connect(a: &SshAction) -> Result<TcpStream, SshError> {
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

pub(crate) fn connect(a: &SshAction, vault: &mut Vault, cancel: &crate::gate::exec::Cancel) -> Result<Conn, SshError> {
    let target = a.target(false);
    let known = KnownHosts::load(&a.known_hosts).map_err(|e| SshError::HostKey(format!("{target}: known_hosts {e}")))?;
    if let Some(jump) = &a.via {
        return connect_via(a, jump, vault, cancel, known);
    }
    let stream = resolve_and_connect(a)?;
    // Without it a reused session costs ~40 ms per command (Nagle + delayed ACK).
    stream.set_nodelay(true).map_err(|e| SshError::Unavailable(format!("{target}: {e}")))?;
    let socket = stream.try_clone().map_err(|e| SshError::Unavailable(format!("{target}: {e}")))?;
    // A cancel during the handshake or login shuts the socket down, so
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
    let conn = connect_on(a, vault, known, stream, socket.into())?;
    connecting.store(false, Ordering::SeqCst);
    Ok(conn)
}

/// [`connect`] through the jump host `jump` (`via.rs`): its connection first (its
/// host key, its authentication; a `via` of its own the same way), then the tunnel,
/// then `a`'s handshake and host key check on the tunnel's end.
fn connect_via(a: &SshAction, jump: &SshAction, vault: &mut Vault, cancel: &crate::gate::exec::Cancel, known: KnownHosts) -> Result<Conn, SshError> {
    let target = a.target(false);
    let bastion = connect(jump, vault, cancel)?;
    let session = bastion.session.clone();
    let socket = bastion.socket.try_clone().map_err(|e| SshError::Unavailable(format!("{target}: {e}")))?;
    let (stream, dup) = super::via::tunnel(a, jump, session, socket, Box::new(bastion))?;
    // A cancel during the handshake or login ends the tunnel's local end, as for a
    // TCP socket above.
    let connecting = Arc::new(AtomicBool::new(true));
    if let Ok(s) = stream.try_clone() {
        let connecting = connecting.clone();
        cancel.on_cancel(move || {
            if connecting.load(Ordering::SeqCst) {
                let _ = s.shutdown(std::net::Shutdown::Both);
            }
        });
    }
    let conn = connect_on(a, vault, known, stream, dup)?;
    connecting.store(false, Ordering::SeqCst);
    Ok(conn)
}

/// [`connect`] on an open stream (`socket`: a second descriptor for it): a TCP
/// connection, or the local end of a jump host's tunnel (`via.rs`).
fn connect_on<S: AsRawFd + 'static>(a: &SshAction, vault: &mut Vault, known: KnownHosts, stream: S, socket: OwnedFd) -> Result<Conn, SshError> {
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
        if is_code(&e, ERROR_TIMEOUT) {
            SshError::Unavailable(format!("{target}: SSH handshake timed out"))
        } else {
            SshError::Unavailable(format!("{target}: SSH handshake failed: {}", e.message()))
        }
    })?;
    let (blob, fingerprint) = match (session.host_key(), session.host_key_hash(HashType::Sha256)) {
        (Some((blob, _)), Some(hash)) => (blob.to_vec(), format!("SHA256:{}", base64::engine::general_purpose::STANDARD_NO_PAD.encode(hash))),
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
            )));
        }
        Verdict::Changed { line } => {
            return Err(SshError::HostKey(format!(
                "{target}: HOST KEY CHANGED: the server presents {key_type} {fingerprint}, {file} line {line} holds another key \
                 of that type; refused (someone may be intercepting the connection, or the host was reinstalled)"
            )));
        }
        Verdict::OtherTypes { types } => {
            return Err(SshError::HostKey(format!(
                "{target}: the server presents a {key_type} key ({fingerprint}) but {file} only knows {} key(s) for it; refused",
                types.join(", ")
            )));
        }
        Verdict::Revoked { line } => {
            return Err(SshError::HostKey(format!("{target}: host key {key_type} {fingerprint} is marked @revoked in {file} line {line}; refused")));
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
        if is_code(&e, ERROR_TIMEOUT) {
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
                if is_code(&e, ERROR_FILE) {
                    SshError::Auth(format!("{target}: the key file could not be decoded (wrong or missing passphrase_file, or an unsupported format)"))
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
            agent.connect().map_err(|_| SshError::Auth(format!("{target}: no SSH agent reachable (is SSH_AUTH_SOCK set for sp?)")))?;
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
