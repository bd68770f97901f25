//! Streamable HTTP (a loopback server of our own: `tests/support/upstreams/http_upstream.py`).

use super::*;

/// The loopback server in `mode`, killed on drop; its port.
struct HttpUpstream {
    child: crate::sys::Child,
    port: u16,
}

impl HttpUpstream {
    fn start(mode: &str, secret: &str) -> HttpUpstream {
        use std::io::BufRead;
        let script = root().join("tests/support/upstreams/http_upstream.py");
        let mut cmd = crate::sys::launcher_command(&python(), crate::sys::env_var("PATH").as_deref(), &crate::sys::Plan::default()).unwrap();
        cmd.args([script.display().to_string(), mode.into(), secret.into()]).stdout(std::process::Stdio::piped());
        let mut child = crate::sys::Child::spawn(&mut cmd).unwrap();
        // The script prints its port once it listens; awaited with a deadline (issue 32).
        let stdout = child.child.stdout.take().unwrap();
        let (tx, port) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let mut line = String::new();
            let _ = std::io::BufReader::new(stdout).read_line(&mut line);
            let _ = tx.send(line);
        });
        let line = port.recv_timeout(std::time::Duration::from_secs(60)).unwrap_or_else(|_| {
            child.kill();
            panic!("{} {mode}: no port on its stdout within 60 s (waiting for it to listen)", script.display())
        });
        HttpUpstream { port: line.trim().parse().unwrap_or_else(|e| panic!("{} {mode} printed {line:?}, not a port: {e}", script.display())), child }
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
