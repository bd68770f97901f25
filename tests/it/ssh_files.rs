//! `ssh_get` and `ssh_put` end to end (issue 34 §2): the built `sp mcp` against a real
//! OpenSSH `sshd` on 127.0.0.1 with the SFTP subsystem (`internal-sftp`), logging in as
//! the user running the tests, so the "remote" file system is this machine's: the
//! tests plant files and symlinks there directly and look at what `sp` left.
//!
//! Attacks tried, and what held:
//! - `..` and `.` components, `//`, a relative path, NUL in the path: refused at parsing
//!   (`SP_BAD_ARGUMENTS`), nothing sent to the server (sshd logs no connection).
//! - A symlink inside an allowed directory pointing at a file outside it (get): refused
//!   after the server's realpath (`SP_DENIED`, "resolves to"), the file's content
//!   nowhere in the result.
//! - A symlinked directory under a write pattern pointing outside it (put): refused
//!   by the directory's realpath, nothing created outside.
//! - A symlink at the target of a put, pointing outside (overwrite): the link itself is
//!   replaced by the new file; the file it pointed to is unchanged.
//! - A put onto an existing file without `overwrite`: refused, the file unchanged; no
//!   temporary file is left behind in any case.
//! - A read rule used to write, a write rule used to read: `SP_DENIED` at authorization.
//! - Files above `files.max_bytes` (both ways) and content above `ssh.max_output_bytes`
//!   once base64-encoded: `SP_DENIED`, the content not returned.
//! - The host's private key copied into a readable file: redacted in the result.
#![allow(clippy::disallowed_methods, reason = "tests start sp and sshd; the fence in clippy.toml is for src/")]

use crate::support;

use std::os::unix::fs::PermissionsExt;
use std::path::PathBuf;

use base64::Engine as _;
use serde_json::{json, Value};
use sha2::{Digest, Sha256};

use support::process::{tool_error_code, Launch, Session, TempDir};
use support::sshd::{self, Sshd};

const VERSION: &str = "2025-06-18";

struct World {
    sshd: Sshd,
    dir: TempDir,
    /// The canonical path of `dir` (patterns are matched against the server's realpath).
    root: PathBuf,
    journal: PathBuf,
}

impl World {
    fn new() -> Option<World> {
        if !sshd::available() {
            return None;
        }
        let sshd = Sshd::start_with("Subsystem sftp internal-sftp\n");
        let dir = TempDir::new("ssh-files");
        let root = std::fs::canonicalize(&dir.path).unwrap();
        for d in ["logs", "up", "outside", "elsewhere"] {
            std::fs::create_dir(root.join(d)).unwrap();
        }
        let journal = root.join("audit.jsonl");
        Some(World { sshd, dir, root, journal })
    }

    fn p(&self, rel: &str) -> String {
        self.root.join(rel).display().to_string()
    }

    /// Host `web1` with `files` (read `logs/*.log`, write `up/*` and `uplink/*`, mode
    /// 0640, `max_bytes`), `ssh.max_output_bytes` as given, the journal on.
    fn session(&self, max_bytes: u64, max_output: u64) -> Session {
        let kh = self.dir.file("known_hosts", format!("{}\n", self.sshd.known_hosts_line()).as_bytes(), 0o600);
        let host = json!({
            "address": "127.0.0.1", "port": self.sshd.port, "user": self.sshd.user,
            "auth": {"key_file": self.sshd.client_key},
            "commands": ["uptime"],
            "files": {"read": [self.p("logs/*.log")], "write": [self.p("up/*"), self.p("uplink/*")], "mode": "0640", "max_bytes": max_bytes}
        });
        let policy = json!({
            "ssh": {"known_hosts": kh, "connect_timeout_s": 5, "max_output_bytes": max_output, "hosts": {"web1": host}},
            "audit": {"path": self.journal}
        });
        let file = self.dir.file("policy.json", policy.to_string().as_bytes(), 0o600);
        let mut s = Session::start(Launch::mcp(&file, &["-v"]));
        s.ready(VERSION);
        s
    }

    fn results(&self) -> Vec<Value> {
        let text = std::fs::read_to_string(&self.journal).unwrap_or_default();
        text.lines().map(|l| serde_json::from_str::<Value>(l).unwrap()).filter(|r| r["kind"] == "result").collect()
    }

    /// Names in `dir` that look like sp's temporary files.
    fn temps(&self, dir: &str) -> Vec<String> {
        std::fs::read_dir(self.root.join(dir))
            .unwrap()
            .flatten()
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .filter(|n| n.contains(".sp-"))
            .collect()
    }
}

fn sc(r: &Value) -> &Value {
    &r["structuredContent"]
}

fn sha(bytes: &[u8]) -> String {
    Sha256::digest(bytes).iter().map(|b| format!("{b:02x}")).collect()
}

fn message(r: &Value) -> String {
    sc(r)["error"]["message"].as_str().unwrap_or_default().to_owned()
}

#[test]
fn get_reads_within_the_rules_and_the_realpath_too() {
    let Some(w) = World::new() else { return };
    let text = "line one\nline two ünïcode\n";
    std::fs::write(w.root.join("logs/app.log"), text).unwrap();
    std::fs::write(w.root.join("logs/notes.txt"), "not a log").unwrap();
    let secret_text = "TOP-SECRET-OUTSIDE-THE-RULES";
    std::fs::write(w.root.join("outside/secret.log"), secret_text).unwrap();
    std::os::unix::fs::symlink(w.root.join("outside/secret.log"), w.root.join("logs/escape.log")).unwrap();
    // A link that stays inside the rules is fine: its realpath matches too.
    std::os::unix::fs::symlink(w.root.join("logs/app.log"), w.root.join("logs/alias.log")).unwrap();
    let mut s = w.session(4096, 1 << 20);

    let listed = s.call(&json!({"jsonrpc": "2.0", "id": 100, "method": "tools/list"}));
    let names: Vec<&str> = listed["result"]["tools"].as_array().unwrap().iter().filter_map(|t| t["name"].as_str()).collect();
    assert_eq!(names, ["sp_inventory", "ssh_exec", "ssh_get", "ssh_put"], "{listed}");

    let r = s.tool(1, "ssh_get", json!({"host": "web1", "path": w.p("logs/app.log")}));
    assert_eq!(r["isError"], false, "{r}");
    let o = sc(&r);
    assert_eq!((o["content"].as_str(), o["encoding"].as_str(), o["bytes"].as_u64()), (Some(text), Some("utf-8"), Some(text.len() as u64)), "{r}");
    assert_eq!(o["sha256"].as_str(), Some(sha(text.as_bytes()).as_str()));
    assert_eq!(o["path"].as_str(), Some(w.p("logs/app.log").as_str()));
    assert!(o["host_key_fingerprint"].as_str().unwrap().starts_with("SHA256:"), "{r}");

    let r = s.tool(2, "ssh_get", json!({"host": "web1", "path": w.p("logs/alias.log")}));
    assert_eq!((sc(&r)["content"].as_str(), sc(&r)["path"].as_str()), (Some(text), Some(w.p("logs/app.log").as_str())), "{r}");

    // Not matching any read pattern: refused before anything is sent.
    let r = s.tool(3, "ssh_get", json!({"host": "web1", "path": w.p("logs/notes.txt")}));
    assert_eq!(tool_error_code(&r), Some("SP_DENIED"), "{r}");
    assert!(message(&r).contains("matches none of its files.read patterns"), "{r}");
    // A write pattern does not allow reading.
    std::fs::write(w.root.join("up/x"), "x").unwrap();
    let r = s.tool(4, "ssh_get", json!({"host": "web1", "path": w.p("up/x")}));
    assert_eq!(tool_error_code(&r), Some("SP_DENIED"), "{r}");

    // The symlink out: the agent's path matches, the server's realpath does not.
    let r = s.tool(5, "ssh_get", json!({"host": "web1", "path": w.p("logs/escape.log")}));
    assert_eq!(tool_error_code(&r), Some("SP_DENIED"), "{r}");
    assert!(message(&r).contains(&format!("resolves to {:?}", w.p("outside/secret.log"))), "{r}");
    assert!(!r.to_string().contains(secret_text), "{r}");

    // `..` and friends never reach authorization.
    for (i, path) in [
        format!("{}/../outside/secret.log", w.p("logs")),
        format!("{}/./app.log", w.p("logs")),
        w.p("logs").replace("/logs", "//logs") + "/app.log",
        "logs/app.log".into(),
        format!("{}\u{0}.log", w.p("logs/app.log")),
    ]
    .into_iter()
    .enumerate()
    {
        let r = s.tool(10 + i as i64, "ssh_get", json!({"host": "web1", "path": path}));
        assert_eq!(tool_error_code(&r), Some("SP_BAD_ARGUMENTS"), "{path:?}: {r}");
    }

    // One connection for everything (the rejected calls never connected).
    let r = s.tool(20, "ssh_exec", json!({"host": "web1", "command": "uptime"}));
    assert_eq!(r["isError"], false, "{r}");
    assert_eq!(w.sshd.connections(), 1, "ssh_get and ssh_exec share the kept session");
    s.finish();

    // The journal: bytes and sha256 of what moved, the host key.
    let rows = w.results();
    let ok: Vec<&Value> = rows.iter().filter(|r| r["tool"] == "ssh_get" && r["decision"] == "ok").collect();
    assert_eq!(ok.len(), 2, "{rows:?}");
    assert_eq!((ok[0]["bytes_out"].as_u64(), ok[0]["sha256"].as_str()), (Some(text.len() as u64), Some(sha(text.as_bytes()).as_str())), "{:?}", ok[0]);
    assert!(ok[0]["host_key_fp"].as_str().is_some_and(|f| f.starts_with("SHA256:")), "{:?}", ok[0]);
    assert!(!std::fs::read_to_string(&w.journal).unwrap().contains(secret_text));
}

#[test]
fn get_sizes_binary_and_redaction() {
    let Some(w) = World::new() else { return };
    let binary: Vec<u8> = (0..=255u8).cycle().take(1500).collect();
    std::fs::write(w.root.join("logs/blob.log"), &binary).unwrap();
    std::fs::write(w.root.join("logs/big.log"), vec![b'a'; 4097]).unwrap();
    let wide: Vec<u8> = vec![0xff; 3000];
    std::fs::write(w.root.join("logs/wide.log"), &wide).unwrap();
    // The host's own private key, planted in a readable file.
    let key = std::fs::read_to_string(&w.sshd.client_key).unwrap();
    std::fs::write(w.root.join("logs/key.log"), format!("before\n{key}after\n")).unwrap();
    let mut s = w.session(4096, 3500);

    let r = s.tool(1, "ssh_get", json!({"host": "web1", "path": w.p("logs/blob.log")}));
    assert_eq!(sc(&r)["encoding"], "base64", "{r}");
    let back = base64::engine::general_purpose::STANDARD.decode(sc(&r)["content"].as_str().unwrap()).unwrap();
    assert_eq!(back, binary);
    assert_eq!(sc(&r)["sha256"].as_str(), Some(sha(&binary).as_str()));

    let r = s.tool(2, "ssh_get", json!({"host": "web1", "path": w.p("logs/big.log")}));
    assert_eq!(tool_error_code(&r), Some("SP_DENIED"), "{r}");
    assert!(message(&r).contains("is 4097 bytes, above the host's files.max_bytes (4096)"), "{r}");

    // 3000 bytes fit files.max_bytes, but not ssh.max_output_bytes once base64 (4000).
    let r = s.tool(3, "ssh_get", json!({"host": "web1", "path": w.p("logs/wide.log")}));
    assert_eq!(tool_error_code(&r), Some("SP_DENIED"), "{r}");
    assert!(message(&r).contains("4000 as base64, above the response limit ssh.max_output_bytes (3500)"), "{r}");
    assert!(sc(&r).get("content").is_none(), "{r}");

    // 3600 bytes: within files.max_bytes, above ssh.max_output_bytes even as text:
    // refused from its size, before it is read (its row has no bytes or sha256).
    std::fs::write(w.root.join("logs/long.log"), vec![b'b'; 3600]).unwrap();
    let r = s.tool(5, "ssh_get", json!({"host": "web1", "path": w.p("logs/long.log")}));
    assert_eq!(tool_error_code(&r), Some("SP_DENIED"), "{r}");
    assert!(message(&r).contains("is 3600 bytes, above the response limit ssh.max_output_bytes (3500) even as text; nothing was read"), "{r}");

    let r = s.tool(4, "ssh_get", json!({"host": "web1", "path": w.p("logs/key.log")}));
    assert_eq!(r["isError"], false, "{r}");
    let content = sc(&r)["content"].as_str().unwrap();
    assert!(content.starts_with("before\n") && content.contains("[REDACTED:ssh:web1]"), "{r}");
    for line in key.lines().filter(|l| l.len() > 20) {
        assert!(!r.to_string().contains(line), "a key line leaked: {line}");
    }
    s.finish();
    let rows: Vec<Value> = std::fs::read_to_string(&w.journal).unwrap().lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    // Refused from their size, nothing read: big.log (files.max_bytes) and long.log
    // (the response limit); wide.log was read, then refused, and its row says what moved.
    let denied: Vec<&Value> = rows.iter().filter(|r| r["kind"] == "result" && r["code"] == "SP_DENIED").collect();
    let unread = denied.iter().filter(|r| r.get("sha256").is_none()).count();
    assert_eq!((denied.len(), unread), (3, 2), "{denied:?}");
}

#[test]
fn put_is_atomic_with_the_policy_mode_and_never_writes_through_a_symlink() {
    let Some(w) = World::new() else { return };
    std::fs::write(w.root.join("outside/target.txt"), "untouched").unwrap();
    std::os::unix::fs::symlink(w.root.join("outside/target.txt"), w.root.join("up/link")).unwrap();
    std::os::unix::fs::symlink(w.root.join("elsewhere"), w.root.join("uplink")).unwrap();
    let mut s = w.session(4096, 1 << 20);

    let r = s.tool(1, "ssh_put", json!({"host": "web1", "path": w.p("up/new.txt"), "content": "hello\n"}));
    assert_eq!(r["isError"], false, "{r}");
    assert_eq!((sc(&r)["bytes"].as_u64(), sc(&r)["mode"].as_str(), sc(&r)["replaced"].as_bool()), (Some(6), Some("0640"), Some(false)), "{r}");
    assert_eq!(sc(&r)["sha256"].as_str(), Some(sha(b"hello\n").as_str()));
    let new = w.root.join("up/new.txt");
    assert_eq!(std::fs::read_to_string(&new).unwrap(), "hello\n");
    assert_eq!(std::fs::metadata(&new).unwrap().permissions().mode() & 0o7777, 0o640, "the policy's mode, not the umask's");

    // Existing file: refused without overwrite, replaced with it.
    let r = s.tool(2, "ssh_put", json!({"host": "web1", "path": w.p("up/new.txt"), "content": "second"}));
    assert_eq!(tool_error_code(&r), Some("SP_UPSTREAM"), "{r}");
    assert!(message(&r).contains("exists (overwrite: true replaces it)"), "{r}");
    assert_eq!(std::fs::read_to_string(&new).unwrap(), "hello\n");
    let r = s.tool(3, "ssh_put", json!({"host": "web1", "path": w.p("up/new.txt"), "content": "second", "overwrite": true}));
    assert_eq!((r["isError"].as_bool(), sc(&r)["replaced"].as_bool()), (Some(false), Some(true)), "{r}");
    assert_eq!(std::fs::read_to_string(&new).unwrap(), "second");

    // A symlink at the target is replaced, never written through.
    let r = s.tool(4, "ssh_put", json!({"host": "web1", "path": w.p("up/link"), "content": "via link", "overwrite": true}));
    assert_eq!(r["isError"], false, "{r}");
    assert_eq!(std::fs::read_to_string(w.root.join("outside/target.txt")).unwrap(), "untouched");
    let link = std::fs::symlink_metadata(w.root.join("up/link")).unwrap();
    assert!(link.file_type().is_file(), "the link was replaced by a regular file");

    // A directory symlinked out of the pattern: the resolved directory does not match.
    let r = s.tool(5, "ssh_put", json!({"host": "web1", "path": w.p("uplink/x"), "content": "x"}));
    assert_eq!(tool_error_code(&r), Some("SP_DENIED"), "{r}");
    assert!(message(&r).contains(&format!("resolves to {:?}", w.p("elsewhere/x"))), "{r}");
    assert!(!w.root.join("elsewhere/x").exists());

    // Binary content, base64.
    let binary: Vec<u8> = (0..=255u8).collect();
    let b64 = base64::engine::general_purpose::STANDARD.encode(&binary);
    let r = s.tool(6, "ssh_put", json!({"host": "web1", "path": w.p("up/blob"), "content": b64, "encoding": "base64"}));
    assert_eq!(r["isError"], false, "{r}");
    assert_eq!(std::fs::read(w.root.join("up/blob")).unwrap(), binary);

    // Size limit (authorization) and the read rules (no write there).
    let r = s.tool(7, "ssh_put", json!({"host": "web1", "path": w.p("up/big"), "content": "a".repeat(4097)}));
    assert_eq!(tool_error_code(&r), Some("SP_DENIED"), "{r}");
    assert!(message(&r).contains("4097 bytes, above the host's files.max_bytes (4096)"), "{r}");
    assert!(!w.root.join("up/big").exists());
    let r = s.tool(8, "ssh_put", json!({"host": "web1", "path": w.p("logs/app.log"), "content": "x"}));
    assert_eq!(tool_error_code(&r), Some("SP_DENIED"), "{r}");
    assert!(!w.root.join("logs/app.log").exists());
    let r = s.tool(9, "ssh_put", json!({"host": "web1", "path": format!("{}/../outside/target.txt", w.p("up")), "content": "x", "overwrite": true}));
    assert_eq!(tool_error_code(&r), Some("SP_BAD_ARGUMENTS"), "{r}");
    s.finish();

    assert_eq!(w.temps("up"), Vec::<String>::new(), "no temporary file is left behind");
    assert_eq!(w.temps("elsewhere"), Vec::<String>::new());
    let rows = w.results();
    let puts: Vec<&Value> = rows.iter().filter(|r| r["tool"] == "ssh_put" && r["decision"] == "ok").collect();
    assert_eq!(puts.len(), 4, "{rows:?}");
    assert_eq!((puts[0]["bytes_in"].as_u64(), puts[0]["sha256"].as_str()), (Some(6), Some(sha(b"hello\n").as_str())), "{:?}", puts[0]);
    assert!(puts[0].get("bytes_out").is_none(), "{:?}", puts[0]);
}

/// What `sp` wrote the file to is what the rules allowed, also for a path whose
/// directory the agent spelled through a symlink that stays inside them.
#[test]
fn put_through_an_inside_symlink_lands_at_the_resolved_path() {
    let Some(w) = World::new() else { return };
    std::fs::remove_dir(w.root.join("elsewhere")).unwrap();
    std::os::unix::fs::symlink(w.root.join("up"), w.root.join("uplink")).unwrap();
    let mut s = w.session(4096, 1 << 20);
    let r = s.tool(1, "ssh_put", json!({"host": "web1", "path": w.p("uplink/f"), "content": "in"}));
    assert_eq!((r["isError"].as_bool(), sc(&r)["path"].as_str()), (Some(false), Some(w.p("up/f").as_str())), "{r}");
    assert_eq!(std::fs::read_to_string(w.root.join("up/f")).unwrap(), "in");
    s.finish();
}
