//! Resources, resource templates, prompts and completion of upstreams, relayed under
//! the same gate as their tools (issue 33, `sp-policy(5)` UPSTREAMS, `sp(1)` RESOURCES
//! AND PROMPTS).
//!
//! ```text
//!  resources/list ─┐ each upstream whose `resources` allow anything: every page (bounded)
//!  templates/list ─┤   ──> items whose own URI / uriTemplate / name the policy allows
//!  prompts/list  ──┘   ──> key rewritten (URI: `<upstream>+<uri>`, prompt: `<upstream>_<name>`)
//!                      ──> scrubbed whole (an item whose JSON text spells a secret dropped)
//!  resources/read U ──> [`parse_uri`] U: (upstream, own URI) | not found
//!                   ──> that upstream's `resources` allow the own URI? | not found
//!                   ──> resources/read own URI, to that upstream only
//!                   ──> contents checked (uri, text | blob), each content's URI allowed and
//!                       rewritten, at most [`MAX_READ_BYTES`], a blob decoded and searched
//!                   ──> scrubbed whole, or withheld
//!  prompts/get N ──> the upstream N names lists its prompts ──> N in that table? | not found
//!                ──> prompts/get own name ──> bounded, resource URIs inside rewritten, scrubbed
//!  completion/complete ──> its ref resolved as above ──> values scrubbed, at most 100
//! ```
//!
//! URIs: an upstream's `demo://x` is exposed as `<upstream>+demo://x` (the upstream's name
//! prefixed to the scheme with `+`, which RFC 3986 allows in a scheme and which an
//! upstream name never holds). A read splits at the first `+`: the part before names the
//! only upstream the read can go to, and the rest is what that upstream is asked for,
//! exactly what the policy's globs were matched against. An upstream that lists a URI
//! spelling another upstream's prefix (`b+x://`) gets it exposed as `a+b+x://`, which
//! still routes to `a`: no upstream can make a read reach another one. Templates are
//! rewritten the same way (`a+demo://t/{id}`), so a client's expansion keeps the prefix.

use std::time::Duration;

use base64::Engine as _;
use serde_json::{json, Map, Value};

use super::client::Relay;
use super::{client_error, names, UpstreamError, Upstreams, MAX_LISTING_BYTES, MAX_PAGES};
use crate::gate::exec::Cancel;
use crate::gate::vault::Vault;
use crate::gate::withhold::scrub_upstream;
use crate::policy::upstreams::{is_upstream_name, ItemRules};

/// Items of one kind accepted per upstream and listing.
pub(crate) const MAX_ITEMS: usize = 1000;
/// The contents of one `resources/read` (text bytes plus blob base64 characters), and
/// the JSON of one `prompts/get` answer: more is refused, never cut.
pub(crate) const MAX_READ_BYTES: usize = 1024 * 1024;
/// Completion values passed on (the MCP limit).
pub(crate) const MAX_COMPLETIONS: usize = 100;

/// What is listed: the method, the member holding the items, the member each item's
/// policy key is in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    Resources,
    Templates,
    Prompts,
}

impl Kind {
    fn method(self) -> &'static str {
        match self {
            Kind::Resources => "resources/list",
            Kind::Templates => "resources/templates/list",
            Kind::Prompts => "prompts/list",
        }
    }

    pub(crate) fn member(self) -> &'static str {
        match self {
            Kind::Resources => "resources",
            Kind::Templates => "resourceTemplates",
            Kind::Prompts => "prompts",
        }
    }

    fn key(self) -> &'static str {
        match self {
            Kind::Resources => "uri",
            Kind::Templates => "uriTemplate",
            Kind::Prompts => "name",
        }
    }
}

/// Why a relayed request is refused. The texts name the agent's own words (cut short)
/// and sp's; an upstream's words only scrubbed ([`UpstreamError`]).
#[derive(Debug, PartialEq)]
pub(crate) enum RelayError {
    /// The params are not of the shape MCP defines.
    BadParams(String),
    /// No such resource or prompt that the policy relays (never says which of the two).
    NotFound { what: &'static str, name: String },
    /// The upstream failed or refused.
    Upstream(UpstreamError),
    /// Its answer is over [`MAX_READ_BYTES`].
    TooLarge,
    /// Its answer spells a secret in a form that cannot be scrubbed.
    Withheld,
    /// The intent row could not be written: nothing was asked (fail closed).
    Unavailable(String),
}

impl std::fmt::Display for RelayError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            RelayError::BadParams(m) => f.write_str(m),
            RelayError::NotFound { what, name } => {
                write!(f, "{what} not found: {:?} is not one the policy relays", crate::sys::short(name, 200, crate::sys::Ellipsis::Marked))
            }
            RelayError::Upstream(e) => e.fmt(f),
            RelayError::TooLarge => write!(f, "the upstream's answer is over {MAX_READ_BYTES} bytes: refused"),
            RelayError::Withheld => f.write_str(crate::gate::withhold::WITHHELD),
            RelayError::Unavailable(m) => f.write_str(m),
        }
    }
}

impl std::error::Error for RelayError {}

impl RelayError {
    /// The counter key and the journal's `decision` of a refusal.
    pub(crate) fn reason(&self) -> crate::gate::outcome::Reason {
        use crate::gate::outcome::Reason;
        match self {
            RelayError::BadParams(_) => Reason::InvalidParams,
            RelayError::NotFound { .. } => Reason::NotFound,
            RelayError::Upstream(UpstreamError::Cancelled { .. }) => Reason::Cancelled,
            RelayError::Upstream(_) => Reason::UpstreamError,
            RelayError::TooLarge => Reason::TooLarge,
            RelayError::Withheld => Reason::Withheld,
            RelayError::Unavailable(_) => Reason::AuditUnavailable,
        }
    }

    /// The JSON-RPC code: MCP's -32002 for a resource not found, -32602 for bad params
    /// and an unknown prompt, -32603 for the upstream's failures.
    pub(crate) fn code(&self) -> i32 {
        match self {
            RelayError::BadParams(_) => -32602,
            RelayError::NotFound { what: "resource", .. } => -32002,
            RelayError::NotFound { .. } => -32602,
            RelayError::Upstream(_) | RelayError::TooLarge | RelayError::Withheld | RelayError::Unavailable(_) => -32603,
        }
    }
}

/// Whether `uri` starts with an RFC 3986 scheme (`ALPHA *( ALPHA / DIGIT / + / - / . ) :`).
fn has_scheme(uri: &str) -> bool {
    let Some((scheme, _)) = uri.split_once(':') else { return false };
    let mut b = scheme.bytes();
    matches!(b.next(), Some(c) if c.is_ascii_alphabetic()) && b.all(|c| c.is_ascii_alphanumeric() || matches!(c, b'+' | b'-' | b'.'))
}

/// The URI (or template) the agent sees for `upstream`'s own `uri`; `None` when it has
/// no scheme (MCP resource URIs always have one).
pub(crate) fn expose_uri(upstream: &str, uri: &str) -> Option<String> {
    has_scheme(uri).then(|| format!("{upstream}+{uri}"))
}

/// The upstream and its own URI an exposed URI names: split at the first `+`; the first
/// part must be an upstream name, the rest a URI with a scheme. Pure: whether that
/// upstream exists and allows the URI is decided after.
pub(crate) fn parse_uri(exposed: &str) -> Option<(&str, &str)> {
    let (upstream, own) = exposed.split_once('+')?;
    (is_upstream_name(upstream) && has_scheme(own)).then_some((upstream, own))
}

/// A string member of `params`, or the refusal naming it.
pub(crate) fn string_param<'a>(params: &'a Map<String, Value>, method: &str, key: &str) -> Result<&'a str, RelayError> {
    params.get(key).and_then(Value::as_str).ok_or_else(|| RelayError::BadParams(format!("{method}: params.{key} must be a string")))
}

/// The params of a relayed request: absent or an object.
pub(crate) fn params_object(params: Option<Value>, method: &str) -> Result<Map<String, Value>, RelayError> {
    match params {
        None => Ok(Map::new()),
        Some(Value::Object(m)) => Ok(m),
        Some(_) => Err(RelayError::BadParams(format!("{method}: params must be an object"))),
    }
}

/// An object of strings (prompt arguments, a completion's context), checked.
fn string_map(v: Option<&Value>, at: &str) -> Result<Map<String, Value>, RelayError> {
    match v {
        None => Ok(Map::new()),
        Some(Value::Object(m)) if m.values().all(Value::is_string) => Ok(m.clone()),
        Some(_) => Err(RelayError::BadParams(format!("{at} must be an object of strings"))),
    }
}

/// An exposed URI checked against the policy: the upstream it names and its own URI.
fn allowed_uri<'a>(ups: &Upstreams, exposed: &'a str) -> Result<(&'a str, &'a str), RelayError> {
    let not_found = || RelayError::NotFound { what: "resource", name: exposed.to_owned() };
    let (upstream, own) = parse_uri(exposed).ok_or_else(not_found)?;
    let slot = ups.slots.get(upstream).ok_or_else(not_found)?;
    if !slot.policy.resources.exposes(own) {
        return Err(not_found());
    }
    Ok((upstream, own))
}

impl Upstreams {
    /// Sends `method` to `upstream` (started if needed) and waits for its result within
    /// the upstream's call timeout. Errors are scrubbed.
    fn ask(&mut self, upstream: &str, method: &str, params: Value, vault: &mut Vault, cancel: &Cancel) -> Result<Value, UpstreamError> {
        let asked = (|| {
            self.ensure_started(upstream, vault, cancel)?;
            let slot = self.slots.get_mut(upstream).ok_or_else(|| UpstreamError::Unknown { upstream: upstream.to_owned() })?;
            let timeout: Duration = slot.policy.timeout;
            let client = super::running(&mut slot.client, upstream)?;
            client.request(method, params, timeout, cancel, &mut |_| {}).map_err(|e| client_error(upstream, e, timeout))
        })();
        if let Err(e) = &asked {
            self.note_death(upstream, e);
        }
        asked.map_err(|e| e.scrubbed(vault))
    }

    /// Every page of `kind` from `upstream`: the items its policy relays, keys rewritten
    /// and each scrubbed whole. Each item is paired with its own key.
    fn fetch(&mut self, upstream: &str, kind: Kind, vault: &mut Vault, cancel: &Cancel) -> Result<Vec<(String, Value)>, UpstreamError> {
        let rules: ItemRules = {
            let slot = self.slots.get(upstream).ok_or_else(|| UpstreamError::Unknown { upstream: upstream.to_owned() })?;
            match kind {
                Kind::Prompts => slot.policy.prompts.clone(),
                _ => slot.policy.resources.clone(),
            }
        };
        let listing = |why: String| UpstreamError::Listing { upstream: upstream.to_owned(), why };
        let bad = |why: String| UpstreamError::BadAnswer { upstream: upstream.to_owned(), why };
        let (mut out, mut cursor, mut seen, mut count, mut size) = (Vec::new(), None::<String>, std::collections::BTreeSet::new(), 0usize, 0usize);
        for page in 0.. {
            if page == MAX_PAGES {
                return Err(listing(format!("more than {MAX_PAGES} pages of {}", kind.member())));
            }
            let params = cursor.as_ref().map_or_else(|| json!({}), |c| json!({"cursor": c}));
            let result = self.ask(upstream, kind.method(), params, vault, cancel)?;
            let Value::Object(mut result) = result else { return Err(bad(format!("{} result is not an object", kind.method()))) };
            let Some(Value::Array(items)) = result.remove(kind.member()) else {
                return Err(bad(format!("{} result has no {} array", kind.method(), kind.member())));
            };
            for item in items {
                count += 1;
                if count > MAX_ITEMS {
                    return Err(listing(format!("more than {MAX_ITEMS} {}", kind.member())));
                }
                let Value::Object(mut item) = item else { return Err(bad(format!("an item of {} is not an object", kind.member()))) };
                let Some(own) = item.get(kind.key()).and_then(Value::as_str).map(str::to_owned) else {
                    return Err(bad(format!("an item of {} has no string {}", kind.member(), kind.key())));
                };
                // A key that spells a secret could not be scrubbed and stay usable.
                if !rules.exposes(&own) || vault.found_in(own.as_bytes()) {
                    continue;
                }
                let exposed = match kind {
                    Kind::Prompts => Some(names::exposed_name(upstream, &own)),
                    _ => expose_uri(upstream, &own),
                };
                let Some(exposed) = exposed else { continue };
                item.insert(kind.key().into(), Value::String(exposed));
                let Some(item) = scrub_upstream(vault, Value::Object(item)) else { continue };
                let item = item.into_inner();
                size += serde_json::to_vec(&item).map_or(usize::MAX, |v| v.len());
                if size > MAX_LISTING_BYTES {
                    return Err(listing(format!("its {} take more than {MAX_LISTING_BYTES} bytes", kind.member())));
                }
                out.push((own, item));
            }
            match result.get("nextCursor") {
                None | Some(Value::Null) => break,
                Some(Value::String(c)) if !seen.insert(c.clone()) => return Err(listing("a cursor came back twice".into())),
                Some(Value::String(c)) => cursor = Some(c.clone()),
                Some(_) => return Err(bad("nextCursor must be a string".into())),
            }
        }
        Ok(out)
    }

    /// The `resources/list`, `resources/templates/list` or `prompts/list` result: every
    /// upstream whose policy relays that kind, in name order, as one page. An upstream
    /// that cannot be listed is left out (logged), as in `tools/list`.
    pub(crate) fn list_items(&mut self, kind: Kind, vault: &mut Vault, cancel: &Cancel) -> Value {
        let names: Vec<String> = self
            .slots
            .iter()
            .filter(|(_, s)| match kind {
                Kind::Prompts => s.policy.prompts.any(),
                _ => s.policy.resources.any(),
            })
            .map(|(n, _)| n.clone())
            .collect();
        let mut items = Vec::new();
        let mut seen = std::collections::BTreeSet::new();
        for name in names {
            match self.fetch(&name, kind, vault, cancel) {
                // Two prompts of one upstream that map to one exposed name: the first kept.
                Ok(listed) => {
                    items.extend(listed.into_iter().filter(|(_, v)| seen.insert(v[kind.key()].as_str().unwrap_or_default().to_owned())).map(|(_, v)| v))
                }
                Err(e) => log::warn!("{}: {e}", kind.method()),
            }
        }
        let mut result = Map::new();
        result.insert(kind.member().into(), Value::Array(items));
        Value::Object(result)
    }

    /// `resources/read` of an exposed URI: to the upstream it names only, if its policy
    /// allows the URI; the contents checked, bounded, rewritten and scrubbed.
    /// Whether a `resources/read` may go out (pure: nothing is started or asked), so a
    /// refused read is a rejection, never an intent.
    pub(crate) fn check_read(&self, params: &Map<String, Value>) -> Result<(), RelayError> {
        allowed_uri(self, string_param(params, "resources/read", "uri")?).map(drop)
    }

    pub(crate) fn read_resource(&mut self, params: &Map<String, Value>, vault: &mut Vault, cancel: &Cancel) -> Result<Value, RelayError> {
        let exposed = string_param(params, "resources/read", "uri")?;
        let (upstream, own) = allowed_uri(self, exposed)?;
        let rules = self.slots[upstream].policy.resources.clone();
        let result = self.ask(upstream, "resources/read", json!({"uri": own}), vault, cancel).map_err(RelayError::Upstream)?;
        let bad = |why: &str| RelayError::Upstream(UpstreamError::BadAnswer { upstream: upstream.to_owned(), why: format!("resources/read: {why}") });
        let Some(Value::Array(contents)) = result.get("contents") else { return Err(bad("no contents array")) };
        let mut kept = Vec::new();
        let mut size = 0usize;
        for c in contents {
            let Value::Object(c) = c else { return Err(bad("a content is not an object")) };
            let Some(uri) = c.get("uri").and_then(Value::as_str) else { return Err(bad("a content has no string uri")) };
            // A content of another URI (a directory's entries) only if the policy allows it too.
            if uri != own && !rules.exposes(uri) {
                log::info!("resources/read: a content of a URI the policy does not relay was dropped");
                continue;
            }
            let exposed_uri = expose_uri(upstream, uri).ok_or_else(|| bad("a content's uri has no scheme"))?;
            let mut out = Map::new();
            out.insert("uri".into(), Value::String(exposed_uri));
            for (k, v) in c {
                match (k.as_str(), v) {
                    ("uri", _) => {}
                    ("text", Value::String(t)) => {
                        size = size.saturating_add(t.len());
                        out.insert(k.clone(), v.clone());
                    }
                    ("blob", Value::String(b)) => {
                        size = size.saturating_add(b.len());
                        if size > MAX_READ_BYTES {
                            return Err(RelayError::TooLarge);
                        }
                        // A secret anywhere in the decoded bytes: base64 of it at another
                        // alignment would spell nothing the scrubber knows.
                        let decoded = base64::engine::general_purpose::STANDARD.decode(b).map_err(|_| bad("a blob is not base64"))?;
                        if vault.found_in(&decoded) {
                            log::warn!("resources/read: a blob holds a secret of this session: withheld");
                            return Err(RelayError::Withheld);
                        }
                        out.insert(k.clone(), v.clone());
                    }
                    ("mimeType", Value::String(_)) | ("_meta", Value::Object(_)) | ("annotations", Value::Object(_)) => {
                        out.insert(k.clone(), v.clone());
                    }
                    _ => return Err(bad("a content member is not text, blob, mimeType, annotations or _meta")),
                }
            }
            if !out.contains_key("text") && !out.contains_key("blob") {
                return Err(bad("a content has neither text nor blob"));
            }
            if size > MAX_READ_BYTES {
                return Err(RelayError::TooLarge);
            }
            kept.push(Value::Object(out));
        }
        scrub_upstream(vault, json!({"contents": kept})).map(crate::gate::vault::Scrubbed::into_inner).ok_or(RelayError::Withheld)
    }

    /// The upstream an exposed prompt name belongs to and its own name there: that
    /// upstream's prompts listed now (the way back is the listing, never a parse).
    pub(crate) fn resolve_prompt(&mut self, exposed: &str, vault: &mut Vault, cancel: &Cancel) -> Result<(String, String), RelayError> {
        let not_found = || RelayError::NotFound { what: "prompt", name: exposed.to_owned() };
        let upstream = names::upstream_of(exposed).filter(|u| self.slots.get(*u).is_some_and(|s| s.policy.prompts.any())).ok_or_else(not_found)?.to_owned();
        let listed = self.fetch(&upstream, Kind::Prompts, vault, cancel).map_err(RelayError::Upstream)?;
        let own = listed.into_iter().find(|(_, v)| v["name"] == exposed).map(|(own, _)| own).ok_or_else(not_found)?;
        Ok((upstream, own))
    }

    /// `prompts/get` of an exposed prompt name: resolved in its upstream's listing, the
    /// answer bounded, the resource URIs in it rewritten, scrubbed.
    /// `(upstream, own)`: [`Upstreams::resolve_prompt`]'s, made before the intent row.
    pub(crate) fn get_prompt(
        &mut self,
        (upstream, own): (String, String),
        params: &Map<String, Value>,
        vault: &mut Vault,
        cancel: &Cancel,
    ) -> Result<Value, RelayError> {
        let arguments = string_map(params.get("arguments"), "prompts/get: params.arguments")?;
        let result = self.ask(&upstream, "prompts/get", json!({"name": own, "arguments": arguments}), vault, cancel).map_err(RelayError::Upstream)?;
        if serde_json::to_vec(&result).map_or(usize::MAX, |v| v.len()) > MAX_READ_BYTES {
            return Err(RelayError::TooLarge);
        }
        let bad = |why: &str| RelayError::Upstream(UpstreamError::BadAnswer { upstream: upstream.clone(), why: format!("prompts/get: {why}") });
        let Some(Value::Array(messages)) = result.get("messages") else { return Err(bad("no messages array")) };
        let mut messages = messages.clone();
        for m in &mut messages {
            // An embedded resource or a link names the upstream's own URI: rewritten like
            // a listed one, so the agent reads it back through the same gate.
            let content = m.get_mut("content").ok_or_else(|| bad("a message has no content"))?;
            let slot = match content.get("type").and_then(Value::as_str) {
                Some("resource") => content.get_mut("resource").and_then(|r| r.get_mut("uri")),
                Some("resource_link") => content.get_mut("uri"),
                _ => None,
            };
            if let Some(uri) = slot {
                let own_uri = uri.as_str().ok_or_else(|| bad("a resource uri is not a string"))?;
                *uri = Value::String(expose_uri(&upstream, own_uri).ok_or_else(|| bad("a resource uri has no scheme"))?);
            }
        }
        let mut out = Map::new();
        if let Some(d @ Value::String(_)) = result.get("description") {
            out.insert("description".into(), d.clone());
        }
        out.insert("messages".into(), Value::Array(messages));
        scrub_upstream(vault, Value::Object(out)).map(crate::gate::vault::Scrubbed::into_inner).ok_or(RelayError::Withheld)
    }

    /// `completion/complete` for a relayed prompt's argument or a relayed template's
    /// variable: the ref resolved as for a get or a read, the values scrubbed and cut to
    /// [`MAX_COMPLETIONS`].
    pub(crate) fn complete(&mut self, params: &Map<String, Value>, vault: &mut Vault, cancel: &Cancel) -> Result<Value, RelayError> {
        let method = "completion/complete";
        let Some(Value::Object(reference)) = params.get("ref") else { return Err(RelayError::BadParams(format!("{method}: params.ref must be an object"))) };
        let Some(Value::Object(argument)) = params.get("argument") else {
            return Err(RelayError::BadParams(format!("{method}: params.argument must be an object")));
        };
        let (Some(Value::String(arg_name)), Some(Value::String(arg_value))) = (argument.get("name"), argument.get("value")) else {
            return Err(RelayError::BadParams(format!("{method}: params.argument must be {{name: string, value: string}}")));
        };
        let context = params.get("context").map(|c| string_map(c.get("arguments"), "completion/complete: params.context.arguments")).transpose()?;
        let (upstream, own_ref) = match reference.get("type").and_then(Value::as_str) {
            Some("ref/prompt") => {
                let exposed = string_param(reference, method, "name")?;
                let (upstream, own) = self.resolve_prompt(exposed, vault, cancel)?;
                (upstream, json!({"type": "ref/prompt", "name": own}))
            }
            Some("ref/resource") => {
                let exposed = string_param(reference, method, "uri")?;
                let (upstream, own) = allowed_uri(self, exposed)?;
                (upstream.to_owned(), json!({"type": "ref/resource", "uri": own}))
            }
            _ => return Err(RelayError::BadParams(format!("{method}: params.ref.type must be \"ref/prompt\" or \"ref/resource\""))),
        };
        let mut asked = json!({"ref": own_ref, "argument": {"name": arg_name, "value": arg_value}});
        if let Some(c) = context {
            asked["context"] = json!({"arguments": c});
        }
        let result = self.ask(&upstream, method, asked, vault, cancel).map_err(RelayError::Upstream)?;
        let bad = || {
            RelayError::Upstream(UpstreamError::BadAnswer {
                upstream: upstream.clone(),
                why: format!("{method}: completion.values must be an array of strings"),
            })
        };
        let completion = result.get("completion").ok_or_else(bad)?;
        let Some(Value::Array(values)) = completion.get("values") else { return Err(bad()) };
        if !values.iter().all(Value::is_string) {
            return Err(bad());
        }
        let mut values: Vec<Value> =
            values.iter().filter(|v| !vault.found_in(v.as_str().unwrap_or_default().as_bytes())).take(MAX_COMPLETIONS).cloned().collect();
        values.iter_mut().for_each(|v| vault.scrub(v));
        let mut out = json!({"values": values});
        if let Some(t) = completion.get("total").filter(|t| t.is_u64()) {
            out["total"] = t.clone();
        }
        if let Some(h) = completion.get("hasMore").filter(|h| h.is_boolean()) {
            out["hasMore"] = h.clone();
        }
        Ok(json!({"completion": out}))
    }

    /// The resource and prompt notifications the upstreams sent, as the client gets
    /// them: a list change only from an upstream whose policy relays that kind (one of
    /// each, whoever sent it), an update only for a URI the policy relays, rewritten.
    pub(crate) fn take_relayed(&mut self, vault: &Vault) -> Vec<crate::mcp::model::Notification> {
        let (mut resources, mut prompts, mut updated) = (false, false, Vec::new());
        for (name, slot) in &mut self.slots {
            let Some(client) = slot.client.as_mut() else { continue };
            for relay in client.take_relays() {
                match relay {
                    Relay::ResourcesChanged => resources |= slot.policy.resources.any(),
                    Relay::PromptsChanged => prompts |= slot.policy.prompts.any(),
                    Relay::ResourceUpdated { uri } => {
                        if slot.policy.resources.exposes(&uri)
                            && !vault.found_in(uri.as_bytes())
                            && let Some(exposed) = expose_uri(name, &uri)
                        {
                            updated.push(crate::mcp::model::Notification::resource_updated(exposed));
                        }
                    }
                }
            }
        }
        let mut out = Vec::new();
        if resources {
            out.push(crate::mcp::model::Notification::resources_list_changed());
        }
        if prompts {
            out.push(crate::mcp::model::Notification::prompts_list_changed());
        }
        out.extend(updated);
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The rewriting is a bijection on URIs with a scheme, and the split is at the
    /// first `+`: an upstream cannot spell its way into another's namespace.
    #[test]
    fn uris_round_trip_and_cannot_cross_upstreams() {
        for (upstream, own) in [("everything", "demo://resource/static/document/a.md"), ("a", "file:///tmp/x"), ("fs-2", "b+x://y"), ("a", "urn:isbn:1")] {
            let exposed = expose_uri(upstream, own).unwrap();
            assert_eq!(parse_uri(&exposed), Some((upstream, own)), "{exposed}");
        }
        // Listed by `a` as `b+x://secret`: exposed under a, read from a.
        assert_eq!(parse_uri(&expose_uri("a", "b+x://secret").unwrap()), Some(("a", "b+x://secret")));
        for refused in ["demo://x", "+demo://x", "Everything+demo://x", "a_b+demo://x", "a+", "a+//x", "a+1x:y", "a+demo", "", "a+:x"] {
            assert_eq!(parse_uri(refused), None, "{refused:?}");
        }
        assert_eq!(expose_uri("a", "relative/path"), None);
        assert_eq!(expose_uri("a", "1x:y"), None);
    }

    #[test]
    fn relay_errors_map_to_their_codes() {
        assert_eq!(RelayError::NotFound { what: "resource", name: "x".into() }.code(), -32002);
        assert_eq!(RelayError::NotFound { what: "prompt", name: "x".into() }.code(), -32602);
        assert_eq!(RelayError::BadParams("x".into()).code(), -32602);
        assert_eq!(RelayError::TooLarge.code(), -32603);
        assert_eq!(
            RelayError::NotFound { what: "resource", name: "a+x://y".into() }.to_string(),
            "resource not found: \"a+x://y\" is not one the policy relays"
        );
    }
}
