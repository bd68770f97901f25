//! Command line: `sp mcp`, `sp check`, `sp init`, `sp audit`, `sp approve`, `sp upstream`,
//! `sp explain`, `sp test` ([`explain`]),
//! `--help` (each command's own after it: `sp mcp --help`), `--version`.
//!
//! Three steps, as in ripgrep (`LowArgs -> HiArgs`):
//! 1. [`args::parse`]: argv to [`Args`], pure and tested (no system call);
//! 2. [`Env::read`] and [`McpConfig::from_args`]: the one place `sp` reads its settings
//!    from the process environment (a credential's `env` source is read at use, in
//!    `secret.rs`), and the step that reads the files the arguments and the environment
//!    point at (the policy);
//! 3. [`run`]: logging, the journal, the server, `sp check`'s summary, or `sp audit`
//!    ([`audit`]), or `sp approve` ([`approve`]).
//!
//! Usage errors exit 2 with one line on stderr. Exit codes are listed in `sp(1)`.

pub(crate) mod approve;
pub(crate) mod args;
pub(crate) mod audit;
pub(crate) mod explain;
pub(crate) mod limits;
pub(crate) mod oauth;
pub(crate) mod upstream;
mod check;
pub(crate) mod init;

use std::collections::BTreeMap;
use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

use crate::mcp::out::StdoutHandle;
use crate::policy::{lookup, Lookup, Policy};
use crate::server::{Options, Server};

pub(crate) use args::{parse, Args, Command};

pub const EXIT_FATAL: u8 = 1;
pub(crate) const EXIT_USAGE: u8 = 2;

/// The environment variables `sp` reads, read once ([`Env::read`]); everything else
/// gets them from here, so the rest of the program (and every test) can pass its own.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Env(BTreeMap<&'static str, String>);

impl Env {
    /// Every variable `sp` looks at: policy lookup (`SP_CONFIG`, `XDG_CONFIG_HOME`,
    /// `HOME`), the journal's default location (`XDG_STATE_HOME`, `HOME`), the log level
    /// (`SP_LOG`) and the test hook `SP_TEST_PANIC`.
    pub(crate) const NAMES: [&'static str; 6] = ["SP_CONFIG", "XDG_CONFIG_HOME", "HOME", "XDG_STATE_HOME", "SP_LOG", "SP_TEST_PANIC"];

    /// The process environment (the one place `sp` reads it).
    pub(crate) fn read() -> Env {
        Env(Env::NAMES.iter().filter_map(|&k| Some((k, crate::sys::env_var(k)?.into_string().ok()?))).collect())
    }

    /// An environment given explicitly (tests).
    #[cfg(test)]
    fn from_pairs(pairs: &[(&'static str, &str)]) -> Env {
        Env(pairs.iter().map(|&(k, v)| (k, v.to_owned())).collect())
    }

    pub(crate) fn get(&self, name: &str) -> Option<String> {
        self.0.get(name).cloned()
    }
}

/// What `sp mcp` and `sp check` work with once the arguments' and the environment's
/// pointers are followed (ripgrep's `HiArgs`).
#[derive(Debug)]
pub(crate) struct McpConfig {
    /// The policy file found, or the places searched when there is none.
    pub policy_file: Result<PathBuf, Vec<PathBuf>>,
    /// The policy loaded from it, or the deny-everything policy.
    pub policy: Policy,
}

/// Why [`McpConfig::from_args`] failed: the policy file named or found does not load.
#[derive(Debug)]
pub(crate) struct ConfigError(pub crate::policy::PolicyError);

impl std::fmt::Display for ConfigError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.0.fmt(f)
    }
}

impl std::error::Error for ConfigError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        Some(&self.0)
    }
}

impl McpConfig {
    /// Finds the policy (`--config`, then the environment, then the default places) and
    /// loads it; none found means deny everything. The only step that reads files.
    pub(crate) fn from_args(args: &Args, env: &Env) -> Result<McpConfig, ConfigError> {
        let policy_file = match lookup(args.config.clone(), |k| env.get(k), |p| p.exists()) {
            Lookup::Explicit(p) | Lookup::Found(p) => Ok(p),
            Lookup::None(searched) => Err(searched),
        };
        let policy = match &policy_file {
            Ok(p) => Policy::load(p).map_err(ConfigError)?,
            Err(_) => Policy::deny_all(),
        };
        Ok(McpConfig { policy_file, policy })
    }

    /// The places searched, for messages.
    fn searched(&self) -> String {
        match &self.policy_file {
            Ok(_) => String::new(),
            Err(places) => places.iter().map(|p| p.display().to_string()).collect::<Vec<_>>().join(", "),
        }
    }
}

/// Entry point after stdout has been taken over.
pub fn run(stdout: StdoutHandle) -> ExitCode {
    // Before any secret is read (issue 31): no process of the same user may read this
    // one's memory, environment or descriptors through /proc, or attach to it.
    if let Err(e) = crate::sys::make_undumpable() {
        eprintln!("sp: warning: cannot make the process non-dumpable: {e}");
    }
    // Children start through sp re-executed as their launcher (sys/confine.rs).
    let me = std::path::Path::new("/proc/self/exe");
    if me.exists() {
        crate::sys::set_launcher(me.to_path_buf());
    }
    let env = Env::read();
    if env.get("SP_TEST_PANIC").is_some_and(|v| v == "startup") {
        panic!("SP_TEST_PANIC=startup: panicking at startup as asked");
    }
    let argv: Vec<std::ffi::OsString> = std::env::args_os().skip(1).collect();
    let args = match parse(argv.iter().cloned()) {
        Ok(a) => a,
        Err(e) => {
            eprintln!("sp: {e}");
            // `sp explain`'s and `sp test`'s 2 is "approve": their usage errors are 3.
            return ExitCode::from(if args::is_explain(&argv) { explain::EXIT_ERROR } else { EXIT_USAGE });
        }
    };
    match args.command {
        Command::Help(topic) => text(stdout, topic.text()),
        // The binary itself (the link /proc/self/exe points at), to find sp-approve beside it.
        Command::Init(ref file) => match init::run(file.as_deref(), &env, std::env::current_exe().ok().as_deref()) {
            Ok(said) => text(stdout, &said),
            Err(e) => {
                eprintln!("{e}");
                ExitCode::from(EXIT_FATAL)
            }
        },
        Command::Version => text(stdout, &format!("sp {}\n", env!("CARGO_PKG_VERSION"))),
        Command::Check => check(stdout, &args, &env),
        Command::Mcp => mcp(stdout, &args, &env),
        Command::Audit(ref audit) => {
            init_logging(&args, &env);
            match audit::run(stdout, audit) {
                Ok(()) => ExitCode::SUCCESS,
                Err(audit::Failed) => ExitCode::from(EXIT_FATAL),
            }
        }
        Command::Approve(ref approve) => {
            init_logging(&args, &env);
            match approve::run(stdout, approve, args.config.clone(), &env) {
                Ok(()) => ExitCode::SUCCESS,
                Err(audit::Failed) => ExitCode::from(EXIT_FATAL),
            }
        }
        Command::Explain(args::ExplainArgs { sub: args::ExplainSub::Help, .. }) => text(stdout, args::EXPLAIN_USAGE),
        Command::Explain(ref ex) => {
            init_logging(&args, &env);
            match McpConfig::from_args(&args, &env) {
                Ok(config) => {
                    if config.policy_file.is_err() {
                        eprintln!("sp: no policy found (looked in {}); explaining the deny-everything policy", config.searched());
                    }
                    ExitCode::from(explain::run(stdout, &ex.sub, &config.policy, &env))
                }
                Err(e) => {
                    eprintln!("sp: {e}");
                    ExitCode::from(explain::EXIT_ERROR)
                }
            }
        }
        Command::OAuth(ref o) => {
            init_logging(&args, &env);
            match oauth::run(stdout, o, args.config.clone(), &env) {
                Ok(()) => ExitCode::SUCCESS,
                Err(audit::Failed) => ExitCode::from(EXIT_FATAL),
            }
        }
        Command::Upstream(ref up) => {
            init_logging(&args, &env);
            match upstream::run(stdout, up, args.config.clone(), &env) {
                Ok(upstream::Verdict::Same) => ExitCode::SUCCESS,
                Ok(upstream::Verdict::Differs) | Err(audit::Failed) => ExitCode::from(EXIT_FATAL),
            }
        }
    }
}

fn text(stdout: StdoutHandle, s: &str) -> ExitCode {
    match stdout.into_text().write_all(s.as_bytes()) {
        Ok(()) => ExitCode::SUCCESS,
        Err(_) => ExitCode::from(EXIT_FATAL),
    }
}

/// The log level: `-v` given, else `SP_LOG` (error|warn|info|debug|trace), else warn.
fn log_level(args: &Args, sp_log: Option<&str>) -> usize {
    let from_env = sp_log.and_then(|v| match v {
        "error" => Some(0),
        "warn" => Some(1),
        "info" => Some(2),
        "debug" => Some(3),
        "trace" => Some(4),
        _ => None,
    });
    if args.verbose > 0 { 1 + usize::from(args.verbose) } else { from_env.unwrap_or(1) }
}

fn init_logging(args: &Args, env: &Env) {
    // Only our own modules log; every line is scrubbed of secrets and escaped
    // (`logging.rs`).
    crate::logging::init(log_level(args, env.get("SP_LOG").as_deref()), args.quiet);
}

fn mcp(stdout: StdoutHandle, args: &Args, env: &Env) -> ExitCode {
    init_logging(args, env);
    let mut out = match stdout.into_protocol() {
        Ok(out) => out,
        Err(e) => {
            eprintln!("sp: {e}");
            return ExitCode::from(EXIT_FATAL);
        }
    };
    let config = match McpConfig::from_args(args, env) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("sp: {e}");
            return ExitCode::from(EXIT_FATAL);
        }
    };
    if config.policy_file.is_err() {
        log::warn!("no policy found (looked in {}); every action is denied", config.searched());
    }
    let policy = config.policy;
    // SIGTERM/SIGINT stop the session between messages; SIGHUP reloads the policy.
    let (stop, stdin, nudge, reload) = match crate::signals::install() {
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
    for w in warnings(&policy) {
        log::warn!("{w}");
    }
    // A static secret too short to be redacted stops sp before it serves.
    let secrets = crate::gate::vault::check_static(&policy, &crate::sys::env_var);
    secrets.warnings.iter().for_each(|w| log::warn!("{w}"));
    if let Some(e) = secrets.refused.first() {
        eprintln!("sp: {e}; refusing to serve");
        return ExitCode::from(EXIT_FATAL);
    }
    let options = Options {
        max_line_bytes: args.max_line_bytes,
        close_on_refusal: args.close_on_refusal,
        panic_on_first_frame: env.get("SP_TEST_PANIC").is_some_and(|v| v == "request"),
        stop: stop.clone(),
        cancel_on_eof: true,
        nudge: Some(nudge),
    };
    let executors = crate::tools::Executors {
        http: crate::tools::http::exec::HttpExecutor::new().with_roots(policy.http.ca_certs.as_ref()),
        // Nothing starts now: each upstream on the first tools/list or call that needs it.
        upstream: (!policy.upstreams.is_empty())
            .then(|| crate::tools::upstream::Upstreams::with_pins(&policy, policy.origin.as_deref().map(crate::tools::upstream::pins::beside))),
        ..Default::default()
    };
    // No journal, no service. The start row proves the journal takes writes.
    let journal = crate::audit::Journal::for_policy(&policy.audit, |k| env.get(k)).and_then(|mut j| {
        let origin = policy
            .origin
            .as_ref()
            .map_or("(none: deny everything)".to_owned(), |p| std::path::absolute(p).unwrap_or_else(|_| p.clone()).display().to_string());
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
    let limiter = match limits::limiter(&policy.limits, |k| env.get(k)) {
        Ok(l) => l,
        Err(e) => {
            eprintln!("sp: {e}; refusing to serve");
            return ExitCode::from(EXIT_FATAL);
        }
    };
    // A reload loads and checks the file as above (`server/reload.rs`).
    let load = |path: &std::path::Path| {
        use crate::server::reload::{Loaded, ReloadError};
        let policy = crate::policy::Policy::load(path).map_err(ReloadError::Policy)?;
        let secrets = crate::gate::vault::check_static(&policy, &crate::sys::env_var);
        secrets.warnings.iter().chain(&warnings(&policy)).for_each(|w| log::warn!("{w}"));
        if let Some(e) = secrets.refused.into_iter().next() {
            return Err(ReloadError::Secret(e));
        }
        let limiter = limits::limiter(&policy.limits, |k| env.get(k)).map_err(ReloadError::Limits)?;
        let grants = grants_store(&policy, env);
        Ok(Loaded { policy, limiter, grants })
    };
    let reloading = crate::server::reload::Reloading::new(reload, Box::new(load));
    let mut server = Server::new(&policy, executors, options)
        .with_journal(journal)
        .with_grants(grants_store(&policy, env))
        .with_limiter(limiter)
        .with_secrets_preloaded()
        .with_reload(reloading);
    // Stdin is read by the loop, and while a call runs by the session's control thread
    // (`mcp/control`); a stop signal makes it read as end of input (`signals::StoppableStdin`).
    let exit = server.serve(std::io::BufReader::with_capacity(64 * 1024, stdin), &mut out);
    let end = crate::audit::Row::new("end").set("decision", exit.name()).set("reason", server.stats.summary());
    server.journal.record(end);
    if !args.quiet {
        eprintln!("sp: session ended ({exit:?}): {}", server.stats.summary());
    }
    ExitCode::from(exit.code())
}

/// The approval grants file, when the policy allows a grant (`approve/grants.rs`); a
/// file without a location is logged and no grant is made or used.
fn grants_store(policy: &crate::policy::Policy, env: &Env) -> Option<crate::approve::grants::Grants> {
    let limits = &policy.approval.grants;
    if limits.exact_max_s.is_none() && limits.session_max_s.is_none() {
        return None;
    }
    let store = crate::approve::grants::location(limits, |k| env.get(k)).and_then(|p| crate::approve::grants::Grants::open(&p, limits));
    match store {
        Ok(s) => {
            log::info!("approval grants in {}", s.path().display());
            // The key is in memory before any upstream starts (`approve/grants/mac.rs`);
            // one that cannot be read or made now is tried again when a grant is needed.
            if let Err(e) = s.prepare_key() {
                log::warn!("approval grants: {e}");
            }
            Some(s)
        }
        Err(e) => {
            log::warn!("approval grants are off: {e}");
            None
        }
    }
}

fn check(stdout: StdoutHandle, args: &Args, env: &Env) -> ExitCode {
    init_logging(args, env);
    let config = match McpConfig::from_args(args, env) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("sp: {e}");
            return ExitCode::from(EXIT_FATAL);
        }
    };
    let path = match &config.policy_file {
        Ok(p) => p,
        Err(_) => {
            eprintln!("sp: no policy found (looked in {}); sp mcp would deny everything", config.searched());
            return ExitCode::from(EXIT_FATAL);
        }
    };
    let policy = &config.policy;
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
        match &c.inject {
            crate::policy::Injection::AwsSigV4(a) => s += &format!("    inject: {}\n", a.describe()),
            crate::policy::Injection::OAuth2(o) => s += &format!("    inject: {}\n", o.describe()),
            _ => {}
        }
    }
    // Static secrets are read (not kept) and held to their minimum length.
    let secrets = crate::gate::vault::check_static(policy, &crate::sys::env_var);
    if !secrets.refused.is_empty() {
        secrets.refused.iter().for_each(|e| eprintln!("sp: {e}"));
        return ExitCode::from(EXIT_FATAL);
    }
    s += &crate::tools::ssh::check_summary(&policy.ssh);
    // `--probe` starts each upstream, lists it, and stops it; a failure prints the
    // summary, then exits 1 like any check that fails.
    let mut probe_failed = false;
    let (mut upstream_errors, mut upstream_warnings) = (Vec::new(), Vec::new());
    if !policy.upstreams.is_empty() || args.probe {
        let summary = crate::tools::upstream::check_summary(policy, args.probe);
        probe_failed = summary.probe_failed;
        upstream_errors = summary.errors;
        upstream_warnings = summary.warnings;
        s += &summary.text;
    }
    s += &crate::audit::check_summary(&policy.audit, |k| env.get(k));
    s += &crate::approve::check_summary(policy);
    s += &crate::approve::grants::check_summary(&policy.approval.grants, |k| env.get(k));
    for w in warnings(policy).iter().chain(&secrets.warnings) {
        eprintln!("sp: warning: {w}");
    }
    // What would fail on first use (issue 31): errors make the check fail, with no
    // summary (it would say ok); warnings are printed and the check still passes.
    let findings = check::findings(policy, &crate::sys::env_var);
    for f in &findings {
        match f.level {
            check::Level::Warning => eprintln!("sp: warning: {f}"),
            check::Level::Error => eprintln!("sp: error: {f}"),
        }
    }
    let errors = findings.iter().filter(|f| f.level == check::Level::Error).count();
    if errors > 0 {
        eprintln!("sp: {}: {errors} error(s): sp mcp would fail on first use", crate::escape::escape(&path.display().to_string()));
        return ExitCode::from(EXIT_FATAL);
    }
    // Policy text (paths, variable names, host patterns, argv) is shown escaped, like
    // everything else `sp` prints from outside (`escape.rs`).
    let shown: String = s.lines().map(|l| format!("{}\n", crate::escape::escape(l))).collect();
    let printed = text(stdout, &shown);
    for w in &upstream_warnings {
        eprintln!("sp: warning: {}", crate::escape::escape(w));
    }
    for e in &upstream_errors {
        eprintln!("sp: error: {}", crate::escape::escape(e));
    }
    if !upstream_errors.is_empty() {
        return ExitCode::from(EXIT_FATAL);
    }
    if probe_failed {
        eprintln!("sp: an upstream failed its probe");
        return ExitCode::from(EXIT_FATAL);
    }
    printed
}

/// Host names of cloud metadata services, which resolve to a metadata or link-local
/// address there (GCP: `metadata.google.internal`, `metadata.goog`, `metadata`; AWS:
/// `instance-data`, `instance-data.ec2.internal`).
const METADATA_NAMES: [&str; 5] = ["metadata.google.internal", "metadata.goog", "metadata", "instance-data", "instance-data.ec2.internal"];

/// Addresses in the policy that `sp` always refuses at run time (`http/dest.rs`: link-local,
/// cloud metadata, unspecified, multicast, broadcast, reserved) or that are metadata
/// service names: `http.allow` hosts, credential hosts, OAuth2 token URLs and SSH
/// addresses. `sp check` prints them, `sp mcp` logs them; neither refuses the policy,
/// since the run-time check stays the one that decides. Escaped when shown.
pub(crate) fn warnings(policy: &Policy) -> Vec<String> {
    use crate::net::dest::{classify, Class};
    let judge = |ip: Option<std::net::IpAddr>, name: Option<&str>| -> Option<String> {
        if let Some(v) = ip.map(classify).filter(|v| matches!(v.class, Class::Blocked(_))) {
            return Some(v.to_string());
        }
        name.filter(|n| METADATA_NAMES.contains(n)).map(|_| "a cloud metadata service name".to_owned())
    };
    let never = "sp never connects there (SP_BLOCKED at run time)";
    let mut out = Vec::new();
    let mut patterns = |field: String, hosts: &[crate::policy::HostPattern], what: &str| {
        for (j, h) in hosts.iter().enumerate() {
            if let Some(class) = judge(h.ip(), h.exact_host()) {
                out.push(format!("{field}[{j}]: {} is {class}: {never}, so {what}", h.text));
            }
        }
    };
    for r in &policy.http.allow {
        patterns(format!("http.allow[{}].hosts", r.index), &r.hosts, "this host of the rule is never reached");
    }
    for c in policy.credentials.values() {
        patterns(format!("credentials.{}.hosts", c.name), &c.hosts, "the credential is never sent there");
    }
    for c in policy.credentials.values() {
        if let crate::policy::Injection::OAuth2(o) = &c.inject {
            let (ip, name) = match o.url().host() {
                Some(url::Host::Ipv4(a)) => (Some(a.into()), None),
                Some(url::Host::Ipv6(a)) => (Some(a.into()), None),
                Some(url::Host::Domain(d)) => (None, Some(d)),
                None => (None, None),
            };
            if let Some(class) = judge(ip, name) {
                let host = o.url().host_str().unwrap_or_default();
                out.push(format!("credentials.{}.inject.oauth2.token_url: {host} is {class}: {never}, so no token is ever fetched", c.name));
            }
        }
    }
    for h in policy.ssh.hosts.values() {
        if let Some(class) = judge(h.address.parse().ok(), Some(&h.address)) {
            out.push(format!(
                "ssh.hosts.{}.address: {} is {class}: check that this is the host you mean (cloud metadata services answer there)",
                h.name, h.address
            ));
        }
    }
    out.into_iter().map(|w| crate::escape::escape(&w).into_owned()).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(a: &[&str]) -> Args {
        parse(a.iter().map(std::ffi::OsString::from)).unwrap()
    }

    #[test]
    fn log_level_comes_from_v_then_sp_log_then_warn() {
        assert_eq!(log_level(&args(&["mcp", "-vv"]), Some("error")), 3, "-v wins over SP_LOG");
        assert_eq!(log_level(&args(&["mcp"]), Some("debug")), 3);
        assert_eq!(log_level(&args(&["mcp"]), Some("loud")), 1, "an unknown SP_LOG is warn");
        assert_eq!(log_level(&args(&["mcp"]), None), 1);
    }

    #[test]
    fn env_keeps_only_what_it_was_given() {
        let env = Env::from_pairs(&[("HOME", "/h")]);
        assert_eq!((env.get("HOME").as_deref(), env.get("SP_CONFIG")), (Some("/h"), None));
    }

    #[test]
    fn a_named_policy_that_does_not_load_is_an_error_naming_the_file() {
        let e = McpConfig::from_args(&args(&["mcp", "-c", "/nonexistent/sp/policy.json"]), &Env::default()).unwrap_err();
        assert_eq!(e.0.file, PathBuf::from("/nonexistent/sp/policy.json"));
        assert!(e.to_string().contains("/nonexistent/sp/policy.json"), "{e}");
        assert!(std::error::Error::source(&e).is_some(), "the policy error is the source");
    }

    #[test]
    fn no_policy_found_is_deny_everything_with_the_places_searched() {
        let env = Env::from_pairs(&[("XDG_CONFIG_HOME", "/nonexistent/sp-xdg")]);
        let c = McpConfig::from_args(&args(&["mcp"]), &env).unwrap();
        assert_eq!(c.policy, Policy::deny_all());
        assert!(c.searched().starts_with("/nonexistent/sp-xdg/sallyport/policy.json"), "{}", c.searched());
    }
}
