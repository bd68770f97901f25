//! Stage 2: a frame's text -> exactly one JSON value.
//!
//! Stricter than `serde_json::from_str::<Value>`:
//! - exactly one value: trailing data (a second object, text after the value) is refused;
//! - duplicate object keys are refused at every depth (after unescaping, so `"a"` and
//!   `"\u0061"` collide) instead of silently keeping the last one: two parsers reading
//!   the same bytes must never see two different requests;
//! - nesting depth is capped at [`MAX_DEPTH`] (serde_json's own limit is 128);
//! - a BOM is not whitespace; lone surrogate escapes are refused (serde_json does this).

use std::fmt;

use serde::de::{self, DeserializeSeed, Deserializer, MapAccess, SeqAccess, Visitor};
use serde_json::{Map, Number, Value};

/// Maximum nesting of arrays and objects (issue #2).
pub const MAX_DEPTH: usize = 64;

#[derive(Debug, PartialEq, Eq)]
pub enum JsonError {
    /// Not JSON, or JSON followed by anything but whitespace. Carries serde_json's
    /// description, which names a position, never echoes content.
    Syntax(String),
    DuplicateKey { key: String },
    TooDeep { limit: usize },
}

impl fmt::Display for JsonError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            JsonError::Syntax(m) => write!(f, "not a single JSON value: {m}"),
            JsonError::DuplicateKey { key } => {
                write!(f, "duplicate object key {:?}", truncate(key, 64))
            }
            JsonError::TooDeep { limit } => write!(f, "JSON nested deeper than {limit} levels"),
        }
    }
}

fn truncate(s: &str, max: usize) -> &str {
    match s.char_indices().nth(max) {
        Some((i, _)) => &s[..i],
        None => s,
    }
}

/// Parses exactly one JSON value from `text`.
pub fn parse(text: &str) -> Result<Value, JsonError> {
    let mut de = serde_json::Deserializer::from_str(text);
    // Our seed tracks depth itself; serde_json's 128 limit stays on as a backstop.
    let value = Strict { depth: 0 }.deserialize(&mut de).map_err(classify)?;
    de.end().map_err(classify)?;
    Ok(value)
}

const DUP_TAG: &str = "\u{1}sp-duplicate-key:";
const DEPTH_TAG: &str = "\u{1}sp-too-deep";

fn classify(e: serde_json::Error) -> JsonError {
    let msg = e.to_string();
    if let Some(rest) = msg.strip_prefix(DUP_TAG) {
        // serde_json appends " at line L column C"; keep only the key.
        let key = rest.rsplit_once(" at line ").map_or(rest, |(k, _)| k);
        return JsonError::DuplicateKey { key: key.to_owned() };
    }
    if msg.starts_with(DEPTH_TAG) || e.to_string().contains("recursion limit exceeded") {
        return JsonError::TooDeep { limit: MAX_DEPTH };
    }
    JsonError::Syntax(msg)
}

struct Strict {
    depth: usize,
}

impl Strict {
    fn child<E: de::Error>(&self) -> Result<Strict, E> {
        if self.depth >= MAX_DEPTH {
            return Err(E::custom(DEPTH_TAG));
        }
        Ok(Strict { depth: self.depth + 1 })
    }
}

impl<'de> DeserializeSeed<'de> for Strict {
    type Value = Value;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Value, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Strict {
    type Value = Value;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON value")
    }
    fn visit_bool<E>(self, v: bool) -> Result<Value, E> {
        Ok(Value::Bool(v))
    }
    fn visit_i64<E>(self, v: i64) -> Result<Value, E> {
        Ok(Value::Number(v.into()))
    }
    fn visit_u64<E>(self, v: u64) -> Result<Value, E> {
        Ok(Value::Number(v.into()))
    }
    fn visit_f64<E: de::Error>(self, v: f64) -> Result<Value, E> {
        Number::from_f64(v).map(Value::Number).ok_or_else(|| E::custom("number out of range"))
    }
    fn visit_str<E>(self, v: &str) -> Result<Value, E> {
        Ok(Value::String(v.to_owned()))
    }
    fn visit_string<E>(self, v: String) -> Result<Value, E> {
        Ok(Value::String(v))
    }
    fn visit_unit<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }
    fn visit_none<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Value, A::Error> {
        let child = self.child()?;
        let mut items = Vec::new();
        while let Some(v) = seq.next_element_seed(Strict { depth: child.depth })? {
            items.push(v);
        }
        Ok(Value::Array(items))
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Value, A::Error> {
        let child = self.child()?;
        let mut out = Map::new();
        while let Some(key) = map.next_key::<String>()? {
            if out.contains_key(&key) {
                return Err(de::Error::custom(format_args!("{DUP_TAG}{}", truncate(&key, 64))));
            }
            let v = map.next_value_seed(Strict { depth: child.depth })?;
            out.insert(key, v);
        }
        Ok(Value::Object(out))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn accepts() {
        let cases: &[(&str, Value)] = &[
            ("{}", json!({})),
            (" {\"a\": [1, 2.5, \"x\", null, true]} ", json!({"a": [1, 2.5, "x", null, true]})),
            ("\"\\ud83d\\ude00\"", json!("😀")),
            ("{\"a\":{\"a\":1}}", json!({"a": {"a": 1}})),
            ("18446744073709551615", json!(18446744073709551615u64)),
        ];
        for (text, want) in cases {
            assert_eq!(parse(text).as_ref(), Ok(want), "{text}");
        }
    }

    #[test]
    fn refuses() {
        let syntax = |t: &str| matches!(parse(t), Err(JsonError::Syntax(_)));
        for text in [
            "",
            "   ",
            "{",
            "{}{}",
            "{} {}",
            "{}x",
            "[1,]",
            "{\"a\":1,}",
            "\u{feff}{}",
            "\"\\ud800\"",
            "\"\\udc00x\"",
            "'a'",
            "NaN",
            "<html><body>502 Bad Gateway</body></html>",
            "{\"a\":\"tab\there\"}",
            "{\"a\":1}\r\n",
        ] {
            // the last one: the frame stage strips one \r; an \r\n left here is a bug
            // upstream, but JSON allows it as whitespace, so only assert on the others.
            if text.ends_with("\r\n") {
                assert!(parse(text).is_ok());
                continue;
            }
            assert!(syntax(text), "{text:?} gave {:?}", parse(text));
        }
    }

    #[test]
    fn duplicate_keys_at_any_depth() {
        for text in [
            r#"{"a":1,"a":2}"#,
            r#"{"a":1,"\u0061":2}"#,
            r#"{"x":{"k":1,"k":1}}"#,
            r#"[{"p":{"q":[{"z":1,"z":1}]}}]"#,
        ] {
            assert!(
                matches!(parse(text), Err(JsonError::DuplicateKey { .. })),
                "{text} gave {:?}",
                parse(text)
            );
        }
        assert_eq!(
            parse(r#"{"method":1,"method":2}"#),
            Err(JsonError::DuplicateKey { key: "method".into() })
        );
    }

    #[test]
    fn depth_cap() {
        let nest = |n: usize| "[".repeat(n) + &"]".repeat(n);
        assert!(parse(&nest(MAX_DEPTH)).is_ok());
        assert_eq!(parse(&nest(MAX_DEPTH + 1)), Err(JsonError::TooDeep { limit: MAX_DEPTH }));
        assert_eq!(parse(&nest(100_000)), Err(JsonError::TooDeep { limit: MAX_DEPTH }));
        let objects = "{\"a\":".repeat(MAX_DEPTH + 1) + "1" + &"}".repeat(MAX_DEPTH + 1);
        assert_eq!(parse(&objects), Err(JsonError::TooDeep { limit: MAX_DEPTH }));
    }
}
