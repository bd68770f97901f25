//! The transfer executor: SFTP (libssh2 through the `ssh2` crate) on the session
//! `ssh_exec` keeps for the host (`exec.rs`), or a new one made the same way (host key
//! first, then authentication: `connect.rs`).
//!
//! ```text
//!  get: realpath(path) ── matches a files.read rule? ── no ──> SP_DENIED (a symlink out)
//!       lstat(real): a regular file, size <= files.max_bytes and
//!       <= ssh.max_output_bytes (the answer's limit)? ── no ──> SP_DENIED
//!       open(real), read at most max_bytes + 1 ── more came ──> SP_DENIED
//!       SHA-256 of the bytes; (run.rs) scrub, then text or base64 within ssh.max_output_bytes
//!  put: realpath(dirname) + "/" + basename ── matches a files.write rule? ── no ──> SP_DENIED
//!       open DIR/.NAME.sp-NONCE with O_CREAT|O_EXCL (never follows a symlink), write,
//!       fsetstat(mode), close ── rename onto NAME ── exists: overwrite? unlink NAME, rename
//! ```
//!
//! Decisions (`sp(1)`, SSH FILE TRANSFER, repeats them):
//! - Symlinks: the agent's path must match a rule, and so must what the server
//!   resolves it to, so a link inside an allowed directory cannot lead out of it. For a
//!   put only the directory is resolved: the file itself is never opened by its name,
//!   only created under a fresh temporary name and renamed over it, so a symlink at the
//!   target is replaced, not written through. What stays open is a race against
//!   someone who can change the remote directories between `realpath` and `open`
//!   (SFTP has no `openat`); they hold that account already.
//! - Atomic write: OpenSSH's SFTP (version 3) rename refuses an existing target and
//!   the `ssh2` crate binds no `posix-rename@openssh.com`, so replacing a file
//!   (`overwrite: true`) is an unlink then a rename: readers see the old file, no
//!   file for a moment, then the whole new one, never a partial one.
//! - Mode: set on the open handle after creation (the server's umask would otherwise
//!   narrow the bits given at open).
//! - The session is the host's kept one; a kept session that cannot start the SFTP
//!   subsystem is dropped and one new connection is tried, as `ssh_exec` does.

use std::io::{Read, Write};
use std::path::Path;
use std::time::Instant;

use sha2::{Digest, Sha256};
use ssh2::{FileStat, OpenFlags, OpenType, Sftp};

use crate::gate::authorize::Authorized;
use crate::gate::exec::Cancel;
use crate::gate::vault::Vault;
use crate::policy::ssh::files::{check_path, FileRules};
use crate::sys::hex;
use crate::tools::ssh::connect::connect;
use crate::tools::ssh::exec::SshExecutor;
use crate::tools::ssh::libssh2::ms;
use crate::tools::ssh::result::SshError;

use super::authorize::{Op, TransferAction};
use super::result::{TransferError, TransferOutcome};

/// Bytes per SFTP read or write call.
const CHUNK: usize = 256 * 1024;

impl SshExecutor {
    /// Runs one authorized transfer (module docs).
    pub(crate) fn transfer(&mut self, authorized: &Authorized<TransferAction>, vault: &mut Vault, cancel: &Cancel) -> Result<TransferOutcome, TransferError> {
        let t = authorized.action();
        if cancel.is_cancelled() {
            return Err(TransferError::Cancelled);
        }
        let started = Instant::now();
        let (sftp, fingerprint) = self.sftp(t, vault, cancel)?;
        let mut out = match &t.op {
            Op::Get => get(&sftp, t, cancel)?,
            Op::Put { content, overwrite } => put(&sftp, t, content, *overwrite, cancel)?,
        };
        out.host = t.conn.host.clone();
        out.host_key_fingerprint = fingerprint;
        out.duration_ms = started.elapsed().as_millis() as u64;
        Ok(out)
    }

    /// The SFTP subsystem on the host's kept session, or on a new one.
    fn sftp(&mut self, t: &TransferAction, vault: &mut Vault, cancel: &Cancel) -> Result<(Sftp, String), TransferError> {
        let a = &t.conn;
        if let Some(conn) = self.sessions.get(&a.host) {
            conn.session.set_blocking(true);
            conn.session.set_timeout(ms(a.connect_timeout));
            match conn.session.sftp() {
                Ok(sftp) => {
                    conn.session.set_timeout(ms(a.timeout));
                    return Ok((sftp, conn.fingerprint.clone()));
                }
                Err(e) => {
                    log::info!("ssh {}: the kept session cannot start SFTP ({}); reconnecting once", a.host, e.message());
                    self.sessions.remove(&a.host);
                }
            }
        }
        let conn = connect(a, vault, cancel).map_err(|e| if cancel.is_cancelled() { TransferError::Cancelled } else { TransferError::Ssh(e) })?;
        let sftp = conn
            .session
            .sftp()
            .map_err(|e| TransferError::Ssh(SshError::Upstream(format!("{}: the SFTP subsystem is not available: {}", a.target(false), e.message()))))?;
        conn.session.set_timeout(ms(a.timeout));
        let fingerprint = conn.fingerprint.clone();
        self.sessions.insert(a.host.clone(), conn);
        Ok((sftp, fingerprint))
    }
}

fn failed(t: &TransferAction, what: &str, path: &str, e: &ssh2::Error) -> TransferError {
    let why = match e.code() {
        ssh2::ErrorCode::SFTP(2) => "no such file or directory".to_owned(),
        ssh2::ErrorCode::SFTP(3) => "permission denied".to_owned(),
        _ => e.message().to_owned(),
    };
    TransferError::Sftp(format!("{}: sftp {what} {path:?}: {why}", t.conn.target(false)))
}

/// The server's resolution of `path`, which must be canonical and match a rule.
fn resolve(sftp: &Sftp, t: &TransferAction, path: &str) -> Result<String, TransferError> {
    let real = sftp.realpath(Path::new(path)).map_err(|e| failed(t, "realpath", path, &e))?;
    let real = real
        .to_str()
        .map(str::to_owned)
        .ok_or_else(|| TransferError::Refused(format!("ssh {}: {path:?} resolves to a path that is not UTF-8", t.conn.host)))?;
    Ok(real)
}

fn allowed(t: &TransferAction, asked: &str, real: &str) -> Result<(), TransferError> {
    if check_path(real).is_ok() && FileRules::find(&t.rules, real).is_some() {
        return Ok(());
    }
    Err(TransferError::Refused(format!(
        "ssh {}: {asked:?} resolves to {real:?} on the server, which matches none of the host's files.{} patterns (a symlink leads out of them)",
        t.conn.host,
        t.direction().key()
    )))
}

fn too_large(t: &TransferAction, path: &str, size: u64) -> TransferError {
    TransferError::TooLarge(format!("ssh {}: {path:?} is {size} bytes, above the host's files.max_bytes ({})", t.conn.host, t.max_bytes))
}

fn get(sftp: &Sftp, t: &TransferAction, cancel: &Cancel) -> Result<TransferOutcome, TransferError> {
    let real = resolve(sftp, t, &t.path)?;
    allowed(t, &t.path, &real)?;
    let stat = sftp.lstat(Path::new(&real)).map_err(|e| failed(t, "stat", &real, &e))?;
    if !stat.is_file() {
        return Err(TransferError::Refused(format!("ssh {}: {real:?} is not a regular file", t.conn.host)));
    }
    if let Some(size) = stat.size
        && size > t.max_bytes
    {
        return Err(too_large(t, &real, size));
    }
    // Its content could not be answered even as text (base64 only grows it): refused
    // before a byte is read.
    if let Some(size) = stat.size
        && size > t.max_response_bytes
    {
        return Err(TransferError::TooLarge(format!(
            "ssh {}: {real:?} is {size} bytes, above the response limit ssh.max_output_bytes ({}) even as text; nothing was read",
            t.conn.host, t.max_response_bytes
        )));
    }
    let mut file = sftp.open(Path::new(&real)).map_err(|e| failed(t, "open", &real, &e))?;
    // What was opened, not what was looked at: a FIFO or device swapped in meanwhile.
    if !file.stat().map_err(|e| failed(t, "fstat", &real, &e))?.is_file() {
        return Err(TransferError::Refused(format!("ssh {}: {real:?} is not a regular file", t.conn.host)));
    }
    let mut content = Vec::new();
    let mut buf = vec![0u8; CHUNK];
    loop {
        if cancel.is_cancelled() {
            return Err(TransferError::Cancelled);
        }
        let n = file.read(&mut buf).map_err(|e| TransferError::Sftp(format!("ssh {}: sftp read {real:?}: {e}", t.conn.host)))?;
        if n == 0 {
            break;
        }
        content.extend_from_slice(&buf[..n]);
        // A file that grew past the limit since the stat.
        if content.len() as u64 > t.max_bytes {
            return Err(too_large(t, &real, content.len() as u64));
        }
    }
    let _ = file.close();
    Ok(TransferOutcome { path: real, bytes: content.len() as u64, sha256: hex(&Sha256::digest(&content)), content, ..TransferOutcome::default() })
}

/// `DIR/.NAME.sp-NONCE`: hidden, in the target's directory (a rename never crosses a
/// file system), never an existing name.
fn temp_name(dir: &str, name: &str) -> String {
    let nonce = crate::tools::ssh::kill::Marker::new().0;
    let dir = if dir == "/" { "" } else { dir };
    format!("{dir}/.{name}.sp-{nonce}")
}

fn put(sftp: &Sftp, t: &TransferAction, content: &[u8], overwrite: bool, cancel: &Cancel) -> Result<TransferOutcome, TransferError> {
    // check_path held at parsing: absolute, at least one component after the root.
    let (dir, name) = t.path.rsplit_once('/').unwrap_or(("", &t.path));
    let dir = if dir.is_empty() { "/" } else { dir };
    let real_dir = resolve(sftp, t, dir)?;
    let target = if real_dir == "/" { format!("/{name}") } else { format!("{real_dir}/{name}") };
    allowed(t, &t.path, &target)?;
    let temp = temp_name(&real_dir, name);
    let flags = OpenFlags::WRITE | OpenFlags::CREATE | OpenFlags::EXCLUSIVE;
    let mut file = sftp.open_mode(Path::new(&temp), flags, 0o600, OpenType::File).map_err(|e| failed(t, "create", &temp, &e))?;
    let written = (|| {
        for chunk in content.chunks(CHUNK) {
            if cancel.is_cancelled() {
                return Err(TransferError::Cancelled);
            }
            file.write_all(chunk).map_err(|e| TransferError::Sftp(format!("ssh {}: sftp write {temp:?}: {e}", t.conn.host)))?;
        }
        let perm = FileStat { size: None, uid: None, gid: None, perm: Some(t.mode), atime: None, mtime: None };
        file.setstat(perm).map_err(|e| failed(t, "chmod", &temp, &e))?;
        // fsync@openssh.com where the server has it; not every server does.
        let _ = file.fsync();
        file.close().map_err(|e| failed(t, "close", &temp, &e))?;
        place(sftp, t, &temp, &target, overwrite)
    })();
    match written {
        Ok(replaced) => Ok(TransferOutcome {
            path: target,
            bytes: content.len() as u64,
            sha256: hex(&Sha256::digest(content)),
            mode: t.mode,
            replaced,
            ..TransferOutcome::default()
        }),
        Err(e) => {
            let _ = sftp.unlink(Path::new(&temp));
            Err(e)
        }
    }
}

/// Renames `temp` onto `target`; `Ok(true)` when it replaced a file.
fn place(sftp: &Sftp, t: &TransferAction, temp: &str, target: &str, overwrite: bool) -> Result<bool, TransferError> {
    let (from, to) = (Path::new(temp), Path::new(target));
    let first = match sftp.rename(from, to, None) {
        Ok(()) => return Ok(false),
        Err(e) => e,
    };
    let Ok(existing) = sftp.lstat(to) else { return Err(failed(t, "rename", target, &first)) };
    if existing.is_dir() {
        return Err(TransferError::Refused(format!("ssh {}: {target:?} is a directory", t.conn.host)));
    }
    if !overwrite {
        return Err(TransferError::Exists(format!("ssh {}: {target:?} exists (overwrite: true replaces it)", t.conn.host)));
    }
    // A symlink or a file: its directory entry goes, nothing is written through it.
    sftp.unlink(to).map_err(|e| failed(t, "unlink", target, &e))?;
    sftp.rename(from, to, None).map_err(|e| failed(t, "rename", target, &e))?;
    Ok(true)
}
