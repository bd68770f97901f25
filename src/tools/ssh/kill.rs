//! Ending a remote command early (`exec.rs` module docs): the start marker sp prints
//! before the agent's command, and the script a second channel runs to kill the
//! command's session and everything it started.

use std::io::Read;
use std::time::{Duration, Instant};

use ssh2::Session;

/// What `sp` prints before the agent's command (module docs): `\x1esp:` + 16 random hex
/// digits + `\x1e`, stripped from the output. Its arrival proves that the exec string
/// reached a shell that ran sp's prefix, so the command's processes are the session of
/// a child of the server's connection process ([`KILL_COMMAND`]); a forced command
/// (`authorized_keys` `command=`, `ForceCommand`) that ignores the string never prints
/// it, and is never sent a second one. Random, so no output can forge it.
pub(crate) struct Marker(pub(crate) String);

impl Marker {
    pub(crate) fn new() -> Marker {
        let mut bytes = [0u8; 8];
        // Without the kernel's generator (before 3.17) the clock and the pid: the marker
        // needs to be unforeseeable to the remote output, not secret.
        if !matches!(rustix::rand::getrandom(&mut bytes, rustix::rand::GetRandomFlags::NONBLOCK), Ok(8)) {
            let t = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default();
            bytes = (t.as_nanos() as u64 ^ (u64::from(std::process::id()) << 32)).to_le_bytes();
        }
        Marker(bytes.iter().map(|b| format!("{b:02x}")).collect())
    }

    /// The exec string: the marker (`printf`, whose `\036` is RS in every shell's and
    /// coreutils' printf), then the agent's command unchanged after `;`, on the same
    /// line (so `$LINENO` and a syntax error's line number stay as they were).
    pub(crate) fn wrap(&self, command: &str) -> String {
        format!("printf '\\036sp:{}\\036'; {command}", self.0)
    }

    pub(crate) fn bytes(&self) -> Vec<u8> {
        format!("\x1esp:{}\x1e", self.0).into_bytes()
    }
}

/// Output before the marker that `sp` holds back while waiting for it (a login shell's
/// rc files may print first); past this the marker is given up and nothing is killed.
pub(crate) const MARKER_WINDOW: usize = 16 * 1024;

/// Each blocking step of the kill (channel, exec, each read) and the whole of it.
pub(crate) const KILL_STEP: Duration = Duration::from_secs(2);
const KILL_TOTAL: Duration = Duration::from_secs(6);

/// The kill, run on a second channel of the same connection through the user's login
/// shell (`exec /bin/sh -c '...'`: one line, no `'` or `!`, so sh, bash, dash, ksh, zsh,
/// csh and fish all pass it on). In order:
/// 1. its parent must be the server's connection process (`sshd`, `sshd-session`,
///    `dropbear`), whose other children are the sessions of its channels: with one
///    command at a time per connection, the command's shell (sshd starts every session
///    with `setsid`, pty or not, so the shell's pid is its session id);
/// 2. every process of those sessions, and every descendant of one (found by parent,
///    in any session, so `setsid CMD` and `set -m` jobs are found too), and every
///    session such a descendant leads, is stopped (SIGSTOP, so none can fork meanwhile),
///    scanning `/proc` again until a pass finds nothing new;
/// 3. all of them get SIGKILL, and the script waits (up to 1 s) until none is left
///    (gone or a zombie) and prints `sp-stop: killed N left M`.
///
/// What it cannot find: a process whose parent had already exited and that left the
/// session before the scan (`setsid` after a double fork, `setsid -f`, a daemon).
/// Linux `/proc` only; elsewhere it prints why and `sp` says "hung up".
pub(crate) const KILL_COMMAND: &str = "exec /bin/sh -c '\
me=$$; p=$PPID; \
[ -r /proc/$me/stat ] || { echo sp-stop: no /proc; exit 3; }; \
c=; read -r c < /proc/$p/comm; \
case \"$c\" in sshd|sshd-session|dropbear) ;; *) echo \"sp-stop: the parent is $c, not sshd\"; exit 3;; esac; \
st() { l=; read -r l < /proc/$1/stat 2>/dev/null || return 1; set -- ${l##*) }; s=$1; pp=$2; sid=$4; }; \
sids=\" \"; all=\" \"; n=0; \
for d in /proc/[0-9]*; do q=${d#/proc/}; [ \"$q\" = \"$me\" ] && continue; st $q || continue; \
[ \"$pp\" = \"$p\" ] && [ \"$sid\" = \"$q\" ] && sids=\"$sids$q \"; done; \
while :; do new=0; \
for d in /proc/[0-9]*; do q=${d#/proc/}; \
case \"$all\" in *\" $q \"*) continue;; esac; [ \"$q\" = \"$me\" ] && continue; st $q || continue; \
case \"$sids\" in *\" $sid \"*) ;; *) case \"$all\" in *\" $pp \"*) ;; *) continue;; esac;; esac; \
kill -STOP $q 2>/dev/null; all=\"$all$q \"; new=1; [ \"$s\" = Z ] || n=$((n+1)); \
[ \"$sid\" = \"$q\" ] && sids=\"$sids$q \"; done; \
[ $new = 0 ] && break; done; \
for q in $all; do kill -KILL $q 2>/dev/null; done; \
i=0; while :; do left=0; for q in $all; do st $q || continue; case $s in Z) ;; *) left=$((left+1));; esac; done; \
[ $left = 0 ] && break; i=$((i+1)); [ $i -ge 50 ] && break; sleep 0.02 2>/dev/null || sleep 1; done; \
echo \"sp-stop: killed $n left $left\"'";

/// Why nothing is known killed: sp's own words, with at most 80 printable ASCII
/// characters the remote side wrote. It becomes the result's and the journal's "may
/// still run" reason.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct KillFailed(pub(crate) String);

impl std::fmt::Display for KillFailed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for KillFailed {}

impl From<&str> for KillFailed {
    fn from(why: &str) -> Self {
        KillFailed(why.to_owned())
    }
}

/// Runs [`KILL_COMMAND`] on a new channel; `Ok(n)`: `n` processes killed, none left.
pub(crate) fn kill_remote(session: &Session) -> Result<u32, KillFailed> {
    let started = Instant::now();
    let mut ch = session.channel_session().map_err(|e| KillFailed(format!("no channel for the kill: {}", e.message())))?;
    ch.exec(KILL_COMMAND).map_err(|e| KillFailed(format!("the kill did not start: {}", e.message())))?;
    let mut out = Vec::new();
    let mut buf = [0u8; 1024];
    loop {
        match ch.read(&mut buf) {
            Ok(0) => break,
            Ok(n) if out.len() < 4096 => out.extend_from_slice(&buf[..n]),
            Ok(_) => {}
            Err(e) => return Err(KillFailed(format!("the kill did not answer: {e}"))),
        }
        if started.elapsed() > KILL_TOTAL {
            return Err("the kill did not answer in time".into());
        }
    }
    let _ = ch.close();
    let text = String::from_utf8_lossy(&out);
    let last = text.lines().rev().find(|l| l.starts_with("sp-stop: ")).unwrap_or("");
    log::debug!("kill on the server: {last:?}");
    parse_kill_report(last)
}

/// Characters of the remote's own words a failed kill quotes.
const MAX_SAID_CHARS: usize = 80;

/// `sp-stop: killed N left 0` -> `Ok(N)`; anything else is why nothing is known killed.
pub(crate) fn parse_kill_report(line: &str) -> Result<u32, KillFailed> {
    let words: Vec<&str> = line.split(' ').collect();
    match words.as_slice() {
        ["sp-stop:", "killed", n, "left", "0"] => n.parse().map_err(|_| "the kill's report was garbled".into()),
        ["sp-stop:", "killed", _, "left", m] => Err(KillFailed(format!("{m} process(es) were still there after SIGKILL"))),
        // The remote's words (a process name): printable ASCII only, short; scrubbed
        // whole before the cut (issue 31, section 3).
        ["sp-stop:", ..] => {
            let said: String = line["sp-stop: ".len()..].chars().filter(|c| c.is_ascii_graphic() || *c == ' ').collect();
            Err(KillFailed(format!("the kill did not run ({})", crate::gate::outside::cut(&said, MAX_SAID_CHARS))))
        }
        _ => Err("the kill did not report (is the remote system Linux with /proc?)".into()),
    }
}
