//! Compressed response bodies: which codings a body carries, and bounded decoding of
//! the ones sp can read, so that what reaches the agent can be searched for secrets.
//!
//! Two ways a body is compressed, two rules:
//! - **declared** (`Content-Encoding`, or a `Transfer-Encoding` coding other than
//!   `chunked`; names and values compared in any letter case, `identity` ignored): the
//!   codings describe the wire, not the representation, so the executor decodes them
//!   as a browser would ([`decode_declared`]: gzip, `x-gzip`, `deflate` as zlib or raw)
//!   before anything is scrubbed, within `max_response_bytes` of output (a longer body
//!   is cut and `truncated`, as an uncompressed one). A coding it cannot decode is left
//!   as it came, and the result withholds the body (`result.rs`);
//! - **undeclared** (a `.gz` file as `application/gzip`, zlib as
//!   `application/octet-stream`, `Content-Encoding: IDENTITY` over gzip, gzip inside
//!   gzip): told by the first bytes whatever the headers say ([`inspect`]). The body
//!   the agent gets is still the bytes as they came; what they decompress to is
//!   searched for every secret first, layer by layer, once a secret has been read in
//!   the session (before, there is nothing to find). The body is withheld when a
//!   secret is inside, or when it cannot be searched: a format sp does not decode
//!   (zstd, xz, bzip2, lz4, `compress`, 7z, rar; an encrypted zip entry or one
//!   compressed other than stored or deflated), more than [`MAX_LAYERS`] nested layers,
//!   more than [`MAX_STREAMS`] streams, or more decompressed bytes in all than
//!   `max_response_bytes`.
//!
//! What is recognised by its first bytes (RFC 1952 gzip `1f 8b 08`; RFC 1950 zlib:
//! method 8, window at most 32 KiB, header checksum a multiple of 31; zstd
//! `28 b5 2f fd`; xz `fd 37 7a 58 5a 00`; bzip2 `BZh1`-`BZh9` and a block or end
//! magic; lz4 `04 22 4d 18`; `compress` `1f 9d`; 7z; rar) must start a body, or follow
//! a complete stream in it (concatenated gzip members, two zlib streams). Zip entries
//! (`PK 03 04` local headers) are found anywhere in the body, as unzip finds an archive
//! appended to other data. A stream that stops decoding with an error is searched as
//! far as it decoded, which is as far as any decoder gets; the bytes after the error
//! are opaque, as any bytes are. Two bytes that only look like a zlib header (`x ` at
//! the start of a text: about one pair in a thousand passes the checksum) decode to an
//! error at once and change nothing.
//!
//! Not recognisable by any magic, so never guessed: raw deflate (any bytes can start a
//! valid stream) and brotli; declared, they are decoded (deflate) or withheld
//! (brotli). A zlib stream that needs a preset dictionary cannot be decoded without
//! it, by sp or by the agent. A server that knows a secret and wants it past sp can
//! always encode it so no search recognises it (encrypted, raw deflate, reversed); what
//! this closes is the echo in a standard compressed format any tool undoes.

use std::fmt;

use flate2::{Decompress, FlushDecompress, Status};

/// Compressed layers inside one another searched at most (a gzip of a gzip is two).
pub const MAX_LAYERS: usize = 4;

/// Streams (gzip members, zlib streams, zip entries) decoded at most for one body: each
/// costs a decoder's state (tens of KB), and a body of tiny ones could hold millions.
pub(crate) const MAX_STREAMS: usize = 65_536;

/// A content coding or compressed format.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Coding {
    Gzip,
    /// RFC 1950 (HTTP's `deflate` is this).
    Zlib,
    /// Raw RFC 1951 data (what some servers send as `deflate`; zip entries).
    Deflate,
    Zip,
    Zstd,
    Xz,
    Bzip2,
    Lz4,
    /// Unix `compress` (LZW), HTTP's `compress`.
    Compress,
    SevenZip,
    Rar,
    Brotli,
    /// A declared coding sp does not know, as the server named it (lowercased).
    Other(String),
}

impl fmt::Display for Coding {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Coding::Gzip => "gzip",
            Coding::Zlib => "zlib",
            Coding::Deflate => "deflate",
            Coding::Zip => "zip",
            Coding::Zstd => "zstd",
            Coding::Xz => "xz",
            Coding::Bzip2 => "bzip2",
            Coding::Lz4 => "lz4",
            Coding::Compress => "compress",
            Coding::SevenZip => "7z",
            Coding::Rar => "rar",
            Coding::Brotli => "br",
            Coding::Other(name) => name,
        })
    }
}

/// A coding token of `Content-Encoding` or `Transfer-Encoding` (RFC 9110 8.4.1: case
/// insensitive), `None` for `identity` (and `chunked`, which is framing, not a coding).
fn declared_coding(token: &str) -> Option<Coding> {
    let t = token.trim().to_ascii_lowercase();
    Some(match t.as_str() {
        "" | "identity" | "chunked" => return None,
        "gzip" | "x-gzip" => Coding::Gzip,
        "deflate" => Coding::Zlib,
        "zstd" => Coding::Zstd,
        "br" => Coding::Brotli,
        "compress" | "x-compress" => Coding::Compress,
        // The server's word: scrubbed whole, then cut (issue 31, section 3).
        _ => Coding::Other(crate::gate::outside::cut(&t, 40).into_inner()),
    })
}

/// The codings the headers say were applied, in the order they were applied: content
/// codings, then transfer codings (RFC 9112 6.1). Header names in any case.
pub(crate) fn declared(headers: &[(String, String)]) -> Vec<Coding> {
    let list = |name: &str| -> Vec<Coding> {
        headers
            .iter()
            .filter(|(n, _)| n.trim().eq_ignore_ascii_case(name))
            .flat_map(|(_, v)| v.split(',').filter_map(declared_coding).collect::<Vec<_>>())
            .collect()
    };
    let mut all = list("content-encoding");
    all.extend(list("transfer-encoding"));
    all
}

/// The compressed format `bytes` starts with, if any (zip excepted: see [`inspect`]).
pub(crate) fn sniff(b: &[u8]) -> Option<Coding> {
    Some(match b {
        [0x1f, 0x8b, 0x08, ..] => Coding::Gzip,
        [0x1f, 0x9d, ..] => Coding::Compress,
        [0x28, 0xb5, 0x2f, 0xfd, ..] => Coding::Zstd,
        [0xfd, b'7', b'z', b'X', b'Z', 0x00, ..] => Coding::Xz,
        [b'7', b'z', 0xbc, 0xaf, 0x27, 0x1c, ..] => Coding::SevenZip,
        [b'R', b'a', b'r', b'!', 0x1a, 0x07, ..] => Coding::Rar,
        [0x04, 0x22, 0x4d, 0x18, ..] => Coding::Lz4,
        [b'B', b'Z', b'h', b'1'..=b'9', rest @ ..]
            if rest.starts_with(&[0x31, 0x41, 0x59, 0x26, 0x53, 0x59]) || rest.starts_with(&[0x17, 0x72, 0x45, 0x38, 0x50, 0x90]) =>
        {
            Coding::Bzip2
        }
        [cmf, flg, ..] if is_zlib_header(*cmf, *flg) => Coding::Zlib,
        _ => return None,
    })
}

/// RFC 1950 2.2: CM 8 (deflate), CINFO at most 7, `CMF*256 + FLG` a multiple of 31.
/// A preset dictionary (FDICT) is not excluded: such a stream fails to decode here, and
/// then only what decoded before is searched.
fn is_zlib_header(cmf: u8, flg: u8) -> bool {
    cmf & 0x0f == 8 && cmf >> 4 <= 7 && (u16::from(cmf) << 8 | u16::from(flg)) % 31 == 0
}

/// How one stream's decoding ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum End {
    /// The stream ended; `consumed` bytes of input were its own.
    Complete,
    /// The input ended first (a body cut at the limit): the output is a prefix.
    Cut,
    /// Not a valid stream from here on: the output is what decoded before.
    Broken,
    /// The output reached the limit: it holds `limit` bytes, the rest was not decoded.
    OverLimit,
}

/// The output of one stream and how it ended.
struct Inflated {
    out: Vec<u8>,
    consumed: usize,
    end: End,
}

/// Inflates one zlib (`zlib: true`) or raw deflate stream at the start of `input`,
/// producing at most `limit` bytes.
fn inflate(input: &[u8], zlib: bool, limit: usize) -> Inflated {
    const STEP: usize = 32 * 1024;
    let mut d = Decompress::new(zlib);
    let mut out: Vec<u8> = Vec::new();
    loop {
        let (before_in, before_out) = (d.total_in(), d.total_out());
        let rest = &input[before_in as usize..];
        let status = if out.len() >= limit {
            // Full: one more byte tells whether the stream goes on past the limit.
            let mut probe = [0u8; 1];
            let status = d.decompress(rest, &mut probe, FlushDecompress::None);
            if d.total_out() > before_out {
                return Inflated { out, consumed: before_in as usize, end: End::OverLimit };
            }
            status
        } else {
            if out.len() == out.capacity() {
                out.reserve_exact(STEP.min(limit - out.len()));
            }
            d.decompress_vec(rest, &mut out, FlushDecompress::None)
        };
        let consumed = d.total_in() as usize;
        if out.len() > limit {
            out.truncate(limit);
            return Inflated { out, consumed, end: End::OverLimit };
        }
        match status {
            Ok(Status::StreamEnd) => return Inflated { out, consumed, end: End::Complete },
            Ok(_) if d.total_in() == before_in && d.total_out() == before_out => return Inflated { out, consumed, end: End::Cut },
            Ok(_) => {}
            Err(_) => return Inflated { out, consumed, end: End::Broken },
        }
    }
}

/// The length of the RFC 1952 member header at the start of `b`, or `None` when it is
/// cut short or not valid (reserved flags set).
fn gzip_header_len(b: &[u8]) -> Option<usize> {
    const FHCRC: u8 = 2;
    const FEXTRA: u8 = 4;
    const FNAME: u8 = 8;
    const FCOMMENT: u8 = 16;
    let (&[0x1f, 0x8b, 0x08, flags], _) = b.split_first_chunk::<4>()? else { return None };
    if flags & 0xe0 != 0 {
        return None;
    }
    let mut at = 10;
    if flags & FEXTRA != 0 {
        let len = u16::from_le_bytes([*b.get(at)?, *b.get(at + 1)?]) as usize;
        at += 2 + len;
    }
    for flag in [FNAME, FCOMMENT] {
        if flags & flag != 0 {
            at += b.get(at..)?.iter().position(|&c| c == 0)? + 1;
        }
    }
    if flags & FHCRC != 0 {
        at += 2;
    }
    (at <= b.len()).then_some(at)
}

/// One stream of `coding` at the start of `input`. The gzip trailer (CRC-32 and size)
/// is skipped, not checked: gunzip writes what it decoded before it checks, so what
/// the agent could get is the output either way.
fn decode_stream(coding: &Coding, input: &[u8], limit: usize) -> Inflated {
    match coding {
        Coding::Gzip => {
            let Some(header) = gzip_header_len(input) else {
                let end = if input.len() < 10 { End::Cut } else { End::Broken };
                return Inflated { out: Vec::new(), consumed: 0, end };
            };
            let mut r = inflate(&input[header..], false, limit);
            r.consumed += header;
            if r.end == End::Complete {
                if input.len() < r.consumed + 8 {
                    r.end = End::Cut;
                }
                r.consumed = (r.consumed + 8).min(input.len());
            }
            r
        }
        // The zlib decoder reads (and checks) the Adler-32 trailer itself.
        Coding::Zlib => inflate(input, true, limit),
        Coding::Deflate => inflate(input, false, limit),
        _ => Inflated { out: Vec::new(), consumed: 0, end: End::Broken },
    }
}

/// The executor's step for declared codings: decodes `body` through every coding the
/// headers name (gzip, `x-gzip`, `deflate` as zlib or, failing that, raw deflate, as
/// browsers read it), innermost last, keeping at most `cap` bytes; a longer result is
/// cut and `truncated` is set, as for an uncompressed body. Then the
/// `content-encoding`, `transfer-encoding` and `content-length` headers, which describe
/// the bytes on the wire, are dropped. A body that cannot be decoded (another coding,
/// more than [`MAX_LAYERS`], a corrupt stream that was not cut) is left untouched with
/// its headers: `result.rs` withholds it.
pub(crate) fn decode_declared(headers: &mut Vec<(String, String)>, body: &mut Vec<u8>, truncated: &mut bool, cap: usize) {
    let codings = declared(headers);
    if codings.is_empty() || body.is_empty() || codings.len() > MAX_LAYERS {
        return;
    }
    if !codings.iter().all(|c| matches!(c, Coding::Gzip | Coding::Zlib)) {
        return;
    }
    let mut current = std::borrow::Cow::Borrowed(&body[..]);
    let mut cut = *truncated;
    for coding in codings.iter().rev() {
        let (out, end) = match coding {
            Coding::Gzip => gzip_members(&current, cap),
            _ if sniff(&current) == Some(Coding::Zlib) => {
                let r = decode_stream(&Coding::Zlib, &current, cap);
                (r.out, r.end)
            }
            _ => {
                let r = decode_stream(&Coding::Deflate, &current, cap);
                (r.out, r.end)
            }
        };
        match end {
            End::Complete => {}
            End::Cut | End::OverLimit => cut = true,
            End::Broken if cut => {}
            End::Broken => return,
        }
        current = std::borrow::Cow::Owned(out);
    }
    let decoded = current.into_owned();
    *body = decoded;
    *truncated = cut;
    headers.retain(|(n, _)| {
        let n = n.trim();
        !["content-encoding", "transfer-encoding", "content-length"].iter().any(|h| n.eq_ignore_ascii_case(h))
    });
}

/// Every gzip member in `input` (gunzip decodes concatenated members as one file), at
/// most `limit` bytes in all. Bytes after the last member that are not another member
/// end the decoding, as gunzip ignores them.
fn gzip_members(input: &[u8], limit: usize) -> (Vec<u8>, End) {
    let mut out = Vec::new();
    let mut rest = input;
    for _ in 0..MAX_STREAMS {
        let r = decode_stream(&Coding::Gzip, rest, limit - out.len());
        out.extend_from_slice(&r.out);
        rest = &rest[r.consumed..];
        if r.end != End::Complete || sniff(rest) != Some(Coding::Gzip) {
            return (out, r.end);
        }
    }
    (out, End::Broken)
}

/// Why a body that holds compressed data is withheld.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Withhold {
    /// Decompressed, it holds the secret of this credential.
    Secret { coding: Coding, credential: String },
    /// A format (or zip entry) sp cannot decompress.
    Unsupported { what: String },
    /// More decompressed bytes than the response limit.
    OverLimit { coding: Coding, limit: usize },
    /// More than [`MAX_LAYERS`] layers inside one another.
    TooDeep,
    /// More than [`MAX_STREAMS`] compressed streams.
    TooMany,
}

impl fmt::Display for Withhold {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Withhold::Secret { coding, credential } => {
                write!(f, "the response body is {coding} data that holds the secret of credential {credential:?} once decompressed, so it is withheld")
            }
            Withhold::Unsupported { what } => {
                write!(f, "the response body holds {what}, which sp cannot decompress to search for secrets, so it is withheld")
            }
            Withhold::OverLimit { coding, limit } => write!(
                f,
                "the response body is {coding} data that decompresses to more than max_response_bytes ({limit}), so it cannot be searched for secrets and is withheld"
            ),
            Withhold::TooMany => write!(
                f,
                "the response body holds more than {MAX_STREAMS} compressed streams or zip entries, so it cannot be searched for secrets and is withheld"
            ),
            Withhold::TooDeep => {
                write!(f, "the response body nests more than {MAX_LAYERS} layers of compressed data, so it cannot be searched for secrets and is withheld")
            }
        }
    }
}

impl std::error::Error for Withhold {}

/// Finds secrets in bytes: the names of the credentials whose secret is in them in any
/// spelling; with `cut`, also a cut-off beginning of one at the end (`Vault::echoed_in`).
pub type Finder<'a> = &'a dyn Fn(&[u8], bool) -> Vec<String>;

/// Searches everything compressed in `body` (module docs) for secrets with `find`,
/// decompressing at most `limit` bytes in all. `cut`: the body was cut at the limit.
pub fn inspect(body: &[u8], cut: bool, find: Finder<'_>, limit: usize) -> Result<(), Withhold> {
    let mut search = Search { find, budget: limit, limit, streams_left: MAX_STREAMS };
    search.zip_entries(body, cut, 0)?;
    search.streams(body, cut, 0)
}

struct Search<'a> {
    find: Finder<'a>,
    /// Decompressed bytes still allowed.
    budget: usize,
    limit: usize,
    /// Streams still allowed to be decoded.
    streams_left: usize,
}

impl Search<'_> {
    /// Counts one more stream to decode.
    fn one_more(&mut self) -> Result<(), Withhold> {
        self.streams_left = self.streams_left.checked_sub(1).ok_or(Withhold::TooMany)?;
        Ok(())
    }

    /// The streams at the start of `bytes`, one after another, each decoded, searched,
    /// and searched again inside.
    fn streams(&mut self, bytes: &[u8], cut: bool, depth: usize) -> Result<(), Withhold> {
        let mut rest = bytes;
        while let Some(coding) = sniff(rest) {
            if !matches!(coding, Coding::Gzip | Coding::Zlib) {
                return Err(Withhold::Unsupported { what: format!("{coding} data") });
            }
            self.one_more()?;
            let r = decode_stream(&coding, rest, self.budget);
            self.layer(&coding, &r.out, r.end, cut, depth)?;
            if r.end != End::Complete || r.consumed == 0 {
                return Ok(());
            }
            rest = &rest[r.consumed..];
        }
        Ok(())
    }

    /// One decoded layer: within the budget and the depth, free of secrets, and so is
    /// everything compressed inside it.
    fn layer(&mut self, coding: &Coding, out: &[u8], end: End, cut: bool, depth: usize) -> Result<(), Withhold> {
        if end == End::OverLimit {
            return Err(Withhold::OverLimit { coding: coding.clone(), limit: self.limit });
        }
        if depth >= MAX_LAYERS {
            return Err(Withhold::TooDeep);
        }
        self.budget -= out.len();
        // A stream whose input was cut (or broke where the body was cut) ends early.
        let out_cut = end == End::Cut || (end == End::Broken && cut);
        if let Some(credential) = (self.find)(out, out_cut).into_iter().next() {
            return Err(Withhold::Secret { coding: coding.clone(), credential });
        }
        self.zip_entries(out, out_cut, depth + 1)?;
        self.streams(out, out_cut, depth + 1)
    }

    /// Every zip local file header (`PK 03 04`) in `bytes`, wherever it is: a stored
    /// entry's data is in `bytes` already (searched as it is), but may itself be
    /// compressed; a deflated one is inflated and searched; anything else cannot be.
    fn zip_entries(&mut self, bytes: &[u8], cut: bool, depth: usize) -> Result<(), Withhold> {
        const SIG: &[u8; 4] = b"PK\x03\x04";
        let mut from = 0;
        while let Some(i) = bytes[from..].windows(4).position(|w| w == SIG) {
            let at = from + i;
            from = at + 4;
            let h = &bytes[at..];
            let Some(fixed) = h.get(..30) else { continue };
            let u16_at = |o: usize| u16::from_le_bytes([fixed[o], fixed[o + 1]]) as usize;
            let (flags, method) = (u16_at(6), u16_at(8));
            let compressed = u32::from_le_bytes([fixed[18], fixed[19], fixed[20], fixed[21]]) as usize;
            let data_at = 30 + u16_at(26) + u16_at(28);
            let Some(data) = h.get(data_at..) else { continue };
            if flags & 1 != 0 {
                return Err(Withhold::Unsupported { what: "an encrypted zip entry".into() });
            }
            match method {
                0 => {
                    // Sizes are in a data descriptor after the data when bit 3 is set.
                    let data = if flags & 8 == 0 { data.get(..compressed).unwrap_or(data) } else { data };
                    if depth >= MAX_LAYERS {
                        return Err(Withhold::TooDeep);
                    }
                    self.streams(data, cut, depth + 1)?;
                }
                8 => {
                    self.one_more()?;
                    let r = decode_stream(&Coding::Deflate, data, self.budget);
                    self.layer(&Coding::Zip, &r.out, r.end, cut, depth)?;
                }
                m => return Err(Withhold::Unsupported { what: format!("a zip entry compressed with method {m}") }),
            }
        }
        Ok(())
    }
}

#[cfg(test)]
pub(crate) mod tests;
