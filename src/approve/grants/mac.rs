//! The grants key: every grant record carries an HMAC-SHA256 (`mac`) with a key only
//! `sp` holds, so a record written by anything else (an upstream server running as the
//! same user, a script, an editor) is ignored and journaled, never honoured (issue 31,
//! section 2).
//!
//! ```text
//!  sp mcp starts ── key file? ──yes──> read (owner-only, exactly 32 bytes), kept in memory
//!                        └──no───> under the grants file's lock: 32 random bytes
//!                                  -> temporary file (O_EXCL, 0600), fsync
//!                                  -> link(2) to the key's name (EEXIST: another sp won
//!                                     the race; its key is read and used)
//!  a record ── mac = HMAC-SHA256(key, canonical(record without mac)) ──> kept / honoured
//!           └─ no mac, a wrong one, no key file ─> ignored, journaled once per process
//! ```
//!
//! The key file is `<grants file>.key` (`grants.json.key` by default), in the grants
//! file's directory and under the same checks (a directory only root or the user can
//! write; no symbolic link, no group or other bit, owned by root or the user). It is
//! read once per process, before the first upstream starts (`sp mcp` prepares it at
//! startup), and kept in memory (zeroed when dropped): replacing the file later does
//! not change what a running `sp` accepts. Its bytes never reach a log line, the
//! journal or an error message (`Debug` prints `GrantKey(***)`).
//!
//! What it does not do: a process that can read the key file can sign grants. The
//! sandbox keeps the grants file and its key out of an upstream's reach; with
//! `"sandbox": "none"` an upstream can read it (`sp-policy(5)`, APPROVAL).

use std::fmt;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};

use hmac::{Hmac, Mac};
use sha2::Sha256;
use zeroize::Zeroizing;

use super::Grant;
use crate::sys::{self, SysError};

/// The key's length, and the key file's exact size.
pub(crate) const KEY_BYTES: usize = 32;

/// The key that signs grant records. Never printed.
#[derive(Clone, PartialEq, Eq)]
pub(crate) struct GrantKey(Zeroizing<[u8; KEY_BYTES]>);

impl fmt::Debug for GrantKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("GrantKey(***)")
    }
}

/// Why the key file could not be used. No grant applies then. Never holds key bytes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum KeyError {
    /// Refused (a symbolic link, too open, another owner, ...) or unreadable.
    File(SysError),
    /// Not exactly [`KEY_BYTES`] bytes long.
    Length,
    /// The kernel gave no random bytes.
    Random { why: String },
    /// Creating, writing, syncing or linking the new key failed.
    Write { why: String },
}

impl fmt::Display for KeyError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            KeyError::File(why) => write!(f, "{why}"),
            KeyError::Length => write!(f, "is not {KEY_BYTES} bytes long (refused: remove it, and approve again)"),
            KeyError::Random { why } => write!(f, "no random bytes for a new key: {why}"),
            KeyError::Write { why } => write!(f, "cannot create: {why}"),
        }
    }
}

impl std::error::Error for KeyError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            KeyError::File(why) => Some(why),
            _ => None,
        }
    }
}

/// Why a record is ignored.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Unsigned {
    /// The record has no `mac`.
    NoMac,
    /// Its `mac` is not this key's for its content (forged, or edited after signing).
    BadMac,
    /// There is no key file: `sp` never signed anything here.
    NoKey,
}

impl Unsigned {
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Unsigned::NoMac => "it has no mac",
            Unsigned::BadMac => "its mac does not match its content under sp's key",
            Unsigned::NoKey => "there is no grants key file, so sp signed no grant here",
        }
    }
}

/// The key file of the grants file at `grants`: `<name>.key` beside it.
pub(crate) fn key_path(grants: &Path) -> PathBuf {
    let name = grants.file_name().map_or("grants.json".into(), |n| n.to_string_lossy());
    grants.with_file_name(format!("{name}.key"))
}

impl GrantKey {
    #[cfg(test)]
    pub(crate) fn from_bytes(bytes: [u8; KEY_BYTES]) -> GrantKey {
        GrantKey(Zeroizing::new(bytes))
    }

    fn hmac(&self, g: &Grant) -> Hmac<Sha256> {
        #[expect(
            clippy::expect_used,
            reason = "HMAC takes a key of any length (RFC 2104: a long one is hashed, a short one padded); new_from_slice returns a Result only because KeyInit serves fixed-size-key ciphers too"
        )]
        let mut mac = Hmac::<Sha256>::new_from_slice(self.0.as_slice()).expect("HMAC takes keys of any length");
        mac.update(canonical(g).as_bytes());
        mac
    }

    /// The record's `mac`: 64 hex digits.
    pub(crate) fn sign(&self, g: &Grant) -> String {
        sys::hex(&self.hmac(g).finalize().into_bytes())
    }

    /// Whether `mac` is this key's for `g` (compared in constant time).
    pub(crate) fn verify(&self, g: &Grant, mac: &str) -> bool {
        let Some(tag) = unhex(mac) else { return false };
        self.hmac(g).verify_slice(&tag).is_ok()
    }
}

/// What the MAC covers: every member of the record but `mac` itself, in a fixed order,
/// as a JSON array (parts cannot run into each other), behind a version tag.
pub(crate) fn canonical(g: &Grant) -> String {
    serde_json::json!([
        "sp-grant-mac/1",
        g.id,
        g.scope.as_str(),
        g.policy,
        g.created,
        g.expires,
        g.ttl_s,
        g.requested_ttl_s,
        g.action,
        g.tool,
        g.target,
        g.subject,
        g.channel.as_str(),
        g.uid
    ])
    .to_string()
}

fn unhex(s: &str) -> Option<Vec<u8>> {
    if s.len() != 64 || !s.bytes().all(|b| b.is_ascii_hexdigit()) {
        return None;
    }
    (0..32).map(|i| u8::from_str_radix(&s[2 * i..2 * i + 2], 16).ok()).collect()
}

fn rules() -> sys::Rules {
    // Exactly KEY_BYTES is checked after the read; a longer file is refused by size.
    sys::Rules::owned(0o077, KEY_BYTES as u64)
}

/// The key in `path`; `None` when there is no such file.
pub(crate) fn read_key(path: &Path) -> Result<Option<GrantKey>, KeyError> {
    let bytes = match sys::read_within(path, rules(), sys::READ_TIMEOUT) {
        Ok(b) => b,
        Err(SysError::Missing) => return Ok(None),
        Err(SysError::TooLarge { .. }) => return Err(KeyError::Length),
        Err(why) => return Err(KeyError::File(why)),
    };
    let mut key = Zeroizing::new([0u8; KEY_BYTES]);
    if bytes.len() != KEY_BYTES {
        return Err(KeyError::Length);
    }
    key.copy_from_slice(&bytes);
    Ok(Some(GrantKey(key)))
}

/// The key in `path`, created when there is none. The caller holds the grants file's
/// lock, so `sp` processes do not race here; `temp` is a fresh name in the same
/// directory. The new key is whole before it has its name (`link(2)` of a synced
/// file), and a key another process linked first wins: it is read and used.
pub(crate) fn read_or_create_key(path: &Path, temp: &Path) -> Result<GrantKey, KeyError> {
    if let Some(k) = read_key(path)? {
        return Ok(k);
    }
    let key = GrantKey(random()?);
    let write = |why: String| KeyError::Write { why };
    {
        use rustix::fs::{Mode, OFlags};
        let flags = OFlags::WRONLY | OFlags::CREATE | OFlags::EXCL | OFlags::NOFOLLOW | OFlags::CLOEXEC;
        let fd = rustix::fs::open(temp, flags, Mode::from_raw_mode(0o600)).map_err(|e| write(format!("{}: {e}", temp.display())))?;
        let mut file = std::fs::File::from(fd);
        let linked = file.write_all(key.0.as_slice()).and_then(|()| file.sync_all()).and_then(|()| std::fs::hard_link(temp, path));
        let _ = std::fs::remove_file(temp);
        match linked {
            Ok(()) => {}
            // Another process made one meanwhile: theirs is the key.
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
                return read_key(path)?.ok_or_else(|| write("the key vanished after another process made it".into()));
            }
            Err(e) => return Err(write(sys::os_reason(&e))),
        }
    }
    let dir = path.parent().unwrap_or(Path::new("/"));
    std::fs::File::open(dir).and_then(|d| d.sync_all()).map_err(|e| write(format!("cannot sync {}: {}", dir.display(), sys::os_reason(&e))))?;
    Ok(key)
}

/// 32 bytes from `getrandom(2)` (blocking only while the kernel gathers entropy at
/// boot), else `/dev/urandom`; never a weaker source: this key outlives the process.
fn random() -> Result<Zeroizing<[u8; KEY_BYTES]>, KeyError> {
    let mut key = Zeroizing::new([0u8; KEY_BYTES]);
    if matches!(rustix::rand::getrandom(key.as_mut_slice(), rustix::rand::GetRandomFlags::empty()), Ok(KEY_BYTES)) {
        return Ok(key);
    }
    std::fs::File::open("/dev/urandom").and_then(|mut f| f.read_exact(key.as_mut_slice())).map_err(|e| KeyError::Random { why: sys::os_reason(&e) })?;
    Ok(key)
}

#[cfg(test)]
mod tests;
