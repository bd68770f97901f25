//! bytes -> known_hosts parsing and matching (`ssh/known_hosts.rs`).
//!
//! Input: a first line `HOST PORT`, then the file's text. For the key blobs found in
//! the text (and one made up), `check` must tell the truth about the lines it cites:
//! `Known` cites a plain entry with exactly that key and no `@revoked` line has it;
//! `Revoked` cites an `@revoked` line with it; `Changed` a line with another key of the
//! same type. And an entry appended for the host (plain, and hashed `|1|salt|hmac`)
//! makes the key `Known` (or `Revoked`, if the text revoked it).

#![no_main]

use base64::engine::general_purpose::STANDARD;
use base64::Engine as _;
use hmac::{Hmac, Mac};
use libfuzzer_sys::fuzz_target;
use sallyport::fuzzing::{blob_type, lookup_name, KnownHosts, Verdict};
use sha1::Sha1;

/// (marker, key blob).
type Key<'a> = Option<(Option<&'a str>, Vec<u8>)>;

/// (marker, key blob) of a line as this harness reads it; `None` if it has no key
/// (a comment, or no valid `type base64` pair whose blob is of that type).
fn line_key(line: &str) -> Key<'_> {
    let line = line.trim();
    if line.starts_with('#') {
        return None;
    }
    let mut f = line.split_ascii_whitespace();
    let mut first = f.next()?;
    let marker = first.starts_with('@').then_some(first);
    if marker.is_some() {
        first = f.next()?;
    }
    let _ = first;
    let key_type = f.next()?;
    let blob = STANDARD.decode(f.next()?).ok()?;
    (blob_type(&blob)? == key_type).then_some((marker, blob))
}

fn make_blob(key_type: &str, body: &[u8]) -> Vec<u8> {
    let mut b = (key_type.len() as u32).to_be_bytes().to_vec();
    b.extend_from_slice(key_type.as_bytes());
    b.extend_from_slice(&(body.len() as u32).to_be_bytes());
    b.extend_from_slice(body);
    b
}

/// An `@revoked` line with this key, among the lines that are not malformed (those
/// never match anything, by the module's rule).
fn revoked_anywhere(lines: &[&str], malformed: &[usize], blob: &[u8]) -> bool {
    lines.iter().enumerate().any(|(i, l)| !malformed.contains(&(i + 1)) && matches!(line_key(l), Some((Some("@revoked"), b)) if b == blob))
}

fuzz_target!(|data: &[u8]| {
    let Ok(all) = std::str::from_utf8(data) else { return };
    let (head, text) = all.split_once('\n').unwrap_or((all, ""));
    let (host, port) = head.split_once(' ').unwrap_or((head, "22"));
    let port: u16 = port.trim().parse().unwrap_or(22);
    let kh = KnownHosts::parse(text);
    let lines: Vec<&str> = text.lines().collect();

    let mut blobs: Vec<Vec<u8>> = lines.iter().filter_map(|l| line_key(l).map(|(_, b)| b)).take(8).collect();
    blobs.push(make_blob("ssh-ed25519", &data[..data.len().min(32)]));
    for blob in &blobs {
        let cited = |line: usize| -> (&str, Key<'_>) {
            assert!(line >= 1 && line <= lines.len(), "cites line {line} of {}", lines.len());
            assert!(!kh.malformed.contains(&line), "cites malformed line {line}");
            (lines[line - 1], line_key(lines[line - 1]))
        };
        match kh.check(host, port, blob) {
            Verdict::Known { line } => {
                let (l, key) = cited(line);
                assert!(matches!(key, Some((None, ref b)) if b == blob), "Known cites line {line} {l:?} without that key");
                assert!(!revoked_anywhere(&lines, &kh.malformed, blob), "Known for a revoked key");
            }
            Verdict::Revoked { line } => {
                let (l, key) = cited(line);
                assert!(matches!(key, Some((Some("@revoked"), ref b)) if b == blob), "Revoked cites line {line} {l:?}");
            }
            Verdict::Changed { line } => {
                let (l, key) = cited(line);
                let Some((None, b)) = key else { panic!("Changed cites line {line} {l:?}") };
                assert!(b != *blob && blob_type(&b) == Some(blob_type(blob).unwrap_or_default()), "Changed cites line {line} {l:?}");
                assert!(!revoked_anywhere(&lines, &kh.malformed, blob), "Changed for a revoked key");
            }
            Verdict::OtherTypes { types } => {
                assert!(!types.is_empty());
                assert!(!revoked_anywhere(&lines, &kh.malformed, blob), "OtherTypes for a revoked key");
            }
            Verdict::Unknown => assert!(!revoked_anywhere(&lines, &kh.malformed, blob), "Unknown for a revoked key"),
        }
    }

    // Appending an entry for the host makes its key known.
    let plain_host = !host.is_empty() && host.bytes().all(|b| b.is_ascii_alphanumeric() || b"-.:".contains(&b));
    if !plain_host {
        return;
    }
    let blob = blobs.last().unwrap();
    let name = lookup_name(host, port);
    let base = if text.is_empty() || text.ends_with('\n') { text.to_owned() } else { format!("{text}\n") };
    let salt: Vec<u8> = (0..20u8).map(|i| i ^ data.len() as u8).collect();
    let mut mac = <Hmac<Sha1> as Mac>::new_from_slice(&salt).unwrap();
    mac.update(name.as_bytes());
    let hash = mac.finalize().into_bytes();
    for entry in [name.clone(), format!("|1|{}|{}", STANDARD.encode(&salt), STANDARD.encode(hash))] {
        let with = format!("{base}{entry} ssh-ed25519 {}\n", STANDARD.encode(blob));
        let kh = KnownHosts::parse(&with);
        let lines: Vec<&str> = with.lines().collect();
        match kh.check(host, port, blob) {
            Verdict::Known { .. } => {}
            Verdict::Revoked { .. } if revoked_anywhere(&lines, &kh.malformed, blob) => {}
            other => panic!("appended {entry:?} for {host}:{port}, got {other:?}"),
        }
        assert!(kh.known_types(host, port).iter().any(|t| t == "ssh-ed25519"));
    }
});
