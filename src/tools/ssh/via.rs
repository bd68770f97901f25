//! Jump hosts (issue 34 §3): a host with `"via": "bastion"` is reached through a
//! `direct-tcpip` channel of a session to the bastion, with no shell or command there
//! (the bastion's `commands` list does not apply: none runs).
//!
//! ```text
//!  connect(web, via bastion)
//!   ├─ connect(bastion): its own host key check and authentication (connect.rs);
//!   │  a bastion with a via of its own is reached the same way (at most two hops)
//!   ├─ bastion.channel_direct_tcpip(web.address, web.port) ── refused ──> SP_UPSTREAM
//!   ├─ UnixStream::pair(): one end to a pump thread that owns the bastion session
//!   │  and the channel, copying both ways (non-blocking, poll on both descriptors)
//!   └─ the other end is web's "socket": handshake, web's host key against
//!      known_hosts (under web's address and port), authentication, as for any host
//! ```
//!
//! Decisions (`sp(1)` repeats them):
//! - libssh2 speaks to a file descriptor, and a channel is none: the pump thread
//!   bridges them, with no `unsafe` and no loopback listener another local process
//!   could connect to (a socketpair has no name).
//! - The tunnel's bastion session belongs to the target's kept session: it is made
//!   when the target is connected, reused for every call to it, and closed with it
//!   (the target's session closes its end of the pair, the pump sees end of file,
//!   closes the channel and disconnects from the bastion). It is not the session an
//!   `ssh_exec` on the bastion itself uses: libssh2 sessions are not shared between
//!   threads here, so a command on the bastion never waits for a transfer behind it.
//! - Both host keys are verified, each against `ssh.known_hosts` under its own
//!   address and port: the target's as the bastion reaches it (`127.0.0.1:2222` is
//!   the bastion's loopback, so list it under that name).

use std::io::{ErrorKind, Read, Write};
use std::os::fd::OwnedFd;
use std::os::unix::net::UnixStream;
use std::time::{Duration, Instant};

use rustix::event::{poll, PollFd, PollFlags, Timespec};
use ssh2::{Channel, Session};

use crate::tools::ssh::authorize::SshAction;
use crate::tools::ssh::result::SshError;

/// Bytes held per direction before the pump stops reading that side.
const PENDING: usize = 256 * 1024;
/// The longest the pump sleeps without looking at both sides (libssh2 may hold data
/// it read already; a poll would not see it).
const TICK: Duration = Duration::from_millis(50);

/// The tunnel to `a` through its jump host `jump`, whose connection is made
/// (`connect.rs`): a direct-tcpip channel on `session`, pumped to a socketpair by a
/// thread that owns `keep` (the jump host's connection: dropped, it disconnects) and
/// polls `socket` (a descriptor of its transport). Returns the local end for `a`'s
/// session and a second descriptor of it.
pub(crate) fn tunnel(a: &SshAction, jump: &SshAction, session: Session, socket: OwnedFd, keep: Box<dyn Send>) -> Result<(UnixStream, OwnedFd), SshError> {
    let target = a.target(false);
    session.set_blocking(true);
    session.set_timeout(super::libssh2::ms(a.connect_timeout));
    let channel = session
        .channel_direct_tcpip(&a.address, a.port, None)
        .map_err(|e| SshError::Upstream(format!("{target}: the jump host {} did not open a tunnel to it: {}", jump.host, e.message())))?;
    let (ours, theirs) = UnixStream::pair().map_err(|e| SshError::Unavailable(format!("{target}: socketpair: {e}")))?;
    let dup: OwnedFd = ours.try_clone().map_err(|e| SshError::Unavailable(format!("{target}: {e}")))?.into();
    let bastion = Bastion { session, socket, _keep: keep };
    let keepalive = jump.keepalive;
    std::thread::Builder::new()
        .name(format!("sp-via-{}", a.host))
        .spawn(move || pump(bastion, channel, theirs, keepalive))
        .map_err(|e| SshError::Unavailable(format!("{target}: cannot start the tunnel: {e}")))?;
    log::info!("{target}: reaching it through the jump host {}", jump.host);
    Ok((ours, dup))
}

/// What the pump thread holds of the jump host's connection.
struct Bastion {
    session: Session,
    socket: OwnedFd,
    /// The connection itself, disconnected when the pump ends.
    _keep: Box<dyn Send>,
}

/// One direction's bytes in flight.
#[derive(Default)]
struct Pending {
    bytes: Vec<u8>,
    /// The source ended (or failed): nothing more will come.
    ended: bool,
}

impl Pending {
    fn room(&self) -> bool {
        !self.ended && self.bytes.len() < PENDING
    }

    /// Reads what `from` has now; `true` when it moved something.
    fn fill(&mut self, from: &mut impl Read, buf: &mut [u8]) -> bool {
        if !self.room() {
            return false;
        }
        match from.read(buf) {
            Ok(0) => {
                self.ended = true;
                true
            }
            Ok(n) => {
                self.bytes.extend_from_slice(&buf[..n]);
                true
            }
            Err(e) if e.kind() == ErrorKind::WouldBlock || e.kind() == ErrorKind::Interrupted => false,
            Err(_) => {
                self.ended = true;
                true
            }
        }
    }

    /// Writes what `to` takes now; `Err` when `to` is gone.
    fn drain(&mut self, to: &mut impl Write) -> Result<bool, ()> {
        if self.bytes.is_empty() {
            return Ok(false);
        }
        match to.write(&self.bytes) {
            Ok(0) => Err(()),
            Ok(n) => {
                self.bytes.drain(..n);
                Ok(true)
            }
            Err(e) if e.kind() == ErrorKind::WouldBlock || e.kind() == ErrorKind::Interrupted => Ok(false),
            Err(_) => Err(()),
        }
    }

    /// Ended and delivered.
    fn done(&self) -> bool {
        self.ended && self.bytes.is_empty()
    }
}

/// Copies between the channel and the local end until either side ends; then closes
/// the channel and (dropping `bastion`) the session to the jump host.
fn pump(bastion: Bastion, mut channel: Channel, mut local: UnixStream, keepalive: Duration) {
    bastion.session.set_blocking(false);
    if local.set_nonblocking(true).is_err() {
        return;
    }
    let mut up = Pending::default(); // local -> channel
    let mut down = Pending::default(); // channel -> local
    let mut buf = vec![0u8; 32 * 1024];
    let mut last_keepalive = Instant::now();
    loop {
        let mut moved = up.fill(&mut local, &mut buf);
        match up.drain(&mut channel) {
            Ok(m) => moved |= m,
            Err(()) => break,
        }
        moved |= down.fill(&mut channel, &mut buf);
        if !down.ended && channel.eof() && down.bytes.is_empty() {
            down.ended = true;
        }
        match down.drain(&mut local) {
            Ok(m) => moved |= m,
            Err(()) => break,
        }
        // The target's session went away (its end closed), or the tunnel did.
        if up.done() || down.done() {
            break;
        }
        if !keepalive.is_zero() && last_keepalive.elapsed() >= keepalive {
            let _ = bastion.session.keepalive_send();
            last_keepalive = Instant::now();
        }
        if !moved {
            let mut local_flags = PollFlags::IN;
            if !down.bytes.is_empty() {
                local_flags |= PollFlags::OUT;
            }
            let mut fds = [PollFd::new(&bastion.socket, PollFlags::IN), PollFd::new(&local, local_flags)];
            let tick = Timespec { tv_sec: 0, tv_nsec: TICK.as_nanos() as _ };
            let _ = poll(&mut fds, Some(&tick));
        }
    }
    log::debug!("jump host tunnel closed ({} bytes not delivered)", up.bytes.len() + down.bytes.len());
    bastion.session.set_blocking(true);
    bastion.session.set_timeout(1000);
    let _ = channel.close();
    let _ = local.shutdown(std::net::Shutdown::Both);
    // Dropping `bastion` here disconnects from the jump host (`Conn`'s Drop).
}
