//! Protocol work of issue #10, through the built `sp mcp` (raw stdout checked line by line):
//! forward compatibility of `params`, lifecycle error codes, and echoed ids.
//!
//! Attacks tried (all held):
//! - unknown members inside `params` of ping, tools/list and tools/call are ignored, but an
//!   unknown tool *argument* is still SP_BAD_ARGUMENTS and nothing runs;
//! - a top-level member beyond jsonrpc/id/method/params still closes the session (exit 3),
//!   now with the readable id echoed, and the request never runs;
//! - `params` of the wrong type (an array for ping) is still -32602;
//! - a task-augmented `tools/call` that would be denied is denied (the `task` member does not
//!   skip authorization).
#![allow(
    clippy::disallowed_methods,
    reason = "tests and benchmarks start sp, sshd and clients and read their environment; the fence in clippy.toml is for src/"
)]

use crate::support;

use serde_json::{json, Value};

use support::http_server::TestServer;
use support::process::{initialize, initialized, lines, tool_call, tool_error_code, Launch, TempDir};

fn policy(dir: &TempDir, port: u16) -> std::path::PathBuf {
    let text = json!({
        "http": {"allow": [{"hosts": [format!("127.0.0.1:{port}")], "methods": ["GET"], "paths": ["/open/*"]}]}
    });
    dir.file("policy.json", text.to_string().as_bytes(), 0o600)
}

fn req(id: Value, method: &str, params: Value) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params})
}

#[test]
fn unknown_params_members_are_ignored_but_arguments_stay_strict() {
    let server = TestServer::start();
    let dir = TempDir::new("proto");
    let policy = policy(&dir, server.port);
    let mut call_with_task = tool_call(4, "sp_inventory", json!({}));
    call_with_task["params"]["task"] = json!({"ttl": 60000});
    call_with_task["params"]["futureParam"] = json!([1, 2]);
    let mut denied_with_task = tool_call(5, "http_request", json!({"method": "DELETE", "url": format!("http://127.0.0.1:{}/open/task", server.port)}));
    denied_with_task["params"]["task"] = json!({"ttl": 1});
    let input = lines(&[
        initialize(json!(1), "2025-11-25"),
        initialized(),
        req(json!(2), "ping", json!({"x": 1, "_meta": {"y": true}})),
        req(json!(3), "tools/list", json!({"futureParam": true})),
        call_with_task,
        denied_with_task,
        tool_call(6, "sp_inventory", json!({"future": 1})),
        req(json!(7), "ping", json!([1])),
    ]);
    let run = Launch::mcp(&policy, &[]).run(&input);
    run.assert_exit(0);
    let msgs = run.protocol();
    assert_eq!(msgs.len(), 7, "{}", run.context());
    assert_eq!((msgs[1]["id"].clone(), msgs[1]["result"].clone()), (json!(2), json!({})), "{}", run.context());
    // The policy allows GET: http_get is listed beside http_request and sp_inventory
    // (no SSH host, so no ssh_exec).
    assert!(msgs[2]["result"]["tools"].as_array().is_some_and(|t| t.len() == 3), "{}", run.context());
    assert_eq!(msgs[3]["result"]["isError"], false, "task-augmented call runs as an ordinary one\n{}", run.context());
    assert!(msgs[3]["result"]["structuredContent"].is_object(), "{}", run.context());
    assert_eq!(tool_error_code(&msgs[4]["result"]), Some("SP_DENIED"), "{}", run.context());
    assert_eq!(tool_error_code(&msgs[5]["result"]), Some("SP_BAD_ARGUMENTS"), "{}", run.context());
    assert_eq!((msgs[6]["id"].clone(), msgs[6]["error"]["code"].clone()), (json!(7), json!(-32602)), "{}", run.context());
    server.settle();
    assert_eq!(server.accepted(), 0, "nothing reached the loopback server");
}

#[test]
fn lifecycle_errors_are_invalid_request_with_the_id() {
    let server = TestServer::start();
    let dir = TempDir::new("proto");
    let policy = policy(&dir, server.port);
    let input = lines(&[
        req(json!("early"), "tools/list", json!({})),
        initialize(json!(1), "2025-06-18"),
        req(json!("between"), "tools/call", json!({"name": "sp_inventory"})),
        initialized(),
        initialize(json!("again"), "2025-06-18"),
    ]);
    let run = Launch::mcp(&policy, &[]).run(&input);
    run.assert_exit(0);
    let msgs = run.protocol();
    let codes: Vec<(Value, Value)> = msgs.iter().map(|m| (m["id"].clone(), m["error"]["code"].clone())).collect();
    assert_eq!(
        codes,
        vec![(json!("early"), json!(-32600)), (json!(1), Value::Null), (json!("between"), json!(-32600)), (json!("again"), json!(-32600)),],
        "{}",
        run.context()
    );
    for m in [&msgs[0], &msgs[2], &msgs[3]] {
        assert!(m["error"]["message"].as_str().is_some_and(|s| !s.is_empty()), "a message says why: {m}");
    }
}

#[test]
fn malformed_message_with_a_readable_id_echoes_it_and_closes() {
    let server = TestServer::start();
    let dir = TempDir::new("proto");
    let policy = policy(&dir, server.port);
    let url = format!("http://127.0.0.1:{}/open/echo", server.port);
    let mut bad = tool_call(42, "http_request", json!({"method": "GET", "url": url}));
    bad["extra"] = json!(1);
    let input = lines(&[initialize(json!(1), "2025-06-18"), initialized(), bad, req(json!(43), "ping", json!({}))]);
    let run = Launch::mcp(&policy, &[]).run(&input);
    run.assert_exit(3);
    let msgs = run.protocol();
    assert_eq!(msgs.len(), 2, "the session closed after the malformed message\n{}", run.context());
    assert_eq!((msgs[1]["id"].clone(), msgs[1]["error"]["code"].clone()), (json!(42), json!(-32600)), "{}", run.context());
    // An unreadable id (a float) still gets id null.
    let input = b"{\"jsonrpc\":\"2.0\",\"id\":1.5,\"method\":\"ping\"}\n";
    let run = Launch::mcp(&policy, &[]).run(input);
    run.assert_exit(3);
    assert_eq!(run.protocol()[0]["id"], Value::Null, "{}", run.context());
    server.settle();
    assert_eq!(server.accepted(), 0);
}

/// Issue #10 part 1: Codex, Claude Desktop, Copilot CLI and Cursor check tool names
/// against `^[a-zA-Z0-9_-]{1,64}$`. Every name offered, in both eras, matches; the old
/// dotted names are unknown tools (no aliases); the journal names the tool as offered.
#[test]
fn tool_names_match_the_pattern_hosts_enforce_and_dotted_names_are_gone() {
    fn host_accepts(name: &str) -> bool {
        (1..=64).contains(&name.len()) && name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
    }
    assert!(!host_accepts("http.request") && !host_accepts("") && host_accepts("ssh_exec"), "the checker itself");
    let server = TestServer::start();
    let dir = TempDir::new("proto-names");
    let policy = policy(&dir, server.port);
    let journal = dir.path.join("audit.jsonl");
    let text = std::fs::read_to_string(&policy).unwrap();
    let mut value: Value = serde_json::from_str(&text).unwrap();
    value["audit"] = json!({"path": journal});
    // An SSH host, so that ssh_exec is listed (issue 32: only what the policy makes possible).
    value["ssh"] = json!({"known_hosts": "/nonexistent/known_hosts", "hosts": {"h": {"address": "127.0.0.1", "user": "u", "auth": {"agent": true}}}});
    std::fs::write(&policy, value.to_string()).unwrap();
    let stateless_meta = json!({
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {}
    });
    let input = lines(&[
        req(json!(1), "tools/list", json!({"_meta": stateless_meta})),
        initialize(json!(2), "2025-11-25"),
        initialized(),
        req(json!(3), "tools/list", json!({})),
        tool_call(4, "sp_inventory", json!({})),
        tool_call(5, "sp.inventory", json!({})),
        tool_call(6, "http.request", json!({"method": "GET", "url": format!("http://127.0.0.1:{}/open/x", server.port)})),
        tool_call(7, "ssh.exec", json!({"host": "h", "command": "true"})),
    ]);
    let run = Launch::mcp(&policy, &[]).run(&input);
    run.assert_exit(0);
    let msgs = run.protocol();
    assert_eq!(msgs.len(), 7, "{}", run.context());
    for list in [&msgs[0], &msgs[2]] {
        let names: Vec<&str> = list["result"]["tools"].as_array().expect("tools").iter().filter_map(|t| t["name"].as_str()).collect();
        assert_eq!(names.len(), 4, "{}", run.context());
        assert!(names.iter().all(|n| host_accepts(n)), "a name a host would refuse: {names:?}");
        for want in ["http_request", "http_get", "ssh_exec", "sp_inventory"] {
            assert!(names.contains(&want), "{want} missing from {names:?}");
        }
    }
    assert_eq!(msgs[3]["result"]["isError"], false, "{}", run.context());
    for (i, old) in [(4, "sp.inventory"), (5, "http.request"), (6, "ssh.exec")] {
        assert_eq!(msgs[i]["error"]["code"], -32602, "{old} must be an unknown tool\n{}", run.context());
    }
    server.settle();
    assert_eq!(server.accepted(), 0, "an old dotted name reached the server");
    let rows = std::fs::read_to_string(&journal).unwrap();
    assert!(rows.contains("\"tool\":\"sp_inventory\"") && !rows.contains("\"tool\":\"sp.inventory\""), "{rows}");
}

/// Issue #12: a request whose parsed form would take far more memory than its line
/// (`[{"a":0},...]`: 8 bytes on the wire, ~650 in memory) is refused before it is built:
/// -32600, the session closes, nothing runs; the same values inside a valid `tools/call`
/// never reach the server. A request within the budget still runs.
///
/// Attacks tried (held): dense arrays of numbers, of empty arrays, of one-member objects,
/// as a top-level array and inside `params` / tool `arguments`; `--max-line-bytes` raises
/// the budget with the line (twice the line limit).
#[test]
fn a_request_whose_parsed_form_is_too_large_is_refused_before_it_is_built() {
    let server = TestServer::start();
    let dir = TempDir::new("proto-big");
    let policy = policy(&dir, server.port);
    let url = format!("http://127.0.0.1:{}/open/big", server.port);
    let objects = |n: usize| Value::Array(vec![json!({"a": 0}); n]);
    let big = tool_call(5, "http_request", json!({"method": "GET", "url": url, "json": objects(20_000)}));
    let input = lines(&[initialize(json!(1), "2025-06-18"), initialized(), big, req(json!(6), "ping", json!({}))]);
    assert!(input.len() < 4 * 1024 * 1024, "within the default line limit");
    let run = Launch::mcp(&policy, &[]).run(&input);
    run.assert_exit(3);
    let msgs = run.protocol();
    assert_eq!(msgs.len(), 2, "{}", run.context());
    assert_eq!(msgs[1]["error"]["code"], -32600, "{}", run.context());
    assert!(msgs[1]["error"]["message"].as_str().unwrap().contains("--max-line-bytes"), "{}", run.context());
    // Raised with the line limit: the same request is parsed (and then refused as
    // arguments: `json` is no GET body), the session stays open.
    let run = Launch::mcp(&policy, &["--max-line-bytes", "16777216"]).run(&input);
    run.assert_exit(0);
    let msgs = run.protocol();
    assert_eq!(msgs.len(), 3, "{}", run.context());
    assert_eq!(msgs[2]["result"], json!({}), "{}", run.context());
    server.settle();
    assert_eq!(server.accepted(), 0);
}

/// Issue #12: a refused call is written straight from its code and message
/// (`wire::Refusal`) in a handshake session, and through the stamped `Value` in a
/// 2026-07-28 request; both carry the same error, and only the latter the stamp.
#[test]
fn a_denial_is_the_same_refusal_in_both_eras_and_stamped_only_in_the_stateless_one() {
    let server = TestServer::start();
    let dir = TempDir::new("proto-refusal-eras");
    let policy = policy(&dir, server.port);
    let denied = json!({"name": "http_request", "arguments": {"method": "GET", "url": format!("http://127.0.0.1:{}/closed/x%22y", server.port)}});
    let mut stateless = denied.clone();
    stateless["_meta"] = json!({
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {}
    });
    let input = lines(&[req(json!("s"), "tools/call", stateless), initialize(json!(1), "2025-11-25"), initialized(), req(json!(2), "tools/call", denied)]);
    let run = Launch::mcp(&policy, &[]).run(&input);
    run.assert_exit(0);
    let msgs = run.protocol();
    assert_eq!(msgs.len(), 3, "{}", run.context());
    let (modern, old) = (&msgs[0], &msgs[2]);
    assert_eq!((modern["id"].as_str(), old["id"].as_i64()), (Some("s"), Some(2)), "{}", run.context());
    for m in [modern, old] {
        assert_eq!(tool_error_code(&m["result"]), Some("SP_DENIED"), "{}", run.context());
        assert_eq!(m["result"]["isError"], true, "{m}");
        let message = m["result"]["structuredContent"]["error"]["message"].as_str().unwrap();
        assert_eq!(m["result"]["content"][0]["text"].as_str(), Some(format!("SP_DENIED: {message}").as_str()), "{m}");
    }
    assert_eq!(modern["result"]["structuredContent"], old["result"]["structuredContent"]);
    assert_eq!(modern["result"]["resultType"], "complete", "{modern}");
    assert_eq!(modern["result"]["_meta"]["io.modelcontextprotocol/serverInfo"]["name"], "sallyport", "{modern}");
    assert!(old["result"].get("resultType").is_none() && old["result"].get("_meta").is_none(), "{old}");
    server.settle();
    assert_eq!(server.accepted(), 0, "a denied call reached the server");
}
