//! The loop's part in relaying upstreams' tasks (issue 33, section 4,
//! `tools/upstream/tasks.rs`): the session's map from sp's task ids to the tasks its
//! upstreams created, `tasks/get`, `tasks/result`, `tasks/cancel`, and the end of every
//! task the client leaves unfinished.
//!
//! ```text
//!  tools/call {task} ──> ... intent row ──> run ──> Ran::Task(created) ──> Book::add
//!        (no result row yet)                         ──> CreateTaskResult with sp's id
//!  tasks/get    ID ──> taskId strict ──> Book ──> authorize (policy in force) ──> relayed
//!                  ──> Task rebuilt with ID; first seen completed/failed: sp fetches
//!                      the result (tasks/result upstream), the result row, result kept;
//!                      first seen cancelled: the result row (cancelled)
//!  tasks/result ID ──> as above ──> the kept result, or the CallToolResult checked,
//!                  scrubbed (or withheld) like a direct call's ──> the result row (once)
//!  tasks/cancel ID ──> as above ──> the call's result row, decision cancelled (once)
//!  refused (malformed, unknown ID, denied, lost): a reject row, a JSON-RPC error
//!  after each request touching upstreams: an unfinished task whose upstream process is
//!      gone ──> result row `upstream_gone`; whose ttl ran out ──> `expired`
//!  before a task request, at a tools/list: a task its upstream reported ended
//!      (notifications/tasks/status) ──> as seen at tasks/get
//!  session end: each unfinished task asked once (tasks/get): ended ──> its result
//!      fetched, the result row; running ──> tasks/cancel, result row `abandoned`
//! ```
//!
//! The call is ONE action in the journal: its intent row when it was called, and
//! exactly one result row, the first of those above; a later request about the task
//! writes no row (`sp-audit(1)`). Polls are not rows.

use std::collections::BTreeMap;
use std::io::Write;
use std::time::{Duration, Instant};

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
use crate::tools::upstream::tasks::{self, Created, Ending, TaskError};
use crate::tools::upstream::tool::passed_on;
use crate::tools::Executor;

/// How long the session's end may spend on the tasks the client left unfinished (each
/// request within `tasks::OWN_WAIT`); those not asked by then are `abandoned` unasked.
const END_BUDGET: Duration = Duration::from_secs(10);

/// Tasks kept per session; a task-augmented call made while this many are unfinished
/// runs as an ordinary call (finished ones are forgotten first, oldest first).
pub(super) const MAX_TASKS: usize = 64;

struct Entry {
    created: Created,
    /// The call's journal fields, for its result row.
    audit: Context,
    /// Its result row is written (delivered, seen ended, or ended by sp).
    done: bool,
    /// The result sp fetched when it saw the task end (a later `tasks/result` gets it).
    kept: Option<ToolResult>,
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
        self.entries.insert(id.clone(), Entry { created, audit, done: false, kept: None, serial: self.made });
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
        // A report of its end read meanwhile: its result row (and kept result) first.
        self.settle_reported();
        let Some(entry) = self.tasks.entries.get(&sp_id) else { return Some(self.refuse_task(TaskError::Unknown)) };
        let (created, settled, kept) = (entry.created.clone(), entry.done, entry.kept.clone());
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
        // The result sp fetched when the task ended: the upstream is not asked again.
        if let (Some(result), "tasks/result") = (kept, method) {
            // Scrubbed when it was fetched; a secret read since (a reload) withholds it.
            let result = if withholds(&self.vault, &result) { ToolResult::error(ToolCode::Upstream, Scrubbed::own(WITHHELD)) } else { result };
            return Some((Answer::Result(crate::mcp::model::live::task_result(&result.into_call(), &sp_id)), false));
        }
        let cancel = Cancel::new();
        let session = std::mem::replace(&mut self.session, Session::AwaitingInit);
        let (asked, session) = io.during(session, id, &cancel, |_| self.task_ask(&created, method, settled, &cancel));
        self.session = session;
        self.upstream_aftermath();
        if io.cancel_requested {
            log::info!("{method} cancelled by the client: no answer is sent");
            return None;
        }
        match asked {
            Err(e) => Some(self.refuse_task(e)),
            Ok(Asked::State(state, fetched)) => {
                if method == "tasks/cancel" {
                    self.task_done(&sp_id, Some(ToolCode::Cancelled), Some("cancelled by the client (tasks/cancel)".into()), None);
                } else if state.is_cancelled() {
                    self.task_done(&sp_id, Some(ToolCode::Cancelled), Some("the upstream reports the task cancelled (tasks/get)".into()), None);
                }
                if let Some((result, facts)) = fetched {
                    self.task_settled(&sp_id, result, facts);
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
    /// `settled`: its result row is written (a terminal state fetches nothing more).
    fn task_ask(&mut self, created: &Created, method: &str, settled: bool, cancel: &Cancel) -> Result<Asked, TaskError> {
        let Some(ups) = self.executor.upstreams() else {
            return Err(TaskError::Gone { upstream: created.upstream.clone(), why: "is no longer in the policy" });
        };
        if method != "tasks/result" {
            let state = ups.task_state(created, method, &mut self.vault, cancel)?;
            // Seen ended for the first time: the result is fetched now, for the row.
            let fetched = (method == "tasks/get" && !settled && state.has_result())
                .then(|| passed_on(ups.fetch_result(created, &mut self.vault, cancel, Duration::MAX), &self.vault));
            return Ok(Asked::State(state, fetched));
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
        let decision = match code {
            None => "ok",
            Some(ToolCode::Cancelled) => "cancelled",
            Some(_) => "error",
        };
        self.task_row(sp_id, decision, code, message, facts);
    }

    /// [`Server::task_done`] with the `decision` given.
    fn task_row(&mut self, sp_id: &str, decision: &str, code: Option<ToolCode>, message: Option<String>, facts: Option<crate::gate::exec::Facts>) {
        let Some(entry) = self.tasks.entries.get_mut(sp_id) else { return };
        if std::mem::replace(&mut entry.done, true) {
            return;
        }
        let mut call = entry.audit.clone();
        if let Some(f) = facts {
            call.facts = f;
        }
        let now = std::mem::replace(&mut self.audit, call);
        self.journal_result_as(decision, code, message);
        self.audit = now;
    }

    /// The result sp fetched of an ended task: checked like a call's (or withheld), its
    /// result row written, and kept for the client's `tasks/result`.
    fn task_settled(&mut self, sp_id: &str, result: ToolResult, facts: Option<crate::gate::exec::Facts>) {
        let result = if withholds(&self.vault, &result) { ToolResult::error(ToolCode::Upstream, Scrubbed::own(WITHHELD)) } else { result };
        self.task_done(sp_id, result.code(), result.message().map(str::to_owned), facts);
        if let Some(entry) = self.tasks.entries.get_mut(sp_id) {
            entry.kept = Some(result);
        }
    }

    /// After anything that touched the upstreams: an unfinished task whose upstream
    /// process is gone (died, restarted, ended by a reload) or whose ttl ran out gets its
    /// result row (`upstream_gone`, `expired`). No request is sent.
    pub(super) fn sweep_tasks(&mut self) {
        let now = Instant::now();
        let Some(ups) = self.executor.upstreams() else { return };
        let mut ended = Vec::new();
        for (id, e) in self.tasks.entries.iter().filter(|(_, e)| !e.done) {
            let c = &e.created;
            if !ups.task_alive(c) {
                let why = format!("upstream {} was restarted or ended before the task's result was fetched", c.upstream);
                ended.push((id.clone(), "upstream_gone", why));
            } else if c.expires.is_some_and(|t| now >= t) {
                let ttl = c.state.ttl_ms().unwrap_or_default();
                ended.push((id.clone(), "expired", format!("the task's ttl ({ttl} ms) ran out before its result was fetched")));
            }
        }
        for (id, decision, why) in ended {
            log::info!("task {id}: {why}");
            self.task_row(&id, decision, None, Some(why), None);
        }
    }

    /// The unfinished tasks whose upstream reported them ended
    /// (`notifications/tasks/status`, read meanwhile): each result fetched now (within
    /// `tasks::OWN_WAIT`) and its row written, as a `tasks/get` that saw it ended would,
    /// unless the policy in force no longer allows the call. Called between requests
    /// (a `tools/list`, before a task request, at the session's end), never while a
    /// request about a task is being answered.
    pub(super) fn settle_reported(&mut self) {
        let open: Vec<(String, Created)> = self.tasks.entries.iter().filter(|(_, e)| !e.done).map(|(k, e)| (k.clone(), e.created.clone())).collect();
        for (id, created) in open {
            let Some(ups) = self.executor.upstreams() else { return };
            if tasks::authorize(&self.policy, ups.tables(), &created).is_err() {
                continue;
            }
            if let Some(ending) = ups.reported_end(&created, &mut self.vault) {
                self.task_ending(&id, &created, ending, "its notifications/tasks/status");
                // What the fetch did to the upstream (a death, a token) journaled.
                self.upstream_aftermath();
            }
        }
    }

    /// At the session's end (after the loop, before the upstreams stop): every task the
    /// client left unfinished ends with its result row (module docs), within
    /// [`END_BUDGET`].
    pub(super) fn end_tasks(&mut self) {
        self.sweep_tasks();
        self.settle_reported();
        let mut open: Vec<(u64, String, Created)> =
            self.tasks.entries.iter().filter(|(_, e)| !e.done).map(|(k, e)| (e.serial, k.clone(), e.created.clone())).collect();
        // Oldest first: the budget goes to the tasks that ran longest.
        open.sort_by_key(|o| o.0);
        let budget = Instant::now() + END_BUDGET;
        for (_, id, created) in open {
            let Some(ups) = self.executor.upstreams() else { return };
            // Nothing is relayed about a call the policy in force no longer allows, not
            // even at the end: the upstream is not asked.
            if let Err(e) = tasks::authorize(&self.policy, ups.tables(), &created) {
                self.task_row(&id, "abandoned", None, Some(format!("the session ended before the task did, unasked: {e}")), None);
                continue;
            }
            let ending = match Instant::now() < budget {
                true => ups.end_task(&created, &mut self.vault),
                false => Ending::Abandoned { cancelled: false },
            };
            self.task_ending(&id, &created, ending, "asked at the session's end");
        }
    }

    /// The result row of a task sp found ended (`when`: how it learnt it).
    fn task_ending(&mut self, id: &str, created: &Created, ending: Ending, when: &str) {
        match ending {
            Ending::Result(answer) => {
                let (result, facts) = passed_on(answer, &self.vault);
                self.task_settled(id, result, facts);
            }
            Ending::Cancelled => {
                let why = format!("the upstream reports the task cancelled ({when})");
                self.task_done(id, Some(ToolCode::Cancelled), Some(why), None);
            }
            Ending::Abandoned { cancelled } => {
                let why = match cancelled {
                    true => "the session ended before the task did: tasks/cancel sent to the upstream",
                    false => {
                        "the session ended before the task did: the upstream was not told to cancel it (no tasks/cancel offered, no answer, or no time left)"
                    }
                };
                self.task_row(id, "abandoned", None, Some(why.into()), None);
            }
            Ending::Gone => {
                let why = format!("upstream {} was restarted or ended before the task's result was fetched", created.upstream);
                self.task_row(id, "upstream_gone", None, Some(why), None);
            }
        }
    }

    /// The client cancelled the call whose upstream created `created` (after the
    /// upstream answered, before sp could answer the client): the task is cancelled
    /// upstream, best effort; the call's result row is the caller's (cancelled).
    pub(super) fn cancel_orphan(&mut self, created: &Created) {
        if let Some(ups) = self.executor.upstreams()
            && ups.cancel_task(created, &mut self.vault)
        {
            log::info!("upstream {}: the task created for a call the client cancelled is cancelled", created.upstream);
        }
        self.upstream_aftermath();
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
    /// The Task, and the result sp fetched when it saw it ended first.
    State(crate::tools::upstream::TaskState, Option<(ToolResult, Option<crate::gate::exec::Facts>)>),
    Result(ToolResult, Option<crate::gate::exec::Facts>),
}
