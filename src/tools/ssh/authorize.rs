//! The authorization step of `ssh_exec`: a typed call and the policy's `ssh` section in,
//! an [`SshAction`] (everything the executor needs, paths only) or an [`SshDenial`] out.
//! `gate::authorize` wraps the action in `Authorized` (`SshAction: Rules<SshExec>`).

use std::fmt;
use std::path::PathBuf;
use std::time::Duration;

use crate::gate::authorize::Rules;
use crate::policy::ssh::{HostKeyPolicy, Recordings, SshAuth, SshHost, SshPolicy};
use crate::policy::SecretSource;
use crate::policy::commands;
use crate::tools::ssh::args::SshExec;

/// Everything the executor needs for one call, copied out of the policy at
/// authorization. Paths only; secrets are read at use.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SshAction {
    /// Inventory name: the session-reuse key.
    pub host: String,
    pub address: String,
    pub port: u16,
    pub user: String,
    pub auth: SshAuth,
    pub command: String,
    pub stdin: Option<String>,
    /// `ssh.hosts.<name>.commands[N]`, or `ssh.hosts.<name> (any command)`.
    pub rule: String,
    pub timeout: Duration,
    pub connect_timeout: Duration,
    pub keepalive: Duration,
    pub max_output_bytes: u64,
    pub known_hosts: PathBuf,
    pub host_key_policy: HostKeyPolicy,
    /// `hide_address`: messages the agent sees name the host only.
    pub hide_address: bool,
    /// Run the command on a pty (the host's `pty`, default true).
    pub pty: bool,
    /// `ssh.recordings`: the call is recorded (`record.rs`).
    pub recording: Option<Recordings>,
    /// The command matched the host's `sudo.commands`: it runs under `sudo -S`, the
    /// credential's secret written on its stdin (issue 34 §4).
    pub sudo: Option<SudoRun>,
    /// The jump host's connection (`via`, issue 34 §3): this host is reached through a
    /// tunnel of its session (`via.rs`); it may itself have one.
    pub via: Option<Box<SshAction>>,
}

/// Whose password `sudo` gets: read through the Vault when the call runs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SudoRun {
    pub credential: String,
    pub source: SecretSource,
}

/// What the remote shell runs for a `sudo` command: the agent's words after `--`, so
/// none becomes an option of sudo; `-S` reads the password from stdin, `-p ''` prints no
/// prompt, `-k` ignores a cached timestamp, so sudo always reads the password sp writes
/// first (were sudo not to read it, the command would: sp-policy(5) says to keep such
/// commands off NOPASSWD). The agent's text passed the `sudo.commands` matcher: no shell
/// metacharacter, words separated as in the pattern.
pub(crate) const SUDO_PREFIX: &str = "sudo -k -S -p '' -- ";

impl SshAction {
    /// The command line sent (before the kill marker, `exec.rs`).
    pub fn remote_command(&self) -> String {
        match self.sudo {
            Some(_) => format!("{SUDO_PREFIX}{}", self.command),
            None => self.command.clone(),
        }
    }
}

impl SshAction {
    /// How messages the agent sees name the destination: `ssh web1 (10.0.0.5:22)`, or
    /// `ssh web1` alone when the operator hides the address (`hide_address`).
    pub fn target(&self, with_user: bool) -> String {
        match (self.hide_address, with_user) {
            (true, _) => format!("ssh {}", self.host),
            (false, true) => format!("ssh {} ({}@{}:{})", self.host, self.user, self.address, self.port),
            (false, false) => format!("ssh {} ({}:{})", self.host, self.address, self.port),
        }
    }
}

impl Rules<SshExec> for SshAction {
    type Denial = SshDenial;
    fn check(policy: &crate::policy::Policy, call: SshExec) -> Result<SshAction, SshDenial> {
        authorize(&policy.ssh, call)
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SshDenial {
    UnknownHost { host: String },
    CommandNotAllowed { host: String, why: commands::Mismatch },
    TimeoutTooLong { requested: u64, limit: u64 },
}

impl fmt::Display for SshDenial {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SshDenial::UnknownHost { host } => write!(f, "there is no ssh host named {host:?} (see sp_inventory)"),
            SshDenial::CommandNotAllowed { host, why } => write!(f, "ssh host {host:?}: {why}"),
            SshDenial::TimeoutTooLong { requested, limit } => {
                write!(f, "timeout_s {requested} is above the operator's limit ssh.timeout_s ({limit})")
            }
        }
    }
}

impl std::error::Error for SshDenial {}

/// The SSH half of authorization. `authorize.rs` wraps the result in `Authorized`.
pub(crate) fn authorize(policy: &SshPolicy, call: SshExec) -> Result<SshAction, SshDenial> {
    let host = policy.hosts.get(&call.host).ok_or_else(|| SshDenial::UnknownHost { host: call.host.clone() })?;
    // The sudo list first (the same matcher): a command on it runs under sudo, whatever
    // the host's `commands`; any other command never does.
    let sudo = host.sudo.as_ref().and_then(|s| commands::check(&s.commands, &call.command).ok().map(|i| (s, i)));
    let rule = match (&sudo, &host.commands) {
        (Some((_, i)), _) => format!("ssh.hosts.{}.sudo.commands[{i}]", host.name),
        (None, None) => format!("ssh.hosts.{} (any command)", host.name),
        (None, Some(list)) => {
            let i = commands::check(list, &call.command).map_err(|why| SshDenial::CommandNotAllowed { host: host.name.clone(), why })?;
            format!("ssh.hosts.{}.commands[{i}]", host.name)
        }
    };
    let limit = policy.timeout.as_secs();
    let timeout = match call.timeout_s {
        Some(t) if t > limit => return Err(SshDenial::TimeoutTooLong { requested: t, limit }),
        Some(t) => Duration::from_secs(t),
        None => policy.timeout,
    };
    let sudo = sudo.map(|(s, _)| SudoRun { credential: s.credential.clone(), source: s.source.clone() });
    let mut action = connection(policy, host, call);
    action.rule = rule;
    action.timeout = timeout;
    action.recording = policy.recordings.clone();
    action.sudo = sudo;
    Ok(action)
}

/// The action for `call` on `host` before any rule is checked: the connection facts
/// copied out of the policy (also what `ssh_get` and `ssh_put` connect with,
/// `transfer/authorize.rs`), the call's command and stdin, no rule yet, the policy's
/// timeout.
pub(crate) fn connection(policy: &SshPolicy, host: &SshHost, call: SshExec) -> SshAction {
    hop(policy, host, call, 0)
}

/// [`connection`] at `depth` jump hosts from the target (parse refuses loops and
/// chains over `MAX_VIA_HOPS`; the depth bounds the recursion regardless).
fn hop(policy: &SshPolicy, host: &SshHost, call: SshExec, depth: usize) -> SshAction {
    let via = host.via.as_ref().and_then(|v| policy.hosts.get(v)).filter(|_| depth < crate::policy::ssh::MAX_VIA_HOPS).map(|jump| {
        let call = SshExec { host: jump.name.clone(), command: String::new(), timeout_s: None, stdin: None };
        let mut a = hop(policy, jump, call, depth + 1);
        a.rule = format!("ssh.hosts.{}.via", host.name);
        Box::new(a)
    });
    SshAction {
        host: host.name.clone(),
        address: host.address.clone(),
        port: host.port,
        user: host.user.clone(),
        auth: host.auth.clone(),
        command: call.command,
        stdin: call.stdin,
        rule: String::new(),
        timeout: policy.timeout,
        connect_timeout: policy.connect_timeout,
        keepalive: policy.keepalive,
        max_output_bytes: policy.max_output_bytes,
        // parse() requires it whenever a host exists
        known_hosts: policy.known_hosts.clone().unwrap_or_default(),
        host_key_policy: policy.host_key_policy,
        hide_address: host.hide_address,
        pty: host.pty,
        // ssh_exec's own (set by `authorize`); a jump host or a transfer has none.
        recording: None,
        sudo: None,
        via,
    }
}

/// `sp check`'s lines for the ssh section: where, never what (no key contents).
pub(crate) fn check_summary(policy: &SshPolicy) -> String {
    let mut s = format!(
        "ssh: {} host(s), known_hosts {}, host key policy {}, timeout {}s, max output {} bytes\n",
        policy.hosts.len(),
        policy.known_hosts.as_ref().map_or("(none)".into(), |p| p.display().to_string()),
        policy.host_key_policy.as_str(),
        policy.timeout.as_secs(),
        policy.max_output_bytes
    );
    for h in policy.hosts.values() {
        let auth = match &h.auth {
            SshAuth::Key { key_file, passphrase_file: Some(_) } => format!("key {} (with passphrase)", key_file.display()),
            SshAuth::Key { key_file, passphrase_file: None } => format!("key {}", key_file.display()),
            SshAuth::Password { password_file } => format!("password {}", password_file.display()),
            SshAuth::Agent => "agent".into(),
        };
        let commands = match &h.commands {
            Some(l) => format!("{} command pattern(s)", l.len()),
            None => "ANY command".into(),
        };
        let via = h.via.as_ref().map(|v| format!(", via {v}")).unwrap_or_default();
        s += &format!("  {}: {}@{}:{} {}, {}{via}\n", h.name, h.user, h.address, h.port, auth, commands);
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::ssh as policy;
    use serde_json::json;

    fn policy() -> SshPolicy {
        policy::parse(&json!({
            "known_hosts": "/kh", "timeout_s": 30,
            "hosts": {
                "web1": {"address": "10.0.0.5", "user": "deploy", "auth": {"key_file": "/secret/key"}, "commands": ["uptime", "systemctl status *"]},
                "open": {"address": "hidden.internal", "port": 2222, "user": "ops", "auth": {"agent": true}, "hide_address": true}
            }
        }))
        .unwrap()
    }

    fn call(host: &str, command: &str, timeout_s: Option<u64>) -> Result<SshAction, SshDenial> {
        authorize(&policy(), SshExec { host: host.into(), command: command.into(), timeout_s, stdin: None })
    }

    #[test]
    fn allowed() {
        let a = call("web1", "systemctl status nginx", None).unwrap();
        assert_eq!((a.rule.as_str(), a.timeout, a.address.as_str()), ("ssh.hosts.web1.commands[1]", Duration::from_secs(30), "10.0.0.5"));
        let a = call("open", "anything; at all | really", Some(30)).unwrap();
        assert_eq!((a.rule.as_str(), a.port, a.known_hosts.to_str()), ("ssh.hosts.open (any command)", 2222, Some("/kh")));
    }

    #[test]
    fn denied() {
        assert_eq!(call("web2", "uptime", None), Err(SshDenial::UnknownHost { host: "web2".into() }));
        assert!(matches!(call("web1", "uptime; id", None), Err(SshDenial::CommandNotAllowed { .. })));
        assert!(matches!(call("web1", "id", None), Err(SshDenial::CommandNotAllowed { .. })));
        assert_eq!(call("open", "x", Some(31)), Err(SshDenial::TimeoutTooLong { requested: 31, limit: 30 }));
        assert!(call("web1", "uptime; id", None).unwrap_err().to_string().contains("';'"));
    }
}
