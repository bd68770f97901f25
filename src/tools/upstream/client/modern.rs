//! MCP 2026-07-28 ("modern", stateless) toward an upstream that offers it (issue 33,
//! section 4), for an upstream whose policy says `"protocol": "2026-07-28"`.
//!
//! ```text
//!  start ──server/discover (_meta: version, clientInfo, capabilities)──>
//!     DiscoverResult naming 2026-07-28 ──> modern: no initialize; every request carries
//!                                          the `_meta` members; results checked below
//!     anything else (an error, a timeout, a result without it) ──> the handshake, as before
//!  a result ──> resultType absent or "complete": the result (resultType dropped)
//!           └─ "input_required" (MRTR): each of its inputRequests an elicitation/create
//!              ──> the running call's handler (the same relay as a handshake
//!              upstream's elicitation, `elicit/`), the request sent again with
//!              inputResponses and requestState (opaque, echoed), at most
//!              [`MAX_ROUNDS`] times; without a handler, another kind of request
//!              (sampling, roots), or a refusal by the handler: the call fails
//!           └─ anything else: a broken answer
//! ```
//!
//! What sp does not do in this revision: `subscriptions/listen` (a modern upstream's
//! tool list is read once per start; a change is seen after a restart or a reload), and
//! tasks (an extension there). There is no `ping`: a timed-out request is abandoned
//! (`notifications/cancelled`), and the upstream is kept.

use std::time::{Duration, Instant};

use serde_json::{json, Map, Value};

use super::wire::{self, Initialized, ShapeError};
use super::{Cancel, Client, ClientError, OnElicit, ProgressNote, Transport};

impl<T: Transport> Client<T> {
    /// The revision this client speaks: [`MODERN`] after `server/discover`, else what the
    /// handshake agreed (tests).
    #[cfg(test)]
    pub(crate) fn version(&self) -> &'static str {
        self.info.version
    }

    /// `server/discover` (the start of a `"protocol": "2026-07-28"` upstream): true when
    /// it offers the revision (the client then speaks it); false: the handshake follows.
    pub(super) fn discover(&mut self, timeout: Duration, cancel: &Cancel) -> Result<bool, ClientError> {
        match self.request("server/discover", discover_params(&self.capabilities.clone()), timeout, cancel, &mut |_| {}) {
            Ok(result) => {
                if let Some(info) = discovered(&result) {
                    self.transport.negotiated(info.version);
                    self.info = info;
                    self.modern = true;
                    log::info!("upstream {}: ready (protocol {MODERN}, no handshake)", self.name);
                    return Ok(true);
                }
                log::info!("upstream {}: its server/discover does not offer {MODERN}: the handshake", self.name);
            }
            Err(e) if e.closed() => return Err(e),
            Err(ClientError::Cancelled) => return Err(ClientError::Cancelled),
            Err(e) => log::info!("upstream {}: server/discover failed ({e}): the handshake", self.name),
        }
        Ok(false)
    }

    /// A request to a modern upstream: `_meta` stamped, each `input_required` answered
    /// through `on_elicit` and the request sent again, within one deadline. An
    /// `elicitation/create` sent the pre-2026 way is refused (-32601): MRTR replaced it.
    pub(super) fn request_modern(
        &mut self,
        method: &str,
        mut params: Value,
        timeout: Duration,
        cancel: &Cancel,
        on_progress: &mut dyn FnMut(ProgressNote),
        mut on_elicit: Option<OnElicit<'_>>,
    ) -> Result<Value, ClientError> {
        let deadline = Instant::now() + timeout;
        stamp(&mut params, &self.capabilities);
        for _ in 0..MAX_ROUNDS {
            let left = deadline.saturating_duration_since(Instant::now());
            let (requests, state) = match round(self.exchange(method, params.clone(), left, cancel, on_progress, None)?)? {
                Round::Complete(r) => return Ok(r),
                Round::Input { requests, state } => (requests, state),
            };
            let Some(handle) = on_elicit.as_mut() else {
                return Err(ClientError::Input { why: "sp relays an upstream's elicitation only during its tools/call".into() });
            };
            let mut responses = Map::new();
            for (key, p) in requests {
                let answer = handle(p, deadline).map_err(|e| ClientError::Input { why: e.message })?;
                responses.insert(key, answer);
            }
            params = retry(&params, responses, state);
        }
        Err(ClientError::Shape(wire::ShapeError { at: "result".into(), why: "input_required more than 8 times in a row" }))
    }
}

/// The revision.
pub(crate) const MODERN: &str = "2026-07-28";
/// Rounds of MRTR per request: more is a broken answer (an upstream cannot keep a call
/// asking for ever).
pub(crate) const MAX_ROUNDS: usize = 8;
/// `inputRequests` per round.
const MAX_INPUTS: usize = 4;
/// The longest `requestState` echoed.
const MAX_STATE: usize = 64 * 1024;

const META_VERSION: &str = "io.modelcontextprotocol/protocolVersion";
const META_CLIENT_INFO: &str = "io.modelcontextprotocol/clientInfo";
const META_CAPABILITIES: &str = "io.modelcontextprotocol/clientCapabilities";

/// The `_meta` members every modern request carries (2026-07-28 "Base protocol: _meta").
pub(crate) fn stamp(params: &mut Value, capabilities: &Value) {
    let Some(p) = params.as_object_mut() else { return };
    let meta = p.entry("_meta").or_insert_with(|| Value::Object(Map::new()));
    if let Some(m) = meta.as_object_mut() {
        m.insert(META_VERSION.into(), Value::from(MODERN));
        m.insert(META_CLIENT_INFO.into(), json!({"name": "sallyport", "version": env!("CARGO_PKG_VERSION")}));
        m.insert(META_CAPABILITIES.into(), capabilities.clone());
    }
}

/// The `server/discover` params.
pub(crate) fn discover_params(capabilities: &Value) -> Value {
    let mut p = json!({});
    stamp(&mut p, capabilities);
    p
}

/// A `DiscoverResult` that names [`MODERN`]: what sp knows of the upstream then.
/// `None`: not one (sp falls back to the handshake).
pub(crate) fn discovered(result: &Value) -> Option<Initialized> {
    let m = result.as_object()?;
    let versions = m.get("supportedVersions")?.as_array()?;
    if !versions.iter().any(|v| v.as_str() == Some(MODERN)) {
        return None;
    }
    let caps = m.get("capabilities")?.as_object()?;
    let tools = caps.get("tools");
    if !matches!(tools, None | Some(Value::Object(_))) {
        return None;
    }
    // listChanged needs subscriptions/listen, which sp does not open: never set.
    Some(Initialized { version: MODERN, list_changed: false, has_tools: tools.is_some(), tasks: Default::default() })
}

/// What one modern answer is.
#[derive(Debug, PartialEq)]
pub(crate) enum Round {
    Complete(Value),
    /// MRTR: the elicitations asked (key, params) and the state to echo.
    Input {
        requests: Vec<(String, Option<Value>)>,
        state: Option<String>,
    },
}

fn broken(at: &str, why: &'static str) -> ClientError {
    ClientError::Shape(ShapeError { at: at.to_owned(), why })
}

/// A modern result, by its `resultType`.
pub(crate) fn round(mut result: Value) -> Result<Round, ClientError> {
    let Some(m) = result.as_object_mut() else { return Ok(Round::Complete(result)) };
    match m.remove("resultType") {
        None => Ok(Round::Complete(result)),
        Some(Value::String(t)) if t == "complete" => Ok(Round::Complete(result)),
        Some(Value::String(t)) if t == "input_required" => {
            let state = match m.remove("requestState") {
                None => None,
                Some(Value::String(s)) if s.len() <= MAX_STATE => Some(s),
                Some(_) => return Err(broken("result.requestState", "must be a string of at most 64 KiB")),
            };
            let requests = match m.remove("inputRequests") {
                Some(Value::Object(r)) if !r.is_empty() && r.len() <= MAX_INPUTS => r,
                _ => return Err(broken("result.inputRequests", "must be an object of 1 to 4 requests")),
            };
            let mut out = Vec::new();
            for (key, req) in requests {
                let Value::Object(mut req) = req else { return Err(broken("result.inputRequests", "each must be a request object")) };
                if req.keys().any(|k| !matches!(k.as_str(), "method" | "params")) || key.is_empty() || key.len() > 256 {
                    return Err(broken("result.inputRequests", "each must be {method, params} under a key of 1 to 256 bytes"));
                }
                if req.get("method").and_then(Value::as_str) != Some("elicitation/create") {
                    return Err(ClientError::Unsupported { what: "an input request other than elicitation/create (sampling, roots)" });
                }
                out.push((key, req.remove("params")));
            }
            Ok(Round::Input { requests: out, state })
        }
        Some(_) => Err(broken("result.resultType", "must be \"complete\" or \"input_required\"")),
    }
}

/// The request sent again: the same params with the answers and the state.
pub(crate) fn retry(params: &Value, responses: Map<String, Value>, state: Option<String>) -> Value {
    let mut p = params.clone();
    if let Some(m) = p.as_object_mut() {
        m.insert("inputResponses".into(), Value::Object(responses));
        match state {
            Some(s) => m.insert("requestState".into(), Value::String(s)),
            None => m.remove("requestState"),
        };
    }
    p
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn discovery_needs_the_modern_revision() {
        let ok = json!({"supportedVersions": ["2026-07-28"], "capabilities": {"tools": {"listChanged": true}}, "resultType": "complete"});
        assert_eq!(discovered(&ok), Some(Initialized { version: MODERN, list_changed: false, has_tools: true, tasks: Default::default() }));
        assert_eq!(discovered(&json!({"supportedVersions": ["2025-11-25"], "capabilities": {}})), None);
        assert_eq!(discovered(&json!({"supportedVersions": "2026-07-28", "capabilities": {}})), None);
        assert_eq!(discovered(&json!({"supportedVersions": ["2026-07-28"]})), None);
    }

    #[test]
    fn rounds_are_read_strictly() {
        assert_eq!(round(json!({"resultType": "complete", "content": []})).unwrap(), Round::Complete(json!({"content": []})));
        assert_eq!(round(json!({"content": []})).unwrap(), Round::Complete(json!({"content": []})));
        let ask = json!({"resultType": "input_required", "requestState": "s1", "inputRequests": {"k": {"method": "elicitation/create", "params": {"message": "m"}}}});
        assert_eq!(round(ask).unwrap(), Round::Input { requests: vec![("k".into(), Some(json!({"message": "m"})))], state: Some("s1".into()) });
        let sampling = json!({"resultType": "input_required", "inputRequests": {"k": {"method": "sampling/createMessage", "params": {}}}});
        assert!(matches!(round(sampling), Err(ClientError::Unsupported { .. })));
        assert_eq!(
            round(json!({"resultType": "later"})).unwrap_err().to_string(),
            "its answer is malformed: result.resultType: must be \"complete\" or \"input_required\""
        );
        assert!(round(json!({"resultType": "input_required", "inputRequests": {}})).is_err());
        let retried = retry(&json!({"name": "t", "requestState": "old"}), Map::from_iter([("k".into(), json!({"action": "decline"}))]), Some("s2".into()));
        assert_eq!(retried, json!({"name": "t", "inputResponses": {"k": {"action": "decline"}}, "requestState": "s2"}));
    }
}
