//! An upstream's `elicitation/create`, relayed to the agent's client (issue 33,
//! section 3; MCP 2025-11-25 "Elicitation").
//!
//! ```text
//!  upstream ── elicitation/create ──> client.rs: a tools/call of this upstream runs?
//!     no (a listing, a read, between calls) ──> -32601, logged          (never relayed)
//!     yes ──> [`Relay::handle`]:
//!       policy: upstreams.NAME.elicitation allows the mode? ── no ──> -32601
//!       the client declared the mode (handshake session)? ──── no ──> -32601
//!       params scrubbed (Vault), then checked (pure, [`check`]):
//!         form: the 2025-11-25 schema only (flat, primitive fields), bounded, and no
//!               field, title, description, option or message that looks like it asks
//!               for a secret (`words.rs`), no `format: password` ─── else -32602
//!         url:  https (http for loopback only), no user, an ASCII URL of a host and
//!               port `url_hosts` lists ──────────────────────────── else -32602
//!       ──> the client (sp's own id, `AskClient`), the message prefixed with the
//!           upstream's name ──> its answer checked ([`answer`]: bounded, the fields
//!           asked for with their types, no secret sp holds) ── else -32603
//!       ──> the upstream gets {action, content?}.   Every one: an `elicitation` row.
//! ```
//!
//! The wait for the user counts against the call's own timeout. Sampling and roots are
//! never relayed (`client.rs` answers them -32601).

use std::fmt;
use std::time::Instant;

use serde_json::{Map, Value};

use crate::gate::exec::{AskClient, Asked, Cancel, Event, Output};
use crate::gate::vault::Vault;
use crate::mcp::model::{ErrorCode, ErrorData};
use crate::policy::upstreams::ElicitRules;

mod words;
pub(crate) use words::secret_word;

/// The longest message (in characters) an upstream may have shown.
pub(crate) const MAX_MESSAGE_CHARS: usize = 2048;
/// Fields a form may ask for.
pub(crate) const MAX_FIELDS: usize = 16;
/// The longest field name, title, description or option, in characters.
pub(crate) const MAX_TEXT_CHARS: usize = 512;
/// Options of one enum field.
pub(crate) const MAX_OPTIONS: usize = 64;
/// The longest URL a URL-mode request may send the user to, and `elicitationId`.
pub(crate) const MAX_URL_BYTES: usize = 2048;
pub(crate) const MAX_ID_BYTES: usize = 256;
/// The client's answer, as JSON, and each string in it.
pub(crate) const MAX_ANSWER_BYTES: usize = 16 * 1024;
pub(crate) const MAX_ANSWER_STRING: usize = 4096;

/// Why an upstream's elicitation was not relayed, or its answer not passed back. The
/// upstream gets it as a JSON-RPC error; the journal as the `elicitation` row's reason.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Refusal {
    /// The policy relays no elicitation of this mode from this upstream.
    NotAllowed { mode: &'static str },
    /// The client declared no elicitation of this mode (or cannot be asked in this
    /// session, 2026-07-28).
    ClientCannot { mode: &'static str },
    /// A field, title, description, option or the message spells a secret word.
    Secret { at: String, word: &'static str },
    /// `format: password`.
    PasswordFormat { at: String },
    /// Not of the shape MCP defines (or over a bound).
    Shape { at: String, why: &'static str },
    /// URL mode: a URL sp does not send users to.
    Url { why: &'static str },
    /// URL mode: its host (and port) not in `url_hosts`.
    UrlHost { host: String },
    /// The client's answer is not of the shape asked for, or over its bound.
    Answer { why: String },
    /// The client's answer spells a secret sp holds: withheld from the upstream.
    AnswerSecret,
    /// The client answered with an error, did not answer in time, or the call was
    /// cancelled.
    NoAnswer { why: String },
}

impl fmt::Display for Refusal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Refusal::NotAllowed { mode } => write!(f, "the policy relays no {mode} elicitation from this upstream (upstreams.NAME.elicitation)"),
            Refusal::ClientCannot { mode } => write!(f, "the agent's client cannot be asked for {mode} elicitation in this session"),
            Refusal::Secret { at, word } => write!(f, "{at} looks like it asks for a secret ({word:?}): sp never asks its user for secrets for an upstream"),
            Refusal::PasswordFormat { at } => write!(f, "{at} is a password field: sp never asks its user for secrets for an upstream"),
            Refusal::Shape { at, why } => write!(f, "{at} {why}"),
            Refusal::Url { why } => write!(f, "the url {why}"),
            Refusal::UrlHost { host } => write!(f, "the url's host {host} is not in upstreams.NAME.elicitation.url_hosts"),
            Refusal::Answer { why } => write!(f, "the client's answer {why}"),
            Refusal::AnswerSecret => f.write_str("the client's answer spells a secret sp holds: withheld"),
            Refusal::NoAnswer { why } => write!(f, "the client gave no answer: {why}"),
        }
    }
}

impl std::error::Error for Refusal {}

impl Refusal {
    /// The JSON-RPC error the upstream gets.
    pub(crate) fn to_error(&self) -> ErrorData {
        let code = match self {
            Refusal::NotAllowed { .. } | Refusal::ClientCannot { .. } => ErrorCode::METHOD_NOT_FOUND,
            Refusal::Secret { .. } | Refusal::PasswordFormat { .. } | Refusal::Shape { .. } | Refusal::Url { .. } | Refusal::UrlHost { .. } => {
                ErrorCode::INVALID_PARAMS
            }
            Refusal::Answer { .. } | Refusal::AnswerSecret | Refusal::NoAnswer { .. } => ErrorCode::INTERNAL_ERROR,
        };
        ErrorData::new(code, format!("sp did not relay elicitation/create: {self}"))
    }
}

fn shape<T>(at: &str, why: &'static str) -> Result<T, Refusal> {
    Err(Refusal::Shape { at: at.to_owned(), why })
}

/// What a checked request asks, to check the answer against.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Asks {
    Form(Vec<Field>),
    Url,
}

/// One field of a form: its name and what its value may be.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Field {
    pub name: String,
    pub kind: Kind,
}

#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Kind {
    /// A string; one of `options` when they are given.
    Text {
        options: Option<Vec<String>>,
    },
    Number {
        integer: bool,
    },
    Boolean,
    /// An array of strings, each one of `options`.
    Many {
        options: Vec<String>,
    },
}

/// A request fit to send: the params the client gets and what they ask.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Checked {
    pub params: Value,
    pub asks: Asks,
    pub mode: &'static str,
}

/// The mode a request asks for (`mode` absent is form).
pub(crate) fn mode_of(params: &Value) -> Result<&'static str, Refusal> {
    match params.get("mode") {
        None => Ok("form"),
        Some(Value::String(m)) if m == "form" => Ok("form"),
        Some(Value::String(m)) if m == "url" => Ok("url"),
        Some(_) => shape("mode", "must be \"form\" or \"url\""),
    }
}

/// Checks a request (already scrubbed) against the policy's rules: the params to send,
/// with the message prefixed by the upstream's name, or why not.
pub(crate) fn check(upstream: &str, rules: &ElicitRules, params: &Value) -> Result<Checked, Refusal> {
    let Value::Object(m) = params else { return shape("params", "must be an object") };
    let mode = mode_of(params)?;
    let allowed: &[&str] = match mode {
        "form" => &["mode", "message", "requestedSchema", "_meta"],
        _ => &["mode", "message", "elicitationId", "url", "_meta"],
    };
    if let Some(k) = m.keys().find(|k| !allowed.contains(&k.as_str())) {
        return Err(Refusal::Shape { at: crate::gate::outside::cut(k, 32).into_inner(), why: "is not a member MCP defines here" });
    }
    let permitted = if mode == "form" { rules.form } else { !rules.url_hosts.is_empty() };
    if !permitted {
        return Err(Refusal::NotAllowed { mode });
    }
    let message = match m.get("message") {
        Some(Value::String(s)) => s,
        Some(_) => return shape("message", "must be a string"),
        None => return shape("message", "is required"),
    };
    if message.chars().count() > MAX_MESSAGE_CHARS {
        return shape("message", "is over 2048 characters");
    }
    let mut out = Map::new();
    out.insert("mode".into(), Value::from(mode));
    let asks = if mode == "form" {
        if let Some(word) = secret_word(message) {
            return Err(Refusal::Secret { at: "the message".into(), word });
        }
        let schema = m.get("requestedSchema").ok_or_else(|| Refusal::Shape { at: "requestedSchema".into(), why: "is required" })?;
        let fields = form(schema)?;
        out.insert("requestedSchema".into(), schema.clone());
        Asks::Form(fields)
    } else {
        let id = match m.get("elicitationId") {
            Some(Value::String(s)) if (1..=MAX_ID_BYTES).contains(&s.len()) && s.bytes().all(|b| b.is_ascii_graphic()) => s,
            _ => return shape("elicitationId", "must be 1 to 256 printable ASCII characters"),
        };
        let url = match m.get("url") {
            Some(Value::String(s)) => url(rules, s)?,
            _ => return shape("url", "must be a string"),
        };
        out.insert("elicitationId".into(), Value::from(id.as_str()));
        out.insert("url".into(), Value::from(url));
        Asks::Url
    };
    out.insert("message".into(), Value::String(format!("[sp: the upstream MCP server \"{upstream}\" asks] {message}")));
    Ok(Checked { params: Value::Object(out), asks, mode })
}

/// A URL-mode URL: ASCII, no space, control or backslash; `https`, or `http` to a
/// loopback address; no user or password; a host and port the policy lists. The URL
/// passed on is as `url` serialises it (an IDN in its `xn--` form, what is opened).
fn url(rules: &ElicitRules, raw: &str) -> Result<String, Refusal> {
    if raw.len() > MAX_URL_BYTES {
        return Err(Refusal::Url { why: "is over 2048 bytes" });
    }
    if !raw.bytes().all(|b| b.is_ascii_graphic()) || raw.contains('\\') {
        return Err(Refusal::Url { why: "must be printable ASCII without spaces or backslashes (an IDN in its xn-- form)" });
    }
    let u = url::Url::parse(raw).map_err(|_| Refusal::Url { why: "is not a URL" })?;
    if !u.username().is_empty() || u.password().is_some() {
        return Err(Refusal::Url { why: "must hold no user or password" });
    }
    let loopback = match u.host() {
        Some(url::Host::Ipv4(a)) => a.is_loopback(),
        Some(url::Host::Ipv6(a)) => a.is_loopback(),
        Some(url::Host::Domain(d)) => d == "localhost",
        None => return Err(Refusal::Url { why: "must have a host" }),
    };
    match u.scheme() {
        "https" => {}
        "http" if loopback => {}
        _ => return Err(Refusal::Url { why: "must be https (http only to a loopback address)" }),
    }
    let host = u.host_str().unwrap_or_default();
    if !rules.lists(host, u.port()) {
        let shown = match u.port() {
            Some(p) => format!("{host}:{p}"),
            None => host.to_owned(),
        };
        return Err(Refusal::UrlHost { host: crate::gate::outside::cut(&shown, 128).into_inner() });
    }
    Ok(u.as_str().to_owned())
}

/// Checks one bounded text of the form: a string, at most [`MAX_TEXT_CHARS`], no secret word.
fn text(v: &Value, at: &str) -> Result<(), Refusal> {
    let Value::String(s) = v else { return shape(at, "must be a string") };
    if s.chars().count() > MAX_TEXT_CHARS {
        return shape(at, "is over 512 characters");
    }
    match secret_word(s) {
        Some(word) => Err(Refusal::Secret { at: at.to_owned(), word }),
        None => Ok(()),
    }
}

fn members<'a>(v: &'a Value, at: &str, allowed: &[&str]) -> Result<&'a Map<String, Value>, Refusal> {
    let Value::Object(m) = v else { return shape(at, "must be an object") };
    match m.keys().find(|k| !allowed.contains(&k.as_str())) {
        Some(k) => Err(Refusal::Shape { at: format!("{at}.{}", crate::gate::outside::cut(k, 32).as_str()), why: "is not a member MCP defines here" }),
        None => Ok(m),
    }
}

fn count(m: &Map<String, Value>, k: &str, at: &str) -> Result<(), Refusal> {
    match m.get(k) {
        None => Ok(()),
        Some(v) if v.as_u64().is_some() => Ok(()),
        Some(_) => shape(&format!("{at}.{k}"), "must be a non-negative integer"),
    }
}

/// Options: an `enum` of strings (with `enumNames`), or `oneOf`/`anyOf` of
/// `{const, title}`; each checked as a text.
fn options(m: &Map<String, Value>, at: &str) -> Result<Option<Vec<String>>, Refusal> {
    let list = |k: &str| -> Result<Option<&Vec<Value>>, Refusal> {
        match m.get(k) {
            None => Ok(None),
            Some(Value::Array(a)) if !a.is_empty() && a.len() <= MAX_OPTIONS => Ok(Some(a)),
            Some(_) => shape(&format!("{at}.{k}"), "must be an array of 1 to 64 options"),
        }
    };
    let mut found = None;
    if let Some(values) = list("enum")? {
        let mut out = Vec::new();
        for (i, v) in values.iter().enumerate() {
            text(v, &format!("{at}.enum[{i}]"))?;
            out.push(v.as_str().unwrap_or_default().to_owned());
        }
        if let Some(names) = list("enumNames")? {
            if names.len() != values.len() {
                return shape(&format!("{at}.enumNames"), "must name each enum value");
            }
            for (i, v) in names.iter().enumerate() {
                text(v, &format!("{at}.enumNames[{i}]"))?;
            }
        }
        found = Some(out);
    } else if m.contains_key("enumNames") {
        return shape(&format!("{at}.enumNames"), "needs enum");
    }
    for k in ["oneOf", "anyOf"] {
        let Some(items) = list(k)? else { continue };
        if found.is_some() {
            return shape(&format!("{at}.{k}"), "must not come with other options");
        }
        let mut out = Vec::new();
        for (i, item) in items.iter().enumerate() {
            let iat = format!("{at}.{k}[{i}]");
            let im = members(item, &iat, &["const", "title"])?;
            let c = im.get("const").ok_or_else(|| Refusal::Shape { at: format!("{iat}.const"), why: "is required" })?;
            text(c, &format!("{iat}.const"))?;
            if let Some(t) = im.get("title") {
                text(t, &format!("{iat}.title"))?;
            }
            out.push(c.as_str().unwrap_or_default().to_owned());
        }
        found = Some(out);
    }
    Ok(found)
}

/// `requestedSchema`: `{type: "object", properties, required?, $schema?}`, each
/// property a primitive of the 2025-11-25 schema (string, number, integer, boolean, a
/// single- or multi-select enum), nothing nested.
pub(crate) fn form(schema: &Value) -> Result<Vec<Field>, Refusal> {
    let at = "requestedSchema";
    let m = members(schema, at, &["type", "properties", "required", "$schema"])?;
    if m.get("type").and_then(Value::as_str) != Some("object") {
        return shape(&format!("{at}.type"), "must be \"object\"");
    }
    let props = match m.get("properties") {
        Some(Value::Object(p)) if !p.is_empty() && p.len() <= MAX_FIELDS => p,
        _ => return shape(&format!("{at}.properties"), "must be an object of 1 to 16 fields"),
    };
    if !matches!(m.get("$schema"), None | Some(Value::String(_))) {
        return shape(&format!("{at}.$schema"), "must be a string");
    }
    if let Some(r) = m.get("required")
        && !r.as_array().is_some_and(|r| r.iter().all(|n| n.as_str().is_some_and(|n| props.contains_key(n))))
    {
        return shape(&format!("{at}.required"), "must be an array of the names of properties");
    }
    let mut fields = Vec::new();
    for (name, def) in props {
        let shown = crate::gate::outside::cut(name, 64).into_inner();
        let fat = format!("field {shown:?}");
        if name.is_empty() || name.chars().count() > 64 {
            return shape(&fat, "must have a name of 1 to 64 characters");
        }
        if let Some(word) = secret_word(name) {
            return Err(Refusal::Secret { at: fat, word });
        }
        // Looked at before the shape, so a password field is named as one.
        if def.get("format").and_then(Value::as_str).is_some_and(|f| secret_word(f).is_some()) {
            return Err(Refusal::PasswordFormat { at: fat });
        }
        let kind = match def.get("type").and_then(Value::as_str) {
            Some("string") => {
                let fm = members(def, &fat, &["type", "title", "description", "minLength", "maxLength", "format", "default", "enum", "enumNames", "oneOf"])?;
                if let Some(f) = fm.get("format")
                    && !matches!(f.as_str(), Some("email" | "uri" | "date" | "date-time"))
                {
                    return shape(&format!("{fat}.format"), "must be email, uri, date or date-time");
                }
                count(fm, "minLength", &fat)?;
                count(fm, "maxLength", &fat)?;
                if let Some(d) = fm.get("default") {
                    text(d, &format!("{fat}.default"))?;
                }
                Kind::Text { options: options(fm, &fat)? }
            }
            Some(t @ ("number" | "integer")) => {
                let fm = members(def, &fat, &["type", "title", "description", "minimum", "maximum", "default"])?;
                for k in ["minimum", "maximum", "default"] {
                    if !matches!(fm.get(k), None | Some(Value::Number(_))) {
                        return shape(&format!("{fat}.{k}"), "must be a number");
                    }
                }
                Kind::Number { integer: t == "integer" }
            }
            Some("boolean") => {
                let fm = members(def, &fat, &["type", "title", "description", "default"])?;
                if !matches!(fm.get("default"), None | Some(Value::Bool(_))) {
                    return shape(&format!("{fat}.default"), "must be a boolean");
                }
                Kind::Boolean
            }
            Some("array") => {
                let fm = members(def, &fat, &["type", "title", "description", "minItems", "maxItems", "items", "default"])?;
                count(fm, "minItems", &fat)?;
                count(fm, "maxItems", &fat)?;
                let iat = format!("{fat}.items");
                let items = fm.get("items").ok_or_else(|| Refusal::Shape { at: iat.clone(), why: "is required" })?;
                let im = members(items, &iat, &["type", "enum", "anyOf"])?;
                if !matches!(im.get("type").and_then(Value::as_str), None | Some("string")) {
                    return shape(&format!("{iat}.type"), "must be \"string\"");
                }
                let Some(options) = options(im, &iat)? else { return shape(&iat, "must list its options (enum or anyOf)") };
                if let Some(d) = fm.get("default") {
                    let ok = d.as_array().is_some_and(|a| a.iter().all(|v| v.as_str().is_some_and(|s| options.iter().any(|o| o == s))));
                    if !ok {
                        return shape(&format!("{fat}.default"), "must be an array of its options");
                    }
                }
                Kind::Many { options }
            }
            _ => return shape(&format!("{fat}.type"), "must be string, number, integer, boolean or array"),
        };
        let fm = def.as_object().ok_or_else(|| Refusal::Shape { at: fat.clone(), why: "must be an object" })?;
        for k in ["title", "description"] {
            if let Some(v) = fm.get(k) {
                text(v, &format!("{fat}.{k}"))?;
            }
        }
        fields.push(Field { name: name.clone(), kind });
    }
    Ok(fields)
}

/// The client's answer, checked against what was asked: `{action}` (and, for an
/// accepted form, `content` with only the fields asked for, each of its type and
/// bounded). Returned as the upstream gets it (`_meta` and anything else dropped).
pub(crate) fn answer(asks: &Asks, result: &Value, vault: &Vault) -> Result<Value, Refusal> {
    let bad = |why: &str| Err(Refusal::Answer { why: why.to_owned() });
    let bytes = serde_json::to_vec(result).map_or(usize::MAX, |v| v.len());
    if bytes > MAX_ANSWER_BYTES {
        return bad("is over 16384 bytes");
    }
    let Value::Object(m) = result else { return bad("is not an object") };
    if m.keys().any(|k| !matches!(k.as_str(), "action" | "content" | "_meta")) {
        return bad("holds a member MCP does not define");
    }
    let action = match m.get("action").and_then(Value::as_str) {
        Some(a @ ("accept" | "decline" | "cancel")) => a,
        _ => return bad("has no action accept, decline or cancel"),
    };
    let mut out = Map::new();
    out.insert("action".into(), Value::from(action));
    match (asks, action, m.get("content")) {
        (_, _, None) => {}
        (Asks::Form(fields), "accept", Some(Value::Object(content))) => {
            let mut kept = Map::new();
            for (k, v) in content {
                let Some(field) = fields.iter().find(|f| &f.name == k) else { return bad("holds a field that was not asked for") };
                let fits = match (&field.kind, v) {
                    (Kind::Text { options: None }, Value::String(s)) => s.len() <= MAX_ANSWER_STRING,
                    (Kind::Text { options: Some(o) }, Value::String(s)) => o.contains(s),
                    (Kind::Number { integer: true }, Value::Number(n)) => n.is_i64() || n.is_u64(),
                    (Kind::Number { integer: false }, Value::Number(_)) | (Kind::Boolean, Value::Bool(_)) => true,
                    (Kind::Many { options }, Value::Array(a)) => a.iter().all(|v| v.as_str().is_some_and(|s| options.iter().any(|o| o == s))),
                    _ => false,
                };
                if !fits {
                    return Err(Refusal::Answer {
                        why: format!("gives field {:?} a value of the wrong type or out of its options", crate::gate::outside::cut(k, 64).as_str()),
                    });
                }
                kept.insert(k.clone(), v.clone());
            }
            let content = Value::Object(kept);
            // What the user typed goes to the upstream only if it spells no secret sp holds.
            if vault.found_in(content.to_string().as_bytes()) {
                return Err(Refusal::AnswerSecret);
            }
            out.insert("content".into(), content);
        }
        _ => return bad("has content where none may be (only an accepted form's)"),
    }
    Ok(Value::Object(out))
}

/// One relayed elicitation, with what it needs from the call: the upstream's name and
/// rules, the Vault, the agent's client, the journal sink.
pub(crate) struct Relay<'a, 'c> {
    pub upstream: &'a str,
    pub rules: &'a ElicitRules,
    pub vault: &'a Vault,
    pub client: Option<&'a mut (dyn AskClient + 'c)>,
    pub output: &'a mut (dyn Output + 'c),
    pub cancel: &'a Cancel,
}

impl Relay<'_, '_> {
    /// Handles one `elicitation/create` of the running call: the result for the
    /// upstream, or the error it gets; journaled either way.
    pub(crate) fn handle(&mut self, params: Option<Value>, deadline: Instant) -> Result<Value, ErrorData> {
        let outcome = self.run(params, deadline);
        let (decision, reason) = match &outcome {
            Ok((answer, mode)) => (
                match answer.get("action").and_then(Value::as_str) {
                    Some("accept") => "accept",
                    Some("decline") => "decline",
                    _ => "cancel",
                },
                format!("{mode} elicitation from upstream {} relayed", self.upstream),
            ),
            Err(e @ Refusal::NoAnswer { .. }) => ("failed", e.to_string()),
            Err(e) => ("refused", e.to_string()),
        };
        match &outcome {
            Err(e) => log::warn!("upstream {}: elicitation/create refused: {e}", self.upstream),
            Ok(_) => log::info!("upstream {}: elicitation/create relayed, answered {decision}", self.upstream),
        }
        let _ = self.output.emit(Event::Elicitation { decision, reason });
        outcome.map(|(a, _)| a).map_err(|e| e.to_error())
    }

    fn run(&mut self, params: Option<Value>, deadline: Instant) -> Result<(Value, &'static str), Refusal> {
        let mut params = params.unwrap_or(Value::Null);
        let mode = mode_of(&params)?;
        let permitted = if mode == "form" { self.rules.form } else { !self.rules.url_hosts.is_empty() };
        if !permitted {
            return Err(Refusal::NotAllowed { mode });
        }
        let modes = self.client.as_ref().map(|c| c.modes()).unwrap_or_default();
        if !(if mode == "form" { modes.form } else { modes.url }) {
            return Err(Refusal::ClientCannot { mode });
        }
        // Scrubbed before the checks, so what is checked is what is sent.
        self.vault.scrub(&mut params);
        let checked = check(self.upstream, self.rules, &params)?;
        let Some(client) = self.client.as_mut() else { return Err(Refusal::ClientCannot { mode }) };
        match client.elicit(checked.params, deadline, self.cancel) {
            Asked::Result(r) => answer(&checked.asks, &r, self.vault).map(|a| (a, checked.mode)),
            Asked::Error(code) => Err(Refusal::NoAnswer { why: format!("it answered with error {code}") }),
            Asked::TimedOut => Err(Refusal::NoAnswer { why: "none before the call's timeout".into() }),
            Asked::Cancelled => Err(Refusal::NoAnswer { why: "the call was cancelled".into() }),
        }
    }
}

#[cfg(test)]
mod tests;
