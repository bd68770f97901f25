//! `sp --help`, the man pages' OPTIONS and the parser describe one set of flags: the
//! options listed in [`USAGE`] (and [`AUDIT_USAGE`]) are exactly the `.TP` entries of
//! sp(1) OPTIONS (and sp-audit(1)'s flags), with the same short form and value name,
//! and the parser takes each of them. A flag added in one place only fails here.

use super::*;
use std::collections::BTreeSet;

/// One flag as written: (short, long, value name).
type Flag = (Option<String>, String, Option<String>);

/// The flags of a usage text's "Options:" block: `  -c, --config FILE   text`.
fn usage_flags(usage: &str) -> BTreeSet<Flag> {
    let block = usage.split("Options:\n").nth(1).expect("an Options block");
    block
        .lines()
        .take_while(|l| !l.is_empty())
        .filter(|l| l.trim_start().starts_with('-'))
        .map(|l| {
            // The flag part ends at the first run of two spaces after it.
            let spec = l.trim_start().split("  ").next().unwrap();
            let mut words = spec.split([' ', ',']).filter(|w| !w.is_empty());
            let mut short = None;
            let mut long = String::new();
            let mut value = None;
            for w in words.by_ref() {
                if let Some(l) = w.strip_prefix("--") {
                    long = l.to_owned();
                } else if let Some(s) = w.strip_prefix('-') {
                    short = Some(s.to_owned());
                } else {
                    value = Some(w.to_owned());
                }
            }
            (short, long, value)
        })
        .collect()
}

/// The flags of a man page section: the line after each `.TP` that starts with `\-`,
/// e.g. `.BR \-c ", " \-\-config " \fIFILE\fR"`, in the section `from` .. the next `.SH`.
fn man_flags(page: &str, section: &str) -> BTreeSet<Flag> {
    let start = page.find(&format!(".SH {section}\n")).expect("the section");
    let body = &page[start + 4..];
    let body = &body[..body.find("\n.SH ").unwrap_or(body.len())];
    let lines: Vec<&str> = body.lines().collect();
    let mut flags = BTreeSet::new();
    for pair in lines.windows(2) {
        if pair[0] != ".TP" {
            continue;
        }
        let text = pair[1].split_once(' ').map_or("", |(_, rest)| rest).replace("\\fI", "").replace("\\fR", "").replace("\\-", "-").replace(['"', ','], " ");
        let words: Vec<&str> = text.split_whitespace().collect();
        if !words.first().is_some_and(|w| w.starts_with('-')) {
            continue;
        }
        let mut flag: Flag = (None, String::new(), None);
        for w in words {
            if let Some(l) = w.strip_prefix("--") {
                flag.1 = l.to_owned();
            } else if let Some(s) = w.strip_prefix('-') {
                flag.0 = Some(s.to_owned());
            } else {
                flag.2 = Some(w.to_owned());
            }
        }
        flags.insert(flag);
    }
    flags
}

#[test]
fn sp_help_and_sp_1_list_the_same_options() {
    let man = include_str!(concat!(env!("CARGO_MANIFEST_DIR"), "/man/sp.1"));
    let help = usage_flags(USAGE);
    assert_eq!(help, man_flags(man, "OPTIONS"), "sp --help vs sp(1) OPTIONS");
    assert!(help.len() >= 7, "{help:?}");
}

#[test]
fn sp_audit_help_and_sp_audit_1_list_the_same_options() {
    let man = include_str!(concat!(env!("CARGO_MANIFEST_DIR"), "/man/sp-audit.1"));
    assert_eq!(usage_flags(AUDIT_USAGE), man_flags(man, "COMMANDS"), "sp audit --help vs sp-audit(1)");
}

#[test]
fn sp_approve_help_and_sp_1_list_the_same_options() {
    let man = include_str!(concat!(env!("CARGO_MANIFEST_DIR"), "/man/sp.1"));
    assert_eq!(usage_flags(APPROVE_USAGE), man_flags(man, "APPROVAL GRANTS"), "sp approve --help vs sp(1) APPROVAL GRANTS");
}

#[test]
fn sp_upstream_help_and_sp_1_list_the_same_options() {
    let man = include_str!(concat!(env!("CARGO_MANIFEST_DIR"), "/man/sp.1"));
    assert_eq!(usage_flags(UPSTREAM_USAGE), man_flags(man, "UPSTREAM PINS"), "sp upstream --help vs sp(1) UPSTREAM PINS");
}

#[test]
fn sp_oauth_help_and_sp_1_list_the_same_options() {
    let man = include_str!(concat!(env!("CARGO_MANIFEST_DIR"), "/man/sp.1"));
    assert_eq!(usage_flags(OAUTH_USAGE), man_flags(man, "OAUTH"), "sp oauth --help vs sp(1) OAUTH");
    for (short, long, value) in usage_flags(OAUTH_USAGE) {
        for name in [Some(format!("--{long}")), short.map(|s| format!("-{s}"))].into_iter().flatten() {
            let mut argv = vec!["login".to_owned(), "gh".to_owned(), name.clone()];
            argv.extend(value.as_deref().map(|_| "/x".to_owned()));
            let got = parse_oauth(argv.iter().map(OsString::from));
            assert!(got.is_ok(), "sp oauth login gh {name}: {got:?}");
        }
    }
}

/// Each listed flag is one the parser takes (with a value when it names one), in the
/// place the help puts it; a flag it does not know is refused.
#[test]
fn the_parser_takes_every_listed_flag() {
    let value_for = |v: &str| match v {
        "N" => "4096".to_owned(),
        "HASH" => "ab".repeat(32),
        "FORMAT" => "cef".to_owned(),
        "TIME" => "1h".to_owned(),
        _ => "/x".to_owned(),
    };
    for (short, long, value) in usage_flags(USAGE) {
        for name in [Some(format!("--{long}")), short.map(|s| format!("-{s}"))].into_iter().flatten() {
            // `--probe` is `sp check`'s; the rest are `sp mcp`'s (or both commands').
            let command = if long == "probe" { "check" } else { "mcp" };
            let mut argv = vec![command.to_owned(), name.clone()];
            argv.extend(value.as_deref().map(value_for));
            let got = parse(argv.iter().map(OsString::from));
            assert!(got.is_ok(), "sp {command} {name}: {got:?}");
        }
    }
    for (short, long, value) in usage_flags(AUDIT_USAGE) {
        for name in [Some(format!("--{long}")), short.map(|s| format!("-{s}"))].into_iter().flatten() {
            let sub = match long.as_str() {
                "anchor" => "verify",
                "format" | "since" | "follow" => "export",
                "recording" => "show",
                _ => "tail",
            };
            let mut argv = vec![sub.to_owned(), "/j".to_owned(), name.clone()];
            if sub == "show" {
                argv.insert(2, "1".to_owned());
            }
            argv.extend(value.as_deref().map(value_for));
            let got = parse_audit(argv.iter().map(OsString::from));
            assert!(got.is_ok(), "sp audit {sub} {name}: {got:?}");
        }
    }
    for (short, long, value) in usage_flags(APPROVE_USAGE) {
        for name in [Some(format!("--{long}")), short.map(|s| format!("-{s}"))].into_iter().flatten() {
            let sub = if long == "all" { "revoke" } else { "list" };
            let mut argv = vec![sub.to_owned(), name.clone()];
            argv.extend(value.as_deref().map(value_for));
            let got = parse_approve(argv.iter().map(OsString::from));
            assert!(got.is_ok(), "sp approve {sub} {name}: {got:?}");
        }
    }
    for (short, long, value) in usage_flags(UPSTREAM_USAGE) {
        for name in [Some(format!("--{long}")), short.map(|s| format!("-{s}"))].into_iter().flatten() {
            let mut argv = vec!["diff".to_owned(), "gh".to_owned(), name.clone()];
            argv.extend(value.as_deref().map(value_for));
            let got = parse_upstream(argv.iter().map(OsString::from));
            assert!(got.is_ok(), "sp upstream diff gh {name}: {got:?}");
        }
    }
    assert!(parse(["mcp", "--not-listed"].map(OsString::from)).is_err());
}

/// The reason, as a value (the tables above check the texts).
#[test]
fn usage_errors_name_the_reason() {
    let e = |args: &[&str]| parse(args.iter().map(OsString::from)).unwrap_err();
    assert_eq!(e(&[]), UsageError::NoCommand);
    assert_eq!(e(&["approve", "revoke", "x"]), UsageError::GrantId);
    assert_eq!(e(&["audit", "show", "/j", "-n", "3"]), UsageError::NotFor { flag: "-n", command: "audit", sub: "show".into() });
    assert_eq!(e(&["audit", "frob", "/j"]), UsageError::UnknownSubcommand { command: "audit", name: "frob".into() });
    assert_eq!(e(&["check", "--close-on-refusal"]), UsageError::McpOnly { flag: "--close-on-refusal" });
    assert!(matches!(e(&["mcp", "--nope"]), UsageError::Lexopt { .. }));
}

/// Issue 32, section 1: `sp mcp --help`, `sp check --help` and `sp init --help` print
/// their command's own usage; each lists only flags of sp(1) OPTIONS (plus --help),
/// the parser takes each of them after its command, and sp(1) COMMANDS names each.
#[test]
fn each_commands_help_lists_flags_of_sp_1_and_the_parser_takes_them() {
    let man = include_str!(concat!(env!("CARGO_MANIFEST_DIR"), "/man/sp.1"));
    let all = man_flags(man, "OPTIONS");
    for (topic, command) in [(HelpTopic::Mcp, "mcp"), (HelpTopic::Check, "check"), (HelpTopic::Init, "init")] {
        let text = topic.text();
        assert!(text.contains(&format!("  sp {command} ")), "{command}: {text}");
        let flags = usage_flags(text);
        assert!(flags.is_subset(&all), "sp {command} --help lists a flag sp(1) OPTIONS lacks: {:?}", flags.difference(&all).collect::<Vec<_>>());
        assert_eq!(parse([command, "--help"].map(OsString::from)).unwrap().command, Command::Help(topic));
        for (short, long, value) in flags {
            if long == "help" {
                continue;
            }
            let mut argv = vec![command.to_owned(), format!("--{long}")];
            argv.extend(value.map(|v| if v == "N" { "4096".to_owned() } else { "/x".to_owned() }));
            assert!(parse(argv.iter().map(OsString::from)).is_ok(), "sp {command} --{long} ({short:?})");
        }
        assert!(man.contains(&format!(".TP\n.B {command}\n")), "sp(1) COMMANDS names {command}");
    }
    assert!(USAGE.contains("  init     "), "sp --help names init");
}

/// `sp explain --help` lists sp(1) POLICY TESTS' flags, and the parser takes each
/// after `explain` (issue 35, section 2).
#[test]
fn sp_explain_help_and_sp_1_list_the_same_options() {
    let man = include_str!(concat!(env!("CARGO_MANIFEST_DIR"), "/man/sp.1"));
    let flags = usage_flags(EXPLAIN_USAGE);
    assert_eq!(flags, man_flags(man, "POLICY TESTS"), "sp explain --help vs sp(1) POLICY TESTS");
    for (short, long, value) in flags {
        for name in [Some(format!("--{long}")), short.map(|s| format!("-{s}"))].into_iter().flatten() {
            let mut argv = vec!["--tool".to_owned(), "sp_inventory".to_owned(), name.clone()];
            argv.extend(value.as_deref().map(|v| if v == "JSON" { "{}".to_owned() } else { "/x".to_owned() }));
            let got = parse_explain(false, argv.iter().map(OsString::from));
            assert!(got.is_ok(), "sp explain {name}: {got:?}");
        }
    }
    assert!(man.contains(".TP\n.B explain\n") && man.contains(".TP\n.B test\n"), "sp(1) COMMANDS names explain and test");
}
