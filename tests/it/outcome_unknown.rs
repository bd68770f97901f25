//! A call whose effect happened and whose `result` row was never written: `sp mcp` killed
//! (SIGKILL) while the HTTP server holds the request it received. The journal keeps the
//! durable `intent` and no `result`; `sp audit verify` calls the chain whole (exit 0) and
//! names the call "outcome unknown" with its row, seq and target (sp-audit(1)).
//!
//! Attacks tried (held): killed after the server got the request; killed while a second
//! session of the same journal completes a call (only the killed session's call is
//! listed). (A target with raw control characters is printed escaped: audit/verify.rs.)
#![allow(
    clippy::disallowed_methods,
    reason = "tests and benchmarks start sp, sshd and clients and read their environment; the fence in clippy.toml is for src/"
)]

use crate::support;

use std::io::{BufRead, BufReader, Write};
use std::net::TcpListener;
use std::sync::mpsc;
use std::time::Duration;

use serde_json::{json, Value};

use support::process::{initialize, initialized, lines, run_sp, tool_call, Launch, TempDir};

#[test]
fn a_call_killed_after_its_effect_is_an_unknown_outcome_and_the_chain_verifies() {
    // Answers /done at once; holds any other request open, reporting that it arrived.
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let (arrived, seen) = mpsc::channel();
    std::thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            let arrived = arrived.clone();
            std::thread::spawn(move || {
                let mut reader = BufReader::new(stream.try_clone().unwrap());
                let mut line = String::new();
                let _ = reader.read_line(&mut line);
                let mut out = stream;
                if line.contains("/done") {
                    let _ = out.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok");
                } else {
                    let _ = arrived.send(line);
                    std::thread::sleep(Duration::from_secs(10));
                }
            });
        }
    });
    let dir = TempDir::new("unknown");
    let journal = dir.join("audit.jsonl");
    let host = format!("127.0.0.1:{port}");
    let policy = json!({"http": {"allow": [{"hosts": [host], "methods": ["GET"], "paths": ["/*"]}]}, "audit": {"path": journal}});
    let policy = dir.file("policy.json", policy.to_string().as_bytes(), 0o600);
    let get = |path: &str| json!({"method": "GET", "url": format!("http://{host}{path}")});

    let mut child = Launch::mcp(&policy, &[]).spawn();
    let mut stdin = child.stdin.take().unwrap();
    let msgs = [initialize(json!(0), "2025-06-18"), initialized(), tool_call(1, "http_request", get("/jobs/%1B%5B2J"))];
    stdin.write_all(&lines(&msgs)).unwrap();
    stdin.flush().unwrap();
    let request = seen.recv_timeout(Duration::from_secs(10)).expect("the request reached the server");
    assert!(request.starts_with("GET /jobs/%1B%5B2J "), "{request}");
    // Another session completes a call meanwhile.
    let other = Launch::mcp(&policy, &[]).run(&lines(&[initialize(json!(0), "2025-06-18"), initialized(), tool_call(1, "http_request", get("/done"))]));
    other.assert_exit(0);
    let _ = child.kill();
    let _ = child.wait();

    let rows: Vec<Value> = std::fs::read_to_string(&journal).unwrap().lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    let kinds: Vec<(&str, &str)> = rows.iter().map(|r| (r["session"].as_str().unwrap(), r["kind"].as_str().unwrap())).collect();
    let killed = rows[0]["session"].as_str().unwrap();
    let intent = rows.iter().find(|r| r["kind"] == "intent" && r["session"] == killed).expect("the killed call's intent row");
    assert!(!kinds.contains(&(killed, "result")), "{kinds:?}");

    let run = run_sp(&["audit", "verify", &journal], &[], b"");
    run.assert_exit(0);
    let out = String::from_utf8(run.stdout.clone()).unwrap();
    let report: Vec<&str> = out.lines().collect();
    assert_eq!(report.len(), 3, "{out}");
    assert!(report[0].ends_with(&format!(": ok: {} row(s), seq 1..{}", rows.len(), rows.len())), "{out}");
    let want = format!(
        "row {} (seq {}, session {killed}, GET http://{host}/jobs/%1B%5B2J): outcome unknown, no result row: sp stopped after the action may \
         have run (a crash, a kill, a power loss), or the call still runs",
        intent["seq"], intent["seq"]
    );
    assert_eq!(report[2], want);
}
