//! The `credentials` section (`sp-policy(5)`): where each secret lives, how it is
//! injected, which hosts, paths and methods it is bound to, and whether each use waits
//! for the operator's approver (`approve`).
//!
//! Nothing here reads a secret: a credential's `source` is only a description of where
//! the secret lives, read at the moment an authorized call needs it (`cred::source`, called by the Vault).

use std::path::PathBuf;
use std::time::Duration;

use serde_json::Value;

use super::fields::{err, int, list, object, string, Check};
use super::http::{hosts, is_hop_header, is_routing_header, is_token, methods, paths, HostPattern, Method, PathPattern};

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SecretSource {
    /// An owner-only file.
    File(PathBuf),
    /// An environment variable of the `sp` process.
    Env(String),
    /// A systemd credential: `$CREDENTIALS_DIRECTORY/<name>` (`LoadCredential=`,
    /// `LoadCredentialEncrypted=`, `SetCredential=`), read like a file.
    Systemd(String),
    /// A command's stdout (argv, no shell), e.g. `pass show x`, `op read ...`,
    /// `vault kv get -field=token ...`.
    Command { argv: Vec<String>, timeout: Duration },
}

impl SecretSource {
    /// For `sp check` and logs: where, never what.
    pub fn describe(&self) -> String {
        match self {
            SecretSource::File(p) => format!("file {}", p.display()),
            SecretSource::Env(v) => format!("env {v}"),
            SecretSource::Systemd(n) => format!("systemd credential {n}"),
            SecretSource::Command { argv, .. } => format!("command {}", argv[0]),
        }
    }
}

pub(crate) const DEFAULT_COMMAND_TIMEOUT_S: u64 = 10;
pub(crate) const MAX_COMMAND_TIMEOUT_S: u64 = 300;

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Injection {
    /// `Authorization: Bearer <secret>`
    Bearer,
    /// `Authorization: Basic base64(<secret>)`, the secret being `user:password`.
    Basic,
    /// `<name>: <format with {secret} replaced>`
    Header { name: String, format: String },
    /// `?<name>=<secret>` appended to the query (percent-encoded).
    Query { name: String },
    /// AWS Signature Version 4 (`cred::sigv4` signs).
    AwsSigV4(super::schemes::SigV4Config),
    /// OAuth2 client credentials, sent as `Authorization: Bearer` (`cred::oauth2` fetches).
    OAuth2(super::schemes::TokenRequest),
}

impl Injection {
    /// The header this injection sets, lowercase; `None` for query injection.
    pub(crate) fn header_name(&self) -> Option<String> {
        match self {
            Injection::Bearer | Injection::Basic | Injection::OAuth2(_) => Some("authorization".into()),
            Injection::Header { name, .. } => Some(name.to_ascii_lowercase()),
            Injection::Query { .. } | Injection::AwsSigV4(_) => None,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Credential {
    pub name: String,
    pub source: SecretSource,
    pub inject: Injection,
    pub hosts: Vec<HostPattern>,
    pub paths: Vec<PathPattern>,
    /// Methods the credential may be used with; `None`: any the allow rules permit.
    pub methods: Option<Vec<Method>>,
    /// What to do when a response echoes this credential's secret in any spelling.
    pub on_echo: OnEcho,
    /// `"approve": true`: every call using it waits for approval (`approval.via`);
    /// `"command"`: for the operator's approver command only.
    pub approve: super::approval::Approve,
    /// Routing headers (`ROUTING_HEADERS`) the agent may send with it, lowercase.
    pub allow_routing_headers: Vec<String>,
    /// The shortest secret accepted from the source (and, for `oauth2`, from the token
    /// endpoint): [`MIN_SECRET_BYTES`] unless the operator lowers it with
    /// `"min_secret_bytes"` (sp-policy(5), CREDENTIALS; warned about at startup and by
    /// `sp check`).
    pub min_secret_bytes: usize,
}

/// The shortest secret accepted by default (bytes). Real credentials are far longer:
/// API keys and bearer tokens 20 to 64 characters and more (GitHub 40, Stripe 32+, AWS
/// secret keys 40, OAuth2 access tokens 20+, JWTs hundreds), generated passwords 12+.
/// Eight bytes is below all of them and above the words and numbers ordinary text is
/// made of (sp-policy(5), CREDENTIALS). The Vault holds every secret to its
/// credential's minimum (`gate::vault`).
pub(crate) const MIN_SECRET_BYTES: usize = 8;

/// The largest `min_secret_bytes` accepted (a secret source holds at most 64 KiB).
pub(crate) const MAX_MIN_SECRET_BYTES: u64 = 4096;

/// `on_echo` of a credential: replace the echo, or withhold what carried it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum OnEcho {
    /// Every spelling found is replaced by `[REDACTED:<name>]` (the default).
    #[default]
    Redact,
    /// A response body (or the headers) carrying any spelling is withheld whole.
    Withhold,
}

pub(super) fn credential(name: &str, def: &Value, field: &str) -> Check<Credential> {
    let map = object(def, field, &["source", "inject", "hosts", "paths", "methods", "on_echo", "approve", "allow_routing_headers", "min_secret_bytes"])?;
    let approve = super::approval::approve_flag(map, field)?;
    let min_secret_bytes = match map.get("min_secret_bytes") {
        None => MIN_SECRET_BYTES,
        Some(n) => int(n, &format!("{field}.min_secret_bytes"), 1, MAX_MIN_SECRET_BYTES)? as usize,
    };
    let source_field = format!("{field}.source");
    let source = source(map.get("source").ok_or_else(|| (source_field.clone(), "is required".to_owned()))?, &source_field)?;
    let inject_field = format!("{field}.inject");
    let inject = injection(map.get("inject").ok_or_else(|| (inject_field.clone(), "is required".to_owned()))?, &inject_field)?;
    let hosts_field = format!("{field}.hosts");
    let hosts = hosts(map.get("hosts").ok_or_else(|| (hosts_field.clone(), "is required: a credential is bound to hosts".to_owned()))?, &hosts_field)?;
    let paths = paths(map.get("paths"), &format!("{field}.paths"))?;
    let methods = map.get("methods").map(|m| methods(m, &format!("{field}.methods"))).transpose()?;
    let on_echo = match map.get("on_echo") {
        None => OnEcho::Redact,
        Some(v) => match v.as_str() {
            Some("redact") => OnEcho::Redact,
            Some("withhold") => OnEcho::Withhold,
            _ => return err(&format!("{field}.on_echo"), "must be \"redact\" or \"withhold\""),
        },
    };
    let allow_routing_headers = match map.get("allow_routing_headers") {
        None => Vec::new(),
        Some(v) => routing_headers(v, &format!("{field}.allow_routing_headers"))?,
    };
    Ok(Credential { name: name.to_owned(), source, inject, hosts, paths, methods, on_echo, approve, allow_routing_headers, min_secret_bytes })
}

/// `allow_routing_headers`: names of routing headers (sp-policy(5), REQUEST OVERRIDES),
/// any case, `_` read as `-`; anything else is an error, so a typo cannot pass for
/// permission.
fn routing_headers(v: &Value, field: &str) -> Check<Vec<String>> {
    let mut out = Vec::new();
    for (i, h) in list(v, field)?.iter().enumerate() {
        let f = format!("{field}[{i}]");
        let name = string(h, &f)?.to_ascii_lowercase().replace('_', "-");
        if !is_token(&name) || !is_routing_header(&name) {
            return err(&f, "must name a routing header (Forwarded, X-Forwarded-Host, X-Original-Host, ...: sp-policy(5), REQUEST OVERRIDES)");
        }
        out.push(name);
    }
    Ok(out)
}

const SOURCES: &str = "exactly one of {\"file\": PATH}, {\"env\": VAR}, {\"systemd\": NAME} or {\"command\": [ARGV...]}";

fn source(v: &Value, field: &str) -> Check<SecretSource> {
    let map = object(v, field, &["file", "env", "systemd", "command", "timeout_s"])?;
    let kinds: Vec<&str> = ["file", "env", "systemd", "command"].into_iter().filter(|k| map.contains_key(*k)).collect();
    let [kind] = kinds[..] else {
        return err(field, format!("must be {SOURCES}"));
    };
    if kind != "command" && map.contains_key("timeout_s") {
        return err(&format!("{field}.timeout_s"), "only applies to a command source");
    }
    let sub = format!("{field}.{kind}");
    let value = &map[kind];
    Ok(match kind {
        "file" => {
            let p = string(value, &sub)?;
            if !p.starts_with('/') {
                return err(&sub, "must be an absolute path");
            }
            SecretSource::File(PathBuf::from(p))
        }
        "env" => {
            let var = string(value, &sub)?;
            if var.contains('=') || var.contains('\0') {
                return err(&sub, "is not a valid variable name");
            }
            SecretSource::Env(var.to_owned())
        }
        "systemd" => {
            let n = string(value, &sub)?;
            if n.contains('/') || n == "." || n == ".." || n.contains('\0') {
                return err(&sub, "must be a credential name (a file name under $CREDENTIALS_DIRECTORY)");
            }
            SecretSource::Systemd(n.to_owned())
        }
        _ => {
            let argv: Vec<String> = list(value, &sub)?
                .iter()
                .enumerate()
                .map(|(i, a)| match a {
                    Value::String(s) if !s.contains('\0') => Ok(s.clone()),
                    _ => err(&format!("{sub}[{i}]"), "must be a string"),
                })
                .collect::<Check<_>>()?;
            if argv[0].is_empty() {
                return err(&format!("{sub}[0]"), "must name a program");
            }
            let timeout_s = match map.get("timeout_s") {
                None => DEFAULT_COMMAND_TIMEOUT_S,
                Some(t) => int(t, &format!("{field}.timeout_s"), 1, MAX_COMMAND_TIMEOUT_S)?,
            };
            SecretSource::Command { argv, timeout: Duration::from_secs(timeout_s) }
        }
    })
}

fn injection(v: &Value, field: &str) -> Check<Injection> {
    let map = object(v, field, &["bearer", "basic", "header", "query", "aws_sigv4", "oauth2"])?;
    let (kind, value) = match map.iter().next() {
        Some((k, v)) if map.len() == 1 => (k.as_str(), v),
        _ => {
            return err(
                field,
                "must be exactly one of {\"bearer\": {}}, {\"basic\": {}}, {\"header\": {...}}, {\"query\": {...}}, {\"aws_sigv4\": {...}} or {\"oauth2\": {...}}",
            );
        }
    };
    let sub = format!("{field}.{kind}");
    Ok(match kind {
        "bearer" => {
            object(value, &sub, &[])?;
            Injection::Bearer
        }
        "aws_sigv4" => Injection::AwsSigV4(super::schemes::SigV4Config::from_policy(value).map_err(|e| e.at(&sub))?),
        "oauth2" => Injection::OAuth2(super::schemes::TokenRequest::from_policy(value).map_err(|e| e.at(&sub))?),
        "basic" => {
            object(value, &sub, &[])?;
            Injection::Basic
        }
        "header" => {
            let hm = object(value, &sub, &["name", "format"])?;
            let hname = string(hm.get("name").unwrap_or(&Value::Null), &format!("{sub}.name"))?;
            if !is_token(hname) || hname.len() > 128 {
                return err(&format!("{sub}.name"), "must be a valid header name");
            }
            if is_hop_header(&hname.to_ascii_lowercase()) {
                return err(&format!("{sub}.name"), format!("{hname:?} cannot carry a credential"));
            }
            let format = match hm.get("format") {
                None => "{secret}".to_owned(),
                Some(f) => string(f, &format!("{sub}.format"))?.to_owned(),
            };
            if format.matches("{secret}").count() != 1 || format.chars().any(|c| c.is_control()) {
                return err(&format!("{sub}.format"), "must contain \"{secret}\" exactly once and no control characters");
            }
            Injection::Header { name: hname.to_owned(), format }
        }
        _ => {
            let qm = object(value, &sub, &["name"])?;
            let qname = string(qm.get("name").unwrap_or(&Value::Null), &format!("{sub}.name"))?;
            if qname.len() > 128 || !qname.bytes().all(|b| b.is_ascii_alphanumeric() || b"-._~".contains(&b)) {
                return err(&format!("{sub}.name"), "must be a plain parameter name (letters, digits, '-', '.', '_', '~')");
            }
            Injection::Query { name: qname.to_owned() }
        }
    })
}
