//! Journal rows in the forms other systems read: `sp audit export --format
//! ndjson|cef|ocsf` (`cli::audit::export`), the OpenTelemetry log record of the OTLP copy
//! (`audit::otlp`), and the one severity and outcome every form gives a row
//! ([`level`], [`outcome`]). Pure: a row's line and fields in, text or a JSON value out.
//!
//! ```text
//!  row (line as stored, parsed fields)
//!    ├─ ndjson ─> the line, with escape.rs's class as \uXXXX (same JSON value)
//!    ├─ cef ────> CEF:0|Sallyport|sp|VERSION|kind:decision|kind decision|SEV|key=value ...   (cef.rs)
//!    ├─ ocsf ───> one OCSF 1.3.0 API Activity (6003) event, compact JSON         (ocsf.rs)
//!    └─ otlp ───> one OpenTelemetry LogRecord (body: the line; attributes sp.*)  (otlp.rs)
//! ```
//!
//! Every text field of a row was scrubbed of secrets when it was written, but `target`,
//! `reason` (and an unlisted upstream tool name) are still text the agent or a peer
//! chose: each form escapes it by its own rules (CEF's backslash escapes, JSON's
//! string escapes), and the characters `escape.rs` keeps off terminals are escaped in
//! every form, so no exported row can split into two events, forge a field, or drive
//! the terminal of whoever reads the export. sp-audit(1), EXPORT, has the field mapping.

mod cef;
mod ocsf;
mod otlp;

use serde_json::{Map, Value};

pub(crate) use otlp::{log_record, logs_request};

/// The forms of `sp audit export`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Format {
    Ndjson,
    Cef,
    Ocsf,
}

impl Format {
    pub(crate) fn parse(s: &str) -> Option<Format> {
        match s {
            "ndjson" | "json" => Some(Format::Ndjson),
            "cef" => Some(Format::Cef),
            "ocsf" => Some(Format::Ocsf),
            _ => None,
        }
    }
}

/// How much a row matters, from its kind and decision: one scale that each form spells
/// its own way ([`Level::cef`], [`Level::ocsf`], [`Level::otlp`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum Level {
    /// Calls allowed and run, their results, sessions starting and ending.
    Informational,
    /// A request refused (by the policy, its arguments, a malformed frame), an approval
    /// not given, a session closed on a bad frame, an upstream that ended or a tool
    /// withheld.
    Low,
    /// An action that failed (blocked destination, timeout, an upstream's error), a
    /// token that could not be fetched, a torn row cut off at startup.
    Medium,
    /// The journal could not announce an action (`audit_unavailable`), or a forged grant.
    High,
}

impl Level {
    /// CEF's Severity (0..10: 0-3 Low, 4-6 Medium, 7-8 High, 9-10 Very-High).
    pub(crate) fn cef(self) -> u8 {
        match self {
            Level::Informational => 1,
            Level::Low => 3,
            Level::Medium => 5,
            Level::High => 8,
        }
    }

    /// OCSF `severity_id` and `severity`.
    pub(crate) fn ocsf(self) -> (u8, &'static str) {
        match self {
            Level::Informational => (1, "Informational"),
            Level::Low => (2, "Low"),
            Level::Medium => (3, "Medium"),
            Level::High => (4, "High"),
        }
    }

    /// OpenTelemetry `severityNumber` and `severityText` (the log data model's syslog
    /// mapping: notice is INFO2, warning WARN, error ERROR).
    pub(crate) fn otlp(self) -> (u8, &'static str) {
        match self {
            Level::Informational => (9, "INFO"),
            Level::Low => (10, "INFO2"),
            Level::Medium => (13, "WARN"),
            Level::High => (17, "ERROR"),
        }
    }
}

/// The [`Level`] of a row (sp-audit(1), EXPORT).
pub(crate) fn level(kind: &str, decision: &str) -> Level {
    match (kind, decision) {
        ("grant", _) | ("reject", "audit_unavailable") => Level::High,
        ("result" | "token", d) if d != "ok" && d != "cancelled" => Level::Medium,
        ("recover", _) => Level::Medium,
        ("reject", _) => Level::Low,
        ("approval", d) if !APPROVAL_YES.contains(&d) => Level::Low,
        ("end", "malformed" | "refused") => Level::Low,
        ("upstream", "exit" | "withhold") => Level::Low,
        _ => Level::Informational,
    }
}

/// The approval decisions that let the call go on.
const APPROVAL_YES: [&str; 4] = ["approved", "granted", "asked", "observed"];

/// Whether what a row records went through ([`outcome`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Outcome {
    Success,
    Failure,
    /// Rows that are not a call's step: `start`, `end`, `upstream`.
    Other,
}

pub(crate) fn outcome(kind: &str, decision: &str) -> Outcome {
    match kind {
        "intent" => Outcome::Success,
        "result" | "token" if decision == "ok" => Outcome::Success,
        "approval" if APPROVAL_YES.contains(&decision) => Outcome::Success,
        "start" | "end" | "upstream" => Outcome::Other,
        _ => Outcome::Failure,
    }
}

/// A field of a row as text ("" when absent).
pub(crate) fn text<'a>(fields: &'a Map<String, Value>, key: &str) -> &'a str {
    fields.get(key).and_then(Value::as_str).unwrap_or_default()
}

/// One exported line for the row (without its newline). `line` is the row as stored,
/// `fields` the same row parsed.
pub(crate) fn render(format: Format, line: &str, fields: &Map<String, Value>) -> String {
    match format {
        Format::Ndjson => crate::escape::json_safe(line),
        Format::Cef => cef::event(fields),
        // serde_json escapes quotes, backslashes and controls; json_safe the rest of
        // escape.rs's class (bidi, separators), as `sp audit show --json` does.
        Format::Ocsf => crate::escape::json_safe(&ocsf::event(line, fields).to_string()),
    }
}

/// Milliseconds since the epoch of an RFC 3339 date-time (`2026-12-05T12:00:00Z`,
/// `2026-12-05T13:00:00.250+01:00`; `T`/`t` and `Z`/`z`, any number of fraction digits,
/// cut to milliseconds), or `None` if `s` is not one.
pub(crate) fn parse_rfc3339(s: &str) -> Option<i64> {
    let b = s.as_bytes();
    let num = |from: usize, len: usize| -> Option<i64> {
        let part = b.get(from..from + len)?;
        part.iter().all(u8::is_ascii_digit).then(|| part.iter().fold(0i64, |n, d| n * 10 + i64::from(d - b'0')))
    };
    let sep = |at: usize, set: &[u8]| b.get(at).is_some_and(|c| set.contains(c));
    let (year, month, day) = (num(0, 4)?, num(5, 2)?, num(8, 2)?);
    let (hour, minute, second) = (num(11, 2)?, num(14, 2)?, num(17, 2)?);
    if !(sep(4, b"-") && sep(7, b"-") && sep(10, b"Tt") && sep(13, b":") && sep(16, b":")) {
        return None;
    }
    let leap = year % 4 == 0 && (year % 100 != 0 || year % 400 == 0);
    let days_in = [31, if leap { 29 } else { 28 }, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31];
    let month_ok = (1..=12).contains(&month);
    if !month_ok || day < 1 || day > days_in[(month - 1) as usize] || hour > 23 || minute > 59 || second > 60 {
        return None;
    }
    let mut at = 19;
    let mut millis = 0;
    if sep(at, b".") {
        at += 1;
        let digits = b[at..].iter().take_while(|c| c.is_ascii_digit()).count();
        if digits == 0 {
            return None;
        }
        millis = b[at..at + digits.min(3)].iter().fold(0i64, |n, d| n * 10 + i64::from(d - b'0')) * [100, 10, 1][digits.min(3) - 1];
        at += digits;
    }
    let offset_min = match b.get(at) {
        Some(b'Z' | b'z') if b.len() == at + 1 => 0,
        Some(sign @ (b'+' | b'-')) if b.len() == at + 6 && sep(at + 3, b":") => {
            let (h, m) = (num(at + 1, 2)?, num(at + 4, 2)?);
            if h > 23 || m > 59 {
                return None;
            }
            if *sign == b'+' { h * 60 + m } else { -(h * 60 + m) }
        }
        _ => return None,
    };
    // Howard Hinnant's days_from_civil.
    let y = if month <= 2 { year - 1 } else { year };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (month + 9) % 12;
    let doy = (153 * mp + 2) / 5 + day - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    let days = era * 146_097 + doe - 719_468;
    let secs = days * 86_400 + hour * 3600 + minute * 60 + second - offset_min * 60;
    Some(secs * 1000 + millis)
}

#[cfg(test)]
mod tests;
