//! What an `http_request` returns: the executor's outcome and the tool result it
//! becomes. A leaf the executor seam (`exec.rs`) names in its signature.

use base64::Engine as _;
use serde_json::{Map, Value};

use crate::tools::http::coding;

/// What came back. A status is a result, never an error.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HttpOutcome {
    pub status: u16,
    /// Lowercase names, in arrival order; `set-cookie` is never included.
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
    /// The body was cut at `max_response_bytes`.
    pub truncated: bool,
}

/// What [`HttpResult::from_outcome`] searches compressed content with: the secrets
/// finder (`Vault::echoed_in`) and how many decompressed bytes it may search
/// (`max_response_bytes`).
pub(crate) struct Secrets<'a> {
    pub find: coding::Finder<'a>,
    pub limit: usize,
}

/// The response body as the agent gets it.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Body {
    /// A complete body that parses as JSON (within `json::MAX_PARSED_BYTES`).
    Json(Value),
    /// UTF-8 text (a truncated body loses a cut UTF-8 sequence at its end).
    Text(String),
    /// Bytes that are not UTF-8.
    Base64(String),
    /// Not passed on, and why (compressed content that holds a secret or cannot be
    /// searched; an echo under `on_echo: "withhold"`).
    Withheld(String),
}

/// What happened to a 3xx's `Location`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Redirect {
    /// Not a redirect, or every hop was followed.
    None,
    /// Not followed: why, and the `Location` (unless the headers were withheld).
    Refused { reason: String, location: Option<String> },
}

/// The `http_request` tool result (`structuredContent`), typed: built from the
/// executor's outcome, completed by the redirect loop, serialised once by [`into_fields`].
///
/// [`into_fields`]: HttpResult::into_fields
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct HttpResult {
    pub status: u16,
    /// In arrival order; repeated names are joined with `, ` when serialised.
    pub headers: Vec<(String, String)>,
    pub body: Body,
    pub truncated: bool,
    /// The URL as authorized (an injected query credential is not part of it).
    pub final_url: String,
    pub redirects: u32,
    pub redirect: Redirect,
    /// `on_echo: "withhold"`: why the headers were dropped.
    pub headers_withheld: Option<String>,
    /// `on_echo: "withhold"`: which parts were dropped (`body`, `headers`).
    pub withheld_parts: Vec<&'static str>,
}

impl HttpResult {
    /// The outcome's status, headers and body (moved, not copied), the body
    /// checked as UTF-8 once. `final_url` and `redirects` are the caller's to set.
    ///
    /// `secrets`: how to find the secrets read so far, `None` when there are none (then
    /// no body can hold one and every body passes as it came). Otherwise compressed
    /// content is searched first (`coding.rs`): a body still marked with a coding (one
    /// the executor could not decode) cannot be searched and is withheld, and so is one
    /// whose compressed content holds a secret or cannot be searched.
    pub(crate) fn from_outcome(o: HttpOutcome, secrets: Option<&Secrets<'_>>) -> HttpResult {
        let HttpOutcome { status, headers, body, truncated } = o;
        let withheld = match secrets {
            Some(s) if !body.is_empty() => match coding::declared(&headers).as_slice() {
                [] => coding::inspect(&body, truncated, s.find, s.limit).err().map(|w| w.to_string()),
                codings => {
                    let names: Vec<String> = codings.iter().map(ToString::to_string).collect();
                    Some(format!(
                        "the response body is compressed ({}) in a way sp cannot decode, so it cannot be searched for secrets and is withheld",
                        names.join(", ")
                    ))
                }
            },
            _ => None,
        };
        let body = match withheld {
            Some(why) => Body::Withheld(why),
            None => body_of(body, truncated),
        };
        HttpResult {
            status,
            headers,
            body,
            truncated,
            final_url: String::new(),
            redirects: 0,
            redirect: Redirect::None,
            headers_withheld: None,
            withheld_parts: Vec::new(),
        }
    }

    /// `on_echo: "withhold"`: the part that echoed credential `body`'s or
    /// `headers`' secret is replaced by nothing, and the result says so.
    pub(crate) fn withhold_echo(&mut self, body: Option<&str>, headers: Option<&str>) {
        if let Some(name) = body {
            self.body =
                Body::Withheld(format!("the response body echoed the secret of credential {name:?}, whose on_echo is \"withhold\", so it is withheld"));
            self.withheld_parts.push("body");
        }
        if let Some(name) = headers {
            self.headers.clear();
            self.headers_withheld =
                Some(format!("the response headers echoed the secret of credential {name:?}, whose on_echo is \"withhold\", so they are withheld"));
            self.withheld_parts.push("headers");
        }
    }

    /// `{status, headers, json | body | body_base64 | body_withheld, truncated,
    /// final_url, redirects, redirect_refused[, redirect_reason, location]
    /// [, headers_withheld, withheld, withheld_parts]}` (sp(1), "http_request";
    /// [`output_schema`]).
    pub(crate) fn into_fields(self) -> Value {
        let mut headers = Map::new();
        for (name, value) in self.headers {
            match headers.get_mut(&name) {
                Some(Value::String(prev)) => {
                    prev.push_str(", ");
                    prev.push_str(&value);
                }
                _ => {
                    headers.insert(name, Value::String(value));
                }
            }
        }
        let mut r = Map::new();
        r.insert("status".into(), self.status.into());
        r.insert("headers".into(), Value::Object(headers));
        r.insert("truncated".into(), self.truncated.into());
        let (key, value) = match self.body {
            Body::Json(v) => ("json", v),
            Body::Text(t) => ("body", Value::String(t)),
            Body::Base64(b) => ("body_base64", Value::String(b)),
            Body::Withheld(why) => ("body_withheld", Value::String(why)),
        };
        r.insert(key.into(), value);
        r.insert("final_url".into(), Value::String(self.final_url));
        r.insert("redirects".into(), self.redirects.into());
        match self.redirect {
            Redirect::None => {
                r.insert("redirect_refused".into(), false.into());
            }
            Redirect::Refused { reason, location } => {
                r.insert("redirect_refused".into(), true.into());
                r.insert("redirect_reason".into(), Value::String(reason));
                if let Some(l) = location {
                    r.insert("location".into(), Value::String(l));
                }
            }
        }
        if let Some(why) = self.headers_withheld {
            r.insert("headers_withheld".into(), Value::String(why));
        }
        if !self.withheld_parts.is_empty() {
            r.insert("withheld".into(), "secret_echo".into());
            r.insert("withheld_parts".into(), self.withheld_parts.into());
        }
        Value::Object(r)
    }
}

/// The `outputSchema` of `http_request` and `http_get`: what [`HttpResult::into_fields`]
/// writes.
pub(crate) fn output_schema() -> Value {
    let s = |d: &str| serde_json::json!({"type": "string", "description": d});
    let props = serde_json::json!({
        "status": {"type": "integer", "minimum": 100, "maximum": 999},
        "headers": {"type": "object", "additionalProperties": {"type": "string"}, "description": "Response headers, names lowercase; repeated ones joined with \", \""},
        "truncated": {"type": "boolean", "description": "The body was cut at the response limit"},
        "json": {"description": "The body, when it is JSON"},
        "body": s("The body as text, when it is not JSON"),
        "body_base64": s("The body, when it is not UTF-8"),
        "body_withheld": s("Why the body is not given"),
        "final_url": s("The URL of the last response"),
        "redirects": {"type": "integer", "minimum": 0},
        "redirect_refused": {"type": "boolean"},
        "redirect_reason": s("Why a redirect was not followed"),
        "location": s("The Location of a redirect not followed"),
        "headers_withheld": s("Why the headers are not given"),
        "withheld": {"type": "string", "enum": ["secret_echo"]},
        "withheld_parts": {"type": "array", "items": {"type": "string", "enum": ["body", "headers"]}}
    });
    let Value::Object(props) = props else { unreachable!("an object literal") };
    crate::gate::outcome::result_schema(props, &["status", "headers", "truncated", "final_url", "redirects", "redirect_refused"])
}

/// A truncated body may end inside a UTF-8 sequence: that tail alone is no reason to fall
/// back to base64. A JSON body whose parsed form would take more than
/// `json::MAX_PARSED_BYTES` is passed on as text: parsed, it could cost 16 to 80 times
/// its size.
fn body_of(body: Vec<u8>, truncated: bool) -> Body {
    let text = match String::from_utf8(body) {
        Ok(text) => text,
        Err(e) if truncated && e.utf8_error().error_len().is_none() => {
            let valid = e.utf8_error().valid_up_to();
            let mut body = e.into_bytes();
            body.truncate(valid);
            String::from_utf8(body).unwrap_or_default()
        }
        Err(e) => return Body::Base64(base64::engine::general_purpose::STANDARD.encode(e.as_bytes())),
    };
    match (truncated, crate::json::parse(&text)) {
        (false, Ok(v)) if !text.trim().is_empty() => Body::Json(v),
        _ => Body::Text(text),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn outcome(body: &[u8], truncated: bool) -> Value {
        HttpResult::from_outcome(
            HttpOutcome { status: 200, headers: vec![("a".into(), "1".into()), ("a".into(), "2".into())], body: body.to_vec(), truncated },
            None,
        )
        .into_fields()
    }

    #[test]
    fn http_result_shapes() {
        let r = outcome(br#"{"k":[1]}"#, false);
        assert_eq!((r["json"].clone(), r["headers"]["a"].clone()), (json!({"k": [1]}), json!("1, 2")));
        assert_eq!(outcome(br#"{"k":[1"#, true)["body"], r#"{"k":[1"#);
        assert_eq!(outcome(b"plain", false)["body"], "plain");
        assert_eq!(outcome(b"", false)["body"], "");
        assert_eq!(outcome(b"\xff\x00", false)["body_base64"], "/wA=");
        // cut inside "é" (0xc3 0xa9): still text
        assert_eq!(outcome(b"caf\xc3", true)["body"], "caf");
        assert!(outcome(b"caf\xc3", false).get("body_base64").is_some());
    }

    /// A declared coding the executor left undecoded is withheld once a secret has been
    /// read (it cannot be searched), and passed on as bytes before (nothing to find);
    /// compressed content under no declared coding is searched (`coding.rs`).
    #[test]
    fn compressed_bodies_are_searched_or_withheld_once_there_are_secrets() {
        let token = b"tok_5f2c9a7e1b3d4c6a8e0f";
        let find = |b: &[u8], _cut: bool| -> Vec<String> { if b.windows(token.len()).any(|w| w == token) { vec!["api".into()] } else { Vec::new() } };
        let secrets = Secrets { find: &find, limit: 1 << 20 };
        let run = |headers: &[(&str, &str)], body: Vec<u8>, secrets: Option<&Secrets<'_>>| {
            let headers = headers.iter().map(|(n, v)| (n.to_string(), v.to_string())).collect();
            HttpResult::from_outcome(HttpOutcome { status: 200, headers, body, truncated: false }, secrets).body
        };
        let gz = crate::tools::http::coding::tests::gzip(token);
        let b64 = |b: &[u8]| Body::Base64(base64::engine::general_purpose::STANDARD.encode(b));
        assert_eq!(
            run(&[("Content-Encoding", "BR")], b"\xff\x02".to_vec(), Some(&secrets)),
            Body::Withheld("the response body is compressed (br) in a way sp cannot decode, so it cannot be searched for secrets and is withheld".into())
        );
        assert_eq!(run(&[("Content-Encoding", "br")], b"\xff\x02".to_vec(), None), b64(b"\xff\x02"));
        assert_eq!(run(&[("content-encoding", "gzip")], Vec::new(), Some(&secrets)), Body::Text(String::new()), "HEAD");
        for headers in [&[("content-type", "application/gzip")][..], &[("Content-Encoding", "IDENTITY")], &[]] {
            assert_eq!(
                run(headers, gz.clone(), Some(&secrets)),
                Body::Withheld("the response body is gzip data that holds the secret of credential \"api\" once decompressed, so it is withheld".into())
            );
        }
        assert_eq!(run(&[], gz.clone(), None), b64(&gz));
        let clean = crate::tools::http::coding::tests::gzip(b"clean");
        assert_eq!(run(&[], clean.clone(), Some(&secrets)), b64(&clean));
    }

    #[test]
    fn withheld_parts_and_refused_redirects_are_said() {
        let mut r = HttpResult::from_outcome(
            HttpOutcome { status: 302, headers: vec![("location".into(), "/x".into())], body: b"{}".to_vec(), truncated: false },
            None,
        );
        r.withhold_echo(Some("api"), Some("api"));
        r.redirect = Redirect::Refused { reason: "why".into(), location: None };
        let v = r.into_fields();
        assert_eq!((v["withheld"].as_str(), v["withheld_parts"].clone()), (Some("secret_echo"), json!(["body", "headers"])));
        assert_eq!((v["headers"].clone(), v.get("json"), v.get("location")), (json!({}), None, None));
        assert!(v["body_withheld"].as_str().unwrap().contains("\"api\""), "{v}");
        assert_eq!((v["redirect_refused"].as_bool(), v["redirect_reason"].as_str()), (Some(true), Some("why")));
    }
}
