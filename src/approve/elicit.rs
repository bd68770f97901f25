//! Elicitation as an approval channel (`"approval": {"via": ["elicitation", ...]}`): the
//! MCP client shows its user a form with the exact action and one yes/no field, and
//! the grant choices the operator allows.
//!
//! ```text
//!  handshake eras (2025-06-18, 2025-11-25): the call waits
//!    sp ── {"id":"sp-N","method":"elicitation/create","params":FORM} ──> client
//!    sp <── {"id":"sp-N","result":{"action":"accept","content":{"approve":true}}} ── client
//!           (read by the control thread: only the id sp sent and still waits on;
//!            any other response stays malformed input and closes the session)
//!
//!  2026-07-28 (stateless, no request to the client on stdio): MRTR
//!    client ── tools/call ──────────────────────────────────────────────> sp
//!    client <── {"resultType":"input_required","inputRequests":{"approval":{FORM}},
//!                "requestState":"1.<expires>.<nonce>.<hmac>"} ───────── sp
//!    client ── tools/call (new id, same call, inputResponses, requestState) ─> sp
//!           (requestState checked: sp's HMAC over the call's fingerprint, not expired,
//!            not used before; then the answer is read like a handshake one)
//! ```
//!
//! What the answer means (`read_answer`): `accept` with `approve: true` is a yes (with
//! the grant chosen, if the form offered any); `accept` with `approve: false` and
//! `decline` are a no ("declined"); `cancel` is a no of its own ("dismissed": the user
//! closed the form). Anything else in an answer is malformed and is a no. A client that
//! did not declare form elicitation, answered `elicitation/create` with an error (it
//! could not show the form), or did not answer within `approval.timeout_s` is not a no:
//! the gate falls back to the next channel in `via`, if any.
//!
//! The threat model (sp-policy(5), APPROVAL): the agent's own MCP host shows the form
//! and sends the answer. A host that is compromised, or that answers elicitations by
//! itself, approves the agent's actions. Subjects whose `approve` is `"command"` are
//! never approved through here, nor by a grant an elicitation made.

use std::collections::HashMap;
use std::fmt;
use std::sync::Mutex;
use std::time::Instant;

use hmac::{Hmac, Mac};
use serde_json::{json, Map, Value};
use sha2::Sha256;

use super::grants::{GrantRequest, Scope};
use crate::gate::exec::{Cancel, Progress};
use crate::policy::approval::GrantsPolicy;

/// The key of the one field the form asks for.
pub(crate) const FIELD_APPROVE: &str = "approve";
/// The key of the grant choice (only when the operator allows a grant).
pub(crate) const FIELD_GRANT: &str = "grant";
/// The key of sp's input request in `inputRequests` / `inputResponses` (2026-07-28).
pub(crate) const INPUT_KEY: &str = "approval";
/// The longest request shown in the form's message (escaped, cut visibly).
const MAX_SHOWN_REQUEST: usize = 2048;

/// How a call's client is asked. The loop builds one per call: a handshake session's
/// live link, a 2026-07-28 request's MRTR state, or nobody.
pub(crate) trait Elicitor {
    /// Whether the client declared form elicitation (for 2026-07-28: in this request's
    /// `_meta` capabilities).
    fn can_ask(&self) -> bool;
    /// Asks with `params` (`elicitation/create` params) and waits until `deadline`,
    /// sending `progress` meanwhile.
    fn ask(&mut self, params: &Value, deadline: Instant, cancel: &Cancel, progress: &mut Progress<'_>) -> Elicited;
}

/// What came of asking.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Elicited {
    /// The client's `ElicitResult`, not yet checked ([`read_answer`]).
    Result(Value),
    /// The client answered with a JSON-RPC error (it could not show the form): why.
    Error(String),
    /// No answer within the approval timeout.
    TimedOut,
    /// The client cancelled the call (or closed stdin) meanwhile.
    Cancelled,
    /// 2026-07-28: the call is answered `input_required` now; the retry carries the answer.
    Deferred,
    /// 2026-07-28: the retry's `requestState` failed its checks.
    BadState(StateError),
}

/// Whether a client's `elicitation` capability covers form mode: 2025-06-18 `{}`;
/// 2025-11-25 `{}` (form only) or `{"form": {}, ...}`. A client that declared only
/// `url` mode must not be sent a form.
pub(crate) fn declares_form(capabilities: Option<&Value>) -> bool {
    match capabilities.and_then(|c| c.get("elicitation")) {
        Some(Value::Object(e)) => e.is_empty() || matches!(e.get("form"), Some(Value::Object(_))),
        _ => false,
    }
}

// ---------------------------------------------------------------------------------------
// The form

/// One grant the form offers, with the TTL it would last (the operator's max).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Offer {
    pub scope: Scope,
    pub ttl_s: u64,
}

/// The grants the operator allows (`approval.grants`), each for its max.
pub(crate) fn offers(grants: &GrantsPolicy) -> Vec<Offer> {
    let mut out = Vec::new();
    if let Some(ttl_s) = grants.exact_max_s {
        out.push(Offer { scope: Scope::Exact, ttl_s });
    }
    if let Some(ttl_s) = grants.session_max_s {
        out.push(Offer { scope: Scope::Session, ttl_s });
    }
    out
}

fn minutes(s: u64) -> String {
    if s.is_multiple_of(60) { format!("{} min", s / 60) } else { format!("{s} s") }
}

/// The `elicitation/create` params for the action `description` (`approve::describe`:
/// every string in it already escaped and cut): a message naming tool, target, subject,
/// the argument fingerprint and the request, and a schema of one boolean (and the grant
/// choice when `offers` is not empty). No `mode`: form is the default in every revision
/// that has elicitation.
pub(crate) fn form(description: &Value, subject: &str, offers: &[Offer]) -> Value {
    let field = |k: &str| description[k].as_str().unwrap_or("-").to_owned();
    let request = crate::escape::shown(&description["request"].to_string(), MAX_SHOWN_REQUEST);
    let message = format!(
        "Approve this action?\ntool: {}\ntarget: {}\nfor: {}\nfingerprint: {}\nrequest: {request}",
        field("tool"),
        field("target"),
        crate::escape::shown(subject, super::MAX_SHOWN_LINE),
        field("request_fp"),
    );
    let mut properties = Map::new();
    properties.insert(FIELD_APPROVE.into(), json!({"type": "boolean", "title": "Approve", "description": "Run this action once as shown", "default": false}));
    if !offers.is_empty() {
        let mut values = vec!["once".to_owned()];
        let mut names = vec!["this call only".to_owned()];
        for o in offers {
            values.push(o.scope.as_str().to_owned());
            names.push(match o.scope {
                Scope::Exact => format!("this exact call again for {}", minutes(o.ttl_s)),
                Scope::Session => format!("every approval-flagged call for {}", minutes(o.ttl_s)),
            });
        }
        properties.insert(FIELD_GRANT.into(), json!({"type": "string", "title": "Approval lasts", "enum": values, "enumNames": names, "default": "once"}));
    }
    json!({
        "message": message,
        "requestedSchema": {"type": "object", "properties": properties, "required": [FIELD_APPROVE]},
    })
}

/// The user's answer, read from an `ElicitResult`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Reply {
    /// Yes; the grant chosen (`None`: this call only).
    Approved(Option<GrantRequest>),
    /// `decline`, or `accept` with `approve: false`.
    Declined,
    /// `cancel`: the user dismissed the form.
    Dismissed,
    /// Not an `ElicitResult` this form could produce: why (names, never echoes a value).
    Malformed(&'static str),
}

/// Reads an `ElicitResult` strictly: `{"action", "content"?, "_meta"?}`; `content` only
/// with `accept`, holding `approve` (a boolean) and, when offered, `grant` (one of the
/// offered values).
pub(crate) fn read_answer(result: &Value, offers: &[Offer]) -> Reply {
    let Value::Object(m) = result else { return Reply::Malformed("the answer is not an object") };
    if m.keys().any(|k| !matches!(k.as_str(), "action" | "content" | "_meta")) {
        return Reply::Malformed("the answer has a member other than action, content and _meta");
    }
    match (m.get("action").and_then(Value::as_str), m.get("content")) {
        (Some("decline"), _) => return Reply::Declined,
        (Some("cancel"), _) => return Reply::Dismissed,
        (Some("accept"), Some(Value::Object(_))) => {}
        (Some("accept"), _) => return Reply::Malformed("accept without a content object"),
        _ => return Reply::Malformed("action is not accept, decline or cancel"),
    }
    let Some(Value::Object(content)) = m.get("content") else { unreachable!("matched above") };
    let asked = |k: &str| k == FIELD_APPROVE || (k == FIELD_GRANT && !offers.is_empty());
    if content.keys().any(|k| !asked(k)) {
        return Reply::Malformed("content has a field the form did not ask for");
    }
    match content.get(FIELD_APPROVE) {
        Some(Value::Bool(true)) => {}
        Some(Value::Bool(false)) => return Reply::Declined,
        _ => return Reply::Malformed("approve is not a boolean"),
    }
    let grant = match content.get(FIELD_GRANT) {
        None => None,
        Some(Value::String(s)) if s == "once" => Some(GrantRequest::Once),
        Some(Value::String(s)) => match offers.iter().find(|o| o.scope.as_str() == s) {
            Some(o) => Some(GrantRequest::Lasting { scope: o.scope, ttl_s: o.ttl_s }),
            None => return Reply::Malformed("grant is not one of the offered choices"),
        },
        Some(_) => return Reply::Malformed("grant is not a string"),
    };
    Reply::Approved(grant)
}

// ---------------------------------------------------------------------------------------
// requestState (2026-07-28)

/// Why a retry's `requestState` is refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum StateError {
    /// Not a string of sp's form.
    Malformed,
    /// The HMAC does not match: not sp's, another call's, or another process's.
    Forged,
    Expired,
    /// Its answer was used already: each asks once.
    Replayed,
    /// [`MAX_USED`] used states have not expired yet: no answer is taken until some
    /// do (a used one is never forgotten early to make room).
    Busy,
}

impl fmt::Display for StateError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            StateError::Malformed => "requestState is not one sp issued",
            StateError::Forged => "requestState does not belong to this call (or to this sp process)",
            StateError::Expired => "requestState has expired (approval.timeout_s): call again to be asked again",
            StateError::Replayed => "requestState was used already: call again to be asked again",
            StateError::Busy => "too many approvals were answered within approval.timeout_s: call again later",
        })
    }
}

impl std::error::Error for StateError {}

/// The most used states remembered at once. A used state is remembered until it
/// expires (`approval.timeout_s` after it was issued), never forgotten earlier to make
/// room: while this many unexpired states are used, the next answer is refused
/// ([`StateError::Busy`]: fail closed) instead (issue 31). A state costs its nonce and
/// expiry, some 60 bytes with the map's overhead: 4 MiB at most.
const MAX_USED: usize = 65_536;

/// The states already used (nonce -> expiry), and when expired ones were last
/// forgotten: a state is never judged at an earlier time than that, so a wall clock
/// stepped back cannot revive a state forgotten as expired.
#[derive(Default)]
struct Used {
    nonces: HashMap<String, u64>,
    forgot_at: u64,
}

/// The per-process key that seals `requestState`, and the states already used. A state
/// binds the call's fingerprint (`request_fp`: tool and arguments, `_meta`,
/// `inputResponses` and `requestState` left out), an expiry and a random nonce; a new
/// `sp` process has a new key, so no state outlives it.
pub(crate) struct StateKey {
    key: [u8; 32],
    used: Mutex<Used>,
    max_used: usize,
}

impl StateKey {
    pub(crate) fn new() -> StateKey {
        let mut key = [0u8; 32];
        // Blocking getrandom(2): only waits while the kernel gathers entropy at boot.
        if !matches!(rustix::rand::getrandom(&mut key, rustix::rand::GetRandomFlags::empty()), Ok(32)) {
            // No getrandom(2) (Linux before 3.17): four independent session ids.
            for chunk in key.chunks_mut(8) {
                let id = crate::audit::session_id();
                for (i, b) in chunk.iter_mut().enumerate() {
                    *b = u8::from_str_radix(&id[2 * i..2 * i + 2], 16).unwrap_or(0);
                }
            }
        }
        StateKey { key, used: Mutex::new(Used::default()), max_used: MAX_USED }
    }

    fn mac(&self, expires: u64, nonce: &str, fp: &str) -> Hmac<Sha256> {
        #[expect(
            clippy::expect_used,
            reason = "HMAC takes a key of any length (RFC 2104: a long one is hashed, a short one padded); new_from_slice returns a Result only because KeyInit serves fixed-size-key ciphers too"
        )]
        let mut mac = Hmac::<Sha256>::new_from_slice(&self.key).expect("HMAC takes keys of any length");
        mac.update(format!("sp-request-state/1\n{expires}\n{nonce}\n{fp}").as_bytes());
        mac
    }

    /// A state for the call `fp`, valid until `now + ttl_s`.
    pub(crate) fn seal(&self, fp: &str, now: u64, ttl_s: u64) -> String {
        let expires = now.saturating_add(ttl_s);
        let nonce = crate::audit::session_id();
        let tag: String = self.mac(expires, &nonce, fp).finalize().into_bytes().iter().map(|b| format!("{b:02x}")).collect();
        format!("1.{expires}.{nonce}.{tag}")
    }

    /// Checks a retry's state against the call `fp` at `now`, and uses it up.
    pub(crate) fn open(&self, state: &Value, fp: &str, now: u64) -> Result<(), StateError> {
        let Some(text) = state.as_str().filter(|s| s.len() <= 128) else { return Err(StateError::Malformed) };
        let parts: Vec<&str> = text.split('.').collect();
        let [version, expires, nonce, tag] = parts[..] else { return Err(StateError::Malformed) };
        let hex = |s: &str, n: usize| s.len() == n && s.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b));
        let Some(expires_n) = expires.parse::<u64>().ok().filter(|_| expires.bytes().all(|b| b.is_ascii_digit())) else {
            return Err(StateError::Malformed);
        };
        if version != "1" || !hex(nonce, 16) || !hex(tag, 64) {
            return Err(StateError::Malformed);
        }
        let tag: Vec<u8> = (0..32).map(|i| u8::from_str_radix(&tag[2 * i..2 * i + 2], 16).unwrap_or(0)).collect();
        // Constant time (`verify_slice`): a forger learns nothing from how long it took.
        self.mac(expires_n, nonce, fp).verify_slice(&tag).map_err(|_| StateError::Forged)?;
        let mut used = self.used.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        let now = now.max(used.forgot_at);
        if now >= expires_n {
            return Err(StateError::Expired);
        }
        if used.nonces.contains_key(nonce) {
            return Err(StateError::Replayed);
        }
        if used.nonces.len() >= self.max_used {
            // Only expired states are forgotten; if none has, the answer is refused.
            used.forgot_at = now;
            used.nonces.retain(|_, expires| *expires > now);
            if used.nonces.len() >= self.max_used {
                return Err(StateError::Busy);
            }
        }
        used.nonces.insert(nonce.to_owned(), expires_n);
        Ok(())
    }
}

/// A 2026-07-28 `tools/call`'s MRTR members, taken out of its params before anything
/// reads them (the fingerprint leaves them out).
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct Retry {
    pub input_responses: Option<Value>,
    pub request_state: Option<Value>,
    /// `_meta["io.modelcontextprotocol/clientCapabilities"]`.
    pub capabilities: Option<Value>,
}

/// The elicitor of a 2026-07-28 request: the first call is answered `input_required`
/// ([`Elicited::Deferred`]); the retry's answer is read once its state is checked.
pub(crate) struct Stateless<'k> {
    pub key: &'k StateKey,
    pub retry: Retry,
    pub fp: String,
}

impl Elicitor for Stateless<'_> {
    fn can_ask(&self) -> bool {
        declares_form(self.retry.capabilities.as_ref())
    }

    fn ask(&mut self, _: &Value, _: Instant, _: &Cancel, _: &mut Progress<'_>) -> Elicited {
        let (Some(state), responses) = (&self.retry.request_state, &self.retry.input_responses) else {
            return Elicited::Deferred;
        };
        if let Err(e) = self.key.open(state, &self.fp, super::grants::now()) {
            return Elicited::BadState(e);
        }
        match responses.as_ref().and_then(|r| r.get(INPUT_KEY)) {
            Some(answer) => Elicited::Result(answer.clone()),
            None => Elicited::Error(format!("inputResponses has no {INPUT_KEY:?} answer")),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn offers2() -> Vec<Offer> {
        vec![Offer { scope: Scope::Exact, ttl_s: 900 }, Offer { scope: Scope::Session, ttl_s: 600 }]
    }

    /// Every shape an answer can take, and what it means. Attacks tried (all held): a
    /// grant the form did not offer, a grant when none was offered, `approve` as the
    /// string "true", an extra content field, an extra top-level member, `accept`
    /// without content, an unknown action.
    #[test]
    fn answers() {
        let o = offers2();
        let cases = [
            (json!({"action": "accept", "content": {"approve": true}}), Reply::Approved(None)),
            (json!({"action": "accept", "content": {"approve": true, "grant": "once"}}), Reply::Approved(Some(GrantRequest::Once))),
            (
                json!({"action": "accept", "content": {"approve": true, "grant": "exact"}}),
                Reply::Approved(Some(GrantRequest::Lasting { scope: Scope::Exact, ttl_s: 900 })),
            ),
            (
                json!({"action": "accept", "content": {"approve": true, "grant": "session"}, "_meta": {}}),
                Reply::Approved(Some(GrantRequest::Lasting { scope: Scope::Session, ttl_s: 600 })),
            ),
            (json!({"action": "accept", "content": {"approve": false, "grant": "exact"}}), Reply::Declined),
            (json!({"action": "decline"}), Reply::Declined),
            (json!({"action": "cancel"}), Reply::Dismissed),
            (json!({"action": "accept", "content": {"approve": true, "grant": "forever"}}), Reply::Malformed("grant is not one of the offered choices")),
            (json!({"action": "accept", "content": {"approve": "true"}}), Reply::Malformed("approve is not a boolean")),
            (json!({"action": "accept", "content": {}}), Reply::Malformed("approve is not a boolean")),
            (json!({"action": "accept", "content": {"approve": true, "x": 1}}), Reply::Malformed("content has a field the form did not ask for")),
            (json!({"action": "accept"}), Reply::Malformed("accept without a content object")),
            (
                json!({"action": "accept", "content": {"approve": true}, "extra": 1}),
                Reply::Malformed("the answer has a member other than action, content and _meta"),
            ),
            (json!({"action": "approve"}), Reply::Malformed("action is not accept, decline or cancel")),
            (json!([]), Reply::Malformed("the answer is not an object")),
        ];
        for (answer, want) in cases {
            assert_eq!(read_answer(&answer, &o), want, "{answer}");
        }
        // Nothing offered: a grant field is not one the form asked for.
        assert_eq!(
            read_answer(&json!({"action": "accept", "content": {"approve": true, "grant": "exact"}}), &[]),
            Reply::Malformed("content has a field the form did not ask for")
        );
    }

    #[test]
    fn the_form_is_one_boolean_and_the_offered_grants() {
        let d = json!({"tool": "http_request", "target": "PUT http://h/x", "request_fp": "ab", "request": {"method": "PUT"}});
        let f = form(&d, "sidecar", &[]);
        assert_eq!(f["requestedSchema"]["required"], json!(["approve"]));
        assert_eq!(f["requestedSchema"]["properties"].as_object().unwrap().keys().collect::<Vec<_>>(), vec!["approve"]);
        assert_eq!(
            f["message"],
            json!("Approve this action?\ntool: http_request\ntarget: PUT http://h/x\nfor: sidecar\nfingerprint: ab\nrequest: {\"method\":\"PUT\"}")
        );
        let f = form(&d, "sidecar", &offers2());
        assert_eq!(f["requestedSchema"]["properties"]["grant"]["enum"], json!(["once", "exact", "session"]));
        // A subject holding controls is shown escaped.
        let f = form(&d, "a\u{1b}[2Jb", &[]);
        assert!(!f["message"].as_str().unwrap().contains('\u{1b}'));
    }

    #[test]
    fn capabilities() {
        for (caps, want) in [
            (json!({"elicitation": {}}), true),
            (json!({"elicitation": {"form": {}}}), true),
            (json!({"elicitation": {"form": {}, "url": {}}}), true),
            (json!({"elicitation": {"url": {}}}), false),
            (json!({"elicitation": true}), false),
            (json!({}), false),
        ] {
            assert_eq!(declares_form(Some(&caps)), want, "{caps}");
        }
        assert!(!declares_form(None));
    }

    /// Attacks tried on `requestState` (all held): another call's state, a state from
    /// another process (another key), an edited expiry, a replay, an expired one, a
    /// number, an overlong string, upper-case hex, a missing part.
    #[test]
    fn request_state_is_bound_timed_and_used_once() {
        let (k, other) = (StateKey::new(), StateKey::new());
        let now = 1_800_000_000;
        let s = k.seal("fp-a", now, 120);
        assert_eq!(k.open(&json!(s), "fp-b", now), Err(StateError::Forged));
        assert_eq!(other.open(&json!(s), "fp-a", now), Err(StateError::Forged));
        let parts: Vec<&str> = s.split('.').collect();
        let longer = format!("1.{}.{}.{}", now + 9999, parts[2], parts[3]);
        assert_eq!(k.open(&json!(longer), "fp-a", now), Err(StateError::Forged));
        assert_eq!(k.open(&json!(s), "fp-a", now + 120), Err(StateError::Expired));
        assert_eq!(k.open(&json!(s.to_uppercase()), "fp-a", now), Err(StateError::Malformed));
        for bad in [json!(7), json!("1.2.3"), json!("x".repeat(200)), json!(format!("2.{}.{}.{}", parts[1], parts[2], parts[3]))] {
            assert_eq!(k.open(&bad, "fp-a", now), Err(StateError::Malformed), "{bad}");
        }
        assert_eq!(k.open(&json!(s), "fp-a", now + 119), Ok(()));
        assert_eq!(k.open(&json!(s), "fp-a", now), Err(StateError::Replayed));
    }

    /// Issue 31: a used state stays refused until it expires, whatever the traffic.
    /// Attacks tried (all held): 5,000 newer states used after it (the old memory kept
    /// 4,096 and forgot the oldest), the memory filled with unexpired states (the next
    /// answer is refused, nothing is forgotten), the wall clock stepped back after
    /// expired states were forgotten (a forgotten state stays expired).
    #[test]
    fn a_used_state_stays_refused_until_it_expires() {
        let k = StateKey::new();
        let now = 1_800_000_000;
        let first = k.seal("fp", now, 600);
        assert_eq!(k.open(&json!(first), "fp", now), Ok(()));
        for i in 0..5_000 {
            let s = k.seal(&format!("fp-{i}"), now, 600);
            assert_eq!(k.open(&json!(s), &format!("fp-{i}"), now + 1), Ok(()), "state {i}");
        }
        assert_eq!(k.open(&json!(first), "fp", now + 2), Err(StateError::Replayed));

        // A full memory refuses new answers rather than forget a used state early.
        let k = StateKey { max_used: 3, ..StateKey::new() };
        let used: Vec<String> = (0..3).map(|i| k.seal("fp", now, 60 + i)).collect();
        for s in &used {
            assert_eq!(k.open(&json!(s), "fp", now), Ok(()));
        }
        let fresh = k.seal("fp", now, 600);
        assert_eq!(k.open(&json!(fresh), "fp", now + 1), Err(StateError::Busy));
        for s in &used {
            assert_eq!(k.open(&json!(s), "fp", now + 1), Err(StateError::Replayed), "{s}");
        }
        // Once the first has expired, it makes room; the others are still refused.
        assert_eq!(k.open(&json!(fresh), "fp", now + 60), Ok(()));
        assert_eq!(k.open(&json!(used[1]), "fp", now + 60), Err(StateError::Replayed));
        // The clock stepped back: the forgotten state is judged at the latest time seen.
        assert_eq!(k.open(&json!(used[0]), "fp", now), Err(StateError::Expired));
        assert!(StateError::Busy.to_string().contains("call again later"));
    }
}
