//! What a running tool gets besides its authorized action: the run context.
//!
//! ```text
//!  the loop ── RunContext { vault, cancel, progress, output } ──> tools::run(action)
//!                                                                   │
//!   journal rows <── Output::emit(Event) <──────────────────────────┘
//!     Intent (a redirect hop: durable first; Err = the hop does not run)
//!     Token  (an OAuth2 token fetch: URL and outcome, never the token)
//!     Facts  (what the result row reports: status, bytes, exit status, ...)
//!     Elicitation (an upstream's elicitation relayed or refused, issue 33)
//!
//!  the loop ── RunContext::client (AskClient) ──> an upstream's call asks sp's client
//! ```
//!
//! A tool reports through [`Output`], in the manner of rustls' `Output::emit`: the loop
//! owns the sink and writes the journal; no tool imports the journal, and the loop never
//! polls an executor afterwards. [`Cancel`] and [`Progress`] are the call's cancellation
//! and its progress notifications; [`ExecError`] is why an effect produced no outcome.
//! Nothing here runs anything: the executor seam that does is `tools::Executor`.

use crate::gate::outcome::ToolCode;
use std::fmt;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::gate::vault::{SecretError, Vault};

/// What a tool's run is lent by the loop: the one [`Vault`] (secrets are read through
/// it and remembered for scrubbing), the call's [`Cancel`], its [`Progress`] handle, and
/// the [`Output`] sink for journal events.
pub struct RunContext<'r, 'p> {
    pub(crate) vault: &'r mut Vault,
    pub(crate) cancel: &'r Cancel,
    pub(crate) progress: &'r mut Progress<'p>,
    pub(crate) output: &'r mut dyn Output,
    /// The agent's client, when the session can ask it during a call ([`AskClient`]).
    pub(crate) client: Option<&'r mut dyn AskClient>,
}

impl<'r, 'p> RunContext<'r, 'p> {
    pub(crate) fn new(vault: &'r mut Vault, cancel: &'r Cancel, progress: &'r mut Progress<'p>, output: &'r mut dyn Output) -> Self {
        RunContext { vault, cancel, progress, output, client: None }
    }

    /// The same context, with the agent's client lent for the call.
    pub(crate) fn with_client(mut self, client: &'r mut dyn AskClient) -> Self {
        self.client = Some(client);
        self
    }

    /// The Vault: read a credential through it (it remembers the value for scrubbing).
    pub fn vault(&mut self) -> &mut Vault {
        self.vault
    }

    /// The running call's cancel: an effect stops promptly when it fires.
    pub fn cancel(&self) -> &Cancel {
        self.cancel
    }

    /// Progress notifications for the call's token, if the client asked for them.
    pub fn progress(&mut self) -> &mut Progress<'p> {
        self.progress
    }
}

/// The sink a running tool reports to (the loop writes the journal from it).
pub(crate) trait Output {
    /// Reports one event. `Err` only where the event must be durable before the tool
    /// goes on ([`Event::Intent`]): the tool then stops without the effect.
    fn emit(&mut self, event: Event) -> Result<(), Unavailable>;
}

/// An event a running tool reports.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Event {
    /// A further effect of the same call (an HTTP redirect hop) is about to run: its
    /// intent row, durable before it (sp-audit(1), "Writing").
    Intent { target: String, rule: String, note: String },
    /// An OAuth2 token request was made (`token` row).
    Token(TokenFetch),
    /// The facts the call's `result` row reports, as known so far (the last one wins).
    Facts(Facts),
    /// An upstream asked the agent's client during the call (`elicitation` row):
    /// `decision` is the client's action, `refused` (sp refused it) or `failed`.
    Elicitation { decision: &'static str, reason: String },
}

/// The agent's client, asked on behalf of a running tool: an upstream's
/// `elicitation/create` relayed (issue 33, section 3). The loop lends one to a call
/// when its session could send it a request (the handshake eras).
pub(crate) trait AskClient {
    /// The elicitation modes the client declared in `initialize`.
    fn modes(&self) -> ElicitModes;
    /// Sends `elicitation/create` with `params` (already checked) and waits for the
    /// client's answer until `deadline` or the call's `cancel`.
    fn elicit(&mut self, params: Value, deadline: Instant, cancel: &Cancel) -> Asked;
}

/// The elicitation modes a client declared (MCP 2025-11-25 "Elicitation", capabilities).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct ElicitModes {
    pub form: bool,
    pub url: bool,
}

/// What came of asking the client.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Asked {
    /// Its `result`, not yet checked.
    Result(Value),
    /// It answered with a JSON-RPC error (only the code is kept: its message is its own).
    Error(i64),
    TimedOut,
    Cancelled,
}

/// The journal fields of a `result` row that only the run knows. `None` leaves a field
/// out of the row.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Facts {
    /// HTTP: the status of the last response.
    pub status: Option<u16>,
    /// SSH: the command's exit status.
    pub exit_status: Option<i32>,
    /// Bytes of output: an HTTP body as kept, or SSH stdout and stderr as written
    /// (what did not fit included).
    pub bytes_out: Option<u64>,
    /// `ssh_put`: the bytes written.
    pub bytes_in: Option<u64>,
    /// `ssh_get`, `ssh_put`: SHA-256 (hex) of the file's bytes that moved.
    pub sha256: Option<String>,
    pub truncated: Option<bool>,
    /// HTTP: redirect hops followed (a successful result row says so in `reason`).
    pub redirects: u32,
    /// SSH: the host key's fingerprint.
    pub host_key_fp: Option<String>,
    /// An upstream MCP server's tool: the `isError` of its result.
    pub is_error: Option<bool>,
    /// SSH with `ssh.recordings`: the session recording written (issue 34 §1).
    pub recording: Option<RecordingFacts>,
}

/// What the `result` row says of a session recording (`tools/ssh/record.rs`): its path,
/// its SHA-256 (hex; `None`: it could not be written), its size, and whether lines were
/// left out at `max_bytes`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct RecordingFacts {
    pub path: String,
    pub sha256: Option<String>,
    pub bytes: u64,
    pub cut: bool,
}

/// The journal could not take an event that must be durable: the action was not run.
/// The message is for the agent (`the action was not run: ...`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Unavailable(pub String);

impl fmt::Display for Unavailable {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for Unavailable {}

/// An [`Output`] that keeps every event (unit tests of a tool's run).
#[cfg(test)]
#[derive(Debug, Default)]
pub(crate) struct Recorded(pub Vec<Event>);

#[cfg(test)]
impl Output for Recorded {
    fn emit(&mut self, event: Event) -> Result<(), Unavailable> {
        self.0.push(event);
        Ok(())
    }
}

/// The cancellation of one running call (the loop is never deaf: `mcp/control`). The
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

/// One progress report for the running call: the writer's side sends it as a
/// `notifications/progress` (`mcp::model::Notification::progress`); nothing here is
/// JSON-RPC. `progress` increases with every report (MCP "Progress").
#[derive(Debug, Clone, PartialEq)]
pub struct ProgressReport {
    pub token: Value,
    pub progress: serde_json::Number,
    pub total: Option<serde_json::Number>,
    pub message: Option<String>,
}

/// The narrow handle the protocol writer lends an executor (MCP "Progress"): it can emit
/// `notifications/progress` for the call's own `progressToken`, at most once a second,
/// with counts only (never output, which is not yet scrubbed), and nothing else. Without
/// a token from the client it does nothing.
pub struct Progress<'a> {
    cancel: Cancel,
    token: Option<Value>,
    sink: Option<&'a mut dyn FnMut(ProgressReport)>,
    started: Instant,
    last: Option<Instant>,
    sent: u64,
    /// The last `progress` sent; [`Progress::relay`] shifts an upstream's numbers past it
    /// when the first of them arrives (`base`).
    high: f64,
    base: Option<f64>,
}

impl<'a> Progress<'a> {
    pub const INTERVAL: Duration = Duration::from_secs(1);
    /// While a call waits for approval: well inside the 10 s hosts are promised.
    pub const WAIT_INTERVAL: Duration = Duration::from_secs(5);

    pub fn new(token: Option<Value>, sink: &'a mut dyn FnMut(ProgressReport)) -> Progress<'a> {
        Progress { cancel: Cancel::new(), token, sink: Some(sink), started: Instant::now(), last: None, sent: 0, high: 0.0, base: None }
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
        Progress { cancel: Cancel::new(), token: None, sink: None, started: Instant::now(), last: None, sent: 0, high: 0.0, base: None }
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
        let progress = secs.max(self.sent);
        self.high = progress as f64;
        let message = format!("running for {secs} s, {output_bytes} bytes of output so far");
        sink(ProgressReport { token: token.clone(), progress: progress.into(), total: None, message: Some(message) });
    }

    /// Passes on an upstream MCP server's own progress report for this call: its numbers
    /// (increasing, as the upstream client checked) and its message, scrubbed. The
    /// upstream client already spaces them (`tools/upstream/client.rs`). The upstream's
    /// numbers are shifted past what this call already reported (while it waited for
    /// approval), so `progress` keeps increasing as MCP requires; `total` moves with it.
    pub(crate) fn relay(&mut self, progress: f64, total: Option<f64>, message: Option<crate::gate::vault::Scrubbed<String>>) {
        let (Some(token), Some(sink)) = (&self.token, self.sink.as_mut()) else { return };
        let (sent, high) = (self.sent, self.high);
        let base = *self.base.get_or_insert(if sent > 0 { high + 1.0 } else { 0.0 });
        let progress = base + progress;
        if sent > 0 && progress <= high {
            return;
        }
        // Not a finite number: nothing to report (the upstream client checked them).
        let Some(number) = serde_json::Number::from_f64(progress) else { return };
        let total = total.and_then(|t| serde_json::Number::from_f64(base + t));
        self.sent += 1;
        self.high = progress;
        sink(ProgressReport { token: token.clone(), progress: number, total, message: message.map(|m| m.into_inner()) });
    }

    /// Called often while the call waits for approval; sends a notification when
    /// [`Progress::WAIT_INTERVAL`] has passed since the start or the previous one, with
    /// `message` (sp's own words: who is asked). Hosts that reset their request timeout
    /// on progress (TypeScript SDK `resetTimeoutOnProgress`) keep waiting (sp(1),
    /// APPROVAL). The same count as [`Progress::tick`], so `progress` keeps increasing
    /// when the run starts.
    pub fn waiting(&mut self, message: &str) {
        let (Some(token), Some(sink)) = (&self.token, self.sink.as_mut()) else { return };
        let now = Instant::now();
        if now.duration_since(self.last.unwrap_or(self.started)) < Self::WAIT_INTERVAL {
            return;
        }
        self.last = Some(now);
        self.sent += 1;
        let secs = now.duration_since(self.started).as_secs();
        let progress = secs.max(self.sent);
        self.high = progress as f64;
        let message = format!("{message} ({secs} s so far)");
        sink(ProgressReport { token: token.clone(), progress: progress.into(), total: None, message: Some(message) });
    }

    /// Notifications sent so far.
    pub fn sent(&self) -> u64 {
        self.sent
    }
}

/// One OAuth2 token request: which credential, where (`POST
/// scheme://host[:port]/path`, no query), and the outcome: the `expires_in` the server
/// gave, or the error (its code and message, which never hold the token or the body).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct TokenFetch {
    pub credential: String,
    pub target: String,
    pub outcome: Result<Option<u64>, (ToolCode, String)>,
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
    pub(crate) fn code(&self) -> ToolCode {
        match self {
            ExecError::Secret(_) | ExecError::Unavailable(_) => ToolCode::Unavailable,
            ExecError::Blocked(_) => ToolCode::Blocked,
            ExecError::Timeout(_) => ToolCode::Timeout,
            ExecError::Upstream(_) => ToolCode::Upstream,
            ExecError::Cancelled => ToolCode::Cancelled,
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

impl std::error::Error for ExecError {}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn progress_of(notes: &[ProgressReport]) -> Vec<f64> {
        notes.iter().map(|n| n.progress.as_f64().expect("a number")).collect()
    }

    /// An upstream's own numbers start again from 0; after a wait for approval already
    /// reported up to some value they are shifted past it, `total` with them, so the
    /// client sees `progress` increase as MCP requires.
    #[test]
    fn relayed_progress_keeps_increasing_after_a_wait() {
        let mut notes = Vec::new();
        let mut sink = |r: ProgressReport| notes.push(r);
        let mut p = Progress::new(Some(json!("t")), &mut sink);
        p.started -= Duration::from_secs(12);
        p.waiting("asking the approver");
        p.relay(0.0, Some(10.0), None);
        p.relay(3.0, Some(10.0), None);
        drop(p);
        assert_eq!(progress_of(&notes), [12.0, 13.0, 16.0]);
        assert_eq!(notes[2].total, serde_json::Number::from_f64(23.0));
    }

    /// Without a wait the upstream's numbers pass unchanged.
    #[test]
    fn relayed_progress_passes_unchanged_when_first() {
        let mut notes = Vec::new();
        let mut sink = |r: ProgressReport| notes.push(r);
        let mut p = Progress::new(Some(json!(7)), &mut sink);
        p.relay(0.0, None, None);
        p.relay(0.5, Some(1.0), None);
        drop(p);
        assert_eq!(progress_of(&notes), [0.0, 0.5]);
        assert_eq!(notes[1].total, serde_json::Number::from_f64(1.0));
    }
}
