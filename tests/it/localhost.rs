//! RFC 6761 section 6.3 (issue 11): `localhost` and names under `.localhost` are the
//! loopback addresses, answered without asking the resolver, for HTTP destinations and SSH
//! host addresses alike. A static `sp` in an empty root has no `/etc/hosts`; asking the
//! resolver there waits for DNS and fails.
//!
//! The lookups here are injected and count their calls: the evidence that the resolver
//! was not asked is a zero count, and the injected answer (a documentation address that
//! must never be dialed) must not appear among the checked addresses.
//!
//! Attacks tried (all held):
//! - a resolver that answers `localhost` with a public address (a poisoned `/etc/hosts`
//!   or DNS): ignored, the answer is loopback and the resolver is not asked;
//! - `LOCALHOST`, `localhost.`, `api.Localhost.`: the same;
//! - look-alikes that are NOT special and go to the resolver: `localhost.example.com`,
//!   `notlocalhost`, `localhostx`, `.localhost`, `a..localhost`;
//! - a `*.localhost` name through the HTTP check without an exact rule: loopback is
//!   private, so it stays refused (the rule does not widen what a wildcard reaches).
//! - a credential bound to `localhost:PORT` over plain http (it is loopback, like
//!   `127.0.0.1:PORT`): sent, with the credential, to the server on 127.0.0.1; bound to
//!   `localhost.example.com:PORT` (a look-alike, resolved by DNS): refused, https only.
#![allow(
    clippy::disallowed_methods,
    reason = "tests and benchmarks start sp, sshd and clients and read their environment; the fence in clippy.toml is for src/"
)]

use crate::support;

use std::io;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use sallyport::dest::{self, DestError, Lookup};
use serde_json::json;
use support::http_server::TestServer;
use support::process::{canary, tool_error_code, Launch, Session, TempDir};

/// Answers every name with 192.0.2.7 (TEST-NET-1) and counts the calls.
#[derive(Clone, Default)]
struct Counting(Arc<AtomicUsize>);

impl Lookup for Counting {
    fn lookup(&self, _host: &str, port: u16) -> io::Result<Vec<SocketAddr>> {
        self.0.fetch_add(1, Ordering::SeqCst);
        Ok(vec![SocketAddr::new(IpAddr::V4(Ipv4Addr::new(192, 0, 2, 7)), port)])
    }
}

fn loopback(port: u16) -> Vec<SocketAddr> {
    vec![SocketAddr::new(IpAddr::V4(Ipv4Addr::LOCALHOST), port), SocketAddr::new(IpAddr::V6(Ipv6Addr::LOCALHOST), port)]
}

#[test]
fn localhost_names_resolve_to_loopback_without_asking_the_resolver() {
    for host in ["localhost", "LOCALHOST", "localhost.", "api.localhost", "a.b.Localhost."] {
        let counting = Counting::default();
        let addrs = dest::lookup_host(&counting, host, 2222).expect(host);
        assert_eq!(addrs, loopback(2222), "{host}");
        assert_eq!(counting.0.load(Ordering::SeqCst), 0, "{host}: the resolver was asked");
    }
}

#[test]
fn names_that_only_look_like_localhost_still_go_to_the_resolver() {
    for host in ["localhost.example.com", "notlocalhost", "localhostx", ".localhost", "a..localhost", "localhost.com."] {
        let counting = Counting::default();
        let addrs = dest::lookup_host(&counting, host, 80).expect(host);
        assert_eq!(addrs, vec![SocketAddr::new(IpAddr::V4(Ipv4Addr::new(192, 0, 2, 7)), 80)], "{host}");
        assert_eq!(counting.0.load(Ordering::SeqCst), 1, "{host}: the resolver was not asked");
    }
}

#[test]
fn http_destination_localhost_is_checked_as_loopback_and_never_looked_up() {
    let counting = Counting::default();
    let lookup: Arc<dyn Lookup> = Arc::new(counting.clone());
    for url in ["http://localhost:8080/v1", "http://svc.localhost.:8080/v1"] {
        let url = url::Url::parse(url).unwrap();
        let checked = dest::resolve_and_check(&lookup, &url, true, Duration::from_secs(5)).expect("named exactly");
        assert_eq!(checked.addrs(), loopback(8080).as_slice(), "{url}");
    }
    assert_eq!(counting.0.load(Ordering::SeqCst), 0, "the resolver was asked");
}

#[test]
fn localhost_reached_through_a_wildcard_rule_is_refused_as_loopback() {
    let lookup: Arc<dyn Lookup> = Arc::new(Counting::default());
    let url = url::Url::parse("http://api.localhost/").unwrap();
    match dest::resolve_and_check(&lookup, &url, false, Duration::from_secs(5)) {
        Err(DestError::Blocked(m)) => assert!(m.contains("api.localhost resolves to a loopback address"), "{m}"),
        other => panic!("expected a loopback refusal, got {other:?}"),
    }
}

/// A credential over plain http goes to loopback only: `localhost` is loopback (it is
/// never looked up), so `http://localhost:PORT` carries the credential as
/// `http://127.0.0.1:PORT` does; a look-alike name is refused before anything is sent.
#[test]
fn a_credential_goes_to_localhost_over_http_as_to_127_0_0_1() {
    let server = TestServer::start();
    let dir = TempDir::new("localhost");
    let secret = canary();
    let token = dir.file("api.token", secret.as_bytes(), 0o600);
    let hosts = [format!("localhost:{}", server.port), format!("api.localhost:{}", server.port), format!("localhost.example.com:{}", server.port)];
    let policy = json!({
        "credentials": {"api": {"source": {"file": token.display().to_string()}, "inject": {"bearer": {}}, "hosts": hosts}},
        "http": {"allow": [{"hosts": hosts, "methods": ["GET"]}]}
    });
    let policy = dir.file("policy.json", policy.to_string().as_bytes(), 0o600);
    let mut s = Session::start(Launch::mcp(&policy, &[]));
    s.ready("2025-06-18");
    for (id, host) in [(1, "localhost"), (2, "LocalHost."), (3, "api.localhost")] {
        let before = server.requests().len();
        let r = s.tool(id, "http_request", json!({"method": "GET", "url": format!("http://{host}:{}/v1/x", server.port)}));
        assert_eq!((r["isError"].as_bool(), r["structuredContent"]["status"].as_u64()), (Some(false), Some(200)), "{host}: {r}");
        let seen = server.requests();
        assert_eq!(seen.len(), before + 1, "{host}");
        assert_eq!(seen[before].header("authorization"), Some(format!("Bearer {secret}").as_str()), "{host}");
    }
    server.settle();
    let before = server.accepted();
    let r = s.tool(4, "http_request", json!({"method": "GET", "url": format!("http://localhost.example.com:{}/v1/x", server.port)}));
    assert_eq!(tool_error_code(&r), Some("SP_DENIED"), "{r}");
    assert!(r["content"][0]["text"].as_str().unwrap_or_default().contains("only sent over https"), "{r}");
    server.settle();
    assert_eq!(server.accepted(), before, "a refused request reached the server");
    s.finish();
}
