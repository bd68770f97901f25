//! The authorization of `http_request` (`sp-policy(5)`), called by `authorize.rs`, which
//! alone wraps the result in `Authorized`:
//! 1. some `http.allow` rule must match the host (and port), method and normalised path;
//!    the first matching rule is recorded;
//! 2. if the agent named a credential it must exist and be bound to this host and path;
//!    if it named none, the first credential by name bound to this host and path is used,
//!    if any; a credential is never sent anywhere outside its binding;
//! 3. a credential travels only over HTTPS, except to loopback (127.0.0.0/8, `[::1]`, and
//!    `localhost` and names under `.localhost`, which `dest.rs` resolves to loopback
//!    only, never asking a resolver: RFC 6761 6.3), so tests and local sidecars work;
//! 4. the agent may not set the header the credential is injected into (any case, `_`
//!    for `-`), nor a routing header (`X-Forwarded-Host`, `Forwarded`, ...: a proxy in
//!    front of the server would send the credential elsewhere) unless the credential's
//!    `allow_routing_headers` names it;
//! 5. a redirect hop ([`Hop`], [`redirect`]) goes through the same rules, without a
//!    credential.
//!
//! `gate::authorize` wraps what these rules allow: `HttpAction` implements `Rules` for
//! an [`HttpRequest`] (the agent's call) and for a [`Hop`] (a 3xx answer to an
//! authorized request), so a followed redirect is authorized exactly like a call.
//!
//! Nothing here reads a secret, resolves a name or opens a socket.

use std::fmt;
use std::time::Duration;

use crate::gate::authorize::{Authorized, Rules};
use crate::gate::outcome::ToolCode;
use crate::policy::approval::Approve;
use crate::policy::{Credential, Injection, Method, Policy, SecretSource};
use crate::tools::http::args::HttpRequest;
use crate::tools::http::url::redirect_target;

/// The credential an authorized HTTP call carries: where to read it and how to inject
/// it. The value itself is read by the executor, after authorization.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CredentialUse {
    pub name: String,
    pub source: SecretSource,
    pub inject: Injection,
}

#[derive(Debug, Clone, PartialEq)]
pub struct HttpAction {
    pub method: Method,
    pub url: url::Url,
    pub headers: Vec<(String, String)>,
    pub body: Option<String>,
    pub credential: Option<CredentialUse>,
    /// `http.allow[N]`: the rule that allowed the call.
    pub rule: String,
    /// Its `N` (`sp explain` shows the rule's text).
    pub rule_index: usize,
    /// Some allow rule that permits this call names the host exactly (no wildcard).
    /// Private destinations (loopback, RFC 1918, CGNAT, ULA) are reachable only then.
    pub host_named_exactly: bool,
    /// `http.allow[N]` of a rule that permits this call and asks for approval (its
    /// `"approve"`), `"command"` ones first; `None` when no permitting rule asks.
    pub rule_approve: Option<(String, Approve)>,
    pub timeout: Duration,
    pub max_response_bytes: u64,
}

#[derive(Debug, PartialEq, Eq)]
pub enum HttpDenial {
    NoRule {
        method: Method,
        host: String,
        port: u16,
        path: String,
    },
    UnknownCredential {
        name: String,
    },
    CredentialNotBound {
        name: String,
        host: String,
        path: String,
    },
    CredentialNeedsHttps {
        name: String,
    },
    HeaderConflict {
        name: String,
        header: String,
    },
    /// A routing header on a credentialed request that `allow_routing_headers` of
    /// credential `name` does not name.
    RoutingHeader {
        name: String,
        header: String,
    },
    QueryConflict {
        name: String,
        param: String,
    },
    /// `Authorization` or an `X-Amz-*` header or query parameter on a request
    /// signed with the `aws_sigv4` credential `name` (`SP_BAD_ARGUMENTS`, see [`HttpDenial::code`]).
    SignerOwns {
        name: String,
        field: String,
    },
    BodyTooLarge {
        limit: u64,
    },
    HttpsOnly,
}

impl fmt::Display for HttpDenial {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            HttpDenial::NoRule { method, host, port, path } => {
                write!(f, "no http.allow rule permits {method} {host}:{port}{path}")
            }
            HttpDenial::UnknownCredential { name } => write!(f, "there is no credential named {name:?}"),
            HttpDenial::CredentialNotBound { name, host, path } => {
                write!(f, "credential {name:?} is not bound to {host}{path}")
            }
            HttpDenial::CredentialNeedsHttps { name } => {
                write!(f, "credential {name:?} is only sent over https (or to a loopback address)")
            }
            HttpDenial::HeaderConflict { name, header } => {
                write!(f, "header {header:?} is reserved for credential {name:?}")
            }
            HttpDenial::RoutingHeader { name, header } => write!(
                f,
                "header {header:?} could route credential {name:?} to another host or path behind a proxy; send it only if credentials.{name}.allow_routing_headers names it (see sp-policy(5), REQUEST OVERRIDES)"
            ),
            HttpDenial::QueryConflict { name, param } => {
                write!(f, "query parameter {param:?} is reserved for credential {name:?}")
            }
            HttpDenial::SignerOwns { name, field } => write!(
                f,
                "{field:?} is set by sp when it signs for credential {name:?} (aws_sigv4): send no Authorization and no X-Amz-* header or query parameter"
            ),
            HttpDenial::HttpsOnly => f.write_str("the policy allows https:// URLs only (http.https_only)"),
            HttpDenial::BodyTooLarge { limit } => {
                write!(f, "the request body is larger than http.max_request_body_bytes ({limit})")
            }
        }
    }
}

impl std::error::Error for HttpDenial {}

impl HttpDenial {
    /// The tool error code: `SP_DENIED`, except arguments no policy could allow
    /// (`SP_BAD_ARGUMENTS`).
    pub(crate) fn code(&self) -> ToolCode {
        match self {
            HttpDenial::SignerOwns { .. } => ToolCode::BadArguments,
            _ => ToolCode::Denied,
        }
    }
}

fn binds(c: &Credential, req: &HttpRequest) -> bool {
    c.hosts.iter().any(|h| h.matches(&req.host, req.port, req.default_port))
        && c.paths.iter().any(|p| p.matches(&req.match_path))
        && c.methods.as_ref().is_none_or(|m| m.contains(&req.method))
}

/// A host that can only be loopback: an IPv4 loopback literal, `[::1]`, or a name that
/// `dest.rs` answers with the loopback addresses itself (`localhost`, `*.localhost`).
pub(crate) fn is_loopback_host(host: &str) -> bool {
    host == "[::1]"
        || host.parse::<std::net::Ipv4Addr>().is_ok_and(|a| a.is_loopback())
        || crate::net::dest::localhost_addrs(host).is_some_and(|ips| ips.iter().all(std::net::IpAddr::is_loopback))
}

/// Header names as CGI, WSGI and PHP read them: any case, `_` the same as `-`.
fn same_header(a: &str, b: &str) -> bool {
    a.len() == b.len()
        && a.bytes().zip(b.bytes()).all(|(x, y)| {
            let fold = |c: u8| if c == b'_' { b'-' } else { c.to_ascii_lowercase() };
            fold(x) == fold(y)
        })
}

impl Rules<HttpRequest> for HttpAction {
    type Denial = HttpDenial;
    fn check(policy: &Policy, req: HttpRequest) -> Result<HttpAction, HttpDenial> {
        authorize(policy, req, true)
    }
}

/// A 3xx answer to an authorized request that asks to go on (ureq-proto's redirect
/// state): the request it answered, the hops already followed, the status and the
/// `Location`. Authorizing it yields the next authorized request or why to stop
/// ([`RedirectStop`]); nothing else makes a hop's request.
#[derive(Debug)]
pub(crate) struct Hop<'a> {
    previous: &'a Authorized<HttpAction>,
    hops_so_far: u32,
    status: u16,
    location: String,
}

impl<'a> Hop<'a> {
    /// The hop an answer asks for: a 301, 302, 303, 307 or 308 with a `Location` header
    /// (the first, as sent, before any scrubbing); `None` for any other answer.
    pub(crate) fn of(previous: &'a Authorized<HttpAction>, hops_so_far: u32, status: u16, headers: &[(String, String)]) -> Option<Hop<'a>> {
        if !matches!(status, 301 | 302 | 303 | 307 | 308) {
            return None;
        }
        let location = headers.iter().find(|(n, _)| n == "location")?.1.clone();
        Some(Hop { previous, hops_so_far, status, location })
    }

    /// The `Location` as the server sent it.
    pub(crate) fn location(&self) -> &str {
        &self.location
    }

    /// The hop through the rules: the next request, authorized, or why it stops here.
    pub(crate) fn follow(&self, policy: &Policy) -> Result<Authorized<HttpAction>, RedirectStop> {
        crate::gate::authorize::authorize(policy, self)
    }
}

impl Rules<&Hop<'_>> for HttpAction {
    type Denial = RedirectStop;
    fn check(policy: &Policy, hop: &Hop<'_>) -> Result<HttpAction, RedirectStop> {
        redirect(policy, hop.previous.action(), hop.hops_so_far, hop.status, &hop.location)
    }
}

/// Why a redirect was not followed; the 3xx is returned to the agent as data.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum RedirectStop {
    Credentialed,
    /// The hop's request is one an allow rule asks approval for (`rule`): the approval
    /// given covered the first request only.
    NeedsApproval {
        rule: String,
    },
    TooMany {
        limit: u32,
    },
    CrossOrigin {
        to: String,
    },
    BadLocation(String),
    Denied(HttpDenial),
}

impl fmt::Display for RedirectStop {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RedirectStop::Credentialed => f.write_str("a request that carries a credential never follows redirects"),
            RedirectStop::NeedsApproval { rule } => write!(f, "{rule} asks approval for the redirect target; call it yourself to be asked"),
            RedirectStop::TooMany { limit } => write!(f, "more than http.max_redirects ({limit}) redirects"),
            RedirectStop::CrossOrigin { to } => write!(f, "redirects are followed only within the same origin, not to {to}"),
            RedirectStop::BadLocation(m) => write!(f, "the Location cannot be followed: {m}"),
            RedirectStop::Denied(d) => write!(f, "the redirect target is not allowed: {d}"),
        }
    }
}

impl std::error::Error for RedirectStop {}

/// Authorizes one redirect hop: only for a request without a credential,
/// within `max_redirects`, to the same scheme, host and port, and through the same
/// allow rules as a fresh call. The hop never picks up a credential, even one bound to
/// the new path: the server chose that URL, not the agent. 303 (and 301/302 after a
/// POST) become GET without a body, as browsers do; 307 and 308 keep method and body.
fn redirect(policy: &Policy, prev: &HttpAction, hops_so_far: u32, status: u16, location: &str) -> Result<HttpAction, RedirectStop> {
    if prev.credential.is_some() {
        return Err(RedirectStop::Credentialed);
    }
    if hops_so_far >= policy.http.max_redirects {
        return Err(RedirectStop::TooMany { limit: policy.http.max_redirects });
    }
    let next = redirect_target(&prev.url, location).map_err(|e| RedirectStop::BadLocation(e.0))?;
    if next.origin() != prev.url.origin() {
        return Err(RedirectStop::CrossOrigin { to: next.origin().ascii_serialization() });
    }
    let (method, body) = match (status, prev.method) {
        (307 | 308, m) => (m, prev.body.clone()),
        (_, Method::Head) => (Method::Head, None),
        (303, _) | (301 | 302, Method::Post) => (Method::Get, None),
        (_, m) => (m, prev.body.clone()),
    };
    let req = HttpRequest::new(method, next, prev.headers.clone(), body, None).map_err(|e| RedirectStop::BadLocation(e.0))?;
    let next = authorize(policy, req, false).map_err(RedirectStop::Denied)?;
    // Approval is asked once per call, before it runs: a hop is never asked, so a
    // hop that a rule would ask for is not followed.
    match next.rule_approve {
        Some((rule, _)) => Err(RedirectStop::NeedsApproval { rule }),
        None => Ok(next),
    }
}

/// The HTTP rules (module docs) for one request: the first matching allow rule, the
/// credential it may carry, and the checks that credential imposes. `may_pick_credential`
/// is false for a redirect hop (the server chose that URL, not the agent).
fn authorize(policy: &Policy, req: HttpRequest, may_pick_credential: bool) -> Result<HttpAction, HttpDenial> {
    if policy.http.https_only && req.url.scheme() != "https" {
        return Err(HttpDenial::HttpsOnly);
    }
    let found = policy.http.allow.iter().find(|r| {
        r.methods.contains(&req.method)
            && r.hosts.iter().any(|h| h.matches(&req.host, req.port, req.default_port))
            && r.paths.iter().any(|p| p.matches(&req.match_path))
    });
    // The request is not needed any more: its host and path move into the denial.
    let Some(rule) = found else {
        return Err(HttpDenial::NoRule { method: req.method, host: req.host, port: req.port, path: req.match_path });
    };

    let credential = match &req.credential {
        Some(name) => {
            let c = policy.credentials.get(name).ok_or_else(|| HttpDenial::UnknownCredential { name: name.clone() })?;
            if !binds(c, &req) {
                return Err(HttpDenial::CredentialNotBound { name: name.clone(), host: req.host.clone(), path: req.match_path.clone() });
            }
            Some(c)
        }
        None if may_pick_credential => policy.credentials.values().find(|c| binds(c, &req)),
        None => None,
    };
    if let Some(c) = credential {
        if req.url.scheme() != "https" && !is_loopback_host(&req.host) {
            return Err(HttpDenial::CredentialNeedsHttps { name: c.name.clone() });
        }
        if let Some((header, _)) =
            req.headers.iter().find(|(n, _)| crate::tools::http::args::is_routing_header(n) && !c.allow_routing_headers.iter().any(|a| same_header(a, n)))
        {
            return Err(HttpDenial::RoutingHeader { name: c.name.clone(), header: header.clone() });
        }
        match &c.inject {
            Injection::Query { name } => {
                if req.url.query_pairs().any(|(k, _)| k == name.as_str()) {
                    return Err(HttpDenial::QueryConflict { name: c.name.clone(), param: name.clone() });
                }
            }
            Injection::AwsSigV4(_) => {
                if let Some(field) = crate::cred::sigv4::refused_agent_name(req.headers.iter().map(|(n, _)| n.as_str()), &req.url) {
                    return Err(HttpDenial::SignerOwns { name: c.name.clone(), field });
                }
            }
            other => {
                let header = other.header_name().unwrap_or_default();
                if req.headers.iter().any(|(n, _)| same_header(n, &header)) {
                    return Err(HttpDenial::HeaderConflict { name: c.name.clone(), header });
                }
            }
        }
    }
    let limit = policy.http.max_request_body_bytes;
    if req.body.as_ref().is_some_and(|b| b.len() as u64 > limit) {
        return Err(HttpDenial::BodyTooLarge { limit });
    }
    // Every rule that permits the call counts, as for host_named_exactly: a rule that asks
    // is not hidden by a broader one listed before it.
    let permits = |r: &&crate::policy::AllowRule| {
        r.methods.contains(&req.method)
            && r.hosts.iter().any(|h| h.matches(&req.host, req.port, req.default_port))
            && r.paths.iter().any(|p| p.matches(&req.match_path))
    };
    let asking = |a: Approve| policy.http.allow.iter().filter(permits).find(|r| r.approve == a).map(|r| (format!("http.allow[{}]", r.index), a));
    let rule_approve = asking(Approve::Command).or_else(|| asking(Approve::Yes));
    Ok(HttpAction {
        rule_approve,
        method: req.method,
        url: req.url,
        headers: req.headers,
        body: req.body,
        credential: credential.map(|c| CredentialUse { name: c.name.clone(), source: c.source.clone(), inject: c.inject.clone() }),
        rule: format!("http.allow[{}]", rule.index),
        rule_index: rule.index,
        // Any allow rule that permits this call and names the host exactly counts, not
        // only the first match (a `*.corp` rule listed before `db.corp` must not hide it).
        host_named_exactly: policy.http.allow.iter().any(|r| {
            r.methods.contains(&req.method)
                && r.paths.iter().any(|p| p.matches(&req.match_path))
                && r.hosts.iter().any(|h| h.is_exact() && h.matches(&req.host, req.port, req.default_port))
        }),
        timeout: policy.http.timeout,
        max_response_bytes: policy.http.max_response_bytes,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tools::http::args::parse;
    use serde_json::{json, Value};

    fn policy() -> Policy {
        let v = json!({
            "credentials": {
                "api": {"source": {"env": "A"}, "inject": {"header": {"name": "X-Api-Key"}}, "hosts": ["api.example.com"]},
                "proxied": {"source": {"env": "P"}, "inject": {"bearer": {}}, "hosts": ["behind.example.com"], "allow_routing_headers": ["X_Forwarded_Proto", "forwarded"]},
                "local": {"source": {"env": "L"}, "inject": {"bearer": {}}, "hosts": ["localhost:8080", "svc.localhost:8080", "[::1]:8080", "127.0.0.2:8080", "localhost.example.com:8080"]}
            },
            "http": {"allow": [
                {"hosts": ["api.example.com", "open.example.com", "behind.example.com"], "methods": ["*"]},
                {"hosts": ["localhost:8080", "svc.localhost:8080", "[::1]:8080", "127.0.0.2:8080", "localhost.example.com:8080"], "methods": ["*"]}
            ]}
        });
        Policy::from_text(&v.to_string(), std::path::Path::new("test.json")).unwrap()
    }

    fn run(args: Value) -> Result<Option<String>, HttpDenial> {
        let Value::Object(a) = args else { panic!() };
        let req = parse(&a).unwrap_or_else(|e| panic!("{}", e.0));
        authorize(&policy(), req, true).map(|a| a.credential.map(|c| c.name))
    }

    // Attacks tried: every ROUTING_HEADERS name and members of its prefix classes, in
    // lower, upper and mixed case and with `_` for `-`, on a credentialed request:
    // refused; the same on an uncredentialed request, X-Forwarded-For, and the ones a
    // credential's `allow_routing_headers` names (in another spelling than the
    // policy's): sent. The injected header spelled `X_API_KEY` by the agent: refused.
    #[test]
    fn routing_headers_need_the_credentials_permission_by_name() {
        let names = [
            "Forwarded",
            "Destination",
            "X-Host",
            "X-HTTP-Host-Override",
            "X-URL-Scheme",
            "Front-End-Https",
            "X-Forwarded-Host",
            "X-Forwarded-Proto",
            "X-Forwarded-Port",
            "X-Forwarded-Server",
            "X-Forwarded-Scheme",
            "X-Forwarded-Ssl",
            "X-Original-Host",
            "X-Rewrite-Uri",
            "X-Envoy-Original-Url",
            "X-Envoy-Original-Host",
        ];
        for name in names {
            for h in [name.to_owned(), name.to_ascii_lowercase(), name.to_ascii_uppercase(), name.replace('-', "_")] {
                let got = run(json!({"method": "GET", "url": "https://api.example.com/x", "headers": {h.clone(): "evil.example"}}));
                assert_eq!(got, Err(HttpDenial::RoutingHeader { name: "api".into(), header: h.to_ascii_lowercase() }), "{h}");
                let got = run(json!({"method": "GET", "url": "https://open.example.com/x", "headers": {h.clone(): "evil.example"}}));
                assert_eq!(got, Ok(None), "{h} without a credential");
            }
        }
        let got = run(json!({"method": "GET", "url": "https://api.example.com/x", "headers": {"X-Forwarded-For": "10.0.0.1"}}));
        assert_eq!(got, Ok(Some("api".into())));
        for h in ["x-forwarded-proto", "X-Forwarded-Proto", "X_FORWARDED_PROTO", "Forwarded"] {
            let got = run(json!({"method": "GET", "url": "https://behind.example.com/x", "headers": {h: "https"}}));
            assert_eq!(got, Ok(Some("proxied".into())), "{h} is allowed by name");
        }
        let got = run(json!({"method": "GET", "url": "https://behind.example.com/x", "headers": {"X-Forwarded-Host": "evil.example"}}));
        assert_eq!(got, Err(HttpDenial::RoutingHeader { name: "proxied".into(), header: "x-forwarded-host".into() }));
        let got = run(json!({"method": "GET", "url": "https://api.example.com/x", "headers": {"X_API_KEY": "mine"}}));
        assert_eq!(got, Err(HttpDenial::HeaderConflict { name: "api".into(), header: "x-api-key".into() }));
    }

    #[test]
    fn allow_routing_headers_must_name_routing_headers() {
        for (bad, index) in [(json!(["x-forwarded-for"]), 0), (json!(["forwarded", "x-api-key"]), 1), (json!(["x-forwarded-"]), 0)] {
            let v = json!({"credentials": {"c": {"source": {"env": "C"}, "inject": {"bearer": {}}, "hosts": ["a.example"], "allow_routing_headers": bad}}});
            let e = Policy::from_text(&v.to_string(), std::path::Path::new("p.json")).unwrap_err().to_string();
            assert!(e.contains(&format!("credentials.c.allow_routing_headers[{index}]")) && e.contains("must name a routing header"), "{e}");
        }
    }

    /// RFC 6761 6.3: `localhost` and names under it are loopback only (`dest.rs` never
    /// asks a resolver for them), so a credential may go there over http, as to
    /// 127.0.0.1; a name that only starts with `localhost` may not.
    #[test]
    fn localhost_counts_as_loopback_for_the_https_rule() {
        for url in ["http://localhost:8080/x", "http://LOCALHOST.:8080/x", "http://svc.localhost:8080/x", "http://[::1]:8080/x", "http://127.0.0.2:8080/x"] {
            assert_eq!(run(json!({"method": "GET", "url": url})), Ok(Some("local".into())), "{url}");
        }
        let got = run(json!({"method": "GET", "url": "http://localhost.example.com:8080/x"}));
        assert_eq!(got, Err(HttpDenial::CredentialNeedsHttps { name: "local".into() }));
        for host in ["localhost", "a.localhost", "127.0.0.1", "[::1]"] {
            assert!(is_loopback_host(host), "{host}");
        }
        for host in ["localhost.example.com", "notlocalhost", ".localhost", "a..localhost", "[::ffff:7f00:1]", "10.0.0.1"] {
            assert!(!is_loopback_host(host), "{host}");
        }
    }

    // Attacks tried on the hop (a 3xx answer asking to go on), all held: another
    // scheme, host, port or a scheme-relative `//evil.com/`; userinfo in the Location;
    // a malformed `%` escape; a hop past max_redirects; a hop from a credentialed
    // request; a hop onto a path only a credential's binding covers (it goes without the
    // credential); a same-origin hop onto a path no allow rule covers; a 3xx status
    // that is not a redirect (300, 304, 305) or has no Location.

    fn hop_policy() -> Policy {
        let v = json!({
            "credentials": {"api": {"source": {"env": "API"}, "inject": {"bearer": {}}, "hosts": ["api.example.com"], "paths": ["/v1/*"]}},
            "http": {"allow": [
                {"hosts": ["api.example.com"], "methods": ["GET", "POST"], "paths": ["/v1/*", "/public"]},
                {"hosts": ["*.example.org"]}
            ]}
        });
        Policy::from_text(&v.to_string(), std::path::Path::new("test.json")).unwrap()
    }

    fn authorized(p: &Policy, args: Value) -> Authorized<HttpAction> {
        let Value::Object(a) = args else { panic!() };
        crate::gate::authorize::authorize(p, parse(&a).unwrap()).unwrap()
    }

    fn hop(p: &Policy, previous: &Authorized<HttpAction>, hops_so_far: u32, status: u16, location: &str) -> Result<HttpAction, RedirectStop> {
        Hop { previous, hops_so_far, status, location: location.into() }.follow(p).map(|a| a.action().clone())
    }

    #[test]
    fn a_hop_is_authorized_like_a_call_without_a_credential() {
        let p = hop_policy();
        let plain = authorized(&p, json!({"method": "GET", "url": "https://x.example.org/a/b"}));
        let next = hop(&p, &plain, 0, 302, "../c?q=1#frag").unwrap();
        assert_eq!((next.url.as_str(), next.credential, next.rule.as_str()), ("https://x.example.org/c?q=1", None, "http.allow[1]"));
        assert_eq!(hop(&p, &plain, 5, 302, "/c"), Err(RedirectStop::TooMany { limit: 5 }));
        let cross = |to: &str| Err(RedirectStop::CrossOrigin { to: to.into() });
        assert_eq!(hop(&p, &plain, 0, 301, "https://y.example.org/"), cross("https://y.example.org"));
        assert_eq!(hop(&p, &plain, 0, 301, "http://x.example.org/"), cross("http://x.example.org"));
        assert_eq!(hop(&p, &plain, 0, 301, "https://x.example.org:8443/"), cross("https://x.example.org:8443"));
        assert_eq!(hop(&p, &plain, 0, 301, "//evil.com/"), cross("https://evil.com"));
        assert!(matches!(hop(&p, &plain, 0, 302, "https://u:p@x.example.org/"), Err(RedirectStop::BadLocation(_))));
        // A Location is held to the same % rule as a URL the agent wrote.
        for loc in ["/a/%+9x", "/a/%4", "/a/x%"] {
            let got = hop(&p, &plain, 0, 302, loc).unwrap_err().to_string();
            assert!(got.starts_with("the Location cannot be followed: ") && got.contains("two hex digits"), "{loc}: {got}");
        }
        let credentialed = authorized(&p, json!({"method": "GET", "url": "https://api.example.com/v1/users"}));
        assert_eq!(hop(&p, &credentialed, 0, 302, "/v1/other"), Err(RedirectStop::Credentialed));
        // Same origin, but the allow rule does not cover the new path.
        let public = authorized(&p, json!({"method": "POST", "url": "https://api.example.com/public", "body": "x"}));
        let no_rule = HttpDenial::NoRule { method: Method::Post, host: "api.example.com".into(), port: 443, path: "/admin".into() };
        assert_eq!(hop(&p, &public, 0, 307, "/admin"), Err(RedirectStop::Denied(no_rule)));
        // A hop onto a path with a bound credential still goes without it.
        let to_bound = hop(&p, &public, 0, 307, "/v1/users").unwrap();
        assert_eq!((to_bound.method, to_bound.body.as_deref(), to_bound.credential.as_ref()), (Method::Post, Some("x"), None));
        let see_other = hop(&p, &public, 0, 303, "/v1/users").unwrap();
        assert_eq!((see_other.method, see_other.body.as_deref()), (Method::Get, None));
    }

    #[test]
    fn only_a_redirect_status_with_a_location_is_a_hop() {
        let p = hop_policy();
        let plain = authorized(&p, json!({"method": "GET", "url": "https://x.example.org/a"}));
        let headers = |locs: &[&str]| -> Vec<(String, String)> {
            let mut h = vec![("content-type".to_owned(), "text/plain".to_owned())];
            h.extend(locs.iter().map(|l| ("location".to_owned(), (*l).to_owned())));
            h
        };
        for status in [301, 302, 303, 307, 308] {
            let two = headers(&["/first", "/second"]);
            let got = Hop::of(&plain, 2, status, &two).map(|h| (h.location().to_owned(), h.hops_so_far, h.status));
            assert_eq!(got, Some(("/first".to_owned(), 2, status)), "{status}");
            assert!(Hop::of(&plain, 0, status, &headers(&[])).is_none(), "{status} without a Location");
        }
        for status in [200, 204, 300, 304, 305, 306, 400, 500] {
            assert!(Hop::of(&plain, 0, status, &headers(&["/x"])).is_none(), "{status}");
        }
    }
}
