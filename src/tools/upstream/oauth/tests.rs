//! The token store's format and the errors' texts (the process tests in
//! `tests/it/upstream_oauth.rs` drive the whole flow). Attacks tried (and what held):
//! a store entry with an unknown member, a wrong type, another version: corrupt, never
//! half read; Debug of an entry or an error never shows a token.
use super::*;

fn entry() -> Entry {
    Entry {
        url: "https://m.example/mcp".into(),
        client_id: "c".into(),
        resource: "https://m.example/mcp".into(),
        issuer: "https://as.example/".into(),
        token_endpoint: Url::parse("https://as.example/token").unwrap(),
        access_token: Zeroizing::new("at-secret-value-1".into()),
        expires_at: 42,
        refresh_token: Some(Zeroizing::new("rt-secret-value-1".into())),
    }
}

#[test]
fn the_store_round_trips_and_refuses_what_it_did_not_write() {
    let mut all = store::Tokens::new();
    all.insert("t".into(), entry());
    let bytes = store::render(&all);
    assert_eq!(store::parse(&bytes).unwrap(), all);
    assert_eq!(store::parse(b"").unwrap(), store::Tokens::new());
    assert!(!format!("{:?}", entry()).contains("secret-value"));
    let text = String::from_utf8(bytes.to_vec()).unwrap();
    let cases = [
        (text.replace("\"version\":1", "\"version\":2"), "version is not 1"),
        (text.replace("\"expires_at\":42", "\"expires_at\":\"42\""), "t.expires_at: not an integer"),
        (text.replace("\"client_id\"", "\"client\""), "t.client: unknown member"),
        ("[]".to_owned(), "not an object"),
    ];
    for (bad, want) in cases {
        assert_eq!(store::parse(bad.as_bytes()).unwrap_err(), want);
    }
}

#[test]
fn errors_that_need_a_login_say_which_command() {
    let u = || "tickets".to_owned();
    let cases = [
        (OAuthError::NotLoggedIn { upstream: u() }, "no OAuth tokens in the token store: run `sp oauth login tickets`"),
        (OAuthError::InvalidGrant { upstream: u() }, "the authorization server refused the refresh token (invalid_grant): run `sp oauth login tickets`"),
        (OAuthError::NoRefreshToken { upstream: u() }, "the access token expired and there is no refresh token: run `sp oauth login tickets`"),
        (OAuthError::Refused { upstream: u() }, "it refused a freshly refreshed access token (HTTP 401): run `sp oauth login tickets`"),
        (OAuthError::Token { upstream: u(), why: TokenError::NotJson }, "token refresh failed: token response is not JSON"),
    ];
    for (e, want) in cases {
        assert_eq!(e.to_string(), want);
    }
}
