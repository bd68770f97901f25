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
#![allow(
    clippy::disallowed_methods,
    reason = "tests and benchmarks start sp, sshd and clients and read their environment; the fence in clippy.toml is for src/"
)]
#![allow(clippy::print_stdout, clippy::disallowed_macros)]

#[path = "../tests/support/http_server.rs"]
mod http_server;
mod support;

use std::time::{Duration, Instant};

use serde_json::json;
use support::{stat, write_private, Session};

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
        write_private(&path, value);
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
        if what == "escape-dense" {
            let verdict = if scrub >= 400.0 { "met" } else { "NOT met" };
            lines.push(format!("  target (issue 24): redactor on escape-dense text >= 400 MiB/s: {scrub:.0} MiB/s   {verdict}"));
        }
    }
    lines
}

fn us(d: Duration) -> String {
    format!("{:.1} µs", d.as_secs_f64() * 1e6)
}

fn main() {
    let sp = std::env::args().nth(1).unwrap_or_else(|| "target/release/sp".into());
    let api = http_server::TestServer::start();
    let dir = support::scratch_dir("sp-bench");
    let secret = dir.join("token");
    write_private(&secret, "bench-token\n");
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
        let mut s = Session::sp(&sp, &policy);
        let a = s.round_trip(support::INIT);
        cold.push(t.elapsed());
        assert!(a.contains("protocolVersion"), "bad initialize answer: {a}");
        s.finish();
    }

    let mut s = Session::sp(&sp, &policy);
    s.initialize();
    let mut ping = Vec::new();
    for i in 0..2000 {
        let t = Instant::now();
        let a = s.round_trip(&format!(r#"{{"jsonrpc":"2.0","id":{i},"method":"ping"}}"#));
        ping.push(t.elapsed());
        assert!(a.contains("\"result\""));
    }
    let denied_call = support::tool_call(1, "http_request", json!({"method": "DELETE", "url": format!("http://{host}/x")}));
    let mut denied = Vec::new();
    for _ in 0..2000 {
        let t = Instant::now();
        let a = s.round_trip(&denied_call);
        denied.push(t.elapsed());
        assert!(a.contains("SP_DENIED"));
    }
    let ok_call = support::tool_call(2, "http_request", json!({"method": "GET", "url": format!("http://{host}/x")}));
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

    let stats = |samples| stat(samples).map(|s| (s.median, s.p99)).expect("samples");
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
