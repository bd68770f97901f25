//! A small private state file that `sp` keeps whole and rewrites whole (the approval
//! grants, the upstream tool pins): [`locked`] opens it (created `0600`) under its
//! exclusive lock, once its name is known to still point at the locked file;
//! [`replace`] writes a new private file beside it, syncs it, renames it over the name
//! and syncs the directory; [`remove_stale_temps`] clears what a writer that died left.
//!
//! The temporary name is `.NAME.TAG.tmp` beside the file, `TAG` 16 hex digits (the
//! caller's session id), so a stale one is recognised and nothing else is touched.

use std::fs::File;
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::time::Duration;

use super::{lock_exclusive, open, os_reason, Access, LockError, Rules, SysError};

/// Why [`locked`] could not hand over the locked file.
#[derive(Debug)]
pub(crate) enum LockedError {
    /// Opening it (its rules: owner, mode, type, size).
    File(SysError),
    /// It has more than one name: a hard link elsewhere would be rewritten too.
    HardLinked { links: u64 },
    /// Another process held the lock past the wait, or the name kept moving (every
    /// round of re-opening means another writer finished).
    Busy,
    /// The lock failed for another reason.
    Lock(LockError),
}

/// Runs `f` with the file at `path` open (created `0600` when missing, opened under
/// `rules`) under its exclusive lock (waiting at most `wait`), once the name still
/// points at the locked file: a writer that renamed a new file in between our open and
/// our lock holds no lock on that one, so it is opened again (at most 50 times).
pub(crate) fn locked<T>(path: &Path, rules: Rules, wait: Duration, f: impl FnOnce(&File) -> T) -> Result<T, LockedError> {
    use std::os::unix::fs::MetadataExt;
    for _ in 0..50 {
        let (file, info) = open(path, Access::AppendCreate { mode: 0o600 }, rules).map_err(LockedError::File)?;
        if info.nlink > 1 {
            return Err(LockedError::HardLinked { links: info.nlink });
        }
        let _lock = lock_exclusive(&file, wait).map_err(|e| match e {
            LockError::Busy { .. } => LockedError::Busy,
            e => LockedError::Lock(e),
        })?;
        match std::fs::symlink_metadata(path) {
            Ok(m) if (m.dev(), m.ino()) == (info.dev, info.ino) => {}
            _ => continue,
        }
        return Ok(f(&file));
    }
    Err(LockedError::Busy)
}

/// `.NAME.` of the file at `path`: the start of its temporary names.
fn temp_prefix(path: &Path) -> String {
    format!(".{}.", path.file_name().map_or_else(String::new, |n| n.to_string_lossy().into_owned()))
}

/// The temporary name `tag` (16 hex digits) gives a replacement of `path`.
pub(crate) fn temp_path(path: &Path, tag: &str) -> PathBuf {
    path.with_file_name(format!("{}{tag}.tmp", temp_prefix(path)))
}

/// Removes the replacements of `path` a writer that died left behind. Only under the
/// lock [`locked`] takes: a live writer creates its temporary file while holding it and
/// renames it before letting go, so any such file seen now is stale.
pub(crate) fn remove_stale_temps(path: &Path) {
    let Some(dir) = path.parent() else { return };
    let Ok(entries) = std::fs::read_dir(dir) else { return };
    let prefix = temp_prefix(path);
    for e in entries.flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        let tag = name.strip_prefix(&prefix).and_then(|rest| rest.strip_suffix(".tmp"));
        if tag.is_some_and(|t| t.len() == 16 && t.bytes().all(|b| b.is_ascii_hexdigit())) {
            let _ = std::fs::remove_file(e.path());
        }
    }
}

/// Writes `bytes` to a new private file beside `path` (named by `tag`), syncs it,
/// renames it over `path`, and syncs the directory (the rename must survive a crash as
/// well as the bytes). The error is the reason, for the caller's message.
pub(crate) fn replace(path: &Path, tag: &str, bytes: &[u8]) -> Result<(), String> {
    use rustix::fs::{Mode, OFlags};
    let dir = path.parent().filter(|d| !d.as_os_str().is_empty()).unwrap_or(Path::new("."));
    let temp = temp_path(path, tag);
    let flags = OFlags::WRONLY | OFlags::CREATE | OFlags::EXCL | OFlags::NOFOLLOW | OFlags::CLOEXEC;
    let fd = rustix::fs::open(&temp, flags, Mode::from_raw_mode(0o600)).map_err(|e| format!("cannot create {}: {e}", temp.display()))?;
    let mut file = File::from(fd);
    let written = file.write_all(bytes).and_then(|()| file.sync_all()).and_then(|()| std::fs::rename(&temp, path));
    if let Err(e) = written {
        let _ = std::fs::remove_file(&temp);
        return Err(os_reason(&e));
    }
    File::open(dir).and_then(|d| d.sync_all()).map_err(|e| format!("cannot sync {}: {}", dir.display(), os_reason(&e)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_state_file_is_locked_replaced_whole_and_its_stale_temps_cleared() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("state.json");
        let rules = Rules::owned(0o077, 1 << 20);
        // Created 0600 and empty on first use; replaced whole under the lock.
        let read = locked(&path, rules, Duration::from_secs(5), |f| super::super::read_capped(f, 1 << 20).unwrap()).unwrap();
        assert!(read.is_empty());
        let stale = temp_path(&path, "0123456789abcdef");
        let other = dir.path().join(".state.json.notours.tmp");
        std::fs::write(&stale, "left by a dead writer").unwrap();
        std::fs::write(&other, "not a temp name of ours").unwrap();
        locked(&path, rules, Duration::from_secs(5), |_| {
            remove_stale_temps(&path);
            replace(&path, "fedcba9876543210", b"{\"v\":1}\n")
        })
        .unwrap()
        .unwrap();
        assert_eq!(std::fs::read(&path).unwrap(), b"{\"v\":1}\n");
        assert!(!stale.exists() && other.exists() && !temp_path(&path, "fedcba9876543210").exists());
        use std::os::unix::fs::PermissionsExt as _;
        assert_eq!(std::fs::metadata(&path).unwrap().permissions().mode() & 0o777, 0o600);
        // A second name for it is refused: a write would change the other file too.
        std::fs::hard_link(&path, dir.path().join("other-name")).unwrap();
        assert!(matches!(locked(&path, rules, Duration::from_secs(5), |_| ()), Err(LockedError::HardLinked { links: 2 })));
    }
}
