//! `sp explain` and `sp test` through the built binary (issue 35, section 2): the exit
//! statuses, the text and `--json`, the shipped golden cases, and that nothing is
//! contacted, started, read or counted.
//!
//! Self-contained (no `support` module) so it can move into the one test binary as is.
//!
//! Tried, and held: an HTTP call to a loopback listener, and an upstream whose `url` is
//! that listener, are explained with no connection accepted; an upstream whose command
//! would leave a marker file is explained without the marker appearing; a credential
//! whose `command` source would leave a marker is named, its command never run; a rate
//! limit at its max is reported (exit 4) and its state file is byte for byte the same
//! after.
#![allow(clippy::disallowed_methods, reason = "tests start sp; the fence in clippy.toml is for src/")]

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{json, Value};

/// What sp printed and its exit status.
struct Ran {
    code: Option<i32>,
    stdout: String,
    stderr: String,
}

/// Runs sp with `args`, waiting at most 20 s for it to exit.
fn sp(args: &[&str]) -> Ran {
    let mut child = Command::new(env!("CARGO_BIN_EXE_sp"))
        .args(args)
        .env_remove("SP_CONFIG")
        .env("HOME", "/nonexistent/sp-explain-home")
        .env_remove("XDG_STATE_HOME")
        .env_remove("XDG_CONFIG_HOME")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(20);
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("sp {args:?} did not exit within 20 s");
        }
        std::thread::sleep(Duration::from_millis(10));
    };
    let (mut stdout, mut stderr) = (String::new(), String::new());
    child.stdout.take().unwrap().read_to_string(&mut stdout).unwrap();
    child.stderr.take().unwrap().read_to_string(&mut stderr).unwrap();
    Ran { code: status.code(), stdout, stderr }
}

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn write_policy(dir: &Path, v: &Value) -> String {
    let path = dir.join("policy.json");
    std::fs::write(&path, v.to_string()).unwrap();
    path.display().to_string()
}

#[test]
fn the_example_cases_pass_and_a_wrong_expectation_fails_with_its_reason() {
    let policy = root().join("packaging/policy.example.json").display().to_string();
    let cases = root().join("packaging/cases.example.jsonl").display().to_string();
    let r = sp(&["test", "-c", &policy, &cases]);
    assert_eq!(r.code, Some(0), "{}{}", r.stdout, r.stderr);
    let last = r.stdout.lines().last().unwrap();
    assert!(last.ends_with(" passed, 0 failed") && !last.starts_with("0 "), "{}", r.stdout);

    let dir = tempfile::tempdir().unwrap();
    let wrong = dir.path().join("wrong.jsonl");
    std::fs::write(&wrong, "{\"call\": {\"tool\": \"http_request\", \"arguments\": {\"method\": \"DELETE\", \"url\": \"https://api.github.com/user\"}}, \"expect\": \"allow\"}\n").unwrap();
    let r = sp(&["-c", &policy, "test", &wrong.display().to_string()]);
    assert_eq!(r.code, Some(1), "{}{}", r.stdout, r.stderr);
    assert!(r.stdout.starts_with("FAIL line 1: expected allow, got deny: no http.allow rule permits DELETE api.github.com:443/user"), "{}", r.stdout);
    assert!(r.stdout.ends_with("0 passed, 1 failed\n"), "{}", r.stdout);
    let r = sp(&["test", "-c", &policy, "/nonexistent/sp-explain/cases.jsonl"]);
    assert_eq!(r.code, Some(3), "{}", r.stderr);
}

#[test]
fn explain_exits_with_the_decision_and_contacts_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.set_nonblocking(true).unwrap();
    let port = listener.local_addr().unwrap().port();
    let marker = dir.path().join("started");
    let limits = dir.path().join("limits.json");
    let v = json!({
        "credentials": {
            "local": {"source": {"command": ["/bin/sh", "-c", format!("touch {}; echo secret-value-123456789", marker.display())]},
                      "inject": {"header": {"name": "X-Key"}}, "hosts": [format!("127.0.0.1:{port}")]}
        },
        "http": {"allow": [
            {"hosts": [format!("127.0.0.1:{port}")], "methods": ["GET"], "paths": ["/v1/*"]},
            {"hosts": [format!("127.0.0.1:{port}")], "methods": ["POST"], "paths": ["/v1/*"], "approve": true},
            {"hosts": ["limited.example"], "methods": ["GET"]}
        ]},
        "upstreams": {
            "web": {"url": format!("http://127.0.0.1:{port}/mcp"), "tools": {"allow": ["*"]}, "pin": "off"},
            "cmd": {"command": ["/bin/sh", "-c", format!("touch {}", marker.display())], "tools": {"allow": ["read"]}, "pin": "off"}
        },
        "limits": [{"tool": "http_request", "target": "limited.example", "max": 1, "per_s": 3600}],
        "limits_state": limits,
        "approval": {"command": ["/nonexistent/sp-explain/approver"]}
    });
    let policy = write_policy(dir.path(), &v);
    let rule = r#"{"tool":"http_request","target":"limited.example","max":1,"per_s":3600}"#;
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_millis() as u64;
    let state = format!("{}\n", json!({"v": 1, "windows": {rule: [now, 1, 3600]}}));
    {
        use std::os::unix::fs::OpenOptionsExt;
        let mut f = std::fs::OpenOptions::new().create_new(true).write(true).mode(0o600).open(&limits).unwrap();
        std::io::Write::write_all(&mut f, state.as_bytes()).unwrap();
    }
    let url = |path: &str| format!("http://127.0.0.1:{port}{path}");
    let call = |method: &str, u: String| json!({"tool": "http_request", "arguments": {"method": method, "url": u}}).to_string();

    let r = sp(&["explain", "-c", &policy, &call("GET", url("/v1/x"))]);
    assert_eq!(r.code, Some(0), "{}{}", r.stdout, r.stderr);
    assert!(r.stdout.starts_with("decision: allow\ntool: http_request\n"), "{}", r.stdout);
    assert!(r.stdout.contains(&format!("rule: http.allow[0]: GET 127.0.0.1:{port} /v1/*\n")), "{}", r.stdout);
    assert!(r.stdout.contains("credential: local (header X-Key)\n"), "{}", r.stdout);
    assert!(!r.stdout.contains("secret-value"), "{}", r.stdout);

    let r = sp(&["explain", "-c", &policy, &call("DELETE", url("/v1/x"))]);
    assert_eq!(r.code, Some(1), "{}{}", r.stdout, r.stderr);
    assert!(r.stdout.starts_with("decision: deny (SP_DENIED)\n"), "{}", r.stdout);
    assert!(r.stdout.contains(&format!("nearest rule: http.allow[0]: GET 127.0.0.1:{port} /v1/*\n  method: DELETE is not one of GET\n")), "{}", r.stdout);

    let r = sp(&["explain", "-c", &policy, "--json", &call("POST", url("/v1/x"))]);
    assert_eq!(r.code, Some(2), "{}{}", r.stdout, r.stderr);
    let j: Value = serde_json::from_str(r.stdout.trim_end()).unwrap();
    assert_eq!((j["decision"].as_str(), j["rule"]["index"].as_u64()), (Some("approve"), Some(1)), "{j}");
    assert_eq!(j["credentials"], json!([{"name": "local", "scheme": "header X-Key"}]));

    let r = sp(&["explain", "-c", &policy, &call("GET", "https://limited.example/a".into())]);
    assert_eq!(r.code, Some(4), "{}{}", r.stdout, r.stderr);
    assert!(r.stdout.starts_with("decision: rate_limited (SP_RATE_LIMITED)\n"), "{}", r.stdout);
    assert!(r.stdout.contains("reason: rate limit limits[0] reached: at most 1 call(s) per 3600 s"), "{}", r.stdout);

    let r = sp(&["explain", "-c", &policy, "--tool", "web_search", "--args", "{}"]);
    assert_eq!(r.code, Some(0), "{}{}", r.stdout, r.stderr);
    assert!(r.stdout.contains("rule: upstreams.web.tools\n") && r.stdout.contains("pin: not pinned (pin off)\n"), "{}", r.stdout);
    let r = sp(&["explain", "-c", &policy, "--tool", "cmd_write"]);
    assert_eq!(r.code, Some(1), "{}{}", r.stdout, r.stderr);
    assert!(r.stdout.contains("reason: the policy does not expose cmd_write\n"), "{}", r.stdout);

    // Errors: a malformed call, an unknown tool, a usage error: all 3 (2 is approve).
    for args in [vec!["explain", "-c", &policy, "{\"tool\": 1}"], vec!["explain", "-c", &policy, "--tool", "nope"], vec!["explain", "-c", &policy, "--frob"]]
    {
        let r = sp(&args);
        assert_eq!(r.code, Some(3), "{args:?}: {}{}", r.stdout, r.stderr);
        assert!(r.stdout.is_empty() && r.stderr.starts_with("sp: "), "{args:?}: {}", r.stderr);
    }

    assert!(listener.accept().is_err_and(|e| e.kind() == std::io::ErrorKind::WouldBlock), "sp explain connected to the listener");
    assert!(!marker.exists(), "sp explain started an upstream or ran a credential's command");
    assert_eq!(std::fs::read_to_string(&limits).unwrap(), state, "sp explain counted a call");
}
