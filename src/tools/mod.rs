//! The tool table: every kind of tool `sp` offers, and the one place that names them.
//!
//! ```text
//!  tools/call params ──> call_request ──> ToolCall::parse ──> authorize ──> Action ──> Action::run
//!      -32602 CallError <──┘   SP_BAD_ARGUMENTS <──┘   SP_DENIED <──┘         (approve, intent row:
//!                                                                              the loop, in between)
//! ```
//!
//! Each kind is a folder (`http/`, `ssh/`, `inventory/`) whose [`Tool`] implementation
//! gives its name, definition, argument parser, journal target, denial code, audit facts
//! (rule, credential), approval question and run. The `table!` line for each kind
//! makes the enums ([`ToolCall`], [`Action`], [`Denial`]) and the dispatch over them;
//! the loop (`server.rs`) calls only these and names no tool. A kind whose names are
//! decided at run time (`upstream/`: other MCP servers' tools) sits in the table's
//! `dynamic` part and implements [`DynamicTool`]: the policy says which names it may
//! own ([`call_request_in`]), the [`Catalog`] of what its upstreams listed says which it
//! does ([`ToolCall::parse_in`]); the loop lists an upstream through the executor's
//! `upstreams` head before it parses a call of its name. An effect a kind needs from
//! outside has one head in [`Executor`], the seam tests put a recording executor behind.
//!
//! Two levels of refusal (MCP 2025-11-25, "Tools: error handling"):
//! - the call itself is malformed (params not an object, `name` missing or not a string,
//!   `arguments` not an object, an unknown tool): a JSON-RPC error -32602, [`CallError`];
//! - a known tool's arguments fail their checks: a tool result with `isError: true` and
//!   code `SP_BAD_ARGUMENTS`, [`ArgError`], so the model can read the reason and retry.
//!
//! Both keep the session open and nothing is executed. Checks are hand-written, every
//! unknown argument is refused, and nothing here touches the network: a URL is parsed
//! and normalised, never resolved.

pub(crate) mod http;
pub(crate) mod inventory;
pub(crate) mod ssh;
pub(crate) mod subject;
pub(crate) mod upstream;

use std::convert::Infallible;
use std::fmt;

use serde_json::{Map, Value};

use crate::approve::Ask;
use crate::gate::authorize::{Authorized, Rules};
use crate::gate::exec::{ExecError, RunContext};
use crate::gate::outcome::{Reason, ToolCode};
pub(crate) use crate::mcp::model::ArgError;
use crate::mcp::model::{ToolList, ToolResult};
use crate::policy::Policy;
use http::args::HttpRequest;
use http::authorize::{HttpAction, HttpDenial};
use http::result::HttpOutcome;
use inventory::Inventory;
use ssh::result::{SshError, SshOutcome};
use ssh::transfer::result::{TransferError, TransferOutcome};
use ssh::transfer::{SshGet, SshPut, TransferAction, TransferDenial};
use ssh::{SshAction, SshDenial, SshExec};
use upstream::tool::{UpstreamAction, UpstreamRequest};
use upstream::{Tables, UpstreamCall, UpstreamDenial, UpstreamError, Upstreams};

mod request;
use request::short;
pub(crate) use request::call_request_in;
pub use request::call_request;
pub(crate) use request::{CallError, CallRequest, TaskAsk};

/// What one kind of tool provides to the table. `Call` is its typed arguments, `Action`
/// what its rules make of them (`gate::authorize::Rules`), `Denial` why they refuse.
pub(crate) trait Tool {
    /// Its name in `tools/list` and `tools/call`.
    const NAME: &'static str;
    type Call;
    type Action: Rules<Self::Call, Denial = Self::Denial>;
    type Denial;

    /// Its `tools/list` entry.
    fn definition() -> Value;
    /// Its arguments, checked (`SP_BAD_ARGUMENTS` when they fail).
    fn parse(arguments: &Map<String, Value>) -> Result<Self::Call, ArgError>;
    /// The journal's `target` of a call, known before authorization.
    fn target(call: &Self::Call) -> Option<String>;
    /// The tool result code of a denial.
    fn code(denial: &Self::Denial) -> ToolCode;
    /// The journal's `rule` and `credential` of an authorized action.
    fn audit(action: &Self::Action) -> Audit;
    /// What the operator's approver is asked, when the policy flags the action.
    fn approval(policy: &Policy, action: &Self::Action) -> Option<Ask>;
    /// Runs the authorized action (its effects through `executor`) and shapes its result;
    /// every outside piece of it is scrubbed by `ctx`'s Vault.
    fn run(executor: &mut dyn Executor, policy: &Policy, action: Authorized<Self::Action>, ctx: &mut RunContext<'_, '_>) -> ToolResult;
}

/// A kind whose names are decided at run time (the upstream MCP servers' tools,
/// `upstream/`): the policy says which names it may own before anything runs
/// ([`DynamicTool::owns`]); the [`Catalog`] of what was listed says which it does. The
/// rest is [`Tool`]'s, per call.
pub(crate) trait DynamicTool {
    type Call;
    type Action: Rules<Self::Call, Denial = Self::Denial>;
    type Denial;

    /// Whether `name` may be one of its tools under `policy` (nothing listed yet).
    fn owns(policy: &Policy, name: &str) -> bool;
    /// The call, when `catalog` holds its name (`None`: not one of its tools).
    fn parse(call: &CallRequest, catalog: Catalog<'_>) -> Option<Result<Self::Call, ArgError>>;
    /// The call's tool name (the journal's `tool`, the counters' key): a listed name.
    fn name(action: &Self::Action) -> &str;
    fn target(call: &Self::Call) -> Option<String>;
    fn code(denial: &Self::Denial) -> ToolCode;
    fn audit(action: &Self::Action) -> Audit;
    fn approval(policy: &Policy, action: &Self::Action) -> Option<Ask>;
    fn run(executor: &mut dyn Executor, policy: &Policy, action: Authorized<Self::Action>, ctx: &mut RunContext<'_, '_>) -> Ran;
}

/// What a run made: a tool result, or (an upstream's tool called as a task, issue 33
/// section 4, `upstream/tasks.rs`) a task the upstream created, whose result comes
/// later through `tasks/result`.
#[derive(Debug)]
pub(crate) enum Ran {
    Result(ToolResult),
    Task(upstream::tasks::Created),
}

/// The names decided at run time, as listed so far: the upstreams' name tables (none
/// for a policy without upstreams, or before any listing).
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Catalog<'a> {
    pub upstreams: Option<&'a Tables>,
}

/// The journal's `rule` and `credential` of an authorized action.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub(crate) struct Audit {
    pub rule: Option<String>,
    pub credential: Option<String>,
}

/// The seam between the pipeline and the outside world: one head per kind of effect,
/// each taking an [`Authorized`] action (which only `gate::authorize` builds, so nothing
/// half-validated can get here) and the call's [`RunContext`]. Tests put a recording
/// executor behind it to prove that rejected input never arrives (`calls == []`); the
/// real one is [`Executors`]. Each head's default refuses, so an executor built for one
/// kind fails closed for the others.
pub trait Executor {
    /// Sends one authorized HTTP request (a redirect hop is one more call). Reads the
    /// credential (through the context's Vault, which remembers it for redaction) only
    /// now, after authorization. When the context's cancel fires (the client sent
    /// `notifications/cancelled`, or closed stdin) the request must stop promptly: its
    /// connection is closed, whatever it returns is discarded.
    fn http(&mut self, action: &Authorized<HttpAction>, ctx: &mut RunContext<'_, '_>) -> Result<HttpOutcome, ExecError> {
        let _ = (action, ctx);
        Err(ExecError::Unavailable("this executor does not run http_request".into()))
    }

    /// Runs one authorized SSH command; key, passphrase and password files are read
    /// through the context's Vault at connection time. The context's progress reports
    /// on a long command when the client asked for it.
    fn ssh(&mut self, action: &Authorized<SshAction>, ctx: &mut RunContext<'_, '_>) -> Result<SshOutcome, SshError> {
        let _ = (action, ctx);
        Err(SshError::Unavailable("this executor does not run ssh_exec".into()))
    }

    /// Runs one authorized `ssh_get` or `ssh_put` over SFTP, on the host's kept session
    /// when there is one (connected, like `ssh`, through the context's Vault).
    fn transfer(&mut self, action: &Authorized<TransferAction>, ctx: &mut RunContext<'_, '_>) -> Result<TransferOutcome, TransferError> {
        let _ = (action, ctx);
        Err(TransferError::Ssh(SshError::Unavailable("this executor does not run ssh_get or ssh_put".into())))
    }

    /// Sends one authorized `tools/call` to an upstream MCP server (started if it is not
    /// running), with the arguments as the agent gave them; the upstream's progress goes
    /// to the context's progress, its secrets are read through the context's Vault.
    /// When the context's cancel fires, `notifications/cancelled` goes upstream and the
    /// call ends. The result is not yet scrubbed (the tool's run does it).
    fn upstream(&mut self, action: &Authorized<UpstreamAction>, ctx: &mut RunContext<'_, '_>) -> Result<UpstreamCall, UpstreamError> {
        let _ = ctx;
        let upstream = action.action().route().upstream().to_owned();
        Err(UpstreamError::Unsupported { upstream, what: "this executor does not run upstream tools: they are" })
    }

    /// Sends one authorized `tools/call` the client asked to run as a task (issue 33,
    /// section 4): as a task when its upstream takes one, else as [`Executor::upstream`]
    /// does. The default runs it as an ordinary call.
    fn upstream_task(
        &mut self,
        action: &Authorized<UpstreamAction>,
        ask: TaskAsk,
        ctx: &mut RunContext<'_, '_>,
    ) -> Result<upstream::tasks::Started, UpstreamError> {
        let _ = ask;
        self.upstream(action, ctx).map(upstream::tasks::Started::Plain)
    }

    /// The upstream servers, for what carries no input of the agent: listing their
    /// tools (for `tools/list`, or to resolve a called name), their process events,
    /// ending them. `None`: this executor has none.
    fn upstreams(&mut self) -> Option<&mut Upstreams> {
        None
    }

    /// The policy was reloaded (`server/reload.rs`): what was kept for `old` and is not
    /// right for `new` (connections, tokens, running upstreams) is dropped or ended.
    fn reload(&mut self, old: &Policy, new: &Policy) {
        let _ = (old, new);
    }
}

/// What `sp mcp` runs with: the real effects, one executor per kind that has any. The
/// HTTP executor keeps its connection pool and OAuth2 token cache, the SSH executor its
/// sessions, the upstreams their processes and listings, across calls.
#[derive(Default)]
pub(crate) struct Executors {
    pub http: http::exec::HttpExecutor,
    pub ssh: ssh::exec::SshExecutor,
    pub upstream: Option<Upstreams>,
}

impl Executor for Executors {
    fn http(&mut self, action: &Authorized<HttpAction>, ctx: &mut RunContext<'_, '_>) -> Result<HttpOutcome, ExecError> {
        self.http.http(action, ctx)
    }

    fn ssh(&mut self, action: &Authorized<SshAction>, ctx: &mut RunContext<'_, '_>) -> Result<SshOutcome, SshError> {
        self.ssh.run(action, ctx.vault, ctx.progress)
    }

    fn transfer(&mut self, action: &Authorized<TransferAction>, ctx: &mut RunContext<'_, '_>) -> Result<TransferOutcome, TransferError> {
        self.ssh.transfer(action, ctx.vault, ctx.cancel)
    }

    fn upstream(&mut self, action: &Authorized<UpstreamAction>, ctx: &mut RunContext<'_, '_>) -> Result<UpstreamCall, UpstreamError> {
        match &mut self.upstream {
            Some(u) => upstream::tool::call(u, action, ctx),
            None => Err(UpstreamError::Unknown { upstream: action.action().route().upstream().to_owned() }),
        }
    }

    fn upstream_task(
        &mut self,
        action: &Authorized<UpstreamAction>,
        ask: TaskAsk,
        ctx: &mut RunContext<'_, '_>,
    ) -> Result<upstream::tasks::Started, UpstreamError> {
        match &mut self.upstream {
            Some(u) => upstream::tool::call_task(u, action, ask, ctx),
            None => Err(UpstreamError::Unknown { upstream: action.action().route().upstream().to_owned() }),
        }
    }

    fn upstreams(&mut self) -> Option<&mut Upstreams> {
        self.upstream.as_mut()
    }

    /// New credentials or TLS roots: a new HTTP executor (no pooled connection, no OAuth2
    /// token of the old ones survives); a new `ssh` section: the kept sessions closed;
    /// the upstreams as `Upstreams::reload` says (made now if the old policy had none).
    fn reload(&mut self, old: &Policy, new: &Policy) {
        if old.credentials != new.credentials || old.http.ca_certs != new.http.ca_certs {
            self.http = http::exec::HttpExecutor::new().with_roots(new.http.ca_certs.as_ref());
        }
        if old.ssh != new.ssh {
            self.ssh = ssh::exec::SshExecutor::default();
        }
        match &mut self.upstream {
            Some(u) => u.reload(new),
            None if !new.upstreams.is_empty() => {
                self.upstream = Some(Upstreams::with_pins(new, new.origin.as_deref().map(upstream::pins::beside)));
            }
            None => {}
        }
    }
}

/// The table: one line per kind of tool, `Variant(call, action, denial) => its Tool`,
/// in `tools/list` order. It makes [`ToolCall`], [`Action`], [`Denial`], [`NAMES`],
/// [`definitions`], and one arm per kind in each dispatch below. (The three types are
/// spelled out because the public enums cannot name them through the crate-private
/// [`Tool`]; the compiler holds them equal to the kind's own.)
macro_rules! table {
    (
        fixed { $($kind:ident($call:ty, $action:ty, $denial:ty) => $tool:ty;)* }
        dynamic { $($dkind:ident($dcall:ty, $daction:ty, $ddenial:ty) => $dtool:ty;)* }
    ) => {
        /// A fully typed tool call. Only [`ToolCall::parse`] builds one.
        #[derive(Debug, Clone, PartialEq)]
        #[allow(clippy::large_enum_variant, reason = "one per request, never stored in bulk")]
        pub enum ToolCall {
            $($kind($call),)*
            $($dkind($dcall),)*
        }

        /// An authorized call. Only [`authorize`] builds one, through `gate::authorize`.
        #[derive(Debug)]
        #[allow(clippy::large_enum_variant, reason = "one per request, never stored in bulk")]
        pub enum Action {
            $($kind(Authorized<$action>),)*
            $($dkind(Authorized<$daction>),)*
        }

        /// Why a call is not authorized: its kind's rules refused it.
        #[derive(Debug, PartialEq, Eq)]
        pub enum Denial {
            $($kind($denial),)*
            $($dkind($ddenial),)*
        }

        /// Whether `name` is a fixed tool's or one a dynamic kind may own under `policy`.
        pub(crate) fn known(policy: &Policy, name: &str) -> bool {
            NAMES.contains(&name) $(|| <$dtool as DynamicTool>::owns(policy, name))*
        }

        /// Every fixed tool's name, in `tools/list` order.
        pub(crate) const NAMES: &[&str] = &[$(<$tool as Tool>::NAME,)*];

        /// Every kind's line in the table, fixed and dynamic, by its variant's name:
        /// what `coverage.rs` holds against the policy, the inventory, the journal and
        /// the man pages.
        #[cfg(test)]
        pub(crate) const KINDS: &[&str] = &[$(stringify!($kind),)* $(stringify!($dkind),)*];

        /// The tools offered by `tools/list`.
        pub(crate) fn definitions() -> Value {
            Value::Array(vec![$(<$tool as Tool>::definition(),)*])
        }

        impl ToolCall {
            /// The call of a fixed tool (a dynamic kind's names need [`ToolCall::parse_in`]).
            pub fn parse(call: &CallRequest) -> Result<ToolCall, ArgError> {
                ToolCall::parse_in(call, Catalog::default())
            }

            /// The call of any tool: a fixed one by its name, a dynamic kind's when
            /// `catalog` lists it.
            pub(crate) fn parse_in(call: &CallRequest, catalog: Catalog<'_>) -> Result<ToolCall, ArgError> {
                $(
                    if call.name == <$tool as Tool>::NAME {
                        return <$tool as Tool>::parse(&call.arguments).map(ToolCall::$kind);
                    }
                )*
                $(
                    if let Some(parsed) = <$dtool as DynamicTool>::parse(call, catalog) {
                        return parsed.map(ToolCall::$dkind);
                    }
                )*
                // call_request admits only known names.
                crate::mcp::model::bad(format!("unknown tool {:?}", short(&call.name)))
            }

            /// The journal's `target` (before authorization).
            pub(crate) fn target(&self) -> Option<String> {
                match self {
                    $(ToolCall::$kind(c) => <$tool as Tool>::target(c),)*
                    $(ToolCall::$dkind(c) => <$dtool as DynamicTool>::target(c),)*
                }
            }
        }

        /// The call through its kind's rules (`gate::authorize`, the one constructor of
        /// `Authorized`).
        pub fn authorize(policy: &Policy, call: ToolCall) -> Result<Action, Denial> {
            match call {
                $(ToolCall::$kind(c) => crate::gate::authorize::authorize::<$action, $call>(policy, c).map(Action::$kind).map_err(Denial::$kind),)*
                $(ToolCall::$dkind(c) => crate::gate::authorize::authorize::<$daction, $dcall>(policy, c).map(Action::$dkind).map_err(Denial::$dkind),)*
            }
        }

        impl Action {
            /// The tool's name (the journal's `tool`, the execution counters' key).
            pub(crate) fn name(&self) -> &str {
                match self {
                    $(Action::$kind(_) => <$tool as Tool>::NAME,)*
                    $(Action::$dkind(a) => <$dtool as DynamicTool>::name(a.action()),)*
                }
            }

            pub(crate) fn audit(&self) -> Audit {
                match self {
                    $(Action::$kind(a) => <$tool as Tool>::audit(a.action()),)*
                    $(Action::$dkind(a) => <$dtool as DynamicTool>::audit(a.action()),)*
                }
            }

            pub(crate) fn approval(&self, policy: &Policy) -> Option<Ask> {
                match self {
                    $(Action::$kind(a) => <$tool as Tool>::approval(policy, a.action()),)*
                    $(Action::$dkind(a) => <$dtool as DynamicTool>::approval(policy, a.action()),)*
                }
            }

            pub(crate) fn run(self, executor: &mut dyn Executor, policy: &Policy, ctx: &mut RunContext<'_, '_>) -> Ran {
                match self {
                    $(Action::$kind(a) => Ran::Result(<$tool as Tool>::run(executor, policy, a, ctx)),)*
                    $(Action::$dkind(a) => <$dtool as DynamicTool>::run(executor, policy, a, ctx),)*
                }
            }
        }

        impl Denial {
            /// The tool result code: `SP_DENIED`, or `SP_BAD_ARGUMENTS` for arguments no
            /// policy could allow.
            pub(crate) fn code(&self) -> ToolCode {
                match self {
                    $(Denial::$kind(d) => <$tool as Tool>::code(d),)*
                    $(Denial::$dkind(d) => <$dtool as DynamicTool>::code(d),)*
                }
            }
        }

        impl fmt::Display for Denial {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                match self {
                    $(Denial::$kind(d) => fmt::Display::fmt(d, f),)*
                    $(Denial::$dkind(d) => fmt::Display::fmt(d, f),)*
                }
            }
        }
    };
}

table! {
    fixed {
        Http(HttpRequest, HttpAction, HttpDenial) => http::HttpTool;
        HttpGet(http::get::HttpGet, HttpAction, HttpDenial) => http::get::HttpGetTool;
        Inventory((), Inventory, Infallible) => inventory::InventoryTool;
        Ssh(SshExec, SshAction, SshDenial) => ssh::SshTool;
        SshGet(SshGet, TransferAction, TransferDenial) => ssh::transfer::SshGetTool;
        SshPut(SshPut, TransferAction, TransferDenial) => ssh::transfer::SshPutTool;
    }
    dynamic {
        Upstream(UpstreamRequest, UpstreamAction, UpstreamDenial) => upstream::tool::UpstreamTool;
    }
}

impl std::error::Error for Denial {}

impl Denial {
    /// The counter key and the journal row's `decision`.
    pub(crate) fn reason(&self) -> Reason {
        match self.code() {
            ToolCode::BadArguments => Reason::BadArguments,
            ToolCode::ToolChanged => Reason::ToolChanged,
            _ => Reason::Denied,
        }
    }
}

/// `tools/list`, answered by the loop and by the control thread during a call: the
/// table's definitions a policy makes possible (issue 32, section 1), serialised once
/// per process, era and shape (`mcp::model::ToolList`). `sp_inventory` is always listed;
/// `http_request` only when some `http.allow` rule exists, `http_get` only when one
/// allows GET or HEAD, `ssh_exec` only when `ssh.hosts` names a host, `ssh_get` and
/// `ssh_put` only when a host has `files.read` or `files.write` patterns ([`Listed`]). A call
/// of a fixed tool the list leaves out is still parsed and refused by the policy, as
/// before (`SP_DENIED`: no rule, no host), never run.
static LISTS: [ToolList; 32] = [
    ToolList::new(shown::<0>),
    ToolList::new(shown::<1>),
    ToolList::new(shown::<2>),
    ToolList::new(shown::<3>),
    ToolList::new(shown::<4>),
    ToolList::new(shown::<5>),
    ToolList::new(shown::<6>),
    ToolList::new(shown::<7>),
    ToolList::new(shown::<8>),
    ToolList::new(shown::<9>),
    ToolList::new(shown::<10>),
    ToolList::new(shown::<11>),
    ToolList::new(shown::<12>),
    ToolList::new(shown::<13>),
    ToolList::new(shown::<14>),
    ToolList::new(shown::<15>),
    ToolList::new(shown::<16>),
    ToolList::new(shown::<17>),
    ToolList::new(shown::<18>),
    ToolList::new(shown::<19>),
    ToolList::new(shown::<20>),
    ToolList::new(shown::<21>),
    ToolList::new(shown::<22>),
    ToolList::new(shown::<23>),
    ToolList::new(shown::<24>),
    ToolList::new(shown::<25>),
    ToolList::new(shown::<26>),
    ToolList::new(shown::<27>),
    ToolList::new(shown::<28>),
    ToolList::new(shown::<29>),
    ToolList::new(shown::<30>),
    ToolList::new(shown::<31>),
];

/// Which fixed tools a policy makes possible, as the bits of an index into [`LISTS`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Listed {
    pub http: bool,
    pub get: bool,
    pub ssh: bool,
    pub ssh_get: bool,
    pub ssh_put: bool,
}

impl Listed {
    pub(crate) fn of(policy: &Policy) -> Listed {
        Listed {
            http: !policy.http.allow.is_empty(),
            get: http::get::listed(policy),
            ssh: !policy.ssh.hosts.is_empty(),
            ssh_get: ssh::transfer::get_listed(policy),
            ssh_put: ssh::transfer::put_listed(policy),
        }
    }

    fn bits(self) -> usize {
        usize::from(self.http) | usize::from(self.get) << 1 | usize::from(self.ssh) << 2 | usize::from(self.ssh_get) << 3 | usize::from(self.ssh_put) << 4
    }

    fn from_bits(bits: u8) -> Listed {
        Listed { http: bits & 1 != 0, get: bits & 2 != 0, ssh: bits & 4 != 0, ssh_get: bits & 8 != 0, ssh_put: bits & 16 != 0 }
    }

    /// Whether the fixed tool `name` is listed.
    pub(crate) fn shows(self, name: &str) -> bool {
        match name {
            n if n == http::HttpTool::NAME => self.http,
            n if n == http::get::HTTP_GET => self.get,
            n if n == ssh::SshTool::NAME => self.ssh,
            n if n == ssh::transfer::SSH_GET => self.ssh_get,
            n if n == ssh::transfer::SSH_PUT => self.ssh_put,
            _ => true,
        }
    }
}

/// The definitions of [`LISTS`]`[BITS]`.
fn shown<const BITS: u8>() -> Value {
    filtered(definitions(), Listed::from_bits(BITS))
}

fn filtered(definitions: Value, listed: Listed) -> Value {
    let Value::Array(all) = definitions else { return Value::Array(Vec::new()) };
    Value::Array(all.into_iter().filter(|d| d["name"].as_str().is_some_and(|n| listed.shows(n))).collect())
}

/// The fixed tools' definitions a session under `policy` lists (the live list of a
/// policy with upstreams starts with them).
pub(crate) fn definitions_for(policy: &Policy) -> Value {
    filtered(definitions(), Listed::of(policy))
}

/// The `tools/list` a session under `policy` answers ([`LISTS`]).
pub(crate) fn list_for(policy: &Policy) -> &'static ToolList {
    &LISTS[Listed::of(policy).bits()]
}

/// Whether `name` is one of the table's fixed tools (the journal's `tool` holds only
/// sp's names and those a configured upstream may own, never an agent's other string).
pub(crate) fn is_tool(name: &str) -> bool {
    NAMES.contains(&name)
}

#[cfg(test)]
mod coverage;
#[cfg(test)]
mod tests;
