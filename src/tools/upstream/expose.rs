//! A listing made into what the agent sees: the upstream's checked definitions
//! (`fetch_definitions`) named (`names.rs`), pinned (`pins.rs`: a changed or new
//! definition is withheld, its name kept in the table so a call of it is refused as
//! changed), cleaned (`clean.rs`) and scrubbed; and [`Upstreams::survey`], the same
//! listing unpinned, for `sp upstream pin|diff|approve`.

use serde_json::{Map, Value};

use super::{clean, fetch_definitions, names, pins, ExposedTool, NameTable, Slot, UpstreamError, Upstreams};
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
        Ok(defs.iter().map(|d| pins::Seen::of(&d.name, &d.definition, vault)).collect())
    }

}

/// `tools/list`, every page: checked, filtered, named (with the table back), pinned
/// (what a changed or new definition withholds: `pins.rs`), cleaned and scrubbed.
pub(super) fn list_tools(slot: &mut Slot, pins: &mut pins::Book, vault: &Vault, cancel: &Cancel) -> Result<(Vec<ExposedTool>, NameTable, pins::Checked), UpstreamError> {
    let defs = fetch_definitions(slot, vault, cancel)?;
    let u = &slot.policy;
    let name = u.name.as_str();
    let mut table = NameTable::build(name, defs.iter().map(|d| d.name.as_str())).map_err(|e| UpstreamError::Names { upstream: name.to_owned(), why: e.to_string() })?;
    let checked = if u.pin == crate::policy::upstreams::PinMode::Off {
        pins::Checked::default()
    } else {
        let seen: Vec<pins::Seen> = defs.iter().map(|d| pins::Seen::of(&d.name, &d.definition, vault)).collect();
        pins.check(name, u.pin, &seen)
    };
    for why in &checked.withheld {
        table.withhold(&names::exposed_name(name, &why.tool), why.clone());
    }
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
            let mut definition = Value::Object(definition);
            vault.scrub(&mut definition);
            ExposedTool { approve: u.tools.needs_approval(&d.name), exposed, upstream: name.to_owned(), tool: d.name, definition }
        })
        .collect();
    Ok((tools, table, checked))
}

