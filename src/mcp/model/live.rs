//! What changes at run time on the wire: the `tools/list` of a policy with upstream MCP
//! servers ([`LiveList`]: set by the loop, answered from by the control thread during a
//! call), and an upstream's own `CallToolResult` as sp passes it on ([`PassedWire`]).
//!
//! ```text
//!  loop: tools/list ──> (upstreams listed, lazily) ──> LiveList::set(era, raw) ──> answer
//!  control thread, during a call: tools/list ──> LiveList::get(era) ── Some ──> answer
//!                                                                 └─ None ──> queued behind the call
//!  an upstream's list_changed ──> LiveList::clear ──> the next tools/list lists again
//! ```

use std::sync::{Arc, Mutex, PoisonError};

use serde::ser::{Serialize, SerializeMap, Serializer};
use serde_json::value::RawValue;
use serde_json::{json, Value};

use super::{era_response, ToolList};
use crate::mcp::session::Era;

/// How long a 2026-07-28 client may cache a `tools/list` whose upstream tools can
/// change (`listChanged`): a minute, not the fixed list's hour.
pub(crate) const LIVE_TTL_MS: u64 = 60_000;

/// Where `tools/list` comes from: the fixed tools (serialised once per process), or a
/// list the loop rebuilds when an upstream's tools change.
#[derive(Clone)]
pub(crate) enum Listing {
    Fixed(&'static ToolList),
    Live(Arc<LiveList>),
}

impl Listing {
    /// Whether the list can change during the session (`tools.listChanged`).
    pub(crate) fn changes(&self) -> bool {
        matches!(self, Listing::Live(_))
    }
}

/// The latest `tools/list` result of a policy with upstreams, as JSON text per era; unset
/// until the loop has listed, and again after an upstream announced a change.
#[derive(Default)]
pub(crate) struct LiveList {
    results: Mutex<[Option<Arc<RawValue>>; 2]>,
}

fn slot(era: Era) -> usize {
    usize::from(era == Era::Stateless)
}

impl LiveList {
    /// The result in `era`, if the loop has made it since the last change.
    pub(crate) fn get(&self, era: Era) -> Option<Arc<RawValue>> {
        self.results.lock().unwrap_or_else(PoisonError::into_inner)[slot(era)].clone()
    }

    /// Makes (and keeps) the result of `definitions` in `era`.
    pub(crate) fn set(&self, era: Era, definitions: Value) -> Option<Arc<RawValue>> {
        let mut list = json!({"tools": definitions});
        if era == Era::Stateless {
            list["ttlMs"] = json!(LIVE_TTL_MS);
            list["cacheScope"] = json!("public");
        }
        let built = era_response(Value::Null, list, era)["result"].take();
        let raw: Arc<RawValue> = serde_json::value::to_raw_value(&built).ok()?.into();
        self.results.lock().unwrap_or_else(PoisonError::into_inner)[slot(era)] = Some(raw.clone());
        Some(raw)
    }

    /// Forgets both eras' results: the next `tools/list` is made by the loop.
    pub(crate) fn clear(&self) {
        *self.results.lock().unwrap_or_else(PoisonError::into_inner) = [None, None];
    }
}

/// A `tools/list` answer whose result is JSON text made before.
pub(crate) struct RawListAnswer {
    pub(crate) id: Value,
    pub(crate) result: Arc<RawValue>,
}

impl Serialize for RawListAnswer {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut m = s.serialize_map(Some(3))?;
        m.serialize_entry("id", &self.id)?;
        m.serialize_entry("jsonrpc", "2.0")?;
        m.serialize_entry("result", &*self.result)?;
        m.end()
    }
}

/// An upstream's `CallToolResult` as sp passes it on: an object of `content`, `isError`
/// and, when the upstream gave it, `structuredContent` (`tools/upstream` builds it from
/// the checked result; `gate::withhold::scrub_upstream` scrubs it whole).
pub(crate) type PassedResult = Value;

/// A [`PassedResult`] as the `result` member, stamped for 2026-07-28 when `.1`. The
/// upstream's members are written as they are; sp adds only the stamp.
pub(super) struct PassedWire<'a>(pub(super) &'a PassedResult, pub(super) bool);

impl Serialize for PassedWire<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut m = s.serialize_map(None)?;
        if self.1 {
            m.serialize_entry("_meta", &super::Meta)?;
        }
        if let Value::Object(members) = self.0 {
            for (k, v) in members.iter().filter(|(k, _)| !matches!(k.as_str(), "_meta" | "resultType")) {
                m.serialize_entry(k, v)?;
            }
        }
        if self.1 {
            m.serialize_entry("resultType", "complete")?;
        }
        m.end()
    }
}

/// A `tasks/result` answer (issue 33, section 4): the call's result as a direct call's
/// answer writes it, with the related-task `_meta` MCP 2025-11-25 requires there
/// ("Tasks: Result Retrieval"); `task_id` is sp's id.
pub(crate) fn task_result(call: &super::CallToolResult, task_id: &str) -> Value {
    let mut result = serde_json::to_value(super::CallWire(call, false)).unwrap_or_else(|_| json!({}));
    if let Some(m) = result.as_object_mut() {
        m.insert("_meta".into(), json!({"io.modelcontextprotocol/related-task": {"taskId": task_id}}));
    }
    result
}
