//! The gate every tool passes: authorization (`authorize`: `Authorized<A>` and its one
//! constructor, through the action's `Rules`), the run context a tool runs with (`exec`:
//! cancel, progress, the `Output` sink of journal events), the result codes (`outcome`),
//! and the one `Vault` of secrets read (`vault`) with the redactor that finds them
//! (`redact`), the `Scrubbed<T>` only the gate builds (`scrubbed`) and the check that
//! withholds a whole answer (`withhold`), and outside text held whole until it is
//! scrubbed, then cut (`outside`), and the rate limits' shared counts (`limits`). It names no tool.

pub(crate) mod authorize;
pub(crate) mod exec;
pub(crate) mod limits;
pub(crate) mod outside;
pub(crate) mod outcome;
pub(crate) mod redact;
pub(crate) mod scrubbed;
pub(crate) mod vault;
pub(crate) mod withhold;
