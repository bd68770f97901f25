//! The `sp mcp` loop: one line in, at most one message out, one action at a time,
//! blocking. stdin is read by the loop itself and, while an action runs, by the session's
//! control thread, which answers pings and watches for a cancel (`mcp/control`).
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
//! The loop names no tool: the tool table (`tools/`) parses, authorizes and runs each
//! call; the loop adds approval and the intent row between (`journal.rs`). Approval may
//! ask the client (`approve/elicit.rs`): in the handshake eras through the control
//! thread (`elicit.rs` here), under 2026-07-28 by answering the call `input_required`
//! and checking the retry's `inputResponses` and `requestState`, which are taken out of
//! the params before the fingerprint. It is generic
//! over input, output and executor, so tests drive it with byte slices, a `Vec<u8>` and
//! a recording executor through the same code path as stdin.

use std::fmt;
use std::io::{BufRead, Write};

use serde_json::Value;

use crate::gate::outcome::{Reason, Rejection, ToolCode};
use crate::gate::vault::Vault;
use crate::json::{self, JsonError};
use crate::mcp::control::{raw_of, Event, Input, Link};
use crate::mcp::frame::FrameError;
use crate::mcp::jsonrpc::{self, Id, Message, ShapeError};
use crate::mcp::model::{Answer, ErrorCode, ErrorData, Response};
use crate::mcp::out::ProtocolWriter;
use crate::mcp::model::live::{LiveList, RawListAnswer};
use crate::mcp::session::{Era, Offer, Refusal, Session, Step};
use crate::policy::Policy;
use crate::tools::{self, CallError, Executor};

mod call;
mod elicit;
mod journal;
mod limits;
mod relay;
pub(crate) mod reload;
mod stats;
mod tasks;
mod upstreams;
use stats::Stats;

#[derive(Debug, Clone)]
pub struct Options {
    pub max_line_bytes: usize,
    /// Close the session after any refused request, not only after malformed input.
    pub close_on_refusal: bool,
    /// Test aid (`SP_TEST_PANIC=request`): panic when the first frame arrives.
    pub panic_on_first_frame: bool,
    /// Set by SIGTERM/SIGINT (`signals.rs`): the loop stops between messages.
    pub stop: crate::signals::StopFlag,
    /// stdin EOF while a call runs cancels it and ends the loop (MCP stdio:
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
    /// SIGTERM or SIGINT (the number): stopped between messages.
    Signal(i32),
}

impl Exit {
    pub fn code(self) -> u8 {
        match self {
            Exit::Eof | Exit::ClientGone => 0,
            Exit::Malformed => 3,
            Exit::Refused => 4,
            // As a shell reports a death by that signal: 143, 130.
            Exit::Signal(n) => u8::try_from(128 + n).unwrap_or(1),
        }
    }

    /// The `end` row's `decision`: `eof`, `clientgone`, `malformed`, `refused`,
    /// `sigterm`, `sigint` (`sighup` in journals written before SIGHUP reloaded the
    /// policy). Spelled here, not derived from `Debug`: the journal's words do not
    /// change when a variant is renamed.
    pub fn name(self) -> String {
        match self {
            Exit::Eof => "eof".to_owned(),
            Exit::ClientGone => "clientgone".to_owned(),
            Exit::Malformed => "malformed".to_owned(),
            Exit::Refused => "refused".to_owned(),
            Exit::Signal(n) => crate::signals::name(n),
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
    /// A relayed resources, prompts or completion request (issue 33).
    Relay(crate::tools::upstream::resources::RelayError),
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
            RpcError::Relay(e) => ErrorCode(e.code()),
        }
    }

    /// The counter key.
    pub(crate) fn reason(&self) -> Reason {
        match self {
            RpcError::Frame(f) => f.reason(),
            RpcError::Json(JsonError::DuplicateKey { .. }) => Reason::JsonDuplicateKey,
            RpcError::Json(JsonError::TooDeep { .. }) => Reason::JsonTooDeep,
            RpcError::Json(JsonError::TooLarge { .. }) => Reason::JsonTooLarge,
            RpcError::Json(JsonError::Syntax(_)) => Reason::JsonParse,
            RpcError::Shape(_) => Reason::InvalidRequest,
            RpcError::Lifecycle(Refusal::NotInitialized { .. }) => Reason::NotInitialized,
            RpcError::Lifecycle(Refusal::AlreadyInitialized) => Reason::AlreadyInitialized,
            RpcError::Lifecycle(Refusal::MethodNotFound { .. }) => Reason::MethodNotFound,
            RpcError::Lifecycle(Refusal::InvalidParams(_)) => Reason::InvalidParams,
            RpcError::Lifecycle(Refusal::UnsupportedVersion { .. }) => Reason::UnsupportedVersion,
            RpcError::Lifecycle(Refusal::IdInFlight { .. }) => Reason::IdInFlight,
            RpcError::Call(CallError::UnknownTool { .. }) => Reason::UnknownTool,
            RpcError::Call(_) => Reason::InvalidParams,
            RpcError::Relay(e) => e.reason(),
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
            RpcError::Relay(e) => e.fmt(f),
        }
    }
}

impl std::error::Error for RpcError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            RpcError::Frame(e) => Some(e),
            RpcError::Json(e) => Some(e),
            RpcError::Shape(e) => Some(e),
            RpcError::Lifecycle(e) => Some(e),
            RpcError::Call(e) => Some(e),
            RpcError::Relay(e) => Some(e),
        }
    }
}

pub struct Server<'p, E> {
    /// The policy in force: the one `sp mcp` started with, until a reload (`reload.rs`).
    policy: std::borrow::Cow<'p, Policy>,
    /// SIGHUP and the watched file reload the policy (`sp mcp`; `None` in tests).
    reloading: Option<reload::Reloading<'p>>,
    executor: E,
    options: Options,
    vault: Vault,
    session: Session,
    pub stats: Stats,
    /// The audit journal; [`crate::audit::Journal::off`] unless `with_journal`.
    pub journal: crate::audit::Journal,
    /// What the journal rows for the current request carry.
    audit: crate::audit::Context,
    /// The `tools/list` of a policy with upstreams (`upstreams.rs`); `None`: the fixed
    /// tools' list, made once per process.
    live: Option<std::sync::Arc<LiveList>>,
    /// The upstreams' generation the live list was made at.
    live_generation: Option<u64>,
    /// Upstream list changes not yet told to the client.
    list_changes: u32,
    /// Upstreams' resource and prompt notifications, filtered and rewritten, not yet
    /// sent (`tools/upstream/resources.rs`).
    relayed: Vec<crate::mcp::model::Notification>,
    /// Approval grants (`approve/grants.rs`), when the operator allows any.
    grants: Option<crate::approve::grants::Grants>,
    /// Seals a 2026-07-28 call's `requestState` (`approve/elicit.rs`).
    state_key: crate::approve::elicit::StateKey,
    /// The client's `initialize` capabilities (handshake eras).
    client_caps: Option<Value>,
    /// The current 2026-07-28 call's MRTR members, taken out of its params.
    retry: crate::approve::elicit::Retry,
    /// The rate limits' shared counts (`limits.rs`), when the policy has rules.
    limiter: Option<crate::gate::limits::Limiter>,
    /// The tasks upstreams created for this session's calls (`tasks.rs`, issue 33).
    tasks: tasks::Book,
}

impl<'p, E: Executor> Server<'p, E> {
    pub fn new(policy: &'p Policy, executor: E, options: Options) -> Self {
        Server {
            policy: std::borrow::Cow::Borrowed(policy),
            reloading: None,
            executor,
            options,
            vault: Vault::for_policy(policy),
            session: Session::AwaitingInit,
            stats: Stats::default(),
            journal: crate::audit::Journal::off(),
            audit: crate::audit::Context::default(),
            grants: None,
            state_key: crate::approve::elicit::StateKey::new(),
            client_caps: None,
            retry: Default::default(),
            limiter: None,
            tasks: Default::default(),
            live: (!policy.upstreams.is_empty()).then(Default::default),
            live_generation: None,
            list_changes: 0,
            relayed: Vec::new(),
        }
    }

    /// What `initialize` and `server/discover` offer: `listChanged` with upstreams, and
    /// when a reload can change the tools (`sp mcp`).
    fn offer(&self) -> Offer {
        let ups = self.policy.upstreams.values();
        Offer {
            list_changed: self.live.is_some() || self.reloading.is_some(),
            resources: ups.clone().any(|u| u.resources.any()),
            prompts: ups.clone().any(|u| u.prompts.any()),
            tasks: ups.clone().any(|u| u.tasks),
        }
    }

    /// Finds and keeps approval grants in `grants` (`sp mcp`: when the policy allows any).
    pub(crate) fn with_grants(mut self, grants: Option<crate::approve::grants::Grants>) -> Self {
        self.grants = grants;
        self
    }

    /// Reads every secret the policy names into the Vault now, before the session
    /// serves and so before any upstream starts (`gate/vault/preload.rs`, issue 31):
    /// whatever an upstream returns is scrubbed of secrets no call has used yet.
    pub(crate) fn with_secrets_preloaded(mut self) -> Self {
        // Through `sys::read_within`'s helper thread, not `sys::at_startup`: an SSH key on
        // a mount that does not answer delays the start by its timeout, never forever.
        let done = self.vault.preload(&self.policy);
        log::info!("redaction: {} secret source(s) read ahead, {} could not be", done.read, done.failed.len());
        self
    }

    /// Journals every decision to `journal`.
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
    /// (`mcp/control`), which answers control messages and notices a cancel or EOF
    /// meanwhile. Input that can block must be the stdin [`Options::nudge`] waits for
    /// (`signals::install`); in-memory input needs no nudge.
    pub fn serve<R: BufRead + Send + 'static, W: Write + Send>(&mut self, input: R, out: &mut ProtocolWriter<W>) -> Exit {
        let o = &self.options;
        let listing = self.listing();
        let reload = self.reloading.as_ref().map(|r| r.asked.clone());
        let link = Link::new(Box::new(input), out, o.nudge.clone(), o.max_line_bytes, o.cancel_on_eof, listing).with_reload(reload);
        // The `Input`'s drop ends the control thread before the scope joins it.
        let exit = std::thread::scope(|scope| self.serve_input(&mut Input::new(&link, scope)));
        self.end_upstreams();
        exit
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
            // SIGHUP or the watched file (`reload.rs`): between messages, never in a call.
            if self.reload_if_asked(io).is_err() {
                return Exit::ClientGone;
            }
            if io.gone {
                return Exit::ClientGone;
            }
            if io.eof {
                return Exit::Eof;
            }
            let (frame, raw) = match io.next_event() {
                Event::Eof => return self.stopped().unwrap_or(Exit::Eof),
                Event::Reload => continue,
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
                    self.reject(Reason::FrameIo);
                    self.audit_raw(&raw);
                    self.journal_reject(Reason::FrameIo, None, &format!("reading stdin failed: {kind}"));
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

    /// A `tools/call` cancelled while it waited behind another: it never
    /// runs and is never answered; a rejection with reason `cancelled`.
    fn cancelled_queued(&mut self, frame: &crate::mcp::frame::Frame) {
        let Some(Message::Request { method, params, .. }) = json::parse(&frame.text).ok().and_then(|v| jsonrpc::classify(v).ok()) else {
            return;
        };
        self.audit = crate::audit::Context { request_fp: Some(crate::audit::request_fp(&method, params.as_ref())), ..Default::default() };
        // The journal's `tool` holds only names sp or a configured upstream may own,
        // scrubbed and bounded (`journal::tool_field`), never any other string.
        let name = params.as_ref().and_then(|p| p["name"].as_str());
        self.audit.tool = name.filter(|n| tools::known(&self.policy, n)).map(journal::tool_field);
        self.reject(Reason::Cancelled);
        self.journal_reject(Reason::Cancelled, Some(ToolCode::Cancelled.as_str()), "cancelled by the client before it ran");
    }

    /// A request that reused an id in flight (`mcp/control`): refused with `id: null`, so
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
        self.journal_reject(err.reason(), Some(&err.code().to_string()), &err.to_string());
        if io.write(|out| out.send(&error_response(None, &err))).is_err() {
            return Some(Exit::ClientGone);
        }
        self.options.close_on_refusal.then_some(Exit::Refused)
    }

    /// Is anybody told about requests: the journal, or the approver (which also gets
    /// the request's fingerprint, tool and target)?
    fn audited(&self) -> bool {
        self.journal.is_on() || self.policy.approval.command.is_some() || self.policy.approval.via.contains(&crate::policy::approval::Via::Elicitation)
    }

    fn reject(&mut self, reason: Reason) {
        *self.stats.rejections.entry(reason.as_str()).or_default() += 1;
    }

    /// `id`: the request id when it could be read (echoed), else the answer has `id: null`.
    fn close_malformed<W: Write + Send>(&mut self, io: &Input<'_, '_, '_, W>, id: Option<&Id>, err: RpcError) -> Exit {
        log::warn!("closing the session: {err}");
        self.reject(err.reason());
        self.journal_reject(err.reason(), Some(&err.code().to_string()), &err.to_string());
        match io.write(|out| out.send(&error_response(id, &err))) {
            Ok(()) => Exit::Malformed,
            Err(_) => Exit::ClientGone,
        }
    }

    /// Handles one well-formed message; `Some(exit)` ends the session.
    fn message<W: Write + Send>(&mut self, mut message: Message, io: &mut Input<'_, '_, '_, W>) -> Option<Exit> {
        // A call's MRTR members (2026-07-28) are the answer to sp's own question, not
        // part of the call: out before the fingerprint, so the retry has the first call's.
        self.retry = Default::default();
        let mut caps = None;
        if let Message::Request { method, params: Some(Value::Object(p)), .. } = &mut message {
            match method.as_str() {
                "tools/call" => {
                    self.retry.input_responses = p.remove("inputResponses");
                    self.retry.request_state = p.remove("requestState");
                    self.retry.capabilities = p.get("_meta").and_then(|m| m.get(crate::mcp::session::META_CLIENT_CAPABILITIES)).cloned();
                }
                "initialize" => caps = p.get("capabilities").cloned(),
                _ => {}
            }
        }
        // Every row written for this request, and the approver, get its fingerprint
        // (not computed when neither exists: it is a canonical JSON and a hash).
        if let Message::Request { method, params, .. } = &message {
            let request_fp = self.audited().then(|| crate::audit::request_fp(method, params.as_ref()));
            self.audit = crate::audit::Context { request_fp, ..Default::default() };
        }
        let session = std::mem::replace(&mut self.session, Session::AwaitingInit);
        let was_waiting = session == Session::AwaitingInit;
        let was_ready = matches!(session, Session::Ready { .. });
        let (next, step) = session.handle_offering(&message, self.offer());
        if was_waiting && matches!(next, Session::Initializing { .. }) {
            self.client_caps = caps;
        }
        let became_ready = !was_ready && matches!(next, Session::Ready { .. });
        self.session = next;
        let (id, params, method) = match message {
            Message::Notification { method, .. } => {
                log::debug!("notification {method:?}");
                // A change noted before the handshake was done (a reload, an upstream's
                // news) is told as soon as it is: waiting for the next request would
                // keep it from a client that waits for it before it asks anything.
                if became_ready && self.tell_list_changes(io).is_err() {
                    return Some(Exit::ClientGone);
                }
                return None;
            }
            Message::Request { id, params, method } => (id, params, method),
        };
        let (response, refused, era) = match step {
            Step::Ignore => return None,
            Step::Reply(result, era) => (Outgoing::Answer(Answer::Result(result)), false, era),
            Step::ListTools(era) => (Outgoing::List(id.to_value()), false, era),
            Step::Refuse(r) => {
                let (response, refused) = self.refuse_rpc(&id, RpcError::Lifecycle(r));
                (Outgoing::Answer(response), refused, Era::Handshake)
            }
            Step::Relay(era) => match self.relay(&id, &method, params, era, io) {
                Some((response, refused)) => (Outgoing::Answer(response), refused, era),
                None => return io.gone.then_some(Exit::ClientGone),
            },
            Step::CallTool(era) => match self.call_tool(&id, params, era, io) {
                Some((response, refused)) => (response, refused, era),
                // Cancelled: never answered.
                None => return io.gone.then_some(Exit::ClientGone),
            },
        };
        // Listing may start upstreams (seconds): the control thread serves meanwhile.
        let live = match &response {
            Outgoing::List(_) if self.live.is_some() => match self.current_list(era) {
                Some(current) => Some(current),
                None => {
                    let live = self.not_deaf(io, &id, |s| s.live_list(era));
                    if io.cancel_requested {
                        return io.gone.then_some(Exit::ClientGone);
                    }
                    live
                }
            },
            _ => None,
        };
        let sent = io.write(|out| match (response, live) {
            // Stamped already for 2026-07-28.
            (Outgoing::List(id), Some(result)) => out.send(&RawListAnswer { id, result }),
            (Outgoing::List(id), None) => out.send(&tools::list_for(&self.policy).answer(id, era)),
            (Outgoing::Answer(a), _) => out.send(&Response::new(id.to_value(), a, era)),
            (Outgoing::Message(m), _) => out.send(&m),
        });
        if sent.is_err() || self.tell_list_changes(io).is_err() {
            return Some(Exit::ClientGone);
        }
        (refused && self.options.close_on_refusal).then_some(Exit::Refused)
    }

    fn refuse_rpc(&mut self, _id: &Id, err: RpcError) -> (Answer, bool) {
        log::info!("refused: {err}");
        self.reject(err.reason());
        self.journal_reject(err.reason(), Some(&err.code().to_string()), &err.to_string());
        (Answer::Error(error_data(&err)), true)
    }

    fn refuse_tool(&mut self, _id: &Id, r: Rejection) -> (Outgoing, bool) {
        let refusal = crate::mcp::model::CallToolResult::refusal(r.code, r.message);
        let message = refusal.message().unwrap_or_default();
        log::info!("refused ({}): {message}", r.code);
        self.reject(r.reason);
        self.journal_reject(r.reason, Some(r.code.as_str()), message);
        (Outgoing::Answer(Answer::Call(refusal)), true)
    }
}

/// The memory cap for a request's parsed JSON: [`json::MAX_PARSED_BYTES`], or
/// twice a larger line limit.
pub(crate) fn max_parsed_bytes(max_line_bytes: usize) -> usize {
    json::MAX_PARSED_BYTES.max(max_line_bytes.saturating_mul(2))
}

/// An answer as it is sent: typed (`mcp::model::Response`), or the cached `tools/list`.
enum Outgoing {
    Answer(Answer),
    /// A response built whole (2026-07-28 `input_required`).
    Message(Response),
    /// `tools/list`, to this id (`tools::list_for`).
    List(Value),
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
mod tests;
