//! What a rate limit rule is matched against (`policy/limits.rs`, issue 35): the facts of
//! an authorized action, named the way `limits` selectors name them. Nothing secret: the
//! credential's name, never its value.

use crate::policy::limits::Subject;

use super::Action;

/// The limit [`Subject`] of `action`: the tool name the agent called; an HTTP request's
/// host (`host:port` when its URL names a port) and credential; an `ssh_exec` host's
/// inventory name (`ssh_get`'s and `ssh_put`'s too); an upstream's name, its own name of the tool, and its credentials.
pub(crate) fn subject(action: &Action) -> Subject {
    let credentials = action.audit().credential.map(|c| c.split(',').map(str::to_owned).collect()).unwrap_or_default();
    let mut s = Subject { tool: action.name().to_owned(), credentials, ..Subject::default() };
    match action {
        Action::Http(a) | Action::HttpGet(a) => s.target = Some(http_target(&a.action().url)),
        Action::Ssh(a) => s.target = Some(a.action().host.clone()),
        Action::SshGet(a) | Action::SshPut(a) => s.target = Some(a.action().conn.host.clone()),
        Action::Upstream(a) => {
            let route = a.action().route();
            s.upstream = Some((route.upstream().to_owned(), route.tool().to_owned()));
        }
        Action::Inventory(_) => {}
    }
    s
}

/// An HTTP request's limit target: its host, with `:port` when the URL names one.
pub(crate) fn http_target(url: &url::Url) -> String {
    let host = url.host_str().unwrap_or_default();
    match url.port() {
        Some(p) => format!("{host}:{p}"),
        None => host.to_owned(),
    }
}
