//! Issue #10: the loop never goes deaf while a call runs.
//!
//! ```text
//!  stdin ──> reader thread (FrameReader) ──Event::Frame/Eof──┐
//!                                                             ├──> one channel ──> the protocol loop
//!  running call (main thread): progress ──Event::Note/Done───┘        (main thread; while a call
//!                                                                       runs: the control thread)
//! ```
//!
//! The blocking work of a call (the approver, each HTTP hop, the SSH command) stays on
//! the main thread, inside the executors, unchanged. While it runs, a scoped *control
//! thread* borrows the protocol writer (there is still exactly one writer at any time:
//! the control thread holds it for the duration of the call and hands it back) and the
//! channel, and:
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
//! Why not `poll(2)` on stdin inside the executors: the blocking calls live inside
//! libraries (ureq's reads, libssh2, the approver child), so a poll there is not
//! reachable everywhere; a reader thread plus a control thread keeps the executors as
//! they are and the writer with one owner at a time.
//!
//! Backpressure: frames read but not yet handled are bounded to [`QUEUE_BYTES`] (or one
//! frame, if larger); past that the reader thread stops reading stdin until the loop
//! catches up. Control messages behind that point then wait too.

use std::collections::VecDeque;
use std::io::{BufRead, Write};
use std::sync::mpsc::{channel, Receiver, Sender};
use std::sync::{Arc, Condvar, Mutex};

use serde_json::Value;

use crate::exec::Cancel;
use crate::frame::{Frame, FrameError, FrameReader};
use crate::jsonrpc::{self, Id, Message};
use crate::out::ProtocolWriter;
use crate::session::{Era, Session, Step};

/// Bytes of frames read ahead of the loop before the reader stops reading stdin: each
/// frame is charged its length plus [`FRAME_OVERHEAD`], so many small lines cost what
/// they take in memory (issue #12: 16 MiB of 100-byte lines held 36 MiB). 256 KiB is
/// some 900 queued calls of a typical size, and keeps a session that a client floods
/// with pipelined requests within a few hundred KiB of idle (it was 4 MiB: +3.8 MiB).
/// A longer line still passes alone.
pub(crate) const QUEUE_BYTES: usize = 256 * 1024;

/// What a queued frame costs beyond its text: the event, the string's spare capacity,
/// the channel's slot.
pub(crate) const FRAME_OVERHEAD: usize = 192;

pub(crate) enum Event {
    /// A frame, or the framing error that ended reading (with the bytes read for it).
    Frame { frame: Result<Frame, FrameError>, raw: Vec<u8>, bytes: usize },
    /// A `tools/call` that was cancelled while it waited in the queue: never run.
    CancelledQueued { frame: Frame, bytes: usize },
    /// stdin reached its end.
    Eof,
    /// A progress notification of the running call.
    Note(Value),
    /// The running call's blocking part returned.
    Done,
}

/// Frames in flight (read, not yet handled), in bytes: (bytes, closed, readers waiting).
#[derive(Default)]
struct Inflight {
    state: Mutex<(usize, bool, usize)>,
    cv: Condvar,
}

impl Inflight {
    /// Takes room for a frame of `n` bytes, waiting while the queue is full; `false`
    /// once the loop has ended.
    fn acquire(&self, n: usize) -> bool {
        let mut g = self.state.lock().unwrap_or_else(|p| p.into_inner());
        while g.0 > 0 && g.0 + n > QUEUE_BYTES && !g.1 {
            g.2 += 1;
            g = self.cv.wait(g).unwrap_or_else(|p| p.into_inner());
            g.2 -= 1;
        }
        g.0 += n;
        !g.1
    }

    fn release(&self, n: usize) {
        let mut g = self.state.lock().unwrap_or_else(|p| p.into_inner());
        g.0 = g.0.saturating_sub(n);
        // Only a waiting reader needs waking: a notify is a system call even for nobody.
        if g.2 > 0 {
            self.cv.notify_all();
        }
    }

    fn close(&self) {
        self.state.lock().unwrap_or_else(|p| p.into_inner()).1 = true;
        self.cv.notify_all();
    }
}

/// The loop's input: the reader thread's channel and the frames queued during a call.
pub(crate) struct Input {
    rx: Receiver<Event>,
    tx: Sender<Event>,
    queue: VecDeque<Event>,
    inflight: Arc<Inflight>,
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

impl Input {
    /// Starts the reader thread. It is detached: an exit never waits for a blocked read.
    pub(crate) fn start<R: BufRead + Send + 'static>(input: R, max_line_bytes: usize, cancel_on_eof: bool) -> Input {
        let (tx, rx) = channel();
        let inflight = Arc::new(Inflight::default());
        let (reader_tx, reader_inflight) = (tx.clone(), inflight.clone());
        let spawned = std::thread::Builder::new().name("sp-stdin".into()).spawn(move || {
            let mut frames = FrameReader::new(input, max_line_bytes);
            loop {
                let event = match frames.next_frame() {
                    None => Event::Eof,
                    Some(Ok(frame)) => {
                        let bytes = frame.raw_len + 1 + FRAME_OVERHEAD;
                        if !reader_inflight.acquire(bytes) {
                            return;
                        }
                        Event::Frame { frame: Ok(frame), raw: Vec::new(), bytes }
                    }
                    Some(Err(e)) => Event::Frame { frame: Err(e), raw: frames.raw().to_vec(), bytes: 0 },
                };
                let last = !matches!(event, Event::Frame { frame: Ok(_), .. });
                if reader_tx.send(event).is_err() || last {
                    return;
                }
            }
        });
        if let Err(e) = spawned {
            log::error!("cannot start the stdin reader thread: {e}");
            let _ = tx.send(Event::Frame { frame: Err(FrameError::Io(e.kind())), raw: Vec::new(), bytes: 0 });
        }
        Input { rx, tx, queue: VecDeque::new(), inflight, eof: false, gone: false, cancel_requested: false, cancel_on_eof }
    }

    /// The next event: the queue first, then the channel.
    pub(crate) fn next_event(&mut self) -> Event {
        let event = match self.queue.pop_front() {
            Some(e) => e,
            None => self.rx.recv().unwrap_or(Event::Eof),
        };
        if let Event::Frame { bytes, .. } | Event::CancelledQueued { bytes, .. } = &event {
            self.inflight.release(*bytes);
        }
        event
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
        work: impl FnOnce(&Sender<Event>) -> T,
    ) -> (T, Session) {
        let notes = self.tx.clone();
        let fallback = session.clone();
        let (rx, queue, inflight, cancel_on_eof) = (&mut self.rx, &mut self.queue, &*self.inflight, self.cancel_on_eof);
        let (result, (session, eof, gone, requested)) = std::thread::scope(|s| {
            let call = Running { id: running, cancel, cancel_on_eof };
            let spawned = std::thread::Builder::new()
                .name("sp-control".into())
                .spawn_scoped(s, move || control(session, out, rx, queue, inflight, call));
            let control = match spawned {
                Ok(c) => c,
                Err(e) => {
                    // Deaf for this call (as before issue #10) rather than not at all.
                    log::error!("cannot start the control thread ({e}); this call runs without it");
                    return (work(&notes), (fallback, false, false, false));
                }
            };
            // `Done` even if `work` panics, so the control thread ends and the scope joins.
            struct DoneOnDrop<'a>(&'a Sender<Event>);
            impl Drop for DoneOnDrop<'_> {
                fn drop(&mut self) {
                    let _ = self.0.send(Event::Done);
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

    /// The loop ended: the reader thread must not wait for room any more.
    pub(crate) fn close(&self) {
        self.inflight.close();
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
    rx: &mut Receiver<Event>,
    queue: &mut VecDeque<Event>,
    inflight: &Inflight,
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
    while let Ok(event) = rx.recv() {
        match event {
            Event::Done => break,
            Event::Note(note) => {
                if !cancel.is_cancelled() {
                    send(&note, &mut gone);
                }
            }
            Event::Eof if !cancel_on_eof => queue.push_back(Event::Eof),
            Event::Eof => {
                log::info!("stdin closed while a call ran: cancelling it");
                eof = true;
                cancel.cancel();
            }
            Event::Frame { frame: Ok(frame), raw, bytes } => match classify(&mut session, &frame, running) {
                Control::Answer(v) => {
                    inflight.release(bytes);
                    send(&v, &mut gone);
                }
                Control::CancelRunning => {
                    inflight.release(bytes);
                    log::info!("the client cancelled the running call {}", running.to_value());
                    requested = true;
                    cancel.cancel();
                }
                Control::CancelQueued(target) => {
                    inflight.release(bytes);
                    cancel_queued(queue, &target);
                }
                Control::Queue => queue.push_back(Event::Frame { frame: Ok(frame), raw, bytes }),
            },
            other => queue.push_back(other),
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

    #[test]
    fn the_reader_stops_when_the_queue_is_full_and_resumes_when_it_drains() {
        let inflight = Arc::new(Inflight::default());
        assert!(inflight.acquire(QUEUE_BYTES - 10));
        let (tx, rx) = std::sync::mpsc::channel();
        let reader = inflight.clone();
        std::thread::spawn(move || {
            let _ = tx.send(reader.acquire(100));
        });
        // Evidence that the reader waits: it is counted as waiting.
        while inflight.state.lock().unwrap().2 == 0 {
            std::thread::yield_now();
        }
        assert!(rx.try_recv().is_err());
        inflight.release(QUEUE_BYTES - 10);
        assert_eq!(rx.recv_timeout(std::time::Duration::from_secs(10)), Ok(true));
        // One frame larger than the whole budget still passes when nothing else waits.
        let big = Inflight::default();
        assert!(big.acquire(QUEUE_BYTES * 2));
        big.close();
        assert!(!big.acquire(1), "after the loop ended the reader gives up");
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
