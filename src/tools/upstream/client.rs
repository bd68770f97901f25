//! The MCP client `sp` runs toward one upstream: a small blocking state machine over a
//! [`Transport`]. It owns the request ids, so a response is accepted only for the one
//! request it is waiting on (or dropped, for a request it gave up on); anything else
//! ends the upstream.
//!
//! ```text
//!  spawned ──initialize──> Initializing ──result, a version sp speaks──> Ready
//!                              │ error, timeout, other version,            │ (after sending
//!                              │ bad line ──> Dead (transport closed)      │ notifications/initialized)
//!                                                                          v
//!  Ready ──request(id)──> Waiting(id) ──response(id)────────────────────> Ready
//!                            │ response(abandoned id)       ─> dropped, still Waiting
//!                            │ request from the upstream    ─> answered (ping: {}, else
//!                            │                                 -32601), logged, still Waiting
//!                            │ elicitation/create during a tools/call with a handler
//!                            │                              ─> the handler's answer (`elicit.rs`,
//!                            │                                 issue 33), still Waiting
//!                            │ notifications/progress (our token, increasing, at most
//!                            │   one per PROGRESS_INTERVAL)  ─> callback, still Waiting
//!                            │ notifications/tools/list_changed   ─> flag, still Waiting
//!                            │ resources/prompts list_changed, resources/updated
//!                            │                              ─> kept for relaying (issue 33)
//!                            │ other notification           ─> counted, dropped, still Waiting
//!                            │ cancel ──> notifications/cancelled(id), id abandoned ──> Ready
//!                            │ timeout ─> notifications/cancelled(id), id abandoned,
//!                            │            ping within PING_GRACE ── answered ──> Ready
//!                            │                                   └─ not ──────> Dead (killed)
//!                            └ bad line, unknown id, EOF, oversize ───────────> Dead (killed)
//! ```
//!
//! An upstream whose policy says `"protocol": "2026-07-28"` is asked `server/discover`
//! first and, when it offers that revision, spoken to without the handshake
//! (`client/modern.rs`: per-request `_meta`, `input_required` answers).
//!
//! Lifecycle, cancellation and progress follow MCP 2025-11-25 (basic/lifecycle,
//! basic/utilities/cancellation, basic/utilities/progress): `sp` offers the newest
//! revision it speaks and accepts any revision in [`wire::VERSIONS`]; after a
//! cancellation "the receiver MAY still send a response", so late answers to abandoned
//! ids are dropped, never fatal.

use std::collections::VecDeque;
use std::fmt;
use std::time::{Duration, Instant};

use serde_json::{json, Map, Value};

mod modern;
mod orphans;

use super::transport::{Recv, Transport, TransportError};
use super::wire::{self, Inbound, Initialized, InitError, ProgressParams, RpcError, WireError};
use crate::gate::exec::Cancel;
use crate::mcp::jsonrpc::Id;
use crate::mcp::model::outgoing::reply_value;
use crate::mcp::model::{ErrorCode, ErrorData, Notification, Request};

/// How long a timed-out upstream has to answer a `ping` before it is taken as hung.
pub(crate) const PING_GRACE: Duration = Duration::from_secs(2);
/// Writing a notification or an answer to the upstream: it must read within this.
const SEND_GRACE: Duration = Duration::from_secs(2);
/// Progress notes passed on at most this often; the ones between are dropped (progress
/// is advisory), so an upstream cannot flood the agent's client through sp.
pub(crate) const PROGRESS_INTERVAL: Duration = Duration::from_millis(100);
/// Refusals of the upstream's requests logged one by one; later ones are counted only.
const LOGGED_REFUSALS: u64 = 10;
/// Abandoned ids remembered (their late answers dropped); older ones are forgotten, and
/// a late answer to them then ends the upstream like any unknown id.
const MAX_ABANDONED: usize = 64;

/// A notification about an upstream's resources or prompts, kept for the server to
/// relay to its client when the policy allows (`resources.rs`, issue 33).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Relay {
    ResourcesChanged,
    PromptsChanged,
    /// `notifications/resources/updated` for the upstream's own URI (outside text).
    ResourceUpdated {
        uri: String,
    },
}

/// The running call's handler of the upstream's `elicitation/create` (`elicit.rs`):
/// its params and the call's deadline in, the upstream's answer out.
pub(crate) type OnElicit<'h> = &'h mut dyn FnMut(Option<Value>, Instant) -> Result<Value, ErrorData>;

/// Relays kept between two takes; more are dropped (an upstream cannot grow sp's memory).
const MAX_RELAYS: usize = 64;
/// The longest URI a `notifications/resources/updated` may carry to be relayed.
const MAX_RELAY_URI: usize = 4096;

/// Why a request got no result.
#[derive(Debug, PartialEq)]
pub(crate) enum ClientError {
    /// The transport broke (the upstream is closed).
    Transport(TransportError),
    /// The upstream broke the protocol (it is closed).
    Wire(WireError),
    /// `initialize` was refused or not understood (it is closed).
    Init(InitError),
    /// The upstream answered the request with a JSON-RPC error.
    Rpc(RpcError),
    /// No answer before the deadline (`notifications/cancelled` sent). `hung`: it did
    /// not answer a ping either, and is closed.
    TimedOut { hung: bool },
    /// The call's cancel fired (`notifications/cancelled` sent).
    Cancelled,
    /// Closed before.
    Closed,
    /// A 2026-07-28 answer is not of the shape the revision defines (`modern.rs`; the
    /// upstream stays).
    Shape(wire::ShapeError),
    /// A 2026-07-28 upstream asked for what sp does not give (`modern.rs`).
    Unsupported { what: &'static str },
    /// A 2026-07-28 upstream's input request was refused (`modern.rs`): the reason.
    Input { why: String },
}

impl fmt::Display for ClientError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ClientError::Transport(e) => e.fmt(f),
            ClientError::Wire(e) => write!(f, "it broke the protocol: {e}"),
            ClientError::Init(e) => e.fmt(f),
            ClientError::Rpc(e) => write!(f, "it answered error {}: {}", e.code, e.message.cut(wire::MAX_MESSAGE_CHARS)),
            ClientError::TimedOut { hung: false } => f.write_str("it did not answer in time"),
            ClientError::TimedOut { hung: true } => f.write_str("it did not answer in time, nor a ping after: it was ended"),
            ClientError::Cancelled => f.write_str("cancelled"),
            ClientError::Closed => f.write_str("it is not running"),
            ClientError::Shape(e) => write!(f, "its answer is malformed: {e}"),
            ClientError::Unsupported { what } => write!(f, "it asked for {what}, which sp does not give to upstreams"),
            ClientError::Input { why } => write!(f, "its input request was refused: {why}"),
        }
    }
}

impl std::error::Error for ClientError {}

// `wire::InitError`'s, here beside the one error that carries it (wire.rs stays under
// the size limit).
impl fmt::Display for InitError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            InitError::Shape(e) => write!(f, "its initialize answer is malformed: {e}"),
            InitError::Version { offered } => write!(f, "it speaks protocol revision {:?}, which sp does not", offered.cut(wire::MAX_NAME_CHARS).as_str()),
        }
    }
}

impl std::error::Error for InitError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            InitError::Shape(e) => Some(e),
            InitError::Version { .. } => None,
        }
    }
}

impl ClientError {
    /// Whether the upstream is closed after this error.
    pub(crate) fn closed(&self) -> bool {
        matches!(self, ClientError::Transport(_) | ClientError::Wire(_) | ClientError::Init(_) | ClientError::TimedOut { hung: true } | ClientError::Closed)
    }
}

/// What the client counted (for logs, `sp check --probe` and tests).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Counters {
    /// Notifications other than progress for a running call and list_changed.
    pub dropped_notifications: u64,
    /// Requests from the upstream answered with an error.
    pub refused_requests: u64,
    /// Pings from the upstream answered.
    pub pings: u64,
    /// Late answers to abandoned requests.
    pub late_answers: u64,
}

/// One progress report of a running call, in the upstream's numbers (MCP requires them
/// to increase; reports that do not are dropped here).
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct ProgressNote {
    pub progress: f64,
    pub total: Option<f64>,
    /// The upstream's words, whole: shown only scrubbed, then cut (`gate::outside`).
    pub message: Option<crate::gate::outside::Outside>,
}

pub(crate) struct Client<T: Transport> {
    name: String,
    transport: T,
    next_id: i64,
    closed: bool,
    abandoned: VecDeque<i64>,
    /// Abandoned task-augmented calls and the tasks their late answers created (`orphans.rs`).
    orphans: orphans::Orphans,
    list_changed: bool,
    relays: Vec<Relay>,
    info: Initialized,
    counters: Counters,
    /// It speaks 2026-07-28 (`modern.rs`): every request carries `_meta`, answers may be
    /// `input_required`.
    modern: bool,
    /// What sp declares to it (each modern request carries it).
    capabilities: Value,
}

impl<T: Transport> Client<T> {
    /// Runs the handshake: `initialize` (answered within `timeout`), then
    /// `notifications/initialized`. On failure the transport is closed.
    pub(crate) fn initialize(name: &str, transport: T, timeout: Duration, cancel: &Cancel) -> Result<Client<T>, ClientError> {
        Client::initialize_with(name, transport, timeout, cancel, Value::Object(Map::new()))
    }

    /// [`Client::initialize`] declaring `capabilities` (the elicitation the policy
    /// relays for this upstream, issue 33).
    pub(crate) fn initialize_with(name: &str, transport: T, timeout: Duration, cancel: &Cancel, capabilities: Value) -> Result<Client<T>, ClientError> {
        Client::start(name, transport, timeout, cancel, capabilities, false)
    }

    /// [`Client::initialize_with`]; `modern`: `server/discover` first, and 2026-07-28
    /// when the upstream offers it (`modern.rs`), else the handshake.
    pub(crate) fn start(name: &str, transport: T, timeout: Duration, cancel: &Cancel, capabilities: Value, modern: bool) -> Result<Client<T>, ClientError> {
        let mut client = Client {
            name: name.to_owned(),
            transport,
            next_id: 1,
            closed: false,
            abandoned: VecDeque::new(),
            orphans: Default::default(),
            list_changed: false,
            relays: Vec::new(),
            info: Initialized { version: wire::VERSIONS[0], list_changed: false, has_tools: false, tasks: Default::default() },
            counters: Counters::default(),
            modern: false,
            capabilities: capabilities.clone(),
        };
        if modern && client.discover(timeout, cancel)? {
            return Ok(client);
        }
        let params = json!({
            "protocolVersion": wire::VERSIONS[0],
            "capabilities": capabilities,
            "clientInfo": {"name": "sallyport", "version": env!("CARGO_PKG_VERSION")}
        });
        let answer = client.request("initialize", params, timeout, cancel, &mut |_| {});
        let result = match answer {
            Ok(r) => r,
            Err(e) => {
                client.close();
                return Err(match e {
                    // A refused or timed-out handshake leaves nothing to talk to.
                    ClientError::TimedOut { .. } => ClientError::TimedOut { hung: true },
                    e => e,
                });
            }
        };
        match wire::initialize(&result) {
            Ok(info) => {
                client.transport.negotiated(info.version);
                client.info = info;
            }
            Err(e) => {
                client.close();
                return Err(ClientError::Init(e));
            }
        }
        client.notify("notifications/initialized", None)?;
        log::info!("upstream {}: ready (protocol {})", client.name, client.info.version);
        Ok(client)
    }

    #[cfg(test)]
    pub(crate) fn counters(&self) -> &Counters {
        &self.counters
    }

    pub(crate) fn is_closed(&self) -> bool {
        self.closed
    }

    pub(crate) fn transport(&self) -> &T {
        &self.transport
    }

    /// What the upstream's `initialize` said of tasks (issue 33, section 4).
    pub(crate) fn task_caps(&self) -> wire::task::TaskCaps {
        self.info.tasks
    }

    /// Whether a `notifications/tools/list_changed` came since the last listing.
    pub(crate) fn list_changed(&self) -> bool {
        self.list_changed
    }

    /// Whether the upstream announced `notifications/tools/list_changed` since the last
    /// call of this (the flag is cleared).
    pub(crate) fn take_list_changed(&mut self) -> bool {
        std::mem::take(&mut self.list_changed)
    }

    /// The resource and prompt notifications kept since the last take.
    pub(crate) fn take_relays(&mut self) -> Vec<Relay> {
        std::mem::take(&mut self.relays)
    }

    pub(crate) fn close(&mut self) {
        if !self.closed {
            self.closed = true;
            self.transport.close();
        }
    }

    fn fail(&mut self, e: ClientError) -> ClientError {
        if e.closed() {
            self.close();
        }
        e
    }

    fn notify(&mut self, method: &str, params: Option<Value>) -> Result<(), ClientError> {
        self.send(&Notification::upstream(method, params).into_value())
    }

    fn send(&mut self, msg: &Value) -> Result<(), ClientError> {
        if self.closed {
            return Err(ClientError::Closed);
        }
        let r = self.transport.send(msg, Instant::now() + SEND_GRACE, &Cancel::new());
        r.map_err(|e| self.fail(ClientError::Transport(e)))
    }

    /// Sends `method` and waits for its answer (a result, or the upstream's error) until
    /// `timeout` or `cancel`; messages that arrive meanwhile are handled as the module
    /// doc's diagram says. `tools/call` reports progress through `on_progress`.
    pub(crate) fn request(
        &mut self,
        method: &str,
        params: Value,
        timeout: Duration,
        cancel: &Cancel,
        on_progress: &mut dyn FnMut(ProgressNote),
    ) -> Result<Value, ClientError> {
        self.request_with(method, params, timeout, cancel, on_progress, None)
    }

    /// [`Client::request`]; an `elicitation/create` that comes meanwhile (or, from a
    /// 2026-07-28 upstream, as an `input_required` answer, `modern.rs`) goes to
    /// `on_elicit` when there is one (a `tools/call` only: [`Client::call_tool_eliciting`]).
    fn request_with(
        &mut self,
        method: &str,
        params: Value,
        timeout: Duration,
        cancel: &Cancel,
        on_progress: &mut dyn FnMut(ProgressNote),
        on_elicit: Option<OnElicit<'_>>,
    ) -> Result<Value, ClientError> {
        match self.modern {
            false => self.exchange(method, params, timeout, cancel, on_progress, on_elicit),
            true => self.request_modern(method, params, timeout, cancel, on_progress, on_elicit),
        }
    }

    /// One request and its answer (one round of a 2026-07-28 request).
    fn exchange(
        &mut self,
        method: &str,
        mut params: Value,
        timeout: Duration,
        cancel: &Cancel,
        on_progress: &mut dyn FnMut(ProgressNote),
        mut on_elicit: Option<OnElicit<'_>>,
    ) -> Result<Value, ClientError> {
        if self.closed {
            return Err(ClientError::Closed);
        }
        if cancel.is_cancelled() {
            return Err(ClientError::Cancelled);
        }
        let id = self.next_id;
        self.next_id += 1;
        let task_call = method == "tools/call" && params.get("task").is_some();
        let token = (method == "tools/call").then(|| Value::from(id));
        if let (Some(t), Some(p)) = (&token, params.as_object_mut()) {
            let meta = p.entry("_meta").or_insert_with(|| Value::Object(Map::new()));
            if let Some(m) = meta.as_object_mut() {
                m.insert("progressToken".into(), t.clone());
            }
        }
        let deadline = Instant::now() + timeout;
        let msg = Request::upstream(id, method, params).into_value();
        if let Err(e) = self.transport.send(&msg, deadline, cancel) {
            return Err(self.fail(ClientError::Transport(e)));
        }
        let mut last_progress: Option<f64> = None;
        let mut last_note: Option<Instant> = None;
        loop {
            let got = match self.transport.recv(deadline, cancel) {
                Ok(g) => g,
                Err(e) => return Err(self.fail(ClientError::Transport(e))),
            };
            let value = match got {
                Recv::Message(v) => v,
                Recv::Cancelled => {
                    self.abandon(id, "cancelled by the client");
                    self.orphans.watch(id, task_call);
                    return Err(ClientError::Cancelled);
                }
                Recv::TimedOut => {
                    self.abandon(id, "timed out");
                    self.orphans.watch(id, task_call);
                    // 2026-07-28 has no ping; a probe that is not answered is a legacy upstream.
                    let hung = !self.modern && !matches!(method, "initialize" | "ping" | "server/discover") && !self.answers_ping();
                    return Err(self.fail(ClientError::TimedOut { hung }));
                }
            };
            match wire::classify(value) {
                Err(e) => return Err(self.fail(ClientError::Wire(e))),
                Ok(Inbound::Response { id: rid, outcome }) if rid == id => {
                    return outcome.map_err(ClientError::Rpc);
                }
                Ok(Inbound::Response { id: rid, outcome }) => self.late(rid, &outcome)?,
                Ok(Inbound::Request { id: rid, method: m, params: p }) => match on_elicit.as_mut() {
                    Some(handle) if m == "elicitation/create" => {
                        let reply = handle(p, deadline);
                        self.send(&reply_value(rid.to_value(), reply))?;
                    }
                    _ => self.answer(rid, &m)?,
                },
                Ok(Inbound::Notification { method: m, params: p }) => {
                    if m == "notifications/progress" {
                        if let Some(ProgressParams { token: t, progress, total, message }) = wire::progress(p.as_ref())
                            && token.as_ref() == Some(&t)
                            && last_progress.is_none_or(|l| progress > l)
                            && last_note.is_none_or(|t| t.elapsed() >= PROGRESS_INTERVAL)
                        {
                            last_progress = Some(progress);
                            last_note = Some(Instant::now());
                            on_progress(ProgressNote { progress, total, message });
                            continue;
                        }
                        self.counters.dropped_notifications += 1;
                    } else {
                        self.notification(&m, p.as_ref());
                    }
                }
            }
        }
    }

    fn notification(&mut self, method: &str, params: Option<&Value>) {
        match method {
            "notifications/tools/list_changed" => return self.list_changed = true,
            "notifications/tasks/status" => return self.orphans.status(params),
            _ => {}
        }
        let relay = match method {
            "notifications/resources/list_changed" => Some(Relay::ResourcesChanged),
            "notifications/prompts/list_changed" => Some(Relay::PromptsChanged),
            "notifications/resources/updated" => params
                .and_then(|p| p.get("uri"))
                .and_then(Value::as_str)
                .filter(|u| u.len() <= MAX_RELAY_URI)
                .map(|uri| Relay::ResourceUpdated { uri: uri.to_owned() }),
            _ => None,
        };
        if let Some(r) = relay {
            if !self.relays.contains(&r) && self.relays.len() < MAX_RELAYS {
                self.relays.push(r);
            }
            return;
        }
        self.counters.dropped_notifications += 1;
        if self.counters.dropped_notifications == 1 {
            log::debug!("upstream {}: notification {} dropped (later ones are counted only)", self.name, shown_method(method));
        }
    }

    /// Answers a request from the upstream: `ping` with `{}`, anything else (sampling,
    /// roots, ...) with -32601, since `sp` offers none to upstreams; so is an
    /// elicitation that comes while no call of this upstream runs (or without a handler).
    fn answer(&mut self, id: Id, method: &str) -> Result<(), ClientError> {
        let reply = if method == "ping" {
            self.counters.pings += 1;
            reply_value(id.to_value(), Ok(Value::Object(Map::new())))
        } else if method == "elicitation/create" {
            self.counters.refused_requests += 1;
            log::warn!("upstream {}: asked sp for elicitation/create while none of its calls ran (or the session cannot relay it): refused", self.name);
            let why = "sp relays elicitation/create from an upstream only while a tools/call of that upstream runs, when the policy allows it";
            reply_value(id.to_value(), Err(ErrorData::new(ErrorCode::METHOD_NOT_FOUND, why)))
        } else {
            self.counters.refused_requests += 1;
            let shown = shown_method(method);
            if self.counters.refused_requests <= LOGGED_REFUSALS {
                log::warn!("upstream {}: asked sp for {shown}: refused (sp offers no client features to upstreams)", self.name);
            }
            reply_value(id.to_value(), Err(ErrorData::new(ErrorCode::METHOD_NOT_FOUND, format!("sp does not offer {shown} to upstreams"))))
        };
        self.send(&reply)
    }

    /// Gives up on `id`: the upstream is told (`notifications/cancelled`), a late answer
    /// will be dropped.
    fn abandon(&mut self, id: i64, reason: &str) {
        if self.abandoned.len() == MAX_ABANDONED {
            self.abandoned.pop_front();
        }
        self.abandoned.push_back(id);
        let _ = self.notify("notifications/cancelled", Some(json!({"requestId": id, "reason": reason})));
    }

    /// Reads, without waiting, what the upstream wrote while no request of sp's was
    /// open: a `notifications/tools/list_changed` is noted, a ping answered, a late
    /// answer dropped; anything else is handled as during a request (a broken line or
    /// an answer to no request ends the upstream).
    pub(crate) fn poll(&mut self) -> Result<(), ClientError> {
        if self.closed {
            return Ok(());
        }
        let cancel = Cancel::new();
        loop {
            let got = match self.transport.recv(Instant::now(), &cancel) {
                Ok(Recv::Message(v)) => v,
                Ok(_) => return Ok(()),
                Err(e) => return Err(self.fail(ClientError::Transport(e))),
            };
            self.idle(got)?;
        }
    }

    /// One message read while no request of sp's is open ([`Client::poll`]).
    fn idle(&mut self, got: Value) -> Result<(), ClientError> {
        match wire::classify(got) {
            Err(e) => Err(self.fail(ClientError::Wire(e))),
            Ok(Inbound::Response { id, outcome }) => self.late(id, &outcome),
            Ok(Inbound::Request { id, method, .. }) => self.answer(id, &method),
            Ok(Inbound::Notification { method, .. }) if method == "notifications/progress" => {
                self.counters.dropped_notifications += 1;
                Ok(())
            }
            Ok(Inbound::Notification { method, params }) => {
                self.notification(&method, params.as_ref());
                Ok(())
            }
        }
    }

    /// Whether the upstream answers a `ping` within [`PING_GRACE`].
    fn answers_ping(&mut self) -> bool {
        if self.closed {
            return false;
        }
        match self.request("ping", json!({}), PING_GRACE, &Cancel::new(), &mut |_| {}) {
            Ok(_) | Err(ClientError::Rpc(_)) => true,
            Err(_) => false,
        }
    }

    /// `tools/call` of the upstream's own tool `name`.
    pub(crate) fn call_tool(
        &mut self,
        name: &str,
        arguments: Map<String, Value>,
        timeout: Duration,
        cancel: &Cancel,
        on_progress: &mut dyn FnMut(ProgressNote),
    ) -> Result<Value, ClientError> {
        self.request("tools/call", json!({"name": name, "arguments": arguments}), timeout, cancel, on_progress)
    }

    /// [`Client::call_tool`], the upstream's `elicitation/create` meanwhile handed to
    /// `on_elicit` (issue 33).
    pub(crate) fn call_tool_eliciting(
        &mut self,
        name: &str,
        arguments: Map<String, Value>,
        timeout: Duration,
        cancel: &Cancel,
        on_progress: &mut dyn FnMut(ProgressNote),
        on_elicit: OnElicit<'_>,
    ) -> Result<Value, ClientError> {
        self.request_with("tools/call", json!({"name": name, "arguments": arguments}), timeout, cancel, on_progress, Some(on_elicit))
    }
}

/// An upstream's method name as a log line or an answer names it: scrubbed whole, then
/// cut to 64 characters (issue 31, section 3: cut first, a secret's prefix stayed).
pub(crate) fn shown_method(method: &str) -> crate::gate::vault::Scrubbed<String> {
    crate::gate::outside::cut(method, 64)
}

impl<T: Transport> Drop for Client<T> {
    fn drop(&mut self) {
        self.close();
    }
}
