//! The code grant's pure part. Attacks tried (and what held):
//! - metadata whose `resource` names another origin, or a sibling path
//!   (`/mcp-evil` for `/mcp`): refused (ResourceMismatch);
//! - an authorization server whose `issuer` differs from the one asked for (a mix-up):
//!   refused; one without S256: refused (NoS256), so no login without PKCE;
//! - `http://` endpoints off loopback, `user:pw@` and `#fragment`: refused (BadUrl);
//! - a document over 64 KiB, with a duplicate member (two parsers, two answers): refused;
//! - a pasted address from another login (wrong `state`), an `error=` answer whose
//!   text is not a short word (only the word is ever shown), a code with a space or a
//!   control character (header and form injection): refused.
use super::*;

#[test]
fn pkce_matches_rfc7636_appendix_b() {
    let bytes = base64::engine::general_purpose::URL_SAFE_NO_PAD.decode("dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gFWFOEjXk").unwrap();
    let p = Pkce::from_random(&bytes.try_into().unwrap());
    assert_eq!(p.verifier(), "dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gFWFOEjXk");
    assert_eq!(p.challenge(), "E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM");
    assert!(!format!("{p:?}").contains(p.verifier()));
}

#[test]
fn the_authorization_url_carries_pkce_state_and_resource() {
    let endpoint = Url::parse("https://as.example/authorize?tenant=t1").unwrap();
    let scopes = vec!["mcp:read".to_owned(), "x".to_owned()];
    let a = Authorize {
        endpoint: &endpoint,
        client_id: "sp 1",
        redirect_uri: "http://127.0.0.1/callback",
        scopes: &scopes,
        state: "st",
        challenge: "ch",
        resource: "https://mcp.example/mcp",
    };
    assert_eq!(
        authorization_url(&a).as_str(),
        "https://as.example/authorize?tenant=t1&response_type=code&client_id=sp+1&redirect_uri=http%3A%2F%2F127.0.0.1%2Fcallback&scope=mcp%3Aread+x&state=st&code_challenge=ch&code_challenge_method=S256&resource=https%3A%2F%2Fmcp.example%2Fmcp"
    );
    let token = Url::parse("https://as.example/token").unwrap();
    let r = code_request(&token, "c", "the&code", "http://127.0.0.1/callback", "ver", "https://mcp.example/mcp");
    assert_eq!(
        r.body.as_str(),
        "grant_type=authorization_code&code=the%26code&redirect_uri=http%3A%2F%2F127.0.0.1%2Fcallback&client_id=c&code_verifier=ver&resource=https%3A%2F%2Fmcp.example%2Fmcp"
    );
    let r = refresh_request(&token, "c", "rt", "https://mcp.example/mcp");
    assert_eq!(r.body.as_str(), "grant_type=refresh_token&refresh_token=rt&client_id=c&resource=https%3A%2F%2Fmcp.example%2Fmcp");
    assert!(!format!("{r:?}").contains("rt&"));
}

#[test]
fn challenges_are_read_from_the_bearer_scheme_only() {
    let c = parse_challenge(r#"Bearer error="invalid_token", resource_metadata="https://m.example/.well-known/oauth-protected-resource/mcp", scope="a b""#);
    assert_eq!(c, Challenge { resource_metadata: Some("https://m.example/.well-known/oauth-protected-resource/mcp".into()), scope: Some("a b".into()) });
    let c = parse_challenge(r#"Basic realm="x", resource_metadata="https://evil/" , Bearer scope=read"#);
    assert_eq!(c, Challenge { resource_metadata: None, scope: Some("read".into()) });
    assert_eq!(parse_challenge(r#"Bearer realm="a\"b", scope="q\\""#).scope.as_deref(), Some("q\\"));
    assert_eq!(parse_challenge(""), Challenge::default());
    assert_eq!(parse_challenge("Bearer"), Challenge::default());
    // Every prefix of a challenge parses without a panic.
    let full = r#"Bearer error="x\"y", resource_metadata="https://m/", scope=a"#;
    for i in 0..=full.len() {
        let _ = parse_challenge(&full[..i]);
    }
}

#[test]
fn well_known_places_follow_the_spec_order() {
    let u = Url::parse("https://m.example/v1/mcp?x=1").unwrap();
    let got: Vec<String> = resource_metadata_urls(&u).iter().map(ToString::to_string).collect();
    assert_eq!(got, ["https://m.example/.well-known/oauth-protected-resource/v1/mcp", "https://m.example/.well-known/oauth-protected-resource"]);
    let got: Vec<String> = server_metadata_urls(&Url::parse("https://as.example/tenant1").unwrap()).iter().map(ToString::to_string).collect();
    assert_eq!(
        got,
        [
            "https://as.example/.well-known/oauth-authorization-server/tenant1",
            "https://as.example/.well-known/openid-configuration/tenant1",
            "https://as.example/tenant1/.well-known/openid-configuration"
        ]
    );
    let got: Vec<String> = server_metadata_urls(&Url::parse("https://as.example").unwrap()).iter().map(ToString::to_string).collect();
    assert_eq!(got, ["https://as.example/.well-known/oauth-authorization-server", "https://as.example/.well-known/openid-configuration"]);
}

#[test]
fn resource_metadata_must_name_this_resource() {
    let up = Url::parse("https://m.example/mcp").unwrap();
    let doc = |resource: &str| format!(r#"{{"resource": "{resource}", "authorization_servers": ["https://as.example"], "scopes_supported": ["r"]}}"#);
    let ok = parse_resource_metadata(doc("https://m.example/mcp").as_bytes(), &up).unwrap();
    assert_eq!(
        ok,
        ResourceMetadata {
            resource: "https://m.example/mcp".into(),
            authorization_servers: vec![Url::parse("https://as.example").unwrap()],
            scopes_supported: vec!["r".into()]
        }
    );
    assert_eq!(parse_resource_metadata(doc("https://m.example").as_bytes(), &up).unwrap().resource, "https://m.example");
    for bad in ["https://m.example/mcp-evil", "https://other.example/mcp", "https://m.example/mc", "https://m.example:444/mcp"] {
        assert_eq!(parse_resource_metadata(doc(bad).as_bytes(), &up), Err(MetadataError::ResourceMismatch), "{bad}");
    }
    let cases: [(&str, MetadataError); 6] = [
        (r#"{"resource": "https://m.example/mcp"}"#, MetadataError::Missing("authorization_servers")),
        (r#"{"resource": "https://m.example/mcp", "authorization_servers": []}"#, MetadataError::Missing("authorization_servers")),
        (r#"{"resource": "https://m.example/mcp", "authorization_servers": ["http://as.example"]}"#, MetadataError::BadUrl("authorization_servers")),
        (r#"{"resource": "https://m.example/mcp", "resource": "https://m.example/mcp"}"#, MetadataError::NotJson),
        (r#"[1]"#, MetadataError::NotAnObject),
        (r#"{"resource": "https://u:p@m.example/mcp"}"#, MetadataError::BadUrl("resource")),
    ];
    for (body, want) in cases {
        assert_eq!(parse_resource_metadata(body.as_bytes(), &up), Err(want), "{body}");
    }
    let big = format!(r#"{{"x": "{}"}}"#, "a".repeat(MAX_METADATA_BYTES));
    assert_eq!(parse_resource_metadata(big.as_bytes(), &up), Err(MetadataError::TooLarge));
}

#[test]
fn server_metadata_needs_its_issuer_and_s256() {
    let issuer = Url::parse("https://as.example/t1").unwrap();
    let doc = |iss: &str, methods: &str| {
        format!(
            r#"{{"issuer": "{iss}", "authorization_endpoint": "https://as.example/a", "token_endpoint": "https://as.example/t", "code_challenge_methods_supported": {methods}}}"#
        )
    };
    let ok = parse_server_metadata(doc("https://as.example/t1", r#"["plain", "S256"]"#).as_bytes(), &issuer).unwrap();
    assert_eq!(ok.token_endpoint.as_str(), "https://as.example/t");
    assert_eq!(parse_server_metadata(doc("https://evil.example/t1", r#"["S256"]"#).as_bytes(), &issuer), Err(MetadataError::IssuerMismatch));
    assert_eq!(parse_server_metadata(doc("https://as.example/t1", r#"["plain"]"#).as_bytes(), &issuer), Err(MetadataError::NoS256));
    assert_eq!(parse_server_metadata(doc("https://as.example/t1", "null").as_bytes(), &issuer), Err(MetadataError::NoS256));
    let loopback = Url::parse("http://127.0.0.1:9/").unwrap();
    let body = r#"{"issuer": "http://127.0.0.1:9", "authorization_endpoint": "http://127.0.0.1:9/a", "token_endpoint": "http://127.0.0.1:9/t", "code_challenge_methods_supported": ["S256"]}"#;
    assert_eq!(parse_server_metadata(body.as_bytes(), &loopback).unwrap().registration_endpoint, None);
    // A registration endpoint is judged like the other URLs, without failing the rest.
    let with = |r: &str| body.replace("\"token_endpoint\"", &format!("\"registration_endpoint\": {r}, \"token_endpoint\""));
    let good = parse_server_metadata(with("\"http://127.0.0.1:9/register\"").as_bytes(), &loopback).unwrap();
    assert_eq!(good.registration_endpoint, Some(Ok(Url::parse("http://127.0.0.1:9/register").unwrap())));
    for bad in ["\"http://as.example/register\"", "\"https://u:p@as.example/r\"", "7"] {
        let m = parse_server_metadata(with(bad).as_bytes(), &loopback).unwrap();
        assert!(
            matches!(m.registration_endpoint, Some(Err(MetadataError::BadUrl("registration_endpoint") | MetadataError::Missing("registration_endpoint")))),
            "{bad}"
        );
    }
}

#[test]
fn pasted_codes_and_addresses() {
    assert_eq!(parse_pasted("  abc-123\n", "s").unwrap().as_str(), "abc-123");
    assert_eq!(parse_pasted("http://127.0.0.1/callback?code=c%2B1&state=s", "s").unwrap().as_str(), "c+1");
    let cases = [
        ("", PasteError::Empty),
        ("a b", PasteError::NotACode),
        ("a\u{7}", PasteError::NotACode),
        ("http://127.0.0.1/callback?code=c&state=other", PasteError::WrongState),
        ("http://127.0.0.1/callback?code=c", PasteError::WrongState),
        ("http://127.0.0.1/callback?state=s", PasteError::NoCode),
        ("http://127.0.0.1/callback?error=access_denied&state=s", PasteError::Refused(Some("access_denied".into()))),
        ("http://127.0.0.1/callback?error=Secret+Text", PasteError::Refused(None)),
        ("http://127.0.0.1/callback?code=a%0Ab&state=s", PasteError::NotACode),
    ];
    for (input, want) in cases {
        assert_eq!(parse_pasted(input, "s").map(|c| c.as_str().to_owned()), Err(want), "{input:?}");
    }
}

#[test]
fn a_refresh_token_in_the_answer_is_kept_and_checked() {
    let t = crate::cred::oauth2::parse_token_response(200, br#"{"access_token":"at-123456789","token_type":"Bearer","refresh_token":"rt-abc"}"#).unwrap();
    assert_eq!(t.refresh_token(), Some("rt-abc"));
    assert!(!format!("{t:?}").contains("rt-abc"));
    for bad in [r#""""#, r#""a b""#, "5", r#""a\u0000""#] {
        let body = format!(r#"{{"access_token":"at-123456789","token_type":"Bearer","refresh_token":{bad}}}"#);
        assert_eq!(crate::cred::oauth2::parse_token_response(200, body.as_bytes()).unwrap_err(), crate::cred::oauth2::TokenError::BadRefreshToken, "{bad}");
    }
}
