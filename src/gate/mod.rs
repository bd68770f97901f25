//! The gate every tool passes: authorization (`authorize`: `Authorized<A>` and its one
//! constructor, through the action's `Rules`), the run context a tool runs with (`exec`:
//! cancel, progress, the `Output` sink of journal events), the result codes (`outcome`),
//! and the one `Vault` of secrets read with the redactor that scrubs them from what
//! leaves (`vault`, `redact`). It names no tool.

pub(crate) mod authorize;
pub(crate) mod exec;
pub(crate) mod outcome;
pub(crate) mod redact;
pub(crate) mod vault;
