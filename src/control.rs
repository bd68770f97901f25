//! Issue #10: the loop never goes deaf while a call runs.
//!
//! ```text
//!  idle:          stdin ──FrameReader──> the protocol loop (main thread), one frame at a time
//!
//!  during a call: stdin ──FrameReader──> control thread ──> answers ping, tools/list, ...
//!                                              │  queues the rest for the loop
//!                 the call (main thread) ──────┘  progress notes and "done" over a channel,
//!                                                  each with a nudge (signals::Nudge)
//! ```
//!
//! Between calls the loop reads stdin itself: a request is answered by the thread that
//! read it, with no hand-over between threads (issue #12: on a machine whose idle CPUs
//! sleep, waking a second thread per message cost 50-300 us of every round trip).
//!
//! The blocking work of a call (the approver, each HTTP hop, the SSH command) stays on
//! the main thread, inside the executors, unchanged. While it runs, a scoped *control
//! thread* borrows the frame reader and the protocol writer (there is still exactly one
//! reader and one writer at any time: the control thread holds both for the duration of
//! the call and hands them back), and:
//!
//! - answers `ping`, `tools/list` and `server/discover` at once (they need only the
//!   session state, which the control thread holds meanwhile);
//! - on `notifications/cancelled` for the running request fires its [`Cancel`]: the
//!   executor stops (HTTP sockets shut down, the SSH command signalled and its channel
//!   closed, the approver's process group killed) and the call is never answered;
//! - on `notifications/cancelled` for a `tools/call` still queued marks it, so it never
//!   runs (a rejection with reason `cancelled`);
//! - on stdin EOF cancels the call the same way and the loop then ends;
//! - writes the call's progress notifications, none once it is cancelled;
//! - queues everything else in arrival order (another `tools/call`, refused requests,
//!   malformed frames): the loop handles the queue after the call exactly as if it had
//!   arrived then. One action at a time stays the rule.
//!
//! The control thread waits for stdin in `poll(2)` (`signals::StoppableStdin`) together
//! with the nudge: the call's side sends a note or "done" on a channel, then nudges, and
//! the read returns `WouldBlock` ([`Read::Parked`]) with the line read so far kept, so
//! the control thread drains the channel and, once the call is done, ends, giving stdin
//! back mid-line if need be. A source without a nudge must never block (the in-memory
//! input of tests and the fuzz target).
//!
//! Why not `poll(2)` on stdin inside the executors: the blocking calls live inside
//! libraries (ureq's reads, libssh2, the approver child), so a poll there is not
//! reachable everywhere; a control thread keeps the executors as they are and the
//! reader and the writer with one owner at a time.
//!
//! Backpressure: during a call the frames queued for later are bounded to
//! [`QUEUE_BYTES`] (or one frame, if larger); past that the control thread stops reading
//! stdin until the call ends. Control messages behind that point then wait too. Between
//! calls nothing is read ahead of the loop but the 64 KiB of the stdin buffer.

use std::collections::VecDeque;
use std::io::{BufRead, Write};
use std::sync::mpsc::{channel, Receiver, Sender};

use serde_json::Value;

use crate::exec::Cancel;
use crate::frame::{Frame, FrameError, FrameReader, Read};
use crate::jsonrpc::{self, Id, Message};
use crate::out::ProtocolWriter;
use crate::session::{Era, Session, Step};
use crate::signals::Nudge;

/// Bytes of frames a running call's control thread queues for later before it stops
/// reading stdin: each frame is charged its length plus [`FRAME_OVERHEAD`], so many small
/// lines cost what they take in memory (issue #12: 16 MiB of 100-byte lines held 36 MiB).
/// 256 KiB is some 900 queued calls of a typical size. A longer line still passes alone.
pub(crate) const QUEUE_BYTES: usize = 256 * 1024;

/// What a queued frame costs beyond its text: the event, the string's spare capacity,
/// the queue's slot.
pub(crate) const FRAME_OVERHEAD: usize = 192;

pub(crate) enum Event {
    /// A frame, or the framing error that ended reading (with the bytes read for it).
    Frame { frame: Result<Frame, FrameError>, raw: Vec<u8>, bytes: usize },
    /// A `tools/call` that was cancelled while it waited in the queue: never run.
    CancelledQueued { frame: Frame, bytes: usize },
    /// stdin reached its end.
    Eof,
}

/// What the running call tells its control thread.
enum Told {
    /// A progress notification of the running call.
    Note(Value),
    /// The running call's blocking part returned.
    Done,
}

/// How the running call reaches its control thread: the channel, then the nudge that
/// wakes a control thread waiting for stdin.
pub(crate) struct Notes {
    tx: Sender<Told>,
    nudge: Option<Nudge>,
}

impl Notes {
    /// Sends a progress notification (written unless the call is cancelled by then).
    pub(crate) fn note(&self, note: Value) {
        self.tell(Told::Note(note));
    }

    fn tell(&self, told: Told) {
        let _ = self.tx.send(told);
        if let Some(n) = &self.nudge {
            n.nudge();
        }
    }
}

/// The loop's input: the reader (the loop's between calls, a call's control thread's
/// during it), and what a call's outcome left to the loop.
pub(crate) struct Input {
    reader: Reader,
    nudge: Option<Nudge>,
    /// stdin ended while a call ran: the loop ends after it.
    pub eof: bool,
    /// Writing to the client failed while a call ran.
    pub gone: bool,
    /// The last call was cancelled by `notifications/cancelled` (not by EOF): nothing
    /// more may be sent for it.
    pub cancel_requested: bool,
    /// EOF during a call cancels it (`Options::cancel_on_eof`); else it is queued.
    cancel_on_eof: bool,
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
    /// read for it, or the end); `None` when a nudge interrupted it.
    fn read(&mut self) -> Option<Event> {
        match self.frames.read() {
            Read::Parked => None,
            Read::Frame(Ok(frame)) => Some(Event::Frame { frame: Ok(frame), raw: Vec::new(), bytes: 0 }),
            Read::Frame(Err(e)) => {
                self.ended = true;
                Some(Event::Frame { frame: Err(e), raw: self.frames.raw().to_vec(), bytes: 0 })
            }
            Read::Eof => {
                self.ended = true;
                Some(Event::Eof)
            }
        }
    }
}

impl Input {
    /// `nudge`: what interrupts a blocked read of `input` (module docs); `None` only for
    /// input that never blocks.
    pub(crate) fn new(input: Box<dyn BufRead + Send>, nudge: Option<Nudge>, max_line_bytes: usize, cancel_on_eof: bool) -> Input {
        let reader = Reader { frames: FrameReader::new(input, max_line_bytes), queue: VecDeque::new(), queued: 0, ended: false };
        Input { reader, nudge, eof: false, gone: false, cancel_requested: false, cancel_on_eof }
    }

    /// The next event: the queue first, then stdin, read here, on the loop's thread.
    pub(crate) fn next_event(&mut self) -> Event {
        let r = &mut self.reader;
        if let Some(event) = r.queue.pop_front() {
            if let Event::Frame { bytes, .. } | Event::CancelledQueued { bytes, .. } = &event {
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
        }
    }

    /// Runs `work` (the blocking part of the call `running`) on this thread while a
    /// control thread serves the client (module docs). Returns what `work` returned and
    /// the session back; `notes` is for progress notifications.
    pub(crate) fn during<W: Write + Send, T>(
        &mut self,
        out: &mut ProtocolWriter<W>,
        session: Session,
        running: &Id,
        cancel: &Cancel,
        work: impl FnOnce(&Notes) -> T,
    ) -> (T, Session) {
        let (tx, rx) = channel();
        let notes = Notes { tx, nudge: self.nudge.clone() };
        let fallback = session.clone();
        let cancel_on_eof = self.cancel_on_eof;
        let reader = &mut self.reader;
        let (result, (session, eof, gone, requested)) = std::thread::scope(|s| {
            let call = Running { id: running, cancel, cancel_on_eof };
            let spawned = std::thread::Builder::new()
                .name("sp-control".into())
                .spawn_scoped(s, move || control(session, out, &rx, reader, call));
            let control = match spawned {
                Ok(c) => c,
                Err(e) => {
                    // Deaf for this call (as before issue #10) rather than not at all.
                    log::error!("cannot start the control thread ({e}); this call runs without it");
                    return (work(&notes), (fallback, false, false, false));
                }
            };
            // `Done` even if `work` panics, so the control thread ends and the scope joins.
            struct DoneOnDrop<'a>(&'a Notes);
            impl Drop for DoneOnDrop<'_> {
                fn drop(&mut self) {
                    self.0.tell(Told::Done);
                }
            }
            let done = DoneOnDrop(&notes);
            let result = work(&notes);
            drop(done);
            match control.join() {
                Ok(end) => (result, end),
                Err(panic) => std::panic::resume_unwind(panic),
            }
        });
        self.eof |= eof;
        self.gone |= gone;
        self.cancel_requested = requested;
        (result, session)
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

/// The call the control thread watches.
struct Running<'a> {
    id: &'a Id,
    cancel: &'a Cancel,
    cancel_on_eof: bool,
}

/// The control thread's loop; ends on `Done`. Returns the session, whether stdin ended,
/// whether the client went away and whether it cancelled the call.
fn control<W: Write>(
    mut session: Session,
    out: &mut ProtocolWriter<W>,
    rx: &Receiver<Told>,
    reader: &mut Reader,
    call: Running<'_>,
) -> (Session, bool, bool, bool) {
    let Running { id: running, cancel, cancel_on_eof } = call;
    let (mut eof, mut gone, mut requested) = (false, false, false);
    let mut send = |v: &Value, gone: &mut bool| {
        if !*gone && out.send(v).is_err() {
            log::warn!("writing to the client failed while a call ran: cancelling it");
            *gone = true;
            cancel.cancel();
        }
    };
    loop {
        // What the call said first; then stdin, unless reading has to wait for the call.
        let waiting = reader.ended || reader.queued >= QUEUE_BYTES;
        let told = if waiting { rx.recv().ok() } else { rx.try_recv().ok() };
        match told {
            Some(Told::Done) => break,
            Some(Told::Note(note)) => {
                if !cancel.is_cancelled() {
                    send(&note, &mut gone);
                }
                continue;
            }
            None if waiting => break, // the call's side is gone (it cannot be, but end)
            None => {}
        }
        match reader.read() {
            None => {}
            Some(Event::Eof) if cancel_on_eof => {
                log::info!("stdin closed while a call ran: cancelling it");
                eof = true;
                cancel.cancel();
            }
            Some(Event::Frame { frame: Ok(frame), .. }) => match classify(&mut session, &frame, running) {
                Control::Answer(v) => send(&v, &mut gone),
                Control::CancelRunning => {
                    log::info!("the client cancelled the running call {}", running.to_value());
                    requested = true;
                    cancel.cancel();
                }
                Control::CancelQueued(target) => cancel_queued(&mut reader.queue, &target),
                Control::Queue => {
                    let bytes = frame.raw_len + 1 + FRAME_OVERHEAD;
                    reader.queued += bytes;
                    reader.queue.push_back(Event::Frame { frame: Ok(frame), raw: Vec::new(), bytes });
                }
            },
            // The end (when it does not cancel) and a framing error wait in turn.
            Some(other) => reader.queue.push_back(other),
        }
    }
    (session, eof, gone, requested)
}

enum Control {
    Answer(Value),
    CancelRunning,
    CancelQueued(Value),
    Queue,
}

/// What the control thread does with a well-formed frame; anything not a control
/// message, or refused, is queued untouched.
fn classify(session: &mut Session, frame: &Frame, running: &Id) -> Control {
    let Ok(value) = crate::json::parse(&frame.text) else { return Control::Queue };
    let Ok(message) = jsonrpc::classify(value) else { return Control::Queue };
    match &message {
        Message::Notification { method, params } if method == "notifications/cancelled" => {
            let target = params.as_ref().and_then(|p| p.get("requestId")).cloned().unwrap_or(Value::Null);
            if target == running.to_value() {
                Control::CancelRunning
            } else {
                Control::CancelQueued(target)
            }
        }
        Message::Request { id, method, .. } if matches!(method.as_str(), "ping" | "tools/list" | "server/discover") => {
            let (next, step) = session.clone().handle(&message);
            let (result, era) = match step {
                Step::Reply(result, era) => (result, era),
                Step::ListTools(era) => (crate::tools::tool_list(era), era),
                _ => return Control::Queue,
            };
            *session = next;
            let mut response = crate::wire::result_response(id.to_value(), result);
            if era == Era::Stateless {
                crate::wire::stamp_stateless(&mut response);
            }
            Control::Answer(response)
        }
        _ => Control::Queue,
    }
}

/// A queued `tools/call` with id `target` never runs. Unknown ids are ignored (spec).
fn cancel_queued(queue: &mut VecDeque<Event>, target: &Value) {
    for event in queue.iter_mut() {
        let Event::Frame { frame: Ok(frame), bytes, .. } = event else { continue };
        let is_target = crate::json::parse(&frame.text).ok().and_then(|v| jsonrpc::classify(v).ok()).is_some_and(|m| {
            matches!(&m, Message::Request { id, method, .. } if method == "tools/call" && id.to_value() == *target)
        });
        if is_target {
            log::info!("the client cancelled the queued call {target}: it will not run");
            let (frame, bytes) = (std::mem::replace(frame, Frame { text: String::new(), raw_len: 0 }), *bytes);
            *event = Event::CancelledQueued { frame, bytes };
            return;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Arc;

    /// Input that counts what was taken from it.
    struct Counted(std::io::Cursor<Vec<u8>>, Arc<AtomicUsize>);

    impl std::io::Read for Counted {
        fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
            let n = self.0.read(buf)?;
            self.1.fetch_add(n, Ordering::SeqCst);
            Ok(n)
        }
    }

    #[test]
    fn during_a_call_reading_stops_once_the_queue_is_full_and_the_rest_waits_in_order() {
        // 2 MiB of queued-kind requests: the control thread must stop near QUEUE_BYTES.
        let line = |i: usize| format!(r#"{{"jsonrpc":"2.0","id":{i},"method":"tools/call","params":{{"name":"sp_inventory","arguments":{{}}}}}}"#);
        let text: String = (0..2 * 1024 * 1024 / 90).map(|i| line(i) + "\n").collect();
        let total = text.len();
        let taken = Arc::new(AtomicUsize::new(0));
        let source = std::io::BufReader::with_capacity(4096, Counted(std::io::Cursor::new(text.into_bytes()), taken.clone()));
        let mut input = Input::new(Box::new(source), None, 1 << 20, false);
        let mut out = ProtocolWriter::new(Vec::new());
        let (running, cancel) = (Id::Int(-1), Cancel::new());
        let session = Session::Ready { version: "2025-06-18" };
        let ((), _) = input.during(&mut out, session, &running, &cancel, |_| {
            // Wait until the control thread has stopped taking input (it never reaches
            // the end if it stops), then end the call.
            let mut last = usize::MAX;
            loop {
                std::thread::sleep(std::time::Duration::from_millis(20));
                let now = taken.load(Ordering::SeqCst);
                if now == last || now == total {
                    break;
                }
                last = now;
            }
        });
        let read_during = taken.load(Ordering::SeqCst);
        assert!(read_during < total / 2, "read {read_during} of {total} bytes while the call ran");
        assert!(input.reader.queued >= QUEUE_BYTES && input.reader.queued < QUEUE_BYTES + 4096, "{}", input.reader.queued);
        // After the call everything arrives, queued first, each frame once, in order.
        let mut next = 0;
        loop {
            match input.next_event() {
                Event::Frame { frame: Ok(f), .. } => {
                    assert_eq!(f.text, line(next));
                    next += 1;
                }
                Event::Eof => break,
                _ => panic!("unexpected event"),
            }
        }
        assert_eq!(next, 2 * 1024 * 1024 / 90);
        assert_eq!(input.reader.queued, 0);
    }

    #[test]
    fn a_cancel_runs_each_hook_once_and_late_hooks_at_once() {
        let cancel = Cancel::new();
        let runs = Arc::new(AtomicUsize::new(0));
        let r = runs.clone();
        cancel.on_cancel(move || {
            r.fetch_add(1, Ordering::SeqCst);
        });
        assert_eq!((cancel.is_cancelled(), runs.load(Ordering::SeqCst)), (false, 0));
        cancel.clone().cancel();
        cancel.cancel();
        assert_eq!((cancel.is_cancelled(), runs.load(Ordering::SeqCst)), (true, 1));
        let r = runs.clone();
        cancel.on_cancel(move || {
            r.fetch_add(10, Ordering::SeqCst);
        });
        assert_eq!(runs.load(Ordering::SeqCst), 11);
    }

    fn frame(text: &str) -> Frame {
        Frame { text: text.into(), raw_len: text.len() }
    }

    #[test]
    fn only_control_messages_are_answered_during_a_call() {
        let mut session = Session::Ready { version: "2025-06-18" };
        let running = Id::Int(7);
        let answer = |session: &mut Session, text: &str| match classify(session, &frame(text), &running) {
            Control::Answer(v) => Some(v),
            _ => None,
        };
        let pong = answer(&mut session, r#"{"jsonrpc":"2.0","id":"p","method":"ping"}"#).unwrap();
        assert_eq!((pong["id"].as_str(), pong["result"].is_object()), (Some("p"), true), "{pong}");
        let list = answer(&mut session, r#"{"jsonrpc":"2.0","id":1,"method":"tools/list"}"#).unwrap();
        assert!(list["result"]["tools"].is_array(), "{list}");
        for queued in [
            r#"{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"sp_inventory","arguments":{}}}"#,
            r#"{"jsonrpc":"2.0","id":3,"method":"initialize","params":{}}"#,
            r#"{"jsonrpc":"2.0","id":4,"method":"nope"}"#,
            r#"{"jsonrpc":"2.0","id":5,"method":"ping","x":1}"#,
            "not json",
        ] {
            assert!(matches!(classify(&mut session, &frame(queued), &running), Control::Queue), "{queued}");
        }
        let cancel = |id: &str| format!(r#"{{"jsonrpc":"2.0","method":"notifications/cancelled","params":{{"requestId":{id}}}}}"#);
        assert!(matches!(classify(&mut session, &frame(&cancel("7")), &running), Control::CancelRunning));
        assert!(matches!(classify(&mut session, &frame(&cancel("\"7\"")), &running), Control::CancelQueued(_)));
        // Before the handshake a ping is refused: queued, answered in turn.
        let mut fresh = Session::AwaitingInit;
        let pinged = classify(&mut fresh, &frame(r#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#), &running);
        assert!(matches!(pinged, Control::Queue | Control::Answer(_)));
    }

    #[test]
    fn a_cancelled_queued_call_is_marked_and_nothing_else() {
        let call = |id: i64| {
            let text = format!(r#"{{"jsonrpc":"2.0","id":{id},"method":"tools/call","params":{{"name":"sp_inventory","arguments":{{}}}}}}"#);
            Event::Frame { frame: Ok(frame(&text)), raw: Vec::new(), bytes: text.len() + 1 }
        };
        let mut queue: VecDeque<Event> = [call(1), call(2)].into_iter().collect();
        cancel_queued(&mut queue, &json!(9));
        cancel_queued(&mut queue, &json!(2));
        assert!(matches!(queue[0], Event::Frame { .. }));
        assert!(matches!(&queue[1], Event::CancelledQueued { frame, bytes } if frame.text.contains("\"id\":2") && *bytes > 0));
    }
}
