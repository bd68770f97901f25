//! Stage 3: one JSON value -> a JSON-RPC 2.0 message the client may send.
//!
//! JSON-RPC 2.0 section 4, narrowed as DESIGN.md "Wire decisions" says:
//! - `jsonrpc` must be exactly `"2.0"`;
//! - an `id` is an integer or a string; `null`, booleans, floats, arrays and objects are
//!   refused (MCP: "the ID MUST NOT be null");
//! - the only members are `jsonrpc`, `id`, `method`, `params`; anything else is refused;
//! - batches (arrays) are refused (MCP 2025-06-18 removed them);
//! - objects with `result` or `error` are responses: `sp` never sends requests, so a
//!   response from the client is refused too.
//!
//! `params` is carried as-is; its type is the method's business (-32602, session open).
//! Every error here is a [`ShapeError`]: answered -32600 with `id: null`, then the session
//! closes.

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
pub enum ShapeError {
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
                let shown: String = name.chars().take(32).collect();
                write!(f, "unexpected member {shown:?}")
            }
            ShapeError::ClientResponse => {
                f.write_str("responses are not accepted: this server sends no requests")
            }
        }
    }
}

pub fn kind_of(v: &Value) -> &'static str {
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

pub fn classify(value: Value) -> Result<Message, ShapeError> {
    let mut obj: Map<String, Value> = match value {
        Value::Object(o) => o,
        Value::Array(_) => return Err(ShapeError::Batch),
        other => return Err(ShapeError::NotAnObject { found: kind_of(&other) }),
    };
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
        assert_eq!(
            classify(json!({"jsonrpc":"2.0","id":1,"method":"ping"})),
            Ok(Message::Request { id: Id::Int(1), method: "ping".into(), params: None })
        );
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

    #[test]
    fn refused_shapes() {
        let cases: Vec<(Value, ShapeError)> = vec![
            (json!([]), ShapeError::Batch),
            (json!([{"jsonrpc":"2.0","id":1,"method":"ping"}]), ShapeError::Batch),
            (json!("x"), ShapeError::NotAnObject { found: "a string" }),
            (json!(null), ShapeError::NotAnObject { found: "null" }),
            (json!({"id":1,"method":"ping"}), ShapeError::BadVersion),
            (json!({"jsonrpc":"1.0","id":1,"method":"ping"}), ShapeError::BadVersion),
            (json!({"jsonrpc":2.0,"id":1,"method":"ping"}), ShapeError::BadVersion),
            (json!({"jsonrpc":"2.0 ","id":1,"method":"ping"}), ShapeError::BadVersion),
            (json!({"jsonrpc":"2.0","id":true,"method":"ping"}), ShapeError::BadId { found: "a boolean" }),
            (json!({"jsonrpc":"2.0","id":null,"method":"ping"}), ShapeError::BadId { found: "null" }),
            (json!({"jsonrpc":"2.0","id":1.5,"method":"ping"}), ShapeError::BadId { found: "a float" }),
            (json!({"jsonrpc":"2.0","id":1.0,"method":"ping"}), ShapeError::BadId { found: "a float" }),
            (json!({"jsonrpc":"2.0","id":{},"method":"ping"}), ShapeError::BadId { found: "an object" }),
            (json!({"jsonrpc":"2.0","id":[1],"method":"ping"}), ShapeError::BadId { found: "an array" }),
            (json!({"jsonrpc":"2.0","id":u64::MAX,"method":"ping"}), ShapeError::BadId { found: "an integer out of range" }),
            (json!({"jsonrpc":"2.0","id":1}), ShapeError::MissingMethod),
            (json!({"jsonrpc":"2.0","id":1,"method":""}), ShapeError::BadMethod),
            (json!({"jsonrpc":"2.0","id":1,"method":7}), ShapeError::BadMethod),
            (json!({"jsonrpc":"2.0","id":1,"method":"ping","extra":1}), ShapeError::UnexpectedMember { name: "extra".into() }),
            (json!({"jsonrpc":"2.0","id":1,"result":{}}), ShapeError::ClientResponse),
            (json!({"jsonrpc":"2.0","id":1,"error":{"code":1,"message":"x"}}), ShapeError::ClientResponse),
        ];
        for (value, want) in cases {
            let shown = value.to_string();
            assert_eq!(classify(value), Err(want), "{shown}");
        }
    }
}
