use super::*;
use serde_json::json;

fn parse_err(v: Value) -> (String, String) {
    parse(&v).unwrap_err()
}

#[test]
fn full_example_parses() {
    let p = parse(&json!({
        "credentials": {
            "gh": {"source": {"file": "/run/secrets/gh"}, "inject": {"bearer": {}},
                   "hosts": ["api.github.com"], "paths": ["/repos/*"]},
            "k": {"source": {"env": "K"}, "inject": {"header": {"name": "X-Api-Key", "format": "Token {secret}"}},
                  "hosts": ["*.example.org", "127.0.0.1:8080"]}
        },
        "http": {"allow": [{"hosts": ["api.github.com"], "methods": ["GET", "POST"], "paths": ["/repos/*"]}],
                 "timeout_s": 5, "max_response_bytes": 1000}
    }))
    .unwrap();
    assert_eq!(p.credentials.len(), 2);
    assert_eq!(p.http.timeout, Duration::from_secs(5));
    assert_eq!(p.http.allow[0].methods, vec![Method::Get, Method::Post]);
    assert_eq!(p.credentials["k"].paths, vec![PathPattern::Prefix(String::new())]);
    let p = parse(&json!({"credentials": {
        "sd": {"source": {"systemd": "api-token"}, "inject": {"basic": {}}, "hosts": ["a.com"], "methods": ["GET"]},
        "cmd": {"source": {"command": ["pass", "show", "api"], "timeout_s": 20}, "inject": {"query": {"name": "api_key"}}, "hosts": ["a.com"]}
    }}))
    .unwrap();
    assert_eq!(p.credentials["sd"].source, SecretSource::Systemd("api-token".into()));
    assert_eq!(p.credentials["sd"].methods, Some(vec![Method::Get]));
    assert_eq!(
        p.credentials["cmd"].source,
        SecretSource::Command { argv: vec!["pass".into(), "show".into(), "api".into()], timeout: Duration::from_secs(20) }
    );
    assert_eq!(p.credentials["cmd"].inject, Injection::Query { name: "api_key".into() });
}

#[test]
fn on_echo_defaults_to_redact_and_accepts_withhold() {
    let c = |e: Option<&str>| {
        let mut def = json!({"source": {"env": "A"}, "inject": {"bearer": {}}, "hosts": ["a"]});
        if let Some(e) = e {
            def["on_echo"] = json!(e);
        }
        parse(&json!({"credentials": {"x": def}})).map(|p| p.credentials["x"].on_echo)
    };
    assert_eq!(c(None), Ok(OnEcho::Redact));
    assert_eq!(c(Some("redact")), Ok(OnEcho::Redact));
    assert_eq!(c(Some("withhold")), Ok(OnEcho::Withhold));
    let (field, why) = c(Some("Withhold")).unwrap_err();
    assert_eq!((field.as_str(), why.as_str()), ("credentials.x.on_echo", "must be \"redact\" or \"withhold\""));
}

#[test]
fn errors_name_the_field() {
    let cases = vec![
        (json!({"credential": {}}), "credential"),
        (json!({"http": {"allow": [{"hosts": ["a.com"], "methods": ["FETCH"]}]}}), "http.allow[0].methods[0]"),
        (json!({"http": {"allow": [{"hosts": []}]}}), "http.allow[0].hosts"),
        (json!({"http": {"allow": [{"hosts": ["a.*.com"]}]}}), "http.allow[0].hosts[0]"),
        (json!({"http": {"allow": [{"hosts": ["a.com"], "paths": ["v1"]}]}}), "http.allow[0].paths[0]"),
        (json!({"http": {"allow": [{"hosts": ["a.com"], "paths": ["/v1/../x"]}]}}), "http.allow[0].paths[0]"),
        (json!({"http": {"timeout_s": 0}}), "http.timeout_s"),
        (json!({"http": {"max_response_bytes": 1_000_000_000u64}}), "http.max_response_bytes"),
        (json!({"http": {"allow": [{"hosts": ["a.com"], "method": ["GET"]}]}}), "http.allow[0].method"),
        (json!({"credentials": {"x": {"inject": {"bearer": {}}, "hosts": ["a"]}}}), "credentials.x.source"),
        (json!({"credentials": {"x": {"source": {"file": "rel"}, "inject": {"bearer": {}}, "hosts": ["a"]}}}), "credentials.x.source.file"),
        (json!({"credentials": {"x": {"source": {"file": "/a", "env": "B"}, "inject": {"bearer": {}}, "hosts": ["a"]}}}), "credentials.x.source"),
        (
            json!({"credentials": {"x": {"source": {"env": "B"}, "inject": {"header": {"name": "X", "format": "no placeholder"}}, "hosts": ["a"]}}}),
            "credentials.x.inject.header.format",
        ),
        (json!({"credentials": {"x": {"source": {"env": "B"}, "inject": {"header": {"name": "Host"}}, "hosts": ["a"]}}}), "credentials.x.inject.header.name"),
        (json!({"credentials": {"x": {"source": {"env": "B"}, "inject": {"bearer": {}}}}}), "credentials.x.hosts"),
        (json!({"credentials": {"bad name": {}}}), "credentials.bad name"),
        (json!({"http": {"allow": [{"hosts": ["a.com:0"]}]}}), "http.allow[0].hosts[0]"),
        (json!({"http": {"allow": [{"hosts": ["*.10.0.0.1"]}]}}), "http.allow[0].hosts[0]"),
        (json!({"http": {"max_request_body_bytes": -1}}), "http.max_request_body_bytes"),
        (json!({"http": {"max_redirects": 21}}), "http.max_redirects"),
        (json!({"http": {"https_only": "yes"}}), "http.https_only"),
        (json!({"http": {"ca_file": "/nonexistent/ca.pem"}}), "http.ca_file"),
        (json!({"http": {"ca_file": "/etc/hostname"}}), "http.ca_file"),
        (json!({"http": {"ca_file": "relative.pem"}}), "http.ca_file"),
        (json!({"credentials": {"x": {"source": {"systemd": "../etc/shadow"}, "inject": {"bearer": {}}, "hosts": ["a"]}}}), "credentials.x.source.systemd"),
        (json!({"credentials": {"x": {"source": {"command": []}, "inject": {"bearer": {}}, "hosts": ["a"]}}}), "credentials.x.source.command"),
        (json!({"credentials": {"x": {"source": {"command": ["pass", 1]}, "inject": {"bearer": {}}, "hosts": ["a"]}}}), "credentials.x.source.command[1]"),
        (
            json!({"credentials": {"x": {"source": {"command": ["pass"], "timeout_s": 0}, "inject": {"bearer": {}}, "hosts": ["a"]}}}),
            "credentials.x.source.timeout_s",
        ),
        (json!({"credentials": {"x": {"source": {"env": "A", "timeout_s": 5}, "inject": {"bearer": {}}, "hosts": ["a"]}}}), "credentials.x.source.timeout_s"),
        (json!({"credentials": {"x": {"source": {"env": "A"}, "inject": {"query": {"name": "a&b"}}, "hosts": ["a"]}}}), "credentials.x.inject.query.name"),
        (json!({"credentials": {"x": {"source": {"env": "A"}, "inject": {"basic": {"user": "u"}}, "hosts": ["a"]}}}), "credentials.x.inject.basic.user"),
        (json!({"credentials": {"x": {"source": {"env": "A"}, "inject": {"bearer": {}, "basic": {}}, "hosts": ["a"]}}}), "credentials.x.inject"),
        (
            json!({"credentials": {"x": {"source": {"env": "A"}, "inject": {"bearer": {}}, "hosts": ["a"], "methods": ["GET", "FETCH"]}}}),
            "credentials.x.methods[1]",
        ),
        (json!({"credentials": {"x": {"source": {"env": "A"}, "inject": {"bearer": {}}, "hosts": ["a"], "on_echo": "drop"}}}), "credentials.x.on_echo"),
        (json!({"credentials": {"x": {"source": {"env": "A"}, "inject": {"bearer": {}}, "hosts": ["a"], "on_echo": true}}}), "credentials.x.on_echo"),
    ];
    for (v, field) in cases {
        let shown = v.to_string();
        assert_eq!(parse_err(v).0, field, "{shown}");
    }
}

/// `approval.via` and `"approve": "command"` (sp-policy(5), APPROVAL): who must be
/// able to ask, checked at load.
#[test]
fn approval_channels() {
    use approval::{Approve, Via};
    let cred = |approve: Value| json!({"source": {"env": "A"}, "inject": {"bearer": {}}, "hosts": ["x"], "approve": approve});
    assert_eq!(parse(&json!({})).unwrap().approval.via, vec![Via::Command]);
    let p = parse(&json!({"approval": {"via": ["elicitation"]}, "credentials": {"a": cred(json!(true))}})).unwrap();
    assert_eq!((p.approval.via.clone(), p.approval.command.clone()), (vec![Via::Elicitation], None));
    assert_eq!(p.credentials["a"].approve, Approve::Yes);
    let p = parse(&json!({"approval": {"via": ["elicitation", "command"], "command": ["/a"]}, "credentials": {"a": cred(json!("command"))}})).unwrap();
    assert_eq!((p.approval.via.clone(), p.credentials["a"].approve), (vec![Via::Elicitation, Via::Command], Approve::Command));
    assert!(p.credential_needs_approval("a"));
    let need = "needs an approver: set approval.command (or \"mode\": \"observe\" while rolling out)".to_owned();
    for (v, field, message) in [
        (json!({"approval": {"via": ["elicitation"]}, "credentials": {"a": cred(json!("command"))}}), "credentials.a.approve", need.clone()),
        (
            json!({"approval": {"via": ["elicitation"]}, "upstreams": {"u": {"command": ["/a"], "approve": "command", "tools": {"allow": ["*"], "approve": ["x"]}}}}),
            "upstreams.u.tools.approve",
            need.clone(),
        ),
        (
            json!({"upstreams": {"u": {"command": ["/a"], "approve": true}}}),
            "upstreams.u.approve",
            "must be \"command\" (tools.approve chooses the tools)".to_owned(),
        ),
        (json!({"approval": {"via": []}}), "approval.via", "must name at least one channel".to_owned()),
        (json!({"approval": {"via": "command"}}), "approval.via", "must be an array of \"elicitation\" and \"command\"".to_owned()),
        (json!({"approval": {"via": ["command", "command"], "command": ["/a"]}}), "approval.via[1]", "names a channel twice".to_owned()),
        (json!({"approval": {"via": ["email"]}}), "approval.via[0]", "must be \"elicitation\" or \"command\"".to_owned()),
        (json!({"approval": {"via": ["command"]}}), "approval.command", "is required (or \"via\": [\"elicitation\"])".to_owned()),
        (json!({"credentials": {"a": cred(json!("elicitation"))}}), "credentials.a.approve", "must be true, false or \"command\"".to_owned()),
    ] {
        let shown = v.to_string();
        assert_eq!(parse_err(v), (field.to_owned(), message), "{shown}");
    }
}

#[test]
fn approve_is_a_field_of_credentials_and_ssh_hosts() {
    let cred = |approve: Value| json!({"source": {"env": "A"}, "inject": {"bearer": {}}, "hosts": ["x"], "approve": approve});
    let host = json!({"address": "h", "user": "u", "auth": {"agent": true}, "approve": true});
    let p = parse(&json!({
        "mode": "enforce",
        "approval": {"command": ["/usr/local/bin/sp-approve", "--x"], "timeout_s": 30},
        "credentials": {"a": cred(json!(true)), "b": cred(json!(false))},
        "ssh": {"known_hosts": "/kh", "hosts": {"web": host}}
    }))
    .unwrap();
    assert!(p.credential_needs_approval("a") && !p.credential_needs_approval("b") && !p.credential_needs_approval("zz"));
    assert!(p.ssh_host_needs_approval("web") && !p.ssh_host_needs_approval("zz"));
    assert_eq!(p.approval.timeout, Duration::from_secs(30));
    assert_eq!(p.approval.grants, approval::GrantsPolicy::default(), "no grants unless the operator allows them");
    let p = parse(&json!({"approval": {"command": ["/a"], "grants": {"exact_max_s": 3600, "session_max_s": 900, "path": "/s/g.json"}}})).unwrap();
    let want = approval::GrantsPolicy { exact_max_s: Some(3600), session_max_s: Some(900), path: Some(PathBuf::from("/s/g.json")) };
    assert_eq!(p.approval.grants, want);
    let p = parse(&json!({"mode": "observe", "credentials": {"a": cred(json!(true))}})).unwrap();
    assert!(p.credential_needs_approval("a"));
    assert_eq!((p.approval.mode, p.approval.command), (approval::Mode::Observe, None));
}

#[test]
fn approval_errors_name_the_field() {
    let cred = |approve: Value| json!({"source": {"env": "A"}, "inject": {"bearer": {}}, "hosts": ["x"], "approve": approve});
    let host = json!({"address": "h", "user": "u", "auth": {"agent": true}, "approve": true});
    for (v, field, why) in [
        (json!({"mode": "audit"}), "mode", "must be \"enforce\" or \"observe\""),
        (json!({"approval": {"command": []}}), "approval.command", "must be a non-empty array: [PROGRAM, ARGS...]"),
        (json!({"approval": {"command": ["sp-approve"]}}), "approval.command[0]", "must be an absolute path to the approver"),
        (json!({"approval": {"command": ["/a", 1]}}), "approval.command[1]", "must be a string"),
        (json!({"approval": {"command": ["/a"], "timeout_s": 0}}), "approval.timeout_s", "must be an integer from 1 to 3600"),
        (json!({"approval": {"cmd": ["/a"]}}), "approval.cmd", "unknown field (expected one of: command, timeout_s, grants, via)"),
        (json!({"approval": {"command": ["/a"], "grants": {"exact_max_s": 0}}}), "approval.grants.exact_max_s", "must be an integer from 1 to 86400"),
        (json!({"approval": {"command": ["/a"], "grants": {"session_max_s": 86401}}}), "approval.grants.session_max_s", "must be an integer from 1 to 86400"),
        (json!({"approval": {"command": ["/a"], "grants": {"exact_max_s": "900"}}}), "approval.grants.exact_max_s", "must be an integer from 1 to 86400"),
        (json!({"approval": {"command": ["/a"], "grants": {"path": "grants.json"}}}), "approval.grants.path", "must be an absolute path to a file"),
        (json!({"approval": {"command": ["/a"], "grants": {"path": "/state/"}}}), "approval.grants.path", "must be an absolute path to a file"),
        (
            json!({"approval": {"command": ["/a"], "grants": {"once_max_s": 1}}}),
            "approval.grants.once_max_s",
            "unknown field (expected one of: exact_max_s, session_max_s, path)",
        ),
        (json!({"approval": {"command": ["/a"], "grants": []}}), "approval.grants", "must be an object"),
        (json!({"approval": {}}), "approval.command", "is required (or \"via\": [\"elicitation\"])"),
        (json!({"credentials": {"a": cred(json!("yes"))}}), "credentials.a.approve", "must be true, false or \"command\""),
        (
            json!({"credentials": {"a": cred(json!(true))}}),
            "credentials.a.approve",
            "needs an approver: set approval.command (or \"mode\": \"observe\" while rolling out)",
        ),
        (
            json!({"ssh": {"known_hosts": "/kh", "hosts": {"w": host}}}),
            "ssh.hosts.w.approve",
            "needs an approver: set approval.command (or \"mode\": \"observe\" while rolling out)",
        ),
        (
            json!({"upstreams": {"u": {"command": ["/a"], "tools": {"allow": ["*"], "approve": ["x"]}}}}),
            "upstreams.u.tools.approve",
            "needs an approver: set approval.command (or \"mode\": \"observe\" while rolling out)",
        ),
    ] {
        let shown = v.to_string();
        let (f, w) = parse_err(v);
        assert_eq!((f.as_str(), w.as_str()), (field, why), "{shown}");
    }
}

/// Grants are bound to the hash of the bytes read: any edit, even of white space, is
/// another policy; the built-in deny-everything policy has none.
#[test]
fn the_hash_is_of_the_bytes_as_read() {
    let a = Policy::from_text("{}", Path::new("/p")).unwrap();
    let b = Policy::from_text("{ }", Path::new("/p")).unwrap();
    // Made at the first use, not at load (only grants need it).
    assert!(a.text.hex.get().is_none() && b.text.hex.get().is_none());
    // sha256("{}"), as `printf '{}' | sha256sum` gives it.
    assert_eq!(a.hash(), Some("44136fa355b3678a1146ad16f7e8649e94fb4fc21fe77e8310c060f61caaff8a"));
    assert_ne!(a.hash(), b.hash());
    assert_eq!(Policy::deny_all().hash(), None);
    // A clone made before the first use hashes alike; equality is the text's.
    let c = Policy::from_text("{}", Path::new("/p")).unwrap();
    assert_eq!(c.clone().hash(), a.hash());
    assert_eq!(c, a);
    assert_ne!(a, b);
}

#[test]
fn lookup_order() {
    let env = |pairs: &'static [(&'static str, &'static str)]| move |k: &str| pairs.iter().find(|(n, _)| *n == k).map(|(_, v)| v.to_string());
    let none = |_: &Path| false;
    assert_eq!(lookup(Some("/x".into()), env(&[("SP_CONFIG", "/y")]), none), Lookup::Explicit("/x".into()));
    assert_eq!(lookup(None, env(&[("SP_CONFIG", "/y")]), none), Lookup::Explicit("/y".into()));
    let all = |_: &Path| true;
    assert_eq!(lookup(None, env(&[("XDG_CONFIG_HOME", "/xdg"), ("HOME", "/h")]), all), Lookup::Found("/xdg/sallyport/policy.json".into()));
    assert_eq!(lookup(None, env(&[("HOME", "/h")]), all), Lookup::Found("/h/.config/sallyport/policy.json".into()));
    let etc_only = |p: &Path| p == Path::new("/etc/sallyport/policy.json");
    assert_eq!(lookup(None, env(&[("HOME", "/h")]), etc_only), Lookup::Found("/etc/sallyport/policy.json".into()));
    assert!(matches!(lookup(None, env(&[]), none), Lookup::None(c) if c.len() == 1));
}
