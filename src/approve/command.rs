//! Running the approver command (`approval.command`): through the launcher
//! (`sys/confine.rs`: it dies with sp and holds only descriptors 0 to 2), in a process
//! group of its own that is killed when the call ends, its output drained by threads
//! and logged scrubbed and cut.

use std::io::{BufReader, Read, Write};
use std::process::Stdio;
use std::time::{Duration, Instant};

#[cfg(test)]
use serde_json::Value;

use super::{grants, logged_line, Answer, MAX_LOGGED_BYTES, MAX_LOGGED_LINE};
use crate::gate::exec::Cancel;

#[cfg(test)]
pub(super) fn ask(argv: &[String], timeout: Duration, description: &Value, env: &[(&str, String)], hidden_env: &[&str]) -> Answer {
    ask_waiting(argv, timeout, &description.to_string(), env, hidden_env, &Cancel::new(), &mut || {})
}

/// Asks the approver (`argv`) about one call, and when `cancel` fires the approver's process group is killed at once
/// (decision `cancelled`); `waiting` is called every few milliseconds meanwhile (it sends
/// progress). The approver's stdout is logged, and its last line kept in
/// [`Answer::stdout`] (at most [`grants::MAX_ANSWER_BYTES`] + 1 bytes: a longer line
/// is refused as a grant request anyway).
pub(crate) fn ask_waiting(
    argv: &[String],
    timeout: Duration,
    description: &str,
    env: &[(&str, String)],
    hidden_env: &[&str],
    cancel: &Cancel,
    waiting: &mut dyn FnMut(),
) -> Answer {
    use crate::sys::Waited;
    use std::os::unix::process::ExitStatusExt;
    let started = Instant::now();
    let answer = |decision, exit, why: String| Answer::new(decision, exit, why, started.elapsed().as_millis() as u64);
    // Whoever can write the approver approves everything, and
    // a FIFO or device is refused here, before anything waits on it.
    if let Err(e) = crate::sys::check_program(std::path::Path::new(&argv[0])) {
        return answer("failed", None, format!("the approver {} is refused: {e}", argv[0]));
    }
    // Through the launcher: the approver dies with sp, even on kill -9 (sys/confine.rs).
    let mut cmd = match crate::sys::launcher_command(&argv[0], crate::sys::env_var("PATH").as_deref(), &crate::sys::Plan::default()) {
        Ok(cmd) => cmd,
        Err(e) => return answer("failed", None, format!("{} could not be started: {e}", argv[0])),
    };
    cmd.args(&argv[1..]).stdin(Stdio::piped()).stdout(Stdio::piped()).stderr(Stdio::piped());
    for var in hidden_env {
        cmd.env_remove(var);
    }
    for (k, v) in env {
        cmd.env(k, v);
    }
    // Its own process group: the whole group is killed when the call ends.
    let mut running = match crate::sys::Child::spawn(&mut cmd) {
        Ok(c) => c,
        Err(e) => return answer("failed", None, format!("{} could not be started: {}", argv[0], crate::sys::io_reason(&e))),
    };
    let child = &mut running.child;
    // The last non-blank line of its stdout, handed over when the pipe ends.
    let (last_tx, last_rx) = std::sync::mpsc::channel::<Vec<u8>>();
    // Its own pipes, drained by threads so a chatty approver never blocks on them.
    for (name, pipe) in [
        ("stdout", child.stdout.take().map(|p| Box::new(p) as Box<dyn Read + Send>)),
        ("stderr", child.stderr.take().map(|p| Box::new(p) as Box<dyn Read + Send>)),
    ] {
        if let Some(pipe) = pipe {
            let last_tx = (name == "stdout").then(|| last_tx.clone());
            std::thread::spawn(move || {
                // Logged up to a cap, then drained unread: a chatty approver never blocks.
                // Each line is scrubbed before it is cut (issue 31, section 3).
                let (mut logged, mut last) = (0u64, Vec::new());
                crate::gate::outside::for_each_line(BufReader::new(pipe), MAX_LOGGED_LINE, |line| {
                    if !line.window.iter().all(u8::is_ascii_whitespace) {
                        // Parsed, never shown: one longer than an answer is refused whole.
                        last = line.window[..line.window.len().min(grants::MAX_ANSWER_BYTES + 2)].to_vec();
                    }
                    if logged < MAX_LOGGED_BYTES {
                        logged += line.len;
                        // Its stderr is where an approver says why it refuses (sp-approve:
                        // "nowhere to ask ..."): shown at the default verbosity (warn).
                        if name == "stderr" {
                            log::warn!("approver {name}: {}", logged_line(&line));
                        } else {
                            log::info!("approver {name}: {}", logged_line(&line));
                        }
                    }
                });
                if let Some(tx) = last_tx {
                    let _ = tx.send(last);
                }
            });
        }
    }
    drop(last_tx);
    if let Some(mut stdin) = child.stdin.take() {
        let mut line = description.as_bytes().to_vec();
        line.push(b'\n');
        // An approver that does not read its stdin must not hold us up.
        std::thread::spawn(move || {
            let _ = stdin.write_all(&line);
        });
    }
    // Polled every few milliseconds, so a cancel is seen at once.
    let stop = || {
        waiting();
        cancel.is_cancelled()
    };
    match running.wait_until(started + timeout, stop) {
        Waited::Exited(status) => {
            // Nothing it started outlives the call.
            running.kill_group();
            match (status.code(), status.signal()) {
                (Some(0), _) => {
                    // The group is dead, so its stdout has ended: the line comes at once.
                    let stdout = last_rx.recv_timeout(Duration::from_secs(1)).unwrap_or_default();
                    Answer { stdout, ..answer("approved", Some(0), "the approver exited 0".into()) }
                }
                (Some(code), _) => answer("refused", Some(code), format!("the approver exited {code}")),
                (None, Some(sig)) => answer("failed", None, format!("the approver was killed by signal {sig}")),
                (None, None) => answer("failed", None, "the approver ended without a status".into()),
            }
        }
        Waited::Stopped => {
            running.kill();
            answer("cancelled", None, "the client cancelled the call; the approver was killed".into())
        }
        Waited::TimedOut => {
            running.kill();
            answer("timeout", None, format!("the approver did not answer within {}s", timeout.as_secs()))
        }
        Waited::Failed(e) => {
            running.kill();
            answer("failed", None, format!("waiting for the approver failed: {e}"))
        }
    }
}
