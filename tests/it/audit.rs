//! The audit journal and approval through the built `sp` (issue #5).
//!
//! What must hold: every decision is a row and the rows are one hash chain that
//! `sp audit verify` checks, naming the first broken row (edited byte, removed row,
//! swapped rows, torn tail); kill -9 at any point leaves a journal that verifies; a
//! journal that cannot be written (bad path, /dev/full, a symlink, a held lock, a file
//! replaced or truncated mid-session, a file size limit) means zero actions and zero
//! requests at the loopback server; no secret ever reaches the journal or its syslog
//! copy; the approver decides each approve-flagged call and nothing it prints reaches
//! the protocol stream; the exit counters equal the journal's rows.
#![allow(
    clippy::disallowed_methods,
    reason = "tests and benchmarks start sp, sshd and clients and read their environment; the fence in clippy.toml is for src/"
)]

use crate::support;

use std::collections::BTreeMap;
use std::os::fd::AsFd;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde_json::{json, Value};
use sha2::{Digest, Sha256};

use support::http_server::{Echo, TestServer};
use support::process::{canary, initialize, initialized, lines, run_sp, tool_call, tool_error_code, Launch, Run, Session, TempDir};

/// A temp dir with a secret file and a policy for the loopback server:
/// credential `api` (file, bearer) on `/v1/*`, `envtok` (env `SP_TEST_TOKEN`, query
/// `key`) on `/q/*`, GET/POST allowed on `/v1/*`, `/q/*` and `/open/*`; the journal at
/// `dir/audit.jsonl` unless `top` replaces `audit`. `top` is merged into the top level.
struct Fixture {
    dir: TempDir,
    policy: PathBuf,
    journal: PathBuf,
    secret: String,
    env_secret: String,
}

fn fixture(port: u16, top: Value, approve: bool) -> Fixture {
    let dir = TempDir::new("audit");
    let secret = canary();
    let env_secret = canary();
    let token = dir.file("api.token", secret.as_bytes(), 0o600);
    let host = format!("127.0.0.1:{port}");
    let journal = dir.path.join("audit.jsonl");
    let mut api = json!({"source": {"file": token.display().to_string()}, "inject": {"bearer": {}}, "hosts": [host], "paths": ["/v1/*"]});
    if approve {
        api["approve"] = json!(true);
    }
    let mut policy = json!({
        "credentials": {
            "api": api,
            "envtok": {"source": {"env": "SP_TEST_TOKEN"}, "inject": {"query": {"name": "key"}}, "hosts": [host], "paths": ["/q/*"]}
        },
        "http": {"allow": [{"hosts": [host], "methods": ["GET", "POST"], "paths": ["/v1/*", "/q/*", "/open/*"]}]},
        "audit": {"path": journal.display().to_string(), "fsync": true}
    });
    for (k, v) in top.as_object().expect("an object") {
        policy[k] = v.clone();
    }
    let policy = dir.file("policy.json", policy.to_string().as_bytes(), 0o600);
    Fixture { dir, policy, journal, secret, env_secret }
}

impl Fixture {
    fn launch(&self) -> Launch {
        Launch::mcp(&self.policy, &[]).env("SP_TEST_TOKEN", &self.env_secret)
    }
}

fn get(url: String) -> Value {
    json!({"method": "GET", "url": url})
}

fn rows(path: &Path) -> Vec<Value> {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("read {}: {e}", path.display()));
    text.lines().map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("row {l:?}: {e}"))).collect()
}

fn of_kind<'a>(rows: &'a [Value], kind: &str) -> Vec<&'a Value> {
    rows.iter().filter(|r| r["kind"] == kind).collect()
}

fn verify(path: &Path, extra: &[&str]) -> Run {
    let p = path.display().to_string();
    let mut args = vec!["audit", "verify", p.as_str()];
    args.extend_from_slice(extra);
    run_sp(&args, &[], b"")
}

fn assert_whole(path: &Path) -> Run {
    let run = verify(path, &[]);
    assert_eq!(run.code(), Some(0), "the journal does not verify\n{}\n{}", String::from_utf8_lossy(&run.stdout), run.context());
    run
}

fn sha256_hex(bytes: &[u8]) -> String {
    Sha256::digest(bytes).iter().map(|b| format!("{b:02x}")).collect()
}

/// A session with a bit of everything; returns the journal's bytes.
fn busy_journal(server: &TestServer, f: &Fixture) -> Vec<u8> {
    let base = server.base();
    let mut s = Session::start(f.launch());
    s.ready("2025-06-18");
    assert_eq!(s.tool(1, "http_request", get(format!("{base}/v1/users")))["isError"], false);
    assert_eq!(tool_error_code(&s.tool(2, "http_request", get(format!("{base}/admin")))), Some("SP_DENIED"));
    assert_eq!(tool_error_code(&s.tool(3, "http_request", json!({"method": "GET"}))), Some("SP_BAD_ARGUMENTS"));
    assert_eq!(s.tool(4, "sp_inventory", json!({}))["isError"], false);
    assert_eq!(s.call(&json!({"jsonrpc": "2.0", "id": 5, "method": "nope"}))["error"]["code"], -32601);
    assert_eq!(s.tool(6, "http_request", get(format!("{base}/open/x")))["isError"], false);
    let run = s.finish();
    run.assert_exit(0);
    std::fs::read(&f.journal).unwrap()
}

// ---------------------------------------------------------------------------------------
// The chain

#[test]
fn a_session_journals_every_decision_and_verifies() {
    let server = TestServer::start();
    let f = fixture(server.port, json!({}), false);
    busy_journal(&server, &f);
    let all = rows(&f.journal);
    let kinds: Vec<&str> = all.iter().map(|r| r["kind"].as_str().unwrap()).collect();
    assert_eq!(kinds, ["start", "intent", "result", "reject", "reject", "intent", "result", "reject", "intent", "result", "end"], "{all:#?}");
    let session = all[0]["session"].as_str().unwrap();
    assert!(all.iter().all(|r| r["session"] == session));
    for (i, r) in all.iter().enumerate() {
        assert_eq!(r["seq"], i as u64 + 1);
        assert!(r["ts"].as_str().unwrap().ends_with('Z') && r["ts"].as_str().unwrap().len() == 24, "{r}");
    }
    let (intent, result) = (&all[1], &all[2]);
    assert_eq!(intent["target"], format!("GET http://127.0.0.1:{}/v1/users", server.port));
    assert_eq!((intent["decision"].as_str(), intent["credential"].as_str(), intent["rule"].as_str()), (Some("allow"), Some("api"), Some("http.allow[0]")));
    assert_eq!((result["status"].as_u64(), result["decision"].as_str(), result["truncated"].as_bool()), (Some(200), Some("ok"), Some(false)));
    assert!(result["bytes_out"].as_u64().unwrap() > 0 && result["duration_ms"].is_u64(), "{result}");
    assert_eq!(intent["request_fp"], result["request_fp"]);
    let denied = &all[3];
    assert_eq!((denied["decision"].as_str(), denied["code"].as_str()), (Some("denied"), Some("SP_DENIED")));
    assert!(denied["reason"].as_str().unwrap().contains("no http.allow rule"), "{denied}");
    assert_eq!(all[4]["decision"], "bad_arguments");
    assert_eq!((all[7]["decision"].as_str(), all[7]["code"].as_str()), (Some("method_not_found"), Some("-32601")));
    // request_fp: the method and params, keys sorted, no id, no _meta
    let params = json!({"arguments": get(format!("{}/admin", server.base())), "name": "http_request"});
    let canonical = format!("{{\"method\":\"tools/call\",\"params\":{}}}", canonical(&params));
    assert_eq!(denied["request_fp"], sha256_hex(canonical.as_bytes()));
    let run = assert_whole(&f.journal);
    let out = String::from_utf8_lossy(&run.stdout);
    assert!(out.contains("ok: 11 row(s), seq 1..11"), "{out}");
    assert!(out.contains(all[10]["hash"].as_str().unwrap()), "verify prints the last hash: {out}");
    let mode = std::fs::metadata(&f.journal).unwrap().permissions().mode();
    assert_eq!(mode & 0o777, 0o600);
}

fn canonical(v: &Value) -> String {
    match v {
        Value::Object(m) => {
            let mut keys: Vec<&String> = m.keys().collect();
            keys.sort();
            let parts: Vec<String> = keys.iter().map(|k| format!("{}:{}", Value::String((*k).clone()), canonical(&m[*k]))).collect();
            format!("{{{}}}", parts.join(","))
        }
        other => other.to_string(),
    }
}

/// The row (1-based line) that holds byte `at`.
fn row_of(bytes: &[u8], at: usize) -> u64 {
    bytes[..at].iter().filter(|b| **b == b'\n').count() as u64 + 1
}

fn broken_row(path: &Path) -> (u64, String) {
    let run = verify(path, &[]);
    assert_eq!(run.code(), Some(1), "verify passed a broken journal\n{}", run.context());
    let out = String::from_utf8_lossy(&run.stdout).into_owned();
    let n = out.split("row ").nth(1).and_then(|r| r.split(' ').next()).and_then(|n| n.parse().ok());
    (n.unwrap_or_else(|| panic!("no row number in {out:?}")), out)
}

#[test]
fn verify_names_the_first_broken_row() {
    let server = TestServer::start();
    let f = fixture(server.port, json!({}), false);
    let bytes = busy_journal(&server, &f);
    let lines: Vec<&[u8]> = bytes.split_inclusive(|b| *b == b'\n').collect();
    let copy = f.dir.path.join("copy.jsonl");
    let write = |b: &[u8]| std::fs::write(&copy, b).unwrap();

    // One edited byte anywhere: a spread of positions over the whole file.
    let step = (bytes.len() / 60).max(1);
    for at in (0..bytes.len()).step_by(step) {
        let mut edited = bytes.clone();
        edited[at] = if edited[at] == b'7' { b'8' } else { b'7' };
        write(&edited);
        let (row, out) = broken_row(&copy);
        let want = row_of(&bytes, at);
        // A newline turned into a digit merges two rows: reported at the first of them.
        assert_eq!(row, want, "byte {at} ({:?}) edited: {out}", bytes[at] as char);
    }
    // A removed row: the next one is reported, as following a gap.
    let mut removed = lines.clone();
    removed.remove(4);
    write(&removed.concat());
    let (row, out) = broken_row(&copy);
    assert_eq!(row, 5, "{out}");
    assert!(out.contains("gap"), "{out}");
    // Two rows swapped.
    let mut swapped = lines.clone();
    swapped.swap(3, 4);
    write(&swapped.concat());
    let (row, out) = broken_row(&copy);
    assert_eq!(row, 4, "{out}");
    assert!(out.contains("out of order"), "{out}");
    // Cut in the middle of the last row (a crash mid-write).
    let cut = bytes.len() - lines.last().unwrap().len() / 2;
    write(&bytes[..cut]);
    let (row, out) = broken_row(&copy);
    assert_eq!(row, lines.len() as u64, "{out}");
    assert!(out.contains("torn"), "{out}");
    // The first row removed: the chain no longer starts at genesis...
    write(&lines[1..].concat());
    assert_eq!(broken_row(&copy).0, 1);
    // ...unless the anchor says where it starts.
    let first_hash = serde_json::from_slice::<Value>(lines[0]).unwrap()["hash"].as_str().unwrap().to_owned();
    assert_eq!(verify(&copy, &["--anchor", &first_hash]).code(), Some(0));
    // Whole rows cut from the end: only an anchor recorded earlier can tell.
    let last_hash = serde_json::from_slice::<Value>(lines.last().unwrap()).unwrap()["hash"].as_str().unwrap().to_owned();
    assert_eq!(verify(&f.journal, &["--anchor", &last_hash]).code(), Some(0));
    write(&lines[..lines.len() - 1].concat());
    assert_eq!(verify(&copy, &[]).code(), Some(0));
    let run = verify(&copy, &["--anchor", &last_hash]);
    assert_eq!(run.code(), Some(1));
    assert!(String::from_utf8_lossy(&run.stdout).contains("anchor"), "{}", run.context());
    // Usage errors exit 2; an unreadable file 1.
    assert_eq!(run_sp(&["audit", "verify"], &[], b"").code(), Some(2));
    assert_eq!(run_sp(&["audit", "verify", "/nonexistent/j"], &[], b"").code(), Some(1));
}

#[test]
fn crash_safety_kill_9_mid_session() {
    let server = TestServer::start();
    let f = fixture(server.port, json!({}), false);
    let base = server.base();
    for i in 0..20u64 {
        let mut child = f.launch().spawn();
        let mut stdin = child.stdin.take().unwrap();
        let mut msgs = vec![initialize(json!(0), "2025-06-18"), initialized()];
        for id in 1..=6 {
            let path = if id % 2 == 0 { "/v1/users" } else { "/admin" };
            msgs.push(tool_call(id, "http_request", get(format!("{base}{path}"))));
        }
        let _ = std::io::Write::write_all(&mut stdin, &lines(&msgs));
        // Somewhere between startup and the end of the session.
        std::thread::sleep(Duration::from_millis(i * 3 % 40));
        let _ = child.kill();
        let _ = child.wait();
        drop(stdin);
    }
    let all = rows(&f.journal);
    let (starts, ends) = (of_kind(&all, "start").len(), of_kind(&all, "end").len());
    eprintln!("kill -9 x20: {starts} started, {ends} ended, {} intents, {} results", of_kind(&all, "intent").len(), of_kind(&all, "result").len());
    assert!(starts >= 10 && ends < starts, "most runs got past startup, and were killed mid-session");
    assert_whole(&f.journal);
    // A torn row left behind (power loss): the next sp cuts it off and says so.
    let mut file = std::fs::OpenOptions::new().append(true).open(&f.journal).unwrap();
    std::io::Write::write_all(&mut file, b"{\"seq\":99999,\"ts\":\"2026-").unwrap();
    drop(file);
    assert!(broken_row(&f.journal).1.contains("torn"));
    let run = f.launch().run(&lines(&[initialize(json!(0), "2025-06-18")]));
    run.assert_exit(0);
    assert!(run.stderr.contains("torn last row"), "{}", run.context());
    assert_whole(&f.journal);
    let all = rows(&f.journal);
    let recover = of_kind(&all, "recover");
    assert_eq!(recover.len(), 1);
    assert_eq!(recover[0]["bytes_in"], 24);
}

// ---------------------------------------------------------------------------------------
// Fail closed

fn assert_refuses_to_start(f: &Fixture, server: &TestServer, what: &str) -> Run {
    let input = lines(&[initialize(json!(1), "2025-06-18"), initialized(), tool_call(2, "http_request", get(format!("{}/v1/x", server.base())))]);
    let run = f.launch().run(&input);
    run.assert_exit(1);
    assert_eq!(run.stdout, b"", "{what}: sp served without its journal\n{}", run.context());
    assert!(run.stderr.contains("audit journal"), "{what}: the reason is on stderr\n{}", run.context());
    server.settle();
    assert_eq!(server.accepted(), 0, "{what}: a request ran without a journal");
    run
}

fn with_journal_path(port: u16, path: &str) -> Fixture {
    fixture(port, json!({"audit": {"path": path}}), false)
}

#[test]
fn journal_that_cannot_be_opened_means_no_service() {
    let server = TestServer::start();
    // Root ignores permission bits, so these are failures root cannot get past.
    let f = fixture(server.port, json!({}), false);
    let file = f.dir.file("plain", b"", 0o600);
    for (what, path) in [
        ("parent is a regular file", format!("{}/audit.jsonl", file.display())),
        ("parent does not exist", f.dir.join("missing/audit.jsonl")),
        ("/dev/full", "/dev/full".to_owned()),
        ("/dev/null", "/dev/null".to_owned()),
        ("a directory", f.dir.path.display().to_string() + "/sub"),
    ] {
        if what == "a directory" {
            std::fs::create_dir(&path).unwrap();
        }
        let g = with_journal_path(server.port, &path);
        assert_refuses_to_start(&g, &server, what);
    }
    // A symbolic link, a hard link, a FIFO, a world-writable file.
    let target = f.dir.file("target.jsonl", b"", 0o600);
    let link = f.dir.path.join("link.jsonl");
    std::os::unix::fs::symlink(&target, &link).unwrap();
    let hard = f.dir.path.join("hard.jsonl");
    std::fs::hard_link(&target, &hard).unwrap();
    let fifo = f.dir.path.join("fifo.jsonl");
    assert!(std::process::Command::new("mkfifo").arg(&fifo).status().unwrap().success());
    let open = f.dir.file("open.jsonl", b"", 0o666);
    for (what, path) in [("symlink", &link), ("hard link", &hard), ("fifo", &fifo), ("world-writable", &open)] {
        let g = with_journal_path(server.port, &path.display().to_string());
        let t = Instant::now();
        assert_refuses_to_start(&g, &server, what);
        assert!(t.elapsed() < Duration::from_secs(10), "{what}: hung");
    }
    // A journal whose last row is not a row sp wrote.
    let garbage = f.dir.file("garbage.jsonl", b"{\"seq\":1}\n", 0o600);
    assert_refuses_to_start(&with_journal_path(server.port, &garbage.display().to_string()), &server, "garbage");
}

#[test]
fn lock_held_by_another_process() {
    let server = TestServer::start();
    let f = fixture(server.port, json!({}), false);
    std::fs::File::create(&f.journal).unwrap();
    std::fs::set_permissions(&f.journal, std::fs::Permissions::from_mode(0o600)).unwrap();
    let holder = std::fs::File::open(&f.journal).unwrap();
    rustix::fs::flock(holder.as_fd(), rustix::fs::FlockOperation::LockExclusive).unwrap();
    // At startup: sp waits a little, then refuses to serve.
    assert_refuses_to_start(&f, &server, "lock held at startup");
    rustix::fs::flock(holder.as_fd(), rustix::fs::FlockOperation::Unlock).unwrap();
    // Mid-session: the call is refused, nothing is sent; once the lock is free, calls run.
    let mut s = Session::start(f.launch());
    s.ready("2025-06-18");
    rustix::fs::flock(holder.as_fd(), rustix::fs::FlockOperation::LockExclusive).unwrap();
    server.settle();
    let r = s.tool(1, "http_request", get(format!("{}/v1/x", server.base())));
    assert_eq!(tool_error_code(&r), Some("SP_UNAVAILABLE"), "{r}");
    server.settle();
    assert_eq!(server.accepted(), 0);
    rustix::fs::flock(holder.as_fd(), rustix::fs::FlockOperation::Unlock).unwrap();
    assert_eq!(s.tool(2, "http_request", get(format!("{}/v1/x", server.base())))["isError"], false);
    let run = s.finish();
    assert!(run.summary().contains("audit_unavailable=1"), "{}", run.context());
    assert_whole(&f.journal);
}

#[test]
fn journal_replaced_or_truncated_mid_session_stops_all_actions() {
    let server = TestServer::start();
    for (how, says) in [("replaced", "replaced"), ("truncated", "truncated"), ("removed", "removed"), ("forged", "another writer")] {
        let f = fixture(server.port, json!({}), false);
        let mut s = Session::start(f.launch());
        s.ready("2025-06-18");
        assert_eq!(s.tool(1, "http_request", get(format!("{}/open/a", server.base())))["isError"], false);
        match how {
            "replaced" => {
                let other = f.dir.file("other.jsonl", b"", 0o600);
                std::fs::rename(&other, &f.journal).unwrap();
            }
            "truncated" => std::fs::OpenOptions::new().write(true).open(&f.journal).unwrap().set_len(10).unwrap(),
            "forged" => {
                // A row appended behind sp's back, well-formed but not chained.
                let last = rows(&f.journal).pop().unwrap();
                let mut forged = last.clone();
                forged["seq"] = json!(last["seq"].as_u64().unwrap() + 1);
                forged["prev"] = json!("ab".repeat(32));
                let mut file = std::fs::OpenOptions::new().append(true).open(&f.journal).unwrap();
                std::io::Write::write_all(&mut file, format!("{forged}\n").as_bytes()).unwrap();
            }
            _ => std::fs::remove_file(&f.journal).unwrap(),
        }
        server.settle();
        let before = server.accepted();
        for id in 2..4 {
            let r = s.tool(id, "http_request", get(format!("{}/open/b", server.base())));
            assert_eq!(tool_error_code(&r), Some("SP_UNAVAILABLE"), "{how}: {r}");
            assert!(r["structuredContent"]["error"]["message"].as_str().unwrap().contains(says), "{how}: {r}");
        }
        server.settle();
        assert_eq!(server.accepted(), before, "{how}: a request ran after the journal stopped");
        s.finish().assert_exit(0);
    }
}

#[test]
fn file_size_limit_refuses_the_action_and_keeps_the_journal_whole() {
    // RLIMIT_FSIZE binds root as well: a disk that fills up mid-session.
    let server = TestServer::start();
    let f = fixture(server.port, json!({}), false);
    f.launch().run(&lines(&[initialize(json!(0), "2025-06-18")])).assert_exit(0);
    let first = std::fs::read_to_string(&f.journal).unwrap();
    let start_len = first.lines().next().unwrap().len() as u64 + 1;
    let limit = first.len() as u64 + start_len + 40;
    let mut cmd = std::process::Command::new("sh");
    cmd.env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("SP_TEST_TOKEN", &f.env_secret)
        .arg("-c")
        .arg(format!("trap '' XFSZ; exec prlimit --fsize={limit} -- \"$0\" \"$@\""))
        .arg(support::process::sp_bin())
        .args(&f.launch().args);
    let input = lines(&[initialize(json!(1), "2025-06-18"), initialized(), tool_call(2, "http_request", get(format!("{}/v1/users", server.base())))]);
    server.settle();
    let out = cmd
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .and_then(|mut c| {
            std::io::Write::write_all(c.stdin.as_mut().unwrap(), &input)?;
            drop(c.stdin.take());
            Ok(support::process::output_deadline(c, "sp mcp with the journal's syslog copy, its input closed"))
        })
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    let msgs = support::process::check_protocol(&out.stdout).unwrap_or_else(|e| panic!("{e}\n{stderr}"));
    assert_eq!(msgs.len(), 2, "{stderr}");
    assert_eq!(tool_error_code(&msgs[1]["result"]), Some("SP_UNAVAILABLE"), "{}\n{stderr}", msgs[1]);
    server.settle();
    assert_eq!(server.accepted(), 0, "a request ran although its intent row could not be written");
    assert!(!String::from_utf8_lossy(&out.stdout).contains(&f.secret) && !stderr.contains(&f.secret));
    assert_whole(&f.journal);
}

// ---------------------------------------------------------------------------------------
// Secrets, malformed frames, syslog

#[test]
fn secrets_never_reach_the_journal_or_the_syslog_copy() {
    let server = TestServer::start();
    server.echo_route("/v1/echo", Echo::Json);
    server.echo_route("/q/echo", Echo::Json);
    let dir = TempDir::new("syslog");
    let sock_path = dir.path.join("log");
    let sock = std::os::unix::net::UnixDatagram::bind(&sock_path).unwrap();
    sock.set_nonblocking(true).unwrap();
    let f = fixture(server.port, json!({}), false);
    let mut policy: Value = serde_json::from_slice(&std::fs::read(&f.policy).unwrap()).unwrap();
    policy["audit"]["syslog"] = json!({"socket": sock_path.display().to_string(), "facility": "local3"});
    std::fs::write(&f.policy, policy.to_string()).unwrap();
    let base = server.base();
    let mut s = Session::start(f.launch());
    s.ready("2025-06-18");
    for (id, url) in [(1, format!("{base}/v1/echo")), (2, format!("{base}/q/echo?x=1"))] {
        let r = s.tool(id, "http_request", get(url));
        assert_eq!(r["isError"], false, "{r}");
    }
    let run = s.finish();
    run.assert_exit(0);
    let text = std::fs::read_to_string(&f.journal).unwrap();
    let all = rows(&f.journal);
    let q = all.iter().find(|r| r["kind"] == "intent" && r["credential"] == "envtok").expect("envtok intent");
    assert_eq!(q["target"], format!("GET http://127.0.0.1:{}/q/echo", server.port), "no query in targets");
    for secret in [&f.secret, &f.env_secret] {
        assert!(!text.contains(secret.as_str()), "a secret reached the journal");
    }
    // syslog: one datagram per row, the row itself after the header.
    let mut got = Vec::new();
    let mut buf = vec![0u8; 65536];
    while let Ok(n) = sock.recv(&mut buf) {
        got.push(String::from_utf8_lossy(&buf[..n]).into_owned());
    }
    let journal_lines: Vec<&str> = text.lines().collect();
    assert_eq!(got.len(), journal_lines.len(), "{got:#?}");
    for (msg, line) in got.iter().zip(&journal_lines) {
        let (head, row) = msg.split_once(": ").unwrap();
        assert!(head.starts_with("<15") || head.starts_with("<13"), "facility local3 (19*8+severity): {head}");
        assert!(head.contains("sp["), "{head}");
        assert_eq!(row, *line);
        assert!(!msg.contains(&f.env_secret));
    }
}

#[test]
fn malformed_frames_are_journaled_by_length_and_fingerprint_only() {
    let server = TestServer::start();
    let f = fixture(server.port, json!({}), false);
    let marker = format!("marker-{}", support::process::random_hex());
    let mut input = lines(&[initialize(json!(1), "2025-06-18"), initialized()]);
    let frame = format!("{{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"{marker}\"\u{0}}}");
    input.extend_from_slice(frame.as_bytes());
    input.push(b'\n');
    let run = f.launch().run(&input);
    run.assert_exit(3);
    let text = std::fs::read_to_string(&f.journal).unwrap();
    assert!(!text.contains(&marker), "the raw bytes reached the journal");
    let all = rows(&f.journal);
    let r = of_kind(&all, "reject")[0];
    assert_eq!((r["decision"].as_str(), r["code"].as_str()), (Some("frame_nul"), Some("-32700")));
    assert_eq!(r["bytes_in"], frame.len());
    assert_eq!(r["request_fp"], sha256_hex(frame.as_bytes()));
    assert_eq!(all.last().unwrap()["decision"], "malformed");
    assert_whole(&f.journal);
}

// ---------------------------------------------------------------------------------------
// Counters

fn summary_counts(summary: &str) -> (u64, BTreeMap<String, u64>) {
    let executed = summary.split("executions=").nth(1).and_then(|s| s.split(' ').next()).and_then(|n| n.parse().ok()).unwrap();
    let rejections = summary.split("rejections=").nth(1).unwrap();
    let inside = rejections.split('[').nth(1).unwrap().trim_end_matches(']');
    let map = inside
        .split_whitespace()
        .map(|kv| {
            let (k, v) = kv.split_once('=').unwrap();
            (k.to_owned(), v.parse().unwrap())
        })
        .collect();
    (executed, map)
}

#[test]
fn counters_match_the_journal() {
    let server = TestServer::start();
    let f = fixture(server.port, json!({}), false);
    let base = server.base();
    let input = lines(&[
        json!({"jsonrpc": "2.0", "id": 0, "method": "tools/list"}),
        initialize(json!(1), "2025-06-18"),
        initialized(),
        tool_call(2, "http_request", get(format!("{base}/v1/a"))),
        tool_call(3, "http_request", get(format!("{base}/nope"))),
        tool_call(4, "http_request", json!({"url": 1})),
        tool_call(5, "no.such.tool", json!({})),
        tool_call(6, "sp_inventory", json!({})),
        tool_call(7, "http_request", get("http://127.0.0.1:1/v1/x".into())),
        tool_call(8, "http_request", get(format!("{base}/open/b"))),
        json!({"jsonrpc": "2.0", "id": 9, "method": "resources/list"}),
    ]);
    let mut input = input;
    input.extend_from_slice(b"{\"jsonrpc\":\"2.0\",\"id\":10,\"method\":\"ping\",\"params\":[]}\n[1]\n");
    let run = f.launch().run(&input);
    run.protocol();
    let (executed, rejections) = summary_counts(run.summary());
    let all = rows(&f.journal);
    assert_eq!(of_kind(&all, "result").len() as u64, executed, "{}\n{all:#?}", run.summary());
    let mut journaled: BTreeMap<String, u64> = BTreeMap::new();
    for r in of_kind(&all, "reject") {
        *journaled.entry(r["decision"].as_str().unwrap().to_owned()).or_default() += 1;
    }
    assert_eq!(journaled, rejections, "{}", run.summary());
    assert!(executed >= 2 && rejections.values().sum::<u64>() >= 5, "{}", run.summary());
    let end = all.last().unwrap();
    assert_eq!((end["kind"].as_str(), end["reason"].as_str()), (Some("end"), Some(run.summary().split("): ").nth(1).unwrap())));
}

// ---------------------------------------------------------------------------------------
// Where the journal goes when the policy does not say

#[test]
fn default_location_and_no_location() {
    let server = TestServer::start();
    let f = fixture(server.port, json!({}), false);
    let mut policy: Value = serde_json::from_slice(&std::fs::read(&f.policy).unwrap()).unwrap();
    policy.as_object_mut().unwrap().remove("audit");
    std::fs::write(&f.policy, policy.to_string()).unwrap();
    let home = TempDir::new("home");
    let input = lines(&[initialize(json!(1), "2025-06-18"), initialized(), tool_call(2, "sp_inventory", json!({}))]);
    // $HOME/.local/state/sallyport/audit.jsonl, directories 0700
    f.launch().env("HOME", &home.join("")).run(&input).assert_exit(0);
    let j = home.path.join(".local/state/sallyport/audit.jsonl");
    assert_eq!(of_kind(&rows(&j), "result").len(), 1);
    assert_eq!(std::fs::metadata(j.parent().unwrap()).unwrap().mode() & 0o777, 0o700);
    // $XDG_STATE_HOME first
    let state = home.join("state");
    f.launch().env("HOME", &home.join("")).env("XDG_STATE_HOME", &state).run(&input).assert_exit(0);
    assert_whole(&home.path.join("state/sallyport/audit.jsonl"));
    // Neither: refused (issue 11; tests/journal_location.rs has the details)
    let run = f.launch().env("XDG_STATE_HOME", "").run(&input);
    run.assert_exit(1);
    assert!(run.stderr.contains("no audit journal location"), "{}", run.context());
    assert!(run.stdout.is_empty(), "{}", run.context());
    // "path": null: off, quietly
    policy["audit"] = json!({"path": null});
    std::fs::write(&f.policy, policy.to_string()).unwrap();
    let run = f.launch().env("HOME", &home.join("")).run(&input);
    run.assert_exit(0);
    assert!(!run.stderr.contains("no audit journal"), "{}", run.context());
}

// ---------------------------------------------------------------------------------------
// Approval

struct Approver {
    script: PathBuf,
}

impl Approver {
    fn new(dir: &TempDir, name: &str, body: &str) -> Approver {
        let script = dir.file(name, format!("#!/bin/sh\n{body}\n").as_bytes(), 0o700);
        Approver { script }
    }

    fn seen(&self) -> Option<String> {
        std::fs::read_to_string(self.script.with_extension("stdin")).ok()
    }
}

fn approval_fixture(port: u16, approver: &Path, timeout_s: u64) -> Fixture {
    fixture(port, json!({"approval": {"command": [approver.display().to_string(), "--from-sp"], "timeout_s": timeout_s}}), true)
}

#[test]
fn approver_yes_no_timeout_crash_and_chatter() {
    let server = TestServer::start();
    let dir = TempDir::new("approvers");
    let record = "cat > \"$0.stdin\"; env > \"$0.env\"";
    let cases = [
        ("yes", format!("{record}; exit 0"), true, "approved"),
        ("no", format!("{record}; exit 1"), false, "refused"),
        ("timeout", format!("{record}; sleep 30"), false, "timeout"),
        ("crash", format!("{record}; kill -SEGV $$"), false, "failed"),
        ("chatter", format!("{record}; echo '{{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{{}}}}'; echo 'to stderr' >&2; exit 0"), true, "approved"),
    ];
    for (name, body, runs, decision) in cases {
        let a = Approver::new(&dir, name, &body);
        let f = approval_fixture(server.port, &a.script, 2);
        let mut s = Session::start(f.launch());
        s.ready("2025-06-18");
        server.settle();
        let before = server.requests().len();
        let t = Instant::now();
        // Each call asks again: an approval covers one call only.
        for id in [1, 2] {
            let r = s.tool(id, "http_request", get(format!("{}/v1/{name}", server.base())));
            if runs {
                assert_eq!(r["isError"], false, "{name}: {r}");
            } else {
                assert_eq!(tool_error_code(&r), Some("SP_NOT_APPROVED"), "{name}: {r}");
            }
        }
        // Uncredentialed calls do not ask.
        assert_eq!(s.tool(3, "http_request", get(format!("{}/open/{name}", server.base())))["isError"], false);
        assert!(t.elapsed() < Duration::from_secs(15), "{name}: the timeout was not enforced");
        let run = s.finish();
        run.assert_exit(0);
        assert_eq!(run.protocol().len(), 4, "{name}: stdout holds exactly the answers\n{}", run.context());
        server.settle();
        let seen: Vec<_> = server.requests()[before..].iter().map(|r| r.target.clone()).collect();
        let want = if runs { 3 } else { 1 };
        assert_eq!(seen.len(), want, "{name}: {seen:?}");
        let all = rows(&f.journal);
        let approvals = of_kind(&all, "approval");
        assert_eq!(approvals.len(), 2, "{name}: {all:#?}");
        for ap in &approvals {
            assert_eq!(ap["decision"], decision, "{name}: {ap}");
            assert_eq!(ap["credential"], "api");
            assert!(ap["duration_ms"].is_u64());
        }
        if name == "no" {
            assert_eq!(approvals[0]["approver_exit"], 1);
        }
        if runs {
            assert_eq!(of_kind(&all, "intent")[0]["decision"], "approved");
        } else {
            assert_eq!(of_kind(&all, "reject").len(), 2);
            assert_eq!(of_kind(&all, "reject")[0]["decision"], "not_approved");
        }
        // What the approver was told: the exact action, never a secret.
        let told = a.seen().unwrap_or_else(|| panic!("{name}: the approver got no description"));
        let d: Value = serde_json::from_str(told.lines().next().unwrap()).unwrap();
        assert_eq!(d["target"], format!("GET http://127.0.0.1:{}/v1/{name}", server.port));
        assert_eq!((d["credential"].as_str(), d["request"]["method"].as_str()), (Some("api"), Some("GET")));
        let env = std::fs::read_to_string(a.script.with_extension("env")).unwrap();
        assert!(env.contains("SP_APPROVAL_SUBJECT=api"), "{env}");
        for secret in [&f.secret, &f.env_secret] {
            assert!(!told.contains(secret.as_str()) && !env.contains(secret.as_str()), "{name}: a secret reached the approver");
        }
        assert!(!std::fs::read_to_string(&f.journal).unwrap().contains(&f.secret));
        assert_whole(&f.journal);
    }
}

#[test]
fn observe_mode_runs_without_asking_and_says_so() {
    let server = TestServer::start();
    let f = fixture(server.port, json!({"mode": "observe"}), true);
    let mut s = Session::start(f.launch());
    s.ready("2025-06-18");
    assert_eq!(s.tool(1, "http_request", get(format!("{}/v1/a", server.base())))["isError"], false);
    assert_eq!(tool_error_code(&s.tool(2, "http_request", get(format!("{}/nope", server.base())))), Some("SP_DENIED"));
    // The inventory tells the agent which credentials wait for approval.
    let inv = s.tool(3, "sp_inventory", json!({}));
    let creds = inv["structuredContent"]["http"]["credentials"].as_array().unwrap().clone();
    let flag = |name: &str| creds.iter().find(|c| c["name"] == name).map(|c| c["approve"].clone());
    assert_eq!((flag("api"), flag("envtok")), (Some(json!(true)), Some(Value::Null)), "{inv}");
    s.finish().assert_exit(0);
    let all = rows(&f.journal);
    assert_eq!(all[0]["decision"], "observe");
    assert_eq!(of_kind(&all, "approval")[0]["decision"], "observed");
    assert_eq!(of_kind(&all, "intent")[0]["decision"], "observe");
    assert_eq!(of_kind(&all, "reject")[0]["decision"], "denied", "observe never widens the policy");
}

#[test]
fn approve_without_an_approver_is_a_policy_error() {
    let f = fixture(9, json!({}), true);
    let run = f.launch().run(b"");
    run.assert_exit(1);
    assert!(run.stderr.contains("credentials.api.approve"), "{}", run.context());
    let check = run_sp(&["check", "--config", &f.policy.display().to_string()], &[], b"");
    assert_eq!(check.code(), Some(1));
}

// ---------------------------------------------------------------------------------------
// sp audit tail / show, sp check

#[test]
fn tail_and_show_print_rows_for_people_and_as_json() {
    let server = TestServer::start();
    let f = fixture(server.port, json!({}), false);
    let mut s = Session::start(f.launch());
    s.ready("2025-06-18");
    // An escape sequence in an agent-chosen path must not reach the operator's terminal raw.
    s.tool(1, "http_request", get(format!("{}/nope\u{1b}[2J", server.base())));
    s.finish().assert_exit(0);
    let j = f.journal.display().to_string();
    let show = run_sp(&["audit", "show", &j], &[], b"");
    assert_eq!(show.code(), Some(0), "{}", show.context());
    let text = String::from_utf8_lossy(&show.stdout);
    assert!(text.starts_with("   SEQ  TIME (UTC)"), "{text}");
    assert_eq!(text.lines().count(), 1 + rows(&f.journal).len(), "{text}");
    assert!(!text.contains('\u{1b}') && text.contains("SP_"), "{text}");
    let tail = run_sp(&["audit", "tail", &j, "-n", "2", "--json"], &[], b"");
    let got: Vec<Value> = String::from_utf8_lossy(&tail.stdout).lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    let all = rows(&f.journal);
    assert_eq!(got, all[all.len() - 2..].to_vec());
    let check = run_sp(&["check", "--config", &f.policy.display().to_string()], &[], b"");
    let out = String::from_utf8_lossy(&check.stdout);
    assert!(out.contains(&format!("audit: journal {j}, fsync yes")) && out.contains("mode: enforce"), "{out}");
}

// ---------------------------------------------------------------------------------------
// ssh_exec: result rows and approve-flagged hosts

#[test]
fn ssh_rows_and_host_approval() {
    use support::sshd::{self, Sshd};
    if !sshd::available() {
        return;
    }
    let sshd = Sshd::start();
    let dir = TempDir::new("audit-ssh");
    let known_hosts = dir.file("known_hosts", format!("{}\n", sshd.known_hosts_line()).as_bytes(), 0o600);
    let host =
        |approve: bool| json!({"address": "127.0.0.1", "port": sshd.port, "user": sshd.user, "auth": {"key_file": sshd.client_key}, "approve": approve});
    let journal = dir.path.join("audit.jsonl");
    for (answer, runs) in [(0, true), (1, false)] {
        let approver = dir.file(&format!("approver{answer}"), format!("#!/bin/sh\ncat > \"$0.stdin\"\nexit {answer}\n").as_bytes(), 0o700);
        let policy = json!({
            "ssh": {"known_hosts": known_hosts, "connect_timeout_s": 5, "hosts": {"guarded": host(true), "open": host(false)}},
            "approval": {"command": [approver], "timeout_s": 10},
            "audit": {"path": journal}
        });
        let policy = dir.file("policy.json", policy.to_string().as_bytes(), 0o600);
        let before = sshd.connections();
        let mut s = Session::start(Launch::mcp(&policy, &[]));
        s.ready("2025-06-18");
        let r = s.tool(1, "ssh_exec", json!({"host": "guarded", "command": "echo hi"}));
        if runs {
            assert_eq!((r["isError"].as_bool(), r["structuredContent"]["exit_status"].as_i64()), (Some(false), Some(0)), "{r}");
        } else {
            assert_eq!(tool_error_code(&r), Some("SP_NOT_APPROVED"), "{r}");
            assert_eq!(sshd.connections(), before, "a refused call reached sshd");
        }
        let r = s.tool(2, "ssh_exec", json!({"host": "open", "command": "echo oops >&2; exit 3"}));
        assert_eq!(r["structuredContent"]["exit_status"], 3, "{r}");
        s.finish().assert_exit(0);
        let told: Value = serde_json::from_str(&std::fs::read_to_string(approver.with_extension("stdin")).unwrap()).unwrap();
        assert_eq!((told["tool"].as_str(), told["request"]["command"].as_str()), (Some("ssh_exec"), Some("echo hi")));
        assert_eq!(told["request"]["host"], "guarded");
    }
    let all = rows(&journal);
    let approvals: Vec<&str> = of_kind(&all, "approval").iter().map(|r| r["decision"].as_str().unwrap()).collect();
    assert_eq!(approvals, ["approved", "refused"]);
    let results = of_kind(&all, "result");
    assert_eq!(results.len(), 3, "{all:#?}");
    let guarded = results[0];
    assert_eq!(guarded["target"], "guarded echo hi");
    assert_eq!((guarded["exit_status"].as_i64(), guarded["bytes_out"].as_u64(), guarded["truncated"].as_bool()), (Some(0), Some(3), Some(false)));
    assert!(guarded["host_key_fp"].as_str().unwrap().starts_with("SHA256:"), "{guarded}");
    assert_eq!((results[1]["exit_status"].as_i64(), results[1]["bytes_out"].as_u64()), (Some(3), Some(5)));
    let rule = of_kind(&all, "intent")[0]["rule"].as_str().unwrap().to_owned();
    assert!(rule.starts_with("ssh.hosts.guarded"), "{rule}");
    let text = std::fs::read_to_string(&journal).unwrap();
    assert!(!text.contains("PRIVATE KEY"));
    assert_whole(&journal);
}

// ---------------------------------------------------------------------------------------
// Several sessions, one journal

#[test]
fn concurrent_sessions_share_one_chain() {
    let server = TestServer::start();
    let f = fixture(server.port, json!({}), false);
    let base = server.base();
    let sessions: Vec<_> = (0..4)
        .map(|_| {
            let mut s = Session::start(f.launch());
            s.ready("2025-06-18");
            s
        })
        .collect();
    let threads: Vec<_> = sessions
        .into_iter()
        .map(|mut s| {
            let base = base.clone();
            std::thread::spawn(move || {
                for id in 1..=10 {
                    let path = if id % 3 == 0 { "/nope" } else { "/open/x" };
                    s.tool(id, "http_request", get(format!("{base}{path}")));
                }
                s.finish()
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap().assert_exit(0);
    }
    assert_whole(&f.journal);
    let all = rows(&f.journal);
    // 4 x (start + 7 x (intent + result) + 3 rejects + end)
    assert_eq!(all.len(), 4 * (1 + 14 + 3 + 1));
    let sessions: std::collections::BTreeSet<&str> = all.iter().map(|r| r["session"].as_str().unwrap()).collect();
    assert_eq!(sessions.len(), 4);
    let switches = all.windows(2).filter(|w| w[0]["session"] != w[1]["session"]).count();
    assert!(switches > 3, "the sessions' rows interleave in one chain ({switches} switches)");
}

// ---------------------------------------------------------------------------------------
// The malformed-input corpus, journaled

/// Every corpus case through the binary with a journal: a rejected input is one `reject`
/// row and no `intent` row (the action layer never saw it); the `exec` control cases are
/// one intent and one result; the chain verifies; the credential never appears.
#[test]
fn every_corpus_case_leaves_a_reject_row_and_no_intent() {
    use support::corpus::{self, Expect};
    let cases = corpus::load();
    assert!(cases.len() >= 40 && cases.iter().any(|c| c.expect == Expect::Exec), "the corpus lost cases");
    let dir = TempDir::new("audit-corpus");
    let token = canary();
    let run_case = |case: &corpus::Case| -> Result<(), String> {
        let server = TestServer::start();
        let journal = dir.path.join(format!("{}.jsonl", case.name));
        let mut policy: Value = serde_json::from_str(&corpus::policy_json(server.port)).unwrap();
        policy["audit"] = json!({"path": journal, "fsync": false});
        let policy = dir.file(&format!("{}.policy.json", case.name), policy.to_string().as_bytes(), 0o600);
        let max_line = corpus::MAX_LINE.to_string();
        let run = Launch::mcp(&policy, &["--max-line-bytes", &max_line]).env("SP_CORPUS_TOKEN", &token).run(&case.stdin(server.port));
        let fail = |what: String| Err(format!("{}: {what}\n  reason: {}\n  stderr: {}", case.name, case.reason, run.stderr.trim_end()));
        let all = rows(&journal);
        let count = |kind: &str| of_kind(&all, kind).len();
        let want = match case.expect {
            Expect::Exec => (1, 1, 0),
            Expect::Silent => (0, 0, 0),
            _ => (0, 0, 1),
        };
        if (count("intent"), count("result"), count("reject")) != want {
            return fail(format!("want (intent, result, reject) = {want:?}, journal: {all:#?}"));
        }
        if let Some(r) = of_kind(&all, "reject").first() {
            let summary = support::process::summary_line(&run.stderr).unwrap_or_default();
            let key = r["decision"].as_str().unwrap_or_default();
            if !summary.contains(&format!("[{key}=1]")) || r["request_fp"].as_str().map(str::len) != Some(64) {
                return fail(format!("reject row {r} does not match the summary {summary:?}"));
            }
        }
        if std::fs::read_to_string(&journal).unwrap().contains(&token) {
            return fail("the credential reached the journal".into());
        }
        let v = verify(&journal, &[]);
        if v.code() != Some(0) {
            return fail(format!("the journal does not verify: {}", String::from_utf8_lossy(&v.stdout)));
        }
        Ok(())
    };
    let workers = 4;
    let failures: Vec<String> = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..workers)
            .map(|w| {
                let chunk: Vec<&corpus::Case> = cases.iter().skip(w).step_by(workers).collect();
                let run_case = &run_case;
                scope.spawn(move || chunk.into_iter().filter_map(|c| run_case(c).err()).collect::<Vec<_>>())
            })
            .collect();
        handles.into_iter().flat_map(|h| h.join().expect("worker")).collect()
    });
    assert!(failures.is_empty(), "{} of {} cases:\n{}", failures.len(), cases.len(), failures.join("\n\n"));
}
