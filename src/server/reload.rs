//! Reading the policy again without restarting the session (issue 35 section 3;
//! `sp(1)` SIGNALS, `sp-policy(5)` RELOAD).
//!
//! ```text
//!  SIGHUP ──────────────┐
//!  "reload": "watch":   ├─> signals::Reload (a flag, and a byte that wakes the loop's
//!  the file changed ────┘     read of stdin; a running call is not disturbed)
//!
//!  the loop, between messages ──> load the file and check it as `sp mcp` does at start
//!     ├─ refused ──> `policy_reload_failed` row (target the file, reason why);
//!     │              the policy in force stays, nothing else changes
//!     └─ loaded ──> swapped: the Vault's rules, the executors (`Executor::reload`:
//!                   connections, tokens, upstreams ended or restarted), rate limits,
//!                   grants store, the watcher, the tools/list the control thread answers
//!               ──> `policy_reload` row (decision `applied` or `unchanged`, reason the
//!                   new policy's sha256)
//!               ──> notifications/tools/list_changed when the tool set may have changed
//! ```
//!
//! A call runs under the policy it started with: the reload is asked by a flag and done
//! by the loop itself, between messages, never during a call. The `audit` section is
//! the exception that is not applied: the session keeps the journal it started (its
//! chain), and a changed `audit` takes effect in new sessions (a warning says so).
//! Secrets are read as before: at their use (and, as at startup, ahead for redaction
//! when the file changed, `gate/vault/preload.rs`); every secret read under the old
//! policy is still scrubbed.

use std::borrow::Cow;
use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use crate::mcp::control::Input;
use crate::mcp::model::live::Listing;
use crate::policy::reload::Reload;
use crate::policy::{Policy, PolicyError};
use crate::tools::{self, Executor};

use super::Server;

/// How often a watched policy file is looked at (its inode, size and times).
pub(crate) const WATCH_EVERY: std::time::Duration = std::time::Duration::from_secs(1);

/// Loads and checks a policy file as `sp mcp` does before it serves (`cli`).
pub(crate) type Load<'p> = Box<dyn Fn(&Path) -> Result<Loaded, ReloadError> + 'p>;

/// What `sp mcp` hands the loop so it can reload: the request (SIGHUP, the watcher), and
/// how a file is loaded and checked (as before serving: `cli`).
pub(crate) struct Reloading<'p> {
    pub(crate) asked: crate::signals::Reload,
    pub(crate) load: Load<'p>,
    /// The running watcher's switch (`"reload": "watch"`).
    watching: Option<Arc<AtomicBool>>,
}

impl<'p> Reloading<'p> {
    pub(crate) fn new(asked: crate::signals::Reload, load: Load<'p>) -> Self {
        Reloading { asked, load, watching: None }
    }

    /// Starts or stops the watcher as `policy` says.
    fn watch(&mut self, policy: &Policy) {
        let wanted = policy.reload == Reload::Watch;
        match (&self.watching, &policy.origin) {
            (Some(on), _) if !wanted => {
                on.store(false, Ordering::SeqCst);
                self.watching = None;
            }
            (None, Some(path)) if wanted => self.watching = watch(path.clone(), self.asked.clone()),
            _ => {}
        }
    }
}

impl Drop for Reloading<'_> {
    fn drop(&mut self) {
        if let Some(on) = &self.watching {
            on.store(false, Ordering::SeqCst);
        }
    }
}

/// A policy file loaded and checked, with what is made from it before serving.
pub(crate) struct Loaded {
    pub(crate) policy: Policy,
    pub(crate) limiter: Option<crate::gate::limits::Limiter>,
    pub(crate) grants: Option<crate::approve::grants::Grants>,
}

/// Why a reload was refused (the policy in force stays).
#[derive(Debug)]
pub(crate) enum ReloadError {
    /// The file does not load or validate.
    Policy(PolicyError),
    /// A static secret it names is refused (too short to be redacted).
    Secret(crate::gate::vault::SecretError),
    /// Its rate limits have nowhere to be counted.
    Limits(String),
    /// The session started with no policy file: there is nothing to read again.
    NoFile,
}

impl fmt::Display for ReloadError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ReloadError::Policy(e) => e.fmt(f),
            ReloadError::Secret(e) => write!(f, "{e}"),
            ReloadError::Limits(why) => f.write_str(why),
            ReloadError::NoFile => f.write_str("no policy file was found at startup: there is nothing to read again (start a new session)"),
        }
    }
}

impl std::error::Error for ReloadError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            ReloadError::Policy(e) => Some(e),
            ReloadError::Secret(e) => Some(e),
            _ => None,
        }
    }
}

impl<'p, E: Executor> Server<'p, E> {
    /// Reloads on SIGHUP (and, with `"reload": "watch"`, when the file changes).
    pub(crate) fn with_reload(mut self, mut reloading: Reloading<'p>) -> Self {
        reloading.watch(&self.policy);
        self.reloading = Some(reloading);
        self
    }

    /// What the control thread answers `tools/list` with under the policy in force.
    pub(super) fn listing(&self) -> Listing {
        match &self.live {
            Some(live) => Listing::Live(live.clone()),
            None => Listing::Fixed(tools::list_for(&self.policy)),
        }
    }

    /// A reload asked and not done yet: done now (module docs). `Err`: the client went
    /// away (the list change could not be written).
    pub(super) fn reload_if_asked<W: std::io::Write + Send>(&mut self, io: &Input<'_, '_, '_, W>) -> std::io::Result<()> {
        let Some(reloading) = &self.reloading else { return Ok(()) };
        if !reloading.asked.take() {
            return Ok(());
        }
        let origin = self.policy.origin.clone();
        let target = origin.as_deref().map(|p| std::path::absolute(p).unwrap_or_else(|_| p.to_owned()).display().to_string());
        let loaded = match &origin {
            Some(path) => (reloading.load)(path),
            None => Err(ReloadError::NoFile),
        };
        let loaded = match loaded {
            Ok(l) => l,
            Err(e) => {
                log::warn!("policy reload refused, the policy in force stays: {e}");
                let row = crate::audit::Row::new("policy_reload_failed").set("target", target).set("decision", "refused").set("reason", e.to_string());
                self.journal.record(row);
                return Ok(());
            }
        };
        let unchanged = loaded.policy.hash() == self.policy.hash();
        if loaded.policy.audit != self.policy.audit {
            log::warn!("policy reload: the audit section changed; this session keeps its journal, new sessions use the new one");
        }
        let old = std::mem::replace(&mut self.policy, Cow::Owned(loaded.policy));
        self.vault.reload(&self.policy);
        if !unchanged {
            // As at startup (issue 31): what an upstream started now returns is scrubbed
            // of the secrets the new policy names, used or not.
            let done = self.vault.preload(&self.policy);
            log::info!("redaction: {} secret source(s) read ahead after the reload, {} could not be", done.read, done.failed.len());
        }
        self.executor.reload(&old, &self.policy);
        self.limiter = loaded.limiter;
        self.grants = loaded.grants;
        if let Some(r) = &mut self.reloading {
            r.watch(&self.policy);
        }
        if self.live.is_none() && !self.policy.upstreams.is_empty() {
            self.live = Some(Default::default());
        }
        if let Some(live) = &self.live {
            live.clear();
            self.live_generation = None;
        }
        io.set_listing(self.listing());
        let hash = self.policy.hash().unwrap_or_default().to_owned();
        log::warn!("policy {} reloaded ({}; sha256 {hash})", target.as_deref().unwrap_or_default(), if unchanged { "unchanged" } else { "applied" });
        let row = crate::audit::Row::new("policy_reload")
            .set("target", target)
            .set("decision", if unchanged { "unchanged" } else { "applied" })
            .set("reason", format!("sha256 {hash}"));
        self.journal.record(row);
        // Upstreams ended by the reload: their `exit` rows.
        self.upstream_aftermath();
        // The fixed tools shown, or any upstream's (listed again, checked against the
        // pins again): the client lists again.
        let fixed_changed = !std::ptr::eq(tools::list_for(&old), tools::list_for(&self.policy));
        if fixed_changed || !old.upstreams.is_empty() || !self.policy.upstreams.is_empty() {
            self.list_changes += 1;
        }
        // Before the handshake is done the client is told after its next request (as
        // an upstream's change is), not unasked in the middle of it.
        if !matches!(self.session, crate::mcp::session::Session::Ready { .. }) {
            return Ok(());
        }
        self.tell_list_changes(io)
    }
}

/// The file's identity and times: a change of any is a change of the file (an editor
/// that renames a new file over it changes the inode; one that writes in place, the
/// size or the modification time).
type Stamp = Option<(u64, u64, u64, i64, i64, i64, i64)>;

fn stamp(path: &Path) -> Stamp {
    use std::os::unix::fs::MetadataExt;
    let m = std::fs::metadata(path).ok()?;
    Some((m.dev(), m.ino(), m.size(), m.mtime(), m.mtime_nsec(), m.ctime(), m.ctime_nsec()))
}

/// Looks at `path` every [`WATCH_EVERY`] and asks for a reload when it changed, until
/// the switch is turned off. `None` if no thread could be started (logged).
fn watch(path: PathBuf, asked: crate::signals::Reload) -> Option<Arc<AtomicBool>> {
    let on = Arc::new(AtomicBool::new(true));
    let running = on.clone();
    // Taken here, not in the thread: a change made before the thread first runs (it may
    // be scheduled late) is still a change.
    let mut last = stamp(&path);
    let spawned = std::thread::Builder::new().name("sp-watch".into()).spawn(move || {
        while running.load(Ordering::SeqCst) {
            std::thread::sleep(WATCH_EVERY);
            let now = stamp(&path);
            // A file that went away is no change to load: the next one that comes is.
            if now.is_some() && now != last && running.load(Ordering::SeqCst) {
                log::info!("policy {} changed on disk: reloading", path.display());
                asked.request();
            }
            last = now;
        }
    });
    match spawned {
        Ok(_) => Some(on),
        Err(e) => {
            log::warn!("cannot watch the policy file ({e}): it is read again on SIGHUP only");
            None
        }
    }
}
