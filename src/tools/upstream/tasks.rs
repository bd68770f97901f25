//! Tasks toward upstreams (issue 33, section 4; MCP 2025-11-25 basic/utilities/tasks):
//! a tool call the upstream runs as a task is a task for the client too.
//!
//! ```text
//!  tools/call {task} of an upstream tool ──> the policy says `tasks`, the upstream declared
//!     tasks.requests.tools.call, the tool's taskSupport is optional or required?
//!       no  ──> an ordinary call (the `task` member is not sent)
//!       yes ──> tools/call {task} upstream ──> CreateTaskResult (wire/task.rs, strict)
//!               ──> [`Created`]: the upstream, its own task id, the call (tool, arguments),
//!                   the run of the upstream process it lives in; the server names it
//!                   with an id of its own (`server/tasks.rs`) and keeps the map
//!  tasks/get | tasks/result | tasks/cancel (sp's id) ──> the server's map ──> [`authorize`]
//!     (the call still allowed by the policy in force) ──> the same run of the upstream
//!     (a restarted or removed upstream lost its tasks) ──> relayed with ITS id ──> answer
//!     checked: a Task rebuilt with sp's id, or the CallToolResult checked like a call's
//! ```
//!
//!
//! sp's own requests about a task, each within [`OWN_WAIT`]: at the session's end
//! ([`Upstreams::end_task`]: `tasks/get`, then the result or `tasks/cancel`), and
//! `tasks/cancel` of a task created for a call the client had cancelled
//! ([`Upstreams::cancel_task`], [`Upstreams::cancel_orphans`]: `client/orphans.rs`).
//! A `notifications/tasks/status` saying a task ended is kept by the client
//! (`client/orphans.rs`); the loop then fetches its result ([`Upstreams::reported_end`]).
//!
//! The client never sees an upstream's task id and never names one: sp's ids are random
//! and map to exactly one (upstream, id) pair, so no id can reach another upstream's
//! task, or a task this session did not create.

use std::fmt;
use std::time::{Duration, Instant};

use serde_json::{json, Map, Value};

use super::route::{authorize_resolved, Route, Tables};
use super::wire::task::{self as wt, TaskState, TaskSupport};
use super::{client_error, running, wire, ProgressNote, UpstreamCall, UpstreamDenial, UpstreamError, Upstreams};
use crate::gate::exec::{Cancel, RunContext};
use crate::gate::vault::Vault;
use crate::policy::Policy;
use crate::tools::TaskAsk;

/// What a task-augmented call became.
#[derive(Debug)]
pub enum Started {
    /// Sent (or answered) as an ordinary call.
    Plain(UpstreamCall),
    /// The upstream created a task.
    Task(Created),
}

/// A task an upstream created for a call of this session.
#[derive(Debug, Clone, PartialEq)]
pub struct Created {
    pub(crate) upstream: String,
    pub(crate) tool: String,
    pub(crate) exposed: String,
    arguments: Map<String, Value>,
    /// The upstream's `Task` as it created it (its own id inside).
    pub(crate) state: TaskState,
    /// Which start of the upstream's process holds it.
    run: u64,
    /// When its `ttl` runs out (the upstream may then forget it); `None`: no ttl.
    pub(crate) expires: Option<Instant>,
}

/// The longest sp waits for each request it makes of its own about a task (at the
/// session's end, for an orphan): the session must end, whatever the upstream does.
pub(crate) const OWN_WAIT: Duration = Duration::from_secs(2);

/// How a task the client left unfinished ended at the session's end ([`Upstreams::end_task`]).
#[derive(Debug)]
pub(crate) enum Ending {
    /// It had completed or failed: its result, fetched by sp (not yet scrubbed).
    Result(Result<UpstreamCall, UpstreamError>),
    /// The upstream reports it cancelled.
    Cancelled,
    /// Still running (or its state unknown): `tasks/cancel` was sent when `cancelled`.
    Abandoned { cancelled: bool },
    /// Its upstream was restarted, removed or ended: nothing to ask.
    Gone,
}

/// Why a `tasks/*` request is refused or failed.
#[derive(Debug, PartialEq)]
pub(crate) enum TaskError {
    /// The params are not `{taskId: string}`.
    BadParams(String),
    /// No task of this session has that id.
    Unknown,
    /// The policy in force no longer allows the call the task runs.
    Denied(UpstreamDenial),
    /// The upstream that holds it was restarted, removed, or no longer relays tasks.
    Gone { upstream: String, why: &'static str },
    /// The upstream does not offer `tasks/cancel`.
    NoCancel { upstream: String },
    /// The upstream failed or refused.
    Upstream(UpstreamError),
}

impl fmt::Display for TaskError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TaskError::BadParams(m) => f.write_str(m),
            TaskError::Unknown => f.write_str("no task of this session has that taskId"),
            TaskError::Denied(d) => write!(f, "the task's call is no longer allowed: {d}"),
            TaskError::Gone { upstream, why } => write!(f, "the task is lost: upstream {upstream} {why}"),
            TaskError::NoCancel { upstream } => write!(f, "upstream {upstream} does not offer tasks/cancel"),
            TaskError::Upstream(e) => e.fmt(f),
        }
    }
}

impl std::error::Error for TaskError {}

impl TaskError {
    /// The counter key and the journal's `decision` of a refusal.
    pub(crate) fn reason(&self) -> crate::gate::outcome::Reason {
        use crate::gate::outcome::Reason;
        match self {
            TaskError::BadParams(_) => Reason::InvalidParams,
            TaskError::Unknown | TaskError::Gone { .. } => Reason::NotFound,
            TaskError::Denied(_) => Reason::Denied,
            TaskError::NoCancel { .. } => Reason::MethodNotFound,
            TaskError::Upstream(UpstreamError::Cancelled { .. }) => Reason::Cancelled,
            TaskError::Upstream(_) => Reason::UpstreamError,
        }
    }

    /// The JSON-RPC code (MCP tasks, "Error Handling": an unknown or lost task -32602).
    pub(crate) fn code(&self) -> i32 {
        match self {
            TaskError::NoCancel { .. } => -32601,
            // The upstream refused the task request (MCP: an unknown task, a cancel of a
            // finished one, are -32602 there too).
            TaskError::Upstream(UpstreamError::Refused { .. }) => -32602,
            TaskError::Upstream(_) => -32603,
            _ => -32602,
        }
    }
}

/// The `taskId` of `tasks/get`, `tasks/result` or `tasks/cancel` params: an object with
/// a string `taskId` of at most 64 bytes (sp's ids are shorter) and nothing else but
/// `_meta` (ignored, as the spec says of related-task metadata there).
pub(crate) fn task_id(params: Option<Value>, method: &str) -> Result<String, TaskError> {
    let bad = || TaskError::BadParams(format!("{method} params must be {{\"taskId\": string}}"));
    let Some(Value::Object(mut p)) = params else { return Err(bad()) };
    if p.keys().any(|k| !matches!(k.as_str(), "taskId" | "_meta")) || !matches!(p.get("_meta"), None | Some(Value::Object(_))) {
        return Err(bad());
    }
    match p.remove("taskId") {
        Some(Value::String(id)) if !id.is_empty() && id.len() <= 64 => Ok(id),
        Some(Value::String(_)) => Err(TaskError::Unknown),
        _ => Err(bad()),
    }
}

/// Whether the policy in force still allows the call `task` runs: the upstream is
/// configured and relays tasks, the tool is exposed and not withheld by its pin, the
/// argument pins match (pure).
pub(crate) fn authorize(policy: &Policy, tables: &Tables, task: &Created) -> Result<(), TaskError> {
    match policy.upstreams.get(&task.upstream) {
        None => return Err(TaskError::Gone { upstream: task.upstream.clone(), why: "is no longer in the policy" }),
        Some(u) if !u.tasks => return Err(TaskError::Gone { upstream: task.upstream.clone(), why: "no longer has its tasks relayed (tasks: false)" }),
        Some(_) => {}
    }
    if let Some(why) = tables.withheld(&task.exposed) {
        let d = UpstreamDenial::ToolChanged { exposed: task.exposed.clone(), upstream: task.upstream.clone(), why: why.clone() };
        return Err(TaskError::Denied(d));
    }
    authorize_resolved(&policy.upstreams, &task.upstream, &task.tool, &task.exposed, &task.arguments).map(drop).map_err(TaskError::Denied)
}

/// A call of `route` sent as a task (`tool::call_task` decided it may be): the
/// upstream's progress relayed as a direct call's is.
pub(crate) fn create(
    ups: &mut Upstreams,
    route: &Route,
    arguments: &Map<String, Value>,
    ask: TaskAsk,
    ctx: &mut RunContext<'_, '_>,
) -> Result<Started, UpstreamError> {
    let RunContext { vault, cancel, progress, .. } = ctx;
    let mut relay = |n: ProgressNote| progress.relay(n.progress, n.total, n.message.map(|m| m.cut(wire::MAX_MESSAGE_CHARS)));
    let created = ups.create_task(route, arguments, ask, cancel, &mut relay);
    ups.take_tokens(route.upstream(), vault);
    created.map_err(|e| e.scrubbed(vault))
}

impl Upstreams {
    /// Whether a call of `route` may go to its upstream as a task now: the policy says
    /// `tasks`, the running upstream declared task-augmented `tools/call`, and the
    /// listing gave the tool a `taskSupport` other than forbidden.
    pub(crate) fn takes_task(&self, route: &Route) -> bool {
        let Some(slot) = self.slots.get(route.upstream()) else { return false };
        let declared = slot.client.as_ref().is_some_and(|c| !c.is_closed() && c.task_caps().call);
        let support = slot.listing.iter().flatten().find(|t| t.tool == route.tool()).map_or(TaskSupport::Forbidden, |t| t.task_support);
        slot.policy.tasks && declared && support != TaskSupport::Forbidden
    }

    fn create_task(
        &mut self,
        route: &Route,
        arguments: &Map<String, Value>,
        ask: TaskAsk,
        cancel: &Cancel,
        progress: &mut dyn FnMut(ProgressNote),
    ) -> Result<Started, UpstreamError> {
        let started = Instant::now();
        let name = route.upstream();
        let slot = self.slots.get_mut(name).ok_or_else(|| UpstreamError::Unknown { upstream: name.to_owned() })?;
        let (timeout, run) = (slot.policy.timeout, slot.run);
        let client = running(&mut slot.client, name)?;
        let task = ask.ttl.map_or_else(|| json!({}), |ttl| json!({"ttl": ttl}));
        let params = json!({"name": route.tool(), "arguments": arguments, "task": task});
        let answer = client.request("tools/call", params, timeout, cancel, progress).map_err(|e| client_error(name, e, timeout));
        let bad = |why: String| UpstreamError::BadAnswer { upstream: name.to_owned(), why };
        let outcome = answer.and_then(|result| match result.get("task") {
            // A CreateTaskResult: `task`, and `_meta` (dropped, the model-immediate
            // response among it: sp says nothing the upstream chose besides the Task).
            Some(t) => {
                if let Some(k) = result.as_object().and_then(|m| m.keys().find(|k| !matches!(k.as_str(), "task" | "_meta"))) {
                    return Err(bad(format!("result.{}: is not a member of a CreateTaskResult", crate::gate::outside::cut(k, wire::MAX_NAME_CHARS))));
                }
                let state = wt::task(t, "result.task").map_err(|e| bad(e.to_string()))?;
                if state.status != wt::Status::Working {
                    log::info!("upstream {name}: created a task in status {}", state.status.as_str());
                }
                let created = Created {
                    upstream: name.to_owned(),
                    tool: route.tool().to_owned(),
                    exposed: route.exposed().to_owned(),
                    arguments: arguments.clone(),
                    expires: state.ttl_ms().map(|ms| started + Duration::from_millis(ms)),
                    state,
                    run,
                };
                Ok(Started::Task(created))
            }
            // It ran the call at once (allowed of a receiver): an ordinary result.
            None => {
                let result = wire::call_result(result).map_err(|e| bad(e.to_string()))?;
                Ok(Started::Plain(UpstreamCall { result, started: false, duration: started.elapsed() }))
            }
        });
        if let Err(e) = &outcome {
            self.note_death(name, e);
        }
        outcome
    }

    /// Asks the upstream that holds `task` for `method` about it; refused when that
    /// upstream is not the same run (restarted, removed, ended by a reload).
    fn ask_task(&mut self, task: &Created, method: &str, vault: &mut Vault, cancel: &Cancel, cap: Duration) -> Result<Value, TaskError> {
        let name = task.upstream.as_str();
        let gone = |why| TaskError::Gone { upstream: name.to_owned(), why };
        let slot = self.slots.get_mut(name).ok_or_else(|| gone("is no longer in the policy"))?;
        if slot.run != task.run || slot.client.as_ref().is_none_or(|c| c.is_closed()) {
            return Err(gone("was restarted or ended since it created the task"));
        }
        if method == "tasks/cancel" && !slot.client.as_ref().is_some_and(|c| c.task_caps().cancel) {
            return Err(TaskError::NoCancel { upstream: name.to_owned() });
        }
        let timeout = slot.policy.timeout.min(cap);
        let client = running(&mut slot.client, name).map_err(TaskError::Upstream)?;
        let asked = client.request(method, json!({"taskId": task.state.id}), timeout, cancel, &mut |_| {}).map_err(|e| client_error(name, e, timeout));
        if let Err(e) = &asked {
            self.note_death(name, e);
        }
        self.take_tokens(name, vault);
        asked.map_err(|e| TaskError::Upstream(e.scrubbed(vault)))
    }

    /// `tasks/get` or `tasks/cancel` of `task`: the upstream's Task, checked, of the same id.
    pub(crate) fn task_state(&mut self, task: &Created, method: &str, vault: &mut Vault, cancel: &Cancel) -> Result<TaskState, TaskError> {
        self.task_state_within(task, method, vault, cancel, Duration::MAX)
    }

    fn task_state_within(&mut self, task: &Created, method: &str, vault: &mut Vault, cancel: &Cancel, cap: Duration) -> Result<TaskState, TaskError> {
        let answer = self.ask_task(task, method, vault, cancel, cap)?;
        let bad = |why: String| TaskError::Upstream(UpstreamError::BadAnswer { upstream: task.upstream.clone(), why: format!("{method}: {why}") });
        let state = wt::task(&answer, "result").map_err(|e| bad(e.to_string()))?;
        if state.id != task.state.id {
            return Err(bad("the answer is about another task".into()));
        }
        Ok(state)
    }

    /// `tasks/result` of `task`: the call's result, checked like a direct call's (NOT
    /// yet scrubbed: the caller does it as the tool's run does).
    pub(crate) fn task_result(&mut self, task: &Created, vault: &mut Vault, cancel: &Cancel) -> Result<UpstreamCall, TaskError> {
        self.task_result_within(task, vault, cancel, Duration::MAX)
    }

    fn task_result_within(&mut self, task: &Created, vault: &mut Vault, cancel: &Cancel, cap: Duration) -> Result<UpstreamCall, TaskError> {
        let started = Instant::now();
        let answer = self.ask_task(task, "tasks/result", vault, cancel, cap)?;
        let result = wire::call_result(answer)
            .map_err(|e| TaskError::Upstream(UpstreamError::BadAnswer { upstream: task.upstream.clone(), why: format!("tasks/result: {e}") }))?;
        Ok(UpstreamCall { result, started: false, duration: started.elapsed() })
    }
}

impl Upstreams {
    /// Whether the process that created `task` still runs (same start, not closed).
    pub(crate) fn task_alive(&self, task: &Created) -> bool {
        self.slots.get(&task.upstream).is_some_and(|s| s.run == task.run && s.client.as_ref().is_some_and(|c| !c.is_closed()))
    }

    /// A task whose upstream reported it ended (`notifications/tasks/status`), for its
    /// result row: the result fetched (within [`OWN_WAIT`]) or its cancel; `None` while
    /// no end was reported.
    pub(crate) fn reported_end(&mut self, task: &Created, vault: &mut Vault) -> Option<Ending> {
        if !self.task_alive(task) {
            return None;
        }
        let status = self.slots.get(&task.upstream)?.client.as_ref()?.reported_end(&task.state.id)?;
        Some(match status {
            wt::Status::Cancelled => Ending::Cancelled,
            _ => Ending::Result(self.fetch_result(task, vault, &Cancel::new(), OWN_WAIT)),
        })
    }

    /// `tasks/cancel` of `task`, for sp's own sake (the client cancelled the call that
    /// created it, the session ends): best effort, within [`OWN_WAIT`]; whether the
    /// upstream accepted it.
    pub(crate) fn cancel_task(&mut self, task: &Created, vault: &mut Vault) -> bool {
        match self.task_state_within(task, "tasks/cancel", vault, &Cancel::new(), OWN_WAIT) {
            Ok(_) => true,
            Err(e) => {
                log::info!("upstream {}: tasks/cancel of an unfinished task: {e}", task.upstream);
                false
            }
        }
    }

    /// At the session's end, a task the client left unfinished: asked once
    /// (`tasks/get`, within [`OWN_WAIT`]); its result fetched when it has ended,
    /// `tasks/cancel` sent when it still runs.
    pub(crate) fn end_task(&mut self, task: &Created, vault: &mut Vault) -> Ending {
        if !self.task_alive(task) {
            return Ending::Gone;
        }
        let state = self.task_state_within(task, "tasks/get", vault, &Cancel::new(), OWN_WAIT);
        match state.map(|s| s.status) {
            Ok(wt::Status::Completed | wt::Status::Failed) => Ending::Result(self.fetch_result(task, vault, &Cancel::new(), OWN_WAIT)),
            Ok(wt::Status::Cancelled) => Ending::Cancelled,
            Ok(_) | Err(TaskError::Upstream(_)) => Ending::Abandoned { cancelled: self.cancel_task(task, vault) },
            Err(_) => Ending::Gone,
        }
    }

    /// The result of `task`, which has ended: the upstream's failure is the call's
    /// failure (as `tasks/result` answers the client).
    pub(crate) fn fetch_result(&mut self, task: &Created, vault: &mut Vault, cancel: &Cancel, cap: Duration) -> Result<UpstreamCall, UpstreamError> {
        self.task_result_within(task, vault, cancel, cap).map_err(|e| match e {
            TaskError::Upstream(e) => e,
            other => UpstreamError::BadAnswer { upstream: task.upstream.clone(), why: other.to_string() },
        })
    }

    /// `tasks/cancel` of every task an abandoned call created (`client/orphans.rs`), best
    /// effort, each within [`OWN_WAIT`]; `wait`: how long to wait first for late answers
    /// (the session's end), none otherwise.
    pub(crate) fn cancel_orphans(&mut self, wait: Duration) {
        for (name, slot) in &mut self.slots {
            let Some(client) = slot.client.as_mut().filter(|c| !c.is_closed()) else { continue };
            if !wait.is_zero()
                && let Err(e) = client.await_orphans(wait)
            {
                log::info!("upstream {name}: waiting for late answers: {e}");
            }
            for id in client.take_orphans() {
                if !client.task_caps().cancel {
                    log::warn!("upstream {name}: created a task for a call sp had abandoned, and offers no tasks/cancel: it may run on");
                    continue;
                }
                let asked = client.request("tasks/cancel", json!({"taskId": id}), slot.policy.timeout.min(OWN_WAIT), &Cancel::new(), &mut |_| {});
                match asked {
                    Ok(_) => log::info!("upstream {name}: cancelled the task it created for a call sp had abandoned"),
                    Err(e) => log::info!("upstream {name}: tasks/cancel of a task created for an abandoned call: {e}"),
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn policy(def: Value) -> Policy {
        let doc = json!({"upstreams": {"a": def}});
        Policy::from_text(&doc.to_string(), std::path::Path::new("test.json")).unwrap()
    }

    /// The call a task runs is decided again by the policy in force (pure).
    #[test]
    fn a_task_is_authorized_against_the_policy_in_force() {
        let state = wt::task(&json!({"taskId": "t1", "status": "working", "createdAt": "x", "lastUpdatedAt": "x"}), "t").unwrap();
        let task = Created {
            upstream: "a".into(),
            tool: "slow".into(),
            exposed: "a_slow".into(),
            arguments: Map::from_iter([("repo".into(), json!("mine/x"))]),
            state,
            run: 1,
            expires: None,
        };
        let base = json!({"command": ["/a"], "tools": {"allow": ["*"]}, "tasks": true, "sandbox": "none"});
        let tables = Tables::default();
        assert_eq!(authorize(&policy(base.clone()), &tables, &task), Ok(()));
        let mut denied = base.clone();
        denied["tools"] = json!({"allow": ["*"], "deny": ["slow"]});
        assert_eq!(authorize(&policy(denied), &tables, &task), Err(TaskError::Denied(UpstreamDenial::NotAllowed { exposed: "a_slow".into() })));
        let mut pinned = base.clone();
        pinned["arguments"] = json!({"slow": {"repo": ["theirs/*"]}});
        assert!(matches!(authorize(&policy(pinned), &tables, &task), Err(TaskError::Denied(UpstreamDenial::ArgumentMismatch { .. }))));
        let mut off = base.clone();
        off["tasks"] = json!(false);
        assert_eq!(
            authorize(&policy(off), &tables, &task).unwrap_err().to_string(),
            "the task is lost: upstream a no longer has its tasks relayed (tasks: false)"
        );
        let none = Policy::from_text("{}", std::path::Path::new("test.json")).unwrap();
        assert_eq!(authorize(&none, &tables, &task).unwrap_err().to_string(), "the task is lost: upstream a is no longer in the policy");
    }

    #[test]
    fn task_ids_are_read_strictly() {
        let id = |p: Value| task_id(Some(p), "tasks/get");
        assert_eq!(id(json!({"taskId": "sp-1"})), Ok("sp-1".into()));
        assert_eq!(id(json!({"taskId": "sp-1", "_meta": {"x": 1}})), Ok("sp-1".into()));
        let bad = Err(TaskError::BadParams("tasks/get params must be {\"taskId\": string}".into()));
        assert_eq!(id(json!({"taskId": 1})), bad);
        assert_eq!(id(json!({})), bad);
        assert_eq!(id(json!({"taskId": "a", "upstream": "b"})), bad);
        assert_eq!(id(json!({"taskId": "a", "_meta": 1})), bad);
        assert_eq!(task_id(None, "tasks/get"), bad);
        // Longer than any id sp makes: no task of this session, without a lookup.
        assert_eq!(id(json!({"taskId": "x".repeat(65)})), Err(TaskError::Unknown));
    }
}
