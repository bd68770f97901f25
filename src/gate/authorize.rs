//! Stage 6: (typed call, policy) -> an authorized action, or a denial.
//!
//! [`Authorized<A>`] has a private field and no public constructor: [`authorize`] is the
//! only way to make one, and the executors accept nothing else. Their signatures are the
//! proof that authorization ran (DESIGN.md, "The pipeline").
//!
//! The rules live with their tool: `http/authorize.rs` (allow rules, credential binding,
//! HTTPS for credentials, redirect hops) and `ssh/authorize.rs` (hosts, command
//! allow-list, timeouts); this module runs them and wraps what they allow.
//!
//! Nothing here reads a secret, resolves a name or opens a socket.

use crate::gate::outcome::ToolCode;
use std::fmt;

use serde_json::{json, Value};

use crate::policy::{Injection, Policy};
use crate::tools::ToolCall;
pub(crate) use crate::tools::http::authorize::{HttpAction, HttpDenial, RedirectStop};

/// Proof that the policy allowed the wrapped action. Only this module can build one.
#[derive(Debug)]
pub struct Authorized<A>(A);

impl<A> Authorized<A> {
    pub fn action(&self) -> &A {
        &self.0
    }
}

#[derive(Debug)]
#[allow(clippy::large_enum_variant, reason = "one per request, never stored in bulk")]
pub enum Action {
    Http(Authorized<HttpAction>),
    Inventory(Authorized<Inventory>),
    /// `ssh_exec` (issue #4): built only in [`authorize`], checked by `ssh::authorize`.
    Ssh(Authorized<crate::tools::ssh::SshAction>),
}

/// What `sp_inventory` shows: names, hosts, paths, methods. Never a secret or its source.
#[derive(Debug, Clone, PartialEq)]
pub struct Inventory(pub Value);

/// Why a call is not authorized: the HTTP or the SSH rules refused it.
#[derive(Debug, PartialEq, Eq)]
pub enum Denial {
    Http(HttpDenial),
    /// An `ssh_exec` refusal (unknown host, command not on the list, timeout too long).
    Ssh(crate::tools::ssh::SshDenial),
}

impl fmt::Display for Denial {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Denial::Http(d) => d.fmt(f),
            Denial::Ssh(d) => d.fmt(f),
        }
    }
}

impl std::error::Error for Denial {}

impl Denial {
    /// The journal reason and tool error code: `SP_DENIED`, except arguments no policy
    /// could allow (`SP_BAD_ARGUMENTS`).
    pub fn code(&self) -> (&'static str, &'static str) {
        match self {
            Denial::Http(d) => d.code(),
            Denial::Ssh(_) => ("denied", ToolCode::Denied.as_str()),
        }
    }
}

pub fn authorize(policy: &Policy, call: ToolCall) -> Result<Action, Denial> {
    match call {
        ToolCall::Http(req) => crate::tools::http::authorize::authorize(policy, req, true).map(|a| Action::Http(Authorized(a))).map_err(Denial::Http),
        ToolCall::Inventory => Ok(Action::Inventory(Authorized(inventory(policy)))),
        ToolCall::Ssh(call) => crate::tools::ssh::authorize(&policy.ssh, call).map(|a| Action::Ssh(Authorized(a))).map_err(Denial::Ssh),
    }
}

/// Authorizes one redirect hop of an authorized request (`http::authorize::redirect`).
pub(crate) fn authorize_redirect(
    policy: &Policy,
    previous: &Authorized<HttpAction>,
    hops_so_far: u32,
    status: u16,
    location: &str,
) -> Result<Authorized<HttpAction>, RedirectStop> {
    crate::tools::http::authorize::redirect(policy, &previous.0, hops_so_far, status, location).map(Authorized)
}

fn inventory(policy: &Policy) -> Inventory {
    let texts = |v: &[crate::policy::HostPattern]| v.iter().map(|h| h.text.clone()).collect::<Vec<_>>();
    let paths = |v: &[crate::policy::PathPattern]| v.iter().map(|p| p.text()).collect::<Vec<_>>();
    let allow: Vec<Value> = policy
        .http
        .allow
        .iter()
        .map(|r| {
            json!({
                "hosts": texts(&r.hosts),
                "methods": r.methods.iter().map(|m| m.as_str()).collect::<Vec<_>>(),
                "paths": paths(&r.paths),
            })
        })
        .collect();
    let credentials: Vec<Value> = policy
        .credentials
        .values()
        .map(|c| {
            let mut v = json!({"name": c.name, "hosts": texts(&c.hosts), "paths": paths(&c.paths)});
            // Issue #13: the scheme and its public settings, never a key or token.
            v["scheme"] = json!(match &c.inject {
                Injection::Bearer => "bearer",
                Injection::Basic => "basic",
                Injection::Header { .. } => "header",
                Injection::Query { .. } => "query",
                Injection::AwsSigV4(s) => {
                    v["region"] = json!(s.scope.region());
                    v["service"] = json!(s.scope.service());
                    "aws_sigv4"
                }
                Injection::OAuth2(t) => {
                    v["scopes"] = json!(t.scope_list());
                    "oauth2"
                }
            });
            if let Some(m) = &c.methods {
                v["methods"] = json!(m.iter().map(|m| m.as_str()).collect::<Vec<_>>());
            }
            v
        })
        .collect();
    let mut inv = json!({
        "http": {"allow": allow, "credentials": credentials},
        "ssh": {"hosts": crate::tools::ssh::inventory(&policy.ssh)},
    });
    // Issue #5: the agent learns which calls wait for a human's approval.
    for (list, http) in [("/http/credentials", true), ("/ssh/hosts", false)] {
        let flagged = |n: &str| if http { policy.credential_needs_approval(n) } else { policy.ssh_host_needs_approval(n) };
        for entry in inv.pointer_mut(list).and_then(Value::as_array_mut).into_iter().flatten() {
            if entry["name"].as_str().is_some_and(flagged) {
                entry["approve"] = json!(true);
            }
        }
    }
    Inventory(inv)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::Method;
    use crate::tools::{call_request, ToolCall};

    fn policy() -> Policy {
        let v = json!({
            "credentials": {
                "api": {"source": {"env": "API"}, "inject": {"bearer": {}}, "hosts": ["api.example.com"], "paths": ["/v1/*"]},
                "keyed": {"source": {"env": "K"}, "inject": {"header": {"name": "X-Key"}}, "hosts": ["api.example.com"], "paths": ["/v2/*"]},
                "local": {"source": {"env": "L"}, "inject": {"bearer": {}}, "hosts": ["127.0.0.1:8080", "plain.example.com"]},
                "q": {"source": {"env": "Q"}, "inject": {"query": {"name": "api_key"}}, "hosts": ["q.example.net"]},
                "readonly": {"source": {"env": "R"}, "inject": {"basic": {}}, "hosts": ["ro.example.net"], "methods": ["GET"]}
            },
            "http": {"allow": [
                {"hosts": ["api.example.com"], "methods": ["GET", "POST"], "paths": ["/v1/*", "/v2/*", "/public"]},
                {"hosts": ["127.0.0.1:8080", "plain.example.com"], "methods": ["*"]},
                {"hosts": ["*.example.org"]},
                {"hosts": ["q.example.net", "ro.example.net"], "methods": ["*"]}
            ], "max_request_body_bytes": 64}
        });
        Policy::from_text(&v.to_string(), std::path::Path::new("test.json")).unwrap()
    }

    fn call(args: Value) -> Result<HttpAction, Denial> {
        let req = call_request(Some(json!({"name": "http_request", "arguments": args}))).unwrap();
        match authorize(&policy(), ToolCall::parse(&req).unwrap())? {
            Action::Http(a) => Ok(a.0),
            Action::Inventory(_) | Action::Ssh(_) => panic!(),
        }
    }

    fn cred(a: &HttpAction) -> Option<&str> {
        a.credential.as_ref().map(|c| c.name.as_str())
    }

    #[test]
    fn allowed() {
        let a = call(json!({"method": "GET", "url": "https://api.example.com/v1/users"})).unwrap();
        assert_eq!((cred(&a), a.rule.as_str()), (Some("api"), "http.allow[0]"));
        let a = call(json!({"method": "GET", "url": "https://api.example.com/public"})).unwrap();
        assert_eq!(cred(&a), None);
        let a = call(json!({"method": "POST", "url": "https://api.example.com/v2/x", "credential": "keyed"})).unwrap();
        assert_eq!(cred(&a), Some("keyed"));
        let a = call(json!({"method": "DELETE", "url": "http://127.0.0.1:8080/x"})).unwrap();
        assert_eq!((cred(&a), a.rule.as_str()), (Some("local"), "http.allow[1]"));
        let a = call(json!({"method": "HEAD", "url": "https://x.example.org/"})).unwrap();
        assert_eq!((cred(&a), a.rule.as_str()), (None, "http.allow[2]"));
        let a = call(json!({"method": "GET", "url": "https://ro.example.net/x"})).unwrap();
        assert_eq!(cred(&a), Some("readonly"));
        // a credential limited to GET is not picked for POST: the request goes without it
        let a = call(json!({"method": "POST", "url": "https://ro.example.net/x", "body": "{}"})).unwrap();
        assert_eq!(cred(&a), None);
    }

    #[test]
    fn denied() {
        let cases = vec![
            (json!({"method": "DELETE", "url": "https://api.example.com/v1/users"}), "no http.allow rule"),
            (json!({"method": "GET", "url": "https://api.example.com/v3"}), "no http.allow rule"),
            (json!({"method": "GET", "url": "https://api.example.com:8443/v1/x"}), "no http.allow rule"),
            (json!({"method": "GET", "url": "https://evil.com/v1/x"}), "no http.allow rule"),
            (json!({"method": "GET", "url": "https://example.org/"}), "no http.allow rule"),
            (json!({"method": "GET", "url": "https://api.example.com.evil.com/v1/"}), "no http.allow rule"),
            (json!({"method": "GET", "url": "https://api.example.com/v1/../admin"}), "no http.allow rule"),
            (json!({"method": "POST", "url": "http://127.0.0.1:8081/"}), "no http.allow rule"),
            (json!({"method": "GET", "url": "https://api.example.com/public", "credential": "api"}), "not bound"),
            (json!({"method": "GET", "url": "https://api.example.com/v1/x", "credential": "nope"}), "no credential named"),
            (json!({"method": "GET", "url": "http://plain.example.com/"}), "only sent over https"),
            (json!({"method": "GET", "url": "https://api.example.com/v2/x", "headers": {"x-key": "mine"}}), "reserved for credential"),
            (json!({"method": "GET", "url": "https://q.example.net/x?api_key=mine"}), "reserved for credential"),
            (json!({"method": "GET", "url": "https://q.example.net/x", "query": {"api_key": "mine"}}), "reserved for credential"),
            (json!({"method": "POST", "url": "https://q.example.net/x", "body": "x".repeat(65)}), "max_request_body_bytes"),
            (json!({"method": "POST", "url": "https://ro.example.net/x", "credential": "readonly"}), "not bound"),
        ];
        for (args, want) in cases {
            let shown = args.to_string();
            let got = call(args).map(|a| a.rule).unwrap_err().to_string();
            assert!(got.contains(want), "{shown}: {got}");
        }
    }

    fn action(args: Value) -> Authorized<HttpAction> {
        Authorized(call(args).unwrap())
    }

    #[test]
    fn redirects() {
        let p = policy();
        let plain = action(json!({"method": "GET", "url": "https://x.example.org/a/b"}));
        let hop = |prev: &Authorized<HttpAction>, hops: u32, status: u16, loc: &str| authorize_redirect(&p, prev, hops, status, loc);
        let next = hop(&plain, 0, 302, "../c?q=1#frag").unwrap();
        assert_eq!(next.0.url.as_str(), "https://x.example.org/c?q=1");
        assert_eq!(next.0.credential, None);
        assert_eq!(hop(&plain, 5, 302, "/c").unwrap_err(), RedirectStop::TooMany { limit: 5 });
        for loc in ["https://y.example.org/", "http://x.example.org/", "https://x.example.org:8443/", "//evil.com/"] {
            assert!(matches!(hop(&plain, 0, 301, loc), Err(RedirectStop::CrossOrigin { .. })), "{loc}");
        }
        assert!(matches!(hop(&plain, 0, 302, "https://u:p@x.example.org/"), Err(RedirectStop::BadLocation(_))));
        // issue 8.5: a Location is held to the same % rule as a URL the agent wrote
        for loc in ["/a/%+9x", "/a/%4", "/a/x%"] {
            let got = hop(&plain, 0, 302, loc).unwrap_err().to_string();
            assert!(got.contains("the Location cannot be followed") && got.contains("two hex digits"), "{loc}: {got}");
        }
        let credentialed = action(json!({"method": "GET", "url": "https://api.example.com/v1/users"}));
        assert_eq!(hop(&credentialed, 0, 302, "/v1/other").unwrap_err(), RedirectStop::Credentialed);
        // same origin, but the allow rule does not cover the new path
        let public = action(json!({"method": "POST", "url": "https://api.example.com/public", "body": "x"}));
        assert!(matches!(hop(&public, 0, 307, "/admin"), Err(RedirectStop::Denied(HttpDenial::NoRule { .. }))));
        // a hop onto a path with a bound credential still goes without it
        let to_bound = hop(&public, 0, 307, "/v1/users").unwrap();
        assert_eq!((to_bound.0.method, to_bound.0.body.as_deref(), to_bound.0.credential.as_ref()), (Method::Post, Some("x"), None));
        let see_other = hop(&public, 0, 303, "/v1/users").unwrap();
        assert_eq!((see_other.0.method, see_other.0.body.as_deref()), (Method::Get, None));
    }

    #[test]
    fn https_only() {
        let mut p = policy();
        p.http.https_only = true;
        let req = call_request(Some(json!({"name": "http_request", "arguments": {"method": "DELETE", "url": "http://127.0.0.1:8080/x"}}))).unwrap();
        assert!(matches!(authorize(&p, ToolCall::parse(&req).unwrap()), Err(Denial::Http(HttpDenial::HttpsOnly))));
    }

    #[test]
    fn inventory_has_no_sources() {
        let Action::Inventory(inv) = authorize(&policy(), ToolCall::Inventory).unwrap() else { panic!() };
        let text = inv.action().0.to_string();
        assert!(text.contains("\"api\"") && text.contains("127.0.0.1:8080"));
        assert!(!text.contains("env") && !text.contains("API\""));
    }
}
