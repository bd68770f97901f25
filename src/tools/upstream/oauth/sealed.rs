//! The token store's bytes encrypted with `systemd-creds` (issue 33 §2,
//! `auth.oauth.store`): what [`store`](super::store) writes and reads when encryption
//! applies. Only the bytes change; the lock, the mode checks and the atomic rename stay.
//!
//! ```text
//! write: JSON ──stdin──> /usr/bin/systemd-creds encrypt --name=sp-oauth --with-key=host - - ──stdout──> blob
//!        blob ──decrypt──> JSON again? (a blob that could not be read back is never written)
//!        file = MAGIC "sp-oauth systemd-creds 1\n" + blob (base64 text)
//! read:  MAGIC… ──stdin──> systemd-creds decrypt --name=sp-oauth - - ──stdout──> JSON
//!        "{…" or empty ──> plain JSON as before (read in every mode: an upgrade loses
//!        nothing; rewritten encrypted at the next write when encryption applies)
//!        anything else ──> corrupt
//! ```
//!
//! Decisions:
//! - The program is at a fixed path, [`PROGRAM`]; PATH is never searched (a PATH entry
//!   the agent's launcher chose must not see the tokens).
//! - `--with-key=host`: the host key, `/var/lib/systemd/credential.secret` (root only
//!   before systemd 256; a TPM2 is not asked for, so a store does not fail on a host
//!   whose TPM is busy or absent). A blob is bound to this host's key.
//! - `--name=sp-oauth`: the credential's name is inside the encrypted blob and checked
//!   on decryption, so another credential's blob cannot stand in for the store.
//! - It starts through the launcher like every child of `sp` (`sys/confine.rs`: it dies
//!   with `sp`), in a process group of its own (`sys::Child`), with an empty
//!   environment; the plaintext goes on its stdin, the result comes on its stdout (never
//!   argv, never a temporary file), both at most `MAX_FILE_BYTES`, within [`DEADLINE`].
//!   Its stderr is read at most 4 KiB and shown only as its last line, visible ASCII,
//!   at most 200 characters; systemd-creds never writes the plaintext there.
//! - Test hook, documented in sp(1): `SP_TEST_SYSTEMD_CREDS=missing` makes `sp` behave
//!   as if the program were not installed. It can only take encryption away (`"auto"`
//!   then writes the plain file, `"systemd-creds"` then fails), never point elsewhere.

use std::time::Duration;

use zeroize::Zeroizing;

use crate::sys::{self, RunError};

/// The only place `systemd-creds` is run from.
pub(crate) const PROGRAM: &str = "/usr/bin/systemd-creds";
/// The credential name bound into each blob.
pub(crate) const NAME: &str = "sp-oauth";
/// The first bytes of an encrypted store.
pub(crate) const MAGIC: &[u8] = b"sp-oauth systemd-creds 1\n";
/// How long one run may take.
pub(crate) const DEADLINE: Duration = Duration::from_secs(15);
/// The environment variable that hides the program (tests).
pub(crate) const TEST_HOOK: &str = "SP_TEST_SYSTEMD_CREDS";

/// Whether the program is there to run (and the test hook does not hide it).
pub(crate) fn available() -> bool {
    available_with(sys::env_var(TEST_HOOK))
}

/// [`available`], with the test hook's value given (`sp check` reads its environment
/// through a function).
pub(crate) fn available_with(hook: Option<std::ffi::OsString>) -> bool {
    if hook.is_some_and(|v| v == "missing") {
        return false;
    }
    sys::resolve_program(PROGRAM, None).is_ok()
}

/// Whether `bytes` are an encrypted store.
pub(crate) fn is_sealed(bytes: &[u8]) -> bool {
    bytes.starts_with(MAGIC)
}

/// The store's plaintext `plain` encrypted and read back, with [`MAGIC`] in front.
pub(crate) fn seal(plain: &[u8], max: u64) -> Result<Zeroizing<Vec<u8>>, String> {
    if !available() {
        return Err(format!("{PROGRAM} is not there"));
    }
    let blob = run("encrypt", &["encrypt", &format!("--name={NAME}"), "--with-key=host", "-", "-"], plain, max)?;
    // Read back at once: a blob that this host cannot decrypt would lose the tokens.
    if run("decrypt", &["decrypt", &format!("--name={NAME}"), "-", "-"], &blob, max)?.as_slice() != plain {
        return Err("systemd-creds decrypt did not give back what was encrypted".into());
    }
    let mut out = Zeroizing::new(Vec::with_capacity(MAGIC.len() + blob.len()));
    out.extend_from_slice(MAGIC);
    out.extend_from_slice(&blob);
    if out.len() as u64 > max {
        return Err(format!("the encrypted store would be larger than {max} bytes"));
    }
    Ok(out)
}

/// The plaintext of an encrypted store (`bytes` begin with [`MAGIC`]).
pub(crate) fn open(bytes: &[u8], max: u64) -> Result<Zeroizing<Vec<u8>>, String> {
    let blob = bytes.strip_prefix(MAGIC).ok_or("it does not begin as an encrypted store")?;
    if !available() {
        return Err(format!("it is encrypted with systemd-creds and {PROGRAM} is not there"));
    }
    run("decrypt", &["decrypt", &format!("--name={NAME}"), "-", "-"], blob, max)
        .map_err(|why| format!("it cannot be decrypted (tampered with, or from another host or key): {why}"))
}

/// Runs `systemd-creds ARGS` with `input` on stdin: its stdout (at most `max` bytes),
/// or why not (never a byte of the input or the output).
fn run(what: &str, args: &[&str], input: &[u8], max: u64) -> Result<Zeroizing<Vec<u8>>, String> {
    let fail = |why: String| format!("systemd-creds {what}: {why}");
    let mut cmd = sys::launcher_command(PROGRAM, None, &sys::Plan::default()).map_err(|e| fail(format!("cannot start {PROGRAM}: {e}")))?;
    cmd.args(args).env_clear();
    let ran = sys::run_bounded(&mut cmd, Some(Zeroizing::new(input.to_vec())), max, 4096, DEADLINE).map_err(|e| match e {
        RunError::Spawn(e) => fail(format!("cannot start {PROGRAM}: {}", sys::io_reason(&e))),
        RunError::Pipes => fail("its pipes were not set up".into()),
        RunError::TimedOut => fail(format!("no answer within {} s", DEADLINE.as_secs())),
        RunError::Read(e) => fail(format!("its output could not be read: {}", sys::io_reason(&e))),
        RunError::OutputLate => fail(format!("its output did not end within {} s", DEADLINE.as_secs())),
    })?;
    if !ran.status.success() {
        let said = last_line(&ran.stderr);
        let said = if said.is_empty() { String::new() } else { format!(": {said}") };
        return Err(fail(format!("failed ({}){said}", ran.status)));
    }
    if ran.stdout.len() as u64 > max {
        return Err(fail(format!("printed more than {max} bytes")));
    }
    if ran.stdout.is_empty() {
        return Err(fail("printed nothing".into()));
    }
    Ok(ran.stdout)
}

/// The last non-empty line of `stderr`, visible ASCII and spaces only, at most 200
/// characters: what systemd-creds says went wrong.
pub(crate) fn last_line(stderr: &[u8]) -> String {
    let text = String::from_utf8_lossy(stderr);
    let line = text.lines().map(str::trim).rfind(|l| !l.is_empty()).unwrap_or("");
    line.chars().map(|c| if c.is_ascii_graphic() || c == ' ' { c } else { '?' }).take(200).collect()
}
