//! `http_request`, as one slice: what the agent may ask (`args`, `url`), what the policy
//! allows (`authorize`: rules, credentials, redirect hops), how one request goes out
//! (`exec`: the destination check, the credential's injection through `cred/`, ureq),
//! how a call runs (`run`: the redirect hops, echo withholding, scrubbing) and what comes
//! back (`result`, with `coding` for compressed bodies).

pub(crate) mod args;
pub(crate) mod authorize;
pub(crate) mod coding;
mod dial;
pub(crate) mod exec;
pub(crate) mod get;
pub(crate) mod result;
pub(crate) mod run;
pub(crate) mod url;

use serde_json::{json, Map, Value};

use crate::approve::Ask;
use crate::escape;
use crate::gate::authorize::Authorized;
use crate::gate::exec::RunContext;
use crate::gate::outcome::ToolCode;
use crate::mcp::model::{ArgError, ToolResult};
use crate::policy::Policy;
use crate::tools::{Audit, Executor, Tool};
use args::HttpRequest;
use authorize::{HttpAction, HttpDenial};

/// HTTP `target` in the journal: method and `scheme://host[:port]/path`, no query, no
/// userinfo.
pub(crate) fn target(method: &str, url: &::url::Url) -> String {
    let port = url.port().map(|p| format!(":{p}")).unwrap_or_default();
    format!("{method} {}://{}{port}{}", url.scheme(), url.host_str().unwrap_or_default(), url.path())
}

/// The table's entry for `http_request` (`tools/mod.rs`).
pub(crate) struct HttpTool;

impl Tool for HttpTool {
    const NAME: &'static str = args::HTTP_REQUEST;
    type Call = HttpRequest;
    type Action = HttpAction;
    type Denial = HttpDenial;

    fn definition() -> Value {
        args::definition()
    }

    fn parse(arguments: &Map<String, Value>) -> Result<HttpRequest, ArgError> {
        args::parse(arguments)
    }

    fn target(call: &HttpRequest) -> Option<String> {
        Some(target(call.method.as_str(), &call.url))
    }

    fn code(denial: &HttpDenial) -> ToolCode {
        denial.code()
    }

    fn audit(a: &HttpAction) -> Audit {
        Audit { rule: Some(a.rule.clone()), credential: a.credential.as_ref().map(|c| c.name.clone()) }
    }

    /// Asked when the credential the call carries is approve-flagged.
    fn approval(policy: &Policy, a: &HttpAction) -> Option<Ask> {
        use crate::policy::approval::Approve;
        // Asked when its credential or a rule that permits it says `approve` (the
        // credential names the question then; "command" from either keeps it there).
        let credential = a.credential.as_ref().map(|c| c.name.clone()).filter(|n| policy.credential_needs_approval(n));
        let rule_command = a.rule_approve.as_ref().is_some_and(|(_, how)| *how == Approve::Command);
        let (subject, only_command) = match (credential, &a.rule_approve) {
            (Some(name), _) => {
                let command = policy.credentials.get(&name).is_some_and(|c| c.approve == Approve::Command);
                (name, command || rule_command)
            }
            (None, Some((rule, _))) => (rule.clone(), rule_command),
            (None, None) => return None,
        };
        let line = crate::approve::line;
        let ascii = a.url.host_str().unwrap_or_default();
        let (host, unicode) = escape::host(ascii);
        let headers: Map<String, Value> = a.headers.iter().map(|(k, v)| (escape::shown(k, crate::approve::MAX_SHOWN_LINE), line(v))).collect();
        let mut request = json!({"method": a.method.as_str(), "url": line(a.url.as_str()), "host": host, "headers": headers});
        if let Some(u) = unicode {
            request["host_unicode"] = json!(u);
        }
        let raw_headers: Map<String, Value> = a.headers.iter().map(|(k, v)| (k.clone(), Value::String(v.clone()))).collect();
        let mut raw = json!({"method": a.method.as_str(), "url": a.url.as_str(), "headers": raw_headers});
        if let Some(body) = &a.body {
            request["body"] = crate::approve::text(body);
            let (b, cut) = crate::approve::cut(body);
            raw["body"] = json!(b);
            raw["body_truncated"] = json!(cut);
        }
        Some(Ask { subject, host: ascii.to_owned(), request, raw, only_command })
    }

    fn run(executor: &mut dyn Executor, policy: &Policy, action: Authorized<HttpAction>, ctx: &mut RunContext<'_, '_>) -> ToolResult {
        run::run(executor, policy, action, ctx)
    }
}
