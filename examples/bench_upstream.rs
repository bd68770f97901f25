//! `make bench`: an upstream MCP server behind sp, figures printed, never asserted.
//!
//! - a proxied `tools/call` (client -> sp -> upstream and back) against the same call
//!   made directly to the same upstream by the same client over stdio: medians, and
//!   sp's added time per call in µs (10,000 calls each by default; the issue's 100,000
//!   with `SP_BENCH_UPSTREAM_CALLS=100000`, some minutes on two cores with a Python
//!   upstream);
//! - sp's resident memory after 1,000 proxied calls, after 10,000 and after all of them,
//!   and its peak (flat is the goal: nothing per call is kept);
//! - sp's peak memory for an upstream's 8 MiB answer (`misbehave.py large`: log-like
//!   text with a secret given to the upstream in the middle, so the answer is scrubbed as
//!   deployed), against the 64 MiB that bounds an HTTP answer's peak (issue 12);
//! - `tools/list` with three upstreams already listed, against the fixed tools alone;
//! - a relayed `resources/read` (issue 33) against the same read made directly: the
//!   published server-everything (`make upstreams`: `tests/upstreams/node_modules`, its
//!   static document `demo://resource/static/document/features.md`, a few KiB of text,
//!   read through sp as `everything+demo://...` with `resources.allow`), or, when it or
//!   node is missing, `tests/support/upstreams/resources.py` (`fx://ok/bench`), said so.
//!
//! The upstream is `tests/support/upstreams/misbehave.py ok` (Python, stdlib only): it
//! answers each call with its arguments. The journal is written without fsync, so the
//! figure is sp's own work, not the disk's.
//!
//! Usage: `cargo run --release --example bench_upstream -- target/release/sp`
#![allow(
    clippy::disallowed_methods,
    reason = "tests and benchmarks start sp, sshd and clients and read their environment; the fence in clippy.toml is for src/"
)]
#![allow(clippy::print_stdout, clippy::disallowed_macros)]

mod support;

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{json, Value};
use support::{scratch_dir, stat, tool_call, write_private, Session, INIT, READY};

const CALLS: usize = 10_000;
/// The large answer's text (`misbehave.py large`).
const LARGE: usize = 8 << 20;
const LISTS: usize = 2_000;

fn python() -> String {
    ["/usr/bin/python3", "/usr/local/bin/python3"].iter().find(|p| Path::new(p).exists()).map_or("python3".into(), |p| p.to_string())
}

fn fixture() -> String {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/support/upstreams/misbehave.py").display().to_string()
}

/// `n` calls of `name`; the samples, and sp's RSS after the first 1,000 and 10,000 when
/// `rss`.
fn calls(s: &mut Session, name: &str, n: usize, rss: bool) -> (Vec<Duration>, [f64; 2]) {
    let mut samples = Vec::with_capacity(n);
    let mut at = [f64::NAN; 2];
    for i in 0..n {
        let line = tool_call(i as u64 + 10, name, json!({"x": "ok-1"}));
        let t = Instant::now();
        let answer = s.round_trip(&line);
        samples.push(t.elapsed());
        assert!(answer.contains("ok-1"), "call {i}: {answer}");
        match i {
            999 if rss => at[0] = s.status_mib("VmRSS:"),
            9_999 if rss => at[1] = s.status_mib("VmRSS:"),
            _ => {}
        }
    }
    (samples, at)
}

/// The answer to request `id`, past the notifications the server sends before it
/// (server-everything announces `tools/list_changed` and log messages on its own).
fn answer_to(s: &mut Session, id: u64) -> Value {
    loop {
        let line = s.answer();
        assert!(!line.is_empty(), "the server closed its stdout before answering request {id}");
        let m: Value = serde_json::from_str(&line).expect("one JSON-RPC message per line");
        if m["id"] == id {
            return m;
        }
    }
}

/// `n` `resources/read` of `uri`, each answer's first text checked for `expect`.
fn reads(s: &mut Session, uri: &str, expect: &str, first_id: u64, n: usize) -> Vec<Duration> {
    (0..n as u64)
        .map(|i| {
            let id = first_id + i;
            let line = json!({"jsonrpc": "2.0", "id": id, "method": "resources/read", "params": {"uri": uri}}).to_string();
            let t = Instant::now();
            s.send(&line);
            let answer = answer_to(s, id);
            let took = t.elapsed();
            let text = answer["result"]["contents"][0]["text"].as_str().unwrap_or_default();
            assert!(text.contains(expect), "read {i} of {uri}: {answer}");
            took
        })
        .collect()
}

/// The relayed `resources/read` against the direct one: server-everything when
/// installed, else resources.py.
fn resources_read(sp: &str, dir: &Path, audit: &Value, n: usize) {
    let everything = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/upstreams/node_modules/@modelcontextprotocol/server-everything/dist/index.js");
    let node = Command::new("node").arg("--version").stdout(Stdio::null()).stderr(Stdio::null()).status().is_ok_and(|s| s.success());
    let read_paths = [env!("CARGO_MANIFEST_DIR")];
    // (label, the upstream's command, its own URI, sp's name for it, text the answer holds, the upstream's policy)
    let (label, command, own, relayed, expect, upstream) = if everything.exists() && node {
        let command = vec!["node".to_string(), everything.display().to_string(), "stdio".into()];
        let up = json!({"command": command, "sandbox": {"read": read_paths}, "pin": "off", "tools": {"allow": ["echo"]},
            "resources": {"allow": ["demo://resource/static/document/*"]}});
        let uri = "demo://resource/static/document/features.md";
        ("server-everything 2026.8.31, Node", command, uri.to_string(), format!("everything+{uri}"), "Everything Server", json!({"everything": up}))
    } else {
        println!("resources/read: server-everything or node is missing (`make upstreams`); measured against resources.py instead");
        let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/support/upstreams/resources.py").display().to_string();
        let command = vec![python(), script, "fx".into()];
        let up = json!({"command": command, "sandbox": {"read": read_paths}, "pin": "off", "tools": {"allow": ["*"]}, "resources": {"allow": ["fx://ok/*"]}});
        let uri = "fx://ok/bench";
        ("resources.py, Python", command, uri.to_string(), format!("fx+{uri}"), "served by fx", json!({"fx": up}))
    };

    // Direct: the bench speaks MCP to the upstream itself.
    let mut direct = Command::new(&command[0]);
    direct.args(&command[1..]).stderr(Stdio::null());
    let mut d = Session::spawn(direct).expect("start the upstream");
    d.send(INIT);
    answer_to(&mut d, 0);
    d.send(READY);
    reads(&mut d, &own, expect, 1, 200);
    let direct = stat(reads(&mut d, &own, expect, 1_000, n)).unwrap();
    d.finish();

    // Relayed through sp, the policy's resources.allow letting the document through.
    let policy = dir.join("resources.json");
    write_private(&policy, &json!({"upstreams": upstream, "audit": audit}).to_string());
    let mut s = Session::sp(sp, &policy);
    s.send(INIT);
    answer_to(&mut s, 0);
    s.send(READY);
    reads(&mut s, &relayed, expect, 1, 200);
    let relayed_st = stat(reads(&mut s, &relayed, expect, 1_000, n)).unwrap();
    s.finish();

    println!("upstream resources/read, {n} reads each ({label}: {own})");
    println!("  direct to the upstream   median {:>8.1} µs  p99 {:>8.1} µs", us(direct.median), us(direct.p99));
    println!("  relayed through sp       median {:>8.1} µs  p99 {:>8.1} µs ({relayed})", us(relayed_st.median), us(relayed_st.p99));
    println!(
        "  sp's added time          {:>8.1} µs per read (median), {:.1} µs at p99, ratio {:.2}x",
        us(relayed_st.median) - us(direct.median),
        us(relayed_st.p99) - us(direct.p99),
        relayed_st.median.as_secs_f64() / direct.median.as_secs_f64()
    );
}

fn us(d: Duration) -> f64 {
    d.as_secs_f64() * 1e6
}

fn main() {
    let sp = std::env::args().nth(1).unwrap_or_else(|| "target/release/sp".into());
    let n_calls = std::env::var("SP_BENCH_UPSTREAM_CALLS").ok().and_then(|v| v.parse::<usize>().ok()).unwrap_or(CALLS);
    let dir = scratch_dir("sp-bench-upstream");
    let upstream = |name: &str| {
        json!({name: {"command": [python(), fixture(), "ok"], "tools": {"allow": ["*"]}, "arguments": {"act": {"x": ["ok-*"]}},
        "sandbox": {"read": [env!("CARGO_MANIFEST_DIR")]}}})
    };

    // Direct: the same client, the same upstream, no sp.
    let mut direct = Command::new(python());
    direct.args([fixture(), "ok".into()]).stderr(Stdio::null());
    let mut d = Session::spawn(direct).expect("start the upstream");
    d.initialize();
    calls(&mut d, "act", 500, false);
    let (direct_samples, _) = calls(&mut d, "act", n_calls, false);
    d.finish();

    // Proxied through sp.
    let policy = dir.join("one.json");
    let audit = json!({"path": dir.join("audit.jsonl"), "fsync": false});
    write_private(&policy, &json!({"upstreams": upstream("m"), "audit": audit}).to_string());
    let mut s = Session::sp(&sp, &policy);
    s.initialize();
    calls(&mut s, "m_act", 500, false);
    let (proxied_samples, [rss_1k, rss_10k]) = calls(&mut s, "m_act", n_calls, true);
    let late_rss = s.status_mib("VmRSS:");
    let peak_rss = s.status_mib("VmHWM:");
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
    println!("upstream tools/call, {n_calls} calls each (misbehave.py ok, Python)");
    println!("  direct to the upstream   median {:>8.1} µs  p99 {:>8.1} µs", us(direct.median), us(direct.p99));
    println!("  proxied through sp       median {:>8.1} µs  p99 {:>8.1} µs", us(proxied.median), us(proxied.p99));
    println!(
        "  sp's added time          {:>8.1} µs per call (median), ratio {:.2}x",
        us(proxied.median) - us(direct.median),
        proxied.median.as_secs_f64() / direct.median.as_secs_f64()
    );
    println!("  sp_inventory, same sp     median {:>8.1} µs (an executed call that runs nothing: sp's floor)", us(inventory.median));
    let after_10k = if rss_10k.is_nan() { String::new() } else { format!(", after 10,000 {rss_10k:.1} MiB") };
    println!("  sp RSS after 1,000 calls {rss_1k:.1} MiB{after_10k}, after {} calls {late_rss:.1} MiB; peak {peak_rss:.1} MiB", n_calls + 500);

    // An 8 MiB answer, with a secret given to the upstream in it: sp's peak.
    let secret_file = dir.join("token");
    write_private(&secret_file, "bench-upstream-secret-0123456789");
    let large = dir.join("large.json");
    let cred = json!({"source": {"file": secret_file}, "inject": {"bearer": {}}, "hosts": ["unused.example"]});
    let up = json!({"big": {"command": [python(), fixture(), "large"], "env": {"SECRET": {"credential": "k"}, "ANSWER_BYTES": LARGE.to_string()},
        "tools": {"allow": ["*"]}, "max_output_bytes": 4 * LARGE, "sandbox": {"read": [env!("CARGO_MANIFEST_DIR")]}}});
    write_private(&large, &json!({"credentials": {"k": cred}, "upstreams": up, "audit": audit}).to_string());
    let mut s = Session::sp(&sp, &large);
    s.initialize();
    s.round_trip(r#"{"jsonrpc":"2.0","id":1,"method":"tools/list"}"#);
    let before = s.status_mib("VmHWM:");
    let mut sizes = Vec::new();
    let t = Instant::now();
    for i in 0..3 {
        let answer = s.round_trip(&tool_call(i + 2, "big_act", json!({})));
        assert!(answer.contains("[REDACTED:k]") && !answer.contains("bench-upstream-secret"), "the large answer was not scrubbed");
        sizes.push(answer.len());
    }
    let took = t.elapsed() / 3;
    let peak = s.status_mib("VmHWM:");
    s.finish();
    println!(
        "upstream answer of {} MiB of text (a secret in it, scrubbed), 3 calls: sp peak RSS {before:.1} -> {peak:.1} MiB \
         (bound: 64 MiB, {}); answer line {:.1} MiB; {:.0} ms per call",
        LARGE >> 20,
        if peak <= 64.0 { "met" } else { "NOT met" },
        sizes[0] as f64 / 1048576.0,
        took.as_secs_f64() * 1e3
    );

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

    resources_read(&sp, &dir, &audit, n_calls);
    let _ = std::fs::remove_dir_all(&dir);
}
