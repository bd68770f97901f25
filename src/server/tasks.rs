//! The loop's part in relaying upstreams' tasks (issue 33, section 4,
//! `tools/upstream/tasks.rs`): the session's map from sp's task ids to the tasks its
//! upstreams created, and `tasks/get`, `tasks/result`, `tasks/cancel`.
//!
//! ```text
//!  tools/call {task} ──> ... intent row ──> run ──> Ran::Task(created) ──> Book::add
//!        (no result row yet)                         ──> CreateTaskResult with sp's id
//!  tasks/get    ID ──> taskId strict ──> Book ──> authorize (policy in force) ──> relayed
//!                  ──> Task rebuilt with ID (no row)
//!  tasks/result ID ──> as above ──> the CallToolResult checked, scrubbed (or withheld)
//!                  like a direct call's ──> the call's result row (once)
//!  tasks/cancel ID ──> as above ──> the call's result row, decision cancelled (once)
//!  refused (malformed, unknown ID, denied, lost): a reject row, a JSON-RPC error
//! ```
//!
//! The call is ONE action in the journal: its intent row when it was called, its result
//! row when `tasks/result` delivers the result (or `tasks/cancel` cancels it), carrying
//! the call's own fields (tool, target, rule, credential, request_fp of the call) and
//! the duration since the call. Polls are not rows (`sp-audit(1)`).

use std::collections::BTreeMap;
use std::io::Write;

use serde_json::Value;

use super::{journal, Server};
use crate::audit::Context;
use crate::gate::exec::Cancel;
use crate::gate::outcome::ToolCode;
use crate::gate::vault::Scrubbed;
use crate::gate::withhold::{withholds, WITHHELD};
use crate::mcp::control::Input;
use crate::mcp::jsonrpc::Id;
use crate::mcp::model::{Answer, ErrorCode, ErrorData, ToolResult};
use crate::mcp::session::Session;
use crate::tools::upstream::tasks::{self, Created, TaskError};
use crate::tools::upstream::tool::passed_on;
use crate::tools::Executor;

/// Tasks kept per session; a task-augmented call made while this many are unfinished
/// runs as an ordinary call (finished ones are forgotten first, oldest first).
pub(super) const MAX_TASKS: usize = 64;

struct Entry {
    created: Created,
    /// The call's journal fields, for its result row.
    audit: Context,
    /// Its result row is written (delivered or cancelled).
    done: bool,
    /// Order of creation (oldest finished ones go first).
    serial: u64,
}

/// The session's tasks, by sp's id.
#[derive(Default)]
pub(super) struct Book {
    entries: BTreeMap<String, Entry>,
    made: u64,
}

impl Book {
    /// Whether a new task could be kept.
    pub(super) fn has_room(&self) -> bool {
        self.entries.values().filter(|e| !e.done).count() < MAX_TASKS
    }

    /// Keeps `created` under a new random id, which it returns.
    fn add(&mut self, created: Created, audit: Context) -> String {
        while self.entries.len() >= MAX_TASKS {
            let Some(oldest) = self.entries.iter().filter(|(_, e)| e.done).min_by_key(|(_, e)| e.serial).map(|(k, _)| k.clone()) else { break };
            self.entries.remove(&oldest);
        }
        self.made += 1;
        let id = loop {
            let id = new_id(self.made);
            if !self.entries.contains_key(&id) {
                break id;
            }
        };
        self.entries.insert(id.clone(), Entry { created, audit, done: false, serial: self.made });
        id
    }
}

/// `sp-` and 32 hex digits from the kernel's generator (a hash of the time and a count
/// when it cannot answer): never an upstream's id, never derived from one.
fn new_id(count: u64) -> String {
    use sha2::Digest as _;
    let mut bytes = [0u8; 16];
    if !matches!(rustix::rand::getrandom(&mut bytes, rustix::rand::GetRandomFlags::NONBLOCK), Ok(16)) {
        let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default();
        let digest = sha2::Sha256::digest(format!("{count} {} {}", now.as_nanos(), std::process::id()));
        bytes.copy_from_slice(&digest[..16]);
    }
    let hex: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
    format!("sp-{hex}")
}

impl<E: Executor> Server<'_, E> {
    /// A task the upstream created for the call being handled: kept, and answered as a
    /// `CreateTaskResult` with sp's id. No result row: that comes with its result.
    pub(super) fn task_created(&mut self, created: Created) -> Answer {
        let tool = journal::tool_field(&created.exposed);
        self.stats.executed_one(&tool, "task");
        let shown = created.state.clone();
        let id = self.tasks.add(created, self.audit.clone());
        log::info!("{tool}: the upstream runs it as a task ({id})");
        match shown.shown(&id, &self.vault) {
            Some(task) => Answer::Result(serde_json::json!({"task": task.into_inner()})),
            None => Answer::Error(ErrorData::new(ErrorCode(-32603), WITHHELD)),
        }
    }

    /// `tasks/get`, `tasks/result` or `tasks/cancel`; `None`: the client cancelled the
    /// request (no answer).
    pub(super) fn task_request<W: Write + Send>(
        &mut self,
        id: &Id,
        method: &str,
        params: Option<Value>,
        io: &mut Input<'_, '_, '_, W>,
    ) -> Option<(Answer, bool)> {
        let sp_id = match tasks::task_id(params, method) {
            Ok(t) => t,
            Err(e) => return Some(self.refuse_task(e)),
        };
        let Some(entry) = self.tasks.entries.get(&sp_id) else { return Some(self.refuse_task(TaskError::Unknown)) };
        let created = entry.created.clone();
        if self.audited() {
            self.audit.tool = Some(journal::tool_field(&created.exposed));
            self.audit.target = Some(format!("{method} {sp_id}"));
        }
        let allowed = match self.executor.upstreams() {
            Some(ups) => tasks::authorize(&self.policy, ups.tables(), &created),
            None => Err(TaskError::Gone { upstream: created.upstream.clone(), why: "is no longer in the policy" }),
        };
        if let Err(e) = allowed {
            return Some(self.refuse_task(e));
        }
        let cancel = Cancel::new();
        let session = std::mem::replace(&mut self.session, Session::AwaitingInit);
        let (asked, session) = io.during(session, id, &cancel, |_| self.task_ask(&created, method, &cancel));
        self.session = session;
        self.upstream_aftermath();
        if io.cancel_requested {
            log::info!("{method} cancelled by the client: no answer is sent");
            return None;
        }
        match asked {
            Err(e) => Some(self.refuse_task(e)),
            Ok(Asked::State(state)) => {
                if method == "tasks/cancel" {
                    self.task_done(&sp_id, Some(ToolCode::Cancelled), Some("cancelled by the client (tasks/cancel)".into()), None);
                }
                Some(match state.shown(&sp_id, &self.vault) {
                    Some(task) => (Answer::Result(task.into_inner()), false),
                    None => (Answer::Error(ErrorData::new(ErrorCode(-32603), WITHHELD)), false),
                })
            }
            Ok(Asked::Result(result, facts)) => {
                let result = if withholds(&self.vault, &result) { ToolResult::error(ToolCode::Upstream, Scrubbed::own(WITHHELD)) } else { result };
                self.task_done(&sp_id, result.code(), result.message().map(str::to_owned), facts);
                Some((Answer::Result(crate::mcp::model::live::task_result(&result.into_call(), &sp_id)), false))
            }
        }
    }

    /// The work, while the control thread serves.
    fn task_ask(&mut self, created: &Created, method: &str, cancel: &Cancel) -> Result<Asked, TaskError> {
        let Some(ups) = self.executor.upstreams() else {
            return Err(TaskError::Gone { upstream: created.upstream.clone(), why: "is no longer in the policy" });
        };
        if method != "tasks/result" {
            return ups.task_state(created, method, &mut self.vault, cancel).map(Asked::State);
        }
        // The upstream's failure is the call's failure, answered like a direct call's
        // (SP_UPSTREAM, SP_TIMEOUT, ...): tasks/result returns what the call would have.
        let answer = match ups.task_result(created, &mut self.vault, cancel) {
            Ok(call) => Ok(call),
            Err(TaskError::Upstream(e)) => Err(e),
            Err(other) => return Err(other),
        };
        let (result, facts) = passed_on(answer, &self.vault);
        Ok(Asked::Result(result, facts))
    }

    /// The call's result row, once (the call's own fields, its facts), and the entry
    /// marked finished.
    fn task_done(&mut self, sp_id: &str, code: Option<ToolCode>, message: Option<String>, facts: Option<crate::gate::exec::Facts>) {
        let Some(entry) = self.tasks.entries.get_mut(sp_id) else { return };
        if std::mem::replace(&mut entry.done, true) {
            return;
        }
        let mut call = entry.audit.clone();
        if let Some(f) = facts {
            call.facts = f;
        }
        let now = std::mem::replace(&mut self.audit, call);
        self.journal_result(code, message);
        self.audit = now;
    }

    /// A refused task request: counted, a reject row, a JSON-RPC error.
    fn refuse_task(&mut self, e: TaskError) -> (Answer, bool) {
        log::info!("refused: {e}");
        self.reject(e.reason());
        self.journal_reject(e.reason(), Some(&e.code().to_string()), &e.to_string());
        (Answer::Error(ErrorData::new(ErrorCode(e.code()), &e)), true)
    }
}

/// What the upstream answered about a task.
enum Asked {
    State(crate::tools::upstream::TaskState),
    Result(ToolResult, Option<crate::gate::exec::Facts>),
}
