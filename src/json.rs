//! Stage 2: a frame's text -> exactly one JSON value.
//!
//! Stricter than `serde_json::from_str::<Value>`:
//! - exactly one value: trailing data (a second object, text after the value) is refused;
//! - duplicate object keys are refused at every depth (after unescaping, so `"a"` and
//!   `"\u0061"` collide) instead of silently keeping the last one: two parsers reading
//!   the same bytes must never see two different requests;
//! - nesting depth is capped at [`MAX_DEPTH`] (serde_json's own limit is 128);
//! - the memory the parsed value takes is capped ([`MAX_PARSED_BYTES`] by default, issue
//!   #12): a value costs 32 bytes or more however few bytes it takes on the wire
//!   (`[0,0,...]` is 2 bytes per value, `{"a":0}` costs a 500-byte map node for 7), so
//!   without a cap a 4 MiB line cost 137 MiB and more. Each value is charged its
//!   estimated cost ([`cost`]) before it is built; the parse stops at the limit;
//! - a BOM is not whitespace; lone surrogate escapes are refused (serde_json does this).

use std::fmt;

use serde::de::{self, DeserializeSeed, Deserializer, MapAccess, SeqAccess, Visitor};
use serde_json::{Map, Number, Value};

/// Maximum nesting of arrays and objects.
pub(crate) const MAX_DEPTH: usize = 64;

/// Default cap on the estimated memory of one parsed document: 8 MiB. `sp mcp` raises it
/// with `--max-line-bytes` (twice the line limit, see `sp(1)`).
pub(crate) const MAX_PARSED_BYTES: usize = 8 * 1024 * 1024;

/// Estimated heap cost of parsed values, as serde_json builds them (64-bit).
mod cost {
    /// Any value: a `Value` slot in its array or map.
    pub(super) const VALUE: usize = 32;
    /// A non-empty object: its first B-tree node (11 keys and values).
    pub(super) const OBJECT_NODE: usize = 544;
    /// Each member of an object: its key `String` and its share of further nodes.
    pub(super) const MEMBER: usize = 48;
}

#[derive(Debug, PartialEq, Eq)]
pub enum JsonError {
    /// Not JSON, or JSON followed by anything but whitespace. Carries serde_json's
    /// description, which names a position, never echoes content.
    Syntax(String),
    DuplicateKey {
        key: String,
    },
    TooDeep {
        limit: usize,
    },
    TooLarge {
        limit: usize,
    },
}

impl fmt::Display for JsonError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            JsonError::Syntax(m) => write!(f, "not a single JSON value: {m}"),
            // Quoted whole or not at all, never cut: the text can be a peer's, and is
            // scrubbed where it is shown; a cut key could keep a secret's prefix too short
            // to be recognised there (issue 31, section 3).
            JsonError::DuplicateKey { key } if key.chars().count() <= MAX_SHOWN_KEY_CHARS => write!(f, "duplicate object key {key:?}"),
            JsonError::DuplicateKey { key } => write!(f, "duplicate object key of {} characters", key.chars().count()),
            JsonError::TooDeep { limit } => write!(f, "JSON nested deeper than {limit} levels"),
            JsonError::TooLarge { limit } => write!(f, "JSON whose parsed values would take more than {limit} bytes"),
        }
    }
}

impl std::error::Error for JsonError {}

/// Longest duplicate key an error quotes; a longer one is named by its length.
const MAX_SHOWN_KEY_CHARS: usize = 64;

/// Parses exactly one JSON value from `text`, within [`MAX_PARSED_BYTES`].
pub fn parse(text: &str) -> Result<Value, JsonError> {
    parse_limited(text, MAX_PARSED_BYTES)
}

/// Parses exactly one JSON value from `text` whose parsed form takes at most about
/// `max_bytes` of memory.
pub(crate) fn parse_limited(text: &str, max_bytes: usize) -> Result<Value, JsonError> {
    let mut de = serde_json::Deserializer::from_str(text);
    let left = std::cell::Cell::new(max_bytes);
    let why = std::cell::Cell::new(None);
    // Our seed tracks depth itself; serde_json's 128 limit stays on as a backstop.
    let value = Strict { depth: 0, left: &left, max: max_bytes, why: &why }.deserialize(&mut de).map_err(|e| classify(e, why.take()))?;
    de.end().map_err(|e| classify(e, None))?;
    Ok(value)
}

/// The error: what our seed refused (held beside the parse, typed: serde_json's error
/// carries only a message), else serde_json's own.
fn classify(e: serde_json::Error, refused: Option<JsonError>) -> JsonError {
    if let Some(refused) = refused {
        return refused;
    }
    let msg = e.to_string();
    if msg.contains("recursion limit exceeded") {
        return JsonError::TooDeep { limit: MAX_DEPTH };
    }
    JsonError::Syntax(msg)
}

struct Strict<'c> {
    depth: usize,
    /// Estimated bytes still allowed for the document.
    left: &'c std::cell::Cell<usize>,
    /// The whole budget, for the error.
    max: usize,
    /// Why the seed stopped the parse, when it did (the error it returns says nothing).
    why: &'c std::cell::Cell<Option<JsonError>>,
}

impl<'c> Strict<'c> {
    /// Charges `n` bytes to the document, failing once the budget is spent.
    fn charge<E: de::Error>(&self, n: usize) -> Result<(), E> {
        match self.left.get().checked_sub(n) {
            Some(left) => {
                self.left.set(left);
                Ok(())
            }
            None => Err(self.refuse(JsonError::TooLarge { limit: self.max })),
        }
    }

    fn child<E: de::Error>(&self) -> Result<Strict<'c>, E> {
        if self.depth >= MAX_DEPTH {
            return Err(self.refuse(JsonError::TooDeep { limit: MAX_DEPTH }));
        }
        Ok(Strict { depth: self.depth + 1, ..*self })
    }

    /// Stops the parse for `why`, kept beside it for [`classify`].
    fn refuse<E: de::Error>(&self, why: JsonError) -> E {
        self.why.set(Some(why));
        E::custom("refused by the strict reader")
    }
}

impl<'de> DeserializeSeed<'de> for Strict<'_> {
    type Value = Value;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Value, D::Error> {
        // Charged before the value is built: an array stops growing at the limit.
        self.charge(cost::VALUE)?;
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Strict<'_> {
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
    fn visit_str<E: de::Error>(self, v: &str) -> Result<Value, E> {
        self.charge(v.len())?;
        Ok(Value::String(v.to_owned()))
    }
    fn visit_string<E: de::Error>(self, v: String) -> Result<Value, E> {
        self.charge(v.len())?;
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
        while let Some(v) = seq.next_element_seed(Strict { ..child })? {
            items.push(v);
        }
        Ok(Value::Array(items))
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Value, A::Error> {
        let child = self.child()?;
        let mut out = Map::new();
        while let Some(key) = map.next_key::<String>()? {
            let node = if out.is_empty() { cost::OBJECT_NODE } else { 0 };
            self.charge(node + cost::MEMBER + key.len())?;
            if out.contains_key(&key) {
                return Err(self.refuse(JsonError::DuplicateKey { key }));
            }
            let v = map.next_value_seed(Strict { ..child })?;
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
        ] {
            assert!(syntax(text), "{text:?} gave {:?}", parse(text));
        }
    }

    /// The frame stage strips one `\r`; a `\r\n` that reached this stage would be a bug
    /// upstream, but JSON allows both as whitespace after the value.
    #[test]
    fn trailing_cr_lf_is_whitespace_here() {
        assert_eq!(parse("{\"a\":1}\r\n").unwrap(), serde_json::json!({"a": 1}));
    }

    #[test]
    fn duplicate_keys_at_any_depth() {
        for text in [r#"{"a":1,"a":2}"#, r#"{"a":1,"\u0061":2}"#, r#"{"x":{"k":1,"k":1}}"#, r#"[{"p":{"q":[{"z":1,"z":1}]}}]"#] {
            assert!(matches!(parse(text), Err(JsonError::DuplicateKey { .. })), "{text} gave {:?}", parse(text));
        }
        assert_eq!(parse(r#"{"method":1,"method":2}"#), Err(JsonError::DuplicateKey { key: "method".into() }));
    }

    #[test]
    fn the_memory_cap_stops_dense_documents_before_they_are_built() {
        let dense = |n: usize| format!("[{}]", vec!["0"; n].join(","));
        // n elements + the array itself, 32 bytes each
        assert!(parse_limited(&dense(9), 320).is_ok());
        assert_eq!(parse_limited(&dense(10), 320), Err(JsonError::TooLarge { limit: 320 }));
        // an object: its value, a node, a member with its key, the member's value
        let one = 32 + 544 + 48 + 1 + 32;
        assert!(parse_limited(r#"{"a":0}"#, one).is_ok());
        assert_eq!(parse_limited(r#"{"a":0}"#, one - 1), Err(JsonError::TooLarge { limit: one - 1 }));
        // strings count their bytes
        assert!(parse_limited(r#""abcd""#, 36).is_ok());
        assert_eq!(parse_limited(r#""abcde""#, 36), Err(JsonError::TooLarge { limit: 36 }));
        // the default: 4 MiB of `[0,0,...]` or of `[{"a":0},...]` is refused
        assert_eq!(parse(&dense(2 * 1024 * 1024)), Err(JsonError::TooLarge { limit: MAX_PARSED_BYTES }));
        let objects = format!("[{}]", vec![r#"{"a":0}"#; 512 * 1024].join(","));
        assert_eq!(parse(&objects), Err(JsonError::TooLarge { limit: MAX_PARSED_BYTES }));
        assert!(parse(&dense(200_000)).is_ok());
        // the limit wins over a syntax error later in the text (it is met first)
        assert_eq!(parse_limited("[0,0,0,x", 64), Err(JsonError::TooLarge { limit: 64 }));
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
