//! `sp_inventory`: what the operator allows, rendered from the policy. The agent learns
//! the HTTP allow rules, each credential's name, scheme (and its public settings: AWS
//! region and service, OAuth2 scopes) and binding, and each SSH host's name, user,
//! command patterns (`null` = any command) and, unless `hide_address`, its address;
//! `"approve": true` marks what waits for the operator's approver. Never a secret, a
//! secret's source, an SSH auth method or a key path. Upstream MCP servers: each one's
//! name, transport (`stdio`, or `http` with its host) and exposed tools, never its
//! environment, command line or URL beyond the host.
//!
//! The call takes no arguments and runs nothing: its "action" is the rendered inventory,
//! authorized like any other (`Rules<()>`), so it is journaled as intent and result.

use std::convert::Infallible;

use serde_json::{json, Map, Value};

use crate::approve::Ask;
use crate::gate::authorize::{Authorized, Rules};
use crate::gate::exec::RunContext;
use crate::gate::vault::Scrubbed;
use crate::mcp::model::{ArgError, ToolResult};
use crate::policy::{HostPattern, Injection, PathPattern, Policy};
use crate::tools::{Audit, Executor, Tool};

pub(crate) const SP_INVENTORY: &str = "sp_inventory";

/// What `sp_inventory` shows: names, hosts, paths, methods. Never a secret or its source.
#[derive(Debug, Clone, PartialEq)]
pub struct Inventory(pub Value);

impl Rules<()> for Inventory {
    type Denial = Infallible;
    fn check(policy: &Policy, (): ()) -> Result<Inventory, Infallible> {
        Ok(Inventory(render(policy)))
    }
}

/// The table's entry for `sp_inventory` (`tools/mod.rs`).
pub(crate) struct InventoryTool;

impl Tool for InventoryTool {
    const NAME: &'static str = SP_INVENTORY;
    type Call = ();
    type Action = Inventory;
    type Denial = Infallible;

    fn definition() -> Value {
        json!({
            "name": SP_INVENTORY,
            "title": "What this gateway allows",
            "description": "List what the operator allows: HTTP destinations (hosts, methods, paths) and credential names with the hosts, paths and (when limited) methods they are bound to, and SSH host names with their users and allowed commands (null = any). Never returns a secret.",
            "inputSchema": {"type": "object", "properties": {}, "additionalProperties": false},
            "outputSchema": output_schema(),
            "annotations": {"title": "What this gateway allows", "readOnlyHint": true, "openWorldHint": false}
        })
    }

    fn parse(arguments: &Map<String, Value>) -> Result<(), ArgError> {
        match arguments.keys().next() {
            None => Ok(()),
            Some(k) => crate::mcp::model::bad(format!("unknown argument {:?}: sp_inventory takes none", crate::mcp::model::short(k))),
        }
    }

    fn target((): &()) -> Option<String> {
        None
    }

    fn code(denial: &Infallible) -> crate::gate::outcome::ToolCode {
        match *denial {}
    }

    fn audit(_: &Inventory) -> Audit {
        Audit::default()
    }

    fn approval(_: &Policy, _: &Inventory) -> Option<Ask> {
        None
    }

    /// The policy's part as rendered; with upstreams, each one listed (started if it
    /// is not running) for the tools it exposes, whose names are the upstream's words.
    fn run(executor: &mut dyn Executor, policy: &Policy, action: Authorized<Inventory>, ctx: &mut RunContext<'_, '_>) -> ToolResult {
        let mut fields = Scrubbed::from_policy(action.action().0.clone());
        if !policy.upstreams.is_empty() {
            let listed = crate::tools::upstream::inventory(policy, executor.upstreams(), ctx.vault());
            fields.extend(ctx.vault().scrub_fields(json!({"upstreams": listed})));
        }
        ToolResult::ok(fields)
    }
}

/// The `outputSchema` of `sp_inventory`: what [`render`] writes.
pub(crate) fn output_schema() -> Value {
    let strings = json!({"type": "array", "items": {"type": "string"}});
    let credential = json!({
        "type": "object",
        "properties": {
            "name": {"type": "string"}, "hosts": strings, "paths": strings, "methods": strings,
            "scheme": {"type": "string", "enum": ["bearer", "basic", "header", "query", "aws_sigv4", "oauth2"]},
            "region": {"type": "string"}, "service": {"type": "string"}, "scopes": strings,
            "approve": {"type": "boolean", "description": "Calls with it wait for a human's approval"}
        },
        "required": ["name", "hosts", "paths", "scheme"],
        "additionalProperties": false
    });
    let host = json!({
        "type": "object",
        "properties": {
            "name": {"type": "string"}, "user": {"type": "string"},
            "commands": {"type": ["array", "null"], "items": {"type": "string"}, "description": "null: any command"},
            "address": {"type": "string"}, "port": {"type": "integer"},
            "approve": {"type": "boolean", "description": "Calls to it wait for a human's approval"},
            "files": {
                "type": "object",
                "description": "ssh_get and ssh_put: absolute path patterns ('*' any run of characters but '/', '?' one), the mode of written files, the largest file",
                "properties": {"read": strings, "write": strings, "mode": {"type": "string"}, "max_bytes": {"type": "integer"}},
                "required": ["read", "write", "mode", "max_bytes"],
                "additionalProperties": false
            }
        },
        "required": ["name", "user", "commands"],
        "additionalProperties": false
    });
    let allow = json!({
        "type": "object",
        "properties": {"hosts": strings, "methods": strings, "paths": strings},
        "required": ["hosts", "methods", "paths"],
        "additionalProperties": false
    });
    let upstream = json!({
        "type": "object",
        "properties": {
            "name": {"type": "string"},
            "transport": {"type": "string", "enum": ["stdio", "http"]},
            "host": {"type": "string"},
            "tools": {"type": "array", "items": {
                "type": "object",
                "properties": {
                    "name": {"type": "string"},
                    "approve": {"type": "boolean"},
                    "pins": {
                        "type": "object",
                        "description": "Arguments the policy pins: each value must match one of these globs ('*' any run of characters, '?' one)",
                        "additionalProperties": {"type": "array", "items": {"type": "string"}}
                    }
                },
                "required": ["name", "approve"],
                "additionalProperties": false
            }},
            "error": {"type": "string", "description": "Why its tools could not be listed"}
        },
        "required": ["name", "transport"],
        "additionalProperties": false
    });
    let props = json!({
        "upstreams": {"type": "array", "items": upstream, "description": "Only with upstreams in the policy"},
        "http": {
            "type": "object",
            "properties": {"allow": {"type": "array", "items": allow}, "credentials": {"type": "array", "items": credential}},
            "required": ["allow", "credentials"],
            "additionalProperties": false
        },
        "ssh": {
            "type": "object",
            "properties": {"hosts": {"type": "array", "items": host}},
            "required": ["hosts"],
            "additionalProperties": false
        }
    });
    let Value::Object(props) = props else { unreachable!("an object literal") };
    crate::gate::outcome::result_schema(props, &["http", "ssh"])
}

/// The inventory of `policy` (module docs).
fn render(policy: &Policy) -> Value {
    let texts = |v: &[HostPattern]| v.iter().map(|h| h.text.clone()).collect::<Vec<_>>();
    let paths = |v: &[PathPattern]| v.iter().map(|p| p.text()).collect::<Vec<_>>();
    let allow: Vec<Value> = policy
        .http
        .allow
        .iter()
        .map(|r| {
            json!({
                "hosts": texts(&r.hosts),
                "methods": r.methods.iter().map(|m| m.as_str()).collect::<Vec<_>>(),
                "paths": paths(&r.paths),
            })
        })
        .collect();
    let credentials: Vec<Value> = policy
        .credentials
        .values()
        .map(|c| {
            let mut v = json!({"name": c.name, "hosts": texts(&c.hosts), "paths": paths(&c.paths)});
            // The scheme and its public settings, never a key or token.
            v["scheme"] = json!(match &c.inject {
                Injection::Bearer => "bearer",
                Injection::Basic => "basic",
                Injection::Header { .. } => "header",
                Injection::Query { .. } => "query",
                Injection::AwsSigV4(s) => {
                    v["region"] = json!(s.scope.region());
                    v["service"] = json!(s.scope.service());
                    "aws_sigv4"
                }
                Injection::OAuth2(t) => {
                    v["scopes"] = json!(t.scope_list());
                    "oauth2"
                }
            });
            if let Some(m) = &c.methods {
                v["methods"] = json!(m.iter().map(|m| m.as_str()).collect::<Vec<_>>());
            }
            // The agent learns which calls wait for a human's approval.
            if c.approve.needed() {
                v["approve"] = json!(true);
            }
            v
        })
        .collect();
    let hosts: Vec<Value> = policy
        .ssh
        .hosts
        .values()
        .map(|h| {
            let commands = h.commands.as_ref().map(|l| l.iter().map(|p| p.text.clone()).collect::<Vec<_>>());
            let mut v = json!({"name": h.name, "user": h.user, "commands": commands});
            if !h.hide_address {
                v["address"] = json!(h.address);
                v["port"] = json!(h.port);
            }
            if h.approve.needed() {
                v["approve"] = json!(true);
            }
            if let Some(f) = &h.files {
                let texts = |l: &[crate::policy::ssh::files::PathGlob]| l.iter().map(|g| g.text.clone()).collect::<Vec<_>>();
                v["files"] = json!({"read": texts(&f.read), "write": texts(&f.write), "mode": format!("{:04o}", f.mode), "max_bytes": f.max_bytes});
            }
            v
        })
        .collect();
    json!({
        "http": {"allow": allow, "credentials": credentials},
        "ssh": {"hosts": hosts},
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn policy(v: Value) -> Policy {
        Policy::from_text(&v.to_string(), std::path::Path::new("test.json")).unwrap()
    }

    /// The whole inventory of a policy with every kind of entry: names, bindings,
    /// schemes and their public settings, approval flags, hidden addresses; no source.
    #[test]
    fn the_inventory_is_the_policy_without_its_secrets() {
        let p = policy(json!({
            "mode": "observe",
            "credentials": {
                "api": {"source": {"env": "API"}, "inject": {"bearer": {}}, "hosts": ["api.example.com"], "paths": ["/v1/*"], "approve": true},
                "ro": {"source": {"file": "/k"}, "inject": {"basic": {}}, "hosts": ["ro.example.net"], "methods": ["GET"]}
            },
            "http": {"allow": [{"hosts": ["api.example.com"], "methods": ["GET", "POST"], "paths": ["/v1/*"]}]},
            "ssh": {"known_hosts": "/nonexistent/kh", "hosts": {
                "web1": {"address": "10.0.0.5", "user": "deploy", "auth": {"key_file": "/secret/key"}, "commands": ["uptime"], "approve": true},
                "db": {"address": "10.0.0.6", "port": 2222, "user": "ops", "auth": {"agent": true}, "hide_address": true}
            }}
        }));
        let got = crate::gate::authorize::authorize::<Inventory, ()>(&p, ()).unwrap();
        let want = json!({
            "http": {
                "allow": [{"hosts": ["api.example.com"], "methods": ["GET", "POST"], "paths": ["/v1/*"]}],
                "credentials": [
                    {"name": "api", "hosts": ["api.example.com"], "paths": ["/v1/*"], "scheme": "bearer", "approve": true},
                    {"name": "ro", "hosts": ["ro.example.net"], "paths": ["/*"], "scheme": "basic", "methods": ["GET"]}
                ]
            },
            "ssh": {"hosts": [
                {"name": "db", "user": "ops", "commands": null},
                {"name": "web1", "user": "deploy", "commands": ["uptime"], "address": "10.0.0.5", "port": 22, "approve": true}
            ]}
        });
        assert_eq!(got.action(), &Inventory(want));
    }

    #[test]
    fn it_takes_no_arguments() {
        assert_eq!(InventoryTool::parse(&Map::new()), Ok(()));
        let mut one = Map::new();
        one.insert("x".into(), json!(1));
        assert_eq!(InventoryTool::parse(&one), Err(ArgError("unknown argument \"x\": sp_inventory takes none".into())));
    }
}
