//! Children: [`command_raw`] (the one place `sp` names `Command::new`), and [`Child`], a
//! child with a timeout in its own process group (the approver, credential commands,
//! upstream servers); with [`become_subreaper`] and [`reap_strays`], nothing a child
//! starts outlives it, not even what left its group.

use std::time::Duration;

/// A command for `program` as it is: the one place `sp` names `Command::new`
/// (clippy.toml). Children start through [`launcher_command`](super::launcher_command)
/// (which uses this for the launcher itself), then [`Child::spawn`].
#[expect(clippy::disallowed_methods, reason = "the one place children are created")]
pub(crate) fn command_raw(program: &std::ffi::OsStr) -> std::process::Command {
    std::process::Command::new(program)
}

/// A child process in a process group of its own, so that everything it starts can be
/// killed with it (the approver, a credential `command`). While it exists it is in the
/// registry of children `sp` tracks, which [`reap_strays`] never touches.
#[derive(Debug)]
pub(crate) struct Child {
    pub child: std::process::Child,
    group: rustix::process::Pid,
}

impl Drop for Child {
    fn drop(&mut self) {
        let pid = self.group.as_raw_nonzero().get();
        locked_tracked().retain(|p| *p != pid);
    }
}

/// The children `sp` started with [`Child::spawn`] and still holds (the approver, a
/// credential command; later, the upstream servers it launches). Held across a spawn,
/// so a child is registered before any [`reap_strays`] can see it.
static TRACKED: std::sync::Mutex<Vec<i32>> = std::sync::Mutex::new(Vec::new());

fn locked_tracked() -> std::sync::MutexGuard<'static, Vec<i32>> {
    TRACKED.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// Set once `sp` is a child subreaper ([`become_subreaper`]).
static SUBREAPER: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// Makes this process a child subreaper (`prctl(PR_SET_CHILD_SUBREAPER)`, Linux 3.4):
/// a process that a descendant of `sp` leaves behind (`setsid cmd &` then exit, a
/// double fork) becomes `sp`'s child instead of init's, so [`reap_strays`] can end it.
/// `sp mcp` calls it at start (`signals::install`); without it, strays are not looked
/// for (a daemonising helper then escapes, as before).
pub(crate) fn become_subreaper() -> std::io::Result<()> {
    rustix::process::set_child_subreaper(Some(rustix::process::getpid()))?;
    SUBREAPER.store(true, std::sync::atomic::Ordering::SeqCst);
    Ok(())
}

/// One process, as `/proc/PID/stat` shows it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Proc {
    pub pid: i32,
    pub ppid: i32,
    pub zombie: bool,
}

/// `pid (comm) state ppid ...`: `comm` may hold anything, so the fields are read after
/// its last `)`.
fn parse_stat(pid: i32, stat: &str) -> Option<Proc> {
    let mut rest = stat.rsplit_once(')')?.1.split_whitespace();
    let state = rest.next()?;
    let ppid = rest.next()?.parse().ok()?;
    Some(Proc { pid, ppid, zombie: state == "Z" || state == "X" })
}

/// Every process `/proc` shows now.
fn processes() -> Vec<Proc> {
    let Ok(dir) = std::fs::read_dir("/proc") else { return Vec::new() };
    dir.flatten()
        .filter_map(|e| {
            let pid: i32 = e.file_name().to_str()?.parse().ok()?;
            parse_stat(pid, &std::fs::read_to_string(e.path().join("stat")).ok()?)
        })
        .collect()
}

/// The strays among `table` (children of `me` not in `tracked`) and everything to kill
/// with them: the strays and all their descendants.
pub(crate) fn strays_and_descendants(table: &[Proc], me: i32, tracked: &[i32]) -> (Vec<i32>, Vec<i32>) {
    let strays: Vec<i32> = table.iter().filter(|p| p.ppid == me && !tracked.contains(&p.pid)).map(|p| p.pid).collect();
    let mut doomed = strays.clone();
    let mut i = 0;
    while i < doomed.len() {
        let parent = doomed[i];
        doomed.extend(table.iter().filter(|p| p.ppid == parent && !doomed.contains(&p.pid)).map(|p| p.pid).collect::<Vec<_>>());
        i += 1;
    }
    (strays, doomed)
}

/// Kills every child of `sp` that it does not track (a helper's orphan, reparented to
/// `sp` the subreaper) with all its descendants (SIGSTOP first, so none forks
/// meanwhile, then SIGKILL), reaps them, and repeats until none is left (their own
/// orphans and zombies come to `sp` in turn), for at most 2 seconds. Returns how many
/// living processes it killed. Does nothing unless [`become_subreaper`] succeeded.
pub(crate) fn reap_strays() -> usize {
    use rustix::process::{kill_process, waitpid, Pid, Signal, WaitOptions};
    if !SUBREAPER.load(std::sync::atomic::Ordering::SeqCst) {
        return 0;
    }
    let me = rustix::process::getpid().as_raw_nonzero().get();
    let deadline = std::time::Instant::now() + Duration::from_secs(2);
    let mut killed = 0;
    loop {
        let table = processes();
        let (strays, doomed) = {
            let tracked = locked_tracked();
            strays_and_descendants(&table, me, &tracked)
        };
        if strays.is_empty() {
            break;
        }
        let living: Vec<Pid> = doomed.iter().filter(|pid| table.iter().any(|p| p.pid == **pid && !p.zombie)).filter_map(|pid| Pid::from_raw(*pid)).collect();
        for signal in [Signal::STOP, Signal::KILL] {
            for pid in &living {
                let _ = kill_process(*pid, signal);
            }
        }
        killed += living.len();
        // Only the strays are `sp`'s to reap (their pids cannot be reused before).
        for pid in strays.iter().filter_map(|p| Pid::from_raw(*p)) {
            while let Ok(None) = waitpid(Some(pid), WaitOptions::NOHANG) {
                if std::time::Instant::now() > deadline {
                    break;
                }
                std::thread::sleep(Duration::from_millis(1));
            }
        }
        if std::time::Instant::now() > deadline {
            log::warn!("some processes left behind by a helper could not be reaped within 2 s");
            break;
        }
    }
    if killed > 0 {
        log::info!("killed {killed} process(es) a helper left behind");
    }
    killed
}

/// How [`Child::wait_until`] ended.
#[derive(Debug)]
pub(crate) enum Waited {
    Exited(std::process::ExitStatus),
    /// The deadline passed first.
    TimedOut,
    /// `stop` said so first (a cancel).
    Stopped,
    Failed(std::io::Error),
}

impl Child {
    /// Spawns `cmd` as the leader of a new process group.
    pub(crate) fn spawn(cmd: &mut std::process::Command) -> std::io::Result<Child> {
        use std::os::unix::process::CommandExt;
        cmd.process_group(0);
        Child::spawn_as_is(cmd)
    }

    /// Spawns `cmd` whose launcher makes it the leader of a session of its own
    /// (`Plan::session`): `setsid` fails in a process that already leads a group.
    pub(crate) fn spawn_in_session(cmd: &mut std::process::Command) -> std::io::Result<Child> {
        Child::spawn_as_is(cmd)
    }

    fn spawn_as_is(cmd: &mut std::process::Command) -> std::io::Result<Child> {
        // ETXTBSY: a program file just written is still open for writing in a process
        // forked meanwhile (until its exec closes the descriptor). Brief; retry a few
        // times instead of failing the approver or the secret command.
        let mut tries = 0;
        let mut tracked = locked_tracked();
        let child = loop {
            match cmd.spawn() {
                Err(e) if e.raw_os_error() == Some(rustix::io::Errno::TXTBSY.raw_os_error()) && tries < 20 => {
                    tries += 1;
                    std::thread::sleep(std::time::Duration::from_millis(5));
                }
                r => break r?,
            }
        };
        let group = rustix::process::Pid::from_child(&child);
        tracked.push(group.as_raw_nonzero().get());
        Ok(Child { child, group })
    }

    /// Polls every few milliseconds until the child exits, `deadline` passes or `stop`
    /// returns true; nothing is killed here (the caller decides).
    pub(crate) fn wait_until(&mut self, deadline: std::time::Instant, mut stop: impl FnMut() -> bool) -> Waited {
        loop {
            match self.child.try_wait() {
                Ok(Some(status)) => return Waited::Exited(status),
                Ok(None) if stop() => return Waited::Stopped,
                Ok(None) if std::time::Instant::now() < deadline => std::thread::sleep(Duration::from_millis(5)),
                Ok(None) => return Waited::TimedOut,
                Err(e) => return Waited::Failed(e),
            }
        }
    }

    /// SIGKILL to the whole group (what the child started, even after it exited), and
    /// to every stray ([`reap_strays`]: what left the group and was orphaned).
    pub(crate) fn kill_group(&self) {
        let _ = rustix::process::kill_process_group(self.group, rustix::process::Signal::KILL);
        reap_strays();
    }

    /// Kills the group and the child, reaps it, then the strays it left.
    pub(crate) fn kill(&mut self) {
        let _ = rustix::process::kill_process_group(self.group, rustix::process::Signal::KILL);
        let _ = self.child.kill();
        let _ = self.child.wait();
        reap_strays();
    }
}

#[cfg(test)]
#[allow(clippy::disallowed_methods, reason = "tests start a shell")]
mod tests {
    use super::*;
    use std::time::Instant;

    #[test]
    fn a_child_is_waited_for_until_its_deadline_or_a_stop_and_killed_with_its_group() {
        let sh = |script: &str| {
            let mut cmd = std::process::Command::new("/bin/sh");
            cmd.arg("-c").arg(script).stdout(std::process::Stdio::piped());
            Child::spawn(&mut cmd).unwrap()
        };
        let soon = || Instant::now() + Duration::from_secs(10);
        let mut c = sh("exit 3");
        assert!(matches!(c.wait_until(soon(), || false), Waited::Exited(s) if s.code() == Some(3)));
        let mut c = sh("sleep 30");
        assert!(matches!(c.wait_until(soon(), || true), Waited::Stopped));
        c.kill();
        // A grandchild in the background: the timeout kills the whole group.
        let mut c = sh("sleep 30 & echo $!; wait");
        let mut line = String::new();
        std::io::BufRead::read_line(&mut std::io::BufReader::new(c.child.stdout.take().unwrap()), &mut line).unwrap();
        let grandchild: i32 = line.trim().parse().unwrap();
        let started = Instant::now();
        assert!(matches!(c.wait_until(Instant::now() + Duration::from_millis(200), || false), Waited::TimedOut));
        assert!(started.elapsed() >= Duration::from_millis(200));
        c.kill();
        // Evidence, not a sleep: the grandchild is gone (or a zombie awaiting its reaper).
        let stat = format!("/proc/{grandchild}/stat");
        let gone = |s: std::io::Result<String>| s.map_or(true, |s| s.rsplit(')').next().is_some_and(|r| r.trim_start().starts_with('Z')));
        let deadline = Instant::now() + Duration::from_secs(10);
        while !gone(std::fs::read_to_string(&stat)) {
            assert!(Instant::now() < deadline, "the grandchild {grandchild} survived the group kill");
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    #[test]
    fn strays_are_untracked_children_and_everything_below_them() {
        // sp is 10; 11 is tracked (the approver), with its own child 12; 20 and 30 were
        // orphaned to sp; 21, 22 (a grandchild) and 31 hang below them; 40 is elsewhere.
        let p = |pid, ppid| Proc { pid, ppid, zombie: false };
        let table = [p(10, 1), p(11, 10), p(12, 11), p(20, 10), p(21, 20), p(22, 21), p(30, 10), p(31, 30), p(40, 1), p(41, 40)];
        assert_eq!(strays_and_descendants(&table, 10, &[11]), (vec![20, 30], vec![20, 30, 21, 31, 22]));
        // Nothing tracked: the approver is a stray too; a tracked stray-to-be is not.
        assert_eq!(strays_and_descendants(&table, 10, &[]).0, vec![11, 20, 30]);
        assert_eq!(strays_and_descendants(&table, 10, &[11, 20, 30]), (vec![], vec![]));
        // `comm` may hold ") " and digits: the fields are read after the last ')'.
        assert_eq!(parse_stat(7, "7 (a) 1 (b) S 3 7 7 0"), Some(Proc { pid: 7, ppid: 3, zombie: false }));
        assert_eq!(parse_stat(8, "8 (sleep) Z 10 8 8 0"), Some(Proc { pid: 8, ppid: 10, zombie: true }));
        assert_eq!(parse_stat(9, "9 (x"), None);
        // Without `become_subreaper` (unit tests) nothing is looked for.
        assert_eq!(reap_strays(), 0);
    }
}
