//! The pins file: read strictly ([`parse`]), written whole ([`render`]) by a
//! read-modify-write under an exclusive `flock` and an atomic rename ([`PinFile::update`]),
//! the way the grants file is (`approve/grants.rs`, "The file"):
//!
//! ```text
//!  open NAME (created 0600, O_NOFOLLOW) ── flock (LOCK_WAIT) ── NAME still this file? ── no: again
//!    └─ read, parse ── change(entry) ── .NAME.<session>.tmp (O_EXCL, 0600), fsync ── rename ── fsync dir
//! ```
//!
//! Readers take no lock: a rename is atomic. A file that does not parse is corrupt: it
//! is never rewritten (the operator fixes or removes it), and every pinned upstream's
//! tools are withheld meanwhile.
//!
//! ```text
//! {"version":1,"upstreams":{"gh":{"tools":{"get_me":{"sha256":"<64 hex>","definition":"<canonical JSON>"}}}}}
//! ```
//! `definition` is the canonical JSON text of the definition that was pinned, scrubbed
//! of the secrets the pinning process had read: what `sp upstream diff` compares with.
//! It is a string, not a nested object, so a deeply nested schema cannot push the file
//! past the JSON parser's depth limit (and make every upstream's pins unreadable).

use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::{json, Map, Value};

use crate::sys::{self, SysError};

const FILE_VERSION: u64 = 1;
/// Largest pins file read or written.
pub(crate) const MAX_FILE_BYTES: u64 = 64 * 1024 * 1024;
/// How long a writer waits for another's lock.
pub(crate) const LOCK_WAIT: Duration = Duration::from_secs(5);

/// One tool's pin: the SHA-256 of its canonical definition, and that definition's
/// canonical text (scrubbed) for `sp upstream diff`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Pin {
    pub sha256: String,
    pub definition: String,
}

/// An upstream's pins, by the upstream's own tool name.
pub(crate) type Entry = BTreeMap<String, Pin>;

/// The whole file: each pinned upstream's entry.
pub(crate) type Pins = BTreeMap<String, Entry>;

/// Why the pins file cannot be used. Names the file and the reason, never a value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum PinFileError {
    /// Refused by `sys`'s checks (a link, not a regular file, another owner, too open,
    /// too large) or unreadable.
    File {
        path: PathBuf,
        why: SysError,
    },
    Dir {
        path: PathBuf,
        why: sys::UnsafeDir,
    },
    /// Not a file this `sp` wrote: what is wrong with it.
    Corrupt {
        path: PathBuf,
        why: String,
    },
    Locked {
        path: PathBuf,
    },
    Write {
        path: PathBuf,
        why: String,
    },
    /// It has more than one name (a hard link elsewhere would be rewritten too).
    HardLinked {
        path: PathBuf,
        links: u64,
    },
}

impl fmt::Display for PinFileError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PinFileError::File { path, why } => write!(f, "pins file {}: {why}", path.display()),
            PinFileError::Dir { path, why } => write!(f, "pins file {}: {why}", path.display()),
            PinFileError::Corrupt { path, why } => write!(f, "pins file {} is corrupt ({why}): fix or remove it", path.display()),
            PinFileError::Locked { path } => {
                write!(f, "pins file {}: another process has held its lock for more than {}s", path.display(), LOCK_WAIT.as_secs())
            }
            PinFileError::Write { path, why } => write!(f, "pins file {}: cannot write it: {why}", path.display()),
            PinFileError::HardLinked { path, links } => write!(f, "pins file {} has {links} names (hard links): refused", path.display()),
        }
    }
}

impl std::error::Error for PinFileError {}

/// The pins file beside a policy: its path with `.pins` appended.
pub(crate) fn beside(policy: &Path) -> PathBuf {
    let mut name = policy.as_os_str().to_owned();
    name.push(".pins");
    PathBuf::from(name)
}

/// A handle on the pins file (nothing is opened until used).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct PinFile {
    path: PathBuf,
}

impl PinFile {
    pub(crate) fn new(path: PathBuf) -> PinFile {
        PinFile { path }
    }

    pub(crate) fn path(&self) -> &Path {
        &self.path
    }

    /// The pins as the file holds them now; none when there is no file.
    pub(crate) fn read(&self) -> Result<Pins, PinFileError> {
        sys::check_dirs(&self.path).map_err(|why| PinFileError::Dir { path: self.path.clone(), why })?;
        let bytes = match sys::read_within(&self.path, rules(), sys::READ_TIMEOUT) {
            Ok(b) => b,
            Err(SysError::Missing) => return Ok(Pins::new()),
            Err(why) => return Err(PinFileError::File { path: self.path.clone(), why }),
        };
        parse(&bytes).map_err(|why| PinFileError::Corrupt { path: self.path.clone(), why })
    }

    /// Read-modify-write of the whole file under its lock (module docs): `change` gets
    /// the pins as they are now and returns what to hand back; the file is written
    /// only when the pins changed.
    pub(crate) fn update<T>(&self, change: impl FnOnce(&mut Pins) -> T) -> Result<T, PinFileError> {
        let write_err = |why: String| PinFileError::Write { path: self.path.clone(), why };
        let file_err = |why: SysError| PinFileError::File { path: self.path.clone(), why };
        sys::check_dirs(&self.path).map_err(|why| PinFileError::Dir { path: self.path.clone(), why })?;
        let locked = sys::state::locked(&self.path, rules(), LOCK_WAIT, |file| {
            let bytes = sys::read_capped(file, MAX_FILE_BYTES).map_err(file_err)?;
            let mut pins = parse(&bytes).map_err(|why| PinFileError::Corrupt { path: self.path.clone(), why })?;
            let before = pins.clone();
            let out = change(&mut pins);
            if pins != before {
                sys::state::remove_stale_temps(&self.path);
                let bytes = render(&pins);
                if bytes.len() as u64 > MAX_FILE_BYTES {
                    return Err(write_err(format!("the pins would take more than {MAX_FILE_BYTES} bytes")));
                }
                sys::state::replace(&self.path, &crate::audit::session_id(), &bytes).map_err(write_err)?;
            }
            Ok(out)
        });
        locked.map_err(|e| match e {
            sys::state::LockedError::File(why) => file_err(why),
            sys::state::LockedError::HardLinked { links } => PinFileError::HardLinked { path: self.path.clone(), links },
            sys::state::LockedError::Busy => PinFileError::Locked { path: self.path.clone() },
            sys::state::LockedError::Lock(e) => write_err(format!("cannot lock: {e}")),
        })?
    }
}

/// Owned by root or this user, no group or other bit, at most [`MAX_FILE_BYTES`].
fn rules() -> sys::Rules {
    sys::Rules::owned(0o077, MAX_FILE_BYTES)
}

/// The file's text: one upstream per line, keys sorted.
pub(crate) fn render(pins: &Pins) -> Vec<u8> {
    let mut out = format!("{{\"version\":{FILE_VERSION},\"upstreams\":{{");
    for (i, (name, entry)) in pins.iter().enumerate() {
        let tools: Map<String, Value> = entry.iter().map(|(tool, p)| (tool.clone(), json!({"sha256": p.sha256, "definition": p.definition}))).collect();
        out.push_str(if i == 0 { "\n" } else { ",\n" });
        out.push_str(&Value::String(name.clone()).to_string());
        out.push(':');
        out.push_str(&json!({ "tools": tools }).to_string());
    }
    out.push_str("\n}}\n");
    out.into_bytes()
}

/// Parses the file strictly: duplicate keys (`json.rs`), unknown keys, a bad upstream
/// name or hash: all make it corrupt. An empty file (just created by a writer) holds
/// no pins.
pub(crate) fn parse(bytes: &[u8]) -> Result<Pins, String> {
    if bytes.iter().all(u8::is_ascii_whitespace) {
        return Ok(Pins::new());
    }
    let text = std::str::from_utf8(bytes).map_err(|_| "not UTF-8".to_owned())?;
    let root = crate::json::parse_limited(text, usize::try_from(MAX_FILE_BYTES).unwrap_or(usize::MAX) * 4).map_err(|e| e.to_string())?;
    let top = only(&root, "the file", &["version", "upstreams"])?;
    if top.get("version").and_then(Value::as_u64) != Some(FILE_VERSION) {
        return Err(format!("version must be {FILE_VERSION}"));
    }
    let Some(Value::Object(ups)) = top.get("upstreams") else { return Err("upstreams must be an object".into()) };
    let mut pins = Pins::new();
    for (name, entry) in ups {
        let at = format!("upstreams.{}", crate::sys::short(name, 32, crate::sys::Ellipsis::Marked));
        if !crate::policy::upstreams::is_upstream_name(name) {
            return Err(format!("{at}: not an upstream name"));
        }
        let e = only(entry, &at, &["tools"])?;
        let Some(Value::Object(tools)) = e.get("tools") else { return Err(format!("{at}.tools must be an object")) };
        let mut out = Entry::new();
        for (tool, pin) in tools {
            let tat = format!("{at}.tools.{}", crate::sys::short(tool, 32, crate::sys::Ellipsis::Marked));
            let p = only(pin, &tat, &["sha256", "definition"])?;
            let sha256 = match p.get("sha256") {
                Some(Value::String(h)) if h.len() == 64 && h.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b)) => h.clone(),
                _ => return Err(format!("{tat}.sha256 must be 64 lower-case hex digits")),
            };
            let Some(Value::String(definition)) = p.get("definition") else { return Err(format!("{tat}.definition must be a string")) };
            out.insert(tool.clone(), Pin { sha256, definition: definition.clone() });
        }
        pins.insert(name.clone(), out);
    }
    Ok(pins)
}

/// `v` as an object whose keys are all in `keys` (every one required).
fn only<'a>(v: &'a Value, at: &str, keys: &[&str]) -> Result<&'a Map<String, Value>, String> {
    let Value::Object(m) = v else { return Err(format!("{at} must be an object")) };
    if let Some(k) = m.keys().find(|k| !keys.contains(&k.as_str())) {
        return Err(format!("{at}: unknown key {:?}", crate::sys::short(k, 32, crate::sys::Ellipsis::Marked)));
    }
    if let Some(k) = keys.iter().find(|k| !m.contains_key(**k)) {
        return Err(format!("{at}: {k} is required"));
    }
    Ok(m)
}
