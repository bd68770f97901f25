//! The store: [`Grants`], a handle on the grants file under the operator's limits
//! (module docs of `grants`, "The file": how it is read, locked and replaced), and on
//! its key (`mac.rs`): only records the key verifies are grants; the others are
//! noted as [`Forged`] for the journal, and dropped by the next write.

use std::cell::{OnceCell, RefCell};
use std::collections::HashSet;
use std::fs::File;
use std::path::{Path, PathBuf};

use super::form::{is_hex, parse_file, render_file, FormError, Record};
use super::mac::{self, GrantKey, Unsigned};
use super::{ActionKey, Channel, Grant, GrantError, Scope, LOCK_WAIT, MAX_FILE_BYTES, MAX_GRANTS};
use crate::policy::approval::GrantsPolicy;
use crate::sys::{self, SysError};

/// The grants file and the operator's limits (module docs). Cheap: nothing is read
/// until a method needs it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Grants {
    path: PathBuf,
    exact_max_s: Option<u64>,
    session_max_s: Option<u64>,
    /// The key, once read or made: read once per process (`mac.rs`).
    key: OnceCell<GrantKey>,
    /// Records found unsigned or wrongly signed, each noted once per process.
    forged: RefCell<Forgeries>,
}

/// A record of the file that is not a grant: no `mac`, a wrong one, or no key file
/// (`mac.rs`). What the journal row and the warning name; never a `mac`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Forged {
    pub id: String,
    pub scope: Scope,
    pub tool: String,
    pub subject: String,
    pub why: Unsigned,
}

/// At most this many forged records are noted per process (each a journal row); past
/// it, one warning says that more are ignored without a row.
const MAX_NOTED: usize = 4 * MAX_GRANTS;

#[derive(Debug, Clone, Default, PartialEq, Eq)]
struct Forgeries {
    /// SHA-256 of each noted record (content and `mac`): an edit is a new forgery.
    seen: HashSet<String>,
    /// Noted, not yet taken by [`Grants::take_forged`].
    new: Vec<Forged>,
    /// [`MAX_NOTED`] was reached (and said once).
    full: bool,
}

/// What [`Grants::revoke_all`] ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct RevokedAll {
    /// Live grants removed.
    pub count: usize,
    /// The file was corrupt (why) and is replaced by an empty one.
    pub replaced_corrupt: Option<FormError>,
}

impl Grants {
    /// A handle on the grants file at `path` (absolute) under the operator's `limits`.
    /// Reads nothing: each method reads the file as it is then.
    pub(crate) fn open(path: &Path, limits: &GrantsPolicy) -> Result<Grants, GrantError> {
        if !path.is_absolute() {
            return Err(GrantError::NotAbsolute { path: path.to_owned() });
        }
        Ok(Grants {
            path: path.to_owned(),
            exact_max_s: limits.exact_max_s,
            session_max_s: limits.session_max_s,
            key: OnceCell::new(),
            forged: RefCell::default(),
        })
    }

    /// Reads the key, or makes it under the file's lock when there is none (`mac.rs`):
    /// `sp mcp` calls this at startup, before any upstream starts, so the key it signs
    /// and checks with is the one in memory from then on.
    pub(crate) fn prepare_key(&self) -> Result<(), GrantError> {
        self.check_dirs()?;
        if self.key_if_any()?.is_some() {
            return Ok(());
        }
        self.create_dir()?;
        self.locked(|_| self.key_or_create().map(drop))
    }

    /// The key (made when there is none), for tests that write a file themselves.
    #[cfg(test)]
    pub(super) fn test_key(&self) -> GrantKey {
        self.prepare_key().expect("a key");
        self.key.get().expect("prepared").clone()
    }

    /// The records found forged since the last call, each once per process (for the
    /// journal: `approve::gate`).
    pub(crate) fn take_forged(&self) -> Vec<Forged> {
        std::mem::take(&mut self.forged.borrow_mut().new)
    }

    pub(crate) fn path(&self) -> &Path {
        &self.path
    }

    fn max_s(&self, scope: Scope) -> Option<u64> {
        match scope {
            Scope::Exact => self.exact_max_s,
            Scope::Session => self.session_max_s,
        }
    }

    /// The grant that covers this call at `now`, if any: an `exact` grant for `key`
    /// first, then a `session` grant, each under `policy_hash`, made by this user, said
    /// yes to through one of the `accept`ed channels, and of a scope the limits still
    /// allow for its TTL. An error means none applies (fail closed): the caller logs it
    /// and asks.
    ///
    /// `accept` is the channels the call's subject may be approved through: a subject
    /// that requires the out-of-band command must not ride on a grant the MCP client's
    /// own host could have given through elicitation.
    pub(crate) fn find(&self, policy_hash: &str, key: &ActionKey, accept: &[Channel], now: u64) -> Result<Option<Grant>, GrantError> {
        let uid = sys::euid();
        let grants = self.read()?;
        let applies = |g: &&Grant, scope: Scope| {
            g.scope == scope
                && g.live(now)
                && g.uid == uid
                && g.policy == policy_hash
                && accept.contains(&g.channel)
                && self.max_s(scope).is_some_and(|max| g.ttl_s <= max)
        };
        let exact = grants.iter().find(|g| applies(g, Scope::Exact) && g.action.as_deref() == Some(key.hash()));
        Ok(exact.or_else(|| grants.iter().find(|g| applies(g, Scope::Session))).cloned())
    }

    /// The live grants at `now`, soonest to expire first (every user's and policy's: the
    /// file is this user's).
    pub(crate) fn list(&self, now: u64) -> Result<Vec<Grant>, GrantError> {
        let mut grants: Vec<Grant> = self.read()?.into_iter().filter(|g| g.live(now)).collect();
        grants.sort_by(|a, b| (a.expires, &a.id).cmp(&(b.expires, &b.id)));
        Ok(grants)
    }

    /// Stores a grant of `scope` for `ttl_s` seconds (cut to the operator's max, and the
    /// grant then says what was asked) under `policy_hash` for `key`'s call, said yes to
    /// through `channel`. An older grant of the same scope, policy and action is replaced.
    pub(crate) fn add(&self, scope: Scope, ttl_s: u64, policy_hash: &str, key: &ActionKey, channel: Channel, now: u64) -> Result<Grant, GrantError> {
        let max = self.max_s(scope).ok_or(GrantError::NotAllowed { scope })?;
        let ttl = ttl_s.clamp(1, max);
        let action = (scope == Scope::Exact).then(|| key.hash.clone());
        let grant = Grant {
            id: String::new(),
            scope,
            policy: policy_hash.to_owned(),
            created: now,
            expires: now.saturating_add(ttl),
            ttl_s: ttl,
            requested_ttl_s: (ttl_s > ttl).then_some(ttl_s),
            action,
            tool: key.tool.clone(),
            target: key.target.clone(),
            subject: key.subject.clone(),
            channel,
            uid: sys::euid(),
        };
        if !is_hex(&grant.policy, 64) {
            return Err(GrantError::BadPolicyHash);
        }
        self.update(now, |grants| {
            // The channel counts: a command's grant must not be replaced by one an
            // elicitation gave (subjects that require the command accept only the former).
            let same = |g: &Grant| {
                g.scope == grant.scope && g.policy == grant.policy && g.action == grant.action && g.uid == grant.uid && g.channel == grant.channel
            };
            grants.retain(|g| !same(g));
            if grants.len() >= MAX_GRANTS {
                return Err(GrantError::Full { path: self.path.clone() });
            }
            let mut grant = grant.clone();
            grant.id = loop {
                let id = crate::audit::session_id();
                if !grants.iter().any(|g| g.id == id) {
                    break id;
                }
            };
            grants.push(grant.clone());
            Ok(grant)
        })
    }

    /// Ends the grant `id` (a live one; unknown ids are [`GrantError::NotFound`]).
    pub(crate) fn revoke(&self, id: &str, now: u64) -> Result<Grant, GrantError> {
        self.update(now, |grants| {
            let at = grants.iter().position(|g| g.id == id).ok_or_else(|| GrantError::NotFound { id: id.to_owned() })?;
            Ok(grants.remove(at))
        })
    }

    /// Ends every grant; a corrupt file is replaced by an empty one (the one write that
    /// may replace it). A file refused for what it is (a link, another owner, too open)
    /// is left alone.
    pub(crate) fn revoke_all(&self, now: u64) -> Result<RevokedAll, GrantError> {
        let mut corrupt = None;
        let count = self.update_with(now, |parsed| {
            let mut grants = match parsed {
                Ok(g) => g,
                Err(why) => {
                    corrupt = Some(why);
                    Vec::new()
                }
            };
            let n = grants.len();
            grants.clear();
            Ok((grants, n))
        })?;
        Ok(RevokedAll { count, replaced_corrupt: corrupt })
    }

    // -- the key ----------------------------------------------------------------------

    /// The key in memory, else the key file's (kept from then on); `None`: no key file.
    fn key_if_any(&self) -> Result<Option<&GrantKey>, GrantError> {
        if let Some(k) = self.key.get() {
            return Ok(Some(k));
        }
        let path = mac::key_path(&self.path);
        let found = mac::read_key(&path).map_err(|why| GrantError::Key { path, why })?;
        Ok(found.map(|k| self.key.get_or_init(|| k)))
    }

    /// The key, made when there is none. Only under the file's lock.
    fn key_or_create(&self) -> Result<&GrantKey, GrantError> {
        if let Some(k) = self.key.get() {
            return Ok(k);
        }
        let path = mac::key_path(&self.path);
        let temp = sys::state::temp_path(&self.path, &crate::audit::session_id());
        let key = mac::read_or_create_key(&path, &temp).map_err(|why| GrantError::Key { path, why })?;
        Ok(self.key.get_or_init(|| key))
    }

    /// The grants among `records` (those `key` verifies); the others are noted as forged.
    fn verified(&self, records: Vec<Record>, key: Option<&GrantKey>) -> Vec<Grant> {
        let mut grants = Vec::with_capacity(records.len());
        for r in records {
            let why = match (key, &r.mac) {
                (Some(k), Some(m)) if k.verify(&r.grant, m) => {
                    grants.push(r.grant);
                    continue;
                }
                (None, _) => Unsigned::NoKey,
                (Some(_), None) => Unsigned::NoMac,
                (Some(_), Some(_)) => Unsigned::BadMac,
            };
            self.note_forged(&r, why);
        }
        grants
    }

    fn note_forged(&self, r: &Record, why: Unsigned) {
        let mut forged = self.forged.borrow_mut();
        if forged.full {
            return;
        }
        if forged.seen.len() >= MAX_NOTED {
            forged.full = true;
            log::warn!("grants file {}: more than {MAX_NOTED} forged records; further ones are ignored without a journal row", self.path.display());
            return;
        }
        let fp = crate::audit::sha256_hex(&[mac::canonical(&r.grant).as_bytes(), b"\n", r.mac.as_deref().unwrap_or("-").as_bytes()]);
        if !forged.seen.insert(fp) {
            return;
        }
        let g = &r.grant;
        log::warn!("grants file {}: grant {} ({} scope) is ignored: {} (sp did not write it)", self.path.display(), g.id, g.scope.as_str(), why.as_str());
        forged.new.push(Forged { id: g.id.clone(), scope: g.scope, tool: g.tool.clone(), subject: g.subject.clone(), why });
    }

    // -- reading --------------------------------------------------------------------

    /// The grants in the file the key verifies (expired ones too); none when there is
    /// no file. The others are noted as forged.
    fn read(&self) -> Result<Vec<Grant>, GrantError> {
        self.check_dirs()?;
        // On a helper thread with a timeout: a home on a file system that does not answer
        // must not hang the session (`sys::read_within`).
        let bytes = match sys::read_within(&self.path, rules(MAX_FILE_BYTES), sys::READ_TIMEOUT) {
            Ok(b) => b,
            Err(SysError::Missing) => return Ok(Vec::new()),
            Err(why) => return Err(GrantError::File { path: self.path.clone(), why }),
        };
        let records = parse_file(&bytes).map_err(|why| GrantError::Corrupt { path: self.path.clone(), why })?;
        if records.is_empty() {
            return Ok(Vec::new());
        }
        let key = self.key_if_any()?;
        Ok(self.verified(records, key))
    }

    fn check_dirs(&self) -> Result<(), GrantError> {
        sys::check_dirs(&self.path).map_err(|why| GrantError::Dir { path: self.path.clone(), why })
    }

    // -- writing --------------------------------------------------------------------

    /// Read-modify-write under the lock; a corrupt file is an error (never rewritten).
    fn update<T>(&self, now: u64, change: impl FnOnce(&mut Vec<Grant>) -> Result<T, GrantError>) -> Result<T, GrantError> {
        let path = self.path.clone();
        self.update_with(now, |parsed| {
            let mut grants = parsed.map_err(|why| GrantError::Corrupt { path, why })?;
            let out = change(&mut grants)?;
            Ok((grants, out))
        })
    }

    /// The lock, the re-check, the read, then `change` on the live grants the key
    /// verifies (or on why the file is corrupt), then the atomic replacement, each
    /// record signed (module docs). The key is made here when there is none.
    fn update_with<T>(&self, now: u64, change: impl FnOnce(Result<Vec<Grant>, FormError>) -> Result<(Vec<Grant>, T), GrantError>) -> Result<T, GrantError> {
        let file_err = |why: SysError| GrantError::File { path: self.path.clone(), why };
        self.create_dir()?;
        self.check_dirs()?;
        self.locked(|file| {
            let parsed = match sys::read_capped(file, MAX_FILE_BYTES) {
                Ok(bytes) => parse_file(&bytes),
                Err(SysError::TooLarge { max }) => Err(FormError::TooLarge { max }),
                Err(why) => return Err(file_err(why)),
            };
            let key = self.key_or_create()?;
            // Records the key does not verify are not kept: a write removes forgeries.
            let parsed = parsed.map(|records| {
                let mut g = self.verified(records, Some(key));
                g.retain(|g| now < g.expires);
                g
            });
            let (grants, out) = change(parsed)?;
            self.remove_stale_temps();
            let bytes = render_file(&grants, key);
            if bytes.len() as u64 > MAX_FILE_BYTES {
                return Err(GrantError::Full { path: self.path.clone() });
            }
            self.replace(&bytes)?;
            Ok(out)
        })
    }

    fn create_dir(&self) -> Result<(), GrantError> {
        if let Some(dir) = self.path.parent() {
            use std::os::unix::fs::DirBuilderExt;
            std::fs::DirBuilder::new()
                .recursive(true)
                .mode(0o700)
                .create(dir)
                .map_err(|e| GrantError::Write { path: self.path.clone(), why: format!("cannot create {}: {}", dir.display(), sys::os_reason(&e)) })?;
        }
        Ok(())
    }

    /// Runs `f` with the file open (created `0600` when missing) under its exclusive
    /// lock, once the name is known to still point at the locked file (`sys::state`).
    fn locked<T>(&self, f: impl FnOnce(&File) -> Result<T, GrantError>) -> Result<T, GrantError> {
        // Any size here: `revoke --all` must replace an oversized file too.
        sys::state::locked(&self.path, rules(u64::MAX), LOCK_WAIT, f).map_err(|e| match e {
            sys::state::LockedError::File(why) => GrantError::File { path: self.path.clone(), why },
            sys::state::LockedError::HardLinked { links } => GrantError::HardLinked { path: self.path.clone(), links },
            sys::state::LockedError::Busy => GrantError::Locked { path: self.path.clone() },
            sys::state::LockedError::Lock(e) => GrantError::Write { path: self.path.clone(), why: format!("cannot lock: {e}") },
        })?
    }

    /// Removes replacements a writer that died left behind (only under the lock).
    fn remove_stale_temps(&self) {
        sys::state::remove_stale_temps(&self.path);
    }

    /// Writes `bytes` to a new private file beside the grants file and renames it over
    /// the name; both the file and the directory are synced.
    fn replace(&self, bytes: &[u8]) -> Result<(), GrantError> {
        sys::state::replace(&self.path, &crate::audit::session_id(), bytes).map_err(|why| GrantError::Write { path: self.path.clone(), why })
    }
}

/// Owned by root or this user, no group or other bit, at most `max` bytes.
fn rules(max: u64) -> sys::Rules {
    sys::Rules::owned(0o077, max)
}
