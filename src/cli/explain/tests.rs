//! `sp explain`'s decisions, each the one `sp mcp` makes (the same parse and
//! authorize), and `sp test`'s report.
//!
//! Tried against it, and held: a credential's secret in its file is never in the text
//! or the JSON (the file is never read: a `command` source that would leave a marker
//! file leaves none); an upstream whose command does not exist is explained without
//! being started; a rate limit at its max is reported and nothing is counted (the
//! state is the same after); a call member other than tool/arguments, and a case
//! member other than call/expect/rule, are refused, not ignored.

use std::path::Path;

use serde_json::{json, Value};

use super::*;
use crate::tools::upstream::pins::{Entry, Pin};

fn policy(v: Value) -> Policy {
    Policy::from_text(&v.to_string(), Path::new("test.json")).unwrap()
}

fn http(method: &str, url: &str) -> Value {
    json!({"tool": "http_request", "arguments": {"method": method, "url": url}})
}

fn base(dir: &Path) -> Value {
    let secret = dir.join("token");
    std::fs::write(&secret, "s3cr3t-token-value-1234567890").unwrap();
    let marker = dir.join("ran");
    json!({
        "credentials": {
            "gh": {"source": {"file": secret}, "inject": {"bearer": {}}, "hosts": ["api.github.com"], "paths": ["/repos/acme/*"]},
            "cmd": {"source": {"command": ["/bin/sh", "-c", format!("touch {}; echo x", marker.display())]}, "inject": {"header": {"name": "X-Key"}}, "hosts": ["cmd.example"]}
        },
        "http": {"allow": [
            {"hosts": ["api.github.com"], "methods": ["GET", "POST"], "paths": ["/repos/acme/*", "/user"]},
            {"hosts": ["api.github.com"], "methods": ["DELETE"], "paths": ["/repos/acme/*"], "approve": true},
            {"hosts": ["cmd.example"], "methods": ["GET"], "paths": ["/k/*"]},
            {"hosts": ["*.docs.example.org"], "methods": ["GET"], "paths": ["/a/*"]}
        ]},
        "approval": {"command": ["/nonexistent/sp-test/approver"]}
    })
}

#[test]
fn an_allowed_call_names_its_rule_and_credential_by_name_and_scheme_never_the_value() {
    let dir = tempfile::tempdir().unwrap();
    let p = policy(base(dir.path()));
    let e = explain(&p, &http("GET", "https://api.github.com/repos/acme/app"), &Context::default()).unwrap();
    assert_eq!(e.decision, Decision::Allow);
    assert_eq!(e.rule, Some(RuleShown { name: "http.allow[0]".into(), index: Some(0), text: Some("GET,POST api.github.com /repos/acme/*,/user".into()) }));
    assert_eq!(e.credentials, [CredentialShown { name: "gh".into(), scheme: "bearer".into() }]);
    assert_eq!((e.code, e.nearest.as_ref()), (None, None));
    let shown = format!("{}{}", e.text(), e.json());
    assert!(!shown.contains("s3cr3t"), "{shown}");
    assert!(e.text().contains("credential: gh (bearer)\n"), "{}", e.text());

    let e = explain(&p, &http("GET", "https://cmd.example/k/x"), &Context::default()).unwrap();
    assert_eq!(e.credentials, [CredentialShown { name: "cmd".into(), scheme: "header X-Key".into() }]);
    assert!(!dir.path().join("ran").exists(), "the credential's command ran: explain read a secret");
}

#[test]
fn a_refused_call_names_the_nearest_rule_and_the_parts_that_fail() {
    let dir = tempfile::tempdir().unwrap();
    let p = policy(base(dir.path()));
    // PATCH on a path of rule 0: host and path match rule 0 and 1, the method neither;
    // rule 0 comes first.
    let e = explain(&p, &http("PATCH", "https://api.github.com/repos/acme/app"), &Context::default()).unwrap();
    assert_eq!((e.decision, e.code), (Decision::Deny, Some("SP_DENIED")));
    assert_eq!(e.reason.as_deref(), Some("no http.allow rule permits PATCH api.github.com:443/repos/acme/app"));
    let n = e.nearest.clone().unwrap();
    assert_eq!(n.rule.name, "http.allow[0]");
    assert_eq!(n.failed, [("method", "PATCH is not one of GET, POST".to_owned())]);
    assert_eq!(e.rule, None);
    // Two parts fail on every rule but the docs one, where only the path does.
    let e = explain(&p, &http("GET", "https://x.docs.example.org/b"), &Context::default()).unwrap();
    let n = e.nearest.unwrap();
    assert_eq!(n.rule.name, "http.allow[3]");
    assert_eq!(n.failed, [("path", "/b matches none of /a/*".to_owned())]);
    let json = explain(&p, &http("GET", "https://x.docs.example.org/b"), &Context::default()).unwrap().json();
    assert_eq!(json["nearest"]["failed"], json!([{"part": "path", "why": "/b matches none of /a/*"}]));
    // A refusal of another kind than "no rule" keeps its own reason, and has no nearest.
    let e = explain(&p, &json!({"tool": "http_request", "arguments": {"method": "GET", "url": "http://cmd.example/k/x"}}), &Context::default()).unwrap();
    assert_eq!(e.reason.as_deref(), Some("credential \"cmd\" is only sent over https (or to a loopback address)"));
    assert_eq!(e.nearest, None);
}

#[test]
fn a_rule_that_asks_is_approve_unless_approval_only_observes() {
    let dir = tempfile::tempdir().unwrap();
    let mut v = base(dir.path());
    let p = policy(v.clone());
    let e = explain(&p, &http("DELETE", "https://api.github.com/repos/acme/app"), &Context::default()).unwrap();
    assert_eq!(e.decision, Decision::Approve);
    assert_eq!(e.reason.as_deref(), Some("http.allow[1] asks approval (approval.via)"));
    assert_eq!(e.rule.unwrap().name, "http.allow[1]");
    v["mode"] = json!("observe");
    let e = explain(&policy(v), &http("DELETE", "https://api.github.com/repos/acme/app"), &Context::default()).unwrap();
    assert_eq!(e.decision, Decision::Allow);
    assert!(e.notes.iter().any(|n| n.contains("approval.mode observe: not asked")), "{:?}", e.notes);
}

#[test]
fn a_limit_at_its_max_is_rate_limited_and_nothing_is_counted() {
    let dir = tempfile::tempdir().unwrap();
    let mut v = base(dir.path());
    v["limits"] = json!([{"credential": "gh", "max": 2, "per_s": 60}]);
    let p = policy(v);
    let rule = &p.limits.rules[0];
    let now = 1_000_000;
    let mut state = State::default();
    state.admit(&[rule], now).unwrap();
    let cx = Context { limits: Some(state.clone()), now_ms: now + 1, pins: None };
    let call = http("GET", "https://api.github.com/repos/acme/app");
    let e = explain(&p, &call, &cx).unwrap();
    assert_eq!(e.decision, Decision::Allow);
    assert!(e.notes.iter().any(|n| n.starts_with("limits[0] ") && n.ends_with(": 1 of 2 call(s) used in this window")), "{:?}", e.notes);
    assert_eq!(cx.limits.as_ref(), Some(&state), "explain counted");
    state.admit(&[rule], now).unwrap();
    let cx = Context { limits: Some(state), now_ms: now + 1, pins: None };
    let e = explain(&p, &call, &cx).unwrap();
    assert_eq!((e.decision, e.code), (Decision::RateLimited, Some("SP_RATE_LIMITED")));
    assert!(e.reason.as_deref().unwrap().starts_with("rate limit limits[0] reached: at most 2 call(s) per 60 s"), "{:?}", e.reason);
    assert_eq!(e.decision.exit_code(), EXIT_RATE_LIMITED);
    // A call no rule applies to is not limited.
    assert_eq!(explain(&p, &http("GET", "https://x.docs.example.org/a/b"), &cx).unwrap().decision, Decision::Allow);
}

fn upstream_policy(pin: &str) -> Policy {
    policy(json!({"upstreams": {"gh": {
        "command": ["/nonexistent/sp-test/upstream"],
        "tools": {"allow": ["get_*", "create_issue"], "deny": ["get_secret"], "approve": ["create_*"]},
        "arguments": {"get_file": {"repo": ["acme/*"]}},
        "pin": pin
    }}, "approval": {"command": ["/nonexistent/sp-test/approver"]}}))
}

fn pins(tools: &[&str]) -> Option<Result<Pins, String>> {
    let entry: Entry = tools.iter().map(|t| ((*t).to_owned(), Pin { sha256: "ab".repeat(32), definition: "{}".into() })).collect();
    Some(Ok(Pins::from([("gh".to_owned(), entry)])))
}

fn up(tool: &str, arguments: Value) -> Value {
    json!({"tool": tool, "arguments": arguments})
}

#[test]
fn upstream_tools_are_decided_from_the_policy_and_the_pins_without_starting_the_upstream() {
    let p = upstream_policy("first-use");
    let cx = Context { pins: pins(&["get_file", "create_issue"]), ..Context::default() };
    let e = explain(&p, &up("gh_get_file", json!({"repo": "acme/app"})), &cx).unwrap();
    assert_eq!(e.decision, Decision::Allow);
    assert_eq!(e.rule.as_ref().map(|r| r.name.as_str()), Some("upstreams.gh.tools"));
    assert_eq!(e.pins, Some(format!("pinned sha256:{}", "ab".repeat(32))));
    let e = explain(&p, &up("gh_get_file", json!({"repo": "evil/app"})), &cx).unwrap();
    assert_eq!(e.decision, Decision::Deny);
    assert!(e.reason.as_deref().unwrap().starts_with("gh_get_file: argument \"repo\" is not a value the policy allows"), "{:?}", e.reason);
    let e = explain(&p, &up("gh_get_secret", json!({})), &cx).unwrap();
    assert_eq!((e.decision, e.reason.as_deref()), (Decision::Deny, Some("the policy does not expose gh_get_secret")));
    let e = explain(&p, &up("gh_create_issue", json!({})), &cx).unwrap();
    assert_eq!(e.decision, Decision::Approve);
    // A tool gh has no pin for, while gh has pins: withheld at run time whatever it lists.
    let e = explain(&p, &up("gh_get_tree", json!({})), &cx).unwrap();
    assert_eq!((e.decision, e.code), (Decision::Deny, Some("SP_TOOL_CHANGED")));
    assert!(e.pins.as_deref().unwrap().starts_with("not pinned, and gh has pins"), "{:?}", e.pins);
    // No pins yet under first-use: the first listing pins it; under strict: withheld.
    let none = Context::default();
    assert_eq!(explain(&p, &up("gh_get_tree", json!({})), &none).unwrap().decision, Decision::Allow);
    let strict = upstream_policy("strict");
    let e = explain(&strict, &up("gh_get_tree", json!({})), &none).unwrap();
    assert_eq!((e.decision, e.code), (Decision::Deny, Some("SP_TOOL_CHANGED")));
    let off = upstream_policy("off");
    assert_eq!(explain(&off, &up("gh_get_tree", json!({})), &cx).unwrap().pins.as_deref(), Some("not pinned (pin off)"));
    // An unreadable pins file withholds every tool, as sp mcp does.
    let bad = Context { pins: Some(Err("corrupt".into())), ..Context::default() };
    assert_eq!(explain(&p, &up("gh_get_file", json!({"repo": "acme/x"})), &bad).unwrap().code, Some("SP_TOOL_CHANGED"));
    // A name under no configured upstream is what sp mcp answers -32602.
    assert!(matches!(explain(&p, &up("zz_x", json!({})), &cx), Err(ExplainError::Call { .. })));
}

#[test]
fn a_malformed_call_is_an_error_not_a_decision() {
    let p = Policy::deny_all();
    let e = |v: Value| explain(&p, &v, &Context::default()).unwrap_err();
    assert_eq!(e(json!({"tool": "http_request", "arguments": {}, "x": 1})), ExplainError::Shape { why: "unknown member \"x\"".into() });
    assert_eq!(e(json!({"arguments": {}})), ExplainError::Shape { why: "no \"tool\"".into() });
    assert!(matches!(e(json!({"tool": "http_request", "arguments": {"url": 3}})), ExplainError::Arguments { .. }));
    assert_eq!(explain(&p, &http("GET", "https://a.example/"), &Context::default()).unwrap().decision, Decision::Deny);
    assert!(matches!(call_of("{\"tool\": 1} x"), Err(ExplainError::Shape { .. })));
}

#[test]
fn sp_test_reports_each_case_and_the_totals() {
    let dir = tempfile::tempdir().unwrap();
    let p = policy(base(dir.path()));
    let cases = [
        r#"{"call": {"tool": "http_request", "arguments": {"method": "GET", "url": "https://api.github.com/user"}}, "expect": "allow", "rule": 0}"#,
        "",
        "# a comment",
        r#"{"call": {"tool": "http_request", "arguments": {"method": "GET", "url": "https://api.github.com/user"}}, "expect": "deny"}"#,
        r#"{"call": {"tool": "http_request", "arguments": {"method": "GET", "url": "https://api.github.com/user"}}, "expect": "allow", "rule": 2}"#,
        r#"{"call": {}, "expect": "maybe"}"#,
        r#"{"call": {}, "expect": "allow", "why": 1}"#,
    ]
    .join("\n");
    let (report, all) = run_cases(&p, &cases, &Context::default());
    let lines: Vec<&str> = report.lines().collect();
    assert!(!all);
    assert!(lines[0].starts_with("ok   line 1: allow by http.allow[0]: "), "{report}");
    assert!(lines[1].starts_with("FAIL line 4: expected deny, got allow by http.allow[0]: "), "{report}");
    assert!(lines[2].starts_with("FAIL line 5: expected http.allow[2], got allow by http.allow[0]: "), "{report}");
    assert!(lines[3].starts_with("FAIL line 6: \"expect\" must be allow, deny, approve or rate_limited: "), "{report}");
    assert!(lines[4].starts_with("FAIL line 7: unknown member \"why\""), "{report}");
    assert_eq!(lines[5], "1 passed, 4 failed");
    assert_eq!(lines.len(), 6);
}

/// The shipped golden cases hold against the shipped policy (issue 35, section 2).
#[test]
fn the_example_cases_pass_against_the_example_policy() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let p = Policy::load(&root.join("packaging/policy.example.json")).unwrap();
    let cases = std::fs::read_to_string(root.join("packaging/cases.example.jsonl")).unwrap();
    let (report, all) = run_cases(&p, &cases, &Context::default());
    assert!(all, "{report}");
    assert!(report.ends_with(" passed, 0 failed\n") && !report.starts_with("0 passed"), "{report}");
}
