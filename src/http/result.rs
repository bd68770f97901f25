//! What an `http_request` returns: the executor's outcome and the tool result it
//! becomes. A leaf the executor seam (`exec.rs`) names in its signature.

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

