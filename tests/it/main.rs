//! The process-level tests: one integration-test binary (issue 32 §2). Each module was
//! once its own file under `tests/` and its own binary; as one binary the suite compiles
//! `support` once and links once instead of 33 times.
//!
//! The rule: a new process-level test is a module here. Put it in `tests/it/NAME.rs`
//! (with `use crate::support;` where it used `mod support;`) and add `mod NAME;` below,
//! in order. Run one with `cargo test --profile fast --test it NAME::` (the module
//! path is the filter). Every test that waits on a child or a socket has a deadline and
//! says what it waited for (`support::process`, `support::sshd`, `support::http_server`).
#![allow(clippy::disallowed_methods, reason = "tests start sp, sshd, approvers and clients and read their environment; the fence in clippy.toml is for src/")]

#[path = "../support/mod.rs"]
mod support;

mod approval_channels;
mod approver_display;
mod args;
mod audit;
mod audit_export;
mod check_display;
mod compressed;
mod corpus;
mod credentials;
mod deaf;
mod explain;
mod faults;
mod files;
mod first_use;
mod fuzz_findings;
mod grants;
mod http_exec;
mod http_transport;
mod inflight_ids;
mod journal_location;
mod launcher;
mod localhost;
mod outcome_unknown;
mod output;
mod process_corpus;
mod protocol;
mod rate_limits;
mod redact_echo;
mod redact_preload;
mod reload;
mod short_secret;
mod ssh;
mod ssh_files;
mod ssh_kill;
mod ssh_record;
mod ssh_via;
mod ssrf;
mod stdout_clean;
mod subreaper;
mod tls_redirects;
mod tool_surface;
mod upstream_elicit;
mod upstream_gate;
mod upstream_isolation;
mod upstream_modern;
mod upstream_oauth;
mod upstream_oauth_register;
mod upstream_oauth_sealed;
mod upstream_pins;
mod upstream_resources;
mod upstream_tasks;
