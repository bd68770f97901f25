//! Field checks shared by every policy section parser (`credentials.rs`, `http.rs`,
//! `ssh.rs`, `approval.rs`, `audit.rs`): each failure is `(field, message)`, so an error names the
//! exact field (`ssh.hosts.web1.port: must be an integer from 1 to 65535`).

use std::path::PathBuf;

use std::fmt;

use serde_json::{Map, Value};

/// A check's result: the value, or `(field, message)`.
pub(crate) type Check<T> = Result<T, (String, String)>;

pub(crate) fn err<T>(field: &str, message: impl Into<String>) -> Check<T> {
    Err((field.to_owned(), message.into()))
}

/// An object whose keys are all in `allowed` (unknown fields are refused: a typo must
/// not silently widen or narrow access). `field` empty means the top level.
pub(crate) fn object<'a>(v: &'a Value, field: &str, allowed: &[&str]) -> Check<&'a Map<String, Value>> {
    let Value::Object(map) = v else {
        return err(field, "must be an object");
    };
    if let Some(k) = map.keys().find(|k| !allowed.contains(&k.as_str())) {
        // A key that is empty or holds more than letters, digits, `_` and `-` is quoted
        // (fuzzing found `{"": 0}` refused with no field named).
        let plain = !k.is_empty() && k.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-');
        let k = if plain { k.clone() } else { format!("{k:?}") };
        let at = if field.is_empty() { k } else { format!("{field}.{k}") };
        return err(&at, format!("unknown field (expected one of: {})", allowed.join(", ")));
    }
    Ok(map)
}

/// Credential (and SSH host) names: what the agent uses to pick one. Kept plain so they are safe in
/// messages, logs and the journal.
pub(crate) fn is_name(s: &str) -> bool {
    (1..=64).contains(&s.len()) && s.bytes().all(|b| b.is_ascii_alphanumeric() || b"_.-".contains(&b))
}

/// A non-empty string.
pub(crate) fn string<'a>(v: &'a Value, field: &str) -> Check<&'a str> {
    match v {
        Value::String(s) if !s.is_empty() => Ok(s),
        Value::String(_) => err(field, "must not be empty"),
        _ => err(field, "must be a string"),
    }
}

/// A non-empty array.
pub(crate) fn list<'a>(v: &'a Value, field: &str) -> Check<&'a Vec<Value>> {
    match v {
        Value::Array(a) if !a.is_empty() => Ok(a),
        Value::Array(_) => err(field, "must not be empty"),
        _ => err(field, "must be an array"),
    }
}

pub(crate) fn int(v: &Value, field: &str, min: u64, max: u64) -> Check<u64> {
    match v.as_u64() {
        Some(n) if (min..=max).contains(&n) => Ok(n),
        _ => err(field, format!("must be an integer from {min} to {max}")),
    }
}

pub(crate) fn abs_path(v: &Value, field: &str) -> Check<PathBuf> {
    let p = string(v, field)?;
    if !p.starts_with('/') || p.contains('\0') {
        return err(field, "must be an absolute path");
    }
    Ok(PathBuf::from(p))
}

pub(crate) fn required<'a>(map: &'a Map<String, Value>, key: &str, field: &str) -> Check<&'a Value> {
    map.get(key).ok_or_else(|| (format!("{field}.{key}"), "is required".to_owned()))
}

/// An optional `true`/`false` field of `map`; `default` when absent.
pub(crate) fn flag(map: &Map<String, Value>, key: &str, field: &str, default: bool) -> Check<bool> {
    match map.get(key) {
        None => Ok(default),
        Some(Value::Bool(b)) => Ok(*b),
        Some(_) => err(&format!("{field}.{key}"), "must be true or false"),
    }
}

/// Why a host, path or command pattern is refused. A host or path pattern is quoted
/// in the message (`text`); a command pattern's field names it, and a word of it is
/// quoted where the word is the fault.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PatternError {
    /// Host: the port is not a number from 1 to 65535.
    BadPort {
        text: String,
    },
    /// Host: a URL (`https://api.example.com/v1`); `host` is what to write instead
    /// (`api.example.com`, with the port when the URL names one), when it can be told.
    Url {
        text: String,
        host: Option<String>,
    },
    /// Host: an IPv6 literal without its `]`.
    UnclosedBracket {
        text: String,
    },
    /// Host: a `*` other than a leading `*.`.
    WildcardNotLeading {
        text: String,
    },
    NotAHost {
        text: String,
    },
    /// Host: `*.` before an IP address.
    WildcardIp {
        text: String,
    },
    /// Path: not starting with `/`.
    NotAbsolute {
        text: String,
    },
    /// Path: a `*` other than a final `/*`.
    StarNotFinal {
        text: String,
    },
    /// Path: `.`, `..`, `%`, `?` or `#`.
    NotPlain {
        text: String,
    },
    /// Command: empty.
    Empty,
    /// Command: a metacharacter the matcher always refuses (`what` names it).
    Forbidden {
        what: &'static str,
    },
    /// Command: a control character.
    Control,
    /// Command: words not separated by single spaces.
    Spacing,
    /// Command: `**` in a word.
    DoubleStar {
        word: String,
    },
    /// Command: a starred word with its own `..` segment, which never matches.
    DotDotGlob {
        word: String,
    },
}

impl fmt::Display for PatternError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PatternError::BadPort { text } => write!(f, "{text:?}: the port must be a number from 1 to 65535"),
            PatternError::Url { text, host: Some(host) } => {
                write!(f, "{text:?} is a URL, not a host: write {host:?} (a path goes in \"paths\")")
            }
            PatternError::Url { text, host: None } => write!(f, "{text:?} is a URL, not a host: write the host name alone (and :port)"),
            PatternError::UnclosedBracket { text } => write!(f, "{text:?}: unclosed '['"),
            PatternError::WildcardNotLeading { text } => write!(f, "{text:?}: a wildcard is only allowed as a leading \"*.\""),
            PatternError::NotAHost { text } => write!(f, "{text:?} is not a valid host"),
            PatternError::WildcardIp { text } => write!(f, "{text:?}: a wildcard cannot apply to an IP address"),
            PatternError::NotAbsolute { text } => write!(f, "{text:?} must start with '/'"),
            PatternError::StarNotFinal { text } => write!(f, "{text:?}: '*' is only allowed as a final \"/*\""),
            PatternError::NotPlain { text } => write!(f, "{text:?}: write the plain decoded path, without '.', '..', '%', '?' or '#'"),
            PatternError::Empty => f.write_str("must not be empty"),
            PatternError::Forbidden { what } => write!(f, "contains {what}: such a command is always refused, so this pattern could never match"),
            PatternError::Control => f.write_str("contains a control character"),
            PatternError::Spacing => f.write_str("words must be separated by single spaces, without leading or trailing space"),
            PatternError::DoubleStar { word } => write!(f, "{word:?}: two '*' in a row are ambiguous; one '*' already matches a whole argument"),
            PatternError::DotDotGlob { word } => {
                write!(f, "{word:?}: a word with '*' never matches text containing a '..' path segment, so this pattern could never match")
            }
        }
    }
}

impl std::error::Error for PatternError {}
