//! Why an upstream listing or call failed ([`UpstreamError`]), and how a client
//! error becomes one.

use std::fmt;
use std::time::Duration;

use serde_json::Value;

use super::client::ClientError;
use super::{transport, wire};
use crate::gate::vault::Vault;

/// Why an upstream listing or call failed. Messages name the upstream and the reason;
/// text from the upstream (its error messages) is cut short and scrubbed of every
/// secret the session has read.
/// Codes (later, in the tool table): `Timeout` is SP_TIMEOUT, `Cancelled` the
/// cancelled code, the rest SP_UPSTREAM.
#[derive(Debug, PartialEq)]
pub enum UpstreamError {
    /// No upstream of that name in the policy.
    Unknown {
        upstream: String,
    },
    /// What the upstream needs is not available yet.
    Unsupported {
        upstream: String,
        what: &'static str,
    },
    /// Its `env` credential could not be read.
    Credential {
        upstream: String,
        why: String,
    },
    /// The process could not be started.
    Start {
        upstream: String,
        why: String,
    },
    /// It died, broke the protocol, or failed its handshake; it is ended.
    Broken {
        upstream: String,
        why: String,
    },
    /// It answered the request with a JSON-RPC error.
    Refused {
        upstream: String,
        why: String,
    },
    /// Its answer is not of the shape MCP defines (it stays running).
    BadAnswer {
        upstream: String,
        why: String,
    },
    /// Its tool names cannot be exposed (`names.rs`).
    Names {
        upstream: String,
        why: String,
    },
    /// Its listing is over [`MAX_PAGES`](super::MAX_PAGES), [`MAX_TOOLS`](super::MAX_TOOLS) or [`MAX_LISTING_BYTES`](super::MAX_LISTING_BYTES), or
    /// repeats a cursor.
    Listing {
        upstream: String,
        why: String,
    },
    Timeout {
        upstream: String,
        after: Duration,
        hung: bool,
    },
    Cancelled {
        upstream: String,
    },
    /// It died `deaths` times in a row: not started again for `wait` (`backoff.rs`).
    CrashLoop {
        upstream: String,
        deaths: u32,
        wait: Duration,
    },
    /// No OAuth token could be had for it, or it refused a fresh one (`oauth/`): the
    /// message carries the `sp oauth login` hint when a login is due. SP_AUTH.
    Auth {
        upstream: String,
        why: String,
    },
}

impl fmt::Display for UpstreamError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            UpstreamError::Unknown { upstream } => write!(f, "no upstream {upstream:?} in the policy"),
            UpstreamError::Unsupported { upstream, what } => write!(f, "upstream {upstream}: {what} not supported yet"),
            UpstreamError::Credential { upstream, why } => write!(f, "upstream {upstream}: {why}"),
            UpstreamError::Start { upstream, why } => write!(f, "upstream {upstream}: {why}"),
            UpstreamError::Broken { upstream, why } => write!(f, "upstream {upstream} failed: {why}"),
            UpstreamError::Refused { upstream, why } => write!(f, "upstream {upstream} refused: {why}"),
            UpstreamError::BadAnswer { upstream, why } => write!(f, "upstream {upstream} gave a malformed answer: {why}"),
            UpstreamError::Names { upstream, why } => write!(f, "upstream {upstream}: its tools cannot be exposed: {why}"),
            UpstreamError::Listing { upstream, why } => write!(f, "upstream {upstream}: its tool listing is refused: {why}"),
            UpstreamError::Timeout { upstream, after, hung } => {
                write!(f, "upstream {upstream} did not answer within {} s", after.as_secs())?;
                if *hung {
                    f.write_str(", nor a ping after: it was ended")?;
                }
                Ok(())
            }
            UpstreamError::Cancelled { upstream } => write!(f, "upstream {upstream}: the call was cancelled"),
            UpstreamError::Auth { upstream, why } => write!(f, "upstream {upstream}: {why}"),
            UpstreamError::CrashLoop { upstream, deaths, wait } => {
                let secs = wait.as_secs() + u64::from(wait.subsec_nanos() > 0);
                write!(f, "upstream {upstream} died {deaths} times in a row: not started again for {secs} s (back-off)")
            }
        }
    }
}

impl std::error::Error for UpstreamError {}

impl UpstreamError {
    /// The same error with every secret this session has read scrubbed from the text
    /// the upstream supplied (its error messages, member and tool names it chose).
    pub(super) fn scrubbed(mut self, vault: &Vault) -> UpstreamError {
        match &mut self {
            UpstreamError::Credential { why, .. }
            | UpstreamError::Start { why, .. }
            | UpstreamError::Broken { why, .. }
            | UpstreamError::Refused { why, .. }
            | UpstreamError::BadAnswer { why, .. }
            | UpstreamError::Names { why, .. }
            | UpstreamError::Auth { why, .. }
            | UpstreamError::Listing { why, .. } => {
                let mut v = Value::String(std::mem::take(why));
                vault.scrub(&mut v);
                if let Value::String(s) = v {
                    *why = s;
                }
            }
            _ => {}
        }
        self
    }
}

pub(super) fn client_error(upstream: &str, e: ClientError, after: Duration) -> UpstreamError {
    let upstream = upstream.to_owned();
    match e {
        ClientError::TimedOut { hung } => UpstreamError::Timeout { upstream, after, hung },
        ClientError::Cancelled => UpstreamError::Cancelled { upstream },
        ClientError::Rpc(r) => UpstreamError::Refused { upstream, why: format!("error {}: {}", r.code, r.message.cut(wire::MAX_MESSAGE_CHARS)) },
        ClientError::Transport(transport::TransportError::Auth(why)) => UpstreamError::Auth { upstream, why },
        e => UpstreamError::Broken { upstream, why: e.to_string() },
    }
}
