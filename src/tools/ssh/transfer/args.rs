//! `ssh_get` and `ssh_put` arguments, hand-checked, unknown names refused. The path is
//! checked for form here (absolute, canonical: `policy/ssh/files.rs`), so a `..` or a
//! `//` never reaches authorization; whether a rule allows it is authorization's call.

use base64::Engine as _;
use serde_json::{json, Map, Value};

use crate::mcp::jsonrpc::kind_of;
use crate::mcp::model::{bad, ArgError};
use crate::policy::ssh::files::{check_path, MAX_FILE_BYTES_CEILING, MAX_PATH_BYTES};

pub(crate) const SSH_GET: &str = "ssh_get";
pub(crate) const SSH_PUT: &str = "ssh_put";

/// `ssh_get {host, path}`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SshGet {
    pub host: String,
    pub path: String,
}

/// `ssh_put {host, path, content, encoding?, overwrite?}`, `content` decoded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SshPut {
    pub host: String,
    pub path: String,
    pub content: Vec<u8>,
    pub overwrite: bool,
}

fn string<'a>(args: &'a Map<String, Value>, key: &str) -> Result<Option<&'a str>, ArgError> {
    match args.get(key) {
        None => Ok(None),
        Some(Value::String(s)) => Ok(Some(s)),
        Some(other) => bad(format!("{key:?} must be a string, found {}", kind_of(other))),
    }
}

fn known(tool: &str, args: &Map<String, Value>, names: &[&str]) -> Result<(), ArgError> {
    match args.keys().find(|k| !names.contains(&k.as_str())) {
        Some(k) => {
            let shown = crate::sys::short(k, 64, crate::sys::Ellipsis::Silent);
            bad(format!("unknown argument {shown:?} ({tool} takes: {})", names.join(", ")))
        }
        None => Ok(()),
    }
}

fn host_and_path(args: &Map<String, Value>) -> Result<(String, String), ArgError> {
    let host = match string(args, "host")? {
        None => return bad("\"host\" is required"),
        Some(h) if crate::policy::ssh::is_host_name(h) => h.to_owned(),
        Some(_) => return bad("\"host\" must be a host name from sp_inventory"),
    };
    let path = match string(args, "path")? {
        None => return bad("\"path\" is required"),
        Some(p) => match check_path(p) {
            Ok(()) => p.to_owned(),
            Err(why) => return bad(format!("\"path\" {why}")),
        },
    };
    Ok((host, path))
}

pub(crate) fn parse_get(args: &Map<String, Value>) -> Result<SshGet, ArgError> {
    known(SSH_GET, args, &["host", "path"])?;
    let (host, path) = host_and_path(args)?;
    Ok(SshGet { host, path })
}

pub(crate) fn parse_put(args: &Map<String, Value>) -> Result<SshPut, ArgError> {
    known(SSH_PUT, args, &["host", "path", "content", "encoding", "overwrite"])?;
    let (host, path) = host_and_path(args)?;
    let Some(text) = string(args, "content")? else { return bad("\"content\" is required") };
    // The largest file any policy allows, base64-encoded: bounds the decoding below.
    if text.len() as u64 > MAX_FILE_BYTES_CEILING / 3 * 4 + 4 {
        return bad(format!("\"content\" is longer than any file sp writes ({MAX_FILE_BYTES_CEILING} bytes)"));
    }
    let content = match string(args, "encoding")? {
        None | Some("utf-8") => text.as_bytes().to_vec(),
        Some("base64") => match base64::engine::general_purpose::STANDARD.decode(text) {
            Ok(b) => b,
            Err(_) => return bad("\"content\" is not valid base64 (standard alphabet, padded)"),
        },
        Some(_) => return bad("\"encoding\" must be \"utf-8\" or \"base64\""),
    };
    let overwrite = match args.get("overwrite") {
        None => false,
        Some(Value::Bool(b)) => *b,
        Some(other) => return bad(format!("\"overwrite\" must be a boolean, found {}", kind_of(other))),
    };
    Ok(SshPut { host, path, content, overwrite })
}

fn host_path_schema() -> (Value, Value) {
    (
        json!({"type": "string", "description": "Host name from sp_inventory"}),
        json!({"type": "string", "description": format!("Absolute remote path (at most {MAX_PATH_BYTES} bytes, no . or .. components), matching one of the host's file patterns")}),
    )
}

pub(crate) fn get_definition() -> Value {
    let (host, path) = host_path_schema();
    json!({
        "name": SSH_GET,
        "title": "Read a file over SSH",
        "description": "Read one remote file over SFTP from an SSH host the operator allows, by inventory name \
            (see sp_inventory: a host's files.read patterns). The path must be absolute without . or .. \
            components; the server's resolved path (symlinks followed) must match a pattern too. UTF-8 text \
            comes back as `content` with encoding \"utf-8\", anything else base64-encoded; secrets the gateway \
            knows are redacted.",
        "inputSchema": {
            "type": "object",
            "properties": {"host": host, "path": path},
            "required": ["host", "path"],
            "additionalProperties": false
        },
        "outputSchema": super::result::get_schema(),
        "annotations": {"title": "Read a file over SSH", "readOnlyHint": true, "destructiveHint": false, "idempotentHint": true, "openWorldHint": true}
    })
}

pub(crate) fn put_definition() -> Value {
    let (host, path) = host_path_schema();
    json!({
        "name": SSH_PUT,
        "title": "Write a file over SSH",
        "description": "Write one remote file over SFTP on an SSH host the operator allows, by inventory name \
            (see sp_inventory: a host's files.write patterns). The file is written under a temporary name in \
            the same directory, then renamed into place, with the operator's mode bits; an existing file is \
            replaced only with overwrite: true.",
        "inputSchema": {
            "type": "object",
            "properties": {
                "host": host,
                "path": path,
                "content": {"type": "string", "description": "The file's content: text, or base64 with encoding \"base64\""},
                "encoding": {"type": "string", "enum": ["utf-8", "base64"], "default": "utf-8"},
                "overwrite": {"type": "boolean", "default": false, "description": "Replace an existing file"}
            },
            "required": ["host", "path", "content"],
            "additionalProperties": false
        },
        "outputSchema": super::result::put_schema(),
        "annotations": {"title": "Write a file over SSH", "readOnlyHint": false, "destructiveHint": true, "idempotentHint": true, "openWorldHint": true}
    })
}
