//! What a session counts: rejections (input refused before any action) and executions
//! (authorized actions that ran), apart; `sp mcp` prints the summary at exit.

use std::collections::BTreeMap;

/// Rejections and executions, counted apart.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Stats {
    /// Input refused before any action, by reason.
    pub rejections: BTreeMap<&'static str, u64>,
    /// Authorized actions that ran, by `tool:outcome`.
    pub executions: BTreeMap<String, u64>,
}

/// The most `tool:outcome` keys a session counts apart; later ones are counted under
/// `other:<outcome>`, so the summary line stays short whatever the upstreams list.
pub(crate) const MAX_EXECUTION_KEYS: usize = 64;

impl Stats {
    /// Counts one execution of `tool` (already scrubbed and bounded:
    /// `journal::tool_field`) that ended with `outcome`.
    pub(crate) fn executed_one(&mut self, tool: &str, outcome: &str) {
        let key = format!("{tool}:{outcome}");
        let key = if self.executions.len() >= MAX_EXECUTION_KEYS && !self.executions.contains_key(&key) { format!("other:{outcome}") } else { key };
        *self.executions.entry(key).or_default() += 1;
    }

    pub fn rejected(&self) -> u64 {
        self.rejections.values().sum()
    }
    pub fn executed(&self) -> u64 {
        self.executions.values().sum()
    }
    /// One line for stderr at exit.
    pub fn summary(&self) -> String {
        let list = |m: Vec<(String, u64)>| m.into_iter().map(|(k, v)| format!("{k}={v}")).collect::<Vec<_>>().join(" ");
        format!(
            "executions={} [{}] rejections={} [{}]",
            self.executed(),
            list(self.executions.iter().map(|(k, v)| (k.clone(), *v)).collect()),
            self.rejected(),
            list(self.rejections.iter().map(|(k, v)| (k.to_string(), *v)).collect()),
        )
    }
}
