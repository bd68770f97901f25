//! `auth.oauth` of a `url` upstream (issue 33 §2, `sp-policy(5)`, UPSTREAMS): the
//! authorization code grant with PKCE that `sp oauth login NAME` runs once, and whose
//! refresh token `sp mcp` then uses (`tools/upstream/oauth/`).
//!
//! ```json
//! "auth": {"oauth": {"client_id": "sp-on-host-1", "scopes": ["mcp:read"],
//!                    "redirect": "stdin", "redirect_uri": "http://127.0.0.1/callback",
//!                    "issuer": "https://login.example", "port": 8976}}
//! ```
//!
//! Decisions:
//! - `client_id`: the id under which the operator registered `sp` as a public client
//!   (pre-registration, the MCP spec's first choice). Absent: `sp oauth login` registers
//!   one itself at the authorization server's `registration_endpoint` (RFC 7591, the
//!   spec's fallback) and keeps it in the token store; no such endpoint is an error that
//!   says to set `client_id`. Client ID metadata documents are not done.
//! - `redirect`: `"stdin"` (the default: `sp oauth login` prints the URL, the operator
//!   pastes the code, or the whole address the browser was sent to) or `"loopback"` (a
//!   listener on `127.0.0.1:port`, `port` 0 or absent: any free one).
//! - `redirect_uri` (stdin only): what the authorization server sends the browser to,
//!   registered with the client; default `http://127.0.0.1/callback`.
//! - `issuer`: the authorization server to use when the resource's metadata lists
//!   several; it must be among them. Its host, like the upstream's own, counts as named
//!   exactly (private addresses reachable, `net/dest.rs`); other discovered hosts do not.
//! - `scopes`: asked for; absent: the `scope` of the server's challenge, else its
//!   metadata's `scopes_supported`, else none.
//! - `store`: how the token store's bytes are kept ([`StoreKind`]): `"auto"` (the
//!   default: encrypted with `systemd-creds` when `/usr/bin/systemd-creds` is there and
//!   works, else the plain file), `"systemd-creds"` (required: fail closed without it)
//!   or `"file"` (plain JSON, protected by its owner and mode only). The store is one
//!   file for the whole policy, so every upstream with `auth.oauth` must say the same
//!   (`upstreams.rs` checks it).

use serde_json::Value;

use crate::policy::fields::{err, int, list, object, string, Check};

/// How the authorization code comes back to `sp oauth login`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Redirect {
    /// Read from stdin (the code, or the address the browser was sent to).
    Stdin { redirect_uri: url::Url },
    /// A listener on 127.0.0.1 (`port` 0: any free port).
    Loopback { port: u16 },
}

/// `auth.oauth.store`: how the token store's bytes are kept (issue 33 §2).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum StoreKind {
    /// Encrypted with `systemd-creds` when it is at its fixed path and works, else plain.
    #[default]
    Auto,
    /// Encrypted with `systemd-creds`, or the store is not used (fail closed).
    SystemdCreds,
    /// Plain JSON: its protection is its owner and mode.
    File,
}

impl StoreKind {
    /// The policy's word for it.
    pub fn as_str(self) -> &'static str {
        match self {
            StoreKind::Auto => "auto",
            StoreKind::SystemdCreds => "systemd-creds",
            StoreKind::File => "file",
        }
    }
}

/// `auth.oauth` of a url upstream.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OAuth {
    /// Absent: registered dynamically at login (`tools/upstream/oauth/register.rs`).
    pub client_id: Option<String>,
    pub scopes: Vec<String>,
    pub redirect: Redirect,
    pub issuer: Option<url::Url>,
    pub store: StoreKind,
}

pub(crate) const DEFAULT_REDIRECT_URI: &str = "http://127.0.0.1/callback";

/// A client id as `sp` accepts one, from the policy or a registration: 1 to 256
/// characters, none a control character.
pub(crate) fn is_client_id(s: &str) -> bool {
    !s.is_empty() && s.len() <= 256 && !s.chars().any(char::is_control)
}

/// A scope token (RFC 6749 3.3): visible ASCII but `"` and `\`.
fn is_scope(s: &str) -> bool {
    !s.is_empty() && s.len() <= 256 && s.bytes().all(|b| b == 0x21 || (0x23..=0x5b).contains(&b) || (0x5d..=0x7e).contains(&b))
}

/// `auth`: `{"oauth": {...}}`.
pub(crate) fn auth(v: &Value, field: &str) -> Check<OAuth> {
    let map = object(v, field, &["oauth"])?;
    let field = format!("{field}.oauth");
    let Some(o) = map.get("oauth") else { return err(&field, "is required (the only kind of auth so far)") };
    let map = object(o, &field, &["client_id", "scopes", "redirect", "redirect_uri", "port", "issuer", "store"])?;
    let at = format!("{field}.client_id");
    let client_id = match map.get("client_id") {
        None => None,
        Some(c) => {
            let c = string(c, &at)?;
            if !is_client_id(c) {
                return err(&at, "must be 1 to 256 characters, none a control character");
            }
            Some(c.to_owned())
        }
    };
    let scopes = match map.get("scopes") {
        None => Vec::new(),
        Some(s) => list(s, &format!("{field}.scopes"))?
            .iter()
            .enumerate()
            .map(|(i, s)| {
                let at = format!("{field}.scopes[{i}]");
                let s = string(s, &at)?;
                if is_scope(s) { Ok(s.to_owned()) } else { err(&at, "must be a scope token (visible ASCII, no space, '\"' or '\\')") }
            })
            .collect::<Check<_>>()?,
    };
    let mode = match map.get("redirect") {
        None => "stdin",
        Some(Value::String(s)) if s == "stdin" || s == "loopback" => s.as_str(),
        Some(_) => return err(&format!("{field}.redirect"), "must be \"stdin\" or \"loopback\""),
    };
    let redirect = if mode == "stdin" {
        if map.contains_key("port") {
            return err(&format!("{field}.port"), "only applies to \"redirect\": \"loopback\"");
        }
        let at = format!("{field}.redirect_uri");
        let uri = match map.get("redirect_uri") {
            None => url::Url::parse(DEFAULT_REDIRECT_URI).map_err(|e| (at.clone(), e.to_string()))?,
            Some(u) => url_field(u, &at)?,
        };
        Redirect::Stdin { redirect_uri: uri }
    } else {
        if map.contains_key("redirect_uri") {
            return err(&format!("{field}.redirect_uri"), "only applies to \"redirect\": \"stdin\" (loopback is http://127.0.0.1:PORT/callback)");
        }
        let port = map.get("port").map(|p| int(p, &format!("{field}.port"), 0, 65535)).transpose()?.unwrap_or(0);
        Redirect::Loopback { port: u16::try_from(port).unwrap_or(0) }
    };
    let issuer = map.get("issuer").map(|i| url_field(i, &format!("{field}.issuer"))).transpose()?;
    let store = match map.get("store") {
        None => StoreKind::Auto,
        Some(Value::String(s)) if s == "auto" => StoreKind::Auto,
        Some(Value::String(s)) if s == "systemd-creds" => StoreKind::SystemdCreds,
        Some(Value::String(s)) if s == "file" => StoreKind::File,
        Some(_) => return err(&format!("{field}.store"), "must be \"auto\", \"systemd-creds\" or \"file\""),
    };
    Ok(OAuth { client_id, scopes, redirect, issuer, store })
}

/// An http(s) URL with a host and no user, password or fragment.
fn url_field(v: &Value, at: &str) -> Check<url::Url> {
    let parsed = url::Url::parse(string(v, at)?).map_err(|e| (at.to_owned(), format!("is not a URL: {e}")))?;
    if !matches!(parsed.scheme(), "https" | "http") || parsed.host_str().is_none() {
        return err(at, "must be an http or https URL with a host");
    }
    if !parsed.username().is_empty() || parsed.password().is_some() || parsed.fragment().is_some() {
        return err(at, "must hold no user, password or fragment");
    }
    Ok(parsed)
}
