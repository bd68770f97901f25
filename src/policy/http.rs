//! The `http` section (`sp-policy(5)`): allow rules, limits, the private CA bundle, and
//! the host, path and method patterns credentials are bound with.
//!
//! Matching rules:
//! - host patterns are exact (`api.example.com`) or wildcard (`*.example.org`, which
//!   matches `a.example.org` and `a.b.example.org` but never the apex); a pattern without
//!   a port matches only the scheme's default port (80 or 443), `host:8080` only 8080;
//!   hosts are normalised like URLs are (lowercase, IDNA, numeric IPv4 forms);
//! - path patterns are exact (`/v1/status`) or prefix (`/v1/*`, matching `/v1` and
//!   everything under `/v1/`; `/*` matches every path); they match the request's
//!   normalised, percent-decoded path (see `http/url.rs`).

use std::fmt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::Value;

use super::fields::{err, flag, int, list, object, string, Check, PatternError};

pub(crate) const DEFAULT_TIMEOUT_S: u64 = 30;
pub(crate) const MAX_TIMEOUT_S: u64 = 3600;
pub(crate) const DEFAULT_MAX_RESPONSE_BYTES: u64 = 8 * 1024 * 1024;
pub(crate) const MAX_RESPONSE_BYTES_CEILING: u64 = 64 * 1024 * 1024;
pub(crate) const DEFAULT_MAX_REQUEST_BODY_BYTES: u64 = 1024 * 1024;
pub(crate) const DEFAULT_MAX_REDIRECTS: u32 = 5;
pub(crate) const MAX_REDIRECTS_CEILING: u64 = 20;
pub(crate) const MAX_REQUEST_BODY_BYTES_CEILING: u64 = 64 * 1024 * 1024;

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Method {
    Get,
    Head,
    Post,
    Put,
    Patch,
    Delete,
}

impl Method {
    pub const ALL: [Method; 6] = [Method::Get, Method::Head, Method::Post, Method::Put, Method::Patch, Method::Delete];

    pub fn parse(s: &str) -> Option<Method> {
        Method::ALL.into_iter().find(|m| m.as_str() == s)
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Method::Get => "GET",
            Method::Head => "HEAD",
            Method::Post => "POST",
            Method::Put => "PUT",
            Method::Patch => "PATCH",
            Method::Delete => "DELETE",
        }
    }
}

impl fmt::Display for Method {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A host pattern, normalised at load time.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HostPattern {
    /// Exact host, or for a wildcard the suffix including the leading dot (`.example.org`).
    host: String,
    wildcard: bool,
    port: Option<u16>,
    /// As the operator wrote it, for messages and `sp_inventory`.
    pub text: String,
}

impl HostPattern {
    pub fn parse(text: &str) -> Result<HostPattern, PatternError> {
        // "https://api.example.com" would otherwise read as host "https", port "//api...".
        if text.contains("://") {
            let host = url::Url::parse(text).ok().and_then(|u| {
                let h = u.host_str()?.to_owned();
                Some(match u.port() {
                    Some(p) => format!("{h}:{p}"),
                    None => h,
                })
            });
            return Err(PatternError::Url { text: text.to_owned(), host });
        }
        let (host_part, port) = split_port(text)?;
        let (wildcard, bare) = match host_part.strip_prefix("*.") {
            Some(rest) => (true, rest),
            None => (false, host_part),
        };
        if bare.contains('*') {
            return Err(PatternError::WildcardNotLeading { text: text.to_owned() });
        }
        let host = normalize_host(bare).ok_or_else(|| PatternError::NotAHost { text: text.to_owned() })?;
        if wildcard && (host.starts_with('[') || host.parse::<std::net::Ipv4Addr>().is_ok()) {
            return Err(PatternError::WildcardIp { text: text.to_owned() });
        }
        let host = if wildcard { format!(".{host}") } else { host };
        Ok(HostPattern { host, wildcard, port, text: text.to_owned() })
    }

    /// `host` is normalised (as `url::Url::host_str` gives it, trailing dot removed);
    /// `port` is the effective port, `default_port` the scheme's.
    pub(crate) fn matches(&self, host: &str, port: u16, default_port: u16) -> bool {
        let port_ok = match self.port {
            Some(p) => p == port,
            None => port == default_port,
        };
        let host_ok = if self.wildcard { host.len() > self.host.len() && host.ends_with(&self.host) } else { host == self.host };
        port_ok && host_ok
    }

    pub(crate) fn is_exact(&self) -> bool {
        !self.wildcard
    }

    /// The IP address an exact pattern names (`10.0.0.1`, `[fe80::1]`), as normalised.
    pub(crate) fn ip(&self) -> Option<std::net::IpAddr> {
        if self.wildcard {
            return None;
        }
        let bare = self.host.strip_prefix('[').and_then(|h| h.strip_suffix(']')).unwrap_or(&self.host);
        bare.parse().ok()
    }

    /// The host name an exact pattern names, normalised (lowercase, punycode).
    pub(crate) fn exact_host(&self) -> Option<&str> {
        (!self.wildcard).then_some(self.host.as_str())
    }

    /// Whether some host and port match both patterns (`sp check`: a credential bound
    /// to a host that no allow rule names is never sent). Hosts compare as written,
    /// normalised: `127.0.0.1` and `localhost` do not overlap. No port means the
    /// scheme's (80 or 443).
    pub(crate) fn overlaps(&self, other: &HostPattern) -> bool {
        let ports = match (self.port, other.port) {
            (Some(a), Some(b)) => a == b,
            (None, None) => true,
            (Some(p), None) | (None, Some(p)) => p == 80 || p == 443,
        };
        let under = |name: &str, suffix: &str| name.len() > suffix.len() && name.ends_with(suffix);
        let hosts = match (self.wildcard, other.wildcard) {
            (false, false) => self.host == other.host,
            (true, false) => under(&other.host, &self.host),
            (false, true) => under(&self.host, &other.host),
            (true, true) => self.host.ends_with(&other.host) || other.host.ends_with(&self.host),
        };
        ports && hosts
    }
}

fn split_port(text: &str) -> Result<(&str, Option<u16>), PatternError> {
    let bad_port = || PatternError::BadPort { text: text.to_owned() };
    if let Some(rest) = text.strip_prefix('[') {
        let (inside, after) = rest.split_once(']').ok_or_else(|| PatternError::UnclosedBracket { text: text.to_owned() })?;
        let host = &text[..inside.len() + 2];
        return match after {
            "" => Ok((host, None)),
            p => match p.strip_prefix(':').and_then(|p| p.parse::<u16>().ok()) {
                Some(port) if port > 0 => Ok((host, Some(port))),
                _ => Err(bad_port()),
            },
        };
    }
    match text.rsplit_once(':') {
        None => Ok((text, None)),
        Some((host, p)) => match p.parse::<u16>() {
            Ok(port) if port > 0 && !host.contains(':') => Ok((host, Some(port))),
            _ => Err(bad_port()),
        },
    }
}

/// Normalises a host the way request URLs are normalised, so both sides compare equal.
pub(crate) fn normalize_host(host: &str) -> Option<String> {
    if host.is_empty() || host.bytes().any(|b| !(b.is_ascii_alphanumeric() || b"-.[]:_".contains(&b)) && b.is_ascii()) {
        return None;
    }
    let url = url::Url::parse(&format!("http://{host}/")).ok()?;
    let h = url.host_str()?;
    Some(h.strip_suffix('.').unwrap_or(h).to_owned())
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PathPattern {
    Exact(String),
    /// `/v1/*` is stored as `/v1`: matches `/v1` and anything starting `/v1/`.
    Prefix(String),
}

impl PathPattern {
    pub fn parse(text: &str) -> Result<PathPattern, PatternError> {
        if !text.starts_with('/') {
            return Err(PatternError::NotAbsolute { text: text.to_owned() });
        }
        let body = text.strip_suffix("/*");
        let check = body.unwrap_or(text);
        if check.contains('*') {
            return Err(PatternError::StarNotFinal { text: text.to_owned() });
        }
        if check.split('/').any(|seg| seg == "." || seg == "..") || check.contains('%') || check.contains('?') || check.contains('#') {
            return Err(PatternError::NotPlain { text: text.to_owned() });
        }
        Ok(match body {
            Some(prefix) => PathPattern::Prefix(prefix.to_owned()),
            None => PathPattern::Exact(text.to_owned()),
        })
    }

    pub(crate) fn matches(&self, path: &str) -> bool {
        match self {
            PathPattern::Exact(p) => p == path,
            PathPattern::Prefix(p) => path == p || (path.starts_with(p.as_str()) && path[p.len()..].starts_with('/')),
        }
    }

    pub fn text(&self) -> String {
        match self {
            PathPattern::Exact(p) => p.clone(),
            PathPattern::Prefix(p) => format!("{p}/*"),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AllowRule {
    pub index: usize,
    pub hosts: Vec<HostPattern>,
    pub methods: Vec<Method>,
    pub paths: Vec<PathPattern>,
    /// `"approve": true | "command"`: a call this rule permits waits for approval, with
    /// or without a credential (issue 32: "GET free, POST asks" without a second
    /// credential). Any permitting rule that asks makes the call ask.
    pub approve: super::approval::Approve,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HttpPolicy {
    pub allow: Vec<AllowRule>,
    pub timeout: Duration,
    pub max_response_bytes: u64,
    pub max_request_body_bytes: u64,
    /// Hops an uncredentialed request may follow (same origin only, each re-authorized).
    pub max_redirects: u32,
    /// Refuse every `http://` URL.
    pub https_only: bool,
    /// Private CA roots (DER), replacing the built-in Mozilla roots when set.
    pub ca_certs: Option<CaBundle>,
}

/// Certificates loaded from `http.ca_file` at startup.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CaBundle {
    pub path: PathBuf,
    pub der: Vec<Vec<u8>>,
}

pub(super) fn hosts(v: &Value, field: &str) -> Check<Vec<HostPattern>> {
    list(v, field)?
        .iter()
        .enumerate()
        .map(|(i, h)| {
            let f = format!("{field}[{i}]");
            HostPattern::parse(string(h, &f)?).map_err(|e| (f, e.to_string()))
        })
        .collect()
}

pub(super) fn paths(v: Option<&Value>, field: &str) -> Check<Vec<PathPattern>> {
    let Some(v) = v else {
        return Ok(vec![PathPattern::Prefix(String::new())]);
    };
    list(v, field)?
        .iter()
        .enumerate()
        .map(|(i, p)| {
            let f = format!("{field}[{i}]");
            PathPattern::parse(string(p, &f)?).map_err(|e| (f, e.to_string()))
        })
        .collect()
}

/// Headers the agent may never set: credentials, framing and routing belong to `sp`.
pub(crate) const RESERVED_HEADERS: &[&str] = &[
    "authorization",
    "proxy-authorization",
    "cookie",
    "host",
    "content-length",
    "transfer-encoding",
    "connection",
    "te",
    "trailer",
    "upgrade",
    "keep-alive",
    "proxy-connection",
    "expect",
    // Only identity bodies can be scrubbed of secrets.
    "accept-encoding",
];

/// Framing and routing headers, which cannot carry a credential either.
pub(crate) fn is_hop_header(lower: &str) -> bool {
    RESERVED_HEADERS.contains(&lower) && !matches!(lower, "authorization" | "proxy-authorization" | "cookie")
}

/// Headers that tell a proxy or framework in front of the server which host, scheme,
/// port or path the client asked for (RFC 7239 `Forwarded`, the `X-Forwarded-*` family,
/// `X-Original-*`, `X-Rewrite-*`, `X-Envoy-Original-*`, WebDAV `Destination`): behind
/// such a proxy a credential bound to one host or path could be used for another.
/// Refused on a request that carries a credential unless its `allow_routing_headers`
/// names the header (`authorize.rs`); any case, `_` for `-`. `X-Forwarded-For` (the
/// client's address, not where the request goes) is not one of them. Listed in
/// `sp-policy(5)`, "REQUEST OVERRIDES".
pub(crate) const ROUTING_HEADERS: &[&str] = &[
    "forwarded",
    "destination",
    "x-host",
    "x-http-host-override",
    "x-url-scheme",
    "front-end-https",
    "x-forwarded-*",
    "x-original-*",
    "x-rewrite-*",
    "x-envoy-original-*",
];

/// Whether a (lowercase) header name is one of [`ROUTING_HEADERS`].
pub(crate) fn is_routing_header(lower: &str) -> bool {
    let name = lower.trim().replace('_', "-");
    name != "x-forwarded-for"
        && ROUTING_HEADERS.iter().any(|r| match r.strip_suffix('*') {
            Some(prefix) => name.starts_with(prefix) && name.len() > prefix.len(),
            None => name == *r,
        })
}

/// An HTTP header field name: an RFC 9110 token.
pub(crate) fn is_token(s: &str) -> bool {
    !s.is_empty() && s.bytes().all(|b| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b))
}

pub(super) fn methods(m: &Value, field: &str) -> Check<Vec<Method>> {
    let mut out = Vec::new();
    for (j, s) in list(m, field)?.iter().enumerate() {
        let f = format!("{field}[{j}]");
        let s = string(s, &f)?;
        if s == "*" {
            out.extend(Method::ALL);
            continue;
        }
        out.push(Method::parse(s).ok_or_else(|| (f, format!("unknown method {s:?} (GET, HEAD, POST, PUT, PATCH, DELETE or \"*\")")))?);
    }
    out.sort();
    out.dedup();
    Ok(out)
}

pub(super) fn http(v: &Value) -> Check<HttpPolicy> {
    let map = object(v, "http", &["allow", "timeout_s", "max_response_bytes", "max_request_body_bytes", "max_redirects", "https_only", "ca_file"])?;
    let mut allow = Vec::new();
    if let Some(a) = map.get("allow") {
        let Value::Array(rules) = a else {
            return err("http.allow", "must be an array of rules");
        };
        for (i, r) in rules.iter().enumerate() {
            let field = format!("http.allow[{i}]");
            let rm = object(r, &field, &["hosts", "methods", "paths", "approve"])?;
            let hosts_field = format!("{field}.hosts");
            let hosts = hosts(rm.get("hosts").ok_or_else(|| (hosts_field.clone(), "is required".to_owned()))?, &hosts_field)?;
            let methods = match rm.get("methods") {
                None => vec![Method::Get, Method::Head],
                Some(m) => methods(m, &format!("{field}.methods"))?,
            };
            let paths = paths(rm.get("paths"), &format!("{field}.paths"))?;
            let approve = super::approval::approve_flag(rm, &field)?;
            allow.push(AllowRule { index: i, hosts, methods, paths, approve });
        }
    }
    let timeout_s = match map.get("timeout_s") {
        None => DEFAULT_TIMEOUT_S,
        Some(t) => int(t, "http.timeout_s", 1, MAX_TIMEOUT_S)?,
    };
    let max_response_bytes = match map.get("max_response_bytes") {
        None => DEFAULT_MAX_RESPONSE_BYTES,
        Some(t) => int(t, "http.max_response_bytes", 1, MAX_RESPONSE_BYTES_CEILING)?,
    };
    let max_request_body_bytes = match map.get("max_request_body_bytes") {
        None => DEFAULT_MAX_REQUEST_BODY_BYTES,
        Some(t) => int(t, "http.max_request_body_bytes", 0, MAX_REQUEST_BODY_BYTES_CEILING)?,
    };
    let max_redirects = match map.get("max_redirects") {
        None => DEFAULT_MAX_REDIRECTS,
        Some(t) => int(t, "http.max_redirects", 0, MAX_REDIRECTS_CEILING)? as u32,
    };
    let https_only = flag(map, "https_only", "http", false)?;
    let ca_certs = match map.get("ca_file") {
        None => None,
        Some(f) => Some(ca_bundle(string(f, "http.ca_file")?)?),
    };
    Ok(HttpPolicy { allow, timeout: Duration::from_secs(timeout_s), max_response_bytes, max_request_body_bytes, max_redirects, https_only, ca_certs })
}

/// Reads a PEM bundle at startup, so a bad `ca_file` stops `sp` before it serves.
fn ca_bundle(path: &str) -> Check<CaBundle> {
    const FIELD: &str = "http.ca_file";
    if !path.starts_with('/') {
        return err(FIELD, "must be an absolute path");
    }
    // A FIFO or device is refused at once, never waited on. Public
    // certificates: any owner, any mode, and a symbolic link is followed (distributions
    // link their bundles), then the target is opened as `sys` says.
    let rules = crate::sys::Rules::any(4 * 1024 * 1024).following();
    // At start-up, on this thread (see `policy::trusted_bytes`).
    let pem = match crate::sys::read(Path::new(path), rules) {
        Ok(pem) => pem,
        Err(e) => return err(FIELD, format!("cannot read {path}: {e}")),
    };
    let mut der = Vec::new();
    for item in ureq::tls::parse_pem(&pem) {
        match item {
            Ok(ureq::tls::PemItem::Certificate(c)) => der.push(c.der().to_vec()),
            Ok(_) => {}
            Err(_) => return err(FIELD, format!("{path} is not a valid PEM file")),
        }
    }
    if der.is_empty() {
        return err(FIELD, format!("{path} holds no certificate"));
    }
    Ok(CaBundle { path: PathBuf::from(path), der })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn host_patterns() {
        let exact = HostPattern::parse("API.Example.com").unwrap();
        assert!(exact.matches("api.example.com", 443, 443));
        assert!(!exact.matches("api.example.com", 8443, 443));
        assert!(!exact.matches("x.api.example.com", 443, 443));
        let wild = HostPattern::parse("*.example.org").unwrap();
        assert!(wild.matches("a.example.org", 80, 80));
        assert!(wild.matches("a.b.example.org", 80, 80));
        assert!(!wild.matches("example.org", 80, 80));
        assert!(!wild.matches("badexample.org", 80, 80));
        let port = HostPattern::parse("127.0.0.1:8080").unwrap();
        assert!(port.matches("127.0.0.1", 8080, 80));
        assert!(!port.matches("127.0.0.1", 80, 80));
        let v6 = HostPattern::parse("[::1]:9000").unwrap();
        assert!(v6.matches("[::1]", 9000, 80));
        // numeric spellings normalise like URLs do
        let num = HostPattern::parse("2130706433").unwrap();
        assert!(num.matches("127.0.0.1", 80, 80));
        let why = |p: &str| HostPattern::parse(p).unwrap_err().to_string();
        assert_eq!(HostPattern::parse("*.10.0.0.1"), Err(PatternError::WildcardIp { text: "*.10.0.0.1".into() }));
        assert_eq!(HostPattern::parse("a.*.b"), Err(PatternError::WildcardNotLeading { text: "a.*.b".into() }));
        assert_eq!(HostPattern::parse("[::1"), Err(PatternError::UnclosedBracket { text: "[::1".into() }));
        assert_eq!(HostPattern::parse("h:0"), Err(PatternError::BadPort { text: "h:0".into() }));
        assert_eq!(why(""), "\"\" is not a valid host");
        assert_eq!(why("a b"), "\"a b\" is not a valid host");
        assert_eq!(why("a/b"), "\"a/b\" is not a valid host");
        assert_eq!(why("a:b"), "\"a:b\": the port must be a number from 1 to 65535");
        // Issue 32, section 1: a URL written as a host is named as such (it read as host
        // "https" with port "//api.example.com" and got "the port must be a number").
        assert_eq!(why("https://api.example.com"), "\"https://api.example.com\" is a URL, not a host: write \"api.example.com\" (a path goes in \"paths\")");
        assert_eq!(
            why("http://127.0.0.1:8080/v1/x"),
            "\"http://127.0.0.1:8080/v1/x\" is a URL, not a host: write \"127.0.0.1:8080\" (a path goes in \"paths\")"
        );
        assert_eq!(why("https://"), "\"https://\" is a URL, not a host: write the host name alone (and :port)");
    }

    #[test]
    fn path_patterns() {
        let p = PathPattern::parse("/v1/*").unwrap();
        assert!(p.matches("/v1"));
        assert!(p.matches("/v1/"));
        assert!(p.matches("/v1/a/b"));
        assert!(!p.matches("/v10"));
        assert!(!p.matches("/v"));
        let all = PathPattern::parse("/*").unwrap();
        assert!(all.matches("/"));
        assert!(all.matches("/anything"));
        let exact = PathPattern::parse("/status").unwrap();
        assert!(exact.matches("/status"));
        assert!(!exact.matches("/status/"));
        let why = |p: &str| PathPattern::parse(p).unwrap_err().to_string();
        assert_eq!(PathPattern::parse("v1"), Err(PatternError::NotAbsolute { text: "v1".into() }));
        assert_eq!(PathPattern::parse("/a/../b"), Err(PatternError::NotPlain { text: "/a/../b".into() }));
        assert_eq!(why("/a*"), "\"/a*\": '*' is only allowed as a final \"/*\"");
        assert_eq!(why("/a/%2e"), "\"/a/%2e\": write the plain decoded path, without '.', '..', '%', '?' or '#'");
    }
}
