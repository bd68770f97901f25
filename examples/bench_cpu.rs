//! sp's own CPU time per call (`make bench`, issue #24): the sum of the `sp` process's
//! threads' run time (`/proc/PID/task/*/schedstat`, nanoseconds; the process's
//! `utime + stime` from `/proc/PID/stat`, which also counts threads that ended, is the
//! cross-check) over many sequential calls in one session, for:
//!
//! - a denied `http_request` (the policy refuses it: parse, policy, answer);
//! - a proxied `http_request` (GET, an 11-byte JSON answer) to a keep-alive HTTP/1.1
//!   server in this process on loopback, journal off and on (fdatasync'ed, as deployed),
//!   and on with the journal in /dev/shm (tmpfs: the same rows, locks and checks, but an
//!   fdatasync with nothing to wait for), which parts the journal's own work from what
//!   the sync's wait costs the call;
//! - `ssh_exec` of `true` on the session's kept SSH connection (a private loopback
//!   `sshd`, `tests/support/sshd.rs`; skipped without one);
//! - a proxied upstream MCP call: `m_act` of `tests/support/upstreams/misbehave.py ok`
//!   (a Python stdio upstream that answers with its arguments; its own CPU is its
//!   process's, not counted), journal off.
//!
//! - a rate-limited `http_request` (issue 35: allowed by the policy, refused by a
//!   `limits` rule; journal off), against the denial plus one locked read-modify-write
//!   of a state-file-sized file done by this process (open, `flock`, read, write,
//!   truncate, close: what the limit adds).
//!
//! sp, this process and its HTTP server run on one CPU (taskset), so every hand-over is
//! a task switch on that CPU rather than a wake-up of an idle one (which costs a
//! variable 40-300 µs on a 2-vCPU VM, see bench/README.md). Printed, never asserted;
//! each issue #24 target with its value and met / NOT met.
#![allow(
    clippy::disallowed_methods,
    reason = "tests and benchmarks start sp, sshd and clients and read their environment; the fence in clippy.toml is for src/"
)]
// A benchmark prints its figures on stdout.
#![allow(clippy::print_stdout, clippy::disallowed_macros)]

mod support;
#[path = "../tests/support/sshd.rs"]
mod sshd;

use std::io::{BufRead, BufReader, Write};
use std::net::{TcpListener, TcpStream};
use std::path::Path;
use std::process::{Command, Stdio};

use serde_json::json;
use support::{tool_call, write_private, Session};

/// `sp`'s CPU time so far, in ns: (live threads' schedstat sum, utime + stime).
fn cpu_ns(pid: u32) -> (u64, u64) {
    let mut sched = 0;
    if let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) {
        for t in tasks.flatten() {
            let s = std::fs::read_to_string(t.path().join("schedstat")).unwrap_or_default();
            sched += s.split_whitespace().next().and_then(|v| v.parse::<u64>().ok()).unwrap_or(0);
        }
    }
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    let fields: Vec<&str> = stat.rsplit_once(')').map(|(_, r)| r.split_whitespace().collect()).unwrap_or_default();
    let ticks: u64 = fields.get(11..13).map_or(0, |f| f.iter().filter_map(|v| v.parse::<u64>().ok()).sum());
    // USER_HZ is 100 on Linux.
    (sched, ticks * 10_000_000)
}

/// Task switches of `sp`'s live threads so far: (voluntary, involuntary).
fn switches(pid: u32) -> (u64, u64) {
    let (mut v, mut n) = (0, 0);
    if let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) {
        for t in tasks.flatten() {
            for line in std::fs::read_to_string(t.path().join("status")).unwrap_or_default().lines() {
                let num = || line.split_whitespace().nth(1).and_then(|x| x.parse::<u64>().ok()).unwrap_or(0);
                if line.starts_with("voluntary_ctxt_switches") {
                    v += num();
                } else if line.starts_with("nonvoluntary_ctxt_switches") {
                    n += num();
                }
            }
        }
    }
    (v, n)
}

/// This thread's CPU time so far, in ns.
fn own_cpu_ns() -> u64 {
    let s = std::fs::read_to_string("/proc/thread-self/schedstat").unwrap_or_default();
    s.split_whitespace().next().and_then(|v| v.parse().ok()).unwrap_or(0)
}

/// A keep-alive HTTP/1.1 server on loopback: one read per request, one write per answer.
fn keep_alive_server() -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
    let port = listener.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            std::thread::spawn(move || serve(stream));
        }
    });
    port
}

fn serve(stream: TcpStream) {
    let _ = stream.set_nodelay(true);
    let mut reader = BufReader::new(stream.try_clone().unwrap());
    let mut out = stream;
    let mut line = String::new();
    loop {
        line.clear();
        match reader.read_line(&mut line) {
            Ok(0) | Err(_) => return,
            Ok(_) if line == "\r\n" => {
                let answer = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 11\r\n\r\n{\"ok\":true}";
                if out.write_all(answer).is_err() {
                    return;
                }
            }
            Ok(_) => {}
        }
    }
}

/// Pins this thread (and what it starts from now on) to `cpu` with taskset(1).
fn pin_self(cpu: &str) -> bool {
    Command::new("taskset")
        .args(["-pc", cpu, &std::process::id().to_string()])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// One measured kind of call: CPU per call of `sp` in µs (schedstat, stat), or why not.
struct Figure {
    name: String,
    per_call: Result<(f64, f64, f64, f64), String>,
    n: usize,
}

/// `n` calls of `line(i)` after `warm` unmeasured ones, each answer checked by `ok`.
/// (µs per call from schedstat, from utime + stime, voluntary and involuntary task
/// switches per call).
fn measure(sp: &[String], policy: &Path, n: usize, line: &dyn Fn(usize) -> String, ok: &dyn Fn(&str) -> bool) -> Result<(f64, f64, f64, f64), String> {
    let mut cmd = Command::new(&sp[0]);
    cmd.args(&sp[1..]).args(["mcp", "-q", "--config"]).arg(policy).stderr(Stdio::null());
    let mut s = Session::spawn(cmd).map_err(|e| format!("cannot start sp: {e}"))?;
    s.initialize();
    let warm = 50.min(n);
    for i in 0..warm {
        let a = s.round_trip(&line(i + 1));
        if !ok(&a) {
            return Err(format!("unexpected answer: {}", &a[..a.len().min(300)]));
        }
    }
    let pid = s.child.id();
    let (s0, t0) = cpu_ns(pid);
    let (v0, n0) = switches(pid);
    for i in warm..warm + n {
        let a = s.round_trip(&line(i + 1));
        if !ok(&a) {
            return Err(format!("unexpected answer: {}", &a[..a.len().min(300)]));
        }
    }
    let (s1, t1) = cpu_ns(pid);
    let (v1, n1) = switches(pid);
    s.finish();
    let per = |a: u64, b: u64| (b - a) as f64 / n as f64;
    Ok((per(s0, s1) / 1e3, per(t0, t1) / 1e3, per(v0, v1), per(n0, n1)))
}

/// The CPU time of one `write` + `fdatasync` of a row-sized line in `dir` (the journal's
/// file system), median of 5 runs of 200.
fn sync_cpu_us(dir: &Path) -> f64 {
    let path = dir.join("sync-probe");
    let mut f = std::fs::OpenOptions::new().create(true).append(true).open(&path).expect("sync probe");
    let row = [b'x'; 300];
    let mut runs: Vec<f64> = (0..5)
        .map(|_| {
            let c = own_cpu_ns();
            for _ in 0..200 {
                f.write_all(&row).unwrap();
                f.sync_data().unwrap();
            }
            (own_cpu_ns() - c) as f64 / 200.0 / 1e3
        })
        .collect();
    let _ = std::fs::remove_file(&path);
    runs.sort_by(f64::total_cmp);
    runs[2]
}

/// The CPU time of one locked read-modify-write of a small file in `dir`, as the rate
/// limits' state file is used per counted call (open, `flock`, read, write at 0,
/// truncate, close), median of 5 runs of 500.
fn rmw_cpu_us(dir: &Path) -> f64 {
    use std::io::Read;
    use std::os::unix::fs::FileExt;
    let path = dir.join("rmw-probe");
    let line = format!("{{\"v\":1,\"windows\":{{\"{}\":[1796300000123,1,604800]}}}}\n", "x".repeat(60));
    std::fs::write(&path, &line).unwrap();
    let mut runs: Vec<f64> = (0..5)
        .map(|_| {
            let c = own_cpu_ns();
            for _ in 0..500 {
                let f = std::fs::OpenOptions::new().read(true).write(true).open(&path).unwrap();
                rustix::fs::flock(&f, rustix::fs::FlockOperation::LockExclusive).unwrap();
                let mut text = String::new();
                (&f).read_to_string(&mut text).unwrap();
                f.write_all_at(text.as_bytes(), 0).unwrap();
                f.set_len(text.len() as u64).unwrap();
            }
            (own_cpu_ns() - c) as f64 / 500.0 / 1e3
        })
        .collect();
    let _ = std::fs::remove_file(&path);
    runs.sort_by(f64::total_cmp);
    runs[2]
}

/// The CPU per request of a direct ureq keep-alive client (what sp uses inside) on this
/// thread, to the same server: the part of a proxied call that is the request itself.
fn direct_ureq_us(port: u16, n: usize) -> f64 {
    let agent = ureq::Agent::new_with_defaults();
    let url = format!("http://127.0.0.1:{port}/x");
    let get = || {
        let mut resp = agent.get(&url).call().expect("direct ureq request");
        let _ = resp.body_mut().read_to_vec().expect("direct ureq body");
    };
    for _ in 0..50 {
        get();
    }
    let c = own_cpu_ns();
    for _ in 0..n {
        get();
    }
    (own_cpu_ns() - c) as f64 / n as f64 / 1e3
}

/// The proxied upstream call: its policy (one stdio upstream, `misbehave.py ok`, its
/// argument pinned), or why it cannot run here.
fn upstream_policy(dir: &Path) -> Result<std::path::PathBuf, String> {
    let python = ["/usr/bin/python3", "/usr/local/bin/python3"].into_iter().find(|p| Path::new(p).exists()).ok_or("skipped: no python3")?;
    let fixture = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/support/upstreams/misbehave.py");
    let p = dir.join("policy-upstream.json");
    let text = json!({
        "upstreams": {"m": {"command": [python, fixture, "ok"], "tools": {"allow": ["*"]}, "arguments": {"act": {"x": ["ok-*"]}},
            "sandbox": {"read": [env!("CARGO_MANIFEST_DIR")]}}},
        "audit": {"path": null}
    });
    write_private(&p, &text.to_string());
    Ok(p)
}

fn main() {
    let sp = std::env::args().nth(1).unwrap_or_else(|| "target/release/sp".into());
    let cpu = std::env::var("SP_BENCH_CPU").unwrap_or_else(|_| "1".into());
    let pinned = pin_self(&cpu);
    let sp_cmd: Vec<String> = if pinned { vec!["taskset".into(), "-c".into(), cpu.clone(), sp.clone()] } else { vec![sp.clone()] };
    let scale = std::env::var("SP_BENCH_CALLS").ok().and_then(|v| v.parse::<usize>().ok()).unwrap_or(1000);
    // SP_BENCH_ONLY=text: only the figures whose name holds it (to profile one, e.g. `perf
    // record` of this process and its children with SP_BENCH_ONLY=/dev/shm).
    let only = std::env::var("SP_BENCH_ONLY").ok();
    let want = |name: &str| only.as_deref().is_none_or(|o| name.contains(o));

    let port = keep_alive_server();
    let dir = support::scratch_dir("sp-bench-cpu");
    let host = format!("127.0.0.1:{port}");
    let token = dir.join("token");
    write_private(&token, "bench-token-0123456789\n");
    // The journal's path, or none (`"path": null`).
    let policy = |name: &str, journal: Option<std::path::PathBuf>| {
        let p = dir.join(name);
        let text = json!({
            "credentials": {"b": {"source": {"file": token}, "inject": {"bearer": {}}, "hosts": [host]}},
            "http": {"allow": [{"hosts": [host], "methods": ["GET"]}]},
            "audit": {"path": journal}
        });
        write_private(&p, &text.to_string());
        p
    };
    let (off, on) = (policy("policy-off.json", None), policy("policy-on.json", Some(dir.join("audit.jsonl"))));
    // The journal in memory: its rows, locks and checks as on disk, but an fdatasync that
    // returns at once (no I/O to wait for, so no sleep): what the journal's own work costs.
    let shm = Path::new("/dev/shm").is_dir().then(|| {
        let d = Path::new("/dev/shm").join(format!("sp-bench-cpu-{}", std::process::id()));
        std::fs::create_dir_all(&d).unwrap();
        let p = policy("policy-shm.json", Some(d.join("audit.jsonl")));
        (d, p)
    });
    let url = format!("http://{host}/x");
    let get = |i: usize| tool_call(i as u64, "http_request", json!({"method": "GET", "url": url}));
    let post = |i: usize| tool_call(i as u64, "http_request", json!({"method": "POST", "url": url}));
    let proxied = |a: &str| a.contains("\"status\":200");
    let denied = |a: &str| a.contains("SP_DENIED");

    let figure = |name: &str, n: usize, run: &dyn Fn() -> Result<(f64, f64, f64, f64), String>| Figure {
        name: name.into(),
        per_call: if want(name) { run() } else { Err("skipped (SP_BENCH_ONLY)".into()) },
        n,
    };
    // Issue 35: GET allowed, then refused by a limit of 1 call a week (the first warm
    // call uses it; the state file is this run's own).
    let limited_policy = {
        let p = dir.join("policy-limited.json");
        let text = json!({
            "http": {"allow": [{"hosts": [host], "methods": ["GET"]}]},
            "audit": {"path": null},
            "limits": [{"tool": "http_request", "max": 1, "per_s": 604800}],
            "limits_state": dir.join("limits.json")
        });
        write_private(&p, &text.to_string());
        p
    };
    let limited = |a: &str| a.contains("SP_RATE_LIMITED") || a.contains("\"status\":200");
    let mut figures = vec![
        figure("denied http_request", 20 * scale, &|| measure(&sp_cmd, &off, 20 * scale, &post, &denied)),
        figure("rate-limited http_request", 20 * scale, &|| measure(&sp_cmd, &limited_policy, 20 * scale, &get, &limited)),
        figure("proxied http_request, journal off", 5 * scale, &|| measure(&sp_cmd, &off, 5 * scale, &get, &proxied)),
        figure("proxied http_request, journal on", scale, &|| measure(&sp_cmd, &on, scale, &get, &proxied)),
        figure("proxied http_request, journal in /dev/shm", 5 * scale, &|| match &shm {
            Some((_, p)) => measure(&sp_cmd, p, 5 * scale, &get, &proxied),
            None => Err("skipped: no /dev/shm".into()),
        }),
    ];
    if let Some((d, _)) = &shm {
        let _ = std::fs::remove_dir_all(d);
    }
    let sync = sync_cpu_us(&dir);
    let rmw = rmw_cpu_us(&dir);
    let direct = direct_ureq_us(port, 5 * scale);

    // ssh_exec on the session's kept connection.
    let ssh_calls = (scale / 5).max(20);
    figures.push(figure("ssh_exec `true`, kept session, journal off", ssh_calls, &|| {
        if !sshd::available() {
            return Err(format!("skipped: {} is not installed", sshd::SSHD));
        }
        let server = sshd::Sshd::start();
        let known = dir.join("known_hosts");
        std::fs::write(&known, format!("{}\n", server.known_hosts_line())).unwrap();
        let p = dir.join("policy-ssh.json");
        let text = json!({"ssh": {"known_hosts": known, "hosts": {"bench": {
            "address": "127.0.0.1", "port": server.port, "user": server.user, "auth": {"key_file": server.client_key}}}},
            "audit": {"path": null}});
        write_private(&p, &text.to_string());
        let line = |i: usize| tool_call(i as u64, "ssh_exec", json!({"host": "bench", "command": "true"}));
        measure(&sp_cmd, &p, ssh_calls, &line, &|a: &str| a.contains("\"exit_status\":0"))
    }));
    let upstream_line = |i: usize| tool_call(i as u64, "m_act", json!({"x": "ok-1"}));
    figures.push(figure("proxied upstream tools/call, journal off", scale, &|| {
        upstream_policy(&dir).and_then(|p| measure(&sp_cmd, &p, scale, &upstream_line, &|a: &str| a.contains("ok-1") && !a.contains("isError\":true")))
    }));
    let _ = std::fs::remove_dir_all(&dir);

    println!("sp's own CPU per call (examples/bench_cpu.rs; sum of sp's threads' run time, /proc/PID/task/*/schedstat)");
    println!("sp: {sp}{}", if pinned { format!("; sp, client and HTTP server on CPU {cpu}") } else { "; not pinned (no taskset)".into() });
    for f in &figures {
        match &f.per_call {
            Ok((sched, stat, vol, invol)) => {
                println!("  {:44} {sched:7.1} µs   (utime+stime {stat:.1} µs; task switches per call {vol:.2} + {invol:.2} preempted; {} calls)", f.name, f.n)
            }
            Err(why) => println!("  {:44} {why}", f.name),
        }
    }
    println!("  {:44} {sync:7.1} µs   (this process, write + fdatasync of 300 bytes, journal's file system)", "one durable sync");
    println!("  {:44} {direct:7.1} µs   (this process's thread, ureq Agent, same server)", "direct ureq keep-alive request (no sp)");
    println!("  {:44} {rmw:7.1} µs   (this process: open, flock, read, write, truncate, close)", "one locked read-modify-write");
    let get_fig = |name: &str| figures.iter().find(|f| f.name.starts_with(name)).and_then(|f| f.per_call.as_ref().ok()).map(|p| p.0);
    let (denied, proxied_off, proxied_on, proxied_shm, upstream) = (
        get_fig("denied http_request"),
        get_fig("proxied http_request, journal off"),
        get_fig("proxied http_request, journal on"),
        get_fig("proxied http_request, journal in /dev/shm"),
        get_fig("proxied upstream"),
    );
    println!();
    println!("Targets (issue 24)");
    let verdict = |ok: bool| if ok { "met" } else { "NOT met" };
    if let (Some(d), Some(p)) = (denied, proxied_off) {
        println!("  proxied / denied CPU                     {:.2}x ({p:.1} vs {d:.1} µs)   target <= 3x   {}", p / d, verdict(p <= 3.0 * d));
        println!("  proxied CPU                              {p:.1} µs   target <= 40 µs   {}", verdict(p <= 40.0));
        println!(
            "    denied + direct ureq request           {:.1} µs = {:.2}x the denial (the request itself, done by ureq without sp)",
            d + direct,
            (d + direct) / d
        );
    }
    if let (Some(d), Some(l)) = (denied, get_fig("rate-limited http_request")) {
        println!(
            "  rate-limited CPU vs denial + one RMW     {l:.1} µs vs {:.1} µs ({d:.1} + {rmw:.1})   target <= (issue 35)   {}",
            d + rmw,
            verdict(l <= d + rmw)
        );
    }
    if let (Some(d), Some(u)) = (denied, upstream) {
        println!("  proxied upstream call / denied CPU       {:.2}x ({u:.1} vs {d:.1} µs)   (no target; issue 22 compares wall time: bench_upstream)", u / d);
    }
    if let (Some(off), Some(on)) = (proxied_off, proxied_on) {
        let limit = 1.5 * off + sync;
        println!("  journal on CPU vs 1.5 x off + one sync   {on:.1} µs vs {limit:.1} µs (1.5 x {off:.1} + {sync:.1})   {}", verdict(on <= limit));
        if let Some(shm) = proxied_shm {
            println!(
                "    without the sync's wait (/dev/shm)     {shm:.1} µs = {:.2}x off (the journal's own work: rows, locks, checks)   the 1.5x part   {}",
                shm / off,
                verdict(shm <= 1.5 * off)
            );
            println!("    what the sync costs the call           {:.1} µs (on - /dev/shm) against {sync:.1} µs for the sync alone", on - shm);
        }
    }
}
