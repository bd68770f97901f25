//! The wire's typed messages, each serialised once, in the manner of rmcp's `model.rs`:
//! a JSON-RPC [`Response`] carries an [`Answer`]: a method's result, a tool's
//! [`CallToolResult`], or an [`ErrorData`] with its [`ErrorCode`]. Nothing on the wire
//! is a rendered `Value` edited afterwards, and nothing in it is a marker to be found and
//! replaced on the way out.
//!
//! ```text
//!   tool slice -> ToolResult (Scrubbed pieces) --into_call--> CallToolResult ─┐
//!   refused call (sp's words) -----------------> CallToolResult::refusal ----┤
//!   session step (initialize, ping, ...) ------> Value -----------------------┼─> Answer -> Response -> out
//!   RpcError (frame, json, shape, lifecycle) --> ErrorData { ErrorCode } -----┘
//! ```
//!
//! Each serialiser writes its keys in the order a `serde_json::Value` map would (sorted),
//! so the bytes are what the same message built as a `Value` would give (the tests hold
//! the two equal). A 2026-07-28 (stateless) answer is stamped as it is written: its
//! result carries `resultType: "complete"` (sp never asks for input) and the server info
//! in `_meta` (a SHOULD of that revision). The `tools/list` answer is the one other
//! writer: its result is the cached JSON text of a `Value` built once per process
//! (`tools::ListAnswer`). The codes a tool result carries are `gate::outcome::ToolCode`.

use std::fmt;

use serde::ser::{Serialize, SerializeMap, Serializer};
use serde_json::{json, Map, Value};

use crate::gate::outcome::ToolCode;
use crate::gate::scrubbed::Scrubbed;
use crate::mcp::session::Era;

pub(crate) mod live;
pub(crate) mod outgoing;

pub(crate) use outgoing::{Notification, Outbound, Request, Wire};

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

// ---------------------------------------------------------------------------------------
// JSON-RPC errors

/// A JSON-RPC error code (JSON-RPC 2.0 section 5.1, and MCP's own).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct ErrorCode(pub i32);

impl ErrorCode {
    /// Not one JSON value, or not UTF-8, or a frame cut off.
    pub(crate) const PARSE_ERROR: ErrorCode = ErrorCode(-32700);
    /// Not a valid request here: its shape, its size, or the session's state.
    pub(crate) const INVALID_REQUEST: ErrorCode = ErrorCode(-32600);
    pub(crate) const METHOD_NOT_FOUND: ErrorCode = ErrorCode(-32601);
    pub(crate) const INVALID_PARAMS: ErrorCode = ErrorCode(-32602);
    pub(crate) const INTERNAL_ERROR: ErrorCode = ErrorCode(-32603);
    /// 2026-07-28 `UNSUPPORTED_PROTOCOL_VERSION`.
    pub(crate) const UNSUPPORTED_PROTOCOL_VERSION: ErrorCode = ErrorCode(-32022);
}

impl fmt::Display for ErrorCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

impl Serialize for ErrorCode {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_i32(self.0)
    }
}

impl From<&crate::mcp::frame::FrameError> for ErrorCode {
    fn from(e: &crate::mcp::frame::FrameError) -> ErrorCode {
        match e {
            // The line was too long to read: a request too large, not a parse failure.
            crate::mcp::frame::FrameError::TooLong { .. } => ErrorCode::INVALID_REQUEST,
            _ => ErrorCode::PARSE_ERROR,
        }
    }
}

impl From<&crate::json::JsonError> for ErrorCode {
    fn from(e: &crate::json::JsonError) -> ErrorCode {
        match e {
            crate::json::JsonError::TooLarge { .. } => ErrorCode::INVALID_REQUEST,
            _ => ErrorCode::PARSE_ERROR,
        }
    }
}

impl From<&crate::mcp::jsonrpc::ShapeError> for ErrorCode {
    fn from(_: &crate::mcp::jsonrpc::ShapeError) -> ErrorCode {
        ErrorCode::INVALID_REQUEST
    }
}

impl From<&crate::mcp::session::Refusal> for ErrorCode {
    fn from(r: &crate::mcp::session::Refusal) -> ErrorCode {
        use crate::mcp::session::Refusal;
        match r {
            Refusal::MethodNotFound { .. } => ErrorCode::METHOD_NOT_FOUND,
            Refusal::UnsupportedVersion { .. } => ErrorCode::UNSUPPORTED_PROTOCOL_VERSION,
            Refusal::InvalidParams(_) => ErrorCode::INVALID_PARAMS,
            // An invalid request in this state. (-32002 is LSP's ServerNotInitialized,
            // but MCP defines -32002 as "resource not found".)
            Refusal::NotInitialized { .. } | Refusal::AlreadyInitialized | Refusal::IdInFlight { .. } => ErrorCode::INVALID_REQUEST,
        }
    }
}

/// A JSON-RPC error object: `{"code", "message", "data"?}`.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct ErrorData {
    pub code: ErrorCode,
    pub message: String,
    pub data: Option<Value>,
}

impl ErrorData {
    pub(crate) fn new(code: ErrorCode, message: impl fmt::Display) -> ErrorData {
        ErrorData { code, message: message.to_string(), data: None }
    }
}

impl From<&crate::mcp::session::Refusal> for ErrorData {
    /// The session's refusal, with the `data` a client acts on: the versions served
    /// (2026-07-28 `UnsupportedProtocolVersionError`), or the id refused as in flight.
    fn from(r: &crate::mcp::session::Refusal) -> ErrorData {
        use crate::mcp::session::{Refusal, ALL_VERSIONS};
        let data = match r {
            Refusal::UnsupportedVersion { requested } => Some(object([
                ("requested", Value::String(requested.clone())),
                ("supported", Value::Array(ALL_VERSIONS.iter().map(|v| Value::from(*v)).collect())),
            ])),
            Refusal::IdInFlight { id } => Some(object([("requestId", id.to_value())])),
            _ => None,
        };
        ErrorData { code: r.into(), message: r.to_string(), data }
    }
}

impl Serialize for ErrorData {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut m = s.serialize_map(Some(if self.data.is_some() { 3 } else { 2 }))?;
        m.serialize_entry("code", &self.code)?;
        if let Some(data) = &self.data {
            m.serialize_entry("data", data)?;
        }
        m.serialize_entry("message", &self.message)?;
        m.end()
    }
}

// ---------------------------------------------------------------------------------------
// Responses

/// What a response carries.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Answer {
    /// A method's result in sp's own words (`initialize`, `ping`, `server/discover`).
    Result(Value),
    /// A `tools/call` result: a tool's, or a refused call's.
    Call(CallToolResult),
    Error(ErrorData),
}

/// A JSON-RPC response, written once: `{"id", "jsonrpc": "2.0", "result"}`, or
/// `{"error", "id", "jsonrpc"}` (`id` null when the request's could not be read).
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Response {
    id: Value,
    answer: Answer,
    /// A 2026-07-28 result: stamped as it is written (module doc).
    stateless: bool,
}

impl Response {
    /// The answer to request `id` in `era`. A method's result is stamped here for
    /// 2026-07-28 (`resultType` and the server info); a tool's as it is written; an
    /// error never.
    pub(crate) fn new(id: Value, answer: Answer, era: Era) -> Response {
        let stateless = era == Era::Stateless;
        let answer = match answer {
            Answer::Result(mut result) if stateless => {
                stamp(&mut result);
                Answer::Result(result)
            }
            other => other,
        };
        Response { id, answer, stateless }
    }

    pub(crate) fn error(id: Value, error: ErrorData) -> Response {
        Response { id, answer: Answer::Error(error), stateless: false }
    }

    /// A 2026-07-28 `input_required` answer: one `elicitation/create` the client is to
    /// answer (`inputRequests`, under `key`) and the `requestState` it sends back with
    /// the answer.
    pub(crate) fn input_required(id: Value, key: &str, elicitation: Value, state: String) -> Response {
        let request = object([("method", Value::from("elicitation/create")), ("params", elicitation)]);
        let requests = Value::Object(Map::from_iter([(key.to_owned(), request)]));
        let mut result = object([("inputRequests", requests), ("requestState", Value::String(state))]);
        stamp(&mut result);
        result["resultType"] = Value::from("input_required");
        Response { id, answer: Answer::Result(result), stateless: true }
    }
}

/// The 2026-07-28 members of a method's result (module doc); an `_meta` it has already
/// keeps its other members.
fn stamp(result: &mut Value) {
    if let Some(result) = result.as_object_mut() {
        result.insert("resultType".into(), Value::from("complete"));
        let meta = result.entry("_meta").or_insert_with(|| Value::Object(Map::new()));
        if let Some(meta) = meta.as_object_mut() {
            meta.insert(crate::mcp::session::META_SERVER_INFO.into(), crate::mcp::session::server_info());
        }
    }
}

impl Serialize for Response {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut m = s.serialize_map(Some(3))?;
        if let Answer::Error(error) = &self.answer {
            m.serialize_entry("error", error)?;
        }
        m.serialize_entry("id", &self.id)?;
        m.serialize_entry("jsonrpc", "2.0")?;
        match &self.answer {
            Answer::Result(result) => m.serialize_entry("result", result)?,
            Answer::Call(call) => m.serialize_entry("result", &CallWire(call, self.stateless))?,
            Answer::Error(_) => {}
        }
        m.end()
    }
}

/// A method's result answered to `id` in `era`, as a `Value`: the message [`Response`]
/// writes (the tests hold the two equal; [`ToolList`] builds its cached text with it).
fn era_response(id: Value, mut result: Value, era: Era) -> Value {
    if era == Era::Stateless {
        stamp(&mut result);
    }
    object([("id", id), ("jsonrpc", "2.0".into()), ("result", result)])
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
/// (`stamp`); a test holds the two equal.
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

/// A JSON object of these members, the values moved in. (`json!` serialises each
/// interpolated value again, a deep copy: a response body would be held twice.)
pub(crate) fn object<const N: usize>(members: [(&str, Value); N]) -> Value {
    Value::Object(members.into_iter().map(|(k, v)| (k.to_owned(), v)).collect())
}

// ---------------------------------------------------------------------------------------
// Tool results

/// A `tools/call` result as a tool's slice makes it, typed: the loop
/// turns it into the wire's [`CallToolResult`] once ([`ToolResult::into_call`]) and the
/// journal reads its code and message from here, never back out of the rendered JSON.
///
/// Its outside pieces (the error message, the fields' values) are [`Scrubbed`]: redacted
/// before they were put here, so the envelope around them (`content`, `type`, `text`,
/// `structuredContent`, `isError`, `error`, `code`, the code itself and the field names)
/// is written as sp spells it, never through the redactor (`gate::vault`).
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct ToolResult {
    /// The error's code (a `ToolCode` string) and message; `None` for success.
    error: Option<(ToolCode, Scrubbed<String>)>,
    /// `structuredContent`: the tool's fields. An error's partial output (the output of
    /// a timed-out command) sits next to its `error` member.
    fields: Scrubbed<Map<String, Value>>,
    /// An upstream MCP server's own result, scrubbed and checked whole
    /// (`gate::withhold::scrub_upstream`): written as the upstream shaped it.
    passed: Option<Scrubbed<live::PassedResult>>,
}

impl ToolResult {
    /// Success with these fields (`Vault::scrub_fields`).
    pub(crate) fn ok(fields: Scrubbed<Map<String, Value>>) -> ToolResult {
        ToolResult { error: None, fields, passed: None }
    }

    /// An upstream's result, as it sent it (its `isError` is its own: the call ran).
    pub(crate) fn upstream(result: Scrubbed<live::PassedResult>) -> ToolResult {
        ToolResult { error: None, fields: Scrubbed::default(), passed: Some(result) }
    }

    /// An error result: `code` is a `ToolCode` string.
    pub(crate) fn error(code: ToolCode, message: Scrubbed<String>) -> ToolResult {
        ToolResult { error: Some((code, message)), fields: Scrubbed::default(), passed: None }
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

    /// The MCP `CallToolResult`.
    pub(crate) fn into_call(self) -> CallToolResult {
        let ToolResult { error, fields, passed } = self;
        CallToolResult {
            error: error.map(|(code, message)| (code, message.into_inner())),
            fields: fields.into_inner(),
            passed: passed.map(Scrubbed::into_inner),
            retry_after_s: None,
        }
    }
}

impl crate::gate::withhold::Outside for ToolResult {
    fn outside(&self) -> (Option<&str>, &Map<String, Value>) {
        (self.message(), self.fields.get())
    }
}

/// An MCP `CallToolResult` as it is written: `content` (one text block), `isError`,
/// `structuredContent`. The text block repeats the structured result for clients that
/// read only `content`: the JSON of `structuredContent` (after an error's `code: message`
/// line when there are fields), or `code: message` alone for an error without fields. It
/// is rendered while the answer is serialised, from the fields, not held twice (a body
/// escaped twice was two to seven times its size in memory).
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct CallToolResult {
    /// An error's code (a `ToolCode` string) and message: `structuredContent.error`.
    error: Option<(ToolCode, String)>,
    /// The other members of `structuredContent` (an `error` among them is not written:
    /// the result's own takes its place).
    fields: Map<String, Value>,
    /// An upstream's own result: written instead of the above.
    passed: Option<live::PassedResult>,
    /// `structuredContent.error.retry_after_s` of an `SP_RATE_LIMITED` refusal.
    retry_after_s: Option<u64>,
}

impl CallToolResult {
    /// An `SP_RATE_LIMITED` refusal, telling when to try again (`gate/limits.rs`).
    pub(crate) fn rate_limited(message: impl fmt::Display, retry_after_s: u64) -> CallToolResult {
        CallToolResult { retry_after_s: Some(retry_after_s), ..CallToolResult::refusal(ToolCode::RateLimited, message) }
    }

    /// A refused call (bad arguments, a policy denial, a refused approval): `message` is
    /// sp's words about the agent's own request, not outside text.
    pub(crate) fn refusal(code: ToolCode, message: impl fmt::Display) -> CallToolResult {
        CallToolResult { error: Some((code, message.to_string())), fields: Map::new(), passed: None, retry_after_s: None }
    }

    /// The error's message (a refusal's, for the log and the journal).
    pub(crate) fn message(&self) -> Option<&str> {
        self.error.as_ref().map(|(_, m)| m.as_str())
    }

    /// The text block's text, built (tests compare it whole).
    #[cfg(test)]
    pub(crate) fn text(&self) -> String {
        Text(self).to_string()
    }

    /// `structuredContent`, built.
    #[cfg(test)]
    pub(crate) fn structured(&self) -> Value {
        serde_json::to_value(Structured(self)).expect("a map of values serialises")
    }

    #[cfg(test)]
    pub(crate) fn is_error(&self) -> bool {
        self.error.is_some()
    }
}

/// A [`CallToolResult`] as the `result` member, stamped for 2026-07-28 when `.1`.
struct CallWire<'a>(&'a CallToolResult, bool);

impl Serialize for CallWire<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let (r, stateless) = (self.0, self.1);
        if let Some(passed) = &r.passed {
            return live::PassedWire(passed, stateless).serialize(s);
        }
        let mut m = s.serialize_map(Some(if stateless { 5 } else { 3 }))?;
        // Keys in the order a `Value`'s map writes them (sorted).
        if stateless {
            m.serialize_entry("_meta", &Meta)?;
        }
        m.serialize_entry("content", &[Block(r)])?;
        m.serialize_entry("isError", &r.error.is_some())?;
        if stateless {
            m.serialize_entry("resultType", "complete")?;
        }
        m.serialize_entry("structuredContent", &Structured(r))?;
        m.end()
    }
}

/// `_meta` of a 2026-07-28 answer: the server info.
pub(super) struct Meta;

impl Serialize for Meta {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut m = s.serialize_map(Some(1))?;
        m.serialize_entry(crate::mcp::session::META_SERVER_INFO, &crate::mcp::session::server_info())?;
        m.end()
    }
}

/// The one text block: `{"text", "type": "text"}`.
struct Block<'a>(&'a CallToolResult);

impl Serialize for Block<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut m = s.serialize_map(Some(2))?;
        m.serialize_entry("text", &Text(self.0))?;
        m.serialize_entry("type", "text")?;
        m.end()
    }
}

/// `structuredContent`: the fields, and the error among them in its sorted place.
struct Structured<'a>(&'a CallToolResult);

impl Serialize for Structured<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let r = self.0;
        let fields = r.fields.iter().filter(|(k, _)| !(r.error.is_some() && *k == "error"));
        let mut m = s.serialize_map(None)?;
        let mut error = r.error.as_ref();
        for (k, v) in fields {
            if let Some((code, message)) = error.filter(|_| k.as_str() > "error") {
                m.serialize_entry("error", &ErrorMember(code.as_str(), message, r.retry_after_s))?;
                error = None;
            }
            m.serialize_entry(k, v)?;
        }
        if let Some((code, message)) = error {
            m.serialize_entry("error", &ErrorMember(code.as_str(), message, r.retry_after_s))?;
        }
        m.end()
    }
}

/// `structuredContent.error`: `{"code", "message"}`, and `retry_after_s` when rate limited.
struct ErrorMember<'a>(&'a str, &'a str, Option<u64>);

impl Serialize for ErrorMember<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut m = s.serialize_map(Some(2 + usize::from(self.2.is_some())))?;
        m.serialize_entry("code", self.0)?;
        m.serialize_entry("message", self.1)?;
        if let Some(after) = self.2 {
            m.serialize_entry("retry_after_s", &after)?;
        }
        m.end()
    }
}

/// The text block's text, written as one JSON string without being built first:
/// serde_json escapes `collect_str` output piece by piece, and the structured content's
/// JSON is written piece by piece into the formatter.
struct Text<'a>(&'a CallToolResult);

impl fmt::Display for Text<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let r = self.0;
        if let Some((code, message)) = &r.error {
            write!(f, "{code}: {message}")?;
            if r.fields.is_empty() {
                return Ok(());
            }
            f.write_str("\n")?;
        }
        serde_json::to_writer(&mut FmtWriter(f), &Structured(r)).map_err(|_| fmt::Error)
    }
}

impl Serialize for Text<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
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

#[cfg(test)]
mod tests;
