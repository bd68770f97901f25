//! The loop's journal calls (`audit/`): reject, approval and intent before a call runs,
//! the events a running tool emits (`gate::exec::Output`: a redirect hop's intent row,
//! token rows, the result row's facts), and the result row.

use crate::audit::{Context, Journal};
use crate::gate::exec::{Event as RunEvent, Output, Unavailable};
use crate::gate::outcome::{Reason, Rejection, ToolCode};
use crate::policy::Policy;
use crate::tools::{Action, Executor};

use super::Server;

/// The journal as a running tool's event sink: a redirect hop's intent row (durable, or
/// the hop does not run), token rows, and the facts the result row will report.
pub(super) struct Journaling<'a> {
    pub(super) journal: &'a mut Journal,
    pub(super) audit: &'a mut Context,
}

impl Output for Journaling<'_> {
    fn emit(&mut self, event: RunEvent) -> Result<(), Unavailable> {
        match event {
            RunEvent::Intent { target, rule, note } => intent(self.journal, self.audit, Some(target), Some(rule), Some(note)),
            RunEvent::Token(_) if !self.journal.is_on() => Ok(()),
            RunEvent::Token(f) => {
                let row = self.audit.row("token").set("target", f.target).set("credential", f.credential);
                let row = match f.outcome {
                    Ok(secs) => row.set("decision", "ok").set("reason", secs.map_or("no expires_in (300 s assumed)".into(), |s| format!("expires_in {s} s"))),
                    Err((code, message)) => row.set("decision", "error").set("code", code.as_str()).set("reason", message),
                };
                self.journal.record(row);
                Ok(())
            }
            RunEvent::Facts(f) => {
                self.audit.facts = f;
                Ok(())
            }
            RunEvent::Elicitation { .. } if !self.journal.is_on() => Ok(()),
            // `reason` is outside text in part (the upstream's field names): the journal
            // scrubs it (`audit/row.rs`).
            RunEvent::Elicitation { decision, reason } => {
                self.journal.record(self.audit.row("elicitation").set("decision", decision).set("reason", reason));
                Ok(())
            }
        }
    }
}

/// Why a call stops at the gate.
pub(super) enum Halt {
    Refuse(Rejection),
    /// 2026-07-28: answer `input_required` with this `elicitation/create` params.
    Input(serde_json::Value),
}

/// Approval (when the action's kind flags it), then the first intent row. A function of
/// the fields it uses (not a method), so the server's other fields stay lent to the
/// elicitor meanwhile.
pub(super) fn audit_gate(
    policy: &Policy,
    journal: &mut Journal,
    audit: &mut Context,
    action: &Action,
    asking: &mut crate::approve::Asking<'_, '_>,
) -> Result<(), Halt> {
    let facts = action.audit();
    audit.rule = facts.rule;
    audit.credential = facts.credential;
    let ask = action.approval(policy);
    match crate::approve::gate(policy, journal, audit, ask.as_ref(), asking) {
        crate::approve::Gate::Run { intent } => audit.intent = Some(intent),
        crate::approve::Gate::Refuse(r) => return Err(Halt::Refuse(r)),
        crate::approve::Gate::InputRequired(params) => return Err(Halt::Input(params)),
    }
    intent(journal, audit, None, None, None)
        .map_err(|Unavailable(message)| Halt::Refuse(Rejection { reason: Reason::AuditUnavailable, code: ToolCode::Unavailable, message }))?;
    audit.started = Some(std::time::Instant::now());
    Ok(())
}

/// An `intent` row, durable before the effect. `Err` carries the agent's message.
pub(super) fn intent(journal: &mut Journal, audit: &Context, target: Option<String>, rule: Option<String>, note: Option<String>) -> Result<(), Unavailable> {
    // No file and no syslog copy: nothing to build (the row's outside text would be
    // scrubbed for nothing).
    if !journal.is_on() {
        return Ok(());
    }
    let mut row = audit.row("intent").set("decision", audit.intent.unwrap_or("allow")).set("reason", note);
    if let Some(t) = target {
        row = row.set("target", t);
    }
    if let Some(r) = rule {
        row = row.set("rule", r);
    }
    journal.write(row).map(drop).map_err(|e| {
        log::error!("{e}");
        Unavailable(format!("the action was not run: {e}"))
    })
}

/// The longest outside tool name the journal and the session summary keep (the tool
/// name rule's bound, `^[a-zA-Z0-9_-]{1,64}$`).
pub(super) const MAX_TOOL_FIELD: usize = 64;

/// The journal's `tool` (and the session summary's key) for a called name (issue 31).
/// sp's own tool names are kept as they are (no secret may rewrite them). Any other
/// name was chosen outside sp (the agent may call any name under a configured
/// upstream's prefix; an upstream names its own tools): it is scrubbed of every secret
/// this process has read, then kept if it follows the tool name rule, else shown
/// escaped and cut to [`MAX_TOOL_FIELD`] bytes with its length and the SHA-256 of the
/// scrubbed text (`escape::shown`).
pub(super) fn tool_field(name: &str) -> String {
    tool_field_with(name, crate::gate::vault::scrub_journal_text)
}

/// [`tool_field`] with the scrubber given (tests use a Vault of their own: the
/// process-wide one holds every other test's secrets).
pub(super) fn tool_field_with(name: &str, scrub: impl Fn(String) -> crate::gate::scrubbed::Scrubbed<String>) -> String {
    if crate::tools::NAMES.contains(&name) {
        return name.to_owned();
    }
    let scrubbed = scrub(name.to_owned()).into_inner();
    let rule = |s: &str| (1..=MAX_TOOL_FIELD).contains(&s.len()) && s.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-');
    if rule(&scrubbed) {
        return scrubbed;
    }
    crate::escape::shown(&scrubbed, MAX_TOOL_FIELD)
}

// The journal calls. Every row carries `self.audit`: the request's fingerprint, tool,
// target, rule and credential name, as far as the pipeline got.
impl<E: Executor> Server<'_, E> {
    /// A malformed frame: its length and the fingerprint of its raw bytes, never the bytes.
    pub(super) fn audit_raw(&mut self, raw: &[u8]) {
        self.audit = crate::audit::Context { request_fp: Some(crate::audit::raw_fp(raw)), bytes_in: Some(raw.len() as u64), ..Default::default() };
    }

    /// A `reject` row; `reason` is the counter key, so rows and [`Stats`](super::Stats) agree.
    pub(super) fn journal_reject(&mut self, reason: Reason, code: Option<&str>, message: &str) {
        if !self.journal.is_on() {
            return;
        }
        // `reason` is outside text: the journal scrubs it (`audit/row.rs`).
        let row = self.audit.row("reject").set("decision", reason.as_str()).set("code", code.map(str::to_owned)).set("reason", message);
        self.journal.record(row);
    }

    /// The `result` row of an execution (after scrubbing: it reads the error message).
    pub(super) fn journal_result(&mut self, code: Option<ToolCode>, message: Option<String>) {
        let decision = match code {
            None => "ok",
            Some(ToolCode::Cancelled) => "cancelled",
            Some(_) => "error",
        };
        self.journal_result_as(decision, code, message);
    }

    /// A `result` row with the `decision` given (a task that ended without its result
    /// delivered, `tasks.rs`: `abandoned`, `expired`, `upstream_gone`).
    pub(super) fn journal_result_as(&mut self, decision: &str, code: Option<ToolCode>, message: Option<String>) {
        if !self.journal.is_on() {
            return;
        }
        let f = &self.audit.facts;
        // `reason` is outside text: the journal scrubs it (`audit/row.rs`); a successful
        // call that followed redirects says how many.
        let reason = match (code, f.status) {
            (None, Some(_)) if f.redirects > 0 => Some(format!("followed {} redirect(s)", f.redirects)),
            _ => message,
        };
        let row = self
            .audit
            .row("result")
            .set("decision", decision)
            .set("code", code.map(ToolCode::as_str))
            .set("duration_ms", self.audit.elapsed_ms())
            .set("reason", reason)
            .set("status", f.status)
            .set("exit_status", f.exit_status)
            .set("is_error", f.is_error)
            .set("bytes_in", f.bytes_in)
            .set("bytes_out", f.bytes_out)
            .set("truncated", f.truncated)
            .set("host_key_fp", f.host_key_fp.clone())
            .set("sha256", f.sha256.clone());
        let row = match &f.recording {
            None => row,
            Some(r) => row
                .set("recording", r.path.clone())
                .set("recording_sha256", r.sha256.clone())
                .set("recording_bytes", r.sha256.as_ref().map(|_| r.bytes))
                .set("recording_cut", r.cut.then_some(true)),
        };
        self.journal.record(row);
    }
}
