//! The task shapes of MCP 2025-11-25 (basic/utilities/tasks) as an upstream writes them,
//! checked as strictly as the rest of `wire.rs` (issue 33, section 4): its `tasks`
//! capability, a tool's `execution.taskSupport`, and a `Task` object (the
//! `CreateTaskResult`'s `task`, and the result of `tasks/get` and `tasks/cancel`).
//!
//! A `Task` is rebuilt, never passed on: the members the schema defines, each of its
//! type and bounded; `statusMessage` is outside text (scrubbed, then cut, when shown);
//! `_meta` and any extension member are dropped; the upstream's `taskId` is replaced by
//! sp's own ([`TaskState::shown`]), which is all the client ever sees of it.

use serde_json::{Map, Value};

use super::{bad, members, Shape, MAX_MESSAGE_CHARS};
use crate::gate::outside::Outside;
use crate::gate::vault::{Scrubbed, Vault};

/// The longest task id sp accepts from an upstream (it is kept, never shown).
pub(crate) const MAX_TASK_ID: usize = 256;
/// The longest `createdAt` / `lastUpdatedAt` (an ISO 8601 time is about 30 characters).
const MAX_TIME: usize = 64;

/// What an upstream's `initialize` result says of tasks: task-augmented `tools/call`
/// (`tasks.requests.tools.call`) and `tasks/cancel` (`tasks.cancel`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct TaskCaps {
    pub call: bool,
    pub cancel: bool,
}

/// `capabilities.tasks` of an `initialize` result; `None` when it is not of the schema's
/// shape (objects all the way down).
pub(crate) fn caps(tasks: Option<&Value>) -> Result<TaskCaps, &'static str> {
    let Some(t) = tasks else { return Ok(TaskCaps::default()) };
    let Value::Object(t) = t else { return Err("result.capabilities.tasks") };
    let object = |v: Option<&Value>, at| match v {
        None => Ok(None),
        Some(Value::Object(m)) => Ok(Some(m.clone())),
        Some(_) => Err(at),
    };
    let cancel = object(t.get("cancel"), "result.capabilities.tasks.cancel")?.is_some();
    let requests = object(t.get("requests"), "result.capabilities.tasks.requests")?.unwrap_or_default();
    let tools = object(requests.get("tools"), "result.capabilities.tasks.requests.tools")?.unwrap_or_default();
    let call = object(tools.get("call"), "result.capabilities.tasks.requests.tools.call")?.is_some();
    Ok(TaskCaps { call, cancel })
}

/// A tool's `execution.taskSupport` (absent: forbidden).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) enum TaskSupport {
    #[default]
    Forbidden,
    Optional,
    Required,
}

impl TaskSupport {
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            TaskSupport::Forbidden => "forbidden",
            TaskSupport::Optional => "optional",
            TaskSupport::Required => "required",
        }
    }
}

/// `execution` of a tool definition (`at` is `tools[i]`): only `taskSupport`, one of
/// the three words.
pub(crate) fn execution(m: &Map<String, Value>, at: &str) -> Shape<TaskSupport> {
    let Some(e) = m.get("execution") else { return Ok(TaskSupport::Forbidden) };
    let eat = format!("{at}.execution");
    let e = members(e, &eat, &["taskSupport"])?;
    match e.get("taskSupport").map(Value::as_str) {
        None | Some(Some("forbidden")) => Ok(TaskSupport::Forbidden),
        Some(Some("optional")) => Ok(TaskSupport::Optional),
        Some(Some("required")) => Ok(TaskSupport::Required),
        Some(_) => bad(&format!("{eat}.taskSupport"), "must be \"forbidden\", \"optional\" or \"required\""),
    }
}

/// A task's status.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Status {
    Working,
    InputRequired,
    Completed,
    Failed,
    Cancelled,
}

impl Status {
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Status::Working => "working",
            Status::InputRequired => "input_required",
            Status::Completed => "completed",
            Status::Failed => "failed",
            Status::Cancelled => "cancelled",
        }
    }
}

/// A checked `Task`: the upstream's id (kept, never shown) and the members shown.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct TaskState {
    pub id: String,
    pub status: Status,
    message: Option<Outside>,
    created_at: String,
    updated_at: String,
    /// `ttl`: `Some(None)` is `null` (unlimited); `None` absent.
    ttl: Option<Option<u64>>,
    poll: Option<u64>,
}

const TASK_MEMBERS: &[&str] = &["taskId", "status", "statusMessage", "createdAt", "lastUpdatedAt", "ttl", "pollInterval", "_meta"];

/// A `Task` object (`at` names where it is: `result.task`, `result`). A `GetTaskResult`
/// is a `Result & Task`, so `_meta` is allowed and dropped.
pub(crate) fn task(v: &Value, at: &str) -> Shape<TaskState> {
    let m = members(v, at, TASK_MEMBERS)?;
    let id = match m.get("taskId") {
        Some(Value::String(s)) if !s.is_empty() && s.len() <= MAX_TASK_ID => s.clone(),
        _ => return bad(&format!("{at}.taskId"), "must be a string of 1 to 256 bytes"),
    };
    let status = match m.get("status").and_then(Value::as_str) {
        Some("working") => Status::Working,
        Some("input_required") => Status::InputRequired,
        Some("completed") => Status::Completed,
        Some("failed") => Status::Failed,
        Some("cancelled") => Status::Cancelled,
        _ => return bad(&format!("{at}.status"), "must be working, input_required, completed, failed or cancelled"),
    };
    let message = match m.get("statusMessage") {
        None => None,
        Some(Value::String(s)) => Some(Outside::new(s.as_str())),
        Some(_) => return bad(&format!("{at}.statusMessage"), "must be a string"),
    };
    let time = |k: &str| match m.get(k) {
        Some(Value::String(s)) if !s.is_empty() && s.len() <= MAX_TIME && s.bytes().all(|b| b.is_ascii_graphic()) => Ok(s.clone()),
        _ => bad(&format!("{at}.{k}"), "must be an ISO 8601 time (printable ASCII, at most 64 bytes)"),
    };
    let (created_at, updated_at) = (time("createdAt")?, time("lastUpdatedAt")?);
    let ttl = match m.get("ttl") {
        None => None,
        Some(Value::Null) => Some(None),
        Some(Value::Number(n)) if n.as_u64().is_some() => Some(n.as_u64()),
        Some(_) => return bad(&format!("{at}.ttl"), "must be a non-negative integer or null"),
    };
    let poll = match m.get("pollInterval") {
        None => None,
        Some(Value::Number(n)) if n.as_u64().is_some() => n.as_u64(),
        Some(_) => return bad(&format!("{at}.pollInterval"), "must be a non-negative integer"),
    };
    Ok(TaskState { id, status, message, created_at, updated_at, ttl, poll })
}

impl TaskState {
    /// The upstream's `ttl` in milliseconds, when it gave one (`null`: unlimited).
    pub(crate) fn ttl_ms(&self) -> Option<u64> {
        self.ttl.flatten()
    }

    /// Whether the task has ended with a result to fetch (completed, failed).
    pub(crate) fn has_result(&self) -> bool {
        matches!(self.status, Status::Completed | Status::Failed)
    }

    /// Whether the task was cancelled.
    pub(crate) fn is_cancelled(&self) -> bool {
        self.status == Status::Cancelled
    }

    /// The `Task` the client sees: sp's id `shown_id` in place of the upstream's, the
    /// status message scrubbed, then cut; the whole scrubbed of every secret of the
    /// session (`None`: it spells one in a form that cannot be scrubbed, withheld).
    pub(crate) fn shown(&self, shown_id: &str, vault: &Vault) -> Option<Scrubbed<Value>> {
        let mut m = Map::new();
        m.insert("taskId".into(), Value::String(shown_id.to_owned()));
        m.insert("status".into(), Value::from(self.status.as_str()));
        if let Some(msg) = &self.message {
            m.insert("statusMessage".into(), Value::String(msg.cut(MAX_MESSAGE_CHARS).into_inner()));
        }
        m.insert("createdAt".into(), Value::String(self.created_at.clone()));
        m.insert("lastUpdatedAt".into(), Value::String(self.updated_at.clone()));
        match self.ttl {
            None => {}
            Some(None) => {
                m.insert("ttl".into(), Value::Null);
            }
            Some(Some(t)) => {
                m.insert("ttl".into(), Value::from(t));
            }
        }
        if let Some(p) = self.poll {
            m.insert("pollInterval".into(), Value::from(p));
        }
        // The times are the upstream's too: a secret spelled there is scrubbed as well.
        crate::gate::withhold::scrub_upstream(vault, Value::Object(m))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn ok() -> Value {
        json!({"taskId": "t-1", "status": "working", "createdAt": "2025-11-25T10:30:00Z", "lastUpdatedAt": "2025-11-25T10:30:00Z", "ttl": 60000, "pollInterval": 100, "_meta": {"x": 1}})
    }

    #[test]
    fn a_task_is_rebuilt_with_sps_id_and_only_its_members() {
        let t = task(&ok(), "result.task").unwrap();
        assert_eq!(t.id, "t-1");
        let shown = t.shown("sp-abc", &Vault::default()).unwrap().into_inner();
        assert_eq!(
            shown,
            json!({"taskId": "sp-abc", "status": "working", "createdAt": "2025-11-25T10:30:00Z", "lastUpdatedAt": "2025-11-25T10:30:00Z", "ttl": 60000, "pollInterval": 100})
        );
    }

    #[test]
    fn malformed_tasks_are_refused_naming_the_member() {
        let with = |k: &str, v: Value| {
            let mut t = ok();
            t[k] = v;
            task(&t, "result.task").unwrap_err().to_string()
        };
        assert_eq!(with("status", json!("done")), "result.task.status: must be working, input_required, completed, failed or cancelled");
        assert_eq!(with("taskId", json!(7)), "result.task.taskId: must be a string of 1 to 256 bytes");
        assert_eq!(with("taskId", json!("x".repeat(257))), "result.task.taskId: must be a string of 1 to 256 bytes");
        assert_eq!(with("ttl", json!(-1)), "result.task.ttl: must be a non-negative integer or null");
        assert_eq!(with("createdAt", json!("2025\n")), "result.task.createdAt: must be an ISO 8601 time (printable ASCII, at most 64 bytes)");
        assert_eq!(with("extra", json!(1)), "result.task.extra: is not a member MCP defines here");
        assert_eq!(with("statusMessage", json!([])), "result.task.statusMessage: must be a string");
    }

    #[test]
    fn capabilities_and_task_support_are_read_strictly() {
        assert_eq!(caps(None), Ok(TaskCaps::default()));
        assert_eq!(caps(Some(&json!({"cancel": {}, "requests": {"tools": {"call": {}}}}))), Ok(TaskCaps { call: true, cancel: true }));
        assert_eq!(caps(Some(&json!({"list": {}}))), Ok(TaskCaps::default()));
        assert_eq!(caps(Some(&json!({"requests": {"tools": {"call": true}}}))), Err("result.capabilities.tasks.requests.tools.call"));
        let def = |e: Value| json!({"execution": e}).as_object().unwrap().clone();
        assert_eq!(execution(&def(json!({"taskSupport": "optional"})), "tools[0]"), Ok(TaskSupport::Optional));
        assert_eq!(execution(&def(json!({})), "tools[0]"), Ok(TaskSupport::Forbidden));
        assert_eq!(
            execution(&def(json!({"taskSupport": "maybe"})), "tools[0]").unwrap_err().to_string(),
            "tools[0].execution.taskSupport: must be \"forbidden\", \"optional\" or \"required\""
        );
        assert_eq!(execution(&def(json!({"other": 1})), "tools[0]").unwrap_err().to_string(), "tools[0].execution.other: is not a member MCP defines here");
    }
}
