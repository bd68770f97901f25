//! AWS Signature Version 4: the pure core, no I/O. Given the final wire
//! request (method, URL, headers, body), the credentials, the scope and an injected
//! clock, [`sign`] returns the headers to ADD (`x-amz-date`, `x-amz-content-sha256`,
//! `x-amz-security-token` when there is a session token, `authorization`).
//!
//! ```text
//! source bytes ----Credentials::from_json----> Credentials ─┐
//! policy section --SigV4Config::from_policy--> .scope ──────┼─> sign(Request, .., SystemTime) -> Signed
//! final URL + headers + body (.payload()) ---> Request ─────┘        (headers to add)
//! ```
//!
//! # How the lead wires it in
//! - Policy: `inject: {"aws_sigv4": {"region": "eu-west-1", "service": "s3"}}` (optionally
//!   `"unsigned_payload": true`, which maps to [`Payload::Unsigned`]); the credential's
//!   source yields JSON `{"access_key_id", "secret_access_key", "session_token"?}`
//!   ([`Credentials::from_json`]). Note: `Vault::read` refuses control characters, so a
//!   pretty-printed (multi-line) JSON needs the raw bytes, not `Vault::read`'s check.
//!   [`SigV4Config::from_policy`] parses the section (so `sp check` validates it);
//!   map its `policy::schemes::SectionError` to `PolicyError` as `credentials.<name>.inject.aws_sigv4.<field>`.
//! - Refuse early (authorization, `SP_BAD_ARGUMENTS`): on a request bound to an
//!   `aws_sigv4` credential, every agent header name and every decoded query parameter
//!   name goes through [`agent_may_not_send`] / [`agent_may_not_send_query`]
//!   ([`refused_agent_name`] does both for a header list and a URL).
//! - Sign late: in `http/exec.rs`, after the destination is checked and the final URL,
//!   header list and body bytes are known, immediately before the request is sent. The
//!   header list passed in must be exactly what will be sent (the signer also signs
//!   `host`, derived from the URL as `host[:port]`, port only when not the scheme's
//!   default, which is what ureq sends). Add [`Signed::headers`] to the request as they are.
//! - Redirects: server.rs follows same-origin hops and every hop comes through
//!   `http/exec.rs` again, so RE-SIGN on every hop (new URL, new clock reading). A
//!   signature is bound to its URL, so re-using the first hop's headers would only fail;
//!   never forward the old `authorization` to another hop. Cross-origin hops stay refused.
//! - Redaction: register with the vault the secret access key and the session token
//!   when the credential is read. [`Signed::signature`] (inside the `authorization`
//!   value) is scrubbed from responses by the HTTP executor, which keeps the last few
//!   (`http/exec.rs`): one Vault entry per request would grow its automaton without
//!   bound. The access key id is not a secret.
//! - Payload: pass the body bytes ([`Payload::Hash`]) unless the operator asked for
//!   `UNSIGNED-PAYLOAD`; a streamed body cannot be hashed in advance.
//!
//! # Canonicalisation rules (AWS SigV4 documentation, "Create a canonical request")
//! - Path: for S3 (`s3`, `s3-*`, `s3express`) the wire path is percent-decoded and
//!   encoded ONCE, never normalised here (object keys may contain `//`; note that the
//!   `url` crate already resolves `.` and `..` segments, as WHATWG says, so what is
//!   signed is what is sent). Every other
//!   service: the wire path is normalised (RFC 3986 dot segments removed, empty
//!   segments collapsed) and then encoded AGAIN (the wire path is already encoded once,
//!   so a space is `%2520`): that is what the services compute.
//! - Query: split on `&`, each `name=value` decoded (`+` is a space, as the `url`
//!   crate's form serializer writes it, and as the AWS SDK for Rust reads it), then
//!   encoded with only RFC 3986 unreserved characters kept, sorted by encoded name then
//!   encoded value.
//! - Headers: lowercase names, values trimmed with inner whitespace runs collapsed to
//!   one space, repeated names joined with `,` in order, sorted by name. Hop-by-hop
//!   and client-side headers that proxies or the client may change are not signed:
//!   see [`UNSIGNED_HEADERS`].

use std::fmt;
use std::time::{SystemTime, UNIX_EPOCH};

use hmac::{Hmac, Mac};
use sha2::{Digest, Sha256};
use url::Url;
use zeroize::Zeroizing;

use crate::sys::hex;

mod config;
pub(crate) use config::{Credentials, ValueBox};
pub(crate) use crate::policy::schemes::{Scope, SigV4Config};

type HmacSha256 = Hmac<Sha256>;

const ALGORITHM: &str = "AWS4-HMAC-SHA256";
/// `x-amz-content-sha256` value when the operator chose not to hash the body.
pub(crate) const UNSIGNED_PAYLOAD: &str = "UNSIGNED-PAYLOAD";

/// Headers never signed (as the AWS SDKs do): they may be added, changed or dropped on
/// the way by the HTTP client or a proxy, and `authorization` is what we produce.
pub(crate) const UNSIGNED_HEADERS: &[&str] = &[
    "authorization",
    "user-agent",
    "x-amzn-trace-id",
    "transfer-encoding",
    "connection",
    "keep-alive",
    "proxy-authorization",
    "proxy-connection",
    "te",
    "trailer",
    "proxy-authenticate",
    "upgrade",
    "expect",
];

/// Headers the signer adds itself; the caller's list must not carry them.
const ADDED_HEADERS: &[&str] = &["authorization", "x-amz-date", "x-amz-content-sha256", "x-amz-security-token"];

/// Why credentials, a scope or a request could not be signed. Never contains the secret
/// key, the session token, the signature or any part of the source's bytes.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum SigV4Error {
    NotJson,
    NotAnObject,
    MissingField(&'static str),
    FieldNotString(&'static str),
    EmptyField(&'static str),
    /// The field holds characters that cannot go into a header (control characters,
    /// whitespace, or non-ASCII; for the key id also `/` and `,`).
    BadCharacters(&'static str),
    ClockBeforeEpoch,
    ClockOutOfRange,
    NoHost,
    /// The caller's header list already has a header the signer adds.
    ReservedHeader(String),
    /// The caller's `host` header differs from the URL's authority.
    HostMismatch,
    BadMethod,
}

impl fmt::Display for SigV4Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SigV4Error::NotJson => f.write_str("aws credentials are not valid JSON"),
            SigV4Error::NotAnObject => f.write_str("aws credentials are not a JSON object"),
            SigV4Error::MissingField(n) => write!(f, "aws credentials lack \"{n}\""),
            SigV4Error::FieldNotString(n) => write!(f, "aws credentials: \"{n}\" is not a string"),
            SigV4Error::EmptyField(n) => write!(f, "aws credentials: \"{n}\" is empty"),
            SigV4Error::BadCharacters(n) => {
                write!(f, "aws credentials: \"{n}\" contains characters that cannot be sent")
            }
            SigV4Error::ClockBeforeEpoch => f.write_str("the system clock is before 1970"),
            SigV4Error::ClockOutOfRange => f.write_str("the system clock is past year 9999"),
            SigV4Error::NoHost => f.write_str("the request URL has no host"),
            SigV4Error::ReservedHeader(n) => write!(f, "header {n} is set by the aws_sigv4 signer"),
            SigV4Error::HostMismatch => f.write_str("the host header differs from the URL's host"),
            SigV4Error::BadMethod => f.write_str("the method must be an HTTP token"),
        }
    }
}

impl std::error::Error for SigV4Error {}

/// What `x-amz-content-sha256` and the canonical request's last line say about the body.
#[derive(Clone, Copy)]
pub enum Payload<'a> {
    /// The exact body bytes that will be sent; their SHA-256 is signed.
    Hash(&'a [u8]),
    /// `UNSIGNED-PAYLOAD`, where the operator asks for it (S3 only accepts it over HTTPS).
    Unsigned,
}

/// The request as it will go on the wire.
pub(crate) struct Request<'a> {
    pub method: &'a str,
    pub url: &'a Url,
    /// Every header that will be sent, as (name, value), in order; `host` may be absent.
    pub headers: &'a [(&'a str, &'a str)],
    pub payload: Payload<'a>,
}

/// A UTC civil time, for the `x-amz-date` stamp.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct UtcTime {
    pub year: u32,
    pub month: u32,
    pub day: u32,
    pub hour: u32,
    pub minute: u32,
    pub second: u32,
}

impl UtcTime {
    /// Proleptic Gregorian calendar from Unix seconds (H. Hinnant's `civil_from_days`;
    /// UTC has no leap seconds in Unix time). Years 1970 to 9999.
    pub(crate) fn from_system_time(t: SystemTime) -> Result<UtcTime, SigV4Error> {
        let secs = t.duration_since(UNIX_EPOCH).map_err(|_| SigV4Error::ClockBeforeEpoch)?.as_secs();
        // 253402300800 is 10000-01-01T00:00:00Z.
        if secs >= 253_402_300_800 {
            return Err(SigV4Error::ClockOutOfRange);
        }
        let days = secs / 86_400;
        let rem = secs % 86_400;
        // Shift the epoch to 0000-03-01 so leap days fall at the end of a year.
        let z = days + 719_468;
        let era = z / 146_097;
        let doe = z - era * 146_097; // [0, 146096]
        let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365; // [0, 399]
        let doy = doe - (365 * yoe + yoe / 4 - yoe / 100); // [0, 365]
        let mp = (5 * doy + 2) / 153; // [0, 11], March = 0
        let day = doy - (153 * mp + 2) / 5 + 1;
        let month = if mp < 10 { mp + 3 } else { mp - 9 };
        let year = yoe + era * 400 + u64::from(month <= 2);
        Ok(UtcTime {
            year: year as u32,
            month: month as u32,
            day: day as u32,
            hour: (rem / 3600) as u32,
            minute: (rem % 3600 / 60) as u32,
            second: (rem % 60) as u32,
        })
    }

    /// `YYYYMMDD`
    fn date(&self) -> String {
        format!("{:04}{:02}{:02}", self.year, self.month, self.day)
    }

    /// `YYYYMMDD'T'HHMMSS'Z'`
    fn amz_date(&self) -> String {
        format!("{}T{:02}{:02}{:02}Z", self.date(), self.hour, self.minute, self.second)
    }
}

/// The result of signing: the headers to add, and the intermediate strings (for tests
/// and debugging by the operator; they hold the session token, so Debug hides them).
pub(crate) struct Signed {
    headers: Vec<(&'static str, Zeroizing<String>)>,
    // Read by the AWS suite tests, which compare each step byte for byte.
    #[cfg_attr(not(test), allow(dead_code))]
    canonical_request: Zeroizing<String>,
    #[cfg_attr(not(test), allow(dead_code))]
    string_to_sign: String,
    signature: Zeroizing<String>,
}

impl fmt::Debug for Signed {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let names: Vec<&str> = self.headers.iter().map(|(n, _)| *n).collect();
        f.debug_struct("Signed").field("headers", &names).field("signature", &format_args!("***")).finish()
    }
}

impl Signed {
    /// Headers to add to the request, lowercase names: `x-amz-date`,
    /// `x-amz-content-sha256` (unless turned off), `x-amz-security-token` (with a
    /// session token), `authorization`.
    pub(crate) fn headers(&self) -> impl Iterator<Item = (&'static str, &str)> {
        self.headers.iter().map(|(n, v)| (*n, v.as_str()))
    }

    #[cfg(test)]
    pub(crate) fn canonical_request(&self) -> &str {
        &self.canonical_request
    }

    #[cfg(test)]
    pub(crate) fn string_to_sign(&self) -> &str {
        &self.string_to_sign
    }

    /// The hex signature, to register with the redactor.
    pub(crate) fn signature(&self) -> &str {
        &self.signature
    }
}

/// Signs `req` at time `at`. See the module documentation for where to call it.
pub(crate) fn sign(req: &Request<'_>, creds: &Credentials, scope: &Scope, at: SystemTime) -> Result<Signed, SigV4Error> {
    let host = url_host(req.url)?;
    let time = UtcTime::from_system_time(at)?;
    sign_parts(req.method, &host, req.url.path(), req.url.query(), req.headers, req.payload, creds, scope, time)
}

/// `host[:port]` as ureq writes the Host header: the port only when it is not the
/// scheme's default (`Url::port` is `None` then).
fn url_host(url: &Url) -> Result<String, SigV4Error> {
    let host = url.host_str().filter(|h| !h.is_empty()).ok_or(SigV4Error::NoHost)?;
    Ok(match url.port() {
        Some(p) => format!("{host}:{p}"),
        None => host.to_owned(),
    })
}

/// The signer on the raw request-target parts (path and query exactly as on the wire).
/// [`sign`] passes the URL's; the test suite passes its request lines as they are.
#[allow(clippy::too_many_arguments)]
fn sign_parts(
    method: &str,
    host: &str,
    path: &str,
    query: Option<&str>,
    headers: &[(&str, &str)],
    payload: Payload<'_>,
    creds: &Credentials,
    scope: &Scope,
    time: UtcTime,
) -> Result<Signed, SigV4Error> {
    if method.is_empty() || !method.bytes().all(is_tchar) {
        return Err(SigV4Error::BadMethod);
    }
    let amz_date = time.amz_date();
    let date = time.date();
    let payload_hash = match payload {
        Payload::Hash(body) => hex(&Sha256::digest(body)),
        Payload::Unsigned => UNSIGNED_PAYLOAD.to_owned(),
    };

    // Headers: (lowercase name, canonical values in order).
    let mut canon: Vec<(String, Vec<String>)> = Vec::new();
    let mut push = |name: String, value: &str| match canon.iter_mut().find(|(n, _)| *n == name) {
        Some((_, vs)) => vs.push(canonical_value(value)),
        None => canon.push((name, vec![canonical_value(value)])),
    };
    let mut saw_host = false;
    for (name, value) in headers {
        let lower = name.to_ascii_lowercase();
        if ADDED_HEADERS.contains(&lower.as_str()) {
            return Err(SigV4Error::ReservedHeader(lower));
        }
        if lower == "host" {
            if canonical_value(value) != host {
                return Err(SigV4Error::HostMismatch);
            }
            if saw_host {
                continue;
            }
            saw_host = true;
        }
        if UNSIGNED_HEADERS.contains(&lower.as_str()) {
            continue;
        }
        push(lower, value);
    }
    if !saw_host {
        push("host".to_owned(), host);
    }
    let mut added: Vec<(&'static str, Zeroizing<String>)> = vec![("x-amz-date", Zeroizing::new(amz_date.clone()))];
    if scope.content_sha256_header || matches!(payload, Payload::Unsigned) {
        added.push(("x-amz-content-sha256", Zeroizing::new(payload_hash.clone())));
    }
    if let Some(token) = &creds.session_token {
        added.push(("x-amz-security-token", token.clone()));
    }
    for (n, v) in &added {
        push((*n).to_owned(), v);
    }
    canon.sort_by(|a, b| a.0.cmp(&b.0));
    let signed_headers = canon.iter().map(|(n, _)| n.as_str()).collect::<Vec<_>>().join(";");

    let mut creq = Zeroizing::new(String::new());
    creq.push_str(method);
    creq.push('\n');
    creq.push_str(&canonical_path(path, scope.is_s3()));
    creq.push('\n');
    creq.push_str(&canonical_query(query.unwrap_or("")));
    creq.push('\n');
    for (n, vs) in &canon {
        creq.push_str(n);
        creq.push(':');
        creq.push_str(&vs.join(","));
        creq.push('\n');
    }
    creq.push('\n');
    creq.push_str(&signed_headers);
    creq.push('\n');
    creq.push_str(&payload_hash);

    let credential_scope = format!("{date}/{}/{}/aws4_request", scope.region, scope.service);
    let string_to_sign = format!("{ALGORITHM}\n{amz_date}\n{credential_scope}\n{}", hex(&Sha256::digest(creq.as_bytes())));

    let mut k_secret = Zeroizing::new(String::with_capacity(4 + creds.secret_access_key.len()));
    k_secret.push_str("AWS4");
    k_secret.push_str(&creds.secret_access_key);
    let k_date = hmac(k_secret.as_bytes(), date.as_bytes());
    let k_region = hmac(&k_date[..], scope.region.as_bytes());
    let k_service = hmac(&k_region[..], scope.service.as_bytes());
    let k_signing = hmac(&k_service[..], b"aws4_request");
    let signature = Zeroizing::new(hex(&hmac(&k_signing[..], string_to_sign.as_bytes())[..]));

    let authorization = Zeroizing::new(format!(
        "{ALGORITHM} Credential={}/{credential_scope}, SignedHeaders={signed_headers}, Signature={}",
        creds.access_key_id, &*signature
    ));
    added.push(("authorization", authorization));
    Ok(Signed { headers: added, canonical_request: creq, string_to_sign, signature })
}

fn hmac(key: &[u8], data: &[u8]) -> Zeroizing<[u8; 32]> {
    #[expect(
        clippy::expect_used,
        reason = "HMAC takes a key of any length (RFC 2104: a long one is hashed, a short one padded); new_from_slice returns a Result only because KeyInit serves fixed-size-key ciphers too"
    )]
    let mut mac = HmacSha256::new_from_slice(key).expect("HMAC takes keys of any length");
    mac.update(data);
    Zeroizing::new(mac.finalize().into_bytes().into())
}

/// RFC 9110 `tchar`.
fn is_tchar(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b)
}

/// Trimmed, with every run of whitespace (obsolete line folding included) one space.
fn canonical_value(v: &str) -> String {
    v.split_ascii_whitespace().collect::<Vec<_>>().join(" ")
}

/// AWS `UriEncode`: RFC 3986 unreserved characters kept, `/` kept when `keep_slash`,
/// every other byte `%XX` uppercase.
fn uri_encode(bytes: &[u8], keep_slash: bool, out: &mut String) {
    const DIGITS: &[u8; 16] = b"0123456789ABCDEF";
    for &b in bytes {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~') || (keep_slash && b == b'/') {
            out.push(b as char);
        } else {
            out.push('%');
            out.push(DIGITS[usize::from(b >> 4)] as char);
            out.push(DIGITS[usize::from(b & 15)] as char);
        }
    }
}

/// `%XX` decoded; a `%` not followed by two hex digits stays as it is. `+` becomes a
/// space when `plus_is_space` (query strings, form semantics).
fn percent_decode(s: &str, plus_is_space: bool) -> Vec<u8> {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        let hexval = |c: u8| (c as char).to_digit(16).map(|d| d as u8);
        match b[i] {
            b'%' if i + 2 < b.len() => match (hexval(b[i + 1]), hexval(b[i + 2])) {
                (Some(h), Some(l)) => {
                    out.push(h << 4 | l);
                    i += 3;
                    continue;
                }
                _ => out.push(b'%'),
            },
            b'+' if plus_is_space => out.push(b' '),
            c => out.push(c),
        }
        i += 1;
    }
    out
}

fn canonical_path(path: &str, s3: bool) -> String {
    let mut out = String::with_capacity(path.len() + 8);
    if s3 {
        // Encode once: the key as S3 decodes it, in AWS's encoding.
        uri_encode(&percent_decode(path, false), true, &mut out);
    } else {
        uri_encode(normalize_path(path).as_bytes(), true, &mut out);
    }
    if !out.starts_with('/') {
        out.insert(0, '/');
    }
    out
}

/// RFC 3986 5.2.4 dot segments removed and empty segments dropped (the suite's
/// `get-slashes`); a trailing slash is kept.
fn normalize_path(path: &str) -> String {
    let mut segs: Vec<&str> = Vec::new();
    for s in path.split('/') {
        match s {
            "" | "." => {}
            ".." => {
                segs.pop();
            }
            s => segs.push(s),
        }
    }
    let mut out = String::from("/");
    out.push_str(&segs.join("/"));
    let trailing = path.ends_with('/') || path.ends_with("/.") || path.ends_with("/..");
    if trailing && !segs.is_empty() {
        out.push('/');
    }
    out
}

fn canonical_query(query: &str) -> String {
    let mut pairs: Vec<(String, String)> = query
        .split('&')
        .filter(|p| !p.is_empty())
        .map(|p| {
            let (k, v) = p.split_once('=').unwrap_or((p, ""));
            let (mut ek, mut ev) = (String::new(), String::new());
            uri_encode(&percent_decode(k, true), false, &mut ek);
            uri_encode(&percent_decode(v, true), false, &mut ev);
            (ek, ev)
        })
        .collect();
    pairs.sort();
    pairs.iter().map(|(k, v)| format!("{k}={v}")).collect::<Vec<_>>().join("&")
}

/// The first agent-supplied name [`agent_may_not_send`] or [`agent_may_not_send_query`]
/// refuses: header names first, then the URL's query parameter names as the server
/// will decode them. For the `SP_BAD_ARGUMENTS` message (the name is the agent's own).
pub(crate) fn refused_agent_name<'a>(header_names: impl IntoIterator<Item = &'a str>, url: &Url) -> Option<String> {
    if let Some(h) = header_names.into_iter().find(|h| agent_may_not_send(h)) {
        return Some(h.to_owned());
    }
    url.query_pairs().map(|(k, _)| k).find(|k| agent_may_not_send_query(k)).map(|k| k.into_owned())
}

/// True for a header name the agent may not set on a request signed with SigV4:
/// `authorization` and every `x-amz-*`, any case (the signer owns them, and an agent
/// `x-amz-security-token` or `x-amz-date` could change what the signature means).
pub(crate) fn agent_may_not_send(header_name: &str) -> bool {
    reserved_name(header_name)
}

/// The same rule for query parameter names (compare the DECODED name: `X%2DAmz-Date`
/// is `X-Amz-Date`): a presigned-URL parameter such as `X-Amz-Signature` or
/// `X-Amz-Credential` from the agent is refused.
pub(crate) fn agent_may_not_send_query(param_name: &str) -> bool {
    reserved_name(param_name)
}

/// Compared as servers may read the name: any case, `_` the same as `-` (CGI, WSGI and
/// PHP map both to `HTTP_X_AMZ_...`), and without surrounding whitespace or control
/// characters (a NUL that ends a C string, a trailing tab).
fn reserved_name(name: &str) -> bool {
    let n = name.trim_matches(|c: char| c.is_whitespace() || c.is_control()).as_bytes();
    let fold = |b: &u8| if *b == b'_' { b'-' } else { b.to_ascii_lowercase() };
    let starts = |prefix: &[u8]| n.len() >= prefix.len() && n.iter().zip(prefix).all(|(a, b)| fold(a) == *b);
    (n.len() == 13 && starts(b"authorization")) || starts(b"x-amz-")
}

#[cfg(test)]
mod tests;
