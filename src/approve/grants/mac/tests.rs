//! The grants key and the records' MACs (issue 31, section 2), against real files in
//! private temporary directories, with `now` injected.
//!
//! Attacks tried (all held):
//! - a grant sp did not write: a record with no `mac`, a `mac` of 64 zeros, a short
//!   one, one made with another key, a record sp signed then edited (expiry pushed out
//!   with `created` moved to match, an exact grant widened to session, the uid changed,
//!   the channel changed to the command): no grant applies, to that call or any other;
//!   each forged record is noted once (a second read notes nothing new, an edit of it
//!   is new); the next write drops them and keeps what sp signed;
//! - a whole file written before any key existed: nothing applies, and reading never
//!   makes a key;
//! - a key file that is 0644, 31 or 33 bytes, a symbolic link: refused with the reason,
//!   no grant applies, and it is never replaced;
//! - the key file replaced after a handle read the key: that handle keeps its key (a
//!   running sp is not fooled), a fresh one finds nothing signed;
//! - four processes (threads with their own handles and descriptors) making the key at
//!   once: one key, and every grant each wrote verifies under it.

use std::os::unix::fs::PermissionsExt;

use serde_json::{json, Value};

use super::super::{ActionKey, Channel, GrantError, Grants, Scope};
use super::{GrantKey, KeyError, Unsigned};
use crate::policy::approval::GrantsPolicy;
use crate::sys::{self, SysError};

const P1: &str = "1111111111111111111111111111111111111111111111111111111111111111";
const T0: u64 = 1_800_000_000;
const ANY: &[Channel] = &[Channel::Command, Channel::Elicitation];

fn dir() -> tempfile::TempDir {
    // A private (0700) directory under the sticky /tmp: `check_dirs` accepts it.
    tempfile::Builder::new().prefix("sp-grants-mac-").tempdir().unwrap()
}

fn limits() -> GrantsPolicy {
    GrantsPolicy { exact_max_s: Some(3600), session_max_s: Some(900), path: None }
}

fn store(d: &tempfile::TempDir) -> Grants {
    Grants::open(&d.path().join("grants.json"), &limits()).unwrap()
}

fn key() -> ActionKey {
    ActionKey::new("http_request", "PUT http://127.0.0.1:8080/v1/jobs/7", "sidecar", "fp0")
}

/// A record as it is in the file, `mac` included.
fn records(g: &Grants) -> Vec<Value> {
    let v: Value = serde_json::from_slice(&std::fs::read(g.path()).unwrap()).unwrap();
    v["grants"].as_array().unwrap().clone()
}

fn write_records(g: &Grants, records: &[Value]) {
    let text = serde_json::json!({"version": 1, "grants": records}).to_string();
    std::fs::write(g.path(), text).unwrap();
    std::fs::set_permissions(g.path(), std::fs::Permissions::from_mode(0o600)).unwrap();
}

#[test]
fn a_grant_sp_did_not_write_is_ignored_and_noted_once() {
    let d = dir();
    let g = store(&d);
    let exact = g.add(Scope::Exact, 60, P1, &key(), Channel::Elicitation, T0).unwrap();
    assert_eq!(g.find(P1, &key(), ANY, T0 + 1).unwrap(), Some(exact.clone()), "a grant sp wrote is honoured");
    assert_eq!(g.take_forged(), vec![]);
    let signed = records(&g).remove(0);
    assert!(super::super::form::is_hex(signed["mac"].as_str().unwrap(), 64));
    let other_key = GrantKey::from_bytes([7; 32]);
    let edit = |f: &dyn Fn(&mut Value)| {
        let mut v = signed.clone();
        f(&mut v);
        v
    };
    let cases: Vec<(&str, Value, Unsigned)> = vec![
        ("no mac", edit(&|v| drop(v.as_object_mut().unwrap().remove("mac"))), Unsigned::NoMac),
        ("a mac of zeros", edit(&|v| v["mac"] = json!("0".repeat(64))), Unsigned::BadMac),
        ("a short mac", edit(&|v| v["mac"] = json!("abc")), Unsigned::BadMac),
        ("another key's mac", edit(&|v| v["mac"] = json!(other_key.sign(&exact))), Unsigned::BadMac),
        (
            "expiry extended",
            edit(&|v| {
                v["created"] = json!(T0 + 3000);
                v["expires"] = json!(T0 + 3060);
            }),
            Unsigned::BadMac,
        ),
        (
            "widened to session",
            edit(&|v| {
                v["scope"] = json!("session");
                v.as_object_mut().unwrap().remove("action");
            }),
            Unsigned::BadMac,
        ),
        ("the channel made command", edit(&|v| v["channel"] = json!("command")), Unsigned::BadMac),
    ];
    for (what, record, why) in cases {
        write_records(&g, std::slice::from_ref(&record));
        let id = exact.id.clone();
        let found = g.find(P1, &key(), ANY, T0 + 1).unwrap();
        assert_eq!(found, None, "{what}: no grant");
        let session = ActionKey::new("ssh_exec", "web1: id", "web1", "fp9");
        assert_eq!(g.find(P1, &session, ANY, T0 + 3001).unwrap(), None, "{what}: no grant for another call either");
        let noted = g.take_forged();
        assert_eq!(noted.len(), 1, "{what}: noted once, though read twice: {noted:?}");
        assert_eq!((noted[0].id.as_str(), noted[0].why), (id.as_str(), why), "{what}");
        assert_eq!(g.list(T0 + 1).unwrap(), vec![], "{what}: not listed");
        assert_eq!(g.take_forged(), vec![], "{what}: the same record is not noted again");
    }
    // The next write keeps only what the key verifies.
    let forged = edit(&|v| {
        v["id"] = json!("00000000000000ff");
        v["uid"] = json!(sys::euid().wrapping_add(1));
    });
    write_records(&g, &[signed.clone(), forged]);
    assert_eq!(g.find(P1, &key(), ANY, T0 + 1).unwrap(), Some(exact.clone()));
    assert_eq!(g.take_forged().len(), 1);
    g.add(Scope::Session, 60, P1, &key(), Channel::Command, T0 + 2).unwrap();
    let kept: Vec<String> = records(&g).iter().map(|r| r["mac"].as_str().unwrap().to_owned()).collect();
    assert_eq!(kept.len(), 2, "the signed exact grant and the new session grant, not the forgery");
    assert!(kept.contains(&signed["mac"].as_str().unwrap().to_owned()));
}

#[test]
fn without_a_key_file_nothing_is_a_grant_and_a_bad_key_file_is_refused() {
    let d = dir();
    let g = store(&d);
    g.add(Scope::Session, 60, P1, &key(), Channel::Command, T0).unwrap();
    let key_file = d.path().join("grants.json.key");
    // A file written before (or without) any key: a fresh handle finds no key file.
    std::fs::remove_file(&key_file).unwrap();
    let fresh = store(&d);
    assert_eq!(fresh.find(P1, &key(), ANY, T0 + 1).unwrap(), None);
    assert_eq!(fresh.take_forged().iter().map(|f| f.why).collect::<Vec<_>>(), vec![Unsigned::NoKey]);
    assert!(!key_file.exists(), "a read never makes a key");
    // The handle that read the key keeps it: a key file replaced later changes nothing.
    assert!(g.find(P1, &key(), ANY, T0 + 1).unwrap().is_some());
    std::fs::write(&key_file, [9u8; 32]).unwrap();
    std::fs::set_permissions(&key_file, std::fs::Permissions::from_mode(0o600)).unwrap();
    assert!(g.find(P1, &key(), ANY, T0 + 1).unwrap().is_some(), "the key in memory is the key");
    assert_eq!(store(&d).find(P1, &key(), ANY, T0 + 1).unwrap(), None, "another key file signs nothing sp wrote");
    let key_err = |why| Err(GrantError::Key { path: key_file.clone(), why });
    std::fs::set_permissions(&key_file, std::fs::Permissions::from_mode(0o644)).unwrap();
    assert_eq!(store(&d).find(P1, &key(), ANY, T0 + 1), key_err(KeyError::File(SysError::TooOpen { mode: 0o644, forbidden: 0o077 })));
    for len in [31, 33] {
        std::fs::write(&key_file, vec![1u8; len]).unwrap();
        std::fs::set_permissions(&key_file, std::fs::Permissions::from_mode(0o600)).unwrap();
        assert_eq!(store(&d).find(P1, &key(), ANY, T0 + 1), key_err(KeyError::Length), "{len} bytes");
        assert_eq!(store(&d).prepare_key(), Err(GrantError::Key { path: key_file.clone(), why: KeyError::Length }), "{len} bytes: never replaced");
    }
    std::fs::remove_file(&key_file).unwrap();
    std::os::unix::fs::symlink(d.path().join("elsewhere"), &key_file).unwrap();
    assert_eq!(store(&d).find(P1, &key(), ANY, T0 + 1), key_err(KeyError::File(SysError::Symlink)));
    assert_eq!(
        GrantError::Key { path: key_file.clone(), why: KeyError::Length }.to_string(),
        format!("grants key {}: is not 32 bytes long (refused: remove it, and approve again); no grant applies", key_file.display())
    );
    assert_eq!(format!("{:?}", GrantKey::from_bytes([0x41; 32])), "GrantKey(***)");
}

#[test]
fn two_processes_making_the_key_at_once_agree_on_one() {
    // A few rounds only: every path read goes into `sys`'s bounded list of local paths,
    // which the whole test process shares.
    for _ in 0..4 {
        let d = dir();
        let path = d.path().join("grants.json");
        let threads: Vec<_> = (0..4)
            .map(|_| {
                let path = path.clone();
                std::thread::spawn(move || {
                    let g = Grants::open(&path, &limits()).unwrap();
                    g.prepare_key().unwrap();
                    // What this handle signs, any other handle verifies.
                    let k = ActionKey::new("t", &format!("{:?}", std::thread::current().id()), "s", "f");
                    g.add(Scope::Exact, 600, P1, &k, Channel::Command, T0).unwrap();
                    g.test_key()
                })
            })
            .collect();
        let keys: Vec<_> = threads.into_iter().map(|t| t.join().unwrap()).collect();
        assert!(keys.windows(2).all(|w| w[0] == w[1]), "one key");
        let g = Grants::open(&path, &limits()).unwrap();
        assert_eq!(g.list(T0).unwrap().len(), 4, "every grant verifies under the one key");
        assert_eq!(g.take_forged(), vec![]);
    }
}
