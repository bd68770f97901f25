//! Sallyport (`sp`): an MCP gateway that lets AI agents act on HTTP APIs and SSH hosts without ever
//! holding the credentials.
//!
//! One module per pipeline stage (README.md, "Code map"), each with one input and one output type:
//!
//! ```text
//! stdin -> frame -> json -> jsonrpc -> session -> tools -> authorize -> [approve] -> audit (intent) -> exec -> secret (scrub) -> out
//! ```
//!
//! `server` drives the stages; `cli` parses argv and wires the real stdin, stdout and
//! executors; `policy` is the operator's file. Only `out` may touch stdout. `tools` is the
//! tool table, one folder per kind (`http/`, `ssh/`, `inventory/`: arguments, rules, run,
//! result) and the `Executor` seam; `gate` wraps what their rules allow in `Authorized`
//! and lends each run its context (Vault, cancel, progress, event sink). `audit` is
//! the hash-chained journal every decision is written to (the intent row before any
//! effect), `approve` the out-of-band approver, `grants` the approvals that last (and
//! `cli::approve` their `sp approve` commands), `cli::audit` the `sp audit` commands.
//! README.md, "Code map", has the whole map.

// `pub(crate)` by default; `pub` only on what the public surface below reaches.
#![warn(unreachable_pub)]
// A panic is no way to report an error here: outside tests every `unwrap`/`expect` is
// an error (`make lint`), and each that remains says why it cannot fail in an
// `#[expect(clippy::expect_used, reason = ...)]`.
#![cfg_attr(not(test), deny(clippy::unwrap_used, clippy::expect_used))]

mod approve;
mod cred;
mod gate;
mod mcp;
mod net;
mod tools;
mod audit;
mod cli;
mod escape;
pub mod fuzzing;
mod json;
mod logging;
mod policy;
mod server;
mod signals;
mod sys;
// Other MCP servers behind the gate: a self-contained module until the tool table, the
// journal and approval call it (its own tests drive every part of it meanwhile).

// The public surface: what `main.rs`, the integration tests, the examples and the fuzz
// targets (through `fuzzing`) use. Everything else is `pub(crate)`, and the
// `unreachable_pub` lint keeps it so.
pub use gate::authorize::Authorized;
pub use cli::{run, EXIT_FATAL};
pub use gate::exec::{Cancel, ExecError, Progress, RunContext};
pub use tools::Executor;
pub use tools::http::authorize::HttpAction;
pub use tools::http::result::HttpOutcome;
pub use tools::ssh::result::{SshError, SshOutcome, Stop};
pub use tools::http::args::{OVERRIDE_HEADERS, OVERRIDE_PARAMS};
pub use net::dest;
pub use tools::http::exec::HttpExecutor;
pub use mcp::out::{take_stdout, ProtocolWriter};
pub use sys::launcher_entry;
pub use policy::{Policy, SecretSource};
pub use gate::vault::Vault;
pub use server::{Exit, Options, Server};
pub use tools::ssh::authorize::SshAction;
pub use tools::{call_request, ToolCall};
pub use tools::upstream::tool::{UpstreamAction, UpstreamRequest};
pub use tools::upstream::{UpstreamCall, UpstreamDenial, UpstreamError, Upstreams};
