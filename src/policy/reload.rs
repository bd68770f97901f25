//! `"reload"` (`sp-policy(5)`, RELOAD; issue 35 section 3): what makes `sp mcp` read its
//! policy file again without restarting the session.
//!
//! ```text
//! "reload": "signal"   SIGHUP only (the default)
//! "reload": "watch"    SIGHUP, and a change of the file (its inode, size or times,
//!                      looked at once a second; the bytes decide whether it changed)
//! ```
//!
//! What a reload does is `server/reload.rs`; only the plain value here.

use serde_json::Value;

use super::fields::{err, Check};

/// When `sp mcp` reads its policy file again.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Reload {
    /// On SIGHUP only.
    #[default]
    Signal,
    /// On SIGHUP, and when the file changes.
    Watch,
}

pub(crate) fn parse(value: Option<&Value>) -> Check<Reload> {
    match value.map(|v| v.as_str()) {
        None => Ok(Reload::Signal),
        Some(Some("signal")) => Ok(Reload::Signal),
        Some(Some("watch")) => Ok(Reload::Watch),
        Some(_) => err("reload", "must be \"signal\" (reload on SIGHUP, the default) or \"watch\" (on SIGHUP and when the file changes)"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn reload_is_signal_or_watch_and_nothing_else() {
        assert_eq!(parse(None), Ok(Reload::Signal));
        assert_eq!(parse(Some(&json!("signal"))), Ok(Reload::Signal));
        assert_eq!(parse(Some(&json!("watch"))), Ok(Reload::Watch));
        for bad in [json!("Watch"), json!(true), json!(1), json!({"watch": true})] {
            let (field, message) = parse(Some(&bad)).expect_err("refused");
            assert_eq!(field, "reload", "{bad}");
            assert!(message.starts_with("must be \"signal\""), "{bad}: {message}");
        }
    }
}
