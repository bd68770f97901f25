//! Nothing a helper starts outlives it: a credential `command` source or the approver
//! that daemonises (`setsid cmd &` then exit, a double fork) still has everything it
//! started killed when it ends, by exit or by timeout (`src/sys/child.rs`: `sp mcp` is
//! a child subreaper, and `reap_strays` ends the orphans that come to it).
//!
//! The built `sp mcp`, a real loopback HTTP server, and helper scripts whose daemon
//! writes its own pid to a file; "gone" is read from `/proc`, with a deadline.
//!
//! Cases tried (all held; before the fix every daemon below survived the call, and the
//! one that kept the helper's stdout open made a successful helper time out):
//! - `setsid sh -c '...; exec sleep N' &` with its output closed, then the helper
//!   prints the secret and exits 0;
//! - the same as a double fork, `( setsid ... & )`: the daemon's parent is gone before
//!   the helper exits;
//! - a daemon that keeps the helper's stdout open: the call still succeeds at once;
//! - a helper that daemonises and then outlives its `timeout_s`;
//! - an approver that daemonises and exits 0 (approved).
#![allow(clippy::disallowed_methods, reason = "tests start sp and read their environment")]

use crate::support;

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use support::http_server::TestServer;
use support::process::{random_hex, tool_error_code, Launch, Session, TempDir};

const VERSION: &str = "2025-06-18";

/// Kills, on drop, the daemons named by these pid files that still run (a failed test
/// leaves nothing behind either); only a process whose command line is the daemon's.
struct Cleanup(Vec<PathBuf>);

impl Drop for Cleanup {
    fn drop(&mut self) {
        for file in &self.0 {
            let Some(pid) = std::fs::read_to_string(file).ok().and_then(|p| p.trim().parse::<i32>().ok()) else { continue };
            let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
            if cmdline.starts_with(b"sleep\x00300.") {
                let _ = rustix::process::kill_process(rustix::process::Pid::from_raw(pid).unwrap(), rustix::process::Signal::KILL);
            }
        }
    }
}

/// Waits until `pid` is gone (no `/proc` entry, or a zombie nobody reaped yet).
fn wait_gone(pid: i32, what: &str) {
    let gone = || {
        std::fs::read_to_string(format!("/proc/{pid}/stat")).map_or(true, |s| s.rsplit_once(')').is_some_and(|(_, rest)| rest.trim_start().starts_with('Z')))
    };
    let t = Instant::now();
    while !gone() {
        if t.elapsed() > Duration::from_secs(5) {
            panic!("{what}: the daemon {pid} outlived its helper");
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

fn read_pid(file: &Path) -> i32 {
    std::fs::read_to_string(file).unwrap_or_else(|e| panic!("{}: {e}", file.display())).trim().parse().unwrap()
}

/// A shell line that starts a daemon writing its pid to `pidfile` (`redirect`: its
/// output), waits until it has, and goes on.
fn daemon(pidfile: &Path, double_fork: bool, redirect: &str) -> String {
    let tag = format!("300.{}", random_hex().chars().filter(char::is_ascii_digit).take(6).collect::<String>());
    let start = format!("setsid sh -c 'echo $$ > {}; exec sleep {tag}' {redirect} &", pidfile.display());
    let start = if double_fork { format!("( {start} )") } else { start };
    format!("{start}\nwhile [ ! -s {0} ]; do sleep 0.01; done\n", pidfile.display())
}

struct World {
    server: TestServer,
    dir: TempDir,
}

impl World {
    fn new() -> World {
        World { server: TestServer::start(), dir: TempDir::new("subreaper") }
    }

    fn script(&self, name: &str, body: &str) -> PathBuf {
        self.dir.file(name, format!("#!/bin/sh\n{body}").as_bytes(), 0o700)
    }

    /// A session whose credential `api` (bearer, bound to `/v1/*` on the server) has
    /// `credential` merged in (its source, `approve`), with `extra` top-level sections.
    fn session(&self, credential: Value, extra: Value) -> Session {
        let host = format!("127.0.0.1:{}", self.server.port);
        let mut api = json!({"inject": {"bearer": {}}, "hosts": [host], "paths": ["/v1/*"]});
        for (k, v) in credential.as_object().unwrap() {
            api[k] = v.clone();
        }
        let mut policy = json!({"http": {"allow": [{"hosts": [host], "methods": ["GET"], "paths": ["/*"]}]}, "credentials": {"api": api}});
        for (k, v) in extra.as_object().unwrap() {
            policy[k] = v.clone();
        }
        let path = self.dir.file(&format!("policy-{}.json", &random_hex()[..8]), policy.to_string().as_bytes(), 0o600);
        let mut s = Session::start(Launch::mcp(&path, &["-v"]));
        s.ready(VERSION);
        s
    }

    fn call(&self, s: &mut Session, id: i64) -> Value {
        s.tool(id, "http_request", json!({"method": "GET", "url": format!("{}/v1/x", self.server.base()), "credential": "api"}))
    }
}

#[test]
fn a_credential_command_that_daemonises_leaves_nothing_behind() {
    let w = World::new();
    let (p1, p2, p3) = (w.dir.path.join("d1.pid"), w.dir.path.join("d2.pid"), w.dir.path.join("d3.pid"));
    let _cleanup = Cleanup(vec![p1.clone(), p2.clone(), p3.clone()]);
    let body = [
        daemon(&p1, false, "</dev/null >/dev/null 2>&1"),
        daemon(&p2, true, "</dev/null >/dev/null 2>&1"),
        // This one keeps the helper's stdout open.
        daemon(&p3, false, "</dev/null"),
        "echo token-for-the-subreaper-test\n".into(),
    ]
    .concat();
    let helper = w.script("helper", &body);
    let mut s = w.session(json!({"source": {"command": [helper], "timeout_s": 20}}), json!({}));
    let t = Instant::now();
    let r = w.call(&mut s, 1);
    assert_eq!(r["structuredContent"]["status"], 200, "{r}");
    assert!(t.elapsed() < Duration::from_secs(10), "the daemon holding stdout held the call: {:?}", t.elapsed());
    for (file, what) in [(&p1, "setsid &"), (&p2, "double fork"), (&p3, "holding stdout")] {
        wait_gone(read_pid(file), what);
    }
    let got = w.server.requests();
    assert_eq!(got.last().and_then(|r| r.header("authorization")), Some("Bearer token-for-the-subreaper-test"));
    s.finish().assert_exit(0);
}

#[test]
fn a_credential_command_that_daemonises_and_times_out_leaves_nothing_behind() {
    let w = World::new();
    let (p1, p2) = (w.dir.path.join("d1.pid"), w.dir.path.join("d2.pid"));
    let _cleanup = Cleanup(vec![p1.clone(), p2.clone()]);
    let body = [daemon(&p1, false, "</dev/null >/dev/null 2>&1"), daemon(&p2, true, "</dev/null"), "sleep 300\n".into()].concat();
    let helper = w.script("helper", &body);
    let mut s = w.session(json!({"source": {"command": [helper], "timeout_s": 1}}), json!({}));
    let r = w.call(&mut s, 1);
    assert_eq!(tool_error_code(&r), Some("SP_UNAVAILABLE"), "{r}");
    for (file, what) in [(&p1, "setsid &, timeout"), (&p2, "double fork, timeout")] {
        wait_gone(read_pid(file), what);
    }
    assert!(w.server.requests().is_empty(), "nothing is sent without the secret");
    s.finish().assert_exit(0);
}

#[test]
fn an_approver_that_daemonises_leaves_nothing_behind() {
    let w = World::new();
    let (p1, p2) = (w.dir.path.join("a1.pid"), w.dir.path.join("a2.pid"));
    let _cleanup = Cleanup(vec![p1.clone(), p2.clone()]);
    let body = [daemon(&p1, false, "</dev/null >/dev/null 2>&1"), daemon(&p2, true, "</dev/null"), "exit 0\n".into()].concat();
    let approver = w.script("approver", &body);
    let secret = w.dir.file("api.token", b"token-for-the-approver-test", 0o600);
    let mut s = w.session(json!({"source": {"file": secret}, "approve": true}), json!({"approval": {"command": [approver], "timeout_s": 20}}));
    let r = w.call(&mut s, 1);
    assert_eq!(r["structuredContent"]["status"], 200, "{r}");
    for (file, what) in [(&p1, "approver, setsid &"), (&p2, "approver, double fork")] {
        wait_gone(read_pid(file), what);
    }
    s.finish().assert_exit(0);
}
