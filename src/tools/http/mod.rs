//! `http_request`, as one slice: what the agent may ask (`args`, `url`), what the policy
//! allows (`authorize`: rules, credentials, redirect hops), where it may go (`dest`: the
//! SSRF check), how it runs (`exec`, with the `sigv4` and `oauth2` credential mechanisms)
//! and what comes back (`result`, with `coding` for compressed bodies).
//!
//! `sigv4` and `oauth2` are leaves (they import nothing else of the crate), so the
//! policy parser can build their sections without depending on the slice above it.

pub(crate) mod args;
pub(crate) mod authorize;
pub(crate) mod coding;
pub(crate) mod exec;
pub(crate) mod result;
pub(crate) mod url;
