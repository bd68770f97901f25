use super::*;
use serde_json::json;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use crate::mcp::model::ToolList;

/// A tool list for the wire's own tests (the tool table is above the wire).
static TOOLS: ToolList = ToolList::new(|| json!([{"name": "a_tool"}]));
/// (A function, not a `const`: Rust 1.88 refuses a `const` holding a reference to a
/// `static` with interior mutability.)
fn fixed() -> Listing {
    Listing::Fixed(&TOOLS)
}

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
    let mut out = ProtocolWriter::new(Vec::new());
    let link = Link::new(Box::new(source), &mut out, None, 1 << 20, false, fixed());
    let (running, cancel) = (Id::Int(-1), Cancel::new());
    let session = Session::Ready { version: "2025-06-18" };
    let mut next = 0;
    std::thread::scope(|scope| {
        let mut input = Input::new(&link, scope);
        let ((), _) = input.during(session, &running, &cancel, |_| {
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
        let queued = locked(&link.state).reader.queued;
        assert!((QUEUE_BYTES..QUEUE_BYTES + 4096).contains(&queued), "{queued}");
        // After the call everything arrives, queued first, each frame once, in order.
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
    });
    assert_eq!(next, 2 * 1024 * 1024 / 90);
    assert_eq!(locked(&link.state).reader.queued, 0);
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
    let answer = |session: &mut Session, text: &str| match classify(session, &frame(text), &running, &VecDeque::new(), &fixed(), false) {
        Control::Answer(v) => serde_json::to_value(v).ok(),
        Control::List(id, era) => serde_json::to_value(TOOLS.answer(id.to_value(), era)).ok(),
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
        assert!(matches!(classify(&mut session, &frame(queued), &running, &VecDeque::new(), &fixed(), false), Control::Queue { .. }), "{queued}");
    }
    let cancel = |id: &str| format!(r#"{{"jsonrpc":"2.0","method":"notifications/cancelled","params":{{"requestId":{id}}}}}"#);
    assert!(matches!(classify(&mut session, &frame(&cancel("7")), &running, &VecDeque::new(), &fixed(), false), Control::CancelRunning));
    assert!(matches!(classify(&mut session, &frame(&cancel("\"7\"")), &running, &VecDeque::new(), &fixed(), false), Control::CancelQueued(_)));
    // Before the handshake a ping is refused: queued, answered in turn.
    let mut fresh = Session::AwaitingInit;
    let pinged = classify(&mut fresh, &frame(r#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#), &running, &VecDeque::new(), &fixed(), false);
    assert!(matches!(pinged, Control::Queue { .. } | Control::Answer(_)));
}

#[test]
fn a_request_reusing_an_id_in_flight_is_refused_whatever_its_method() {
    let mut session = Session::Ready { version: "2025-06-18" };
    let running = Id::Int(7);
    let queued = |id: &str| {
        let text = format!(r#"{{"jsonrpc":"2.0","id":{id},"method":"tools/call","params":{{"name":"sp_inventory","arguments":{{}}}}}}"#);
        match classify(&mut Session::Ready { version: "2025-06-18" }, &frame(&text), &running, &VecDeque::new(), &fixed(), false) {
            Control::Queue { id } => Event::Frame { frame: Ok(frame(&text)), raw: Vec::new(), bytes: 0, id },
            _ => panic!("{text}"),
        }
    };
    let queue: VecDeque<Event> = [queued("8"), queued(r#""9""#)].into_iter().collect();
    let mut verdict = |text: &str| match classify(&mut session, &frame(text), &running, &queue, &fixed(), false) {
        Control::InFlight(id) => Some(id),
        _ => None,
    };
    for (text, want) in [
        // The running call's id, any method (a ping is not answered for it).
        (r#"{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"sp_inventory","arguments":{}}}"#, Some(Id::Int(7))),
        (r#"{"jsonrpc":"2.0","id":7,"method":"ping"}"#, Some(Id::Int(7))),
        (r#"{"jsonrpc":"2.0","id":7,"method":"tools/list"}"#, Some(Id::Int(7))),
        (r#"{"jsonrpc":"2.0","id":7,"method":"nope"}"#, Some(Id::Int(7))),
        // A queued request's id.
        (r#"{"jsonrpc":"2.0","id":8,"method":"ping"}"#, Some(Id::Int(8))),
        (r#"{"jsonrpc":"2.0","id":"9","method":"tools/list"}"#, Some(Id::Str("9".into()))),
        // Other ids: "7" is not 7, 9 is not "9"; notifications have none.
        (r#"{"jsonrpc":"2.0","id":"7","method":"ping"}"#, None),
        (r#"{"jsonrpc":"2.0","id":9,"method":"ping"}"#, None),
        (r#"{"jsonrpc":"2.0","id":"8","method":"ping"}"#, None),
        (r#"{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":7}}"#, None),
    ] {
        assert_eq!(verdict(text), want, "{text}");
    }
    // A request taken off the queue (or cancelled there) is no longer in flight
    // through the queue.
    let mut rest: VecDeque<Event> = [queued("8")].into_iter().collect();
    cancel_queued(&mut rest, &json!(8));
    assert!(matches!(classify(&mut session, &frame(r#"{"jsonrpc":"2.0","id":8,"method":"ping"}"#), &running, &rest, &fixed(), false), Control::Answer(_)));
}

#[test]
fn a_cancelled_queued_call_is_marked_and_nothing_else() {
    let call = |id: i64| {
        let text = format!(r#"{{"jsonrpc":"2.0","id":{id},"method":"tools/call","params":{{"name":"sp_inventory","arguments":{{}}}}}}"#);
        Event::Frame { frame: Ok(frame(&text)), raw: Vec::new(), bytes: text.len() + 1, id: Some(Id::Int(id)) }
    };
    let mut queue: VecDeque<Event> = [call(1), call(2)].into_iter().collect();
    cancel_queued(&mut queue, &json!(9));
    cancel_queued(&mut queue, &json!(2));
    assert!(matches!(queue[0], Event::Frame { .. }));
    assert!(matches!(&queue[1], Event::CancelledQueued { frame, bytes } if frame.text.contains("\"id\":2") && *bytes > 0));
}
