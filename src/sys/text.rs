//! Text for messages: an I/O error's plain reason, a string cut at a character boundary
//! ([`cut`]) or to a number of characters ([`short`], for echoed names), the byte
//! appender the serialisers share ([`put_bytes`]), whether JSON text of a string differs
//! from it ([`json_escapes`]), and lowercase hex ([`hex`]).

/// The plain reason of an I/O error, for messages: "no such file", "permission denied", ...
pub(crate) fn io_reason(e: &std::io::Error) -> String {
    match e.kind() {
        std::io::ErrorKind::NotFound => "no such file".into(),
        std::io::ErrorKind::PermissionDenied => "permission denied".into(),
        k => k.to_string(),
    }
}

/// The kernel's words for an OS error ("No space left on device"), else the error's.
pub(crate) fn os_reason(e: &std::io::Error) -> String {
    match e.raw_os_error() {
        Some(code) => rustix::io::Errno::from_raw_os_error(code).to_string(),
        None => e.to_string(),
    }
}

/// `s` cut to at most `max_bytes` bytes, at a character boundary (never inside one).
pub(crate) fn cut(s: &str, max_bytes: usize) -> &str {
    if s.len() <= max_bytes {
        return s;
    }
    let mut end = max_bytes;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    &s[..end]
}

/// Pieces up to this long are appended by [`put_bytes`] byte by byte.
pub(crate) const SHORT_PIECE: usize = 24;

/// Appends `bytes` to `out`; a short piece byte by byte. serde_json writes an answer or a
/// journal row in some 80 to 150 pieces, most of them one to a few bytes (`{`, `"`, `:`,
/// `,`, a key), and a copy of a slice is a call to the C library's `memcpy`, which
/// musl's (the static build) starts with a `rep movsq` every time: a fifth of a refusal's
/// CPU there before short pieces were pushed.
#[inline]
pub(crate) fn put_bytes(out: &mut Vec<u8>, bytes: &[u8]) {
    if bytes.len() <= SHORT_PIECE {
        out.reserve(bytes.len());
        for &b in bytes {
            out.push(b);
        }
    } else {
        out.extend_from_slice(bytes);
    }
}

/// Whether serde_json writes `s` with an escape: it escapes `"`, `\` and the control
/// characters below U+0020, nothing else (a test in `audit/row` holds this against
/// serde_json for every character of the BMP).
pub(crate) fn json_escapes(s: &str) -> bool {
    s.bytes().any(|b| b == b'"' || b == b'\\' || b < 0x20)
}

/// `bytes` as lowercase hex.
pub(crate) fn hex(bytes: &[u8]) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut s = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        s.push(DIGITS[usize::from(b >> 4)] as char);
        s.push(DIGITS[usize::from(b & 15)] as char);
    }
    s
}

/// Whether [`short`] says that it cut something.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Ellipsis {
    /// The first characters only.
    Silent,
    /// A final `…` when something was cut.
    Marked,
}

/// The first `max_chars` characters of `s`: an echoed, agent-chosen name never makes a
/// message large.
/// Never for text from outside (a peer's message, a name it chose): a cut made before the
/// redactor runs can leave a secret's prefix too short to be recognised; that text is cut
/// by `gate::outside` after it is scrubbed (issue 31, section 3).
pub(crate) fn short(s: &str, max_chars: usize, ellipsis: Ellipsis) -> String {
    match s.char_indices().nth(max_chars) {
        None => s.to_owned(),
        Some((end, _)) if ellipsis == Ellipsis::Marked => format!("{}…", &s[..end]),
        Some((end, _)) => s[..end].to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cut_never_splits_a_character() {
        assert_eq!(cut("abc", 5), "abc");
        assert_eq!(cut("abc", 2), "ab");
        assert_eq!(cut("aé", 2), "a", "é is two bytes: cut before it, not inside");
        assert_eq!(cut("ééé", 3), "é");
        assert_eq!(cut("€", 2), "");
    }

    #[test]
    fn short_counts_characters_and_marks_the_cut_only_when_asked() {
        assert_eq!(short("abc", 3, Ellipsis::Marked), "abc", "nothing cut, no mark");
        assert_eq!(short("abcd", 3, Ellipsis::Marked), "abc…");
        assert_eq!(short("abcd", 3, Ellipsis::Silent), "abc");
        assert_eq!(short("ééééé", 2, Ellipsis::Silent), "éé");
        assert_eq!(io_reason(&std::io::Error::from(std::io::ErrorKind::NotFound)), "no such file");
        assert!(os_reason(&std::io::Error::from_raw_os_error(28)).contains("space"), "ENOSPC in the kernel's words");
    }
}
