//! The HTTP executor's own TCP transport (`src/tools/http/dial.rs`) through the built
//! `sp mcp`, against scripted loopback servers: a kept connection is reused, and never
//! when the server closed it or sent bytes nobody asked for; every wait is bounded by the
//! policy's `timeout_s` (an answer that never comes, a body that stops halfway, a server
//! that stops reading a large request body); a large body comes whole both ways; a
//! credential file read a second time gives the same header.
//!
//! Attacks tried (each held):
//! - a second response smuggled after the first one's body, sent 100 ms later (after the
//!   connection went back to the pool, before the next call takes it): the next call
//!   gets its own answer on a new connection, never the smuggled one;
//! - the same bytes in the same write as the first answer: refused the same way;
//! - the server closes each kept connection after its answer (no `Connection: close`):
//!   every call still succeeds, on a new connection;
//! - no answer at all, headers then silence, a server that never reads a 3 MiB request
//!   body: `SP_TIMEOUT` within the 1 s policy timeout (plus margin), never a hang;
//! - a 3 MiB answer written in 64 KiB pieces with pauses: read whole.
#![allow(
    clippy::disallowed_methods,
    reason = "tests and benchmarks start sp, sshd and clients and read their environment; the fence in clippy.toml is for src/"
)]

use crate::support;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use support::process::{canary, tool_error_code, Launch, Session, TempDir};

/// How a scripted server answers the n-th request (from 0) of a connection.
type Script = Arc<dyn Fn(&mut TcpStream, usize, &Request) -> bool + Send + Sync>;

struct Request {
    path: String,
    authorization: Option<String>,
    body_len: usize,
}

/// A loopback server running `script` for each request; counts connections. `script`
/// returns false to stop serving the connection (it is then closed). `read_body`: the
/// request body is read before the script runs.
fn server(read_body: bool, script: Script) -> (u16, Arc<AtomicUsize>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let conns = Arc::new(AtomicUsize::new(0));
    let c = conns.clone();
    thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(stream) = stream else { continue };
            c.fetch_add(1, Ordering::SeqCst);
            let script = script.clone();
            thread::spawn(move || serve(stream, read_body, &*script));
        }
    });
    (port, conns)
}

fn serve(mut stream: TcpStream, read_body: bool, script: &(dyn Fn(&mut TcpStream, usize, &Request) -> bool + Send + Sync)) {
    let mut reader = BufReader::new(stream.try_clone().unwrap());
    for n in 0.. {
        let mut line = String::new();
        if reader.read_line(&mut line).unwrap_or(0) == 0 {
            return;
        }
        let path = line.split_whitespace().nth(1).unwrap_or_default().to_owned();
        let (mut body_len, mut authorization) = (0, None);
        loop {
            let mut h = String::new();
            if reader.read_line(&mut h).unwrap_or(0) == 0 || h.trim().is_empty() {
                break;
            }
            if let Some((k, v)) = h.split_once(':') {
                if k.eq_ignore_ascii_case("content-length") {
                    body_len = v.trim().parse().unwrap_or(0);
                }
                if k.eq_ignore_ascii_case("authorization") {
                    authorization = Some(v.trim().to_owned());
                }
            }
        }
        if read_body {
            let _ = std::io::copy(&mut (&mut reader).take(body_len as u64), &mut std::io::sink());
        }
        if !script(&mut stream, n, &Request { path, authorization, body_len }) {
            return;
        }
    }
}

fn answer(stream: &mut TcpStream, body: &str) {
    let _ = stream.write_all(format!("HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: {}\r\n\r\n{body}", body.len()).as_bytes());
}

struct Setup {
    _dir: TempDir,
    session: Session,
    port: u16,
    secret: String,
}

/// `sp mcp` allowing GET and POST on `/*` of the server, `timeout_s` 1, a bearer
/// credential on `/auth/*`.
fn start(port: u16) -> Setup {
    let dir = TempDir::new("transport");
    let secret = canary();
    let token = dir.file("token", format!("{secret}\n").as_bytes(), 0o600);
    let host = format!("127.0.0.1:{port}");
    let policy = json!({
        "credentials": {"api": {"source": {"file": token.display().to_string()}, "inject": {"bearer": {}}, "hosts": [host], "paths": ["/auth/*"]}},
        "http": {"allow": [{"hosts": [host], "methods": ["GET", "POST"], "paths": ["/*"]}], "timeout_s": 1,
                 "max_request_body_bytes": 8 << 20, "max_response_bytes": 8 << 20}
    });
    let policy = dir.file("policy.json", policy.to_string().as_bytes(), 0o600);
    let mut session = Session::start(Launch::mcp(&policy, &[]));
    session.ready("2025-06-18");
    Setup { _dir: dir, session, port, secret }
}

impl Setup {
    fn call(&mut self, id: i64, method: &str, path: &str, body: Option<String>) -> Value {
        let mut args = json!({"method": method, "url": format!("http://127.0.0.1:{}{path}", self.port)});
        if let Some(b) = body {
            args["body"] = json!(b);
        }
        let msg = json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": {"name": "http_request", "arguments": args}});
        self.session.call(&msg)["result"].clone()
    }
}

fn body(result: &Value) -> &str {
    result["structuredContent"]["body"].as_str().unwrap_or_else(|| panic!("no body: {result}"))
}

#[test]
fn a_kept_connection_is_reused_and_the_credential_read_again_is_the_same() {
    let seen = Arc::new(std::sync::Mutex::new(Vec::new()));
    let s2 = seen.clone();
    let (port, conns) = server(
        true,
        Arc::new(move |s, n, r| {
            s2.lock().unwrap().push(r.authorization.clone());
            answer(s, &format!("{n} {}", r.authorization.as_deref().unwrap_or("-")));
            true
        }),
    );
    let mut t = start(port);
    for i in 0..6 {
        let r = t.call(i + 1, "GET", "/auth/x", None);
        // The server sees the credential; the agent sees it redacted.
        assert_eq!(body(&r), format!("{i} Bearer [REDACTED:api]"), "{r}");
    }
    assert_eq!(conns.load(Ordering::SeqCst), 1);
    assert_eq!(*seen.lock().unwrap(), vec![Some(format!("Bearer {}", t.secret)); 6]);
}

#[test]
fn bytes_sent_after_an_answer_are_never_read_as_the_next_answer() {
    for late in [true, false] {
        let (port, conns) = server(
            true,
            Arc::new(move |s, n, r| {
                if n > 0 || r.path != "/first" {
                    answer(s, "real");
                    return true;
                }
                let forged = "HTTP/1.1 200 OK\r\nContent-Length: 6\r\n\r\nforged";
                if late {
                    answer(s, "first");
                    thread::sleep(Duration::from_millis(100));
                    let _ = s.write_all(forged.as_bytes());
                } else {
                    let _ = s.write_all(format!("HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nfirst{forged}").as_bytes());
                }
                // Keeps the connection open, reading nothing more.
                thread::sleep(Duration::from_secs(3));
                false
            }),
        );
        let mut t = start(port);
        assert_eq!(body(&t.call(1, "GET", "/first", None)), "first");
        thread::sleep(Duration::from_millis(300));
        assert_eq!(body(&t.call(2, "GET", "/second", None)), "real", "late: {late}");
        assert_eq!(conns.load(Ordering::SeqCst), 2, "late: {late}");
    }
}

#[test]
fn a_connection_the_server_closed_is_not_reused() {
    let (port, conns) = server(
        true,
        Arc::new(|s, n, _| {
            answer(s, &format!("n={n}"));
            let _ = s.shutdown(std::net::Shutdown::Both);
            false
        }),
    );
    let mut t = start(port);
    for i in 0..4 {
        thread::sleep(Duration::from_millis(50));
        assert_eq!(body(&t.call(i + 1, "GET", "/x", None)), "n=0");
    }
    assert_eq!(conns.load(Ordering::SeqCst), 4);
}

#[test]
fn every_wait_ends_with_the_policy_timeout() {
    let (port, _) = server(
        false,
        Arc::new(|s, _, r| {
            match r.path.as_str() {
                "/silent" => thread::sleep(Duration::from_secs(4)),
                "/half" => {
                    let _ = s.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\nhalf");
                    thread::sleep(Duration::from_secs(4));
                }
                // Never reads the body (read_body is false): sp's writes fill the buffers.
                _ => thread::sleep(Duration::from_secs(4)),
            }
            false
        }),
    );
    let mut t = start(port);
    for (i, (method, path, body)) in
        [("GET", "/silent", None), ("GET", "/half", None), ("POST", "/unread", Some("x".repeat(3 << 20)))].into_iter().enumerate()
    {
        let started = Instant::now();
        let r = t.call(i as i64 + 1, method, path, body);
        let took = started.elapsed();
        assert_eq!(tool_error_code(&r), Some("SP_TIMEOUT"), "{path}: {r}");
        assert!(took >= Duration::from_millis(900) && took < Duration::from_millis(2500), "{path}: {took:?}");
    }
}

#[test]
fn large_bodies_come_whole_both_ways() {
    let (port, _) = server(
        true,
        Arc::new(|s, _, r| {
            if r.path == "/up" {
                answer(s, &format!("got {}", r.body_len));
                return true;
            }
            let total = 3 << 20;
            let _ = s.write_all(format!("HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: {total}\r\n\r\n").as_bytes());
            let chunk = vec![b'a'; 64 << 10];
            for i in 0..total / chunk.len() {
                let _ = s.write_all(&chunk);
                if i % 8 == 0 {
                    thread::sleep(Duration::from_millis(5));
                }
            }
            true
        }),
    );
    let mut t = start(port);
    let r = t.call(1, "GET", "/down", None);
    assert_eq!(body(&r).len(), 3 << 20);
    assert!(body(&r).bytes().all(|b| b == b'a'));
    let r = t.call(2, "POST", "/up", Some("y".repeat(3 << 20)));
    assert_eq!(body(&r), format!("got {}", 3 << 20));
}
