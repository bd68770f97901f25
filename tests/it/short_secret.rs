//! Issue #20, item 1: a short secret must never break the protocol envelope, the journal
//! or the logs. Through the built `sp mcp`, against loopback servers: a token endpoint
//! that answers a one-byte token is refused (SP_UPSTREAM, the token neither used nor
//! cached) and every later answer is whole; static secrets shorter than 8 bytes stop
//! `sp check` and `sp mcp` naming the credential; an operator's knowingly lowered
//! minimum lets a 4-byte secret in, and then it is scrubbed from bodies while sp's own
//! words (result keys, tool names, codes, journal fields and enumerations) stay as sp
//! wrote them; no internal sentinel reaches stdout, the journal or stderr.
//!
//! Attacks tried (the ones marked "was open" broke before this change; the rest held):
//! - a token endpoint answering `{"access_token":"e","token_type":"Bearer"}`: every later
//!   answer's keys scrubbed (`cont[REDACTED:x]nt`), the NUL-keyed render marker on the
//!   wire, journal `tool`/`target`/`reason` unreadable (was open); now SP_UPSTREAM, the
//!   API never called with it, a fresh fetch on the next call;
//! - a token of `"`: sp withheld every later answer (was open); now refused, and with
//!   `min_secret_bytes: 1` knowingly set, later answers are still sent;
//! - a token response naming `access_token` twice, the second a different value (was
//!   open: the last one won); refused, nothing used;
//! - a 3-byte `env` secret and a `basic` secret whose password is 4 bytes: served and
//!   scrubbed everywhere (was open); now `sp check` and `sp mcp` refuse, naming the
//!   credential and never the value;
//! - a 3-byte `command` source (read only at call time): SP_UNAVAILABLE naming it;
//! - `min_secret_bytes: 4` with secrets `text`, `http` and `name` (words of the
//!   envelope, of the tool name `http_request`, of every URL and of `sp_inventory`'s
//!   keys): the body echo is redacted; result keys, the inventory's keys and names,
//!   the `type` value, tool names, codes, journal field names, `kind`, `decision` and
//!   `tool` intact; the text block still equals the JSON of `structuredContent`;
//!   `sp audit verify` ok; log lines readable (`executing GET http://...`);
//! - `\u0000` and `sp:text` searched for on stdout, in the journal and on stderr.
#![allow(
    clippy::disallowed_methods,
    reason = "tests and benchmarks start sp, sshd and clients and read their environment; the fence in clippy.toml is for src/"
)]

use crate::support;

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use serde_json::{json, Value};

use support::http_server::{Echo, Reply, TestServer};
use support::process::{run_sp, tool_error_code, Launch, Run, Session, TempDir};

/// Journal field names (`sp-audit(1)`), kinds and tools: sp's own words.
const FIELDS: [&str; 22] = [
    "seq",
    "ts",
    "session",
    "kind",
    "tool",
    "target",
    "decision",
    "rule",
    "reason",
    "code",
    "request_fp",
    "credential",
    "status",
    "exit_status",
    "bytes_in",
    "bytes_out",
    "truncated",
    "duration_ms",
    "host_key_fp",
    "approver_exit",
    "prev",
    "hash",
];
const KINDS: [&str; 8] = ["start", "reject", "approval", "intent", "token", "result", "end", "recover"];
const TOOLS: [&str; 3] = ["http_request", "ssh_exec", "sp_inventory"];

fn rows(path: &Path) -> Vec<Value> {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("read {}: {e}", path.display()));
    text.lines().map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("row {l:?}: {e}"))).collect()
}

/// Every journal row has only journal fields, and its own words are sp's: a kind, a tool
/// name, a decision word, a code. The chain verifies.
fn assert_journal_readable(journal: &Path) {
    let text = std::fs::read_to_string(journal).unwrap();
    assert!(!text.contains("\\u0000") && !text.contains("sp:text") && !text.contains('\0'), "a sentinel in the journal: {text}");
    for row in rows(journal) {
        let m = row.as_object().unwrap();
        for k in m.keys() {
            assert!(FIELDS.contains(&k.as_str()), "field {k:?} in {row}");
        }
        assert!(KINDS.contains(&row["kind"].as_str().unwrap_or("")), "{row}");
        if let Some(tool) = row.get("tool") {
            assert!(TOOLS.contains(&tool.as_str().unwrap_or("")), "{row}");
        }
        if let Some(d) = row.get("decision") {
            let d = d.as_str().unwrap();
            assert!(!d.is_empty() && d.bytes().all(|b| b.is_ascii_lowercase() || b == b'_' || b.is_ascii_digit()), "decision {d:?}: {row}");
        }
        if let Some(code) = row.get("code") {
            let c = code.as_str().unwrap();
            assert!(c.starts_with("SP_") && c[3..].bytes().all(|b| b.is_ascii_uppercase() || b == b'_') || c.parse::<i64>().is_ok(), "code {c:?}: {row}");
        }
    }
    let j = journal.display().to_string();
    let verify = run_sp(&["audit", "verify", &j], &[], b"");
    assert_eq!(verify.code(), Some(0), "{}", verify.context());
}

/// Every line of stdout is one JSON-RPC message; each `tools/call` result has exactly the
/// envelope sp writes, and its text block is the JSON of `structuredContent` (after an
/// error's `code: message` line).
fn assert_envelopes_whole(run: &Run) {
    let out = String::from_utf8(run.stdout.clone()).expect("stdout is UTF-8");
    assert!(!out.contains("\\u0000") && !out.contains("sp:text"), "a sentinel on stdout: {out}");
    assert!(!run.stderr.contains("\\u{0}sp") && !run.stderr.contains("sp:text"), "a sentinel on stderr: {}", run.stderr);
    for line in out.lines() {
        let v: Value = serde_json::from_str(line).unwrap_or_else(|e| panic!("{e}: {line}"));
        let keys: Vec<&String> = v.as_object().unwrap().keys().collect();
        assert!(keys == ["id", "jsonrpc", "result"] || keys == ["error", "id", "jsonrpc"], "{line}");
        assert_eq!(v["jsonrpc"], "2.0");
        let Some(result) = v["result"].as_object() else { continue };
        if !result.contains_key("structuredContent") {
            continue; // initialize, tools/list
        }
        assert_eq!(result.keys().collect::<Vec<_>>(), ["content", "isError", "structuredContent"], "{line}");
        let block = v["result"]["content"][0].as_object().unwrap();
        assert_eq!(block.keys().collect::<Vec<_>>(), ["text", "type"], "{line}");
        assert_eq!(block["type"], "text", "{line}");
        let text = block["text"].as_str().unwrap();
        let sc = &v["result"]["structuredContent"];
        if v["result"]["isError"] == true {
            let code = sc["error"]["code"].as_str().unwrap();
            assert!(code.starts_with("SP_"), "{line}");
            assert!(text.starts_with(&format!("{code}: ")), "{line}");
            let json_part = text.split_once('\n').map(|(_, j)| j);
            if let Some(j) = json_part {
                assert_eq!(&serde_json::from_str::<Value>(j).unwrap(), sc, "{line}");
            }
        } else {
            assert_eq!(&serde_json::from_str::<Value>(text).unwrap(), sc, "{line}");
        }
    }
}

/// A token endpoint whose answers are set by the test, an API that counts the calls
/// that reach it (and what Authorization they carried), and a plain allowed path.
struct Fixture {
    server: TestServer,
    answers: Arc<Mutex<Vec<String>>>,
    fetches: Arc<AtomicUsize>,
    api_auth: Arc<Mutex<Vec<String>>>,
    _dir: TempDir,
    policy: PathBuf,
    journal: PathBuf,
}

fn fixture(min_secret_bytes: Option<u64>) -> Fixture {
    let server = TestServer::start();
    let answers: Arc<Mutex<Vec<String>>> = Arc::default();
    let fetches: Arc<AtomicUsize> = Arc::default();
    let api_auth: Arc<Mutex<Vec<String>>> = Arc::default();
    {
        let (answers, fetches) = (answers.clone(), fetches.clone());
        server.handle("/oauth/token", move |_| {
            let n = fetches.fetch_add(1, Ordering::SeqCst);
            let all = answers.lock().unwrap();
            Reply::json(200, &all[n.min(all.len() - 1)])
        });
        let seen = api_auth.clone();
        server.handle("/api/data", move |r| {
            seen.lock().unwrap().push(r.header("authorization").unwrap_or_default().to_owned());
            Reply::json(200, r#"{"ok":true}"#)
        });
    }
    server.route("/plain/words", Reply::json(200, r#"{"text":"type content e \" : { } isError structuredContent","n":1}"#));
    let dir = TempDir::new("short-secret");
    let host = format!("127.0.0.1:{}", server.port);
    let source = dir.file("client", b"sp-test-client:client-secret-1234567890\n", 0o600);
    let journal = dir.path.join("audit.jsonl");
    let mut saas = json!({
        "source": {"file": source.display().to_string()},
        "inject": {"oauth2": {"token_url": format!("http://{host}/oauth/token")}},
        "hosts": [host], "paths": ["/api/*"]
    });
    if let Some(n) = min_secret_bytes {
        saas["min_secret_bytes"] = json!(n);
    }
    let policy = json!({
        "credentials": {"saas": saas},
        "http": {"allow": [{"hosts": [host], "methods": ["GET"], "paths": ["/api/*", "/plain/*"]}]},
        "audit": {"path": journal.display().to_string()}
    });
    let policy = dir.file("policy.json", policy.to_string().as_bytes(), 0o600);
    Fixture { server, answers, fetches, api_auth, _dir: dir, policy, journal }
}

fn get(s: &mut Session, id: i64, f: &Fixture, path: &str) -> Value {
    s.tool(id, "http_request", json!({"method": "GET", "url": format!("{}{path}", f.server.base())}))
}

#[test]
fn a_token_endpoint_answering_a_short_token_is_sp_upstream_and_every_later_answer_is_whole() {
    for (token, why) in [("e", "shorter than 8 bytes"), ("\"", "shorter than 8 bytes"), ("abc1234", "shorter than 8 bytes")] {
        let f = fixture(None);
        *f.answers.lock().unwrap() = vec![json!({"access_token": token, "token_type": "Bearer"}).to_string()];
        let mut s = Session::start(Launch::mcp(&f.policy, &[]).env("SP_LOG", "info"));
        s.ready("2025-06-18");
        for id in 1..=2 {
            let r = get(&mut s, id, &f, "/api/data");
            assert_eq!(tool_error_code(&r), Some("SP_UPSTREAM"), "{token:?}: {r}");
            let msg = r["structuredContent"]["error"]["message"].as_str().unwrap();
            assert!(msg.contains("\"saas\"") && msg.contains(why), "{token:?}: {msg}");
        }
        // Not cached: each call asked again; not used: the API saw nothing.
        assert_eq!(f.fetches.load(Ordering::SeqCst), 2, "{token:?}");
        assert!(f.api_auth.lock().unwrap().is_empty(), "{token:?}: the API was called");
        // Later answers: the body comes back as the server sent it (the short token was
        // never remembered), the inventory too.
        let plain = get(&mut s, 3, &f, "/plain/words");
        assert_eq!(plain["structuredContent"]["json"], json!({"text": "type content e \" : { } isError structuredContent", "n": 1}), "{token:?}");
        let inv = s.tool(4, "sp_inventory", json!({}));
        assert_eq!(inv["isError"], false, "{inv}");
        assert_eq!(inv["structuredContent"]["http"]["credentials"][0]["name"], "saas", "{inv}");
        let run = s.finish();
        run.assert_exit(0);
        assert_envelopes_whole(&run);
        assert!(run.stderr.contains("executing GET http://127.0.0.1:"), "log lines unreadable: {}", run.stderr);
        assert_journal_readable(&f.journal);
        let tokens: Vec<Value> = rows(&f.journal).into_iter().filter(|r| r["kind"] == "token").collect();
        assert_eq!(tokens.len(), 2);
        for t in &tokens {
            assert_eq!((t["decision"].as_str(), t["code"].as_str(), t["tool"].as_str()), (Some("error"), Some("SP_UPSTREAM"), Some("http_request")), "{t}");
        }
    }
}

#[test]
fn a_token_response_that_names_a_member_twice_is_refused() {
    let f = fixture(None);
    let body = r#"{"access_token":"first-token-value-0001","token_type":"Bearer","access_token":"second-token-value-0002"}"#;
    *f.answers.lock().unwrap() = vec![body.to_owned()];
    let mut s = Session::start(Launch::mcp(&f.policy, &[]));
    s.ready("2025-06-18");
    let r = get(&mut s, 1, &f, "/api/data");
    assert_eq!(tool_error_code(&r), Some("SP_UPSTREAM"), "{r}");
    assert_eq!(r["structuredContent"]["error"]["message"], "credential \"saas\": token response names a member twice", "{r}");
    assert!(f.api_auth.lock().unwrap().is_empty(), "a token was used");
    let run = s.finish();
    run.assert_exit(0);
    assert_envelopes_whole(&run);
    assert_journal_readable(&f.journal);
}

/// `min_secret_bytes: 1`, knowingly: a `"` token is used; answers are not withheld for
/// the quotes of their JSON, and the envelope stays whole.
#[test]
fn a_knowingly_allowed_quote_token_does_not_withhold_every_answer() {
    let f = fixture(Some(1));
    *f.answers.lock().unwrap() = vec![json!({"access_token": "\"", "token_type": "Bearer", "expires_in": 3600}).to_string()];
    let mut s = Session::start(Launch::mcp(&f.policy, &[]));
    s.ready("2025-06-18");
    let r = get(&mut s, 1, &f, "/api/data");
    assert_eq!((r["isError"].clone(), r["structuredContent"]["status"].clone()), (json!(false), json!(200)), "{r}");
    // The quotes of the body are outside text: redacted (so it is no longer JSON), not
    // left, and the answer is not withheld.
    assert_eq!(r["structuredContent"]["body"], "{[REDACTED:saas]ok[REDACTED:saas]:true}", "{r}");
    let inv = s.tool(2, "sp_inventory", json!({}));
    assert_eq!(inv["isError"], false, "{inv}");
    assert_eq!(inv["structuredContent"]["http"]["credentials"][0]["name"], "saas", "{inv}");
    let plain = get(&mut s, 3, &f, "/plain/words");
    assert_eq!(plain["isError"], false, "{plain}");
    let body = plain["structuredContent"]["body"].as_str().unwrap();
    assert!(body.starts_with("{[REDACTED:saas]text[REDACTED:saas]:") && !body.contains('"'), "{plain}");
    let run = s.finish();
    run.assert_exit(0);
    assert!(run.stderr.contains("min_secret_bytes is 1, below the default 8"), "{}", run.stderr);
    assert_envelopes_whole(&run);
    assert_journal_readable(&f.journal);
}

#[test]
fn static_short_secrets_stop_check_and_startup_naming_the_credential() {
    let dir = TempDir::new("short-static");
    let basic = dir.file("basic", b"alice:pw12\n", 0o600);
    let journal = dir.path.join("audit.jsonl");
    let write = |name: &str, creds: Value| {
        let policy = json!({"credentials": creds, "http": {"allow": [{"hosts": ["api.example.com"]}]}, "audit": {"path": journal.display().to_string()}});
        dir.file(name, policy.to_string().as_bytes(), 0o600)
    };
    let cases = [
        (
            write("env.json", json!({"envy": {"source": {"env": "SP_TEST_SHORT"}, "inject": {"bearer": {}}, "hosts": ["api.example.com"]}})),
            "credential \"envy\": the secret is shorter than 8 bytes",
        ),
        (
            write("basic.json", json!({"pair": {"source": {"file": basic}, "inject": {"basic": {}}, "hosts": ["api.example.com"]}})),
            "credential \"pair\": the password (after the first ':') is shorter than 8 bytes",
        ),
    ];
    for (policy, want) in &cases {
        let p = policy.display().to_string();
        let check = run_sp(&["check", "--config", &p], &[("SP_TEST_SHORT", "k3y")], b"");
        assert_ne!(check.code(), Some(0), "{}", check.context());
        assert!(check.stderr.contains(want), "want {want:?}: {}", check.context());
        let mcp = Launch::mcp(policy, &[]).env("SP_TEST_SHORT", "k3y").run(b"");
        assert_eq!(mcp.code(), Some(1), "{}", mcp.context());
        assert!(mcp.stdout.is_empty(), "{}", mcp.context());
        assert!(mcp.stderr.contains(want) && mcp.stderr.contains("refusing to serve"), "{}", mcp.context());
        for run in [&check, &mcp] {
            assert!(!run.stderr.contains("k3y") && !run.stderr.contains("pw12"), "the value was quoted: {}", run.context());
        }
    }
    // Long enough: `sp check` is ok.
    let ok = run_sp(&["check", "--config", &cases[0].0.display().to_string()], &[("SP_TEST_SHORT", "k3y-long-enough")], b"");
    assert_eq!(ok.code(), Some(0), "{}", ok.context());
}

#[test]
fn a_short_command_secret_is_sp_unavailable_when_it_is_read() {
    let server = TestServer::start();
    let dir = TempDir::new("short-command");
    let host = format!("127.0.0.1:{}", server.port);
    let policy = json!({
        "credentials": {"cmd": {"source": {"command": ["printf", "%s", "k3y"]}, "inject": {"bearer": {}}, "hosts": [host]}},
        "http": {"allow": [{"hosts": [host], "methods": ["GET"]}]},
        "audit": {"path": null}
    });
    let policy = dir.file("policy.json", policy.to_string().as_bytes(), 0o600);
    let mut s = Session::start(Launch::mcp(&policy, &[]));
    s.ready("2025-06-18");
    let r = s.tool(1, "http_request", json!({"method": "GET", "url": format!("{}/x", server.base())}));
    assert_eq!(tool_error_code(&r), Some("SP_UNAVAILABLE"), "{r}");
    let msg = r["structuredContent"]["error"]["message"].as_str().unwrap();
    assert!(msg.contains("credential \"cmd\": the secret is shorter than 8 bytes") && !msg.contains("k3y"), "{msg}");
    assert_eq!(server.accepted(), 0, "a request went out");
    let run = s.finish();
    run.assert_exit(0);
    assert_envelopes_whole(&run);
}

/// `min_secret_bytes: 4`, knowingly, with secrets that are words of sp's own vocabulary:
/// the echo is scrubbed; the envelope, tool names, codes and the journal's words are not.
#[test]
fn a_knowingly_lowered_secret_is_scrubbed_from_bodies_and_never_from_sps_own_words() {
    let server = TestServer::start();
    server.echo_route("/a/echo", Echo::Json);
    server.echo_route("/h/echo", Echo::Json);
    server.echo_route("/n/echo", Echo::Json);
    let dir = TempDir::new("short-lowered");
    let host = format!("127.0.0.1:{}", server.port);
    let a = dir.file("a", b"text\n", 0o600);
    let h = dir.file("h", b"http\n", 0o600);
    // A word of sp_inventory's own keys too.
    let n = dir.file("n", b"name\n", 0o600);
    let journal = dir.path.join("audit.jsonl");
    let policy = json!({
        "credentials": {
            "a": {"source": {"file": a}, "inject": {"header": {"name": "X-Api-Key"}}, "hosts": [host], "paths": ["/a/*"], "min_secret_bytes": 4},
            "h": {"source": {"file": h}, "inject": {"bearer": {}}, "hosts": [host], "paths": ["/h/*"], "min_secret_bytes": 4},
            "n": {"source": {"file": n}, "inject": {"bearer": {}}, "hosts": [host], "paths": ["/n/*"], "min_secret_bytes": 4}
        },
        "http": {"allow": [{"hosts": [host], "methods": ["GET"], "paths": ["/a/*", "/h/*", "/n/*"]}]},
        "audit": {"path": journal.display().to_string()}
    });
    let policy = dir.file("policy.json", policy.to_string().as_bytes(), 0o600);
    let check = run_sp(&["check", "--config", &policy.display().to_string()], &[], b"");
    assert_eq!(check.code(), Some(0), "{}", check.context());
    let err = &check.stderr;
    assert!(err.contains("sp: warning: credential \"a\": min_secret_bytes is 4, below the default 8"), "{err}");
    assert!(err.contains("sp: warning: credential \"h\": min_secret_bytes is 4"), "{err}");

    let mut s = Session::start(Launch::mcp(&policy, &[]).env("SP_LOG", "info"));
    s.ready("2025-06-18");
    let ra = s.tool(1, "http_request", json!({"method": "GET", "url": format!("{}/a/echo", server.base())}));
    let rh = s.tool(2, "http_request", json!({"method": "GET", "url": format!("{}/h/echo", server.base())}));
    let rn = s.tool(6, "http_request", json!({"method": "GET", "url": format!("{}/n/echo", server.base())}));
    for r in [&ra, &rh, &rn] {
        assert_eq!((r["isError"].clone(), r["structuredContent"]["status"].clone()), (json!(false), json!(200)), "{r}");
    }
    // The echoes are outside text: scrubbed.
    assert_eq!(ra["structuredContent"]["json"]["x-api-key"], "[REDACTED:a]", "{ra}");
    assert_eq!(rh["structuredContent"]["json"]["authorization"], "Bearer [REDACTED:h]", "{rh}");
    assert_eq!(rh["structuredContent"]["headers"]["x-echo-authorization"], "Bearer [REDACTED:h]", "{rh}");
    // A denial and a bad argument: codes and messages in sp's words.
    let denied = s.tool(3, "http_request", json!({"method": "GET", "url": "http://api.example.com/nope"}));
    assert_eq!(tool_error_code(&denied), Some("SP_DENIED"), "{denied}");
    let bad = s.tool(4, "http_request", json!({"method": "GET"}));
    assert_eq!(tool_error_code(&bad), Some("SP_BAD_ARGUMENTS"), "{bad}");
    let inv = s.tool(5, "sp_inventory", json!({}));
    let names: Vec<&str> = inv["structuredContent"]["http"]["credentials"].as_array().unwrap().iter().map(|c| c["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["a", "h", "n"], "{inv}");
    // Its keys and the operator's names are not outside text: never scrubbed.
    for c in inv["structuredContent"]["http"]["credentials"].as_array().unwrap() {
        assert!(c.get("name").is_some() && c.get("hosts").is_some(), "{inv}");
    }
    let run = s.finish();
    run.assert_exit(0);
    assert_envelopes_whole(&run);
    // Log lines stay readable: the logger does not search for secrets under 8 bytes.
    assert!(run.stderr.contains(&format!("executing GET http://{host}/h/echo")), "{}", run.stderr);
    assert!(run.stderr.contains("min_secret_bytes is 4, below the default 8"), "{}", run.stderr);
    assert_journal_readable(&journal);
    let all = rows(&journal);
    let results: Vec<&Value> = all.iter().filter(|r| r["kind"] == "result").collect();
    assert_eq!(results.len(), 4, "{all:?}");
    for r in &results {
        assert_eq!(r["tool"], if r["credential"].is_null() { "sp_inventory" } else { "http_request" }, "{r}");
    }
    // The journal's outside text (the target, the agent's URL) is scrubbed like any,
    // once the secret is known (it is read after the intent row).
    let result_h = all.iter().find(|r| r["kind"] == "result" && r["credential"] == "h").unwrap();
    assert_eq!(result_h["target"], format!("GET [REDACTED:h]://{host}/h/echo"), "{result_h}");
    assert_eq!((result_h["decision"].as_str(), result_h["rule"].as_str()), (Some("ok"), Some("http.allow[0]")), "{result_h}");
}
