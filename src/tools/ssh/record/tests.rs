//! The recording's pure parts: events cut from the reads and scrubbed, the byte bound,
//! and the private file's creation rules.

use super::*;
use crate::tools::ssh::result::Chunk;
use std::os::unix::fs::PermissionsExt;

const SECRET: &str = "hunter2-very-secret-42";

fn vault() -> Vault {
    let mut v = Vault::new();
    v.remember_local("web1-sudo", SECRET);
    v
}

fn outcome(reads: &[(u64, bool, &[u8])]) -> SshOutcome {
    let mut o = SshOutcome::default();
    for (ms, stderr, data) in reads {
        let buf = if *stderr { &mut o.stderr } else { &mut o.stdout };
        buf.extend_from_slice(data);
        o.chunks.push(Chunk { at: Duration::from_millis(*ms), stderr: *stderr, end: buf.len() });
    }
    o
}

fn texts(events: &[Event]) -> Vec<(u128, &str, &str)> {
    events.iter().map(|(at, k, t)| (at.as_millis(), *k, t.as_str())).collect()
}

/// One event per read, in arrival order across the streams, with its time; a secret
/// inside one read is replaced in it, and the timing of the others is kept.
#[test]
fn one_event_per_read_scrubbed() {
    let o = outcome(&[(5, false, b"hello\n"), (7, true, b"warn\n"), (9, false, format!("pw={SECRET}\n").as_bytes())]);
    let e = events(&o, &vault());
    assert_eq!(texts(&e), [(5, "o", "hello\n"), (7, "e", "warn\n"), (9, "o", "pw=[REDACTED:web1-sudo]\n")]);
}

/// An echo split between two reads: neither half may stay. The stream falls back to one
/// event holding exactly the agent's text, at its last read.
#[test]
fn an_echo_split_across_reads_is_scrubbed_whole() {
    let (a, b) = SECRET.split_at(9);
    let o = outcome(&[(1, false, format!("x{a}").as_bytes()), (2, false, format!("{b}y\n").as_bytes())]);
    let e = events(&o, &vault());
    let all: String = e.iter().map(|(_, _, t)| t.as_str()).collect();
    assert!(!all.contains(a) && !all.contains(b), "{all:?}");
    assert_eq!(all, "x[REDACTED:web1-sudo]y\n");
    // base64 and upper case, each in its own read
    use base64::Engine as _;
    let b64 = base64::engine::general_purpose::STANDARD.encode(SECRET);
    let o = outcome(&[(1, false, format!("{b64}\n").as_bytes()), (3, false, format!("{}\n", SECRET.to_uppercase()).as_bytes())]);
    assert_eq!(texts(&events(&o, &vault())), [(1, "o", "[REDACTED:web1-sudo]\n"), (3, "o", "[REDACTED:web1-sudo]\n")]);
}

/// A character split between two reads goes with the second, not as two U+FFFD.
#[test]
fn a_character_split_between_reads_stays_whole() {
    let o = outcome(&[(1, false, b"caf\xc3"), (2, false, b"\xa9!")]);
    assert_eq!(texts(&events(&o, &vault())), [(1, "o", "caf"), (2, "o", "\u{e9}!")]);
}

/// Lines that do not fit are left out whole, and the cut is reported.
#[test]
fn max_bytes_cuts_at_a_line() {
    let header = json!({"version": 2});
    let ev: Vec<Event> = (0..10).map(|i| (Duration::from_millis(i * 1500), "o", "0123456789".to_owned())).collect();
    let (all, cut) = render(&header, &ev, 10_000);
    assert!(!cut);
    let text = String::from_utf8(all.clone()).unwrap();
    assert_eq!(text.lines().nth(1), Some("[0.0,\"o\",\"0123456789\"]"));
    assert_eq!(text.lines().nth(2), Some("[1.5,\"o\",\"0123456789\"]"));
    let (some, cut) = render(&header, &ev, 60);
    assert!(cut);
    assert!(some.len() <= 60 && some.ends_with(b"\n"), "{}", String::from_utf8_lossy(&some));
    assert_eq!(String::from_utf8(some).unwrap().lines().count(), 3);
}

/// The directory rules of `sys::create_private`, each refusal named; nothing is created
/// where the directory is refused, and a name that exists is never reused.
#[test]
fn the_directory_must_be_private_and_the_file_new() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("rec");
    let spec = Recordings { dir: dir.clone(), max_bytes: 4096 };
    let e = Recording::create(&spec, "web1").unwrap_err();
    assert_eq!(e.why, crate::sys::SysError::Missing);
    assert!(e.to_string().ends_with("no such file); the command was not run"), "{e}");
    std::fs::create_dir(&dir).unwrap();
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o750)).unwrap();
    assert_eq!(Recording::create(&spec, "web1").unwrap_err().why, crate::sys::SysError::TooOpen { mode: 0o750, forbidden: 0o077 });
    assert_eq!(std::fs::read_dir(&dir).unwrap().count(), 0);
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o700)).unwrap();
    let link = tmp.path().join("link");
    std::os::unix::fs::symlink(&dir, &link).unwrap();
    let e = Recording::create(&Recordings { dir: link, max_bytes: 4096 }, "web1").unwrap_err();
    assert!(matches!(e.why, crate::sys::SysError::Io { .. } | crate::sys::SysError::Symlink), "{e}");
    let r = Recording::create(&spec, "web1").unwrap();
    let meta = std::fs::symlink_metadata(r.path()).unwrap();
    assert_eq!((meta.permissions().mode() & 0o7777, meta.len()), (0o600, 0));
    let name = r.path().file_name().unwrap().to_str().unwrap().to_owned();
    assert!(name.ends_with(".cast") && name.contains("-web1-"), "{name}");
    assert!(crate::sys::create_private(&dir, &name, 1).is_err(), "an existing name is refused (O_EXCL)");
}
