//! Where the rate limits' counts are kept (`gate/limits.rs`): `limits_state`, else
//! `limits.json` beside the default journal (`audit::default_location`, the rule the
//! grants file follows too). `sp mcp` refuses to serve a policy with `limits` rules and
//! nowhere to count them (no `limits_state`, neither `XDG_STATE_HOME` nor `HOME`).

use std::path::PathBuf;

use crate::gate::limits::Limiter;
use crate::policy::limits::LimitsPolicy;

/// The state file's path.
pub(crate) fn location(limits: &LimitsPolicy, env: impl Fn(&str) -> Option<String>) -> Result<PathBuf, String> {
    if let Some(p) = &limits.state {
        return Ok(p.clone());
    }
    crate::audit::default_location(env)
        .map(|p| p.with_file_name("limits.json"))
        .map_err(|why| format!("no place for the rate limit counts: {why} (set limits_state in the policy)"))
}

/// The limiter `sp mcp` counts with: `None` for a policy without rules.
pub(crate) fn limiter(limits: &LimitsPolicy, env: impl Fn(&str) -> Option<String>) -> Result<Option<Limiter>, String> {
    if limits.rules.is_empty() {
        return Ok(None);
    }
    let path = location(limits, env)?;
    log::info!("rate limits: {} rule(s), counts in {}", limits.rules.len(), path.display());
    Ok(Some(Limiter::new(path)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_state_file_sits_beside_the_journal_unless_named() {
        let env = |k: &str| (k == "HOME").then(|| "/home/u".to_owned());
        let none = LimitsPolicy::default();
        assert_eq!(location(&none, env), Ok(PathBuf::from("/home/u/.local/state/sallyport/limits.json")));
        let named = LimitsPolicy { state: Some("/s/l.json".into()), ..LimitsPolicy::default() };
        assert_eq!(location(&named, |_| None), Ok(PathBuf::from("/s/l.json")));
        assert!(location(&none, |_| None).unwrap_err().contains("set limits_state in the policy"));
        assert_eq!(limiter(&none, |_| None), Ok(None), "no rules: nothing to count, no location needed");
    }
}
