//! Tasks toward upstreams through the real `sp mcp` binary (issue 33, section 4): a tool
//! call the upstream runs as a task is a task for the client too, under sp's own ids.
//! The upstream is ours (`tests/support/upstreams/tasks.py`): its task ids are
//! predictable on purpose ("t1" in every upstream), its answers echo its secret.
//!
//! Attacks tried (all held):
//! - the upstream's own task id (`t1`) sent by the client as `taskId`: -32602, no
//!   upstream asked;
//! - a made-up sp-shaped id (`sp-000…`), an id naming another upstream (`b:t1`), an id
//!   over 64 bytes: -32602, no upstream asked;
//! - a `taskId` with an extra member naming an upstream (`"upstream": "b"`), a `taskId`
//!   that is a number: -32602 (params strict), no upstream asked;
//! - two upstreams holding tasks of the same own id (`t1`): each sp id reaches only its
//!   own upstream (the other's record shows no poll);
//! - a task whose tool the policy stops exposing (SIGHUP reload): its `tasks/result`
//!   refused as denied (a reject row), nothing asked of the upstream;
//! - the secret echoed in the task's `statusMessage`, in the CreateTaskResult's `_meta`
//!   (model-immediate-response) and in the final result: scrubbed or dropped, never on
//!   stdout;
//! - a task of an upstream that died since (and was started again): -32602 "lost", the
//!   new process never asked for the old id;
//! - a malformed `task` member (`{"ttl": -1}`, `{"x": 1}`, `"soon"`): -32602, nothing runs;
//! - a task asked of a tool or an upstream that takes none (no `execution.taskSupport`,
//!   no `tasks` capability, or no `"tasks": true` in the policy): an ordinary call, the
//!   `task` member never sent upstream.
//! - a task seen completed (tasks/get) and fetched later, twice: one result row, written
//!   when it was seen completed; the later fetches get the result sp kept (the upstream
//!   asked for it once) and write no row;
//! - tasks the client never fetches: one result row each at the session's end (a
//!   completed one's result fetched by sp; a running one cancelled upstream, `abandoned`);
//!   `sp audit verify` passes on that journal;
//! - a task of an upstream that died: its result row `upstream_gone` as soon as sp sees
//!   the death, nothing asked of the new process under the old id;
//! - a task whose call the policy no longer allows (reload, which ended the upstream):
//!   its result row `upstream_gone`, nothing asked at the session's end either;
//! - the client cancelling a task-augmented call while the upstream is still creating the
//!   task, which the upstream then creates anyway: sp sends `tasks/cancel` for it (the
//!   orphan is not left running), the call has one result row (cancelled);
//! - a cancel of a finished task (tasks/cancel twice): the upstream's refusal relayed
//!   (-32602), still one result row;
//! - a task the upstream reports ended by `notifications/tasks/status` (with a secret-free
//!   Task; a malformed one is dropped): its result fetched and journaled at the next
//!   request that reads the upstream, once;
//! - a task whose ttl ran out unfetched: its result row `expired` at the next request
//!   touching the upstreams, nothing asked at the session's end;
//! - an upstream that flips a pinned tool from no task support to `optional`: the tool
//!   is withheld, a call refused `SP_TOOL_CHANGED` (its `execution` is pinned).
#![allow(clippy::disallowed_methods, reason = "tests start sp and read their environment; the fence in clippy.toml is for src/")]

use crate::support;

use std::path::{Path, PathBuf};

use serde_json::{json, Value};

use support::process::{canary, Launch, Session, TempDir};

fn python() -> String {
    ["/usr/bin/python3", "/usr/local/bin/python3"].iter().find(|p| Path::new(p).exists()).map_or("python3".into(), |p| p.to_string())
}

/// An upstream running `tasks.py NAME`, recording what it reads to `record`, with its
/// tasks relayed when `tasks`.
fn fixture(name: &str, record: &str, tasks: bool) -> Value {
    let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/support/upstreams/tasks.py").display().to_string();
    let write = Path::new(record).parent().unwrap().display().to_string();
    json!({"command": [python(), script, name], "env": {"RECORD": record, "SECRET": {"credential": "tok"}},
           "sandbox": {"read": support::upstream_read_paths(), "write": [write]}, "tools": {"allow": ["*"]}, "pin": "off", "tasks": tasks})
}

struct Fixture {
    dir: TempDir,
    secret: String,
    config: PathBuf,
}

impl Fixture {
    fn new(tag: &str, upstreams: Value) -> Fixture {
        let dir = TempDir::new(tag);
        let secret = canary();
        let file = dir.file("token", secret.as_bytes(), 0o600);
        let policy = json!({
            "credentials": {"tok": {"source": {"file": file}, "inject": {"bearer": {}}, "hosts": ["unused.example"]}},
            "upstreams": upstreams,
            "audit": {"path": dir.join("audit.jsonl")}
        });
        let config = dir.file("policy.json", policy.to_string().as_bytes(), 0o600);
        Fixture { dir, secret, config }
    }

    fn journal(&self) -> Vec<Value> {
        std::fs::read_to_string(self.dir.join("audit.jsonl")).unwrap_or_default().lines().map(|l| serde_json::from_str(l).unwrap()).collect()
    }
}

fn request(id: i64, method: &str, params: Value) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params})
}

fn task_call(id: i64, name: &str, task: Value) -> Value {
    request(id, "tools/call", json!({"name": name, "arguments": {}, "task": task}))
}

fn recorded(path: &str) -> Vec<Value> {
    std::fs::read_to_string(path).unwrap_or_default().lines().map(|l| serde_json::from_str(l).unwrap()).collect()
}

fn asked(path: &str, method: &str) -> Vec<Value> {
    recorded(path).into_iter().filter(|m| m["method"] == method).map(|m| m["params"].clone()).collect()
}

/// A request's answer, past the notifications sp sends before it.
fn ask(s: &mut Session, msg: &Value) -> Value {
    s.send(msg);
    loop {
        let m = s.read_for(&format!("the answer to {} id {}", msg["method"], msg["id"]));
        if m["id"] == msg["id"] {
            return m;
        }
        assert!(m.get("id").is_none(), "an answer to another id: {m}");
    }
}

/// Creates a task of `name` and returns sp's id for it.
fn created(s: &mut Session, id: i64, name: &str) -> String {
    let r = ask(s, &task_call(id, name, json!({"ttl": 60000})));
    let task = &r["result"]["task"];
    let tid = task["taskId"].as_str().unwrap_or_else(|| panic!("no task created: {r}")).to_owned();
    assert!(tid.starts_with("sp-") && tid.len() == 35 && tid[3..].bytes().all(|b| b.is_ascii_hexdigit()), "{tid}");
    tid
}

#[test]
fn a_task_is_created_polled_and_its_result_scrubbed_and_journaled_as_one_action() {
    let dir = TempDir::new("uptask1");
    let rec = dir.join("a.rec");
    let f = Fixture::new("uptask", json!({"a": fixture("a", &rec, true)}));
    let mut s = Session::start(Launch::mcp(&f.config, &[]));
    let init = s.ready("2025-11-25");
    assert_eq!(init["capabilities"]["tasks"], json!({"cancel": {}, "requests": {"tools": {"call": {}}}}), "{init}");
    let list = ask(&mut s, &request(1, "tools/list", json!({})));
    let tools = list["result"]["tools"].as_array().unwrap();
    let exec = |n: &str| tools.iter().find(|t| t["name"] == n).map(|t| t["execution"].clone()).unwrap();
    assert_eq!((exec("a_slow"), exec("a_must"), exec("a_plain")), (json!({"taskSupport": "optional"}), json!({"taskSupport": "required"}), Value::Null));

    let answer = ask(&mut s, &task_call(2, "a_slow", json!({"ttl": 60000})));
    let task = &answer["result"]["task"];
    let tid = task["taskId"].as_str().unwrap().to_owned();
    assert!(tid.starts_with("sp-") && tid.len() == 35, "{answer}");
    assert_eq!(task["status"], "working");
    assert_eq!(answer["result"].as_object().unwrap().keys().collect::<Vec<_>>(), ["task"], "the upstream's _meta is dropped: {answer}");
    assert_eq!(task["statusMessage"], "working on it with key [REDACTED:tok]", "{answer}");
    assert_eq!(asked(&rec, "tools/call")[0]["task"], json!({"ttl": 60000}));

    // Polled: working, then completed; each under sp's id, the upstream asked with its own.
    let first = ask(&mut s, &request(3, "tasks/get", json!({"taskId": tid})));
    assert_eq!((first["result"]["taskId"].as_str(), first["result"]["status"].as_str()), (Some(tid.as_str()), Some("working")), "{first}");
    let second = ask(&mut s, &request(4, "tasks/get", json!({"taskId": tid})));
    assert_eq!(second["result"]["status"], "completed", "{second}");
    assert_eq!(asked(&rec, "tasks/get"), [json!({"taskId": "t1"}), json!({"taskId": "t1"})]);

    let result = ask(&mut s, &request(5, "tasks/result", json!({"taskId": tid})));
    assert_eq!(result["result"]["content"][0]["text"], "slow done by a, token=[REDACTED:tok]", "{result}");
    assert_eq!(result["result"]["isError"], false);
    assert_eq!(result["result"]["_meta"], json!({"io.modelcontextprotocol/related-task": {"taskId": tid}}), "{result}");
    let again = ask(&mut s, &request(6, "tasks/result", json!({"taskId": tid})));
    assert_eq!(again["result"], result["result"]);
    let run = s.finish();
    assert!(!String::from_utf8_lossy(&run.stdout).contains(&f.secret), "the secret reached stdout");

    // One action: an intent row at the call, one result row (the first tasks/result),
    // with the call's own fields; the polls are not rows.
    let journal = f.journal();
    let rows: Vec<&Value> = journal.iter().filter(|r| r["tool"] == "a_slow" && matches!(r["kind"].as_str(), Some("intent" | "result" | "reject"))).collect();
    let kinds: Vec<&str> = rows.iter().map(|r| r["kind"].as_str().unwrap()).collect();
    assert_eq!(kinds, ["intent", "result"], "{rows:?}");
    assert_eq!((rows[1]["decision"].as_str(), rows[1]["request_fp"].clone()), (Some("ok"), rows[0]["request_fp"].clone()));
    assert_eq!(rows[1]["target"], rows[0]["target"]);
    assert_eq!(rows[1]["is_error"], false);
}

#[test]
fn forged_and_cross_upstream_task_ids_are_refused() {
    let dir = TempDir::new("uptask2");
    let (ra, rb) = (dir.join("a.rec"), dir.join("b.rec"));
    let f = Fixture::new("uptask2", json!({"a": fixture("a", &ra, true), "b": fixture("b", &rb, true)}));
    let mut s = Session::start(Launch::mcp(&f.config, &[]));
    s.ready("2025-11-25");
    let a = created(&mut s, 1, "a_slow");
    let b = created(&mut s, 2, "b_slow");
    assert_ne!(a, b);
    let forged = [
        (json!({"taskId": "t1"}), -32602, "no task of this session has that taskId"),
        (json!({"taskId": format!("sp-{}", "0".repeat(32))}), -32602, "no task of this session has that taskId"),
        (json!({"taskId": "b:t1"}), -32602, "no task of this session has that taskId"),
        (json!({"taskId": "x".repeat(65)}), -32602, "no task of this session has that taskId"),
        (json!({"taskId": a, "upstream": "b"}), -32602, "tasks/get params must be {\"taskId\": string}"),
        (json!({"taskId": 1}), -32602, "tasks/get params must be {\"taskId\": string}"),
    ];
    for (i, (params, code, message)) in forged.iter().enumerate() {
        let r = ask(&mut s, &request(10 + i as i64, "tasks/get", params.clone()));
        assert_eq!((&r["error"]["code"], r["error"]["message"].as_str()), (&json!(code), Some(*message)), "{params}: {r}");
    }
    assert!(asked(&ra, "tasks/get").is_empty() && asked(&rb, "tasks/get").is_empty(), "a forged id reached an upstream");
    // Each id reaches its own upstream only, though both upstreams call their task t1.
    let got = ask(&mut s, &request(20, "tasks/get", json!({"taskId": a})));
    assert_eq!(got["result"]["taskId"], json!(a), "{got}");
    assert_eq!((asked(&ra, "tasks/get").len(), asked(&rb, "tasks/get").len()), (1, 0));
    let got = ask(&mut s, &request(21, "tasks/get", json!({"taskId": b})));
    assert_eq!(got["result"]["taskId"], json!(b), "{got}");
    assert_eq!((asked(&ra, "tasks/get").len(), asked(&rb, "tasks/get").len()), (1, 1));
    // tasks/list is not offered.
    let list = ask(&mut s, &request(22, "tasks/list", json!({})));
    assert_eq!(list["error"]["code"], -32601, "{list}");
    s.finish();
    let rejects = f.journal().iter().filter(|r| r["kind"] == "reject" && r["decision"] == "not_found").count();
    assert_eq!(rejects, 4, "each unknown id is a reject row");
}

#[test]
fn a_task_whose_tool_the_policy_no_longer_allows_is_refused_after_a_reload() {
    let dir = TempDir::new("uptask3");
    let ra = dir.join("a.rec");
    let f = Fixture::new("uptask3", json!({"a": fixture("a", &ra, true)}));
    let mut s = Session::start(Launch::mcp(&f.config, &[]));
    s.ready("2025-11-25");
    let tid = created(&mut s, 1, "a_slow");
    // The operator stops exposing a_slow; the reload is told as a list change.
    let mut policy: Value = serde_json::from_slice(&std::fs::read(&f.config).unwrap()).unwrap();
    policy["upstreams"]["a"]["tools"] = json!({"allow": ["*"], "deny": ["slow"]});
    let new = f.dir.file("policy.json.new", policy.to_string().as_bytes(), 0o600);
    std::fs::rename(new, &f.config).unwrap();
    rustix::process::kill_process(rustix::process::Pid::from_raw(s.pid() as i32).unwrap(), rustix::process::Signal::HUP).unwrap();
    let note = s.read_for("notifications/tools/list_changed after SIGHUP");
    assert_eq!(note["method"], "notifications/tools/list_changed", "{note}");
    for (id, method) in [(2, "tasks/result"), (3, "tasks/get"), (4, "tasks/cancel")] {
        let r = ask(&mut s, &request(id, method, json!({"taskId": tid})));
        assert_eq!(r["error"]["code"], -32602, "{method}: {r}");
        assert_eq!(r["error"]["message"], "the task's call is no longer allowed: the policy does not expose a_slow", "{r}");
    }
    s.finish();
    assert!(asked(&ra, "tasks/result").is_empty() && asked(&ra, "tasks/get").is_empty() && asked(&ra, "tasks/cancel").is_empty());
    let journal = f.journal();
    let denied = journal.iter().filter(|r| r["kind"] == "reject" && r["decision"] == "denied" && r["tool"] == "a_slow").count();
    assert_eq!(denied, 3);
    // The reload changed the upstream's definition, so it was ended: the task's one
    // result row says so, and nothing is asked at the session's end.
    assert_eq!(result_rows(&journal, "a_slow"), [("upstream_gone".to_owned(), Value::Null)], "{journal:?}");
}

#[test]
fn cancel_is_relayed_and_ends_the_action() {
    let dir = TempDir::new("uptask4");
    let ra = dir.join("a.rec");
    let f = Fixture::new("uptask4", json!({"a": fixture("a", &ra, true)}));
    let mut s = Session::start(Launch::mcp(&f.config, &[]));
    s.ready("2025-11-25");
    let tid = created(&mut s, 1, "a_slow");
    let r = ask(&mut s, &request(2, "tasks/cancel", json!({"taskId": tid})));
    assert_eq!((r["result"]["taskId"].as_str(), r["result"]["status"].as_str()), (Some(tid.as_str()), Some("cancelled")), "{r}");
    assert_eq!(asked(&ra, "tasks/cancel"), [json!({"taskId": "t1"})]);
    // A second cancel: the upstream refuses (already terminal), relayed as -32602.
    let again = ask(&mut s, &request(3, "tasks/cancel", json!({"taskId": tid})));
    assert_eq!(again["error"]["code"], -32602, "{again}");
    s.finish();
    let journal = f.journal();
    let results: Vec<&Value> = journal.iter().filter(|r| r["kind"] == "result" && r["tool"] == "a_slow").collect();
    assert_eq!(results.len(), 1, "{results:?}");
    assert_eq!((results[0]["decision"].as_str(), results[0]["code"].as_str()), (Some("cancelled"), Some("SP_CANCELLED")));
}

#[test]
fn a_call_without_task_support_is_a_plain_call() {
    let dir = TempDir::new("uptask5");
    let (ra, rn, ro) = (dir.join("a.rec"), dir.join("n.rec"), dir.join("o.rec"));
    let mut no_tasks = fixture("n", &rn, true);
    no_tasks["env"]["NO_TASKS"] = json!("1");
    let f = Fixture::new("uptask5", json!({"a": fixture("a", &ra, true), "n": no_tasks, "o": fixture("o", &ro, false)}));
    let mut s = Session::start(Launch::mcp(&f.config, &[]));
    s.ready("2025-11-25");
    // A tool without taskSupport; an upstream that declares no tasks; an upstream whose
    // tasks the policy does not relay: each an ordinary call, no `task` sent.
    for (id, tool, rec) in [(1, "a_plain", &ra), (2, "n_slow", &rn), (3, "o_slow", &ro)] {
        let r = ask(&mut s, &task_call(id, tool, json!({})));
        let text = r["result"]["content"][0]["text"].as_str().unwrap_or_else(|| panic!("{tool}: {r}"));
        assert!(text.ends_with("token=[REDACTED:tok]"), "{tool}: {r}");
        assert!(r["result"].get("task").is_none(), "{r}");
        let calls = asked(rec, "tools/call");
        assert_eq!(calls.len(), 1);
        assert!(calls[0].get("task").is_none(), "{tool}: the task member went upstream: {calls:?}");
    }
    let list = ask(&mut s, &request(4, "tools/list", json!({})));
    let tools = list["result"]["tools"].as_array().unwrap();
    assert!(tools.iter().all(|t| t.get("execution").is_none() || t["name"].as_str().unwrap().starts_with("a_")), "{list}");
    // A malformed `task` member: -32602, nothing runs.
    for (id, task) in [(5, json!({"ttl": -1})), (6, json!({"x": 1})), (7, json!("soon"))] {
        let r = ask(&mut s, &task_call(id, "a_slow", task.clone()));
        assert_eq!(r["error"]["code"], -32602, "{task}: {r}");
    }
    assert_eq!(asked(&ra, "tools/call").len(), 1);
    s.finish();
}

/// A policy without `"tasks": true` offers no tasks: no capability, the methods -32601.
#[test]
fn no_tasks_are_offered_without_the_policy_key() {
    let dir = TempDir::new("uptask6");
    let ro = dir.join("o.rec");
    let f = Fixture::new("uptask6", json!({"o": fixture("o", &ro, false)}));
    let mut s = Session::start(Launch::mcp(&f.config, &[]));
    let init = s.ready("2025-11-25");
    assert_eq!(init["capabilities"].get("tasks"), None, "{init}");
    for (id, method) in [(1, "tasks/get"), (2, "tasks/result"), (3, "tasks/cancel")] {
        let r = ask(&mut s, &request(id, method, json!({"taskId": "sp-x"})));
        assert_eq!(r["error"]["code"], -32601, "{method}: {r}");
    }
    s.finish();
}

/// 2026-07-28 (stateless) moved tasks to an extension sp does not speak: its clients are
/// not told of task support, a `task` member makes an ordinary call, the task methods
/// are -32601.
#[test]
fn the_stateless_revision_gets_no_tasks() {
    let dir = TempDir::new("uptask7");
    let ra = dir.join("a.rec");
    let f = Fixture::new("uptask7", json!({"a": fixture("a", &ra, true)}));
    let mut s = Session::start(Launch::mcp(&f.config, &[]));
    let meta = json!({"io.modelcontextprotocol/protocolVersion": "2026-07-28", "io.modelcontextprotocol/clientCapabilities": {}});
    let list = ask(&mut s, &request(1, "tools/list", json!({"_meta": meta})));
    let tools = list["result"]["tools"].as_array().unwrap_or_else(|| panic!("{list}"));
    assert!(tools.iter().any(|t| t["name"] == "a_slow") && tools.iter().all(|t| t.get("execution").is_none()), "{list}");
    let r = ask(&mut s, &request(2, "tools/call", json!({"name": "a_slow", "arguments": {}, "task": {"ttl": 1}, "_meta": meta})));
    assert_eq!(r["result"]["content"][0]["text"], "slow done by a, token=[REDACTED:tok]", "{r}");
    assert!(asked(&ra, "tools/call")[0].get("task").is_none());
    let g = ask(&mut s, &request(3, "tasks/get", json!({"taskId": "sp-x", "_meta": meta})));
    assert_eq!(g["error"]["code"], -32601, "{g}");
    s.finish();
}

/// A restarted upstream lost its tasks: sp does not send the old id to the new process
/// (whose own `t1` is another task).
#[test]
fn a_task_of_an_upstream_that_died_is_lost() {
    let dir = TempDir::new("uptask8");
    let ra = dir.join("a.rec");
    let f = Fixture::new("uptask8", json!({"a": fixture("a", &ra, true)}));
    let mut s = Session::start(Launch::mcp(&f.config, &[]));
    s.ready("2025-11-25");
    let old = created(&mut s, 1, "a_slow");
    let crash = ask(&mut s, &request(2, "tools/call", json!({"name": "a_crash", "arguments": {}})));
    assert_eq!(crash["result"]["isError"], true, "{crash}");
    let lost = "the task is lost: upstream a was restarted or ended since it created the task";
    let r = ask(&mut s, &request(3, "tasks/get", json!({"taskId": old})));
    assert_eq!((&r["error"]["code"], r["error"]["message"].as_str()), (&json!(-32602), Some(lost)), "{r}");
    // Started again by a new task; the old id still reaches nothing.
    let new = created(&mut s, 4, "a_slow");
    let r = ask(&mut s, &request(5, "tasks/result", json!({"taskId": old})));
    assert_eq!(r["error"]["message"].as_str(), Some(lost), "{r}");
    let got = ask(&mut s, &request(6, "tasks/get", json!({"taskId": new})));
    assert_eq!(got["result"]["status"], "working", "{got}");
    s.finish();
    // Only the new process was asked: the client's poll, then sp's own at the session's
    // end (the new task completed then: its result fetched for its row).
    let lines = recorded(&ra);
    let second_start = lines.iter().rposition(|m| m["method"] == "initialize").unwrap();
    let gets: Vec<usize> = lines.iter().enumerate().filter(|(_, m)| m["method"] == "tasks/get").map(|(i, _)| i).collect();
    assert!(gets.len() == 2 && gets.iter().all(|i| *i > second_start), "{lines:?}");
    assert_eq!(asked(&ra, "tasks/result").len(), 1);
    // One result row per task: the old one's as soon as sp saw its upstream die.
    let journal = f.journal();
    let rows = result_rows(&journal, "a_slow");
    assert_eq!(rows.iter().map(|r| r.0.as_str()).collect::<Vec<_>>(), ["upstream_gone", "ok"], "{journal:?}");
    verified(&f);
}

/// The decision and `is_error` of each result row of `tool`, in order.
fn result_rows(journal: &[Value], tool: &str) -> Vec<(String, Value)> {
    journal
        .iter()
        .filter(|r| r["kind"] == "result" && r["tool"] == tool)
        .map(|r| (r["decision"].as_str().unwrap_or_default().to_owned(), r["is_error"].clone()))
        .collect()
}

/// `sp audit verify` passes on the fixture's journal.
fn verified(f: &Fixture) {
    let journal = f.dir.join("audit.jsonl");
    support::process::run_sp(&["audit", "verify", &journal], &[], b"").assert_exit(0);
}

/// Waits until the upstream recorded `method` (at most 10 s).
fn until_asked(path: &str, method: &str) {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while asked(path, method).is_empty() {
        assert!(std::time::Instant::now() < deadline, "the upstream never received {method} within 10 s");
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}

/// A task seen completed has its result row then (sp fetches the result for it); a
/// later `tasks/result` gets that result and writes no second row (issue 33 §4).
#[test]
fn a_task_seen_completed_is_journaled_then_and_a_later_fetch_writes_no_row() {
    let dir = TempDir::new("uptask9");
    let ra = dir.join("a.rec");
    let f = Fixture::new("uptask9", json!({"a": fixture("a", &ra, true)}));
    let mut s = Session::start(Launch::mcp(&f.config, &[]));
    s.ready("2025-11-25");
    let tid = created(&mut s, 1, "a_slow");
    let first = ask(&mut s, &request(2, "tasks/get", json!({"taskId": tid})));
    assert_eq!(first["result"]["status"], "working", "{first}");
    assert!(asked(&ra, "tasks/result").is_empty(), "nothing fetched while it works");
    let second = ask(&mut s, &request(3, "tasks/get", json!({"taskId": tid})));
    assert_eq!(second["result"]["status"], "completed", "{second}");
    assert_eq!(asked(&ra, "tasks/result"), [json!({"taskId": "t1"})], "sp fetches the result when it sees the task ended");
    for id in [4, 5] {
        let r = ask(&mut s, &request(id, "tasks/result", json!({"taskId": tid})));
        assert_eq!(r["result"]["content"][0]["text"], "slow done by a, token=[REDACTED:tok]", "{r}");
        assert_eq!(r["result"]["_meta"], json!({"io.modelcontextprotocol/related-task": {"taskId": tid}}), "{r}");
    }
    assert_eq!(asked(&ra, "tasks/result").len(), 1, "the kept result is delivered; the upstream is not asked again");
    let run = s.finish();
    assert!(!String::from_utf8_lossy(&run.stdout).contains(&f.secret), "the secret reached stdout");
    let journal = f.journal();
    assert_eq!(result_rows(&journal, "a_slow"), [("ok".to_owned(), json!(false))], "{journal:?}");
    verified(&f);
}

/// Tasks the client never fetches end with one result row each at the session's end:
/// a completed one's result is fetched, a running one is cancelled upstream.
#[test]
fn tasks_never_fetched_get_their_result_row_at_the_session_end() {
    let dir = TempDir::new("uptask10");
    let ra = dir.join("a.rec");
    let f = Fixture::new("uptask10", json!({"a": fixture("a", &ra, true)}));
    let mut s = Session::start(Launch::mcp(&f.config, &[]));
    s.ready("2025-11-25");
    created(&mut s, 1, "a_quick");
    created(&mut s, 2, "a_slow");
    let run = s.finish();
    assert!(!String::from_utf8_lossy(&run.stdout).contains(&f.secret), "the secret reached stdout");
    assert_eq!(asked(&ra, "tasks/get"), [json!({"taskId": "t1"}), json!({"taskId": "t2"})]);
    assert_eq!(asked(&ra, "tasks/result"), [json!({"taskId": "t1"})]);
    assert_eq!(asked(&ra, "tasks/cancel"), [json!({"taskId": "t2"})], "the running task is cancelled upstream");
    let journal = f.journal();
    assert_eq!(result_rows(&journal, "a_quick"), [("ok".to_owned(), json!(false))], "{journal:?}");
    assert_eq!(result_rows(&journal, "a_slow"), [("abandoned".to_owned(), Value::Null)], "{journal:?}");
    let abandoned = journal.iter().find(|r| r["kind"] == "result" && r["tool"] == "a_slow").unwrap();
    assert_eq!(abandoned["reason"], "the session ended before the task did: tasks/cancel sent to the upstream");
    // Both before the session's end row.
    let end = journal.iter().position(|r| r["kind"] == "end").unwrap();
    assert!(journal.iter().rposition(|r| r["kind"] == "result").unwrap() < end);
    verified(&f);
}

/// The client cancels a task-augmented call while the upstream is still creating the
/// task; the upstream creates it anyway (its answer comes late): sp cancels that task.
#[test]
fn a_task_created_for_a_cancelled_call_is_cancelled_upstream() {
    let dir = TempDir::new("uptask11");
    let ra = dir.join("a.rec");
    let mut up = fixture("a", &ra, true);
    up["env"]["LAZY"] = json!("0.5");
    let f = Fixture::new("uptask11", json!({"a": up}));
    let mut s = Session::start(Launch::mcp(&f.config, &[]));
    s.ready("2025-11-25");
    s.send(&task_call(1, "a_lazy", json!({"ttl": 60000})));
    until_asked(&ra, "tools/call");
    s.send(&json!({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 1, "reason": "changed my mind"}}));
    let pong = ask(&mut s, &request(2, "ping", json!({})));
    assert_eq!(pong["result"], json!({}), "{pong}");
    s.finish();
    assert_eq!(asked(&ra, "tasks/cancel"), [json!({"taskId": "t1"})], "the orphaned task was not cancelled upstream");
    let journal = f.journal();
    assert_eq!(result_rows(&journal, "a_lazy"), [("cancelled".to_owned(), Value::Null)], "{journal:?}");
    verified(&f);
}

/// A tool pinned without task support that the upstream then lists with
/// `execution.taskSupport` "optional" is a changed tool: withheld, `SP_TOOL_CHANGED`.
#[test]
fn a_task_support_flip_after_the_pin_is_a_changed_tool() {
    let dir = TempDir::new("uptask12");
    let (ra, flip) = (dir.join("a.rec"), dir.join("flip"));
    let mut up = fixture("a", &ra, true);
    up["pin"] = json!("first-use");
    up["env"]["FLIP"] = json!(flip);
    let f = Fixture::new("uptask12", json!({"a": up}));
    let names = |s: &mut Session, id: i64| -> Vec<String> {
        let list = ask(s, &request(id, "tools/list", json!({})));
        list["result"]["tools"].as_array().unwrap_or_else(|| panic!("{list}")).iter().map(|t| t["name"].as_str().unwrap().to_owned()).collect()
    };
    let mut s = Session::start(Launch::mcp(&f.config, &[]));
    s.ready("2025-11-25");
    assert!(names(&mut s, 1).contains(&"a_plain".to_owned()), "pinned at first use and listed");
    s.finish();
    std::fs::write(&flip, b"").unwrap();
    let mut s = Session::start(Launch::mcp(&f.config, &[]));
    s.ready("2025-11-25");
    let now = names(&mut s, 1);
    assert!(!now.contains(&"a_plain".to_owned()) && now.contains(&"a_slow".to_owned()), "{now:?}");
    let r = ask(&mut s, &request(2, "tools/call", json!({"name": "a_plain", "arguments": {}})));
    assert_eq!(support::process::tool_error_code(&r["result"]), Some("SP_TOOL_CHANGED"), "{r}");
    s.finish();
    assert_eq!(asked(&ra, "tools/call").len(), 0, "the changed tool never ran");
}

/// A task the upstream reports completed (`notifications/tasks/status`) has its result
/// row when sp reads that (here at the next `tools/list`), not only at the session end.
#[test]
fn a_task_reported_completed_is_journaled_when_sp_reads_the_report() {
    let dir = TempDir::new("uptask13");
    let ra = dir.join("a.rec");
    let f = Fixture::new("uptask13", json!({"a": fixture("a", &ra, true)}));
    let mut s = Session::start(Launch::mcp(&f.config, &[]));
    s.ready("2025-11-25");
    let tid = created(&mut s, 1, "a_note");
    assert!(asked(&ra, "tasks/result").is_empty());
    // Each tools/list reads what the upstream wrote meanwhile (the report follows the
    // CreateTaskResult at once; listed again while it is still on its way).
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    for id in 100.. {
        let list = ask(&mut s, &request(id, "tools/list", json!({})));
        assert!(list["result"]["tools"].is_array(), "{list}");
        if !asked(&ra, "tasks/result").is_empty() {
            break;
        }
        assert!(std::time::Instant::now() < deadline, "sp did not fetch the result of a task reported completed within 10 s");
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    assert_eq!(asked(&ra, "tasks/result"), [json!({"taskId": "t1"})]);
    let r = ask(&mut s, &request(3, "tasks/result", json!({"taskId": tid})));
    assert_eq!(r["result"]["content"][0]["text"], "note done by a, token=[REDACTED:tok]", "{r}");
    s.finish();
    assert_eq!(asked(&ra, "tasks/result").len(), 1, "the kept result was delivered");
    assert!(asked(&ra, "tasks/get").is_empty(), "nothing asked at the end of an ended task");
    let journal = f.journal();
    assert_eq!(result_rows(&journal, "a_note"), [("ok".to_owned(), json!(false))], "{journal:?}");
    verified(&f);
}

/// A task whose ttl (as the upstream granted it) runs out before its result is fetched
/// ends `expired`, once; the session's end asks nothing more about it.
#[test]
fn a_task_whose_ttl_ran_out_unfetched_is_expired() {
    let dir = TempDir::new("uptask14");
    let ra = dir.join("a.rec");
    let f = Fixture::new("uptask14", json!({"a": fixture("a", &ra, true)}));
    let mut s = Session::start(Launch::mcp(&f.config, &[]));
    s.ready("2025-11-25");
    let r = ask(&mut s, &task_call(1, "a_slow", json!({"ttl": 50})));
    assert_eq!(r["result"]["task"]["ttl"], 50, "{r}");
    // The ttl is a time: waited out (the upstream's 50 ms, and some).
    std::thread::sleep(std::time::Duration::from_millis(150));
    let list = ask(&mut s, &request(2, "tools/list", json!({})));
    assert!(list["result"]["tools"].is_array(), "{list}");
    s.finish();
    assert!(asked(&ra, "tasks/get").is_empty() && asked(&ra, "tasks/cancel").is_empty(), "an expired task was asked about");
    let journal = f.journal();
    assert_eq!(result_rows(&journal, "a_slow"), [("expired".to_owned(), Value::Null)], "{journal:?}");
    let row = journal.iter().find(|r| r["kind"] == "result" && r["tool"] == "a_slow").unwrap();
    assert_eq!(row["reason"], "the task's ttl (50 ms) ran out before its result was fetched");
    verified(&f);
}
