//! Full MCP sessions through the built `sp mcp` against a real HTTP server on loopback
//! (`support::http_server`), with a policy and owner-only secret files in a temp dir.
//!
//! What must hold: an authorized `http_request` reaches the server exactly once, carrying
//! the credential the policy injects; the agent's side (the whole of stdout) never holds
//! the secret, even when the server echoes it back in its body or headers; statuses are
//! results; a credentialed request never follows a redirect (an uncredentialed one
//! follows same-origin hops only); denials, timeouts and refused connections are
//! `isError` results with stable codes; proxy variables in the environment are ignored; the exit summary on stderr
//! counts executions and rejections right.
#![allow(
    clippy::disallowed_methods,
    reason = "tests and benchmarks start sp, sshd and clients and read their environment; the fence in clippy.toml is for src/"
)]

use crate::support;

use base64::Engine as _;
use serde_json::{json, Value};

use support::http_server::{Echo, Recorded, Reply, TestServer};
use support::process::{canary, tool_error_code, Launch, Run, Session, TempDir};

/// Temp dir with two secret files (mode 0600) and a policy for `127.0.0.1:PORT`:
/// - credential `api` (bearer) bound to `/v1/*`, `keyed` (`X-Api-Key: Token {secret}`)
///   bound to `/k/*`;
/// - GET, HEAD and POST allowed on `/v1/*`, `/k/*` and `/open/*` (uncredentialed);
/// - GET allowed on `127.0.0.1:dead_port` (nothing listens there).
struct Setup {
    dir: TempDir,
    policy: std::path::PathBuf,
    api_secret: String,
    keyed_secret: String,
}

fn setup(port: u16, dead_port: u16, http_limits: Value) -> Setup {
    let dir = TempDir::new("http");
    let api_secret = canary();
    let keyed_secret = canary();
    let api_path = dir.file("api.token", format!("{api_secret}\n").as_bytes(), 0o600);
    let keyed_path = dir.file("keyed.token", keyed_secret.as_bytes(), 0o600);
    let host = format!("127.0.0.1:{port}");
    let mut http = json!({"allow": [
        {"hosts": [host], "methods": ["GET", "HEAD", "POST"], "paths": ["/v1/*", "/k/*", "/open/*"]},
        {"hosts": [format!("127.0.0.1:{dead_port}")], "methods": ["GET"]}
    ]});
    for (k, v) in http_limits.as_object().expect("limits object") {
        http[k] = v.clone();
    }
    let policy = json!({
        "credentials": {
            "api": {"source": {"file": api_path.display().to_string()}, "inject": {"bearer": {}}, "hosts": [host], "paths": ["/v1/*"]},
            "keyed": {
                "source": {"file": keyed_path.display().to_string()},
                "inject": {"header": {"name": "X-Api-Key", "format": "Token {secret}"}},
                "hosts": [host],
                "paths": ["/k/*"]
            }
        },
        "http": http
    });
    let policy = dir.file("policy.json", policy.to_string().as_bytes(), 0o600);
    Setup { dir, policy, api_secret, keyed_secret }
}

/// A port on 127.0.0.1 with nothing listening (bound once, then released).
fn dead_port() -> u16 {
    let l = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    l.local_addr().unwrap().port()
}

fn ready(launch: Launch) -> Session {
    let mut s = Session::start(launch);
    let init = s.ready("2025-06-18");
    assert_eq!(init["protocolVersion"], "2025-06-18");
    s
}

/// Calls `http_request`; the server must see exactly one new request. Returns the tool
/// result and that request.
fn exec_once(s: &mut Session, server: &TestServer, id: i64, args: Value) -> (Value, Recorded) {
    let (result, mut seen) = exec_n(s, server, id, args, 1);
    (result, seen.remove(0))
}

/// Calls `http_request`; the server must see exactly `n` new requests (redirect hops).
fn exec_n(s: &mut Session, server: &TestServer, id: i64, args: Value, n: usize) -> (Value, Vec<Recorded>) {
    let before = server.requests().len();
    let result = s.tool(id, "http_request", args.clone());
    let seen = server.requests();
    assert_eq!(seen.len(), before + n, "{args}: want exactly {n} request(s) at the server, result {result}");
    (result, seen[before..].to_vec())
}

/// Calls `http_request`; it must be denied and the server must see no connection.
fn denied(s: &mut Session, server: &TestServer, id: i64, args: Value) -> Value {
    server.settle();
    let before = server.accepted();
    let result = s.tool(id, "http_request", args.clone());
    assert_eq!(tool_error_code(&result), Some("SP_DENIED"), "{args}: {result}");
    server.settle();
    assert_eq!(server.accepted(), before, "{args}: a denied request reached the server");
    result
}

fn sc(result: &Value) -> &Value {
    &result["structuredContent"]
}

fn assert_ok(result: &Value, status: u64) {
    assert_eq!(result["isError"], false, "{result}");
    assert_eq!(sc(result)["status"], status, "{result}");
    // The text block carries the same structured result.
    let text = result["content"][0]["text"].as_str().expect("a text block");
    assert_eq!(serde_json::from_str::<Value>(text).expect("text is JSON"), *sc(result));
}

fn assert_no_secret(run: &Run, secrets: &[&str], hidden: &[&str]) {
    let out = String::from_utf8_lossy(&run.stdout);
    for s in secrets {
        assert!(!out.contains(s), "a secret reached the agent (stdout)\n{}", run.context());
        assert!(!run.stderr.contains(s), "a secret reached stderr\n{}", run.context());
    }
    for h in hidden {
        assert!(!out.contains(h), "{h:?} reached the agent (stdout)\n{}", run.context());
    }
}

#[test]
fn initialize_negotiates_the_protocol_version() {
    let server = TestServer::start();
    let st = setup(server.port, 9, json!({}));
    for (asked, want) in [
        ("2025-06-18", "2025-06-18"),
        ("2025-11-25", "2025-11-25"),
        ("2025-03-26", "2025-03-26"),
        ("2024-11-05", "2024-11-05"),
        ("1999-01-01", "2025-11-25"),
        ("2026-07-28", "2025-11-25"),
    ] {
        let mut s = Session::start(Launch::mcp(&st.policy, &[]));
        let init = s.ready(asked);
        assert_eq!(init["protocolVersion"], want, "asked {asked}: {init}");
        assert!(init["capabilities"]["tools"].is_object(), "{init}");
        assert_eq!(init["serverInfo"]["name"], "sallyport");
        let pong = s.call(&json!({"jsonrpc": "2.0", "id": "p", "method": "ping"}));
        assert_eq!(pong["result"], json!({}));
        let run = s.finish();
        run.protocol();
        run.assert_exit(0);
    }
}

#[test]
fn tools_list_offers_http_request_and_inventory() {
    let server = TestServer::start();
    let st = setup(server.port, 9, json!({}));
    let mut s = ready(Launch::mcp(&st.policy, &[]));
    let list = s.call(&json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}));
    let tools = list["result"]["tools"].as_array().unwrap_or_else(|| panic!("no tools: {list}"));
    let names: Vec<&str> = tools.iter().filter_map(|t| t["name"].as_str()).collect();
    // ssh_exec joins them once the SSH issue lands.
    assert!(names.contains(&"http_request") && names.contains(&"sp_inventory"), "{list}");
    assert!(names.iter().all(|n| ["http_request", "http_get", "sp_inventory", "ssh_exec"].contains(n)), "{list}");
    for t in tools {
        let schema = &t["inputSchema"];
        assert_eq!(schema["type"], "object", "{t}");
        assert_eq!(schema["additionalProperties"], false, "{t}");
        assert!(t["description"].as_str().is_some_and(|d| !d.is_empty()), "{t}");
    }
    let http = &tools.iter().find(|t| t["name"] == "http_request").expect("http_request")["inputSchema"];
    assert_eq!(http["required"], json!(["method", "url"]));
    for p in ["method", "url", "headers", "query", "body", "credential"] {
        assert!(http["properties"][p].is_object(), "http_request lacks {p}: {http}");
    }
    let run = s.finish();
    run.protocol();
    run.assert_exit(0);
    server.settle();
    assert_eq!(server.accepted(), 0);
}

/// The main path, one session: inventory, credentialed requests (bearer and header
/// format), a POST, statuses, redirects, JSON, binary and truncated bodies, denials;
/// then the counters at exit.
#[test]
fn authorized_session_end_to_end() {
    let server = TestServer::start();
    let st = setup(server.port, 9, json!({"max_response_bytes": 4096}));
    let p = server.port;
    let url = |path: &str| format!("http://127.0.0.1:{p}{path}");
    server.echo_route("/v1/echo", Echo::Json);
    server.echo_route("/k/echo", Echo::Json);
    server.echo_route("/v1/binary", Echo::Binary);
    server.route("/open/missing", Reply::text(404, "no such thing"));
    server.route("/open/boom", Reply::json(500, r#"{"error":"internal"}"#));
    let elsewhere = TestServer::start();
    let redirect = |status: u16, to: String| {
        let mut r = Reply::text(status, "");
        r.headers.push(("Location".into(), to));
        r
    };
    server.route("/v1/redirect", redirect(302, url("/v1/target")));
    server.route("/open/redirect", redirect(302, url("/open/target")));
    server.route("/open/to-v1", redirect(302, url("/v1/target")));
    server.route("/open/away", redirect(307, format!("http://127.0.0.1:{}/open/x", elsewhere.port)));
    server.route("/open/json", Reply::json(200, r#"{"a":[1,2,{"b":null}],"s":"\u00e9"}"#));
    server.route("/open/big", Reply::text(200, &"0123456789".repeat(1000)));

    let mut s = ready(Launch::mcp(&st.policy, &["-vv"]));

    // sp_inventory: names and hosts, never a secret or where it lives.
    let inv = s.tool(10, "sp_inventory", json!({}));
    assert_eq!(inv["isError"], false, "{inv}");
    let creds = &sc(&inv)["http"]["credentials"];
    let names: Vec<&str> = creds.as_array().unwrap().iter().filter_map(|c| c["name"].as_str()).collect();
    assert_eq!(names, ["api", "keyed"], "{inv}");
    assert_eq!(creds[0]["hosts"], json!([format!("127.0.0.1:{p}")]), "{inv}");
    let inv_text = inv.to_string();
    assert!(inv_text.contains(&format!("127.0.0.1:{p}")), "{inv}");
    for hidden in [&st.api_secret, &st.keyed_secret, &st.dir.join(""), &"api.token".to_owned(), &"keyed.token".to_owned()] {
        assert!(!inv_text.contains(hidden.as_str()), "inventory shows {hidden:?}: {inv}");
    }

    // Bearer: the server gets the secret; the echo of it comes back redacted.
    let (r, seen) = exec_once(&mut s, &server, 11, json!({"method": "GET", "url": url("/v1/echo")}));
    assert_ok(&r, 200);
    assert_eq!(seen.header("authorization"), Some(format!("Bearer {}", st.api_secret).as_str()));
    let echoed = sc(&r)["json"]["authorization"].as_str().unwrap_or_else(|| panic!("echo body missing: {r}"));
    assert!(echoed.starts_with("Bearer ") && echoed.contains("REDACTED"), "the echo was not scrubbed as expected: {echoed}");
    let echoed_header = sc(&r)["headers"]["x-echo-authorization"].as_str().unwrap_or_else(|| panic!("echo header missing: {r}"));
    assert!(echoed_header.contains("REDACTED"), "{echoed_header}");

    // Header injection with a format; naming the credential explicitly.
    let (r, seen) = exec_once(&mut s, &server, 12, json!({"method": "GET", "url": url("/k/echo"), "credential": "keyed"}));
    assert_ok(&r, 200);
    assert_eq!(seen.header("x-api-key"), Some(format!("Token {}", st.keyed_secret).as_str()));
    assert_eq!(seen.header("authorization"), None, "only the named credential is sent");
    assert!(sc(&r)["json"]["x-api-key"].as_str().is_some_and(|v| v.starts_with("Token ") && v.contains("REDACTED")), "{r}");

    // POST with a body and the agent's own header.
    let body = r#"{"name":"widget","n":3}"#;
    let (r, seen) = exec_once(
        &mut s,
        &server,
        13,
        json!({"method": "POST", "url": url("/v1/items"), "headers": {"Content-Type": "application/json", "X-Trace": "t-1"}, "body": body}),
    );
    assert_ok(&r, 200);
    assert_eq!((seen.method.as_str(), seen.target.as_str()), ("POST", "/v1/items"));
    assert_eq!(seen.body, body.as_bytes());
    assert_eq!(seen.header("content-type"), Some("application/json"));
    assert_eq!(seen.header("x-trace"), Some("t-1"));
    assert_eq!(seen.header("content-length"), Some(body.len().to_string().as_str()));

    // Statuses are results.
    let (r, seen) = exec_once(&mut s, &server, 14, json!({"method": "GET", "url": url("/open/missing")}));
    assert_ok(&r, 404);
    assert_eq!(sc(&r)["body"], "no such thing", "{r}");
    assert_eq!(seen.header("authorization"), None, "no credential is bound to /open");
    let (r, _) = exec_once(&mut s, &server, 15, json!({"method": "GET", "url": url("/open/boom")}));
    assert_ok(&r, 500);
    assert_eq!(sc(&r)["json"], json!({"error": "internal"}), "{r}");

    // A request that carries a credential never follows a redirect: the 3xx is data.
    let (r, seen) = exec_once(&mut s, &server, 16, json!({"method": "GET", "url": url("/v1/redirect")}));
    assert_ok(&r, 302);
    assert_eq!(sc(&r)["headers"]["location"], url("/v1/target"), "{r}");
    assert_eq!(sc(&r)["redirect_refused"], true, "{r}");
    assert_eq!(seen.target, "/v1/redirect");
    // Uncredentialed, same origin: followed (issue #3), every hop at the server once.
    let (r, seen) = exec_n(&mut s, &server, 24, json!({"method": "GET", "url": url("/open/redirect")}), 2);
    assert_ok(&r, 200);
    assert_eq!(sc(&r)["final_url"], url("/open/target"), "{r}");
    let targets: Vec<&str> = seen.iter().map(|r| r.target.as_str()).collect();
    assert_eq!(targets, ["/open/redirect", "/open/target"]);
    assert!(seen.iter().all(|r| r.header("authorization").is_none()));
    // Uncredentialed, same origin, into a credentialed path: the hop carries no credential.
    let (r, seen) = exec_n(&mut s, &server, 26, json!({"method": "GET", "url": url("/open/to-v1")}), 2);
    assert_eq!(r["isError"], false, "{r}");
    assert_eq!(seen[1].target, "/v1/target");
    assert_eq!(seen[1].header("authorization"), None, "a redirect hop picked up a credential");
    // Uncredentialed, to another origin: not followed; the other server sees nothing.
    let (r, seen) = exec_once(&mut s, &server, 25, json!({"method": "GET", "url": url("/open/away")}));
    assert_ok(&r, 307);
    assert_eq!(sc(&r)["redirect_refused"], true, "{r}");
    assert_eq!(seen.target, "/open/away");
    elsewhere.settle();
    assert_eq!(elsewhere.accepted(), 0, "a cross-origin redirect was followed");

    // JSON comes back as `json`.
    let (r, _) = exec_once(&mut s, &server, 17, json!({"method": "GET", "url": url("/open/json")}));
    assert_ok(&r, 200);
    assert_eq!(sc(&r)["json"], json!({"a": [1, 2, {"b": null}], "s": "é"}), "{r}");
    assert_eq!(sc(&r)["truncated"], false);
    assert!(sc(&r).get("body").is_none(), "{r}");

    // A body that is not UTF-8 comes back as base64, and the secret echoed inside it is
    // scrubbed before encoding.
    let (r, seen) = exec_once(&mut s, &server, 18, json!({"method": "GET", "url": url("/v1/binary")}));
    assert_ok(&r, 200);
    assert_eq!(seen.header("authorization"), Some(format!("Bearer {}", st.api_secret).as_str()));
    let b64 = sc(&r)["body_base64"].as_str().unwrap_or_else(|| panic!("no body_base64: {r}"));
    let raw = base64::engine::general_purpose::STANDARD.decode(b64).expect("valid base64");
    assert!(raw.starts_with(&[0xff, 0xfe]), "{raw:?}");
    let lossy = String::from_utf8_lossy(&raw);
    assert!(lossy.contains("authorization: Bearer "), "the echo is there: {lossy}");
    assert!(!lossy.contains(&st.api_secret), "the secret came back inside body_base64: {lossy}");

    // Truncation at max_response_bytes.
    let (r, _) = exec_once(&mut s, &server, 19, json!({"method": "GET", "url": url("/open/big")}));
    assert_ok(&r, 200);
    assert_eq!(sc(&r)["truncated"], true, "{r}");
    let cut = sc(&r)["body"].as_str().unwrap_or_else(|| panic!("no body: {r}"));
    assert_eq!(cut.len(), 4096);
    assert_eq!(cut, &"0123456789".repeat(1000)[..4096]);

    // Denials: no connection at all.
    let d = denied(&mut s, &server, 20, json!({"method": "DELETE", "url": url("/v1/items/1")}));
    assert!(sc(&d)["error"]["message"].as_str().is_some_and(|m| m.contains("http.allow")), "the reason names the rule: {d}");
    denied(&mut s, &server, 21, json!({"method": "GET", "url": url("/admin")}));
    denied(&mut s, &server, 22, json!({"method": "GET", "url": url("/v1/echo"), "credential": "keyed"}));

    // After refusals the next request is unaffected.
    let (r, seen) = exec_once(&mut s, &server, 23, json!({"method": "GET", "url": url("/v1/echo")}));
    assert_ok(&r, 200);
    assert_eq!(seen.header("authorization"), Some(format!("Bearer {}", st.api_secret).as_str()));

    let run = s.finish();
    run.protocol();
    run.assert_exit(0);
    assert_no_secret(&run, &[&st.api_secret, &st.keyed_secret], &[&st.dir.join(""), "api.token", "keyed.token"]);
    server.settle();
    assert_eq!(server.accepted(), server.requests().len(), "one connection per request, nothing else");
    assert_eq!(server.requests().len(), 15);
    let to_v1_target = server.requests().iter().filter(|r| r.target == "/v1/target").count();
    assert_eq!(to_v1_target, 1, "only the uncredentialed hop reaches /v1/target; a credentialed redirect was followed");
    assert_eq!(run.summary(), "sp: session ended (Eof): executions=14 [http_request:ok=13 sp_inventory:ok=1] rejections=3 [denied=3]", "{}", run.context());
}

#[test]
fn timeout_is_an_sp_timeout_result() {
    let server = TestServer::start();
    let st = setup(server.port, 9, json!({"timeout_s": 1}));
    server.route("/open/slow", Reply { delay_ms: 3000, ..Reply::text(200, "late") });
    let mut s = ready(Launch::mcp(&st.policy, &[]));
    let (r, _) = exec_once(&mut s, &server, 1, json!({"method": "GET", "url": format!("http://127.0.0.1:{}/open/slow", server.port)}));
    assert_eq!(tool_error_code(&r), Some("SP_TIMEOUT"), "{r}");
    let run = s.finish();
    run.protocol();
    run.assert_exit(0);
    assert_eq!(run.summary(), "sp: session ended (Eof): executions=1 [http_request:SP_TIMEOUT=1] rejections=0 []", "{}", run.context());
}

#[test]
fn connection_refused_is_sp_unavailable() {
    let server = TestServer::start();
    let dead = dead_port();
    let st = setup(server.port, dead, json!({}));
    let mut s = ready(Launch::mcp(&st.policy, &[]));
    let r = s.tool(1, "http_request", json!({"method": "GET", "url": format!("http://127.0.0.1:{dead}/anything")}));
    assert_eq!(tool_error_code(&r), Some("SP_UNAVAILABLE"), "{r}");
    let message = sc(&r)["error"]["message"].as_str().unwrap_or_default();
    assert!(message.contains(&format!("127.0.0.1:{dead}")), "{message}");
    let run = s.finish();
    run.protocol();
    run.assert_exit(0);
    assert_eq!(run.summary(), "sp: session ended (Eof): executions=1 [http_request:SP_UNAVAILABLE=1] rejections=0 []", "{}", run.context());
    assert_eq!(server.accepted(), 0);
}

#[test]
fn proxy_variables_are_ignored() {
    let server = TestServer::start();
    let proxy = TestServer::start();
    server.echo_route("/v1/echo", Echo::Json);
    let st = setup(server.port, 9, json!({}));
    let proxy_url = format!("http://127.0.0.1:{}", proxy.port);
    let mut launch = Launch::mcp(&st.policy, &[]);
    for var in ["HTTP_PROXY", "http_proxy", "HTTPS_PROXY", "https_proxy", "ALL_PROXY", "all_proxy"] {
        launch = launch.env(var, &proxy_url);
    }
    let mut s = ready(launch);
    for (id, path) in [(1, "/v1/echo"), (2, "/open/x")] {
        let (r, seen) = exec_once(&mut s, &server, id, json!({"method": "GET", "url": format!("http://127.0.0.1:{}{path}", server.port)}));
        assert_ok(&r, 200);
        assert_eq!(seen.target, path, "sent directly, not in proxy form");
    }
    let run = s.finish();
    run.protocol();
    run.assert_exit(0);
    proxy.settle();
    assert_eq!(proxy.accepted(), 0, "the proxy from the environment was used: {:?}", proxy.requests());
    assert_no_secret(&run, &[&st.api_secret], &[]);
}

/// A response cut at `max_response_bytes` in the middle of an echoed secret: the part
/// before the cut is a prefix of the secret, which whole-value redaction alone would
/// miss. An agent that can pad the echo picks where the cut falls, so it could read all
/// but the last character. `Vault::scrub_truncated_tail` replaces such a tail.
/// (Regression test: the prefix used to reach the agent.)
#[test]
fn truncation_inside_an_echoed_secret_leaks_no_prefix() {
    let server = TestServer::start();
    let pad = "x".repeat(100);
    let body_len = pad.len() + "Bearer ".len() + canary().len();
    // The cap falls one byte before the end of the secret.
    let st = setup(server.port, 9, json!({"max_response_bytes": body_len - 1}));
    let secret = &st.api_secret;
    server.route("/v1/leak", Reply::text(200, &format!("{pad}Bearer {secret}")));
    let mut s = ready(Launch::mcp(&st.policy, &[]));
    let (r, seen) = exec_once(&mut s, &server, 1, json!({"method": "GET", "url": format!("http://127.0.0.1:{}/v1/leak", server.port)}));
    assert_eq!(seen.header("authorization"), Some(format!("Bearer {secret}").as_str()));
    assert_ok(&r, 200);
    assert_eq!(sc(&r)["truncated"], true, "{r}");
    let run = s.finish();
    run.protocol();
    let prefix = &secret[..secret.len() - 1];
    assert!(!String::from_utf8_lossy(&run.stdout).contains(prefix), "all but the last character of the secret reached the agent: {}", sc(&r)["body"]);
}

/// Routing headers (sp-policy(5), REQUEST OVERRIDES) on a credentialed request: refused
/// before anything is sent, unless the credential's `allow_routing_headers` names the
/// header; then it goes out as written. Without a credential they are ordinary headers.
/// Attacks tried: X-Forwarded-Host, Forwarded, X_Forwarded_Host, X-Original-Host,
/// X-Rewrite-Uri, X-Envoy-Original-Url, Destination, X-Host on `/v1/*` (credential
/// `api`): refused; X-Forwarded-Proto, allowed by name as `X_FORWARDED_PROTO`: sent.
#[test]
fn routing_headers_on_credentialed_requests_need_permission_by_name() {
    let server = TestServer::start();
    let dir = TempDir::new("routing");
    let secret = canary();
    let token = dir.file("api.token", secret.as_bytes(), 0o600);
    let host = format!("127.0.0.1:{}", server.port);
    let policy = json!({
        "credentials": {"api": {"source": {"file": token.display().to_string()}, "inject": {"bearer": {}}, "hosts": [host], "paths": ["/v1/*"], "allow_routing_headers": ["X_FORWARDED_PROTO"]}},
        "http": {"allow": [{"hosts": [host], "methods": ["GET"]}]}
    });
    let policy = dir.file("policy.json", policy.to_string().as_bytes(), 0o600);
    let mut s = ready(Launch::mcp(&policy, &[]));
    let url = format!("http://{host}/v1/x");
    for (id, h) in ["X-Forwarded-Host", "Forwarded", "X_Forwarded_Host", "X-Original-Host", "X-Rewrite-Uri", "X-Envoy-Original-Url", "Destination", "X-Host"]
        .into_iter()
        .enumerate()
    {
        let r = denied(&mut s, &server, id as i64 + 1, json!({"method": "GET", "url": url, "headers": {h: "evil.example"}}));
        let text = r["content"][0]["text"].as_str().unwrap_or_default();
        assert!(text.contains(&format!("header {:?} could route credential \"api\"", h.to_ascii_lowercase())), "{h}: {text}");
    }
    let (r, seen) = exec_once(&mut s, &server, 20, json!({"method": "GET", "url": url, "headers": {"X-Forwarded-Proto": "https"}}));
    assert_ok(&r, 200);
    assert_eq!((seen.header("x-forwarded-proto"), seen.header("authorization")), (Some("https"), Some(format!("Bearer {secret}").as_str())));
    let (r, seen) =
        exec_once(&mut s, &server, 21, json!({"method": "GET", "url": format!("http://{host}/open"), "headers": {"X-Forwarded-Host": "other.example"}}));
    assert_ok(&r, 200);
    assert_eq!((seen.header("x-forwarded-host"), seen.header("authorization")), (Some("other.example"), None));
    s.finish();
}
