//! `make bench`, SSH part (issue #4): 100 sequential `true` commands on a loopback
//! OpenSSH server, three ways, printed as wall times and ratios, never asserted:
//!
//! - `sp mcp`: one process, 100 `ssh_exec` calls (start, initialize and the one
//!   connection included);
//! - `ssh` with connection sharing (`ControlMaster=auto`, `ControlPersist`): 100
//!   processes, the first one sets up the master;
//! - plain `ssh`: 100 processes, 100 connections and logins.
//!
//! The three run interleaved (one command of each in turn) so that load from elsewhere
//! falls on all alike. Every command also pays the remote shell's start (`$SHELL -c
//! true`, which for bash reads `~/.bashrc` under sshd); it is timed locally and printed,
//! since on a machine with a heavy `~/.bashrc` it dominates every line.
//!
//! The server is a private `sshd` on 127.0.0.1 (`tests/support/sshd.rs`). Without
//! `/usr/sbin/sshd` the figure is skipped with a message and exit status 0.
//!
//! Usage: `cargo run --release --example bench_ssh -- target/release/sp`
#![allow(
    clippy::disallowed_methods,
    reason = "tests and benchmarks start sp, sshd and clients and read their environment; the fence in clippy.toml is for src/"
)]
#![allow(clippy::print_stdout, clippy::disallowed_macros)]

#[path = "../tests/support/sshd.rs"]
mod sshd;

mod support;

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::json;
use support::Session;

const N: usize = 100;

fn ms(d: Duration) -> String {
    format!("{:.0} ms", d.as_secs_f64() * 1e3)
}

/// One `sp mcp` process, driven like an MCP client (its errors on this terminal).
struct Sp {
    session: Session,
    id: u64,
}

impl Sp {
    fn start(sp: &str, policy: &std::path::Path) -> Sp {
        let mut cmd = support::sp_command(sp, policy);
        cmd.stderr(Stdio::inherit());
        let mut session = Session::spawn(cmd).expect("spawn sp");
        session.round_trip(support::INIT);
        // The ping is answered after the notification was read: one round trip.
        session.round_trip(&format!("{}\n{{\"jsonrpc\":\"2.0\",\"id\":\"p\",\"method\":\"ping\"}}", support::READY));
        Sp { session, id: 0 }
    }

    fn exec_true(&mut self) {
        self.id += 1;
        let call = support::tool_call(self.id, "ssh_exec", json!({"host": "bench", "command": "true"}));
        let a = self.session.round_trip(&call);
        assert!(a.contains("\"exit_status\":0"), "ssh_exec failed: {a}");
    }

    fn finish(self) {
        self.session.finish();
    }
}

fn ssh_true(base: &[String], extra: &[String]) {
    let status = Command::new("ssh").args(extra).args(base).arg("true").stdin(Stdio::null()).status().expect("run ssh");
    assert!(status.success(), "ssh failed: {status}");
}

/// What every method pays per command on the server: sshd runs the user's login shell
/// as `SHELL -c true`, with `SSH_CLIENT` set, so bash reads `~/.bashrc`. Timed locally,
/// spawned the same way, to separate the remote shell's start from transport costs.
fn shell_floor(user: &str) -> Option<Duration> {
    let entry = String::from_utf8(Command::new("getent").args(["passwd", user]).output().ok()?.stdout).ok()?;
    let fields: Vec<&str> = entry.trim().split(':').collect();
    let (home, shell) = (fields.get(5)?, fields.get(6)?);
    let t = Instant::now();
    for _ in 0..N {
        let ok = Command::new(shell)
            .args(["-c", "true"])
            .env_clear()
            .env("HOME", home)
            .env("USER", user)
            .env("PATH", "/usr/local/bin:/usr/bin:/bin")
            .env("SSH_CLIENT", "127.0.0.1 40000 22")
            .stdin(Stdio::null())
            .status()
            .ok()?
            .success();
        if !ok {
            return None;
        }
    }
    Some(t.elapsed())
}

fn main() {
    let sp = std::env::args().nth(1).unwrap_or_else(|| "target/release/sp".into());
    if !std::path::Path::new(sshd::SSHD).exists() {
        println!("sp ssh bench: skipped: {} is not installed (apt-get install openssh-server)", sshd::SSHD);
        return;
    }
    if Command::new("ssh").arg("-V").stderr(Stdio::null()).status().is_err() {
        println!("sp ssh bench: skipped: no ssh client (apt-get install openssh-client)");
        return;
    }
    let server = sshd::Sshd::start();
    let dir = &server.dir.path;
    let known_hosts = dir.join("bench_known_hosts");
    std::fs::write(&known_hosts, format!("{}\n", server.known_hosts_line())).unwrap();
    let policy = dir.join("bench_policy.json");
    std::fs::write(
        &policy,
        json!({"ssh": {"known_hosts": known_hosts, "hosts": {"bench": {
            "address": "127.0.0.1", "port": server.port, "user": server.user,
            "auth": {"key_file": server.client_key}}}},
            // A journal like production's (fsync per row), kept out of the user's own.
            "audit": {"path": dir.join("bench_audit.jsonl")}})
        .to_string(),
    )
    .unwrap();

    let base: Vec<String> = [
        "-F",
        "/dev/null",
        "-q",
        "-T",
        "-o",
        "BatchMode=yes",
        "-o",
        "IdentitiesOnly=yes",
        "-o",
        "StrictHostKeyChecking=yes",
        "-o",
        &format!("UserKnownHostsFile={}", known_hosts.display()),
        "-i",
        &server.client_key.display().to_string(),
        "-p",
        &server.port.to_string(),
        "-l",
        &server.user,
        "127.0.0.1",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    let control = dir.join("cm");
    let shared: Vec<String> =
        ["-o".to_string(), "ControlMaster=auto".into(), "-o".into(), format!("ControlPath={}", control.display()), "-o".into(), "ControlPersist=60".into()]
            .to_vec();

    // Interleaved, one command of each kind in turn, so that load from elsewhere on the
    // machine falls on the three alike. sp's start and initialize count towards sp; the
    // master's setup towards the first shared call.
    let (mut t_sp, mut t_cm, mut t_plain) = (Duration::ZERO, Duration::ZERO, Duration::ZERO);
    let t = Instant::now();
    let mut client = Sp::start(&sp, &policy);
    t_sp += t.elapsed();
    for _ in 0..N {
        let t = Instant::now();
        client.exec_true();
        t_sp += t.elapsed();
        let t = Instant::now();
        ssh_true(&base, &shared);
        t_cm += t.elapsed();
        let t = Instant::now();
        ssh_true(&base, &[]);
        t_plain += t.elapsed();
    }
    client.finish();
    // End the control master this bench started.
    let _ = Command::new("ssh").args(&shared).args(["-O", "exit"]).args(&base).stderr(Stdio::null()).status();
    let logins = server.logins();
    let floor = shell_floor(&server.user);
    drop(server);

    let per = |d: Duration| d.as_secs_f64() * 1e3 / N as f64;
    println!("sp ssh bench ({sp}): {N} sequential `true` on a loopback sshd, wall time");
    println!("                                                  total    per call  vs sp   per call vs sp");
    for (name, d) in [
        ("sp mcp, ssh_exec (one process, one session)", t_sp),
        ("ssh -o ControlMaster=auto -o ControlPersist", t_cm),
        ("plain ssh (one login per call)", t_plain),
    ] {
        println!("  {name:<44} {:>10} {:>8.1} ms {:>5.2}x  {:>+8.1} ms", ms(d), per(d), d.as_secs_f64() / t_sp.as_secs_f64(), per(d) - per(t_sp));
    }
    match floor {
        Some(f) => {
            println!("  in every line: the remote shell's own start (`$SHELL -c true` with the user's rc files, timed locally) {:.1} ms per call", per(f))
        }
        None => println!("  (the remote shell's start could not be timed locally)"),
    }
    println!("  logins seen by sshd: {logins} (sp 1 + control master 1 + plain {N})");
}
