//! A `tools/call` request's JSON-RPC level checks: `params` an object, `name` a string
//! naming a tool this session may have, `arguments` an object, `_meta.progressToken` a
//! string or an integer. The tool's own arguments are checked by `ToolCall::parse`.

use std::fmt;

use serde_json::{Map, Value};

use super::{known, NAMES};
use crate::mcp::jsonrpc::kind_of;
use crate::policy::Policy;

/// A `tools/call` request that passed the JSON-RPC level checks.
#[derive(Debug, PartialEq)]
pub struct CallRequest {
    pub name: String,
    pub arguments: Map<String, Value>,
    /// `_meta.progressToken` (a string or an integer), if the client wants progress.
    pub progress_token: Option<Value>,
    /// `task` (MCP 2025-11-25 task augmentation): the client asks for a task. Honoured
    /// only for an upstream tool whose upstream sp relays tasks of (`upstream/tasks.rs`);
    /// any other call runs as an ordinary one.
    pub task: Option<TaskAsk>,
}

/// A `tools/call`'s `task` member (`TaskMetadata`): only `ttl`, milliseconds.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct TaskAsk {
    pub ttl: Option<u64>,
}

#[derive(Debug, PartialEq, Eq)]
pub enum CallError {
    ParamsNotObject { found: &'static str },
    MissingName,
    NameNotString,
    ArgumentsNotObject { found: &'static str },
    BadMeta,
    BadTask,
    UnknownTool { name: String },
}

impl fmt::Display for CallError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CallError::ParamsNotObject { found } => write!(f, "tools/call params must be an object, found {found}"),
            CallError::MissingName => f.write_str("tools/call params need a \"name\""),
            CallError::NameNotString => f.write_str("tools/call \"name\" must be a string"),
            CallError::ArgumentsNotObject { found } => write!(f, "tools/call \"arguments\" must be an object, found {found}"),
            CallError::BadMeta => f.write_str("tools/call \"_meta\" must be an object whose progressToken, if any, is a string or an integer"),
            CallError::BadTask => f.write_str("tools/call \"task\" must be an object whose only member, ttl, if any, is a non-negative integer"),
            CallError::UnknownTool { name } => write!(f, "unknown tool {:?}", short(name)),
        }
    }
}

impl std::error::Error for CallError {}

/// Echoed names are cut short: a message must never carry a large agent-chosen payload.
pub(super) fn short(s: &str) -> String {
    crate::sys::short(s, 64, crate::sys::Ellipsis::Marked)
}

/// A `tools/call` of a fixed tool ([`call_request_in`] admits the upstreams' too).
pub fn call_request(params: Option<Value>) -> Result<CallRequest, CallError> {
    call_request_with(params, |name| NAMES.contains(&name))
}

/// A `tools/call` of a fixed tool, or of a name a configured upstream may own (whether
/// it does is known once that upstream is listed: [`ToolCall::parse_in`](super::ToolCall::parse_in)).
pub(crate) fn call_request_in(policy: &Policy, params: Option<Value>) -> Result<CallRequest, CallError> {
    call_request_with(params, |name| known(policy, name))
}

fn call_request_with(params: Option<Value>, known: impl Fn(&str) -> bool) -> Result<CallRequest, CallError> {
    let mut map = match params {
        Some(Value::Object(m)) => m,
        Some(other) => return Err(CallError::ParamsNotObject { found: kind_of(&other) }),
        None => return Err(CallError::ParamsNotObject { found: "nothing" }),
    };
    // Other members (future fields) are ignored, as the schemas allow. `task` (2025-11-25
    // task augmentation) is read strictly: it may make the call a task (issue 33,
    // section 4). The tool's `arguments` stay strict (ToolCall::parse).
    let task = match map.remove("task") {
        None => None,
        Some(Value::Object(t)) => match (t.len(), t.get("ttl")) {
            (0, None) => Some(TaskAsk { ttl: None }),
            (1, Some(Value::Number(n))) if n.as_u64().is_some() => Some(TaskAsk { ttl: n.as_u64() }),
            _ => return Err(CallError::BadTask),
        },
        Some(_) => return Err(CallError::BadTask),
    };
    let name = match map.remove("name") {
        None => return Err(CallError::MissingName),
        Some(Value::String(s)) => s,
        Some(_) => return Err(CallError::NameNotString),
    };
    let arguments = match map.remove("arguments") {
        None => Map::new(),
        Some(Value::Object(a)) => a,
        Some(other) => return Err(CallError::ArgumentsNotObject { found: kind_of(&other) }),
    };
    // MCP "Progress": the token is a string or an integer; other `_meta` members are
    // the client's business and ignored.
    let progress_token = match map.remove("_meta") {
        None => None,
        Some(Value::Object(meta)) => match meta.get("progressToken") {
            None => None,
            Some(t @ Value::String(_)) => Some(t.clone()),
            Some(Value::Number(n)) if n.is_i64() || n.is_u64() => Some(Value::Number(n.clone())),
            Some(_) => return Err(CallError::BadMeta),
        },
        Some(_) => return Err(CallError::BadMeta),
    };
    if !known(&name) {
        return Err(CallError::UnknownTool { name });
    }
    Ok(CallRequest { name, arguments, progress_token, task })
}
