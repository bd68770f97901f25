//! `ssh_get` and `ssh_put` (issue 34 §2): one remote file read or written over SFTP on
//! the host's kept SSH session, within the host's `files` path patterns
//! (`policy/ssh/files.rs`). Two kinds in the table sharing one action:
//!
//! ```text
//!  ssh_get {host, path}                 args.rs: path absolute, no . .. // NUL
//!  ssh_put {host, path, content,   ──>  authorize.rs: host? files.read|write rule
//!           encoding?, overwrite?}      matches path? put within files.max_bytes?
//!                                            │                         └─ no ─> SP_DENIED
//!                                            v
//!              Authorized<TransferAction> ──> run.rs ──> SshExecutor::transfer (sftp.rs)
//!                realpath matches a rule too, size limits, temp + rename, mode bits
//! ```
//!
//! Listed only when some host has patterns for the direction ([`get_listed`],
//! [`put_listed`]); called otherwise, the policy refuses it (`SP_DENIED`: no rule).
//! A host's `commands` list does not apply: no command runs, and a put cannot start one.
//! Approval and `limits` apply as for `ssh_exec` (the host's `approve` flag; the target
//! is the host name).

pub(crate) mod args;
pub(crate) mod authorize;
pub(crate) mod result;
pub(crate) mod record;
pub(crate) mod run;
pub(crate) mod sftp;

use serde_json::{json, Map, Value};

use crate::approve::Ask;
use crate::escape;
use crate::gate::authorize::Authorized;
use crate::gate::exec::RunContext;
use crate::gate::outcome::ToolCode;
use crate::mcp::model::{ArgError, ToolResult};
use crate::policy::Policy;
use crate::tools::{Audit, Executor, Tool};

pub(crate) use args::{SshGet, SshPut, SSH_GET, SSH_PUT};
pub(crate) use authorize::{Op, TransferAction, TransferDenial};

/// Whether some host has `files.read` patterns.
pub(crate) fn get_listed(policy: &Policy) -> bool {
    policy.ssh.hosts.values().any(|h| h.files.as_ref().is_some_and(|f| !f.read.is_empty()))
}

/// Whether some host has `files.write` patterns.
pub(crate) fn put_listed(policy: &Policy) -> bool {
    policy.ssh.hosts.values().any(|h| h.files.as_ref().is_some_and(|f| !f.write.is_empty()))
}

/// The journal's target: the host, the operation and the path.
fn target(host: &str, op: &str, path: &str) -> Option<String> {
    Some(format!("{host} {op} {path}"))
}

/// Asked when the host is approve-flagged: the host, the path, and for a put the size
/// and the start of the content.
fn approval(policy: &Policy, t: &TransferAction) -> Option<Ask> {
    let a = &t.conn;
    if !policy.ssh_host_needs_approval(&a.host) {
        return None;
    }
    let line = crate::approve::line;
    let (address, unicode) = escape::host(&a.address);
    let op = match t.op {
        Op::Get => "get",
        Op::Put { .. } => "put",
    };
    let mut request = json!({"host": line(&a.host), "user": line(&a.user), "address": address, "port": a.port, "operation": op, "path": line(&t.path)});
    if let Some(u) = unicode {
        request["address_unicode"] = json!(u);
    }
    let mut raw = json!({"host": a.host, "user": a.user, "address": a.address, "port": a.port, "operation": op, "path": t.path});
    if let Op::Put { content, overwrite } = &t.op {
        let text = String::from_utf8_lossy(content);
        request["bytes"] = json!(content.len());
        request["overwrite"] = json!(overwrite);
        request["content"] = crate::approve::text(&text);
        let (s, cut) = crate::approve::cut(&text);
        raw["bytes"] = json!(content.len());
        raw["overwrite"] = json!(overwrite);
        raw["content"] = json!(s);
        raw["content_truncated"] = json!(cut);
    }
    super::route_facts(a, &mut request, &mut raw);
    let only_command = policy.ssh.hosts.get(&a.host).is_some_and(|h| h.approve == crate::policy::approval::Approve::Command);
    Some(Ask { subject: a.host.clone(), host: a.address.clone(), request, raw, only_command })
}

/// The table's entry for `ssh_get` (`tools/mod.rs`).
pub(crate) struct SshGetTool;

impl Tool for SshGetTool {
    const NAME: &'static str = SSH_GET;
    type Call = SshGet;
    type Action = TransferAction;
    type Denial = TransferDenial;

    fn definition() -> Value {
        args::get_definition()
    }

    fn parse(arguments: &Map<String, Value>) -> Result<SshGet, ArgError> {
        args::parse_get(arguments)
    }

    fn target(call: &SshGet) -> Option<String> {
        target(&call.host, "get", &call.path)
    }

    fn code(_: &TransferDenial) -> ToolCode {
        ToolCode::Denied
    }

    fn audit(t: &TransferAction) -> Audit {
        Audit { rule: Some(t.conn.rule.clone()), credential: None }
    }

    fn approval(policy: &Policy, t: &TransferAction) -> Option<Ask> {
        approval(policy, t)
    }

    fn run(executor: &mut dyn Executor, _: &Policy, action: Authorized<TransferAction>, ctx: &mut RunContext<'_, '_>) -> ToolResult {
        run::run(executor, &action, ctx)
    }
}

/// The table's entry for `ssh_put` (`tools/mod.rs`).
pub(crate) struct SshPutTool;

impl Tool for SshPutTool {
    const NAME: &'static str = SSH_PUT;
    type Call = SshPut;
    type Action = TransferAction;
    type Denial = TransferDenial;

    fn definition() -> Value {
        args::put_definition()
    }

    fn parse(arguments: &Map<String, Value>) -> Result<SshPut, ArgError> {
        args::parse_put(arguments)
    }

    fn target(call: &SshPut) -> Option<String> {
        target(&call.host, "put", &call.path)
    }

    fn code(_: &TransferDenial) -> ToolCode {
        ToolCode::Denied
    }

    fn audit(t: &TransferAction) -> Audit {
        Audit { rule: Some(t.conn.rule.clone()), credential: None }
    }

    fn approval(policy: &Policy, t: &TransferAction) -> Option<Ask> {
        approval(policy, t)
    }

    fn run(executor: &mut dyn Executor, _: &Policy, action: Authorized<TransferAction>, ctx: &mut RunContext<'_, '_>) -> ToolResult {
        run::run(executor, &action, ctx)
    }
}

#[cfg(test)]
mod tests;
