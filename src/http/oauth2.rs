//! OAuth2 client credentials (RFC 6749 section 4.4, issue #13): the pure core, no I/O.
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
//!   pinned-resolver path as every request (`exec/http.rs`), with no redirects followed
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
use std::net::IpAddr;
use std::time::{Duration, Instant};

use base64::Engine as _;
use url::Url;
use zeroize::Zeroizing;

use crate::http::sigv4::{section_err, SectionError, ValueBox};

/// Largest token response read; the HTTP reader should stop there too.
pub const MAX_TOKEN_RESPONSE_BYTES: usize = 64 * 1024;
/// Longest access token accepted (it goes into a header).
pub const MAX_TOKEN_BYTES: usize = 16 * 1024;
/// Lifetime assumed when the response has no `expires_in`.
pub const DEFAULT_LIFETIME: Duration = Duration::from_secs(300);
/// Longest lifetime believed, whatever `expires_in` says.
pub const MAX_LIFETIME: Duration = Duration::from_secs(86_400);
/// Largest safety margin before expiry (the margin is 10 % of the lifetime, at most this).
pub const MAX_MARGIN: Duration = Duration::from_secs(30);

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
            ClientCredentialsError::ControlCharacters => {
                "oauth2 client credentials contain control characters (only one trailing newline is trimmed)"
            }
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
        f.debug_struct("ClientCredentials")
            .field("client_id", &self.client_id)
            .field("client_secret", &format_args!("***"))
            .finish()
    }
}

impl ClientCredentials {
    /// `client_id:client_secret`, split at the first `:` (so the secret may contain
    /// `:`, the id may not). One trailing `\n` or `\r\n` is trimmed; other control
    /// characters are refused.
    pub fn parse(source: &[u8]) -> Result<ClientCredentials, ClientCredentialsError> {
        let text = std::str::from_utf8(source).map_err(|_| ClientCredentialsError::NotUtf8)?;
        let text = text
            .strip_suffix('\n')
            .map(|t| t.strip_suffix('\r').unwrap_or(t))
            .unwrap_or(text);
        if text.chars().any(char::is_control) {
            return Err(ClientCredentialsError::ControlCharacters);
        }
        let (id, secret) = text
            .split_once(':')
            .ok_or(ClientCredentialsError::NoColon)?;
        if id.is_empty() {
            return Err(ClientCredentialsError::EmptyClientId);
        }
        if secret.is_empty() {
            return Err(ClientCredentialsError::EmptyClientSecret);
        }
        Ok(ClientCredentials {
            client_id: id.to_owned(),
            client_secret: Zeroizing::new(secret.to_owned()),
        })
    }

    pub fn client_id(&self) -> &str {
        &self.client_id
    }

    /// For registering with the redactor.
    pub fn client_secret(&self) -> &str {
        &self.client_secret
    }
}

/// How the client authenticates to the token endpoint (RFC 6749 section 2.3.1).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ClientAuth {
    /// `Authorization: Basic base64(urlencode(id) ":" urlencode(secret))`.
    Basic,
    /// `client_id` and `client_secret` in the form body.
    Body,
}

/// Why a token request could not be built (policy errors, for `sp check`).
#[derive(Debug, PartialEq, Eq)]
pub enum TokenRequestError {
    BadUrl,
    /// `http://` to a host that is not loopback (only tests may use plain HTTP).
    NotHttps,
    UserInfo,
    Fragment,
    /// Scope `index` (0-based) is empty or has characters RFC 6749 section 3.3 forbids.
    BadScope(usize),
    BadAudience,
}

impl fmt::Display for TokenRequestError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TokenRequestError::BadUrl => {
                f.write_str("oauth2 token_url is not an absolute http(s) URL")
            }
            TokenRequestError::NotHttps => {
                f.write_str("oauth2 token_url must be https (http only on loopback)")
            }
            TokenRequestError::UserInfo => {
                f.write_str("oauth2 token_url must not carry a user or password")
            }
            TokenRequestError::Fragment => {
                f.write_str("oauth2 token_url must not have a #fragment")
            }
            TokenRequestError::BadScope(i) => {
                write!(f, "oauth2 scope {i} is empty or has a space, quote, backslash or control character")
            }
            TokenRequestError::BadAudience => {
                f.write_str("oauth2 audience is empty or has control characters")
            }
        }
    }
}

impl std::error::Error for TokenRequestError {}

/// The token request an `oauth2` policy section describes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TokenRequest {
    url: Url,
    scopes: Vec<String>,
    audience: Option<String>,
    client_auth: ClientAuth,
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

impl TokenRequest {
    pub fn new(
        token_url: &str,
        client_auth: ClientAuth,
    ) -> Result<TokenRequest, TokenRequestError> {
        let url = Url::parse(token_url).map_err(|_| TokenRequestError::BadUrl)?;
        let loopback = match url.host() {
            Some(url::Host::Ipv4(a)) => IpAddr::V4(a).is_loopback(),
            Some(url::Host::Ipv6(a)) => IpAddr::V6(a).is_loopback(),
            Some(url::Host::Domain(d)) => d.eq_ignore_ascii_case("localhost"),
            None => return Err(TokenRequestError::BadUrl),
        };
        match url.scheme() {
            "https" => {}
            "http" if loopback => {}
            "http" => return Err(TokenRequestError::NotHttps),
            _ => return Err(TokenRequestError::BadUrl),
        }
        if !url.username().is_empty() || url.password().is_some() {
            return Err(TokenRequestError::UserInfo);
        }
        if url.fragment().is_some() {
            return Err(TokenRequestError::Fragment);
        }
        Ok(TokenRequest {
            url,
            scopes: Vec::new(),
            audience: None,
            client_auth,
        })
    }

    /// Scopes, each an RFC 6749 `scope-token` (`%x21 / %x23-5B / %x5D-7E`), sent
    /// space-separated; none means no `scope` parameter.
    pub fn scopes<S: AsRef<str>>(
        mut self,
        scopes: &[S],
    ) -> Result<TokenRequest, TokenRequestError> {
        for (i, s) in scopes.iter().enumerate() {
            let s = s.as_ref();
            if s.is_empty()
                || !s
                    .bytes()
                    .all(|b| b == 0x21 || (0x23..=0x5b).contains(&b) || (0x5d..=0x7e).contains(&b))
            {
                return Err(TokenRequestError::BadScope(i));
            }
        }
        self.scopes = scopes.iter().map(|s| s.as_ref().to_owned()).collect();
        Ok(self)
    }

    /// The `audience` parameter (Auth0 and others ask for it).
    pub fn audience(mut self, audience: &str) -> Result<TokenRequest, TokenRequestError> {
        if audience.is_empty() || audience.chars().any(char::is_control) {
            return Err(TokenRequestError::BadAudience);
        }
        self.audience = Some(audience.to_owned());
        Ok(self)
    }

    /// The policy's `inject: {"oauth2": {...}}` section: `token_url` (required),
    /// `scopes` (array of strings, default none), `client_auth` (`"basic"`, the
    /// default since RFC 6749 2.3.1 makes servers support it, or `"body"`),
    /// `audience` (string, optional). Other members are refused.
    pub fn from_policy(v: &serde_json::Value) -> Result<TokenRequest, SectionError> {
        use serde_json::Value;
        let Some(map) = v.as_object() else {
            return section_err("", "must be an object {\"token_url\": ..., ...}");
        };
        if let Some(k) = map
            .keys()
            .find(|k| !["token_url", "scopes", "client_auth", "audience"].contains(&k.as_str()))
        {
            return section_err(
                k.as_str(),
                "is not a member (token_url, scopes, client_auth, audience)",
            );
        }
        let client_auth = match map.get("client_auth") {
            None => ClientAuth::Basic,
            Some(Value::String(a)) if a == "basic" => ClientAuth::Basic,
            Some(Value::String(a)) if a == "body" => ClientAuth::Body,
            Some(_) => return section_err("client_auth", "must be \"basic\" or \"body\""),
        };
        let url = match map.get("token_url") {
            Some(Value::String(u)) => u,
            _ => {
                return section_err(
                    "token_url",
                    "must be a string such as \"https://auth.example/oauth/token\"",
                )
            }
        };
        let mut req = TokenRequest::new(url, client_auth).or_else(|e| {
            section_err(
                "token_url",
                match e {
                    TokenRequestError::NotHttps => "must be https (http only on loopback)",
                    TokenRequestError::UserInfo => "must not carry a user or password",
                    TokenRequestError::Fragment => "must not have a #fragment",
                    _ => "must be an absolute https URL",
                },
            )
        })?;
        match map.get("scopes") {
            None => {}
            Some(Value::Array(a)) => {
                let mut scopes = Vec::with_capacity(a.len());
                for (i, s) in a.iter().enumerate() {
                    match s {
                        Value::String(s) => scopes.push(s.as_str()),
                        _ => return section_err(format!("scopes[{i}]"), "must be a string"),
                    }
                }
                req = req.scopes(&scopes).or_else(|e| match e {
                    TokenRequestError::BadScope(i) => section_err(
                        format!("scopes[{i}]"),
                        "must be a non-empty scope without spaces, quotes, backslashes or control characters",
                    ),
                    _ => section_err("scopes", "is not valid"),
                })?;
            }
            Some(_) => return section_err("scopes", "must be an array of strings"),
        }
        match map.get("audience") {
            None => {}
            Some(Value::String(a)) => {
                req = req.audience(a).or_else(|_| {
                    section_err(
                        "audience",
                        "must be a non-empty string without control characters",
                    )
                })?;
            }
            Some(_) => return section_err("audience", "must be a string"),
        }
        Ok(req)
    }

    pub fn url(&self) -> &Url {
        &self.url
    }

    /// The scopes asked for (not secret: `sp_inventory` and `sp check` show them).
    pub fn scope_list(&self) -> &[String] {
        &self.scopes
    }

    /// For `sp check`: token URL, scopes, client authentication, audience.
    pub fn describe(&self) -> String {
        let mut s = format!(
            "oauth2 client credentials from {} (client_auth {})",
            self.url,
            match self.client_auth {
                ClientAuth::Basic => "basic",
                ClientAuth::Body => "body",
            }
        );
        if !self.scopes.is_empty() {
            s += &format!(", scopes {}", self.scopes.join(" "));
        }
        if let Some(a) = &self.audience {
            s += &format!(", audience {a}");
        }
        s
    }

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
        let mut headers = vec![
            (
                "content-type",
                Zeroizing::new("application/x-www-form-urlencoded".to_owned()),
            ),
            ("accept", Zeroizing::new("application/json".to_owned())),
        ];
        if self.client_auth == ClientAuth::Basic {
            // RFC 6749 2.3.1: each part form-urlencoded before the Basic encoding
            // (RFC 7617), so a ':' in the secret cannot move the split.
            let mut pair = Zeroizing::new(String::new());
            pair.extend(url::form_urlencoded::byte_serialize(
                creds.client_id.as_bytes(),
            ));
            pair.push(':');
            pair.extend(url::form_urlencoded::byte_serialize(
                creds.client_secret.as_bytes(),
            ));
            let value = format!(
                "Basic {}",
                base64::engine::general_purpose::STANDARD.encode(pair.as_bytes())
            );
            headers.push(("authorization", Zeroizing::new(value)));
        }
        PreparedTokenRequest {
            url: self.url.clone(),
            headers,
            body,
        }
    }
}

/// An access token. Debug shows only whether it has a lifetime.
pub struct Token {
    access_token: Zeroizing<String>,
    expires_in: Option<u64>,
}

impl fmt::Debug for Token {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Token")
            .field("access_token", &format_args!("***"))
            .field("expires_in", &self.expires_in)
            .finish()
    }
}

impl Token {
    /// The token, for the `Authorization` header and for registering with the redactor.
    pub fn secret(&self) -> &str {
        &self.access_token
    }

    /// `Bearer <token>`, the value of the API request's `Authorization` header.
    pub fn authorization(&self) -> Zeroizing<String> {
        Zeroizing::new(format!("Bearer {}", &*self.access_token))
    }

    /// Seconds, as the server said (before the one-day cap).
    pub fn expires_in(&self) -> Option<u64> {
        self.expires_in
    }
}

/// Why a token response was not accepted. Display names what was wrong and never
/// contains the body, the token or any value from the response except an OAuth `error`
/// code that is a short `[a-z_]` word (RFC 6749 section 5.2 codes are).
#[derive(Debug, PartialEq, Eq)]
pub enum TokenError {
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
    NotAnObject,
    MissingAccessToken,
    AccessTokenNotString,
    EmptyAccessToken,
    /// Control characters, spaces or non-ASCII: it could not go into a header as is.
    AccessTokenCharacters,
    AccessTokenTooLong,
    MissingTokenType,
    TokenTypeNotBearer,
    /// Negative, fractional, or neither a number nor a string of digits.
    BadExpiresIn,
}

impl fmt::Display for TokenError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TokenError::Status {
                status,
                error: Some(e),
            } => write!(f, "token endpoint answered HTTP {status} ({e})"),
            TokenError::Status {
                status,
                error: None,
            } => write!(f, "token endpoint answered HTTP {status}"),
            TokenError::Refused { error: Some(e) } => write!(f, "token endpoint refused: {e}"),
            TokenError::Refused { error: None } => f.write_str("token endpoint refused"),
            TokenError::TooLarge => write!(
                f,
                "token response is larger than {MAX_TOKEN_RESPONSE_BYTES} bytes"
            ),
            TokenError::NotJson => f.write_str("token response is not JSON"),
            TokenError::NotAnObject => f.write_str("token response is not a JSON object"),
            TokenError::MissingAccessToken => f.write_str("token response has no access_token"),
            TokenError::AccessTokenNotString => {
                f.write_str("token response access_token is not a string")
            }
            TokenError::EmptyAccessToken => f.write_str("token response access_token is empty"),
            TokenError::AccessTokenCharacters => f.write_str(
                "token response access_token has spaces, control or non-ASCII characters",
            ),
            TokenError::AccessTokenTooLong => write!(
                f,
                "token response access_token is longer than {MAX_TOKEN_BYTES} bytes"
            ),
            TokenError::MissingTokenType => f.write_str("token response has no token_type"),
            TokenError::TokenTypeNotBearer => {
                f.write_str("token response token_type is not Bearer")
            }
            TokenError::BadExpiresIn => {
                f.write_str("token response expires_in is not a non-negative integer")
            }
        }
    }
}

impl std::error::Error for TokenError {}

/// Judges a token endpoint's answer (RFC 6749 sections 5.1 and 5.2; RFC 6750 for
/// `Bearer`). Accepted: status 200, a JSON object with a non-empty string
/// `access_token` of visible ASCII (no spaces; at most [`MAX_TOKEN_BYTES`]),
/// `token_type` "Bearer" in any case, and an optional `expires_in` that is a
/// non-negative integer or a string of digits (some providers send one); `null` counts
/// as absent. Anything else is a [`TokenError`].
pub fn parse_token_response(status: u16, body: &[u8]) -> Result<Token, TokenError> {
    if body.len() > MAX_TOKEN_RESPONSE_BYTES {
        return Err(if status == 200 {
            TokenError::TooLarge
        } else {
            TokenError::Status {
                status,
                error: None,
            }
        });
    }
    let parsed = serde_json::from_slice(body)
        .ok()
        .map(|v| Zeroizing::new(ValueBox(v)));
    if status != 200 {
        let error = parsed.as_ref().and_then(|v| error_code(&v.0));
        return Err(TokenError::Status { status, error });
    }
    let value = parsed.ok_or(TokenError::NotJson)?;
    let obj = value.0.as_object().ok_or(TokenError::NotAnObject)?;
    let token = match obj.get("access_token") {
        None | Some(serde_json::Value::Null) => {
            return Err(if obj.contains_key("error") {
                TokenError::Refused {
                    error: error_code(&value.0),
                }
            } else {
                TokenError::MissingAccessToken
            });
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
        Some(serde_json::Value::String(s))
            if !s.is_empty() && s.len() <= 19 && s.bytes().all(|b| b.is_ascii_digit()) =>
        {
            Some(s.parse().map_err(|_| TokenError::BadExpiresIn)?)
        }
        Some(_) => return Err(TokenError::BadExpiresIn),
    };
    Ok(Token {
        access_token: Zeroizing::new(token.clone()),
        expires_in,
    })
}

/// The OAuth `error` member when it is a short `[a-z_]` word, else nothing (a hostile
/// server could put the token, or anything, there).
fn error_code(v: &serde_json::Value) -> Option<String> {
    let e = v.get("error")?.as_str()?;
    (!e.is_empty() && e.len() <= 40 && e.bytes().all(|b| b.is_ascii_lowercase() || b == b'_'))
        .then(|| e.to_owned())
}

/// How long a token with this `expires_in` is used: its lifetime (absent: 300 s,
/// capped at one day) minus a margin of 10 % of the lifetime, at most 30 s.
pub fn fresh_for(expires_in: Option<u64>) -> Duration {
    let lifetime = expires_in
        .map_or(DEFAULT_LIFETIME, Duration::from_secs)
        .min(MAX_LIFETIME);
    lifetime - (lifetime / 10).min(MAX_MARGIN)
}

/// Tokens per credential name, each until [`fresh_for`] after the moment its request
/// was sent. The clock is passed in, so tests need no sleeps.
#[derive(Debug, Default)]
pub struct TokenCache {
    entries: HashMap<String, (Token, Instant)>,
}

impl TokenCache {
    pub fn new() -> TokenCache {
        TokenCache::default()
    }

    /// The token for `name` if it is still fresh at `now`.
    pub fn get(&self, name: &str, now: Instant) -> Option<&Token> {
        self.entries
            .get(name)
            .filter(|(_, until)| now < *until)
            .map(|(t, _)| t)
    }

    /// Stores `token` for `name`. `sent_at` is when the token request was SENT (not
    /// when the answer came), so the lifetime is never overestimated. Returns the
    /// token, which may be usable for this one call even if it is not fresh enough to
    /// keep (a zero `expires_in`).
    pub fn insert(&mut self, name: &str, token: Token, sent_at: Instant) -> &Token {
        let until = sent_at
            .checked_add(fresh_for(token.expires_in))
            .unwrap_or(sent_at);
        self.entries.insert(name.to_owned(), (token, until));
        &self.entries[name].0
    }

    /// Forgets `name`'s token (the API said 401).
    pub fn invalidate(&mut self, name: &str) {
        self.entries.remove(name);
    }
}

/// What the API said to a request carrying the token.
#[derive(Debug, PartialEq, Eq)]
pub enum Reply<T> {
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
pub fn with_token<T, E>(
    cache: &mut TokenCache,
    name: &str,
    now: impl Fn() -> Instant,
    mut fetch: impl FnMut() -> Result<Token, E>,
    mut call: impl FnMut(&Token) -> Result<Reply<T>, E>,
) -> Result<T, E> {
    let t0 = now();
    let cached = cache.get(name, t0).is_some();
    let reply = if cached {
        call(cache.get(name, t0).expect("fresh at t0, checked above"))?
    } else {
        let token = fetch()?;
        call(cache.insert(name, token, t0))?
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

#[cfg(test)]
mod tests {
    //! Attacks tried (and what held):
    //! - hostile token responses: not JSON, an array, missing or non-string fields,
    //!   `token_type` "mac", negative / fractional / huge / string `expires_in`, tokens
    //!   with spaces, control characters (header injection), non-ASCII or 1 MiB long:
    //!   each refused with its own error, none of whose texts quote the body or token;
    //! - an OAuth error response that puts the secret in `error` or
    //!   `error_description`: only a short `[a-z_]` `error` code is ever reported;
    //! - a `:` or `&` in the client secret moving the Basic split or adding a form
    //!   parameter: both form-urlencoded first;
    //! - `http://` token URLs off loopback, user:password@ and #fragment in the URL,
    //!   scopes with spaces or quotes: refused;
    //! - a server that says 401 forever: at most one refresh per call;
    //! - `expires_in` of u64::MAX: capped at a day, no Instant overflow.
    use super::*;
    use std::cell::Cell;

    const SECRET: &str = "hunter2";

    fn no_leak(text: &str) {
        assert!(!text.contains(SECRET), "{text}");
    }

    #[test]
    fn client_credentials_split_at_the_first_colon_and_trim_one_newline() {
        let c = ClientCredentials::parse(b"my-client:hunter2:with:colons\n").unwrap();
        assert_eq!(
            (c.client_id(), c.client_secret()),
            ("my-client", "hunter2:with:colons")
        );
        let c = ClientCredentials::parse(b"id:hunter2\r\n").unwrap();
        assert_eq!(c.client_secret(), "hunter2");
        let dbg = format!("{c:?}");
        assert!(dbg.contains("\"id\""), "{dbg}");
        no_leak(&dbg);
    }

    #[test]
    fn bad_client_credentials_say_why_without_quoting_them() {
        let cases: &[(&[u8], ClientCredentialsError)] = &[
            (b"hunter2", ClientCredentialsError::NoColon),
            (b":hunter2", ClientCredentialsError::EmptyClientId),
            (b"id:", ClientCredentialsError::EmptyClientSecret),
            (b"id:hunter2\n\n", ClientCredentialsError::ControlCharacters),
            (b"id:hun\x00ter2", ClientCredentialsError::ControlCharacters),
            (b"id:hunter2\xff", ClientCredentialsError::NotUtf8),
        ];
        for (input, want) in cases {
            let e = ClientCredentials::parse(input).unwrap_err();
            assert_eq!(&e, want);
            no_leak(&format!("{e} {e:?}"));
        }
    }

    #[test]
    fn token_url_must_be_https_outside_loopback() {
        for ok in [
            "https://auth.example/token",
            "http://127.0.0.1:8080/t",
            "http://[::1]/t",
            "http://localhost:9/t",
            "http://127.9.9.9/t",
        ] {
            assert!(TokenRequest::new(ok, ClientAuth::Basic).is_ok(), "{ok}");
        }
        let cases = [
            ("http://auth.example/token", TokenRequestError::NotHttps),
            ("http://127.0.0.1.nip.io/t", TokenRequestError::NotHttps),
            ("http://10.0.0.1/t", TokenRequestError::NotHttps),
            ("ftp://auth.example/t", TokenRequestError::BadUrl),
            ("/token", TokenRequestError::BadUrl),
            ("https://u:p@auth.example/t", TokenRequestError::UserInfo),
            ("https://auth.example/t#x", TokenRequestError::Fragment),
        ];
        for (url, want) in cases {
            assert_eq!(
                TokenRequest::new(url, ClientAuth::Basic).unwrap_err(),
                want,
                "{url}"
            );
        }
    }

    #[test]
    fn scopes_and_audience_are_checked() {
        let r = TokenRequest::new("https://a.example/t", ClientAuth::Body).unwrap();
        assert_eq!(
            r.clone().scopes(&["read", "a b"]).unwrap_err(),
            TokenRequestError::BadScope(1)
        );
        assert_eq!(
            r.clone().scopes(&["\"q"]).unwrap_err(),
            TokenRequestError::BadScope(0)
        );
        assert_eq!(
            r.clone().scopes(&["a\\b"]).unwrap_err(),
            TokenRequestError::BadScope(0)
        );
        assert_eq!(
            r.clone().scopes(&[""]).unwrap_err(),
            TokenRequestError::BadScope(0)
        );
        assert!(r
            .clone()
            .scopes(&["https://graph.example/.default", "x:y"])
            .is_ok());
        assert_eq!(
            r.clone().audience("a\nb").unwrap_err(),
            TokenRequestError::BadAudience
        );
        assert_eq!(r.audience("").unwrap_err(), TokenRequestError::BadAudience);
    }

    #[test]
    fn policy_section_parses_and_names_the_bad_member() {
        use serde_json::json;
        let c = ClientCredentials::parse(b"id:hunter2").unwrap();
        let r = TokenRequest::from_policy(&json!({
            "token_url": "https://auth.example/oauth/token", "scopes": ["read", "write"],
            "client_auth": "body", "audience": "https://api.example"
        }))
        .unwrap();
        assert_eq!(
            r.build(&c).body.as_str(),
            "grant_type=client_credentials&scope=read+write&audience=https%3A%2F%2Fapi.example&client_id=id&client_secret=hunter2"
        );
        let r = TokenRequest::from_policy(&json!({"token_url": "https://auth.example/t"})).unwrap();
        assert_eq!(r.build(&c).headers.len(), 3, "basic is the default");
        let bad = |v: serde_json::Value| TokenRequest::from_policy(&v).unwrap_err();
        assert_eq!(bad(json!("x")).field, "");
        assert_eq!(bad(json!({})).field, "token_url");
        assert_eq!(
            bad(json!({"token_url": "http://auth.example/t"})).message,
            "must be https (http only on loopback)"
        );
        assert_eq!(
            bad(json!({"token_url": "https://a.example/t", "client_auth": "jwt"})).field,
            "client_auth"
        );
        assert_eq!(
            bad(json!({"token_url": "https://a.example/t", "scopes": "read"})).field,
            "scopes"
        );
        assert_eq!(
            bad(json!({"token_url": "https://a.example/t", "scopes": ["read", 1]})).field,
            "scopes[1]"
        );
        assert_eq!(
            bad(json!({"token_url": "https://a.example/t", "scopes": ["read", "a b"]})).field,
            "scopes[1]"
        );
        assert_eq!(
            bad(json!({"token_url": "https://a.example/t", "audience": 5})).field,
            "audience"
        );
        assert_eq!(
            bad(json!({"token_url": "https://a.example/t", "client_secret": "hunter2"})).field,
            "client_secret"
        );
    }

    #[test]
    fn body_auth_puts_everything_in_the_form() {
        let c = ClientCredentials::parse(b"my client:hunter2&scope=admin").unwrap();
        let p = TokenRequest::new("https://a.example/t", ClientAuth::Body)
            .unwrap()
            .scopes(&["read", "write:all"])
            .unwrap()
            .audience("https://api.example")
            .unwrap()
            .build(&c);
        assert_eq!(
            p.body.as_str(),
            "grant_type=client_credentials&scope=read+write%3Aall&audience=https%3A%2F%2Fapi.example\
             &client_id=my+client&client_secret=hunter2%26scope%3Dadmin"
        );
        let h: Vec<(&str, &str)> = p.headers.iter().map(|(n, v)| (*n, v.as_str())).collect();
        assert_eq!(
            h,
            [
                ("content-type", "application/x-www-form-urlencoded"),
                ("accept", "application/json")
            ]
        );
        let dbg = format!("{p:?}");
        no_leak(&dbg);
        assert!(dbg.contains("https://a.example/t"), "{dbg}");
    }

    /// RFC 6749 section 2.3.1's own example, and the urlencoding of `:` and space.
    #[test]
    fn basic_auth_form_encodes_id_and_secret_before_base64() {
        let c = ClientCredentials::parse(b"s6BhdRkqt3:gX1fBat3bV").unwrap();
        let p = TokenRequest::new("https://a.example/t", ClientAuth::Basic)
            .unwrap()
            .build(&c);
        assert_eq!(p.body.as_str(), "grant_type=client_credentials");
        assert_eq!(p.headers[2].0, "authorization");
        assert_eq!(
            p.headers[2].1.as_str(),
            "Basic czZCaGRSa3F0MzpnWDFmQmF0M2JW"
        );

        let c = ClientCredentials::parse(b"a b:hunter2:&").unwrap();
        let p = TokenRequest::new("https://a.example/t", ClientAuth::Basic)
            .unwrap()
            .build(&c);
        let b64 = p.headers[2].1.strip_prefix("Basic ").unwrap();
        let plain = base64::engine::general_purpose::STANDARD
            .decode(b64)
            .unwrap();
        assert_eq!(plain, b"a+b:hunter2%3A%26");
        no_leak(&format!("{p:?}"));
    }

    fn ok_body(token: &str, expires_in: &str) -> Vec<u8> {
        format!(r#"{{"access_token":"{token}","token_type":"Bearer","expires_in":{expires_in}}}"#)
            .into_bytes()
    }

    #[test]
    fn a_bearer_token_response_is_accepted() {
        // RFC 6749 section 4.4.3's example, with the Bearer type.
        let t = parse_token_response(200, br#"{"access_token":"2YotnFZFEjr1zCsicMWpAA","token_type":"bearer","expires_in":3600,"example_parameter":"example_value"}"#)
            .unwrap();
        assert_eq!(
            (t.secret(), t.expires_in()),
            ("2YotnFZFEjr1zCsicMWpAA", Some(3600))
        );
        assert_eq!(t.authorization().as_str(), "Bearer 2YotnFZFEjr1zCsicMWpAA");
        let t = parse_token_response(
            200,
            br#"{"access_token":"eyJ.a-b_c~d+e/f=","token_type":"BEARER"}"#,
        )
        .unwrap();
        assert_eq!(t.expires_in(), None);
        // Some providers send expires_in as a string of digits; null is absent.
        assert_eq!(
            parse_token_response(200, &ok_body("x", "\"3599\""))
                .unwrap()
                .expires_in(),
            Some(3599)
        );
        assert_eq!(
            parse_token_response(200, &ok_body("x", "null"))
                .unwrap()
                .expires_in(),
            None
        );
        assert_eq!(
            parse_token_response(200, &ok_body("x", "18446744073709551615"))
                .unwrap()
                .expires_in(),
            Some(u64::MAX)
        );
        let dbg = format!("{t:?}");
        assert!(!dbg.contains("eyJ"), "{dbg}");
    }

    #[test]
    fn hostile_token_responses_are_refused_with_a_reason_and_no_secret() {
        let long = "h".repeat(MAX_TOKEN_BYTES + 1);
        let huge = format!(
            "{{\"pad\":\"{}\"}}",
            "hunter2".repeat(MAX_TOKEN_RESPONSE_BYTES / 7 + 1)
        );
        let cases: Vec<(u16, Vec<u8>, TokenError)> = vec![
            (200, b"hunter2".to_vec(), TokenError::NotJson),
            (200, b"".to_vec(), TokenError::NotJson),
            (
                200,
                br#"{"access_token":"hunter2""#.to_vec(),
                TokenError::NotJson,
            ),
            (200, br#"["hunter2"]"#.to_vec(), TokenError::NotAnObject),
            (200, br#""hunter2""#.to_vec(), TokenError::NotAnObject),
            (
                200,
                br#"{"token_type":"Bearer"}"#.to_vec(),
                TokenError::MissingAccessToken,
            ),
            (
                200,
                br#"{"access_token":null,"token_type":"Bearer"}"#.to_vec(),
                TokenError::MissingAccessToken,
            ),
            (
                200,
                br#"{"access_token":["hunter2"],"token_type":"Bearer"}"#.to_vec(),
                TokenError::AccessTokenNotString,
            ),
            (
                200,
                br#"{"access_token":7,"token_type":"Bearer"}"#.to_vec(),
                TokenError::AccessTokenNotString,
            ),
            (
                200,
                br#"{"access_token":"","token_type":"Bearer"}"#.to_vec(),
                TokenError::EmptyAccessToken,
            ),
            (
                200,
                br#"{"access_token":"hunter2 x","token_type":"Bearer"}"#.to_vec(),
                TokenError::AccessTokenCharacters,
            ),
            (
                200,
                br#"{"access_token":"hunter2\r\nX-Evil: 1","token_type":"Bearer"}"#.to_vec(),
                TokenError::AccessTokenCharacters,
            ),
            (
                200,
                br#"{"access_token":"hunter2\u0000","token_type":"Bearer"}"#.to_vec(),
                TokenError::AccessTokenCharacters,
            ),
            (
                200,
                "{\"access_token\":\"hunter2\u{e9}\",\"token_type\":\"Bearer\"}"
                    .as_bytes()
                    .to_vec(),
                TokenError::AccessTokenCharacters,
            ),
            (200, ok_body(&long, "1"), TokenError::AccessTokenTooLong),
            (
                200,
                br#"{"access_token":"hunter2"}"#.to_vec(),
                TokenError::MissingTokenType,
            ),
            (
                200,
                br#"{"access_token":"hunter2","token_type":"mac"}"#.to_vec(),
                TokenError::TokenTypeNotBearer,
            ),
            (
                200,
                br#"{"access_token":"hunter2","token_type":"hunter2"}"#.to_vec(),
                TokenError::TokenTypeNotBearer,
            ),
            (
                200,
                br#"{"access_token":"hunter2","token_type":1}"#.to_vec(),
                TokenError::TokenTypeNotBearer,
            ),
            (
                200,
                br#"{"access_token":"hunter2","token_type":"Bearer "}"#.to_vec(),
                TokenError::TokenTypeNotBearer,
            ),
            (200, ok_body("hunter2", "-1"), TokenError::BadExpiresIn),
            (200, ok_body("hunter2", "3600.5"), TokenError::BadExpiresIn),
            (200, ok_body("hunter2", "3600.0"), TokenError::BadExpiresIn),
            (200, ok_body("hunter2", "1e30"), TokenError::BadExpiresIn),
            (
                200,
                ok_body("hunter2", "99999999999999999999"),
                TokenError::BadExpiresIn,
            ),
            (200, ok_body("hunter2", "\"-5\""), TokenError::BadExpiresIn),
            (200, ok_body("hunter2", "\"1h\""), TokenError::BadExpiresIn),
            (200, ok_body("hunter2", "\"\""), TokenError::BadExpiresIn),
            (
                200,
                ok_body("hunter2", "\"99999999999999999999\""),
                TokenError::BadExpiresIn,
            ),
            (200, ok_body("hunter2", "true"), TokenError::BadExpiresIn),
            (200, huge.clone().into_bytes(), TokenError::TooLarge),
            (
                200,
                br#"{"error":"invalid_scope","error_description":"hunter2"}"#.to_vec(),
                TokenError::Refused {
                    error: Some("invalid_scope".into()),
                },
            ),
            (
                401,
                br#"{"error":"invalid_client","error_description":"bad secret hunter2"}"#.to_vec(),
                TokenError::Status {
                    status: 401,
                    error: Some("invalid_client".into()),
                },
            ),
            (
                400,
                br#"{"error":"hunter2-Secret"}"#.to_vec(),
                TokenError::Status {
                    status: 400,
                    error: None,
                },
            ),
            (
                400,
                br#"{"error":"hunter"}"#.to_vec(),
                TokenError::Status {
                    status: 400,
                    error: Some("hunter".into()),
                },
            ),
            (
                400,
                br#"{"error":["invalid_client"]}"#.to_vec(),
                TokenError::Status {
                    status: 400,
                    error: None,
                },
            ),
            (
                500,
                b"<html>hunter2</html>".to_vec(),
                TokenError::Status {
                    status: 500,
                    error: None,
                },
            ),
            (
                302,
                b"".to_vec(),
                TokenError::Status {
                    status: 302,
                    error: None,
                },
            ),
            (
                201,
                ok_body("hunter2", "60"),
                TokenError::Status {
                    status: 201,
                    error: None,
                },
            ),
            (
                503,
                huge.into_bytes(),
                TokenError::Status {
                    status: 503,
                    error: None,
                },
            ),
        ];
        for (status, body, want) in cases {
            let e = parse_token_response(status, &body).unwrap_err();
            assert_eq!(
                e,
                want,
                "{}",
                String::from_utf8_lossy(&body[..body.len().min(200)])
            );
            no_leak(&format!("{e} {e:?}"));
        }
    }

    #[test]
    fn error_display_names_the_problem() {
        assert_eq!(
            TokenError::Status {
                status: 401,
                error: Some("invalid_client".into())
            }
            .to_string(),
            "token endpoint answered HTTP 401 (invalid_client)"
        );
        assert_eq!(
            TokenError::TokenTypeNotBearer.to_string(),
            "token response token_type is not Bearer"
        );
        assert_eq!(
            TokenError::BadExpiresIn.to_string(),
            "token response expires_in is not a non-negative integer"
        );
    }

    #[test]
    fn freshness_is_lifetime_minus_ten_percent_at_most_thirty_seconds() {
        let s = Duration::from_secs;
        assert_eq!(fresh_for(Some(100)), s(90));
        assert_eq!(fresh_for(Some(3600)), s(3570));
        assert_eq!(fresh_for(None), s(270));
        assert_eq!(fresh_for(Some(0)), s(0));
        assert_eq!(fresh_for(Some(5)), Duration::from_millis(4500));
        assert_eq!(fresh_for(Some(u64::MAX)), s(86_370));
    }

    fn token(name: &str, expires_in: Option<u64>) -> Token {
        let e = expires_in.map_or("null".to_owned(), |e| e.to_string());
        parse_token_response(200, &ok_body(name, &e)).unwrap()
    }

    #[test]
    fn the_cache_keeps_each_credential_until_its_margin() {
        let t0 = Instant::now();
        let s = Duration::from_secs;
        let mut c = TokenCache::new();
        assert!(c.get("a", t0).is_none());
        assert_eq!(
            c.insert("a", token("tok-a", Some(100)), t0).secret(),
            "tok-a"
        );
        c.insert("b", token("tok-b", None), t0);
        assert_eq!(c.get("a", t0 + s(89)).unwrap().secret(), "tok-a");
        assert!(c.get("a", t0 + s(90)).is_none());
        assert_eq!(c.get("b", t0 + s(269)).unwrap().secret(), "tok-b");
        assert!(c.get("b", t0 + s(270)).is_none());
        c.invalidate("b");
        assert!(c.get("b", t0).is_none());
        assert_eq!(c.get("a", t0).unwrap().secret(), "tok-a");
        // expires_in 0: usable for the call that fetched it, never cached as fresh
        assert_eq!(c.insert("z", token("tok-z", Some(0)), t0).secret(), "tok-z");
        assert!(c.get("z", t0).is_none());
        // a huge expires_in does not overflow and is capped at a day
        c.insert("h", token("tok-h", Some(u64::MAX)), t0);
        assert!(c.get("h", t0 + s(86_369)).is_some());
        assert!(c.get("h", t0 + s(86_370)).is_none());
        let dbg = format!("{c:?}");
        assert!(!dbg.contains("tok-"), "{dbg}");
    }

    /// A token endpoint that issues `tok-1`, `tok-2`, ... with `expires_in` 60, and an
    /// API that only accepts tokens in `live`.
    struct World {
        clock: Cell<Duration>,
        base: Instant,
        fetches: Cell<u32>,
        calls: Cell<u32>,
        live: std::cell::RefCell<Vec<String>>,
        cache: TokenCache,
    }

    impl World {
        fn new() -> World {
            World {
                clock: Cell::new(Duration::ZERO),
                base: Instant::now(),
                fetches: Cell::new(0),
                calls: Cell::new(0),
                live: Default::default(),
                cache: TokenCache::new(),
            }
        }

        /// One API call; returns the token the API accepted (or the 401 it gave).
        fn call(&mut self) -> Result<Result<String, String>, TokenError> {
            let (clock, base, fetches, calls, live) = (
                &self.clock,
                self.base,
                &self.fetches,
                &self.calls,
                &self.live,
            );
            with_token(
                &mut self.cache,
                "api",
                || base + clock.get(),
                || {
                    fetches.set(fetches.get() + 1);
                    let name = format!("tok-{}", fetches.get());
                    live.borrow_mut().push(name.clone());
                    parse_token_response(200, &ok_body(&name, "60"))
                },
                |t| {
                    calls.set(calls.get() + 1);
                    Ok(if live.borrow().iter().any(|l| l == t.secret()) {
                        Reply::Accepted(Ok(t.secret().to_owned()))
                    } else {
                        Reply::Unauthorized(Err(t.secret().to_owned()))
                    })
                },
            )
        }
    }

    #[test]
    fn first_call_fetches_second_reuses_expiry_refetches() {
        let mut w = World::new();
        assert_eq!(w.call().unwrap(), Ok("tok-1".into()));
        assert_eq!(w.fetches.get(), 1);
        w.clock.set(Duration::from_secs(53)); // fresh for 60 - 6 = 54 s
        assert_eq!(w.call().unwrap(), Ok("tok-1".into()));
        assert_eq!(w.fetches.get(), 1);
        w.clock.set(Duration::from_secs(54));
        assert_eq!(w.call().unwrap(), Ok("tok-2".into()));
        assert_eq!(w.fetches.get(), 2);
        assert_eq!(w.calls.get(), 3);
    }

    #[test]
    fn a_revoked_token_triggers_exactly_one_refresh() {
        let mut w = World::new();
        assert_eq!(w.call().unwrap(), Ok("tok-1".into()));
        w.live.borrow_mut().clear(); // the API revokes tok-1
        assert_eq!(w.call().unwrap(), Ok("tok-2".into()));
        assert_eq!((w.fetches.get(), w.calls.get()), (2, 3));
        assert_eq!(w.call().unwrap(), Ok("tok-2".into()));
        assert_eq!(w.fetches.get(), 2);
    }

    #[test]
    fn an_api_that_always_says_401_costs_one_refresh_per_call_at_most() {
        let mut w = World::new();
        w.call().unwrap().unwrap();
        // From now on the API refuses every token, old or new.
        let mut answers = Vec::new();
        for _ in 0..3 {
            let before = w.fetches.get();
            let r = with_token(
                &mut w.cache,
                "api",
                || w.base + w.clock.get(),
                || {
                    w.fetches.set(w.fetches.get() + 1);
                    parse_token_response(200, &ok_body(&format!("tok-{}", w.fetches.get()), "60"))
                },
                |t| Ok::<_, TokenError>(Reply::Unauthorized(t.secret().to_owned())),
            )
            .unwrap();
            answers.push((r, w.fetches.get() - before));
        }
        // cached tok-1 refused -> one refresh (tok-2) refused -> the 401 is the answer;
        // tok-2 is cached, so the next call refreshes once too, and so on.
        assert_eq!(
            answers,
            [
                ("tok-2".into(), 1),
                ("tok-3".into(), 1),
                ("tok-4".into(), 1)
            ]
        );
    }

    #[test]
    fn a_401_with_a_token_fetched_for_this_call_is_not_refreshed_again() {
        let mut cache = TokenCache::new();
        let fetches = Cell::new(0);
        let t0 = Instant::now();
        let r = with_token(
            &mut cache,
            "api",
            || t0,
            || {
                fetches.set(fetches.get() + 1);
                Ok::<_, TokenError>(token("fresh", Some(60)))
            },
            |_| Ok(Reply::Unauthorized(401)),
        );
        assert_eq!((r, fetches.get()), (Ok(401), 1));
    }

    #[test]
    fn a_failed_fetch_is_returned_and_nothing_is_cached() {
        let mut cache = TokenCache::new();
        let t0 = Instant::now();
        let r: Result<(), TokenError> = with_token(
            &mut cache,
            "api",
            || t0,
            || parse_token_response(401, br#"{"error":"invalid_client"}"#),
            |_| panic!("no API call without a token"),
        );
        assert_eq!(
            r.unwrap_err(),
            TokenError::Status {
                status: 401,
                error: Some("invalid_client".into())
            }
        );
        assert!(cache.get("api", t0).is_none());
    }
}
