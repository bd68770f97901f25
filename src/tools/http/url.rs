//! The URL of an `http_request` (and of each redirect hop): which characters it may hold,
//! how its `%` escapes must look, and the decoded path the policy matches. The rule: two
//! parsers (ours and the server's) must never see two different URLs or paths.

use std::borrow::Cow;

use crate::mcp::model::{bad, ArgError};

/// The longest URL accepted, with its query (as the agent wrote it or after `query`).
pub(crate) const MAX_URL_BYTES: usize = 16 * 1024;

/// A redirect's `Location`, resolved against the request URL and held to the same
/// checks as a URL the agent wrote (the fragment, never sent, is dropped).
pub(crate) fn redirect_target(base: &url::Url, location: &str) -> Result<url::Url, ArgError> {
    let mut joined = base.join(location).map_err(|e| ArgError(format!("Location is not a valid URL: {e}")))?;
    joined.set_fragment(None);
    check_url(joined.as_str())
}

/// Characters a URL may contain as written by the agent: printable ASCII without space and
/// without the characters WHATWG parsing would silently rewrite or drop (`\` becomes `/`,
/// tabs and newlines vanish) — two parsers must not see two different URLs.
fn url_char_ok(b: u8) -> bool {
    matches!(b, b'!'..=b'~') && !matches!(b, b'\\' | b'"' | b'<' | b'>' | b'^' | b'`' | b'{' | b'|' | b'}')
}

pub(crate) fn check_url(raw: &str) -> Result<url::Url, ArgError> {
    if raw.len() > MAX_URL_BYTES {
        return bad(format!("\"url\" is longer than {MAX_URL_BYTES} bytes"));
    }
    if let Some(b) = raw.bytes().find(|b| !url_char_ok(*b)) {
        return bad(format!("\"url\" contains a character that must be percent-encoded (byte 0x{b:02x}); non-ASCII hosts must be written in punycode"));
    }
    // A `%` must start an escape of exactly two hex digits. The url crate
    // sends a stray `%` (or `%+9`) as written; if we decoded it differently (or at all),
    // the server would see another path than the policy matched.
    if let Some(i) = raw.bytes().enumerate().position(|(i, b)| b == b'%' && !is_escape(&raw.as_bytes()[i..])) {
        let shown: String = raw[i..].chars().take(3).collect();
        return bad(format!("\"url\" has a % that does not start a %XX escape of two hex digits ({shown:?}); write % as %25"));
    }
    let mut url = url::Url::parse(raw).map_err(|e| ArgError(format!("\"url\" is not a valid absolute URL: {e}")))?;
    if !matches!(url.scheme(), "http" | "https") {
        return bad("\"url\" must be http:// or https://");
    }
    if !url.username().is_empty() || url.password().is_some() {
        return bad("\"url\" must not contain user:password@; credentials are injected by the gateway");
    }
    if url.fragment().is_some() {
        return bad("\"url\" must not contain a #fragment");
    }
    let Some(host) = url.host_str() else {
        return bad("\"url\" needs a host");
    };
    if let Some(trimmed) = host.strip_suffix('.') {
        if trimmed.is_empty() || trimmed.ends_with('.') {
            return bad("\"url\" host is not valid");
        }
        let trimmed = trimmed.to_owned();
        url.set_host(Some(&trimmed)).map_err(|_| ArgError("\"url\" host is not valid".into()))?;
    }
    Ok(url)
}

/// Decodings of a segment checked beyond the first (`%25252e` is three deep).
const MAX_DECODINGS: usize = 8;

/// The path policy patterns match: percent-decoded segment by segment. A segment that
/// would decode into a separator, a dot segment (also with `;params`, which some servers
/// strip: `/v1/..;/admin`), a NUL or non-UTF-8 is refused, so a server cannot be made to
/// see a different path than the policy did. So is one that would after a second
/// decoding, or a third (`%252e%252e`, `%252f`, `%255c`, `%2500`, `%25252e`): a server
/// or framework that decodes again must not climb out of a path binding either. The
/// segment is decoded until nothing changes (at most [`MAX_DECODINGS`] times; one that
/// still holds an escape then is refused) and every form is checked.
pub(crate) fn decoded_path(url: &url::Url) -> Result<String, ArgError> {
    let mut out = String::new();
    for seg in url.path().split('/').skip(1) {
        // Most segments have no escape: nothing to decode, nothing to allocate.
        let decoded = if seg.contains('%') {
            Cow::Owned(percent_decode(seg).ok_or_else(|| ArgError("\"url\" path is not valid percent-encoded UTF-8".into()))?)
        } else {
            Cow::Borrowed(seg)
        };
        if climbs(decoded.as_bytes()) {
            return bad("\"url\" path has an encoded separator or dot segment; write the plain path");
        }
        // Later decodings, as a server that decodes again would read the segment (bytes:
        // what it decodes to need not be UTF-8).
        let mut again = Cow::Borrowed(decoded.as_bytes());
        for round in 0.. {
            let Some(next) = decode_once(&again) else { break };
            if climbs(&next) || round == MAX_DECODINGS {
                return bad("\"url\" path has a separator or dot segment encoded more than once (or escapes nested more than 8 deep); write the plain path");
            }
            again = Cow::Owned(next);
        }
        out.push('/');
        out.push_str(&decoded);
    }
    if out.is_empty() {
        out.push('/');
    }
    Ok(out)
}

/// Would a server see another path in this decoded segment: a separator, a backslash,
/// a NUL, or a dot segment (also with `;params`)?
fn climbs(seg: &[u8]) -> bool {
    let before_params = seg.split(|&b| b == b';').next().unwrap_or_default();
    seg.iter().any(|b| matches!(b, b'/' | b'\\' | b'\0')) || before_params == b"." || before_params == b".."
}

/// One more `%XX` decoding of bytes, as a server that decodes again does it (an
/// escape that is not one is kept as it is); `None` when there is nothing to decode.
fn decode_once(b: &[u8]) -> Option<Vec<u8>> {
    let hex = |c: u8| (c as char).to_digit(16).map(|d| d as u8);
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        match (b[i], b.get(i + 1).copied().and_then(hex), b.get(i + 2).copied().and_then(hex)) {
            (b'%', Some(h), Some(l)) => {
                out.push(h << 4 | l);
                i += 3;
            }
            (c, ..) => {
                out.push(c);
                i += 1;
            }
        }
    }
    (out.len() != b.len()).then_some(out)
}

/// Does `b` start with `%` and exactly two hex digits?
fn is_escape(b: &[u8]) -> bool {
    matches!(b, [b'%', h, l, ..] if h.is_ascii_hexdigit() && l.is_ascii_hexdigit())
}

/// Strict percent-decoding: `%` must be followed by two hex digits (never a sign, as
/// `u8::from_str_radix` would accept: `%+9`), and the result must be UTF-8.
fn percent_decode(s: &str) -> Option<String> {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'%' {
            if !is_escape(&b[i..]) {
                return None;
            }
            let hex = |c: u8| (c as char).to_digit(16).map(|d| d as u8);
            out.push(hex(b[i + 1])? << 4 | hex(b[i + 2])?);
            i += 3;
        } else {
            out.push(b[i]);
            i += 1;
        }
    }
    String::from_utf8(out).ok()
}

#[cfg(test)]
pub(crate) mod tests {
    /// [`super::decode_once`], for the property test in `args.rs`.
    pub(crate) fn decode_again(b: &[u8]) -> Option<Vec<u8>> {
        super::decode_once(b)
    }
}
