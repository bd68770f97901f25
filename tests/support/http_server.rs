//! A real HTTP/1.1 server on 127.0.0.1 for tests and `make demo`: std only, one thread
//! per connection, every request recorded, every accepted connection counted.
//!
//! It answers `Connection: close` so each request is one connection, which keeps the
//! accept count equal to the number of requests that reached the network.
//! Routes: a path registered with [`TestServer::route`] gets that response; a path
//! registered with [`TestServer::echo_route`] gets the request's headers echoed back (in
//! the body and as `X-Echo-*` response headers, to test secret scrubbing); any other
//! path gets 200 with a JSON body echoing the method and path.
//!
//! [`TestServer::settle`] makes a fence request on a fresh connection: the listener
//! accepts in FIFO order, so when it returns every connection opened before it has been
//! counted. Fence connections are not counted or recorded.

#![allow(dead_code)]

use std::collections::HashMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;

#[derive(Debug, Clone)]
pub struct Recorded {
    pub method: String,
    /// Path with query, as sent.
    pub target: String,
    /// Lowercase names.
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

impl Recorded {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.iter().find(|(n, _)| n == name).map(|(_, v)| v.as_str())
    }
}

#[derive(Debug, Clone)]
pub struct Reply {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
    /// Sleep before answering (timeouts).
    pub delay_ms: u64,
}

impl Reply {
    pub fn json(status: u16, body: &str) -> Reply {
        Reply { status, headers: vec![("Content-Type".into(), "application/json".into())], body: body.as_bytes().to_vec(), delay_ms: 0 }
    }
    pub fn text(status: u16, body: &str) -> Reply {
        Reply { status, headers: vec![("Content-Type".into(), "text/plain".into())], body: body.as_bytes().to_vec(), delay_ms: 0 }
    }
}

/// How an echo route answers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Echo {
    /// 200, `application/json` body `{"<lowercase name>": "<value>", ...}` with every
    /// request header, and `X-Echo-<Name>: <value>` response headers for `authorization`
    /// and `x-api-key`.
    Json,
    /// 200, `application/octet-stream`: the bytes `FF FE` then every request header as
    /// `name: value\n` (not UTF-8, so a client has to encode it).
    Binary,
}

/// The path of [`TestServer::settle`]'s fence request.
const FENCE: &str = "/__sp_test_fence__";

#[derive(Default)]
struct Shared {
    accepted: AtomicUsize,
    fences: AtomicUsize,
    requests: Mutex<Vec<Recorded>>,
    routes: Mutex<HashMap<String, Reply>>,
    echoes: Mutex<HashMap<String, Echo>>,
    handlers: Mutex<HashMap<String, Handler>>,
}

/// Computes the answer from the request (issue #13: a SigV4 verifier, a token endpoint).
pub type Handler = Arc<dyn Fn(&Recorded) -> Reply + Send + Sync>;

pub struct TestServer {
    pub port: u16,
    shared: Arc<Shared>,
}

/// A connection after the accept step: plain TCP, or TLS wrapped around it.
pub trait Conn: Read + Write + Send {}
impl<T: Read + Write + Send> Conn for T {}

/// Turns an accepted TCP connection into the stream HTTP is spoken on.
pub type Wrap = Arc<dyn Fn(TcpStream) -> std::io::Result<Box<dyn Conn>> + Send + Sync>;

impl TestServer {
    pub fn start() -> TestServer {
        TestServer::start_wrapped(Arc::new(|tcp| Ok(Box::new(tcp) as Box<dyn Conn>)))
    }

    /// A server whose connections go through `wrap` first (e.g. a TLS handshake, see
    /// tests/support/tls.rs). The accept count includes connections whose wrap failed.
    pub fn start_wrapped(wrap: Wrap) -> TestServer {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind 127.0.0.1:0");
        let port = listener.local_addr().unwrap().port();
        let shared = Arc::new(Shared::default());
        let s = shared.clone();
        thread::spawn(move || {
            for stream in listener.incoming() {
                let Ok(stream) = stream else { continue };
                s.accepted.fetch_add(1, Ordering::SeqCst);
                let s = s.clone();
                let wrap = wrap.clone();
                thread::spawn(move || {
                    let _ = stream.set_read_timeout(Some(std::time::Duration::from_secs(10)));
                    if let Ok(conn) = wrap(stream) {
                        let _ = handle(conn, &s);
                    }
                });
            }
        });
        TestServer { port, shared }
    }

    pub fn base(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    pub fn route(&self, path: &str, reply: Reply) {
        self.shared.routes.lock().unwrap().insert(path.to_owned(), reply);
    }

    /// Answers `path` by echoing the request headers back (see [`Echo`]).
    pub fn echo_route(&self, path: &str, how: Echo) {
        self.shared.echoes.lock().unwrap().insert(path.to_owned(), how);
    }

    /// Answers `path` with whatever `handler` computes from the request.
    pub fn handle(&self, path: &str, handler: impl Fn(&Recorded) -> Reply + Send + Sync + 'static) {
        self.shared.handlers.lock().unwrap().insert(path.to_owned(), Arc::new(handler));
    }

    /// Connections accepted so far (fence connections excluded).
    pub fn accepted(&self) -> usize {
        self.shared.accepted.load(Ordering::SeqCst) - self.shared.fences.load(Ordering::SeqCst)
    }

    /// Returns once every connection opened before this call has been accepted and
    /// counted: one fence request on a new connection, answered in order.
    pub fn settle(&self) {
        let mut s = TcpStream::connect(("127.0.0.1", self.port)).expect("connect to own test server");
        // A deadline: the fence queues behind every connection sp opened, and one of
        // those may be a handler sleeping (`delay_ms`) or reading a request slowly.
        // (support::process::deadline's default; this file is also included alone by the
        // examples, so it cannot name that module.)
        let limit = std::time::Duration::from_secs(120);
        let _ = s.set_read_timeout(Some(limit));
        s.write_all(format!("GET {FENCE} HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n").as_bytes()).expect("fence request");
        let mut sink = Vec::new();
        s.read_to_end(&mut sink).unwrap_or_else(|e| {
            panic!(
                "settle: no answer to the fence request within {} s (waiting for the test server to accept every earlier connection): {e}",
                limit.as_secs()
            )
        });
        assert!(sink.starts_with(b"HTTP/1.1 204"), "fence answered {:?}", String::from_utf8_lossy(&sink));
    }

    pub fn requests(&self) -> Vec<Recorded> {
        self.shared.requests.lock().unwrap().clone()
    }
}

fn handle(stream: Box<dyn Conn>, shared: &Shared) -> std::io::Result<()> {
    let mut reader = BufReader::new(stream);
    let mut line = String::new();
    reader.read_line(&mut line)?;
    let mut parts = line.split_whitespace();
    let method = parts.next().unwrap_or_default().to_owned();
    let target = parts.next().unwrap_or_default().to_owned();
    let mut headers = Vec::new();
    loop {
        let mut h = String::new();
        if reader.read_line(&mut h)? == 0 {
            break;
        }
        let h = h.trim_end();
        if h.is_empty() {
            break;
        }
        if let Some((n, v)) = h.split_once(':') {
            headers.push((n.trim().to_ascii_lowercase(), v.trim().to_owned()));
        }
    }
    let len: usize = headers.iter().find(|(n, _)| n == "content-length").and_then(|(_, v)| v.parse().ok()).unwrap_or(0);
    let mut body = vec![0; len];
    reader.read_exact(&mut body)?;
    let path = target.split('?').next().unwrap_or_default().to_owned();
    if path == FENCE {
        shared.fences.fetch_add(1, Ordering::SeqCst);
        let out = reader.get_mut();
        out.write_all(b"HTTP/1.1 204 X\r\nConnection: close\r\n\r\n")?;
        return out.flush();
    }
    let echo = shared.echoes.lock().unwrap().get(&path).copied();
    let handler = shared.handlers.lock().unwrap().get(&path).cloned();
    let recorded = Recorded { method: method.clone(), target: target.clone(), headers, body };
    let reply = match (echo, handler) {
        (_, Some(h)) => h(&recorded),
        (Some(how), None) => echo_reply(how, &recorded.headers),
        (None, None) => {
            shared.routes.lock().unwrap().get(&path).cloned().unwrap_or_else(|| Reply::json(200, &format!("{{\"method\":\"{method}\",\"path\":\"{path}\"}}")))
        }
    };
    shared.requests.lock().unwrap().push(recorded);
    if reply.delay_ms > 0 {
        thread::sleep(std::time::Duration::from_millis(reply.delay_ms));
    }
    let out = reader.get_mut();
    let mut head = format!("HTTP/1.1 {} X\r\nContent-Length: {}\r\nConnection: close\r\n", reply.status, reply.body.len());
    for (n, v) in &reply.headers {
        head.push_str(&format!("{n}: {v}\r\n"));
    }
    head.push_str("\r\n");
    out.write_all(head.as_bytes())?;
    out.write_all(&reply.body)?;
    out.flush()
}

fn echo_reply(how: Echo, headers: &[(String, String)]) -> Reply {
    match how {
        Echo::Json => {
            let quote = |s: &str| {
                let mut q = String::from("\"");
                for c in s.chars() {
                    match c {
                        '"' => q.push_str("\\\""),
                        '\\' => q.push_str("\\\\"),
                        c if (c as u32) < 0x20 => q.push_str(&format!("\\u{:04x}", c as u32)),
                        c => q.push(c),
                    }
                }
                q.push('"');
                q
            };
            let fields: Vec<String> = headers.iter().map(|(n, v)| format!("{}:{}", quote(n), quote(v))).collect();
            let mut reply = Reply::json(200, &format!("{{{}}}", fields.join(",")));
            for (n, v) in headers {
                if n == "authorization" || n == "x-api-key" {
                    reply.headers.push((format!("X-Echo-{n}"), v.clone()));
                }
            }
            reply
        }
        Echo::Binary => {
            let mut body = vec![0xff, 0xfe];
            for (n, v) in headers {
                body.extend_from_slice(format!("{n}: {v}\n").as_bytes());
            }
            Reply { status: 200, headers: vec![("Content-Type".into(), "application/octet-stream".into())], body, delay_ms: 0 }
        }
    }
}
