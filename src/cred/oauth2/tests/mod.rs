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

const SECRET: &str = "hunter2";

fn no_leak(text: &str) {
    assert!(!text.contains(SECRET), "{text}");
}

#[test]
fn client_credentials_split_at_the_first_colon_and_trim_one_newline() {
    let c = ClientCredentials::parse(b"my-client:hunter2:with:colons\n").unwrap();
    assert_eq!((c.client_id(), c.client_secret()), ("my-client", "hunter2:with:colons"));
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
    assert_eq!(bad(json!({"token_url": "http://auth.example/t"})).message, "must be https (http only on loopback)");
    assert_eq!(bad(json!({"token_url": "https://a.example/t", "client_auth": "jwt"})).field, "client_auth");
    assert_eq!(bad(json!({"token_url": "https://a.example/t", "scopes": "read"})).field, "scopes");
    assert_eq!(bad(json!({"token_url": "https://a.example/t", "scopes": ["read", 1]})).field, "scopes[1]");
    assert_eq!(bad(json!({"token_url": "https://a.example/t", "scopes": ["read", "a b"]})).field, "scopes[1]");
    assert_eq!(bad(json!({"token_url": "https://a.example/t", "audience": 5})).field, "audience");
    assert_eq!(bad(json!({"token_url": "https://a.example/t", "client_secret": "hunter2"})).field, "client_secret");
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
    assert_eq!(h, [("content-type", "application/x-www-form-urlencoded"), ("accept", "application/json")]);
    let dbg = format!("{p:?}");
    no_leak(&dbg);
    assert!(dbg.contains("https://a.example/t"), "{dbg}");
}

/// RFC 6749 section 2.3.1's own example, and the urlencoding of `:` and space.
#[test]
fn basic_auth_form_encodes_id_and_secret_before_base64() {
    let c = ClientCredentials::parse(b"s6BhdRkqt3:gX1fBat3bV").unwrap();
    let p = TokenRequest::new("https://a.example/t", ClientAuth::Basic).unwrap().build(&c);
    assert_eq!(p.body.as_str(), "grant_type=client_credentials");
    assert_eq!(p.headers[2].0, "authorization");
    assert_eq!(p.headers[2].1.as_str(), "Basic czZCaGRSa3F0MzpnWDFmQmF0M2JW");

    let c = ClientCredentials::parse(b"a b:hunter2:&").unwrap();
    let p = TokenRequest::new("https://a.example/t", ClientAuth::Basic).unwrap().build(&c);
    let b64 = p.headers[2].1.strip_prefix("Basic ").unwrap();
    let plain = base64::engine::general_purpose::STANDARD.decode(b64).unwrap();
    assert_eq!(plain, b"a+b:hunter2%3A%26");
    no_leak(&format!("{p:?}"));
}

fn ok_body(token: &str, expires_in: &str) -> Vec<u8> {
    format!(r#"{{"access_token":"{token}","token_type":"Bearer","expires_in":{expires_in}}}"#).into_bytes()
}

#[test]
fn a_bearer_token_response_is_accepted() {
    // RFC 6749 section 4.4.3's example, with the Bearer type.
    let t = parse_token_response(
        200,
        br#"{"access_token":"2YotnFZFEjr1zCsicMWpAA","token_type":"bearer","expires_in":3600,"example_parameter":"example_value"}"#,
    )
    .unwrap();
    assert_eq!((t.secret(), t.expires_in()), ("2YotnFZFEjr1zCsicMWpAA", Some(3600)));
    assert_eq!(t.authorization().as_str(), "Bearer 2YotnFZFEjr1zCsicMWpAA");
    let t = parse_token_response(200, br#"{"access_token":"eyJ.a-b_c~d+e/f=","token_type":"BEARER"}"#).unwrap();
    assert_eq!(t.expires_in(), None);
    // Some providers send expires_in as a string of digits; null is absent.
    assert_eq!(parse_token_response(200, &ok_body("x", "\"3599\"")).unwrap().expires_in(), Some(3599));
    assert_eq!(parse_token_response(200, &ok_body("x", "null")).unwrap().expires_in(), None);
    assert_eq!(parse_token_response(200, &ok_body("x", "18446744073709551615")).unwrap().expires_in(), Some(u64::MAX));
    let dbg = format!("{t:?}");
    assert!(!dbg.contains("eyJ"), "{dbg}");
}

#[test]
fn hostile_token_responses_are_refused_with_a_reason_and_no_secret() {
    let long = "h".repeat(MAX_TOKEN_BYTES + 1);
    let huge = format!("{{\"pad\":\"{}\"}}", "hunter2".repeat(MAX_TOKEN_RESPONSE_BYTES / 7 + 1));
    let cases: Vec<(u16, Vec<u8>, TokenError)> = vec![
        (200, b"hunter2".to_vec(), TokenError::NotJson),
        (200, b"".to_vec(), TokenError::NotJson),
        (200, br#"{"access_token":"hunter2""#.to_vec(), TokenError::NotJson),
        (200, br#"["hunter2"]"#.to_vec(), TokenError::NotAnObject),
        (200, br#""hunter2""#.to_vec(), TokenError::NotAnObject),
        (200, br#"{"token_type":"Bearer"}"#.to_vec(), TokenError::MissingAccessToken),
        (200, br#"{"access_token":null,"token_type":"Bearer"}"#.to_vec(), TokenError::MissingAccessToken),
        (200, br#"{"access_token":["hunter2"],"token_type":"Bearer"}"#.to_vec(), TokenError::AccessTokenNotString),
        (200, br#"{"access_token":7,"token_type":"Bearer"}"#.to_vec(), TokenError::AccessTokenNotString),
        (200, br#"{"access_token":"","token_type":"Bearer"}"#.to_vec(), TokenError::EmptyAccessToken),
        (200, br#"{"access_token":"hunter2 x","token_type":"Bearer"}"#.to_vec(), TokenError::AccessTokenCharacters),
        (200, br#"{"access_token":"hunter2\r\nX-Evil: 1","token_type":"Bearer"}"#.to_vec(), TokenError::AccessTokenCharacters),
        (200, br#"{"access_token":"hunter2\u0000","token_type":"Bearer"}"#.to_vec(), TokenError::AccessTokenCharacters),
        (200, "{\"access_token\":\"hunter2\u{e9}\",\"token_type\":\"Bearer\"}".as_bytes().to_vec(), TokenError::AccessTokenCharacters),
        (200, ok_body(&long, "1"), TokenError::AccessTokenTooLong),
        (200, br#"{"access_token":"hunter2"}"#.to_vec(), TokenError::MissingTokenType),
        (200, br#"{"access_token":"hunter2","token_type":"mac"}"#.to_vec(), TokenError::TokenTypeNotBearer),
        (200, br#"{"access_token":"hunter2","token_type":"hunter2"}"#.to_vec(), TokenError::TokenTypeNotBearer),
        (200, br#"{"access_token":"hunter2","token_type":1}"#.to_vec(), TokenError::TokenTypeNotBearer),
        (200, br#"{"access_token":"hunter2","token_type":"Bearer "}"#.to_vec(), TokenError::TokenTypeNotBearer),
        (200, ok_body("hunter2", "-1"), TokenError::BadExpiresIn),
        (200, ok_body("hunter2", "3600.5"), TokenError::BadExpiresIn),
        (200, ok_body("hunter2", "3600.0"), TokenError::BadExpiresIn),
        (200, ok_body("hunter2", "1e30"), TokenError::BadExpiresIn),
        (200, ok_body("hunter2", "99999999999999999999"), TokenError::BadExpiresIn),
        (200, ok_body("hunter2", "\"-5\""), TokenError::BadExpiresIn),
        (200, ok_body("hunter2", "\"1h\""), TokenError::BadExpiresIn),
        (200, ok_body("hunter2", "\"\""), TokenError::BadExpiresIn),
        (200, ok_body("hunter2", "\"99999999999999999999\""), TokenError::BadExpiresIn),
        (200, ok_body("hunter2", "true"), TokenError::BadExpiresIn),
        (200, huge.clone().into_bytes(), TokenError::TooLarge),
        (200, br#"{"error":"invalid_scope","error_description":"hunter2"}"#.to_vec(), TokenError::Refused { error: Some("invalid_scope".into()) }),
        (
            401,
            br#"{"error":"invalid_client","error_description":"bad secret hunter2"}"#.to_vec(),
            TokenError::Status { status: 401, error: Some("invalid_client".into()) },
        ),
        (400, br#"{"error":"hunter2-Secret"}"#.to_vec(), TokenError::Status { status: 400, error: None }),
        (400, br#"{"error":"hunter"}"#.to_vec(), TokenError::Status { status: 400, error: Some("hunter".into()) }),
        (400, br#"{"error":["invalid_client"]}"#.to_vec(), TokenError::Status { status: 400, error: None }),
        (500, b"<html>hunter2</html>".to_vec(), TokenError::Status { status: 500, error: None }),
        (302, b"".to_vec(), TokenError::Status { status: 302, error: None }),
        (201, ok_body("hunter2", "60"), TokenError::Status { status: 201, error: None }),
        (503, huge.into_bytes(), TokenError::Status { status: 503, error: None }),
    ];
    for (status, body, want) in cases {
        let e = parse_token_response(status, &body).unwrap_err();
        assert_eq!(e, want, "{}", String::from_utf8_lossy(&body[..body.len().min(200)]));
        no_leak(&format!("{e} {e:?}"));
    }
}

#[test]
fn error_display_names_the_problem() {
    assert_eq!(TokenError::Status { status: 401, error: Some("invalid_client".into()) }.to_string(), "token endpoint answered HTTP 401 (invalid_client)");
    assert_eq!(TokenError::TokenTypeNotBearer.to_string(), "token response token_type is not Bearer");
    assert_eq!(TokenError::BadExpiresIn.to_string(), "token response expires_in is not a non-negative integer");
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
    assert_eq!(c.insert("a", token("tok-a", Some(100)), t0).secret(), "tok-a");
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

// The refresh rule (`with_token`) against a simulated endpoint and API: `refresh.rs`.
mod refresh;
