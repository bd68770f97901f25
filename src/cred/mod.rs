//! Credentials: where a secret goes in a request (`inject`), AWS Signature Version 4
//! (`sigv4`) and OAuth2 client credentials (`oauth2`).

pub(crate) mod inject;
pub(crate) mod oauth2;
pub(crate) mod sigv4;
