//! The `ssh` section of the policy (`sp-policy(5)`, issues #4 and #5), parsed from the JSON value
//! with errors that name the field (`ssh.hosts.web1.auth.key_file: must be an absolute
//! path`). Unknown fields are refused at every level, like the rest of the policy.
//!
//! ```json
//! "ssh": {
//!   "known_hosts": "/etc/sallyport/known_hosts",
//!   "host_key_policy": "strict",
//!   "timeout_s": 60, "connect_timeout_s": 10, "keepalive_s": 30,
//!   "max_output_bytes": 8388608,
//!   "hosts": {
//!     "web1": {"address": "10.0.0.5", "port": 22, "user": "deploy",
//!              "auth": {"key_file": "/etc/sallyport/keys/deploy", "passphrase_file": "/etc/sallyport/keys/deploy.pass"},
//!              "commands": ["systemctl status *", "uptime"],
//!              "hide_address": false, "approve": false,
//!              "files": {"read": ["/var/log/app/*.log"], "write": ["/srv/uploads/*"]}}
//!   }
//! }
//! ```
//!
//! Decisions the issue left open:
//! - `known_hosts` has no default and is required as soon as a host is listed: which
//!   file vouches for host keys is too important to guess (`~/.ssh/known_hosts` of
//!   whichever user runs `sp` is rarely what the operator means).
//! - `user` is required: no fallback to `$USER` (MCP clients pass filtered
//!   environments).
//! - `address` is a host name or an IP literal (IPv6 with or without brackets), stored
//!   lowercase without brackets; it is also the name looked up in `known_hosts`.
//! - Every path (key, passphrase, password, known_hosts) must be absolute; the files are
//!   opened only when a call needs them, never at load time.
//! - `hide_address: true` keeps `address` and `port` out of `sp_inventory`.
//! - `files` (issue 34 §2) is parsed in `ssh/files.rs`: what `ssh_get` and `ssh_put`
//!   may move; absent, nothing.
//! - `pty: false` runs commands without a terminal: separate stdout and stderr, but a
//!   timed-out command is not stopped (see `ssh/exec.rs`).
//! - `recordings` (issue 34 §1): `{"dir": ABS, "max_bytes": N}`; the directory is not
//!   created by `sp` (it must exist, owned by the user `sp` runs as, mode 0700: checked at
//!   each call, `tools/ssh/record.rs`). `max_bytes` defaults to [`DEFAULT_RECORDING_BYTES`].
//! - `sudo` on a host (issue 34 §4): `{"password": {"credential": NAME}, "commands":
//!   [PATTERN...]}`; NAME must be a credential of the `credentials` section (its source is
//!   copied here; its `hosts` and `inject` keep governing HTTP only). The patterns use the
//!   matcher of `commands` (`policy/commands.rs`).

use std::collections::BTreeMap;
use std::net::{Ipv4Addr, Ipv6Addr};
use std::path::PathBuf;
use std::time::Duration;

use serde_json::Value;

use super::commands::CommandPattern;
use super::credentials::{Credential, SecretSource};

pub(crate) mod files;
use super::fields::{abs_path, err, flag, int, object, required, string, Check};

pub(crate) const DEFAULT_TIMEOUT_S: u64 = 60;
pub(crate) const MAX_TIMEOUT_S: u64 = 3600;
pub(crate) const DEFAULT_CONNECT_TIMEOUT_S: u64 = 10;
pub(crate) const MAX_CONNECT_TIMEOUT_S: u64 = 300;
pub(crate) const DEFAULT_KEEPALIVE_S: u64 = 30;
pub(crate) const DEFAULT_MAX_OUTPUT_BYTES: u64 = 8 * 1024 * 1024;
pub(crate) const MAX_OUTPUT_BYTES_CEILING: u64 = 64 * 1024 * 1024;
pub(crate) const DEFAULT_RECORDING_BYTES: u64 = 16 * 1024 * 1024;
/// A recording's header alone takes up to a few KiB (the command is in it).
pub(crate) const MIN_RECORDING_BYTES: u64 = 4096;
pub(crate) const MAX_RECORDING_BYTES: u64 = 1024 * 1024 * 1024;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HostKeyPolicy {
    /// Unknown or changed key: refused before authentication.
    Strict,
    /// Unknown key: recorded after authentication succeeds. Changed: refused.
    AcceptNew,
}

impl HostKeyPolicy {
    pub fn as_str(self) -> &'static str {
        match self {
            HostKeyPolicy::Strict => "strict",
            HostKeyPolicy::AcceptNew => "accept-new",
        }
    }
}

/// How `sp` proves who it is. Paths only: the files are read at use (`secret.rs`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SshAuth {
    Key {
        key_file: PathBuf,
        passphrase_file: Option<PathBuf>,
    },
    Password {
        password_file: PathBuf,
    },
    /// The agent at `$SSH_AUTH_SOCK` of the `sp` process.
    Agent,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SshHost {
    pub name: String,
    pub address: String,
    pub port: u16,
    pub user: String,
    pub auth: SshAuth,
    /// `None`: any command (full shell access as `user`).
    pub commands: Option<Vec<CommandPattern>>,
    pub hide_address: bool,
    /// Run commands on a pseudo-terminal (default), so that a timeout stops them.
    pub pty: bool,
    /// `"approve": true`: every call to it waits for approval (`approval.via`);
    /// `"command"`: for the operator's approver command only.
    pub approve: super::approval::Approve,
    /// Commands run under `sudo -S` with a password from a credential (issue 34 §4).
    pub sudo: Option<Sudo>,
    /// `files`: what `ssh_get` and `ssh_put` may move (`ssh/files.rs`); `None`: nothing.
    pub files: Option<files::FileRules>,
    /// `via`: the inventory host whose session reaches this one (a jump host, issue 34
    /// §3); checked in [`check_via`].
    pub via: Option<String>,
}

/// `ssh.hosts.<name>.sudo`: which commands run under `sudo`, and whose password it gets.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Sudo {
    /// The credential's name (for messages, the journal's rule and redaction).
    pub credential: String,
    /// Where its secret lives (copied from `credentials.<name>.source`).
    pub source: SecretSource,
    pub commands: Vec<CommandPattern>,
}

/// `ssh.recordings`: every `ssh_exec` recorded as an asciicast v2 file (issue 34 §1).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Recordings {
    /// An existing directory, owned by the user `sp` runs as, mode 0700.
    pub dir: PathBuf,
    /// The largest recording written; a longer one is cut (and the journal says so).
    pub max_bytes: u64,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SshPolicy {
    pub known_hosts: Option<PathBuf>,
    pub host_key_policy: HostKeyPolicy,
    pub timeout: Duration,
    pub connect_timeout: Duration,
    /// Zero: no keepalive messages.
    pub keepalive: Duration,
    pub max_output_bytes: u64,
    pub hosts: BTreeMap<String, SshHost>,
    pub recordings: Option<Recordings>,
}

impl Default for SshPolicy {
    fn default() -> SshPolicy {
        SshPolicy {
            known_hosts: None,
            host_key_policy: HostKeyPolicy::Strict,
            timeout: Duration::from_secs(DEFAULT_TIMEOUT_S),
            connect_timeout: Duration::from_secs(DEFAULT_CONNECT_TIMEOUT_S),
            keepalive: Duration::from_secs(DEFAULT_KEEPALIVE_S),
            max_output_bytes: DEFAULT_MAX_OUTPUT_BYTES,
            hosts: BTreeMap::new(),
            recordings: None,
        }
    }
}

/// Host names the agent uses: the same alphabet as credential names.
pub(crate) fn is_host_name(s: &str) -> bool {
    super::fields::is_name(s)
}

/// A remote login name: portable POSIX user names, plus what `useradd` accepts in
/// practice; never something an SSH server or a log line could misread.
pub(crate) fn is_user(s: &str) -> bool {
    (1..=64).contains(&s.len()) && !s.starts_with('-') && s.bytes().all(|b| b.is_ascii_alphanumeric() || b"._-".contains(&b))
}

/// A DNS name or an IP literal, normalised (lowercase, IPv6 without brackets).
pub(crate) fn normalize_address(s: &str) -> Option<String> {
    let bare = s.strip_prefix('[').and_then(|r| r.strip_suffix(']')).unwrap_or(s);
    if let Ok(v6) = bare.parse::<Ipv6Addr>() {
        return Some(v6.to_string());
    }
    if s != bare {
        return None;
    }
    if let Ok(v4) = bare.parse::<Ipv4Addr>() {
        return Some(v4.to_string());
    }
    let name = bare.strip_suffix('.').unwrap_or(bare).to_ascii_lowercase();
    let label_ok = |l: &str| {
        (1..=63).contains(&l.len()) && !l.starts_with('-') && !l.ends_with('-') && l.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
    };
    (name.len() <= 253 && name.split('.').all(label_ok)).then_some(name)
}

/// [`parse_with`] without credentials (a `sudo` section then names none that exists).
#[cfg(test)]
pub(crate) fn parse(v: &Value) -> Check<SshPolicy> {
    parse_with(v, &BTreeMap::new())
}

/// The section; a host's `sudo.password.credential` must name one of `credentials`.
pub(crate) fn parse_with(v: &Value, credentials: &BTreeMap<String, Credential>) -> Check<SshPolicy> {
    let map =
        object(v, "ssh", &["known_hosts", "host_key_policy", "timeout_s", "connect_timeout_s", "keepalive_s", "max_output_bytes", "hosts", "recordings"])?;
    let mut p = SshPolicy::default();
    if let Some(k) = map.get("known_hosts") {
        p.known_hosts = Some(abs_path(k, "ssh.known_hosts")?);
    }
    if let Some(h) = map.get("host_key_policy") {
        p.host_key_policy = match string(h, "ssh.host_key_policy")? {
            "strict" => HostKeyPolicy::Strict,
            "accept-new" => HostKeyPolicy::AcceptNew,
            other => return err("ssh.host_key_policy", format!("must be \"strict\" or \"accept-new\", not {other:?}")),
        };
    }
    if let Some(t) = map.get("timeout_s") {
        p.timeout = Duration::from_secs(int(t, "ssh.timeout_s", 1, MAX_TIMEOUT_S)?);
    }
    if let Some(t) = map.get("connect_timeout_s") {
        p.connect_timeout = Duration::from_secs(int(t, "ssh.connect_timeout_s", 1, MAX_CONNECT_TIMEOUT_S)?);
    }
    if let Some(t) = map.get("keepalive_s") {
        p.keepalive = Duration::from_secs(int(t, "ssh.keepalive_s", 0, MAX_TIMEOUT_S)?);
    }
    if let Some(t) = map.get("max_output_bytes") {
        p.max_output_bytes = int(t, "ssh.max_output_bytes", 1, MAX_OUTPUT_BYTES_CEILING)?;
    }
    if let Some(r) = map.get("recordings") {
        let rm = object(r, "ssh.recordings", &["dir", "max_bytes"])?;
        let dir = abs_path(required(rm, "dir", "ssh.recordings")?, "ssh.recordings.dir")?;
        let max_bytes = match rm.get("max_bytes") {
            None => DEFAULT_RECORDING_BYTES,
            Some(m) => int(m, "ssh.recordings.max_bytes", MIN_RECORDING_BYTES, MAX_RECORDING_BYTES)?,
        };
        p.recordings = Some(Recordings { dir, max_bytes });
    }
    if let Some(h) = map.get("hosts") {
        let Value::Object(defs) = h else {
            return err("ssh.hosts", "must be an object mapping names to hosts");
        };
        for (name, def) in defs {
            let field = format!("ssh.hosts.{name}");
            if !is_host_name(name) {
                return err(&field, "a host name is 1-64 letters, digits, '_', '.' or '-'");
            }
            p.hosts.insert(name.clone(), host(name, def, &field, credentials)?);
        }
    }
    check_via(&p.hosts)?;
    if !p.hosts.is_empty() && p.known_hosts.is_none() {
        return err("ssh.known_hosts", "is required when ssh.hosts lists a host (host keys are always verified)");
    }
    Ok(p)
}

/// Most jump hosts between `sp` and a host: `a` via `b` via `c` is two.
pub(crate) const MAX_VIA_HOPS: usize = 2;

/// Every `via` names another listed host, leads to no loop, and passes at most
/// [`MAX_VIA_HOPS`] jump hosts.
pub(crate) fn check_via(hosts: &BTreeMap<String, SshHost>) -> Check<()> {
    for h in hosts.values() {
        let field = format!("ssh.hosts.{}.via", h.name);
        let mut chain = vec![h.name.as_str()];
        let mut at = h;
        while let Some(next) = &at.via {
            if chain.contains(&next.as_str()) {
                chain.push(next);
                return err(&field, format!("leads to a loop ({})", chain.join(" -> ")));
            }
            let Some(hop) = hosts.get(next) else {
                return err(&field, format!("names {next:?}, which is not a host in ssh.hosts"));
            };
            chain.push(next);
            if chain.len() - 1 > MAX_VIA_HOPS {
                return err(&field, format!("passes more than {MAX_VIA_HOPS} jump hosts ({})", chain.join(" -> ")));
            }
            at = hop;
        }
    }
    Ok(())
}

fn host(name: &str, def: &Value, field: &str, credentials: &BTreeMap<String, Credential>) -> Check<SshHost> {
    let map = object(def, field, &["address", "port", "user", "auth", "commands", "hide_address", "pty", "approve", "sudo", "files", "via"])?;
    let approve = super::approval::approve_flag(map, field)?;
    let af = format!("{field}.address");
    let address = normalize_address(string(required(map, "address", field)?, &af)?)
        .ok_or_else(|| (af.clone(), "must be a host name or an IP address (no port, no user@)".to_owned()))?;
    let port = match map.get("port") {
        None => 22,
        Some(v) => int(v, &format!("{field}.port"), 1, 65535)? as u16,
    };
    let uf = format!("{field}.user");
    let user = string(required(map, "user", field)?, &uf)?;
    if !is_user(user) {
        return err(&uf, "must be a user name (letters, digits, '.', '_', '-'; not starting with '-')");
    }
    let auth = auth(required(map, "auth", field)?, &format!("{field}.auth"))?;
    let commands = map.get("commands").map(|c| patterns(c, &format!("{field}.commands"))).transpose()?;
    let hide_address = flag(map, "hide_address", field, false)?;
    let pty = flag(map, "pty", field, true)?;
    let sudo = map.get("sudo").map(|s| sudo(s, &format!("{field}.sudo"), credentials)).transpose()?;
    let files = map.get("files").map(|f| files::parse(f, &format!("{field}.files"))).transpose()?;
    let via = match map.get("via") {
        None => None,
        Some(v) => {
            let vf = format!("{field}.via");
            let v = string(v, &vf)?;
            if !is_host_name(v) {
                return err(&vf, "must be the name of another host in ssh.hosts");
            }
            Some(v.to_owned())
        }
    };
    Ok(SshHost { name: name.to_owned(), address, port, user: user.to_owned(), auth, commands, hide_address, pty, approve, sudo, files, via })
}

/// A non-empty list of command patterns (`commands`, `sudo.commands`).
fn patterns(c: &Value, cf: &str) -> Check<Vec<CommandPattern>> {
    let Value::Array(items) = c else {
        return err(cf, "must be an array of command patterns");
    };
    if items.is_empty() {
        return err(cf, "must not be empty (leave it out to allow any command)");
    }
    let mut out = Vec::new();
    for (i, item) in items.iter().enumerate() {
        let f = format!("{cf}[{i}]");
        out.push(CommandPattern::parse(string(item, &f)?).map_err(|e| (f, e.to_string()))?);
    }
    Ok(out)
}

/// `sudo`: `{"password": {"credential": NAME}, "commands": [...]}`, both required.
fn sudo(v: &Value, field: &str, credentials: &BTreeMap<String, Credential>) -> Check<Sudo> {
    let map = object(v, field, &["password", "commands"])?;
    let pf = format!("{field}.password");
    let pm = object(required(map, "password", field)?, &pf, &["credential"])?;
    let cf = format!("{pf}.credential");
    let name = string(required(pm, "credential", &pf)?, &cf)?;
    let Some(c) = credentials.get(name) else {
        return err(&cf, format!("names no credential of the credentials section ({:?})", crate::sys::short(name, 64, crate::sys::Ellipsis::Marked)));
    };
    let commands = patterns(required(map, "commands", field)?, &format!("{field}.commands"))?;
    Ok(Sudo { credential: c.name.clone(), source: c.source.clone(), commands })
}

fn auth(v: &Value, field: &str) -> Check<SshAuth> {
    let map = object(v, field, &["key_file", "passphrase_file", "password_file", "agent"])?;
    let kinds: Vec<&str> = ["key_file", "password_file", "agent"].into_iter().filter(|k| map.contains_key(*k)).collect();
    let [kind] = kinds[..] else {
        return err(field, "must be exactly one of {\"key_file\": PATH[, \"passphrase_file\": PATH]}, {\"password_file\": PATH} or {\"agent\": true}");
    };
    if kind != "key_file" && map.contains_key("passphrase_file") {
        return err(&format!("{field}.passphrase_file"), "only applies with key_file");
    }
    Ok(match kind {
        "key_file" => SshAuth::Key {
            key_file: abs_path(&map["key_file"], &format!("{field}.key_file"))?,
            passphrase_file: map.get("passphrase_file").map(|p| abs_path(p, &format!("{field}.passphrase_file"))).transpose()?,
        },
        "password_file" => SshAuth::Password { password_file: abs_path(&map["password_file"], &format!("{field}.password_file"))? },
        _ => match map["agent"] {
            Value::Bool(true) => SshAuth::Agent,
            _ => return err(&format!("{field}.agent"), "must be true (leave it out to use another method)"),
        },
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn full_example() {
        let p = parse(&json!({
            "known_hosts": "/etc/sallyport/known_hosts",
            "host_key_policy": "accept-new",
            "timeout_s": 5, "connect_timeout_s": 3, "keepalive_s": 0, "max_output_bytes": 100,
            "hosts": {
                "web1": {"address": "WEB1.Example.com.", "user": "deploy",
                         "auth": {"key_file": "/k", "passphrase_file": "/p"},
                         "commands": ["systemctl status *", "uptime"]},
                "db": {"address": "[::1]", "port": 2222, "user": "root", "auth": {"password_file": "/pw"}, "hide_address": true, "pty": false},
                "ag": {"address": "10.0.0.5", "user": "u", "auth": {"agent": true}}
            }
        }))
        .unwrap();
        assert_eq!(p.host_key_policy, HostKeyPolicy::AcceptNew);
        assert_eq!((p.timeout, p.keepalive, p.max_output_bytes), (Duration::from_secs(5), Duration::ZERO, 100));
        let web = &p.hosts["web1"];
        assert_eq!((web.address.as_str(), web.port), ("web1.example.com", 22));
        assert_eq!(web.auth, SshAuth::Key { key_file: "/k".into(), passphrase_file: Some("/p".into()) });
        assert_eq!(web.commands.as_ref().unwrap().len(), 2);
        let db = &p.hosts["db"];
        assert_eq!((db.address.as_str(), db.port, db.hide_address), ("::1", 2222, true));
        assert_eq!((db.pty, web.pty), (false, true), "pty defaults to true");
        assert_eq!(p.hosts["ag"].auth, SshAuth::Agent);
        assert_eq!(p.hosts["ag"].commands, None);
        assert_eq!(parse(&json!({})).unwrap(), SshPolicy::default());
    }

    #[test]
    fn errors_name_the_field() {
        let host = |h: Value| json!({"known_hosts": "/kh", "hosts": {"web1": h}});
        let ok_auth = json!({"agent": true});
        let cases = vec![
            (json!([]), "ssh"),
            (json!({"know_hosts": "/x"}), "ssh.know_hosts"),
            (json!({"known_hosts": "rel"}), "ssh.known_hosts"),
            (json!({"host_key_policy": "tofu"}), "ssh.host_key_policy"),
            (json!({"timeout_s": 0}), "ssh.timeout_s"),
            (json!({"connect_timeout_s": 301}), "ssh.connect_timeout_s"),
            (json!({"keepalive_s": -1}), "ssh.keepalive_s"),
            (json!({"max_output_bytes": 0}), "ssh.max_output_bytes"),
            (json!({"hosts": []}), "ssh.hosts"),
            (json!({"hosts": {"web1": {"address": "a", "user": "u", "auth": {"agent": true}}}}), "ssh.known_hosts"),
            (json!({"known_hosts": "/kh", "hosts": {"bad name": {}}}), "ssh.hosts.bad name"),
            (host(json!({"user": "u", "auth": ok_auth})), "ssh.hosts.web1.address"),
            (host(json!({"address": "u@h", "user": "u", "auth": ok_auth})), "ssh.hosts.web1.address"),
            (host(json!({"address": "h:22", "user": "u", "auth": ok_auth})), "ssh.hosts.web1.address"),
            (host(json!({"address": "-h", "user": "u", "auth": ok_auth})), "ssh.hosts.web1.address"),
            (host(json!({"address": "h", "port": 0, "user": "u", "auth": ok_auth})), "ssh.hosts.web1.port"),
            (host(json!({"address": "h", "port": 65536, "user": "u", "auth": ok_auth})), "ssh.hosts.web1.port"),
            (host(json!({"address": "h", "auth": ok_auth})), "ssh.hosts.web1.user"),
            (host(json!({"address": "h", "user": "-oProxyCommand=x", "auth": ok_auth})), "ssh.hosts.web1.user"),
            (host(json!({"address": "h", "user": "u"})), "ssh.hosts.web1.auth"),
            (host(json!({"address": "h", "user": "u", "auth": {}})), "ssh.hosts.web1.auth"),
            (host(json!({"address": "h", "user": "u", "auth": {"key_file": "k"}})), "ssh.hosts.web1.auth.key_file"),
            (host(json!({"address": "h", "user": "u", "auth": {"key_file": "/k", "passphrase_file": "p"}})), "ssh.hosts.web1.auth.passphrase_file"),
            (host(json!({"address": "h", "user": "u", "auth": {"key_file": "/k", "agent": true}})), "ssh.hosts.web1.auth"),
            (host(json!({"address": "h", "user": "u", "auth": {"agent": true, "passphrase_file": "/p"}})), "ssh.hosts.web1.auth.passphrase_file"),
            (host(json!({"address": "h", "user": "u", "auth": {"agent": false}})), "ssh.hosts.web1.auth.agent"),
            (host(json!({"address": "h", "user": "u", "auth": {"password_file": 1}})), "ssh.hosts.web1.auth.password_file"),
            (host(json!({"address": "h", "user": "u", "auth": {"pasword_file": "/p"}})), "ssh.hosts.web1.auth.pasword_file"),
            (host(json!({"address": "h", "user": "u", "auth": ok_auth, "commands": []})), "ssh.hosts.web1.commands"),
            (host(json!({"address": "h", "user": "u", "auth": ok_auth, "commands": "uptime"})), "ssh.hosts.web1.commands"),
            (host(json!({"address": "h", "user": "u", "auth": ok_auth, "commands": ["uptime", "a; b"]})), "ssh.hosts.web1.commands[1]"),
            (host(json!({"address": "h", "user": "u", "auth": ok_auth, "commands": [7]})), "ssh.hosts.web1.commands[0]"),
            (host(json!({"address": "h", "user": "u", "auth": ok_auth, "hide_address": "yes"})), "ssh.hosts.web1.hide_address"),
            (host(json!({"address": "h", "user": "u", "auth": ok_auth, "pty": "no"})), "ssh.hosts.web1.pty"),
            (host(json!({"address": "h", "user": "u", "auth": ok_auth, "key": "/x"})), "ssh.hosts.web1.key"),
        ];
        for (v, field) in cases {
            let shown = v.to_string();
            assert_eq!(parse(&v).unwrap_err().0, field, "{shown}");
        }
    }

    /// Issue 34: `recordings` and a host's `sudo`, and each of their errors, by field.
    #[test]
    fn recordings_and_sudo() {
        let def = json!({"source": {"file": "/etc/sp/sudo"}, "inject": {"bearer": {}}, "hosts": ["sudo.invalid"]});
        let creds = BTreeMap::from([("web1-sudo".to_owned(), crate::policy::credentials::credential("web1-sudo", &def, "credentials.web1-sudo").unwrap())]);
        let host = |sudo: Value| json!({"known_hosts": "/kh", "hosts": {"web1": {"address": "h", "user": "u", "auth": {"agent": true}, "sudo": sudo}}});
        let good = json!({"password": {"credential": "web1-sudo"}, "commands": ["systemctl restart app"]});
        let p = parse_with(&host(good.clone()), &creds).unwrap();
        let sudo = p.hosts["web1"].sudo.clone().unwrap();
        assert_eq!(
            (sudo.credential.as_str(), sudo.source, sudo.commands[0].text.as_str()),
            ("web1-sudo", SecretSource::File("/etc/sp/sudo".into()), "systemctl restart app")
        );
        let p = parse_with(&json!({"recordings": {"dir": "/var/lib/sp/rec"}}), &creds).unwrap();
        assert_eq!(p.recordings, Some(Recordings { dir: "/var/lib/sp/rec".into(), max_bytes: DEFAULT_RECORDING_BYTES }));
        let p = parse_with(&json!({"recordings": {"dir": "/r", "max_bytes": 4096}}), &creds).unwrap();
        assert_eq!(p.recordings.map(|r| r.max_bytes), Some(4096));
        let cases = vec![
            (json!({"recordings": {}}), "ssh.recordings.dir"),
            (json!({"recordings": {"dir": "rel"}}), "ssh.recordings.dir"),
            (json!({"recordings": {"dir": "/r", "max_bytes": 100}}), "ssh.recordings.max_bytes"),
            (json!({"recordings": {"dir": "/r", "mode": 7}}), "ssh.recordings.mode"),
            (host(json!({"commands": ["x"]})), "ssh.hosts.web1.sudo.password"),
            (host(json!({"password": {"credential": "nope"}, "commands": ["x"]})), "ssh.hosts.web1.sudo.password.credential"),
            (host(json!({"password": {"file": "/p"}, "commands": ["x"]})), "ssh.hosts.web1.sudo.password.file"),
            (host(json!({"password": {"credential": "web1-sudo"}})), "ssh.hosts.web1.sudo.commands"),
            (host(json!({"password": {"credential": "web1-sudo"}, "commands": []})), "ssh.hosts.web1.sudo.commands"),
            (host(json!({"password": {"credential": "web1-sudo"}, "commands": ["a; b"]})), "ssh.hosts.web1.sudo.commands[0]"),
        ];
        for (v, field) in cases {
            let shown = v.to_string();
            assert_eq!(parse_with(&v, &creds).unwrap_err().0, field, "{shown}");
        }
    }

    #[test]
    fn via_names_another_host_without_loops_and_at_most_two_hops() {
        let h = |via: Option<&str>| {
            let mut v = json!({"address": "h", "user": "u", "auth": {"agent": true}});
            if let Some(via) = via {
                v["via"] = json!(via);
            }
            v
        };
        let policy = |hosts: Value| parse(&json!({"known_hosts": "/kh", "hosts": hosts}));
        let p = policy(json!({"a": h(Some("b")), "b": h(Some("c")), "c": h(None)})).unwrap();
        assert_eq!((p.hosts["a"].via.as_deref(), p.hosts["c"].via.as_deref()), (Some("b"), None));
        for (hosts, field, why) in [
            (json!({"a": h(Some("a"))}), "ssh.hosts.a.via", "leads to a loop (a -> a)"),
            (json!({"a": h(Some("b")), "b": h(Some("a"))}), "ssh.hosts.a.via", "leads to a loop (a -> b -> a)"),
            (json!({"a": h(Some("b")), "b": h(Some("c")), "c": h(Some("b"))}), "ssh.hosts.a.via", "leads to a loop (a -> b -> c -> b)"),
            (json!({"a": h(Some("nope"))}), "ssh.hosts.a.via", "names \"nope\", which is not a host in ssh.hosts"),
            (
                json!({"a": h(Some("b")), "b": h(Some("c")), "c": h(Some("d")), "d": h(None)}),
                "ssh.hosts.a.via",
                "passes more than 2 jump hosts (a -> b -> c -> d)",
            ),
            (json!({"a": h(Some("x y"))}), "ssh.hosts.a.via", "must be the name of another host in ssh.hosts"),
        ] {
            assert_eq!(policy(hosts).unwrap_err(), (field.to_owned(), why.to_owned()));
        }
    }

    #[test]
    fn addresses() {
        for (a, want) in [
            ("Host.EXAMPLE.com", Some("host.example.com")),
            ("127.0.0.1", Some("127.0.0.1")),
            ("::1", Some("::1")),
            ("[::1]", Some("::1")),
            ("[FE80::1]", Some("fe80::1")),
            ("[127.0.0.1]", None),
            ("a b", None),
            ("a/b", None),
            ("", None),
            ("a..b", None),
        ] {
            assert_eq!(normalize_address(a).as_deref(), want, "{a}");
        }
    }
}
