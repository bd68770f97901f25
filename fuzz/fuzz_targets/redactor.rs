//! bytes -> the redactor (`redact.rs`): a secret (the first line) is planted in a body
//! (the rest) at a position the bytes choose, in each spelling sp(1) REDACTION
//! promises, computed here independently: as is, in either ASCII letter case,
//! percent-encoded (unreserved bytes kept, or every byte; hex in either case; twice),
//! form-encoded, JSON-escaped, `\uXXXX` (surrogate pairs) and `\xHH` for every
//! character, HTML `&#NNN;` / `&#xHH;` references, wrapped across a line break, hex,
//! base64 and base64url with and without padding, the secret-only characters of base64
//! at byte offsets 1 and 2 of a longer stream (from 8 characters), and the password of
//! `user:password` (from 4 bytes) or the key of `key:`; and each of those wrapped
//! across a line break at a position the bytes choose. Also (issue #20) the secret's
//! UTF-16LE and UTF-16BE bytes, and a run of `min_run(n)` bytes of it (as is and
//! upper-cased) at an offset the bytes choose. After `redact`, the planted spelling
//! is nowhere in the text between the markers, in any letter case.

#![no_main]

use base64::engine::general_purpose::{STANDARD, STANDARD_NO_PAD, URL_SAFE, URL_SAFE_NO_PAD};
use base64::Engine as _;
use libfuzzer_sys::fuzz_target;
use sallyport::fuzzing::{min_run, Redactor, MIN_CORE_CHARS, MIN_PART_BYTES};

const MARKER: &[u8] = b"[REDACTED:c]";

fn pct(s: &str, all: bool, upper: bool) -> String {
    s.bytes()
        .map(|b| {
            if !all && (b.is_ascii_alphanumeric() || b"-._~".contains(&b)) {
                (b as char).to_string()
            } else if upper {
                format!("%{b:02X}")
            } else {
                format!("%{b:02x}")
            }
        })
        .collect()
}

fn hex(s: &str) -> String {
    s.bytes().map(|b| format!("{b:02x}")).collect()
}

fn json_u(s: &str) -> String {
    s.encode_utf16().map(|u| format!("\\u{u:04x}")).collect()
}

/// The characters of base64 that depend on `secret` alone when it starts at byte
/// offset `k` of the stream.
fn core(secret: &[u8], k: usize) -> Option<String> {
    let mut buf = vec![0u8; k];
    buf.extend_from_slice(secret);
    let enc = STANDARD_NO_PAD.encode(&buf);
    let (first, last) = ((8 * k).div_ceil(6), 8 * (k + secret.len()) / 6);
    (last > first && last - first >= MIN_CORE_CHARS).then(|| enc[first..last].to_owned())
}

fn contains_ci(hay: &[u8], needle: &[u8]) -> bool {
    !needle.is_empty() && hay.windows(needle.len()).any(|w| w.eq_ignore_ascii_case(needle))
}

fn spellings(secret: &str) -> Vec<(String, String)> {
    let mut v: Vec<(String, String)> = Vec::new();
    let mut add = |what: &str, s: String| v.push((what.to_owned(), s));
    add("raw", secret.to_owned());
    add("upper", secret.to_ascii_uppercase());
    add("lower", secret.to_ascii_lowercase());
    add("pct", pct(secret, false, true));
    add("pct-lower", pct(secret, false, false));
    add("pct-all", pct(secret, true, true));
    add("pct-twice", pct(&pct(secret, true, true), true, false));
    add("form", url::form_urlencoded::byte_serialize(secret.as_bytes()).collect());
    let json = serde_json::to_string(secret).unwrap();
    add("json", json[1..json.len() - 1].to_owned());
    add("json-u", json_u(secret));
    add("x-hex", secret.bytes().map(|b| format!("\\x{b:02X}")).collect());
    add("html-dec", secret.chars().map(|c| format!("&#{};", c as u32)).collect());
    add("html-hex", secret.chars().map(|c| format!("&#x{:x};", c as u32)).collect());
    if let Some((i, _)) = secret.char_indices().nth(secret.chars().count() / 2).filter(|(i, _)| *i > 0) {
        add("wrapped", format!("{}\r\n{}", &secret[..i], &secret[i..]));
    }
    add("hex", hex(secret));
    add("hex-upper", hex(secret).to_uppercase());
    add("b64", STANDARD.encode(secret));
    add("b64-nopad", STANDARD_NO_PAD.encode(secret));
    add("b64url", URL_SAFE.encode(secret));
    add("b64url-nopad", URL_SAFE_NO_PAD.encode(secret));
    if let Some((user, password)) = secret.split_once(':') {
        if password.len() >= MIN_PART_BYTES {
            add("password", password.to_owned());
            add("password-b64", STANDARD.encode(password));
        } else if password.is_empty() && !user.is_empty() {
            add("key", user.to_owned());
        }
    }
    v
}

fuzz_target!(|data: &[u8]| {
    let Some(nl) = data.iter().position(|b| *b == b'\n') else { return };
    let (Ok(secret), rest) = (std::str::from_utf8(&data[..nl]), &data[nl + 1..]) else { return };
    // What a Vault accepts: non-empty, no control character (64 KiB at most; kept short).
    if secret.is_empty() || secret.len() > 256 || secret.chars().any(char::is_control) {
        return;
    }
    let (at, body) = match rest.split_first() {
        Some((p, body)) => (*p as usize % (body.len() + 1), body),
        None => (0, rest),
    };
    let mut r = Redactor::default();
    r.add("c", secret);

    let plant = |spelling: &[u8]| -> Vec<u8> {
        let mut text = body[..at].to_vec();
        // An odd run of backslashes before the plant would escape its first backslash
        // (`\` + `\u0041` is `\\` `u0041`): not an echo of the secret in any reading.
        // Counted with line breaks skipped, as the joined reading sees them: `\` LF `\`
        // LF `x41` reads `\\` `x41` joined, and has no escape line by line.
        let before = body[..at].iter().rev().filter(|b| !matches!(b, b'\n' | b'\r'));
        if spelling.starts_with(b"\\") && before.take_while(|b| **b == b'\\').count() % 2 == 1 {
            text.push(b' ');
        }
        text.extend_from_slice(spelling);
        text.extend_from_slice(&body[at..]);
        text
    };
    let check = |what: &str, text: &[u8], needle: &[u8]| {
        let out = r.redact(text).unwrap_or_else(|| text.to_vec());
        // The text between markers, piece by piece: a needle that would span a marker is
        // not an echo (a stand-in byte for the marker could complete one: the UTF-16BE
        // spelling of U+0188 is 01 88, and 01 stood for the marker).
        let mut pieces: Vec<&[u8]> = Vec::new();
        let (mut from, mut i) = (0, 0);
        while i < out.len() {
            if out[i..].starts_with(MARKER) {
                pieces.push(&out[from..i]);
                i += MARKER.len();
                from = i;
            } else {
                i += 1;
            }
        }
        pieces.push(&out[from..]);
        assert!(
            !pieces.iter().any(|p| contains_ci(p, needle)),
            "{what} spelling {:?} of secret {secret:?} survived:\n in:  {:?}\n out: {:?}",
            String::from_utf8_lossy(needle),
            String::from_utf8_lossy(text),
            String::from_utf8_lossy(&out)
        );
    };
    // Each spelling also wrapped across a line break (`\n` or `\r\n`, as the bytes
    // choose) at a position the bytes choose: sp(1) REDACTION reads a wrapped echo
    // joined, at any position, whatever escapes the secret holds or follows.
    let pick = body.get(at).copied().unwrap_or(0) as usize;
    let brk = if pick & 1 == 0 { "\n" } else { "\r\n" };
    for (what, s) in spellings(secret) {
        check(what.as_str(), &plant(s.as_bytes()), s.as_bytes());
        if what == "wrapped" || s.len() < 2 {
            continue;
        }
        let mut i = 1 + (pick >> 1) % (s.len() - 1);
        while !s.is_char_boundary(i) {
            i += 1;
        }
        if i < s.len() {
            let wrapped = format!("{}{brk}{}", &s[..i], &s[i..]);
            check(&format!("{what}, wrapped"), &plant(wrapped.as_bytes()), wrapped.as_bytes());
        }
    }
    // Inside a longer base64 stream, at byte offsets 1 and 2 (and 0).
    for k in 0..3usize {
        let Some(core) = core(secret.as_bytes(), k) else { continue };
        let mut stream: Vec<u8> = body.iter().take(k).copied().collect();
        stream.resize(k, b'x');
        stream.extend_from_slice(secret.as_bytes());
        stream.extend_from_slice(b"..");
        for (what, enc) in [("b64-stream", STANDARD.encode(&stream)), ("b64url-stream", URL_SAFE.encode(&stream))] {
            let want = if what == "b64url-stream" { core.replace('+', "-").replace('/', "_") } else { core.clone() };
            assert!(enc.contains(&want), "harness: core {want:?} not in {enc:?}");
            check(what, &plant(enc.as_bytes()), want.as_bytes());
        }
    }
    // UTF-16, both byte orders, in the raw bytes.
    let le: Vec<u8> = secret.encode_utf16().flat_map(u16::to_le_bytes).collect();
    let be: Vec<u8> = secret.encode_utf16().flat_map(u16::to_be_bytes).collect();
    check("utf16le", &plant(&le), &le);
    check("utf16be", &plant(&be), &be);
    // A run of the secret's bytes as long as the substring rule asks, where the bytes say.
    let n = secret.len();
    let run = min_run(n);
    if n > run {
        let from = pick % (n - run + 1);
        let part = &secret.as_bytes()[from..from + run];
        check("run", &plant(part), part);
        check("run-upper", &plant(&part.to_ascii_uppercase()), part);
    }
});
