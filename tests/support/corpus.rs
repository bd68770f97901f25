//! Loads `tests/corpus/` and checks one case's protocol output. Used by the in-process
//! runner (`tests/corpus.rs`) and the process-level one (`tests/process_corpus.rs`).

use std::path::PathBuf;

use serde_json::Value;

/// Line cap for corpus runs, so the huge-line case stays small on disk.
pub const MAX_LINE: usize = 65536;

pub const INIT: &str = r#"{"jsonrpc":"2.0","id":"init","method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"corpus","version":"1"}}}"#;
pub const INITIALIZED: &str = r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#;
pub const PROBE: &str = r#"{"jsonrpc":"2.0","id":"probe","method":"ping"}"#;

#[derive(Debug, Clone, PartialEq)]
pub enum Expect {
    Close(i64),
    Open(i64),
    Tool(String),
    Silent,
    Exec,
}

#[derive(Debug, Clone, PartialEq)]
pub enum Prelude {
    None,
    InitOnly,
    Ready,
}

#[derive(Debug, Clone)]
pub struct Case {
    pub name: String,
    pub prelude: Prelude,
    pub expect: Expect,
    pub reason: String,
    pub input: Vec<u8>,
    /// For `close CODE echo:ID`: the request id the error must echo (issue #10); `None`
    /// means the answer carries `id: null`.
    pub echo: Option<Value>,
}

pub fn dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/corpus")
}

pub fn load() -> Vec<Case> {
    let table = std::fs::read_to_string(dir().join("cases.tsv")).expect("tests/corpus/cases.tsv");
    let mut cases = Vec::new();
    for (n, line) in table.lines().enumerate() {
        if line.starts_with('#') || line.trim().is_empty() {
            continue;
        }
        let cols: Vec<&str> = line.split('\t').collect();
        assert_eq!(cols.len(), 4, "cases.tsv line {}: want 4 tab-separated columns", n + 1);
        let prelude = match cols[1] {
            "none" => Prelude::None,
            "init-only" => Prelude::InitOnly,
            "ready" => Prelude::Ready,
            p => panic!("cases.tsv line {}: unknown prelude {p:?}", n + 1),
        };
        let mut words = cols[2].split(' ');
        let (first, second) = (words.next(), words.next());
        let echo = words.next().map(|w| {
            let id = w.strip_prefix("echo:").unwrap_or_else(|| panic!("cases.tsv line {}: third word must be echo:ID", n + 1));
            serde_json::from_str::<Value>(id).unwrap_or_else(|e| panic!("cases.tsv line {}: echo id: {e}", n + 1))
        });
        assert!(echo.is_none() || first == Some("close"), "cases.tsv line {}: echo: only with close", n + 1);
        let expect = match (first, second) {
            (Some("close"), Some(c)) => Expect::Close(c.parse().unwrap()),
            (Some("open"), Some(c)) => Expect::Open(c.parse().unwrap()),
            (Some("tool"), Some(c)) => Expect::Tool(c.to_owned()),
            (Some("silent"), None) => Expect::Silent,
            (Some("exec"), None) => Expect::Exec,
            _ => panic!("cases.tsv line {}: unknown expectation {:?}", n + 1, cols[2]),
        };
        let name = cols[0].to_owned();
        let input = std::fs::read(dir().join(format!("{name}.in"))).unwrap_or_else(|e| panic!("{name}.in: {e}"));
        assert!(!cases.iter().any(|c: &Case| c.name == name), "duplicate case {name}");
        cases.push(Case { name, prelude, expect, reason: cols[3].to_owned(), input, echo });
    }
    cases
}

/// Allows every method and path on 127.0.0.1:PORT, with a credential bound to it, and
/// two SSH hosts on 127.0.0.1:PORT (`corpus`: any command; `corpus-listed`: `uptime`,
/// `systemctl status *`): any input that slipped through validation would execute (and
/// connect to PORT).
pub fn policy_json(port: u16) -> String {
    format!(
        r#"{{"credentials": {{"corpus": {{"source": {{"env": "SP_CORPUS_TOKEN"}}, "inject": {{"bearer": {{}}}}, "hosts": ["127.0.0.1:{port}"]}}}},
            "http": {{"allow": [{{"hosts": ["127.0.0.1:{port}"], "methods": ["*"], "paths": ["/*"]}}]}},
            "ssh": {{"known_hosts": "/nonexistent/sp-corpus/known_hosts", "hosts": {{
                "corpus": {{"address": "127.0.0.1", "port": {port}, "user": "corpus", "auth": {{"agent": true}}}},
                "corpus-listed": {{"address": "127.0.0.1", "port": {port}, "user": "corpus", "auth": {{"agent": true}},
                                   "commands": ["uptime", "systemctl status *"]}}}}}}}}"#
    )
}

pub fn policy(port: u16) -> sallyport::Policy {
    sallyport::Policy::from_text(&policy_json(port), std::path::Path::new("corpus-policy.json")).unwrap()
}

pub fn prelude_ready() -> Vec<u8> {
    format!("{INIT}\n{INITIALIZED}\n").into_bytes()
}

fn replace(haystack: &[u8], needle: &[u8], with: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(haystack.len());
    let mut i = 0;
    while i < haystack.len() {
        if haystack[i..].starts_with(needle) {
            out.extend_from_slice(with);
            i += needle.len();
        } else {
            out.push(haystack[i]);
            i += 1;
        }
    }
    out
}

impl Case {
    /// The whole stdin for this case: prelude, case bytes, and the probe for open sessions.
    pub fn stdin(&self, port: u16) -> Vec<u8> {
        let mut input = match self.prelude {
            Prelude::None => Vec::new(),
            Prelude::InitOnly => format!("{INIT}\n").into_bytes(),
            Prelude::Ready => prelude_ready(),
        };
        input.extend(replace(&self.input, b"{PORT}", port.to_string().as_bytes()));
        if !matches!(self.expect, Expect::Close(_)) {
            input.extend_from_slice(PROBE.as_bytes());
            input.push(b'\n');
        }
        input
    }
}

/// Checks the raw protocol bytes a case produced: every line one JSON-RPC message, then
/// the answers the expectation calls for and nothing else.
pub fn check_output(case: &Case, raw: &[u8]) -> Result<(), String> {
    if !raw.is_empty() && !raw.ends_with(b"\n") {
        return Err("output does not end with a newline".into());
    }
    let mut msgs = Vec::new();
    let body = raw.strip_suffix(b"\n").unwrap_or(raw);
    for (i, line) in body.split(|b| *b == b'\n').enumerate().filter(|_| !raw.is_empty()) {
        let v: Value = serde_json::from_slice(line).map_err(|_| format!("non-protocol stdout on line {}: {:?}", i + 1, String::from_utf8_lossy(line)))?;
        if v["jsonrpc"] != "2.0" {
            return Err(format!("line {} is not JSON-RPC 2.0: {v}", i + 1));
        }
        msgs.push(v);
    }
    let mut msgs = msgs.into_iter();
    if case.prelude != Prelude::None {
        let init = msgs.next().ok_or("no answer to initialize")?;
        if init["id"] != "init" || init["result"]["protocolVersion"] != "2025-06-18" {
            return Err(format!("bad initialize answer: {init}"));
        }
    }
    let rest: Vec<Value> = msgs.collect();
    let probe_ok = |v: &Value| v["id"] == "probe" && v["result"] == serde_json::json!({});
    let err_code = |v: &Value| v["error"]["code"].as_i64();
    match (&case.expect, rest.as_slice()) {
        (Expect::Close(code), [e]) if err_code(e) == Some(*code) && Some(&e["id"]) == case.echo.as_ref().or(Some(&Value::Null)) => Ok(()),
        (Expect::Open(code), [e, p]) if err_code(e) == Some(*code) && !e["id"].is_null() && probe_ok(p) => Ok(()),
        (Expect::Tool(code), [r, p])
            if r["result"]["isError"] == true && r["result"]["structuredContent"]["error"]["code"] == code.as_str() && probe_ok(p) =>
        {
            Ok(())
        }
        (Expect::Silent, [p]) if probe_ok(p) => Ok(()),
        (Expect::Exec, [r, p]) if r["result"]["isError"] == false && probe_ok(p) => Ok(()),
        // Issue #10: a ping is answered even while the call runs, so it may come first.
        (Expect::Exec, [p, r]) if r["result"]["isError"] == false && probe_ok(p) => Ok(()),
        (want, got) => Err(format!("want {want:?}, got {} message(s): {got:?}", got.len())),
    }
}
