//! The authorization code grant with PKCE (RFC 6749 4.1, RFC 7636, OAuth 2.1) as the
//! MCP authorization spec asks it of a client (2025-11-25, basic/authorization), the
//! pure part: no I/O. `tools/upstream/oauth/` fetches and stores; `sp oauth login` asks.
//!
//! ```text
//! POST initialize, no token ──401, WWW-Authenticate: Bearer resource_metadata="…"──> parse_challenge
//!   resource_metadata, else resource_metadata_urls(url)      (RFC 9728 3.1: path-inserted, then root)
//!   ──GET──> parse_resource_metadata  (its `resource` must be the upstream's URL or a prefix of it)
//!   authorization_servers[i] ──server_metadata_urls──GET──> parse_server_metadata
//!                                 (RFC 8414 / OIDC discovery; issuer identical; S256 or refuse)
//! Pkce::from_random, state ──authorization_url──> the operator's browser ──> code (parse_pasted)
//! code_request ──POST──> parse_token_response (mod.rs): access + refresh token
//! later: refresh_request ──POST──> a new access token (and a rotated refresh token)
//! ```
//!
//! Every document is untrusted: at most [`MAX_METADATA_BYTES`], parsed strictly (a
//! duplicate member is refused), each URL it gives must be `https` (plain `http` only to
//! a loopback host, for tests), with no user, password or fragment. The `resource`
//! parameter (RFC 8707) goes with the authorization and every token request.

use std::fmt;

use base64::Engine as _;
use url::Url;
use zeroize::Zeroizing;

use super::PreparedTokenRequest;

/// Largest metadata document read.
pub(crate) const MAX_METADATA_BYTES: usize = 64 * 1024;
/// Longest authorization code accepted from the operator.
pub(crate) const MAX_CODE_BYTES: usize = 4096;

/// A PKCE pair (RFC 7636 4.1, 4.2): the verifier is 32 random bytes in base64url (43
/// characters), the challenge its SHA-256 in base64url; the method is always `S256`.
pub(crate) struct Pkce {
    verifier: Zeroizing<String>,
    challenge: String,
}

impl fmt::Debug for Pkce {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Pkce").field("verifier", &format_args!("***")).field("challenge", &self.challenge).finish()
    }
}

/// Base64url without padding: the verifier, the challenge and the state.
pub(crate) fn b64url(bytes: &[u8]) -> String {
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes)
}

impl Pkce {
    pub(crate) fn from_random(bytes: &[u8; 32]) -> Pkce {
        use sha2::{Digest, Sha256};
        let verifier = Zeroizing::new(b64url(bytes));
        let challenge = b64url(&Sha256::digest(verifier.as_bytes()));
        Pkce { verifier, challenge }
    }

    pub(crate) fn verifier(&self) -> &str {
        &self.verifier
    }

    pub(crate) fn challenge(&self) -> &str {
        &self.challenge
    }
}

/// What goes into the authorization URL.
#[derive(Debug)]
pub(crate) struct Authorize<'a> {
    pub endpoint: &'a Url,
    pub client_id: &'a str,
    pub redirect_uri: &'a str,
    pub scopes: &'a [String],
    pub state: &'a str,
    pub challenge: &'a str,
    pub resource: &'a str,
}

/// The URL the operator opens: `response_type=code`, the client, the redirect, the
/// scopes, `state`, the S256 challenge and the `resource` (RFC 8707), added to the
/// endpoint's own query.
pub(crate) fn authorization_url(a: &Authorize<'_>) -> Url {
    let mut url = a.endpoint.clone();
    {
        let mut q = url.query_pairs_mut();
        q.append_pair("response_type", "code").append_pair("client_id", a.client_id).append_pair("redirect_uri", a.redirect_uri);
        if !a.scopes.is_empty() {
            q.append_pair("scope", &a.scopes.join(" "));
        }
        q.append_pair("state", a.state).append_pair("code_challenge", a.challenge).append_pair("code_challenge_method", "S256");
        q.append_pair("resource", a.resource);
    }
    url
}

fn form(token_endpoint: &Url, pairs: &[(&str, &str)]) -> PreparedTokenRequest {
    let mut body = Zeroizing::new(String::new());
    {
        let mut f = url::form_urlencoded::Serializer::new(&mut *body);
        for (k, v) in pairs {
            f.append_pair(k, v);
        }
        f.finish();
    }
    let headers =
        vec![("content-type", Zeroizing::new("application/x-www-form-urlencoded".to_owned())), ("accept", Zeroizing::new("application/json".to_owned()))];
    PreparedTokenRequest { url: token_endpoint.clone(), headers, body }
}

/// The code exchange (RFC 6749 4.1.3, RFC 7636 4.5), a public client: its id in the
/// body, no secret.
pub(crate) fn code_request(token_endpoint: &Url, client_id: &str, code: &str, redirect_uri: &str, verifier: &str, resource: &str) -> PreparedTokenRequest {
    form(
        token_endpoint,
        &[
            ("grant_type", "authorization_code"),
            ("code", code),
            ("redirect_uri", redirect_uri),
            ("client_id", client_id),
            ("code_verifier", verifier),
            ("resource", resource),
        ],
    )
}

/// A refresh (RFC 6749 6), with the `resource` again (RFC 8707 2.2).
pub(crate) fn refresh_request(token_endpoint: &Url, client_id: &str, refresh_token: &str, resource: &str) -> PreparedTokenRequest {
    form(token_endpoint, &[("grant_type", "refresh_token"), ("refresh_token", refresh_token), ("client_id", client_id), ("resource", resource)])
}

/// Why a discovery document was not accepted. Names what was wrong, never quotes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum MetadataError {
    TooLarge,
    NotJson,
    NotAnObject,
    /// A required member is missing or not a string (array) of the expected kind.
    Missing(&'static str),
    /// A URL member is not an https URL (http only to loopback), or holds a user,
    /// password or fragment.
    BadUrl(&'static str),
    /// The protected resource's `resource` is not the upstream's URL nor a prefix of it.
    ResourceMismatch,
    /// The authorization server's `issuer` is not the one its metadata was asked for.
    IssuerMismatch,
    /// `code_challenge_methods_supported` does not list `S256` (the MCP spec: refuse).
    NoS256,
}

impl fmt::Display for MetadataError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            MetadataError::TooLarge => write!(f, "the document is larger than {MAX_METADATA_BYTES} bytes"),
            MetadataError::NotJson => f.write_str("the document is not JSON (or names a member twice)"),
            MetadataError::NotAnObject => f.write_str("the document is not a JSON object"),
            MetadataError::Missing(m) => write!(f, "the document has no valid {m}"),
            MetadataError::BadUrl(m) => write!(f, "its {m} is not an https URL (http only to a loopback host) without user, password or fragment"),
            MetadataError::ResourceMismatch => f.write_str("its resource is not the upstream's URL (nor a prefix of it)"),
            MetadataError::IssuerMismatch => f.write_str("its issuer is not the authorization server it was fetched for"),
            MetadataError::NoS256 => f.write_str("the authorization server does not list S256 in code_challenge_methods_supported (PKCE is required)"),
        }
    }
}

impl std::error::Error for MetadataError {}

/// Whether `url` may be fetched or sent a code: https, or http to a loopback host;
/// no user, password or fragment.
pub(crate) fn acceptable_url(url: &Url) -> bool {
    let loopback = match url.host() {
        Some(url::Host::Ipv4(a)) => a.is_loopback(),
        Some(url::Host::Ipv6(a)) => a.is_loopback(),
        Some(url::Host::Domain(d)) => d.eq_ignore_ascii_case("localhost"),
        None => false,
    };
    (url.scheme() == "https" || (url.scheme() == "http" && loopback)) && url.username().is_empty() && url.password().is_none() && url.fragment().is_none()
}

fn object(body: &[u8]) -> Result<serde_json::Map<String, serde_json::Value>, MetadataError> {
    if body.len() > MAX_METADATA_BYTES {
        return Err(MetadataError::TooLarge);
    }
    let text = std::str::from_utf8(body).map_err(|_| MetadataError::NotJson)?;
    match crate::json::parse(text).map_err(|_| MetadataError::NotJson)? {
        serde_json::Value::Object(m) => Ok(m),
        _ => Err(MetadataError::NotAnObject),
    }
}

fn url_member(m: &serde_json::Map<String, serde_json::Value>, key: &'static str) -> Result<Url, MetadataError> {
    let s = m.get(key).and_then(|v| v.as_str()).ok_or(MetadataError::Missing(key))?;
    let url = Url::parse(s).map_err(|_| MetadataError::BadUrl(key))?;
    if acceptable_url(&url) { Ok(url) } else { Err(MetadataError::BadUrl(key)) }
}

fn strings(m: &serde_json::Map<String, serde_json::Value>, key: &'static str) -> Result<Vec<String>, MetadataError> {
    match m.get(key) {
        None | Some(serde_json::Value::Null) => Ok(Vec::new()),
        Some(serde_json::Value::Array(a)) if a.len() <= 256 => {
            a.iter().map(|v| v.as_str().filter(|s| s.len() <= 256).map(str::to_owned).ok_or(MetadataError::Missing(key))).collect()
        }
        Some(_) => Err(MetadataError::Missing(key)),
    }
}

/// What a `401` said (RFC 6750 3, RFC 9728 5.1): the `resource_metadata` URL and the
/// `scope` of its `Bearer` challenge, when given.
#[derive(Debug, Default, PartialEq, Eq)]
pub(crate) struct Challenge {
    pub resource_metadata: Option<String>,
    pub scope: Option<String>,
}

/// The auth-params of the `Bearer` challenge in a `WWW-Authenticate` value: `name=token`
/// or `name="quoted \" string"`, separated by commas. Another scheme's params are skipped.
pub(crate) fn parse_challenge(header: &str) -> Challenge {
    let mut out = Challenge::default();
    let mut rest = header.trim_start();
    let mut bearer = false;
    while !rest.is_empty() {
        let end = rest.find(|c: char| c == '=' || c == ',' || c.is_whitespace()).unwrap_or(rest.len());
        let word = &rest[..end];
        rest = rest[end..].trim_start();
        if let Some(after) = rest.strip_prefix('=') {
            // A parameter (or a token68's padding, which a scheme we skip may carry).
            let after = after.trim_start();
            let (value, tail) = match after.strip_prefix('"') {
                Some(q) => {
                    let mut v = String::new();
                    let mut chars = q.char_indices();
                    let mut end = q.len();
                    while let Some((i, c)) = chars.next() {
                        match c {
                            '\\' => {
                                if let Some((_, n)) = chars.next() {
                                    v.push(n);
                                }
                            }
                            '"' => {
                                end = i + 1;
                                break;
                            }
                            c => v.push(c),
                        }
                    }
                    (v, &q[end.min(q.len())..])
                }
                None => {
                    let e = after.find(|c: char| c == ',' || c.is_whitespace()).unwrap_or(after.len());
                    (after[..e].to_owned(), &after[e..])
                }
            };
            if bearer {
                match word.to_ascii_lowercase().as_str() {
                    "resource_metadata" if out.resource_metadata.is_none() => out.resource_metadata = Some(value),
                    "scope" if out.scope.is_none() => out.scope = Some(value),
                    _ => {}
                }
            }
            rest = tail.trim_start().trim_start_matches(',').trim_start();
        } else if let Some(tail) = rest.strip_prefix(',') {
            rest = tail.trim_start();
        } else if !word.is_empty() {
            // A scheme name starts a new challenge.
            bearer = word.eq_ignore_ascii_case("bearer");
        } else {
            break;
        }
    }
    out
}

/// Where the protected resource metadata may be (RFC 9728 3.1, the MCP spec's order):
/// the well-known name inserted before the URL's path, then at the root.
pub(crate) fn resource_metadata_urls(resource: &Url) -> Vec<Url> {
    let mut out = Vec::new();
    let path = resource.path().trim_end_matches('/');
    let mut base = resource.clone();
    base.set_query(None);
    base.set_fragment(None);
    if !path.is_empty() {
        let mut u = base.clone();
        u.set_path(&format!("/.well-known/oauth-protected-resource{path}"));
        out.push(u);
    }
    let mut u = base;
    u.set_path("/.well-known/oauth-protected-resource");
    out.push(u);
    out
}

/// The protected resource's metadata (RFC 9728 2).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ResourceMetadata {
    /// Its `resource`: the value of the `resource` parameter.
    pub resource: String,
    pub authorization_servers: Vec<Url>,
    pub scopes_supported: Vec<String>,
}

/// The canonical URI of `url` (RFC 8707 2, the MCP spec): scheme and host lower case,
/// no query or fragment, no trailing `/` unless it is the whole path.
pub(crate) fn canonical(url: &Url) -> String {
    let mut u = url.clone();
    u.set_query(None);
    u.set_fragment(None);
    u.to_string().trim_end_matches('/').to_owned()
}

/// Judges the document: `resource` must be the upstream's canonical URL or a prefix of
/// it that ends at a path segment (same origin), `authorization_servers` a non-empty
/// list of acceptable URLs.
pub(crate) fn parse_resource_metadata(body: &[u8], upstream: &Url) -> Result<ResourceMetadata, MetadataError> {
    let m = object(body)?;
    let resource = url_member(&m, "resource")?;
    let (mine, theirs) = (canonical(upstream), canonical(&resource));
    let prefix = mine == theirs || mine.strip_prefix(&theirs).is_some_and(|rest| rest.starts_with('/'));
    if resource.origin() != upstream.origin() || !prefix {
        return Err(MetadataError::ResourceMismatch);
    }
    let servers = strings(&m, "authorization_servers")?;
    if servers.is_empty() {
        return Err(MetadataError::Missing("authorization_servers"));
    }
    let authorization_servers = servers
        .iter()
        .map(|s| Url::parse(s).ok().filter(acceptable_url).ok_or(MetadataError::BadUrl("authorization_servers")))
        .collect::<Result<Vec<_>, _>>()?;
    Ok(ResourceMetadata { resource: theirs, authorization_servers, scopes_supported: strings(&m, "scopes_supported")? })
}

/// Where an authorization server's metadata may be (the MCP spec's order): for an
/// issuer with a path, RFC 8414 path-inserted, OIDC path-inserted, OIDC path-appended;
/// without, RFC 8414 then OIDC at the root.
pub(crate) fn server_metadata_urls(issuer: &Url) -> Vec<Url> {
    let path = issuer.path().trim_end_matches('/');
    let at = |p: String| {
        let mut u = issuer.clone();
        u.set_query(None);
        u.set_fragment(None);
        u.set_path(&p);
        u
    };
    if path.is_empty() {
        vec![at("/.well-known/oauth-authorization-server".into()), at("/.well-known/openid-configuration".into())]
    } else {
        vec![
            at(format!("/.well-known/oauth-authorization-server{path}")),
            at(format!("/.well-known/openid-configuration{path}")),
            at(format!("{path}/.well-known/openid-configuration")),
        ]
    }
}

/// The authorization server's endpoints.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ServerMetadata {
    pub issuer: Url,
    pub authorization_endpoint: Url,
    pub token_endpoint: Url,
    /// Its `registration_endpoint` (RFC 7591), when it has one: judged like the other
    /// URLs, but a bad one fails only a login that needs it (`auth.oauth.client_id`
    /// absent).
    pub registration_endpoint: Option<Result<Url, MetadataError>>,
}

/// Judges the document (RFC 8414 3.3: `issuer` identical to the one asked for; the MCP
/// spec: `S256` in `code_challenge_methods_supported`, else refuse).
pub(crate) fn parse_server_metadata(body: &[u8], issuer: &Url) -> Result<ServerMetadata, MetadataError> {
    let m = object(body)?;
    let said = url_member(&m, "issuer")?;
    if canonical(&said) != canonical(issuer) {
        return Err(MetadataError::IssuerMismatch);
    }
    let methods = strings(&m, "code_challenge_methods_supported")?;
    if !methods.iter().any(|x| x == "S256") {
        return Err(MetadataError::NoS256);
    }
    let registration_endpoint = match m.get("registration_endpoint") {
        None | Some(serde_json::Value::Null) => None,
        Some(_) => Some(url_member(&m, "registration_endpoint")),
    };
    Ok(ServerMetadata {
        issuer: said,
        authorization_endpoint: url_member(&m, "authorization_endpoint")?,
        token_endpoint: url_member(&m, "token_endpoint")?,
        registration_endpoint,
    })
}

/// Why what the operator pasted is not a code.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum PasteError {
    Empty,
    /// Spaces, control or non-ASCII characters, or longer than [`MAX_CODE_BYTES`].
    NotACode,
    /// The address the browser was sent to has no `code`.
    NoCode,
    /// Its `state` is not the one sent: another login's answer, or a forged one.
    WrongState,
    /// The authorization server answered with an error (its `error` code when it is a
    /// short word).
    Refused(Option<String>),
}

impl fmt::Display for PasteError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PasteError::Empty => f.write_str("nothing was pasted"),
            PasteError::NotACode => write!(f, "that is not a code (visible ASCII, at most {MAX_CODE_BYTES} bytes) nor the address the browser was sent to"),
            PasteError::NoCode => f.write_str("the address has no code parameter"),
            PasteError::WrongState => f.write_str("the address's state is not this login's (another login's answer, or a forged one)"),
            PasteError::Refused(Some(e)) => write!(f, "the authorization server refused: {e}"),
            PasteError::Refused(None) => f.write_str("the authorization server refused"),
        }
    }
}

impl std::error::Error for PasteError {}

fn is_code(s: &str) -> bool {
    !s.is_empty() && s.len() <= MAX_CODE_BYTES && s.bytes().all(|b| b.is_ascii_graphic())
}

/// The code from the query of the address the authorization server redirected to
/// (`?code=…&state=…`, or `?error=…`): `state` must be `state`.
pub(crate) fn code_from_query(query: &str, state: &str) -> Result<Zeroizing<String>, PasteError> {
    let pairs: Vec<(String, String)> = url::form_urlencoded::parse(query.as_bytes()).into_owned().collect();
    let get = |k: &str| pairs.iter().find(|(n, _)| n == k).map(|(_, v)| v.as_str());
    if let Some(e) = get("error") {
        let word = (!e.is_empty() && e.len() <= 40 && e.bytes().all(|b| b.is_ascii_lowercase() || b == b'_')).then(|| e.to_owned());
        return Err(PasteError::Refused(word));
    }
    if get("state") != Some(state) {
        return Err(PasteError::WrongState);
    }
    let code = get("code").ok_or(PasteError::NoCode)?;
    if !is_code(code) {
        return Err(PasteError::NotACode);
    }
    Ok(Zeroizing::new(code.to_owned()))
}

/// What the operator pasted: the bare code, or the whole address the browser was sent
/// to (its `state` checked).
pub(crate) fn parse_pasted(input: &str, state: &str) -> Result<Zeroizing<String>, PasteError> {
    let input = input.trim();
    if input.is_empty() {
        return Err(PasteError::Empty);
    }
    if input.starts_with("http://") || input.starts_with("https://") {
        let url = Url::parse(input).map_err(|_| PasteError::NotACode)?;
        return code_from_query(url.query().unwrap_or(""), state);
    }
    if !is_code(input) {
        return Err(PasteError::NotACode);
    }
    Ok(Zeroizing::new(input.to_owned()))
}

#[cfg(test)]
mod tests;
