//! The approver's answer: the grant it asks for with its yes, read from the last line
//! of its standard output ([`parse_answer`]).

use std::fmt;

use serde_json::Value;

use super::{GrantRequest, Scope, MAX_ANSWER_BYTES};

/// Why an approver's grant line was not taken. The gate treats it as a plain yes for
/// this one call and logs this.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum AnswerError {
    TooLong {
        max: usize,
    },
    NotUtf8,
    Json {
        why: String,
    },
    /// Valid JSON of the wrong shape: names what is wrong, never echoes a value.
    Shape {
        why: &'static str,
    },
}

impl fmt::Display for AnswerError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("the approver's grant line is ignored (this approval covers one call): ")?;
        match self {
            AnswerError::TooLong { max } => write!(f, "longer than {max} bytes"),
            AnswerError::NotUtf8 => f.write_str("not UTF-8"),
            AnswerError::Json { why } => f.write_str(why),
            AnswerError::Shape { why } => f.write_str(why),
        }
    }
}

impl std::error::Error for AnswerError {}

/// The grant an approver asked for on its standard output, if any. The request is the
/// last non-empty line, and only when it starts with `{` (earlier lines, and a last line
/// that is not JSON, are the approver's own chatter: no request, a plain yes). That line
/// must be exactly `{"grant": "once"}` or `{"grant": "exact"|"session", "ttl_s": N}`
/// with N from 1 to 2^32-1 (cut to the operator's max later): an unknown key, a
/// duplicate key, a float, a string where a number belongs, a missing `ttl_s` is an
/// [`AnswerError`], which the gate must treat as a yes for this one call (never a
/// refusal, never a grant) and log.
pub(crate) fn parse_answer(stdout: &[u8]) -> Result<Option<GrantRequest>, AnswerError> {
    let is_blank = |l: &&[u8]| l.iter().all(|b| b.is_ascii_whitespace());
    let Some(line) = stdout.split(|b| *b == b'\n').rev().find(|l| !is_blank(l)) else { return Ok(None) };
    let line = line.trim_ascii();
    if !line.starts_with(b"{") {
        return Ok(None);
    }
    if line.len() > MAX_ANSWER_BYTES {
        return Err(AnswerError::TooLong { max: MAX_ANSWER_BYTES });
    }
    let text = std::str::from_utf8(line).map_err(|_| AnswerError::NotUtf8)?;
    let value = crate::json::parse(text).map_err(|e| AnswerError::Json { why: e.to_string() })?;
    let shape = |why| Err(AnswerError::Shape { why });
    let Value::Object(map) = value else { return shape("not an object") };
    if map.keys().any(|k| k != "grant" && k != "ttl_s") {
        return shape("a key other than \"grant\" and \"ttl_s\"");
    }
    let ttl = match map.get("ttl_s") {
        None => None,
        Some(v) => match v.as_u64() {
            Some(n) if (1..=u64::from(u32::MAX)).contains(&n) => Some(n),
            _ => return shape("\"ttl_s\" is not an integer from 1 to 4294967295"),
        },
    };
    match (map.get("grant").and_then(Value::as_str), ttl) {
        (Some("once"), None) => Ok(Some(GrantRequest::Once)),
        (Some("once"), Some(_)) => shape("\"once\" takes no \"ttl_s\""),
        (Some("exact"), Some(ttl_s)) => Ok(Some(GrantRequest::Lasting { scope: Scope::Exact, ttl_s })),
        (Some("session"), Some(ttl_s)) => Ok(Some(GrantRequest::Lasting { scope: Scope::Session, ttl_s })),
        (Some("exact" | "session"), None) => shape("\"exact\" and \"session\" need \"ttl_s\""),
        _ => shape("\"grant\" is not \"once\", \"exact\" or \"session\""),
    }
}
