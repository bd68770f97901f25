//! A request whose id is already in flight is refused (-32600, `id: null`), so a cancel
//! or an answer can never reach the wrong call (`sp(1)` SESSION POLICY, `src/control.rs`
//! `classify`).
//!
//! The built `sp mcp` with a call held open by a real loopback HTTP server
//! (`support/http_server.rs`) until the test lets it go.
//!
//! Cases tried (all held; before the fix the duplicates were queued and run, the
//! `tools/call` one reached the server, and a cancel for id 7 could not tell the two
//! calls apart):
//! - the running call's id on `ping`, on `tools/list` (both answered at once by the
//!   control thread before) and on another `tools/call`;
//! - a queued request's id on `tools/list`;
//! - `"7"` (a string) while 7 (a number) runs: another id, answered at once;
//! - after the cancel, the refusals carry `id: null` (the only answer with id 7 would
//!   have been the running call's, which a cancelled call never gets) and name the
//!   refused id in `error.data.requestId`; the session stays open;
//! - once the call with id 7 has ended, id 7 is free again.
#![allow(clippy::disallowed_methods, reason = "tests start sp and read their environment")]

use crate::support;

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use support::http_server::{Reply, TestServer};
use support::process::{tool_call, Launch, Session, TempDir};

const VERSION: &str = "2025-06-18";

fn wait_until(within: Duration, what: &str, mut ok: impl FnMut() -> bool) {
    let t = Instant::now();
    while !ok() {
        assert!(t.elapsed() < within, "waited {within:?} for {what}");
        std::thread::sleep(Duration::from_millis(10));
    }
}

fn get(server: &TestServer, path: &str) -> Value {
    json!({"method": "GET", "url": format!("{}{path}", server.base())})
}

#[test]
fn a_request_reusing_an_id_in_flight_is_refused_and_the_cancel_hits_only_the_first() {
    let server = TestServer::start();
    // `/hold` answers once the test lets it go (bounded, so a failed test ends).
    let (arrived, release) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicBool::new(false)));
    let (a, r) = (arrived.clone(), release.clone());
    server.handle("/hold", move |_| {
        a.fetch_add(1, Ordering::SeqCst);
        let t = Instant::now();
        while !r.load(Ordering::SeqCst) && t.elapsed() < Duration::from_secs(20) {
            std::thread::sleep(Duration::from_millis(10));
        }
        Reply::text(200, "held")
    });
    let dir = TempDir::new("inflight-ids");
    let journal = dir.path.join("audit.jsonl");
    let policy = json!({
        "http": {"allow": [{"hosts": [format!("127.0.0.1:{}", server.port)], "methods": ["GET"], "paths": ["/*"]}], "timeout_s": 60},
        "audit": {"path": journal}
    });
    let policy = dir.file("policy.json", policy.to_string().as_bytes(), 0o600);
    let mut s = Session::start(Launch::mcp(&policy, &["-v"]));
    s.ready(VERSION);

    s.send(&tool_call(7, "http_request", get(&server, "/hold")));
    wait_until(Duration::from_secs(10), "the held call reaches the server", || arrived.load(Ordering::SeqCst) == 1);
    s.send(&tool_call(8, "http_request", get(&server, "/queued")));
    s.send(&json!({"jsonrpc": "2.0", "id": 7, "method": "ping"}));
    s.send(&json!({"jsonrpc": "2.0", "id": 7, "method": "tools/list"}));
    s.send(&tool_call(7, "http_request", get(&server, "/duplicate")));
    s.send(&json!({"jsonrpc": "2.0", "id": 8, "method": "tools/list"}));
    // Another id: the string "7" is not the number 7, so this ping is answered at once.
    let pong = s.call(&json!({"jsonrpc": "2.0", "id": "7", "method": "ping"}));
    assert_eq!(pong, json!({"jsonrpc": "2.0", "id": "7", "result": {}}));
    // The cancel for 7 reaches the call that holds id 7, and nothing else.
    s.send(&json!({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 7}}));
    let mut refusals = Vec::new();
    let mut answered = Vec::new();
    while refusals.len() < 4 || answered.is_empty() {
        let m = s.read();
        if m["id"].is_null() {
            refusals.push(m);
        } else {
            answered.push(m);
        }
    }
    // In arrival order: ping 7, tools/list 7, tools/call 7, tools/list 8.
    let refusal = |id: Value| {
        json!({"jsonrpc": "2.0", "id": null, "error": {
            "code": -32600,
            "message": format!("invalid request: id {id} is already in flight (a request with that id is running or waiting); this request is not run"),
            "data": {"requestId": id}
        }})
    };
    assert_eq!(refusals, vec![refusal(json!(7)), refusal(json!(7)), refusal(json!(7)), refusal(json!(8))]);
    assert_eq!(answered.len(), 1, "{answered:#?}");
    assert_eq!((answered[0]["id"].as_i64(), answered[0]["result"]["structuredContent"]["status"].as_u64()), (Some(8), Some(200)));
    // The duplicate call never ran.
    let paths: Vec<String> = server.requests().iter().map(|r| r.target.clone()).collect();
    assert_eq!(paths, ["/queued"], "the held call is recorded when it answers; the duplicate never arrives");
    release.store(true, Ordering::SeqCst);
    // Id 7 is free again once its call has ended.
    let again = s.tool(7, "http_request", get(&server, "/again"));
    assert_eq!(again["structuredContent"]["status"], 200, "{again}");
    let run = s.finish();
    run.assert_exit(0);
    let messages = run.protocol();
    let sevens: Vec<&Value> = messages.iter().filter(|m| m["id"] == 7).collect();
    assert_eq!(sevens.len(), 1, "one answer with id 7, the last call's: {sevens:#?}");
    // The journal: the held call cancelled, four refusals, two calls that ran.
    let rows: Vec<Value> = std::fs::read_to_string(&journal).unwrap().lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    let decisions: Vec<(String, String)> = rows
        .iter()
        .filter(|r| r["kind"] == "result" || r["decision"] == "id_in_flight")
        .map(|r| (r["kind"].as_str().unwrap().to_owned(), r["decision"].as_str().unwrap().to_owned()))
        .collect();
    let row = |k: &str, d: &str| (k.to_owned(), d.to_owned());
    assert_eq!(
        decisions,
        [
            row("result", "cancelled"),
            row("result", "ok"),
            row("reject", "id_in_flight"),
            row("reject", "id_in_flight"),
            row("reject", "id_in_flight"),
            row("reject", "id_in_flight"),
            row("result", "ok"),
        ]
    );
    assert!(run.summary().contains("id_in_flight=4"), "{}", run.summary());
}
