//! Issue 31, section 2: a stdio upstream runs as the user, so it can read the files the
//! policy's credentials live in (and run their commands) without being given them. The
//! redactor must know every secret the policy names before the first upstream starts,
//! not only those a call has used: here the hostile fixture (`misbehave.py read-files`)
//! returns the content of secret files no call has read, through the built `sp mcp`.
//!
//! Attacks tried (all held):
//! - the file of a `bearer` credential no call used: redacted in the text and in
//!   `structuredContent`, on the first call, before anything else happened;
//! - the file a `command` source `cat`s (the command has not been run by any call);
//! - an `aws_sigv4` JSON document, whole, and its secret key alone;
//! - an `oauth2` client credentials file, and its client secret alone;
//! - an SSH host's private key file (whole and each base64 line) and password file;
//! - a credential whose source cannot be read at startup: a warning naming it, and the
//!   session serves the others.
//!
//! Every secret here is a canary (`support::process::canary`): the run fails if one
//! reaches sp's stdout or stderr in the clear. Without the preload each of these left
//! sp unredacted (the Vault learnt a secret only when a call read it).
#![allow(clippy::disallowed_methods, reason = "tests start sp and read their environment; the fence in clippy.toml is for src/")]

use crate::support;

use std::path::{Path, PathBuf};

use serde_json::{json, Value};

use support::process::{canary, Launch, Session, TempDir};

fn python() -> String {
    ["/usr/bin/python3", "/usr/local/bin/python3"].iter().find(|p| Path::new(p).exists()).map_or("python3".into(), |p| p.to_string())
}

fn read_files() -> Vec<String> {
    let fixture = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/support/upstreams/misbehave.py");
    vec![python(), fixture.display().to_string(), "read-files".into()]
}

#[test]
fn an_upstream_reading_unused_secrets_gets_them_redacted() {
    let dir = TempDir::new("preload");
    let bearer = canary();
    let bearer_file = dir.file("bearer.token", bearer.as_bytes(), 0o600);
    let by_command = canary();
    let command_file = dir.file("command.token", by_command.as_bytes(), 0o600);
    let aws_secret = canary();
    let aws_file = dir.file("aws.json", json!({"access_key_id": "AKIDEXAMPLE13", "secret_access_key": aws_secret}).to_string().as_bytes(), 0o600);
    let client_secret = canary();
    let oauth_file = dir.file("client", format!("client-id-1:{client_secret}\n").as_bytes(), 0o600);
    let key_line = canary().replace('-', "A");
    let key_text = format!("-----BEGIN OPENSSH PRIVATE KEY-----\n{key_line}\n-----END OPENSSH PRIVATE KEY-----\n");
    let key_file = dir.file("id_test", key_text.as_bytes(), 0o600);
    let password = canary();
    let password_file = dir.file("ssh.password", password.as_bytes(), 0o600);
    let host = ["api.example"];
    let policy = json!({
        "credentials": {
            "bearer": {"source": {"file": bearer_file}, "inject": {"bearer": {}}, "hosts": host},
            "cmd": {"source": {"command": ["/bin/cat", command_file.display().to_string()]}, "inject": {"bearer": {}}, "hosts": host},
            "aws": {"source": {"file": aws_file}, "inject": {"aws_sigv4": {"region": "eu-west-1", "service": "s3"}}, "hosts": host},
            "saas": {"source": {"file": oauth_file}, "inject": {"oauth2": {"token_url": "https://idp.example/token"}}, "hosts": host},
            "gone": {"source": {"file": dir.join("missing.token")}, "inject": {"bearer": {}}, "hosts": host}
        },
        "ssh": {"known_hosts": dir.file("known_hosts", b"", 0o600), "hosts": {
            "web1": {"address": "192.0.2.1", "user": "deploy", "auth": {"key_file": key_file}},
            "web2": {"address": "192.0.2.2", "user": "deploy", "auth": {"password_file": password_file}}
        }},
        // Unconfined on purpose: confined, it could read none of these files
        // (tests/upstream_isolation.rs); the redactor is the second wall, for
        // `"sandbox": "none"` and for what a sandbox grants.
        "upstreams": {"spy": {"command": read_files(), "tools": {"allow": ["*"]}, "sandbox": "none"}},
        "audit": {"path": dir.join("audit.jsonl")}
    });
    let config = dir.file("policy.json", policy.to_string().as_bytes(), 0o600);
    let mut s = Session::start(Launch::mcp(&config, &[]));
    s.ready("2025-11-25");
    let paths = [&bearer_file, &command_file, &aws_file, &oauth_file, &key_file, &password_file];
    let got = s.tool(1, "spy_act", json!({"paths": paths.iter().map(|p| p.display().to_string()).collect::<Vec<_>>()}));
    assert_eq!(got["isError"], false, "{got}");
    let files: Vec<&str> = got["structuredContent"]["files"].as_array().unwrap().iter().map(|f| f.as_str().unwrap()).collect();
    assert_eq!(files.len(), 6, "{got}");
    assert_eq!(files[0], "[REDACTED:bearer]");
    assert_eq!(files[1], "[REDACTED:cmd]");
    assert!(files[2].contains("[REDACTED:aws]") && !files[2].contains(&aws_secret), "{}", files[2]);
    assert!(files[3].contains("[REDACTED:saas]") && !files[3].contains(&client_secret), "{}", files[3]);
    assert!(files[4].contains("[REDACTED:ssh:web1]") && !files[4].contains(&key_line), "{}", files[4]);
    assert_eq!(files[5], "[REDACTED:ssh:web2]");
    let text = got["content"][0]["text"].as_str().unwrap();
    for secret in [&bearer, &by_command, &aws_secret, &client_secret, &key_line, &password] {
        assert!(!text.contains(secret.as_str()), "the text holds a secret: {text}");
    }
    let run = s.finish();
    run.assert_exit(0);
    assert!(run.stderr.contains("redaction: credential \"gone\": secret file cannot be read") && run.stderr.contains("not read ahead"), "{}", run.context());
    let journal: Vec<Value> = std::fs::read_to_string(dir.join("audit.jsonl")).unwrap().lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    let journal_text = serde_json::to_string(&journal).unwrap();
    for secret in [&bearer, &by_command, &aws_secret, &client_secret, &key_line, &password] {
        assert!(!journal_text.contains(secret.as_str()), "the journal holds a secret");
    }
}
