//! Issue 8 point 2: a reflecting server echoes the injected secret in the spellings real
//! servers produce; through the real `sp mcp` binary and the loopback test server, no
//! spelling of the canary may reach stdout, and `on_echo: "withhold"` withholds the body
//! and headers that carried one.
//!
//! Attacks tried (all held after this change; the ones marked "was open" leaked before):
//! - the secret upper-cased (was open); hex lower and upper (was open);
//! - HTML references, decimal and hex (was open);
//! - `\uXXXX` escapes in NDJSON and JSONP bodies, not one JSON value (was open);
//! - every byte percent-encoded in lower case (was open) and double percent-encoding
//!   (was open);
//! - base64 and base64url of the secret at stream offsets 1 and 2, padded or not (was open);
//! - a `basic` credential's password alone (was open);
//! - the secret as a response header name (was open) and split across two header lines
//!   (was open);
//! - a JSON body parsed into `structuredContent` with the secret `\u`-escaped in a value;
//! - a body cut at `max_response_bytes` inside an HTML-encoded echo, so only a prefix of
//!   the secret is there, cut in the middle of an escape (was open: the prefix leaked).
#![allow(
    clippy::disallowed_methods,
    reason = "tests and benchmarks start sp, sshd and clients and read their environment; the fence in clippy.toml is for src/"
)]

use crate::support;

use base64::Engine as _;
use serde_json::{json, Value};

use support::http_server::{Reply, TestServer};
use support::process::{canary, Launch, Session, TempDir};

struct Setup {
    _dir: TempDir,
    policy: std::path::PathBuf,
    api: String,
    password: String,
    held: String,
}

fn setup(port: u16) -> Setup {
    setup_with(port, json!({}))
}

fn setup_with(port: u16, limits: Value) -> Setup {
    let dir = TempDir::new("redact");
    let (api, password, held) = (canary(), canary(), canary());
    let api_path = dir.file("api.token", api.as_bytes(), 0o600);
    let basic_path = dir.file("basic.token", format!("alice:{password}").as_bytes(), 0o600);
    let held_path = dir.file("held.token", held.as_bytes(), 0o600);
    let host = format!("127.0.0.1:{port}");
    let policy = json!({
        "credentials": {
            "api": {"source": {"file": api_path}, "inject": {"bearer": {}}, "hosts": [host], "paths": ["/v1/*"]},
            "basic": {"source": {"file": basic_path}, "inject": {"basic": {}}, "hosts": [host], "paths": ["/b/*"]},
            "held": {"source": {"file": held_path}, "inject": {"bearer": {}}, "hosts": [host], "paths": ["/w/*"], "on_echo": "withhold"}
        },
        "http": {"allow": [{"hosts": [host], "methods": ["GET"], "paths": ["/v1/*", "/b/*", "/w/*"]}]}
    });
    let mut policy = policy;
    for (k, v) in limits.as_object().expect("limits") {
        policy["http"][k] = v.clone();
    }
    let policy = dir.file("policy.json", policy.to_string().as_bytes(), 0o600);
    Setup { _dir: dir, policy, api, password, held }
}

/// The spellings of `s` that a reflecting server produces, each as a body.
fn spellings(s: &str) -> Vec<(&'static str, String)> {
    use base64::engine::general_purpose::{STANDARD, STANDARD_NO_PAD, URL_SAFE, URL_SAFE_NO_PAD};
    let hex: String = s.bytes().map(|b| format!("{b:02x}")).collect();
    let pct_lower: String = s.bytes().map(|b| format!("%{b:02x}")).collect();
    let pct_upper: String = s.bytes().map(|b| format!("%{b:02X}")).collect();
    let uesc: String = s.chars().map(|c| format!("\\u{:04x}", c as u32)).collect();
    vec![
        ("upper case", s.to_ascii_uppercase()),
        ("hex lower", hex.clone()),
        ("hex upper", hex.to_uppercase()),
        ("html decimal", s.chars().map(|c| format!("&#{};", c as u32)).collect()),
        ("html hex", s.chars().map(|c| format!("&#x{:x};", c as u32)).collect()),
        ("ndjson \\u", format!("{{\"a\":\"{uesc}\"}}\n{{\"b\":1}}\n")),
        ("jsonp \\u", format!("cb({{\"t\":\"{uesc}\"}});")),
        ("cut json \\u", format!("{{\"t\":\"{uesc}")),
        ("percent every byte lower", pct_lower),
        ("percent every byte upper", pct_upper.clone()),
        ("double percent", pct_upper.replace('%', "%25")),
        ("base64 offset 1", STANDARD.encode(format!("x{s}"))),
        ("base64 offset 2", STANDARD.encode(format!("xy{s}z"))),
        ("base64 offset 1 no pad", STANDARD_NO_PAD.encode(format!("x{s}"))),
        ("base64url offset 2", URL_SAFE.encode(format!("xy{s}"))),
        ("base64url offset 1 no pad", URL_SAFE_NO_PAD.encode(format!("?{s}!!"))),
    ]
}

/// No planted spelling and no case variant of any secret is on stdout.
fn assert_clean(stdout: &[u8], secrets: &[&str], planted: &[String]) {
    let out = String::from_utf8_lossy(stdout).to_ascii_lowercase();
    for s in secrets {
        assert!(!out.contains(&s.to_ascii_lowercase()), "a secret reached stdout in some letter case");
    }
    for p in planted {
        // The survivors are compared whole: a marker must have replaced them.
        assert!(!out.contains(&p.to_ascii_lowercase()), "planted spelling reached stdout: {p:?}");
    }
}

fn get(s: &mut Session, id: i64, url: String) -> Value {
    s.tool(id, "http_request", json!({"method": "GET", "url": url}))
}

#[test]
fn no_spelling_of_an_echoed_secret_reaches_stdout() {
    let server = TestServer::start();
    let st = setup(server.port);
    let mut planted = Vec::new();
    let mut routes = Vec::new();
    for (i, (family, body)) in spellings(&st.api).into_iter().enumerate() {
        server.route(&format!("/v1/e{i}"), Reply::text(200, &format!("before {body} after")));
        routes.push((format!("/v1/e{i}"), family, "api"));
        planted.push(body);
    }
    // the basic password alone, and two of its spellings
    let pw = st.password.clone();
    for (i, body) in [pw.clone(), pw.to_ascii_uppercase(), base64::engine::general_purpose::STANDARD.encode(format!("a{pw}"))].into_iter().enumerate() {
        server.route(&format!("/b/e{i}"), Reply::text(200, &format!("pw={body};")));
        routes.push((format!("/b/e{i}"), "basic password", "basic"));
        planted.push(body);
    }
    // headers: the secret as a header name, and split across two header lines
    let half = st.api.len() / 2;
    let mut r = Reply::text(200, "headers");
    r.headers.push((st.api.clone(), "1".into()));
    r.headers.push(("X-Part-A".into(), st.api[..half].into()));
    r.headers.push(("X-Part-B".into(), st.api[half..].into()));
    server.route("/v1/h", r);
    routes.push(("/v1/h".into(), "header name and split header", "api"));
    // one JSON value whose string escapes the secret: parsed into structuredContent
    let uesc: String = st.api.chars().map(|c| format!("\\u{:04X}", c as u32)).collect();
    server.route("/v1/j", Reply::json(200, &format!("{{\"token\":\"{uesc}\"}}")));
    routes.push(("/v1/j".into(), "json value", "api"));

    let mut s = Session::start(Launch::mcp(&st.policy, &[]));
    s.ready("2025-06-18");
    for (i, (path, family, cred)) in routes.iter().enumerate() {
        let r = get(&mut s, i as i64 + 1, format!("{}{path}", server.base()));
        assert_eq!(r["isError"], false, "{family}: {r}");
        let text = r.to_string();
        assert!(text.contains(&format!("[REDACTED:{cred}]")), "{family}: no marker in {text}");
        if *path == "/v1/h" {
            // Each half is replaced in its own header. (A half is also a run of the
            // secret long enough to be redacted on its own, sp(1) REDACTION; when the
            // name before it happens to end with the secret's byte before that half, the
            // run takes that byte too: `x-part-[REDACTED:api]`. So names are matched by
            // their prefix.)
            let h = r["structuredContent"]["headers"].as_object().unwrap();
            let parts: Vec<&Value> = h.iter().filter(|(k, _)| k.starts_with("x-part-")).map(|(_, v)| v).collect();
            assert_eq!(parts, [&json!("[REDACTED:api]"), &json!("[REDACTED:api]")], "{h:?}");
        }
    }
    let run = s.finish();
    run.protocol();
    assert_clean(&run.stdout, &[&st.api, &st.password], &planted);
}

#[test]
fn on_echo_withhold_withholds_body_and_headers_that_echo_the_secret() {
    let server = TestServer::start();
    let st = setup(server.port);
    let hex: String = st.held.bytes().map(|b| format!("{b:02X}")).collect();
    server.route("/w/body", Reply::text(200, &format!("token={hex}")));
    let mut r = Reply::text(200, "nothing here");
    r.headers.push(("X-Echo".into(), st.held.to_ascii_uppercase()));
    server.route("/w/head", r);
    server.route("/w/clean", Reply::text(200, "nothing here"));
    let mut s = Session::start(Launch::mcp(&st.policy, &[]));
    s.ready("2025-06-18");

    let body = get(&mut s, 1, format!("{}/w/body", server.base()));
    let sc = &body["structuredContent"];
    assert_eq!(sc["withheld"], "secret_echo", "{body}");
    assert_eq!(sc["withheld_parts"], json!(["body"]), "{body}");
    assert!(sc.get("body").is_none() && sc.get("json").is_none(), "{body}");
    assert!(sc["body_withheld"].as_str().unwrap().contains("\"held\""), "{body}");

    let head = get(&mut s, 2, format!("{}/w/head", server.base()));
    let sc = &head["structuredContent"];
    assert_eq!(sc["withheld_parts"], json!(["headers"]), "{head}");
    assert_eq!(sc["headers"], json!({}), "{head}");
    assert_eq!(sc["body"], "nothing here", "{head}");

    let clean = get(&mut s, 3, format!("{}/w/clean", server.base()));
    assert!(clean["structuredContent"].get("withheld").is_none(), "{clean}");
    assert_eq!(clean["structuredContent"]["body"], "nothing here");

    let run = s.finish();
    run.protocol();
    assert_clean(&run.stdout, &[&st.held], &[hex]);
}

#[test]
fn a_cut_inside_an_html_encoded_echo_leaks_no_prefix() {
    let server = TestServer::start();
    // the cap falls two bytes before the end: inside the last reference
    let cap = 400;
    let st = setup_with(server.port, json!({"max_response_bytes": cap}));
    let html: String = st.api.chars().map(|c| format!("&#{};", c as u32)).collect();
    let pad = "x".repeat(cap + 2 - html.len());
    server.route("/v1/cut", Reply::text(200, &format!("{pad}{html}")));
    let mut s = Session::start(Launch::mcp(&st.policy, &[]));
    s.ready("2025-06-18");
    let r = get(&mut s, 1, format!("{}/v1/cut", server.base()));
    assert_eq!(r["structuredContent"]["truncated"], true, "{r}");
    assert!(r["structuredContent"]["body"].as_str().unwrap().starts_with(&pad), "{r}");
    assert_eq!(r["structuredContent"]["body"], format!("{pad}[REDACTED:api]"), "{r}");
    let run = s.finish();
    run.protocol();
    let prefix: String = st.api.chars().take(4).map(|c| format!("&#{};", c as u32)).collect();
    assert_clean(&run.stdout, &[&st.api], &[prefix]);
}
