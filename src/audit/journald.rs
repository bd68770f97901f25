//! journald's native protocol (systemd's "Native Journal Protocol"): one datagram of
//! fields, each `KEY=value\n`, or, for a value holding a newline (or any byte a line
//! could not carry), `KEY\n`, its length as a 64-bit little-endian number, the value
//! and `\n`. Keys are upper case letters, digits and `_`, not starting with `_` (those
//! are journald's own trusted fields, which it adds itself: `_PID`, `_UID`, ...).
//!
//! An entry: `MESSAGE` (the row as written, as the syslog copy sends it), `PRIORITY`
//! (5 notice or 6 info, as the syslog copy), `SYSLOG_FACILITY`, `SYSLOG_IDENTIFIER=sp`
//! (so `journalctl -t sp` finds both wires' entries), `SYSLOG_PID`, then every field of
//! the row as `SP_<FIELD>` (`SP_SEQ`, `SP_KIND`, `SP_TOOL`, `SP_DECISION`,
//! `SP_TARGET`, `SP_HASH`, ...): strings as they are (a target or a reason with a
//! newline goes length-prefixed, never as a second field), numbers and booleans as
//! JSON spells them. The row's field names are sp's own (`audit::FIELDS`); one that is
//! not a valid journal key would be skipped, never written as one. Rows are a few KiB
//! (their text fields are capped), far below the datagram limit, so no memfd is needed.

use serde_json::Value;

/// The datagram for one row (`line`: the row as written, one JSON object).
pub(super) fn entry(line: &str, priority: u8, facility: u8) -> Vec<u8> {
    let mut out = Vec::with_capacity(line.len() * 2 + 128);
    field(&mut out, "MESSAGE", line.as_bytes());
    field(&mut out, "PRIORITY", priority.to_string().as_bytes());
    field(&mut out, "SYSLOG_FACILITY", facility.to_string().as_bytes());
    field(&mut out, "SYSLOG_IDENTIFIER", b"sp");
    field(&mut out, "SYSLOG_PID", std::process::id().to_string().as_bytes());
    if let Ok(Value::Object(fields)) = crate::json::parse(line) {
        for (name, v) in &fields {
            let key = format!("SP_{}", name.to_ascii_uppercase());
            if !valid_key(&key) {
                continue;
            }
            match v {
                Value::String(s) => field(&mut out, &key, s.as_bytes()),
                other => field(&mut out, &key, other.to_string().as_bytes()),
            }
        }
    }
    out
}

/// A journal field name: `[A-Z0-9_]`, at most 64 bytes, not starting with `_` or a digit.
fn valid_key(k: &str) -> bool {
    !k.is_empty()
        && k.len() <= 64
        && k.bytes().all(|b| b.is_ascii_uppercase() || b.is_ascii_digit() || b == b'_')
        && !k.starts_with('_')
        && !k.starts_with(|c: char| c.is_ascii_digit())
}

/// One field: `KEY=value\n`, or length-prefixed when the value holds a newline.
fn field(out: &mut Vec<u8>, key: &str, value: &[u8]) {
    out.extend_from_slice(key.as_bytes());
    if value.contains(&b'\n') {
        out.push(b'\n');
        out.extend_from_slice(&(value.len() as u64).to_le_bytes());
    } else {
        out.push(b'=');
    }
    out.extend_from_slice(value);
    out.push(b'\n');
}

/// Parses a datagram back into (key, value) pairs: the tests' reader, and the
/// integration test's stand-in journald uses the same rules.
#[cfg(test)]
pub(super) fn parse(mut d: &[u8]) -> Option<Vec<(String, Vec<u8>)>> {
    let mut out = Vec::new();
    while !d.is_empty() {
        let nl = d.iter().position(|b| *b == b'\n')?;
        let head = &d[..nl];
        if let Some(eq) = head.iter().position(|b| *b == b'=') {
            out.push((String::from_utf8(head[..eq].to_vec()).ok()?, head[eq + 1..].to_vec()));
            d = &d[nl + 1..];
        } else {
            let rest = &d[nl + 1..];
            let len = u64::from_le_bytes(rest.get(..8)?.try_into().ok()?) as usize;
            let value = rest.get(8..8 + len)?.to_vec();
            if rest.get(8 + len) != Some(&b'\n') {
                return None;
            }
            out.push((String::from_utf8(head.to_vec()).ok()?, value));
            d = &rest[9 + len..];
        }
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Attacks tried (held): a reason with `\nSP_DECISION=allow\n` to add or override a
    /// field; a target with `=` to move the key/value split; a field named with a
    /// lower-case or `_` key (journald's trusted namespace) in a hand-made row.
    #[test]
    fn fields_are_one_each_whatever_the_text() {
        let line = r#"{"seq":3,"kind":"reject","target":"GET http://h/a=b","decision":"denied","reason":"x\nSP_DECISION=allow\n","_pid":1}"#;
        let d = entry(line, 5, 10);
        let fields = parse(&d).unwrap();
        let get = |k: &str| fields.iter().filter(|(n, _)| n == k).map(|(_, v)| String::from_utf8_lossy(v).into_owned()).collect::<Vec<_>>();
        assert_eq!(get("SP_DECISION"), vec!["denied"]);
        assert_eq!(get("SP_REASON"), vec!["x\nSP_DECISION=allow\n"]);
        assert_eq!(get("SP_TARGET"), vec!["GET http://h/a=b"]);
        assert_eq!(get("SP_SEQ"), vec!["3"]);
        assert_eq!(get("MESSAGE"), vec![line]);
        assert_eq!((get("PRIORITY"), get("SYSLOG_FACILITY"), get("SYSLOG_IDENTIFIER")), (vec!["5".to_owned()], vec!["10".to_owned()], vec!["sp".to_owned()]));
        assert!(get("SP__PID").len() == 1 && fields.iter().all(|(k, _)| valid_key(k)), "{fields:?}");
        assert!(!valid_key("_PID") && !valid_key("SP-X") && !valid_key("sp_x") && valid_key("SP_HOST_KEY_FP"));
        // the length-prefixed form, byte for byte
        let mut one = Vec::new();
        field(&mut one, "K", b"a\nb");
        assert_eq!(one, b"K\n\x03\0\0\0\0\0\0\0a\nb\n");
    }
}
