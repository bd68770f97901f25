//! Upstreams: other MCP servers behind the same gate (`sp-policy(5)`, "UPSTREAMS").
//!
//! The operator names each upstream in the policy (`policy/upstreams.rs`); `sp` starts it
//! lazily on the first listing or call that needs it, lists its tools (following
//! `nextCursor`), keeps those that `tools.allow` matches and `tools.deny` does not, and
//! exposes each as `<upstream>_<tool>` (`names.rs`). A call is authorized by a pure
//! function (`authorize`, [`route::authorize_resolved`] once the name is resolved: the name table, the filter, the argument pins) into a
//! [`Route`], which is all [`Upstreams::call_asking`] takes.
//!
//! ```text
//!  policy ──> Upstreams::new ── (nothing runs yet)
//!  list(u) ──> start u if needed ──> tools/list pages ──> wire::tool each ──> filter
//!              (stdio.rs, client.rs)     (bounded)         (strict shape)   (allow/deny)
//!          ──> names (exposed <-> own, collisions refused) ──> pins (pins.rs: a changed
//!              or new tool withheld) ──> cleaned (clean.rs), scrubbed definitions, cached
//!                                        until list_changed
//!              a listing that fails ──> no tools of u (table dropped, client told):
//!                                       nothing stale is offered or called
//!  authorize(policy, tables, exposed, args) ──> Route | UpstreamDenial   (pure)
//!  call(route, args) ──> start u if dead (once; one that keeps dying waits its back-off,
//!          `backoff.rs`, refused meanwhile) ──> tools/call
//!          ──> wire::call_result (strict shape) ──> UpstreamCall (NOT yet scrubbed)
//! ```
//!
//! The pieces: `wire.rs` (what an upstream writes, checked), `client.rs` (the state
//! machine, its diagram), `transport.rs` (the seam), `stdio.rs` (the child process),
//! `http.rs` (Streamable HTTP: a POST per message, JSON or SSE answers), `elicit/` (an
//! upstream's `elicitation/create` during its call, checked and relayed), `names.rs`
//! (exposed names), `expose.rs` (a listing made into exposed tools), `pins.rs` (the
//! pinned definitions), `clean.rs` (what descriptions may hold), `error.rs` (why a listing or call failed),
//! `tasks.rs` (a call the upstream runs as a task, and `tasks/*` toward it, issue 33). The tests (`tests.rs`) drive real published servers and
//! misbehaving ones of our own (`tests/support/upstreams/`).

mod backoff;
mod check;
mod clean;
mod client;
pub(crate) mod elicit;
mod error;
mod expose;
#[cfg(test)]
use expose::name_spells_secret;
mod http;
mod names;
pub(crate) mod oauth;
pub(crate) mod pins;
pub(crate) mod replay;
mod reload;
pub(crate) mod resources;
mod route;
pub(crate) mod tasks;
mod start;
mod stdio;
use start::start;
pub(crate) mod tool;
mod transport;
mod wire;
#[cfg(test)]
mod tests;

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use serde_json::{Map, Value};

pub(crate) use check::{check_summary, inventory};
pub(crate) use client::ProgressNote;
use client::Client;
use error::client_error;
pub use error::UpstreamError;
pub(crate) use names::{exposed_name, upstream_of, NameTable};
pub use route::UpstreamDenial;
#[cfg(test)]
pub(crate) use route::authorize;
pub(crate) use route::{Route, Tables};
#[cfg(test)]
use names::MAX_EXPOSED_LEN;
use stdio::{Launch, StdioTransport};
use transport::Transport;
pub(crate) use wire::task::TaskState;
pub(crate) use wire::CallResult;

use crate::gate::exec::Cancel;
use crate::policy::upstreams::{EnvValue, Upstream, UpstreamTransport};
use crate::policy::{Credential, Policy};
use crate::gate::vault::Vault;

/// Pages of `tools/list` followed, and tools accepted, per upstream.
pub(crate) const MAX_PAGES: usize = 100;
pub(crate) const MAX_TOOLS: usize = 1000;
/// The exposed definitions of one upstream, as JSON: they go into every `tools/list`.
pub(crate) const MAX_LISTING_BYTES: usize = 4 * 1024 * 1024;

/// One exposed tool: its names and the definition the agent sees (`name` is the exposed
/// name; the upstream's description, schemas, title and annotations, scrubbed of every
/// secret this session has read).
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct ExposedTool {
    pub exposed: String,
    pub upstream: String,
    pub tool: String,
    pub definition: Value,
    pub approve: bool,
    /// Its `execution.taskSupport` when sp relays this upstream's tasks, else forbidden.
    pub task_support: wire::task::TaskSupport,
}

/// A finished call: the checked result as the upstream sent it, NOT yet scrubbed.
#[derive(Debug, Clone, PartialEq)]
pub struct UpstreamCall {
    pub(crate) result: CallResult,
    /// The upstream was (re)started for this call.
    pub(crate) started: bool,
    pub(crate) duration: Duration,
}

/// What happened to an upstream's process, for the journal (oldest first).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum UpstreamEvent {
    Started {
        upstream: String,
        pid: i32,
        restart: bool,
    },
    Ended {
        upstream: String,
        why: String,
    },
    /// A listing pinned this many tool definitions (first use, `pins.rs`).
    Pinned {
        upstream: String,
        count: usize,
    },
    /// A listing withheld this tool: its definition does not match its pin.
    Withheld {
        upstream: String,
        why: pins::Withheld,
    },
    /// An OAuth token refresh (`oauth/`): the endpoint and the outcome, never a token.
    Token {
        upstream: String,
        note: oauth::TokenNote,
    },
}

struct Slot {
    policy: Upstream,
    client: Option<Client<Box<dyn Transport>>>,
    /// `auth.oauth`: the running client's token source (`oauth/`).
    bearer: Option<std::sync::Arc<oauth::Bearer>>,
    listing: Option<Vec<ExposedTool>>,
    /// Which start of all upstreams' this client is ([`Upstreams::runs`]): a task lives in
    /// one (`tasks.rs`).
    run: u64,
    /// Its deaths in a row: when it may be started again (`backoff.rs`).
    deaths: backoff::Streak,
    starts: u32,
    /// Its `list_changed` since the last listing was reported ([`Upstreams::take_news`]).
    announced: bool,
    /// A listing failed and its tools were taken out of the list; the client is told
    /// once ([`Upstreams::take_news`]).
    withdrawn: bool,
}

/// What an upstream's call may use of the agent's session (issue 33): the client to
/// relay an elicitation to (none when the session cannot ask), the journal sink.
pub(crate) struct Asking<'a, 'c> {
    pub client: Option<&'a mut (dyn crate::gate::exec::AskClient + 'c)>,
    pub output: &'a mut (dyn crate::gate::exec::Output + 'c),
}

/// Every upstream of the policy, started lazily, ended on [`Upstreams::shutdown`] or drop.
pub struct Upstreams {
    slots: BTreeMap<String, Slot>,
    credentials: BTreeMap<String, Credential>,
    /// `http.ca_file`'s certificates, trusted for https upstreams too.
    roots: Option<Vec<Vec<u8>>>,
    /// The OAuth token store beside the policy (`oauth/store.rs`); none without a
    /// policy file.
    tokens: Option<std::path::PathBuf>,
    tables: Tables,
    /// The pinned tool definitions (`pins.rs`).
    pins: pins::Book,
    events: Vec<UpstreamEvent>,
    /// Counts every change of a listing (made, or dropped with its upstream): a list
    /// built from the listings is current while this has not moved.
    generation: u64,
    /// Counts the upstreams' starts, never reset (a reload keeps it): each running client
    /// has its own number (`Slot::run`).
    runs: u64,
}

impl Upstreams {
    /// The upstreams of `policy`, their first-use pins kept in this process only (tests,
    /// `sp check --probe`): [`Upstreams::with_pins`] names the pins file.
    pub(crate) fn new(policy: &Policy) -> Upstreams {
        Upstreams::with_pins(policy, None)
    }

    /// The upstreams of `policy`, pinned in the file `pins` (`pins::beside` the policy).
    pub(crate) fn with_pins(policy: &Policy, pins: Option<std::path::PathBuf>) -> Upstreams {
        let slots = policy
            .upstreams
            .iter()
            .map(|(name, u)| {
                (
                    name.clone(),
                    Slot {
                        policy: u.clone(),
                        client: None,
                        bearer: None,
                        listing: None,
                        run: 0,
                        deaths: Default::default(),
                        starts: 0,
                        announced: false,
                        withdrawn: false,
                    },
                )
            })
            .collect();
        let credentials = policy.credentials.clone();
        let roots = policy.http.ca_certs.as_ref().map(|b| b.der.clone());
        let tokens = policy.origin.as_deref().map(oauth::store::beside);
        Upstreams { slots, credentials, roots, tokens, tables: Tables::default(), pins: pins::Book::new(pins), events: Vec::new(), generation: 0, runs: 0 }
    }

    pub(crate) fn names(&self) -> impl Iterator<Item = &str> {
        self.slots.keys().map(String::as_str)
    }

    /// The configured upstream an exposed name would belong to (the part before its
    /// first `_`), so a call that comes before any listing can list that upstream
    /// first; the name table still decides whether the tool exists.
    pub(crate) fn owner(&self, exposed: &str) -> Option<&str> {
        let upstream = names::upstream_of(exposed)?;
        self.slots.get_key_value(upstream).map(|(k, _)| k.as_str())
    }

    /// The running upstreams that announced `notifications/tools/list_changed` since
    /// their last listing: the server tells its client, and the next [`Upstreams::list`]
    /// of each lists again.
    pub(crate) fn list_changed(&self) -> Vec<&str> {
        self.slots.iter().filter(|(_, s)| s.client.as_ref().is_some_and(|c| c.list_changed())).map(|(n, _)| n.as_str()).collect()
    }

    /// Changes whenever a listing is made or dropped (module docs of `server/`'s list).
    pub(crate) fn generation(&self) -> u64 {
        self.generation
    }

    /// The listing of `upstream` as cached (nothing is started or listed).
    pub(crate) fn cached(&self, upstream: &str) -> Option<&[ExposedTool]> {
        self.slots.get(upstream)?.listing.as_deref()
    }

    /// Reads, without waiting, what each running upstream wrote while sp asked nothing
    /// (a `notifications/tools/list_changed`, a ping); one that broke meanwhile is ended.
    pub(crate) fn poll(&mut self) {
        let names: Vec<String> = self.slots.iter().filter(|(_, s)| s.client.is_some()).map(|(n, _)| n.clone()).collect();
        for name in names {
            let Some(client) = self.slots.get_mut(&name).and_then(|s| s.client.as_mut()) else { continue };
            if let Err(e) = client.poll() {
                let e = client_error(&name, e, Duration::ZERO);
                self.note_death(&name, &e);
            }
        }
        self.cancel_orphans(Duration::ZERO);
    }

    /// The upstreams that announced `notifications/tools/list_changed` and were not
    /// reported since their last listing, and those whose tools were withdrawn because a
    /// listing failed: sp tells its client once for each.
    pub(crate) fn take_news(&mut self) -> Vec<String> {
        let mut news = Vec::new();
        for (name, slot) in &mut self.slots {
            let announced = !slot.announced && slot.client.as_ref().is_some_and(|c| c.list_changed());
            if announced || std::mem::take(&mut slot.withdrawn) {
                slot.announced |= announced;
                news.push(name.clone());
            }
        }
        news
    }

    /// The name tables of the upstreams listed so far: the input of the tool table's parse (names) and of `authorize`.
    pub(crate) fn tables(&self) -> &Tables {
        &self.tables
    }

    /// Process events since the last call, for the journal.
    pub(crate) fn take_events(&mut self) -> Vec<UpstreamEvent> {
        std::mem::take(&mut self.events)
    }

    /// The exposed tools of `upstream`: started if needed, listed once and cached until
    /// it announces `notifications/tools/list_changed`.
    pub(crate) fn list(&mut self, upstream: &str, vault: &mut Vault) -> Result<&[ExposedTool], UpstreamError> {
        let listed = self.refresh(upstream, vault);
        self.take_tokens(upstream, vault);
        listed.map_err(|e| e.scrubbed(vault))?;
        Ok(self.slots[upstream].listing.as_deref().unwrap_or_default())
    }

    fn refresh(&mut self, upstream: &str, vault: &mut Vault) -> Result<(), UpstreamError> {
        let cancel = Cancel::new();
        self.ensure_started(upstream, vault, &cancel)?;
        let slot = self.slots.get_mut(upstream).ok_or_else(|| UpstreamError::Unknown { upstream: upstream.to_owned() })?;
        let client = running(&mut slot.client, upstream)?;
        if client.take_list_changed() {
            slot.listing = None;
            slot.announced = false;
        }
        if slot.listing.is_none() {
            let (tools, table, checked) = match expose::list_tools(slot, &mut self.pins, vault, &cancel) {
                Ok(listed) => listed,
                Err(e) => {
                    // Issue 31: a failed listing (a re-listing after list_changed
                    // included) leaves no tools of this upstream behind: none is offered
                    // by tools/list, and a call of one is refused (the loop lists again
                    // first, which fails the same way) until a listing succeeds.
                    if self.tables.0.remove(upstream).is_some() {
                        self.generation += 1;
                        if let Some(slot) = self.slots.get_mut(upstream) {
                            slot.withdrawn = true;
                        }
                    }
                    self.note_death(upstream, &e);
                    return Err(e);
                }
            };
            if let Some(count) = checked.pinned_now {
                self.events.push(UpstreamEvent::Pinned { upstream: upstream.to_owned(), count });
            }
            for why in checked.withheld {
                log::warn!("upstream {upstream}: tool {:?} withheld: {why}", crate::sys::short(&why.tool, 64, crate::sys::Ellipsis::Marked));
                self.events.push(UpstreamEvent::Withheld { upstream: upstream.to_owned(), why });
            }
            self.tables.0.insert(upstream.to_owned(), table);
            if let Some(slot) = self.slots.get_mut(upstream) {
                slot.listing = Some(tools);
            }
            self.generation += 1;
        }
        Ok(())
    }

    /// Runs an authorized call. The upstream is started if it is not running (once: a
    /// call never restarts it twice, and one in its back-off is refused); a call that fails
    /// because the upstream died is not retried (its effect may have happened).
    /// (Unit tests; the loop calls [`Upstreams::call_asking`].)
    #[cfg(test)]
    pub(crate) fn call(
        &mut self,
        route: &Route,
        arguments: Map<String, Value>,
        timeout: Option<Duration>,
        cancel: &Cancel,
        progress: &mut dyn FnMut(ProgressNote),
        vault: &mut Vault,
    ) -> Result<UpstreamCall, UpstreamError> {
        let answer = self.call_inner(route, arguments, timeout, cancel, progress, vault, None);
        // Before the answer is scrubbed: a token refreshed during the call is known.
        self.take_tokens(route.upstream(), vault);
        answer.map_err(|e| e.scrubbed(vault))
    }

    /// `Upstreams::call` (unit tests) with the agent's client at hand: the upstream's
    /// `elicitation/create` during the call is relayed or refused (`elicit.rs`), and
    /// journaled through `asking.output`.
    #[allow(clippy::too_many_arguments, reason = "the call's parts, each lent by the loop")]
    pub(crate) fn call_asking(
        &mut self,
        route: &Route,
        arguments: Map<String, Value>,
        cancel: &Cancel,
        progress: &mut dyn FnMut(ProgressNote),
        vault: &mut Vault,
        asking: Asking<'_, '_>,
    ) -> Result<UpstreamCall, UpstreamError> {
        let answer = self.call_inner(route, arguments, None, cancel, progress, vault, Some(asking));
        // Before the answer is scrubbed: a token refreshed during the call is known.
        self.take_tokens(route.upstream(), vault);
        answer.map_err(|e| e.scrubbed(vault))
    }

    #[allow(clippy::too_many_arguments, reason = "the call's parts, each lent by the loop")]
    fn call_inner(
        &mut self,
        route: &Route,
        arguments: Map<String, Value>,
        timeout: Option<Duration>,
        cancel: &Cancel,
        progress: &mut dyn FnMut(ProgressNote),
        vault: &mut Vault,
        asking: Option<Asking<'_, '_>>,
    ) -> Result<UpstreamCall, UpstreamError> {
        let started = Instant::now();
        let name = route.upstream();
        let fresh = self.ensure_started(name, vault, cancel)?;
        let slot = self.slots.get_mut(name).ok_or_else(|| UpstreamError::Unknown { upstream: name.to_owned() })?;
        let timeout = timeout.unwrap_or(slot.policy.timeout).min(slot.policy.timeout);
        let Slot { policy, client, .. } = slot;
        let client = running(client, name)?;
        // What the upstream wrote while none of its calls ran is handled first, so an
        // elicitation sent between calls is refused as such (`elicit/`), not taken for
        // one of this call's.
        let answer = match (client.poll(), asking) {
            (Err(e), _) => Err(e),
            (Ok(()), Some(Asking { client: asked, output })) => {
                let mut relay = elicit::Relay { upstream: name, rules: &policy.elicitation, vault: &*vault, client: asked, output, cancel };
                let mut on_elicit = |params, deadline| relay.handle(params, deadline);
                client.call_tool_eliciting(route.tool(), arguments, timeout, cancel, progress, &mut on_elicit)
            }
            (Ok(()), None) => client.call_tool(route.tool(), arguments, timeout, cancel, progress),
        };
        let result = answer
            .map_err(|e| client_error(name, e, timeout))
            .and_then(|r| wire::call_result(r).map_err(|e| UpstreamError::BadAnswer { upstream: name.to_owned(), why: e.to_string() }));
        match result {
            Ok(result) => Ok(UpstreamCall { result, started: fresh, duration: started.elapsed() }),
            Err(e) => {
                self.note_death(name, &e);
                Err(e)
            }
        }
    }

    /// Ends every upstream (TERM, then KILL after the grace period).
    pub(crate) fn shutdown(&mut self) {
        // Tasks created for calls sp abandoned are cancelled first (issue 33, section 4).
        self.cancel_orphans(tasks::OWN_WAIT);
        for (name, slot) in &mut self.slots {
            if let Some(mut c) = slot.client.take() {
                c.close();
                self.events.push(UpstreamEvent::Ended { upstream: name.clone(), why: "sp is exiting".into() });
            }
        }
    }

    /// The process group of a running stdio upstream (tests wait on its end).
    #[cfg(test)]
    pub(crate) fn process_group(&self, upstream: &str) -> Option<i32> {
        self.slots.get(upstream)?.client.as_ref().filter(|c| !c.is_closed())?.transport().process_group()
    }

    /// The revision a running upstream speaks (tests).
    #[cfg(test)]
    pub(crate) fn version(&self, upstream: &str) -> Option<&'static str> {
        Some(self.slots.get(upstream)?.client.as_ref()?.version())
    }

    #[cfg(test)]
    fn counters(&self, upstream: &str) -> Option<client::Counters> {
        Some(self.slots.get(upstream)?.client.as_ref()?.counters().clone())
    }

    /// After a failure: if the upstream is closed, it is forgotten (the next use starts
    /// it again) and its death counted.
    fn note_death(&mut self, upstream: &str, e: &UpstreamError) {
        let Some(slot) = self.slots.get_mut(upstream) else { return };
        if slot.client.as_ref().is_some_and(|c| c.is_closed()) {
            slot.client = None;
            slot.listing = None;
            slot.announced = false;
            self.generation += 1;
            slot.deaths.died(Instant::now());
            log::warn!("{e}");
            self.events.push(UpstreamEvent::Ended { upstream: upstream.to_owned(), why: e.to_string() });
        }
    }

    /// Starts `upstream` if it is not running; true if it was started now.
    fn ensure_started(&mut self, upstream: &str, vault: &mut Vault, cancel: &Cancel) -> Result<bool, UpstreamError> {
        let slot = self.slots.get_mut(upstream).ok_or_else(|| UpstreamError::Unknown { upstream: upstream.to_owned() })?;
        if slot.client.as_ref().is_some_and(|c| !c.is_closed()) {
            return Ok(false);
        }
        slot.client = None;
        let now = Instant::now();
        if let Some(wait) = slot.deaths.wait(now) {
            return Err(UpstreamError::CrashLoop { upstream: upstream.to_owned(), deaths: slot.deaths.deaths(), wait });
        }
        let restart = slot.starts > 0;
        slot.starts += 1;
        slot.bearer = oauth::bearer_for(upstream, &slot.policy, self.roots.as_ref(), self.tokens.as_deref()).inspect_err(|e| log::warn!("{e}"))?;
        match start(&slot.policy, &self.credentials, self.roots.as_ref(), slot.bearer.clone(), vault, cancel) {
            Ok(client) => {
                let pid = client.transport().process_group().unwrap_or(0);
                slot.client = Some(client);
                self.runs += 1;
                slot.run = self.runs;
                slot.deaths.started(now);
                self.events.push(UpstreamEvent::Started { upstream: upstream.to_owned(), pid, restart });
                Ok(true)
            }
            Err(e) => {
                if !matches!(e, UpstreamError::Cancelled { .. } | UpstreamError::Credential { .. } | UpstreamError::Unsupported { .. }) {
                    slot.deaths.died(Instant::now());
                }
                log::warn!("{e}");
                Err(e)
            }
        }
    }
}

impl Drop for Upstreams {
    fn drop(&mut self) {
        self.shutdown();
    }
}

/// The client `ensure_started` left in a slot; were there none, the upstream is not
/// running (an error, never a panic).
fn running<'a>(client: &'a mut Option<Client<Box<dyn Transport>>>, upstream: &str) -> Result<&'a mut Client<Box<dyn Transport>>, UpstreamError> {
    client.as_mut().ok_or_else(|| UpstreamError::Broken { upstream: upstream.to_owned(), why: "it is not running".to_owned() })
}
