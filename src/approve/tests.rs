use super::*;
use std::time::Duration;

/// The approver script in a private temporary directory (removed on drop).
fn script(body: &str) -> (tempfile::TempDir, Vec<String>) {
    let dir = tempfile::Builder::new().prefix("sp-approve-unit-").tempdir().unwrap();
    let path = dir.path().join("approver");
    std::fs::write(&path, format!("#!/bin/sh\n{body}\n")).unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o700)).unwrap();
    (dir, vec![path.display().to_string()])
}

/// A client as the gate sees it: whether it can be asked, and its one answer.
struct Stub {
    can: bool,
    reply: Elicited,
    asked: usize,
}

impl Elicitor for Stub {
    fn can_ask(&self) -> bool {
        self.can
    }
    fn ask(&mut self, params: &Value, _: Instant, _: &Cancel, _: &mut Progress<'_>) -> Elicited {
        assert_eq!(params["requestedSchema"]["required"], json!(["approve"]));
        self.asked += 1;
        self.reply.clone()
    }
}

/// The gate over every channel outcome, with an approver that counts its runs: which
/// channel is asked, in which order, what falls back and what refuses. Attacks tried
/// (all held): a subject that requires the command with a client that would say yes
/// (never asked); elicitation alone with a client that cannot ask (refused, not run);
/// an answer of the wrong shape (refused, no fallback to a friendlier channel).
#[test]
fn the_gate_asks_each_channel_in_turn() {
    let (dir, argv) = script("cat >/dev/null; echo x >> \"$0.runs\"; exit 0");
    let runs = || std::fs::read_to_string(format!("{}.runs", argv[0])).map(|s| s.lines().count()).unwrap_or(0);
    let policy = |via: Value, approve: Value| {
        let text = json!({
            "approval": {"via": via, "command": argv, "timeout_s": 5},
            "credentials": {"api": {"source": {"env": "A"}, "inject": {"bearer": {}}, "hosts": ["x"], "approve": approve}}
        });
        Policy::from_text(&text.to_string(), std::path::Path::new("p.json")).unwrap()
    };
    let ask = |only_command| Ask { subject: "api".into(), host: "x".into(), request: json!({}), raw: json!({}), only_command };
    let ctx = Context { tool: Some("http_request".into()), target: Some("GET https://x/".into()), request_fp: Some("fp".into()), ..Default::default() };
    let both = json!(["elicitation", "command"]);
    let refuse = |reason, code, message: &str| Gate::Refuse(Rejection { reason, code, message: message.into() });
    let accept = Elicited::Result(json!({"action": "accept", "content": {"approve": true}}));
    let cases = [
        // (via, approve, can ask, the client's reply, the gate, client asked, approver runs)
        (both.clone(), json!(true), true, accept.clone(), Gate::Run { intent: "approved" }, 1, 0),
        (both.clone(), json!(true), false, accept.clone(), Gate::Run { intent: "approved" }, 0, 1),
        (both.clone(), json!(true), true, Elicited::Error("it answered with error -32601".into()), Gate::Run { intent: "approved" }, 1, 1),
        (both.clone(), json!(true), true, Elicited::TimedOut, Gate::Run { intent: "approved" }, 1, 1),
        (both.clone(), json!("command"), true, accept.clone(), Gate::Run { intent: "approved" }, 0, 1),
        (
            both.clone(),
            json!(true),
            true,
            Elicited::Result(json!({"action": "decline"})),
            refuse(Reason::Declined, ToolCode::NotApproved, "the user declined this call: the user declined it (elicitation)"),
            1,
            0,
        ),
        (
            both.clone(),
            json!(true),
            true,
            Elicited::Result(json!({"action": "cancel"})),
            refuse(Reason::Dismissed, ToolCode::NotApproved, "the user dismissed the approval form: the user dismissed the form (elicitation cancel)"),
            1,
            0,
        ),
        (
            both.clone(),
            json!(true),
            true,
            Elicited::Result(json!({"action": "accept", "content": {"approve": 1}})),
            refuse(Reason::NotApproved, ToolCode::NotApproved, "this call was not approved: the client's answer is malformed: approve is not a boolean"),
            1,
            0,
        ),
        (
            both.clone(),
            json!(true),
            true,
            Elicited::Cancelled,
            refuse(Reason::Cancelled, ToolCode::Cancelled, "cancelled by the client while approval was asked"),
            1,
            0,
        ),
        (
            json!(["elicitation"]),
            json!(true),
            false,
            accept.clone(),
            refuse(
                Reason::NotApproved,
                ToolCode::NotApproved,
                "this call was not approved: nobody could be asked: the client did not declare form elicitation",
            ),
            0,
            0,
        ),
    ];
    for (i, (via, approve, can, reply, want, asked, ran)) in cases.into_iter().enumerate() {
        let p = policy(via, approve.clone());
        let only_command = approve == json!("command");
        let before = runs();
        let mut stub = Stub { can, reply, asked: 0 };
        let mut progress = Progress::none();
        let cancel = Cancel::new();
        let mut asking = Asking { cancel: &cancel, progress: &mut progress, elicitor: &mut stub, grants: None };
        let got = gate(&p, &mut Journal::off(), &ctx, Some(&ask(only_command)), &mut asking);
        assert_eq!((got, stub.asked, runs() - before), (want, asked, ran), "case {i}");
    }
    // 2026-07-28: the first call is answered input_required with the form.
    let mut stub = Stub { can: true, reply: Elicited::Deferred, asked: 0 };
    let (mut progress, cancel) = (Progress::none(), Cancel::new());
    let mut asking = Asking { cancel: &cancel, progress: &mut progress, elicitor: &mut stub, grants: None };
    match gate(&policy(both, json!(true)), &mut Journal::off(), &ctx, Some(&ask(false)), &mut asking) {
        Gate::InputRequired(params) => assert!(params["message"].as_str().unwrap().starts_with("Approve this action?\ntool: http_request\n")),
        other => panic!("{other:?}"),
    }
    drop(dir);
}

/// `sp check` names the channels when they are not the default, and the subjects that
/// require the command.
#[test]
fn check_summary_names_channels_and_command_only_subjects() {
    let cred = |approve: Value| json!({"source": {"env": "A"}, "inject": {"bearer": {}}, "hosts": ["x"], "approve": approve});
    let text = json!({
        "approval": {"via": ["elicitation", "command"], "command": ["/nonexistent/approver"], "timeout_s": 30},
        "credentials": {"a": cred(json!(true)), "b": cred(json!("command")), "c": cred(json!(false))}
    });
    let p = Policy::from_text(&text.to_string(), std::path::Path::new("p.json")).unwrap();
    let summary = check_summary(&p);
    let approval = summary.lines().nth(1).unwrap();
    assert!(approval.starts_with("approval: command /nonexistent/approver (REFUSED when asked: "), "{approval}");
    assert!(approval.ends_with(", timeout 30s, via elicitation then command; credentials: a,b (command only); ssh hosts: none"), "{approval}");
    let p = Policy::from_text(&json!({"approval": {"via": ["elicitation"]}}).to_string(), std::path::Path::new("p.json")).unwrap();
    assert_eq!(check_summary(&p), "mode: enforce\napproval: command none, timeout 120s, via elicitation; credentials: none; ssh hosts: none\n");
}

#[test]
fn exit_codes_timeouts_and_signals() {
    let d = json!({"tool": "x"});
    for (body, decision, exit) in [
        ("cat >/dev/null; exit 0", "approved", Some(0)),
        ("exit 1", "refused", Some(1)),
        ("echo yes; exit 3", "refused", Some(3)),
        ("kill -SEGV $$", "failed", None),
    ] {
        let (dir, argv) = script(body);
        let a = ask(&argv, Duration::from_secs(10), &d, &[], &[]);
        assert_eq!((a.decision, a.exit), (decision, exit), "{body}: {}", a.why);
        drop(dir);
    }
    // Far more output than a pipe holds: still answered by its exit, not a timeout.
    let (dir, argv) = script("head -c 1000000 /dev/zero; head -c 1000000 /dev/zero >&2; exit 0");
    assert_eq!(ask(&argv, Duration::from_secs(10), &d, &[], &[]).decision, "approved");
    drop(dir);
    let (dir, argv) = script("sleep 30 & sleep 30");
    let t = Instant::now();
    let a = ask(&argv, Duration::from_secs(1), &d, &[], &[]);
    assert_eq!(a.decision, "timeout");
    assert!(t.elapsed() < Duration::from_secs(5));
    drop(dir);
    let a = ask(&["/nonexistent/approver".into()], Duration::from_secs(1), &d, &[], &[]);
    assert_eq!(a.decision, "failed");
}

#[test]
fn an_approver_others_can_write_or_a_fifo_is_refused_before_it_runs() {
    let (dir, argv) = script("touch \"$0.ran\"; exit 0");
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&argv[0], std::fs::Permissions::from_mode(0o777)).unwrap();
    let a = ask(&argv, Duration::from_secs(5), &json!({}), &[], &[]);
    assert_eq!(a.decision, "failed");
    assert!(a.why.contains("0777") && a.why.contains("too open"), "{}", a.why);
    assert!(!dir.path().join("approver.ran").exists(), "the approver ran");
    let fifo = dir.path().join("fifo");
    assert!(std::process::Command::new("mkfifo").arg(&fifo).status().unwrap().success());
    let started = Instant::now();
    let a = ask(&[fifo.display().to_string()], Duration::from_secs(30), &json!({}), &[], &[]);
    assert_eq!(a.decision, "failed");
    assert!(a.why.contains("FIFO") && started.elapsed() < Duration::from_secs(2), "{}", a.why);
}

#[test]
fn env_sources_are_hidden_and_facts_are_given() {
    let (dir, argv) = script(&format!("env > {}/env; cat > {}/stdin", "$(dirname $0)", "$(dirname $0)"));
    // No set_var (unsafe under edition 2024, and racy): hide a variable this test
    // process already has; the approver must not see it.
    let (hidden, _) = std::env::vars().find(|(k, v)| k != "PATH" && !k.starts_with("SP_") && !v.is_empty()).expect("the test runs with an environment");
    let a = ask(&argv, Duration::from_secs(10), &json!({"tool": "t"}), &[("SP_APPROVAL_TOOL", "t".into())], &[hidden.as_str()]);
    assert_eq!(a.decision, "approved", "{}", a.why);
    let env = std::fs::read_to_string(dir.path().join("env")).unwrap();
    assert!(env.lines().any(|l| l == "SP_APPROVAL_TOOL=t"), "{env}");
    assert!(!env.lines().any(|l| l.starts_with(&format!("{hidden}="))), "{hidden} reached the approver: {env}");
    assert_eq!(std::fs::read_to_string(dir.path().join("stdin")).unwrap(), "{\"tool\":\"t\"}\n");
    drop(dir);
}
