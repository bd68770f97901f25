//! `make bench` (issue #12): what `sp mcp` holds in memory, printed, never asserted.
//!
//! - requests within the default line limit (4 MiB), the worst cases for memory: dense
//!   numbers, one-member objects, escaped quotes (peak RSS, VmHWM);
//! - answers within the default `max_response_bytes` (8 MiB) from a loopback server,
//!   with a credential for the host (its secret is what answers are scrubbed of): plain
//!   text, `"` (doubles when escaped), control characters (six times), dense JSON, log
//!   lines (line breaks: the redactor's joined view) and text with an escape every few
//!   bytes (its decoded views at their densest);
//! - an idle session, then 1,000,000 mixed requests (ping, tools/list, a denied call,
//!   sp_inventory) in one session: RSS at the start, every 200,000, at the end, the peak,
//!   and the number of open descriptors (no growth);
//! - a 1 GiB line streamed in: how long until the refusal, and the peak.
//!
//! Usage: `cargo run --release --example bench_memory -- target/release/sp`
#![allow(
    clippy::disallowed_methods,
    reason = "tests and benchmarks start sp, sshd and clients and read their environment; the fence in clippy.toml is for src/"
)]
#![allow(clippy::print_stdout, clippy::disallowed_macros)]

#[path = "../tests/support/http_server.rs"]
mod http_server;

mod support;

use std::io::Write;
use std::time::Instant;

use serde_json::json;
use support::{tool_call as call, write_private, Session};

const MIB: f64 = 1024.0 * 1024.0;

/// `sp mcp` with `policy`, initialized.
fn start(sp: &str, policy: &std::path::Path) -> Session {
    let mut s = Session::sp(sp, policy);
    s.initialize();
    s
}

fn main() {
    let sp = std::env::args().nth(1).unwrap_or_else(|| "target/release/sp".into());
    let api = http_server::TestServer::start();
    let dir = support::scratch_dir("sp-bench-memory");
    let host = format!("127.0.0.1:{}", api.port);
    let policy = dir.join("policy.json");
    // A credential for the host, as deployed: its secret is what the answers are scrubbed of.
    let token = dir.join("token");
    write_private(&token, "bench-memory-secret-0123456789");
    write_private(
        &policy,
        &json!({
            "credentials": {"k": {"source": {"file": token}, "inject": {"bearer": {}}, "hosts": [host]}},
            "http": {"allow": [{"hosts": [host], "methods": ["GET"], "paths": ["/big/*"]}]},
            "audit": {"path": dir.join("audit.jsonl")}
        })
        .to_string(),
    );

    println!("memory of sp mcp ({sp}), peak RSS (VmHWM) per session; journal on");
    let idle = start(&sp, &policy);
    println!("  idle session                                   {:6.1} MiB", idle.status_mib("VmHWM:"));
    idle.finish();

    let limit = 4 * 1024 * 1024 - 256;
    let numbers = format!("[{}]", vec!["0"; limit / 2 - 1].join(","));
    let objects = format!("[{}]", vec![r#"{"a":0}"#; limit / 8 - 1].join(","));
    let quotes = format!("\"{}\"", "\\\"".repeat(limit / 2 - 2));
    for (what, value) in [("[0,0,...]", &numbers), ("[{\"a\":0},...]", &objects), ("\"\\\"\\\"...\"", &quotes)] {
        let mut s = start(&sp, &policy);
        let line = format!(r#"{{"jsonrpc":"2.0","id":1,"method":"ping","params":{{"x":{value}}}}}"#);
        s.send(&line);
        s.answer_len();
        println!("  request line {:4.1} MiB of {:<14}        {:6.1} MiB", line.len() as f64 / MIB, what, s.status_mib("VmHWM:"));
        s.finish();
    }

    let body = 8 * 1024 * 1024;
    let dense_json = format!("[{}]", vec!["0"; body / 2 - 1].join(","));
    // Log-like lines: line breaks make the redactor's joined view, `&` its decoded view.
    let log_line = "2026-12-04T06:00:00Z GET /v1/items?page=3 200 ok <a&b> 1234 bytes\n";
    let log_text = log_line.repeat(body / log_line.len());
    // Escapes every few bytes: the redactor's decoded views at their densest.
    let escaped = "a&amp;b\\\"c%41d\\u00e9\n".repeat(body / 20);
    let bodies: [(&str, String); 6] = [
        ("text x", "x".repeat(body)),
        ("quotes \"", "\"".repeat(body)),
        ("control \\x01", "\u{1}".repeat(body)),
        ("JSON [0,0,...]", dense_json),
        ("log lines, & \\n", log_text),
        ("escapes &amp; %41", escaped),
    ];
    for (i, (what, text)) in bodies.iter().enumerate() {
        api.route(&format!("/big/{i}"), http_server::Reply::text(200, text));
        let mut s = start(&sp, &policy);
        s.send(&call(1, "http_request", json!({"method": "GET", "url": format!("http://{host}/big/{i}")})));
        let n = s.answer_len();
        println!("  answer, 8 MiB body of {:<16} line {:5.1} MiB  {:6.1} MiB", what, n as f64 / MIB, s.status_mib("VmHWM:"));
        s.finish();
    }

    // One session, a million mixed requests, pipelined: a writer thread, this thread reads.
    // The journal without fsync: a million fdatasyncs measure the disk, not sp.
    let total: u64 = std::env::var("SP_BENCH_REQUESTS").ok().and_then(|n| n.parse().ok()).unwrap_or(1_000_000);
    let fast_policy = dir.join("policy-nosync.json");
    write_private(
        &fast_policy,
        &json!({
            "http": {"allow": [{"hosts": [host], "methods": ["GET"], "paths": ["/big/*"]}]},
            "audit": {"path": dir.join("audit-nosync.jsonl"), "fsync": false}
        })
        .to_string(),
    );
    let mut s = start(&sp, &fast_policy);
    let (start_rss, start_fds) = (s.status_mib("VmRSS:"), s.fds());
    let mut stdin = s.stdin.take().unwrap();
    let denied_url = format!("http://{host}/x");
    let denied = move |id: u64| call(id, "http_request", json!({"method": "DELETE", "url": denied_url}));
    let writer = std::thread::spawn(move || {
        let mut w = std::io::BufWriter::new(&mut stdin);
        for id in 1..=total {
            let line = match id % 4 {
                0 => format!(r#"{{"jsonrpc":"2.0","id":{id},"method":"ping"}}"#),
                1 => format!(r#"{{"jsonrpc":"2.0","id":{id},"method":"tools/list"}}"#),
                2 => denied(id),
                _ => call(id, "sp_inventory", json!({})),
            };
            w.write_all(line.as_bytes()).unwrap();
            w.write_all(b"\n").unwrap();
        }
        w.flush().unwrap();
        drop(w);
        stdin
    });
    let t = Instant::now();
    let mut samples = Vec::new();
    for n in 1..=total {
        s.answer_len();
        if n % (total / 5).max(1) == 0 {
            samples.push(format!("{:.1}", s.status_mib("VmRSS:")));
        }
    }
    let took = t.elapsed();
    let (end_rss, end_fds, peak) = (s.status_mib("VmRSS:"), s.fds(), s.status_mib("VmHWM:"));
    s.stdin = Some(writer.join().unwrap());
    s.finish();
    println!(
        "  {total} mixed requests in one session (journal without fsync): RSS start {start_rss:.1}, every {}k [{}], end {end_rss:.1}, peak {peak:.1} MiB; fds {start_fds} -> {end_fds}; {:.0} requests/s",
        total / 5000,
        samples.join(", "),
        total as f64 / took.as_secs_f64()
    );

    // A 1 GiB line streamed in: sp refuses it once the line limit is passed.
    let mut s = start(&sp, &policy);
    let mut stdin = s.stdin.take().unwrap();
    let t = Instant::now();
    let writer = std::thread::spawn(move || {
        let chunk = vec![b'x'; 1 << 20];
        let mut sent = 0u64;
        for _ in 0..1024 {
            if stdin.write_all(&chunk).is_err() {
                break;
            }
            sent += chunk.len() as u64;
        }
        sent
    });
    let n = s.answer_len();
    let refused = t.elapsed();
    let peak = s.status_mib("VmHWM:");
    let _ = s.child.wait();
    let sent = writer.join().unwrap();
    println!(
        "  a 1 GiB line streamed in: refused after {:.1} ms ({} byte answer), {:.1} MiB written before sp closed stdin, peak {peak:.1} MiB",
        refused.as_secs_f64() * 1000.0,
        n,
        sent as f64 / MIB
    );
    let _ = std::fs::remove_dir_all(&dir);
}
