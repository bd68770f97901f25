//! The literal spellings of one secret that the redactor searches for: the secret, its
//! percent, form, JSON, hex, base64 and UTF-16 forms, the base64 cores at each offset of
//! an encoded stream, and the parts of a `user:password` secret.

use base64::Engine as _;
use zeroize::Zeroizing;

use super::MIN_CORE_CHARS;

/// The literal patterns for one secret: the secret, its form, hex, JSON, base64 and
/// UTF-16 spellings, and the base64 cores; for `user:password`, the password's too,
/// when it is at least `min_part` bytes. Every intermediate buffer that holds a
/// spelling is zeroed when dropped.
pub(super) fn spellings_from(raw: &str, min_part: usize) -> Vec<Zeroizing<Vec<u8>>> {
    let mut out: Vec<Zeroizing<Vec<u8>>> = bases(raw, min_part).into_iter().flat_map(one_secret).collect();
    out.retain(|v| !v.is_empty());
    out.sort_by(|a, b| a.as_slice().cmp(b.as_slice()));
    out.dedup_by(|a, b| a.as_slice() == b.as_slice());
    out
}

/// The values searched for on their own: the secret, and for `user:password` the
/// password (from `min_part` bytes), or for `key:` the key.
pub(super) fn bases(raw: &str, min_part: usize) -> Vec<&str> {
    let mut out = vec![raw];
    if let Some((user, password)) = raw.split_once(':') {
        if password.len() >= min_part {
            out.push(password);
        } else if password.is_empty() && !user.is_empty() {
            // `key:` (an API key as the user name, no password, as some APIs do).
            out.push(user);
        }
    }
    out
}

fn one_secret(raw: &str) -> Vec<Zeroizing<Vec<u8>>> {
    use base64::engine::general_purpose::{STANDARD, STANDARD_NO_PAD, URL_SAFE, URL_SAFE_NO_PAD};
    use std::fmt::Write as _;
    let pct = |all: bool| -> Zeroizing<String> {
        let mut s = Zeroizing::new(String::with_capacity(raw.len() * 3));
        for b in raw.bytes() {
            if !all && (b.is_ascii_alphanumeric() || b"-._~".contains(&b)) {
                s.push(b as char);
            } else {
                let _ = write!(s, "%{b:02X}");
            }
        }
        s
    };
    let mut hex = Zeroizing::new(String::with_capacity(raw.len() * 2));
    for b in raw.bytes() {
        let _ = write!(hex, "{b:02x}");
    }
    let json = Zeroizing::new(serde_json::to_string(raw).unwrap_or_default());
    let mut out = vec![
        Zeroizing::new(raw.to_owned()),
        pct(false),
        pct(true),
        Zeroizing::new(url::form_urlencoded::byte_serialize(raw.as_bytes()).collect()),
        Zeroizing::new(json.get(1..json.len().saturating_sub(1)).unwrap_or_default().to_owned()),
        hex,
        Zeroizing::new(STANDARD.encode(raw)),
        Zeroizing::new(STANDARD_NO_PAD.encode(raw)),
        Zeroizing::new(URL_SAFE.encode(raw)),
        Zeroizing::new(URL_SAFE_NO_PAD.encode(raw)),
    ];
    for core in base64_cores(raw.as_bytes()) {
        out.push(Zeroizing::new(core.replace('+', "-").replace('/', "_")));
        out.push(core);
    }
    let mut out: Vec<Zeroizing<Vec<u8>>> = out.into_iter().map(|s| Zeroizing::new(s.as_bytes().to_vec())).collect();
    let (mut le, mut be) = (Zeroizing::new(Vec::with_capacity(2 * raw.len())), Zeroizing::new(Vec::with_capacity(2 * raw.len())));
    for unit in raw.encode_utf16() {
        le.extend_from_slice(&unit.to_le_bytes());
        be.extend_from_slice(&unit.to_be_bytes());
    }
    out.push(le);
    out.push(be);
    out
}

/// For a secret at byte offset k (0, 1, 2) of a base64-encoded stream, the encoded
/// characters whose six bits all come from the secret: they are the same whatever
/// precedes or follows it. Characters that mix the secret's bits with its neighbours'
/// (at most one at each end) cannot be predicted and are not part of the pattern.
pub(crate) fn base64_cores(secret: &[u8]) -> Vec<Zeroizing<String>> {
    use base64::engine::general_purpose::STANDARD_NO_PAD;
    let n = secret.len();
    let mut out = Vec::new();
    for k in 0..3usize {
        let mut buf = Zeroizing::new(vec![0u8; k]);
        buf.extend_from_slice(secret);
        let enc = Zeroizing::new(STANDARD_NO_PAD.encode(&*buf));
        let first = (8 * k).div_ceil(6);
        let last = 8 * (k + n) / 6;
        if last > first && last - first >= MIN_CORE_CHARS {
            out.push(Zeroizing::new(enc[first..last].to_owned()));
        }
    }
    out
}
