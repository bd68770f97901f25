//! `ssh_exec` (issue #4): the policy section, the typed arguments, the command
//! allow-list, host-key handling, and the authorization step that turns a typed call into
//! an [`SshAction`]. The executor is `exec.rs`, its outcome `result.rs`; nothing in this module opens a
//! socket, resolves a name or reads a secret.
//!
//! ```text
//!  tools/call ssh_exec ──> args::parse ──> authorize (here, called by authorize.rs)
//!     SshExec{host, command,               │ host in ssh.hosts?           SshDenial
//!             timeout_s, stdin}            │ command on its list?   ──>   (SP_DENIED)
//!                                          │ timeout_s <= ssh.timeout_s?
//!                                          v
//!                          Authorized<SshAction> ──> ssh::exec::SshExecutor
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
pub(crate) mod authorize;
pub(crate) mod exec;
pub(crate) mod known_hosts;
pub(crate) mod result;
// The policy section and the command patterns live with the rest of the operator's
// file (`policy/`, a leaf); these paths keep working.

pub(crate) use args::{SshExec, SSH_EXEC};
pub(crate) use authorize::{authorize, check_summary, inventory, SshAction, SshDenial};
