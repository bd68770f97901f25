//! The table of tool result codes, the one place they are spelled.
//!
//! Every `isError` tool result carries one of these codes in `structuredContent.error.code`
//! and as the first word of its text; the journal's `code` field and the exit summary
//! (`http_request:SP_TIMEOUT=1`) use the same strings. sp(1), "Tool results", documents
//! each; a test below keeps this table and that list equal.

use std::fmt;

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
    /// An upstream tool whose definition no longer matches its pin, or has none: withheld
    /// until the operator approves it (`tools/upstream/pins.rs`).
    ToolChanged,
    /// A `limits` rule of the policy has counted its max in its window
    /// (`gate/limits.rs`); the result's `error.retry_after_s` says when it closes.
    RateLimited,
}

impl ToolCode {
    /// Every code, in the order sp(1) lists them.
    #[cfg(test)]
    pub(crate) const ALL: [ToolCode; 12] = [
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
        ToolCode::ToolChanged,
        ToolCode::RateLimited,
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
            ToolCode::ToolChanged => "SP_TOOL_CHANGED",
            ToolCode::RateLimited => "SP_RATE_LIMITED",
        }
    }
}

/// Why input was refused before any action ran: the counter key (`Stats`) and the
/// `reject` row's `decision` (`sp-audit(1)`, Kinds), each spelled once, here. Every
/// refusal names one: the frame, JSON, JSON-RPC and lifecycle refusals (`RpcError`),
/// a tool's arguments and policy (`Denial`), the approver, the journal, the client's
/// cancel.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub(crate) enum Reason {
    FrameTooLong,
    FrameBadUtf8,
    FrameNul,
    FrameStrayCr,
    FrameTruncated,
    FrameIo,
    JsonDuplicateKey,
    JsonTooDeep,
    JsonTooLarge,
    JsonParse,
    InvalidRequest,
    NotInitialized,
    AlreadyInitialized,
    MethodNotFound,
    InvalidParams,
    UnsupportedVersion,
    IdInFlight,
    UnknownTool,
    BadArguments,
    Denied,
    ToolChanged,
    Cancelled,
    Declined,
    Dismissed,
    NotApproved,
    AuditUnavailable,
    UpstreamUnavailable,
    /// A relayed resource or prompt the upstream does not have.
    NotFound,
    /// A relayed read or get the upstream failed.
    UpstreamError,
    /// A relayed read over its bound.
    TooLarge,
    /// A relayed read withheld (a secret in a blob).
    Withheld,
    RateLimited,
    LimitsUnavailable,
}

impl Reason {
    pub(crate) const fn as_str(self) -> &'static str {
        match self {
            Reason::FrameTooLong => "frame_too_long",
            Reason::FrameBadUtf8 => "frame_bad_utf8",
            Reason::FrameNul => "frame_nul",
            Reason::FrameStrayCr => "frame_stray_cr",
            Reason::FrameTruncated => "frame_truncated",
            Reason::FrameIo => "frame_io",
            Reason::JsonDuplicateKey => "json_duplicate_key",
            Reason::JsonTooDeep => "json_too_deep",
            Reason::JsonTooLarge => "json_too_large",
            Reason::JsonParse => "json_parse",
            Reason::InvalidRequest => "invalid_request",
            Reason::NotInitialized => "not_initialized",
            Reason::AlreadyInitialized => "already_initialized",
            Reason::MethodNotFound => "method_not_found",
            Reason::InvalidParams => "invalid_params",
            Reason::UnsupportedVersion => "unsupported_version",
            Reason::IdInFlight => "id_in_flight",
            Reason::UnknownTool => "unknown_tool",
            Reason::BadArguments => "bad_arguments",
            Reason::Denied => "denied",
            Reason::ToolChanged => "tool_changed",
            Reason::Cancelled => "cancelled",
            Reason::Declined => "declined",
            Reason::Dismissed => "dismissed",
            Reason::NotApproved => "not_approved",
            Reason::AuditUnavailable => "audit_unavailable",
            Reason::UpstreamUnavailable => "upstream_unavailable",
            Reason::NotFound => "not_found",
            Reason::UpstreamError => "upstream_error",
            Reason::TooLarge => "too_large",
            Reason::Withheld => "withheld",
            Reason::RateLimited => "rate_limited",
            Reason::LimitsUnavailable => "limits_unavailable",
        }
    }
}

impl fmt::Display for Reason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A call refused before it ran (its arguments, the policy, the approver, the journal,
/// or the client's cancel): the counter key and the journal row's `decision`, the tool
/// result's code, and sp's message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Rejection {
    pub reason: Reason,
    pub code: ToolCode,
    pub message: String,
}

impl fmt::Display for ToolCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A tool's `outputSchema` (MCP 2025-06-18 "Structured content"): its result's
/// `properties`, of which a success has every one of `required`; or a refusal's
/// `{"error": {"code", "message"}}`, which may come with some of the result's fields
/// (an SSH command stopped at its timeout). No other member, so a host that validates
/// `structuredContent` against it finds each one sp writes (`tools/tests.rs` validates
/// real results).
pub(crate) fn result_schema(mut properties: serde_json::Map<String, serde_json::Value>, required: &[&str]) -> serde_json::Value {
    properties.insert(
        "error".into(),
        serde_json::json!({
            "type": "object",
            "properties": {
                "code": {"type": "string", "pattern": "^SP_[A-Z_]+$"},
                "message": {"type": "string"},
                "retry_after_s": {"type": "integer", "minimum": 1}
            },
            "required": ["code", "message"],
            "additionalProperties": false
        }),
    );
    serde_json::json!({
        "type": "object",
        "properties": properties,
        "additionalProperties": false,
        "anyOf": [{"required": required}, {"required": ["error"]}]
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The codes sp(1) documents under "Tool results" are exactly this table.
    #[test]
    fn the_table_is_the_documented_list() {
        let page = include_str!("../../man/sp.1");
        let start = page.find(".SS Tool results").expect("sp(1) has Tool results");
        let rest = &page[start + 1..];
        let section = &rest[..rest.find("\n.SS ").or_else(|| rest.find("\n.SH ")).unwrap_or(rest.len())];
        let mut documented: Vec<&str> = section.split(".TP\n.B ").skip(1).filter_map(|s| s.lines().next()).filter(|w| w.starts_with("SP_")).collect();
        documented.sort_unstable();
        let mut ours: Vec<&str> = ToolCode::ALL.iter().map(|c| c.as_str()).collect();
        ours.sort_unstable();
        assert_eq!(documented, ours);
        for c in ToolCode::ALL {
            assert_eq!(c.to_string(), c.as_str());
        }
    }
}
