//! Pinned tool definitions (issue 31 §4, "rug pull"; sp-policy(5) UPSTREAMS, "Pins"):
//! an upstream may change a tool's description, schemas or annotations after the
//! operator reviewed them, or list a new tool. Each tool the filter exposes is pinned
//! by the SHA-256 of its canonical definition; a tool whose definition no longer
//! matches its pin, or that has none, is withheld (not listed; a call is refused with
//! `SP_TOOL_CHANGED`, journaled with both hashes) until the operator pins it again
//! (`sp upstream diff`, then `sp upstream approve`: `cli/upstream.rs`).
//!
//! ```text
//!  listing ──> each exposed tool: sha256(canonical {name, title, description, inputSchema,
//!              outputSchema, annotations, execution*} as sent) ──> the upstream's pins (the file, read now)
//!     pin "off" ─────────────────────────────────> every tool exposed
//!     entry, hash equal ─────────────────────────> exposed
//!     entry, hash differs / tool not in it ──────> withheld (Changed / Unpinned)
//!     no entry, "strict" ────────────────────────> every tool withheld (Unpinned)
//!     no entry, "first-use" ── lock, re-read ─ another process pinned first ─> compare with that
//!                                           └─ still none ─> write this listing's pins, exposed
//!     file refused or corrupt ───────────────────> every tool withheld (Unreadable), logged
//! ```
//!
//! Decisions:
//! - Canonical JSON: object keys sorted by their UTF-8 bytes at every depth, no white
//!   space, strings and numbers as serde_json writes them. The definition hashed is the
//!   one `wire::tool` kept, with the upstream's own `name`: `title`, `description`,
//!   `inputSchema`, `outputSchema`, `annotations`, and (*) `execution` as
//!   `{"taskSupport": "optional"|"required"}` when the tool takes tasks (issue 33 §4:
//!   sp relays it; a tool flipped to tasks is a change). `execution` absent or
//!   "forbidden" is not hashed, so a pin made before `execution` was pinned stays valid
//!   for such a tool (`icons` and `_meta` never reach the agent and are not pinned). A
//!   key reordered is no change; a byte of text, an invisible character included, is one.
//! - The pins are per upstream, keyed by the upstream's own tool name. "First sight" is
//!   the first listing that finds no entry for the upstream in the file: the file is
//!   the source of truth across `sp` processes, and that first entry is written under
//!   the file's lock after a re-read, so two sessions starting together pin one set.
//!   A tool the filter exposes later (a wider `tools.allow`) has no pin: withheld like a
//!   new tool until `sp upstream approve`.
//! - The file (`store.rs`) is the policy's path with `.pins` appended (`sp mcp` and `sp
//!   upstream` name it: `Upstreams::with_pins`). Without one (`sp check --probe`, tests),
//!   or when a first pin cannot be written (a directory sp may not write, logged as a
//!   warning), first-use pins are kept in this process only: the session still
//!   withholds a tool that changes under it.
//! - A pins file that is refused (`sys`'s owner and mode checks) or corrupt withholds
//!   every tool of every upstream that pins, and is never rewritten by `sp mcp`.

mod store;

use std::collections::BTreeMap;
use std::fmt;

use serde_json::{Map, Value};

pub(crate) use store::{beside, Entry, Pin, PinFile, Pins};

use crate::gate::vault::Vault;
use crate::policy::upstreams::PinMode;

/// `value` as canonical JSON (module docs): keys sorted at every depth, compact.
pub(crate) fn canonical(value: &Value) -> String {
    let mut out = String::new();
    write_canonical(value, &mut out);
    out
}

fn write_canonical(value: &Value, out: &mut String) {
    match value {
        Value::Object(m) => {
            let mut keys: Vec<&String> = m.keys().collect();
            keys.sort_unstable_by(|a, b| a.as_bytes().cmp(b.as_bytes()));
            out.push('{');
            for (i, k) in keys.into_iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                out.push_str(&Value::String(k.clone()).to_string());
                out.push(':');
                write_canonical(&m[k.as_str()], out);
            }
            out.push('}');
        }
        Value::Array(items) => {
            out.push('[');
            for (i, v) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_canonical(v, out);
            }
            out.push(']');
        }
        scalar => out.push_str(&scalar.to_string()),
    }
}

/// One exposed tool as listed now: its hash, and its canonical definition scrubbed of
/// every secret the process has read (what a pin stores, what `sp upstream diff` shows).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Seen {
    pub tool: String,
    pub sha256: String,
    pub definition: String,
}

impl Seen {
    /// The upstream's own `tool` name and the definition `wire::tool` kept.
    pub(crate) fn of(tool: &str, definition: &Map<String, Value>, vault: &Vault) -> Seen {
        let mut full = Map::new();
        full.insert("name".into(), Value::String(tool.to_owned()));
        full.extend(definition.iter().map(|(k, v)| (k.clone(), v.clone())));
        let mut full = Value::Object(full);
        let sha256 = crate::escape::sha256_hex(canonical(&full).as_bytes());
        vault.scrub(&mut full);
        Seen { tool: tool.to_owned(), sha256, definition: canonical(&full) }
    }

    fn pin(&self) -> Pin {
        Pin { sha256: self.sha256.clone(), definition: self.definition.clone() }
    }
}

/// The pins of `seen`, as an entry.
pub(crate) fn entry_of<'a>(seen: impl IntoIterator<Item = &'a Seen>) -> Entry {
    seen.into_iter().map(|s| (s.tool.clone(), s.pin())).collect()
}

/// Why a tool is withheld.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Cause {
    /// Its definition's hash is not its pin's.
    Changed { pinned: String },
    /// It has no pin: new since the upstream was pinned, newly exposed by the filter, or
    /// never pinned under `"pin": "strict"`.
    Unpinned,
    /// The pins file is refused or corrupt (the log says why).
    Unreadable,
}

/// A tool withheld from the agent: the upstream's own name, the hash of its definition
/// now, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Withheld {
    pub tool: String,
    pub current: String,
    pub cause: Cause,
}

/// `pinned sha256:A, now sha256:B` (or `no pin`): the journal's and the agent's words.
impl fmt::Display for Withheld {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.cause {
            Cause::Changed { pinned } => write!(f, "its definition changed since it was pinned (pinned sha256:{pinned}, now sha256:{})", self.current),
            Cause::Unpinned => write!(f, "it has no pin (pinned none, now sha256:{})", self.current),
            Cause::Unreadable => write!(f, "the pins cannot be read (pinned unknown, now sha256:{})", self.current),
        }
    }
}

/// What a listing's pin check found.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub(crate) struct Checked {
    pub withheld: Vec<Withheld>,
    /// This listing was the upstream's first sight: this many pins were recorded.
    pub pinned_now: Option<usize>,
}

/// The pins of one `sp` process: the file beside the policy (when it came from one),
/// and first-use pins kept for this process only (module docs).
#[derive(Debug)]
pub(crate) struct Book {
    file: Option<PinFile>,
    session: Pins,
}

impl Book {
    /// Pins in the file at `path`, or (`None`) in this process only.
    pub(crate) fn new(path: Option<std::path::PathBuf>) -> Book {
        Book { file: path.map(PinFile::new), session: Pins::new() }
    }

    /// Decides, for one listing of `upstream`, which of its exposed tools are withheld
    /// (module docs); under first use, pins them at first sight.
    pub(crate) fn check(&mut self, upstream: &str, mode: PinMode, seen: &[Seen]) -> Checked {
        if mode == PinMode::Off {
            return Checked::default();
        }
        let all = |cause: Cause| seen.iter().map(|s| Withheld { tool: s.tool.clone(), current: s.sha256.clone(), cause: cause.clone() }).collect();
        let entry = match &self.file {
            None => self.session.get(upstream).cloned(),
            Some(f) => match f.read() {
                Ok(mut pins) => pins.remove(upstream).or_else(|| self.session.get(upstream).cloned()),
                Err(e) => {
                    log::error!("{e}: the tools of upstream {upstream} are withheld");
                    return Checked { withheld: all(Cause::Unreadable), pinned_now: None };
                }
            },
        };
        match entry {
            Some(entry) => Checked { withheld: compare(&entry, seen), pinned_now: None },
            None if mode == PinMode::Strict => Checked { withheld: all(Cause::Unpinned), pinned_now: None },
            None => {
                let mine = entry_of(seen);
                let Some(f) = &self.file else {
                    self.session.insert(upstream.to_owned(), mine);
                    return Checked { withheld: Vec::new(), pinned_now: Some(seen.len()) };
                };
                let recorded = f.update(|pins| match pins.get(upstream) {
                    Some(theirs) => (theirs.clone(), false),
                    None => {
                        pins.insert(upstream.to_owned(), mine.clone());
                        (mine.clone(), true)
                    }
                });
                match recorded {
                    Ok((entry, true)) => {
                        log::info!("upstream {upstream}: {} tool definition(s) pinned at first use in {}", entry.len(), f.path().display());
                        Checked { withheld: Vec::new(), pinned_now: Some(entry.len()) }
                    }
                    // Another process pinned first: its pins are the ones.
                    Ok((entry, false)) => Checked { withheld: compare(&entry, seen), pinned_now: None },
                    Err(e) => {
                        log::warn!("{e}: the first-use pins of upstream {upstream} are kept for this process only");
                        self.session.insert(upstream.to_owned(), mine);
                        Checked { withheld: Vec::new(), pinned_now: Some(seen.len()) }
                    }
                }
            }
        }
    }
}

/// The tools of `seen` whose hash is not their pin in `entry`.
fn compare(entry: &Entry, seen: &[Seen]) -> Vec<Withheld> {
    seen.iter()
        .filter_map(|s| {
            let cause = match entry.get(&s.tool) {
                Some(p) if p.sha256 == s.sha256 => return None,
                Some(p) => Cause::Changed { pinned: p.sha256.clone() },
                None => Cause::Unpinned,
            };
            Some(Withheld { tool: s.tool.clone(), current: s.sha256.clone(), cause })
        })
        .collect()
}

/// One tool in `sp upstream diff`: pinned and listed alike, changed, new, or gone.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Change<'a> {
    Same { tool: &'a str },
    Changed { pinned: &'a Pin, now: &'a Seen },
    New { now: &'a Seen },
    Gone { tool: &'a str, pinned: &'a Pin },
}

/// Each tool of `entry` (the pins, if any) and `seen` (the listing now), by name.
pub(crate) fn changes<'a>(entry: Option<&'a Entry>, seen: &'a [Seen]) -> Vec<Change<'a>> {
    let now: BTreeMap<&str, &Seen> = seen.iter().map(|s| (s.tool.as_str(), s)).collect();
    let mut out = Vec::new();
    for (tool, s) in &now {
        out.push(match entry.and_then(|e| e.get(*tool)) {
            Some(p) if p.sha256 == s.sha256 => Change::Same { tool: s.tool.as_str() },
            Some(p) => Change::Changed { pinned: p, now: s },
            None => Change::New { now: s },
        });
    }
    for (tool, pinned) in entry.into_iter().flatten() {
        if !now.contains_key(tool.as_str()) {
            out.push(Change::Gone { tool, pinned });
        }
    }
    out
}

/// The members of two canonical definitions that differ, each as `(member, old, new)`
/// with its value's canonical JSON (`None`: absent).
pub(crate) fn member_diff(old: &str, new: &str) -> Vec<(String, Option<String>, Option<String>)> {
    let parse = |s: &str| match serde_json::from_str::<Value>(s) {
        Ok(Value::Object(m)) => m,
        _ => Map::new(),
    };
    let (old, new) = (parse(old), parse(new));
    let mut keys: Vec<&String> = old.keys().chain(new.keys()).collect();
    keys.sort();
    keys.dedup();
    keys.into_iter()
        .filter_map(|k| {
            let (o, n) = (old.get(k).map(canonical), new.get(k).map(canonical));
            (o != n).then(|| (k.clone(), o, n))
        })
        .collect()
}

#[cfg(test)]
mod tests;
