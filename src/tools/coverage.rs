//! A kind of tool is more than its line in the table: the operator configures it (a
//! policy section, parsed in `policy/`), the agent learns what it may do with it (an
//! `sp_inventory` entry), the journal records it (its intent row's facts, documented in
//! `sp-audit(1)`), and `sp(1)` describes it (a subsection of TOOLS). This test walks the
//! table's kinds ([`KINDS`]) and fails for a kind that misses any of them, or for a
//! kind added to the table without a row here (issue 32, "The fences").

use std::path::Path;

use serde_json::{json, Value};

use super::*;

/// What one kind owes besides its table line. `Err` is a stated reason it has none.
struct Owed {
    /// The variant's name in the table.
    kind: &'static str,
    /// The name the docs use for its tools (an upstream's are `upstream_tool`).
    name: &'static str,
    /// The policy section that configures it, with a minimal valid value.
    policy: Result<(&'static str, Value), &'static str>,
    /// Its key in `sp_inventory`'s result.
    inventory: Result<&'static str, &'static str>,
    /// A call of it, to read its journal facts from (`None`: built at run time only).
    call: Option<Value>,
    /// Whether its intent row carries a `target`, and which of `rule` and `credential`.
    target: bool,
    rule: bool,
    credential: bool,
}

/// The `ssh` section with a host that may read and write files (also `ssh_exec`'s host:
/// the sections are merged by name).
fn ssh_files() -> Value {
    json!({"known_hosts": "/nonexistent/kh", "hosts": {"web1": {"address": "10.0.0.5", "user": "u", "auth": {"agent": true},
        "files": {"read": ["/var/log/app/*.log"], "write": ["/srv/uploads/*"]}}}})
}

fn owed() -> Vec<Owed> {
    let http = json!({"allow": [{"hosts": ["api.example.com"], "methods": ["GET"]}]});
    vec![
        Owed {
            kind: "Http",
            name: "http_request",
            policy: Ok(("http", http.clone())),
            inventory: Ok("http"),
            call: Some(json!({"name": "http_request", "arguments": {"method": "GET", "url": "https://api.example.com/v1/users?q=1"}})),
            target: true,
            rule: true,
            credential: true,
        },
        Owed {
            kind: "HttpGet",
            name: "http_get",
            policy: Ok(("http", http)),
            inventory: Ok("http"),
            call: Some(json!({"name": "http_get", "arguments": {"url": "https://api.example.com/v1/users"}})),
            target: true,
            rule: true,
            credential: true,
        },
        Owed {
            kind: "Inventory",
            name: "sp_inventory",
            policy: Err("it renders the other sections"),
            inventory: Err("it is the inventory"),
            call: Some(json!({"name": "sp_inventory", "arguments": {}})),
            target: false,
            rule: false,
            credential: false,
        },
        Owed {
            kind: "Ssh",
            name: "ssh_exec",
            policy: Ok(("ssh", ssh_files())),
            inventory: Ok("ssh"),
            call: Some(json!({"name": "ssh_exec", "arguments": {"host": "web1", "command": "uptime"}})),
            target: true,
            rule: true,
            credential: false,
        },
        Owed {
            kind: "SshGet",
            name: "ssh_get",
            policy: Ok(("ssh", ssh_files())),
            inventory: Ok("files"),
            call: Some(json!({"name": "ssh_get", "arguments": {"host": "web1", "path": "/var/log/app/x.log"}})),
            target: true,
            rule: true,
            credential: false,
        },
        Owed {
            kind: "SshPut",
            name: "ssh_put",
            policy: Ok(("ssh", ssh_files())),
            inventory: Ok("files"),
            call: Some(json!({"name": "ssh_put", "arguments": {"host": "web1", "path": "/srv/uploads/x", "content": "x"}})),
            target: true,
            rule: true,
            credential: false,
        },
        Owed {
            kind: "Upstream",
            name: "upstream",
            policy: Ok(("upstreams", json!({"files": {"command": ["/bin/true"], "tools": {"allow": ["*"]}}}))),
            inventory: Ok("upstreams"),
            // Its names exist once an upstream listed them: its facts are held by
            // tools/upstream's own tests (tool.rs: target and audit).
            call: None,
            target: true,
            rule: true,
            credential: true,
        },
    ]
}

/// The lines of `man/FILE` from the line `from` (exact) up to the next `.SH`.
fn man_section(file: &str, from: &str) -> Vec<String> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("man").join(file);
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let mut lines = text.lines().skip_while(|l| *l != from);
    assert!(lines.next().is_some(), "{file}: no line {from:?}");
    lines.take_while(|l| !l.starts_with(".SH ")).map(str::to_owned).collect()
}

/// The paragraph of a `.TP` entry `.B field` in `lines`, up to the next `.TP`.
fn tagged(lines: &[String], field: &str) -> String {
    let at = lines.iter().position(|l| l == &format!(".B {field}")).unwrap_or_else(|| panic!("sp-audit(1): no field {field:?}"));
    lines[at + 1..].iter().take_while(|l| *l != ".TP").cloned().collect::<Vec<_>>().join("\n")
}

#[test]
fn every_kind_has_its_policy_section_inventory_entry_journal_facts_and_man_page() {
    let owed = owed();
    let rows: Vec<&str> = owed.iter().map(|o| o.kind).collect();
    assert_eq!(
        rows, KINDS,
        "a kind was added to (or left) the table: give it a row here, with its policy section, inventory entry, journal facts and man page"
    );

    // The top level refuses what it does not parse, so a section that parses is one `policy/` reads.
    let unknown = Policy::from_text(&json!({"not_a_section": {}}).to_string(), Path::new("t.json"));
    assert!(unknown.is_err_and(|e| e.to_string().contains("not_a_section")), "unknown top-level keys must be refused");
    let inventory_schema = inventory::output_schema();
    let tools_section = man_section("sp.1", ".SH TOOLS");
    let journal_fields = man_section("sp-audit.1", ".SH ROWS");
    let mut policy = serde_json::Map::new();
    for o in &owed {
        if let Ok((section, sample)) = &o.policy {
            let alone = Policy::from_text(&json!({*section: sample}).to_string(), Path::new("t.json"));
            assert!(alone.is_ok(), "{}: policy section {section:?}: {:?}", o.kind, alone.err().map(|e| e.to_string()));
            policy.insert((*section).to_owned(), sample.clone());
        }
        if let Ok(key) = o.inventory {
            let listed = serde_json::to_string(&inventory_schema).unwrap();
            assert!(listed.contains(&format!("\"{key}\":")), "{}: sp_inventory's outputSchema has no {key:?}", o.kind);
        }
        // sp(1) TOOLS: a subsection for the kind.
        assert!(
            tools_section.iter().any(|l| l.starts_with(".SS ") && l.to_lowercase().contains(o.name)),
            "{}: sp(1) TOOLS has no .SS subsection naming {:?}",
            o.kind,
            o.name
        );
        // sp-audit(1): the `tool` field names it; the `target` field says what its target is.
        assert!(tagged(&journal_fields, "tool").contains(o.name), "{}: sp-audit(1) field tool does not name {:?}", o.kind, o.name);
        if o.target {
            assert!(tagged(&journal_fields, "target").contains(o.name), "{}: sp-audit(1) field target does not say {:?}'s", o.kind, o.name);
        }
    }

    // The journal facts of each kind's call, as its intent row carries them.
    let mut policy = Value::Object(policy);
    policy["credentials"] = json!({"api": {"source": {"env": "SP_T"}, "inject": {"bearer": {}}, "hosts": ["api.example.com"]}});
    let policy = Policy::from_text(&policy.to_string(), Path::new("t.json")).unwrap();
    for o in owed.iter().filter(|o| o.call.is_some()) {
        let request = call_request(o.call.clone()).unwrap();
        let typed = ToolCall::parse(&request).unwrap();
        assert_eq!(typed.target().is_some(), o.target, "{}: target", o.kind);
        let audit = authorize(&policy, typed).unwrap().audit();
        assert_eq!((audit.rule.is_some(), audit.credential.is_some()), (o.rule, o.credential), "{}: rule and credential: {audit:?}", o.kind);
    }
}
