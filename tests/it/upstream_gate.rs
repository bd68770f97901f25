//! Upstream MCP servers behind the gate, through the real `sp mcp` binary: a real
//! published server (server-filesystem, `make upstreams`) restricted the way the
//! operator's example restricts GitHub (allow, deny, approve, argument pins), and the
//! misbehaving fixture (`tests/support/upstreams/misbehave.py`) for what real servers do
//! not do: echo their secret, record what reached them, answer slowly, report progress,
//! change their tools, leave a helper behind.
//!
//! Attacks tried (all held):
//! - a denied tool (`deny` wins over `allow`) and a tool `allow` does not name: not in
//!   tools/list, and a call is -32602 "unknown tool", like any unknown name;
//! - a pinned path outside its glob, a `..` segment under an allowed prefix, a pinned
//!   argument missing or not a string: SP_DENIED naming the argument, nothing sent;
//! - a name with a configured upstream's prefix but no such tool, another upstream's
//!   prefix, an unconfigured prefix: -32602, nothing sent;
//! - `arguments` not an object, a malformed line: refused before anything is sent;
//! - an approve-flagged tool with an approver that refuses: SP_NOT_APPROVED, the
//!   approver saw the upstream, the tool and the escaped arguments, nothing sent;
//! - the upstream echoing its `env` secret in eight spellings, as a structured key, and
//!   in a JSON-RPC error message: no spelling on stdout, in the log or in the journal;
//! - a slow call: ping and tools/list answered meanwhile; a cancel reaches the upstream
//!   as `notifications/cancelled` and the call is never answered;
//! - a helper that stays in the upstream's process group and ignores SIGTERM: gone when
//!   sp is (end of input and SIGTERM);
//! - dying mid-call: that call fails (not retried), the next one restarts it, each
//!   start, exit and restart journaled;
//! - a tools/list during a call before any list was made: it waits behind the call
//!   rather than start upstreams from the control thread;
//! - an upstream that never finishes its handshake while a tools/list starts it: a
//!   ping is answered meanwhile, the list comes without it.
//! - an upstream whose `"approve"` is `"command"`, with a client that can answer
//!   elicitations and `via` naming elicitation first: no `elicitation/create` is sent,
//!   the approver command is asked (failed before the merge wired it: the flag was
//!   parsed but the call asked the client).
#![allow(
    clippy::disallowed_methods,
    reason = "tests and benchmarks start sp, sshd and clients and read their environment; the fence in clippy.toml is for src/"
)]

use crate::support;

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use base64::Engine as _;
use serde_json::{json, Value};

use support::process::{canary, tool_call, tool_error_code, Launch, Session, TempDir};

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn python() -> String {
    ["/usr/bin/python3", "/usr/local/bin/python3"].iter().find(|p| Path::new(p).exists()).map_or("python3".into(), |p| p.to_string())
}

fn misbehave(mode: &str) -> Vec<String> {
    vec![python(), root().join("tests/support/upstreams/misbehave.py").display().to_string(), mode.into()]
}

/// A real server installed by `make upstreams`, or a loud skip (a failure under CI).
fn installed(rel: &str) -> Option<String> {
    let p = root().join("tests/upstreams/node_modules").join(rel);
    if p.exists() {
        return Some(p.display().to_string());
    }
    assert!(std::env::var_os("CI").is_none(), "{} is not installed under CI: `make test` runs `make upstreams` first", p.display());
    eprintln!("SKIPPED: {} is not installed; run `make upstreams`", p.display());
    None
}

fn journal(dir: &TempDir) -> Vec<Value> {
    let text = std::fs::read_to_string(dir.join("audit.jsonl")).unwrap_or_default();
    text.lines().map(|l| serde_json::from_str(l).unwrap()).collect()
}

fn rows<'a>(all: &'a [Value], kind: &str) -> Vec<&'a Value> {
    all.iter().filter(|r| r["kind"] == kind).collect()
}

fn names(list: &Value) -> Vec<String> {
    list["result"]["tools"].as_array().unwrap().iter().map(|t| t["name"].as_str().unwrap().to_owned()).collect()
}

/// The process group an `upstream` row names (`process group N`).
fn groups(all: &[Value]) -> Vec<i32> {
    rows(all, "upstream").iter().filter_map(|r| r["reason"].as_str()?.strip_prefix("process group ")?.parse().ok()).collect()
}

fn assert_group_gone(group: i32) {
    let pid = rustix::process::Pid::from_raw(group).unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    while rustix::process::test_kill_process_group(pid).is_ok() {
        assert!(Instant::now() < deadline, "process group {group} outlived sp");
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn policy(dir: &TempDir, mut upstreams: Value, extra: Value) -> PathBuf {
    for def in upstreams.as_object_mut().into_iter().flat_map(|m| m.values_mut()) {
        if def.get("command").is_some() && def.get("sandbox").is_none() {
            // A fixture that records what it received writes beside its record only.
            let write: Vec<String> = def["env"]["RECORD"].as_str().and_then(|r| Some(Path::new(r).parent()?.display().to_string())).into_iter().collect();
            def["sandbox"] = json!({"read": support::upstream_read_paths(), "write": write});
        }
    }
    let mut p = json!({"upstreams": upstreams, "audit": {"path": dir.join("audit.jsonl")}});
    for (k, v) in extra.as_object().unwrap() {
        p[k] = v.clone();
    }
    dir.file("policy.json", p.to_string().as_bytes(), 0o600)
}

/// The operator's example, with server-filesystem in place of GitHub: `allow`, `deny`
/// (wins), `approve` (through the approver), and a path pin on the reading tools.
#[test]
fn the_operators_example_works_with_a_real_server_restricted_by_a_path_pin() {
    let Some(fs) = installed("@modelcontextprotocol/server-filesystem/dist/index.js") else { return };
    let dir = TempDir::new("upfs");
    let data = dir.join("data");
    std::fs::create_dir_all(format!("{data}/public")).unwrap();
    std::fs::create_dir_all(format!("{data}/private")).unwrap();
    std::fs::write(format!("{data}/public/a.txt"), "hello from a").unwrap();
    std::fs::write(format!("{data}/private/b.txt"), "private b").unwrap();
    let approver = dir.file("approver", format!("#!/bin/sh\ncat > {}\nexit 1\n", dir.join("asked")).as_bytes(), 0o700);
    let config = policy(
        &dir,
        json!({"fs": {
            "command": ["node", fs, data],
            "tools": {"allow": ["read_text_file", "list_*", "write_*", "create_directory"], "deny": ["write_*", "list_allowed_*"], "approve": ["create_directory"]},
            "arguments": {"read_text_file": {"path": [format!("{data}/public/*")]}, "list_directory": {"path": [format!("{data}/public")]}},
            "startup_timeout_s": 30,
            // What it serves is granted to its sandbox, read-only (it starts confined).
            "sandbox": {"read": ([support::upstream_read_paths(), vec![data.to_string()]].concat())}
        }}),
        json!({"approval": {"command": [approver], "timeout_s": 20}}),
    );
    let mut s = Session::start(Launch::mcp(&config, &[]));
    let init = s.ready("2025-06-18");
    assert_eq!(init["capabilities"], json!({"tools": {"listChanged": true}}));
    let list = s.call(&json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}));
    assert_eq!(names(&list), ["sp_inventory", "fs_read_text_file", "fs_create_directory", "fs_list_directory", "fs_list_directory_with_sizes"]);
    let read = list["result"]["tools"].as_array().unwrap().iter().find(|t| t["name"] == "fs_read_text_file").unwrap().clone();
    assert_eq!((read["inputSchema"]["type"].as_str(), read["annotations"]["readOnlyHint"].as_bool()), (Some("object"), Some(true)));
    // The pins are the agent's to see (issue 32): in the description and the inventory.
    let said =
        format!("Pinned by the operator's policy (other values are refused; '*' any run of characters, '?' one): \"path\" must match \"{data}/public/*\".");
    let description = read["description"].as_str().unwrap();
    assert!(description.ends_with(&format!("\n\n{said}")), "{description}");
    let inventory = s.tool(100, "sp_inventory", json!({}));
    let tools = inventory["structuredContent"]["upstreams"][0]["tools"].as_array().unwrap().clone();
    let pinned = tools.iter().find(|t| t["name"] == "fs_read_text_file").unwrap();
    assert_eq!(pinned["pins"], json!({"path": [format!("{data}/public/*")]}), "{inventory}");
    assert!(tools.iter().find(|t| t["name"] == "fs_create_directory").unwrap().get("pins").is_none());

    // Allowed and pinned: the upstream's own result, as it sent it.
    let ok = s.tool(2, "fs_read_text_file", json!({"path": format!("{data}/public/a.txt")}));
    assert_eq!((ok["isError"].as_bool(), ok["content"][0]["text"].as_str()), (Some(false), Some("hello from a")));
    assert_eq!(ok["structuredContent"], json!({"content": "hello from a"}));
    let listed = s.tool(3, "fs_list_directory", json!({"path": format!("{data}/public")}));
    assert_eq!(listed["content"][0]["text"].as_str(), Some("[FILE] a.txt"));

    // The pin: another path, a `..` escape, none, not a string.
    for (id, args, argument_word) in [
        (4, json!({"path": format!("{data}/private/b.txt")}), "is not a value the policy allows"),
        (5, json!({"path": format!("{data}/public/../private/b.txt")}), "is not a value the policy allows"),
        (6, json!({}), "is pinned by the policy and must be given"),
        (7, json!({"path": [format!("{data}/public/a.txt")]}), "is pinned by the policy and must be a string"),
    ] {
        let r = s.tool(id, "fs_read_text_file", args);
        assert_eq!(tool_error_code(&r), Some("SP_DENIED"), "{r}");
        let message = r["structuredContent"]["error"]["message"].as_str().unwrap();
        // The denial names what is allowed (issue 32: pins visible to the agent).
        let allowed = format!("allowed: \"{data}/public/*\" ('*' any run of characters, '?' one)");
        assert_eq!(message, format!("fs_read_text_file: argument \"path\" {argument_word}; {allowed}"));
    }
    // Denied (deny wins), not allowed, not the upstream's: unknown names.
    for (id, name) in [(8, "fs_write_file"), (9, "fs_list_allowed_directories"), (10, "fs_move_file"), (11, "fs_nope"), (12, "gh_read_text_file")] {
        let r = s.call(&tool_call(id, name, json!({"path": format!("{data}/public/x")})));
        assert_eq!(r["error"]["code"], -32602, "{name}: {r}");
        assert_eq!(r["error"]["message"], format!("unknown tool {name:?}"), "{name}");
    }
    // Approve-flagged: the approver is asked (upstream, tool, escaped arguments), refuses.
    let r = s.tool(13, "fs_create_directory", json!({"path": format!("{data}/public/new\u{1b}dir")}));
    assert_eq!(tool_error_code(&r), Some("SP_NOT_APPROVED"), "{r}");
    let asked: Value = serde_json::from_str(&std::fs::read_to_string(dir.join("asked")).unwrap()).unwrap();
    assert_eq!((asked["request"]["upstream"].as_str(), asked["request"]["tool"].as_str()), (Some("fs"), Some("create_directory")), "{asked}");
    let shown = asked["request"]["arguments"].as_str().unwrap();
    assert!(!shown.contains('\u{1b}') && shown.contains("new"), "escaped: {shown}");
    assert!(!Path::new(&format!("{data}/public/new\u{1b}dir")).exists());

    let run = s.finish();
    assert_eq!(run.code(), Some(0), "{}", run.context());
    let all = journal(&dir);
    let fs = |r: &Value| r["tool"] != "sp_inventory";
    let results: Vec<(&str, &str)> =
        rows(&all, "result").into_iter().filter(|r| fs(r)).map(|r| (r["tool"].as_str().unwrap(), r["decision"].as_str().unwrap())).collect();
    assert_eq!(results, [("fs_read_text_file", "ok"), ("fs_list_directory", "ok")]);
    let intent = rows(&all, "intent").into_iter().find(|r| fs(r)).unwrap();
    let target = intent["target"].as_str().unwrap();
    assert!(target.starts_with("fs read_text_file arguments sha256:") && !target.contains("a.txt"), "{intent}");
    assert_eq!(rows(&all, "result").into_iter().find(|r| fs(r)).unwrap()["is_error"], false);
    let ups: Vec<&str> = rows(&all, "upstream").iter().map(|r| r["decision"].as_str().unwrap()).collect();
    assert_eq!(ups, ["start", "pin", "exit"]);
    groups(&all).into_iter().for_each(assert_group_gone);
}

/// A secret given to an upstream through `env` never leaves sp in any spelling: not on
/// stdout (results, errors), not in the log, not in the journal.
#[test]
fn a_secret_given_to_an_upstream_never_appears_in_any_output() {
    let dir = TempDir::new("upecho");
    let secret = canary();
    let file = dir.file("token", secret.as_bytes(), 0o600);
    let cred = json!({"source": {"file": file}, "inject": {"bearer": {}}, "hosts": ["unused.example"]});
    let config = policy(
        &dir,
        json!({
            "echo": {"command": misbehave("echo"), "env": {"SECRET": {"credential": "tok"}}, "tools": {"allow": ["*"]}},
            "err": {"command": misbehave("echo-error"), "env": {"SECRET": {"credential": "tok"}}, "tools": {"allow": ["*"]}}
        }),
        json!({"credentials": {"tok": cred}}),
    );
    let mut s = Session::start(Launch::mcp(&config, &["-v", "-v"]));
    s.ready("2025-11-25");
    let list = s.call(&json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}));
    assert_eq!(names(&list)[1..], ["echo_act", "err_act"]);
    let echoed = s.tool(2, "echo_act", json!({}));
    assert_eq!(echoed["isError"], false, "{echoed}");
    let text = echoed["content"][0]["text"].as_str().unwrap();
    assert!(text.contains("[REDACTED:tok]"), "{text}");
    let err = s.tool(3, "err_act", json!({}));
    assert_eq!(tool_error_code(&err), Some("SP_UPSTREAM"), "{err}");
    let run = s.finish();
    let journal_text = std::fs::read_to_string(dir.join("audit.jsonl")).unwrap();
    let b64 = base64::engine::general_purpose::STANDARD.encode(&secret);
    let spellings = [
        secret.clone(),
        secret.to_uppercase(),
        b64.trim_end_matches('=').to_owned(),
        secret.bytes().map(|b| format!("{b:02x}")).collect(),
        secret.chars().map(|c| format!("\\u{:04x}", c as u32)).collect(),
        secret.chars().map(|c| format!("&#{};", c as u32)).collect(),
    ];
    let stdout = String::from_utf8_lossy(&run.stdout).into_owned();
    for (what, text) in [("stdout", &stdout), ("stderr", &run.stderr), ("journal", &journal_text)] {
        for sp in &spellings {
            assert!(!text.contains(sp.as_str()), "{what} holds {sp:?}");
        }
    }
    assert!(run.stderr.contains("upstream"), "{}", run.stderr);
}

/// Rejected and malformed input never reaches the upstream: what the fixture read is
/// the handshake, the listing and the one call that passed.
#[test]
fn rejected_and_malformed_input_never_reaches_the_upstream() {
    let dir = TempDir::new("uprec");
    // In a directory of its own, the one the upstream's sandbox may write.
    std::fs::create_dir(dir.join("rec")).unwrap();
    let record = dir.join("rec/received");
    let config = policy(
        &dir,
        json!({"m": {
            "command": misbehave("ok"), "env": {"RECORD": record},
            "tools": {"allow": ["act"]}, "arguments": {"act": {"x": ["ok-*"]}}
        }}),
        json!({}),
    );
    let mut s = Session::start(Launch::mcp(&config, &[]));
    s.ready("2025-06-18");
    let mut id = 0;
    let mut call = |s: &mut Session, params: Value| {
        id += 1;
        s.call(&json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": params}))
    };
    for (params, code) in [
        (json!({"name": "m_act", "arguments": {"x": "bad"}}), Some("SP_DENIED")),
        (json!({"name": "m_act", "arguments": {"x": 1}}), Some("SP_DENIED")),
        (json!({"name": "m_act", "arguments": {"y": "ok-1"}}), Some("SP_DENIED")),
        (json!({"name": "m_act", "arguments": {"x": "ok-../../x"}}), Some("SP_DENIED")),
        (json!({"name": "m_act", "arguments": "x"}), None),
        (json!({"name": "m_other", "arguments": {"x": "ok-1"}}), None),
        (json!({"name": "x_act", "arguments": {"x": "ok-1"}}), None),
        (json!({"name": ["m_act"]}), None),
    ] {
        let r = call(&mut s, params.clone());
        match code {
            Some(c) => assert_eq!(tool_error_code(&r["result"]), Some(c), "{params}: {r}"),
            None => assert_eq!(r["error"]["code"], -32602, "{params}: {r}"),
        }
    }
    let ok = call(&mut s, json!({"name": "m_act", "arguments": {"x": "ok-1", "extra": [1, {"deep": null}]}}));
    assert_eq!(ok["result"]["content"][0]["text"], r#"{"arguments": {"extra": [1, {"deep": null}], "x": "ok-1"}, "tool": "act"}"#);
    s.send_raw(b"{\"jsonrpc\":\"2.0\",\"id\":99,\"method\":\"tools/call\",\"params\":{\"name\":\"m_act\",\"arguments\":{\"x\":\"ok-2\"}}\n");
    let run = s.finish();
    assert_eq!(run.code(), Some(3), "{}", run.context());
    let received: Vec<Value> = std::fs::read_to_string(&record).unwrap().lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    let methods: Vec<&str> = received.iter().map(|m| m["method"].as_str().unwrap_or("(answer)")).collect();
    assert_eq!(methods, ["initialize", "notifications/initialized", "tools/list", "tools/call"]);
    assert_eq!(received[3]["params"]["arguments"], json!({"x": "ok-1", "extra": [1, {"deep": null}]}));
}

/// During a slow upstream call the control thread answers ping and tools/list (from
/// the list made before); a cancel reaches the upstream as `notifications/cancelled`
/// and the call gets no answer. The upstream's progress reaches the client under the
/// client's own token.
#[test]
fn ping_list_cancel_and_progress_during_an_upstream_call() {
    let dir = TempDir::new("upslow");
    // In a directory of its own, the one the upstream's sandbox may write.
    std::fs::create_dir(dir.join("rec")).unwrap();
    let record = dir.join("rec/received");
    let config = policy(
        &dir,
        json!({
            "slow": {"command": misbehave("slow"), "env": {"RECORD": record}, "tools": {"allow": ["*"]}},
            "prog": {"command": misbehave("progress"), "tools": {"allow": ["*"]}}
        }),
        json!({}),
    );
    let mut s = Session::start(Launch::mcp(&config, &[]));
    s.ready("2025-06-18");
    let before = s.call(&json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}));
    s.send(&json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "slow_act", "arguments": {}}}));
    std::thread::sleep(Duration::from_millis(300));
    let pong = s.call(&json!({"jsonrpc": "2.0", "id": 3, "method": "ping"}));
    assert_eq!(pong["result"], json!({}));
    let during = s.call(&json!({"jsonrpc": "2.0", "id": 4, "method": "tools/list"}));
    assert_eq!(during["result"], before["result"]);
    s.send(&json!({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 2}}));
    // The next answer is the ping's: the cancelled call is never answered.
    let after = s.call(&json!({"jsonrpc": "2.0", "id": 5, "method": "ping"}));
    assert_eq!(after["result"], json!({}));

    s.send(&json!({"jsonrpc": "2.0", "id": 6, "method": "tools/call", "params": {"name": "prog_act", "arguments": {}, "_meta": {"progressToken": "tok-6"}}}));
    let mut progress = Vec::new();
    let answer = loop {
        let m = s.read();
        if m["method"] == "notifications/progress" {
            progress.push(m);
        } else {
            break m;
        }
    };
    assert_eq!(answer["result"]["isError"], false, "{answer}");
    assert!(!progress.is_empty());
    assert_eq!(progress[0]["params"], json!({"progressToken": "tok-6", "progress": 1.0, "total": 4.0, "message": "step 1"}));
    let values: Vec<f64> = progress.iter().map(|p| p["params"]["progress"].as_f64().unwrap()).collect();
    assert!(values.windows(2).all(|w| w[0] < w[1]), "{values:?}");
    let run = s.finish();
    assert_eq!(run.code(), Some(0), "{}", run.context());
    let received = std::fs::read_to_string(&record).unwrap();
    let cancelled: Vec<Value> =
        received.lines().map(|l| serde_json::from_str::<Value>(l).unwrap()).filter(|m| m["method"] == "notifications/cancelled").collect();
    assert_eq!(cancelled.len(), 1, "{received}");
    assert_eq!(cancelled[0]["params"]["reason"], "cancelled by the client");
}

/// An upstream's `notifications/tools/list_changed` reaches the client, and the next
/// tools/list lists again.
#[test]
fn an_upstreams_list_change_is_forwarded_and_listed_again() {
    let dir = TempDir::new("upchg");
    // Pins off: a tool that appears later is withheld under pins (tests/upstream_pins.rs).
    let config = policy(&dir, json!({"m": {"command": misbehave("list-changed"), "tools": {"allow": ["*"]}, "pin": "off"}}), json!({}));
    let mut s = Session::start(Launch::mcp(&config, &[]));
    s.ready("2025-06-18");
    let first = s.call(&json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}));
    assert_eq!(names(&first)[1..], ["m_act"]);
    let r = s.tool(2, "m_act", json!({}));
    assert_eq!(r["isError"], false);
    assert_eq!(s.read(), json!({"jsonrpc": "2.0", "method": "notifications/tools/list_changed"}));
    let second = s.call(&json!({"jsonrpc": "2.0", "id": 3, "method": "tools/list"}));
    assert_eq!(names(&second)[1..], ["m_act", "m_second"]);
    let run = s.finish();
    assert_eq!(run.code(), Some(0), "{}", run.context());
}

/// Issue 31: a re-listing that fails after the upstream's list_changed does not leave
/// the old tools offered as if healthy: the next tools/list lists none of them, the
/// client is told the list changed, and a call of one is SP_UNAVAILABLE, never sent.
/// Attacks tried (all held): tools/list after the failed re-listing (before: the list
/// made before the change, m_act included), a call of the old tool (before: refused
/// with SP_UPSTREAM), a second tools/list (still without it, no new notification).
#[test]
fn a_failed_relisting_withdraws_the_upstreams_tools() {
    let dir = TempDir::new("uprelist");
    let record = dir.join("received");
    let config = policy(&dir, json!({"m": {"command": misbehave("relist-fails"), "env": {"RECORD": record}, "tools": {"allow": ["*"]}}}), json!({}));
    let mut s = Session::start(Launch::mcp(&config, &[]));
    s.ready("2025-06-18");
    let first = s.call(&json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}));
    assert_eq!(names(&first), ["sp_inventory", "m_act"]);
    let r = s.tool(2, "m_act", json!({}));
    assert_eq!(r["isError"], false, "{r}");
    assert_eq!(s.read(), json!({"jsonrpc": "2.0", "method": "notifications/tools/list_changed"}));
    let second = s.call(&json!({"jsonrpc": "2.0", "id": 3, "method": "tools/list"}));
    assert_eq!(names(&second), ["sp_inventory"], "the old tools are still offered");
    assert_eq!(s.read(), json!({"jsonrpc": "2.0", "method": "notifications/tools/list_changed"}));
    let r = s.tool(4, "m_act", json!({}));
    assert_eq!(tool_error_code(&r), Some("SP_UNAVAILABLE"), "{r}");
    let message = r["structuredContent"]["error"]["message"].as_str().unwrap();
    assert!(message.contains("upstream m refused") && message.contains("listing broke"), "{message}");
    let third = s.call(&json!({"jsonrpc": "2.0", "id": 5, "method": "tools/list"}));
    assert_eq!(names(&third), ["sp_inventory"]);
    let run = s.finish();
    assert_eq!(run.code(), Some(0), "{}", run.context());
    let told = String::from_utf8_lossy(&run.stdout).matches("notifications/tools/list_changed").count();
    assert_eq!(told, 2, "the change, then the withdrawal: once each");
    let received = std::fs::read_to_string(&record).unwrap();
    let calls = received.lines().filter(|l| l.contains("\"tools/call\"")).count();
    assert_eq!(calls, 1, "the withdrawn tool was called: {received}");
}

/// On sp's exit every upstream's process group is ended: a helper that ignores SIGTERM
/// included (the KILL after the grace), whether sp ends by EOF or by SIGTERM.
#[test]
fn no_upstream_process_survives_sp() {
    for by_signal in [false, true] {
        let dir = TempDir::new("updaemon");
        let config = policy(&dir, json!({"d": {"command": misbehave("daemon"), "tools": {"allow": ["*"]}}}), json!({}));
        let mut s = Session::start(Launch::mcp(&config, &[]));
        s.ready("2025-06-18");
        let r = s.tool(1, "d_act", json!({}));
        assert_eq!(r["isError"], false, "{r}");
        let group = groups(&journal(&dir))[0];
        assert!(rustix::process::test_kill_process_group(rustix::process::Pid::from_raw(group).unwrap()).is_ok());
        if by_signal {
            rustix::process::kill_process(rustix::process::Pid::from_raw(s.pid() as i32).unwrap(), rustix::process::Signal::TERM).unwrap();
        }
        let run = s.finish();
        assert_eq!(run.code(), Some(if by_signal { 143 } else { 0 }), "{}", run.context());
        assert_group_gone(group);
        let ups: Vec<String> = rows(&journal(&dir), "upstream").iter().map(|r| r["decision"].as_str().unwrap().to_owned()).collect();
        // `pin`: the first listing pinned its tools (tests/upstream_pins.rs).
        assert_eq!(ups, ["start", "pin", "exit"]);
    }
}

/// `sp_inventory` lists each upstream and the tools it exposes, never its environment,
/// command line or URL secrets.
#[test]
fn the_inventory_lists_upstreams_and_their_tools_and_nothing_secret() {
    let dir = TempDir::new("upinv");
    let config = policy(
        &dir,
        json!({"m": {"command": misbehave("ok"), "env": {"LITERAL_TOKEN": "lit-9f3a"}, "tools": {"allow": ["*"], "approve": ["act"]}}}),
        json!({"mode": "observe"}),
    );
    let mut s = Session::start(Launch::mcp(&config, &[]));
    s.ready("2025-06-18");
    let list = s.call(&json!({"jsonrpc": "2.0", "id": 900, "method": "tools/list"}));
    let inv = s.tool(1, "sp_inventory", json!({}));
    let run = s.finish();
    // What it writes is what its outputSchema declares, upstreams included.
    let def = list["result"]["tools"].as_array().and_then(|t| t.iter().find(|t| t["name"] == "sp_inventory")).expect("listed");
    let schema = jsonschema::validator_for(&def["outputSchema"]).expect("a schema");
    let errors: Vec<String> = schema.iter_errors(&inv["structuredContent"]).map(|e| format!("{e} at {}", e.instance_path())).collect();
    assert!(errors.is_empty(), "{errors:?}");
    assert_eq!(run.code(), Some(0), "{}", run.context());
    let ups = &inv["structuredContent"]["upstreams"];
    assert_eq!(ups, &json!([{"name": "m", "transport": "stdio", "tools": [{"name": "m_act", "approve": true}]}]));
    let text = inv.to_string();
    assert!(!text.contains("lit-9f3a") && !text.contains("misbehave") && !text.contains("LITERAL_TOKEN"), "{text}");
}

/// `sp check` summarises each upstream (program, environment variable names, filter,
/// pins; never a value); `--probe` starts each, lists what it would expose, stops it,
/// and exits 1 when one fails; `--probe` is for `sp check` alone.
#[test]
fn sp_check_probe_lists_what_each_upstream_would_expose() {
    let dir = TempDir::new("upcheck");
    let ok = json!({"command": misbehave("names"), "env": {"LITERAL": "lit-7c1e"}, "tools": {"allow": ["*"], "deny": ["plain"], "approve": ["files.*"]}});
    let config = policy(&dir, json!({"m": ok}), json!({"mode": "observe"}));
    let config = config.display().to_string();
    let run = support::process::run_sp(&["check", "--config", &config], &[], b"");
    run.assert_exit(0);
    let out = String::from_utf8_lossy(&run.stdout).into_owned();
    let section: Vec<&str> = out.lines().skip_while(|l| !l.starts_with("upstreams:")).take(4).collect();
    assert_eq!(section[0], "upstreams: 1");
    assert_eq!(section[1], format!("  m: stdio {} (env: LITERAL)", python()));
    assert_eq!(section[2], "    tools: allow * deny plain approve files.*");
    assert!(!out.contains("lit-7c1e") && !out.contains("probe"), "{out}");

    let probe = support::process::run_sp(&["check", "--config", &config, "--probe"], &[], b"");
    probe.assert_exit(0);
    let out = String::from_utf8_lossy(&probe.stdout).into_owned();
    let line = out.lines().find(|l| l.starts_with("  probe m:")).unwrap_or_else(|| panic!("{out}"));
    let long = format!("m_{}", "a".repeat(36));
    assert!(line.starts_with("  probe m: 2 tool(s) exposed (1 wait for approval): m_files-read-") && line.contains(&long), "{line}");

    let bad = policy(&dir, json!({"m": {"command": misbehave("die-at-start"), "tools": {"allow": ["*"]}}}), json!({}));
    let failed = support::process::run_sp(&["check", "--config", &bad.display().to_string(), "--probe"], &[], b"");
    failed.assert_exit(1);
    let out = String::from_utf8_lossy(&failed.stdout).into_owned();
    assert!(out.contains("  probe m: FAILED: upstream m failed: "), "{out}");

    let usage = support::process::run_sp(&["mcp", "--config", &config, "--probe"], &[], b"");
    usage.assert_exit(2);
    assert!(usage.stderr.contains("--probe only applies to sp check"), "{}", usage.stderr);
}

/// A tools/list that arrives during a call before any list was made waits behind the
/// call (making it may start upstreams, which only the loop does); a ping meanwhile is
/// answered at once.
#[test]
fn a_tools_list_with_no_list_made_yet_waits_behind_the_running_call() {
    let dir = TempDir::new("upwait");
    let config = policy(&dir, json!({"slow": {"command": misbehave("slow"), "tools": {"allow": ["*"]}}}), json!({}));
    let mut s = Session::start(Launch::mcp(&config, &[]));
    s.ready("2025-06-18");
    s.send(&json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "slow_act", "arguments": {}}}));
    std::thread::sleep(Duration::from_millis(300));
    s.send(&json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list"}));
    s.send(&json!({"jsonrpc": "2.0", "id": 3, "method": "ping"}));
    let order: Vec<Value> = (0..3).map(|_| s.read()["id"].clone()).collect();
    assert_eq!(order, [json!(3), json!(1), json!(2)]);
    let run = s.finish();
    assert_eq!(run.code(), Some(0), "{}", run.context());
}

/// An upstream that dies mid-call fails that call (`SP_UPSTREAM`, not retried: its
/// effect may have happened); the next call starts it again. The journal has each start,
/// exit and restart.
#[test]
fn an_upstream_that_dies_is_journaled_and_restarted_by_the_next_call() {
    let dir = TempDir::new("upcrash");
    let config = policy(&dir, json!({"c": {"command": misbehave("crash"), "tools": {"allow": ["*"]}}}), json!({}));
    let mut s = Session::start(Launch::mcp(&config, &[]));
    s.ready("2025-06-18");
    for id in [1, 2] {
        let r = s.tool(id, "c_act", json!({}));
        assert_eq!(tool_error_code(&r), Some("SP_UPSTREAM"), "{r}");
    }
    let run = s.finish();
    assert_eq!(run.code(), Some(0), "{}", run.context());
    let all = journal(&dir);
    let ups: Vec<(&str, &str)> = rows(&all, "upstream").iter().map(|r| (r["target"].as_str().unwrap(), r["decision"].as_str().unwrap())).collect();
    // One `pin`: the first listing's; the listing after the restart matches it.
    assert_eq!(ups, [("c", "start"), ("c", "pin"), ("c", "exit"), ("c", "restart"), ("c", "exit")]);
    let results: Vec<&str> = rows(&all, "result").iter().map(|r| r["code"].as_str().unwrap()).collect();
    assert_eq!(results, ["SP_UPSTREAM", "SP_UPSTREAM"]);
}

/// Issue 35 section 5: an upstream that keeps dying is restarted at once the first time,
/// then only after a back-off (1 s after the second death in a row, doubling to 60 s);
/// meanwhile its calls are refused with `SP_UNAVAILABLE` (the seconds left in the reason)
/// and nothing is started: the journal has no start between the refusals.
#[test]
fn an_upstream_that_keeps_crashing_is_restarted_after_a_back_off_and_unavailable_meanwhile() {
    let dir = TempDir::new("upbackoff");
    let config = policy(&dir, json!({"c": {"command": misbehave("crash"), "tools": {"allow": ["*"]}}}), json!({}));
    let mut s = Session::start(Launch::mcp(&config, &[]));
    s.ready("2025-06-18");
    for id in [1, 2] {
        let r = s.tool(id, "c_act", json!({}));
        assert_eq!(tool_error_code(&r), Some("SP_UPSTREAM"), "{r}");
    }
    let second_death = Instant::now();
    let r = s.tool(3, "c_act", json!({}));
    assert_eq!(tool_error_code(&r), Some("SP_UNAVAILABLE"), "{r}");
    let text = r["content"][0]["text"].as_str().unwrap_or_default();
    assert!(text.contains("upstream c died 2 times in a row: not started again for 1 s (back-off)"), "{r}");
    // Evidence, not a sleep: asked again until it is started (a deadline says what for).
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut id = 4;
    let restarted = loop {
        let r = s.tool(id, "c_act", json!({}));
        if tool_error_code(&r) != Some("SP_UNAVAILABLE") {
            break r;
        }
        assert!(Instant::now() < deadline, "upstream c not started again within 10 s: {r}");
        id += 1;
        std::thread::sleep(Duration::from_millis(100));
    };
    assert!(second_death.elapsed() >= Duration::from_millis(800), "started again after {:?}", second_death.elapsed());
    assert_eq!(tool_error_code(&restarted), Some("SP_UPSTREAM"), "started, and crashed again: {restarted}");
    let run = s.finish();
    assert_eq!(run.code(), Some(0), "{}", run.context());
    let all = journal(&dir);
    let ups: Vec<&str> = rows(&all, "upstream").iter().map(|r| r["decision"].as_str().unwrap()).filter(|d| *d != "pin").collect();
    assert_eq!(ups, ["start", "exit", "restart", "exit", "restart", "exit"], "one start per call that ran");
    let refused: Vec<&str> = rows(&all, "reject").iter().map(|r| r["code"].as_str().unwrap()).collect();
    assert_eq!(refused.len(), id as usize - 3, "every refusal journaled: {refused:?}");
    assert!(refused.iter().all(|c| *c == "SP_UNAVAILABLE"), "{refused:?}");
}

/// Starting upstreams for a tools/list (here one that never answers initialize, until
/// its start-up timeout) does not make sp deaf: a ping meanwhile is answered first, and
/// the list comes without that upstream's tools.
#[test]
fn a_ping_is_answered_while_a_tools_list_starts_upstreams() {
    let dir = TempDir::new("upstart");
    let config = policy(&dir, json!({"z": {"command": misbehave("no-init"), "tools": {"allow": ["*"]}, "startup_timeout_s": 2}}), json!({}));
    let mut s = Session::start(Launch::mcp(&config, &[]));
    s.ready("2025-06-18");
    s.send(&json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}));
    std::thread::sleep(Duration::from_millis(300));
    let t = Instant::now();
    let pong = s.call(&json!({"jsonrpc": "2.0", "id": 2, "method": "ping"}));
    assert!(t.elapsed() < Duration::from_secs(1), "the ping waited {:?}", t.elapsed());
    assert_eq!(pong["result"], json!({}));
    let list = s.read();
    assert_eq!((list["id"].clone(), names(&list)), (json!(1), vec!["sp_inventory".to_owned()]));
    let run = s.finish();
    assert_eq!(run.code(), Some(0), "{}", run.context());
}

/// `tools.approve` through the channels of `approval.via`: with an elicitation-capable
/// client, an upstream without `"approve": "command"` is asked through the client
/// (`elicitation/create`, then the call runs; the approver is not run), one with it
/// through the approver command only (no `elicitation/create` is sent; the agent's own
/// host never answers for it).
#[test]
fn an_upstreams_approve_command_keeps_its_calls_off_elicitation() {
    let dir = TempDir::new("upvia");
    let count = dir.join("asked");
    let approver = dir.file("approver", format!("#!/bin/sh\ncat >/dev/null\necho x >> {count}\nexit 0\n").as_bytes(), 0o700);
    let asked = || std::fs::read_to_string(&count).map(|s| s.lines().count()).unwrap_or(0);
    let up = |command_only: bool| {
        let mut u = json!({"command": misbehave("ok"), "tools": {"allow": ["*"], "approve": ["act"]}});
        if command_only {
            u["approve"] = json!("command");
        }
        u
    };
    let approval = json!({"approval": {"via": ["elicitation", "command"], "command": [approver.display().to_string()]}});
    let config = policy(&dir, json!({"free": up(false), "strict": up(true)}), approval);
    let mut s = Session::start(Launch::mcp(&config, &[]));
    let mut init = support::process::initialize(json!(0), "2025-06-18");
    init["params"]["capabilities"] = json!({"elicitation": {}});
    assert!(s.call(&init)["result"].is_object());
    s.send(&support::process::initialized());

    // The client is asked; the command is not.
    s.send(&tool_call(1, "free_act", json!({"x": "ok-1"})));
    let ask = s.read();
    assert_eq!(ask["method"], "elicitation/create", "{ask}");
    s.send(&json!({"jsonrpc": "2.0", "id": ask["id"], "result": {"action": "accept", "content": {"approve": true}}}));
    let done = s.read();
    assert_eq!((done["id"].clone(), tool_error_code(&done["result"])), (json!(1), None), "{done}");
    assert_eq!(asked(), 0);

    // The command is asked, and the answer comes with no elicitation/create before it.
    s.send(&tool_call(2, "strict_act", json!({"x": "ok-2"})));
    let done = s.read();
    assert_eq!((done["id"].clone(), tool_error_code(&done["result"])), (json!(2), None), "{done}");
    assert_eq!(asked(), 1);
    let run = s.finish();
    assert_eq!(run.code(), Some(0), "{}", run.context());
    let channels: Vec<Value> = rows(&journal(&dir), "approval").iter().map(|r| r["channel"].clone()).collect();
    assert_eq!(channels, [json!("elicitation"), json!("command")]);
}

/// Issue 31: the journal's `tool` holds an agent-chosen name only scrubbed and bounded,
/// and an upstream's `exit` row carries its own upstream, not the last call's tool,
/// fingerprint and credential.
/// Attacks tried (all held): a name under the upstream's prefix spelling the secret the
/// upstream was given (the reject row's `tool` says `[REDACTED:tok]`), a 1 MiB name
/// (cut to 64 bytes with its length), an `exit` row written at the end of a session
/// whose last request was a call with a credential (it names only `c`).
#[test]
fn the_journal_tool_field_is_scrubbed_and_bounded_and_exit_rows_carry_their_own_upstream() {
    let dir = TempDir::new("uptoolfield");
    // Not a canary: the -32602 answer echoes the name the agent sent, as for any name.
    let secret = format!("tok-{}", std::process::id()) + "-Zq8wK3vR";
    let file = dir.file("token", secret.as_bytes(), 0o600);
    let cred = json!({"source": {"file": file}, "inject": {"bearer": {}}, "hosts": ["unused.example"]});
    let config = policy(
        &dir,
        json!({"c": {"command": misbehave("ok"), "env": {"SECRET": {"credential": "tok"}}, "tools": {"allow": ["*"]}}}),
        json!({"credentials": {"tok": cred}}),
    );
    let mut s = Session::start(Launch::mcp(&config, &[]));
    s.ready("2025-06-18");
    let secret_name = format!("c_{secret}");
    let huge = format!("c_{}", "x".repeat(1 << 20));
    for (id, name) in [(1, secret_name.as_str()), (2, huge.as_str())] {
        let r = s.call(&tool_call(id, name, json!({})));
        assert_eq!(r["error"]["code"], -32602, "{}", r.to_string().chars().take(300).collect::<String>());
    }
    let ok = s.tool(3, "c_act", json!({}));
    assert_eq!(ok["isError"], false, "{ok}");
    let run = s.finish();
    assert_eq!(run.code(), Some(0), "{}", run.context());
    let all = journal(&dir);
    let rejects: Vec<&str> = rows(&all, "reject").iter().map(|r| r["tool"].as_str().unwrap()).collect();
    assert_eq!(rejects.len(), 2, "{rejects:?}");
    assert_eq!(rejects[0], "c_[REDACTED:tok]");
    assert!(rejects[1].starts_with(&format!("c_{}...[cut: {} bytes, sha256 ", "x".repeat(62), huge.len())), "{}", rejects[1]);
    assert!(rejects[1].len() < 200, "{}", rejects[1].len());
    let text = std::fs::read_to_string(dir.join("audit.jsonl")).unwrap();
    assert!(!text.contains(&secret), "the secret is in the journal");
    // The summary (end row and stderr) counts the call under its own name.
    assert!(run.stderr.contains("executions=1 [c_act:ok=1]"), "{}", run.stderr);
    let result = rows(&all, "result")[0];
    assert_eq!((result["tool"].as_str(), result["credential"].as_str()), (Some("c_act"), Some("tok")));
    let exit = rows(&all, "upstream").into_iter().find(|r| r["decision"] == "exit").expect("an exit row").clone();
    assert_eq!(exit["target"], "c", "{exit}");
    for stale in ["tool", "request_fp", "credential", "rule"] {
        assert!(exit.get(stale).is_none(), "the exit row carries {stale}: {exit}");
    }
}
