//! Secret sources (`sp-policy(5)`, CREDENTIALS): reading a credential's value from where
//! the policy says it lives. The Vault (`gate::vault`) calls these readers at the moment
//! an authorized call needs a secret, holds the value to the credential's minimum and
//! remembers it for redaction; nothing here remembers anything.
//!
//! A [`Secret`] prints as `Secret(***)` in `Debug` and has no `Display`: it cannot end up
//! in a log line or an error message by accident, and its memory is zeroed when dropped
//! (`zeroize`). Only this module builds one.
//!
//! - `file` and `systemd` (`$CREDENTIALS_DIRECTORY/<name>`): a regular file owned by the
//!   effective user (or root) with no group or world permission bits, like OpenSSH
//!   demands of private keys (for `systemd`, group bits are allowed: systemd grants the
//!   service user access through an ACL, which shows as group bits), at most 64 KiB, one
//!   trailing newline trimmed. The checks run on the opened descriptor, so a file swapped
//!   between check and read is checked. Opened through `sys`: a symbolic link is
//!   resolved first, then a FIFO, socket or device is refused at once, without waiting
//!   for a writer, and a file system that does not answer fails the call after
//!   `sys::READ_TIMEOUT`.
//! - `env`: a variable of the `sp` process (MCP clients pass servers a filtered
//!   environment: prefer the other sources).
//! - `command`: argv, no shell, stdin `/dev/null`, stderr discarded (it could echo the
//!   secret), stdout is the secret; it runs in its own process group, which is killed
//!   when the timeout expires. A non-zero exit is an error whose message has the status
//!   only.
//! - An SSH private key file ([`read_key`]): the checks of a `file` source, the text
//!   kept whole.

use std::fmt;
use std::time::Duration;

use zeroize::Zeroizing;

use crate::policy::{io_reason, SecretSource};

/// The largest secret a source may hold (a file, or a command's output).
pub(crate) const MAX_SECRET_FILE_BYTES: u64 = 64 * 1024;

/// A secret's value. Built only here, by the source readers ([`read`], [`read_key`]).
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
    Unreadable {
        credential: String,
        why: String,
    },
    TooOpen {
        credential: String,
        mode: u32,
    },
    WrongOwner {
        credential: String,
    },
    EnvMissing {
        credential: String,
        var: String,
    },
    Empty {
        credential: String,
    },
    Invalid {
        credential: String,
        why: &'static str,
    },
    NoCredentialsDirectory {
        credential: String,
    },
    Command {
        credential: String,
        why: String,
    },
    /// Shorter than the credential's minimum (`what`: "secret", "password", ...).
    TooShort {
        credential: String,
        what: &'static str,
        min: usize,
    },
}

impl fmt::Display for SecretError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SecretError::Unreadable { credential, why } => {
                write!(f, "credential {credential:?}: secret file cannot be read: {why}")
            }
            SecretError::TooOpen { credential, mode } => {
                write!(f, "credential {credential:?}: secret file permissions {mode:04o} are too open (it must not be readable by group or others)")
            }
            SecretError::WrongOwner { credential } => {
                write!(f, "credential {credential:?}: secret file is not owned by this user or root")
            }
            SecretError::EnvMissing { credential, var } => {
                write!(f, "credential {credential:?}: environment variable {var} is not set")
            }
            SecretError::Empty { credential } => write!(f, "credential {credential:?}: secret is empty"),
            SecretError::Invalid { credential, why } => write!(f, "credential {credential:?}: {why}"),
            SecretError::NoCredentialsDirectory { credential } => {
                write!(f, "credential {credential:?}: $CREDENTIALS_DIRECTORY is not set (run sp under systemd with LoadCredential=)")
            }
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

/// Reads and checks a source's value (not empty, no control characters but, for JSON,
/// line breaks and tabs: pretty-printed JSON, `aws configure export-credentials`).
/// Neither remembered nor held to a minimum here: the Vault does both
/// (`gate::vault::Vault::read`). `env` is the process environment (`env` and `systemd`
/// sources read it), given explicitly so tests need no `set_var`.
pub(crate) fn read(credential: &str, source: &SecretSource, json: bool, env: &dyn Fn(&str) -> Option<std::ffi::OsString>) -> Result<Secret, SecretError> {
    let value = Zeroizing::new(match source {
        SecretSource::File(path) => read_file(credential, path)?,
        SecretSource::Systemd(name) => {
            let dir = env("CREDENTIALS_DIRECTORY")
                .filter(|d| !d.is_empty())
                .ok_or_else(|| SecretError::NoCredentialsDirectory { credential: credential.to_owned() })?;
            read_file_checked(credential, &std::path::Path::new(&dir).join(name), SYSTEMD_MODE_MASK)?
        }
        SecretSource::Env(var) => {
            env(var).and_then(|v| v.into_string().ok()).ok_or_else(|| SecretError::EnvMissing { credential: credential.to_owned(), var: var.clone() })?
        }
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
    Ok(Secret(value))
}

/// An SSH private key file: the same checks as a `file` source (owner-only, at most
/// 64 KiB, read through the opened descriptor), but the text is kept whole, newlines
/// included, and ends with one newline.
pub(crate) fn read_key(credential: &str, path: &std::path::Path) -> Result<Secret, SecretError> {
    let mut text = Zeroizing::new(read_file(credential, path)?);
    if text.trim().is_empty() {
        return Err(SecretError::Empty { credential: credential.to_owned() });
    }
    if text.contains('\0') {
        return Err(SecretError::Invalid { credential: credential.to_owned(), why: "key file contains NUL" });
    }
    text.push('\n');
    Ok(Secret(text))
}

fn run_command(credential: &str, argv: &[String], timeout: Duration) -> Result<String, SecretError> {
    use crate::sys::RunError;
    let fail = |why: String| SecretError::Command { credential: credential.to_owned(), why };
    // Through the launcher: the command dies with sp, even on kill -9 (sys/confine.rs).
    let mut cmd = crate::sys::launcher_command(&argv[0], crate::sys::env_var("PATH").as_deref(), &crate::sys::Plan::default())
        .map_err(|e| fail(format!("{:?} could not be started: {e}", argv[0])))?;
    cmd.args(&argv[1..]);
    let ran = crate::sys::run_bounded(&mut cmd, None, MAX_SECRET_FILE_BYTES, 0, timeout).map_err(|e| match e {
        RunError::Spawn(e) => fail(format!("{:?} could not be started: {}", argv[0], io_reason(&e))),
        RunError::Pipes => fail("its stdout was not piped".to_owned()),
        RunError::Read(e) => fail(format!("output could not be read: {}", io_reason(&e))),
        RunError::TimedOut | RunError::OutputLate => fail(format!("timed out after {}s", timeout.as_secs())),
    })?;
    if !ran.status.success() {
        return Err(fail(format!("failed ({})", ran.status)));
    }
    if ran.stdout.len() as u64 > MAX_SECRET_FILE_BYTES {
        return Err(fail(format!("printed more than {MAX_SECRET_FILE_BYTES} bytes")));
    }
    let mut text = String::from_utf8(ran.stdout.to_vec()).map_err(|_| fail("printed something that is not UTF-8".into()))?;
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
    // Opened without blocking (a FIFO is refused at once), checked on
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

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Instant;
    use std::os::unix::fs::PermissionsExt;

    /// A file in the test's private temporary directory (removed with it).
    fn temp(dir: &tempfile::TempDir, name: &str, content: &str, mode: u32) -> std::path::PathBuf {
        let p = dir.path().join(name);
        std::fs::write(&p, content).unwrap();
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(mode)).unwrap();
        p
    }

    fn get(credential: &str, source: &SecretSource) -> Result<Secret, SecretError> {
        read(credential, source, false, &crate::sys::env_var)
    }

    #[test]
    fn file_rules() {
        let tmp = tempfile::tempdir().unwrap();
        let ok = temp(&tmp, "ok", "s3cr3t-value\n", 0o600);
        assert_eq!(get("c", &SecretSource::File(ok)).unwrap().expose(), "s3cr3t-value");
        let open = temp(&tmp, "open", "x", 0o644);
        assert_eq!(get("c", &SecretSource::File(open)).unwrap_err(), SecretError::TooOpen { credential: "c".into(), mode: 0o644 });
        let empty = temp(&tmp, "empty", "\n", 0o400);
        assert_eq!(get("c", &SecretSource::File(empty)).unwrap_err(), SecretError::Empty { credential: "c".into() });
        let two = temp(&tmp, "two", "a\nb\n", 0o600);
        assert!(matches!(get("c", &SecretSource::File(two)), Err(SecretError::Invalid { .. })));
        let missing = std::path::PathBuf::from("/nonexistent/sp/secret");
        assert!(matches!(get("c", &SecretSource::File(missing)), Err(SecretError::Unreadable { .. })));
        let big = temp(&tmp, "big", &"x".repeat(MAX_SECRET_FILE_BYTES as usize + 1), 0o600);
        assert!(matches!(get("c", &SecretSource::File(big)), Err(SecretError::Unreadable { .. })));
        // JSON documents keep their line breaks; other text does not.
        let doc = temp(&tmp, "doc", "{\n\t\"a\": 1\r\n}\n", 0o600);
        assert_eq!(read("c", &SecretSource::File(doc.clone()), true, &|_| None).unwrap().expose(), "{\n\t\"a\": 1\r\n}");
        assert!(matches!(get("c", &SecretSource::File(doc)), Err(SecretError::Invalid { .. })));
    }

    #[test]
    fn debug_never_shows_the_value() {
        let s = Secret(Zeroizing::new("hunter2".to_owned()));
        assert_eq!(format!("{s:?}"), "Secret(***)");
    }

    #[test]
    fn command_source() {
        let cmd = |args: &[&str], t: u64| SecretSource::Command { argv: args.iter().map(|a| a.to_string()).collect(), timeout: Duration::from_secs(t) };
        let ok = get("c", &cmd(&["sh", "-c", "echo from-cmd; echo noise >&2"], 5)).unwrap();
        assert_eq!(ok.expose(), "from-cmd");
        let failed = get("c", &cmd(&["sh", "-c", "echo leaked-secret; exit 3"], 5)).unwrap_err();
        assert_eq!(failed, SecretError::Command { credential: "c".into(), why: "failed (exit status: 3)".into() });
        let t = Instant::now();
        let slow = get("c", &cmd(&["sh", "-c", "sleep 30 & sleep 30"], 1)).unwrap_err();
        assert_eq!(slow, SecretError::Command { credential: "c".into(), why: "timed out after 1s".into() });
        assert!(t.elapsed() < Duration::from_secs(10), "the command was not killed");
        let missing = get("c", &cmd(&["/nonexistent/sp-secret-tool"], 1)).unwrap_err();
        assert!(missing.to_string().contains("could not be started"), "{missing}");
    }

    #[test]
    fn systemd_source_uses_credentials_directory() {
        let tmp = tempfile::tempdir().unwrap();
        // CREDENTIALS_DIRECTORY is read at use, from the environment given.
        temp(&tmp, "sd-cred", "from-systemd\n", 0o400);
        let dir = tmp.path().as_os_str().to_owned();
        let with_dir = move |k: &str| (k == "CREDENTIALS_DIRECTORY").then(|| dir.clone());
        let source = SecretSource::Systemd("sd-cred".into());
        assert_eq!(read("c", &source, false, &with_dir).unwrap().expose(), "from-systemd");
        assert_eq!(read("c", &source, false, &|_| None).unwrap_err(), SecretError::NoCredentialsDirectory { credential: "c".into() });
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
    fn a_key_file_is_kept_whole_with_one_newline() {
        let tmp = tempfile::tempdir().unwrap();
        let key = temp(&tmp, "key", "-----BEGIN KEY-----\nAAAA\n-----END KEY-----\n", 0o600);
        assert_eq!(read_key("k", &key).unwrap().expose(), "-----BEGIN KEY-----\nAAAA\n-----END KEY-----\n");
        let blank = temp(&tmp, "blank", " \n\n", 0o600);
        assert_eq!(read_key("k", &blank).unwrap_err(), SecretError::Empty { credential: "k".into() });
        let nul = temp(&tmp, "nul", "a\0b", 0o600);
        assert_eq!(read_key("k", &nul).unwrap_err(), SecretError::Invalid { credential: "k".into(), why: "key file contains NUL" });
    }
}
