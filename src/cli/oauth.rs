//! `sp oauth login NAME` (sp(1), OAUTH; issue 33 §2): signs `sp` in to a url upstream
//! whose policy has `auth.oauth`, once, on a host with no browser: the address to open
//! goes to stderr, the code comes back on stdin (or to a listener on 127.0.0.1), the
//! tokens go to the token store beside the policy (`tools/upstream/oauth/`). Stdout gets
//! one summary line, never a token.

use std::io::Write;

use super::args::{OAuthArgs, OAuthSub, OAUTH_USAGE};
use super::audit::Failed;
use super::Env;
use crate::mcp::out::StdoutHandle;
use crate::policy::upstreams::UpstreamTransport;
use crate::policy::{lookup, Lookup, Policy};
use crate::tools::upstream::oauth::{login, store, Settings};

/// `sp oauth ...` with the policy named by `-c` (before or after `oauth`), if any.
pub(crate) fn run(stdout: StdoutHandle, args: &OAuthArgs, config: Option<std::path::PathBuf>, env: &Env) -> Result<(), Failed> {
    let mut out = stdout.into_text();
    let fail = |message: String| {
        eprintln!("sp: {message}");
        Failed
    };
    let upstream = match &args.sub {
        OAuthSub::Help => return out.write_all(OAUTH_USAGE.as_bytes()).map_err(|_| Failed),
        OAuthSub::Login { upstream } => upstream.as_str(),
    };
    let policy = match lookup(config, |k| env.get(k), |p| p.exists()) {
        Lookup::Explicit(p) | Lookup::Found(p) => Policy::load(&p).map_err(|e| fail(e.to_string()))?,
        Lookup::None(searched) => {
            let places: Vec<String> = searched.iter().map(|p| p.display().to_string()).collect();
            return Err(fail(format!("no policy found (looked in {}): it names the upstreams", places.join(", "))));
        }
    };
    let origin = policy.origin.clone().ok_or_else(|| fail("the policy has no file".into()))?;
    let Some(u) = policy.upstreams.get(upstream) else {
        return Err(fail(format!("no upstream {upstream:?} in {}", origin.display())));
    };
    let UpstreamTransport::Http { url, oauth: Some(o), .. } = &u.transport else {
        return Err(fail(format!("upstreams.{upstream} has no auth.oauth: nothing to sign in to")));
    };
    let settings = Settings {
        upstream: upstream.to_owned(),
        url: url.clone(),
        client_id: o.client_id.clone(),
        named: crate::tools::upstream::oauth::named_hosts(url, o),
        roots: policy.http.ca_certs.as_ref().map(|b| b.der.clone()),
        store: store::Store::new(store::beside(&origin), o.store),
    };
    let done = login::login(&settings, o, &mut std::io::stderr(), &mut std::io::stdin().lock()).map_err(|e| fail(format!("oauth login {upstream}: {e}")))?;
    let lifetime = done.expires_in.map_or("no expires_in (300 s assumed)".to_owned(), |s| format!("expires in {s} s"));
    let refresh = if done.refresh_token { "refresh token kept" } else { "no refresh token: sign in again when it expires" };
    let kept = if settings.store.is_encrypted() { "encrypted with systemd-creds" } else { "plain, mode 0600" };
    let line = format!(
        "upstream {upstream}: signed in at {}; access token {lifetime}, {refresh}; tokens in {} ({kept})\n",
        done.issuer,
        settings.store.path().display()
    );
    out.write_all(line.as_bytes()).map_err(|_| Failed)
}
