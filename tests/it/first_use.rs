//! Issue 32, section 1 ("First use"), through the built `sp` and the shipped files:
//! `sp init` writes a policy `sp check` loads and `sp mcp` serves (listing only what
//! it makes possible), and never overwrites a file; `sp mcp --help` is the command's
//! own help; the shell completions parse (bash -n, and zsh -n and fish -n where
//! installed: skipped loudly otherwise); each client snippet in
//! packaging/clients/ parses and names `sp mcp --config FILE` as separate arguments;
//! sp-approve is executable in the tree (make install and the packages copy its mode).
#![allow(clippy::disallowed_methods, reason = "tests start sp, shells and python3; the fence in clippy.toml is for src/")]

use crate::support;

use std::path::{Path, PathBuf};

use serde_json::{json, Value};

use support::process::{run_sp, Launch, Session, TempDir};

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// Whether `program` runs here; a missing one is skipped loudly (zsh and fish are not
/// in the CI image; bash and python3 are).
fn have(program: &str) -> bool {
    let ok = std::process::Command::new(program).arg("--version").output().is_ok_and(|o| o.status.success());
    if !ok {
        eprintln!("SKIPPED: {program} is not installed, its check did not run");
    }
    ok
}

#[test]
fn sp_init_writes_a_policy_that_sp_check_loads_and_sp_mcp_serves() {
    let dir = TempDir::new("init");
    let file = dir.path.join("conf/policy.json");
    let file_s = file.display().to_string();
    // As installed: sp with sp-approve beside it (the approver `sp init` names, and
    // that `sp check` then finds executable).
    std::fs::create_dir(dir.path.join("bin")).unwrap();
    let sp = dir.path.join("bin/sp");
    std::fs::copy(support::process::sp_bin(), &sp).unwrap();
    let approver = dir.path.join("bin/sp-approve");
    std::fs::copy(concat!(env!("CARGO_MANIFEST_DIR"), "/packaging/sp-approve"), &approver).unwrap();
    std::fs::set_permissions(&approver, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let init = std::process::Command::new(&sp).args(["init", &file_s]).stdin(std::process::Stdio::null()).output().unwrap();
    assert_eq!(init.status.code(), Some(0), "{}", String::from_utf8_lossy(&init.stderr));
    let out = String::from_utf8(init.stdout.clone()).unwrap();
    assert!(out.starts_with(&format!("wrote {file_s} (mode 0600)\n")), "{out}");
    assert!(std::fs::read_to_string(&file).unwrap().contains(&approver.display().to_string()), "the approver beside sp is named");
    assert!(out.contains("http.allow[1]   POST there too, each call only after the approver says yes"), "{out}");
    let check = run_sp(&["check", "--config", &file_s], &[], b"");
    check.assert_exit(0);
    let summary = String::from_utf8(check.stdout.clone()).unwrap();
    assert!(summary.contains("allow rules: http.allow[1]"), "sp check names the rule that asks: {summary}");
    // Served: the tools the commentary names, and no ssh_exec.
    let policy: Value = serde_json::from_str(&std::fs::read_to_string(&file).unwrap()).unwrap();
    let mut served = policy.clone();
    served["audit"] = json!({"path": null});
    let served_file = dir.file("served.json", served.to_string().as_bytes(), 0o600);
    let mut s = Session::start(Launch::mcp(&served_file, &[]));
    s.ready("2025-06-18");
    let list = s.call(&json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}));
    let names: Vec<&str> = list["result"]["tools"].as_array().unwrap().iter().filter_map(|t| t["name"].as_str()).collect();
    assert_eq!(names, ["http_request", "http_get", "sp_inventory"]);
    s.finish().assert_exit(0);
    // Never over an existing file: exit 1, the file as it was.
    let again = run_sp(&["init", &file_s], &[], b"");
    again.assert_exit(1);
    assert_eq!(again.stderr, format!("sp init: {file_s} exists; it is left as it is (remove it, or name another FILE)\n"));
    assert_eq!(serde_json::from_str::<Value>(&std::fs::read_to_string(&file).unwrap()).unwrap(), policy);
    // `-`: the same policy on stdout, nothing written.
    let printed = run_sp(&["init", "-"], &[], b"");
    printed.assert_exit(0);
    assert_eq!(serde_json::from_slice::<Value>(&printed.stdout).unwrap()["http"], policy["http"]);
    // No FILE: where sp mcp looks first after $SP_CONFIG.
    let home = dir.path.join("home");
    let by_default = run_sp(&["init"], &[("HOME", &home.display().to_string())], b"");
    by_default.assert_exit(0);
    assert!(home.join(".config/sallyport/policy.json").is_file(), "{}", by_default.context());
}

#[test]
fn sp_mcp_help_is_the_commands_own() {
    for (command, first) in [("mcp", "  sp mcp [--config FILE]"), ("check", "  sp check [--config FILE]"), ("init", "  sp init [FILE | -]")] {
        let run = run_sp(&[command, "--help"], &[], b"");
        run.assert_exit(0);
        let text = String::from_utf8(run.stdout.clone()).unwrap();
        assert!(text.lines().nth(1).is_some_and(|l| l.starts_with(first)), "sp {command} --help:\n{text}");
        assert!(!text.contains("approve  list or revoke"), "sp {command} --help printed the general help:\n{text}");
    }
}

#[test]
fn shell_completions_parse() {
    let dir = root().join("packaging/completions");
    for (shell, file) in [("bash", "sp.bash"), ("zsh", "_sp"), ("fish", "sp.fish")] {
        let path = dir.join(file);
        assert!(path.is_file(), "{} is missing", path.display());
        if !have(shell) {
            continue;
        }
        let flag = if shell == "fish" { "--no-execute" } else { "-n" };
        let out = std::process::Command::new(shell).arg(flag).arg(&path).output().unwrap();
        assert!(out.status.success(), "{shell} {flag} {}: {}", path.display(), String::from_utf8_lossy(&out.stderr));
    }
    // bash: the completion offers the commands, and each command's own flags.
    let script = format!(
        "source {}; COMP_WORDS=(sp i); COMP_CWORD=1; _sp; echo \"${{COMPREPLY[*]}}\"; COMP_WORDS=(sp check --p); COMP_CWORD=2; _sp; echo \"${{COMPREPLY[*]}}\"",
        dir.join("sp.bash").display()
    );
    let out = std::process::Command::new("bash").arg("-c").arg(script).output().unwrap();
    assert_eq!(String::from_utf8_lossy(&out.stdout), "init\n--probe\n", "{}", String::from_utf8_lossy(&out.stderr));
}

/// The command and arguments of a client entry: `sp`, then `mcp --config FILE` as three
/// arguments (a client passes them through as they are).
fn assert_entry(file: &Path, entry: &Value) {
    assert!(entry["command"].as_str().is_some_and(|c| c.ends_with("/sp")), "{}: {entry}", file.display());
    let args: Vec<&str> = entry["args"].as_array().unwrap().iter().filter_map(Value::as_str).collect();
    assert_eq!(args[..2], ["mcp", "--config"], "{}", file.display());
    assert!(args.len() == 3 && args[2].starts_with('/'), "{}: {args:?}", file.display());
}

#[test]
fn client_snippets_parse_and_name_sp_mcp() {
    let dir = root().join("packaging/clients");
    for (file, key) in [("claude-desktop.json", "mcpServers"), ("claude-code.json", "mcpServers"), ("cursor.json", "mcpServers"), ("vscode.json", "servers")]
    {
        let path = dir.join(file);
        let v: Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap_or_else(|e| panic!("{file}: {e}"));
        assert_entry(&path, &v[key]["sallyport"]);
    }
    let toml = dir.join("codex.toml");
    if !have("python3") {
        return;
    }
    let code = "import json,sys,tomllib; print(json.dumps(tomllib.load(open(sys.argv[1],'rb'))))";
    let out = std::process::Command::new("python3").args(["-c", code]).arg(&toml).output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    if stderr.contains("No module named 'tomllib'") {
        eprintln!("SKIPPED: python3 has no tomllib (3.11+): codex.toml not parsed");
        return;
    }
    assert!(out.status.success(), "codex.toml: {stderr}");
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_entry(&toml, &v["mcp_servers"]["sallyport"]);
}

#[test]
fn sp_approve_is_executable_in_the_tree() {
    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata(root().join("packaging/sp-approve")).unwrap().permissions().mode();
    assert_eq!(mode & 0o755, 0o755, "packaging/sp-approve must be 0755 (mode {mode:o})");
    // The example policy names where make install puts it.
    let example = std::fs::read_to_string(root().join("packaging/policy.example.json")).unwrap();
    assert!(example.contains("\"/usr/local/bin/sp-approve\""), "{example}");
}
