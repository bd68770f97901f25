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
//! Forward compatibility (issue #10): members of `params` this server does not know are
//! ignored, as the MCP schemas allow new optional members in every revision (`ping
//! {"x":1}`, `tools/list {"futureParam":true}`, a `tools/call` with 2025-11-25 `task`
//! augmentation, which runs as an ordinary call since `sp` declares no tasks capability).
//! The params' *type* is still checked (an object or absent), and so are the members we
//! read. Tool *arguments* stay strict (unknown argument names are refused), and so does
//! the message shape (a top-level member beyond `jsonrpc`, `id`, `method`, `params` is a
//! malformed message, MISSION.md).

use std::fmt;

use serde_json::{json, Map, Value};

use crate::jsonrpc::{kind_of, Message};

/// Newest first.
pub const SUPPORTED_VERSIONS: [&str; 4] = ["2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05"];

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
    Reply(Value),
    /// Answer the request with this JSON-RPC error; nothing else happens.
    Refuse(Refusal),
    /// Answer with the tool list.
    ListTools,
    /// Run the tool pipeline on these `tools/call` params.
    CallTool(Option<Value>),
    /// A notification: never answered.
    Ignore,
}

#[derive(Debug, PartialEq, Eq)]
pub enum Refusal {
    NotInitialized { method: String },
    AlreadyInitialized,
    MethodNotFound { method: String },
    InvalidParams(String),
}

impl fmt::Display for Refusal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Refusal::NotInitialized { method } => write!(
                f,
                "{:?} before initialization: send initialize, then notifications/initialized",
                short(method)
            ),
            Refusal::AlreadyInitialized => f.write_str("the session is already initialized"),
            Refusal::MethodNotFound { method } => write!(f, "method not found: {:?}", short(method)),
            Refusal::InvalidParams(m) => f.write_str(m),
        }
    }
}

fn short(s: &str) -> String {
    s.chars().take(64).collect()
}

impl Session {
    pub fn version(&self) -> Option<&'static str> {
        match self {
            Session::AwaitingInit => None,
            Session::Initializing { version } | Session::Ready { version } => Some(version),
        }
    }

    pub fn handle(self, msg: &Message) -> (Session, Step) {
        match msg {
            Message::Notification { method, .. } => {
                let next = match (&self, method.as_str()) {
                    (Session::Initializing { version }, "notifications/initialized") => {
                        Session::Ready { version }
                    }
                    _ => self,
                };
                (next, Step::Ignore)
            }
            Message::Request { method, params, .. } => self.request(method, params.as_ref()),
        }
    }

    fn request(self, method: &str, params: Option<&Value>) -> (Session, Step) {
        let known = matches!(method, "initialize" | "ping" | "tools/list" | "tools/call");
        if !known {
            return (self, Step::Refuse(Refusal::MethodNotFound { method: method.to_owned() }));
        }
        if method == "ping" {
            return match optional_object(params, "ping") {
                Ok(_) => (self, Step::Reply(json!({}))),
                Err(r) => (self, Step::Refuse(r)),
            };
        }
        match (&self, method) {
            (Session::AwaitingInit, "initialize") => match initialize(params) {
                Ok((version, result)) => (Session::Initializing { version }, Step::Reply(result)),
                Err(r) => (self, Step::Refuse(r)),
            },
            (_, "initialize") => (self, Step::Refuse(Refusal::AlreadyInitialized)),
            (Session::Ready { .. }, "tools/list") => match optional_object(params, "tools/list") {
                Ok(Some(p)) if p.contains_key("cursor") => {
                    (self, Step::Refuse(Refusal::InvalidParams("invalid cursor: the tool list has one page".into())))
                }
                Ok(_) => (self, Step::ListTools),
                Err(r) => (self, Step::Refuse(r)),
            },
            (Session::Ready { .. }, _) => (self, Step::CallTool(params.cloned())),
            _ => (self, Step::Refuse(Refusal::NotInitialized { method: method.to_owned() })),
        }
    }
}

/// Params that may be absent or an object (members we do not read are ignored).
fn optional_object<'a>(params: Option<&'a Value>, method: &str) -> Result<Option<&'a Map<String, Value>>, Refusal> {
    match params {
        None => Ok(None),
        Some(Value::Object(m)) => Ok(Some(m)),
        Some(other) => Err(Refusal::InvalidParams(format!("{method} params must be an object, found {}", kind_of(other)))),
    }
}

fn initialize(params: Option<&Value>) -> Result<(&'static str, Value), Refusal> {
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
        "capabilities": {"tools": {"listChanged": false}},
        "serverInfo": {"name": "sallyport", "title": "Sallyport", "version": env!("CARGO_PKG_VERSION")},
        "instructions": "Sallyport runs HTTP requests and SSH commands for you under the operator's \
            policy and injects credentials itself: you never see or send a secret. Call sp.inventory to \
            learn which hosts, methods, paths, credential names and SSH hosts are allowed, then \
            http.request or ssh.exec. Refusals come back as tool results with isError and a code \
            (SP_DENIED, SP_BAD_ARGUMENTS, ...) and a reason. Calls with some credentials or SSH hosts \
            wait for the operator's out-of-band approval (SP_NOT_APPROVED when refused), and every call \
            is recorded in the operator's audit journal."
    });
    Ok((version, result))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::jsonrpc::Id;

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
        assert_eq!(step, Step::Reply(json!({})));
        let (s, step) = s.handle(&req("server/discover", json!({})));
        assert_eq!(step, Step::Refuse(Refusal::MethodNotFound { method: "server/discover".into() }));
        let (s, step) = s.handle(&note("notifications/initialized"));
        assert_eq!((&s, step), (&Session::AwaitingInit, Step::Ignore));
        let (s, step) = s.handle(&init("2025-06-18"));
        assert!(matches!(step, Step::Reply(r) if r["protocolVersion"] == "2025-06-18"));
        assert_eq!(s, Session::Initializing { version: "2025-06-18" });
        let (s, step) = s.handle(&req("tools/call", json!({"name": "sp.inventory"})));
        assert!(matches!(step, Step::Refuse(Refusal::NotInitialized { .. })));
        let (s, _) = s.handle(&note("notifications/initialized"));
        assert_eq!(s, Session::Ready { version: "2025-06-18" });
        let (s, step) = s.handle(&init("2025-06-18"));
        assert_eq!(step, Step::Refuse(Refusal::AlreadyInitialized));
        let (s, step) = s.handle(&req("tools/list", json!({"cursor": "x"})));
        assert!(matches!(step, Step::Refuse(Refusal::InvalidParams(_))));
        let (s, step) = s.handle(&req("tools/list", Value::Null));
        assert_eq!(step, Step::ListTools);
        // Issue #10: unknown members of known methods' params are ignored.
        let (s, step) = s.handle(&req("tools/list", json!({"futureParam": true, "_meta": {"x": 1}})));
        assert_eq!(step, Step::ListTools);
        let (s, step) = s.handle(&req("ping", json!({"x": 1})));
        assert_eq!(step, Step::Reply(json!({})));
        let (s, step) = s.handle(&req("ping", json!([1])));
        assert!(matches!(step, Step::Refuse(Refusal::InvalidParams(m)) if m.contains("must be an object")));
        let (s, step) = s.handle(&req("resources/list", Value::Null));
        assert!(matches!(step, Step::Refuse(Refusal::MethodNotFound { .. })));
        let (_, step) = s.handle(&req("tools/call", json!("str")));
        assert_eq!(step, Step::CallTool(Some(json!("str"))));
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
}
