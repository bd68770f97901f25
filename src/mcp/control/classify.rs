//! What the control thread does with one well-formed frame read during a call
//! ([`classify`]): answer it, cancel, hand a response to the waiting call ([`awaited`]),
//! or queue it for the loop (module docs of `control`).

use std::collections::VecDeque;

use serde_json::Value;

use super::{Event, Running};
use crate::mcp::frame::Frame;
use crate::mcp::jsonrpc::{self, Id, Message};
use crate::mcp::model::live::Listing;
use crate::mcp::model::{Answer, Response};
use crate::mcp::session::{Offer, Session, Step};

/// Whether `frame` is the response the call waits for; if so it is handed over and no
/// longer awaited.
pub(super) fn awaited(call: &mut Running, frame: &Frame) -> bool {
    let Some((id, _)) = &call.awaiting else { return false };
    let Some(response) = jsonrpc::response_to(&frame.text, id) else { return false };
    if let Some((_, tx)) = call.awaiting.take() {
        let _ = tx.send(response);
    }
    true
}

pub(super) enum Control {
    Answer(Response),
    /// `tools/list` (to this id, in this era): written like the loop writes it
    /// (`model::ListAnswer`), or queued when a live list is not made yet.
    List(Id, crate::mcp::session::Era),
    CancelRunning,
    CancelQueued(Value),
    /// For the loop, in turn; `id`: a request's id (it is in flight from now on).
    Queue {
        id: Option<Id>,
    },
    /// A request reusing an id in flight.
    InFlight(Id),
}

/// What the control thread does with a well-formed frame; anything not a control
/// message, or refused, is queued untouched. A request whose id is in flight (the
/// running call's, or that of a request in `queue`) is refused whatever its method, so
/// that a cancel or an answer can never reach the wrong request (`sp(1)` SESSION POLICY).
/// `reloads`: a policy reload can change the tools (`listChanged`, as the loop offers it).
pub(super) fn classify(session: &mut Session, frame: &Frame, running: &Id, queue: &VecDeque<Event>, tools: &Listing, reloads: bool) -> Control {
    let Ok(value) = crate::json::parse(&frame.text) else { return Control::Queue { id: None } };
    let Ok(message) = jsonrpc::classify(value) else { return Control::Queue { id: None } };
    if let Message::Request { id, .. } = &message
        && (id == running || queue.iter().any(|e| matches!(e, Event::Frame { id: Some(queued), .. } if queued == id)))
    {
        return Control::InFlight(id.clone());
    }
    match &message {
        Message::Notification { method, params } if method == "notifications/cancelled" => {
            let target = params.as_ref().and_then(|p| p.get("requestId")).cloned().unwrap_or(Value::Null);
            if target == running.to_value() { Control::CancelRunning } else { Control::CancelQueued(target) }
        }
        Message::Request { id, method, .. } if matches!(method.as_str(), "ping" | "tools/list" | "server/discover") => {
            let (next, step) = session.clone().handle_offering(&message, Offer { list_changed: tools.changes() || reloads, ..Offer::default() });
            let control = match step {
                Step::Reply(result, era) => Control::Answer(Response::new(id.to_value(), Answer::Result(result), era)),
                Step::ListTools(era) => Control::List(id.clone(), era),
                _ => return Control::Queue { id: Some(id.clone()) },
            };
            *session = next;
            control
        }
        Message::Request { id, .. } => Control::Queue { id: Some(id.clone()) },
        Message::Notification { .. } => Control::Queue { id: None },
    }
}

/// A queued `tools/call` with id `target` never runs. Unknown ids are ignored (spec).
pub(super) fn cancel_queued(queue: &mut VecDeque<Event>, target: &Value) {
    for event in queue.iter_mut() {
        let Event::Frame { frame: Ok(frame), bytes, .. } = event else { continue };
        let is_target = crate::json::parse(&frame.text)
            .ok()
            .and_then(|v| jsonrpc::classify(v).ok())
            .is_some_and(|m| matches!(&m, Message::Request { id, method, .. } if method == "tools/call" && id.to_value() == *target));
        if is_target {
            log::info!("the client cancelled the queued call {target}: it will not run");
            let (frame, bytes) = (std::mem::replace(frame, Frame { text: String::new(), raw_len: 0 }), *bytes);
            *event = Event::CancelledQueued { frame, bytes };
            return;
        }
    }
}
