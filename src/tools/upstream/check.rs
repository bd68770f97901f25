//! `sp_inventory`'s `upstreams` ([`inventory`]) and `sp check`'s lines about them: what each is (a program or a URL, never its
//! environment's values or the URL's query and credentials), its filter, its pinned
//! arguments; with `--probe`, each is started, listed (what it would expose), and stopped.

use std::fmt::Write as _;

use serde_json::{json, Value};

use super::Upstreams;
use crate::gate::vault::Vault;
use crate::policy::upstreams::{Glob, UpstreamTransport};
use crate::policy::Policy;

/// The `upstreams:` section of `sp check` ([`check_summary`]).
pub(crate) struct Summary {
    pub text: String,
    /// A probe failed (the text says which, and why): `sp check` exits 1.
    pub probe_failed: bool,
    /// An upstream that cannot start as its policy says (its confinement, its user):
    /// each names the field and the fix; `sp check` prints them and exits 1.
    pub errors: Vec<String>,
    /// What would likely keep it from working (a file its sandbox does not let it read):
    /// printed, not fatal.
    pub warnings: Vec<String>,
}

/// Whether `path` lies beneath one of `under` (whole components).
fn beneath(path: &std::path::Path, under: &[std::path::PathBuf]) -> bool {
    under.iter().any(|u| path.starts_with(u))
}

/// The files a command upstream names that its sandbox would not let it read: an
/// absolute path among its arguments (a script, a data directory) and the interpreter
/// of its program's `#!` line, each outside the system's directories, `cwd`, `read` and
/// `write`. The program itself is always readable (the launcher adds it).
fn unreadable(command: &[String], cwd: Option<&std::path::Path>, b: &crate::policy::upstreams::Sandbox) -> Vec<(String, std::path::PathBuf)> {
    let mut granted: Vec<std::path::PathBuf> = crate::sys::DEFAULT_READ.iter().chain(crate::sys::DEFAULT_WRITE).map(std::path::PathBuf::from).collect();
    granted.extend(b.read.iter().chain(&b.write).cloned());
    granted.extend(cwd.map(std::path::Path::to_path_buf));
    let mut out = Vec::new();
    let program = crate::sys::resolve_program(&command[0], crate::sys::env_var("PATH").as_deref()).ok();
    if let Some(p) = &program {
        granted.push(p.clone());
        // A script's interpreter (a venv's python, `/usr/bin/env` is under /usr).
        let head = std::fs::File::open(p).ok().and_then(|f| {
            let mut line = String::new();
            std::io::BufRead::read_line(&mut std::io::BufReader::new(std::io::Read::take(f, 256)), &mut line).ok()?;
            Some(line)
        });
        if let Some(interp) = head.as_deref().and_then(|l| l.strip_prefix("#!")).and_then(|l| l.split_whitespace().next()) {
            let interp = std::path::PathBuf::from(interp);
            let real = std::fs::canonicalize(&interp).unwrap_or_else(|_| interp.clone());
            if !beneath(&interp, &granted) || !beneath(&real, &granted) {
                out.push(("command[0]'s interpreter (#!)".to_owned(), real));
            }
        }
    }
    for (i, arg) in command.iter().enumerate().skip(1) {
        let path = std::path::Path::new(arg);
        if path.is_absolute() && path.exists() && !beneath(path, &granted) {
            out.push((format!("command[{i}]"), path.to_path_buf()));
        }
    }
    out
}

/// The `sandbox` line of a command upstream, and what would stop it from starting:
/// a kernel that cannot confine as asked, a path that does not exist, a user that is
/// not there or that `sp` (not root) cannot become.
fn sandbox_lines(u: &crate::policy::upstreams::Upstream, errors: &mut Vec<String>, warnings: &mut Vec<String>) -> String {
    let UpstreamTransport::Stdio { command, cwd, sandbox, user, .. } = &u.transport else { return String::new() };
    let (name, sandbox, user) = (u.name.as_str(), sandbox.as_ref(), user.as_deref());
    let field = format!("upstreams.{name}");
    let mut s = String::new();
    match sandbox {
        None => s += "    sandbox: none (not confined: it can read what sp's user can)\n",
        Some(b) => {
            let paths = |p: &[std::path::PathBuf]| or_none(p.iter().map(|p| p.display().to_string()).collect::<Vec<_>>().join(","));
            let _ = writeln!(
                s,
                "    sandbox: read {} write {} network {} memory {} MiB, {} processes, {} files",
                paths(&b.read),
                paths(&b.write),
                if b.network { "tcp" } else { "none" },
                b.memory_mb,
                b.processes,
                b.files
            );
            if let Err(e) = crate::sys::probe(b.network) {
                errors.push(format!("{field}.sandbox: {e}; a kernel with Landlock is needed, or \"sandbox\": \"none\" to run it unconfined"));
            }
            for (what, path) in unreadable(command, cwd.as_deref(), b) {
                warnings.push(format!(
                    "{field}.{what}: {} is outside the upstream's sandbox, which will not let it read it: add it (or its directory) to {field}.sandbox.read",
                    path.display()
                ));
            }
            for (k, list) in [("read", &b.read), ("write", &b.write)] {
                for (i, p) in list.iter().enumerate() {
                    if let Err(e) = std::fs::metadata(p) {
                        errors.push(format!("{field}.sandbox.{k}[{i}]: {}: {} (the upstream would not start)", p.display(), crate::sys::io_reason(&e)));
                    }
                }
            }
        }
    }
    if let Some(u) = user {
        let _ = writeln!(s, "    user: {u}");
        if let Err(e) = crate::sys::lookup_user(u) {
            errors.push(format!("{field}.user: {e}"));
        } else if crate::sys::euid() != 0 {
            errors.push(format!("{field}.user: running an upstream as {u:?} needs sp to run as root (leave \"user\" out to run it as sp's user)"));
        }
    }
    s
}

/// The `upstreams:` section of `sp check`; `probe` starts each upstream.
pub(crate) fn check_summary(policy: &Policy, probe: bool) -> Summary {
    let globs = |g: &[Glob]| g.iter().map(Glob::as_str).collect::<Vec<_>>().join(",");
    let mut s = format!("upstreams: {}\n", policy.upstreams.len());
    let (mut errors, mut warnings) = (Vec::new(), Vec::new());
    for u in policy.upstreams.values() {
        let what = match &u.transport {
            UpstreamTransport::Stdio { command, env, .. } => {
                let names: Vec<&str> = env.keys().map(String::as_str).collect();
                format!("stdio {} (env: {})", command.first().map_or("", String::as_str), if names.is_empty() { "none".into() } else { names.join(",") })
            }
            UpstreamTransport::Http { url, credential, oauth } => {
                let port = url.port().map(|p| format!(":{p}")).unwrap_or_default();
                let mut cred = credential.as_deref().map(|c| format!(", credential {c}")).unwrap_or_default();
                if let Some(o) = oauth {
                    let client = o.client_id.as_deref().unwrap_or("registered at login");
                    cred = format!(", oauth client {client} (sp oauth login {})", u.name);
                }
                format!("{}://{}{port}{}{cred}", url.scheme(), url.host_str().unwrap_or_default(), url.path())
            }
        };
        let _ = writeln!(s, "  {}: {what}", u.name);
        let _ = writeln!(s, "    tools: allow {} deny {} approve {}", globs(&u.tools.allow), or_none(globs(&u.tools.deny)), or_none(globs(&u.tools.approve)));
        for (tool, args) in &u.arguments {
            let pins: Vec<String> = args.iter().map(|(a, g)| format!("{a}={}", globs(g))).collect();
            let _ = writeln!(s, "    arguments of {tool}: {}", pins.join(" "));
        }
        let _ = writeln!(s, "    timeout {}s, start-up {}s, max output {} bytes", u.timeout.as_secs(), u.startup_timeout.as_secs(), u.max_output_bytes);
        s += &sandbox_lines(u, &mut errors, &mut warnings);
    }
    if !probe {
        return Summary { text: s, probe_failed: false, errors, warnings };
    }
    let mut ups = Upstreams::new(policy);
    let mut vault = Vault::for_policy(policy);
    let mut failed = Vec::new();
    let names: Vec<String> = ups.names().map(str::to_owned).collect();
    for name in names {
        match ups.list(&name, &mut vault) {
            Ok(tools) => {
                let exposed: Vec<&str> = tools.iter().map(|t| t.exposed.as_str()).collect();
                let approve = tools.iter().filter(|t| t.approve).count();
                let _ = writeln!(s, "  probe {name}: {} tool(s) exposed ({approve} wait for approval): {}", exposed.len(), or_none(exposed.join(" ")));
            }
            Err(e) => {
                let _ = writeln!(s, "  probe {name}: FAILED: {e}");
                failed.push(name);
            }
        }
    }
    ups.shutdown();
    Summary { text: s, probe_failed: !failed.is_empty(), errors, warnings }
}

fn or_none(s: String) -> String {
    if s.is_empty() { "none".into() } else { s }
}

/// `sp_inventory`'s `upstreams`: each upstream's name, transport (`stdio`, or `http` and
/// its host), and the tools it exposes (listed now if need be) with their approval
/// flag, or the listing's error. Never its environment, command line or URL beyond the
/// host. The upstream's tool names are outside text: the caller scrubs the whole.
pub(crate) fn inventory(policy: &Policy, mut ups: Option<&mut Upstreams>, vault: &mut Vault) -> Value {
    let mut out = Vec::new();
    for u in policy.upstreams.values() {
        let mut v = json!({"name": u.name});
        match &u.transport {
            UpstreamTransport::Stdio { .. } => v["transport"] = json!("stdio"),
            UpstreamTransport::Http { url, .. } => {
                v["transport"] = json!("http");
                v["host"] = json!(url.host_str().unwrap_or_default());
            }
        }
        match ups.as_deref_mut().map(|ups| ups.list(&u.name, vault)) {
            Some(Ok(tools)) => {
                v["tools"] = tools
                    .iter()
                    .map(|t| {
                        let mut tool = json!({"name": t.exposed, "approve": t.approve});
                        // The policy's argument pins (issue 32): what the agent may pass.
                        if let Some(pins) = u.arguments.get(&t.tool) {
                            let pins: serde_json::Map<String, Value> =
                                pins.iter().map(|(arg, globs)| (arg.clone(), globs.iter().map(|g| Value::String(g.as_str().to_owned())).collect())).collect();
                            tool["pins"] = Value::Object(pins);
                        }
                        tool
                    })
                    .collect()
            }
            Some(Err(e)) => v["error"] = json!(e.to_string()),
            None => v["error"] = json!("not available in this session"),
        }
        out.push(v);
    }
    Value::Array(out)
}
