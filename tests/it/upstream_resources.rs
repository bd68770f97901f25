//! Upstreams' resources, templates, prompts and completion relayed through the real
//! `sp mcp` binary (issue 33): the published server-everything (`make upstreams`) end to
//! end, and a hostile fixture of our own (`tests/support/upstreams/resources.py`).
//!
//! Attacks tried (all held):
//! - an upstream listing a URI that spells another upstream's namespace
//!   (`other+fx://...`): exposed as `evil+other+fx://...`, and reading it asks `evil`
//!   (for its own URI `other+fx://...`), never `other`;
//! - the agent naming another upstream's URI that its policy does not allow
//!   (`other+fx://secret/token`): -32002, nothing sent to `other`;
//! - a URI the policy denies, a URI with no upstream prefix, an unconfigured prefix:
//!   -32002, nothing sent;
//! - a read answered with a second content of a URI the policy does not relay: that
//!   content dropped;
//! - the upstream's secret in a text content, a prompt message and a completion value:
//!   scrubbed (the completion value dropped); in a blob's bytes: the read withheld;
//! - a 2 MiB blob: refused (-32603), not cut;
//! - `notifications/resources/updated` for a URI the policy does not relay, and
//!   `prompts/list_changed` from an upstream without prompts: not relayed;
//! - a prompt the policy does not relay (`evil_hidden`): -32602, never asked for;
//! - a policy without `resources`/`prompts`: nothing declared, the methods -32601.
#![allow(clippy::disallowed_methods, reason = "tests start sp and read their environment; the fence in clippy.toml is for src/")]

use crate::support;

use std::path::{Path, PathBuf};

use serde_json::{json, Value};

use support::process::{canary, Launch, Session, TempDir};

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn python() -> String {
    ["/usr/bin/python3", "/usr/local/bin/python3"].iter().find(|p| Path::new(p).exists()).map_or("python3".into(), |p| p.to_string())
}

fn fixture(name: &str, record: &str) -> Value {
    let script = root().join("tests/support/upstreams/resources.py").display().to_string();
    let write = Path::new(record).parent().unwrap().display().to_string();
    json!({"command": [python(), script, name], "env": {"RECORD": record, "SECRET": {"credential": "tok"}}, "sandbox": {"read": support::upstream_read_paths(), "write": [write]}, "tools": {"allow": ["*"]}, "pin": "off"})
}

fn request(id: i64, method: &str, params: Value) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params})
}

/// The notifications sp sends before it answers a ping that follows.
fn notes_before_ping(s: &mut Session, id: i64) -> Vec<Value> {
    s.send(&json!({"jsonrpc": "2.0", "id": id, "method": "ping"}));
    let mut notes = Vec::new();
    loop {
        let m = s.read();
        if m["id"] == id {
            return notes;
        }
        notes.push(m);
    }
}

/// A request's answer, past the notifications sp sends before it (server-everything
/// announces tools/list_changed after its start).
fn ask(s: &mut Session, msg: &Value) -> Value {
    s.send(msg);
    loop {
        let m = s.read();
        if m["id"] == msg["id"] {
            return m;
        }
        assert!(m.get("id").is_none(), "an answer to another id: {m}");
    }
}

fn recorded(path: &str) -> Vec<Value> {
    std::fs::read_to_string(path).unwrap_or_default().lines().map(|l| serde_json::from_str(l).unwrap()).collect()
}

fn reads_of(record: &[Value]) -> Vec<String> {
    record.iter().filter(|m| m["method"] == "resources/read").map(|m| m["params"]["uri"].as_str().unwrap().to_owned()).collect()
}

#[test]
fn hostile_resources_are_confined_to_their_upstream_and_scrubbed() {
    let dir = TempDir::new("upres");
    let secret = canary();
    let file = dir.file("token", secret.as_bytes(), 0o600);
    let (evil_rec, other_rec) = (dir.join("evil.rec"), dir.join("other.rec"));
    let mut evil = fixture("evil", &evil_rec);
    evil["resources"] = json!({"allow": ["*"], "deny": ["fx://denied/*"]});
    evil["prompts"] = json!({"allow": ["greet"]});
    let mut other = fixture("other", &other_rec);
    other["resources"] = json!({"allow": ["fx://ok/*"]});
    let policy = json!({
        "credentials": {"tok": {"source": {"file": file}, "inject": {"bearer": {}}, "hosts": ["unused.example"]}},
        "upstreams": {"evil": evil, "other": other},
        "audit": {"path": dir.join("audit.jsonl")}
    });
    let config = dir.file("policy.json", policy.to_string().as_bytes(), 0o600);
    let mut s = Session::start(Launch::mcp(&config, &[]));
    let init = s.ready("2025-06-18");
    assert_eq!(init["capabilities"]["resources"], json!({"listChanged": true}), "{init}");
    assert_eq!(init["capabilities"]["prompts"], json!({"listChanged": true}));
    assert_eq!(init["capabilities"]["completions"], json!({}));

    let list = s.call(&request(1, "resources/list", json!({})));
    let uris: Vec<&str> = list["result"]["resources"].as_array().unwrap().iter().map(|r| r["uri"].as_str().unwrap()).collect();
    assert_eq!(
        uris,
        [
            "evil+fx://ok/readme",
            "evil+fx://ok/dir",
            "evil+fx://secret/token",
            "evil+fx://blob/secret",
            "evil+fx://big/blob",
            "evil+other+fx://ok/readme",
            "other+fx://ok/readme",
            "other+fx://ok/dir"
        ]
    );
    let templates = s.call(&request(2, "resources/templates/list", json!({})));
    let t: Vec<&str> = templates["result"]["resourceTemplates"].as_array().unwrap().iter().map(|r| r["uriTemplate"].as_str().unwrap()).collect();
    assert_eq!(t, ["evil+fx://ok/{name}", "other+fx://ok/{name}"]);

    // The URI spelling `other`'s namespace is evil's own: asked of evil only.
    let crossed = s.call(&request(3, "resources/read", json!({"uri": "evil+other+fx://ok/readme"})));
    assert_eq!(crossed["result"]["contents"][0]["text"], "served by evil: other+fx://ok/readme", "{crossed}");
    assert_eq!(crossed["result"]["contents"][0]["uri"], "evil+other+fx://ok/readme");
    // What other's policy does not allow, what evil's denies, what names no upstream.
    for (id, uri) in
        [(4, "other+fx://secret/token"), (5, "evil+fx://denied/x"), (6, "fx://ok/readme"), (7, "nobody+fx://ok/readme"), (8, "evil+fx://denied/../ok/x")]
    {
        let refused = s.call(&request(id, "resources/read", json!({"uri": uri})));
        assert_eq!(refused["error"]["code"], -32002, "{uri}: {refused}");
        assert!(refused["error"]["message"].as_str().unwrap().starts_with("resource not found"), "{refused}");
    }
    let dir_read = s.call(&request(9, "resources/read", json!({"uri": "evil+fx://ok/dir"})));
    assert_eq!(dir_read["result"]["contents"].as_array().unwrap().len(), 1, "the denied content is dropped: {dir_read}");
    let token = s.call(&request(10, "resources/read", json!({"uri": "evil+fx://secret/token"})));
    assert_eq!(token["result"]["contents"][0]["text"], "token=[REDACTED:tok]", "{token}");
    let blob = s.call(&request(11, "resources/read", json!({"uri": "evil+fx://blob/secret"})));
    assert_eq!(blob["error"]["code"], -32603, "{blob}");
    assert!(blob["error"]["message"].as_str().unwrap().contains("withheld"), "{blob}");
    let big = s.call(&request(12, "resources/read", json!({"uri": "evil+fx://big/blob"})));
    assert_eq!(big["error"]["message"], "the upstream's answer is over 1048576 bytes: refused", "{big}");

    // Notifications: other's readme announces an update of an allowed and of a denied
    // URI, both list changes; other relays no prompts.
    let read = s.call(&request(13, "resources/read", json!({"uri": "other+fx://ok/readme"})));
    assert_eq!(read["result"]["contents"][0]["text"], "served by other: fx://ok/readme");
    let notes = notes_before_ping(&mut s, 14);
    let methods: Vec<(&str, &Value)> = notes.iter().map(|n| (n["method"].as_str().unwrap(), &n["params"]["uri"])).collect();
    assert_eq!(methods, [("notifications/resources/list_changed", &Value::Null), ("notifications/resources/updated", &json!("other+fx://ok/readme"))]);
    s.call(&request(15, "resources/read", json!({"uri": "evil+fx://ok/readme"})));
    let notes = notes_before_ping(&mut s, 16);
    assert!(notes.iter().any(|n| n["method"] == "notifications/prompts/list_changed"), "{notes:?}");
    assert!(!notes.iter().any(|n| n["params"]["uri"].as_str().is_some_and(|u| u.contains("denied"))), "{notes:?}");

    // Prompts and completion.
    let prompts = s.call(&request(17, "prompts/list", json!({})));
    assert_eq!(prompts["result"]["prompts"], json!([{"name": "evil_greet", "description": "says hello"}]));
    let got = s.call(&request(18, "prompts/get", json!({"name": "evil_greet", "arguments": {"who": "ann"}})));
    assert_eq!(got["result"]["messages"][0]["content"]["text"], "hello ann from evil, key [REDACTED:tok]", "{got}");
    assert_eq!(got["result"]["messages"][1]["content"]["uri"], "evil+fx://ok/readme");
    let hidden = s.call(&request(19, "prompts/get", json!({"name": "evil_hidden"})));
    assert_eq!(hidden["error"]["code"], -32602, "{hidden}");
    let done =
        s.call(&request(20, "completion/complete", json!({"ref": {"type": "ref/prompt", "name": "evil_greet"}, "argument": {"name": "who", "value": "a"}})));
    assert_eq!(done["result"]["completion"]["values"], json!(["a1", "a2"]), "{done}");
    let sub = s.call(&request(21, "resources/subscribe", json!({"uri": "evil+fx://ok/readme"})));
    assert_eq!(sub["error"]["code"], -32601);
    let run = s.finish();

    // Nothing of the secret left sp; each upstream was asked only for its own URIs.
    let stdout = String::from_utf8_lossy(&run.stdout).into_owned();
    assert!(!stdout.contains(&secret), "the secret reached stdout");
    assert_eq!(reads_of(&recorded(&other_rec)), ["fx://ok/readme"]);
    let evil_reads = reads_of(&recorded(&evil_rec));
    assert_eq!(evil_reads, ["other+fx://ok/readme", "fx://ok/dir", "fx://secret/token", "fx://blob/secret", "fx://big/blob", "fx://ok/readme"]);
    assert!(!recorded(&evil_rec).iter().any(|m| m["method"] == "prompts/get" && m["params"]["name"] == "hidden"));

    // Every read journaled: an intent and a result row for each asked, a reject row
    // for each refused.
    let journal: Vec<Value> = std::fs::read_to_string(dir.join("audit.jsonl")).unwrap().lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    let kinds = |kind: &str, tool: &str| journal.iter().filter(|r| r["kind"] == kind && r["tool"] == tool).count();
    assert_eq!((kinds("intent", "resources/read"), kinds("result", "resources/read"), kinds("reject", "resources/read")), (7, 7, 5));
    assert_eq!((kinds("intent", "prompts/get"), kinds("result", "prompts/get"), kinds("reject", "prompts/get")), (1, 1, 1));
    let withheld = journal.iter().find(|r| r["kind"] == "result" && r["target"] == "evil+fx://blob/secret").unwrap();
    assert_eq!((withheld["decision"].as_str(), withheld["code"].as_str()), (Some("error"), Some("SP_UPSTREAM")));
}

/// Without `resources` and `prompts` keys nothing is declared or relayed.
#[test]
fn nothing_is_relayed_without_the_policy_keys() {
    let dir = TempDir::new("upres0");
    let file = dir.file("token", canary().as_bytes(), 0o600);
    let rec = dir.join("plain.rec");
    let policy = json!({
        "credentials": {"tok": {"source": {"file": file}, "inject": {"bearer": {}}, "hosts": ["unused.example"]}},
        "upstreams": {"plain": fixture("plain", &rec)}
    });
    let config = dir.file("policy.json", policy.to_string().as_bytes(), 0o600);
    let mut s = Session::start(Launch::mcp(&config, &[]));
    let init = s.ready("2025-11-25");
    assert_eq!(init["capabilities"], json!({"tools": {"listChanged": true}}));
    for (id, method) in [(1, "resources/list"), (2, "resources/read"), (3, "prompts/list"), (4, "completion/complete")] {
        let r = s.call(&request(id, method, json!({"uri": "plain+fx://ok/readme"})));
        assert_eq!(r["error"]["code"], -32601, "{method}: {r}");
    }
    s.finish();
    assert!(reads_of(&recorded(&rec)).is_empty());
}

/// The published server-everything: its static documents, a template, a prompt with an
/// embedded resource, and completion, through the gate.
#[test]
fn server_everything_resources_prompts_and_completion_are_relayed() {
    let p = root().join("tests/upstreams/node_modules/@modelcontextprotocol/server-everything/dist/index.js");
    if !p.exists() {
        assert!(std::env::var_os("CI").is_none(), "{} is not installed under CI", p.display());
        eprintln!("SKIPPED: {} is not installed; run `make upstreams`", p.display());
        return;
    }
    let dir = TempDir::new("upresev");
    let everything = json!({
        "command": ["node", p.display().to_string(), "stdio"], "sandbox": {"read": support::upstream_read_paths()}, "pin": "off",
        "tools": {"allow": ["echo"]},
        "resources": {"allow": ["demo://resource/static/document/*", "demo://resource/dynamic/text/*"], "deny": ["demo://resource/static/document/architecture.md"]},
        "prompts": {"allow": ["simple-prompt", "completable-prompt", "resource-prompt"]}
    });
    let policy = json!({"upstreams": {"everything": everything}, "audit": {"path": dir.join("audit.jsonl")}});
    let config = dir.file("policy.json", policy.to_string().as_bytes(), 0o600);
    let mut s = Session::start(Launch::mcp(&config, &[]));
    s.ready("2025-11-25");
    let list = ask(&mut s, &request(1, "resources/list", json!({})));
    let uris: Vec<&str> = list["result"]["resources"].as_array().unwrap().iter().map(|r| r["uri"].as_str().unwrap()).collect();
    assert!(uris.contains(&"everything+demo://resource/static/document/features.md"), "{uris:?}");
    assert!(uris.iter().all(|u| u.starts_with("everything+demo://resource/static/document/") && !u.ends_with("architecture.md")), "{uris:?}");
    let read = ask(&mut s, &request(2, "resources/read", json!({"uri": "everything+demo://resource/static/document/features.md"})));
    assert!(read["result"]["contents"][0]["text"].as_str().unwrap().contains("Everything Server"), "{read}");
    let denied = ask(&mut s, &request(3, "resources/read", json!({"uri": "everything+demo://resource/static/document/architecture.md"})));
    assert_eq!(denied["error"]["code"], -32002);
    let templates = ask(&mut s, &request(4, "resources/templates/list", json!({})));
    assert_eq!(templates["result"]["resourceTemplates"][0]["uriTemplate"], "everything+demo://resource/dynamic/text/{resourceId}");
    let dynamic = ask(&mut s, &request(5, "resources/read", json!({"uri": "everything+demo://resource/dynamic/text/3"})));
    assert!(dynamic["result"]["contents"][0]["text"].as_str().unwrap().starts_with("Resource 3:"), "{dynamic}");
    let prompts = ask(&mut s, &request(6, "prompts/list", json!({})));
    let names: Vec<&str> = prompts["result"]["prompts"].as_array().unwrap().iter().map(|p| p["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["everything_simple-prompt", "everything_completable-prompt", "everything_resource-prompt"]);
    let got =
        ask(&mut s, &request(7, "prompts/get", json!({"name": "everything_resource-prompt", "arguments": {"resourceType": "Text", "resourceId": "2"}})));
    assert_eq!(got["result"]["messages"][1]["content"]["resource"]["uri"], "everything+demo://resource/dynamic/text/2", "{got}");
    let done = ask(
        &mut s,
        &request(
            8,
            "completion/complete",
            json!({"ref": {"type": "ref/prompt", "name": "everything_completable-prompt"}, "argument": {"name": "department", "value": "S"}}),
        ),
    );
    assert_eq!(done["result"]["completion"]["values"], json!(["Sales", "Support"]), "{done}");
    let done = ask(
        &mut s,
        &request(
            9,
            "completion/complete",
            json!({"ref": {"type": "ref/resource", "uri": "everything+demo://resource/dynamic/text/{resourceId}"}, "argument": {"name": "resourceId", "value": "1"}}),
        ),
    );
    assert!(done["result"]["completion"]["values"].is_array(), "{done}");
    s.finish();
}
