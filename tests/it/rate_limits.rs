//! Rate limits (issue 35, section 1) through the built `sp`: several `sp mcp` processes
//! race against one `limits` rule; the counts live in one state file under the test's
//! own `XDG_STATE_HOME`, beside the journal.
//!
//! Attacks tried (all held):
//! - four sessions at once, each making more calls than the limit allows: exactly `max`
//!   succeed in total, and the loopback server sees exactly `max` requests (a lost
//!   update in the read-modify-write would let more through);
//! - a new session after they ended (an `sp` restart within the window): refused at
//!   once, the server sees nothing more;
//! - every refused call: `SP_RATE_LIMITED` with `retry_after_s`, one `reject` row
//!   (`rate_limited`) in the journal each, and no `intent` row beyond the `max` that ran;
//! - an upstream's tools (section 5): `{"upstream": "gh", "tool": "create_*"}` counts the
//!   upstream's own tool names; the call over the limit never reaches the upstream (its
//!   record of what it read has exactly `max` calls), its other tools are not counted.
#![allow(
    clippy::disallowed_methods,
    reason = "tests and benchmarks start sp, sshd and clients and read their environment; the fence in clippy.toml is for src/"
)]

use crate::support;

use serde_json::{json, Value};

use support::http_server::TestServer;
use support::process::{initialize, initialized, lines, tool_call, tool_error_code, Launch, TempDir};

const MAX: usize = 5;
const SESSIONS: usize = 4;
const CALLS: usize = 4;

#[test]
fn concurrent_sessions_share_one_limit_exactly() {
    let server = TestServer::start();
    let dir = TempDir::new("limits");
    let host = server.base().trim_start_matches("http://").to_owned();
    let policy = json!({
        "http": {"allow": [{"hosts": [host], "methods": ["GET"], "paths": ["/*"]}]},
        "limits": [{"tool": "http_request", "target": host, "max": MAX, "per_s": 3600}]
    });
    let policy = dir.file("policy.json", policy.to_string().as_bytes(), 0o600);
    let state = dir.join("state");
    let launch = Launch::mcp(&policy, &[]).env("XDG_STATE_HOME", &state);
    let input = |session: usize| {
        let mut msgs = vec![initialize(json!(0), "2025-06-18"), initialized()];
        for i in 0..CALLS {
            msgs.push(tool_call(i as i64 + 1, "http_request", json!({"method": "GET", "url": format!("{}/s{session}/c{i}", server.base())})));
        }
        lines(&msgs)
    };
    // All at once: each thread starts its process and writes its whole input.
    let runs: Vec<_> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..SESSIONS)
            .map(|n| {
                let (launch, input) = (launch.clone(), input(n));
                s.spawn(move || launch.run(&input))
            })
            .collect();
        handles.into_iter().map(|h| h.join().expect("a session thread")).collect()
    });
    let (mut ok, mut limited) = (0, 0);
    for run in &runs {
        run.assert_exit(0);
        for answer in run.protocol().iter().filter(|a| a["id"] != 0) {
            let result = &answer["result"];
            match tool_error_code(result) {
                None => ok += 1,
                Some("SP_RATE_LIMITED") => {
                    limited += 1;
                    let after = result["structuredContent"]["error"]["retry_after_s"].as_u64();
                    assert!(after.is_some_and(|s| (1..=3600).contains(&s)), "retry_after_s in {answer}\n{}", run.context());
                }
                Some(other) => panic!("unexpected {other}: {answer}\n{}", run.context()),
            }
        }
    }
    server.settle();
    assert_eq!((ok, limited), (MAX, SESSIONS * CALLS - MAX), "calls that ran, calls refused");
    assert_eq!(server.requests().len(), MAX, "the server saw exactly max requests");
    // The journal (beside the state file): one reject row per refused call, one intent
    // row per call that ran.
    let journal = std::fs::read_to_string(format!("{state}/sallyport/audit.jsonl")).expect("the journal");
    let rows: Vec<Value> = journal.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    let count = |kind: &str, decision: &str| rows.iter().filter(|r| r["kind"] == kind && r["decision"] == decision).count();
    assert_eq!(count("reject", "rate_limited"), SESSIONS * CALLS - MAX, "{journal}");
    assert!(rows.iter().filter(|r| r["decision"] == "rate_limited").all(|r| r["code"] == "SP_RATE_LIMITED" && r["tool"] == "http_request"), "{journal}");
    assert_eq!(count("intent", "allow"), MAX, "{journal}");
    // A restart within the window: the state file still holds the count.
    let run = launch.run(&input(99));
    let answers = run.protocol();
    assert!(answers.iter().filter(|a| a["id"] != 0).all(|a| tool_error_code(&a["result"]) == Some("SP_RATE_LIMITED")), "{}", run.context());
    server.settle();
    assert_eq!(server.requests().len(), MAX, "nothing more reached the server");
    let state_file = std::path::Path::new(&state).join("sallyport/limits.json");
    let mode = std::os::unix::fs::PermissionsExt::mode(&std::fs::metadata(&state_file).expect("limits.json beside the journal").permissions());
    assert_eq!(mode & 0o777, 0o600);
}

/// The tight race: calls that cost microseconds (`sp_inventory`, no journal), so the
/// sessions' read-modify-writes overlap all the time; without the lock, counts are lost
/// and more than `max` pass (tried with the lock taken out: 440 admitted for a max of 300).
#[test]
fn a_tight_race_loses_no_count() {
    const MAX: usize = 300;
    const SESSIONS: usize = 4;
    const CALLS: usize = 200;
    let dir = TempDir::new("limits-race");
    let policy = json!({"audit": {"path": null}, "limits": [{"tool": "sp_inventory", "max": MAX, "per_s": 3600}]});
    let policy = dir.file("policy.json", policy.to_string().as_bytes(), 0o600);
    let launch = Launch::mcp(&policy, &[]).env("XDG_STATE_HOME", &dir.join("state"));
    let mut msgs = vec![initialize(json!(0), "2025-06-18"), initialized()];
    msgs.extend((1..=CALLS).map(|i| tool_call(i as i64, "sp_inventory", json!({}))));
    let input = lines(&msgs);
    let runs: Vec<_> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..SESSIONS).map(|_| s.spawn(|| launch.run(&input))).collect();
        handles.into_iter().map(|h| h.join().expect("a session thread")).collect()
    });
    let mut ok = 0;
    for run in &runs {
        run.assert_exit(0);
        for answer in run.protocol().iter().filter(|a| a["id"] != 0) {
            match tool_error_code(&answer["result"]) {
                None => ok += 1,
                Some("SP_RATE_LIMITED") => {}
                Some(other) => panic!("unexpected {other}: {answer}\n{}", run.context()),
            }
        }
    }
    assert_eq!(ok, MAX, "calls admitted by {SESSIONS} racing sessions");
}

/// Section 5: a rule on an upstream's tools, `{"upstream": "gh", "tool": "create_*"}`,
/// matches the upstream's own tool names (not the exposed `gh_...`), and refuses the call
/// over the limit before it is sent upstream.
#[test]
fn a_limit_on_an_upstreams_tools_counts_its_own_names_and_stops_the_call_before_it() {
    let dir = TempDir::new("limits-up");
    let root = std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let python =
        ["/usr/bin/python3", "/usr/local/bin/python3"].iter().find(|p| std::path::Path::new(p).exists()).map_or("python3".to_owned(), |p| p.to_string());
    let misbehave = root.join("tests/support/upstreams/misbehave.py").display().to_string();
    let tools = json!([
        {"name": "create_issue", "description": "a tool", "inputSchema": {"type": "object"}},
        {"name": "get_issue", "description": "a tool", "inputSchema": {"type": "object"}}
    ]);
    let tools = dir.file("tools.json", tools.to_string().as_bytes(), 0o600);
    let record = dir.join("record");
    let policy = json!({
        "upstreams": {"gh": {
            "command": [python, misbehave, "rug"],
            "env": {"TOOLS": tools.display().to_string(), "RECORD": record},
            "tools": {"allow": ["*"]}, "pin": "off",
            "sandbox": {"read": support::upstream_read_paths(), "write": [dir.path.display().to_string()]}
        }},
        "audit": {"path": dir.join("audit.jsonl")},
        "limits": [{"upstream": "gh", "tool": "create_*", "max": 2, "per_s": 3600}],
        "limits_state": dir.join("limits.json")
    });
    let policy = dir.file("policy.json", policy.to_string().as_bytes(), 0o600);
    let mut msgs = vec![initialize(json!(0), "2025-06-18"), initialized()];
    for i in 1..=3 {
        msgs.push(tool_call(i, "gh_create_issue", json!({"n": i})));
        msgs.push(tool_call(10 + i, "gh_get_issue", json!({"n": i})));
    }
    let run = Launch::mcp(&policy, &[]).run(&lines(&msgs));
    run.assert_exit(0);
    let answers = run.protocol();
    let code = |id: i64| {
        let a = answers.iter().find(|a| a["id"] == id).unwrap_or_else(|| panic!("no answer to {id}: {}", run.context()));
        tool_error_code(&a["result"]).map(str::to_owned)
    };
    assert_eq!([code(1), code(2), code(3)], [None, None, Some("SP_RATE_LIMITED".to_owned())], "{}", run.context());
    assert_eq!([code(11), code(12), code(13)], [None, None, None], "get_issue is not counted: {}", run.context());
    let seen = std::fs::read_to_string(&record).expect("the upstream's record");
    let calls = |tool: &str| seen.lines().filter(|l| l.contains("\"tools/call\"") && l.contains(&format!("\"name\":\"{tool}\""))).count();
    assert_eq!((calls("create_issue"), calls("get_issue")), (2, 3), "what reached the upstream:\n{seen}");
}
