//! bytes -> the search of compressed response bodies (`tools/http/coding.rs` `inspect`).
//! Never panics on any body; and a secret planted inside gzip, zlib or a stored/deflated
//! zip entry, nested up to `MAX_LAYERS` deep, after and before input bytes, is never
//! let through: the body is withheld for the secret or as unsearchable, never passed.
//!
//! The input picks the nesting (each of up to MAX_LAYERS layers: gzip, zlib, zip
//! stored, zip deflated), the bytes around the secret, and whether the secret is
//! planted at all; without a plant, only "no panic" and a bounded answer are asserted
//! (arbitrary bytes may legitimately be withheld as unsearchable).

#![no_main]

use std::io::Write;

use flate2::write::{DeflateEncoder, GzEncoder, ZlibEncoder};
use flate2::Compression;
use libfuzzer_sys::fuzz_target;
use sallyport::fuzzing::{inspect_compressed, Withhold, MAX_LAYERS};

const SECRET: &[u8] = b"fuzz-coding-secret-0123456789";

fn gzip(b: &[u8]) -> Vec<u8> {
    let mut e = GzEncoder::new(Vec::new(), Compression::fast());
    e.write_all(b).unwrap();
    e.finish().unwrap()
}

fn zlib(b: &[u8]) -> Vec<u8> {
    let mut e = ZlibEncoder::new(Vec::new(), Compression::fast());
    e.write_all(b).unwrap();
    e.finish().unwrap()
}

/// One zip local file entry (PKWARE APPNOTE 4.3.7), stored (0) or deflated (8); the
/// CRC is left 0: a searcher must not rely on it to find what the entry holds.
fn zip(b: &[u8], deflated: bool) -> Vec<u8> {
    let data = if deflated {
        let mut e = DeflateEncoder::new(Vec::new(), Compression::fast());
        e.write_all(b).unwrap();
        e.finish().unwrap()
    } else {
        b.to_vec()
    };
    let mut out = b"PK\x03\x04".to_vec();
    out.extend_from_slice(&20u16.to_le_bytes()); // version
    out.extend_from_slice(&0u16.to_le_bytes()); // flags
    out.extend_from_slice(&(if deflated { 8u16 } else { 0 }).to_le_bytes());
    out.extend_from_slice(&[0; 4]); // time, date
    out.extend_from_slice(&0u32.to_le_bytes()); // crc
    out.extend_from_slice(&(data.len() as u32).to_le_bytes());
    out.extend_from_slice(&(b.len() as u32).to_le_bytes());
    out.extend_from_slice(&1u16.to_le_bytes()); // name length
    out.extend_from_slice(&0u16.to_le_bytes()); // extra length
    out.push(b'x');
    out.extend_from_slice(&data);
    out
}

fuzz_target!(|data: &[u8]| {
    let find = |bytes: &[u8], _cut: bool| -> Vec<String> {
        if bytes.windows(SECRET.len()).any(|w| w == SECRET) { vec!["fuzz".into()] } else { vec![] }
    };
    let limit = 1 << 20;
    // Any bytes: no panic.
    let _ = inspect_compressed(data, false, &find, limit);
    let _ = inspect_compressed(data, true, &find, limit);

    let Some((&control, rest)) = data.split_first() else { return };
    let (before, after) = rest.split_at(rest.len() / 2);
    let layers = usize::from(control & 0x03) + 1; // 1..=4 <= MAX_LAYERS
    assert!(layers <= MAX_LAYERS);
    let mut body = [before, SECRET, after].concat();
    for i in 0..layers {
        let kind = (control >> (2 + 2 * (i % 3))) & 0x03;
        body = match kind {
            0 => gzip(&body),
            1 => zlib(&body),
            2 => zip(&body, false),
            _ => zip(&body, true),
        };
    }
    // The outermost layer starts the body (as a server sends it), or, for a zip, may
    // follow other bytes (unzip finds an archive appended to other data).
    match inspect_compressed(&body, false, &find, limit) {
        Ok(()) => {
            // The secret can still be in the clear when a stored zip entry is the
            // outermost layer: then the byte scrub (not this search) removes it, and
            // that is what the raw body's own search shows.
            assert!(find(&body, false).len() == 1, "a planted secret passed the search: control {control:#04x}, {} bytes", body.len());
        }
        Err(Withhold::Secret { .. } | Withhold::Unsupported { .. } | Withhold::OverLimit { .. } | Withhold::TooDeep | Withhold::TooMany) => {}
    }
});
