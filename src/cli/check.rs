//! `sp check`'s first-use findings (issue 31): what a policy that loads would still get
//! wrong on the first call that needs it, found now, each naming the field and the fix.
//!
//! ```text
//!  policy (loaded) ──> secrets: file, systemd, env sources read (not kept)
//!                  ──> approval.command[0]: a program sp may run (sys::check_program), executable
//!                  ──> paths: an exact path ending in `/` (`"/v1/"` matches nothing under it)
//!                  ──> credential hosts: each reached by some http.allow rule, as spelled
//!                  ──> Vec<Finding>: errors (sp check exits 1, no summary) and warnings
//! ```
//!
//! An error is what fails every first use whatever the environment: a secret file that
//! is missing, too open, not owned, empty; an approver that is missing, not a regular
//! file, writable by others or not executable; a credential (not given to an upstream)
//! whose hosts no allow rule reaches. A warning is what may be meant or may differ where
//! `sp mcp` runs: an `env` variable unset in `sp check`'s environment (MCP clients pass
//! their servers a filtered one), `$CREDENTIALS_DIRECTORY` unset outside systemd, an exact
//! path ending in `/`, one credential host of several that no allow rule reaches.

use std::ffi::OsString;
use std::fmt;
use std::path::Path;

use crate::cred::source::SecretError;
use crate::policy::upstreams::{EnvValue, UpstreamTransport};
use crate::policy::{HostPattern, PathPattern, Policy, SecretSource};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Level {
    /// The policy does not work on first use: `sp check` exits 1.
    Error,
    /// Printed; `sp check` still answers ok.
    Warning,
}

/// One finding: the field, what is wrong, and the fix.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Finding {
    pub level: Level,
    pub field: String,
    pub problem: String,
    pub fix: String,
}

/// `FIELD: PROBLEM; FIX`, escaped (policy text may hold control characters).
impl fmt::Display for Finding {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let text = format!("{}: {}; {}", self.field, self.problem, self.fix);
        f.write_str(&crate::escape::escape(&text))
    }
}

fn finding(level: Level, field: impl Into<String>, problem: impl Into<String>, fix: impl Into<String>) -> Finding {
    Finding { level, field: field.into(), problem: problem.into(), fix: fix.into() }
}

/// Every finding of `policy`, in policy order: credentials (sources, hosts, paths),
/// `http.allow` paths, the approver. `env` is the process environment (`env` and
/// `systemd` sources).
pub(crate) fn findings(policy: &Policy, env: &dyn Fn(&str) -> Option<OsString>) -> Vec<Finding> {
    let mut out = Vec::new();
    let upstream_credentials = given_to_upstreams(policy);
    for c in policy.credentials.values() {
        if let Some(f) = secret(&c.name, &c.source, matches!(c.inject, crate::policy::Injection::AwsSigV4(_)), env) {
            out.push(f);
        }
        if !upstream_credentials.contains(&c.name.as_str()) {
            out.extend(unreached_hosts(policy, &c.name, &c.hosts));
        }
        out.extend(exact_dirs(&format!("credentials.{}.paths", c.name), &c.paths));
    }
    for r in &policy.http.allow {
        out.extend(exact_dirs(&format!("http.allow[{}].paths", r.index), &r.paths));
    }
    if let Some(argv) = &policy.approval.command {
        out.extend(approver(Path::new(&argv[0])));
    }
    out.extend(token_store(policy, env));
    out
}

/// `auth.oauth.store` of the `url` upstreams (one value for the policy: the policy
/// checks that) against `systemd-creds` being there: "systemd-creds" without it fails
/// every call of those upstreams (SP_AUTH), "auto" without it keeps the tokens plain.
fn token_store(policy: &Policy, env: &dyn Fn(&str) -> Option<OsString>) -> Option<Finding> {
    use crate::policy::upstreams::StoreKind;
    use crate::tools::upstream::oauth::sealed;
    let (name, store) = policy.upstreams.values().find_map(|u| match &u.transport {
        UpstreamTransport::Http { oauth: Some(o), .. } => Some((u.name.as_str(), o.store)),
        _ => None,
    })?;
    if store == StoreKind::File || sealed::available_with(env(sealed::TEST_HOOK)) {
        return None;
    }
    let field = format!("upstreams.{name}.auth.oauth.store");
    let program = sealed::PROGRAM;
    Some(match store {
        StoreKind::SystemdCreds => finding(
            Level::Error,
            field,
            format!("is \"systemd-creds\" but {program} is not there; every call of an OAuth upstream would be refused (SP_AUTH)"),
            "install systemd's systemd-creds, or set store to \"file\" (a plain file, mode 0600)",
        ),
        _ => finding(
            Level::Warning,
            field,
            format!("is \"auto\" and {program} is not there: the OAuth tokens would be kept in a plain file (mode 0600)"),
            "install systemd's systemd-creds to encrypt them, or set store to \"file\" to say that plain is meant",
        ),
    })
}

/// The credentials an upstream is given (`env` of a stdio upstream, `credential` of a
/// `url` one): their hosts need no allow rule.
fn given_to_upstreams(policy: &Policy) -> Vec<&str> {
    let mut names = Vec::new();
    for u in policy.upstreams.values() {
        match &u.transport {
            UpstreamTransport::Stdio { env, .. } => names.extend(env.values().filter_map(|v| match v {
                EnvValue::Credential(c) => Some(c.as_str()),
                EnvValue::Literal(_) => None,
            })),
            UpstreamTransport::Http { credential, .. } => names.extend(credential.as_deref()),
        }
    }
    names
}

/// A static source read now, as the first call would (the value is dropped at once).
/// `command` sources are not run (they may prompt or have effects); a secret too short
/// is `vault::check_static`'s (refused before this runs).
fn secret(name: &str, source: &SecretSource, json: bool, env: &dyn Fn(&str) -> Option<OsString>) -> Option<Finding> {
    let (field, level) = match source {
        SecretSource::File(_) => (format!("credentials.{name}.source.file"), Level::Error),
        SecretSource::Systemd(_) => (format!("credentials.{name}.source.systemd"), Level::Error),
        SecretSource::Env(_) => (format!("credentials.{name}.source.env"), Level::Warning),
        SecretSource::Command { .. } => return None,
    };
    let e = crate::sys::at_startup(|| crate::cred::source::read(name, source, json, env)).err()?;
    let path = match source {
        SecretSource::File(p) => p.display().to_string(),
        SecretSource::Systemd(n) => format!("$CREDENTIALS_DIRECTORY/{n}"),
        _ => String::new(),
    };
    let fix = match &e {
        SecretError::TooShort { .. } => return None,
        SecretError::Unreadable { .. } => format!("create {path} holding the secret (chmod 600), or fix the path"),
        SecretError::TooOpen { .. } => format!("run chmod 600 {path}"),
        SecretError::WrongOwner { .. } => format!("chown {path} to the user sp runs as"),
        SecretError::Empty { .. } | SecretError::Invalid { .. } => "put the secret in it, on one line".to_owned(),
        SecretError::EnvMissing { .. } => {
            "set it where the MCP client starts sp mcp (clients pass their servers a filtered environment; a file or systemd source is safer)".to_owned()
        }
        SecretError::NoCredentialsDirectory { .. } => {
            return Some(finding(Level::Warning, field, e.to_string(), "not checked here: run sp check under the same systemd unit to check it"));
        }
        SecretError::Command { .. } => return None,
    };
    Some(finding(level, field, e.to_string(), fix))
}

/// A credential's hosts that no `http.allow` rule's hosts overlap: the credential is
/// never sent there (hosts compare as spelled). None reached is an error.
fn unreached_hosts(policy: &Policy, name: &str, hosts: &[HostPattern]) -> Vec<Finding> {
    let allowed: Vec<&HostPattern> = policy.http.allow.iter().flat_map(|r| &r.hosts).collect();
    let unreached: Vec<(usize, &HostPattern)> = hosts.iter().enumerate().filter(|(_, h)| !allowed.iter().any(|a| a.overlaps(h))).collect();
    let none_reached = unreached.len() == hosts.len();
    let mut out = Vec::new();
    for (j, h) in unreached {
        let mut fix = format!("add {} to an http.allow rule's hosts, or bind the credential to a host a rule names", h.text);
        if let Some(other) = loopback_spelling(h, &allowed) {
            fix = format!(
                "the allow rules spell this loopback host {other}: sp compares hosts as written (127.0.0.1, [::1] and localhost differ), so write {other} in both, or {} in both",
                h.text
            );
        }
        let (level, problem) = if none_reached {
            (Level::Error, format!("{} is in no http.allow rule's hosts, nor is any other host of this credential: it is never sent", h.text))
        } else {
            (Level::Warning, format!("{} is in no http.allow rule's hosts: the credential is never sent there", h.text))
        };
        out.push(finding(level, format!("credentials.{name}.hosts[{j}]"), problem, fix));
    }
    out
}

/// Another spelling of loopback with a matching port among the allow rules' hosts.
fn loopback_spelling<'a>(h: &HostPattern, allowed: &[&'a HostPattern]) -> Option<&'a str> {
    let loopback = |p: &HostPattern| p.exact_host().is_some_and(crate::tools::http::authorize::is_loopback_host);
    if !loopback(h) {
        return None;
    }
    let port = |p: &HostPattern| p.text.rsplit_once(':').filter(|(_, port)| port.bytes().all(|b| b.is_ascii_digit())).map(|(_, port)| port.to_owned());
    allowed.iter().find(|a| loopback(a) && port(a) == port(h)).map(|a| a.text.as_str())
}

/// An exact path ending in `/` (not `/` itself): it matches that path only, nothing
/// under it, which is rarely what was meant.
fn exact_dirs(field: &str, paths: &[PathPattern]) -> Vec<Finding> {
    let mut out = Vec::new();
    for (j, p) in paths.iter().enumerate() {
        if let PathPattern::Exact(text) = p
            && text.len() > 1
            && text.ends_with('/')
        {
            out.push(finding(
                Level::Warning,
                format!("{field}[{j}]"),
                format!("{text:?} is an exact path: it matches {text} itself and nothing under it"),
                format!("write \"{text}*\" to allow every path under it"),
            ));
        }
    }
    out
}

/// `approval.command[0]`: a program `sp` will run (the checks it gets when asked) and
/// can execute.
fn approver(path: &Path) -> Option<Finding> {
    let field = "approval.command[0]";
    let shown = path.display();
    let fix = match crate::sys::check_program(path) {
        Ok(()) if rustix::fs::access(path, rustix::fs::Access::EXEC_OK).is_ok() => return None,
        Ok(()) => return Some(finding(Level::Error, field, format!("{shown} is not executable"), format!("run chmod u+x {shown}"))),
        Err(e) => {
            let fix = match e {
                crate::sys::SysError::Missing => "install the approver there, or fix the path".to_owned(),
                crate::sys::SysError::TooOpen { .. } => format!("run chmod go-w {shown}"),
                crate::sys::SysError::WrongOwner { .. } => format!("chown {shown} to root or to the user sp runs as"),
                crate::sys::SysError::NotRegular { .. } => "name the program file itself".to_owned(),
                _ => "make it a program sp can run".to_owned(),
            };
            (e, fix)
        }
    };
    let problem = format!("{shown}: {}; every approval-flagged call would be refused (SP_NOT_APPROVED)", fix.0);
    Some(finding(Level::Error, field, problem, fix.1))
}

#[cfg(test)]
mod tests;
