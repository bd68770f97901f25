//! `sp check` (and `sp mcp` at startup) on addresses the run-time destination check always
//! refuses, and on policy text holding control or bidi characters (sp(1), COMMANDS,
//! `check`).
//!
//! Attacks and mistakes tried (all held):
//! - `http.allow` and credential hosts that are link-local (`169.254.169.254`,
//!   `[fe80::1]`), cloud metadata (`100.100.100.200`, `[fd00:ec2::254]`,
//!   `[fd20:ce::254]`, `168.63.129.16:8080`), a link-local address in IPv4-mapped IPv6
//!   form, a metadata service name (`metadata.google.internal`), and an OAuth2
//!   `token_url` and SSH addresses in those ranges: one warning each, naming the field;
//!   public and private hosts (`api.example.com`, `10.0.0.1`) get none; the policy still
//!   loads (exit 0): the run-time check decides;
//! - a credential name and an SSH host name holding ESC `[2J` and U+202E, an unknown top-level key
//!   with ESC, U+202E and U+2066, a host pattern with U+202E: the error on stderr shows
//!   them escaped, exactly;
//! - a valid policy whose env variable name holds ESC and U+202E: `sp check`'s summary
//!   shows it escaped.
#![allow(clippy::disallowed_methods, reason = "tests start sp and write policy files")]

use crate::support;

use serde_json::json;

use support::process::{run_sp, Launch, TempDir};

#[test]
fn check_warns_about_addresses_sp_always_refuses() {
    let dir = TempDir::new("check-warnings");
    let policy = json!({
        "http": {"allow": [{"hosts": ["169.254.169.254", "[fe80::1]", "100.100.100.200", "[fd00:ec2::254]", "168.63.129.16:8080",
                                       "metadata.google.internal", "[::ffff:169.254.169.254]", "api.example.com", "10.0.0.1"], "methods": ["GET"]}]},
        "credentials": {"tok": {"source": {"env": "TOK"}, "inject": {"oauth2": {"token_url": "https://169.254.169.254/token"}},
                                "hosts": ["api.example.com", "[fd20:ce::254]"]}},
        "ssh": {"known_hosts": "/nonexistent/known_hosts", "hosts": {
            "meta": {"address": "169.254.169.254", "user": "u", "auth": {"agent": true}, "commands": ["uptime"]},
            "ll": {"address": "fe80::1", "user": "u", "auth": {"agent": true}, "commands": ["uptime"]},
            "ok": {"address": "10.0.0.2", "user": "u", "auth": {"agent": true}, "commands": ["uptime"]}
        }},
        "audit": {"path": null}
    });
    let path = dir.file("policy.json", policy.to_string().as_bytes(), 0o600);
    let run = run_sp(&["check", "--config", &path.display().to_string()], &[("TOK", "a-long-enough-secret")], b"");
    assert_eq!(run.code(), Some(0), "{}", run.context());
    let never = "sp never connects there (SP_BLOCKED at run time)";
    let rule = "so this host of the rule is never reached";
    let want = [
        format!("sp: warning: http.allow[0].hosts[0]: 169.254.169.254 is a link-local address: {never}, {rule}"),
        format!("sp: warning: http.allow[0].hosts[1]: [fe80::1] is a link-local address: {never}, {rule}"),
        format!("sp: warning: http.allow[0].hosts[2]: 100.100.100.200 is a cloud metadata address: {never}, {rule}"),
        format!("sp: warning: http.allow[0].hosts[3]: [fd00:ec2::254] is a cloud metadata address: {never}, {rule}"),
        format!("sp: warning: http.allow[0].hosts[4]: 168.63.129.16:8080 is a cloud metadata address: {never}, {rule}"),
        format!("sp: warning: http.allow[0].hosts[5]: metadata.google.internal is a cloud metadata service name: {never}, {rule}"),
        format!("sp: warning: http.allow[0].hosts[6]: [::ffff:169.254.169.254] is a link-local address in IPv4-mapped IPv6 form: {never}, {rule}"),
        format!("sp: warning: credentials.tok.hosts[1]: [fd20:ce::254] is a cloud metadata address: {never}, so the credential is never sent there"),
        format!("sp: warning: credentials.tok.inject.oauth2.token_url: 169.254.169.254 is a link-local address: {never}, so no token is ever fetched"),
        "sp: warning: ssh.hosts.ll.address: fe80::1 is a link-local address: check that this is the host you mean (cloud metadata services answer there)".to_owned(),
        "sp: warning: ssh.hosts.meta.address: 169.254.169.254 is a link-local address: check that this is the host you mean (cloud metadata services answer there)".to_owned(),
        // The first-use findings (issue 31) follow.
        "sp: warning: credentials.tok.hosts[1]: [fd20:ce::254] is in no http.allow rule's hosts: the credential is never sent there; add [fd20:ce::254] to an http.allow rule's hosts, or bind the credential to a host a rule names".to_owned(),
    ];
    let got: Vec<&str> = run.stderr.lines().collect();
    assert_eq!(got, want);
    // `sp mcp` logs the same at startup (warning level, the default).
    let mcp = Launch::mcp(&path, &[]).run(b"");
    mcp.assert_exit(0);
    for w in &want[..want.len() - 1] {
        let logged = format!("WARN {}", w.strip_prefix("sp: warning: ").unwrap());
        assert!(mcp.stderr.lines().any(|l| l == logged), "{logged}\n{}", mcp.context());
    }
}

#[test]
fn policy_errors_and_the_summary_show_control_and_bidi_characters_escaped() {
    let dir = TempDir::new("check-escape");
    let path = dir.path.join("policy.json");
    let shown = path.display().to_string();
    let cred = json!({"source": {"env": "A"}, "inject": {"bearer": {}}, "hosts": ["a.example"]});
    let host = json!({"address": "h", "user": "u", "auth": {"agent": true}});
    for (policy, want) in [
        (
            json!({"credentials": {"a\u{1b}[2J\u{202e}b": cred}}),
            format!("sp: {shown}: credentials.a\\u{{1b}}[2J\\u{{202e}}b: a credential name is 1-64 letters, digits, '_', '.' or '-'\n"),
        ),
        (
            json!({"ssh": {"known_hosts": "/k", "hosts": {"w\u{1b}]0;x\u{7}\u{202e}": host}}}),
            format!("sp: {shown}: ssh.hosts.w\\u{{1b}}]0;x\\u{{7}}\\u{{202e}}: a host name is 1-64 letters, digits, '_', '.' or '-'\n"),
        ),
        (
            json!({"x\u{1b}\u{202e}\u{2066}": 1}),
            format!(
                "sp: {shown}: \"x\\u{{1b}}\\u{{202e}}\\u{{2066}}\": unknown field (expected one of: credentials, http, ssh, audit, approval, mode, upstreams, limits, limits_state, reload)\n"
            ),
        ),
        (
            json!({"http": {"allow": [{"hosts": ["a\u{202e}.example"]}]}}),
            format!("sp: {shown}: http.allow[0].hosts[0]: \"a\\u{{202e}}.example\" is not a valid host\n"),
        ),
    ] {
        std::fs::write(&path, policy.to_string()).unwrap();
        let run = run_sp(&["check", "--config", &shown], &[], b"");
        assert_eq!(run.code(), Some(1), "{}", run.context());
        assert_eq!(run.stderr, want);
    }
    let policy = json!({
        "credentials": {"c": {"source": {"env": "A\u{1b}[2J\u{202e}"}, "inject": {"bearer": {}}, "hosts": ["a.example"]}},
        "http": {"allow": [{"hosts": ["a.example"]}]},
        "audit": {"path": null}
    });
    std::fs::write(&path, policy.to_string()).unwrap();
    let run = run_sp(&["check", "--config", &shown], &[], b"");
    assert_eq!(run.code(), Some(0), "{}", run.context());
    // The unset variable is a warning, its name shown escaped.
    assert!(
        run.stderr.contains("sp: warning: credentials.c.source.env: credential \"c\": environment variable A\\u{1b}[2J\\u{202e} is not set;"),
        "{}",
        run.stderr
    );
    let out = String::from_utf8(run.stdout.clone()).unwrap();
    assert!(out.lines().any(|l| l == "  c: env A\\u{1b}[2J\\u{202e} -> a.example /* (any method)"), "{out}");
    assert!(!out.contains('\u{1b}') && !out.contains('\u{202e}'), "{out:?}");
}

/// Issue 31: `sp check` answers ok only for a policy that works on first use. Mistakes
/// tried (all caught): a secret file group-readable and one missing, an approver that
/// is not executable, a credential bound to `127.0.0.1:PORT` under a `localhost:PORT`
/// rule (errors: exit 1, no summary on stdout); an exact `"/v1/"` (a warning: exit 0,
/// the summary printed).
#[test]
fn check_fails_a_policy_that_would_fail_on_first_use() {
    let dir = TempDir::new("check-first-use");
    let open = dir.file("open", b"a-long-enough-secret", 0o640);
    let missing = dir.path.join("missing");
    let approver = dir.file("approver", b"#!/bin/sh\nexit 0\n", 0o600);
    let cred = |source: serde_json::Value, host: &str| json!({"source": source, "inject": {"bearer": {}}, "hosts": [host]});
    let policy = json!({
        "http": {"allow": [{"hosts": ["localhost:8080", "api.example.com"], "paths": ["/v1/"]}]},
        "credentials": {
            "local": cred(json!({"file": open}), "127.0.0.1:8080"),
            "gone": cred(json!({"file": missing}), "api.example.com"),
        },
        "approval": {"command": [approver]},
        "audit": {"path": null}
    });
    let path = dir.file("policy.json", policy.to_string().as_bytes(), 0o600);
    let shown = path.display().to_string();
    let run = run_sp(&["check", "--config", &shown], &[], b"");
    assert_eq!(run.code(), Some(1), "{}", run.context());
    assert!(run.stdout.is_empty(), "a summary that says ok: {}", run.context());
    let want = [
        format!("sp: error: credentials.gone.source.file: credential \"gone\": secret file cannot be read: no such file; create {} holding the secret (chmod 600), or fix the path", missing.display()),
        format!("sp: error: credentials.local.source.file: credential \"local\": secret file permissions 0640 are too open (it must not be readable by group or others); run chmod 600 {}", open.display()),
        "sp: error: credentials.local.hosts[0]: 127.0.0.1:8080 is in no http.allow rule's hosts, nor is any other host of this credential: it is never sent; the allow rules spell this loopback host localhost:8080: sp compares hosts as written (127.0.0.1, [::1] and localhost differ), so write localhost:8080 in both, or 127.0.0.1:8080 in both".to_owned(),
        "sp: warning: http.allow[0].paths[0]: \"/v1/\" is an exact path: it matches /v1/ itself and nothing under it; write \"/v1/*\" to allow every path under it".to_owned(),
        format!("sp: error: approval.command[0]: {} is not executable; run chmod u+x {}", approver.display(), approver.display()),
        format!("sp: {shown}: 4 error(s): sp mcp would fail on first use"),
    ];
    let got: Vec<&str> = run.stderr.lines().collect();
    assert_eq!(got, want);

    // Fixed: the warning stays, the check passes and prints its summary.
    std::fs::set_permissions(&open, std::os::unix::fs::PermissionsExt::from_mode(0o600)).unwrap();
    std::fs::set_permissions(&approver, std::os::unix::fs::PermissionsExt::from_mode(0o700)).unwrap();
    std::fs::write(&missing, "a-long-enough-secret").unwrap();
    std::fs::set_permissions(&missing, std::os::unix::fs::PermissionsExt::from_mode(0o600)).unwrap();
    let mut fixed = policy.clone();
    fixed["credentials"]["local"]["hosts"] = json!(["localhost:8080"]);
    std::fs::write(&path, fixed.to_string()).unwrap();
    let run = run_sp(&["check", "--config", &shown], &[], b"");
    assert_eq!(run.code(), Some(0), "{}", run.context());
    assert_eq!(run.stderr.lines().collect::<Vec<_>>(), [want[3].as_str()]);
    assert!(String::from_utf8_lossy(&run.stdout).starts_with(&format!("{shown}: ok\n")), "{}", run.context());
}
