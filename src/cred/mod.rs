//! Credentials: where a secret is read from (`source`: file, env, systemd, command),
//! where it goes in a request (`inject`), AWS Signature Version 4 (`sigv4`) and OAuth2
//! client credentials (`oauth2`). The policy sections they use are plain types of
//! `policy` (`policy::schemes`).

pub(crate) mod inject;
pub(crate) mod oauth2;
pub(crate) mod sigv4;
pub(crate) mod source;
