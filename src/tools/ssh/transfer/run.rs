//! One `ssh_get` or `ssh_put`, from its authorized action to its tool result: run it,
//! report the result row's facts (bytes and SHA-256 of what moved, the host key),
//! scrub a downloaded file's content, fit it into the response limit. With
//! `ssh.recordings` the recording is created first (`SP_UNAVAILABLE` when it cannot be:
//! nothing moves) and written after (`record.rs`).

use crate::gate::authorize::Authorized;
use crate::gate::exec::{Event, Facts, RunContext};
use crate::gate::outcome::ToolCode;
use crate::mcp::model::ToolResult;
use crate::tools::ssh::record::Recording;
use crate::tools::Executor;

use super::authorize::{Op, TransferAction};
use super::record;
use super::result::{encode, TransferOutcome};

pub(crate) fn run(executor: &mut dyn Executor, t: &Authorized<TransferAction>, ctx: &mut RunContext<'_, '_>) -> ToolResult {
    let a = t.action();
    let get = matches!(a.op, Op::Get);
    log::info!("executing {} on {} ({}@{}:{}, {})", a.conn.command, a.conn.host, a.conn.user, a.conn.address, a.conn.port, a.conn.rule);
    // As for ssh_exec: a recording that cannot be started stops the call before it runs.
    let recording = match a.conn.recording.as_ref().map(|spec| Recording::create(spec, &a.conn.host)).transpose() {
        Ok(r) => r,
        Err(e) => {
            log::error!("{} on {}: {e}", a.conn.command, a.conn.host);
            return ToolResult::error(ToolCode::Unavailable, ctx.vault.scrub_text(e.to_string()));
        }
    };
    match executor.transfer(t, ctx) {
        Ok(mut o) => {
            log::info!("{} on {}: {} bytes, sha256 {} in {} ms", a.conn.command, a.conn.host, o.bytes, o.sha256, o.duration_ms);
            let mut f = facts(&o, get);
            if !get {
                f.recording = recording.map(|r| record::finish(r, a, Some(&o), None, ctx.vault));
                let _ = ctx.output.emit(Event::Facts(f));
                return ToolResult::ok(ctx.vault.scrub_fields(o.put_json()));
            }
            let mut content = std::mem::take(&mut o.content);
            ctx.vault.scrub_bytes(&mut content);
            let (encoding, text) = encode(&content);
            if text.len() as u64 > a.max_response_bytes {
                f.recording = recording.map(|r| record::finish(r, a, Some(&o), None, ctx.vault));
                let _ = ctx.output.emit(Event::Facts(f));
                let message = format!(
                    "ssh {}: {:?} is {} bytes, {} as {encoding}, above the response limit ssh.max_output_bytes ({})",
                    a.conn.host,
                    o.path,
                    o.bytes,
                    text.len(),
                    a.max_response_bytes
                );
                return ToolResult::error(ToolCode::Denied, ctx.vault.scrub_text(message));
            }
            if let Some(r) = recording {
                let shown = ctx.vault.scrub_text(text.clone()).into_inner();
                f.recording = Some(record::finish(r, a, Some(&o), Some(&shown), ctx.vault));
            }
            let _ = ctx.output.emit(Event::Facts(f));
            ToolResult::ok(ctx.vault.scrub_fields(o.get_json(encoding, text)))
        }
        Err(e) => {
            let message = ctx.vault.scrub_text(e.to_string());
            log::warn!("{} on {} failed: {message}", a.conn.command, a.conn.host);
            if let Some(r) = recording {
                let recorded = record::finish(r, a, None, None, ctx.vault);
                let _ = ctx.output.emit(Event::Facts(Facts { recording: Some(recorded), ..Facts::default() }));
            }
            ToolResult::error(e.code(), message)
        }
    }
}

/// The result row's facts: a get's bytes as `bytes_out`, a put's as `bytes_in`, the
/// SHA-256 of those bytes either way.
fn facts(o: &TransferOutcome, get: bool) -> Facts {
    Facts {
        bytes_out: get.then_some(o.bytes),
        bytes_in: (!get).then_some(o.bytes),
        sha256: Some(o.sha256.clone()),
        host_key_fp: Some(o.host_key_fingerprint.clone()),
        ..Facts::default()
    }
}
