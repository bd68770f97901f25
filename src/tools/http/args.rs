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
mod tests;
