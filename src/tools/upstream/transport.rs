//! The seam between the client state machine (`client.rs`) and how bytes reach an
//! upstream: [`Transport`]. The stdio transport (`stdio.rs`) implements it today; the
//! Streamable HTTP transport plugs in behind the same trait (a POST per message, answers
//! as JSON or an SSE stream queued for [`Transport::recv`]).
//!
//! A transport delivers whole JSON values, already through the frame and JSON stages
//! (one line, one value, no duplicate key, depth and memory caps); the JSON-RPC shape is
//! the client's business (`wire.rs`), the same for every transport.

use std::fmt;
use std::time::Instant;

use serde_json::Value;

use crate::gate::exec::Cancel;
use crate::mcp::frame::FrameError;
use crate::json::JsonError;
use crate::net::dest::DestError;

/// What [`Transport::recv`] got.
#[derive(Debug, PartialEq)]
pub(crate) enum Recv {
    Message(Value),
    /// The deadline passed first.
    TimedOut,
    /// The call's cancel fired first.
    Cancelled,
}

/// The transport is broken: the upstream is ended, its pending call fails.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum TransportError {
    /// The upstream closed its output (it exited, or closed stdout); the exit status
    /// when known.
    Closed {
        status: Option<String>,
    },
    /// A line that is not a frame (too long, not UTF-8, NUL, stray CR, cut by EOF).
    Frame(FrameError),
    /// A frame that is not one JSON value within the caps.
    Json(JsonError),
    /// A message could not be written whole before the deadline or the cancel (the
    /// upstream does not read): framing is lost.
    Stalled,
    Io(String),
    /// An HTTP exchange failed or was refused (the message says how).
    Http(String),
    /// No OAuth access token could be had, or the upstream refused a fresh one
    /// (`oauth/`): its message ends with the `sp oauth login` hint when a login is due.
    Auth(String),
}

impl fmt::Display for TransportError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TransportError::Closed { status: Some(s) } => write!(f, "it exited ({s})"),
            TransportError::Closed { status: None } => f.write_str("it closed its output"),
            TransportError::Frame(e) => write!(f, "it wrote a bad line: {e}"),
            TransportError::Json(e) => write!(f, "it wrote a bad message: {e}"),
            TransportError::Stalled => f.write_str("it stopped reading its input"),
            TransportError::Io(e) => write!(f, "talking to it failed: {e}"),
            TransportError::Http(e) | TransportError::Auth(e) => f.write_str(e),
        }
    }
}

impl std::error::Error for TransportError {}

/// Why an upstream could not be started: its process, or its HTTP destination.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum StartError {
    /// The program could not be executed: its name (cut short) and the reason.
    Spawn { program: String, why: String },
    /// Its stdin, stdout or stderr could not be set up (the reason, when known).
    Pipes { why: Option<String> },
    /// The URL's destination is refused, or could not be resolved.
    Destination(DestError),
    /// A credential over plain http to an address that is not loopback.
    PlainHttp,
}

impl fmt::Display for StartError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            StartError::Spawn { program, why } => write!(f, "cannot start {program}: {why}"),
            StartError::Pipes { why: None } => f.write_str("its pipes could not be set up"),
            StartError::Pipes { why: Some(why) } => write!(f, "its pipes could not be set up: {why}"),
            StartError::Destination(e) => write!(f, "{e}"),
            StartError::PlainHttp => f.write_str("a credential is sent over https only (plain http only to a loopback address)"),
        }
    }
}

impl std::error::Error for StartError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            StartError::Destination(e) => Some(e),
            _ => None,
        }
    }
}

pub(crate) trait Transport {
    /// Writes one message whole, or fails with [`TransportError::Stalled`] once
    /// `deadline` passes or `cancel` fires in the middle of it.
    fn send(&mut self, message: &Value, deadline: Instant, cancel: &Cancel) -> Result<(), TransportError>;

    /// The next message, waiting until `deadline` or `cancel`.
    fn recv(&mut self, deadline: Instant, cancel: &Cancel) -> Result<Recv, TransportError>;

    /// Ends the upstream for good (idempotent): the stdio transport signals its process
    /// group, TERM then KILL after a grace period, and reaps it.
    fn close(&mut self);

    /// The handshake settled on this protocol revision (Streamable HTTP sends it in a
    /// header on every later request).
    fn negotiated(&mut self, version: &'static str) {
        let _ = version;
    }

    /// The process group of a stdio upstream; `None` for other transports.
    fn process_group(&self) -> Option<i32> {
        None
    }
}

impl<T: Transport + ?Sized> Transport for Box<T> {
    fn send(&mut self, message: &Value, deadline: Instant, cancel: &Cancel) -> Result<(), TransportError> {
        (**self).send(message, deadline, cancel)
    }
    fn recv(&mut self, deadline: Instant, cancel: &Cancel) -> Result<Recv, TransportError> {
        (**self).recv(deadline, cancel)
    }
    fn close(&mut self) {
        (**self).close();
    }
    fn negotiated(&mut self, version: &'static str) {
        (**self).negotiated(version);
    }
    fn process_group(&self) -> Option<i32> {
        (**self).process_group()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The texts an upstream's start failure shows (`UpstreamError::Start`), one per reason.
    #[test]
    fn start_errors_name_the_reason() {
        let cases = [
            (StartError::Spawn { program: "/no/such".into(), why: "no such file".into() }, "cannot start /no/such: no such file"),
            (StartError::Pipes { why: None }, "its pipes could not be set up"),
            (StartError::Pipes { why: Some("permission denied".into()) }, "its pipes could not be set up: permission denied"),
            (StartError::Destination(DestError::NotFound("a.test:80: host not found".into())), "a.test:80: host not found"),
            (StartError::PlainHttp, "a credential is sent over https only (plain http only to a loopback address)"),
        ];
        for (e, want) in cases {
            assert_eq!(e.to_string(), want);
        }
        let e = StartError::Destination(DestError::Timeout("t".into()));
        assert_eq!(std::error::Error::source(&e).map(ToString::to_string), Some("t".into()));
    }
}
