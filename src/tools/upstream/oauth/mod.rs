//! OAuth for `url` upstreams (issue 33 §2, `auth.oauth`): `sp oauth login NAME` runs the
//! authorization code grant with PKCE once (`login.rs`), the tokens go to the token
//! store beside the policy (`store.rs`), and each `sp mcp` then uses them through a
//! [`Bearer`]: the access token while it is fresh, a refresh before it expires and once
//! on a `401`, the refresh token rotated and written back.
//!
//! ```text
//! Upstreams::ensure_started ──Bearer::load (store, no token: SP_AUTH + "sp oauth login NAME")
//! HttpTransport::send ──Bearer::token ── fresh? ── no ──> refresh (under the store's lock)
//! a POST answered 401 ──Bearer::after_401(the token it carried) ──> refresh once, POST again;
//!                       another 401 ──> SP_AUTH
//! refresh ──invalid_grant──> SP_AUTH "... run `sp oauth login NAME`" (journaled)
//! ```
//!
//! Secrets: every access and refresh token is remembered by the process-wide redactor
//! the moment it is read or received (logs and journal are scrubbed with it) and handed
//! to the session's Vault after the call ([`Bearer::take_secrets`]) before its result is
//! scrubbed. A token is never logged, journaled or shown: messages name the upstream
//! and the token endpoint, and the journal's `token` rows say only the outcome.
//!
//! On disk the store is JSON or, as `auth.oauth.store` says, that JSON encrypted with
//! `systemd-creds` (`sealed.rs`): the store reads either and writes what the policy asks.

pub(crate) mod fetch;
pub(crate) mod login;
pub(crate) mod sealed;
pub(crate) mod store;

use std::fmt;
use std::sync::Mutex;
use std::time::Duration;

use url::Url;
use zeroize::Zeroizing;

use crate::cred::oauth2::{self, TokenError};
use store::{now_s, Entry, Store, StoreError};

/// How long a token request may take.
pub(crate) const TOKEN_TIMEOUT: Duration = Duration::from_secs(20);
/// Largest token answer read.
const MAX_TOKEN_ANSWER: usize = oauth2::MAX_TOKEN_RESPONSE_BYTES;

/// Why no token could be had. Every variant that only a new login can fix says so
/// ([`OAuthError::needs_login`]); none holds a token or a body.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum OAuthError {
    /// The store has no tokens for this upstream (or for its URL and client id).
    NotLoggedIn {
        upstream: String,
    },
    /// The authorization server refused the refresh token (`invalid_grant`: expired,
    /// revoked, or already used).
    InvalidGrant {
        upstream: String,
    },
    /// No refresh token, and the access token is stale or refused.
    NoRefreshToken {
        upstream: String,
    },
    /// The upstream refused a token fresh from a refresh.
    Refused {
        upstream: String,
    },
    /// The token endpoint's answer was refused (`oauth2::TokenError`'s words).
    Token {
        upstream: String,
        why: TokenError,
    },
    /// The token endpoint could not be reached.
    Fetch {
        upstream: String,
        why: String,
    },
    Store(StoreError),
}

impl OAuthError {
    fn needs_login(&self) -> Option<&str> {
        match self {
            OAuthError::NotLoggedIn { upstream }
            | OAuthError::InvalidGrant { upstream }
            | OAuthError::NoRefreshToken { upstream }
            | OAuthError::Refused { upstream } => Some(upstream),
            _ => None,
        }
    }
}

impl fmt::Display for OAuthError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            OAuthError::NotLoggedIn { .. } => f.write_str("no OAuth tokens in the token store")?,
            OAuthError::InvalidGrant { .. } => f.write_str("the authorization server refused the refresh token (invalid_grant)")?,
            OAuthError::NoRefreshToken { .. } => f.write_str("the access token expired and there is no refresh token")?,
            OAuthError::Refused { .. } => f.write_str("it refused a freshly refreshed access token (HTTP 401)")?,
            OAuthError::Token { why, .. } => write!(f, "token refresh failed: {why}")?,
            OAuthError::Fetch { why, .. } => write!(f, "token refresh failed: {why}")?,
            OAuthError::Store(e) => write!(f, "{e}")?,
        }
        if let Some(u) = self.needs_login() {
            write!(f, ": run `sp oauth login {u}`")?;
        }
        Ok(())
    }
}

impl std::error::Error for OAuthError {}

/// A token request's outcome, for the journal's `token` row (never the token).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct TokenNote {
    /// The token endpoint, as shown (no query).
    pub target: String,
    /// `expires_in` of the new token, or the error's text.
    pub outcome: Result<Option<u64>, String>,
}

/// What a running `sp mcp` needs of `auth.oauth` and the store.
#[derive(Debug, Clone)]
pub(crate) struct Settings {
    pub upstream: String,
    pub url: Url,
    /// `auth.oauth.client_id`; absent: the client `sp oauth login` registered.
    pub client_id: Option<String>,
    /// Hosts the operator named: the upstream's and the issuer's (`fetch::Reach`).
    pub named: Vec<String>,
    pub roots: Option<Vec<Vec<u8>>>,
    pub store: Store,
}

struct State {
    access: Zeroizing<String>,
    expires_at: u64,
    secrets: Vec<Zeroizing<String>>,
    notes: Vec<TokenNote>,
}

/// The access token of one upstream, shared by its transport's POST threads.
pub(crate) struct Bearer {
    settings: Settings,
    state: Mutex<State>,
}

impl fmt::Debug for Bearer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Bearer({})", self.settings.upstream)
    }
}

/// The name the redactor files an upstream's tokens under.
pub(crate) fn secret_name(upstream: &str) -> String {
    format!("oauth:{upstream}")
}

fn remember(upstream: &str, value: &str) {
    // The process-wide copy (logs, journal) learns it at once; the session's Vault from
    // `take_secrets`.
    crate::gate::vault::Vault::new().remember(&secret_name(upstream), value);
}

impl Bearer {
    /// The upstream's tokens from the store (read without the lock: a rename is atomic).
    pub(crate) fn load(settings: Settings) -> Result<Bearer, OAuthError> {
        let entry = read_entry(&settings)?;
        remember(&settings.upstream, &entry.access_token);
        let mut secrets = vec![entry.access_token.clone()];
        if let Some(r) = &entry.refresh_token {
            remember(&settings.upstream, r);
            secrets.push(r.clone());
        }
        let state = State { access: entry.access_token.clone(), expires_at: entry.expires_at, secrets, notes: Vec::new() };
        Ok(Bearer { settings, state: Mutex::new(state) })
    }

    pub(crate) fn upstream(&self) -> &str {
        &self.settings.upstream
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// The access token to send now: the one held while fresh, else a refreshed one.
    pub(crate) fn token(&self) -> Result<Zeroizing<String>, OAuthError> {
        let mut state = self.lock();
        if now_s() < state.expires_at {
            return Ok(state.access.clone());
        }
        self.refresh(&mut state, None)
    }

    /// The token held now, fresh or not (the closing DELETE).
    pub(crate) fn current(&self) -> Zeroizing<String> {
        self.lock().access.clone()
    }

    /// After a 401 to a request that carried `refused`: a token another thread or
    /// process refreshed meanwhile, else a refresh now.
    pub(crate) fn after_401(&self, refused: &str) -> Result<Zeroizing<String>, OAuthError> {
        let mut state = self.lock();
        if state.access.as_str() != refused && now_s() < state.expires_at {
            return Ok(state.access.clone());
        }
        self.refresh(&mut state, Some(refused))
    }

    /// The tokens read or received since the last call, for the session's Vault.
    pub(crate) fn take_secrets(&self) -> Vec<Zeroizing<String>> {
        std::mem::take(&mut self.lock().secrets)
    }

    /// The token requests made since the last call, for the journal.
    pub(crate) fn take_notes(&self) -> Vec<TokenNote> {
        std::mem::take(&mut self.lock().notes)
    }

    /// Under the store's lock: the entry as it is now; a fresh token there that is not
    /// the refused one (another `sp mcp` refreshed) is taken as is; else the refresh
    /// token is spent and the answer written back (a rotated refresh token replaces
    /// the old one; none keeps it).
    fn refresh(&self, state: &mut State, refused: Option<&str>) -> Result<Zeroizing<String>, OAuthError> {
        let s = &self.settings;
        let upstream = s.upstream.clone();
        let mut note = None;
        let result = s.store.update(|tokens| {
            let entry = tokens.get(&s.upstream).filter(|e| matches(e, s)).ok_or_else(|| OAuthError::NotLoggedIn { upstream: upstream.clone() })?;
            let theirs = entry.access_token.as_str();
            if theirs != state.access.as_str() && Some(theirs) != refused && now_s() < entry.expires_at {
                return Ok(entry.clone());
            }
            let refresh_token = entry.refresh_token.clone().ok_or_else(|| OAuthError::NoRefreshToken { upstream: upstream.clone() })?;
            let request = oauth2::code::refresh_request(&entry.token_endpoint, &entry.client_id, &refresh_token, &entry.resource);
            let sent = now_s();
            let answer = post_token(s, &request);
            note =
                Some(TokenNote { target: fetch::shown(&entry.token_endpoint), outcome: answer.as_ref().map(|t| t.expires_in()).map_err(|e| e.to_string()) });
            let token = answer?;
            let mut next = entry.clone();
            next.access_token = Zeroizing::new(token.secret().to_owned());
            next.expires_at = sent.saturating_add(oauth2::fresh_for(token.expires_in()).as_secs());
            if let Some(r) = token.refresh_token() {
                next.refresh_token = Some(Zeroizing::new(r.to_owned()));
            }
            tokens.insert(s.upstream.clone(), next.clone());
            Ok(next)
        });
        state.notes.extend(note);
        let entry = result.map_err(OAuthError::Store)??;
        for secret in std::iter::once(&entry.access_token).chain(entry.refresh_token.as_ref()) {
            remember(&s.upstream, secret);
            state.secrets.push(secret.clone());
        }
        state.access = entry.access_token.clone();
        state.expires_at = entry.expires_at;
        Ok(entry.access_token)
    }
}

/// The entry is for this upstream's URL and client id: the policy's, or, without one, a
/// client that `sp oauth login` registered.
fn matches(e: &Entry, s: &Settings) -> bool {
    let client = match &s.client_id {
        Some(c) => &e.client_id == c,
        None => e.registered_redirect_uri.is_some(),
    };
    e.url == s.url.as_str() && client
}

fn read_entry(s: &Settings) -> Result<Entry, OAuthError> {
    let tokens = s.store.read().map_err(OAuthError::Store)?.unwrap_or_default();
    tokens.get(&s.upstream).filter(|e| matches(e, s)).cloned().ok_or_else(|| OAuthError::NotLoggedIn { upstream: s.upstream.clone() })
}

/// The token source of `u` when it has `auth.oauth` (its tokens read from the store
/// beside the policy, `tokens`); `None` for any other upstream.
pub(crate) fn bearer_for(
    upstream: &str,
    u: &crate::policy::upstreams::Upstream,
    roots: Option<&Vec<Vec<u8>>>,
    tokens: Option<&std::path::Path>,
) -> Result<Option<std::sync::Arc<Bearer>>, super::UpstreamError> {
    let crate::policy::upstreams::UpstreamTransport::Http { url, oauth: Some(o), .. } = &u.transport else { return Ok(None) };
    let settings = Settings {
        upstream: upstream.to_owned(),
        url: url.clone(),
        client_id: o.client_id.clone(),
        named: named_hosts(url, o),
        roots: roots.cloned(),
        // No policy file (tests, a policy given as text): no store, so no token.
        store: Store::new(tokens.map_or_else(|| std::path::PathBuf::from("/nonexistent/policy.json.oauth"), std::path::Path::to_path_buf), o.store),
    };
    let bearer = Bearer::load(settings).map_err(|e| super::UpstreamError::Auth { upstream: upstream.to_owned(), why: e.to_string() })?;
    Ok(Some(std::sync::Arc::new(bearer)))
}

impl super::Upstreams {
    /// The OAuth tokens `upstream`'s bearer read or received, into the session's Vault;
    /// its token requests, into the journal's events (`server/upstreams.rs`).
    pub(super) fn take_tokens(&mut self, upstream: &str, vault: &mut crate::gate::vault::Vault) {
        let Some(bearer) = self.slots.get(upstream).and_then(|s| s.bearer.clone()) else { return };
        for secret in bearer.take_secrets() {
            vault.remember(&secret_name(upstream), &secret);
        }
        for note in bearer.take_notes() {
            self.events.push(super::UpstreamEvent::Token { upstream: upstream.to_owned(), note });
        }
    }
}

/// The hosts the operator named for `auth.oauth`: the upstream's and the issuer's.
pub(crate) fn named_hosts(url: &Url, o: &crate::policy::upstreams::OAuth) -> Vec<String> {
    url.host_str().into_iter().chain(o.issuer.as_ref().and_then(|i| i.host_str())).map(|h| h.trim_end_matches('.').to_ascii_lowercase()).collect()
}

/// One token request through the checked path, its answer judged strictly; the token
/// is refused when shorter than the redactor can tell from text.
pub(crate) fn post_token(s: &Settings, request: &oauth2::PreparedTokenRequest) -> Result<oauth2::Token, OAuthError> {
    let reach = fetch::Reach { named: &s.named, roots: s.roots.as_ref(), timeout: TOKEN_TIMEOUT };
    let answer = fetch::exchange(&reach, &request.url, &request.headers, Some(request.body.as_bytes()), MAX_TOKEN_ANSWER)
        .map_err(|why| OAuthError::Fetch { upstream: s.upstream.clone(), why })?;
    let token = oauth2::parse_token_response(answer.status, &answer.body).and_then(|t| t.at_least(crate::gate::vault::MIN_SECRET_BYTES));
    token.map_err(|why| match why {
        TokenError::Status { error: Some(e), .. } | TokenError::Refused { error: Some(e) } if e == "invalid_grant" => {
            OAuthError::InvalidGrant { upstream: s.upstream.clone() }
        }
        why => OAuthError::Token { upstream: s.upstream.clone(), why },
    })
}

#[cfg(test)]
mod tests;
