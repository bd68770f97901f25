//! `make demo`: a scripted MCP session through the real `sp mcp` binary.
//!
//! Starts a demo API on 127.0.0.1 (an ephemeral port), writes a policy and an owner-only
//! secret file to a temporary directory, then plays the agent: initialize, tools/list,
//! sp_inventory, an authorized request whose bearer token the agent never sees (the demo
//! API even echoes it back: the gateway scrubs it), a denied request, a refused argument,
//! an upstream MCP server's tool (mcp-server-time from `make upstreams`, behind the same
//! gate: its `timezone` argument pinned to `Europe/*` and `UTC`), and finally a
//! malformed line that closes the session. Prints what happened, what the API received,
//! and sp's own exit status and counters.
//!
//! It prints the policy it used first, and keeps a copy to start from in
//! `target/demo/policy.json` (its secret from `$DEMO_API_TOKEN`, the journal at its
//! default place).
//!
//! Usage: `cargo run --example demo -- target/release/sp`
#![allow(
    clippy::disallowed_methods,
    reason = "tests and benchmarks start sp, sshd and clients and read their environment; the fence in clippy.toml is for src/"
)]
// This program talks to a person on a terminal; it is not the gateway, whose stdout is
// the protocol and is confined to src/out.rs.
#![allow(clippy::print_stdout, clippy::disallowed_macros)]

#[path = "../tests/support/http_server.rs"]
mod http_server;

use std::io::{BufRead, BufReader, Read, Write};
use std::os::unix::fs::PermissionsExt;
use std::process::{Command, Stdio};

use http_server::{Reply, TestServer};
use serde_json::{json, Value};

/// `target/demo/policy.json`: the demo's policy with its temporary paths taken out (the
/// secret from `$DEMO_API_TOKEN`, the journal at its default place), in a 0700
/// directory, mode 0600, as `sp` wants a policy kept.
fn keep_copy(policy: &Value) -> std::io::Result<std::path::PathBuf> {
    use std::os::unix::fs::DirBuilderExt;
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("target/demo");
    std::fs::DirBuilder::new().recursive(true).mode(0o700).create(&dir)?;
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o700))?;
    let mut copy = policy.clone();
    if let Some(obj) = copy.as_object_mut() {
        obj.remove("audit");
    }
    copy["credentials"]["demo-api"]["source"] = json!({"env": "DEMO_API_TOKEN"});
    let path = dir.join("policy.json");
    let _ = std::fs::remove_file(&path);
    std::fs::write(&path, serde_json::to_string_pretty(&copy).unwrap() + "\n")?;
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600))?;
    Ok(path)
}

fn main() {
    let sp = std::env::args().nth(1).unwrap_or_else(|| "target/release/sp".into());
    let api = TestServer::start();
    let dir = std::env::temp_dir().join(format!("sp-demo-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let token = format!("demo-token-{:x}", std::process::id() as u64 * 0x9e37_79b9);
    let secret = dir.join("demo-api.token");
    std::fs::write(&secret, format!("{token}\n")).expect("write secret");
    std::fs::set_permissions(&secret, std::fs::Permissions::from_mode(0o600)).expect("chmod");
    let host = format!("127.0.0.1:{}", api.port);
    // An upstream MCP server (`make upstreams`, which `make demo` runs first).
    let time_server = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join(".venv-upstreams/bin/mcp-server-time");
    let upstreams = if time_server.exists() {
        // It starts confined (sp-policy(5), "sandbox"): read-only system directories, plus
        // what it needs to run: its venv and the Python the venv was made from.
        let venv = time_server.parent().and_then(|b| b.parent()).expect("the venv");
        let cfg = std::fs::read_to_string(venv.join("pyvenv.cfg")).unwrap_or_default();
        let python_home = cfg.lines().find_map(|l| l.strip_prefix("home = ")).and_then(|h| std::path::Path::new(h.trim()).parent().map(|p| p.to_path_buf()));
        let read: Vec<std::path::PathBuf> = std::iter::once(venv.to_path_buf()).chain(python_home).collect();
        json!({"time": {
            "command": [time_server, "--local-timezone", "UTC"],
            "tools": {"allow": ["get_current_time"]},
            "arguments": {"get_current_time": {"timezone": ["Europe/*", "UTC"]}},
            "sandbox": {"read": read, "network": false}
        }})
    } else {
        println!("(no {}: run `make upstreams` for the upstream part of the demo)", time_server.display());
        json!({})
    };
    let policy = json!({
        "upstreams": upstreams,
        "credentials": {
            "demo-api": {"source": {"file": secret}, "inject": {"bearer": {}}, "hosts": [host], "paths": ["/v1/*"]}
        },
        "http": {"allow": [{"hosts": [host], "methods": ["GET", "POST"], "paths": ["/v1/*"]}], "timeout_s": 5},
        "audit": {"path": dir.join("audit.jsonl")}
    });
    let policy_path = dir.join("policy.json");
    std::fs::write(&policy_path, serde_json::to_string_pretty(&policy).unwrap()).expect("write policy");
    api.route("/v1/whoami", Reply::json(200, "{\"user\":\"demo\",\"plan\":\"free\"}"));

    println!("Sallyport demo");
    println!("  demo API      http://{host} (loopback)");
    println!("  policy        {}", policy_path.display());
    println!("  secret file   {} (mode 0600; the agent never sees it)", secret.display());
    println!("  command       {sp} mcp --config {}\n", policy_path.display());
    // Issue 32, section 1: the policy the demo uses, in full, and a copy to start from.
    println!("The policy of this demo:\n{}\n", serde_json::to_string_pretty(&policy).unwrap());
    match keep_copy(&policy) {
        Ok(copy) => println!(
            "A copy to start from: {} (the same rules; its secret comes from $DEMO_API_TOKEN, its journal goes to the default place; `{sp} check --config {}` reads it)\n",
            copy.display(),
            copy.display()
        ),
        Err(e) => println!("(no copy kept: {e})\n"),
    }

    let mut child = Command::new(&sp)
        .args(["mcp", "--config"])
        .arg(&policy_path)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("cannot start {sp}: {e} (run `make build` first)"));
    let mut stdin = child.stdin.take().unwrap();
    let mut stdout = BufReader::new(child.stdout.take().unwrap());
    let mut send = |line: &str, label: &str| {
        println!("agent -> {label}");
        stdin.write_all(line.as_bytes()).unwrap();
        stdin.write_all(b"\n").unwrap();
        stdin.flush().unwrap();
    };
    let mut transcript = String::new();
    let mut recv = || -> Value {
        let mut line = String::new();
        stdout.read_line(&mut line).unwrap();
        transcript.push_str(&line);
        serde_json::from_str(&line).unwrap_or(Value::Null)
    };
    let call = |id: u64, name: &str, args: Value| {
        json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": {"name": name, "arguments": args}}).to_string()
    };

    send(
        &json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "demo", "version": "1"}}}).to_string(),
        "initialize",
    );
    let r = recv();
    println!("   <- protocol {} with {} {}", r["result"]["protocolVersion"], r["result"]["serverInfo"]["name"], r["result"]["serverInfo"]["version"]);
    send(r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#, "notifications/initialized");

    send(r#"{"jsonrpc":"2.0","id":2,"method":"tools/list"}"#, "tools/list");
    let r = recv();
    let names: Vec<&str> = r["result"]["tools"].as_array().map(|t| t.iter().filter_map(|t| t["name"].as_str()).collect()).unwrap_or_default();
    println!("   <- tools: {}", names.join(", "));

    send(&call(3, "sp_inventory", json!({})), "sp_inventory");
    let r = recv();
    println!("   <- {}", r["result"]["structuredContent"]["http"]);

    let url = format!("http://{host}/v1/whoami");
    send(&call(4, "http_request", json!({"method": "GET", "url": url})), &format!("http_request GET {url} (no credential named)"));
    let r = recv();
    let sc = &r["result"]["structuredContent"];
    println!("   <- status {}, body {}", sc["status"], sc["json"]);
    let seen = api.requests();
    if let Some(req) = seen.last() {
        let auth = req.header("authorization").unwrap_or("(none)");
        let shown = if auth.contains(&token) { format!("Bearer {}… (the real token, injected by sp)", &token[..12]) } else { auth.to_owned() };
        println!("      the demo API received Authorization: {shown}");
    }

    // Make the API echo the token back: the gateway must scrub it from the result.
    api.route("/v1/echo", Reply::json(200, &format!("{{\"you_sent\":\"Bearer {token}\"}}")));
    let url = format!("http://{host}/v1/echo");
    send(&call(5, "http_request", json!({"method": "GET", "url": url})), "http_request GET /v1/echo (the API echoes the token back)");
    let r = recv();
    println!("   <- body {} (scrubbed by sp)", r["result"]["structuredContent"]["json"]);

    let url = format!("http://{host}/admin/users");
    send(&call(6, "http_request", json!({"method": "DELETE", "url": url})), "http_request DELETE /admin/users");
    let r = recv();
    println!("   <- {}", r["result"]["content"][0]["text"]);

    let url = format!("http://{host}/v1/whoami");
    send(
        &call(7, "http_request", json!({"method": "GET", "url": url, "headers": {"Authorization": "Bearer guessed"}})),
        "http_request with its own Authorization header",
    );
    let r = recv();
    println!("   <- {}", r["result"]["content"][0]["text"]);

    if names.contains(&"time_get_current_time") {
        send(&call(8, "time_get_current_time", json!({"timezone": "Europe/Paris"})), "time_get_current_time Europe/Paris (an upstream MCP server's tool)");
        let r = recv();
        println!("   <- {} (the upstream's own answer, through sp)", r["result"]["content"][0]["text"]);
        send(&call(9, "time_get_current_time", json!({"timezone": "America/New_York"})), "time_get_current_time America/New_York");
        let r = recv();
        println!("   <- {}", r["result"]["content"][0]["text"]);
    }

    send("loading optional extension... done", "a stray debug line (not JSON)");
    let r = recv();
    println!("   <- error {} {} (id {}); sp closes the session", r["error"]["code"], r["error"]["message"], r["id"]);

    let status = child.wait().expect("wait");
    let mut stderr = String::new();
    child.stderr.take().unwrap().read_to_string(&mut stderr).unwrap();
    let summary = stderr.lines().find(|l| l.starts_with("sp: session ended")).unwrap_or("(no summary)");
    stdout.read_to_string(&mut transcript).unwrap();
    println!("\nsp exited with status {}", status.code().map_or("signal".into(), |c| c.to_string()));
    println!("{summary}");
    println!("requests that reached the demo API: {} (the denied and refused ones never left sp)", api.requests().len());
    let journal_path = dir.join("audit.jsonl");
    let journal = std::fs::read_to_string(&journal_path).unwrap_or_default();
    let kinds: Vec<String> =
        journal.lines().filter_map(|l| serde_json::from_str::<Value>(l).ok()).filter_map(|row| row["kind"].as_str().map(str::to_owned)).collect();
    println!("audit journal {}: {} rows ({})", journal_path.display(), kinds.len(), kinds.join(" "));
    let verify = Command::new(&sp).args(["audit", "verify"]).arg(&journal_path).output().expect("sp audit verify");
    println!("sp audit verify: {}", String::from_utf8_lossy(&verify.stdout).trim());
    let leaked = stderr.contains(&token) || transcript.contains(&token) || journal.contains(&token);
    println!("token seen by the agent, in sp's logs or in the journal: {}", if leaked { "YES (bug!)" } else { "no" });
    let _ = std::fs::remove_dir_all(&dir);
    if leaked || api.requests().len() != 2 || status.code() != Some(3) || !verify.status.success() {
        std::process::exit(1);
    }
}
