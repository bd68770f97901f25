//! `ssh_exec`: the policy section, the typed arguments, the command
//! allow-list, host-key handling, and the authorization step that turns a typed call into
//! an [`SshAction`]. The executor is `exec.rs` (on the `Conn` that `connect.rs` opens;
//! libssh2's error codes, which both read, in `libssh2.rs`), its outcome `result.rs`, the
//! call from authorized action to tool result `run.rs`; nothing in this module opens a
//! socket, resolves a name or reads a secret. `ssh_get` and `ssh_put` (SFTP on the same
//! kept sessions) are `transfer/`; a host reached through a jump host (`via`), `via.rs`.
//!
//! ```text
//!  tools/call ssh_exec ──> args::parse ──> authorize (here, called by authorize.rs)
//!     SshExec{host, command,               │ host in ssh.hosts?           SshDenial
//!             timeout_s, stdin}            │ command on its list?   ──>   (SP_DENIED)
//!                                          │ timeout_s <= ssh.timeout_s?
//!                                          v
//!                          Authorized<SshAction> ──> run.rs ──> ssh::exec::SshExecutor
//!   connect (each address, timeout, TCP_NODELAY) -> handshake -> host key vs known_hosts
//!   -> authenticate -> [accept-new: record key] -> channel -> exec -> drain -> exit status
//! ```
//!
//! Decisions the issue leaves open, all documented in `sp-policy(5)`/`sp(1)` too:
//! - A host without `commands` accepts any command: the agent has a shell as that user.
//! - `timeout_s` above `ssh.timeout_s` is denied (`SP_DENIED`), not silently lowered:
//!   the agent learns the limit.
//! - The allow-list is checked on the exact command string; see `policy/commands.rs` for what
//!   `*` matches and which escapes are closed.
//! - `sp_inventory` lists each host's name, user and command patterns (`null` = any
//!   command), plus address and port unless `hide_address` is set; never auth details or
//!   key paths.

pub(crate) mod args;
pub(crate) mod connect;
pub(crate) mod authorize;
pub(crate) mod exec;
pub(crate) mod kill;
pub(crate) mod known_hosts;
pub(crate) mod libssh2;
pub(crate) mod pty;
pub(crate) mod record;
pub(crate) mod result;
pub(crate) mod run;
pub(crate) mod transfer;
pub(crate) mod via;

pub(crate) use args::{SshExec, SSH_EXEC};
pub(crate) use authorize::{check_summary, SshAction, SshDenial};

use serde_json::{json, Map, Value};

use crate::approve::Ask;
use crate::escape;
use crate::gate::authorize::Authorized;
use crate::gate::exec::RunContext;
use crate::gate::outcome::ToolCode;
use crate::mcp::model::{ArgError, ToolResult};
use crate::policy::Policy;
use crate::tools::{Audit, Executor, Tool};

/// The table's entry for `ssh_exec` (`tools/mod.rs`).
pub(crate) struct SshTool;

/// What the approver must see besides the command: that it runs under `sudo` with a
/// credential's password (`"sudo": {"credential": NAME}`), and the jump hosts it goes
/// through, nearest the target first (`"via": [NAME, ...]`). Also for transfers.
pub(crate) fn route_facts(a: &SshAction, request: &mut Value, raw: &mut Value) {
    if let Some(s) = &a.sudo {
        request["sudo"] = json!({"credential": crate::approve::line(&s.credential)});
        raw["sudo"] = json!({"credential": s.credential});
    }
    let mut via = Vec::new();
    let mut at = a;
    while let Some(hop) = &at.via {
        via.push(hop.host.clone());
        at = hop;
    }
    if !via.is_empty() {
        request["via"] = json!(via.iter().map(|h| crate::approve::line(h)).collect::<Vec<_>>());
        raw["via"] = json!(via);
    }
}

impl Tool for SshTool {
    const NAME: &'static str = SSH_EXEC;
    type Call = SshExec;
    type Action = SshAction;
    type Denial = SshDenial;

    fn definition() -> Value {
        args::definition()
    }

    fn parse(arguments: &Map<String, Value>) -> Result<SshExec, ArgError> {
        args::parse(arguments)
    }

    fn target(call: &SshExec) -> Option<String> {
        Some(format!("{} {}", call.host, call.command))
    }

    fn code(_: &SshDenial) -> ToolCode {
        ToolCode::Denied
    }

    fn audit(a: &SshAction) -> Audit {
        Audit { rule: Some(a.rule.clone()), credential: None }
    }

    /// Asked when the host is approve-flagged.
    fn approval(policy: &Policy, a: &SshAction) -> Option<Ask> {
        if !policy.ssh_host_needs_approval(&a.host) {
            return None;
        }
        let line = crate::approve::line;
        let (address, unicode) = escape::host(&a.address);
        let mut request = json!({"host": line(&a.host), "user": line(&a.user), "address": address, "port": a.port, "command": line(&a.command)});
        if let Some(u) = unicode {
            request["address_unicode"] = json!(u);
        }
        let mut raw = json!({"host": a.host, "user": a.user, "address": a.address, "port": a.port, "command": a.command});
        if let Some(stdin) = &a.stdin {
            request["stdin"] = crate::approve::text(stdin);
            let (s, cut) = crate::approve::cut(stdin);
            raw["stdin"] = json!(s);
            raw["stdin_truncated"] = json!(cut);
        }
        route_facts(a, &mut request, &mut raw);
        let only_command = policy.ssh.hosts.get(&a.host).is_some_and(|h| h.approve == crate::policy::approval::Approve::Command);
        Some(Ask { subject: a.host.clone(), host: a.address.clone(), request, raw, only_command })
    }

    fn run(executor: &mut dyn Executor, _: &Policy, action: Authorized<SshAction>, ctx: &mut RunContext<'_, '_>) -> ToolResult {
        run::run(executor, &action, ctx)
    }
}
