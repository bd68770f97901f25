//! `upstreams.NAME.elicitation` (issue 33, section 3): whether an upstream's
//! `elicitation/create` may reach the agent's client, during that upstream's call.
//!
//! ```json
//! "elicitation": {"form": true, "url_hosts": ["login.example.com", "127.0.0.1:8443"]}
//! ```
//!
//! Decisions (documented in `sp-policy(5)`): absent, nothing is relayed; `form` relays
//! form-mode requests (never for a secret-looking field: `tools/upstream/elicit.rs`);
//! `url_hosts` lists the hosts a URL-mode request may send the user to, each an exact
//! ASCII host name (an IDN in its `xn--` form) or IP address, lowercase, with an
//! optional `:port` (without one, only the scheme's default port). No wildcard: a
//! URL the user is sent to is a place the operator named.

use serde_json::Value;

use super::super::fields::{err, list, object, string, Check};

/// Hosts `url_hosts` may list.
pub(crate) const MAX_URL_HOSTS: usize = 64;

/// `elicitation`: what of an upstream's elicitation is relayed (nothing by default).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ElicitRules {
    /// Form mode relayed.
    pub form: bool,
    /// URL mode relayed for these hosts (`host` or `host:port`, as written).
    pub url_hosts: Vec<UrlHost>,
}

/// One `url_hosts` entry: a host (lowercase ASCII, as `url` serialises it) and its port,
/// `None` for the scheme's default.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UrlHost {
    pub host: String,
    pub port: Option<u16>,
}

impl ElicitRules {
    /// Whether any elicitation at all is relayed.
    pub fn any(&self) -> bool {
        self.form || !self.url_hosts.is_empty()
    }

    /// Whether a URL of `host` (as `url::Url::host_str` gives it) and explicit `port`
    /// (`url::Url::port`: `None` when it is the scheme's default) is listed.
    pub fn lists(&self, host: &str, port: Option<u16>) -> bool {
        self.url_hosts.iter().any(|h| h.host == host && h.port == port)
    }
}

pub(super) fn parse(v: &Value, field: &str) -> Check<ElicitRules> {
    let map = object(v, field, &["form", "url_hosts"])?;
    let form = match map.get("form") {
        None => false,
        Some(Value::Bool(b)) => *b,
        Some(_) => return err(&format!("{field}.form"), "must be a boolean"),
    };
    let mut url_hosts = Vec::new();
    if let Some(hosts) = map.get("url_hosts") {
        let at = format!("{field}.url_hosts");
        let items = list(hosts, &at)?;
        if items.len() > MAX_URL_HOSTS {
            return err(&at, format!("must hold at most {MAX_URL_HOSTS} hosts"));
        }
        for (i, h) in items.iter().enumerate() {
            let at = format!("{at}[{i}]");
            url_hosts.push(url_host(string(h, &at)?).map_err(|why| (at, why.to_owned()))?);
        }
    }
    Ok(ElicitRules { form, url_hosts })
}

/// `host` or `host:port` (`[v6]:port`), exactly as `url` would serialise it: lowercase
/// ASCII, IDN in `xn--` form, no trailing dot, no wildcard, user, path or scheme.
fn url_host(s: &str) -> Result<UrlHost, &'static str> {
    const SHAPE: &str =
        "must be a host name or IP address, lowercase ASCII (an IDN in its xn-- form), with an optional :port; no scheme, user, path or wildcard";
    if !s.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || matches!(b, b'.' | b'-' | b':' | b'[' | b']')) {
        return Err(SHAPE);
    }
    // Parsed as the authority of an https URL, then compared with what was written:
    // whatever `url` would rewrite (a trailing dot kept, `0x7f.1`, `127.1`, a default
    // port written out) is not the host as a URL will show it.
    let parsed = url::Url::parse(&format!("https://{s}/")).map_err(|_| SHAPE)?;
    let host = parsed.host_str().ok_or(SHAPE)?.to_owned();
    let port = parsed.port();
    let again = match port {
        Some(p) => format!("{host}:{p}"),
        None => host.clone(),
    };
    if again != s || host.ends_with('.') || host.is_empty() {
        return Err("must be written as a URL shows it (no trailing dot, no default port :443, IPv4 in dotted decimal)");
    }
    Ok(UrlHost { host, port })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn hosts_are_exact_and_as_a_url_shows_them() {
        let r = parse(&json!({"form": true, "url_hosts": ["login.example.com", "127.0.0.1:8443", "[::1]:9", "xn--bcher-kva.example"]}), "e").unwrap();
        assert!(r.form);
        assert!(r.lists("login.example.com", None));
        assert!(!r.lists("login.example.com", Some(8443)), "a port must be listed");
        assert!(r.lists("127.0.0.1", Some(8443)));
        assert!(r.lists("[::1]", Some(9)));
        for bad in [
            "*.example.com",
            "Login.example.com",
            "example.com.",
            "user@example.com",
            "https://example.com",
            "example.com/x",
            "bücher.example",
            "127.1",
            "example.com:443",
            "0x7f.0.0.1",
            "",
        ] {
            let e = parse(&json!({"url_hosts": [bad]}), "e").unwrap_err();
            assert_eq!(e.0, "e.url_hosts[0]", "{bad:?}: {e:?}");
        }
        assert_eq!(parse(&json!({"form": "yes"}), "e").unwrap_err().0, "e.form");
        assert_eq!(parse(&json!({"sampling": true}), "e").unwrap_err().0, "e.sampling");
        assert!(!parse(&json!({}), "e").unwrap().any());
    }
}
