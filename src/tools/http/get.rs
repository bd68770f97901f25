//! `http_get`: `http_request` narrowed to GET and HEAD, so a host can tell a read from
//! a write by the tool alone (`readOnlyHint: true`; Codex and others ask before every
//! call of a tool without it). A thin kind of its own in the table: the same argument
//! checks (`args.rs`, less `body`), the same policy rules, credentials, approval,
//! journal and result as `http_request`; only the method is fixed to a read. It is
//! listed when the policy allows GET or HEAD somewhere ([`listed`]); called otherwise,
//! the policy denies it like any request it does not allow.

use serde_json::{json, Map, Value};

use super::args::{self, HttpRequest};
use super::authorize::{HttpAction, HttpDenial};
use crate::approve::Ask;
use crate::gate::authorize::{Authorized, Rules};
use crate::gate::exec::RunContext;
use crate::gate::outcome::ToolCode;
use crate::mcp::model::{bad, ArgError, ToolResult};
use crate::policy::{Method, Policy};
use crate::tools::{Audit, Executor, Tool};

pub(crate) const HTTP_GET: &str = "http_get";

/// An `http_request` whose method is GET or HEAD: only [`parse`] makes one.
#[derive(Debug, Clone, PartialEq)]
pub struct HttpGet(HttpRequest);

impl HttpGet {
    /// The `http_request` it is (`sp explain` names the rule nearest to a refused one).
    pub(crate) fn request(&self) -> &HttpRequest {
        &self.0
    }
}

/// Whether the policy allows GET or HEAD by some `http.allow` rule.
pub(crate) fn listed(policy: &Policy) -> bool {
    policy.http.allow.iter().any(|r| r.methods.iter().any(|m| matches!(m, Method::Get | Method::Head)))
}

/// `http_request`'s arguments less `body`, with `method` optional (GET) and limited to
/// GET and HEAD.
pub(crate) fn parse(arguments: &Map<String, Value>) -> Result<HttpGet, ArgError> {
    const KNOWN: [&str; 5] = ["method", "url", "headers", "query", "credential"];
    if let Some(k) = arguments.keys().find(|k| !KNOWN.contains(&k.as_str())) {
        let shown = crate::sys::short(k, 64, crate::sys::Ellipsis::Silent);
        return bad(format!("unknown argument {shown:?} ({HTTP_GET} takes: {})", KNOWN.join(", ")));
    }
    let mut full = arguments.clone();
    match full.get("method") {
        None => {
            full.insert("method".into(), json!("GET"));
        }
        Some(Value::String(m)) if m == "GET" || m == "HEAD" => {}
        Some(_) => return bad(format!("\"method\" of {HTTP_GET} must be \"GET\" or \"HEAD\" (use http_request for others)")),
    }
    args::parse(&full).map(HttpGet)
}

impl Rules<HttpGet> for HttpAction {
    type Denial = HttpDenial;
    fn check(policy: &Policy, call: HttpGet) -> Result<HttpAction, HttpDenial> {
        <HttpAction as Rules<HttpRequest>>::check(policy, call.0)
    }
}

/// The `tools/list` entry of `http_get`.
pub(crate) fn definition() -> Value {
    let full = args::definition();
    let mut properties = full["inputSchema"]["properties"].clone();
    if let Some(p) = properties.as_object_mut() {
        p.remove("body");
        p.insert("method".into(), json!({"type": "string", "enum": ["GET", "HEAD"], "default": "GET"}));
    }
    json!({
        "name": HTTP_GET,
        "title": "HTTP GET",
        "description": "Read from an API the operator allows (GET or HEAD only). Same rules, credentials \
            and result as http_request; see sp_inventory.",
        "inputSchema": {"type": "object", "properties": properties, "required": ["url"], "additionalProperties": false},
        "outputSchema": super::result::output_schema(),
        "annotations": {"title": "HTTP GET", "readOnlyHint": true, "destructiveHint": false, "idempotentHint": true, "openWorldHint": true}
    })
}

/// The table's entry for `http_get` (`tools/mod.rs`): `http_request`'s slice throughout.
pub(crate) struct HttpGetTool;

impl Tool for HttpGetTool {
    const NAME: &'static str = HTTP_GET;
    type Call = HttpGet;
    type Action = HttpAction;
    type Denial = HttpDenial;

    fn definition() -> Value {
        definition()
    }

    fn parse(arguments: &Map<String, Value>) -> Result<HttpGet, ArgError> {
        parse(arguments)
    }

    fn target(call: &HttpGet) -> Option<String> {
        <super::HttpTool as Tool>::target(&call.0)
    }

    fn code(denial: &HttpDenial) -> ToolCode {
        denial.code()
    }

    fn audit(a: &HttpAction) -> Audit {
        <super::HttpTool as Tool>::audit(a)
    }

    fn approval(policy: &Policy, a: &HttpAction) -> Option<Ask> {
        <super::HttpTool as Tool>::approval(policy, a)
    }

    fn run(executor: &mut dyn Executor, policy: &Policy, action: Authorized<HttpAction>, ctx: &mut RunContext<'_, '_>) -> ToolResult {
        super::run::run(executor, policy, action, ctx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(v: Value) -> Map<String, Value> {
        v.as_object().unwrap().clone()
    }

    /// Only reads get through. Attacks tried (all held): POST, DELETE, "get" in lower
    /// case, a body, a method that is not a string, an unknown argument.
    #[test]
    fn only_get_and_head() {
        let url = "https://api.example.com/x";
        assert_eq!(parse(&args(json!({"url": url}))).unwrap().0.method, Method::Get);
        assert_eq!(parse(&args(json!({"url": url, "method": "HEAD"}))).unwrap().0.method, Method::Head);
        for bad_args in [
            json!({"url": url, "method": "POST"}),
            json!({"url": url, "method": "DELETE"}),
            json!({"url": url, "method": "get"}),
            json!({"url": url, "method": 1}),
            json!({"url": url, "body": "x"}),
            json!({"url": url, "x": 1}),
        ] {
            assert!(parse(&args(bad_args.clone())).is_err(), "{bad_args}");
        }
    }
}
