//! Stage 5: `tools/call` params -> a typed tool call, or the reason it is refused.
//!
//! Two levels of refusal (MCP 2025-11-25, "Tools: error handling"):
//! - the call itself is malformed (params not an object, `name` missing or not a string,
//!   `arguments` not an object, an unknown tool): a JSON-RPC error -32602, [`CallError`];
//! - a known tool's arguments fail their checks: a tool result with `isError: true` and
//!   code `SP_BAD_ARGUMENTS`, [`ArgError`], so the model can read the reason and retry.
//!
//! Both keep the session open and nothing is executed. Checks are hand-written, every
//! unknown argument is refused, and nothing here touches the network: a URL is parsed
//! and normalised, never resolved.

pub(crate) mod http;
pub(crate) mod ssh;
#[allow(dead_code, reason = "wired into the tool table in the next step of upstream support")]
pub(crate) mod upstream;

use std::fmt;

use serde_json::{json, Map, Value};

use crate::mcp::jsonrpc::kind_of;

pub(crate) use crate::tools::http::args::HTTP_REQUEST;
pub(crate) const INVENTORY: &str = "sp_inventory";

/// The tools offered by `tools/list`.
pub(crate) fn definitions() -> Value {
    json!([
        crate::tools::http::args::definition(),
        {
            "name": INVENTORY,
            "title": "What this gateway allows",
            "description": "List what the operator allows: HTTP destinations (hosts, methods, paths) and credential names with the hosts, paths and (when limited) methods they are bound to, and SSH host names with their users and allowed commands (null = any). Never returns a secret.",
            "inputSchema": {"type": "object", "properties": {}, "additionalProperties": false},
            "annotations": {"readOnlyHint": true, "openWorldHint": false}
        },
        crate::tools::ssh::args::definition()
    ])
}

/// A `tools/call` request that passed the JSON-RPC level checks.
#[derive(Debug, PartialEq)]
pub struct CallRequest {
    pub name: String,
    pub arguments: Map<String, Value>,
    /// `_meta.progressToken` (a string or an integer), if the client wants progress.
    pub progress_token: Option<Value>,
}

#[derive(Debug, PartialEq, Eq)]
pub enum CallError {
    ParamsNotObject { found: &'static str },
    MissingName,
    NameNotString,
    ArgumentsNotObject { found: &'static str },
    BadMeta,
    UnknownTool { name: String },
}

impl fmt::Display for CallError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CallError::ParamsNotObject { found } => write!(f, "tools/call params must be an object, found {found}"),
            CallError::MissingName => f.write_str("tools/call params need a \"name\""),
            CallError::NameNotString => f.write_str("tools/call \"name\" must be a string"),
            CallError::ArgumentsNotObject { found } => write!(f, "tools/call \"arguments\" must be an object, found {found}"),
            CallError::BadMeta => {
                f.write_str("tools/call \"_meta\" must be an object whose progressToken, if any, is a string or an integer")
            }
            CallError::UnknownTool { name } => write!(f, "unknown tool {:?}", short(name)),
        }
    }
}

/// Echoed names are cut short: a message must never carry a large agent-chosen payload.
fn short(s: &str) -> String {
    crate::sys::short(s, 64, crate::sys::Ellipsis::Marked)
}

pub fn call_request(params: Option<Value>) -> Result<CallRequest, CallError> {
    let mut map = match params {
        Some(Value::Object(m)) => m,
        Some(other) => return Err(CallError::ParamsNotObject { found: kind_of(&other) }),
        None => return Err(CallError::ParamsNotObject { found: "nothing" }),
    };
    // Issue #10: other members (2025-11-25 `task` augmentation, future fields) are
    // ignored, as the schemas allow; `sp` declares no tasks, so such a call runs as an
    // ordinary one. The tool's `arguments` stay strict (ToolCall::parse).
    let name = match map.remove("name") {
        None => return Err(CallError::MissingName),
        Some(Value::String(s)) => s,
        Some(_) => return Err(CallError::NameNotString),
    };
    let arguments = match map.remove("arguments") {
        None => Map::new(),
        Some(Value::Object(a)) => a,
        Some(other) => return Err(CallError::ArgumentsNotObject { found: kind_of(&other) }),
    };
    // MCP "Progress": the token is a string or an integer; other `_meta` members are
    // the client's business and ignored.
    let progress_token = match map.remove("_meta") {
        None => None,
        Some(Value::Object(meta)) => match meta.get("progressToken") {
            None => None,
            Some(t @ Value::String(_)) => Some(t.clone()),
            Some(Value::Number(n)) if n.is_i64() || n.is_u64() => Some(Value::Number(n.clone())),
            Some(_) => return Err(CallError::BadMeta),
        },
        Some(_) => return Err(CallError::BadMeta),
    };
    if name != HTTP_REQUEST && name != INVENTORY && name != crate::tools::ssh::SSH_EXEC {
        return Err(CallError::UnknownTool { name });
    }
    Ok(CallRequest { name, arguments, progress_token })
}

/// A fully typed tool call. Only `parse` builds one.
#[derive(Debug, Clone, PartialEq)]
#[allow(clippy::large_enum_variant, reason = "one per request, never stored in bulk")]
pub enum ToolCall {
    Http(crate::tools::http::args::HttpRequest),
    Inventory,
    /// `ssh_exec` (issue #4, `ssh/args.rs`).
    Ssh(crate::tools::ssh::SshExec),
}

pub(crate) use crate::mcp::model::ArgError;

/// The `tools/list` result (the loop and the control thread both answer it).
pub(crate) fn tool_list(era: crate::mcp::session::Era) -> Value {
    let mut list = json!({"tools": definitions()});
    if era == crate::mcp::session::Era::Stateless {
        // 2026-07-28 "Caching": tools/list carries its caching hints.
        list["ttlMs"] = json!(crate::mcp::session::CACHE_TTL_MS);
        list["cacheScope"] = json!("public");
    }
    list
}

/// The `tools/list` answer to request `id` in `era`, written with its result serialised
/// once per process (issue #12: the definitions are fixed, and building and escaping
/// their 10 KB again for every request was most of a `tools/list`: 46 µs in the static
/// build against a 7 µs ping). Serialises exactly as the answer built from [`tool_list`],
/// stamped for 2026-07-28 (`wire::stamp_stateless`); a test holds the two equal.
pub(crate) struct ListAnswer {
    pub id: Value,
    pub era: crate::mcp::session::Era,
}

impl ListAnswer {
    /// The result as JSON text, made at the first request of each era.
    fn result(era: crate::mcp::session::Era) -> Option<&'static serde_json::value::RawValue> {
        use std::sync::OnceLock;
        static HANDSHAKE: OnceLock<Option<Box<serde_json::value::RawValue>>> = OnceLock::new();
        static STATELESS: OnceLock<Option<Box<serde_json::value::RawValue>>> = OnceLock::new();
        let cell = if era == crate::mcp::session::Era::Stateless { &STATELESS } else { &HANDSHAKE };
        cell.get_or_init(|| serde_json::value::to_raw_value(&Self::built(era)).ok()).as_deref()
    }

    /// The result built as a `Value`: the list, stamped for 2026-07-28.
    fn built(era: crate::mcp::session::Era) -> Value {
        crate::mcp::model::era_response(Value::Null, tool_list(era), era)["result"].take()
    }
}

impl serde::Serialize for ListAnswer {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        let mut m = s.serialize_map(Some(3))?;
        // Keys in the order a `Value`'s map writes them (sorted).
        m.serialize_entry("id", &self.id)?;
        m.serialize_entry("jsonrpc", "2.0")?;
        match Self::result(self.era) {
            Some(raw) => m.serialize_entry("result", raw)?,
            // Cannot happen (a `Value` always serialises); then built as before.
            None => m.serialize_entry("result", &Self::built(self.era))?,
        }
        m.end()
    }
}

impl ToolCall {
    pub fn parse(call: &CallRequest) -> Result<ToolCall, ArgError> {
        match call.name.as_str() {
            HTTP_REQUEST => crate::tools::http::args::parse(&call.arguments).map(ToolCall::Http),
            crate::tools::ssh::SSH_EXEC => crate::tools::ssh::args::parse(&call.arguments).map(ToolCall::Ssh),
            INVENTORY => match call.arguments.keys().next() {
                None => Ok(ToolCall::Inventory),
                Some(k) => crate::mcp::model::bad(format!("unknown argument {:?}: sp_inventory takes none", short(k))),
            },
            // call_request admits only known names.
            other => crate::mcp::model::bad(format!("unknown tool {:?}", short(other))),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn call(v: Value) -> Result<CallRequest, CallError> {
        call_request(Some(v))
    }

    #[test]
    fn the_cached_tools_list_answer_is_byte_for_byte_the_built_one_in_both_eras() {
        use crate::mcp::out::ProtocolWriter;
        use crate::mcp::session::Era;
        let ids = [json!(0), json!(-7), json!(i64::MAX), json!("list"), json!("q\"uo\\te\u{1}\u{202e}\u{1F600}"), json!("")];
        for era in [Era::Handshake, Era::Stateless] {
            for id in &ids {
                // Twice: the first answer makes the cache, the second reads it.
                for _ in 0..2 {
                    let built = crate::mcp::model::era_response(id.clone(), tool_list(era), era);
                    let mut a = ProtocolWriter::new(Vec::new());
                    a.send(&built).unwrap();
                    let mut b = ProtocolWriter::new(Vec::new());
                    b.send_typed(&ListAnswer { id: id.clone(), era }).unwrap();
                    assert_eq!(String::from_utf8(b.into_inner()).unwrap(), String::from_utf8(a.into_inner()).unwrap(), "{era:?} {id}");
                }
            }
        }
        // The two eras differ (the stateless one carries its caching hints and stamp).
        let text = |era| serde_json::to_string(&ListAnswer { id: json!(1), era }).unwrap();
        assert!(text(Era::Stateless).contains("\"ttlMs\"") && !text(Era::Handshake).contains("\"ttlMs\""));
    }

    #[test]
    fn call_params() {
        assert_eq!(call_request(None), Err(CallError::ParamsNotObject { found: "nothing" }));
        assert_eq!(call_request(Some(json!("x"))), Err(CallError::ParamsNotObject { found: "a string" }));
        assert_eq!(call(json!({})), Err(CallError::MissingName));
        assert_eq!(call(json!({"name": 1})), Err(CallError::NameNotString));
        assert_eq!(
            call(json!({"name": "http_request", "arguments": []})),
            Err(CallError::ArgumentsNotObject { found: "an array" })
        );
        assert_eq!(call(json!({"name": "nope"})), Err(CallError::UnknownTool { name: "nope".into() }));
        // Issue #10: unknown params members (task augmentation, future fields) are ignored.
        assert_eq!(call(json!({"name": "sp_inventory", "x": 1, "task": {"ttl": 1}})).unwrap().name, "sp_inventory");
        assert_eq!(call(json!({"name": "sp_inventory", "_meta": {"progressToken": 1}})).unwrap().progress_token, Some(json!(1)));
        assert_eq!(call(json!({"name": "sp_inventory", "_meta": {"progressToken": "t"}})).unwrap().progress_token, Some(json!("t")));
        assert_eq!(call(json!({"name": "sp_inventory", "_meta": {"other": 1}})).unwrap().progress_token, None);
        for meta in [json!("x"), json!({"progressToken": 1.5}), json!({"progressToken": null}), json!({"progressToken": {}})] {
            assert_eq!(call(json!({"name": "sp_inventory", "_meta": meta})), Err(CallError::BadMeta));
        }
    }

    #[test]
    fn schemas_are_closed_objects() {
        for tool in definitions().as_array().unwrap() {
            assert_eq!(tool["inputSchema"]["type"], "object");
            assert_eq!(tool["inputSchema"]["additionalProperties"], false);
        }
    }

    /// Issue #9: each tool's `inputSchema` and its argument parser agree. Every schema
    /// property is known to the parser (and the parser knows no other: the list its
    /// "unknown argument" message gives is the schema's); every required one is required;
    /// the optional ones are optional; enums, string lengths, integer bounds and
    /// `maxProperties` are where the parser puts them. A property added to one side only,
    /// or a bound changed on one side only, fails here.
    #[test]
    fn each_tools_input_schema_and_parser_agree() {
        let parse = |tool: &str, args: &Map<String, Value>| {
            ToolCall::parse(&CallRequest { name: tool.into(), arguments: args.clone(), progress_token: None }).map(drop).map_err(|e| e.0)
        };
        // A valid value for every property of every tool (a new property needs one here).
        let sample = |tool: &str, prop: &str| -> Value {
            match (tool, prop) {
                ("http_request", "method") => json!("POST"),
                ("http_request", "url") => json!("https://api.example.com/x"),
                ("http_request", "headers") => json!({"x-a": "1"}),
                ("http_request", "query") => json!({"q": "1"}),
                ("http_request", "body") => json!("{}"),
                ("http_request", "credential") => json!("api"),
                ("ssh_exec", "host") => json!("web1"),
                ("ssh_exec", "command") => json!("uptime"),
                ("ssh_exec", "timeout_s") => json!(5),
                ("ssh_exec", "stdin") => json!("x"),
                other => panic!("no sample for {other:?}: add one"),
            }
        };
        let tools = definitions();
        assert_eq!(tools.as_array().unwrap().len(), 3);
        for tool in tools.as_array().unwrap() {
            let name = tool["name"].as_str().unwrap();
            let schema = &tool["inputSchema"];
            let props = schema["properties"].as_object().unwrap();
            let required: Vec<&str> = schema["required"].as_array().map(|r| r.iter().map(|v| v.as_str().unwrap()).collect()).unwrap_or_default();
            let full: Map<String, Value> = props.keys().map(|k| (k.clone(), sample(name, k))).collect();
            assert_eq!(parse(name, &full), Ok(()), "{name}: every schema property at once");
            for k in props.keys() {
                let mut less = full.clone();
                less.remove(k);
                let got = parse(name, &less);
                if required.contains(&k.as_str()) {
                    assert!(got.as_ref().is_err_and(|m| m.contains(&format!("\"{k}\""))), "{name}: {k} is required: {got:?}");
                } else {
                    assert_eq!(got, Ok(()), "{name}: {k} is optional");
                }
            }
            let mut extra = full.clone();
            extra.insert("not_in_schema".into(), json!("x"));
            let got = parse(name, &extra).unwrap_err();
            assert!(got.contains("unknown argument \"not_in_schema\""), "{name}: {got}");
            if let Some(list) = got.split(" takes: ").nth(1) {
                let mut listed: Vec<&str> = list.trim_end_matches(')').split(", ").collect();
                let mut ours: Vec<&str> = props.keys().map(String::as_str).collect();
                listed.sort_unstable();
                ours.sort_unstable();
                assert_eq!(listed, ours, "{name}: the parser's list is the schema's");
            } else {
                assert!(props.is_empty() && got.contains("takes none"), "{name}: {got}");
            }
            for (k, p) in props {
                let with = |v: Value| {
                    let mut a = full.clone();
                    a.insert(k.clone(), v);
                    parse(name, &a)
                };
                if let Some(values) = p["enum"].as_array() {
                    for v in values {
                        let v = if k == "method" && matches!(v.as_str(), Some("GET" | "HEAD")) { (v.clone(), true) } else { (v.clone(), false) };
                        // GET and HEAD take no body: check them without one.
                        let got = if v.1 {
                            let mut a = full.clone();
                            a.remove("body");
                            a.insert(k.clone(), v.0.clone());
                            parse(name, &a)
                        } else {
                            with(v.0.clone())
                        };
                        assert_eq!(got, Ok(()), "{name}.{k} = {}", v.0);
                    }
                    assert!(with(json!("NOT-IN-ENUM")).is_err(), "{name}.{k}: outside the enum");
                }
                if let Some(max) = p["maxLength"].as_u64() {
                    // The URL's limit holds with its `query` appended: test it alone.
                    let with_len = |n: usize| {
                        let mut a = full.clone();
                        let v = match k.as_str() {
                            "url" => {
                                a.remove("query");
                                format!("https://api.example.com/{}", "x".repeat(n - 24))
                            }
                            _ => "x".repeat(n),
                        };
                        a.insert(k.clone(), json!(v));
                        parse(name, &a)
                    };
                    assert_eq!(with_len(max as usize), Ok(()), "{name}.{k}: maxLength {max} is allowed");
                    assert!(with_len(max as usize + 1).is_err(), "{name}.{k}: one over maxLength {max}");
                }
                if let (Some(min), Some(max)) = (p["minimum"].as_i64(), p["maximum"].as_i64()) {
                    assert_eq!((with(json!(min)), with(json!(max))), (Ok(()), Ok(())), "{name}.{k}: bounds {min}..={max}");
                    assert!(with(json!(min - 1)).is_err() && with(json!(max + 1)).is_err(), "{name}.{k}: outside {min}..={max}");
                }
                if let Some(max) = p["maxProperties"].as_u64() {
                    let map = |n: u64| Value::Object((0..n).map(|i| (format!("x-k{i}"), json!("v"))).collect());
                    assert_eq!(with(map(max)), Ok(()), "{name}.{k}: maxProperties {max}");
                    assert!(with(map(max + 1)).is_err(), "{name}.{k}: one over maxProperties {max}");
                }
            }
        }
    }
}
