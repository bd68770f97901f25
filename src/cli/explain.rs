//! `sp explain` and `sp test` (issue 35, section 2): what the policy decides for one
//! call, without executing or contacting anything, and a file of such calls held to
//! their expected decisions.
//!
//! ```text
//!  {"tool", "arguments"} ──> tools::call_request_in ──> ToolCall::parse_in ──> tools::authorize
//!     (an upstream's name: resolved from the pins file or its own tail, never listed)
//!   ──> rate limits: State::check on the counts as they are (nothing counted)
//!   ──> approval: Action::approval (what sp mcp would ask), approval.mode
//!   ──> Explanation: allow | deny (+ the nearest http.allow rule) | approve | rate_limited
//! ```
//!
//! The decision is the real one: the same parse and the same `authorize` as `sp mcp`
//! (no second evaluator that could drift). What `sp mcp` decides only at run time is
//! not predicted: a host's addresses (`net/dest.rs` resolves them when the call runs,
//! and may still refuse it, `SP_BLOCKED`), whether an upstream lists the tool, and
//! whether its definition still matches its pin. Nothing here reads a secret's value,
//! resolves a name or opens a socket; the credential is shown by name and scheme.
//!
//! Exit status (`sp(1)`): 0 allow, 1 deny, 2 approve, 3 error, 4 rate-limited (the
//! issue lists no code for it). `sp test`: 0 when every case passes, 1 when one fails,
//! 3 when the file or the policy cannot be used.

use std::fmt;

use serde_json::{json, Map, Value};

use crate::gate::limits::State;
use crate::policy::approval::Mode;
use crate::policy::upstreams::PinMode;
use crate::policy::{AllowRule, Injection, Policy};
use crate::tools::http::args::HttpRequest;
use crate::tools::upstream::pins::{Cause, Pins, Withheld};
use crate::tools::upstream::Tables;
use crate::tools::{self, Action, Catalog, ToolCall};

/// What the policy decides for a call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Decision {
    Allow,
    Deny,
    /// It would run once the operator's approver (or the user) says yes.
    Approve,
    /// A `limits` rule is at its max now.
    RateLimited,
}

impl Decision {
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Decision::Allow => "allow",
            Decision::Deny => "deny",
            Decision::Approve => "approve",
            Decision::RateLimited => "rate_limited",
        }
    }

    fn parse(s: &str) -> Option<Decision> {
        [Decision::Allow, Decision::Deny, Decision::Approve, Decision::RateLimited].into_iter().find(|d| d.as_str() == s)
    }

    /// `sp explain`'s exit status.
    pub(crate) fn exit_code(self) -> u8 {
        match self {
            Decision::Allow => 0,
            Decision::Deny => 1,
            Decision::Approve => 2,
            Decision::RateLimited => EXIT_RATE_LIMITED,
        }
    }
}

/// `sp explain` and `sp test` when the call, the case file or the policy cannot be used.
pub(crate) const EXIT_ERROR: u8 = 3;
/// `sp explain` of a call a rate limit refuses now.
pub(crate) const EXIT_RATE_LIMITED: u8 = 4;

/// A policy rule: its name (`http.allow[2]`), its index among its kind when it has
/// one, and its text as `sp check` shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct RuleShown {
    pub name: String,
    pub index: Option<usize>,
    pub text: Option<String>,
}

/// The `http.allow` rule closest to a refused request, and the parts of it that do not
/// match (`host`, `method`, `path`), each with why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Nearest {
    pub rule: RuleShown,
    pub failed: Vec<(&'static str, String)>,
}

/// A credential the call would carry: its name and how it is injected, never its value
/// nor where it is read from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct CredentialShown {
    pub name: String,
    pub scheme: String,
}

/// What `sp explain` says about one call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Explanation {
    pub tool: String,
    pub decision: Decision,
    /// The tool result code `sp mcp` would answer a refusal with (`SP_DENIED`, ...).
    pub code: Option<&'static str>,
    /// Why it is refused, or who is asked, or which limit is reached.
    pub reason: Option<String>,
    pub rule: Option<RuleShown>,
    pub credentials: Vec<CredentialShown>,
    pub nearest: Option<Nearest>,
    /// An upstream tool's pin, from the pins file (`sp upstream pin`).
    pub pins: Option<String>,
    /// What `sp mcp` still checks when the call runs.
    pub notes: Vec<String>,
}

/// Why a call cannot be explained (exit 3).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum ExplainError {
    /// Not `{"tool": NAME, "arguments": {...}}`.
    Shape { why: String },
    /// What `sp mcp` would answer -32602 (an unknown tool, a malformed call).
    Call { why: String },
    /// The tool's arguments fail their checks (`SP_BAD_ARGUMENTS`).
    Arguments { why: String },
    /// An upstream tool whose upstream's own name cannot be known without listing it.
    Unresolved { name: String },
    /// The rate limit counts cannot be read.
    Limits { why: String },
}

impl fmt::Display for ExplainError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ExplainError::Shape { why } => write!(f, "the call must be {{\"tool\": NAME, \"arguments\": {{...}}}}: {why}"),
            ExplainError::Call { why } => write!(f, "sp mcp would refuse the call itself (-32602): {why}"),
            ExplainError::Arguments { why } => write!(f, "the arguments fail their checks (SP_BAD_ARGUMENTS): {why}"),
            ExplainError::Unresolved { name } => {
                write!(f, "{name:?}: the upstream's own name of this tool is not in the pins file and is not plain (sp upstream pin records it)")
            }
            ExplainError::Limits { why } => write!(f, "{why}"),
        }
    }
}

impl std::error::Error for ExplainError {}

/// What an explanation reads besides the policy, read once by the caller: the rate
/// limit counts as they are now (`None`: the policy has no `limits` rules, or no state
/// yet), and the pins file (`None`: no pins file; `Some(Err)`: it cannot be read).
#[derive(Debug, Default)]
pub(crate) struct Context {
    pub limits: Option<State>,
    pub now_ms: u64,
    pub pins: Option<Result<Pins, String>>,
}

/// The call of `sp explain` as given: `{"tool": ..., "arguments": ...}`.
pub(crate) fn call_of(text: &str) -> Result<Value, ExplainError> {
    crate::json::parse(text).map_err(|e| ExplainError::Shape { why: e.to_string() })
}

/// Explains `call` (`{"tool": NAME, "arguments": {...}}`) under `policy`.
pub(crate) fn explain(policy: &Policy, call: &Value, cx: &Context) -> Result<Explanation, ExplainError> {
    let Value::Object(call) = call else { return Err(ExplainError::Shape { why: format!("found {}", crate::mcp::jsonrpc::kind_of(call)) }) };
    if let Some(k) = call.keys().find(|k| !matches!(k.as_str(), "tool" | "arguments")) {
        return Err(ExplainError::Shape { why: format!("unknown member {k:?}") });
    }
    let name = call.get("tool").ok_or_else(|| ExplainError::Shape { why: "no \"tool\"".into() })?;
    let mut params = Map::new();
    params.insert("name".into(), name.clone());
    if let Some(a) = call.get("arguments") {
        params.insert("arguments".into(), a.clone());
    }
    let request = tools::call_request_in(policy, Some(Value::Object(params))).map_err(|e| ExplainError::Call { why: e.to_string() })?;
    let mut notes = Vec::new();
    // An upstream's tool: resolved without listing its upstream (issue 35, section 5).
    let (tables, pins) = if tools::is_tool(&request.name) { (None, None) } else { unlisted(policy, &request.name, cx)? };
    if pins.is_some() {
        notes.push("sp mcp lists the upstream first: the tool must be listed, and its definition match its pin".into());
    }
    let call = ToolCall::parse_in(&request, Catalog { upstreams: tables.as_ref() }).map_err(|e| ExplainError::Arguments { why: e.to_string() })?;
    let http = match &call {
        ToolCall::Http(r) => Some(r.clone()),
        ToolCall::HttpGet(g) => Some(g.request().clone()),
        _ => None,
    };
    let base = Explanation {
        tool: request.name.clone(),
        decision: Decision::Deny,
        code: None,
        reason: None,
        rule: None,
        credentials: Vec::new(),
        nearest: None,
        pins,
        notes,
    };
    let action = match tools::authorize(policy, call) {
        Ok(a) => a,
        Err(d) => {
            let nearest = match (&d, &http) {
                (
                    tools::Denial::Http(crate::tools::http::authorize::HttpDenial::NoRule { .. })
                    | tools::Denial::HttpGet(crate::tools::http::authorize::HttpDenial::NoRule { .. }),
                    Some(req),
                ) => nearest(policy, req),
                _ => None,
            };
            return Ok(Explanation { code: Some(d.code().as_str()), reason: Some(d.to_string()), nearest, ..base });
        }
    };
    let mut e = Explanation { rule: rule_of(policy, &action), credentials: credentials_of(policy, &action), ..base };
    if matches!(action, Action::Http(_) | Action::HttpGet(_)) {
        e.notes.push("sp mcp resolves the host when the call runs and refuses addresses it never connects to (SP_BLOCKED)".into());
    }
    // Rate limits come after the policy allowed the call, before approval (server/call.rs).
    let applying = crate::gate::limits::applying(&policy.limits.rules, &crate::tools::subject::subject(&action));
    if let Some(limited) = cx.limits.as_ref().and_then(|s| s.check(&applying, cx.now_ms)) {
        return Ok(Explanation {
            decision: Decision::RateLimited,
            code: Some(crate::gate::outcome::ToolCode::RateLimited.as_str()),
            reason: Some(limited.to_string()),
            ..e
        });
    }
    for r in &applying {
        let used = cx.limits.as_ref().map_or(0, |s| s.used(r, cx.now_ms));
        e.notes.push(format!("limits[{}] ({}): {used} of {} call(s) used in this window", r.index, r.text, r.max));
    }
    e.decision = match action.approval(policy) {
        Some(ask) if policy.approval.mode == Mode::Observe => {
            e.notes.push(format!("approval would be asked for {} (approval.mode observe: not asked)", ask.subject));
            Decision::Allow
        }
        Some(ask) => {
            let who = if ask.only_command { "the approver command only" } else { "approval.via" };
            e.reason = Some(format!("{} asks approval ({who})", ask.subject));
            Decision::Approve
        }
        None => Decision::Allow,
    };
    Ok(e)
}

/// The name table of an upstream tool, made without listing its upstream, and its pin
/// state. The upstream's own name of the tool is the pinned one whose exposed name this
/// is, else the name's tail after `<upstream>_` when that maps back to it.
fn unlisted(policy: &Policy, exposed: &str, cx: &Context) -> Result<(Option<Tables>, Option<String>), ExplainError> {
    use crate::tools::upstream::{exposed_name, upstream_of};
    let Some(upstream) = upstream_of(exposed).filter(|u| policy.upstreams.contains_key(*u)) else {
        return Err(ExplainError::Call { why: format!("unknown tool {exposed:?}") });
    };
    let mode = policy.upstreams.get(upstream).map(|u| u.pin).unwrap_or_default();
    let entry = match &cx.pins {
        Some(Ok(pins)) => pins.get(upstream),
        _ => None,
    };
    let pinned = entry.and_then(|e| e.iter().find(|(tool, _)| exposed_name(upstream, tool) == exposed));
    let tail = exposed.strip_prefix(upstream).and_then(|t| t.strip_prefix('_')).filter(|t| exposed_name(upstream, t) == exposed);
    let Some(tool) = pinned.map(|(t, _)| t.as_str()).or(tail) else {
        return Err(ExplainError::Unresolved { name: exposed.to_owned() });
    };
    // A tool the filter hides is refused by the policy (route.rs) before any pin counts.
    let exposed_by_filter = policy.upstreams.get(upstream).is_some_and(|u| u.tools.exposes(tool));
    let unknown = "unknown: sp explain does not start the upstream".to_owned();
    let withheld = |cause| Some(Withheld { tool: tool.to_owned(), current: unknown.clone(), cause });
    let (state, withheld) = match (mode, &cx.pins, pinned) {
        (PinMode::Off, _, _) => ("not pinned (pin off)".to_owned(), None),
        (_, Some(Err(why)), _) => (format!("the pins file cannot be read ({why}): every tool of {upstream} is withheld"), withheld(Cause::Unreadable)),
        (_, _, Some((_, pin))) => (format!("pinned sha256:{}", pin.sha256), None),
        (PinMode::Strict, _, None) => (format!("not pinned (pin strict): withheld until sp upstream approve {upstream}"), withheld(Cause::Unpinned)),
        (PinMode::FirstUse, _, None) if entry.is_some() => {
            (format!("not pinned, and {upstream} has pins: withheld until sp upstream approve {upstream}"), withheld(Cause::Unpinned))
        }
        (PinMode::FirstUse, _, None) => (format!("not pinned yet: {upstream}'s first listing pins it (pin first-use)"), None),
    };
    let withheld = withheld.filter(|_| exposed_by_filter);
    Ok((Some(Tables::unlisted(upstream, tool, withheld)), Some(state)))
}

/// An `http.allow` rule as `sp check` shows it: methods, hosts, paths, and its approval.
pub(crate) fn http_rule_text(r: &AllowRule) -> String {
    let methods: Vec<&str> = r.methods.iter().map(|m| m.as_str()).collect();
    let hosts: Vec<&str> = r.hosts.iter().map(|h| h.text.as_str()).collect();
    let paths: Vec<String> = r.paths.iter().map(|p| p.text()).collect();
    let approve = match r.approve {
        crate::policy::approval::Approve::No => "",
        crate::policy::approval::Approve::Yes => " approve",
        crate::policy::approval::Approve::Command => " approve=command",
    };
    format!("{} {} {}{approve}", methods.join(","), hosts.join(","), paths.join(","))
}

fn http_rule(r: &AllowRule) -> RuleShown {
    RuleShown { name: format!("http.allow[{}]", r.index), index: Some(r.index), text: Some(http_rule_text(r)) }
}

/// The rule that allowed the action: the `http.allow` rule with its text, else the
/// name the journal records (`ssh.hosts.NAME`, `upstreams.NAME.tools`).
fn rule_of(policy: &Policy, action: &Action) -> Option<RuleShown> {
    if let Action::Http(a) | Action::HttpGet(a) = action {
        return policy.http.allow.iter().find(|r| r.index == a.action().rule_index).map(http_rule);
    }
    action.audit().rule.map(|name| RuleShown { name, index: None, text: None })
}

/// An HTTP credential by name and injection; an upstream's by name (`env` or `url`).
fn credentials_of(policy: &Policy, action: &Action) -> Vec<CredentialShown> {
    if let Action::Http(a) | Action::HttpGet(a) = action {
        return a.action().credential.iter().map(|c| CredentialShown { name: c.name.clone(), scheme: scheme(&c.inject) }).collect();
    }
    let names = action.audit().credential.map(|c| c.split(',').map(str::to_owned).collect::<Vec<_>>()).unwrap_or_default();
    names
        .into_iter()
        .map(|name| {
            let scheme = policy.credentials.get(&name).map_or_else(|| "upstream".to_owned(), |c| scheme(&c.inject));
            CredentialShown { name, scheme }
        })
        .collect()
}

/// How a credential is injected, in the policy's words (no value, no source).
pub(crate) fn scheme(inject: &Injection) -> String {
    match inject {
        Injection::Bearer => "bearer".into(),
        Injection::Basic => "basic".into(),
        Injection::Header { name, .. } => format!("header {name}"),
        Injection::Query { name } => format!("query {name}"),
        Injection::AwsSigV4(_) => "aws_sigv4".into(),
        Injection::OAuth2(_) => "oauth2 (bearer)".into(),
    }
}

/// The `http.allow` rule with the most of host, method and path matching `req`
/// (the first of equals), and why each other part fails. `None` for a policy without
/// rules.
pub(crate) fn nearest(policy: &Policy, req: &HttpRequest) -> Option<Nearest> {
    let failed = |r: &AllowRule| {
        let mut out = Vec::new();
        if !r.hosts.iter().any(|h| h.matches(&req.host, req.port, req.default_port)) {
            let hosts: Vec<&str> = r.hosts.iter().map(|h| h.text.as_str()).collect();
            out.push(("host", format!("{}:{} matches none of {}", req.host, req.port, hosts.join(", "))));
        }
        if !r.methods.contains(&req.method) {
            let methods: Vec<&str> = r.methods.iter().map(|m| m.as_str()).collect();
            out.push(("method", format!("{} is not one of {}", req.method.as_str(), methods.join(", "))));
        }
        if !r.paths.iter().any(|p| p.matches(&req.match_path)) {
            let paths: Vec<String> = r.paths.iter().map(|p| p.text()).collect();
            out.push(("path", format!("{} matches none of {}", req.match_path, paths.join(", "))));
        }
        out
    };
    let best = policy.http.allow.iter().map(|r| (r, failed(r))).min_by_key(|(_, f)| f.len())?;
    Some(Nearest { rule: http_rule(best.0), failed: best.1 })
}

impl Explanation {
    /// The text `sp explain` prints (escaped by the caller).
    pub(crate) fn text(&self) -> String {
        let mut s = match self.code {
            Some(code) => format!("decision: {} ({code})\n", self.decision.as_str()),
            None => format!("decision: {}\n", self.decision.as_str()),
        };
        s += &format!("tool: {}\n", self.tool);
        if let Some(r) = &self.reason {
            s += &format!("reason: {r}\n");
        }
        let rule = |r: &RuleShown| match &r.text {
            Some(t) => format!("{}: {t}", r.name),
            None => r.name.clone(),
        };
        if let Some(r) = &self.rule {
            s += &format!("rule: {}\n", rule(r));
        }
        for c in &self.credentials {
            s += &format!("credential: {} ({})\n", c.name, c.scheme);
        }
        if let Some(n) = &self.nearest {
            s += &format!("nearest rule: {}\n", rule(&n.rule));
            for (part, why) in &n.failed {
                s += &format!("  {part}: {why}\n");
            }
        }
        if let Some(p) = &self.pins {
            s += &format!("pin: {p}\n");
        }
        for n in &self.notes {
            s += &format!("note: {n}\n");
        }
        s
    }

    /// The JSON `sp explain --json` prints (one object).
    pub(crate) fn json(&self) -> Value {
        let rule = |r: &RuleShown| json!({"name": r.name, "index": r.index, "text": r.text});
        json!({
            "tool": self.tool,
            "decision": self.decision.as_str(),
            "code": self.code,
            "reason": self.reason,
            "rule": self.rule.as_ref().map(rule),
            "credentials": self.credentials.iter().map(|c| json!({"name": c.name, "scheme": c.scheme})).collect::<Vec<_>>(),
            "nearest": self.nearest.as_ref().map(|n| json!({
                "rule": rule(&n.rule),
                "failed": n.failed.iter().map(|(part, why)| json!({"part": part, "why": why})).collect::<Vec<_>>(),
            })),
            "pin": self.pins,
            "notes": self.notes,
        })
    }
}

/// One case of `sp test`: `{"call": {...}, "expect": DECISION}`, optionally `"rule": N`
/// (the `http.allow` index that must decide it).
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Case {
    pub call: Value,
    pub expect: Decision,
    pub rule: Option<usize>,
}

/// A case line, checked (unknown members refused, like every input of `sp`).
pub(crate) fn case_of(line: &str) -> Result<Case, String> {
    let v = crate::json::parse(line).map_err(|e| e.to_string())?;
    let Value::Object(m) = v else { return Err("a case is an object {\"call\", \"expect\"}".into()) };
    if let Some(k) = m.keys().find(|k| !matches!(k.as_str(), "call" | "expect" | "rule")) {
        return Err(format!("unknown member {k:?} (a case has call, expect and rule)"));
    }
    let call = m.get("call").cloned().ok_or("no \"call\"")?;
    let expect = m.get("expect").and_then(Value::as_str).and_then(Decision::parse).ok_or("\"expect\" must be allow, deny, approve or rate_limited")?;
    let rule = match m.get("rule") {
        None => None,
        Some(r) => Some(r.as_u64().and_then(|n| usize::try_from(n).ok()).ok_or("\"rule\" must be an http.allow index")?),
    };
    Ok(Case { call, expect, rule })
}

/// Whether `case` holds under `policy`: `Ok(what was decided)` or `Err(why not)`.
pub(crate) fn run_case(policy: &Policy, case: &Case, cx: &Context) -> Result<String, String> {
    let e = explain(policy, &case.call, cx).map_err(|e| e.to_string())?;
    let said = match &e.rule {
        Some(r) => format!("{} by {}", e.decision.as_str(), r.name),
        None => e.decision.as_str().to_owned(),
    };
    if e.decision != case.expect {
        let why = e.reason.map(|r| format!(": {r}")).unwrap_or_default();
        return Err(format!("expected {}, got {said}{why}", case.expect.as_str()));
    }
    if let Some(want) = case.rule {
        let got = e.rule.as_ref().and_then(|r| r.index);
        if got != Some(want) {
            return Err(format!("expected http.allow[{want}], got {said}"));
        }
    }
    Ok(said)
}

/// The report of a case file: one line per case (blank lines and `#` comments skipped),
/// then `N passed, N failed`; whether all passed.
pub(crate) fn run_cases(policy: &Policy, text: &str, cx: &Context) -> (String, bool) {
    let (mut passed, mut failed, mut out) = (0usize, 0usize, String::new());
    for (n, line) in text.lines().enumerate() {
        if line.trim().is_empty() || line.trim_start().starts_with('#') {
            continue;
        }
        let verdict = case_of(line).and_then(|c| run_case(policy, &c, cx));
        let shown = crate::sys::short(line.trim(), 120, crate::sys::Ellipsis::Marked);
        match verdict {
            Ok(said) => {
                passed += 1;
                out += &format!("ok   line {}: {said}: {shown}\n", n + 1);
            }
            Err(why) => {
                failed += 1;
                out += &format!("FAIL line {}: {why}: {shown}\n", n + 1);
            }
        }
    }
    out += &format!("{passed} passed, {failed} failed\n");
    (out, failed == 0)
}

/// What an explanation reads besides the policy: the rate limit counts (read, never
/// written: `Limiter::peek`) and the pins file beside the policy.
pub(crate) fn context(policy: &Policy, env: impl Fn(&str) -> Option<String>) -> Result<Context, ExplainError> {
    let limits = if policy.limits.rules.is_empty() {
        None
    } else {
        match super::limits::location(&policy.limits, env) {
            // Nowhere to count: sp mcp refuses to serve; nothing is counted yet.
            Err(_) => None,
            Ok(path) => Some(crate::gate::limits::Limiter::new(path).peek().map_err(|e| ExplainError::Limits { why: e.to_string() })?),
        }
    };
    let pins = match &policy.origin {
        Some(origin) if !policy.upstreams.is_empty() => {
            let file = crate::tools::upstream::pins::PinFile::new(crate::tools::upstream::pins::beside(origin));
            Some(file.read().map_err(|e| e.to_string()))
        }
        _ => None,
    };
    Ok(Context { limits, now_ms: crate::gate::limits::now_ms(), pins })
}

/// `sp explain` and `sp test`: the report on stdout (escaped, like everything `sp`
/// prints from outside), the exit status (module docs).
pub(crate) fn run(stdout: crate::mcp::out::StdoutHandle, sub: &super::args::ExplainSub, policy: &Policy, env: &super::Env) -> u8 {
    use super::args::ExplainSub;
    use std::io::Write;
    let cx = match context(policy, |k| env.get(k)) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("sp: {e}");
            return EXIT_ERROR;
        }
    };
    let escaped = |s: &str| -> String { s.lines().map(|l| format!("{}\n", crate::escape::escape(l))).collect() };
    let (text, code) = match sub {
        ExplainSub::Help => (super::args::EXPLAIN_USAGE.to_owned(), 0),
        ExplainSub::Explain { call, json } => match call_of(call).and_then(|c| explain(policy, &c, &cx)) {
            Ok(e) if *json => (format!("{}\n", e.json()), e.decision.exit_code()),
            Ok(e) => (escaped(&e.text()), e.decision.exit_code()),
            Err(e) => {
                eprintln!("sp: {}", crate::escape::escape(&e.to_string()));
                return EXIT_ERROR;
            }
        },
        ExplainSub::Test { file } => {
            let text = match std::fs::read(file) {
                Ok(b) => match String::from_utf8(b) {
                    Ok(t) => t,
                    Err(_) => {
                        eprintln!("sp: {}: not UTF-8", crate::escape::escape(&file.display().to_string()));
                        return EXIT_ERROR;
                    }
                },
                Err(e) => {
                    eprintln!("sp: {}: {}", crate::escape::escape(&file.display().to_string()), crate::sys::io_reason(&e));
                    return EXIT_ERROR;
                }
            };
            let (report, all) = run_cases(policy, &text, &cx);
            (escaped(&report), if all { 0 } else { 1 })
        }
    };
    match stdout.into_text().write_all(text.as_bytes()) {
        Ok(()) => code,
        Err(_) => EXIT_ERROR,
    }
}

#[cfg(test)]
mod tests;
