//! Jump hosts end to end (issue 34 §3): two real `sshd`s on 127.0.0.1, the target
//! reached only through a `direct-tcpip` channel of the bastion's session.
//!
//! What the servers saw is read from their logs (`LogLevel DEBUG1`): the bastion logs
//! each tunnel it opens (`server_request_direct_tcpip`), each sshd its TCP connections
//! and logins. That is how "one connection to each, reused" and "the tunnel, not a
//! direct connection" are asserted, not by trusting `sp`.
//!
//! Attacks and failures tried, and what held:
//! - The target's key missing from known_hosts: refused before authentication
//!   (`SP_HOST_KEY` naming the target; the target saw no login).
//! - The bastion's key missing: refused before the bastion saw an authentication
//!   request, and no tunnel was asked for.
//! - The bastion's command list does not let anything run on it: `sp` asks it for a
//!   tunnel only (no exec request reaches the bastion).
//! - A `via` loop, a `via` to a host not listed, three hops: `sp check` refuses the
//!   policy, naming the field.
//! - A chain of two jump hosts (three real sshds: the target via an inner bastion via
//!   an outer one): each bastion opens one tunnel, neither runs a command, the target
//!   runs every call on one session.
#![allow(clippy::disallowed_methods, reason = "tests start sp and sshd; the fence in clippy.toml is for src/")]

use crate::support;

use std::path::{Path, PathBuf};

use serde_json::{json, Value};

use support::process::{run_sp, tool_error_code, Launch, Session, TempDir};
use support::sshd::{self, Sshd};

const VERSION: &str = "2025-06-18";

struct World {
    bastion: Sshd,
    target: Sshd,
    dir: TempDir,
}

impl World {
    fn new() -> Option<World> {
        if !sshd::available() {
            return None;
        }
        Some(World { bastion: Sshd::start(), target: Sshd::start_with("Subsystem sftp internal-sftp\n"), dir: TempDir::new("ssh-via") })
    }

    fn policy(&self, known: &[String], target_extra: Value) -> PathBuf {
        let kh = self.dir.file("known_hosts", format!("{}\n", known.join("\n")).as_bytes(), 0o600);
        let mut web = json!({"address": "127.0.0.1", "port": self.target.port, "user": self.target.user,
            "auth": {"key_file": self.target.client_key}, "via": "bastion"});
        if let Value::Object(m) = target_extra {
            web.as_object_mut().unwrap().extend(m);
        }
        let policy = json!({"ssh": {"known_hosts": kh, "connect_timeout_s": 5, "hosts": {
            "bastion": {"address": "127.0.0.1", "port": self.bastion.port, "user": self.bastion.user,
                        "auth": {"key_file": self.bastion.client_key}, "commands": ["uptime"]},
            "web": web
        }}});
        self.dir.file("policy.json", policy.to_string().as_bytes(), 0o600)
    }

    fn both_keys(&self) -> Vec<String> {
        vec![self.bastion.known_hosts_line(), self.target.known_hosts_line()]
    }

    fn session(&self, policy: &Path) -> Session {
        let mut s = Session::start(Launch::mcp(policy, &["-v"]));
        s.ready(VERSION);
        s
    }
}

fn sc(r: &Value) -> &Value {
    &r["structuredContent"]
}

const TUNNEL: &str = "server_request_direct_tcpip";

#[test]
fn reaches_a_host_through_its_jump_host_and_reuses_both_sessions() {
    let Some(w) = World::new() else { return };
    let canon = std::fs::canonicalize(&w.dir.path).unwrap();
    std::fs::write(canon.join("app.log"), "through the tunnel\n").unwrap();
    let policy = w.policy(&w.both_keys(), json!({"files": {"read": [format!("{}/*.log", canon.display())]}}));
    let mut s = w.session(&policy);
    for i in 0..3 {
        // Not on the bastion's command list: its list is irrelevant to the target.
        let r = s.tool(i, "ssh_exec", json!({"host": "web", "command": format!("echo hop {i}")}));
        assert_eq!((r["isError"].as_bool(), sc(&r)["stdout"].as_str()), (Some(false), Some(format!("hop {i}\n").as_str())), "{r}");
    }
    // A big output crosses the pump in many pieces, in order.
    let r = s.tool(10, "ssh_exec", json!({"host": "web", "command": "seq 1 200000"}));
    let out = sc(&r)["stdout"].as_str().unwrap_or_default();
    assert_eq!((out.lines().count(), out.lines().last()), (200000, Some("200000")), "{}", &r.to_string()[..200.min(r.to_string().len())]);
    // SFTP rides the same target session.
    let r = s.tool(11, "ssh_get", json!({"host": "web", "path": format!("{}/app.log", canon.display())}));
    assert_eq!(sc(&r)["content"], "through the tunnel\n", "{r}");
    assert_eq!(sc(&r)["host_key_fingerprint"].as_str().map(|f| f.starts_with("SHA256:")), Some(true), "{r}");
    s.finish();

    assert_eq!(w.bastion.connections(), 1, "one connection to the bastion for every call");
    assert_eq!(w.target.connections(), 1, "one session to the target for every call");
    assert_eq!(w.bastion.wait_count(TUNNEL, 1), 1, "one tunnel, reused:\n{}", w.bastion.log());
    // sshd logs `server_input_channel_req: channel N request exec`: the target's log
    // shows it (the string is right), the bastion's must not.
    assert!(w.target.count("request exec") >= 4, "{}", w.target.log());
    assert_eq!(w.bastion.count("request exec"), 0, "nothing ran on the bastion:\n{}", w.bastion.log());
    assert_eq!(w.target.logins(), 1);
}

/// The longest chain the policy allows: `web` via `inner` via `outer`, each a real sshd.
#[test]
fn a_chain_of_two_jump_hosts_reaches_the_target() {
    let Some(w) = World::new() else { return };
    let inner = Sshd::start();
    let known = [w.bastion.known_hosts_line(), inner.known_hosts_line(), w.target.known_hosts_line()];
    let kh = w.dir.file("known_hosts", format!("{}\n", known.join("\n")).as_bytes(), 0o600);
    let host = |d: &Sshd, via: Option<&str>| {
        let mut h = json!({"address": "127.0.0.1", "port": d.port, "user": d.user, "auth": {"key_file": d.client_key}, "commands": ["echo chained *"]});
        if let Some(v) = via {
            h["via"] = json!(v);
        }
        h
    };
    let policy = json!({"ssh": {"known_hosts": kh, "connect_timeout_s": 5, "hosts": {
        "outer": host(&w.bastion, None), "inner": host(&inner, Some("outer")), "web": host(&w.target, Some("inner"))
    }}});
    let policy = w.dir.file("policy-chain.json", policy.to_string().as_bytes(), 0o600);
    let mut s = w.session(&policy);
    for i in 0..2 {
        let r = s.tool(i, "ssh_exec", json!({"host": "web", "command": format!("echo chained {i}")}));
        assert_eq!((r["isError"].as_bool(), sc(&r)["stdout"].as_str()), (Some(false), Some(format!("chained {i}\n").as_str())), "{r}");
    }
    s.finish();
    assert_eq!(w.bastion.wait_count(TUNNEL, 1), 1, "the outer bastion opened one tunnel (to the inner one):\n{}", w.bastion.log());
    assert_eq!(inner.wait_count(TUNNEL, 1), 1, "the inner bastion opened one tunnel (to the target):\n{}", inner.log());
    assert_eq!((w.bastion.count("request exec"), inner.count("request exec")), (0, 0), "nothing ran on either bastion");
    assert!(w.target.count("request exec") >= 2, "{}", w.target.log());
    assert_eq!((w.bastion.connections(), inner.connections(), w.target.connections()), (1, 1, 1), "one connection each, reused");
}

#[test]
fn both_host_keys_are_verified() {
    let Some(w) = World::new() else { return };
    // Only the bastion's key: the target's is unknown, refused before its login.
    let mut s = w.session(&w.policy(&[w.bastion.known_hosts_line()], json!({})));
    let r = s.tool(1, "ssh_exec", json!({"host": "web", "command": "echo no"}));
    assert_eq!(tool_error_code(&r), Some("SP_HOST_KEY"), "{r}");
    let message = sc(&r)["error"]["message"].as_str().unwrap().to_owned();
    assert!(message.starts_with(&format!("ssh web (127.0.0.1:{})", w.target.port)) && message.contains("is not in"), "{message}");
    s.finish();
    assert_eq!((w.target.auth_requests(), w.target.logins()), (0, 0), "the target never saw the user name");
    assert_eq!(w.bastion.wait_count(TUNNEL, 1), 1, "it was reached through the tunnel");

    // Only the target's key: the bastion is refused, no tunnel is asked for.
    let mut s = w.session(&w.policy(&[w.target.known_hosts_line()], json!({})));
    let r = s.tool(1, "ssh_exec", json!({"host": "web", "command": "echo no"}));
    assert_eq!(tool_error_code(&r), Some("SP_HOST_KEY"), "{r}");
    let message = sc(&r)["error"]["message"].as_str().unwrap().to_owned();
    assert!(message.starts_with(&format!("ssh bastion (127.0.0.1:{})", w.bastion.port)), "{message}");
    s.finish();
    assert_eq!(w.bastion.count(TUNNEL), 1, "no second tunnel");
    assert_eq!(w.target.connections(), 1, "only the first attempt reached the target");
}

#[test]
fn check_refuses_loops_unknown_hops_and_long_chains() {
    let dir = TempDir::new("ssh-via-check");
    let host = |via: &str| json!({"address": "10.0.0.1", "user": "u", "auth": {"agent": true}, "via": via});
    let plain = json!({"address": "10.0.0.1", "user": "u", "auth": {"agent": true}});
    for (i, (hosts, want)) in [
        (json!({"a": host("b"), "b": host("a")}), "ssh.hosts.a.via: leads to a loop (a -> b -> a)"),
        (json!({"a": host("a")}), "ssh.hosts.a.via: leads to a loop (a -> a)"),
        (json!({"a": host("ghost")}), "ssh.hosts.a.via: names \"ghost\", which is not a host in ssh.hosts"),
        (json!({"a": host("b"), "b": host("c"), "c": host("d"), "d": plain.clone()}), "ssh.hosts.a.via: passes more than 2 jump hosts"),
    ]
    .into_iter()
    .enumerate()
    {
        let policy = dir.file(&format!("p{i}.json"), json!({"ssh": {"known_hosts": "/nonexistent/kh", "hosts": hosts}}).to_string().as_bytes(), 0o600);
        let run = run_sp(&["check", "--config", &policy.display().to_string()], &[], b"");
        assert_ne!(run.code(), Some(0), "case {i}: {}", run.context());
        assert!(run.stderr.contains(want), "case {i}: want {want:?}\n{}", run.context());
    }
    let ok = dir.file(
        "ok.json",
        json!({"ssh": {"known_hosts": "/nonexistent/kh", "hosts": {"a": host("b"), "b": host("c"), "c": plain}}}).to_string().as_bytes(),
        0o600,
    );
    let run = run_sp(&["check", "--config", &ok.display().to_string()], &[], b"");
    assert!(String::from_utf8_lossy(&run.stdout).contains(", via b") || run.stderr.contains(", via b"), "two hops are fine and shown\n{}", run.context());
}
