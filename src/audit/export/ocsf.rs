//! OCSF: each row as one event of class API Activity (`class_uid` 6003, category
//! Application Activity 6), OCSF 1.3.0, with the Security Control profile's
//! `action_id` and `disposition_id` on `intent` and `reject` rows. An agent's tool
//! call through `sp` is an API call (the tool is `api.operation`) that `sp` allowed or
//! denied; the table is in sp-audit(1), EXPORT.
//!
//! The class requires `actor`, `api`, `cloud` and `src_endpoint`: `actor` is `sp`
//! itself with the journal's session, `src_endpoint` the agent's session (sp cannot
//! know more of the agent: it is whatever started `sp mcp`), `cloud.provider` is
//! `"local"` (no cloud API is involved). The row as stored is `raw_data`, so the hash
//! chain can be checked from the SIEM; the fields no attribute takes are in `unmapped`.

use serde_json::{json, Map, Value};

use super::{level, outcome, text, Outcome};

const CLASS_UID: u64 = 6003;

/// Row fields an OCSF attribute takes; the others go to `unmapped`.
const MAPPED: [&str; 12] = ["seq", "ts", "session", "kind", "tool", "decision", "reason", "code", "request_fp", "status", "exit_status", "hash"];

/// `activity_id` and its name: from the HTTP method of an HTTP tool's target, else Other.
fn activity(fields: &Map<String, Value>) -> (u64, &'static str) {
    let tool = text(fields, "tool");
    if tool != "http_request" && tool != "http_get" {
        return (99, "Other");
    }
    match text(fields, "target").split(' ').next().unwrap_or_default() {
        "POST" => (1, "Create"),
        "GET" | "HEAD" | "OPTIONS" => (2, "Read"),
        "PUT" | "PATCH" => (3, "Update"),
        "DELETE" => (4, "Delete"),
        _ => (99, "Other"),
    }
}

/// The OCSF event for a row (`line`: the row as stored, for `raw_data`).
pub(super) fn event(line: &str, fields: &Map<String, Value>) -> Value {
    let (kind, decision) = (text(fields, "kind"), text(fields, "decision"));
    let (activity_id, activity_name) = activity(fields);
    let (severity_id, severity) = level(kind, decision).ocsf();
    let (status_id, status) = match outcome(kind, decision) {
        Outcome::Success => (1, "Success"),
        Outcome::Failure => (2, "Failure"),
        Outcome::Other => (99, "Other"),
    };
    let session = text(fields, "session");
    let mut ev = Map::new();
    let mut put = |k: &str, v: Value| {
        ev.insert(k.to_owned(), v);
    };
    put("class_uid", json!(CLASS_UID));
    put("class_name", json!("API Activity"));
    put("category_uid", json!(6));
    put("category_name", json!("Application Activity"));
    put("activity_id", json!(activity_id));
    put("activity_name", json!(activity_name));
    put("type_uid", json!(CLASS_UID * 100 + activity_id));
    put("type_name", json!(format!("API Activity: {activity_name}")));
    if let Some(ms) = fields.get("ts").and_then(Value::as_str).and_then(super::parse_rfc3339) {
        put("time", json!(ms));
    }
    put("severity_id", json!(severity_id));
    put("severity", json!(severity));
    put("status_id", json!(status_id));
    put("status", json!(if status_id == 99 { decision } else { status }));
    if let Some(code) = fields.get("code") {
        put("status_code", code.clone());
    }
    if let Some(reason) = fields.get("reason") {
        put("status_detail", reason.clone());
    }
    let target = text(fields, "target");
    let message = match (target.is_empty(), decision.is_empty()) {
        (true, _) => format!("{kind} {decision}").trim_end().to_owned(),
        (false, false) => format!("{kind} {decision}: {target}"),
        (false, true) => format!("{kind}: {target}"),
    };
    put("message", json!(message));
    if kind == "intent" || kind == "reject" {
        let allowed = kind == "intent";
        put("action_id", json!(if allowed { 1 } else { 2 }));
        put("action", json!(if allowed { "Allowed" } else { "Denied" }));
        put("disposition_id", json!(if allowed { 1 } else { 2 }));
        put("disposition", json!(if allowed { "Allowed" } else { "Blocked" }));
    }
    let mut metadata = json!({
        "version": "1.3.0",
        "product": {"name": "sp", "vendor_name": "Sallyport", "version": env!("CARGO_PKG_VERSION")},
        "profiles": ["security_control"],
        "log_name": "sallyport audit journal",
        "event_code": kind,
    });
    for (from, to) in [("hash", "uid"), ("seq", "sequence"), ("ts", "original_time"), ("session", "correlation_uid")] {
        if let Some(v) = fields.get(from) {
            metadata[to] = v.clone();
        }
    }
    put("metadata", metadata);
    put("actor", json!({"app_name": "sp", "session": {"uid": session}}));
    let operation = fields.get("tool").and_then(Value::as_str).unwrap_or(kind);
    let mut api = json!({"operation": operation, "service": {"name": "sp"}});
    if let Some(fp) = fields.get("request_fp") {
        api["request"] = json!({"uid": fp});
    }
    let mut response = Map::new();
    if let Some(code) = fields.get("status").or_else(|| fields.get("exit_status")) {
        response.insert("code".into(), code.clone());
    }
    if let Some(code) = fields.get("code") {
        response.insert("error".into(), code.clone());
    }
    if let (Some(reason), Outcome::Failure) = (fields.get("reason"), outcome(kind, decision)) {
        response.insert("error_message".into(), reason.clone());
    }
    if !response.is_empty() {
        api["response"] = Value::Object(response);
    }
    put("api", api);
    put("src_endpoint", json!({"name": "agent session", "uid": session}));
    put("cloud", json!({"provider": "local"}));
    let unmapped: Map<String, Value> = fields.iter().filter(|(k, _)| !MAPPED.contains(&k.as_str())).map(|(k, v)| (k.clone(), v.clone())).collect();
    if !unmapped.is_empty() {
        put("unmapped", Value::Object(unmapped));
    }
    put("raw_data", json!(line));
    Value::Object(ev)
}
