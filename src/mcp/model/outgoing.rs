//! The messages sp starts itself, typed like the answers: a [`Notification`] (progress,
//! `tools/list_changed`, the cancel of its own request) and a [`Request`] (the
//! `elicitation/create` that asks the user for approval). [`Wire`] is the set of types the
//! protocol writer takes (`mcp::out::ProtocolWriter::send`): these two, a [`Response`],
//! and the `tools/list` answers. No JSON-RPC object is built outside this model.
//!
//! The upstream client (`tools/upstream/client.rs`) speaks the same JSON-RPC to other
//! MCP servers through a transport that takes a `Value`; it gets its messages from the
//! same constructors, as `Value`s ([`Notification::into_value`], [`Request::into_value`],
//! [`reply_value`]).

use serde::ser::{Serialize, SerializeMap, Serializer};
use serde_json::{Map, Number, Value};

use super::live::RawListAnswer;
use super::{object, ErrorData, ListAnswer, Response};

/// What the protocol writer accepts: the model's messages, each serialised once. Sealed
/// by being crate-private: a `serde_json::Value` is not one.
pub(crate) trait Wire: Serialize {}

impl Wire for Response {}
impl Wire for ListAnswer<'_> {}
impl Wire for RawListAnswer {}
impl Wire for Notification {}
impl Wire for Request {}
impl Wire for Outbound {}

/// A JSON-RPC notification: `{"jsonrpc": "2.0", "method", "params"?}`.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Notification {
    method: String,
    params: Option<Value>,
}

impl Notification {
    /// `notifications/tools/list_changed`: an upstream's tools changed.
    pub(crate) fn tools_list_changed() -> Notification {
        Notification { method: "notifications/tools/list_changed".into(), params: None }
    }

    /// `notifications/resources/list_changed`, relayed from an upstream whose policy
    /// allows resources.
    pub(crate) fn resources_list_changed() -> Notification {
        Notification { method: "notifications/resources/list_changed".into(), params: None }
    }

    /// `notifications/prompts/list_changed`, relayed likewise.
    pub(crate) fn prompts_list_changed() -> Notification {
        Notification { method: "notifications/prompts/list_changed".into(), params: None }
    }

    /// `notifications/resources/updated` for an allowed resource, its URI as exposed.
    pub(crate) fn resource_updated(uri: String) -> Notification {
        let mut params = Map::new();
        params.insert("uri".into(), Value::String(uri));
        Notification { method: "notifications/resources/updated".into(), params: Some(Value::Object(params)) }
    }

    /// `notifications/progress` for the call's `progressToken`: `progress` increases with
    /// every one (MCP "Progress"); `total` and `message` when known.
    pub(crate) fn progress(token: Value, progress: Number, total: Option<Number>, message: Option<String>) -> Notification {
        let mut params = Map::new();
        params.insert("progressToken".into(), token);
        params.insert("progress".into(), Value::Number(progress));
        if let Some(t) = total {
            params.insert("total".into(), Value::Number(t));
        }
        if let Some(m) = message {
            params.insert("message".into(), Value::String(m));
        }
        Notification { method: "notifications/progress".into(), params: Some(Value::Object(params)) }
    }

    /// `notifications/cancelled`: sp gives up its own request `request_id` (MCP
    /// "Cancellation": either side may cancel its own request).
    pub(crate) fn cancelled(request_id: Value, reason: &str) -> Notification {
        let params = object([("reason", Value::from(reason)), ("requestId", request_id)]);
        Notification { method: "notifications/cancelled".into(), params: Some(params) }
    }

    /// A notification the upstream client sends an upstream (`notifications/initialized`,
    /// its cancels): the method is the client's.
    pub(crate) fn upstream(method: &str, params: Option<Value>) -> Notification {
        Notification { method: method.to_owned(), params }
    }

    /// The message as a `Value`, for a transport that takes one (the upstream client's).
    pub(crate) fn into_value(self) -> Value {
        let mut m = Map::new();
        m.insert("jsonrpc".into(), Value::from("2.0"));
        m.insert("method".into(), Value::String(self.method));
        if let Some(p) = self.params {
            m.insert("params".into(), p);
        }
        Value::Object(m)
    }
}

impl Serialize for Notification {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        // Keys in the order a `Value`'s map writes them (sorted).
        let mut m = s.serialize_map(Some(if self.params.is_some() { 3 } else { 2 }))?;
        m.serialize_entry("jsonrpc", "2.0")?;
        m.serialize_entry("method", &self.method)?;
        if let Some(p) = &self.params {
            m.serialize_entry("params", p)?;
        }
        m.end()
    }
}

/// A JSON-RPC request sp sends: `{"id", "jsonrpc": "2.0", "method", "params"}`.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Request {
    id: Value,
    method: String,
    params: Value,
}

impl Request {
    /// `elicitation/create` with id `id` (sp's own, `sp-N`), asking the user through
    /// the client (approval, `approve/elicit.rs`).
    pub(crate) fn elicitation(id: Value, params: Value) -> Request {
        Request { id, method: "elicitation/create".into(), params }
    }

    /// A request the upstream client sends an upstream (`initialize`, `tools/list`,
    /// `tools/call`, `ping`).
    pub(crate) fn upstream(id: i64, method: &str, params: Value) -> Request {
        Request { id: Value::from(id), method: method.to_owned(), params }
    }

    /// The message as a `Value`, for a transport that takes one (the upstream client's).
    pub(crate) fn into_value(self) -> Value {
        object([("id", self.id), ("jsonrpc", Value::from("2.0")), ("method", Value::String(self.method)), ("params", self.params)])
    }
}

impl Serialize for Request {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut m = s.serialize_map(Some(4))?;
        m.serialize_entry("id", &self.id)?;
        m.serialize_entry("jsonrpc", "2.0")?;
        m.serialize_entry("method", &self.method)?;
        m.serialize_entry("params", &self.params)?;
        m.end()
    }
}

/// What a running call writes besides its answer: its progress and sp's own requests
/// (`mcp::control::Notes`).
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Outbound {
    Notification(Notification),
    Request(Request),
}

impl Serialize for Outbound {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            Outbound::Notification(n) => n.serialize(s),
            Outbound::Request(r) => r.serialize(s),
        }
    }
}

/// The upstream client's answer to an upstream's request `id`: a result, or an error
/// (`{"error": {"code", "message"}, ...}`), as a `Value` for its transport.
pub(crate) fn reply_value(id: Value, answer: Result<Value, ErrorData>) -> Value {
    match answer {
        Ok(result) => object([("id", id), ("jsonrpc", Value::from("2.0")), ("result", result)]),
        Err(e) => {
            let mut error = Map::new();
            error.insert("code".into(), Value::from(e.code.0));
            if let Some(d) = e.data {
                error.insert("data".into(), d);
            }
            error.insert("message".into(), Value::String(e.message));
            object([("error", Value::Object(error)), ("id", id), ("jsonrpc", Value::from("2.0"))])
        }
    }
}
