//! Secrets: read at the moment an authorized call needs one, remembered for redaction.
//!
//! A [`Secret`] prints as `Secret(***)` in `Debug` and has no `Display`: it cannot end up
//! in a log line or an error message by accident, and its memory is zeroed when dropped
//! (`zeroize`). The [`Vault`] is the only reader; every value it reads is remembered for
//! the rest of the process, with its encodings, so [`Vault::scrub`] can replace any echo
//! of it in a result before the result leaves (DESIGN.md, "redact").
//!
//! Sources (`sp-policy(5)`):
//! - `file` and `systemd` (`$CREDENTIALS_DIRECTORY/<name>`): a regular file owned by the
//!   effective user (or root) with no group or world permission bits, like OpenSSH
//!   demands of private keys (for `systemd`, group bits are allowed: systemd grants the
//!   service user access through an ACL, which shows as group bits), at most 64 KiB, one
//!   trailing newline trimmed. The checks run on the opened descriptor, so a file swapped
//!   between check and read is checked. Opened through `sys` (issue 8 point 7): a
//!   symbolic link is resolved first, then a FIFO, socket or device is refused at
//!   once, without waiting for a writer, and a file system that does not answer fails
//!   the call after `sys::READ_TIMEOUT`.
//! - `env`: a variable of the `sp` process (MCP clients pass servers a filtered
//!   environment: prefer the other sources).
//! - `command`: argv, no shell, stdin `/dev/null`, stderr discarded (it could echo the
//!   secret), stdout is the secret; it runs in its own process group, which is killed
//!   when the timeout expires. A non-zero exit is an error whose message has the status
//!   only.
//!
//! Redaction (`redact.rs`) covers each secret in any ASCII letter case, hex, percent-,
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
//! [`Scrubbed`] value is outside content that passed the [`Vault`], and only the Vault
//! builds one (or [`Scrubbed::own`] from a `&'static str`, sp's own words); the result
//! assembly (`wire::ToolResult`) takes its outside pieces only as `Scrubbed`, and
//! serialises the envelope around them without scrubbing it.
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
use std::io::Read;
use std::time::{Duration, Instant};

use serde_json::{Map, Value};
use zeroize::Zeroizing;

use crate::policy::{io_reason, SecretSource};

pub(crate) const MAX_SECRET_FILE_BYTES: u64 = 64 * 1024;

/// The shortest secret accepted by default (bytes). Real credentials are far longer:
/// API keys and bearer tokens 20 to 64 characters and more (GitHub 40, Stripe 32+, AWS
/// secret keys 40, OAuth2 access tokens 20+, JWTs hundreds), generated passwords 12+.
/// Eight bytes is below all of them and above the words and numbers ordinary text is
/// made of (sp-policy(5), CREDENTIALS).
pub(crate) const MIN_SECRET_BYTES: usize = 8;

pub struct Secret(Zeroizing<String>);

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Secret(***)")
    }
}

impl Secret {
    /// A secret from a literal (tests of the code that places secrets).
    #[cfg(test)]
    pub(crate) fn from_literal(s: &str) -> Secret {
        Secret(Zeroizing::new(s.to_owned()))
    }

    /// The value, for the one place that injects it into a request.
    pub fn expose(&self) -> &str {
        &self.0
    }
}

/// Why a secret could not be read. Never contains the secret or any part of the file.
#[derive(Debug, PartialEq, Eq)]
pub enum SecretError {
    Unreadable { credential: String, why: String },
    TooOpen { credential: String, mode: u32 },
    WrongOwner { credential: String },
    EnvMissing { credential: String, var: String },
    Empty { credential: String },
    Invalid { credential: String, why: &'static str },
    NoCredentialsDirectory { credential: String },
    Command { credential: String, why: String },
    /// Shorter than the credential's minimum (`what`: "secret", "password", ...).
    TooShort { credential: String, what: &'static str, min: usize },
}

impl fmt::Display for SecretError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SecretError::Unreadable { credential, why } => {
                write!(f, "credential {credential:?}: secret file cannot be read: {why}")
            }
            SecretError::TooOpen { credential, mode } => write!(
                f,
                "credential {credential:?}: secret file permissions {mode:04o} are too open (it must not be readable by group or others)"
            ),
            SecretError::WrongOwner { credential } => {
                write!(f, "credential {credential:?}: secret file is not owned by this user or root")
            }
            SecretError::EnvMissing { credential, var } => {
                write!(f, "credential {credential:?}: environment variable {var} is not set")
            }
            SecretError::Empty { credential } => write!(f, "credential {credential:?}: secret is empty"),
            SecretError::Invalid { credential, why } => write!(f, "credential {credential:?}: {why}"),
            SecretError::NoCredentialsDirectory { credential } => write!(
                f,
                "credential {credential:?}: $CREDENTIALS_DIRECTORY is not set (run sp under systemd with LoadCredential=)"
            ),
            SecretError::Command { credential, why } => write!(f, "credential {credential:?}: secret command {why}"),
            SecretError::TooShort { credential, what, min } => write!(
                f,
                "credential {credential:?}: the {what} is shorter than {min} bytes, too short to be told from ordinary text; \
                 it is refused (sp-policy(5), CREDENTIALS: min_secret_bytes)"
            ),
        }
    }
}

impl std::error::Error for SecretError {}

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

    /// Like [`Vault::read`] for a JSON document (issue #13, `aws_sigv4`): newlines, tabs
    /// and carriage returns are allowed (pretty-printed JSON, `aws configure
    /// export-credentials`), other control characters are not.
    pub fn read_json(&mut self, credential: &str, source: &SecretSource) -> Result<Secret, SecretError> {
        self.read_text(credential, source, true, &crate::sys::env_var)
    }

    /// [`Vault::read`] with the process environment given explicitly (`env` and
    /// `systemd` sources read it), so tests need no `set_var`.
    #[cfg_attr(not(test), allow(dead_code))]
    pub(crate) fn read_in(&mut self, credential: &str, source: &SecretSource, env: &dyn Fn(&str) -> Option<std::ffi::OsString>) -> Result<Secret, SecretError> {
        self.read_text(credential, source, false, env)
    }

    fn read_text(
        &mut self,
        credential: &str,
        source: &SecretSource,
        json: bool,
        env: &dyn Fn(&str) -> Option<std::ffi::OsString>,
    ) -> Result<Secret, SecretError> {
        let value = read_value(credential, source, json, env)?;
        // Refused before it is remembered: a short secret never reaches the redactor.
        self.admission(credential).check(credential, &value)?;
        self.remember(credential, &value);
        Ok(Secret(value))
    }

    /// An SSH private key file (issue #4): the same checks as a `file` source (owner-only,
    /// at most 64 KiB, read through the opened descriptor), but the text is kept whole,
    /// newlines included. The whole key and each of its base64 body lines are remembered
    /// for redaction, so a key echoed whole or line by line never leaves in a result.
    pub(crate) fn read_key_file(&mut self, credential: &str, path: &std::path::Path) -> Result<Secret, SecretError> {
        let mut text = Zeroizing::new(read_file(credential, path)?);
        if text.trim().is_empty() {
            return Err(SecretError::Empty { credential: credential.to_owned() });
        }
        if text.contains('\0') {
            return Err(SecretError::Invalid { credential: credential.to_owned(), why: "key file contains NUL" });
        }
        let lines: Vec<Zeroizing<String>> = text
            .lines()
            .map(str::trim)
            .filter(|l| l.len() >= 16 && !l.starts_with("-----") && !l.contains(':'))
            .map(|l| Zeroizing::new(l.to_owned()))
            .collect();
        for line in &lines {
            self.remember(credential, line);
        }
        self.remember(credential, &text);
        text.push('\n');
        Ok(Secret(text))
    }

    /// Remembers a value derived from a credential for redaction (issue #13: the AWS
    /// secret key and session token, each signature, the OAuth2 client secret and tokens).
    pub fn remember(&mut self, credential: &str, value: &str) {
        // Issue 8 point 3: the logger and the journal scrub against every secret read.
        let mut process = PROCESS.write().unwrap_or_else(std::sync::PoisonError::into_inner);
        if process.all.remember_here(credential, value) {
            // The logger's redactor holds only what is long enough to be told from the
            // words of a log line (`logging.rs`).
            process.logs.add_min(credential, value, MIN_SECRET_BYTES);
        }
        drop(process);
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
        if cut
            && let Some((_, name)) = self.tail_match(bytes) {
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

    /// Whether any spelling of a secret is in the headers (as [`Vault::scrub_headers`]
    /// reads them); the credentials found.
    pub(crate) fn echoed_in_headers(&self, headers: &[(String, String)]) -> Vec<String> {
        let all: String = headers.iter().flat_map(|(n, v)| [n.as_str(), v.as_str()]).collect();
        let values: String = headers.iter().map(|(_, v)| v.as_str()).collect();
        let names: String = headers.iter().map(|(n, _)| n.as_str()).collect();
        let mut found: Vec<String> =
            [all, values, names].iter().flat_map(|t| self.echoed(t.as_bytes())).map(str::to_owned).collect();
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
        let mut map = match fields {
            Value::Object(m) => m,
            other => Map::from_iter([("value".to_owned(), other)]),
        };
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

/// Outside content that has been through the [`Vault`]'s redactor, or sp's own words
/// ([`Scrubbed::own`]): what may be written into a tool result (`wire::ToolResult`) next
/// to the envelope sp builds itself. Only this module builds one, so a piece of outside
/// text cannot reach a result without being scrubbed, and sp's own keys and codes never
/// pass the redactor. (The stdout writer, the journal and the logger can take this type
/// too: DESIGN.md, "one Vault and Scrubbed<T>".)
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct Scrubbed<T>(T);

impl<T> Scrubbed<T> {
    pub(crate) fn get(&self) -> &T {
        &self.0
    }

    pub(crate) fn into_inner(self) -> T {
        self.0
    }
}

impl Scrubbed<String> {
    /// sp's own words: a `&'static str` is written by sp, never by a peer.
    pub(crate) fn own(text: &'static str) -> Scrubbed<String> {
        Scrubbed(text.to_owned())
    }

    pub(crate) fn as_str(&self) -> &str {
        &self.0
    }
}

impl Scrubbed<Map<String, Value>> {
    /// A result made only of sp's words and the operator's policy (`sp_inventory`:
    /// credential names, bound hosts and paths, SSH host names). Nothing in it came
    /// from outside, and a policy holds no secret (secrets live in sources), so it is
    /// taken as it is: its keys and names stay as sp and the operator wrote them.
    pub(crate) fn from_policy(fields: Value) -> Scrubbed<Map<String, Value>> {
        Scrubbed(match fields {
            Value::Object(m) => m,
            other => Map::from_iter([("value".to_owned(), other)]),
        })
    }

    /// Both sets of scrubbed fields, `other`'s winning a name both have.
    pub(crate) fn extend(&mut self, other: Scrubbed<Map<String, Value>>) {
        self.0.extend(other.0);
    }
}

impl fmt::Display for Scrubbed<String> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// Reads and checks a source's value (not empty, no control characters but, for JSON,
/// line breaks and tabs); neither remembered nor held to a minimum here.
fn read_value(
    credential: &str,
    source: &SecretSource,
    json: bool,
    env: &dyn Fn(&str) -> Option<std::ffi::OsString>,
) -> Result<Zeroizing<String>, SecretError> {
    let value = Zeroizing::new(match source {
        SecretSource::File(path) => read_file(credential, path)?,
        SecretSource::Systemd(name) => {
            let dir = env("CREDENTIALS_DIRECTORY")
                .filter(|d| !d.is_empty())
                .ok_or_else(|| SecretError::NoCredentialsDirectory { credential: credential.to_owned() })?;
            read_file_checked(credential, &std::path::Path::new(&dir).join(name), SYSTEMD_MODE_MASK)?
        }
        SecretSource::Env(var) => env(var).and_then(|v| v.into_string().ok()).ok_or_else(|| SecretError::EnvMissing {
            credential: credential.to_owned(),
            var: var.clone(),
        })?,
        SecretSource::Command { argv, timeout } => run_command(credential, argv, *timeout)?,
    });
    if value.is_empty() {
        return Err(SecretError::Empty { credential: credential.to_owned() });
    }
    if value.chars().any(|c| c.is_control() && !(json && matches!(c, '\n' | '\r' | '\t'))) {
        return Err(SecretError::Invalid {
            credential: credential.to_owned(),
            why: "secret contains control characters (only one trailing newline is trimmed)",
        });
    }
    Ok(value)
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
        if let Ok(value) = read_value(&c.name, &c.source, json, env)
            && let Err(e) = Admission::of(c).check(&c.name, &value)
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
/// in this process (issue 8 point 3; `audit/row.rs`).
pub(crate) fn scrub_journal_text(text: String) -> Scrubbed<String> {
    process().all.scrub_text(text)
}

/// A whole log line, scrubbed against every secret of at least [`MIN_SECRET_BYTES`] read
/// in this process (`logging.rs` says why only those).
pub(crate) fn scrub_log_line(bytes: &mut Vec<u8>) {
    if let Some(out) = process().logs.redact(bytes) {
        *bytes = out;
    }
}

fn run_command(credential: &str, argv: &[String], timeout: Duration) -> Result<String, SecretError> {
    use crate::sys::{Child, Waited};
    use std::process::Stdio;
    let fail = |why: String| SecretError::Command { credential: credential.to_owned(), why };
    let mut cmd = crate::sys::command(&argv[0]);
    cmd.args(&argv[1..]).stdin(Stdio::null()).stdout(Stdio::piped()).stderr(Stdio::null());
    let mut child = Child::spawn(&mut cmd).map_err(|e| fail(format!("{:?} could not be started: {}", argv[0], io_reason(&e))))?;
    let mut stdout = child.child.stdout.take().expect("piped");
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        // The most it may hold, at once: a growing buffer would leave copies of the
        // secret's first bytes in freed memory that nothing zeroes.
        let mut buf = Zeroizing::new(Vec::with_capacity(MAX_SECRET_FILE_BYTES as usize + 1));
        let read = (&mut stdout).take(MAX_SECRET_FILE_BYTES + 1).read_to_end(&mut buf);
        let _ = tx.send(read.map(|_| buf));
    });
    let deadline = Instant::now() + timeout;
    let timed_out = || fail(format!("timed out after {}s", timeout.as_secs()));
    // Its exit first, then its output: when it exits, whatever it started is killed
    // (its group, and what left the group and came to `sp` the subreaper:
    // `sys::Child::kill_group`), so a daemon holding its stdout cannot hold the read.
    let status = match child.wait_until(deadline, || false) {
        Waited::Exited(status) => status,
        _ => {
            child.kill();
            return Err(timed_out());
        }
    };
    child.kill_group();
    let bytes = match rx.recv_timeout(deadline.saturating_duration_since(Instant::now()).max(Duration::from_millis(100))) {
        Ok(Ok(bytes)) => bytes,
        Ok(Err(e)) => return Err(fail(format!("output could not be read: {}", io_reason(&e)))),
        Err(_) => return Err(timed_out()),
    };
    if !status.success() {
        return Err(fail(format!("failed ({status})")));
    }
    if bytes.len() as u64 > MAX_SECRET_FILE_BYTES {
        return Err(fail(format!("printed more than {MAX_SECRET_FILE_BYTES} bytes")));
    }
    let mut text = String::from_utf8(bytes.to_vec()).map_err(|_| fail("printed something that is not UTF-8".into()))?;
    trim_newline(&mut text);
    Ok(text)
}

fn trim_newline(text: &mut String) {
    if text.ends_with('\n') {
        text.pop();
        if text.ends_with('\r') {
            text.pop();
        }
    }
}

/// Permission bits a `file` source must not have: group and world.
const FILE_MODE_MASK: u32 = 0o077;
/// For `systemd` sources only world bits: systemd makes credentials root-owned 0400 and
/// grants the service user read access through an ACL, which shows as group bits
/// (the ACL mask); the directory itself is private to the service.
const SYSTEMD_MODE_MASK: u32 = 0o007;

fn read_file(credential: &str, path: &std::path::Path) -> Result<String, SecretError> {
    read_file_checked(credential, path, FILE_MODE_MASK)
}

fn read_file_checked(credential: &str, path: &std::path::Path, forbidden_mode: u32) -> Result<String, SecretError> {
    use crate::sys::{self, SysError};
    // Issue 8 point 7: opened without blocking (a FIFO is refused at once), checked on
    // the descriptor, read on a helper thread bounded by `sys::READ_TIMEOUT`.
    // A symbolic link is followed (sp-policy(5)); the file reached is checked.
    let rules = sys::Rules::owned(forbidden_mode, MAX_SECRET_FILE_BYTES).following();
    let mut bytes = sys::read_within(path, rules, sys::READ_TIMEOUT).map_err(|e| match e {
        SysError::TooOpen { mode, .. } => SecretError::TooOpen { credential: credential.to_owned(), mode },
        SysError::WrongOwner { .. } => SecretError::WrongOwner { credential: credential.to_owned() },
        e => SecretError::Unreadable { credential: credential.to_owned(), why: e.to_string() },
    })?;
    let mut text = String::from_utf8(std::mem::take(&mut *bytes)).map_err(|e| {
        zeroize::Zeroize::zeroize(&mut e.into_bytes());
        SecretError::Invalid { credential: credential.to_owned(), why: "secret file is not UTF-8" }
    })?;
    trim_newline(&mut text);
    Ok(text)
}

// Issue #12: the one redaction point of a tool result. Its outside pieces are scrubbed as
// they are made (`Scrubbed`); `server.rs` asks [`withholds`] of every result it sends.

/// What a withheld result says (and its journal row's reason).
pub(crate) const WITHHELD: &str = "the answer is withheld: its JSON text spells a secret of this session in a form that no single value shows";

/// Whether a tool result must be withheld. Its outside pieces (the error message and the
/// field values) were scrubbed value by value; the wire carries them as JSON text (twice:
/// `structuredContent` and the text block), where a string's escapes (`\"`, `\\`, `\n`,
/// `\u0001`) can spell a secret that no value shows. Such a secret cannot be cut out of
/// the middle of the JSON without breaking it, so it withholds the whole result. Each
/// outside string (object keys included) that JSON escapes is searched in its escaped
/// form, without its quotes and without building it ([`EchoScan`]); sp's own keys and
/// codes, and the JSON punctuation around the strings, are not searched, so no short
/// secret can make sp withhold every answer.
pub(crate) fn withholds(vault: &Vault, result: &crate::mcp::model::ToolResult) -> bool {
    if vault.is_empty() {
        return false;
    }
    let (message, fields) = result.outside();
    let found = message.is_some_and(|m| EchoScan::spells_a_secret(vault, m)) || fields.values().any(|v| escaped_echo(vault, v));
    if found {
        log::warn!("a result's JSON text spelled a secret that no single value showed: the result is withheld");
    }
    found
}

/// An upstream MCP server's `CallToolResult` as a `Value` (`upstream/`), scrubbed in
/// place: everything the upstream wrote is outside text (each content block's text and
/// data, `structuredContent` with its own keys), except the members sp re-emits as MCP
/// vocabulary (`content`, `structuredContent`, `isError`, each block's keys and its
/// `type`), which no secret may rewrite. Then, as for a tool's result ([`withholds`]),
/// a string whose JSON escapes alone spell a secret withholds the whole result, which
/// becomes an `SP_UPSTREAM` error. True when it was withheld.
#[cfg_attr(not(test), expect(dead_code, reason = "upstream results are not served yet (upstream/ tests use it)"))]
pub(crate) fn scrub_result(vault: &Vault, result: &mut Value) -> bool {
    if vault.is_empty() {
        return false;
    }
    let Value::Object(members) = result else {
        vault.scrub_value(result);
        return false;
    };
    let mut found = false;
    for (key, v) in members.iter_mut() {
        match (key.as_str(), v) {
            ("isError", Value::Bool(_)) => {}
            ("content", Value::Array(blocks)) => {
                for block in blocks {
                    match block {
                        Value::Object(b) => {
                            for (k, v) in b.iter_mut().filter(|(k, _)| *k != "type") {
                                vault.scrub_value(v);
                                found = found || EchoScan::spells_a_secret(vault, k) || escaped_echo(vault, v);
                            }
                        }
                        other => {
                            vault.scrub_value(other);
                            found = found || escaped_echo(vault, other);
                        }
                    }
                }
            }
            (_, v) => {
                vault.scrub_value(v);
                found = found || escaped_echo(vault, v);
            }
        }
    }
    if found {
        log::warn!("an upstream result's JSON text spelled a secret that no single value showed: the result is withheld");
        let code = crate::gate::outcome::ToolCode::Upstream.as_str();
        let text = crate::mcp::model::object([("text", Value::String(format!("{code}: {WITHHELD}"))), ("type", "text".into())]);
        let error = crate::mcp::model::object([("code", code.into()), ("message", WITHHELD.into())]);
        *result = crate::mcp::model::object([
            ("content", Value::Array(vec![text])),
            ("isError", true.into()),
            ("structuredContent", crate::mcp::model::object([("error", error)])),
        ]);
    }
    found
}

fn escaped_echo(vault: &Vault, value: &Value) -> bool {
    match value {
        Value::String(s) => EchoScan::spells_a_secret(vault, s),
        Value::Array(items) => items.iter().any(|v| escaped_echo(vault, v)),
        Value::Object(m) => m.iter().any(|(k, v)| EchoScan::spells_a_secret(vault, k) || escaped_echo(vault, v)),
        _ => false,
    }
}

/// A sink for a string's JSON text that searches it for secrets in overlapping windows,
/// so memory stays at one window however long the string is. The overlap is longer than
/// any spelling the redactor looks for, so every spelling lies whole inside some window.
/// The string's opening and closing quotes are left out.
struct EchoScan<'v> {
    vault: &'v Vault,
    window: Vec<u8>,
    overlap: usize,
    found: bool,
    /// The opening quote is still to come.
    opening: bool,
}

impl EchoScan<'_> {
    const WINDOW: usize = 1024 * 1024;

    fn spells_a_secret(vault: &Vault, s: &str) -> bool {
        // Only a string that JSON escapes can read differently as JSON text.
        if !s.bytes().any(|b| b == b'"' || b == b'\\' || b < 0x20) {
            return false;
        }
        let overlap = vault.longest_spelling().saturating_add(64).min(Self::WINDOW / 2);
        let capacity = (Self::WINDOW + overlap).min(2 * s.len() + 16);
        let mut scan = EchoScan { vault, window: Vec::with_capacity(capacity), overlap, found: false, opening: true };
        let _ = serde_json::to_writer(&mut scan, s);
        // The closing quote.
        scan.window.pop();
        scan.check();
        scan.found
    }

    fn check(&mut self) {
        self.found = self.found || self.vault.found_in(&self.window);
    }
}

impl std::io::Write for EchoScan<'_> {
    fn write(&mut self, mut buf: &[u8]) -> std::io::Result<usize> {
        let n = buf.len();
        if self.found {
            return Ok(n);
        }
        if self.opening && !buf.is_empty() {
            self.opening = false;
            buf = &buf[1..];
        }
        self.window.extend_from_slice(buf);
        // Keeps one byte more than the overlap: it may be the closing quote.
        if self.window.len() > Self::WINDOW + self.overlap {
            let last = self.window.pop();
            self.check();
            let keep = self.window.len() - self.overlap;
            self.window.drain(..keep);
            self.window.extend(last);
        }
        Ok(n)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use base64::Engine as _;
    use serde_json::json;
    use std::os::unix::fs::PermissionsExt;

    /// A file in the test's private temporary directory (removed with it).
    fn temp(dir: &tempfile::TempDir, name: &str, content: &str, mode: u32) -> std::path::PathBuf {
        let p = dir.path().join(name);
        std::fs::write(&p, content).unwrap();
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(mode)).unwrap();
        p
    }

    #[test]
    fn file_rules() {
        let tmp = tempfile::tempdir().unwrap();
        let mut v = Vault::new();
        let ok = temp(&tmp, "ok", "s3cr3t-value\n", 0o600);
        assert_eq!(v.read("c", &SecretSource::File(ok)).unwrap().expose(), "s3cr3t-value");
        let open = temp(&tmp, "open", "x", 0o644);
        assert_eq!(v.read("c", &SecretSource::File(open)).unwrap_err(), SecretError::TooOpen { credential: "c".into(), mode: 0o644 });
        let empty = temp(&tmp, "empty", "\n", 0o400);
        assert_eq!(v.read("c", &SecretSource::File(empty)).unwrap_err(), SecretError::Empty { credential: "c".into() });
        let two = temp(&tmp, "two", "a\nb\n", 0o600);
        assert!(matches!(v.read("c", &SecretSource::File(two)), Err(SecretError::Invalid { .. })));
        let missing = std::path::PathBuf::from("/nonexistent/sp/secret");
        assert!(matches!(v.read("c", &SecretSource::File(missing)), Err(SecretError::Unreadable { .. })));
        let big = temp(&tmp, "big", &"x".repeat(MAX_SECRET_FILE_BYTES as usize + 1), 0o600);
        assert!(matches!(v.read("c", &SecretSource::File(big)), Err(SecretError::Unreadable { .. })));
    }

    #[test]
    fn debug_never_shows_the_value() {
        let s = Secret(Zeroizing::new("hunter2".to_owned()));
        assert_eq!(format!("{s:?}"), "Secret(***)");
        let mut v = Vault::new();
        v.remember("c", "hunter2");
        assert!(!format!("{v:?}").contains("hunter2"));
    }

    #[test]
    fn command_source() {
        let cmd = |args: &[&str], t: u64| SecretSource::Command {
            argv: args.iter().map(|a| a.to_string()).collect(),
            timeout: Duration::from_secs(t),
        };
        let mut v = Vault::new();
        let ok = v.read("c", &cmd(&["sh", "-c", "echo from-cmd; echo noise >&2"], 5)).unwrap();
        assert_eq!(ok.expose(), "from-cmd");
        let failed = v.read("c", &cmd(&["sh", "-c", "echo leaked-secret; exit 3"], 5)).unwrap_err();
        assert!(failed.to_string().contains("failed (exit status: 3)"), "{failed}");
        assert!(!failed.to_string().contains("leaked-secret"));
        let t = Instant::now();
        let slow = v.read("c", &cmd(&["sh", "-c", "sleep 30 & sleep 30"], 1)).unwrap_err();
        assert!(slow.to_string().contains("timed out"), "{slow}");
        assert!(t.elapsed() < Duration::from_secs(10), "the command was not killed");
        let missing = v.read("c", &cmd(&["/nonexistent/sp-secret-tool"], 1)).unwrap_err();
        assert!(missing.to_string().contains("could not be started"), "{missing}");
    }

    #[test]
    fn systemd_source_uses_credentials_directory() {
        let tmp = tempfile::tempdir().unwrap();
        // CREDENTIALS_DIRECTORY is read at use, from the environment given.
        temp(&tmp, "sd-cred", "from-systemd\n", 0o400);
        let dir = tmp.path().as_os_str().to_owned();
        let with_dir = move |k: &str| (k == "CREDENTIALS_DIRECTORY").then(|| dir.clone());
        let mut v = Vault::new();
        let source = SecretSource::Systemd("sd-cred".into());
        assert_eq!(v.read_in("c", &source, &with_dir).unwrap().expose(), "from-systemd");
        assert_eq!(
            v.read_in("c", &source, &|_| None).unwrap_err(),
            SecretError::NoCredentialsDirectory { credential: "c".into() }
        );
    }

    #[test]
    fn scrub_encodings() {
        let mut v = Vault::new();
        let secret = "us\"er:p@ss/w rd+é";
        v.remember("c", secret);
        let b64 = base64::engine::general_purpose::STANDARD.encode(secret);
        let b64url = base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(secret);
        let form: String = url::form_urlencoded::byte_serialize(secret.as_bytes()).collect();
        let json_escaped = serde_json::to_string(secret).unwrap();
        for echo in [
            secret.to_owned(),
            "us%22er%3Ap%40ss%2Fw%20rd%2B%C3%A9".to_owned(),
            "us%22er%3ap%40ss%2fw%20rd%2b%c3%a9".to_owned(),
            form,
            json_escaped[1..json_escaped.len() - 1].to_owned(),
            format!("Basic {b64}"),
            b64url,
        ] {
            let mut doc = json!({"body": format!("<<{echo}>>")});
            v.scrub_value(&mut doc);
            let prefix = if echo.starts_with("Basic ") { "Basic " } else { "" };
            assert_eq!(doc["body"], format!("<<{prefix}[REDACTED:c]>>"), "{echo}");
        }
        let mut bytes = b"\xff\x00us\"er:p@ss/w rd+\xc3\xa9\x00".to_vec();
        v.scrub_bytes(&mut bytes);
        assert_eq!(bytes, b"\xff\x00[REDACTED:c]\x00");
    }

    #[test]
    fn truncated_tail() {
        let mut v = Vault::new();
        v.remember("c", "SECRETVALUE");
        let mut body = b"token: SECRE".to_vec();
        v.scrub_bytes(&mut body);
        v.scrub_truncated_tail(&mut body);
        assert_eq!(body, b"token: [REDACTED:c]");
        let mut clean = b"token: nothing".to_vec();
        v.scrub_truncated_tail(&mut clean);
        assert_eq!(clean, b"token: nothing");
        // three bytes are below the threshold: left as they are
        let mut short = b"xxSEC".to_vec();
        v.scrub_truncated_tail(&mut short);
        assert_eq!(short, b"xxSEC");
        let mut four = b"xxSECR".to_vec();
        v.scrub_truncated_tail(&mut four);
        assert_eq!(four, b"xx[REDACTED:c]");
    }

    #[test]
    fn systemd_mode_rule() {
        let tmp = tempfile::tempdir().unwrap();
        // group bits are how systemd's ACL shows; world bits are still refused
        let p = temp(&tmp, "sd-acl", "x", 0o440);
        assert!(read_file_checked("c", &p, SYSTEMD_MODE_MASK).is_ok());
        assert_eq!(read_file_checked("c", &p, FILE_MODE_MASK).unwrap_err(), SecretError::TooOpen { credential: "c".into(), mode: 0o440 });
        let w = temp(&tmp, "sd-world", "x", 0o404);
        assert_eq!(read_file_checked("c", &w, SYSTEMD_MODE_MASK).unwrap_err(), SecretError::TooOpen { credential: "c".into(), mode: 0o404 });
    }

    #[test]
    fn scrub_everywhere() {
        let mut v = Vault::new();
        v.remember("short", "abc");
        v.remember("long", "abcdef");
        let mut doc = json!({"abcdef-key": ["xx abcdef yy", {"n": "abc"}], "k": 1});
        v.scrub_value(&mut doc);
        assert_eq!(doc, json!({"[REDACTED:long]-key": ["xx [REDACTED:long] yy", {"n": "[REDACTED:short]"}], "k": 1}));
    }

    /// A tool result as the server makes it: fields scrubbed by the Vault, withheld when
    /// their JSON text alone spells a secret, then the typed answer as written.
    fn answer(vault: &Vault, fields: Value) -> (bool, Value, String) {
        let r = crate::mcp::model::ToolResult::ok(vault.scrub_fields(fields));
        let withheld = withholds(vault, &r);
        let r = if withheld { crate::mcp::model::ToolResult::error(crate::gate::outcome::ToolCode::Upstream, Scrubbed::own(WITHHELD)) } else { r };
        let call = r.into_call();
        let line = serde_json::to_string(&crate::mcp::model::CallAnswer { id: &json!(1), result: &call, stateless: false }).unwrap();
        (withheld, serde_json::from_str(&line).unwrap(), line)
    }

    #[test]
    fn scrubbed_fields_cover_numbers_and_keys_and_the_text_block_repeats_them() {
        let mut vault = Vault::new();
        vault.remember("pin", "31415926535");
        let (withheld, v, line) =
            answer(&vault, json!({"json": {"n": 31415926535u64, "s": "x&#51;1415926535"}, "headers": {"X-31415926535": "v"}, "status": 200}));
        assert!(!withheld);
        let sc = &v["result"]["structuredContent"];
        assert_eq!(sc["json"]["n"], "[REDACTED:pin]");
        assert_eq!(sc["json"]["s"], "x[REDACTED:pin]");
        assert!(sc["headers"].get("X-[REDACTED:pin]").is_some(), "{sc}");
        let text = v["result"]["content"][0]["text"].as_str().unwrap();
        assert_eq!(serde_json::from_str::<Value>(text).unwrap(), *sc);
        assert!(!line.contains("1415926535"), "{line}");
    }

    /// Issue #20: the result's own words are never scrubbed: a secret that spells a key,
    /// a code or a field name of the envelope leaves it whole; outside text that holds it
    /// is still redacted.
    #[test]
    fn a_short_secret_never_touches_the_envelope() {
        for secret in ["e", "\"", "t", "content", "text", "type", "isError", "structuredContent", "status", "SP_UPSTREAM", "200", "1", ":", "{"] {
            let mut vault = Vault::new();
            vault.remember("x", secret);
            let body = format!("a body that says {secret} twice: {secret}");
            let (_, v, line) = answer(&vault, json!({"status": 200, "body": body, "headers": {"content-type": "text/plain"}}));
            assert!(!line.contains("\\u0000") && !line.contains("sp:text"), "{secret:?}: {line}");
            let result = v["result"].as_object().unwrap();
            assert_eq!(result.keys().collect::<Vec<_>>(), ["content", "isError", "structuredContent"], "{secret:?}: {line}");
            let block = v["result"]["content"][0].as_object().unwrap();
            assert_eq!(block.keys().collect::<Vec<_>>(), ["text", "type"], "{secret:?}");
            assert_eq!(block["type"], "text", "{secret:?}");
            let sc = v["result"]["structuredContent"].as_object().unwrap();
            if v["result"]["isError"] == true {
                // Only JSON punctuation can make the escaped text spell a secret; then the
                // result is withheld, whole, in sp's own words.
                assert!(secret == "\"", "{secret:?} withheld: {line}");
                assert_eq!(sc["error"], json!({"code": "SP_UPSTREAM", "message": WITHHELD}));
                continue;
            }
            assert_eq!(sc.keys().collect::<Vec<_>>(), ["body", "headers", "status"], "{secret:?}: {line}");
            assert_eq!(sc["status"], 200, "{secret:?}");
            // Outside text over-redacts (a one-letter secret is in most words); that is
            // the safe side, and the reason short secrets are refused unless lowered.
            let scrubbed = vault.scrub_text(body.clone()).into_inner();
            assert!(scrubbed.ends_with("[REDACTED:x]") && !scrubbed.contains(&format!(" {secret}")), "{secret:?}: {scrubbed}");
            assert_eq!(sc["body"], scrubbed, "{secret:?}");
            let text = v["result"]["content"][0]["text"].as_str().unwrap();
            assert_eq!(serde_json::from_str::<Value>(text).unwrap(), v["result"]["structuredContent"], "{secret:?}");
        }
    }

    /// An upstream's result (`upstream/`, not yet served): MCP's members, block keys and
    /// `type` stay; what the upstream wrote is scrubbed, keys of its structured content
    /// included.
    #[test]
    fn an_upstream_result_keeps_mcps_own_members() {
        let mut vault = Vault::new();
        vault.remember("x", "text");
        let mut r = json!({"content": [{"type": "text", "text": "the text"}], "structuredContent": {"text": "text!", "isError": 1}, "isError": false});
        assert!(!scrub_result(&vault, &mut r));
        assert_eq!(
            r,
            json!({"content": [{"type": "text", "text": "the [REDACTED:x]"}], "structuredContent": {"[REDACTED:x]": "[REDACTED:x]!", "isError": 1}, "isError": false})
        );
        vault.remember("q", r#"a\"b-31415"#);
        let mut r = json!({"content": [{"type": "text", "text": "a\"b-31415"}], "isError": false});
        assert!(scrub_result(&vault, &mut r));
        assert_eq!(r["structuredContent"]["error"]["code"], "SP_UPSTREAM");
    }

    /// Issue #12: a secret that only the JSON text spells (an escape inside one value)
    /// withholds the result; far into a large result too (the windowed search).
    #[test]
    fn a_secret_only_the_json_text_spells_withholds_the_result() {
        let mut vault = Vault::new();
        vault.remember("odd", r#"k\"ey-31415"#);
        // The value holds `k"ey-31415`; its JSON text holds `k\"ey-31415`, the secret.
        for pad in [0, 3 * 1024 * 1024 + 17] {
            for fields in [
                json!({"body": format!("{}k\"ey-31415", "x".repeat(pad))}),
                json!({"json": {"a": [1, {format!("{}k\"ey-31415", "x".repeat(pad)): true}]}}),
            ] {
                let (withheld, v, line) = answer(&vault, fields);
                assert!(withheld && !line.contains(r#"k\"ey-31415"#), "pad {pad}: the secret survived");
                let sc = &v["result"]["structuredContent"];
                assert_eq!((v["result"]["isError"].as_bool(), sc["error"]["code"].as_str()), (Some(true), Some("SP_UPSTREAM")), "pad {pad}");
            }
        }
        let (withheld, v, _) = answer(&vault, json!({"body": "x\"".repeat(3 * 1024 * 1024)}));
        assert!(!withheld && v["result"]["isError"] == false);
        // An error message that quotes a peer is searched too.
        let r = crate::mcp::model::ToolResult::error(crate::gate::outcome::ToolCode::Upstream, vault.scrub_text("peer: k\"ey-31415"));
        assert!(withholds(&vault, &r));
    }

    /// Issue #20: a secret shorter than its credential's minimum is refused when it is
    /// read, naming the credential and never the value; the password of a pair too; an
    /// operator's lower minimum lets it in.
    #[test]
    fn short_secrets_are_refused_where_they_enter() {
        let cmd = |v: &str| SecretSource::Command { argv: vec!["printf".into(), "%s".into(), v.into()], timeout: Duration::from_secs(5) };
        let mut v = Vault::new();
        let e = v.read("tiny", &cmd("abc")).unwrap_err();
        assert_eq!(e, SecretError::TooShort { credential: "tiny".into(), what: "secret", min: MIN_SECRET_BYTES });
        assert!(e.to_string().starts_with("credential \"tiny\": the secret is shorter than 8 bytes"), "{e}");
        assert!(v.is_empty(), "a refused secret is not remembered");
        assert_eq!(v.read("ok", &cmd("12345678")).unwrap().expose(), "12345678");

        let policy = crate::policy::Policy::from_text(
            &json!({"credentials": {
                "b": {"source": {"env": "X"}, "inject": {"basic": {}}, "hosts": ["a.example"]},
                "low": {"source": {"env": "X"}, "inject": {"bearer": {}}, "hosts": ["a.example"], "min_secret_bytes": 3},
                "lowb": {"source": {"env": "X"}, "inject": {"basic": {}}, "hosts": ["a.example"], "min_secret_bytes": 4}
            }})
            .to_string(),
            std::path::Path::new("p.json"),
        )
        .unwrap();
        let mut v = Vault::for_policy(&policy);
        let pw = v.read("b", &cmd("alice:pw12")).unwrap_err();
        assert_eq!(pw, SecretError::TooShort { credential: "b".into(), what: "password (after the first ':')", min: 8 });
        assert!(!pw.to_string().contains("pw12"), "{pw}");
        assert!(matches!(v.read("b", &cmd("key:")), Err(SecretError::TooShort { what: "secret", .. })));
        assert!(matches!(v.read("b", &cmd("sk_123:")), Err(SecretError::TooShort { .. })));
        assert!(v.read("b", &cmd("sk_12345:")).is_ok());
        assert!(v.read("b", &cmd("alice:pw-12345")).is_ok());
        assert_eq!(v.read("low", &cmd("abc")).unwrap().expose(), "abc");
        assert!(v.read("low", &cmd("ab")).is_err());
        assert!(v.read("lowb", &cmd("al:pw12")).is_ok());
        assert_eq!(v.min_secret_bytes("low"), 3);
        assert_eq!(v.min_secret_bytes("unknown"), MIN_SECRET_BYTES);
    }

    #[test]
    fn static_sources_are_checked_without_being_remembered() {
        let tmp = tempfile::tempdir().unwrap();
        let short = temp(&tmp, "short", "abcd\n", 0o600);
        let long = temp(&tmp, "long", "abcdefgh-long\n", 0o600);
        let policy = crate::policy::Policy::from_text(
            &json!({"credentials": {
                "envshort": {"source": {"env": "SP_T_SHORT"}, "inject": {"bearer": {}}, "hosts": ["a.example"]},
                "envmissing": {"source": {"env": "SP_T_MISSING"}, "inject": {"bearer": {}}, "hosts": ["a.example"]},
                "fileshort": {"source": {"file": short}, "inject": {"bearer": {}}, "hosts": ["a.example"]},
                "filelong": {"source": {"file": long}, "inject": {"bearer": {}}, "hosts": ["a.example"]},
                "lowered": {"source": {"file": short}, "inject": {"bearer": {}}, "hosts": ["a.example"], "min_secret_bytes": 4},
                "basicshort": {"source": {"env": "SP_T_BASIC"}, "inject": {"basic": {}}, "hosts": ["a.example"]},
                "cmd": {"source": {"command": ["printf", "x"]}, "inject": {"bearer": {}}, "hosts": ["a.example"]}
            }})
            .to_string(),
            std::path::Path::new("p.json"),
        )
        .unwrap();
        let env = |k: &str| match k {
            "SP_T_SHORT" => Some("abc".into()),
            "SP_T_BASIC" => Some("alice:pw12".into()),
            _ => None,
        };
        let found = check_static(&policy, &env);
        let refused: Vec<(String, &str)> = found
            .refused
            .iter()
            .map(|e| match e {
                SecretError::TooShort { credential, what, .. } => (credential.clone(), *what),
                other => panic!("{other:?}"),
            })
            .collect();
        assert_eq!(
            refused,
            [("basicshort".to_owned(), "password (after the first ':')"), ("envshort".to_owned(), "secret"), ("fileshort".to_owned(), "secret")]
        );
        assert_eq!(found.warnings.len(), 1);
        assert!(found.warnings[0].starts_with("credential \"lowered\": min_secret_bytes is 4, below the default 8"), "{:?}", found.warnings);
        assert!(!format!("{found:?}").contains("abcd") && !format!("{found:?}").contains("pw12"));
    }

    /// Issue #20: the logger's redactor holds only secrets of at least the minimum, so a
    /// lowered short secret cannot rewrite a log line; the journal's holds all.
    #[test]
    fn log_lines_stay_readable_and_journal_text_is_scrubbed_with_every_secret() {
        let mut v = Vault::new();
        v.remember("lg-short", "zq9");
        v.remember("lg-long", "zq9-long-secret-value");
        let mut line = b"INFO executing GET /zq9 with zq9-long-secret-value".to_vec();
        scrub_log_line(&mut line);
        assert_eq!(String::from_utf8(line).unwrap(), "INFO executing GET /zq9 with [REDACTED:lg-long]");
        // (Other tests of this process remember one-letter secrets: the text has none.)
        assert_eq!(scrub_journal_text("zq9/zq9".into()).into_inner(), "[REDACTED:lg-short]/[REDACTED:lg-short]");
    }
}
