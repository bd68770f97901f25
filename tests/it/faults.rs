//! Faults (issue #12), through the built `sp mcp` against real parts on loopback: each
//! ends in a clear error or a clean exit, the journal verifies, nothing runs twice, and
//! no secret appears on stdout, stderr or in the journal (the harness checks every run's
//! stdout and stderr for the session's canary secrets).
//!
//! Attacks tried (all held unless noted):
//! - the HTTP server resets the connection mid-body (RST: it closes with unread request
//!   bytes): SP_UPSTREAM, the request was sent once, the next call works;
//! - sshd killed (listener and session processes) while a command runs: SP_UPSTREAM
//!   naming the host, the command ran once, the next call fails cleanly too;
//! - the secret file deleted, then replaced, between calls: a clear tool error naming the
//!   credential and nothing sent; then the new secret is used; neither value in any output;
//! - the journal's file system full mid-session (a 64 KiB tmpfs in a private mount
//!   namespace; skipped with a note where `unshare -m` is not allowed): the call whose
//!   intent row cannot be written does not run, the session says why, the rows written
//!   before verify;
//! - stdin closed mid-line: -32700 for the cut line, exit 3, nothing ran;
//! - stderr closed: answers unchanged, exit 0 (log lines are dropped, not fatal);
//! - a slowloris client (one byte every 20 ms): the request is answered whole, and sp
//!   sleeps in read(2) meanwhile (CPU time far below the wall time).
#![allow(
    clippy::disallowed_methods,
    reason = "tests and benchmarks start sp, sshd and clients and read their environment; the fence in clippy.toml is for src/"
)]

use crate::support;

use std::io::{Read, Write};
use std::net::TcpListener;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use support::http_server::{Reply, TestServer};
use support::process::{canary, initialize, initialized, lines, run_sp, tool_call, tool_error_code, Launch, Session, TempDir};

fn assert_verifies(journal: &Path) {
    let run = run_sp(&["audit", "verify", &journal.display().to_string()], &[], b"");
    assert_eq!(run.status.code(), Some(0), "the journal does not verify: {}", run.context());
}

fn get(url: String) -> Value {
    json!({"method": "GET", "url": url})
}

/// A one-shot HTTP "server" that reads only the request line, sends a response head
/// promising 100000 bytes, 1000 of them, and closes with request bytes unread: the kernel
/// answers with RST. Returns the port and the number of connections it served.
fn resetting_server() -> (u16, std::thread::JoinHandle<usize>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let handle = std::thread::spawn(move || {
        listener.set_nonblocking(false).unwrap();
        let mut served = 0;
        // Two connections: the reset one, then a well-behaved one for the next call.
        for reset in [true, false] {
            let (mut conn, _) = listener.accept().unwrap();
            served += 1;
            let mut first = [0u8; 16];
            conn.read_exact(&mut first).unwrap();
            if reset {
                conn.write_all(b"HTTP/1.1 200 OK\r\ncontent-type: text/plain\r\ncontent-length: 100000\r\n\r\n").unwrap();
                conn.write_all(&[b'x'; 1000]).unwrap();
                std::thread::sleep(Duration::from_millis(50));
                drop(conn);
            } else {
                let mut rest = [0u8; 4096];
                let _ = conn.read(&mut rest);
                conn.write_all(b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\nconnection: close\r\n\r\nok").unwrap();
            }
        }
        served
    });
    (port, handle)
}

#[test]
fn a_connection_reset_mid_body_is_a_clear_upstream_error_and_runs_once() {
    let (port, server) = resetting_server();
    let dir = TempDir::new("faults-reset");
    let journal = dir.path.join("audit.jsonl");
    let policy = json!({
        "http": {"allow": [{"hosts": [format!("127.0.0.1:{port}")], "methods": ["GET"]}]},
        "audit": {"path": journal}
    });
    let policy = dir.file("policy.json", policy.to_string().as_bytes(), 0o600);
    let mut s = Session::start(Launch::mcp(&policy, &[]));
    s.ready("2025-06-18");
    let r = s.tool(1, "http_request", get(format!("http://127.0.0.1:{port}/reset")));
    assert_eq!(tool_error_code(&r), Some("SP_UPSTREAM"), "{r}");
    let message = r["structuredContent"]["error"]["message"].as_str().unwrap_or_default().to_lowercase();
    assert!(message.contains("127.0.0.1") || message.contains("connection") || message.contains("body"), "{message}");
    let r = s.tool(2, "http_request", get(format!("http://127.0.0.1:{port}/after")));
    assert_eq!((r["isError"].as_bool(), r["structuredContent"]["body"].as_str()), (Some(false), Some("ok")), "{r}");
    s.finish().assert_exit(0);
    assert_eq!(server.join().unwrap(), 2, "each call reached the server exactly once");
    assert_verifies(&journal);
}

#[test]
fn sshd_killed_mid_command_is_a_clear_error_and_the_command_ran_once() {
    use support::sshd::{self, Sshd};
    if !sshd::available() {
        return;
    }
    let mut sshd = Sshd::start();
    let dir = TempDir::new("faults-sshd");
    let known_hosts = dir.file("known_hosts", format!("{}\n", sshd.known_hosts_line()).as_bytes(), 0o600);
    let marker = dir.path.join("ran");
    let journal = dir.path.join("audit.jsonl");
    let host = json!({"address": "127.0.0.1", "port": sshd.port, "user": sshd.user, "auth": {"key_file": sshd.client_key}});
    let policy = json!({"ssh": {"known_hosts": known_hosts, "connect_timeout_s": 5, "hosts": {"h": host}}, "audit": {"path": journal}});
    let policy = dir.file("policy.json", policy.to_string().as_bytes(), 0o600);
    let mut s = Session::start(Launch::mcp(&policy, &[]));
    s.ready("2025-06-18");
    let command = format!("echo x >> {}; sleep 20", marker.display());
    s.send(&tool_call(1, "ssh_exec", json!({"host": "h", "command": command, "timeout_s": 60})));
    let deadline = Instant::now() + Duration::from_secs(10);
    // Until its line is written, not until the file exists: `>>` creates the file before
    // echo writes, and sshd killed in between left it empty ("ran exactly once" failed).
    while std::fs::read_to_string(&marker).unwrap_or_default().is_empty() {
        if Instant::now() >= deadline {
            let run = s.finish();
            panic!("the command never started\n{}\nsshd:\n{}", run.context(), sshd.log());
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    let killed = Instant::now();
    sshd.stop();
    let answer = s.read();
    assert!(killed.elapsed() < Duration::from_secs(10), "{:?}", killed.elapsed());
    let r = &answer["result"];
    assert_eq!(tool_error_code(r), Some("SP_UPSTREAM"), "{answer}");
    assert!(r["structuredContent"]["error"]["message"].as_str().unwrap_or_default().contains("ssh h"), "{answer}");
    // The next call: sshd is gone, so a connection error, once, cleanly.
    let r = s.tool(2, "ssh_exec", json!({"host": "h", "command": "true"}));
    assert!(r["isError"] == true, "{r}");
    s.finish().assert_exit(0);
    assert_eq!(std::fs::read_to_string(&marker).unwrap(), "x\n", "the command ran exactly once");
    assert_verifies(&journal);
}

#[test]
fn a_secret_file_deleted_then_replaced_between_calls() {
    let server = TestServer::start();
    server.route("/v1/me", Reply::text(200, "hello"));
    let dir = TempDir::new("faults-secret");
    let (first, second) = (canary(), canary());
    let token = dir.file("api.token", first.as_bytes(), 0o600);
    let journal = dir.path.join("audit.jsonl");
    let host = format!("127.0.0.1:{}", server.port);
    let policy = json!({
        "credentials": {"api": {"source": {"file": token}, "inject": {"bearer": {}}, "hosts": [host], "paths": ["/v1/*"]}},
        "http": {"allow": [{"hosts": [host], "methods": ["GET"], "paths": ["/v1/*"]}]},
        "audit": {"path": journal}
    });
    let policy = dir.file("policy.json", policy.to_string().as_bytes(), 0o600);
    let mut s = Session::start(Launch::mcp(&policy, &[]));
    s.ready("2025-06-18");
    let url = format!("{}/v1/me", server.base());
    let r = s.tool(1, "http_request", get(url.clone()));
    assert_eq!(r["structuredContent"]["status"], 200, "{r}");
    std::fs::remove_file(&token).unwrap();
    let r = s.tool(2, "http_request", get(url.clone()));
    assert!(r["isError"] == true, "{r}");
    let message = r["structuredContent"]["error"]["message"].as_str().unwrap_or_default();
    assert!(message.contains("api"), "the error names the credential: {message}");
    server.settle();
    assert_eq!(server.requests().len(), 1, "nothing was sent without the secret");
    dir.file("api.token", second.as_bytes(), 0o600);
    let r = s.tool(3, "http_request", get(url));
    assert_eq!(r["structuredContent"]["status"], 200, "{r}");
    server.settle();
    let sent: Vec<Option<String>> = server.requests().iter().map(|q| q.header("authorization").map(str::to_owned)).collect();
    assert_eq!(sent, vec![Some(format!("Bearer {first}")), Some(format!("Bearer {second}"))]);
    s.finish().assert_exit(0);
    let rows = std::fs::read_to_string(&journal).unwrap();
    assert!(!rows.contains(&first) && !rows.contains(&second), "a secret in the journal");
    assert_verifies(&journal);
}

/// The journal on a 64 KiB tmpfs that fills up: run inside `unshare -m` so the mount is
/// private and disappears with the test; the journal is copied out before it does.
#[test]
fn a_full_journal_disk_stops_actions_and_keeps_what_was_written_verifiable() {
    let probe = Command::new("unshare").args(["-m", "sh", "-c", "mount -t tmpfs -o size=4k tmpfs /mnt"]).status();
    if !probe.is_ok_and(|s| s.success()) {
        eprintln!("skipped: unshare -m with a tmpfs mount is not allowed here");
        return;
    }
    let server = TestServer::start();
    server.route("/open/x", Reply::text(200, "ok"));
    let dir = TempDir::new("faults-full");
    let mnt = dir.path.join("mnt");
    std::fs::create_dir(&mnt).unwrap();
    let out = dir.path.join("journal.copy");
    let host = format!("127.0.0.1:{}", server.port);
    let policy = json!({
        "http": {"allow": [{"hosts": [host], "methods": ["GET"], "paths": ["/open/*"]}]},
        "audit": {"path": mnt.join("audit.jsonl")}
    });
    let policy = dir.file("policy.json", policy.to_string().as_bytes(), 0o600);
    let sp = support::process::sp_bin();
    let script = format!(
        "mount -t tmpfs -o size=64k,mode=0700 tmpfs '{m}' && '{sp}' mcp -q --config '{p}'; status=$?; cp '{m}/audit.jsonl' '{o}'; exit $status",
        m = mnt.display(),
        p = policy.display(),
        o = out.display()
    );
    let calls: Vec<Value> = (1..=400).map(|i| tool_call(i, "http_request", get(format!("{}/open/x", server.base())))).collect();
    let mut input = lines(&[initialize(json!(0), "2025-06-18"), initialized()]);
    input.extend(lines(&calls));
    let mut child = Command::new("unshare")
        .args(["-m", "sh", "-c", &script])
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let writer = std::thread::spawn(move || {
        let _ = stdin.write_all(&input);
        // Keep stdin open until sp has answered (EOF would cancel a running call).
        std::thread::sleep(Duration::from_secs(3));
    });
    let mut stdout = String::new();
    let mut pipe = child.stdout.take().unwrap();
    let reader = std::thread::spawn(move || {
        let _ = pipe.read_to_string(&mut stdout);
        stdout
    });
    writer.join().unwrap();
    let status = support::process::wait_deadline(&mut child, "sp's exit after its stdin closed");
    let stdout = reader.join().unwrap();
    let mut stderr = String::new();
    let _ = child.stderr.take().unwrap().read_to_string(&mut stderr);
    let answers: Vec<Value> = stdout.lines().map(|l| serde_json::from_str(l).expect("whole lines")).collect();
    let ok = answers.iter().filter(|a| a["result"]["isError"] == false).count();
    let refused: Vec<&Value> = answers.iter().filter(|a| a["result"]["isError"] == true).collect();
    assert!(!refused.is_empty(), "the disk never filled: {} answers, status {status:?}\n{stderr}", answers.len());
    let message = refused[0]["result"]["structuredContent"]["error"]["message"].as_str().unwrap_or_default();
    eprintln!("disk full after {ok} calls; {} refused; first refusal: {message}; exit {status:?}", refused.len());
    assert!(message.to_lowercase().contains("journal"), "the refusal says why: {}", refused[0]);
    server.settle();
    assert_eq!(server.requests().len(), ok, "a call whose intent row failed reached the server");
    let run = run_sp(&["audit", "verify", &out.display().to_string()], &[], b"");
    assert_eq!(run.status.code(), Some(0), "rows written before the disk filled do not verify: {}", run.context());
}

#[test]
fn stdin_closed_mid_line_is_a_parse_error_and_nothing_runs() {
    let server = TestServer::start();
    let dir = TempDir::new("faults-cut");
    let policy = json!({"http": {"allow": [{"hosts": [format!("127.0.0.1:{}", server.port)], "methods": ["GET"]}]}, "audit": {"path": null}});
    let policy = dir.file("policy.json", policy.to_string().as_bytes(), 0o600);
    let mut input = lines(&[initialize(json!(0), "2025-06-18"), initialized()]);
    let call = tool_call(1, "http_request", get(format!("{}/x", server.base()))).to_string();
    input.extend_from_slice(&call.as_bytes()[..call.len() - 1]);
    let run = Launch::mcp(&policy, &[]).run(&input);
    run.assert_exit(3);
    let msgs = run.protocol();
    assert_eq!(msgs.last().unwrap()["error"]["code"], -32700, "{}", run.context());
    server.settle();
    assert_eq!(server.accepted(), 0);
}

#[test]
fn stderr_closed_changes_nothing_on_stdout() {
    let dir = TempDir::new("faults-stderr");
    let policy = dir.file("policy.json", json!({"audit": {"path": null}}).to_string().as_bytes(), 0o600);
    let input = lines(&[
        initialize(json!(0), "2025-06-18"),
        initialized(),
        tool_call(1, "sp_inventory", json!({})),
        json!({"jsonrpc": "2.0", "id": 2, "method": "nope"}),
    ]);
    let script = format!("exec 2>&-; exec '{}' mcp -vv --config '{}'", support::process::sp_bin(), policy.display());
    let mut child = Command::new("sh").args(["-c", &script]).stdin(Stdio::piped()).stdout(Stdio::piped()).spawn().unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let stdout = child.stdout.take().unwrap();
    stdin.write_all(&input).unwrap();
    // Lines from a thread, each awaited with a deadline.
    let (tx, lines_in) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in std::io::BufRead::lines(std::io::BufReader::new(stdout)) {
            let Ok(line) = line else { return };
            if tx.send(line).is_err() {
                return;
            }
        }
    });
    let mut got = Vec::new();
    while got.len() < 3 {
        match lines_in.recv_timeout(support::process::deadline()) {
            Ok(line) => got.push(line),
            Err(e) => {
                let _ = child.kill();
                panic!("waiting for answer {} of 3 on sp's stdout: {e}; got {got:?}", got.len() + 1);
            }
        }
    }
    drop(stdin);
    let status = support::process::wait_deadline(&mut child, "sp's exit after its stdin closed");
    while let Ok(line) = lines_in.recv_timeout(std::time::Duration::from_secs(5)) {
        got.push(line);
    }
    assert_eq!(status.code(), Some(0));
    let msgs: Vec<Value> = got.iter().map(|l| serde_json::from_str(l).unwrap()).collect();
    assert_eq!(msgs.len(), 3, "{msgs:?}");
    assert_eq!(msgs[1]["result"]["isError"], false, "{msgs:?}");
    assert_eq!(msgs[2]["error"]["code"], -32601, "{msgs:?}");
}

#[test]
fn a_slowloris_client_is_served_and_sp_sleeps_meanwhile() {
    let dir = TempDir::new("faults-slow");
    let policy = dir.file("policy.json", json!({"audit": {"path": null}}).to_string().as_bytes(), 0o600);
    let mut s = Session::start(Launch::mcp(&policy, &[]));
    s.ready("2025-06-18");
    let ping = format!("{}\n", json!({"jsonrpc": "2.0", "id": 9, "method": "ping"}));
    let cpu = |pid: u32| -> u64 {
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
        let fields: Vec<&str> = stat.rsplit_once(')').map(|(_, r)| r.split_whitespace().collect()).unwrap_or_default();
        fields.get(11).and_then(|u| u.parse::<u64>().ok()).unwrap_or(0) + fields.get(12).and_then(|u| u.parse::<u64>().ok()).unwrap_or(0)
    };
    let pid = s.pid();
    let before = cpu(pid);
    let started = Instant::now();
    for b in ping.as_bytes() {
        s.send_raw(&[*b]);
        std::thread::sleep(Duration::from_millis(20));
    }
    let answer = s.read();
    let wall = started.elapsed();
    let ticks = cpu(pid) - before;
    assert_eq!((answer["id"].clone(), answer["result"].clone()), (json!(9), json!({})), "{answer}");
    // Clock ticks are 10 ms: a busy loop over ~0.7 s would show ~70.
    assert!(ticks <= 10, "sp used {ticks} ticks of CPU over {wall:?} of trickled input");
    s.finish().assert_exit(0);
}
