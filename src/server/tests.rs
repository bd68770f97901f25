//! The loop's error codes and counter keys.

use super::*;

#[test]
fn codes_and_session_policy() {
    let cases: Vec<(RpcError, i32, bool)> = vec![
        (RpcError::Frame(FrameError::TooLong { limit: 1 }), -32600, true),
        (RpcError::Frame(FrameError::InvalidUtf8 { offset: 0 }), -32700, true),
        (RpcError::Frame(FrameError::EofMidLine { len: 1 }), -32700, true),
        (RpcError::Json(JsonError::DuplicateKey { key: "a".into() }), -32700, true),
        (RpcError::Json(JsonError::TooLarge { limit: 1 }), -32600, true),
        (RpcError::Shape(ShapeError::Batch), -32600, true),
        (RpcError::Lifecycle(Refusal::MethodNotFound { method: "x".into() }), -32601, false),
        (RpcError::Lifecycle(Refusal::InvalidParams("x".into())), -32602, false),
        (RpcError::Lifecycle(Refusal::NotInitialized { method: "x".into() }), -32600, false),
        (RpcError::Lifecycle(Refusal::IdInFlight { id: Id::Int(7) }), -32600, false),
        (RpcError::Call(CallError::UnknownTool { name: "x".into() }), -32602, false),
    ];
    for (e, code, _) in cases {
        assert_eq!(e.code(), ErrorCode(code), "{e:?}");
    }
}

/// Records every upstream call that reaches the executor; lists through real upstreams
/// (listing carries no input of the agent) and forwards each recorded call.
struct Recording {
    ups: crate::tools::upstream::Upstreams,
    calls: Vec<String>,
}

impl Executor for Recording {
    fn upstream(
        &mut self,
        action: &crate::gate::authorize::Authorized<crate::tools::upstream::tool::UpstreamAction>,
        ctx: &mut crate::gate::exec::RunContext<'_, '_>,
    ) -> Result<crate::tools::upstream::UpstreamCall, crate::tools::upstream::UpstreamError> {
        self.calls.push(action.action().route().exposed().to_owned());
        crate::tools::upstream::tool::call(&mut self.ups, action, ctx)
    }

    fn upstreams(&mut self) -> Option<&mut crate::tools::upstream::Upstreams> {
        Some(&mut self.ups)
    }
}

/// Through the loop with a recording executor: every refused upstream call (unknown
/// name, pin refused, arguments not an object, another upstream's prefix) leaves the
/// executor untouched; the one that passes reaches it once.
#[test]
fn rejected_upstream_calls_never_reach_the_executor() {
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/support/upstreams/misbehave.py");
    let python = ["/usr/bin/python3", "/usr/local/bin/python3"].into_iter().find(|p| std::path::Path::new(p).exists()).unwrap_or("python3");
    let policy = Policy::from_text(
        &serde_json::json!({"upstreams": {"m": {
            "command": [python, script, "ok"],
            "tools": {"allow": ["*"]},
            "arguments": {"act": {"path": ["/srv/*"]}},
            "sandbox": {"read": [env!("CARGO_MANIFEST_DIR")]}
        }}})
        .to_string(),
        std::path::Path::new("t.json"),
    )
    .unwrap();
    let exec = Recording { ups: crate::tools::upstream::Upstreams::new(&policy), calls: Vec::new() };
    let mut server = Server::new(&policy, exec, Options { cancel_on_eof: false, ..Options::default() });
    let call = |id: u32, params: &str| format!(r#"{{"jsonrpc":"2.0","id":{id},"method":"tools/call","params":{params}}}"#);
    let input = [
        r#"{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t"}}}"#.to_owned(),
        r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#.to_owned(),
        call(1, r#"{"name":"m_act","arguments":{"path":"/etc/passwd"}}"#),
        call(2, r#"{"name":"m_act","arguments":{"path":"/srv/../etc/passwd"}}"#),
        call(3, r#"{"name":"m_act","arguments":{}}"#),
        call(4, r#"{"name":"m_act","arguments":"x"}"#),
        call(5, r#"{"name":"m_act ","arguments":{"path":"/srv/a"}}"#),
        call(6, r#"{"name":"m_nope","arguments":{}}"#),
        call(7, r#"{"name":"q_act","arguments":{"path":"/srv/a"}}"#),
        call(8, r#"{"name":"m_act","arguments":{"path":"/srv/a"}}"#),
    ]
    .join("\n")
        + "\n";
    let mut out = crate::mcp::out::ProtocolWriter::new(Vec::new());
    let exit = server.serve(std::io::Cursor::new(input.into_bytes()), &mut out);
    assert_eq!(exit, Exit::Eof);
    let answers: Vec<serde_json::Value> = String::from_utf8(out.into_inner()).unwrap().lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    let codes: Vec<String> = answers[1..]
        .iter()
        .map(|a| match a["result"]["structuredContent"]["error"]["code"].as_str() {
            Some(code) => code.to_owned(),
            None if a["error"].is_object() => a["error"]["code"].to_string(),
            None => "ok".to_owned(),
        })
        .collect();
    assert_eq!(codes, ["SP_DENIED", "SP_DENIED", "SP_DENIED", "-32602", "-32602", "-32602", "-32602", "ok"]);
    assert_eq!(server.executor().calls, ["m_act"]);
}

/// Issue 31: the journal's `tool` and the summary's keys for outside names. Attacks
/// tried (all held): a name spelling a secret this process read, a 1 MiB name, a name
/// with an escape sequence and a newline, 100 distinct names in one session's summary.
#[test]
fn outside_tool_names_are_scrubbed_and_bounded() {
    let mut vault = crate::gate::vault::Vault::new();
    vault.remember("tf", "Zq8wK3vR-tool-field-secret");
    // This Vault only: the process-wide one holds other tests' secrets (a token "e").
    let tool_field = |name: &str| journal::tool_field_with(name, |t| vault.scrub_text(t));
    assert_eq!(tool_field("http_request"), "http_request");
    assert_eq!(tool_field("gh_get_issue"), "gh_get_issue");
    assert_eq!(tool_field("gh_Zq8wK3vR-tool-field-secret"), "gh_[REDACTED:tf]");
    let huge = format!("gh_{}", "a".repeat(1 << 20));
    let shown = tool_field(&huge);
    assert!(shown.starts_with(&format!("gh_{}...[cut: {} bytes, sha256 ", "a".repeat(61), huge.len())), "{shown}");
    assert!(shown.len() <= journal::MAX_TOOL_FIELD + 100, "{}", shown.len());
    assert_eq!(tool_field("gh_a\u{1b}[2J\nb"), "gh_a\\u{1b}[2J\\nb");
    let mut stats = stats::Stats::default();
    for i in 0..100 {
        stats.executed_one(&format!("gh_t{i}"), "ok");
    }
    stats.executed_one("gh_t0", "ok");
    assert_eq!(stats.executions.len(), stats::MAX_EXECUTION_KEYS + 1);
    assert_eq!((stats.executions["gh_t0:ok"], stats.executions["other:ok"]), (2, 100 - stats::MAX_EXECUTION_KEYS as u64));
}

/// The `end` row's decision is spelled by hand (issue 32: no journal value from `Debug`).
#[test]
fn the_end_rows_decisions_are_the_documented_words() {
    let names: Vec<String> =
        [Exit::Eof, Exit::ClientGone, Exit::Malformed, Exit::Refused, Exit::Signal(15), Exit::Signal(2), Exit::Signal(1)].map(Exit::name).into();
    assert_eq!(names, ["eof", "clientgone", "malformed", "refused", "sigterm", "sigint", "sighup"]);
}
