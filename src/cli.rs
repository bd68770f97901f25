//! Command line: `sp mcp`, `sp check`, `--help`, `--version`.
//!
//! ripgrep's split: [`parse`] fills a plain [`Args`] from argv with no system calls;
//! [`run`] turns it into a configuration that touches the environment (policy lookup,
//! logging) and runs it. Usage errors exit 2 with one line on stderr. Exit codes are
//! listed in `sp(1)`.

use std::ffi::OsString;
use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

use crate::exec::Executors;
use crate::frame::DEFAULT_MAX_LINE_BYTES;
use crate::out::StdoutHandle;
use crate::policy::{lookup, Lookup, Policy};
use crate::server::{Options, Server};

pub const EXIT_FATAL: u8 = 1;
pub const EXIT_USAGE: u8 = 2;

pub const USAGE: &str = "\
sp - an MCP gateway: agents act on HTTP APIs and SSH hosts without holding the credentials

Usage:
  sp mcp [--config FILE] [--max-line-bytes N] [--close-on-refusal] [-v...] [-q]
  sp check [--config FILE]
  sp [-v...] [-q] audit verify FILE [--anchor HASH] | tail FILE [-n N] [--json] | show FILE [--json]
  sp --version
  sp --help

Commands:
  mcp      serve MCP over stdin/stdout (started by an MCP client)
  check    validate a policy file and print a summary
  audit    check or print an audit journal (sp audit --help)

Options:
  -c, --config FILE       policy file (default: $SP_CONFIG, then
                          $XDG_CONFIG_HOME/sallyport/policy.json or
                          ~/.config/sallyport/policy.json, then /etc/sallyport/policy.json)
      --max-line-bytes N  longest accepted request line (default 4194304)
      --close-on-refusal  end the session after any refused request
  -v, --verbose           more log output on stderr (repeat for more)
  -q, --quiet             no log output on stderr
  -h, --help              this help
  -V, --version           the version

See sp(1) and sp-policy(5).
";

#[derive(Debug, PartialEq, Eq)]
pub enum Command {
    Mcp,
    Check,
    /// `sp [-v|-q] audit ...`: the rest of argv, parsed by `audit_cli.rs`.
    Audit(crate::audit_cli::AuditArgs),
    Help,
    Version,
}

/// Argv as given, checked for shape only.
#[derive(Debug, PartialEq, Eq)]
pub struct Args {
    pub command: Command,
    pub config: Option<PathBuf>,
    pub max_line_bytes: usize,
    pub close_on_refusal: bool,
    pub verbose: u8,
    pub quiet: bool,
}

pub fn parse(argv: impl IntoIterator<Item = OsString>) -> Result<Args, String> {
    use lexopt::prelude::*;
    let mut p = lexopt::Parser::from_args(argv);
    let mut args = Args {
        command: Command::Help,
        config: None,
        max_line_bytes: DEFAULT_MAX_LINE_BYTES,
        close_on_refusal: false,
        verbose: 0,
        quiet: false,
    };
    let mut command = None;
    let mut mcp_only = None;
    while let Some(arg) = p.next().map_err(|e| e.to_string())? {
        match arg {
            Short('h') | Long("help") => return Ok(Args { command: Command::Help, ..args }),
            Short('V') | Long("version") => return Ok(Args { command: Command::Version, ..args }),
            Short('c') | Long("config") => {
                args.config = Some(PathBuf::from(p.value().map_err(|e| e.to_string())?));
            }
            Long("max-line-bytes") => {
                let v = p.value().map_err(|e| e.to_string())?;
                args.max_line_bytes = v
                    .to_str()
                    .and_then(|s| s.parse::<usize>().ok())
                    .filter(|n| (1024..=256 * 1024 * 1024).contains(n))
                    .ok_or("--max-line-bytes takes a number from 1024 to 268435456")?;
                mcp_only = Some("--max-line-bytes");
            }
            Long("close-on-refusal") => {
                args.close_on_refusal = true;
                mcp_only = Some("--close-on-refusal");
            }
            Short('v') | Long("verbose") => args.verbose = args.verbose.saturating_add(1),
            Short('q') | Long("quiet") => args.quiet = true,
            Value(v) if command.is_none() => {
                command = Some(match v.to_str() {
                    Some("mcp") => Command::Mcp,
                    Some("check") => Command::Check,
                    // Everything after `audit` is its own (issue 8: global flags such as
                    // -q may come before it).
                    Some("audit") => {
                        let rest: Vec<OsString> = p.raw_args().map_err(|e| e.to_string())?.collect();
                        Command::Audit(crate::audit_cli::parse(rest)?)
                    }
                    Some("help") => Command::Help,
                    Some("version") => Command::Version,
                    _ => return Err(format!("unknown command {:?} (try: sp --help)", v.to_string_lossy())),
                });
            }
            other => return Err(other.unexpected().to_string()),
        }
    }
    args.command = command.ok_or("a command is required: sp mcp, sp check (try: sp --help)")?;
    if let (Some(flag), false) = (mcp_only, args.command == Command::Mcp) {
        return Err(format!("{flag} only applies to sp mcp"));
    }
    if matches!(args.command, Command::Audit(_)) && args.config.is_some() {
        return Err("--config does not apply to sp audit (it reads the journal FILE it is given)".into());
    }
    Ok(args)
}

/// Entry point after stdout has been taken over.
pub fn run(stdout: StdoutHandle) -> ExitCode {
    if std::env::var_os("SP_TEST_PANIC").is_some_and(|v| v == "startup") {
        panic!("SP_TEST_PANIC=startup: panicking at startup as asked");
    }
    let args = match parse(std::env::args_os().skip(1)) {
        Ok(a) => a,
        Err(e) => {
            eprintln!("sp: {e}");
            return ExitCode::from(EXIT_USAGE);
        }
    };
    match args.command {
        Command::Help => text(stdout, USAGE),
        Command::Version => text(stdout, &format!("sp {}\n", env!("CARGO_PKG_VERSION"))),
        Command::Check => check(stdout, &args),
        Command::Mcp => mcp(stdout, &args),
        Command::Audit(ref audit) => {
            init_logging(&args);
            crate::audit_cli::run(stdout, audit)
        }
    }
}

fn text(stdout: StdoutHandle, s: &str) -> ExitCode {
    match stdout.into_text().write_all(s.as_bytes()) {
        Ok(()) => ExitCode::SUCCESS,
        Err(_) => ExitCode::from(EXIT_FATAL),
    }
}

fn init_logging(args: &Args) {
    // `SP_LOG` (error|warn|info|debug|trace) sets the level when no -v is given.
    let from_env = std::env::var("SP_LOG").ok().and_then(|v| match v.as_str() {
        "error" => Some(0),
        "warn" => Some(1),
        "info" => Some(2),
        "debug" => Some(3),
        "trace" => Some(4),
        _ => None,
    });
    let level = if args.verbose > 0 { 1 + usize::from(args.verbose) } else { from_env.unwrap_or(1) };
    // Only our own modules log; every line is scrubbed of secrets and escaped
    // (issue 8 points 3 and 4: `logging.rs`).
    crate::logging::init(level, args.quiet);
}

/// The policy file `args` and the environment point at, or, when there is none, the
/// places searched (joined for a message).
fn find_policy(args: &Args) -> Result<PathBuf, String> {
    match lookup(args.config.clone(), |k| std::env::var(k).ok(), |p| p.exists()) {
        Lookup::Explicit(p) | Lookup::Found(p) => Ok(p),
        Lookup::None(searched) => Err(searched.iter().map(|p| p.display().to_string()).collect::<Vec<_>>().join(", ")),
    }
}

/// Finds and loads the policy; when none is found, everything is denied.
fn load_policy(args: &Args) -> Result<Policy, String> {
    match find_policy(args) {
        Ok(p) => Policy::load(&p).map_err(|e| e.to_string()),
        Err(searched) => {
            log::warn!("no policy found (looked in {searched}); every action is denied");
            Ok(Policy::deny_all())
        }
    }
}

fn mcp(stdout: StdoutHandle, args: &Args) -> ExitCode {
    init_logging(args);
    let mut out = match stdout.into_protocol() {
        Ok(out) => out,
        Err(e) => {
            eprintln!("sp: {e}");
            return ExitCode::from(EXIT_FATAL);
        }
    };
    let policy = match load_policy(args) {
        Ok(p) => p,
        Err(e) => {
            eprintln!("sp: {e}");
            return ExitCode::from(EXIT_FATAL);
        }
    };
    // Issue 8 point 8: SIGTERM/SIGINT/SIGHUP stop the session between messages.
    let (stop, stdin) = match crate::signals::install() {
        Ok(s) => s,
        Err(e) => {
            eprintln!("sp: cannot install signal handlers: {e}");
            return ExitCode::from(EXIT_FATAL);
        }
    };
    if let Some(origin) = &policy.origin {
        log::info!("policy {} loaded", origin.display());
    }
    for h in policy.ssh.hosts.values().filter(|h| h.commands.is_none()) {
        log::warn!("ssh host {} has no command list: the agent may run ANY command there as {}", h.name, h.user);
    }
    let options = Options {
        max_line_bytes: args.max_line_bytes,
        close_on_refusal: args.close_on_refusal,
        panic_on_first_frame: std::env::var_os("SP_TEST_PANIC").is_some_and(|v| v == "request"),
        stop: stop.clone(),
        cancel_on_eof: true,
    };
    let mut executors = Executors::new();
    executors.http = crate::exec::http::HttpExecutor::new().with_roots(policy.http.ca_certs.as_ref());
    // Issue #5: no journal, no service. The start row proves the journal takes writes.
    let journal = crate::audit::Journal::for_policy(&policy.audit, |k| std::env::var(k).ok()).and_then(|mut j| {
        let origin = policy.origin.as_ref().map_or("(none: deny everything)".to_owned(), |p| {
            std::path::absolute(p).unwrap_or_else(|_| p.clone()).display().to_string()
        });
        let start = crate::audit::Row::new("start")
            .set("decision", policy.approval.mode.as_str())
            .set("target", origin)
            .set("reason", format!("sp {} pid {}", env!("CARGO_PKG_VERSION"), std::process::id()));
        j.write(start).map(|_| j)
    });
    let journal = match journal {
        Ok(j) => j,
        Err(e) => {
            eprintln!("sp: {e}; refusing to serve without it");
            return ExitCode::from(EXIT_FATAL);
        }
    };
    if let Some(p) = journal.path() {
        log::info!("audit journal {} (session {})", p.display(), journal.session());
    }
    let mut server = Server::new(&policy, executors, options).with_journal(journal);
    // Issue #10: stdin is read on its own thread (`control.rs`); a stop signal makes it
    // read as end of input (`signals::StoppableStdin`).
    let exit = server.serve(std::io::BufReader::with_capacity(64 * 1024, stdin), &mut out);
    let end = crate::audit::Row::new("end").set("decision", exit.name()).set("reason", server.stats.summary());
    server.journal.record(end);
    if !args.quiet {
        eprintln!("sp: session ended ({exit:?}): {}", server.stats.summary());
    }
    ExitCode::from(exit.code())
}

fn check(stdout: StdoutHandle, args: &Args) -> ExitCode {
    init_logging(args);
    let path = match find_policy(args) {
        Ok(p) => p,
        Err(searched) => {
            eprintln!("sp: no policy found (looked in {searched}); sp mcp would deny everything");
            return ExitCode::from(EXIT_FATAL);
        }
    };
    let policy = match Policy::load(&path) {
        Ok(p) => p,
        Err(e) => {
            eprintln!("sp: {e}");
            return ExitCode::from(EXIT_FATAL);
        }
    };
    let mut s = format!("{}: ok\n", path.display());
    s += &format!(
        "http: {} allow rule(s), timeout {}s, max response {} bytes, max request body {} bytes, max redirects {}{}\n",
        policy.http.allow.len(),
        policy.http.timeout.as_secs(),
        policy.http.max_response_bytes,
        policy.http.max_request_body_bytes,
        policy.http.max_redirects,
        if policy.http.https_only { ", https only" } else { "" }
    );
    if let Some(ca) = &policy.http.ca_certs {
        s += &format!("  TLS roots: {} certificate(s) from {} (instead of the built-in roots)\n", ca.der.len(), ca.path.display());
    }
    for r in &policy.http.allow {
        let hosts: Vec<&str> = r.hosts.iter().map(|h| h.text.as_str()).collect();
        let methods: Vec<&str> = r.methods.iter().map(|m| m.as_str()).collect();
        let paths: Vec<String> = r.paths.iter().map(|p| p.text()).collect();
        s += &format!("  allow[{}]: {} {} {}\n", r.index, methods.join(","), hosts.join(","), paths.join(","));
    }
    s += &format!("credentials: {}\n", policy.credentials.len());
    for c in policy.credentials.values() {
        let hosts: Vec<&str> = c.hosts.iter().map(|h| h.text.as_str()).collect();
        let paths: Vec<String> = c.paths.iter().map(|p| p.text()).collect();
        let methods = c.methods.as_ref().map_or("any method".to_owned(), |m| m.iter().map(|m| m.as_str()).collect::<Vec<_>>().join(","));
        s += &format!("  {}: {} -> {} {} ({})\n", c.name, c.source.describe(), hosts.join(","), paths.join(","), methods);
    }
    s += &crate::ssh::check_summary(&policy.ssh);
    s += &crate::audit::check_summary(&policy.audit, |k| std::env::var(k).ok());
    s += &crate::approve::check_summary(&policy);
    text(stdout, &s)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(args: &[&str]) -> Result<Args, String> {
        parse(args.iter().map(OsString::from))
    }

    #[test]
    fn parses() {
        let a = p(&["mcp", "--config", "/x.json", "-vv"]).unwrap();
        assert_eq!((a.command, a.config, a.verbose), (Command::Mcp, Some(PathBuf::from("/x.json")), 2));
        assert_eq!(p(&["--version"]).unwrap().command, Command::Version);
        assert_eq!(p(&["mcp", "-h"]).unwrap().command, Command::Help);
        assert_eq!(p(&["check", "-c", "/p"]).unwrap().command, Command::Check);
        let a = p(&["mcp", "--max-line-bytes", "2048", "--close-on-refusal"]).unwrap();
        assert_eq!((a.max_line_bytes, a.close_on_refusal), (2048, true));
    }

    #[test]
    fn global_flags_may_come_before_audit() {
        use crate::audit_cli::{AuditArgs, Sub};
        let verify = |anchor: Option<&str>| AuditArgs { sub: Sub::Verify { anchor: anchor.map(str::to_owned) }, file: PathBuf::from("F") };
        let a = p(&["-q", "audit", "verify", "F"]).unwrap();
        assert_eq!((a.command, a.quiet), (Command::Audit(verify(None)), true));
        let a = p(&["-vv", "audit", "verify", "F"]).unwrap();
        assert_eq!((a.command, a.verbose), (Command::Audit(verify(None)), 2));
        let hash = "AB".repeat(32);
        let a = p(&["audit", "verify", "F", "--anchor", &hash]).unwrap();
        assert_eq!(a.command, Command::Audit(verify(Some(&"ab".repeat(32)))), "the anchor is lowercased");
        // after `audit`, -q is audit's business (and not one of its flags)
        assert!(p(&["audit", "-q", "verify", "F"]).unwrap_err().contains("-q"));
    }

    #[test]
    fn usage_errors() {
        for (args, want) in [
            (&[][..], "a command is required"),
            (&["serve"], "unknown command \"serve\""),
            (&["mcp", "extra"], "unexpected argument \"extra\""),
            (&["mcp", "--config"], "missing argument for option '--config'"),
            (&["mcp", "--nope"], "invalid option '--nope'"),
            (&["mcp", "--max-line-bytes", "10"], "--max-line-bytes takes a number"),
            (&["mcp", "--max-line-bytes", "x"], "--max-line-bytes takes a number"),
            (&["check", "--close-on-refusal"], "--close-on-refusal only applies to sp mcp"),
            (&["mcp", "audit"], "unexpected argument \"audit\""),
            (&["-c", "/p", "audit", "verify", "F"], "--config does not apply to sp audit"),
            (&["--close-on-refusal", "audit", "verify", "F"], "--close-on-refusal only applies to sp mcp"),
            (&["-q", "audit", "verify"], "sp audit verify needs a journal FILE"),
            (&["-q", "audit", "verify", "F", "--anchor", "xyz"], "--anchor takes a row's hash"),
        ] {
            let got = p(args).map(|a| format!("{a:?}")).unwrap_err();
            assert!(got.contains(want), "{args:?}: {got}");
        }
    }
}
