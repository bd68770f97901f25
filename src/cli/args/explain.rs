//! What follows `explain` or `test` on the command line (`sp explain [CALL]`, `sp test
//! FILE`, `cli/explain.rs`), parsed as `sp upstream`'s is: pure. A usage error of
//! these two commands exits 3, their "error" status (2 is "approve").

use std::ffi::OsString;
use std::path::PathBuf;

use super::{lexopt, UsageError};

pub(crate) const EXPLAIN_USAGE: &str = "\
Usage:
  sp explain [-c FILE] [--json] '{\"tool\": NAME, \"arguments\": {...}}'
  sp explain [-c FILE] [--json] --tool NAME [--args JSON]
  sp test [-c FILE] CASES

  explain  what the policy decides for one call, without running it or contacting
           anything: allow, deny, approve or rate_limited, the rule that matched,
           the credential it would carry (name and scheme, never the value), and
           for a refused http call the nearest http.allow rule and why it does not
           match; exit 0 allow, 1 deny, 2 approve, 3 error, 4 rate-limited
  test     run a JSON Lines file of {\"call\": {...}, \"expect\": DECISION} cases
           (optionally \"rule\": N, the http.allow index); one line per case, then
           N passed, N failed; exit 0 when all pass, 1 when one fails, 3 on error

The policy is found as sp mcp finds it. An upstream's tool is decided from the
policy and the pins file, without starting the upstream.

Options:
  -c, --config FILE  the policy
      --tool NAME    explain: the tool called
      --args JSON    explain: its arguments (an object; default {})
      --json         explain: the explanation as one JSON object
  -h, --help         this help
";

/// `sp explain` or `sp test`, with what they were given.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum ExplainSub {
    /// The call as a JSON text: given whole, or made of `--tool` and `--args`.
    Explain {
        call: String,
        json: bool,
    },
    Test {
        file: PathBuf,
    },
    Help,
}

#[derive(Debug, PartialEq, Eq)]
pub(crate) struct ExplainArgs {
    pub sub: ExplainSub,
    /// `-c FILE` after the command; [`parse`](super::parse) moves it to [`Args::config`](super::Args::config).
    pub config: Option<PathBuf>,
}

/// What follows `explain` (`test` false) or `test` on the command line.
pub(crate) fn parse_explain(test: bool, argv: impl IntoIterator<Item = OsString>) -> Result<ExplainArgs, UsageError> {
    use lexopt::prelude::*;
    let command = if test { "test" } else { "explain" };
    let mut p = lexopt::Parser::from_args(argv);
    let (mut given, mut tool, mut args, mut json, mut config) = (None, None, None, false, None);
    let text = |v: OsString| v.into_string().map_err(|_| UsageError::Lexopt { why: "the call must be UTF-8".into() });
    while let Some(arg) = p.next().map_err(lexopt)? {
        match arg {
            Short('h') | Long("help") => return Ok(ExplainArgs { sub: ExplainSub::Help, config: None }),
            Short('c') | Long("config") => config = Some(PathBuf::from(p.value().map_err(lexopt)?)),
            Long("tool") if !test => tool = Some(text(p.value().map_err(lexopt)?)?),
            Long("args") if !test => args = Some(text(p.value().map_err(lexopt)?)?),
            Long("json") if !test => json = true,
            Long(flag @ ("tool" | "args" | "json")) => {
                let flag = match flag {
                    "tool" => "--tool",
                    "args" => "--args",
                    _ => "--json",
                };
                return Err(UsageError::ExplainOnly { flag });
            }
            Value(v) if given.is_none() => given = Some(v),
            other => return Err(lexopt(other.unexpected())),
        }
    }
    if test {
        let file = given.ok_or(UsageError::NoCases)?;
        return Ok(ExplainArgs { sub: ExplainSub::Test { file: PathBuf::from(file) }, config });
    }
    let call = match (given, tool) {
        (Some(_), Some(_)) => return Err(UsageError::CallTwice),
        (Some(c), None) if args.is_none() => text(c)?,
        (Some(_), None) => return Err(UsageError::CallTwice),
        (None, Some(t)) => {
            // The call is built as JSON here, the arguments' text left for the parse to judge.
            let args = args.unwrap_or_else(|| "{}".into());
            format!("{{\"tool\": {}, \"arguments\": {args}}}", serde_json::Value::String(t))
        }
        (None, None) => return Err(UsageError::NoCall { command }),
    };
    Ok(ExplainArgs { sub: ExplainSub::Explain { call, json }, config })
}
