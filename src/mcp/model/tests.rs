//! The typed wire against the same messages built as `Value`s by hand (the oracle: what
//! the answers were before they were typed, and what serde_json makes of them), and the
//! one redaction point seen from the wire: scrubbed pieces, withheld answers.
//!
//! Attacks tried (all held):
//! - a tool field named `error` next to an error result: the result's own `error` is
//!   written, once, in its sorted place; fields that sort around it (`Error`, `_x`,
//!   `errors`, `é`) keep their order, byte for byte as a `Value` map writes them;
//! - messages, ids and bodies with quotes, backslashes, NUL, C0/DEL, bidi overrides and
//!   5000 characters: escaped by serde_json as the built message is;
//! - a stateless (2026-07-28) error: not stamped; a result that already has `_meta`:
//!   its members kept, the server info added;
//! - a short secret that spells an envelope word (`content`, `isError`, `SP_UPSTREAM`,
//!   `200`, `:`, `{`): the envelope stays whole; only `"` can make the JSON text spell
//!   it, and then the answer is withheld in sp's words;
//! - a secret only the escaped JSON text spells, 3 MiB into a body: withheld.

use serde_json::json;

use super::*;
use crate::gate::outcome::ToolCode;
use crate::gate::vault::Vault;
use crate::gate::withhold::{withholds, WITHHELD};

/// Outside text as a tool result takes it (an empty Vault changes nothing).
fn clean(text: &str) -> Scrubbed<String> {
    Vault::new().scrub_text(text)
}

fn fields(v: Value) -> Scrubbed<Map<String, Value>> {
    Vault::new().scrub_fields(v)
}

/// The oracle: a `CallToolResult` built as a `Value`, its text block made as a string.
fn built_call(error: Option<(&str, &str)>, fields: Value) -> Value {
    let mut structured = fields.as_object().cloned().unwrap_or_default();
    let text = match error {
        None => Value::Object(structured.clone()).to_string(),
        Some((code, message)) => {
            let empty = structured.is_empty();
            structured.insert("error".into(), json!({"code": code, "message": message}));
            if empty { format!("{code}: {message}") } else { format!("{code}: {message}\n{}", Value::Object(structured.clone())) }
        }
    };
    json!({"content": [{"text": text, "type": "text"}], "isError": error.is_some(), "structuredContent": structured})
}

/// The oracle: a response built as a `Value`, stamped by hand for 2026-07-28.
fn built_response(id: &Value, mut result: Value, stateless: bool) -> Value {
    if stateless {
        result["resultType"] = json!("complete");
        if result.get("_meta").is_none() {
            result["_meta"] = json!({});
        }
        if let Some(meta) = result["_meta"].as_object_mut() {
            meta.insert(crate::mcp::session::META_SERVER_INFO.into(), crate::mcp::session::server_info());
        }
    }
    json!({"jsonrpc": "2.0", "id": id, "result": result})
}

fn era(stateless: bool) -> Era {
    if stateless { Era::Stateless } else { Era::Handshake }
}

#[test]
fn a_refusal_writes_exactly_what_the_built_value_would() {
    let messages = ["not allowed", "", "a \"quoted\" \\ path\n\u{1}\u{7f} é \u{202e} 💥", &"x".repeat(5000)];
    for id in [json!(1), json!("a\"b"), json!(-0.5)] {
        for code in [ToolCode::Denied, ToolCode::BadArguments, ToolCode::NotApproved] {
            for message in messages {
                for stateless in [false, true] {
                    let typed = CallToolResult::refusal(code, message);
                    assert_eq!(typed.message(), Some(message));
                    let written = serde_json::to_string(&Response::new(id.clone(), Answer::Call(typed.clone()), era(stateless))).unwrap();
                    let built = built_response(&id, built_call(Some((code.as_str(), message)), json!({})), stateless);
                    assert_eq!(written, serde_json::to_string(&built).unwrap());
                    // A refusal is the error result a tool would give with the same words.
                    assert_eq!(typed, ToolResult::error(code, clean(message)).into_call());
                }
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
    assert_eq!((v.is_error(), v.structured(), v.text()), (false, json!({"status": 200}), r#"{"status":200}"#.to_owned()));

    let err = ToolResult::error(crate::gate::outcome::ToolCode::Denied, clean("no rule"));
    assert_eq!((err.code(), err.message()), (Some(ToolCode::Denied), Some("no rule")));
    let v = err.into_call();
    assert_eq!(
        (v.is_error(), v.structured(), v.text()),
        (true, json!({"error": {"code": "SP_DENIED", "message": "no rule"}}), "SP_DENIED: no rule".to_owned())
    );

    let partial = ToolResult::error(crate::gate::outcome::ToolCode::Timeout, clean("too slow")).with_fields(fields(json!({"stdout": "so far"})));
    let v = partial.into_call();
    let sc = json!({"stdout": "so far", "error": {"code": "SP_TIMEOUT", "message": "too slow"}});
    assert_eq!((v.is_error(), v.structured(), v.text()), (true, sc.clone(), format!("SP_TIMEOUT: too slow\n{sc}")));
}

/// The typed answer is byte for byte what serde_json makes of the message built by hand,
/// in both eras, for every shape, with text that needs escaping, and with fields on both
/// sides of `error` in sorted order (and one named `error`, which the result's own
/// replaces); and no marker of any kind is on the wire.
#[test]
fn a_typed_answer_writes_exactly_what_the_built_value_would() {
    let odd = json!({"body": "a\"b\u{1}\n\u{0}", "n": [1, 2.5, -3], "é": "\u{202e}", "nested": {"z": null, "a": true}, "Error": 1, "_x": 2, "errors": 3});
    let cases = [
        (ToolResult::ok(fields(odd.clone())), None, odd.clone()),
        (ToolResult::ok(fields(json!({}))), None, json!({})),
        (ToolResult::error(crate::gate::outcome::ToolCode::Upstream, clean("peer said \"no\"\n")), Some(("SP_UPSTREAM", "peer said \"no\"\n")), json!({})),
        (
            ToolResult::error(crate::gate::outcome::ToolCode::Timeout, clean("too slow")).with_fields(fields(odd.clone())),
            Some(("SP_TIMEOUT", "too slow")),
            odd.clone(),
        ),
        (
            ToolResult::error(crate::gate::outcome::ToolCode::Timeout, clean("x")).with_fields(fields(json!({"error": "theirs", "a": 1}))),
            Some(("SP_TIMEOUT", "x")),
            json!({"error": "theirs", "a": 1}),
        ),
    ];
    for (r, error, fields) in cases {
        let call = r.into_call();
        for id in [json!(7), json!("x\"y")] {
            for stateless in [false, true] {
                let typed = serde_json::to_string(&Response::new(id.clone(), Answer::Call(call.clone()), era(stateless))).unwrap();
                let built = serde_json::to_string(&built_response(&id, built_call(error, fields.clone()), stateless)).unwrap();
                assert_eq!(typed, built, "stateless {stateless}");
                assert!(!typed.contains("\\u0000sp") && !typed.contains("sp:text"), "{typed}");
            }
        }
    }
}

/// A method's result, typed or as the control thread's `Value`, is the message built by
/// hand; a stateless one keeps an `_meta` it has.
#[test]
fn method_results_are_stamped_once_in_both_writers() {
    let results = [json!({}), json!({"protocolVersion": "2025-11-25", "capabilities": {"tools": {}}}), json!({"_meta": {"x": 1}, "a": [1]})];
    for result in results {
        for id in [json!(1), json!("i\"d")] {
            for stateless in [false, true] {
                let built = serde_json::to_string(&built_response(&id, result.clone(), stateless)).unwrap();
                let typed = serde_json::to_string(&Response::new(id.clone(), Answer::Result(result.clone()), era(stateless))).unwrap();
                assert_eq!(typed, built);
                assert_eq!(serde_json::to_string(&era_response(id.clone(), result.clone(), era(stateless))).unwrap(), built);
            }
        }
    }
}

/// Errors: `{"error": {"code", "data"?, "message"}, "id", "jsonrpc"}`, `id` null when
/// unread, never stamped; each stage's error has its one code.
#[test]
fn errors_are_written_as_built_and_each_stage_maps_to_its_code() {
    use crate::mcp::session::Refusal;
    let cases = [
        (Refusal::MethodNotFound { method: "x/y".into() }, -32601, None),
        (Refusal::InvalidParams("bad".into()), -32602, None),
        (Refusal::NotInitialized { method: "tools/call".into() }, -32600, None),
        (Refusal::AlreadyInitialized, -32600, None),
        (
            Refusal::UnsupportedVersion { requested: "1999-01-01".into() },
            -32022,
            Some(json!({"supported": crate::mcp::session::ALL_VERSIONS, "requested": "1999-01-01"})),
        ),
        (Refusal::IdInFlight { id: crate::mcp::jsonrpc::Id::Int(7) }, -32600, Some(json!({"requestId": 7}))),
    ];
    for (refusal, code, data) in cases {
        let error = ErrorData::from(&refusal);
        assert_eq!(error, ErrorData { code: ErrorCode(code), message: refusal.to_string(), data: data.clone() });
        for id in [Value::Null, json!(3)] {
            let mut e = json!({"code": code, "message": refusal.to_string()});
            if let Some(d) = &data {
                e["data"] = d.clone();
            }
            let built = json!({"jsonrpc": "2.0", "id": id, "error": e});
            let typed = serde_json::to_string(&Response::error(id.clone(), error.clone())).unwrap();
            assert_eq!(typed, serde_json::to_string(&built).unwrap());
            // An error in a stateless answer is not stamped.
            let stateless = serde_json::to_string(&Response::new(id.clone(), Answer::Error(error.clone()), Era::Stateless)).unwrap();
            assert_eq!(stateless, typed);
        }
    }
    use crate::mcp::frame::FrameError;
    let frames = [
        (FrameError::TooLong { limit: 1 }, ErrorCode::INVALID_REQUEST),
        (FrameError::InvalidUtf8 { offset: 0 }, ErrorCode::PARSE_ERROR),
        (FrameError::Nul { offset: 0 }, ErrorCode::PARSE_ERROR),
        (FrameError::EofMidLine { len: 1 }, ErrorCode::PARSE_ERROR),
    ];
    for (e, code) in frames {
        assert_eq!(ErrorCode::from(&e), code, "{e:?}");
    }
    use crate::json::JsonError;
    assert_eq!(ErrorCode::from(&JsonError::TooLarge { limit: 1 }), ErrorCode::INVALID_REQUEST);
    assert_eq!(ErrorCode::from(&JsonError::TooDeep { limit: 1 }), ErrorCode::PARSE_ERROR);
    assert_eq!(ErrorCode::from(&crate::mcp::jsonrpc::ShapeError::Batch), ErrorCode::INVALID_REQUEST);
    assert_eq!(ErrorCode::INVALID_PARAMS.to_string(), "-32602");
}

/// A tool result as the server makes it: fields scrubbed by the Vault, withheld when
/// their JSON text alone spells a secret, then the typed answer as written.
fn answer(vault: &Vault, fields: Value) -> (bool, Value, String) {
    let r = ToolResult::ok(vault.scrub_fields(fields));
    let withheld = withholds(vault, &r);
    let r = if withheld { ToolResult::error(crate::gate::outcome::ToolCode::Upstream, Scrubbed::own(WITHHELD)) } else { r };
    let line = serde_json::to_string(&Response::new(json!(1), Answer::Call(r.into_call()), Era::Handshake)).unwrap();
    (withheld, serde_json::from_str(&line).unwrap(), line)
}

#[test]
fn scrubbed_fields_cover_numbers_and_keys_and_the_text_block_repeats_them() {
    let mut vault = Vault::new();
    vault.remember("pin", "31415926535");
    let (withheld, v, line) =
        answer(&vault, json!({"json": {"n": 31415926535u64, "s": "x&#51;1415926535"}, "headers": {"X-31415926535": "v"}, "status": 200}));
    assert!(!withheld);
    let sc = &v["result"]["structuredContent"];
    assert_eq!(sc["json"]["n"], "[REDACTED:pin]");
    assert_eq!(sc["json"]["s"], "x[REDACTED:pin]");
    assert!(sc["headers"].get("X-[REDACTED:pin]").is_some(), "{sc}");
    let text = v["result"]["content"][0]["text"].as_str().unwrap();
    assert_eq!(serde_json::from_str::<Value>(text).unwrap(), *sc);
    assert!(!line.contains("1415926535"), "{line}");
}

/// The result's own words are never scrubbed: a secret that spells a key,
/// a code or a field name of the envelope leaves it whole; outside text that holds it
/// is still redacted.
#[test]
fn a_short_secret_never_touches_the_envelope() {
    for secret in ["e", "\"", "t", "content", "text", "type", "isError", "structuredContent", "status", "SP_UPSTREAM", "200", "1", ":", "{"] {
        let mut vault = Vault::new();
        vault.remember_local("x", secret);
        let body = format!("a body that says {secret} twice: {secret}");
        let (_, v, line) = answer(&vault, json!({"status": 200, "body": body, "headers": {"content-type": "text/plain"}}));
        assert!(!line.contains("\\u0000") && !line.contains("sp:text"), "{secret:?}: {line}");
        let result = v["result"].as_object().unwrap();
        assert_eq!(result.keys().collect::<Vec<_>>(), ["content", "isError", "structuredContent"], "{secret:?}: {line}");
        let block = v["result"]["content"][0].as_object().unwrap();
        assert_eq!(block.keys().collect::<Vec<_>>(), ["text", "type"], "{secret:?}");
        assert_eq!(block["type"], "text", "{secret:?}");
        let sc = v["result"]["structuredContent"].as_object().unwrap();
        if v["result"]["isError"] == true {
            // Only JSON punctuation can make the escaped text spell a secret; then the
            // result is withheld, whole, in sp's own words.
            assert!(secret == "\"", "{secret:?} withheld: {line}");
            assert_eq!(sc["error"], json!({"code": "SP_UPSTREAM", "message": WITHHELD}));
            continue;
        }
        assert_eq!(sc.keys().collect::<Vec<_>>(), ["body", "headers", "status"], "{secret:?}: {line}");
        assert_eq!(sc["status"], 200, "{secret:?}");
        // Outside text over-redacts (a one-letter secret is in most words); that is
        // the safe side, and the reason short secrets are refused unless lowered.
        let scrubbed = vault.scrub_text(body.clone()).into_inner();
        assert!(scrubbed.ends_with("[REDACTED:x]") && !scrubbed.contains(&format!(" {secret}")), "{secret:?}: {scrubbed}");
        assert_eq!(sc["body"], scrubbed, "{secret:?}");
        let text = v["result"]["content"][0]["text"].as_str().unwrap();
        assert_eq!(serde_json::from_str::<Value>(text).unwrap(), v["result"]["structuredContent"], "{secret:?}");
    }
}

/// An upstream's result (`tools/upstream`): MCP's members, block keys and `type` stay;
/// what the upstream wrote is scrubbed, keys of its structured content included; it is
/// written as the upstream shaped it, stamped for 2026-07-28 only by sp's members.
#[test]
fn an_upstream_result_keeps_mcps_own_members() {
    let mut vault = Vault::new();
    vault.remember_local("x", "text");
    let r = json!({"content": [{"type": "text", "text": "the text"}], "structuredContent": {"text": "text!", "isError": 1}, "isError": false});
    let passed = crate::gate::withhold::scrub_upstream(&vault, r).unwrap();
    let want = json!({"content": [{"type": "text", "text": "the [REDACTED:x]"}], "structuredContent": {"[REDACTED:x]": "[REDACTED:x]!", "isError": 1}, "isError": false});
    assert_eq!(passed.get(), &want);
    let call = ToolResult::upstream(passed).into_call();
    let wire = |era| serde_json::to_value(Response::new(json!(1), Answer::Call(call.clone()), era)).unwrap()["result"].take();
    assert_eq!(wire(Era::Handshake), want);
    let mut stamped = want.clone();
    stamped["resultType"] = json!("complete");
    stamped["_meta"] = json!({crate::mcp::session::META_SERVER_INFO: crate::mcp::session::server_info()});
    assert_eq!(wire(Era::Stateless), stamped);
    vault.remember("q", r#"a\"b-31415"#);
    let r = json!({"content": [{"type": "text", "text": "a\"b-31415"}], "isError": false});
    assert_eq!(crate::gate::withhold::scrub_upstream(&vault, r), None);
}

/// A secret that only the JSON text spells (an escape inside one value)
/// withholds the result; far into a large result too (the windowed search).
#[test]
fn a_secret_only_the_json_text_spells_withholds_the_result() {
    let mut vault = Vault::new();
    vault.remember("odd", r#"k\"ey-31415"#);
    // The value holds `k"ey-31415`; its JSON text holds `k\"ey-31415`, the secret.
    for pad in [0, 3 * 1024 * 1024 + 17] {
        for fields in
            [json!({"body": format!("{}k\"ey-31415", "x".repeat(pad))}), json!({"json": {"a": [1, {format!("{}k\"ey-31415", "x".repeat(pad)): true}]}})]
        {
            let (withheld, v, line) = answer(&vault, fields);
            assert!(withheld && !line.contains(r#"k\"ey-31415"#), "pad {pad}: the secret survived");
            let sc = &v["result"]["structuredContent"];
            assert_eq!((v["result"]["isError"].as_bool(), sc["error"]["code"].as_str()), (Some(true), Some("SP_UPSTREAM")), "pad {pad}");
        }
    }
    let (withheld, v, _) = answer(&vault, json!({"body": "x\"".repeat(3 * 1024 * 1024)}));
    assert!(!withheld && v["result"]["isError"] == false);
    // An error message that quotes a peer is searched too.
    let r = ToolResult::error(crate::gate::outcome::ToolCode::Upstream, vault.scrub_text("peer: k\"ey-31415"));
    assert!(withholds(&vault, &r));
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
                let a = format!("{}\n", serde_json::to_string(&built).unwrap());
                let mut b = ProtocolWriter::new(Vec::new());
                b.send(&LIST.answer(id.clone(), era)).unwrap();
                assert_eq!(String::from_utf8(b.into_inner()).unwrap(), a, "{era:?} {id}");
            }
        }
    }
    // The two eras differ (the stateless one carries its caching hints and stamp).
    let result = |era| serde_json::to_value(LIST.answer(json!(1), era)).unwrap()["result"].take();
    assert_eq!(result(Era::Handshake), json!({"tools": odd_definitions()}));
    let stateless = result(Era::Stateless);
    assert_eq!(
        (&stateless["ttlMs"], &stateless["cacheScope"], &stateless["resultType"]),
        (&json!(crate::mcp::session::CACHE_TTL_MS), &json!("public"), &json!("complete"))
    );
}

/// sp's own messages (`outgoing.rs`) write exactly the JSON-RPC objects that were built
/// by hand before they were typed, and their `Value` form (the upstream client's) is the
/// same message.
#[test]
fn outgoing_messages_are_the_json_rpc_objects_they_replace() {
    use super::outgoing::reply_value;
    let cases: Vec<(String, Value)> = vec![
        (serde_json::to_string(&Notification::tools_list_changed()).unwrap(), json!({"jsonrpc": "2.0", "method": "notifications/tools/list_changed"})),
        (
            serde_json::to_string(&Notification::progress(json!("t"), 3u64.into(), None, Some("running for 3 s".into()))).unwrap(),
            json!({"jsonrpc": "2.0", "method": "notifications/progress", "params": {"progressToken": "t", "progress": 3, "message": "running for 3 s"}}),
        ),
        (
            serde_json::to_string(&Notification::progress(json!(7), serde_json::Number::from_f64(1.5).unwrap(), serde_json::Number::from_f64(4.0), None))
                .unwrap(),
            json!({"jsonrpc": "2.0", "method": "notifications/progress", "params": {"progressToken": 7, "progress": 1.5, "total": 4.0}}),
        ),
        (
            serde_json::to_string(&Notification::cancelled(json!("sp-1"), "approval timed out")).unwrap(),
            json!({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": "sp-1", "reason": "approval timed out"}}),
        ),
        (
            serde_json::to_string(&Outbound::Request(Request::elicitation(json!("sp-2"), json!({"message": "m"})))).unwrap(),
            json!({"jsonrpc": "2.0", "id": "sp-2", "method": "elicitation/create", "params": {"message": "m"}}),
        ),
    ];
    for (written, hand_built) in cases {
        assert_eq!(written, serde_json::to_string(&hand_built).unwrap());
    }
    assert_eq!(Notification::upstream("notifications/initialized", None).into_value(), json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
    assert_eq!(Request::upstream(4, "ping", json!({})).into_value(), json!({"jsonrpc": "2.0", "id": 4, "method": "ping", "params": {}}));
    assert_eq!(reply_value(json!(9), Ok(json!({}))), json!({"jsonrpc": "2.0", "id": 9, "result": {}}));
    assert_eq!(
        reply_value(json!("s"), Err(ErrorData::new(ErrorCode::METHOD_NOT_FOUND, "no"))),
        json!({"jsonrpc": "2.0", "id": "s", "error": {"code": -32601, "message": "no"}})
    );
    // The 2026-07-28 input_required answer: stamped, then its resultType set.
    let mut by_hand =
        era_response(json!(5), json!({"inputRequests": {"k": {"method": "elicitation/create", "params": {"p": 1}}}, "requestState": "st"}), Era::Stateless);
    by_hand["result"]["resultType"] = Value::from("input_required");
    let typed = Response::input_required(json!(5), "k", json!({"p": 1}), "st".into());
    assert_eq!(serde_json::to_string(&typed).unwrap(), serde_json::to_string(&by_hand).unwrap());
}
