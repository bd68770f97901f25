//! Text from outside (an upstream's error and progress messages, the member names and
//! ids it chose, its stderr, a server's header token, a remote's words, an approver's
//! output), shortened only after it is scrubbed (issue 31, section 3).
//!
//! A cut made before the redactor runs can split a secret, and a piece shorter than the
//! redactor's minimum run (`max(12, ceil(n / 2))` bytes, `gate/redact`) is not
//! recognisable: it then reached the agent, the journal and the log. So outside text is
//! held whole ([`Outside`]) until it is shown, and the only ways to shorten it scrub the
//! whole first: [`Outside::cut`] and [`cut`] (against every secret read in this process,
//! `vault::scrub_outside_then_cut`), `Vault::scrub_then_cut` (a session's Vault), and, for
//! a stream read line by line, [`for_each_line`] with `vault::scrub_line_then_cut`, which
//! keeps a window long enough to hold any spelling that begins before the cut.
//! `sys::short` and `sys::cut` are for sp's own words and the agent's.

use std::fmt;
use std::io::Read;

use crate::gate::scrubbed::Scrubbed;
use crate::gate::vault;

/// Outside text, whole. No accessor gives it back unscrubbed.
#[derive(Clone, PartialEq, Eq)]
pub(crate) struct Outside(String);

impl Outside {
    pub(crate) fn new(text: impl Into<String>) -> Outside {
        Outside(text.into())
    }

    /// Scrubbed whole against every secret read in this process, then cut to `max_chars`
    /// characters (`…` marks a cut).
    pub(crate) fn cut(&self, max_chars: usize) -> Scrubbed<String> {
        cut(&self.0, max_chars)
    }
}

impl From<&str> for Outside {
    fn from(text: &str) -> Outside {
        Outside::new(text)
    }
}

impl From<String> for Outside {
    fn from(text: String) -> Outside {
        Outside(text)
    }
}

/// Scrubbed (every secret of the process), so a test's failure message leaks nothing.
impl fmt::Debug for Outside {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Outside({:?})", cut(&self.0, usize::MAX).as_str())
    }
}

/// `text` (outside text) scrubbed whole against every secret read in this process, then
/// cut to `max_chars` characters (`…` marks a cut).
pub(crate) fn cut(text: &str, max_chars: usize) -> Scrubbed<String> {
    vault::scrub_outside_then_cut(text, max_chars)
}

/// One line of an outside stream, as [`for_each_line`] hands it over.
pub(crate) struct Line<'a> {
    /// The line's first [`vault::outside_window`] bytes (no `\n`): raw, for a caller that
    /// parses it; shown only through [`Line::shown`].
    pub window: &'a [u8],
    /// The line went on past the window.
    pub window_cut: bool,
    /// Its whole length in bytes, `\n` included when there was one.
    pub len: u64,
}

impl Line<'_> {
    /// The line's first `keep` bytes, scrubbed as if the line were whole (whether
    /// something was cut): `vault::scrub_line_then_cut`.
    pub(crate) fn shown(&self, keep: usize) -> (Scrubbed<String>, bool) {
        vault::scrub_line_then_cut(self.window, keep, self.window_cut)
    }
}

/// Reads `reader` to its end (or an error) line by line (`\n`), keeping of each line the
/// first [`vault::outside_window`]`(keep)` bytes (the rest is read and dropped), and calls
/// `f` with each (a last line without `\n` too). Memory: one window, whatever the lines.
pub(crate) fn for_each_line(mut reader: impl Read, keep: usize, mut f: impl FnMut(Line<'_>)) {
    let mut buf = [0u8; 4096];
    let mut window: Vec<u8> = Vec::new();
    let (mut window_cut, mut len) = (false, 0u64);
    let mut limit = vault::outside_window(keep);
    loop {
        let n = match reader.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => n,
        };
        for &b in &buf[..n] {
            len += 1;
            if b == b'\n' {
                f(Line { window: &window, window_cut, len });
                window.clear();
                (window_cut, len) = (false, 0);
                // Secrets read meanwhile widen the next line's window.
                limit = vault::outside_window(keep);
            } else if window.len() < limit {
                window.push(b);
            } else {
                window_cut = true;
            }
        }
    }
    if len > 0 {
        f(Line { window: &window, window_cut, len });
    }
}

#[cfg(test)]
pub(crate) mod split;
