//! The grants file's form (module docs of `grants`, "The file"): one grant per line
//! when written ([`render_file`], each signed: `mac.rs`), parsed strictly when read
//! ([`parse_file`]); what is wrong with a file that does not parse is a [`FormError`],
//! and the file is corrupt. Whether a record's `mac` is right is the store's question
//! (a well-formed record with a missing or wrong one is ignored, not corrupt).

use std::fmt;

use serde_json::{json, Map, Value};

use super::mac::GrantKey;
use super::{Channel, Grant, Scope, MAX_GRANTS, MAX_SHOWN_NAME, MAX_SHOWN_TARGET};
use crate::policy::approval::MAX_GRANT_S;
use crate::sys;

const FILE_VERSION: u64 = 1;

/// Why a grants file is corrupt. Names what is wrong, and a key only cut short; never a
/// value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum FormError {
    NotUtf8,
    /// Not one JSON value (the parser's reason, which names a position).
    Json {
        why: String,
    },
    NotObject,
    /// A top-level key other than `version` and `grants` (cut to 32 characters).
    UnknownKey {
        key: String,
    },
    Version,
    GrantsNotArray,
    TooMany,
    TooLarge {
        max: u64,
    },
    /// The grant at `index` is not one this `sp` wrote.
    Grant {
        index: usize,
        why: BadGrant,
    },
    /// The grant at `index` repeats the id of an earlier one.
    SameId {
        index: usize,
        id: String,
    },
}

impl fmt::Display for FormError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            FormError::NotUtf8 => f.write_str("not UTF-8"),
            FormError::Json { why } => f.write_str(why),
            FormError::NotObject => f.write_str("not a JSON object"),
            FormError::UnknownKey { key } => write!(f, "unknown key {key:?}"),
            FormError::Version => write!(f, "\"version\" is not {FILE_VERSION}"),
            FormError::GrantsNotArray => f.write_str("\"grants\" is not an array"),
            FormError::TooMany => write!(f, "more than {MAX_GRANTS} grants"),
            FormError::TooLarge { max } => write!(f, "larger than {max} bytes"),
            FormError::Grant { index, why } => write!(f, "grants[{index}]: {why}"),
            FormError::SameId { index, id } => write!(f, "grants[{index}]: a second grant with id {id}"),
        }
    }
}

impl std::error::Error for FormError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            FormError::Grant { why, .. } => Some(why),
            _ => None,
        }
    }
}

/// What is wrong with one grant of the file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum BadGrant {
    NotObject,
    /// A key no grant has (cut to 32 characters).
    UnknownKey {
        key: String,
    },
    NotString {
        key: &'static str,
    },
    TooLong {
        key: &'static str,
        max: usize,
    },
    NotNumber {
        key: &'static str,
    },
    Id,
    Scope,
    Policy,
    Ttl,
    Expires,
    RequestedTtl,
    Action,
    ExactWithoutAction,
    SessionWithAction,
    Channel,
    Uid,
}

impl fmt::Display for BadGrant {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            BadGrant::NotObject => f.write_str("not an object"),
            BadGrant::UnknownKey { key } => write!(f, "unknown key {key:?}"),
            BadGrant::NotString { key } => write!(f, "{key} is not a string"),
            BadGrant::TooLong { key, max } => write!(f, "{key} is longer than {max} bytes"),
            BadGrant::NotNumber { key } => write!(f, "{key} is not a non-negative integer"),
            BadGrant::Id => f.write_str("id is not 16 hex digits"),
            BadGrant::Scope => f.write_str("scope is not \"exact\" or \"session\""),
            BadGrant::Policy => f.write_str("policy is not 64 hex digits"),
            BadGrant::Ttl => write!(f, "ttl_s is not from 1 to {MAX_GRANT_S}"),
            BadGrant::Expires => f.write_str("expires is not created + ttl_s"),
            BadGrant::RequestedTtl => f.write_str("requested_ttl_s is not more than ttl_s"),
            BadGrant::Action => f.write_str("action is not 64 hex digits"),
            BadGrant::ExactWithoutAction => f.write_str("an exact grant without action"),
            BadGrant::SessionWithAction => f.write_str("a session grant with an action"),
            BadGrant::Channel => f.write_str("channel is not \"command\" or \"elicitation\""),
            BadGrant::Uid => f.write_str("uid is out of range"),
        }
    }
}

impl std::error::Error for BadGrant {}

/// A grant as the file holds it: the grant and its `mac` (any string of at most 64
/// bytes; whether it is right is checked against the key, not here).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Record {
    pub grant: Grant,
    pub mac: Option<String>,
}

impl Grant {
    /// The grant as stored, without its `mac`.
    pub(super) fn to_json(&self) -> Value {
        let mut m = Map::new();
        m.insert("id".into(), json!(self.id));
        m.insert("scope".into(), json!(self.scope.as_str()));
        m.insert("policy".into(), json!(self.policy));
        m.insert("created".into(), json!(self.created));
        m.insert("expires".into(), json!(self.expires));
        m.insert("ttl_s".into(), json!(self.ttl_s));
        if let Some(r) = self.requested_ttl_s {
            m.insert("requested_ttl_s".into(), json!(r));
        }
        if let Some(a) = &self.action {
            m.insert("action".into(), json!(a));
        }
        m.insert("tool".into(), json!(self.tool));
        m.insert("target".into(), json!(self.target));
        m.insert("subject".into(), json!(self.subject));
        m.insert("channel".into(), json!(self.channel.as_str()));
        m.insert("uid".into(), json!(self.uid));
        Value::Object(m)
    }
}

pub(super) fn is_hex(s: &str, len: usize) -> bool {
    s.len() == len && s.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
}

/// One line per grant, so the file reads (and diffs) by eye; each signed with `key`.
pub(super) fn render_file(grants: &[Grant], key: &GrantKey) -> Vec<u8> {
    let mut out = format!("{{\"version\":{FILE_VERSION},\"grants\":[");
    for (i, g) in grants.iter().enumerate() {
        out.push_str(if i == 0 { "\n" } else { ",\n" });
        let mut v = g.to_json();
        v["mac"] = json!(key.sign(g));
        out.push_str(&v.to_string());
    }
    out.push_str("\n]}\n");
    out.into_bytes()
}

/// The strict parse (module docs). An empty file (created under the lock by a writer
/// that has not written yet) holds no grants.
pub(super) fn parse_file(bytes: &[u8]) -> Result<Vec<Record>, FormError> {
    if bytes.iter().all(|b| b.is_ascii_whitespace()) {
        return Ok(Vec::new());
    }
    let text = std::str::from_utf8(bytes).map_err(|_| FormError::NotUtf8)?;
    let root = crate::json::parse(text).map_err(|e| FormError::Json { why: e.to_string() })?;
    let Value::Object(top) = &root else { return Err(FormError::NotObject) };
    if let Some(k) = top.keys().find(|k| *k != "version" && *k != "grants") {
        return Err(FormError::UnknownKey { key: cut_key(k) });
    }
    if top.get("version").and_then(Value::as_u64) != Some(FILE_VERSION) {
        return Err(FormError::Version);
    }
    let Some(Value::Array(items)) = top.get("grants") else { return Err(FormError::GrantsNotArray) };
    if items.len() > MAX_GRANTS {
        return Err(FormError::TooMany);
    }
    let mut grants: Vec<Record> = Vec::with_capacity(items.len());
    for (index, item) in items.iter().enumerate() {
        let r = parse_grant(item).map_err(|why| FormError::Grant { index, why })?;
        if grants.iter().any(|o| o.grant.id == r.grant.id) {
            return Err(FormError::SameId { index, id: r.grant.id });
        }
        grants.push(r);
    }
    Ok(grants)
}

/// A key as an error names it: its first 32 characters.
fn cut_key(k: &str) -> String {
    sys::short(k, 32, sys::Ellipsis::Marked)
}

const GRANT_KEYS: [&str; 14] =
    ["id", "scope", "policy", "created", "expires", "ttl_s", "requested_ttl_s", "action", "tool", "target", "subject", "channel", "uid", "mac"];

fn parse_grant(v: &Value) -> Result<Record, BadGrant> {
    let Value::Object(m) = v else { return Err(BadGrant::NotObject) };
    if let Some(k) = m.keys().find(|k| !GRANT_KEYS.contains(&k.as_str())) {
        return Err(BadGrant::UnknownKey { key: cut_key(k) });
    }
    let text = |key: &'static str, max: usize| -> Result<String, BadGrant> {
        match m.get(key) {
            Some(Value::String(s)) if s.len() <= max => Ok(s.clone()),
            Some(Value::String(_)) => Err(BadGrant::TooLong { key, max }),
            _ => Err(BadGrant::NotString { key }),
        }
    };
    let number = |key: &'static str| m.get(key).and_then(Value::as_u64).ok_or(BadGrant::NotNumber { key });
    let id = text("id", 16)?;
    if !is_hex(&id, 16) {
        return Err(BadGrant::Id);
    }
    let scope = Scope::parse(&text("scope", 16)?).ok_or(BadGrant::Scope)?;
    let policy = text("policy", 64)?;
    if !is_hex(&policy, 64) {
        return Err(BadGrant::Policy);
    }
    let (created, expires, ttl_s) = (number("created")?, number("expires")?, number("ttl_s")?);
    if !(1..=MAX_GRANT_S).contains(&ttl_s) {
        return Err(BadGrant::Ttl);
    }
    if created.saturating_add(ttl_s) != expires {
        return Err(BadGrant::Expires);
    }
    let requested_ttl_s = match m.get("requested_ttl_s") {
        None => None,
        Some(_) => Some(number("requested_ttl_s")?).filter(|r| *r > ttl_s).map(Some).ok_or(BadGrant::RequestedTtl)?,
    };
    let action = match (scope, m.get("action")) {
        (Scope::Exact, Some(_)) => Some(text("action", 64)?).filter(|a| is_hex(a, 64)).map(Some).ok_or(BadGrant::Action)?,
        (Scope::Exact, None) => return Err(BadGrant::ExactWithoutAction),
        (Scope::Session, Some(_)) => return Err(BadGrant::SessionWithAction),
        (Scope::Session, None) => None,
    };
    let channel = Channel::parse(&text("channel", 16)?).ok_or(BadGrant::Channel)?;
    let uid = u32::try_from(number("uid")?).map_err(|_| BadGrant::Uid)?;
    let mac = match m.get("mac") {
        None => None,
        Some(_) => Some(text("mac", 64)?),
    };
    let grant = Grant {
        id,
        scope,
        policy,
        created,
        expires,
        ttl_s,
        requested_ttl_s,
        action,
        tool: text("tool", MAX_SHOWN_NAME)?,
        target: text("target", MAX_SHOWN_TARGET)?,
        subject: text("subject", MAX_SHOWN_NAME)?,
        channel,
        uid,
    };
    Ok(Record { grant, mac })
}
