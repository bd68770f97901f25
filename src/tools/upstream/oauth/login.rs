//! `sp oauth login NAME`'s flow (issue 33 §2; MCP 2025-11-25, basic/authorization):
//!
//! ```text
//! POST initialize, no token ──401──> WWW-Authenticate resource_metadata (else the well-known places)
//!   ──GET──> protected resource metadata ──> its authorization server (auth.oauth.issuer, else the first)
//!   ──GET──> authorization server metadata (S256 required)
//! no auth.oauth.client_id: the client a former login registered (token store, same
//!   issuer and redirect URI), else POST registration_endpoint (RFC 7591, a public client)
//! PKCE + state ──> the URL, on stderr ──> the code: pasted on stdin, or the browser's
//!   redirect to a listener on 127.0.0.1 (`redirect: loopback`), its state checked
//! ──POST code + verifier + resource──> tokens ──> the token store (locked, 0600, replaced whole)
//! ```
//!
//! Nothing of a token is written anywhere but the store: the summary says whether a
//! refresh token came and how long the access token lives.

use std::io::{BufRead, Read as _, Write};
use std::net::TcpListener;
use std::time::{Duration, Instant};

use url::Url;
use zeroize::Zeroizing;

use super::fetch::{self, Reach};
use super::store::{now_s, Entry};
use super::{post_token, OAuthError, Settings};
use crate::cred::oauth2::code::{self, Authorize, PasteError};
use crate::cred::oauth2::register;
use crate::policy::upstreams::{OAuth, Redirect};

/// How long each discovery request may take.
const FETCH_TIMEOUT: Duration = Duration::from_secs(20);
/// How long the loopback listener waits for the browser.
pub(crate) const LOOPBACK_WAIT: Duration = Duration::from_secs(600);

/// Why the login did not complete. Never holds a token, a code or a verifier.
#[derive(Debug)]
pub(crate) enum LoginError {
    /// Discovery failed: what was fetched and why.
    Discovery(String),
    /// Dynamic client registration failed or is not possible: why.
    Register(String),
    Paste(PasteError),
    Token(OAuthError),
    /// Stdin, the listener or the random source.
    Io(String),
}

impl std::fmt::Display for LoginError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            LoginError::Discovery(why) => write!(f, "discovery failed: {why}"),
            LoginError::Register(why) => write!(f, "client registration failed: {why}"),
            LoginError::Paste(e) => write!(f, "{e}"),
            LoginError::Token(e) => write!(f, "{e}"),
            LoginError::Io(why) => f.write_str(why),
        }
    }
}

impl std::error::Error for LoginError {}

/// What the login got, for the summary.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct Done {
    pub issuer: String,
    pub expires_in: Option<u64>,
    pub refresh_token: bool,
}

/// Where the authorization server and the resource are, as discovered.
#[derive(Debug)]
struct Found {
    resource: String,
    server: code::ServerMetadata,
    scopes: Vec<String>,
}

fn random<const N: usize>() -> Result<[u8; N], LoginError> {
    let mut bytes = [0u8; N];
    match rustix::rand::getrandom(&mut bytes, rustix::rand::GetRandomFlags::empty()) {
        Ok(n) if n == N => Ok(bytes),
        _ => Err(LoginError::Io("the kernel's random source failed".into())),
    }
}

/// Runs the whole login: `prompt` is where the URL is shown (stderr), `input` where a
/// pasted code is read (stdin).
pub(crate) fn login(s: &Settings, policy: &OAuth, prompt: &mut dyn Write, input: &mut dyn BufRead) -> Result<Done, LoginError> {
    s.store.required_present().map_err(|e| LoginError::Token(OAuthError::Store(e)))?;
    let found = discover(s, policy)?;
    let pkce = code::Pkce::from_random(&random::<32>()?);
    let state = code::b64url(&random::<16>()?);
    let (listener, redirect_uri) = match &policy.redirect {
        Redirect::Stdin { redirect_uri } => (None, redirect_uri.to_string()),
        Redirect::Loopback { port } => {
            let l = TcpListener::bind(("127.0.0.1", *port))
                .map_err(|e| LoginError::Io(format!("cannot listen on 127.0.0.1:{port}: {}", crate::sys::io_reason(&e))))?;
            let port = l.local_addr().map_err(|e| LoginError::Io(crate::sys::io_reason(&e)))?.port();
            (Some(l), format!("http://127.0.0.1:{port}/callback"))
        }
    };
    let (client_id, registered) = client(s, policy, &found, &redirect_uri, prompt)?;
    let url = code::authorization_url(&Authorize {
        endpoint: &found.server.authorization_endpoint,
        client_id: &client_id,
        redirect_uri: &redirect_uri,
        scopes: &found.scopes,
        state: &state,
        challenge: pkce.challenge(),
        resource: &found.resource,
    });
    let io = |e: std::io::Error| LoginError::Io(crate::sys::io_reason(&e));
    let code = match listener {
        None => {
            writeln!(prompt, "Open this address in a browser and sign in:\n\n{url}\n\nThen paste the code, or the whole address the browser was sent to:")
                .map_err(io)?;
            prompt.flush().map_err(io)?;
            let mut line = Zeroizing::new(String::new());
            input.take(code::MAX_CODE_BYTES as u64 * 2 + 16).read_line(&mut line).map_err(io)?;
            code::parse_pasted(&line, &state).map_err(LoginError::Paste)?
        }
        Some(l) => {
            writeln!(prompt, "Open this address in a browser and sign in (waiting on {redirect_uri}):\n\n{url}\n").map_err(io)?;
            prompt.flush().map_err(io)?;
            receive(&l, &state, LOOPBACK_WAIT)?
        }
    };
    let request = code::code_request(&found.server.token_endpoint, &client_id, &code, &redirect_uri, pkce.verifier(), &found.resource);
    let sent = now_s();
    let token = post_token(s, &request).map_err(LoginError::Token)?;
    let entry = Entry {
        url: s.url.to_string(),
        client_id: client_id.clone(),
        resource: found.resource.clone(),
        issuer: found.server.issuer.to_string(),
        token_endpoint: found.server.token_endpoint.clone(),
        access_token: Zeroizing::new(token.secret().to_owned()),
        expires_at: sent.saturating_add(crate::cred::oauth2::fresh_for(token.expires_in()).as_secs()),
        refresh_token: token.refresh_token().map(|r| Zeroizing::new(r.to_owned())),
        registered_redirect_uri: registered.then(|| redirect_uri.clone()),
    };
    let done = Done { issuer: entry.issuer.clone(), expires_in: token.expires_in(), refresh_token: entry.refresh_token.is_some() };
    s.store.update(|tokens| tokens.insert(s.upstream.clone(), entry)).map_err(|e| LoginError::Token(OAuthError::Store(e)))?;
    Ok(done)
}

/// The client id to sign in with, and whether it is a registered one: the policy's;
/// else the one a former login registered with this issuer for this redirect URI (in
/// the token store); else a new registration (RFC 7591) at the authorization server's
/// `registration_endpoint`, checked like every discovered URL (`fetch::exchange`).
fn client(s: &Settings, policy: &OAuth, found: &Found, redirect_uri: &str, prompt: &mut dyn Write) -> Result<(String, bool), LoginError> {
    if let Some(c) = &policy.client_id {
        return Ok((c.clone(), false));
    }
    let issuer = found.server.issuer.to_string();
    let known = s
        .store
        .read()
        .map_err(|e| LoginError::Token(OAuthError::Store(e)))?
        .and_then(|mut t| t.remove(&s.upstream))
        .filter(|e| e.url == s.url.as_str() && e.issuer == issuer && e.registered_redirect_uri.as_deref() == Some(redirect_uri));
    if let Some(e) = known {
        return Ok((e.client_id, true));
    }
    let endpoint = match &found.server.registration_endpoint {
        None => {
            return Err(LoginError::Register(format!(
                "auth.oauth.client_id is not set and the authorization server {} offers no registration_endpoint (dynamic client registration): register sp there as a public client and set auth.oauth.client_id",
                fetch::shown(&found.server.issuer)
            )));
        }
        Some(Err(e)) => return Err(LoginError::Register(format!("the authorization server's metadata: {e}"))),
        Some(Ok(u)) => u,
    };
    let reach = Reach { named: &s.named, roots: s.roots.as_ref(), timeout: FETCH_TIMEOUT };
    let headers = [("content-type", Zeroizing::new("application/json".to_owned())), ("accept", Zeroizing::new("application/json".to_owned()))];
    let body = register::request_body(redirect_uri);
    let answer = fetch::exchange(&reach, endpoint, &headers, Some(&body), register::MAX_REGISTRATION_BYTES).map_err(LoginError::Register)?;
    let id = register::parse_registration(answer.status, &answer.body, redirect_uri)
        .map_err(|e| LoginError::Register(format!("{}: {e}", fetch::shown(endpoint))))?;
    let io = |e: std::io::Error| LoginError::Io(crate::sys::io_reason(&e));
    writeln!(prompt, "Registered sp as client {id:?} at {} (kept in the token store with the tokens).", fetch::shown(endpoint)).map_err(io)?;
    Ok((id, true))
}

/// GETs `urls` in turn until one answers 200: its body. A 404 (or any other status)
/// moves to the next; the last failure is the error.
fn first_document(reach: &Reach<'_>, urls: &[Url]) -> Result<(Url, Zeroizing<Vec<u8>>), LoginError> {
    let mut last = String::from("no place to look");
    for u in urls {
        match fetch::exchange(reach, u, &[], None, code::MAX_METADATA_BYTES) {
            Ok(a) if a.status == 200 => return Ok((u.clone(), a.body)),
            Ok(a) => last = format!("{} answered HTTP {}", fetch::shown(u), a.status),
            Err(why) => last = why,
        }
    }
    Err(LoginError::Discovery(last))
}

fn discover(s: &Settings, policy: &OAuth) -> Result<Found, LoginError> {
    let reach = Reach { named: &s.named, roots: s.roots.as_ref(), timeout: FETCH_TIMEOUT };
    // The challenge: an initialize without a token (MCP: the server answers 401 with
    // WWW-Authenticate; one that does not is looked up at the well-known places).
    let probe = br#"{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"sallyport","version":"0"}}}"#;
    let headers =
        [("content-type", Zeroizing::new("application/json".to_owned())), ("accept", Zeroizing::new("application/json, text/event-stream".to_owned()))];
    let challenge = match fetch::exchange(&reach, &s.url, &headers, Some(probe), 4096) {
        Ok(a) if a.status == 401 => a.challenge.as_deref().map(code::parse_challenge).unwrap_or_default(),
        Ok(a) => {
            log::info!("oauth login {}: the upstream answered HTTP {} without a token; looking for its metadata anyway", s.upstream, a.status);
            code::Challenge::default()
        }
        Err(why) => return Err(LoginError::Discovery(why)),
    };
    let places = match &challenge.resource_metadata {
        Some(u) => vec![
            Url::parse(u)
                .ok()
                .filter(code::acceptable_url)
                .ok_or_else(|| LoginError::Discovery("the 401's resource_metadata is not an acceptable URL".into()))?,
        ],
        None => code::resource_metadata_urls(&s.url),
    };
    let (at, body) = first_document(&reach, &places)?;
    let prm = code::parse_resource_metadata(&body, &s.url).map_err(|e| LoginError::Discovery(format!("{}: {e}", fetch::shown(&at))))?;
    let issuer =
        match &policy.issuer {
            Some(want) => prm.authorization_servers.iter().find(|a| code::canonical(a) == code::canonical(want)).ok_or_else(|| {
                LoginError::Discovery(format!("auth.oauth.issuer {} is not among the resource's authorization servers", fetch::shown(want)))
            })?,
            None => &prm.authorization_servers[0],
        };
    let (at, body) = first_document(&reach, &code::server_metadata_urls(issuer))?;
    let server = code::parse_server_metadata(&body, issuer).map_err(|e| LoginError::Discovery(format!("{}: {e}", fetch::shown(&at))))?;
    let scopes = if !policy.scopes.is_empty() {
        policy.scopes.clone()
    } else if let Some(sc) = &challenge.scope {
        sc.split_whitespace().map(str::to_owned).collect()
    } else {
        prm.scopes_supported.clone()
    };
    Ok(Found { resource: prm.resource, server, scopes })
}

/// Waits for the browser's redirect on `listener`: `GET /callback?code=…&state=…`.
/// Another path gets 404 and the wait goes on; a wrong state or an error ends it.
fn receive(listener: &TcpListener, state: &str, wait: Duration) -> Result<Zeroizing<String>, LoginError> {
    let io = |e: std::io::Error| LoginError::Io(crate::sys::io_reason(&e));
    listener.set_nonblocking(true).map_err(io)?;
    let deadline = Instant::now() + wait;
    loop {
        let (mut conn, _) = match listener.accept() {
            Ok(c) => c,
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                if Instant::now() >= deadline {
                    return Err(LoginError::Io(format!("no redirect came within {} s", wait.as_secs())));
                }
                std::thread::sleep(Duration::from_millis(50));
                continue;
            }
            Err(e) => return Err(io(e)),
        };
        conn.set_nonblocking(false).map_err(io)?;
        conn.set_read_timeout(Some(Duration::from_secs(10))).map_err(io)?;
        let mut head = Zeroizing::new(Vec::new());
        let mut reader = std::io::BufReader::new((&conn).take(16 * 1024));
        let _ = reader.read_until(b'\n', &mut head);
        let line = String::from_utf8_lossy(&head).into_owned();
        let target = line.split(' ').nth(1).unwrap_or("");
        let (path, query) = target.split_once('?').unwrap_or((target, ""));
        if !line.starts_with("GET ") || path != "/callback" {
            let _ = conn.write_all(b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\nConnection: close\r\n\r\n");
            continue;
        }
        let got = code::code_from_query(query, state);
        let text: &[u8] =
            if got.is_ok() { b"Signed in: sp has the code. You may close this window.\n" } else { b"sp refused this answer; see its terminal.\n" };
        let _ = write!(conn, "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: {}\r\nConnection: close\r\n\r\n", text.len());
        let _ = conn.write_all(text);
        return got.map_err(LoginError::Paste);
    }
}
