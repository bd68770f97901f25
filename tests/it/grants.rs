//! `sp approve list|revoke` through the built `sp`, on grants files prepared by the test
//! (the format `sp mcp` writes, sp-policy(5) "Grants"), with `XDG_STATE_HOME` pointed
//! at a private temporary directory.
//!
//! Attacks tried (all held):
//! - a target holding an escape sequence and a bidi override: printed escaped, in the
//!   table and in `--json`;
//! - expired grants and grants of another policy in the file: not listed / marked
//!   `changed`;
//! - `revoke` with an id that is not 16 hex digits (`../x`, too short, 17 digits): usage
//!   error (exit 2), the file untouched; a well-formed id that is not there: exit 1;
//! - a corrupt file: `list` and `revoke ID` fail (exit 1) and leave it byte for byte,
//!   `revoke --all` replaces it;
//! - the file group-readable (0640), a symbolic link, a FIFO: refused, exit 1, nothing
//!   written through the link; a FIFO is refused at once (no reader waits on it);
//! - no `XDG_STATE_HOME` and no `HOME`: refused with the reason (no file invented);
//! - the policy naming `approval.grants.path`: that file, not the default;
//! - issue 31, a grant written into the file by something else than sp (an upstream
//!   running as the user): with the approver `/bin/false`, a session grant with no
//!   `mac`, with a `mac` of another key, or a signed one edited (expiry pushed out,
//!   exact widened to session), never lets the approve-flagged call run: it is refused
//!   `SP_NOT_APPROVED`, the server sees no request, the journal has one `grant` row
//!   (`forged`) per forgery per session, and `sp approve list` does not list it; the
//!   same grant signed with the key in the key file runs without asking.
#![allow(
    clippy::disallowed_methods,
    reason = "tests and benchmarks start sp, sshd and clients and read their environment; the fence in clippy.toml is for src/"
)]

use crate::support;

use std::os::unix::fs::PermissionsExt;
use std::path::PathBuf;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use serde_json::{json, Value};
use sha2::{Digest, Sha256};

use support::process::{run_sp, Run, TempDir};

fn now() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_secs()
}

fn uid() -> u64 {
    let meta = std::fs::metadata("/proc/self").unwrap();
    u64::from(std::os::unix::fs::MetadataExt::uid(&meta))
}

fn sha256(bytes: &[u8]) -> String {
    Sha256::digest(bytes).iter().map(|b| format!("{b:02x}")).collect()
}

/// One grant as `sp mcp` stores it.
fn grant(id: &str, scope: &str, policy: &str, created: u64, ttl: u64, target: &str) -> Value {
    let mut g = json!({
        "id": id, "scope": scope, "policy": policy, "created": created, "expires": created + ttl, "ttl_s": ttl,
        "tool": "http_request", "target": target, "subject": "sidecar", "channel": "command", "uid": uid()
    });
    if scope == "exact" {
        g["action"] = json!("ab".repeat(32));
    }
    g
}

/// The key the tests' grants files are signed with (`grants.json.key`, sp-policy(5)).
const KEY: [u8; 32] = [0x5a; 32];

/// A grant's `mac` as sp computes it: HMAC-SHA256 under `key` of the record's members
/// but `mac`, as the JSON array sp-policy(5) APPROVAL names.
fn mac(key: &[u8], g: &Value) -> String {
    use hmac::Mac;
    let canonical = json!([
        "sp-grant-mac/1",
        g["id"],
        g["scope"],
        g["policy"],
        g["created"],
        g["expires"],
        g["ttl_s"],
        g["requested_ttl_s"],
        g["action"],
        g["tool"],
        g["target"],
        g["subject"],
        g["channel"],
        g["uid"]
    ]);
    let mut m = hmac::Hmac::<Sha256>::new_from_slice(key).unwrap();
    m.update(canonical.to_string().as_bytes());
    m.finalize().into_bytes().iter().map(|b| format!("{b:02x}")).collect()
}

fn signed(key: &[u8], g: &Value) -> Value {
    let mut g = g.clone();
    g["mac"] = json!(mac(key, &g));
    g
}

/// Writes `KEY` as the key of the grants file at `grants` (0600).
fn write_key(grants: &std::path::Path) {
    let path = grants.with_file_name(format!("{}.key", grants.file_name().unwrap().to_str().unwrap()));
    std::fs::write(&path, KEY).unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).unwrap();
}

/// The file as sp writes it, each grant signed with `KEY`.
fn file_text(grants: &[Value]) -> String {
    raw_file_text(&grants.iter().map(|g| signed(&KEY, g)).collect::<Vec<_>>())
}

/// The file with the records as given (a forger's).
fn raw_file_text(grants: &[Value]) -> String {
    let lines: Vec<String> = grants.iter().map(Value::to_string).collect();
    format!("{{\"version\":1,\"grants\":[\n{}\n]}}\n", lines.join(",\n"))
}

/// A state directory with `sallyport/grants.json` holding `grants` (mode 0600).
struct State {
    dir: TempDir,
    file: PathBuf,
}

fn state(grants: &[Value]) -> State {
    let dir = TempDir::new("grants");
    std::fs::create_dir(dir.path.join("sallyport")).unwrap();
    std::fs::set_permissions(dir.path.join("sallyport"), std::fs::Permissions::from_mode(0o700)).unwrap();
    let file = dir.path.join("sallyport/grants.json");
    std::fs::write(&file, file_text(grants)).unwrap();
    std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o600)).unwrap();
    write_key(&file);
    State { dir, file }
}

impl State {
    fn sp(&self, args: &[&str]) -> Run {
        run_sp(args, &[("XDG_STATE_HOME", &self.dir.path.display().to_string())], b"")
    }
}

fn stdout(run: &Run) -> String {
    String::from_utf8(run.stdout.clone()).unwrap()
}

const A: &str = "00000000000000aa";
const B: &str = "00000000000000bb";
const OLD: &str = "00000000000000cc";

#[test]
fn list_shows_the_live_grants_escaped_and_revoke_ends_them() {
    let t = now();
    let p1 = "1".repeat(64);
    let s = state(&[
        grant(A, "exact", &p1, t - 10, 900, "PUT http://127.0.0.1:8080/v1/jobs/7"),
        grant(B, "session", &p1, t - 10, 600, "GET http://h/\u{1b}[2J\u{202e}gnp.exe"),
        grant(OLD, "exact", &p1, t - 2000, 1000, "GET http://h/old"),
    ]);
    let run = s.sp(&["approve", "list"]);
    run.assert_exit(0);
    let text = stdout(&run);
    let rows: Vec<&str> = text.lines().collect();
    assert_eq!(rows.len(), 3, "{}", run.context());
    assert!(rows[0].starts_with("ID  ") && rows[0].ends_with("TOOL / TARGET"), "{text}");
    // Soonest to expire first; no policy found: the policy column says "-".
    assert!(rows[1].starts_with(&format!("{B}  session  9m ")), "{text}");
    assert!(rows[1].ends_with("-        sidecar           every call (opened by http_request GET http://h/\\u{1b}[2J\\u{202e}gnp.exe)"), "{text}");
    assert!(rows[2].starts_with(&format!("{A}  exact    14m ")), "{text}");
    assert!(!text.contains(OLD), "an expired grant is listed: {text}");
    assert!(!text.contains('\u{1b}') && !text.contains('\u{202e}'), "{text:?}");

    let run = s.sp(&["approve", "list", "--json"]);
    run.assert_exit(0);
    let listed: Vec<Value> = stdout(&run).lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    let ids: Vec<&str> = listed.iter().map(|v| v["id"].as_str().unwrap()).collect();
    assert_eq!(ids, vec![B, A]);
    let mut first = listed[0].clone();
    assert!((585..=590).contains(&first["expires_in_s"].as_u64().unwrap()), "{first}");
    first.as_object_mut().unwrap().remove("expires_in_s");
    assert_eq!(
        first,
        json!({"id": B, "scope": "session", "tool": "http_request", "subject": "sidecar",
               "target": "GET http://h/\u{1b}[2J\u{202e}gnp.exe", "channel": "command",
               "created": t - 10, "expires": t + 590, "ttl_s": 600, "policy": "-"})
    );
    assert!(!stdout(&run).contains('\u{202e}'), "a bidi override printed raw");

    let run = s.sp(&["approve", "revoke", &A.to_uppercase()]);
    run.assert_exit(0);
    assert_eq!(stdout(&run), format!("revoked {A} (exact grant, sidecar PUT http://127.0.0.1:8080/v1/jobs/7)\n"));
    let run = s.sp(&["approve", "revoke", A]);
    run.assert_exit(1);
    assert_eq!(run.stderr, format!("sp: no grant {A}\n"), "{}", run.context());
    let left: Value = serde_json::from_str(&std::fs::read_to_string(&s.file).unwrap()).unwrap();
    assert_eq!(
        left["grants"].as_array().unwrap().iter().map(|g| g["id"].as_str().unwrap()).collect::<Vec<_>>(),
        vec![B],
        "the expired one was dropped by the write"
    );
    assert_eq!(std::fs::metadata(&s.file).unwrap().permissions().mode() & 0o777, 0o600);

    let run = s.sp(&["approve", "revoke", "--all"]);
    run.assert_exit(0);
    assert_eq!(stdout(&run), "revoked 1 grant(s)\n");
    let run = s.sp(&["approve", "list"]);
    run.assert_exit(0);
    assert_eq!(stdout(&run), "no grants\n");
}

#[test]
fn malformed_ids_are_usage_errors_and_touch_nothing() {
    let t = now();
    let s = state(&[grant(A, "exact", &"1".repeat(64), t, 900, "GET http://h/x")]);
    let before = std::fs::read(&s.file).unwrap();
    for id in ["../x", "00000000000000a", "00000000000000aaa", "00000000000000ag", ""] {
        let run = s.sp(&["approve", "revoke", id]);
        run.assert_exit(2);
        assert_eq!(run.stderr, "sp: sp approve revoke takes a grant id: 16 hex digits, as sp approve list shows them\n", "{id:?}");
    }
    s.sp(&["approve", "bogus"]).assert_exit(2);
    assert_eq!(std::fs::read(&s.file).unwrap(), before);
    let run = s.sp(&["approve", "--help"]);
    run.assert_exit(0);
    assert!(stdout(&run).starts_with("Usage:\n  sp approve list"), "{}", run.context());
}

#[test]
fn a_corrupt_file_fails_until_revoke_all_replaces_it() {
    let t = now();
    let mut g = grant(A, "exact", &"1".repeat(64), t, 900, "GET http://h/x");
    g["expires"] = json!(t + 86_400 * 365);
    let s = state(&[g]);
    let before = std::fs::read(&s.file).unwrap();
    let run = s.sp(&["approve", "list"]);
    run.assert_exit(1);
    let want = format!(
        "sp: grants file {}: corrupt: grants[0]: expires is not created + ttl_s; no grant applies until `sp approve revoke --all` replaces it\n",
        s.file.display()
    );
    assert_eq!(run.stderr, want);
    assert!(run.stdout.is_empty());
    s.sp(&["approve", "revoke", A]).assert_exit(1);
    assert_eq!(std::fs::read(&s.file).unwrap(), before, "a corrupt file is never rewritten but by --all");
    let run = s.sp(&["approve", "revoke", "--all"]);
    run.assert_exit(0);
    assert_eq!(stdout(&run), format!("replaced the corrupt grants file {} (grants[0]: expires is not created + ttl_s): no grants\n", s.file.display()));
    assert_eq!(std::fs::read_to_string(&s.file).unwrap(), "{\"version\":1,\"grants\":[\n]}\n");
    s.sp(&["approve", "list"]).assert_exit(0);
}

#[test]
fn a_file_others_could_read_a_link_or_a_fifo_is_refused() {
    let s = state(&[grant(A, "session", &"1".repeat(64), now(), 900, "GET http://h/x")]);
    std::fs::set_permissions(&s.file, std::fs::Permissions::from_mode(0o640)).unwrap();
    let run = s.sp(&["approve", "list"]);
    run.assert_exit(1);
    assert_eq!(
        run.stderr,
        format!(
            "sp: grants file {0}: permissions 0640 are too open (must not let group or others access it) (refused; fix: rm {0} and approve again)\n",
            s.file.display()
        )
    );
    std::fs::set_permissions(&s.file, std::fs::Permissions::from_mode(0o600)).unwrap();
    let real = s.dir.path.join("real.json");
    std::fs::rename(&s.file, &real).unwrap();
    std::os::unix::fs::symlink(&real, &s.file).unwrap();
    let before = std::fs::read(&real).unwrap();
    for args in [&["approve", "list"][..], &["approve", "revoke", "--all"], &["approve", "revoke", A]] {
        let run = s.sp(args);
        run.assert_exit(1);
        assert!(run.stderr.contains("is a symbolic link"), "{args:?}: {}", run.context());
    }
    assert_eq!(std::fs::read(&real).unwrap(), before, "written through the link");
    std::fs::remove_file(&s.file).unwrap();
    assert!(std::process::Command::new("mkfifo").arg(&s.file).status().unwrap().success());
    let started = Instant::now();
    let run = s.sp(&["approve", "list"]);
    run.assert_exit(1);
    assert!(run.stderr.contains("FIFO"), "{}", run.context());
    assert!(started.elapsed() < Duration::from_secs(4), "waited on a FIFO");
}

#[test]
fn the_policy_names_the_file_and_binds_the_grants() {
    let dir = TempDir::new("grants-policy");
    let path = dir.path.join("mine.json");
    let policy_text = json!({"approval": {"command": ["/bin/true"], "grants": {"exact_max_s": 600, "path": path.display().to_string()}}}).to_string();
    let policy = dir.file("policy.json", policy_text.as_bytes(), 0o600);
    let hash = sha256(policy_text.as_bytes());
    let t = now();
    std::fs::write(&path, file_text(&[grant(A, "exact", &hash, t, 600, "GET http://h/a"), grant(B, "exact", &"9".repeat(64), t, 300, "GET http://h/b")]))
        .unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).unwrap();
    write_key(&path);
    // XDG_STATE_HOME points elsewhere: the policy's path wins.
    let elsewhere = TempDir::new("grants-elsewhere");
    let xdg = elsewhere.path.display().to_string();
    let policy_arg = policy.display().to_string();
    let run = run_sp(&["approve", "list", "--json", "-c", &policy_arg], &[("XDG_STATE_HOME", &xdg)], b"");
    run.assert_exit(0);
    let states: Vec<(String, String)> = stdout(&run)
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .map(|v| (v["id"].as_str().unwrap().to_owned(), v["policy"].as_str().unwrap().to_owned()))
        .collect();
    assert_eq!(states, vec![(B.to_owned(), "changed".to_owned()), (A.to_owned(), "current".to_owned())]);
    assert!(!elsewhere.path.join("sallyport").exists());
    let run = run_sp(&["-c", &policy_arg, "check"], &[("XDG_STATE_HOME", &xdg)], b"");
    run.assert_exit(0);
    assert!(stdout(&run).contains(&format!("grants: exact up to 600s, session never; file {}\n", path.display())), "{}", run.context());
}

#[test]
fn without_a_state_location_nothing_is_invented() {
    let run = run_sp(&["approve", "list"], &[("HOME", "")], b"");
    run.assert_exit(1);
    assert_eq!(
        run.stderr,
        "sp: no grants file location: neither XDG_STATE_HOME nor HOME is set to an absolute path (set approval.grants.path in the policy)\n"
    );
}

/// Issue 31: an upstream (a child of sp, same user) wrote a session grant into the
/// grants file, and an approve-flagged call ran with the approver `/bin/false`.
#[test]
fn a_forged_grant_does_not_let_an_approve_flagged_call_run() {
    use support::http_server::{Reply, TestServer};
    use support::process::{tool_error_code, Launch, Session};
    let server = TestServer::start();
    server.route("/v1/x", Reply::json(200, r#"{"ok":true}"#));
    let dir = TempDir::new("grants-forged");
    let grants = dir.path.join("grants.json");
    let journal = dir.path.join("audit.jsonl");
    let token = dir.file("api.token", b"not-a-real-secret-forged-grants", 0o600);
    let host = format!("127.0.0.1:{}", server.port);
    let policy_text = json!({
        "http": {"allow": [{"hosts": [host], "methods": ["GET"], "paths": ["/*"]}]},
        "credentials": {"api": {"source": {"file": token.display().to_string()}, "inject": {"bearer": {}}, "hosts": [host], "paths": ["/v1/*"], "approve": true}},
        "approval": {"command": ["/bin/false"], "grants": {"exact_max_s": 600, "session_max_s": 600, "path": grants.display().to_string()}},
        "audit": {"path": journal.display().to_string()}
    })
    .to_string();
    let policy = dir.file("policy.json", policy_text.as_bytes(), 0o600);
    let hash = sha256(policy_text.as_bytes());
    let t = now();
    // What the upstream wrote: a live session grant under this very policy, this uid.
    let forged = grant(A, "session", &hash, t - 5, 600, "GET http://h/anything");
    let mut widened = grant(B, "exact", &hash, t - 5, 60, "GET http://h/anything");
    widened = signed(&KEY, &widened);
    widened["scope"] = json!("session");
    widened.as_object_mut().unwrap().remove("action");
    let mut extended = signed(&KEY, &grant(OLD, "session", &hash, t - 7200, 600, "GET http://h/old"));
    extended["created"] = json!(t - 5);
    extended["expires"] = json!(t + 595);
    let other_key = signed(&[1u8; 32], &grant("00000000000000dd", "session", &hash, t - 5, 600, "GET http://h/x"));
    // First the upstream's plain record alone (a file an older sp would have honoured),
    // then records that carry a `mac`: edited after sp signed them, or another key's.
    let files = [vec![forged], vec![widened, extended, other_key]];
    write_key(&grants);
    let call = || json!({"method": "GET", "url": format!("{}/v1/x", server.base())});
    for records in &files {
        std::fs::write(&grants, raw_file_text(records)).unwrap();
        std::fs::set_permissions(&grants, std::fs::Permissions::from_mode(0o600)).unwrap();
        let mut s = Session::start(Launch::mcp(&policy, &["-v"]));
        s.ready("2025-06-18");
        for id in 1..=2 {
            let refused = s.tool(id, "http_request", call());
            assert_eq!(tool_error_code(&refused), Some("SP_NOT_APPROVED"), "call {id}: {refused}");
        }
        let run = s.finish();
        run.assert_exit(0);
        server.settle();
        assert_eq!(server.requests().len(), 0, "a forged grant let the call reach the server");
        let id = records[0]["id"].as_str().unwrap();
        assert!(run.stderr.contains(&format!("grant {id} (session scope) is ignored: ")), "{}", run.context());
        let list = run_sp(&["approve", "list", "--json", "-c", policy.to_str().unwrap()], &[], b"");
        list.assert_exit(0);
        assert!(list.stdout.is_empty(), "a forged grant is listed: {}", list.context());
    }
    let rows: Vec<Value> = std::fs::read_to_string(&journal).unwrap().lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    let forged_rows: Vec<(String, String)> =
        rows.iter().filter(|r| r["kind"] == "grant").map(|r| (r["decision"].as_str().unwrap().to_owned(), r["grant"].as_str().unwrap().to_owned())).collect();
    let want: Vec<(String, String)> = [A, B, OLD, "00000000000000dd"].iter().map(|id| ("forged".to_owned(), id.to_string())).collect();
    assert_eq!(forged_rows, want, "one row per forgery, once per session (two calls read the file)");
    let reasons: Vec<&str> = rows.iter().filter(|r| r["kind"] == "grant").map(|r| r["reason"].as_str().unwrap()).collect();
    assert!(reasons[0].contains("session grant for http_request sidecar") && reasons[0].ends_with("it has no mac (sp did not write it)"), "{reasons:?}");
    assert!(reasons[1].ends_with("its mac does not match its content under sp's key (sp did not write it)"), "{reasons:?}");
    let approvals: Vec<Value> = rows.iter().filter(|r| r["kind"] == "approval").map(|r| r["decision"].clone()).collect();
    assert_eq!(approvals, vec![json!("refused"); 4], "the approver was asked each time");
    assert!(!rows.iter().any(|r| r["kind"] == "intent"), "nothing ran");

    // The same grant, signed with the key sp holds: honoured, no approver asked.
    std::fs::write(&grants, file_text(&[grant(A, "session", &hash, t - 5, 600, "GET http://h/anything")])).unwrap();
    let mut s = Session::start(Launch::mcp(&policy, &[]));
    s.ready("2025-06-18");
    let ok = s.tool(1, "http_request", call());
    assert_eq!(tool_error_code(&ok), None, "{ok}");
    s.finish().assert_exit(0);
    server.settle();
    assert_eq!(server.requests().len(), 1);
}
