//! The journal follows one rule everywhere (issue 11): without a journal location `sp mcp`
//! refuses to serve, exactly as it does for a journal it cannot open, unless the policy
//! says `"audit": {"path": null}`. A relative `XDG_STATE_HOME` is ignored (XDG Base
//! Directory spec: "If an implementation encounters a relative path in any of these
//! variables it should consider the path invalid and ignore it"), and the message says so.
//!
//! Each launch has an empty environment (as under `env -i` launchers and in images) plus
//! what the case sets. Evidence that nothing was served: the exit status, an empty stdout
//! and, where a request was sent, a loopback server that saw no connection.
//!
//! Attacks tried (all held):
//! - no HOME, no XDG_STATE_HOME, a policy with no `audit` section: refused (it used to
//!   serve unjournaled, with a warning), the credentialed-free request never sent;
//! - an `audit` section with other keys but no `path`: refused the same way;
//! - XDG_STATE_HOME relative (`state`, `./state`) with no HOME: refused, and the message
//!   names the variable and why it was ignored; nothing created in the working directory;
//! - XDG_STATE_HOME relative with HOME set: the journal goes under HOME, with a warning;
//! - XDG_STATE_HOME empty: treated as unset (the spec's "empty or not set");
//! - `"path": null`: serves with no journal and no warning.
#![allow(
    clippy::disallowed_methods,
    reason = "tests and benchmarks start sp, sshd and clients and read their environment; the fence in clippy.toml is for src/"
)]

use crate::support;

use std::path::Path;

use serde_json::{json, Value};
use support::process::{initialize, initialized, lines, tool_call};
use support::http_server::TestServer;
use support::process::{Launch, TempDir};

fn policy(dir: &TempDir, port: u16, audit: Option<Value>) -> std::path::PathBuf {
    let mut p = json!({"http": {"allow": [{"hosts": [format!("127.0.0.1:{port}")]}]}});
    if let Some(a) = audit {
        p["audit"] = a;
    }
    dir.file("policy.json", p.to_string().as_bytes(), 0o644)
}

fn input(port: u16) -> Vec<u8> {
    lines(&[
        initialize(json!(1), "2025-06-18"),
        initialized(),
        tool_call(2, "http_request", json!({"method": "GET", "url": format!("http://127.0.0.1:{port}/v1/x")})),
    ])
}

fn refused(launch: Launch, server: &TestServer, port: u16) -> String {
    let run = launch.run(&input(port));
    run.assert_exit(1);
    assert!(run.stdout.is_empty(), "served without a journal: {}", run.context());
    assert!(run.stderr.contains("no audit journal location"), "{}", run.context());
    assert!(run.stderr.contains("\"path\": null"), "the message must say how to run without a journal: {}", run.context());
    assert_eq!(server.requests().len(), 0, "a request went out: {}", run.context());
    run.stderr
}

#[test]
fn no_journal_location_refuses_to_serve_under_env_i() {
    let server = TestServer::start();
    let dir = TempDir::new("jl-none");
    for audit in [None, Some(json!({"fsync": true}))] {
        let p = policy(&dir, server.port, audit);
        // XDG_STATE_HOME="" is "not set" for sp and keeps the harness from choosing one.
        let stderr = refused(Launch::mcp(&p, &[]).env("XDG_STATE_HOME", ""), &server, server.port);
        assert!(stderr.contains("neither XDG_STATE_HOME nor HOME is set"), "{stderr}");
    }
}

#[test]
fn relative_xdg_state_home_is_ignored_and_the_message_says_so() {
    let server = TestServer::start();
    let dir = TempDir::new("jl-rel");
    let p = policy(&dir, server.port, None);
    for rel in ["state", "./state"] {
        let stderr = refused(Launch::mcp(&p, &[]).env("XDG_STATE_HOME", rel), &server, server.port);
        assert!(stderr.contains(&format!("XDG_STATE_HOME (\"{rel}\") is ignored because it is not an absolute path")), "{stderr}");
    }
    assert!(!Path::new("state").exists() && !Path::new("sallyport").exists(), "a relative journal directory was created");

    // With HOME set, the journal goes there, and the warning names the ignored variable.
    let home = TempDir::new("jl-home");
    let run = Launch::mcp(&p, &[]).env("HOME", &home.join("")).env("XDG_STATE_HOME", "state").run(&input(server.port));
    run.assert_exit(0);
    assert!(run.stderr.contains("XDG_STATE_HOME (\"state\") is ignored"), "{}", run.context());
    let journal = std::fs::read_to_string(home.path.join(".local/state/sallyport/audit.jsonl")).expect("journal under HOME");
    assert!(journal.lines().any(|l| l.contains("\"kind\":\"result\"")), "{journal}");
}

#[test]
fn path_null_serves_without_a_journal_and_without_a_warning() {
    let server = TestServer::start();
    let dir = TempDir::new("jl-null");
    let p = policy(&dir, server.port, Some(json!({"path": null})));
    let run = Launch::mcp(&p, &[]).env("XDG_STATE_HOME", "").run(&input(server.port));
    run.assert_exit(0);
    assert_eq!(run.protocol().len(), 2, "{}", run.context());
    assert!(!run.stderr.contains("journal"), "{}", run.context());
    assert_eq!(server.requests().len(), 1);
}

#[test]
fn sp_check_says_sp_mcp_would_refuse() {
    let dir = TempDir::new("jl-check");
    let p = policy(&dir, 9, None);
    let run = Launch::new(&["check", "--config", &p.display().to_string()]).env("XDG_STATE_HOME", "").run(b"");
    run.assert_exit(0);
    let out = String::from_utf8_lossy(&run.stdout);
    assert!(out.contains("journal none: ") && out.contains("sp mcp refuses to serve"), "{out}");
}
