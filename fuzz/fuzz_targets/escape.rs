//! text -> what a person is shown (`escape.rs`): the log, `sp audit`, the approver's
//! fields, `sp check`. Never panics, and:
//! - `escape` leaves no character of the unsafe class (controls, C1, bidi, format and
//!   separator characters, ...) raw, and changes nothing in text without one;
//! - `json_safe` of a JSON text is the same JSON value, with no unsafe character raw;
//! - `shown(raw, max)` has no unsafe character raw, is `escape(raw)` when that fits, and
//!   otherwise at most `max` bytes of it followed by a cut marker naming the raw length;
//! - `shown_host` of any text has no unsafe character raw in either form.

#![no_main]

use libfuzzer_sys::fuzz_target;
use sallyport::fuzzing::{escape, is_unsafe, json_safe, shown, shown_host};
use serde_json::Value;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else { return };
    let e = escape(text);
    assert!(!e.chars().any(is_unsafe), "escape left an unsafe character: {e:?}");
    if !text.chars().any(is_unsafe) {
        assert_eq!(e, text);
    }

    let value = Value::String(text.to_owned());
    let line = serde_json::to_string(&value).unwrap();
    let safe = json_safe(&line);
    assert!(!safe.chars().any(|c| is_unsafe(c) && c != '\n'), "json_safe left an unsafe character: {safe:?}");
    assert_eq!(serde_json::from_str::<Value>(&safe).unwrap(), value, "json_safe changed the value");

    let max = data.len() % 97;
    let s = shown(text, max);
    assert!(!s.chars().any(is_unsafe), "shown left an unsafe character: {s:?}");
    if e.len() <= max {
        assert_eq!(s, e);
    } else {
        // The last marker is sp's (the text may hold look-alikes: they hide nothing).
        let cut = s.rfind("...[cut: ").expect("a cut marker");
        assert!(cut <= max, "{cut} > {max}");
        assert!(e.starts_with(&s[..cut]), "the kept part is not a prefix of the escaped text");
        assert!(s[cut..].starts_with(&format!("...[cut: {} bytes, sha256 ", text.len())), "{s}");
    }

    let (ascii, unicode) = shown_host(text);
    assert!(!ascii.chars().any(is_unsafe) && !unicode.unwrap_or_default().chars().any(is_unsafe));
});
