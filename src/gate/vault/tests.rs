//! The Vault: admission of what it reads, every spelling scrubbed, the process-wide
//! redactors of the journal and the logger.

use super::*;
use base64::Engine as _;
use serde_json::json;
use std::os::unix::fs::PermissionsExt;

/// A file in the test's private temporary directory (removed with it).
fn temp(dir: &tempfile::TempDir, name: &str, content: &str, mode: u32) -> std::path::PathBuf {
    let p = dir.path().join(name);
    std::fs::write(&p, content).unwrap();
    std::fs::set_permissions(&p, std::fs::Permissions::from_mode(mode)).unwrap();
    p
}

#[test]
fn debug_never_shows_a_value() {
    let mut v = Vault::new();
    v.remember_local("c", "hunter2");
    assert_eq!(format!("{v:?}"), "Vault(1 secrets seen)");
}

#[test]
fn scrub_encodings() {
    let mut v = Vault::new();
    let secret = "us\"er:p@ss/w rd+é";
    v.remember("c", secret);
    let b64 = base64::engine::general_purpose::STANDARD.encode(secret);
    let b64url = base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(secret);
    let form: String = url::form_urlencoded::byte_serialize(secret.as_bytes()).collect();
    let json_escaped = serde_json::to_string(secret).unwrap();
    for echo in [
        secret.to_owned(),
        "us%22er%3Ap%40ss%2Fw%20rd%2B%C3%A9".to_owned(),
        "us%22er%3ap%40ss%2fw%20rd%2b%c3%a9".to_owned(),
        form,
        json_escaped[1..json_escaped.len() - 1].to_owned(),
        format!("Basic {b64}"),
        b64url,
    ] {
        let mut doc = json!({"body": format!("<<{echo}>>")});
        v.scrub_value(&mut doc);
        let prefix = if echo.starts_with("Basic ") { "Basic " } else { "" };
        assert_eq!(doc["body"], format!("<<{prefix}[REDACTED:c]>>"), "{echo}");
    }
    let mut bytes = b"\xff\x00us\"er:p@ss/w rd+\xc3\xa9\x00".to_vec();
    v.scrub_bytes(&mut bytes);
    assert_eq!(bytes, b"\xff\x00[REDACTED:c]\x00");
}

#[test]
fn truncated_tail() {
    let mut v = Vault::new();
    v.remember("c", "SECRETVALUE");
    let mut body = b"token: SECRE".to_vec();
    v.scrub_bytes(&mut body);
    v.scrub_truncated_tail(&mut body);
    assert_eq!(body, b"token: [REDACTED:c]");
    let mut clean = b"token: nothing".to_vec();
    v.scrub_truncated_tail(&mut clean);
    assert_eq!(clean, b"token: nothing");
    // three bytes are below the threshold: left as they are
    let mut short = b"xxSEC".to_vec();
    v.scrub_truncated_tail(&mut short);
    assert_eq!(short, b"xxSEC");
    let mut four = b"xxSECR".to_vec();
    v.scrub_truncated_tail(&mut four);
    assert_eq!(four, b"xx[REDACTED:c]");
}

#[test]
fn scrub_everywhere() {
    let mut v = Vault::new();
    v.remember_local("short", "abc");
    v.remember_local("long", "abcdef");
    let mut doc = json!({"abcdef-key": ["xx abcdef yy", {"n": "abc"}], "k": 1});
    v.scrub_value(&mut doc);
    assert_eq!(doc, json!({"[REDACTED:long]-key": ["xx [REDACTED:long] yy", {"n": "[REDACTED:short]"}], "k": 1}));
}

/// A secret shorter than its credential's minimum is refused when it is read, naming
/// the credential and never the value; the password of a pair too; an operator's
/// lower minimum lets it in.
#[test]
fn short_secrets_are_refused_where_they_enter() {
    let cmd = |v: &str| SecretSource::Command { argv: vec!["printf".into(), "%s".into(), v.into()], timeout: std::time::Duration::from_secs(5) };
    let mut v = Vault::new();
    let e = v.read("tiny", &cmd("abc")).unwrap_err();
    assert_eq!(e, SecretError::TooShort { credential: "tiny".into(), what: "secret", min: MIN_SECRET_BYTES });
    assert!(e.to_string().starts_with("credential \"tiny\": the secret is shorter than 8 bytes"), "{e}");
    assert!(v.is_empty(), "a refused secret is not remembered");
    assert_eq!(v.read("ok", &cmd("12345678")).unwrap().expose(), "12345678");

    let policy = crate::policy::Policy::from_text(
        &json!({"credentials": {
            "b": {"source": {"env": "X"}, "inject": {"basic": {}}, "hosts": ["a.example"]},
            "low": {"source": {"env": "X"}, "inject": {"bearer": {}}, "hosts": ["a.example"], "min_secret_bytes": 3},
            "lowb": {"source": {"env": "X"}, "inject": {"basic": {}}, "hosts": ["a.example"], "min_secret_bytes": 4}
        }})
        .to_string(),
        std::path::Path::new("p.json"),
    )
    .unwrap();
    let mut v = Vault::for_policy(&policy);
    let pw = v.read("b", &cmd("alice:pw12")).unwrap_err();
    assert_eq!(pw, SecretError::TooShort { credential: "b".into(), what: "password (after the first ':')", min: 8 });
    assert!(!pw.to_string().contains("pw12"), "{pw}");
    assert!(matches!(v.read("b", &cmd("key:")), Err(SecretError::TooShort { what: "secret", .. })));
    assert!(matches!(v.read("b", &cmd("sk_123:")), Err(SecretError::TooShort { .. })));
    assert!(v.read("b", &cmd("sk_12345:")).is_ok());
    assert!(v.read("b", &cmd("alice:pw-12345")).is_ok());
    assert_eq!(v.read("low", &cmd("abc")).unwrap().expose(), "abc");
    assert!(v.read("low", &cmd("ab")).is_err());
    assert!(v.read("lowb", &cmd("al:pw12")).is_ok());
    assert_eq!(v.min_secret_bytes("low"), 3);
    assert_eq!(v.min_secret_bytes("unknown"), MIN_SECRET_BYTES);
}

#[test]
fn static_sources_are_checked_without_being_remembered() {
    let tmp = tempfile::tempdir().unwrap();
    let short = temp(&tmp, "short", "abcd\n", 0o600);
    let long = temp(&tmp, "long", "abcdefgh-long\n", 0o600);
    let policy = crate::policy::Policy::from_text(
        &json!({"credentials": {
            "envshort": {"source": {"env": "SP_T_SHORT"}, "inject": {"bearer": {}}, "hosts": ["a.example"]},
            "envmissing": {"source": {"env": "SP_T_MISSING"}, "inject": {"bearer": {}}, "hosts": ["a.example"]},
            "fileshort": {"source": {"file": short}, "inject": {"bearer": {}}, "hosts": ["a.example"]},
            "filelong": {"source": {"file": long}, "inject": {"bearer": {}}, "hosts": ["a.example"]},
            "lowered": {"source": {"file": short}, "inject": {"bearer": {}}, "hosts": ["a.example"], "min_secret_bytes": 4},
            "basicshort": {"source": {"env": "SP_T_BASIC"}, "inject": {"basic": {}}, "hosts": ["a.example"]},
            "cmd": {"source": {"command": ["printf", "x"]}, "inject": {"bearer": {}}, "hosts": ["a.example"]}
        }})
        .to_string(),
        std::path::Path::new("p.json"),
    )
    .unwrap();
    let env = |k: &str| match k {
        "SP_T_SHORT" => Some("abc".into()),
        "SP_T_BASIC" => Some("alice:pw12".into()),
        _ => None,
    };
    let found = check_static(&policy, &env);
    let refused: Vec<(String, &str)> = found
        .refused
        .iter()
        .map(|e| match e {
            SecretError::TooShort { credential, what, .. } => (credential.clone(), *what),
            other => panic!("{other:?}"),
        })
        .collect();
    assert_eq!(refused, [("basicshort".to_owned(), "password (after the first ':')"), ("envshort".to_owned(), "secret"), ("fileshort".to_owned(), "secret")]);
    assert_eq!(found.warnings.len(), 1);
    assert!(found.warnings[0].starts_with("credential \"lowered\": min_secret_bytes is 4, below the default 8"), "{:?}", found.warnings);
    assert!(!format!("{found:?}").contains("abcd") && !format!("{found:?}").contains("pw12"));
}

/// The logger's redactor holds only secrets of at least the minimum, so a
/// lowered short secret cannot rewrite a log line; the journal's holds all.
#[test]
fn log_lines_stay_readable_and_journal_text_is_scrubbed_with_every_secret() {
    let mut v = Vault::new();
    v.remember("lg-short", "zq9");
    v.remember("lg-long", "zq9-long-secret-value");
    let line = scrub_log_line("INFO executing GET /zq9 with zq9-long-secret-value");
    assert_eq!(line.as_str(), "INFO executing GET /zq9 with [REDACTED:lg-long]");
    // (Other tests of this process remember one-letter secrets: the text has none.)
    assert_eq!(scrub_journal_text("zq9/zq9".into()).into_inner(), "[REDACTED:lg-short]/[REDACTED:lg-short]");
}

/// Issue 31: every secret the policy names is known before the session serves. A
/// `command` source runs once here (and is not cached: each later read runs it again);
/// a source that cannot be read is named, never fatal; an `aws_sigv4` secret key and an
/// `oauth2` client secret are remembered alone as well.
#[test]
fn preload_reads_every_secret_the_policy_names_once() {
    let tmp = tempfile::tempdir().unwrap();
    let runs = tmp.path().join("runs");
    let file = temp(&tmp, "tok", "pl-file-secret-1\n", 0o600);
    let aws = temp(&tmp, "aws.json", r#"{"access_key_id": "AKIDEXAMPLE13", "secret_access_key": "pl-aws-secret-key-1"}"#, 0o600);
    let client = temp(&tmp, "client", "cid:pl-client-secret-1\n", 0o600);
    let script = format!("echo x >> {}; printf pl-command-secret-1", runs.display());
    let policy = crate::policy::Policy::from_text(
        &json!({"credentials": {
            "f": {"source": {"file": file}, "inject": {"bearer": {}}, "hosts": ["a.example"]},
            "c": {"source": {"command": ["/bin/sh", "-c", script]}, "inject": {"bearer": {}}, "hosts": ["a.example"]},
            "a": {"source": {"file": aws}, "inject": {"aws_sigv4": {"region": "eu-west-1", "service": "s3"}}, "hosts": ["a.example"]},
            "o": {"source": {"file": client}, "inject": {"oauth2": {"token_url": "https://idp.example/t"}}, "hosts": ["a.example"]},
            "gone": {"source": {"env": "SP_T_PRELOAD_MISSING"}, "inject": {"bearer": {}}, "hosts": ["a.example"]}
        }})
        .to_string(),
        std::path::Path::new("p.json"),
    )
    .unwrap();
    let mut v = Vault::for_policy(&policy);
    let done = v.preload(&policy);
    assert_eq!(done.read, 4, "{done:?}");
    assert_eq!(done.failed, vec!["credential \"gone\": environment variable SP_T_PRELOAD_MISSING is not set".to_owned()]);
    assert_eq!(std::fs::read_to_string(&runs).unwrap().lines().count(), 1, "the command ran once");
    let mut out = b"pl-file-secret-1 pl-command-secret-1 pl-aws-secret-key-1 pl-client-secret-1".to_vec();
    v.scrub_bytes(&mut out);
    assert_eq!(String::from_utf8(out).unwrap(), "[REDACTED:f] [REDACTED:c] [REDACTED:a] [REDACTED:o]");
    assert!(!format!("{done:?}").contains("pl-"), "{done:?}");
}
