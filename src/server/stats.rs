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

impl Stats {
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

