//! The two injections that carry a section of their own (`sp-policy(5)`, CREDENTIALS):
//! `inject: {"aws_sigv4": {...}}` ([`SigV4Config`]) and `inject: {"oauth2": {...}}`
//! ([`TokenRequest`]), parsed into plain types where they live, so `sp check` validates
//! them. Signing and fetching are `cred::sigv4` and `cred::oauth2`, which add what they
//! need to these types; nothing here reads a secret or touches the network.

use std::fmt;
use std::net::IpAddr;

use url::Url;

/// A policy section that does not parse: `field` is the member inside the section
/// (empty for the section itself), for `PolicyError`'s `credentials.<name>.inject.<kind>.<field>`.
#[derive(Debug, PartialEq, Eq)]
pub struct SectionError {
    pub field: String,
    pub message: &'static str,
}

impl fmt::Display for SectionError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.field.is_empty() { f.write_str(self.message) } else { write!(f, "{}: {}", self.field, self.message) }
    }
}

impl std::error::Error for SectionError {}

impl SectionError {
    /// As a policy `(field, message)` under `section` (`credentials.<name>.inject.aws_sigv4`).
    pub fn at(self, section: &str) -> (String, String) {
        let field = if self.field.is_empty() { section.to_owned() } else { format!("{section}.{}", self.field) };
        (field, self.message.to_owned())
    }
}

pub(crate) fn section_err<T>(field: impl Into<String>, message: &'static str) -> Result<T, SectionError> {
    Err(SectionError { field: field.into(), message })
}

/// Why a region or service cannot name a credential scope.
#[derive(Debug, PartialEq, Eq)]
pub enum ScopeError {
    BadRegion,
    BadService,
}

impl fmt::Display for ScopeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ScopeError::BadRegion => f.write_str("aws_sigv4 region must be 1-64 of [a-z0-9-]"),
            ScopeError::BadService => f.write_str("aws_sigv4 service must be 1-64 of [a-z0-9-]"),
        }
    }
}

impl std::error::Error for ScopeError {}

/// Region and service of the credential scope (`<date>/<region>/<service>/aws4_request`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Scope {
    pub(crate) region: String,
    pub(crate) service: String,
    /// Send and sign `x-amz-content-sha256` (S3 requires it, other services accept it).
    /// Always sent with an unsigned payload (`cred::sigv4::Payload::Unsigned`). Off only to reproduce AWS's test suite,
    /// whose vectors predate the header.
    pub(crate) content_sha256_header: bool,
}

impl Scope {
    pub fn new(region: &str, service: &str) -> Result<Scope, ScopeError> {
        let ok = |s: &str| !s.is_empty() && s.len() <= 64 && s.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-');
        if !ok(region) {
            return Err(ScopeError::BadRegion);
        }
        if !ok(service) {
            return Err(ScopeError::BadService);
        }
        Ok(Scope { region: region.to_owned(), service: service.to_owned(), content_sha256_header: true })
    }

    pub fn region(&self) -> &str {
        &self.region
    }

    pub fn service(&self) -> &str {
        &self.service
    }

    /// S3 and its variants encode the path once and never normalise it.
    pub(crate) fn is_s3(&self) -> bool {
        self.service == "s3" || self.service == "s3express" || self.service.starts_with("s3-")
    }
}

/// The policy's `inject: {"aws_sigv4": {...}}` section.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SigV4Config {
    pub scope: Scope,
    /// `"unsigned_payload": true`: send `UNSIGNED-PAYLOAD` instead of the body's hash.
    pub unsigned_payload: bool,
}

impl SigV4Config {
    /// `{"region": "eu-west-1", "service": "s3", "unsigned_payload"?: bool}`; other
    /// members are refused.
    pub fn from_policy(v: &serde_json::Value) -> Result<SigV4Config, SectionError> {
        let Some(map) = v.as_object() else {
            return section_err("", "must be an object {\"region\": ..., \"service\": ...}");
        };
        if let Some(k) = map.keys().find(|k| !["region", "service", "unsigned_payload"].contains(&k.as_str())) {
            return section_err(k.as_str(), "is not a member (region, service, unsigned_payload)");
        }
        let region = match map.get("region") {
            Some(serde_json::Value::String(r)) => r,
            _ => return section_err("region", "must be a string such as \"eu-west-1\""),
        };
        let service = match map.get("service") {
            Some(serde_json::Value::String(s)) => s,
            _ => return section_err("service", "must be a string such as \"s3\""),
        };
        let unsigned_payload = match map.get("unsigned_payload") {
            None => false,
            Some(serde_json::Value::Bool(b)) => *b,
            Some(_) => return section_err("unsigned_payload", "must be true or false"),
        };
        let scope = match Scope::new(region, service) {
            Ok(s) => s,
            Err(ScopeError::BadRegion) => return section_err("region", "must be 1-64 of [a-z0-9-]"),
            Err(_) => return section_err("service", "must be 1-64 of [a-z0-9-]"),
        };
        Ok(SigV4Config { scope, unsigned_payload })
    }

    /// For `sp check`: the scope and the payload rule.
    pub fn describe(&self) -> String {
        format!(
            "aws_sigv4 region {} service {}{}",
            self.scope.region,
            self.scope.service,
            if self.unsigned_payload { ", UNSIGNED-PAYLOAD" } else { ", body hashed" }
        )
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
            TokenRequestError::BadUrl => f.write_str("oauth2 token_url is not an absolute http(s) URL"),
            TokenRequestError::NotHttps => f.write_str("oauth2 token_url must be https (http only on loopback)"),
            TokenRequestError::UserInfo => f.write_str("oauth2 token_url must not carry a user or password"),
            TokenRequestError::Fragment => f.write_str("oauth2 token_url must not have a #fragment"),
            TokenRequestError::BadScope(i) => {
                write!(f, "oauth2 scope {i} is empty or has a space, quote, backslash or control character")
            }
            TokenRequestError::BadAudience => f.write_str("oauth2 audience is empty or has control characters"),
        }
    }
}

impl std::error::Error for TokenRequestError {}

/// The token request an `oauth2` policy section describes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TokenRequest {
    pub(crate) url: Url,
    pub(crate) scopes: Vec<String>,
    pub(crate) audience: Option<String>,
    pub(crate) client_auth: ClientAuth,
}

impl TokenRequest {
    pub fn new(token_url: &str, client_auth: ClientAuth) -> Result<TokenRequest, TokenRequestError> {
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
        Ok(TokenRequest { url, scopes: Vec::new(), audience: None, client_auth })
    }

    /// Scopes, each an RFC 6749 `scope-token` (`%x21 / %x23-5B / %x5D-7E`), sent
    /// space-separated; none means no `scope` parameter.
    pub fn scopes<S: AsRef<str>>(mut self, scopes: &[S]) -> Result<TokenRequest, TokenRequestError> {
        for (i, s) in scopes.iter().enumerate() {
            let s = s.as_ref();
            if s.is_empty() || !s.bytes().all(|b| b == 0x21 || (0x23..=0x5b).contains(&b) || (0x5d..=0x7e).contains(&b)) {
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
        if let Some(k) = map.keys().find(|k| !["token_url", "scopes", "client_auth", "audience"].contains(&k.as_str())) {
            return section_err(k.as_str(), "is not a member (token_url, scopes, client_auth, audience)");
        }
        let client_auth = match map.get("client_auth") {
            None => ClientAuth::Basic,
            Some(Value::String(a)) if a == "basic" => ClientAuth::Basic,
            Some(Value::String(a)) if a == "body" => ClientAuth::Body,
            Some(_) => return section_err("client_auth", "must be \"basic\" or \"body\""),
        };
        let url = match map.get("token_url") {
            Some(Value::String(u)) => u,
            _ => return section_err("token_url", "must be a string such as \"https://auth.example/oauth/token\""),
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
                    TokenRequestError::BadScope(i) => {
                        section_err(format!("scopes[{i}]"), "must be a non-empty scope without spaces, quotes, backslashes or control characters")
                    }
                    _ => section_err("scopes", "is not valid"),
                })?;
            }
            Some(_) => return section_err("scopes", "must be an array of strings"),
        }
        match map.get("audience") {
            None => {}
            Some(Value::String(a)) => {
                req = req.audience(a).or_else(|_| section_err("audience", "must be a non-empty string without control characters"))?;
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
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn token_url_must_be_https_outside_loopback() {
        for ok in ["https://auth.example/token", "http://127.0.0.1:8080/t", "http://[::1]/t", "http://localhost:9/t", "http://127.9.9.9/t"] {
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
            assert_eq!(TokenRequest::new(url, ClientAuth::Basic).unwrap_err(), want, "{url}");
        }
    }

    #[test]
    fn scopes_and_audience_are_checked() {
        let r = TokenRequest::new("https://a.example/t", ClientAuth::Body).unwrap();
        assert_eq!(r.clone().scopes(&["read", "a b"]).unwrap_err(), TokenRequestError::BadScope(1));
        assert_eq!(r.clone().scopes(&["\"q"]).unwrap_err(), TokenRequestError::BadScope(0));
        assert_eq!(r.clone().scopes(&["a\\b"]).unwrap_err(), TokenRequestError::BadScope(0));
        assert_eq!(r.clone().scopes(&[""]).unwrap_err(), TokenRequestError::BadScope(0));
        assert!(r.clone().scopes(&["https://graph.example/.default", "x:y"]).is_ok());
        assert_eq!(r.clone().audience("a\nb").unwrap_err(), TokenRequestError::BadAudience);
        assert_eq!(r.audience("").unwrap_err(), TokenRequestError::BadAudience);
    }

    #[test]
    fn scope_names_are_checked() {
        assert!(Scope::new("eu-west-1", "s3").is_ok());
        assert_eq!(Scope::new("eu/west", "s3").unwrap_err(), ScopeError::BadRegion);
        assert_eq!(Scope::new("", "s3").unwrap_err(), ScopeError::BadRegion);
        assert_eq!(Scope::new("us-east-1", "S3").unwrap_err(), ScopeError::BadService);
        assert_eq!(Scope::new("us-east-1", "s3\naws4_request").unwrap_err(), ScopeError::BadService);
        assert!(Scope::new("us-east-1", "s3-object-lambda").unwrap().is_s3());
        assert!(!Scope::new("us-east-1", "sts").unwrap().is_s3());
    }
}
