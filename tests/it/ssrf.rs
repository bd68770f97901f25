//! Destination safety (SSRF) through the real pipeline, in-process: JSON-RPC lines into
//! `Server::serve` with a policy from `Policy::from_text` and the real `HttpExecutor`,
//! whose DNS answers are injected (`HttpExecutor::with_lookup`).
//!
//! Nothing here sends a packet off this host. Every executor is built with
//! `restrict_dial(dest::stays_on_host)`: a checked address that is not loopback or
//! unspecified is refused before ureq sees it (`SP_UNAVAILABLE`, "outside the dial
//! restriction"), so a case whose check passes for a private or public address ends there
//! ("Filtered" below), and a bug in the check could at worst reach a loopback server,
//! where the accept count catches it. Blocked cases use the loopback `TestServer`'s port,
//! so a request that slipped through would be counted there; the count must stay zero,
//! and be exactly one for the allowed controls.
#![allow(
    clippy::disallowed_methods,
    reason = "tests and benchmarks start sp, sshd and clients and read their environment; the fence in clippy.toml is for src/"
)]

use crate::support;

use std::collections::HashMap;
use std::io::{self, BufRead, BufReader, Read, Write};
use std::net::{IpAddr, SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use sallyport::dest;
use sallyport::HttpExecutor;
use sallyport::ProtocolWriter;
use sallyport::Policy;
use sallyport::{Options, Server};
use serde_json::{json, Value};

use support::corpus::prelude_ready;
use support::http_server::TestServer;

// ---- injected DNS -------------------------------------------------------------------

/// Name -> answers. With several answers for a name, call N gets answer N (the last one
/// repeats). Unknown names fail like NXDOMAIN. Every call is recorded.
#[derive(Clone, Default)]
struct Dns {
    answers: Arc<Mutex<HashMap<String, Vec<Vec<IpAddr>>>>>,
    calls: Arc<Mutex<Vec<String>>>,
}

fn ips(list: &[&str]) -> Vec<IpAddr> {
    list.iter().map(|s| s.parse().unwrap_or_else(|_| panic!("bad test address {s}"))).collect()
}

impl Dns {
    fn answer(self, name: &str, addrs: &[&str]) -> Dns {
        self.sequence(name, &[addrs])
    }

    fn sequence(self, name: &str, answers: &[&[&str]]) -> Dns {
        self.answers.lock().unwrap().insert(name.to_owned(), answers.iter().map(|a| ips(a)).collect());
        self
    }

    fn calls(&self) -> Vec<String> {
        self.calls.lock().unwrap().clone()
    }

    fn lookup(&self) -> impl Fn(&str, u16) -> io::Result<Vec<SocketAddr>> + Send + Sync + 'static + use<> {
        let dns = self.clone();
        move |host: &str, port: u16| {
            let n = {
                let mut calls = dns.calls.lock().unwrap();
                calls.push(host.to_owned());
                calls.iter().filter(|h| *h == host).count() - 1
            };
            let answers = dns.answers.lock().unwrap();
            let seq = answers.get(host).ok_or_else(|| io::Error::new(io::ErrorKind::NotFound, "no such host"))?;
            let answer = &seq[n.min(seq.len() - 1)];
            Ok(answer.iter().map(|ip| SocketAddr::new(*ip, port)).collect())
        }
    }
}

// ---- sessions ------------------------------------------------------------------------

fn policy(rules: Value, extra: Value) -> Policy {
    let mut v = json!({"http": {"allow": rules, "timeout_s": 5}});
    if let Value::Object(m) = extra {
        for (k, x) in m {
            v[k] = x;
        }
    }
    Policy::from_text(&v.to_string(), std::path::Path::new("ssrf-policy.json")).expect("test policy")
}

fn rule(host: &str) -> Value {
    json!([{"hosts": [host], "methods": ["GET"], "paths": ["/*"]}])
}

fn executor(dns: &Dns) -> HttpExecutor {
    HttpExecutor::with_lookup(dns.lookup()).restrict_dial(dest::stays_on_host)
}

/// One result per URL, from one session on `exec`; also returns how many times ureq was
/// handed addresses to connect to.
fn session(policy: &Policy, exec: HttpExecutor, urls: &[String]) -> (Vec<Value>, u64) {
    let mut input = prelude_ready();
    for (i, url) in urls.iter().enumerate() {
        let call = json!({"jsonrpc": "2.0", "id": i + 1, "method": "tools/call",
            "params": {"name": "http_request", "arguments": {"method": "GET", "url": url}}});
        input.extend_from_slice(call.to_string().as_bytes());
        input.push(b'\n');
    }
    let mut server = Server::new(policy, exec, Options { cancel_on_eof: false, ..Options::default() });
    let mut out = ProtocolWriter::new(Vec::new());
    server.serve(std::io::Cursor::new(input), &mut out);
    let dials = server.executor().dials();
    let raw = out.into_inner();
    let mut by_id: HashMap<u64, Value> = HashMap::new();
    for line in raw.split(|b| *b == b'\n').filter(|l| !l.is_empty()) {
        let v: Value = serde_json::from_slice(line).expect("protocol line is JSON");
        if let Some(id) = v["id"].as_u64() {
            by_id.insert(id, v["result"].clone());
        }
    }
    let results = (1..=urls.len() as u64).map(|i| by_id.remove(&i).unwrap_or_else(|| panic!("no answer to call {i}: {raw:?}"))).collect();
    (results, dials)
}

fn code(result: &Value) -> Option<&str> {
    if result["isError"] == true { result["structuredContent"]["error"]["code"].as_str() } else { None }
}

fn message(result: &Value) -> &str {
    result["structuredContent"]["error"]["message"].as_str().unwrap_or_default()
}

// ---- a second loopback server: IPv6 and keep-alive ----------------------------------

/// A loopback HTTP/1.1 server that keeps connections open (keep-alive), on any loopback
/// address including `[::1]`. Counts accepted connections and answered requests;
/// [`MiniServer::settle`] fences like `TestServer::settle`.
struct MiniServer {
    addr: SocketAddr,
    accepted: Arc<AtomicUsize>,
    fences: Arc<AtomicUsize>,
    requests: Arc<AtomicUsize>,
}

const FENCE: &str = "/__ssrf_fence__";

impl MiniServer {
    fn start(bind: SocketAddr) -> io::Result<MiniServer> {
        let listener = TcpListener::bind(bind)?;
        let addr = listener.local_addr()?;
        let (accepted, fences, requests) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
        let (a, f, r) = (accepted.clone(), fences.clone(), requests.clone());
        thread::spawn(move || {
            for stream in listener.incoming() {
                let Ok(stream) = stream else { continue };
                a.fetch_add(1, Ordering::SeqCst);
                let (f, r) = (f.clone(), r.clone());
                thread::spawn(move || {
                    let _ = serve_keep_alive(stream, &f, &r);
                });
            }
        });
        Ok(MiniServer { addr, accepted, fences, requests })
    }

    /// (connections, requests) once every connection opened before the call is counted.
    fn settle(&self) -> (usize, usize) {
        let mut s = TcpStream::connect(self.addr).expect("connect to own mini server");
        s.write_all(format!("GET {FENCE} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n").as_bytes()).unwrap();
        let mut sink = Vec::new();
        s.read_to_end(&mut sink).unwrap();
        assert!(sink.starts_with(b"HTTP/1.1 204"), "fence: {:?}", String::from_utf8_lossy(&sink));
        let conns = self.accepted.load(Ordering::SeqCst) - self.fences.load(Ordering::SeqCst);
        (conns, self.requests.load(Ordering::SeqCst))
    }
}

fn serve_keep_alive(stream: TcpStream, fences: &AtomicUsize, requests: &AtomicUsize) -> io::Result<()> {
    stream.set_read_timeout(Some(Duration::from_secs(10)))?;
    let mut reader = BufReader::new(stream.try_clone()?);
    let mut out = stream;
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line)? == 0 {
            return Ok(());
        }
        let path = line.split_whitespace().nth(1).unwrap_or_default().to_owned();
        let mut len = 0usize;
        loop {
            let mut h = String::new();
            if reader.read_line(&mut h)? == 0 || h.trim().is_empty() {
                break;
            }
            if let Some((n, v)) = h.split_once(':')
                && n.trim().eq_ignore_ascii_case("content-length")
            {
                len = v.trim().parse().unwrap_or(0);
            }
        }
        io::copy(&mut (&mut reader).take(len as u64), &mut io::sink())?;
        if path == FENCE {
            fences.fetch_add(1, Ordering::SeqCst);
            out.write_all(b"HTTP/1.1 204 X\r\nConnection: close\r\n\r\n")?;
            return out.flush();
        }
        requests.fetch_add(1, Ordering::SeqCst);
        out.write_all(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 11\r\n\r\n{\"ok\":true}")?;
        out.flush()?;
    }
}

// ---- the table -----------------------------------------------------------------------

#[derive(Debug, Clone, Copy, PartialEq)]
enum Want {
    /// `SP_BLOCKED`, the message naming the host and containing this class text.
    Blocked(&'static str),
    /// The check passed and the request reached the loopback server exactly once.
    Reached,
    /// The check passed for an address off this host; the test dial restriction then
    /// refused it, so nothing was dialed.
    Filtered,
    /// Refused by the policy before execution (`SP_DENIED`): no lookup, no dial.
    Denied,
    /// The lookup found nothing (`SP_UNAVAILABLE`).
    NotFound,
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum On {
    /// The `TestServer` on 127.0.0.1.
    V4,
    /// A `MiniServer` on `[::1]` (skipped where the host has no IPv6 loopback).
    V6,
}

struct Case {
    /// The allow rule's host pattern; `{P}` is the server's port.
    rule: &'static str,
    /// `{P}` as above.
    url: &'static str,
    /// Injected answer for the URL's host name (empty for IP literals).
    dns: &'static [&'static str],
    on: On,
    want: Want,
}

const fn lit(rule: &'static str, url: &'static str, want: Want) -> Case {
    Case { rule, url, dns: &[], on: On::V4, want }
}

const fn name(rule: &'static str, url: &'static str, dns: &'static [&'static str], want: Want) -> Case {
    Case { rule, url, dns, on: On::V4, want }
}

use Want::*;

const LOOP: &str = "127.0.0.1:{P}";
const META: &str = "169.254.169.254:{P}";
const WILD: &str = "*.wild.test:{P}";

const CASES: &[Case] = &[
    // Spellings of 127.0.0.1 are normalised before policy and check: an exact rule for
    // 127.0.0.1 allows them all, and they reach the loopback server.
    lit(LOOP, "http://127.0.0.1:{P}/control", Reached),
    lit(LOOP, "http://2130706433:{P}/decimal", Reached),
    lit(LOOP, "http://0177.1:{P}/octal-short", Reached),
    lit(LOOP, "http://0177.0.0.01:{P}/octal", Reached),
    lit(LOOP, "http://0x7f.1:{P}/hex-short", Reached),
    lit(LOOP, "http://0x7F.0.0.1:{P}/hex", Reached),
    lit(LOOP, "http://0x7f000001:{P}/hex-whole", Reached),
    lit(LOOP, "http://127.1:{P}/short", Reached),
    lit(LOOP, "http://127.0.1:{P}/short3", Reached),
    lit("[::ffff:7f00:1]:{P}", "http://[::ffff:127.0.0.1]:{P}/mapped-dotted", Reached),
    lit("[::ffff:7f00:1]:{P}", "http://[::ffff:7f00:1]:{P}/mapped-hex", Reached),
    Case { rule: "[::1]:{P}", url: "http://[::1]:{P}/v6", dns: &[], on: On::V6, want: Reached },
    // ... and a rule that does not name them lets none through.
    lit(WILD, "http://2130706433:{P}/", Denied),
    lit(LOOP, "http://127.0.0.2:{P}/", Denied),
    lit(LOOP, "http://[::ffff:127.0.0.1]:{P}/", Denied),
    // Embedded loopback forms that would leave the host: named exactly, they pass.
    lit("[64:ff9b::7f00:1]:{P}", "http://[64:ff9b::7f00:1]:{P}/", Filtered),
    lit("[::7f00:1]:{P}", "http://[::127.0.0.1]:{P}/", Filtered),
    // Always blocked, even named exactly: metadata and its spellings and forms.
    lit(META, "http://169.254.169.254:{P}/latest/meta-data/", Blocked("169.254.169.254 is a link-local address")),
    lit(META, "http://2852039166:{P}/", Blocked("169.254.169.254 is a link-local address")),
    lit(META, "http://0251.0376.0251.0376:{P}/", Blocked("link-local")),
    lit(META, "http://0xa9.0xfe.0xa9.0xfe:{P}/", Blocked("link-local")),
    lit(META, "http://0xa9fea9fe:{P}/", Blocked("link-local")),
    lit(META, "http://169.254.43518:{P}/", Blocked("link-local")),
    lit("[::ffff:a9fe:a9fe]:{P}", "http://[::ffff:169.254.169.254]:{P}/", Blocked("link-local address in IPv4-mapped IPv6 form")),
    lit("[64:ff9b::a9fe:a9fe]:{P}", "http://[64:ff9b::a9fe:a9fe]:{P}/", Blocked("link-local address in NAT64 form")),
    lit("[::a9fe:a9fe]:{P}", "http://[::169.254.169.254]:{P}/", Blocked("link-local address in IPv4-compatible IPv6 form")),
    lit("[fd00:ec2::254]:{P}", "http://[fd00:ec2::254]:{P}/", Blocked("cloud metadata")),
    lit("100.100.100.200:{P}", "http://100.100.100.200:{P}/", Blocked("cloud metadata")),
    lit("[fe80::1]:{P}", "http://[fe80::1]:{P}/", Blocked("link-local")),
    // Unspecified: dialing these would reach this host's loopback server.
    lit("0.0.0.0:{P}", "http://0.0.0.0:{P}/", Blocked("unspecified")),
    lit("0.0.0.0:{P}", "http://0:{P}/", Blocked("unspecified")),
    lit("[::]:{P}", "http://[::]:{P}/", Blocked("unspecified")),
    lit("[::ffff:0:0]:{P}", "http://[::ffff:0.0.0.0]:{P}/", Blocked("unspecified address in IPv4-mapped")),
    // Multicast, broadcast, reserved.
    lit("224.0.0.1:{P}", "http://224.0.0.1:{P}/", Blocked("multicast")),
    lit("[ff02::1]:{P}", "http://[ff02::1]:{P}/", Blocked("multicast")),
    lit("255.255.255.255:{P}", "http://255.255.255.255:{P}/", Blocked("broadcast")),
    lit("240.0.0.1:{P}", "http://240.0.0.1:{P}/", Blocked("reserved")),
    // Private literals named exactly pass the check (and are then not dialed here).
    lit("10.0.0.1:{P}", "http://10.0.0.1:{P}/", Filtered),
    lit("172.16.0.1:{P}", "http://172.16.0.1:{P}/", Filtered),
    lit("192.168.1.1:{P}", "http://192.168.1.1:{P}/", Filtered),
    lit("100.64.0.1:{P}", "http://100.64.0.1:{P}/", Filtered),
    lit("[fd12::1]:{P}", "http://[fd12::1]:{P}/", Filtered),
    // Names under a wildcard rule: private and always-blocked answers are refused.
    name(WILD, "http://loop.wild.test:{P}/", &["127.0.0.1"], Blocked("loop.wild.test resolves to a loopback address")),
    name(WILD, "http://loop6.wild.test:{P}/", &["::1"], Blocked("loopback")),
    name(WILD, "http://mapped.wild.test:{P}/", &["::ffff:127.0.0.1"], Blocked("loopback address in IPv4-mapped IPv6 form")),
    name(WILD, "http://nat64.wild.test:{P}/", &["64:ff9b::7f00:1"], Blocked("loopback address in NAT64 form")),
    name(WILD, "http://compat.wild.test:{P}/", &["::127.0.0.1"], Blocked("loopback address in IPv4-compatible IPv6 form")),
    name(WILD, "http://ten.wild.test:{P}/", &["10.1.2.3"], Blocked("private (RFC 1918)")),
    name(WILD, "http://b.wild.test:{P}/", &["172.16.5.4"], Blocked("private (RFC 1918)")),
    name(WILD, "http://c.wild.test:{P}/", &["192.168.0.10"], Blocked("private (RFC 1918)")),
    name(WILD, "http://cgnat.wild.test:{P}/", &["100.64.0.1"], Blocked("shared (CGNAT)")),
    name(WILD, "http://ula.wild.test:{P}/", &["fd12:3456::1"], Blocked("unique-local")),
    name(WILD, "http://meta.wild.test:{P}/", &["169.254.169.254"], Blocked("meta.wild.test resolves to a link-local address")),
    name(WILD, "http://meta6.wild.test:{P}/", &["fd00:ec2::254"], Blocked("cloud metadata")),
    name(WILD, "http://zero.wild.test:{P}/", &["0.0.0.0"], Blocked("unspecified")),
    // A public answer first does not hide a loopback one behind it.
    name(WILD, "http://mixed.wild.test:{P}/", &["192.0.2.10", "127.0.0.1"], Blocked("mixed.wild.test resolves to a loopback address")),
    name(WILD, "http://mixed6.wild.test:{P}/", &["2001:db8::10", "::ffff:127.0.0.1"], Blocked("loopback")),
    name(WILD, "http://mixed4.wild.test:{P}/", &["198.51.100.7", "10.0.0.1", "203.0.113.5"], Blocked("private (RFC 1918)")),
    // Public answers pass (and are never dialed here).
    name(WILD, "http://public.wild.test:{P}/", &["192.0.2.10"], Filtered),
    name(WILD, "http://public6.wild.test:{P}/", &["2001:db8::10", "198.51.100.7"], Filtered),
    name(WILD, "http://missing.wild.test:{P}/", &[], NotFound),
    // Names under an exact rule: private answers are allowed, always-blocked ones are not.
    name("loop.exact.test:{P}", "http://loop.exact.test:{P}/", &["127.0.0.1"], Reached),
    name("mapped.exact.test:{P}", "http://mapped.exact.test:{P}/", &["::ffff:127.0.0.1"], Reached),
    name("ten.exact.test:{P}", "http://ten.exact.test:{P}/", &["10.1.2.3"], Filtered),
    name("cgnat.exact.test:{P}", "http://cgnat.exact.test:{P}/", &["100.64.0.1"], Filtered),
    name("ula.exact.test:{P}", "http://ula.exact.test:{P}/", &["fd12::1"], Filtered),
    name("meta.exact.test:{P}", "http://meta.exact.test:{P}/", &["169.254.169.254"], Blocked("link-local")),
    name("mix.exact.test:{P}", "http://mix.exact.test:{P}/", &["127.0.0.1", "169.254.169.254"], Blocked("link-local")),
    name("mmeta.exact.test:{P}", "http://mmeta.exact.test:{P}/", &["::ffff:169.254.169.254"], Blocked("IPv4-mapped")),
    name("zero.exact.test:{P}", "http://zero.exact.test:{P}/", &["0.0.0.0"], Blocked("unspecified")),
    name("bcast.exact.test:{P}", "http://bcast.exact.test:{P}/", &["255.255.255.255"], Blocked("broadcast")),
    name("mcast.exact.test:{P}", "http://mcast.exact.test:{P}/", &["224.0.0.1"], Blocked("multicast")),
];

fn v6_loopback() -> Option<MiniServer> {
    MiniServer::start("[::1]:0".parse().unwrap()).ok()
}

/// Runs one case in a fresh session; returns a description of what went wrong, if anything.
fn run_case(case: &Case) -> Option<String> {
    let v4 = TestServer::start();
    let v6 = match case.on {
        On::V4 => None,
        On::V6 => match v6_loopback() {
            Some(s) => Some(s),
            None => {
                eprintln!("skipped (no IPv6 loopback here): {}", case.url);
                return None;
            }
        },
    };
    let port = v6.as_ref().map_or(v4.port, |s| s.addr.port());
    let url = case.url.replace("{P}", &port.to_string());
    let policy = policy(rule(&case.rule.replace("{P}", &port.to_string())), json!({}));
    let parsed = url::Url::parse(&url).unwrap();
    let host = parsed.host_str().unwrap().to_owned();
    let is_name = matches!(parsed.host(), Some(url::Host::Domain(_)));
    let mut dns = Dns::default();
    if !case.dns.is_empty() {
        dns = dns.answer(&host, case.dns);
    }
    let (results, dials) = session(&policy, executor(&dns), std::slice::from_ref(&url));
    let result = &results[0];
    v4.settle();
    let reached = v4.accepted() + v6.as_ref().map_or(0, |s| s.settle().0);
    let lookups = dns.calls().len();
    let want_lookups = usize::from(is_name && case.want != Denied);
    let mut problems = Vec::new();
    match case.want {
        Blocked(class) => {
            if code(result) != Some("SP_BLOCKED") || !message(result).contains(&host) || !message(result).contains(class) {
                problems.push(format!("want SP_BLOCKED naming {host:?} and {class:?}"));
            }
        }
        Reached => {
            if code(result).is_some() || result["structuredContent"]["status"] != 200 {
                problems.push("want status 200 from the loopback server".into());
            }
        }
        Filtered => {
            if code(result) != Some("SP_UNAVAILABLE") || !message(result).contains("outside the dial restriction") {
                problems.push("want the check to pass and the test dial restriction to refuse".into());
            }
        }
        Denied => {
            if code(result) != Some("SP_DENIED") {
                problems.push("want SP_DENIED".into());
            }
        }
        NotFound => {
            if code(result) != Some("SP_UNAVAILABLE") || !message(result).contains("host not found") {
                problems.push("want SP_UNAVAILABLE host not found".into());
            }
        }
    }
    let want_reached = usize::from(case.want == Reached);
    if reached != want_reached {
        problems.push(format!("loopback server accepted {reached} connections, want {want_reached}"));
    }
    if dials != want_reached as u64 {
        problems.push(format!("ureq was handed addresses {dials} times, want {want_reached}"));
    }
    if lookups != want_lookups {
        problems.push(format!("{lookups} lookups, want {want_lookups}"));
    }
    (!problems.is_empty()).then(|| format!("{} (rule {}): {}\n    got: {result}", url, case.rule, problems.join("; ")))
}

#[test]
fn destination_table() {
    assert!(CASES.len() >= 40, "the table lost cases: {}", CASES.len());
    let failures: Vec<String> = CASES.iter().filter_map(run_case).collect();
    assert!(failures.is_empty(), "{} of {} cases failed:\n{}", failures.len(), CASES.len(), failures.join("\n"));
}

/// The name is looked up once per request, and the connection goes to that checked
/// answer: later answers (here a metadata address) never redirect it.
#[test]
fn dns_rebinding_cannot_move_a_checked_request() {
    let server = TestServer::start();
    let p = server.port;
    let dns = Dns::default().sequence("rebind.test", &[&["127.0.0.1"], &["169.254.169.254"], &["192.0.2.10"]]);
    let policy = policy(rule(&format!("rebind.test:{p}")), json!({}));
    let url = format!("http://rebind.test:{p}/first");
    let (results, dials) = session(&policy, executor(&dns), &[url.clone(), url.clone()]);
    server.settle();
    assert_eq!(results[0]["structuredContent"]["status"], 200, "{}", results[0]);
    assert_eq!(server.accepted(), 1, "the first request reached the first, checked answer");
    assert_eq!(server.requests().len(), 1);
    // The second request resolved afresh, saw the metadata address, and was refused.
    assert_eq!(code(&results[1]), Some("SP_BLOCKED"), "{}", results[1]);
    assert!(message(&results[1]).contains("rebind.test resolves to a link-local address"), "{}", results[1]);
    assert_eq!(dns.calls(), vec!["rebind.test".to_string(), "rebind.test".to_string()], "one lookup per request");
    assert_eq!(dials, 1);
}

/// Connections are pooled per host only while the host resolves to the same checked
/// addresses: when the answer changes, a connection opened under the old answer is not
/// reused.
#[test]
fn pooled_connections_follow_the_checked_answer() {
    // A keep-alive server on 127.0.0.1:P and another on 127.0.0.2:P (same port).
    let (first, second) = (0..20)
        .find_map(|_| {
            let a = MiniServer::start("127.0.0.1:0".parse().unwrap()).ok()?;
            let b = MiniServer::start(SocketAddr::new("127.0.0.2".parse().unwrap(), a.addr.port())).ok()?;
            Some((a, b))
        })
        .expect("two loopback servers on one port");
    let p = first.addr.port();
    let dns = Dns::default().sequence("pool.test", &[&["127.0.0.1"], &["127.0.0.1"], &["127.0.0.2"], &["127.0.0.2"]]);
    let policy = policy(rule(&format!("pool.test:{p}")), json!({}));
    let url = format!("http://pool.test:{p}/x");
    let (results, dials) = session(&policy, executor(&dns), &vec![url; 4]);
    for r in &results {
        assert_eq!(r["structuredContent"]["status"], 200, "{r}");
    }
    assert_eq!(first.settle(), (1, 2), "same answer: the pooled connection is reused");
    assert_eq!(second.settle(), (1, 2), "new answer: a new connection to the new address, then reused");
    assert_eq!(dials, 4);
}

/// The lookup counts against the request timeout.
#[test]
fn slow_lookup_times_out() {
    let server = TestServer::start();
    let p = server.port;
    let slow = |_h: &str, port: u16| -> io::Result<Vec<SocketAddr>> {
        thread::sleep(Duration::from_secs(4));
        Ok(vec![SocketAddr::new(IpAddr::from([127, 0, 0, 1]), port)])
    };
    let mut policy = policy(rule(&format!("slow.test:{p}")), json!({}));
    policy.http.timeout = Duration::from_millis(300);
    let started = Instant::now();
    let (results, dials) = session(&policy, HttpExecutor::with_lookup(slow).restrict_dial(dest::stays_on_host), &[format!("http://slow.test:{p}/")]);
    assert!(started.elapsed() < Duration::from_secs(3), "took {:?}", started.elapsed());
    assert_eq!(code(&results[0]), Some("SP_TIMEOUT"), "{}", results[0]);
    assert_eq!(dials, 0);
    server.settle();
    assert_eq!(server.accepted(), 0);
}

/// A blocked destination is refused before the credential is read: the credential's
/// source does not exist, and still the answer is SP_BLOCKED, not SP_UNAVAILABLE.
#[test]
fn blocked_before_the_credential_is_read() {
    let server = TestServer::start();
    let p = server.port;
    let dns = Dns::default().answer("api.wild.test", &["10.0.0.7"]).answer("ok.wild.test", &["192.0.2.10"]);
    let host = format!("*.wild.test:{p}");
    let policy =
        policy(rule(&host), json!({"credentials": {"api": {"source": {"env": "SP_SSRF_TEST_NEVER_SET"}, "inject": {"bearer": {}}, "hosts": [host]}}}));
    let (results, dials) = session(&policy, executor(&dns), &[format!("https://api.wild.test:{p}/"), format!("https://ok.wild.test:{p}/")]);
    assert_eq!(code(&results[0]), Some("SP_BLOCKED"), "{}", results[0]);
    assert!(message(&results[0]).contains("api.wild.test resolves to a private (RFC 1918) address"), "{}", results[0]);
    // Control: a destination that passes goes on to read the (missing) credential.
    assert_eq!(code(&results[1]), Some("SP_UNAVAILABLE"), "{}", results[1]);
    assert!(!message(&results[1]).contains("dial restriction"), "{}", results[1]);
    assert_eq!(dials, 0);
    server.settle();
    assert_eq!(server.accepted(), 0);
}

/// Blocked requests are executions with outcome SP_BLOCKED, and the session goes on.
#[test]
fn blocked_is_a_tool_result_and_the_session_continues() {
    let server = TestServer::start();
    let p = server.port;
    let dns = Dns::default().answer("a.wild.test", &["127.0.0.1"]);
    let policy =
        policy(json!([{"hosts": [format!("*.wild.test:{p}")], "methods": ["GET"]}, {"hosts": [format!("127.0.0.1:{p}")], "methods": ["GET"]}]), json!({}));
    let (results, _) = session(&policy, executor(&dns), &[format!("http://a.wild.test:{p}/"), format!("http://127.0.0.1:{p}/after")]);
    assert_eq!(results[0]["isError"], true);
    let text = results[0]["content"][0]["text"].as_str().unwrap();
    assert!(text.starts_with("SP_BLOCKED: a.wild.test resolves to a loopback address;"), "{text}");
    assert_eq!(results[1]["structuredContent"]["status"], 200, "{}", results[1]);
    server.settle();
    assert_eq!(server.accepted(), 1);
}
