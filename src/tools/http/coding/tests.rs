//! Codings against bodies built here with flate2 and by hand (zip entries): every
//! format and layer a secret can hide in, and what is withheld when a body cannot be
//! searched. `gzip` serves `result.rs`'s tests too.

use super::*;
use flate2::write::{DeflateEncoder, GzEncoder, ZlibEncoder};
use flate2::Compression;
use std::io::Write;

const TOKEN: &[u8] = b"tok_5f2c9a7e1b3d4c6a8e0f";

pub(crate) fn gzip(b: &[u8]) -> Vec<u8> {
    let mut e = GzEncoder::new(Vec::new(), Compression::default());
    e.write_all(b).unwrap();
    e.finish().unwrap()
}
pub(crate) fn zlib(b: &[u8]) -> Vec<u8> {
    let mut e = ZlibEncoder::new(Vec::new(), Compression::default());
    e.write_all(b).unwrap();
    e.finish().unwrap()
}
fn deflate(b: &[u8]) -> Vec<u8> {
    let mut e = DeflateEncoder::new(Vec::new(), Compression::default());
    e.write_all(b).unwrap();
    e.finish().unwrap()
}
/// A one-entry zip (local header only, as unzip's streaming mode reads it).
fn zip(method: u16, flags: u16, data: &[u8]) -> Vec<u8> {
    let mut z = b"PK\x03\x04\x14\x00".to_vec();
    z.extend_from_slice(&flags.to_le_bytes());
    z.extend_from_slice(&method.to_le_bytes());
    z.extend_from_slice(&[0; 8]); // time, date, crc
    z.extend_from_slice(&(data.len() as u32).to_le_bytes());
    z.extend_from_slice(&[0; 4]); // uncompressed size
    z.extend_from_slice(&5u16.to_le_bytes());
    z.extend_from_slice(&0u16.to_le_bytes());
    z.extend_from_slice(b"a.txt");
    z.extend_from_slice(data);
    z
}

fn finder(b: &[u8], cut: bool) -> Vec<String> {
    let found = b.windows(TOKEN.len()).any(|w| w == TOKEN) || (cut && (4..TOKEN.len()).any(|n| b.ends_with(&TOKEN[..n])));
    if found { vec!["api".into()] } else { Vec::new() }
}

fn check(body: &[u8]) -> Result<(), Withhold> {
    inspect(body, false, &finder, 1 << 20)
}

fn secret(coding: Coding) -> Result<(), Withhold> {
    Err(Withhold::Secret { coding, credential: "api".into() })
}

#[test]
fn declared_codings_in_any_case_identity_and_chunked_ignored() {
    let h = |pairs: &[(&str, &str)]| pairs.iter().map(|(n, v)| (n.to_string(), v.to_string())).collect::<Vec<_>>();
    assert_eq!(declared(&h(&[("Content-Encoding", "IDENTITY")])), vec![]);
    assert_eq!(
        declared(&h(&[("CONTENT-ENCODING", "GZip, Deflate"), ("transfer-encoding", "X-GZIP, chunked")])),
        vec![Coding::Gzip, Coding::Zlib, Coding::Gzip]
    );
    assert_eq!(declared(&h(&[("content-encoding", "br"), ("content-encoding", " zstd ")])), vec![Coding::Brotli, Coding::Zstd]);
    assert_eq!(declared(&h(&[("content-encoding", "aes128gcm")])), vec![Coding::Other("aes128gcm".into())]);
}

#[test]
fn sniffing_by_magic_bytes() {
    assert_eq!(sniff(&gzip(b"x")), Some(Coding::Gzip));
    assert_eq!(sniff(&zlib(b"x")), Some(Coding::Zlib));
    for (b, want) in [
        (&[0x78u8, 0x01][..], Some(Coding::Zlib)),
        (&[0x78, 0x5e], Some(Coding::Zlib)),
        (&[0x78, 0x9c], Some(Coding::Zlib)),
        (&[0x78, 0xda], Some(Coding::Zlib)),
        (&[0x78, 0x9d], None),
        (&[0x28, 0xb5, 0x2f, 0xfd, 0], Some(Coding::Zstd)),
        (&[0xfd, b'7', b'z', b'X', b'Z', 0], Some(Coding::Xz)),
        (b"BZh91AY&SY", Some(Coding::Bzip2)),
        (b"BZh9 is a tune", None),
        (&[0x1f, 0x9d, 0x90], Some(Coding::Compress)),
        (&[0x04, 0x22, 0x4d, 0x18], Some(Coding::Lz4)),
        (b"{\"a\":1}", None),
        (b"", None),
        (&[0x1f], None),
    ] {
        assert_eq!(sniff(b), want, "{b:?}");
    }
}

#[test]
fn gzip_headers_with_every_optional_field_are_read() {
    // FHCRC | FEXTRA | FNAME | FCOMMENT, then XLEN 3 and its bytes, a name, a
    // comment, the header CRC-16, the deflate data and the trailer.
    let mut body = vec![0x1f, 0x8b, 0x08, 0x1e, 0, 0, 0, 0, 0, 3, 3, 0, 1, 2, 3];
    body.extend_from_slice(b"a.txt\0c\0\xaa\xbb");
    assert_eq!(gzip_header_len(&body), Some(body.len()));
    assert_eq!(gzip_header_len(&body[..body.len() - 1]), None, "cut short");
    body.extend_from_slice(&deflate(TOKEN));
    body.extend_from_slice(&[0; 8]);
    assert_eq!(check(&body), secret(Coding::Gzip));
    assert_eq!(gzip_header_len(b"\x1f\x8b\x08\xe0......"), None, "reserved flags");
}

// Attacks tried (each case below; all withheld or found, none passed):
// - gzip, zlib (every level: 78 01/5e/9c/da) and gzip inside gzip inside zlib;
// - two gzip members (the token in the second), a zlib stream after a clean one;
// - a body cut inside the compressed stream, the token's first half at the cut;
// - a gzip bomb (64 MiB of zeros, 64 KiB compressed) past the limit;
// - five nested layers; zstd, xz, bzip2, lz4, compress, 7z, rar magic;
// - a zip entry deflated, stored holding a gzip, encrypted, bzip2'ed (method 12),
//   and a zip appended after text (unzip finds it);
// - lookalikes that pass untouched: text starting `x ` (a zlib header by the
//   checksum, FDICT set), `8n`, `BZh9`, a JSON body, a PNG-like binary.
#[test]
fn compressed_secrets_are_found_in_every_layer_and_format() {
    let clean = b"nothing secret here".repeat(10);
    assert_eq!(check(&gzip(TOKEN)), secret(Coding::Gzip));
    assert_eq!(check(&zlib(TOKEN)), secret(Coding::Zlib));
    for level in [0, 1, 6, 9] {
        let mut e = ZlibEncoder::new(Vec::new(), Compression::new(level));
        e.write_all(TOKEN).unwrap();
        assert_eq!(check(&e.finish().unwrap()), secret(Coding::Zlib), "level {level}");
    }
    assert_eq!(check(&zlib(&gzip(&gzip(TOKEN)))), secret(Coding::Gzip));
    assert_eq!(check(&[gzip(&clean), gzip(TOKEN)].concat()), secret(Coding::Gzip));
    assert_eq!(check(&[zlib(&clean), zlib(TOKEN)].concat()), secret(Coding::Zlib));
    // cut inside the stream, the token's beginning at the end of what decodes
    let long = [clean.clone(), TOKEN.to_vec()].concat();
    let mut stored = {
        let mut e = GzEncoder::new(Vec::new(), Compression::none());
        e.write_all(&long).unwrap();
        e.finish().unwrap()
    };
    stored.truncate(stored.len() - 8 - 4 - TOKEN.len() / 2);
    assert_eq!(inspect(&stored, true, &finder, 1 << 20), secret(Coding::Gzip));
    // nested past the depth
    let mut deep = clean.clone();
    for _ in 0..=MAX_LAYERS {
        deep = gzip(&deep);
    }
    assert_eq!(check(&deep), Err(Withhold::TooDeep));
    let mut ok = clean.clone();
    for _ in 0..MAX_LAYERS {
        ok = gzip(&ok);
    }
    assert_eq!(check(&ok), Ok(()));
    // a bomb: decoding stops at the limit
    let bomb = gzip(&vec![0u8; 64 << 20]);
    assert!(bomb.len() < 100 << 10, "{}", bomb.len());
    assert_eq!(inspect(&bomb, false, &finder, 1 << 20), Err(Withhold::OverLimit { coding: Coding::Gzip, limit: 1 << 20 }));
    assert_eq!(inspect(&gzip(&[0u8; 1000]), false, &finder, 1000), Ok(()), "exactly the limit");
    // a body of tiny streams: a decoder each, so a bound on their number
    let tiny = zlib(b"");
    assert_eq!(check(&tiny.repeat(MAX_STREAMS)), Ok(()));
    assert_eq!(check(&tiny.repeat(MAX_STREAMS + 1)), Err(Withhold::TooMany));
    // formats sp does not decode
    for (b, what) in [
        (&[0x28u8, 0xb5, 0x2f, 0xfd, 0x24, 0][..], "zstd data"),
        (&[0xfd, b'7', b'z', b'X', b'Z', 0, 0], "xz data"),
        (b"BZh91AY&SY....", "bzip2 data"),
        (&[0x04, 0x22, 0x4d, 0x18, 0x64], "lz4 data"),
        (&[0x1f, 0x9d, 0x90, 0x74], "compress data"),
        (&[b'7', b'z', 0xbc, 0xaf, 0x27, 0x1c, 0, 4], "7z data"),
        (b"Rar!\x1a\x07\x01\x00", "rar data"),
    ] {
        assert_eq!(check(b), Err(Withhold::Unsupported { what: what.into() }));
        assert_eq!(check(&gzip(b)), Err(Withhold::Unsupported { what: what.into() }), "inside gzip");
    }
    // zip entries
    assert_eq!(check(&zip(8, 0, &deflate(TOKEN))), secret(Coding::Zip));
    assert_eq!(check(&zip(0, 0, &gzip(TOKEN))), secret(Coding::Gzip));
    assert_eq!(check(&[b"some text first\n".to_vec(), zip(8, 8, &deflate(TOKEN))].concat()), secret(Coding::Zip));
    assert_eq!(check(&gzip(&zip(8, 0, &deflate(TOKEN)))), secret(Coding::Zip));
    assert_eq!(check(&zip(8, 1, b"xx")), Err(Withhold::Unsupported { what: "an encrypted zip entry".into() }));
    assert_eq!(check(&zip(12, 0, b"BZh9")), Err(Withhold::Unsupported { what: "a zip entry compressed with method 12".into() }));
    assert_eq!(check(&zip(8, 0, &deflate(&clean))), Ok(()));
    assert_eq!(check(&zip(0, 0, &clean)), Ok(()));
    // clean data and lookalikes
    for b in [
        gzip(&clean),
        zlib(&clean),
        b"x marks the spot".to_vec(),
        b"80 apples".to_vec(),
        b"8n".to_vec(),
        b"BZh9".to_vec(),
        b"{\"a\":1}".to_vec(),
        b"\x89PNG\r\n\x1a\n\0\0".to_vec(),
        Vec::new(),
    ] {
        assert_eq!(check(&b), Ok(()), "{b:?}");
    }
}

#[test]
fn declared_codings_are_decoded_within_the_cap() {
    let run = |headers: &[(&str, &str)], body: Vec<u8>, cut: bool, cap: usize| {
        let mut h: Vec<(String, String)> = headers.iter().map(|(n, v)| (n.to_string(), v.to_string())).collect();
        let (mut b, mut t) = (body, cut);
        decode_declared(&mut h, &mut b, &mut t, cap);
        (h, b, t)
    };
    let plain = b"{\"ok\":true}".to_vec();
    let kept = vec![("x".to_string(), "1".to_string())];
    assert_eq!(run(&[("Content-Encoding", "GZIP"), ("content-length", "9"), ("x", "1")], gzip(&plain), false, 100), (kept.clone(), plain.clone(), false));
    assert_eq!(run(&[("content-encoding", "deflate"), ("x", "1")], zlib(&plain), false, 100), (kept.clone(), plain.clone(), false));
    assert_eq!(run(&[("content-encoding", "deflate"), ("x", "1")], deflate(&plain), false, 100), (kept.clone(), plain.clone(), false));
    assert_eq!(run(&[("content-encoding", "gzip, x-gzip"), ("x", "1")], gzip(&gzip(&plain)), false, 100), (kept.clone(), plain.clone(), false));
    assert_eq!(run(&[("content-encoding", "gzip"), ("x", "1")], [gzip(b"ab"), gzip(b"cd")].concat(), false, 100), (kept.clone(), b"abcd".to_vec(), false));
    // past the cap: cut, as a long body is
    assert_eq!(run(&[("content-encoding", "gzip"), ("x", "1")], gzip(&[7u8; 5000]), false, 100), (kept.clone(), vec![7u8; 100], true));
    // a wire body cut inside the stream: the prefix, truncated
    let mut g = gzip(&[b'a'; 3000]);
    g.truncate(g.len() / 2);
    let (h, b, t) = run(&[("content-encoding", "gzip")], g, true, 10_000);
    assert!(h.is_empty() && t && b.iter().all(|&c| c == b'a'), "{b:?}");
    // left as they came: unknown codings, corrupt, too many layers, empty
    for (headers, body) in [
        (vec![("content-encoding", "br")], b"\x0b\x02\x80ok\x03".to_vec()),
        (vec![("content-encoding", "gzip, br")], gzip(b"x")),
        (vec![("content-encoding", "zstd")], vec![0x28, 0xb5, 0x2f, 0xfd]),
        (vec![("content-encoding", "gzip")], b"not gzip at all".to_vec()),
        (vec![("content-encoding", "gzip,gzip,gzip,gzip,gzip")], gzip(b"x")),
        (vec![("content-encoding", "gzip")], Vec::new()),
    ] {
        let before: Vec<(String, String)> = headers.iter().map(|(n, v)| (n.to_string(), v.to_string())).collect();
        assert_eq!(run(&headers, body.clone(), false, 100), (before, body, false));
    }
}
