//! Issue 8, through the built binary: the path the policy matched is the path the
//! server got (point 5), method and path overrides never reach the server (point 6),
//! and the command line (global flags before `audit`, a malformed `--anchor`).
//!
//! Attacks tried:
//! - point 5: URLs with `%2e`/`%2E` dot segments, `;` params, empty segments, `%3F`,
//!   `%23`, `%25`, upper and lower case hex, multibyte UTF-8, `'()*,=:@!$&` sent to a
//!   loopback server; the decoded request-line path equals the path `sallyport::tools`
//!   matched, for every one (held). `%+9x`, `%4`, a trailing `%`: refused with
//!   SP_BAD_ARGUMENTS and zero requests at the server (held).
//! - point 6: every override header in three letter cases and with `_`, `_method` and
//!   friends in the URL query, the `query` argument, form, JSON and multipart bodies,
//!   on a credentialed `POST /ok/*`: SP_BAD_ARGUMENTS and zero requests (held).
//! - CLI: `sp -q audit verify F`, `sp -v audit ...` work; `sp -c X audit`, an
//!   `--anchor` that is not 64 hex digits exit 2 with nothing on stdout (held).
#![allow(
    clippy::disallowed_methods,
    reason = "tests and benchmarks start sp, sshd and clients and read their environment; the fence in clippy.toml is for src/"
)]

use crate::support;

use serde_json::{json, Value};

use support::http_server::TestServer;
use support::process::{initialize, initialized, lines, run_sp, tool_call, tool_error_code, Launch, Session, TempDir};

/// A policy for the loopback server: credential `ok` (bearer) bound to `POST /ok/*`,
/// every method allowed on every path of that host; no journal.
fn setup(port: u16) -> (TempDir, std::path::PathBuf) {
    let dir = TempDir::new("args");
    let secret = dir.file("ok.token", b"s3cret-args-token\n", 0o600);
    let host = format!("127.0.0.1:{port}");
    let policy = json!({
        "credentials": {
            "ok": {"source": {"file": secret.display().to_string()}, "inject": {"bearer": {}}, "hosts": [host], "paths": ["/ok/*"], "methods": ["POST"]}
        },
        "http": {"allow": [{"hosts": [host], "methods": ["*"]}]},
        "audit": {"path": null}
    });
    let path = dir.file("policy.json", policy.to_string().as_bytes(), 0o600);
    (dir, path)
}

fn ready(policy: &std::path::Path) -> Session {
    let mut s = Session::start(Launch::mcp(policy, &[]));
    s.ready("2025-06-18");
    s
}

/// The call must be refused as bad arguments and the server must see no connection.
fn refused(s: &mut Session, server: &TestServer, id: i64, args: Value, want: &str) {
    server.settle();
    let before = server.accepted();
    let result = s.tool(id, "http_request", args.clone());
    assert_eq!(tool_error_code(&result), Some("SP_BAD_ARGUMENTS"), "{args}: {result}");
    let text = result.to_string();
    assert!(text.contains(want), "{args}: want {want:?} in {text}");
    server.settle();
    assert_eq!(server.accepted(), before, "{args}: a refused request reached the server");
}

/// The path the policy matches for `url`, computed by the library itself.
fn matched_path(url: &str) -> String {
    let call = sallyport::call_request(Some(json!({"name": "http_request", "arguments": {"method": "GET", "url": url}}))).unwrap();
    match sallyport::ToolCall::parse(&call).unwrap() {
        sallyport::ToolCall::Http(r) => r.match_path,
        _ => unreachable!(),
    }
}

/// `%XX` decoding, as a server does; `None` for anything else after a `%`.
fn server_decode(path: &str) -> Option<String> {
    let b = path.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'%' {
            let hex = std::str::from_utf8(b.get(i + 1..i + 3)?).ok()?;
            if !hex.bytes().all(|c| c.is_ascii_hexdigit()) {
                return None;
            }
            out.push(u8::from_str_radix(hex, 16).ok()?);
            i += 3;
        } else {
            out.push(b[i]);
            i += 1;
        }
    }
    String::from_utf8(out).ok()
}

#[test]
fn the_server_gets_the_path_the_policy_matched() {
    let server = TestServer::start();
    let (_dir, policy) = setup(server.port);
    let mut s = ready(&policy);
    let base = server.base();
    let mut id = 10;
    for path in [
        "/open/a%2e/b",
        "/open/%2e%2E/x/./y",
        "/open/a;b=c/d",
        "/open//x//",
        "/open/%3F%23%25/x",
        "/open/%c3%A9t%C3%a9",
        "/open/'()*,=:@!$&+~",
        "/open/x%2525y",
        "/open/%7euser?q=%3F&r=%2F",
    ] {
        id += 1;
        let url = format!("{base}{path}");
        let before = server.requests().len();
        let result = s.tool(id, "http_request", json!({"method": "GET", "url": url}));
        assert_eq!(result["isError"], false, "{url}: {result}");
        let seen = server.requests();
        assert_eq!(seen.len(), before + 1, "{url}: want one request");
        let target = &seen[before].target;
        let wire = target.split('?').next().unwrap_or_default();
        assert_eq!(server_decode(wire), Some(matched_path(&url)), "{url}: request line target {target}");
    }
    for bad in ["/open/%+9x", "/open/%4", "/open/x%", "/open/%-1"] {
        id += 1;
        refused(&mut s, &server, id, json!({"method": "GET", "url": format!("{base}{bad}")}), "two hex digits");
    }
    s.finish().assert_exit(0);
}

#[test]
fn credentialed_requests_cannot_change_their_method_or_path() {
    let server = TestServer::start();
    let (_dir, policy) = setup(server.port);
    let mut s = ready(&policy);
    let url = format!("{}/ok/x", server.base());
    let mut id = 10;
    // The setup works: this call is credentialed and reaches the server.
    let before = server.requests().len();
    let ok = s.tool(1, "http_request", json!({"method": "POST", "url": url, "body": "{}"}));
    assert_eq!(ok["isError"], false, "{ok}");
    assert_eq!(server.requests()[before].header("authorization"), Some("Bearer s3cret-args-token"));
    for name in sallyport::OVERRIDE_HEADERS {
        let mixed: String = name.split('-').map(|w| w[..1].to_uppercase() + &w[1..]).collect::<Vec<_>>().join("-");
        for h in [name.to_string(), name.to_uppercase(), mixed.clone(), mixed.replace('-', "_")] {
            id += 1;
            let value = if name.contains("method") { "DELETE" } else { "/admin" };
            refused(&mut s, &server, id, json!({"method": "POST", "url": url, "headers": {h.clone(): value}, "body": "{}"}), &h);
        }
    }
    for name in sallyport::OVERRIDE_PARAMS {
        for p in [name.to_string(), name.to_uppercase()] {
            for args in [
                json!({"method": "POST", "url": format!("{url}?{p}=DELETE"), "body": "{}"}),
                json!({"method": "POST", "url": url, "query": {p.clone(): "DELETE"}, "body": "{}"}),
                json!({"method": "POST", "url": url, "body": format!("a=1&{p}=DELETE")}),
                json!({"method": "POST", "url": url, "body": json!({p.clone(): "DELETE"}).to_string()}),
                json!({"method": "POST", "url": url, "body": format!("--b\r\nContent-Disposition: form-data; name=\"{p}\"\r\n\r\nDELETE\r\n--b--\r\n")}),
            ] {
                id += 1;
                refused(&mut s, &server, id, args, "another method or path");
            }
        }
    }
    for q in ["%5Fmethod", ".method", "a=1;_method"] {
        id += 1;
        refused(&mut s, &server, id, json!({"method": "POST", "url": format!("{url}?{q}=DELETE"), "body": "{}"}), "another method or path");
    }
    let run = s.finish();
    run.assert_exit(0);
    assert!(!String::from_utf8_lossy(&run.stdout).contains("s3cret-args-token"));
}

/// Issue 8, small points: `sp -q audit verify F` is not a usage error, and a malformed
/// `--anchor` exits 2 (usage), not 1 (a broken journal). Stdout carries only the
/// command's own output, and nothing at all on a usage error.
#[test]
fn global_flags_before_audit_work_and_a_malformed_anchor_is_a_usage_error() {
    let dir = TempDir::new("args-audit");
    let journal = dir.join("audit.jsonl");
    let policy = dir.file("policy.json", json!({"audit": {"path": journal}}).to_string().as_bytes(), 0o600);
    let input = lines(&[initialize(json!(1), "2025-06-18"), initialized(), tool_call(2, "sp_inventory", json!({}))]);
    Launch::mcp(&policy, &[]).run(&input).assert_exit(0);

    let mut last_hash = String::new();
    for flags in [&[][..], &["-q"], &["-v"], &["-vv", "-q"], &["--quiet"]] {
        let mut args = flags.to_vec();
        args.extend(["audit", "verify", journal.as_str()]);
        let run = run_sp(&args, &[], b"");
        run.assert_exit(0);
        let out = String::from_utf8(run.stdout.clone()).expect("UTF-8 stdout");
        let lines: Vec<&str> = out.lines().collect();
        assert_eq!(lines.len(), 2, "{args:?}: {out:?}");
        assert!(lines[0].starts_with(&format!("{journal}: ok: ")), "{args:?}: {out:?}");
        last_hash = lines[1].strip_prefix("last hash: ").unwrap_or_else(|| panic!("{args:?}: {out:?}")).to_owned();
    }
    let run = run_sp(&["-q", "audit", "tail", &journal, "-n", "1", "--json"], &[], b"");
    run.assert_exit(0);
    assert_eq!(run.stdout.iter().filter(|b| **b == b'\n').count(), 1, "{}", run.context());

    // The right anchor, in either case: whole.
    for anchor in [last_hash.clone(), last_hash.to_uppercase()] {
        run_sp(&["-q", "audit", "verify", &journal, "--anchor", &anchor], &[], b"").assert_exit(0);
    }
    // A well-formed anchor that is not in the file: the journal is not whole (1).
    let absent = "1".repeat(64);
    let run = run_sp(&["audit", "verify", &journal, "--anchor", &absent], &[], b"");
    run.assert_exit(1);
    assert!(String::from_utf8_lossy(&run.stdout).contains("the anchor"), "{}", run.context());

    // Usage errors: exit 2, nothing on stdout, one line on stderr naming the reason.
    let long = "a".repeat(65);
    let bad_digit = format!("{}g", "a".repeat(63));
    for (args, want) in [
        (vec!["audit", "verify", &journal, "--anchor", "ab"], "--anchor takes a row's hash: 64 hex digits"),
        (vec!["-q", "audit", "verify", &journal, "--anchor", &long], "--anchor takes a row's hash"),
        (vec!["audit", "verify", &journal, "--anchor", &bad_digit], "--anchor takes a row's hash"),
        (vec!["audit", "verify", &journal, "--anchor", ""], "--anchor takes a row's hash"),
        (vec!["-c", "/nonexistent", "audit", "verify", &journal], "--config does not apply to sp audit"),
        (vec!["--close-on-refusal", "audit", "verify", &journal], "--close-on-refusal only applies to sp mcp"),
        (vec!["-q", "audit", "verify"], "needs a journal FILE"),
        (vec!["mcp", "audit"], "unexpected argument"),
    ] {
        let run = run_sp(&args, &[], b"");
        run.assert_exit(2);
        assert!(run.stdout.is_empty(), "{args:?}: stdout must be empty\n{}", run.context());
        assert!(run.stderr.starts_with("sp: ") && run.stderr.contains(want), "{args:?}: want {want:?}\n{}", run.context());
        assert_eq!(run.stderr.lines().count(), 1, "{args:?}: one line on stderr\n{}", run.context());
    }
}
