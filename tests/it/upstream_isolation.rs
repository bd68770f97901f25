//! Issue 31 §1, §2 and the parent-death item of §5: an upstream MCP server is as
//! untrusted as the agent, and these tests run a hostile one
//! (`tests/support/upstreams/hostile.py`) behind the real binary.
//!
//! Attacks tried, and what held (each is an assertion below):
//! - descriptors: two upstreams, the approver and a credential command each list
//!   `/proc/self/fd`: only 0, 1, 2 (before the fix the second upstream and the approver
//!   held a duplicate of the first upstream's stdout and read its raw answers);
//! - files: read another credential's secret file (used by no call yet), the policy,
//!   the journal; append to the journal and to the grants file; create a file beside
//!   them: all EACCES (Landlock), and `sp audit verify` still passes;
//! - sp itself: read `/proc/<sp>/environ` and `/proc/<sp>/mem`, follow or open sp's
//!   descriptors 0 (the agent's frames) and 3 through `/proc/<sp>/fd`, signal sp:
//!   refused (the fd numbers themselves can be listed when sp and the upstream are
//!   both root: the directory is root's once sp is not dumpable) (sp is not dumpable; Landlock's ptrace and signal scoping hold
//!   even when the tests run as root);
//! - `kill -9` of sp: the upstream dies with it (parent-death signal set by the
//!   launcher), no process of its group is left;
//! - a sandbox the kernel or the file system cannot give (a read path that does not
//!   exist): the upstream does not start (fail closed), the call says so, `sp check`
//!   exits 1 naming the field;
//! - control: what the policy grants (`sandbox.read`) is readable, so the refusals above
//!   are the sandbox's and not a broken fixture's.
//!
//! Not covered here: a second user (`"user"`), which needs root and another account;
//! `src/sys/confine/tests.rs` covers the launcher's arguments for it.

#![allow(clippy::disallowed_methods, reason = "tests start sp and read their environment; the fence in clippy.toml is for src/")]

use crate::support;

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use support::process::{run_sp, Launch, Session, TempDir};

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn python() -> String {
    ["/usr/bin/python3", "/usr/local/bin/python3"].iter().find(|p| Path::new(p).exists()).map_or("python3".into(), |p| p.to_string())
}

fn hostile() -> Vec<String> {
    vec![python(), root().join("tests/support/upstreams/hostile.py").display().to_string()]
}

/// What a Python script run by sp (unconfined: the approver, a credential command)
/// writes: its descriptors, as JSON, into `out`.
fn fd_lister(dir: &TempDir, name: &str, out: &str, then: &str) -> PathBuf {
    let script = format!(
        "#!{}\nimport json, os, sys\nnames = sorted(int(n) for n in os.listdir('/proc/self/fd'))\n\
         def held(n):\n    try:\n        os.fstat(n)\n        return True\n    except OSError:\n        return False\n\
         fds = [n for n in names if held(n)]\nopen({out:?}, 'w').write(json.dumps(fds))\n{then}\n",
        python()
    );
    dir.file(name, script.as_bytes(), 0o700)
}

fn structured(r: &Value) -> &Value {
    assert_eq!(r["isError"], false, "{r}");
    &r["structuredContent"]
}

fn journal(dir: &TempDir) -> Vec<Value> {
    std::fs::read_to_string(dir.join("audit.jsonl")).unwrap_or_default().lines().map(|l| serde_json::from_str(l).unwrap()).collect()
}

#[test]
fn every_child_holds_only_its_three_standard_descriptors() {
    let dir = TempDir::new("isofd");
    let cred_cmd = fd_lister(&dir, "cred-cmd", &dir.join("cred-fds.json"), "print('cmd-secret-0123456789abcdef')");
    let approver = fd_lister(&dir, "approver", &dir.join("approver-fds.json"), "sys.stdin.read(); sys.exit(0)");
    let confined = json!({"read": [root()]});
    let policy = json!({
        "credentials": {"fromcmd": {"source": {"command": [cred_cmd]}, "inject": {"bearer": {}}, "hosts": ["unused.invalid"]}},
        "upstreams": {
            "a": {"command": hostile(), "env": {"TOKEN": {"credential": "fromcmd"}}, "tools": {"allow": ["*"]}, "sandbox": confined},
            "b": {"command": hostile(), "tools": {"allow": ["*"], "approve": ["probe"]}, "sandbox": confined}
        },
        "approval": {"command": [approver], "timeout_s": 20},
        "audit": {"path": dir.join("audit.jsonl")}
    });
    let config = dir.file("policy.json", policy.to_string().as_bytes(), 0o600);
    let mut s = Session::start(Launch::mcp(&config, &[]));
    s.ready("2025-06-18");
    let a = s.tool(1, "a_probe", json!({"fds": true, "fd_paths": true}));
    assert_eq!(structured(&a)["fds"], json!([0, 1, 2]), "upstream a: {a}");
    // b starts after a: before the fix it inherited a's stdout.
    let b = s.tool(2, "b_probe", json!({"fds": true, "fd_paths": true}));
    assert_eq!(structured(&b)["fds"], json!([0, 1, 2]), "upstream b: {b}");
    // a again, after b and the approver started: still nothing of theirs.
    let a = s.tool(3, "a_probe", json!({"fds": true}));
    assert_eq!(structured(&a)["fds"], json!([0, 1, 2]), "upstream a, later: {a}");
    let run = s.finish();
    let read = |name: &str| std::fs::read_to_string(dir.join(name)).unwrap_or_else(|e| panic!("{name}: {e}\n{}", run.context()));
    assert_eq!(read("approver-fds.json"), "[0, 1, 2]", "the approver");
    assert_eq!(read("cred-fds.json"), "[0, 1, 2]", "the credential command");
}

#[test]
fn a_hostile_upstream_reaches_no_secret_no_grant_no_journal_and_not_sp() {
    let dir = TempDir::new("isoread");
    let other = dir.file("other.token", b"other-secret-never-used-0123456789", 0o600);
    let granted = TempDir::new("isogrant");
    let visible = granted.file("visible.txt", b"granted-content", 0o644);
    let grants = dir.join("grants.json");
    let policy = json!({
        "credentials": {"other": {"source": {"file": other}, "inject": {"bearer": {}}, "hosts": ["unused.invalid"]}},
        "upstreams": {"h": {"command": hostile(), "tools": {"allow": ["*"]}, "sandbox": {"read": [root(), granted.path]}}},
        "approval": {"command": ["/bin/false"], "grants": {"path": grants, "exact_max_s": 60}},
        "audit": {"path": dir.join("audit.jsonl")}
    });
    let config = dir.file("policy.json", policy.to_string().as_bytes(), 0o600);
    let mut s = Session::start(Launch::mcp(&config, &[]));
    s.ready("2025-06-18");
    let sp_pid = s.pid();
    let r = s.tool(
        1,
        "h_probe",
        json!({
            "read": [other, config, dir.join("audit.jsonl"), visible],
            "write": [dir.join("audit.jsonl"), grants, dir.join("planted")],
            "parent": true
        }),
    );
    let got = structured(&r).clone();
    let run = s.finish();
    assert_eq!(got["parent_pid"], json!(sp_pid), "the upstream is sp's own child (the launcher exec'd it)");
    let denied = json!("error:EACCES");
    for p in [other.display().to_string(), config.display().to_string(), dir.join("audit.jsonl")] {
        assert_eq!(got["read"][&p], denied, "read {p}: {got}");
    }
    assert_eq!(got["read"][visible.display().to_string()], json!("ok:granted-content"), "the control: sandbox.read is readable");
    for p in [dir.join("audit.jsonl"), grants.clone(), dir.join("planted")] {
        assert_eq!(got["write"][&p], denied, "write {p}: {got}");
    }
    // sp itself may have made the grants file (and its key) at start; nothing the
    // upstream wrote is in it.
    assert!(!std::fs::read_to_string(&grants).unwrap_or_default().contains("forged"));
    assert!(!Path::new(&dir.join("planted")).exists());
    for what in ["environ", "mem", "fd0_link", "fd0_open", "fd3_link", "fd3_open"] {
        let v = got["parent"][what].as_str().unwrap_or_default();
        assert!(v == "error:EACCES" || v == "error:EPERM", "/proc/<sp>/{what}: {v}");
    }
    assert_eq!(got["parent"]["signal"], json!("error:EPERM"), "a signal to sp");
    // The secret it tried for is not in anything it got back (the read failed), and
    // the journal is whole.
    assert!(!run.stderr.contains("other-secret-never-used"), "{}", run.stderr);
    let verify = run_sp(&["audit", "verify", &dir.join("audit.jsonl")], &[], b"");
    verify.assert_exit(0);
}

#[test]
fn kill_9_of_sp_leaves_no_upstream_running() {
    let dir = TempDir::new("isokill");
    let policy = json!({
        "upstreams": {"h": {"command": hostile(), "tools": {"allow": ["*"]}, "sandbox": {"read": [root()]}}},
        "audit": {"path": dir.join("audit.jsonl")}
    });
    let config = dir.file("policy.json", policy.to_string().as_bytes(), 0o600);
    let mut s = Session::start(Launch::mcp(&config, &[]));
    s.ready("2025-06-18");
    let r = s.tool(1, "h_probe", json!({"fds": true}));
    assert_eq!(r["isError"], false, "{r}");
    let group: i32 = journal(&dir)
        .iter()
        .filter(|r| r["kind"] == "upstream")
        .find_map(|r| r["reason"].as_str()?.strip_prefix("process group ")?.parse().ok())
        .expect("the upstream row names its process group");
    let pid = rustix::process::Pid::from_raw(group).unwrap();
    assert!(rustix::process::test_kill_process(pid).is_ok(), "the upstream runs");
    rustix::process::kill_process(rustix::process::Pid::from_raw(s.pid() as i32).unwrap(), rustix::process::Signal::KILL).unwrap();
    let run = s.finish();
    assert_eq!(run.status.code(), None, "sp was killed: {}", run.context());
    let deadline = Instant::now() + Duration::from_secs(10);
    while rustix::process::test_kill_process_group(pid).is_ok() {
        // A zombie is gone for our purpose: it runs nothing (its reaper is init now).
        let stat = std::fs::read_to_string(format!("/proc/{group}/stat")).unwrap_or_default();
        if stat.rsplit(')').next().is_some_and(|r| r.trim_start().starts_with('Z')) {
            break;
        }
        assert!(Instant::now() < deadline, "waiting for upstream process group {group} to die with sp (kill -9)");
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn an_upstream_that_cannot_be_confined_as_asked_does_not_start() {
    let dir = TempDir::new("isofail");
    let policy = json!({
        "upstreams": {"h": {"command": hostile(), "tools": {"allow": ["*"]}, "sandbox": {"read": [root(), "/nonexistent/sp-sandbox-path"]}}},
        "audit": {"path": dir.join("audit.jsonl")}
    });
    let config = dir.file("policy.json", policy.to_string().as_bytes(), 0o600);
    let check = run_sp(&["check", "--config", &config.display().to_string()], &[], b"");
    check.assert_exit(1);
    assert!(
        check.stderr.contains("sp: error: upstreams.h.sandbox.read[1]: /nonexistent/sp-sandbox-path: no such file (the upstream would not start)"),
        "{}",
        check.context()
    );
    let mut s = Session::start(Launch::mcp(&config, &["-v"]));
    s.ready("2025-06-18");
    let r = s.tool(1, "h_probe", json!({}));
    let run = s.finish();
    // Not listed, so not callable: the upstream never came up.
    assert_eq!(r["isError"], true, "{r}");
    assert!(run.stderr.contains("sp launcher: /nonexistent/sp-sandbox-path: "), "{}", run.stderr);
}

#[test]
fn sp_check_shows_each_upstreams_sandbox() {
    let dir = TempDir::new("isocheck");
    let policy = json!({
        "upstreams": {
            "c": {"command": hostile(), "tools": {"allow": ["*"]}, "sandbox": {"read": [root()], "network": false, "memory_mb": 512}},
            "n": {"command": hostile(), "tools": {"allow": ["*"]}, "sandbox": "none"}
        },
        "audit": {"path": dir.join("audit.jsonl")}
    });
    let config = dir.file("policy.json", policy.to_string().as_bytes(), 0o600);
    let check = run_sp(&["check", "--config", &config.display().to_string()], &[], b"");
    check.assert_exit(0);
    let out = String::from_utf8_lossy(&check.stdout);
    assert!(out.contains(&format!("    sandbox: read {} write none network none memory 512 MiB, 512 processes, 1024 files\n", root().display())), "{out}");
    assert!(out.contains("    sandbox: none (not confined: it can read what sp's user can)\n"), "{out}");
    assert!(!check.stderr.contains("warning"), "{}", check.stderr);

    // What the upstream would fail to read is named, with the fix: a script argument
    // outside its read paths, and the interpreter of a program's #! line (a venv's).
    let interp = dir.file("python-elsewhere", b"#!/bin/sh\n", 0o755);
    let program = dir.file("server", format!("#!{}\n", interp.display()).as_bytes(), 0o755);
    let policy = json!({
        "upstreams": {
            "w": {"command": hostile(), "tools": {"allow": ["*"]}},
            "v": {"command": [program], "tools": {"allow": ["*"]}}
        },
        "audit": {"path": dir.join("audit.jsonl")}
    });
    let config = dir.file("policy.json", policy.to_string().as_bytes(), 0o600);
    let check = run_sp(&["check", "--config", &config.display().to_string()], &[], b"");
    check.assert_exit(0);
    let script = root().join("tests/support/upstreams/hostile.py");
    for want in [
        format!(
            "sp: warning: upstreams.w.command[1]: {} is outside the upstream's sandbox, which will not let it read it: add it (or its directory) to upstreams.w.sandbox.read",
            script.display()
        ),
        format!(
            "sp: warning: upstreams.v.command[0]'s interpreter (#!): {} is outside the upstream's sandbox, which will not let it read it: add it (or its directory) to upstreams.v.sandbox.read",
            interp.display()
        ),
    ] {
        assert!(check.stderr.contains(&want), "want {want}\n{}", check.context());
    }
}
