//! Dynamic client registration (RFC 7591) as the MCP authorization spec allows it
//! (2025-11-25, basic/authorization, "Dynamic Client Registration": the fallback after a
//! pre-registered client), the pure part: the request and the judgement of the answer.
//! `tools/upstream/oauth/login.rs` posts it when `auth.oauth.client_id` is absent.
//!
//! ```text
//! POST registration_endpoint {"client_name":"sp","redirect_uris":[URI],
//!   "grant_types":["authorization_code","refresh_token"],"response_types":["code"],
//!   "token_endpoint_auth_method":"none"}
//!   ──201 (or 200)──> parse_registration: client_id ──> the login, then the token store
//!   ──400 {"error": …}──> refused, its error code named
//! ```
//!
//! Decisions:
//! - `sp` registers a public client (RFC 7591 2: `token_endpoint_auth_method` `none`):
//!   it sends no client secret, ever. An answer whose `token_endpoint_auth_method` is
//!   anything else is refused (the server made a confidential client `sp` cannot use);
//!   a `client_secret` in an answer that says `none` (or nothing) is ignored: never
//!   kept, stored or shown, and wiped with the parsed answer.
//! - The answer is untrusted: at most [`MAX_REGISTRATION_BYTES`], one JSON object
//!   (duplicate members refused); `client_id` required, 1 to 256 characters without a
//!   control character (as the policy's); `redirect_uris`, when given, must hold the one
//!   sent (a server that changed it would send the code elsewhere). Other members are
//!   ignored.

use std::fmt;

use serde_json::{json, Value};
use zeroize::Zeroizing;

use crate::cred::sigv4::ValueBox;

/// Largest registration answer read.
pub(crate) const MAX_REGISTRATION_BYTES: usize = 64 * 1024;

/// The registration request's body: a public client for the code grant with refresh
/// tokens, redirected to `redirect_uri`.
pub(crate) fn request_body(redirect_uri: &str) -> Vec<u8> {
    let doc = json!({
        "client_name": "sp",
        "redirect_uris": [redirect_uri],
        "grant_types": ["authorization_code", "refresh_token"],
        "response_types": ["code"],
        "token_endpoint_auth_method": "none",
    });
    doc.to_string().into_bytes()
}

/// Why a registration answer was not accepted. Names what was wrong, never quotes it
/// (but the server's `error` code when it is a short word).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum RegisterError {
    TooLarge,
    NotJson,
    NotAnObject,
    /// The server refused (RFC 7591 3.2.2): its `error` code, when a short word.
    Refused {
        status: u16,
        error: Option<String>,
    },
    /// Another status than 200, 201 or a refusal.
    Status(u16),
    NoClientId,
    BadClientId,
    /// `token_endpoint_auth_method` is not `none`.
    NotPublic,
    /// `redirect_uris` does not hold the one sent.
    RedirectChanged,
}

impl fmt::Display for RegisterError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RegisterError::TooLarge => write!(f, "the registration answer is larger than {MAX_REGISTRATION_BYTES} bytes"),
            RegisterError::NotJson => f.write_str("the registration answer is not JSON (or names a member twice)"),
            RegisterError::NotAnObject => f.write_str("the registration answer is not a JSON object"),
            RegisterError::Refused { status, error: Some(e) } => write!(f, "the authorization server refused the registration (HTTP {status}, {e})"),
            RegisterError::Refused { status, error: None } => write!(f, "the authorization server refused the registration (HTTP {status})"),
            RegisterError::Status(s) => write!(f, "the registration was answered with HTTP {s}"),
            RegisterError::NoClientId => f.write_str("the registration answer has no client_id string"),
            RegisterError::BadClientId => {
                f.write_str("the registration answer's client_id is empty, longer than 256 characters or holds a control character")
            }
            RegisterError::NotPublic => f.write_str(
                "the authorization server registered a confidential client (token_endpoint_auth_method is not \"none\"): sp is a public client only",
            ),
            RegisterError::RedirectChanged => f.write_str("the registration answer's redirect_uris do not hold the redirect URI sent"),
        }
    }
}

impl std::error::Error for RegisterError {}

/// A short lowercase word (an OAuth error code), else nothing.
fn word(v: Option<&Value>) -> Option<String> {
    let e = v?.as_str()?;
    (!e.is_empty() && e.len() <= 40 && e.bytes().all(|b| b.is_ascii_lowercase() || b == b'_')).then(|| e.to_owned())
}

/// The client id of a registration answer (`status`, `body`) for `redirect_uri`.
pub(crate) fn parse_registration(status: u16, body: &[u8], redirect_uri: &str) -> Result<String, RegisterError> {
    if body.len() > MAX_REGISTRATION_BYTES {
        return Err(RegisterError::TooLarge);
    }
    let parsed = std::str::from_utf8(body).ok().and_then(|t| crate::json::parse(t).ok()).map(|v| Zeroizing::new(ValueBox(v)));
    if !matches!(status, 200 | 201) {
        let error = parsed.as_ref().and_then(|d| word(d.0.get("error")));
        return Err(if (400..500).contains(&status) { RegisterError::Refused { status, error } } else { RegisterError::Status(status) });
    }
    let doc = parsed.ok_or(RegisterError::NotJson)?;
    let m = doc.0.as_object().ok_or(RegisterError::NotAnObject)?;
    let client_id = m.get("client_id").and_then(Value::as_str).ok_or(RegisterError::NoClientId)?;
    if !crate::policy::upstreams::is_client_id(client_id) {
        return Err(RegisterError::BadClientId);
    }
    match m.get("token_endpoint_auth_method") {
        None | Some(Value::Null) => {}
        Some(Value::String(s)) if s == "none" => {}
        Some(_) => return Err(RegisterError::NotPublic),
    }
    match m.get("redirect_uris") {
        None | Some(Value::Null) => {}
        Some(Value::Array(a)) if a.iter().any(|u| u.as_str() == Some(redirect_uri)) => {}
        Some(_) => return Err(RegisterError::RedirectChanged),
    }
    Ok(client_id.to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    const URI: &str = "http://127.0.0.1/callback";

    #[test]
    fn the_request_is_a_public_client_for_the_code_grant() {
        let v: Value = serde_json::from_slice(&request_body(URI)).unwrap();
        assert_eq!(
            v,
            json!({"client_name": "sp", "redirect_uris": [URI], "grant_types": ["authorization_code", "refresh_token"],
                   "response_types": ["code"], "token_endpoint_auth_method": "none"})
        );
    }

    /// Attacks tried: a secret-bearing confidential answer, a changed redirect, a huge
    /// or duplicated or non-object answer, a client id with a newline (a log line
    /// forged through the summary): each refused with its reason, none quoted.
    #[test]
    fn answers_are_judged_strictly() {
        let ok = |b: &str| parse_registration(201, b.as_bytes(), URI);
        assert_eq!(ok(r#"{"client_id": "dyn-1", "redirect_uris": ["http://127.0.0.1/callback"], "extra": 1}"#).unwrap(), "dyn-1");
        assert_eq!(parse_registration(200, br#"{"client_id": "dyn-2"}"#, URI).unwrap(), "dyn-2");
        // A secret with "none": ignored (a public client needs none).
        assert_eq!(ok(r#"{"client_id": "dyn-3", "client_secret": "s3cr3t", "token_endpoint_auth_method": "none"}"#).unwrap(), "dyn-3");
        let big = format!(r#"{{"client_id": "x", "pad": "{}"}}"#, "a".repeat(MAX_REGISTRATION_BYTES));
        let cases = [
            (ok(&big), RegisterError::TooLarge),
            (ok("not json"), RegisterError::NotJson),
            (ok(r#"{"client_id": "a", "client_id": "b"}"#), RegisterError::NotJson),
            (ok("[]"), RegisterError::NotAnObject),
            (ok("{}"), RegisterError::NoClientId),
            (ok(r#"{"client_id": 7}"#), RegisterError::NoClientId),
            (ok(r#"{"client_id": ""}"#), RegisterError::BadClientId),
            (ok(r#"{"client_id": "a\nb"}"#), RegisterError::BadClientId),
            (ok(r#"{"client_id": "a", "client_secret": "s3cr3t", "token_endpoint_auth_method": "client_secret_basic"}"#), RegisterError::NotPublic),
            (ok(r#"{"client_id": "a", "redirect_uris": ["https://evil.example/cb"]}"#), RegisterError::RedirectChanged),
            (
                parse_registration(400, br#"{"error": "invalid_redirect_uri", "error_description": "no"}"#, URI),
                RegisterError::Refused { status: 400, error: Some("invalid_redirect_uri".into()) },
            ),
            (parse_registration(403, b"<html>", URI), RegisterError::Refused { status: 403, error: None }),
            (parse_registration(500, b"{}", URI), RegisterError::Status(500)),
        ];
        for (got, want) in cases {
            assert_eq!(got, Err(want));
        }
        let shown = RegisterError::NotPublic.to_string();
        assert!(!shown.contains("s3cr3t"), "{shown}");
    }
}
