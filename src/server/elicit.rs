//! The handshake eras' elicitor (`approve/elicit.rs`): sp sends `elicitation/create`
//! while the call waits, and the control thread hands the response to exactly that id
//! over (`mcp/control`, `Notes::request`). A timeout or a cancel stops waiting: a
//! `notifications/cancelled` for sp's request is sent on a timeout, and a response that
//! comes after is malformed input.

use std::sync::mpsc::RecvTimeoutError;
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::approve::elicit::{Elicited, Elicitor};
use crate::gate::exec::{Cancel, Progress};
use crate::mcp::control::Notes;
use crate::mcp::model::{Notification, Request};

/// How often the wait looks at the call's cancel and sends progress.
const POLL: Duration = Duration::from_millis(50);

/// The first handshake revision with elicitation.
const FIRST_VERSION: &str = "2025-06-18";

pub(super) struct Live<'n, 'a> {
    pub(super) notes: &'n Notes<'a>,
    /// The session's version has elicitation and the client declared form mode.
    pub(super) capable: bool,
}

impl Live<'_, '_> {
    /// Whether a session of `version` whose client sent `capabilities` can be asked.
    pub(super) fn capable(version: Option<&str>, capabilities: Option<&Value>) -> bool {
        version.is_some_and(|v| v >= FIRST_VERSION) && crate::approve::elicit::declares_form(capabilities)
    }
}

impl Elicitor for Live<'_, '_> {
    fn can_ask(&self) -> bool {
        self.capable
    }

    fn ask(&mut self, params: &Value, deadline: Instant, cancel: &Cancel, progress: &mut Progress<'_>) -> Elicited {
        let pending = self.notes.request(|id| Request::elicitation(id, params.clone()));
        loop {
            if cancel.is_cancelled() {
                self.notes.forget();
                return Elicited::Cancelled;
            }
            let now = Instant::now();
            if now >= deadline {
                self.notes.forget();
                // MCP "Cancellation": either side may cancel its own request.
                self.notes.note(Notification::cancelled(pending.id.to_value(), "approval timed out"));
                return Elicited::TimedOut;
            }
            progress.waiting("waiting for approval from the user (elicitation)");
            match pending.response.recv_timeout(POLL.min(deadline - now)) {
                Ok(response) => {
                    return match (response.get("result"), response.get("error")) {
                        (Some(result), _) => Elicited::Result(result.clone()),
                        // The client's message is its own text: only the code is kept.
                        (_, Some(error)) => Elicited::Error(format!("it answered with error {}", error["code"])),
                        _ => Elicited::Error("an empty response".into()),
                    };
                }
                Err(RecvTimeoutError::Timeout) => {}
                Err(RecvTimeoutError::Disconnected) => return Elicited::Cancelled,
            }
        }
    }
}
