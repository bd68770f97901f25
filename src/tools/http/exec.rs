//! The HTTP executor: blocking ureq, every risky default set explicitly.
//!
//! - destination safety first (`dest.rs`): the host is resolved once, every address is
//!   checked (link-local, metadata, multicast, broadcast, unspecified and reserved
//!   addresses always refused; loopback, RFC 1918, CGNAT and unique-local ones only under
//!   a rule that names the host exactly), and ureq connects only to the checked addresses
//!   through a pinned resolver, so a second DNS answer cannot change the target. A
//!   refused destination is `SP_BLOCKED`: nothing is sent and the credential is not read;
//! - no proxy, ever, whatever `HTTP_PROXY`/`ALL_PROXY` say (a proxy hides the real
//!   destination from the policy);
//! - ureq follows no redirects: a 3xx comes back as data (`server.rs` follows same-origin
//!   ones hop by hop, and every hop comes through here again, resolved and checked anew);
//! - statuses are results (`http_status_as_error(false)`);
//! - `timeout_s` from the policy bounds the whole exchange, name lookup and body
//!   included;
//! - the body is read up to `max_response_bytes` and then the connection is dropped: a
//!   huge response is truncated while streaming, never buffered whole;
//! - no compression is requested (ureq is built without gzip); a body the server
//!   compressed anyway under a declared gzip or deflate coding (any letter case) is
//!   decoded here, within `max_response_bytes` of output, before anything is scrubbed
//!   (`coding.rs`); other codings are left for `result.rs` to withhold;
//! - connections are pooled per host and port only while that host resolves to the same
//!   checked addresses: when the answer changes, the pool is dropped, so a connection
//!   opened under an earlier answer is never reused for a later one.
//!
//! - a cancelled call shuts down every connection of the agent at once
//!   (ureq `Agent::shutdown`): a blocked read or write returns; the pool is replaced.
//!   A name lookup or a TCP connect in progress is not interrupted (policy timeout).
//!
//! The credential is read here, at the moment of use, and injected as the policy says.

use std::collections::HashMap;
use std::io::Read;
use std::net::{IpAddr, SocketAddr};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use ureq::http::Request;
use ureq::tls::{Certificate, RootCerts, TlsConfig};
use ureq::unversioned::transport::{Connector, RustlsConnector};

use super::coding;
use super::dial::{Deadline, Dialer};
use crate::net::dest::{self, Checked, DestError, Lookup, PinnedResolver, SystemLookup};
use crate::gate::exec::{Cancel, Event, ExecError, RunContext};
use crate::tools::http::result::HttpOutcome;
use crate::tools::Executor;
use url::Url;
use zeroize::Zeroizing;

use crate::gate::authorize::Authorized;
use crate::tools::http::authorize::HttpAction;
use crate::cred::oauth2;
use crate::policy::Injection;
use crate::cred::inject::{place, Placement};
use crate::gate::vault::Vault;
use crate::cred::sigv4;

pub(crate) const USER_AGENT: &str = concat!("sallyport/", env!("CARGO_PKG_VERSION"));

/// Distinct host:port pairs remembered per pool before it is dropped and started afresh.
const MAX_POOLED_DESTINATIONS: usize = 256;

pub struct HttpExecutor {
    lookup: Arc<dyn Lookup>,
    /// Test seam: every checked address must also pass this before ureq may dial it. It
    /// can only refuse, never admit; the SSRF tests use it so that nothing but loopback
    /// is ever dialed even if the check had a bug.
    dial_filter: Option<Box<dyn Fn(IpAddr) -> bool>>,
    /// Built on first use, then reused (connection pool) while answers stay the same.
    pool: Option<Pool>,
    /// Dials made through pools since dropped.
    retired_dials: u64,
    /// `http.ca_file` roots; `None`: the built-in Mozilla roots (webpki-roots), so a
    /// binary on a minimal container does not depend on the host's CA store.
    roots: Option<Arc<Vec<Vec<u8>>>>,
    /// OAuth2 tokens per credential, for the life of the executor (one per
    /// `sp mcp`).
    tokens: oauth2::TokenCache,
    /// Token fetches of the running request, emitted to the journal when it ends.
    token_fetches: Vec<crate::gate::exec::TokenFetch>,
    /// The last [`RECENT_SIGNATURES`] SigV4 signatures (credential, hex) and
    /// a redactor over them, applied to every response (see [`HttpExecutor::http`]).
    signatures: std::collections::VecDeque<(String, Zeroizing<String>)>,
    signature_redactor: crate::gate::redact::Redactor,
}

/// SigV4 signatures kept for redaction. Not the Vault: every remembered value rebuilds
/// the Vault's automaton over all values, so one per request grows without bound (2000
/// signed requests took 5 minutes of rebuilding in total). A signature is good for
/// that one request and a few minutes; the likely echo is the answer to that request
/// (S3's `SignatureDoesNotMatch` quotes it).
const RECENT_SIGNATURES: usize = 8;

struct Pool {
    agent: ureq::Agent,
    resolver: PinnedResolver,
    /// The checked addresses (sorted) each host:port's connections were opened under.
    opened_under: HashMap<(String, u16), Vec<SocketAddr>>,
    /// Set when a cancelled call shut the agent down: it takes no more
    /// requests, so the pool is replaced.
    shut: Arc<AtomicBool>,
    /// The running call's deadline, which every socket of the agent waits within
    /// (`dial.rs`).
    deadline: Arc<Deadline>,
}

impl Pool {
    fn new(roots: Option<&Arc<Vec<Vec<u8>>>>) -> Pool {
        let root_certs = match roots {
            Some(der) => {
                let certs: Vec<Certificate<'static>> = der.iter().map(|d| Certificate::from_der(d).to_owned()).collect();
                RootCerts::new_with_certs(&certs)
            }
            None => RootCerts::WebPki,
        };
        let tls = TlsConfig::builder().root_certs(root_certs).build();
        let config = ureq::Agent::config_builder()
            .tls_config(tls)
            .proxy(None)
            .max_redirects(0)
            .http_status_as_error(false)
            .https_only(false)
            .user_agent(USER_AGENT)
            .build();
        let resolver = PinnedResolver::new();
        let deadline = Deadline::new();
        // TCP by `dial.rs` (no timeout set per request, no probe that toggles the socket
        // mode), then TLS for `https`. No proxy connector: no proxy, ever.
        let connector = ().chain(Dialer { deadline: deadline.clone() }).chain(RustlsConnector::default());
        let agent = ureq::Agent::with_parts(config, connector, resolver.clone());
        Pool { agent, resolver, opened_under: HashMap::new(), shut: Arc::new(AtomicBool::new(false)), deadline }
    }
}

impl Default for HttpExecutor {
    fn default() -> HttpExecutor {
        HttpExecutor::with_lookup(SystemLookup)
    }
}

impl HttpExecutor {
    /// Resolves names with the system resolver.
    pub fn new() -> HttpExecutor {
        HttpExecutor::default()
    }

    /// Resolves names with `lookup` (tests inject DNS answers here).
    pub fn with_lookup(lookup: impl Lookup) -> HttpExecutor {
        HttpExecutor {
            lookup: Arc::new(lookup),
            dial_filter: None,
            pool: None,
            retired_dials: 0,
            roots: None,
            tokens: oauth2::TokenCache::new(),
            token_fetches: Vec::new(),
            signatures: std::collections::VecDeque::new(),
            signature_redactor: crate::gate::redact::Redactor::default(),
        }
    }

    /// Trusts exactly these CA certificates (DER) instead of the built-in roots.
    pub fn with_roots(mut self, roots: Option<&crate::policy::CaBundle>) -> HttpExecutor {
        self.roots = roots.map(|b| Arc::new(b.der.clone()));
        self.pool = None;
        self
    }

    /// Refuses to dial any checked address for which `allow` is false (`SP_UNAVAILABLE`,
    /// nothing sent). Only narrows what the destination check admits.
    pub fn restrict_dial(mut self, allow: impl Fn(IpAddr) -> bool + 'static) -> HttpExecutor {
        self.dial_filter = Some(Box::new(allow));
        self
    }

    /// How many times ureq was handed checked addresses to connect to (or to reuse a
    /// pooled connection to).
    pub fn dials(&self) -> u64 {
        self.retired_dials + self.pool.as_ref().map_or(0, |p| p.resolver.dials())
    }

    /// The agent, with `checked` pinned as the only destination it may resolve, and the
    /// flag a cancel sets when it shuts that agent down.
    fn agent_for(&mut self, checked: Checked) -> (&ureq::Agent, &Arc<AtomicBool>, &Deadline) {
        let key = (checked.host().to_owned(), checked.port());
        let mut set = checked.addrs().to_vec();
        set.sort();
        let stale = self.pool.as_ref().is_none_or(|p| {
            p.shut.load(Ordering::SeqCst)
                || match p.opened_under.get(&key) {
                    Some(before) => *before != set,
                    None => p.opened_under.len() >= MAX_POOLED_DESTINATIONS,
                }
        });
        if stale && let Some(old) = self.pool.take() {
            self.retired_dials += old.resolver.dials();
        }
        let roots = self.roots.clone();
        let pool = self.pool.get_or_insert_with(|| Pool::new(roots.as_ref()));
        pool.opened_under.insert(key, set);
        pool.resolver.pin(checked);
        (&pool.agent, &pool.shut, &pool.deadline)
    }
}

impl Executor for HttpExecutor {
    fn http(&mut self, authorized: &Authorized<HttpAction>, ctx: &mut RunContext<'_, '_>) -> Result<HttpOutcome, ExecError> {
        let cancel = ctx.cancel.clone();
        let mut result = self.http_interruptible(authorized, ctx.vault, &cancel);
        // The OAuth2 token fetches this request made, for the journal's `token` rows
        // (URL and outcome, never the token).
        for fetch in std::mem::take(&mut self.token_fetches) {
            let _ = ctx.output.emit(Event::Token(fetch));
        }
        if let Ok(outcome) = &mut result {
            self.scrub_signatures(outcome);
        }
        if cancel.is_cancelled() {
            // The agent's sockets were shut down (idle pooled ones too); a fresh pool
            // serves the next call. What came back is discarded.
            if let Some(old) = self.pool.take() {
                self.retired_dials += old.resolver.dials();
            }
            return Err(ExecError::Cancelled);
        }
        result
    }
}

impl HttpExecutor {
    fn http_interruptible(&mut self, authorized: &Authorized<HttpAction>, vault: &mut Vault, cancel: &Cancel) -> Result<HttpOutcome, ExecError> {
        let action = authorized.action();
        let started = Instant::now();
        let budget = Budget { started, timeout: action.timeout };
        let headers: Vec<(String, Zeroizing<String>)> = action.headers.iter().map(|(n, v)| (n.clone(), Zeroizing::new(v.clone()))).collect();
        let body = action.body.as_deref().map(str::as_bytes);
        let wire = Wire {
            method: action.method.as_str(),
            url: &action.url,
            headers: &headers,
            body,
            named_exactly: action.host_named_exactly,
            cap: action.max_response_bytes,
        };
        let Some(cred) = &action.credential else {
            return self.exchange(&wire, budget, cancel, &mut |_| Ok(()));
        };
        match &cred.inject {
            // Signed after the destination check, with the final URL, headers
            // and body, immediately before sending. A redirect hop comes through here
            // again, so it would be signed anew (today a credentialed request follows none).
            Injection::AwsSigV4(config) => {
                let mut signature = None;
                let result = self.exchange(&wire, budget, cancel, &mut |out| {
                    signature = Some(sign_aws(&cred.name, &cred.source, config, wire.method, out, body, vault)?);
                    Ok(())
                });
                if let Some(sig) = signature {
                    self.remember_signature(&cred.name, &sig);
                }
                result
            }
            Injection::OAuth2(request) => self.oauth2(&wire, &cred.name, &cred.source, request, vault, budget, cancel),
            inject => self.exchange(&wire, budget, cancel, &mut |out| {
                let secret = vault.read(&cred.name, &cred.source).map_err(ExecError::Secret)?;
                match place(inject, &secret) {
                    Placement::Header { name, value } => out.headers.push((name, value)),
                    Placement::Query { name, value } => {
                        out.url.query_pairs_mut().append_pair(&name, &value);
                    }
                    Placement::Executor => {}
                }
                Ok(())
            }),
        }
    }

    /// A signature just sent, for [`HttpExecutor::scrub_signatures`].
    fn remember_signature(&mut self, credential: &str, signature: &str) {
        if self.signatures.len() == RECENT_SIGNATURES {
            self.signatures.pop_front();
        }
        self.signatures.push_back((credential.to_owned(), Zeroizing::new(signature.to_owned())));
        let mut r = crate::gate::redact::Redactor::default();
        for (c, s) in &self.signatures {
            r.add(c, s);
        }
        self.signature_redactor = r;
    }

    /// Replaces every spelling of a recent signature in the response (body, a cut-off
    /// tail of one, headers) with `[REDACTED:<credential>]`, before `server.rs` scrubs
    /// it of the Vault's secrets.
    fn scrub_signatures(&self, o: &mut HttpOutcome) {
        let r = &self.signature_redactor;
        if r.is_empty() {
            return;
        }
        if let Some(body) = r.redact(&o.body) {
            o.body = body;
        }
        if o.truncated
            && let Some((start, name)) = r.tail_match(&o.body)
        {
            let marker = format!("[REDACTED:{name}]");
            o.body.truncate(start);
            o.body.extend_from_slice(marker.as_bytes());
        }
        r.redact_headers(&mut o.headers);
    }

    /// An API call with an OAuth2 token (`oauth2::with_token`): the cached one while it
    /// is fresh, else one fetched now; on a 401 with a cached token, one fetch more and
    /// one retry. The API's destination is checked before any token is fetched, so a
    /// blocked call reads no credential and sends nothing.
    #[allow(clippy::too_many_arguments, reason = "one call site, the pieces of one request")]
    fn oauth2(
        &mut self,
        wire: &Wire<'_>,
        name: &str,
        source: &crate::policy::SecretSource,
        request: &oauth2::TokenRequest,
        vault: &mut Vault,
        budget: Budget,
        cancel: &Cancel,
    ) -> Result<HttpOutcome, ExecError> {
        dest::resolve_and_check(&self.lookup, wire.url, wire.named_exactly, budget.remaining()).map_err(dest_error)?;
        let mut cache = std::mem::take(&mut self.tokens);
        let shared = std::cell::RefCell::new((&mut *self, &mut *vault));
        let result = oauth2::with_token(
            &mut cache,
            name,
            Instant::now,
            || {
                let mut guard = shared.borrow_mut();
                let (this, vault) = &mut *guard;
                this.fetch_token(name, source, request, vault, budget, cancel)
            },
            |token| {
                let mut guard = shared.borrow_mut();
                let (this, _) = &mut *guard;
                let authorization = token.authorization();
                let outcome = this.exchange(wire, budget, cancel, &mut |out| {
                    out.headers.push(("authorization".into(), authorization.clone()));
                    Ok(())
                })?;
                Ok(if outcome.status == 401 { oauth2::Reply::Unauthorized(outcome) } else { oauth2::Reply::Accepted(outcome) })
            },
        );
        self.tokens = cache;
        result
    }

    /// One token request (`grant_type=client_credentials`) through the same checked,
    /// pinned, TLS-verified path as any request, no redirect followed, the answer read
    /// up to `oauth2::MAX_TOKEN_RESPONSE_BYTES`. The client secret and the token are
    /// remembered for redaction before anything else sees them; the fetch is recorded
    /// for the journal (URL and outcome only).
    fn fetch_token(
        &mut self,
        name: &str,
        source: &crate::policy::SecretSource,
        request: &oauth2::TokenRequest,
        vault: &mut Vault,
        budget: Budget,
        cancel: &Cancel,
    ) -> Result<oauth2::Token, ExecError> {
        let target = crate::tools::http::target("POST", request.url());
        let result = self.fetch_token_inner(name, source, request, vault, budget, cancel);
        let outcome = match &result {
            Ok(token) => Ok(token.expires_in()),
            Err(e) => Err((e.code(), e.to_string())),
        };
        self.token_fetches.push(crate::gate::exec::TokenFetch { credential: name.to_owned(), target, outcome });
        result
    }

    fn fetch_token_inner(
        &mut self,
        name: &str,
        source: &crate::policy::SecretSource,
        request: &oauth2::TokenRequest,
        vault: &mut Vault,
        budget: Budget,
        cancel: &Cancel,
    ) -> Result<oauth2::Token, ExecError> {
        let url = request.url().clone();
        // The token endpoint is the operator's exact URL: private addresses (a local
        // identity provider) are allowed as for a host an allow rule names exactly;
        // metadata, link-local and the other always-refused ranges stay refused.
        let wire = Wire { method: "POST", url: &url, headers: &[], body: None, named_exactly: true, cap: oauth2::MAX_TOKEN_RESPONSE_BYTES as u64 };
        let mut outcome = self.exchange(&wire, budget, cancel, &mut |out| {
            let secret = vault.read(name, source).map_err(ExecError::Secret)?;
            let creds =
                oauth2::ClientCredentials::parse(secret.expose().as_bytes()).map_err(|e| ExecError::Unavailable(format!("credential {name:?}: {e}")))?;
            vault.remember(name, creds.client_secret());
            let prepared = request.build(&creds);
            out.headers.extend(prepared.headers.into_iter().map(|(n, v)| (n.to_owned(), v)));
            out.body.extend_from_slice(prepared.body.as_bytes());
            Ok(())
        })?;
        let parsed = if outcome.truncated {
            Err(oauth2::TokenError::TooLarge)
        } else {
            // A token shorter than the credential's minimum is refused here: not used,
            // not remembered, not cached (`secret.rs`, "Short secrets").
            oauth2::parse_token_response(outcome.status, &outcome.body).and_then(|t| t.at_least(vault.min_secret_bytes(name)))
        };
        zeroize::Zeroize::zeroize(&mut outcome.body);
        let token = parsed.map_err(|e| ExecError::Upstream(format!("credential {name:?}: {e}")))?;
        vault.remember(name, token.secret());
        Ok(token)
    }

    /// One request on the wire. Before anything is read or sent: resolve once, check
    /// every address. Then `late` adds what the credential says (reading it only now),
    /// and the request goes out at once.
    fn exchange(
        &mut self,
        wire: &Wire<'_>,
        budget: Budget,
        cancel: &Cancel,
        late: &mut dyn FnMut(&mut Outgoing) -> Result<(), ExecError>,
    ) -> Result<HttpOutcome, ExecError> {
        let target = format!("{}:{}", wire.url.host_str().unwrap_or_default(), wire.url.port_or_known_default().unwrap_or_default());
        let checked = dest::resolve_and_check(&self.lookup, wire.url, wire.named_exactly, budget.remaining()).map_err(dest_error)?;
        let mut out = Outgoing { url: wire.url.clone(), headers: wire.headers.to_vec(), body: Zeroizing::new(Vec::new()) };
        late(&mut out)?;
        let mut builder = Request::builder().method(wire.method).uri(out.url.as_str());
        for (name, value) in &out.headers {
            builder = builder.header(name.as_str(), value.as_str());
        }
        if let Some(allow) = &self.dial_filter
            && let Some(a) = checked.addrs().iter().find(|a| !allow(a.ip()))
        {
            return Err(ExecError::Unavailable(format!("{target}: {} is outside the dial restriction; not dialed", a.ip())));
        }
        let remaining = budget.remaining();
        if remaining.is_zero() {
            return Err(ExecError::Timeout(format!("{target}: timed out")));
        }
        let (agent, shut, deadline) = self.agent_for(checked);
        // Connect, send and the whole answer, body included, within the time left.
        deadline.set(remaining);
        // A cancel shuts down every connection of this agent at once: a read or
        // write blocked on the socket returns (ureq `Agent::shutdown`). A TCP connect in
        // progress is not interrupted (bounded by the policy timeout).
        let (interrupt, shut) = (agent.clone(), shut.clone());
        cancel.on_cancel(move || {
            shut.store(true, Ordering::SeqCst);
            interrupt.shutdown();
        });
        if cancel.is_cancelled() {
            return Err(ExecError::Cancelled);
        }
        let sent = match wire.body {
            Some(body) => builder.body(body).map(|r| agent.run(r)),
            None if !out.body.is_empty() => builder.body(&out.body[..]).map(|r| agent.run(r)),
            None => builder.body(()).map(|r| agent.run(r)),
        };
        let response = sent.map_err(|_| ExecError::Upstream("the request could not be built".into()))?.map_err(|e| classify(e, &target))?;

        let status = response.status().as_u16();
        let headers = response
            .headers()
            .iter()
            .filter(|(n, _)| n.as_str() != "set-cookie")
            .map(|(n, v)| (n.as_str().to_owned(), String::from_utf8_lossy(v.as_bytes()).into_owned()))
            .collect();
        let cap = wire.cap;
        let mut body = Vec::new();
        response.into_body().into_reader().take(cap + 1).read_to_end(&mut body).map_err(|e| classify_io(&e, &target))?;
        let mut truncated = body.len() as u64 > cap;
        body.truncate(cap as usize);
        let mut headers = headers;
        coding::decode_declared(&mut headers, &mut body, &mut truncated, usize::try_from(cap).unwrap_or(usize::MAX));
        Ok(HttpOutcome { status, headers, body, truncated })
    }
}

/// Headers as they will be sent; values are zeroed on drop (they may hold a credential).
type Headers = Vec<(String, Zeroizing<String>)>;

/// What the credential adds after the destination check: the URL (a query
/// credential), headers, and a body (the token request's form).
struct Outgoing {
    url: Url,
    headers: Headers,
    body: Zeroizing<Vec<u8>>,
}

/// The request as authorized (or the token request as configured), before the
/// credential is added.
struct Wire<'a> {
    method: &'a str,
    url: &'a Url,
    headers: &'a [(String, Zeroizing<String>)],
    body: Option<&'a [u8]>,
    /// Private destinations are allowed (see `dest.rs`).
    named_exactly: bool,
    /// Response bytes read at most.
    cap: u64,
}

/// The policy timeout of one call, shared by its token fetch and its API request(s).
#[derive(Clone, Copy)]
struct Budget {
    started: Instant,
    timeout: Duration,
}

impl Budget {
    fn remaining(self) -> Duration {
        self.timeout.saturating_sub(self.started.elapsed())
    }
}

/// Reads the `aws_sigv4` credential (JSON, so pretty-printed output of the
/// AWS CLI works), remembers the secret key and session token for redaction, adds the
/// signer's headers to `out.headers`, which is exactly what will be sent (ureq adds
/// only unsigned ones: user-agent, content-length, accept), and returns the signature.
fn sign_aws(
    name: &str,
    source: &crate::policy::SecretSource,
    config: &sigv4::SigV4Config,
    method: &str,
    out: &mut Outgoing,
    body: Option<&[u8]>,
    vault: &mut Vault,
) -> Result<Zeroizing<String>, ExecError> {
    let secret = vault.read_json(name, source).map_err(ExecError::Secret)?;
    let creds = sigv4::Credentials::from_json(secret.expose().as_bytes()).map_err(|e| ExecError::Unavailable(format!("credential {name:?}: {e}")))?;
    vault.remember(name, creds.secret_access_key());
    if let Some(t) = creds.session_token() {
        vault.remember(name, t);
    }
    let signed = {
        let pairs: Vec<(&str, &str)> = out.headers.iter().map(|(n, v)| (n.as_str(), v.as_str())).collect();
        let request = sigv4::Request { method, url: &out.url, headers: &pairs, payload: config.payload(body.unwrap_or_default()) };
        sigv4::sign(&request, &creds, &config.scope, std::time::SystemTime::now())
            .map_err(|e| ExecError::Unavailable(format!("credential {name:?}: cannot sign: {e}")))?
    };
    out.headers.extend(signed.headers().map(|(n, v)| (n.to_owned(), Zeroizing::new(v.to_owned()))));
    Ok(Zeroizing::new(signed.signature().to_owned()))
}

fn dest_error(e: DestError) -> ExecError {
    match e {
        DestError::Blocked(m) => ExecError::Blocked(m),
        DestError::Timeout(m) => ExecError::Timeout(m),
        DestError::NotFound(m) | DestError::Failed(m) => ExecError::Unavailable(m),
    }
}

fn classify(e: ureq::Error, target: &str) -> ExecError {
    match e {
        ureq::Error::Timeout(_) => ExecError::Timeout(format!("{target}: timed out")),
        ureq::Error::HostNotFound => ExecError::Unavailable(format!("{target}: host not found")),
        ureq::Error::ConnectionFailed => ExecError::Unavailable(format!("{target}: connection failed")),
        ureq::Error::Io(io) => classify_io(&io, target),
        ureq::Error::Tls(why) => ExecError::Unavailable(format!("{target}: TLS failed: {why}")),
        ureq::Error::Rustls(e) => ExecError::Unavailable(format!("{target}: TLS failed: {e}")),
        _ => ExecError::Upstream(format!("{target}: the server's response could not be read as HTTP")),
    }
}

fn classify_io(e: &std::io::Error, target: &str) -> ExecError {
    use std::io::ErrorKind::*;
    // The pinned resolver refused a host or port that was not checked (cannot happen
    // while ureq follows no redirects and uses no proxy; refused all the same).
    if let Some(inner) = e.get_ref().and_then(|i| i.downcast_ref::<dest::Unpinned>()) {
        return ExecError::Blocked(format!("{target}: not connecting: {inner}"));
    }
    // ureq wraps its own errors (a timeout while reading the body) in io::Error.
    if let Some(inner) = e.get_ref().and_then(|i| i.downcast_ref::<ureq::Error>())
        && matches!(inner, ureq::Error::Timeout(_))
    {
        return ExecError::Timeout(format!("{target}: timed out"));
    }
    match e.kind() {
        TimedOut | WouldBlock => ExecError::Timeout(format!("{target}: timed out")),
        ConnectionRefused => ExecError::Unavailable(format!("{target}: connection refused")),
        ConnectionReset | ConnectionAborted | BrokenPipe | UnexpectedEof => ExecError::Upstream(format!("{target}: connection closed by the server")),
        // rustls reports a failed handshake (an untrusted certificate, a name mismatch)
        // as InvalidData wrapping its own error, whose text names the reason.
        InvalidData => match e.get_ref() {
            Some(inner) => ExecError::Unavailable(format!("{target}: TLS failed: {inner}")),
            None => ExecError::Upstream(format!("{target}: invalid data from the server")),
        },
        k => ExecError::Unavailable(format!("{target}: {k}")),
    }
}
