//! One `ssh_exec`, from its authorized action to its tool result: run it, scrub the raw
//! output bytes, shape the result. A timeout is an error result that still carries the
//! output collected until then. What the result row reports (exit status, bytes,
//! truncated, host key, the recording) is emitted as the run's facts. With
//! `ssh.recordings` the recording file is created first: when it cannot be, the call
//! ends there (`SP_UNAVAILABLE`) and the executor never runs (`record.rs`).

use crate::gate::authorize::Authorized;
use crate::gate::exec::{Event, Facts, RunContext};
use crate::gate::vault::Vault;
use crate::mcp::model::ToolResult;
use crate::gate::outcome::ToolCode;
use crate::tools::ssh::record::Recording;
use crate::tools::ssh::result::SshOutcome;
use crate::tools::ssh::SshAction;
use crate::tools::Executor;

pub(crate) fn run(executor: &mut dyn Executor, ssh: &Authorized<SshAction>, ctx: &mut RunContext<'_, '_>) -> ToolResult {
    let a = ssh.action();
    log::info!("executing ssh_exec on {} ({}@{}:{}, {})", a.host, a.user, a.address, a.port, a.rule);
    log::debug!("ssh_exec command on {}: {:?}", a.host, a.command);
    let recording = match a.recording.as_ref().map(|spec| Recording::create(spec, &a.host)).transpose() {
        Ok(r) => r,
        Err(e) => {
            log::error!("ssh_exec on {}: {e}", a.host);
            return ToolResult::error(ToolCode::Unavailable, ctx.vault.scrub_text(e.to_string()));
        }
    };
    if let Some(r) = &recording {
        log::debug!("ssh_exec on {}: recording to {}", a.host, r.path().display());
    }
    match executor.ssh(ssh, ctx) {
        Ok(mut o) => {
            let mut f = facts(&o);
            f.recording = recording.map(|r| r.finish(a, Some(&o), ctx.vault));
            let _ = ctx.output.emit(Event::Facts(f));
            log::info!(
                "ssh_exec on {}: exit {:?}{} in {} ms",
                a.host,
                o.exit_status,
                o.exit_signal.as_ref().map(|s| format!(" signal {s}")).unwrap_or_default(),
                o.duration_ms
            );
            let cut = o.truncated;
            scrub(ctx.vault, &mut o, cut);
            ToolResult::ok(ctx.vault.scrub_fields(o.to_json()))
        }
        Err(mut e) => {
            // The message can quote the remote side: scrubbed before it is logged or sent.
            let message = ctx.vault.scrub_text(e.to_string());
            log::warn!("ssh_exec on {} failed: {message}", a.host);
            let mut result = ToolResult::error(e.code(), message);
            let recorded = recording.map(|r| r.finish(a, e.partial(), ctx.vault));
            if recorded.is_some() && e.partial().is_none() {
                let _ = ctx.output.emit(Event::Facts(Facts { recording: recorded.clone(), ..Facts::default() }));
            }
            if let Some(o) = e.partial_mut() {
                let _ = ctx.output.emit(Event::Facts(Facts { recording: recorded, ..facts(o) }));
                scrub(ctx.vault, o, true);
                // The output until the timeout, next to the error (the text block: the
                // error line, then the JSON of the whole result, `ToolResult`).
                result = result.with_fields(ctx.vault.scrub_fields(o.to_json()));
            }
            result
        }
    }
}

/// The result row's facts of a command that ran: from the executor's outcome, never
/// read back out of the rendered result.
fn facts(o: &SshOutcome) -> Facts {
    Facts {
        exit_status: o.exit_status,
        bytes_out: Some(o.stdout_bytes + o.stderr_bytes),
        truncated: Some(o.truncated),
        host_key_fp: Some(o.host_key_fingerprint.clone()),
        ..Facts::default()
    }
}

/// `cut`: the output may end inside a secret (truncated, or a timeout's partial
/// output), so a tail that begins a secret is scrubbed too; the cut tail first, as for
/// HTTP bodies (`http/run.rs`).
fn scrub(vault: &Vault, o: &mut SshOutcome, cut: bool) {
    if cut {
        vault.scrub_truncated_tail(&mut o.stdout);
        vault.scrub_truncated_tail(&mut o.stderr);
    }
    vault.scrub_bytes(&mut o.stdout);
    vault.scrub_bytes(&mut o.stderr);
}
