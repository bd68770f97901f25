//! What follows `oauth` on the command line (`sp oauth login NAME [-c FILE]`,
//! `cli/oauth.rs`, issue 33 §2), parsed as `sp upstream`'s is: pure, usage errors exit 2.

use std::ffi::OsString;
use std::path::PathBuf;

use super::{lexopt, UsageError};

pub(crate) const OAUTH_USAGE: &str = "\
Usage:
  sp oauth login NAME [-c FILE]

  login    sign sp in to the url upstream NAME (its auth.oauth): discover its
           authorization server, print the address to open on stderr, take the
           code on stdin (or the browser's redirect to 127.0.0.1 with
           \"redirect\": \"loopback\"), and keep the tokens in the token store

The token store is the policy's path with .oauth appended (found as sp mcp finds it),
owner-only; sp mcp refreshes the tokens there.

Options:
  -c, --config FILE  the policy that names the upstream
  -h, --help         this help
";

/// What `sp oauth` does.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum OAuthSub {
    Login { upstream: String },
    Help,
}

#[derive(Debug, PartialEq, Eq)]
pub(crate) struct OAuthArgs {
    pub sub: OAuthSub,
    /// `-c FILE` after `oauth`; [`parse`](super::parse) moves it to [`Args::config`](super::Args::config).
    pub config: Option<PathBuf>,
}

/// What follows `oauth` on the command line.
pub(crate) fn parse_oauth(argv: impl IntoIterator<Item = OsString>) -> Result<OAuthArgs, UsageError> {
    use lexopt::prelude::*;
    let mut p = lexopt::Parser::from_args(argv);
    let (mut sub, mut name, mut config) = (None, None, None);
    while let Some(arg) = p.next().map_err(lexopt)? {
        match arg {
            Short('h') | Long("help") => return Ok(OAuthArgs { sub: OAuthSub::Help, config: None }),
            Short('c') | Long("config") => config = Some(PathBuf::from(p.value().map_err(lexopt)?)),
            Value(v) if sub.is_none() => sub = Some(v.to_string_lossy().into_owned()),
            Value(v) if name.is_none() => {
                let ok = v.to_str().filter(|s| crate::policy::upstreams::is_upstream_name(s));
                name = Some(ok.ok_or(UsageError::UpstreamName)?.to_owned());
            }
            other => return Err(lexopt(other.unexpected())),
        }
    }
    let sub = sub.ok_or(UsageError::NoSubcommand { command: "oauth" })?;
    if sub != "login" {
        return Err(UsageError::UnknownSubcommand { command: "oauth", name: sub });
    }
    Ok(OAuthArgs { sub: OAuthSub::Login { upstream: name.ok_or(UsageError::UpstreamName)? }, config })
}

#[cfg(test)]
mod tests {
    use super::super::*;

    fn p(args: &[&str]) -> Result<Args, UsageError> {
        parse(args.iter().map(OsString::from))
    }

    #[test]
    fn oauth_login_takes_an_upstream_name_and_one_config() {
        let a = p(&["oauth", "login", "tickets", "-c", "/p"]).unwrap();
        let want = OAuthArgs { sub: OAuthSub::Login { upstream: "tickets".into() }, config: None };
        assert_eq!((a.command, a.config), (Command::OAuth(want), Some(PathBuf::from("/p"))));
        assert_eq!(p(&["oauth", "--help"]).unwrap().command, Command::OAuth(OAuthArgs { sub: OAuthSub::Help, config: None }));
        let cases = [
            (&["oauth"][..], "sp oauth needs a command: login (try: sp oauth --help)"),
            (&["oauth", "logout", "t"], "unknown oauth command \"logout\" (login)"),
            (&["oauth", "login"], "sp upstream takes the NAME of an upstream of the policy (1-24 of a-z, 0-9, -)"),
            (&["oauth", "login", "T_x"], "sp upstream takes the NAME of an upstream of the policy (1-24 of a-z, 0-9, -)"),
            (&["oauth", "login", "t", "extra"], "unexpected argument \"extra\""),
            (&["-c", "/a", "oauth", "login", "t", "-c", "/b"], "--config given twice"),
        ];
        for (argv, want) in cases {
            assert_eq!(p(argv).unwrap_err().to_string(), want, "{argv:?}");
        }
    }
}
