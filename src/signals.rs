//! SIGTERM and SIGINT in `sp mcp`: stop between messages; SIGHUP: read the policy again.
//!
//! SIGHUP asks for a reload (issue 35 section 3, `server/reload.rs`): its handler sets
//! the [`Reload`] flag and writes a byte that [`StoppableStdin`] polls with stdin, so a
//! loop waiting for the client wakes, reloads between messages and reads on (the line
//! read so far is kept). During a call nothing happens until the call ends: it finishes
//! under the policy it started with. The policy's `"reload": "watch"` asks the same way
//! ([`Reload::request`]) when the file changes.
//!
//! The default action of the stop signals kills the process wherever it is, cutting a
//! large answer mid-line and skipping the journal's `end` row. Instead:
//! - the handlers (`signal-hook`'s safe registration; the crate forbids `unsafe`) only
//!   record the signal number and wake a socket pair;
//! - a message being written is finished (writes retry `EINTR`, see `out.rs`);
//! - an action already running is cancelled: [`StoppableStdin`] reads as end of input,
//!   which `mcp/control` treats as the client's shutdown, so the HTTP
//!   connection is closed, the remote command killed, the approver killed, no answer;
//! - reading stops: [`StoppableStdin`] waits in `poll(2)` for stdin *or* the wake-up, so
//!   a signal ends even a read that is blocked waiting for the client; a request that
//!   arrives with or after the signal is not run;
//! - `install` also makes `sp mcp` a child subreaper (`sys::become_subreaper`), so a
//!   helper's orphans come to `sp`, which kills them when the helper ends;
//! - `sp mcp` writes the journal's `end` row (decision `sigterm` or `sigint`) and exits
//!   with 128 + the signal number (143, 130), as `sp(1)` documents.

use std::io::{self, Read, Write};
use std::os::fd::AsFd;
use std::os::unix::net::UnixStream;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;

use signal_hook::consts::{SIGHUP, SIGINT, SIGTERM};

/// The signals that end a session cleanly (SIGHUP reloads the policy instead).
pub(crate) const STOP_SIGNALS: [i32; 2] = [SIGTERM, SIGINT];

/// The signal number that asked the session to stop (0: none yet).
#[derive(Debug, Clone, Default)]
pub struct StopFlag(Arc<AtomicUsize>);

impl StopFlag {
    pub fn get(&self) -> Option<i32> {
        match self.0.load(Ordering::SeqCst) {
            0 => None,
            n => i32::try_from(n).ok(),
        }
    }

    /// For tests and callers that stop the loop themselves.
    pub fn set(&self, signal: i32) {
        self.0.store(usize::try_from(signal).unwrap_or(1), Ordering::SeqCst);
    }
}

/// The name a signal has in the journal's `end` row and on stderr.
pub(crate) fn name(signal: i32) -> String {
    match signal {
        SIGTERM => "sigterm".into(),
        SIGINT => "sigint".into(),
        SIGHUP => "sighup".into(),
        n => format!("signal {n}"),
    }
}

/// A reload asked for (SIGHUP, or a change of the watched policy file) and not yet done:
/// a flag, and a socket pair whose byte wakes a read of [`StoppableStdin`] waiting for
/// the client.
#[derive(Debug, Clone)]
pub(crate) struct Reload(Arc<ReloadInner>);

#[derive(Debug)]
struct ReloadInner {
    asked: Arc<AtomicBool>,
    /// Written by [`Reload::request`] (and SIGHUP's handler).
    notify: UnixStream,
    /// Polled by [`StoppableStdin`].
    woken: UnixStream,
}

impl Reload {
    fn new() -> io::Result<Reload> {
        let (woken, notify) = UnixStream::pair()?;
        woken.set_nonblocking(true)?;
        notify.set_nonblocking(true)?;
        Ok(Reload(Arc::new(ReloadInner { asked: Arc::new(AtomicBool::new(false)), notify, woken })))
    }

    /// Asks for a reload (as SIGHUP does): the loop reloads between messages.
    pub(crate) fn request(&self) {
        self.0.asked.store(true, Ordering::SeqCst);
        // A full socket already holds a wake-up.
        let _ = (&self.0.notify).write(&[1]);
    }

    /// Whether a reload is asked for and not yet taken.
    pub(crate) fn pending(&self) -> bool {
        self.0.asked.load(Ordering::SeqCst)
    }

    /// Takes the request: `true` once per request (several before a reload are one).
    pub(crate) fn take(&self) -> bool {
        self.0.asked.swap(false, Ordering::SeqCst)
    }

    /// Empties the wake-up socket (the flag stays the truth).
    fn drain(&self) {
        let mut drain = [0u8; 64];
        while matches!((&self.0.woken).read(&mut drain), Ok(n) if n > 0) {}
    }
}

/// Installs the handlers. Returns the flag, stdin wrapped so that a signal ends a
/// blocked read (and a reload wakes it), the [`Nudge`] of the control thread that reads
/// it during calls, and the [`Reload`] SIGHUP asks.
pub(crate) fn install() -> io::Result<(StopFlag, StoppableStdin, Nudge, Reload)> {
    // Process-wide like the handlers: from now on what a helper leaves behind comes to
    // `sp` (not init), which ends it when the helper ends (`sys::reap_strays`).
    if let Err(e) = crate::sys::become_subreaper() {
        log::warn!("cannot become a child subreaper ({e}): a helper that daemonises can outlive its call");
    }
    let flag = StopFlag::default();
    let (wake, notify) = UnixStream::pair()?;
    wake.set_nonblocking(true)?;
    notify.set_nonblocking(true)?;
    for signal in STOP_SIGNALS {
        // The flag first: when the wake-up is seen, the flag is already set.
        signal_hook::flag::register_usize(signal, flag.0.clone(), signal as usize)?;
        signal_hook::low_level::pipe::register(signal, notify.try_clone()?)?;
    }
    let reload = Reload::new()?;
    // The flag first, as above: when the wake-up is seen, the request is there.
    signal_hook::flag::register(SIGHUP, reload.0.asked.clone())?;
    signal_hook::low_level::pipe::register(SIGHUP, reload.0.notify.try_clone()?)?;
    let (nudged, nudge) = UnixStream::pair()?;
    nudged.set_nonblocking(true)?;
    nudge.set_nonblocking(true)?;
    let no_wait = Arc::new(AtomicBool::new(false));
    let stdin = StoppableStdin { flag, wake: wake.try_clone()?, no_wait: no_wait.clone(), reload: Some(reload.clone()) };
    let timer = std::sync::OnceLock::new();
    Ok((stdin.flag.clone(), stdin, Nudge(Arc::new(NudgeInner { nudge, nudged, wake, no_wait, timer })), reload))
}

/// `mcp/control`: how the thread that serves stdin while a call runs waits for it without
/// holding the reader ([`Nudge::wait`]), reads it without waiting ([`Nudge::no_wait`]),
/// and is woken when the call ends or the session does ([`Nudge::nudge`]); between calls
/// it waits for a nudge or for the timer a call arms when it starts ([`Nudge::arm`],
/// [`Nudge::idle`]), so that a call that ends before the timer costs it no wake-up.
#[derive(Debug, Clone)]
pub struct Nudge(Arc<NudgeInner>);

#[derive(Debug)]
struct NudgeInner {
    nudge: UnixStream,
    /// The other end of `nudge`: polled by [`Nudge::wait`] only.
    nudged: UnixStream,
    /// The signal wake-up (as [`StoppableStdin`] has it).
    wake: UnixStream,
    /// Shared with [`StoppableStdin`]: a read that would wait returns `WouldBlock`.
    no_wait: Arc<AtomicBool>,
    /// A one-shot `timerfd` (monotonic, non-blocking), made at the first [`Nudge::arm`]
    /// (a session of refusals never needs it); `None` if it could not be made.
    timer: std::sync::OnceLock<Option<std::os::fd::OwnedFd>>,
}

impl Nudge {
    /// Ends a [`wait`](Self::wait) now or the next one (a pending nudge is kept).
    pub(crate) fn nudge(&self) {
        // A full socket already holds a nudge; nothing else can fail that matters here.
        let _ = (&self.0.nudge).write(&[1]);
    }

    /// Waits in `poll(2)` for a nudge and, if `stdin`, for stdin or a stop signal.
    pub(crate) fn wait(&self, stdin: bool) {
        use rustix::event::{poll, PollFd, PollFlags};
        let input = io::stdin();
        let mut fds = [PollFd::new(&self.0.nudged, PollFlags::IN), PollFd::new(&input, PollFlags::IN), PollFd::new(&self.0.wake, PollFlags::IN)];
        let n = if stdin { 3 } else { 1 };
        // EINTR or an error: the caller looks again and comes back.
        let _ = poll(&mut fds[..n], None);
        if !fds[0].revents().is_empty() {
            let mut drain = [0u8; 64];
            while matches!((&self.0.nudged).read(&mut drain), Ok(n) if n > 0) {}
        }
    }

    /// Makes [`Nudge::idle`] return `after` from now (a pending time is replaced).
    /// `false` if there is no timer: the caller nudges instead.
    pub(crate) fn arm(&self, after: std::time::Duration) -> bool {
        use rustix::time::{timerfd_settime, Itimerspec, TimerfdTimerFlags};
        let Some(fd) = self.timer() else { return false };
        let zero = rustix::time::Timespec { tv_sec: 0, tv_nsec: 0 };
        let value = rustix::time::Timespec { tv_sec: i64::try_from(after.as_secs()).unwrap_or(i64::MAX), tv_nsec: i64::from(after.subsec_nanos()).max(1) };
        timerfd_settime(fd, TimerfdTimerFlags::empty(), &Itimerspec { it_interval: zero, it_value: value }).is_ok()
    }

    /// The timer, made by whichever thread needs it first (the control thread may wait
    /// in [`Nudge::idle`] before the first call arms it).
    fn timer(&self) -> Option<&std::os::fd::OwnedFd> {
        use rustix::time::{timerfd_create, TimerfdClockId, TimerfdFlags};
        self.0
            .timer
            .get_or_init(|| {
                timerfd_create(TimerfdClockId::Monotonic, TimerfdFlags::NONBLOCK | TimerfdFlags::CLOEXEC)
                    .inspect_err(|e| log::warn!("no timer for the control thread ({e}): it is woken at every call"))
                    .ok()
            })
            .as_ref()
    }

    /// Cancels a time set by [`Nudge::arm`] that has not come yet.
    pub(crate) fn disarm(&self) {
        use rustix::time::{timerfd_settime, Itimerspec, TimerfdTimerFlags};
        if let Some(Some(fd)) = self.0.timer.get() {
            let zero = rustix::time::Timespec { tv_sec: 0, tv_nsec: 0 };
            // On failure the timer comes: the control thread wakes, finds no call, waits again.
            let _ = timerfd_settime(fd, TimerfdTimerFlags::empty(), &Itimerspec { it_interval: zero, it_value: zero });
        }
    }

    /// Waits in `poll(2)` for a nudge or the armed time, whichever comes first.
    pub(crate) fn idle(&self) {
        use rustix::event::{poll, PollFd, PollFlags};
        let timer = self.timer();
        let mut fds = [PollFd::new(&self.0.nudged, PollFlags::IN), PollFd::new(&self.0.nudged, PollFlags::IN)];
        let n = match timer {
            Some(t) => {
                fds[1] = PollFd::new(t, PollFlags::IN);
                2
            }
            None => 1,
        };
        // EINTR or an error: the caller looks again and comes back.
        let _ = poll(&mut fds[..n], None);
        if !fds[0].revents().is_empty() {
            let mut drain = [0u8; 64];
            while matches!((&self.0.nudged).read(&mut drain), Ok(n) if n > 0) {}
        }
        if let Some(t) = timer
            && !fds[1].revents().is_empty()
        {
            let mut expirations = [0u8; 8];
            let _ = rustix::io::read(t, &mut expirations);
        }
    }

    /// Runs `read` with reads of [`StoppableStdin`] that return `WouldBlock` instead of
    /// waiting (the reader must be held meanwhile: the loop never reads that way).
    pub(crate) fn no_wait<T>(&self, read: impl FnOnce() -> T) -> T {
        self.0.no_wait.store(true, Ordering::SeqCst);
        let t = read();
        self.0.no_wait.store(false, Ordering::SeqCst);
        t
    }
}

/// Stdin that reads as end-of-input once a stop signal has arrived, and returns
/// `WouldBlock` (the frame reader keeps the line read so far) when a reload is asked
/// while it waits, so the loop can reload between messages. Reads the descriptor
/// directly (no buffer of its own, so `poll(2)` sees every pending byte), and waits for
/// it in `poll(2)`, so an `O_NONBLOCK` stdin works too.
#[derive(Debug)]
pub(crate) struct StoppableStdin {
    flag: StopFlag,
    wake: UnixStream,
    /// [`Nudge::no_wait`]: return `WouldBlock` rather than wait.
    no_wait: Arc<AtomicBool>,
    /// Its wake-up is polled with stdin.
    reload: Option<Reload>,
}

impl Read for StoppableStdin {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        use rustix::event::{poll, PollFd, PollFlags};
        let stdin = io::stdin();
        loop {
            if self.flag.get().is_some() {
                return Ok(0);
            }
            // Asked while the loop reads: it reloads first, then reads on. (Not for the
            // control thread's reads during a call: the call ends first.)
            if !self.no_wait.load(Ordering::SeqCst) && self.reload.as_ref().is_some_and(Reload::pending) {
                return Err(io::ErrorKind::WouldBlock.into());
            }
            let mut fds = [PollFd::new(&stdin, PollFlags::IN), PollFd::new(&self.wake, PollFlags::IN), PollFd::new(&self.wake, PollFlags::IN)];
            let n = match &self.reload {
                Some(r) => {
                    fds[2] = PollFd::new(&r.0.woken, PollFlags::IN);
                    3
                }
                None => 2,
            };
            let no_wait = self.no_wait.load(Ordering::SeqCst);
            let zero = rustix::event::Timespec { tv_sec: 0, tv_nsec: 0 };
            match poll(&mut fds[..n], if no_wait { Some(&zero) } else { None }) {
                Ok(0) if no_wait => return Err(io::ErrorKind::WouldBlock.into()),
                Ok(_) | Err(rustix::io::Errno::INTR) => {}
                Err(e) => return Err(e.into()),
            }
            if n == 3
                && !fds[2].revents().is_empty()
                && let Some(r) = &self.reload
            {
                r.drain();
                continue;
            }
            if !fds[0].revents().is_empty() && self.flag.get().is_none() {
                match rustix::io::read(stdin.as_fd(), &mut *buf) {
                    Ok(n) => return Ok(n),
                    Err(rustix::io::Errno::INTR | rustix::io::Errno::AGAIN) => {}
                    Err(e) => return Err(e.into()),
                }
            }
        }
    }
}
