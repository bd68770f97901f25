//! libssh2's vocabulary, in one place: the session error codes `sp` tells apart (from
//! libssh2's `include/libssh2.h`, which the `ssh2` crate passes through as
//! `ErrorCode::Session(n)`), the one test for them, and its timeouts in milliseconds.
//! The connection (`connect.rs`) and the executor (`exec.rs`) both name these; neither
//! names the other's internals for them.

use std::time::Duration;

use ssh2::ErrorCode;

/// `LIBSSH2_ERROR_FILE`: a key (here: the key file's content, given from memory) could
/// not be read or decoded; a wrong or missing passphrase gives the same code.
pub(crate) const ERROR_FILE: i32 = -16;
/// `LIBSSH2_ERROR_TIMEOUT`: a blocking call ran past `Session::set_timeout`.
pub(crate) const ERROR_TIMEOUT: i32 = -9;
/// `LIBSSH2_ERROR_CHANNEL_REQUEST_DENIED`: the server answered a channel request (pty,
/// exec) with a refusal; nothing started.
pub(crate) const ERROR_CHANNEL_REQUEST_DENIED: i32 = -22;
/// `LIBSSH2_ERROR_EAGAIN`: a non-blocking call would block.
pub(crate) const ERROR_EAGAIN: i32 = -37;

/// Whether `e` is libssh2's session error `code` (one of the constants above).
pub(crate) fn is_code(e: &ssh2::Error, code: i32) -> bool {
    e.code() == ErrorCode::Session(code)
}

/// A timeout as `Session::set_timeout` takes it: milliseconds, at least 1 (0 would mean
/// no timeout at all), at most `u32::MAX`.
pub(crate) fn ms(d: Duration) -> u32 {
    d.as_millis().clamp(1, u128::from(u32::MAX)) as u32
}
