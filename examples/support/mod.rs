//! What the bench examples share (`make bench`: bench.rs, bench_compare.rs,
//! bench_memory.rs, bench_ssh.rs): an MCP server process driven over its stdin and stdout
//! ([`Session`]), the two opening lines, a `tools/call` line, the median and p99 of
//! samples, and private files. Each example uses a part of it (`mod support;`).

#![allow(dead_code)]

use std::io::{BufRead, BufReader, Read, Write};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::time::Duration;

use serde_json::json;

pub const INIT: &str = r#"{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"bench","version":"1"}}}"#;
pub const READY: &str = r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#;

/// One server process, driven like an MCP client: a line out, a line back.
pub struct Session {
    pub child: Child,
    /// `None` once a caller has taken it (to write from another thread) or closed it.
    pub stdin: Option<ChildStdin>,
    pub stdout: BufReader<ChildStdout>,
}

/// `sp mcp -q --config POLICY`, its standard error thrown away.
pub fn sp_command(sp: &str, policy: &Path) -> Command {
    let mut cmd = Command::new(sp);
    cmd.args(["mcp", "-q", "--config"]).arg(policy).stderr(Stdio::null());
    cmd
}

impl Session {
    /// Starts `cmd` with its stdin and stdout piped (its stderr as `cmd` says).
    pub fn spawn(mut cmd: Command) -> std::io::Result<Session> {
        let mut child = cmd.stdin(Stdio::piped()).stdout(Stdio::piped()).spawn()?;
        let stdin = child.stdin.take();
        // Wide enough for the 8 MiB answers of bench_memory in few reads.
        let stdout = BufReader::with_capacity(1 << 20, child.stdout.take().expect("piped stdout"));
        Ok(Session { child, stdin, stdout })
    }

    /// `sp mcp` with `policy`; panics if it cannot be started.
    pub fn sp(sp: &str, policy: &Path) -> Session {
        Session::spawn(sp_command(sp, policy)).expect("spawn sp")
    }

    /// `initialize` (its answer is returned) and `notifications/initialized`.
    pub fn initialize(&mut self) -> String {
        let answer = self.round_trip(INIT);
        self.send(READY);
        answer
    }

    /// Writes one line. A server that has closed its stdin shows as an empty answer,
    /// which each caller checks, so write errors are not reported here.
    pub fn send(&mut self, line: &str) {
        if let Some(w) = self.stdin.as_mut() {
            let _ = w.write_all(line.as_bytes());
            let _ = w.write_all(b"\n");
            let _ = w.flush();
        }
    }

    /// One answer line, with its line break; empty when the server closed its stdout.
    pub fn answer(&mut self) -> String {
        let mut answer = Vec::new();
        let _ = self.stdout.read_until(b'\n', &mut answer);
        String::from_utf8_lossy(&answer).into_owned()
    }

    /// The length in bytes of the next answer line (read and dropped).
    pub fn answer_len(&mut self) -> usize {
        let mut buf = Vec::new();
        let _ = self.stdout.read_until(b'\n', &mut buf);
        buf.len()
    }

    /// One request, its answer (empty when the server closed its stdout).
    pub fn round_trip(&mut self, line: &str) -> String {
        self.send(line);
        self.answer()
    }

    /// A field of /proc/PID/status in KiB (`VmHWM:` is the peak RSS).
    pub fn status_kib(&self, key: &str) -> Option<u64> {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.child.id())).ok()?;
        let line = status.lines().find(|l| l.starts_with(key))?;
        line.split_whitespace().nth(1)?.parse().ok()
    }

    /// The same in MiB, NaN when unavailable.
    pub fn status_mib(&self, key: &str) -> f64 {
        self.status_kib(key).map_or(f64::NAN, |k| k as f64 / 1024.0)
    }

    pub fn peak_rss_kib(&self) -> Option<u64> {
        self.status_kib("VmHWM:")
    }

    /// Open file descriptors of the process.
    pub fn fds(&self) -> usize {
        std::fs::read_dir(format!("/proc/{}/fd", self.child.id())).map(|d| d.count()).unwrap_or(0)
    }

    /// Closes stdin, reads what is left of stdout (so the server never blocks writing
    /// it) and waits for the exit; a server that has not exited 2 s after its stdin was
    /// closed (none should) is killed.
    pub fn finish(mut self) {
        drop(self.stdin.take());
        let Session { mut child, mut stdout, .. } = self;
        let drain = std::thread::spawn(move || {
            let mut rest = Vec::new();
            let _ = stdout.read_to_end(&mut rest);
        });
        for _ in 0..2000 {
            if matches!(child.try_wait(), Ok(Some(_))) {
                let _ = drain.join();
                return;
            }
            std::thread::sleep(Duration::from_millis(1));
        }
        let _ = child.kill();
        let _ = child.wait();
        let _ = drain.join();
    }
}

/// A `tools/call` request line.
pub fn tool_call(id: u64, name: &str, arguments: serde_json::Value) -> String {
    json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": {"name": name, "arguments": arguments}}).to_string()
}

/// Median, p99 and best of some samples, and how many.
#[derive(Clone, Copy)]
pub struct Stat {
    pub min: Duration,
    pub median: Duration,
    pub p99: Duration,
    pub n: usize,
}

/// `None` for no samples.
pub fn stat(mut samples: Vec<Duration>) -> Option<Stat> {
    if samples.is_empty() {
        return None;
    }
    samples.sort();
    let n = samples.len();
    Some(Stat { min: samples[0], median: samples[n / 2], p99: samples[(n * 99 / 100).min(n - 1)], n })
}

/// Writes `text` to `path`, readable by the owner alone (as sp wants secret files).
pub fn write_private(path: &Path, text: &str) {
    std::fs::write(path, text).unwrap();
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600)).unwrap();
}

/// A fresh directory for this run under the system's temporary directory.
pub fn scratch_dir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("{name}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}
