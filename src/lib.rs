//! Sallyport (`sp`): an MCP gateway that lets AI agents act on HTTP APIs and SSH hosts without ever
//! holding the credentials.
//!
//! One module per pipeline stage (the team's shared DESIGN.md), each with one input and one output type:
//!
//! ```text
//! stdin -> frame -> json -> jsonrpc -> session -> tools -> authorize -> [approve] -> audit (intent) -> exec -> secret (scrub) -> out
//! ```
//!
//! `server` drives the stages; `cli` parses argv and wires the real stdin, stdout and
//! executors; `policy` is the operator's file. Only `out` may touch stdout. `ssh` holds
//! what `ssh_exec` needs before execution (policy section, arguments, allow-list,
//! known_hosts); its executor is `exec::ssh`. `audit` is the hash-chained journal every
//! decision is written to (the intent row before any effect), `approve` the out-of-band
//! approver, `cli::audit` the `sp audit` commands (issue #5).

pub mod approve;
pub mod audit;
pub mod authorize;
pub mod cli;
pub mod control;
pub mod exec;
pub mod frame;
pub mod fuzzing;
pub mod http;
pub mod json;
pub mod jsonrpc;
pub mod logging;
pub mod out;
pub mod policy;
pub mod redact;
pub mod secret;
pub mod server;
pub mod session;
pub mod signals;
pub mod ssh;
pub mod sys;
pub mod tools;
pub mod wire;
