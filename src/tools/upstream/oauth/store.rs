//! The token store (issue 33 §2): the policy's path with `.oauth` appended, a private
//! file (owned by root or the user, `0600`, refused when group or others may read it)
//! that `sp oauth login` writes and `sp mcp` rewrites on each refresh, whole, under its
//! exclusive lock and by an atomic rename (`sys/state.rs`, as the grants and the pins).
//!
//! ```text
//! {"version":1,"upstreams":{"NAME":{"url":"…","client_id":"…","resource":"…","token_endpoint":"…",
//!   "issuer":"…","access_token":"…","expires_at":UNIX_S,"refresh_token":"…",
//!   "registered_redirect_uri":"…"}}}     (the last two optional)
//! ```
//!
//! Refreshes happen under the lock, after reading the entry again: two `sp mcp` of the
//! same policy never both spend one refresh token (a server that rotates them would
//! take the second use for a stolen token and revoke the whole grant); the later one
//! finds the other's fresh token and uses it.
//!
//! The bytes on disk are that JSON, or it encrypted with `systemd-creds` (`sealed.rs`),
//! as `auth.oauth.store` says ([`StoreKind`]): `"file"` writes JSON; `"systemd-creds"`
//! writes a blob or nothing (and refuses to read or write at all when the program is
//! missing); `"auto"` writes a blob when the program is there and its trial (encrypt,
//! then decrypt and compare) works, else JSON with a warning on stderr. Either form is
//! read in every mode, so a plain store from before is used, then rewritten encrypted at
//! the next write (a refresh, a login) where encryption applies.

use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::{json, Map, Value};
use url::Url;
use zeroize::Zeroizing;

use super::sealed;
use crate::policy::upstreams::StoreKind;
use crate::sys::{self, SysError};

const FILE_VERSION: u64 = 1;
/// Largest store read or written.
pub(crate) const MAX_FILE_BYTES: u64 = 4 * 1024 * 1024;
/// How long a writer waits for another's lock: longer than a refresh's timeout.
pub(crate) const LOCK_WAIT: Duration = Duration::from_secs(40);

/// One upstream's tokens, and where they were obtained.
#[derive(Clone, PartialEq, Eq)]
pub(crate) struct Entry {
    /// The upstream's URL and the client id at login: another URL or client in the
    /// policy means these tokens are not for it.
    pub url: String,
    pub client_id: String,
    /// The `resource` parameter sent (RFC 8707).
    pub resource: String,
    pub issuer: String,
    pub token_endpoint: Url,
    pub access_token: Zeroizing<String>,
    /// Unix seconds after which the access token is not used (its lifetime minus the
    /// margin, `oauth2::fresh_for`).
    pub expires_at: u64,
    pub refresh_token: Option<Zeroizing<String>>,
    /// Set when `client_id` was registered by `sp oauth login` (RFC 7591, no
    /// `auth.oauth.client_id`): the redirect URI it was registered with. The next login
    /// with the same issuer and redirect URI uses that client again.
    pub registered_redirect_uri: Option<String>,
}

impl fmt::Debug for Entry {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Entry")
            .field("url", &self.url)
            .field("client_id", &self.client_id)
            .field("token_endpoint", &self.token_endpoint.as_str())
            .field("access_token", &format_args!("***"))
            .field("expires_at", &self.expires_at)
            .field("refresh_token", &self.refresh_token.as_ref().map(|_| format_args!("***")))
            .field("registered_redirect_uri", &self.registered_redirect_uri)
            .finish()
    }
}

/// Every upstream's entry.
pub(crate) type Tokens = BTreeMap<String, Entry>;

/// Why the store cannot be used. Names the file and the reason, never a value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum StoreError {
    File {
        path: PathBuf,
        why: SysError,
    },
    Dir {
        path: PathBuf,
        why: sys::UnsafeDir,
    },
    HardLinked {
        path: PathBuf,
        links: u64,
    },
    Locked {
        path: PathBuf,
    },
    Corrupt {
        path: PathBuf,
        why: String,
    },
    Write {
        path: PathBuf,
        why: String,
    },
    /// `systemd-creds` is missing where it is required, or an encrypted store cannot be
    /// decrypted (or a write encrypted).
    Sealed {
        path: PathBuf,
        why: String,
    },
}

impl fmt::Display for StoreError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            StoreError::File { path, why } => write!(f, "token store {}: {why}", path.display()),
            StoreError::Dir { path, why } => write!(f, "token store {}: {why}", path.display()),
            StoreError::HardLinked { path, links } => {
                write!(f, "token store {} has {links} names: refused (a write would change the others)", path.display())
            }
            StoreError::Locked { path } => write!(f, "token store {} stayed locked by another process", path.display()),
            StoreError::Corrupt { path, why } => write!(f, "token store {} is corrupt ({why}): fix or remove it, then sp oauth login again", path.display()),
            StoreError::Write { path, why } => write!(f, "token store {}: cannot write: {why}", path.display()),
            StoreError::Sealed { path, why } => write!(f, "token store {}: {why}", path.display()),
        }
    }
}

impl std::error::Error for StoreError {}

/// The token store beside a policy: its path with `.oauth` appended.
pub(crate) fn beside(policy: &Path) -> PathBuf {
    let mut name = policy.as_os_str().to_owned();
    name.push(".oauth");
    PathBuf::from(name)
}

fn rules() -> sys::Rules {
    sys::Rules::owned(0o077, MAX_FILE_BYTES)
}

/// A handle on the store (nothing is opened until used).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Store {
    path: PathBuf,
    kind: StoreKind,
}

impl Store {
    pub(crate) fn new(path: PathBuf, kind: StoreKind) -> Store {
        Store { path, kind }
    }

    pub(crate) fn path(&self) -> &Path {
        &self.path
    }

    fn sealed_err(&self, why: String) -> StoreError {
        StoreError::Sealed { path: self.path.clone(), why }
    }

    /// `"systemd-creds"` without the program: the store is not used at all (fail closed;
    /// `sp oauth login` asks before it signs in, so no code is spent for nothing).
    pub(crate) fn required_present(&self) -> Result<(), StoreError> {
        if self.kind == StoreKind::SystemdCreds && !sealed::available() {
            return Err(self.sealed_err(format!(
                "auth.oauth.store is \"systemd-creds\" and {} is not there: install systemd's systemd-creds, or set auth.oauth.store to \"auto\" or \"file\"",
                sealed::PROGRAM
            )));
        }
        Ok(())
    }

    /// The entries in `bytes` as read from the file: JSON, or an encrypted store.
    pub(crate) fn decode(&self, bytes: &[u8]) -> Result<Tokens, StoreError> {
        if sealed::is_sealed(bytes) {
            let plain = sealed::open(bytes, MAX_FILE_BYTES).map_err(|why| self.sealed_err(format!("{why}: remove it, then sp oauth login again")))?;
            return parse(&plain).map_err(|why| StoreError::Corrupt { path: self.path.clone(), why });
        }
        let first = bytes.iter().find(|b| !b.is_ascii_whitespace());
        if first.is_some_and(|b| *b != b'{') {
            let why = "neither JSON nor a store encrypted with systemd-creds".to_owned();
            return Err(StoreError::Corrupt { path: self.path.clone(), why });
        }
        parse(bytes).map_err(|why| StoreError::Corrupt { path: self.path.clone(), why })
    }

    /// The bytes to write for `tokens`, as `auth.oauth.store` says.
    fn encode(&self, tokens: &Tokens) -> Result<Zeroizing<Vec<u8>>, StoreError> {
        let plain = render(tokens);
        match self.kind {
            StoreKind::File => Ok(plain),
            StoreKind::SystemdCreds => sealed::seal(&plain, MAX_FILE_BYTES).map_err(|why| self.sealed_err(format!("cannot encrypt it: {why}"))),
            StoreKind::Auto if !sealed::available() => Ok(plain),
            StoreKind::Auto => sealed::seal(&plain, MAX_FILE_BYTES).or_else(|why| {
                log::warn!("token store {}: written unencrypted (auth.oauth.store \"auto\"): {why}", self.path.display());
                Ok(plain)
            }),
        }
    }

    /// Every entry, read without the lock (a rename is atomic); `None` when there is no
    /// file.
    pub(crate) fn read(&self) -> Result<Option<Tokens>, StoreError> {
        self.required_present()?;
        let bytes = match sys::read_within(&self.path, rules(), sys::READ_TIMEOUT) {
            Ok(b) => b,
            Err(SysError::Missing) => return Ok(None),
            Err(why) => return Err(StoreError::File { path: self.path.clone(), why }),
        };
        self.decode(&bytes).map(Some)
    }

    /// Whether the file on disk is encrypted now (for `sp oauth login`'s summary).
    pub(crate) fn is_encrypted(&self) -> bool {
        sys::read_within(&self.path, rules(), sys::READ_TIMEOUT).is_ok_and(|b| sealed::is_sealed(&b))
    }

    /// Read-modify-write under the lock: `change` gets every entry as the file holds
    /// it now; the file is rewritten when they changed.
    pub(crate) fn update<T>(&self, change: impl FnOnce(&mut Tokens) -> T) -> Result<T, StoreError> {
        let path = || self.path.clone();
        let write_err = |why: String| StoreError::Write { path: path(), why };
        self.required_present()?;
        sys::check_dirs(&self.path).map_err(|why| StoreError::Dir { path: path(), why })?;
        let locked = sys::state::locked(&self.path, rules(), LOCK_WAIT, |file| {
            let bytes = sys::read_capped(file, MAX_FILE_BYTES).map_err(|why| StoreError::File { path: path(), why })?;
            let mut tokens = self.decode(&bytes)?;
            let before = tokens.clone();
            let out = change(&mut tokens);
            if tokens != before {
                sys::state::remove_stale_temps(&self.path);
                let bytes = self.encode(&tokens)?;
                sys::state::replace(&self.path, &crate::audit::session_id(), &bytes).map_err(write_err)?;
            }
            Ok(out)
        });
        locked.map_err(|e| match e {
            sys::state::LockedError::File(why) => StoreError::File { path: path(), why },
            sys::state::LockedError::HardLinked { links } => StoreError::HardLinked { path: path(), links },
            sys::state::LockedError::Busy => StoreError::Locked { path: path() },
            sys::state::LockedError::Lock(e) => write_err(format!("cannot lock: {e}")),
        })?
    }
}

/// The file's text (holds the tokens: zeroized when dropped).
pub(crate) fn render(tokens: &Tokens) -> Zeroizing<Vec<u8>> {
    let mut all = Map::new();
    for (name, e) in tokens {
        let mut m = json!({
            "url": e.url, "client_id": e.client_id, "resource": e.resource, "issuer": e.issuer,
            "token_endpoint": e.token_endpoint.as_str(), "access_token": e.access_token.as_str(), "expires_at": e.expires_at,
        });
        if let Value::Object(m) = &mut m {
            if let Some(r) = &e.refresh_token {
                m.insert("refresh_token".into(), Value::String(r.as_str().to_owned()));
            }
            if let Some(r) = &e.registered_redirect_uri {
                m.insert("registered_redirect_uri".into(), Value::String(r.clone()));
            }
        }
        all.insert(name.clone(), m);
    }
    let doc = Zeroizing::new(crate::cred::sigv4::ValueBox(json!({"version": FILE_VERSION, "upstreams": all})));
    let mut text = Zeroizing::new(serde_json::to_vec(&doc.0).unwrap_or_default());
    text.push(b'\n');
    text
}

/// An entry's members.
const MEMBERS: [&str; 9] =
    ["url", "client_id", "resource", "issuer", "token_endpoint", "access_token", "expires_at", "refresh_token", "registered_redirect_uri"];

/// The file's entries; an empty file (just created) has none. Strict: a member
/// missing, of the wrong type or unknown is corrupt.
pub(crate) fn parse(bytes: &[u8]) -> Result<Tokens, String> {
    if bytes.iter().all(u8::is_ascii_whitespace) {
        return Ok(Tokens::new());
    }
    let text = std::str::from_utf8(bytes).map_err(|_| "not UTF-8".to_owned())?;
    let doc = Zeroizing::new(crate::cred::sigv4::ValueBox(crate::json::parse(text).map_err(|e| e.to_string())?));
    let top = doc.0.as_object().ok_or("not an object")?;
    if top.get("version").and_then(Value::as_u64) != Some(FILE_VERSION) {
        return Err(format!("version is not {FILE_VERSION}"));
    }
    let ups = top.get("upstreams").and_then(Value::as_object).ok_or("no upstreams object")?;
    let mut out = Tokens::new();
    for (name, e) in ups {
        let e = e.as_object().ok_or_else(|| format!("{name}: not an object"))?;
        let s = |k: &str| e.get(k).and_then(Value::as_str).map(str::to_owned).ok_or_else(|| format!("{name}.{k}: missing or not a string"));
        if let Some(k) = e.keys().find(|k| !MEMBERS.contains(&k.as_str())) {
            return Err(format!("{name}.{k}: unknown member"));
        }
        let token_endpoint = Url::parse(&s("token_endpoint")?).map_err(|_| format!("{name}.token_endpoint: not a URL"))?;
        let refresh_token = match e.get("refresh_token") {
            None => None,
            Some(Value::String(r)) => Some(Zeroizing::new(r.clone())),
            Some(_) => return Err(format!("{name}.refresh_token: not a string")),
        };
        let registered_redirect_uri = match e.get("registered_redirect_uri") {
            None => None,
            Some(Value::String(r)) => Some(r.clone()),
            Some(_) => return Err(format!("{name}.registered_redirect_uri: not a string")),
        };
        out.insert(
            name.clone(),
            Entry {
                url: s("url")?,
                client_id: s("client_id")?,
                resource: s("resource")?,
                issuer: s("issuer")?,
                token_endpoint,
                access_token: Zeroizing::new(s("access_token")?),
                expires_at: e.get("expires_at").and_then(Value::as_u64).ok_or_else(|| format!("{name}.expires_at: not an integer"))?,
                refresh_token,
                registered_redirect_uri,
            },
        );
    }
    Ok(out)
}

/// Now, in Unix seconds.
pub(crate) fn now_s() -> u64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs())
}
