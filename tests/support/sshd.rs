//! A real OpenSSH `sshd` on 127.0.0.1 for the `ssh_exec` tests (issue #4).
//!
//! Each [`Sshd`] has its own directory with a generated Ed25519 host key, an
//! `authorized_keys` file holding a generated client key, a config and a log. It listens
//! on a free loopback port, as the user running the tests (root in CI: `PermitRootLogin
//! yes` in the test config only). Known traps, all handled here: sshd must be started
//! by absolute path; `/run/sshd` must exist; `UsePAM no`; `StrictModes no` because the
//! keys live under a temporary directory.
//!
//! The log is written at `LogLevel DEBUG1` so a test can tell exactly what the server
//! saw: `Connection from` (a TCP connection), `userauth-request` (any authentication
//! attempt, even the `none` probe) and `Accepted publickey` (a login).
//!
//! `/usr/sbin/sshd` missing is a hard failure (CI installs `openssh-server` in
//! `.ci/run`), unless `SP_TEST_SKIP_SSHD=1` is set, which skips these tests with a
//! message on stderr.

#![allow(dead_code)]

use std::io::Read;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// The fixture's directory (mode 0755 for sshd's checks), removed on drop. Not
/// `process::TempDir`: `examples/bench_ssh.rs` includes this file on its own.
pub struct Dir {
    pub path: PathBuf,
}

impl Dir {
    fn new() -> Dir {
        static COUNTER: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
        let n = COUNTER.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.subsec_nanos()).unwrap_or(0);
        let path = std::env::temp_dir().join(format!("sp-sshd-{}-{n}-{nanos:08x}", std::process::id()));
        std::fs::create_dir(&path).unwrap_or_else(|e| panic!("mkdir {}: {e}", path.display()));
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
        Dir { path }
    }
}

impl Drop for Dir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.path);
    }
}

pub const SSHD: &str = "/usr/sbin/sshd";

/// `None` (with a note on stderr) when sshd is absent and skipping was asked for.
pub fn available() -> bool {
    if Path::new(SSHD).exists() {
        return true;
    }
    if std::env::var_os("SP_TEST_SKIP_SSHD").is_some_and(|v| v == "1") {
        eprintln!("SKIPPED: {SSHD} is not installed (SP_TEST_SKIP_SSHD=1)");
        return false;
    }
    panic!("{SSHD} is not installed: apt-get install openssh-server (or set SP_TEST_SKIP_SSHD=1 to skip the ssh tests)");
}

/// Runs a command to completion, panicking with its stderr on failure.
pub fn run(cmd: &mut Command) -> String {
    let out = cmd.output().unwrap_or_else(|e| panic!("{cmd:?}: {e}"));
    assert!(out.status.success(), "{cmd:?} failed: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Generates a key pair `dir/name` (+ `.pub`); returns the public key line.
pub fn keygen(dir: &Path, name: &str, kind: &str, passphrase: &str) -> String {
    let path = dir.join(name);
    let _ = std::fs::remove_file(&path);
    let _ = std::fs::remove_file(path.with_extension("pub"));
    run(Command::new("ssh-keygen").args(["-q", "-t", kind, "-N", passphrase, "-C", name, "-f"]).arg(&path));
    std::fs::read_to_string(dir.join(format!("{name}.pub"))).unwrap().trim().to_owned()
}

pub fn current_user() -> String {
    run(Command::new("id").arg("-un")).trim().to_owned()
}

/// Processes whose parent is `pid` (from /proc).
fn children_of(pid: u32) -> Vec<u32> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
        let Some(child) = entry.file_name().to_str().and_then(|n| n.parse::<u32>().ok()) else { continue };
        let Ok(stat) = std::fs::read_to_string(entry.path().join("stat")) else { continue };
        // "pid (comm) state ppid ...": comm may hold spaces, so split after the last ')'.
        let ppid = stat.rsplit_once(')').and_then(|(_, rest)| rest.split_whitespace().nth(1)).and_then(|p| p.parse::<u32>().ok());
        if ppid == Some(pid) {
            out.push(child);
        }
    }
    out
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

pub struct Sshd {
    pub dir: Dir,
    pub port: u16,
    pub user: String,
    /// The client key in `authorized_keys` (mode 0600, no passphrase).
    pub client_key: PathBuf,
    /// `ssh-ed25519 AAAA...` of the host key.
    pub host_public: String,
    config: PathBuf,
    log: PathBuf,
    child: Option<Child>,
    /// Log text of earlier runs (before restarts).
    earlier: String,
}

impl Sshd {
    pub fn start() -> Sshd {
        Sshd::start_with("")
    }

    /// Like [`Sshd::start`], with `extra` lines appended to the config.
    pub fn start_with(extra: &str) -> Sshd {
        Sshd::start_full(extra, "")
    }

    /// Like [`Sshd::start`], with `NAME=VALUE` words added to the sessions' environment
    /// (sshd takes only its first `SetEnv` line, so they go on the fixture's own).
    pub fn start_with_env(env: &str) -> Sshd {
        Sshd::start_full("", env)
    }

    /// Both: `extra` config lines and `env` words for the sessions' environment.
    pub fn start_full(extra: &str, env: &str) -> Sshd {
        let dir = Dir::new();
        let _ = std::fs::create_dir_all("/run/sshd");
        let host_public = keygen(&dir.path, "host_ed25519", "ed25519", "");
        let client_public = keygen(&dir.path, "client", "ed25519", "");
        std::fs::write(dir.path.join("authorized_keys"), format!("{client_public}\n")).unwrap();
        // The sessions' HOME is an empty directory of the fixture's: bash reads
        // `~/.bashrc` for a command sshd starts, and the machine's own one (pyenv's
        // `rehash` takes a lock file; a test that kills a session mid-rehash leaves it
        // behind, and every later shell waits a minute for it) must not be part of
        // what a test measures.
        std::fs::create_dir_all(dir.path.join("home")).unwrap();
        let port = free_port();
        let config = dir.path.join("sshd_config");
        let d = dir.path.display();
        std::fs::write(
            &config,
            format!(
                "Port {port}\nListenAddress 127.0.0.1\nHostKey {d}/host_ed25519\nPidFile {d}/sshd.pid\n\
                 AuthorizedKeysFile {d}/authorized_keys\nUsePAM no\nStrictModes no\nPermitRootLogin yes\n\
                 PubkeyAuthentication yes\nPasswordAuthentication yes\nKbdInteractiveAuthentication no\n\
                 LogLevel DEBUG1\nMaxStartups 100\nMaxSessions 100\nMaxAuthTries 20\nX11Forwarding no\n\
                 PrintMotd no\nPrintLastLog no\nAcceptEnv none\nSetEnv HOME={d}/home {env}\n{extra}"
            ),
        )
        .unwrap();
        let mut s = Sshd {
            client_key: dir.path.join("client"),
            port,
            user: current_user(),
            host_public: host_public.split_whitespace().take(2).collect::<Vec<_>>().join(" "),
            log: dir.path.join("sshd.log"),
            config,
            child: None,
            earlier: String::new(),
            dir,
        };
        s.spawn();
        s
    }

    fn spawn(&mut self) {
        std::fs::write(&self.log, "").unwrap();
        // -E, not -e: with -e the session children's debug lines would reach the
        // client's stderr channel.
        let child = Command::new(SSHD)
            .args(["-D", "-E"])
            .arg(&self.log)
            .arg("-f")
            .arg(&self.config)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start {SSHD}: {e}"));
        self.child = Some(child);
        let deadline = Instant::now() + Duration::from_secs(10);
        let ready = format!("Server listening on 127.0.0.1 port {}", self.port);
        while !self.current_log().contains(&ready) {
            if let Some(Ok(Some(status))) = self.child.as_mut().map(|c| c.try_wait()) {
                panic!("sshd exited ({status}) at startup:\n{}", self.current_log());
            }
            assert!(Instant::now() < deadline, "sshd did not start listening:\n{}", self.current_log());
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Kills sshd and every per-connection child (the connections drop). The children
    /// call setsid(), so they are found by parentage, not by process group.
    pub fn stop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let mut doomed = vec![child.id()];
            let mut i = 0;
            while i < doomed.len() {
                doomed.extend(children_of(doomed[i]));
                i += 1;
            }
            // Parents first: a connection's sshd must die before the command it runs,
            // or it could still report the command's death to the client as an exit.
            for pid in &doomed {
                if let Some(p) = rustix::process::Pid::from_raw(*pid as i32) {
                    let _ = rustix::process::kill_process(p, rustix::process::Signal::KILL);
                }
            }
            let _ = child.kill();
            let _ = child.wait();
            self.earlier.push_str(&self.current_log());
        }
    }

    /// Stops and starts again: same port, same keys, a new process.
    pub fn restart(&mut self) {
        self.stop();
        self.spawn();
    }

    fn current_log(&self) -> String {
        let mut s = String::new();
        if let Ok(mut f) = std::fs::File::open(&self.log) {
            let _ = f.read_to_string(&mut s);
        }
        s
    }

    /// Everything sshd logged, across restarts.
    pub fn log(&self) -> String {
        format!("{}{}", self.earlier, self.current_log())
    }

    pub fn count(&self, needle: &str) -> usize {
        self.log().lines().filter(|l| l.contains(needle)).count()
    }

    /// TCP connections accepted by sshd.
    pub fn connections(&self) -> usize {
        self.count("Connection from 127.0.0.1")
    }

    /// Authentication requests of any method (the `none` probe included).
    pub fn auth_requests(&self) -> usize {
        self.count("userauth-request for user")
    }

    /// Successful logins.
    pub fn logins(&self) -> usize {
        self.count("Accepted publickey for") + self.count("Accepted password for")
    }

    /// Waits until the log settles on `want` lines containing `needle` (sshd logs from
    /// forked children, a moment after the client saw the effect).
    pub fn wait_count(&self, needle: &str, want: usize) -> usize {
        let deadline = Instant::now() + Duration::from_secs(3);
        loop {
            let n = self.count(needle);
            if n >= want || Instant::now() > deadline {
                return n;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// A known_hosts line for this server (`[127.0.0.1]:PORT ssh-ed25519 ...`).
    pub fn known_hosts_line(&self) -> String {
        format!("[127.0.0.1]:{} {}", self.port, self.host_public)
    }

    pub fn add_authorized(&self, public: &str) {
        use std::io::Write;
        let mut f = std::fs::OpenOptions::new().append(true).open(self.dir.path.join("authorized_keys")).unwrap();
        writeln!(f, "{public}").unwrap();
    }
}

impl Drop for Sshd {
    fn drop(&mut self) {
        self.stop();
    }
}
