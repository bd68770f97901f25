//! The small pieces of infrastructure several modules need once, each in one place and
//! tested there. A leaf: imports nothing from the crate.
//!
//! - [`fs`]: files named by the operator, opened so that nothing can block and nothing
//!   is trusted that others could have written ([`open`], [`read`], [`read_within`]),
//!   and the StrictModes rule for their directories ([`check_dirs`]);
//! - [`lock`]: an exclusive lock with a deadline ([`lock_exclusive`]: the journal,
//!   `known_hosts`, the grants file);
//! - [`child`]: a child with a timeout in its own process group ([`Child`]: the
//!   approver, credential commands; with [`become_subreaper`] and [`reap_strays`](child::reap_strays),
//!   nothing a child starts outlives it, not even what left its group);
//! - [`confine`]: how every child starts: through `sp` re-executed as a launcher
//!   ([`launcher_command`]) that ties it to `sp`'s life and, for upstreams, confines it
//!   (session, limits, user, Landlock); [`make_undumpable`];
//! - [`state`]: a private state file kept whole (the grants, the tool pins): opened
//!   under its lock with its name re-checked, replaced atomically;
//! - [`text`]: text cut at a character boundary ([`cut`]), echoed names ([`short`]) and
//!   an I/O error's reason ([`io_reason`], [`os_reason`]);
//! - [`env_var`]: the one place the process environment is read.
//!
//! Callers name the items through `sys::` (`sys::open`, `sys::Child`): the folder is
//! how the code is kept, not a path anyone needs.

mod bounded;
mod child;
mod confine;
mod fs;
mod lock;
pub(crate) mod state;
mod text;

pub(crate) use bounded::{run_bounded, RunError};
pub(crate) use child::{become_subreaper, Child, Waited};
pub(crate) use confine::{launcher_command, lookup_user, make_undumpable, probe, resolve_program, set_launcher, Confinement, Plan, DEFAULT_READ, DEFAULT_WRITE};
pub use confine::entry as launcher_entry;
pub(crate) use fs::{
    at_startup, check, check_dirs, check_program, create_private, euid, kind_name, open, read, read_capped, read_within, Access, Rules, SysError, UnsafeDir,
    READ_TIMEOUT,
};
pub(crate) use lock::{lock_exclusive, FileLock, LockError};
pub(crate) use text::{cut, hex, io_reason, json_escapes, os_reason, put_bytes, short, Ellipsis};
#[cfg(test)]
pub(crate) use text::SHORT_PIECE;

/// A variable of the process environment: the one place `sp` reads it (clippy.toml):
/// `sp`'s own settings (`cli::Env`) and `env`/`systemd` credential sources.
#[expect(clippy::disallowed_methods, reason = "the one place the environment is read")]
pub(crate) fn env_var(name: &str) -> Option<std::ffi::OsString> {
    std::env::var_os(name)
}
