//! Issue #3 through the built binary: TLS with a private CA generated at test time, the
//! https-only rule, and redirects across host, port and scheme. Real loopback servers
//! (plain and HTTPS); every "not followed" case asserts the second server saw nothing and
//! every credentialed case asserts the credential reached only the first.
#![allow(
    clippy::disallowed_methods,
    reason = "tests and benchmarks start sp, sshd and clients and read their environment; the fence in clippy.toml is for src/"
)]

use crate::support;

use serde_json::{json, Value};

use support::http_server::{Reply, TestServer};
use support::process::{canary, tool_error_code, tool_call, Launch, Session, TempDir};
use support::tls::{https_server, pki};

struct Setup {
    _dir: TempDir,
    policy: std::path::PathBuf,
    secret: String,
}

/// A policy allowing GET on every given host (exact, so loopback is reachable), a bearer
/// credential `api` bound to `/v1/*` on the first host, and `http` extras merged in.
fn setup(hosts: &[String], http_extra: Value, ca_pem: Option<&str>) -> Setup {
    let dir = TempDir::new("tls");
    let secret = canary();
    let token = dir.file("api.token", format!("{secret}\n").as_bytes(), 0o600);
    let mut http = json!({"allow": [{"hosts": hosts, "methods": ["GET", "POST"]}]});
    for (k, v) in http_extra.as_object().unwrap() {
        http[k] = v.clone();
    }
    if let Some(pem) = ca_pem {
        let ca = dir.file("ca.pem", pem.as_bytes(), 0o644);
        http["ca_file"] = json!(ca.display().to_string());
    }
    let policy = json!({
        "credentials": {"api": {"source": {"file": token.display().to_string()}, "inject": {"bearer": {}}, "hosts": [hosts[0]], "paths": ["/v1/*"]}},
        "http": http
    });
    let policy = dir.file("policy.json", policy.to_string().as_bytes(), 0o600);
    Setup { _dir: dir, policy, secret }
}

fn session(st: &Setup) -> Session {
    let mut s = Session::start(Launch::mcp(&st.policy, &[]));
    s.ready("2025-06-18");
    s
}

fn get(s: &mut Session, id: i64, url: String) -> Value {
    let r = s.call(&tool_call(id, "http_request", json!({"method": "GET", "url": url})));
    r["result"].clone()
}

fn host(server: &TestServer) -> String {
    format!("127.0.0.1:{}", server.port)
}

#[test]
fn https_with_the_policy_ca() {
    let pki = pki("sp test CA");
    let server = https_server(&pki);
    let st = setup(&[host(&server)], json!({}), Some(&pki.ca_pem));
    let mut s = session(&st);
    let r = get(&mut s, 1, format!("https://127.0.0.1:{}/v1/x", server.port));
    assert_eq!(r["isError"], false, "{r}");
    assert_eq!(r["structuredContent"]["status"], 200, "{r}");
    let seen = server.requests();
    assert_eq!(seen.len(), 1);
    assert_eq!(seen[0].header("authorization"), Some(format!("Bearer {}", st.secret).as_str()));
    s.finish().protocol();
}

#[test]
fn https_refused_without_a_trusted_ca() {
    let pki = pki("sp test CA");
    let other = support::tls::pki("another CA");
    let server = https_server(&pki);
    // Built-in public roots only, then a policy CA that did not sign the server.
    for ca in [None, Some(other.ca_pem.as_str())] {
        let st = setup(&[host(&server)], json!({}), ca);
        let mut s = session(&st);
        let r = get(&mut s, 1, format!("https://127.0.0.1:{}/v1/x", server.port));
        assert_eq!(tool_error_code(&r), Some("SP_UNAVAILABLE"), "{r}");
        assert!(r["structuredContent"]["error"]["message"].as_str().unwrap().contains("TLS"), "{r}");
        s.finish().protocol();
    }
    assert!(server.requests().is_empty(), "a request crossed an untrusted TLS connection");
}

#[test]
fn https_only_refuses_http_before_connecting() {
    let server = TestServer::start();
    let st = setup(&[host(&server)], json!({"https_only": true}), None);
    let mut s = session(&st);
    let r = get(&mut s, 1, format!("http://127.0.0.1:{}/open", server.port));
    assert_eq!(tool_error_code(&r), Some("SP_DENIED"), "{r}");
    s.finish().protocol();
    server.settle();
    assert_eq!(server.accepted(), 0);
}

#[test]
fn redirects_stay_on_their_origin() {
    let a = TestServer::start();
    let b = TestServer::start();
    let pki = pki("sp test CA");
    let tls = https_server(&pki);
    let st = setup(&[host(&a), host(&b), host(&tls)], json!({}), Some(&pki.ca_pem));
    let to = |server: &TestServer, path: &str| format!("http://127.0.0.1:{}{path}", server.port);
    a.route("/cross-port", Reply { status: 302, headers: vec![("Location".into(), to(&b, "/landing"))], body: vec![], delay_ms: 0 });
    a.route(
        "/cross-host",
        Reply { status: 302, headers: vec![("Location".into(), format!("http://localhost:{}/landing", a.port))], body: vec![], delay_ms: 0 },
    );
    a.route("/same", Reply { status: 301, headers: vec![("Location".into(), "/landing?x=1".into())], body: vec![], delay_ms: 0 });
    a.route("/loop", Reply { status: 302, headers: vec![("Location".into(), "/loop".into())], body: vec![], delay_ms: 0 });
    a.route("/v1/credentialed", Reply { status: 307, headers: vec![("Location".into(), "/v1/next".into())], body: vec![], delay_ms: 0 });
    tls.route("/downgrade", Reply { status: 302, headers: vec![("Location".into(), to(&b, "/landing"))], body: vec![], delay_ms: 0 });
    let mut s = session(&st);

    let r = get(&mut s, 1, to(&a, "/cross-port"));
    assert_eq!((r["structuredContent"]["status"].clone(), r["structuredContent"]["redirect_refused"].clone()), (json!(302), json!(true)), "{r}");
    let r = get(&mut s, 2, to(&a, "/cross-host"));
    assert_eq!(r["structuredContent"]["redirect_refused"], true, "{r}");
    let r = get(&mut s, 3, format!("https://127.0.0.1:{}/downgrade", tls.port));
    assert_eq!(r["structuredContent"]["redirect_refused"], true, "{r}");
    b.settle();
    assert_eq!(b.accepted(), 0, "a redirect crossed to another port or scheme");

    let r = get(&mut s, 4, to(&a, "/same"));
    let sc = &r["structuredContent"];
    assert_eq!((sc["status"].clone(), sc["redirects"].clone(), sc["redirect_refused"].clone()), (json!(200), json!(1), json!(false)), "{r}");
    assert!(sc["final_url"].as_str().unwrap().ends_with("/landing?x=1"), "{r}");

    let r = get(&mut s, 5, to(&a, "/loop"));
    let sc = &r["structuredContent"];
    assert_eq!((sc["status"].clone(), sc["redirects"].clone(), sc["redirect_refused"].clone()), (json!(302), json!(5), json!(true)), "{r}");

    let before = a.requests().len();
    let r = get(&mut s, 6, to(&a, "/v1/credentialed"));
    assert_eq!(r["structuredContent"]["redirect_refused"], true, "{r}");
    assert!(r["structuredContent"]["redirect_reason"].as_str().unwrap().contains("credential"), "{r}");
    let seen = a.requests();
    assert_eq!(seen.len(), before + 1, "a credentialed request followed its redirect");
    assert!(seen.iter().all(|q| q.target != "/v1/next"));
    // Only the credentialed path ever saw the secret; every other request went bare.
    for q in seen.iter().chain(b.requests().iter()).chain(tls.requests().iter()) {
        let has = q.header("authorization").is_some_and(|v| v.contains(&st.secret));
        assert_eq!(has, q.target.starts_with("/v1/"), "{} {:?}", q.target, q.header("authorization"));
    }
    s.finish().protocol();
}
