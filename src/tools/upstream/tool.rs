//! The upstream tools in the tool table (`tools/mod.rs`, the `dynamic` kind): their
//! names are decided at run time, by what each upstream lists.
//!
//! ```text
//!  tools/call gh_get_issue ──> owns? (a configured upstream "gh") ──> (the loop lists gh)
//!   ──> parse: the name table resolves it ──> UpstreamRequest{upstream, tool, arguments}
//!   ──> Rules: withheld by its pin? (pins.rs: SP_TOOL_CHANGED), filter, argument pins
//!       (route.rs) ──> Authorized<UpstreamAction>
//!   ──> approval (tools.approve) ──> intent row ──> Executor::upstream ──> tools/call upstream
//!   ──> the result, checked (wire.rs), scrubbed whole or withheld (gate::withhold) ──> passed on
//! ```
//!
//! The arguments go upstream unchanged: sp checks only the pinned ones (their values must
//! match the policy's globs); the upstream's own `inputSchema` is its business. The
//! result is passed on as the upstream shaped it (`content`, `structuredContent`,
//! `isError`), after every secret that upstream (or anything in this session) was
//! given is scrubbed in every spelling; an answer whose JSON text alone spells a secret
//! is withheld with `SP_UPSTREAM`.

use serde_json::{json, Map, Value};

use super::route::{authorize_resolved, Route};
use super::{names, ProgressNote, UpstreamCall, UpstreamDenial, UpstreamError, Upstreams};
use crate::approve::Ask;
use crate::gate::authorize::{Authorized, Rules};
use crate::gate::exec::{Event, Facts, RunContext};
use crate::gate::outcome::ToolCode;
use crate::gate::vault::Scrubbed;
use crate::gate::withhold::{scrub_upstream, WITHHELD};
use crate::mcp::model::{ArgError, ToolResult};
use crate::policy::upstreams::UpstreamTransport;
use crate::policy::Policy;
use super::tasks::Started;
use crate::tools::request::TaskAsk;
use crate::tools::{Audit, CallRequest, Catalog, DynamicTool, Executor, Ran};

/// A call of an exposed upstream tool, resolved in the name table.
#[derive(Debug, Clone, PartialEq)]
pub struct UpstreamRequest {
    upstream: String,
    tool: String,
    exposed: String,
    arguments: Map<String, Value>,
    /// The listing withheld this tool (`pins.rs`): the call is refused, SP_TOOL_CHANGED.
    withheld: Option<super::pins::Withheld>,
    /// The client asked for a task (`tasks.rs`).
    task: Option<TaskAsk>,
}

/// An authorized upstream call: its [`Route`] and the arguments, as the agent gave them.
#[derive(Debug)]
pub struct UpstreamAction {
    route: Route,
    arguments: Map<String, Value>,
    /// The credentials this upstream is given (the journal's `credential`).
    credentials: Vec<String>,
    /// A task asked of an upstream whose tasks the policy relays (`tasks.rs`); dropped
    /// (an ordinary call) for any other.
    task: Option<TaskAsk>,
}

impl UpstreamAction {
    pub(crate) fn route(&self) -> &Route {
        &self.route
    }
}

impl Rules<UpstreamRequest> for UpstreamAction {
    type Denial = UpstreamDenial;
    fn check(policy: &Policy, call: UpstreamRequest) -> Result<UpstreamAction, UpstreamDenial> {
        if let Some(why) = call.withheld {
            return Err(UpstreamDenial::ToolChanged { exposed: call.exposed, upstream: call.upstream, why });
        }
        let route = authorize_resolved(&policy.upstreams, &call.upstream, &call.tool, &call.exposed, &call.arguments)?;
        let upstream = policy.upstreams.get(&call.upstream);
        let credentials = upstream.map(credentials_of).unwrap_or_default();
        let task = call.task.filter(|_| upstream.is_some_and(|u| u.tasks));
        Ok(UpstreamAction { route, arguments: call.arguments, credentials, task })
    }
}

/// The credentials an upstream is given: its `env` credentials, or its `url`'s.
fn credentials_of(u: &crate::policy::upstreams::Upstream) -> Vec<String> {
    match &u.transport {
        UpstreamTransport::Stdio { env, .. } => env
            .values()
            .filter_map(|v| match v {
                crate::policy::upstreams::EnvValue::Credential(c) => Some(c.clone()),
                crate::policy::upstreams::EnvValue::Literal(_) => None,
            })
            .collect(),
        UpstreamTransport::Http { credential, .. } => credential.iter().cloned().collect(),
    }
}

/// The table's entry for the upstream tools (`tools/mod.rs`).
pub(crate) struct UpstreamTool;

impl DynamicTool for UpstreamTool {
    type Call = UpstreamRequest;
    type Action = UpstreamAction;
    type Denial = UpstreamDenial;

    /// The part before the first `_` names a configured upstream (`names.rs`).
    fn owns(policy: &Policy, name: &str) -> bool {
        names::upstream_of(name).is_some_and(|u| policy.upstreams.contains_key(u))
    }

    fn parse(call: &CallRequest, catalog: Catalog<'_>) -> Option<Result<UpstreamRequest, ArgError>> {
        let tables = catalog.upstreams?;
        let name = call.name.as_str();
        let (upstream, tool) = tables.resolve(name)?;
        let withheld = tables.withheld(name).cloned();
        let (arguments, task) = (call.arguments.clone(), call.task);
        Some(Ok(UpstreamRequest { upstream: upstream.to_owned(), tool: tool.to_owned(), exposed: name.to_owned(), arguments, withheld, task }))
    }

    fn name(action: &UpstreamAction) -> &str {
        action.route.exposed()
    }

    /// `<upstream> <tool>` and a fingerprint of the arguments, never their values.
    fn target(call: &UpstreamRequest) -> Option<String> {
        let fp = crate::audit::request_fp("arguments", Some(&Value::Object(call.arguments.clone())));
        Some(format!("{} {} arguments sha256:{}", call.upstream, call.tool, &fp[..16]))
    }

    fn code(d: &UpstreamDenial) -> ToolCode {
        match d {
            UpstreamDenial::ToolChanged { .. } => ToolCode::ToolChanged,
            _ => ToolCode::Denied,
        }
    }

    fn audit(a: &UpstreamAction) -> Audit {
        let credential = (!a.credentials.is_empty()).then(|| a.credentials.join(","));
        Audit { rule: Some(format!("upstreams.{}.tools", a.route.upstream())), credential }
    }

    /// Asked when a `tools.approve` glob matches: the upstream, its tool and the
    /// arguments (escaped and cut; `raw` holds their JSON, cut).
    fn approval(policy: &Policy, a: &UpstreamAction) -> Option<Ask> {
        if !a.route.needs_approval() {
            return None;
        }
        let arguments = serde_json::to_string(&a.arguments).unwrap_or_default();
        let upstream = policy.upstreams.get(a.route.upstream());
        let host = match upstream.map(|u| &u.transport) {
            Some(UpstreamTransport::Http { url, .. }) => url.host_str().unwrap_or_default().to_owned(),
            _ => String::new(),
        };
        // `"approve": "command"`: the agent's own host never answers for this upstream.
        let only_command = upstream.is_some_and(|u| u.approve_command_only);
        let line = crate::approve::line;
        let request = json!({"upstream": line(a.route.upstream()), "tool": line(a.route.tool()), "arguments": crate::approve::text(&arguments)});
        let (kept, cut) = crate::approve::cut(&arguments);
        let raw = json!({"upstream": a.route.upstream(), "tool": a.route.tool(), "arguments": kept, "arguments_truncated": cut});
        Some(Ask { subject: a.route.exposed().to_owned(), host, request, raw, only_command })
    }

    fn run(executor: &mut dyn Executor, _: &Policy, action: Authorized<UpstreamAction>, ctx: &mut RunContext<'_, '_>) -> Ran {
        let answer = match action.action().task {
            None => executor.upstream(&action, ctx),
            Some(ask) => match executor.upstream_task(&action, ask, ctx) {
                Ok(Started::Task(created)) => return Ran::Task(created),
                Ok(Started::Plain(call)) => Ok(call),
                Err(e) => Err(e),
            },
        };
        let (result, facts) = passed_on(answer, ctx.vault);
        if let Some(f) = facts {
            let _ = ctx.output.emit(Event::Facts(f));
        }
        Ran::Result(result)
    }
}

/// A call's answer as the client gets it (a direct call's, and a task's `tasks/result`):
/// an error scrubbed, a result checked, scrubbed whole or withheld; with the facts its
/// result row reports when the upstream answered.
pub(crate) fn passed_on(answer: Result<UpstreamCall, UpstreamError>, vault: &crate::gate::vault::Vault) -> (ToolResult, Option<Facts>) {
    let call = match answer {
        Ok(call) => call,
        Err(e) => return (ToolResult::error(error_code(&e), vault.scrub_text(e.to_string())), None),
    };
    let is_error = call.result.is_error;
    let passed = passed(call);
    let bytes = serde_json::to_vec(&passed).map_or(0, |v| v.len() as u64);
    let facts = Facts { bytes_out: Some(bytes), is_error: Some(is_error), ..Facts::default() };
    let result = match scrub_upstream(vault, passed) {
        Some(result) => ToolResult::upstream(result),
        None => ToolResult::error(ToolCode::Upstream, Scrubbed::own(WITHHELD)),
    };
    (result, Some(facts))
}

/// The result as sp passes it on: `content`, `isError`, and `structuredContent` when
/// the upstream gave it (other members were dropped by `wire::call_result`).
fn passed(call: UpstreamCall) -> Value {
    let r = call.result;
    let mut m = Map::new();
    m.insert("content".into(), Value::Array(r.content));
    m.insert("isError".into(), Value::Bool(r.is_error));
    if let Some(s) = r.structured {
        m.insert("structuredContent".into(), Value::Object(s));
    }
    Value::Object(m)
}

/// The tool result code of a failed upstream call.
pub(crate) fn error_code(e: &UpstreamError) -> ToolCode {
    match e {
        UpstreamError::Timeout { .. } => ToolCode::Timeout,
        UpstreamError::Auth { .. } => ToolCode::Auth,
        UpstreamError::Cancelled { .. } => ToolCode::Cancelled,
        UpstreamError::Credential { .. }
        | UpstreamError::Unsupported { .. }
        | UpstreamError::Unknown { .. }
        | UpstreamError::Start { .. }
        | UpstreamError::CrashLoop { .. } => ToolCode::Unavailable,
        _ => ToolCode::Upstream,
    }
}

/// `Executors::upstream`: the call, the upstream's progress relayed to the client (its
/// message scrubbed), the context's cancel observed, its elicitation relayed through
/// the context's client (`elicit.rs`).
pub(crate) fn call(ups: &mut Upstreams, action: &Authorized<UpstreamAction>, ctx: &mut RunContext<'_, '_>) -> Result<UpstreamCall, UpstreamError> {
    let a = action.action();
    let RunContext { vault, cancel, progress, output, client } = ctx;
    // Scrubbed whole, then cut (issue 31, section 3).
    let mut relay = |n: ProgressNote| progress.relay(n.progress, n.total, n.message.map(|m| m.cut(super::wire::MAX_MESSAGE_CHARS)));
    // The upstream's elicitation during the call: relayed or refused, journaled (issue 33).
    let asking = super::Asking { client: client.as_deref_mut(), output: &mut **output };
    ups.call_asking(&a.route, a.arguments.clone(), cancel, &mut relay, vault, asking)
}

/// `Executors::upstream_task`: a call the client asked to run as a task (issue 33,
/// section 4). It goes as one when its upstream takes it (`Upstreams::takes_task`),
/// else as an ordinary call (the `task` member is not sent).
pub(crate) fn call_task(
    ups: &mut Upstreams,
    action: &Authorized<UpstreamAction>,
    ask: TaskAsk,
    ctx: &mut RunContext<'_, '_>,
) -> Result<Started, UpstreamError> {
    let a = action.action();
    if !ups.takes_task(&a.route) {
        log::info!("{}: a task was asked; run as an ordinary call (its upstream does not take it as one)", a.route.exposed());
        return call(ups, action, ctx).map(Started::Plain);
    }
    super::tasks::create(ups, &a.route, &a.arguments, ask, ctx)
}
