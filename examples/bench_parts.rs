//! The parts of a denied `tools/call` that no policy and no code of sp's can skip, timed
//! alone (`make bench`, after bench_compare; issue #12). A denied `http_request` must
//! parse its request line as JSON, parse its URL with the `url` crate (the parser whose
//! result the executor sends, so that the policy and the wire never see two different
//! URLs: src/http/url.rs) and write an answer that carries the reason. A `ping` parses a
//! shorter line and writes `{}`.
//!
//! Each part is the median of several rounds of a tight loop on warm caches, so it is a
//! lower bound of what the same part costs inside a round trip. The JSON parse here is
//! serde_json's plain `Value` parse: sp's own (src/json.rs) adds duplicate-key, depth and
//! memory checks on top. Compare the sum of the extras with 0.3x bench_compare's `ping`
//! round trip: the room a denial has within "a denied call <= 1.3x a ping".
//!
//! Then the whole of it: sp's own pipeline in process (`Server::serve` over 20,000
//! pipelined denials, then as many pings, written to a sink), no system call per request.
//! The difference per request is all a denial costs beyond a ping's work.

// Its report is this program's output.
#![allow(clippy::print_stdout, clippy::disallowed_macros)]

use std::hint::black_box;
use std::time::Instant;

use sallyport::fuzzing::{
    Authorized, ExecError, Executor, HttpAction, HttpOutcome, Options, Policy, ProtocolWriter, RunContext, Server, SshAction, SshError, SshOutcome,
};
use serde_json::{json, Value};

const ROUNDS: usize = 7;
const N: u32 = 200_000;

/// The median of `ROUNDS` rounds of `round`.
fn median(mut round: impl FnMut() -> f64) -> f64 {
    let mut rounds: Vec<f64> = (0..ROUNDS).map(|_| round()).collect();
    rounds.sort_by(f64::total_cmp);
    rounds[ROUNDS / 2]
}

/// Median ns per call of `f` over `ROUNDS` rounds of `N` calls.
fn time(mut f: impl FnMut()) -> f64 {
    median(|| {
        let t = Instant::now();
        for _ in 0..N {
            f();
        }
        t.elapsed().as_nanos() as f64 / f64::from(N)
    })
}

/// Denials never reach an executor.
struct Never;

impl Executor for Never {
    fn http(&mut self, _: &Authorized<HttpAction>, _: &mut RunContext<'_, '_>) -> Result<HttpOutcome, ExecError> {
        unreachable!("a denied call reached the executor")
    }
    fn ssh(&mut self, _: &Authorized<SshAction>, _: &mut RunContext<'_, '_>) -> Result<SshOutcome, SshError> {
        unreachable!("a denied call reached the executor")
    }
}

/// Median ns per request of `sp`'s pipeline over a session of `n` copies of `line`
/// (the handshake's two lines first), in process.
fn pipeline(policy: &Policy, line: &str, n: usize) -> f64 {
    let init = r#"{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"bench","version":"1"}}}"#;
    let mut input = format!("{init}\n{{\"jsonrpc\":\"2.0\",\"method\":\"notifications/initialized\"}}\n");
    for _ in 0..n {
        input.push_str(line);
        input.push('\n');
    }
    median(|| {
        let mut server = Server::new(policy, Never, Options { cancel_on_eof: false, ..Options::default() });
        let mut out = ProtocolWriter::new(std::io::sink());
        let input = std::io::Cursor::new(input.clone().into_bytes());
        let t = Instant::now();
        server.serve(input, &mut out);
        t.elapsed().as_nanos() as f64 / n as f64
    })
}

fn main() {
    let url = "http://127.0.0.1:9/x";
    let call = json!({"jsonrpc":"2.0","id":17,"method":"tools/call","params":{"name":"http_request","arguments":{"method":"DELETE","url":url}}}).to_string();
    let ping = r#"{"jsonrpc":"2.0","id":17,"method":"ping"}"#;
    let reason = "SP_DENIED: no http.allow rule permits DELETE 127.0.0.1:9/x";
    let refusal = json!({"jsonrpc":"2.0","id":17,"result":{
        "content":[{"type":"text","text":reason}],
        "isError":true,
        "structuredContent":{"error":{"code":"SP_DENIED","message":&reason[11..]}}}});
    let pong = json!({"jsonrpc":"2.0","id":17,"result":{}});

    let url_parse = time(|| {
        black_box(url::Url::parse(black_box(url)).ok());
    });
    let parse_call = time(|| {
        black_box(serde_json::from_str::<Value>(black_box(&call)).ok());
    });
    let parse_ping = time(|| {
        black_box(serde_json::from_str::<Value>(black_box(ping)).ok());
    });
    let mut out = Vec::with_capacity(1024);
    let mut write = |v: &Value| {
        time(|| {
            out.clear();
            serde_json::to_writer(&mut out, black_box(v)).ok();
            black_box(&out);
        })
    };
    let write_refusal = write(&refusal);
    let write_pong = write(&pong);

    let extra = url_parse + (parse_call - parse_ping) + (write_refusal - write_pong);
    println!("the unavoidable parts of a denied call (examples/bench_parts.rs; median of {ROUNDS} x {N}, warm caches)");
    println!("  url::Url::parse({url:?})                    {url_parse:6.0} ns   (a ping has none)");
    println!("  JSON parse of the request line: call {parse_call:4.0} ns, ping {parse_ping:4.0} ns   extra {:6.0} ns", parse_call - parse_ping);
    println!("  JSON write of the answer: refusal {write_refusal:4.0} ns, pong {write_pong:4.0} ns     extra {:6.0} ns", write_refusal - write_pong);
    println!("  sum of the extras                                  {extra:6.0} ns");
    let policy = Policy::from_text(
        r#"{"http":{"allow":[{"hosts":["127.0.0.1:9"],"methods":["GET"]}]},"audit":{"path":null}}"#,
        std::path::Path::new("bench_parts.json"),
    )
    .expect("the bench policy parses");
    let n = 20_000;
    let denied = pipeline(&policy, &call, n);
    let pinged = pipeline(&policy, ping, n);
    println!(
        "  sp's pipeline in process, {n} pipelined requests, journal off: denial {denied:.0} ns, ping {pinged:.0} ns   extra {:6.0} ns",
        denied - pinged
    );
    println!("  (a denied call <= 1.3x a ping leaves 0.3x the ping round trip for all of the denial's own work;");
    println!("   with bench_compare's ping of P µs that is 300 x P ns, to hold these parts and the policy, the");
    println!("   arguments, the reason and sp's stricter JSON checks)");
}
