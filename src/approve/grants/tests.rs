//! The grants store against real files in private temporary directories, with `now`
//! injected.
//!
//! Attacks tried (all held):
//! - the same grant replayed with any one part changed (tool, target, subject, argument
//!   fingerprint, a target longer than the part kept for display), under another policy
//!   hash, by another uid, before its `created` (a clock set back), at its `expires`, or
//!   an elicitation's grant for a subject that requires the approver command: no grant
//!   applies;
//! - an approver asking for more than the operator allows (TTL cut, the grant says so),
//!   for a scope the operator does not allow (refused), for `ttl_s` 0, -1, 1.5, "900",
//!   2^64, with an extra key, a duplicate key, a second JSON value, a 10 KB line,
//!   invalid UTF-8: never a grant;
//! - the operator lowering a max (or removing a scope) under the same hash: the longer
//!   grant stops applying;
//! - the grants file as a symbolic link (to a file of ours: nothing read, nothing written
//!   through it), a FIFO, a directory, mode 0644 or 0604, owned by another user, with a
//!   second hard link, in a group-writable directory: refused, nothing applies;
//! - a corrupt file (not JSON, duplicate keys, unknown keys, a bad id, a forged `expires`,
//!   an exact grant without its action, a session grant with one, a future version,
//!   two grants with one id, more than 1 MiB): fails closed for `find` and `list`, is not
//!   rewritten by `add` or `revoke`, and only `revoke_all` replaces it;
//! - two writers adding at once (threads with their own descriptors: `flock` is per open
//!   file): nothing lost; no temporary file left behind.
//! - records sp did not sign (issue 31): `mac/tests.rs`.

use super::form::{parse_file, render_file, BadGrant};
use super::answer::AnswerError;
use super::store::RevokedAll;
use super::*;
use crate::policy::approval::MAX_GRANT_S;
use serde_json::Value;
use std::path::Path;

use std::os::unix::fs::PermissionsExt;

const P1: &str = "1111111111111111111111111111111111111111111111111111111111111111";
const P2: &str = "2222222222222222222222222222222222222222222222222222222222222222";
const T0: u64 = 1_800_000_000;
const ANY: &[Channel] = &[Channel::Command, Channel::Elicitation];

fn dir() -> tempfile::TempDir {
    // A private (0700) directory under the sticky /tmp: `check_dirs` accepts it.
    tempfile::Builder::new().prefix("sp-grants-").tempdir().unwrap()
}

fn limits(exact: Option<u64>, session: Option<u64>) -> GrantsPolicy {
    GrantsPolicy { exact_max_s: exact, session_max_s: session, path: None }
}

fn store(d: &tempfile::TempDir) -> Grants {
    Grants::open(&d.path().join("grants.json"), &limits(Some(3600), Some(900))).unwrap()
}

fn key() -> ActionKey {
    ActionKey::new("http_request", "PUT http://127.0.0.1:8080/v1/jobs/7", "sidecar", "fp0")
}

fn raw(g: &Grants) -> Vec<u8> {
    std::fs::read(g.path()).unwrap()
}

#[test]
fn an_exact_grant_lives_from_created_to_expires_and_then_is_dropped() {
    let d = dir();
    let g = store(&d);
    let added = g.add(Scope::Exact, 60, P1, &key(), Channel::Command, T0).unwrap();
    assert_eq!(
        (added.scope, added.created, added.expires, added.ttl_s, added.requested_ttl_s, added.action.as_deref()),
        (Scope::Exact, T0, T0 + 60, 60, None, Some(key().hash()))
    );
    assert_eq!((added.id.len(), added.uid, added.channel), (16, sys::euid(), Channel::Command));
    assert_eq!(g.find(P1, &key(), ANY, T0).unwrap(), Some(added.clone()));
    assert_eq!(g.find(P1, &key(), ANY, T0 + 59).unwrap(), Some(added.clone()));
    assert_eq!(g.find(P1, &key(), ANY, T0 + 60).unwrap(), None, "expired at expires");
    assert_eq!(g.find(P1, &key(), ANY, T0 - 1).unwrap(), None, "a clock set back never lengthens a grant");
    assert_eq!(g.list(T0 + 59).unwrap(), vec![added.clone()]);
    assert_eq!(g.list(T0 + 60).unwrap(), vec![]);
    // Still in the file until the next write, which drops it.
    assert!(String::from_utf8(raw(&g)).unwrap().contains(&added.id));
    let other = ActionKey::new("ssh_exec", "web1: uptime", "web1", "fp1");
    g.add(Scope::Exact, 60, P1, &other, Channel::Command, T0 + 60).unwrap();
    assert!(!String::from_utf8(raw(&g)).unwrap().contains(&added.id), "expired grants are dropped on write");
    let mode = std::fs::metadata(g.path()).unwrap().permissions().mode() & 0o7777;
    assert_eq!(mode, 0o600);
    let names: Vec<String> = std::fs::read_dir(d.path()).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).collect();
    let mut names = names;
    names.sort();
    assert_eq!(names, vec!["grants.json".to_owned(), "grants.json.key".to_owned()], "no temporary file left");
    let key_mode = std::fs::metadata(d.path().join("grants.json.key")).unwrap();
    assert_eq!((key_mode.permissions().mode() & 0o7777, key_mode.len()), (0o600, 32), "the key is owner-only, 32 bytes");
}

/// A writer killed between creating its replacement and renaming it leaves the file
/// behind; the next writer (under the lock) removes it, and nothing else.
#[test]
fn a_dead_writers_replacement_is_removed_by_the_next_write() {
    let d = dir();
    let g = store(&d);
    let stale = d.path().join(".grants.json.0123456789abcdef.tmp");
    let kept = [".grants.json.notours.tmp", "grants.json.0123456789abcdef.tmp", ".other.json.0123456789abcdef.tmp"];
    std::fs::write(&stale, b"half").unwrap();
    for k in kept {
        std::fs::write(d.path().join(k), b"x").unwrap();
    }
    g.add(Scope::Exact, 60, P1, &key(), Channel::Command, T0).unwrap();
    assert!(!stale.exists());
    let mut names: Vec<String> = std::fs::read_dir(d.path()).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).collect();
    names.sort();
    let mut want: Vec<String> = kept.iter().map(|s| s.to_string()).chain(["grants.json".to_owned(), "grants.json.key".to_owned()]).collect();
    want.sort();
    assert_eq!(names, want);
}

#[test]
fn an_exact_grant_covers_only_the_same_tool_target_subject_and_arguments() {
    let d = dir();
    let g = store(&d);
    let base = ("http_request", "PUT http://h/v1/jobs/7", "sidecar", "fp0");
    let k = |(t, a, s, f): (&str, &str, &str, &str)| ActionKey::new(t, a, s, f);
    let added = g.add(Scope::Exact, 600, P1, &k(base), Channel::Command, T0).unwrap();
    assert_eq!(g.find(P1, &k(base), ANY, T0 + 1).unwrap(), Some(added));
    for (what, changed) in [
        ("tool", ("ssh_exec", base.1, base.2, base.3)),
        ("target", (base.0, "PUT http://h/v1/jobs/8", base.2, base.3)),
        ("subject", (base.0, base.1, "other", base.3)),
        ("argument fingerprint", (base.0, base.1, base.2, "fp1")),
        // The parts are framed: moving a character from one to the next is another key.
        ("framing", (base.0, "PUT http://h/v1/jobs/", "7sidecar", base.3)),
    ] {
        assert_eq!(g.find(P1, &k(changed), ANY, T0 + 1).unwrap(), None, "a changed {what} must ask again");
    }
    assert_eq!(g.find(P2, &k(base), ANY, T0 + 1).unwrap(), None, "another policy hash");
}

#[test]
fn a_session_grant_covers_every_call_under_its_policy_and_exact_is_found_first() {
    let d = dir();
    let g = store(&d);
    let session = g.add(Scope::Session, 300, P1, &key(), Channel::Elicitation, T0).unwrap();
    assert_eq!(session.action, None);
    let other = ActionKey::new("ssh_exec", "web1: rm -rf /tmp/x", "web1", "fp9");
    assert_eq!(g.find(P1, &other, ANY, T0 + 10).unwrap(), Some(session.clone()));
    assert_eq!(g.find(P2, &other, ANY, T0 + 10).unwrap(), None, "a policy change ends the window");
    assert_eq!(g.find(P1, &other, ANY, T0 + 300).unwrap(), None);
    let exact = g.add(Scope::Exact, 60, P1, &other, Channel::Command, T0 + 10).unwrap();
    assert_eq!(g.find(P1, &other, ANY, T0 + 11).unwrap(), Some(exact), "exact first");
    assert_eq!(g.find(P1, &key(), ANY, T0 + 11).unwrap(), Some(session));
    // A subject that requires the approver command: the elicitation's window does not
    // cover it, the command's exact grant still does.
    assert_eq!(g.find(P1, &key(), &[Channel::Command], T0 + 11).unwrap(), None);
    assert_eq!(g.find(P1, &other, &[Channel::Command], T0 + 11).unwrap().map(|g| g.channel), Some(Channel::Command));
}

/// Names longer than the file keeps are cut for display, never written whole: the file
/// stays readable, and the key still covers the whole name.
#[test]
fn long_names_never_make_the_file_corrupt() {
    let d = dir();
    let g = store(&d);
    let long = ActionKey::new(&"t".repeat(300), &"x".repeat(5000), &"s".repeat(300), "fp");
    let added = g.add(Scope::Exact, 60, P1, &long, Channel::Command, T0).unwrap();
    assert_eq!((added.tool.len(), added.target.len(), added.subject.len()), (MAX_SHOWN_NAME, MAX_SHOWN_TARGET, MAX_SHOWN_NAME));
    assert_eq!(g.find(P1, &long, ANY, T0).unwrap(), Some(added));
    let shorter = ActionKey::new(&"t".repeat(300), &"x".repeat(4999), &"s".repeat(300), "fp");
    assert_eq!(g.find(P1, &shorter, ANY, T0).unwrap(), None);
}

#[test]
fn ttls_are_cut_to_the_operators_max_and_scopes_not_allowed_are_refused() {
    let d = dir();
    let path = d.path().join("grants.json");
    let g = Grants::open(&path, &limits(Some(3600), None)).unwrap();
    let a = g.add(Scope::Exact, 7200, P1, &key(), Channel::Command, T0).unwrap();
    assert_eq!((a.ttl_s, a.requested_ttl_s, a.expires), (3600, Some(7200), T0 + 3600));
    let b = g.add(Scope::Exact, 3600, P1, &key(), Channel::Command, T0).unwrap();
    assert_eq!((b.ttl_s, b.requested_ttl_s), (3600, None));
    assert_eq!(g.list(T0).unwrap(), vec![b.clone()], "a new grant for the same action replaces the old one");
    assert_eq!(g.add(Scope::Session, 60, P1, &key(), Channel::Command, T0), Err(GrantError::NotAllowed { scope: Scope::Session }));
    assert_eq!(g.add(Scope::Exact, 60, "not-a-hash", &key(), Channel::Command, T0), Err(GrantError::BadPolicyHash));
    // The same action granted through the other channel is kept beside it.
    let c = g.add(Scope::Exact, 60, P1, &key(), Channel::Elicitation, T0).unwrap();
    assert_eq!(g.list(T0).unwrap(), vec![c.clone(), b.clone()]);
    g.revoke(&c.id, T0).unwrap();
    // The operator lowers the max (same hash, as a test can): the longer grant stops.
    let lowered = Grants::open(&path, &limits(Some(900), None)).unwrap();
    assert_eq!(lowered.find(P1, &key(), ANY, T0 + 1).unwrap(), None);
    let none = Grants::open(&path, &limits(None, None)).unwrap();
    assert_eq!(none.find(P1, &key(), ANY, T0 + 1).unwrap(), None);
    assert_eq!(g.find(P1, &key(), ANY, T0 + 1).unwrap(), Some(b));
}

#[test]
fn another_users_grant_never_applies() {
    let d = dir();
    let g = store(&d);
    let mut a = g.add(Scope::Session, 300, P1, &key(), Channel::Command, T0).unwrap();
    a.uid = sys::euid().wrapping_add(1);
    std::fs::write(g.path(), render_file(&[a], &g.test_key())).unwrap();
    assert_eq!(g.find(P1, &key(), ANY, T0 + 1).unwrap(), None);
}

#[test]
fn two_writers_at_once_lose_nothing() {
    let d = dir();
    let path = d.path().join("grants.json");
    let per_thread = 25;
    let threads: Vec<_> = (0..2)
        .map(|t| {
            let path = path.clone();
            std::thread::spawn(move || {
                let g = Grants::open(&path, &limits(Some(3600), Some(900))).unwrap();
                for i in 0..per_thread {
                    let k = ActionKey::new("http_request", &format!("GET http://h/{t}/{i}"), "c", "fp");
                    g.add(Scope::Exact, 600, P1, &k, Channel::Command, T0).unwrap();
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    let g = Grants::open(&path, &limits(Some(3600), Some(900))).unwrap();
    let mut targets: Vec<String> = g.list(T0).unwrap().into_iter().map(|g| g.target).collect();
    targets.sort();
    let mut want: Vec<String> = (0..2).flat_map(|t| (0..per_thread).map(move |i| format!("GET http://h/{t}/{i}"))).collect();
    want.sort();
    assert_eq!(targets, want);
}

#[test]
fn files_others_could_write_or_that_are_not_ours_are_refused() {
    let d = dir();
    let g = store(&d);
    let path = g.path().to_owned();
    g.add(Scope::Exact, 60, P1, &key(), Channel::Command, T0).unwrap();
    for mode in [0o644, 0o604, 0o640] {
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(mode)).unwrap();
        let want = GrantError::File { path: path.clone(), why: SysError::TooOpen { mode, forbidden: 0o077 } };
        assert_eq!(g.find(P1, &key(), ANY, T0), Err(want.clone()), "{mode:o}");
        assert_eq!(g.add(Scope::Exact, 60, P1, &key(), Channel::Command, T0), Err(want), "{mode:o}");
    }
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).unwrap();
    // A symbolic link, even to a grants file of ours: nothing read or written through it.
    let real = d.path().join("real.json");
    std::fs::rename(&path, &real).unwrap();
    std::os::unix::fs::symlink(&real, &path).unwrap();
    let before = std::fs::read(&real).unwrap();
    let want = GrantError::File { path: path.clone(), why: SysError::Symlink };
    assert_eq!(g.find(P1, &key(), ANY, T0), Err(want.clone()));
    assert_eq!(g.add(Scope::Exact, 60, P1, &key(), Channel::Command, T0), Err(want.clone()));
    assert_eq!(g.revoke_all(T0), Err(want));
    assert_eq!(std::fs::read(&real).unwrap(), before);
    assert!(std::fs::symlink_metadata(&path).unwrap().file_type().is_symlink());
    std::fs::remove_file(&path).unwrap();
    // A second hard link.
    std::fs::hard_link(&real, &path).unwrap();
    assert_eq!(g.add(Scope::Exact, 60, P1, &key(), Channel::Command, T0), Err(GrantError::HardLinked { path: path.clone(), links: 2 }));
    std::fs::remove_file(&real).unwrap();
    assert!(g.find(P1, &key(), ANY, T0).unwrap().is_some());
    // Not a regular file.
    std::fs::remove_file(&path).unwrap();
    std::fs::create_dir(&path).unwrap();
    assert_eq!(g.find(P1, &key(), ANY, T0), Err(GrantError::File { path: path.clone(), why: SysError::NotRegular { kind: "directory" } }));
    std::fs::remove_dir(&path).unwrap();
    rustix::fs::mknodat(rustix::fs::CWD, &path, rustix::fs::FileType::Fifo, rustix::fs::Mode::from_raw_mode(0o600), 0).unwrap();
    let fifo = GrantError::File { path: path.clone(), why: SysError::NotRegular { kind: "FIFO (named pipe)" } };
    assert_eq!(g.find(P1, &key(), ANY, T0), Err(fifo.clone()));
    assert_eq!(g.add(Scope::Exact, 60, P1, &key(), Channel::Command, T0), Err(fifo));
    std::fs::remove_file(&path).unwrap();
    // A directory others can write: they could swap the file.
    std::fs::set_permissions(d.path(), std::fs::Permissions::from_mode(0o770)).unwrap();
    assert!(matches!(g.find(P1, &key(), ANY, T0), Err(GrantError::Dir { .. })));
    assert!(matches!(g.add(Scope::Exact, 60, P1, &key(), Channel::Command, T0), Err(GrantError::Dir { .. })));
    std::fs::set_permissions(d.path(), std::fs::Permissions::from_mode(0o700)).unwrap();
}

/// Another owner: only root can make one here, so the check runs when the tests do.
#[test]
fn a_file_owned_by_another_user_is_refused() {
    if sys::euid() != 0 {
        return;
    }
    let d = dir();
    let g = store(&d);
    g.add(Scope::Session, 60, P1, &key(), Channel::Command, T0).unwrap();
    rustix::fs::chown(g.path(), Some(rustix::process::Uid::from_raw(65534)), None).unwrap();
    let want = GrantError::File { path: g.path().to_owned(), why: SysError::WrongOwner { uid: 65534 } };
    assert_eq!(g.find(P1, &key(), ANY, T0), Err(want.clone()));
    assert_eq!(g.add(Scope::Session, 60, P1, &key(), Channel::Command, T0), Err(want));
}

#[test]
fn a_corrupt_file_fails_closed_and_only_revoke_all_replaces_it() {
    let d = dir();
    let g = store(&d);
    let good = g.add(Scope::Session, 600, P1, &key(), Channel::Command, T0).unwrap();
    let line = good.to_json().to_string();
    let with = |f: &dyn Fn(&mut Value)| {
        let mut v = good.to_json();
        f(&mut v);
        format!("{{\"version\":1,\"grants\":[{v}]}}")
    };
    let cases: Vec<(&str, String)> = vec![
        ("not JSON", "{\"version\":1,\"grants\":[".into()),
        ("a duplicate key", format!("{{\"version\":1,\"version\":1,\"grants\":[{line}]}}")),
        ("trailing data", format!("{{\"version\":1,\"grants\":[{line}]}} {{}}")),
        ("an unknown top key", format!("{{\"version\":1,\"grants\":[{line}],\"more\":[]}}")),
        ("a future version", format!("{{\"version\":2,\"grants\":[{line}]}}")),
        ("an unknown grant key", with(&|v| v["note"] = json!("x"))),
        ("a bad id", with(&|v| v["id"] = json!("XYZ"))),
        ("a forged expires", with(&|v| v["expires"] = json!(T0 + 86_400 * 365))),
        (
            "a ttl past the cap",
            with(&|v| {
                v["ttl_s"] = json!(MAX_GRANT_S + 1);
                v["expires"] = json!(T0 + MAX_GRANT_S + 1);
            }),
        ),
        ("a session grant with an action", with(&|v| v["action"] = json!(P2))),
        ("an exact grant without one", with(&|v| v["scope"] = json!("exact"))),
        ("an unknown channel", with(&|v| v["channel"] = json!("agent"))),
        ("a negative uid", with(&|v| v["uid"] = json!(-1))),
        ("two grants with one id", format!("{{\"version\":1,\"grants\":[{line},{line}]}}")),
        ("a lone surrogate", "{\"version\":1,\"grants\":[\"\\udc00\"]}".into()),
    ];
    for (what, text) in cases {
        std::fs::write(g.path(), &text).unwrap();
        assert!(matches!(g.find(P1, &key(), ANY, T0 + 1), Err(GrantError::Corrupt { .. })), "{what}: {:?}", g.find(P1, &key(), ANY, T0 + 1));
        assert!(matches!(g.list(T0 + 1), Err(GrantError::Corrupt { .. })), "{what}");
        assert!(matches!(g.add(Scope::Session, 60, P1, &key(), Channel::Command, T0), Err(GrantError::Corrupt { .. })), "{what}");
        assert!(matches!(g.revoke(&good.id, T0), Err(GrantError::Corrupt { .. })), "{what}");
        assert_eq!(std::fs::read_to_string(g.path()).unwrap(), text, "{what}: a corrupt file is never rewritten");
    }
    std::fs::write(g.path(), b"{\"version\":1,\"grants\":[\"\xff\"]}").unwrap();
    assert_eq!(g.find(P1, &key(), ANY, T0), Err(GrantError::Corrupt { path: g.path().to_owned(), why: FormError::NotUtf8 }));
    // Larger than the cap: refused for reading, replaced by revoke_all all the same.
    std::fs::write(g.path(), vec![b' '; MAX_FILE_BYTES as usize + 1]).unwrap();
    assert_eq!(g.find(P1, &key(), ANY, T0), Err(GrantError::File { path: g.path().to_owned(), why: SysError::TooLarge { max: MAX_FILE_BYTES } }));
    let r = g.revoke_all(T0).unwrap();
    assert_eq!(r, RevokedAll { count: 0, replaced_corrupt: Some(FormError::TooLarge { max: MAX_FILE_BYTES }) });
    assert_eq!(raw(&g), b"{\"version\":1,\"grants\":[\n]}\n");
    assert_eq!(g.list(T0).unwrap(), vec![]);
    std::fs::write(g.path(), b"garbage").unwrap();
    assert!(g.revoke_all(T0).unwrap().replaced_corrupt.is_some());
    assert_eq!(g.list(T0).unwrap(), vec![]);
}

#[test]
fn revoke_one_then_all() {
    let d = dir();
    let g = store(&d);
    let keys: Vec<ActionKey> = (0..3).map(|i| ActionKey::new("http_request", &format!("GET http://h/{i}"), "c", "fp")).collect();
    let added: Vec<Grant> = keys.iter().map(|k| g.add(Scope::Exact, 600, P1, k, Channel::Command, T0).unwrap()).collect();
    assert_eq!(g.revoke(&added[1].id, T0 + 1).unwrap(), added[1]);
    assert_eq!(g.find(P1, &keys[1], ANY, T0 + 1).unwrap(), None);
    let mut left = vec![added[0].clone(), added[2].clone()];
    left.sort_by(|a, b| a.id.cmp(&b.id));
    assert_eq!(g.list(T0 + 1).unwrap(), left, "same expiry: ordered by id");
    assert_eq!(g.revoke(&added[1].id, T0 + 1), Err(GrantError::NotFound { id: added[1].id.clone() }));
    assert_eq!(g.revoke_all(T0 + 1).unwrap(), RevokedAll { count: 2, replaced_corrupt: None });
    assert_eq!(g.list(T0 + 1).unwrap(), vec![]);
    // Nothing to revoke, no file: fine, and a missing file lists as empty.
    std::fs::remove_file(g.path()).unwrap();
    assert_eq!(g.list(T0).unwrap(), vec![]);
    assert_eq!(g.find(P1, &keys[0], ANY, T0).unwrap(), None);
}

#[test]
fn the_file_is_bounded() {
    let d = dir();
    let g = store(&d);
    let grants: Vec<Grant> = (0..MAX_GRANTS)
        .map(|i| {
            let k = ActionKey::new("t", &format!("x{i}"), "s", "f");
            Grant {
                id: format!("{i:016x}"),
                scope: Scope::Exact,
                policy: P1.into(),
                created: T0,
                expires: T0 + 60,
                ttl_s: 60,
                requested_ttl_s: None,
                action: Some(k.hash().to_owned()),
                tool: "t".into(),
                target: format!("x{i}"),
                subject: "s".into(),
                channel: Channel::Command,
                uid: sys::euid(),
            }
        })
        .collect();
    std::fs::write(g.path(), render_file(&grants, &g.test_key())).unwrap();
    std::fs::set_permissions(g.path(), std::fs::Permissions::from_mode(0o600)).unwrap();
    assert_eq!(g.list(T0).unwrap().len(), MAX_GRANTS);
    assert_eq!(g.add(Scope::Session, 60, P1, &key(), Channel::Command, T0), Err(GrantError::Full { path: g.path().to_owned() }));
    // Once they expire, the write that drops them has room.
    assert!(g.add(Scope::Session, 60, P1, &key(), Channel::Command, T0 + 60).is_ok());
    assert_eq!(g.list(T0 + 60).unwrap().len(), 1);
}

#[test]
fn the_approvers_grant_line_is_parsed_strictly() {
    let exact = |ttl_s| Ok(Some(GrantRequest::Lasting { scope: Scope::Exact, ttl_s }));
    let shape = |why| Err(AnswerError::Shape { why });
    type Case<'a> = (&'a [u8], Result<Option<GrantRequest>, AnswerError>);
    let cases: Vec<Case> = vec![
        (b"", Ok(None)),
        (b"\n\n  \n", Ok(None)),
        (b"approved by alice\n", Ok(None)),
        (b"{\"grant\":\"exact\",\"ttl_s\":900}\nbye\n", Ok(None)),
        (b"{\"grant\": \"exact\", \"ttl_s\": 900}\n", exact(900)),
        (b"asking...\r\n{\"ttl_s\":900,\"grant\":\"exact\"}\r\n\n", exact(900)),
        (b"{\"grant\":\"session\",\"ttl_s\":60}", Ok(Some(GrantRequest::Lasting { scope: Scope::Session, ttl_s: 60 }))),
        (b"{\"grant\":\"once\"}", Ok(Some(GrantRequest::Once))),
        (b"{\"grant\":\"once\",\"ttl_s\":5}", shape("\"once\" takes no \"ttl_s\"")),
        (b"{\"grant\":\"exact\"}", shape("\"exact\" and \"session\" need \"ttl_s\"")),
        (b"{\"grant\":\"forever\",\"ttl_s\":5}", shape("\"grant\" is not \"once\", \"exact\" or \"session\"")),
        (b"{\"grant\":\"Exact\",\"ttl_s\":5}", shape("\"grant\" is not \"once\", \"exact\" or \"session\"")),
        (b"{\"ttl_s\":5}", shape("\"grant\" is not \"once\", \"exact\" or \"session\"")),
        (b"{\"grant\":\"exact\",\"ttl_s\":0}", shape("\"ttl_s\" is not an integer from 1 to 4294967295")),
        (b"{\"grant\":\"exact\",\"ttl_s\":-1}", shape("\"ttl_s\" is not an integer from 1 to 4294967295")),
        (b"{\"grant\":\"exact\",\"ttl_s\":1.5}", shape("\"ttl_s\" is not an integer from 1 to 4294967295")),
        (b"{\"grant\":\"exact\",\"ttl_s\":900.0}", shape("\"ttl_s\" is not an integer from 1 to 4294967295")),
        (b"{\"grant\":\"exact\",\"ttl_s\":\"900\"}", shape("\"ttl_s\" is not an integer from 1 to 4294967295")),
        (b"{\"grant\":\"exact\",\"ttl_s\":4294967296}", shape("\"ttl_s\" is not an integer from 1 to 4294967295")),
        (b"{\"grant\":\"exact\",\"ttl_s\":18446744073709551616}", shape("\"ttl_s\" is not an integer from 1 to 4294967295")),
        (b"{\"grant\":\"exact\",\"ttl_s\":9,\"scope\":\"all\"}", shape("a key other than \"grant\" and \"ttl_s\"")),
        (b"{\"grant\":[\"exact\"],\"ttl_s\":9}", shape("\"grant\" is not \"once\", \"exact\" or \"session\"")),
        (b"{}", shape("\"grant\" is not \"once\", \"exact\" or \"session\"")),
        (b"{\"grant\":\"exact\",\"ttl_s\":9,\"grant\":\"session\"}", Err(AnswerError::Json { why: "duplicate object key \"grant\"".into() })),
        (b"{\"grant\":\"exact\",\"ttl_s\":9} {\"grant\":\"session\",\"ttl_s\":9}", Err(AnswerError::Json { why: String::new() })),
        (b"{\"grant\":\"exact\",\"ttl_s\":9", Err(AnswerError::Json { why: String::new() })),
        (b"{\"grant\":\"\xff\",\"ttl_s\":9}", Err(AnswerError::NotUtf8)),
    ];
    for (input, want) in cases {
        let got = parse_answer(input);
        let shown = String::from_utf8_lossy(input);
        match (&got, &want) {
            // serde_json's position text is its own; the kind is ours.
            (Err(AnswerError::Json { .. }), Err(AnswerError::Json { why })) if why.is_empty() => {}
            _ => assert_eq!(got, want, "{shown:?}"),
        }
    }
    let long = format!("{{\"grant\":\"exact\",\"ttl_s\":9,\"pad\":\"{}\"}}", "x".repeat(10_000));
    assert_eq!(parse_answer(long.as_bytes()), Err(AnswerError::TooLong { max: MAX_ANSWER_BYTES }));
    assert_eq!(AnswerError::TooLong { max: 256 }.to_string(), "the approver's grant line is ignored (this approval covers one call): longer than 256 bytes");
}

#[test]
fn the_file_round_trips_and_the_location_follows_the_journals_rule() {
    let d = dir();
    let g = store(&d);
    let a = g.add(Scope::Exact, 7200, P1, &key(), Channel::Elicitation, T0).unwrap();
    let b = g.add(Scope::Session, 60, P2, &key(), Channel::Command, T0).unwrap();
    assert_eq!(parse_file(&raw(&g)).unwrap().into_iter().map(|r| r.grant).collect::<Vec<_>>(), vec![a, b]);
    let env = |pairs: &'static [(&'static str, &'static str)]| move |k: &str| pairs.iter().find(|(n, _)| *n == k).map(|(_, v)| v.to_string());
    let none = limits(Some(1), None);
    assert_eq!(location(&none, env(&[("XDG_STATE_HOME", "/s"), ("HOME", "/h")])), Ok(PathBuf::from("/s/sallyport/grants.json")));
    assert_eq!(location(&none, env(&[("XDG_STATE_HOME", "rel"), ("HOME", "/h")])), Ok(PathBuf::from("/h/.local/state/sallyport/grants.json")));
    assert_eq!(location(&none, env(&[])), Err(GrantError::NoLocation));
    let named = GrantsPolicy { path: Some(PathBuf::from("/var/lib/sp/g.json")), ..none };
    assert_eq!(location(&named, env(&[])), Ok(PathBuf::from("/var/lib/sp/g.json")));
    assert_eq!(Grants::open(Path::new("rel.json"), &named), Err(GrantError::NotAbsolute { path: PathBuf::from("rel.json") }));
    assert_eq!(check_summary(&GrantsPolicy::default(), env(&[])), "grants: none (each approval covers one call)\n");
    assert_eq!(
        check_summary(&limits(Some(3600), None), env(&[("HOME", "/h")])),
        "grants: exact up to 3600s, session never; file /h/.local/state/sallyport/grants.json (default)\n"
    );
}

#[test]
fn errors_are_lowercase_std_errors_without_values() {
    fn is_error<E: std::error::Error>(_: &E) {}
    let e = GrantError::Corrupt { path: PathBuf::from("/s/grants.json"), why: FormError::Grant { index: 0, why: BadGrant::Id } };
    is_error(&e);
    assert_eq!(
        e.to_string(),
        "grants file /s/grants.json: corrupt: grants[0]: id is not 16 hex digits; no grant applies until `sp approve revoke --all` replaces it"
    );
    assert_eq!(GrantError::NotFound { id: "x\n".repeat(40) }.to_string().lines().count(), 1, "an id from the command line is escaped and cut");
    assert_eq!(GrantError::NotAllowed { scope: Scope::Session }.to_string(), "the policy allows no session grant (approval.grants.session_max_s is not set)");
}

/// Each reason a file is corrupt, as `sp approve` prints it (the texts are what the
/// strings were before the reasons had types).
#[test]
fn form_errors_name_the_reason_in_lowercase() {
    let cases: Vec<(FormError, &str)> = vec![
        (FormError::NotUtf8, "not UTF-8"),
        (FormError::NotObject, "not a JSON object"),
        (FormError::UnknownKey { key: "more".into() }, "unknown key \"more\""),
        (FormError::Version, "\"version\" is not 1"),
        (FormError::GrantsNotArray, "\"grants\" is not an array"),
        (FormError::TooMany, "more than 1000 grants"),
        (FormError::TooLarge { max: 9 }, "larger than 9 bytes"),
        (FormError::SameId { index: 1, id: "00ff".into() }, "grants[1]: a second grant with id 00ff"),
        (FormError::Grant { index: 2, why: BadGrant::NotObject }, "grants[2]: not an object"),
        (FormError::Grant { index: 0, why: BadGrant::TooLong { key: "target", max: 256 } }, "grants[0]: target is longer than 256 bytes"),
        (FormError::Grant { index: 0, why: BadGrant::NotString { key: "tool" } }, "grants[0]: tool is not a string"),
        (FormError::Grant { index: 0, why: BadGrant::NotNumber { key: "uid" } }, "grants[0]: uid is not a non-negative integer"),
        (FormError::Grant { index: 0, why: BadGrant::Scope }, "grants[0]: scope is not \"exact\" or \"session\""),
        (FormError::Grant { index: 0, why: BadGrant::Channel }, "grants[0]: channel is not \"command\" or \"elicitation\""),
        (FormError::Grant { index: 0, why: BadGrant::ExactWithoutAction }, "grants[0]: an exact grant without action"),
    ];
    for (e, want) in cases {
        assert_eq!(e.to_string(), want);
    }
    assert_eq!(BadGrant::Ttl.to_string(), format!("ttl_s is not from 1 to {MAX_GRANT_S}"));
}

/// The parser names the first thing wrong, as a value.
#[test]
fn a_corrupt_file_is_refused_for_a_named_reason() {
    let d = dir();
    let g = store(&d);
    let good = g.add(Scope::Session, 600, P1, &key(), Channel::Command, T0).unwrap();
    let line = good.to_json().to_string();
    let mut bad_id = good.to_json();
    bad_id["id"] = json!("XYZ");
    let mut tool_number = good.to_json();
    tool_number["tool"] = json!(7);
    let mut long_key = good.to_json();
    long_key["k".repeat(40)] = json!(1);
    let cases: Vec<(String, FormError)> = vec![
        ("[]".into(), FormError::NotObject),
        (format!("{{\"version\":2,\"grants\":[{line}]}}"), FormError::Version),
        (format!("{{\"version\":1,\"grants\":[{line}],\"more\":[]}}"), FormError::UnknownKey { key: "more".into() }),
        ("{\"version\":1,\"grants\":{}}".into(), FormError::GrantsNotArray),
        (format!("{{\"version\":1,\"grants\":[{bad_id}]}}"), FormError::Grant { index: 0, why: BadGrant::Id }),
        (format!("{{\"version\":1,\"grants\":[{tool_number}]}}"), FormError::Grant { index: 0, why: BadGrant::NotString { key: "tool" } }),
        (
            format!("{{\"version\":1,\"grants\":[{line},{long_key}]}}"),
            FormError::Grant { index: 1, why: BadGrant::UnknownKey { key: format!("{}…", "k".repeat(32)) } },
        ),
        (format!("{{\"version\":1,\"grants\":[{line},{line}]}}"), FormError::SameId { index: 1, id: good.id.clone() }),
    ];
    for (text, want) in cases {
        assert_eq!(parse_file(text.as_bytes()), Err(want), "{text}");
    }
}
