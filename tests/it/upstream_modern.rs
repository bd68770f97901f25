//! An upstream spoken to in MCP 2026-07-28 (stateless, MRTR) through the real `sp mcp`
//! binary (issue 33, section 4), for a policy that says `"protocol": "2026-07-28"`,
//! against a fixture of our own that speaks only that revision
//! (`tests/support/upstreams/modern.py`, strict about the per-request `_meta`).
//!
//! Attacks tried (all held):
//! - the upstream's secret in a tool result: scrubbed, as from a handshake upstream;
//! - an `input_required` answer whose elicitation the policy does not relay: the call
//!   fails (SP_UPSTREAM), the client never asked, the request not sent again;
//! - an `input_required` answer asking for sampling: the call fails, nothing relayed;
//! - an upstream that does not offer 2026-07-28 (a legacy server refusing
//!   `server/discover`): the handshake, as before.
#![allow(clippy::disallowed_methods, reason = "tests start sp and read their environment; the fence in clippy.toml is for src/")]

use crate::support;

use std::path::{Path, PathBuf};

use serde_json::{json, Value};

use support::process::{canary, initialize, initialized, tool_call, Launch, Session, TempDir};

fn python() -> String {
    ["/usr/bin/python3", "/usr/local/bin/python3"].iter().find(|p| Path::new(p).exists()).map_or("python3".into(), |p| p.to_string())
}

fn fixture(name: &str, record: &str) -> Value {
    let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/support/upstreams/modern.py").display().to_string();
    let write = Path::new(record).parent().unwrap().display().to_string();
    json!({"command": [python(), script, name], "env": {"RECORD": record, "SECRET": {"credential": "tok"}},
           "sandbox": {"read": support::upstream_read_paths(), "write": [write]}, "tools": {"allow": ["*"]}, "pin": "off", "protocol": "2026-07-28"})
}

/// A 2025-11-25 session (its client declared form elicitation) under `upstreams`.
fn start(dir: &TempDir, secret: &str, upstreams: Value) -> Session {
    let file = dir.file("token", secret.as_bytes(), 0o600);
    let policy = json!({
        "credentials": {"tok": {"source": {"file": file}, "inject": {"bearer": {}}, "hosts": ["unused.example"]}},
        "upstreams": upstreams
    });
    let config = dir.file("policy.json", policy.to_string().as_bytes(), 0o600);
    let mut s = Session::start(Launch::mcp(&config, &[]));
    let mut init = initialize(json!(0), "2025-11-25");
    init["params"]["capabilities"] = json!({"elicitation": {"form": {}}});
    assert!(s.call(&init)["result"].is_object());
    s.send(&initialized());
    s
}

/// Calls `tool`; an `elicitation/create` sp sends meanwhile is answered with `answer`.
fn call(s: &mut Session, id: i64, tool: &str, answer: Option<Value>) -> (Option<Value>, Value) {
    s.send(&tool_call(id, tool, json!({})));
    let mut asked = None;
    loop {
        let m = s.read_for(&format!("the answer to {tool} or sp's elicitation/create"));
        if m["id"] == id {
            return (asked, m);
        }
        if m["method"] == "elicitation/create" {
            let reply = answer.clone().unwrap_or_else(|| panic!("sp relayed an elicitation it must not: {m}"));
            s.send(&json!({"jsonrpc": "2.0", "id": m["id"], "result": reply}));
            asked = Some(m);
            continue;
        }
        assert!(m.get("id").is_none(), "an answer to another id: {m}");
    }
}

fn recorded(path: &str) -> Vec<Value> {
    std::fs::read_to_string(path).unwrap_or_default().lines().map(|l| serde_json::from_str(l).unwrap()).collect()
}

#[test]
fn a_modern_upstream_is_spoken_to_without_a_handshake_and_its_input_requests_relayed() {
    let dir = TempDir::new("upmodern");
    let secret = canary();
    let rec = dir.join("m.rec");
    let mut m = fixture("m", &rec);
    m["elicitation"] = json!({"form": true});
    let mut s = start(&dir, &secret, json!({"m": m}));
    let list = s.call(&json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}));
    let names: Vec<&str> = list["result"]["tools"].as_array().unwrap().iter().filter_map(|t| t["name"].as_str()).filter(|n| n.starts_with("m_")).collect();
    assert_eq!(names, ["m_echo", "m_ask", "m_sample"], "{list}");
    let (_, echo) = call(&mut s, 2, "m_echo", None);
    assert_eq!(echo["result"]["content"][0]["text"], "echo from m, token=[REDACTED:tok]", "{echo}");
    assert!(echo["result"].get("resultType").is_none(), "the upstream's resultType is not passed on: {echo}");

    // MRTR: the upstream's form reaches the client through the elicitation relay, the
    // answer goes back in the retry with the upstream's requestState.
    let (asked, hello) = call(&mut s, 3, "m_ask", Some(json!({"action": "accept", "content": {"who": "ann"}})));
    let asked = asked.expect("sp relayed the upstream's form");
    assert!(asked["params"]["message"].as_str().unwrap().ends_with("who are you?"), "{asked}");
    assert_eq!(hello["result"]["content"][0]["text"], "hello ann", "{hello}");
    let (_, sample) = call(&mut s, 4, "m_sample", None);
    assert_eq!(sample["result"]["isError"], true, "{sample}");
    let message = sample["result"]["structuredContent"]["error"]["message"].as_str().unwrap();
    assert!(message.contains("an input request other than elicitation/create"), "{message}");
    let run = s.finish();
    assert!(!String::from_utf8_lossy(&run.stdout).contains(&secret));

    // No handshake; every request carried the revision's _meta.
    let record = recorded(&rec);
    let methods: Vec<&str> = record.iter().filter_map(|m| m["method"].as_str()).collect();
    assert_eq!(methods, ["server/discover", "tools/list", "tools/call", "tools/call", "tools/call", "tools/call"], "{record:?}");
    for m in record.iter().filter(|m| m.get("id").is_some()) {
        assert_eq!(m["params"]["_meta"]["io.modelcontextprotocol/protocolVersion"], "2026-07-28", "{m}");
        assert!(m["params"]["_meta"]["io.modelcontextprotocol/clientCapabilities"].is_object(), "{m}");
    }
    let retry = &record[4]["params"];
    assert_eq!((retry["requestState"].as_str(), retry["inputResponses"]["q"]["content"]["who"].as_str()), (Some("st-1"), Some("ann")), "{retry}");
}

#[test]
fn an_input_request_the_policy_does_not_relay_fails_the_call() {
    let dir = TempDir::new("upmodern2");
    let rec = dir.join("m.rec");
    let mut s = start(&dir, &canary(), json!({"m": fixture("m", &rec)}));
    let (_, r) = call(&mut s, 1, "m_ask", None);
    assert_eq!(r["result"]["structuredContent"]["error"]["code"], "SP_UPSTREAM", "{r}");
    let message = r["result"]["structuredContent"]["error"]["message"].as_str().unwrap();
    assert!(message.starts_with("upstream m failed: its input request was refused: sp did not relay elicitation/create"), "{message}");
    s.finish();
    let calls = recorded(&rec).into_iter().filter(|m| m["method"] == "tools/call").count();
    assert_eq!(calls, 1, "the request is not sent again");
}

#[test]
fn an_upstream_that_does_not_offer_the_revision_gets_the_handshake() {
    let dir = TempDir::new("upmodern3");
    let rec = dir.join("l.rec");
    let mut legacy = fixture("l", &rec);
    legacy["env"]["LEGACY"] = json!("1");
    let mut s = start(&dir, &canary(), json!({"l": legacy}));
    let (_, echo) = call(&mut s, 1, "l_echo", None);
    assert!(echo["result"]["content"][0]["text"].as_str().unwrap().starts_with("echo from l"), "{echo}");
    s.finish();
    let record = recorded(&rec);
    let methods: Vec<&str> = record.iter().filter_map(|m| m["method"].as_str()).collect();
    assert_eq!(methods, ["server/discover", "initialize", "notifications/initialized", "tools/list", "tools/call"], "{record:?}");
    assert!(record[3]["params"].get("_meta").is_none(), "no modern _meta after the handshake: {record:?}");
}
