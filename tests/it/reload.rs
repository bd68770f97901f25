//! Reloading the policy without restarting the session (issue 35 section 3) through the
//! built `sp`: SIGHUP, `"reload": "watch"`, a file that does not validate, and a call
//! in flight while the policy changes.
//!
//! The two policies: `allow_get` lets GET reach `/open/*` of a loopback server (tools
//! `http_request`, `http_get`, `sp_inventory`); `allow_post` lets only POST there, so a
//! GET is denied and `http_get` is no longer listed (the tool set changes).
//!
//! Attacks tried (all held):
//! - a GET allowed, then the policy swapped for one that denies it: the next GET is
//!   `SP_DENIED` and the loopback server sees no second request;
//! - a file that does not validate (a wrong type in `http.allow`): refused with a
//!   `policy_reload_failed` row naming the field; the old policy still allows the GET,
//!   and the client is told of no change;
//! - a reload asked while a call runs (its upstream answer delayed): the call finishes
//!   under the policy it started with (its answer is the server's, not a denial, its
//!   `result` row is written before the `policy_reload` row), the next call is denied;
//! - under `"reload": "watch"`, a new file renamed over the old one with no signal: the
//!   change is applied and the client told.
#![allow(
    clippy::disallowed_methods,
    reason = "tests and benchmarks start sp, sshd and clients and read their environment; the fence in clippy.toml is for src/"
)]

use crate::support;

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use support::http_server::{Reply, TestServer};
use support::process::{tool_call, tool_error_code, Launch, Session, TempDir};

struct Fixture {
    dir: TempDir,
    policy: PathBuf,
    journal: PathBuf,
    host: String,
}

impl Fixture {
    fn new(server: &TestServer, watch: bool) -> Fixture {
        let dir = TempDir::new("reload");
        let host = server.base().trim_start_matches("http://").to_owned();
        let journal = dir.path.join("audit.jsonl");
        let f = Fixture { policy: dir.path.join("policy.json"), dir, journal, host };
        f.write(&f.allow("GET", watch));
        f
    }

    /// A policy that lets `method` reach `/open/*` of the server.
    fn allow(&self, method: &str, watch: bool) -> Value {
        let mut p = json!({
            "http": {"allow": [{"hosts": [self.host], "methods": [method], "paths": ["/open/*"]}]},
            "audit": {"path": self.journal.display().to_string()}
        });
        if watch {
            p["reload"] = json!("watch");
        }
        p
    }

    /// Replaces the policy file as an editor or a deployment does: a new file renamed
    /// over it. Returns the bytes written.
    fn write(&self, policy: &Value) -> Vec<u8> {
        self.write_bytes(policy.to_string().into_bytes())
    }

    fn write_bytes(&self, bytes: Vec<u8>) -> Vec<u8> {
        let new = self.dir.file("policy.json.new", &bytes, 0o600);
        std::fs::rename(new, &self.policy).expect("rename the new policy into place");
        bytes
    }

    fn launch(&self) -> Launch {
        Launch::mcp(&self.policy, &[])
    }
}

fn get(server: &TestServer, path: &str) -> Value {
    json!({"method": "GET", "url": format!("{}{path}", server.base())})
}

fn rows(path: &Path) -> Vec<Value> {
    std::fs::read_to_string(path).unwrap_or_default().lines().filter_map(|l| serde_json::from_str(l).ok()).collect()
}

/// Waits until the journal has a row of `kind` (evidence, not a sleep), at most 20 s.
fn wait_for_row(path: &Path, kind: &str) -> Value {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        if let Some(row) = rows(path).into_iter().find(|r| r["kind"] == kind) {
            return row;
        }
        assert!(Instant::now() < deadline, "no {kind} row in {} within 20 s", path.display());
        std::thread::sleep(Duration::from_millis(10));
    }
}

fn hup(sp: &Session) {
    use rustix::process::{kill_process, Pid, Signal};
    kill_process(Pid::from_raw(sp.pid() as i32).expect("pid"), Signal::HUP).expect("kill -HUP");
}

fn sha256(bytes: &[u8]) -> String {
    use sha2::{Digest, Sha256};
    Sha256::digest(bytes).iter().map(|b| format!("{b:02x}")).collect()
}

fn tool_names(list: &Value) -> Vec<String> {
    list["result"]["tools"].as_array().expect("tools").iter().map(|t| t["name"].as_str().expect("name").to_owned()).collect()
}

#[test]
fn sighup_applies_a_valid_policy_and_tells_the_client_the_tools_changed() {
    let server = TestServer::start();
    server.route("/open/a", Reply::json(200, r#"{"ok":true}"#));
    let f = Fixture::new(&server, false);
    let mut sp = Session::start(f.launch());
    let init = sp.ready("2025-06-18");
    // A reload can change the tools: the client is told it may be told so.
    assert_eq!(init["capabilities"]["tools"]["listChanged"], true, "{init}");
    let before = sp.call(&json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}));
    assert!(tool_names(&before).contains(&"http_get".to_owned()), "{before}");
    let ok = sp.tool(2, "http_request", get(&server, "/open/a"));
    assert_eq!(tool_error_code(&ok), None, "{ok}");
    let written = f.write(&f.allow("POST", false));
    hup(&sp);
    let note = sp.read_for("notifications/tools/list_changed after SIGHUP");
    assert_eq!(note, json!({"jsonrpc": "2.0", "method": "notifications/tools/list_changed"}));
    let after = sp.call(&json!({"jsonrpc": "2.0", "id": 3, "method": "tools/list"}));
    assert!(!tool_names(&after).contains(&"http_get".to_owned()), "{after}");
    let denied = sp.tool(4, "http_request", get(&server, "/open/a"));
    assert_eq!(tool_error_code(&denied), Some("SP_DENIED"), "{denied}");
    let run = sp.finish();
    run.assert_exit(0);
    server.settle();
    assert_eq!(server.requests().len(), 1, "the denied GET never reached the server");
    let row = rows(&f.journal).into_iter().find(|r| r["kind"] == "policy_reload").expect("a policy_reload row");
    assert_eq!(row["decision"], "applied", "{row}");
    assert_eq!(row["reason"], format!("sha256 {}", sha256(&written)), "the new policy's hash: {row}");
    assert_eq!(row["target"], std::path::absolute(&f.policy).expect("absolute").display().to_string(), "{row}");
}

#[test]
fn an_invalid_policy_is_refused_with_a_row_and_the_old_one_stays() {
    let server = TestServer::start();
    server.route("/open/a", Reply::json(200, r#"{"ok":true}"#));
    let f = Fixture::new(&server, false);
    let mut sp = Session::start(f.launch());
    sp.ready("2025-06-18");
    f.write(&json!({"http": {"allow": "everything"}, "audit": {"path": f.journal.display().to_string()}}));
    hup(&sp);
    let row = wait_for_row(&f.journal, "policy_reload_failed");
    assert_eq!(row["decision"], "refused", "{row}");
    let reason = row["reason"].as_str().expect("a reason");
    assert!(reason.contains("http.allow"), "the reason names the field: {row}");
    // The old policy is in force: the GET is allowed, and no list change was announced
    // (the answer is the next line on stdout).
    let ok = sp.tool(1, "http_request", get(&server, "/open/a"));
    assert_eq!(tool_error_code(&ok), None, "{ok}");
    let run = sp.finish();
    run.assert_exit(0);
    assert!(!run.protocol().iter().any(|m| m["method"] == "notifications/tools/list_changed"), "{}", run.context());
    assert!(!rows(&f.journal).iter().any(|r| r["kind"] == "policy_reload"), "nothing was applied");
    server.settle();
    assert_eq!(server.requests().len(), 1);
}

#[test]
fn watch_mode_applies_a_changed_file_without_a_signal() {
    let server = TestServer::start();
    server.route("/open/a", Reply::json(200, r#"{"ok":true}"#));
    let f = Fixture::new(&server, true);
    let mut sp = Session::start(f.launch());
    sp.ready("2025-06-18");
    let ok = sp.tool(1, "http_request", get(&server, "/open/a"));
    assert_eq!(tool_error_code(&ok), None, "{ok}");
    let written = f.write(&f.allow("POST", true));
    // The watcher looks once a second: the notification comes without any request.
    let note = sp.read_for("notifications/tools/list_changed after the file changed");
    assert_eq!(note["method"], "notifications/tools/list_changed", "{note}");
    let denied = sp.tool(2, "http_request", get(&server, "/open/a"));
    assert_eq!(tool_error_code(&denied), Some("SP_DENIED"), "{denied}");
    sp.finish().assert_exit(0);
    let row = rows(&f.journal).into_iter().find(|r| r["kind"] == "policy_reload").expect("a policy_reload row");
    assert_eq!(row["reason"], format!("sha256 {}", sha256(&written)), "{row}");
}

#[test]
fn a_call_in_flight_finishes_under_the_policy_it_started_with() {
    let server = TestServer::start();
    let mut slow = Reply::json(200, r#"{"slow":true}"#);
    slow.delay_ms = 1500;
    server.route("/open/slow", slow);
    server.route("/open/a", Reply::json(200, r#"{"ok":true}"#));
    let f = Fixture::new(&server, false);
    let mut sp = Session::start(f.launch());
    sp.ready("2025-06-18");
    sp.send(&tool_call(1, "http_request", get(&server, "/open/slow")));
    // The intent row is written before the request goes out: the call is running.
    wait_for_row(&f.journal, "intent");
    f.write(&f.allow("POST", false));
    hup(&sp);
    let answer = sp.read_for("the slow call's answer");
    assert_eq!(answer["id"], 1, "{answer}");
    assert_eq!(tool_error_code(&answer["result"]), None, "ran under the old policy: {answer}");
    assert_eq!(answer["result"]["structuredContent"]["status"], 200, "{answer}");
    let note = sp.read_for("notifications/tools/list_changed after the call");
    assert_eq!(note["method"], "notifications/tools/list_changed", "{note}");
    let denied = sp.tool(2, "http_request", get(&server, "/open/a"));
    assert_eq!(tool_error_code(&denied), Some("SP_DENIED"), "{denied}");
    sp.finish().assert_exit(0);
    let rows = rows(&f.journal);
    let at = |kind: &str| rows.iter().position(|r| r["kind"] == kind).unwrap_or_else(|| panic!("no {kind} row: {rows:?}"));
    assert!(at("result") < at("policy_reload"), "the call ended before the reload: {rows:?}");
}
