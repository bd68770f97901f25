//! Issue #13 end to end: `aws_sigv4` and `oauth2` credentials through the built
//! `sp mcp`, against loopback servers (`support::http_server`) that judge what arrives.
//!
//! What must hold:
//! - SigV4: a server that recomputes the signature itself, from the AWS algorithm with
//!   `hmac` + `sha2` and nothing of sp's, accepts what sp sends (S3 GET with an encoded
//!   key and a query, a POST with a hashed body, `UNSIGNED-PAYLOAD`, an STS-style
//!   session from pretty-printed AWS CLI JSON) and answers 403 to a wrong key; the
//!   agent's `Authorization`, `X-Amz-*` headers and `X-Amz-*` query parameters are
//!   `SP_BAD_ARGUMENTS` with nothing sent; an echo of the request never shows the
//!   signature, the secret key or the session token.
//! - OAuth2: a token endpoint issuing short-lived tokens and an API that only accepts a
//!   live one: the first call fetches, the second reuses, after expiry a new one is
//!   fetched; a revoked token (401) costs exactly one refresh and one retry; an echoing
//!   API never shows the token; each fetch is a `token` journal row (URL, outcome) and
//!   the journal never holds a token or the client secret, and still verifies.
//! - `sp check` validates and prints both; `sp_inventory` shows scheme and bindings.
//!
//! Attacks tried (and what held):
//! - agent `Authorization`, `X-Amz-Date`, `x-amz-security-token` headers on a signed
//!   request; `X-Amz-Signature` and `X%2DAmz-Credential` (encoded) in the URL query,
//!   and `X-Amz-Credential` through the `query` argument: all SP_BAD_ARGUMENTS, zero
//!   connections at the server (held);
//! - an API echoing every request header (authorization, x-amz-security-token) in its
//!   body and headers: signature, session token, secret key and bearer token all come
//!   back as `[REDACTED:<name>]` (held);
//! - a wrong secret key: the independent verifier answers 403, proving it checks (held);
//! - a source that is `id:secret` instead of JSON, JSON without the secret key, JSON
//!   with a control character: SP_UNAVAILABLE naming the problem, never the content,
//!   and nothing sent unsigned (held);
//! - a token endpoint that refuses with the client secret in `error_description`: the
//!   agent gets SP_UPSTREAM naming `invalid_client` only, the journal row likewise (held);
//! - a revoked token, then an IdP whose every token the API refuses: one refresh and one
//!   retry per call, never a loop on the token endpoint (held);
//! - a token endpoint behind a certificate from another CA: TLS fails, no token request
//!   and no API call (held); a `token_url` at the metadata address 169.254.169.254:
//!   SP_BLOCKED, nothing dialed, a `token` row says so (held);
//! - agent `Authorization` on an oauth2-bound request: SP_BAD_ARGUMENTS (as for every
//!   request), no token fetched, nothing sent (held);
//! - `token_url` over plain http to a non-loopback host, bad region, unknown members:
//!   `sp check` refuses, naming the field (held).
#![allow(
    clippy::disallowed_methods,
    reason = "tests and benchmarks start sp, sshd and clients and read their environment; the fence in clippy.toml is for src/"
)]

use crate::support;

use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use base64::Engine as _;
use hmac::{Hmac, Mac};
use serde_json::{json, Value};
use sha2::{Digest, Sha256};

use support::http_server::{Echo, Recorded, Reply, TestServer};
use support::process::{canary, run_sp, tool_error_code, Launch, Session, TempDir};

// ---------------------------------------------------------------------------------------
// An independent SigV4 verifier (AWS "Signature Version 4 signing process"), written from
// the specification: nothing of sp's signer is used.

type HmacSha256 = Hmac<Sha256>;

fn hmac(key: &[u8], data: &str) -> Vec<u8> {
    let mut m = HmacSha256::new_from_slice(key).expect("any key length");
    m.update(data.as_bytes());
    m.finalize().into_bytes().to_vec()
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn sha_hex(bytes: &[u8]) -> String {
    hex(&Sha256::digest(bytes))
}

/// AWS `UriEncode`: RFC 3986 unreserved characters kept, every other byte `%XX`.
fn aws_encode(bytes: &[u8]) -> String {
    bytes.iter().map(|&b| if b.is_ascii_alphanumeric() || b"-_.~".contains(&b) { (b as char).to_string() } else { format!("%{b:02X}") }).collect()
}

fn pct_decode(s: &str, plus_is_space: bool) -> Vec<u8> {
    let b = s.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            b'%' if i + 2 < b.len() => {
                let h = std::str::from_utf8(&b[i + 1..i + 3]).ok().and_then(|h| u8::from_str_radix(h, 16).ok());
                match h {
                    Some(v) => {
                        out.push(v);
                        i += 3;
                        continue;
                    }
                    None => out.push(b'%'),
                }
            }
            b'+' if plus_is_space => out.push(b' '),
            c => out.push(c),
        }
        i += 1;
    }
    out
}

#[derive(Clone)]
struct AwsKey {
    id: String,
    secret: String,
    session_token: Option<String>,
    region: &'static str,
    service: &'static str,
}

/// Recomputes the signature of `r` with `key`; `Err` says what did not match.
fn verify_sigv4(r: &Recorded, key: &AwsKey) -> Result<String, String> {
    let auth = r.header("authorization").ok_or("no authorization header")?;
    let rest = auth.strip_prefix("AWS4-HMAC-SHA256 ").ok_or("not AWS4-HMAC-SHA256")?;
    let (mut credential, mut signed, mut signature) = (None, None, None);
    for part in rest.split(", ") {
        match part.split_once('=') {
            Some(("Credential", v)) => credential = Some(v),
            Some(("SignedHeaders", v)) => signed = Some(v),
            Some(("Signature", v)) => signature = Some(v),
            _ => return Err(format!("unexpected authorization part {part:?}")),
        }
    }
    let (credential, signed, signature) = (credential.ok_or("no Credential")?, signed.ok_or("no SignedHeaders")?, signature.ok_or("no Signature")?);
    let scope: Vec<&str> = credential.split('/').collect();
    let [id, date, region, service, "aws4_request"] = scope[..] else { return Err(format!("bad credential scope {credential}")) };
    if (id, region, service) != (key.id.as_str(), key.region, key.service) {
        return Err(format!("wrong key id or scope: {credential}"));
    }
    let amz_date = r.header("x-amz-date").ok_or("no x-amz-date")?;
    if amz_date.len() != 16 || !amz_date.starts_with(date) || &amz_date[8..9] != "T" || !amz_date.ends_with('Z') {
        return Err(format!("x-amz-date {amz_date} does not match the scope date {date}"));
    }
    let names: Vec<&str> = signed.split(';').collect();
    let mut sorted = names.clone();
    sorted.sort();
    if sorted != names {
        return Err("SignedHeaders not sorted".into());
    }
    for must in ["host", "x-amz-date", "x-amz-content-sha256"] {
        if !names.contains(&must) {
            return Err(format!("{must} is not signed"));
        }
    }
    // Every x-amz-* header that arrived must be signed (S3 refuses unsigned ones).
    if let Some((n, _)) = r.headers.iter().find(|(n, _)| n.starts_with("x-amz-") && !names.contains(&n.as_str())) {
        return Err(format!("{n} arrived unsigned"));
    }
    match (&key.session_token, r.header("x-amz-security-token")) {
        (Some(t), Some(got)) if t == got && names.contains(&"x-amz-security-token") => {}
        (None, None) => {}
        _ => return Err("x-amz-security-token missing, wrong or unsigned".into()),
    }
    let payload = r.header("x-amz-content-sha256").ok_or("no x-amz-content-sha256")?;
    if payload != "UNSIGNED-PAYLOAD" && payload != sha_hex(&r.body) {
        return Err("x-amz-content-sha256 is not the body's hash".into());
    }
    let (path, query) = r.target.split_once('?').unwrap_or((&r.target, ""));
    let uri: Vec<String> =
        path.split('/').map(|seg| if key.service == "s3" { aws_encode(&pct_decode(seg, false)) } else { aws_encode(seg.as_bytes()) }).collect();
    let mut pairs: Vec<(String, String)> = query
        .split('&')
        .filter(|p| !p.is_empty())
        .map(|p| {
            let (k, v) = p.split_once('=').unwrap_or((p, ""));
            (aws_encode(&pct_decode(k, true)), aws_encode(&pct_decode(v, true)))
        })
        .collect();
    pairs.sort();
    let query: Vec<String> = pairs.iter().map(|(k, v)| format!("{k}={v}")).collect();
    let mut headers = String::new();
    for n in &names {
        let values: Vec<String> = r.headers.iter().filter(|(h, _)| h == n).map(|(_, v)| v.split_whitespace().collect::<Vec<_>>().join(" ")).collect();
        if values.is_empty() {
            return Err(format!("signed header {n} did not arrive"));
        }
        headers += &format!("{n}:{}\n", values.join(","));
    }
    let canonical = format!("{}\n{}\n{}\n{headers}\n{signed}\n{payload}", r.method, uri.join("/"), query.join("&"));
    let to_sign = format!("AWS4-HMAC-SHA256\n{amz_date}\n{date}/{region}/{service}/aws4_request\n{}", sha_hex(canonical.as_bytes()));
    let mut k = hmac(format!("AWS4{}", key.secret).as_bytes(), date);
    for part in [region, service, "aws4_request"] {
        k = hmac(&k, part);
    }
    let expected = hex(&hmac(&k, &to_sign));
    if expected != signature {
        return Err(format!("signature mismatch; canonical request was:\n{canonical}"));
    }
    Ok(signature.to_owned())
}

/// Routes `path` to the verifier: 200 `{"verified": true, "signed": [...]}` or 403 with
/// the reason. Every signature that verified is pushed to `seen`.
fn verified_route(server: &TestServer, path: &str, key: AwsKey, seen: Arc<Mutex<Vec<String>>>) {
    server.handle(path, move |r| match verify_sigv4(r, &key) {
        Ok(sig) => {
            seen.lock().unwrap().push(sig);
            let signed: Vec<&str> = r.headers.iter().map(|(n, _)| n.as_str()).collect();
            Reply::json(200, &json!({"verified": true, "headers": signed}).to_string())
        }
        Err(why) => Reply::json(403, &json!({"error": "SignatureDoesNotMatch", "why": why}).to_string()),
    });
}

// ---------------------------------------------------------------------------------------
// Fixtures

fn ready(launch: Launch) -> Session {
    let mut s = Session::start(launch);
    s.ready("2025-06-18");
    s
}

fn sc(result: &Value) -> &Value {
    &result["structuredContent"]
}

fn rows(path: &Path) -> Vec<Value> {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("read {}: {e}", path.display()));
    text.lines().map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("row {l:?}: {e}"))).collect()
}

struct Aws {
    dir: TempDir,
    policy: PathBuf,
    s3: AwsKey,
    sts: AwsKey,
}

/// Credentials `s3` (snake_case JSON with a session token; `/bucket/*`, `/echo/*`),
/// `s3wrong` (a wrong secret; `/wrong/*`), `s3unsigned` (`unsigned_payload`;
/// `/unsigned/*`), `sts` (pretty-printed AWS CLI JSON with a session token, service
/// `sts`; `/sts/*`), all on `127.0.0.1:port`.
fn aws_setup(port: u16) -> Aws {
    let dir = TempDir::new("sigv4");
    let host = format!("127.0.0.1:{port}");
    let s3 = AwsKey { id: "AKIDEXAMPLE13".into(), secret: canary(), session_token: Some(canary()), region: "eu-west-1", service: "s3" };
    let sts = AwsKey { id: "ASIAEXAMPLE13".into(), secret: canary(), session_token: Some(canary()), region: "us-east-1", service: "sts" };
    let s3_json = json!({"access_key_id": s3.id, "secret_access_key": s3.secret, "session_token": s3.session_token});
    let s3_file = dir.file("s3.json", s3_json.to_string().as_bytes(), 0o600);
    let wrong_file = dir.file("wrong.json", json!({"access_key_id": s3.id, "secret_access_key": canary()}).to_string().as_bytes(), 0o600);
    let plain = AwsKey { session_token: None, ..s3.clone() };
    let plain_file = dir.file("plain.json", json!({"access_key_id": plain.id, "secret_access_key": plain.secret}).to_string().as_bytes(), 0o600);
    // `aws configure export-credentials --format process` output: pretty-printed.
    let cli = serde_json::to_string_pretty(&json!({
        "Version": 1, "AccessKeyId": sts.id, "SecretAccessKey": sts.secret,
        "SessionToken": sts.session_token, "Expiration": "2026-12-03T00:00:00+00:00"
    }))
    .unwrap();
    assert!(cli.contains('\n'));
    let sts_file = dir.file("sts.json", format!("{cli}\n").as_bytes(), 0o600);
    let cred = |file: &Path, region: &str, service: &str, unsigned: bool, paths: &[&str]| {
        let mut section = json!({"region": region, "service": service});
        if unsigned {
            section["unsigned_payload"] = json!(true);
        }
        json!({"source": {"file": file.display().to_string()}, "inject": {"aws_sigv4": section}, "hosts": [host], "paths": paths})
    };
    let policy = json!({
        "credentials": {
            "s3": cred(&s3_file, "eu-west-1", "s3", false, &["/bucket/*", "/echo/*"]),
            "s3wrong": cred(&wrong_file, "eu-west-1", "s3", false, &["/wrong/*"]),
            "s3unsigned": cred(&plain_file, "eu-west-1", "s3", true, &["/unsigned/*"]),
            "sts": cred(&sts_file, "us-east-1", "sts", false, &["/sts/*"])
        },
        "http": {"allow": [{"hosts": [host], "methods": ["*"]}]},
        "audit": {"path": dir.join("audit.jsonl")}
    });
    let policy = dir.file("policy.json", policy.to_string().as_bytes(), 0o600);
    Aws { dir, policy, s3, sts }
}

// ---------------------------------------------------------------------------------------
// SigV4

#[test]
fn sigv4_requests_verify_at_an_independent_server_and_a_wrong_key_gets_403() {
    let server = TestServer::start();
    let st = aws_setup(server.port);
    let base = server.base();
    let seen = Arc::new(Mutex::new(Vec::new()));
    verified_route(&server, "/bucket/photos/my%20cat%2Bdog.jpg", st.s3.clone(), seen.clone());
    verified_route(&server, "/bucket/upload.txt", st.s3.clone(), seen.clone());
    verified_route(&server, "/wrong/x", AwsKey { session_token: None, ..st.s3.clone() }, seen.clone());
    verified_route(&server, "/unsigned/obj", AwsKey { session_token: None, ..st.s3.clone() }, seen.clone());
    verified_route(&server, "/sts/", st.sts.clone(), seen.clone());
    let mut s = ready(Launch::mcp(&st.policy, &[]));

    // S3 GET object: an encoded key, a query (sorted and re-encoded by the verifier), an
    // agent header with inner spaces (collapsed in the canonical form).
    let r = s.tool(
        1,
        "http_request",
        json!({
            "method": "GET",
            "url": format!("{base}/bucket/photos/my%20cat%2Bdog.jpg?versionId=3%2F4&acl"),
            "query": {"response-content-type": "text/plain; charset=utf-8"},
            "headers": {"X-Custom": "a   b", "Range": "bytes=0-9"}
        }),
    );
    assert_eq!(sc(&r)["status"], 200, "{r}");
    let signed = sc(&r)["json"]["headers"].to_string();
    assert!(signed.contains("x-amz-security-token") && signed.contains("x-amz-content-sha256"), "{r}");

    // PUT with a body: its SHA-256 is signed.
    let r = s.tool(
        2,
        "http_request",
        json!({"method": "PUT", "url": format!("{base}/bucket/upload.txt"), "body": "hello, bucket\n", "headers": {"Content-Type": "text/plain"}}),
    );
    assert_eq!(sc(&r)["status"], 200, "{r}");
    let put = server.requests().into_iter().rev().find(|q| q.target == "/bucket/upload.txt").expect("the PUT arrived");
    assert_eq!(put.header("x-amz-content-sha256"), Some(sha_hex(b"hello, bucket\n").as_str()));

    // The operator asked for UNSIGNED-PAYLOAD.
    let r = s.tool(3, "http_request", json!({"method": "POST", "url": format!("{base}/unsigned/obj"), "body": "streamed"}));
    assert_eq!(sc(&r)["status"], 200, "{r}");
    let post = server.requests().into_iter().rev().find(|q| q.target == "/unsigned/obj").unwrap();
    assert_eq!(post.header("x-amz-content-sha256"), Some("UNSIGNED-PAYLOAD"));

    // An STS session (service sts: the path is encoded twice), from pretty-printed JSON.
    let r = s.tool(
        4,
        "http_request",
        json!({
            "method": "POST", "url": format!("{base}/sts/"),
            "headers": {"Content-Type": "application/x-www-form-urlencoded"},
            "body": "Action=GetCallerIdentity&Version=2011-06-15"
        }),
    );
    assert_eq!(sc(&r)["status"], 200, "{r}");

    // A wrong secret key: the verifier says so.
    let r = s.tool(5, "http_request", json!({"method": "GET", "url": format!("{base}/wrong/x")}));
    assert_eq!(sc(&r)["status"], 403, "{r}");
    assert!(sc(&r)["json"]["why"].as_str().unwrap_or_default().contains("signature mismatch"), "{r}");

    let run = s.finish();
    run.assert_exit(0);
    let out = String::from_utf8_lossy(&run.stdout);
    let sigs = seen.lock().unwrap().clone();
    assert_eq!(sigs.len(), 4, "four requests verified");
    for sig in &sigs {
        assert!(!out.contains(sig.as_str()) && !run.stderr.contains(sig.as_str()), "a signature reached the agent or the log");
    }
    // The journal never holds the secret key, the session token or a signature.
    let journal = std::fs::read_to_string(st.dir.path.join("audit.jsonl")).unwrap();
    for hidden in sigs.iter().chain([&st.s3.secret, st.s3.session_token.as_ref().unwrap(), &st.sts.secret, st.sts.session_token.as_ref().unwrap()]) {
        assert!(!journal.contains(hidden.as_str()), "the journal holds a secret");
    }
}

#[test]
fn sigv4_agent_authorization_and_x_amz_names_are_bad_arguments_and_nothing_is_sent() {
    let server = TestServer::start();
    let st = aws_setup(server.port);
    let base = server.base();
    let mut s = ready(Launch::mcp(&st.policy, &[]));
    let tries = [
        json!({"method": "GET", "url": format!("{base}/bucket/k"), "headers": {"Authorization": "AWS4-HMAC-SHA256 Credential=mine"}}),
        json!({"method": "GET", "url": format!("{base}/bucket/k"), "headers": {"X-Amz-Date": "20260101T000000Z"}}),
        json!({"method": "GET", "url": format!("{base}/bucket/k"), "headers": {"x-amz-security-token": "forged"}}),
        json!({"method": "GET", "url": format!("{base}/bucket/k"), "headers": {"X-AMZ-Content-Sha256": "UNSIGNED-PAYLOAD"}}),
        json!({"method": "GET", "url": format!("{base}/bucket/k?X-Amz-Signature=00")}),
        json!({"method": "GET", "url": format!("{base}/bucket/k?X%2DAmz-Credential=AKID")}),
        json!({"method": "GET", "url": format!("{base}/bucket/k"), "query": {"X-Amz-Credential": "AKID"}}),
        json!({"method": "GET", "url": format!("{base}/bucket/k"), "credential": "s3", "query": {"x-amz-expires": "60"}}),
    ];
    server.settle();
    let before = server.accepted();
    for (i, args) in tries.iter().enumerate() {
        let r = s.tool(10 + i as i64, "http_request", args.clone());
        assert_eq!(tool_error_code(&r), Some("SP_BAD_ARGUMENTS"), "{args}: {r}");
        // `Authorization` is refused for every request (tools.rs); the rest by the signer's rule.
        let msg = sc(&r)["error"]["message"].as_str().unwrap_or_default();
        assert!((msg.contains("aws_sigv4") && msg.contains("\"s3\"")) || (i == 0 && msg.contains("set by the gateway")), "{args}: {msg}");
    }
    server.settle();
    assert_eq!(server.accepted(), before, "a refused request reached the server");
    let run = s.finish();
    run.assert_exit(0);
    assert!(run.stderr.contains("rejections=8 [bad_arguments=8]"), "{}", run.stderr);
    let journal = rows(&st.dir.path.join("audit.jsonl"));
    let rejects: Vec<&Value> = journal.iter().filter(|r| r["kind"] == "reject").collect();
    assert_eq!(rejects.len(), 8);
    assert!(rejects.iter().all(|r| r["code"] == "SP_BAD_ARGUMENTS" && r["decision"] == "bad_arguments"), "{rejects:?}");
    assert!(journal.iter().all(|r| r["kind"] != "intent"), "nothing was meant to run");
}

#[test]
fn sigv4_echo_never_reveals_the_signature_secret_key_or_session_token() {
    let server = TestServer::start();
    let st = aws_setup(server.port);
    server.echo_route("/echo/headers", Echo::Json);
    server.echo_route("/echo/binary", Echo::Binary);
    // S3's SignatureDoesNotMatch error quotes the signature it got; here also base64'd.
    server.handle("/echo/s3-error", |r| {
        let sig = r.header("authorization").unwrap_or_default().rsplit("Signature=").next().unwrap_or_default().to_owned();
        let b64 = base64::engine::general_purpose::STANDARD.encode(&sig);
        let mut reply =
            Reply::text(403, &format!("<Error><Code>SignatureDoesNotMatch</Code><SignatureProvided>{sig}</SignatureProvided><B64>{b64}</B64></Error>"));
        reply.headers.push(("X-Sig".into(), sig.to_uppercase()));
        reply
    });
    let mut s = ready(Launch::mcp(&st.policy, &[]));
    let mut id = 0;
    // Twenty rounds: more signatures than the executor keeps (8), the newest always covered.
    for _ in 0..20 {
        for path in ["/echo/headers", "/echo/binary", "/echo/s3-error"] {
            id += 1;
            let r = s.tool(id, "http_request", json!({"method": "GET", "url": format!("{}{path}", server.base())}));
            assert_eq!(r["isError"], false, "{r}");
            if path == "/echo/s3-error" {
                let body = sc(&r)["body"].as_str().unwrap_or_default();
                assert!(body.contains("<SignatureProvided>[REDACTED:s3]</SignatureProvided><B64>[REDACTED:s3]</B64>"), "{r}");
                assert_eq!(sc(&r)["headers"]["x-sig"], "[REDACTED:s3]", "{r}");
            }
        }
    }
    let run = s.finish();
    run.assert_exit(0);
    let out = String::from_utf8_lossy(&run.stdout);
    let sent = server.requests();
    assert_eq!(sent.len(), 60);
    for q in &sent {
        let auth = q.header("authorization").expect("signed");
        let sig = auth.rsplit("Signature=").next().unwrap();
        assert_eq!(sig.len(), 64);
        assert!(!out.contains(sig), "the signature reached the agent: {out}");
        assert_eq!(q.header("x-amz-security-token"), st.s3.session_token.as_deref());
    }
    // The echo came back, redacted where it carried the credential (canaries: the run's
    // own check has already refused the secret key and session token on stdout/stderr).
    assert!(out.contains("[REDACTED:s3]"), "{out}");
    assert!(out.contains("AKIDEXAMPLE13"), "the key id is not a secret and stays readable: {out}");
}

#[test]
fn sigv4_source_that_is_not_credentials_json_is_sp_unavailable_and_never_quoted() {
    let server = TestServer::start();
    let dir = TempDir::new("sigv4-bad");
    let host = format!("127.0.0.1:{}", server.port);
    let key = canary();
    let sources = [
        ("colon", format!("AKIDEXAMPLE13:{key}")),
        ("nokey", json!({"access_key_id": "AKIDEXAMPLE13", "session_token": key}).to_string()),
        ("ctrl", format!("{{\"access_key_id\": \"AKIDEXAMPLE13\",\u{7}\"secret_access_key\": \"{key}\"}}")),
    ];
    let mut creds = serde_json::Map::new();
    for (name, text) in &sources {
        let file = dir.file(name, text.as_bytes(), 0o600);
        creds.insert(
            name.to_string(),
            json!({
                "source": {"file": file.display().to_string()},
                "inject": {"aws_sigv4": {"region": "eu-west-1", "service": "s3"}},
                "hosts": [host], "paths": [format!("/{name}/*")]
            }),
        );
    }
    let policy = json!({"credentials": creds, "http": {"allow": [{"hosts": [host]}]}, "audit": {"path": null}});
    let policy = dir.file("policy.json", policy.to_string().as_bytes(), 0o600);
    let mut s = ready(Launch::mcp(&policy, &[]));
    let want = [("colon", "aws credentials are not valid JSON"), ("nokey", "aws credentials lack \"secret_access_key\""), ("ctrl", "control characters")];
    for (i, (name, why)) in want.iter().enumerate() {
        let r = s.tool(i as i64 + 1, "http_request", json!({"method": "GET", "url": format!("{}/{name}/x", server.base())}));
        assert_eq!(tool_error_code(&r), Some("SP_UNAVAILABLE"), "{r}");
        let msg = sc(&r)["error"]["message"].as_str().unwrap_or_default();
        assert!(msg.contains(why) && msg.contains(&format!("{name:?}")), "{name}: {msg}");
    }
    s.finish().assert_exit(0);
    server.settle();
    assert_eq!(server.accepted(), 0, "nothing is sent unsigned");
}

// ---------------------------------------------------------------------------------------
// OAuth2

/// A token endpoint and an API on one loopback server.
struct Idp {
    client_id: String,
    client_secret: String,
    /// `expires_in` of the next token.
    lifetime_s: AtomicU64,
    /// Issued tokens and when the API stops accepting each.
    issued: Mutex<Vec<(String, Instant)>>,
    revoked: Mutex<HashSet<String>>,
    /// Every new token is revoked at once (an API that refuses them all).
    revoke_new: AtomicBool,
    fetches: AtomicUsize,
    api_calls: AtomicUsize,
}

impl Idp {
    fn start(server: &TestServer, lifetime_s: u64) -> Arc<Idp> {
        let idp = Arc::new(Idp {
            client_id: "sp-client-13".into(),
            client_secret: canary(),
            lifetime_s: AtomicU64::new(lifetime_s),
            issued: Mutex::new(Vec::new()),
            revoked: Mutex::new(HashSet::new()),
            revoke_new: AtomicBool::new(false),
            fetches: AtomicUsize::new(0),
            api_calls: AtomicUsize::new(0),
        });
        let i = idp.clone();
        server.handle("/oauth/token", move |r| i.token(r));
        for path in ["/api/data", "/api/echo"] {
            let i = idp.clone();
            let echo = path == "/api/echo";
            server.handle(path, move |r| i.api(r, echo));
        }
        idp
    }

    fn token(&self, r: &Recorded) -> Reply {
        self.fetches.fetch_add(1, Ordering::SeqCst);
        let basic = format!("Basic {}", base64::engine::general_purpose::STANDARD.encode(format!("{}:{}", self.client_id, self.client_secret)));
        let form = String::from_utf8_lossy(&r.body).into_owned();
        let mut fields: Vec<&str> = form.split('&').collect();
        fields.sort();
        if r.method != "POST" || r.header("authorization") != Some(basic.as_str()) {
            // A hostile endpoint: the description carries what the client sent.
            let sent = r.header("authorization").unwrap_or_default();
            return Reply::json(401, &json!({"error": "invalid_client", "error_description": sent}).to_string());
        }
        if fields != ["grant_type=client_credentials", "scope=read+write"] || r.header("content-type") != Some("application/x-www-form-urlencoded") {
            return Reply::json(400, &json!({"error": "invalid_request"}).to_string());
        }
        let token = canary();
        let lifetime = self.lifetime_s.load(Ordering::SeqCst);
        self.issued.lock().unwrap().push((token.clone(), Instant::now() + Duration::from_secs(lifetime)));
        if self.revoke_new.load(Ordering::SeqCst) {
            self.revoked.lock().unwrap().insert(token.clone());
        }
        Reply::json(200, &json!({"access_token": token, "token_type": "bearer", "expires_in": lifetime}).to_string())
    }

    fn api(&self, r: &Recorded, echo: bool) -> Reply {
        self.api_calls.fetch_add(1, Ordering::SeqCst);
        let presented = r.header("authorization").and_then(|a| a.strip_prefix("Bearer ")).unwrap_or_default().to_owned();
        let live = self.issued.lock().unwrap().iter().any(|(t, until)| *t == presented && Instant::now() < *until)
            && !self.revoked.lock().unwrap().contains(&presented);
        if !live {
            return Reply::json(401, r#"{"error":"invalid_token"}"#);
        }
        let mut reply = Reply::json(200, &json!({"ok": true, "echo": if echo { presented.clone() } else { String::new() }}).to_string());
        if echo {
            reply.headers.push(("X-Echo-Token".into(), presented));
        }
        reply
    }

    fn revoke_all(&self) {
        let issued = self.issued.lock().unwrap();
        self.revoked.lock().unwrap().extend(issued.iter().map(|(t, _)| t.clone()));
    }

    fn counts(&self) -> (usize, usize) {
        (self.fetches.load(Ordering::SeqCst), self.api_calls.load(Ordering::SeqCst))
    }
}

struct OAuth {
    dir: TempDir,
    policy: PathBuf,
    journal: PathBuf,
}

/// Credential `saas` (oauth2, scopes read and write, basic client auth) on `/api/*`,
/// its `client_id:client_secret` in a file; GET allowed on `/api/*`.
fn oauth_setup(port: u16, idp: &Idp, secret: &str) -> OAuth {
    oauth_setup_with(port, idp, secret, format!("http://127.0.0.1:{port}/oauth/token"), None)
}

/// [`oauth_setup`] with another token URL, and `ca_pem` as `http.ca_file` when given.
fn oauth_setup_with(port: u16, idp: &Idp, secret: &str, token_url: String, ca_pem: Option<&str>) -> OAuth {
    let dir = TempDir::new("oauth2");
    let host = format!("127.0.0.1:{port}");
    let source = dir.file("client", format!("{}:{secret}\n", idp.client_id).as_bytes(), 0o600);
    let journal = dir.path.join("audit.jsonl");
    let mut policy = json!({
        "credentials": {"saas": {
            "source": {"file": source.display().to_string()},
            "inject": {"oauth2": {"token_url": token_url, "scopes": ["read", "write"], "client_auth": "basic"}},
            "hosts": [host], "paths": ["/api/*"]
        }},
        "http": {"allow": [{"hosts": [host], "methods": ["GET"], "paths": ["/api/*"]}]},
        "audit": {"path": journal.display().to_string()}
    });
    if let Some(pem) = ca_pem {
        policy["http"]["ca_file"] = json!(dir.file("ca.pem", pem.as_bytes(), 0o644).display().to_string());
    }
    let policy = dir.file("policy.json", policy.to_string().as_bytes(), 0o600);
    OAuth { dir, policy, journal }
}

fn api_get(s: &mut Session, id: i64, server: &TestServer, path: &str) -> Value {
    s.tool(id, "http_request", json!({"method": "GET", "url": format!("{}{path}", server.base())}))
}

#[test]
fn oauth2_first_call_fetches_second_reuses_and_after_expiry_a_new_token_is_fetched() {
    let server = TestServer::start();
    let idp = Idp::start(&server, 2);
    let st = oauth_setup(server.port, &idp, &idp.client_secret);
    let mut s = ready(Launch::mcp(&st.policy, &[]));
    let t0 = Instant::now();
    let r = api_get(&mut s, 1, &server, "/api/data");
    assert_eq!(sc(&r)["status"], 200, "{r}");
    assert_eq!(idp.counts(), (1, 1), "the first call fetches a token");
    let r = api_get(&mut s, 2, &server, "/api/data");
    assert_eq!(sc(&r)["status"], 200, "{r}");
    assert!(t0.elapsed() < Duration::from_millis(1800), "too slow to test reuse: the token went stale");
    assert_eq!(idp.counts(), (1, 2), "the second call reuses the token");
    // expires_in 2: used until 1.8 s after the fetch was sent; the API takes it until 2 s.
    std::thread::sleep(Duration::from_millis(2100).saturating_sub(t0.elapsed()));
    let r = api_get(&mut s, 3, &server, "/api/data");
    assert_eq!(sc(&r)["status"], 200, "{r}");
    assert_eq!(idp.counts(), (2, 3), "after expiry a new token is fetched before the call, no 401 on the way");
    s.finish().assert_exit(0);
    let tokens: Vec<Value> = rows(&st.journal).into_iter().filter(|r| r["kind"] == "token").collect();
    assert_eq!(tokens.len(), 2, "{tokens:?}");
}

#[test]
fn oauth2_a_revoked_token_costs_exactly_one_refresh_and_one_retry() {
    let server = TestServer::start();
    let idp = Idp::start(&server, 3600);
    let st = oauth_setup(server.port, &idp, &idp.client_secret);
    let mut s = ready(Launch::mcp(&st.policy, &[]));
    assert_eq!(sc(&api_get(&mut s, 1, &server, "/api/data"))["status"], 200);
    assert_eq!(idp.counts(), (1, 1));
    idp.revoke_all();
    let r = api_get(&mut s, 2, &server, "/api/data");
    assert_eq!(sc(&r)["status"], 200, "{r}");
    assert_eq!(idp.counts(), (2, 3), "401 with the cached token: one fetch, one retry");
    // Now every token the IdP issues is refused by the API: still one refresh per call.
    idp.revoke_new.store(true, Ordering::SeqCst);
    idp.revoke_all();
    let r = api_get(&mut s, 3, &server, "/api/data");
    assert_eq!((r["isError"].clone(), sc(&r)["status"].clone()), (json!(false), json!(401)), "the API's 401 is the answer: {r}");
    assert_eq!(idp.counts(), (3, 5), "exactly one refresh and one retry, no loop");
    let r = api_get(&mut s, 4, &server, "/api/data");
    assert_eq!(sc(&r)["status"], 401, "{r}");
    assert_eq!(idp.counts(), (4, 7));
    s.finish().assert_exit(0);
    let all = rows(&st.journal);
    assert_eq!(all.iter().filter(|r| r["kind"] == "token").count(), 4);
}

#[test]
fn oauth2_echoing_api_never_reveals_the_token_and_the_journal_has_token_rows_without_it() {
    let server = TestServer::start();
    let idp = Idp::start(&server, 3600);
    let st = oauth_setup(server.port, &idp, &idp.client_secret);
    let mut s = ready(Launch::mcp(&st.policy, &[]));
    let r = api_get(&mut s, 1, &server, "/api/echo");
    assert_eq!(sc(&r)["status"], 200, "{r}");
    assert_eq!(sc(&r)["json"]["echo"], "[REDACTED:saas]", "{r}");
    assert_eq!(sc(&r)["headers"]["x-echo-token"], "[REDACTED:saas]", "{r}");
    let inv = s.tool(2, "sp_inventory", json!({}));
    let cred = &sc(&inv)["http"]["credentials"][0];
    assert_eq!((cred["name"].clone(), cred["scheme"].clone(), cred["scopes"].clone()), (json!("saas"), json!("oauth2"), json!(["read", "write"])), "{inv}");
    let run = s.finish();
    run.assert_exit(0);
    let issued: Vec<String> = idp.issued.lock().unwrap().iter().map(|(t, _)| t.clone()).collect();
    assert_eq!(issued.len(), 1);
    let out = String::from_utf8_lossy(&run.stdout);
    let text = std::fs::read_to_string(&st.journal).unwrap();
    for hidden in issued.iter().chain([&idp.client_secret]) {
        assert!(!out.contains(hidden.as_str()), "a token reached the agent");
        assert!(!text.contains(hidden.as_str()), "a token or the client secret reached the journal");
    }
    let all = rows(&st.journal);
    let kinds: Vec<&str> = all.iter().filter_map(|r| r["kind"].as_str()).collect();
    let at = |k: &str| kinds.iter().position(|x| *x == k).unwrap_or_else(|| panic!("no {k} row: {kinds:?}"));
    assert!(at("intent") < at("token") && at("token") < at("result"), "intent, token, result: {kinds:?}");
    let token = &all[at("token")];
    assert_eq!(token["target"], format!("POST http://127.0.0.1:{}/oauth/token", server.port), "{token}");
    assert_eq!((token["decision"].clone(), token["credential"].clone()), (json!("ok"), json!("saas")), "{token}");
    assert_eq!(token["reason"], "expires_in 3600 s", "{token}");
    // The chain holds with the new kind, and the readers show it.
    let j = st.journal.display().to_string();
    let verify = run_sp(&["audit", "verify", &j], &[], b"");
    assert_eq!(verify.code(), Some(0), "{}", verify.context());
    let show = run_sp(&["audit", "show", &j], &[], b"");
    assert_eq!(show.code(), Some(0), "{}", show.context());
    assert!(String::from_utf8_lossy(&show.stdout).contains("token"), "{}", show.context());
    let tail = run_sp(&["audit", "tail", &j, "-n", "50", "--json"], &[], b"");
    assert!(String::from_utf8_lossy(&tail.stdout).contains("\"kind\":\"token\""), "{}", tail.context());
}

#[test]
fn oauth2_token_endpoint_refusal_is_sp_upstream_without_any_secret() {
    let server = TestServer::start();
    let idp = Idp::start(&server, 3600);
    let wrong = canary();
    let st = oauth_setup(server.port, &idp, &wrong);
    let mut s = ready(Launch::mcp(&st.policy, &[]));
    let r = api_get(&mut s, 1, &server, "/api/data");
    assert_eq!(tool_error_code(&r), Some("SP_UPSTREAM"), "{r}");
    let msg = sc(&r)["error"]["message"].as_str().unwrap_or_default();
    assert!(msg.contains("HTTP 401") && msg.contains("invalid_client") && msg.contains("\"saas\""), "{msg}");
    assert_eq!(idp.counts(), (1, 0), "no API call without a token");
    s.finish().assert_exit(0);
    let all = rows(&st.journal);
    let token: Vec<&Value> = all.iter().filter(|r| r["kind"] == "token").collect();
    assert_eq!(token.len(), 1);
    assert_eq!((token[0]["decision"].clone(), token[0]["code"].clone()), (json!("error"), json!("SP_UPSTREAM")), "{:?}", token[0]);
    let text = std::fs::read_to_string(&st.journal).unwrap();
    assert!(!text.contains(&wrong), "the client secret reached the journal");
}

#[test]
fn oauth2_agent_authorization_is_refused_and_no_token_is_fetched() {
    let server = TestServer::start();
    let idp = Idp::start(&server, 3600);
    let st = oauth_setup(server.port, &idp, &idp.client_secret);
    let mut s = ready(Launch::mcp(&st.policy, &[]));
    server.settle();
    let before = server.accepted();
    let r = s.tool(1, "http_request", json!({"method": "GET", "url": format!("{}/api/data", server.base()), "headers": {"Authorization": "Bearer mine"}}));
    assert_eq!(tool_error_code(&r), Some("SP_BAD_ARGUMENTS"), "{r}");
    assert!(sc(&r)["error"]["message"].as_str().unwrap_or_default().contains("\"Authorization\" is set by the gateway"), "{r}");
    server.settle();
    assert_eq!(server.accepted(), before);
    assert_eq!(idp.counts(), (0, 0));
    s.finish().assert_exit(0);
    drop(st.dir);
}

#[test]
fn oauth2_token_comes_over_verified_tls_and_an_untrusted_endpoint_gets_no_request() {
    let ca = support::tls::pki("sp test CA 13");
    let server = support::tls::https_server(&ca);
    let idp = Idp::start(&server, 3600);
    let token_url = format!("https://127.0.0.1:{}/oauth/token", server.port);
    let base = format!("https://127.0.0.1:{}", server.port);
    let st = oauth_setup_with(server.port, &idp, &idp.client_secret, token_url.clone(), Some(&ca.ca_pem));
    let mut s = ready(Launch::mcp(&st.policy, &[]));
    let r = s.tool(1, "http_request", json!({"method": "GET", "url": format!("{base}/api/data")}));
    assert_eq!(sc(&r)["status"], 200, "{r}");
    assert_eq!(idp.counts(), (1, 1));
    s.finish().assert_exit(0);
    // The same endpoint under another CA: the handshake fails, no token request is made.
    let other = support::tls::pki("another CA");
    let st = oauth_setup_with(server.port, &idp, &idp.client_secret, token_url, Some(&other.ca_pem));
    let mut s = ready(Launch::mcp(&st.policy, &[]));
    let r = s.tool(1, "http_request", json!({"method": "GET", "url": format!("{base}/api/data")}));
    assert_eq!(tool_error_code(&r), Some("SP_UNAVAILABLE"), "{r}");
    assert!(sc(&r)["error"]["message"].as_str().unwrap_or_default().contains("TLS failed"), "{r}");
    assert_eq!(idp.counts(), (1, 1), "nothing reached the token endpoint or the API");
    s.finish().assert_exit(0);
    let token: Vec<Value> = rows(&st.journal).into_iter().filter(|r| r["kind"] == "token").collect();
    assert_eq!((token.len(), token[0]["code"].clone()), (1, json!("SP_UNAVAILABLE")), "{token:?}");
}

#[test]
fn oauth2_token_url_at_a_metadata_address_is_blocked_and_nothing_is_sent() {
    let server = TestServer::start();
    let idp = Idp::start(&server, 3600);
    let st = oauth_setup_with(server.port, &idp, &idp.client_secret, "https://169.254.169.254/latest/api/token".into(), None);
    let mut s = ready(Launch::mcp(&st.policy, &[]));
    server.settle();
    let before = server.accepted();
    let r = api_get(&mut s, 1, &server, "/api/data");
    assert_eq!(tool_error_code(&r), Some("SP_BLOCKED"), "{r}");
    server.settle();
    assert_eq!(server.accepted(), before, "the API was called without a token");
    s.finish().assert_exit(0);
    let token: Vec<Value> = rows(&st.journal).into_iter().filter(|r| r["kind"] == "token").collect();
    assert_eq!(token.len(), 1, "{token:?}");
    assert_eq!((token[0]["decision"].clone(), token[0]["code"].clone()), (json!("error"), json!("SP_BLOCKED")), "{token:?}");
    assert_eq!(token[0]["target"], "POST https://169.254.169.254/latest/api/token");
}

// ---------------------------------------------------------------------------------------
// sp check and sp_inventory

#[test]
fn check_validates_and_prints_both_schemes_and_names_the_bad_field() {
    let dir = TempDir::new("cred-check");
    // Read by `sp check` (and held to the 8-byte minimum, issue #20), not parsed.
    let source = dir.file("s", b"x-placeholder", 0o600).display().to_string();
    let write = |name: &str, inject: Value| {
        let policy = json!({
            "credentials": {"c": {"source": {"file": source}, "inject": inject, "hosts": ["api.example.com"]}},
            "http": {"allow": [{"hosts": ["api.example.com"]}]},
            "audit": {"path": null}
        });
        dir.file(name, policy.to_string().as_bytes(), 0o600).display().to_string()
    };
    let good = [
        (json!({"aws_sigv4": {"region": "eu-west-1", "service": "s3"}}), "inject: aws_sigv4 region eu-west-1 service s3, body hashed"),
        (json!({"aws_sigv4": {"region": "us-east-1", "service": "s3", "unsigned_payload": true}}), "UNSIGNED-PAYLOAD"),
        (
            json!({"oauth2": {"token_url": "https://auth.example/oauth/token", "scopes": ["read"], "client_auth": "body", "audience": "https://api.example"}}),
            "inject: oauth2 client credentials from https://auth.example/oauth/token (client_auth body), scopes read, audience https://api.example",
        ),
    ];
    for (i, (inject, want)) in good.iter().enumerate() {
        let p = write(&format!("good{i}.json"), inject.clone());
        let run = run_sp(&["check", "--config", &p], &[], b"");
        assert_eq!(run.code(), Some(0), "{inject}: {}", run.context());
        assert!(String::from_utf8_lossy(&run.stdout).contains(want), "{inject}: {}", String::from_utf8_lossy(&run.stdout));
    }
    let bad = [
        (json!({"aws_sigv4": {"region": "EU_WEST", "service": "s3"}}), "credentials.c.inject.aws_sigv4.region"),
        (json!({"aws_sigv4": {"region": "eu-west-1"}}), "credentials.c.inject.aws_sigv4.service"),
        (json!({"aws_sigv4": {"region": "eu-west-1", "service": "s3", "regoin": "x"}}), "credentials.c.inject.aws_sigv4.regoin"),
        (json!({"aws_sigv4": []}), "credentials.c.inject.aws_sigv4:"),
        (json!({"oauth2": {"token_url": "http://auth.example/token"}}), "credentials.c.inject.oauth2.token_url: must be https"),
        (json!({"oauth2": {"token_url": "https://u:p@auth.example/token"}}), "credentials.c.inject.oauth2.token_url"),
        (json!({"oauth2": {"token_url": "https://auth.example/token", "scopes": ["a b"]}}), "credentials.c.inject.oauth2.scopes[0]"),
        (json!({"oauth2": {"token_url": "https://auth.example/token", "client_auth": "jwt"}}), "credentials.c.inject.oauth2.client_auth"),
        (json!({"oauth2": {}}), "credentials.c.inject.oauth2.token_url"),
    ];
    for (i, (inject, field)) in bad.iter().enumerate() {
        let p = write(&format!("bad{i}.json"), inject.clone());
        let run = run_sp(&["check", "--config", &p], &[], b"");
        assert_ne!(run.code(), Some(0), "{inject} was accepted");
        assert!(run.stderr.contains(field), "{inject}: want {field:?} in {}", run.stderr);
    }
}

#[test]
fn inventory_shows_the_signing_scope_and_never_a_key() {
    let server = TestServer::start();
    let st = aws_setup(server.port);
    let mut s = ready(Launch::mcp(&st.policy, &[]));
    let inv = s.tool(1, "sp_inventory", json!({}));
    let creds = sc(&inv)["http"]["credentials"].as_array().unwrap().clone();
    let s3 = creds.iter().find(|c| c["name"] == "s3").expect("s3 listed");
    assert_eq!((s3["scheme"].clone(), s3["region"].clone(), s3["service"].clone()), (json!("aws_sigv4"), json!("eu-west-1"), json!("s3")), "{inv}");
    let text = inv.to_string();
    for hidden in [&st.s3.id, &st.sts.id, &st.dir.path.display().to_string()] {
        assert!(!text.contains(hidden.as_str()), "inventory shows {hidden}: {inv}");
    }
    s.finish().assert_exit(0);
    server.settle();
    assert_eq!(server.accepted(), 0);
}
