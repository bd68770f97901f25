//! The Streamable HTTP transport (MCP 2025-11-25, basic/transports): every message `sp`
//! sends is a POST to the upstream's one URL; a request's answer comes back as one JSON
//! body or as an SSE stream (`text/event-stream`) that may carry the upstream's own
//! requests and notifications before the answer. Notifications and responses `sp` sends
//! are answered 202.
//!
//! - The URL passes the same destination check as `http_request` (`net/dest.rs`):
//!   resolved once when the upstream starts, every address classified, ureq pinned to
//!   those addresses (no second lookup, no DNS rebinding). The operator named this URL
//!   exactly, so private addresses are reachable, as for an `http.allow` rule that names
//!   its host exactly; the always-blocked classes (metadata, link-local, ...) never are.
//! - No proxy, no redirects, no header of the agent's choosing: only `content-type`,
//!   `accept`, `mcp-session-id` (echoed from the `initialize` answer),
//!   `mcp-protocol-version` (after the handshake), and the credential as its `inject`
//!   says (bearer, basic, header, query). A credential is sent over plain http only to a
//!   loopback address. `oauth2` and `aws_sigv4` credentials are not supported yet.
//! - Each POST runs on a thread of its own, which feeds what it reads into a channel
//!   that [`Transport::recv`] waits on with the deadline and the cancel. A JSON body or
//!   an SSE event's data is one message, capped at the line cap (`max_output_bytes`),
//!   parsed as strictly as a stdio line.
//! - HTTP 401 or 403: the credential is refused, the transport is broken. With
//!   `auth.oauth` (`oauth/`), a 401 first gets one refresh of the token and the POST is
//!   sent again (a 401 was not processed); the token is refreshed before it expires too. HTTP 404 once a session exists:
//!   the upstream ended the session. Any other status but 200 and 202: broken.
//! - [`Transport::close`]: a DELETE with the session id (best effort, 2 s), then every
//!   connection of the agent is shut down, so a thread blocked on a stream returns.
//!
//! Not yet: the GET stream for messages the upstream sends outside a request (servers
//! must not depend on it: they may answer 405), resuming a broken stream
//! (`Last-Event-ID`).

use std::io::{BufRead, BufReader, Read};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, SyncSender};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::Value;
use ureq::http::Request;
use url::Url;
use zeroize::Zeroizing;

use super::oauth::Bearer;
use super::transport::{Recv, StartError, Transport, TransportError};
use crate::gate::exec::Cancel;
use crate::mcp::frame::FrameError;
use crate::net::dest::{self, PinnedResolver};

const SLICE: Duration = Duration::from_millis(20);
const DELETE_GRACE: Duration = Duration::from_secs(2);
/// Messages read ahead of the client: a full inbox stops the reading threads (they
/// wait), so a stream that never ends cannot grow `sp`'s memory.
const INBOX: usize = 64;

type Inbox = Result<Value, TransportError>;

/// What to reach: from the policy, the credential already placed.
pub(crate) struct Reach {
    pub name: String,
    pub url: Url,
    /// The credential's header, if it injects one.
    pub header: Option<(String, Zeroizing<String>)>,
    /// The credential's query parameter, if it injects one (added to `url` here).
    pub query: Option<(String, Zeroizing<String>)>,
    pub max_line_bytes: usize,
    pub roots: Option<Vec<Vec<u8>>>,
    /// `auth.oauth`: the access token, refreshed before expiry and once on a 401.
    pub bearer: Option<Arc<Bearer>>,
}

pub(crate) struct HttpTransport {
    name: String,
    url: Zeroizing<String>,
    header: Option<(String, Zeroizing<String>)>,
    bearer: Option<Arc<Bearer>>,
    agent: Option<ureq::Agent>,
    session: Arc<Mutex<Option<String>>>,
    version: Option<&'static str>,
    tx: SyncSender<Inbox>,
    rx: Receiver<Inbox>,
    max_line_bytes: usize,
}

impl HttpTransport {
    /// Checks the destination (resolving it once, within `timeout`) and prepares the
    /// agent; nothing is sent yet.
    pub(crate) fn connect(reach: Reach, timeout: Duration) -> Result<HttpTransport, StartError> {
        let lookup: Arc<dyn dest::Lookup> = Arc::new(dest::SystemLookup);
        let checked = dest::resolve_and_check(&lookup, &reach.url, true, timeout).map_err(StartError::Destination)?;
        let credentialed = reach.header.is_some() || reach.query.is_some() || reach.bearer.is_some();
        if credentialed && reach.url.scheme() != "https" && !checked.addrs().iter().all(|a| a.ip().is_loopback()) {
            return Err(StartError::PlainHttp);
        }
        let roots = match &reach.roots {
            Some(der) => {
                let certs: Vec<ureq::tls::Certificate<'static>> = der.iter().map(|d| ureq::tls::Certificate::from_der(d).to_owned()).collect();
                ureq::tls::RootCerts::new_with_certs(&certs)
            }
            None => ureq::tls::RootCerts::WebPki,
        };
        let config = ureq::Agent::config_builder()
            .tls_config(ureq::tls::TlsConfig::builder().root_certs(roots).build())
            .proxy(None)
            .max_redirects(0)
            .http_status_as_error(false)
            .user_agent(concat!("sallyport/", env!("CARGO_PKG_VERSION")))
            .build();
        let resolver = PinnedResolver::new();
        resolver.pin(checked);
        let agent = ureq::Agent::with_parts(config, ureq::unversioned::transport::DefaultConnector::new(), resolver);
        let mut url = reach.url;
        if let Some((name, value)) = &reach.query {
            url.query_pairs_mut().append_pair(name, value);
        }
        let (tx, rx) = mpsc::sync_channel(INBOX);
        Ok(HttpTransport {
            name: reach.name,
            url: Zeroizing::new(url.to_string()),
            header: reach.header,
            bearer: reach.bearer,
            agent: Some(agent),
            session: Arc::new(Mutex::new(None)),
            version: None,
            tx,
            rx,
            max_line_bytes: reach.max_line_bytes,
        })
    }

    fn session(&self) -> Option<String> {
        self.session.lock().unwrap_or_else(std::sync::PoisonError::into_inner).clone()
    }
}

/// One POST, on its own thread.
struct Post {
    agent: ureq::Agent,
    url: Zeroizing<String>,
    headers: Vec<(String, Zeroizing<String>)>,
    /// The OAuth token source and the token this POST carries (in `headers` too).
    bearer: Option<(Arc<Bearer>, Zeroizing<String>)>,
    session: Arc<Mutex<Option<String>>>,
    body: Vec<u8>,
    remaining: Duration,
    /// A request's id: an answer must come (JSON or SSE), not a 202; its stream is
    /// left once the answer is read.
    request: Option<Value>,
    max: usize,
    tx: SyncSender<Inbox>,
}

fn broken(why: impl Into<String>) -> TransportError {
    TransportError::Http(why.into())
}

impl Post {
    fn run(self) {
        if let Err(e) = self.exchange() {
            let _ = self.tx.send(Err(e));
        }
    }

    fn exchange(&self) -> Result<(), TransportError> {
        let had_session = self.session.lock().unwrap_or_else(std::sync::PoisonError::into_inner).clone();
        let mut response = self.post(had_session.as_deref(), self.bearer.as_ref().map(|(_, t)| t))?;
        if response.status().as_u16() == 401
            && let Some((bearer, used)) = &self.bearer
        {
            // Once per POST (issue 33 §2): a token another thread refreshed meanwhile,
            // else a refresh now; a 401 was not processed, so sending again is safe.
            let token = bearer.after_401(used).map_err(|e| TransportError::Auth(e.to_string()))?;
            response = self.post(had_session.as_deref(), Some(&token))?;
            if response.status().as_u16() == 401 {
                return Err(TransportError::Auth(super::oauth::OAuthError::Refused { upstream: bearer.upstream().to_owned() }.to_string()));
            }
        }
        let status = response.status().as_u16();
        match status {
            200 => {}
            202 if self.request.is_none() => return Ok(()),
            202 => return Err(broken("it answered a request with 202 and no message")),
            401 | 403 => return Err(broken(format!("it refused the credential (HTTP {status})"))),
            404 if had_session.is_some() => return Err(broken("it ended the session (HTTP 404)")),
            s => return Err(broken(format!("it answered HTTP {s}"))),
        }
        if let Some(id) = response.headers().get("mcp-session-id") {
            let id = id.to_str().ok().filter(|s| !s.is_empty() && s.len() <= 256 && s.bytes().all(|b| (0x21..=0x7e).contains(&b)));
            let Some(id) = id else { return Err(broken("its Mcp-Session-Id is not visible ASCII of at most 256 bytes")) };
            let mut session = self.session.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
            if session.is_none() {
                *session = Some(id.to_owned());
            }
        }
        let kind = response.headers().get("content-type").and_then(|v| v.to_str().ok()).unwrap_or("").to_ascii_lowercase();
        let kind = kind.split(';').next().unwrap_or("").trim().to_owned();
        let reader = response.into_body().into_reader();
        match kind.as_str() {
            "application/json" => {
                let mut body = Vec::new();
                reader.take(self.max as u64 + 1).read_to_end(&mut body).map_err(|e| broken(format!("reading its answer failed: {e}")))?;
                if body.len() > self.max {
                    return Err(TransportError::Frame(FrameError::TooLong { limit: self.max }));
                }
                self.deliver(body).map(|_| ())
            }
            "text/event-stream" => self.events(BufReader::new(reader)),
            "" if self.request.is_none() => Ok(()),
            _ => Err(broken("its answer is neither application/json nor text/event-stream")),
        }
    }

    /// One POST of the body, with the OAuth token `token` when given.
    fn post(&self, session: Option<&str>, token: Option<&Zeroizing<String>>) -> Result<ureq::http::Response<ureq::Body>, TransportError> {
        let mut builder = Request::builder()
            .method("POST")
            .uri(self.url.as_str())
            .header("content-type", "application/json")
            .header("accept", "application/json, text/event-stream");
        for (name, value) in &self.headers {
            builder = builder.header(name.as_str(), value.as_str());
        }
        if let Some(t) = token {
            builder = builder.header("authorization", format!("Bearer {}", t.as_str()));
        }
        if let Some(s) = session {
            builder = builder.header("mcp-session-id", s);
        }
        let request = builder.body(&self.body[..]).map_err(|_| broken("the request could not be built"))?;
        let request = self.agent.configure_request(request).timeout_global(Some(self.remaining)).timeout_connect(Some(self.remaining)).build();
        self.agent.run(request).map_err(|e| broken(format!("the POST failed: {}", ureq_reason(&e))))
    }

    /// Parses one message and hands it to the client; true if it is the answer to this
    /// POST's request (its stream has nothing more for `sp`).
    fn deliver(&self, data: Vec<u8>) -> Result<bool, TransportError> {
        let text = String::from_utf8(data).map_err(|e| TransportError::Frame(FrameError::InvalidUtf8 { offset: e.utf8_error().valid_up_to() }))?;
        let value = crate::json::parse_limited(&text, self.max.saturating_mul(2)).map_err(TransportError::Json)?;
        let answer = self.request.is_some() && value.get("id") == self.request.as_ref() && (value.get("result").is_some() || value.get("error").is_some());
        // The client is gone (the transport was dropped): stop reading.
        Ok(self.tx.send(Ok(value)).is_err() || answer)
    }

    /// Server-sent events: `data:` lines joined by `\n` make one message; a blank line
    /// ends an event; `event:`, `id:`, `retry:` and comments are ignored. The stream is
    /// left (the connection closed) once the request's answer is read.
    fn events(&self, mut reader: impl BufRead) -> Result<(), TransportError> {
        let mut data: Vec<u8> = Vec::new();
        let mut has_data = false;
        let mut line = Vec::new();
        loop {
            line.clear();
            let n = (&mut reader).take(self.max as u64 + 2).read_until(b'\n', &mut line).map_err(|e| broken(format!("reading its stream failed: {e}")))?;
            if n == 0 {
                return Ok(());
            }
            if !line.ends_with(b"\n") && line.len() > self.max {
                return Err(TransportError::Frame(FrameError::TooLong { limit: self.max }));
            }
            while matches!(line.last(), Some(b'\n' | b'\r')) {
                line.pop();
            }
            if line.is_empty() {
                if has_data {
                    if self.deliver(std::mem::take(&mut data))? {
                        return Ok(());
                    }
                    has_data = false;
                }
                continue;
            }
            if let Some(rest) = line.strip_prefix(b"data:") {
                let rest = rest.strip_prefix(b" ").unwrap_or(rest);
                if has_data {
                    data.push(b'\n');
                }
                if data.len() + rest.len() > self.max {
                    return Err(TransportError::Frame(FrameError::TooLong { limit: self.max }));
                }
                data.extend_from_slice(rest);
                has_data = true;
            }
        }
    }
}

fn ureq_reason(e: &ureq::Error) -> String {
    match e {
        ureq::Error::Timeout(_) => "timed out".into(),
        ureq::Error::ConnectionFailed => "connection failed".into(),
        ureq::Error::Io(io) => crate::sys::io_reason(io),
        ureq::Error::Tls(why) => format!("TLS failed: {why}"),
        ureq::Error::Rustls(e) => format!("TLS failed: {e}"),
        _ => "the answer could not be read as HTTP".into(),
    }
}

impl Transport for HttpTransport {
    fn send(&mut self, message: &Value, deadline: Instant, cancel: &Cancel) -> Result<(), TransportError> {
        let Some(agent) = &self.agent else { return Err(TransportError::Closed { status: None }) };
        if cancel.is_cancelled() {
            return Err(TransportError::Stalled);
        }
        let mut headers: Vec<(String, Zeroizing<String>)> = self.header.iter().map(|(n, v)| (n.clone(), v.clone())).collect();
        if let Some(v) = self.version {
            headers.push(("mcp-protocol-version".into(), Zeroizing::new(v.to_owned())));
        }
        let request = message.get("method").and(message.get("id")).cloned();
        let bearer = match &self.bearer {
            Some(b) => Some((b.clone(), b.token().map_err(|e| TransportError::Auth(e.to_string()))?)),
            None => None,
        };
        let post = Post {
            agent: agent.clone(),
            url: self.url.clone(),
            headers,
            bearer,
            session: self.session.clone(),
            body: serde_json::to_vec(message).map_err(|e| broken(e.to_string()))?,
            remaining: deadline.saturating_duration_since(Instant::now()).max(Duration::from_millis(1)),
            request,
            max: self.max_line_bytes,
            tx: self.tx.clone(),
        };
        std::thread::Builder::new()
            .name(format!("upstream-{}-post", self.name))
            .spawn(move || post.run())
            .map_err(|e| broken(format!("could not start a thread: {e}")))?;
        Ok(())
    }

    fn recv(&mut self, deadline: Instant, cancel: &Cancel) -> Result<Recv, TransportError> {
        loop {
            if cancel.is_cancelled() {
                return Ok(Recv::Cancelled);
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Ok(Recv::TimedOut);
            }
            match self.rx.recv_timeout(left.min(SLICE)) {
                Ok(Ok(v)) => return Ok(Recv::Message(v)),
                Ok(Err(e)) => return Err(e),
                Err(RecvTimeoutError::Timeout) => {}
                Err(RecvTimeoutError::Disconnected) => return Err(TransportError::Closed { status: None }),
            }
        }
    }

    fn negotiated(&mut self, version: &'static str) {
        self.version = Some(version);
    }

    fn close(&mut self) {
        let Some(agent) = self.agent.take() else { return };
        if let Some(session) = self.session() {
            // MCP transports: a client that is done with a session SHOULD end it.
            let mut builder = Request::builder().method("DELETE").uri(self.url.as_str()).header("mcp-session-id", session.as_str());
            if let Some((name, value)) = &self.header {
                builder = builder.header(name.as_str(), value.as_str());
            }
            if let Some(b) = &self.bearer {
                builder = builder.header("authorization", format!("Bearer {}", b.current().as_str()));
            }
            if let Ok(request) = builder.body(()) {
                let request = agent.configure_request(request).timeout_global(Some(DELETE_GRACE)).build();
                let _ = agent.run(request);
            }
        }
        agent.shutdown();
        log::debug!("upstream {}: closed", self.name);
    }
}

impl Drop for HttpTransport {
    fn drop(&mut self) {
        Transport::close(self);
    }
}
