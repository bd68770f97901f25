//! The upstream client against real published servers (`make upstreams` installs them:
//! `tests/upstreams/`) and against misbehaving ones of our own
//! (`tests/support/upstreams/misbehave.py`, stdlib Python). Each test that starts an
//! upstream ends with the evidence that its process group is gone.
//!
//! Attacks tried (what an upstream, as untrusted as the agent, can write or do):
//! - a line that is not JSON (`junk`), a duplicate key (`dup-key`), a line over
//!   `max_output_bytes` (`oversize`): the upstream is ended, the call fails;
//! - a response to an id sp never sent (`unknown-id`), the right id as a string
//!   (`string-id`): ended;
//! - dying mid-call (`crash`), at start (`die-at-start`, three times: a crash loop is
//!   refused without a fourth start), never answering initialize (`no-init`);
//! - a protocol revision sp does not speak (`bad-version`);
//! - hanging on a call without reading anything more (`hang`): timed out, no answer to
//!   the ping after, killed; a slow but live one (`slow`): timed out, kept, its late
//!   answer dropped while the next call goes through; a cancel mid-call;
//! - 2 MB of notifications written while sp writes a 1 MiB request (`blurt`): read
//!   while writing, no deadlock;
//! - a flood of 20000 notifications during a call (`flood`): counted and dropped, the
//!   call's answer still taken; progress with a repeated value, and 50 at once
//!   (`progress`): dropped, at most one note per 100 ms passed on; a listing of 4.8 MB
//!   of descriptions (`big-listing`): refused;
//! - requests to sp (`sampling`: sampling/createMessage, elicitation/create, roots/list
//!   refused with -32601, ping answered);
//! - a malformed result (`bad-result`): the call fails, the upstream stays;
//! - echoing its secret in eight spellings (`echo`): the result comes back raw (the
//!   lead's redaction point scrubs it), and the Vault finds and scrubs every spelling;
//! - an error message that spells the secret (`echo-error`): scrubbed in the error;
//! - reading its environment (`env`): nothing of sp's but PATH, HOME, LANG, TZ;
//! - dotted and 200-character tool names (`names`), 500 tools over 72 pages (`many`), a
//!   cursor that never ends (`cursor-loop`), a tool listed twice (`twice`), a changed
//!   listing (`list-changed`);
//! - hostile stderr (escape sequences, a 5000-byte line: `stderr`);
//! - a helper that stays in the group and ignores SIGTERM (`daemon`): killed after the
//!   grace period.
//!
//! - over Streamable HTTP: a 401, an answer over `max_output_bytes`, a credential over
//!   plain http to a non-loopback address, a metadata address; JSON and SSE answers,
//!   a session id and the protocol version header required by the server; a stream
//!   that never ends after its answer (`sse-endless`): left at the answer.
//!
//! Not tried here: a helper that leaves the group (`setsid`); reaping those is the
//! child-subreaper's work in `sys.rs`.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde_json::{json, Map, Value};

use super::*;
use crate::policy::Policy;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn misbehave() -> String {
    root().join("tests/support/upstreams/misbehave.py").display().to_string()
}

fn python() -> String {
    // The tests' own interpreter, by absolute path: the child's PATH is sp's.
    for p in ["/usr/bin/python3", "/usr/local/bin/python3"] {
        if Path::new(p).exists() {
            return p.into();
        }
    }
    "python3".into()
}

/// A fixture installed by `make upstreams`, or a loud skip.
fn installed(path: &Path) -> bool {
    if path.exists() {
        return true;
    }
    eprintln!("SKIPPED: {} is not installed; run `make upstreams` (tests/upstreams/)", path.display());
    false
}

fn policy(upstreams: Value, extra: Value) -> Policy {
    let mut doc = json!({"upstreams": upstreams});
    if let (Value::Object(d), Value::Object(e)) = (&mut doc, extra) {
        d.extend(e);
    }
    Policy::from_text(&doc.to_string(), Path::new("test.json")).unwrap()
}

fn one(command: Vec<String>, more: Value) -> Policy {
    let mut def = json!({"command": command, "tools": {"allow": ["*"]}, "startup_timeout_s": 20});
    if let (Value::Object(d), Value::Object(m)) = (&mut def, more) {
        d.extend(m);
    }
    policy(json!({"m": def}), json!({}))
}

fn mis(mode: &str, more: Value) -> (Upstreams, Policy) {
    let p = one(vec![python(), misbehave(), mode.into()], more);
    (Upstreams::new(&p), p)
}

fn args(v: Value) -> Map<String, Value> {
    v.as_object().unwrap().clone()
}

fn route(ups: &mut Upstreams, p: &Policy, exposed: &str, a: &Map<String, Value>) -> Route {
    let upstream = names::upstream_of(exposed).unwrap();
    ups.list(upstream, &mut Vault::new()).unwrap();
    authorize(&p.upstreams, ups.tables(), exposed, a).unwrap()
}

fn call(ups: &mut Upstreams, p: &Policy, exposed: &str, a: Value) -> Result<UpstreamCall, UpstreamError> {
    let a = args(a);
    let r = route(ups, p, exposed, &a);
    ups.call(&r, a, None, &Cancel::new(), &mut |_| {}, &mut Vault::new())
}

fn text(c: &UpstreamCall) -> &str {
    c.result.content[0]["text"].as_str().unwrap()
}

/// Waits (with a deadline) for the evidence that no process of the group is left.
fn assert_group_gone(group: i32) {
    let pid = rustix::process::Pid::from_raw(group).unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    while rustix::process::test_kill_process_group(pid).is_ok() {
        assert!(Instant::now() < deadline, "process group {group} still has a process");
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn group(ups: &Upstreams, name: &str) -> i32 {
    ups.process_group(name).expect("running")
}

fn broken(why: &str) -> UpstreamError {
    UpstreamError::Broken { upstream: "m".into(), why: why.into() }
}

// ---------------------------------------------------------------------------------
// Real servers

fn everything() -> Option<Vec<String>> {
    let js = root().join("tests/upstreams/node_modules/@modelcontextprotocol/server-everything/dist/index.js");
    installed(&js).then(|| vec!["node".into(), js.display().to_string(), "stdio".into()])
}

#[test]
fn server_everything_lists_echoes_adds_and_reports_progress() {
    let Some(cmd) = everything() else { return };
    let p = policy(
        json!({"everything": {
            "command": cmd,
            "tools": {"allow": ["echo", "get-sum", "trigger-long-running-operation", "get-env", "get-structured-content"],
                      "deny": ["get-env"], "approve": ["get-sum"]},
            "arguments": {"echo": {"message": ["hello *", "exact"]}},
            "startup_timeout_s": 30
        }}),
        // `approve` needs an approver in enforce mode; observe mode needs none.
        json!({"mode": "observe"}),
    );
    let mut ups = Upstreams::new(&p);
    let mut vault = Vault::new();
    let listed: Vec<(String, bool)> = ups.list("everything", &mut vault).unwrap().iter().map(|t| (t.exposed.clone(), t.approve)).collect();
    assert_eq!(
        listed,
        vec![
            ("everything_echo".to_owned(), false),
            ("everything_get-structured-content".to_owned(), false),
            ("everything_get-sum".to_owned(), true),
            ("everything_trigger-long-running-operation".to_owned(), false),
        ]
    );
    let def = &ups.list("everything", &mut vault).unwrap()[3].definition;
    assert_eq!(def["name"], json!("everything_trigger-long-running-operation"));
    assert_eq!(def["annotations"], json!({"readOnlyHint": true, "destructiveHint": false, "idempotentHint": true, "openWorldHint": false}));
    assert_eq!(def["inputSchema"]["type"], json!("object"));
    let g = group(&ups, "everything");

    // A denied tool is not in the table; a pinned argument must match.
    let t = ups.tables().clone();
    assert_eq!(authorize(&p.upstreams, &t, "everything_get-env", &Map::new()), Err(UpstreamDenial::UnknownTool { exposed: "everything_get-env".into() }));
    assert_eq!(
        authorize(&p.upstreams, &t, "everything_echo", &args(json!({"message": "bye"}))),
        Err(UpstreamDenial::ArgumentMismatch { exposed: "everything_echo".into(), argument: "message".into() })
    );
    assert_eq!(
        authorize(&p.upstreams, &t, "everything_echo", &Map::new()),
        Err(UpstreamDenial::ArgumentMissing { exposed: "everything_echo".into(), argument: "message".into() })
    );
    assert_eq!(
        authorize(&p.upstreams, &t, "everything_echo", &args(json!({"message": ["hello x"]}))),
        Err(UpstreamDenial::ArgumentNotString { exposed: "everything_echo".into(), argument: "message".into() })
    );
    assert!(authorize(&p.upstreams, &t, "everything_get-sum", &Map::new()).unwrap().needs_approval());

    let echo = call(&mut ups, &p, "everything_echo", json!({"message": "hello world"})).unwrap();
    assert_eq!((text(&echo), echo.result.is_error, echo.started), ("Echo: hello world", false, false));
    let sum = call(&mut ups, &p, "everything_get-sum", json!({"a": 2, "b": 3})).unwrap();
    assert_eq!(text(&sum), "The sum of 2 and 3 is 5.");
    let structured = call(&mut ups, &p, "everything_get-structured-content", json!({"location": "New York"})).unwrap();
    assert!(structured.result.structured.is_some(), "{structured:?}");

    let a = args(json!({"duration": 1, "steps": 3}));
    let r = route(&mut ups, &p, "everything_trigger-long-running-operation", &a);
    let mut notes = Vec::new();
    let done = ups.call(&r, a, None, &Cancel::new(), &mut |n| notes.push(n), &mut vault).unwrap();
    assert_eq!(text(&done), "Long running operation completed. Duration: 1 seconds, Steps: 3.");
    let seen: Vec<(f64, Option<f64>)> = notes.iter().map(|n| (n.progress, n.total)).collect();
    assert_eq!(seen, vec![(1.0, Some(3.0)), (2.0, Some(3.0)), (3.0, Some(3.0))]);

    ups.shutdown();
    assert_group_gone(g);
    assert_eq!(ups.take_events().len(), 2, "started, ended");
}

#[test]
fn server_filesystem_reads_only_under_the_pinned_path() {
    let js = root().join("tests/upstreams/node_modules/@modelcontextprotocol/server-filesystem/dist/index.js");
    if !installed(&js) {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let base = std::fs::canonicalize(dir.path()).unwrap();
    std::fs::create_dir(base.join("data")).unwrap();
    std::fs::write(base.join("data/a.txt"), "alpha\n").unwrap();
    std::fs::write(base.join("secret.txt"), "no\n").unwrap();
    let data = base.join("data").display().to_string();
    let p = policy(
        json!({"fs": {
            "command": ["node", js.display().to_string(), base.display().to_string()],
            "tools": {"allow": ["read_text_file", "list_directory"], "deny": ["write_*"]},
            "arguments": {"read_text_file": {"path": [format!("{data}/*")]}},
            "startup_timeout_s": 30
        }}),
        json!({}),
    );
    let mut ups = Upstreams::new(&p);
    let names: Vec<String> = ups.list("fs", &mut Vault::new()).unwrap().iter().map(|t| t.exposed.clone()).collect();
    assert_eq!(names, vec!["fs_read_text_file", "fs_list_directory"], "in the upstream's order");
    let g = group(&ups, "fs");
    let read = call(&mut ups, &p, "fs_read_text_file", json!({"path": format!("{data}/a.txt")})).unwrap();
    assert_eq!(text(&read), "alpha\n");
    for outside in [base.join("secret.txt").display().to_string(), format!("{data}/../secret.txt"), format!("{data}/..")] {
        assert_eq!(
            authorize(&p.upstreams, ups.tables(), "fs_read_text_file", &args(json!({"path": outside}))),
            Err(UpstreamDenial::ArgumentMismatch { exposed: "fs_read_text_file".into(), argument: "path".into() }),
            "{outside}"
        );
    }
    assert_eq!(
        authorize(&p.upstreams, ups.tables(), "fs_write_file", &Map::new()),
        Err(UpstreamDenial::UnknownTool { exposed: "fs_write_file".into() })
    );
    // The upstream's own refusal is an error result, not a failure of sp.
    let missing = call(&mut ups, &p, "fs_read_text_file", json!({"path": format!("{data}/nope.txt")})).unwrap();
    assert!(missing.result.is_error, "{missing:?}");
    drop(ups);
    assert_group_gone(g);
}

#[test]
fn mcp_server_time_answers_in_utc() {
    let bin = root().join(".venv-upstreams/bin/mcp-server-time");
    if !installed(&bin) {
        return;
    }
    let p = one(vec![bin.display().to_string(), "--local-timezone".into(), "UTC".into()], json!({"tools": {"allow": ["get_current_time"]}}));
    let mut ups = Upstreams::new(&p);
    let listed: Vec<String> = ups.list("m", &mut Vault::new()).unwrap().iter().map(|t| t.exposed.clone()).collect();
    assert_eq!(listed, vec!["m_get_current_time"]);
    let g = group(&ups, "m");
    let now = call(&mut ups, &p, "m_get_current_time", json!({"timezone": "UTC"})).unwrap();
    let answer: Value = serde_json::from_str(text(&now)).unwrap();
    assert_eq!(answer["timezone"], json!("UTC"), "{answer}");
    ups.shutdown();
    assert_group_gone(g);
}

// ---------------------------------------------------------------------------------
// Misbehaving upstreams: each ends with its exact error and no process left.

/// Starts `mode`, lists, calls `m_act`; returns the error and the group.
fn failing_call(mode: &str, more: Value) -> (UpstreamError, i32, Upstreams) {
    let (mut ups, p) = mis(mode, more);
    let r = route(&mut ups, &p, "m_act", &Map::new());
    let g = group(&ups, "m");
    let e = ups.call(&r, Map::new(), None, &Cancel::new(), &mut |_| {}, &mut Vault::new()).unwrap_err();
    (e, g, ups)
}

#[test]
fn a_broken_protocol_ends_the_upstream() {
    let cases: Vec<(&str, &str)> = vec![
        ("junk", "it wrote a bad message: not a single JSON value: expected ident at line 1 column 2"),
        ("dup-key", "it wrote a bad message: duplicate object key \"isError\""),
        ("oversize", "it wrote a bad line: line longer than 65536 bytes"),
        ("unknown-id", "it broke the protocol: a response to id 1003, which sp is not waiting on"),
        ("string-id", "it broke the protocol: a response to id \"3\", which sp is not waiting on"),
        ("crash", "it exited (exit status: 3)"),
    ];
    for (mode, why) in cases {
        let (e, g, ups) = failing_call(mode, json!({"max_output_bytes": 65536}));
        assert_eq!(e, broken(why), "{mode}");
        assert_eq!(ups.process_group("m"), None, "{mode}: forgotten");
        assert_group_gone(g);
    }
}

#[test]
fn a_malformed_result_fails_the_call_and_keeps_the_upstream() {
    let (e, g, ups) = failing_call("bad-result", json!({}));
    assert_eq!(
        e,
        UpstreamError::BadAnswer { upstream: "m".into(), why: "result.content[0].type: must be text, image, audio, resource or resource_link".into() }
    );
    assert_eq!(ups.process_group("m"), Some(g));
    drop(ups);
    assert_group_gone(g);
}

#[test]
fn a_handshake_that_fails_ends_the_upstream_and_a_crash_loop_is_refused() {
    let (mut ups, _) = mis("bad-version", json!({}));
    assert_eq!(ups.list("m", &mut Vault::new()).unwrap_err(), broken("it speaks protocol revision \"1999-01-01\", which sp does not"));
    let (mut ups, _) = mis("no-init", json!({"startup_timeout_s": 1}));
    assert_eq!(
        ups.list("m", &mut Vault::new()).unwrap_err(),
        UpstreamError::Timeout { upstream: "m".into(), after: Duration::from_secs(1), hung: true }
    );
    let (mut ups, _) = mis("die-at-start", json!({}));
    for _ in 0..CRASH_DEATHS {
        assert_eq!(ups.list("m", &mut Vault::new()).unwrap_err(), broken("it exited (exit status: 7)"));
    }
    assert_eq!(ups.list("m", &mut Vault::new()).unwrap_err(), UpstreamError::CrashLoop { upstream: "m".into() });
    let starts = ups.take_events().len();
    assert_eq!(starts, 0, "a start that fails its handshake is no Started event");
}

#[test]
fn a_hung_upstream_is_killed_and_a_slow_one_kept() {
    let (e, g, _ups) = failing_call("hang", json!({"timeout_s": 1}));
    assert_eq!(e, UpstreamError::Timeout { upstream: "m".into(), after: Duration::from_secs(1), hung: true });
    assert_group_gone(g);

    let (mut ups, p) = mis("slow", json!({"timeout_s": 2}));
    let r = route(&mut ups, &p, "m_act", &Map::new());
    let g = group(&ups, "m");
    let e = ups.call(&r, Map::new(), None, &Cancel::new(), &mut |_| {}, &mut Vault::new()).unwrap_err();
    assert_eq!(e, UpstreamError::Timeout { upstream: "m".into(), after: Duration::from_secs(2), hung: false });
    // The late answer to the first call arrives while the second waits: dropped.
    let second = ups.call(&r, args(json!({"n": 2})), None, &Cancel::new(), &mut |_| {}, &mut Vault::new()).unwrap();
    assert_eq!(text(&second), r#"{"arguments": {"n": 2}, "tool": "act"}"#);
    assert_eq!(ups.counters("m").unwrap().late_answers, 1);
    assert_eq!(ups.process_group("m"), Some(g));

    // A cancel mid-call: the call ends at once, the upstream stays.
    let (mut ups, p) = mis("slow", json!({"timeout_s": 30}));
    let r = route(&mut ups, &p, "m_act", &Map::new());
    let cancel = Cancel::new();
    let c = cancel.clone();
    let t = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(300));
        c.cancel();
    });
    let start = Instant::now();
    let e = ups.call(&r, Map::new(), None, &cancel, &mut |_| {}, &mut Vault::new()).unwrap_err();
    t.join().unwrap();
    assert_eq!(e, UpstreamError::Cancelled { upstream: "m".into() });
    assert!(start.elapsed() < Duration::from_secs(2), "{:?}", start.elapsed());
    assert!(ups.process_group("m").is_some());
}

#[test]
fn notifications_progress_and_requests_from_the_upstream() {
    let (mut ups, p) = mis("flood", json!({}));
    let done = call(&mut ups, &p, "m_act", json!({})).unwrap();
    assert_eq!(text(&done), r#"{"arguments": {}, "tool": "act"}"#);
    assert_eq!(ups.counters("m").unwrap().dropped_notifications, 20000);

    let (mut ups, p) = mis("progress", json!({}));
    let a = Map::new();
    let r = route(&mut ups, &p, "m_act", &a);
    let mut notes = Vec::new();
    ups.call(&r, a, None, &Cancel::new(), &mut |n| notes.push(n), &mut Vault::new()).unwrap();
    // The repeated 2 is dropped, and of the 50 sent at once after 4, at most one passes
    // the interval (none, unless the machine stalls the sender for 100 ms).
    let steps: Vec<f64> = notes.iter().map(|n| n.progress).collect();
    assert_eq!(steps[..4], [1.0, 2.0, 3.0, 4.0]);
    assert!(steps.len() <= 5, "{steps:?}");
    assert_eq!(ups.counters("m").unwrap().dropped_notifications, 55 - steps.len() as u64);
    assert_eq!(notes[0], ProgressNote { progress: 1.0, total: Some(4.0), message: Some("step 1".into()) });

    let (mut ups, p) = mis("sampling", json!({}));
    let done = call(&mut ups, &p, "m_act", json!({})).unwrap();
    let got: Value = serde_json::from_str(text(&done)).unwrap();
    let refused = |n: u32, m: &str| json!({"jsonrpc": "2.0", "id": format!("up-{n}"), "error": {"code": -32601, "message": format!("sp does not offer {m} to upstreams")}});
    assert_eq!(
        got,
        json!([refused(0, "sampling/createMessage"), refused(1, "elicitation/create"), refused(2, "roots/list"), {"jsonrpc": "2.0", "id": "up-3", "result": {}}])
    );
    let c = ups.counters("m").unwrap();
    assert_eq!((c.refused_requests, c.pings), (3, 1));

    // The upstream writes 2 MB while sp writes it 1 MiB: neither waits for the other.
    let (mut ups, p) = mis("blurt", json!({"timeout_s": 10}));
    let blob = "x".repeat(1024 * 1024);
    let done = call(&mut ups, &p, "m_act", json!({"blob": blob})).unwrap();
    assert_eq!(serde_json::from_str::<Value>(text(&done)).unwrap()["arguments"]["blob"].as_str().map(str::len), Some(blob.len()));
    assert_eq!(ups.counters("m").unwrap().dropped_notifications, 2000);

    let (mut ups, p) = mis("stderr", json!({}));
    assert_eq!(text(&call(&mut ups, &p, "m_act", json!({})).unwrap()), r#"{"arguments": {}, "tool": "act"}"#);
}

#[test]
fn listings_names_pages_and_changes() {
    let (mut ups, p) = mis("names", json!({}));
    let listed: Vec<(String, String)> = ups.list("m", &mut Vault::new()).unwrap().iter().map(|t| (t.exposed.clone(), t.tool.clone())).collect();
    assert_eq!(listed.len(), 3);
    for (exposed, tool) in &listed {
        assert!(exposed.len() <= MAX_EXPOSED_LEN && exposed.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-'), "{exposed}");
        assert_eq!(exposed, &names::exposed_name("m", tool));
        // The table maps back exactly: the upstream is called with its own name.
        let done = call(&mut ups, &p, exposed, json!({})).unwrap();
        assert_eq!(serde_json::from_str::<Value>(text(&done)).unwrap()["tool"], json!(tool));
    }

    assert_eq!((ups.owner("m_anything"), ups.owner("x_act"), ups.owner("mact")), (Some("m"), None, None));

    let (mut ups, _) = mis("many", json!({}));
    let many = ups.list("m", &mut Vault::new()).unwrap();
    assert_eq!((many.len(), many[0].exposed.as_str(), many[499].exposed.as_str()), (500, "m_t000", "m_t499"));

    let (mut ups, _) = mis("cursor-loop", json!({}));
    assert_eq!(ups.list("m", &mut Vault::new()).unwrap_err(), UpstreamError::Listing { upstream: "m".into(), why: "a cursor came back twice".into() });

    let (mut ups, _) = mis("big-listing", json!({}));
    assert_eq!(
        ups.list("m", &mut Vault::new()).unwrap_err(),
        UpstreamError::Listing { upstream: "m".into(), why: format!("its exposed definitions take more than {MAX_LISTING_BYTES} bytes") }
    );

    let (mut ups, _) = mis("twice", json!({}));
    assert_eq!(ups.list("m", &mut Vault::new()).unwrap_err(), UpstreamError::Names { upstream: "m".into(), why: "two tools map to the exposed name m_act".into() });

    let (mut ups, p) = mis("list-changed", json!({}));
    assert_eq!(ups.list("m", &mut Vault::new()).unwrap().len(), 1);
    assert_eq!(ups.list_changed(), Vec::<&str>::new());
    call(&mut ups, &p, "m_act", json!({})).unwrap();
    assert_eq!(ups.list_changed(), vec!["m"]);
    let after: Vec<String> = ups.list("m", &mut Vault::new()).unwrap().iter().map(|t| t.exposed.clone()).collect();
    assert_eq!(after, vec!["m_act", "m_second"]);
    assert_eq!(ups.list_changed(), Vec::<&str>::new());
}

/// A file credential (owner-only, as the Vault demands) holding `secret`.
fn secret_file(dir: &Path, secret: &str) -> String {
    use std::os::unix::fs::PermissionsExt;
    let path = dir.join("secret");
    std::fs::write(&path, secret).unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).unwrap();
    path.display().to_string()
}

#[test]
fn the_environment_is_clean_and_secrets_reach_only_the_child_and_the_vault() {
    let dir = tempfile::tempdir().unwrap();
    let secret = "s3cr3t-Upstream-Value-42";
    let creds = json!({"credentials": {"tok": {"source": {"file": secret_file(dir.path(), secret)}, "inject": {"bearer": {}}, "hosts": ["unused.invalid"]}}});
    let env = json!({"SECRET": {"credential": "tok"}, "GIVEN": "literal"});
    let mk = |mode: &str| policy(json!({"m": {"command": [python(), misbehave(), mode], "env": env, "tools": {"allow": ["*"]}}}), creds.clone());

    let p = mk("env");
    let mut ups = Upstreams::new(&p);
    let mut vault = Vault::new();
    ups.list("m", &mut vault).unwrap();
    let r = authorize(&p.upstreams, ups.tables(), "m_act", &Map::new()).unwrap();
    let done = ups.call(&r, Map::new(), None, &Cancel::new(), &mut |_| {}, &mut vault).unwrap();
    let mut seen: Vec<String> = done.result.structured.unwrap().keys().filter(|k| *k != "LC_CTYPE").cloned().collect();
    seen.sort();
    let mut want: Vec<String> = ["GIVEN", "SECRET"].iter().map(|s| s.to_string()).collect();
    want.extend(stdio::PASSED_ENV.iter().filter(|v| crate::sys::env_var(v).is_some()).map(|v| v.to_string()));
    want.sort();
    assert_eq!(seen, want, "LC_CTYPE is Python's own (PEP 538)");

    let p = mk("echo");
    let mut ups = Upstreams::new(&p);
    let mut vault = Vault::new();
    ups.list("m", &mut vault).unwrap();
    let r = authorize(&p.upstreams, ups.tables(), "m_act", &Map::new()).unwrap();
    let done = ups.call(&r, Map::new(), None, &Cancel::new(), &mut |_| {}, &mut vault).unwrap();
    // Raw here (the caller scrubs), and every spelling is one the Vault finds and scrubs.
    assert!(text(&done).starts_with(secret));
    let mut result = json!({"content": done.result.content, "structuredContent": done.result.structured});
    for s in result["structuredContent"]["spellings"].as_array().unwrap() {
        assert!(vault.found_in(s.as_str().unwrap().as_bytes()), "{s}");
    }
    let withheld = crate::gate::withhold::scrub_result(&vault, &mut result);
    let shown = result.to_string();
    assert!(!withheld && !vault.found_in(shown.as_bytes()), "{shown}");
    assert!(!shown.contains(secret));
}

#[test]
fn an_error_message_that_spells_a_secret_is_scrubbed() {
    let dir = tempfile::tempdir().unwrap();
    let secret = "s3cr3t-in-an-error-99";
    let p = policy(
        json!({"m": {"command": [python(), misbehave(), "echo-error"], "env": {"SECRET": {"credential": "tok"}}, "tools": {"allow": ["*"]}}}),
        json!({"credentials": {"tok": {"source": {"file": secret_file(dir.path(), secret)}, "inject": {"bearer": {}}, "hosts": ["unused.invalid"]}}}),
    );
    let mut ups = Upstreams::new(&p);
    let mut vault = Vault::new();
    ups.list("m", &mut vault).unwrap();
    let r = authorize(&p.upstreams, ups.tables(), "m_act", &Map::new()).unwrap();
    let e = ups.call(&r, Map::new(), None, &Cancel::new(), &mut |_| {}, &mut vault).unwrap_err();
    assert_eq!(e, UpstreamError::Refused { upstream: "m".into(), why: "error -32000: bad token [REDACTED:tok]".into() });
}

#[test]
fn a_helper_that_ignores_sigterm_is_killed_after_the_grace_period() {
    let (mut ups, _) = mis("daemon", json!({}));
    ups.list("m", &mut Vault::new()).unwrap();
    let g = group(&ups, "m");
    let start = Instant::now();
    ups.shutdown();
    assert_group_gone(g);
    assert!(start.elapsed() >= stdio::GRACE, "TERM first, KILL after the grace: {:?}", start.elapsed());
}

// ---------------------------------------------------------------------------------
// Streamable HTTP (a loopback server of our own: tests/support/upstreams/http_upstream.py)

/// The loopback server in `mode`, killed on drop; its port.
struct HttpUpstream {
    child: crate::sys::Child,
    port: u16,
}

impl HttpUpstream {
    fn start(mode: &str, secret: &str) -> HttpUpstream {
        use std::io::BufRead;
        let script = root().join("tests/support/upstreams/http_upstream.py");
        let mut cmd = crate::sys::command(&python());
        cmd.args([script.display().to_string(), mode.into(), secret.into()]).stdout(std::process::Stdio::piped());
        let mut child = crate::sys::Child::spawn(&mut cmd).unwrap();
        let mut line = String::new();
        std::io::BufReader::new(child.child.stdout.take().unwrap()).read_line(&mut line).unwrap();
        HttpUpstream { port: line.trim().parse().unwrap(), child }
    }
}

impl Drop for HttpUpstream {
    fn drop(&mut self) {
        self.child.kill();
    }
}

/// An upstream at `url` with a bearer credential bound to that URL's host and port.
fn http_policy(url: &str, dir: &Path, secret: &str) -> Policy {
    let parsed = url::Url::parse(url).unwrap();
    let host = match parsed.port() {
        Some(port) => format!("{}:{port}", parsed.host_str().unwrap()),
        None => parsed.host_str().unwrap().to_owned(),
    };
    policy(
        json!({"h": {"url": url, "credential": "tok", "tools": {"allow": ["*"]}, "timeout_s": 10, "startup_timeout_s": 10, "max_output_bytes": 65536}}),
        json!({"credentials": {"tok": {"source": {"file": secret_file(dir, secret)}, "inject": {"bearer": {}}, "hosts": [host]}}}),
    )
}

#[test]
fn a_streamable_http_upstream_answers_in_json_and_sse_with_its_session() {
    let dir = tempfile::tempdir().unwrap();
    let secret = "http-upstream-token-7";
    for mode in ["json", "sse"] {
        let server = HttpUpstream::start(mode, secret);
        let p = http_policy(&format!("http://127.0.0.1:{}/mcp", server.port), dir.path(), secret);
        let mut ups = Upstreams::new(&p);
        let mut vault = Vault::new();
        let listed: Vec<String> = ups.list("h", &mut vault).unwrap().iter().map(|t| t.exposed.clone()).collect();
        assert_eq!(listed, vec!["h_act"], "{mode}");
        let a = args(json!({"q": 1}));
        let r = authorize(&p.upstreams, ups.tables(), "h_act", &a).unwrap();
        let mut notes = Vec::new();
        let done = ups.call(&r, a, None, &Cancel::new(), &mut |n| notes.push(n), &mut vault).unwrap();
        assert_eq!(text(&done), r#"{"arguments": {"q": 1}, "session": true, "tool": "act"}"#, "{mode}");
        if mode == "sse" {
            assert_eq!(notes, vec![ProgressNote { progress: 1.0, total: Some(1.0), message: None }]);
            assert_eq!(ups.counters("h").unwrap().pings, 1);
        }
        // The token went only where the credential says: remembered for redaction.
        assert!(vault.found_in(secret.as_bytes()));
        ups.shutdown();
    }
}

#[test]
fn a_streamable_http_stream_is_left_once_it_answered() {
    let dir = tempfile::tempdir().unwrap();
    let secret = "http-upstream-token-9";
    let server = HttpUpstream::start("sse-endless", secret);
    let p = http_policy(&format!("http://127.0.0.1:{}/mcp", server.port), dir.path(), secret);
    let mut ups = Upstreams::new(&p);
    assert_eq!(text(&call(&mut ups, &p, "h_act", json!({"n": 1})).unwrap()), r#"{"arguments": {"n": 1}, "session": true, "tool": "act"}"#);
    // The stream goes on at 200 notifications a second; had sp kept reading it, the
    // next call would find (and count) those read meanwhile.
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(text(&call(&mut ups, &p, "h_act", json!({"n": 2})).unwrap()), r#"{"arguments": {"n": 2}, "session": true, "tool": "act"}"#);
    assert_eq!(ups.counters("h").unwrap().dropped_notifications, 0);
}

#[test]
fn a_streamable_http_upstream_that_refuses_or_overflows_is_broken() {
    let dir = tempfile::tempdir().unwrap();
    let secret = "http-upstream-token-8";
    let server = HttpUpstream::start("unauthorized", secret);
    let p = http_policy(&format!("http://127.0.0.1:{}/mcp", server.port), dir.path(), secret);
    let mut ups = Upstreams::new(&p);
    assert_eq!(
        ups.list("h", &mut Vault::new()).unwrap_err(),
        UpstreamError::Broken { upstream: "h".into(), why: "it refused the credential (HTTP 401)".into() }
    );
    let server = HttpUpstream::start("oversize", secret);
    let p = http_policy(&format!("http://127.0.0.1:{}/mcp", server.port), dir.path(), secret);
    let mut ups = Upstreams::new(&p);
    let e = call(&mut ups, &p, "h_act", json!({})).unwrap_err();
    assert_eq!(e, UpstreamError::Broken { upstream: "h".into(), why: "it wrote a bad line: line longer than 65536 bytes".into() });
}

#[test]
fn a_streamable_http_destination_is_checked_before_anything_is_sent() {
    let dir = tempfile::tempdir().unwrap();
    // No packet leaves: both are refused after the (literal) address is classified.
    let start_error = |url: &str| {
        let p = http_policy(url, dir.path(), "t0ken-for-the-check");
        Upstreams::new(&p).list("h", &mut Vault::new()).unwrap_err()
    };
    assert_eq!(
        start_error("http://10.1.2.3:9/mcp"),
        UpstreamError::Start { upstream: "h".into(), why: "a credential is sent over https only (plain http only to a loopback address)".into() }
    );
    let UpstreamError::Start { why, .. } = start_error("http://169.254.169.254/mcp") else { panic!() };
    assert!(why.starts_with("169.254.169.254 is "), "{why}");
    assert_eq!(Upstreams::new(&Policy::deny_all()).list("x", &mut Vault::new()).unwrap_err(), UpstreamError::Unknown { upstream: "x".into() });
}
