//! Rate limits and quotas (issue 35, section 1; `sp-policy(5)`, LIMITS): the counts the
//! `limits` rules of the policy keep, shared by every `sp` process of the user.
//!
//! ```text
//!  authorized call ── rules that apply (policy/limits.rs) ── none ──────────────> on (approve, intent, run)
//!        │ some
//!  open state file (0600, no link), flock ── read first line ── admit ── write ──> on
//!        │                                                       └─ a rule is at max ──> SP_RATE_LIMITED,
//!        └─ cannot (refused, corrupt, lock busy) ──> SP_UNAVAILABLE (fail closed)        retry_after_s
//! ```
//!
//! # Windows
//! Each rule has one window: it opens at the first call the rule counts and lasts
//! `per_s` seconds; in it at most `max` calls pass, and a refused call is told when it
//! closes (`retry_after_s`, at least 1). A window is a fixed one anchored at its first
//! call, not a sliding log: two windows back to back may pass `2 x max` calls in a little
//! over `per_s` seconds; the count per window is exact. A call is counted once it passed
//! the policy, before approval: a call the approver then refuses, or that fails, used
//! its place. A refused call counts nothing: every rule that applies must admit it
//! before any is counted.
//!
//! # The state file
//! `limits_state`, else `limits.json` beside the default journal (`audit::default_location`:
//! `$XDG_STATE_HOME/sallyport/`, else `~/.local/state/sallyport/`), like the grants file.
//! One line of JSON, keyed by each rule's canonical text (`LimitRule::text`: an edited
//! rule starts afresh, a moved one keeps its count):
//!
//! ```text
//! {"v":1,"windows":{"{\"tool\":\"ssh_exec\",\"target\":\"db1\",\"max\":3,\"per_s\":60}":[1796300000123,2,60]}}
//! ```
//!
//! each value `[start_ms, count, per_s]`. Every admission is one read-modify-write under
//! an exclusive `flock` of the file itself (so it is correct under concurrent sessions):
//! open (`O_NOFOLLOW`, created `0600`, owned by root or the user, no group or other
//! bit), lock (waiting at most [`LOCK_WAIT`]), read, drop windows that have closed,
//! count, write at offset 0, truncate. Only the first line is read, so a writer killed
//! between the write and the truncation leaves a stale tail that is ignored. No `fsync`:
//! after a power cut the last counts may be lost, and a window then admits again. The
//! state survives `sp` restarts; a wall clock set back ends the windows it passes.
//! A file that is not ours (a link, another owner, too open) or does not parse is not
//! used: the call fails closed (`SP_UNAVAILABLE`), and the message says how to fix it.
//! Bounded: at most [`MAX_WINDOWS`] windows (the oldest go first) in [`MAX_STATE_BYTES`].

use std::collections::BTreeMap;
use std::fmt;
use std::io::Read;
use std::os::unix::fs::FileExt;
use std::path::PathBuf;
use std::time::Duration;

use serde_json::Value;

use crate::policy::limits::{LimitRule, Subject};
use crate::sys::{self, SysError};

/// How long an admission waits for another process's lock (held for microseconds).
pub(crate) const LOCK_WAIT: Duration = Duration::from_secs(2);
/// Windows kept at most (the rules of every policy used lately).
pub(crate) const MAX_WINDOWS: usize = 1024;
/// The largest state file read.
pub(crate) const MAX_STATE_BYTES: u64 = 1024 * 1024;

/// A call a rule refused: the rule, and when its window closes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Limited {
    /// `limits[N]`.
    pub index: usize,
    /// The rule's canonical text.
    pub rule: String,
    pub max: u64,
    pub per_s: u64,
    /// Whole seconds until the window closes (at least 1).
    pub retry_after_s: u64,
}

impl fmt::Display for Limited {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "rate limit limits[{}] reached: at most {} call(s) per {} s ({}); retry after {} s",
            self.index, self.max, self.per_s, self.rule, self.retry_after_s
        )
    }
}

/// Why the state file could not be used (the call is not run).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum LimitError {
    /// Opening or checking it failed (a link, another owner, too open, ...).
    File {
        path: PathBuf,
        why: SysError,
    },
    Lock {
        path: PathBuf,
        why: sys::LockError,
    },
    /// It does not parse.
    Corrupt {
        path: PathBuf,
        why: String,
    },
    Write {
        path: PathBuf,
        why: String,
    },
}

impl fmt::Display for LimitError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            LimitError::File { path, why } => write!(f, "rate limit state {}: {why}", path.display()),
            LimitError::Lock { path, why } => write!(f, "rate limit state {}: {why}", path.display()),
            LimitError::Corrupt { path, why } => write!(f, "rate limit state {} is corrupt ({why}); remove it to start the counts afresh", path.display()),
            LimitError::Write { path, why } => write!(f, "rate limit state {}: cannot write: {why}", path.display()),
        }
    }
}

impl std::error::Error for LimitError {}

/// The windows, by rule text: `(start_ms, count, per_s)`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct State {
    windows: BTreeMap<String, (u64, u64, u64)>,
}

impl State {
    /// The first line of the file's text (empty: no windows).
    pub(crate) fn parse(text: &str) -> Result<State, String> {
        let line = text.split('\n').next().unwrap_or("");
        if line.trim().is_empty() {
            return Ok(State::default());
        }
        let v: Value = serde_json::from_str(line).map_err(|e| e.to_string())?;
        if v.get("v") != Some(&Value::from(1)) {
            return Err("not version 1".into());
        }
        let Some(Value::Object(w)) = v.get("windows") else { return Err("no windows object".into()) };
        let mut windows = BTreeMap::new();
        for (k, e) in w {
            let n = |i: usize| e.get(i).and_then(Value::as_u64);
            match (n(0), n(1), n(2), e.as_array().map(Vec::len)) {
                (Some(start), Some(count), Some(per_s), Some(3)) => windows.insert(k.clone(), (start, count, per_s)),
                _ => return Err(format!("window {k:?} is not [start_ms, count, per_s]")),
            };
        }
        Ok(State { windows })
    }

    /// The one line written (with its newline).
    pub(crate) fn render(&self) -> String {
        let windows: serde_json::Map<String, Value> = self.windows.iter().map(|(k, (s, c, p))| (k.clone(), serde_json::json!([s, c, p]))).collect();
        let mut line = serde_json::json!({"v": 1, "windows": windows}).to_string();
        line.push('\n');
        line
    }

    /// Drops the windows that are closed at `now_ms` (or start after it: the clock was
    /// set back), then the oldest beyond [`MAX_WINDOWS`].
    fn prune(&mut self, now_ms: u64) {
        self.windows.retain(|_, (start, _, per_s)| *start <= now_ms && now_ms < start.saturating_add(per_s.saturating_mul(1000)));
        if self.windows.len() > MAX_WINDOWS {
            let mut starts: Vec<u64> = self.windows.values().map(|w| w.0).collect();
            starts.sort_unstable();
            let cut = starts[self.windows.len() - MAX_WINDOWS];
            self.windows.retain(|_, w| w.0 >= cut);
        }
    }

    /// The open window of `rule` at `now_ms`: `(start_ms, count)`.
    fn open(&self, rule: &LimitRule, now_ms: u64) -> Option<(u64, u64)> {
        let &(start, count, per_s) = self.windows.get(&rule.text)?;
        (per_s == rule.per_s && start <= now_ms && now_ms < start.saturating_add(per_s.saturating_mul(1000))).then_some((start, count))
    }

    /// The first of `rules` that is at its max at `now_ms`, without counting anything.
    pub(crate) fn check(&self, rules: &[&LimitRule], now_ms: u64) -> Option<Limited> {
        rules.iter().find_map(|r| {
            let (start, count) = self.open(r, now_ms)?;
            (count >= r.max).then(|| {
                let closes = start + r.per_s * 1000;
                Limited { index: r.index, rule: r.text.clone(), max: r.max, per_s: r.per_s, retry_after_s: (closes - now_ms).div_ceil(1000).max(1) }
            })
        })
    }

    /// [`State::check`], then, when no rule refuses, one more call counted in each.
    pub(crate) fn admit(&mut self, rules: &[&LimitRule], now_ms: u64) -> Result<(), Limited> {
        self.prune(now_ms);
        if let Some(l) = self.check(rules, now_ms) {
            return Err(l);
        }
        for r in rules {
            let (start, count) = self.open(r, now_ms).unwrap_or((now_ms, 0));
            self.windows.insert(r.text.clone(), (start, count + 1, r.per_s));
        }
        self.prune(now_ms);
        Ok(())
    }

    /// Calls counted in `rule`'s open window.
    pub(crate) fn used(&self, rule: &LimitRule, now_ms: u64) -> u64 {
        self.open(rule, now_ms).map_or(0, |(_, c)| c)
    }
}

/// The rules of `rules` that apply to `subject`.
pub(crate) fn applying<'r>(rules: &'r [LimitRule], subject: &Subject) -> Vec<&'r LimitRule> {
    rules.iter().filter(|r| r.matches(subject)).collect()
}

/// The state file at `path`. Cheap: nothing is opened until [`Limiter::admit`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Limiter {
    path: PathBuf,
}

fn file_rules() -> sys::Rules {
    sys::Rules::owned(0o077, MAX_STATE_BYTES)
}

impl Limiter {
    pub(crate) fn new(path: PathBuf) -> Limiter {
        Limiter { path }
    }

    /// One read-modify-write under the file's lock: `Ok(Err(limited))` when a rule
    /// refuses the call (nothing counted), `Ok(Ok(()))` when it is counted in every rule.
    /// The clock (`now_ms`, in ms since the epoch) is read once the lock is held: a time
    /// taken before the wait could be older than a window another process opened
    /// meanwhile, which would read as a clock set back and drop its count.
    pub(crate) fn admit(&self, rules: &[&LimitRule], now_ms: impl FnOnce() -> u64) -> Result<Result<(), Limited>, LimitError> {
        if rules.is_empty() {
            return Ok(Ok(()));
        }
        let path = &self.path;
        if let Some(dir) = path.parent()
            && !dir.as_os_str().is_empty()
            && !dir.exists()
        {
            use std::os::unix::fs::DirBuilderExt;
            std::fs::DirBuilder::new()
                .recursive(true)
                .mode(0o700)
                .create(dir)
                .map_err(|e| LimitError::Write { path: path.clone(), why: sys::io_reason(&e) })?;
        }
        let file_err = |why| LimitError::File { path: path.clone(), why };
        let (file, _) = sys::open(path, sys::Access::ReadWriteCreate { mode: 0o600 }, file_rules()).map_err(file_err)?;
        let _lock = sys::lock_exclusive(&file, LOCK_WAIT).map_err(|why| LimitError::Lock { path: path.clone(), why })?;
        let mut text = String::new();
        (&file).take(MAX_STATE_BYTES + 1).read_to_string(&mut text).map_err(|e| LimitError::Corrupt { path: path.clone(), why: sys::io_reason(&e) })?;
        if text.len() as u64 > MAX_STATE_BYTES {
            return Err(LimitError::Corrupt { path: path.clone(), why: format!("larger than {MAX_STATE_BYTES} bytes") });
        }
        let mut state = State::parse(&text).map_err(|why| LimitError::Corrupt { path: path.clone(), why })?;
        let verdict = state.admit(rules, now_ms());
        if verdict.is_ok() {
            let line = state.render();
            let write = |e: std::io::Error| LimitError::Write { path: path.clone(), why: sys::io_reason(&e) };
            file.write_all_at(line.as_bytes(), 0).map_err(write)?;
            file.set_len(line.len() as u64).map_err(write)?;
        }
        Ok(verdict)
    }

    /// The state as it is now, read without a lock and without counting; no file is no
    /// windows (`sp explain`, tests).
    pub(crate) fn peek(&self) -> Result<State, LimitError> {
        match sys::read(&self.path, file_rules()) {
            Ok(bytes) => State::parse(&String::from_utf8_lossy(&bytes)).map_err(|why| LimitError::Corrupt { path: self.path.clone(), why }),
            Err(SysError::Missing) => Ok(State::default()),
            Err(why) => Err(LimitError::File { path: self.path.clone(), why }),
        }
    }
}

/// Milliseconds since the Unix epoch (the windows outlive the process).
pub(crate) fn now_ms() -> u64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_millis() as u64)
}

#[cfg(test)]
mod tests;
