//! The wire's vocabulary (issue #9): the one table of tool result codes.
//!
//! Every `isError` tool result carries one of these codes in `structuredContent.error.code`
//! and as the first word of its text; the journal's `code` field and the exit summary
//! (`http_request:SP_TIMEOUT=1`) use the same strings. sp(1), "Tool results", documents
//! each; a test below keeps this table and that list equal.

use std::fmt;

use serde_json::{json, Map, Value};

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
/// turns it into the wire's JSON once ([`ToolResult::into_value`]) and the journal reads
/// its code and message from here, never back out of the rendered JSON.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct ToolResult {
    /// The error's code (a [`ToolCode`] string) and message; `None` for success.
    error: Option<(&'static str, String)>,
    /// `structuredContent`: the tool's fields. An error's partial output (the output of
    /// a timed-out command) sits next to its `error` member.
    fields: Map<String, Value>,
}

impl ToolResult {
    /// Success with these fields (an object; anything else is wrapped as `{"value": ..}`).
    pub(crate) fn ok(fields: Value) -> ToolResult {
        let fields = match fields {
            Value::Object(m) => m,
            other => Map::from_iter([("value".to_owned(), other)]),
        };
        ToolResult { error: None, fields }
    }

    /// An error result: `code` is a [`ToolCode`] string.
    pub(crate) fn error(code: &'static str, message: impl Into<String>) -> ToolResult {
        ToolResult { error: Some((code, message.into())), fields: Map::new() }
    }

    /// The same error, carrying partial output fields.
    pub(crate) fn with_fields(mut self, fields: Map<String, Value>) -> ToolResult {
        self.fields.extend(fields);
        self
    }

    /// `"ok"` or the error's code: the execution counters' and the journal's outcome.
    pub(crate) fn outcome(&self) -> &'static str {
        self.error.as_ref().map_or("ok", |(code, _)| code)
    }

    pub(crate) fn message(&self) -> Option<&str> {
        self.error.as_ref().map(|(_, m)| m.as_str())
    }

    /// The MCP `CallToolResult`. Its text block is the JSON of `structuredContent`
    /// (after an error's `code: message` line when there are fields), rendered when the
    /// answer is written ([`crate::out::RENDER_STRUCTURED`]), not held twice.
    pub(crate) fn into_value(self) -> Value {
        let ToolResult { error, mut fields } = self;
        let Some((code, message)) = error else {
            let text = json!({"type": "text", (crate::out::RENDER_STRUCTURED): ""});
            return object([("content", Value::Array(vec![text])), ("structuredContent", Value::Object(fields)), ("isError", false.into())]);
        };
        let text = if fields.is_empty() {
            json!({"type": "text", "text": format!("{code}: {message}")})
        } else {
            json!({"type": "text", (crate::out::RENDER_STRUCTURED): format!("{code}: {message}\n")})
        };
        fields.insert("error".into(), json!({"code": code, "message": message}));
        object([("content", Value::Array(vec![text])), ("structuredContent", Value::Object(fields)), ("isError", true.into())])
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
pub(crate) fn era_response(id: Value, result: Value, era: crate::session::Era) -> Value {
    let mut response = result_response(id, result);
    if era == crate::session::Era::Stateless {
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
    pub code: &'static str,
    /// `"{code}: {message}"`, the text block, built once; the message is its tail.
    text: String,
}

impl Refusal {
    pub(crate) fn new(id: Value, code: &'static str, message: impl fmt::Display) -> Refusal {
        use fmt::Write as _;
        let mut text = String::with_capacity(code.len() + 96);
        // Writing into a String cannot fail.
        let _ = write!(text, "{code}: {message}");
        Refusal { id, code, text }
    }

    /// The message without the code.
    pub(crate) fn message(&self) -> &str {
        &self.text[self.code.len() + 2..]
    }

    pub(crate) fn into_value(self) -> Value {
        let message = self.message().to_owned();
        result_response(self.id, ToolResult::error(self.code, message).into_value())
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
                m.serialize_entry("code", self.0.code)?;
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

/// 2026-07-28: every result says `resultType: "complete"` (sp never asks for input) and
/// carries the server info in `_meta` (a SHOULD of that revision).
pub(crate) fn stamp_stateless(response: &mut Value) {
    if let Some(result) = response.get_mut("result").and_then(Value::as_object_mut) {
        result.insert("resultType".into(), json!("complete"));
        let meta = result.entry("_meta").or_insert_with(|| json!({}));
        if let Some(meta) = meta.as_object_mut() {
            meta.insert(crate::session::META_SERVER_INFO.into(), crate::session::server_info());
        }
    }
}

/// A tool result's error code.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) enum ToolCode {
    /// The arguments failed the tool's checks; nothing was authorized.
    BadArguments,
    /// The policy does not allow the call.
    Denied,
    /// The operator's approver did not approve the call.
    NotApproved,
    /// The destination is an address the policy may not reach.
    Blocked,
    /// The journal, a secret, the network or the host could not be used.
    Unavailable,
    /// The call ran out of time.
    Timeout,
    /// The other side failed (closed early, not HTTP, an SSH channel error).
    Upstream,
    /// The SSH host key did not match.
    HostKey,
    /// SSH authentication failed.
    Auth,
    /// The client cancelled the call (never sent: a cancelled call gets no answer).
    Cancelled,
}

impl ToolCode {
    /// Every code, in the order sp(1) lists them.
    #[cfg(test)]
    pub(crate) const ALL: [ToolCode; 10] = [
        ToolCode::BadArguments,
        ToolCode::Denied,
        ToolCode::NotApproved,
        ToolCode::Blocked,
        ToolCode::Unavailable,
        ToolCode::Timeout,
        ToolCode::Upstream,
        ToolCode::HostKey,
        ToolCode::Auth,
        ToolCode::Cancelled,
    ];

    /// The code as it appears on the wire, in the journal and in summaries.
    pub(crate) const fn as_str(self) -> &'static str {
        match self {
            ToolCode::BadArguments => "SP_BAD_ARGUMENTS",
            ToolCode::Denied => "SP_DENIED",
            ToolCode::NotApproved => "SP_NOT_APPROVED",
            ToolCode::Blocked => "SP_BLOCKED",
            ToolCode::Unavailable => "SP_UNAVAILABLE",
            ToolCode::Timeout => "SP_TIMEOUT",
            ToolCode::Upstream => "SP_UPSTREAM",
            ToolCode::HostKey => "SP_HOST_KEY",
            ToolCode::Auth => "SP_AUTH",
            ToolCode::Cancelled => "SP_CANCELLED",
        }
    }
}

impl fmt::Display for ToolCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_refusal_writes_exactly_what_the_built_value_would() {
        let messages = ["not allowed", "", "a \"quoted\" \\ path\n\u{1}\u{7f} é \u{202e} 💥", &"x".repeat(5000)];
        for id in [json!(1), json!("a\"b"), json!(-0.5)] {
            for code in ["SP_DENIED", "SP_BAD_ARGUMENTS", "SP_NOT_APPROVED"] {
                for message in messages {
                    let typed = Refusal::new(id.clone(), code, message);
                    assert_eq!(typed.message(), message);
                    let written = serde_json::to_string(&typed).unwrap();
                    let built = result_response(id.clone(), ToolResult::error(code, message).into_value());
                    assert_eq!(written, serde_json::to_string(&built).unwrap());
                    assert_eq!(typed.into_value(), built);
                }
            }
        }
    }

    /// The three shapes a tool result takes on the wire, and what the journal reads.
    #[test]
    fn tool_results_serialise_once_in_their_three_shapes() {
        let ok = ToolResult::ok(json!({"status": 200}));
        assert_eq!((ok.outcome(), ok.message()), ("ok", None));
        let v = ok.into_value();
        assert_eq!((v["isError"].clone(), v["structuredContent"].clone()), (json!(false), json!({"status": 200})));
        assert_eq!(v["content"][0][crate::out::RENDER_STRUCTURED], "");

        let err = ToolResult::error(ToolCode::Denied.as_str(), "no rule");
        assert_eq!((err.outcome(), err.message()), ("SP_DENIED", Some("no rule")));
        let v = err.into_value();
        assert_eq!(v["content"][0]["text"], "SP_DENIED: no rule");
        assert_eq!(v["structuredContent"], json!({"error": {"code": "SP_DENIED", "message": "no rule"}}));

        let partial = ToolResult::error(ToolCode::Timeout.as_str(), "too slow").with_fields(Map::from_iter([("stdout".to_owned(), json!("so far"))]));
        let v = partial.into_value();
        assert_eq!(v["structuredContent"], json!({"stdout": "so far", "error": {"code": "SP_TIMEOUT", "message": "too slow"}}));
        assert_eq!(v["content"][0][crate::out::RENDER_STRUCTURED], "SP_TIMEOUT: too slow\n");
        assert_eq!(v["isError"], true);
    }

    /// The codes sp(1) documents under "Tool results" are exactly this table.
    #[test]
    fn the_table_is_the_documented_list() {
        let page = include_str!("../man/sp.1");
        let start = page.find(".SS Tool results").expect("sp(1) has Tool results");
        let rest = &page[start + 1..];
        let section = &rest[..rest.find("\n.SS ").or_else(|| rest.find("\n.SH ")).unwrap_or(rest.len())];
        let mut documented: Vec<&str> =
            section.split(".TP\n.B ").skip(1).filter_map(|s| s.lines().next()).filter(|w| w.starts_with("SP_")).collect();
        documented.sort_unstable();
        let mut ours: Vec<&str> = ToolCode::ALL.iter().map(|c| c.as_str()).collect();
        ours.sort_unstable();
        assert_eq!(documented, ours);
        for c in ToolCode::ALL {
            assert_eq!(c.to_string(), c.as_str());
        }
    }
}
