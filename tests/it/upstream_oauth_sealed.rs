//! The OAuth token store encrypted with `systemd-creds` (issue 33 §2,
//! `auth.oauth.store`), through the built binary and the real `/usr/bin/systemd-creds`,
//! against the loopback authorization server and MCP server of
//! `tests/it/upstream_oauth.rs`. Without a working systemd-creds (not installed, or not
//! root on systemd < 256) each test says SKIPPED, and fails under `CI`.
//!
//! Attacks tried (each held):
//! - reading the file on disk for the tokens: after the login and after a refresh it is
//!   the `sp-oauth systemd-creds 1` line and a base64 blob, with no token and no JSON;
//! - one character of the blob changed on disk: `SP_AUTH` "cannot be decrypted", the
//!   upstream never called, no token on stdout, stderr or in the journal;
//! - a blob sealed under another credential name swapped in: refused the same way;
//! - systemd-creds taken away (`SP_TEST_SYSTEMD_CREDS=missing`) with
//!   `"store": "systemd-creds"`: the login stops before any token request, a session
//!   answers `SP_AUTH` naming `auth.oauth.store`, nothing is written in plain;
//! - a plain store from before encryption: used as it is, and encrypted by the next
//!   refresh (nothing lost, no new login).
#![allow(clippy::disallowed_methods, reason = "tests start sp, its fixtures and systemd-creds")]

use crate::support;
use crate::upstream_oauth::{store_plaintext, tokens_of, Fixture};

use std::io::Write as _;
use std::process::{Command, Stdio};

use serde_json::json;

use support::process::{tool_call, tool_error_code, Session};

const MAGIC: &[u8] = b"sp-oauth systemd-creds 1\n";

/// Whether systemd-creds works here with the host key (what `sp` uses); says SKIPPED
/// otherwise, and fails under CI.
fn systemd_creds_works() -> bool {
    let works = std::path::Path::new("/usr/bin/systemd-creds").exists() && seal_as("probe", b"x").is_some();
    if !works {
        assert!(std::env::var_os("CI").is_none(), "/usr/bin/systemd-creds is missing or does not work for this user under CI");
        eprintln!("SKIPPED: /usr/bin/systemd-creds is missing or cannot use the host key as this user");
    }
    works
}

/// `plain` sealed under credential name `name`, as a store file would hold it.
fn seal_as(name: &str, plain: &[u8]) -> Option<Vec<u8>> {
    let mut child = Command::new("/usr/bin/systemd-creds")
        .args(["encrypt", &format!("--name={name}"), "--with-key=host", "-", "-"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .ok()?;
    child.stdin.take()?.write_all(plain).ok()?;
    let out = support::process::output_deadline(child, "systemd-creds encrypt");
    out.status.success().then(|| [MAGIC, &out.stdout].concat())
}

/// The file on disk is a sealed store holding none of `tokens` and no JSON.
fn assert_sealed(f: &Fixture, tokens: &[String]) {
    let raw = std::fs::read(f.store()).unwrap();
    let text = String::from_utf8_lossy(&raw);
    assert!(raw.starts_with(MAGIC), "the token store is encrypted:\n{text}");
    assert!(!text.contains('{') && !text.contains("access_token"), "no JSON on disk:\n{text}");
    f.no_token_in(tokens, &text, "the token store's bytes on disk");
}

#[test]
fn login_writes_an_encrypted_store_and_sp_mcp_refreshes_through_it() {
    if !systemd_creds_works() {
        return;
    }
    let f = Fixture::new("oauth-sealed");
    // Stale at once: sp mcp refreshes before its first request, and writes back.
    f.server.control(json!({"expires_in": 1}));
    let (status, stdout, stderr) = f.login(str::to_owned);
    assert!(status.success(), "sp oauth login failed:\n{stderr}");
    assert!(stdout.contains("(encrypted with systemd-creds)"), "{stdout}");
    let first = f.entry();
    let mut seen = tokens_of(&first);
    assert_eq!(seen.len(), 2, "{first}");
    assert_sealed(&f, &seen);
    f.server.control(json!({"expires_in": 3600}));
    let mut s = Session::start(f.mcp());
    s.ready("2025-06-18");
    let r = s.tool(1, "t_whoami", json!({}));
    assert!(r["content"][0]["text"].as_str().unwrap().starts_with("calls 1; you sent "), "{r}");
    let run = s.finish();
    let state = f.server.state();
    assert_eq!(state["token"], json!(["authorization_code", "refresh_token"]), "one refresh, from the encrypted store: {state}");
    let second = f.entry();
    assert_ne!(second["refresh_token"], first["refresh_token"], "the rotated refresh token is persisted");
    seen.extend(tokens_of(&second));
    assert_sealed(&f, &seen);
    f.no_token_in(&seen, &String::from_utf8_lossy(&run.stdout), "sp mcp's stdout");
    f.no_token_in(&seen, &run.stderr, "sp mcp's stderr");
    f.no_token_in(&seen, &f.journal(), "the journal");
}

#[test]
fn a_plain_store_from_before_is_used_and_encrypted_at_the_next_refresh() {
    if !systemd_creds_works() {
        return;
    }
    let mut f = Fixture::new("oauth-upgrade");
    // As on a host without systemd-creds: "auto" writes the plain file.
    f.env.push(("SP_TEST_SYSTEMD_CREDS".into(), "missing".into()));
    f.server.control(json!({"expires_in": 1}));
    let (status, stdout, stderr) = f.login(str::to_owned);
    assert!(status.success(), "sp oauth login failed:\n{stderr}");
    assert!(stdout.contains("(plain, mode 0600)"), "{stdout}");
    let raw = std::fs::read(f.store()).unwrap();
    assert!(raw.starts_with(b"{"), "plain JSON: {}", String::from_utf8_lossy(&raw));
    let mut seen = tokens_of(&f.entry());
    // systemd-creds is back: the plain store is read, the refresh writes it encrypted.
    f.env.clear();
    f.server.control(json!({"expires_in": 3600}));
    let mut s = Session::start(f.mcp());
    s.ready("2025-06-18");
    let r = s.tool(1, "t_whoami", json!({}));
    assert!(r["content"][0]["text"].as_str().unwrap().starts_with("calls 1;"), "{r}");
    let run = s.finish();
    assert_eq!(f.server.state()["refresh_ok"], json!(1), "the plain store's refresh token was used");
    seen.extend(tokens_of(&f.entry()));
    assert_sealed(&f, &seen);
    f.no_token_in(&seen, &run.stderr, "sp mcp's stderr");
    // And the next session reads the encrypted store without a refresh.
    let mut s = Session::start(f.mcp());
    s.ready("2025-06-18");
    assert!(s.tool(1, "t_whoami", json!({}))["content"][0]["text"].as_str().unwrap().starts_with("calls 2;"));
    let _ = s.finish();
    assert_eq!(f.server.state()["refresh_ok"], json!(1));
}

/// `"store": "systemd-creds"` without the program fails closed, naming the field. Runs
/// wherever the binary does (the program is hidden by the test hook).
#[test]
fn store_systemd_creds_without_the_program_fails_closed() {
    let mut f = Fixture::with("oauth-required", json!({"store": "systemd-creds"}));
    f.env.push(("SP_TEST_SYSTEMD_CREDS".into(), "missing".into()));
    let run = f.launch(&["oauth", "login", "t", "-c", &f.config.display().to_string()]).run(b"");
    run.assert_exit(1);
    let want = "auth.oauth.store is \"systemd-creds\" and /usr/bin/systemd-creds is not there";
    assert!(run.stderr.contains(want), "{}", run.context());
    assert!(run.stdout.is_empty(), "{}", run.context());
    assert_eq!(f.server.state()["token"], json!([]), "the login stopped before any token request");
    assert_eq!(f.server.state()["mcp_401"], json!(0), "and before discovery");
    assert!(!f.store().exists(), "nothing written");
    // A session: SP_AUTH with the same reason, the upstream never called.
    let mut s = Session::start(f.mcp());
    s.ready("2025-06-18");
    let r = s.call(&tool_call(1, "t_whoami", json!({})));
    assert_eq!(tool_error_code(&r["result"]), Some("SP_AUTH"), "{r}");
    assert!(r["result"]["content"][0]["text"].as_str().unwrap().contains(want), "{r}");
    let _ = s.finish();
    assert_eq!(f.server.state()["calls"], json!(0));
}

#[test]
fn an_encrypted_store_changed_on_disk_or_swapped_is_refused_without_a_token() {
    if !systemd_creds_works() {
        return;
    }
    let f = Fixture::new("oauth-tamper");
    f.logged_in();
    let seen = tokens_of(&f.entry());
    let good = std::fs::read(f.store()).unwrap();
    let plain = store_plaintext(&good);
    let mut changed = good.clone();
    let i = MAGIC.len() + (changed.len() - MAGIC.len()) / 2;
    changed[i] = if changed[i] == b'A' { b'B' } else { b'A' };
    let swapped = seal_as("sp-other", &plain).expect("systemd-creds encrypt under another name");
    for (what, bytes) in [("one character changed", changed), ("sealed under another name", swapped)] {
        std::fs::write(f.store(), &bytes).unwrap();
        let mut s = Session::start(f.mcp());
        s.ready("2025-06-18");
        let r = s.call(&tool_call(1, "t_whoami", json!({})));
        assert_eq!(tool_error_code(&r["result"]), Some("SP_AUTH"), "{what}: {r}");
        let text = r["result"]["content"][0]["text"].as_str().unwrap();
        let want = format!(
            "token store {}: it cannot be decrypted (tampered with, or from another host or key): systemd-creds decrypt: failed",
            f.store().display()
        );
        assert!(text.contains(&want) && text.contains("remove it, then sp oauth login again"), "{what}: {text}");
        let run = s.finish();
        f.no_token_in(&seen, &String::from_utf8_lossy(&run.stdout), "sp mcp's stdout");
        f.no_token_in(&seen, &run.stderr, "sp mcp's stderr");
        f.no_token_in(&seen, &f.journal(), "the journal");
        assert_eq!(f.server.state()["calls"], json!(0), "{what}: the upstream was never called");
    }
}
