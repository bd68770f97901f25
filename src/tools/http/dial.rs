//! The TCP part of the HTTP executor's ureq connector chain (`Dialer`, then rustls for
//! `https`): what ureq's own `TcpConnector` does, without the system calls a kept
//! connection paid on every request (measured with `strace -c`).
//!
//! - The addresses dialed are the ones ureq's resolver returns, which is the executor's
//!   [`PinnedResolver`](crate::net::dest::PinnedResolver): only the checked addresses of
//!   the host and port being requested. Nothing here resolves or picks an address.
//! - The socket is made non-blocking once, when it is connected. Every wait is a
//!   `poll(2)` bounded by the call's deadline ([`Deadline`], set by the executor before
//!   each request from the policy timeout), so no timeout is set on the socket per
//!   request (ureq's transport sets `SO_RCVTIMEO`/`SO_SNDTIMEO` whenever the remaining
//!   time changes, which is every request).
//! - `is_open` (ureq asks when a connection goes back to the pool and when it is taken
//!   out) is one `poll(2)` that does not wait: bytes waiting, an end or an error mean the
//!   connection is not reused. Right after a read (the body just read to its end, the
//!   return to the pool) it answers without asking the kernel: whatever the server sends
//!   after that is seen by the probe when the connection is taken out again, which is
//!   the probe that counts (ureq's probe switches the socket to non-blocking and back,
//!   four `ioctl`s and a `recvfrom` per probe, twice per request).
//! - The socket is registered with the agent for `Agent::shutdown` (a cancelled call,
//!   `exec.rs`): a poll or read blocked on it returns at once.
//!
//! A connect in progress is bounded by the deadline, as before, and not interrupted by a
//! cancel.

use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Weak};
use std::time::{Duration, Instant};

use rustix::event::{poll, PollFd, PollFlags, Timespec};
use ureq::unversioned::transport::{Buffers, ConnectionDetails, Connector, Either, LazyBuffers, NextTimeout, ShutdownHandle, Transport};
use ureq::{Error, Timeout};

/// The end of the running call's time, shared by the executor (which sets it before each
/// request) and every socket its agent opened.
#[derive(Debug)]
pub(crate) struct Deadline {
    base: Instant,
    /// Nanoseconds after `base`.
    at: AtomicU64,
}

impl Deadline {
    pub(crate) fn new() -> Arc<Deadline> {
        Arc::new(Deadline { base: Instant::now(), at: AtomicU64::new(0) })
    }

    /// The call may use the network until `remaining` from now.
    pub(crate) fn set(&self, remaining: Duration) {
        let at = self.base.elapsed().saturating_add(remaining).as_nanos();
        self.at.store(u64::try_from(at).unwrap_or(u64::MAX), Ordering::SeqCst);
    }

    /// Time left, zero once past.
    fn left(&self) -> Duration {
        Duration::from_nanos(self.at.load(Ordering::SeqCst)).saturating_sub(self.base.elapsed())
    }
}

/// Opens the TCP connection (module docs).
#[derive(Debug)]
pub(crate) struct Dialer {
    pub(crate) deadline: Arc<Deadline>,
}

impl<In: Transport> Connector<In> for Dialer {
    type Out = Either<In, Socket>;

    fn connect(&self, details: &ConnectionDetails, chained: Option<In>) -> Result<Option<Self::Out>, Error> {
        if chained.is_some() {
            // Nothing comes before this connector in the executor's chain (no proxy).
            return Ok(chained.map(Either::A));
        }
        let addrs: Vec<SocketAddr> = details.addrs.iter().copied().collect();
        let stream = connect(&addrs, &self.deadline)?;
        stream.set_nodelay(true)?;
        stream.set_nonblocking(true)?;
        let config = details.config;
        let socket = Socket {
            stream: Arc::new(stream),
            buffers: LazyBuffers::new(config.input_buffer_size(), config.output_buffer_size()),
            deadline: self.deadline.clone(),
            just_read: false,
        };
        (details.register_shutdown)(Arc::downgrade(&socket.stream) as Weak<dyn ShutdownHandle>)?;
        Ok(Some(Either::B(socket)))
    }
}

/// Each address in turn, each given half of the time left (the last one all of it),
/// moving on after a failure that concerns only that address (refused, unreachable).
/// The addresses are the pinned resolver's, checked by `dest.rs` (module docs).
#[expect(clippy::disallowed_methods, reason = "the HTTP executor's one connect, to addresses dest.rs checked")]
fn connect(addrs: &[SocketAddr], deadline: &Deadline) -> Result<TcpStream, Error> {
    let mut last = None;
    for (i, addr) in addrs.iter().enumerate() {
        let left = deadline.left();
        if left.is_zero() {
            return Err(Error::Timeout(Timeout::Connect));
        }
        let share = if i + 1 == addrs.len() { left } else { (left / 2).max(Duration::from_millis(10)).min(left) };
        match TcpStream::connect_timeout(addr, share) {
            Ok(s) => return Ok(s),
            Err(e) if e.kind() == io::ErrorKind::TimedOut || e.kind() == io::ErrorKind::WouldBlock => {
                last = Some(Error::Timeout(Timeout::Connect));
            }
            Err(e) if address_specific(&e) => last = Some(Error::Io(e)),
            Err(e) => return Err(Error::Io(e)),
        }
    }
    Err(last.unwrap_or_else(|| Error::Io(io::ErrorKind::ConnectionRefused.into())))
}

fn address_specific(e: &io::Error) -> bool {
    use io::ErrorKind::*;
    matches!(e.kind(), ConnectionRefused | HostUnreachable | NetworkUnreachable | NetworkDown | AddrNotAvailable)
}

/// A connected, non-blocking TCP socket (module docs).
pub(crate) struct Socket {
    /// Shared (weakly) with the agent's shutdown registry.
    stream: Arc<TcpStream>,
    buffers: LazyBuffers,
    deadline: Arc<Deadline>,
    /// The last operation read bytes: `is_open` is the return to the pool.
    just_read: bool,
}

impl std::fmt::Debug for Socket {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Socket").field("peer", &self.stream.peer_addr().ok()).finish()
    }
}

impl Socket {
    /// Waits until the socket is ready for `flags`, within the call's deadline and
    /// ureq's own timeout (none is configured; kept for completeness).
    fn wait(&self, flags: PollFlags, timeout: &NextTimeout) -> Result<(), Error> {
        loop {
            let left = self.deadline.left().min(*timeout.after);
            if left.is_zero() {
                return Err(Error::Timeout(Timeout::Global));
            }
            let ts = Timespec { tv_sec: i64::try_from(left.as_secs()).unwrap_or(i64::MAX), tv_nsec: i64::from(left.subsec_nanos()) };
            let mut fds = [PollFd::new(&*self.stream, flags)];
            match poll(&mut fds, Some(&ts)) {
                // Ready, or an error or hang-up that the next read or write reports.
                Ok(n) if n > 0 => return Ok(()),
                Ok(_) | Err(rustix::io::Errno::INTR) => {}
                Err(e) => return Err(Error::Io(e.into())),
            }
        }
    }
}

impl Transport for Socket {
    fn buffers(&mut self) -> &mut dyn Buffers {
        &mut self.buffers
    }

    fn transmit_output(&mut self, amount: usize, timeout: NextTimeout) -> Result<(), Error> {
        self.just_read = false;
        let mut sent = 0;
        while sent < amount {
            let output = &self.buffers.output()[sent..amount];
            match (&*self.stream).write(output) {
                Ok(0) => return Err(Error::Io(io::ErrorKind::WriteZero.into())),
                Ok(n) => sent += n,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => self.wait(PollFlags::OUT, &timeout)?,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(Error::Io(e)),
            }
        }
        Ok(())
    }

    fn await_input(&mut self, timeout: NextTimeout) -> Result<bool, Error> {
        // Right after a write (the request sent) the answer cannot be there yet: wait
        // first. After a read, more of a long answer is often there already: read first.
        if !self.just_read {
            self.wait(PollFlags::IN, &timeout)?;
        }
        loop {
            let input = self.buffers.input_append_buf();
            match (&*self.stream).read(input) {
                Ok(n) => {
                    self.buffers.input_appended(n);
                    self.just_read = n > 0;
                    return Ok(n > 0);
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => self.wait(PollFlags::IN, &timeout)?,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(Error::Io(e)),
            }
        }
    }

    fn is_open(&mut self) -> bool {
        if std::mem::take(&mut self.just_read) {
            return true;
        }
        // Nothing to read: still open. Bytes waiting, an end or an error: not reusable.
        let mut fds = [PollFd::new(&*self.stream, PollFlags::IN)];
        matches!(poll(&mut fds, Some(&Timespec { tv_sec: 0, tv_nsec: 0 })), Ok(0))
    }
}
