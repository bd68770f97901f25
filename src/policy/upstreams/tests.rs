//! The `upstreams` section's parsing: the issue's example, every refusal naming its
//! field, the globs.

use super::*;
use serde_json::json;

fn creds() -> BTreeMap<String, Credential> {
    let def = |hosts: Value, extra: Value| {
        let mut d = json!({"source": {"env": "X"}, "inject": {"bearer": {}}, "hosts": hosts});
        d.as_object_mut().unwrap().extend(extra.as_object().unwrap().clone());
        d
    };
    [
        ("github", def(json!(["unused.invalid"]), json!({}))),
        ("tickets", def(json!(["mcp.tickets.example", "x"]), json!({}))),
        ("narrow", def(json!(["x"]), json!({"paths": ["/v1/*"], "methods": ["GET", "POST"]}))),
        ("getonly", def(json!(["x"]), json!({"methods": ["GET"]}))),
    ]
    .into_iter()
    .map(|(n, d)| (n.to_owned(), super::super::credentials::credential(n, &d, n).unwrap()))
    .collect()
}

fn one(def: Value) -> Check<Upstream> {
    parse(&json!({"u": def}), &creds()).map(|mut m| m.remove("u").unwrap())
}

#[test]
fn the_issue_example_parses() {
    let all = parse(
        &json!({
          "github": {
            "command": ["/usr/local/bin/github-mcp-server", "stdio"],
            "env": {"GITHUB_PERSONAL_ACCESS_TOKEN": {"credential": "github"}, "GITHUB_TOOLSETS": "repos,issues"},
            "cwd": "/var/lib/sallyport/github",
            "tools": {"allow": ["get_*", "list_*", "search_*", "create_issue"], "deny": ["delete_*"], "approve": ["create_issue"]},
            "arguments": {"create_issue": {"owner": ["acme"], "repo": ["api", "web"]}},
            "timeout_s": 60,
            "max_output_bytes": 1048576
          },
          "tickets": {"url": "https://mcp.tickets.example/mcp", "credential": "tickets", "tools": {"allow": ["*"]}}
        }),
        &creds(),
    )
    .unwrap();
    let g = &all["github"];
    let env = BTreeMap::from([
        ("GITHUB_PERSONAL_ACCESS_TOKEN".to_owned(), EnvValue::Credential("github".into())),
        ("GITHUB_TOOLSETS".to_owned(), EnvValue::Literal("repos,issues".into())),
    ]);
    assert_eq!(
        g.transport,
        UpstreamTransport::Stdio {
            command: vec!["/usr/local/bin/github-mcp-server".into(), "stdio".into()],
            env,
            cwd: Some("/var/lib/sallyport/github".into()),
            sandbox: Some(Sandbox::default()),
            user: None
        }
    );
    assert_eq!((g.timeout, g.startup_timeout, g.max_output_bytes), (Duration::from_secs(60), Duration::from_secs(30), 1048576));
    assert!(g.tools.exposes("get_me") && g.tools.exposes("create_issue") && !g.tools.exposes("delete_repo") && !g.tools.exposes("fork"));
    assert!(g.tools.needs_approval("create_issue") && !g.tools.needs_approval("get_me"));
    assert_eq!(g.arguments["create_issue"]["repo"], vec![Glob::new("api").unwrap(), Glob::new("web").unwrap()]);
    let t = &all["tickets"];
    assert_eq!(
        t.transport,
        UpstreamTransport::Http { url: url::Url::parse("https://mcp.tickets.example/mcp").unwrap(), credential: Some("tickets".into()), oauth: None }
    );
    assert_eq!((t.timeout, t.max_output_bytes), (Duration::from_secs(DEFAULT_TIMEOUT_S), DEFAULT_MAX_OUTPUT_BYTES));
}

#[test]
fn errors_name_the_field() {
    let allow = json!({"allow": ["*"]});
    let cases: Vec<(Value, &str, &str)> = vec![
        (json!({"tools": allow}), "upstreams.u", "must have exactly one of \"command\" (a stdio upstream) or \"url\" (Streamable HTTP)"),
        (
            json!({"command": ["/a"], "url": "https://x/", "tools": allow}),
            "upstreams.u",
            "must have exactly one of \"command\" (a stdio upstream) or \"url\" (Streamable HTTP)",
        ),
        (json!({"command": ["/a"]}), "upstreams.u.tools", "is required: {\"allow\": [globs]} (an upstream without allow exposes nothing)"),
        (json!({"command": ["/a"], "tools": {}}), "upstreams.u.tools.allow", "is required (no allow exposes nothing)"),
        (json!({"command": ["/a"], "tools": {"allow": []}}), "upstreams.u.tools.allow", "must not be empty"),
        (
            json!({"command": ["/a"], "tools": {"allow": ["*"], "denied": ["x"]}}),
            "upstreams.u.tools.denied",
            "unknown field (expected one of: allow, deny, approve)",
        ),
        (json!({"command": ["/a"], "tools": {"allow": [""]}}), "upstreams.u.tools.allow[0]", "must not be empty"),
        (json!({"command": ["/a"], "tools": {"allow": ["a\u{7}"]}}), "upstreams.u.tools.allow[0]", "contains a control character"),
        (json!({"command": [], "tools": allow}), "upstreams.u.command", "must not be empty"),
        (json!({"command": ["bin/x"], "tools": allow}), "upstreams.u.command[0]", "must be an absolute path or a program name looked up in PATH"),
        (json!({"command": ["/a", 1], "tools": allow}), "upstreams.u.command[1]", "must be a string without NUL"),
        (json!({"command": ["/a"], "cwd": "rel", "tools": allow}), "upstreams.u.cwd", "must be an absolute path"),
        (
            json!({"command": ["/a"], "credential": "github", "tools": allow}),
            "upstreams.u.credential",
            "only applies to a url upstream (a command upstream takes secrets through env)",
        ),
        (json!({"command": ["/a"], "env": {"A=B": "x"}, "tools": allow}), "upstreams.u.env.\"A=B\"", "must be a variable name ([A-Za-z_][A-Za-z0-9_]*)"),
        (json!({"command": ["/a"], "env": {"A": 1}, "tools": allow}), "upstreams.u.env.A", "must be a string or {\"credential\": NAME}"),
        (
            json!({"command": ["/a"], "env": {"A": {"credential": "nope"}}, "tools": allow}),
            "upstreams.u.env.A.credential",
            "names no credential of the credentials section (\"nope\")",
        ),
        (
            json!({"command": ["/a"], "env": {"A": {"cred": "github"}}, "tools": allow}),
            "upstreams.u.env.A.cred",
            "unknown field (expected one of: credential)",
        ),
        (json!({"url": "https://x/", "env": {}, "tools": allow}), "upstreams.u.env", "only applies to a command upstream"),
        (json!({"url": "ftp://x/", "tools": allow}), "upstreams.u.url", "must be an http or https URL with a host"),
        (json!({"url": "https://u:p@x/", "tools": allow}), "upstreams.u.url", "must hold no user, password or fragment (put secrets in a credential)"),
        (
            json!({"url": "https://x/", "credential": "nope", "tools": allow}),
            "upstreams.u.credential",
            "names no credential of the credentials section (\"nope\")",
        ),
        (
            json!({"url": "https://evil.example/mcp", "credential": "tickets", "tools": allow}),
            "upstreams.u.credential",
            "credential \"tickets\" is bound to other hosts: add this URL's to credentials.tickets.hosts",
        ),
        (
            json!({"url": "https://x:8443/mcp", "credential": "tickets", "tools": allow}),
            "upstreams.u.credential",
            "credential \"tickets\" is bound to other hosts: add this URL's to credentials.tickets.hosts",
        ),
        (
            json!({"url": "https://x/mcp", "credential": "narrow", "tools": allow}),
            "upstreams.u.credential",
            "credential \"narrow\" is bound to other paths: add this URL's to credentials.narrow.paths",
        ),
        (
            json!({"url": "https://x/mcp", "credential": "getonly", "tools": allow}),
            "upstreams.u.credential",
            "credential \"getonly\" does not allow POST, which every MCP message is",
        ),
        (json!({"command": ["/a"], "tools": allow, "timeout_s": 0}), "upstreams.u.timeout_s", "must be an integer from 1 to 3600"),
        (json!({"command": ["/a"], "tools": allow, "startup_timeout_s": 301}), "upstreams.u.startup_timeout_s", "must be an integer from 1 to 300"),
        (json!({"command": ["/a"], "tools": allow, "max_output_bytes": 10}), "upstreams.u.max_output_bytes", "must be an integer from 4096 to 67108864"),
        (
            json!({"command": ["/a"], "tools": allow, "timeout": 5}),
            "upstreams.u.timeout",
            "unknown field (expected one of: command, env, cwd, url, credential, tools, arguments, timeout_s, startup_timeout_s, max_output_bytes, approve, sandbox, user, pin, resources, prompts, auth, elicitation, tasks, protocol)",
        ),
        (
            json!({"command": ["/a"], "tools": allow, "sandbox": "off"}),
            "upstreams.u.sandbox",
            "must be \"none\" or an object ({\"read\": [paths], \"write\": [paths], \"network\": bool, ...})",
        ),
        (json!({"command": ["/a"], "tools": allow, "sandbox": {"read": ["rel"]}}), "upstreams.u.sandbox.read[0]", "must be an absolute path"),
        (json!({"command": ["/a"], "tools": allow, "sandbox": {"write": "/tmp"}}), "upstreams.u.sandbox.write", "must be an array"),
        (json!({"command": ["/a"], "tools": allow, "sandbox": {"network": "no"}}), "upstreams.u.sandbox.network", "must be true or false"),
        (json!({"command": ["/a"], "tools": allow, "sandbox": {"memory_mb": 1}}), "upstreams.u.sandbox.memory_mb", "must be an integer from 64 to 1048576"),
        (
            json!({"command": ["/a"], "tools": allow, "sandbox": {"exec": []}}),
            "upstreams.u.sandbox.exec",
            "unknown field (expected one of: read, write, network, memory_mb, processes, files)",
        ),
        (json!({"command": ["/a"], "tools": allow, "user": "root"}), "upstreams.u.user", "must not be root (leave it out to run as sp's user)"),
        (
            json!({"command": ["/a"], "tools": allow, "user": "Bad Name"}),
            "upstreams.u.user",
            "must be a user name ([a-z_][a-z0-9_-]*, at most 32 characters)",
        ),
        (json!({"url": "https://x/", "tools": allow, "sandbox": "none"}), "upstreams.u.sandbox", "only applies to a command upstream"),
        (json!({"url": "https://x/", "tools": allow, "user": "nobody"}), "upstreams.u.user", "only applies to a command upstream"),
        (json!({"command": ["/a"], "tools": allow, "pin": "tofu"}), "upstreams.u.pin", "must be \"first-use\", \"strict\" or \"off\""),
        (json!({"command": ["/a"], "tools": allow, "pin": true}), "upstreams.u.pin", "must be \"first-use\", \"strict\" or \"off\""),
        (json!({"command": ["/a"], "tools": allow, "tasks": "yes"}), "upstreams.u.tasks", "must be true or false"),
        (
            json!({"command": ["/a"], "tools": allow, "protocol": "2025-11-25"}),
            "upstreams.u.protocol",
            "must be \"2026-07-28\" (absent: the initialize handshake)",
        ),
        (
            json!({"url": "https://x/", "tools": allow, "protocol": "2026-07-28"}),
            "upstreams.u.protocol",
            "only applies to a command upstream (sp speaks 2026-07-28 over Streamable HTTP not yet)",
        ),
        (
            json!({"command": ["/a"], "tools": {"allow": ["get_*"], "deny": ["get_secret"]}, "arguments": {"get_secret": {"a": ["x"]}}}),
            "upstreams.u.arguments.get_secret",
            "names a tool that tools.allow does not expose (or tools.deny removes): the pin could never apply",
        ),
        (json!({"command": ["/a"], "tools": allow, "arguments": {"t": {}}}), "upstreams.u.arguments.t", "must pin 1 to 256 arguments"),
        (json!({"command": ["/a"], "tools": allow, "arguments": {"t": {"a": "x"}}}), "upstreams.u.arguments.t.a", "must be an array"),
    ];
    for (def, field, why) in cases {
        let shown = def.to_string();
        let (f, w) = one(def).unwrap_err();
        assert_eq!((f.as_str(), w.as_str()), (field, why), "{shown}");
    }
    for bad in ["", "GitHub", "git_hub", "a.b", "a b", "abcdefghijklmnopqrstuvwxy"] {
        let (f, w) = parse(&json!({bad: {"command": ["/a"], "tools": {"allow": ["*"]}}}), &creds()).unwrap_err();
        assert_eq!((f, w.starts_with("an upstream name is 1-24")), (format!("upstreams.{bad}"), true), "{bad:?}");
    }
    assert_eq!(parse(&json!([]), &creds()).unwrap_err().0, "upstreams");
    assert!(one(json!({"url": "https://x/v1/mcp", "credential": "narrow", "tools": {"allow": ["*"]}})).is_ok());
}

#[test]
fn globs() {
    let g = |p: &str, s: &str| Glob::new(p).unwrap().matches(s);
    let cases = [
        ("*", "", true),
        ("*", "anything", true),
        ("get_*", "get_me", true),
        ("get_*", "get_", true),
        ("get_*", "xget_me", false),
        ("*_issue", "create_issue", true),
        ("a?c", "abc", true),
        ("a?c", "ac", false),
        ("a?c", "abbc", false),
        ("a*b*c", "aXbYbZc", true),
        ("a*b*c", "aXbYbZ", false),
        ("exact", "exact", true),
        ("exact", "exactly", false),
        ("/srv/data/*", "/srv/data/x/y.txt", true),
        ("/srv/data/*", "/srv/data/../../etc/passwd", false),
        ("/srv/data/*", "/srv/data/..", false),
        ("/srv/data/*", "/srv/data/..\\x", false),
        ("/srv/data/*", "/srv/data/x..y", true),
        ("/srv/data/../x", "/srv/data/../x", true),
        ("*", "a\nb", false),
        ("a?b", "a\u{0}b", false),
        ("*", "é", true),
        ("?", "é", true),
    ];
    for (p, s, want) in cases {
        assert_eq!(g(p, s), want, "{p:?} vs {s:?}");
    }
    // Linear enough on a long value: no exponential backtracking.
    let long = "a".repeat(100_000);
    let start = std::time::Instant::now();
    assert!(!g("*a*a*a*a*a*b", &long));
    assert!(start.elapsed() < Duration::from_secs(2));
}

/// `resources` and `prompts` (issue 33): absent relays nothing; `deny` wins; the
/// refusals name the field.
#[test]
fn resources_and_prompts_rules() {
    let u = one(json!({"command": ["/a"], "tools": {"allow": ["*"]}})).unwrap();
    assert!(!u.resources.any() && !u.prompts.any());
    assert!(!u.resources.exposes("test://static/resource/1"));
    let u = one(json!({"command": ["/a"], "tools": {"allow": ["*"]}, "resources": {"allow": ["test://static/*"], "deny": ["test://static/resource/2"]}, "prompts": {"allow": ["simple_*"]}})).unwrap();
    assert!(u.resources.exposes("test://static/resource/1"));
    assert!(!u.resources.exposes("test://static/resource/2"), "deny wins");
    assert!(!u.resources.exposes("test://static/../secret"), "a `..` segment never matches a wildcard");
    assert!(!u.resources.exposes("file:///etc/passwd"));
    assert!(u.prompts.exposes("simple_prompt") && !u.prompts.exposes("complex_prompt"));
    let cases = [
        (json!({"resources": {}}), "upstreams.u.resources.allow", "is required (no allow relays nothing)"),
        (json!({"resources": {"allow": ["*"], "approve": ["x"]}}), "upstreams.u.resources.approve", "unknown field (expected one of: allow, deny)"),
        (json!({"prompts": {"allow": [""]}}), "upstreams.u.prompts.allow[0]", "must not be empty"),
        (json!({"prompts": ["*"]}), "upstreams.u.prompts", "must be an object"),
    ];
    for (extra, field, why) in cases {
        let mut def = json!({"command": ["/a"], "tools": {"allow": ["*"]}});
        def.as_object_mut().unwrap().extend(extra.as_object().unwrap().clone());
        let (f, w) = one(def).unwrap_err();
        assert_eq!((f.as_str(), w.starts_with(why)), (field, true), "{w}");
    }
}

/// `auth.oauth` (issue 33 §2): the defaults, loopback, and every refusal naming its field.
#[test]
fn oauth_auth() {
    let allow = json!({"allow": ["*"]});
    let u = one(json!({"url": "https://mcp.example/mcp", "auth": {"oauth": {"client_id": "sp-1"}}, "tools": allow})).unwrap();
    let UpstreamTransport::Http { oauth: Some(o), credential: None, .. } = u.transport else { panic!("{:?}", u.transport) };
    assert_eq!(
        o,
        OAuth {
            client_id: Some("sp-1".into()),
            scopes: vec![],
            redirect: Redirect::Stdin { redirect_uri: url::Url::parse("http://127.0.0.1/callback").unwrap() },
            issuer: None,
            store: StoreKind::Auto,
        }
    );
    let u = one(json!({"url": "https://mcp.example/mcp", "auth": {"oauth": {"client_id": "c", "redirect": "loopback", "port": 8976, "scopes": ["a:b", "c"], "issuer": "https://as.example/t1"}}, "tools": allow}))
        .unwrap();
    let UpstreamTransport::Http { oauth: Some(o), .. } = u.transport else { panic!() };
    assert_eq!(
        (o.redirect, o.scopes, o.issuer.unwrap().as_str().to_owned()),
        (Redirect::Loopback { port: 8976 }, vec!["a:b".to_owned(), "c".to_owned()], "https://as.example/t1".to_owned())
    );
    // No client_id: dynamic client registration at login (RFC 7591).
    let u = one(json!({"url": "https://mcp.example/mcp", "auth": {"oauth": {}}, "tools": allow})).unwrap();
    let UpstreamTransport::Http { oauth: Some(o), .. } = u.transport else { panic!() };
    assert_eq!(o.client_id, None);
    let cases: Vec<(Value, &str, &str)> = vec![
        (
            json!({"command": ["/a"], "auth": {"oauth": {"client_id": "c"}}}),
            "upstreams.u.auth",
            "only applies to a url upstream (a command upstream takes secrets through env)",
        ),
        (json!({"url": "https://x/", "auth": {}}), "upstreams.u.auth.oauth", "is required (the only kind of auth so far)"),
        (
            json!({"url": "https://x/", "auth": {"oauth": {"client_id": "c\u{7}"}}}),
            "upstreams.u.auth.oauth.client_id",
            "must be 1 to 256 characters, none a control character",
        ),
        (
            json!({"url": "https://x/", "auth": {"oauth": {"client_id": "c", "secret": "s"}}}),
            "upstreams.u.auth.oauth.secret",
            "unknown field (expected one of: client_id, scopes, redirect, redirect_uri, port, issuer, store)",
        ),
        (
            json!({"url": "https://x/", "auth": {"oauth": {"client_id": "c", "redirect": "browser"}}}),
            "upstreams.u.auth.oauth.redirect",
            "must be \"stdin\" or \"loopback\"",
        ),
        (
            json!({"url": "https://x/", "auth": {"oauth": {"client_id": "c", "port": 1}}}),
            "upstreams.u.auth.oauth.port",
            "only applies to \"redirect\": \"loopback\"",
        ),
        (
            json!({"url": "https://x/", "auth": {"oauth": {"client_id": "c", "scopes": ["a b"]}}}),
            "upstreams.u.auth.oauth.scopes[0]",
            "must be a scope token (visible ASCII, no space, '\"' or '\\')",
        ),
        (
            json!({"url": "https://x/", "auth": {"oauth": {"client_id": "c", "issuer": "ftp://as"}}}),
            "upstreams.u.auth.oauth.issuer",
            "must be an http or https URL with a host",
        ),
        (
            json!({"url": "https://x/", "auth": {"oauth": {"client_id": "c", "store": "encrypted"}}}),
            "upstreams.u.auth.oauth.store",
            "must be \"auto\", \"systemd-creds\" or \"file\"",
        ),
        (
            json!({"url": "https://x/", "credential": "tickets", "auth": {"oauth": {"client_id": "c"}}}),
            "upstreams.u.auth",
            "a url upstream takes either a credential or auth.oauth, not both",
        ),
    ];
    for (def, field, message) in cases {
        let mut def = def;
        def.as_object_mut().unwrap().insert("tools".into(), allow.clone());
        assert_eq!(one(def.clone()).unwrap_err(), (field.to_owned(), message.to_owned()), "{def}");
    }
}

/// `auth.oauth.store` (issue 33 §2): each word, and one token store per policy, so two
/// upstreams that disagree are refused, naming the second.
#[test]
fn oauth_store_kind_is_one_for_the_policy() {
    let with = |store: Option<&str>| {
        let mut o = json!({"client_id": "c"});
        if let Some(s) = store {
            o["store"] = json!(s);
        }
        json!({"url": "https://mcp.example/mcp", "auth": {"oauth": o}, "tools": {"allow": ["*"]}})
    };
    for (word, kind) in
        [(None, StoreKind::Auto), (Some("auto"), StoreKind::Auto), (Some("systemd-creds"), StoreKind::SystemdCreds), (Some("file"), StoreKind::File)]
    {
        let UpstreamTransport::Http { oauth: Some(o), .. } = one(with(word)).unwrap().transport else { panic!() };
        assert_eq!(o.store, kind, "{word:?}");
    }
    let both = json!({"a": with(Some("systemd-creds")), "b": with(Some("systemd-creds")), "c": {"command": ["/a"], "tools": {"allow": ["*"]}}});
    assert!(parse(&both, &creds()).is_ok());
    let apart = json!({"a": with(Some("systemd-creds")), "b": with(None)});
    assert_eq!(
        parse(&apart, &creds()).unwrap_err(),
        (
            "upstreams.b.auth.oauth.store".to_owned(),
            "is \"auto\" but upstreams.a's is \"systemd-creds\": the token store is one file for the policy, give every upstream the same".to_owned()
        )
    );
}
