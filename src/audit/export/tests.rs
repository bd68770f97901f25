//! The export forms: timestamps, the severity table, and each form's escaping against
//! text chosen to break it.
//!
//! Attacks tried (all held): a target with `|` and `\` to shift CEF header fields; a
//! reason with ` act=allow` and `=` to forge a CEF extension key; CR/LF in a reason to
//! start a second CEF line or a second NDJSON/OCSF event; ESC and U+202E (bidi
//! override) to drive or reorder a terminal; a row field named like a CEF key.

use serde_json::{json, Map, Value};

use super::*;

fn row(v: Value) -> Map<String, Value> {
    match v {
        Value::Object(m) => m,
        _ => unreachable!(),
    }
}

#[test]
fn rfc3339_parses_to_milliseconds() {
    assert_eq!(parse_rfc3339("1970-01-01T00:00:00Z"), Some(0));
    assert_eq!(parse_rfc3339("2026-12-02T14:22:36.898Z"), Some(1_796_221_356_898));
    assert_eq!(parse_rfc3339("2026-12-02t15:22:36.8987654+01:00"), Some(1_796_221_356_898));
    assert_eq!(parse_rfc3339("2026-12-02T09:22:36.8-05:00"), Some(1_796_221_356_800));
    assert_eq!(parse_rfc3339("2024-02-29T00:00:00z"), Some(1_709_164_800_000));
    // agrees with the writer's own clock format over a few dates
    for secs in [0u64, 951_782_400, 1_709_164_799, 4_102_444_800] {
        let t = std::time::UNIX_EPOCH + std::time::Duration::from_millis(secs * 1000 + 123);
        assert_eq!(parse_rfc3339(&crate::audit::rfc3339(t)), Some(secs as i64 * 1000 + 123));
    }
    for bad in [
        "",
        "2026-12-02",
        "2026-12-02T14:22:36",
        "2026-12-02T14:22:36.Z",
        "2026-13-02T14:22:36Z",
        "2025-02-29T14:22:36Z",
        "2026-12-02T24:00:00Z",
        "2026-12-02 14:22:36Z",
        "2026-12-02T14:22:36+0100",
        "2026-12-02T14:22:36Zjunk",
        "+026-12-02T14:22:36Z",
    ] {
        assert_eq!(parse_rfc3339(bad), None, "{bad:?}");
    }
}

#[test]
fn severity_and_outcome_follow_kind_and_decision() {
    assert_eq!(level("intent", "allow"), Level::Informational);
    assert_eq!(level("result", "ok"), Level::Informational);
    assert_eq!(level("result", "cancelled"), Level::Informational);
    assert_eq!(level("reject", "denied"), Level::Low);
    assert_eq!(level("approval", "refused"), Level::Low);
    assert_eq!(level("approval", "granted"), Level::Informational);
    assert_eq!(level("result", "error"), Level::Medium);
    assert_eq!(level("token", "error"), Level::Medium);
    assert_eq!(level("reject", "audit_unavailable"), Level::High);
    assert_eq!(level("grant", "forged"), Level::High);
    assert_eq!((Level::High.cef(), Level::High.ocsf(), Level::High.otlp()), (8, (4, "High"), (17, "ERROR")));
    assert_eq!(outcome("reject", "denied"), Outcome::Failure);
    assert_eq!(outcome("result", "ok"), Outcome::Success);
    assert_eq!(outcome("approval", "timeout"), Outcome::Failure);
    assert_eq!(outcome("start", "enforce"), Outcome::Other);
}

#[test]
fn cef_header_and_extension_escapes_follow_the_spec() {
    assert_eq!(cef::header("a|b\\c\nd=e"), "a\\|b\\\\c d=e");
    assert_eq!(cef::value("a|b\\c\nd=e\rf"), "a|b\\\\c\\nd\\=e\\rf");
    assert_eq!(cef::value("x\u{1b}[2J\u{202e}y"), "x\\\\u{1b}[2J\\\\u{202e}y");
}

#[test]
fn a_cef_line_is_one_event_whatever_the_text() {
    let r = row(json!({
        "seq": 7, "ts": "2026-12-02T14:22:36.898Z", "session": "4e3d1843a0c2f1b9", "kind": "reject",
        "tool": "http_request", "target": "DELETE http://h/a|b\\", "decision": "denied",
        "reason": "no rule act=allow\nCEF:0|Evil|x|1|y|z|10|", "code": "SP_DENIED", "host_key_fp": "SHA256:x=",
        "prev": "0".repeat(64), "hash": "a".repeat(64),
    }));
    let line = render(Format::Cef, "", &r);
    assert!(!line.contains('\n') && !line.contains('\r'), "{line}");
    assert!(line.starts_with(&format!("CEF:0|Sallyport|sp|{}|reject:denied|reject denied|3|", env!("CARGO_PKG_VERSION"))), "{line}");
    assert!(line.contains(" cs1Label=target cs1=DELETE http://h/a|b\\\\ "), "{line}");
    assert!(line.contains(" reason=no rule act\\=allow\\nCEF:0|Evil|x|1|y|z|10| outcome=SP_DENIED"), "{line}");
    assert!(line.contains("rt=1796221356898 externalId=7 cat=reject act=denied "), "{line}");
    assert!(line.ends_with(" spHostKeyFp=SHA256:x\\="), "{line}");
    // Only sp's keys: every unescaped '=' follows a key sp wrote.
    let ext = line.splitn(8, '|').nth(7).unwrap();
    let unescaped = ext.match_indices('=').filter(|(i, _)| !ext[..*i].ends_with('\\')).count();
    assert_eq!(unescaped, 17, "{ext}");
}

#[test]
fn ndjson_and_ocsf_stay_one_line_of_json() {
    let stored = r#"{"seq":1,"kind":"reject","target":"GET /BIDIx\u001b","decision":"denied","reason":"a\nb"}"#.replace("BIDI", "\u{202e}");
    let stored = stored.as_str();
    let r = row(crate::json::parse(stored).unwrap());
    let nd = render(Format::Ndjson, stored, &r);
    assert!(!nd.contains('\u{202e}') && nd.contains("\\u202e"), "{nd}");
    assert_eq!(crate::json::parse(&nd).unwrap(), Value::Object(r.clone()));
    let oc = render(Format::Ocsf, stored, &r);
    assert!(!oc.contains('\n') && !oc.chars().any(crate::escape::is_unsafe), "{oc}");
    let ev = crate::json::parse(&oc).unwrap();
    assert_eq!((ev["class_uid"].as_u64(), ev["type_uid"].as_u64(), ev["activity_id"].as_u64()), (Some(6003), Some(600399), Some(99)));
    assert_eq!((ev["action"].as_str(), ev["disposition_id"].as_u64(), ev["status_id"].as_u64()), (Some("Denied"), Some(2), Some(2)));
    assert_eq!(ev["raw_data"].as_str(), Some(stored));
    assert_eq!(ev["unmapped"]["target"].as_str(), Some("GET /\u{202e}x\u{1b}"));
}

#[test]
fn ocsf_maps_an_http_result() {
    let r = row(json!({"seq": 3, "ts": "2026-12-02T14:22:36.903Z", "session": "s", "kind": "result", "tool": "http_request",
        "target": "POST http://h/v1/jobs", "decision": "ok", "status": 201, "bytes_out": 597, "duration_ms": 2, "hash": "h"}));
    let ev = ocsf::event("{}", &r);
    assert_eq!((ev["activity_name"].as_str(), ev["type_uid"].as_u64()), (Some("Create"), Some(600301)));
    assert_eq!((ev["time"].as_i64(), ev["severity_id"].as_u64(), ev["status"].as_str()), (Some(1_796_221_356_903), Some(1), Some("Success")));
    assert_eq!((ev["api"]["operation"].as_str(), ev["api"]["response"]["code"].as_u64()), (Some("http_request"), Some(201)));
    assert_eq!((ev["metadata"]["uid"].as_str(), ev["metadata"]["sequence"].as_u64()), (Some("h"), Some(3)));
    assert!(ev.get("action_id").is_none());
}

#[test]
fn otlp_record_carries_the_row() {
    let stored = r#"{"seq":2,"ts":"2026-12-02T14:22:36.898Z","kind":"reject","decision":"denied","truncated":false}"#;
    let r = row(crate::json::parse(stored).unwrap());
    let rec = log_record(stored, &r);
    assert_eq!(rec["body"]["stringValue"].as_str(), Some(stored));
    assert_eq!(rec["timeUnixNano"].as_str(), Some("1796221356898000000"));
    assert_eq!((rec["severityNumber"].as_u64(), rec["eventName"].as_str()), (Some(10), Some("sp.audit.reject")));
    let attrs = rec["attributes"].as_array().unwrap();
    assert!(attrs.contains(&json!({"key": "sp.seq", "value": {"intValue": "2"}})), "{attrs:?}");
    assert!(attrs.contains(&json!({"key": "sp.truncated", "value": {"boolValue": false}})), "{attrs:?}");
    assert_eq!(attrs.len(), 5);
    let req = logs_request(vec![rec]);
    assert_eq!(req["resourceLogs"][0]["scopeLogs"][0]["logRecords"].as_array().map(Vec::len), Some(1));
}
