//! The Vault: the one holder of the secrets read in this process, and the one redaction
//! point. It reads a credential's secret at the moment an authorized call needs it (the
//! readers are `cred::source`), holds it to the credential's minimum, and remembers it
//! for the rest of the process with its encodings, so any echo of it is scrubbed before
//! anything leaves (`sp(1)`, REDACTION). What it scrubs comes back as [`Scrubbed`]
//! (`gate/scrubbed.rs`); whether a whole answer must be withheld is `gate/withhold.rs`.
//!
//! Redaction (`redact/`) covers each secret in any ASCII letter case, hex, percent-,
//! HTML-, `\u`- and backslash-escaped (decoded, repeatedly, so double encoding is seen),
//! form-encoded, base64/base64url at any byte offset of an encoded stream, UTF-16LE and
//! UTF-16BE, and any run of at least `max(12, ceil(n / 2))` of its bytes; for a
//! `user:password` secret (`basic`), the password alone too.
//!
//! # What is scrubbed, and what is not
//! Redaction applies to text that came from outside: response bodies and headers, remote
//! output, error texts that quote a peer, a parsed JSON body with its own keys. It never
//! applies to the words sp writes itself (JSON-RPC and MCP member names, tool names,
//! result codes, a tool's field names, journal field names and enumerations), so no
//! secret, however short, can rewrite the envelope. That is a property of the types: a
//! [`Scrubbed`] value is outside content that passed the [`Vault`], and only the gate
//! builds one (or [`Scrubbed::own`] from a `&'static str`, sp's own words); the result
//! assembly (`mcp::model::ToolResult`) takes its outside pieces only as `Scrubbed`, and
//! serialises the envelope around them without scrubbing it.
//!
//! # The session's Vault and the process's copy
//! The session's Vault is the one that reads and admits; every value it remembers is
//! also added to one process-wide copy ([`Vault::remember`]), which the journal
//! ([`scrub_journal_text`]) and the logger ([`scrub_log_line`]) scrub with. They are
//! reached from places no Vault is passed to (a `log::` record, the journal writer's
//! thread), and they must cover what any Vault of the process read; both copies hold
//! the same values and the same redactor, so a text scrubbed by either reads alike
//! (the logger's copy holds only what is at least [`MIN_SECRET_BYTES`] long: `logging.rs`).
//!
//! # Short secrets
//! A secret shorter than [`MIN_SECRET_BYTES`] cannot be told from ordinary text: redacting
//! it would rewrite ordinary words in every body and log line. It is refused where it
//! enters ([`SecretError::TooShort`], naming the credential, never the value): when a
//! source is read (for `file`, `env` and `systemd` sources also at startup and by
//! `sp check`, [`check_static`]), and when a token endpoint answers (`oauth2`). For a
//! `user:password` secret (`basic`, and `oauth2`'s `client_id:client_secret`) the
//! password is held to the same minimum, since it is searched for alone. An operator can
//! lower the minimum per credential (`min_secret_bytes`, sp-policy(5) CREDENTIALS); the
//! envelope and the journal stay whole then too (above), only outside text over-redacts.

use std::fmt;

use serde_json::{Map, Value};
use zeroize::Zeroizing;

use crate::cred::source;
use crate::policy::SecretSource;

// The names the tool slices use for what the Vault reads and returns.
pub(crate) use crate::cred::source::{Secret, SecretError};
pub(crate) use crate::gate::scrubbed::Scrubbed;
pub(crate) use crate::policy::MIN_SECRET_BYTES;

/// Reads secrets and remembers each value read in this process, for redaction.
#[derive(Default)]
pub struct Vault {
    /// Every secret read, raw, with its credential, to tell whether it is known already.
    raw: Vec<(String, Zeroizing<String>)>,
    /// Every spelling of every secret read, and the automaton that finds them.
    redactor: crate::gate::redact::Redactor,
    /// Per credential: its minimum length and whether it is `user:password`
    /// ([`Vault::for_policy`]); a credential not listed has [`MIN_SECRET_BYTES`].
    rules: std::collections::HashMap<String, Admission>,
}

/// What a credential's secret must satisfy before it is used or remembered.
#[derive(Debug, Clone, Copy)]
struct Admission {
    min: usize,
    /// `user:password` (`basic`, `oauth2` client credentials): the password is searched
    /// for alone, so it is held to the minimum too.
    pair: bool,
}

impl Default for Admission {
    fn default() -> Admission {
        Admission { min: MIN_SECRET_BYTES, pair: false }
    }
}

impl Admission {
    fn of(c: &crate::policy::Credential) -> Admission {
        use crate::policy::Injection;
        Admission { min: c.min_secret_bytes, pair: matches!(c.inject, Injection::Basic | Injection::OAuth2(_)) }
    }

    /// `Err` naming the credential when `value` (or its password) is too short.
    fn check(self, credential: &str, value: &str) -> Result<(), SecretError> {
        let short = |what| Err(SecretError::TooShort { credential: credential.to_owned(), what, min: self.min });
        if value.len() < self.min {
            return short("secret");
        }
        if self.pair
            && let Some((user, password)) = value.split_once(':')
        {
            if password.is_empty() && user.len() < self.min {
                return short("user name (the key of a \"key:\" secret)");
            }
            if !password.is_empty() && password.len() < self.min {
                return short("password (after the first ':')");
            }
        }
        Ok(())
    }
}

impl fmt::Debug for Vault {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Vault({} secrets seen)", self.raw.len())
    }
}

impl Vault {
    pub fn new() -> Vault {
        Vault::default()
    }

    /// A Vault that holds each credential's secret to its policy minimum
    /// (`min_secret_bytes`) and knows which are `user:password`.
    pub fn for_policy(policy: &crate::policy::Policy) -> Vault {
        let rules = policy.credentials.values().map(|c| (c.name.clone(), Admission::of(c))).collect();
        Vault { rules, ..Vault::default() }
    }

    /// After a policy reload: the new credentials' rules; every secret read so far is
    /// still scrubbed (a process started under the old policy may still hold it).
    pub(crate) fn reload(&mut self, policy: &crate::policy::Policy) {
        self.rules = Vault::for_policy(policy).rules;
    }

    /// The shortest secret accepted for `credential` (an `oauth2` token too).
    pub(crate) fn min_secret_bytes(&self, credential: &str) -> usize {
        self.admission(credential).min
    }

    fn admission(&self, credential: &str) -> Admission {
        self.rules.get(credential).copied().unwrap_or_default()
    }

    pub fn read(&mut self, credential: &str, source: &SecretSource) -> Result<Secret, SecretError> {
        self.read_text(credential, source, false, &crate::sys::env_var)
    }

    /// Like [`Vault::read`] for a JSON document (`aws_sigv4`): newlines, tabs
    /// and carriage returns are allowed (pretty-printed JSON, `aws configure
    /// export-credentials`), other control characters are not.
    pub fn read_json(&mut self, credential: &str, source: &SecretSource) -> Result<Secret, SecretError> {
        self.read_text(credential, source, true, &crate::sys::env_var)
    }

    fn read_text(
        &mut self,
        credential: &str,
        source: &SecretSource,
        json: bool,
        env: &dyn Fn(&str) -> Option<std::ffi::OsString>,
    ) -> Result<Secret, SecretError> {
        let secret = source::read(credential, source, json, env)?;
        // Refused before it is remembered: a short secret never reaches the redactor.
        self.admission(credential).check(credential, secret.expose())?;
        self.remember(credential, secret.expose());
        Ok(secret)
    }

    /// An SSH private key file (`cred::source::read_key`): the same checks as a `file` source (owner-only,
    /// at most 64 KiB, read through the opened descriptor), but the text is kept whole,
    /// newlines included. The whole key and each of its base64 body lines are remembered
    /// for redaction, so a key echoed whole or line by line never leaves in a result.
    pub(crate) fn read_key_file(&mut self, credential: &str, path: &std::path::Path) -> Result<Secret, SecretError> {
        let key = source::read_key(credential, path)?;
        let text = key.expose();
        let lines: Vec<Zeroizing<String>> = text
            .lines()
            .map(str::trim)
            .filter(|l| l.len() >= 16 && !l.starts_with("-----") && !l.contains(':'))
            .map(|l| Zeroizing::new(l.to_owned()))
            .collect();
        for line in &lines {
            self.remember(credential, line);
        }
        self.remember(credential, text.strip_suffix('\n').unwrap_or(text));
        Ok(key)
    }

    /// Remembers a value derived from a credential for redaction (the AWS
    /// secret key and session token, each signature, the OAuth2 client secret and tokens).
    pub fn remember(&mut self, credential: &str, value: &str) {
        // The logger and the journal scrub against every secret any Vault read.
        let mut process = PROCESS.write().unwrap_or_else(std::sync::PoisonError::into_inner);
        if process.all.remember_here(credential, value) {
            // The logger's redactor holds only what is long enough to be told from the
            // words of a log line (`logging.rs`).
            process.logs.add_min(credential, value, MIN_SECRET_BYTES);
        }
        drop(process);
        self.remember_here(credential, value);
    }

    /// [`Vault::remember`] for this Vault only, not the process-wide set the logger, the
    /// journal and outside text (`scrub_outside_then_cut`) are scrubbed against: for
    /// unit tests of one Vault with secrets no real credential would have ("e", "abc"),
    /// which would otherwise scrub every other test's words in the same process.
    #[cfg(test)]
    pub(crate) fn remember_local(&mut self, credential: &str, value: &str) {
        self.remember_here(credential, value);
    }

    /// Adds `value` unless it is known for `credential` already; whether it was added.
    fn remember_here(&mut self, credential: &str, value: &str) -> bool {
        if self.raw.iter().any(|(c, v)| c == credential && v.as_str() == value) {
            return false;
        }
        self.raw.push((credential.to_owned(), Zeroizing::new(value.to_owned())));
        self.redactor.add(credential, value);
        true
    }

    /// No secret read yet: nothing to search for.
    pub fn is_empty(&self) -> bool {
        self.redactor.is_empty()
    }

    /// An upper bound on the length of any spelling of a secret the redactor finds in
    /// text: each byte of a secret takes at most 16 bytes in the encodings it decodes
    /// (`&#x41;`, `%2541`, `\u0041` inside a JSON string: at most 7). For windowed search.
    pub fn longest_spelling(&self) -> usize {
        16 * self.redactor.patterns().map(|(_, p)| p.len()).max().unwrap_or(0)
    }

    /// Whether any spelling of any secret read so far is in `bytes`.
    pub fn found_in(&self, bytes: &[u8]) -> bool {
        !self.echoed(bytes).is_empty()
    }

    /// The credentials whose secret is in `bytes` in any spelling (sorted), including a
    /// cut-off tail that [`Vault::scrub_truncated_tail`] would replace when `cut`.
    pub(crate) fn echoed_in(&self, bytes: &[u8], cut: bool) -> Vec<String> {
        let mut names: Vec<String> = self.echoed(bytes).into_iter().map(str::to_owned).collect();
        if cut && let Some((_, name)) = self.tail_match(bytes) {
            names.push(name.to_owned());
        }
        names.sort();
        names.dedup();
        names
    }

    fn echoed(&self, bytes: &[u8]) -> Vec<&str> {
        self.redactor.echoed(bytes)
    }

    /// Redacts response headers: names and values, and an echo split across two
    /// consecutive header lines ([`crate::gate::redact::Redactor::redact_headers`]).
    pub(crate) fn scrub_headers(&self, headers: &mut [(String, String)]) {
        self.redactor.redact_headers(headers);
    }

    /// Redacts pieces of one text in place (a stream's reads, for a recording): an echo
    /// split across two pieces is found, and each part is replaced in its own piece.
    pub(crate) fn scrub_segments(&self, segments: &mut [String]) {
        self.redactor.redact_segments(segments);
    }

    /// Whether any spelling of a secret is in the headers (as [`Vault::scrub_headers`]
    /// reads them); the credentials found.
    pub(crate) fn echoed_in_headers(&self, headers: &[(String, String)]) -> Vec<String> {
        let all: String = headers.iter().flat_map(|(n, v)| [n.as_str(), v.as_str()]).collect();
        let values: String = headers.iter().map(|(_, v)| v.as_str()).collect();
        let names: String = headers.iter().map(|(n, _)| n.as_str()).collect();
        let mut found: Vec<String> = [all, values, names].iter().flat_map(|t| self.echoed(t.as_bytes())).map(str::to_owned).collect();
        found.sort();
        found.dedup();
        found
    }

    /// Where a cut-off tail that begins a spelling of a secret starts, and whose.
    fn tail_match(&self, bytes: &[u8]) -> Option<(usize, &str)> {
        self.redactor.tail_match(bytes)
    }

    /// For output cut at a size limit (or by a timeout): a tail of at least
    /// [`crate::gate::redact::MIN_TAIL_MATCH`] bytes that is the beginning of a secret (in any known encoding)
    /// is replaced too, so a cut cannot leak a secret's prefix. Shorter tails are left:
    /// with dozens of encodings remembered, a one- or two-byte match would redact the end
    /// of nearly every truncated output; what can leak is at most the first three bytes.
    pub fn scrub_truncated_tail(&self, bytes: &mut Vec<u8>) {
        if let Some((start, name)) = self.tail_match(bytes) {
            let marker = format!("[REDACTED:{name}]");
            bytes.truncate(start);
            bytes.extend_from_slice(marker.as_bytes());
        }
    }

    /// Replaces every known spelling of every secret in raw bytes (a body that is not
    /// UTF-8 is scrubbed this way before it is base64-encoded for the result).
    pub fn scrub_bytes(&self, bytes: &mut Vec<u8>) {
        if let Some(out) = self.redactor.redact(bytes) {
            *bytes = out;
        }
    }

    /// Outside text (an error that quotes a peer, a remote message), scrubbed.
    pub(crate) fn scrub_text(&self, text: impl Into<String>) -> Scrubbed<String> {
        let mut text = text.into();
        self.scrub_str(&mut text);
        Scrubbed(text)
    }

    /// A tool's result fields: the field names (the top-level keys) are the tool's own
    /// vocabulary and are kept; each value is outside content and is scrubbed whole
    /// ([`Vault::scrub_value`]: strings, numbers and object keys at every depth), except
    /// top-level numbers, booleans and nulls, which the tool computed itself (a status,
    /// a byte count). Anything but an object is wrapped as `{"value": ..}`.
    pub(crate) fn scrub_fields(&self, fields: Value) -> Scrubbed<Map<String, Value>> {
        let mut map = crate::gate::scrubbed::fields_of(fields);
        for v in map.values_mut() {
            if matches!(v, Value::String(_) | Value::Array(_) | Value::Object(_)) {
                self.scrub_value(v);
            }
        }
        Scrubbed(map)
    }

    /// Outside JSON scrubbed in place, whole ([`Vault::scrub_value`]): what an upstream
    /// MCP server wrote (its tool definitions, its error texts), keys included. Never
    /// for what sp writes itself.
    pub(crate) fn scrub(&self, value: &mut Value) {
        self.scrub_value(value);
    }

    /// Replaces every spelling of every secret seen so far, in every string of `value`
    /// (object keys included), with `[REDACTED:<credential>]`. A number whose digits
    /// spell a secret becomes that marker string. For outside content only.
    fn scrub_value(&self, value: &mut Value) {
        if self.redactor.is_empty() {
            return;
        }
        match value {
            Value::String(s) => self.scrub_str(s),
            Value::Number(n) => {
                if let Some(r) = self.redactor.redact_str(&n.to_string()) {
                    *value = Value::String(r);
                }
            }
            Value::Array(items) => items.iter_mut().for_each(|v| self.scrub_value(v)),
            Value::Object(map) => {
                let old = std::mem::take(map);
                for (mut k, mut v) in old {
                    self.scrub_str(&mut k);
                    self.scrub_value(&mut v);
                    map.insert(k, v);
                }
            }
            _ => {}
        }
    }

    fn scrub_str(&self, s: &mut String) {
        if self.redactor.is_empty() {
            return;
        }
        if let Some(r) = self.redactor.redact_str(s) {
            *s = r;
        }
    }
}

/// What [`check_static`] found: secrets refused (too short), and warnings.
#[derive(Debug, Default, PartialEq)]
pub(crate) struct StaticCheck {
    pub refused: Vec<SecretError>,
    pub warnings: Vec<String>,
}

/// At startup and in `sp check`: each credential whose source is static (`file`, `env`,
/// `systemd`; a `command` source is checked when it is run) is read once, not
/// remembered, and held to its minimum; a source that cannot be read now is left to the
/// call that needs it (it may appear later). A minimum lowered below
/// [`MIN_SECRET_BYTES`] is a warning.
pub(crate) fn check_static(policy: &crate::policy::Policy, env: &dyn Fn(&str) -> Option<std::ffi::OsString>) -> StaticCheck {
    let mut out = StaticCheck::default();
    for c in policy.credentials.values() {
        if c.min_secret_bytes < MIN_SECRET_BYTES {
            out.warnings.push(format!(
                "credential {:?}: min_secret_bytes is {}, below the default {MIN_SECRET_BYTES}: a secret this short can match \
                 ordinary text, which is then redacted from bodies and journal reasons",
                c.name, c.min_secret_bytes
            ));
        }
        if matches!(c.source, SecretSource::Command { .. }) {
            continue;
        }
        let json = matches!(c.inject, crate::policy::Injection::AwsSigV4(_));
        // Before the session serves: read on this thread (`sys::at_startup`).
        if let Ok(value) = crate::sys::at_startup(|| source::read(&c.name, &c.source, json, env))
            && let Err(e) = Admission::of(c).check(&c.name, value.expose())
        {
            out.refused.push(e);
        }
    }
    out
}

/// Every secret any [`Vault`] of this process has read: all of them, with their
/// encodings, for the journal's outside text; and those at least [`MIN_SECRET_BYTES`]
/// long, for log lines (`logging.rs`).
#[derive(Default)]
struct Process {
    all: Vault,
    logs: crate::gate::redact::Redactor,
}

static PROCESS: std::sync::LazyLock<std::sync::RwLock<Process>> = std::sync::LazyLock::new(Default::default);

fn process() -> std::sync::RwLockReadGuard<'static, Process> {
    PROCESS.read().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// A journal row's outside text (`target`, `reason`), scrubbed against every secret read
/// in this process (`audit/row.rs`).
pub(crate) fn scrub_journal_text(text: String) -> Scrubbed<String> {
    process().all.scrub_text(text)
}

/// A whole log line, scrubbed against every secret of at least [`MIN_SECRET_BYTES`] read
/// in this process (`logging.rs` says why only those). A replacement that cuts a
/// character leaves U+FFFD in its place.
pub(crate) fn scrub_log_line(line: &str) -> Scrubbed<String> {
    Scrubbed(match process().logs.redact(line.as_bytes()) {
        Some(out) => String::from_utf8_lossy(&out).into_owned(),
        None => line.to_owned(),
    })
}

// ---------------------------------------------------------------------------------------
// Scrub first, then cut (issue 31, section 3). Outside text is shortened only here (and
// through `gate::outside`, which calls these): scrubbed whole, then cut, so a secret
// split by the cut is still found whole. A cut made first kept a prefix below the
// redactor's minimum run, which then reached the agent, the journal and the log.

impl Vault {
    /// Outside text scrubbed whole, then cut to `max_chars` characters (a final `…`
    /// when something was cut).
    pub(crate) fn scrub_then_cut(&self, text: &str, max_chars: usize) -> Scrubbed<String> {
        let mut whole = text.to_owned();
        self.scrub_str(&mut whole);
        Scrubbed(crate::sys::short(&whole, max_chars, crate::sys::Ellipsis::Marked))
    }
}

/// [`Vault::scrub_then_cut`] against every secret read in this process (for places no
/// Vault is passed to: an error's `Display`, a reader thread).
pub(crate) fn scrub_outside_then_cut(text: &str, max_chars: usize) -> Scrubbed<String> {
    process().all.scrub_then_cut(text, max_chars)
}

/// How many bytes of a line from an outside stream to keep so that its first `keep`
/// bytes can be scrubbed as if the line were whole: `keep` plus the longest spelling of
/// any secret read so far ([`Vault::longest_spelling`]), so an echo that begins before
/// `keep` ends inside the window (one padded longer, crossing the window's end, is
/// caught by its beginning: [`scrub_line_then_cut`]).
pub(crate) fn outside_window(keep: usize) -> usize {
    keep.saturating_add(process().all.longest_spelling())
}

/// The first `keep` bytes of a line from an outside stream (an upstream's stderr, an
/// approver's output), of which `window` holds the first [`outside_window`] bytes
/// (`window_cut`: the line went on), scrubbed against every secret read in this process
/// before the cut (`redact::Redactor::redact_prefix`); whether anything was cut.
pub(crate) fn scrub_line_then_cut(window: &[u8], keep: usize, window_cut: bool) -> (Scrubbed<String>, bool) {
    let (bytes, cut) = process().all.redactor.redact_prefix(window, keep, window_cut);
    (Scrubbed(String::from_utf8_lossy(&bytes).into_owned()), cut)
}
mod preload;

#[cfg(test)]
mod tests;
