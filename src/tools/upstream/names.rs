//! Exposed tool names: `<upstream>_<tool>`, safe for every MCP host, mapped back exactly.
//!
//! Hosts accept only `^[a-zA-Z0-9_-]{1,64}$` (`sp(1)`, TOOLS) and prefix
//! `mcp__<server>__`, so an exposed name is at most [`MAX_EXPOSED_LEN`] characters of
//! that alphabet. An upstream name is `[a-z0-9-]` (`policy/upstreams.rs`), so the first
//! `_` of an exposed name ends it. A tool name that is unsafe (a `.`, a space, anything
//! outside the alphabet) or too long is rewritten deterministically: unsafe characters
//! become `-`, the result is cut to fit, and `-` plus the first [`HASH_HEX`] hex digits of
//! SHA-256 of the original name are appended, so `a.b` and `a-b` differ. Two tools that
//! still map to one name, or a name equal to one of `sp`'s own tools, are a
//! [`NameError`]: the listing is refused, nothing is guessed.
//!
//! The way back is a table ([`NameTable`]), never a parse of the exposed name.

use std::collections::BTreeMap;
use std::fmt;

use sha2::{Digest, Sha256};

pub(crate) const MAX_EXPOSED_LEN: usize = 48;
/// Hex digits of the hash suffix: 32 bits, enough to keep apart the names of one upstream.
pub(crate) const HASH_HEX: usize = 8;
/// `sp`'s own tools (and `http_get`, a name older clients know): never an upstream's.
pub(crate) const RESERVED: &[&str] = &["http_request", "ssh_exec", "sp_inventory", "http_get"];

fn is_safe(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'_' || b == b'-'
}

/// The exposed name of `tool` of `upstream` (an upstream name is at most 24 characters,
/// so at least 23 are left for the tool part).
pub(crate) fn exposed_name(upstream: &str, tool: &str) -> String {
    let plain = format!("{upstream}_{tool}");
    if !tool.is_empty() && tool.bytes().all(is_safe) && plain.len() <= MAX_EXPOSED_LEN {
        return plain;
    }
    let digest = Sha256::digest(tool.as_bytes());
    let hash: String = digest.iter().take(HASH_HEX / 2).map(|b| format!("{b:02x}")).collect();
    let room = MAX_EXPOSED_LEN - upstream.len() - 1 - 1 - HASH_HEX;
    let safe: String = tool.chars().map(|c| if c.is_ascii() && is_safe(c as u8) { c } else { '-' }).take(room).collect();
    format!("{upstream}_{safe}-{hash}")
}

/// Why a listing's names cannot be exposed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum NameError {
    /// Two of the upstream's tools map to one exposed name.
    Collision { exposed: String },
    /// An exposed name is one of `sp`'s own tools.
    Reserved { exposed: String },
}

impl fmt::Display for NameError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            NameError::Collision { exposed } => write!(f, "two tools map to the exposed name {exposed}"),
            NameError::Reserved { exposed } => write!(f, "the exposed name {exposed} is one of sp's own tools"),
        }
    }
}

impl std::error::Error for NameError {}

/// Exposed name -> the upstream's own tool name, for one upstream; and which of them
/// are withheld because their definition does not match its pin (`pins.rs`): such a
/// name still resolves, so a call of it is refused as changed, not as unknown.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct NameTable {
    map: BTreeMap<String, String>,
    withheld: BTreeMap<String, super::pins::Withheld>,
}

impl NameTable {
    /// The table of `tools` (the upstream's own names) of `upstream`.
    pub(crate) fn build<'a>(upstream: &str, tools: impl IntoIterator<Item = &'a str>) -> Result<NameTable, NameError> {
        let mut map = BTreeMap::new();
        for tool in tools {
            let exposed = exposed_name(upstream, tool);
            if RESERVED.contains(&exposed.as_str()) {
                return Err(NameError::Reserved { exposed });
            }
            if map.insert(exposed.clone(), tool.to_owned()).is_some() {
                return Err(NameError::Collision { exposed });
            }
        }
        Ok(NameTable { map, withheld: BTreeMap::new() })
    }

    /// Marks the exposed name `exposed` (in the table) withheld.
    pub(crate) fn withhold(&mut self, exposed: &str, why: super::pins::Withheld) {
        if self.map.contains_key(exposed) {
            self.withheld.insert(exposed.to_owned(), why);
        }
    }

    /// Why `exposed` is withheld, if it is.
    pub(crate) fn withheld(&self, exposed: &str) -> Option<&super::pins::Withheld> {
        self.withheld.get(exposed)
    }

    /// The upstream's own name of an exposed tool.
    pub(crate) fn tool(&self, exposed: &str) -> Option<&str> {
        self.map.get(exposed).map(String::as_str)
    }

    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.map.len()
    }
}

/// The upstream an exposed name belongs to, if any: the part before the first `_`.
/// Only to find which table to look in; the table decides.
pub(crate) fn upstream_of(exposed: &str) -> Option<&str> {
    exposed.split_once('_').map(|(u, _)| u)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn alphabet_ok(s: &str) -> bool {
        (1..=MAX_EXPOSED_LEN).contains(&s.len()) && s.bytes().all(is_safe)
    }

    #[test]
    fn plain_names_are_joined_unsafe_and_long_ones_get_a_hash() {
        assert_eq!(exposed_name("github", "create_issue"), "github_create_issue");
        assert_eq!(exposed_name("fs", "read-file"), "fs_read-file");
        let dotted = exposed_name("fs", "files.read");
        assert_eq!(dotted.len(), "fs_files-read-".len() + HASH_HEX);
        assert!(dotted.starts_with("fs_files-read-"), "{dotted}");
        let long = "x".repeat(200);
        let l = exposed_name("abcdefghijklmnopqrstuvwx", &long);
        assert_eq!(l.len(), MAX_EXPOSED_LEN);
        assert!(l.starts_with("abcdefghijklmnopqrstuvwx_xxxxxxxxxxxxxx-"), "{l}");
        for (u, t) in [("a", ""), ("a", "é"), ("a", "a b"), ("a", "\u{202e}x"), ("a", "a/b"), ("a", &"é".repeat(60))] {
            let e = exposed_name(u, t);
            assert!(alphabet_ok(&e), "{t:?} -> {e:?}");
            assert_eq!(upstream_of(&e), Some(u));
        }
        // Deterministic, and distinct for names the rewrite would merge.
        assert_eq!(exposed_name("fs", "files.read"), dotted);
        assert_ne!(exposed_name("fs", "a.b"), exposed_name("fs", "a-b"));
        assert_ne!(exposed_name("fs", "a.b"), exposed_name("fs", "a:b"));
        assert_ne!(exposed_name("u", &format!("{long}1")), exposed_name("u", &format!("{long}2")));
    }

    #[test]
    fn the_table_maps_back_exactly_and_refuses_collisions() {
        let t = NameTable::build("fs", ["read", "files.read", "x".repeat(100).as_str()]).unwrap();
        assert_eq!(t.len(), 3);
        assert_eq!(t.tool("fs_read"), Some("read"));
        assert_eq!(t.tool(&exposed_name("fs", "files.read")), Some("files.read"));
        assert_eq!(t.tool(&exposed_name("fs", &"x".repeat(100))), Some("x".repeat(100).as_str()));
        assert_eq!(t.tool("fs_files.read"), None);
        assert_eq!(t.tool("fs_nope"), None);
        // The same name twice: a collision (an upstream listing a tool twice).
        assert_eq!(NameTable::build("fs", ["a", "a"]), Err(NameError::Collision { exposed: "fs_a".into() }));
        // A tool whose rewritten name equals another's plain name.
        let forged = exposed_name("fs", "a.b");
        let plain_part = forged.strip_prefix("fs_").unwrap().to_owned();
        assert_eq!(NameTable::build("fs", ["a.b", plain_part.as_str()]), Err(NameError::Collision { exposed: forged }));
        for (u, t) in [("http", "request"), ("ssh", "exec"), ("sp", "inventory"), ("http", "get")] {
            assert_eq!(NameTable::build(u, [t]), Err(NameError::Reserved { exposed: format!("{u}_{t}") }));
        }
    }
}
