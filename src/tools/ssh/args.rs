//! `ssh_exec` arguments: `{host, command, timeout_s?, stdin?}`, hand-checked, unknown
//! names refused (stage 5 of the pipeline, like `http/args.rs` does for `http_request`).
//!
//! Nothing here knows the policy: whether the host exists, whether the command is on
//! its list and whether `timeout_s` is within `ssh.timeout_s` is authorization's call.

use serde_json::{json, Map, Value};

use crate::mcp::jsonrpc::kind_of;
use crate::mcp::model::{bad, ArgError};

pub(crate) const SSH_EXEC: &str = "ssh_exec";
/// Longer command lines are refused (OpenSSH itself accepts up to 256 KiB).
pub(crate) const MAX_COMMAND_BYTES: usize = 32 * 1024;
pub(crate) const MAX_STDIN_BYTES: usize = 1024 * 1024;

/// `ssh_exec` arguments after every check.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SshExec {
    pub host: String,
    pub command: String,
    pub timeout_s: Option<u64>,
    pub stdin: Option<String>,
}

/// The `tools/list` entry.
pub(crate) fn definition() -> Value {
    json!({
        "name": SSH_EXEC,
        "title": "Run a command over SSH",
        "description": "Run one command on an SSH host the operator allows, by inventory name (see sp_inventory). \
            The gateway holds the key, verifies the host key and reuses the connection. The command goes to the \
            remote user's shell; when the host has a command list it must match one of its patterns exactly \
            (`*` = one plain argument) and may not contain ; & | ` $( > < or newlines. A non-zero exit status is a \
            normal result. The command runs on a terminal unless the host opts out: stderr then arrives merged into \
            stdout, and a command that outlives its timeout is stopped (SIGHUP). stdout and stderr share one output \
            budget; `truncated` says it was reached.",
        "inputSchema": {
            "type": "object",
            "properties": {
                "host": {"type": "string", "description": "Host name from sp_inventory"},
                "command": {"type": "string", "description": "Command line to run", "maxLength": MAX_COMMAND_BYTES},
                "timeout_s": {"type": "integer", "minimum": 1, "maximum": crate::policy::ssh::MAX_TIMEOUT_S, "description": "Seconds before the command is stopped (at most the operator's limit)"},
                "stdin": {"type": "string", "description": "Text fed to the command's standard input", "maxLength": MAX_STDIN_BYTES}
            },
            "required": ["host", "command"],
            "additionalProperties": false
        },
        "outputSchema": super::result::output_schema(),
        "annotations": {"title": "Run a command over SSH", "readOnlyHint": false, "destructiveHint": true, "openWorldHint": true}
    })
}

pub(crate) fn parse(args: &Map<String, Value>) -> Result<SshExec, ArgError> {
    const KNOWN: [&str; 4] = ["host", "command", "timeout_s", "stdin"];
    if let Some(k) = args.keys().find(|k| !KNOWN.contains(&k.as_str())) {
        let shown = crate::sys::short(k, 64, crate::sys::Ellipsis::Silent);
        return bad(format!("unknown argument {shown:?} (ssh_exec takes: {})", KNOWN.join(", ")));
    }
    let string = |key: &str| -> Result<Option<&str>, ArgError> {
        match args.get(key) {
            None => Ok(None),
            Some(Value::String(s)) => Ok(Some(s)),
            Some(other) => bad(format!("{key:?} must be a string, found {}", kind_of(other))),
        }
    };
    let host = match string("host")? {
        None => return bad("\"host\" is required"),
        Some(h) if crate::policy::ssh::is_host_name(h) => h.to_owned(),
        Some(_) => return bad("\"host\" must be a host name from sp_inventory"),
    };
    let command = match string("command")? {
        None => return bad("\"command\" is required"),
        Some("") => return bad("\"command\" must not be empty"),
        Some(c) if c.len() > MAX_COMMAND_BYTES => return bad(format!("\"command\" is longer than {MAX_COMMAND_BYTES} bytes")),
        // A C string cannot carry it, and no shell would see what was sent.
        Some(c) if c.contains('\0') => return bad("\"command\" must not contain NUL"),
        Some(c) => c.to_owned(),
    };
    let timeout_s = match args.get("timeout_s") {
        None => None,
        Some(v) => match v.as_u64() {
            Some(n) if (1..=crate::policy::ssh::MAX_TIMEOUT_S).contains(&n) && !v.is_f64() => Some(n),
            _ => return bad(format!("\"timeout_s\" must be an integer from 1 to {}", crate::policy::ssh::MAX_TIMEOUT_S)),
        },
    };
    let stdin = match string("stdin")? {
        Some(s) if s.len() > MAX_STDIN_BYTES => return bad(format!("\"stdin\" is longer than {MAX_STDIN_BYTES} bytes")),
        s => s.map(str::to_owned),
    };
    Ok(SshExec { host, command, timeout_s, stdin })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(v: Value) -> Result<SshExec, ArgError> {
        let Value::Object(m) = v else { panic!() };
        parse(&m)
    }

    #[test]
    fn accepted() {
        let a = p(json!({"host": "web1", "command": "uptime"})).unwrap();
        assert_eq!(a, SshExec { host: "web1".into(), command: "uptime".into(), timeout_s: None, stdin: None });
        let a = p(json!({"host": "web1", "command": "cat", "timeout_s": 5, "stdin": "x\ny"})).unwrap();
        assert_eq!((a.timeout_s, a.stdin.as_deref()), (Some(5), Some("x\ny")));
    }

    #[test]
    fn refused_with_the_reason() {
        for (v, why) in [
            (json!({}), "\"host\" is required"),
            (json!({"command": "x"}), "\"host\" is required"),
            (json!({"host": "web1"}), "\"command\" is required"),
            (json!({"host": 1, "command": "x"}), "\"host\" must be a string, found an integer"),
            (json!({"host": "../x", "command": "x"}), "\"host\" must be a host name from sp_inventory"),
            (json!({"host": "", "command": "x"}), "\"host\" must be a host name from sp_inventory"),
            (json!({"host": "web1", "command": ""}), "\"command\" must not be empty"),
            (json!({"host": "web1", "command": ["ls"]}), "\"command\" must be a string, found an array"),
            (json!({"host": "web1", "command": "a\u{0}b"}), "\"command\" must not contain NUL"),
            (json!({"host": "web1", "command": "x".repeat(MAX_COMMAND_BYTES + 1)}), "\"command\" is longer than"),
            (json!({"host": "web1", "command": "x", "timeout_s": 0}), "\"timeout_s\" must be an integer from 1 to 3600"),
            (json!({"host": "web1", "command": "x", "timeout_s": 1.5}), "\"timeout_s\" must be an integer from 1 to 3600"),
            (json!({"host": "web1", "command": "x", "timeout_s": 3601}), "\"timeout_s\" must be an integer from 1 to 3600"),
            (json!({"host": "web1", "command": "x", "timeout_s": "5"}), "\"timeout_s\" must be an integer from 1 to 3600"),
            (json!({"host": "web1", "command": "x", "stdin": 5}), "\"stdin\" must be a string, found an integer"),
            (json!({"host": "web1", "command": "x", "stdin": "x".repeat(MAX_STDIN_BYTES + 1)}), "\"stdin\" is longer than"),
            (json!({"host": "web1", "command": "x", "Host": "web2"}), "unknown argument \"Host\" (ssh_exec takes: host, command, timeout_s, stdin)"),
            (json!({"host": "web1", "command": "x", "user": "root"}), "unknown argument \"user\""),
        ] {
            let shown = crate::sys::short(&v.to_string(), 80, crate::sys::Ellipsis::Marked);
            let got = p(v).map(drop).map_err(|e| e.0);
            assert!(got.as_ref().is_err_and(|m| m.contains(why)), "{shown}: want {why:?}, got {got:?}");
        }
    }
}
