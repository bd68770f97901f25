//! `http_request`'s arguments: the JSON object the agent sent, checked field by field,
//! becomes an [`HttpRequest`] or an [`ArgError`] (`SP_BAD_ARGUMENTS`) the model can read.
//! Every unknown argument is refused; the URL is checked and normalised by `url.rs`,
//! never resolved. Also the tool's `inputSchema` (a test keeps schema and parser equal).

use serde_json::{json, Map, Value};

use crate::tools::http::url::{check_url, decoded_path, MAX_URL_BYTES};
use crate::mcp::jsonrpc::kind_of;
use crate::policy::{is_name, is_token, Method};
use crate::mcp::model::{bad, short, ArgError};

pub(crate) const HTTP_REQUEST: &str = "http_request";

pub(crate) const MAX_HEADERS: usize = 100;
pub(crate) const MAX_HEADER_NAME_BYTES: usize = 128;
pub(crate) const MAX_HEADER_VALUE_BYTES: usize = 16 * 1024;
pub(crate) const MAX_QUERY_PARAMS: usize = 100;

// Headers the agent may never set, and those of them that cannot carry a credential
// either: the policy needs them to validate `inject.header.name` (`policy/http.rs`).
pub(crate) use crate::policy::RESERVED_HEADERS;
// Routing headers: refused on credentialed requests by `authorize.rs`; the policy
// validates `allow_routing_headers` against them.
pub(crate) use crate::policy::is_routing_header;

/// Headers that ask the server, or a framework or proxy in front of it, to treat the
/// request as another method or path: a credential bound to `POST /ok/*`
/// must not become `DELETE /admin`. Refused on every request, whatever its letter case,
/// and also spelled with `_` for `-` (CGI, WSGI and PHP map both spellings to the same
/// `HTTP_X_...` variable). Listed in `sp-policy(5)`, "REQUEST OVERRIDES".
pub const OVERRIDE_HEADERS: &[&str] = &[
    // method
    "x-http-method-override",
    "x-http-method",
    "x-method-override",
    "x-original-method",
    "x-forwarded-method",
    // path
    "x-original-url",
    "x-original-uri",
    "x-rewrite-url",
    "x-override-url",
    "x-forwarded-path",
    "x-forwarded-prefix",
    "x-forwarded-uri",
    "x-envoy-original-path",
];

/// Query, form and JSON body parameter names with the same effect (Rails, Laravel,
/// Symfony, Spring, Express `_method`; Salesforce `_HttpMethod`; ASP.NET and Express
/// `method-override` with a header name as query key). Compared as a server may read
/// the name ([`is_override_param`]): percent-decoded again and again (a server that
/// decodes twice), cut at a NUL or other control character (PHP reads names as C
/// strings) and trailing whitespace, leading spaces dropped, the base name of array
/// syntax (`_method[]`), PHP's mangling (` `, `.`, `[` read as `_`), any case, `-` and
/// `_` the same, a run of leading `_`/`-` the same as one (`__method`, `-method`).
pub const OVERRIDE_PARAMS: &[&str] = &["_method", "_httpmethod", "x-http-method-override", "x-http-method", "x-method-override"];

fn is_override_header(lower: &str) -> bool {
    OVERRIDE_HEADERS.contains(&lower.replace('_', "-").as_str())
}

/// Whether a parameter name, read as any server may read it (see [`OVERRIDE_PARAMS`]),
/// is an override parameter.
fn is_override_param(name: &str) -> bool {
    let mut form = std::borrow::Cow::Borrowed(name);
    for _ in 0..8 {
        if override_name(&form) {
            return true;
        }
        match lenient_decode(&form) {
            Some(next) if next != *form => form = std::borrow::Cow::Owned(next),
            _ => return false,
        }
    }
    false
}

/// One decoded spelling: cut at the first control character (a NUL ends a C string;
/// what follows is junk to PHP), trimmed (PHP and Rack drop leading spaces), whole and
/// as the base name before `[`, PHP-mangled.
fn override_name(name: &str) -> bool {
    let cut = name.split(char::is_control).next().unwrap_or_default().trim();
    let base = cut.split('[').next().unwrap_or_default();
    [cut, base].into_iter().any(|n| {
        let mangled: String = n.chars().map(|c| if matches!(c, ' ' | '.' | '[') { '_' } else { c.to_ascii_lowercase() }).collect();
        let leading = mangled.starts_with(['_', '-']);
        let core: String = mangled.chars().filter(|c| !matches!(c, '_' | '-')).collect();
        // A plain `method` or `httpMethod` is an ordinary field (API Gateway's
        // integration body has one); the leading `_` makes the framework's name.
        match core.as_str() {
            "method" | "httpmethod" => leading,
            "xhttpmethodoverride" | "xhttpmethod" | "xmethodoverride" => true,
            _ => false,
        }
    })
}

/// `%XX` escapes decoded, anything else kept as it is (`+` too: only the first decoding
/// of a form reads it as a space); `None` when there is no escape.
fn lenient_decode(s: &str) -> Option<String> {
    let b = s.as_bytes();
    let hex = |c: u8| (c as char).to_digit(16);
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        match (b[i], b.get(i + 1).copied().and_then(hex), b.get(i + 2).copied().and_then(hex)) {
            (b'%', Some(h), Some(l)) => {
                out.push((h << 4 | l) as u8);
                i += 3;
            }
            (c, ..) => {
                out.push(c);
                i += 1;
            }
        }
    }
    (out.len() != b.len()).then(|| String::from_utf8_lossy(&out).into_owned())
}

/// The override parameter in a query string or form body, if any. Pairs are split at
/// `;` as well as `&`: Rack before 3.0 (Rails) and older CGI libraries accept both.
fn form_override(form: &str) -> Option<String> {
    form.split(['&', ';']).flat_map(|piece| url::form_urlencoded::parse(piece.as_bytes())).find(|(k, _)| is_override_param(k)).map(|(k, _)| k.into_owned())
}

/// The override parameter a body carries, if any: a form field, a top-level JSON
/// member or a multipart part of that name.
fn body_override(body: &str) -> Option<String> {
    if let Some(k) = form_override(body) {
        return Some(k);
    }
    if let Ok(Value::Object(m)) = serde_json::from_str::<Value>(body)
        && let Some(k) = m.keys().find(|k| is_override_param(k))
    {
        return Some(k.clone());
    }
    // multipart/form-data: `Content-Disposition: form-data; name="_method"`, also
    // `name = "..."`, unquoted, and RFC 8187 `name*=utf-8''%5Fmethod`.
    let lower = body.to_ascii_lowercase();
    lower.match_indices("name").find_map(|(i, _)| {
        let rest = body[i + 4..].strip_prefix('*').unwrap_or(&body[i + 4..]);
        let rest = rest.trim_start_matches([' ', '\t']).strip_prefix('=')?.trim_start_matches([' ', '\t']);
        let name = match rest.strip_prefix('"') {
            Some(quoted) => quoted.split('"').next(),
            None => rest.split([';', '\r', '\n']).next(),
        }?;
        let name = name.rsplit("''").next().unwrap_or(name);
        is_override_param(name).then(|| name.to_owned())
    })
}

const OVERRIDE_WHY: &str = "would ask the server to treat the request as another method or path; \
    send the method and URL you mean (see sp-policy(5), REQUEST OVERRIDES)";

/// The `tools/list` entry of `http_request`.
pub(crate) fn definition() -> Value {
    let methods: Vec<&str> = Method::ALL.iter().map(|m| m.as_str()).collect();
    json!({
        "name": HTTP_REQUEST,
        "title": "HTTP request",
        "description": "Send one HTTP request to an API the operator allows. Credentials are \
            injected by the gateway: name one with `credential` (see sp_inventory) or \
            let the gateway pick the one bound to the URL. Never put secrets in arguments. \
            The result has the status, response headers, and the body (as `json` when it \
            parses, else `body`), with `truncated` set when the body was cut at the limit.",
        "inputSchema": {
            "type": "object",
            "properties": {
                "method": {"type": "string", "enum": methods},
                "url": {"type": "string", "description": "Absolute http:// or https:// URL, no user:password, no #fragment", "maxLength": MAX_URL_BYTES},
                "headers": {"type": "object", "description": "Extra request headers (Authorization, Cookie, Host, Accept-Encoding and framing headers are refused)", "additionalProperties": {"type": "string"}, "maxProperties": MAX_HEADERS},
                "query": {"type": "object", "description": "Query parameters appended to the URL", "additionalProperties": {"type": "string"}, "maxProperties": MAX_QUERY_PARAMS},
                "body": {"type": "string", "description": "Request body (not allowed with GET or HEAD)"},
                "credential": {"type": "string", "description": "Name of a credential from sp_inventory"}
            },
            "required": ["method", "url"],
            "additionalProperties": false
        },
        "outputSchema": super::result::output_schema(),
        // Any method, so a write: hosts ask before it (`http_get` is the read).
        "annotations": {"title": "HTTP request", "readOnlyHint": false, "destructiveHint": true, "openWorldHint": true}
    })
}

/// `http_request` arguments after every check.
#[derive(Debug, Clone, PartialEq)]
pub struct HttpRequest {
    pub method: Method,
    /// Normalised URL with the `query` arguments appended.
    pub url: url::Url,
    /// Percent-decoded, dot-segment-free path: what policy path patterns match.
    pub match_path: String,
    /// Host as policy patterns see it (lowercase, no trailing dot, `[v6]`).
    pub host: String,
    pub port: u16,
    pub default_port: u16,
    /// Header names lowercased, checked, unique.
    pub headers: Vec<(String, String)>,
    pub body: Option<String>,
    pub credential: Option<String>,
}

fn string_arg<'a>(args: &'a Map<String, Value>, key: &str) -> Result<Option<&'a str>, ArgError> {
    match args.get(key) {
        None => Ok(None),
        Some(Value::String(s)) => Ok(Some(s)),
        Some(other) => bad(format!("{key:?} must be a string, found {}", kind_of(other))),
    }
}

fn string_map<'a>(args: &'a Map<String, Value>, key: &str, max: usize) -> Result<Vec<(&'a str, &'a str)>, ArgError> {
    let map = match args.get(key) {
        None => return Ok(Vec::new()),
        Some(Value::Object(m)) => m,
        Some(other) => return bad(format!("{key:?} must be an object of strings, found {}", kind_of(other))),
    };
    if map.len() > max {
        return bad(format!("{key:?} has {} entries; at most {max} are allowed", map.len()));
    }
    map.iter()
        .map(|(k, v)| match v {
            Value::String(s) => Ok((k.as_str(), s.as_str())),
            other => crate::mcp::model::bad(format!("{key:?}.{:?} must be a string, found {}", short(k), kind_of(other))),
        })
        .collect()
}

pub(crate) fn parse(args: &Map<String, Value>) -> Result<HttpRequest, ArgError> {
    const KNOWN: [&str; 6] = ["method", "url", "headers", "query", "body", "credential"];
    if let Some(k) = args.keys().find(|k| !KNOWN.contains(&k.as_str())) {
        return bad(format!("unknown argument {:?} (http_request takes: {})", short(k), KNOWN.join(", ")));
    }
    let method = match string_arg(args, "method")? {
        None => return bad("\"method\" is required"),
        Some(m) => Method::parse(m).ok_or_else(|| ArgError(format!("\"method\" must be one of GET, HEAD, POST, PUT, PATCH, DELETE, not {:?}", short(m))))?,
    };
    let Some(raw_url) = string_arg(args, "url")? else {
        return bad("\"url\" is required");
    };
    let mut url = check_url(raw_url)?;

    let query = string_map(args, "query", MAX_QUERY_PARAMS)?;
    if !query.is_empty() {
        let mut pairs = url.query_pairs_mut();
        for (k, v) in &query {
            if k.is_empty() {
                return bad("query parameter names must not be empty");
            }
            pairs.append_pair(k, v);
        }
    }
    if url.as_str().len() > MAX_URL_BYTES {
        return bad(format!("the URL with its query is longer than {MAX_URL_BYTES} bytes"));
    }
    if let Some(k) = url.query().and_then(form_override) {
        return bad(format!("query parameter {:?} {OVERRIDE_WHY}", short(&k)));
    }

    let mut headers: Vec<(String, String)> = Vec::new();
    for (name, value) in string_map(args, "headers", MAX_HEADERS)? {
        if name.len() > MAX_HEADER_NAME_BYTES || !is_token(name) {
            return bad(format!("header name {:?} is not a valid token of at most {MAX_HEADER_NAME_BYTES} bytes", short(name)));
        }
        let lower = name.to_ascii_lowercase();
        if RESERVED_HEADERS.contains(&lower.as_str()) {
            return bad(format!("header {name:?} is set by the gateway and may not be sent by the agent"));
        }
        if is_override_header(&lower) {
            return bad(format!("header {name:?} {OVERRIDE_WHY}"));
        }
        // RFC 9110 5.5: a field value may hold HTAB; no other control character.
        if value.len() > MAX_HEADER_VALUE_BYTES || value.chars().any(|c| c.is_control() && c != '\t') {
            return bad(format!("header {name:?} value must be at most {MAX_HEADER_VALUE_BYTES} bytes without control characters"));
        }
        if headers.iter().any(|(n, _)| *n == lower) {
            return bad(format!("header {name:?} is given twice"));
        }
        headers.push((lower, value.to_owned()));
    }

    let body = string_arg(args, "body")?.map(str::to_owned);
    if body.is_some() && matches!(method, Method::Get | Method::Head) {
        return bad(format!("a body is not allowed with {method}"));
    }
    if let Some(k) = body.as_deref().and_then(body_override) {
        return bad(format!("the body's parameter {:?} {OVERRIDE_WHY}", short(&k)));
    }
    let credential = string_arg(args, "credential")?.map(str::to_owned);
    if let Some(c) = &credential
        && !is_name(c)
    {
        return bad("\"credential\" must be a credential name from sp_inventory");
    }

    HttpRequest::new(method, url, headers, body, credential)
}

impl HttpRequest {
    /// Derives what the policy matches from an already checked URL.
    pub fn new(
        method: Method,
        url: url::Url,
        headers: Vec<(String, String)>,
        body: Option<String>,
        credential: Option<String>,
    ) -> Result<HttpRequest, ArgError> {
        let match_path = decoded_path(&url)?;
        let host = url.host_str().unwrap_or_default().to_owned();
        let default_port = if url.scheme() == "https" { 443 } else { 80 };
        let port = url.port().unwrap_or(default_port);
        Ok(HttpRequest { method, url, match_path, host, port, default_port, headers, body, credential })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn http(args: Value) -> Result<HttpRequest, ArgError> {
        let Value::Object(a) = args else { panic!() };
        parse(&a)
    }

    #[test]
    fn http_ok() {
        let r =
            http(json!({"method": "GET", "url": "http://API.example.com./v1/a%20b/../c?x=1", "query": {"q": "a b&c"}, "headers": {"X-Trace": "1"}})).unwrap();
        assert_eq!(r.host, "api.example.com");
        assert_eq!(r.url.as_str(), "http://api.example.com/v1/c?x=1&q=a+b%26c");
        assert_eq!(r.match_path, "/v1/c");
        assert_eq!(r.port, 80);
        assert_eq!(r.headers, vec![("x-trace".to_string(), "1".to_string())]);
        let r = http(json!({"method": "POST", "url": "https://10.0.0.1:8443", "body": "{}", "credential": "gh"})).unwrap();
        assert_eq!((r.port, r.default_port, r.match_path.as_str()), (8443, 443, "/"));
        let r = http(json!({"method": "GET", "url": "http://0x7f.1/%7euser"})).unwrap();
        assert_eq!((r.host.as_str(), r.match_path.as_str()), ("127.0.0.1", "/~user"));
        let r = http(json!({"method": "GET", "url": "http://h/v1/%2e%2e/admin"})).unwrap();
        assert_eq!(r.match_path, "/admin", "url crate resolves encoded dot segments");
        // encoded twice, but nothing that climbs: sent
        let r = http(json!({"method": "GET", "url": "http://h/v1/100%25/%2541/%252/%25zz/a%252eb"})).unwrap();
        assert_eq!(r.match_path, "/v1/100%/%41/%2/%zz/a%2eb");
    }

    #[test]
    fn http_refused() {
        let cases = vec![
            (json!({"url": "http://a/"}), "\"method\" is required"),
            (json!({"method": "get", "url": "http://a/"}), "must be one of GET"),
            (json!({"method": "TRACE", "url": "http://a/"}), "must be one of GET"),
            (json!({"method": "GET"}), "\"url\" is required"),
            (json!({"method": "GET", "url": 5}), "\"url\" must be a string"),
            (json!({"method": "GET", "url": "ftp://a/"}), "must be http:// or https://"),
            (json!({"method": "GET", "url": "file:///etc/passwd"}), "must be http:// or https://"),
            (json!({"method": "GET", "url": "/relative"}), "not a valid absolute URL"),
            (json!({"method": "GET", "url": "http://user:pw@a/"}), "must not contain user:password@"),
            (json!({"method": "GET", "url": "http://user@a/"}), "must not contain user:password@"),
            (json!({"method": "GET", "url": "http://a/#frag"}), "must not contain a #fragment"),
            (json!({"method": "GET", "url": "http://a/ b"}), "(byte 0x20)"),
            (json!({"method": "GET", "url": "http://a/\tb"}), "(byte 0x09)"),
            (json!({"method": "GET", "url": "http:\\\\a\\b"}), "(byte 0x5c)"),
            (json!({"method": "GET", "url": "http://ä.com/"}), "(byte 0xc3)"),
            (json!({"method": "GET", "url": "http://a/v1/x%2f..%2fadmin"}), "encoded separator or dot segment"),
            (json!({"method": "GET", "url": "http://a/v1/..;/admin"}), "encoded separator or dot segment"),
            (json!({"method": "GET", "url": "http://a/v1/%5c"}), "encoded separator or dot segment"),
            (json!({"method": "GET", "url": "http://a/v1/%00"}), "encoded separator or dot segment"),
            (json!({"method": "GET", "url": "http://a/v1/%ff"}), "not valid percent-encoded UTF-8"),
            // a server that decodes twice (or more) must not climb out either
            (json!({"method": "GET", "url": "http://a/v1/%252e%252e/admin"}), "encoded more than once"),
            (json!({"method": "GET", "url": "http://a/v1/%252E%252E/admin"}), "encoded more than once"),
            (json!({"method": "GET", "url": "http://a/v1/.%252e/admin"}), "encoded more than once"),
            (json!({"method": "GET", "url": "http://a/v1/%252e"}), "encoded more than once"),
            (json!({"method": "GET", "url": "http://a/v1/x%252f..%252fadmin"}), "encoded more than once"),
            (json!({"method": "GET", "url": "http://a/v1/x%252F"}), "encoded more than once"),
            (json!({"method": "GET", "url": "http://a/v1/x%255cadmin"}), "encoded more than once"),
            (json!({"method": "GET", "url": "http://a/v1/x%2500"}), "encoded more than once"),
            (json!({"method": "GET", "url": "http://a/v1/%252e%252e;x/admin"}), "encoded more than once"),
            (json!({"method": "GET", "url": "http://a/v1/%25252e%25252e/admin"}), "encoded more than once"),
            (json!({"method": "GET", "url": "http://a/v1/%2525252f"}), "encoded more than once"),
            (json!({"method": "GET", "url": "http://a/v1/%25%32%65%25%32%65/admin"}), "encoded more than once"),
            (json!({"method": "GET", "url": "http://a/v1/%25%32%46"}), "encoded more than once"),
            (json!({"method": "GET", "url": format!("http://a/v1/%{}2e", "25".repeat(10))}), "encoded more than once"),
            (json!({"method": "GET", "url": "http://a/v1/%zz"}), "does not start a %XX escape"),
            (json!({"method": "GET", "url": format!("http://a/{}", "x".repeat(MAX_URL_BYTES))}), "is longer than 16384 bytes"),
            (json!({"method": "GET", "url": "http://a/", "extra": 1}), "unknown argument \"extra\""),
            (json!({"method": "GET", "url": "http://a/", "headers": {"Authorization": "x"}}), "is set by the gateway"),
            (json!({"method": "GET", "url": "http://a/", "headers": {"host": "x"}}), "is set by the gateway"),
            (json!({"method": "GET", "url": "http://a/", "headers": {"Cookie": "x"}}), "is set by the gateway"),
            (json!({"method": "GET", "url": "http://a/", "headers": {"Transfer-Encoding": "chunked"}}), "is set by the gateway"),
            (json!({"method": "GET", "url": "http://a/", "headers": {"X-A": "a\r\nX-B: b"}}), "without control characters"),
            (json!({"method": "GET", "url": "http://a/", "headers": {"X A": "a"}}), "is not a valid token"),
            (json!({"method": "GET", "url": "http://a/", "headers": {"X-A": 1}}), "must be a string, found an integer"),
            (json!({"method": "GET", "url": "http://a/", "headers": "X-A: 1"}), "must be an object of strings"),
            (json!({"method": "GET", "url": "http://a/", "headers": {"x-a": "1", "X-A": "2"}}), "is given twice"),
            (json!({"method": "GET", "url": "http://a/", "query": {"": "x"}}), "names must not be empty"),
            (json!({"method": "GET", "url": "http://a/", "query": {"a": ["x"]}}), "must be a string, found an array"),
            (json!({"method": "GET", "url": "http://a/", "body": "x"}), "a body is not allowed with GET"),
            (json!({"method": "POST", "url": "http://a/", "body": {"a": 1}}), "must be a string, found an object"),
            (json!({"method": "GET", "url": "http://a/", "credential": "../etc"}), "must be a credential name"),
            (json!({"method": "GET", "url": "http://a/", "credential": 7}), "must be a string, found an integer"),
            // `%` starts exactly two hex digits (u8::from_str_radix took a sign)
            (json!({"method": "GET", "url": "http://a/v1/%+9x"}), "does not start a %XX escape"),
            (json!({"method": "GET", "url": "http://a/v1/%-1"}), "does not start a %XX escape"),
            (json!({"method": "GET", "url": "http://a/v1/%4"}), "does not start a %XX escape"),
            (json!({"method": "GET", "url": "http://a/v1/x%"}), "does not start a %XX escape"),
            (json!({"method": "GET", "url": "http://a/v1/%%41"}), "does not start a %XX escape"),
            (json!({"method": "GET", "url": "http://a/v1/x?q=100%"}), "does not start a %XX escape"),
        ];
        for (args, want) in cases {
            let shown = args.to_string();
            match http(args) {
                Ok(r) => panic!("accepted {shown}: {r:?}"),
                Err(e) => assert!(e.0.contains(want), "{shown}: {}", e.0),
            }
        }
        let many: Map<String, Value> = (0..=MAX_HEADERS).map(|i| (format!("x-{i}"), json!("v"))).collect();
        let got = http(json!({"method": "GET", "url": "http://a/", "headers": many})).unwrap_err().0;
        assert!(got.contains("at most 100 are allowed"), "{got}");
    }

    // Attacks tried, each a piece of the property test's alphabet:
    // - a signed escape `%+9`, `%-1`, `%+f` (u8::from_str_radix took the sign): held
    //   after the fix, refused; it failed the property before;
    // - short and stray escapes `%4`, `%`, `%%`, `%zz`, `%u002e`: refused;
    // - encoded dots `%2e`, `%2E`, `.%2E`, `%2e%2e`: the url crate resolves them before
    //   both the policy and the wire see the path: held;
    // - `%2F`, `%5C`, backslashes, NUL, `..;`: refused;
    // - `%3F`, `%23`, `?` (a query starts), `%25`, `%2525`, `;` params, empty
    //   segments, upper and lower case hex, `%C3%A9`, a lone `%e9`, raw `é`: held
    //   (decoded the same on both sides, or refused);
    // - a query credential appended to the URL: the path on the wire is unchanged.
    // - `decoded_path` decodes only segments holding a `%` now: the property
    //   mixes both kinds in one path, and a plain `..;` takes the branch that decodes
    //   nothing (the table above): held.

    /// Decodes the request line's path as a server would: `%XX` escapes only.
    fn server_decode(path: &str) -> Option<String> {
        let mut out = Vec::new();
        let mut rest = path.as_bytes();
        while let Some((&c, tail)) = rest.split_first() {
            if c == b'%' {
                let hex = std::str::from_utf8(tail.get(..2)?).ok()?;
                if !hex.bytes().all(|b| b.is_ascii_hexdigit()) {
                    return None;
                }
                out.push(u8::from_str_radix(hex, 16).ok()?);
                rest = &tail[2..];
            } else {
                out.push(c);
                rest = tail;
            }
        }
        String::from_utf8(out).ok()
    }

    /// The property: for any URL `http_request` accepts, the path the policy
    /// matched equals the decoding of the path on the wire. `http/exec.rs` builds the
    /// request with `.uri(url.as_str())` (or, for a query credential, the same URL with
    /// one pair appended) and ureq-proto writes `uri().path_and_query()` on the request
    /// line (`client/amended.rs`, `prelude`), so the wire path is `Uri::path()` of that
    /// string. Deterministic: every pair of tricky pieces, then seeded random sequences.
    #[test]
    fn matched_path_is_the_decoded_wire_path() {
        const PIECES: &[&str] = &[
            "a",
            "B",
            ".",
            "..",
            "%2e",
            "%2E",
            "%2e%2e",
            ".%2E",
            "%2f",
            "%2F",
            "%5c",
            "%5C",
            "\\",
            ";",
            ";x",
            "%3b",
            "%3B",
            "%3f",
            "%3F",
            "?",
            "%23",
            "%25",
            "%2525",
            "%",
            "%+9",
            "%-1",
            "%+f",
            "%4",
            "%zz",
            "%%",
            "%c3%a9",
            "%C3%A9",
            "%e9",
            "%ff",
            "é",
            "/",
            "//",
            "~",
            "%7e",
            "%7E",
            "%00",
            "%09",
            "%20",
            "+",
            "@",
            ":",
            "[",
            "]",
            "!",
            "$",
            "&",
            "'",
            "(",
            ")",
            "*",
            ",",
            "=",
            "%u002e",
            "%0a",
            "%ef%bc%8f",
            "%252e",
            "%252E",
            "%252f",
            "%255c",
            "%2500",
            "%25%32%65",
            "%25252e",
            "%2541",
        ];
        let mut accepted = 0;
        let mut check = |path: &str| {
            let raw = format!("http://h.example/{path}");
            let Ok(r) = http(json!({"method": "GET", "url": raw, "query": {"q": "%+9"}})) else { return };
            let mut with_secret = r.url.clone();
            with_secret.query_pairs_mut().append_pair("key", "s%+9/..");
            for sent in [&r.url, &with_secret] {
                let uri: ureq::http::Uri = sent.as_str().parse().unwrap_or_else(|e| panic!("{raw}: accepted but unsendable: {e}"));
                let wire = uri.path();
                assert_eq!(server_decode(wire).as_deref(), Some(r.match_path.as_str()), "{raw}: wire path {wire}");
            }
            // A server that decodes each segment again and again sees no other path.
            for seg in r.match_path.split('/') {
                let mut seg = seg.as_bytes().to_vec();
                while let Some(next) = crate::tools::http::url::tests::decode_again(&seg) {
                    assert!(!next.contains(&b'/') && !next.contains(&b'\\') && !next.contains(&0) && next != b".." && next != b".", "{raw}: {next:?}");
                    seg = next;
                }
            }
            accepted += 1;
        };
        for a in PIECES {
            for b in PIECES {
                check(&format!("{a}{b}"));
                check(&format!("{a}/{b}"));
            }
        }
        let mut seed: u64 = 0x5eed;
        for _ in 0..20_000 {
            let mut path = String::new();
            seed = seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            for _ in 0..1 + (seed >> 60) % 6 {
                seed = seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
                path.push_str(PIECES[(seed >> 33) as usize % PIECES.len()]);
                if seed & 1 == 0 {
                    path.push('/');
                }
            }
            check(&path);
        }
        assert!(accepted > 5_000, "only {accepted} URLs accepted: the generator tests too little");
    }

    // Attacks tried: every OVERRIDE_HEADERS name in lower, upper and mixed
    // case and with `_` for `-`; `_method` and the header names as query keys (also
    // percent-encoded, upper case, PHP-mangled `.method`, `[method`, after a
    // `;` separator (Rack 2), with leading spaces, and via the `query` argument); `_method` as a form field, a JSON member and a multipart
    // part of the body. All refused. Lookalikes (`X-Method`, `method=`, `my_method=`)
    // are not refused.
    // Attacks tried (second pass): Salesforce `_HttpMethod` (and `_http_method`,
    // `__HttpMethod`), `__method`, `-method`, `_method%00` (PHP reads names as C strings),
    // `_method%00junk`, other control bytes and trailing spaces, `_method[]` and
    // `_method[x]` (array syntax: the framework still reads `_method`), `%255Fmethod`
    // and `%25255Fmethod` (a server that decodes twice or three times), a JSON member
    // `_HttpMethod`, multipart `name*=utf-8''%5Fmethod` (RFC 8187), `name = "_method"`,
    // unquoted `name=_method`: all refused. `httpMethod`, `method`, `_methods`,
    // `method_` (ordinary field names; API Gateway's integration body has
    // `httpMethod`): sent.
    #[test]
    fn override_headers_and_params_are_refused_in_every_spelling() {
        fn spellings(name: &str) -> Vec<String> {
            let mixed: String = name.split('-').map(|w| w[..1].to_uppercase() + &w[1..]).collect::<Vec<_>>().join("-");
            vec![name.to_owned(), name.to_uppercase(), mixed.clone(), mixed.replace('-', "_"), name.replace('-', "_")]
        }
        let refused = |args: Value, want: &str| {
            let shown = args.to_string();
            let got = http(args).map(|r| r.url.to_string()).unwrap_err().0;
            assert!(got.contains(want) && got.contains("another method or path"), "{shown}: {got}");
        };
        for name in OVERRIDE_HEADERS {
            for h in spellings(name) {
                refused(json!({"method": "POST", "url": "https://a/ok/x", "headers": {h.clone(): "DELETE"}, "body": "{}"}), &format!("header {h:?}"));
            }
        }
        for name in OVERRIDE_PARAMS {
            for q in spellings(name) {
                let url = format!("https://a/ok/x?a=1&{q}=DELETE");
                refused(json!({"method": "POST", "url": url, "body": "{}"}), "query parameter");
                refused(json!({"method": "POST", "url": "https://a/ok/x", "query": {q.clone(): "DELETE"}}), "query parameter");
                refused(json!({"method": "POST", "url": "https://a/ok/x", "body": format!("a=1&{q}=DELETE")}), "the body's parameter");
                refused(json!({"method": "POST", "url": "https://a/ok/x", "body": json!({q.clone(): "DELETE"}).to_string()}), "the body's parameter");
                let multipart = format!("--b\r\nContent-Disposition: form-data; NAME=\"{q}\"\r\n\r\nDELETE\r\n--b--\r\n");
                refused(json!({"method": "POST", "url": "https://a/ok/x", "body": multipart}), "the body's parameter");
            }
        }
        for url in ["https://a/x?%5Fmethod=PUT", "https://a/x?%5fMETHOD=PUT", "https://a/x?.method=PUT", "https://a/x?[method=PUT"] {
            refused(json!({"method": "GET", "url": url}), "query parameter");
        }
        for url in ["https://a/x?a=1;_method=PUT", "https://a/x?a=1;%20_method=PUT", "https://a/x?a=1&+_method=PUT"] {
            refused(json!({"method": "GET", "url": url}), "query parameter");
        }
        for body in ["_method=PUT", "%5Fmethod=PUT", "x=1&.method=PUT", "a=1;_method=PUT", "a=1; _method=PUT"] {
            refused(json!({"method": "POST", "url": "https://a/x", "body": body}), "the body's parameter");
        }
        // Salesforce `_HttpMethod`, folded underscores and dashes, what servers strip
        // (a NUL and what follows it, other control bytes, trailing spaces), array
        // syntax, and names encoded twice or three times (a server that decodes again)
        for name in [
            "_HttpMethod",
            "_httpmethod",
            "_HTTP_METHOD",
            "_http-method",
            "__method",
            "___method",
            "-method",
            "_-method",
            "_Method",
            "_method%00",
            "_method%00junk",
            "_method%01",
            "_method%7f",
            "_method%09",
            "_method%20",
            "_method%5B%5D",
            "_method[]",
            "_method[x]",
            "%255Fmethod",
            "%25255Fmethod",
            "%255fMETHOD%2500",
            "x_http_method_override",
            "X_HTTP_Method",
            "%2520_method",
            "__HttpMethod",
        ] {
            let url = format!("https://a/ok/x?a=1&{name}=DELETE");
            refused(json!({"method": "POST", "url": url, "body": "{}"}), "query parameter");
            refused(json!({"method": "POST", "url": "https://a/ok/x", "body": format!("a=1&{name}=DELETE")}), "the body's parameter");
            let multipart = format!("--b\r\nContent-Disposition: form-data; name=\"{name}\"\r\n\r\nDELETE\r\n--b--\r\n");
            refused(json!({"method": "POST", "url": "https://a/ok/x", "body": multipart}), "the body's parameter");
        }
        refused(json!({"method": "POST", "url": "https://a/ok/x", "body": json!({"_HttpMethod": "DELETE"}).to_string()}), "the body's parameter");
        refused(json!({"method": "POST", "url": "https://a/ok/x", "body": json!({"__method\u{0}": "DELETE"}).to_string()}), "the body's parameter");
        for part in ["name*=utf-8''%5Fmethod", "name = \"_method\"", "name=_method", "NAME*=UTF-8''_HttpMethod"] {
            let multipart = format!("--b\r\nContent-Disposition: form-data; {part}\r\n\r\nDELETE\r\n--b--\r\n");
            refused(json!({"method": "POST", "url": "https://a/ok/x", "body": multipart}), "the body's parameter");
        }
        // lookalikes pass
        let ok = http(
            json!({"method": "POST", "url": "https://a/x?method=a&my_method=b", "headers": {"X-Method": "1", "X-Forwarded-For": "1"}, "body": "my_method=1&methods=2"}),
        );
        assert!(ok.is_ok(), "{ok:?}");
        for body in ["httpMethod=GET", "_methods=1&method_=2", "{\"httpMethod\": \"POST\", \"method\": \"GET\"}", "a=%25"] {
            let ok = http(json!({"method": "POST", "url": "https://a/x?httpMethod=GET&_methods=1", "body": body}));
            assert!(ok.is_ok(), "{body}: {ok:?}");
        }
        let ok = http(json!({"method": "POST", "url": "https://a/x", "body": "{\"data\": {\"_method\": \"nested is fine\"}}"}));
        assert!(ok.is_ok(), "{ok:?}");
    }
}
