//! bytes -> the URL/path decoder (`tools.rs`): for every `url` an `http_request` call
//! accepts, the path the policy matches (`match_path`) equals the strict `%XX`
//! decoding of the path that goes on the wire (the authorized URL's path, also as the
//! `http` crate that ureq hands the request to reads it), and holds no dot segment, NUL
//! or backslash, nor does any later decoding of one of its segments (a server that
//! decodes twice: `%252e%252e`, `%252f`). A policy allowing only `/ok/*` on
//! `h.example` then authorizes exactly the URLs to that host whose wire path decodes
//! under `/ok/`. No accepted URL has a query parameter a lenient server reads as a
//! method override (`_method`, `__method%00`, `%255FHttpMethod`, ...).

#![no_main]

use std::sync::OnceLock;

use libfuzzer_sys::fuzz_target;
use sallyport::fuzzing::{authorize, call_request, Action, Policy, ToolCall};
use serde_json::json;

fn policy() -> &'static Policy {
    static P: OnceLock<Policy> = OnceLock::new();
    P.get_or_init(|| {
        let text = r#"{"http": {"allow": [{"hosts": ["h.example"], "methods": ["GET"], "paths": ["/ok/*"]}]}}"#;
        Policy::from_text(text, std::path::Path::new("fuzz-policy.json")).unwrap()
    })
}

/// `%XX` decoding as a server does it; `None` for anything else after a `%` or non-UTF-8.
fn server_decode(path: &str) -> Option<String> {
    let b = path.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'%' {
            let h = b.get(i + 1..i + 3)?;
            if !h.iter().all(u8::is_ascii_hexdigit) {
                return None;
            }
            out.push(u8::from_str_radix(std::str::from_utf8(h).ok()?, 16).ok()?);
            i += 3;
        } else {
            out.push(b[i]);
            i += 1;
        }
    }
    String::from_utf8(out).ok()
}

/// One more `%XX` decoding, escapes that are not one kept; `None` when nothing changes.
fn decode_again(b: &[u8]) -> Option<Vec<u8>> {
    let hex = |c: u8| (c as char).to_digit(16).map(|d| d as u8);
    let mut out = Vec::new();
    let mut i = 0;
    while i < b.len() {
        match (b[i], b.get(i + 1).copied().and_then(hex), b.get(i + 2).copied().and_then(hex)) {
            (b'%', Some(h), Some(l)) => {
                out.push(h << 4 | l);
                i += 3;
            }
            (c, ..) => {
                out.push(c);
                i += 1;
            }
        }
    }
    (out.len() != b.len()).then_some(out)
}

/// Whether a query parameter name, as a lenient server may read it (decoded until
/// nothing changes, cut at a control character, trimmed, `-` as `_`, any case), asks
/// for another method: `_method`, `__method`, `_HttpMethod`, ... Independent of sp's
/// own check, which must have refused every such URL.
fn overrides_method(name: &str) -> bool {
    let mut n = name.as_bytes().to_vec();
    for _ in 0..8 {
        let text = String::from_utf8_lossy(&n).to_ascii_lowercase();
        let cut = text.split(|c: char| c.is_control()).next().unwrap_or_default().trim();
        let base = cut.split('[').next().unwrap_or_default().replace(['-', '.', ' '], "_");
        let core = base.trim_start_matches('_');
        if core.len() < base.len() && matches!(core.replace('_', "").as_str(), "method" | "httpmethod") {
            return true;
        }
        match decode_again(&n) {
            Some(next) => n = next,
            None => return false,
        }
    }
    false
}

fuzz_target!(|data: &[u8]| {
    let Ok(raw) = std::str::from_utf8(data) else { return };
    // Bare paths are tried on a fixed origin, so the fuzzer spends its time on paths.
    let url = if raw.starts_with('/') { format!("http://h.example{raw}") } else { raw.to_owned() };
    let call = call_request(Some(json!({"name": "http_request", "arguments": {"method": "GET", "url": url}}))).unwrap();
    let Ok(ToolCall::Http(req)) = ToolCall::parse(&call) else { return };
    // A method override in the query (issue #20 item 4) never passes.
    for (name, _) in req.url.query_pairs() {
        assert!(!overrides_method(&name), "{url:?}: override parameter {name:?} accepted");
    }
    let wire = req.url.path();
    let decoded = server_decode(wire).unwrap_or_else(|| panic!("{url:?}: wire path {wire:?} does not decode"));
    assert_eq!(decoded, req.match_path, "{url:?}: the policy matched another path than the wire carries");
    let segs: Vec<&str> = req.match_path.split('/').collect();
    assert!(!segs.iter().any(|s| *s == "." || *s == ".."), "{url:?}: dot segment in {:?}", req.match_path);
    assert!(!req.match_path.contains(['\0', '\\']), "{url:?}: {:?}", req.match_path);
    for seg in segs.iter().skip(1) {
        let mut seg = seg.as_bytes().to_vec();
        while let Some(next) = decode_again(&seg) {
            let climbs = next.iter().any(|b| matches!(b, b'/' | b'\\' | 0)) || next == b".." || next == b".";
            assert!(!climbs, "{url:?}: a second decoding of {:?} gives {next:?}", req.match_path);
            seg = next;
        }
    }
    // The URL string as the executor passes it on is read back to the same path.
    let again = url::Url::parse(req.url.as_str()).unwrap();
    assert_eq!(again.path(), wire, "{url:?}: the URL does not survive a round trip");
    if let Ok(uri) = req.url.as_str().parse::<http::Uri>() {
        assert_eq!(uri.path(), wire, "{url:?}: the http crate reads another path");
    }
    if req.host != "h.example" || req.port != 80 {
        return;
    }
    let allowed = matches!(authorize(policy(), ToolCall::Http(req.clone())), Ok(Action::Http(_)));
    let under = decoded.starts_with("/ok/") || decoded == "/ok";
    assert_eq!(allowed, under, "{url:?}: wire path decodes to {decoded:?}; authorized: {allowed}");
});
