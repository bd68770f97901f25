//! Stage 3: one JSON value -> a JSON-RPC 2.0 message the client may send.
//!
//! JSON-RPC 2.0 section 4, narrowed as `sp(1)` SESSION POLICY says:
//! - `jsonrpc` must be exactly `"2.0"`;
//! - an `id` is an integer or a string; `null`, booleans, floats, arrays and objects are
//!   refused (MCP: "the ID MUST NOT be null");
//! - the only members are `jsonrpc`, `id`, `method`, `params`; anything else is refused;
//! - batches (arrays) are refused (MCP 2025-06-18 removed them);
//! - objects with `result` or `error` are responses: `sp` never sends requests, so a
//!   response from the client is refused too.
//!
//! `params` is carried as-is; its type is the method's business (-32602, session open).
//! Every error here is a [`Malformed`]: answered -32600, then the session closes. The
//! answer echoes the request's `id` when it could be read (an integer or a string on an
//! object that is not a response), else `id: null` (JSON-RPC 2.0 section 5.1: "If there
//! was an error in detecting the id in the Request object ... it MUST be Null").
//! A response from the client carries the id of a request we never sent, so it is
//! answered with `id: null` too. The one exception is [`response_to`]: while a call
//! waits for the answer to sp's own request (an `elicitation/create` for approval,
//! `mcp/control`), the response with exactly that id is taken.

use std::fmt;

use serde_json::{Map, Value};

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Id {
    Int(i64),
    Str(String),
}

impl Id {
    pub fn to_value(&self) -> Value {
        match self {
            Id::Int(i) => Value::from(*i),
            Id::Str(s) => Value::from(s.as_str()),
        }
    }
}

#[derive(Debug, PartialEq)]
pub enum Message {
    Request { id: Id, method: String, params: Option<Value> },
    Notification { method: String, params: Option<Value> },
}

#[derive(Debug, PartialEq, Eq)]
pub(crate) enum ShapeError {
    NotAnObject { found: &'static str },
    Batch,
    BadVersion,
    BadId { found: &'static str },
    MissingMethod,
    BadMethod,
    UnexpectedMember { name: String },
    ClientResponse,
}

impl fmt::Display for ShapeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ShapeError::NotAnObject { found } => {
                write!(f, "a JSON-RPC message must be an object, found {found}")
            }
            ShapeError::Batch => f.write_str("batch requests are not supported"),
            ShapeError::BadVersion => f.write_str("\"jsonrpc\" must be exactly \"2.0\""),
            ShapeError::BadId { found } => {
                write!(f, "\"id\" must be an integer or a string, found {found}")
            }
            ShapeError::MissingMethod => f.write_str("\"method\" is missing"),
            ShapeError::BadMethod => f.write_str("\"method\" must be a non-empty string"),
            ShapeError::UnexpectedMember { name } => {
                let shown = crate::sys::short(name, 32, crate::sys::Ellipsis::Silent);
                write!(f, "unexpected member {shown:?}")
            }
            ShapeError::ClientResponse => f.write_str("responses are not accepted: this server sends no requests"),
        }
    }
}

pub(crate) fn kind_of(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(n) if n.is_f64() => "a float",
        Value::Number(_) => "an integer",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

/// A message that is not a permitted JSON-RPC request or notification, with the request
/// id when one could be read (echoed in the answer).
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct Malformed {
    pub error: ShapeError,
    pub id: Option<Id>,
}

impl fmt::Display for Malformed {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.error.fmt(f)
    }
}

impl std::error::Error for Malformed {}
impl std::error::Error for ShapeError {}

/// The id of a request-shaped object: an integer (within i64) or a string, on an object
/// that is not a response.
fn readable_id(obj: &Map<String, Value>) -> Option<Id> {
    if obj.contains_key("result") || obj.contains_key("error") {
        return None;
    }
    match obj.get("id")? {
        Value::Number(n) if !n.is_f64() => n.as_i64().map(Id::Int),
        Value::String(s) => Some(Id::Str(s.clone())),
        _ => None,
    }
}

/// The client's response to sp's request `awaited`, if `text` is exactly that: one JSON
/// value (`json::parse`: no duplicate keys, depth cap), an object whose members are
/// `jsonrpc` ("2.0"), `id` (equal to `awaited`, type included) and one of `result` (an
/// object) or `error` (an object with an integer `code`, a string `message`, and
/// optionally `data`). Anything else is `None`: not an answer sp waits for, so it stays
/// malformed input.
pub(crate) fn response_to(text: &str, awaited: &Id) -> Option<Value> {
    let value = crate::json::parse(text).ok()?;
    let obj = value.as_object()?;
    if obj.get("jsonrpc").and_then(Value::as_str) != Some("2.0") || obj.keys().any(|k| !matches!(k.as_str(), "jsonrpc" | "id" | "result" | "error")) {
        return None;
    }
    let id = match obj.get("id")? {
        Value::Number(n) if !n.is_f64() => Id::Int(n.as_i64()?),
        Value::String(s) => Id::Str(s.clone()),
        _ => return None,
    };
    if &id != awaited {
        return None;
    }
    let ok = match (obj.get("result"), obj.get("error")) {
        (Some(Value::Object(_)), None) => true,
        (None, Some(Value::Object(e))) => {
            e.keys().all(|k| matches!(k.as_str(), "code" | "message" | "data"))
                && e.get("code").is_some_and(|c| c.is_i64())
                && e.get("message").is_some_and(Value::is_string)
        }
        _ => false,
    };
    ok.then_some(value)
}

pub(crate) fn classify(value: Value) -> Result<Message, Malformed> {
    let obj: Map<String, Value> = match value {
        Value::Object(o) => o,
        Value::Array(_) => return Err(Malformed { error: ShapeError::Batch, id: None }),
        other => return Err(Malformed { error: ShapeError::NotAnObject { found: kind_of(&other) }, id: None }),
    };
    let id = readable_id(&obj);
    classify_object(obj).map_err(|error| Malformed { error, id })
}

fn classify_object(mut obj: Map<String, Value>) -> Result<Message, ShapeError> {
    if obj.get("jsonrpc").and_then(Value::as_str) != Some("2.0") {
        return Err(ShapeError::BadVersion);
    }
    if obj.contains_key("result") || obj.contains_key("error") {
        return Err(ShapeError::ClientResponse);
    }
    if let Some(name) = obj.keys().find(|k| !matches!(k.as_str(), "jsonrpc" | "id" | "method" | "params")) {
        return Err(ShapeError::UnexpectedMember { name: name.clone() });
    }
    let method = match obj.remove("method") {
        None => return Err(ShapeError::MissingMethod),
        Some(Value::String(m)) if !m.is_empty() => m,
        Some(_) => return Err(ShapeError::BadMethod),
    };
    let params = obj.remove("params");
    match obj.remove("id") {
        None => Ok(Message::Notification { method, params }),
        Some(Value::Number(n)) => match n.as_i64() {
            Some(i) if !n.is_f64() => Ok(Message::Request { id: Id::Int(i), method, params }),
            // u64 above i64::MAX and floats
            _ => Err(ShapeError::BadId { found: if n.is_f64() { "a float" } else { "an integer out of range" } }),
        },
        Some(Value::String(s)) => Ok(Message::Request { id: Id::Str(s), method, params }),
        Some(other) => Err(ShapeError::BadId { found: kind_of(&other) }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn accepted_shapes() {
        assert_eq!(classify(json!({"jsonrpc":"2.0","id":1,"method":"ping"})), Ok(Message::Request { id: Id::Int(1), method: "ping".into(), params: None }));
        assert_eq!(
            classify(json!({"jsonrpc":"2.0","id":"a","method":"x","params":{"k":1}})),
            Ok(Message::Request { id: Id::Str("a".into()), method: "x".into(), params: Some(json!({"k":1})) })
        );
        assert_eq!(
            classify(json!({"jsonrpc":"2.0","id":-7,"method":"x","params":"s"})),
            Ok(Message::Request { id: Id::Int(-7), method: "x".into(), params: Some(json!("s")) })
        );
        assert_eq!(
            classify(json!({"jsonrpc":"2.0","method":"notifications/initialized"})),
            Ok(Message::Notification { method: "notifications/initialized".into(), params: None })
        );
    }

    /// Only the exact response to the awaited id is taken. Attacks tried (all held): the
    /// id as a number when sp sent a string, another id, both result and error, neither,
    /// a result that is not an object, an extra member, a duplicate key, an error
    /// without code, `jsonrpc` 1.0, a request that carries the id, trailing text.
    #[test]
    fn responses_to_sp_requests() {
        let sp = Id::Str("sp-1".into());
        let ok = [r#"{"jsonrpc":"2.0","id":"sp-1","result":{"action":"accept"}}"#, r#"{"jsonrpc":"2.0","id":"sp-1","error":{"code":-32601,"message":"no"}}"#];
        for text in ok {
            assert_eq!(response_to(text, &sp), Some(serde_json::from_str(text).unwrap()), "{text}");
        }
        for text in [
            r#"{"jsonrpc":"2.0","id":1,"result":{}}"#,
            r#"{"jsonrpc":"2.0","id":"sp-2","result":{}}"#,
            r#"{"jsonrpc":"2.0","id":"sp-1","result":{},"error":{"code":1,"message":"x"}}"#,
            r#"{"jsonrpc":"2.0","id":"sp-1"}"#,
            r#"{"jsonrpc":"2.0","id":"sp-1","result":true}"#,
            r#"{"jsonrpc":"2.0","id":"sp-1","result":{},"x":1}"#,
            r#"{"jsonrpc":"2.0","id":"sp-1","result":{},"result":{}}"#,
            r#"{"jsonrpc":"2.0","id":"sp-1","error":{"message":"x"}}"#,
            r#"{"jsonrpc":"2.0","id":"sp-1","error":{"code":1.5,"message":"x"}}"#,
            r#"{"jsonrpc":"1.0","id":"sp-1","result":{}}"#,
            r#"{"jsonrpc":"2.0","id":"sp-1","method":"x"}"#,
            r#"{"jsonrpc":"2.0","id":"sp-1","result":{}} x"#,
        ] {
            assert_eq!(response_to(text, &sp), None, "{text}");
        }
    }

    #[test]
    fn refused_shapes() {
        // The id is echoed when it could be read, never for a client's response.
        let cases: Vec<(Value, ShapeError, Option<Id>)> = vec![
            (json!([]), ShapeError::Batch, None),
            (json!([{"jsonrpc":"2.0","id":1,"method":"ping"}]), ShapeError::Batch, None),
            (json!("x"), ShapeError::NotAnObject { found: "a string" }, None),
            (json!(null), ShapeError::NotAnObject { found: "null" }, None),
            (json!({"id":1,"method":"ping"}), ShapeError::BadVersion, Some(Id::Int(1))),
            (json!({"jsonrpc":"1.0","id":1,"method":"ping"}), ShapeError::BadVersion, Some(Id::Int(1))),
            (json!({"jsonrpc":2.0,"id":1,"method":"ping"}), ShapeError::BadVersion, Some(Id::Int(1))),
            (json!({"jsonrpc":"2.0 ","id":1,"method":"ping"}), ShapeError::BadVersion, Some(Id::Int(1))),
            (json!({"jsonrpc":"1.0","id":"s","method":"ping"}), ShapeError::BadVersion, Some(Id::Str("s".into()))),
            (json!({"jsonrpc":"2.0","id":true,"method":"ping"}), ShapeError::BadId { found: "a boolean" }, None),
            (json!({"jsonrpc":"2.0","id":null,"method":"ping"}), ShapeError::BadId { found: "null" }, None),
            (json!({"jsonrpc":"2.0","id":1.5,"method":"ping"}), ShapeError::BadId { found: "a float" }, None),
            (json!({"jsonrpc":"2.0","id":1.0,"method":"ping"}), ShapeError::BadId { found: "a float" }, None),
            (json!({"jsonrpc":"2.0","id":{},"method":"ping"}), ShapeError::BadId { found: "an object" }, None),
            (json!({"jsonrpc":"2.0","id":[1],"method":"ping"}), ShapeError::BadId { found: "an array" }, None),
            (json!({"jsonrpc":"2.0","id":u64::MAX,"method":"ping"}), ShapeError::BadId { found: "an integer out of range" }, None),
            (json!({"jsonrpc":"2.0","id":1}), ShapeError::MissingMethod, Some(Id::Int(1))),
            (json!({"jsonrpc":"2.0","id":1,"method":""}), ShapeError::BadMethod, Some(Id::Int(1))),
            (json!({"jsonrpc":"2.0","id":1,"method":7}), ShapeError::BadMethod, Some(Id::Int(1))),
            (json!({"jsonrpc":"2.0","id":1,"method":"ping","extra":1}), ShapeError::UnexpectedMember { name: "extra".into() }, Some(Id::Int(1))),
            (json!({"jsonrpc":"2.0","id":1,"result":{}}), ShapeError::ClientResponse, None),
            (json!({"jsonrpc":"2.0","id":1,"error":{"code":1,"message":"x"}}), ShapeError::ClientResponse, None),
        ];
        for (value, error, id) in cases {
            let shown = value.to_string();
            assert_eq!(classify(value), Err(Malformed { error, id }), "{shown}");
        }
    }
}
