//! The handshake eras' elicitor (`approve/elicit.rs`): sp sends `elicitation/create`
//! while the call waits, and the control thread hands the response to exactly that id
//! over (`mcp/control`, `Notes::request`). A timeout or a cancel stops waiting: a
//! `notifications/cancelled` for sp's request is sent on a timeout, and a response that
//! comes after is malformed input.
//!
//! The same link carries an upstream's `elicitation/create` during its call (issue 33,
//! `tools/upstream/elicit/`): [`Relaying`] is the call's `AskClient`, for the modes the
//! client declared.

use std::sync::mpsc::RecvTimeoutError;
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::approve::elicit::{Elicited, Elicitor};
use crate::gate::exec::{AskClient, Asked, Cancel, ElicitModes, Progress};
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
        let waiting = "waiting for approval from the user (elicitation)";
        match wait(self.notes, params.clone(), deadline, cancel, progress, (waiting, "approval timed out")) {
            Asked::Result(result) => Elicited::Result(result),
            // The client's message is its own text: only the code is kept.
            Asked::Error(code) => Elicited::Error(format!("it answered with error {code}")),
            Asked::TimedOut => Elicited::TimedOut,
            Asked::Cancelled => Elicited::Cancelled,
        }
    }
}

/// Sends `elicitation/create` with `params` and waits for its response (`notes` hands
/// it over) until `deadline` or `cancel`, sending `progress` meanwhile. `texts`: the
/// progress message, the reason of the cancel sent on a timeout.
fn wait(notes: &Notes<'_>, params: Value, deadline: Instant, cancel: &Cancel, progress: &mut Progress<'_>, texts: (&str, &str)) -> Asked {
    let pending = notes.request(|id| Request::elicitation(id, params));
    loop {
        if cancel.is_cancelled() {
            notes.forget();
            return Asked::Cancelled;
        }
        let now = Instant::now();
        if now >= deadline {
            notes.forget();
            // MCP "Cancellation": either side may cancel its own request.
            notes.note(Notification::cancelled(pending.id.to_value(), texts.1));
            return Asked::TimedOut;
        }
        progress.waiting(texts.0);
        match pending.response.recv_timeout(POLL.min(deadline - now)) {
            Ok(response) => {
                return match (response.get("result"), response.get("error")) {
                    (Some(result), _) => Asked::Result(result.clone()),
                    (_, Some(error)) => Asked::Error(error.get("code").and_then(Value::as_i64).unwrap_or(0)),
                    _ => Asked::Error(0),
                };
            }
            Err(RecvTimeoutError::Timeout) => {}
            Err(RecvTimeoutError::Disconnected) => return Asked::Cancelled,
        }
    }
}

/// The client as a running upstream call asks it (issue 33): the modes it declared in
/// a handshake session (none in a 2026-07-28 one, whose stdio carries no request of
/// sp's).
pub(super) struct Relaying<'n, 'a> {
    pub(super) notes: &'n Notes<'a>,
    pub(super) modes: ElicitModes,
}

impl Relaying<'_, '_> {
    /// The modes a session of `version` whose client sent `capabilities` may be asked
    /// in: form as for approvals; url from 2025-11-25, declared as `elicitation.url`.
    pub(super) fn modes(version: Option<&str>, capabilities: Option<&Value>) -> ElicitModes {
        let url = version.is_some_and(|v| v >= "2025-11-25")
            && matches!(capabilities.and_then(|c| c.get("elicitation")).and_then(|e| e.get("url")), Some(Value::Object(_)));
        ElicitModes { form: Live::capable(version, capabilities), url }
    }
}

impl AskClient for Relaying<'_, '_> {
    fn modes(&self) -> ElicitModes {
        self.modes
    }

    fn elicit(&mut self, params: Value, deadline: Instant, cancel: &Cancel) -> Asked {
        // The upstream's progress goes on through its own notes; none from here.
        let waiting = "waiting for the user's answer to an upstream's elicitation";
        wait(self.notes, params, deadline, cancel, &mut Progress::none(), (waiting, "the upstream's call timed out"))
    }
}
