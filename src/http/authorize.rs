//! The authorization of `http_request` (`sp-policy(5)`), called by `authorize.rs`, which
//! alone wraps the result in `Authorized`:
//! 1. some `http.allow` rule must match the host (and port), method and normalised path;
//!    the first matching rule is recorded;
//! 2. if the agent named a credential it must exist and be bound to this host and path;
//!    if it named none, the first credential by name bound to this host and path is used,
//!    if any; a credential is never sent anywhere outside its binding;
//! 3. a credential travels only over HTTPS, except to loopback literals (127.0.0.0/8,
//!    [::1]), so tests and local sidecars work;
//! 4. the agent may not set the header the credential is injected into;
//! 5. a redirect hop ([`redirect`]) goes through the same rules, without a credential.
//!
//! Nothing here reads a secret, resolves a name or opens a socket.

use std::fmt;
use std::time::Duration;

use crate::http::args::HttpRequest;
use crate::http::url::redirect_target;
use crate::policy::{Credential, Injection, Method, Policy, SecretSource};
use crate::wire::ToolCode;

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
    /// Some allow rule that permits this call names the host exactly (no wildcard).
    /// Private destinations (loopback, RFC 1918, CGNAT, ULA) are reachable only then
    /// (issue #3).
    pub host_named_exactly: bool,
    pub timeout: Duration,
    pub max_response_bytes: u64,
}

#[derive(Debug, PartialEq, Eq)]
pub enum HttpDenial {
    NoRule { method: Method, host: String, port: u16, path: String },
    UnknownCredential { name: String },
    CredentialNotBound { name: String, host: String, path: String },
    CredentialNeedsHttps { name: String },
    HeaderConflict { name: String, header: String },
    QueryConflict { name: String, param: String },
    /// Issue #13: `Authorization` or an `X-Amz-*` header or query parameter on a request
    /// signed with the `aws_sigv4` credential `name` (`SP_BAD_ARGUMENTS`, see [`HttpDenial::code`]).
    SignerOwns { name: String, field: String },
    BodyTooLarge { limit: u64 },
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

impl HttpDenial {
    /// The journal reason and tool error code: `SP_DENIED`, except arguments no policy
    /// could allow (`SP_BAD_ARGUMENTS`).
    pub fn code(&self) -> (&'static str, &'static str) {
        match self {
            HttpDenial::SignerOwns { .. } => ("bad_arguments", ToolCode::BadArguments.as_str()),
            _ => ("denied", ToolCode::Denied.as_str()),
        }
    }
}

fn binds(c: &Credential, req: &HttpRequest) -> bool {
    c.hosts.iter().any(|h| h.matches(&req.host, req.port, req.default_port))
        && c.paths.iter().any(|p| p.matches(&req.match_path))
        && c.methods.as_ref().is_none_or(|m| m.contains(&req.method))
}

pub(crate) fn is_loopback_literal(host: &str) -> bool {
    host == "[::1]" || host.parse::<std::net::Ipv4Addr>().is_ok_and(|a| a.is_loopback())
}

/// Why a redirect was not followed; the 3xx is returned to the agent as data.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum RedirectStop {
    Credentialed,
    TooMany { limit: u32 },
    CrossOrigin { to: String },
    BadLocation(String),
    Denied(HttpDenial),
}

impl fmt::Display for RedirectStop {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RedirectStop::Credentialed => f.write_str("a request that carries a credential never follows redirects"),
            RedirectStop::TooMany { limit } => write!(f, "more than http.max_redirects ({limit}) redirects"),
            RedirectStop::CrossOrigin { to } => write!(f, "redirects are followed only within the same origin, not to {to}"),
            RedirectStop::BadLocation(m) => write!(f, "the Location cannot be followed: {m}"),
            RedirectStop::Denied(d) => write!(f, "the redirect target is not allowed: {d}"),
        }
    }
}

/// Authorizes one redirect hop (issue #3): only for a request without a credential,
/// within `max_redirects`, to the same scheme, host and port, and through the same
/// allow rules as a fresh call. The hop never picks up a credential, even one bound to
/// the new path: the server chose that URL, not the agent. 303 (and 301/302 after a
/// POST) become GET without a body, as browsers do; 307 and 308 keep method and body.
pub(crate) fn redirect(
    policy: &Policy,
    prev: &HttpAction,
    hops_so_far: u32,
    status: u16,
    location: &str,
) -> Result<HttpAction, RedirectStop> {
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
    authorize(policy, req, false).map_err(RedirectStop::Denied)
}

/// The HTTP rules (module docs) for one request: the first matching allow rule, the
/// credential it may carry, and the checks that credential imposes. `may_pick_credential`
/// is false for a redirect hop (the server chose that URL, not the agent).
pub(crate) fn authorize(policy: &Policy, req: HttpRequest, may_pick_credential: bool) -> Result<HttpAction, HttpDenial> {
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
                return Err(HttpDenial::CredentialNotBound {
                    name: name.clone(),
                    host: req.host.clone(),
                    path: req.match_path.clone(),
                });
            }
            Some(c)
        }
        None if may_pick_credential => policy.credentials.values().find(|c| binds(c, &req)),
        None => None,
    };
    if let Some(c) = credential {
        if req.url.scheme() != "https" && !is_loopback_literal(&req.host) {
            return Err(HttpDenial::CredentialNeedsHttps { name: c.name.clone() });
        }
        match &c.inject {
            Injection::Query { name } => {
                if req.url.query_pairs().any(|(k, _)| k == name.as_str()) {
                    return Err(HttpDenial::QueryConflict { name: c.name.clone(), param: name.clone() });
                }
            }
            Injection::AwsSigV4(_) => {
                if let Some(field) = crate::http::sigv4::refused_agent_name(req.headers.iter().map(|(n, _)| n.as_str()), &req.url) {
                    return Err(HttpDenial::SignerOwns { name: c.name.clone(), field });
                }
            }
            other => {
                let header = other.header_name().unwrap_or_default();
                if req.headers.iter().any(|(n, _)| *n == header) {
                    return Err(HttpDenial::HeaderConflict { name: c.name.clone(), header });
                }
            }
        }
    }
    let limit = policy.http.max_request_body_bytes;
    if req.body.as_ref().is_some_and(|b| b.len() as u64 > limit) {
        return Err(HttpDenial::BodyTooLarge { limit });
    }
    Ok(HttpAction {
        method: req.method,
        url: req.url,
        headers: req.headers,
        body: req.body,
        credential: credential.map(|c| CredentialUse {
            name: c.name.clone(),
            source: c.source.clone(),
            inject: c.inject.clone(),
        }),
        rule: format!("http.allow[{}]", rule.index),
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
