//! Rows: the typed builder ([`Row`], [`Context`]), the members of a row being written
//! ([`Fields`], sealed by [`seal_fields`]), their one byte form ([`serialize_row`]) and
//! hash ([`row_hash`]), and the values rows carry (`request_fp`, timestamps, the session
//! id, capped text). A row read back (`sp audit verify`) is a map and goes through the
//! same writer: one byte form for both.

use std::fmt::Write as _;
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use serde_json::{Map, Value};
use sha2::{Digest, Sha256};

use crate::sys::hex;

/// `prev` of the first row of a file.
pub(crate) const GENESIS: &str = "0000000000000000000000000000000000000000000000000000000000000000";

/// The order fields are written in; unknown fields (none today) would follow, sorted.
pub(crate) const FIELDS: [&str; 30] = [
    "seq",
    "ts",
    "session",
    "kind",
    "tool",
    "target",
    "decision",
    "rule",
    "reason",
    "code",
    "request_fp",
    "credential",
    "status",
    "exit_status",
    "is_error",
    "bytes_in",
    "bytes_out",
    "truncated",
    "duration_ms",
    "host_key_fp",
    "recording",
    "recording_sha256",
    "recording_bytes",
    "recording_cut",
    "sha256",
    "approver_exit",
    "channel",
    "grant",
    "prev",
    "hash",
];

/// Where `key` is in [`FIELDS`].
fn field_index(key: &str) -> Option<usize> {
    FIELDS.iter().position(|f| *f == key)
}

/// Longest `target` or `reason` written (bytes, cut at a character boundary).
pub(crate) const MAX_TEXT: usize = 1024;

// ---------------------------------------------------------------------------------------
// Hashing, canonical form, time

pub(crate) fn sha256_hex(parts: &[&[u8]]) -> String {
    let mut h = Sha256::new();
    for p in parts {
        h.update(p);
    }
    hex(&h.finalize())
}

/// Compact JSON with object keys sorted at every depth.
#[cfg(test)]
pub(crate) fn canonical_json(v: &Value) -> String {
    let mut out = Vec::new();
    write_canonical(v, &mut out, None);
    String::from_utf8(out).expect("JSON text is UTF-8")
}

/// Where canonical JSON goes: a buffer (tests) or straight into a hash (no
/// copy of the request and no text of it are built to fingerprint it).
trait Sink {
    fn put(&mut self, bytes: &[u8]);
}

impl Sink for Vec<u8> {
    /// A row is written in some 150 pieces, most of them a few bytes: as the answers are
    /// (~80 fewer `memcpy` calls per row in the static build).
    #[inline]
    fn put(&mut self, bytes: &[u8]) {
        crate::sys::put_bytes(self, bytes);
    }
}

impl Sink for Sha256 {
    fn put(&mut self, bytes: &[u8]) {
        self.update(bytes);
    }
}

/// A scalar or key as JSON text, into `out` (serde_json's escaping, no allocation kept).
fn put_json<S: Sink>(out: &mut S, v: &impl serde::Serialize) {
    struct W<'a, S>(&'a mut S);
    impl<S: Sink> std::io::Write for W<'_, S> {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0.put(buf);
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let _ = serde_json::to_writer(W(out), v);
}

/// A string as JSON text, into `out`: as [`put_json`] writes it, in three pieces when
/// it needs no escape, as nearly every key and value of a row.
fn put_str<S: Sink>(out: &mut S, s: &str) {
    if crate::sys::json_escapes(s) {
        put_json(out, &s);
    } else {
        out.put(b"\"");
        out.put(s.as_bytes());
        out.put(b"\"");
    }
}

/// `v` as canonical JSON into `out`, leaving out the member `skip` of a top-level object.
fn write_canonical<S: Sink>(v: &Value, out: &mut S, skip: Option<&str>) {
    match v {
        Value::Object(m) => {
            let mut keys: Vec<&String> = m.keys().filter(|k| Some(k.as_str()) != skip).collect();
            keys.sort();
            out.put(b"{");
            for (i, k) in keys.into_iter().enumerate() {
                if i > 0 {
                    out.put(b",");
                }
                put_str(out, k);
                out.put(b":");
                write_canonical(&m[k], out, None);
            }
            out.put(b"}");
        }
        Value::Array(a) => {
            out.put(b"[");
            for (i, x) in a.iter().enumerate() {
                if i > 0 {
                    out.put(b",");
                }
                write_canonical(x, out, None);
            }
            out.put(b"]");
        }
        Value::String(t) => put_str(out, t),
        scalar => put_json(out, scalar),
    }
}

/// `request_fp` of a well-formed request (see the module docs): the SHA-256 of the
/// canonical JSON of `{"method": method, "params": params without _meta}`, hashed as it
/// is written.
pub(crate) fn request_fp(method: &str, params: Option<&Value>) -> String {
    let mut h = Sha256::new();
    h.put(b"{\"method\":");
    put_json(&mut h, &method);
    h.put(b",\"params\":");
    write_canonical(params.unwrap_or(&Value::Null), &mut h, Some("_meta"));
    h.put(b"}");
    hex(&h.finalize())
}

/// `request_fp` of a malformed frame: its raw bytes.
pub(crate) fn raw_fp(raw: &[u8]) -> String {
    sha256_hex(&[raw])
}

/// RFC 3339 in UTC with milliseconds: `2026-05-01T12:34:56.789Z`.
pub(crate) fn rfc3339(t: SystemTime) -> String {
    let d = t.duration_since(UNIX_EPOCH).unwrap_or_default();
    let secs = d.as_secs();
    let (days, rem) = (secs / 86_400, secs % 86_400);
    // Howard Hinnant's civil_from_days, for days since 1970-01-01 (non-negative here).
    let z = days as i64 + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    // Digit by digit rather than through `format!`: a dozen pieces, each a `memcpy` call
    // in the static build, for every journal row.
    let mut out = String::with_capacity(24);
    push_padded(&mut out, u64::try_from(year).unwrap_or_default(), 4);
    out.push('-');
    push_padded(&mut out, month as u64, 2);
    out.push('-');
    push_padded(&mut out, day as u64, 2);
    out.push('T');
    push_padded(&mut out, rem / 3600, 2);
    out.push(':');
    push_padded(&mut out, rem % 3600 / 60, 2);
    out.push(':');
    push_padded(&mut out, rem % 60, 2);
    out.push('.');
    push_padded(&mut out, u64::from(d.subsec_millis()), 3);
    out.push('Z');
    out
}

/// `v` in decimal, zero-padded to at least `width` digits (`format!("{v:0width$}")`,
/// for widths up to 20).
fn push_padded(out: &mut String, mut v: u64, width: usize) {
    let mut digits = [b'0'; 20];
    let mut start = digits.len();
    loop {
        start -= 1;
        digits[start] = b'0' + (v % 10) as u8;
        v /= 10;
        if v == 0 {
            break;
        }
    }
    for &b in &digits[start.min(digits.len().saturating_sub(width))..] {
        out.push(char::from(b));
    }
}

/// A random session id: 16 hex digits from the kernel's generator (`getrandom(2)`: no
/// descriptor, and no `/dev` needed, as in an empty root).
pub(crate) fn session_id() -> String {
    let mut bytes = [0u8; 8];
    let ok = matches!(rustix::rand::getrandom(&mut bytes, rustix::rand::GetRandomFlags::NONBLOCK), Ok(8));
    if !ok {
        // A kernel without getrandom(2) (before 3.17), or one still gathering entropy at
        // boot (NONBLOCK: never wait): std's per-process random hasher keys.
        use std::hash::{BuildHasher, Hasher};
        let mut h = std::collections::hash_map::RandomState::new().build_hasher();
        h.write_u32(std::process::id());
        h.write_u128(SystemTime::now().duration_since(UNIX_EPOCH).unwrap_or_default().as_nanos());
        bytes = h.finish().to_be_bytes();
    }
    hex(&bytes)
}

/// Cuts `s` to at most [`MAX_TEXT`] bytes at a character boundary, saying how much went.
/// In place: a text within the cap (nearly all) is left as it is, not copied.
pub(crate) fn cap(s: &mut String) {
    let kept = crate::sys::cut(s, MAX_TEXT).len();
    if kept < s.len() {
        let gone = s.len() - kept;
        s.truncate(kept);
        // Writing into a String cannot fail.
        let _ = write!(s, "…[+{gone} bytes]");
    }
}

/// The one byte form of a row: [`FIELDS`] order, then any other keys sorted; compact.
pub(crate) fn serialize_row(row: &Map<String, Value>, with_hash: bool) -> String {
    let mut out = Vec::with_capacity(512);
    let mark = write_row(row, &mut out);
    if with_hash && let Some(hash) = row.get("hash") {
        insert_member(&mut out, mark, "hash", hash);
    }
    line_text(out)
}

/// A row's bytes as text. JSON text written from `str`s is UTF-8; nothing is lost
/// either way.
pub(crate) fn line_text(bytes: Vec<u8>) -> String {
    String::from_utf8(bytes).unwrap_or_else(|e| String::from_utf8_lossy(e.as_bytes()).into_owned())
}

/// `hash` of a row whose `prev` is set.
pub(crate) fn row_hash(prev: &str, row: &Map<String, Value>) -> String {
    let mut out = Vec::with_capacity(512);
    write_row(row, &mut out);
    sha256_hex(&[prev.as_bytes(), &out])
}

/// A row whose `prev` is set, sealed: its `hash` and its line (`serialize_row` with that
/// hash, and a newline), in one serialisation. The map form, kept for the tests, which
/// hold it equal to [`row_hash`] and [`serialize_row`], and [`seal_fields`] equal to it.
#[cfg(test)]
pub(crate) fn seal_row(prev: &str, row: &Map<String, Value>) -> (String, Vec<u8>) {
    let mut out = Vec::with_capacity(512);
    let mark = write_row(row, &mut out);
    seal(prev, out, mark)
}

/// `seal_row` (its tests' map form) for the rows `sp` writes ([`Fields`]): the same bytes for the same
/// members (a test holds them equal).
pub(crate) fn seal_fields(prev: &str, row: &Fields) -> (String, Vec<u8>) {
    let mut out = Vec::with_capacity(512);
    let mark = row.write(&mut out);
    seal(prev, out, mark)
}

/// A row written without its `hash` (which belongs at `mark`), hashed and sealed.
fn seal(prev: &str, mut out: Vec<u8>, mark: usize) -> (String, Vec<u8>) {
    let hash = sha256_hex(&[prev.as_bytes(), &out]);
    insert_member(&mut out, mark, "hash", &Value::String(hash.clone()));
    out.push(b'\n');
    (hash, out)
}

/// Writes `row` without its `hash` member in the byte form of [`serialize_row`] and
/// returns the offset where `hash` belongs: after the [`FIELDS`] members (`hash` is the
/// last of them), before any other.
fn write_row(row: &Map<String, Value>, out: &mut Vec<u8>) -> usize {
    // One pass over the row's members instead of a lookup per field.
    let mut known: [Option<&Value>; FIELDS.len()] = [None; FIELDS.len()];
    let mut rest: Vec<(&str, &Value)> = Vec::new();
    for (k, v) in row {
        match field_index(k) {
            Some(i) => known[i] = Some(v),
            None => rest.push((k, v)),
        }
    }
    write_members(&known, rest, out)
}

/// [`write_row`] of a row split into its [`FIELDS`] members, by position, and the rest.
fn write_members(known: &[Option<&Value>; FIELDS.len()], mut rest: Vec<(&str, &Value)>, out: &mut Vec<u8>) -> usize {
    let push = |k: &str, v: &Value, out: &mut Vec<u8>| {
        if out.len() > 1 {
            out.push(b',');
        }
        put_member(out, k, v);
    };
    out.push(b'{');
    for (k, v) in FIELDS.iter().zip(known) {
        if let Some(v) = v
            && *k != "hash"
        {
            push(k, v, out);
        }
    }
    let mark = out.len();
    // Sorted already when they come from a BTreeMap; sorted here whatever they come from.
    rest.sort_by_key(|(k, _)| *k);
    for (k, v) in rest {
        push(k, v, out);
    }
    out.push(b'}');
    mark
}

/// `"key":value`, the value canonical: one member of a row.
fn put_member(out: &mut Vec<u8>, key: &str, value: &Value) {
    put_str(out, key);
    out.push(b':');
    write_canonical(value, out, None);
}

/// Puts the member `key: value` at `at` of a row that [`write_row`] wrote, with the
/// commas the members before and after it need.
fn insert_member(out: &mut Vec<u8>, at: usize, key: &str, value: &Value) {
    let mut m = Vec::with_capacity(96);
    if at > 1 {
        m.push(b',');
    }
    put_member(&mut m, key, value);
    // The members after `at` begin with a comma already when something came before `at`;
    // when nothing did, the first of them needs one after this member.
    if at == 1 && out.len() > 2 {
        m.push(b',');
    }
    if at + 1 == out.len() {
        // Only the closing brace after it (a row with no member outside FIELDS): appended,
        // nothing moved.
        out.pop();
        out.extend_from_slice(&m);
        out.push(b'}');
    } else {
        out.splice(at..at, m);
    }
}

// ---------------------------------------------------------------------------------------
// Rows

/// The fields that can quote outside text: an HTTP target is the agent's URL, an SSH
/// target its command, a reason can quote a peer's error. Only these are scrubbed
/// ([`Row::finish`]); every other field holds sp's own values (kind, decision, code,
/// tool, rule and credential names from the policy, counters, hashes), which no secret,
/// however short, may rewrite.
pub(crate) const OUTSIDE_TEXT: [&str; 2] = ["target", "reason"];

/// A row's members: those of [`FIELDS`] by their position, in an array rather than a
/// map of `String`s (building, searching and freeing the map was a quarter of what two
/// rows cost), and any other apart (none that `sp` sets today).
#[derive(Debug, Clone, PartialEq, Default)]
pub(crate) struct Fields {
    known: [Option<Value>; FIELDS.len()],
    other: Vec<(&'static str, Value)>,
}

impl Fields {
    pub(crate) fn get(&self, key: &str) -> Option<&Value> {
        match field_index(key) {
            Some(i) => self.known[i].as_ref(),
            None => self.other.iter().find(|(k, _)| *k == key).map(|(_, v)| v),
        }
    }

    /// Sets `key` to `value` (a null too: written as `null`), as a map's `insert` would.
    pub(crate) fn put(&mut self, key: &'static str, value: Value) {
        match field_index(key) {
            Some(i) => self.known[i] = Some(value),
            None => match self.other.iter_mut().find(|(k, _)| *k == key) {
                Some((_, v)) => *v = value,
                None => self.other.push((key, value)),
            },
        }
    }

    fn remove(&mut self, key: &str) {
        match field_index(key) {
            Some(i) => self.known[i] = None,
            None => self.other.retain(|(k, _)| *k != key),
        }
    }

    /// The row without `hash` in its one byte form (as [`write_row`] writes the same
    /// members); returns where `hash` belongs.
    fn write(&self, out: &mut Vec<u8>) -> usize {
        let known: [Option<&Value>; FIELDS.len()] = std::array::from_fn(|i| self.known[i].as_ref());
        let rest = self.other.iter().map(|(k, v)| (*k, v)).collect();
        write_members(&known, rest, out)
    }

    /// The line without `hash` (the syslog copy when there is no journal file).
    pub(crate) fn line(&self) -> String {
        let mut out = Vec::with_capacity(512);
        self.write(&mut out);
        line_text(out)
    }
}

/// A row being built; [`Journal::write`](crate::audit::Journal::write) adds `seq`, `ts`, `session`, `prev`, `hash`.
/// Its outside text ([`OUTSIDE_TEXT`], known by the field's name) is the only text the
/// journal scrubs.
#[derive(Debug, Clone, PartialEq)]
pub struct Row {
    fields: Fields,
}

impl Row {
    pub fn new(kind: &str) -> Row {
        let mut fields = Fields::default();
        fields.put("kind", Value::String(kind.to_owned()));
        Row { fields }
    }

    /// Sets a field (`None` leaves it out). Text is capped at [`MAX_TEXT`] when written,
    /// after scrubbing (a cap first could cut a secret past recognition).
    pub fn set(mut self, key: &'static str, value: impl Into<Value>) -> Row {
        debug_assert!(FIELDS.contains(&key), "{key} is not a journal field");
        let v = value.into();
        if v.is_null() {
            self.fields.remove(key);
        } else {
            self.fields.put(key, v);
        }
        self
    }

    pub fn get(&self, key: &str) -> Option<&Value> {
        self.fields.get(key)
    }

    pub fn kind(&self) -> &str {
        self.get("kind").and_then(Value::as_str).unwrap_or_default()
    }

    /// The row as written: its outside text passed through `scrub` (each string of
    /// [`OUTSIDE_TEXT`]: only a `Scrubbed` value goes in), then every string capped at
    /// [`MAX_TEXT`].
    pub(crate) fn finish(self, scrub: impl Fn(String) -> crate::gate::scrubbed::Scrubbed<String>) -> Fields {
        let Row { mut fields } = self;
        for key in OUTSIDE_TEXT {
            if let Some(i) = field_index(key)
                && let Some(Value::String(s)) = &mut fields.known[i]
            {
                *s = scrub(std::mem::take(s)).into_inner();
            }
        }
        for v in fields.known.iter_mut().flatten().chain(fields.other.iter_mut().map(|(_, v)| v)) {
            if let Value::String(s) = v {
                cap(s);
            }
        }
        fields
    }
}

/// What the server knows about the request being handled; every row written for it
/// carries these fields. Reset for each message.
#[derive(Debug, Default, Clone)]
pub(crate) struct Context {
    pub request_fp: Option<String>,
    pub tool: Option<String>,
    pub target: Option<String>,
    pub credential: Option<String>,
    pub rule: Option<String>,
    /// The intent row's `decision`: `allow`, `approved` or `observe`.
    pub intent: Option<&'static str>,
    /// What the run reported for its `result` row (`gate::exec::Facts`).
    pub facts: crate::gate::exec::Facts,
    /// A malformed frame's length.
    pub bytes_in: Option<u64>,
    pub started: Option<Instant>,
}

impl Context {
    pub(crate) fn row(&self, kind: &str) -> Row {
        Row::new(kind)
            .set("tool", self.tool.clone())
            .set("target", self.target.clone())
            .set("rule", self.rule.clone())
            .set("request_fp", self.request_fp.clone())
            .set("credential", self.credential.clone())
            .set("bytes_in", self.bytes_in)
    }

    pub(crate) fn elapsed_ms(&self) -> Option<u64> {
        self.started.map(|t| t.elapsed().as_millis() as u64)
    }
}

#[cfg(test)]
mod tests;
