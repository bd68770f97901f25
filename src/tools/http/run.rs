//! One `http_request`, from its authorized request to its tool result:
//!
//! ```text
//!  Authorized<HttpAction> ──> executor.http ──> HttpOutcome ──> withhold echoes, scrub ──> HttpResult
//!        ^                                          │
//!        │  a 3xx with a Location: Hop::of          │ (no credential, same origin, within
//!        └── Hop::follow (the same rules) <─────────┘  max_redirects: authorize.rs)
//!            each hop: its intent row first (Output::emit), then the executor again
//! ```
//!
//! Every hop goes through the executor, and so through its destination check, like the
//! first request. A hop whose intent row cannot be written does not run. What the
//! result row reports (status, bytes, truncated, hops) is emitted after each response.

use crate::gate::authorize::Authorized;
use crate::gate::exec::{Event, ExecError, Facts, RunContext};
use crate::mcp::model::ToolResult;
use crate::policy::{OnEcho, Policy};
use crate::tools::http::authorize::{HttpAction, Hop};
use crate::tools::http::result::{HttpResult, Redirect, Secrets};
use crate::tools::Executor;

/// Runs the call and shapes its result; every outside piece is scrubbed by `ctx.vault`.
pub(crate) fn run(executor: &mut dyn Executor, policy: &Policy, first: Authorized<HttpAction>, ctx: &mut RunContext<'_, '_>) -> ToolResult {
    match follow(executor, policy, first, ctx) {
        Ok(result) => ToolResult::ok(ctx.vault.scrub_fields(result.into_fields())),
        // SP_BLOCKED too: the destination check runs after the intent row, in the
        // executor (it resolves names), so it is an execution whose outcome is the
        // block, journaled as intent + result like any other.
        Err((e, hops)) => {
            // The message can quote the peer: scrubbed before it is logged or sent.
            let message = ctx.vault.scrub_text(e.to_string());
            log::warn!("http_request failed after {hops} redirect hop(s): {message}");
            ToolResult::error(e.code(), message)
        }
    }
}

/// Runs an authorized request and, for a request without a credential, follows
/// same-origin redirects, each hop authorized again ([`Hop::follow`]) and run through
/// the executor like the first. On error, also says how many hops had already run.
fn follow(executor: &mut dyn Executor, policy: &Policy, first: Authorized<HttpAction>, ctx: &mut RunContext<'_, '_>) -> Result<HttpResult, (ExecError, u32)> {
    let mut current = first;
    let mut hops = 0;
    loop {
        let a = current.action();
        log::info!(
            "executing {} {}://{}:{}{} ({}{})",
            a.method,
            a.url.scheme(),
            a.url.host_str().unwrap_or_default(),
            a.url.port_or_known_default().unwrap_or_default(),
            a.url.path(),
            a.rule,
            a.credential.as_ref().map(|c| format!(", credential {}", c.name)).unwrap_or_default()
        );
        if hops > 0 {
            // Each redirect hop is an effect of its own: its intent row first.
            let event = Event::Intent { target: super::target(a.method.as_str(), &a.url), rule: a.rule.clone(), note: format!("redirect hop {hops}") };
            ctx.output.emit(event).map_err(|e| (ExecError::Unavailable(e.0), hops))?;
        }
        if ctx.cancel.is_cancelled() {
            return Err((ExecError::Cancelled, hops));
        }
        let mut outcome = executor.http(&current, ctx).map_err(|e| (e, hops))?;
        let facts = Facts {
            status: Some(outcome.status),
            bytes_out: Some(outcome.body.len() as u64),
            truncated: Some(outcome.truncated),
            redirects: hops,
            ..Facts::default()
        };
        // A credential with `on_echo: "withhold"` whose secret is in the body (or the
        // headers) in any spelling: that part is not passed on at all.
        let withhold: Vec<&str> = policy.credentials.values().filter(|c| c.on_echo == OnEcho::Withhold).map(|c| c.name.as_str()).collect();
        let echoed = |found: Vec<String>| found.into_iter().find(|n| withhold.contains(&n.as_str()));
        let body_echo = if withhold.is_empty() { None } else { echoed(ctx.vault.echoed_in(&outcome.body, outcome.truncated)) };
        let header_echo = if withhold.is_empty() { None } else { echoed(ctx.vault.echoed_in_headers(&outcome.headers)) };
        // The redirect as sent (it is only used to follow; the result's copy of the
        // Location is scrubbed with the rest of the result).
        let hop = Hop::of(&current, hops, outcome.status, &outcome.headers);
        // Raw bytes first: a body that is not UTF-8 is base64-encoded below, where no
        // string scrub could find the secret. A cut tail first: once a long run of the
        // secret before the cut is replaced, what is left after it (a cut escape, `&#5`)
        // begins no spelling, and would stay.
        if outcome.truncated {
            ctx.vault.scrub_truncated_tail(&mut outcome.body);
        }
        ctx.vault.scrub_bytes(&mut outcome.body);
        // Names and values, and an echo split across two header lines.
        ctx.vault.scrub_headers(&mut outcome.headers);
        // Compressed content is searched for the secrets read so far (`coding.rs`).
        let vault = &*ctx.vault;
        let find = |b: &[u8], cut: bool| vault.echoed_in(b, cut);
        let limit = usize::try_from(current.action().max_response_bytes).unwrap_or(usize::MAX);
        let secrets = (!vault.is_empty()).then_some(Secrets { find: &find, limit });
        let mut result = HttpResult::from_outcome(outcome, secrets.as_ref());
        result.withhold_echo(body_echo.as_deref(), header_echo.as_deref());
        // The URL as authorized: an injected query credential is not part of it.
        result.final_url = current.action().url.to_string();
        result.redirects = hops;
        // What the result row reports, whatever comes next.
        let _ = ctx.output.emit(Event::Facts(facts));
        let Some(hop) = hop else {
            return Ok(result);
        };
        match hop.follow(policy) {
            Ok(next) => {
                current = next;
                hops += 1;
            }
            Err(stop) => {
                log::info!("redirect not followed: {}", ctx.vault.scrub_text(stop.to_string()));
                let location = header_echo.is_none().then(|| hop.location().to_owned());
                result.redirect = Redirect::Refused { reason: stop.to_string(), location };
                return Ok(result);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gate::exec::{Cancel, Progress, Recorded, Unavailable};
    use crate::gate::outcome::ToolCode;
    use crate::gate::vault::Vault;
    use crate::tools::http::result::HttpOutcome;
    use serde_json::json;

    /// Answers each request with the next of `answers`; records the URLs asked for.
    struct Script {
        answers: Vec<HttpOutcome>,
        calls: Vec<String>,
    }

    impl Executor for Script {
        fn http(&mut self, action: &Authorized<HttpAction>, _: &mut RunContext<'_, '_>) -> Result<HttpOutcome, ExecError> {
            self.calls.push(action.action().url.to_string());
            Ok(self.answers.remove(0))
        }
    }

    fn answer(status: u16, location: Option<&str>, body: &str) -> HttpOutcome {
        let headers = location.map(|l| vec![("location".to_owned(), l.to_owned())]).unwrap_or_default();
        HttpOutcome { status, headers, body: body.as_bytes().to_vec(), truncated: false }
    }

    fn policy() -> Policy {
        let v = json!({"http": {"allow": [{"hosts": ["x.example.org"]}]}});
        Policy::from_text(&v.to_string(), std::path::Path::new("test.json")).unwrap()
    }

    fn first(p: &Policy) -> Authorized<HttpAction> {
        let serde_json::Value::Object(a) = json!({"method": "GET", "url": "https://x.example.org/a"}) else { panic!() };
        crate::gate::authorize::authorize(p, crate::tools::http::args::parse(&a).unwrap()).unwrap()
    }

    fn run_with(executor: &mut dyn Executor, output: &mut dyn crate::gate::exec::Output) -> ToolResult {
        let p = policy();
        let (mut vault, cancel, mut progress) = (Vault::new(), Cancel::new(), Progress::none());
        let mut ctx = RunContext::new(&mut vault, &cancel, &mut progress, output);
        run(executor, &p, first(&p), &mut ctx)
    }

    #[test]
    fn each_hop_is_announced_then_run_and_reported() {
        let mut script = Script { answers: vec![answer(302, Some("/b"), ""), answer(200, None, "ok")], calls: vec![] };
        let mut output = Recorded::default();
        let result = run_with(&mut script, &mut output);
        assert_eq!(script.calls, ["https://x.example.org/a", "https://x.example.org/b"]);
        let facts = |status, bytes_out, redirects| {
            Event::Facts(Facts { status: Some(status), bytes_out: Some(bytes_out), truncated: Some(false), redirects, ..Facts::default() })
        };
        let hop = Event::Intent { target: "GET https://x.example.org/b".into(), rule: "http.allow[0]".into(), note: "redirect hop 1".into() };
        assert_eq!(output.0, [facts(302, 0, 0), hop, facts(200, 2, 1)]);
        let fields = json!({"status": 200, "headers": {}, "body": "ok", "truncated": false, "final_url": "https://x.example.org/b", "redirects": 1, "redirect_refused": false});
        assert_eq!(result, ToolResult::ok(Vault::new().scrub_fields(fields)));
    }

    /// A journal that cannot take a hop's intent row: the hop does not run.
    #[test]
    fn a_hop_whose_intent_row_fails_does_not_run() {
        struct Full(Vec<Event>);
        impl crate::gate::exec::Output for Full {
            fn emit(&mut self, event: Event) -> Result<(), Unavailable> {
                match event {
                    Event::Intent { .. } => Err(Unavailable("the action was not run: the journal is full".into())),
                    other => {
                        self.0.push(other);
                        Ok(())
                    }
                }
            }
        }
        let mut script = Script { answers: vec![answer(302, Some("/b"), "")], calls: vec![] };
        let result = run_with(&mut script, &mut Full(vec![]));
        assert_eq!(script.calls, ["https://x.example.org/a"]);
        assert_eq!(result, ToolResult::error(ToolCode::Unavailable, Vault::new().scrub_text("the action was not run: the journal is full")));
    }

    /// An executor without an HTTP head refuses (fail closed), and nothing else runs.
    #[test]
    fn an_executor_without_the_http_head_refuses() {
        struct SshOnly;
        impl Executor for SshOnly {}
        let mut output = Recorded::default();
        let result = run_with(&mut SshOnly, &mut output);
        assert_eq!(result, ToolResult::error(ToolCode::Unavailable, Vault::new().scrub_text("this executor does not run http_request")));
        assert_eq!(output.0, []);
    }
}
