//! The text of an upstream's tool definition as the agent gets it (issue 31 §4): the
//! descriptions and titles, at the top, in `annotations` and anywhere inside the input
//! and output schemas, with the characters that hide or reorder text removed: what a
//! person reviewing the definition cannot see must not reach the model either (a
//! "tool poisoning" instruction hidden in tag characters, a right-to-left override that
//! makes a reviewed text read otherwise, zero-width characters splitting a word that a
//! filter looks for).
//!
//! The class is `escape::is_unsafe` (C0 and C1 controls, every format character: bidi
//! marks, embeddings, overrides and isolates U+202A..U+202E, U+2066..U+2069, zero-width
//! U+200B..U+200D, U+2060, U+FEFF, the tags U+E0000..U+E007F, the variation selectors,
//! the blank letters, the line and paragraph separators and the spaces other than
//! U+0020), less what a description legitimately holds:
//! - a newline and a tab are kept; CR is removed; U+2028 and U+2029 become a newline;
//! - a space other than U+0020 (U+00A0, U+2000..U+200A, U+202F, U+205F, U+3000, U+1680)
//!   becomes U+0020;
//! - the rest of the class is removed.
//!
//! Only string members named `description` or `title` are touched: a schema's `enum`,
//! `const`, `pattern` or `default` values are data the agent must send back as they are.
//! The pin (`pins.rs`) is taken over the definition as the upstream sent it, before this:
//! a change in invisible characters is a change.

use std::borrow::Cow;

use serde_json::{Map, Value};

use crate::escape::is_unsafe;

/// `s` with the class removed or replaced (module docs).
pub(crate) fn clean_text(s: &str) -> Cow<'_, str> {
    if !s.chars().any(|c| c != '\n' && c != '\t' && is_unsafe(c)) {
        return Cow::Borrowed(s);
    }
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '\n' | '\t' => out.push(c),
            '\u{2028}' | '\u{2029}' => out.push('\n'),
            '\u{a0}' | '\u{1680}' | '\u{2000}'..='\u{200a}' | '\u{202f}' | '\u{205f}' | '\u{3000}' => out.push(' '),
            c if is_unsafe(c) => {}
            c => out.push(c),
        }
    }
    Cow::Owned(out)
}

/// A tool definition (`name`, `title`, `description`, `inputSchema`, `outputSchema`,
/// `annotations`) with every `description` and `title` string cleaned, at any depth.
pub(crate) fn clean_definition(definition: &mut Map<String, Value>) {
    clean_map(definition);
}

fn clean_map(m: &mut Map<String, Value>) {
    for (k, v) in m.iter_mut() {
        match v {
            Value::String(s) if k == "description" || k == "title" => {
                if let Cow::Owned(c) = clean_text(s) {
                    *s = c;
                }
            }
            other => clean_value(other),
        }
    }
}

fn clean_value(v: &mut Value) {
    match v {
        Value::Object(m) => clean_map(m),
        Value::Array(items) => items.iter_mut().for_each(clean_value),
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn hidden_and_reordering_characters_are_removed_newlines_and_tabs_kept() {
        let cases = [
            ("plain text\nline two\tcol", "plain text\nline two\tcol"),
            // bidi overrides, embeddings and isolates
            ("safe \u{202e}txt.exe\u{202c} end", "safe txt.exe end"),
            ("\u{202a}\u{202b}\u{202d}\u{2066}\u{2067}\u{2068}\u{2069}\u{200e}\u{200f}\u{61c}x", "x"),
            // zero-width characters splitting a word
            ("pass\u{200b}wo\u{200c}rd\u{200d}s\u{2060}\u{feff}", "passwords"),
            // C0 and C1 controls, DEL, an escape sequence's ESC
            ("a\u{1}\u{7}\u{1b}[2Jb\u{7f}\u{9b}c\r\n", "a[2Jbc\n"),
            // tag characters: invisible ASCII ("ignore")
            ("ok\u{e0069}\u{e0067}\u{e006e}\u{e006f}\u{e0072}\u{e0065}", "ok"),
            // variation selectors, soft hyphen, the combining grapheme joiner
            ("a\u{fe0f}b\u{e0100}c\u{ad}d\u{34f}e", "abcde"),
            // odd spaces become a space; the separators a newline
            ("a\u{a0}b\u{2003}c\u{3000}d", "a b c d"),
            ("one\u{2028}two\u{2029}three", "one\ntwo\nthree"),
            // letters of every script and combining marks stay
            ("héllo мир 日本 e\u{301}", "héllo мир 日本 e\u{301}"),
        ];
        for (raw, want) in cases {
            assert_eq!(clean_text(raw), want, "{raw:?}");
        }
        assert!(matches!(clean_text("nothing to do\n"), Cow::Borrowed(_)));
    }

    #[test]
    fn descriptions_and_titles_are_cleaned_at_any_depth_data_is_not() {
        let mut d = json!({
            "name": "t", "title": "T\u{202e}", "description": "d\u{200b}",
            "annotations": {"title": "a\u{feff}", "readOnlyHint": true},
            "inputSchema": {"type": "object", "properties": {
                "path": {"type": "string", "description": "p\u{e0041}", "enum": ["x\u{200b}"], "pattern": "^\u{200b}$", "default": "z\u{200b}"},
                "description": {"type": "string", "title": "nested\u{2066}"},
                "list": {"type": "array", "items": [{"description": "item\u{202d}"}]}
            }},
            "outputSchema": {"type": "object", "description": "out\u{7}"}
        });
        clean_definition(d.as_object_mut().unwrap());
        assert_eq!(
            d,
            json!({
                "name": "t", "title": "T", "description": "d",
                "annotations": {"title": "a", "readOnlyHint": true},
                "inputSchema": {"type": "object", "properties": {
                    "path": {"type": "string", "description": "p", "enum": ["x\u{200b}"], "pattern": "^\u{200b}$", "default": "z\u{200b}"},
                    "description": {"type": "string", "title": "nested"},
                    "list": {"type": "array", "items": [{"description": "item"}]}
                }},
                "outputSchema": {"type": "object", "description": "out"}
            })
        );
    }
}
