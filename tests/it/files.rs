//! Files the operator names (issue 8 points 7 and 10), through the built `sp`.
//!
//! Point 7: a FIFO at a credential `file`, a `systemd` credential, an SSH `key_file`,
//! `passphrase_file` or `password_file`, or `known_hosts` fails that one call at once
//! with a reason naming the FIFO, and the session still answers `ping`; nothing runs
//! (the HTTP server sees no connection, sshd no login). A FIFO as the policy, the
//! `ca_file` or the journal stops `sp` at startup, at once. Before the fix `open(2)` on
//! the FIFO waited forever for a writer; a watchdog kills a hung `sp`, so a hang fails
//! the test instead of blocking the suite.
//!
//! Point 10: a policy writable by group or others, owned by another user, or in a
//! directory others can write (sticky or not) is refused by `sp mcp` and `sp check`
//! with the file and the fix; so is an existing journal with any group or other bit.
//!
//! Attacks tried (all held after the fix):
//! - FIFO with no writer at each operator-named path above: refused, never opened for
//!   long; `ping` answered right after.
//! - A FIFO swapped in for a regular file between `lstat` and `open` is refused by
//!   `fstat` on the descriptor (unit test in `src/sys/fs.rs`; a race cannot be timed here).
//! - Policy modes 0620, 0602, 0666: refused; 0644 (readable, not writable) is accepted.
//! - Policy chowned to another uid (as root): refused.
//! - Policy directory 0770, 0777 and 1777 (sticky does not help for the holding dir).
//! - Symbolic links: a safe link to a target in a world-writable directory, and a link
//!   in a world-writable directory to a safe target: both refused; safe to safe works.
//! - A group-readable (0640) existing journal: refused (it used to be accepted).
//! - An approver that is a FIFO (refused at once, as before, now naming the FIFO) or
//!   world-writable (it used to run and approve): the call is SP_NOT_APPROVED.
//! - `sp audit verify/tail/show` on a FIFO: refused at once naming it (it used to block).
#![allow(
    clippy::disallowed_methods,
    reason = "tests and benchmarks start sp, sshd and clients and read their environment; the fence in clippy.toml is for src/"
)]

use crate::support;

use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use support::http_server::TestServer;
use support::process::{run_sp, tool_error_code, Launch, Session, TempDir};
use support::sshd::{self, Sshd};

/// A refusal that takes longer than this waited on something.
const PROMPT: Duration = Duration::from_secs(3);
/// A hung `sp` is killed after this (the old code never returned).
const HANG: Duration = Duration::from_secs(15);

fn mkfifo(dir: &Path, name: &str) -> PathBuf {
    let p = dir.join(name);
    let ok = std::process::Command::new("mkfifo").arg("-m").arg("600").arg(&p).status().expect("mkfifo").success();
    assert!(ok, "mkfifo {}", p.display());
    p
}

/// Kills `pid` if still alive after [`HANG`]: a hang becomes a failure with a message.
struct Watchdog(Option<mpsc::Sender<()>>);

impl Watchdog {
    fn new(pid: u32) -> Watchdog {
        let (tx, rx) = mpsc::channel::<()>();
        std::thread::spawn(move || {
            if let Err(mpsc::RecvTimeoutError::Timeout) = rx.recv_timeout(HANG) {
                let _ = std::process::Command::new("kill").arg("-9").arg(pid.to_string()).status();
            }
        });
        Watchdog(Some(tx))
    }
}

impl Drop for Watchdog {
    fn drop(&mut self) {
        // Dropping the sender disconnects the channel: the watchdog leaves sp alone.
        drop(self.0.take());
    }
}

fn ping(s: &mut Session) {
    let pong = s.call(&json!({"jsonrpc": "2.0", "id": "ping", "method": "ping"}));
    assert_eq!(pong["result"], json!({}), "the session must stay responsive: {pong}");
}

/// The call fails with `code` and a message containing `want`, within [`PROMPT`], and
/// the session answers `ping` afterwards.
fn refused_promptly(s: &mut Session, id: i64, tool: &str, args: Value, code: &str, want: &str) {
    let started = Instant::now();
    let r = s.tool(id, tool, args.clone());
    let took = started.elapsed();
    assert_eq!(tool_error_code(&r), Some(code), "{args}: {r}");
    let msg = r["structuredContent"]["error"]["message"].as_str().unwrap_or_default();
    assert!(msg.contains(want), "{args}: want {want:?} in {msg:?}");
    assert!(took < PROMPT, "{args}: refused only after {took:?}");
    let started = Instant::now();
    ping(s);
    eprintln!("{tool} {args}: refused in {took:?}, then ping answered in {:?}", started.elapsed());
}

#[test]
fn fifo_credential_file_or_systemd_credential_fails_the_call_at_once_and_ping_is_answered() {
    let server = TestServer::start();
    let dir = TempDir::new("files-http");
    let fifo = mkfifo(&dir.path, "token");
    let creds = dir.path.join("creds");
    std::fs::DirBuilder::new().mode(0o700).create(&creds).unwrap();
    mkfifo(&creds, "sysd");
    let host = format!("127.0.0.1:{}", server.port);
    let policy = json!({
        "credentials": {
            "fifo_file": {"source": {"file": fifo}, "inject": {"bearer": {}}, "hosts": [host], "paths": ["/v1/*"]},
            "fifo_systemd": {"source": {"systemd": "sysd"}, "inject": {"bearer": {}}, "hosts": [host], "paths": ["/v1/*"]}
        },
        "http": {"allow": [{"hosts": [host], "methods": ["GET"], "paths": ["/v1/*"]}]},
        "audit": {"path": null}
    });
    let policy = dir.file("policy.json", policy.to_string().as_bytes(), 0o600);
    let mut s = Session::start(Launch::mcp(&policy, &[]).env("CREDENTIALS_DIRECTORY", &creds.display().to_string()));
    let _guard = Watchdog::new(s.pid());
    s.ready("2025-06-18");
    let url = format!("http://{host}/v1/x");
    for (id, cred) in [(1, "fifo_file"), (2, "fifo_systemd")] {
        refused_promptly(&mut s, id, "http_request", json!({"method": "GET", "url": url, "credential": cred}), "SP_UNAVAILABLE", "FIFO");
    }
    server.settle();
    assert_eq!(server.accepted(), 0, "a request ran without its credential");
    s.finish().assert_exit(0);
}

#[test]
fn fifo_or_world_writable_approver_refuses_the_call_at_once_and_nothing_runs() {
    let server = TestServer::start();
    let dir = TempDir::new("files-approver");
    let token = dir.file("token", b"tok-files-approver\n", 0o600);
    let fifo = mkfifo(&dir.path, "approver-fifo");
    let open = dir.file("approver-open", b"#!/bin/sh\nexit 0\n", 0o777);
    let host = format!("127.0.0.1:{}", server.port);
    for (i, (approver, want)) in [(fifo, "FIFO"), (open, "too open")].into_iter().enumerate() {
        let policy = json!({
            "credentials": {"api": {"source": {"file": token}, "inject": {"bearer": {}}, "hosts": [host], "paths": ["/v1/*"], "approve": true}},
            "http": {"allow": [{"hosts": [host], "methods": ["GET"], "paths": ["/v1/*"]}]},
            "approval": {"command": [approver], "timeout_s": 60},
            "audit": {"path": dir.join(&format!("audit-{i}.jsonl"))}
        });
        let policy = dir.file(&format!("policy-{i}.json"), policy.to_string().as_bytes(), 0o600);
        let mut s = Session::start(Launch::mcp(&policy, &[]));
        let _guard = Watchdog::new(s.pid());
        s.ready("2025-06-18");
        let args = json!({"method": "GET", "url": format!("http://{host}/v1/x"), "credential": "api"});
        refused_promptly(&mut s, 1, "http_request", args, "SP_NOT_APPROVED", want);
        s.finish().assert_exit(0);
    }
    server.settle();
    assert_eq!(server.accepted(), 0, "an unapproved request ran");
}

#[test]
fn fifo_key_passphrase_password_or_known_hosts_fails_the_ssh_call_at_once() {
    if !sshd::available() {
        return;
    }
    let sshd = Sshd::start();
    let dir = TempDir::new("files-ssh");
    let fifo = mkfifo(&dir.path, "fifo");
    let kh = dir.file("known_hosts", format!("{}\n", sshd.known_hosts_line()).as_bytes(), 0o600);
    let key = sshd.client_key.display().to_string();
    let cases = [
        (json!({"key_file": fifo}), kh.clone(), "SP_UNAVAILABLE"),
        (json!({"key_file": key, "passphrase_file": fifo}), kh.clone(), "SP_UNAVAILABLE"),
        (json!({"password_file": fifo}), kh.clone(), "SP_UNAVAILABLE"),
        (json!({"key_file": key}), fifo.clone(), "SP_HOST_KEY"),
    ];
    for (i, (auth, known_hosts, code)) in cases.into_iter().enumerate() {
        let host = json!({"address": "127.0.0.1", "port": sshd.port, "user": sshd.user, "auth": auth});
        let policy = json!({"ssh": {"known_hosts": known_hosts, "connect_timeout_s": 5, "hosts": {"web1": host}}, "audit": {"path": null}});
        let policy = dir.file(&format!("policy-{i}.json"), policy.to_string().as_bytes(), 0o600);
        let mut s = Session::start(Launch::mcp(&policy, &[]));
        let _guard = Watchdog::new(s.pid());
        s.ready("2025-06-18");
        refused_promptly(&mut s, 1, "ssh_exec", json!({"host": "web1", "command": "true"}), code, "FIFO");
        s.finish().assert_exit(0);
    }
    assert_eq!(sshd.logins(), 0, "nothing may log in");
}

/// `sp check` and `sp mcp` with `policy`: both refuse to start, promptly, with every
/// `want` on stderr.
fn both_refuse(policy: &Path, want: &[&str]) {
    for args in [vec!["check".to_owned(), "--config".to_owned(), policy.display().to_string()], Launch::mcp(policy, &[]).args] {
        let launch = Launch { args, env: Vec::new() };
        let started = Instant::now();
        let mut child = launch.spawn();
        let _guard = Watchdog::new(child.id());
        drop(child.stdin.take());
        let out = support::process::output_deadline(child, &launch.describe());
        let took = started.elapsed();
        let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
        assert_eq!(out.status.code(), Some(1), "{}: must refuse to start\nstderr: {stderr}", launch.describe());
        assert_eq!(out.stdout, b"", "{}: nothing on stdout", launch.describe());
        assert!(took < PROMPT, "{}: refused only after {took:?}", launch.describe());
        for w in want {
            assert!(stderr.contains(w), "{}: want {w:?} on stderr\nstderr: {stderr}", launch.describe());
        }
    }
}

fn accepted(policy: &Path) {
    let run = Launch::new(&["check", "--config", &policy.display().to_string()]).run(b"");
    run.assert_exit(0);
}

#[test]
fn fifo_policy_or_ca_file_stops_startup_at_once() {
    let dir = TempDir::new("files-startup");
    let fifo = mkfifo(&dir.path, "policy.json");
    both_refuse(&fifo, &["FIFO", &fifo.display().to_string()]);
    let ca = mkfifo(&dir.path, "ca.pem");
    let policy = dir.file("ca-policy.json", json!({"http": {"ca_file": ca}, "audit": {"path": null}}).to_string().as_bytes(), 0o600);
    both_refuse(&policy, &["http.ca_file", "FIFO"]);
}

const SIMPLE: &[u8] = br#"{"audit": {"path": null}}"#;

#[test]
fn policy_writable_by_group_or_others_is_refused_with_the_fix() {
    let dir = TempDir::new("files-mode");
    for mode in [0o620, 0o602, 0o666] {
        let p = dir.file(&format!("policy-{mode:o}.json"), SIMPLE, mode);
        both_refuse(&p, &[&p.display().to_string(), &format!("{mode:04o}"), &format!("chmod go-w {}", p.display())]);
    }
    accepted(&dir.file("readable.json", SIMPLE, 0o644));
}

#[test]
fn policy_owned_by_another_user_is_refused() {
    if rustix::process::geteuid().as_raw() != 0 {
        return; // only root can give a file away
    }
    let dir = TempDir::new("files-owner");
    let p = dir.file("policy.json", SIMPLE, 0o600);
    std::os::unix::fs::chown(&p, Some(65534), None).unwrap();
    both_refuse(&p, &[&p.display().to_string(), "uid 65534", "chown"]);
}

#[test]
fn policy_in_a_directory_others_can_write_is_refused_sticky_or_not() {
    let dir = TempDir::new("files-dir");
    let sub = dir.path.join("conf");
    std::fs::DirBuilder::new().mode(0o700).create(&sub).unwrap();
    let p = sub.join("policy.json");
    std::fs::write(&p, SIMPLE).unwrap();
    std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o600)).unwrap();
    accepted(&p);
    for mode in [0o770, 0o777] {
        std::fs::set_permissions(&sub, std::fs::Permissions::from_mode(mode)).unwrap();
        both_refuse(&p, &[&format!("directory {}", sub.display()), &format!("chmod go-w {}", sub.display())]);
    }
    // Issue 32, section 1: a sticky shared directory (a policy directly in /tmp) is
    // refused too, but the fix is to move the policy, never `chmod go-w /tmp`.
    std::fs::set_permissions(&sub, std::fs::Permissions::from_mode(0o1777)).unwrap();
    both_refuse(&p, &[&format!("directory {}", sub.display()), "(fix: move the policy to a private directory", "is shared by design, leave its mode alone"]);
    let refused = run_sp(&["check", "--config", &p.display().to_string()], &[], b"");
    assert!(!refused.stderr.contains("chmod go-w"), "{}", refused.context());
    std::fs::set_permissions(&sub, std::fs::Permissions::from_mode(0o700)).unwrap();
}

#[test]
fn symlinked_policy_is_checked_at_the_link_and_at_the_target() {
    let dir = TempDir::new("files-link");
    let mk = |name: &str, mode: u32| {
        let d = dir.path.join(name);
        std::fs::DirBuilder::new().mode(0o700).create(&d).unwrap();
        std::fs::set_permissions(&d, std::fs::Permissions::from_mode(mode)).unwrap();
        d
    };
    let (safe, open) = (mk("safe", 0o700), mk("open", 0o777));
    let write = |d: &Path| {
        let p = d.join("target.json");
        std::fs::write(&p, SIMPLE).unwrap();
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o600)).unwrap();
        p
    };
    let (safe_target, open_target) = (write(&safe), write(&open));
    let link = |d: &Path, name: &str, to: &Path| {
        let l = d.join(name);
        std::os::unix::fs::symlink(to, &l).unwrap();
        l
    };
    accepted(&link(&safe, "ok.json", &safe_target));
    both_refuse(&link(&safe, "to-open.json", &open_target), &[&format!("directory {}", open.display())]);
    both_refuse(&link(&open, "from-open.json", &safe_target), &[&format!("directory {}", open.display())]);
}

#[test]
fn group_readable_existing_journal_is_refused_at_startup() {
    let dir = TempDir::new("files-journal");
    let journal = dir.file("audit.jsonl", b"", 0o640);
    let policy = dir.file("policy.json", json!({"audit": {"path": journal}}).to_string().as_bytes(), 0o600);
    let run = Launch::mcp(&policy, &[]).run(b"");
    run.assert_exit(1);
    assert!(run.stderr.contains("0640") && run.stderr.contains(&format!("chmod go-rwx {}", journal.display())), "{}", run.context());
    assert_eq!(std::fs::read(&journal).unwrap(), b"", "nothing was written to it");
    let fifo = mkfifo(&dir.path, "fifo.jsonl");
    let policy = dir.file("fifo-policy.json", json!({"audit": {"path": fifo}}).to_string().as_bytes(), 0o600);
    let run = Launch::mcp(&policy, &[]).run(b"");
    run.assert_exit(1);
    assert!(run.stderr.contains("FIFO"), "{}", run.context());
}

/// `sp audit verify|tail|show` on a FIFO: refused at once, naming the file type, instead
/// of blocking in open(2) until a writer appears.
#[test]
fn sp_audit_on_a_fifo_is_refused_without_blocking() {
    let dir = TempDir::new("files-audit-fifo");
    let fifo = mkfifo(&dir.path, "journal.jsonl");
    for sub in ["verify", "tail", "show"] {
        let mut child = std::process::Command::new(support::process::sp_bin())
            .args(["audit", sub])
            .arg(&fifo)
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .expect("spawn sp");
        let deadline = Instant::now() + Duration::from_secs(10);
        let status = loop {
            if let Some(s) = child.try_wait().expect("wait") {
                break s;
            }
            if Instant::now() > deadline {
                let _ = child.kill();
                panic!("sp audit {sub} blocked on a FIFO");
            }
            std::thread::sleep(Duration::from_millis(10));
        };
        let out = child.wait_with_output().expect("output");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(status.code(), Some(1), "sp audit {sub}: {stderr}");
        assert!(stderr.contains("FIFO") && out.stdout.is_empty(), "sp audit {sub}: {stderr}");
    }
}
