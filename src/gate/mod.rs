//! The gate every tool passes: authorization (`authorize`: `Authorized<A>` and its one
//! constructor), the executor seam with its cancel and progress handles (`exec`), and the
//! one `Vault` of secrets read with the redactor that scrubs them from what leaves
//! (`vault`, `redact`).

pub(crate) mod authorize;
pub(crate) mod exec;
pub(crate) mod outcome;
pub(crate) mod redact;
pub(crate) mod vault;
