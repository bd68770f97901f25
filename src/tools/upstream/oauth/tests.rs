//! The token store's format and the errors' texts (the process tests in
//! `tests/it/upstream_oauth.rs` drive the whole flow). Attacks tried (and what held):
//! a store entry with an unknown member, a wrong type, another version: corrupt, never
//! half read; Debug of an entry or an error never shows a token; an encrypted store
//! (systemd-creds) changed by one character, or sealed under another credential name
//! (a blob swapped in from elsewhere), is refused with the reason and no token; bytes
//! that are neither JSON nor a sealed store are corrupt, not guessed at.
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
        registered_redirect_uri: Some("http://127.0.0.1/callback".into()),
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

/// What systemd-creds says on stderr is shown as one short line of visible ASCII.
#[test]
fn systemd_creds_stderr_is_one_short_visible_line() {
    assert_eq!(
        sealed::last_line(b"Credential secret file is not on encrypted media.\nEmbedded credential name 'x' does not match, refusing.\n\n"),
        "Embedded credential name 'x' does not match, refusing."
    );
    assert_eq!(sealed::last_line(b"bad \x1b[31mred\x1b[0m \xff"), "bad ?[31mred?[0m ?");
    assert_eq!(sealed::last_line(&[b'a'; 5000]).len(), 200);
    assert_eq!(sealed::last_line(b""), "");
}

/// The bytes on disk: JSON (or nothing) is read in every mode, an encrypted store is
/// recognised by its first line, anything else is corrupt and named so; the plaintext
/// is never in the error.
#[test]
fn the_store_reads_json_or_a_sealed_blob_and_nothing_else() {
    use crate::policy::upstreams::StoreKind;
    let st = Store::new("/nonexistent/p.json.oauth".into(), StoreKind::File);
    let mut all = store::Tokens::new();
    all.insert("t".into(), entry());
    assert_eq!(st.decode(&store::render(&all)).unwrap(), all);
    assert_eq!(st.decode(b"\n").unwrap(), store::Tokens::new());
    let err = st.decode(b"Whxqht+dQJax1aZeCGLxmiAAAAABAAAADAAAABAAAACypq5").unwrap_err();
    assert_eq!(
        err.to_string(),
        "token store /nonexistent/p.json.oauth is corrupt (neither JSON nor a store encrypted with systemd-creds): fix or remove it, then sp oauth login again"
    );
    assert!(sealed::is_sealed(b"sp-oauth systemd-creds 1\nAAAA"));
    assert!(!sealed::is_sealed(b"{\"version\":1}"));
}

/// A real round trip when systemd-creds works here (root, systemd >= 250): the file's
/// bytes hold no token and no JSON; a blob changed by one character, or one sealed
/// under another credential name, is refused with the reason and no token.
#[test]
fn a_sealed_store_round_trips_and_refuses_a_changed_or_swapped_blob() {
    use crate::policy::upstreams::StoreKind;
    if !sealed::available() || sealed::seal(b"{}", 1024).is_err() {
        assert!(crate::sys::env_var("CI").is_none(), "systemd-creds ({}) does not work under CI", sealed::PROGRAM);
        eprintln!("SKIPPED: {} is missing or does not work for this user", sealed::PROGRAM);
        return;
    }
    let mut all = store::Tokens::new();
    all.insert("t".into(), entry());
    let st = Store::new("/nonexistent/p.json.oauth".into(), StoreKind::SystemdCreds);
    let plain = store::render(&all);
    let blob = sealed::seal(&plain, store::MAX_FILE_BYTES).unwrap();
    let text = String::from_utf8(blob.to_vec()).unwrap();
    assert!(text.starts_with("sp-oauth systemd-creds 1\n"), "{text}");
    assert!(!text.contains("secret-value") && !text.contains('{'), "{text}");
    assert_eq!(st.decode(&blob).unwrap(), all);
    // One base64 character changed in the middle of the blob.
    let mut bad = blob.to_vec();
    let i = sealed::MAGIC.len() + (bad.len() - sealed::MAGIC.len()) / 2;
    bad[i] = if bad[i] == b'A' { b'B' } else { b'A' };
    let why = st.decode(&bad).unwrap_err().to_string();
    assert!(
        why.starts_with(
            "token store /nonexistent/p.json.oauth: it cannot be decrypted (tampered with, or from another host or key): systemd-creds decrypt: failed"
        ),
        "{why}"
    );
    assert!(why.ends_with(": remove it, then sp oauth login again") && !why.contains("secret-value"), "{why}");
    // The same plaintext sealed under another name is not the store.
    let mut cmd = crate::sys::launcher_command(sealed::PROGRAM, None, &crate::sys::Plan::default()).unwrap();
    cmd.args(["encrypt", "--name=other", "--with-key=host", "-", "-"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null());
    let mut child = crate::sys::Child::spawn(&mut cmd).unwrap();
    std::io::Write::write_all(&mut child.child.stdin.take().unwrap(), &plain).unwrap();
    let mut other = Vec::new();
    std::io::Read::read_to_end(&mut child.child.stdout.take().unwrap(), &mut other).unwrap();
    assert!(child.child.wait().unwrap().success());
    let swapped = [sealed::MAGIC, &other].concat();
    let why = st.decode(&swapped).unwrap_err().to_string();
    assert!(why.contains("cannot be decrypted") && why.contains("does not match"), "{why}");
}
