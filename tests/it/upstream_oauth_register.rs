//! Dynamic client registration (RFC 7591; MCP 2025-11-25, basic/authorization) by
//! `sp oauth login` when the policy's `auth.oauth` has no `client_id`, through the built
//! binary against the loopback authorization server of `tests/it/upstream_oauth.rs`,
//! which offers a `registration_endpoint`.
//!
//! Attacks tried (each held):
//! - a registration answer cut in the middle, one larger than 64 KiB, one that makes
//!   `sp` a confidential client with a secret: refused with the reason, before any
//!   authorization address is shown or code exchanged, nothing stored, the secret never
//!   on stderr;
//! - a registration endpoint over plain http to a non-loopback host: refused before
//!   any request (the server saw no registration);
//! - no registration endpoint and no client id: an error that says to set `client_id`.
#![allow(clippy::disallowed_methods, reason = "tests start sp and its fixtures")]

use crate::upstream_oauth::Fixture;

use serde_json::json;

use crate::support::process::{Run, Session};

/// `sp oauth login t` with nothing on stdin (it must fail before it asks).
fn failed_login(f: &Fixture) -> Run {
    let run = f.launch(&["oauth", "login", "t", "-c", &f.config.display().to_string()]).run(b"");
    run.assert_exit(1);
    assert!(run.stdout.is_empty(), "{}", run.context());
    assert!(!run.stderr.contains("Open this address"), "no authorization address: {}", run.context());
    run
}

#[test]
fn without_a_client_id_login_registers_once_and_the_client_is_reused() {
    let f = Fixture::with("oauth-dcr", json!({"client_id": null}));
    // Stale at once: sp mcp refreshes with the registered client id.
    f.server.control(json!({"expires_in": 1}));
    let (status, _, stderr) = f.login(str::to_owned);
    assert!(status.success(), "sp oauth login failed:\n{stderr}");
    assert!(stderr.contains("Registered sp as client \"dyn-"), "{stderr}");
    let state = f.server.state();
    assert_eq!(state["registered"], json!(1), "{state}");
    assert_eq!(
        state["registrations"][0],
        json!({"client_name": "sp", "redirect_uris": ["http://127.0.0.1/callback"], "grant_types": ["authorization_code", "refresh_token"],
               "response_types": ["code"], "token_endpoint_auth_method": "none"}),
        "a public client for the code grant, redirected where the login waits"
    );
    let first = f.entry();
    let client = first["client_id"].as_str().unwrap().to_owned();
    assert!(client.starts_with("dyn-"), "{first}");
    assert_eq!(first["registered_redirect_uri"], json!("http://127.0.0.1/callback"));
    // The second login uses the registered client: no new registration.
    let (status, _, stderr) = f.login(str::to_owned);
    assert!(status.success(), "the second sp oauth login failed:\n{stderr}");
    assert!(!stderr.contains("Registered sp"), "{stderr}");
    let state = f.server.state();
    assert_eq!((state["registered"].as_u64(), state["pkce_ok"].as_u64()), (Some(1), Some(2)), "{state}");
    assert_eq!(f.entry()["client_id"], json!(client));
    // sp mcp refreshes with it (the server takes only a client it registered).
    f.server.control(json!({"expires_in": 3600}));
    let mut s = Session::start(f.mcp());
    s.ready("2025-06-18");
    let r = s.tool(1, "t_whoami", json!({}));
    assert!(r["content"][0]["text"].as_str().unwrap().starts_with("calls 1;"), "{r}");
    let _ = s.finish();
    assert_eq!(f.server.state()["refresh_ok"], json!(1));
}

#[test]
fn a_bad_registration_answer_is_refused_and_nothing_is_stored() {
    let f = Fixture::with("oauth-dcr-bad", json!({"client_id": null}));
    let cases = [
        ("malformed", "the registration answer is not JSON (or names a member twice)"),
        ("oversized", "the registration answer is larger than 65536 bytes"),
        (
            "confidential",
            "the authorization server registered a confidential client (token_endpoint_auth_method is not \"none\"): sp is a public client only",
        ),
    ];
    for (i, (mode, why)) in cases.into_iter().enumerate() {
        f.server.control(json!({"register": mode}));
        let run = failed_login(&f);
        let want = format!("sp: oauth login t: client registration failed: {}/register: {why}", f.server.base());
        assert!(run.stderr.contains(&want), "{mode}: {}", run.context());
        assert!(!run.stderr.contains("sec-"), "{mode}: the client secret is never shown: {}", run.context());
        let state = f.server.state();
        assert_eq!(state["registered"], json!(i + 1), "{mode}: {state}");
        assert_eq!(state["token"], json!([]), "{mode}: no code exchanged");
        assert!(!f.store().exists(), "{mode}: nothing stored");
    }
}

#[test]
fn no_registration_endpoint_and_no_client_id_says_to_set_client_id() {
    let f = Fixture::with("oauth-dcr-none", json!({"client_id": null}));
    f.server.control(json!({"registration_endpoint": null}));
    let run = failed_login(&f);
    let want = format!(
        "client registration failed: auth.oauth.client_id is not set and the authorization server {}/ offers no registration_endpoint (dynamic client registration): register sp there as a public client and set auth.oauth.client_id",
        f.server.base()
    );
    assert!(run.stderr.contains(&want), "{}", run.context());
    assert_eq!(f.server.state()["registered"], json!(0));
    assert!(!f.store().exists());
}

#[test]
fn a_registration_endpoint_that_is_not_https_is_refused_before_any_request() {
    let f = Fixture::with("oauth-dcr-http", json!({"client_id": null}));
    f.server.control(json!({"registration_endpoint": "http://sp-test.invalid/register"}));
    let run = failed_login(&f);
    let want =
        "client registration failed: the authorization server's metadata: its registration_endpoint is not an https URL (http only to a loopback host)";
    assert!(run.stderr.contains(want), "{}", run.context());
    assert_eq!(f.server.state()["registered"], json!(0));
    assert!(!f.store().exists());
}
