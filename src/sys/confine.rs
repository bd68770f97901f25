//! How `sp` starts other programs (issue 31): through itself, re-executed as a small
//! launcher that sets up the child and then `exec`s the real program.
//!
//! ```text
//!   sp ──fork/exec──> sp __sp-exec [options] -- /abs/program args...   (the launcher)
//!                       1. parent-death signal SIGKILL; still sp's child? else exit;
//!                          every descriptor above 2 close-on-exec
//!                       2. setsid                       (upstreams: own session)
//!                       3. rlimits: core 0, memory, processes, files   (confined)
//!                       4. user switch (setgroups, setgid, setuid), or as root
//!                          without a user: every capability dropped     (confined)
//!                       5. parent-death signal again (a credential change clears it)
//!                       6. no_new_privs + Landlock (files, TCP, signals) (confined)
//!                       7. execve(program): the launcher is gone, the program remains
//! ```
//!
//! Why a launcher and not `pre_exec`: `sp` forbids `unsafe`, and nothing may allocate
//! between `fork` and `exec` (the static build's allocator has one lock). The launcher
//! is a fresh single-threaded process where every step is an ordinary safe call.
//!
//! Every child of `sp` (upstream servers, the approver, credential commands) goes
//! through [`launcher_command`] when a launcher is known ([`set_launcher`]: `sp mcp`
//! and the other commands use `/proc/self/exe`), so each dies with `sp`, even on
//! `kill -9`. Only upstreams are confined ([`Confinement`]); where the kernel cannot
//! confine as asked, the launcher refuses to exec (fail closed) and [`probe`] says so
//! beforehand (`sp check`, and before each start).
//!
//! The program is resolved on `sp`'s side first ([`resolve_program`], with the PATH the
//! child will get), so a missing program is a start error with its reason, as before,
//! not an exit status of the launcher.

use std::ffi::{OsStr, OsString};
use std::os::unix::ffi::OsStrExt as _;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

/// The first argument that turns `sp` into the launcher (`main.rs` looks for it before
/// anything else runs). Not a documented command: it only ever narrows what a child may do.
pub(crate) const ENTRY: &str = "__sp-exec";

/// What an upstream may read (and execute) without the policy naming it: the system's
/// programs and libraries and the few files of `/etc` that name resolution, TLS and
/// time need. Missing ones are skipped. Not `/etc` as a whole: operators keep policies
/// and secrets there. `/proc` and `/sys` are readable: runtimes read their own entries,
/// and `sp`'s own are closed to others (it is not dumpable, and Landlock refuses
/// `ptrace`-class access across its domain).
pub(crate) const DEFAULT_READ: &[&str] = &[
    "/usr",
    "/bin",
    "/sbin",
    "/lib",
    "/lib32",
    "/lib64",
    "/libx32",
    "/etc/ld.so.cache",
    "/etc/ld.so.conf",
    "/etc/ld.so.conf.d",
    "/etc/passwd",
    "/etc/group",
    "/etc/nsswitch.conf",
    "/etc/host.conf",
    "/etc/hosts",
    "/etc/resolv.conf",
    "/etc/gai.conf",
    "/etc/services",
    "/etc/protocols",
    "/etc/localtime",
    "/etc/timezone",
    "/etc/ssl",
    "/etc/ca-certificates",
    "/etc/ca-certificates.conf",
    "/etc/pki",
    "/etc/crypto-policies",
    "/etc/alternatives",
    "/etc/os-release",
    "/etc/mime.types",
    "/proc",
    "/sys",
    "/dev/zero",
    "/dev/random",
    "/dev/urandom",
    "/dev/full",
];
/// What an upstream may write without the policy naming it.
pub(crate) const DEFAULT_WRITE: &[&str] = &["/dev/null"];

/// The launcher: set once at start (`cli::run`), read when a child starts.
static LAUNCHER: OnceLock<PathBuf> = OnceLock::new();

/// Names the program that re-executes as the launcher (`/proc/self/exe` in `sp`).
pub(crate) fn set_launcher(path: PathBuf) {
    let _ = LAUNCHER.set(path);
}

fn launcher() -> Option<&'static Path> {
    #[cfg(test)]
    if LAUNCHER.get().is_none() {
        // Unit tests run in the test harness, which is no launcher: the `sp` built beside
        // it (target/<profile>/sp, built by the same `cargo test`) is.
        if let Some(sp) = std::env::current_exe().ok().and_then(|t| Some(t.parent()?.parent()?.join("sp"))).filter(|p| p.is_file()) {
            set_launcher(sp);
        }
    }
    LAUNCHER.get().map(PathBuf::as_path)
}

/// How an upstream is confined (sp-policy(5), `upstreams.NAME.sandbox`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Confinement {
    /// Read and execute beneath these, beyond [`DEFAULT_READ`].
    pub read: Vec<PathBuf>,
    /// Read, write, create and remove beneath these, beyond [`DEFAULT_WRITE`].
    pub write: Vec<PathBuf>,
    /// TCP connect and bind; `false` needs Landlock ABI 4 (Linux 6.7).
    pub network: bool,
    /// RLIMIT_AS, RLIMIT_NPROC, RLIMIT_NOFILE.
    pub memory_bytes: u64,
    pub processes: u64,
    pub files: u64,
}

/// The user an upstream runs as (`upstreams.NAME.user`), resolved from the system's
/// user and group databases.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct User {
    pub name: String,
    pub uid: u32,
    pub gid: u32,
    pub groups: Vec<u32>,
}

/// What the launcher does besides dying with `sp`.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub(crate) struct Plan {
    /// A session (and process group) of its own (`setsid`).
    pub session: bool,
    pub confine: Option<Confinement>,
    pub user: Option<User>,
}

/// Why a child cannot be started as asked.
#[derive(Debug)]
pub(crate) enum LaunchError {
    /// The program is not found or not executable (its reason, as `exec` would give).
    Program(std::io::Error),
    /// Confinement was asked for and no launcher is known.
    NoLauncher,
    /// A user was asked for and `sp` is not root.
    NotRoot { user: String },
    /// The kernel cannot confine as asked.
    Kernel(String),
}

impl std::fmt::Display for LaunchError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            LaunchError::Program(e) => write!(f, "{}", super::io_reason(e)),
            LaunchError::NoLauncher => f.write_str("sp cannot re-execute itself (/proc/self/exe) to confine it"),
            LaunchError::NotRoot { user } => write!(f, "running it as user {user:?} needs sp to run as root"),
            LaunchError::Kernel(why) => f.write_str(why),
        }
    }
}

impl std::error::Error for LaunchError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            LaunchError::Program(e) => Some(e),
            _ => None,
        }
    }
}

/// `program` as `execvp` would find it with `path` (the child's PATH; glibc's default
/// when unset): a name with a `/` as it is, else the first executable regular file of
/// that name in PATH's directories.
pub(crate) fn resolve_program(program: &str, path: Option<&OsStr>) -> std::io::Result<PathBuf> {
    let executable = |p: &Path| -> bool { std::fs::metadata(p).is_ok_and(|m| m.is_file()) && rustix::fs::access(p, rustix::fs::Access::EXEC_OK).is_ok() };
    if program.contains('/') {
        return if executable(Path::new(program)) {
            Ok(PathBuf::from(program))
        } else {
            Err(std::fs::metadata(program).err().unwrap_or_else(|| std::io::Error::from(std::io::ErrorKind::PermissionDenied)))
        };
    }
    let path = path.unwrap_or(OsStr::new("/bin:/usr/bin"));
    for dir in path.as_bytes().split(|b| *b == b':') {
        let dir = if dir.is_empty() { Path::new(".") } else { Path::new(OsStr::from_bytes(dir)) };
        let candidate = dir.join(program);
        if executable(&candidate) {
            return Ok(candidate);
        }
    }
    Err(std::io::Error::from(std::io::ErrorKind::NotFound))
}

/// A command that starts `program` (resolved with `path`, the child's PATH) through the
/// launcher as `plan` says; arguments added by the caller follow the program's.
/// Without a launcher: the program directly, unless `plan` needs one (confinement, a
/// user, a session: [`LaunchError::NoLauncher`]).
pub(crate) fn launcher_command(program: &str, path: Option<&OsStr>, plan: &Plan) -> Result<std::process::Command, LaunchError> {
    let resolved = resolve_program(program, path).map_err(LaunchError::Program)?;
    if let Some(u) = plan.user.as_ref().filter(|_| !rustix::process::geteuid().is_root()) {
        return Err(LaunchError::NotRoot { user: u.name.clone() });
    }
    if let Some(c) = &plan.confine {
        probe(c.network)?;
    }
    let Some(launcher) = launcher() else {
        if plan.confine.is_some() || plan.user.is_some() || plan.session {
            return Err(LaunchError::NoLauncher);
        }
        return Ok(super::child::command_raw(resolved.as_os_str()));
    };
    let mut cmd = super::child::command_raw(launcher.as_os_str());
    cmd.arg(ENTRY).arg("--parent").arg(rustix::process::getpid().as_raw_nonzero().get().to_string());
    if plan.session {
        cmd.arg("--session");
    }
    if let Some(c) = &plan.confine {
        cmd.arg("--confine");
        // The program itself is always readable: without it nothing starts.
        for p in c.read.iter().chain([&resolved]) {
            cmd.arg("--read").arg(p);
        }
        for p in &c.write {
            cmd.arg("--write").arg(p);
        }
        if !c.network {
            cmd.arg("--no-network");
        }
        cmd.arg("--memory").arg(c.memory_bytes.to_string());
        cmd.arg("--processes").arg(c.processes.to_string());
        cmd.arg("--files").arg(c.files.to_string());
    }
    if let Some(u) = &plan.user {
        cmd.arg("--uid").arg(u.uid.to_string()).arg("--gid").arg(u.gid.to_string());
        let groups: Vec<String> = u.groups.iter().map(u32::to_string).collect();
        cmd.arg("--groups").arg(groups.join(","));
    }
    cmd.arg("--").arg(resolved);
    Ok(cmd)
}

/// Whether this kernel can confine an upstream: Landlock for files (ABI 1, Linux 5.13)
/// and, when `network` is false, for TCP (ABI 4, Linux 6.7). Creates a ruleset and
/// drops it: nothing is restricted.
pub(crate) fn probe(network: bool) -> Result<(), LaunchError> {
    use landlock::{Access, AccessFs, AccessNet, CompatLevel, Compatible, Ruleset, RulesetAttr, ABI};
    let kernel = |what: &str, e: &dyn std::fmt::Display| LaunchError::Kernel(format!("this kernel cannot confine {what} with Landlock ({e})"));
    let files = Ruleset::default().set_compatibility(CompatLevel::HardRequirement).handle_access(AccessFs::from_all(ABI::V1));
    files.and_then(Ruleset::create).map_err(|e| kernel("files", &e))?;
    if !network {
        let net = Ruleset::default().set_compatibility(CompatLevel::HardRequirement).handle_access(AccessNet::from_all(ABI::V4));
        net.and_then(Ruleset::create).map_err(|e| kernel("the network (\"network\": false needs Linux 6.7)", &e))?;
    }
    Ok(())
}

/// `name` in `/etc/passwd`, with its groups from `/etc/group` (files only: `sp` links
/// no NSS module, and a static binary has none).
pub(crate) fn lookup_user(name: &str) -> Result<User, String> {
    let passwd = std::fs::read_to_string("/etc/passwd").map_err(|e| format!("/etc/passwd: {}", super::io_reason(&e)))?;
    let group = std::fs::read_to_string("/etc/group").unwrap_or_default();
    user_from(name, &passwd, &group)
}

fn user_from(name: &str, passwd: &str, group: &str) -> Result<User, String> {
    let entry = passwd
        .lines()
        .map(|l| l.split(':').collect::<Vec<_>>())
        .find(|f| f.len() >= 4 && f[0] == name)
        .ok_or_else(|| format!("no user {name:?} in /etc/passwd"))?;
    let number = |s: &str, what: &str| s.parse::<u32>().map_err(|_| format!("/etc/passwd: {name}'s {what} is not a number"));
    let (uid, gid) = (number(entry[2], "uid")?, number(entry[3], "gid")?);
    if uid == 0 {
        return Err(format!("user {name:?} is root: an upstream never runs as root by choice"));
    }
    let mut groups = vec![gid];
    for f in group.lines().map(|l| l.split(':').collect::<Vec<_>>()).filter(|f| f.len() >= 4) {
        let member = f[3].split(',').any(|m| m == name);
        if let Some(g) = f[2].parse::<u32>().ok().filter(|g| member && !groups.contains(g)) {
            groups.push(g);
        }
    }
    Ok(User { name: name.to_owned(), uid, gid, groups })
}

/// `PR_SET_DUMPABLE 0` (issue 31): no process of the same user may read this one's
/// memory, environment or descriptors through `/proc` or attach to it, and no core dump
/// holds its secrets. Called before any secret is read.
pub(crate) fn make_undumpable() -> std::io::Result<()> {
    rustix::process::set_dumpable_behavior(rustix::process::DumpableBehavior::NotDumpable)?;
    Ok(())
}

// ---- the launcher's side ------------------------------------------------------------

/// What the launcher was asked to do (its arguments).
#[derive(Debug, Default, PartialEq, Eq)]
struct Spec {
    parent: i32,
    session: bool,
    confine: Option<Confinement>,
    uid: Option<u32>,
    gid: Option<u32>,
    groups: Vec<u32>,
    program: OsString,
    args: Vec<OsString>,
}

fn parse(args: Vec<OsString>) -> Result<Spec, String> {
    use lexopt::prelude::*;
    let mut p = lexopt::Parser::from_args(args);
    let mut spec = Spec::default();
    let mut confine: Option<Confinement> = None;
    let number =
        |v: OsString, what: &str| -> Result<u64, String> { v.to_str().and_then(|s| s.parse().ok()).ok_or_else(|| format!("--{what} takes a number")) };
    let small = |n: u64, what: &str| u32::try_from(n).map_err(|_| format!("--{what} is out of range"));
    while let Some(arg) = p.next().map_err(|e| e.to_string())? {
        if let Value(program) = arg {
            spec.program = program;
            spec.args = p.raw_args().map_err(|e| e.to_string())?.collect();
            break;
        }
        let Long(name) = arg else { return Err(arg.unexpected().to_string()) };
        let name = name.to_owned();
        if matches!(name.as_str(), "session" | "confine" | "no-network") {
            match name.as_str() {
                "session" => spec.session = true,
                "confine" => {
                    confine = Some(Confinement { read: vec![], write: vec![], network: true, memory_bytes: u64::MAX, processes: u64::MAX, files: u64::MAX });
                }
                _ => confine.as_mut().ok_or("--no-network before --confine")?.network = false,
            }
            continue;
        }
        let value = p.value().map_err(|e| e.to_string())?;
        match name.as_str() {
            "parent" => spec.parent = i32::try_from(number(value, &name)?).map_err(|_| "--parent is out of range")?,
            "uid" => spec.uid = Some(small(number(value, &name)?, &name)?),
            "gid" => spec.gid = Some(small(number(value, &name)?, &name)?),
            "groups" => {
                let v = value.to_str().ok_or("--groups takes numbers")?;
                spec.groups = v
                    .split(',')
                    .filter(|s| !s.is_empty())
                    .map(|g| g.parse::<u32>().map_err(|_| "--groups takes numbers".to_owned()))
                    .collect::<Result<_, _>>()?;
            }
            "read" | "write" | "memory" | "processes" | "files" => {
                let c = confine.as_mut().ok_or_else(|| format!("--{name} before --confine"))?;
                match name.as_str() {
                    "read" => c.read.push(value.into()),
                    "write" => c.write.push(value.into()),
                    "memory" => c.memory_bytes = number(value, &name)?,
                    "processes" => c.processes = number(value, &name)?,
                    _ => c.files = number(value, &name)?,
                }
            }
            _ => return Err(format!("unknown option --{name}")),
        }
    }
    if spec.program.is_empty() || spec.parent <= 0 || spec.uid.is_some() != spec.gid.is_some() {
        return Err("usage: sp __sp-exec --parent PID [options] -- PROGRAM [ARGS...]".into());
    }
    spec.confine = confine;
    Ok(spec)
}

/// The launcher's entry (`main.rs`, before anything else): `Some(exit code)` when the
/// arguments ask for it (it returns only when it failed), `None` otherwise.
pub fn entry() -> Option<std::process::ExitCode> {
    let mut args = std::env::args_os().skip(1);
    if args.next().as_deref() != Some(OsStr::new(ENTRY)) {
        return None;
    }
    let why = match parse(args.collect()) {
        Ok(spec) => run(&spec),
        Err(e) => e,
    };
    // The child's stderr (an upstream's is logged by sp under its name).
    eprintln!("sp launcher: {why}; not started");
    Some(std::process::ExitCode::from(126))
}

/// Sets the process up as `spec` says and execs the program; returns only the reason
/// it did not.
fn run(spec: &Spec) -> String {
    match setup(spec) {
        Ok(()) => {}
        Err(e) => return e,
    }
    use std::os::unix::process::CommandExt as _;
    let e = super::child::command_raw(&spec.program).args(&spec.args).exec();
    format!("{}: {}", Path::new(&spec.program).display(), super::io_reason(&e))
}

fn die_with_parent(parent: i32) -> Result<(), String> {
    use rustix::process::{getppid, set_parent_process_death_signal, Signal};
    set_parent_process_death_signal(Some(Signal::KILL)).map_err(|e| format!("parent-death signal: {e}"))?;
    // sp may have ended before the signal was set: then nobody would end this child.
    if getppid().map(|p| p.as_raw_nonzero().get()) != Some(parent) {
        return Err("sp ended before its child started".into());
    }
    Ok(())
}

fn setup(spec: &Spec) -> Result<(), String> {
    use rustix::process::{setrlimit, Resource, Rlimit};
    die_with_parent(spec.parent)?;
    // Only 0, 1 and 2 reach the program: whatever else this process holds (what sp
    // inherited from whoever started it) closes at the exec.
    close_fds::set_fds_cloexec(3, &[]);
    if spec.session {
        rustix::process::setsid().map_err(|e| format!("setsid: {e}"))?;
    }
    if let Some(c) = &spec.confine {
        let limit = |r: Resource, n: u64, what: &str| -> Result<(), String> {
            let n = (n != u64::MAX).then_some(n);
            setrlimit(r, Rlimit { current: n, maximum: n }).map_err(|e| format!("{what} limit: {e}"))
        };
        limit(Resource::Core, 0, "core dump")?;
        limit(Resource::As, c.memory_bytes, "memory")?;
        limit(Resource::Nproc, c.processes, "process")?;
        limit(Resource::Nofile, c.files, "open file")?;
    }
    if let (Some(uid), Some(gid)) = (spec.uid, spec.gid) {
        use rustix::process::{Gid, Uid};
        let groups: Vec<Gid> = spec.groups.iter().map(|g| Gid::from_raw(*g)).collect();
        rustix::thread::set_thread_groups(&groups).map_err(|e| format!("setgroups: {e}"))?;
        let (g, u) = (Gid::from_raw(gid), Uid::from_raw(uid));
        rustix::thread::set_thread_res_gid(g, g, g).map_err(|e| format!("setgid {gid}: {e}"))?;
        rustix::thread::set_thread_res_uid(u, u, u).map_err(|e| format!("setuid {uid}: {e}"))?;
        if rustix::process::geteuid().as_raw() != uid || rustix::process::getuid().as_raw() != uid {
            return Err("the user switch did not take".into());
        }
    } else if spec.confine.is_some() && rustix::process::geteuid().is_root() {
        drop_capabilities()?;
    }
    // A change of credentials clears the parent-death signal: set it again.
    die_with_parent(spec.parent)?;
    if let Some(c) = &spec.confine {
        landlock(c)?;
    }
    Ok(())
}

/// Root without a `user`: no capability survives the exec (bounding set emptied, the
/// other sets cleared), so root's powers beyond file ownership are gone.
fn drop_capabilities() -> Result<(), String> {
    use rustix::thread::{clear_ambient_capability_set, remove_capability_from_bounding_set, set_capabilities, CapabilitySet, CapabilitySets};
    for cap in CapabilitySet::all().iter() {
        match remove_capability_from_bounding_set(cap) {
            // A capability this kernel does not know.
            Ok(()) | Err(rustix::io::Errno::INVAL) => {}
            Err(e) => return Err(format!("dropping capabilities: {e}")),
        }
    }
    let _ = clear_ambient_capability_set();
    let none = CapabilitySets { effective: CapabilitySet::empty(), permitted: CapabilitySet::empty(), inheritable: CapabilitySet::empty() };
    set_capabilities(None, none).map_err(|e| format!("dropping capabilities: {e}"))
}

/// no_new_privs, then a Landlock domain: read (and execute) beneath [`DEFAULT_READ`],
/// `read`, the program; write beneath [`DEFAULT_WRITE`] and `write`; no TCP when
/// `network` is false; no signals to, and no abstract sockets of, processes outside
/// (ABI 6, where the kernel has it).
fn landlock(c: &Confinement) -> Result<(), String> {
    use landlock::{
        Access, AccessFs, AccessNet, CompatLevel, Compatible, PathBeneath, PathFd, Ruleset, RulesetAttr, RulesetCreatedAttr, RulesetStatus, Scope, ABI,
    };
    let abi = ABI::V6;
    let fail = |e: landlock::RulesetError| format!("Landlock: {e}");
    let mut ruleset = Ruleset::default().handle_access(AccessFs::from_all(abi)).map_err(fail)?;
    if !c.network {
        ruleset = ruleset.set_compatibility(CompatLevel::HardRequirement).handle_access(AccessNet::from_all(abi)).map_err(fail)?;
        ruleset = ruleset.set_compatibility(CompatLevel::BestEffort);
    }
    let created = ruleset.scope(Scope::from_all(abi)).map_err(fail)?.create().map_err(fail)?;
    let file_rights = AccessFs::from_file(abi);
    let mut rules = Vec::new();
    let mut rule = |path: &Path, rights: landlock::BitFlags<AccessFs>, required: bool| -> Result<(), String> {
        let fd = match PathFd::new(path) {
            Ok(fd) => fd,
            Err(_) if !required => return Ok(()),
            Err(e) => return Err(format!("{}: {e}", path.display())),
        };
        // A file takes only the rights that apply to files.
        let rights = if std::fs::metadata(path).is_ok_and(|m| !m.is_dir()) { rights & file_rights } else { rights };
        rules.push(Ok::<_, landlock::RulesetError>(PathBeneath::new(fd, rights)));
        Ok(())
    };
    for p in DEFAULT_READ {
        rule(Path::new(p), AccessFs::from_read(abi), false)?;
    }
    for p in &c.read {
        rule(p, AccessFs::from_read(abi), true)?;
    }
    for p in DEFAULT_WRITE {
        rule(Path::new(p), AccessFs::from_all(abi), false)?;
    }
    for p in &c.write {
        rule(p, AccessFs::from_all(abi), true)?;
    }
    let created = created.add_rules(rules).map_err(fail)?;
    let status = created.restrict_self().map_err(fail)?;
    if status.ruleset == RulesetStatus::NotEnforced || !status.no_new_privs {
        return Err("this kernel does not enforce Landlock: not started (fail closed)".into());
    }
    Ok(())
}

#[cfg(test)]
mod tests;
