//! The OpenTelemetry log record of a row (OTLP/HTTP JSON encoding, `ExportLogsServiceRequest`
//! of opentelemetry-proto `logs/v1`), for the OTLP copy (`audit::otlp`).
//!
//! The record's `body` is the row as stored (a string: the chain can be checked from
//! it), its `attributes` the row's fields as `sp.<field>` (64-bit integers as decimal
//! strings, as the OTLP JSON mapping writes them), `timeUnixNano` the row's `ts`,
//! `severityNumber`/`severityText` from [`super::level`], `eventName` `sp.audit.<kind>`.

use serde_json::{json, Map, Value};

use super::{level, text};

/// One `LogRecord` for the row (`line`: the row as stored).
pub(crate) fn log_record(line: &str, fields: &Map<String, Value>) -> Value {
    let (kind, decision) = (text(fields, "kind"), text(fields, "decision"));
    let (number, severity) = level(kind, decision).otlp();
    let attributes: Vec<Value> = fields
        .iter()
        .map(|(k, v)| {
            let value = match v {
                Value::String(s) => json!({"stringValue": s}),
                Value::Bool(b) => json!({"boolValue": b}),
                Value::Number(n) if n.is_i64() || n.is_u64() => json!({"intValue": n.to_string()}),
                Value::Number(n) => json!({"doubleValue": n}),
                other => json!({"stringValue": other.to_string()}),
            };
            json!({"key": format!("sp.{k}"), "value": value})
        })
        .collect();
    let mut record = json!({
        "severityNumber": number,
        "severityText": severity,
        "eventName": format!("sp.audit.{kind}"),
        "body": {"stringValue": line},
        "attributes": attributes,
    });
    if let Some(ms) = fields.get("ts").and_then(Value::as_str).and_then(super::parse_rfc3339) {
        let nanos = (ms.max(0) as u64).saturating_mul(1_000_000).to_string();
        record["timeUnixNano"] = json!(nanos);
        record["observedTimeUnixNano"] = json!(nanos);
    }
    record
}

/// The request body for a batch of records.
pub(crate) fn logs_request(records: Vec<Value>) -> Value {
    json!({"resourceLogs": [{
        "resource": {"attributes": [
            {"key": "service.name", "value": {"stringValue": "sp"}},
            {"key": "service.version", "value": {"stringValue": env!("CARGO_PKG_VERSION")}},
        ]},
        "scopeLogs": [{"scope": {"name": "sallyport.audit", "version": env!("CARGO_PKG_VERSION")}, "logRecords": records}],
    }]})
}
