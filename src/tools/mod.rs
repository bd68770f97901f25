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
//! (rule, credential), approval question and run. The [`table!`] line for each kind
//! makes the enums ([`ToolCall`], [`Action`], [`Denial`]) and the dispatch over them;
//! the loop (`server.rs`) calls only these and names no tool. An effect a kind needs from
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
#[allow(dead_code, reason = "wired into the tool table in the next step of upstream support")]
pub(crate) mod upstream;

use std::convert::Infallible;
use std::fmt;

use serde_json::{Map, Value};

use crate::approve::Ask;
use crate::gate::authorize::{Authorized, Rules};
use crate::gate::exec::{ExecError, RunContext};
use crate::gate::outcome::ToolCode;
use crate::mcp::jsonrpc::kind_of;
pub(crate) use crate::mcp::model::ArgError;
use crate::mcp::model::{ToolList, ToolResult};
use crate::policy::Policy;
use http::args::HttpRequest;
use http::authorize::{HttpAction, HttpDenial};
use http::result::HttpOutcome;
use inventory::Inventory;
use ssh::result::{SshError, SshOutcome};
use ssh::{SshAction, SshDenial, SshExec};

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
}

/// What `sp mcp` runs with: the real effects, one executor per kind that has any. The
/// HTTP executor keeps its connection pool and OAuth2 token cache, the SSH executor its
/// sessions, across calls.
#[derive(Default)]
pub(crate) struct Executors {
    pub http: http::exec::HttpExecutor,
    pub ssh: ssh::exec::SshExecutor,
}

impl Executor for Executors {
    fn http(&mut self, action: &Authorized<HttpAction>, ctx: &mut RunContext<'_, '_>) -> Result<HttpOutcome, ExecError> {
        self.http.http(action, ctx)
    }

    fn ssh(&mut self, action: &Authorized<SshAction>, ctx: &mut RunContext<'_, '_>) -> Result<SshOutcome, SshError> {
        self.ssh.run(action, ctx.vault, ctx.progress)
    }
}

/// The table: one line per kind of tool, `Variant(call, action, denial) => its Tool`,
/// in `tools/list` order. It makes [`ToolCall`], [`Action`], [`Denial`], [`NAMES`],
/// [`definitions`], and one arm per kind in each dispatch below. (The three types are
/// spelled out because the public enums cannot name them through the crate-private
/// [`Tool`]; the compiler holds them equal to the kind's own.)
macro_rules! table {
    ($($kind:ident($call:ty, $action:ty, $denial:ty) => $tool:ty;)*) => {
        /// A fully typed tool call. Only [`ToolCall::parse`] builds one.
        #[derive(Debug, Clone, PartialEq)]
        #[allow(clippy::large_enum_variant, reason = "one per request, never stored in bulk")]
        pub enum ToolCall {
            $($kind($call),)*
        }

        /// An authorized call. Only [`authorize`] builds one, through `gate::authorize`.
        #[derive(Debug)]
        #[allow(clippy::large_enum_variant, reason = "one per request, never stored in bulk")]
        pub enum Action {
            $($kind(Authorized<$action>),)*
        }

        /// Why a call is not authorized: its kind's rules refused it.
        #[derive(Debug, PartialEq, Eq)]
        pub enum Denial {
            $($kind($denial),)*
        }

        /// Every tool's name, in `tools/list` order.
        pub(crate) const NAMES: &[&str] = &[$(<$tool as Tool>::NAME,)*];

        /// The tools offered by `tools/list`.
        pub(crate) fn definitions() -> Value {
            Value::Array(vec![$(<$tool as Tool>::definition(),)*])
        }

        impl ToolCall {
            pub fn parse(call: &CallRequest) -> Result<ToolCall, ArgError> {
                $(
                    if call.name == <$tool as Tool>::NAME {
                        return <$tool as Tool>::parse(&call.arguments).map(ToolCall::$kind);
                    }
                )*
                // call_request admits only known names.
                crate::mcp::model::bad(format!("unknown tool {:?}", short(&call.name)))
            }

            /// The journal's `target` (before authorization).
            pub(crate) fn target(&self) -> Option<String> {
                match self {
                    $(ToolCall::$kind(c) => <$tool as Tool>::target(c),)*
                }
            }
        }

        /// The call through its kind's rules (`gate::authorize`, the one constructor of
        /// `Authorized`).
        pub fn authorize(policy: &Policy, call: ToolCall) -> Result<Action, Denial> {
            match call {
                $(ToolCall::$kind(c) => crate::gate::authorize::authorize::<$action, $call>(policy, c).map(Action::$kind).map_err(Denial::$kind),)*
            }
        }

        impl Action {
            /// The tool's name (the journal's `tool`, the execution counters' key).
            pub(crate) fn name(&self) -> &'static str {
                match self {
                    $(Action::$kind(_) => <$tool as Tool>::NAME,)*
                }
            }

            pub(crate) fn audit(&self) -> Audit {
                match self {
                    $(Action::$kind(a) => <$tool as Tool>::audit(a.action()),)*
                }
            }

            pub(crate) fn approval(&self, policy: &Policy) -> Option<Ask> {
                match self {
                    $(Action::$kind(a) => <$tool as Tool>::approval(policy, a.action()),)*
                }
            }

            pub(crate) fn run(self, executor: &mut dyn Executor, policy: &Policy, ctx: &mut RunContext<'_, '_>) -> ToolResult {
                match self {
                    $(Action::$kind(a) => <$tool as Tool>::run(executor, policy, a, ctx),)*
                }
            }
        }

        impl Denial {
            /// The tool result code: `SP_DENIED`, or `SP_BAD_ARGUMENTS` for arguments no
            /// policy could allow.
            pub(crate) fn code(&self) -> ToolCode {
                match self {
                    $(Denial::$kind(d) => <$tool as Tool>::code(d),)*
                }
            }
        }

        impl fmt::Display for Denial {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                match self {
                    $(Denial::$kind(d) => fmt::Display::fmt(d, f),)*
                }
            }
        }
    };
}

table! {
    Http(HttpRequest, HttpAction, HttpDenial) => http::HttpTool;
    Inventory((), Inventory, Infallible) => inventory::InventoryTool;
    Ssh(SshExec, SshAction, SshDenial) => ssh::SshTool;
}

impl std::error::Error for Denial {}

impl Denial {
    /// The counter key and the journal row's `decision`.
    pub(crate) fn reason(&self) -> &'static str {
        match self.code() {
            ToolCode::BadArguments => "bad_arguments",
            _ => "denied",
        }
    }
}

/// `tools/list`, answered by the loop and by the control thread during a call: the
/// table's definitions, serialised once per process and era (`mcp::model::ToolList`).
pub(crate) static LIST: ToolList = ToolList::new(definitions);

/// Whether `name` is one of the table's tools (the journal's `tool` holds only these,
/// never an agent's string).
pub(crate) fn is_tool(name: &str) -> bool {
    NAMES.contains(&name)
}

/// A `tools/call` request that passed the JSON-RPC level checks.
#[derive(Debug, PartialEq)]
pub struct CallRequest {
    pub name: String,
    pub arguments: Map<String, Value>,
    /// `_meta.progressToken` (a string or an integer), if the client wants progress.
    pub progress_token: Option<Value>,
}

#[derive(Debug, PartialEq, Eq)]
pub enum CallError {
    ParamsNotObject { found: &'static str },
    MissingName,
    NameNotString,
    ArgumentsNotObject { found: &'static str },
    BadMeta,
    UnknownTool { name: String },
}

impl fmt::Display for CallError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CallError::ParamsNotObject { found } => write!(f, "tools/call params must be an object, found {found}"),
            CallError::MissingName => f.write_str("tools/call params need a \"name\""),
            CallError::NameNotString => f.write_str("tools/call \"name\" must be a string"),
            CallError::ArgumentsNotObject { found } => write!(f, "tools/call \"arguments\" must be an object, found {found}"),
            CallError::BadMeta => {
                f.write_str("tools/call \"_meta\" must be an object whose progressToken, if any, is a string or an integer")
            }
            CallError::UnknownTool { name } => write!(f, "unknown tool {:?}", short(name)),
        }
    }
}

/// Echoed names are cut short: a message must never carry a large agent-chosen payload.
fn short(s: &str) -> String {
    crate::sys::short(s, 64, crate::sys::Ellipsis::Marked)
}

pub fn call_request(params: Option<Value>) -> Result<CallRequest, CallError> {
    let mut map = match params {
        Some(Value::Object(m)) => m,
        Some(other) => return Err(CallError::ParamsNotObject { found: kind_of(&other) }),
        None => return Err(CallError::ParamsNotObject { found: "nothing" }),
    };
    // Other members (2025-11-25 `task` augmentation, future fields) are ignored, as
    // the schemas allow; `sp` declares no tasks, so such a call runs as an
    // ordinary one. The tool's `arguments` stay strict (ToolCall::parse).
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
    if !NAMES.contains(&name.as_str()) {
        return Err(CallError::UnknownTool { name });
    }
    Ok(CallRequest { name, arguments, progress_token })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn call(v: Value) -> Result<CallRequest, CallError> {
        call_request(Some(v))
    }

    /// Every kind in the table is reachable by its name, from `tools/call` to an
    /// authorized action of the same kind with the same name; `tools/list` offers
    /// exactly the table's names, in its order; a name not in the table is refused at
    /// both levels.
    #[test]
    fn every_kind_is_reachable_by_its_name_and_no_other_name_is() {
        let p = Policy::from_text(
            &json!({
                "http": {"allow": [{"hosts": ["api.example.com"], "methods": ["GET"]}]},
                "ssh": {"known_hosts": "/nonexistent/kh", "hosts": {"web1": {"address": "10.0.0.5", "user": "u", "auth": {"agent": true}}}}
            })
            .to_string(),
            std::path::Path::new("t.json"),
        )
        .unwrap();
        let listed: Vec<Value> = definitions().as_array().unwrap().iter().map(|d| d["name"].clone()).collect();
        assert_eq!(listed, [json!("http_request"), json!("sp_inventory"), json!("ssh_exec")]);
        assert_eq!(NAMES, ["http_request", "sp_inventory", "ssh_exec"]);
        let args = |name: &str| match name {
            "http_request" => json!({"method": "GET", "url": "https://api.example.com/x"}),
            "ssh_exec" => json!({"host": "web1", "command": "uptime"}),
            _ => json!({}),
        };
        for name in NAMES {
            let request = call(json!({"name": name, "arguments": args(name)})).unwrap();
            let typed = ToolCall::parse(&request).unwrap();
            let kind = std::mem::discriminant(&typed);
            let action = authorize(&p, typed).unwrap();
            assert_eq!(action.name(), *name);
            let again = ToolCall::parse(&request).unwrap();
            match (&again, &action) {
                (ToolCall::Http(_), Action::Http(_)) | (ToolCall::Inventory(()), Action::Inventory(_)) | (ToolCall::Ssh(_), Action::Ssh(_)) => {}
                other => panic!("{name}: {other:?}"),
            }
            assert_eq!(std::mem::discriminant(&again), kind);
            assert!(is_tool(name));
        }
        for name in ["", "HTTP_REQUEST", "http_request ", "sp_inventory\0", "ssh", "upstream_x", "http.request"] {
            assert!(!is_tool(name), "{name:?}");
            assert_eq!(call(json!({"name": name})), Err(CallError::UnknownTool { name: name.into() }));
            let request = CallRequest { name: name.into(), arguments: Map::new(), progress_token: None };
            assert_eq!(ToolCall::parse(&request), Err(ArgError(format!("unknown tool {name:?}"))));
        }
    }

    /// Each kind's journal facts and approval question come from the table.
    #[test]
    fn audit_facts_and_targets_come_from_each_kind() {
        let p = table_policy();
        let request = call(json!({"name": "http_request", "arguments": {"method": "GET", "url": "https://api.example.com/v1/users?q=1"}})).unwrap();
        let typed = ToolCall::parse(&request).unwrap();
        assert_eq!(typed.target(), Some("GET https://api.example.com/v1/users".into()));
        let action = authorize(&p, typed).unwrap();
        assert_eq!(action.audit(), Audit { rule: Some("http.allow[0]".into()), credential: Some("api".into()) });
        assert_eq!(action.approval(&p), None);
        let inventory = authorize(&p, ToolCall::Inventory(())).unwrap();
        assert_eq!((inventory.audit(), inventory.approval(&p), inventory.name()), (Audit::default(), None, "sp_inventory"));
    }

    fn table_policy() -> Policy {
        let v = json!({
            "credentials": {
                "api": {"source": {"env": "API"}, "inject": {"bearer": {}}, "hosts": ["api.example.com"], "paths": ["/v1/*"]},
                "keyed": {"source": {"env": "K"}, "inject": {"header": {"name": "X-Key"}}, "hosts": ["api.example.com"], "paths": ["/v2/*"]},
                "local": {"source": {"env": "L"}, "inject": {"bearer": {}}, "hosts": ["127.0.0.1:8080", "plain.example.com"]},
                "q": {"source": {"env": "Q"}, "inject": {"query": {"name": "api_key"}}, "hosts": ["q.example.net"]},
                "readonly": {"source": {"env": "R"}, "inject": {"basic": {}}, "hosts": ["ro.example.net"], "methods": ["GET"]}
            },
            "http": {"allow": [
                {"hosts": ["api.example.com"], "methods": ["GET", "POST"], "paths": ["/v1/*", "/v2/*", "/public"]},
                {"hosts": ["127.0.0.1:8080", "plain.example.com"], "methods": ["*"]},
                {"hosts": ["*.example.org"]},
                {"hosts": ["q.example.net", "ro.example.net"], "methods": ["*"]}
            ], "max_request_body_bytes": 64}
        });
        Policy::from_text(&v.to_string(), std::path::Path::new("test.json")).unwrap()
    }

    fn http(args: Value) -> Result<HttpAction, Denial> {
        let req = call_request(Some(json!({"name": "http_request", "arguments": args}))).unwrap();
        match authorize(&table_policy(), ToolCall::parse(&req).unwrap())? {
            Action::Http(a) => Ok(a.action().clone()),
            other => panic!("{other:?}"),
        }
    }

    fn cred(a: &HttpAction) -> Option<&str> {
        a.credential.as_ref().map(|c| c.name.as_str())
    }

    #[test]
    fn http_allowed() {
        let a = http(json!({"method": "GET", "url": "https://api.example.com/v1/users"})).unwrap();
        assert_eq!((cred(&a), a.rule.as_str()), (Some("api"), "http.allow[0]"));
        let a = http(json!({"method": "GET", "url": "https://api.example.com/public"})).unwrap();
        assert_eq!(cred(&a), None);
        let a = http(json!({"method": "POST", "url": "https://api.example.com/v2/x", "credential": "keyed"})).unwrap();
        assert_eq!(cred(&a), Some("keyed"));
        let a = http(json!({"method": "DELETE", "url": "http://127.0.0.1:8080/x"})).unwrap();
        assert_eq!((cred(&a), a.rule.as_str()), (Some("local"), "http.allow[1]"));
        let a = http(json!({"method": "HEAD", "url": "https://x.example.org/"})).unwrap();
        assert_eq!((cred(&a), a.rule.as_str()), (None, "http.allow[2]"));
        let a = http(json!({"method": "GET", "url": "https://ro.example.net/x"})).unwrap();
        assert_eq!(cred(&a), Some("readonly"));
        // a credential limited to GET is not picked for POST: the request goes without it
        let a = http(json!({"method": "POST", "url": "https://ro.example.net/x", "body": "{}"})).unwrap();
        assert_eq!(cred(&a), None);
    }

    #[test]
    fn http_denied() {
        use crate::policy::Method::{Delete, Get, Post};
        let no_rule = |method, host: &str, port, path: &str| HttpDenial::NoRule { method, host: host.into(), port, path: path.into() };
        let not_bound = |name: &str, host: &str, path: &str| HttpDenial::CredentialNotBound { name: name.into(), host: host.into(), path: path.into() };
        let cases = vec![
            (json!({"method": "DELETE", "url": "https://api.example.com/v1/users"}), no_rule(Delete, "api.example.com", 443, "/v1/users")),
            (json!({"method": "GET", "url": "https://api.example.com/v3"}), no_rule(Get, "api.example.com", 443, "/v3")),
            (json!({"method": "GET", "url": "https://api.example.com:8443/v1/x"}), no_rule(Get, "api.example.com", 8443, "/v1/x")),
            (json!({"method": "GET", "url": "https://evil.com/v1/x"}), no_rule(Get, "evil.com", 443, "/v1/x")),
            (json!({"method": "GET", "url": "https://example.org/"}), no_rule(Get, "example.org", 443, "/")),
            (json!({"method": "GET", "url": "https://api.example.com.evil.com/v1/"}), no_rule(Get, "api.example.com.evil.com", 443, "/v1/")),
            (json!({"method": "GET", "url": "https://api.example.com/v1/../admin"}), no_rule(Get, "api.example.com", 443, "/admin")),
            (json!({"method": "POST", "url": "http://127.0.0.1:8081/"}), no_rule(Post, "127.0.0.1", 8081, "/")),
            (json!({"method": "GET", "url": "https://api.example.com/public", "credential": "api"}), not_bound("api", "api.example.com", "/public")),
            (json!({"method": "GET", "url": "https://api.example.com/v1/x", "credential": "nope"}), HttpDenial::UnknownCredential { name: "nope".into() }),
            (json!({"method": "GET", "url": "http://plain.example.com/"}), HttpDenial::CredentialNeedsHttps { name: "local".into() }),
            (
                json!({"method": "GET", "url": "https://api.example.com/v2/x", "headers": {"x-key": "mine"}}),
                HttpDenial::HeaderConflict { name: "keyed".into(), header: "x-key".into() },
            ),
            (json!({"method": "GET", "url": "https://q.example.net/x?api_key=mine"}), HttpDenial::QueryConflict { name: "q".into(), param: "api_key".into() }),
            (json!({"method": "GET", "url": "https://q.example.net/x", "query": {"api_key": "mine"}}), HttpDenial::QueryConflict { name: "q".into(), param: "api_key".into() }),
            (json!({"method": "POST", "url": "https://q.example.net/x", "body": "x".repeat(65)}), HttpDenial::BodyTooLarge { limit: 64 }),
            (json!({"method": "POST", "url": "https://ro.example.net/x", "credential": "readonly"}), not_bound("readonly", "ro.example.net", "/x")),
        ];
        for (args, want) in cases {
            let shown = args.to_string();
            let got = http(args).map(|a| a.rule).unwrap_err();
            assert_eq!((got.code(), got.reason()), (ToolCode::Denied, "denied"), "{shown}");
            assert_eq!(got, Denial::Http(want), "{shown}");
        }
    }

    #[test]
    fn https_only() {
        let mut p = table_policy();
        p.http.https_only = true;
        let req = call_request(Some(json!({"name": "http_request", "arguments": {"method": "DELETE", "url": "http://127.0.0.1:8080/x"}}))).unwrap();
        assert_eq!(authorize(&p, ToolCall::parse(&req).unwrap()).unwrap_err(), Denial::Http(HttpDenial::HttpsOnly));
    }

    #[test]
    fn call_params() {
        assert_eq!(call_request(None), Err(CallError::ParamsNotObject { found: "nothing" }));
        assert_eq!(call_request(Some(json!("x"))), Err(CallError::ParamsNotObject { found: "a string" }));
        assert_eq!(call(json!({})), Err(CallError::MissingName));
        assert_eq!(call(json!({"name": 1})), Err(CallError::NameNotString));
        assert_eq!(
            call(json!({"name": "http_request", "arguments": []})),
            Err(CallError::ArgumentsNotObject { found: "an array" })
        );
        assert_eq!(call(json!({"name": "nope"})), Err(CallError::UnknownTool { name: "nope".into() }));
        // Issue #10: unknown params members (task augmentation, future fields) are ignored.
        assert_eq!(call(json!({"name": "sp_inventory", "x": 1, "task": {"ttl": 1}})).unwrap().name, "sp_inventory");
        assert_eq!(call(json!({"name": "sp_inventory", "_meta": {"progressToken": 1}})).unwrap().progress_token, Some(json!(1)));
        assert_eq!(call(json!({"name": "sp_inventory", "_meta": {"progressToken": "t"}})).unwrap().progress_token, Some(json!("t")));
        assert_eq!(call(json!({"name": "sp_inventory", "_meta": {"other": 1}})).unwrap().progress_token, None);
        for meta in [json!("x"), json!({"progressToken": 1.5}), json!({"progressToken": null}), json!({"progressToken": {}})] {
            assert_eq!(call(json!({"name": "sp_inventory", "_meta": meta})), Err(CallError::BadMeta));
        }
    }

    #[test]
    fn schemas_are_closed_objects() {
        for tool in definitions().as_array().unwrap() {
            assert_eq!(tool["inputSchema"]["type"], "object");
            assert_eq!(tool["inputSchema"]["additionalProperties"], false);
        }
    }

    /// Issue #9: each tool's `inputSchema` and its argument parser agree. Every schema
    /// property is known to the parser (and the parser knows no other: the list its
    /// "unknown argument" message gives is the schema's); every required one is required;
    /// the optional ones are optional; enums, string lengths, integer bounds and
    /// `maxProperties` are where the parser puts them. A property added to one side only,
    /// or a bound changed on one side only, fails here.
    #[test]
    fn each_tools_input_schema_and_parser_agree() {
        let parse = |tool: &str, args: &Map<String, Value>| {
            ToolCall::parse(&CallRequest { name: tool.into(), arguments: args.clone(), progress_token: None }).map(drop).map_err(|e| e.0)
        };
        // A valid value for every property of every tool (a new property needs one here).
        let sample = |tool: &str, prop: &str| -> Value {
            match (tool, prop) {
                ("http_request", "method") => json!("POST"),
                ("http_request", "url") => json!("https://api.example.com/x"),
                ("http_request", "headers") => json!({"x-a": "1"}),
                ("http_request", "query") => json!({"q": "1"}),
                ("http_request", "body") => json!("{}"),
                ("http_request", "credential") => json!("api"),
                ("ssh_exec", "host") => json!("web1"),
                ("ssh_exec", "command") => json!("uptime"),
                ("ssh_exec", "timeout_s") => json!(5),
                ("ssh_exec", "stdin") => json!("x"),
                other => panic!("no sample for {other:?}: add one"),
            }
        };
        let tools = definitions();
        assert_eq!(tools.as_array().unwrap().len(), 3);
        for tool in tools.as_array().unwrap() {
            let name = tool["name"].as_str().unwrap();
            let schema = &tool["inputSchema"];
            let props = schema["properties"].as_object().unwrap();
            let required: Vec<&str> = schema["required"].as_array().map(|r| r.iter().map(|v| v.as_str().unwrap()).collect()).unwrap_or_default();
            let full: Map<String, Value> = props.keys().map(|k| (k.clone(), sample(name, k))).collect();
            assert_eq!(parse(name, &full), Ok(()), "{name}: every schema property at once");
            for k in props.keys() {
                let mut less = full.clone();
                less.remove(k);
                let got = parse(name, &less);
                if required.contains(&k.as_str()) {
                    assert!(got.as_ref().is_err_and(|m| m.contains(&format!("\"{k}\""))), "{name}: {k} is required: {got:?}");
                } else {
                    assert_eq!(got, Ok(()), "{name}: {k} is optional");
                }
            }
            let mut extra = full.clone();
            extra.insert("not_in_schema".into(), json!("x"));
            let got = parse(name, &extra).unwrap_err();
            assert!(got.contains("unknown argument \"not_in_schema\""), "{name}: {got}");
            if let Some(list) = got.split(" takes: ").nth(1) {
                let mut listed: Vec<&str> = list.trim_end_matches(')').split(", ").collect();
                let mut ours: Vec<&str> = props.keys().map(String::as_str).collect();
                listed.sort_unstable();
                ours.sort_unstable();
                assert_eq!(listed, ours, "{name}: the parser's list is the schema's");
            } else {
                assert!(props.is_empty() && got.contains("takes none"), "{name}: {got}");
            }
            for (k, p) in props {
                let with = |v: Value| {
                    let mut a = full.clone();
                    a.insert(k.clone(), v);
                    parse(name, &a)
                };
                if let Some(values) = p["enum"].as_array() {
                    for v in values {
                        let v = if k == "method" && matches!(v.as_str(), Some("GET" | "HEAD")) { (v.clone(), true) } else { (v.clone(), false) };
                        // GET and HEAD take no body: check them without one.
                        let got = if v.1 {
                            let mut a = full.clone();
                            a.remove("body");
                            a.insert(k.clone(), v.0.clone());
                            parse(name, &a)
                        } else {
                            with(v.0.clone())
                        };
                        assert_eq!(got, Ok(()), "{name}.{k} = {}", v.0);
                    }
                    assert!(with(json!("NOT-IN-ENUM")).is_err(), "{name}.{k}: outside the enum");
                }
                if let Some(max) = p["maxLength"].as_u64() {
                    // The URL's limit holds with its `query` appended: test it alone.
                    let with_len = |n: usize| {
                        let mut a = full.clone();
                        let v = match k.as_str() {
                            "url" => {
                                a.remove("query");
                                format!("https://api.example.com/{}", "x".repeat(n - 24))
                            }
                            _ => "x".repeat(n),
                        };
                        a.insert(k.clone(), json!(v));
                        parse(name, &a)
                    };
                    assert_eq!(with_len(max as usize), Ok(()), "{name}.{k}: maxLength {max} is allowed");
                    assert!(with_len(max as usize + 1).is_err(), "{name}.{k}: one over maxLength {max}");
                }
                if let (Some(min), Some(max)) = (p["minimum"].as_i64(), p["maximum"].as_i64()) {
                    assert_eq!((with(json!(min)), with(json!(max))), (Ok(()), Ok(())), "{name}.{k}: bounds {min}..={max}");
                    assert!(with(json!(min - 1)).is_err() && with(json!(max + 1)).is_err(), "{name}.{k}: outside {min}..={max}");
                }
                if let Some(max) = p["maxProperties"].as_u64() {
                    let map = |n: u64| Value::Object((0..n).map(|i| (format!("x-k{i}"), json!("v"))).collect());
                    assert_eq!(with(map(max)), Ok(()), "{name}.{k}: maxProperties {max}");
                    assert!(with(map(max + 1)).is_err(), "{name}.{k}: one over maxProperties {max}");
                }
            }
        }
    }
}
