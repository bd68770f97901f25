//! `make bench`: an upstream MCP server behind sp, figures printed, never asserted.
//!
//! - a proxied `tools/call` (client -> sp -> upstream and back) against the same call
//!   made directly to the same upstream by the same client over stdio: medians, and
//!   sp's added time per call in µs (10,000 calls each: the issue's 100,000 take minutes
//!   on a two-core machine with a Python upstream; the memory trend shows by 10,000);
//! - sp's resident memory after 1,000 proxied calls and after all of them (flat is the
//!   goal: nothing per call is kept);
//! - `tools/list` with three upstreams already listed, against the fixed tools alone.
//!
//! The upstream is `tests/support/upstreams/misbehave.py ok` (Python, stdlib only): it
//! answers each call with its arguments. The journal is written without fsync, so the
//! figure is sp's own work, not the disk's.
//!
//! Usage: `cargo run --release --example bench_upstream -- target/release/sp`
#![allow(clippy::disallowed_methods, reason = "tests and benchmarks start sp, sshd and clients and read their environment; the fence in clippy.toml is for src/")]
#![allow(clippy::print_stdout, clippy::disallowed_macros)]

mod support;

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::json;
use support::{scratch_dir, stat, tool_call, write_private, Session};

const CALLS: usize = 10_000;
const LISTS: usize = 2_000;

fn python() -> String {
    ["/usr/bin/python3", "/usr/local/bin/python3"].iter().find(|p| Path::new(p).exists()).map_or("python3".into(), |p| p.to_string())
}

fn fixture() -> String {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/support/upstreams/misbehave.py").display().to_string()
}

/// `n` calls of `name`; the samples, and sp's RSS after the first 1,000 when `rss`.
fn calls(s: &mut Session, name: &str, n: usize, rss: bool) -> (Vec<Duration>, f64) {
    let mut samples = Vec::with_capacity(n);
    let mut early = f64::NAN;
    for i in 0..n {
        let line = tool_call(i as u64 + 10, name, json!({"x": "ok-1"}));
        let t = Instant::now();
        let answer = s.round_trip(&line);
        samples.push(t.elapsed());
        assert!(answer.contains("ok-1"), "call {i}: {answer}");
        if rss && i == 999 {
            early = s.status_mib("VmRSS:");
        }
    }
    (samples, early)
}

fn us(d: Duration) -> f64 {
    d.as_secs_f64() * 1e6
}

fn main() {
    let sp = std::env::args().nth(1).unwrap_or_else(|| "target/release/sp".into());
    let dir = scratch_dir("sp-bench-upstream");
    let upstream = |name: &str| json!({name: {"command": [python(), fixture(), "ok"], "tools": {"allow": ["*"]}, "arguments": {"act": {"x": ["ok-*"]}}}});

    // Direct: the same client, the same upstream, no sp.
    let mut direct = Command::new(python());
    direct.args([fixture(), "ok".into()]).stderr(Stdio::null());
    let mut d = Session::spawn(direct).expect("start the upstream");
    d.initialize();
    calls(&mut d, "act", 500, false);
    let (direct_samples, _) = calls(&mut d, "act", CALLS, false);
    d.finish();

    // Proxied through sp.
    let policy = dir.join("one.json");
    let audit = json!({"path": dir.join("audit.jsonl"), "fsync": false});
    write_private(&policy, &json!({"upstreams": upstream("m"), "audit": audit}).to_string());
    let mut s = Session::sp(&sp, &policy);
    s.initialize();
    calls(&mut s, "m_act", 500, false);
    let (proxied_samples, early_rss) = calls(&mut s, "m_act", CALLS, true);
    let late_rss = s.status_mib("VmRSS:");
    // sp's floor for an executed call in the same session: sp_inventory runs nothing.
    let inventory: Vec<Duration> = (0..2000)
        .map(|i| {
            let line = tool_call(i + 100_000, "sp_inventory", json!({}));
            let t = Instant::now();
            s.round_trip(&line);
            t.elapsed()
        })
        .collect();
    let inventory = stat(inventory).unwrap();
    s.finish();

    let (direct, proxied) = (stat(direct_samples).unwrap(), stat(proxied_samples).unwrap());
    println!("upstream tools/call, {CALLS} calls each (misbehave.py ok, Python)");
    println!("  direct to the upstream   median {:>8.1} µs  p99 {:>8.1} µs", us(direct.median), us(direct.p99));
    println!("  proxied through sp       median {:>8.1} µs  p99 {:>8.1} µs", us(proxied.median), us(proxied.p99));
    println!(
        "  sp's added time          {:>8.1} µs per call (median), ratio {:.2}x",
        us(proxied.median) - us(direct.median),
        proxied.median.as_secs_f64() / direct.median.as_secs_f64()
    );
    println!("  sp_inventory, same sp     median {:>8.1} µs (an executed call that runs nothing: sp's floor)", us(inventory.median));
    println!("  sp RSS after 1,000 calls {early_rss:.1} MiB, after {} calls {late_rss:.1} MiB", CALLS + 500);

    // tools/list: three upstreams already listed, against the fixed tools alone.
    let three = dir.join("three.json");
    let mut ups = upstream("a");
    for n in ["b", "c"] {
        ups.as_object_mut().unwrap().extend(upstream(n).as_object().unwrap().clone());
    }
    write_private(&three, &json!({"upstreams": ups, "audit": audit}).to_string());
    let none = dir.join("none.json");
    write_private(&none, &json!({"audit": audit}).to_string());
    for (label, policy) in [("fixed tools only", &none), ("three upstreams listed", &three)] {
        let mut s = Session::sp(&sp, policy);
        s.initialize();
        let list = r#"{"jsonrpc":"2.0","id":1,"method":"tools/list"}"#;
        s.round_trip(list);
        let samples: Vec<Duration> = (0..LISTS)
            .map(|_| {
                let t = Instant::now();
                let answer = s.round_trip(list);
                let took = t.elapsed();
                assert!(answer.contains("\"tools\""), "{answer}");
                took
            })
            .collect();
        let st = stat(samples).unwrap();
        println!("tools/list, {label:<24} median {:>8.1} µs  p99 {:>8.1} µs ({LISTS} lists)", us(st.median), us(st.p99));
        s.finish();
    }
    let _ = std::fs::remove_dir_all(&dir);
}
