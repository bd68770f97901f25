//! Credentials parsed from a source, the names an agent may not send, and secrecy in
//! every Debug and Display.

use super::*;

#[test]
fn credentials_parse_both_spellings_and_null_token() {
    let c = Credentials::from_json(br#"{"access_key_id":"AKID","secret_access_key":"s3cr3t","session_token":null}"#).unwrap();
    assert_eq!((c.access_key_id(), c.secret_access_key(), c.session_token()), ("AKID", "s3cr3t", None));
    let c = Credentials::from_json(
        b"{\n \"Version\": 1,\n \"AccessKeyId\": \"AKID\",\n \"SecretAccessKey\": \"s3cr3t\",\n \"SessionToken\": \"tok\",\n \"Expiration\": \"2030-01-01T00:00:00Z\"\n}\n",
    )
    .unwrap();
    assert_eq!((c.access_key_id(), c.secret_access_key(), c.session_token()), ("AKID", "s3cr3t", Some("tok")));
}

#[test]
fn bad_credentials_say_what_is_wrong_and_never_quote_the_input() {
    let cases: &[(&[u8], SigV4Error)] = &[
        (b"hunter2-secret", SigV4Error::NotJson),
        (br#"{"access_key_id":"A","secret_access_key":"hunter2-secret""#, SigV4Error::NotJson),
        (br#"["hunter2-secret"]"#, SigV4Error::NotAnObject),
        (br#"{"secret_access_key":"hunter2-secret"}"#, SigV4Error::MissingField("access_key_id")),
        (br#"{"access_key_id":"A"}"#, SigV4Error::MissingField("secret_access_key")),
        (br#"{"access_key_id":"A","secret_access_key":7}"#, SigV4Error::FieldNotString("secret_access_key")),
        (br#"{"access_key_id":"","secret_access_key":"hunter2-secret"}"#, SigV4Error::EmptyField("access_key_id")),
        (br#"{"access_key_id":"A/B","secret_access_key":"hunter2-secret"}"#, SigV4Error::BadCharacters("access_key_id")),
        (br#"{"access_key_id":"A","secret_access_key":"hunter2 secret"}"#, SigV4Error::BadCharacters("secret_access_key")),
        (br#"{"access_key_id":"A","secret_access_key":"hunter2-secret","session_token":"a\r\nX: y"}"#, SigV4Error::BadCharacters("session_token")),
        (br#"{"access_key_id":"A","secret_access_key":"hunter2-secret","session_token":["x"]}"#, SigV4Error::FieldNotString("session_token")),
    ];
    for (input, want) in cases {
        let e = Credentials::from_json(input).unwrap_err();
        assert_eq!(&e, want, "{}", String::from_utf8_lossy(input));
        let text = format!("{e} {e:?}");
        assert!(!text.contains("hunter2"), "{text}");
    }
}

#[test]
fn refused_agent_name_checks_headers_then_decoded_query_names() {
    let url = Url::parse("https://b.example/k?prefix=a&X%2DAmz%2DSignature=1").unwrap();
    assert_eq!(refused_agent_name(["Accept", "Range"], &url).as_deref(), Some("X-Amz-Signature"));
    assert_eq!(refused_agent_name(["Accept", "X-Amz-Acl"], &url).as_deref(), Some("X-Amz-Acl"));
    let url = Url::parse("https://b.example/k?prefix=x-amz-&list-type=2").unwrap();
    assert_eq!(refused_agent_name(["Accept"], &url), None);
    let url = Url::parse("https://b.example/k?Authorization=x").unwrap();
    assert_eq!(refused_agent_name([], &url).as_deref(), Some("Authorization"));
}

#[test]
fn policy_section_parses_and_names_the_bad_member() {
    let c = SigV4Config::from_policy(&serde_json::json!({"region": "eu-west-1", "service": "s3"})).unwrap();
    assert_eq!((c.scope.region(), c.scope.service(), c.unsigned_payload), ("eu-west-1", "s3", false));
    assert!(matches!(c.payload(b"x"), Payload::Hash(b"x")));
    let c = SigV4Config::from_policy(&serde_json::json!({"region": "auto", "service": "s3", "unsigned_payload": true})).unwrap();
    assert!(matches!(c.payload(b"x"), Payload::Unsigned));
    let bad = |v: serde_json::Value| SigV4Config::from_policy(&v).unwrap_err().field;
    assert_eq!(bad(serde_json::json!([])), "");
    assert_eq!(bad(serde_json::json!({"service": "s3"})), "region");
    assert_eq!(bad(serde_json::json!({"region": "EU", "service": "s3"})), "region");
    assert_eq!(bad(serde_json::json!({"region": "eu-west-1"})), "service");
    assert_eq!(bad(serde_json::json!({"region": "eu-west-1", "service": "s3/x"})), "service");
    assert_eq!(bad(serde_json::json!({"region": "eu-west-1", "service": "s3", "unsigned_payload": "yes"})), "unsigned_payload");
    assert_eq!(bad(serde_json::json!({"region": "eu-west-1", "service": "s3", "secret": "x"})), "secret");
    assert_eq!(SigV4Config::from_policy(&serde_json::json!({"region": "eu-west-1"})).unwrap_err().to_string(), "service: must be a string such as \"s3\"");
}

#[test]
fn agent_may_not_send_authorization_or_any_x_amz_name() {
    for n in [
        "Authorization",
        "authorization",
        "AUTHORIZATION",
        "X-Amz-Date",
        "x-amz-security-token",
        "X-AMZ-CONTENT-SHA256",
        "x-amz-meta-foo",
        " x-amz-date",
        "X-Amz-Signature",
        "X-Amz-Credential",
        // `_` for `-` (CGI/WSGI/PHP read both as HTTP_X_AMZ_DATE), mixed case, padding
        "X_Amz_Date",
        "x_amz_security_token",
        "X-Amz_Date",
        "x_AMZ-content-sha256",
        "X_AMZ_",
        "x-amz-date\0",
        "\tX-Amz-Date\t",
    ] {
        assert!(agent_may_not_send(n), "{n}");
        assert!(agent_may_not_send_query(n), "{n}");
    }
    for n in ["Accept", "Content-Type", "x-amzn-trace-id", "x_amzn_trace_id", "x-amz", "x-am", "authorization-x", "prefix", "Range"] {
        assert!(!agent_may_not_send(n), "{n}");
        assert!(!agent_may_not_send_query(n), "{n}");
    }
}

#[test]
fn debug_and_errors_never_show_the_secret_key_token_or_signature() {
    let c = creds(Some(STS_TOKEN));
    let dbg = format!("{c:?}");
    assert!(dbg.contains("AKIDEXAMPLE") && !dbg.contains(SECRET) && !dbg.contains("AQoDYXdz"), "{dbg}");
    let url = Url::parse("https://example.amazonaws.com/").unwrap();
    let req = Request { method: "POST", url: &url, headers: &[], payload: Payload::Hash(b"") };
    let s = sign(&req, &c, &suite_scope(), suite_time()).unwrap();
    assert_eq!(s.signature(), "85d96828115b5dc0cfc3bd16ad9e210dd772bbebba041836c64533a82be05ead");
    let dbg = format!("{s:?}");
    assert!(!dbg.contains(s.signature()) && !dbg.contains("AQoDYXdz") && !dbg.contains(SECRET), "{dbg}");
    assert!(dbg.contains("authorization"), "{dbg}");
    let e =
        sign(&Request { method: "POST", url: &url, headers: &[("Authorization", SECRET)], payload: Payload::Hash(b"") }, &c, &suite_scope(), suite_time())
            .unwrap_err();
    let text = format!("{e} {e:?}");
    assert!(!text.contains(SECRET), "{text}");
}
