//! `make bench`: figures for the release binary, printed, never asserted.
//!
//! - cold start: spawn `sp mcp`, send initialize, read the answer (median of 50);
//! - protocol round trip: `ping` through one session (median and p99 of 2000);
//! - pipeline refusal: a denied `http_request` (median of 2000);
//! - HTTP round trip: an authorized `http_request` to a loopback server (median of 500);
//! - peak memory of `sp mcp` after all that (VmHWM from /proc);
//! - the redactor (issue 8) on an 8 MiB body, in process, next to a plain copy of it:
//!   one line without escapes (no decoded view), JSON lines (line breaks: one view),
//!   and a body full of `%`, `&` and backslashes (decoded views);
//! - binary size.
//!
//! Usage: `cargo run --release --example bench -- target/release/sp`
#![allow(clippy::disallowed_methods, reason = "tests and benchmarks start sp, sshd and clients and read their environment; the fence in clippy.toml is for src/")]

#![allow(clippy::print_stdout, clippy::disallowed_macros)]

#[path = "../tests/support/http_server.rs"]
mod http_server;

use std::io::{BufRead, BufReader, Write};
use std::os::unix::fs::PermissionsExt;
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::json;

struct Session {
    child: Child,
    stdin: ChildStdin,
    stdout: BufReader<ChildStdout>,
}

impl Session {
    fn start(sp: &str, policy: &std::path::Path) -> Session {
        let mut child = Command::new(sp)
            .args(["mcp", "-q", "--config"])
            .arg(policy)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("spawn sp");
        let stdin = child.stdin.take().unwrap();
        let stdout = BufReader::new(child.stdout.take().unwrap());
        Session { child, stdin, stdout }
    }

    fn round_trip(&mut self, line: &str) -> String {
        self.stdin.write_all(line.as_bytes()).unwrap();
        self.stdin.write_all(b"\n").unwrap();
        self.stdin.flush().unwrap();
        let mut answer = String::new();
        self.stdout.read_line(&mut answer).unwrap();
        answer
    }

    fn send(&mut self, line: &str) {
        self.stdin.write_all(line.as_bytes()).unwrap();
        self.stdin.write_all(b"\n").unwrap();
    }

    fn peak_rss_kib(&self) -> Option<u64> {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.child.id())).ok()?;
        let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
        line.split_whitespace().nth(1)?.parse().ok()
    }

    fn finish(mut self) {
        drop(self.stdin);
        let _ = self.child.wait();
    }
}

const INIT: &str = r#"{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"bench","version":"1"}}}"#;
const READY: &str = r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#;

fn stats(mut samples: Vec<Duration>) -> (Duration, Duration) {
    samples.sort();
    let median = samples[samples.len() / 2];
    let p99 = samples[(samples.len() * 99 / 100).min(samples.len() - 1)];
    (median, p99)
}

/// MiB/s of the best of 5 runs of `f` over `len` bytes.
fn mib_s(len: usize, mut f: impl FnMut()) -> f64 {
    let best = (0..5)
        .map(|_| {
            let t = Instant::now();
            f();
            t.elapsed()
        })
        .min()
        .unwrap();
    len as f64 / 1048576.0 / best.as_secs_f64()
}

/// The redactor over an 8 MiB body (one real echo planted in the middle) vs a copy.
fn redactor_figures(dir: &std::path::Path) -> Vec<String> {
    use sallyport::SecretSource;
    let mut vault = sallyport::Vault::new();
    let mut read = |name: &str, value: &str| {
        let path = dir.join(name);
        std::fs::write(&path, value).unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).unwrap();
        vault.read(name, &SecretSource::File(path)).unwrap();
    };
    read("tok", "ghp_16C7e42F292c6912E7710c838347Ae178B4a");
    read("basic", "alice:correct-horse-battery-staple");
    let body = |line: &str| -> Vec<u8> {
        let mut b = Vec::with_capacity(8 << 20);
        while b.len() < 8 << 20 {
            b.extend_from_slice(line.as_bytes());
        }
        b.truncate(4 << 20);
        b.extend_from_slice(b"ghp_16C7e42F292c6912E7710c838347Ae178B4a");
        while b.len() < 8 << 20 {
            b.extend_from_slice(line.as_bytes());
        }
        b.truncate(8 << 20);
        b
    };
    let one_line = body("{\"id\":12345,\"name\":\"widget\",\"tags\":[\"a\",\"b\"],\"note\":\"nothing to see here\"} ");
    let plain = body("{\"id\":12345,\"name\":\"widget\",\"tags\":[\"a\",\"b\"],\"note\":\"nothing to see here\"}\n");
    let escaped = body("<a href=\"/q?x=1&amp;y=%41%42\">caf&#233;</a> {\"s\":\"\\u00e9\\/x\"} 100% &lt;ok&gt;\n");
    let mut lines = Vec::new();
    for (what, b) in [("one line", &one_line), ("JSON lines", &plain), ("escape-dense", &escaped)] {
        let copy = mib_s(b.len(), || {
            std::hint::black_box(b.to_vec());
        });
        let mut v = b.to_vec();
        vault.scrub_bytes(&mut v);
        assert!(!v.windows(8).any(|w| w == b"ghp_16C7"), "the planted echo survived");
        // The figure includes copying the body in (scrub_bytes works in place).
        let scrub = mib_s(b.len(), || {
            let mut v = b.to_vec();
            vault.scrub_bytes(&mut v);
            std::hint::black_box(v);
        });
        lines.push(format!("  redactor, 8 MiB body ({what:12})  {scrub:.0} MiB/s  (plain copy {copy:.0} MiB/s)"));
    }
    lines
}

fn us(d: Duration) -> String {
    format!("{:.1} µs", d.as_secs_f64() * 1e6)
}

fn main() {
    let sp = std::env::args().nth(1).unwrap_or_else(|| "target/release/sp".into());
    let api = http_server::TestServer::start();
    let dir = std::env::temp_dir().join(format!("sp-bench-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let secret = dir.join("token");
    std::fs::write(&secret, "bench-token\n").unwrap();
    std::fs::set_permissions(&secret, std::fs::Permissions::from_mode(0o600)).unwrap();
    let host = format!("127.0.0.1:{}", api.port);
    let policy = dir.join("policy.json");
    std::fs::write(
        &policy,
        json!({
            "credentials": {"bench": {"source": {"file": secret}, "inject": {"bearer": {}}, "hosts": [host]}},
            "http": {"allow": [{"hosts": [host], "methods": ["GET"]}]},
            // A journal like production's (fsync per row), kept out of the user's own.
            "audit": {"path": dir.join("audit.jsonl")}
        })
        .to_string(),
    )
    .unwrap();

    let redactor = redactor_figures(&dir);
    if std::env::var_os("SP_BENCH_REDACTOR_ONLY").is_some() {
        redactor.iter().for_each(|l| println!("{l}"));
        return;
    }

    let mut cold = Vec::new();
    for _ in 0..50 {
        let t = Instant::now();
        let mut s = Session::start(&sp, &policy);
        let a = s.round_trip(INIT);
        cold.push(t.elapsed());
        assert!(a.contains("protocolVersion"), "bad initialize answer: {a}");
        s.finish();
    }

    let mut s = Session::start(&sp, &policy);
    s.round_trip(INIT);
    s.send(READY);
    let mut ping = Vec::new();
    for i in 0..2000 {
        let t = Instant::now();
        let a = s.round_trip(&format!(r#"{{"jsonrpc":"2.0","id":{i},"method":"ping"}}"#));
        ping.push(t.elapsed());
        assert!(a.contains("\"result\""));
    }
    let denied_call = json!({"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"http_request","arguments":{"method":"DELETE","url":format!("http://{host}/x")}}}).to_string();
    let mut denied = Vec::new();
    for _ in 0..2000 {
        let t = Instant::now();
        let a = s.round_trip(&denied_call);
        denied.push(t.elapsed());
        assert!(a.contains("SP_DENIED"));
    }
    let ok_call = json!({"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"http_request","arguments":{"method":"GET","url":format!("http://{host}/x")}}}).to_string();
    let mut http = Vec::new();
    for _ in 0..500 {
        let t = Instant::now();
        let a = s.round_trip(&ok_call);
        http.push(t.elapsed());
        assert!(a.contains("\"status\":200"), "{a}");
    }
    let rss = s.peak_rss_kib();
    s.finish();
    let size = std::fs::metadata(&sp).map(|m| m.len()).unwrap_or(0);
    let _ = std::fs::remove_dir_all(&dir);

    let (cm, cp) = stats(cold);
    let (pm, pp) = stats(ping);
    let (dm, dp) = stats(denied);
    let (hm, hp) = stats(http);
    println!("sp bench ({sp})");
    println!("  binary size                       {:.2} MiB", size as f64 / 1048576.0);
    println!("  cold start to initialize answer   median {}  p99 {}  (n=50)", us(cm), us(cp));
    println!("  ping round trip                   median {}  p99 {}  (n=2000)", us(pm), us(pp));
    println!("  denied http_request round trip    median {}  p99 {}  (n=2000)", us(dm), us(dp));
    println!("  loopback http_request round trip  median {}  p99 {}  (n=500, new connection each)", us(hm), us(hp));
    match rss {
        Some(k) => println!("  peak RSS of sp mcp                {:.2} MiB", k as f64 / 1024.0),
        None => println!("  peak RSS of sp mcp                unavailable"),
    }
    for line in redactor {
        println!("{line}");
    }
}
