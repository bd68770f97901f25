//! OAuth2 client credentials (RFC 6749 section 4.4): the pure core, no I/O.
//! [`ClientCredentials`] from the source, [`TokenRequest`] builds the token request,
//! [`parse_token_response`] judges the answer, [`TokenCache`] keeps tokens per credential
//! with an injected clock, and [`with_token`] is the one-refresh-on-401 rule.
//!
//! ```text
//! source "id:secret" --ClientCredentials::parse--> ClientCredentials
//! policy {"token_url","scopes","client_auth","audience"?} --TokenRequest--> PreparedTokenRequest
//!   (POST it through the checked HTTP path) --status, body--> parse_token_response --> Token
//! TokenCache::get(name, now) hit? --yes--> Authorization: Bearer <token>
//!                             \--no--> fetch, TokenCache::insert(name, token, sent_at)
//! ```
//!
//! # How the lead wires it in
//! - Policy: `inject: {"oauth2": {"token_url": "https://...", "scopes": ["a", "b"],
//!   "client_auth": "basic" | "body", "audience"?: "..."}}`; the credential's source
//!   yields `client_id:client_secret`. [`TokenRequest::from_policy`] parses the section
//!   (scheme, scopes, audience; `client_auth` defaults to `basic`), so `sp check`
//!   validates it; map its `SectionError` to `PolicyError` as
//!   `credentials.<name>.inject.oauth2.<field>`. `token_url`'s host must also pass the
//!   destination rules like any bound host (it is not an agent-callable host, though).
//! - Fetching: the token request goes through the same SSRF-checked, TLS-verified,
//!   pinned-resolver path as every request (`http/exec.rs`), with no redirects followed
//!   (a 3xx is a [`TokenError::Status`]) and the response body read up to
//!   [`MAX_TOKEN_RESPONSE_BYTES`]. [`TokenRequest::new`] refuses `http://` unless the
//!   host is loopback (tests). Each fetch is its own journal row: token URL and outcome
//!   (`TokenError`'s Display, or "ok" with `expires_in`), never the token or body.
//! - Using: [`with_token`] around the API call, with the cache living as long as the
//!   server (one per `sp mcp`). It fetches when the cache has nothing fresh, and on a
//!   401 from the API with a CACHED token it invalidates, fetches once more and retries
//!   once; a second 401 (or a 401 with a token fetched for this very call) goes back to
//!   the agent as the API's answer. The agent may not send `Authorization` on such a
//!   request (the same rule as bearer injection).
//! - Redaction: register the client secret when the credential is read, and every
//!   [`Token::secret`] as soon as it is parsed (before the API call, so an echoing API
//!   never shows it). Token responses are never returned to the agent.
//! - Lifetimes: a token is used until `expires_in` minus a margin of 10 % of its
//!   lifetime, at most 30 s ([`fresh_for`]); without `expires_in`, 300 s; any
//!   `expires_in` above one day is treated as one day, so a server cannot pin a token
//!   forever.

use std::collections::HashMap;
use std::fmt;
use std::time::{Duration, Instant};

use base64::Engine as _;
use url::Url;
use zeroize::Zeroizing;

use crate::cred::sigv4::ValueBox;
pub(crate) use crate::policy::schemes::{ClientAuth, TokenRequest};

/// Largest token response read; the HTTP reader should stop there too.
pub(crate) const MAX_TOKEN_RESPONSE_BYTES: usize = 64 * 1024;
/// Longest access token accepted (it goes into a header).
pub(crate) const MAX_TOKEN_BYTES: usize = 16 * 1024;
/// Lifetime assumed when the response has no `expires_in`.
pub(crate) const DEFAULT_LIFETIME: Duration = Duration::from_secs(300);
/// Longest lifetime believed, whatever `expires_in` says.
pub(crate) const MAX_LIFETIME: Duration = Duration::from_secs(86_400);
/// Largest safety margin before expiry (the margin is 10 % of the lifetime, at most this).
pub(crate) const MAX_MARGIN: Duration = Duration::from_secs(30);

/// Why the credential's source could not be read as `client_id:client_secret`. Never
/// contains any part of it.
#[derive(Debug, PartialEq, Eq)]
pub enum ClientCredentialsError {
    NotUtf8,
    NoColon,
    EmptyClientId,
    EmptyClientSecret,
    ControlCharacters,
}

impl fmt::Display for ClientCredentialsError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            ClientCredentialsError::NotUtf8 => "oauth2 client credentials are not UTF-8",
            ClientCredentialsError::NoColon => "oauth2 client credentials must be client_id:client_secret (no ':' found)",
            ClientCredentialsError::EmptyClientId => "oauth2 client_id is empty",
            ClientCredentialsError::EmptyClientSecret => "oauth2 client_secret is empty",
            ClientCredentialsError::ControlCharacters => "oauth2 client credentials contain control characters (only one trailing newline is trimmed)",
        })
    }
}

impl std::error::Error for ClientCredentialsError {}

/// The client id (not a secret) and secret. Debug shows the id only.
pub struct ClientCredentials {
    client_id: String,
    client_secret: Zeroizing<String>,
}

impl fmt::Debug for ClientCredentials {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ClientCredentials").field("client_id", &self.client_id).field("client_secret", &format_args!("***")).finish()
    }
}

impl ClientCredentials {
    /// `client_id:client_secret`, split at the first `:` (so the secret may contain
    /// `:`, the id may not). One trailing `\n` or `\r\n` is trimmed; other control
    /// characters are refused.
    pub fn parse(source: &[u8]) -> Result<ClientCredentials, ClientCredentialsError> {
        let text = std::str::from_utf8(source).map_err(|_| ClientCredentialsError::NotUtf8)?;
        let text = text.strip_suffix('\n').map(|t| t.strip_suffix('\r').unwrap_or(t)).unwrap_or(text);
        if text.chars().any(char::is_control) {
            return Err(ClientCredentialsError::ControlCharacters);
        }
        let (id, secret) = text.split_once(':').ok_or(ClientCredentialsError::NoColon)?;
        if id.is_empty() {
            return Err(ClientCredentialsError::EmptyClientId);
        }
        if secret.is_empty() {
            return Err(ClientCredentialsError::EmptyClientSecret);
        }
        Ok(ClientCredentials { client_id: id.to_owned(), client_secret: Zeroizing::new(secret.to_owned()) })
    }

    pub fn client_id(&self) -> &str {
        &self.client_id
    }

    /// For registering with the redactor.
    pub fn client_secret(&self) -> &str {
        &self.client_secret
    }
}

/// A token request ready to POST: URL, headers, form body. Debug hides the
/// `authorization` value and the body (which holds the secret with [`ClientAuth::Body`]).
pub struct PreparedTokenRequest {
    pub url: Url,
    pub headers: Vec<(&'static str, Zeroizing<String>)>,
    pub body: Zeroizing<String>,
}

impl fmt::Debug for PreparedTokenRequest {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let names: Vec<&str> = self.headers.iter().map(|(n, _)| *n).collect();
        f.debug_struct("PreparedTokenRequest")
            .field("url", &self.url.as_str())
            .field("headers", &names)
            .field("body", &format_args!("*** ({} bytes)", self.body.len()))
            .finish()
    }
}

/// Building the request is the credential's side of the policy section.
impl TokenRequest {
    /// The POST to send: `grant_type=client_credentials`, then `scope`, `audience`,
    /// and with [`ClientAuth::Body`] `client_id` and `client_secret`, form-urlencoded;
    /// `Content-Type: application/x-www-form-urlencoded`, `Accept: application/json`,
    /// and with [`ClientAuth::Basic`] the `Authorization` header.
    pub fn build(&self, creds: &ClientCredentials) -> PreparedTokenRequest {
        let mut body = Zeroizing::new(String::new());
        {
            let mut form = url::form_urlencoded::Serializer::new(&mut *body);
            form.append_pair("grant_type", "client_credentials");
            if !self.scopes.is_empty() {
                form.append_pair("scope", &self.scopes.join(" "));
            }
            if let Some(a) = &self.audience {
                form.append_pair("audience", a);
            }
            if self.client_auth == ClientAuth::Body {
                form.append_pair("client_id", &creds.client_id);
                form.append_pair("client_secret", &creds.client_secret);
            }
            form.finish();
        }
        let mut headers =
            vec![("content-type", Zeroizing::new("application/x-www-form-urlencoded".to_owned())), ("accept", Zeroizing::new("application/json".to_owned()))];
        if self.client_auth == ClientAuth::Basic {
            // RFC 6749 2.3.1: each part form-urlencoded before the Basic encoding
            // (RFC 7617), so a ':' in the secret cannot move the split.
            let mut pair = Zeroizing::new(String::new());
            pair.extend(url::form_urlencoded::byte_serialize(creds.client_id.as_bytes()));
            pair.push(':');
            pair.extend(url::form_urlencoded::byte_serialize(creds.client_secret.as_bytes()));
            let value = format!("Basic {}", base64::engine::general_purpose::STANDARD.encode(pair.as_bytes()));
            headers.push(("authorization", Zeroizing::new(value)));
        }
        PreparedTokenRequest { url: self.url.clone(), headers, body }
    }
}

/// An access token, and the refresh token the answer carried, if any (the
/// authorization code grant, `code.rs`; client credentials ignore it). Debug shows
/// only whether it has a lifetime and a refresh token.
pub(crate) struct Token {
    access_token: Zeroizing<String>,
    expires_in: Option<u64>,
    refresh_token: Option<Zeroizing<String>>,
}

impl fmt::Debug for Token {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Token")
            .field("access_token", &format_args!("***"))
            .field("expires_in", &self.expires_in)
            .field("refresh_token", &self.refresh_token.as_ref().map(|_| format_args!("***")))
            .finish()
    }
}

impl Token {
    /// The refresh token of the answer, when it had one (RFC 6749 5.1; a server that
    /// rotates them sends a new one with every refresh).
    pub(crate) fn refresh_token(&self) -> Option<&str> {
        self.refresh_token.as_deref().map(String::as_str)
    }

    /// The token, for the `Authorization` header and for registering with the redactor.
    pub(crate) fn secret(&self) -> &str {
        &self.access_token
    }

    /// `Bearer <token>`, the value of the API request's `Authorization` header.
    pub(crate) fn authorization(&self) -> Zeroizing<String> {
        Zeroizing::new(format!("Bearer {}", &*self.access_token))
    }

    /// Seconds, as the server said (before the one-day cap).
    pub(crate) fn expires_in(&self) -> Option<u64> {
        self.expires_in
    }

    /// The token if it is at least `min` bytes long (the credential's
    /// `min_secret_bytes`): a shorter one cannot be told from ordinary text, so it could
    /// not be redacted from answers without rewriting them; it is refused before it is
    /// used, remembered or cached (`secret.rs`, "Short secrets").
    pub(crate) fn at_least(self, min: usize) -> Result<Token, TokenError> {
        if self.access_token.len() < min {
            return Err(TokenError::AccessTokenTooShort { min });
        }
        Ok(self)
    }
}

/// Why a token response was not accepted. Display names what was wrong and never
/// contains the body, the token or any value from the response except an OAuth `error`
/// code that is a short `[a-z_]` word (RFC 6749 section 5.2 codes are).
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum TokenError {
    /// Not 200; `error` is the response's OAuth error code when it is a short word.
    Status {
        status: u16,
        error: Option<String>,
    },
    /// A 200 carrying an OAuth error object and no token.
    Refused {
        error: Option<String>,
    },
    TooLarge,
    NotJson,
    /// A member named twice: which one counts depends on the parser, so neither does.
    DuplicateKey,
    NotAnObject,
    MissingAccessToken,
    AccessTokenNotString,
    EmptyAccessToken,
    /// Control characters, spaces or non-ASCII: it could not go into a header as is.
    AccessTokenCharacters,
    AccessTokenTooLong,
    /// Shorter than the credential's `min_secret_bytes`.
    AccessTokenTooShort {
        min: usize,
    },
    MissingTokenType,
    TokenTypeNotBearer,
    /// Negative, fractional, or neither a number nor a string of digits.
    BadExpiresIn,
    /// Not a string of visible ASCII of at most [`MAX_TOKEN_BYTES`].
    BadRefreshToken,
}

impl fmt::Display for TokenError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TokenError::Status { status, error: Some(e) } => write!(f, "token endpoint answered HTTP {status} ({e})"),
            TokenError::Status { status, error: None } => write!(f, "token endpoint answered HTTP {status}"),
            TokenError::Refused { error: Some(e) } => write!(f, "token endpoint refused: {e}"),
            TokenError::Refused { error: None } => f.write_str("token endpoint refused"),
            TokenError::TooLarge => write!(f, "token response is larger than {MAX_TOKEN_RESPONSE_BYTES} bytes"),
            TokenError::NotJson => f.write_str("token response is not JSON"),
            TokenError::DuplicateKey => f.write_str("token response names a member twice"),
            TokenError::NotAnObject => f.write_str("token response is not a JSON object"),
            TokenError::MissingAccessToken => f.write_str("token response has no access_token"),
            TokenError::AccessTokenNotString => f.write_str("token response access_token is not a string"),
            TokenError::EmptyAccessToken => f.write_str("token response access_token is empty"),
            TokenError::AccessTokenCharacters => f.write_str("token response access_token has spaces, control or non-ASCII characters"),
            TokenError::AccessTokenTooLong => write!(f, "token response access_token is longer than {MAX_TOKEN_BYTES} bytes"),
            TokenError::AccessTokenTooShort { min } => write!(
                f,
                "token response access_token is shorter than {min} bytes, too short to be told from ordinary text \
                 (min_secret_bytes); it is not used"
            ),
            TokenError::MissingTokenType => f.write_str("token response has no token_type"),
            TokenError::TokenTypeNotBearer => f.write_str("token response token_type is not Bearer"),
            TokenError::BadExpiresIn => f.write_str("token response expires_in is not a non-negative integer"),
            TokenError::BadRefreshToken => write!(f, "token response refresh_token is not visible ASCII of 1 to {MAX_TOKEN_BYTES} bytes"),
        }
    }
}

impl std::error::Error for TokenError {}

/// Judges a token endpoint's answer (RFC 6749 sections 5.1 and 5.2; RFC 6750 for
/// `Bearer`). Accepted: status 200, a JSON object with a non-empty string
/// `access_token` of visible ASCII (no spaces; at most [`MAX_TOKEN_BYTES`]),
/// `token_type` "Bearer" in any case, and an optional `expires_in` that is a
/// non-negative integer or a string of digits (some providers send one); `null` counts
/// as absent. The JSON is parsed strictly (`json.rs`): a member named twice is refused,
/// since two parsers could each take a different one. Anything else is a [`TokenError`].
pub(crate) fn parse_token_response(status: u16, body: &[u8]) -> Result<Token, TokenError> {
    if body.len() > MAX_TOKEN_RESPONSE_BYTES {
        return Err(if status == 200 { TokenError::TooLarge } else { TokenError::Status { status, error: None } });
    }
    let parsed = std::str::from_utf8(body)
        .map_err(|_| TokenError::NotJson)
        .and_then(|text| {
            crate::json::parse(text).map_err(|e| match e {
                crate::json::JsonError::DuplicateKey { .. } => TokenError::DuplicateKey,
                _ => TokenError::NotJson,
            })
        })
        .map(|v| Zeroizing::new(ValueBox(v)));
    if status != 200 {
        let error = parsed.as_ref().ok().and_then(|v| error_code(&v.0));
        return Err(TokenError::Status { status, error });
    }
    let value = parsed?;
    let obj = value.0.as_object().ok_or(TokenError::NotAnObject)?;
    let token = match obj.get("access_token") {
        None | Some(serde_json::Value::Null) => {
            return Err(if obj.contains_key("error") { TokenError::Refused { error: error_code(&value.0) } } else { TokenError::MissingAccessToken });
        }
        Some(serde_json::Value::String(s)) => s,
        Some(_) => return Err(TokenError::AccessTokenNotString),
    };
    if token.is_empty() {
        return Err(TokenError::EmptyAccessToken);
    }
    if token.len() > MAX_TOKEN_BYTES {
        return Err(TokenError::AccessTokenTooLong);
    }
    if !token.bytes().all(|b| b.is_ascii_graphic()) {
        return Err(TokenError::AccessTokenCharacters);
    }
    match obj.get("token_type") {
        None | Some(serde_json::Value::Null) => return Err(TokenError::MissingTokenType),
        Some(serde_json::Value::String(t)) if t.eq_ignore_ascii_case("bearer") => {}
        Some(_) => return Err(TokenError::TokenTypeNotBearer),
    }
    let expires_in = match obj.get("expires_in") {
        None | Some(serde_json::Value::Null) => None,
        Some(serde_json::Value::Number(n)) => Some(n.as_u64().ok_or(TokenError::BadExpiresIn)?),
        Some(serde_json::Value::String(s)) if !s.is_empty() && s.len() <= 19 && s.bytes().all(|b| b.is_ascii_digit()) => {
            Some(s.parse().map_err(|_| TokenError::BadExpiresIn)?)
        }
        Some(_) => return Err(TokenError::BadExpiresIn),
    };
    let refresh_token = match obj.get("refresh_token") {
        None | Some(serde_json::Value::Null) => None,
        Some(serde_json::Value::String(r)) if !r.is_empty() && r.len() <= MAX_TOKEN_BYTES && r.bytes().all(|b| b.is_ascii_graphic()) => {
            Some(Zeroizing::new(r.clone()))
        }
        Some(_) => return Err(TokenError::BadRefreshToken),
    };
    Ok(Token { access_token: Zeroizing::new(token.clone()), expires_in, refresh_token })
}

/// The OAuth `error` member when it is a short `[a-z_]` word, else nothing (a hostile
/// server could put the token, or anything, there).
pub(crate) fn error_code(v: &serde_json::Value) -> Option<String> {
    let e = v.get("error")?.as_str()?;
    (!e.is_empty() && e.len() <= 40 && e.bytes().all(|b| b.is_ascii_lowercase() || b == b'_')).then(|| e.to_owned())
}

/// How long a token with this `expires_in` is used: its lifetime (absent: 300 s,
/// capped at one day) minus a margin of 10 % of the lifetime, at most 30 s.
pub(crate) fn fresh_for(expires_in: Option<u64>) -> Duration {
    let lifetime = expires_in.map_or(DEFAULT_LIFETIME, Duration::from_secs).min(MAX_LIFETIME);
    lifetime - (lifetime / 10).min(MAX_MARGIN)
}

/// Tokens per credential name, each until [`fresh_for`] after the moment its request
/// was sent. The clock is passed in, so tests need no sleeps.
#[derive(Debug, Default)]
pub(crate) struct TokenCache {
    entries: HashMap<String, (Token, Instant)>,
}

impl TokenCache {
    pub(crate) fn new() -> TokenCache {
        TokenCache::default()
    }

    /// The token for `name` if it is still fresh at `now`.
    pub(crate) fn get(&self, name: &str, now: Instant) -> Option<&Token> {
        self.entries.get(name).filter(|(_, until)| now < *until).map(|(t, _)| t)
    }

    /// Stores `token` for `name`. `sent_at` is when the token request was SENT (not
    /// when the answer came), so the lifetime is never overestimated. Returns the
    /// token, which may be usable for this one call even if it is not fresh enough to
    /// keep (a zero `expires_in`).
    pub(crate) fn insert(&mut self, name: &str, token: Token, sent_at: Instant) -> &Token {
        let until = sent_at.checked_add(fresh_for(token.expires_in)).unwrap_or(sent_at);
        self.entries.insert(name.to_owned(), (token, until));
        &self.entries[name].0
    }

    /// Forgets `name`'s token (the API said 401).
    pub(crate) fn invalidate(&mut self, name: &str) {
        self.entries.remove(name);
    }
}

/// What the API said to a request carrying the token.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Reply<T> {
    Accepted(T),
    /// HTTP 401: the token was refused.
    Unauthorized(T),
}

/// One API call with a token: the cached one if fresh, else a fetched one. On a 401
/// with a cached token: invalidate, fetch once more, call once more. A 401 with a token
/// fetched for this call, or a second 401, is returned as the answer (at most one
/// refresh per call, so a broken API cannot make `sp` hammer the token endpoint).
/// `fetch` does the token request, journals it and registers the new token with the
/// redactor before returning it (so the API call's echo is scrubbed); `now` is the
/// clock.
pub(crate) fn with_token<T, E>(
    cache: &mut TokenCache,
    name: &str,
    now: impl Fn() -> Instant,
    mut fetch: impl FnMut() -> Result<Token, E>,
    mut call: impl FnMut(&Token) -> Result<Reply<T>, E>,
) -> Result<T, E> {
    let t0 = now();
    let (reply, cached) = match cache.get(name, t0) {
        Some(token) => (call(token)?, true),
        None => {
            let token = fetch()?;
            (call(cache.insert(name, token, t0))?, false)
        }
    };
    match reply {
        Reply::Accepted(t) => Ok(t),
        Reply::Unauthorized(t) if !cached => Ok(t),
        Reply::Unauthorized(_) => {
            cache.invalidate(name);
            let sent = now();
            let token = fetch()?;
            match call(cache.insert(name, token, sent))? {
                Reply::Accepted(t) | Reply::Unauthorized(t) => Ok(t),
            }
        }
    }
}

// The authorization code grant with PKCE and the MCP discovery documents (issue 33 §2).
pub(crate) mod code;
pub(crate) mod register;

#[cfg(test)]
mod tests;
