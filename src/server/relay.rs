//! The loop's part in relaying upstreams' resources, prompts and completion (issue 33,
//! `tools/upstream/resources.rs`): the request served while the control thread answers
//! pings and watches for a cancel, reads and prompt gets journaled like tool calls.
//!
//! ```text
//!  resources/list, templates/list, prompts/list, completion/complete ──> relayed (no row)
//!  resources/read  ──> check (pure) ── refused ──> reject row, JSON-RPC error
//!  prompts/get     ──> resolve (lists that upstream's prompts) ── refused ──> reject row
//!                  ──> intent row (durable, else nothing is asked) ──> ask ──> result row
//! ```

use std::io::Write;

use serde_json::{Map, Value};

use super::journal;
use super::{RpcError, Server};
use crate::gate::exec::{Cancel, Unavailable};
use crate::gate::outcome::ToolCode;
use crate::mcp::control::Input;
use crate::mcp::jsonrpc::Id;
use crate::mcp::model::Answer;
use crate::mcp::session::{Era, Session};
use crate::tools::upstream::resources::{params_object, string_param, Kind, RelayError};
use crate::tools::Executor;

impl<E: Executor> Server<'_, E> {
    /// One relayed request; `None`: the client cancelled it (no answer).
    pub(super) fn relay<W: Write + Send>(
        &mut self,
        id: &Id,
        method: &str,
        params: Option<Value>,
        _era: Era,
        io: &mut Input<'_, '_, '_, W>,
    ) -> Option<(Answer, bool)> {
        if method.starts_with("tasks/") {
            return self.task_request(id, method, params, io);
        }
        let params = match params_object(params, method) {
            Ok(p) => p,
            Err(e) => return Some(self.refuse_rpc(id, RpcError::Relay(e))),
        };
        if self.audited() && matches!(method, "resources/read" | "prompts/get") {
            self.audit.tool = Some(method.to_owned());
            self.audit.target = params.get(if method == "resources/read" { "uri" } else { "name" }).and_then(Value::as_str).map(str::to_owned);
        }
        let cancel = Cancel::new();
        let session = std::mem::replace(&mut self.session, Session::AwaitingInit);
        let (outcome, session) = io.during(session, id, &cancel, |_| self.relay_run(method, &params, &cancel));
        self.session = session;
        self.upstream_aftermath();
        if io.cancel_requested {
            log::info!("{method} cancelled by the client: no answer is sent");
            return None;
        }
        match outcome {
            Ok(result) => Some((Answer::Result(result), false)),
            // Refused before anything was asked: a rejection (its row written here).
            Err((e, false)) => Some(self.refuse_rpc(id, RpcError::Relay(e))),
            // Asked and failed: its result row is written; answered, not counted again.
            Err((e, true)) => {
                log::info!("{method}: {e}");
                let err = RpcError::Relay(e);
                Some((Answer::Error(super::error_data(&err)), false))
            }
        }
    }

    /// The work, while the control thread serves. `Err((e, ran))`: `ran` when the
    /// request went out (its result row is written).
    fn relay_run(&mut self, method: &str, params: &Map<String, Value>, cancel: &Cancel) -> Result<Value, (RelayError, bool)> {
        let refused = |e| Err((e, false));
        let Some(ups) = self.executor.upstreams() else {
            return refused(RelayError::NotFound { what: "resource", name: method.to_owned() });
        };
        ups.poll();
        let kind = match method {
            "resources/list" => Some(Kind::Resources),
            "resources/templates/list" => Some(Kind::Templates),
            "prompts/list" => Some(Kind::Prompts),
            _ => None,
        };
        if let Some(kind) = kind {
            return Ok(ups.list_items(kind, &mut self.vault, cancel));
        }
        if method == "completion/complete" {
            return ups.complete(params, &mut self.vault, cancel).map_err(|e| (e, false));
        }
        // A read or a get: checked, then journaled like a tool call.
        let prompt = if method == "resources/read" {
            if let Err(e) = ups.check_read(params) {
                return refused(e);
            }
            None
        } else {
            let name = match string_param(params, method, "name") {
                Ok(n) => n,
                Err(e) => return refused(e),
            };
            match ups.resolve_prompt(name, &mut self.vault, cancel) {
                Ok(p) => Some(p),
                Err(e) => return refused(e),
            }
        };
        if let Err(Unavailable(message)) = journal::intent(&mut self.journal, &self.audit, None, None, None) {
            return refused(RelayError::Unavailable(message));
        }
        self.audit.started = Some(std::time::Instant::now());
        let Some(ups) = self.executor.upstreams() else {
            return refused(RelayError::Upstream(crate::tools::upstream::UpstreamError::Unknown { upstream: "(none)".into() }));
        };
        let got = match prompt {
            None => ups.read_resource(params, &mut self.vault, cancel),
            Some(p) => ups.get_prompt(p, params, &mut self.vault, cancel),
        };
        let code = got.as_ref().err().map(|e| match e {
            RelayError::Upstream(crate::tools::upstream::UpstreamError::Cancelled { .. }) => ToolCode::Cancelled,
            RelayError::Upstream(crate::tools::upstream::UpstreamError::Timeout { .. }) => ToolCode::Timeout,
            _ => ToolCode::Upstream,
        });
        *self.stats.executions.entry(format!("{method}:{}", code.map_or("ok", ToolCode::as_str))).or_default() += 1;
        self.journal_result(code, got.as_ref().err().map(ToString::to_string));
        got.map_err(|e| (e, true))
    }
}
