//! The HTTP executor: blocking ureq, every risky default set explicitly.
//!
//! - no proxy, ever, whatever `HTTP_PROXY`/`ALL_PROXY` say (a proxy hides the real
//!   destination from the policy);
//! - no redirects: a 3xx comes back as data (following them is issue #3's business);
//! - statuses are results (`http_status_as_error(false)`);
//! - `timeout_s` from the policy bounds the whole exchange, body included;
//! - the body is read up to `max_response_bytes` and then the connection is dropped: a
//!   huge response is truncated while streaming, never buffered whole;
//! - no compression is requested (ureq is built without gzip), so what is scrubbed is
//!   what the server sent.
//!
//! The credential is read here, at the moment of use, and injected as the policy says.

use std::io::Read;

use ureq::http::Request;

use super::{ExecError, Executor, HttpOutcome};
use crate::authorize::{Authorized, HttpAction};
use crate::secret::{Placement, Vault};

pub const USER_AGENT: &str = concat!("sallyport/", env!("CARGO_PKG_VERSION"));

#[derive(Default)]
pub struct HttpExecutor {
    /// Built on first use, then reused (connection pool); keyed by timeout.
    agent: Option<(std::time::Duration, ureq::Agent)>,
}

impl HttpExecutor {
    pub fn new() -> HttpExecutor {
        HttpExecutor::default()
    }

    fn agent(&mut self, timeout: std::time::Duration) -> &ureq::Agent {
        if self.agent.as_ref().is_none_or(|(t, _)| *t != timeout) {
            let config = ureq::Agent::config_builder()
                .proxy(None)
                .max_redirects(0)
                .http_status_as_error(false)
                .https_only(false)
                .user_agent(USER_AGENT)
                .timeout_global(Some(timeout))
                .timeout_connect(Some(timeout))
                .build();
            self.agent = Some((timeout, ureq::Agent::new_with_config(config)));
        }
        &self.agent.as_ref().expect("set above").1
    }
}

impl Executor for HttpExecutor {
    fn http(&mut self, authorized: &Authorized<HttpAction>, vault: &mut Vault) -> Result<HttpOutcome, ExecError> {
        let action = authorized.action();
        let target = format!(
            "{}:{}",
            action.url.host_str().unwrap_or_default(),
            action.url.port_or_known_default().unwrap_or_default()
        );
        let mut builder = Request::builder().method(action.method.as_str()).uri(action.url.as_str());
        for (name, value) in &action.headers {
            builder = builder.header(name.as_str(), value.as_str());
        }
        if let Some(cred) = &action.credential {
            let secret = vault.read(&cred.name, &cred.source).map_err(ExecError::Secret)?;
            match crate::secret::place(&cred.inject, &secret) {
                Placement::Header { name, value } => builder = builder.header(name, value.as_str()),
                Placement::Query { name, value } => {
                    let mut with_secret = action.url.clone();
                    with_secret.query_pairs_mut().append_pair(&name, &value);
                    builder = builder.uri(with_secret.as_str());
                }
            }
        }
        let agent = self.agent(action.timeout);
        let sent = match &action.body {
            Some(body) => builder.body(body.clone()).map(|r| agent.run(r)),
            None => builder.body(()).map(|r| agent.run(r)),
        };
        let response = sent
            .map_err(|_| ExecError::Upstream("the request could not be built".into()))?
            .map_err(|e| classify(e, &target))?;

        let status = response.status().as_u16();
        let headers = response
            .headers()
            .iter()
            .filter(|(n, _)| n.as_str() != "set-cookie")
            .map(|(n, v)| (n.as_str().to_owned(), String::from_utf8_lossy(v.as_bytes()).into_owned()))
            .collect();
        let cap = action.max_response_bytes;
        let mut body = Vec::new();
        response
            .into_body()
            .into_reader()
            .take(cap + 1)
            .read_to_end(&mut body)
            .map_err(|e| classify_io(&e, &target))?;
        let truncated = body.len() as u64 > cap;
        body.truncate(cap as usize);
        Ok(HttpOutcome { status, headers, body, truncated })
    }
}

fn classify(e: ureq::Error, target: &str) -> ExecError {
    match e {
        ureq::Error::Timeout(_) => ExecError::Timeout(format!("{target}: timed out")),
        ureq::Error::HostNotFound => ExecError::Unavailable(format!("{target}: host not found")),
        ureq::Error::ConnectionFailed => ExecError::Unavailable(format!("{target}: connection failed")),
        ureq::Error::Io(io) => classify_io(&io, target),
        ureq::Error::Tls(_) => ExecError::Unavailable(format!("{target}: TLS failed")),
        ureq::Error::Rustls(_) => ExecError::Unavailable(format!("{target}: TLS failed")),
        _ => ExecError::Upstream(format!("{target}: the server's response could not be read as HTTP")),
    }
}

fn classify_io(e: &std::io::Error, target: &str) -> ExecError {
    use std::io::ErrorKind::*;
    // ureq wraps its own errors (a timeout while reading the body) in io::Error.
    if let Some(inner) = e.get_ref().and_then(|i| i.downcast_ref::<ureq::Error>()) {
        if matches!(inner, ureq::Error::Timeout(_)) {
            return ExecError::Timeout(format!("{target}: timed out"));
        }
    }
    match e.kind() {
        TimedOut | WouldBlock => ExecError::Timeout(format!("{target}: timed out")),
        ConnectionRefused => ExecError::Unavailable(format!("{target}: connection refused")),
        ConnectionReset | ConnectionAborted | BrokenPipe | UnexpectedEof => {
            ExecError::Upstream(format!("{target}: connection closed by the server"))
        }
        k => ExecError::Unavailable(format!("{target}: {k}")),
    }
}
