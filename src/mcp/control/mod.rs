//! The loop never goes deaf while a call runs.
//!
//! ```text
//!  idle:          stdin ──FrameReader──> the protocol loop (main thread), one frame at a time
//!
//!  during a call: stdin ──FrameReader──> control thread ──> answers ping, tools/list, ...
//!                                              │  queues the rest for the loop
//!                 the call (main thread) ──────┘  writes its own progress notes
//! ```
//!
//! Between calls the loop reads stdin itself: a request is answered by the thread that
//! read it, with no hand-over between threads (on a machine whose idle CPUs
//! sleep, waking a second thread per message cost 50-300 us of every round trip).
//!
//! The blocking work of a call (the approver, each HTTP hop, the SSH command) stays on
//! the main thread, inside the executors, unchanged. While it runs, the *control thread*
//! serves stdin:
//!
//! - answers `ping`, `tools/list` and `server/discover` at once (they need only the
//!   session state, which the control thread holds meanwhile);
//! - on `notifications/cancelled` for the running request fires its [`Cancel`]: the
//!   executor stops (HTTP sockets shut down, the SSH command signalled and its channel
//!   closed, the approver's process group killed) and the call is never answered;
//! - on `notifications/cancelled` for a `tools/call` still queued marks it, so it never
//!   runs (a rejection with reason `cancelled`);
//! - refuses a request whose id is in flight (the running call's, or a queued
//!   request's), whatever its method: it is queued as [`Event::IdInFlight`], never run,
//!   and the loop answers it in turn with -32600 and `id: null` (the id's one answer
//!   is its first request's), so a cancel can never hit the wrong call;
//! - hands the client's response to sp's own request (an `elicitation/create` for
//!   approval, `Notes::request`) to the waiting call, when its id is exactly the one
//!   the call waits on (`jsonrpc::response_to`); any other response is queued and
//!   stays malformed input for the loop;
//! - on stdin EOF cancels the call the same way and the loop then ends;
//! - queues everything else in arrival order (another `tools/call`, refused requests,
//!   malformed frames): the loop handles the queue after the call exactly as if it had
//!   arrived then. One action at a time stays the rule.
//!
//! One control thread serves the whole session (a thread started and joined
//! per call cost 20-60 us of every executed call here). It is started at the first call
//! that runs (a session of refusals starts none) and parks between calls. The reader and
//! the session state sit in one mutex ([`Link`]), the writer in another: the loop holds
//! them between calls, the control thread takes the reader only for a *step* that never
//! blocks (the frames already buffered, then stdin read without waiting: `Nudge::no_wait`,
//! a read that would wait returns [`Read::Parked`] with the line read so far kept). It
//! waits for stdin in `poll(2)` holding nothing ([`Nudge::wait`]). So the end of a call
//! costs the loop no wait for the other thread: it marks the call over, nudges (a byte on
//! a socket pair the control thread polls with stdin) and takes the reader back at once;
//! the control thread wakes on its own time, sees the call over and parks. Progress notes
//! (and sp's own requests) are written by the call's own thread, under the writer's
//! mutex, none once the call is cancelled. A source without a nudge must never block (the in-memory input of tests
//! and the fuzz target): the control thread then reads it on until it ends.
//!
//! Woken only for a call that lasts (the wake-up and the hand-over were most
//! of a fast proxied call's cost). A call's start does not wake the control thread: it
//! arms a timer ([`Nudge::arm`], a `timerfd`) for [`SERVE_AFTER`], and the control
//! thread waits between calls for that timer or a nudge ([`Nudge::idle`]). A call that
//! ends first cancels the timer and the control thread never ran for it; what arrived on
//! stdin meanwhile is read by the loop after the call, as if it had arrived then. A call
//! still running when the timer fires is served as above from then on, and its end
//! nudges the control thread (`serving`). So a control message waits at most
//! [`SERVE_AFTER`] longer than before, and a cancel or EOF reaches a call that lasts
//! within it.
//!
//! Why not `poll(2)` on stdin inside the executors: the blocking calls live inside
//! libraries (ureq's reads, libssh2, the approver child), so a poll there is not
//! reachable everywhere; a control thread keeps the executors as they are.
//!
//! Backpressure: during a call the frames queued for later are bounded to
//! [`QUEUE_BYTES`] (or one frame, if larger); past that the control thread stops reading
//! stdin until the call ends. Control messages behind that point then wait too. Between
//! calls nothing is read ahead of the loop but the 64 KiB of the stdin buffer.

use std::collections::VecDeque;
use std::io::{BufRead, Write};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc::{Receiver, Sender};
use std::sync::{Mutex, MutexGuard, PoisonError, TryLockError};
use std::thread::{Scope, ScopedJoinHandle};

use serde_json::Value;

use crate::gate::exec::Cancel;
use crate::mcp::frame::{Frame, FrameError, FrameReader, Read};
use crate::mcp::jsonrpc::Id;
use crate::mcp::model::live::{Listing, RawListAnswer};
use crate::mcp::model::{Notification, Outbound, Request};
use crate::mcp::out::ProtocolWriter;
use crate::mcp::session::Session;
use crate::signals::Nudge;

mod classify;
use classify::{awaited, cancel_queued, classify, Control};

/// Bytes of frames a running call's control thread queues for later before it stops
/// reading stdin: each frame is charged its length plus [`FRAME_OVERHEAD`], so many small
/// lines cost what they take in memory (16 MiB of 100-byte lines held 36 MiB).
/// 256 KiB is some 900 queued calls of a typical size. A longer line still passes alone.
pub(crate) const QUEUE_BYTES: usize = 256 * 1024;

/// What a queued frame costs beyond its text: the event, the string's spare capacity,
/// the queue's slot.
pub(crate) const FRAME_OVERHEAD: usize = 192;

pub(crate) enum Event {
    /// A frame, or the framing error that ended reading (with the bytes read for it).
    /// `id`: a request's id, known for the frames a control thread queued (they are in
    /// flight until the loop takes them).
    Frame { frame: Result<Frame, FrameError>, raw: Vec<u8>, bytes: usize, id: Option<Id> },
    /// A request whose id was in flight when it arrived (the running call's, or a queued
    /// request's): refused (-32600, `id: null`) in turn, never run.
    IdInFlight { frame: Frame, bytes: usize, id: Id },
    /// A `tools/call` that was cancelled while it waited in the queue: never run.
    CancelledQueued { frame: Frame, bytes: usize },
    /// stdin reached its end.
    Eof,
    /// A policy reload was asked (SIGHUP, a watched file changed: `signals::Reload`)
    /// while the loop waited for stdin: it reloads, then reads on (`server/reload.rs`).
    Reload,
}

/// How a running call writes its progress notifications (none once it is cancelled),
/// and asks the client (an `elicitation/create` for approval).
pub(crate) struct Notes<'a> {
    sink: &'a (dyn Fn(&Outbound) + Sync),
    /// Sets (or clears) the one response the control thread waits for.
    awaiting: &'a (dyn Fn(Option<(Id, Sender<Value>)>) + Sync),
    next_id: &'a AtomicU64,
}

/// A request sp sent to the client during a call, waiting for its response.
pub(crate) struct Pending {
    pub id: Id,
    /// The client's whole response (`result` or `error`), checked by
    /// `jsonrpc::response_to`.
    pub response: Receiver<Value>,
}

impl Notes<'_> {
    /// Writes a notification (progress, a cancel of sp's own request) unless the call
    /// is cancelled by then.
    pub(crate) fn note(&self, note: Notification) {
        (self.sink)(&Outbound::Notification(note));
    }

    /// Sends the request `make(id)` to the client with a fresh id (`sp-N`) and has the
    /// control thread hand its response over. Only that id's response is taken, while
    /// it is awaited ([`Notes::forget`]); any other response read meanwhile stays
    /// malformed input (`jsonrpc.rs`) and closes the session after the call.
    pub(crate) fn request(&self, make: impl FnOnce(Value) -> Request) -> Pending {
        let id = Id::Str(format!("sp-{}", self.next_id.fetch_add(1, Ordering::SeqCst) + 1));
        let (tx, rx) = std::sync::mpsc::channel();
        (self.awaiting)(Some((id.clone(), tx)));
        (self.sink)(&Outbound::Request(make(id.to_value())));
        Pending { id, response: rx }
    }

    /// Stops waiting for a response: a late one is malformed input.
    pub(crate) fn forget(&self) {
        (self.awaiting)(None);
    }
}

/// How long a call runs before the control thread starts serving stdin (module docs,
/// "Woken only for a call that lasts"): the most a control message waits for a call
/// that has not ended by then. Long enough for what most calls wait for to end first
/// (a loopback or LAN request, the intent row's `fdatasync`, 1-5 ms on a VM's disk,
/// a command on a kept SSH session): at 1 ms, a tenth of the proxied calls of
/// `examples/bench_cpu.rs` and most journaled ones woke the control thread (22 -> 36 µs
/// and 125 -> 240 µs of sp's CPU per call); short enough that no client notices.
pub(crate) const SERVE_AFTER: std::time::Duration = std::time::Duration::from_millis(10);

/// What the loop and the control thread share: the writer, the reader with the session
/// state, and the flags that say whether a call runs (module docs).
pub(crate) struct Link<'o, W: Write> {
    out: Mutex<Out<'o, W>>,
    state: Mutex<State>,
    /// A call runs: the control thread serves stdin. Set after `State::call`, cleared
    /// before it is taken back.
    active: AtomicBool,
    /// The session is over: the control thread ends.
    shutdown: AtomicBool,
    /// The control thread serves the running call (it saw `active`): the call's end
    /// must wake it. Clear while it waits for a call's timer.
    serving: AtomicBool,
    /// What wakes the control thread from its wait for stdin; `None` only for input
    /// that never blocks.
    nudge: Option<Nudge>,
    /// EOF during a call cancels it (`Options::cancel_on_eof`); else it is queued.
    cancel_on_eof: bool,
    /// The `tools/list` the control thread answers (the loop hands it in: the wire
    /// knows no tool; a reload hands in another). A live list not made yet waits behind
    /// the call.
    tools: Mutex<Listing>,
    /// A reload asked while the loop waits for stdin ends the wait ([`Event::Reload`]).
    reload: Option<crate::signals::Reload>,
    /// The last id of a request sp sent to the client (`Notes::request`).
    next_id: AtomicU64,
}

struct Out<'o, W: Write> {
    writer: &'o mut ProtocolWriter<W>,
    /// Writing to the client failed while a call ran: the call was cancelled.
    gone: bool,
}

/// The reader and the session state: the loop's between calls, the control thread's
/// for each step of its own during one.
struct State {
    reader: Reader,
    /// The session state while a call runs (the loop's own between calls).
    session: Session,
    /// The running call, while one runs.
    call: Option<Running>,
}

/// The call the control thread watches, and what it saw meanwhile.
struct Running {
    id: Id,
    cancel: Cancel,
    /// stdin ended while the call ran.
    eof: bool,
    /// The client cancelled the call with `notifications/cancelled`.
    requested: bool,
    /// The response the call waits for: sp's request id, and where it goes.
    awaiting: Option<(Id, Sender<Value>)>,
}

/// stdin's frames, and those a control thread queued for the loop.
struct Reader {
    frames: FrameReader<Box<dyn BufRead + Send>>,
    queue: VecDeque<Event>,
    /// What the queued frames are charged ([`FRAME_OVERHEAD`]).
    queued: usize,
    /// End of input or a framing error was read: nothing more is.
    ended: bool,
}

impl Reader {
    /// One read of stdin as an event (the frame itself, its framing error with the bytes
    /// read for it, or the end); `None` when the source would have had to wait.
    fn read(&mut self) -> Option<Event> {
        match self.frames.read() {
            Read::Parked => None,
            Read::Frame(Ok(frame)) => Some(Event::Frame { frame: Ok(frame), raw: Vec::new(), bytes: 0, id: None }),
            Read::Frame(Err(e)) => {
                self.ended = true;
                Some(Event::Frame { frame: Err(e), raw: self.frames.raw().to_vec(), bytes: 0, id: None })
            }
            Read::Eof => {
                self.ended = true;
                Some(Event::Eof)
            }
        }
    }

    /// May the control thread read stdin now?
    fn open(&self) -> bool {
        !self.ended && self.queued < QUEUE_BYTES
    }
}

fn locked<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // A panicking control thread is re-raised on the loop's thread (`Input::during`);
    // the state it leaves is still one of the states above.
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

impl<'o, W: Write + Send> Link<'o, W> {
    /// `nudge`: what wakes a control thread waiting for `input` (module docs); `None` only
    /// for input that never blocks. `tools`: the `tools/list` answered during a call.
    pub(crate) fn new(
        input: Box<dyn BufRead + Send>,
        out: &'o mut ProtocolWriter<W>,
        nudge: Option<Nudge>,
        max_line_bytes: usize,
        cancel_on_eof: bool,
        tools: Listing,
    ) -> Link<'o, W> {
        let reader = Reader { frames: FrameReader::new(input, max_line_bytes), queue: VecDeque::new(), queued: 0, ended: false };
        Link {
            out: Mutex::new(Out { writer: out, gone: false }),
            state: Mutex::new(State { reader, session: Session::AwaitingInit, call: None }),
            active: AtomicBool::new(false),
            shutdown: AtomicBool::new(false),
            serving: AtomicBool::new(false),
            nudge,
            cancel_on_eof,
            tools: Mutex::new(tools),
            reload: None,
            next_id: AtomicU64::new(0),
        }
    }

    /// A reload asked while the loop waits for stdin (`signals::Reload`, whose stdin
    /// returns `WouldBlock` then) is [`Event::Reload`].
    pub(crate) fn with_reload(mut self, reload: Option<crate::signals::Reload>) -> Self {
        self.reload = reload;
        self
    }

    /// The `tools/list` answered during a call now (a copy: a reload may swap it).
    fn listing(&self) -> Listing {
        locked(&self.tools).clone()
    }

    /// Writes for the control thread or a running call: a failure cancels the call, and
    /// nothing more is written for it.
    fn send_for_call(&self, cancel: &Cancel, send: impl FnOnce(&mut ProtocolWriter<W>) -> std::io::Result<()>) {
        let mut out = locked(&self.out);
        if !out.gone && send(out.writer).is_err() {
            log::warn!("writing to the client failed while a call ran: cancelling it");
            out.gone = true;
            cancel.cancel();
        }
    }

    /// At a call's start: the control thread serves stdin from [`SERVE_AFTER`] on, or
    /// at once without a timer (or a nudge).
    fn call_started(&self, control: Option<&std::thread::Thread>) {
        match &self.nudge {
            Some(n) if control.is_some() => {
                if !n.arm(SERVE_AFTER) {
                    n.nudge();
                }
            }
            _ => {
                if let Some(t) = control {
                    t.unpark();
                }
            }
        }
    }

    /// At a call's end (after `active` is cleared): the control thread, if it serves
    /// the call, is woken to stop; if not, the timer that would have woken it is
    /// cancelled. (`serving` is set before the control thread reads `active`, and
    /// `active` cleared before this reads `serving`: one of them sees the other.)
    fn call_ended(&self, control: Option<&std::thread::Thread>) {
        match &self.nudge {
            Some(n) if !self.serving.load(Ordering::SeqCst) => n.disarm(),
            _ => self.wake(control),
        }
    }

    /// Wakes the control thread wherever it waits (its `poll(2)`, or parked).
    fn wake(&self, control: Option<&std::thread::Thread>) {
        if let Some(n) = &self.nudge {
            n.nudge();
        }
        if let Some(t) = control {
            t.unpark();
        }
    }
}

/// The loop's side of a [`Link`]: reads between calls, writes, and runs calls with the
/// control thread (started at the first one) serving stdin meanwhile.
pub(crate) struct Input<'s, 'e, 'o, W: Write + Send> {
    link: &'e Link<'o, W>,
    scope: &'s Scope<'s, 'e>,
    control: Option<ScopedJoinHandle<'s, ()>>,
    /// stdin ended while a call ran: the loop ends after it.
    pub eof: bool,
    /// Writing to the client failed while a call ran.
    pub gone: bool,
    /// The last call was cancelled by `notifications/cancelled` (not by EOF): nothing
    /// more may be sent for it.
    pub cancel_requested: bool,
}

impl<'s, 'e, 'o, W: Write + Send> Input<'s, 'e, 'o, W> {
    /// Serves `link` within `scope`. Dropping the `Input` ends the control thread, so the
    /// scope, which joins it, can end (`Server::serve`).
    pub(crate) fn new(link: &'e Link<'o, W>, scope: &'s Scope<'s, 'e>) -> Self {
        Input { link, scope, control: None, eof: false, gone: false, cancel_requested: false }
    }

    /// Writes with the protocol writer (between calls, or a call's final answer).
    pub(crate) fn write<T>(&self, f: impl FnOnce(&mut ProtocolWriter<W>) -> T) -> T {
        f(locked(&self.link.out).writer)
    }

    /// What the control thread answers `tools/list` with from now on (after a reload).
    pub(crate) fn set_listing(&self, tools: Listing) {
        *locked(&self.link.tools) = tools;
    }

    /// The next event: the queue first, then stdin, read here, on the loop's thread.
    pub(crate) fn next_event(&mut self) -> Event {
        let mut state = locked(&self.link.state);
        let r = &mut state.reader;
        if let Some(event) = r.queue.pop_front() {
            if let Event::Frame { bytes, .. } | Event::CancelledQueued { bytes, .. } | Event::IdInFlight { bytes, .. } = &event {
                r.queued = r.queued.saturating_sub(*bytes);
            }
            return event;
        }
        if r.ended {
            return Event::Eof;
        }
        loop {
            if let Some(event) = r.read() {
                return event;
            }
            if self.link.reload.as_ref().is_some_and(crate::signals::Reload::pending) {
                return Event::Reload;
            }
        }
    }

    /// Runs `work` (the blocking part of the call `running`) on this thread while the
    /// control thread serves the client (module docs). Returns what `work` returned and
    /// the session back; `notes` writes progress notifications.
    pub(crate) fn during<T>(&mut self, session: Session, running: &Id, cancel: &Cancel, work: impl FnOnce(&Notes) -> T) -> (T, Session) {
        let link = self.link;
        {
            let mut state = locked(&link.state);
            state.session = session;
            state.call = Some(Running { id: running.clone(), cancel: cancel.clone(), eof: false, requested: false, awaiting: None });
        }
        let control = self.control();
        link.active.store(true, Ordering::SeqCst);
        // Over even if `work` panics, so the control thread parks and the scope can end.
        struct Over<'a, 'o, W: Write + Send>(&'a Link<'o, W>, Option<&'a std::thread::Thread>);
        impl<W: Write + Send> Drop for Over<'_, '_, W> {
            fn drop(&mut self) {
                self.0.active.store(false, Ordering::SeqCst);
                self.0.call_ended(self.1);
            }
        }
        let over = Over(link, control.as_ref());
        link.call_started(control.as_ref());
        let sink = |note: &Outbound| {
            if !cancel.is_cancelled() {
                link.send_for_call(cancel, |w| w.send(note));
            }
        };
        let awaiting = |a: Option<(Id, Sender<Value>)>| {
            if let Some(call) = locked(&link.state).call.as_mut() {
                call.awaiting = a;
            }
        };
        let result = work(&Notes { sink: &sink, awaiting: &awaiting, next_id: &link.next_id });
        drop(over);
        let (call, session) = {
            let mut state = locked(&link.state);
            (state.call.take(), std::mem::replace(&mut state.session, Session::AwaitingInit))
        };
        if let Some(c) = &call {
            self.eof |= c.eof;
        }
        self.cancel_requested = call.is_some_and(|c| c.requested);
        self.gone |= locked(&link.out).gone;
        // A control thread that panicked: re-raised here, as the call's own panic would be.
        if self.control.as_ref().is_some_and(|h| h.is_finished())
            && let Some(Err(panic)) = self.control.take().map(ScopedJoinHandle::join)
        {
            std::panic::resume_unwind(panic);
        }
        (result, session)
    }

    /// The control thread, started at the first call; `None` if it cannot be (the call
    /// then runs without one, deaf to stdin until it ends, rather than not at all).
    fn control(&mut self) -> Option<std::thread::Thread> {
        if self.control.is_none() {
            let link = self.link;
            let spawned = std::thread::Builder::new().name("sp-control".into()).spawn_scoped(self.scope, move || control(link));
            match spawned {
                Ok(h) => self.control = Some(h),
                Err(e) => log::error!("cannot start the control thread ({e}); this call runs without it"),
            }
        }
        self.control.as_ref().map(|h| h.thread().clone())
    }
}

impl<W: Write + Send> Drop for Input<'_, '_, '_, W> {
    /// Ends the control thread (the session is over, or the loop panicked): the scope
    /// joins it.
    fn drop(&mut self) {
        self.link.shutdown.store(true, Ordering::SeqCst);
        self.link.wake(self.control.as_ref().map(ScopedJoinHandle::thread));
    }
}

/// The raw bytes of a well-formed frame (for a journal fingerprint).
pub(crate) fn raw_of(frame: &Frame) -> Vec<u8> {
    let mut raw = frame.text.clone().into_bytes();
    if frame.raw_len > raw.len() {
        raw.push(b'\r');
    }
    raw
}

/// The control thread: parked between calls; during one, a step under the state's lock
/// that never blocks, then a wait for stdin (or the nudge) holding nothing.
fn control<W: Write + Send>(link: &Link<'_, W>) {
    loop {
        if link.shutdown.load(Ordering::SeqCst) {
            return;
        }
        if !link.active.load(Ordering::SeqCst) {
            link.serving.store(false, Ordering::SeqCst);
            match &link.nudge {
                Some(n) => n.idle(),
                None => std::thread::park(),
            }
            continue;
        }
        link.serving.store(true, Ordering::SeqCst);
        if !link.active.load(Ordering::SeqCst) {
            continue;
        }
        let mut state = match link.state.try_lock() {
            Ok(s) => s,
            Err(TryLockError::Poisoned(p)) => p.into_inner(),
            // The loop has the state: the call is over (or ending) unless it says otherwise.
            Err(TryLockError::WouldBlock) if !link.active.load(Ordering::SeqCst) => continue,
            Err(TryLockError::WouldBlock) => locked(&link.state),
        };
        let State { reader, session, call } = &mut *state;
        let Some(call) = call.as_mut() else { continue };
        step(link, reader, session, call);
        let open = reader.open();
        drop(state);
        if !link.active.load(Ordering::SeqCst) {
            continue;
        }
        match &link.nudge {
            Some(n) => n.wait(open),
            None if open => {} // input that never blocks: read on
            None => std::thread::park(),
        }
    }
}

/// Everything the control thread can do now without waiting: the frames already read,
/// then what stdin has, until it would wait, ends, or the queue is full.
fn step<W: Write + Send>(link: &Link<'_, W>, reader: &mut Reader, session: &mut Session, call: &mut Running) {
    while reader.open() {
        let read = match &link.nudge {
            Some(n) => n.no_wait(|| reader.read()),
            None => reader.read(),
        };
        match read {
            None => return,
            Some(Event::Eof) if link.cancel_on_eof => {
                log::info!("stdin closed while a call ran: cancelling it");
                call.eof = true;
                call.cancel.cancel();
            }
            // The response to sp's own request, while it waits: handed over, never queued.
            Some(Event::Frame { frame: Ok(frame), .. }) if awaited(call, &frame) => {}
            // The listing copied out first: the lock is not held while writing.
            Some(Event::Frame { frame: Ok(frame), .. }) => match classify(session, &frame, &call.id, &reader.queue, &link.listing(), link.reload.is_some()) {
                Control::Answer(v) => link.send_for_call(&call.cancel, |w| w.send(&v)),
                Control::List(id, era) => match link.listing() {
                    Listing::Fixed(list) => link.send_for_call(&call.cancel, |w| w.send(&list.answer(id.to_value(), era))),
                    Listing::Live(live) => match live.get(era) {
                        Some(result) => link.send_for_call(&call.cancel, |w| w.send(&RawListAnswer { id: id.to_value(), result })),
                        // Not listed since the last change: listing may start upstreams,
                        // which only the loop does, after the call (`sp(1)`).
                        None => {
                            let bytes = frame.raw_len + 1 + FRAME_OVERHEAD;
                            reader.queued += bytes;
                            reader.queue.push_back(Event::Frame { frame: Ok(frame), raw: Vec::new(), bytes, id: Some(id) });
                        }
                    },
                },
                Control::CancelRunning => {
                    log::info!("the client cancelled the running call {}", call.id.to_value());
                    call.requested = true;
                    call.cancel.cancel();
                }
                Control::CancelQueued(target) => cancel_queued(&mut reader.queue, &target),
                Control::Queue { id } => {
                    let bytes = frame.raw_len + 1 + FRAME_OVERHEAD;
                    reader.queued += bytes;
                    reader.queue.push_back(Event::Frame { frame: Ok(frame), raw: Vec::new(), bytes, id });
                }
                Control::InFlight(id) => {
                    log::info!("request id {} is already in flight: refused", id.to_value());
                    let bytes = frame.raw_len + 1 + FRAME_OVERHEAD;
                    reader.queued += bytes;
                    reader.queue.push_back(Event::IdInFlight { frame, bytes, id });
                }
            },
            // The end (when it does not cancel) and a framing error wait in turn.
            Some(other) => reader.queue.push_back(other),
        }
    }
}

#[cfg(test)]
mod tests;
