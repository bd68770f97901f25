//! What the approver shows is what will run (sp-policy(5), APPROVAL, "What the approver
//! gets"): every field `sp` hands an approver, in its environment and on its stdin, is
//! escaped like the log and `sp audit`, long values are cut visibly with their length and
//! SHA-256, hosts come as punycode beside their Unicode form, and the exact values are in
//! the description's `raw` member only. `packaging/sp-approve` shows the escaped form and
//! refuses what it cannot show faithfully.
//!
//! Attacks tried (all held):
//! - the issue's spoof, `rm -rf ~/data #` + CSI `2J` (clear) + CSI `H` (home) + a
//!   harmless-looking line, as an `ssh_exec` command on an approve-flagged host with no
//!   command list: shown with `\u{9b}` written out, in SP_APPROVAL_TARGET, in the stdin
//!   line and in SP_APPROVAL_REQUEST;
//! - every member of the escaped class in a command, in stdin, in an HTTP header value
//!   and body: ESC, BS, DEL, C1 (U+0080..U+009F with U+0085 and U+009B), the bidi
//!   embeddings and overrides U+202A..U+202E, the isolates U+2066..U+2069, the marks
//!   U+200E/U+200F/U+061C, U+2028/U+2029, the zero-width U+200B..U+200D, U+2060..U+2064,
//!   U+FEFF, the interlinear annotation marks, tag characters spelling ASCII
//!   (U+E0041..), variation selectors, non-ASCII spaces (U+00A0, U+3000), blank letters
//!   (U+3164, U+2800): each comes out as its exact escape, and the stdin line and the
//!   environment hold none of them raw (the `raw` member carries them as JSON `\u`
//!   escapes, surrogate pairs above U+FFFF);
//! - a 20 KB command: the target and the command are cut at 1024 bytes with
//!   `...[cut: N bytes, sha256 HEX]` (the whole value's length and hash); `raw` is whole;
//! - 100 headers of 16 KiB of `"` (each shown cut at 1 KiB, then doubled by JSON): the
//!   approver still starts (no E2BIG), SP_APPROVAL_REQUEST cut visibly at 64 KiB;
//! - homoglyph hosts (`аpple.com` and `pаypal.com` with a Cyrillic `а`, the all-Cyrillic
//!   `аррӏе.com`): the approver sees `xn--...` in the target, the URL and
//!   SP_APPROVAL_HOST, with the Unicode form beside it;
//! - sp-approve fed what no sp sends: a raw ESC, C1, U+202E, U+2066, U+200B, U+FEFF, a
//!   tag character, a variation selector, U+00A0, U+2028, a newline, invalid UTF-8,
//!   non-ASCII under a non-UTF-8 locale, a missing field, another
//!   SP_APPROVAL_VERSION: refused before anything is shown;
//! - markup in a notify-send body: not testable without a desktop session; `<`, `>`
//!   and `&` are written as entities (read in the script).
#![allow(clippy::disallowed_methods, reason = "tests start sp and shell scripts and read files")]

use crate::support;

use std::path::{Path, PathBuf};

use serde_json::{json, Value};
use sha2::{Digest, Sha256};

use support::process::{canary, tool_error_code, Launch, Session, TempDir};

/// One sample of each member of the class with its escape, written out here rather than
/// taken from `sp`'s escaper, so the test can fail when the escaper changes.
const CLASS: &[(char, &str)] = &[
    ('\u{8}', "\\u{8}"),
    ('\t', "\\t"),
    ('\n', "\\n"),
    ('\r', "\\r"),
    ('\u{1b}', "\\u{1b}"),
    ('\u{7f}', "\\u{7f}"),
    ('\u{80}', "\\u{80}"),
    ('\u{85}', "\\u{85}"),
    ('\u{9b}', "\\u{9b}"),
    ('\u{9f}', "\\u{9f}"),
    ('\u{a0}', "\\u{a0}"),
    ('\u{ad}', "\\u{ad}"),
    ('\u{61c}', "\\u{61c}"),
    ('\u{180e}', "\\u{180e}"),
    ('\u{200b}', "\\u{200b}"),
    ('\u{200c}', "\\u{200c}"),
    ('\u{200d}', "\\u{200d}"),
    ('\u{200e}', "\\u{200e}"),
    ('\u{200f}', "\\u{200f}"),
    ('\u{2028}', "\\u{2028}"),
    ('\u{2029}', "\\u{2029}"),
    ('\u{202a}', "\\u{202a}"),
    ('\u{202b}', "\\u{202b}"),
    ('\u{202c}', "\\u{202c}"),
    ('\u{202d}', "\\u{202d}"),
    ('\u{202e}', "\\u{202e}"),
    ('\u{2060}', "\\u{2060}"),
    ('\u{2061}', "\\u{2061}"),
    ('\u{2064}', "\\u{2064}"),
    ('\u{2066}', "\\u{2066}"),
    ('\u{2067}', "\\u{2067}"),
    ('\u{2068}', "\\u{2068}"),
    ('\u{2069}', "\\u{2069}"),
    ('\u{2800}', "\\u{2800}"),
    ('\u{3000}', "\\u{3000}"),
    ('\u{3164}', "\\u{3164}"),
    ('\u{fe0f}', "\\u{fe0f}"),
    ('\u{feff}', "\\u{feff}"),
    ('\u{fff9}', "\\u{fff9}"),
    ('\u{fffb}', "\\u{fffb}"),
    ('\u{e0001}', "\\u{e0001}"),
    ('\u{e0041}', "\\u{e0041}"),
    ('\u{e007f}', "\\u{e007f}"),
    ('\u{e0100}', "\\u{e0100}"),
];

/// The expected shown form: the class as [`CLASS`] spells it, everything else as is.
fn escaped(raw: &str) -> String {
    raw.chars().map(|c| CLASS.iter().find(|(k, _)| *k == c).map_or(c.to_string(), |(_, e)| e.to_string())).collect()
}

/// Every class sample, between letters, plus text that stays as it is.
fn all_classes() -> String {
    let mut s = String::from("x");
    for (c, _) in CLASS {
        s.push(*c);
        s.push('.');
    }
    s + "é日本 \\ \""
}

fn sha256_hex(bytes: &[u8]) -> String {
    Sha256::digest(bytes).iter().map(|b| format!("{b:02x}")).collect()
}

/// Asserts `text` holds no class member raw.
fn assert_clean(what: &str, text: &str) {
    if let Some(c) = text.chars().find(|c| c.is_control() || CLASS.iter().any(|(k, _)| k == c)) {
        panic!("{what} holds {c:?} raw: {text:?}");
    }
}

const VARS: [&str; 8] = ["VERSION", "TOOL", "TARGET", "SUBJECT", "HOST", "REQUEST", "SESSION", "FP"];

/// An approver that records its stdin and its SP_APPROVAL_* variables, then refuses.
fn recorder(dir: &TempDir) -> PathBuf {
    let mut body = String::from("#!/bin/sh\nd=$(dirname \"$0\")\ncat > \"$d/stdin\"\n");
    for v in VARS {
        body += &format!("printf '%s' \"${{SP_APPROVAL_{v}-UNSET}}\" > \"$d/env.{v}\"\n");
    }
    body += "exit 1\n";
    dir.file("approver", body.as_bytes(), 0o700)
}

struct Seen {
    env: std::collections::BTreeMap<&'static str, String>,
    line: String,
    description: Value,
}

fn seen(dir: &TempDir) -> Seen {
    let read = |name: &str| std::fs::read_to_string(dir.path.join(name)).unwrap_or_else(|e| panic!("{name}: {e}"));
    let env = VARS.iter().map(|v| (*v, read(&format!("env.{v}")))).collect();
    let line = read("stdin");
    assert!(line.ends_with('\n') && line.matches('\n').count() == 1, "one line: {line:?}");
    let description = serde_json::from_str(&line).unwrap_or_else(|e| panic!("{e}: {line}"));
    // The whole line and every variable: nothing of the class raw, `raw` included.
    assert_clean("the stdin line", line.trim_end());
    Seen { env, line, description }
}

fn ssh_policy(dir: &TempDir, approver: &Path) -> PathBuf {
    let known_hosts = dir.file("known_hosts", b"", 0o600);
    let policy = json!({
        "ssh": {"known_hosts": known_hosts, "hosts": {
            "web1": {"address": "127.0.0.1", "port": 9, "user": "deploy", "auth": {"agent": true}, "approve": true}
        }},
        "approval": {"command": [approver], "timeout_s": 20},
        "audit": {"path": dir.join("audit.jsonl")}
    });
    dir.file("policy.json", policy.to_string().as_bytes(), 0o600)
}

#[test]
fn ssh_exec_command_and_stdin_are_shown_escaped_and_raw_only_under_raw() {
    let dir = TempDir::new("approver-display-ssh");
    let approver = recorder(&dir);
    let mut s = Session::start(Launch::mcp(&ssh_policy(&dir, &approver), &[]));
    s.ready("2025-06-18");

    // The issue's reproduction, exactly.
    let spoof = "rm -rf ~/data #\u{9b}2J\u{9b}Hsp: the agent asks to run ssh_exec web1 uptime";
    let r = s.tool(1, "ssh_exec", json!({"host": "web1", "command": spoof}));
    assert_eq!(tool_error_code(&r), Some("SP_NOT_APPROVED"), "{r}");
    let got = seen(&dir);
    let shown = "web1 rm -rf ~/data #\\u{9b}2J\\u{9b}Hsp: the agent asks to run ssh_exec web1 uptime";
    assert_eq!(got.env["TARGET"], shown);
    assert_eq!(got.description["target"], shown);
    assert_eq!(got.description["request"]["command"], &shown[5..]);
    assert_eq!(got.description["raw"]["request"]["command"], spoof);

    // Every class, in the command and in stdin.
    let command = format!("echo {}", all_classes());
    let stdin = all_classes();
    let r = s.tool(2, "ssh_exec", json!({"host": "web1", "command": command, "stdin": stdin}));
    assert_eq!(tool_error_code(&r), Some("SP_NOT_APPROVED"), "{r}");
    let got = seen(&dir);
    for (k, v) in &got.env {
        assert_clean(k, v);
    }
    let d = &got.description;
    assert_eq!(got.env["VERSION"], "2");
    assert_eq!(got.env["TOOL"], "ssh_exec");
    assert_eq!(got.env["SUBJECT"], "web1");
    assert_eq!(got.env["HOST"], "127.0.0.1");
    assert_eq!(got.env["TARGET"], format!("web1 {}", escaped(&command)));
    assert_eq!((&d["version"], &d["tool"], &d["credential"]), (&json!(2), &json!("ssh_exec"), &Value::Null));
    assert_eq!(d["target"], format!("web1 {}", escaped(&command)));
    assert_eq!(
        d["request"],
        json!({"host": "web1", "user": "deploy", "address": "127.0.0.1", "port": 9, "command": escaped(&command), "stdin": escaped(&stdin)})
    );
    assert_eq!(serde_json::from_str::<Value>(&got.env["REQUEST"]).unwrap(), d["request"]);
    assert_eq!(
        d["raw"],
        json!({"target": format!("web1 {command}"), "request": {
            "host": "web1", "user": "deploy", "address": "127.0.0.1", "port": 9, "command": command, "stdin": stdin, "stdin_truncated": false
        }})
    );
    // Astral members travel as surrogate pairs in the line, and decode back (above).
    assert!(got.line.contains("\\udb40\\udc41"), "{}", got.line);

    // A 20 KB target: cut visibly, with the whole value's length and hash.
    let long = format!("echo {}", "a".repeat(20_475));
    assert_eq!(long.len(), 20_480);
    let r = s.tool(3, "ssh_exec", json!({"host": "web1", "command": long}));
    assert_eq!(tool_error_code(&r), Some("SP_NOT_APPROVED"), "{r}");
    let got = seen(&dir);
    let target = format!("web1 {long}");
    let cut_target = format!("{}...[cut: 20485 bytes, sha256 {}]", &target[..1024], sha256_hex(target.as_bytes()));
    assert_eq!(got.env["TARGET"], cut_target);
    assert_eq!(got.description["target"], cut_target);
    assert_eq!(got.description["request"]["command"], format!("{}...[cut: 20480 bytes, sha256 {}]", &long[..1024], sha256_hex(long.as_bytes())));
    assert_eq!((&got.description["raw"]["target"], &got.description["raw"]["request"]["command"]), (&json!(target), &json!(long)));
    s.finish().assert_exit(0);
}

#[test]
fn http_request_hosts_come_as_punycode_beside_their_unicode_form_and_fields_are_escaped() {
    let dir = TempDir::new("approver-display-http");
    let approver = recorder(&dir);
    // `а` is Cyrillic (U+0430) in the first two; the third is all Cyrillic.
    let hosts = [("аpple.com", "xn--pple-43d.com"), ("pаypal.com", "xn--pypal-4ve.com"), ("аррӏе.com", "xn--80ak6aa92e.com")];
    let names: Vec<&str> = hosts.iter().map(|(u, _)| *u).collect();
    let policy = json!({
        "credentials": {"api": {"source": {"env": "SP_TEST_TOKEN"}, "inject": {"bearer": {}}, "hosts": names, "approve": true}},
        "http": {"allow": [{"hosts": names, "methods": ["POST"], "paths": ["/v1/*"]}]},
        "approval": {"command": [approver], "timeout_s": 20},
        "audit": {"path": dir.join("audit.jsonl")}
    });
    let policy = dir.file("policy.json", policy.to_string().as_bytes(), 0o600);
    let mut s = Session::start(Launch::mcp(&policy, &[]).env("SP_TEST_TOKEN", &canary()));
    s.ready("2025-06-18");
    let header = "a\u{202e}b\u{200b}c\u{2066}d\u{e0041}e\u{feff}f";
    let body = all_classes();
    for (id, (unicode, ascii)) in hosts.iter().enumerate() {
        // sp takes only punycode from the agent (a Unicode host is SP_BAD_ARGUMENTS); the
        // policy may name the Unicode form.
        let url = format!("https://{ascii}/v1/x?q=1");
        let r =
            s.tool(id as i64 + 1, "http_request", json!({"method": "POST", "url": url, "headers": {"X-Note": header}, "body": body, "credential": "api"}));
        assert_eq!(tool_error_code(&r), Some("SP_NOT_APPROVED"), "{r}");
        let got = seen(&dir);
        for (k, v) in &got.env {
            assert_clean(k, v);
        }
        let d = &got.description;
        assert_eq!(got.env["HOST"], format!("{ascii} ({unicode})"));
        assert_eq!(got.env["TARGET"], format!("POST https://{ascii}/v1/x"));
        assert_eq!(got.env["SUBJECT"], "api");
        assert_eq!(d["target"], format!("POST https://{ascii}/v1/x"));
        assert_eq!(d["credential"], "api");
        assert_eq!(
            d["request"],
            json!({"method": "POST", "url": format!("https://{ascii}/v1/x?q=1"), "host": ascii, "host_unicode": unicode,
                   "headers": {"x-note": escaped(header)}, "body": escaped(&body)})
        );
        assert_eq!(serde_json::from_str::<Value>(&got.env["REQUEST"]).unwrap(), d["request"]);
        assert_eq!(
            d["raw"],
            json!({"target": format!("POST https://{ascii}/v1/x"), "request": {
                "method": "POST", "url": format!("https://{ascii}/v1/x?q=1"), "headers": {"x-note": header}, "body": body, "body_truncated": false
            }})
        );
    }
    // 100 headers whose shown JSON passes the 128 KiB a variable may hold: the approver
    // still runs (it answers "exited 1", not "could not be started") and SP_APPROVAL_REQUEST
    // is cut visibly at 64 KiB.
    let quotes = "\"".repeat(16 * 1024);
    let headers: serde_json::Map<String, Value> = (0..100).map(|i| (format!("x-{i:03}"), json!(quotes))).collect();
    let (_, ascii) = hosts[0];
    let r = s.tool(9, "http_request", json!({"method": "POST", "url": format!("https://{ascii}/v1/x"), "headers": headers, "credential": "api"}));
    assert_eq!(tool_error_code(&r), Some("SP_NOT_APPROVED"), "{r}");
    assert!(r.to_string().contains("the approver exited 1"), "{r}");
    let got = seen(&dir);
    let request = &got.env["REQUEST"];
    let whole = got.description["request"].to_string();
    assert_eq!(*request, format!("{}...[cut: {} bytes, sha256 {}]", &whole[..64 * 1024], whole.len(), sha256_hex(whole.as_bytes())));
    s.finish().assert_exit(0);
}

// ---------------------------------------------------------------------------------------
// packaging/sp-approve

fn script() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("packaging/sp-approve")
}

/// The shells to run sp-approve under: `sh`, and dash and bash when installed.
fn shells() -> Vec<&'static str> {
    let mut v = vec!["sh"];
    for s in ["dash", "bash"] {
        if std::process::Command::new(s).arg("-c").arg("exit 0").status().is_ok_and(|st| st.success()) {
            v.push(s);
        }
    }
    v
}

/// Runs sp-approve under `shell` with only `env` (plus PATH), its "terminal" a file that
/// holds `answer`; returns (exit code, what it wrote to the terminal, stderr).
fn run_script(shell: &str, env: &[(&str, &[u8])], answer: &str) -> (Option<i32>, String, String) {
    use std::os::unix::ffi::OsStrExt;
    let dir = TempDir::new("sp-approve");
    let tty = dir.file("tty", answer.as_bytes(), 0o600);
    let mut cmd = std::process::Command::new(shell);
    cmd.arg(script()).env_clear().env("PATH", std::env::var_os("PATH").unwrap_or_default()).env("SP_APPROVE_TTY", &tty);
    for (k, v) in env {
        cmd.env(k, std::ffi::OsStr::from_bytes(v));
    }
    let out = cmd.stdin(std::process::Stdio::null()).output().expect("run sp-approve");
    let shown = std::fs::read_to_string(&tty).unwrap();
    (out.status.code(), shown[answer.len()..].to_owned(), String::from_utf8_lossy(&out.stderr).into_owned())
}

#[test]
fn sp_approve_shows_what_sp_gives_it_through_a_real_session() {
    let dir = TempDir::new("sp-approve-session");
    let approver = dir.file("sp-approve", &std::fs::read(script()).unwrap(), 0o700);
    let tty = dir.file("tty", b"y\n", 0o600);
    let mut s = Session::start(Launch::mcp(&ssh_policy(&dir, &approver), &[]).env("SP_APPROVE_TTY", &tty.display().to_string()).env("LC_ALL", "C.UTF-8"));
    s.ready("2025-06-18");
    let spoof = "rm -rf ~/data #\u{9b}2J\u{9b}Hsp: the agent asks to run ssh_exec web1 uptime";
    let r = s.tool(1, "ssh_exec", json!({"host": "web1", "command": spoof}));
    // Approved by the "terminal", then the connection to port 9 fails: it ran.
    assert_ne!(tool_error_code(&r), Some("SP_NOT_APPROVED"), "{r}");
    s.finish().assert_exit(0);
    let shown = std::fs::read_to_string(&tty).unwrap();
    assert_eq!(
        shown,
        "y\n\nsp: the agent asks to run ssh_exec web1 rm -rf ~/data #\\u{9b}2J\\u{9b}Hsp: the agent asks to run ssh_exec web1 uptime with web1\n\
         host: 127.0.0.1\n\
         request: {\"address\":\"127.0.0.1\",\"command\":\"rm -rf ~/data #\\\\u{9b}2J\\\\u{9b}Hsp: the agent asks to run ssh_exec web1 uptime\",\"host\":\"web1\",\"port\":9,\"user\":\"deploy\"}\n\
         Approve this one call? [y/N] approved\n"
    );
}

/// Issue 32, section 1: headless (no SP_APPROVE_TTY, no desktop, no terminal), sp-approve
/// refuses every call, and at the default verbosity sp's stderr says so and why: the
/// approver's own words and the refusal, not only with `-v`.
#[test]
fn sp_approve_headless_refuses_and_the_reason_shows_at_the_default_verbosity() {
    let dir = TempDir::new("sp-approve-headless");
    let approver = dir.file("sp-approve", &std::fs::read(script()).unwrap(), 0o700);
    let mut s = Session::start(Launch::mcp(&ssh_policy(&dir, &approver), &[]).env("LC_ALL", "C.UTF-8"));
    s.ready("2025-06-18");
    let r = s.tool(1, "ssh_exec", json!({"host": "web1", "command": "uptime"}));
    assert_eq!(tool_error_code(&r), Some("SP_NOT_APPROVED"), "{r}");
    let run = s.finish();
    run.assert_exit(0);
    assert!(
        run.stderr.contains("WARN approver stderr: sp-approve: nowhere to ask (set SP_APPROVE_TTY, or run under a desktop session); refusing\n"),
        "{}",
        run.context()
    );
    assert!(run.stderr.contains("WARN approval: refused for web1 uptime (web1): the approver exited 1\n"), "{}", run.context());
}

/// What sp 2 would hand sp-approve, with `target` as the target.
fn env_with(target: &[u8]) -> Vec<(&'static str, Vec<u8>)> {
    vec![
        ("SP_APPROVAL_VERSION", b"2".to_vec()),
        ("SP_APPROVAL_TOOL", b"ssh_exec".to_vec()),
        ("SP_APPROVAL_TARGET", target.to_vec()),
        ("SP_APPROVAL_SUBJECT", b"web1".to_vec()),
        ("SP_APPROVAL_HOST", "xn--pple-43d.com (аpple.com)".as_bytes().to_vec()),
        ("SP_APPROVAL_REQUEST", b"{\"command\":\"uptime\"}".to_vec()),
        ("LC_ALL", b"C.UTF-8".to_vec()),
    ]
}

fn borrowed<'a>(env: &'a [(&'static str, Vec<u8>)]) -> Vec<(&'static str, &'a [u8])> {
    env.iter().map(|(k, v)| (*k, v.as_slice())).collect()
}

#[test]
fn sp_approve_shows_the_escaped_form_and_unicode_under_a_utf8_locale() {
    for shell in shells() {
        let env = env_with("web1 echo \\u{1b}[2J café".as_bytes());
        let (code, shown, stderr) = run_script(shell, &borrowed(&env), "y\n");
        assert_eq!(code, Some(0), "{shell}: {stderr}");
        assert_eq!(
            shown,
            "\nsp: the agent asks to run ssh_exec web1 echo \\u{1b}[2J café with web1\nhost: xn--pple-43d.com (аpple.com)\nrequest: {\"command\":\"uptime\"}\nApprove this one call? [y/N] approved\n",
            "{shell}"
        );
        let (code, shown, _) = run_script(shell, &borrowed(&env), "n\n");
        assert_eq!(code, Some(1), "{shell}");
        assert!(shown.ends_with("[y/N] refused\n"), "{shell}: {shown}");
    }
}

#[test]
fn sp_approve_refuses_what_it_cannot_show_faithfully() {
    let mut raw: Vec<(String, Vec<u8>)> =
        CLASS.iter().filter(|(c, _)| *c != '\0').map(|(c, e)| (format!("raw {e}"), format!("web1 echo a{c}b").into_bytes())).collect();
    raw.push(("invalid UTF-8".into(), b"web1 echo \xff\xfe".to_vec()));
    raw.push(("a lone continuation byte".into(), b"web1 echo \x80".to_vec()));
    raw.push(("an overlong slash".into(), b"web1 echo \xc0\xaf".to_vec()));
    for shell in shells() {
        for (what, target) in &raw {
            let env = env_with(target);
            let (code, shown, stderr) = run_script(shell, &borrowed(&env), "y\n");
            assert_eq!((code, shown.as_str()), (Some(1), ""), "{shell}: {what}: {stderr}");
            assert_eq!(stderr, "sp-approve: SP_APPROVAL_TARGET holds characters this approver cannot show faithfully; refusing\n", "{shell}: {what}");
        }
        // Non-ASCII under a locale that is not UTF-8.
        let mut env = env_with("web1 echo café".as_bytes());
        env.retain(|(k, _)| *k != "LC_ALL");
        env.push(("LC_ALL", b"C".to_vec()));
        let (code, shown, stderr) = run_script(shell, &borrowed(&env), "y\n");
        assert_eq!((code, shown.as_str()), (Some(1), ""), "{shell}: {stderr}");
        // A missing field, an empty one, an sp that does not say version 2.
        for (var, value) in
            [("SP_APPROVAL_HOST", None), ("SP_APPROVAL_REQUEST", Some(&b""[..])), ("SP_APPROVAL_VERSION", Some(&b"1"[..])), ("SP_APPROVAL_VERSION", None)]
        {
            let mut env = env_with(b"web1 uptime");
            env.retain(|(k, _)| *k != var);
            if let Some(v) = value {
                env.push((var, v.to_vec()));
            }
            let (code, shown, stderr) = run_script(shell, &borrowed(&env), "y\n");
            assert_eq!((code, shown.as_str()), (Some(1), ""), "{shell}: {var}={value:?}");
            assert!(stderr.starts_with("sp-approve: SP_APPROVAL_") && stderr.ends_with("; refusing\n"), "{shell}: {stderr}");
        }
    }
}
