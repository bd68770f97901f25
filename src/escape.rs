//! What `sp` shows a person: text that came from outside (the agent, a server, the
//! policy file) written so that it cannot drive a terminal, forge a line, reorder what
//! is shown or hide part of itself. One place, used by the stderr log (`logging.rs`),
//! `sp audit tail`/`show` (`cli/audit.rs`), the approver's input (`approve.rs`) and the
//! policy's error messages (`policy/mod.rs`), so they cannot drift apart.
//!
//! [`is_unsafe`] is the class, [`escape`] writes each member as a Rust escape
//! (`\u{1b}`, `\n`, `\u{202e}`), [`json_safe`] writes them as JSON `\uXXXX` escapes in a
//! serialised line (the value is unchanged for a JSON reader), [`shown`] escapes and cuts
//! long text visibly, and [`host`] gives a host name's ASCII and Unicode forms.
//!
//! The class (sp-policy(5), APPROVAL, "What the approver gets"):
//! - C0 controls, DEL and the C1 controls (U+0080..U+009F: U+009B is a CSI to xterm, U+0085
//!   a line break);
//! - every format character (Unicode category Cf): the bidi marks, embeddings, overrides
//!   and isolates (U+061C, U+200E/F, U+202A..U+202E, U+2066..U+2069), the zero-width
//!   characters (U+200B..U+200D, U+2060..U+2064, U+FEFF), the soft hyphen, the Arabic,
//!   Syriac and Egyptian format marks, the interlinear annotation marks (U+FFF9..U+FFFB)
//!   and the tag characters (U+E0000..U+E007F, invisible ASCII);
//! - the line and paragraph separators (U+2028, U+2029) and every space other than
//!   U+0020 (U+00A0, U+2000..U+200A, U+202F, U+205F, U+3000, ...): one looks like a space
//!   but is not one to a shell;
//! - the variation selectors (U+180B..U+180F, U+FE00..U+FE0F, U+E0100..U+E01EF), which
//!   are invisible and can carry data, the combining grapheme joiner U+034F, and the
//!   blank letters (the Hangul fillers U+115F, U+1160, U+3164, U+FFA0, the Khmer
//!   inherent vowels U+17B4/U+17B5, the Braille blank U+2800); the rest of plane 14
//!   (unassigned) goes with the tags.
//!
//! Left as they are, on purpose: letters of every script (a homoglyph in a command is
//! visible text; host names are shown as punycode as well, [`host`]), combining marks
//! (escaping them would break most scripts), private-use and unassigned characters.
//! The backslash is not escaped either, so a literal `\u{1b}` in the text reads like an
//! escaped ESC: where that matters, the raw value is given separately.

use std::borrow::Cow;
use std::fmt::Write as _;

/// Whether `c` is never shown raw (the module documentation lists the class).
pub fn is_unsafe(c: char) -> bool {
    if c.is_ascii() {
        return c.is_ascii_control();
    }
    matches!(
        u32::from(c),
        0x80..=0xA0
            | 0xAD
            | 0x34F
            | 0x600..=0x605
            | 0x61C
            | 0x6DD
            | 0x70F
            | 0x890..=0x891
            | 0x8E2
            | 0x115F..=0x1160
            | 0x1680
            | 0x17B4..=0x17B5
            | 0x180B..=0x180F
            | 0x2000..=0x200F
            | 0x2028..=0x202F
            | 0x205F..=0x206F
            | 0x2800
            | 0x3000
            | 0x3164
            | 0xFE00..=0xFE0F
            | 0xFEFF
            | 0xFFA0
            | 0xFFF9..=0xFFFB
            | 0x110BD
            | 0x110CD
            | 0x13430..=0x1343F
            | 0x1BCA0..=0x1BCA3
            | 0x1D173..=0x1D17A
            | 0xE0000..=0xE0FFF
    )
}

/// `s` with every [`is_unsafe`] character written as a Rust escape (`\n`, `\u{1b}`,
/// `\u{202e}`); the backslash itself is left as is.
pub fn escape(s: &str) -> Cow<'_, str> {
    if !s.chars().any(is_unsafe) {
        return Cow::Borrowed(s);
    }
    let mut out = String::with_capacity(s.len() + 16);
    for c in s.chars() {
        push_escaped(&mut out, c);
    }
    Cow::Owned(out)
}

fn push_escaped(out: &mut String, c: char) {
    if is_unsafe(c) {
        // `\t`, `\r`, `\n` or `\u{…}`: every member of the class is neither a quote nor
        // a backslash, the only other characters `escape_default` would touch.
        out.extend(c.escape_default());
    } else {
        out.push(c);
    }
}

/// A serialised JSON text with every [`is_unsafe`] character (legal raw only inside
/// strings) written as a `\uXXXX` escape (a surrogate pair above U+FFFF), and tab and CR
/// (legal raw only as whitespace between tokens) as spaces: the same value to a JSON
/// reader, and safe to print. A raw newline is kept: callers pass one line.
pub fn json_safe(line: &str) -> String {
    let mut out = String::with_capacity(line.len());
    for c in line.chars() {
        match c {
            '\t' | '\r' => out.push(' '),
            '\n' => out.push('\n'),
            c if is_unsafe(c) => {
                let mut units = [0u16; 2];
                for u in c.encode_utf16(&mut units) {
                    let _ = write!(out, "\\u{:04x}", u);
                }
            }
            c => out.push(c),
        }
    }
    out
}

/// [`escape`]d, and when that is longer than `max` bytes cut visibly: the first `max`
/// bytes (at a character, never inside an escape), then
/// `...[cut: N bytes, sha256 HEX]` with the raw text's length in bytes and its SHA-256.
pub fn shown(raw: &str, max: usize) -> String {
    let escaped = escape(raw);
    if escaped.len() <= max {
        return escaped.into_owned();
    }
    let mut out = String::with_capacity(max + 100);
    let mut piece = String::new();
    for c in raw.chars() {
        piece.clear();
        push_escaped(&mut piece, c);
        if out.len() + piece.len() > max {
            break;
        }
        out.push_str(&piece);
    }
    let _ = write!(out, "...[cut: {} bytes, sha256 {}]", raw.len(), sha256_hex(raw.as_bytes()));
    out
}

pub(crate) fn sha256_hex(bytes: &[u8]) -> String {
    use sha2::{Digest, Sha256};
    let mut hex = String::with_capacity(64);
    for b in Sha256::digest(bytes) {
        let _ = write!(hex, "{b:02x}");
    }
    hex
}

/// A host name as shown to a person: its ASCII form (IDNA punycode, as the `url` crate
/// normalises it and as it is looked up), and its Unicode form when that differs
/// (an `xn--` label that decodes), escaped. `аpple.com` with a Cyrillic `а` is
/// `("xn--pple-43d.com", Some("аpple.com"))`, so it cannot pass for `apple.com`.
pub fn host(ascii: &str) -> (String, Option<String>) {
    let shown_ascii = escape(ascii).into_owned();
    // Bytes, not a `str` slice: the text may not be ASCII (an SSH address from the
    // policy), and cutting it inside a character would panic (found by fuzz/escape).
    if !ascii.split('.').any(|l| l.as_bytes().get(..4).is_some_and(|p| p.eq_ignore_ascii_case(b"xn--"))) {
        return (shown_ascii, None);
    }
    match idna::domain_to_unicode(ascii) {
        (unicode, Ok(())) if unicode != ascii.to_ascii_lowercase() => (shown_ascii, Some(escape(&unicode).into_owned())),
        _ => (shown_ascii, None),
    }
}

/// [`host`] in one line: `xn--pple-43d.com (аpple.com)`, or the ASCII form alone.
pub(crate) fn host_line(ascii: &str) -> String {
    match host(ascii) {
        (a, Some(u)) => format!("{a} ({u})"),
        (a, None) => a,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// fuzz/escape's first finding: a host whose first label's fourth byte falls
    /// inside a character (an operator's non-ASCII SSH address) panicked the approval.
    #[test]
    fn a_non_ascii_host_is_shown_not_panicked_on() {
        for h in ["é.example", "aéb.example", "xn\u{e9}.example", "日本.example", "ab\u{202e}c", "xn-", ""] {
            let (ascii, unicode) = host(h);
            assert_eq!((ascii, unicode), (escape(h).into_owned(), None), "{h:?}");
        }
        assert_eq!(host_line("xn--pple-43d.com"), "xn--pple-43d.com (\u{430}pple.com)");
    }

    // Attacks tried on the escaper, all held (each a test below):
    // - every C0, DEL and C1 control, and ESC/CSI sequences that clear or repaint a screen;
    // - each bidi mark, embedding, override and isolate, alone and unbalanced;
    // - the zero-width and invisible characters, tag characters spelling ASCII, variation
    //   selectors, blank letters, and every Unicode space but U+0020;
    // - astral members in JSON (surrogate pairs, not `\u` with five digits);
    // - a cut that would fall inside a multi-byte character or inside an escape.

    /// One sample of each member of the class, with its escape.
    const CLASS: &[(char, &str)] = &[
        ('\0', "\\u{0}"),
        ('\u{8}', "\\u{8}"),
        ('\t', "\\t"),
        ('\n', "\\n"),
        ('\r', "\\r"),
        ('\u{1b}', "\\u{1b}"),
        ('\u{7f}', "\\u{7f}"),
        ('\u{80}', "\\u{80}"),
        ('\u{85}', "\\u{85}"),
        ('\u{9b}', "\\u{9b}"),
        ('\u{9f}', "\\u{9f}"),
        ('\u{a0}', "\\u{a0}"),
        ('\u{ad}', "\\u{ad}"),
        ('\u{34f}', "\\u{34f}"),
        ('\u{600}', "\\u{600}"),
        ('\u{61c}', "\\u{61c}"),
        ('\u{6dd}', "\\u{6dd}"),
        ('\u{70f}', "\\u{70f}"),
        ('\u{8e2}', "\\u{8e2}"),
        ('\u{115f}', "\\u{115f}"),
        ('\u{1680}', "\\u{1680}"),
        ('\u{17b4}', "\\u{17b4}"),
        ('\u{180e}', "\\u{180e}"),
        ('\u{2000}', "\\u{2000}"),
        ('\u{200a}', "\\u{200a}"),
        ('\u{200b}', "\\u{200b}"),
        ('\u{200c}', "\\u{200c}"),
        ('\u{200d}', "\\u{200d}"),
        ('\u{200e}', "\\u{200e}"),
        ('\u{200f}', "\\u{200f}"),
        ('\u{2028}', "\\u{2028}"),
        ('\u{2029}', "\\u{2029}"),
        ('\u{202a}', "\\u{202a}"),
        ('\u{202b}', "\\u{202b}"),
        ('\u{202c}', "\\u{202c}"),
        ('\u{202d}', "\\u{202d}"),
        ('\u{202e}', "\\u{202e}"),
        ('\u{202f}', "\\u{202f}"),
        ('\u{205f}', "\\u{205f}"),
        ('\u{2060}', "\\u{2060}"),
        ('\u{2064}', "\\u{2064}"),
        ('\u{2066}', "\\u{2066}"),
        ('\u{2067}', "\\u{2067}"),
        ('\u{2068}', "\\u{2068}"),
        ('\u{2069}', "\\u{2069}"),
        ('\u{206f}', "\\u{206f}"),
        ('\u{2800}', "\\u{2800}"),
        ('\u{3000}', "\\u{3000}"),
        ('\u{3164}', "\\u{3164}"),
        ('\u{fe00}', "\\u{fe00}"),
        ('\u{fe0f}', "\\u{fe0f}"),
        ('\u{feff}', "\\u{feff}"),
        ('\u{ffa0}', "\\u{ffa0}"),
        ('\u{fff9}', "\\u{fff9}"),
        ('\u{fffb}', "\\u{fffb}"),
        ('\u{110bd}', "\\u{110bd}"),
        ('\u{13430}', "\\u{13430}"),
        ('\u{1bca0}', "\\u{1bca0}"),
        ('\u{1d173}', "\\u{1d173}"),
        ('\u{e0001}', "\\u{e0001}"),
        ('\u{e0041}', "\\u{e0041}"),
        ('\u{e007f}', "\\u{e007f}"),
        ('\u{e0100}', "\\u{e0100}"),
        ('\u{e01ef}', "\\u{e01ef}"),
    ];

    #[test]
    fn every_member_of_the_class_is_escaped() {
        for &(c, want) in CLASS {
            assert!(is_unsafe(c), "{c:?}");
            assert_eq!(escape(&format!("a{c}b")), format!("a{want}b"), "{c:?}");
        }
        let all: String = CLASS.iter().map(|(c, _)| *c).collect();
        assert!(!escape(&all).chars().any(is_unsafe));
    }

    #[test]
    fn letters_marks_and_plain_text_are_left_alone() {
        for s in ["plain/päth", "café", "аpple", "日本語", "e\u{301}", "a\\u{1b}b", "❤", " ~!\"#$%&'()*+,-./"] {
            assert_eq!(escape(s), s, "{s:?}");
            assert!(matches!(escape(s), Cow::Borrowed(_)));
        }
    }

    #[test]
    fn the_issue_s_spoof_is_shown_escaped() {
        let spoof = "rm -rf ~/data #\u{9b}2J\u{9b}Hsp: the agent asks to run ssh_exec web1 uptime";
        assert_eq!(escape(spoof), "rm -rf ~/data #\\u{9b}2J\\u{9b}Hsp: the agent asks to run ssh_exec web1 uptime");
    }

    #[test]
    fn json_safe_keeps_the_value_and_writes_surrogate_pairs() {
        let value = serde_json::json!({"t": "a\u{1b}\u{9b}\u{202e}\u{2028}\u{feff}\u{e0041}\u{e0100}b\u{fe0f}é"});
        let line = serde_json::to_string(&value).unwrap();
        let safe = json_safe(&line);
        assert_eq!(safe, r#"{"t":"a\u001b\u009b\u202e\u2028\ufeff\udb40\udc41\udb40\udd00b\ufe0fé"}"#);
        assert_eq!(serde_json::from_str::<serde_json::Value>(&safe).unwrap(), value);
        assert_eq!(json_safe("{\r\t\"a\":1}"), "{  \"a\":1}");
    }

    #[test]
    fn shown_cuts_visibly_at_a_character_never_inside_an_escape() {
        assert_eq!(shown("short", 10), "short");
        assert_eq!(shown("0123456789", 10), "0123456789");
        let long = "x".repeat(20_480);
        let hash = sha256_hex(long.as_bytes());
        assert_eq!(shown(&long, 8), format!("xxxxxxxx...[cut: 20480 bytes, sha256 {hash}]"));
        // `é` is two bytes: not split.
        let s = "abcé";
        assert_eq!(shown(s, 4), format!("abc...[cut: 5 bytes, sha256 {}]", sha256_hex(s.as_bytes())));
        // An escape is six bytes: kept whole or not at all.
        let s = "ab\u{1b}cd";
        assert_eq!(shown(s, 5), format!("ab...[cut: 5 bytes, sha256 {}]", sha256_hex(s.as_bytes())));
        assert_eq!(shown(s, 8), format!("ab\\u{{1b}}...[cut: 5 bytes, sha256 {}]", sha256_hex(s.as_bytes())));
        assert_eq!(sha256_hex(b""), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
    }

    #[test]
    fn hosts_show_punycode_and_their_unicode_form() {
        assert_eq!(host("xn--pple-43d.com"), ("xn--pple-43d.com".into(), Some("аpple.com".into())));
        assert_eq!(host_line("xn--pple-43d.com"), "xn--pple-43d.com (аpple.com)");
        assert_eq!(host("example.com"), ("example.com".into(), None));
        assert_eq!(host("10.0.0.5"), ("10.0.0.5".into(), None));
        assert_eq!(host_line("api.example.com"), "api.example.com");
        // Not valid punycode: the ASCII form alone.
        assert_eq!(host("xn--zz.example"), ("xn--zz.example".into(), None));
        // A label that decodes to a bidi override is shown escaped.
        let (_, u) = host(&idna::domain_to_ascii("a\u{5d0}b.example").unwrap_or_default());
        assert!(u.is_none_or(|u| !u.chars().any(is_unsafe)));
    }
}
