//! Parsing argv: every command, flag and usage error.

use super::*;

fn p(args: &[&str]) -> Result<Args, String> {
    parse(args.iter().map(OsString::from)).map_err(|e| e.to_string())
}

#[test]
fn parses() {
    let a = p(&["mcp", "--config", "/x.json", "-vv"]).unwrap();
    assert_eq!((a.command, a.config, a.verbose), (Command::Mcp, Some(PathBuf::from("/x.json")), 2));
    assert_eq!(p(&["--version"]).unwrap().command, Command::Version);
    assert_eq!(p(&["mcp", "-h"]).unwrap().command, Command::Help(HelpTopic::Mcp));
    assert_eq!(p(&["check", "--help"]).unwrap().command, Command::Help(HelpTopic::Check));
    assert_eq!(p(&["init", "-h"]).unwrap().command, Command::Help(HelpTopic::Init));
    assert_eq!(p(&["-h", "mcp"]).unwrap().command, Command::Help(HelpTopic::General));
    assert_eq!(p(&["init"]).unwrap().command, Command::Init(None));
    assert_eq!(p(&["init", "/x/p.json"]).unwrap().command, Command::Init(Some(PathBuf::from("/x/p.json"))));
    assert_eq!(p(&["init", "-"]).unwrap().command, Command::Init(Some(PathBuf::from("-"))));
    assert_eq!(p(&["init", "-c", "/x"]).unwrap_err(), "--config does not apply to sp init (it takes a FILE, or - for stdout)");
    assert!(p(&["init", "/a", "/b"]).is_err(), "one FILE only");
    assert_eq!(p(&["check", "-c", "/p"]).unwrap().command, Command::Check);
    let a = p(&["mcp", "--max-line-bytes", "2048", "--close-on-refusal"]).unwrap();
    assert_eq!((a.max_line_bytes, a.close_on_refusal), (2048, true));
}

#[test]
fn global_flags_may_come_before_audit() {
    let verify = |anchor: Option<&str>| AuditArgs { sub: Sub::Verify { anchor: anchor.map(str::to_owned) }, file: PathBuf::from("F") };
    let a = p(&["-q", "audit", "verify", "F"]).unwrap();
    assert_eq!((a.command, a.quiet), (Command::Audit(verify(None)), true));
    let a = p(&["-vv", "audit", "verify", "F"]).unwrap();
    assert_eq!((a.command, a.verbose), (Command::Audit(verify(None)), 2));
    let hash = "AB".repeat(32);
    let a = p(&["audit", "verify", "F", "--anchor", &hash]).unwrap();
    assert_eq!(a.command, Command::Audit(verify(Some(&"ab".repeat(32)))), "the anchor is lowercased");
    // after `audit`, -q is audit's business (and not one of its flags)
    assert!(p(&["audit", "-q", "verify", "F"]).unwrap_err().contains("-q"));
}

#[test]
fn usage_errors() {
    for (args, want) in [
        (&[][..], "a command is required"),
        (&["serve"], "unknown command \"serve\""),
        (&["mcp", "extra"], "unexpected argument \"extra\""),
        (&["mcp", "--config"], "missing argument for option '--config'"),
        (&["mcp", "--nope"], "invalid option '--nope'"),
        (&["mcp", "--max-line-bytes", "10"], "--max-line-bytes takes a number"),
        (&["mcp", "--max-line-bytes", "x"], "--max-line-bytes takes a number"),
        (&["check", "--close-on-refusal"], "--close-on-refusal only applies to sp mcp"),
        (&["mcp", "audit"], "unexpected argument \"audit\""),
        (&["-c", "/p", "audit", "verify", "F"], "--config does not apply to sp audit"),
        (&["--close-on-refusal", "audit", "verify", "F"], "--close-on-refusal only applies to sp mcp"),
        (&["-q", "audit", "verify"], "sp audit verify needs a journal FILE"),
        (&["-q", "audit", "verify", "F", "--anchor", "xyz"], "--anchor takes a row's hash"),
    ] {
        let got = p(args).map(|a| format!("{a:?}")).unwrap_err();
        assert!(got.contains(want), "{args:?}: {got}");
    }
}

#[test]
fn approve_parses_with_the_policy_before_or_after() {
    let a = p(&["-q", "-c", "/p", "approve", "list", "--json"]).unwrap();
    assert_eq!(
        (a.command, a.config, a.quiet),
        (Command::Approve(ApproveArgs { sub: ApproveSub::List { json: true }, config: None }), Some(PathBuf::from("/p")), true)
    );
    let a = p(&["approve", "revoke", "ABCDEF0123456789", "--config", "/p"]).unwrap();
    assert_eq!(
        (a.command, a.config),
        (Command::Approve(ApproveArgs { sub: ApproveSub::Revoke { id: "abcdef0123456789".into() }, config: None }), Some(PathBuf::from("/p")))
    );
    assert_eq!(p(&["approve", "revoke", "--all"]).unwrap().command, Command::Approve(ApproveArgs { sub: ApproveSub::RevokeAll, config: None }));
    assert_eq!(p(&["approve", "--help"]).unwrap().command, Command::Approve(ApproveArgs { sub: ApproveSub::Help, config: None }));
    for (args, want) in [
        (&["approve"][..], "sp approve needs a command: list or revoke (try: sp approve --help)"),
        (&["approve", "grant"], "unknown approve command \"grant\" (list or revoke)"),
        (&["approve", "list", "--all"], "--all does not apply to sp approve list"),
        (&["approve", "revoke", "--json", "--all"], "--json does not apply to sp approve revoke"),
        (&["approve", "revoke"], "sp approve revoke needs a grant id or --all"),
        (&["approve", "revoke", "0123456789abcdef", "--all"], "sp approve revoke takes a grant id or --all, not both"),
        (&["approve", "revoke", "0123456789abcde"], "sp approve revoke takes a grant id: 16 hex digits, as sp approve list shows them"),
        (&["approve", "revoke", "0123456789abcdeg"], "sp approve revoke takes a grant id: 16 hex digits, as sp approve list shows them"),
        (&["approve", "revoke", "../../etc/passwd"], "sp approve revoke takes a grant id: 16 hex digits, as sp approve list shows them"),
        (&["approve", "list", "extra"], "unexpected argument \"extra\""),
        (&["-c", "/a", "approve", "list", "-c", "/b"], "--config given twice"),
        (&["--close-on-refusal", "approve", "list"], "--close-on-refusal only applies to sp mcp"),
    ] {
        assert_eq!(p(args).map(|a| format!("{a:?}")), Err(want.to_owned()), "{args:?}");
    }
}

#[test]
fn upstream_parses_with_the_policy_before_or_after() {
    let a = p(&["-q", "-c", "/p", "upstream", "diff", "gh"]).unwrap();
    let diff = UpstreamArgs { sub: UpstreamSub::Diff { upstream: "gh".into() }, config: None };
    assert_eq!((a.command, a.config, a.quiet), (Command::Upstream(diff), Some(PathBuf::from("/p")), true));
    let a = p(&["upstream", "approve", "gh", "get_me", "files.read", "--config", "/p"]).unwrap();
    let approve = UpstreamArgs { sub: UpstreamSub::Approve { upstream: "gh".into(), tools: vec!["get_me".into(), "files.read".into()] }, config: None };
    assert_eq!((a.command, a.config), (Command::Upstream(approve), Some(PathBuf::from("/p"))));
    assert_eq!(
        p(&["upstream", "pin", "gh"]).unwrap().command,
        Command::Upstream(UpstreamArgs { sub: UpstreamSub::Pin { upstream: "gh".into() }, config: None })
    );
    assert_eq!(p(&["upstream", "-h"]).unwrap().command, Command::Upstream(UpstreamArgs { sub: UpstreamSub::Help, config: None }));
    for (args, want) in [
        (&["upstream"][..], "sp upstream needs a command: pin, diff or approve (try: sp upstream --help)"),
        (&["upstream", "list", "gh"], "unknown upstream command \"list\" (pin, diff or approve)"),
        (&["upstream", "diff"], "sp upstream takes the NAME of an upstream of the policy (1-24 of a-z, 0-9, -)"),
        (&["upstream", "diff", "G_H"], "sp upstream takes the NAME of an upstream of the policy (1-24 of a-z, 0-9, -)"),
        (&["upstream", "diff", "../x"], "sp upstream takes the NAME of an upstream of the policy (1-24 of a-z, 0-9, -)"),
        (&["upstream", "pin", "gh", "tool"], "sp upstream pin takes no tool names (only approve does)"),
        (&["upstream", "diff", "gh", "--json"], "invalid option '--json'"),
        (&["-c", "/a", "upstream", "diff", "gh", "-c", "/b"], "--config given twice"),
        (&["--probe", "upstream", "diff", "gh"], "--probe only applies to sp check"),
    ] {
        assert_eq!(p(args).map(|a| format!("{a:?}")), Err(want.to_owned()), "{args:?}");
    }
}

fn pa(args: &[&str]) -> Result<AuditArgs, String> {
    parse_audit(args.iter().map(OsString::from)).map_err(|e| e.to_string())
}

#[test]
fn audit_parses() {
    let hash = "ab".repeat(32);
    assert_eq!(pa(&["verify", "/j", "--anchor", &hash]).unwrap().sub, Sub::Verify { anchor: Some(hash.clone()) });
    assert_eq!(pa(&["tail", "/j", "-n", "3"]).unwrap().sub, Sub::Tail { lines: 3, json: false });
    assert_eq!(pa(&["show", "--json", "/j"]).unwrap().sub, Sub::Show { json: true, seq: None, recording: false });
    assert_eq!(pa(&["show", "/j", "7", "--recording"]).unwrap().sub, Sub::Show { json: false, seq: Some(7), recording: true });
    assert_eq!(pa(&["show", "/j", "--recording"]).unwrap_err(), UsageError::Seq.to_string());
    assert_eq!(pa(&["show", "/j", "x"]).unwrap_err(), UsageError::Seq.to_string());
    assert_eq!(pa(&["tail", "/j", "--recording"]).unwrap_err(), "--recording does not apply to sp audit tail");
    assert_eq!(pa(&["--help"]).unwrap().sub, Sub::Help);
    let long = "a".repeat(65);
    for (bad, want) in [
        (&[][..], "sp audit needs a command"),
        (&["verify"], "sp audit verify needs a journal FILE"),
        (&["frob", "/j"], "unknown audit command \"frob\""),
        (&["show", "/j", "-n", "2"], "-n does not apply to sp audit show"),
        (&["verify", "/j", "--json"], "--json does not apply to sp audit verify"),
        (&["tail", "/j", "-n", "x"], "-n takes a number"),
        (&["show", "/a", "/b"], "SEQ is a row's seq number"),
        (&["show", "/a", "1", "2"], "unexpected argument \"2\""),
        (&["show", "/j", "1", "--recording", "--json"], "SEQ is a row's seq number (--recording needs one)"),
        (&["tail", "/j", "--anchor", &hash], "--anchor does not apply to sp audit tail"),
        // A malformed anchor is a usage error (exit 2), not a broken journal
        (&["verify", "/j", "--anchor", "ab"], "--anchor takes a row's hash: 64 hex digits"),
        (&["verify", "/j", "--anchor", &long], "--anchor takes a row's hash"),
        (&["verify", "/j", "--anchor", &format!("{}g", "a".repeat(63))], "--anchor takes a row's hash"),
        (&["verify", "/j", "--anchor", ""], "--anchor takes a row's hash"),
        (&["verify", "/j", "--anchor"], "missing argument for option '--anchor'"),
    ] {
        let got = pa(bad).map(|a| format!("{a:?}")).unwrap_err();
        assert!(got.contains(want), "{bad:?}: {got}");
    }
}

/// `sp explain` and `sp test` (issue 35, section 2): the call given whole or built from
/// `--tool` and `--args`, `-c` before or after the command, and the usage errors.
#[test]
fn explain_and_test_parse() {
    let p = |a: &[&str]| parse(a.iter().map(OsString::from));
    let call = r#"{"tool":"sp_inventory"}"#;
    let a = p(&["explain", "-c", "/p.json", "--json", call]).unwrap();
    assert_eq!(
        (a.command, a.config),
        (Command::Explain(ExplainArgs { sub: ExplainSub::Explain { call: call.into(), json: true }, config: None }), Some(PathBuf::from("/p.json")))
    );
    let a = p(&["-c", "/p.json", "explain", "--tool", "http_get", "--args", r#"{"url":"https://a"}"#]).unwrap();
    let want = ExplainSub::Explain { call: r#"{"tool": "http_get", "arguments": {"url":"https://a"}}"#.into(), json: false };
    assert_eq!((a.command, a.config), (Command::Explain(ExplainArgs { sub: want, config: None }), Some(PathBuf::from("/p.json"))));
    // A tool name is quoted as JSON, not pasted: it cannot add members to the call.
    let a = p(&["explain", "--tool", "x\", \"y\": \"z"]).unwrap();
    let Command::Explain(ExplainArgs { sub: ExplainSub::Explain { call: built, .. }, .. }) = a.command else { panic!() };
    assert_eq!(serde_json::from_str::<serde_json::Value>(&built).unwrap()["tool"], "x\", \"y\": \"z");
    assert_eq!(
        p(&["test", "cases.jsonl"]).unwrap().command,
        Command::Explain(ExplainArgs { sub: ExplainSub::Test { file: "cases.jsonl".into() }, config: None })
    );
    assert_eq!(p(&["explain", "--help"]).unwrap().command, Command::Explain(ExplainArgs { sub: ExplainSub::Help, config: None }));
    assert_eq!(p(&["explain"]).unwrap_err(), UsageError::NoCall { command: "explain" });
    assert_eq!(p(&["explain", call, "--tool", "x"]).unwrap_err(), UsageError::CallTwice);
    assert_eq!(p(&["explain", call, "--args", "{}"]).unwrap_err(), UsageError::CallTwice);
    assert_eq!(p(&["test"]).unwrap_err(), UsageError::NoCases);
    assert_eq!(p(&["test", "f", "--json"]).unwrap_err(), UsageError::ExplainOnly { flag: "--json" });
    assert_eq!(p(&["-c", "/a", "explain", "-c", "/b", call]).unwrap_err(), UsageError::ConfigTwice);
    let argv = |a: &[&str]| a.iter().map(OsString::from).collect::<Vec<_>>();
    assert!(is_explain(&argv(&["-c", "/p", "explain", "--nope"])) && is_explain(&argv(&["test"])));
    assert!(!is_explain(&argv(&["audit", "show", "test"])) && !is_explain(&argv(&["mcp"])));
}

/// `sp audit export`: its flags, their defaults, and the usage errors that name them.
#[test]
fn audit_export_flags() {
    use crate::audit::export::Format;
    let export = |format, since, follow| AuditArgs { sub: Sub::Export { format, since, follow }, file: PathBuf::from("F") };
    assert_eq!(p(&["audit", "export", "F"]).unwrap().command, Command::Audit(export(Format::Ndjson, None, false)));
    let a = p(&["audit", "export", "F", "--format", "cef", "--since", "90m", "--follow"]).unwrap();
    assert_eq!(a.command, Command::Audit(export(Format::Cef, Some(Since::Ago(5400)), true)));
    let a = p(&["audit", "export", "--since", "2026-12-05T13:00:00+01:00", "F", "--format", "ocsf"]).unwrap();
    assert_eq!(a.command, Command::Audit(export(Format::Ocsf, Some(Since::At(1_796_472_000_000)), false)));
    assert_eq!(p(&["audit", "export", "F", "--format", "leef"]).unwrap_err(), "--format takes ndjson, cef or ocsf");
    for bad in ["1w", "h", "-1h", "1.5h", "yesterday", "99999999999999999999d"] {
        assert!(p(&["audit", "export", "F", "--since", bad]).unwrap_err().starts_with("--since takes an RFC 3339 time"), "{bad}");
    }
    assert_eq!(p(&["audit", "show", "F", "--follow"]).unwrap_err(), "--follow does not apply to sp audit show");
    assert_eq!(p(&["audit", "verify", "F", "--format", "cef"]).unwrap_err(), "--format does not apply to sp audit verify");
    assert_eq!(p(&["audit", "export", "F", "--json"]).unwrap_err(), "--json does not apply to sp audit export");
    assert_eq!(p(&["audit", "export"]).unwrap_err(), "sp audit export needs a journal FILE");
}
