//! Files named by the operator, opened so that nothing can block and nothing is trusted
//! that others could have written.
//!
//! [`open`] is the one way `sp` opens such a file (a credential `file` or `systemd`
//! source, an SSH key, passphrase or password file, `known_hosts`, `ca_file`, the
//! policy):
//!
//! ```text
//!  lstat ── symlink ───────────> Symlink        (nothing opened)
//!    │  ─── FIFO/socket/device ─> NotRegular     (nothing opened: no side effect of
//!    │                                            opening a device, no wait on a FIFO)
//!  open(O_RDONLY|O_NONBLOCK|O_NOFOLLOW|O_CLOEXEC|O_NOCTTY)
//!    │     a FIFO swapped in after the lstat: O_NONBLOCK makes the open return at once
//!  fstat on the descriptor ── not regular / owner / mode / size ──> refused
//!    │
//!  read, at most max_bytes + 1 (a longer file is refused, not cut)
//! ```
//!
//! Every check runs on the opened descriptor, so a file swapped between a check and the
//! read is the file checked. A read from a regular file never waits for a writer; what
//! can still hang is a file system that does not answer (a dead NFS or FUSE mount), in
//! `open(2)` or `read(2)` alike, and no flag prevents that. [`read_within`] therefore
//! does the open and the read on a helper thread and gives up after a timeout: the
//! caller (one call of the session) fails with a clear reason and the session answers
//! the next request; the stuck thread is left to the kernel. A thread per read cost a
//! proxied call a fifth of its time, so once a path's file was found on a
//! disk or in memory (`fstatfs(2)` on the descriptor: [`LOCAL_FILE_SYSTEMS`]), later
//! reads of that path run on the caller's thread, the read itself only after `fstatfs`
//! says the descriptor is still on such a file system. What that leaves: a mount of a
//! network file system over that path during the session, that then stops answering,
//! hangs the call in `open(2)` (the session still answers control messages meanwhile,
//! `mcp/control`). Files read at start-up
//! (the policy, `http.ca_file`) are read with [`read`] on the main thread: there is no
//! session to keep answering yet, the `stat`s of their directories already ran on that
//! thread, and a helper thread cost every start.
//!
//! [`check_dirs`] is the StrictModes rule for the policy: every directory above a file
//! must be owned by root or the effective user, and the directory holding it must not
//! be writable by group or others; directories further up may be, with the sticky bit
//! (`/tmp`), where nobody can rename or remove what another user owns.

use std::fmt;
use std::fs::File;
use std::io::Read;
use std::os::fd::AsFd;
use std::path::{Path, PathBuf};
use std::time::Duration;

use rustix::fs::{FileType, Mode, OFlags};
use zeroize::Zeroizing;

/// How long a call waits for an operator-named file to be opened and read (see the
/// module docs: only a file system that does not answer can take this long).
pub(crate) const READ_TIMEOUT: Duration = Duration::from_secs(5);

/// What a file must satisfy besides being a regular file that is not a symbolic link.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Rules {
    /// Permission bits that must be clear (e.g. `0o077`: no group or other access).
    pub forbidden_mode: u32,
    /// Owned by root or the effective user.
    pub owner: bool,
    /// Longer files are refused.
    pub max_bytes: u64,
    /// Follow symbolic links: the file they reach must be a regular file before it is
    /// opened (`stat`), the descriptor opened must be that file (device and inode: a
    /// file swapped in between is refused), and the checks apply to it. (Creating
    /// opens resolve the path first, `realpath`, and open the result with
    /// `O_NOFOLLOW`.) Without it a symbolic link is refused.
    pub follow: bool,
}

impl Rules {
    /// Any owner, any mode.
    pub(crate) const fn any(max_bytes: u64) -> Rules {
        Rules { forbidden_mode: 0, owner: false, max_bytes, follow: false }
    }

    /// Owned by root or the effective user, with none of `forbidden_mode`.
    pub(crate) const fn owned(forbidden_mode: u32, max_bytes: u64) -> Rules {
        Rules { forbidden_mode, owner: true, max_bytes, follow: false }
    }

    /// The same rules for the file a symbolic link reaches ([`Rules::follow`]).
    pub(crate) const fn following(self) -> Rules {
        Rules { follow: true, ..self }
    }
}

/// Why a file was refused. Names the reason, never the content; the caller adds the path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum SysError {
    Missing,
    Denied,
    Symlink,
    /// A FIFO, socket, device or directory: `kind` names it.
    NotRegular {
        kind: &'static str,
    },
    TooOpen {
        mode: u32,
        forbidden: u32,
    },
    WrongOwner {
        uid: u32,
    },
    TooLarge {
        max: u64,
    },
    TimedOut {
        after: Duration,
    },
    Io {
        why: String,
    },
}

impl fmt::Display for SysError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SysError::Missing => f.write_str("no such file"),
            SysError::Denied => f.write_str("permission denied"),
            SysError::Symlink => f.write_str("is a symbolic link (refused: name the file itself)"),
            SysError::NotRegular { kind } => write!(f, "is a {kind}, not a regular file (refused without opening it)"),
            SysError::TooOpen { mode, forbidden } => {
                let who = if forbidden & 0o070 != 0 { "group or others" } else { "others" };
                let what = if forbidden & 0o044 != 0 { "access" } else { "write" };
                write!(f, "permissions {mode:04o} are too open (must not let {who} {what} it)")
            }
            SysError::WrongOwner { uid } => write!(f, "is owned by uid {uid}, neither root nor the user sp runs as (uid {})", euid()),
            SysError::TooLarge { max } => write!(f, "larger than {max} bytes"),
            SysError::TimedOut { after } => write!(f, "could not be read within {}s (a file system that does not answer?)", after.as_secs()),
            SysError::Io { why } => f.write_str(why),
        }
    }
}

impl std::error::Error for SysError {}

/// What `fstat` said about an opened file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Info {
    pub mode: u32,
    pub uid: u32,
    pub size: u64,
    pub nlink: u64,
    pub dev: u64,
    pub ino: u64,
}

pub(crate) fn euid() -> u32 {
    rustix::process::geteuid().as_raw()
}

/// A file type's name for messages.
pub(crate) fn kind_name(mode: u32) -> &'static str {
    match FileType::from_raw_mode(mode) {
        FileType::RegularFile => "regular file",
        FileType::Directory => "directory",
        FileType::Symlink => "symbolic link",
        FileType::Fifo => "FIFO (named pipe)",
        FileType::Socket => "socket",
        FileType::CharacterDevice => "character device",
        FileType::BlockDevice => "block device",
        FileType::Unknown => "file of unknown type",
    }
}

fn errno(e: rustix::io::Errno) -> SysError {
    match e {
        rustix::io::Errno::NOENT => SysError::Missing,
        rustix::io::Errno::ACCESS | rustix::io::Errno::PERM => SysError::Denied,
        rustix::io::Errno::LOOP => SysError::Symlink,
        e => SysError::Io { why: std::io::Error::from(e).kind().to_string() },
    }
}

fn io(e: &std::io::Error) -> SysError {
    match e.kind() {
        std::io::ErrorKind::NotFound => SysError::Missing,
        std::io::ErrorKind::PermissionDenied => SysError::Denied,
        k => SysError::Io { why: k.to_string() },
    }
}

/// Whether an `open` may create the file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Access {
    Read,
    /// Read and append, created with `mode` when missing (`known_hosts` under `accept-new`).
    AppendCreate {
        mode: u32,
    },
    /// Read and write anywhere, created with `mode` when missing (the rate limits' state
    /// file, rewritten in place under its lock: `gate/limits.rs`).
    ReadWriteCreate {
        mode: u32,
    },
}

/// Opens `path` as the module docs say and checks the open descriptor against `rules`.
pub(crate) fn open(path: &Path, access: Access, rules: Rules) -> Result<(File, Info), SysError> {
    if rules.follow && access == Access::Read {
        return open_following(path, rules);
    }
    let resolved;
    let path = if rules.follow {
        resolved = match std::fs::canonicalize(path) {
            Ok(p) => p,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound && matches!(access, Access::AppendCreate { .. } | Access::ReadWriteCreate { .. }) => {
                path.to_owned()
            }
            Err(e) => return Err(io(&e)),
        };
        resolved.as_path()
    } else {
        path
    };
    // Not opened at all when the name is not a regular file now: opening a device can
    // have effects (a tape rewinds, a watchdog arms), and a FIFO needs no open to refuse.
    match rustix::fs::lstat(path) {
        Ok(st) => match FileType::from_raw_mode(st.st_mode) {
            FileType::RegularFile => {}
            FileType::Symlink => return Err(SysError::Symlink),
            _ => return Err(SysError::NotRegular { kind: kind_name(st.st_mode) }),
        },
        Err(rustix::io::Errno::NOENT) if matches!(access, Access::AppendCreate { .. } | Access::ReadWriteCreate { .. }) => {}
        Err(e) => return Err(errno(e)),
    }
    let base = OFlags::NONBLOCK | OFlags::NOFOLLOW | OFlags::CLOEXEC | OFlags::NOCTTY;
    let (flags, mode) = match access {
        Access::Read => (OFlags::RDONLY | base, 0),
        Access::AppendCreate { mode } => (OFlags::RDWR | OFlags::APPEND | OFlags::CREATE | base, mode),
        Access::ReadWriteCreate { mode } => (OFlags::RDWR | OFlags::CREATE | base, mode),
    };
    let fd = rustix::fs::open(path, flags, Mode::from_raw_mode(mode as _)).map_err(errno)?;
    let info = check(&fd, rules)?;
    Ok((File::from(fd), info))
}

/// [`open`] for reading through symbolic links: `stat(2)` (links followed) refuses what
/// is not a regular file without opening it, the open follows the same links, and the
/// descriptor must be the file `stat` saw (device and inode), so a file swapped in
/// between is refused; then the checks of `rules` on the descriptor. Equivalent to
/// resolving the path first (`realpath`, a `readlink` per component) and opening the
/// result with `O_NOFOLLOW`, in three system calls (a secret is read per call).
fn open_following(path: &Path, rules: Rules) -> Result<(File, Info), SysError> {
    let st = rustix::fs::stat(path).map_err(errno)?;
    if FileType::from_raw_mode(st.st_mode) != FileType::RegularFile {
        return Err(SysError::NotRegular { kind: kind_name(st.st_mode) });
    }
    let flags = OFlags::RDONLY | OFlags::NONBLOCK | OFlags::CLOEXEC | OFlags::NOCTTY;
    let fd = rustix::fs::open(path, flags, Mode::empty()).map_err(errno)?;
    let info = check(&fd, rules)?;
    if (info.dev, info.ino) != (st.st_dev as u64, st.st_ino as u64) {
        return Err(SysError::Io { why: "was replaced while it was being opened".into() });
    }
    Ok((File::from(fd), info))
}

/// The checks of `rules` on an open descriptor.
pub(crate) fn check(fd: impl AsFd, rules: Rules) -> Result<Info, SysError> {
    let st = rustix::fs::fstat(fd).map_err(errno)?;
    let raw_mode = st.st_mode;
    if FileType::from_raw_mode(st.st_mode) != FileType::RegularFile {
        return Err(SysError::NotRegular { kind: kind_name(raw_mode) });
    }
    let info =
        Info { mode: raw_mode & 0o7777, uid: st.st_uid, size: st.st_size as u64, nlink: st.st_nlink as u64, dev: st.st_dev as u64, ino: st.st_ino as u64 };
    if rules.owner && info.uid != 0 && info.uid != euid() {
        return Err(SysError::WrongOwner { uid: info.uid });
    }
    if info.mode & rules.forbidden_mode != 0 {
        return Err(SysError::TooOpen { mode: info.mode, forbidden: rules.forbidden_mode });
    }
    if info.size > rules.max_bytes {
        return Err(SysError::TooLarge { max: rules.max_bytes });
    }
    Ok(info)
}

/// Reads what is left of `file`, refusing more than `max` bytes. The buffer is zeroed
/// when dropped (it may hold a secret), and it is sized from `fstat` first: growing it
/// while reading would leave copies of the first bytes in freed, unzeroed memory (and
/// take a `read` per doubling).
pub(crate) fn read_capped(file: &File, max: u64) -> Result<Zeroizing<Vec<u8>>, SysError> {
    let size = file.metadata().map(|m| m.len()).unwrap_or(0);
    read_sized(file, max, size)
}

/// [`read_capped`] for a file whose size is known already (its `fstat` by [`open`]).
fn read_sized(file: &File, max: u64, size: u64) -> Result<Zeroizing<Vec<u8>>, SysError> {
    // One more byte than the file holds, so the end is seen without growing.
    let mut bytes = Zeroizing::new(Vec::with_capacity(size.min(max) as usize + 1));
    file.take(max + 1).read_to_end(&mut bytes).map_err(|e| io(&e))?;
    if bytes.len() as u64 > max {
        return Err(SysError::TooLarge { max });
    }
    Ok(bytes)
}

/// [`open`] for reading, then [`read_capped`].
pub(crate) fn read(path: &Path, rules: Rules) -> Result<Zeroizing<Vec<u8>>, SysError> {
    let (file, info) = open(path, Access::Read, rules)?;
    read_sized(&file, rules.max_bytes, info.size)
}

/// [`read`], given up after `timeout` (module docs): on a helper thread, unless an
/// earlier read of `path` in this process found a regular file on a local file system
/// ([`LOCAL_FILE_SYSTEMS`]); then it is opened and checked on this thread, and read
/// here only if the descriptor is still on such a file system (else on a helper thread).
pub(crate) fn read_within(path: &Path, rules: Rules, timeout: Duration) -> Result<Zeroizing<Vec<u8>>, SysError> {
    if HERE.get() {
        let (file, info) = open(path, Access::Read, rules)?;
        let bytes = read_sized(&file, rules.max_bytes, info.size)?;
        if local::is_local(&file) {
            local::note(path.to_owned());
        }
        return Ok(bytes);
    }
    if local::known(path) {
        let (file, info) = open(path, Access::Read, rules)?;
        if local::is_local(&file) {
            return read_sized(&file, rules.max_bytes, info.size);
        }
        local::forget(path);
        return within(timeout, move || read_sized(&file, rules.max_bytes, info.size));
    }
    let owned = path.to_owned();
    within(timeout, move || {
        let (file, info) = open(&owned, Access::Read, rules)?;
        let bytes = read_sized(&file, rules.max_bytes, info.size)?;
        if local::is_local(&file) {
            local::note(owned);
        }
        Ok(bytes)
    })
}

thread_local! {
    /// Inside [`at_startup`]: [`read_within`] reads on the caller's thread.
    static HERE: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// Runs `f` with every [`read_within`] on this thread done here, without the helper
/// thread: for the checks before a session serves (`vault::check_static`), where there is
/// no session to keep answering yet, as for the policy file (module docs). A file read
/// here from a local file system is remembered as such (the first call reads it here too).
pub(crate) fn at_startup<T>(f: impl FnOnce() -> T) -> T {
    HERE.set(true);
    let t = f();
    HERE.set(false);
    t
}

/// `statfs(2)` types of the file systems whose files are read on the caller's thread
/// after a first read on a helper thread ([`read_within`]): disks and memory, never a
/// network or FUSE file system (NFS, CIFS, 9p, sshfs, ...), where `open(2)` or `read(2)`
/// can wait for a server that does not answer. ext2/3/4, XFS, Btrfs, tmpfs, ramfs,
/// overlayfs (containers), F2FS, ZFS, bcachefs, EROFS, SquashFS.
pub(crate) const LOCAL_FILE_SYSTEMS: [u64; 11] =
    [0xEF53, 0x5846_5342, 0x9123_683E, 0x0102_1994, 0x8584_58F6, 0x794C_7630, 0xF2F5_2010, 0x2FC1_2FC1, 0xCA45_1A4E, 0xE0F5_E1E2, 0x7371_7368];

/// The paths [`read_within`] reads on the caller's thread (module docs).
mod local {
    use std::fs::File;
    use std::path::{Path, PathBuf};
    use std::sync::Mutex;

    /// Paths read from a local file system, at most [`MAX`] (the policy names a few).
    static KNOWN: Mutex<Vec<PathBuf>> = Mutex::new(Vec::new());
    const MAX: usize = 64;

    fn known_paths() -> std::sync::MutexGuard<'static, Vec<PathBuf>> {
        KNOWN.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    pub(super) fn known(path: &Path) -> bool {
        known_paths().iter().any(|p| p == path)
    }

    pub(super) fn note(path: PathBuf) {
        let mut k = known_paths();
        if !k.contains(&path) && k.len() < MAX {
            k.push(path);
        }
    }

    pub(super) fn forget(path: &Path) {
        known_paths().retain(|p| p != path);
    }

    /// The open file lies on one of [`super::LOCAL_FILE_SYSTEMS`].
    #[allow(clippy::unnecessary_cast, reason = "f_type is i64 with glibc, u64 with musl")]
    pub(super) fn is_local(file: &File) -> bool {
        rustix::fs::fstatfs(file).is_ok_and(|st| super::LOCAL_FILE_SYSTEMS.contains(&((st.f_type as u64) & 0xFFFF_FFFF)))
    }
}

/// Runs `f` on a helper thread and waits at most `timeout` for its answer; a thread
/// still stuck after that is left behind (it holds nothing but its own descriptor).
fn within<T: Send + 'static>(timeout: Duration, f: impl FnOnce() -> Result<T, SysError> + Send + 'static) -> Result<T, SysError> {
    let (tx, rx) = std::sync::mpsc::channel();
    let spawned = std::thread::Builder::new().name("sp-read".into()).spawn(move || {
        let _ = tx.send(f());
    });
    if let Err(e) = spawned {
        return Err(io(&e));
    }
    rx.recv_timeout(timeout).unwrap_or(Err(SysError::TimedOut { after: timeout }))
}

/// For a program `sp` runs to decide something (the approver): whoever can write it
/// decides every approval, so it must be a regular file (symbolic links followed; `stat`
/// only, nothing opened) owned by root or the effective user and not writable by group
/// or others.
pub(crate) fn check_program(path: &Path) -> Result<(), SysError> {
    let st = rustix::fs::stat(path).map_err(errno)?;
    if FileType::from_raw_mode(st.st_mode) != FileType::RegularFile {
        return Err(SysError::NotRegular { kind: kind_name(st.st_mode) });
    }
    if st.st_uid != 0 && st.st_uid != euid() {
        return Err(SysError::WrongOwner { uid: st.st_uid });
    }
    let mode = st.st_mode & 0o7777;
    if mode & 0o022 != 0 {
        return Err(SysError::TooOpen { mode, forbidden: 0o022 });
    }
    Ok(())
}

/// Creates the new file `name` (one path component) in `dir` for writing, `0600`, and
/// reserves `reserve` bytes of disk for it: the session recordings (issue 34 §1). `dir`
/// must be a directory (not a symbolic link), owned by root or the effective user, with
/// no group or other permission bit; it is opened first and the file created through
/// that descriptor (`openat`, `O_CREAT|O_EXCL|O_NOFOLLOW`), so a directory or a name
/// swapped in meanwhile is refused, never followed. The space is reserved with
/// `fallocate(2)` (size kept at 0), so a full disk is found now, before the caller's
/// effect, not when it writes; where the file system cannot reserve (`EOPNOTSUPP`),
/// `fstatvfs(2)` must show that much free.
pub(crate) fn create_private(dir: &Path, name: &str, reserve: u64) -> Result<File, SysError> {
    use rustix::fs::{openat, FallocateFlags};
    if name.is_empty() || name.contains('/') || name == "." || name == ".." {
        return Err(SysError::Io { why: format!("{name:?} is not a file name") });
    }
    let flags = OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC;
    let dfd = rustix::fs::open(dir, flags, Mode::empty()).map_err(|e| match e {
        rustix::io::Errno::NOTDIR => SysError::Io { why: "is not a directory (or is a symbolic link to one: name the directory itself)".into() },
        e => errno(e),
    })?;
    let st = rustix::fs::fstat(&dfd).map_err(errno)?;
    if st.st_uid != 0 && st.st_uid != euid() {
        return Err(SysError::WrongOwner { uid: st.st_uid });
    }
    let mode = st.st_mode & 0o7777;
    if mode & 0o077 != 0 {
        return Err(SysError::TooOpen { mode, forbidden: 0o077 });
    }
    let flags = OFlags::WRONLY | OFlags::CREATE | OFlags::EXCL | OFlags::NOFOLLOW | OFlags::CLOEXEC | OFlags::NOCTTY | OFlags::NONBLOCK;
    let fd = openat(&dfd, name, flags, Mode::from_raw_mode(0o600)).map_err(errno)?;
    let reserved = match rustix::fs::fallocate(&fd, FallocateFlags::KEEP_SIZE, 0, reserve.max(1)) {
        Ok(()) => Ok(()),
        Err(rustix::io::Errno::OPNOTSUPP) => match rustix::fs::fstatvfs(&fd) {
            Ok(v) if v.f_bavail.saturating_mul(v.f_frsize) >= reserve => Ok(()),
            Ok(_) => Err(SysError::Io { why: format!("the file system has less than {reserve} bytes free") }),
            Err(e) => Err(errno(e)),
        },
        Err(rustix::io::Errno::NOSPC) => Err(SysError::Io { why: format!("no room for {reserve} bytes on the file system (full)") }),
        Err(e) => Err(errno(e)),
    };
    if let Err(e) = reserved {
        let _ = rustix::fs::unlinkat(&dfd, name, rustix::fs::AtFlags::empty());
        return Err(e);
    }
    Ok(File::from(fd))
}

/// A directory that failed [`check_dirs`], and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct UnsafeDir {
    pub dir: PathBuf,
    pub why: SysError,
}

impl fmt::Display for UnsafeDir {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "directory {} {}", self.dir.display(), self.why)
    }
}

impl std::error::Error for UnsafeDir {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        Some(&self.why)
    }
}

/// StrictModes for the directories above `path` (module docs): `path`'s own directory
/// must be owned by root or the effective user and not writable by group or others;
/// each directory above it must be owned by root or the effective user and not
/// writable by group or others unless its sticky bit is set. Directories are followed
/// through symbolic links (`stat`), so a link's own directory and its target's are
/// both checked when the caller passes both paths.
pub(crate) fn check_dirs(path: &Path) -> Result<(), UnsafeDir> {
    let absolute = std::path::absolute(path).map_err(|e| UnsafeDir { dir: path.to_owned(), why: io(&e) })?;
    for (i, dir) in absolute.ancestors().skip(1).enumerate() {
        let fail = |why| Err(UnsafeDir { dir: dir.to_owned(), why });
        let st = match rustix::fs::stat(dir) {
            Ok(st) => st,
            Err(e) => return fail(errno(e)),
        };
        let mode = st.st_mode & 0o7777;
        if st.st_uid != 0 && st.st_uid != euid() {
            return fail(SysError::WrongOwner { uid: st.st_uid });
        }
        let sticky = mode & 0o1000 != 0;
        if mode & 0o022 != 0 && (i == 0 || !sticky) {
            return fail(SysError::TooOpen { mode, forbidden: 0o022 });
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests;
