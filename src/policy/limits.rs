//! The `limits` section (`sp-policy(5)`, LIMITS; issue 35): rate limits and quotas over
//! every session of the user together.
//!
//! ```text
//! "limits": [{"tool": "ssh_exec", "target": "db1", "max": 3, "per_s": 60},
//!            {"credential": "github", "max": 500, "per_s": 3600},
//!            {"upstream": "github", "tool": "create_*", "max": 20, "per_s": 3600},
//!            {"max": 60, "per_s": 60}]
//! "limits_state": "/var/lib/sallyport/limits.json"      (optional; the default is
//!                                                         limits.json beside the journal)
//! ```
//!
//! A rule's selectors (`tool`, `target`, `credential`, `upstream`) are all optional; a
//! rule applies to a call that every selector it has matches ([`LimitRule::matches`]),
//! and one with none applies to every call. A call is refused when any rule that applies
//! has counted `max` calls in its window; the counting itself (the window, the shared
//! state file) is `gate/limits.rs`. Only plain data and matching here: the policy stays
//! a leaf.

use std::path::PathBuf;

use serde_json::Value;

use super::fields::{abs_path, err, int, object, string, Check};
use super::upstreams::Glob;

/// At most this many rules: a policy, not a data file (and a bounded state file).
pub(crate) const MAX_RULES: usize = 256;
/// The largest `max`.
pub(crate) const MAX_MAX: u64 = 1_000_000;
/// The longest window: a week.
pub(crate) const MAX_PER_S: u64 = 7 * 86_400;

/// One rule of `limits`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LimitRule {
    /// Its place in the list (`limits[N]`), for messages.
    pub index: usize,
    /// The name of the tool: the name the agent calls, or with `upstream` the upstream's
    /// own name of its tool.
    pub tool: Option<Glob>,
    /// The call's target: an `ssh_exec` host's name, an HTTP request's host (with
    /// `:port` when the URL has one).
    pub target: Option<Glob>,
    /// A credential the call uses (injected into an HTTP request, or given to the
    /// upstream whose tool it calls).
    pub credential: Option<String>,
    /// Only tools of this upstream.
    pub upstream: Option<String>,
    pub max: u64,
    pub per_s: u64,
    /// The rule as canonical JSON text: the key of its count in the state file (an
    /// edited rule starts a fresh count; moving it in the list does not), and what
    /// `sp explain` shows.
    pub text: String,
}

/// What a limit rule is matched against: facts of an authorized call (never a secret).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Subject {
    /// The name the agent called.
    pub tool: String,
    /// For an upstream's tool: the upstream and the upstream's own name of the tool.
    pub upstream: Option<(String, String)>,
    /// The host name (`ssh_exec`) or HTTP host (`host` or `host:port`).
    pub target: Option<String>,
    /// The credentials the call uses.
    pub credentials: Vec<String>,
}

impl LimitRule {
    /// Whether every selector of the rule matches `s`.
    pub fn matches(&self, s: &Subject) -> bool {
        self.mismatch(s).is_none()
    }

    /// The first selector that does not match `s` (`sp explain` says which), or `None`.
    pub fn mismatch(&self, s: &Subject) -> Option<&'static str> {
        if let Some(u) = &self.upstream
            && s.upstream.as_ref().is_none_or(|(name, _)| name != u)
        {
            return Some("upstream");
        }
        if let Some(t) = &self.tool {
            let name = match (&self.upstream, &s.upstream) {
                (Some(_), Some((_, own))) => own.as_str(),
                _ => s.tool.as_str(),
            };
            if !t.matches(name) {
                return Some("tool");
            }
        }
        if let Some(t) = &self.target
            && !s.target.as_deref().is_some_and(|target| t.matches(target))
        {
            return Some("target");
        }
        if let Some(c) = &self.credential
            && !s.credentials.iter().any(|used| used == c)
        {
            return Some("credential");
        }
        None
    }
}

/// `limits` and `limits_state`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LimitsPolicy {
    pub rules: Vec<LimitRule>,
    /// `limits_state`: where the counts are kept (`None`: `limits.json` beside the
    /// default journal).
    pub state: Option<PathBuf>,
}

/// Parses `limits` (an array of rules) and `limits_state`. `credentials` and
/// `upstreams` are the names the policy defines: a rule naming another is a typo.
pub(crate) fn parse(
    rules: Option<&Value>,
    state: Option<&Value>,
    credentials: &dyn Fn(&str) -> bool,
    upstreams: &dyn Fn(&str) -> bool,
) -> Check<LimitsPolicy> {
    let state = match state {
        None => None,
        Some(v) => {
            let p = abs_path(v, "limits_state")?;
            if p.as_os_str().to_string_lossy().ends_with('/') {
                return err("limits_state", "must be an absolute path to a file");
            }
            Some(p)
        }
    };
    let Some(v) = rules else {
        return Ok(LimitsPolicy { rules: Vec::new(), state });
    };
    let Value::Array(list) = v else {
        return err("limits", "must be an array of rules ({\"max\": N, \"per_s\": S, ...})");
    };
    if list.len() > MAX_RULES {
        return err("limits", format!("at most {MAX_RULES} rules"));
    }
    let mut out = Vec::with_capacity(list.len());
    for (index, r) in list.iter().enumerate() {
        let field = format!("limits[{index}]");
        let map = object(r, &field, &["tool", "target", "credential", "upstream", "max", "per_s"])?;
        let glob = |key: &str| -> Check<Option<Glob>> {
            match map.get(key) {
                None => Ok(None),
                Some(v) => {
                    let f = format!("{field}.{key}");
                    let s = string(v, &f)?;
                    Glob::new(s).map(Some).map_err(|e| (f, e.to_string()))
                }
            }
        };
        let (tool, target) = (glob("tool")?, glob("target")?);
        let credential = match map.get("credential") {
            None => None,
            Some(v) => {
                let f = format!("{field}.credential");
                let name = string(v, &f)?;
                if !credentials(name) {
                    return err(&f, format!("no credential {name:?} in credentials"));
                }
                Some(name.to_owned())
            }
        };
        let upstream = match map.get("upstream") {
            None => None,
            Some(v) => {
                let f = format!("{field}.upstream");
                let name = string(v, &f)?;
                if !upstreams(name) {
                    return err(&f, format!("no upstream {name:?} in upstreams"));
                }
                Some(name.to_owned())
            }
        };
        let max = int(map.get("max").ok_or_else(|| (format!("{field}.max"), "is required".to_owned()))?, &format!("{field}.max"), 1, MAX_MAX)?;
        let per_s = int(map.get("per_s").ok_or_else(|| (format!("{field}.per_s"), "is required".to_owned()))?, &format!("{field}.per_s"), 1, MAX_PER_S)?;
        let mut rule = LimitRule { index, tool, target, credential, upstream, max, per_s, text: String::new() };
        rule.text = canonical(&rule);
        out.push(rule);
    }
    Ok(LimitsPolicy { rules: out, state })
}

/// The rule as compact JSON with its members in one fixed order (selectors, then
/// `max` and `per_s`), whatever order the file wrote them in.
fn canonical(r: &LimitRule) -> String {
    let selectors = [
        ("tool", r.tool.as_ref().map(Glob::as_str)),
        ("target", r.target.as_ref().map(Glob::as_str)),
        ("credential", r.credential.as_deref()),
        ("upstream", r.upstream.as_deref()),
    ];
    let mut text = String::from("{");
    for (k, v) in selectors {
        if let Some(v) = v {
            text.push_str(&format!("\"{k}\":{},", Value::from(v)));
        }
    }
    text.push_str(&format!("\"max\":{},\"per_s\":{}}}", r.max, r.per_s));
    text
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn parse_v(v: Value) -> Check<LimitsPolicy> {
        parse(Some(&v), None, &|c| c == "github", &|u| u == "gh")
    }

    #[test]
    fn rules_parse_with_their_canonical_text() {
        let p = parse_v(json!([
            {"tool": "ssh_exec", "target": "db1", "max": 3, "per_s": 60},
            {"per_s": 3600, "max": 500, "credential": "github"},
            {"upstream": "gh", "tool": "create_*", "max": 20, "per_s": 3600},
            {"max": 60, "per_s": 60}
        ]))
        .unwrap();
        let texts: Vec<&str> = p.rules.iter().map(|r| r.text.as_str()).collect();
        assert_eq!(
            texts,
            [
                r#"{"tool":"ssh_exec","target":"db1","max":3,"per_s":60}"#,
                r#"{"credential":"github","max":500,"per_s":3600}"#,
                r#"{"tool":"create_*","upstream":"gh","max":20,"per_s":3600}"#,
                r#"{"max":60,"per_s":60}"#,
            ]
        );
        assert_eq!((p.rules[1].index, p.rules[1].max, p.rules[1].per_s), (1, 500, 3600));
    }

    #[test]
    fn errors_name_the_field() {
        for (v, field, why) in [
            (json!({}), "limits", "must be an array of rules ({\"max\": N, \"per_s\": S, ...})"),
            (json!([{"max": 1}]), "limits[0].per_s", "is required"),
            (json!([{"per_s": 1}]), "limits[0].max", "is required"),
            (json!([{"max": 0, "per_s": 1}]), "limits[0].max", "must be an integer from 1 to 1000000"),
            (json!([{"max": 1, "per_s": 604801}]), "limits[0].per_s", "must be an integer from 1 to 604800"),
            (
                json!([{"max": 1, "per_s": 1, "host": "x"}]),
                "limits[0].host",
                "unknown field (expected one of: tool, target, credential, upstream, max, per_s)",
            ),
            (json!([{"max": 1, "per_s": 1, "credential": "gitlab"}]), "limits[0].credential", "no credential \"gitlab\" in credentials"),
            (json!([{"max": 1, "per_s": 1, "upstream": "gl"}]), "limits[0].upstream", "no upstream \"gl\" in upstreams"),
            (json!([{"max": 1, "per_s": 1, "tool": ""}]), "limits[0].tool", "must not be empty"),
            (json!([{"max": 1, "per_s": 1, "target": "a\nb"}]), "limits[0].target", "contains a control character"),
        ] {
            let shown = v.to_string();
            let (f, w) = parse_v(v).unwrap_err();
            assert_eq!((f.as_str(), w.as_str()), (field, why), "{shown}");
        }
        let e = parse(None, Some(&json!("limits.json")), &|_| false, &|_| false).unwrap_err();
        assert_eq!(e, ("limits_state".to_owned(), "must be an absolute path".to_owned()));
        let p = parse(None, Some(&json!("/s/limits.json")), &|_| false, &|_| false).unwrap();
        assert_eq!(p.state, Some(PathBuf::from("/s/limits.json")));
    }

    #[test]
    fn selectors_match_or_name_the_one_that_does_not() {
        let p = parse_v(json!([
            {"tool": "ssh_exec", "target": "db*", "max": 3, "per_s": 60},
            {"credential": "github", "max": 5, "per_s": 60},
            {"upstream": "gh", "tool": "create_*", "max": 2, "per_s": 60},
            {"tool": "gh_*", "max": 2, "per_s": 60},
            {"max": 60, "per_s": 60}
        ]))
        .unwrap();
        let ssh = Subject { tool: "ssh_exec".into(), target: Some("db1".into()), ..Default::default() };
        let web = Subject { tool: "ssh_exec".into(), target: Some("web1".into()), ..Default::default() };
        let http = Subject { tool: "http_request".into(), target: Some("api.github.com".into()), credentials: vec!["github".into()], upstream: None };
        let up = Subject {
            tool: "gh_create_issue".into(),
            upstream: Some(("gh".into(), "create_issue".into())),
            credentials: vec!["github".into()],
            target: None,
        };
        let up_read = Subject { tool: "gh_get_issue".into(), upstream: Some(("gh".into(), "get_issue".into())), ..Default::default() };
        let m = |s: &Subject| p.rules.iter().map(|r| r.mismatch(s)).collect::<Vec<_>>();
        assert_eq!(m(&ssh), [None, Some("credential"), Some("upstream"), Some("tool"), None]);
        assert_eq!(m(&web), [Some("target"), Some("credential"), Some("upstream"), Some("tool"), None]);
        assert_eq!(m(&http), [Some("tool"), None, Some("upstream"), Some("tool"), None]);
        // With `upstream`, `tool` is the upstream's own name; without, the exposed one.
        assert_eq!(m(&up), [Some("tool"), None, None, None, None]);
        assert_eq!(m(&up_read), [Some("tool"), Some("credential"), Some("tool"), None, None]);
    }
}
