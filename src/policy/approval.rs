//! `mode` and `approval` (`sp-policy(5)`): whether approve-flagged calls wait
//! for the operator's approver, and which program that is. The `approve` flag itself is
//! an ordinary field of a credential (`credentials.rs`) or an SSH host (`ssh.rs`); the
//! rule tying them together ("a flag in enforce mode needs an approver") is checked
//! once the whole document is parsed (`mod.rs`). The gate that asks is `approve.rs`.
//!
//! ```json
//! "mode": "enforce",
//! "approval": {"command": ["/usr/local/bin/sp-approve", "--notify"], "timeout_s": 120,
//!              "grants": {"exact_max_s": 3600, "session_max_s": 900}}
//! ```
//!
//! `grants`: how long a yes may last when the approver asks for it (the state file and
//! the rules are `approve/grants.rs`). A scope without its `*_max_s` is never granted;
//! no `grants` at all means every approval covers one call, as before.
//!
//! `via`: the channels a flagged call is asked through, in order: `"command"` (the
//! operator's out-of-band approver, the default) and `"elicitation"` (a form the MCP
//! client shows its user, `approve/elicit.rs`). A subject (credential, SSH host) whose
//! `approve` is `"command"` is asked through the command only, whatever `via` says:
//! the agent's own host answers an elicitation.

use std::time::Duration;

use serde_json::Value;

use super::fields::{err, int, object, Check};

pub(crate) const DEFAULT_TIMEOUT_S: u64 = 120;
pub(crate) const MAX_TIMEOUT_S: u64 = 3600;
/// The longest `approval.grants.exact_max_s` or `session_max_s`: one day.
pub(crate) const MAX_GRANT_S: u64 = 86_400;

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
    /// `approval.grants`: none by default (every approval covers one call).
    pub grants: GrantsPolicy,
    /// `approval.via`: the channels asked, in order; `[Command]` by default.
    pub via: Vec<Via>,
}

/// One approval channel of `approval.via`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Via {
    /// The operator's approver program (`approval.command`).
    Command,
    /// An `elicitation/create` form the MCP client shows its user.
    Elicitation,
}

impl Via {
    pub fn as_str(self) -> &'static str {
        match self {
            Via::Command => "command",
            Via::Elicitation => "elicitation",
        }
    }
}

/// A credential's or SSH host's `approve`: `false` (never asked), `true` (asked through
/// `approval.via`), or `"command"` (asked through the approver command only).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Approve {
    #[default]
    No,
    Yes,
    Command,
}

impl Approve {
    pub fn needed(self) -> bool {
        self != Approve::No
    }
}

/// The `approve` field of a credential or SSH host at `field` (absent: [`Approve::No`]).
pub(crate) fn approve_flag(map: &serde_json::Map<String, Value>, field: &str) -> Check<Approve> {
    match map.get("approve") {
        None | Some(Value::Bool(false)) => Ok(Approve::No),
        Some(Value::Bool(true)) => Ok(Approve::Yes),
        Some(Value::String(s)) if s == "command" => Ok(Approve::Command),
        Some(_) => err(&format!("{field}.approve"), "must be true, false or \"command\""),
    }
}

/// `approval.grants`: the longest grant of each scope the operator allows (`None`: that
/// scope is never granted), and where the grants are kept (`None`: the default state
/// file, `grants.rs`).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct GrantsPolicy {
    pub exact_max_s: Option<u64>,
    pub session_max_s: Option<u64>,
    pub path: Option<std::path::PathBuf>,
}

impl Default for ApprovalPolicy {
    fn default() -> ApprovalPolicy {
        ApprovalPolicy {
            mode: Mode::Enforce,
            command: None,
            timeout: Duration::from_secs(DEFAULT_TIMEOUT_S),
            grants: GrantsPolicy::default(),
            via: vec![Via::Command],
        }
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
    let map = object(a, "approval", &["command", "timeout_s", "grants", "via"])?;
    if let Some(v) = map.get("via") {
        p.via = via(v)?;
    }
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
        // Elicitation alone needs no program (a subject that requires the command does:
        // checked once the whole document is parsed, `mod.rs`).
        None if !p.via.contains(&Via::Command) => Vec::new(),
        None => return err("approval.command", "is required (or \"via\": [\"elicitation\"])"),
    };
    p.command = (!argv.is_empty()).then_some(argv);
    if let Some(t) = map.get("timeout_s") {
        p.timeout = Duration::from_secs(int(t, "approval.timeout_s", 1, MAX_TIMEOUT_S)?);
    }
    if let Some(g) = map.get("grants") {
        p.grants = grants(g)?;
    }
    Ok(p)
}

/// `approval.via`: a non-empty list of distinct channels.
fn via(v: &Value) -> Check<Vec<Via>> {
    let Value::Array(items) = v else { return err("approval.via", "must be an array of \"elicitation\" and \"command\"") };
    let mut out = Vec::new();
    for (i, item) in items.iter().enumerate() {
        let channel = match item.as_str() {
            Some("command") => Via::Command,
            Some("elicitation") => Via::Elicitation,
            _ => return err(&format!("approval.via[{i}]"), "must be \"elicitation\" or \"command\""),
        };
        if out.contains(&channel) {
            return err(&format!("approval.via[{i}]"), "names a channel twice");
        }
        out.push(channel);
    }
    if out.is_empty() {
        return err("approval.via", "must name at least one channel");
    }
    Ok(out)
}

/// `approval.grants`: `{"exact_max_s": N, "session_max_s": N, "path": ABSOLUTE_FILE}`,
/// every key optional.
fn grants(v: &Value) -> Check<GrantsPolicy> {
    let map = object(v, "approval.grants", &["exact_max_s", "session_max_s", "path"])?;
    let max = |key: &str| map.get(key).map(|n| int(n, &format!("approval.grants.{key}"), 1, MAX_GRANT_S)).transpose();
    let path = match map.get("path") {
        None => None,
        Some(Value::String(s)) if s.starts_with('/') && !s.contains('\0') && !s.ends_with('/') => Some(std::path::PathBuf::from(s)),
        Some(Value::String(_)) => return err("approval.grants.path", "must be an absolute path to a file"),
        Some(_) => return err("approval.grants.path", "must be a string"),
    };
    Ok(GrantsPolicy { exact_max_s: max("exact_max_s")?, session_max_s: max("session_max_s")?, path })
}
