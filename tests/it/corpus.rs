//! The malformed-input corpus (`tests/corpus/`), in-process: every case goes through
//! `Server::serve` (the same entry point `sp mcp` feeds with real stdin) with a recording
//! executor placed exactly behind authorization. A rejected case must leave it with zero
//! calls. `tests/process_corpus.rs` runs the same cases against the built binary and a
//! real loopback HTTP server.
#![allow(
    clippy::disallowed_methods,
    reason = "tests and benchmarks start sp, sshd and clients and read their environment; the fence in clippy.toml is for src/"
)]

use crate::support;

use sallyport::{Authorized, HttpAction};
use sallyport::{ExecError, Executor, HttpOutcome, RunContext, SshError, SshOutcome};
use sallyport::SshAction;
use sallyport::ProtocolWriter;
use sallyport::{Exit, Options, Server};
use serde_json::Value;

use support::corpus::{self, Expect};

/// Records every action that reaches execution; never touches the network.
#[derive(Default)]
struct Recording {
    calls: Vec<String>,
}

impl Executor for Recording {
    fn http(&mut self, action: &Authorized<HttpAction>, _ctx: &mut RunContext<'_, '_>) -> Result<HttpOutcome, ExecError> {
        self.calls.push(action.action().url.to_string());
        Ok(HttpOutcome { status: 200, headers: vec![], body: b"{}".to_vec(), truncated: false })
    }

    /// `ssh <host> <command>`: the corpus commands end with `/corpus/<name>`.
    fn ssh(&mut self, action: &Authorized<SshAction>, _ctx: &mut RunContext<'_, '_>) -> Result<SshOutcome, SshError> {
        let a = action.action();
        self.calls.push(format!("ssh {} {}", a.host, a.command));
        Ok(SshOutcome { host: a.host.clone(), exit_status: Some(0), ..SshOutcome::default() })
    }
}

const PORT: u16 = 9;

#[test]
fn every_case_in_process() {
    let cases = corpus::load();
    assert!(cases.len() >= 40, "the corpus lost cases: {}", cases.len());
    let policy = corpus::policy(PORT);
    let mut failures = Vec::new();
    for case in &cases {
        let input = case.stdin(PORT);
        let mut server = Server::new(&policy, Recording::default(), Options { max_line_bytes: corpus::MAX_LINE, cancel_on_eof: false, ..Options::default() });
        let mut out = ProtocolWriter::new(Vec::new());
        let exit = server.serve(std::io::Cursor::new(input.clone()), &mut out);
        let raw = out.into_inner();
        let calls = server.executor().calls.clone();
        let want_exit = if matches!(case.expect, Expect::Close(_)) { Exit::Malformed } else { Exit::Eof };
        let result = corpus::check_output(case, &raw).and_then(|()| {
            if exit != want_exit {
                return Err(format!("exit {exit:?}, want {want_exit:?}"));
            }
            match (&case.expect, calls.as_slice()) {
                (Expect::Exec, [one]) if one.ends_with(&format!("/corpus/{}", case.name)) => Ok(()),
                (Expect::Exec, other) => Err(format!("want exactly one call to /corpus/{}, got {other:?}", case.name)),
                (_, []) => Ok(()),
                (_, other) => Err(format!("REJECTED INPUT REACHED THE EXECUTOR: {other:?}")),
            }
        });
        let stats = &server.stats;
        let result = result.and_then(|()| match case.expect {
            Expect::Exec if stats.executed() == 1 && stats.rejected() == 0 => Ok(()),
            Expect::Silent if stats.executed() == 0 && stats.rejected() == 0 => Ok(()),
            Expect::Close(_) | Expect::Open(_) | Expect::Tool(_) if stats.executed() == 0 && stats.rejected() == 1 => Ok(()),
            _ => Err(format!("counters wrong: {}", stats.summary())),
        });
        if let Err(e) = result {
            failures.push(format!("{}: {e}\n  reason: {}\n  output: {}", case.name, case.reason, String::from_utf8_lossy(&raw)));
        }
    }
    assert!(failures.is_empty(), "{} of {} corpus cases failed:\n{}", failures.len(), cases.len(), failures.join("\n"));
}

/// After a refused request, the next valid one inherits nothing: same answer as in a
/// fresh session, and the refused arguments are nowhere in it.
#[test]
fn refusal_leaves_no_trace() {
    let policy = corpus::policy(PORT);
    let run = |lines: &[&str]| {
        let mut input = corpus::prelude_ready();
        for l in lines {
            input.extend_from_slice(l.as_bytes());
            input.push(b'\n');
        }
        let mut server = Server::new(&policy, Recording::default(), Options { cancel_on_eof: false, ..Options::default() });
        let mut out = ProtocolWriter::new(Vec::new());
        let exit = server.serve(std::io::Cursor::new(input.clone()), &mut out);
        let lines: Vec<Value> = out.into_inner().split(|b| *b == b'\n').filter(|l| !l.is_empty()).map(|l| serde_json::from_slice(l).unwrap()).collect();
        (exit, lines, server.executor().calls.clone())
    };
    let good = r#"{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"http_request","arguments":{"method":"GET","url":"http://127.0.0.1:9/corpus/after"}}}"#;
    let refused = [
        r#"{"jsonrpc":"2.0","id":6,"method":"tools/call","params":{"name":"http_request","arguments":{"method":"GET","url":"http://127.0.0.1:9/corpus/refused","headers":{"Authorization":"Bearer stolen"}}}}"#,
        r#"{"jsonrpc":"2.0","id":6,"method":"tools/call","params":{"name":"http_request","arguments":{"method":"GET","url":"http://127.0.0.1:9/corpus/refused","credential":"nope"}}}"#,
        r#"{"jsonrpc":"2.0","id":6,"method":"tools/call","params":{"name":"http_request","arguments":"x"}}"#,
        r#"{"jsonrpc":"2.0","id":6,"method":"nope/refused","params":{"headers":{"X-Refused":"1"}}}"#,
    ];
    let (_, fresh, fresh_calls) = run(&[good]);
    for r in refused {
        let (exit, lines, calls) = run(&[r, good]);
        assert_eq!(exit, Exit::Eof, "{r}");
        assert_eq!(lines.len(), 3, "{r}: {lines:?}");
        assert_eq!(lines[2], fresh[1], "{r}: the valid call's answer changed after a refusal");
        assert_eq!(calls, fresh_calls, "{r}");
        assert_eq!(calls, vec!["http://127.0.0.1:9/corpus/after".to_string()]);
    }
}

/// `--close-on-refusal`: a refused request ends the session (exit 4) and the next
/// request is never read.
#[test]
fn close_on_refusal() {
    let policy = corpus::policy(PORT);
    let mut input = corpus::prelude_ready();
    input.extend_from_slice(br#"{"jsonrpc":"2.0","id":1,"method":"nope"}"#);
    input.extend_from_slice(b"\n");
    input.extend_from_slice(br#"{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"http_request","arguments":{"method":"GET","url":"http://127.0.0.1:9/corpus/x"}}}"#);
    input.extend_from_slice(b"\n");
    let mut server = Server::new(&policy, Recording::default(), Options { close_on_refusal: true, cancel_on_eof: false, ..Options::default() });
    let mut out = ProtocolWriter::new(Vec::new());
    assert_eq!(server.serve(std::io::Cursor::new(input.clone()), &mut out), Exit::Refused);
    assert_eq!(Exit::Refused.code(), 4);
    assert!(server.executor().calls.is_empty());
    assert_eq!(out.written(), 2, "init answer and the -32601 only");
}

/// The ssh control: a valid `ssh_exec` through the same entry point reaches the recorder
/// exactly once (so the ssh cases' `calls == []` means something), and an allowed
/// command on the listed host does too.
#[test]
fn ssh_control_reaches_the_recorder() {
    let policy = corpus::policy(PORT);
    let mut input = corpus::prelude_ready();
    for (id, host, command) in [(1, "corpus", "echo /corpus/ssh_control; id"), (2, "corpus-listed", "systemctl status nginx")] {
        let call = serde_json::json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
            "params": {"name": "ssh_exec", "arguments": {"host": host, "command": command}}});
        input.extend_from_slice(call.to_string().as_bytes());
        input.push(b'\n');
    }
    let mut server = Server::new(&policy, Recording::default(), Options { cancel_on_eof: false, ..Options::default() });
    let mut out = ProtocolWriter::new(Vec::new());
    assert_eq!(server.serve(std::io::Cursor::new(input.clone()), &mut out), Exit::Eof);
    assert_eq!(server.executor().calls, vec!["ssh corpus echo /corpus/ssh_control; id", "ssh corpus-listed systemctl status nginx"]);
    assert_eq!((server.stats.executed(), server.stats.rejected()), (2, 0), "{}", server.stats.summary());
    let raw = out.into_inner();
    let answers: Vec<Value> = raw.split(|b| *b == b'\n').filter(|l| !l.is_empty()).map(|l| serde_json::from_slice(l).unwrap()).collect();
    assert_eq!(answers[1]["result"]["structuredContent"]["exit_status"], 0, "{answers:?}");
    assert_eq!(answers[1]["result"]["isError"], false);
}
