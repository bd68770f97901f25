//! The malformed-input corpus (`tests/corpus/`, format in its README) at process level:
//! every case is piped into the built `sp mcp` (release binary, `--max-line-bytes 65536`)
//! with a policy that allows everything on a real loopback HTTP server and binds a
//! credential to it, so anything that slipped through validation would reach the network.
//!
//! For every case: stdout is protocol only and holds exactly the expected answers
//! (`support::corpus::check_output`); the exit status is 3 for `close` cases and 0
//! otherwise; the exit summary counts one rejection (none for `silent`) and no execution;
//! and the loopback server saw ZERO connections, except for `exec` cases, which must
//! produce exactly one request, to `/corpus/<name>`, carrying the credential.
//!
//! Each case gets its own server, and [`TestServer::settle`] runs after the process has
//! exited, so a connection cannot be missed or counted against the wrong case.
#![allow(
    clippy::disallowed_methods,
    reason = "tests and benchmarks start sp, sshd and clients and read their environment; the fence in clippy.toml is for src/"
)]

use crate::support;

use support::corpus::{self, Expect};
use support::http_server::TestServer;
use support::process::{canary, py_bytes, Launch, TempDir};

fn run_case(case: &corpus::Case, dir: &TempDir, token: &str) -> Result<(), String> {
    let server = TestServer::start();
    let policy = dir.file(&format!("{}.policy.json", case.name), corpus::policy_json(server.port).as_bytes(), 0o600);
    let max_line = corpus::MAX_LINE.to_string();
    let launch = Launch::mcp(&policy, &["--max-line-bytes", &max_line]).env("SP_CORPUS_TOKEN", token);
    let run = launch.run(&case.stdin(server.port));
    server.settle();
    let requests = server.requests();
    let accepted = server.accepted();
    let context = || {
        format!(
            "\n  reason: {}\n  command: {}\n  stdout: {}\n  stderr: {}\n  server saw: {} connection(s), {:?}",
            case.reason,
            run.cmd,
            py_bytes(&run.stdout),
            run.stderr.trim_end().replace('\n', "\n          "),
            accepted,
            requests.iter().map(|r| format!("{} {}", r.method, r.target)).collect::<Vec<_>>()
        )
    };
    let fail = |what: String| Err(format!("{}: {what}{}", case.name, context()));

    // Network first: it is the one that matters most.
    match &case.expect {
        Expect::Exec => {
            let want = format!("/corpus/{}", case.name);
            let bearer = format!("Bearer {token}");
            match requests.as_slice() {
                [one] if one.target == want && one.header("authorization") == Some(bearer.as_str()) && accepted == 1 => {}
                _ => return fail(format!("want exactly one request to {want} with the credential")),
            }
        }
        _ if accepted != 0 => return fail("REJECTED INPUT REACHED THE NETWORK".into()),
        _ => {}
    }
    if let Err(e) = corpus::check_output(case, &run.stdout) {
        return fail(e);
    }
    let want_code = if matches!(case.expect, Expect::Close(_)) { 3 } else { 0 };
    if run.code() != Some(want_code) {
        return fail(format!("exit status {:?}, want {want_code}", run.status));
    }
    let Some(summary) = support::process::summary_line(&run.stderr) else {
        return fail("no session summary on stderr".into());
    };
    let count = |key: &str| -> Option<u64> { summary.split_once(&format!("{key}="))?.1.split(' ').next()?.parse().ok() };
    let (executions, rejections) = (count("executions"), count("rejections"));
    let want = match case.expect {
        Expect::Exec => (Some(1), Some(0)),
        Expect::Silent => (Some(0), Some(0)),
        _ => (Some(0), Some(1)),
    };
    if (executions, rejections) != want {
        return fail(format!("counters: want executions={:?} rejections={:?}, summary {summary:?}", want.0, want.1));
    }
    if String::from_utf8_lossy(&run.stdout).contains(token) || run.stderr.contains(token) {
        return fail("the corpus token leaked".into());
    }
    Ok(())
}

#[test]
fn every_case_through_the_binary() {
    let cases = corpus::load();
    assert!(cases.len() >= 40, "the corpus lost cases: {}", cases.len());
    assert!(cases.iter().any(|c| c.expect == Expect::Exec), "no exec control case: the harness could not prove it sees executions");
    let dir = TempDir::new("corpus");
    let token = canary();
    // A few workers; each case has its own server and process.
    let workers = 4;
    let chunks: Vec<Vec<corpus::Case>> = (0..workers).map(|w| cases.iter().skip(w).step_by(workers).cloned().collect()).collect();
    let failures: Vec<String> = std::thread::scope(|scope| {
        let handles: Vec<_> =
            chunks.iter().map(|chunk| scope.spawn(|| chunk.iter().filter_map(|case| run_case(case, &dir, &token).err()).collect::<Vec<_>>())).collect();
        handles.into_iter().flat_map(|h| h.join().expect("worker")).collect()
    });
    assert!(failures.is_empty(), "{} of {} corpus cases failed at process level:\n{}", failures.len(), cases.len(), failures.join("\n\n"));
}
