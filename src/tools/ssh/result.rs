//! What `ssh_exec` returns: the outcome of a command that ran, or why none did, and the
//! tool result they become. A leaf the executor seam (`exec.rs`) names in its signature.

use serde_json::{json, Value};

use crate::gate::vault::SecretError;
use crate::gate::outcome::ToolCode;

/// A command that ran to its end (whatever its exit status).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SshOutcome {
    pub host: String,
    pub exit_status: Option<i32>,
    pub exit_signal: Option<String>,
    pub stdout: Vec<u8>,
    pub stderr: Vec<u8>,
    /// Bytes the command wrote to each stream, including what did not fit.
    pub stdout_bytes: u64,
    pub stderr_bytes: u64,
    pub truncated: bool,
    pub duration_ms: u64,
    /// `SHA256:<base64>` of the server's host key, as `ssh-keygen -l` prints it.
    pub host_key_fingerprint: String,
    /// When each piece of the kept output arrived, in order: what a recording's events
    /// are cut from (`record.rs`). Not part of the result.
    pub chunks: Vec<Chunk>,
}

/// A piece of kept output: when it arrived (since the command was sent), on which
/// stream, and where it ends in that stream's buffer (`SshOutcome::stdout`/`stderr`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Chunk {
    pub at: std::time::Duration,
    pub stderr: bool,
    pub end: usize,
}

impl SshOutcome {
    /// The tool result (`structuredContent`). Scrub `stdout`/`stderr` bytes first.
    pub fn to_json(&self) -> Value {
        // Moved in, not serialised again as `json!` would (the output is the bulk).
        let mut v = crate::mcp::model::object([
            ("host", self.host.clone().into()),
            ("exit_status", self.exit_status.into()),
            ("stdout", text(&self.stdout, self.truncated).into()),
            ("stderr", text(&self.stderr, self.truncated).into()),
            ("truncated", self.truncated.into()),
            ("stdout_bytes", self.stdout_bytes.into()),
            ("stderr_bytes", self.stderr_bytes.into()),
            ("duration_ms", self.duration_ms.into()),
            ("host_key_fingerprint", self.host_key_fingerprint.clone().into()),
        ]);
        if let Some(sig) = &self.exit_signal {
            v["exit_signal"] = json!(sig);
        }
        v
    }
}

/// The `outputSchema` of `ssh_exec`: what [`SshOutcome::to_json`] writes.
pub(crate) fn output_schema() -> Value {
    let n = json!({"type": "integer", "minimum": 0});
    let props = json!({
        "host": {"type": "string", "description": "The inventory host name"},
        "exit_status": {"type": ["integer", "null"], "description": "null when the command ended by a signal or was stopped"},
        "exit_signal": {"type": "string"},
        "stdout": {"type": "string"},
        "stderr": {"type": "string"},
        "truncated": {"type": "boolean", "description": "The shared output budget was reached"},
        "stdout_bytes": n,
        "stderr_bytes": n,
        "duration_ms": n,
        "host_key_fingerprint": {"type": "string"}
    });
    let Value::Object(props) = props else { unreachable!("an object literal") };
    let required = ["host", "exit_status", "stdout", "stderr", "truncated", "stdout_bytes", "stderr_bytes", "duration_ms", "host_key_fingerprint"];
    crate::gate::outcome::result_schema(props, &required)
}

/// Output bytes (scrubbed) as the result's text: invalid UTF-8 as U+FFFD, a character
/// cut by `truncated` trimmed.
pub(crate) fn text(bytes: &[u8], truncated: bool) -> String {
    match std::str::from_utf8(bytes) {
        Ok(t) => t.to_owned(),
        Err(e) if truncated && e.error_len().is_none() => String::from_utf8_lossy(&bytes[..e.valid_up_to()]).into_owned(),
        Err(_) => String::from_utf8_lossy(bytes).into_owned(),
    }
}

/// Why an authorized `ssh_exec` produced no outcome. Messages name the inventory host,
/// address and port, never a secret.
#[derive(Debug, PartialEq, Eq)]
pub enum SshError {
    /// Unknown (under `strict`), changed, revoked, or the known_hosts file is unusable.
    HostKey(String),
    Auth(String),
    Secret(SecretError),
    Unavailable(String),
    /// The command outlived its timeout: what it printed until then.
    Timeout {
        message: String,
        partial: Box<SshOutcome>,
    },
    Upstream(String),
    /// The client cancelled the call: what became of the command (its channel
    /// and the connection are closed either way).
    Cancelled(Stop),
}

/// What sp did to a command it ended early (timeout or cancel), as the result and the
/// journal say it (`exec.rs` module docs). No variant says "stopped": sp cannot know of
/// a process that detached itself from everything it can see.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Stop {
    /// Cancelled before the command was sent: nothing runs.
    NotStarted,
    /// A second channel killed (SIGKILL) `processes` processes: the command's session,
    /// every descendant of those, and the sessions those descendants led; none was left
    /// a moment later.
    Killed { processes: u32 },
    /// The kill did not run or did not confirm (`why`); the channel and the connection
    /// were closed, so with a pty the command's terminal was hung up.
    HungUp { pty: bool, why: String },
}

impl std::fmt::Display for Stop {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Stop::NotStarted => f.write_str("the command was not started"),
            Stop::Killed { processes: 0 } => f.write_str(
                "its processes had ended when sp looked for them, and sp closed the connection; a process that \
                 detached itself (setsid and a double fork) may still run",
            ),
            Stop::Killed { processes } => write!(
                f,
                "sp killed its {processes} process(es) (its session and every process started from it) and closed \
                 the connection; a process that detached itself from both (setsid and a double fork) may still run"
            ),
            Stop::HungUp { pty: true, why } => {
                write!(f, "hung up (SIGHUP to its terminal; the channel and the connection were closed; {why}); the remote side may still run")
            }
            Stop::HungUp { pty: false, why } => {
                write!(f, "cut off (no terminal: the channel and the connection were closed; {why}); the remote side may still run")
            }
        }
    }
}

impl SshError {
    /// The stable machine code in the tool result.
    pub(crate) fn code(&self) -> ToolCode {
        match self {
            SshError::HostKey(_) => ToolCode::HostKey,
            SshError::Auth(_) => ToolCode::Auth,
            SshError::Secret(_) | SshError::Unavailable(_) => ToolCode::Unavailable,
            SshError::Timeout { .. } => ToolCode::Timeout,
            SshError::Upstream(_) => ToolCode::Upstream,
            SshError::Cancelled(_) => ToolCode::Cancelled,
        }
    }

    pub fn partial(&self) -> Option<&SshOutcome> {
        match self {
            SshError::Timeout { partial, .. } => Some(partial),
            _ => None,
        }
    }

    pub fn partial_mut(&mut self) -> Option<&mut SshOutcome> {
        match self {
            SshError::Timeout { partial, .. } => Some(partial),
            _ => None,
        }
    }
}

impl std::fmt::Display for SshError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            SshError::Secret(e) => e.fmt(f),
            SshError::Timeout { message, .. } => f.write_str(message),
            SshError::HostKey(m) | SshError::Auth(m) | SshError::Unavailable(m) | SshError::Upstream(m) => f.write_str(m),
            SshError::Cancelled(Stop::NotStarted) => f.write_str("cancelled by the client before the command started"),
            SshError::Cancelled(stop) => write!(f, "cancelled by the client: {stop}"),
        }
    }
}

impl std::error::Error for SshError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            SshError::Secret(e) => Some(e),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn no_stop_says_stopped_and_each_says_what_may_survive() {
        let cases = [
            (Stop::NotStarted, "the command was not started"),
            (
                Stop::Killed { processes: 0 },
                "its processes had ended when sp looked for them, and sp closed the connection; a process that detached \
                 itself (setsid and a double fork) may still run",
            ),
            (
                Stop::Killed { processes: 3 },
                "sp killed its 3 process(es) (its session and every process started from it) and closed the connection; \
                 a process that detached itself from both (setsid and a double fork) may still run",
            ),
            (
                Stop::HungUp { pty: true, why: "no /proc".into() },
                "hung up (SIGHUP to its terminal; the channel and the connection were closed; no /proc); the remote side may still run",
            ),
            (
                Stop::HungUp { pty: false, why: "no /proc".into() },
                "cut off (no terminal: the channel and the connection were closed; no /proc); the remote side may still run",
            ),
        ];
        for (stop, want) in cases {
            assert_eq!(stop.to_string(), want);
            assert!(!want.contains("stopped"));
        }
        assert_eq!(SshError::Cancelled(Stop::NotStarted).to_string(), "cancelled by the client before the command started");
        assert_eq!(SshError::Cancelled(Stop::Killed { processes: 2 }).to_string(), format!("cancelled by the client: {}", Stop::Killed { processes: 2 }));
    }

    #[test]
    fn result_shape() {
        let o = SshOutcome {
            host: "web1".into(),
            exit_status: None,
            exit_signal: Some("TERM".into()),
            stdout: b"caf\xc3".to_vec(),
            stderr: b"\xff".to_vec(),
            truncated: true,
            ..SshOutcome::default()
        };
        let v = o.to_json();
        assert_eq!((v["stdout"].as_str(), v["stderr"].as_str()), (Some("caf"), Some("\u{fffd}")));
        assert_eq!((v["exit_status"].clone(), v["exit_signal"].clone()), (Value::Null, json!("TERM")));
        let plain = SshOutcome { exit_status: Some(3), ..SshOutcome::default() }.to_json();
        assert!(plain.get("exit_signal").is_none());
        assert_eq!(plain["exit_status"], 3);
    }
}
