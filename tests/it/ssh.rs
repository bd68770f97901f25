//! `ssh_exec` end to end (issue #4): the built `sp mcp` against a real OpenSSH `sshd` on
//! 127.0.0.1 (`support/sshd.rs`), logging in as the user running the tests.
//!
//! What the server saw is read from its log (`LogLevel DEBUG1`): `Connection from`
//! counts TCP connections, `userauth-request` counts authentication attempts (even the
//! `none` probe), `Accepted publickey` counts logins. That is how "zero auth attempts"
//! and "one TCP connection for many calls" are asserted, not by trusting `sp`.
#![allow(
    clippy::disallowed_methods,
    reason = "tests and benchmarks start sp, sshd and clients and read their environment; the fence in clippy.toml is for src/"
)]

use crate::support;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use support::corpus::{self, Expect};
use support::process::{random_hex, tool_error_code, Launch, Session, TempDir};
use support::sshd::{self, keygen, Sshd};

const VERSION: &str = "2025-06-18";

/// A test's world: one sshd, one private directory for keys, policy and known_hosts.
struct World {
    sshd: Sshd,
    dir: TempDir,
}

impl World {
    fn new() -> Option<World> {
        if !sshd::available() {
            return None;
        }
        let sshd = Sshd::start();
        let dir = TempDir::new("ssh-test");
        Some(World { sshd, dir })
    }

    /// `known_hosts` holding exactly `lines`, mode 0600.
    fn known_hosts(&self, lines: &[String]) -> PathBuf {
        let mut text = lines.join("\n");
        if !text.is_empty() {
            text.push('\n');
        }
        self.dir.file("known_hosts", text.as_bytes(), 0o600)
    }

    /// The host entry for this sshd with `auth` (and extra fields).
    fn host(&self, auth: Value, extra: Value) -> Value {
        let mut h = json!({"address": "127.0.0.1", "port": self.sshd.port, "user": self.sshd.user, "auth": auth});
        if let Value::Object(m) = extra {
            h.as_object_mut().unwrap().extend(m);
        }
        h
    }

    fn key_auth(&self) -> Value {
        json!({"key_file": self.sshd.client_key})
    }

    /// Writes `{"ssh": ssh}` (known_hosts defaulting to the trusted file) and returns
    /// the policy path.
    fn policy(&self, mut ssh: Value) -> PathBuf {
        if ssh.get("known_hosts").is_none() {
            ssh["known_hosts"] = json!(self.known_hosts(&[self.sshd.known_hosts_line()]));
        }
        self.dir.file(&format!("policy-{}.json", &random_hex()[..8]), json!({"ssh": ssh}).to_string().as_bytes(), 0o600)
    }

    /// The usual policy: host `web1` logging in with the authorized client key.
    fn simple_policy(&self, extra: Value) -> PathBuf {
        let mut ssh = json!({"connect_timeout_s": 5, "hosts": {"web1": self.host(self.key_auth(), json!({}))}});
        if let Value::Object(m) = extra {
            ssh.as_object_mut().unwrap().extend(m);
        }
        self.policy(ssh)
    }

    /// Like [`World::simple_policy`], `web1` without a pty (`"pty": false`).
    fn no_pty_policy(&self, extra: Value) -> PathBuf {
        let mut ssh = json!({"connect_timeout_s": 5, "hosts": {"web1": self.host(self.key_auth(), json!({"pty": false}))}});
        if let Value::Object(m) = extra {
            ssh.as_object_mut().unwrap().extend(m);
        }
        self.policy(ssh)
    }

    fn session(&self, policy: &Path) -> Session {
        let mut s = Session::start(Launch::mcp(policy, &["-v"]));
        s.ready(VERSION);
        s
    }
}

fn exec(s: &mut Session, id: i64, args: Value) -> Value {
    s.tool(id, "ssh_exec", args)
}

fn sc(r: &Value) -> &Value {
    &r["structuredContent"]
}

fn fingerprint(pubkey: &Path) -> String {
    let out = sshd::run(Command::new("ssh-keygen").args(["-E", "sha256", "-lf"]).arg(pubkey));
    out.split_whitespace().nth(1).unwrap().to_owned()
}

#[test]
fn runs_commands_and_reuses_one_connection() {
    let Some(w) = World::new() else { return };
    let mut s = w.session(&w.simple_policy(json!({})));

    let r = exec(&mut s, 1, json!({"host": "web1", "command": "echo hello; echo oops >&2"}));
    assert_eq!(r["isError"], false, "{r}");
    let o = sc(&r);
    assert_eq!((o["host"].as_str(), o["exit_status"].as_i64()), (Some("web1"), Some(0)), "{r}");
    // on the default pty both streams arrive in stdout, without CRs
    assert_eq!((o["stdout"].as_str(), o["stderr"].as_str()), (Some("hello\noops\n"), Some("")));
    assert_eq!((o["truncated"].as_bool(), o["stdout_bytes"].as_u64(), o["stderr_bytes"].as_u64()), (Some(false), Some(11), Some(0)));
    assert!(o["duration_ms"].is_u64() && o.get("exit_signal").is_none(), "{r}");
    let fp = fingerprint(&w.sshd.dir.path.join("host_ed25519.pub"));
    assert_eq!(o["host_key_fingerprint"].as_str(), Some(fp.as_str()));
    // the text block carries the same result
    let text: Value = serde_json::from_str(r["content"][0]["text"].as_str().unwrap()).unwrap();
    assert_eq!(&text, o);

    // non-zero exit: a normal result
    let r = exec(&mut s, 2, json!({"host": "web1", "command": "echo failing >&2; exit 3"}));
    assert_eq!((r["isError"].as_bool(), sc(&r)["exit_status"].as_i64()), (Some(false), Some(3)), "{r}");
    assert_eq!(sc(&r)["stdout"], "failing\n");
    // stdin, and a command that would wait forever for input without it
    let r = exec(&mut s, 3, json!({"host": "web1", "command": "cat; echo done", "stdin": "line one\nline two"}));
    assert_eq!(sc(&r)["stdout"], "line one\nline twodone\n", "{r}");
    let r = exec(&mut s, 4, json!({"host": "web1", "command": "cat", "timeout_s": 5}));
    assert_eq!((sc(&r)["stdout"].as_str(), sc(&r)["exit_status"].as_i64()), (Some(""), Some(0)), "{r}");
    // killed by a signal: exit_signal, no exit_status
    let r = exec(&mut s, 5, json!({"host": "web1", "command": "kill -TERM $$"}));
    assert_eq!((sc(&r)["exit_signal"].as_str(), sc(&r)["exit_status"].clone()), (Some("TERM"), Value::Null), "{r}");
    // many calls, one connection
    let t = Instant::now();
    for i in 0..30 {
        let r = exec(&mut s, 100 + i, json!({"host": "web1", "command": "true"}));
        assert_eq!(sc(&r)["exit_status"], 0, "{r}");
    }
    let per_call = t.elapsed() / 30;
    let inv = s.tool(200, "sp_inventory", json!({}));
    let hosts = &sc(&inv)["ssh"]["hosts"];
    assert_eq!(hosts[0]["name"], "web1", "{inv}");
    assert_eq!(hosts[0]["user"], w.sshd.user.as_str());
    assert!(!inv.to_string().contains("client") && !inv.to_string().contains("key_file"), "{inv}");
    let run = s.finish();
    run.protocol();
    assert_eq!(w.sshd.wait_count("Connection from 127.0.0.1", 1), 1, "{}", w.sshd.log());
    assert_eq!(w.sshd.logins(), 1, "one login for 36 calls\n{}", w.sshd.log());
    assert!(run.summary().contains("ssh_exec:ok=35"), "{}", run.summary());
    eprintln!("reused session: {per_call:?} per ssh_exec of `true`");
}

#[test]
fn huge_output_is_truncated_and_counted() {
    let Some(w) = World::new() else { return };
    // without a pty, to have both streams
    let mut s = w.session(&w.no_pty_policy(json!({"max_output_bytes": 100_000})));
    let r = exec(&mut s, 1, json!({"host": "web1", "command": "head -c 3000000 /dev/zero | tr '\\0' a; echo the-end >&2"}));
    assert_eq!(r["isError"], false, "{}", &r.to_string()[..300]);
    let o = sc(&r);
    assert_eq!(o["truncated"], true);
    assert_eq!(o["stdout_bytes"], 3_000_000);
    assert_eq!(o["stderr_bytes"], 8);
    // A cut output whose last bytes could begin a spelling of a secret loses them to a
    // `[REDACTED:<name>]` marker (`Vault::scrub_truncated_tail`). One loaded run kept
    // 100013 bytes, which only such a marker can explain (not reproduced in 25 quiet
    // runs); count without it, and any other excess still fails.
    let stdout = o["stdout"].as_str().unwrap();
    let (stdout, marker) = match stdout.rfind("[REDACTED:") {
        Some(at) if stdout.ends_with(']') => (&stdout[..at], true),
        _ => (stdout, false),
    };
    let kept = stdout.len() + o["stderr"].as_str().unwrap().len();
    if marker {
        assert!((100_000 - 64..=100_000).contains(&kept), "one budget for both streams, a cut tail withheld: {kept}");
    } else {
        assert_eq!(kept, 100_000, "one budget for both streams");
    }
    assert!(stdout.bytes().all(|b| b == b'a'));
    assert_eq!(o["exit_status"], 0);
    // the session is still good afterwards
    let r = exec(&mut s, 2, json!({"host": "web1", "command": "echo small"}));
    assert_eq!((sc(&r)["stdout"].as_str(), sc(&r)["truncated"].as_bool()), (Some("small\n"), Some(false)));
    s.finish().protocol();
    assert_eq!(w.sshd.logins(), 1);
}

/// Without a pty (`"pty": false`) a timed-out command is killed like with one
/// (tests/ssh_kill.rs); its output until then is the result.
#[test]
fn timeout_returns_partial_output_and_detaches() {
    let Some(w) = World::new() else { return };
    let mut s = w.session(&w.no_pty_policy(json!({"timeout_s": 10})));
    // a unique sleep length marks the remote loop's processes
    let tag = format!("0.2{}", u32::from_str_radix(&random_hex()[..6], 16).unwrap());
    let t = Instant::now();
    let command = format!("echo started; echo warn >&2; while :; do sleep {tag}; echo tick; done");
    // 2 s, not 1: the remote shell's start-up (a login shell's rc files) and a loaded CI
    // machine must still leave time for a "tick" before the deadline.
    let r = exec(&mut s, 1, json!({"host": "web1", "command": command, "timeout_s": 2}));
    assert!(t.elapsed() < Duration::from_secs(6), "took {:?}", t.elapsed());
    assert_eq!(tool_error_code(&r), Some("SP_TIMEOUT"), "{r}");
    let out = sc(&r)["stdout"].as_str().unwrap();
    assert!(out.starts_with("started\n") && out.contains("tick"), "{r}");
    assert_eq!(sc(&r)["stderr"], "warn\n", "{r}");
    assert!(sc(&r)["exit_status"].is_null(), "{r}");
    assert!(r["content"][0]["text"].as_str().unwrap().contains("started"), "{r}");
    // the remote loop was killed: nothing stays attached
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let alive = Command::new("pgrep").args(["-f", &format!("sleep {tag}")]).output().unwrap();
        if !alive.status.success() {
            break;
        }
        assert!(Instant::now() < deadline, "the remote command still runs: {}", String::from_utf8_lossy(&alive.stdout));
        std::thread::sleep(Duration::from_millis(50));
    }
    // a timeout over the policy's limit is denied
    let r = exec(&mut s, 2, json!({"host": "web1", "command": "true", "timeout_s": 11}));
    assert_eq!(tool_error_code(&r), Some("SP_DENIED"), "{r}");
    // the next call reconnects
    let r = exec(&mut s, 3, json!({"host": "web1", "command": "echo after"}));
    assert_eq!(sc(&r)["stdout"], "after\n", "{r}");
    let run = s.finish();
    assert!(run.summary().contains("ssh_exec:SP_TIMEOUT=1"), "{}", run.summary());
    assert_eq!(w.sshd.logins(), 2, "{}", w.sshd.log());
}

// Attacks tried on "a timed-out command stops" (issue 8 point 9), all held with the
// default pty:
// - `echo started; sleep 30.N; touch F` with a 1 s timeout: the shell and its sleep are
//   gone within a moment of the timeout, F never appears (before: both ran on, and F
//   appeared after the sleep);
// - the same with `sp` killed (SIGKILL) while the command runs: the dropped connection
//   makes sshd close the pty, same result;
// - stdin that would steer a terminal (^D, ^V, ^C, ^Z, ^U, DEL, CR, NUL, a line over
//   the kernel's 4095-byte limit): it reaches the command byte for byte.
// What ignores SIGHUP or leaves the session is killed since (tests/ssh_kill.rs), but
// for a daemon that detached itself from everything sp can see.

/// Lines of `pgrep -af needle` (the test's own pgrep excluded by pgrep itself).
fn remote_processes(needle: &str) -> String {
    let out = Command::new("pgrep").args(["-af", needle]).output().unwrap();
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Polls until the `sleep` of [`sleeper`] runs (evidence the command got past its
/// `echo`: the shell alone would also die of SIGPIPE at that write).
fn wait_running(marker: &str) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while remote_processes(&format!("^{marker}$")).is_empty() {
        assert!(Instant::now() < deadline, "the remote command never started");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Polls until no process matches `needle`; panics with the survivors after `within`.
fn wait_gone(needle: &str, within: Duration) -> Duration {
    let t = Instant::now();
    loop {
        let alive = remote_processes(needle);
        if alive.is_empty() {
            return t.elapsed();
        }
        assert!(t.elapsed() < within, "the remote command still runs:\n{alive}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// A command line that sleeps 30 s then creates a file, marked by a unique sleep
/// length: (command, marker, file).
fn sleeper(w: &World) -> (String, String, PathBuf) {
    let hex = random_hex();
    let marker = format!("sleep 30.{}", u32::from_str_radix(&hex[..6], 16).unwrap());
    let flag = PathBuf::from(w.dir.join(&format!("touched-{}", &hex[..8])));
    (format!("echo started; {marker}; touch {}", flag.display()), marker, flag)
}

#[test]
fn timed_out_command_is_stopped_on_the_server() {
    let Some(w) = World::new() else { return };
    let mut s = w.session(&w.simple_policy(json!({"timeout_s": 10})));
    let (command, marker, flag) = sleeper(&w);
    let t = Instant::now();
    s.send(&support::process::tool_call(1, "ssh_exec", json!({"host": "web1", "command": command, "timeout_s": 1})));
    wait_running(&marker);
    let answer = s.read();
    let r = &answer["result"];
    assert_eq!(tool_error_code(r), Some("SP_TIMEOUT"), "{answer}");
    assert_eq!(sc(r)["stdout"], "started\n", "{answer}");
    // Evidence, not a sleep: the shell (its command line holds the marker) and the
    // sleep are gone, long before the sleep would have ended; nothing is left to
    // create the file.
    let gone = wait_gone(&marker, Duration::from_secs(10));
    assert!(t.elapsed() < Duration::from_secs(25), "took {:?}", t.elapsed());
    assert!(!flag.exists(), "the command ran on after its timeout");
    let msg = sc(r)["error"]["message"].as_str().unwrap();
    // The exact wording is tests/ssh_kill.rs's: never "stopped".
    assert!(msg.contains("sp killed its") && !msg.contains("stopped"), "{msg}");
    eprintln!("remote command gone {gone:?} after the SP_TIMEOUT answer");
    // the next call reconnects and works
    let r = exec(&mut s, 2, json!({"host": "web1", "command": "echo after"}));
    assert_eq!(sc(&r)["stdout"], "after\n", "{r}");
    s.finish();
}

#[test]
fn killing_sp_stops_the_remote_command() {
    let Some(w) = World::new() else { return };
    let mut s = w.session(&w.simple_policy(json!({"timeout_s": 60})));
    let (command, marker, flag) = sleeper(&w);
    s.send(&support::process::tool_call(1, "ssh_exec", json!({"host": "web1", "command": command})));
    wait_running(&marker);
    let pid = rustix::process::Pid::from_raw(s.pid() as i32).unwrap();
    rustix::process::kill_process(pid, rustix::process::Signal::KILL).unwrap();
    let run = s.finish();
    assert_eq!(run.code(), None, "sp was killed");
    wait_gone(&marker, Duration::from_secs(10));

    assert!(!flag.exists(), "the command ran on after sp died");
}

/// A server that refuses terminals: the call fails before anything runs, and says how
/// the operator can opt out; with `"pty": false` the host works.
#[test]
fn server_refusing_the_pty_runs_nothing() {
    if !sshd::available() {
        return;
    }
    let w = World { sshd: Sshd::start_with("PermitTTY no\n"), dir: TempDir::new("ssh-test") };
    let flag = PathBuf::from(w.dir.join(&format!("touched-{}", &random_hex()[..8])));
    let mut s = w.session(&w.simple_policy(json!({})));
    let r = exec(&mut s, 1, json!({"host": "web1", "command": format!("touch {}", flag.display())}));
    assert_eq!(tool_error_code(&r), Some("SP_UPSTREAM"), "{r}");
    let msg = sc(&r)["error"]["message"].as_str().unwrap();
    assert!(msg.contains("refused a terminal") && msg.contains("\"pty\": false"), "{msg}");
    assert_eq!(w.sshd.wait_count("not permitted", 1), 1, "{}", w.sshd.log());
    assert!(!flag.exists(), "the command ran");
    s.finish();
    let mut s = w.session(&w.no_pty_policy(json!({})));
    let r = exec(&mut s, 1, json!({"host": "web1", "command": "echo out; echo err >&2"}));
    assert_eq!((sc(&r)["stdout"].as_str(), sc(&r)["stderr"].as_str()), (Some("out\n"), Some("err\n")), "{r}");
    s.finish();
}

/// The terminal changes no stdin byte: control characters that a default terminal
/// would act on, and a line longer than the kernel's canonical line limit.
#[test]
fn pty_passes_stdin_byte_for_byte() {
    let Some(w) = World::new() else { return };
    let mut s = w.session(&w.simple_policy(json!({})));
    let long = "x".repeat(10_000);
    for (i, input) in [
        String::new(),
        "no newline".to_owned(),
        format!("a\u{4}b\u{16}c\rd\u{3}e\u{1a}f\u{15}g\u{7f}h\u{0}i\u{11}\u{13}\n{long}\nend"),
        format!("{long}\n"),
        "\u{4}".to_owned(),
        "\n\n".to_owned(),
    ]
    .into_iter()
    .enumerate()
    {
        let r2 = exec(&mut s, i as i64 + 1, json!({"host": "web1", "command": "cat", "stdin": input.clone()}));
        assert_eq!(sc(&r2)["stdout"].as_str(), Some(input.as_str()), "case {i}");
        assert_eq!(sc(&r2)["exit_status"], 0, "case {i}: {r2}");
    }
    s.finish();
}

/// Strict, unknown key: refused after the key exchange, before any authentication
/// request (the server never sees a user name).
#[test]
fn unknown_host_key_is_refused_before_authentication() {
    let Some(w) = World::new() else { return };
    let empty = w.known_hosts(&[]);
    let policy = w.policy(json!({"known_hosts": empty, "hosts": {"web1": w.host(w.key_auth(), json!({}))}}));
    let mut s = w.session(&policy);
    let marker = w.dir.path.join("ran");
    let r = exec(&mut s, 1, json!({"host": "web1", "command": format!("touch {}", marker.display())}));
    assert_eq!(tool_error_code(&r), Some("SP_HOST_KEY"), "{r}");
    let msg = sc(&r)["error"]["message"].as_str().unwrap();
    let fp = fingerprint(&w.sshd.dir.path.join("host_ed25519.pub"));
    assert!(msg.contains("not in") && msg.contains(&fp), "{msg}");
    s.finish();
    assert_eq!(w.sshd.wait_count("Connection from 127.0.0.1", 1), 1, "{}", w.sshd.log());
    std::thread::sleep(Duration::from_millis(200));
    assert_eq!(w.sshd.auth_requests(), 0, "an authentication was attempted:\n{}", w.sshd.log());
    assert!(!marker.exists());
    assert_eq!(std::fs::read_to_string(&empty).unwrap(), "", "strict never records");

    // The port rule: an entry without [host]:port is for port 22 only.
    let portless = w.known_hosts(&[format!("127.0.0.1 {}", w.sshd.host_public)]);
    let policy = w.policy(json!({"known_hosts": portless, "hosts": {"web1": w.host(w.key_auth(), json!({}))}}));
    let mut s = w.session(&policy);
    let r = exec(&mut s, 1, json!({"host": "web1", "command": "true"}));
    assert_eq!(tool_error_code(&r), Some("SP_HOST_KEY"), "{r}");
    // A missing known_hosts file: nothing is known.
    let policy = w.policy(json!({"known_hosts": w.dir.join("absent"), "hosts": {"web1": w.host(w.key_auth(), json!({}))}}));
    let mut s2 = w.session(&policy);
    let r = exec(&mut s2, 1, json!({"host": "web1", "command": "true"}));
    assert_eq!(tool_error_code(&r), Some("SP_HOST_KEY"), "{r}");
    s.finish();
    s2.finish();
    std::thread::sleep(Duration::from_millis(200));
    assert_eq!(w.sshd.auth_requests(), 0, "{}", w.sshd.log());
}

#[test]
fn changed_and_revoked_host_keys_are_refused() {
    let Some(w) = World::new() else { return };
    let other = keygen(&w.dir.path, "other_host", "ed25519", "");
    let other_key: String = other.split_whitespace().take(2).collect::<Vec<_>>().join(" ");
    let rsa = keygen(&w.dir.path, "rsa_host", "rsa", "");
    let rsa_key: String = rsa.split_whitespace().take(2).collect::<Vec<_>>().join(" ");
    let cases = [
        ("strict", vec![format!("[127.0.0.1]:{} {other_key}", w.sshd.port)], "CHANGED"),
        ("accept-new", vec![format!("[127.0.0.1]:{} {other_key}", w.sshd.port)], "CHANGED"),
        ("strict", vec![w.sshd.known_hosts_line(), format!("@revoked * {}", w.sshd.host_public)], "revoked"),
        ("accept-new", vec![format!("@revoked 10.9.9.9 {}", w.sshd.host_public)], "revoked"),
        // only another key type is known: refused like a change
        ("accept-new", vec![format!("[127.0.0.1]:{} {rsa_key}", w.sshd.port)], "only knows"),
    ];
    for (i, (mode, lines, want)) in cases.iter().enumerate() {
        let kh = w.dir.file(&format!("kh{i}"), format!("{}\n", lines.join("\n")).as_bytes(), 0o600);
        let before = std::fs::read_to_string(&kh).unwrap();
        let policy = w.policy(json!({"known_hosts": kh, "host_key_policy": mode, "hosts": {"web1": w.host(w.key_auth(), json!({}))}}));
        let mut s = w.session(&policy);
        let r = exec(&mut s, 1, json!({"host": "web1", "command": "true"}));
        assert_eq!(tool_error_code(&r), Some("SP_HOST_KEY"), "case {i}: {r}");
        assert!(sc(&r)["error"]["message"].as_str().unwrap().contains(want), "case {i}: {r}");
        s.finish();
        assert_eq!(std::fs::read_to_string(&kh).unwrap(), before, "case {i}: known_hosts changed");
    }
    assert_eq!(w.sshd.wait_count("Connection from 127.0.0.1", cases.len()), cases.len());
    std::thread::sleep(Duration::from_millis(200));
    assert_eq!(w.sshd.auth_requests(), 0, "{}", w.sshd.log());
}

#[test]
fn hashed_known_hosts_entries_match() {
    let Some(w) = World::new() else { return };
    let other = keygen(&w.dir.path, "other_host", "ed25519", "");
    let other_key: String = other.split_whitespace().take(2).collect::<Vec<_>>().join(" ");
    let kh = w.known_hosts(&["# a comment".into(), format!("other.example {other_key}"), w.sshd.known_hosts_line()]);
    sshd::run(Command::new("ssh-keygen").args(["-q", "-H", "-f"]).arg(&kh));
    let text = std::fs::read_to_string(&kh).unwrap();
    assert!(text.contains("|1|") && !text.contains("127.0.0.1"), "{text}");
    let policy = w.policy(json!({"known_hosts": kh, "hosts": {"web1": w.host(w.key_auth(), json!({}))}}));
    let mut s = w.session(&policy);
    let r = exec(&mut s, 1, json!({"host": "web1", "command": "echo hashed"}));
    assert_eq!(sc(&r)["stdout"], "hashed\n", "{r}");
    s.finish();
}

/// accept-new records the key only once authentication has succeeded.
#[test]
fn accept_new_commits_only_after_authentication() {
    let Some(w) = World::new() else { return };
    let kh = w.dir.path.join("kh-new");
    let stranger = w.dir.path.join("stranger");
    keygen(&w.dir.path, "stranger", "ed25519", "");
    let policy = w.policy(json!({"known_hosts": kh, "host_key_policy": "accept-new",
        "hosts": {"web1": w.host(json!({"key_file": stranger}), json!({}))}}));
    let mut s = w.session(&policy);
    let r = exec(&mut s, 1, json!({"host": "web1", "command": "true"}));
    assert_eq!(tool_error_code(&r), Some("SP_AUTH"), "{r}");
    s.finish();
    assert!(!kh.exists(), "a key was recorded although authentication failed");

    let policy = w.policy(json!({"known_hosts": kh, "host_key_policy": "accept-new", "hosts": {"web1": w.host(w.key_auth(), json!({}))}}));
    let mut s = w.session(&policy);
    let r = exec(&mut s, 1, json!({"host": "web1", "command": "echo first"}));
    assert_eq!(sc(&r)["stdout"], "first\n", "{r}");
    let run = s.finish();
    assert!(run.stderr.contains("accept-new: recorded host key"), "{}", run.stderr);
    let text = std::fs::read_to_string(&kh).unwrap();
    assert_eq!(text, format!("{}\n", w.sshd.known_hosts_line()));
    use std::os::unix::fs::PermissionsExt;
    assert_eq!(std::fs::metadata(&kh).unwrap().permissions().mode() & 0o777, 0o600);
    // once recorded, strict accepts it, and accept-new does not record it twice
    for mode in ["strict", "accept-new"] {
        let policy = w.policy(json!({"known_hosts": kh, "host_key_policy": mode, "hosts": {"web1": w.host(w.key_auth(), json!({}))}}));
        let mut s = w.session(&policy);
        let r = exec(&mut s, 1, json!({"host": "web1", "command": "echo again"}));
        assert_eq!(sc(&r)["stdout"], "again\n", "{mode}: {r}");
        s.finish();
    }
    assert_eq!(std::fs::read_to_string(&kh).unwrap().lines().count(), 1);
}

#[test]
fn wrong_or_unusable_credentials_are_refused() {
    let Some(w) = World::new() else { return };
    let marker = w.dir.path.join("ran");
    let touch = format!("touch {}", marker.display());
    keygen(&w.dir.path, "stranger", "ed25519", "");
    let loose = w.dir.path.join("loose");
    std::fs::copy(&w.sshd.client_key, &loose).unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&loose, std::fs::Permissions::from_mode(0o644)).unwrap();
    let password = format!("pw-{}", random_hex());
    let pw_file = w.dir.file("password", format!("{password}\n").as_bytes(), 0o600);
    let cases = [
        (json!({"key_file": w.dir.path.join("stranger")}), "SP_AUTH", "public key authentication"),
        (json!({"key_file": loose}), "SP_UNAVAILABLE", "too open"),
        (json!({"key_file": w.dir.path.join("missing")}), "SP_UNAVAILABLE", "cannot be read"),
        (json!({"password_file": pw_file}), "SP_AUTH", "password authentication"),
        (json!({"agent": true}), "SP_AUTH", "agent"),
    ];
    for (i, (auth, code, want)) in cases.iter().enumerate() {
        let policy = w.policy(json!({"hosts": {"web1": w.host(auth.clone(), json!({}))}}));
        let mut s = w.session(&policy);
        let r = exec(&mut s, 1, json!({"host": "web1", "command": touch}));
        assert_eq!(tool_error_code(&r), Some(*code), "case {i}: {r}");
        assert!(sc(&r)["error"]["message"].as_str().unwrap().contains(want), "case {i}: {r}");
        let run = s.finish();
        assert!(!String::from_utf8_lossy(&run.stdout).contains(&password) && !run.stderr.contains(&password), "the password leaked");
    }
    assert!(!marker.exists(), "a command ran");
    assert_eq!(w.sshd.logins(), 0);
}

#[test]
fn encrypted_key_needs_its_passphrase() {
    let Some(w) = World::new() else { return };
    let passphrase = format!("pass-{}", &random_hex()[..12]);
    let public = keygen(&w.dir.path, "enc", "ed25519", &passphrase);
    w.sshd.add_authorized(&public);
    let key = w.dir.path.join("enc");
    let good = w.dir.file("pass", format!("{passphrase}\n").as_bytes(), 0o600);
    let bad = w.dir.file("bad-pass", b"not-the-passphrase\n", 0o600);
    let cases = [
        (json!({"key_file": key, "passphrase_file": good}), None),
        (json!({"key_file": key}), Some("could not be decoded")),
        (json!({"key_file": key, "passphrase_file": bad}), Some("could not be decoded")),
    ];
    for (i, (auth, err)) in cases.iter().enumerate() {
        let policy = w.policy(json!({"hosts": {"web1": w.host(auth.clone(), json!({}))}}));
        let mut s = w.session(&policy);
        // the passphrase, echoed by the server, is scrubbed like any secret
        let r = exec(&mut s, 1, json!({"host": "web1", "command": format!("echo {passphrase}")}));
        match err {
            None => {
                assert_eq!(sc(&r)["stdout"], "[REDACTED:ssh:web1]\n", "case {i}: {r}");
            }
            Some(want) => {
                assert_eq!(tool_error_code(&r), Some("SP_AUTH"), "case {i}: {r}");
                assert!(r.to_string().contains(want), "case {i}: {r}");
            }
        }
        let run = s.finish();
        assert!(!String::from_utf8_lossy(&run.stdout).contains(&passphrase), "case {i}: passphrase on stdout");
        assert!(!run.stderr.contains(&passphrase), "case {i}: passphrase on stderr");
    }
}

/// The private key never leaves in a result, even when the server prints it.
#[test]
fn private_key_is_scrubbed_from_output() {
    let Some(w) = World::new() else { return };
    // without a pty, to have both streams
    let mut s = w.session(&w.no_pty_policy(json!({})));
    let key = w.sshd.client_key.display().to_string();
    let r = exec(&mut s, 1, json!({"host": "web1", "command": format!("cat {key}; sed -n 2p {key} >&2")}));
    let body = std::fs::read_to_string(&w.sshd.client_key).unwrap();
    let line2 = body.lines().nth(1).unwrap();
    let text = r.to_string();
    assert!(!text.contains(line2), "a key line leaked: {text}");
    assert!(sc(&r)["stdout"].as_str().unwrap().contains("[REDACTED:ssh:web1]"), "{r}");
    assert!(sc(&r)["stderr"].as_str().unwrap().contains("[REDACTED:ssh:web1]"), "{r}");
    s.finish();
}

#[test]
fn agent_authentication() {
    let Some(w) = World::new() else { return };
    let sock = w.dir.path.join("agent.sock");
    let mut agent = Command::new("ssh-agent").arg("-D").arg("-a").arg(&sock).stdout(std::process::Stdio::null()).spawn().expect("ssh-agent");
    let deadline = Instant::now() + Duration::from_secs(5);
    while !sock.exists() {
        assert!(Instant::now() < deadline, "ssh-agent did not start");
        std::thread::sleep(Duration::from_millis(20));
    }
    sshd::run(Command::new("ssh-add").arg("-q").arg(&w.sshd.client_key).env("SSH_AUTH_SOCK", &sock));
    let policy = w.policy(json!({"hosts": {"web1": w.host(json!({"agent": true}), json!({}))}}));
    let mut s = Session::start(Launch::mcp(&policy, &[]).env("SSH_AUTH_SOCK", &sock.display().to_string()));
    s.ready(VERSION);
    let r = exec(&mut s, 1, json!({"host": "web1", "command": "echo via-agent"}));
    assert_eq!(sc(&r)["stdout"], "via-agent\n", "{r}");
    s.finish();
    let _ = agent.kill();
    let _ = agent.wait();
}

/// Each attempt must run nothing: a marker file on the server proves it, and the server
/// sees no connection at all until an allowed command runs.
#[test]
fn allow_list_bypass_attempts_run_nothing() {
    let Some(w) = World::new() else { return };
    let marker = w.dir.path.join("pwned");
    let m = marker.display().to_string();
    let policy = w.policy(json!({"hosts": {"web1": w.host(w.key_auth(), json!({"commands": [
        "uptime", "echo *", "systemctl status *", "cat /var/log/*.log", "journalctl -u app -n *"
    ]}))}}));
    let mut s = w.session(&policy);
    let attempts = [
        format!("uptime; touch {m}"),
        format!("uptime;touch {m}"),
        format!("uptime && touch {m}"),
        format!("uptime & touch {m}"),
        format!("uptime || touch {m}"),
        format!("uptime | touch {m}"),
        format!("echo `touch {m}`"),
        format!("echo $(touch {m})"),
        format!("uptime\ntouch {m}"),
        format!("uptime\rtouch {m}"),
        format!("echo x > {m}"),
        format!("echo x >> {m}"),
        format!("echo x >{m}"),
        format!("cat < {m}"),
        format!("echo ${{IFS}}touch${{IFS}}{m}"),
        format!("echo $'\\x3b'touch {m}"),
        format!("echo 'a' touch {m}"),
        format!("echo a\\;touch {m}"),
        format!("echo a touch {m}"),
        format!("echo\ttouch {m}"),
        format!("systemctl status --output={m}"),
        format!("cat /var/log/../..{m}.log"),
        format!("journalctl -u app -n --output-fields={m}"),
        format!("touch {m}"),
        format!(" uptime; touch {m}"),
        "echo *".to_string(),
        "echo ~root".to_string(),
    ];
    for (i, cmd) in attempts.iter().enumerate() {
        let r = exec(&mut s, i as i64 + 1, json!({"host": "web1", "command": cmd}));
        assert_eq!(tool_error_code(&r), Some("SP_DENIED"), "{cmd:?}: {r}");
    }
    std::thread::sleep(Duration::from_millis(200));
    assert_eq!(w.sshd.connections(), 0, "a denied command reached the server:\n{}", w.sshd.log());
    assert!(!marker.exists());
    // the listed commands do run
    let r = exec(&mut s, 100, json!({"host": "web1", "command": "echo allowed-arg"}));
    assert_eq!(sc(&r)["stdout"], "allowed-arg\n", "{r}");
    let r = exec(&mut s, 101, json!({"host": "web1", "command": "uptime"}));
    assert_eq!(sc(&r)["exit_status"], 0, "{r}");
    let run = s.finish();
    assert!(!marker.exists());
    assert!(run.summary().contains(&format!("denied={}", attempts.len())), "{}", run.summary());
}

#[test]
fn reconnects_once_after_a_server_restart() {
    let Some(mut w) = World::new() else { return };
    let mut s = w.session(&w.simple_policy(json!({})));
    let r = exec(&mut s, 1, json!({"host": "web1", "command": "echo before"}));
    assert_eq!(sc(&r)["stdout"], "before\n", "{r}");
    w.sshd.restart();
    let r = exec(&mut s, 2, json!({"host": "web1", "command": "echo after"}));
    assert_eq!(sc(&r)["stdout"], "after\n", "the restart was not transparent: {r}");
    let r = exec(&mut s, 3, json!({"host": "web1", "command": "echo again"}));
    assert_eq!(sc(&r)["stdout"], "again\n", "{r}");
    let run = s.finish();
    assert!(run.stderr.contains("reconnecting once"), "{}", run.stderr);
    assert_eq!(w.sshd.logins(), 2, "{}", w.sshd.log());
}

/// A connection that dies while a command runs: the call fails, and the command is not
/// sent again (it may have done its work).
#[test]
fn a_command_that_may_have_started_is_never_rerun() {
    let Some(mut w) = World::new() else { return };
    let marker = w.dir.path.join("runs");
    let mut s = w.session(&w.simple_policy(json!({})));
    let r = exec(&mut s, 1, json!({"host": "web1", "command": "true"}));
    assert_eq!(sc(&r)["exit_status"], 0);
    s.send(&support::process::tool_call(2, "ssh_exec", json!({"host": "web1", "command": format!("echo run >> {}; sleep 5", marker.display())})));
    let deadline = Instant::now() + Duration::from_secs(5);
    while !marker.exists() {
        assert!(Instant::now() < deadline, "the command never started");
        std::thread::sleep(Duration::from_millis(20));
    }
    w.sshd.restart();
    let r = s.read();
    assert_eq!(tool_error_code(&r["result"]), Some("SP_UPSTREAM"), "{r}");
    assert!(r.to_string().contains("not retried"), "{r}");
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(std::fs::read_to_string(&marker).unwrap(), "run\n", "the command ran twice");
    // the next call reconnects
    let r = exec(&mut s, 3, json!({"host": "web1", "command": "echo fine"}));
    assert_eq!(sc(&r)["stdout"], "fine\n", "{r}");
    s.finish();
}

/// The malformed-input corpus's ssh cases, through the built binary, with the SSH hosts
/// of the corpus policy pointed at this sshd: none may open a connection.
#[test]
fn corpus_ssh_cases_never_reach_sshd() {
    let Some(w) = World::new() else { return };
    let cases: Vec<_> = corpus::load().into_iter().filter(|c| c.name.starts_with("ssh_")).collect();
    assert!(cases.len() >= 30, "ssh corpus cases: {}", cases.len());
    let port = w.sshd.port;
    let policy = w.dir.file("corpus-policy.json", corpus::policy_json(port).as_bytes(), 0o600);
    let max_line = corpus::MAX_LINE.to_string();
    for case in &cases {
        let run = Launch::mcp(&policy, &["--max-line-bytes", &max_line]).run(&case.stdin(port));
        if let Err(e) = corpus::check_output(case, &run.stdout) {
            panic!("{}: {e}\nreason: {}\n{}", case.name, case.reason, run.context());
        }
        let want = if matches!(case.expect, Expect::Close(_)) { 3 } else { 0 };
        run.assert_exit(want);
        assert!(run.summary().contains("executions=0"), "{}: {}", case.name, run.summary());
    }
    std::thread::sleep(Duration::from_millis(200));
    assert_eq!(w.sshd.connections(), 0, "a corpus case reached sshd:\n{}", w.sshd.log());
}

/// stdin larger than the SSH window while the command echoes it: stdin is fed and
/// output drained in the same loop, so neither side blocks the other.
#[test]
fn large_stdin_and_output_do_not_deadlock() {
    let Some(w) = World::new() else { return };
    let mut s = w.session(&w.simple_policy(json!({})));
    let input: String = (0..40_000).map(|i| format!("line {i:05} of the input\n")).collect();
    assert!(input.len() > 512 * 1024);
    let r = exec(&mut s, 1, json!({"host": "web1", "command": "cat; cat /dev/null >&2", "stdin": input, "timeout_s": 30}));
    assert_eq!(r["isError"], false, "{}", &r.to_string()[..300.min(r.to_string().len())]);
    assert_eq!(sc(&r)["stdout"].as_str().map(str::len), Some(input.len()));
    assert!(sc(&r)["stdout"] == input.as_str());
    s.finish();
}

/// `sp check` describes the ssh section: where the key lives, never what it holds.
#[test]
fn sp_check_summarises_ssh_hosts() {
    let Some(w) = World::new() else { return };
    let policy = w.policy(json!({"hosts": {
        "web1": w.host(w.key_auth(), json!({"commands": ["uptime"]})),
        "open": w.host(json!({"agent": true}), json!({}))
    }}));
    let run = Launch::new(&["check", "--config", &policy.display().to_string()]).run(b"");
    run.assert_exit(0);
    let out = String::from_utf8_lossy(&run.stdout);
    assert!(out.contains("ssh: 2 host(s)") && out.contains("host key policy strict"), "{out}");
    assert!(out.contains("1 command pattern(s)") && out.contains("ANY command"), "{out}");
    let key = std::fs::read_to_string(&w.sshd.client_key).unwrap();
    assert!(!out.contains(key.lines().nth(1).unwrap()), "{out}");
    // a field-precise error for a broken ssh section
    let bad = w.dir.file(
        "bad.json",
        br#"{"ssh": {"known_hosts": "/kh", "hosts": {"web1": {"address": "h", "user": "u", "auth": {"key_file": "relative"}}}}}"#,
        0o600,
    );
    let run = Launch::new(&["check", "--config", &bad.display().to_string()]).run(b"");
    run.assert_exit(1);
    assert!(run.stderr.contains("ssh.hosts.web1.auth.key_file: must be an absolute path"), "{}", run.stderr);
    assert_eq!(w.sshd.connections(), 0);
}

/// Issue #4: with `_meta.progressToken`, a long command reports `notifications/progress`
/// (token echoed, progress increasing, counts only: never output) before its answer;
/// without a token, nothing but the answer is written.
#[test]
fn progress_notifications_for_a_long_command() {
    let Some(w) = World::new() else { return };
    let mut s = w.session(&w.simple_policy(json!({})));
    let command = "echo secret-looking-output; sleep 2.5; echo done";
    s.send(&json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
        "params": {"name": "ssh_exec", "arguments": {"host": "web1", "command": command}, "_meta": {"progressToken": "tok-1"}}}));
    let mut notes = Vec::new();
    let answer = loop {
        let m = s.read();
        if m.get("id").is_some() {
            break m;
        }
        notes.push(m);
    };
    assert_eq!(answer["id"], 1);
    assert_eq!(sc(&answer["result"])["stdout"], "secret-looking-output\ndone\n", "{answer}");
    assert!(notes.len() >= 2, "want a notification a second during 2.5 s, got {notes:?}");
    let mut last = 0;
    for n in &notes {
        assert_eq!(n["method"], "notifications/progress", "{n}");
        assert_eq!(n["params"]["progressToken"], "tok-1", "{n}");
        let p = n["params"]["progress"].as_u64().expect("numeric progress");
        assert!(p > last, "progress must increase: {notes:?}");
        last = p;
        assert!(!n.to_string().contains("secret-looking-output"), "output leaked into a notification: {n}");
    }
    // The same command without a token: the next message is the answer itself.
    s.send(&json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
        "params": {"name": "ssh_exec", "arguments": {"host": "web1", "command": "sleep 1.5; echo quiet"}}}));
    let m = s.read();
    assert_eq!(m["id"], 2, "a notification without a progressToken: {m}");
    s.finish().protocol();
}

/// `hide_address`: what the agent sees of a failure names the inventory host only; the
/// address and port stay in the operator's log.
#[test]
fn hidden_address_stays_out_of_error_messages() {
    let Some(w) = World::new() else { return };
    let dead = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let mut hidden = w.host(w.key_auth(), json!({"hide_address": true}));
    hidden["port"] = json!(dead);
    let mut shown = hidden.clone();
    shown["hide_address"] = json!(false);
    let mut s = w.session(&w.policy(json!({"connect_timeout_s": 5, "hosts": {"hidden": hidden, "shown": shown}})));
    let r = exec(&mut s, 1, json!({"host": "hidden", "command": "true"}));
    assert_eq!(tool_error_code(&r), Some("SP_UNAVAILABLE"), "{r}");
    let text = r.to_string();
    assert!(!text.contains("127.0.0.1") && !text.contains(&dead.to_string()), "address leaked: {text}");
    let r = exec(&mut s, 2, json!({"host": "shown", "command": "true"}));
    assert!(r.to_string().contains(&format!("127.0.0.1:{dead}")), "{r}");
    s.finish().protocol();
}
