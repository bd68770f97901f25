//! The command line, parsed: argv in, [`Args`] (or a usage error) out. Pure (ripgrep's
//! `LowArgs`): no system call, no environment, no file; `sp audit`'s and `sp approve`'s
//! own arguments included. What the arguments point at is read afterwards (`McpConfig::from_args`).

use std::ffi::OsString;
use std::path::PathBuf;

use crate::mcp::frame::DEFAULT_MAX_LINE_BYTES;

pub(crate) const USAGE: &str = "\
sp - an MCP gateway: agents act on HTTP APIs and SSH hosts without holding the credentials

Usage:
  sp mcp [--config FILE] [--max-line-bytes N] [--close-on-refusal] [-v...] [-q]
  sp check [--config FILE] [--probe]
  sp init [FILE | -]
  sp explain [-c FILE] [--json] CALL | --tool NAME [--args JSON]
  sp test [-c FILE] CASES
  sp [-v...] [-q] audit verify FILE [--anchor HASH] | tail FILE [-n N] [--json] | show FILE [--json]
  sp [-v...] [-q] audit export FILE [--format ndjson|cef|ocsf] [--since TIME] [--follow]
  sp [-v...] [-q] approve list [--json] | revoke ID | revoke --all
  sp [-v...] [-q] upstream pin NAME | diff NAME | approve NAME [TOOL...]
  sp [-v...] [-q] oauth login NAME
  sp --version
  sp --help

Commands:
  mcp      serve MCP over stdin/stdout (started by an MCP client)
  check    validate a policy file and print a summary
  init     write a starting policy (sp init --help)
  explain  what the policy decides for one call, without running it (sp explain --help)
  test     hold a file of calls to the decisions expected (sp explain --help)
  audit    check, print or export an audit journal (sp audit --help)
  approve  list or revoke approval grants (sp approve --help)
  upstream pin, compare and approve an upstream's tool definitions (sp upstream --help)
  oauth    sign in to a url upstream that needs OAuth (sp oauth --help)

Options:
  -c, --config FILE       policy file (default: $SP_CONFIG, then
                          $XDG_CONFIG_HOME/sallyport/policy.json or
                          ~/.config/sallyport/policy.json, then /etc/sallyport/policy.json)
      --max-line-bytes N  longest accepted request line (default 4194304)
      --close-on-refusal  end the session after any refused request
      --probe             check: start each upstream, list the tools it would
                          expose, stop it
  -v, --verbose           more log output on stderr (repeat for more)
  -q, --quiet             no log output on stderr
  -h, --help              this help
  -V, --version           the version

Each command has its own --help (sp mcp --help). See sp(1) and sp-policy(5).
";

/// `sp mcp --help`: the command's own flags (a subset of [`USAGE`]'s, checked against
/// sp(1) OPTIONS in `help_agrees_with_man.rs`).
pub(crate) const MCP_USAGE: &str = "\
Usage:
  sp mcp [--config FILE] [--max-line-bytes N] [--close-on-refusal] [-v...] [-q]

Serve MCP on stdin/stdout until end of input. An MCP client starts this; a person
runs `sp check` instead. Stdout carries only protocol; logs go to stderr.

Options:
  -c, --config FILE       policy file (default: $SP_CONFIG, then
                          $XDG_CONFIG_HOME/sallyport/policy.json or
                          ~/.config/sallyport/policy.json, then /etc/sallyport/policy.json)
      --max-line-bytes N  longest accepted request line (default 4194304)
      --close-on-refusal  end the session after any refused request
  -v, --verbose           more log output on stderr (repeat for more)
  -q, --quiet             no log output on stderr
  -h, --help              this help

See sp(1), COMMANDS and PROTOCOL.
";

/// `sp check --help`.
pub(crate) const CHECK_USAGE: &str = "\
Usage:
  sp check [--config FILE] [--probe] [-v...] [-q]

Find the policy as sp mcp would, validate it and print a summary; exit 1 when it
does not load.

Options:
  -c, --config FILE       policy file (default: as for sp mcp)
      --probe             check: start each upstream, list the tools it would
                          expose, stop it
  -v, --verbose           more log output on stderr (repeat for more)
  -q, --quiet             no log output on stderr
  -h, --help              this help

See sp(1), COMMANDS.
";

/// `sp init --help`.
pub(crate) const INIT_USAGE: &str = "\
Usage:
  sp init [FILE | -]

Write a starting policy to FILE (default: $XDG_CONFIG_HOME/sallyport/policy.json or
~/.config/sallyport/policy.json, where sp mcp looks), owner-only, and print what
each part of it does; `-` prints the policy on stdout instead. An existing FILE is
never overwritten.

Options:
  -h, --help              this help

See sp(1), COMMANDS, and sp-policy(5).
";

/// Which help text `--help` prints: the command's own, when one came before it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum HelpTopic {
    General,
    Mcp,
    Check,
    Init,
}

impl HelpTopic {
    pub(crate) fn text(self) -> &'static str {
        match self {
            HelpTopic::General => USAGE,
            HelpTopic::Mcp => MCP_USAGE,
            HelpTopic::Check => CHECK_USAGE,
            HelpTopic::Init => INIT_USAGE,
        }
    }
}

#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Command {
    Mcp,
    Check,
    /// `sp init [FILE | -]`: `None` for the default place, `-` for stdout.
    Init(Option<PathBuf>),
    /// `sp [-v|-q] audit ...`: the rest of argv, parsed by [`parse_audit`].
    Audit(AuditArgs),
    /// `sp [-v|-q] [-c FILE] approve ...`: the rest of argv, parsed by [`parse_approve`].
    Approve(ApproveArgs),
    /// `sp [-v|-q] [-c FILE] upstream ...`: the rest of argv, parsed by [`parse_upstream`].
    Upstream(UpstreamArgs),
    /// `sp [-v|-q] [-c FILE] oauth ...`: parsed by [`parse_oauth`].
    OAuth(OAuthArgs),
    /// `sp [-c FILE] explain ...` and `sp [-c FILE] test ...`, parsed by [`parse_explain`].
    Explain(ExplainArgs),
    Help(HelpTopic),
    Version,
}

/// Argv as given, checked for shape only.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct Args {
    pub command: Command,
    pub config: Option<PathBuf>,
    pub max_line_bytes: usize,
    pub close_on_refusal: bool,
    /// `sp check --probe`: start each upstream and list what it would expose.
    pub probe: bool,
    pub verbose: u8,
    pub quiet: bool,
}

/// A usage error (exit 2): one line for stderr.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum UsageError {
    /// What lexopt refused (an unknown option, a missing or unexpected value), in its
    /// words.
    Lexopt {
        why: String,
    },
    MaxLineBytes,
    UnknownCommand {
        name: String,
    },
    NoCommand,
    /// A flag of `sp mcp` given to another command.
    McpOnly {
        flag: &'static str,
    },
    ConfigForAudit,
    ConfigTwice,
    /// `sp approve revoke` with something else than 16 hex digits.
    GrantId,
    /// `sp approve` or `sp audit` (`command`) without its subcommand.
    NoSubcommand {
        command: &'static str,
    },
    UnknownSubcommand {
        command: &'static str,
        name: String,
    },
    /// A flag the subcommand `sub` of `sp command` does not take.
    NotFor {
        flag: &'static str,
        command: &'static str,
        sub: String,
    },
    /// A flag of `sp check` given to another command.
    CheckOnly {
        flag: &'static str,
    },
    /// A flag `sp init` does not take (it takes only FILE).
    NotForInit {
        flag: &'static str,
    },
    IdAndAll,
    NoIdNorAll,
    Anchor,
    Lines,
    /// `sp audit export --format` with another name than ndjson, cef or ocsf.
    Format,
    /// `sp audit export --since` with neither an RFC 3339 time nor an age.
    Since,
    /// `show`'s SEQ is not a number, or `--recording` came without one.
    Seq,
    NoFile {
        sub: String,
    },
    /// `sp upstream pin|diff|approve` without an upstream name, or with one that cannot
    /// be one (`[a-z0-9-]`, 1 to 24 characters).
    UpstreamName,
    /// `sp upstream pin|diff` given tool names (only `approve` takes them).
    ToolsNotFor {
        sub: String,
    },
    /// A flag of `sp explain` given to `sp test`.
    ExplainOnly {
        flag: &'static str,
    },
    /// `sp explain` given a CALL and `--tool` or `--args` too.
    CallTwice,
    /// `sp explain` with neither a CALL nor `--tool`.
    NoCall {
        command: &'static str,
    },
    /// `sp test` without its CASES file.
    NoCases,
}

impl std::fmt::Display for UsageError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            UsageError::Lexopt { why } => f.write_str(why),
            UsageError::MaxLineBytes => f.write_str("--max-line-bytes takes a number from 1024 to 268435456"),
            UsageError::UnknownCommand { name } => write!(f, "unknown command {name:?} (try: sp --help)"),
            UsageError::NoCommand => f.write_str("a command is required: sp mcp, sp check (try: sp --help)"),
            UsageError::McpOnly { flag } => write!(f, "{flag} only applies to sp mcp"),
            UsageError::ConfigForAudit => f.write_str("--config does not apply to sp audit (it reads the journal FILE it is given)"),
            UsageError::ConfigTwice => f.write_str("--config given twice"),
            UsageError::GrantId => f.write_str("sp approve revoke takes a grant id: 16 hex digits, as sp approve list shows them"),
            UsageError::NoSubcommand { command: "approve" } => f.write_str("sp approve needs a command: list or revoke (try: sp approve --help)"),
            UsageError::NoSubcommand { command: "upstream" } => f.write_str("sp upstream needs a command: pin, diff or approve (try: sp upstream --help)"),
            UsageError::NoSubcommand { command: "oauth" } => f.write_str("sp oauth needs a command: login (try: sp oauth --help)"),
            UsageError::NoSubcommand { command } => {
                write!(f, "sp {command} needs a command: verify, tail, show or export (try: sp {command} --help)")
            }
            UsageError::UnknownSubcommand { command: "approve", name } => write!(f, "unknown approve command {name:?} (list or revoke)"),
            UsageError::UnknownSubcommand { command: "upstream", name } => write!(f, "unknown upstream command {name:?} (pin, diff or approve)"),
            UsageError::UnknownSubcommand { command: "oauth", name } => write!(f, "unknown oauth command {name:?} (login)"),
            UsageError::UnknownSubcommand { command, name } => write!(f, "unknown {command} command {name:?} (verify, tail, show or export)"),
            UsageError::NotFor { flag, command, sub } => write!(f, "{flag} does not apply to sp {command} {sub}"),
            UsageError::CheckOnly { flag } => write!(f, "{flag} only applies to sp check"),
            UsageError::NotForInit { flag } => write!(f, "{flag} does not apply to sp init (it takes a FILE, or - for stdout)"),
            UsageError::IdAndAll => f.write_str("sp approve revoke takes a grant id or --all, not both"),
            UsageError::NoIdNorAll => f.write_str("sp approve revoke needs a grant id or --all"),
            UsageError::Anchor => f.write_str("--anchor takes a row's hash: 64 hex digits"),
            UsageError::Lines => f.write_str("-n takes a number"),
            UsageError::Format => f.write_str("--format takes ndjson, cef or ocsf"),
            UsageError::Since => f.write_str("--since takes an RFC 3339 time (2026-12-05T12:00:00Z) or an age: a number and s, m, h or d (90m)"),
            UsageError::Seq => f.write_str("sp audit show FILE SEQ: SEQ is a row's seq number (--recording needs one)"),
            UsageError::NoFile { sub } => write!(f, "sp audit {sub} needs a journal FILE"),
            UsageError::UpstreamName => f.write_str("sp upstream takes the NAME of an upstream of the policy (1-24 of a-z, 0-9, -)"),
            UsageError::ToolsNotFor { sub } => write!(f, "sp upstream {sub} takes no tool names (only approve does)"),
            UsageError::ExplainOnly { flag } => write!(f, "{flag} only applies to sp explain"),
            UsageError::CallTwice => f.write_str("sp explain takes a CALL or --tool NAME [--args JSON], not both"),
            UsageError::NoCall { command } => {
                write!(f, "sp {command} needs a CALL ('{{\"tool\": NAME, \"arguments\": {{...}}}}') or --tool NAME (try: sp {command} --help)")
            }
            UsageError::NoCases => f.write_str("sp test needs a CASES file (JSON Lines of {\"call\", \"expect\"}; try: sp test --help)"),
        }
    }
}

impl std::error::Error for UsageError {}

fn lexopt(e: lexopt::Error) -> UsageError {
    UsageError::Lexopt { why: e.to_string() }
}

/// Argv (without the program name) to [`Args`].
pub(crate) fn parse(argv: impl IntoIterator<Item = OsString>) -> Result<Args, UsageError> {
    use lexopt::prelude::*;
    let mut p = lexopt::Parser::from_args(argv);
    let mut args = Args {
        command: Command::Help(HelpTopic::General),
        config: None,
        max_line_bytes: DEFAULT_MAX_LINE_BYTES,
        close_on_refusal: false,
        probe: false,
        verbose: 0,
        quiet: false,
    };
    let mut command = None;
    let mut mcp_only = None;
    while let Some(arg) = p.next().map_err(lexopt)? {
        match arg {
            Short('h') | Long("help") => {
                let topic = match command {
                    Some(Command::Mcp) => HelpTopic::Mcp,
                    Some(Command::Check) => HelpTopic::Check,
                    Some(Command::Init(_)) => HelpTopic::Init,
                    _ => HelpTopic::General,
                };
                return Ok(Args { command: Command::Help(topic), ..args });
            }
            Short('V') | Long("version") => return Ok(Args { command: Command::Version, ..args }),
            Short('c') | Long("config") => {
                args.config = Some(PathBuf::from(p.value().map_err(lexopt)?));
            }
            Long("max-line-bytes") => {
                let v = p.value().map_err(lexopt)?;
                args.max_line_bytes =
                    v.to_str().and_then(|s| s.parse::<usize>().ok()).filter(|n| (1024..=256 * 1024 * 1024).contains(n)).ok_or(UsageError::MaxLineBytes)?;
                mcp_only = Some("--max-line-bytes");
            }
            Long("close-on-refusal") => {
                args.close_on_refusal = true;
                mcp_only = Some("--close-on-refusal");
            }
            Long("probe") => args.probe = true,
            Short('v') | Long("verbose") => args.verbose = args.verbose.saturating_add(1),
            Short('q') | Long("quiet") => args.quiet = true,
            // `sp init FILE`: one path after `init`.
            Value(v) if matches!(command, Some(Command::Init(None))) => command = Some(Command::Init(Some(PathBuf::from(v)))),
            Value(v) if command.is_none() => {
                command = Some(match v.to_str() {
                    Some("mcp") => Command::Mcp,
                    Some("check") => Command::Check,
                    Some("init") => Command::Init(None),
                    // Everything after `audit` is its own (global flags such as
                    // -q may come before it).
                    Some("audit") => {
                        let rest: Vec<OsString> = p.raw_args().map_err(lexopt)?.collect();
                        Command::Audit(parse_audit(rest)?)
                    }
                    Some("approve") => {
                        let rest: Vec<OsString> = p.raw_args().map_err(lexopt)?.collect();
                        Command::Approve(parse_approve(rest)?)
                    }
                    Some("upstream") => {
                        let rest: Vec<OsString> = p.raw_args().map_err(lexopt)?.collect();
                        Command::Upstream(parse_upstream(rest)?)
                    }
                    Some("oauth") => Command::OAuth(parse_oauth(p.raw_args().map_err(lexopt)?.collect::<Vec<_>>())?),
                    Some(which @ ("explain" | "test")) => {
                        let rest: Vec<OsString> = p.raw_args().map_err(lexopt)?.collect();
                        Command::Explain(parse_explain(which == "test", rest)?)
                    }
                    Some("help") => Command::Help(HelpTopic::General),
                    Some("version") => Command::Version,
                    _ => return Err(UsageError::UnknownCommand { name: v.to_string_lossy().into_owned() }),
                });
            }
            other => return Err(lexopt(other.unexpected())),
        }
    }
    args.command = command.ok_or(UsageError::NoCommand)?;
    if let (Some(flag), false) = (mcp_only, args.command == Command::Mcp) {
        return Err(UsageError::McpOnly { flag });
    }
    if matches!(args.command, Command::Init(_))
        && let Some(flag) = [(args.config.is_some(), "--config"), (args.probe, "--probe")].iter().find_map(|(given, f)| given.then_some(*f))
    {
        return Err(UsageError::NotForInit { flag });
    }
    if args.probe && args.command != Command::Check {
        return Err(UsageError::CheckOnly { flag: "--probe" });
    }
    if matches!(args.command, Command::Audit(_)) && args.config.is_some() {
        return Err(UsageError::ConfigForAudit);
    }
    // `sp -c FILE approve list` and `sp approve list -c FILE` alike (and `sp upstream`):
    // one policy.
    let after = match &mut args.command {
        Command::Approve(a) => a.config.take(),
        Command::Upstream(u) => u.config.take(),
        Command::OAuth(o) => o.config.take(),
        Command::Explain(e) => e.config.take(),
        _ => None,
    };
    if let Some(c) = after {
        if args.config.is_some() {
            return Err(UsageError::ConfigTwice);
        }
        args.config = Some(c);
    }
    Ok(args)
}

pub(crate) const APPROVE_USAGE: &str = "\
Usage:
  sp approve list [--json] [-c FILE]
  sp approve revoke ID [-c FILE]
  sp approve revoke --all [-c FILE]

  list     the grants in force: id, scope, time left, channel, what they cover
  revoke   end the grant ID, or every grant (--all also replaces a corrupt file)

The grants file is approval.grants.path of the policy (found as sp mcp finds it),
else $XDG_STATE_HOME/sallyport/grants.json or ~/.local/state/sallyport/grants.json.

Options:
  -c, --config FILE  the policy that names the grants file
      --json         list: one JSON object per grant and line
      --all          revoke: every grant
  -h, --help         this help
";

/// What `sp approve` does.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum ApproveSub {
    List {
        json: bool,
    },
    /// One grant, by its id (16 hex digits, lower case).
    Revoke {
        id: String,
    },
    RevokeAll,
    Help,
}

#[derive(Debug, PartialEq, Eq)]
pub(crate) struct ApproveArgs {
    pub sub: ApproveSub,
    /// `-c FILE` after `approve`; [`parse`] moves it to [`Args::config`].
    pub config: Option<PathBuf>,
}

/// What follows `approve` on the command line.
pub(crate) fn parse_approve(argv: impl IntoIterator<Item = OsString>) -> Result<ApproveArgs, UsageError> {
    use lexopt::prelude::*;
    let mut p = lexopt::Parser::from_args(argv);
    let (mut sub, mut id, mut config, mut json, mut all) = (None, None, None, false, false);
    while let Some(arg) = p.next().map_err(lexopt)? {
        match arg {
            Short('h') | Long("help") => return Ok(ApproveArgs { sub: ApproveSub::Help, config: None }),
            Short('c') | Long("config") => config = Some(PathBuf::from(p.value().map_err(lexopt)?)),
            Long("json") => json = true,
            Long("all") => all = true,
            Value(v) if sub.is_none() => sub = Some(v.to_string_lossy().into_owned()),
            Value(v) if sub.as_deref() == Some("revoke") && id.is_none() => {
                // Checked here: a malformed id is a usage error (exit 2), not "no such
                // grant" (exit 1). Upper case is accepted.
                let ok = v.to_str().filter(|s| s.len() == 16 && s.bytes().all(|b| b.is_ascii_hexdigit()));
                id = Some(ok.ok_or(UsageError::GrantId)?.to_ascii_lowercase());
            }
            other => return Err(lexopt(other.unexpected())),
        }
    }
    let sub = sub.ok_or(UsageError::NoSubcommand { command: "approve" })?;
    let only = |flag, ok: bool| if ok { Ok(()) } else { Err(UsageError::NotFor { flag, command: "approve", sub: sub.clone() }) };
    let sub = match sub.as_str() {
        "list" => {
            only("--all", !all)?;
            ApproveSub::List { json }
        }
        "revoke" => {
            only("--json", !json)?;
            match (id, all) {
                (Some(id), false) => ApproveSub::Revoke { id },
                (None, true) => ApproveSub::RevokeAll,
                (Some(_), true) => return Err(UsageError::IdAndAll),
                (None, false) => return Err(UsageError::NoIdNorAll),
            }
        }
        other => return Err(UsageError::UnknownSubcommand { command: "approve", name: other.to_owned() }),
    };
    Ok(ApproveArgs { sub, config })
}

// `sp audit`'s own arguments.
mod audit;
pub(crate) use audit::{parse_audit, AuditArgs, Since, Sub, AUDIT_USAGE};

#[cfg(test)]
mod tests;

// `sp upstream`'s own arguments.
mod upstream;
pub(crate) use upstream::{parse_upstream, UpstreamArgs, UpstreamSub, UPSTREAM_USAGE};

// `sp oauth`'s own arguments (issue 33 §2).
mod oauth;
pub(crate) use oauth::{parse_oauth, OAuthArgs, OAuthSub, OAUTH_USAGE};

// `sp explain`'s and `sp test`'s own arguments.
mod explain;
pub(crate) use explain::{parse_explain, ExplainArgs, ExplainSub, EXPLAIN_USAGE};

/// Whether argv names `sp explain` or `sp test` (their usage errors exit 3, not 2: 2 is
/// their "approve"). The first argument that is a command name decides.
pub(crate) fn is_explain(argv: &[OsString]) -> bool {
    const COMMANDS: [&str; 11] = ["mcp", "check", "init", "audit", "approve", "upstream", "oauth", "explain", "test", "help", "version"];
    argv.iter().filter_map(|a| a.to_str()).find(|a| COMMANDS.contains(a)).is_some_and(|a| a == "explain" || a == "test")
}

// `sp --help`, the man pages' OPTIONS and the parser agree (the module's docs).
#[cfg(test)]
mod help_agrees_with_man;
