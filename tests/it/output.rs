//! Issue 8 points 3, 4 and 8 through the built `sp`: no secret in the journal or the logs
//! at any verbosity; no forged log line or raw control/bidi character on stderr or in
//! `sp audit show`; stdout never ends mid-line (a non-blocking stdout, and signals during
//! a large answer).
//!
//! Attacks tried (all held after the fix; each failed on the code before it):
//! - a same-origin redirect from an uncredentialed request to `/open/session/<secret>`
//!   (followed) and to `/pub/session/<secret>` (not followed): the secret was in the hop's
//!   intent row `target` and in the `-vvv` lines "executing GET ..." and "redirect not
//!   followed ..."; now in no row and no log line;
//! - a path with `%0a%1b[2K` (allowed, so "executing", and denied, so "refused" with the
//!   decoded path): a raw ESC and a forged standalone line reached stderr; now escaped;
//! - a path with U+202E (RIGHT-TO-LEFT OVERRIDE) and U+2028: reached `sp audit show` raw;
//! - a non-blocking stdout (socket pair end, `O_NONBLOCK`) read slowly, a multi-MiB
//!   answer: sp exited 0 mid-line;
//! - SIGTERM/SIGINT (and SIGHUP, then a stop signal) while a multi-MiB answer is being written: the line was cut;
//!   SIGTERM while an action runs: it answers, a request sent after the signal never runs;
//! - a non-blocking stdin that is empty when sp reads: it was taken as broken (exit 3).
#![allow(
    clippy::disallowed_methods,
    reason = "tests and benchmarks start sp, sshd and clients and read their environment; the fence in clippy.toml is for src/"
)]

use crate::support;

use std::path::{Path, PathBuf};

use serde_json::{json, Value};

use support::http_server::{Reply, TestServer};
use support::process::{canary, run_sp, tool_error_code, Launch, Session, TempDir};

/// A secret file for credential `api` (bearer, `/v1/*`), uncredentialed GET on `/open/*`,
/// the journal at `dir/audit.jsonl`.
struct Fixture {
    _dir: TempDir,
    policy: PathBuf,
    journal: PathBuf,
    secret: String,
}

fn fixture(port: u16, http_extra: Value) -> Fixture {
    let dir = TempDir::new("output");
    let secret = canary();
    let token = dir.file("api.token", secret.as_bytes(), 0o600);
    let host = format!("127.0.0.1:{port}");
    let journal = dir.path.join("audit.jsonl");
    let mut http = json!({"allow": [{"hosts": [host], "methods": ["GET"], "paths": ["/v1/*", "/open/*"]}]});
    for (k, v) in http_extra.as_object().expect("object") {
        http[k] = v.clone();
    }
    let policy = json!({
        "credentials": {"api": {"source": {"file": token.display().to_string()}, "inject": {"bearer": {}}, "hosts": [host], "paths": ["/v1/*"]}},
        "http": http,
        "audit": {"path": journal.display().to_string()}
    });
    let policy = dir.file("policy.json", policy.to_string().as_bytes(), 0o600);
    Fixture { _dir: dir, policy, journal, secret }
}

fn get(url: String) -> Value {
    json!({"method": "GET", "url": url})
}

fn journal_text(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("read {}: {e}", path.display()))
}

fn redirect(to: &str) -> Reply {
    let mut r = Reply::text(302, "moved");
    r.headers.push(("Location".into(), to.into()));
    r
}

// ---------------------------------------------------------------------------------------
// Point 3: no secret in the journal or the logs

#[test]
fn a_secret_in_a_redirect_path_reaches_no_journal_row_and_no_log_line() {
    let server = TestServer::start();
    let f = fixture(server.port, json!({}));
    server.route("/v1/me", Reply::json(200, "{}"));
    server.route("/open/start", redirect(&format!("/open/session/{}", f.secret)));
    server.route(&format!("/open/session/{}", f.secret), Reply::json(200, "{}"));
    server.route("/open/elsewhere", redirect(&format!("/pub/session/{}", f.secret)));
    let mut s = Session::start(Launch::mcp(&f.policy, &["-vvv"]));
    s.ready("2025-06-18");
    let base = server.base();
    // The credentialed call reads the secret: from now on it is a secret of the session.
    assert_eq!(s.tool(1, "http_request", get(format!("{base}/v1/me")))["isError"], false);
    let followed = s.tool(2, "http_request", get(format!("{base}/open/start")));
    assert_eq!(followed["structuredContent"]["redirects"], 1, "{followed}");
    let refused = s.tool(3, "http_request", get(format!("{base}/open/elsewhere")));
    assert_eq!(refused["structuredContent"]["redirect_refused"], true, "{refused}");
    let run = s.finish();
    run.assert_exit(0);
    // The evidence that the lines we look at were written at all.
    assert!(run.stderr.contains("executing GET http://127.0.0.1") && run.stderr.contains("/open/session/[REDACTED:api]"), "{}", run.context());
    assert!(run.stderr.contains("redirect not followed"), "{}", run.context());
    assert!(!run.stderr.contains(&f.secret), "the secret reached a log line\n{}", run.context());
    let journal = journal_text(&f.journal);
    assert!(journal.contains("GET http://127.0.0.1") && journal.contains("/open/session/[REDACTED:api]"), "{journal}");
    assert!(!journal.contains(&f.secret), "the secret reached a journal row:\n{journal}");
    let j = f.journal.display().to_string();
    let verify = run_sp(&["audit", "verify", &j], &[], b"");
    assert_eq!(verify.code(), Some(0), "{}", verify.context());
}

// ---------------------------------------------------------------------------------------
// Point 4: logs cannot be forged

#[test]
fn a_log_forging_path_leaves_no_raw_control_byte_on_stderr() {
    let server = TestServer::start();
    let f = fixture(server.port, json!({}));
    let mut s = Session::start(Launch::mcp(&f.policy, &["-vvv"]));
    s.ready("2025-06-18");
    let base = server.base();
    // Allowed (an "executing" line) and denied (a "refused" line with the decoded path).
    s.tool(1, "http_request", get(format!("{base}/open/x%0a%1b[2KINFO%20forged-allowed%e2%80%ae")));
    let denied = s.tool(2, "http_request", get(format!("{base}/nope%0a%1b[2KINFO%20forged-denied%e2%80%ae")));
    assert_eq!(tool_error_code(&denied), Some("SP_DENIED"), "{denied}");
    let run = s.finish();
    run.assert_exit(0);
    assert!(run.stderr.contains("forged-allowed") && run.stderr.contains("forged-denied"), "{}", run.context());
    for c in ['\u{1b}', '\r', '\u{202e}', '\u{2028}', '\u{85}'] {
        assert!(!run.stderr.contains(c), "raw {c:?} on stderr\n{}", run.context());
    }
    for line in run.stderr.lines() {
        assert!(!line.starts_with("INFO forged"), "a forged standalone log line: {line:?}\n{}", run.context());
    }
}

#[test]
fn audit_show_escapes_bidi_overrides_and_line_separators() {
    let server = TestServer::start();
    let f = fixture(server.port, json!({}));
    let mut s = Session::start(Launch::mcp(&f.policy, &[]));
    s.ready("2025-06-18");
    // Denied: the reason row carries the decoded path, with U+202E, U+2066 and U+2028 raw.
    let denied = s.tool(1, "http_request", get(format!("{}/nope%e2%80%ae%e2%81%a6%e2%80%a8gnp.exe%c2%85", server.base())));
    assert_eq!(tool_error_code(&denied), Some("SP_DENIED"), "{denied}");
    s.finish().assert_exit(0);
    let journal = journal_text(&f.journal);
    // The evidence: the journal holds them raw (legal inside JSON strings).
    assert!(journal.contains('\u{202e}') && journal.contains('\u{2028}'), "{journal}");
    let j = f.journal.display().to_string();
    for args in [&["audit", "show", &j][..], &["audit", "tail", &j, "-n", "5"]] {
        let run = run_sp(args, &[], b"");
        assert_eq!(run.code(), Some(0), "{}", run.context());
        let text = String::from_utf8_lossy(&run.stdout);
        for c in ['\u{202e}', '\u{2066}', '\u{2028}', '\u{85}', '\u{1b}'] {
            assert!(!text.contains(c), "{args:?}: raw {c:?} in {text}");
        }
        assert!(text.contains("gnp.exe"), "{text}");
    }
    // --json: the same values, with the bidi and C1 characters as JSON escapes.
    let run = run_sp(&["audit", "tail", &j, "-n", "50", "--json"], &[], b"");
    let text = String::from_utf8_lossy(&run.stdout);
    assert!(!text.chars().any(|c| matches!(c, '\u{202e}' | '\u{2066}' | '\u{2028}' | '\u{85}')), "{text}");
    let got: Vec<Value> = text.lines().map(|l| serde_json::from_str(l).expect("a JSON row")).collect();
    let want: Vec<Value> = journal.lines().map(|l| serde_json::from_str(l).expect("a JSON row")).collect();
    assert_eq!(got, want);
}

// ---------------------------------------------------------------------------------------
// Point 8: stdout never ends mid-line

/// A running `sp mcp` whose stdout is our end of a socket pair (`nonblocking`: its end
/// is `O_NONBLOCK`, as a client may hand it), stdin a pipe we keep open.
struct Slow {
    child: std::process::Child,
    stdin: Option<std::process::ChildStdin>,
    ours: std::os::unix::net::UnixStream,
    got: Vec<u8>,
    stderr: std::thread::JoinHandle<String>,
}

impl Slow {
    fn start(policy: &Path, nonblocking: bool) -> Slow {
        use std::process::Stdio;
        let (ours, theirs) = std::os::unix::net::UnixStream::pair().expect("socketpair");
        // A deadline on every read of sp's stdout: a read that times out fails the test
        // ("reading sp's stdout: ...") instead of hanging it.
        ours.set_read_timeout(Some(support::process::deadline())).expect("SO_RCVTIMEO");
        theirs.set_nonblocking(nonblocking).expect("O_NONBLOCK");
        let mut child = Launch::mcp(policy, &[])
            .command()
            .stdin(Stdio::piped())
            .stdout(Stdio::from(std::os::fd::OwnedFd::from(theirs)))
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn sp");
        let mut err = child.stderr.take().expect("stderr");
        let stderr = std::thread::spawn(move || {
            let mut s = String::new();
            let _ = std::io::Read::read_to_string(&mut err, &mut s);
            s
        });
        Slow { stdin: child.stdin.take(), child, ours, got: Vec::new(), stderr }
    }

    fn send(&mut self, msgs: &[Value]) {
        use std::io::Write;
        let pipe = self.stdin.as_mut().expect("stdin open");
        pipe.write_all(&support::process::lines(msgs)).expect("write stdin");
    }

    /// Reads (slowly: small chunks with pauses) until at least `n` bytes have arrived
    /// in total, or end of stream.
    fn read_until(&mut self, n: usize, pause: std::time::Duration) {
        let mut buf = [0u8; 16 * 1024];
        while self.got.len() < n {
            std::thread::sleep(pause);
            match std::io::Read::read(&mut self.ours, &mut buf) {
                Ok(0) => return,
                Ok(k) => self.got.extend_from_slice(&buf[..k]),
                Err(e) => panic!("reading sp's stdout: {e}"),
            }
        }
    }

    /// Reads the rest, waits; returns (exit status, stdout lines as JSON, stderr).
    fn finish(mut self) -> (std::process::ExitStatus, Vec<Value>, String) {
        self.read_until(usize::MAX, std::time::Duration::ZERO);
        let status = support::process::wait_deadline(&mut self.child, "sp's exit after its stdout was read to the end");
        let stderr = self.stderr.join().unwrap_or_default();
        assert!(self.got.is_empty() || self.got.ends_with(b"\n"), "stdout ends mid-line ({} bytes); stderr:\n{stderr}", self.got.len());
        let msgs = self
            .got
            .split(|b| *b == b'\n')
            .filter(|l| !l.is_empty())
            .map(|l| serde_json::from_slice(l).unwrap_or_else(|e| panic!("an incomplete line ({} bytes): {e}; stderr:\n{stderr}", l.len())))
            .collect();
        (status, msgs, stderr)
    }
}

/// A loopback server with a `/open/big` body of `len` bytes, its fixture, and the three
/// messages that ask for it.
fn big_answer(len: usize) -> (TestServer, Fixture, Vec<Value>) {
    let server = TestServer::start();
    let f = fixture(server.port, json!({"max_response_bytes": 16 * 1024 * 1024, "timeout_s": 60}));
    server.route("/open/big", Reply::text(200, &"x".repeat(len)));
    let msgs = vec![
        support::process::initialize(json!(0), "2025-06-18"),
        support::process::initialized(),
        support::process::tool_call(1, "http_request", get(format!("{}/open/big", server.base()))),
    ];
    (server, f, msgs)
}

#[test]
fn a_non_blocking_stdout_read_slowly_gets_every_line_whole() {
    let len = 3 * 1024 * 1024;
    let (_server, f, msgs) = big_answer(len);
    let mut sp = Slow::start(&f.policy, true);
    sp.send(&msgs);
    // Slow enough that sp's writes find the socket full (EAGAIN) many times. Stdin is
    // closed only once the answer is being read: EOF during the call would cancel it
    // (issue #10).
    sp.read_until(len, std::time::Duration::from_millis(2));
    drop(sp.stdin.take());
    let (status, msgs, stderr) = sp.finish();
    assert_eq!(status.code(), Some(0), "{stderr}");
    assert_eq!(msgs.len(), 2, "{stderr}");
    assert_eq!(msgs[1]["result"]["structuredContent"]["body"].as_str().map(str::len), Some(len), "{stderr}");
}

/// Waits until the journal has a row of `kind` (evidence, not a sleep), at most 20 s.
fn wait_for_row(path: &Path, kind: &str) {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    while !std::fs::read_to_string(path).unwrap_or_default().contains(&format!("\"kind\":\"{kind}\"")) {
        assert!(std::time::Instant::now() < deadline, "no {kind} row in {}", path.display());
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
}

fn end_row(path: &Path) -> Value {
    let text = journal_text(path);
    let last = text.lines().last().expect("a row");
    serde_json::from_str(last).expect("a whole row")
}

#[test]
fn a_stop_signal_during_a_large_answer_finishes_the_line_and_writes_the_end_row() {
    use rustix::process::{kill_process, Pid, Signal};
    let len = 3 * 1024 * 1024;
    for (signal, code, name) in [(Signal::TERM, 143, "sigterm"), (Signal::INT, 130, "sigint")] {
        let (_server, f, msgs) = big_answer(len);
        let mut sp = Slow::start(&f.policy, false);
        sp.send(&msgs);
        // Part of the large answer has arrived: its line is being written now. Stdin
        // stays open, so only the signal can end the session.
        sp.read_until(64 * 1024, std::time::Duration::ZERO);
        wait_for_row(&f.journal, "result");
        let pid = Pid::from_raw(sp.child.id() as i32).expect("pid");
        kill_process(pid, signal).expect("kill");
        let (status, msgs, stderr) = sp.finish();
        assert_eq!(status.code(), Some(code), "{name}: {status:?}\n{stderr}");
        assert_eq!(msgs.last().expect("answers")["result"]["structuredContent"]["body"].as_str().map(str::len), Some(len), "{name}");
        let end = end_row(&f.journal);
        assert_eq!((end["kind"].as_str(), end["decision"].as_str()), (Some("end"), Some(name)), "{end}");
        let verify = run_sp(&["audit", "verify", &f.journal.display().to_string()], &[], b"");
        assert_eq!(verify.code(), Some(0), "{}", verify.context());
    }
}

#[test]
fn a_stop_signal_while_waiting_for_input_ends_the_session_with_its_status() {
    use rustix::process::{kill_process, Pid, Signal};
    let (_server, f, msgs) = big_answer(10);
    let mut sp = Slow::start(&f.policy, false);
    sp.send(&msgs[..2]);
    sp.read_until(1, std::time::Duration::ZERO);
    wait_for_row(&f.journal, "start");
    // SIGINT (SIGHUP reloads the policy since issue 35: tests/it/reload.rs).
    kill_process(Pid::from_raw(sp.child.id() as i32).expect("pid"), Signal::INT).expect("kill");
    let (status, msgs, stderr) = sp.finish();
    assert_eq!(status.code(), Some(130), "{status:?}\n{stderr}");
    assert_eq!(msgs.len(), 1, "{stderr}");
    assert_eq!(end_row(&f.journal)["decision"], "sigint");
}

/// A stop signal during an action cancels it as stdin EOF does (issue #10): the request's
/// connection is closed, no answer is written for it, nothing sent afterwards runs, the
/// journal says `cancelled` and ends with the signal.
#[test]
fn a_stop_signal_during_an_action_cancels_it_and_runs_nothing_after() {
    use rustix::process::{kill_process, Pid, Signal};
    let (server, f, msgs) = big_answer(10);
    let mut slow = Reply::json(200, r#"{"slow":true}"#);
    slow.delay_ms = 20_000;
    server.route("/open/slow", slow);
    let mut sp = Slow::start(&f.policy, false);
    sp.send(&msgs[..2]);
    sp.send(&[support::process::tool_call(1, "http_request", get(format!("{}/open/slow", server.base())))]);
    // The intent row is written before the request goes out: the action is running.
    wait_for_row(&f.journal, "intent");
    let signalled = std::time::Instant::now();
    kill_process(Pid::from_raw(sp.child.id() as i32).expect("pid"), Signal::TERM).expect("kill");
    // Sent after the signal: must not run.
    sp.send(&[support::process::tool_call(2, "http_request", get(format!("{}/open/after", server.base())))]);
    let (status, msgs, stderr) = sp.finish();
    let took = signalled.elapsed();
    assert_eq!(status.code(), Some(143), "{status:?}\n{stderr}");
    assert!(took < std::time::Duration::from_secs(10), "the 20 s request was waited out: {took:?}");
    assert!(msgs.iter().all(|m| m["id"] == 0), "an answer after the signal: {msgs:?}");
    server.settle();
    assert!(!server.requests().iter().any(|r| r.target.contains("/open/after")), "a request sent after the signal ran");
    let rows = journal_text(&f.journal);
    assert_eq!(rows.matches("\"kind\":\"intent\"").count(), 1, "{rows}");
    assert!(rows.contains("\"decision\":\"cancelled\""), "{rows}");
    assert_eq!(end_row(&f.journal)["decision"], "sigterm");
}

#[test]
fn a_non_blocking_stdin_is_waited_for_not_taken_as_broken() {
    use std::io::Write;
    use std::process::Stdio;
    let (_server, f, msgs) = big_answer(10);
    let (mut ours, theirs) = std::os::unix::net::UnixStream::pair().expect("socketpair");
    theirs.set_nonblocking(true).expect("O_NONBLOCK");
    let mut child = Launch::mcp(&f.policy, &[])
        .command()
        .stdin(Stdio::from(std::os::fd::OwnedFd::from(theirs)))
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn sp");
    let mut out = std::io::BufReader::new(child.stdout.take().expect("stdout"));
    let mut line = String::new();
    // sp finds stdin empty (EAGAIN) before anything is sent: it must wait, not stop.
    wait_for_row(&f.journal, "start");
    std::thread::sleep(std::time::Duration::from_millis(200));
    ours.write_all(&support::process::lines(&msgs[..1])).expect("send");
    std::io::BufRead::read_line(&mut out, &mut line).expect("read");
    assert!(line.contains("\"protocolVersion\""), "{line}");
    ours.write_all(&support::process::lines(&msgs[1..])).expect("send");
    line.clear();
    std::io::BufRead::read_line(&mut out, &mut line).expect("read");
    assert!(line.contains("\"id\":1"), "{line}");
    ours.shutdown(std::net::Shutdown::Write).expect("EOF");
    let output = support::process::output_deadline(child, "sp's exit after EOF on its socket stdin");
    assert_eq!(output.status.code(), Some(0), "{}", String::from_utf8_lossy(&output.stderr));
}
