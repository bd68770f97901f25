//! A transfer's session recording: `ssh_get` and `ssh_put` under `ssh.recordings` are
//! recorded as `ssh_exec` is (the file, its checks and its row facts are `../record.rs`).
//! The header's `command` is `ssh_get PATH` or `ssh_put PATH` and its `sp` object adds
//! the path, the bytes and SHA-256 of what moved; one event holds the content as it
//! crossed: `"o"` with the text the agent got for a get, `"i"` with what a put wrote,
//! each scrubbed (base64 for bytes that are not UTF-8 text). A get the agent was refused
//! (over the response limit) and a failed transfer have the header alone, a put's
//! content still as `"i"` (what the agent sent). Content beyond `max_bytes` is left out
//! and the row says `recording_cut`.

use std::time::SystemTime;

use serde_json::{json, Value};

use crate::gate::exec::RecordingFacts;
use crate::gate::vault::Vault;
use crate::tools::ssh::pty::{PTY_COLUMNS, PTY_ROWS};
use crate::tools::ssh::record::{Event, Recording};

use super::authorize::{Op, TransferAction};
use super::result::{encode, TransferOutcome};

/// The tool's name, as the header's command and title say it.
fn tool(a: &TransferAction) -> &'static str {
    match a.op {
        Op::Get => super::SSH_GET,
        Op::Put { .. } => super::SSH_PUT,
    }
}

fn header(a: &TransferAction, o: Option<&TransferOutcome>, started: SystemTime, vault: &Vault) -> Value {
    let c = &a.conn;
    let path = vault.scrub_text(a.path.clone()).into_inner();
    let mut sp = json!({"host": c.host, "user": c.user, "address": c.address, "port": c.port, "rule": c.rule, "path": path});
    if let Some(o) = o {
        sp["host_key_fp"] = json!(o.host_key_fingerprint);
        sp["bytes"] = json!(o.bytes);
        sp["sha256"] = json!(o.sha256);
    }
    let timestamp = started.duration_since(SystemTime::UNIX_EPOCH).map(|d| d.as_secs()).unwrap_or_default();
    json!({
        "version": 2, "width": PTY_COLUMNS, "height": PTY_ROWS, "timestamp": timestamp,
        "command": format!("{} {path}", tool(a)), "title": format!("sp {} {}", tool(a), c.host), "sp": sp,
    })
}

/// Writes the recording of transfer `a`: `o` when it moved a file, `shown` the text a
/// get's agent got (already scrubbed).
pub(crate) fn finish(r: Recording, a: &TransferAction, o: Option<&TransferOutcome>, shown: Option<&str>, vault: &Vault) -> RecordingFacts {
    let header = header(a, o, r.started(), vault);
    let at = r.started().elapsed().unwrap_or_default();
    let event: Option<Event> = match &a.op {
        Op::Get => shown.map(|t| (at, "o", t.to_owned())),
        Op::Put { content, .. } => {
            let mut c = content.clone();
            vault.scrub_bytes(&mut c);
            let (_, text) = encode(&c);
            Some((at, "i", vault.scrub_text(text).into_inner()))
        }
    };
    r.write(&a.conn.host, &header, event.as_slice())
}
