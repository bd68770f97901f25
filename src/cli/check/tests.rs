//! `sp check`'s first-use findings, one table per check. Attacks and mistakes tried
//! (all held): a secret file that is missing, group-readable (0640), world-readable
//! (0604) or empty; an `env` variable unset; a systemd source outside systemd; an
//! approver that is missing, not executable (0600), writable by others (0757) or a
//! directory; `"/v1/"` exact in an allow rule and a credential; a credential bound to
//! `127.0.0.1:8080` under a `localhost:8080` rule (and the reverse), to a host of a
//! wildcard rule (reached), to a host no rule names while another of its hosts is
//! reached (a warning), the same credential given to an upstream (no finding), and an
//! OAuth token store that needs systemd-creds where it is not there (error or warning).

use std::os::unix::fs::PermissionsExt;

use serde_json::{json, Value};

use super::*;

fn policy(v: Value) -> Policy {
    Policy::from_text(&v.to_string(), Path::new("/test/policy.json")).unwrap()
}

fn no_env(_: &str) -> Option<OsString> {
    None
}

fn file(dir: &Path, name: &str, content: &str, mode: u32) -> String {
    let p = dir.join(name);
    std::fs::write(&p, content).unwrap();
    std::fs::set_permissions(&p, std::fs::Permissions::from_mode(mode)).unwrap();
    p.display().to_string()
}

fn shown(fs: &[Finding]) -> Vec<(Level, String)> {
    fs.iter().map(|f| (f.level, f.to_string())).collect()
}

fn cred(source: Value, hosts: &[&str]) -> Value {
    json!({"source": source, "inject": {"bearer": {}}, "hosts": hosts})
}

#[test]
fn secret_sources_that_fail_on_first_use() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let good = file(d, "good", "a-long-enough-secret", 0o600);
    let open_g = file(d, "open-g", "a-long-enough-secret", 0o640);
    let open_o = file(d, "open-o", "a-long-enough-secret", 0o604);
    let empty = file(d, "empty", "", 0o600);
    let missing = d.join("missing").display().to_string();
    let allow = json!({"allow": [{"hosts": ["api.example.com"]}]});
    let p = policy(json!({
        "http": allow,
        "credentials": {
            "a-good": cred(json!({"file": good}), &["api.example.com"]),
            "b-missing": cred(json!({"file": missing}), &["api.example.com"]),
            "c-group": cred(json!({"file": open_g}), &["api.example.com"]),
            "d-world": cred(json!({"file": open_o}), &["api.example.com"]),
            "e-empty": cred(json!({"file": empty}), &["api.example.com"]),
            "f-env": cred(json!({"env": "SP_CHECK_UNSET"}), &["api.example.com"]),
            "g-systemd": cred(json!({"systemd": "tok"}), &["api.example.com"]),
            "h-command": cred(json!({"command": ["/nonexistent/cmd"]}), &["api.example.com"]),
        }
    }));
    let got = shown(&findings(&p, &no_env));
    let want = vec![
        (Level::Error, format!("credentials.b-missing.source.file: credential \"b-missing\": secret file cannot be read: no such file; create {missing} holding the secret (chmod 600), or fix the path")),
        (Level::Error, format!("credentials.c-group.source.file: credential \"c-group\": secret file permissions 0640 are too open (it must not be readable by group or others); run chmod 600 {open_g}")),
        (Level::Error, format!("credentials.d-world.source.file: credential \"d-world\": secret file permissions 0604 are too open (it must not be readable by group or others); run chmod 600 {open_o}")),
        (Level::Error, "credentials.e-empty.source.file: credential \"e-empty\": secret is empty; put the secret in it, on one line".to_owned()),
        (Level::Warning, "credentials.f-env.source.env: credential \"f-env\": environment variable SP_CHECK_UNSET is not set; set it where the MCP client starts sp mcp (clients pass their servers a filtered environment; a file or systemd source is safer)".to_owned()),
        (Level::Warning, "credentials.g-systemd.source.systemd: credential \"g-systemd\": $CREDENTIALS_DIRECTORY is not set (run sp under systemd with LoadCredential=); not checked here: run sp check under the same systemd unit to check it".to_owned()),
    ];
    assert_eq!(got, want);
}

#[test]
fn credential_hosts_no_allow_rule_reaches() {
    let src = json!({"env": "T"});
    let env = |k: &str| (k == "T").then(|| OsString::from("a-long-enough-secret"));
    let p = policy(json!({
        "http": {"allow": [{"hosts": ["localhost:8080", "*.example.com", "[::1]"]}, {"hosts": ["127.0.0.2:9000"]}]},
        "credentials": {
            "loop": cred(src.clone(), &["127.0.0.1:8080"]),
            "loop6": cred(src.clone(), &["[::1]"]),
            "rev": cred(src.clone(), &["localhost:9000"]),
            "some": cred(src.clone(), &["api.example.com", "other.example.org"]),
            "wild": cred(src.clone(), &["*.api.example.com"]),
            "apex": cred(src.clone(), &["example.com"]),
            "up": cred(src.clone(), &["nowhere.example.net"]),
        },
        "upstreams": {"u": {"command": ["/bin/true"], "env": {"T": {"credential": "up"}}, "tools": {"allow": ["*"]}}}
    }));
    let got = shown(&findings(&p, &env));
    let want = vec![
        (Level::Error, "credentials.apex.hosts[0]: example.com is in no http.allow rule's hosts, nor is any other host of this credential: it is never sent; add example.com to an http.allow rule's hosts, or bind the credential to a host a rule names".to_owned()),
        (Level::Error, "credentials.loop.hosts[0]: 127.0.0.1:8080 is in no http.allow rule's hosts, nor is any other host of this credential: it is never sent; the allow rules spell this loopback host localhost:8080: sp compares hosts as written (127.0.0.1, [::1] and localhost differ), so write localhost:8080 in both, or 127.0.0.1:8080 in both".to_owned()),
        (Level::Error, "credentials.rev.hosts[0]: localhost:9000 is in no http.allow rule's hosts, nor is any other host of this credential: it is never sent; the allow rules spell this loopback host 127.0.0.2:9000: sp compares hosts as written (127.0.0.1, [::1] and localhost differ), so write 127.0.0.2:9000 in both, or localhost:9000 in both".to_owned()),
        (Level::Warning, "credentials.some.hosts[1]: other.example.org is in no http.allow rule's hosts: the credential is never sent there; add other.example.org to an http.allow rule's hosts, or bind the credential to a host a rule names".to_owned()),
    ];
    assert_eq!(got, want);
}

#[test]
fn host_patterns_overlap_as_requests_would_match_both() {
    let h = |s: &str| HostPattern::parse(s).unwrap();
    for (a, b, want) in [
        ("a.example", "a.example", true),
        ("a.example", "A.EXAMPLE.", true),
        ("a.example:443", "a.example", true),
        ("a.example:8443", "a.example", false),
        ("a.example:8443", "a.example:8443", true),
        ("*.example", "a.example", true),
        ("*.example", "example", false),
        ("*.example", "*.a.example", true),
        ("*.a.example", "*.b.example", false),
        ("127.0.0.1", "localhost", false),
    ] {
        assert_eq!((h(a).overlaps(&h(b)), h(b).overlaps(&h(a))), (want, want), "{a} {b}");
    }
}

#[test]
fn exact_paths_ending_in_a_slash_and_the_approver() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let env = |k: &str| (k == "T").then(|| OsString::from("a-long-enough-secret"));
    let p = policy(json!({
        "http": {"allow": [{"hosts": ["a.example"], "paths": ["/", "/v1/", "/v2/*", "/v3"]}]},
        "credentials": {"c": {"source": {"env": "T"}, "inject": {"bearer": {}}, "hosts": ["a.example"], "paths": ["/api/"]}},
    }));
    let got = shown(&findings(&p, &env));
    assert_eq!(
        got,
        vec![
            (Level::Warning, "credentials.c.paths[0]: \"/api/\" is an exact path: it matches /api/ itself and nothing under it; write \"/api/*\" to allow every path under it".to_owned()),
            (Level::Warning, "http.allow[0].paths[1]: \"/v1/\" is an exact path: it matches /v1/ itself and nothing under it; write \"/v1/*\" to allow every path under it".to_owned()),
        ]
    );
    let ok = file(d, "ok", "#!/bin/sh\nexit 0\n", 0o700);
    let noexec = file(d, "noexec", "#!/bin/sh\nexit 0\n", 0o600);
    let writable = file(d, "writable", "#!/bin/sh\nexit 0\n", 0o757);
    let missing = d.join("missing").display().to_string();
    let dirpath = d.display().to_string();
    let refused = "every approval-flagged call would be refused (SP_NOT_APPROVED)";
    for (program, want) in [
        (ok.clone(), None),
        (noexec.clone(), Some(format!("approval.command[0]: {noexec} is not executable; run chmod u+x {noexec}"))),
        (
            writable.clone(),
            Some(format!(
                "approval.command[0]: {writable}: permissions 0757 are too open (must not let group or others write it); {refused}; run chmod go-w {writable}"
            )),
        ),
        (missing.clone(), Some(format!("approval.command[0]: {missing}: no such file; {refused}; install the approver there, or fix the path"))),
        (
            dirpath.clone(),
            Some(format!(
                "approval.command[0]: {dirpath}: is a directory, not a regular file (refused without opening it); {refused}; name the program file itself"
            )),
        ),
    ] {
        let p = policy(json!({"approval": {"command": [program]}}));
        let got: Vec<(Level, String)> = shown(&findings(&p, &no_env));
        assert_eq!(got, want.map(|w| (Level::Error, w)).into_iter().collect::<Vec<_>>(), "{program}");
    }
}

/// `auth.oauth.store` against systemd-creds being there: taken away by the test hook,
/// "systemd-creds" is an error (every OAuth call would fail closed), "auto" a warning
/// (tokens kept plain), "file" and a policy without OAuth upstreams no finding. Where
/// the program is installed (CI installs it), no finding without the hook.
#[test]
fn the_token_store_needs_systemd_creds_when_it_says_so() {
    let with = |store: &str| {
        let up = json!({"url": "https://mcp.example/mcp", "auth": {"oauth": {"client_id": "c", "store": store}}, "tools": {"allow": ["*"]}});
        policy(json!({"upstreams": {"tickets": up}}))
    };
    let missing = |name: &str| (name == "SP_TEST_SYSTEMD_CREDS").then(|| OsString::from("missing"));
    let field = "upstreams.tickets.auth.oauth.store";
    assert_eq!(
        shown(&findings(&with("systemd-creds"), &missing)),
        vec![(
            Level::Error,
            format!(
                "{field}: is \"systemd-creds\" but /usr/bin/systemd-creds is not there; every call of an OAuth upstream would be refused (SP_AUTH); install systemd's systemd-creds, or set store to \"file\" (a plain file, mode 0600)"
            )
        )]
    );
    assert_eq!(
        shown(&findings(&with("auto"), &missing)),
        vec![(
            Level::Warning,
            format!(
                "{field}: is \"auto\" and /usr/bin/systemd-creds is not there: the OAuth tokens would be kept in a plain file (mode 0600); install systemd's systemd-creds to encrypt them, or set store to \"file\" to say that plain is meant"
            )
        )]
    );
    assert!(findings(&with("file"), &missing).is_empty());
    assert!(findings(&policy(json!({})), &missing).is_empty());
    if Path::new("/usr/bin/systemd-creds").exists() {
        assert!(findings(&with("systemd-creds"), &no_env).is_empty());
        assert!(findings(&with("auto"), &no_env).is_empty());
    }
}
