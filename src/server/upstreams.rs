//! The loop's part in the upstream MCP servers (`tools/upstream/`, `sp-policy(5)`
//! UPSTREAMS): their tools in `tools/list`, a called name resolved, their process
//! events as journal rows, their `notifications/tools/list_changed` passed on.
//!
//! ```text
//!  tools/list ──> poll each running upstream (a list_changed it sent meanwhile)
//!    ──> list each upstream (started lazily; cached until its list_changed or its death)
//!    ──> generation moved? ── no ──> the live list as made before
//!                          └─ yes ─> fixed tools + each upstream's exposed tools ──> LiveList::set
//!  after each request that touched upstreams:
//!    events (start, restart, exit, first-use pins, a tool withheld by its pin)
//!      ──> `upstream` journal rows
//!    generation moved ──> LiveList::clear (the control thread stops answering from it)
//!    list_changed news, tools withdrawn after a failed listing
//!                      ──> notifications/tools/list_changed to the client, once each
//! ```
//!
//! Everything here carries no input of the agent but a tool name whose first part
//! names a configured upstream: listing it starts nothing else, and no call is sent.

use std::sync::Arc;

use serde_json::value::RawValue;
use serde_json::Value;

use crate::gate::outcome::{Reason, Rejection, ToolCode};
use crate::mcp::session::Era;
use crate::tools::upstream::{tool::error_code, UpstreamEvent};
use crate::tools::{self, Executor};

use super::Server;

impl<E: Executor> Server<'_, E> {
    /// The live `tools/list` result in `era` when it is current: every upstream listed,
    /// none announcing a change (read without waiting), nothing changed since it was
    /// made. `None`: [`Server::live_list`] makes it (it may start upstreams).
    pub(super) fn current_list(&mut self, era: Era) -> Option<Arc<RawValue>> {
        let live = self.live.clone()?;
        let ups = self.executor.upstreams()?;
        ups.poll();
        let listed = ups.names().all(|n| ups.cached(n).is_some()) && ups.list_changed().is_empty();
        let current = listed && self.live_generation == Some(ups.generation());
        let answer = live.get(era).filter(|_| current);
        self.upstream_aftermath();
        self.settle_reported();
        answer
    }

    /// The `tools/list` result in `era` for a policy with upstreams: `None` when the
    /// executor has no upstreams (the fixed list is answered).
    pub(super) fn live_list(&mut self, era: Era) -> Option<Arc<RawValue>> {
        let live = self.live.clone()?;
        let ups = self.executor.upstreams()?;
        ups.poll();
        let names: Vec<String> = ups.names().map(str::to_owned).collect();
        for name in &names {
            // An upstream that cannot be listed is left out of this answer (its error
            // is logged, scrubbed); the next tools/list tries again, within the crash
            // loop's limit.
            if let Err(e) = ups.list(name, &mut self.vault) {
                log::warn!("tools/list: {e}");
            }
        }
        let generation = ups.generation();
        let current = self.live_generation == Some(generation);
        let answer = match live.get(era).filter(|_| current) {
            Some(raw) => Some(raw),
            None => {
                if !current {
                    live.clear();
                }
                let mut definitions = match tools::definitions_for(&self.policy) {
                    Value::Array(d) => d,
                    other => vec![other],
                };
                for name in &names {
                    definitions.extend(ups.cached(name).unwrap_or_default().iter().map(|t| t.definition.clone()));
                }
                // Tasks are relayed in the handshake eras only (issue 33, section 4):
                // a 2026-07-28 client is not told of a tool's task support.
                if era == Era::Stateless {
                    definitions.iter_mut().filter_map(Value::as_object_mut).for_each(|d| drop(d.remove("execution")));
                }
                self.live_generation = Some(generation);
                live.set(era, Value::Array(definitions))
            }
        };
        self.upstream_aftermath();
        self.settle_reported();
        answer
    }

    /// Whether the upstream that may own `name` is listed and announced no change: its
    /// name table can decide at once, nothing needs to start.
    pub(super) fn owner_listed(&mut self, name: &str) -> bool {
        let Some(ups) = self.executor.upstreams() else { return true };
        let Some(owner) = ups.owner(name) else { return true };
        ups.cached(owner).is_some() && !ups.list_changed().contains(&owner)
    }

    /// Before a call of a name a configured upstream may own: that upstream listed
    /// (started if needed), so the name table can resolve the name. `Err`: the listing
    /// failed; the call is refused with its code.
    pub(super) fn list_owner(&mut self, name: &str) -> Result<(), Rejection> {
        let Some(ups) = self.executor.upstreams() else { return Ok(()) };
        ups.poll();
        let Some(owner) = ups.owner(name).map(str::to_owned) else { return Ok(()) };
        let listed = ups.list(&owner, &mut self.vault).map(drop);
        self.upstream_aftermath();
        // Its tools cannot be offered now (issue 31): SP_UNAVAILABLE, unless the wait
        // itself timed out or was cancelled.
        let code = |e: &crate::tools::upstream::UpstreamError| match error_code(e) {
            c @ (ToolCode::Timeout | ToolCode::Cancelled | ToolCode::Auth) => c,
            _ => ToolCode::Unavailable,
        };
        listed.map_err(|e| Rejection { reason: Reason::UpstreamUnavailable, code: code(&e), message: e.to_string() })
    }

    /// After anything that touched the upstreams: their events journaled, a live list
    /// made before a change forgotten, and the client told of list changes.
    pub(super) fn upstream_aftermath(&mut self) {
        let Some(ups) = self.executor.upstreams() else { return };
        let events = ups.take_events();
        let generation = ups.generation();
        let news = ups.take_news();
        let relayed = ups.take_relayed(&self.vault);
        self.relayed.extend(relayed);
        if self.live_generation.is_some_and(|g| g != generation)
            && let Some(live) = &self.live
        {
            live.clear();
            self.live_generation = None;
        }
        for event in events {
            // An upstream's own row: its name as the target, nothing of the request that
            // happened to be handled (its tool, fingerprint, credential) (issue 31).
            let row = match event {
                UpstreamEvent::Started { upstream, pid, restart } => crate::audit::Row::new("upstream")
                    .set("target", upstream)
                    .set("decision", if restart { "restart" } else { "start" })
                    .set("reason", format!("process group {pid}")),
                UpstreamEvent::Ended { upstream, why } => {
                    crate::audit::Row::new("upstream").set("target", upstream).set("decision", "exit").set("reason", why)
                }
                UpstreamEvent::Pinned { upstream, count } => crate::audit::Row::new("upstream")
                    .set("target", upstream)
                    .set("decision", "pin")
                    .set("reason", format!("{count} tool definition(s) pinned at first use")),
                // Both hashes, in full: what `sp upstream diff` will show the operator.
                UpstreamEvent::Withheld { upstream, why } => crate::audit::Row::new("upstream")
                    .set("target", format!("{upstream} {}", why.tool))
                    .set("decision", "withhold")
                    .set("code", Some(crate::gate::outcome::ToolCode::ToolChanged.as_str().to_owned()))
                    .set("reason", why.to_string()),
                // An OAuth refresh (issue 33 §2): the endpoint and the outcome, never a token.
                UpstreamEvent::Token { upstream, note } => {
                    let row = crate::audit::Row::new("token").set("target", format!("{upstream} {}", note.target));
                    match note.outcome {
                        Ok(secs) => row
                            .set("decision", "ok")
                            .set("reason", secs.map_or("no expires_in (300 s assumed)".into(), |s| format!("refreshed, expires_in {s} s"))),
                        Err(why) => row.set("decision", "error").set("code", Some(ToolCode::Auth.as_str().to_owned())).set("reason", why),
                    }
                }
            };
            self.journal.record(row);
        }
        for upstream in news {
            log::info!("upstream {upstream}: its tools changed (or were withdrawn); the client is told");
            self.list_changes += 1;
        }
        // A task whose upstream is gone (or whose ttl ran out) gets its result row.
        self.sweep_tasks();
    }

    /// Sends the client one `notifications/tools/list_changed` for the changes noted
    /// since the last one.
    pub(super) fn tell_list_changes<W: std::io::Write + Send>(&mut self, io: &crate::mcp::control::Input<'_, '_, '_, W>) -> std::io::Result<()> {
        for note in std::mem::take(&mut self.relayed) {
            io.write(|out| out.send(&note))?;
        }
        if self.list_changes == 0 {
            return Ok(());
        }
        self.list_changes = 0;
        io.write(|out| out.send(&crate::mcp::model::Notification::tools_list_changed()))
    }

    /// `work` (listing upstreams, which may start them) with the control thread serving
    /// the client meanwhile, as during a call (`mcp/control`): pings answered, a cancel of
    /// request `id` noted (`io.cancel_requested`).
    pub(super) fn not_deaf<W: std::io::Write + Send, T>(
        &mut self,
        io: &mut crate::mcp::control::Input<'_, '_, '_, W>,
        id: &crate::mcp::jsonrpc::Id,
        work: impl FnOnce(&mut Self) -> T,
    ) -> T {
        let cancel = crate::gate::exec::Cancel::new();
        let session = std::mem::replace(&mut self.session, crate::mcp::session::Session::AwaitingInit);
        let (out, session) = io.during(session, id, &cancel, |_| work(self));
        self.session = session;
        out
    }

    /// At the end of the session: every upstream ended (TERM, then KILL after the
    /// grace), and their `exit` rows written.
    pub(super) fn end_upstreams(&mut self) {
        // The tasks the client left unfinished first (`tasks.rs`), while their upstreams run.
        self.end_tasks();
        if let Some(ups) = self.executor.upstreams() {
            ups.shutdown();
        }
        self.upstream_aftermath();
    }
}
