//! The floor for `make bench` (examples/bench_compare.rs): the least an MCP stdio server
//! can do. Std only, no crate: it reads stdin line by line and answers `initialize` and
//! `ping` with canned lines (the request's id spliced in), anything else that has an id
//! with a canned "method not found". No JSON parser, no policy, no journal.
//!
//! bench_compare builds it with plain `rustc` (static, for x86_64-unknown-linux-musl,
//! when that target is installed), so it never links the sallyport crate.

// Stdout is this program's protocol stream, as it is sp's (where only src/out.rs may
// name it); the floor has no other output.
#![allow(clippy::disallowed_methods)]

use std::io::{BufRead, Write};

const INIT: &str = r#"{"protocolVersion":"2025-06-18","capabilities":{"tools":{}},"serverInfo":{"name":"floor","version":"1"}}"#;

/// The text after `"id":` up to the next `,` or `}`: enough for the bench's numeric ids.
fn id(line: &str) -> Option<&str> {
    let rest = &line[line.find("\"id\":")? + 5..];
    let end = rest.find([',', '}'])?;
    Some(rest[..end].trim())
}

fn main() {
    let stdin = std::io::stdin();
    let mut stdout = std::io::stdout().lock();
    let mut line = String::new();
    let mut input = stdin.lock();
    loop {
        line.clear();
        match input.read_line(&mut line) {
            Ok(0) | Err(_) => return,
            Ok(_) => {}
        }
        let Some(id) = id(&line) else { continue };
        let answer = if line.contains("\"method\":\"initialize\"") {
            format!("{{\"jsonrpc\":\"2.0\",\"id\":{id},\"result\":{INIT}}}\n")
        } else if line.contains("\"method\":\"ping\"") {
            format!("{{\"jsonrpc\":\"2.0\",\"id\":{id},\"result\":{{}}}}\n")
        } else {
            format!("{{\"jsonrpc\":\"2.0\",\"id\":{id},\"error\":{{\"code\":-32601,\"message\":\"Method not found\"}}}}\n")
        };
        if stdout.write_all(answer.as_bytes()).and_then(|()| stdout.flush()).is_err() {
            return;
        }
    }
}
