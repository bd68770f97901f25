//! The upstream client against real published servers (`make upstreams` installs them:
//! `tests/upstreams/`) and against misbehaving ones of our own
//! (`tests/support/upstreams/misbehave.py`, stdlib Python). Each test that starts an
//! upstream ends with the evidence that its process group is gone.
//!
//! Attacks tried (what an upstream, as untrusted as the agent, can write or do):
//! - a line that is not JSON (`junk`), a duplicate key (`dup-key`), a line over
//!   `max_output_bytes` (`oversize`): the upstream is ended, the call fails;
//! - a response to an id sp never sent (`unknown-id`), the right id as a string
//!   (`string-id`): ended;
//! - dying mid-call (`crash`), at start (`die-at-start`, three times: a crash loop is
//!   refused without a fourth start), never answering initialize (`no-init`);
//! - a protocol revision sp does not speak (`bad-version`);
//! - hanging on a call without reading anything more (`hang`): timed out, no answer to
//!   the ping after, killed; a slow but live one (`slow`): timed out, kept, its late
//!   answer dropped while the next call goes through; a cancel mid-call;
//! - 2 MB of notifications written while sp writes a 1 MiB request (`blurt`): read
//!   while writing, no deadlock;
//! - a flood of 20000 notifications during a call (`flood`): counted and dropped, the
//!   call's answer still taken; progress with a repeated value, and 50 at once
//!   (`progress`): dropped, at most one note per 100 ms passed on; a listing of 4.8 MB
//!   of descriptions (`big-listing`): refused;
//! - requests to sp (`sampling`: sampling/createMessage, elicitation/create, roots/list
//!   refused with -32601, ping answered);
//! - a malformed result (`bad-result`): the call fails, the upstream stays;
//! - echoing its secret in eight spellings (`echo`): the result comes back raw (the
//!   lead's redaction point scrubs it), and the Vault finds and scrubs every spelling;
//! - an error message that spells the secret (`echo-error`): scrubbed in the error;
//! - reading its environment (`env`): nothing of sp's but PATH, HOME, LANG, TZ;
//! - dotted and 200-character tool names (`names`), 500 tools over 72 pages (`many`), a
//!   cursor that never ends (`cursor-loop`), a tool listed twice (`twice`), a changed
//!   listing (`list-changed`);
//! - hostile stderr (escape sequences, a 5000-byte line: `stderr`);
//! - a helper that stays in the group and ignores SIGTERM (`daemon`): killed after the
//!   grace period.
//!
//! - over Streamable HTTP: a 401, an answer over `max_output_bytes`, a credential over
//!   plain http to a non-loopback address, a metadata address; JSON and SSE answers,
//!   a session id and the protocol version header required by the server; a stream
//!   that never ends after its answer (`sse-endless`): left at the answer.
//!
//! Not tried here: a helper that leaves the group (`setsid`); reaping those is the
//! child-subreaper's work in `sys/child.rs`.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde_json::{json, Map, Value};

use super::*;
use crate::policy::Policy;

mod cut;
mod http;
mod misbehave;
mod real;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn misbehave() -> String {
    root().join("tests/support/upstreams/misbehave.py").display().to_string()
}

fn python() -> String {
    // The tests' own interpreter, by absolute path: the child's PATH is sp's.
    for p in ["/usr/bin/python3", "/usr/local/bin/python3"] {
        if Path::new(p).exists() {
            return p.into();
        }
    }
    "python3".into()
}

/// A fixture installed by `make upstreams`, or a loud skip; under CI (`CI` set, as
/// `.ci/run` sets it) a missing fixture fails the test: `make test` installs them.
fn installed(path: &Path) -> bool {
    if path.exists() {
        return true;
    }
    assert!(crate::sys::env_var("CI").is_none(), "{} is not installed under CI: `make test` runs `make upstreams` first", path.display());
    eprintln!("SKIPPED: {} is not installed; run `make upstreams` (tests/upstreams/)", path.display());
    false
}

/// What the test upstreams must read beyond the system's directories (they start
/// confined, as every command upstream does by default): this checkout (the fixtures,
/// node_modules, the venv) and the interpreter a venv was made from.
pub(super) fn test_read_paths() -> Vec<String> {
    let mut read = vec![root().display().to_string()];
    let cfg = std::fs::read_to_string(root().join(".venv-upstreams/pyvenv.cfg")).unwrap_or_default();
    let home = cfg.lines().find_map(|l| l.strip_prefix("home = "));
    read.extend(home.and_then(|h| Path::new(h.trim()).parent()).map(|p| p.display().to_string()));
    read
}

fn policy(mut upstreams: Value, extra: Value) -> Policy {
    // Confined as by default, reading what the fixtures need, unless the test says.
    for def in upstreams.as_object_mut().into_iter().flat_map(|m| m.values_mut()) {
        if def.get("command").is_some() && def.get("sandbox").is_none() {
            def["sandbox"] = json!({"read": test_read_paths()});
        }
    }
    let mut doc = json!({"upstreams": upstreams});
    if let (Value::Object(d), Value::Object(e)) = (&mut doc, extra) {
        d.extend(e);
    }
    Policy::from_text(&doc.to_string(), Path::new("test.json")).unwrap()
}

fn one(command: Vec<String>, more: Value) -> Policy {
    let mut def = json!({"command": command, "tools": {"allow": ["*"]}, "startup_timeout_s": 20});
    if let (Value::Object(d), Value::Object(m)) = (&mut def, more) {
        d.extend(m);
    }
    policy(json!({"m": def}), json!({}))
}

fn mis(mode: &str, more: Value) -> (Upstreams, Policy) {
    let p = one(vec![python(), misbehave(), mode.into()], more);
    (Upstreams::new(&p), p)
}

fn args(v: Value) -> Map<String, Value> {
    v.as_object().unwrap().clone()
}

fn route(ups: &mut Upstreams, p: &Policy, exposed: &str, a: &Map<String, Value>) -> Route {
    let upstream = names::upstream_of(exposed).unwrap();
    ups.list(upstream, &mut Vault::new()).unwrap();
    authorize(&p.upstreams, ups.tables(), exposed, a).unwrap()
}

fn call(ups: &mut Upstreams, p: &Policy, exposed: &str, a: Value) -> Result<UpstreamCall, UpstreamError> {
    let a = args(a);
    let r = route(ups, p, exposed, &a);
    ups.call(&r, a, None, &Cancel::new(), &mut |_| {}, &mut Vault::new())
}

fn text(c: &UpstreamCall) -> &str {
    c.result.content[0]["text"].as_str().unwrap()
}

/// Waits (with a deadline) for the evidence that no process of the group is left.
fn assert_group_gone(group: i32) {
    let pid = rustix::process::Pid::from_raw(group).unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    while rustix::process::test_kill_process_group(pid).is_ok() {
        assert!(Instant::now() < deadline, "process group {group} still has a process");
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn group(ups: &Upstreams, name: &str) -> i32 {
    ups.process_group(name).expect("running")
}

fn broken(why: &str) -> UpstreamError {
    UpstreamError::Broken { upstream: "m".into(), why: why.into() }
}

/// A file credential (owner-only, as the Vault demands) holding `secret`.
fn secret_file(dir: &Path, secret: &str) -> String {
    use std::os::unix::fs::PermissionsExt;
    let path = dir.join("secret");
    std::fs::write(&path, secret).unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).unwrap();
    path.display().to_string()
}
