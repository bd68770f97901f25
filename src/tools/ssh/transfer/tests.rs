//! `ssh_get`/`ssh_put` arguments and authorization, without a server (the SFTP side is
//! `tests/it/ssh_files.rs`, against a real sshd).

use serde_json::{json, Value};

use super::args::{parse_get, parse_put};
use super::authorize::{authorize, Direction, Op, TransferDenial};
use super::*;
use crate::policy::ssh as policy;

fn get(v: Value) -> Result<SshGet, String> {
    let Value::Object(m) = v else { panic!() };
    parse_get(&m).map_err(|e| e.0)
}

fn put(v: Value) -> Result<SshPut, String> {
    let Value::Object(m) = v else { panic!() };
    parse_put(&m).map_err(|e| e.0)
}

#[test]
fn paths_are_refused_before_any_policy_is_read() {
    for (path, why) in [
        (json!("relative/x"), "\"path\" must be an absolute path"),
        (json!("/var/log/app/../../../etc/shadow"), "\"path\" must not contain a . or .. component"),
        (json!("/var/log/app/./x.log"), "\"path\" must not contain a . or .. component"),
        (json!("/var/log//app/x.log"), "\"path\" must not contain // (an empty component)"),
        (json!("/var/log/app/x.log\u{0}.txt"), "\"path\" must not contain NUL"),
        (json!("/var/log/app/"), "\"path\" must name a file"),
        (json!(""), "\"path\" must not be empty"),
        (json!(7), "\"path\" must be a string, found an integer"),
    ] {
        let shown = path.to_string();
        let got = get(json!({"host": "web1", "path": path.clone()}));
        assert!(got.as_ref().is_err_and(|m| m.starts_with(why)), "get {shown}: want {why:?}, got {got:?}");
        let got = put(json!({"host": "web1", "path": path, "content": "x"}));
        assert!(got.as_ref().is_err_and(|m| m.starts_with(why)), "put {shown}: want {why:?}, got {got:?}");
    }
}

#[test]
fn put_arguments() {
    let p = put(json!({"host": "web1", "path": "/srv/up/a.bin", "content": "AAEC/w==", "encoding": "base64", "overwrite": true})).unwrap();
    assert_eq!((p.content, p.overwrite), (vec![0, 1, 2, 255], true));
    let p = put(json!({"host": "web1", "path": "/srv/up/a.txt", "content": "héllo"})).unwrap();
    assert_eq!((p.content, p.overwrite), ("héllo".as_bytes().to_vec(), false));
    for (v, why) in [
        (json!({"host": "web1", "path": "/a"}), "\"content\" is required"),
        (json!({"host": "web1", "path": "/a", "content": "!!", "encoding": "base64"}), "\"content\" is not valid base64"),
        (json!({"host": "web1", "path": "/a", "content": "x", "encoding": "latin1"}), "\"encoding\" must be"),
        (json!({"host": "web1", "path": "/a", "content": "x", "overwrite": "yes"}), "\"overwrite\" must be a boolean"),
        (json!({"host": "web1", "path": "/a", "content": "x", "mode": "0777"}), "unknown argument \"mode\""),
        (json!({"host": "../x", "path": "/a", "content": "x"}), "\"host\" must be a host name"),
    ] {
        let shown = v.to_string();
        let got = put(v);
        assert!(got.as_ref().is_err_and(|m| m.starts_with(why)), "{shown}: want {why:?}, got {got:?}");
    }
    assert!(get(json!({"host": "web1", "path": "/a", "content": "x"})).is_err_and(|m| m.starts_with("unknown argument \"content\"")));
}

fn ssh_policy() -> crate::policy::ssh::SshPolicy {
    policy::parse(&json!({
        "known_hosts": "/kh", "max_output_bytes": 1000,
        "hosts": {
            "web1": {"address": "10.0.0.5", "user": "deploy", "auth": {"agent": true}, "commands": ["uptime"],
                     "files": {"read": ["/var/log/app/*.log"], "write": ["/srv/up/*"], "mode": "0640", "max_bytes": 4}},
            "logs": {"address": "10.0.0.6", "user": "deploy", "auth": {"agent": true}, "files": {"read": ["/var/log/*"]}},
            "bare": {"address": "10.0.0.7", "user": "deploy", "auth": {"agent": true}}
        }
    }))
    .unwrap()
}

#[test]
fn authorized_by_the_direction_rules_only() {
    let p = ssh_policy();
    let a = authorize(&p, "web1", "/var/log/app/x.log".into(), Op::Get).unwrap();
    assert_eq!((a.conn.rule.as_str(), a.max_bytes, a.max_response_bytes, a.mode), ("ssh.hosts.web1.files.read[0]", 4, 1000, 0o640));
    assert_eq!(a.rules.iter().map(|g| g.text.as_str()).collect::<Vec<_>>(), ["/var/log/app/*.log"], "the realpath is held to the same rules");
    let a = authorize(&p, "web1", "/srv/up/new".into(), Op::Put { content: b"1234".to_vec(), overwrite: false }).unwrap();
    assert_eq!((a.conn.rule.as_str(), a.direction()), ("ssh.hosts.web1.files.write[0]", Direction::Write));

    let denied = |host: &str, path: &str, op: Op| authorize(&p, host, path.into(), op).unwrap_err();
    // A read rule never allows a write, nor the other way round.
    assert_eq!(
        denied("web1", "/srv/up/new", Op::Get),
        TransferDenial::PathNotAllowed { host: "web1".into(), direction: Direction::Read, path: "/srv/up/new".into() }
    );
    assert_eq!(
        denied("web1", "/var/log/app/x.log", Op::Put { content: vec![], overwrite: true }),
        TransferDenial::PathNotAllowed { host: "web1".into(), direction: Direction::Write, path: "/var/log/app/x.log".into() }
    );
    // `*` stays in its directory.
    assert!(matches!(denied("web1", "/var/log/app/sub/x.log", Op::Get), TransferDenial::PathNotAllowed { .. }));
    assert_eq!(
        denied("logs", "/srv/up/x", Op::Put { content: vec![], overwrite: false }),
        TransferDenial::NoRules { host: "logs".into(), direction: Direction::Write }
    );
    assert_eq!(denied("bare", "/var/log/x", Op::Get), TransferDenial::NoRules { host: "bare".into(), direction: Direction::Read });
    assert_eq!(denied("nope", "/var/log/x", Op::Get), TransferDenial::UnknownHost { host: "nope".into() });
    assert_eq!(denied("web1", "/srv/up/big", Op::Put { content: b"12345".to_vec(), overwrite: false }), TransferDenial::TooLarge { bytes: 5, limit: 4 });
    assert_eq!(denied("bare", "/x", Op::Get).to_string(), "ssh host \"bare\" has no files.read patterns: the operator allows no file reads there");
}

#[test]
fn listed_only_where_a_direction_has_rules() {
    let with = |files: Value| {
        let text = json!({"ssh": {"known_hosts": "/kh", "hosts": {"h": {"address": "h", "user": "u", "auth": {"agent": true}, "files": files}}}}).to_string();
        crate::policy::Policy::from_text(&text, std::path::Path::new("t.json")).unwrap()
    };
    let names = |p: &crate::policy::Policy| {
        let Value::Array(d) = crate::tools::definitions_for(p) else { panic!() };
        d.iter().filter_map(|d| d["name"].as_str().map(str::to_owned)).filter(|n| n.starts_with("ssh_")).collect::<Vec<_>>()
    };
    assert_eq!(names(&with(json!({"read": ["/a"]}))), ["ssh_exec", "ssh_get"]);
    assert_eq!(names(&with(json!({"write": ["/a"]}))), ["ssh_exec", "ssh_put"]);
    assert_eq!(names(&with(json!({"read": ["/a"], "write": ["/b"]}))), ["ssh_exec", "ssh_get", "ssh_put"]);
    let none = crate::policy::Policy::from_text(
        &json!({"ssh": {"known_hosts": "/kh", "hosts": {"h": {"address": "h", "user": "u", "auth": {"agent": true}}}}}).to_string(),
        std::path::Path::new("t.json"),
    )
    .unwrap();
    assert_eq!(names(&none), ["ssh_exec"]);
}
