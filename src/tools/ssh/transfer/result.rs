//! What `ssh_get` and `ssh_put` return: the outcome of a transfer that happened, or
//! why none did, and the tool results they become.

use base64::Engine as _;
use serde_json::{json, Value};

use crate::gate::outcome::ToolCode;
use crate::tools::ssh::result::SshError;

/// A file that moved.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TransferOutcome {
    pub host: String,
    /// The path the server resolved (symlinks followed), which matched a rule.
    pub path: String,
    /// Bytes that moved (the file as read, or as written).
    pub bytes: u64,
    /// SHA-256 (hex) of the bytes that moved, before any redaction.
    pub sha256: String,
    /// A get's content (scrub before [`TransferOutcome::get_json`]).
    pub content: Vec<u8>,
    /// A put's permission bits.
    pub mode: u32,
    /// A put replaced an existing file.
    pub replaced: bool,
    pub duration_ms: u64,
    pub host_key_fingerprint: String,
}

/// How a get's content is carried: text when it is UTF-8, base64 otherwise.
pub(crate) fn encode(content: &[u8]) -> (&'static str, String) {
    match std::str::from_utf8(content) {
        Ok(t) => ("utf-8", t.to_owned()),
        Err(_) => ("base64", base64::engine::general_purpose::STANDARD.encode(content)),
    }
}

impl TransferOutcome {
    /// `ssh_get`'s fields, `content` already scrubbed and encoded.
    pub(crate) fn get_json(&self, encoding: &str, content: String) -> Value {
        crate::mcp::model::object([
            ("host", self.host.clone().into()),
            ("path", self.path.clone().into()),
            ("bytes", self.bytes.into()),
            ("sha256", self.sha256.clone().into()),
            ("encoding", encoding.into()),
            ("content", content.into()),
            ("duration_ms", self.duration_ms.into()),
            ("host_key_fingerprint", self.host_key_fingerprint.clone().into()),
        ])
    }

    pub(crate) fn put_json(&self) -> Value {
        json!({
            "host": self.host,
            "path": self.path,
            "bytes": self.bytes,
            "sha256": self.sha256,
            "mode": format!("{:04o}", self.mode),
            "replaced": self.replaced,
            "duration_ms": self.duration_ms,
            "host_key_fingerprint": self.host_key_fingerprint,
        })
    }
}

fn schema(extra: Value, required: &[&str]) -> Value {
    let n = json!({"type": "integer", "minimum": 0});
    let mut props = json!({
        "host": {"type": "string", "description": "The inventory host name"},
        "path": {"type": "string", "description": "The path the server resolved (symlinks followed)"},
        "bytes": n,
        "sha256": {"type": "string", "description": "SHA-256 (hex) of the bytes that moved, before redaction"},
        "duration_ms": n,
        "host_key_fingerprint": {"type": "string"}
    });
    if let (Some(p), Value::Object(e)) = (props.as_object_mut(), extra) {
        p.extend(e);
    }
    let Value::Object(props) = props else { unreachable!("an object literal") };
    let mut all = vec!["host", "path", "bytes", "sha256", "duration_ms", "host_key_fingerprint"];
    all.extend_from_slice(required);
    crate::gate::outcome::result_schema(props, &all)
}

pub(crate) fn get_schema() -> Value {
    schema(
        json!({
            "encoding": {"type": "string", "enum": ["utf-8", "base64"]},
            "content": {"type": "string", "description": "The file: text, or base64 when it is not UTF-8; secrets redacted"}
        }),
        &["encoding", "content"],
    )
}

pub(crate) fn put_schema() -> Value {
    schema(
        json!({
            "mode": {"type": "string", "description": "The file's permission bits (octal)"},
            "replaced": {"type": "boolean", "description": "An existing file was replaced"}
        }),
        &["mode", "replaced"],
    )
}

/// Why an authorized transfer moved nothing. Messages name the host and the paths,
/// never a secret.
#[derive(Debug, PartialEq, Eq)]
pub enum TransferError {
    /// Connecting (host key, authentication, the network): as for `ssh_exec`.
    Ssh(SshError),
    /// The server resolved the path to one no rule allows (a symlink out), or the file is
    /// not a regular file: a refusal known only once the server answered.
    Refused(String),
    /// The file is above `files.max_bytes`, or its content above the response limit.
    TooLarge(String),
    /// The file exists and `overwrite` was not given.
    Exists(String),
    /// The SFTP subsystem or an operation on it failed.
    Sftp(String),
    Cancelled,
}

impl TransferError {
    pub(crate) fn code(&self) -> ToolCode {
        match self {
            TransferError::Ssh(e) => e.code(),
            TransferError::Refused(_) | TransferError::TooLarge(_) => ToolCode::Denied,
            TransferError::Exists(_) | TransferError::Sftp(_) => ToolCode::Upstream,
            TransferError::Cancelled => ToolCode::Cancelled,
        }
    }
}

impl std::fmt::Display for TransferError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            TransferError::Ssh(e) => e.fmt(f),
            TransferError::Refused(m) | TransferError::TooLarge(m) | TransferError::Exists(m) | TransferError::Sftp(m) => f.write_str(m),
            TransferError::Cancelled => f.write_str("cancelled by the client; a partly written temporary file is removed when the connection allows"),
        }
    }
}

impl std::error::Error for TransferError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            TransferError::Ssh(e) => Some(e),
            _ => None,
        }
    }
}
