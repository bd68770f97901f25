//! Stage 8: executors. The only code that reaches the outside world.
//!
//! [`Executor`] is the narrow seam DESIGN.md asks for: its methods take an
//! [`Authorized`] action, which only `authorize.rs` can build, so nothing half-validated
//! can get here. Tests put a recording executor behind this trait to prove that rejected
//! input never arrives (`calls == []`); the real ones are
//! [`crate::tools::http::exec::HttpExecutor`] and [`crate::tools::ssh::exec::SshExecutor`], put together
//! in `cli::Executors`. This file is the seam only: it names the outcome types (leaves in
//! `http/result.rs` and `ssh/result.rs`) and nothing that runs.

use crate::gate::outcome::ToolCode;
use std::fmt;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use crate::gate::authorize::{Authorized, HttpAction};
use crate::gate::vault::{SecretError, Vault};
pub(crate) use crate::tools::http::result::HttpOutcome;
pub(crate) use crate::tools::ssh::result::{SshError, SshOutcome};

/// The code of a cancelled call (journal rows; the client gets no answer for it).
pub(crate) const SP_CANCELLED: &str = crate::gate::outcome::ToolCode::Cancelled.as_str();

pub trait Executor {
    /// Runs one authorized HTTP request. Reads the credential (through `vault`, which
    /// remembers it for redaction) only now, after authorization. When `cancel` fires
    /// (the client sent `notifications/cancelled`, or closed stdin) the request must stop
    /// promptly: its connection is closed, whatever it returns is discarded.
    fn http(&mut self, action: &Authorized<HttpAction>, vault: &mut Vault, cancel: &Cancel) -> Result<HttpOutcome, ExecError>;

    /// Issue #13: the OAuth2 token fetches made since the last call, oldest first, for
    /// the journal's `token` rows (URL and outcome, never the token).
    fn take_token_fetches(&mut self) -> Vec<TokenFetch> {
        Vec::new()
    }

    /// Runs one authorized SSH command (issue #4); key, passphrase and password files are
    /// read through `vault` at connection time. The default refuses, so an executor built
    /// for HTTP only fails closed.
    /// `progress` reports on a long command when the client asked for it.
    fn ssh(
        &mut self,
        action: &Authorized<crate::tools::ssh::SshAction>,
        vault: &mut Vault,
        progress: &mut Progress<'_>,
    ) -> Result<SshOutcome, SshError> {
        let _ = (action, vault, progress);
        Err(SshError::Unavailable("this executor does not run ssh_exec".into()))
    }
}

/// The cancellation of one running call (issue #10: the loop never goes deaf). The
/// protocol loop's control thread fires it on `notifications/cancelled` for the running
/// request or on stdin EOF; executors observe it: by polling [`Cancel::is_cancelled`] in
/// their wait loops (ssh, the approver), or by registering a hook that interrupts a
/// blocking library call (HTTP: shut the ureq agent's sockets down). Cloning shares it.
#[derive(Clone, Default)]
pub struct Cancel(Arc<CancelInner>);

#[derive(Default)]
struct CancelInner {
    fired: AtomicBool,
    hooks: Mutex<Vec<Box<dyn FnOnce() + Send>>>,
}

impl Cancel {
    pub fn new() -> Cancel {
        Cancel::default()
    }

    pub fn is_cancelled(&self) -> bool {
        self.0.fired.load(Ordering::SeqCst)
    }

    /// Fires once: every hook registered so far runs now, on the caller's thread.
    pub fn cancel(&self) {
        let hooks = {
            let mut hooks = self.0.hooks.lock().unwrap_or_else(|p| p.into_inner());
            if self.0.fired.swap(true, Ordering::SeqCst) {
                return;
            }
            std::mem::take(&mut *hooks)
        };
        for hook in hooks {
            hook();
        }
    }

    /// Runs `hook` when the call is cancelled (at once if it already is).
    pub fn on_cancel(&self, hook: impl FnOnce() + Send + 'static) {
        let mut hooks = self.0.hooks.lock().unwrap_or_else(|p| p.into_inner());
        if self.0.fired.load(Ordering::SeqCst) {
            drop(hooks);
            hook();
        } else {
            hooks.push(Box::new(hook));
        }
    }
}

impl fmt::Debug for Cancel {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Cancel({})", self.is_cancelled())
    }
}

/// The narrow handle the protocol writer lends an executor (MCP "Progress"): it can emit
/// `notifications/progress` for the call's own `progressToken`, at most once a second,
/// with counts only (never output, which is not yet scrubbed), and nothing else. Without
/// a token from the client it does nothing.
pub struct Progress<'a> {
    cancel: Cancel,
    token: Option<Value>,
    sink: Option<&'a mut dyn FnMut(&Value)>,
    started: Instant,
    last: Option<Instant>,
    sent: u64,
}

impl<'a> Progress<'a> {
    pub const INTERVAL: Duration = Duration::from_secs(1);

    pub fn new(token: Option<Value>, sink: &'a mut dyn FnMut(&Value)) -> Progress<'a> {
        Progress { cancel: Cancel::new(), token, sink: Some(sink), started: Instant::now(), last: None, sent: 0 }
    }

    /// The same handle, observing `cancel` (the running call's).
    pub fn with_cancel(mut self, cancel: &Cancel) -> Progress<'a> {
        self.cancel = cancel.clone();
        self
    }

    /// The call was cancelled: the executor stops at its next wake-up and returns.
    pub fn cancelled(&self) -> bool {
        self.cancel.is_cancelled()
    }

    /// The running call's cancel, to register an interrupting hook on.
    pub fn cancel(&self) -> &Cancel {
        &self.cancel
    }

    /// A handle that reports nothing.
    pub fn none() -> Progress<'static> {
        Progress { cancel: Cancel::new(), token: None, sink: None, started: Instant::now(), last: None, sent: 0 }
    }

    /// Called often by a running executor; sends a notification when a second has passed
    /// since the start or the previous one. `progress` is the whole seconds elapsed, so
    /// it increases with every notification, as MCP requires.
    pub fn tick(&mut self, output_bytes: u64) {
        let (Some(token), Some(sink)) = (&self.token, self.sink.as_mut()) else { return };
        let now = Instant::now();
        if now.duration_since(self.last.unwrap_or(self.started)) < Self::INTERVAL {
            return;
        }
        self.last = Some(now);
        self.sent += 1;
        let secs = now.duration_since(self.started).as_secs();
        sink(&json!({
            "jsonrpc": "2.0",
            "method": "notifications/progress",
            "params": {
                "progressToken": token,
                "progress": secs.max(self.sent),
                "message": format!("running for {secs} s, {output_bytes} bytes of output so far")
            }
        }));
    }

    /// Notifications sent so far.
    pub fn sent(&self) -> u64 {
        self.sent
    }
}

/// One OAuth2 token request (issue #13): which credential, where (`POST
/// scheme://host[:port]/path`, no query), and the outcome: the `expires_in` the server
/// gave, or the error (its code and message, which never hold the token or the body).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TokenFetch {
    pub credential: String,
    pub target: String,
    pub outcome: Result<Option<u64>, (&'static str, String)>,
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
    /// The client cancelled the call (`notifications/cancelled` or stdin EOF).
    Cancelled,
}

impl ExecError {
    /// The stable machine code in the tool result.
    pub fn code(&self) -> &'static str {
        match self {
            ExecError::Secret(_) | ExecError::Unavailable(_) => ToolCode::Unavailable.as_str(),
            ExecError::Blocked(_) => ToolCode::Blocked.as_str(),
            ExecError::Timeout(_) => ToolCode::Timeout.as_str(),
            ExecError::Upstream(_) => ToolCode::Upstream.as_str(),
            ExecError::Cancelled => SP_CANCELLED,
        }
    }
}

impl fmt::Display for ExecError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ExecError::Secret(e) => e.fmt(f),
            ExecError::Blocked(m) | ExecError::Timeout(m) | ExecError::Unavailable(m) | ExecError::Upstream(m) => f.write_str(m),
            ExecError::Cancelled => f.write_str("cancelled by the client"),
        }
    }
}
