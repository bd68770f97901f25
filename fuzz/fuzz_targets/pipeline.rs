//! bytes -> the whole `sp mcp` inbound pipeline (frame -> json -> jsonrpc -> session ->
//! tool args -> authorize), in-process through `Server::serve`, with a recording
//! executor behind authorization.
//!
//! Invariants:
//! 1. every executor call corresponds, in order, to a distinct input line that this
//!    harness judges, by its own simple re-check of the fixed policy below, to be a
//!    valid and allowed `tools/call` (so anything else causes zero executor calls);
//! 2. everything written is complete JSON-RPC lines (each parses, `"jsonrpc":"2.0"`);
//! 3. the credential's secret, which the recording executor echoes back in the body and
//!    in a header of every credentialed call, never reaches the output.

#![no_main]

use std::io::Cursor;
use std::sync::OnceLock;

use libfuzzer_sys::fuzz_target;
use sallyport::fuzzing::{
    Authorized, ExecError, Executor, HttpAction, HttpOutcome, Options, Policy, ProtocolWriter, RunContext, Server,
    SshAction, SshError, SshOutcome,
};
use serde_json::Value;

const SECRET: &str = "fz-S3cret-token-9f8e7d6c5b4a";
const PORT: u16 = 8080;

/// The fixed policy: one loopback host and port with some paths, credential `tok` (a
/// file in a private temporary directory, made once) bound to `/api/*`, one SSH host
/// with a command list.
fn policy() -> &'static Policy {
    static POLICY: OnceLock<Policy> = OnceLock::new();
    POLICY.get_or_init(|| {
        use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
        // One directory per user, reused: no leftover per run.
        let dir = std::env::temp_dir().join(format!("sp-fuzz-pipeline-uid{}", euid()));
        std::fs::DirBuilder::new().mode(0o700).recursive(true).create(&dir).expect("temp dir");
        let file = dir.join("tok");
        let mut f = std::fs::OpenOptions::new().write(true).create(true).truncate(true).mode(0o600).open(&file).expect("secret file");
        std::io::Write::write_all(&mut f, SECRET.as_bytes()).expect("secret");
        let text = serde_json::json!({
            "credentials": {"tok": {"source": {"file": file.display().to_string()}, "inject": {"bearer": {}},
                                    "hosts": [format!("127.0.0.1:{PORT}")], "paths": ["/api/*"]}},
            "http": {"allow": [{"hosts": [format!("127.0.0.1:{PORT}")], "methods": ["GET", "POST"],
                                "paths": ["/api/*", "/public", "/corpus/*"]}]},
            "ssh": {"known_hosts": "/nonexistent/sp-fuzz/known_hosts", "hosts": {
                "corpus-listed": {"address": "127.0.0.1", "port": 2222, "user": "fuzz", "auth": {"agent": true},
                                  "commands": ["uptime", "systemctl status *", "cat /var/log/app/*.log"]}}}
        })
        .to_string();
        Policy::from_text(&text, std::path::Path::new("fuzz-policy.json")).expect("the fuzz policy parses")
    })
}

/// The effective uid (the owner of /proc/self), without unsafe code.
fn euid() -> u32 {
    use std::os::unix::fs::MetadataExt;
    std::fs::metadata("/proc/self").map(|m| m.uid()).unwrap_or(0)
}

#[derive(Debug, Clone, PartialEq)]
enum Call {
    Http { method: String, url: url::Url, credential: Option<String> },
    Ssh { host: String, command: String },
}

#[derive(Default)]
struct Recording {
    calls: Vec<Call>,
}

impl Executor for Recording {
    fn http(&mut self, action: &Authorized<HttpAction>, ctx: &mut RunContext<'_, '_>) -> Result<HttpOutcome, ExecError> {
        let a = action.action();
        self.calls.push(Call::Http {
            method: a.method.as_str().to_owned(),
            url: a.url.clone(),
            credential: a.credential.as_ref().map(|c| c.name.clone()),
        });
        // A reflecting server: the secret comes back in the body and a header.
        let (body, headers) = match &a.credential {
            Some(c) => {
                let secret = ctx.vault().read(&c.name, &c.source).map_err(ExecError::Secret)?;
                let s = secret.expose().to_owned();
                (format!("{{\"echo\":\"Bearer {s}\",\"b64\":\"{}\"}}", base64_std(&s)).into_bytes(), vec![("x-echo".to_owned(), s)])
            }
            None => (b"{}".to_vec(), vec![]),
        };
        Ok(HttpOutcome { status: 200, headers, body, truncated: false })
    }

    fn ssh(&mut self, action: &Authorized<SshAction>, _ctx: &mut RunContext<'_, '_>) -> Result<SshOutcome, SshError> {
        let a = action.action();
        self.calls.push(Call::Ssh { host: a.host.clone(), command: a.command.clone() });
        Ok(SshOutcome { host: a.host.clone(), exit_status: Some(0), ..SshOutcome::default() })
    }
}

fn base64_std(s: &str) -> String {
    use base64::Engine as _;
    base64::engine::general_purpose::STANDARD.encode(s)
}

/// Strict `%XX` decoding to UTF-8, as a server would.
fn decode(path: &str) -> Option<String> {
    let b = path.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'%' {
            let h = b.get(i + 1..i + 3)?;
            if !h.iter().all(u8::is_ascii_hexdigit) {
                return None;
            }
            out.push(u8::from_str_radix(std::str::from_utf8(h).ok()?, 16).ok()?);
            i += 3;
        } else {
            out.push(b[i]);
            i += 1;
        }
    }
    String::from_utf8(out).ok()
}

fn under(path: &str, prefix: &str) -> bool {
    path == prefix || path.strip_prefix(prefix).is_some_and(|r| r.starts_with('/'))
}

/// This harness's own reading of the fixed policy for one input line: `Some(call)` if
/// the line is a `tools/call` that the policy allows (a necessary condition for an
/// execution), with what the executor must then receive.
fn allowed_call(line: &[u8]) -> Option<Call> {
    let v: Value = serde_json::from_slice(line).ok()?;
    let o = v.as_object()?;
    if o.get("jsonrpc")? != "2.0" || o.get("method")? != "tools/call" || !matches!(o.get("id")?, Value::Number(_) | Value::String(_)) {
        return None;
    }
    let params = o.get("params")?.as_object()?;
    let args = params.get("arguments")?.as_object()?;
    match params.get("name")?.as_str()? {
        "http_request" => {
            let method = args.get("method")?.as_str()?;
            if !matches!(method, "GET" | "POST") {
                return None;
            }
            let url = url::Url::parse(args.get("url")?.as_str()?).ok()?;
            // Either scheme: a host pattern with a port ("127.0.0.1:8080") names no
            // scheme, and a credential may go to loopback over both (fuzz finding: the
            // harness once allowed only http, and `httpS://` showed its model was short).
            if !matches!(url.scheme(), "http" | "https") || url.host_str()?.trim_end_matches('.') != "127.0.0.1" || url.port() != Some(PORT) {
                return None;
            }
            let path = url.path().split('/').skip(1).map(decode).collect::<Option<Vec<String>>>()?;
            if path.iter().any(|s| s == "." || s == ".." || s.contains('/')) {
                return None;
            }
            let path = format!("/{}", path.join("/"));
            if !(under(&path, "/api") || path == "/public" || under(&path, "/corpus")) {
                return None;
            }
            let credential = match args.get("credential") {
                None => under(&path, "/api").then(|| "tok".to_owned()),
                Some(Value::String(c)) if c == "tok" && under(&path, "/api") => Some("tok".to_owned()),
                Some(_) => return None,
            };
            Some(Call::Http { method: method.to_owned(), url, credential })
        }
        "ssh_exec" => {
            if args.get("host")? != "corpus-listed" {
                return None;
            }
            let command = args.get("command")?.as_str()?;
            let ok = command == "uptime"
                || command.strip_prefix("systemctl status ").is_some_and(|w| {
                    !w.is_empty() && !w.starts_with('-') && w.chars().all(star_char) && !w.split('/').any(|s| s == "..")
                })
                || command.strip_prefix("cat /var/log/app/").and_then(|w| w.strip_suffix(".log")).is_some_and(|w| {
                    let word = format!("/var/log/app/{w}.log");
                    !w.is_empty() && w.chars().all(star_char) && !word.split('/').any(|s| s == "..")
                });
            ok.then(|| Call::Ssh { host: "corpus-listed".into(), command: command.to_owned() })
        }
        _ => None,
    }
}

fn star_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || "-._+=:,@%/".contains(c)
}

/// The recorded call matches what the line asked for (the URL as the executor got it
/// may carry the `query` argument appended; path, host and port are the line's).
fn same(recorded: &Call, wanted: &Call) -> bool {
    match (recorded, wanted) {
        (Call::Http { method: m1, url: u1, credential: c1 }, Call::Http { method: m2, url: u2, credential: c2 }) => {
            m1 == m2 && c1 == c2 && u1.scheme() == u2.scheme() && u1.host_str() == u2.host_str() && u1.port() == u2.port() && u1.path() == u2.path()
        }
        (a, b) => a == b,
    }
}

fuzz_target!(|data: &[u8]| {
    let policy = policy();
    let options = Options { max_line_bytes: 65536, cancel_on_eof: false, ..Options::default() };
    let mut server = Server::new(policy, Recording::default(), options);
    let mut out = ProtocolWriter::new(Vec::new());
    server.serve(Cursor::new(data.to_vec()), &mut out);
    let raw = out.into_inner();
    if std::env::var_os("SP_FUZZ_SHOW").is_some() {
        // `SP_FUZZ_SHOW=1 target/.../pipeline FILE`: what ran and what was answered.
        for c in &server.executor().calls {
            match c {
                Call::Http { method, url, credential } => eprintln!("call: {method} {url} credential={credential:?}"),
                Call::Ssh { host, command } => eprintln!("call: ssh {host} {command:?}"),
            }
        }
        eprintln!("stats: {}\noutput:\n{}", server.stats.summary(), String::from_utf8_lossy(&raw));
    }

    // 1. Executions only for lines this harness itself judges allowed, in order.
    let lines: Vec<&[u8]> = data.split(|b| *b == b'\n').map(|l| l.strip_suffix(b"\r").unwrap_or(l)).collect();
    let mut next = 0;
    for call in &server.executor().calls {
        let found = (next..lines.len()).find(|&i| allowed_call(lines[i]).is_some_and(|want| same(call, &want)));
        match found {
            Some(i) => next = i + 1,
            None => panic!("EXECUTED WITHOUT A MATCHING ALLOWED LINE: {call:?}\ninput: {:?}", String::from_utf8_lossy(data)),
        }
    }
    // sp_inventory is an execution that needs no executor; a call cancelled by the
    // client (`notifications/cancelled`, read by the control thread while the call
    // runs) may end before it reaches the executor.
    let count = |f: &dyn Fn(&str) -> bool| -> usize {
        server.stats.executions.iter().filter(|(k, _)| f(k)).map(|(_, n)| *n as usize).sum()
    };
    let executed = count(&|k| !k.starts_with("sp_inventory:"));
    let cancelled = count(&|k| k.ends_with(":SP_CANCELLED"));
    let calls = server.executor().calls.len();
    assert!(calls <= executed && calls + cancelled >= executed, "{calls} calls: {}", server.stats.summary());

    // 2. Complete JSON-RPC lines only.
    assert!(raw.is_empty() || raw.ends_with(b"\n"), "output not newline-terminated: {:?}", String::from_utf8_lossy(&raw));
    for line in raw.split(|b| *b == b'\n').filter(|l| !l.is_empty()) {
        let v: Value = serde_json::from_slice(line).unwrap_or_else(|e| panic!("not JSON ({e}): {:?}", String::from_utf8_lossy(line)));
        assert_eq!(v["jsonrpc"], "2.0", "{v}");
    }

    // 3. The echoed secret never leaves.
    let text = String::from_utf8_lossy(&raw);
    assert!(!text.contains(SECRET) && !text.contains(&base64_std(SECRET)), "SECRET IN OUTPUT: {text}");
});
