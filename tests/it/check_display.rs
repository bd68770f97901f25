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
    let run = run_sp(&["check", "--config", &path.display().to_string()], &[], b"");
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
    ];
    let got: Vec<&str> = run.stderr.lines().collect();
    assert_eq!(got, want);
    // `sp mcp` logs the same at startup (warning level, the default).
    let mcp = Launch::mcp(&path, &[]).run(b"");
    mcp.assert_exit(0);
    for w in &want {
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
            format!("sp: {shown}: \"x\\u{{1b}}\\u{{202e}}\\u{{2066}}\": unknown field (expected one of: credentials, http, ssh, audit, approval, mode, upstreams)\n"),
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
    let policy = json!({"credentials": {"c": {"source": {"env": "A\u{1b}[2J\u{202e}"}, "inject": {"bearer": {}}, "hosts": ["a.example"]}}, "audit": {"path": null}});
    std::fs::write(&path, policy.to_string()).unwrap();
    let run = run_sp(&["check", "--config", &shown], &[], b"");
    assert_eq!(run.code(), Some(0), "{}", run.context());
    let out = String::from_utf8(run.stdout.clone()).unwrap();
    assert!(out.lines().any(|l| l == "  c: env A\\u{1b}[2J\\u{202e} -> a.example /* (any method)"), "{out}");
    assert!(!out.contains('\u{1b}') && !out.contains('\u{202e}'), "{out:?}");
}
