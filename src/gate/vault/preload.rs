//! Reading every secret the policy names before the session serves (issue 31, section
//! 2): a stdio upstream runs as the user, and one that read a credential's file (or
//! its environment, or ran its command) could return the secret before any call had
//! used it, when the Vault did not know it yet and so could not scrub it.
//!
//! ```text
//!  sp mcp, before the first request (so before any upstream starts):
//!    each credential ── file / env / systemd / command ──> read, remembered
//!       aws_sigv4: the JSON document, its secret key and session token
//!       oauth2:    "client_id:client_secret", the client secret alone
//!    each SSH host ── key file (whole and line by line), passphrase file, password file
//!    a source that fails ──> one warning naming the credential and why (never a value);
//!                            the session serves; that secret is scrubbed once a call reads it
//! ```
//!
//! A `command` source runs here once (within its own timeout), and again each time a
//! call needs the secret, as before: its output is not cached, so a command that hands
//! out short-lived secrets still does. Short-lived values that do not exist yet (OAuth2
//! access tokens, SigV4 signatures) are remembered when they are fetched or made.

use super::Vault;
use crate::policy::ssh::SshAuth;
use crate::policy::{Injection, Policy, SecretSource};

/// What [`Vault::preload`] did: how many sources it read, and the warnings it logged.
#[derive(Debug, Default, PartialEq)]
pub(crate) struct Preloaded {
    pub read: usize,
    pub failed: Vec<String>,
}

impl Vault {
    /// Reads and remembers every secret `policy` names (module docs). Never fails: a
    /// source that cannot be read is a warning (the call that needs it fails as before).
    pub(crate) fn preload(&mut self, policy: &Policy) -> Preloaded {
        let mut out = Preloaded::default();
        let mut note = |r: Result<(), String>| match r {
            Ok(()) => out.read += 1,
            Err(why) => {
                log::warn!("redaction: {why}; not read ahead, so it is scrubbed from output only once a call has read it");
                out.failed.push(why);
            }
        };
        for c in policy.credentials.values() {
            let name = c.name.as_str();
            let r = match &c.inject {
                Injection::AwsSigV4(_) => self.read_json(name, &c.source).map_err(|e| e.to_string()).and_then(|secret| {
                    let creds = crate::cred::sigv4::Credentials::from_json(secret.expose().as_bytes()).map_err(|e| format!("credential {name:?}: {e}"))?;
                    self.remember(name, creds.secret_access_key());
                    if let Some(t) = creds.session_token() {
                        self.remember(name, t);
                    }
                    Ok(())
                }),
                Injection::OAuth2(_) => self.read(name, &c.source).map_err(|e| e.to_string()).and_then(|secret| {
                    let creds = crate::cred::oauth2::ClientCredentials::parse(secret.expose().as_bytes()).map_err(|e| format!("credential {name:?}: {e}"))?;
                    self.remember(name, creds.client_secret());
                    Ok(())
                }),
                _ => self.read(name, &c.source).map(drop).map_err(|e| e.to_string()),
            };
            note(r);
        }
        for h in policy.ssh.hosts.values() {
            // The name the SSH executor reads them under (`tools/ssh/connect.rs`).
            let credential = format!("ssh:{}", h.name);
            let file =
                |vault: &mut Vault, p: &std::path::Path| vault.read(&credential, &SecretSource::File(p.to_owned())).map(drop).map_err(|e| e.to_string());
            match &h.auth {
                SshAuth::Key { key_file, passphrase_file } => {
                    note(self.read_key_file(&credential, key_file).map(drop).map_err(|e| e.to_string()));
                    if let Some(p) = passphrase_file {
                        note(file(self, p));
                    }
                }
                SshAuth::Password { password_file } => note(file(self, password_file)),
                SshAuth::Agent => {}
            }
        }
        out
    }
}
