//! The upstream wire checks: tool definitions, call results, pages.

use super::*;
use serde_json::json;

#[test]
fn classify_accepts_the_three_kinds() {
    assert_eq!(classify(json!({"jsonrpc":"2.0","id":3,"result":{}})), Ok(Inbound::Response { id: 3, outcome: Ok(json!({})) }));
    assert_eq!(
        classify(json!({"jsonrpc":"2.0","id":3,"error":{"code":-32602,"message":"bad","data":{"x":1}}})),
        Ok(Inbound::Response { id: 3, outcome: Err(RpcError { code: -32602, message: "bad".into() }) })
    );
    assert_eq!(
        classify(json!({"jsonrpc":"2.0","id":"s1","method":"sampling/createMessage","params":{}})),
        Ok(Inbound::Request { id: Id::Str("s1".into()), method: "sampling/createMessage".into(), params: Some(json!({})) })
    );
    assert_eq!(
        classify(json!({"jsonrpc":"2.0","method":"notifications/tools/list_changed"})),
        Ok(Inbound::Notification { method: "notifications/tools/list_changed".into(), params: None })
    );
}

#[test]
fn classify_refuses_everything_else() {
    let cases: Vec<(Value, WireError)> = vec![
        (json!([]), WireError::NotAnObject { found: "an array" }),
        (json!("x"), WireError::NotAnObject { found: "a string" }),
        (json!({"id":1,"result":{}}), WireError::BadVersion),
        (json!({"jsonrpc":"1.0","id":1,"result":{}}), WireError::BadVersion),
        (json!({"jsonrpc":"2.0","id":1,"result":{},"extra":1}), WireError::UnexpectedMember { name: "extra".into() }),
        (json!({"jsonrpc":"2.0","id":1,"result":{},"error":{"code":1,"message":"m"}}), WireError::BadResponse),
        (json!({"jsonrpc":"2.0","id":1}), WireError::BadResponse),
        (json!({"jsonrpc":"2.0","result":{}}), WireError::BadId { found: "nothing" }),
        (json!({"jsonrpc":"2.0","id":null,"result":{}}), WireError::BadId { found: "null" }),
        (json!({"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"parse"}}), WireError::NullId),
        (json!({"jsonrpc":"2.0","id":1.5,"result":{}}), WireError::BadId { found: "a float" }),
        (json!({"jsonrpc":"2.0","id":"7","result":{}}), WireError::UnknownId { id: "\"7\"".into() }),
        (json!({"jsonrpc":"2.0","id":1,"error":{"code":"x","message":"m"}}), WireError::BadError),
        (json!({"jsonrpc":"2.0","id":1,"error":{"code":1}}), WireError::BadError),
        (json!({"jsonrpc":"2.0","id":1,"error":{"code":1,"message":"m","extra":0}}), WireError::BadError),
        (json!({"jsonrpc":"2.0","id":1,"error":"boom"}), WireError::BadError),
        (json!({"jsonrpc":"2.0","method":""}), WireError::BadMethod),
        (json!({"jsonrpc":"2.0","method":5}), WireError::BadMethod),
        (json!({"jsonrpc":"2.0","method":"x","params":[1]}), WireError::UnexpectedMember { name: "params".into() }),
        (json!({"jsonrpc":"2.0","method":"x","result":{}}), WireError::UnexpectedMember { name: "result".into() }),
        (json!({"jsonrpc":"2.0","id":true,"method":"x"}), WireError::BadId { found: "a boolean" }),
    ];
    for (v, want) in cases {
        let shown = v.to_string();
        assert_eq!(classify(v), Err(want), "{shown}");
    }
}

#[test]
fn initialize_negotiates_a_version_sp_speaks() {
    let ok = |v: &str| json!({"protocolVersion": v, "capabilities": {"tools": {"listChanged": true}}, "serverInfo": {"name": "x", "version": "1"}});
    for v in VERSIONS {
        assert_eq!(initialize(&ok(v)), Ok(Initialized { version: v, list_changed: true, has_tools: true, tasks: Default::default() }));
    }
    assert_eq!(initialize(&ok("2099-01-01")), Err(InitError::Version { offered: "2099-01-01".into() }));
    let no_tools = json!({"protocolVersion": "2025-06-18", "capabilities": {}, "serverInfo": {"name": "x", "version": "1"}});
    assert_eq!(initialize(&no_tools), Ok(Initialized { version: "2025-06-18", list_changed: false, has_tools: false, tasks: Default::default() }));
    let bad = json!({"protocolVersion": "2025-06-18", "capabilities": [], "serverInfo": {}});
    assert_eq!(initialize(&bad), Err(InitError::Shape(ShapeError { at: "result.capabilities".into(), why: "must be an object" })));
}

#[test]
fn tool_definitions() {
    let t = tool(
        json!({"name": "a.b", "title": "T", "description": "d", "inputSchema": {"type": "object", "properties": {"x": {"type": "string"}}, "required": ["x"]},
               "outputSchema": {"type": "object"}, "annotations": {"readOnlyHint": true, "title": "t"}, "icons": [], "execution": {"taskSupport": "optional"}, "_meta": {"k": 1}}),
        "tools[0]",
    )
    .unwrap();
    assert_eq!(t.name, "a.b");
    assert_eq!(
        Value::Object(t.definition),
        json!({"title": "T", "description": "d", "inputSchema": {"type": "object", "properties": {"x": {"type": "string"}}, "required": ["x"]},
               "outputSchema": {"type": "object"}, "annotations": {"readOnlyHint": true, "title": "t"}})
    );
    let cases: Vec<(Value, &str, &str)> = vec![
        (json!({"inputSchema": {"type": "object"}}), "t.name", "is required"),
        (json!({"name": "", "inputSchema": {"type": "object"}}), "t.name", "must be 1 to 1024 bytes"),
        (json!({"name": "a"}), "t.inputSchema", "is required"),
        (json!({"name": "a", "inputSchema": {"type": "array"}}), "t.inputSchema.type", "must be \"object\""),
        (json!({"name": "a", "inputSchema": {"type": "object", "required": [1]}}), "t.inputSchema.required", "must be an array of strings"),
        (json!({"name": "a", "inputSchema": {"type": "object"}, "outputSchema": true}), "t.outputSchema", "must be an object"),
        (json!({"name": "a", "inputSchema": {"type": "object"}, "handler": "x"}), "t.handler", "is not a member MCP defines here"),
        (json!({"name": "a", "inputSchema": {"type": "object"}, "annotations": {"readOnlyHint": "yes"}}), "t.annotations.readOnlyHint", "must be a boolean"),
        (
            json!({"name": "a", "inputSchema": {"type": "object"}, "annotations": {"trusted": true}}),
            "t.annotations.trusted",
            "is not a member MCP defines here",
        ),
        (json!({"name": "a", "inputSchema": {"type": "object"}, "description": 3}), "t.description", "must be a string"),
    ];
    for (v, at, why) in cases {
        let shown = v.to_string();
        assert_eq!(tool(v, "t"), Err(ShapeError { at: at.into(), why }), "{shown}");
    }
}

#[test]
fn call_results() {
    let r = call_result(json!({
        "content": [
            {"type": "text", "text": "hi", "annotations": {"audience": ["user"], "priority": 0.5}},
            {"type": "image", "data": "AAAA", "mimeType": "image/png"},
            {"type": "audio", "data": "AAAA", "mimeType": "audio/wav"},
            {"type": "resource", "resource": {"uri": "file:///x", "text": "t"}},
            {"type": "resource", "resource": {"uri": "file:///y", "blob": "AAAA", "mimeType": "x/y"}},
            {"type": "resource_link", "uri": "file:///z", "name": "z", "size": 3}
        ],
        "structuredContent": {"a": 1}, "isError": true, "_meta": {}, "toolResult": "legacy"
    }))
    .unwrap();
    assert_eq!((r.content.len(), r.structured, r.is_error), (6, Some(json!({"a": 1}).as_object().unwrap().clone()), true));
    let cases: Vec<(Value, &str, &str)> = vec![
        (json!([]), "result", "must be an object"),
        (json!({}), "result.content", "is required"),
        (json!({"content": {}}), "result.content", "must be an array"),
        (json!({"content": [1]}), "result.content[0]", "must be an object"),
        (json!({"content": [{"type": "video"}]}), "result.content[0].type", "must be text, image, audio, resource or resource_link"),
        (json!({"content": [{"type": "text"}]}), "result.content[0].text", "is required"),
        (json!({"content": [{"type": "text", "text": "x", "html": "<b>"}]}), "result.content[0].html", "is not a member MCP defines here"),
        (json!({"content": [{"type": "image", "data": "x"}]}), "result.content[0].mimeType", "is required"),
        (
            json!({"content": [{"type": "resource", "resource": {"uri": "u", "text": "a", "blob": "b"}}]}),
            "result.content[0].resource",
            "must hold exactly one of text and blob, a string",
        ),
        (
            json!({"content": [{"type": "text", "text": "x", "annotations": {"audience": ["root"]}}]}),
            "result.content[0].annotations.audience",
            "must be an array of \"user\" or \"assistant\"",
        ),
        (json!({"content": [], "structuredContent": [1]}), "result.structuredContent", "must be an object"),
        (json!({"content": [], "isError": "true"}), "result.isError", "must be a boolean"),
    ];
    for (v, at, why) in cases {
        let shown = v.to_string();
        assert_eq!(call_result(v), Err(ShapeError { at: at.into(), why }), "{shown}");
    }
}

#[test]
fn progress_params() {
    assert_eq!(
        progress(Some(&json!({"progressToken": "sp-1", "progress": 2, "total": 10, "message": "m"}))),
        Some(ProgressParams { token: json!("sp-1"), progress: 2.0, total: Some(10.0), message: Some("m".into()) })
    );
    for bad in [
        json!({"progressToken": "t"}),
        json!({"progressToken": {}, "progress": 1}),
        json!({"progressToken": "t", "progress": "1"}),
        json!({"progressToken": "t", "progress": 1, "x": 1}),
    ] {
        assert_eq!(progress(Some(&bad)), None, "{bad}");
    }
}
