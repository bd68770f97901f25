//! `sp approve list|revoke` (sp(1), APPROVAL GRANTS): show and end the approval grants
//! `sp mcp` keeps (`grants.rs`).
//!
//! ```text
//! sp approve list [--json]     the live grants; exit 1 when the file is refused or corrupt
//! sp approve revoke ID         end one; exit 1 when no live grant has that id
//! sp approve revoke --all      end all; the one command that replaces a corrupt file
//! ```
//!
//! The grants file is found as `sp mcp` finds it: the policy (`--config`, else the
//! lookup) may name `approval.grants.path`; otherwise the default beside the journal.
//! No policy found is fine here (the default file); a policy that does not load is an
//! error, since it may name another file. The list never shows an argument value: the
//! target is the journal's (method and URL without the query, or host and command), with
//! control characters escaped, as `sp audit` prints targets. Usage errors exit 2 (a
//! malformed id among them), failures 1.

use std::io::Write;

use serde_json::json;

use super::args::{ApproveArgs, ApproveSub, APPROVE_USAGE};
use super::audit::{json_safe, safe, Failed};
use super::Env;
use crate::approve::grants::{self, Grant, Grants};
use crate::mcp::out::StdoutHandle;
use crate::policy::{lookup, Lookup, Policy};

/// `sp approve ...` with the policy named by `-c` (before or after `approve`), if any.
pub(crate) fn run(stdout: StdoutHandle, args: &ApproveArgs, config: Option<std::path::PathBuf>, env: &Env) -> Result<(), Failed> {
    let mut out = stdout.into_text();
    if args.sub == ApproveSub::Help {
        return out.write_all(APPROVE_USAGE.as_bytes()).map_err(|_| Failed);
    }
    let fail = |message: String| {
        eprintln!("sp: {message}");
        Failed
    };
    let policy = match lookup(config, |k| env.get(k), |p| p.exists()) {
        Lookup::Explicit(p) | Lookup::Found(p) => Some(Policy::load(&p).map_err(|e| fail(e.to_string()))?),
        Lookup::None(_) => None,
    };
    let limits = policy.as_ref().map(|p| p.approval.grants.clone()).unwrap_or_default();
    let path = grants::location(&limits, |k| env.get(k)).map_err(|e| fail(e.to_string()))?;
    let store = Grants::open(&path, &limits).map_err(|e| fail(e.to_string()))?;
    let now = grants::now();
    let text = match &args.sub {
        ApproveSub::List { json } => {
            let current = policy.as_ref().and_then(|p| p.hash());
            let list = store.list(now).map_err(|e| fail(e.to_string()))?;
            render_list(&list, now, current, *json)
        }
        ApproveSub::Revoke { id } => {
            let g = store.revoke(id, now).map_err(|e| fail(e.to_string()))?;
            format!("revoked {} ({} grant, {} {})\n", g.id, g.scope.as_str(), safe(&g.subject), safe(&g.target))
        }
        ApproveSub::RevokeAll => {
            let r = store.revoke_all(now).map_err(|e| fail(e.to_string()))?;
            match r.replaced_corrupt {
                Some(why) => format!("replaced the corrupt grants file {} ({}): no grants\n", path.display(), safe(&why.to_string())),
                None => format!("revoked {} grant(s)\n", r.count),
            }
        }
        ApproveSub::Help => unreachable!("handled above"),
    };
    out.write_all(text.as_bytes()).map_err(|_| Failed)
}

/// `12m 5s`, `1h 0m`, `45s`.
fn left(secs: u64) -> String {
    match secs {
        s if s >= 3600 => format!("{}h {}m", s / 3600, s % 3600 / 60),
        s if s >= 60 => format!("{}m {}s", s / 60, s % 60),
        s => format!("{s}s"),
    }
}

/// Whether a grant is bound to the policy in force: `current`, `changed` (it no longer
/// applies), or `-` when no policy was found.
fn policy_state(g: &Grant, current: Option<&str>) -> &'static str {
    match current {
        Some(h) if h == g.policy => "current",
        Some(_) => "changed",
        None => "-",
    }
}

fn render_list(list: &[Grant], now: u64, current: Option<&str>, as_json: bool) -> String {
    let mut text = String::new();
    if as_json {
        for g in list {
            let mut v = json!({
                "id": g.id, "scope": g.scope.as_str(), "tool": g.tool, "subject": g.subject, "target": g.target,
                "channel": g.channel.as_str(), "created": g.created, "expires": g.expires,
                "expires_in_s": g.expires.saturating_sub(now), "ttl_s": g.ttl_s, "policy": policy_state(g, current),
            });
            if let Some(r) = g.requested_ttl_s {
                v["requested_ttl_s"] = json!(r);
            }
            text += &json_safe(&v.to_string());
            text.push('\n');
        }
        return text;
    }
    if list.is_empty() {
        return "no grants\n".into();
    }
    text += &format!("{:<16}  {:<7}  {:<10}  {:<11}  {:<7}  {:<16}  {}\n", "ID", "SCOPE", "EXPIRES IN", "CHANNEL", "POLICY", "SUBJECT", "TOOL / TARGET");
    for g in list {
        let what = match g.scope {
            grants::Scope::Exact => format!("{} {}", g.tool, g.target),
            grants::Scope::Session => format!("every call (opened by {} {})", g.tool, g.target),
        };
        let cut = g.requested_ttl_s.map_or(String::new(), |r| format!(" [asked {r}s, cut to {}s]", g.ttl_s));
        text += &format!(
            "{:<16}  {:<7}  {:<10}  {:<11}  {:<7}  {:<16}  {}{cut}\n",
            g.id,
            g.scope.as_str(),
            left(g.expires.saturating_sub(now)),
            g.channel.as_str(),
            policy_state(g, current),
            safe(&g.subject),
            safe(&what)
        );
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::approve::grants::{Channel, Scope};

    fn grant(scope: Scope, target: &str) -> Grant {
        Grant {
            id: "0123456789abcdef".into(),
            scope,
            policy: "a".repeat(64),
            created: 100,
            expires: 100 + 900,
            ttl_s: 900,
            requested_ttl_s: Some(7200),
            action: None,
            tool: "http_request".into(),
            target: target.into(),
            subject: "sidecar".into(),
            channel: Channel::Command,
            uid: 0,
        }
    }

    #[test]
    fn the_list_escapes_targets_and_says_what_is_stale() {
        let g = grant(Scope::Exact, "GET http://h/\u{1b}[2J\u{202e}x");
        let text = render_list(std::slice::from_ref(&g), 175, Some(&"a".repeat(64)), false);
        assert_eq!(
            text,
            "ID                SCOPE    EXPIRES IN  CHANNEL      POLICY   SUBJECT           TOOL / TARGET\n\
             0123456789abcdef  exact    13m 45s     command      current  sidecar           http_request GET http://h/\\u{1b}[2J\\u{202e}x [asked 7200s, cut to 900s]\n"
        );
        let s = grant(Scope::Session, "GET http://h/x");
        let text = render_list(&[s], 100, Some(&"b".repeat(64)), false);
        assert!(text.ends_with("0123456789abcdef  session  15m 0s      command      changed  sidecar           every call (opened by http_request GET http://h/x) [asked 7200s, cut to 900s]\n"), "{text}");
        assert_eq!(render_list(&[], 0, None, false), "no grants\n");
        assert_eq!(render_list(&[], 0, None, true), "");
        let line = render_list(&[g], 175, None, true);
        let v: serde_json::Value = serde_json::from_str(&line).unwrap();
        assert_eq!(v["expires_in_s"], json!(825));
        assert_eq!(v["policy"], json!("-"));
        assert!(!line.contains('\u{202e}'), "{line}");
        assert_eq!((left(3600), left(59), left(61)), ("1h 0m".into(), "59s".into(), "1m 1s".into()));
    }
}
