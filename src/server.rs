//! The `sp mcp` loop: one line in, at most one message out, one action at a time,
//! blocking. stdin is read by the loop itself and, while an action runs, by the session's
//! control thread, which answers pings and watches for a cancel (`control.rs`, issue #10).
//!
//! ```text
//!  frame -> json -> jsonrpc -> session -> tool args -> authorize -> execute -> scrub -> out
//!    └───────┴────────┘          │            │            │           │
//!    malformed: -32700/-32600    │ -32601/    │ isError    │ isError   │ isError
//!    (id echoed if readable),    │ -32602/    │ SP_BAD_    │ SP_DENIED │ SP_TIMEOUT/...
//!    (exit 3)                    │ -32600     │ ARGUMENTS  │           │ (an execution)
//!                                └── refused but well-formed: session stays open ──┘
//! ```
//!
//! Every JSON-RPC error code is chosen in one place, [`RpcError::code`]. Rejections (input
//! refused before execution) and executions (an authorized action ran, whatever its
//! outcome) are counted apart in [`Stats`]. A rejection never reaches the executor.
//!
//! The loop is generic over input, output and executor so tests drive it with byte
//! slices, a `Vec<u8>` and a recording executor through the same code path as stdin.

use crate::gate::outcome::ToolCode;
use crate::mcp::model::{Answer, ErrorCode, ErrorData, Response, ToolResult};
use std::collections::BTreeMap;
use std::fmt;
use std::io::{BufRead, Write};

use serde_json::Value;

use crate::gate::authorize::{authorize, authorize_redirect, Action, Authorized, HttpAction};
use crate::mcp::control::{raw_of, Event, Input, Link};
use crate::gate::exec::{Cancel, ExecError, Executor, Progress};
use crate::tools::http::result::{HttpResult, Redirect, Secrets};
use crate::mcp::frame::FrameError;
use crate::json::{self, JsonError};
use crate::mcp::jsonrpc::{self, Id, Message, ShapeError};
use crate::mcp::out::ProtocolWriter;
use crate::policy::{OnEcho, Policy};
use crate::gate::vault::{Scrubbed, Vault};
use crate::gate::withhold::{withholds, WITHHELD};
use crate::mcp::session::{Era, Refusal, Session, Step};
use crate::tools::{self, CallError, ToolCall};

#[derive(Debug, Clone)]
pub struct Options {
    pub max_line_bytes: usize,
    /// Close the session after any refused request, not only after malformed input.
    pub close_on_refusal: bool,
    /// Test aid (`SP_TEST_PANIC=request`): panic when the first frame arrives.
    pub panic_on_first_frame: bool,
    /// Set by SIGTERM/SIGINT/SIGHUP (`signals.rs`): the loop stops between messages.
    pub stop: crate::signals::StopFlag,
    /// Issue #10: stdin EOF while a call runs cancels it and ends the loop (MCP stdio:
    /// closing stdin is the shutdown). `false` (in-process tests that hand the whole
    /// input at once): EOF waits behind the frames before it, every call runs.
    pub cancel_on_eof: bool,
    /// What the control thread waits for stdin with, and is woken by when a call ends
    /// (`signals::Nudge`); `None` for input that never blocks.
    pub nudge: Option<crate::signals::Nudge>,
}

impl Default for Options {
    fn default() -> Options {
        Options {
            max_line_bytes: crate::mcp::frame::DEFAULT_MAX_LINE_BYTES,
            close_on_refusal: false,
            panic_on_first_frame: false,
            stop: Default::default(),
            cancel_on_eof: true,
            nudge: None,
        }
    }
}

/// Why the loop ended. [`Exit::code`] is the process exit status (documented in `sp(1)`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Exit {
    /// stdin reached a clean end.
    Eof,
    /// Writing to the client failed (it went away).
    ClientGone,
    /// A malformed frame or message: answered, then closed.
    Malformed,
    /// A refusal under `--close-on-refusal`.
    Refused,
    /// SIGTERM, SIGINT or SIGHUP (the number): stopped between messages (issue 8).
    Signal(i32),
}

impl Exit {
    pub fn code(self) -> u8 {
        match self {
            Exit::Eof | Exit::ClientGone => 0,
            Exit::Malformed => 3,
            Exit::Refused => 4,
            // As a shell reports a death by that signal: 143, 130, 129.
            Exit::Signal(n) => u8::try_from(128 + n).unwrap_or(1),
        }
    }

    /// The `end` row's `decision`: `eof`, `clientgone`, `malformed`, `refused`,
    /// `sigterm`, `sigint`, `sighup`.
    pub fn name(self) -> String {
        match self {
            Exit::Signal(n) => crate::signals::name(n),
            other => format!("{other:?}").to_lowercase(),
        }
    }
}

/// Everything that is answered with a JSON-RPC error, and its code.
#[derive(Debug, PartialEq)]
pub(crate) enum RpcError {
    Frame(FrameError),
    Json(JsonError),
    Shape(ShapeError),
    Lifecycle(Refusal),
    Call(CallError),
}

impl RpcError {
    /// The JSON-RPC code: each stage's one mapping (`mcp::model`, `From<&_> for ErrorCode`).
    pub(crate) fn code(&self) -> ErrorCode {
        match self {
            RpcError::Frame(e) => e.into(),
            RpcError::Json(e) => e.into(),
            RpcError::Shape(e) => e.into(),
            RpcError::Lifecycle(e) => e.into(),
            RpcError::Call(_) => ErrorCode::INVALID_PARAMS,
        }
    }

    /// The counter key.
    pub(crate) fn reason(&self) -> &'static str {
        match self {
            RpcError::Frame(f) => f.reason(),
            RpcError::Json(JsonError::DuplicateKey { .. }) => "json_duplicate_key",
            RpcError::Json(JsonError::TooDeep { .. }) => "json_too_deep",
            RpcError::Json(JsonError::TooLarge { .. }) => "json_too_large",
            RpcError::Json(JsonError::Syntax(_)) => "json_parse",
            RpcError::Shape(_) => "invalid_request",
            RpcError::Lifecycle(Refusal::NotInitialized { .. }) => "not_initialized",
            RpcError::Lifecycle(Refusal::AlreadyInitialized) => "already_initialized",
            RpcError::Lifecycle(Refusal::MethodNotFound { .. }) => "method_not_found",
            RpcError::Lifecycle(Refusal::InvalidParams(_)) => "invalid_params",
            RpcError::Lifecycle(Refusal::UnsupportedVersion { .. }) => "unsupported_version",
            RpcError::Lifecycle(Refusal::IdInFlight { .. }) => "id_in_flight",
            RpcError::Call(CallError::UnknownTool { .. }) => "unknown_tool",
            RpcError::Call(_) => "invalid_params",
        }
    }
}

impl fmt::Display for RpcError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RpcError::Frame(e) => write!(f, "parse error: {e}"),
            RpcError::Json(e @ JsonError::TooLarge { .. }) => write!(f, "invalid request: {e} (see --max-line-bytes)"),
            RpcError::Json(e) => write!(f, "parse error: {e}"),
            RpcError::Shape(e) => write!(f, "invalid request: {e}"),
            RpcError::Lifecycle(e) => e.fmt(f),
            RpcError::Call(e) => e.fmt(f),
        }
    }
}

/// Rejections and executions, counted apart.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Stats {
    /// Input refused before any action, by reason.
    pub rejections: BTreeMap<&'static str, u64>,
    /// Authorized actions that ran, by `tool:outcome`.
    pub executions: BTreeMap<String, u64>,
}

impl Stats {
    pub fn rejected(&self) -> u64 {
        self.rejections.values().sum()
    }
    pub fn executed(&self) -> u64 {
        self.executions.values().sum()
    }
    /// One line for stderr at exit.
    pub fn summary(&self) -> String {
        let list = |m: Vec<(String, u64)>| m.into_iter().map(|(k, v)| format!("{k}={v}")).collect::<Vec<_>>().join(" ");
        format!(
            "executions={} [{}] rejections={} [{}]",
            self.executed(),
            list(self.executions.iter().map(|(k, v)| (k.clone(), *v)).collect()),
            self.rejected(),
            list(self.rejections.iter().map(|(k, v)| (k.to_string(), *v)).collect()),
        )
    }
}

pub struct Server<'p, E> {
    policy: &'p Policy,
    executor: E,
    options: Options,
    vault: Vault,
    session: Session,
    pub stats: Stats,
    /// The audit journal (issue #5); [`crate::audit::Journal::off`] unless `with_journal`.
    pub journal: crate::audit::Journal,
    /// What the journal rows for the current request carry.
    audit: crate::audit::Context,
}

impl<'p, E: Executor> Server<'p, E> {
    pub fn new(policy: &'p Policy, executor: E, options: Options) -> Self {
        Server {
            policy,
            executor,
            options,
            vault: Vault::for_policy(policy),
            session: Session::AwaitingInit,
            stats: Stats::default(),
            journal: crate::audit::Journal::off(),
            audit: crate::audit::Context::default(),
        }
    }

    /// Journals every decision to `journal` (issue #5).
    pub fn with_journal(mut self, journal: crate::audit::Journal) -> Self {
        self.journal = journal;
        self
    }

    pub fn executor(&self) -> &E {
        &self.executor
    }

    pub fn session(&self) -> &Session {
        &self.session
    }

    /// Serves until end of input, a closed client, or a reason to close. `input` is read
    /// by the loop itself, and by the session's control thread while a call runs
    /// (`control.rs`), which answers control messages and notices a cancel or EOF
    /// meanwhile. Input that can block must be the stdin [`Options::nudge`] waits for
    /// (`signals::install`); in-memory input needs no nudge.
    pub fn serve<R: BufRead + Send + 'static, W: Write + Send>(&mut self, input: R, out: &mut ProtocolWriter<W>) -> Exit {
        let o = &self.options;
        let link = Link::new(Box::new(input), out, o.nudge.clone(), o.max_line_bytes, o.cancel_on_eof);
        // The `Input`'s drop ends the control thread before the scope joins it.
        std::thread::scope(|scope| self.serve_input(&mut Input::new(&link, scope)))
    }

    fn serve_input<W: Write + Send>(&mut self, io: &mut Input<'_, '_, '_, W>) -> Exit {
        let mut first = true;
        loop {
            // A stop signal (`signals.rs`) ends the session between messages: it reads as
            // EOF on stdin, so a running call was cancelled like on EOF, and a request
            // that came with the signal is not run.
            if let Some(exit) = self.stopped() {
                return exit;
            }
            if io.gone {
                return Exit::ClientGone;
            }
            if io.eof {
                return Exit::Eof;
            }
            let (frame, raw) = match io.next_event() {
                Event::Eof => return self.stopped().unwrap_or(Exit::Eof),
                Event::CancelledQueued { frame, .. } => {
                    self.cancelled_queued(&frame);
                    continue;
                }
                Event::IdInFlight { frame, id, .. } => match self.refuse_in_flight(io, &frame, id) {
                    Some(exit) => return exit,
                    None => continue,
                },
                Event::Frame { frame, raw, .. } => (frame, raw),
            };
            if let Some(exit) = self.stopped() {
                return exit;
            }
            let frame = match frame {
                Ok(frame) => frame,
                Err(FrameError::Io(kind)) => {
                    // stdin itself is broken: nobody to answer on that channel's behalf.
                    log::error!("reading stdin failed: {kind}");
                    self.reject("frame_io");
                    self.audit_raw(&raw);
                    self.journal_reject("frame_io", "", &format!("reading stdin failed: {kind}"));
                    return Exit::Malformed;
                }
                Err(e) => {
                    self.audit_raw(&raw);
                    return self.close_malformed(io, None, RpcError::Frame(e));
                }
            };
            if first && self.options.panic_on_first_frame {
                panic!("SP_TEST_PANIC=request: panicking on the first frame as asked");
            }
            first = false;
            let value = match json::parse_limited(&frame.text, max_parsed_bytes(self.options.max_line_bytes)) {
                Ok(v) => v,
                Err(e) => {
                    self.audit_raw(&raw_of(&frame));
                    return self.close_malformed(io, None, RpcError::Json(e));
                }
            };
            let message = match jsonrpc::classify(value) {
                Ok(m) => m,
                Err(jsonrpc::Malformed { error, id }) => {
                    self.audit_raw(&raw_of(&frame));
                    return self.close_malformed(io, id.as_ref(), RpcError::Shape(error));
                }
            };
            if let Some(exit) = self.message(message, io) {
                return exit;
            }
        }
    }

    /// `Exit::Signal` once a stop signal has arrived (logged once, by the caller's return).
    fn stopped(&self) -> Option<Exit> {
        let n = self.options.stop.get()?;
        log::warn!("{}: stopping; no further request is read", crate::signals::name(n).to_uppercase());
        Some(Exit::Signal(n))
    }

    /// A `tools/call` cancelled while it waited behind another (issue #10): it never
    /// runs and is never answered; a rejection with reason `cancelled`.
    fn cancelled_queued(&mut self, frame: &crate::mcp::frame::Frame) {
        let Some(Message::Request { method, params, .. }) = json::parse(&frame.text).ok().and_then(|v| jsonrpc::classify(v).ok()) else {
            return;
        };
        self.audit = crate::audit::Context { request_fp: Some(crate::audit::request_fp(&method, params.as_ref())), ..Default::default() };
        // The journal's `tool` holds only sp's tool names, never an agent's string.
        let name = params.as_ref().and_then(|p| p["name"].as_str());
        self.audit.tool = name.filter(|n| [tools::HTTP_REQUEST, tools::INVENTORY, crate::tools::ssh::SSH_EXEC].contains(n)).map(str::to_owned);
        self.reject("cancelled");
        self.journal_reject("cancelled", crate::gate::exec::SP_CANCELLED, "cancelled by the client before it ran");
    }

    /// A request that reused an id in flight (`control.rs`): refused with `id: null`, so
    /// the request that holds the id gets the only answer that carries it; the refused
    /// id is in the error's `data.requestId`. Well-formed: the session stays open
    /// (unless refusals close it).
    fn refuse_in_flight<W: Write + Send>(&mut self, io: &Input<'_, '_, '_, W>, frame: &crate::mcp::frame::Frame, id: Id) -> Option<Exit> {
        if self.audited()
            && let Some(Message::Request { method, params, .. }) = json::parse(&frame.text).ok().and_then(|v| jsonrpc::classify(v).ok())
        {
            self.audit = crate::audit::Context { request_fp: Some(crate::audit::request_fp(&method, params.as_ref())), ..Default::default() };
        }
        let err = RpcError::Lifecycle(Refusal::IdInFlight { id });
        log::info!("refused: {err}");
        self.reject(err.reason());
        self.journal_reject(err.reason(), &err.code().to_string(), &err.to_string());
        if io.write(|out| out.send_typed(&error_response(None, &err))).is_err() {
            return Some(Exit::ClientGone);
        }
        self.options.close_on_refusal.then_some(Exit::Refused)
    }

    /// Is anybody told about requests: the journal, or the approver (which also gets
    /// the request's fingerprint, tool and target)?
    fn audited(&self) -> bool {
        self.journal.is_on() || self.policy.approval.command.is_some()
    }

    fn reject(&mut self, reason: &'static str) {
        *self.stats.rejections.entry(reason).or_default() += 1;
    }

    /// `id`: the request id when it could be read (echoed), else the answer has `id: null`.
    fn close_malformed<W: Write + Send>(&mut self, io: &Input<'_, '_, '_, W>, id: Option<&Id>, err: RpcError) -> Exit {
        log::warn!("closing the session: {err}");
        self.reject(err.reason());
        self.journal_reject(err.reason(), &err.code().to_string(), &err.to_string());
        match io.write(|out| out.send_typed(&error_response(id, &err))) {
            Ok(()) => Exit::Malformed,
            Err(_) => Exit::ClientGone,
        }
    }

    /// Handles one well-formed message; `Some(exit)` ends the session.
    fn message<W: Write + Send>(&mut self, message: Message, io: &mut Input<'_, '_, '_, W>) -> Option<Exit> {
        // Issue #5: every row written for this request, and the approver, get its
        // fingerprint (not computed when neither exists, issue #12).
        if let Message::Request { method, params, .. } = &message {
            let request_fp = self.audited().then(|| crate::audit::request_fp(method, params.as_ref()));
            self.audit = crate::audit::Context { request_fp, ..Default::default() };
        }
        let session = std::mem::replace(&mut self.session, Session::AwaitingInit);
        let (next, step) = session.handle(&message);
        self.session = next;
        let (id, params) = match message {
            Message::Notification { method, .. } => {
                log::debug!("notification {method:?}");
                return None;
            }
            Message::Request { id, params, .. } => (id, params),
        };
        let (response, refused, era) = match step {
            Step::Ignore => return None,
            Step::Reply(result, era) => (Outgoing::Answer(Answer::Result(result)), false, era),
            Step::ListTools(era) => (Outgoing::List(tools::ListAnswer { id: id.to_value(), era }), false, era),
            Step::Refuse(r) => {
                let (response, refused) = self.refuse_rpc(&id, RpcError::Lifecycle(r));
                (Outgoing::Answer(response), refused, Era::Handshake)
            }
            Step::CallTool(era) => match self.call_tool(&id, params, io) {
                Some((response, refused)) => (response, refused, era),
                // Cancelled (issue #10): never answered.
                None => return io.gone.then_some(Exit::ClientGone),
            },
        };
        let sent = io.write(|out| match response {
            // Stamped already for 2026-07-28.
            Outgoing::List(l) => out.send_typed(&l),
            Outgoing::Answer(a) => out.send_typed(&Response::new(id.to_value(), a, era)),
        });
        if sent.is_err() {
            return Some(Exit::ClientGone);
        }
        (refused && self.options.close_on_refusal).then_some(Exit::Refused)
    }

    fn refuse_rpc(&mut self, _id: &Id, err: RpcError) -> (Answer, bool) {
        log::info!("refused: {err}");
        self.reject(err.reason());
        self.journal_reject(err.reason(), &err.code().to_string(), &err.to_string());
        (Answer::Error(error_data(&err)), true)
    }

    fn refuse_tool(&mut self, _id: &Id, reason: &'static str, code: &'static str, message: impl std::fmt::Display) -> (Outgoing, bool) {
        let refusal = crate::mcp::model::CallToolResult::refusal(code, message);
        let message = refusal.message().unwrap_or_default();
        log::info!("refused ({code}): {message}");
        self.reject(reason);
        self.journal_reject(reason, code, message);
        (Outgoing::Answer(Answer::Call(refusal)), true)
    }

    /// The tool pipeline: args -> authorize -> execute -> scrub. `None`: the client
    /// cancelled the call (issue #10); it gets no answer.
    fn call_tool<W: Write + Send>(&mut self, id: &Id, params: Option<Value>, io: &mut Input<'_, '_, '_, W>) -> Option<(Outgoing, bool)> {
        let request = match tools::call_request(params) {
            Ok(r) => r,
            Err(e) => {
                let (response, refused) = self.refuse_rpc(id, RpcError::Call(e));
                return Some((Outgoing::Answer(response), refused));
            }
        };
        // What the journal rows and the approver are told (issue #12: not built for nobody).
        let audited = self.audited();
        if audited {
            self.audit.tool = Some(request.name.clone());
        }
        let call = match ToolCall::parse(&request) {
            Ok(c) => c,
            Err(e) => return Some(self.refuse_tool(id, "bad_arguments", ToolCode::BadArguments.as_str(), e)),
        };
        if audited {
            self.audit.target = crate::audit::call_target(&call);
        }
        let action = match authorize(self.policy, call) {
            Ok(a) => a,
            Err(d) => {
                let (reason, code) = d.code();
                return Some(self.refuse_tool(id, reason, code, d));
            }
        };
        // Issue #10: the approval wait and the execution run while the control thread
        // answers pings and watches for a cancel (`control.rs`).
        let cancel = Cancel::new();
        let session = std::mem::replace(&mut self.session, Session::AwaitingInit);
        let token = request.progress_token.clone();
        let (ran, session) = io.during(session, id, &cancel, |notes| self.gated_run(action, token, &cancel, notes));
        self.session = session;
        // After `notifications/cancelled` nothing more is sent for the call, whatever it
        // ended with; after EOF (or a client that went away) a call that was not
        // interrupted is still answered, best effort.
        let requested = io.cancel_requested;
        let (tool, result) = match ran {
            Err((reason, code, message)) if requested || code == crate::gate::exec::SP_CANCELLED => {
                log::info!("call cancelled before it ran ({code}): {message}");
                self.reject(reason);
                self.journal_reject(reason, code, &message);
                return None;
            }
            Err((reason, code, message)) => return Some(self.refuse_tool(id, reason, code, message)),
            // An executor that saw the cancel says what became of the effect (ssh_exec:
            // what was killed, what may still run); its words go to the journal.
            Ok((tool, result)) if requested && result.outcome() != crate::gate::exec::SP_CANCELLED => {
                (tool, ToolResult::error(crate::gate::exec::SP_CANCELLED, Scrubbed::own("cancelled by the client")))
            }
            Ok(done) => done,
        };
        let outcome = result.outcome();
        *self.stats.executions.entry(format!("{tool}:{outcome}")).or_default() += 1;
        // Its outside pieces were scrubbed as they were made (`Scrubbed`); what their JSON
        // text alone spells withholds the whole result (`secret::withholds`).
        let result = if withholds(&self.vault, &result) {
            ToolResult::error(ToolCode::Upstream.as_str(), Scrubbed::own(WITHHELD))
        } else {
            result
        };
        self.journal_result(outcome, result.message().map(str::to_owned));
        if outcome == crate::gate::exec::SP_CANCELLED {
            log::info!("{tool} cancelled by the client: no answer is sent");
            return None;
        }
        Some((Outgoing::Answer(Answer::Call(result.into_call())), false))
    }

    /// Approval, intent row, execution: the part of a call that may block.
    fn gated_run(
        &mut self,
        action: Action,
        progress_token: Option<Value>,
        cancel: &Cancel,
        notes: &crate::mcp::control::Notes<'_>,
    ) -> Result<(&'static str, ToolResult), (&'static str, &'static str, String)> {
        // Issue #5: the approver for approve-flagged credentials and hosts, then the
        // intent row, durable before anything runs; if it cannot be written, nothing runs.
        self.audit_gate(&action, cancel)?;
        Ok(match action {
            Action::Inventory(inv) => (tools::INVENTORY, ToolResult::ok(Scrubbed::from_policy(inv.action().0.clone()))),
            Action::Http(http) => match self.run_http(http, cancel) {
                Ok(result) => (tools::HTTP_REQUEST, ToolResult::ok(self.vault.scrub_fields(result.into_fields()))),
                // SP_BLOCKED too: the destination check runs after the intent row, in
                // the executor (it resolves names), so it is an execution whose outcome
                // is the block, journaled as intent + result like any other.
                Err((e, hops)) => {
                    // The message can quote the peer: scrubbed before it is logged or sent.
                    let message = self.vault.scrub_text(e.to_string());
                    log::warn!("http_request failed after {hops} redirect hop(s): {message}");
                    (tools::HTTP_REQUEST, ToolResult::error(e.code(), message))
                }
            },
            Action::Ssh(ssh) => {
                // The executor gets only this: progress notifications for this call's
                // token (written at once, none once the call is cancelled, `control.rs`),
                // and the cancel to observe.
                let mut send = |note: &Value| notes.note(note);
                let mut progress = Progress::new(progress_token, &mut send).with_cancel(cancel);
                self.run_ssh(&ssh, &mut progress)
            }
        })
    }
}

impl<E: Executor> Server<'_, E> {
    /// Runs an authorized request and, for a request without a credential, follows
    /// same-origin redirects, each hop authorized again (`authorize_redirect`) and run
    /// through the executor (and so through its destination checks) like the first.
    /// On error, also says how many redirect hops had already run (for the log).
    fn run_http(&mut self, first: Authorized<HttpAction>, cancel: &Cancel) -> Result<HttpResult, (ExecError, u32)> {
        let mut current = first;
        let mut hops = 0;
        loop {
            let a = current.action();
            log::info!(
                "executing {} {}://{}:{}{} ({}{})",
                a.method,
                a.url.scheme(),
                a.url.host_str().unwrap_or_default(),
                a.url.port_or_known_default().unwrap_or_default(),
                a.url.path(),
                a.rule,
                a.credential.as_ref().map(|c| format!(", credential {}", c.name)).unwrap_or_default()
            );
            if hops > 0 {
                // Issue #5: each redirect hop is an effect of its own: its intent row first.
                let (target, rule) = (crate::audit::http_target(a.method.as_str(), &a.url), a.rule.clone());
                self.journal_intent(Some(target), Some(rule), Some(format!("redirect hop {hops}"))).map_err(|m| (ExecError::Unavailable(m), hops))?;
            }
            if cancel.is_cancelled() {
                return Err((ExecError::Cancelled, hops));
            }
            let ran = self.executor.http(&current, &mut self.vault, cancel);
            self.journal_tokens();
            let mut outcome = ran.map_err(|e| (e, hops))?;
            self.audit.http = Some((outcome.status, outcome.body.len() as u64, outcome.truncated));
            // Issue 8: a credential with `on_echo: "withhold"` whose secret is in the body
            // (or the headers) in any spelling: that part is not passed on at all.
            let withhold: Vec<&str> =
                self.policy.credentials.values().filter(|c| c.on_echo == OnEcho::Withhold).map(|c| c.name.as_str()).collect();
            let echoed = |found: Vec<String>| found.into_iter().find(|n| withhold.contains(&n.as_str()));
            let body_echo = if withhold.is_empty() { None } else { echoed(self.vault.echoed_in(&outcome.body, outcome.truncated)) };
            let header_echo = if withhold.is_empty() { None } else { echoed(self.vault.echoed_in_headers(&outcome.headers)) };
            // The redirect target as sent (it is only used to follow; the result's copy
            // is scrubbed with the rest of the result).
            let location = matches!(outcome.status, 301 | 302 | 303 | 307 | 308)
                .then(|| outcome.headers.iter().find(|(n, _)| n == "location").map(|(_, v)| v.clone()))
                .flatten();
            // Raw bytes first: a body that is not UTF-8 is base64-encoded below, where
            // no string scrub could find the secret. A cut tail first: once a long run of
            // the secret before the cut is replaced, what is left after it (a cut escape,
            // `&#5`) begins no spelling, and would stay.
            if outcome.truncated {
                self.vault.scrub_truncated_tail(&mut outcome.body);
            }
            self.vault.scrub_bytes(&mut outcome.body);
            // Names and values, and an echo split across two header lines.
            self.vault.scrub_headers(&mut outcome.headers);
            let status = outcome.status;
            // Compressed content is searched for the secrets read so far (`http/coding.rs`).
            let vault = &self.vault;
            let find = |b: &[u8], cut: bool| vault.echoed_in(b, cut);
            let limit = usize::try_from(current.action().max_response_bytes).unwrap_or(usize::MAX);
            let secrets = (!vault.is_empty()).then_some(Secrets { find: &find, limit });
            let mut result = HttpResult::from_outcome(outcome, secrets.as_ref());
            result.withhold_echo(body_echo.as_deref(), header_echo.as_deref());
            // The URL as authorized: an injected query credential is not part of it.
            result.final_url = current.action().url.to_string();
            result.redirects = hops;
            self.audit.redirects = hops;
            let Some(location) = location else {
                return Ok(result);
            };
            match authorize_redirect(self.policy, &current, hops, status, &location) {
                Ok(next) => {
                    current = next;
                    hops += 1;
                }
                Err(stop) => {
                    log::info!("redirect not followed: {}", self.vault.scrub_text(stop.to_string()));
                    result.redirect = Redirect::Refused { reason: stop.to_string(), location: header_echo.is_none().then_some(location) };
                    return Ok(result);
                }
            }
        }
    }
}

impl<E: Executor> Server<'_, E> {
    /// `ssh_exec` (issue #4): run, scrub the raw output bytes, shape the result. A
    /// timeout is an error result that still carries the output collected until then.
    fn run_ssh(&mut self, ssh: &Authorized<crate::tools::ssh::SshAction>, progress: &mut Progress<'_>) -> (&'static str, ToolResult) {
        let a = ssh.action();
        log::info!("executing ssh_exec on {} ({}@{}:{}, {})", a.host, a.user, a.address, a.port, a.rule);
        log::debug!("ssh_exec command on {}: {:?}", a.host, a.command);
        // `cut`: the output may end inside a secret (truncated, or a timeout's partial
        // output), so a tail that begins a secret is scrubbed too.
        // The cut tail first, as for HTTP bodies (`run_http`).
        let scrub = |vault: &Vault, o: &mut crate::gate::exec::SshOutcome, cut: bool| {
            if cut {
                vault.scrub_truncated_tail(&mut o.stdout);
                vault.scrub_truncated_tail(&mut o.stderr);
            }
            vault.scrub_bytes(&mut o.stdout);
            vault.scrub_bytes(&mut o.stderr);
        };
        let facts = |o: &crate::gate::exec::SshOutcome| crate::audit::SshFacts {
            exit_status: o.exit_status,
            bytes_out: o.stdout_bytes + o.stderr_bytes,
            truncated: o.truncated,
            host_key_fp: o.host_key_fingerprint.clone(),
        };
        match self.executor.ssh(ssh, &mut self.vault, progress) {
            Ok(mut o) => {
                self.audit.ssh = Some(facts(&o));
                log::info!("ssh_exec on {}: exit {:?}{} in {} ms", a.host, o.exit_status, o.exit_signal.as_ref().map(|s| format!(" signal {s}")).unwrap_or_default(), o.duration_ms);
                let cut = o.truncated;
                scrub(&self.vault, &mut o, cut);
                (crate::tools::ssh::SSH_EXEC, ToolResult::ok(self.vault.scrub_fields(o.to_json())))
            }
            Err(mut e) => {
                // The message can quote the remote side: scrubbed before it is logged or sent.
                let message = self.vault.scrub_text(e.to_string());
                log::warn!("ssh_exec on {} failed: {message}", a.host);
                let mut result = ToolResult::error(e.code(), message);
                if let Some(o) = e.partial_mut() {
                    self.audit.ssh = Some(facts(o));
                    scrub(&self.vault, o, true);
                    // The output until the timeout, next to the error (the text block: the
                    // error line, then the JSON of the whole result, `ToolResult`).
                    result = result.with_fields(self.vault.scrub_fields(o.to_json()));
                }
                (crate::tools::ssh::SSH_EXEC, result)
            }
        }
    }
}

// Issue #5: the journal calls (`audit.rs`). Every row carries `self.audit`: the request's
// fingerprint, tool, target, rule and credential name, as far as the pipeline got.
impl<E: Executor> Server<'_, E> {
    /// A malformed frame: its length and the fingerprint of its raw bytes, never the bytes.
    fn audit_raw(&mut self, raw: &[u8]) {
        self.audit = crate::audit::Context {
            request_fp: Some(crate::audit::raw_fp(raw)),
            bytes_in: Some(raw.len() as u64),
            ..Default::default()
        };
    }

    /// A `reject` row; `reason` is the counter key, so rows and [`Stats`] agree.
    fn journal_reject(&mut self, reason: &str, code: &str, message: &str) {
        if !self.journal.is_on() {
            return;
        }
        // `reason` is outside text: the journal scrubs it (`audit/row.rs`).
        let code = (!code.is_empty()).then(|| code.to_owned());
        let row = self.audit.row("reject").set("decision", reason).set("code", code).set("reason", message);
        self.journal.record(row);
    }

    /// An `intent` row, durable before the effect. `Err` carries the agent's message.
    fn journal_intent(&mut self, target: Option<String>, rule: Option<String>, note: Option<String>) -> Result<(), String> {
        let mut row = self.audit.row("intent").set("decision", self.audit.intent.unwrap_or("allow")).set("reason", note);
        if let Some(t) = target {
            row = row.set("target", t);
        }
        if let Some(r) = rule {
            row = row.set("rule", r);
        }
        self.journal.write(row).map(drop).map_err(|e| {
            log::error!("{e}");
            format!("the action was not run: {e}")
        })
    }

    /// Approval (when the credential or host asks for it), then the first intent row.
    fn audit_gate(&mut self, action: &Action, cancel: &Cancel) -> Result<(), (&'static str, &'static str, String)> {
        let (rule, credential) = match action {
            Action::Http(a) => (Some(a.action().rule.clone()), a.action().credential.as_ref().map(|c| c.name.clone())),
            Action::Ssh(a) => (Some(a.action().rule.clone()), None),
            Action::Inventory(_) => (None, None),
        };
        self.audit.rule = rule;
        self.audit.credential = credential;
        match crate::approve::gate(self.policy, &mut self.journal, &self.audit, action, cancel) {
            crate::approve::Gate::Run { intent } => self.audit.intent = Some(intent),
            crate::approve::Gate::Refuse { reason, code, message } => return Err((reason, code, message)),
        }
        self.journal_intent(None, None, None).map_err(|m| ("audit_unavailable", ToolCode::Unavailable.as_str(), m))?;
        self.audit.started = Some(std::time::Instant::now());
        Ok(())
    }

    /// Issue #13: a `token` row per OAuth2 token fetch the call made: the token URL and
    /// the outcome (`expires_in`, or the error), never the token.
    fn journal_tokens(&mut self) {
        for f in self.executor.take_token_fetches() {
            let row = self.audit.row("token").set("target", f.target).set("credential", f.credential);
            let row = match f.outcome {
                Ok(secs) => row.set("decision", "ok").set("reason", secs.map_or("no expires_in (300 s assumed)".into(), |s| format!("expires_in {s} s"))),
                Err((code, message)) => row.set("decision", "error").set("code", code).set("reason", message),
            };
            self.journal.record(row);
        }
    }

    /// The `result` row of an execution (after scrubbing: it reads the error message).
    fn journal_result(&mut self, outcome: &str, message: Option<String>) {
        let ok = outcome == "ok";
        // `reason` is outside text: the journal scrubs it (`audit/row.rs`).
        let reason = message;
        let decision = match outcome {
            "ok" => "ok",
            crate::gate::exec::SP_CANCELLED => "cancelled",
            _ => "error",
        };
        let mut row = self
            .audit
            .row("result")
            .set("decision", decision)
            .set("code", (!ok).then(|| outcome.to_owned()))
            .set("duration_ms", self.audit.elapsed_ms())
            .set("reason", reason);
        if let Some((status, bytes, truncated)) = self.audit.http {
            row = row.set("status", status).set("bytes_out", bytes).set("truncated", truncated);
            if ok && self.audit.redirects > 0 {
                row = row.set("reason", format!("followed {} redirect(s)", self.audit.redirects));
            }
        }
        if let Some(f) = &self.audit.ssh {
            row = row
                .set("exit_status", f.exit_status)
                .set("bytes_out", f.bytes_out)
                .set("truncated", f.truncated)
                .set("host_key_fp", f.host_key_fp.clone());
        }
        self.journal.record(row);
    }
}

/// The `tools/list` result (with the 2026-07-28 caching hints for a stateless request).
/// The memory cap for a request's parsed JSON (issue #12): [`json::MAX_PARSED_BYTES`], or
/// twice a larger line limit.
pub(crate) fn max_parsed_bytes(max_line_bytes: usize) -> usize {
    json::MAX_PARSED_BYTES.max(max_line_bytes.saturating_mul(2))
}

/// An answer as it is sent: typed (`mcp::model::Response`), or the cached `tools/list`.
enum Outgoing {
    Answer(Answer),
    List(tools::ListAnswer),
}

/// The JSON-RPC error for `err`, to request `id` (`null` when it could not be read).
fn error_response(id: Option<&Id>, err: &RpcError) -> Response {
    Response::error(id.map_or(Value::Null, Id::to_value), error_data(err))
}

fn error_data(err: &RpcError) -> ErrorData {
    match err {
        RpcError::Lifecycle(r) => ErrorData::from(r),
        other => ErrorData::new(other.code(), other),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_and_session_policy() {
        let cases: Vec<(RpcError, i32, bool)> = vec![
            (RpcError::Frame(FrameError::TooLong { limit: 1 }), -32600, true),
            (RpcError::Frame(FrameError::InvalidUtf8 { offset: 0 }), -32700, true),
            (RpcError::Frame(FrameError::EofMidLine { len: 1 }), -32700, true),
            (RpcError::Json(JsonError::DuplicateKey { key: "a".into() }), -32700, true),
            (RpcError::Json(JsonError::TooLarge { limit: 1 }), -32600, true),
            (RpcError::Shape(ShapeError::Batch), -32600, true),
            (RpcError::Lifecycle(Refusal::MethodNotFound { method: "x".into() }), -32601, false),
            (RpcError::Lifecycle(Refusal::InvalidParams("x".into())), -32602, false),
            (RpcError::Lifecycle(Refusal::NotInitialized { method: "x".into() }), -32600, false),
            (RpcError::Lifecycle(Refusal::IdInFlight { id: Id::Int(7) }), -32600, false),
            (RpcError::Call(CallError::UnknownTool { name: "x".into() }), -32602, false),
        ];
        for (e, code, _) in cases {
            assert_eq!(e.code(), ErrorCode(code), "{e:?}");
        }
    }
}
