//! [`Scrubbed<T>`]: outside content that has been through the Vault's redactor, or sp's
//! own words. The one door between text from outside and what leaves the process.
//!
//! Only the gate builds one: the Vault (`Vault::scrub_text`, `Vault::scrub_fields`,
//! `vault::scrub_journal_text`, `vault::scrub_log_line`), or the two named constructors
//! for what never came from outside: [`Scrubbed::own`] (a `&'static str`, sp's own
//! words) and [`Scrubbed::from_policy`] (the operator's policy, which holds no secret).
//! What leaves takes it by type:
//!
//! - a tool result (`mcp::model::ToolResult`): its error message and its fields;
//! - the stdout writer (`mcp::out`) writes typed messages whose outside pieces are these
//!   (a `ToolResult`), or sp's own vocabulary (JSON-RPC and MCP members, codes, the
//!   session's answers, refusals about the agent's own request);
//! - the journal: each row's outside text (`target`, `reason`) is passed through
//!   `vault::scrub_journal_text` as the row is written (`audit::Row::finish`);
//! - the logger: each whole line is passed through `vault::scrub_log_line` (`logging.rs`).
//!
//! sp's own keys and codes never pass the redactor, so no secret, however short, can
//! rewrite the envelope (sp-policy(5), CREDENTIALS: min_secret_bytes).

use std::fmt;

use serde_json::{Map, Value};

/// Outside content that passed the Vault, or sp's own words (module doc).
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct Scrubbed<T>(pub(in crate::gate) T);

impl<T> Scrubbed<T> {
    pub(crate) fn get(&self) -> &T {
        &self.0
    }

    pub(crate) fn into_inner(self) -> T {
        self.0
    }
}

impl Scrubbed<String> {
    /// sp's own words: a `&'static str` is written by sp, never by a peer.
    pub(crate) fn own(text: &'static str) -> Scrubbed<String> {
        Scrubbed(text.to_owned())
    }

    pub(crate) fn as_str(&self) -> &str {
        &self.0
    }
}

impl Scrubbed<Map<String, Value>> {
    /// A result made only of sp's words and the operator's policy (`sp_inventory`:
    /// credential names, bound hosts and paths, SSH host names). Nothing in it came
    /// from outside, and a policy holds no secret (secrets live in sources), so it is
    /// taken as it is: its keys and names stay as sp and the operator wrote them.
    pub(crate) fn from_policy(fields: Value) -> Scrubbed<Map<String, Value>> {
        Scrubbed(fields_of(fields))
    }

    /// Both sets of scrubbed fields, `other`'s winning a name both have.
    pub(crate) fn extend(&mut self, other: Scrubbed<Map<String, Value>>) {
        self.0.extend(other.0);
    }
}

/// A tool's fields as an object: anything but an object is wrapped as `{"value": ..}`.
pub(in crate::gate) fn fields_of(fields: Value) -> Map<String, Value> {
    match fields {
        Value::Object(m) => m,
        other => Map::from_iter([("value".to_owned(), other)]),
    }
}

impl fmt::Display for Scrubbed<String> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}
