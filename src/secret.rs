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
//! form-encoded, and base64/base64url at any byte offset of an encoded stream; for a
//! `user:password` secret (`basic`), the password alone too.

use std::fmt;
use std::io::Read;
use std::time::{Duration, Instant};

use serde_json::Value;
use zeroize::Zeroizing;

use crate::policy::{io_reason, SecretSource};

pub(crate) const MAX_SECRET_FILE_BYTES: u64 = 64 * 1024;

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
    redactor: crate::redact::Redactor,
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
        PROCESS.write().unwrap_or_else(std::sync::PoisonError::into_inner).remember_here(credential, value);
        self.remember_here(credential, value);
    }

    fn remember_here(&mut self, credential: &str, value: &str) {
        if self.raw.iter().any(|(c, v)| c == credential && v.as_str() == value) {
            return;
        }
        self.raw.push((credential.to_owned(), Zeroizing::new(value.to_owned())));
        self.redactor.add(credential, value);
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
    /// consecutive header lines ([`crate::redact::Redactor::redact_headers`]).
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
    /// [`crate::redact::MIN_TAIL_MATCH`] bytes that is the beginning of a secret (in any known encoding)
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

    /// Replaces every spelling of every secret seen so far, in every string of `value`
    /// (object keys included), with `[REDACTED:<credential>]`. A number whose digits
    /// spell a secret becomes that marker string.
    pub(crate) fn scrub(&self, value: &mut Value) {
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
            Value::Array(items) => items.iter_mut().for_each(|v| self.scrub(v)),
            Value::Object(map) => {
                let old = std::mem::take(map);
                for (mut k, mut v) in old {
                    self.scrub_str(&mut k);
                    self.scrub(&mut v);
                    map.insert(k, v);
                }
            }
            _ => {}
        }
    }

    fn scrub_str(&self, s: &mut String) {
        if let Some(r) = self.redactor.redact_str(s) {
            *s = r;
        }
    }
}

/// Every secret any [`Vault`] of this process has read, with its encodings.
static PROCESS: std::sync::LazyLock<std::sync::RwLock<Vault>> = std::sync::LazyLock::new(Default::default);

/// The process-wide redactor for text that is not an answer: log lines and journal rows
/// (issue 8 point 3). Same [`Vault::scrub`]/[`Vault::scrub_bytes`] as answers.
pub(crate) fn process_vault() -> std::sync::RwLockReadGuard<'static, Vault> {
    PROCESS.read().unwrap_or_else(std::sync::PoisonError::into_inner)
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

// Issue #12: the one redaction point of a tool result (`server.rs` calls it for every
// answer it sends).

/// What a withheld result says (and its journal row's reason).
pub(crate) const WITHHELD: &str = "the answer is withheld: its JSON text spells a secret of this session in a form that no single value shows";

/// Scrubs a tool result everywhere it carries text: every string and number of
/// `structuredContent` (parsed values, object keys included) and `content`. Then the JSON
/// text of `structuredContent` (what the wire carries, twice) is searched for every
/// spelling as well, without building it (issue #12: [`EchoScan`]): a secret that only
/// appears once values are escaped and joined is not cut out of the middle of the JSON
/// (that could not be done without breaking it) but withholds the whole result.
/// True when the result was withheld.
pub(crate) fn scrub_result(vault: &Vault, result: &mut Value) -> bool {
    vault.scrub(result);
    let Some(structured) = result.get("structuredContent").filter(|v| !v.is_null()) else { return false };
    if !vault.is_empty() && EchoScan::spells_a_secret(vault, structured) {
        log::warn!("a result's JSON text spelled a secret that no single value showed: the result is withheld");
        *result = crate::wire::ToolResult::error(crate::wire::ToolCode::Upstream.as_str(), WITHHELD).into_value();
        return true;
    }
    false
}

/// A sink for a value's JSON that searches it for secrets in overlapping windows, so
/// memory stays at one window however large the JSON is. The overlap is longer than any
/// spelling the redactor looks for, so every spelling lies whole inside some window.
struct EchoScan<'v> {
    vault: &'v Vault,
    window: Vec<u8>,
    overlap: usize,
    found: bool,
}

impl EchoScan<'_> {
    const WINDOW: usize = 1024 * 1024;

    fn spells_a_secret(vault: &Vault, value: &Value) -> bool {
        let overlap = vault.longest_spelling().saturating_add(64).min(Self::WINDOW / 2);
        let mut scan = EchoScan { vault, window: Vec::with_capacity(Self::WINDOW + overlap), overlap, found: false };
        let _ = serde_json::to_writer(&mut scan, value);
        scan.check();
        scan.found
    }

    fn check(&mut self) {
        self.found = self.found || self.vault.found_in(&self.window);
    }
}

impl std::io::Write for EchoScan<'_> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        if self.found {
            return Ok(buf.len());
        }
        self.window.extend_from_slice(buf);
        if self.window.len() >= Self::WINDOW + self.overlap {
            self.check();
            let keep = self.window.len() - self.overlap;
            self.window.drain(..keep);
        }
        Ok(buf.len())
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
            v.scrub(&mut doc);
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
        v.scrub(&mut doc);
        assert_eq!(doc, json!({"[REDACTED:long]-key": ["xx [REDACTED:long] yy", {"n": "[REDACTED:short]"}], "k": 1}));
    }

    #[test]
    fn scrub_result_covers_numbers_and_renders_the_text_again() {
        let mut vault = Vault::new();
        let source = crate::policy::SecretSource::Command {
            argv: vec!["echo".into(), "31415926535".into()],
            timeout: std::time::Duration::from_secs(5),
        };
        vault.read("pin", &source).unwrap();
        let mut r = crate::wire::ToolResult::ok(json!({"json": {"n": 31415926535u64, "s": "x&#51;1415926535"}, "headers": {"X-31415926535": "v"}})).into_value();
        scrub_result(&vault, &mut r);
        let sc = &r["structuredContent"];
        assert_eq!(sc["json"]["n"], "[REDACTED:pin]");
        assert_eq!(sc["json"]["s"], "x[REDACTED:pin]");
        assert!(sc["headers"].get("X-[REDACTED:pin]").is_some(), "{sc}");
        let text = crate::out::rendered_text(&r).unwrap();
        assert_eq!(serde_json::from_str::<Value>(&text).unwrap(), *sc);
        assert!(!text.contains("1415926535"), "{text}");
    }

    /// Issue #12: the text block is no longer scrubbed as a string of its own, so a secret
    /// that only the JSON text spells (an escape that joins what no single value shows)
    /// must withhold the result; far into a large result too (the windowed search).
    #[test]
    fn a_secret_only_the_json_text_spells_withholds_the_result() {
        let mut vault = Vault::new();
        let source = crate::policy::SecretSource::Command { argv: vec!["echo".into(), r#"k\"ey-31415"#.into()], timeout: std::time::Duration::from_secs(5) };
        vault.read("odd", &source).unwrap();
        // The value holds `k"ey-31415`; its JSON text holds `k\"ey-31415`, the secret.
        for pad in [0, 3 * 1024 * 1024 + 17] {
            let mut r = crate::wire::ToolResult::ok(json!({"body": format!("{}k\"ey-31415", "x".repeat(pad))})).into_value();
            scrub_result(&vault, &mut r);
            let wire = serde_json::to_string(&r).unwrap() + &crate::out::rendered_text(&r).unwrap_or_default();
            assert!(!wire.contains(r#"k\"ey-31415"#), "pad {pad}: the secret survived");
            assert_eq!((r["isError"].as_bool(), r["structuredContent"]["error"]["code"].as_str()), (Some(true), Some("SP_UPSTREAM")), "pad {pad}");
        }
        let mut clean = crate::wire::ToolResult::ok(json!({"body": "x".repeat(3 * 1024 * 1024)})).into_value();
        scrub_result(&vault, &mut clean);
        assert_eq!(clean["isError"], false);
    }
}
