//! What an upstream writes, checked as strictly as what the agent writes: one line, one
//! JSON value (`json::parse_limited`: no duplicate key, depth cap, memory cap), then a
//! JSON-RPC 2.0 message of the server-to-client direction ([`classify`]), then the MCP
//! shapes of the results `sp` asked for ([`tool`], [`call_result`], [`initialize`]).
//!
//! Two levels, as in `rage`: a [`WireError`] means the upstream broke the protocol (it is
//! ended, its pending call fails); a [`ShapeError`] in a result means one answer is
//! unusable (that call or listing fails; the upstream stays).
//!
//! Extension members: MCP results are open (`Result` has an index signature in the
//! schema), so unknown top-level members of a result are dropped, never passed on;
//! inside a tool definition or a content item only the members of the 2025-11-25 schema
//! (and `_meta`) are accepted, anything else is a [`ShapeError`].

use std::fmt;

use serde_json::{Map, Value};

use crate::gate::outside::{self, Outside};
use crate::mcp::jsonrpc::{kind_of, Id};

/// The protocol revisions `sp` accepts from an upstream (newest first): the ones `sp`
/// itself speaks (`sp(1)`, PROTOCOL, "Versions"). `sp` offers the first.
pub(crate) const VERSIONS: &[&str] = &["2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05"];

/// One message from the upstream.
#[derive(Debug, PartialEq)]
pub(crate) enum Inbound {
    /// An answer to a request `sp` sent (ids `sp` sends are integers).
    Response {
        id: i64,
        outcome: Result<Value, RpcError>,
    },
    Request {
        id: Id,
        method: String,
        params: Option<Value>,
    },
    Notification {
        method: String,
        params: Option<Value>,
    },
}

/// A JSON-RPC error object from the upstream; `message` is untrusted text, held whole.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct RpcError {
    pub code: i64,
    pub message: Outside,
}

/// The upstream broke the protocol: it is ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum WireError {
    NotAnObject {
        found: &'static str,
    },
    BadVersion,
    UnexpectedMember {
        name: Outside,
    },
    BadId {
        found: &'static str,
    },
    BadMethod,
    /// Both or neither of `result` and `error` on an object without `method`.
    BadResponse,
    BadError,
    /// A response to an id `sp` did not send or no longer waits on (as JSON spells it).
    UnknownId {
        id: Outside,
    },
    /// An error response with `id: null`: the upstream could not read what `sp` sent.
    NullId,
}

impl fmt::Display for WireError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            WireError::NotAnObject { found } => write!(f, "a message must be an object, found {found}"),
            WireError::BadVersion => f.write_str("\"jsonrpc\" must be exactly \"2.0\""),
            WireError::UnexpectedMember { name } => write!(f, "unexpected member {:?}", name.cut(MAX_NAME_CHARS).as_str()),
            WireError::BadId { found } => write!(f, "\"id\" must be an integer or a string, found {found}"),
            WireError::BadMethod => f.write_str("\"method\" must be a non-empty string"),
            WireError::BadResponse => f.write_str("a response needs exactly one of \"result\" and \"error\""),
            WireError::BadError => f.write_str("\"error\" must be {code: integer, message: string, data?}"),
            WireError::UnknownId { id } => write!(f, "a response to id {}, which sp is not waiting on", id.cut(MAX_NAME_CHARS + 2)),
            WireError::NullId => f.write_str("an error response with id null: the upstream could not read a request"),
        }
    }
}

impl std::error::Error for WireError {}

/// Longest message (then name, id, revision) shown of an upstream's, scrubbed first.
pub(crate) const MAX_MESSAGE_CHARS: usize = 200;
pub(crate) const MAX_NAME_CHARS: usize = 32;

fn id_of(v: Value) -> Result<Id, WireError> {
    match v {
        Value::Number(n) if !n.is_f64() => n.as_i64().map(Id::Int).ok_or(WireError::BadId { found: "an integer out of range" }),
        Value::String(s) => Ok(Id::Str(s)),
        other => Err(WireError::BadId { found: kind_of(&other) }),
    }
}

/// The JSON-RPC shape of one parsed line. Response ids are checked by the caller (it
/// knows what it waits on); a string id in a response is always unknown (`sp` sends
/// integers).
pub(crate) fn classify(value: Value) -> Result<Inbound, WireError> {
    let mut obj = match value {
        Value::Object(o) => o,
        other => return Err(WireError::NotAnObject { found: kind_of(&other) }),
    };
    if obj.remove("jsonrpc").as_ref().and_then(Value::as_str) != Some("2.0") {
        return Err(WireError::BadVersion);
    }
    if obj.contains_key("method") {
        if let Some(name) = obj.keys().find(|k| !matches!(k.as_str(), "id" | "method" | "params")) {
            return Err(WireError::UnexpectedMember { name: name.as_str().into() });
        }
        let method = match obj.remove("method") {
            Some(Value::String(m)) if !m.is_empty() => m,
            _ => return Err(WireError::BadMethod),
        };
        let params = obj.remove("params");
        if matches!(params, Some(ref p) if !p.is_object()) {
            return Err(WireError::UnexpectedMember { name: "params".into() });
        }
        return Ok(match obj.remove("id") {
            None => Inbound::Notification { method, params },
            Some(id) => Inbound::Request { id: id_of(id)?, method, params },
        });
    }
    if let Some(name) = obj.keys().find(|k| !matches!(k.as_str(), "id" | "result" | "error")) {
        return Err(WireError::UnexpectedMember { name: name.as_str().into() });
    }
    let outcome = match (obj.remove("result"), obj.remove("error")) {
        (Some(r), None) => Ok(r),
        (None, Some(e)) => Err(rpc_error(e)?),
        _ => return Err(WireError::BadResponse),
    };
    let id = match obj.remove("id") {
        Some(Value::Null) if outcome.is_err() => return Err(WireError::NullId),
        Some(id) => id_of(id)?,
        None => return Err(WireError::BadId { found: "nothing" }),
    };
    match id {
        Id::Int(id) => Ok(Inbound::Response { id, outcome }),
        Id::Str(s) => Err(WireError::UnknownId { id: format!("{s:?}").into() }),
    }
}

fn rpc_error(e: Value) -> Result<RpcError, WireError> {
    let Value::Object(mut e) = e else { return Err(WireError::BadError) };
    if e.keys().any(|k| !matches!(k.as_str(), "code" | "message" | "data")) {
        return Err(WireError::BadError);
    }
    let code = match e.remove("code") {
        Some(Value::Number(n)) if !n.is_f64() => n.as_i64().ok_or(WireError::BadError)?,
        _ => return Err(WireError::BadError),
    };
    let message = match e.remove("message") {
        Some(Value::String(m)) => Outside::new(m),
        _ => return Err(WireError::BadError),
    };
    Ok(RpcError { code, message })
}

/// A result (or one of its parts) is not of the shape MCP defines; `at` names the
/// member (`tools[3].inputSchema.type`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ShapeError {
    pub at: String,
    pub why: &'static str,
}

impl fmt::Display for ShapeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.at, self.why)
    }
}

impl std::error::Error for ShapeError {}

type Shape<T> = Result<T, ShapeError>;

fn bad<T>(at: &str, why: &'static str) -> Shape<T> {
    Err(ShapeError { at: at.to_owned(), why })
}

fn members<'a>(v: &'a Value, at: &str, allowed: &[&str]) -> Shape<&'a Map<String, Value>> {
    let Value::Object(m) = v else { return bad(at, "must be an object") };
    match m.keys().find(|k| !allowed.contains(&k.as_str())) {
        Some(k) => Err(ShapeError { at: format!("{at}.{}", outside::cut(k, MAX_NAME_CHARS)), why: "is not a member MCP defines here" }),
        None => Ok(m),
    }
}

fn opt_str(m: &Map<String, Value>, k: &str, at: &str) -> Shape<()> {
    match m.get(k) {
        None | Some(Value::String(_)) => Ok(()),
        Some(_) => bad(&format!("{at}.{k}"), "must be a string"),
    }
}

fn req_str<'a>(m: &'a Map<String, Value>, k: &str, at: &str) -> Shape<&'a str> {
    match m.get(k) {
        Some(Value::String(s)) => Ok(s),
        Some(_) => bad(&format!("{at}.{k}"), "must be a string"),
        None => bad(&format!("{at}.{k}"), "is required"),
    }
}

fn opt_obj(m: &Map<String, Value>, k: &str, at: &str) -> Shape<()> {
    match m.get(k) {
        None | Some(Value::Object(_)) => Ok(()),
        Some(_) => bad(&format!("{at}.{k}"), "must be an object"),
    }
}

/// The `initialize` result: the version the upstream chose (one `sp` speaks) and
/// whether it may announce tool-list changes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Initialized {
    pub version: &'static str,
    pub list_changed: bool,
    pub has_tools: bool,
    /// `capabilities.tasks` (issue 33, section 4).
    pub tasks: task::TaskCaps,
}

/// Why an `initialize` answer is refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum InitError {
    Shape(ShapeError),
    /// A revision `sp` does not speak (lifecycle: the client then disconnects).
    Version {
        offered: Outside,
    },
}

pub(crate) fn initialize(result: &Value) -> Result<Initialized, InitError> {
    let shape = |at: &str, why| InitError::Shape(ShapeError { at: at.to_owned(), why });
    let Value::Object(m) = result else { return Err(shape("result", "must be an object")) };
    let version = match m.get("protocolVersion") {
        Some(Value::String(v)) => v,
        _ => return Err(shape("result.protocolVersion", "must be a string")),
    };
    let Some(version) = VERSIONS.iter().find(|s| **s == version) else {
        return Err(InitError::Version { offered: version.as_str().into() });
    };
    let caps = match m.get("capabilities") {
        Some(Value::Object(c)) => c,
        _ => return Err(shape("result.capabilities", "must be an object")),
    };
    if !matches!(m.get("serverInfo"), Some(Value::Object(_))) {
        return Err(shape("result.serverInfo", "must be an object"));
    }
    let tools = caps.get("tools");
    let list_changed = match tools {
        None => false,
        Some(Value::Object(t)) => match t.get("listChanged") {
            None => false,
            Some(Value::Bool(b)) => *b,
            Some(_) => return Err(shape("result.capabilities.tools.listChanged", "must be a boolean")),
        },
        Some(_) => return Err(shape("result.capabilities.tools", "must be an object")),
    };
    let tasks = task::caps(caps.get("tasks")).map_err(|at| shape(at, "must be an object"))?;
    Ok(Initialized { version, list_changed, has_tools: tools.is_some(), tasks })
}

/// One page of `tools/list`: the tool definitions and the next cursor.
pub(crate) fn tools_page(result: Value) -> Shape<(Vec<Value>, Option<String>)> {
    let Value::Object(mut m) = result else { return bad("result", "must be an object") };
    let tools = match m.remove("tools") {
        Some(Value::Array(t)) => t,
        Some(_) => return bad("result.tools", "must be an array"),
        None => return bad("result.tools", "is required"),
    };
    let next = match m.remove("nextCursor") {
        None | Some(Value::Null) => None,
        Some(Value::String(c)) if !c.is_empty() && c.len() <= 1024 => Some(c),
        Some(_) => return bad("result.nextCursor", "must be a non-empty string of at most 1024 bytes"),
    };
    Ok((tools, next))
}

/// A tool definition as the agent sees it: `name` replaced by the exposed name; `title`,
/// `description`, `inputSchema`, `outputSchema` and `annotations` kept; `icons`,
/// `execution` and `_meta` dropped (`execution.taskSupport` is kept apart: sp states it
/// again only for an upstream whose tasks it relays, `expose.rs`).
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct ToolDef {
    /// The upstream's own name.
    pub name: String,
    pub definition: Map<String, Value>,
    pub task_support: task::TaskSupport,
}

impl ToolDef {
    /// The definition a pin hashes (`pins.rs`, issue 33 §4): the one kept, plus
    /// `execution` as sp spells it when the tool's `taskSupport` is optional or
    /// required. A tool flipped to tasks after it was pinned is a changed tool; absent
    /// and "forbidden" hash alike, so the pins of tools without task support made
    /// before `execution` was pinned stay valid.
    pub(crate) fn pinned(&self) -> Map<String, Value> {
        let mut m = self.definition.clone();
        if self.task_support != task::TaskSupport::Forbidden {
            m.insert("execution".into(), serde_json::json!({"taskSupport": self.task_support.as_str()}));
        }
        m
    }
}

const TOOL_MEMBERS: &[&str] = &["name", "title", "description", "inputSchema", "outputSchema", "annotations", "icons", "execution", "_meta"];
const ANNOTATION_MEMBERS: &[&str] = &["title", "readOnlyHint", "destructiveHint", "idempotentHint", "openWorldHint"];

/// Checks one tool definition (`at` is `tools[i]`).
pub(crate) fn tool(v: Value, at: &str) -> Shape<ToolDef> {
    let m = members(&v, at, TOOL_MEMBERS)?;
    let name = req_str(m, "name", at)?;
    if name.is_empty() || name.len() > 1024 {
        return bad(&format!("{at}.name"), "must be 1 to 1024 bytes");
    }
    opt_str(m, "title", at)?;
    opt_str(m, "description", at)?;
    for schema in ["inputSchema", "outputSchema"] {
        let sat = format!("{at}.{schema}");
        match m.get(schema) {
            None if schema == "outputSchema" => {}
            None => return bad(&sat, "is required"),
            Some(Value::Object(s)) => {
                if s.get("type").and_then(Value::as_str) != Some("object") {
                    return bad(&format!("{sat}.type"), "must be \"object\"");
                }
                opt_obj(s, "properties", &sat)?;
                if let Some(r) = s.get("required")
                    && !r.as_array().is_some_and(|r| r.iter().all(Value::is_string))
                {
                    return bad(&format!("{sat}.required"), "must be an array of strings");
                }
            }
            Some(_) => return bad(&sat, "must be an object"),
        }
    }
    if let Some(a) = m.get("annotations") {
        let aat = format!("{at}.annotations");
        let am = members(a, &aat, ANNOTATION_MEMBERS)?;
        opt_str(am, "title", &aat)?;
        for (k, v) in am.iter().filter(|(k, _)| k.ends_with("Hint")) {
            if !v.is_boolean() {
                return bad(&format!("{aat}.{k}"), "must be a boolean");
            }
        }
    }
    let task_support = task::execution(m, at)?;
    opt_obj(m, "_meta", at)?;
    if !matches!(m.get("icons"), None | Some(Value::Array(_))) {
        return bad(&format!("{at}.icons"), "must be an array");
    }
    let name = name.to_owned();
    let Value::Object(mut definition) = v else { unreachable!("checked by members") };
    for k in ["icons", "execution", "_meta", "name"] {
        definition.remove(k);
    }
    Ok(ToolDef { name, definition, task_support })
}

/// A `tools/call` result, checked; unknown top-level members dropped (see the module doc).
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct CallResult {
    pub content: Vec<Value>,
    pub structured: Option<Map<String, Value>>,
    pub is_error: bool,
}

pub(crate) fn call_result(result: Value) -> Shape<CallResult> {
    let Value::Object(mut m) = result else { return bad("result", "must be an object") };
    let content = match m.remove("content") {
        Some(Value::Array(c)) => c,
        Some(_) => return bad("result.content", "must be an array"),
        None => return bad("result.content", "is required"),
    };
    for (i, item) in content.iter().enumerate() {
        content_item(item, &format!("result.content[{i}]"))?;
    }
    let structured = match m.remove("structuredContent") {
        None => None,
        Some(Value::Object(s)) => Some(s),
        Some(_) => return bad("result.structuredContent", "must be an object"),
    };
    let is_error = match m.remove("isError") {
        None => false,
        Some(Value::Bool(b)) => b,
        Some(_) => return bad("result.isError", "must be a boolean"),
    };
    opt_obj(&m, "_meta", "result")?;
    Ok(CallResult { content, structured, is_error })
}

fn annotations(m: &Map<String, Value>, at: &str) -> Shape<()> {
    let Some(a) = m.get("annotations") else { return Ok(()) };
    let aat = format!("{at}.annotations");
    let am = members(a, &aat, &["audience", "priority", "lastModified"])?;
    if let Some(aud) = am.get("audience")
        && !aud.as_array().is_some_and(|a| a.iter().all(|r| matches!(r.as_str(), Some("user" | "assistant"))))
    {
        return bad(&format!("{aat}.audience"), "must be an array of \"user\" or \"assistant\"");
    }
    if !matches!(am.get("priority"), None | Some(Value::Number(_))) {
        return bad(&format!("{aat}.priority"), "must be a number");
    }
    opt_str(am, "lastModified", &aat)
}

fn content_item(v: &Value, at: &str) -> Shape<()> {
    let Value::Object(m) = v else { return bad(at, "must be an object") };
    let kind = match m.get("type") {
        Some(Value::String(t)) => t.as_str(),
        _ => return bad(&format!("{at}.type"), "must be a string"),
    };
    let common = ["type", "annotations", "_meta"];
    let with = |extra: &[&'static str]| -> Vec<&str> { common.iter().chain(extra).copied().collect() };
    match kind {
        "text" => {
            let m = members(v, at, &with(&["text"]))?;
            req_str(m, "text", at)?;
        }
        "image" | "audio" => {
            let m = members(v, at, &with(&["data", "mimeType"]))?;
            req_str(m, "data", at)?;
            req_str(m, "mimeType", at)?;
        }
        "resource" => {
            let m = members(v, at, &with(&["resource"]))?;
            let rat = format!("{at}.resource");
            let r = m.get("resource").ok_or_else(|| ShapeError { at: rat.clone(), why: "is required" })?;
            let rm = members(r, &rat, &["uri", "mimeType", "_meta", "text", "blob"])?;
            req_str(rm, "uri", &rat)?;
            opt_str(rm, "mimeType", &rat)?;
            opt_obj(rm, "_meta", &rat)?;
            match (rm.get("text"), rm.get("blob")) {
                (Some(Value::String(_)), None) | (None, Some(Value::String(_))) => {}
                _ => return bad(&rat, "must hold exactly one of text and blob, a string"),
            }
        }
        "resource_link" => {
            let m = members(v, at, &with(&["uri", "name", "title", "description", "mimeType", "size", "icons"]))?;
            req_str(m, "uri", at)?;
            req_str(m, "name", at)?;
            for k in ["title", "description", "mimeType"] {
                opt_str(m, k, at)?;
            }
            if !matches!(m.get("size"), None | Some(Value::Number(_))) {
                return bad(&format!("{at}.size"), "must be a number");
            }
            if !matches!(m.get("icons"), None | Some(Value::Array(_))) {
                return bad(&format!("{at}.icons"), "must be an array");
            }
        }
        _ => return bad(&format!("{at}.type"), "must be text, image, audio, resource or resource_link"),
    }
    annotations(m, at)?;
    opt_obj(m, "_meta", at)
}

/// `notifications/progress` params: the token and the numbers.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct ProgressParams {
    pub token: Value,
    pub progress: f64,
    pub total: Option<f64>,
    pub message: Option<Outside>,
}

pub(crate) fn progress(params: Option<&Value>) -> Option<ProgressParams> {
    let m = params?.as_object()?;
    if m.keys().any(|k| !matches!(k.as_str(), "progressToken" | "progress" | "total" | "message" | "_meta")) {
        return None;
    }
    let token = m.get("progressToken").filter(|t| t.is_string() || t.is_i64())?.clone();
    let progress = m.get("progress")?.as_f64()?;
    let total = match m.get("total") {
        None => None,
        Some(t) => Some(t.as_f64()?),
    };
    let message = match m.get("message") {
        None => None,
        Some(Value::String(s)) => Some(Outside::new(s.as_str())),
        Some(_) => return None,
    };
    Some(ProgressParams { token, progress, total, message })
}

pub(crate) mod task;

#[cfg(test)]
mod tests;
