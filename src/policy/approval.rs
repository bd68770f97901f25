//! `mode` and `approval` (issue #5, `sp-policy(5)`): whether approve-flagged calls wait
//! for the operator's approver, and which program that is. The `approve` flag itself is
//! an ordinary field of a credential (`credentials.rs`) or an SSH host (`ssh.rs`); the
//! rule tying them together ("a flag in enforce mode needs an approver") is checked
//! once the whole document is parsed (`mod.rs`). The gate that asks is `approve.rs`.
//!
//! ```json
//! "mode": "enforce",
//! "approval": {"command": ["/usr/local/bin/sp-approve", "--notify"], "timeout_s": 120}
//! ```

use std::time::Duration;

use serde_json::Value;

use super::fields::{err, int, object, Check};

pub(crate) const DEFAULT_TIMEOUT_S: u64 = 120;
pub(crate) const MAX_TIMEOUT_S: u64 = 3600;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Mode {
    /// Approve-flagged actions wait for the approver.
    #[default]
    Enforce,
    /// Everything the policy allows runs without asking; rows say `observe`.
    Observe,
}

impl Mode {
    pub fn as_str(self) -> &'static str {
        match self {
            Mode::Enforce => "enforce",
            Mode::Observe => "observe",
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApprovalPolicy {
    pub mode: Mode,
    /// `approval.command`: argv, `argv[0]` absolute.
    pub command: Option<Vec<String>>,
    pub timeout: Duration,
}

impl Default for ApprovalPolicy {
    fn default() -> ApprovalPolicy {
        ApprovalPolicy { mode: Mode::Enforce, command: None, timeout: Duration::from_secs(DEFAULT_TIMEOUT_S) }
    }
}

/// Parses the top-level `mode` and `approval` fields (absent: the defaults).
pub(crate) fn parse(mode: Option<&Value>, approval: Option<&Value>) -> Check<ApprovalPolicy> {
    let mut p = ApprovalPolicy::default();
    if let Some(m) = mode {
        p.mode = match m.as_str() {
            Some("enforce") => Mode::Enforce,
            Some("observe") => Mode::Observe,
            _ => return err("mode", "must be \"enforce\" or \"observe\""),
        };
    }
    let Some(a) = approval else { return Ok(p) };
    let map = object(a, "approval", &["command", "timeout_s"])?;
    let argv = match map.get("command") {
        Some(Value::Array(items)) if !items.is_empty() => items
            .iter()
            .enumerate()
            .map(|(i, a)| match a {
                Value::String(s) if !s.contains('\0') && (i > 0 || s.starts_with('/')) => Ok(s.clone()),
                Value::String(_) if i == 0 => err("approval.command[0]", "must be an absolute path to the approver"),
                _ => err(&format!("approval.command[{i}]"), "must be a string"),
            })
            .collect::<Check<Vec<String>>>()?,
        Some(_) => return err("approval.command", "must be a non-empty array: [PROGRAM, ARGS...]"),
        None => return err("approval.command", "is required"),
    };
    p.command = Some(argv);
    if let Some(t) = map.get("timeout_s") {
        p.timeout = Duration::from_secs(int(t, "approval.timeout_s", 1, MAX_TIMEOUT_S)?);
    }
    Ok(p)
}
