//! A call's route: the pure decision whether an exposed name may be called with these
//! arguments (`authorize`, [`authorize_resolved`] once the name is resolved: the name table, the filter, the argument pins), and the
//! [`Route`] it makes, which is all `Upstreams::call` takes.

use std::collections::BTreeMap;
use std::fmt;

use serde_json::{Map, Value};

use super::names::{self, NameTable};
use crate::policy::upstreams::Upstream;

/// Why a call to an exposed tool is refused before it reaches the upstream (SP_DENIED;
/// SP_TOOL_CHANGED for [`UpstreamDenial::ToolChanged`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum UpstreamDenial {
    /// No listed upstream exposes this name.
    UnknownTool { exposed: String },
    /// The filter does not expose it (checked again: the table is one proof, the policy
    /// the other).
    NotAllowed { exposed: String },
    /// A pinned argument is absent: the upstream's default could be anything.
    /// `allowed`: the argument's globs as the policy writes them, named in the message
    /// so the agent can retry with a value that passes (issue 32, section 1).
    ArgumentMissing { exposed: String, argument: String, allowed: Vec<String> },
    /// A pinned argument is not a string.
    ArgumentNotString { exposed: String, argument: String, allowed: Vec<String> },
    /// A pinned argument's value matches none of its globs.
    ArgumentMismatch { exposed: String, argument: String, allowed: Vec<String> },
    /// Its definition does not match its pin, or it has none (`pins.rs`): withheld until
    /// the operator runs `sp upstream approve`. `why` names both hashes.
    ToolChanged { exposed: String, upstream: String, why: super::pins::Withheld },
}

/// The allowed values of a pin, as a message shows them: at most 8 globs, each cut at
/// 64 characters, quoted, `*` and `?` as written.
fn allowed_text(allowed: &[String]) -> String {
    let short = |s: &str| format!("{:?}", crate::sys::short(s, 64, crate::sys::Ellipsis::Marked));
    let mut shown: Vec<String> = allowed.iter().take(8).map(|g| short(g)).collect();
    if allowed.len() > 8 {
        shown.push(format!("and {} more", allowed.len() - 8));
    }
    format!("allowed: {} ('*' any run of characters, '?' one)", shown.join(", "))
}

impl fmt::Display for UpstreamDenial {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let short = |s: &str| crate::sys::short(s, 64, crate::sys::Ellipsis::Marked);
        match self {
            UpstreamDenial::UnknownTool { exposed } => write!(f, "no upstream tool {:?}", short(exposed)),
            UpstreamDenial::NotAllowed { exposed } => write!(f, "the policy does not expose {exposed}"),
            UpstreamDenial::ArgumentMissing { exposed, argument, allowed } => {
                write!(f, "{exposed}: argument {:?} is pinned by the policy and must be given; {}", short(argument), allowed_text(allowed))
            }
            UpstreamDenial::ArgumentNotString { exposed, argument, allowed } => {
                write!(f, "{exposed}: argument {:?} is pinned by the policy and must be a string; {}", short(argument), allowed_text(allowed))
            }
            UpstreamDenial::ArgumentMismatch { exposed, argument, allowed } => {
                write!(f, "{exposed}: argument {:?} is not a value the policy allows; {}", short(argument), allowed_text(allowed))
            }
            UpstreamDenial::ToolChanged { exposed, upstream, why } => {
                write!(
                    f,
                    "{exposed} is withheld: {why}; the operator reviews it with `sp upstream diff {upstream}` and allows it with `sp upstream approve {upstream}`"
                )
            }
        }
    }
}

impl std::error::Error for UpstreamDenial {}

/// An authorized call: only [`authorize_resolved`] builds one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Route {
    upstream: String,
    tool: String,
    exposed: String,
    approve: bool,
}

impl Route {
    pub(crate) fn upstream(&self) -> &str {
        &self.upstream
    }
    /// The upstream's own tool name.
    pub(crate) fn tool(&self) -> &str {
        &self.tool
    }
    pub(crate) fn exposed(&self) -> &str {
        &self.exposed
    }
    /// `tools.approve` matches: the call waits for the approver.
    pub(crate) fn needs_approval(&self) -> bool {
        self.approve
    }
}

/// The name tables of the upstreams listed so far, by upstream.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Tables(pub(super) BTreeMap<String, NameTable>);

impl Tables {
    /// `(upstream, its own tool name)` of an exposed name.
    pub(crate) fn resolve<'a>(&'a self, exposed: &'a str) -> Option<(&'a str, &'a str)> {
        let upstream = names::upstream_of(exposed)?;
        let tool = self.0.get(upstream)?.tool(exposed)?;
        Some((upstream, tool))
    }

    /// The table `sp explain` resolves `exposed` in without listing its upstream (issue
    /// 35, section 5): `tool` (the upstream's own name of it) under `upstream`, withheld
    /// for `withheld` (a pin state that refuses whatever the listing would say).
    pub(crate) fn unlisted(upstream: &str, tool: &str, withheld: Option<super::pins::Withheld>) -> Tables {
        let mut table = NameTable::build(upstream, [tool]).unwrap_or_default();
        if let Some(why) = withheld {
            table.withhold(&names::exposed_name(upstream, tool), why);
        }
        Tables(BTreeMap::from([(upstream.to_owned(), table)]))
    }

    /// Why the tool an exposed name resolves to is withheld (`pins.rs`), if it is.
    pub(crate) fn withheld(&self, exposed: &str) -> Option<&super::pins::Withheld> {
        self.0.get(names::upstream_of(exposed)?)?.withheld(exposed)
    }
}

/// Decides a call to `exposed` with `args`, touching nothing: the name must be in a
/// table (a listing made it), the filter must expose the tool, and every pinned
/// argument must be present, a string, and match one of its globs.
#[cfg(test)]
pub(crate) fn authorize(policy: &BTreeMap<String, Upstream>, tables: &Tables, exposed: &str, args: &Map<String, Value>) -> Result<Route, UpstreamDenial> {
    let (upstream, tool) = tables.resolve(exposed).ok_or_else(|| UpstreamDenial::UnknownTool { exposed: exposed.to_owned() })?;
    if let Some(why) = tables.withheld(exposed) {
        return Err(UpstreamDenial::ToolChanged { exposed: exposed.to_owned(), upstream: upstream.to_owned(), why: why.clone() });
    }
    authorize_resolved(policy, upstream, tool, exposed, args)
}

/// `authorize` of a name already resolved in a table (the tool table's parse did it).
pub(crate) fn authorize_resolved(
    policy: &BTreeMap<String, Upstream>,
    upstream: &str,
    tool: &str,
    exposed: &str,
    args: &Map<String, Value>,
) -> Result<Route, UpstreamDenial> {
    if names::upstream_of(exposed) != Some(upstream) {
        return Err(UpstreamDenial::UnknownTool { exposed: exposed.to_owned() });
    }
    let Some(u) = policy.get(upstream) else {
        return Err(UpstreamDenial::UnknownTool { exposed: exposed.to_owned() });
    };
    if !u.tools.exposes(tool) {
        return Err(UpstreamDenial::NotAllowed { exposed: exposed.to_owned() });
    }
    for (argument, globs) in u.arguments.get(tool).into_iter().flatten() {
        let denial = |make: fn(String, String, Vec<String>) -> UpstreamDenial| {
            make(exposed.to_owned(), argument.clone(), globs.iter().map(|g| g.as_str().to_owned()).collect())
        };
        match args.get(argument) {
            None => return Err(denial(|exposed, argument, allowed| UpstreamDenial::ArgumentMissing { exposed, argument, allowed })),
            Some(Value::String(s)) if crate::policy::upstreams::any_match(globs, s) => {}
            Some(Value::String(_)) => return Err(denial(|exposed, argument, allowed| UpstreamDenial::ArgumentMismatch { exposed, argument, allowed })),
            Some(_) => return Err(denial(|exposed, argument, allowed| UpstreamDenial::ArgumentNotString { exposed, argument, allowed })),
        }
    }
    Ok(Route { upstream: upstream.to_owned(), tool: tool.to_owned(), exposed: exposed.to_owned(), approve: u.tools.needs_approval(tool) })
}

#[cfg(test)]
mod denial_tests {
    use super::*;

    /// Issue 32, section 1: a pin's denial names the values the policy allows, so the
    /// agent can retry with one that passes; a long list is cut (8 globs, 64 characters each).
    #[test]
    fn a_pin_denial_names_the_allowed_values() {
        let d = UpstreamDenial::ArgumentMismatch { exposed: "time_now".into(), argument: "timezone".into(), allowed: vec!["Europe/*".into(), "UTC".into()] };
        assert_eq!(
            d.to_string(),
            "time_now: argument \"timezone\" is not a value the policy allows; allowed: \"Europe/*\", \"UTC\" ('*' any run of characters, '?' one)"
        );
        let d = UpstreamDenial::ArgumentMissing { exposed: "t_x".into(), argument: "a".into(), allowed: (0..10).map(|i| format!("v{i}")).collect() };
        assert!(
            d.to_string().ends_with(
                "must be given; allowed: \"v0\", \"v1\", \"v2\", \"v3\", \"v4\", \"v5\", \"v6\", \"v7\", and 2 more ('*' any run of characters, '?' one)"
            ),
            "{d}"
        );
    }
}
