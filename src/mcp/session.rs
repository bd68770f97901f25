//! Stage 4: the MCP lifecycle, as an owned state machine with no I/O.
//!
//! ```text
//!                initialize (version negotiated)        notifications/initialized
//!  AwaitingInit ─────────────────────────────> Initializing ─────────────────────> Ready
//!     │ ping: answered                            │ ping: answered                 │ ping, tools/list,
//!     │ tools/*: -32600 not initialized           │ tools/*: -32600                │ tools/call
//!     │ unknown method: -32601                    │ initialize again: -32600       │ initialize: -32600
//!     │ notifications: ignored                    │                                │ unknown: -32601
//! ```
//!
//! `handle` consumes the state and returns the next one with a [`Step`] for the server
//! to carry out. A refused request never changes the state, so the next request inherits
//! nothing from it. Versions (MCP "Lifecycle: version negotiation"): a supported requested
//! version is echoed, any other gets the newest we support.
//!
//! Forward compatibility: members of `params` this server does not know are
//! ignored, as the MCP schemas allow new optional members in every revision (`ping
//! {"x":1}`, `tools/list {"futureParam":true}`). A `tools/call`'s 2025-11-25 `task`
//! augmentation is read by the tool table: it makes a task only of an upstream's tool
//! whose tasks the policy relays (issue 33, section 4); any other call runs as an
//! ordinary one. `tasks/get`, `tasks/result` and `tasks/cancel` exist only in the
//! handshake eras and only when some upstream's tasks are relayed (`Offer::tasks`);
//! `tasks/list` is not offered (-32601).
//! The params' *type* is still checked (an object or absent), and so are the members we
//! read. Tool *arguments* stay strict (unknown argument names are refused), and so does
//! the message shape (a top-level member beyond `jsonrpc`, `id`, `method`, `params` is a
//! malformed message, `sp(1)` SESSION POLICY).

use std::fmt;

use serde_json::{json, Map, Value};

use crate::mcp::jsonrpc::{kind_of, Message};

/// The handshake revisions (negotiated by `initialize`), newest first.
pub(crate) const SUPPORTED_VERSIONS: [&str; 4] = ["2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05"];

/// The stateless revision: no handshake; every request names its version in `_meta`.
pub(crate) const STATELESS_VERSION: &str = "2026-07-28";

/// What `server/discover` and -32022 list: the stateless revision and the handshake ones.
pub(crate) const ALL_VERSIONS: [&str; 5] = [STATELESS_VERSION, "2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05"];

/// `_meta` keys of the stateless revision (2026-07-28 schema.ts `RequestMetaObject`).
pub(crate) const META_PROTOCOL_VERSION: &str = "io.modelcontextprotocol/protocolVersion";
pub(crate) const META_CLIENT_CAPABILITIES: &str = "io.modelcontextprotocol/clientCapabilities";
pub(crate) const META_SERVER_INFO: &str = "io.modelcontextprotocol/serverInfo";

/// How long a client may cache `server/discover` and `tools/list` (2026-07-28
/// "Caching"): the tool list is fixed for the life of the binary, so an hour is safe.
pub(crate) const CACHE_TTL_MS: u64 = 3_600_000;

/// What the server offers beyond the fixed tools: `listChanged` when upstream MCP
/// servers' tools are listed (they can change, and sp forwards their
/// `notifications/tools/list_changed`).
/// `resources` and `prompts` (issue 33) when the policy relays some of an upstream's
/// (decided from the policy alone: sp(1) RESOURCES AND PROMPTS), and `completions`
/// with either.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Offer {
    pub list_changed: bool,
    pub resources: bool,
    pub prompts: bool,
    /// Some upstream's tasks are relayed (`"tasks": true`): the handshake answer declares
    /// `tasks` (cancel, task-augmented tools/call), and the task methods are served.
    pub tasks: bool,
}

/// The task methods served when `offer.tasks` (the handshake eras only: 2026-07-28 moved
/// tasks to an extension sp does not speak).
fn task_method(method: &str, offer: Offer) -> Option<bool> {
    matches!(method, "tasks/get" | "tasks/result" | "tasks/cancel").then_some(offer.tasks)
}

/// The relayed methods (issue 33) and whether `offer` serves each.
fn relays(method: &str, offer: Offer) -> Option<bool> {
    match method {
        "resources/list" | "resources/templates/list" | "resources/read" => Some(offer.resources),
        "prompts/list" | "prompts/get" => Some(offer.prompts),
        "completion/complete" => Some(offer.resources || offer.prompts),
        _ => None,
    }
}

impl Offer {
    /// `capabilities`: `explicit` spells `listChanged: false` (the handshake answer
    /// always has); `server/discover` names it only when true.
    fn capabilities(self, explicit: bool) -> Value {
        let mut caps = match (self.list_changed, explicit) {
            (true, _) => json!({"tools": {"listChanged": true}}),
            (false, true) => json!({"tools": {"listChanged": false}}),
            (false, false) => json!({"tools": {}}),
        };
        // Subscriptions are not offered (resources/subscribe is -32601).
        if self.resources {
            caps["resources"] = json!({"listChanged": true});
        }
        if self.prompts {
            caps["prompts"] = json!({"listChanged": true});
        }
        if self.resources || self.prompts {
            caps["completions"] = json!({});
        }
        // MCP 2025-11-25 "Tasks": no `list` (sp does not list tasks, -32601).
        if self.tasks && explicit {
            caps["tasks"] = json!({"cancel": {}, "requests": {"tools": {"call": {}}}});
        }
        caps
    }
}

/// Which revision's rules a request is served under.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Era {
    /// The handshake revisions: the session's lifecycle state applies.
    Handshake,
    /// 2026-07-28: served from the request alone, whatever the connection did before.
    Stateless,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Session {
    AwaitingInit,
    Initializing { version: &'static str },
    Ready { version: &'static str },
}

/// What the server must do for one message.
#[derive(Debug, PartialEq)]
pub enum Step {
    /// Answer the request with this result.
    Reply(Value, Era),
    /// Answer the request with this JSON-RPC error; nothing else happens.
    Refuse(Refusal),
    /// Answer with the tool list.
    ListTools(Era),
    /// Relay a resources, prompts or completion request to the upstreams (issue 33).
    Relay(Era),
    /// Run the tool pipeline on the request's `tools/call` params (the caller moves them
    /// out of the message: no copy of a large call).
    CallTool(Era),
    /// A notification: never answered.
    Ignore,
}

#[derive(Debug, PartialEq, Eq)]
pub enum Refusal {
    NotInitialized {
        method: String,
    },
    AlreadyInitialized,
    MethodNotFound {
        method: String,
    },
    InvalidParams(String),
    /// A stateless request naming a version this server does not serve that way (-32022).
    UnsupportedVersion {
        requested: String,
    },
    /// A request reusing the id of one still in flight (running, or waiting behind the
    /// running call): -32600 with `id: null` (`sp(1)` SESSION POLICY).
    IdInFlight {
        id: crate::mcp::jsonrpc::Id,
    },
}

impl fmt::Display for Refusal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Refusal::NotInitialized { method } => write!(f, "{:?} before initialization: send initialize, then notifications/initialized", short(method)),
            Refusal::AlreadyInitialized => f.write_str("the session is already initialized"),
            Refusal::MethodNotFound { method } => write!(f, "method not found: {:?}", short(method)),
            Refusal::InvalidParams(m) => f.write_str(m),
            Refusal::UnsupportedVersion { requested } => write!(
                f,
                "unsupported protocol version {:?}: requests without initialize must name {STATELESS_VERSION} in \
                 _meta[{META_PROTOCOL_VERSION:?}]; the handshake revisions start with initialize",
                short(requested)
            ),
            Refusal::IdInFlight { id } => write!(
                f,
                "invalid request: id {} is already in flight (a request with that id is running or waiting); \
                 this request is not run",
                short(&id.to_value().to_string())
            ),
        }
    }
}

impl std::error::Error for Refusal {}

fn short(s: &str) -> String {
    crate::sys::short(s, 64, crate::sys::Ellipsis::Silent)
}

impl Session {
    pub fn version(&self) -> Option<&'static str> {
        match self {
            Session::AwaitingInit => None,
            Session::Initializing { version } | Session::Ready { version } => Some(version),
        }
    }

    pub fn handle(self, msg: &Message) -> (Session, Step) {
        self.handle_offering(msg, Offer::default())
    }

    /// [`Session::handle`], declaring what `offer` says in `initialize` and
    /// `server/discover`.
    pub(crate) fn handle_offering(self, msg: &Message, offer: Offer) -> (Session, Step) {
        match msg {
            Message::Notification { method, .. } => {
                let next = match (&self, method.as_str()) {
                    (Session::Initializing { version }, "notifications/initialized") => Session::Ready { version },
                    _ => self,
                };
                (next, Step::Ignore)
            }
            Message::Request { method, params, .. } => self.request(method, params.as_ref(), offer),
        }
    }

    fn request(self, method: &str, params: Option<&Value>, offer: Offer) -> (Session, Step) {
        // 2026-07-28: a request naming its version in `_meta` (and `server/discover`,
        // which exists only there) is served statelessly, in any state, and changes no
        // state. `initialize` always selects the handshake semantics.
        if method == "server/discover" || (method != "initialize" && names_version(params)) {
            let step = stateless(method, params, offer);
            return (self, step);
        }
        let relayed = relays(method, offer).or_else(|| task_method(method, offer));
        let known = matches!(method, "initialize" | "ping" | "tools/list" | "tools/call") || relayed == Some(true);
        if !known {
            return (self, Step::Refuse(Refusal::MethodNotFound { method: method.to_owned() }));
        }
        if method == "ping" {
            return match optional_object(params, "ping") {
                Ok(_) => (self, Step::Reply(json!({}), Era::Handshake)),
                Err(r) => (self, Step::Refuse(r)),
            };
        }
        match (&self, method) {
            (Session::AwaitingInit, "initialize") => match initialize(params, offer) {
                Ok((version, result)) => (Session::Initializing { version }, Step::Reply(result, Era::Handshake)),
                Err(r) => (self, Step::Refuse(r)),
            },
            (_, "initialize") => (self, Step::Refuse(Refusal::AlreadyInitialized)),
            (Session::Ready { .. }, "tools/list") => match optional_object(params, "tools/list") {
                Ok(Some(p)) if p.contains_key("cursor") => (self, Step::Refuse(Refusal::InvalidParams("invalid cursor: the tool list has one page".into()))),
                Ok(_) => (self, Step::ListTools(Era::Handshake)),
                Err(r) => (self, Step::Refuse(r)),
            },
            (Session::Ready { .. }, _) if relayed.is_some() => (self, Step::Relay(Era::Handshake)),
            (Session::Ready { .. }, _) => (self, Step::CallTool(Era::Handshake)),
            _ => (self, Step::Refuse(Refusal::NotInitialized { method: method.to_owned() })),
        }
    }
}

/// Whether `params._meta` names a protocol version (the mark of a 2026-07-28 request).
fn names_version(params: Option<&Value>) -> bool {
    params.and_then(|p| p.get("_meta")).and_then(|m| m.get(META_PROTOCOL_VERSION)).is_some()
}

/// One 2026-07-28 request, from the request alone (nothing depends on connection state).
/// `ping` and `logging/setLevel` do not exist in that revision (-32601); a missing
/// required `_meta` member is -32602 ("Base protocol": a request missing a required
/// field is malformed); a version other than 2026-07-28 is -32022.
fn stateless(method: &str, params: Option<&Value>, offer: Offer) -> Step {
    if !matches!(method, "server/discover" | "tools/list" | "tools/call") && relays(method, offer) != Some(true) {
        return Step::Refuse(Refusal::MethodNotFound { method: method.to_owned() });
    }
    let invalid = |m: String| Step::Refuse(Refusal::InvalidParams(format!("{method}: {m}")));
    let p = match params {
        Some(Value::Object(p)) => p,
        Some(other) => return invalid(format!("params must be an object, found {}", kind_of(other))),
        None => return invalid("params with _meta are required in protocol version 2026-07-28".into()),
    };
    let meta = match p.get("_meta") {
        Some(Value::Object(m)) => m,
        Some(other) => return invalid(format!("_meta must be an object, found {}", kind_of(other))),
        None => return invalid("params._meta is required in protocol version 2026-07-28".into()),
    };
    let requested = match meta.get(META_PROTOCOL_VERSION) {
        Some(Value::String(v)) => v,
        Some(other) => return invalid(format!("_meta[{META_PROTOCOL_VERSION:?}] must be a string, found {}", kind_of(other))),
        None => return invalid(format!("_meta[{META_PROTOCOL_VERSION:?}] is required")),
    };
    match meta.get(META_CLIENT_CAPABILITIES) {
        Some(Value::Object(_)) => {}
        Some(other) => return invalid(format!("_meta[{META_CLIENT_CAPABILITIES:?}] must be an object, found {}", kind_of(other))),
        None => return invalid(format!("_meta[{META_CLIENT_CAPABILITIES:?}] is required")),
    }
    if requested != STATELESS_VERSION {
        return Step::Refuse(Refusal::UnsupportedVersion { requested: requested.clone() });
    }
    match method {
        "server/discover" => Step::Reply(discover(offer), Era::Stateless),
        "tools/list" if p.contains_key("cursor") => Step::Refuse(Refusal::InvalidParams("invalid cursor: the tool list has one page".into())),
        "tools/list" => Step::ListTools(Era::Stateless),
        "tools/call" => Step::CallTool(Era::Stateless),
        _ => Step::Relay(Era::Stateless),
    }
}

/// The `server/discover` result (2026-07-28 `DiscoverResult`; `resultType` and the
/// server info are stamped on by the server like on every stateless result).
fn discover(offer: Offer) -> Value {
    json!({
        "supportedVersions": ALL_VERSIONS,
        "capabilities": offer.capabilities(false),
        "instructions": INSTRUCTIONS,
        "ttlMs": CACHE_TTL_MS,
        "cacheScope": "public",
    })
}

/// `serverInfo` / `_meta["io.modelcontextprotocol/serverInfo"]`.
pub(crate) fn server_info() -> Value {
    json!({"name": "sallyport", "title": "Sallyport", "version": env!("CARGO_PKG_VERSION")})
}

/// Params that may be absent or an object (members we do not read are ignored).
fn optional_object<'a>(params: Option<&'a Value>, method: &str) -> Result<Option<&'a Map<String, Value>>, Refusal> {
    match params {
        None => Ok(None),
        Some(Value::Object(m)) => Ok(Some(m)),
        Some(other) => Err(Refusal::InvalidParams(format!("{method} params must be an object, found {}", kind_of(other)))),
    }
}

fn initialize(params: Option<&Value>, offer: Offer) -> Result<(&'static str, Value), Refusal> {
    let invalid = |m: &str| Refusal::InvalidParams(format!("initialize: {m}"));
    let p = match params {
        Some(Value::Object(p)) => p,
        Some(other) => return Err(invalid(&format!("params must be an object, found {}", kind_of(other)))),
        None => return Err(invalid("params are required")),
    };
    let requested = match p.get("protocolVersion") {
        Some(Value::String(v)) => v.as_str(),
        Some(_) => return Err(invalid("protocolVersion must be a string")),
        None => return Err(invalid("protocolVersion is required")),
    };
    if !matches!(p.get("capabilities"), Some(Value::Object(_))) {
        return Err(invalid("capabilities must be an object"));
    }
    match p.get("clientInfo") {
        Some(Value::Object(ci)) if ci.get("name").is_some_and(Value::is_string) => {}
        _ => return Err(invalid("clientInfo must be an object with a string name")),
    }
    let version = SUPPORTED_VERSIONS.iter().copied().find(|v| *v == requested).unwrap_or(SUPPORTED_VERSIONS[0]);
    let result = json!({
        "protocolVersion": version,
        "capabilities": offer.capabilities(true),
        "serverInfo": server_info(),
        "instructions": INSTRUCTIONS,
    });
    Ok((version, result))
}

/// What `initialize` and `server/discover` tell the model.
const INSTRUCTIONS: &str = "Sallyport runs HTTP requests and SSH commands for you under the operator's \
    policy and injects credentials itself: you never see or send a secret. Call sp_inventory to \
    learn which hosts, methods, paths, credential names and SSH hosts are allowed, then \
    http_request or ssh_exec. Refusals come back as tool results with isError and a code \
    (SP_DENIED, SP_BAD_ARGUMENTS, ...) and a reason. Calls with some credentials or SSH hosts \
    wait for the operator's out-of-band approval (SP_NOT_APPROVED when refused), and every call \
    is recorded in the operator's audit journal.";

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mcp::jsonrpc::Id;

    fn req(method: &str, params: Value) -> Message {
        Message::Request { id: Id::Int(1), method: method.into(), params: if params.is_null() { None } else { Some(params) } }
    }
    fn note(method: &str) -> Message {
        Message::Notification { method: method.into(), params: None }
    }
    fn init(version: &str) -> Message {
        req("initialize", json!({"protocolVersion": version, "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}))
    }

    #[test]
    fn lifecycle() {
        let s = Session::AwaitingInit;
        let (s, step) = s.handle(&req("tools/list", Value::Null));
        assert_eq!(step, Step::Refuse(Refusal::NotInitialized { method: "tools/list".into() }));
        let (s, step) = s.handle(&req("ping", Value::Null));
        assert_eq!(step, Step::Reply(json!({}), Era::Handshake));
        // A discover probe without the 2026-07-28 _meta is malformed for that revision
        // (-32602); a client falls back to initialize on any error.
        let (s, step) = s.handle(&req("server/discover", json!({})));
        assert!(matches!(step, Step::Refuse(Refusal::InvalidParams(m)) if m.contains("_meta is required")));
        let (s, step) = s.handle(&note("notifications/initialized"));
        assert_eq!((&s, step), (&Session::AwaitingInit, Step::Ignore));
        let (s, step) = s.handle(&init("2025-06-18"));
        assert!(matches!(step, Step::Reply(r, Era::Handshake) if r["protocolVersion"] == "2025-06-18"));
        assert_eq!(s, Session::Initializing { version: "2025-06-18" });
        let (s, step) = s.handle(&req("tools/call", json!({"name": "sp_inventory"})));
        assert!(matches!(step, Step::Refuse(Refusal::NotInitialized { .. })));
        let (s, _) = s.handle(&note("notifications/initialized"));
        assert_eq!(s, Session::Ready { version: "2025-06-18" });
        let (s, step) = s.handle(&init("2025-06-18"));
        assert_eq!(step, Step::Refuse(Refusal::AlreadyInitialized));
        let (s, step) = s.handle(&req("tools/list", json!({"cursor": "x"})));
        assert!(matches!(step, Step::Refuse(Refusal::InvalidParams(_))));
        let (s, step) = s.handle(&req("tools/list", Value::Null));
        assert_eq!(step, Step::ListTools(Era::Handshake));
        // Unknown members of known methods' params are ignored.
        let (s, step) = s.handle(&req("tools/list", json!({"futureParam": true, "_meta": {"x": 1}})));
        assert_eq!(step, Step::ListTools(Era::Handshake));
        let (s, step) = s.handle(&req("ping", json!({"x": 1})));
        assert_eq!(step, Step::Reply(json!({}), Era::Handshake));
        let (s, step) = s.handle(&req("ping", json!([1])));
        assert!(matches!(step, Step::Refuse(Refusal::InvalidParams(m)) if m.contains("must be an object")));
        let (s, step) = s.handle(&req("resources/list", Value::Null));
        assert!(matches!(step, Step::Refuse(Refusal::MethodNotFound { .. })));
        // Offered (issue 33): relayed; subscriptions never are.
        let offer = Offer { list_changed: true, resources: true, prompts: false, tasks: false };
        let (s, step) = s.handle_offering(&req("resources/read", json!({"uri": "a+x://y"})), offer);
        assert_eq!(step, Step::Relay(Era::Handshake));
        let (s, step) = s.handle_offering(&req("completion/complete", json!({})), offer);
        assert_eq!(step, Step::Relay(Era::Handshake));
        let (s, step) = s.handle_offering(&req("prompts/list", Value::Null), offer);
        assert!(matches!(step, Step::Refuse(Refusal::MethodNotFound { .. })), "prompts are not offered");
        let (s, step) = s.handle_offering(&req("resources/subscribe", json!({"uri": "a+x://y"})), offer);
        assert!(matches!(step, Step::Refuse(Refusal::MethodNotFound { .. })));
        let (_, step) = s.handle(&req("tools/call", json!("str")));
        assert_eq!(step, Step::CallTool(Era::Handshake));
    }

    /// `initialize` declares resources, prompts and completions only when offered.
    /// Issue 33, section 4: tasks are declared and served only when offered, and only
    /// in the handshake eras; `tasks/list` never is.
    #[test]
    fn tasks_follow_the_offer() {
        let offer = Offer { tasks: true, ..Offer::default() };
        let caps = match Session::AwaitingInit.handle_offering(&init("2025-11-25"), offer).1 {
            Step::Reply(r, _) => r["capabilities"].clone(),
            other => panic!("{other:?}"),
        };
        assert_eq!(caps["tasks"], json!({"cancel": {}, "requests": {"tools": {"call": {}}}}));
        let ready = Session::Ready { version: "2025-11-25" };
        assert_eq!(ready.clone().handle_offering(&req("tasks/get", json!({"taskId": "x"})), offer).1, Step::Relay(Era::Handshake));
        for (method, o) in [("tasks/get", Offer::default()), ("tasks/list", offer)] {
            assert!(matches!(ready.clone().handle_offering(&req(method, json!({})), o).1, Step::Refuse(Refusal::MethodNotFound { .. })), "{method}");
        }
        assert_eq!(discover(offer)["capabilities"].get("tasks"), None, "2026-07-28 moved tasks to an extension");
    }

    #[test]
    fn capabilities_follow_the_offer() {
        let caps = |offer: Offer| match Session::AwaitingInit.handle_offering(&init("2025-06-18"), offer).1 {
            Step::Reply(r, _) => r["capabilities"].clone(),
            other => panic!("{other:?}"),
        };
        assert_eq!(caps(Offer::default()), json!({"tools": {"listChanged": false}}));
        assert_eq!(
            caps(Offer { list_changed: true, resources: true, prompts: true, tasks: false }),
            json!({"tools": {"listChanged": true}, "resources": {"listChanged": true}, "prompts": {"listChanged": true}, "completions": {}})
        );
        assert_eq!(caps(Offer { list_changed: true, resources: false, prompts: true, tasks: false })["resources"], Value::Null);
        let (s, step) = Session::AwaitingInit
            .handle_offering(&req("prompts/list", Value::Null), Offer { list_changed: true, resources: false, prompts: true, tasks: false });
        assert_eq!((s, step), (Session::AwaitingInit, Step::Refuse(Refusal::NotInitialized { method: "prompts/list".into() })));
    }

    #[test]
    fn version_negotiation() {
        for v in SUPPORTED_VERSIONS {
            let (s, _) = Session::AwaitingInit.handle(&init(v));
            assert_eq!(s.version(), Some(v));
        }
        for v in ["2026-07-28", "1999-01-01", ""] {
            let (s, _) = Session::AwaitingInit.handle(&init(v));
            assert_eq!(s.version(), Some("2025-11-25"), "{v}");
        }
    }

    #[test]
    fn bad_initialize_changes_nothing() {
        for p in [
            Value::Null,
            json!("x"),
            json!({}),
            json!({"protocolVersion": 1, "capabilities": {}, "clientInfo": {"name": "t"}}),
            json!({"protocolVersion": "2025-06-18", "clientInfo": {"name": "t"}}),
            json!({"protocolVersion": "2025-06-18", "capabilities": {}}),
            json!({"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {}}),
        ] {
            let (s, step) = Session::AwaitingInit.handle(&req("initialize", p.clone()));
            assert_eq!(s, Session::AwaitingInit, "{p}");
            assert!(matches!(step, Step::Refuse(Refusal::InvalidParams(_))), "{p}");
        }
    }

    fn modern(method: &str, version: Value, caps: Value, extra: Value) -> Message {
        let mut meta = Map::new();
        if !version.is_null() {
            meta.insert(META_PROTOCOL_VERSION.into(), version);
        }
        if !caps.is_null() {
            meta.insert(META_CLIENT_CAPABILITIES.into(), caps);
        }
        let mut params = extra.as_object().cloned().unwrap_or_default();
        params.insert("_meta".into(), Value::Object(meta));
        req(method, Value::Object(params))
    }

    /// 2026-07-28 requests are served from the request alone, in every state,
    /// and change no state.
    #[test]
    fn stateless_requests_in_every_state() {
        let ready = {
            let (s, _) = Session::AwaitingInit.handle(&init("2025-06-18"));
            s.handle(&note("notifications/initialized")).0
        };
        for state in [Session::AwaitingInit, Session::Initializing { version: "2025-06-18" }, ready] {
            let v = || json!(STATELESS_VERSION);
            let (s, step) = state.clone().handle(&modern("server/discover", v(), json!({}), json!({})));
            match step {
                Step::Reply(r, Era::Stateless) => {
                    assert_eq!(r["supportedVersions"], json!(ALL_VERSIONS));
                    assert_eq!((r["ttlMs"].clone(), r["cacheScope"].clone()), (json!(CACHE_TTL_MS), json!("public")));
                    assert_eq!(r["capabilities"], json!({"tools": {}}));
                    assert!(r["instructions"].is_string());
                }
                other => panic!("{other:?}"),
            }
            assert_eq!(s, state);
            let (s, step) = s.handle(&modern("tools/list", v(), json!({}), json!({})));
            assert_eq!((s.clone(), step), (state.clone(), Step::ListTools(Era::Stateless)));
            let (s, step) = s.handle(&modern("tools/call", v(), json!({}), json!({"name": "sp_inventory"})));
            assert_eq!(step, Step::CallTool(Era::Stateless), "{state:?}");
            // ping and logging/setLevel do not exist in 2026-07-28.
            let (s, step) = s.handle(&modern("ping", v(), json!({}), json!({})));
            assert!(matches!(step, Step::Refuse(Refusal::MethodNotFound { .. })));
            let (s, step) = s.handle(&modern("logging/setLevel", v(), json!({}), json!({"level": "debug"})));
            assert!(matches!(step, Step::Refuse(Refusal::MethodNotFound { .. })));
            assert_eq!(s, state);
        }
    }

    #[test]
    fn stateless_meta_is_checked() {
        let v = json!(STATELESS_VERSION);
        let cases = [
            (modern("tools/list", v.clone(), Value::Null, json!({})), "clientCapabilities\"] is required"),
            (modern("tools/list", v.clone(), json!([]), json!({})), "must be an object, found an array"),
            (modern("tools/list", json!(20260728), json!({}), json!({})), "must be a string, found an integer"),
            (modern("server/discover", Value::Null, json!({}), json!({})), "protocolVersion\"] is required"),
            (req("server/discover", Value::Null), "params with _meta are required"),
            (req("server/discover", json!({"_meta": 1})), "_meta must be an object"),
            (modern("tools/list", v.clone(), json!({}), json!({"cursor": "x"})), "invalid cursor"),
        ];
        for (msg, want) in cases {
            let (s, step) = Session::AwaitingInit.handle(&msg);
            assert_eq!(s, Session::AwaitingInit);
            match step {
                Step::Refuse(Refusal::InvalidParams(m)) => assert!(m.contains(want), "{m:?} lacks {want:?}"),
                other => panic!("{msg:?}: {other:?}"),
            }
        }
        for version in ["2025-11-25", "2024-11-05", "2027-01-01", ""] {
            let (_, step) = Session::AwaitingInit.handle(&modern("tools/call", json!(version), json!({}), json!({"name": "x"})));
            assert_eq!(step, Step::Refuse(Refusal::UnsupportedVersion { requested: version.into() }));
        }
        // initialize with modern _meta still selects the handshake semantics.
        let mut i = init("2025-06-18");
        if let Message::Request { params: Some(Value::Object(p)), .. } = &mut i {
            p.insert("_meta".into(), json!({META_PROTOCOL_VERSION: STATELESS_VERSION}));
        }
        let (s, _) = Session::AwaitingInit.handle(&i);
        assert_eq!(s, Session::Initializing { version: "2025-06-18" });
    }
}
