//! Approval through the channels of `approval.via` (sp-policy(5), APPROVAL), through the
//! built `sp` against a loopback HTTP server: the MCP client's elicitation in the
//! handshake eras (sp's own `elicitation/create` request and the client's response) and
//! in 2026-07-28 (`input_required`, `requestState`, the retry), the fallback to the
//! approver command, grants across two sessions and their expiry, and progress while
//! a call waits.
//!
//! Attacks tried (all held):
//! - a response to an id sp never sent (before any call, and while sp waits on another
//!   id): malformed input, -32600 with `id: null`, the session closes after the call;
//!   the awaited answer still counts only for its own id;
//! - an elicitation answer of the wrong shape (`approve` a string, a grant the form
//!   did not offer): refused, nothing runs (unit tests in `approve/elicit.rs` hold the
//!   whole table);
//! - a subject whose `approve` is `"command"` with an elicitation-capable client: no
//!   elicitation is sent, the approver is asked, and a grant an elicitation made does
//!   not cover it;
//! - 2026-07-28: the retry's `requestState` replayed, edited, moved to other
//!   arguments, or left out with an answer: refused or asked again, nothing runs
//!   without a fresh yes;
//! - a grant after its TTL, and for other arguments: asked again.
#![allow(clippy::disallowed_methods, reason = "tests start sp and approvers and read their environment; the fence in clippy.toml is for src/")]

use crate::support;

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use support::http_server::{Reply, TestServer};
use support::process::{initialize, initialized, tool_call, tool_error_code, Launch, Session, TempDir};

const VERSION: &str = "2025-06-18";
const STATELESS: &str = "2026-07-28";

fn rows(path: &Path) -> Vec<Value> {
    std::fs::read_to_string(path).unwrap_or_default().lines().map(|l| serde_json::from_str(l).unwrap()).collect()
}

fn of_kind(rows: &[Value], kind: &str) -> Vec<Value> {
    rows.iter().filter(|r| r["kind"] == kind).cloned().collect()
}

/// An approver that counts its runs in `<dir>/asked` and prints `out`, then exits `code`.
fn approver(dir: &TempDir, out: &str, code: i32) -> PathBuf {
    let count = dir.join("asked");
    let script = format!("#!/bin/sh\ncat >/dev/null\necho x >> {count}\nprintf '%s\\n' '{out}'\nexit {code}\n");
    dir.file("approver", script.as_bytes(), 0o700)
}

fn asked(dir: &TempDir) -> usize {
    std::fs::read_to_string(dir.join("asked")).map(|s| s.lines().count()).unwrap_or(0)
}

/// A policy with one approve-flagged credential for the server, and `approval`.
fn policy(dir: &TempDir, server: &TestServer, approve: Value, approval: Value) -> (PathBuf, PathBuf) {
    let journal = dir.path.join("audit.jsonl");
    let token = dir.file("api.token", b"not-a-real-secret-approval-channels", 0o600);
    let host = format!("127.0.0.1:{}", server.port);
    let policy = json!({
        "http": {"allow": [{"hosts": [host], "methods": ["GET"], "paths": ["/*"]}]},
        "credentials": {"api": {"source": {"file": token.display().to_string()}, "inject": {"bearer": {}}, "hosts": [host], "paths": ["/v1/*"], "approve": approve}},
        "approval": approval,
        "audit": {"path": journal.display().to_string()}
    });
    (dir.file("policy.json", policy.to_string().as_bytes(), 0o600), journal)
}

fn server() -> TestServer {
    let s = TestServer::start();
    s.route("/v1/x", Reply::json(200, r#"{"ok":true}"#));
    s.route("/v1/y", Reply::json(200, r#"{"ok":true}"#));
    s
}

fn get(server: &TestServer, path: &str) -> Value {
    json!({"method": "GET", "url": format!("{}{path}", server.base())})
}

/// A handshake session whose client declared form elicitation (or not).
fn start(policy: &Path, elicits: bool) -> Session {
    let mut s = Session::start(Launch::mcp(policy, &["-v"]));
    let mut init = initialize(json!(0), VERSION);
    if elicits {
        init["params"]["capabilities"] = json!({"elicitation": {}});
    }
    assert!(s.call(&init)["result"].is_object());
    s.send(&initialized());
    s
}

fn answer(id: &Value, result: Value) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "result": result})
}

fn accept(grant: Option<&str>) -> Value {
    let mut content = json!({"approve": true});
    if let Some(g) = grant {
        content["grant"] = json!(g);
    }
    json!({"action": "accept", "content": content})
}

/// Sends the call, expects sp's `elicitation/create`, answers it with `result`, and
/// returns the elicitation request and the call's result.
fn call_elicited(s: &mut Session, id: i64, args: Value, result: Value) -> (Value, Value) {
    s.send(&tool_call(id, "http_request", args));
    let ask = s.read();
    assert_eq!(ask["method"], "elicitation/create", "{ask}");
    s.send(&answer(&ask["id"], result));
    let done = s.read();
    assert_eq!(done["id"], id, "{done}");
    (ask, done["result"].clone())
}

#[test]
fn an_elicitation_approves_declines_and_is_dismissed() {
    let server = server();
    let dir = TempDir::new("elicit-handshake");
    let (policy, journal) = policy(&dir, &server, json!(true), json!({"via": ["elicitation"]}));
    let mut s = start(&policy, true);
    let (ask, ok) = call_elicited(&mut s, 1, get(&server, "/v1/x"), accept(None));
    assert_eq!(ask["id"], "sp-1");
    assert_eq!(tool_error_code(&ok), None, "{ok}");
    let message = ask["params"]["message"].as_str().unwrap();
    let target = format!("GET http://127.0.0.1:{}/v1/x", server.port);
    assert!(message.contains("tool: http_request") && message.contains(&target) && message.contains("for: api"), "{message}");
    assert_eq!(ask["params"]["requestedSchema"]["required"], json!(["approve"]));
    let (ask, declined) = call_elicited(&mut s, 2, get(&server, "/v1/x"), json!({"action": "decline"}));
    assert_eq!(ask["id"], "sp-2");
    assert_eq!(tool_error_code(&declined), Some("SP_NOT_APPROVED"), "{declined}");
    let (_, dismissed) = call_elicited(&mut s, 3, get(&server, "/v1/x"), json!({"action": "cancel"}));
    assert_eq!(tool_error_code(&dismissed), Some("SP_NOT_APPROVED"), "{dismissed}");
    let (_, malformed) = call_elicited(&mut s, 4, get(&server, "/v1/x"), json!({"action": "accept", "content": {"approve": "true"}}));
    assert_eq!(tool_error_code(&malformed), Some("SP_NOT_APPROVED"), "{malformed}");
    s.finish().assert_exit(0);
    server.settle();
    assert_eq!(server.requests().len(), 1, "only the approved call ran");
    let all = rows(&journal);
    let approvals: Vec<(String, String)> =
        of_kind(&all, "approval").iter().map(|r| (r["decision"].as_str().unwrap().into(), r["channel"].as_str().unwrap().into())).collect();
    let want: Vec<(String, String)> = ["approved", "declined", "dismissed", "refused"].iter().map(|d| (d.to_string(), "elicitation".to_string())).collect();
    assert_eq!(approvals, want, "{all:#?}");
    let rejects: Vec<Value> = of_kind(&all, "reject").iter().map(|r| r["decision"].clone()).collect();
    assert_eq!(rejects, [json!("declined"), json!("dismissed"), json!("not_approved")], "{all:#?}");
}

#[test]
fn a_response_to_an_id_sp_did_not_send_is_malformed() {
    let server = server();
    let dir = TempDir::new("elicit-stray");
    let (policy, journal) = policy(&dir, &server, json!(true), json!({"via": ["elicitation"]}));
    // Before any call: nothing is awaited.
    let mut s = start(&policy, true);
    s.send(&answer(&json!("sp-1"), accept(None)));
    let refused = s.read();
    assert_eq!((refused["id"].clone(), refused["error"]["code"].clone()), (Value::Null, json!(-32600)), "{refused}");
    s.finish().assert_exit(3);
    // While sp waits on sp-1: a response to sp-2 (and one with the id as a number) is
    // not taken; the awaited one is, and the session closes on the stray after the call.
    let mut s = start(&policy, true);
    s.send(&tool_call(1, "http_request", get(&server, "/v1/x")));
    let ask = s.read();
    assert_eq!(ask["id"], "sp-1");
    s.send(&answer(&json!("sp-2"), accept(None)));
    s.send(&answer(&json!(1), accept(None)));
    s.send(&answer(&ask["id"], json!({"action": "decline"})));
    let done = s.read();
    assert_eq!((done["id"].clone(), tool_error_code(&done["result"])), (json!(1), Some("SP_NOT_APPROVED")), "{done}");
    let closed = s.read();
    assert_eq!((closed["id"].clone(), closed["error"]["code"].clone()), (Value::Null, json!(-32600)), "{closed}");
    s.finish().assert_exit(3);
    server.settle();
    assert_eq!(server.requests().len(), 0);
    assert_eq!(of_kind(&rows(&journal), "intent").len(), 0);
}

#[test]
fn without_elicitation_or_when_it_fails_the_command_is_asked() {
    let server = server();
    let dir = TempDir::new("elicit-fallback");
    let approver = approver(&dir, "yes", 0);
    let via = json!({"via": ["elicitation", "command"], "command": [approver.display().to_string()], "timeout_s": 1});
    let (policy, journal) = policy(&dir, &server, json!(true), via);
    // The client declared no elicitation: the command, at once.
    let mut s = start(&policy, false);
    assert_eq!(tool_error_code(&s.tool(1, "http_request", get(&server, "/v1/x"))), None);
    assert_eq!(asked(&dir), 1);
    s.finish().assert_exit(0);
    // It answers elicitation/create with an error (it could not show the form).
    let mut s = start(&policy, true);
    s.send(&tool_call(2, "http_request", get(&server, "/v1/x")));
    let ask = s.read();
    s.send(&json!({"jsonrpc": "2.0", "id": ask["id"], "error": {"code": -32601, "message": "no UI"}}));
    assert_eq!(tool_error_code(&s.read()["result"]), None);
    assert_eq!(asked(&dir), 2);
    // It does not answer within approval.timeout_s: sp cancels its request, then asks
    // the command.
    s.send(&tool_call(3, "http_request", get(&server, "/v1/x")));
    let ask = s.read();
    assert_eq!(ask["method"], "elicitation/create");
    let cancel = s.read();
    assert_eq!((cancel["method"].clone(), cancel["params"]["requestId"].clone()), (json!("notifications/cancelled"), ask["id"].clone()), "{cancel}");
    let done = s.read();
    assert_eq!((done["id"].clone(), tool_error_code(&done["result"])), (json!(3), None), "{done}");
    assert_eq!(asked(&dir), 3);
    s.finish().assert_exit(0);
    let channels: Vec<Value> = of_kind(&rows(&journal), "approval").iter().map(|r| r["channel"].clone()).collect();
    assert_eq!(channels, [json!("command"), json!("command"), json!("command")]);
}

#[test]
fn a_subject_that_requires_the_command_is_never_elicited_and_elicitation_alone_refuses_when_it_cannot_ask() {
    let server = server();
    let dir = TempDir::new("elicit-command-only");
    let approver = approver(&dir, "yes", 0);
    let via = json!({"via": ["elicitation", "command"], "command": [approver.display().to_string()]});
    let (strict, _) = policy(&dir, &server, json!("command"), via);
    let mut s = start(&strict, true);
    // The answer comes with no elicitation/create before it.
    assert_eq!(tool_error_code(&s.tool(1, "http_request", get(&server, "/v1/x"))), None);
    assert_eq!(asked(&dir), 1);
    s.finish().assert_exit(0);
    let dir = TempDir::new("elicit-nobody");
    let (policy, journal) = policy(&dir, &server, json!(true), json!({"via": ["elicitation"]}));
    let mut s = start(&policy, false);
    let refused = s.tool(1, "http_request", get(&server, "/v1/x"));
    assert_eq!(tool_error_code(&refused), Some("SP_NOT_APPROVED"), "{refused}");
    s.finish().assert_exit(0);
    let row = of_kind(&rows(&journal), "approval").pop().unwrap();
    assert_eq!(row["decision"], "unavailable");
    assert_eq!(row["reason"], "nobody could be asked: the client did not declare form elicitation");
}

// ---------------------------------------------------------------------------------------
// 2026-07-28

fn stateless_call(id: i64, args: Value, extra: Value) -> Value {
    let mut params = json!({
        "name": "http_request",
        "arguments": args,
        "_meta": {"io.modelcontextprotocol/protocolVersion": STATELESS, "io.modelcontextprotocol/clientCapabilities": {"elicitation": {}}}
    });
    for (k, v) in extra.as_object().unwrap() {
        params[k] = v.clone();
    }
    json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": params})
}

#[test]
fn stateless_calls_ask_with_input_required_and_check_the_retry() {
    let server = server();
    let dir = TempDir::new("elicit-mrtr");
    let (policy, journal) = policy(&dir, &server, json!(true), json!({"via": ["elicitation"]}));
    let mut s = Session::start(Launch::mcp(&policy, &["-v"]));
    let first = s.call(&stateless_call(1, get(&server, "/v1/x"), json!({})));
    let r = &first["result"];
    assert_eq!(r["resultType"], "input_required", "{first}");
    assert_eq!(r["inputRequests"]["approval"]["method"], "elicitation/create");
    assert!(r["inputRequests"]["approval"]["params"]["message"].as_str().unwrap().contains("tool: http_request"));
    let state = r["requestState"].clone();
    let yes = json!({"approval": accept(None)});
    // The retry: a new id, the same call, the answer and the state.
    let ok = s.call(&stateless_call(2, get(&server, "/v1/x"), json!({"inputResponses": yes, "requestState": state})));
    assert_eq!((ok["result"]["resultType"].clone(), tool_error_code(&ok["result"])), (json!("complete"), None), "{ok}");
    // The same state again: used up.
    let again = s.call(&stateless_call(3, get(&server, "/v1/x"), json!({"inputResponses": yes, "requestState": state})));
    assert_eq!(tool_error_code(&again["result"]), Some("SP_NOT_APPROVED"), "{again}");
    // Moved to other arguments, or edited: not this call's.
    let first = s.call(&stateless_call(4, get(&server, "/v1/x"), json!({})));
    let state = first["result"]["requestState"].clone();
    let moved = s.call(&stateless_call(5, get(&server, "/v1/y"), json!({"inputResponses": yes, "requestState": state})));
    assert_eq!(tool_error_code(&moved["result"]), Some("SP_NOT_APPROVED"), "{moved}");
    let edited = state.as_str().unwrap().replacen("1.", "1.9", 1);
    let edited = s.call(&stateless_call(6, get(&server, "/v1/x"), json!({"inputResponses": yes, "requestState": edited})));
    assert_eq!(tool_error_code(&edited["result"]), Some("SP_NOT_APPROVED"), "{edited}");
    // An answer without a state is no answer: asked again.
    let bare = s.call(&stateless_call(7, get(&server, "/v1/x"), json!({"inputResponses": yes})));
    assert_eq!(bare["result"]["resultType"], "input_required", "{bare}");
    // A decline on the retry.
    let state = bare["result"]["requestState"].clone();
    let no = s.call(&stateless_call(8, get(&server, "/v1/x"), json!({"inputResponses": {"approval": {"action": "decline"}}, "requestState": state})));
    assert_eq!(tool_error_code(&no["result"]), Some("SP_NOT_APPROVED"), "{no}");
    s.finish().assert_exit(0);
    server.settle();
    assert_eq!(server.requests().len(), 1, "only the approved retry ran");
    let decisions: Vec<Value> = of_kind(&rows(&journal), "approval").iter().map(|r| r["decision"].clone()).collect();
    let want = ["asked", "approved", "refused", "asked", "refused", "refused", "asked", "declined"];
    assert_eq!(decisions, want.map(|d| json!(d)));
}

// ---------------------------------------------------------------------------------------
// Grants

#[test]
fn a_grant_covers_the_same_call_in_another_session_until_it_expires() {
    let server = server();
    let dir = TempDir::new("grants-two-sessions");
    let approver = approver(&dir, r#"{"grant": "exact", "ttl_s": 3}"#, 0);
    let grants = dir.join("grants.json");
    let approval = json!({"command": [approver.display().to_string()], "grants": {"exact_max_s": 2, "path": grants}});
    let (policy, journal) = policy(&dir, &server, json!(true), approval);
    let mut s = start(&policy, false);
    let started = Instant::now();
    assert_eq!(tool_error_code(&s.tool(1, "http_request", get(&server, "/v1/x"))), None);
    assert_eq!(asked(&dir), 1);
    s.finish().assert_exit(0);
    // Another sp process: the same call runs without asking; other arguments ask.
    let mut s = start(&policy, false);
    assert_eq!(tool_error_code(&s.tool(1, "http_request", get(&server, "/v1/x"))), None);
    assert_eq!(asked(&dir), 1, "the grant was not used");
    assert_eq!(tool_error_code(&s.tool(2, "http_request", get(&server, "/v1/y"))), None);
    assert_eq!(asked(&dir), 2);
    // After its TTL (cut to the operator's 2 s): asked again.
    std::thread::sleep(Duration::from_secs(3).saturating_sub(started.elapsed()));
    assert_eq!(tool_error_code(&s.tool(3, "http_request", get(&server, "/v1/x"))), None);
    assert_eq!(asked(&dir), 3);
    s.finish().assert_exit(0);
    let all = of_kind(&rows(&journal), "approval");
    let made = all[0]["grant"].as_str().expect("the first approval names its grant").to_owned();
    assert_eq!((all[1]["decision"].clone(), all[1]["grant"].clone()), (json!("granted"), json!(made)), "{all:#?}");
    assert!(all[0]["reason"].as_str().unwrap().contains("exact grant"), "{all:#?}");
    let run = support::process::run_sp(&["approve", "list", "--json", "--config", policy.to_str().unwrap()], &[], b"");
    run.assert_exit(0);
}

#[test]
fn an_elicitation_grant_does_not_cover_a_subject_that_requires_the_command() {
    let server = server();
    let dir = TempDir::new("grants-elicit");
    let approver = approver(&dir, "no", 1);
    let grants = dir.join("grants.json");
    let approval = json!({"via": ["elicitation", "command"], "command": [approver.display().to_string()], "grants": {"session_max_s": 600, "path": grants}});
    let (policy, _) = policy(&dir, &server, json!(true), approval);
    // A second credential for the same host that requires the approver command.
    let mut p: Value = serde_json::from_str(&std::fs::read_to_string(&policy).unwrap()).unwrap();
    let mut strict = p["credentials"]["api"].clone();
    strict["approve"] = json!("command");
    p["credentials"]["strict"] = strict;
    let policy = dir.file("policy.json", p.to_string().as_bytes(), 0o600);
    let mut s = start(&policy, true);
    let with = |cred: &str, path: &str| {
        let mut a = get(&server, path);
        a["credential"] = json!(cred);
        a
    };
    let (ask, ok) = call_elicited(&mut s, 1, with("api", "/v1/x"), accept(Some("session")));
    assert_eq!(ask["params"]["requestedSchema"]["properties"]["grant"]["enum"], json!(["once", "session"]));
    assert_eq!(tool_error_code(&ok), None);
    // The session grant covers another call under this policy: no elicitation now.
    assert_eq!(tool_error_code(&s.tool(2, "http_request", with("api", "/v1/y"))), None);
    s.finish().assert_exit(0);
    // In another session, a call with the command-only credential: the grant an
    // elicitation made does not cover it, the approver is asked (and says no).
    let mut s = start(&policy, true);
    assert_eq!(tool_error_code(&s.tool(3, "http_request", with("strict", "/v1/x"))), Some("SP_NOT_APPROVED"));
    assert_eq!(asked(&dir), 1, "the approver command was asked");
    assert_eq!(tool_error_code(&s.tool(4, "http_request", with("api", "/v1/x"))), None);
    s.finish().assert_exit(0);
    server.settle();
    assert_eq!(server.requests().len(), 3);
}

// ---------------------------------------------------------------------------------------
// Progress

/// A client that resets its timeout on progress keeps waiting through an approval
/// longer than the timeout: notifications come at most 5 s apart while the approver
/// thinks (the real-time 60 s / 90 s run is `tests/interop/ts_client.mjs`,
/// `SP_INTEROP_LONG=1`).
#[test]
fn progress_is_sent_while_the_approver_is_asked() {
    let server = server();
    let dir = TempDir::new("approval-progress");
    let approver = dir.file("approver", b"#!/bin/sh\ncat >/dev/null\nsleep 11\nexit 0\n", 0o700);
    let (policy, _) = policy(&dir, &server, json!(true), json!({"command": [approver.display().to_string()], "timeout_s": 30}));
    let mut s = start(&policy, false);
    let mut call = tool_call(1, "http_request", get(&server, "/v1/x"));
    call["params"]["_meta"] = json!({"progressToken": "p1"});
    let started = Instant::now();
    s.send(&call);
    let mut last = started;
    let mut notes = Vec::new();
    let done = loop {
        let m = s.read();
        let gap = last.elapsed();
        last = Instant::now();
        // The scaled client: a 7 s timeout, reset on each progress notification.
        assert!(gap < Duration::from_secs(7), "{} s without progress", gap.as_secs());
        if m["method"] == "notifications/progress" {
            notes.push(m);
        } else {
            break m;
        }
    };
    assert_eq!((done["id"].clone(), tool_error_code(&done["result"])), (json!(1), None), "{done}");
    assert!(notes.len() >= 2, "{notes:#?}");
    let first = &notes[0]["params"];
    assert_eq!(first["progressToken"], "p1");
    assert!(first["message"].as_str().unwrap().starts_with("waiting for approval from the operator's approver"), "{first}");
    let counts: Vec<u64> = notes.iter().map(|n| n["params"]["progress"].as_u64().unwrap()).collect();
    assert!(counts.windows(2).all(|w| w[0] < w[1]), "{counts:?}");
    s.finish().assert_exit(0);
}

/// Issue 32, section 1: "GET free, POST asks" with one credential: `"approve": true` on
/// an allow rule. The GET runs unasked; the POST asks the approver (subject: the rule,
/// since the credential that travels with it asks nothing itself), and its no keeps it
/// from the server; a POST with no credential is asked too. A free GET that a server redirects
/// to a path a rule asks for is not followed (the approval covered no hop).
///
/// Attacks tried (all held): the asking rule listed after a broader free one (any
/// permitting rule that asks makes the call ask); a redirect hop into the asking
/// rule's paths (not followed, the 3xx is returned).
#[test]
fn an_allow_rule_with_approve_asks_for_its_calls_only() {
    let dir = TempDir::new("rule-approve");
    let server = server();
    server.route("/v1/post", Reply::json(200, r#"{"posted":true}"#));
    server.route("/open/hop", Reply { status: 307, headers: vec![("Location".into(), "/asks/landing".into())], body: vec![], delay_ms: 0 });
    server.route("/asks/landing", Reply::json(200, r#"{"landed":true}"#));
    let journal = dir.path.join("audit.jsonl");
    let token = dir.file("api.token", b"not-a-real-secret-rule-approve", 0o600);
    let host = format!("127.0.0.1:{}", server.port);
    // Records who it was asked about, one line per question, and says no.
    let subjects = dir.join("subjects");
    let approver =
        dir.file("approver", format!("#!/bin/sh\ncat >/dev/null\nprintf '%s\\n' \"$SP_APPROVAL_SUBJECT\" >> {subjects}\nexit 1\n").as_bytes(), 0o700);
    let asked = || std::fs::read_to_string(&subjects).unwrap_or_default().lines().map(str::to_owned).collect::<Vec<_>>();
    let policy = json!({
        "http": {"allow": [
            {"hosts": [host], "methods": ["GET", "POST"], "paths": ["/v1/x", "/open/*"]},
            {"hosts": [host], "methods": ["GET"], "paths": ["/v1/*"]},
            {"hosts": [host], "methods": ["POST"], "paths": ["/v1/*", "/open/*"], "approve": true},
            {"hosts": [host], "methods": ["GET"], "paths": ["/asks/*"], "approve": true}
        ]},
        "credentials": {"api": {"source": {"file": token.display().to_string()}, "inject": {"bearer": {}}, "hosts": [host], "paths": ["/v1/*"]}},
        "approval": {"command": [approver.display().to_string()], "timeout_s": 20},
        "audit": {"path": journal.display().to_string()}
    });
    let policy = dir.file("policy.json", policy.to_string().as_bytes(), 0o600);
    let mut s = Session::start(Launch::mcp(&policy, &[]));
    s.ready(VERSION);
    let r = s.tool(1, "http_request", get(&server, "/v1/y"));
    assert_eq!((tool_error_code(&r), asked()), (None, vec![]), "a free GET runs unasked: {r}");
    let r = s.tool(2, "http_request", json!({"method": "POST", "url": format!("{}/v1/post", server.base()), "body": "{}"}));
    // The rule asks (the credential does not): the question names the rule.
    assert_eq!((tool_error_code(&r), asked()), (Some("SP_NOT_APPROVED"), vec!["http.allow[2]".to_owned()]), "{r}");
    // Listed after a broader free rule (rule 0 permits POST /v1/x): still asked.
    let r = s.tool(3, "http_request", json!({"method": "POST", "url": format!("{}/v1/x", server.base())}));
    assert_eq!((tool_error_code(&r), asked().len()), (Some("SP_NOT_APPROVED"), 2), "{r}");
    // No credential travels: asked about the rule as well.
    let r = s.tool(5, "http_request", json!({"method": "POST", "url": format!("{}/open/z", server.base())}));
    assert_eq!((tool_error_code(&r), asked().last().cloned()), (Some("SP_NOT_APPROVED"), Some("http.allow[2]".to_owned())), "{r}");
    // A free GET redirected into /asks/*: the 307 comes back, the hop is not followed.
    let r = s.tool(4, "http_request", get(&server, "/open/hop"));
    assert_eq!((tool_error_code(&r), r["structuredContent"]["status"].clone(), asked().len()), (None, json!(307), 3), "{r}");
    assert!(r["structuredContent"]["redirect_refused"] == true, "{r}");
    s.finish().assert_exit(0);
    server.settle();
    let paths: Vec<String> = server.requests().iter().map(|q| format!("{} {}", q.method, q.target)).collect();
    assert_eq!(paths, ["GET /v1/y", "GET /open/hop"], "only the free calls reached the server");
    let approvals = of_kind(&rows(&journal), "approval");
    let decisions: Vec<(&str, &str)> = approvals.iter().map(|r| (r["rule"].as_str().unwrap_or(""), r["decision"].as_str().unwrap())).collect();
    assert_eq!(decisions, [("http.allow[2]", "refused"), ("http.allow[0]", "refused"), ("http.allow[0]", "refused")], "{approvals:?}");
}
