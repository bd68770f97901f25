//! Spawning the built `sp` binary (`CARGO_BIN_EXE_sp`) the way an MCP client does, and
//! checking what it wrote.
//!
//! - [`Launch`] is one command line plus environment. The environment is always cleared
//!   except `PATH` and what the test sets: clients pass a filtered environment, and a
//!   test must not depend on the developer's `SP_CONFIG`, `HOME` or proxy variables.
//! - [`Launch::run`] feeds stdin whole (from a thread, so a large input cannot deadlock
//!   against a full stdout pipe) and collects everything: a [`Run`].
//! - [`Session`] is an interactive exchange: write a request, read its answer, repeat.
//! - [`check_protocol`] is the release criterion (MISSION.md, "Stdout cleanliness"): every
//!   line is one complete JSON-RPC 2.0 response or notification ending in `\n`. Its error
//!   is `non-protocol stdout on line N: b'...'` with the raw line; [`assert_protocol_only`]
//!   adds the launch command and stderr, separately.
//! - Deadlines (issue 32): nothing here waits on sp for ever. Its stdout and stderr are
//!   read by threads that hand over what they read through channels, each wait on them
//!   or on its exit has [`deadline`], and a missed one kills sp and fails saying what
//!   was awaited, with the command and stderr. [`wait_deadline`] and [`output_deadline`]
//!   are the same for children a test spawns itself.

#![allow(dead_code)]

use std::collections::hash_map::RandomState;
use std::fmt::Write as _;
use std::hash::{BuildHasher, Hasher};
use std::io::{BufRead, BufReader, Read, Write};
use std::os::fd::AsRawFd;
use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc::{Receiver, RecvTimeoutError};
use std::time::{Duration, Instant};

use serde_json::{json, Value};

/// The binary under test: the one cargo built with the tests, or `SP_TEST_BIN` (`make
/// test-static` runs the suite against the static binary that way).
pub fn sp_bin() -> &'static str {
    static BIN: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    BIN.get_or_init(|| std::env::var("SP_TEST_BIN").unwrap_or_else(|_| env!("CARGO_BIN_EXE_sp").to_owned()))
}

/// How long a test waits for one thing from a child or a socket (an answer, an exit, a
/// stream's end) before it fails saying what: 120 s, or `SP_TEST_DEADLINE_S`. Generous
/// on purpose (2 loaded cores); it exists so that a hang is a failure with a message,
/// not a suite that never ends.
pub fn deadline() -> Duration {
    static SECS: std::sync::OnceLock<u64> = std::sync::OnceLock::new();
    Duration::from_secs(*SECS.get_or_init(|| std::env::var("SP_TEST_DEADLINE_S").ok().and_then(|v| v.parse().ok()).unwrap_or(120)))
}

/// Waits for `child` to exit, at most [`deadline`]. Past it, kills the child (and reaps
/// it) and returns `Err` naming `what` was awaited and for how long.
pub fn try_wait_deadline(child: &mut Child, what: &str) -> Result<ExitStatus, String> {
    let limit = deadline();
    let end = Instant::now() + limit;
    let mut pause = Duration::from_millis(1);
    loop {
        match child.try_wait() {
            Ok(Some(status)) => return Ok(status),
            Ok(None) => {}
            Err(e) => return Err(format!("waiting for {what}: wait failed: {e}")),
        }
        if Instant::now() >= end {
            let _ = child.kill();
            let _ = child.wait();
            return Err(format!("{what}: still running after {} s (pid {}); killed", limit.as_secs(), child.id()));
        }
        std::thread::sleep(pause);
        pause = (pause * 2).min(Duration::from_millis(20));
    }
}

/// [`try_wait_deadline`], panicking with its message.
pub fn wait_deadline(child: &mut Child, what: &str) -> ExitStatus {
    try_wait_deadline(child, what).unwrap_or_else(|e| panic!("{e}"))
}

/// Reads `r` to its end on a thread; the receiver gets everything once it ends.
pub fn read_all_in_thread<R: Read + Send + 'static>(mut r: R) -> Receiver<Vec<u8>> {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let mut buf = Vec::new();
        let _ = r.read_to_end(&mut buf);
        let _ = tx.send(buf);
    });
    rx
}

/// What a [`read_all_in_thread`] reader got, waiting at most [`deadline`] for its end:
/// a pipe stays open while anything holds its write end (a grandchild, or a child a
/// sibling test forked before it exec'd), so this can wait after the child exited.
pub fn collect(rx: &Receiver<Vec<u8>>, what: &str) -> Vec<u8> {
    rx.recv_timeout(deadline()).unwrap_or_else(|_| panic!("{what}: not closed after {} s (something still holds its write end)", deadline().as_secs()))
}

/// `child.wait_with_output()` with [`deadline`]: stdout and stderr (whichever were
/// piped) read on threads, the exit awaited with a deadline; `what` names the child in
/// the failure.
pub fn output_deadline(mut child: Child, what: &str) -> std::process::Output {
    let out = child.stdout.take().map(read_all_in_thread);
    let err = child.stderr.take().map(read_all_in_thread);
    let status = try_wait_deadline(&mut child, what);
    let stderr = err.as_ref().map(|rx| collect(rx, &format!("{what}: its stderr"))).unwrap_or_default();
    let status = status.unwrap_or_else(|e| panic!("{e}\nstderr:\n{}", String::from_utf8_lossy(&stderr)));
    let stdout = out.as_ref().map(|rx| collect(rx, &format!("{what}: its stdout"))).unwrap_or_default();
    std::process::Output { status, stdout, stderr }
}

/// A random hex string (128 bits, from std's per-process random hasher keys).
pub fn random_hex() -> String {
    let mut out = String::new();
    for i in 0..2u64 {
        let mut h = RandomState::new().build_hasher();
        h.write_u64(i);
        h.write_u32(std::process::id());
        let _ = write!(out, "{:016x}", h.finish());
    }
    out
}

/// Every canary handed out in this test process.
static CANARIES: std::sync::Mutex<Vec<String>> = std::sync::Mutex::new(Vec::new());

/// A distinctive secret value: if it shows up anywhere it was not meant to, it is ours.
/// Every canary is registered; every finished `sp` run ([`Run::new`]) is checked for all
/// of them in stdout and stderr (issue #3, "canary test across the suite").
pub fn canary() -> String {
    let c = format!("sp-canary-{}", random_hex());
    CANARIES.lock().unwrap_or_else(|e| e.into_inner()).push(c.clone());
    c
}

/// Panics if any canary reached sp's stdout or stderr.
fn assert_no_canary(stdout: &[u8], stderr: &str, cmd: &str) {
    let out = String::from_utf8_lossy(stdout);
    for c in CANARIES.lock().unwrap_or_else(|e| e.into_inner()).iter() {
        for place in [("stdout", &*out), ("stderr", stderr)] {
            assert!(!place.1.contains(c.as_str()), "a secret canary reached sp's {}\ncommand: {cmd}\nstderr:\n{stderr}", place.0);
        }
    }
}

impl Run {
    /// Every finished run goes through here: the canary check cannot be forgotten.
    fn new(status: ExitStatus, stdout: Vec<u8>, stderr: String, cmd: String) -> Run {
        assert_no_canary(&stdout, &stderr, &cmd);
        Run { status, stdout, stderr, cmd }
    }
}

/// A private temporary directory (mode 0700), removed on drop.
pub struct TempDir {
    pub path: PathBuf,
}

impl TempDir {
    pub fn new(tag: &str) -> TempDir {
        static COUNTER: AtomicUsize = AtomicUsize::new(0);
        let n = COUNTER.fetch_add(1, Ordering::SeqCst);
        let path = std::env::temp_dir().join(format!("sp-{tag}-{}-{n}-{}", std::process::id(), &random_hex()[..8]));
        std::fs::DirBuilder::new().mode(0o700).create(&path).unwrap_or_else(|e| panic!("mkdir {}: {e}", path.display()));
        TempDir { path }
    }

    /// Writes `name` with `content` and sets its mode.
    pub fn file(&self, name: &str, content: &[u8], mode: u32) -> PathBuf {
        let p = self.path.join(name);
        std::fs::write(&p, content).unwrap_or_else(|e| panic!("write {}: {e}", p.display()));
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(mode)).unwrap();
        p
    }

    /// `self.path/name` as a string (for arguments and policies).
    pub fn join(&self, name: &str) -> String {
        self.path.join(name).display().to_string()
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.path);
    }
}

/// One command line for `sp` with its (otherwise empty) environment.
#[derive(Debug, Clone)]
pub struct Launch {
    pub args: Vec<String>,
    pub env: Vec<(String, String)>,
}

impl Launch {
    pub fn new<S: AsRef<str>>(args: &[S]) -> Launch {
        Launch { args: args.iter().map(|a| a.as_ref().to_owned()).collect(), env: Vec::new() }
    }

    /// `sp mcp --config FILE` plus `extra` arguments.
    pub fn mcp(config: &Path, extra: &[&str]) -> Launch {
        let mut args = vec!["mcp".to_owned(), "--config".to_owned(), config.display().to_string()];
        args.extend(extra.iter().map(|s| s.to_string()));
        Launch { args, env: Vec::new() }
    }

    pub fn env(mut self, key: &str, value: &str) -> Launch {
        self.env.push((key.to_owned(), value.to_owned()));
        self
    }

    pub fn command(&self) -> Command {
        let mut c = Command::new(sp_bin());
        c.env_clear();
        if let Some(path) = std::env::var_os("PATH") {
            c.env("PATH", path);
        }
        // Issue 11: `sp mcp` refuses to serve without a journal location. Unless the test
        // chooses (HOME or XDG_STATE_HOME; "" means unset), the journal is one file under
        // target/tmp, shared by every session of the suite as concurrent clients share one.
        if !self.env.iter().any(|(k, _)| k == "HOME" || k == "XDG_STATE_HOME") {
            c.env("XDG_STATE_HOME", concat!(env!("CARGO_TARGET_TMPDIR"), "/state"));
        }
        c.envs(self.env.iter().map(|(k, v)| (k, v)));
        c.args(&self.args);
        c
    }

    /// The launch as a shell command line, for failure messages.
    pub fn describe(&self) -> String {
        let mut s = String::from("env -i PATH=\"$PATH\"");
        for (k, v) in &self.env {
            let _ = write!(s, " {k}={}", shell_quote(v));
        }
        let _ = write!(s, " {}", shell_quote(sp_bin()));
        for a in &self.args {
            let _ = write!(s, " {}", shell_quote(a));
        }
        s
    }

    pub fn spawn(&self) -> Child {
        self.command()
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start {}: {e}", self.describe()))
    }

    /// Runs to completion with `stdin` as the whole input, then EOF. Like a client, it
    /// closes stdin only once every request in the input has been answered (or sp has
    /// closed stdout): since issue #10, EOF while a call runs cancels that call.
    pub fn run(&self, stdin: &[u8]) -> Run {
        let mut child = self.spawn();
        let mut pipe = child.stdin.take().expect("piped stdin");
        let mut stdout = child.stdout.take().expect("piped stdout");
        let stderr = read_all_in_thread(child.stderr.take().expect("piped stderr"));
        let input = stdin.to_vec();
        let expected = requests_in(stdin);
        let (answered_tx, answered_rx) = std::sync::mpsc::channel::<()>();
        let (stdout_tx, stdout_rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let (mut all, mut line, mut buf) = (Vec::new(), Vec::new(), [0u8; 8192]);
            loop {
                let n = match stdout.read(&mut buf) {
                    Ok(0) | Err(_) => break,
                    Ok(n) => n,
                };
                all.extend_from_slice(&buf[..n]);
                for b in &buf[..n] {
                    line.push(*b);
                    if *b == b'\n' {
                        let v: Option<Value> = serde_json::from_slice(&line).ok();
                        if v.is_some_and(|v| v.get("id").is_some() && v.get("method").is_none()) {
                            let _ = answered_tx.send(());
                        }
                        line.clear();
                    }
                }
            }
            let _ = stdout_tx.send(all);
        });
        // sp may stop reading early (a closed session): a failed write is expected then.
        // The writer holds stdin until every request is answered, at most `deadline`.
        std::thread::spawn(move || {
            let _ = pipe.write_all(&input);
            let end = Instant::now() + deadline();
            for _ in 0..expected {
                let left = end.saturating_duration_since(Instant::now());
                if answered_rx.recv_timeout(left).is_err() {
                    break;
                }
            }
            drop(pipe);
        });
        let what = format!("sp fed {} byte(s) of input with {expected} request(s), waiting for its exit", stdin.len());
        let status = try_wait_deadline(&mut child, &what);
        let stderr = String::from_utf8_lossy(&collect(&stderr, "sp's stderr")).into_owned();
        let status = status.unwrap_or_else(|e| panic!("{e}\ncommand: {}\nstderr:\n{stderr}", self.describe()));
        let stdout = collect(&stdout_rx, "sp's stdout");
        Run::new(status, stdout, stderr, self.describe())
    }
}

/// Complete lines of `input` that are JSON-RPC requests (a method and an id): each gets
/// one answer. (A last line without its newline is only read at EOF.)
fn requests_in(input: &[u8]) -> usize {
    input
        .split_inclusive(|b| *b == b'\n')
        .filter(|l| l.ends_with(b"\n"))
        .filter_map(|l| serde_json::from_slice::<Value>(l).ok())
        .filter(|v| v.get("method").is_some() && v.get("id").is_some())
        .count()
}

fn shell_quote(s: &str) -> String {
    if !s.is_empty() && s.bytes().all(|b| b.is_ascii_alphanumeric() || b"-_./=:,+@%".contains(&b)) {
        s.to_owned()
    } else {
        format!("'{}'", s.replace('\'', r"'\''"))
    }
}

/// `run_sp(args, env, stdin)`: env is cleared except `PATH` plus `env`.
pub fn run_sp(args: &[&str], env: &[(&str, &str)], stdin: &[u8]) -> Run {
    let mut l = Launch::new(args);
    for (k, v) in env {
        l = l.env(k, v);
    }
    l.run(stdin)
}

/// A finished process.
#[derive(Debug)]
pub struct Run {
    pub status: ExitStatus,
    pub stdout: Vec<u8>,
    pub stderr: String,
    pub cmd: String,
}

impl Run {
    pub fn code(&self) -> Option<i32> {
        self.status.code()
    }

    /// The launch command and stderr, for assertion messages.
    pub fn context(&self) -> String {
        context(&self.cmd, &self.stderr, &self.stdout)
    }

    /// Asserts stdout is protocol only; returns the messages.
    pub fn protocol(&self) -> Vec<Value> {
        assert_protocol_only(&self.stdout, &self.cmd, &self.stderr)
    }

    pub fn assert_exit(&self, code: i32) {
        assert_eq!(self.code(), Some(code), "exit status {:?}, want {code}\n{}", self.status, self.context());
    }

    /// The `sp: session ended (...)` line from stderr.
    pub fn summary(&self) -> &str {
        summary_line(&self.stderr).unwrap_or_else(|| panic!("no session summary on stderr\n{}", self.context()))
    }
}

fn context(cmd: &str, stderr: &str, stdout: &[u8]) -> String {
    format!("command: {cmd}\nstdout ({} bytes): {}\nstderr:\n{stderr}", stdout.len(), py_bytes(&stdout[..stdout.len().min(4096)]))
}

/// The exit summary line on stderr, if any.
pub fn summary_line(stderr: &str) -> Option<&str> {
    stderr.lines().find(|l| l.starts_with("sp: session ended ("))
}

/// Python-`bytes`-like repr: `b'text\n'`, with `\xNN` for anything not printable ASCII.
pub fn py_bytes(bytes: &[u8]) -> String {
    let mut s = String::from("b'");
    for &b in bytes {
        match b {
            b'\\' => s.push_str("\\\\"),
            b'\'' => s.push_str("\\'"),
            b'\n' => s.push_str("\\n"),
            b'\r' => s.push_str("\\r"),
            b'\t' => s.push_str("\\t"),
            0x20..=0x7e => s.push(b as char),
            _ => {
                let _ = write!(s, "\\x{b:02x}");
            }
        }
    }
    s.push('\'');
    s
}

/// Is `line` (without its `\n`) one complete JSON-RPC 2.0 message that a server may
/// send: a response (`id` string, integer or null, exactly one of `result`/`error`), a
/// notification (`method`, optional `params`, no `id`), or the one request sp sends
/// (`elicitation/create` with an `sp-N` id and params, for approval)? Compact: no
/// surrounding space.
pub fn protocol_message(line: &[u8]) -> Option<Value> {
    if line.first() != Some(&b'{') || line.last() != Some(&b'}') {
        return None;
    }
    let v: Value = serde_json::from_slice(line).ok()?;
    let m = v.as_object()?;
    if m.get("jsonrpc")? != "2.0" {
        return None;
    }
    let keys: Vec<&str> = m.keys().map(String::as_str).collect();
    let ok = if m.get("method").is_some_and(|v| v == "elicitation/create") {
        m.get("id").and_then(Value::as_str).is_some_and(|id| id.starts_with("sp-"))
            && keys.iter().all(|k| matches!(*k, "jsonrpc" | "id" | "method" | "params"))
            && m.get("params").is_some_and(Value::is_object)
    } else if m.contains_key("method") {
        m["method"].is_string()
            && !m.contains_key("id")
            && keys.iter().all(|k| matches!(*k, "jsonrpc" | "method" | "params"))
            && m.get("params").is_none_or(|p| p.is_object())
    } else {
        let id_ok = matches!(m.get("id"), Some(Value::String(_) | Value::Null)) || m.get("id").is_some_and(|i| i.is_i64() || i.is_u64());
        let error_ok = m.get("error").is_none_or(|e| e["code"].is_i64() && e["message"].is_string());
        id_ok && keys.len() == 3 && (m.contains_key("result") ^ m.contains_key("error")) && error_ok
    };
    ok.then_some(v)
}

/// Every line of `stdout` must be one protocol message ending in `\n`. The error names
/// the first offending line, raw.
pub fn check_protocol(stdout: &[u8]) -> Result<Vec<Value>, String> {
    let mut msgs = Vec::new();
    for (i, line) in stdout.split_inclusive(|b| *b == b'\n').enumerate() {
        let body = line.strip_suffix(b"\n");
        match body.and_then(protocol_message) {
            Some(v) => msgs.push(v),
            None => return Err(format!("non-protocol stdout on line {}: {}", i + 1, py_bytes(line))),
        }
    }
    Ok(msgs)
}

/// Panics with the offending line, the command and stderr (separately) unless `stdout` is
/// protocol only. Returns the messages.
pub fn assert_protocol_only(stdout: &[u8], cmd: &str, stderr: &str) -> Vec<Value> {
    match check_protocol(stdout) {
        Ok(v) => v,
        Err(e) => panic!("{e}\ncommand: {cmd}\nstderr:\n{stderr}"),
    }
}

/// The `initialize` request a client sends first.
pub fn initialize(id: Value, version: &str) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "method": "initialize", "params": {
        "protocolVersion": version,
        "capabilities": {},
        "clientInfo": {"name": "sallyport-tests", "version": "1"}
    }})
}

pub fn initialized() -> Value {
    json!({"jsonrpc": "2.0", "method": "notifications/initialized"})
}

pub fn tool_call(id: i64, name: &str, arguments: Value) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": {"name": name, "arguments": arguments}})
}

/// Messages as newline-terminated lines, for stdin.
pub fn lines(msgs: &[Value]) -> Vec<u8> {
    let mut out = Vec::new();
    for m in msgs {
        out.extend_from_slice(m.to_string().as_bytes());
        out.push(b'\n');
    }
    out
}

/// The tool error code of a `tools/call` result, if it is an error result.
pub fn tool_error_code(result: &Value) -> Option<&str> {
    if result["isError"] != true {
        return None;
    }
    result["structuredContent"]["error"]["code"].as_str()
}

/// An interactive `sp mcp`: each request is written, then its one answer read.
pub struct Session {
    pub launch: Launch,
    child: Child,
    stdin: Option<ChildStdin>,
    /// Lines of sp's stdout from a reader thread (the last one may lack its `\n`); the
    /// channel closes at end of file.
    stdout: Receiver<Vec<u8>>,
    stderr: Option<Receiver<Vec<u8>>>,
    /// Every byte read from stdout so far.
    pub raw: Vec<u8>,
    /// `/proc/self/fd` links of the test's ends of the stdout and stderr pipes
    /// (`pipe:[inode]`; both ends of a pipe share it).
    pub stdout_pipe: PathBuf,
    pub stderr_pipe: PathBuf,
}

impl Session {
    pub fn start(launch: Launch) -> Session {
        let mut child = launch.spawn();
        let stdin = child.stdin.take();
        let stdout = child.stdout.take().expect("piped stdout");
        let stderr = child.stderr.take().expect("piped stderr");
        let link = |fd: i32| std::fs::read_link(format!("/proc/self/fd/{fd}")).expect("read /proc/self/fd");
        let stdout_pipe = link(stdout.as_raw_fd());
        let stderr_pipe = link(stderr.as_raw_fd());
        let (tx, lines) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let mut reader = BufReader::new(stdout);
            loop {
                let mut line = Vec::new();
                match reader.read_until(b'\n', &mut line) {
                    Ok(0) | Err(_) => break,
                    Ok(_) => {
                        if tx.send(line).is_err() {
                            break;
                        }
                    }
                }
            }
        });
        let stderr = read_all_in_thread(stderr);
        Session { launch, child, stdin, stdout: lines, stderr: Some(stderr), raw: Vec::new(), stdout_pipe, stderr_pipe }
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Kills the process, then panics with `msg`, the command and stderr.
    fn fail(&mut self, msg: &str) -> ! {
        let _ = self.child.kill();
        let _ = self.child.wait();
        // sp is dead; its stderr ends unless a descendant holds it: wait a little only.
        let stderr = self.stderr.take().and_then(|rx| rx.recv_timeout(Duration::from_secs(5)).ok()).unwrap_or_default();
        let stderr = String::from_utf8_lossy(&stderr);
        panic!("{msg}\ncommand: {}\nstdout so far: {}\nstderr:\n{stderr}", self.launch.describe(), py_bytes(&self.raw));
    }

    pub fn send_raw(&mut self, bytes: &[u8]) {
        let pipe = self.stdin.as_mut().expect("stdin still open");
        if let Err(e) = pipe.write_all(bytes).and_then(|()| pipe.flush()) {
            self.fail(&format!("writing to sp's stdin failed: {e}"));
        }
    }

    pub fn send(&mut self, msg: &Value) {
        let mut line = msg.to_string().into_bytes();
        line.push(b'\n');
        self.send_raw(&line);
    }

    /// Reads one line from stdout; it must be a protocol message.
    pub fn read(&mut self) -> Value {
        self.read_for("a line on sp's stdout")
    }

    /// [`Session::read`], waiting at most [`deadline`]; `what` names the awaited line in
    /// the failure.
    pub fn read_for(&mut self, what: &str) -> Value {
        let line = match self.stdout.recv_timeout(deadline()) {
            Ok(line) => line,
            Err(RecvTimeoutError::Disconnected) => self.fail(&format!("sp closed stdout while waiting for {what}")),
            Err(RecvTimeoutError::Timeout) => self.fail(&format!("no {what} after {} s; sp killed", deadline().as_secs())),
        };
        self.raw.extend_from_slice(&line);
        let n = self.raw.iter().filter(|b| **b == b'\n').count() + usize::from(!line.ends_with(b"\n"));
        match line.strip_suffix(b"\n").and_then(protocol_message) {
            Some(v) => v,
            None => self.fail(&format!("non-protocol stdout on line {n}: {}", py_bytes(&line))),
        }
    }

    /// Sends a request and returns its answer, which must carry the same id.
    pub fn call(&mut self, msg: &Value) -> Value {
        self.send(msg);
        let answer = self.read_for(&format!("answer to {} id {}", msg["method"], msg["id"]));
        if answer["id"] != msg["id"] {
            self.fail(&format!("answer to id {} carries id {}: {answer}", msg["id"], answer["id"]));
        }
        answer
    }

    /// `initialize` with `version`, then `notifications/initialized`; returns the
    /// initialize result.
    pub fn ready(&mut self, version: &str) -> Value {
        let answer = self.call(&initialize(json!(0), version));
        if !answer["result"].is_object() {
            self.fail(&format!("initialize failed: {answer}"));
        }
        self.send(&initialized());
        answer["result"].clone()
    }

    /// `tools/call` and its `result` (panics on a JSON-RPC error).
    pub fn tool(&mut self, id: i64, name: &str, arguments: Value) -> Value {
        let answer = self.call(&tool_call(id, name, arguments));
        if !answer["result"].is_object() {
            self.fail(&format!("tools/call {name} got no result: {answer}"));
        }
        answer["result"].clone()
    }

    /// Closes stdin, reads the rest of stdout, waits for exit.
    pub fn finish(mut self) -> Run {
        drop(self.stdin.take());
        let end = Instant::now() + deadline();
        loop {
            match self.stdout.recv_timeout(end.saturating_duration_since(Instant::now())) {
                Ok(line) => self.raw.extend_from_slice(&line),
                Err(RecvTimeoutError::Disconnected) => break,
                Err(RecvTimeoutError::Timeout) => self.fail(&format!("sp's stdout still open {} s after its stdin closed; sp killed", deadline().as_secs())),
            }
        }
        let status = match try_wait_deadline(&mut self.child, "sp's exit after its stdin closed") {
            Ok(status) => status,
            Err(e) => self.fail(&e),
        };
        let stderr = self.stderr.take().map(|rx| collect(&rx, "sp's stderr")).unwrap_or_default();
        let stderr = String::from_utf8_lossy(&stderr).into_owned();
        Run::new(status, std::mem::take(&mut self.raw), stderr, self.launch.describe())
    }
}

impl Drop for Session {
    fn drop(&mut self) {
        // A test that failed mid-session must not leave sp running.
        if self.stderr.is_some() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}
