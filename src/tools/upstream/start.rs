//! Starting an upstream: the process through the launcher (confined, `stdio.rs`) or
//! the URL checked (`http.rs`), its secrets read through the Vault, then the handshake.

use super::*;

/// Starts the process (or checks the URL) and runs the handshake.
pub(super) fn start(
    u: &Upstream,
    credentials: &BTreeMap<String, Credential>,
    roots: Option<&Vec<Vec<u8>>>,
    bearer: Option<std::sync::Arc<super::oauth::Bearer>>,
    vault: &mut Vault,
    cancel: &Cancel,
) -> Result<Client<Box<dyn Transport>>, UpstreamError> {
    let name = u.name.as_str();
    let max_line_bytes = usize::try_from(u.max_output_bytes).unwrap_or(usize::MAX);
    let credential_error = |why: String| UpstreamError::Credential { upstream: name.to_owned(), why };
    let mut read = |c: &str| -> Result<(crate::gate::vault::Secret, &Credential), UpstreamError> {
        let cred = credentials.get(c).ok_or_else(|| credential_error(format!("no credential {c:?}")))?;
        let secret = vault.read(c, &cred.source).map_err(|e| credential_error(e.to_string()))?;
        Ok((secret, cred))
    };
    let boxed: Box<dyn Transport> = match &u.transport {
        UpstreamTransport::Stdio { command, env, cwd, sandbox, user } => {
            let mut vars = Vec::new();
            for (k, v) in env {
                let value = match v {
                    EnvValue::Literal(s) => stdio::EnvText::Literal(s.clone()),
                    EnvValue::Credential(c) => stdio::EnvText::Secret(read(c)?.0),
                };
                vars.push((k.clone(), value));
            }
            let confine = sandbox.as_ref().map(|b| crate::sys::Confinement {
                read: b.read.clone(),
                write: b.write.clone(),
                network: b.network,
                memory_bytes: b.memory_mb.saturating_mul(1024 * 1024),
                processes: b.processes,
                files: b.files,
            });
            let launch = Launch { name, argv: command, env: vars, cwd: cwd.as_deref(), max_line_bytes, confine, user: user.as_deref() };
            let transport = StdioTransport::spawn(launch).map_err(|e| UpstreamError::Start { upstream: name.to_owned(), why: e.to_string() })?;
            log::info!("upstream {name}: started (process group {})", transport.process_group().unwrap_or(0));
            Box::new(transport)
        }
        UpstreamTransport::Http { url, credential, .. } => {
            let (mut header, mut query) = (None, None);
            if let Some(c) = credential {
                let (secret, cred) = read(c)?;
                match crate::cred::inject::place(&cred.inject, &secret) {
                    crate::cred::inject::Placement::Header { name, value } => header = Some((name, value)),
                    crate::cred::inject::Placement::Query { name, value } => query = Some((name, value)),
                    crate::cred::inject::Placement::Executor => {
                        return Err(UpstreamError::Unsupported { upstream: name.to_owned(), what: "oauth2 and aws_sigv4 credentials for upstreams are" });
                    }
                }
            }
            let reach = http::Reach { name: name.to_owned(), url: url.clone(), header, query, max_line_bytes, roots: roots.cloned(), bearer };
            let transport =
                http::HttpTransport::connect(reach, u.startup_timeout).map_err(|e| UpstreamError::Start { upstream: name.to_owned(), why: e.to_string() })?;
            Box::new(transport)
        }
    };
    Client::start(name, boxed, u.startup_timeout, cancel, capabilities(u), u.modern).map_err(|e| client_error(name, e, u.startup_timeout))
}

/// What sp declares to the upstream: the elicitation modes its policy relays (issue 33;
/// MCP 2025-11-25 capabilities), nothing else (no sampling, no roots).
pub(super) fn capabilities(u: &Upstream) -> serde_json::Value {
    let mut modes = serde_json::Map::new();
    if u.elicitation.form {
        modes.insert("form".into(), serde_json::json!({}));
    }
    if !u.elicitation.url_hosts.is_empty() {
        modes.insert("url".into(), serde_json::json!({}));
    }
    if modes.is_empty() {
        return serde_json::json!({});
    }
    serde_json::json!({"elicitation": modes})
}
