//! What follows `upstream` on the command line (`sp upstream pin|diff|approve NAME
//! [TOOL...]`, `cli/upstream.rs`), parsed as `sp approve`'s is: pure, usage errors exit 2.

use std::ffi::OsString;
use std::path::PathBuf;

use super::{lexopt, UsageError};

pub(crate) const UPSTREAM_USAGE: &str = "\
Usage:
  sp upstream pin NAME [-c FILE]
  sp upstream diff NAME [-c FILE]
  sp upstream approve NAME [TOOL...] [-c FILE]

  pin      start upstream NAME, list its tools and pin each one the policy exposes
           (when it has no pins yet); exit 1 when it has pins that differ
  diff     show each exposed tool's pin and its definition now: changed (both hashes
           and the members that differ), new, gone; exit 0 when all match, 1 when not
  approve  pin the definitions listed now (every tool, or the TOOLs named): what
           sp mcp withholds as changed is exposed again from its next listing

The pins file is the policy's path with .pins appended (found as sp mcp finds it).

Options:
  -c, --config FILE  the policy that names the upstream
  -h, --help         this help
";

/// What `sp upstream` does, to which upstream.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum UpstreamSub {
    Pin {
        upstream: String,
    },
    Diff {
        upstream: String,
    },
    /// `tools` empty: every exposed tool.
    Approve {
        upstream: String,
        tools: Vec<String>,
    },
    Help,
}

#[derive(Debug, PartialEq, Eq)]
pub(crate) struct UpstreamArgs {
    pub sub: UpstreamSub,
    /// `-c FILE` after `upstream`; [`parse`](super::parse) moves it to [`Args::config`](super::Args::config).
    pub config: Option<PathBuf>,
}

/// What follows `upstream` on the command line.
pub(crate) fn parse_upstream(argv: impl IntoIterator<Item = OsString>) -> Result<UpstreamArgs, UsageError> {
    use lexopt::prelude::*;
    let mut p = lexopt::Parser::from_args(argv);
    let (mut sub, mut name, mut tools, mut config) = (None, None, Vec::new(), None);
    while let Some(arg) = p.next().map_err(lexopt)? {
        match arg {
            Short('h') | Long("help") => return Ok(UpstreamArgs { sub: UpstreamSub::Help, config: None }),
            Short('c') | Long("config") => config = Some(PathBuf::from(p.value().map_err(lexopt)?)),
            Value(v) if sub.is_none() => sub = Some(v.to_string_lossy().into_owned()),
            Value(v) if name.is_none() => {
                let ok = v.to_str().filter(|s| crate::policy::upstreams::is_upstream_name(s));
                name = Some(ok.ok_or(UsageError::UpstreamName)?.to_owned());
            }
            Value(v) => tools.push(v.to_string_lossy().into_owned()),
            other => return Err(lexopt(other.unexpected())),
        }
    }
    let sub = sub.ok_or(UsageError::NoSubcommand { command: "upstream" })?;
    if !matches!(sub.as_str(), "pin" | "diff" | "approve") {
        return Err(UsageError::UnknownSubcommand { command: "upstream", name: sub });
    }
    let upstream = name.ok_or(UsageError::UpstreamName)?;
    if !tools.is_empty() && sub != "approve" {
        return Err(UsageError::ToolsNotFor { sub });
    }
    let sub = match sub.as_str() {
        "pin" => UpstreamSub::Pin { upstream },
        "diff" => UpstreamSub::Diff { upstream },
        _ => UpstreamSub::Approve { upstream, tools },
    };
    Ok(UpstreamArgs { sub, config })
}
