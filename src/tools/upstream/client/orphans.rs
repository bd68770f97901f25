//! Late answers, the tasks they may create, and the task statuses an upstream reports
//! (issue 33, section 4).
//!
//! A request sp gave up on (the client cancelled it, it timed out) is abandoned: a late
//! answer to it is dropped. A task-augmented `tools/call` abandoned that way may still
//! be answered with a `CreateTaskResult`: the upstream then runs a task nobody will ask
//! about. Its id is kept here ([`Client::take_orphans`]) so that `tasks.rs` sends
//! `tasks/cancel` for it; at the session's end sp waits a bounded time for such answers
//! ([`Client::await_orphans`]).
//!
//! ```text
//!  tools/call {task} abandoned (cancel, timeout) ──> watched (at most 64, oldest dropped)
//!  late answer ──> a CreateTaskResult whose task is of the schema? ── yes ──> an orphan id
//!                                                                  └─ no ──> dropped
//!  notifications/tasks/status ──> a Task of the schema, ended? ── yes ──> kept (at most
//!                                  64, oldest dropped; `tasks.rs` asks for the result)
//! ```

use std::collections::VecDeque;
use std::time::{Duration, Instant};

use serde_json::Value;

use super::{Client, ClientError, Recv, RpcError, Transport, WireError};
use crate::gate::exec::Cancel;
use crate::tools::upstream::wire::task::{self as wt, Status};

/// The abandoned task calls watched, and the orphaned task ids kept, at most.
const MAX_ORPHANS: usize = 64;

/// The abandoned task-augmented calls and the orphaned tasks their late answers created;
/// the tasks the upstream reported ended (`notifications/tasks/status`).
#[derive(Debug, Default)]
pub(super) struct Orphans {
    watched: VecDeque<i64>,
    found: Vec<String>,
    ended: VecDeque<(String, Status)>,
}

impl Orphans {
    /// Watches request `id`, abandoned, when it was a task-augmented call.
    pub(super) fn watch(&mut self, id: i64, task_call: bool) {
        if !task_call {
            return;
        }
        if self.watched.len() == MAX_ORPHANS {
            self.watched.pop_front();
        }
        self.watched.push_back(id);
    }

    /// A late answer to `id`: the upstream's task id when `id` was a watched call and the
    /// answer a task (checked as strictly as a live one; kept, never shown).
    fn answered(&mut self, id: i64, outcome: &Result<Value, RpcError>) {
        let Some(pos) = self.watched.iter().position(|w| *w == id) else { return };
        self.watched.remove(pos);
        let task = outcome.as_ref().ok().and_then(|r| r.get("task")).and_then(|t| wt::task(t, "result.task").ok());
        if let Some(t) = task
            && self.found.len() < MAX_ORPHANS
        {
            self.found.push(t.id);
        }
    }
}

impl Orphans {
    /// A `notifications/tasks/status`: kept when it is a Task of the schema that ended
    /// (its params are a Task; anything else is dropped).
    pub(super) fn status(&mut self, params: Option<&Value>) {
        let Some(t) = params.and_then(|p| wt::task(p, "params").ok()) else { return };
        if !(t.has_result() || t.is_cancelled()) || self.ended.iter().any(|(id, _)| *id == t.id) {
            return;
        }
        if self.ended.len() == MAX_ORPHANS {
            self.ended.pop_front();
        }
        self.ended.push_back((t.id, t.status));
    }
}

impl<T: Transport> Client<T> {
    /// How the upstream reported its task `id` ended, if it did.
    pub(crate) fn reported_end(&self, id: &str) -> Option<Status> {
        self.orphans.ended.iter().find(|(i, _)| i == id).map(|(_, s)| *s)
    }

    /// A response for an id other than the one awaited: dropped if abandoned (a task it
    /// created kept as an orphan), else fatal.
    pub(super) fn late(&mut self, id: i64, outcome: &Result<Value, RpcError>) -> Result<(), ClientError> {
        if let Some(pos) = self.abandoned.iter().position(|a| *a == id) {
            self.abandoned.remove(pos);
            self.counters.late_answers += 1;
            self.orphans.answered(id, outcome);
            return Ok(());
        }
        Err(self.fail(ClientError::Wire(WireError::UnknownId { id: id.to_string().into() })))
    }

    /// The upstream's ids of the tasks that abandoned calls created (taken).
    pub(crate) fn take_orphans(&mut self) -> Vec<String> {
        std::mem::take(&mut self.orphans.found)
    }

    /// Reads what the upstream writes, as [`Client::poll`] does, until every abandoned
    /// task call is answered or `wait` has passed (the session's end: its orphans are
    /// cancelled before it is stopped).
    pub(crate) fn await_orphans(&mut self, wait: Duration) -> Result<(), ClientError> {
        let deadline = Instant::now() + wait;
        let cancel = Cancel::new();
        while !self.closed && !self.orphans.watched.is_empty() {
            match self.transport.recv(deadline, &cancel) {
                Ok(Recv::Message(v)) => self.idle(v)?,
                Ok(Recv::TimedOut | Recv::Cancelled) => break,
                Err(e) => return Err(self.fail(ClientError::Transport(e))),
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn task(id: &str, status: &str) -> Value {
        json!({"taskId": id, "status": status, "createdAt": "x", "lastUpdatedAt": "x"})
    }

    #[test]
    fn only_a_watched_calls_late_task_is_an_orphan() {
        let mut o = Orphans::default();
        o.watch(3, true);
        o.watch(4, false);
        o.answered(4, &Ok(json!({"task": task("t4", "working")})));
        o.answered(5, &Ok(json!({"task": task("t5", "working")})));
        assert!(o.found.is_empty(), "not a watched task call");
        o.answered(3, &Ok(json!({"task": {"taskId": "t3", "status": "soon"}})));
        assert!(o.found.is_empty() && o.watched.is_empty(), "a malformed task is dropped, the call no longer watched");
        o.watch(6, true);
        o.answered(6, &Ok(json!({"task": task("t6", "working"), "_meta": {}})));
        assert_eq!(o.found, ["t6"]);
        for id in 0..100 {
            o.watch(id, true);
        }
        assert_eq!(o.watched.len(), MAX_ORPHANS);
    }

    #[test]
    fn only_ended_tasks_of_the_schema_are_kept_from_status_notifications() {
        let mut o = Orphans::default();
        o.status(Some(&task("t1", "working")));
        o.status(Some(&json!({"taskId": "t2", "status": "completed"})));
        o.status(None);
        assert!(o.ended.is_empty());
        o.status(Some(&task("t3", "completed")));
        o.status(Some(&task("t3", "failed")));
        o.status(Some(&task("t4", "cancelled")));
        assert_eq!(o.ended, [("t3".to_owned(), Status::Completed), ("t4".to_owned(), Status::Cancelled)]);
        for i in 0..100 {
            o.status(Some(&task(&format!("x{i}"), "failed")));
        }
        assert_eq!(o.ended.len(), MAX_ORPHANS);
    }
}
