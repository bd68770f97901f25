//! The upstreams after a policy reload (issue 35 sections 3 and 5, `sp-policy(5)`
//! RELOAD): each configured upstream is kept, ended, restarted or added.
//!
//! ```text
//!  removed from the policy ──────────────> ended now (`exit` row), its tools gone
//!  changed (its section, a credential its env or requests use, the TLS roots)
//!                          ──────────────> ended now, started again at its next use
//!                                          under the new section (crash count reset)
//!  unchanged ────────────────────────────> kept running; its listing is made again at
//!                                          the next use, so its tools are checked
//!                                          against the pins file again
//!  added ────────────────────────────────> started at its first use, like at startup
//! ```
//!
//! A running process is never changed in place: its argv, environment and secrets were
//! fixed when it started. Ending one that changed is what makes the new section true.

use std::collections::BTreeSet;

use super::{Slot, UpstreamEvent, Upstreams};
use crate::policy::upstreams::{EnvValue, Upstream, UpstreamTransport};
use crate::policy::Policy;

impl Upstreams {
    /// Applies `policy` (module docs). The events (`exit` of those ended) go to the
    /// journal like any other; the generation moves, so the next `tools/list` is made
    /// again and the client is told.
    pub(crate) fn reload(&mut self, policy: &Policy) {
        let roots = policy.http.ca_certs.as_ref().map(|b| b.der.clone());
        let changed_credentials: BTreeSet<&str> = self
            .credentials
            .keys()
            .chain(policy.credentials.keys())
            .filter(|n| self.credentials.get(*n) != policy.credentials.get(*n))
            .map(String::as_str)
            .collect();
        let roots_changed = roots != self.roots;
        let mut end = Vec::new();
        for (name, slot) in &self.slots {
            match policy.upstreams.get(name) {
                None => end.push((name.clone(), "removed from the policy by a reload")),
                Some(new) if *new != slot.policy || uses_any(new, &changed_credentials) || (roots_changed && is_http(new)) => {
                    end.push((name.clone(), "changed by a policy reload; started again at its next use"))
                }
                Some(_) => {}
            }
        }
        let changed_credentials: Vec<String> = changed_credentials.into_iter().map(str::to_owned).collect();
        for (name, why) in end {
            if let Some(slot) = self.slots.get_mut(&name)
                && let Some(mut client) = slot.client.take()
            {
                client.close();
                self.events.push(UpstreamEvent::Ended { upstream: name.clone(), why: why.to_owned() });
            }
            self.tables.0.remove(&name);
            self.slots.remove(&name);
        }
        for (name, u) in &policy.upstreams {
            let slot = self.slots.entry(name.clone()).or_insert_with(|| Slot {
                policy: u.clone(),
                client: None,
                bearer: None,
                listing: None,
                run: 0,
                deaths: Default::default(),
                starts: 0,
                announced: false,
                withdrawn: false,
            });
            // Listed again at its next use: the pins file decides afresh (section 5).
            slot.listing = None;
            slot.announced = false;
        }
        self.credentials = policy.credentials.clone();
        self.roots = roots;
        self.generation += 1;
        if !changed_credentials.is_empty() {
            log::debug!("policy reload: credentials changed: {}", changed_credentials.join(", "));
        }
    }
}

/// Whether `u` hands the secret of one of `credentials` to its process or its requests.
fn uses_any(u: &Upstream, credentials: &BTreeSet<&str>) -> bool {
    match &u.transport {
        UpstreamTransport::Stdio { env, .. } => env.values().any(|v| matches!(v, EnvValue::Credential(c) if credentials.contains(c.as_str()))),
        UpstreamTransport::Http { credential, .. } => credential.as_deref().is_some_and(|c| credentials.contains(c)),
    }
}

fn is_http(u: &Upstream) -> bool {
    matches!(u.transport, UpstreamTransport::Http { .. })
}
