//! An upstream's `elicitation/create` relayed to the agent's client through the real
//! `sp mcp` binary (issue 33, section 3), against a fixture of our own that asks during
//! its tool calls (`tests/support/upstreams/elicit.py`), and against the published
//! server-everything's URL and form requests (`server_everything_asks_through_the_gate`).
//!
//! Attacks tried (all held):
//! - an upstream whose policy has no `elicitation` asking for a form during its call:
//!   -32601 to the upstream, the client never asked, an `elicitation` row `refused`;
//! - a field named `Pass_Word`, a field with `format: password`, a field titled in
//!   full-width letters `ＴＯＫＥＮ`: -32602 naming the field, the client never asked;
//! - an elicitation sent after the upstream answered its call (no call running): -32601,
//!   never relayed, not even during the next call of that upstream (sp reads what came
//!   between calls first);
//! - URL mode to a host that only starts with a listed one
//!   (`login.example.com.evil.example`) and to a listed name used as userinfo
//!   (`login.example.com@evil.example`): -32602, the client never asked;
//! - `sampling/createMessage` and `roots/list` during a call: -32601;
//! - the declared capabilities: sp tells the upstream only the modes its policy relays.
//! - a 2026-07-28 request whose `_meta` declares form elicitation: -32601 (stdio carries
//!   no request of sp's in that revision);
//! - the agent cancelling the call while the user is asked: the call is never answered,
//!   the upstream gets -32603, no late answer closes the session, the next call relays.
#![allow(clippy::disallowed_methods, reason = "tests start sp and read their environment; the fence in clippy.toml is for src/")]

use crate::support;

use std::path::{Path, PathBuf};

use serde_json::{json, Value};

use support::process::{initialize, initialized, tool_call, Launch, Session, TempDir};

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn python() -> String {
    ["/usr/bin/python3", "/usr/local/bin/python3"].iter().find(|p| Path::new(p).exists()).map_or("python3".into(), |p| p.to_string())
}

fn fixture() -> Value {
    let script = root().join("tests/support/upstreams/elicit.py").display().to_string();
    json!({"command": [python(), script], "sandbox": {"read": support::upstream_read_paths()}, "tools": {"allow": ["*"]}, "pin": "off"})
}

/// A 2025-11-25 session whose client declared form and URL elicitation; `forms` relays
/// both (URLs to login.example.com), `plain` nothing.
fn start(dir: &TempDir) -> Session {
    let mut forms = fixture();
    forms["elicitation"] = json!({"form": true, "url_hosts": ["login.example.com"]});
    let policy = json!({"upstreams": {"forms": forms, "plain": fixture()}, "audit": {"path": dir.join("audit.jsonl")}});
    let config = dir.file("policy.json", policy.to_string().as_bytes(), 0o600);
    let mut s = Session::start(Launch::mcp(&config, &["-v"]));
    let mut init = initialize(json!(0), "2025-11-25");
    init["params"]["capabilities"] = json!({"elicitation": {"form": {}, "url": {}}});
    assert!(s.call(&init)["result"].is_object());
    s.send(&initialized());
    s
}

/// The fixture's report in a tool result: what came back for each request it sent.
fn got(result: &Value) -> Value {
    assert_eq!(result["isError"], false, "{result}");
    serde_json::from_str(result["content"][0]["text"].as_str().unwrap()).unwrap()
}

/// Calls `tool` and returns the call's result; an `elicitation/create` sp sends
/// meanwhile is answered with `answer` (and returned), at most one.
fn call(s: &mut Session, id: i64, tool: &str, args: Value, answer: Option<Value>) -> (Option<Value>, Value) {
    s.send(&tool_call(id, tool, args));
    let mut asked = None;
    loop {
        let m = s.read_for(&format!("the answer to {tool} or sp's elicitation/create"));
        if m["id"] == id {
            return (asked, m["result"].clone());
        }
        if m["method"] == "elicitation/create" {
            assert!(asked.is_none(), "asked twice: {m}");
            let reply = answer.clone().unwrap_or_else(|| panic!("sp relayed an elicitation it must not: {m}"));
            s.send(&json!({"jsonrpc": "2.0", "id": m["id"], "result": reply}));
            asked = Some(m);
            continue;
        }
        assert!(m.get("id").is_none(), "an answer to another id: {m}");
    }
}

/// The journal's `elicitation` rows as (decision, tool), in order.
fn elicitation_rows(dir: &TempDir) -> Vec<(String, String)> {
    let journal = std::fs::read_to_string(dir.join("audit.jsonl")).unwrap();
    journal
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .filter(|r| r["kind"] == "elicitation")
        .map(|r| (r["decision"].as_str().unwrap().to_owned(), r["tool"].as_str().unwrap().to_owned()))
        .collect()
}

fn error_of(report: &Value, i: usize) -> (i64, String) {
    let e = &report["got"][i]["error"];
    (e["code"].as_i64().unwrap_or_else(|| panic!("no error: {report}")), e["message"].as_str().unwrap().to_owned())
}

#[test]
fn an_allowed_form_reaches_the_client_with_the_upstream_named_and_its_answer_goes_back() {
    let dir = TempDir::new("upelicit-ok");
    let mut s = start(&dir);
    let accept = json!({"action": "accept", "content": {"colour": "red"}, "_meta": {"client": "x"}});
    let (asked, result) = call(&mut s, 1, "forms_ask", json!({"case": "ok"}), Some(accept));
    let asked = asked.expect("sp relayed the form");
    assert_eq!(asked["params"]["message"], "[sp: the upstream MCP server \"forms\" asks] Which colour?", "{asked}");
    assert_eq!(asked["params"]["requestedSchema"]["properties"]["colour"]["enum"], json!(["red", "blue"]));
    assert!(asked["id"].as_str().unwrap().starts_with("sp-"), "sp's own id, never the upstream's: {asked}");
    // What goes back is what was asked for, nothing else (`_meta` dropped).
    assert_eq!(got(&result), json!({"got": [{"result": {"action": "accept", "content": {"colour": "red"}}}]}));

    // A decline passes back as a decline.
    let (_, result) = call(&mut s, 2, "forms_ask", json!({"case": "ok"}), Some(json!({"action": "decline"})));
    assert_eq!(got(&result), json!({"got": [{"result": {"action": "decline"}}]}));
    // An answer with a field the form did not ask for: the upstream gets -32603.
    let (_, result) = call(&mut s, 3, "forms_ask", json!({"case": "ok"}), Some(json!({"action": "accept", "content": {"colour": "red", "extra": "x"}})));
    assert_eq!(error_of(&got(&result), 0), (-32603, "sp did not relay elicitation/create: the client's answer holds a field that was not asked for".into()));

    // The capabilities sp declared to the upstream: the modes its policy relays.
    let (_, result) = call(&mut s, 4, "forms_report", json!({}), None);
    assert_eq!(got(&result)["caps"], json!({"elicitation": {"form": {}, "url": {}}}));
    let (_, result) = call(&mut s, 5, "plain_report", json!({}), None);
    assert_eq!(got(&result)["caps"], json!({}));
    drop(s.finish());
    let rows = elicitation_rows(&dir);
    let want = [("accept", "forms_ask"), ("decline", "forms_ask"), ("refused", "forms_ask")].map(|(d, t)| (d.to_owned(), t.to_owned()));
    assert_eq!(rows, want);
}

#[test]
fn refused_elicitations_never_reach_the_client() {
    let dir = TempDir::new("upelicit-no");
    let mut s = start(&dir);
    // Not allowed for this upstream.
    let (_, result) = call(&mut s, 1, "plain_ask", json!({"case": "ok"}), None);
    assert_eq!(
        error_of(&got(&result), 0),
        (-32601, "sp did not relay elicitation/create: the policy relays no form elicitation from this upstream (upstreams.NAME.elicitation)".into())
    );
    // Secret-looking fields, however spelled.
    for (id, case, want) in [
        (2, "password", "field \"Pass_Word\" looks like it asks for a secret (\"pass\")"),
        (3, "format", "field \"v\" is a password field"),
        (4, "title", "field \"v\".title looks like it asks for a secret (\"token\")"),
    ] {
        let (_, result) = call(&mut s, id, "forms_ask", json!({"case": case}), None);
        let (code, message) = error_of(&got(&result), 0);
        assert_eq!(code, -32602, "{case}: {message}");
        assert!(message.starts_with(&format!("sp did not relay elicitation/create: {want}")), "{case}: {message}");
    }
    // URL mode: only the listed host.
    for (id, case, want) in [
        (5, "url_evil", "the url's host login.example.com.evil.example is not in upstreams.NAME.elicitation.url_hosts"),
        (6, "url_user", "the url must hold no user or password"),
    ] {
        let (_, result) = call(&mut s, id, "forms_ask", json!({"case": case}), None);
        assert_eq!(error_of(&got(&result), 0), (-32602, format!("sp did not relay elicitation/create: {want}")), "{case}");
    }
    // Sampling and roots stay refused.
    let (_, result) = call(&mut s, 7, "forms_ask", json!({"case": "sampling"}), None);
    let report = got(&result);
    assert_eq!(error_of(&report, 0), (-32601, "sp does not offer sampling/createMessage to upstreams".into()));
    assert_eq!(error_of(&report, 1), (-32601, "sp does not offer roots/list to upstreams".into()));
    // Outside a call: sent after the answer, refused, and not relayed during the next call.
    let (_, result) = call(&mut s, 8, "forms_late", json!({}), None);
    assert_eq!(got(&result), json!({"late": "sent"}));
    let (_, result) = call(&mut s, 9, "forms_report", json!({}), None);
    let late = &got(&result)["late"]["error"];
    assert_eq!(late["code"], -32601, "{result}");
    assert!(late["message"].as_str().unwrap().contains("only while a tools/call of that upstream runs"), "{late}");
    drop(s.finish());
    let journal = std::fs::read_to_string(dir.join("audit.jsonl")).unwrap();
    let refused =
        journal.lines().map(|l| serde_json::from_str::<Value>(l).unwrap()).filter(|r| r["kind"] == "elicitation" && r["decision"] == "refused").count();
    assert_eq!(refused, 6, "one row for each refused during a call: {journal}");
}

#[test]
fn a_listed_url_reaches_a_client_that_declared_url_mode() {
    let dir = TempDir::new("upelicit-url");
    let mut s = start(&dir);
    let (asked, result) = call(&mut s, 1, "forms_ask", json!({"case": "url_ok"}), Some(json!({"action": "accept"})));
    let asked = asked.expect("sp relayed the URL");
    assert_eq!(asked["params"]["mode"], "url");
    assert_eq!(asked["params"]["url"], "https://login.example.com/authorize?state=1");
    assert_eq!(asked["params"]["elicitationId"], "el-1");
    assert_eq!(asked["params"]["message"], "[sp: the upstream MCP server \"forms\" asks] Sign in");
    assert_eq!(got(&result), json!({"got": [{"result": {"action": "accept"}}]}));
    drop(s.finish());
}

#[test]
fn a_client_without_elicitation_is_never_asked() {
    let dir = TempDir::new("upelicit-noclient");
    let mut forms = fixture();
    forms["elicitation"] = json!({"form": true});
    let policy = json!({"upstreams": {"forms": forms}});
    let config = dir.file("policy.json", policy.to_string().as_bytes(), 0o600);
    let mut s = Session::start(Launch::mcp(&config, &[]));
    s.ready("2025-11-25");
    let (_, result) = call(&mut s, 1, "forms_ask", json!({"case": "ok"}), None);
    assert_eq!(
        error_of(&got(&result), 0),
        (-32601, "sp did not relay elicitation/create: the agent's client cannot be asked for form elicitation in this session".into())
    );
    drop(s.finish());
}

#[test]
fn a_stateless_request_never_relays() {
    // 2026-07-28: no request of sp's can reach the client on stdio, whatever it declares.
    let dir = TempDir::new("upelicit-stateless");
    let mut forms = fixture();
    forms["elicitation"] = json!({"form": true});
    let policy = json!({"upstreams": {"forms": forms}});
    let config = dir.file("policy.json", policy.to_string().as_bytes(), 0o600);
    let mut s = Session::start(Launch::mcp(&config, &[]));
    let meta = json!({"io.modelcontextprotocol/protocolVersion": "2026-07-28", "io.modelcontextprotocol/clientCapabilities": {"elicitation": {"form": {}}}});
    let answer =
        s.call(&json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "forms_ask", "arguments": {"case": "ok"}, "_meta": meta}}));
    assert_eq!(
        error_of(&got(&answer["result"]), 0),
        (-32601, "sp did not relay elicitation/create: the agent's client cannot be asked for form elicitation in this session".into()),
        "{answer}"
    );
    drop(s.finish());
}

#[test]
fn a_call_cancelled_while_the_user_is_asked_is_not_answered_and_the_session_goes_on() {
    let dir = TempDir::new("upelicit-cancel");
    let mut s = start(&dir);
    s.send(&tool_call(1, "forms_ask", json!({"case": "ok"})));
    let asked = s.read_for("sp's elicitation/create");
    assert_eq!(asked["method"], "elicitation/create", "{asked}");
    s.send(&json!({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 1, "reason": "user gave up"}}));
    // Never answered: `call` below fails on any message for id 1 (and on a second
    // elicitation/create, which it does not expect).
    let pong = s.call(&json!({"jsonrpc": "2.0", "id": 2, "method": "ping"}));
    assert_eq!(pong["result"], json!({}));
    // The upstream and the session still work: the next call relays again.
    let (again, result) = call(&mut s, 3, "forms_ask", json!({"case": "ok"}), Some(json!({"action": "cancel"})));
    assert!(again.is_some());
    assert_eq!(got(&result), json!({"got": [{"result": {"action": "cancel"}}]}));
    drop(s.finish());
    let journal = std::fs::read_to_string(dir.join("audit.jsonl")).unwrap();
    let decisions: Vec<String> = journal
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .filter(|r| r["kind"] == "elicitation")
        .map(|r| format!("{} {}", r["decision"].as_str().unwrap(), r["reason"].as_str().unwrap()))
        .collect();
    assert_eq!(decisions, ["failed the client gave no answer: the call was cancelled", "cancel form elicitation from upstream forms relayed"]);
}

/// The published server-everything (`make upstreams`), whose elicitation tools it
/// registers only for a client that can be asked (so a policy without `elicitation`,
/// `mute`, lists neither):
/// - `trigger-url-elicitation` asks the user to open an address the agent names: a
///   listed host reaches the client with the upstream named and the answer goes back;
///   a host that only starts with the listed one is refused, the client never asked;
/// - `trigger-elicitation-request` asks a form whose "integer" field says "do not give
///   us your phone number, pin, or other sensitive info": sp reads descriptions too, so
///   that form is refused as one asking for a secret (strict on purpose: a field named
///   `code` described as "your PIN" is the same words), journaled, the client never asked.
#[test]
fn server_everything_asks_through_the_gate() {
    let js = root().join("tests/upstreams/node_modules/@modelcontextprotocol/server-everything/dist/index.js");
    if !js.exists() {
        assert!(std::env::var_os("CI").is_none(), "{} is not installed under CI", js.display());
        eprintln!("SKIPPED: {} is not installed; run `make upstreams`", js.display());
        return;
    }
    let dir = TempDir::new("upelicit-ev");
    let everything = |elicit: bool| {
        let mut u = json!({"command": ["node", js.display().to_string(), "stdio"], "sandbox": {"read": support::upstream_read_paths()},
                           "pin": "off", "tools": {"allow": ["trigger-elicitation-request", "trigger-url-elicitation"]}, "startup_timeout_s": 30});
        if elicit {
            u["elicitation"] = json!({"form": true, "url_hosts": ["login.example.com"]});
        }
        u
    };
    let policy = json!({"upstreams": {"ev": everything(true), "mute": everything(false)}, "audit": {"path": dir.join("audit.jsonl")}});
    let config = dir.file("policy.json", policy.to_string().as_bytes(), 0o600);
    let mut s = Session::start(Launch::mcp(&config, &[]));
    let mut init = initialize(json!(0), "2025-11-25");
    init["params"]["capabilities"] = json!({"elicitation": {"form": {}, "url": {}}});
    assert!(s.call(&init)["result"].is_object());
    s.send(&initialized());
    let listed = s.call(&json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}));
    let mut names: Vec<&str> = listed["result"]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|t| t["name"].as_str())
        .filter(|n| n.starts_with("ev_") || n.starts_with("mute_"))
        .collect();
    names.sort_unstable();
    assert_eq!(names, vec!["ev_trigger-elicitation-request", "ev_trigger-url-elicitation"], "{listed}");

    let url = "https://login.example.com/device?code=ABCD";
    let (asked, result) = call(&mut s, 2, "ev_trigger-url-elicitation", json!({"url": url, "message": "Sign in"}), Some(json!({"action": "accept"})));
    let asked = asked.unwrap_or_else(|| panic!("sp did not relay server-everything's URL: {result}"));
    assert_eq!(asked["params"]["mode"], "url", "{asked}");
    assert_eq!(asked["params"]["url"], url, "{asked}");
    assert_eq!(asked["params"]["message"], "[sp: the upstream MCP server \"ev\" asks] Sign in", "{asked}");
    assert_eq!(result["isError"], false, "{result}");
    assert!(result["content"].to_string().contains(url), "{result}");

    let (asked, result) =
        call(&mut s, 3, "ev_trigger-url-elicitation", json!({"url": "https://login.example.com.evil.example/x", "message": "Sign in"}), None);
    assert!(asked.is_none());
    assert!(result.to_string().contains("sp did not relay elicitation/create"), "{result}");

    let (asked, result) = call(&mut s, 4, "ev_trigger-elicitation-request", json!({}), None);
    assert!(asked.is_none());
    assert_eq!(result["isError"], true, "{result}");
    assert!(result.to_string().contains(r#"field \"integer\".description looks like it asks for a secret (\"pin\")"#), "{result}");
    drop(s.finish());
    let rows = elicitation_rows(&dir);
    let want = [("accept", "ev_trigger-url-elicitation"), ("refused", "ev_trigger-url-elicitation"), ("refused", "ev_trigger-elicitation-request")];
    assert_eq!(rows, want.map(|(d, t)| (d.to_owned(), t.to_owned())));
}
