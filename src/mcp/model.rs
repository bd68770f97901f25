//! The wire's typed answers: a tool's result (`ToolResult`) and how it is written as an
//! MCP `CallToolResult`, refusals, and the 2026-07-28 stamp. The codes a result carries
//! are `gate::outcome::ToolCode`.

use std::fmt;

use serde_json::{json, Map, Value};

use crate::gate::outcome::ToolCode;
use crate::gate::vault::Scrubbed;
use crate::mcp::session::Era;

/// Why a tool's arguments were refused (`SP_BAD_ARGUMENTS`): a sentence the model can
/// act on. Shared by every tool's argument parser (`http/args.rs`, `ssh/args.rs`).
#[derive(Debug, PartialEq, Eq)]
pub struct ArgError(pub String);

impl fmt::Display for ArgError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for ArgError {}

/// `Err(ArgError(msg))`, for the argument parsers.
pub(crate) fn bad<T>(msg: impl Into<String>) -> Result<T, ArgError> {
    Err(ArgError(msg.into()))
}

/// An agent-chosen name echoed in a message, cut short (64 characters, the cut marked):
/// a message never carries a large payload the agent chose.
pub(crate) fn short(s: &str) -> String {
    crate::sys::short(s, 64, crate::sys::Ellipsis::Marked)
}

/// A `tools/call` result, typed (issue #9): each tool's slice builds one, the server
/// turns it into the wire's form once ([`ToolResult::into_call`]) and the journal reads
/// its code and message from here, never back out of the rendered JSON.
///
/// Its outside pieces (the error message, the fields' values) are [`Scrubbed`]: redacted
/// before they were put here, so the envelope around them (`content`, `type`, `text`,
/// `structuredContent`, `isError`, `error`, `code`, the code itself and the field names)
/// is written as sp spells it, never through the redactor (`secret.rs`).
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct ToolResult {
    /// The error's code and message; `None` for success.
    error: Option<(ToolCode, Scrubbed<String>)>,
    /// `structuredContent`: the tool's fields. An error's partial output (the output of
    /// a timed-out command) sits next to its `error` member.
    fields: Scrubbed<Map<String, Value>>,
}

impl ToolResult {
    /// Success with these fields ([`crate::gate::vault::Vault::scrub_fields`]).
    pub(crate) fn ok(fields: Scrubbed<Map<String, Value>>) -> ToolResult {
        ToolResult { error: None, fields }
    }

    /// An error result.
    pub(crate) fn error(code: ToolCode, message: Scrubbed<String>) -> ToolResult {
        ToolResult { error: Some((code, message)), fields: Scrubbed::default() }
    }

    /// The same error, carrying partial output fields.
    pub(crate) fn with_fields(mut self, fields: Scrubbed<Map<String, Value>>) -> ToolResult {
        self.fields.extend(fields);
        self
    }

    /// The error's code, `None` for success: the execution counters' and the journal's
    /// outcome.
    pub(crate) fn code(&self) -> Option<ToolCode> {
        self.error.as_ref().map(|(code, _)| *code)
    }

    pub(crate) fn message(&self) -> Option<&str> {
        self.error.as_ref().map(|(_, m)| m.as_str())
    }

    /// The pieces that came from outside: the message and the fields (whose top-level
    /// keys are the tool's own names), for the withholding check (`secret::withholds`).
    pub(crate) fn outside(&self) -> (Option<&str>, &Map<String, Value>) {
        (self.message(), self.fields.get())
    }

    /// The MCP `CallToolResult`. Its text block is the JSON of `structuredContent`
    /// (after an error's `code: message` line when there are fields), rendered when the
    /// answer is written ([`CallResult`]), not held twice.
    pub(crate) fn into_call(self) -> CallResult {
        let ToolResult { error, fields } = self;
        let mut fields = fields.into_inner();
        let Some((code, message)) = error else {
            return CallResult { text: Text::Structured(String::new()), structured: fields, is_error: false };
        };
        let message = message.into_inner();
        let text = if fields.is_empty() { Text::Plain(format!("{code}: {message}")) } else { Text::Structured(format!("{code}: {message}\n")) };
        fields.insert("error".into(), error_member(code, message));
        CallResult { text, structured: fields, is_error: true }
    }
}

fn error_member(code: ToolCode, message: String) -> Value {
    object([("code", code.as_str().into()), ("message", Value::String(message))])
}

/// A `CallToolResult` as it is written: typed, so nothing in it is a marker to be found
/// and replaced on the way out. The text block repeats the structured result for
/// clients that read only `content`; it is rendered while the answer is serialised
/// (issue #12: building it as a string cost one more copy of the answer, two to seven
/// times the body, escaped), from [`Text`].
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct CallResult {
    text: Text,
    structured: Map<String, Value>,
    is_error: bool,
}

/// What a result's one text block says.
#[derive(Debug, Clone, PartialEq)]
enum Text {
    /// This text.
    Plain(String),
    /// This prefix, then the compact JSON of `structuredContent`.
    Structured(String),
}

impl CallResult {
    /// The text block's text, built (tests, and small answers that need it as a string).
    #[cfg(test)]
    pub(crate) fn text(&self) -> String {
        match &self.text {
            Text::Plain(t) => t.clone(),
            Text::Structured(prefix) => Rendered(prefix, &self.structured).to_string(),
        }
    }

    #[cfg(test)]
    pub(crate) fn structured(&self) -> &Map<String, Value> {
        &self.structured
    }

    #[cfg(test)]
    pub(crate) fn is_error(&self) -> bool {
        self.is_error
    }

    /// The same as a `Value`, text built (tests compare the two byte for byte).
    #[cfg(test)]
    pub(crate) fn to_value(&self) -> Value {
        let text = object([("text", Value::String(self.text())), ("type", "text".into())]);
        object([
            ("content", Value::Array(vec![text])),
            ("isError", self.is_error.into()),
            ("structuredContent", Value::Object(self.structured.clone())),
        ])
    }
}

/// A `tools/call` answer: the JSON-RPC response carrying a [`CallResult`], stamped for
/// 2026-07-28 ([`stamp_stateless`]'s members) when `stateless`. Serialises exactly as the
/// same message built as a `Value` would (serde_json's sorted keys; a test holds it).
pub(crate) struct CallAnswer<'a> {
    pub id: &'a Value,
    pub result: &'a CallResult,
    pub stateless: bool,
}

impl serde::Serialize for CallAnswer<'_> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        let mut m = s.serialize_map(Some(3))?;
        m.serialize_entry("id", self.id)?;
        m.serialize_entry("jsonrpc", "2.0")?;
        m.serialize_entry("result", &ResultWire(self))?;
        m.end()
    }
}

struct ResultWire<'a>(&'a CallAnswer<'a>);

impl serde::Serialize for ResultWire<'_> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        let (r, stateless) = (self.0.result, self.0.stateless);
        let mut m = s.serialize_map(Some(if stateless { 5 } else { 3 }))?;
        // Keys in the order a `Value`'s map writes them (sorted).
        if stateless {
            m.serialize_entry("_meta", &Meta)?;
        }
        m.serialize_entry("content", &[Block(r)])?;
        m.serialize_entry("isError", &r.is_error)?;
        if stateless {
            m.serialize_entry("resultType", "complete")?;
        }
        m.serialize_entry("structuredContent", &r.structured)?;
        m.end()
    }
}

/// `_meta` of a 2026-07-28 answer: the server info.
struct Meta;

impl serde::Serialize for Meta {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        let mut m = s.serialize_map(Some(1))?;
        m.serialize_entry(crate::mcp::session::META_SERVER_INFO, &crate::mcp::session::server_info())?;
        m.end()
    }
}

struct Block<'a>(&'a CallResult);

impl serde::Serialize for Block<'_> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        let mut m = s.serialize_map(Some(2))?;
        match &self.0.text {
            Text::Plain(t) => m.serialize_entry("text", t)?,
            Text::Structured(prefix) => m.serialize_entry("text", &Rendered(prefix, &self.0.structured))?,
        }
        m.serialize_entry("type", "text")?;
        m.end()
    }
}

/// `prefix` + the compact JSON of an object, written as one JSON string without being
/// built first: serde_json escapes `collect_str` output piece by piece, and a `Value`'s
/// `Display` writes its JSON piece by piece.
struct Rendered<'a>(&'a str, &'a Map<String, Value>);

impl fmt::Display for Rendered<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.0)?;
        let mut w = FmtWriter(f);
        serde_json::to_writer(&mut w, self.1).map_err(|_| fmt::Error)
    }
}

/// `io::Write` over a `Formatter` (serde_json writes UTF-8 in whole pieces).
struct FmtWriter<'a, 'b>(&'a mut fmt::Formatter<'b>);

impl std::io::Write for FmtWriter<'_, '_> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let s = std::str::from_utf8(buf).map_err(std::io::Error::other)?;
        self.0.write_str(s).map_err(std::io::Error::other)?;
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl serde::Serialize for Rendered<'_> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

/// A JSON object of these members, the values moved in. (`json!` serialises each
/// interpolated value again, a deep copy: a response body would be held twice.)
pub(crate) fn object<const N: usize>(members: [(&str, Value); N]) -> Value {
    Value::Object(members.into_iter().map(|(k, v)| (k.to_owned(), v)).collect())
}

/// A JSON-RPC success response carrying `result` (moved, not copied).
pub(crate) fn result_response(id: Value, result: Value) -> Value {
    object([("jsonrpc", "2.0".into()), ("id", id), ("result", result)])
}

/// [`result_response`] as sent in `era`: stamped ([`stamp_stateless`]) for 2026-07-28.
pub(crate) fn era_response(id: Value, result: Value, era: Era) -> Value {
    let mut response = result_response(id, result);
    if era == Era::Stateless {
        stamp_stateless(&mut response);
    }
    response
}

/// A refused `tools/call` (bad arguments, a policy denial, a refused approval), written
/// without building its JSON as a `Value` first (issue #12: five maps and their keys
/// were built for each denial, then serialised, a fifth of its cost). Serialises exactly
/// as [`Refusal::into_value`] (a test holds the two equal); sent by
/// `ProtocolWriter::send_typed`. A 2026-07-28 answer, which [`stamp_stateless`] stamps,
/// takes the `Value` form.
pub(crate) struct Refusal {
    pub id: Value,
    pub code: ToolCode,
    /// `"{code}: {message}"`, the text block, built once; the message is its tail.
    text: String,
}

impl Refusal {
    pub(crate) fn new(id: Value, code: ToolCode, message: impl fmt::Display) -> Refusal {
        use fmt::Write as _;
        let mut text = String::with_capacity(code.as_str().len() + 96);
        // Writing into a String cannot fail.
        let _ = write!(text, "{code}: {message}");
        Refusal { id, code, text }
    }

    /// The message without the code.
    pub(crate) fn message(&self) -> &str {
        &self.text[self.code.as_str().len() + 2..]
    }

    /// The same answer as a `Value` (for 2026-07-28, which [`stamp_stateless`] stamps):
    /// a refusal's message is sp's words about the agent's own request, not outside text.
    pub(crate) fn into_value(self) -> Value {
        let message = self.message().to_owned();
        let text = object([("text", Value::String(self.text)), ("type", "text".into())]);
        let structured = object([("error", error_member(self.code, message))]);
        let result = object([("content", Value::Array(vec![text])), ("isError", true.into()), ("structuredContent", structured)]);
        result_response(self.id, result)
    }
}

impl serde::Serialize for Refusal {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        // Keys in the order a `Value`'s map writes them (sorted).
        struct Text<'a>(&'a Refusal);
        impl serde::Serialize for Text<'_> {
            fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                let mut m = s.serialize_map(Some(2))?;
                m.serialize_entry("text", &self.0.text)?;
                m.serialize_entry("type", "text")?;
                m.end()
            }
        }
        struct Error<'a>(&'a Refusal);
        impl serde::Serialize for Error<'_> {
            fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                let mut m = s.serialize_map(Some(2))?;
                m.serialize_entry("code", self.0.code.as_str())?;
                m.serialize_entry("message", self.0.message())?;
                m.end()
            }
        }
        struct Structured<'a>(&'a Refusal);
        impl serde::Serialize for Structured<'_> {
            fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                let mut m = s.serialize_map(Some(1))?;
                m.serialize_entry("error", &Error(self.0))?;
                m.end()
            }
        }
        struct Result_<'a>(&'a Refusal);
        impl serde::Serialize for Result_<'_> {
            fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                let r = self.0;
                let mut m = s.serialize_map(Some(3))?;
                m.serialize_entry("content", &[Text(r)])?;
                m.serialize_entry("isError", &true)?;
                m.serialize_entry("structuredContent", &Structured(r))?;
                m.end()
            }
        }
        let mut m = s.serialize_map(Some(3))?;
        m.serialize_entry("id", &self.id)?;
        m.serialize_entry("jsonrpc", "2.0")?;
        m.serialize_entry("result", &Result_(self))?;
        m.end()
    }
}

/// The `tools/list` result, answered by the loop and by the control thread during a
/// call. Its definitions come from above the wire (the tool table hands them in, and
/// the wire never names a tool); the result is serialised once per era and kept, since
/// the definitions are fixed and building and escaping their 10 KB again for every
/// request was most of a `tools/list` (46 µs against a 7 µs ping, bench/README.md).
pub(crate) struct ToolList {
    definitions: fn() -> Value,
    handshake: std::sync::OnceLock<Option<Box<serde_json::value::RawValue>>>,
    stateless: std::sync::OnceLock<Option<Box<serde_json::value::RawValue>>>,
}

impl ToolList {
    pub(crate) const fn new(definitions: fn() -> Value) -> ToolList {
        ToolList { definitions, handshake: std::sync::OnceLock::new(), stateless: std::sync::OnceLock::new() }
    }

    /// The result in `era`: the definitions, with the 2026-07-28 caching hints.
    pub(crate) fn result(&self, era: Era) -> Value {
        let mut list = json!({"tools": (self.definitions)()});
        if era == Era::Stateless {
            // 2026-07-28 "Caching": tools/list carries its caching hints.
            list["ttlMs"] = json!(crate::mcp::session::CACHE_TTL_MS);
            list["cacheScope"] = json!("public");
        }
        list
    }

    /// The answer to request `id` in `era`.
    pub(crate) fn answer(&self, id: Value, era: Era) -> ListAnswer<'_> {
        ListAnswer { id, era, list: self }
    }

    /// The result as JSON text, made at the first request of each era.
    fn raw(&self, era: Era) -> Option<&serde_json::value::RawValue> {
        let cell = if era == Era::Stateless { &self.stateless } else { &self.handshake };
        cell.get_or_init(|| serde_json::value::to_raw_value(&self.built(era)).ok()).as_deref()
    }

    /// The result built as a `Value`: the list, stamped for 2026-07-28.
    fn built(&self, era: Era) -> Value {
        era_response(Value::Null, self.result(era), era)["result"].take()
    }
}

/// A `tools/list` answer, written with its list's result serialised once. Serialises
/// exactly as the answer built from [`ToolList::result`], stamped for 2026-07-28
/// ([`stamp_stateless`]); a test holds the two equal.
pub(crate) struct ListAnswer<'a> {
    id: Value,
    era: Era,
    list: &'a ToolList,
}

impl serde::Serialize for ListAnswer<'_> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        let mut m = s.serialize_map(Some(3))?;
        // Keys in the order a `Value`'s map writes them (sorted).
        m.serialize_entry("id", &self.id)?;
        m.serialize_entry("jsonrpc", "2.0")?;
        match self.list.raw(self.era) {
            Some(raw) => m.serialize_entry("result", raw)?,
            // Cannot happen (a `Value` always serialises); then built as before.
            None => m.serialize_entry("result", &self.list.built(self.era))?,
        }
        m.end()
    }
}

/// 2026-07-28: every result says `resultType: "complete"` (sp never asks for input) and
/// carries the server info in `_meta` (a SHOULD of that revision).
pub(crate) fn stamp_stateless(response: &mut Value) {
    if let Some(result) = response.get_mut("result").and_then(Value::as_object_mut) {
        result.insert("resultType".into(), json!("complete"));
        let meta = result.entry("_meta").or_insert_with(|| json!({}));
        if let Some(meta) = meta.as_object_mut() {
            meta.insert(crate::mcp::session::META_SERVER_INFO.into(), crate::mcp::session::server_info());
        }
    }
}


#[cfg(test)]
mod tests {
    use super::*;

    /// Outside text as a tool result takes it (an empty Vault changes nothing).
    fn clean(text: &str) -> Scrubbed<String> {
        crate::gate::vault::Vault::new().scrub_text(text)
    }

    fn fields(v: Value) -> Scrubbed<Map<String, Value>> {
        crate::gate::vault::Vault::new().scrub_fields(v)
    }

    /// A typed answer, written, and the same message built as a `Value` (the text block
    /// materialised, stamped for 2026-07-28 when `stateless`), written.
    fn both(id: &Value, r: &CallResult, stateless: bool) -> (String, String) {
        let typed = serde_json::to_string(&CallAnswer { id, result: r, stateless }).unwrap();
        let mut built = result_response(id.clone(), r.to_value());
        if stateless {
            stamp_stateless(&mut built);
        }
        (typed, serde_json::to_string(&built).unwrap())
    }

    /// Definitions the size and oddness of real ones: escapes, non-ASCII, nesting.
    fn odd_definitions() -> Value {
        json!([{"name": "a_tool", "description": "q\"uo\\te\u{1}\u{202e}\u{1F600}", "inputSchema": {"type": "object", "properties": {"x": {"enum": [1, 2.5, null]}}}}, {"name": "b"}])
    }

    #[test]
    fn the_cached_tools_list_answer_is_byte_for_byte_the_built_one_in_both_eras() {
        use crate::mcp::out::ProtocolWriter;
        static LIST: ToolList = ToolList::new(odd_definitions);
        let ids = [json!(0), json!(-7), json!(i64::MAX), json!("list"), json!("q\"uo\\te\u{1}\u{202e}\u{1F600}"), json!("")];
        for era in [Era::Handshake, Era::Stateless] {
            for id in &ids {
                // Twice: the first answer makes the cache, the second reads it.
                for _ in 0..2 {
                    let built = era_response(id.clone(), LIST.result(era), era);
                    let mut a = ProtocolWriter::new(Vec::new());
                    a.send(&built).unwrap();
                    let mut b = ProtocolWriter::new(Vec::new());
                    b.send_typed(&LIST.answer(id.clone(), era)).unwrap();
                    assert_eq!(String::from_utf8(b.into_inner()).unwrap(), String::from_utf8(a.into_inner()).unwrap(), "{era:?} {id}");
                }
            }
        }
        // The two eras differ (the stateless one carries its caching hints and stamp).
        let result = |era| serde_json::to_value(LIST.answer(json!(1), era)).unwrap()["result"].take();
        assert_eq!(result(Era::Handshake), json!({"tools": odd_definitions()}));
        let stateless = result(Era::Stateless);
        assert_eq!((&stateless["ttlMs"], &stateless["cacheScope"], &stateless["resultType"]), (&json!(crate::mcp::session::CACHE_TTL_MS), &json!("public"), &json!("complete")));
    }

    #[test]
    fn a_refusal_writes_exactly_what_the_built_value_would() {
        let messages = ["not allowed", "", "a \"quoted\" \\ path\n\u{1}\u{7f} é \u{202e} 💥", &"x".repeat(5000)];
        for id in [json!(1), json!("a\"b"), json!(-0.5)] {
            for code in [ToolCode::Denied, ToolCode::BadArguments, ToolCode::NotApproved] {
                for message in messages {
                    let typed = Refusal::new(id.clone(), code, message);
                    assert_eq!(typed.message(), message);
                    let written = serde_json::to_string(&typed).unwrap();
                    let call = ToolResult::error(code, clean(message)).into_call();
                    let built = result_response(id.clone(), call.to_value());
                    assert_eq!(written, serde_json::to_string(&built).unwrap());
                    assert_eq!(typed.into_value(), built);
                }
            }
        }
    }

    /// The three shapes a tool result takes on the wire, and what the journal reads.
    #[test]
    fn tool_results_serialise_once_in_their_three_shapes() {
        let ok = ToolResult::ok(fields(json!({"status": 200})));
        assert_eq!((ok.code(), ok.message()), (None, None));
        let v = ok.into_call();
        assert_eq!((v.is_error(), Value::Object(v.structured().clone())), (false, json!({"status": 200})));
        assert_eq!(v.text(), r#"{"status":200}"#);

        let err = ToolResult::error(ToolCode::Denied, clean("no rule"));
        assert_eq!((err.code(), err.message()), (Some(ToolCode::Denied), Some("no rule")));
        let v = err.into_call().to_value();
        assert_eq!(v["content"][0]["text"], "SP_DENIED: no rule");
        assert_eq!(v["structuredContent"], json!({"error": {"code": "SP_DENIED", "message": "no rule"}}));

        let partial = ToolResult::error(ToolCode::Timeout, clean("too slow")).with_fields(fields(json!({"stdout": "so far"})));
        let v = partial.into_call();
        let sc = json!({"stdout": "so far", "error": {"code": "SP_TIMEOUT", "message": "too slow"}});
        assert_eq!(Value::Object(v.structured().clone()), sc);
        assert_eq!(v.text(), format!("SP_TIMEOUT: too slow\n{sc}"));
        assert!(v.is_error());
    }

    /// The typed answer is byte for byte what serde_json makes of the materialised
    /// message, in both eras, for every shape, with text that needs escaping; and no
    /// marker of any kind is on the wire.
    #[test]
    fn a_typed_answer_writes_exactly_what_the_built_value_would() {
        let odd = json!({"body": "a\"b\u{1}\n\u{0}", "n": [1, 2.5, -3], "é": "\u{202e}", "nested": {"z": null, "a": true}});
        let results = [
            ToolResult::ok(fields(odd.clone())),
            ToolResult::ok(fields(json!({}))),
            ToolResult::error(ToolCode::Upstream, clean("peer said \"no\"\n")),
            ToolResult::error(ToolCode::Timeout, clean("too slow")).with_fields(fields(odd)),
        ];
        for r in results {
            let call = r.into_call();
            for id in [json!(7), json!("x\"y")] {
                for stateless in [false, true] {
                    let (typed, built) = both(&id, &call, stateless);
                    assert_eq!(typed, built, "stateless {stateless}");
                    assert!(!typed.contains("\\u0000sp") && !typed.contains("sp:text"), "{typed}");
                    let v: Value = serde_json::from_str(&typed).unwrap();
                    let block = v["result"]["content"][0].as_object().unwrap();
                    assert_eq!(block.keys().collect::<Vec<_>>(), ["text", "type"]);
                }
            }
        }
    }

}
