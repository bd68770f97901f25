//! OAuth for url upstreams (issue 33 §2) through the built binary, against a loopback
//! authorization server and MCP server written for the suite
//! (`tests/support/upstreams/oauth_upstream.py`): `sp oauth login` discovers the
//! server (401 challenge, RFC 9728, RFC 8414), prints the address on stderr, takes the
//! pasted redirect on stdin, exchanges the code with its PKCE verifier (which the
//! server checks) and keeps the tokens in `<policy>.oauth` (0600); `sp mcp` then calls
//! with the bearer token, refreshes it when it expires and once on a 401, persists the
//! rotated refresh token, and answers `SP_AUTH` with the `sp oauth login` hint (and a
//! journal row) when the refresh token is refused.
//!
//! Attacks tried (each held):
//! - the upstream echoes the bearer token in its tool result: the agent gets it
//!   scrubbed; no token (access or refresh, old or new) is ever on stdout, stderr or in
//!   the journal;
//! - a pasted redirect whose `state` is another login's: refused before any token
//!   request (the server saw no code exchange);
//! - every access token revoked mid-session: one 401, one refresh, the call goes on;
//!   every refresh token revoked too: `SP_AUTH`, never a loop of refreshes.
#![allow(clippy::disallowed_methods, reason = "tests start sp and its fixtures; the fence in clippy.toml is for src/")]

use crate::support;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::os::unix::fs::PermissionsExt as _;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

use serde_json::{json, Value};

use support::process::{deadline, read_all_in_thread, tool_error_code, wait_deadline, Launch, Session, TempDir};

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn python() -> String {
    ["/usr/bin/python3", "/usr/local/bin/python3"].iter().find(|p| Path::new(p).exists()).map_or("python3".into(), |p| p.to_string())
}

/// The server process (killed on drop) and its port.
pub(crate) struct Server {
    child: Child,
    port: u16,
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Server {
    fn start() -> Server {
        let mut child = Command::new(python())
            .arg(root().join("tests/support/upstreams/oauth_upstream.py"))
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("start oauth_upstream.py");
        let (tx, rx) = std::sync::mpsc::channel();
        let out = child.stdout.take().unwrap();
        std::thread::spawn(move || {
            let mut line = String::new();
            let _ = BufReader::new(out).read_line(&mut line);
            let _ = tx.send(line);
        });
        let line = rx.recv_timeout(deadline()).expect("the oauth server's port line within the deadline");
        Server { child, port: line.trim().parse().expect("a port") }
    }

    pub(crate) fn base(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    /// One HTTP/1.1 exchange with the server (no redirect followed): status, headers
    /// (lower-case names), body.
    fn http(&self, method: &str, target: &str, body: &str) -> (u16, Vec<(String, String)>, String) {
        http(&format!("127.0.0.1:{}", self.port), method, target, body)
    }

    pub(crate) fn state(&self) -> Value {
        serde_json::from_str(&self.http("GET", "/state", "").2).unwrap()
    }

    pub(crate) fn control(&self, c: Value) {
        assert_eq!(self.http("POST", "/control", &c.to_string()).0, 200);
    }
}

fn http(addr: &str, method: &str, target: &str, body: &str) -> (u16, Vec<(String, String)>, String) {
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(deadline())).unwrap();
    write!(s, "{method} {target} HTTP/1.1\r\nHost: {addr}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}", body.len()).unwrap();
    let mut text = String::new();
    s.read_to_string(&mut text).expect("the server's answer before the deadline");
    let (head, body) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
    let mut lines = head.lines();
    let status = lines.next().and_then(|l| l.split(' ').nth(1)).and_then(|c| c.parse().ok()).unwrap_or(0);
    let headers = lines.filter_map(|l| l.split_once(':')).map(|(k, v)| (k.trim().to_ascii_lowercase(), v.trim().to_owned())).collect();
    (status, headers, body.to_owned())
}

pub(crate) struct Fixture {
    pub(crate) server: Server,
    pub(crate) dir: TempDir,
    pub(crate) config: PathBuf,
    /// Environment for every `sp` this fixture starts (`SP_TEST_SYSTEMD_CREDS`).
    pub(crate) env: Vec<(String, String)>,
}

/// The plaintext of an encrypted token store (`systemd-creds decrypt`, as `sp` does),
/// or the bytes as they are when the store is plain JSON.
pub(crate) fn store_plaintext(bytes: &[u8]) -> Vec<u8> {
    let Some(blob) = bytes.strip_prefix(b"sp-oauth systemd-creds 1\n") else { return bytes.to_vec() };
    let mut child = Command::new("/usr/bin/systemd-creds")
        .args(["decrypt", "--name=sp-oauth", "-", "-"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start systemd-creds decrypt");
    child.stdin.take().unwrap().write_all(blob).unwrap();
    let out = support::process::output_deadline(child, "systemd-creds decrypt of the token store");
    assert!(out.status.success(), "systemd-creds decrypt: {}", String::from_utf8_lossy(&out.stderr));
    out.stdout
}

impl Fixture {
    pub(crate) fn new(tag: &str) -> Fixture {
        Fixture::with(tag, json!({}))
    }

    /// `oauth` members added to the policy's `auth.oauth`.
    pub(crate) fn with(tag: &str, oauth: Value) -> Fixture {
        let server = Server::start();
        let dir = TempDir::new(tag);
        let mut auth = json!({"client_id": "sp-test-client", "scopes": ["mcp"]});
        auth.as_object_mut().unwrap().extend(oauth.as_object().unwrap().clone());
        // A member given as null is left out (no client_id: dynamic registration).
        auth.as_object_mut().unwrap().retain(|_, v| !v.is_null());
        let up = json!({
            "url": format!("{}/mcp", server.base()),
            "auth": {"oauth": auth},
            "tools": {"allow": ["*"]},
            "pin": "off"
        });
        let policy = json!({"upstreams": {"t": up}, "audit": {"path": dir.join("audit.jsonl")}});
        let config = dir.file("policy.json", policy.to_string().as_bytes(), 0o600);
        Fixture { server, dir, config, env: Vec::new() }
    }

    /// `sp` with the fixture's environment.
    pub(crate) fn launch(&self, args: &[&str]) -> Launch {
        self.env.iter().fold(Launch::new(args), |l, (k, v)| l.env(k, v))
    }

    /// `sp mcp` of the fixture's policy, with its environment.
    pub(crate) fn mcp(&self) -> Launch {
        self.env.iter().fold(Launch::mcp(&self.config, &[]), |l, (k, v)| l.env(k, v))
    }

    pub(crate) fn store(&self) -> PathBuf {
        PathBuf::from(format!("{}.oauth", self.config.display()))
    }

    /// The store's entry for upstream `t` (decrypted when the store is encrypted).
    pub(crate) fn entry(&self) -> Value {
        let v: Value = serde_json::from_slice(&store_plaintext(&std::fs::read(self.store()).unwrap())).unwrap();
        v["upstreams"]["t"].clone()
    }

    /// `sp oauth login t`: reads the address on stderr, plays the browser (GET it, take
    /// the 302's Location), pastes what `paste` makes of that Location on stdin; with
    /// `"redirect": "loopback"` (`paste` gives an empty line), follows the Location to
    /// sp's listener instead.
    pub(crate) fn login(&self, paste: impl FnOnce(&str) -> String) -> (std::process::ExitStatus, String, String) {
        let mut child = self.launch(&["oauth", "login", "t", "-c", &self.config.display().to_string()]).spawn();
        let mut stdin = child.stdin.take().unwrap();
        let stdout = read_all_in_thread(child.stdout.take().unwrap());
        let stderr = child.stderr.take().unwrap();
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let mut all = String::new();
            for line in BufReader::new(stderr).lines() {
                let Ok(line) = line else { break };
                if line.starts_with("http://") {
                    let _ = tx.send(Ok(line.clone()));
                }
                all.push_str(&line);
                all.push('\n');
            }
            let _ = tx.send(Err(all));
        });
        let address = match rx.recv_timeout(deadline()) {
            Ok(Ok(a)) => a,
            other => panic!("no authorization address on sp oauth login's stderr within the deadline: {other:?}"),
        };
        let target = address.strip_prefix(&self.server.base()).expect("the address is the test server's");
        let (status, headers, body) = self.server.http("GET", target, "");
        assert_eq!(status, 302, "the authorization endpoint accepted the request: {body}");
        let location = headers.iter().find(|(k, _)| k == "location").map(|(_, v)| v.clone()).unwrap();
        let pasted = paste(&location);
        if pasted.is_empty() {
            let rest = location.strip_prefix("http://").unwrap();
            let (addr, target) = rest.split_at(rest.find('/').unwrap());
            let (status, _, body) = http(addr, "GET", target, "");
            assert_eq!((status, body.as_str()), (200, "Signed in: sp has the code. You may close this window.\n"), "sp's listener took the redirect");
        } else {
            writeln!(stdin, "{pasted}").unwrap();
        }
        drop(stdin);
        let status = wait_deadline(&mut child, "sp oauth login's exit after the paste");
        let stderr = match rx.recv_timeout(deadline()) {
            Ok(Err(all)) => all,
            other => panic!("sp oauth login's stderr: {other:?}"),
        };
        let stdout = String::from_utf8(support::process::collect(&stdout, "sp oauth login's stdout")).unwrap();
        (status, stdout, stderr)
    }

    pub(crate) fn logged_in(&self) {
        let (status, stdout, stderr) = self.login(str::to_owned);
        assert!(status.success(), "sp oauth login failed:\n{stderr}");
        assert!(stdout.starts_with("upstream t: signed in at "), "{stdout}");
    }

    pub(crate) fn journal(&self) -> String {
        std::fs::read_to_string(self.dir.join("audit.jsonl")).unwrap_or_default()
    }

    /// Every token the server issued that the store has held, checked absent from `text`.
    pub(crate) fn no_token_in(&self, seen: &[String], text: &str, what: &str) {
        for t in seen {
            assert!(!text.contains(t.as_str()), "a token is in {what}:\n{text}");
        }
    }
}

pub(crate) fn tokens_of(entry: &Value) -> Vec<String> {
    ["access_token", "refresh_token"].iter().filter_map(|k| entry[k].as_str().map(str::to_owned)).collect()
}

#[test]
fn login_on_stdin_then_calls_with_the_bearer_and_refresh_on_expiry_rotates_and_persists() {
    let f = Fixture::new("oauth-login");
    // A short lifetime: the token is stale at once (its margin eats it), so sp mcp
    // must refresh before its first request.
    f.server.control(json!({"expires_in": 1}));
    let (status, stdout, stderr) = f.login(str::to_owned);
    assert!(status.success(), "sp oauth login failed:\n{stderr}");
    assert!(stdout.contains("refresh token kept"), "{stdout}");
    let state = f.server.state();
    assert_eq!((state["pkce_ok"].as_u64(), state["pkce_bad"].as_u64()), (Some(1), Some(0)), "the server checked sp's PKCE verifier: {state}");
    assert_eq!(state["token"], json!(["authorization_code"]));
    assert_eq!(state["mcp_401"], json!(1), "discovery began with the upstream's 401 challenge: {state}");
    let mode = std::fs::metadata(f.store()).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o600, "the token store is owner-only");
    let first = f.entry();
    let mut seen = tokens_of(&first);
    assert_eq!(seen.len(), 2, "an access and a refresh token stored: {first}");
    f.no_token_in(&seen, &(stdout.clone() + &stderr), "sp oauth login's output");

    f.server.control(json!({"expires_in": 3600}));
    let mut s = Session::start(Launch::mcp(&f.config, &[]));
    s.ready("2025-06-18");
    let r = s.tool(1, "t_whoami", json!({}));
    let text = r["content"][0]["text"].as_str().unwrap().to_owned();
    assert!(text.starts_with("calls 1; you sent "), "{r}");
    let run = s.finish();
    let state = f.server.state();
    assert_eq!(state["token"], json!(["authorization_code", "refresh_token"]), "one refresh before the first request: {state}");
    assert_eq!(state["mcp_401"], json!(1), "the stale token was never sent (the one 401 is the login's probe): {state}");
    let second = f.entry();
    assert_ne!(second["refresh_token"], first["refresh_token"], "the rotated refresh token is persisted");
    assert_ne!(second["access_token"], first["access_token"]);
    seen.extend(tokens_of(&second));
    // The upstream echoed the new access token: scrubbed before the agent saw it.
    f.no_token_in(&seen, &String::from_utf8_lossy(&run.stdout), "sp mcp's stdout");
    f.no_token_in(&seen, &run.stderr, "sp mcp's stderr");
    let journal = f.journal();
    f.no_token_in(&seen, &journal, "the journal");
    assert!(journal.lines().any(|l| l.contains("\"kind\":\"token\"") && l.contains("\"decision\":\"ok\"")), "a token row for the refresh:\n{journal}");
}

#[test]
fn a_401_refreshes_once_and_invalid_grant_is_sp_auth_with_the_login_hint() {
    let f = Fixture::new("oauth-401");
    f.logged_in();
    let mut seen = tokens_of(&f.entry());
    // Every access token revoked: the next request gets 401, one refresh, and goes on.
    f.server.control(json!({"revoke_access": true}));
    let mut s = Session::start(Launch::mcp(&f.config, &[]));
    s.ready("2025-06-18");
    let r = s.tool(1, "t_whoami", json!({}));
    assert!(r["content"][0]["text"].as_str().unwrap().starts_with("calls 1;"), "{r}");
    let state = f.server.state();
    // The login's probe drew the first 401.
    assert_eq!((state["mcp_401"].as_u64(), state["refresh_ok"].as_u64()), (Some(2), Some(1)), "one 401, one refresh: {state}");
    seen.extend(tokens_of(&f.entry()));
    // Now both revoked: the 401's refresh is refused (invalid_grant): SP_AUTH, hint.
    f.server.control(json!({"revoke_access": true, "revoke_refresh": true}));
    let r = s.call(&support::process::tool_call(2, "t_whoami", json!({})));
    let result = &r["result"];
    assert_eq!(tool_error_code(result), Some("SP_AUTH"), "{r}");
    let text = result["content"][0]["text"].as_str().unwrap();
    assert!(text.contains("invalid_grant") && text.contains("run `sp oauth login t`"), "{text}");
    let run = s.finish();
    let state = f.server.state();
    assert_eq!(state["token"].as_array().unwrap().iter().filter(|g| *g == "refresh_token").count(), 2, "no refresh loop: {state}");
    let journal = f.journal();
    assert!(journal.lines().any(|l| l.contains("SP_AUTH") && l.contains("sp oauth login t")), "a journal row with SP_AUTH and the hint:\n{journal}");
    f.no_token_in(&seen, &String::from_utf8_lossy(&run.stdout), "sp mcp's stdout");
    f.no_token_in(&seen, &run.stderr, "sp mcp's stderr");
    f.no_token_in(&seen, &journal, "the journal");
}

#[test]
fn a_pasted_redirect_with_another_state_is_refused_before_any_token_request() {
    let f = Fixture::new("oauth-state");
    let (status, stdout, stderr) = f.login(|loc| {
        let (head, _) = loc.split_once("state=").unwrap();
        format!("{head}state=forged")
    });
    assert_eq!(status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("the address's state is not this login's"), "{stderr}");
    assert!(stdout.is_empty(), "{stdout}");
    assert_eq!(f.server.state()["token"], json!([]), "no code exchange was attempted");
    assert!(!f.store().exists() || f.entry().is_null(), "nothing stored");
}

#[test]
fn without_a_login_a_call_is_sp_auth_with_the_hint() {
    let f = Fixture::new("oauth-none");
    let mut s = Session::start(Launch::mcp(&f.config, &[]));
    s.ready("2025-06-18");
    let r = s.call(&support::process::tool_call(1, "t_whoami", json!({})));
    assert_eq!(tool_error_code(&r["result"]), Some("SP_AUTH"), "{r}");
    let text = r["result"]["content"][0]["text"].as_str().unwrap();
    assert!(text.contains("no OAuth tokens in the token store: run `sp oauth login t`"), "{text}");
    let _ = s.finish();
    assert_eq!(f.server.state()["mcp_401"], json!(0), "nothing was sent without a token");
}

#[test]
fn login_through_the_loopback_listener() {
    let f = Fixture::with("oauth-loopback", json!({"redirect": "loopback"}));
    let (status, stdout, stderr) = f.login(|loc| {
        assert!(loc.starts_with("http://127.0.0.1:") && loc.contains("/callback?code="), "{loc}");
        String::new()
    });
    assert!(status.success(), "sp oauth login failed:\n{stderr}");
    assert!(stderr.contains("waiting on http://127.0.0.1:"), "{stderr}");
    assert!(stdout.starts_with("upstream t: signed in at "), "{stdout}");
    assert_eq!(f.server.state()["pkce_ok"], json!(1));
    let seen = tokens_of(&f.entry());
    assert_eq!(seen.len(), 2);
    let mut s = Session::start(Launch::mcp(&f.config, &[]));
    s.ready("2025-06-18");
    assert!(s.tool(1, "t_whoami", json!({}))["content"][0]["text"].as_str().unwrap().starts_with("calls 1;"));
    let run = s.finish();
    f.no_token_in(&seen, &String::from_utf8_lossy(&run.stdout), "sp mcp's stdout");
}

/// Two sessions of one policy share the store: the one whose token was refused after
/// the other refreshed takes the other's fresh token from the store instead of spending
/// its own (rotated out, so the server would answer invalid_grant).
#[test]
fn a_second_session_adopts_the_token_another_refreshed() {
    let f = Fixture::new("oauth-two");
    f.logged_in();
    let mut b = Session::start(Launch::mcp(&f.config, &[]));
    b.ready("2025-06-18");
    assert!(b.tool(1, "t_whoami", json!({}))["content"][0]["text"].as_str().unwrap().starts_with("calls 1;"));
    f.server.control(json!({"revoke_access": true}));
    let mut a = Session::start(Launch::mcp(&f.config, &[]));
    a.ready("2025-06-18");
    assert!(a.tool(1, "t_whoami", json!({}))["content"][0]["text"].as_str().unwrap().starts_with("calls 2;"));
    let r = b.tool(2, "t_whoami", json!({}));
    assert!(r["content"][0]["text"].as_str().unwrap().starts_with("calls 3;"), "{r}");
    let state = f.server.state();
    assert_eq!(state["refresh_ok"], json!(1), "one refresh for both sessions: {state}");
    // The login's probe, A's first POST, B's first POST after the revocation.
    assert_eq!(state["mcp_401"], json!(3), "{state}");
    let _ = (a.finish(), b.finish());
}

/// A token store that group or others may read is refused, not used.
#[test]
fn a_token_store_others_may_read_is_refused() {
    let f = Fixture::new("oauth-mode");
    f.logged_in();
    std::fs::set_permissions(f.store(), std::fs::Permissions::from_mode(0o640)).unwrap();
    let mut s = Session::start(Launch::mcp(&f.config, &[]));
    s.ready("2025-06-18");
    let r = s.call(&support::process::tool_call(1, "t_whoami", json!({})));
    assert_eq!(tool_error_code(&r["result"]), Some("SP_AUTH"), "{r}");
    let text = r["result"]["content"][0]["text"].as_str().unwrap();
    assert!(text.contains(&format!("token store {}", f.store().display())), "{text}");
    let _ = s.finish();
    assert_eq!(f.server.state()["calls"], json!(0));
}
