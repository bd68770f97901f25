//! Real published servers (`make upstreams`; a loud skip when one is missing).

use super::*;

fn everything() -> Option<Vec<String>> {
    let js = root().join("tests/upstreams/node_modules/@modelcontextprotocol/server-everything/dist/index.js");
    installed(&js).then(|| vec!["node".into(), js.display().to_string(), "stdio".into()])
}

#[test]
fn server_everything_lists_echoes_adds_and_reports_progress() {
    let Some(cmd) = everything() else { return };
    let p = policy(
        json!({"everything": {
            "command": cmd,
            "tools": {"allow": ["echo", "get-sum", "trigger-long-running-operation", "get-env", "get-structured-content"],
                      "deny": ["get-env"], "approve": ["get-sum"]},
            "arguments": {"echo": {"message": ["hello *", "exact"]}},
            "startup_timeout_s": 30
        }}),
        // `approve` needs an approver in enforce mode; observe mode needs none.
        json!({"mode": "observe"}),
    );
    let mut ups = Upstreams::new(&p);
    let mut vault = Vault::new();
    let listed: Vec<(String, bool)> = ups.list("everything", &mut vault).unwrap().iter().map(|t| (t.exposed.clone(), t.approve)).collect();
    assert_eq!(
        listed,
        vec![
            ("everything_echo".to_owned(), false),
            ("everything_get-structured-content".to_owned(), false),
            ("everything_get-sum".to_owned(), true),
            ("everything_trigger-long-running-operation".to_owned(), false),
        ]
    );
    let def = &ups.list("everything", &mut vault).unwrap()[3].definition;
    assert_eq!(def["name"], json!("everything_trigger-long-running-operation"));
    assert_eq!(def["annotations"], json!({"readOnlyHint": true, "destructiveHint": false, "idempotentHint": true, "openWorldHint": false}));
    assert_eq!(def["inputSchema"]["type"], json!("object"));
    let g = group(&ups, "everything");

    // A denied tool is not in the table; a pinned argument must match.
    let t = ups.tables().clone();
    assert_eq!(authorize(&p.upstreams, &t, "everything_get-env", &Map::new()), Err(UpstreamDenial::UnknownTool { exposed: "everything_get-env".into() }));
    assert_eq!(
        authorize(&p.upstreams, &t, "everything_echo", &args(json!({"message": "bye"}))),
        Err(UpstreamDenial::ArgumentMismatch {
            exposed: "everything_echo".into(),
            argument: "message".into(),
            allowed: vec!["hello *".into(), "exact".into()]
        })
    );
    assert_eq!(
        authorize(&p.upstreams, &t, "everything_echo", &Map::new()),
        Err(UpstreamDenial::ArgumentMissing {
            exposed: "everything_echo".into(),
            argument: "message".into(),
            allowed: vec!["hello *".into(), "exact".into()]
        })
    );
    assert_eq!(
        authorize(&p.upstreams, &t, "everything_echo", &args(json!({"message": ["hello x"]}))),
        Err(UpstreamDenial::ArgumentNotString {
            exposed: "everything_echo".into(),
            argument: "message".into(),
            allowed: vec!["hello *".into(), "exact".into()]
        })
    );
    assert!(authorize(&p.upstreams, &t, "everything_get-sum", &Map::new()).unwrap().needs_approval());

    let echo = call(&mut ups, &p, "everything_echo", json!({"message": "hello world"})).unwrap();
    assert_eq!((text(&echo), echo.result.is_error, echo.started), ("Echo: hello world", false, false));
    let sum = call(&mut ups, &p, "everything_get-sum", json!({"a": 2, "b": 3})).unwrap();
    assert_eq!(text(&sum), "The sum of 2 and 3 is 5.");
    let structured = call(&mut ups, &p, "everything_get-structured-content", json!({"location": "New York"})).unwrap();
    assert!(structured.result.structured.is_some(), "{structured:?}");

    let a = args(json!({"duration": 1, "steps": 3}));
    let r = route(&mut ups, &p, "everything_trigger-long-running-operation", &a);
    let mut notes = Vec::new();
    let done = ups.call(&r, a, None, &Cancel::new(), &mut |n| notes.push(n), &mut vault).unwrap();
    assert_eq!(text(&done), "Long running operation completed. Duration: 1 seconds, Steps: 3.");
    let seen: Vec<(f64, Option<f64>)> = notes.iter().map(|n| (n.progress, n.total)).collect();
    assert_eq!(seen, vec![(1.0, Some(3.0)), (2.0, Some(3.0)), (3.0, Some(3.0))]);

    ups.shutdown();
    assert_group_gone(g);
    assert_eq!(ups.take_events().len(), 3, "started, pinned (first use), ended");
}

#[test]
fn server_filesystem_reads_only_under_the_pinned_path() {
    let js = root().join("tests/upstreams/node_modules/@modelcontextprotocol/server-filesystem/dist/index.js");
    if !installed(&js) {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let base = std::fs::canonicalize(dir.path()).unwrap();
    std::fs::create_dir(base.join("data")).unwrap();
    std::fs::write(base.join("data/a.txt"), "alpha\n").unwrap();
    std::fs::write(base.join("secret.txt"), "no\n").unwrap();
    let data = base.join("data").display().to_string();
    let p = policy(
        json!({"fs": {
            "command": ["node", js.display().to_string(), base.display().to_string()],
            "tools": {"allow": ["read_text_file", "list_directory"], "deny": ["write_*"]},
            "arguments": {"read_text_file": {"path": [format!("{data}/*")]}},
            "startup_timeout_s": 30,
            // The directory it serves is granted to its sandbox, read-only.
            "sandbox": {"read": ([super::test_read_paths(), vec![base.display().to_string()]].concat())}
        }}),
        json!({}),
    );
    let mut ups = Upstreams::new(&p);
    let names: Vec<String> = ups.list("fs", &mut Vault::new()).unwrap().iter().map(|t| t.exposed.clone()).collect();
    assert_eq!(names, vec!["fs_read_text_file", "fs_list_directory"], "in the upstream's order");
    let g = group(&ups, "fs");
    let read = call(&mut ups, &p, "fs_read_text_file", json!({"path": format!("{data}/a.txt")})).unwrap();
    assert_eq!(text(&read), "alpha\n");
    for outside in [base.join("secret.txt").display().to_string(), format!("{data}/../secret.txt"), format!("{data}/..")] {
        assert_eq!(
            authorize(&p.upstreams, ups.tables(), "fs_read_text_file", &args(json!({"path": outside}))),
            Err(UpstreamDenial::ArgumentMismatch { exposed: "fs_read_text_file".into(), argument: "path".into(), allowed: vec![format!("{data}/*")] }),
            "{outside}"
        );
    }
    assert_eq!(authorize(&p.upstreams, ups.tables(), "fs_write_file", &Map::new()), Err(UpstreamDenial::UnknownTool { exposed: "fs_write_file".into() }));
    // The upstream's own refusal is an error result, not a failure of sp.
    let missing = call(&mut ups, &p, "fs_read_text_file", json!({"path": format!("{data}/nope.txt")})).unwrap();
    assert!(missing.result.is_error, "{missing:?}");
    drop(ups);
    assert_group_gone(g);
}

#[test]
fn mcp_server_time_answers_in_utc() {
    let bin = root().join(".venv-upstreams/bin/mcp-server-time");
    if !installed(&bin) {
        return;
    }
    let p = one(vec![bin.display().to_string(), "--local-timezone".into(), "UTC".into()], json!({"tools": {"allow": ["get_current_time"]}}));
    let mut ups = Upstreams::new(&p);
    let listed: Vec<String> = ups.list("m", &mut Vault::new()).unwrap().iter().map(|t| t.exposed.clone()).collect();
    assert_eq!(listed, vec!["m_get_current_time"]);
    let g = group(&ups, "m");
    let now = call(&mut ups, &p, "m_get_current_time", json!({"timezone": "UTC"})).unwrap();
    let answer: Value = serde_json::from_str(text(&now)).unwrap();
    assert_eq!(answer["timezone"], json!("UTC"), "{answer}");
    ups.shutdown();
    assert_group_gone(g);
}

/// mcp-server-time (the pinned release, on the official Python SDK) offers 2026-07-28 in
/// its `server/discover`: with `"protocol": "2026-07-28"` sp speaks that revision to it
/// (no handshake) and its tool answers as over the handshake; without it, the handshake.
#[test]
fn mcp_server_time_is_spoken_to_in_2026_07_28_when_the_policy_asks() {
    let bin = root().join(".venv-upstreams/bin/mcp-server-time");
    if !installed(&bin) {
        return;
    }
    for modern in [true, false] {
        let mut more = json!({"tools": {"allow": ["get_current_time"]}});
        if modern {
            more["protocol"] = json!("2026-07-28");
        }
        let p = one(vec![bin.display().to_string(), "--local-timezone".into(), "UTC".into()], more);
        let mut ups = Upstreams::new(&p);
        let listed: Vec<String> = ups.list("m", &mut Vault::new()).unwrap().iter().map(|t| t.exposed.clone()).collect();
        assert_eq!(listed, vec!["m_get_current_time"], "modern: {modern}");
        let version = ups.version("m").unwrap();
        assert_eq!(version == "2026-07-28", modern, "modern: {modern}, spoken: {version}");
        let g = group(&ups, "m");
        let now = call(&mut ups, &p, "m_get_current_time", json!({"timezone": "UTC"})).unwrap();
        let answer: Value = serde_json::from_str(text(&now)).unwrap();
        assert_eq!(answer["timezone"], json!("UTC"), "modern: {modern}: {answer}");
        ups.shutdown();
        assert_group_gone(g);
    }
}
