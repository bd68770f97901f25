//! Stage 8: executors. The only code that reaches the outside world.
//!
//! [`Executor`] is the narrow seam DESIGN.md asks for: its methods take an
//! [`Authorized`] action, which only `authorize.rs` can build, so nothing half-validated
//! can get here. Tests put a recording executor behind this trait to prove that rejected
//! input never arrives (`calls == []`); the real one is [`http::HttpExecutor`].

pub mod dest;
pub mod http;
pub mod ssh;

use std::fmt;

use crate::authorize::{Authorized, HttpAction};
use crate::secret::{SecretError, Vault};
pub use ssh::{SshError, SshOutcome};

pub trait Executor {
    /// Runs one authorized HTTP request. Reads the credential (through `vault`, which
    /// remembers it for redaction) only now, after authorization.
    fn http(&mut self, action: &Authorized<HttpAction>, vault: &mut Vault) -> Result<HttpOutcome, ExecError>;

    /// Runs one authorized SSH command (issue #4); key, passphrase and password files are
    /// read through `vault` at connection time. The default refuses, so an executor built
    /// for HTTP only fails closed.
    fn ssh(&mut self, action: &Authorized<crate::ssh::SshAction>, vault: &mut Vault) -> Result<SshOutcome, SshError> {
        let _ = (action, vault);
        Err(SshError::Unavailable("this executor does not run ssh.exec".into()))
    }
}

/// What `sp mcp` runs with: the HTTP and SSH executors behind the one seam.
#[derive(Default)]
pub struct Executors {
    pub http: http::HttpExecutor,
    pub ssh: ssh::SshExecutor,
}

impl Executors {
    pub fn new() -> Executors {
        Executors::default()
    }
}

impl Executor for Executors {
    fn http(&mut self, action: &Authorized<HttpAction>, vault: &mut Vault) -> Result<HttpOutcome, ExecError> {
        self.http.http(action, vault)
    }

    fn ssh(&mut self, action: &Authorized<crate::ssh::SshAction>, vault: &mut Vault) -> Result<SshOutcome, SshError> {
        self.ssh.run(action, vault)
    }
}

/// What came back. A status is a result, never an error.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HttpOutcome {
    pub status: u16,
    /// Lowercase names, in arrival order; `set-cookie` is never included.
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
    /// The body was cut at `max_response_bytes`.
    pub truncated: bool,
}

/// Why an authorized action did not produce an outcome. Messages name hosts and ports,
/// never a query string, header value or secret.
#[derive(Debug, PartialEq, Eq)]
pub enum ExecError {
    Secret(SecretError),
    /// The destination resolves to an address the policy may not reach (`dest.rs`);
    /// nothing was sent.
    Blocked(String),
    Timeout(String),
    Unavailable(String),
    Upstream(String),
}

impl ExecError {
    /// The stable machine code in the tool result.
    pub fn code(&self) -> &'static str {
        match self {
            ExecError::Secret(_) | ExecError::Unavailable(_) => "SP_UNAVAILABLE",
            ExecError::Blocked(_) => "SP_BLOCKED",
            ExecError::Timeout(_) => "SP_TIMEOUT",
            ExecError::Upstream(_) => "SP_UPSTREAM",
        }
    }
}

impl fmt::Display for ExecError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ExecError::Secret(e) => e.fmt(f),
            ExecError::Blocked(m) | ExecError::Timeout(m) | ExecError::Unavailable(m) | ExecError::Upstream(m) => f.write_str(m),
        }
    }
}
