//! `make bench`, side by side (issue 12): sp next to a floor and the official SDKs.
//! Printed, never asserted; one run; ratios first; the machine named.
//!
//! 1. For each server: cold start to the `initialize` answer (median of N spawns), then
//!    in one session `ping`, `tools/list` and a refused `tools/call` round trips (median
//!    and p99), and peak RSS (VmHWM). Servers: sp (glibc build, journal on and off), sp
//!    static (musl) when built, the floor (examples/floor.rs, built here with plain rustc,
//!    static when the musl target is installed), a minimal server with the official Python
//!    SDK (bench/fastmcp_server.py) and one with the TypeScript SDK (bench/ts_server.mjs).
//!    A server whose runtime is missing is skipped with a message.
//! 2. `http_request` through sp versus direct keep-alive HTTP/1.1 clients (raw std, and
//!    ureq, the library sp uses) to the same loopback keep-alive server (in this file:
//!    tests/support/http_server.rs answers `Connection: close`).
//! 3. Rejection throughput: sessions/s of "start + one malformed line" (a malformed line
//!    ends the session), and denied calls/s pipelined in one session (the default,
//!    without `--close-on-refusal`).
//!
//! This is a new example rather than more of examples/bench.rs: bench.rs measures sp alone
//! (and its redactor, which another change is reworking); this one needs a server table,
//! other processes and their runtimes.
//!
//! Usage: `cargo run --release --example bench_compare -- [target/release/sp] [--static PATH]`
//! Environment: SP_BENCH_SPAWNS (cold starts per native server, default 50; the SDK
//! servers get a fifth of it, at least 5), SP_BENCH_ROUNDS (round trips per kind, default
//! 1000; SDK servers a fifth).
#![allow(
    clippy::disallowed_methods,
    reason = "tests and benchmarks start sp, sshd and clients and read their environment; the fence in clippy.toml is for src/"
)]
#![allow(clippy::print_stdout, clippy::disallowed_macros)]

mod support;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::json;
use support::{stat, write_private, Session, Stat, INIT};

const ROOT: &str = env!("CARGO_MANIFEST_DIR");

// ---------------------------------------------------------------------------------------
// Processes

/// The server `cmd` (program and arguments), started in the source tree.
fn start(cmd: &[String]) -> std::io::Result<Session> {
    let mut c = Command::new(&cmd[0]);
    c.args(&cmd[1..]).current_dir(ROOT).stderr(Stdio::null());
    Session::spawn(c)
}

/// This thread (the process's main thread) pinned to the last CPU with taskset(1)
/// while it lives; `cpu` is that CPU when pinning worked, `all` the CPU list it had
/// before (asked before pinning: once pinned, `available_parallelism` says 1, and
/// restoring "0-0" from it had left the rest of the run, the HTTP part included, on CPU 0).
struct Pin {
    cpu: Option<String>,
    all: String,
}

impl Pin {
    fn here() -> Pin {
        let pid = std::process::id().to_string();
        let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
        // "pid N's current affinity list: 0,1"
        let listed = Command::new("taskset").args(["-pc", &pid]).stderr(Stdio::null()).output();
        let all = listed.ok().and_then(|o| String::from_utf8_lossy(&o.stdout).rsplit(':').next().map(|l| l.trim().to_owned()));
        let all = all.filter(|l| !l.is_empty()).unwrap_or_else(|| format!("0-{}", cpus - 1));
        let cpu = (cpus - 1).to_string();
        let ok = Command::new("taskset").args(["-pc", &cpu, &pid]).stdout(Stdio::null()).stderr(Stdio::null()).status();
        Pin { cpu: ok.is_ok_and(|s| s.success()).then_some(cpu), all }
    }
}

impl Drop for Pin {
    fn drop(&mut self) {
        if self.cpu.is_some() {
            let _ = Command::new("taskset").args(["-pc", &self.all, &std::process::id().to_string()]).stdout(Stdio::null()).status();
        }
    }
}

// ---------------------------------------------------------------------------------------
// Figures

fn fmt_d(d: Duration) -> String {
    let us = d.as_secs_f64() * 1e6;
    if us >= 10_000.0 {
        format!("{:.0} ms", us / 1000.0)
    } else if us >= 1000.0 {
        format!("{:.2} ms", us / 1000.0)
    } else {
        format!("{us:.0} µs")
    }
}

fn cell(s: Option<Stat>) -> String {
    s.map_or("—".into(), |s| format!("{} / {}", fmt_d(s.median), fmt_d(s.p99)))
}

fn ratio(a: Option<Stat>, b: Option<Stat>) -> String {
    match (a, b) {
        (Some(a), Some(b)) if !b.median.is_zero() => format!("{:.2}x", a.median.as_secs_f64() / b.median.as_secs_f64()),
        _ => "—".into(),
    }
}

struct Row {
    name: String,
    cold: Option<Stat>,
    ping: Option<Stat>,
    list: Option<Stat>,
    refused: Option<Stat>,
    rss_kib: Option<u64>,
}

struct Server {
    name: String,
    cmd: Vec<String>,
    /// tools/list and a refused tools/call are measured (the floor answers neither).
    tools: bool,
    /// The refused call for this server: sp's is a policy denial, the SDKs' an unknown tool.
    refused_call: String,
    /// What a refused answer contains.
    refused_mark: &'static str,
    /// A tool tools/list must name (sp: `http_request`), else the build is not this one.
    expect_tool: Option<&'static str>,
    spawns: usize,
    rounds: usize,
}

fn measure(s: &Server) -> Result<Row, String> {
    let mut cold = Vec::new();
    // Three spawns first, not counted: the page cache and the dynamic loader's cache.
    for i in 0..s.spawns + 3 {
        let t = Instant::now();
        let mut p = start(&s.cmd).map_err(|e| format!("cannot start {}: {e}", s.cmd[0]))?;
        let a = p.round_trip(INIT);
        if i >= 3 {
            cold.push(t.elapsed());
        }
        if !a.contains("protocolVersion") {
            p.finish();
            return Err(format!("no initialize answer (got {:?})", a.chars().take(120).collect::<String>()));
        }
        p.finish();
    }
    // Round trips on one CPU, the client's (this thread) and the server's: whether a
    // scheduler puts them on one CPU or two decides between a few and a few dozen
    // microseconds on a machine whose idle vCPUs sleep, and it decides anew for every
    // process; pinned, every server gets the same placement. (Cold starts are not
    // pinned.)
    let pinned = Pin::here();
    let mut p = match &pinned.cpu {
        Some(cpu) => start(&[["taskset", "-c", cpu].map(String::from).as_slice(), s.cmd.as_slice()].concat()),
        None => start(&s.cmd),
    }
    .map_err(|e| e.to_string())?;
    p.initialize();
    if let Some(tool) = s.expect_tool {
        let a = p.round_trip(r#"{"jsonrpc":"2.0","id":999999,"method":"tools/list"}"#);
        if !a.contains(&format!("\"name\":\"{tool}\"")) {
            p.finish();
            return Err(format!("its tools/list has no {tool} (an older build? rebuild it)"));
        }
    }
    // The kinds take turns (ping, tools/list, refused call, ping, ...), so a machine that
    // drifts during the run (frequency, a neighbour, a vCPU descheduled) weighs on each
    // kind alike and the ratios compare like with like.
    let call = s.refused_call.clone();
    type Kind<'a> = (Box<dyn Fn(usize) -> String + 'a>, &'a str, Vec<Duration>);
    let mut kinds: Vec<Kind> = vec![(Box::new(|i| format!(r#"{{"jsonrpc":"2.0","id":{i},"method":"ping"}}"#)), "\"result\"", Vec::new())];
    if s.tools {
        kinds.push((Box::new(|i| format!(r#"{{"jsonrpc":"2.0","id":{i},"method":"tools/list"}}"#)), "\"tools\"", Vec::new()));
        kinds.push((Box::new(move |i| call.replacen("\"id\":1,", &format!("\"id\":{i},"), 1)), s.refused_mark, Vec::new()));
    }
    for i in 0..s.rounds {
        for (line, mark, times) in &mut kinds {
            let line = line(i + 1);
            let t = Instant::now();
            let a = p.round_trip(&line);
            times.push(t.elapsed());
            if !a.contains(*mark) {
                p.finish();
                return Err(format!("unexpected answer to {line}: {a}"));
            }
        }
    }
    let mut times = kinds.into_iter().map(|(_, _, t)| t);
    let ping = times.next().unwrap_or_default();
    let list = times.next().unwrap_or_default();
    let refused = times.next().unwrap_or_default();
    let rss_kib = p.peak_rss_kib();
    p.finish();
    Ok(Row { name: s.name.clone(), cold: stat(cold), ping: stat(ping), list: stat(list), refused: stat(refused), rss_kib })
}

// ---------------------------------------------------------------------------------------
// The machine

fn machine() -> String {
    let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    let model =
        cpuinfo.lines().find(|l| l.starts_with("model name")).and_then(|l| l.split_once(':')).map_or("unknown CPU".to_owned(), |(_, m)| m.trim().to_owned());
    let cores = cpuinfo.lines().filter(|l| l.starts_with("processor")).count();
    let uname = |flag: &str| Command::new("uname").arg(flag).output().map(|o| String::from_utf8_lossy(&o.stdout).trim().to_owned()).unwrap_or_default();
    let mem = std::fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|m| m.lines().next().and_then(|l| l.split_whitespace().nth(1)).and_then(|k| k.parse::<u64>().ok()))
        .map_or(String::new(), |k| format!(", {:.1} GiB RAM", k as f64 / 1048576.0));
    format!("{model}, {cores} cores{mem}, {} {} {}", uname("-s"), uname("-r"), uname("-m"))
}

// ---------------------------------------------------------------------------------------
// The floor: examples/floor.rs through plain rustc (no cargo, no crate).

/// How a floor is linked: `Static` (musl when installed), or dynamic against glibc, bare
/// or also loading the system's libcrypto.so (what sp's glibc build loads for libssh2):
/// the least any program linked like sp's glibc build can take to start.
#[derive(Clone, Copy, PartialEq)]
enum FloorLink {
    Static,
    Glibc,
    GlibcLibcrypto,
}

fn build_floor(out_dir: &Path, link: FloorLink) -> Result<(PathBuf, &'static str), String> {
    let rustc = std::env::var("RUSTC").unwrap_or_else(|_| "rustc".into());
    let src = Path::new(ROOT).join("examples/floor.rs");
    let musl = "x86_64-unknown-linux-musl";
    let musl_ok = link == FloorLink::Static
        && cfg!(target_arch = "x86_64")
        && Command::new(&rustc)
            .args(["--print", "target-libdir", "--target", musl])
            .output()
            .ok()
            .map(|o| PathBuf::from(String::from_utf8_lossy(&o.stdout).trim()))
            .is_some_and(|d| std::fs::read_dir(d).is_ok_and(|mut r| r.any(|e| e.is_ok_and(|e| e.file_name().to_string_lossy().starts_with("libstd-")))));
    let name = match link {
        FloorLink::Static => "floor",
        FloorLink::Glibc => "floor-glibc",
        FloorLink::GlibcLibcrypto => "floor-libcrypto",
    };
    let out = out_dir.join(name);
    let mut cmd = Command::new(&rustc);
    cmd.args(["--edition", "2021", "-C", "opt-level=3", "-C", "panic=abort", "--crate-name", "floor"]);
    if musl_ok {
        cmd.args(["--target", musl]);
    }
    if link == FloorLink::GlibcLibcrypto {
        // Loaded although unused, as the dynamic loader loads it for sp.
        cmd.args(["-C", "link-arg=-Wl,--no-as-needed", "-C", "link-arg=-lcrypto"]);
    }
    let status = cmd.arg(&src).arg("-o").arg(&out).stderr(Stdio::null()).status().map_err(|e| format!("{rustc}: {e}"))?;
    if !status.success() {
        return Err(format!("{rustc} failed on {}", src.display()));
    }
    Ok((
        out,
        match link {
            FloorLink::Static if musl_ok => "static, musl",
            FloorLink::Static => "dynamic, glibc: the musl target is not installed (rustup target add x86_64-unknown-linux-musl)",
            FloorLink::Glibc => "dynamic, glibc",
            FloorLink::GlibcLibcrypto => "dynamic, glibc, and the system libcrypto.so loaded (unused)",
        },
    ))
}

// ---------------------------------------------------------------------------------------
// A keep-alive HTTP/1.1 server on loopback (std, a thread per connection).

/// The port, and the number of connections accepted so far.
fn keep_alive_server() -> (u16, Arc<AtomicUsize>) {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind 127.0.0.1:0");
    let port = listener.local_addr().unwrap().port();
    let accepted = Arc::new(AtomicUsize::new(0));
    let counter = accepted.clone();
    std::thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            counter.fetch_add(1, Ordering::SeqCst);
            std::thread::spawn(move || {
                let _ = stream.set_nodelay(true);
                let mut out = stream.try_clone().unwrap();
                let mut r = BufReader::new(stream);
                let body = br#"{"ok":true,"items":[1,2,3]}"#;
                let head = format!("HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: keep-alive\r\n\r\n", body.len());
                let mut reply = head.into_bytes();
                reply.extend_from_slice(body);
                loop {
                    let mut len = 0usize;
                    let mut line = String::new();
                    let mut first = true;
                    loop {
                        line.clear();
                        match r.read_line(&mut line) {
                            Ok(0) | Err(_) => return,
                            Ok(_) => {}
                        }
                        if line == "\r\n" || line == "\n" {
                            if first {
                                continue;
                            }
                            break;
                        }
                        first = false;
                        if let Some((n, v)) = line.split_once(':')
                            && n.eq_ignore_ascii_case("content-length")
                        {
                            len = v.trim().parse().unwrap_or(0);
                        }
                    }
                    let mut sink = vec![0; len];
                    if r.read_exact(&mut sink).is_err() || out.write_all(&reply).is_err() {
                        return;
                    }
                }
            });
        }
    });
    (port, accepted)
}

/// A raw keep-alive client: one connection, request, headers, Content-Length body.
fn raw_client(port: u16, rounds: usize) -> Vec<Duration> {
    let s = TcpStream::connect(("127.0.0.1", port)).unwrap();
    s.set_nodelay(true).unwrap();
    let mut w = s.try_clone().unwrap();
    let mut r = BufReader::new(s);
    let req = format!("GET /x HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nAccept: */*\r\n\r\n");
    let mut v = Vec::with_capacity(rounds);
    let mut line = String::new();
    for _ in 0..rounds {
        let t = Instant::now();
        w.write_all(req.as_bytes()).unwrap();
        let mut len = 0usize;
        loop {
            line.clear();
            r.read_line(&mut line).unwrap();
            if line == "\r\n" {
                break;
            }
            if let Some((n, val)) = line.split_once(':')
                && n.eq_ignore_ascii_case("content-length")
            {
                len = val.trim().parse().unwrap();
            }
        }
        let mut body = vec![0; len];
        r.read_exact(&mut body).unwrap();
        v.push(t.elapsed());
    }
    v
}

/// ureq (the library inside sp), one Agent, so its pool keeps the connection.
fn ureq_client(port: u16, rounds: usize) -> Vec<Duration> {
    let agent = ureq::Agent::new_with_defaults();
    let url = format!("http://127.0.0.1:{port}/x");
    let mut v = Vec::with_capacity(rounds);
    for _ in 0..rounds {
        let t = Instant::now();
        let mut resp = agent.get(&url).call().unwrap();
        let _ = resp.body_mut().read_to_vec().unwrap();
        v.push(t.elapsed());
    }
    v
}

// ---------------------------------------------------------------------------------------
// Policies

/// A policy allowing GET to 127.0.0.1:`port`; `journal` None turns the journal off.
fn policy(dir: &Path, name: &str, port: u16, journal: Option<&Path>) -> PathBuf {
    let host = format!("127.0.0.1:{port}");
    let path = dir.join(name);
    let audit = match journal {
        Some(j) => json!({"path": j}),
        None => json!({"path": null}),
    };
    write_private(&path, &json!({"http": {"allow": [{"hosts": [host], "methods": ["GET"]}]}, "audit": audit}).to_string());
    path
}

fn denied_call(port: u16) -> String {
    json!({"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"http_request","arguments":{"method":"DELETE","url":format!("http://127.0.0.1:{port}/x")}}}).to_string()
}

/// sessions/s of spawn + one malformed line + the -32700 answer + exit.
fn malformed_sessions(sp_cmd: &[String], n: usize) -> (f64, usize) {
    let t = Instant::now();
    let mut answered = 0;
    for _ in 0..n {
        let Ok(mut s) = start(sp_cmd) else { continue };
        let a = s.round_trip("{this is not json");
        answered += usize::from(a.contains("-32700"));
        let _ = s.child.wait();
    }
    (n as f64 / t.elapsed().as_secs_f64(), answered)
}

/// Denied calls pipelined in one session: a writer thread sends `n`, this reads `n`.
fn pipelined_denied(sp_cmd: &[String], port: u16, n: usize) -> (f64, usize) {
    let mut s = start(sp_cmd).unwrap();
    s.initialize();
    let call = denied_call(port);
    let mut stdin = s.stdin.take().unwrap();
    let t = Instant::now();
    let writer = std::thread::spawn(move || {
        let mut buf = Vec::new();
        for i in 0..n {
            buf.extend_from_slice(call.replacen("\"id\":1,", &format!("\"id\":{},", i + 10), 1).as_bytes());
            buf.push(b'\n');
            if buf.len() > 64 << 10 {
                stdin.write_all(&buf).unwrap();
                buf.clear();
            }
        }
        stdin.write_all(&buf).unwrap();
        stdin
    });
    let mut denied = 0;
    let mut line = String::new();
    for _ in 0..n {
        line.clear();
        if s.stdout.read_line(&mut line).unwrap_or(0) == 0 {
            break;
        }
        denied += usize::from(line.contains("SP_DENIED"));
    }
    let rate = n as f64 / t.elapsed().as_secs_f64();
    drop(writer.join().unwrap());
    let _ = s.child.wait();
    (rate, denied)
}

/// Whether the server `cmd` starts lists `tool` in its tools/list answer.
fn names_tool(cmd: &[String], tool: &str) -> bool {
    let Ok(mut s) = start(cmd) else { return false };
    s.initialize();
    let a = s.round_trip(r#"{"jsonrpc":"2.0","id":1,"method":"tools/list"}"#);
    s.finish();
    a.contains(&format!("\"name\":\"{tool}\""))
}

fn env_usize(name: &str, default: usize) -> usize {
    std::env::var(name).ok().and_then(|v| v.parse().ok()).filter(|&n| n > 0).unwrap_or(default)
}

fn main() {
    let mut sp = format!("{ROOT}/target/release/sp");
    let mut static_sp: Option<String> = None;
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        match a.as_str() {
            "--static" => static_sp = args.next(),
            _ => sp = a,
        }
    }
    let shown = sp.clone();
    let sp = std::fs::canonicalize(&sp).map_or(sp, |p| p.display().to_string());
    let static_candidates: Vec<String> = static_sp
        .into_iter()
        .chain([format!("{ROOT}/target/x86_64-unknown-linux-musl/release/sp"), "/tmp/sallyport-build/x86_64-unknown-linux-musl/release/sp".into()])
        .filter(|p| Path::new(p).is_file())
        .collect();
    let spawns = env_usize("SP_BENCH_SPAWNS", 50);
    let rounds = env_usize("SP_BENCH_ROUNDS", 1000);
    let (slow_spawns, slow_rounds) = ((spawns / 5).max(5), (rounds / 5).max(20));

    let dir = Path::new(ROOT).join(format!("target/bench-compare-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o700)).unwrap();
    let (port, accepted) = keep_alive_server();
    let journal = dir.join("audit.jsonl");
    let policy_off = policy(&dir, "policy-off.json", port, None);
    let policy_on = policy(&dir, "policy-on.json", port, Some(&journal));
    let sp_cmd = |bin: &str, p: &Path| vec![bin.to_owned(), "mcp".into(), "-q".into(), "--config".into(), p.display().to_string()];
    let denied = denied_call(port);
    let unknown_tool = r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"no_such_tool","arguments":{}}}"#.to_owned();

    let mut notes = Vec::new();
    let mut servers = Vec::new();
    let sp_server = |name: &str, bin: &str, p: &Path| Server {
        name: name.into(),
        cmd: sp_cmd(bin, p),
        tools: true,
        refused_call: denied.clone(),
        refused_mark: "SP_DENIED",
        expect_tool: Some("http_request"),
        spawns,
        rounds,
    };
    servers.push(sp_server("sp glibc, journal off", &sp, &policy_off));
    servers.push(sp_server("sp glibc, journal on", &sp, &policy_on));
    // The first static binary that is this version of sp (an older build names other tools).
    let mut static_sp = None;
    for st in &static_candidates {
        if names_tool(&sp_cmd(st, &policy_off), "http_request") {
            static_sp = Some(st.clone());
            break;
        }
        notes.push(format!("static: {st} is an older build (its tools/list has no http_request); not measured"));
    }
    match &static_sp {
        Some(st) => {
            servers.push(sp_server("sp static, journal off", st, &policy_off));
            servers.push(sp_server("sp static, journal on", st, &policy_on));
            notes.push(format!("static: {st}"));
        }
        None => notes.push("static: not built (make static)".into()),
    }
    for (link, name) in
        [(FloorLink::Static, "floor (canned lines)"), (FloorLink::Glibc, "floor, glibc"), (FloorLink::GlibcLibcrypto, "floor, glibc + libcrypto.so")]
    {
        match build_floor(&dir, link) {
            Ok((bin, how)) => {
                notes.push(format!("{name}: examples/floor.rs, {how}"));
                servers.push(Server {
                    name: name.into(),
                    cmd: vec![bin.display().to_string()],
                    tools: false,
                    refused_call: String::new(),
                    refused_mark: "",
                    expect_tool: None,
                    spawns,
                    rounds,
                });
            }
            Err(e) => notes.push(format!("{name}: skipped ({e})")),
        }
    }
    let python = Path::new(ROOT).join(".venv/bin/python");
    if python.is_file() {
        servers.push(Server {
            name: "Python SDK (MCPServer)".into(),
            cmd: vec![python.display().to_string(), "bench/fastmcp_server.py".into()],
            tools: true,
            refused_call: unknown_tool.clone(),
            refused_mark: "Unknown tool",
            expect_tool: Some("echo"),
            spawns: slow_spawns,
            rounds: slow_rounds,
        });
    } else {
        notes.push("Python SDK: skipped, no .venv (make interop creates it)".into());
    }
    let node_ok = Command::new("node").arg("--version").stdout(Stdio::null()).status().is_ok_and(|s| s.success());
    let ts_pkg = Path::new(ROOT).join("tests/interop/node_modules/@modelcontextprotocol/server");
    if !node_ok {
        notes.push("TypeScript SDK: skipped, node is not installed".into());
    } else if !ts_pkg.is_dir() {
        notes.push("TypeScript SDK: skipped, tests/interop/node_modules has no @modelcontextprotocol/server (make interop)".into());
    } else {
        servers.push(Server {
            name: "TypeScript SDK (McpServer)".into(),
            cmd: vec!["node".into(), "bench/ts_server.mjs".into()],
            tools: true,
            refused_call: unknown_tool,
            refused_mark: "not found",
            expect_tool: Some("echo"),
            spawns: slow_spawns,
            rounds: slow_rounds,
        });
    }

    let mut rows = Vec::new();
    for s in &servers {
        eprintln!("bench_compare: measuring {}", s.name);
        match measure(s) {
            Ok(r) => rows.push(r),
            Err(e) => notes.push(format!("{}: skipped, {e}", s.name)),
        }
    }

    // 2. http_request through sp vs direct keep-alive clients.
    let http_rounds = rounds / 2;
    let ok_call = |i: usize| {
        json!({"jsonrpc":"2.0","id":i,"method":"tools/call","params":{"name":"http_request","arguments":{"method":"GET","url":format!("http://127.0.0.1:{port}/x")}}}).to_string()
    };
    let through_sp = |p: &Path| -> Option<Stat> {
        let mut s = start(&sp_cmd(&sp, p)).ok()?;
        s.initialize();
        let mut v = Vec::new();
        for i in 0..http_rounds + 20 {
            let line = ok_call(i + 1);
            let t = Instant::now();
            let a = s.round_trip(&line);
            if i >= 20 {
                v.push(t.elapsed());
            }
            if !a.contains("\"status\":200") {
                eprintln!("bench_compare: http_request failed: {a}");
                return None;
            }
        }
        s.finish();
        stat(v)
    };
    let conns = || accepted.load(Ordering::SeqCst);
    let c0 = conns();
    let http_off = through_sp(&policy_off);
    let c1 = conns();
    let http_on = through_sp(&policy_on);
    let c2 = conns();
    let raw = stat(raw_client(port, http_rounds + 20).split_off(20));
    let c3 = conns();
    let ureq_d = stat(ureq_client(port, http_rounds + 20).split_off(20));
    let opened = [c1 - c0, c2 - c1, c3 - c2, conns() - c3];

    // 3. Rejection throughput.
    let mal_n = (spawns * 4).max(20);
    let (mal_off, mal_off_ok) = malformed_sessions(&sp_cmd(&sp, &policy_off), mal_n);
    let (mal_on, mal_on_ok) = malformed_sessions(&sp_cmd(&sp, &policy_on), mal_n);
    let pipe_n = rounds * 20;
    let (pipe_off, pipe_off_ok) = pipelined_denied(&sp_cmd(&sp, &policy_off), port, pipe_n);
    let (pipe_on, pipe_on_ok) = pipelined_denied(&sp_cmd(&sp, &policy_on), port, pipe_n / 10);
    let journal_rows = std::fs::read_to_string(&journal).map(|j| j.lines().count()).unwrap_or(0);
    let _ = std::fs::remove_dir_all(&dir);

    // ---- Output: the machine, ratios, the table, targets, HTTP, rejections.
    let get = |name: &str| rows.iter().find(|r| r.name == name);
    let sp_off = get("sp glibc, journal off");
    let sp_on = get("sp glibc, journal on");
    let floor = get("floor (canned lines)");
    let floor_crypto = get("floor, glibc + libcrypto.so");
    let py = get("Python SDK (MCPServer)");
    let ts = get("TypeScript SDK (McpServer)");
    let st_off = get("sp static, journal off");
    let st_on = get("sp static, journal on");
    println!("sp side by side (examples/bench_compare.rs), one run");
    println!("machine: {}", machine());
    println!("sp: {shown}");
    for n in &notes {
        println!("{n}");
    }
    println!();
    println!("Ratios (medians; sp = glibc build, journal off unless named)");
    let r = |label: &str, a: Option<Stat>, b: Option<Stat>| println!("  {label:46} {}", ratio(a, b));
    r("cold start: sp / floor", sp_off.and_then(|r| r.cold), floor.and_then(|r| r.cold));
    r("cold start: sp static / floor", st_off.and_then(|r| r.cold), floor.and_then(|r| r.cold));
    r("cold start: sp / floor glibc + libcrypto.so", sp_off.and_then(|r| r.cold), floor_crypto.and_then(|r| r.cold));
    r("cold start: sp journal on / off", sp_on.and_then(|r| r.cold), sp_off.and_then(|r| r.cold));
    r("cold start: TypeScript SDK / sp", ts.and_then(|r| r.cold), sp_off.and_then(|r| r.cold));
    r("cold start: Python SDK / sp", py.and_then(|r| r.cold), sp_off.and_then(|r| r.cold));
    r("ping: sp / floor", sp_off.and_then(|r| r.ping), floor.and_then(|r| r.ping));
    r("ping: TypeScript SDK / sp", ts.and_then(|r| r.ping), sp_off.and_then(|r| r.ping));
    r("ping: Python SDK / sp", py.and_then(|r| r.ping), sp_off.and_then(|r| r.ping));
    r("refused call / ping, sp journal off", sp_off.and_then(|r| r.refused), sp_off.and_then(|r| r.ping));
    r("refused call / ping, sp journal on", sp_on.and_then(|r| r.refused), sp_on.and_then(|r| r.ping));
    r("refused call / ping, sp static journal off", st_off.and_then(|r| r.refused), st_off.and_then(|r| r.ping));
    r("refused call / ping, sp static journal on", st_on.and_then(|r| r.refused), st_on.and_then(|r| r.ping));
    r("http_request via sp / direct raw keep-alive", http_off, raw);
    r("http_request via sp / direct ureq keep-alive", http_off, ureq_d);
    println!();
    println!("Per server: median / p99 (cold start: N spawns; round trips: M in one session, client and server on one CPU)");
    let h = ["server", "cold start", "(best)", "ping", "tools/list", "refused call", "peak RSS", "N, M"];
    println!("  {:28} {:>21} {:>9} {:>19} {:>19} {:>19} {:>9}  {}", h[0], h[1], h[2], h[3], h[4], h[5], h[6], h[7]);
    for row in &rows {
        let rss = row.rss_kib.map_or("—".into(), |k| format!("{:.1} MiB", k as f64 / 1024.0));
        println!(
            "  {:28} {:>21} {:>9} {:>19} {:>19} {:>19} {:>9}  {}, {}",
            row.name,
            cell(row.cold),
            row.cold.map_or("—".into(), |s| fmt_d(s.min)),
            cell(row.ping),
            cell(row.list),
            cell(row.refused),
            rss,
            row.cold.map_or(0, |s| s.n),
            row.ping.map_or(0, |s| s.n)
        );
    }
    println!("  (refused call: sp, an http_request the policy denies; the SDKs, an unknown tool; the floor answers neither)");
    println!();
    println!("Targets (issue 12)");
    let target = |label: &str, got: Option<Stat>, limit_ms: f64| match got {
        Some(s) => {
            let ms = s.median.as_secs_f64() * 1e3;
            println!("  {label:40} {ms:.2} ms   target <= {limit_ms} ms   {}", if ms <= limit_ms { "met" } else { "NOT met" });
        }
        None => println!("  {label:40} —"),
    };
    target("cold start, glibc, journal off", sp_off.and_then(|r| r.cold), 1.5);
    target("cold start, glibc, journal on", sp_on.and_then(|r| r.cold), 2.5);
    if let Some(c) = floor_crypto.and_then(|r| r.cold) {
        println!(
            "  {:40} {:.2} ms   (no program loading the system libcrypto.so starts faster)",
            "  floor, glibc + libcrypto.so",
            c.median.as_secs_f64() * 1e3
        );
    }
    target("cold start, static, journal off", st_off.and_then(|r| r.cold), 1.5);
    target("cold start, static, journal on", get("sp static, journal on").and_then(|r| r.cold), 2.5);
    for (label, row) in
        [("journal off", sp_off), ("journal on", sp_on), ("static, journal off", st_off), ("static, journal on", get("sp static, journal on"))]
    {
        if let Some((d, p)) = row.and_then(|r| Some((r.refused?, r.ping?))) {
            let x = d.median.as_secs_f64() / p.median.as_secs_f64();
            println!(
                "  denied call / ping, {label:19} {x:.2}x ({} vs {})   target <= 1.3x   {}",
                fmt_d(d.median),
                fmt_d(p.median),
                if x <= 1.3 { "met" } else { "NOT met" }
            );
        }
    }
    println!("Targets (issue 24)");
    if let (Some(st), Some(fl)) = (st_off.and_then(|r| r.cold), floor.and_then(|r| r.cold)) {
        let x = st.median.as_secs_f64() / fl.median.as_secs_f64();
        println!(
            "  cold start, static / floor (same run)   {x:.2}x ({} vs {})   target <= 2x   {}",
            fmt_d(st.median),
            fmt_d(fl.median),
            if x <= 2.0 { "met" } else { "NOT met" }
        );
    }
    if let (Some(via), Some(direct)) = (http_off, ureq_d) {
        let x = via.median.as_secs_f64() / direct.median.as_secs_f64();
        println!(
            "  http_request via sp / direct ureq       {x:.2}x ({} vs {})   target <= 1.5x   {}",
            fmt_d(via.median),
            fmt_d(direct.median),
            if x <= 1.5 { "met" } else { "NOT met" }
        );
    }
    println!("  (sp's CPU per call and its targets: examples/bench_cpu.rs)");
    println!();
    println!("http_request vs a direct keep-alive client, same loopback HTTP/1.1 keep-alive server (median / p99, M={http_rounds})");
    let n = http_rounds + 20;
    println!("  through sp, journal off              {:19}  {} connection(s) for {n} requests", cell(http_off), opened[0]);
    println!("  through sp, journal on               {:19}  {} connection(s) for {n} requests", cell(http_on), opened[1]);
    println!("  direct, raw std keep-alive client    {:19}  {} connection(s) for {n} requests", cell(raw), opened[2]);
    println!("  direct, ureq Agent (as inside sp)    {:19}  {} connection(s) for {n} requests", cell(ureq_d), opened[3]);
    println!();
    println!("Rejection throughput (sp glibc)");
    println!("  malformed line, one per session      journal off {mal_off:.0} sessions/s = lines/s ({mal_off_ok}/{mal_n} answered -32700)");
    println!("                                       journal on  {mal_on:.0} sessions/s = lines/s ({mal_on_ok}/{mal_n} answered -32700)");
    println!("  denied calls pipelined, one session  journal off {pipe_off:.0} lines/s ({pipe_off_ok}/{pipe_n} SP_DENIED)");
    println!("                                       journal on  {pipe_on:.0} lines/s ({pipe_on_ok}/{} SP_DENIED)", pipe_n / 10);
    println!("  (journal rows written during the run: {journal_rows})");
}
