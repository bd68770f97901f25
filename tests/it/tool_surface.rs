//! The tool surface hosts decide trust by (sp(1), TOOLS): every advertised tool's
//! `outputSchema` accepts the `structuredContent` of real results, through the built
//! `sp` against a loopback HTTP server and a real sshd (successes, a truncated body, a
//! non-JSON body, a refused redirect, a denial, a timeout with partial output); the
//! names match `^[a-zA-Z0-9_-]{1,48}$`; titles and descriptions are short; `http_get`
//! is listed only when the policy allows GET or HEAD and refuses other methods
//! (`ssh_exec` only with an SSH host, `http_request` only with an allow rule);
//! `http_request` keeps `destructiveHint: true`.
//!
//! Attacks tried (all held):
//! - `http_get` with POST, with a body: `SP_BAD_ARGUMENTS`, nothing sent;
//! - `http_get` under a policy that allows only POST: not listed, and a call is
//!   denied by the policy (nothing sent);
//! - a schema that forgot a field: the validator names it (the check below fails
//!   when a property is removed: tried by hand on `final_url`).
#![allow(clippy::disallowed_methods, reason = "tests start sp and sshd and read their environment; the fence in clippy.toml is for src/")]

use crate::support;

use serde_json::{json, Value};

use support::http_server::{Reply, TestServer};
use support::process::{tool_error_code, Launch, Session, TempDir};
use support::sshd::{self, Sshd};

const VERSION: &str = "2025-11-25";

fn tools(s: &mut Session) -> Vec<Value> {
    let list = s.call(&json!({"jsonrpc": "2.0", "id": 900, "method": "tools/list"}));
    list["result"]["tools"].as_array().expect("tools").clone()
}

fn schema_of(tools: &[Value], name: &str) -> jsonschema::Validator {
    let t = tools.iter().find(|t| t["name"] == name).unwrap_or_else(|| panic!("{name} not listed"));
    jsonschema::validator_for(&t["outputSchema"]).unwrap_or_else(|e| panic!("{name}: the outputSchema is not a schema: {e}"))
}

fn assert_valid(v: &jsonschema::Validator, name: &str, result: &Value) {
    let sc = &result["structuredContent"];
    let errors: Vec<String> = v.iter_errors(sc).map(|e| format!("{} at {}", e, e.instance_path())).collect();
    assert!(errors.is_empty(), "{name}: structuredContent does not match its outputSchema: {errors:?}\n{sc}");
}

#[test]
fn real_results_match_their_output_schemas() {
    let server = TestServer::start();
    server.route("/json", Reply::json(200, r#"{"a":[1,2]}"#));
    server.route("/text", Reply::text(404, "not found"));
    server.route("/big", Reply::text(200, &"x".repeat(5000)));
    server.route("/bin", Reply { status: 200, headers: vec![], body: vec![0xff, 0xfe, 0x00], delay_ms: 0 });
    server.route("/redirect", Reply { status: 302, headers: vec![("Location".into(), "http://192.0.2.1/x".into())], body: vec![], delay_ms: 0 });
    let dir = TempDir::new("surface");
    let host = format!("127.0.0.1:{}", server.port);
    let mut policy = json!({
        "http": {"allow": [{"hosts": [host], "methods": ["GET", "HEAD", "POST"], "paths": ["/*"]}], "max_response_bytes": 1024},
        "credentials": {"api": {"source": {"file": dir.file("t", b"not-a-real-secret-surface", 0o600).display().to_string()}, "inject": {"bearer": {}}, "hosts": [host], "paths": ["/json"]}},
        "audit": {"path": null}
    });
    let sshd = sshd::available().then(Sshd::start);
    if let Some(d) = &sshd {
        let known = dir.file("known_hosts", format!("{}\n", d.known_hosts_line()).as_bytes(), 0o600);
        policy["ssh"] = json!({"known_hosts": known, "hosts": {"web1": {"address": "127.0.0.1", "port": d.port, "user": d.user, "auth": {"key_file": d.client_key}, "approve": false}}});
    } else {
        eprintln!("SKIPPED the ssh_exec part: no sshd on this machine");
    }
    let policy = dir.file("policy.json", policy.to_string().as_bytes(), 0o600);
    let mut s = Session::start(Launch::mcp(&policy, &[]));
    s.ready(VERSION);
    let tools = tools(&mut s);
    let names: Vec<&str> = tools.iter().filter_map(|t| t["name"].as_str()).collect();
    // ssh_exec is listed only with an SSH host (issue 32: only what the policy makes possible).
    let want: &[&str] =
        if sshd.is_some() { &["http_request", "http_get", "sp_inventory", "ssh_exec"] } else { &["http_request", "http_get", "sp_inventory"] };
    assert_eq!(names, want);
    let url = |p: &str| format!("{}{p}", server.base());
    let http = schema_of(&tools, "http_request");
    let get = schema_of(&tools, "http_get");
    let mut id = 0;
    let mut call = |s: &mut Session, name: &str, args: Value| {
        id += 1;
        s.tool(id, name, args)
    };
    for (path, method) in [("/json", "GET"), ("/text", "GET"), ("/big", "GET"), ("/bin", "GET"), ("/redirect", "GET"), ("/json", "HEAD"), ("/text", "POST")] {
        let r = call(&mut s, "http_request", json!({"method": method, "url": url(path)}));
        assert_valid(&http, "http_request", &r);
        if method != "POST" {
            let r = call(&mut s, "http_get", json!({"method": method, "url": url(path)}));
            assert_eq!(tool_error_code(&r), None, "{r}");
            assert_valid(&get, "http_get", &r);
        }
    }
    // Refusals have the error shape.
    let denied = call(&mut s, "http_request", json!({"method": "DELETE", "url": url("/json")}));
    assert_eq!(tool_error_code(&denied), Some("SP_DENIED"));
    assert_valid(&http, "http_request", &denied);
    for bad in [json!({"method": "POST", "url": url("/text")}), json!({"url": url("/text"), "body": "x"})] {
        let r = call(&mut s, "http_get", bad);
        assert_eq!(tool_error_code(&r), Some("SP_BAD_ARGUMENTS"), "{r}");
        assert_valid(&get, "http_get", &r);
    }
    let inv = call(&mut s, "sp_inventory", json!({}));
    assert_valid(&schema_of(&tools, "sp_inventory"), "sp_inventory", &inv);
    if sshd.is_some() {
        let ssh = schema_of(&tools, "ssh_exec");
        for args in [
            json!({"host": "web1", "command": "echo out; echo err >&2; exit 3"}),
            json!({"host": "web1", "command": "head -c 100000 /dev/zero | tr '\\0' x"}),
            json!({"host": "web1", "command": "echo started; sleep 30", "timeout_s": 1}),
            json!({"host": "nope", "command": "true"}),
        ] {
            let r = call(&mut s, "ssh_exec", args);
            assert_valid(&ssh, "ssh_exec", &r);
        }
    }
    s.finish().assert_exit(0);
    server.settle();
    // The refused http_get calls sent nothing: 7 + 6 requests, the DELETE none.
    assert_eq!(server.requests().len(), 13);
}

#[test]
fn names_titles_and_hints_are_what_hosts_expect() {
    let host_accepts = |name: &str| (1..=48).contains(&name.len()) && name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-');
    assert!(!host_accepts("http.request") && !host_accepts(&"a".repeat(49)) && host_accepts("ssh_exec"), "the checker itself");
    let dir = TempDir::new("surface-names");
    let policy = json!({"http": {"allow": [{"hosts": ["api.example.com"], "methods": ["GET"]}]}, "audit": {"path": null}});
    let policy = dir.file("policy.json", policy.to_string().as_bytes(), 0o600);
    let mut s = Session::start(Launch::mcp(&policy, &[]));
    s.ready(VERSION);
    let stateless = s.call(&json!({"jsonrpc": "2.0", "id": 901, "method": "tools/list", "params": {"_meta": {
        "io.modelcontextprotocol/protocolVersion": "2026-07-28", "io.modelcontextprotocol/clientCapabilities": {}}}}));
    for list in [tools(&mut s), stateless["result"]["tools"].as_array().unwrap().clone()] {
        assert!(!list.is_empty());
        for t in &list {
            let name = t["name"].as_str().unwrap();
            assert!(host_accepts(name), "{name}");
            assert!(t["title"].as_str().is_some_and(|x| x.len() <= 40), "{name}: title {}", t["title"]);
            assert!(
                t["description"].as_str().is_some_and(|x| x.len() <= 800),
                "{name}: description of {} bytes",
                t["description"].as_str().map_or(0, str::len)
            );
            assert_eq!(t["inputSchema"]["type"], "object", "{name}");
            assert_eq!(t["outputSchema"]["type"], "object", "{name}");
            let hints = &t["annotations"];
            let want = match name {
                "http_request" | "ssh_exec" => (json!(false), json!(true)),
                "http_get" => (json!(true), json!(false)),
                "sp_inventory" => (json!(true), Value::Null),
                other => panic!("unexpected tool {other}"),
            };
            assert_eq!((hints["readOnlyHint"].clone(), hints["destructiveHint"].clone()), want, "{name}");
        }
    }
    s.finish().assert_exit(0);
    // A policy without GET or HEAD: no http_get, and calling it anyway is denied.
    let server = TestServer::start();
    let policy = json!({"http": {"allow": [{"hosts": [format!("127.0.0.1:{}", server.port)], "methods": ["POST"]}]}, "audit": {"path": null}});
    let policy = dir.file("policy2.json", policy.to_string().as_bytes(), 0o600);
    let mut s = Session::start(Launch::mcp(&policy, &[]));
    s.ready(VERSION);
    let names: Vec<String> = tools(&mut s).iter().filter_map(|t| t["name"].as_str().map(str::to_owned)).collect();
    assert_eq!(names, ["http_request", "sp_inventory"]);
    let r = s.tool(1, "http_get", json!({"url": format!("{}/x", server.base())}));
    assert_eq!(tool_error_code(&r), Some("SP_DENIED"), "{r}");
    s.finish().assert_exit(0);
    server.settle();
    assert_eq!(server.accepted(), 0);
}
