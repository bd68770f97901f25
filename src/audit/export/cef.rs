//! CEF (ArcSight Common Event Format, version 0): one line per row,
//! `CEF:0|Sallyport|sp|VERSION|CLASS|NAME|SEVERITY|EXTENSION`.
//!
//! Escaping, as the CEF specification says: in the header a backslash is `\\` and a
//! pipe `\|` (a newline cannot be escaped there and none may appear: it becomes a
//! space); in an extension value a backslash is `\\`, an equals sign `\=`, a newline
//! `\n` and a carriage return `\r` (a pipe needs no escape there). The other
//! characters of `escape.rs`'s class (C0 and C1 controls, bidi, zero-width,
//! separators) have no CEF escape: they are written as the text `\u{…}`, its backslash
//! escaped like any other, so the reader sees the same notation as `sp audit show`.
//! Keys are fixed here (never taken from the row's text), so a value cannot add one.

use serde_json::{Map, Value};

use super::{level, text};

/// The extension keys, in order: (row field, CEF key, label key for the custom ones).
/// Row fields not listed are written as `sp` + the field's letters (`spHostKeyFp`).
const KEYS: [(&str, &str, Option<&str>); 18] = [
    ("seq", "externalId", None),
    ("kind", "cat", None),
    ("decision", "act", None),
    ("target", "cs1", Some("cs1Label")),
    ("tool", "cs2", Some("cs2Label")),
    ("session", "cs3", Some("cs3Label")),
    ("rule", "cs4", Some("cs4Label")),
    ("credential", "cs5", Some("cs5Label")),
    ("request_fp", "cs6", Some("cs6Label")),
    ("reason", "reason", None),
    ("code", "outcome", None),
    ("status", "cn1", Some("cn1Label")),
    ("exit_status", "cn2", Some("cn2Label")),
    ("duration_ms", "cn3", Some("cn3Label")),
    ("bytes_in", "in", None),
    ("bytes_out", "out", None),
    ("hash", "flexString1", Some("flexString1Label")),
    ("prev", "flexString2", Some("flexString2Label")),
];

/// A header field: `\` and `|` escaped, line breaks made spaces, the rest of
/// escape.rs's class written as `\u{…}` text (its backslash escaped).
pub(super) fn header(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '|' => out.push_str("\\|"),
            '\n' | '\r' => out.push(' '),
            c if crate::escape::is_unsafe(c) => push_notation(&mut out, c),
            c => out.push(c),
        }
    }
    out
}

/// An extension value: `\`, `=`, newline and carriage return escaped; the rest of
/// escape.rs's class written as `\u{…}` text (its backslash escaped).
pub(super) fn value(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '=' => out.push_str("\\="),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            c if crate::escape::is_unsafe(c) => push_notation(&mut out, c),
            c => out.push(c),
        }
    }
    out
}

/// `\u{1b}` as text, its backslash doubled (a CEF reader gives back `\u{1b}`).
fn push_notation(out: &mut String, c: char) {
    out.push('\\');
    out.extend(c.escape_unicode());
}

/// A field's value as CEF text (strings escaped; numbers and booleans as JSON spells
/// them; anything else as compact JSON, escaped).
fn field(v: &Value) -> String {
    match v {
        Value::String(s) => value(s),
        other => value(&other.to_string()),
    }
}

/// The row as one CEF line (without a newline).
pub(super) fn event(fields: &Map<String, Value>) -> String {
    let (kind, decision) = (text(fields, "kind"), text(fields, "decision"));
    let class = if decision.is_empty() { kind.to_owned() } else { format!("{kind}:{decision}") };
    let name = if decision.is_empty() { kind.to_owned() } else { format!("{kind} {decision}") };
    let mut out = format!("CEF:0|Sallyport|sp|{}|{}|{}|{}|", header(env!("CARGO_PKG_VERSION")), header(&class), header(&name), level(kind, decision).cef());
    let mut ext: Vec<String> = Vec::new();
    if let Some(ms) = fields.get("ts").and_then(Value::as_str).and_then(super::parse_rfc3339) {
        ext.push(format!("rt={ms}"));
    }
    for (name, key, label) in KEYS {
        let Some(v) = fields.get(name) else { continue };
        if let Some(label) = label {
            ext.push(format!("{label}={name}"));
        }
        ext.push(format!("{key}={}", field(v)));
    }
    for (name, v) in fields {
        if name == "ts" || KEYS.iter().any(|(f, _, _)| f == name) {
            continue;
        }
        ext.push(format!("{}={}", custom_key(name), field(v)));
    }
    out.push_str(&ext.join(" "));
    out
}

/// `host_key_fp` -> `spHostKeyFp`: letters and digits only, so a key is always a key.
fn custom_key(name: &str) -> String {
    let mut key = String::from("sp");
    let mut upper = true;
    for c in name.chars() {
        if c.is_ascii_alphanumeric() {
            key.push(if upper { c.to_ascii_uppercase() } else { c });
            upper = false;
        } else {
            upper = true;
        }
    }
    key
}
