//! packaging/launcher/sp-launch (issue 11), run as a client would run it from a bare
//! environment: `env -i` plus only the settings the case names.
//!
//! Attacks tried (all held):
//! - a policy that fails `sp check`: the launcher exits 1 before `sp mcp` starts; stdout
//!   stays empty (the client sees no half-started server) and the report is on stderr;
//! - variables in the launcher's environment that were not asked for (a token, a proxy,
//!   LD_PRELOAD): none reaches sp; the listed ones and SP_PASS_ENV's do;
//! - SP_PASS_ENV with something that is not a variable name (`X;touch /tmp/p`, `$(id)`,
//!   `1A`): refused before any eval;
//! - an sp mcp option with spaces and `=` passed through the launcher: arrives as one
//!   argument, after `mcp --config POLICY`;
//! - a relative XDG_STATE_HOME: not handed on (the launcher uses HOME instead).
#![allow(
    clippy::disallowed_methods,
    reason = "tests and benchmarks start sp, sshd and clients and read their environment; the fence in clippy.toml is for src/"
)]

use crate::support;

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use support::process::TempDir;

fn launcher() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("packaging/launcher/sp-launch")
}

/// `env -i VARS... /bin/sh sp-launch ARGS`, with `stdin`; (status, stdout, stderr).
fn launch(vars: &[(&str, &str)], args: &[&str], stdin: &[u8]) -> (i32, Vec<u8>, String) {
    let mut c = Command::new("/bin/sh");
    c.env_clear().envs(vars.iter().copied()).arg(launcher()).args(args);
    let mut child = c.stdin(Stdio::piped()).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().expect("start the launcher");
    let mut pipe = child.stdin.take().unwrap();
    let input = stdin.to_vec();
    let writer = std::thread::spawn(move || {
        use std::io::Write;
        let _ = pipe.write_all(&input);
    });
    let out = support::process::output_deadline(child, &format!("sh {} {args:?}", launcher().display()));
    writer.join().unwrap();
    (out.status.code().unwrap_or(-1), out.stdout, String::from_utf8_lossy(&out.stderr).into_owned())
}

const PING: &[u8] = b"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"}\n";

#[test]
fn launcher_serves_from_an_empty_environment() {
    let dir = TempDir::new("launch-ok");
    let policy = dir.file("policy.json", br#"{"audit": {"path": null}}"#, 0o644);
    let sp = support::process::sp_bin();
    let (status, stdout, stderr) = launch(&[("SP", sp), ("SP_POLICY", policy.to_str().unwrap())], &["-q"], PING);
    assert_eq!(status, 0, "{stderr}");
    assert_eq!(stdout, b"{\"id\":1,\"jsonrpc\":\"2.0\",\"result\":{}}\n", "{stderr}");
    assert_eq!(stderr, "", "sp check's report must not be printed on success");
}

#[test]
fn launcher_refuses_a_policy_that_fails_sp_check_before_sp_mcp_starts() {
    let dir = TempDir::new("launch-bad");
    let policy = dir.file("policy.json", br#"{"http": {"allow": [{"hosts": ["x"], "methods": ["FETCH"]}]}}"#, 0o644);
    let (status, stdout, stderr) = launch(&[("SP", support::process::sp_bin()), ("SP_POLICY", policy.to_str().unwrap())], &[], PING);
    assert_eq!(status, 1, "{stderr}");
    assert!(stdout.is_empty(), "stdout: {:?}", String::from_utf8_lossy(&stdout));
    assert!(stderr.contains("does not pass 'sp check'; not starting sp mcp"), "{stderr}");
    assert!(stderr.contains("FETCH"), "the check's reason must be shown: {stderr}");
}

/// A stand-in for sp that passes `check` and, for `mcp`, writes its environment and
/// arguments to the file named by the directory it lives in.
fn recording_sp(dir: &TempDir) -> (PathBuf, PathBuf) {
    let record = dir.path.join("record");
    let script = format!(
        "#!/bin/sh\n[ \"$1\" = check ] && exit 0\n{{ env | LC_ALL=C sort; echo --; for a in \"$@\"; do echo \"arg:$a\"; done; }} >{}\n",
        record.display()
    );
    (dir.file("fake-sp", script.as_bytes(), 0o755), record)
}

#[test]
fn launcher_hands_sp_only_the_minimal_environment() {
    let dir = TempDir::new("launch-env");
    let (fake, record) = recording_sp(&dir);
    let vars = [
        ("SP", fake.to_str().unwrap()),
        ("SP_POLICY", "/etc/p.json"),
        ("HOME", "/home/agent"),
        ("XDG_STATE_HOME", "relative/state"),
        ("SSH_AUTH_SOCK", "/run/agent.sock"),
        ("GITHUB_TOKEN", "sp-launch-should-drop-this"),
        ("LD_PRELOAD", "/tmp/evil.so"),
        ("https_proxy", "http://proxy:3128"),
        ("WEATHER_KEY", "k"),
        ("SP_PASS_ENV", "WEATHER_KEY UNSET_ONE"),
    ];
    let (status, _, stderr) = launch(&vars, &["-v", "--max-line-bytes=1 2"], b"");
    assert_eq!(status, 0, "{stderr}");
    let got = std::fs::read_to_string(&record).expect("the fake sp ran");
    let (env, args) = got.split_once("--\n").unwrap();
    let env: Vec<&str> = env.lines().filter(|l| !l.starts_with("PWD=") && !l.starts_with("SHLVL=") && !l.starts_with("_=")).collect();
    assert_eq!(
        env,
        [
            "HOME=/home/agent",
            "LC_ALL=C.UTF-8",
            "PATH=/usr/bin:/bin",
            "SSH_AUTH_SOCK=/run/agent.sock",
            "WEATHER_KEY=k",
            "XDG_STATE_HOME=/home/agent/.local/state",
        ]
    );
    let args: Vec<&str> = args.lines().collect();
    assert_eq!(args, ["arg:mcp", "arg:--config", "arg:/etc/p.json", "arg:-v", "arg:--max-line-bytes=1 2"]);
}

#[test]
fn launcher_refuses_sp_pass_env_entries_that_are_not_names() {
    let dir = TempDir::new("launch-names");
    let (fake, record) = recording_sp(&dir);
    let canary = dir.path.join("evaluated");
    for bad in [format!("X;touch {}", canary.display()), "$(id)".into(), "1A".into(), "A-B".into()] {
        let (status, stdout, stderr) = launch(&[("SP", fake.to_str().unwrap()), ("SP_PASS_ENV", &bad)], &[], b"");
        assert_eq!(status, 1, "{bad}: {stderr}");
        assert!(stdout.is_empty());
        assert!(stderr.contains("is not a variable name"), "{bad}: {stderr}");
    }
    assert!(!canary.exists(), "an SP_PASS_ENV entry was evaluated");
    assert!(!record.exists(), "sp mcp started");
}
