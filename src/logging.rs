//! The stderr logger (points 3 and 4): one record is one line, with no secret
//! and no control character in it, whatever the verbosity and whoever supplied the text.
//!
//! Log lines carry server- and agent-supplied text (URL paths, redirect targets, error
//! messages). So every record, the whole formatted message and not only its arguments:
//! 1. is scrubbed against every secret of at least [`crate::gate::vault::MIN_SECRET_BYTES`]
//!    read in this process so far ([`crate::gate::vault::scrub_log_line`]: each `Vault`
//!    registers what it reads there), with the same redactor as answers. Only those:
//!    the whole line is searched, sp's own words included, and a secret shorter than
//!    that (one an operator let in with `min_secret_bytes`) would rewrite them, so the
//!    line could no longer be read. Outside text that reaches a log line (an error
//!    quoting a peer, a refused redirect's target) is scrubbed against every secret,
//!    short ones included, where it is logged (`server.rs` logs the message it made
//!    with `Vault::scrub_text`, the one the answer carries);
//! 2. has its control characters (C0, DEL, C1), line and paragraph separators, bidi and
//!    zero-width characters escaped (the one class of [`crate::escape`]), so a path
//!    holding `%0a%1b[2K` cannot forge a line or repaint the terminal.
//!
//! Only records from this crate are written: dependencies' debug output can carry URLs
//! with query strings and header values, which may hold secrets.

use std::io::Write;

use log::{Level, LevelFilter, Log, Metadata, Record};

// The class and its escape live in `escape.rs`, shared with `sp audit` and the approver.
use crate::escape::escape;
#[cfg(test)]
use crate::escape::is_unsafe;

/// The text of one log line (without the trailing newline): scrubbed, then escaped.
pub(crate) fn line(level: Level, message: &str) -> String {
    let text = crate::gate::vault::scrub_log_line(message);
    format!("{level} {}", escape(text.as_str()))
}

struct StderrLogger {
    level: LevelFilter,
    /// This crate's module prefix: records from other crates are dropped.
    crate_name: &'static str,
}

impl Log for StderrLogger {
    fn enabled(&self, metadata: &Metadata<'_>) -> bool {
        metadata.level() <= self.level && metadata.target().split("::").next() == Some(self.crate_name)
    }

    fn log(&self, record: &Record<'_>) {
        if !self.enabled(record.metadata()) {
            return;
        }
        let mut text = line(record.level(), &record.args().to_string());
        text.push('\n');
        // One write per record, so concurrent records do not interleave mid-line.
        let _ = std::io::stderr().lock().write_all(text.as_bytes());
    }

    fn flush(&self) {
        let _ = std::io::stderr().flush();
    }
}

/// Installs the logger: `verbosity` 0 = errors, 1 = warnings, 2 = info, 3 = debug,
/// 4+ = trace; `quiet` = nothing. A second call does nothing.
pub(crate) fn init(verbosity: usize, quiet: bool) {
    let level = match (quiet, verbosity) {
        (true, _) => LevelFilter::Off,
        (_, 0) => LevelFilter::Error,
        (_, 1) => LevelFilter::Warn,
        (_, 2) => LevelFilter::Info,
        (_, 3) => LevelFilter::Debug,
        _ => LevelFilter::Trace,
    };
    let crate_name = module_path!().split("::").next().unwrap_or("sallyport");
    if log::set_logger(Box::leak(Box::new(StderrLogger { level, crate_name }))).is_ok() {
        log::set_max_level(level);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escape_leaves_no_control_bidi_or_line_separator() {
        let forged = "GET /a\n\u{1b}[2KINFO forged\r\u{85}\u{2028}\u{2029}\u{202e}\u{2066}\u{2069}\u{7f}\u{9b}x";
        let out = escape(forged);
        assert!(!out.chars().any(is_unsafe), "{out:?}");
        assert!(out.contains("\\n") && out.contains("\\u{1b}") && out.contains("\\u{202e}"), "{out:?}");
        assert_eq!(escape("plain/päth"), "plain/päth");
    }

    #[test]
    fn a_log_line_is_one_line() {
        let l = line(Level::Info, "executing GET /x\nWARN forged\u{202e}");
        assert!(!l.contains('\n') && !l.contains('\u{202e}'), "{l:?}");
        assert!(l.starts_with("INFO executing GET /x\\nWARN forged"), "{l:?}");
    }
}
