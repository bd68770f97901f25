//! One HTTP exchange of the OAuth flow (a metadata GET, a token POST, the first
//! unauthenticated POST that draws the `401` challenge) through the same checks as
//! every request `sp` makes (`net/dest.rs`): resolved once, every address classified,
//! ureq pinned to them; no proxy, no redirect (a 3xx is an answer like any other, and
//! no document is taken from one); TLS with the web roots or `http.ca_file`'s; the body
//! read up to a cap, the rest never read.

use std::io::Read as _;
use std::sync::Arc;
use std::time::Duration;

use ureq::http::Request;
use url::Url;
use zeroize::Zeroizing;

use crate::net::dest::{self, PinnedResolver};

/// What came back: the status, the `WWW-Authenticate` value (for a 401), the body up
/// to the cap plus one byte (so a parser can tell it was longer).
#[derive(Debug)]
pub(crate) struct Answer {
    pub status: u16,
    pub challenge: Option<String>,
    pub body: Zeroizing<Vec<u8>>,
}

/// Where an exchange goes and what it may reach.
#[derive(Debug, Clone)]
pub(crate) struct Reach<'a> {
    /// The hosts the operator named (the upstream's, `auth.oauth.issuer`'s): private
    /// addresses are reachable there as for an `http.allow` rule naming its host
    /// exactly; a host only a document named gets the public-address rules.
    pub named: &'a [String],
    pub roots: Option<&'a Vec<Vec<u8>>>,
    pub timeout: Duration,
}

/// A GET (`body` None) or a POST of `body` with `headers`, answered within the timeout.
/// The error is a reason for the operator (never a header value or the body).
pub(crate) fn exchange(reach: &Reach<'_>, url: &Url, headers: &[(&str, Zeroizing<String>)], body: Option<&[u8]>, max: usize) -> Result<Answer, String> {
    if !crate::cred::oauth2::code::acceptable_url(url) {
        return Err(format!("{} is not https (plain http only to a loopback host)", shown(url)));
    }
    let host = url.host_str().unwrap_or_default().trim_end_matches('.').to_ascii_lowercase();
    let named_exactly = reach.named.iter().any(|h| h.eq_ignore_ascii_case(&host));
    let lookup: Arc<dyn dest::Lookup> = Arc::new(dest::SystemLookup);
    let checked = dest::resolve_and_check(&lookup, url, named_exactly, reach.timeout).map_err(|e| e.to_string())?;
    let roots = match reach.roots {
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
        .timeout_global(Some(reach.timeout))
        .user_agent(concat!("sallyport/", env!("CARGO_PKG_VERSION")))
        .build();
    let resolver = PinnedResolver::new();
    resolver.pin(checked);
    let agent = ureq::Agent::with_parts(config, ureq::unversioned::transport::DefaultConnector::new(), resolver);
    let mut builder = Request::builder().method(if body.is_some() { "POST" } else { "GET" }).uri(url.as_str());
    if body.is_none() {
        builder = builder.header("accept", "application/json");
    }
    for (name, value) in headers {
        builder = builder.header(*name, value.as_str());
    }
    let response = builder
        .body(body.unwrap_or_default().to_vec())
        .map_err(|_| "the request could not be built".to_owned())
        .and_then(|r| agent.run(r).map_err(|e| format!("{}: {}", shown(url), reason(&e))))?;
    let status = response.status().as_u16();
    let challenge =
        response.headers().get("www-authenticate").and_then(|v| v.to_str().ok()).map(|v| crate::sys::short(v, 2048, crate::sys::Ellipsis::Marked));
    let mut out = Zeroizing::new(Vec::new());
    response
        .into_body()
        .into_reader()
        .take(max as u64 + 1)
        .read_to_end(&mut out)
        .map_err(|e| format!("{}: reading the answer failed: {}", shown(url), crate::sys::io_reason(&e)))?;
    Ok(Answer { status, challenge, body: out })
}

/// The URL as shown in messages: scheme, host, port and path (never its query).
pub(crate) fn shown(url: &Url) -> String {
    let port = url.port().map(|p| format!(":{p}")).unwrap_or_default();
    format!("{}://{}{port}{}", url.scheme(), url.host_str().unwrap_or_default(), url.path())
}

fn reason(e: &ureq::Error) -> String {
    match e {
        ureq::Error::Timeout(_) => "timed out".into(),
        ureq::Error::ConnectionFailed => "connection failed".into(),
        ureq::Error::Io(io) => crate::sys::io_reason(io),
        ureq::Error::Tls(why) => format!("TLS failed: {why}"),
        ureq::Error::Rustls(e) => format!("TLS failed: {e}"),
        _ => "the answer could not be read as HTTP".into(),
    }
}
