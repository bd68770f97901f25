//! `make bench`, SSH part (issues #4 and #34), printed, never asserted. Three figures, all
//! against one private OpenSSH `sshd` on 127.0.0.1 (`tests/support/sshd.rs`, with the
//! SFTP subsystem `internal-sftp`), logging in with the same key and known host:
//!
//! 1. N sequential `true` commands, three ways (issue #4), as wall times and ratios:
//!    - `sp mcp`: one process, N `ssh_exec` calls (start, initialize and the one
//!      connection included);
//!    - `ssh` with connection sharing (`ControlMaster=auto`, `ControlPersist`): N
//!      processes, the first one sets up the master;
//!    - plain `ssh`: N processes, N connections and logins.
//!
//!    The three run interleaved (one command of each in turn) so that load from
//!    elsewhere falls on all alike. Every command also pays the remote shell's start
//!    (`$SHELL -c true`); it is timed locally and printed.
//! 2. File transfer throughput (issue #34): `ssh_get` and `ssh_put` of a 64 MiB file
//!    through `sp mcp` (one session, connected before the first timed call, journal on)
//!    beside `scp` of the same file to and from the same `sshd` (OpenSSH's `scp` speaks
//!    SFTP too), in MiB/s, the median of R runs, interleaved. A text file travels as
//!    UTF-8 text both ways; a binary file as base64, and `ssh_get`'s base64 must fit in
//!    `ssh.max_output_bytes`, whose ceiling is 64 MiB: a 64 MiB binary file (85.3 MiB as
//!    base64) cannot come through `ssh_get` at all. The bench shows that refusal and
//!    times the largest binary file that can: 48 MiB (50331648 bytes, exactly 67108864
//!    as base64). `ssh_put`'s request line (89.5 MiB for 64 MiB as base64) needs
//!    `--max-line-bytes`: the session runs with 128 MiB. Without `scp` that column is
//!    skipped with a message.
//! 3. What a recording adds per call (issue #34): `ssh_exec` of `echo x` on two kept
//!    sessions, one with `ssh.recordings` (a private 0700 directory, the default 16 MiB
//!    reserved per recording), one without, N calls each, interleaved: median and p99
//!    per call and their differences.
//!
//! Timed per call: from the request line's first byte written to the answer's last byte
//! read (the client's JSON parsing and checks come after).
//!
//! Without `/usr/sbin/sshd` or `ssh` the whole bench is skipped with a message and exit
//! status 0. Environment: `SP_BENCH_SSH_CALLS` (N, default 100), `SP_BENCH_SSH_RUNS`
//! (R, default 3), `SP_BENCH_SSH_MIB` (the file size, default and at most 64).
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

use std::io::BufRead;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use base64::Engine as _;
use serde_json::{json, Value};
use sha2::{Digest, Sha256};
use support::Session;

const MIB: u64 = 1 << 20;
/// The ceiling of both `ssh.max_output_bytes` and `files.max_bytes` (sp-policy(5)).
const CEILING: u64 = 64 * MIB;

/// A positive count from the environment, or `default`.
fn env_count(name: &str, default: usize) -> usize {
    std::env::var(name).ok().and_then(|v| v.parse().ok()).filter(|&n| n > 0).unwrap_or(default)
}

fn ms(d: Duration) -> String {
    format!("{:.0} ms", d.as_secs_f64() * 1e3)
}

/// One `sp mcp` process, driven like an MCP client (its errors on this terminal).
struct Sp {
    session: Session,
    id: u64,
}

impl Sp {
    fn start(sp: &str, policy: &Path, extra: &[&str]) -> Sp {
        let mut cmd = support::sp_command(sp, policy);
        cmd.args(extra).stderr(Stdio::inherit());
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

    /// One `tools/call`, timed from the first byte written to the answer's last byte
    /// read; the answer parsed after that.
    fn timed(&mut self, tool: &str, arguments: Value) -> (Duration, Value) {
        self.id += 1;
        let line = support::tool_call(self.id, tool, arguments);
        let mut answer = Vec::new();
        let t = Instant::now();
        self.session.send(&line);
        let _ = self.session.stdout.read_until(b'\n', &mut answer);
        let d = t.elapsed();
        let v: Value = serde_json::from_slice(&answer).unwrap_or_else(|e| panic!("{tool}: the answer ({} bytes) is not JSON: {e}", answer.len()));
        (d, v)
    }

    /// `ssh_exec` of `command` on a kept session: the call's time; its exit status must be 0.
    fn exec_timed(&mut self, command: &str) -> Duration {
        let (d, v) = self.timed("ssh_exec", json!({"host": "bench", "command": command}));
        assert_eq!(v["result"]["structuredContent"]["exit_status"], 0, "ssh_exec failed: {v}");
        d
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
/// as `SHELL -c true`, with `SSH_CLIENT` set, so bash reads `~/.bashrc` (`home` is the
/// fixture's empty HOME, which its sshd sets). Timed locally, spawned the same way, to
/// separate the remote shell's start from transport costs.
fn shell_floor(user: &str, home: &Path, n: usize) -> Option<Duration> {
    let entry = String::from_utf8(Command::new("getent").args(["passwd", user]).output().ok()?.stdout).ok()?;
    let fields: Vec<&str> = entry.trim().split(':').collect();
    let shell = fields.get(6)?;
    let t = Instant::now();
    for _ in 0..n {
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
    let n = env_count("SP_BENCH_SSH_CALLS", 100);
    let runs = env_count("SP_BENCH_SSH_RUNS", 3);
    let size = (env_count("SP_BENCH_SSH_MIB", 64) as u64).min(64) * MIB;
    let server = sshd::Sshd::start_with("Subsystem sftp internal-sftp\n");
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
    let mut client = Sp::start(&sp, &policy, &[]);
    t_sp += t.elapsed();
    for _ in 0..n {
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
    let floor = shell_floor(&server.user, &dir.join("home"), n);

    let per = |d: Duration| d.as_secs_f64() * 1e3 / n as f64;
    println!("sp ssh bench ({sp}): {n} sequential `true` on a loopback sshd, wall time");
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
    println!("  logins seen by sshd: {logins} (sp 1 + control master 1 + plain {n})");

    println!();
    transfers(&sp, &server, &known_hosts, (&base, &shared), runs, size);
    println!();
    recording_cost(&sp, &server, &known_hosts, n);
}

/// `len` bytes that do not compress (xorshift64), for the binary file.
fn noise(len: u64) -> Vec<u8> {
    let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
    let mut out = Vec::with_capacity(len as usize + 8);
    while (out.len() as u64) < len {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        out.extend_from_slice(&x.to_le_bytes());
    }
    out.truncate(len as usize);
    out
}

/// `len` bytes of printable ASCII in 64-byte lines, for the text file (UTF-8 both ways,
/// nothing for JSON to escape).
fn text(len: u64) -> Vec<u8> {
    let mut out: Vec<u8> = noise(len).into_iter().map(|b| b'a' + b % 26).collect();
    for i in (63..out.len()).step_by(64) {
        out[i] = b'\n';
    }
    out
}

fn sha_hex(bytes: &[u8]) -> String {
    Sha256::digest(bytes).iter().map(|b| format!("{b:02x}")).collect()
}

fn mib_s(bytes: u64, d: Duration) -> f64 {
    bytes as f64 / MIB as f64 / d.as_secs_f64()
}

fn size_name(bytes: u64) -> String {
    if bytes.is_multiple_of(MIB) { format!("{} MiB", bytes / MIB) } else { format!("{bytes} bytes") }
}

/// `scp` with the same key and known host as sp's policy; `from` and `to` as scp takes
/// them (`user@127.0.0.1:PATH` for the server's side); `extra`: the connection sharing
/// options, or none (a login of its own).
fn scp(server: &sshd::Sshd, known_hosts: &Path, extra: &[String], from: &str, to: &str) -> Duration {
    let mut cmd = Command::new("scp");
    cmd.args(extra)
        .args(["-q", "-F", "/dev/null", "-o", "BatchMode=yes", "-o", "IdentitiesOnly=yes", "-o", "StrictHostKeyChecking=yes"])
        .arg("-o")
        .arg(format!("UserKnownHostsFile={}", known_hosts.display()))
        .arg("-i")
        .arg(&server.client_key)
        .args(["-P", &server.port.to_string(), from, to])
        .stdin(Stdio::null());
    let t = Instant::now();
    let status = cmd.status().expect("run scp");
    let d = t.elapsed();
    assert!(status.success(), "scp {from} {to} failed: {status}");
    d
}

/// The file in `path` must hold exactly `want` (its SHA-256).
fn check_file(path: &Path, want: &str) {
    let got = std::fs::read(path).unwrap_or_else(|e| panic!("read {}: {e}", path.display()));
    assert_eq!(sha_hex(&got), want, "{} is not what was sent", path.display());
}

/// Part 2: `ssh_get` and `ssh_put` of `size` bytes through `sp mcp` beside `scp`, MiB/s.
/// `ssh`: the base arguments and the connection sharing options of part 1.
fn transfers(sp: &str, server: &sshd::Sshd, known_hosts: &Path, ssh: (&[String], &[String]), runs: usize, size: u64) {
    // Patterns are matched against the server's realpath: the canonical directory.
    let root = std::fs::canonicalize(&server.dir.path).expect("canonical fixture directory");
    let (remote, local) = (root.join("files"), root.join("local"));
    std::fs::create_dir_all(&remote).unwrap();
    std::fs::create_dir_all(&local).unwrap();
    // The largest binary file whose base64 fits in ssh.max_output_bytes at its ceiling.
    let get_max = (CEILING / 4 * 3).min(size);
    let binary = noise(size);
    let text = text(size);
    let (sha_binary, sha_text, sha_get) = (sha_hex(&binary), sha_hex(&text), sha_hex(&binary[..get_max as usize]));
    let at = |name: &str| remote.join(name).display().to_string();
    std::fs::write(remote.join("binary.bin"), &binary).unwrap();
    std::fs::write(remote.join("binary-get.bin"), &binary[..get_max as usize]).unwrap();
    std::fs::write(remote.join("text.txt"), &text).unwrap();
    std::fs::write(remote.join("small.txt"), "warm-up\n").unwrap();
    std::fs::write(local.join("binary.bin"), &binary).unwrap();
    let pattern = format!("{}/*", remote.display());
    let policy = root.join("transfer_policy.json");
    std::fs::write(
        &policy,
        json!({"ssh": {"known_hosts": known_hosts, "max_output_bytes": CEILING, "hosts": {"bench": {
            "address": "127.0.0.1", "port": server.port, "user": server.user,
            "auth": {"key_file": server.client_key},
            "files": {"read": [pattern], "write": [pattern], "max_bytes": CEILING}}}},
            "audit": {"path": root.join("transfer_audit.jsonl")}})
        .to_string(),
    )
    .unwrap();
    // 128 MiB lines: a 64 MiB put as base64 is an 89.5 MiB request line.
    let mut client = Sp::start(sp, &policy, &["--max-line-bytes", "134217728"]);
    // Connect (and open SFTP once) before anything is timed.
    let (_, v) = client.timed("ssh_get", json!({"host": "bench", "path": at("small.txt")}));
    assert_eq!(v["result"]["isError"], false, "warm-up ssh_get failed: {v}");

    // A binary file whose base64 exceeds the ceiling cannot come through ssh_get at all.
    let encoded = size.div_ceil(3) * 4;
    let refusal = (encoded > CEILING).then(|| {
        let (_, v) = client.timed("ssh_get", json!({"host": "bench", "path": at("binary.bin")}));
        let r = &v["result"];
        assert_eq!(r["isError"], true, "a {size}-byte binary file came through ssh_get: {}", r["structuredContent"]["bytes"]);
        r["structuredContent"]["error"]["message"].as_str().unwrap_or_default().to_owned()
    });

    let have_scp = Command::new("scp").stdin(Stdio::null()).stdout(Stdio::null()).stderr(Stdio::null()).status().is_ok();
    let (base, shared) = ssh;
    if have_scp {
        // The master whose connection the "kept connection" scp rows share, like sp's.
        ssh_true(base, shared);
    }
    let user_at = |path: &Path| format!("{}@127.0.0.1:{}", server.user, path.display());
    let mut samples: Vec<Vec<Duration>> = vec![Vec::new(); 8];
    // sp's own `duration_ms` of each call: the SFTP part (open, realpath, read or write).
    let mut sftp_ms: Vec<Vec<u64>> = vec![Vec::new(); 8];
    let ms_of = |v: &Value| v["result"]["structuredContent"]["duration_ms"].as_u64().unwrap_or(0);
    let b64 = base64::engine::general_purpose::STANDARD;
    let text_str = String::from_utf8(text).expect("ASCII");
    for _ in 0..runs {
        // Interleaved: one of each per run.
        let (d, v) = client.timed("ssh_get", json!({"host": "bench", "path": at("text.txt")}));
        let o = &v["result"]["structuredContent"];
        assert_eq!(
            (o["encoding"].as_str(), o["bytes"].as_u64(), o["sha256"].as_str()),
            (Some("utf-8"), Some(size), Some(sha_text.as_str())),
            "ssh_get text: {}",
            o["error"]
        );
        samples[0].push(d);
        sftp_ms[0].push(ms_of(&v));
        let (d, v) = client.timed("ssh_get", json!({"host": "bench", "path": at("binary-get.bin")}));
        let o = &v["result"]["structuredContent"];
        assert_eq!(
            (o["encoding"].as_str(), o["bytes"].as_u64(), o["sha256"].as_str()),
            (Some("base64"), Some(get_max), Some(sha_get.as_str())),
            "ssh_get binary: {}",
            o["error"]
        );
        samples[1].push(d);
        sftp_ms[1].push(ms_of(&v));
        if have_scp {
            let got = local.join("scp-got.bin");
            let _ = std::fs::remove_file(&got);
            samples[2].push(scp(server, known_hosts, shared, &user_at(&remote.join("binary.bin")), &got.display().to_string()));
            check_file(&got, &sha_binary);
            let _ = std::fs::remove_file(&got);
            samples[3].push(scp(server, known_hosts, &[], &user_at(&remote.join("binary.bin")), &got.display().to_string()));
            check_file(&got, &sha_binary);
        }
        let (d, v) = client.timed("ssh_put", json!({"host": "bench", "path": at("put.txt"), "content": text_str, "overwrite": true}));
        assert_eq!(v["result"]["isError"], false, "ssh_put text: {}", v["result"]["structuredContent"]["error"]);
        check_file(&remote.join("put.txt"), &sha_text);
        samples[4].push(d);
        sftp_ms[4].push(ms_of(&v));
        let content = b64.encode(&binary);
        let (d, v) = client.timed("ssh_put", json!({"host": "bench", "path": at("put.bin"), "content": content, "encoding": "base64", "overwrite": true}));
        assert_eq!(v["result"]["isError"], false, "ssh_put binary: {}", v["result"]["structuredContent"]["error"]);
        check_file(&remote.join("put.bin"), &sha_binary);
        samples[5].push(d);
        sftp_ms[5].push(ms_of(&v));
        if have_scp {
            let from = local.join("binary.bin").display().to_string();
            samples[6].push(scp(server, known_hosts, shared, &from, &user_at(&remote.join("scp-put.bin"))));
            check_file(&remote.join("scp-put.bin"), &sha_binary);
            samples[7].push(scp(server, known_hosts, &[], &from, &user_at(&remote.join("scp-put-2.bin"))));
            check_file(&remote.join("scp-put-2.bin"), &sha_binary);
        }
    }
    client.finish();
    if have_scp {
        let _ = Command::new("ssh").args(shared).args(["-O", "exit"]).args(base).stderr(Stdio::null()).status();
    }

    println!("sp ssh transfers ({sp}): median of {runs} runs, interleaved; one sp mcp session (connected first, journal on), SFTP both");
    println!("                                                          size    median MiB/s   best MiB/s   median time   of which SFTP");
    let rows = [
        ("sp ssh_get, text file (content as UTF-8)", size),
        ("sp ssh_get, binary file (content as base64)", get_max),
        ("scp from the server, kept connection", size),
        ("scp from the server, its own login", size),
        ("sp ssh_put, text file (content as UTF-8)", size),
        ("sp ssh_put, binary file (content as base64)", size),
        ("scp to the server, kept connection", size),
        ("scp to the server, its own login", size),
    ];
    let mut medians = [None; 8];
    for (i, (((name, bytes), s), mut sftp)) in rows.iter().zip(samples).zip(sftp_ms).enumerate() {
        let Some(st) = support::stat(s) else {
            println!("  {name:<48} {:>9}   skipped: no scp (apt-get install openssh-client)", size_name(*bytes));
            continue;
        };
        medians[i] = Some(mib_s(*bytes, st.median));
        sftp.sort_unstable();
        let sftp = sftp.get(sftp.len() / 2).map_or(String::new(), |m| format!("{m:>10} ms"));
        let line = format!(
            "  {name:<48} {:>9} {:>12.1} {:>12.1} {:>10.0} ms {sftp}",
            size_name(*bytes),
            mib_s(*bytes, st.median),
            mib_s(*bytes, st.min),
            st.median.as_secs_f64() * 1e3
        );
        println!("{}", line.trim_end());
    }
    println!(
        "  (binary files: incompressible bytes; text: ASCII; scp's binary file is the {} one; sp's session and the kept scp connection were open before the first timed call;\n   of which SFTP: the median of sp's own duration_ms, the SFTP open, realpath and read or write, the rest is JSON, base64, redaction and the pipes)",
        size_name(size)
    );
    for (what, sp_row, scp_row) in
        [("get, text / scp kept", 0, 2), ("get, binary / scp kept", 1, 2), ("put, text / scp kept", 4, 6), ("put, binary / scp kept", 5, 6)]
    {
        if let (Some(a), Some(b)) = (medians[sp_row], medians[scp_row]) {
            println!("  MiB/s, sp {what:<24} {:.2}x", a / b);
        }
    }
    match refusal {
        Some(message) => println!(
            "  a {} binary file cannot pass through ssh_get: {encoded} bytes as base64, above ssh.max_output_bytes's ceiling ({CEILING}); sp answers: {message}\n  the largest binary file ssh_get can return is {} ({get_max} bytes, {} as base64): timed above",
            size_name(size),
            size_name(get_max),
            get_max.div_ceil(3) * 4
        ),
        None => println!("  ({} as base64 fits in ssh.max_output_bytes: no refusal to show at this size)", size_name(size)),
    }
}

/// Part 3: `ssh_exec` of `echo x` with and without `ssh.recordings`, `n` calls each on
/// two kept sessions, interleaved (the order alternating): per-call median and p99.
fn recording_cost(sp: &str, server: &sshd::Sshd, known_hosts: &Path, n: usize) {
    let dir = &server.dir.path;
    let recordings: PathBuf = dir.join("recordings");
    std::fs::create_dir_all(&recordings).unwrap();
    std::fs::set_permissions(&recordings, std::fs::Permissions::from_mode(0o700)).unwrap();
    const RESERVED: u64 = 16 * MIB;
    let host = json!({"address": "127.0.0.1", "port": server.port, "user": server.user, "auth": {"key_file": server.client_key}});
    let start = |name: &str, ssh: Value| {
        let policy = dir.join(format!("{name}_policy.json"));
        std::fs::write(&policy, json!({"ssh": ssh, "audit": {"path": dir.join(format!("{name}_audit.jsonl"))}}).to_string()).unwrap();
        Sp::start(sp, &policy, &[])
    };
    let mut off = start("rec_off", json!({"known_hosts": known_hosts, "hosts": {"bench": host}}));
    let mut on = start("rec_on", json!({"known_hosts": known_hosts, "hosts": {"bench": host}, "recordings": {"dir": recordings, "max_bytes": RESERVED}}));
    const WARM: usize = 5;
    for _ in 0..WARM {
        off.exec_timed("echo x");
        on.exec_timed("echo x");
    }
    let (mut t_off, mut t_on) = (Vec::with_capacity(n), Vec::with_capacity(n));
    for i in 0..n {
        if i % 2 == 0 {
            t_off.push(off.exec_timed("echo x"));
            t_on.push(on.exec_timed("echo x"));
        } else {
            t_on.push(on.exec_timed("echo x"));
            t_off.push(off.exec_timed("echo x"));
        }
    }
    off.finish();
    on.finish();
    let written = std::fs::read_dir(&recordings).map(|d| d.flatten().filter(|e| e.file_name().to_string_lossy().ends_with(".cast")).count()).unwrap_or(0);
    assert_eq!(written, n + WARM, "one recording per call with ssh.recordings");
    let (Some(a), Some(b)) = (support::stat(t_off), support::stat(t_on)) else { return };
    let us = |d: Duration| d.as_secs_f64() * 1e6;
    println!("sp ssh_exec with and without a recording ({sp}): {n} calls of `echo x` each, two kept sessions, interleaved, journal on both");
    println!("                                                           median        p99");
    println!("  ssh.recordings off                                   {:>8.0} µs {:>8.0} µs", us(a.median), us(a.p99));
    println!("  ssh.recordings on ({} reserved, fdatasync'ed)     {:>8.0} µs {:>8.0} µs", size_name(RESERVED), us(b.median), us(b.p99));
    println!("  difference: what a recording adds per call           {:>+8.0} µs {:>+8.0} µs", us(b.median) - us(a.median), us(b.p99) - us(a.p99));
    println!("  ({written} recordings written, {n} timed)");
}
