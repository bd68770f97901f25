//! A listing made into what the agent sees: the upstream's checked definitions
//! (`fetch_definitions`) named (`names.rs`), pinned (`pins.rs`: a changed or new
//! definition is withheld, its name kept in the table so a call of it is refused as
//! changed), cleaned (`clean.rs`) and scrubbed; and [`Upstreams::survey`], the same
//! listing unpinned, for `sp upstream pin|diff|approve`.

use serde_json::{Map, Value};

use super::{clean, client_error, names, pins, wire, ExposedTool, NameTable, Slot, UpstreamError, Upstreams, MAX_LISTING_BYTES, MAX_PAGES, MAX_TOOLS};
use crate::gate::exec::Cancel;
use crate::gate::vault::Vault;

impl Upstreams {
    /// Every tool of `upstream` the filter exposes, as it lists them now (started if
    /// needed), with its hash and canonical definition: what `sp upstream pin`, `diff`
    /// and `approve` compare with the pins. Nothing is pinned or cached.
    pub(crate) fn survey(&mut self, upstream: &str, vault: &mut Vault) -> Result<Vec<pins::Seen>, UpstreamError> {
        let surveyed = self.survey_inner(upstream, vault);
        surveyed.map_err(|e| e.scrubbed(vault))
    }

    fn survey_inner(&mut self, upstream: &str, vault: &mut Vault) -> Result<Vec<pins::Seen>, UpstreamError> {
        let cancel = Cancel::new();
        self.ensure_started(upstream, vault, &cancel)?;
        let slot = self.slots.get_mut(upstream).ok_or_else(|| UpstreamError::Unknown { upstream: upstream.to_owned() })?;
        let defs = match fetch_definitions(slot, vault, &cancel) {
            Ok(d) => d,
            Err(e) => {
                self.note_death(upstream, &e);
                return Err(e);
            }
        };
        Ok(defs.iter().map(|d| pins::Seen::of(&d.name, &d.pinned(), vault)).collect())
    }
}

/// `tools/list`, every page: checked, filtered, named (with the table back), pinned
/// (what a changed or new definition withholds: `pins.rs`), cleaned and scrubbed.
pub(super) fn list_tools(
    slot: &mut Slot,
    pins: &mut pins::Book,
    vault: &Vault,
    cancel: &Cancel,
) -> Result<(Vec<ExposedTool>, NameTable, pins::Checked), UpstreamError> {
    let defs = fetch_definitions(slot, vault, cancel)?;
    let u = &slot.policy;
    let name = u.name.as_str();
    let mut table =
        NameTable::build(name, defs.iter().map(|d| d.name.as_str())).map_err(|e| UpstreamError::Names { upstream: name.to_owned(), why: e.to_string() })?;
    let checked = if u.pin == crate::policy::upstreams::PinMode::Off {
        pins::Checked::default()
    } else {
        let seen: Vec<pins::Seen> = defs.iter().map(|d| pins::Seen::of(&d.name, &d.pinned(), vault)).collect();
        pins.check(name, u.pin, &seen)
    };
    for why in &checked.withheld {
        table.withhold(&names::exposed_name(name, &why.tool), why.clone());
    }
    // Tasks relayed (issue 33, section 4): the policy says `tasks` and the upstream
    // declared task-augmented tools/call. Then, and only then, a tool's own
    // `execution.taskSupport` is stated to the client (sp's words, after the pin's hash).
    let tasks = u.tasks && slot.client.as_ref().is_some_and(|c| c.task_caps().call);
    let tools = defs
        .into_iter()
        .filter(|d| !checked.withheld.iter().any(|w| w.tool == d.name))
        .map(|d| {
            let exposed = names::exposed_name(name, &d.name);
            let mut definition = Map::new();
            definition.insert("name".into(), Value::String(exposed.clone()));
            definition.extend(d.definition);
            // Cleaned before the scrub: a secret split by zero-width characters would
            // pass the scrub and then be joined by the cleaning.
            clean::clean_definition(&mut definition);
            // The policy's argument pins, told to the agent with the tool (issue 32: a
            // pin the agent cannot see only produces refusals).
            if let Some(pins) = u.arguments.get(&d.name) {
                let said = pins_text(pins);
                let text = match definition.get("description").and_then(Value::as_str) {
                    Some(desc) if !desc.is_empty() => format!("{desc}\n\n{said}"),
                    _ => said,
                };
                definition.insert("description".into(), Value::String(text));
            }
            let task_support = if tasks { d.task_support } else { wire::task::TaskSupport::Forbidden };
            if task_support != wire::task::TaskSupport::Forbidden {
                definition.insert("execution".into(), serde_json::json!({"taskSupport": task_support.as_str()}));
            }
            let mut definition = Value::Object(definition);
            vault.scrub(&mut definition);
            ExposedTool { approve: u.tools.needs_approval(&d.name), exposed, upstream: name.to_owned(), tool: d.name, definition, task_support }
        })
        .collect();
    Ok((tools, table, checked))
}

/// The sentence a pinned tool's description ends with: each pinned argument and the
/// globs its value must match (`*` any run of characters, `?` one).
pub(crate) fn pins_text(pins: &std::collections::BTreeMap<String, Vec<crate::policy::upstreams::Glob>>) -> String {
    let each: Vec<String> = pins
        .iter()
        .map(|(arg, globs)| format!("{arg:?} must match {}", globs.iter().map(|g| format!("{:?}", g.as_str())).collect::<Vec<_>>().join(" or ")))
        .collect();
    format!("Pinned by the operator's policy (other values are refused; '*' any run of characters, '?' one): {}.", each.join("; "))
}

/// Whether an upstream's tool name spells a secret (searched whole, in any spelling):
/// such a tool is not exposed (and the log says so), since its exposed name is cut from
/// its name (`names.rs`) and a cut can keep a secret's prefix too short to be
/// recognised after it (issue 31, section 3).
pub(super) fn name_spells_secret(vault: &Vault, upstream: &str, tool: &str) -> bool {
    let spells = vault.found_in(tool.as_bytes());
    if spells {
        log::warn!("upstream {upstream}: tool {:?} not exposed: its name spells a secret", vault.scrub_then_cut(tool, 64).as_str());
    }
    spells
}

/// `tools/list`, every page: each definition checked (`wire::tool`), those the filter
/// exposes (and whose names spell no secret) kept, within [`MAX_PAGES`], [`MAX_TOOLS`]
/// and [`MAX_LISTING_BYTES`].
fn fetch_definitions(slot: &mut Slot, vault: &Vault, cancel: &Cancel) -> Result<Vec<wire::ToolDef>, UpstreamError> {
    let u = &slot.policy;
    let name = u.name.as_str();
    let client = super::running(&mut slot.client, name)?;
    let listing_error = |why: String| UpstreamError::Listing { upstream: name.to_owned(), why };
    let mut cursor: Option<String> = None;
    let mut seen_cursors = std::collections::BTreeSet::new();
    let mut defs = Vec::new();
    let mut count = 0usize;
    let mut size = 0usize;
    for page in 0.. {
        if page == MAX_PAGES {
            return Err(listing_error(format!("more than {MAX_PAGES} pages")));
        }
        let params = match &cursor {
            Some(c) => serde_json::json!({"cursor": c}),
            None => serde_json::json!({}),
        };
        let result = client.request("tools/list", params, u.startup_timeout, cancel, &mut |_| {}).map_err(|e| client_error(name, e, u.startup_timeout))?;
        let (tools, next) = wire::tools_page(result).map_err(|e| UpstreamError::BadAnswer { upstream: name.to_owned(), why: e.to_string() })?;
        for t in tools {
            let def = wire::tool(t, &format!("tools[{count}]")).map_err(|e| UpstreamError::BadAnswer { upstream: name.to_owned(), why: e.to_string() })?;
            count += 1;
            if count > MAX_TOOLS {
                return Err(listing_error(format!("more than {MAX_TOOLS} tools")));
            }
            if u.tools.exposes(&def.name) && !name_spells_secret(vault, name, &def.name) {
                size += serde_json::to_vec(&def.definition).map_or(usize::MAX, |v| v.len());
                if size > MAX_LISTING_BYTES {
                    return Err(listing_error(format!("its exposed definitions take more than {MAX_LISTING_BYTES} bytes")));
                }
                defs.push(def);
            }
        }
        match next {
            None => break,
            Some(c) if !seen_cursors.insert(c.clone()) => return Err(listing_error("a cursor came back twice".into())),
            Some(c) => cursor = Some(c),
        }
    }
    Ok(defs)
}
