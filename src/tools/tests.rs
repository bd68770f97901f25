//! The tool table's tests: every kind reachable by name, the call-level checks, the
//! schemas against the parsers, and the HTTP rules through the table.

use super::*;
use serde_json::json;

fn call(v: Value) -> Result<CallRequest, CallError> {
    call_request(Some(v))
}

/// Every kind in the table is reachable by its name, from `tools/call` to an
/// authorized action of the same kind with the same name; `tools/list` offers
/// exactly the table's names, in its order; a name not in the table is refused at
/// both levels.
#[test]
fn every_kind_is_reachable_by_its_name_and_no_other_name_is() {
    let p = Policy::from_text(
        &json!({
            "http": {"allow": [{"hosts": ["api.example.com"], "methods": ["GET"]}]},
            "ssh": {"known_hosts": "/nonexistent/kh", "hosts": {"web1": {"address": "10.0.0.5", "user": "u", "auth": {"agent": true},
                    "files": {"read": ["/var/log/*"], "write": ["/srv/*"]}}}}
        })
        .to_string(),
        std::path::Path::new("t.json"),
    )
    .unwrap();
    let listed: Vec<Value> = definitions().as_array().unwrap().iter().map(|d| d["name"].clone()).collect();
    assert_eq!(listed, [json!("http_request"), json!("http_get"), json!("sp_inventory"), json!("ssh_exec"), json!("ssh_get"), json!("ssh_put")]);
    assert_eq!(NAMES, ["http_request", "http_get", "sp_inventory", "ssh_exec", "ssh_get", "ssh_put"]);
    let args = |name: &str| match name {
        "http_request" => json!({"method": "GET", "url": "https://api.example.com/x"}),
        "http_get" => json!({"url": "https://api.example.com/x"}),
        "ssh_exec" => json!({"host": "web1", "command": "uptime"}),
        "ssh_get" => json!({"host": "web1", "path": "/var/log/syslog"}),
        "ssh_put" => json!({"host": "web1", "path": "/srv/x", "content": "x"}),
        _ => json!({}),
    };
    for name in NAMES {
        let request = call(json!({"name": name, "arguments": args(name)})).unwrap();
        let typed = ToolCall::parse(&request).unwrap();
        let kind = std::mem::discriminant(&typed);
        let action = authorize(&p, typed).unwrap();
        assert_eq!(action.name(), *name);
        let again = ToolCall::parse(&request).unwrap();
        match (&again, &action) {
            (ToolCall::Http(_), Action::Http(_))
            | (ToolCall::HttpGet(_), Action::HttpGet(_))
            | (ToolCall::Inventory(()), Action::Inventory(_))
            | (ToolCall::Ssh(_), Action::Ssh(_))
            | (ToolCall::SshGet(_), Action::SshGet(_))
            | (ToolCall::SshPut(_), Action::SshPut(_)) => {}
            other => panic!("{name}: {other:?}"),
        }
        assert_eq!(std::mem::discriminant(&again), kind);
        assert!(is_tool(name));
    }
    for name in ["", "HTTP_REQUEST", "http_request ", "sp_inventory\0", "ssh", "upstream_x", "http.request"] {
        assert!(!is_tool(name), "{name:?}");
        assert_eq!(call(json!({"name": name})), Err(CallError::UnknownTool { name: name.into() }));
        let request = CallRequest { name: name.into(), arguments: Map::new(), progress_token: None, task: None };
        assert_eq!(ToolCall::parse(&request), Err(ArgError(format!("unknown tool {name:?}"))));
    }
}

/// Each kind's journal facts and approval question come from the table.
#[test]
fn audit_facts_and_targets_come_from_each_kind() {
    let p = table_policy();
    let request = call(json!({"name": "http_request", "arguments": {"method": "GET", "url": "https://api.example.com/v1/users?q=1"}})).unwrap();
    let typed = ToolCall::parse(&request).unwrap();
    assert_eq!(typed.target(), Some("GET https://api.example.com/v1/users".into()));
    let action = authorize(&p, typed).unwrap();
    assert_eq!(action.audit(), Audit { rule: Some("http.allow[0]".into()), credential: Some("api".into()) });
    assert_eq!(action.approval(&p), None);
    let inventory = authorize(&p, ToolCall::Inventory(())).unwrap();
    assert_eq!((inventory.audit(), inventory.approval(&p), inventory.name()), (Audit::default(), None, "sp_inventory"));
}

/// The approver sees that an SSH command runs under sudo (whose password) and through
/// which jump hosts, for a command and for a transfer; a plain command shows neither.
#[test]
fn the_ssh_approval_names_sudo_and_the_jump_hosts() {
    let v = json!({
        "credentials": {"pw": {"source": {"env": "SUDO_PW"}, "inject": {"bearer": {}}, "hosts": ["x.invalid"]}},
        "approval": {"command": ["/usr/local/bin/sp-approve"]},
        "ssh": {"known_hosts": "/etc/ssh/ssh_known_hosts", "hosts": {
            "outer": {"address": "10.0.0.1", "user": "u", "auth": {"agent": true}},
            "inner": {"address": "10.0.0.2", "user": "u", "auth": {"agent": true}, "via": "outer"},
            "web": {"address": "10.0.0.3", "user": "u", "auth": {"agent": true}, "via": "inner", "approve": true,
                    "sudo": {"password": {"credential": "pw"}, "commands": ["systemctl restart app"]},
                    "files": {"read": ["/var/log/*.log"]}}
        }}
    });
    let p = Policy::from_text(&v.to_string(), std::path::Path::new("test.json")).unwrap();
    let ask = |name: &str, args: Value| {
        let request = call(json!({"name": name, "arguments": args})).unwrap();
        authorize(&p, ToolCall::parse(&request).unwrap()).unwrap().approval(&p).expect("web asks")
    };
    let a = ask("ssh_exec", json!({"host": "web", "command": "systemctl restart app"}));
    assert_eq!((&a.request["sudo"], &a.request["via"]), (&json!({"credential": "pw"}), &json!(["inner", "outer"])), "{}", a.request);
    assert_eq!((&a.raw["sudo"], &a.raw["via"]), (&json!({"credential": "pw"}), &json!(["inner", "outer"])), "{}", a.raw);
    let a = ask("ssh_exec", json!({"host": "web", "command": "uptime"}));
    assert_eq!((a.request.get("sudo"), &a.request["via"]), (None, &json!(["inner", "outer"])), "not on the sudo list: {}", a.request);
    let a = ask("ssh_get", json!({"host": "web", "path": "/var/log/app.log"}));
    assert_eq!((a.request.get("sudo"), &a.request["via"]), (None, &json!(["inner", "outer"])), "{}", a.request);
}

fn table_policy() -> Policy {
    let v = json!({
        "credentials": {
            "api": {"source": {"env": "API"}, "inject": {"bearer": {}}, "hosts": ["api.example.com"], "paths": ["/v1/*"]},
            "keyed": {"source": {"env": "K"}, "inject": {"header": {"name": "X-Key"}}, "hosts": ["api.example.com"], "paths": ["/v2/*"]},
            "local": {"source": {"env": "L"}, "inject": {"bearer": {}}, "hosts": ["127.0.0.1:8080", "plain.example.com"]},
            "q": {"source": {"env": "Q"}, "inject": {"query": {"name": "api_key"}}, "hosts": ["q.example.net"]},
            "readonly": {"source": {"env": "R"}, "inject": {"basic": {}}, "hosts": ["ro.example.net"], "methods": ["GET"]}
        },
        "http": {"allow": [
            {"hosts": ["api.example.com"], "methods": ["GET", "POST"], "paths": ["/v1/*", "/v2/*", "/public"]},
            {"hosts": ["127.0.0.1:8080", "plain.example.com"], "methods": ["*"]},
            {"hosts": ["*.example.org"]},
            {"hosts": ["q.example.net", "ro.example.net"], "methods": ["*"]}
        ], "max_request_body_bytes": 64}
    });
    Policy::from_text(&v.to_string(), std::path::Path::new("test.json")).unwrap()
}

fn http(args: Value) -> Result<HttpAction, Denial> {
    let req = call_request(Some(json!({"name": "http_request", "arguments": args}))).unwrap();
    match authorize(&table_policy(), ToolCall::parse(&req).unwrap())? {
        Action::Http(a) => Ok(a.action().clone()),
        other => panic!("{other:?}"),
    }
}

fn cred(a: &HttpAction) -> Option<&str> {
    a.credential.as_ref().map(|c| c.name.as_str())
}

#[test]
fn http_allowed() {
    let a = http(json!({"method": "GET", "url": "https://api.example.com/v1/users"})).unwrap();
    assert_eq!((cred(&a), a.rule.as_str()), (Some("api"), "http.allow[0]"));
    let a = http(json!({"method": "GET", "url": "https://api.example.com/public"})).unwrap();
    assert_eq!(cred(&a), None);
    let a = http(json!({"method": "POST", "url": "https://api.example.com/v2/x", "credential": "keyed"})).unwrap();
    assert_eq!(cred(&a), Some("keyed"));
    let a = http(json!({"method": "DELETE", "url": "http://127.0.0.1:8080/x"})).unwrap();
    assert_eq!((cred(&a), a.rule.as_str()), (Some("local"), "http.allow[1]"));
    let a = http(json!({"method": "HEAD", "url": "https://x.example.org/"})).unwrap();
    assert_eq!((cred(&a), a.rule.as_str()), (None, "http.allow[2]"));
    let a = http(json!({"method": "GET", "url": "https://ro.example.net/x"})).unwrap();
    assert_eq!(cred(&a), Some("readonly"));
    // a credential limited to GET is not picked for POST: the request goes without it
    let a = http(json!({"method": "POST", "url": "https://ro.example.net/x", "body": "{}"})).unwrap();
    assert_eq!(cred(&a), None);
}

#[test]
fn http_denied() {
    use crate::policy::Method::{Delete, Get, Post};
    let no_rule = |method, host: &str, port, path: &str| HttpDenial::NoRule { method, host: host.into(), port, path: path.into() };
    let not_bound = |name: &str, host: &str, path: &str| HttpDenial::CredentialNotBound { name: name.into(), host: host.into(), path: path.into() };
    let cases = vec![
        (json!({"method": "DELETE", "url": "https://api.example.com/v1/users"}), no_rule(Delete, "api.example.com", 443, "/v1/users")),
        (json!({"method": "GET", "url": "https://api.example.com/v3"}), no_rule(Get, "api.example.com", 443, "/v3")),
        (json!({"method": "GET", "url": "https://api.example.com:8443/v1/x"}), no_rule(Get, "api.example.com", 8443, "/v1/x")),
        (json!({"method": "GET", "url": "https://evil.com/v1/x"}), no_rule(Get, "evil.com", 443, "/v1/x")),
        (json!({"method": "GET", "url": "https://example.org/"}), no_rule(Get, "example.org", 443, "/")),
        (json!({"method": "GET", "url": "https://api.example.com.evil.com/v1/"}), no_rule(Get, "api.example.com.evil.com", 443, "/v1/")),
        (json!({"method": "GET", "url": "https://api.example.com/v1/../admin"}), no_rule(Get, "api.example.com", 443, "/admin")),
        (json!({"method": "POST", "url": "http://127.0.0.1:8081/"}), no_rule(Post, "127.0.0.1", 8081, "/")),
        (json!({"method": "GET", "url": "https://api.example.com/public", "credential": "api"}), not_bound("api", "api.example.com", "/public")),
        (json!({"method": "GET", "url": "https://api.example.com/v1/x", "credential": "nope"}), HttpDenial::UnknownCredential { name: "nope".into() }),
        (json!({"method": "GET", "url": "http://plain.example.com/"}), HttpDenial::CredentialNeedsHttps { name: "local".into() }),
        (
            json!({"method": "GET", "url": "https://api.example.com/v2/x", "headers": {"x-key": "mine"}}),
            HttpDenial::HeaderConflict { name: "keyed".into(), header: "x-key".into() },
        ),
        (json!({"method": "GET", "url": "https://q.example.net/x?api_key=mine"}), HttpDenial::QueryConflict { name: "q".into(), param: "api_key".into() }),
        (
            json!({"method": "GET", "url": "https://q.example.net/x", "query": {"api_key": "mine"}}),
            HttpDenial::QueryConflict { name: "q".into(), param: "api_key".into() },
        ),
        (json!({"method": "POST", "url": "https://q.example.net/x", "body": "x".repeat(65)}), HttpDenial::BodyTooLarge { limit: 64 }),
        (json!({"method": "POST", "url": "https://ro.example.net/x", "credential": "readonly"}), not_bound("readonly", "ro.example.net", "/x")),
    ];
    for (args, want) in cases {
        let shown = args.to_string();
        let got = http(args).map(|a| a.rule).unwrap_err();
        assert_eq!((got.code(), got.reason()), (ToolCode::Denied, Reason::Denied), "{shown}");
        assert_eq!(got, Denial::Http(want), "{shown}");
    }
}

#[test]
fn https_only() {
    let mut p = table_policy();
    p.http.https_only = true;
    let req = call_request(Some(json!({"name": "http_request", "arguments": {"method": "DELETE", "url": "http://127.0.0.1:8080/x"}}))).unwrap();
    assert_eq!(authorize(&p, ToolCall::parse(&req).unwrap()).unwrap_err(), Denial::Http(HttpDenial::HttpsOnly));
}

#[test]
fn call_params() {
    assert_eq!(call_request(None), Err(CallError::ParamsNotObject { found: "nothing" }));
    assert_eq!(call_request(Some(json!("x"))), Err(CallError::ParamsNotObject { found: "a string" }));
    assert_eq!(call(json!({})), Err(CallError::MissingName));
    assert_eq!(call(json!({"name": 1})), Err(CallError::NameNotString));
    assert_eq!(call(json!({"name": "http_request", "arguments": []})), Err(CallError::ArgumentsNotObject { found: "an array" }));
    assert_eq!(call(json!({"name": "nope"})), Err(CallError::UnknownTool { name: "nope".into() }));
    // Unknown params members (task augmentation, future fields) are ignored.
    assert_eq!(call(json!({"name": "sp_inventory", "x": 1, "task": {"ttl": 1}})).unwrap().name, "sp_inventory");
    // Issue 33, section 4: `task` is read strictly (only `ttl`, a non-negative integer).
    assert_eq!(call(json!({"name": "sp_inventory", "task": {"ttl": 1}})).unwrap().task, Some(crate::tools::TaskAsk { ttl: Some(1) }));
    assert_eq!(call(json!({"name": "sp_inventory", "task": {}})).unwrap().task, Some(crate::tools::TaskAsk { ttl: None }));
    for bad in [json!({"ttl": -1}), json!({"ttl": 1.5}), json!({"x": 1}), json!("soon"), json!(null)] {
        assert_eq!(call(json!({"name": "sp_inventory", "task": bad})), Err(CallError::BadTask), "{bad}");
    }
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

/// Each tool's `inputSchema` and its argument parser agree. Every schema
/// property is known to the parser (and the parser knows no other: the list its
/// "unknown argument" message gives is the schema's); every required one is required;
/// the optional ones are optional; enums, string lengths, integer bounds and
/// `maxProperties` are where the parser puts them. A property added to one side only,
/// or a bound changed on one side only, fails here.
#[test]
fn each_tools_input_schema_and_parser_agree() {
    let parse = |tool: &str, args: &Map<String, Value>| {
        ToolCall::parse(&CallRequest { name: tool.into(), arguments: args.clone(), progress_token: None, task: None }).map(drop).map_err(|e| e.0)
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
            ("http_get", "method") => json!("HEAD"),
            ("http_get", "url") => json!("https://api.example.com/x"),
            ("http_get", "headers") => json!({"x-a": "1"}),
            ("http_get", "query") => json!({"q": "1"}),
            ("http_get", "credential") => json!("api"),
            ("ssh_exec", "host") => json!("web1"),
            ("ssh_exec", "command") => json!("uptime"),
            ("ssh_exec", "timeout_s") => json!(5),
            ("ssh_exec", "stdin") => json!("x"),
            ("ssh_get" | "ssh_put", "host") => json!("web1"),
            ("ssh_get" | "ssh_put", "path") => json!("/srv/x"),
            ("ssh_put", "content") => json!("aGk="),
            ("ssh_put", "encoding") => json!("base64"),
            ("ssh_put", "overwrite") => json!(true),
            other => panic!("no sample for {other:?}: add one"),
        }
    };
    let tools = definitions();
    assert_eq!(tools.as_array().unwrap().len(), 6);
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

/// Issue 32, section 1: `tools/list` names only what the policy makes possible. `{}`
/// lists `sp_inventory` alone; an SSH host adds `ssh_exec`; a POST-only rule adds
/// `http_request` but not `http_get`; a GET rule adds both. The list served (`list_for`)
/// and the fixed part of the live one (`definitions_for`) agree, and a call of a tool
/// the list leaves out is still parsed and refused by the policy (never unknown, never
/// run).
#[test]
fn the_list_names_only_what_the_policy_makes_possible() {
    let ssh = json!({"known_hosts": "/nonexistent/kh", "hosts": {"web1": {"address": "10.0.0.5", "user": "u", "auth": {"agent": true}}}});
    let post = json!({"allow": [{"hosts": ["api.example.com"], "methods": ["POST"]}]});
    let get = json!({"allow": [{"hosts": ["api.example.com"], "methods": ["GET"]}]});
    let cases = [
        (json!({}), vec!["sp_inventory"]),
        (json!({"ssh": ssh}), vec!["sp_inventory", "ssh_exec"]),
        (json!({"http": post}), vec!["http_request", "sp_inventory"]),
        (json!({"http": get}), vec!["http_request", "http_get", "sp_inventory"]),
        (json!({"http": get, "ssh": ssh}), vec!["http_request", "http_get", "sp_inventory", "ssh_exec"]),
    ];
    let names = |v: &Value| -> Vec<String> { v.as_array().unwrap().iter().map(|d| d["name"].as_str().unwrap().to_owned()).collect() };
    for (policy, want) in cases {
        let p = Policy::from_text(&policy.to_string(), std::path::Path::new("t.json")).unwrap();
        let served = list_for(&p).result(crate::mcp::session::Era::Handshake);
        assert_eq!(names(&served["tools"]), want, "{policy}");
        assert_eq!(names(&definitions_for(&p)), want, "{policy}");
    }
    // `{}`: the unlisted tools are still known, and refused by the policy.
    let p = Policy::from_text("{}", std::path::Path::new("t.json")).unwrap();
    for (name, args) in [
        ("ssh_exec", json!({"host": "web1", "command": "uptime"})),
        ("http_request", json!({"method": "POST", "url": "https://api.example.com/x"})),
        ("http_get", json!({"url": "https://api.example.com/x"})),
    ] {
        let request = call_request_in(&p, Some(json!({"name": name, "arguments": args}))).unwrap();
        let denial = authorize(&p, ToolCall::parse(&request).unwrap()).unwrap_err();
        assert_eq!(denial.code(), ToolCode::Denied, "{name}: {denial}");
    }
}
