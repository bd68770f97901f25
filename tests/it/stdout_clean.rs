//! Stdout cleanliness, a release criterion (MISSION.md): the built `sp` runs exactly as an
//! MCP client starts it (`sp mcp --config FILE`, stdin and stdout pipes, a filtered
//! environment) and its RAW stdout is checked line by line: every line one complete
//! JSON-RPC 2.0 message ending in `\n`, also when the process exits non-zero. Scenarios:
//! verbose logging, missing/broken/absent config, an unreadable secret, panics, the cold
//! first request, the client closing early. A failure shows the first offending raw line
//! (`non-protocol stdout on line N: b'...'`), the launch command and stderr separately.
//!
//! Also: the human-facing commands (`--version`, `--help`, usage errors, `sp check`) and
//! the descriptor layout DESIGN.md promises (fd 1 points at stderr; the protocol stream
//! is a private close-on-exec descriptor >= 3), read from `/proc` while `sp mcp` runs.
#![allow(
    clippy::disallowed_methods,
    reason = "tests and benchmarks start sp, sshd and clients and read their environment; the fence in clippy.toml is for src/"
)]

use crate::support;

use std::io::Write;
use std::path::{Path, PathBuf};

use serde_json::{json, Value};

use support::http_server::TestServer;
use support::process::{canary, check_protocol, initialize, initialized, lines, py_bytes, run_sp, tool_call, tool_error_code, Launch, Run, Session, TempDir};

// ---------------------------------------------------------------------------------------
// Fixtures

/// A policy allowing GET/POST on `127.0.0.1:PORT` `/v1/*` and `/open/*`, with a bearer
/// credential `api` from a secret file (mode `secret_mode`) bound to `/v1/*`.
struct Fixture {
    dir: TempDir,
    policy: PathBuf,
    secret: String,
    secret_path: PathBuf,
}

fn fixture(port: u16, secret_mode: u32) -> Fixture {
    let dir = TempDir::new("clean");
    let secret = canary();
    let secret_path = dir.file("api.token", format!("{secret}\n").as_bytes(), secret_mode);
    let policy_text = json!({
        "credentials": {"api": {
            "source": {"file": secret_path.display().to_string()},
            "inject": {"bearer": {}},
            "hosts": [format!("127.0.0.1:{port}")],
            "paths": ["/v1/*"]
        }},
        "http": {"allow": [{"hosts": [format!("127.0.0.1:{port}")], "methods": ["GET", "POST"], "paths": ["/v1/*", "/open/*"]}]}
    });
    let policy = dir.file("policy.json", policy_text.to_string().as_bytes(), 0o600);
    Fixture { dir, policy, secret, secret_path }
}

fn http_get(id: i64, url: String) -> Value {
    tool_call(id, "http_request", json!({"method": "GET", "url": url}))
}

/// A whole session exercising every stage, as one stdin: initialize, initialized, ping,
/// tools/list, sp_inventory, an executed credentialed GET, a denied DELETE, an argument
/// error, an unknown method, an unknown tool. Returns the input and the request ids.
fn busy_session(port: u16) -> (Vec<u8>, Vec<Value>) {
    let msgs = vec![
        initialize(json!("init"), "2025-06-18"),
        initialized(),
        json!({"jsonrpc": "2.0", "id": 1, "method": "ping"}),
        json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list"}),
        tool_call(3, "sp_inventory", json!({})),
        http_get(4, format!("http://127.0.0.1:{port}/v1/users")),
        tool_call(5, "http_request", json!({"method": "DELETE", "url": format!("http://127.0.0.1:{port}/v1/users")})),
        tool_call(6, "http_request", json!({"method": "GET", "url": 7})),
        json!({"jsonrpc": "2.0", "id": 7, "method": "no/such/method"}),
        tool_call(8, "no.such.tool", json!({})),
    ];
    let ids = msgs.iter().filter_map(|m| m.get("id").cloned()).collect();
    (lines(&msgs), ids)
}

/// Runs `busy_session` under `launch`: exit 0, stdout protocol only with one answer per
/// request in order, exactly one request at the server, the secret nowhere in stdout.
fn assert_busy_session_clean(launch: Launch, server: &TestServer, f: &Fixture) -> Run {
    let (input, ids) = busy_session(server.port);
    let run = launch.run(&input);
    let msgs = run.protocol();
    run.assert_exit(0);
    let got: Vec<&Value> = msgs.iter().map(|m| &m["id"]).collect();
    assert_eq!(got, ids.iter().collect::<Vec<_>>(), "one answer per request, in order\n{}", run.context());
    assert_eq!(msgs[4]["result"]["isError"], false, "the allowed GET executed\n{}", run.context());
    assert_eq!(tool_error_code(&msgs[5]["result"]), Some("SP_DENIED"), "{}", run.context());
    assert_eq!(tool_error_code(&msgs[6]["result"]), Some("SP_BAD_ARGUMENTS"), "{}", run.context());
    assert_eq!((msgs[7]["error"]["code"].clone(), msgs[8]["error"]["code"].clone()), (json!(-32601), json!(-32602)), "{}", run.context());
    assert_eq!(server.requests().len(), 1, "exactly the allowed GET reached the server\n{}", run.context());
    assert_eq!(server.requests()[0].header("authorization"), Some(format!("Bearer {}", f.secret).as_str()));
    let out = String::from_utf8_lossy(&run.stdout);
    assert!(!out.contains(&f.secret), "the secret reached stdout\n{}", run.context());
    assert!(!run.stderr.contains(&f.secret), "the secret reached stderr\n{}", run.context());
    run
}

// ---------------------------------------------------------------------------------------
// The checker itself must be able to fail.

#[test]
fn the_checker_rejects_non_protocol_bytes() {
    let ok = b"{\"id\":1,\"jsonrpc\":\"2.0\",\"result\":{}}\n";
    assert_eq!(check_protocol(ok).unwrap().len(), 1);
    assert_eq!(check_protocol(b"").unwrap().len(), 0);
    let mut banner = b"loading optional extension\n".to_vec();
    banner.extend_from_slice(ok);
    assert_eq!(check_protocol(&banner).unwrap_err(), r"non-protocol stdout on line 1: b'loading optional extension\n'");
    let mut after = ok.to_vec();
    after.extend_from_slice(b"thread 'main' panicked\n");
    assert_eq!(check_protocol(&after).unwrap_err(), r"non-protocol stdout on line 2: b'thread \'main\' panicked\n'");
    for bad in [
        &b"{\"id\":1,\"jsonrpc\":\"2.0\",\"result\":{}}"[..],              // no newline
        b"{\"id\":1,\"jsonrpc\":\"2.0\",\"result\":{}}\r\n",               // CRLF
        b" {\"id\":1,\"jsonrpc\":\"2.0\",\"result\":{}}\n",                // leading space
        b"\n",                                                             // empty line
        b"{\"id\":1,\"jsonrpc\":\"2.0\",\"result\":{}}{\"id\":2}\n",       // two values
        b"[{\"id\":1,\"jsonrpc\":\"2.0\",\"result\":{}}]\n",               // batch
        b"{\"id\":1,\"jsonrpc\":\"1.0\",\"result\":{}}\n",                 // version
        b"{\"id\":1,\"jsonrpc\":\"2.0\"}\n",                               // neither result nor error
        b"{\"id\":1,\"jsonrpc\":\"2.0\",\"result\":{},\"error\":{}}\n",    // both
        b"{\"id\":1.5,\"jsonrpc\":\"2.0\",\"result\":{}}\n",               // float id
        b"{\"id\":1,\"jsonrpc\":\"2.0\",\"method\":\"sampling/x\"}\n",     // a request to the client
        b"{\"id\":1,\"jsonrpc\":\"2.0\",\"result\":{},\"extra\":1}\n",     // extra member
        b"{\"id\":1,\"jsonrpc\":\"2.0\",\"error\":{\"message\":\"x\"}}\n", // error without code
        b"{\"id\":1,\"jsonrpc\":\"2.0\",\"result\":\"\xff\"}\n",           // not UTF-8
    ] {
        let err = check_protocol(bad).expect_err(&py_bytes(bad));
        assert!(err.starts_with("non-protocol stdout on line 1: b'"), "{err}");
    }
    assert_eq!(py_bytes(b"a'\\\x00\xff\t"), r"b'a\'\\\x00\xff\t'");
}

// ---------------------------------------------------------------------------------------
// Verbose logging

#[test]
fn verbose_flags_keep_stdout_clean() {
    let server = TestServer::start();
    let f = fixture(server.port, 0o600);
    let run = assert_busy_session_clean(Launch::mcp(&f.policy, &["-vvv"]), &server, &f);
    // The flags took effect: debug/trace lines were written, to stderr.
    assert!(run.stderr.lines().count() >= 5, "-vvv logged almost nothing\n{}", run.context());
    assert!(run.stderr.contains("executing GET"), "{}", run.context());
}

#[test]
fn verbose_env_vars_keep_stdout_clean() {
    let server = TestServer::start();
    let f = fixture(server.port, 0o600);
    let launch = Launch::mcp(&f.policy, &[]).env("SP_LOG", "trace").env("RUST_LOG", "trace").env("RUST_BACKTRACE", "full").env("RUST_LIB_BACKTRACE", "1");
    let run = assert_busy_session_clean(launch, &server, &f);
    assert!(run.stderr.contains("executing GET"), "SP_LOG=trace had no effect\n{}", run.context());
}

#[test]
fn quiet_keeps_stdout_clean_and_stderr_empty() {
    let server = TestServer::start();
    let f = fixture(server.port, 0o600);
    let run = assert_busy_session_clean(Launch::mcp(&f.policy, &["-q"]).env("SP_LOG", "trace"), &server, &f);
    assert_eq!(run.stderr, "", "-q still logged\n{}", run.context());
}

// ---------------------------------------------------------------------------------------
// Missing, broken, absent config

/// A client sends `initialize` at once; a fatal startup error must still leave stdout
/// empty.
fn startup_input() -> Vec<u8> {
    lines(&[initialize(json!(1), "2025-06-18"), initialized()])
}

#[test]
fn missing_config_exits_1_with_empty_stdout() {
    let run = run_sp(&["mcp", "--config", "/nonexistent"], &[], &startup_input());
    run.assert_exit(1);
    assert_eq!(run.stdout, b"", "{}", run.context());
    assert!(run.stderr.contains("/nonexistent") && run.stderr.contains("no such file"), "{}", run.context());
    assert_eq!(run.stderr.lines().count(), 1, "one clear message\n{}", run.context());
}

#[test]
fn config_that_is_not_json_exits_1_with_empty_stdout() {
    let dir = TempDir::new("badcfg");
    for (name, text) in [("truncated.json", "{\"http\": {"), ("two.json", "{}{}"), ("dup.json", "{\"http\":{},\"http\":{}}"), ("empty.json", "")] {
        let p = dir.file(name, text.as_bytes(), 0o600);
        let run = Launch::mcp(&p, &[]).run(&startup_input());
        run.assert_exit(1);
        assert_eq!(run.stdout, b"", "{name}\n{}", run.context());
        assert!(run.stderr.starts_with("sp: ") && run.stderr.contains(&p.display().to_string()), "{name}: names the file\n{}", run.context());
    }
}

#[test]
fn config_with_a_bad_field_names_the_field() {
    let dir = TempDir::new("fieldcfg");
    for (text, field) in [
        (r#"{"http": {"allow": [{"hosts": ["api.example.com"], "methods": ["FETCH"]}]}}"#, "http.allow[0].methods[0]"),
        (r#"{"http": {"allow": [{"hosts": ["a.example.com"]}, {"hosts": ["a*b"]}]}}"#, "http.allow[1].hosts[0]"),
        (r#"{"http": {"timeout_s": 0}}"#, "http.timeout_s"),
        (r#"{"credentials": {"x": {"source": {"file": "rel/path"}, "inject": {"bearer": {}}, "hosts": ["a.example.com"]}}}"#, "credentials.x.source.file"),
        (r#"{"http": {"alow": []}}"#, "http.alow"),
    ] {
        let p = dir.file("policy.json", text.as_bytes(), 0o600);
        let run = Launch::mcp(&p, &[]).run(&startup_input());
        run.assert_exit(1);
        assert_eq!(run.stdout, b"", "{text}\n{}", run.context());
        assert!(run.stderr.contains(field), "stderr must name {field}\n{}", run.context());
    }
}

#[test]
fn no_config_anywhere_serves_deny_all_with_one_warning() {
    assert!(!Path::new("/etc/sallyport/policy.json").exists(), "this machine has /etc/sallyport/policy.json; the no-config test cannot run here");
    let server = TestServer::start();
    let home = TempDir::new("home");
    std::fs::create_dir(home.path.join("xdg")).unwrap();
    let url = format!("http://127.0.0.1:{}/v1/users", server.port);
    let input = lines(&[initialize(json!(1), "2025-06-18"), initialized(), http_get(2, url.clone())]);
    for env in [vec![("HOME", home.join(""))], vec![("HOME", home.join("")), ("XDG_CONFIG_HOME", home.join("xdg"))]] {
        let mut launch = Launch::new(&["mcp"]);
        for (k, v) in &env {
            launch = launch.env(k, v);
        }
        let run = launch.run(&input);
        let msgs = run.protocol();
        run.assert_exit(0);
        assert_eq!(msgs.len(), 2, "{}", run.context());
        assert_eq!(tool_error_code(&msgs[1]["result"]), Some("SP_DENIED"), "{}", run.context());
        let warnings: Vec<&str> = run.stderr.lines().filter(|l| l.contains("no policy found")).collect();
        assert_eq!(warnings.len(), 1, "exactly one warning\n{}", run.context());
        assert!(warnings[0].contains(&home.join("")), "the warning lists where it looked\n{}", run.context());
        assert!(run.summary().contains("rejections=1 [denied=1]"), "{}", run.context());
    }
    server.settle();
    assert_eq!(server.accepted(), 0);
}

// ---------------------------------------------------------------------------------------
// A recoverable failure: the secret cannot be used

#[test]
fn secret_file_too_open_is_a_clean_tool_error() {
    let server = TestServer::start();
    let f = fixture(server.port, 0o644);
    let input = lines(&[
        initialize(json!(1), "2025-06-18"),
        initialized(),
        http_get(2, format!("http://127.0.0.1:{}/v1/users", server.port)),
        // The session goes on: an uncredentialed path still works.
        http_get(3, format!("http://127.0.0.1:{}/open/x", server.port)),
    ]);
    let run = Launch::mcp(&f.policy, &[]).run(&input);
    let msgs = run.protocol();
    run.assert_exit(0);
    assert_eq!(msgs.len(), 3, "{}", run.context());
    let r = &msgs[1]["result"];
    assert_eq!(tool_error_code(r), Some("SP_UNAVAILABLE"), "{}", run.context());
    let message = r["structuredContent"]["error"]["message"].as_str().unwrap_or_default();
    assert!(message.contains("too open") && message.contains("0644"), "{message}");
    assert_eq!(msgs[2]["result"]["isError"], false, "{}", run.context());
    let out = String::from_utf8_lossy(&run.stdout);
    assert!(!out.contains(&f.secret), "{}", run.context());
    assert!(!out.contains(&f.secret_path.display().to_string()), "the secret's path reached the agent\n{}", run.context());
    // The refused credential never left: only the uncredentialed request arrived.
    let seen = server.requests();
    assert_eq!(seen.len(), 1, "{seen:?}");
    assert_eq!((seen[0].target.as_str(), seen[0].header("authorization")), ("/open/x", None));
    drop(f.dir);
}

// ---------------------------------------------------------------------------------------
// Panics

#[test]
fn panic_at_startup_leaves_stdout_empty() {
    let server = TestServer::start();
    let f = fixture(server.port, 0o600);
    for extra in [&[][..], &["-vvv"]] {
        let run = Launch::mcp(&f.policy, extra).env("SP_TEST_PANIC", "startup").env("RUST_BACKTRACE", "full").run(&startup_input());
        run.protocol();
        run.assert_exit(101);
        assert_eq!(run.stdout, b"", "{}", run.context());
        assert!(run.stderr.contains("panicked") && run.stderr.contains("SP_TEST_PANIC=startup"), "{}", run.context());
    }
}

#[test]
fn panic_on_the_first_request_leaves_stdout_empty() {
    let server = TestServer::start();
    let f = fixture(server.port, 0o600);
    let input = lines(&[initialize(json!(1), "2025-06-18"), initialized(), http_get(2, format!("http://127.0.0.1:{}/v1/x", server.port))]);
    let run = Launch::mcp(&f.policy, &["-vvv"]).env("SP_TEST_PANIC", "request").env("RUST_BACKTRACE", "full").run(&input);
    run.protocol();
    run.assert_exit(101);
    assert_eq!(run.stdout, b"", "it panics on the first frame: nothing may be written\n{}", run.context());
    assert!(run.stderr.contains("SP_TEST_PANIC=request"), "{}", run.context());
    server.settle();
    assert_eq!(server.accepted(), 0);
}

// ---------------------------------------------------------------------------------------
// Cold start and malformed input (non-zero exit)

#[test]
fn first_request_after_a_cold_start_gets_a_well_formed_answer() {
    let server = TestServer::start();
    let f = fixture(server.port, 0o600);
    // initialize first, as clients do.
    let run = Launch::mcp(&f.policy, &[]).run(&lines(&[initialize(json!("first"), "2025-06-18")]));
    let msgs = run.protocol();
    run.assert_exit(0);
    assert_eq!(msgs.len(), 1, "{}", run.context());
    assert_eq!(msgs[0]["id"], "first");
    assert_eq!(msgs[0]["result"]["protocolVersion"], "2025-06-18", "{}", run.context());
    assert_eq!(msgs[0]["result"]["serverInfo"]["name"], "sallyport");
    // A tools/call before initialize: a well-formed refusal, and nothing executed.
    let run = Launch::mcp(&f.policy, &[]).run(&lines(&[http_get(9, format!("http://127.0.0.1:{}/v1/x", server.port))]));
    let msgs = run.protocol();
    run.assert_exit(0);
    assert_eq!(msgs.len(), 1, "{}", run.context());
    assert_eq!((msgs[0]["id"].clone(), msgs[0]["error"]["code"].clone()), (json!(9), json!(-32600)), "{}", run.context());
    server.settle();
    assert_eq!(server.accepted(), 0);
}

#[test]
fn malformed_input_exits_3_with_protocol_only_stdout() {
    let server = TestServer::start();
    let f = fixture(server.port, 0o600);
    let mut input = lines(&[initialize(json!(1), "2025-06-18"), initialized()]);
    input.extend_from_slice(b"<html><body>502 Bad Gateway</body></html>\n");
    input.extend(lines(&[http_get(2, format!("http://127.0.0.1:{}/v1/x", server.port))]));
    let run = Launch::mcp(&f.policy, &["-vvv"]).run(&input);
    let msgs = run.protocol();
    run.assert_exit(3);
    assert_eq!(msgs.len(), 2, "{}", run.context());
    assert_eq!((msgs[1]["id"].clone(), msgs[1]["error"]["code"].clone()), (Value::Null, json!(-32700)), "{}", run.context());
    server.settle();
    assert_eq!(server.accepted(), 0, "the request after the garbage was never read");
}

#[test]
fn close_on_refusal_exits_4_with_protocol_only_stdout() {
    let server = TestServer::start();
    let f = fixture(server.port, 0o600);
    let url = format!("http://127.0.0.1:{}/v1/x", server.port);
    let input = lines(&[
        initialize(json!(1), "2025-06-18"),
        initialized(),
        tool_call(2, "http_request", json!({"method": "DELETE", "url": url})),
        http_get(3, url.clone()),
    ]);
    let run = Launch::mcp(&f.policy, &["--close-on-refusal", "-vvv"]).run(&input);
    let msgs = run.protocol();
    run.assert_exit(4);
    assert_eq!(msgs.len(), 2, "{}", run.context());
    assert_eq!(tool_error_code(&msgs[1]["result"]), Some("SP_DENIED"), "{}", run.context());
    server.settle();
    assert_eq!(server.accepted(), 0, "the request after the refusal was never read");
}

// ---------------------------------------------------------------------------------------
// The client goes away

#[test]
fn client_closes_stdin_right_after_initialize() {
    let server = TestServer::start();
    let f = fixture(server.port, 0o600);
    let mut s = Session::start(Launch::mcp(&f.policy, &[]));
    s.send(&initialize(json!(1), "2025-11-25"));
    let run = s.finish();
    let msgs = run.protocol();
    run.assert_exit(0);
    assert_eq!(msgs.len(), 1, "{}", run.context());
    assert_eq!(msgs[0]["result"]["protocolVersion"], "2025-11-25", "{}", run.context());
    assert!(run.summary().starts_with("sp: session ended (Eof)"), "{}", run.context());
}

/// The client closes its read end of sp's stdout before sp writes: the first failed
/// write (EPIPE) ends the session, exit 0, and no answer lands anywhere else.
///
/// This test used to hang (issue 32): it sent two requests and waited for sp's exit with
/// no deadline. Tests run as threads of one process, and a sibling that spawns a child
/// forks a copy of every descriptor, the read end of this pipe included, which the copy
/// holds until it execs. A write of sp's in that window succeeds; with both answers
/// written, sp waited on its open stdin for ever. Now requests keep coming (a ping every
/// 20 ms) until sp is gone, so the next write after the window fails; the wait has a
/// deadline and says what it waited for. The sibling's fork is played here for certain:
/// a `sleep` holds the read end for half a second, as such a child would.
#[test]
fn client_closes_stdout_before_sp_writes() {
    let server = TestServer::start();
    let f = fixture(server.port, 0o600);
    let launch = Launch::mcp(&f.policy, &["-vvv"]);
    let mut child = launch.spawn();
    // The client stops reading before sp has written anything; only the sibling holds
    // the read end, for a while.
    let read_end = std::os::fd::OwnedFd::from(child.stdout.take().expect("stdout"));
    let mut sibling = std::process::Command::new("sleep")
        .arg("0.5")
        .stdin(std::process::Stdio::from(read_end))
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("start sleep, the sibling holding the read end");
    let stderr = support::process::read_all_in_thread(child.stderr.take().expect("stderr"));
    let mut stdin = child.stdin.take().expect("stdin");
    // stdin stays open, so only the broken stdout can end the session.
    stdin.write_all(&lines(&[initialize(json!(1), "2025-06-18")])).expect("sp reads its stdin");
    let end = std::time::Instant::now() + support::process::deadline();
    let mut id = 2;
    let status = loop {
        if let Some(status) = child.try_wait().expect("try_wait on sp") {
            break Some(status);
        }
        if std::time::Instant::now() >= end {
            let _ = child.kill();
            let _ = child.wait();
            break None;
        }
        // EPIPE once sp is gone (std ignores SIGPIPE): expected, the loop then ends.
        let _ = stdin.write_all(&lines(&[json!({"jsonrpc": "2.0", "id": id, "method": "ping"})]));
        id += 1;
        std::thread::sleep(std::time::Duration::from_millis(20));
    };
    drop(stdin);
    support::process::wait_deadline(&mut sibling, "sleep 0.5, the sibling holding the read end");
    let stderr = String::from_utf8_lossy(&support::process::collect(&stderr, "sp's stderr")).into_owned();
    let ctx = format!("command: {}\nstderr:\n{stderr}", launch.describe());
    let Some(status) = status else {
        panic!(
            "sp still running {} s after its client closed stdout (waiting for its exit; it was sent {} requests); killed\n{ctx}",
            support::process::deadline().as_secs(),
            id - 1
        );
    };
    assert_eq!(status.code(), Some(0), "EPIPE means the client is gone: exit 0\n{ctx}");
    // `serverInfo` is only in the answer (the request has no such member).
    assert!(!stderr.contains("serverInfo"), "the answer was written elsewhere\n{ctx}");
    assert!(stderr.contains("sp: session ended (ClientGone)"), "{ctx}");
    // The window was real: while the sibling held the read end, answers went through,
    // so more than the first request was needed.
    assert!(id > 3, "sp stopped after {} request(s): the sibling's hold was not felt\n{ctx}", id - 1);
}

/// Started with fd 1 closed there is no protocol stream. Rust's runtime reopens a closed
/// fd 0/1/2 on `/dev/null` before `main`, so `out::take_stdout` refuses a stdout that is
/// `/dev/null`: sp exits 1 without serving, and the credentialed request in the input
/// never reaches the loopback server. (Regression test: it used to serve blind.)
#[test]
fn closed_stdout_at_start_is_fatal() {
    let server = TestServer::start();
    let f = fixture(server.port, 0o600);
    let input = lines(&[initialize(json!(1), "2025-06-18"), initialized(), http_get(2, format!("http://127.0.0.1:{}/v1/x", server.port))]);
    let script = format!("exec {} mcp --config {} >&-", support::process::sp_bin(), f.policy.display());
    let out = std::process::Command::new("/bin/sh")
        .args(["-c", &script])
        .env_clear()
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .map(|mut child| {
            let _ = child.stdin.take().expect("stdin").write_all(&input);
            support::process::output_deadline(child, &format!("sh -c {script:?}"))
        })
        .expect("run sh");
    let stderr = String::from_utf8_lossy(&out.stderr);
    server.settle();
    assert_eq!(server.accepted(), 0, "a request was executed for a client that cannot read answers\ncommand: sh -c {script:?}\nstderr:\n{stderr}");
    assert_eq!(out.status.code(), Some(1), "command: sh -c {script:?}\nstderr:\n{stderr}");
    assert!(stderr.contains("standard output"), "{stderr}");
}

// ---------------------------------------------------------------------------------------
// Descriptors: fd 1 is stderr, the protocol stream is private and close-on-exec

#[test]
fn fd1_points_at_stderr_and_the_protocol_fd_is_private() {
    let server = TestServer::start();
    let f = fixture(server.port, 0o600);
    let mut s = Session::start(Launch::mcp(&f.policy, &[]));
    // An answer proves startup (and the stdout takeover) is done; sp now waits on stdin.
    let pong = s.call(&json!({"jsonrpc": "2.0", "id": 1, "method": "ping"}));
    assert_eq!(pong["result"], json!({}));
    let pid = s.pid();
    let link = |fd: &str| std::fs::read_link(format!("/proc/{pid}/fd/{fd}")).unwrap_or_else(|e| panic!("fd {fd} of sp: {e}"));
    let (fd1, fd2) = (link("1"), link("2"));
    assert_eq!(fd2, s.stderr_pipe, "fd 2 is the stderr pipe");
    assert_eq!(fd1, fd2, "fd 1 must point at stderr (strays land there), not {fd1:?}");
    assert_ne!(fd1, s.stdout_pipe);
    let mut protocol_fds = Vec::new();
    for entry in std::fs::read_dir(format!("/proc/{pid}/fd")).expect("list sp's fds") {
        let entry = entry.unwrap();
        if std::fs::read_link(entry.path()).ok().as_ref() == Some(&s.stdout_pipe) {
            protocol_fds.push(entry.file_name().to_string_lossy().parse::<u32>().unwrap());
        }
    }
    assert_eq!(protocol_fds.len(), 1, "exactly one descriptor holds the protocol pipe: {protocol_fds:?}");
    let n = protocol_fds[0];
    assert!(n >= 3, "the protocol stream is on fd {n}, want >= 3");
    let info = std::fs::read_to_string(format!("/proc/{pid}/fdinfo/{n}")).expect("fdinfo");
    let flags = info
        .lines()
        .find_map(|l| l.strip_prefix("flags:"))
        .and_then(|v| u32::from_str_radix(v.trim(), 8).ok())
        .unwrap_or_else(|| panic!("no flags in fdinfo: {info}"));
    const O_CLOEXEC: u32 = 0o2000000;
    assert_ne!(flags & O_CLOEXEC, 0, "fd {n} is not close-on-exec (flags {flags:o})");
    // And the protocol still flows on it.
    let pong = s.call(&json!({"jsonrpc": "2.0", "id": 2, "method": "ping"}));
    assert_eq!(pong["result"], json!({}));
    let run = s.finish();
    run.protocol();
    run.assert_exit(0);
}

/// A child process writing to what it believes is sp's stdout: a credential `command`
/// source that writes to `/proc/$PPID/fd/1` (sp's fd 1) and lists its own descriptors
/// there. The stray line must land on stderr, and the child must hold no descriptor on
/// the protocol pipe (the private fd is close-on-exec).
#[test]
fn a_child_writing_to_fd_1_reaches_stderr_not_the_protocol() {
    let server = TestServer::start();
    let dir = TempDir::new("child");
    let secret = canary();
    let script =
        r#"{ printf 'stray-from-child fds:'; for f in /proc/$$/fd/*; do printf ' %s' "$(readlink "$f")"; done; echo; } > /proc/$PPID/fd/1; echo "$0""#;
    let policy = json!({
        "credentials": {"cmd": {
            "source": {"command": ["/bin/sh", "-c", script, secret]},
            "inject": {"bearer": {}},
            "hosts": [format!("127.0.0.1:{}", server.port)]
        }},
        "http": {"allow": [{"hosts": [format!("127.0.0.1:{}", server.port)], "methods": ["GET"]}]}
    });
    let policy = dir.file("policy.json", policy.to_string().as_bytes(), 0o600);
    let mut s = Session::start(Launch::mcp(&policy, &[]));
    s.ready("2025-06-18");
    let r = s.tool(1, "http_request", json!({"method": "GET", "url": format!("http://127.0.0.1:{}/x", server.port)}));
    assert_eq!(r["isError"], false, "{r}");
    let stdout_pipe = s.stdout_pipe.display().to_string();
    let stderr_pipe = s.stderr_pipe.display().to_string();
    let run = s.finish();
    run.protocol();
    run.assert_exit(0);
    assert_eq!(server.requests().len(), 1);
    assert_eq!(server.requests()[0].header("authorization"), Some(format!("Bearer {secret}").as_str()), "the command ran");
    let line = run
        .stderr
        .lines()
        .find(|l| l.starts_with("stray-from-child fds:"))
        .unwrap_or_else(|| panic!("the child's write to fd 1 did not reach stderr\n{}", run.context()));
    let fds: Vec<&str> = line["stray-from-child fds:".len()..].split_whitespace().collect();
    assert!(fds.contains(&stderr_pipe.as_str()), "{line}");
    assert!(!fds.contains(&stdout_pipe.as_str()), "the child inherited the protocol pipe: {line}");
    assert!(!String::from_utf8_lossy(&run.stdout).contains("stray"), "{}", run.context());
}

// ---------------------------------------------------------------------------------------
// Human-facing commands

#[test]
fn version_prints_to_stdout() {
    for flag in ["--version", "-V"] {
        let run = run_sp(&[flag], &[], b"");
        run.assert_exit(0);
        assert_eq!(String::from_utf8_lossy(&run.stdout), format!("sp {}\n", env!("CARGO_PKG_VERSION")), "{}", run.context());
        assert_eq!(run.stderr, "", "{}", run.context());
    }
}

#[test]
fn help_prints_to_stdout() {
    for args in [&["--help"][..], &["-h"], &["mcp", "--help"]] {
        let run = run_sp(args, &[], b"");
        run.assert_exit(0);
        let text = String::from_utf8_lossy(&run.stdout);
        assert!(text.contains("Usage:") && text.contains("sp mcp") && text.contains("sp check"), "{}", run.context());
        assert_eq!(run.stderr, "", "{}", run.context());
    }
}

#[test]
fn usage_errors_exit_2_with_one_line() {
    for args in [&["mcp", "--nope"][..], &[], &["serve"], &["mcp", "--config"], &["check", "--close-on-refusal"], &["mcp", "--max-line-bytes", "1"]] {
        let run = run_sp(args, &[], &startup_input());
        run.assert_exit(2);
        assert_eq!(run.stdout, b"", "{}", run.context());
        assert_eq!(run.stderr.lines().count(), 1, "one line on stderr\n{}", run.context());
        assert!(run.stderr.starts_with("sp: ") && run.stderr.ends_with('\n'), "{}", run.context());
    }
}

#[test]
fn check_accepts_a_good_policy() {
    let f = fixture(8080, 0o600);
    let run = run_sp(&["check", "--config", &f.policy.display().to_string()], &[], b"");
    run.assert_exit(0);
    let text = String::from_utf8_lossy(&run.stdout);
    assert!(text.starts_with(&format!("{}: ok\n", f.policy.display())), "{}", run.context());
    assert!(text.contains("1 allow rule(s)") && text.contains("credentials: 1") && text.contains("api:"), "{}", run.context());
    assert!(!text.contains(&f.secret), "sp check printed the secret\n{}", run.context());
}

#[test]
fn check_rejects_a_bad_policy_naming_the_field() {
    let dir = TempDir::new("check");
    let p = dir.file("bad.json", br#"{"http": {"allow": [{"hosts": ["api.example.com"], "methods": ["GET", "FETCH"]}]}}"#, 0o600);
    let run = run_sp(&["check", "--config", &p.display().to_string()], &[], b"");
    run.assert_exit(1);
    assert_eq!(run.stdout, b"", "{}", run.context());
    assert!(run.stderr.contains("http.allow[0].methods[1]") && run.stderr.contains("FETCH"), "{}", run.context());
    let run = run_sp(&["check", "--config", "/nonexistent/policy.json"], &[], b"");
    run.assert_exit(1);
    assert_eq!(run.stdout, b"", "{}", run.context());
    assert!(run.stderr.contains("/nonexistent/policy.json"), "{}", run.context());
}

/// The /dev/null refusal is for `sp mcp` only: `sp --version >/dev/null` in a packaging
/// script must keep working.
#[test]
fn human_commands_may_write_to_dev_null() {
    let status =
        std::process::Command::new(support::process::sp_bin()).arg("--version").stdout(std::process::Stdio::null()).status().expect("run sp --version");
    assert_eq!(status.code(), Some(0));
}
