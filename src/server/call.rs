//! A `tools/call` through the pipeline: args -> authorize -> approve, intent -> run
//! (execute, scrub) -> the answer ([`Server::call_tool`]); the approval and the run
//! happen while the control thread serves stdin. Under 2026-07-28 a call that must ask
//! its user first is answered `input_required` ([`Server::input_required`]).

use std::io::Write;

use serde_json::Value;

use super::journal::{self, Halt, Journaling};
use super::{elicit, CallError, Outgoing, RpcError, Server};
use crate::gate::exec::{Cancel, Progress, ProgressReport, RunContext};
use crate::gate::outcome::{Reason, Rejection, ToolCode};
use crate::gate::vault::Scrubbed;
use crate::gate::withhold::{withholds, WITHHELD};
use crate::mcp::control::Input;
use crate::mcp::jsonrpc::Id;
use crate::mcp::model::{Answer, Notification, Response, ToolResult};
use crate::mcp::session::{Era, Session};
use crate::tools::{self, Action, Executor, ToolCall};

impl<E: Executor> Server<'_, E> {
    /// The tool pipeline: args -> authorize -> approve, intent -> run (execute, scrub).
    /// `None`: the client cancelled the call; it gets no answer.
    pub(super) fn call_tool<W: Write + Send>(&mut self, id: &Id, params: Option<Value>, era: Era, io: &mut Input<'_, '_, '_, W>) -> Option<(Outgoing, bool)> {
        let mut request = match tools::call_request_in(&self.policy, params) {
            Ok(r) => r,
            Err(e) => {
                let (response, refused) = self.refuse_rpc(id, RpcError::Call(e));
                return Some((Outgoing::Answer(response), refused));
            }
        };
        // A task (issue 33, section 4, `tasks.rs`): offered in the handshake eras, and
        // only while the session keeps fewer than `tasks::MAX_TASKS` unfinished ones;
        // otherwise the call runs as an ordinary one.
        if era == Era::Stateless || !self.tasks.has_room() {
            request.task = None;
        }
        // What the journal rows and the approver are told (not built for nobody).
        let audited = self.audited();
        if audited {
            // Outside text (any name under an upstream's prefix): scrubbed and bounded.
            self.audit.tool = Some(journal::tool_field(&request.name));
        }
        // An upstream's tool: its upstream listed first (started if needed), so its
        // name table knows whether the tool exists.
        if !tools::is_tool(&request.name) && !self.owner_listed(&request.name) {
            let listed = self.not_deaf(io, id, |s| s.list_owner(&request.name));
            if io.cancel_requested {
                self.reject(Reason::Cancelled);
                self.journal_reject(Reason::Cancelled, Some(ToolCode::Cancelled.as_str()), "cancelled by the client before it ran");
                return None;
            }
            if audited {
                // Starting the upstream read its secrets: the name is scrubbed of them too.
                self.audit.tool = Some(journal::tool_field(&request.name));
            }
            if let Err(r) = listed {
                return Some(self.refuse_tool(id, r));
            }
        }
        if !tools::is_tool(&request.name) {
            let listed = self.executor.upstreams().is_some_and(|u| u.tables().resolve(&request.name).is_some());
            if !listed {
                let (response, refused) = self.refuse_rpc(id, RpcError::Call(CallError::UnknownTool { name: request.name }));
                return Some((Outgoing::Answer(response), refused));
            }
        }
        let parsed = {
            let catalog = tools::Catalog { upstreams: self.executor.upstreams().map(|u| u.tables()) };
            ToolCall::parse_in(&request, catalog)
        };
        let call = match parsed {
            Ok(c) => c,
            Err(e) => return Some(self.refuse_tool(id, Rejection { reason: Reason::BadArguments, code: ToolCode::BadArguments, message: e.to_string() })),
        };
        if audited {
            self.audit.target = call.target();
        }
        let action = match tools::authorize(&self.policy, call) {
            Ok(a) => a,
            Err(d) => return Some(self.refuse_tool(id, Rejection { reason: d.reason(), code: d.code(), message: d.to_string() })),
        };
        // Rate limits (`limits.rs`): after the policy allowed it, before approval, intent, run.
        if let Some(refused) = self.rate_limit(id, &action) {
            return Some(refused);
        }
        // The approval wait and the run go on while the control thread answers pings
        // and watches for a cancel (`mcp/control`).
        let cancel = Cancel::new();
        // Whether this client can be asked through elicitation in the handshake eras.
        let elicits = elicit::Live::capable(self.session.version(), self.client_caps.as_ref());
        // What an upstream's call may relay to this client (issue 33): none in 2026-07-28.
        let modes = match era {
            Era::Handshake => elicit::Relaying::modes(self.session.version(), self.client_caps.as_ref()),
            Era::Stateless => crate::gate::exec::ElicitModes::default(),
        };
        let session = std::mem::replace(&mut self.session, Session::AwaitingInit);
        let token = request.progress_token.clone();
        let (ran, session) = io.during(session, id, &cancel, |notes| self.gated_run(action, token, (era, elicits, modes), &cancel, notes));
        self.session = session;
        self.upstream_aftermath();
        let ran = match ran {
            Err(Halt::Input(params)) => return Some((Outgoing::Message(self.input_required(id, params)), false)),
            Err(Halt::Refuse(r)) => Err(r),
            Ok(done) => Ok(done),
        };
        // After `notifications/cancelled` nothing more is sent for the call, whatever it
        // ended with; after EOF (or a client that went away) a call that was not
        // interrupted is still answered, best effort.
        let requested = io.cancel_requested;
        let ran = match ran {
            Ok((_, tools::Ran::Task(created))) if !requested => return Some((Outgoing::Answer(self.task_created(created)), false)),
            // Cancelled while the upstream created a task: the task is cancelled upstream.
            Ok((tool, tools::Ran::Task(created))) => {
                self.cancel_orphan(&created);
                Ok((tool, ToolResult::error(ToolCode::Cancelled, Scrubbed::own("cancelled by the client"))))
            }
            Ok((tool, tools::Ran::Result(result))) => Ok((tool, result)),
            Err(r) => Err(r),
        };
        let (tool, result) = match ran {
            Err(r) if requested || r.code == ToolCode::Cancelled => {
                log::info!("call cancelled before it ran ({}): {}", r.code, r.message);
                self.reject(r.reason);
                self.journal_reject(r.reason, Some(r.code.as_str()), &r.message);
                return None;
            }
            Err(r) => return Some(self.refuse_tool(id, r)),
            // An executor that saw the cancel says what became of the effect (ssh_exec:
            // what was killed, what may still run); its words go to the journal.
            Ok((tool, result)) if requested && result.code() != Some(ToolCode::Cancelled) => {
                (tool, ToolResult::error(ToolCode::Cancelled, Scrubbed::own("cancelled by the client")))
            }
            Ok(done) => done,
        };
        let code = result.code();
        let outcome = code.map_or("ok", ToolCode::as_str);
        self.stats.executed_one(&journal::tool_field(&tool), outcome);
        // Its outside pieces were scrubbed as they were made (`Scrubbed`); what their JSON
        // text alone spells withholds the whole result (`vault::withholds`).
        let result = if withholds(&self.vault, &result) { ToolResult::error(ToolCode::Upstream, Scrubbed::own(WITHHELD)) } else { result };
        self.journal_result(code, result.message().map(str::to_owned));
        if code == Some(ToolCode::Cancelled) {
            log::info!("{tool} cancelled by the client: no answer is sent");
            return None;
        }
        Some((Outgoing::Answer(Answer::Call(result.into_call())), false))
    }

    /// The answer to a 2026-07-28 call that needs its user's approval first (MRTR,
    /// `approve/elicit.rs`): `input_required` with sp's form and a sealed `requestState`.
    fn input_required(&mut self, id: &Id, params: Value) -> Response {
        let fp = self.audit.request_fp.clone().unwrap_or_default();
        let state = self.state_key.seal(&fp, crate::approve::grants::now(), self.policy.approval.timeout.as_secs());
        log::info!("approval asked of the client: answered input_required");
        Response::input_required(id.to_value(), crate::approve::elicit::INPUT_KEY, params, state)
    }

    /// Approval, intent row, run: the part of a call that may block.
    fn gated_run(
        &mut self,
        action: Action,
        progress_token: Option<Value>,
        (era, elicits, modes): (Era, bool, crate::gate::exec::ElicitModes),
        cancel: &Cancel,
        notes: &crate::mcp::control::Notes<'_>,
    ) -> Result<(String, tools::Ran), Halt> {
        // The run gets only this: progress notifications for this call's token (written
        // at once, none once the call is cancelled, `mcp/control`), the cancel to
        // observe, the Vault, and the journal as an event sink. Progress starts here:
        // a wait for approval sends it too.
        let mut send = |p: ProgressReport| notes.note(Notification::progress(p.token, p.progress, p.total, p.message));
        let mut progress = Progress::new(progress_token, &mut send).with_cancel(cancel);
        // The approval for approve-flagged actions, then the intent row, durable before
        // anything runs; if it cannot be written, nothing runs.
        let mut live;
        let mut stateless;
        let elicitor: &mut dyn crate::approve::elicit::Elicitor = match era {
            Era::Handshake => {
                live = elicit::Live { notes, capable: elicits };
                &mut live
            }
            Era::Stateless => {
                let fp = self.audit.request_fp.clone().unwrap_or_default();
                stateless = crate::approve::elicit::Stateless { key: &self.state_key, retry: std::mem::take(&mut self.retry), fp };
                &mut stateless
            }
        };
        let mut asking = crate::approve::Asking { cancel, progress: &mut progress, elicitor, grants: self.grants.as_ref() };
        journal::audit_gate(&self.policy, &mut self.journal, &mut self.audit, &action, &mut asking)?;
        let tool = action.name().to_owned();
        let mut output = Journaling { journal: &mut self.journal, audit: &mut self.audit };
        // An upstream's elicitation during the run reaches the client through the same
        // link as sp's own (issue 33, `tools/upstream/elicit/`).
        let mut relaying = elicit::Relaying { notes, modes };
        let mut ctx = RunContext::new(&mut self.vault, cancel, &mut progress, &mut output).with_client(&mut relaying);
        Ok((tool, action.run(&mut self.executor, &self.policy, &mut ctx)))
    }
}
