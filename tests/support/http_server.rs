//! A real HTTP/1.1 server on 127.0.0.1 for tests and `make demo`: std only, one thread
//! per connection, every request recorded, every accepted connection counted.
//!
//! It answers `Connection: close` so each request is one connection, which keeps the
//! accept count equal to the number of requests that reached the network.
//! Routes: a path registered with [`TestServer::route`] gets that response; any other
//! path gets 200 with a JSON body echoing the method and path.

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

#[derive(Default)]
struct Shared {
    accepted: AtomicUsize,
    requests: Mutex<Vec<Recorded>>,
    routes: Mutex<HashMap<String, Reply>>,
}

pub struct TestServer {
    pub port: u16,
    shared: Arc<Shared>,
}

impl TestServer {
    pub fn start() -> TestServer {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind 127.0.0.1:0");
        let port = listener.local_addr().unwrap().port();
        let shared = Arc::new(Shared::default());
        let s = shared.clone();
        thread::spawn(move || {
            for stream in listener.incoming() {
                let Ok(stream) = stream else { continue };
                s.accepted.fetch_add(1, Ordering::SeqCst);
                let s = s.clone();
                thread::spawn(move || {
                    let _ = handle(stream, &s);
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

    /// Connections accepted so far.
    pub fn accepted(&self) -> usize {
        self.shared.accepted.load(Ordering::SeqCst)
    }

    pub fn requests(&self) -> Vec<Recorded> {
        self.shared.requests.lock().unwrap().clone()
    }
}

fn handle(stream: TcpStream, shared: &Shared) -> std::io::Result<()> {
    stream.set_read_timeout(Some(std::time::Duration::from_secs(10)))?;
    let mut reader = BufReader::new(stream.try_clone()?);
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
    shared.requests.lock().unwrap().push(Recorded { method: method.clone(), target: target.clone(), headers, body });
    let reply = shared.routes.lock().unwrap().get(&path).cloned().unwrap_or_else(|| {
        Reply::json(200, &format!("{{\"method\":\"{method}\",\"path\":\"{path}\"}}"))
    });
    if reply.delay_ms > 0 {
        thread::sleep(std::time::Duration::from_millis(reply.delay_ms));
    }
    let mut out = stream;
    let mut head = format!("HTTP/1.1 {} X\r\nContent-Length: {}\r\nConnection: close\r\n", reply.status, reply.body.len());
    for (n, v) in &reply.headers {
        head.push_str(&format!("{n}: {v}\r\n"));
    }
    head.push_str("\r\n");
    out.write_all(head.as_bytes())?;
    out.write_all(&reply.body)?;
    out.flush()
}
