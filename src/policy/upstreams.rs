//! The `upstreams` section (`sp-policy(5)`, "UPSTREAMS"): other MCP servers `sp` starts
//! (stdio, `command`) or reaches (Streamable HTTP, `url`) and whose tools it exposes,
//! filtered, behind the same gate as `http_request` and `ssh_exec`.
//!
//! ```json
//! "upstreams": {
//!   "github": {
//!     "command": ["/usr/local/bin/github-mcp-server", "stdio"],
//!     "env": {"GITHUB_PERSONAL_ACCESS_TOKEN": {"credential": "github"}, "GITHUB_TOOLSETS": "repos,issues"},
//!     "cwd": "/var/lib/sallyport/github",
//!     "tools": {"allow": ["get_*", "list_*", "create_issue"], "deny": ["delete_*"], "approve": ["create_issue"]},
//!     "arguments": {"create_issue": {"owner": ["acme"], "repo": ["api", "web"]}},
//!     "timeout_s": 60, "startup_timeout_s": 30, "max_output_bytes": 1048576
//!   },
//!   "tickets": {"url": "https://mcp.tickets.example/mcp", "credential": "tickets", "tools": {"allow": ["*"]}}
//! }
//! ```
//!
//! Decisions (each documented in `sp-policy(5)`):
//! - An upstream name is 1 to [`MAX_NAME_LEN`] characters of `[a-z0-9-]`: it never holds
//!   `_`, so the first `_` of an exposed name `<upstream>_<tool>` ends the upstream's name.
//! - `command[0]` is an absolute path or a bare program name looked up in the child's
//!   `PATH` (the one `sp` passes on); a relative path (`./x`, `bin/x`) is refused, since
//!   it would depend on the working directory.
//! - `env` names are shell-portable variable names (`[A-Za-z_][A-Za-z0-9_]*`); a value is
//!   a string or `{"credential": NAME}` naming a credential of the `credentials` section.
//! - `tools.allow` is required (no `allow` would expose nothing: a typo must not look
//!   like a working upstream); globs use `*` (any run of characters) and `?` (one).
//! - `arguments` keys are exact tool names that `tools.allow` exposes; each pins
//!   top-level string arguments to globs. A glob's `*`/`?` never match a control
//!   character, and a value with a `..` path segment matches only a glob without
//!   wildcards (`/srv/data/*` must not admit `/srv/data/../../etc/passwd`).
//! - A `url` upstream's `credential` must be bound to the URL (its `hosts`, `paths` and
//!   `methods`, with POST): a credential goes nowhere else, upstream or not.
//! - `max_output_bytes` caps each line the upstream writes (an answer is one line): a
//!   longer line ends the upstream (its pending call fails), it is never read whole.
//! - `sandbox` (issue 31): a command upstream is confined unless the policy says
//!   `"sandbox": "none"`: `{"read": [paths], "write": [paths], "network": bool,
//!   "memory_mb": n, "processes": n, "files": n}`, each optional ([`Sandbox::default`]);
//!   paths are absolute. `user` (a name of `/etc/passwd`, never root) runs it as that
//!   user, which needs `sp` to run as root.
//! - `pin` says how the exposed tools' definitions are pinned (issue 31, "rug pull";
//!   `tools/upstream/pins.rs`): `"first-use"` (the default: the first listing pins them),
//!   `"strict"` (only `sp upstream pin`/`approve` pin them) or `"off"`.
//! - `auth.oauth` (issue 33 §2, `upstreams/oauth.rs`): a url upstream reached with an
//!   OAuth access token that `sp oauth login NAME` obtained; not with `credential`.
//! - `elicitation` (issue 33): `{"form": bool, "url_hosts": [host[:port]]}`, what of
//!   the upstream's `elicitation/create` is relayed (`upstreams/elicitation.rs`).

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

use serde_json::Value;

use super::fields::{abs_path, err, int, list, object, string, Check};
use super::Credential;
pub(crate) use super::sandbox::Sandbox;
pub(crate) use oauth::{is_client_id, OAuth, Redirect, StoreKind};
use super::sandbox::{sandbox, user_name};

pub(crate) mod elicitation;
pub(crate) use elicitation::ElicitRules;

pub(crate) const MAX_NAME_LEN: usize = 24;
pub(crate) const DEFAULT_TIMEOUT_S: u64 = 60;
pub(crate) const MAX_TIMEOUT_S: u64 = 3600;
pub(crate) const DEFAULT_STARTUP_TIMEOUT_S: u64 = 30;
pub(crate) const MAX_STARTUP_TIMEOUT_S: u64 = 300;
pub(crate) const DEFAULT_MAX_OUTPUT_BYTES: u64 = 8 * 1024 * 1024;
pub(crate) const MAX_OUTPUT_BYTES_CEILING: u64 = 64 * 1024 * 1024;
/// The smallest line cap: an `initialize` answer and an error must always fit.
pub(crate) const MIN_OUTPUT_BYTES: u64 = 4096;
/// Globs per list and pinned arguments per tool: a policy, not a data file.
const MAX_GLOBS: usize = 256;

/// A `*`/`?` glob over a tool name or an argument value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Glob {
    text: String,
}

/// Why a glob's text is refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum GlobError {
    Empty,
    Control,
}

impl std::fmt::Display for GlobError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            GlobError::Empty => "must not be empty",
            GlobError::Control => "contains a control character",
        })
    }
}

impl std::error::Error for GlobError {}

impl Glob {
    pub(crate) fn new(text: &str) -> Result<Glob, GlobError> {
        if text.is_empty() {
            return Err(GlobError::Empty);
        }
        if text.chars().any(char::is_control) {
            return Err(GlobError::Control);
        }
        Ok(Glob { text: text.to_owned() })
    }

    pub fn as_str(&self) -> &str {
        &self.text
    }

    fn has_wildcard(&self) -> bool {
        self.text.contains(['*', '?'])
    }

    /// Whether `s` matches: `*` is any run of characters (none included), `?` exactly
    /// one; neither matches a control character; a value with a `..` path segment matches
    /// only a glob without wildcards. Linear in practice: the classic matcher that
    /// backtracks only to the last `*` (O(len(s) x len(glob)) at worst).
    pub fn matches(&self, s: &str) -> bool {
        if !self.has_wildcard() {
            return self.text == s;
        }
        if s.split(['/', '\\']).any(|seg| seg == "..") {
            return false;
        }
        let p: Vec<char> = self.text.chars().collect();
        let t: Vec<char> = s.chars().collect();
        let (mut pi, mut ti) = (0, 0);
        let mut star: Option<(usize, usize)> = None;
        while ti < t.len() {
            match p.get(pi) {
                Some('?') if !t[ti].is_control() => {
                    pi += 1;
                    ti += 1;
                }
                Some('*') => {
                    star = Some((pi, ti));
                    pi += 1;
                }
                Some(c) if *c == t[ti] => {
                    pi += 1;
                    ti += 1;
                }
                _ => match star {
                    // The last `*` takes one more character, unless it is a control one.
                    Some((sp, st)) if !t[st].is_control() => {
                        star = Some((sp, st + 1));
                        pi = sp + 1;
                        ti = st + 1;
                    }
                    _ => return false,
                },
            }
        }
        p[pi..].iter().all(|c| *c == '*')
    }
}

/// Whether any glob of `globs` matches `s`.
pub(crate) fn any_match(globs: &[Glob], s: &str) -> bool {
    globs.iter().any(|g| g.matches(s))
}

/// A value of `env`: what the child's variable is set to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum EnvValue {
    Literal(String),
    /// The secret of this credential, read (and remembered for redaction) at start.
    Credential(String),
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum UpstreamTransport {
    /// Started by `sp`: argv (no shell), its environment and working directory, its
    /// confinement (`None`: `"sandbox": "none"`) and the user it runs as.
    Stdio { command: Vec<String>, env: BTreeMap<String, EnvValue>, cwd: Option<PathBuf>, sandbox: Option<Sandbox>, user: Option<String> },
    /// Streamable HTTP; `credential` is injected into each request, or `oauth`'s token
    /// (`auth.oauth`, issue 33 §2), never both.
    Http { url: url::Url, credential: Option<String>, oauth: Option<OAuth> },
}

/// `resources` and `prompts` (issue 33): which of the upstream's resources (matched on
/// its own URI, or a template's `uriTemplate`) and prompts (its own name) are relayed.
/// Absent: none. `deny` wins over `allow`, as for tools.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ItemRules {
    pub allow: Vec<Glob>,
    pub deny: Vec<Glob>,
}

impl ItemRules {
    /// Relayed: some `allow` glob matches and no `deny` glob does.
    pub fn exposes(&self, item: &str) -> bool {
        any_match(&self.allow, item) && !any_match(&self.deny, item)
    }

    /// Whether anything at all may be relayed (an empty `allow` relays nothing).
    pub fn any(&self) -> bool {
        !self.allow.is_empty()
    }
}

/// `tools`: which of the upstream's tools are exposed, and which wait for the approver.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ToolRules {
    pub allow: Vec<Glob>,
    pub deny: Vec<Glob>,
    pub approve: Vec<Glob>,
}

impl ToolRules {
    /// Exposed: some `allow` glob matches and no `deny` glob does (deny wins).
    pub fn exposes(&self, tool: &str) -> bool {
        any_match(&self.allow, tool) && !any_match(&self.deny, tool)
    }

    pub fn needs_approval(&self, tool: &str) -> bool {
        any_match(&self.approve, tool)
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Upstream {
    pub name: String,
    pub transport: UpstreamTransport,
    pub tools: ToolRules,
    /// `resources`: relayed resources and templates (none when absent).
    pub resources: ItemRules,
    /// `prompts`: relayed prompts (none when absent).
    pub prompts: ItemRules,
    /// `elicitation`: its `elicitation/create` relayed during its calls (none when absent).
    pub elicitation: ElicitRules,
    /// Tool name -> argument name -> the globs its value must match.
    pub arguments: BTreeMap<String, BTreeMap<String, Vec<Glob>>>,
    /// Per `tools/call`.
    pub timeout: Duration,
    /// Start-up: `initialize`, and each page of `tools/list`.
    pub startup_timeout: Duration,
    /// The longest line the upstream may write (an answer is one line).
    pub max_output_bytes: u64,
    /// `"approve": "command"`: the calls `tools.approve` flags are asked through the
    /// approver command only, never MCP elicitation (sp-policy(5), APPROVAL).
    pub approve_command_only: bool,
    /// `pin`: how its tool definitions are pinned.
    pub pin: PinMode,
    /// `tasks`: a `tools/call` the client augments with a task is sent to it as a task
    /// when it declares task support (issue 33, section 4; off when absent).
    pub tasks: bool,
    /// `"protocol": "2026-07-28"`: `server/discover` first, and that revision when the
    /// upstream offers it (else the handshake). Command upstreams only.
    pub modern: bool,
}

/// `pin`: how an upstream's tool definitions are pinned (`tools/upstream/pins.rs`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum PinMode {
    /// Trust on first use: an upstream with no pins yet gets its listed tools pinned;
    /// from then on a changed or new tool is withheld until `sp upstream approve`.
    #[default]
    FirstUse,
    /// Only the operator pins (`sp upstream pin`): a tool without a pin is withheld.
    Strict,
    /// No pins: every listed tool the filter exposes is exposed, changed or not.
    Off,
}

impl PinMode {
    pub fn as_str(self) -> &'static str {
        match self {
            PinMode::FirstUse => "first-use",
            PinMode::Strict => "strict",
            PinMode::Off => "off",
        }
    }
}

/// An upstream name: `[a-z0-9-]`, 1 to [`MAX_NAME_LEN`] characters, no `_`.
pub(crate) fn is_upstream_name(s: &str) -> bool {
    (1..=MAX_NAME_LEN).contains(&s.len()) && s.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
}

fn is_env_name(s: &str) -> bool {
    let mut b = s.bytes();
    matches!(b.next(), Some(c) if c.is_ascii_alphabetic() || c == b'_') && b.all(|c| c.is_ascii_alphanumeric() || c == b'_') && s.len() <= 128
}

const KEYS: &[&str] = &[
    "command",
    "env",
    "cwd",
    "url",
    "credential",
    "tools",
    "arguments",
    "timeout_s",
    "startup_timeout_s",
    "max_output_bytes",
    "approve",
    "sandbox",
    "user",
    "pin",
    "resources",
    "prompts",
    "auth",
    "elicitation",
    "tasks",
    "protocol",
];

/// Parses the section; credentials it names must be in `credentials`.
pub(crate) fn parse(v: &Value, credentials: &BTreeMap<String, Credential>) -> Check<BTreeMap<String, Upstream>> {
    let Value::Object(defs) = v else {
        return err("upstreams", "must be an object mapping names to upstreams");
    };
    let mut out = BTreeMap::new();
    for (name, def) in defs {
        let field = format!("upstreams.{name}");
        if !is_upstream_name(name) {
            let shown = if name.chars().any(char::is_control) { format!("upstreams.{name:?}") } else { field };
            return err(
                &shown,
                format!(
                    "an upstream name is 1-{MAX_NAME_LEN} lowercase letters, digits or '-' (no '_': it joins the upstream and the tool in exposed names)"
                ),
            );
        }
        out.insert(name.clone(), upstream(name, def, &field, credentials)?);
    }
    one_token_store(&out)?;
    Ok(out)
}

/// The token store is one file for the policy: every `auth.oauth` says the same `store`.
fn one_token_store(upstreams: &BTreeMap<String, Upstream>) -> Check<()> {
    let mut first: Option<(&str, StoreKind)> = None;
    for (name, u) in upstreams {
        let UpstreamTransport::Http { oauth: Some(o), .. } = &u.transport else { continue };
        match first {
            None => first = Some((name, o.store)),
            Some((other, kind)) if kind != o.store => {
                return err(
                    &format!("upstreams.{name}.auth.oauth.store"),
                    format!(
                        "is {:?} but upstreams.{other}'s is {:?}: the token store is one file for the policy, give every upstream the same",
                        o.store.as_str(),
                        kind.as_str()
                    ),
                );
            }
            Some(_) => {}
        }
    }
    Ok(())
}

fn upstream(name: &str, def: &Value, field: &str, credentials: &BTreeMap<String, Credential>) -> Check<Upstream> {
    let map = object(def, field, KEYS)?;
    // Which tools wait is `tools.approve`; this says only through which channel.
    let approve_command_only = match map.get("approve") {
        None => false,
        Some(Value::String(s)) if s == "command" => true,
        Some(_) => return err(&format!("{field}.approve"), "must be \"command\" (tools.approve chooses the tools)"),
    };
    let pin = match map.get("pin") {
        None => PinMode::default(),
        Some(Value::String(s)) if s == "first-use" => PinMode::FirstUse,
        Some(Value::String(s)) if s == "strict" => PinMode::Strict,
        Some(Value::String(s)) if s == "off" => PinMode::Off,
        Some(_) => return err(&format!("{field}.pin"), "must be \"first-use\", \"strict\" or \"off\""),
    };
    let tasks = match map.get("tasks") {
        None => false,
        Some(Value::Bool(b)) => *b,
        Some(_) => return err(&format!("{field}.tasks"), "must be true or false"),
    };
    let modern = match map.get("protocol") {
        None => false,
        Some(Value::String(s)) if s == "2026-07-28" => true,
        Some(_) => return err(&format!("{field}.protocol"), "must be \"2026-07-28\" (absent: the initialize handshake)"),
    };
    if modern && map.contains_key("url") {
        return err(&format!("{field}.protocol"), "only applies to a command upstream (sp speaks 2026-07-28 over Streamable HTTP not yet)");
    }
    let credential_ref = |v: &Value, at: &str| -> Check<String> {
        let c = string(v, at)?;
        if !credentials.contains_key(c) {
            return err(at, format!("names no credential of the credentials section ({:?})", crate::sys::short(c, 64, crate::sys::Ellipsis::Marked)));
        }
        Ok(c.to_owned())
    };
    let transport = match (map.get("command"), map.get("url")) {
        (Some(command), None) => {
            for k in ["credential", "auth"] {
                if map.contains_key(k) {
                    return err(&format!("{field}.{k}"), "only applies to a url upstream (a command upstream takes secrets through env)");
                }
            }
            let sandbox = sandbox(map.get("sandbox"), &format!("{field}.sandbox"))?;
            let user = map.get("user").map(|u| user_name(u, &format!("{field}.user"))).transpose()?;
            let at = format!("{field}.command");
            let argv: Vec<String> = list(command, &at)?
                .iter()
                .enumerate()
                .map(|(i, a)| match a {
                    Value::String(s) if !s.contains('\0') => Ok(s.clone()),
                    _ => err(&format!("{at}[{i}]"), "must be a string without NUL"),
                })
                .collect::<Check<_>>()?;
            let program = &argv[0];
            if program.is_empty() || (!program.starts_with('/') && program.contains('/')) {
                return err(&format!("{at}[0]"), "must be an absolute path or a program name looked up in PATH");
            }
            let mut env = BTreeMap::new();
            if let Some(e) = map.get("env") {
                let Value::Object(vars) = e else {
                    return err(&format!("{field}.env"), "must be an object mapping variable names to values");
                };
                for (var, value) in vars {
                    let at = format!("{field}.env.{var}");
                    if !is_env_name(var) {
                        return err(&format!("{field}.env.{var:?}"), "must be a variable name ([A-Za-z_][A-Za-z0-9_]*)");
                    }
                    let value = match value {
                        Value::String(s) if !s.contains('\0') => EnvValue::Literal(s.clone()),
                        Value::Object(_) => {
                            let m = object(value, &at, &["credential"])?;
                            let c = m.get("credential").ok_or_else(|| (format!("{at}.credential"), "is required".to_owned()))?;
                            EnvValue::Credential(credential_ref(c, &format!("{at}.credential"))?)
                        }
                        _ => return err(&at, "must be a string or {\"credential\": NAME}"),
                    };
                    env.insert(var.clone(), value);
                }
            }
            let cwd = map.get("cwd").map(|c| abs_path(c, &format!("{field}.cwd"))).transpose()?;
            UpstreamTransport::Stdio { command: argv, env, cwd, sandbox, user }
        }
        (None, Some(url)) => {
            for k in ["env", "cwd", "sandbox", "user"] {
                if map.contains_key(k) {
                    return err(&format!("{field}.{k}"), "only applies to a command upstream");
                }
            }
            let at = format!("{field}.url");
            let text = string(url, &at)?;
            let parsed = url::Url::parse(text).map_err(|e| (at.clone(), format!("is not a URL: {e}")))?;
            if !matches!(parsed.scheme(), "https" | "http") || parsed.host_str().is_none() {
                return err(&at, "must be an http or https URL with a host");
            }
            if !parsed.username().is_empty() || parsed.password().is_some() || parsed.fragment().is_some() {
                return err(&at, "must hold no user, password or fragment (put secrets in a credential)");
            }
            let at = format!("{field}.credential");
            let credential = map.get("credential").map(|c| credential_ref(c, &at)).transpose()?;
            if let Some(c) = &credential {
                bound(&credentials[c], &parsed, &at)?;
            }
            let oauth = map.get("auth").map(|a| oauth::auth(a, &format!("{field}.auth"))).transpose()?;
            if credential.is_some() && oauth.is_some() {
                return err(&format!("{field}.auth"), "a url upstream takes either a credential or auth.oauth, not both");
            }
            UpstreamTransport::Http { url: parsed, credential, oauth }
        }
        _ => return err(field, "must have exactly one of \"command\" (a stdio upstream) or \"url\" (Streamable HTTP)"),
    };
    let tools = rules(map.get("tools"), &format!("{field}.tools"))?;
    let resources = map.get("resources").map(|v| item_rules(v, &format!("{field}.resources"))).transpose()?.unwrap_or_default();
    let prompts = map.get("prompts").map(|v| item_rules(v, &format!("{field}.prompts"))).transpose()?.unwrap_or_default();
    let elicitation = map.get("elicitation").map(|v| elicitation::parse(v, &format!("{field}.elicitation"))).transpose()?.unwrap_or_default();
    let mut arguments = BTreeMap::new();
    if let Some(a) = map.get("arguments") {
        let Value::Object(per_tool) = a else {
            return err(&format!("{field}.arguments"), "must be an object mapping tool names to {argument: [globs]}");
        };
        for (tool, pins) in per_tool {
            let at = format!("{field}.arguments.{tool}");
            if !tools.exposes(tool) {
                return err(&at, "names a tool that tools.allow does not expose (or tools.deny removes): the pin could never apply");
            }
            let Value::Object(pins) = pins else {
                return err(&at, "must be an object mapping argument names to glob lists");
            };
            if pins.is_empty() || pins.len() > MAX_GLOBS {
                return err(&at, format!("must pin 1 to {MAX_GLOBS} arguments"));
            }
            let mut out = BTreeMap::new();
            for (arg, globs) in pins {
                out.insert(arg.clone(), glob_list(globs, &format!("{at}.{arg}"))?);
            }
            arguments.insert(tool.clone(), out);
        }
    }
    let timeout_s = map.get("timeout_s").map(|t| int(t, &format!("{field}.timeout_s"), 1, MAX_TIMEOUT_S)).transpose()?;
    let startup_s = map.get("startup_timeout_s").map(|t| int(t, &format!("{field}.startup_timeout_s"), 1, MAX_STARTUP_TIMEOUT_S)).transpose()?;
    let max_output_bytes =
        map.get("max_output_bytes").map(|t| int(t, &format!("{field}.max_output_bytes"), MIN_OUTPUT_BYTES, MAX_OUTPUT_BYTES_CEILING)).transpose()?;
    Ok(Upstream {
        name: name.to_owned(),
        approve_command_only,
        pin,
        tasks,
        modern,
        transport,
        tools,
        resources,
        prompts,
        elicitation,
        arguments,
        timeout: Duration::from_secs(timeout_s.unwrap_or(DEFAULT_TIMEOUT_S)),
        startup_timeout: Duration::from_secs(startup_s.unwrap_or(DEFAULT_STARTUP_TIMEOUT_S)),
        max_output_bytes: max_output_bytes.unwrap_or(DEFAULT_MAX_OUTPUT_BYTES),
    })
}

/// A credential goes only where it is bound (`credentials.NAME.hosts`, `paths`,
/// `methods`): the upstream's URL must be one of those places, for POST.
fn bound(c: &Credential, url: &url::Url, at: &str) -> Check<()> {
    let host = url.host_str().unwrap_or_default().trim_end_matches('.');
    let default_port = if url.scheme() == "https" { 443 } else { 80 };
    let port = url.port().unwrap_or(default_port);
    let fix = |what: &str| format!("credential {:?} is bound to other {what}: add this URL's to credentials.{}.{what}", c.name, c.name);
    if !c.hosts.iter().any(|h| h.matches(host, port, default_port)) {
        return err(at, fix("hosts"));
    }
    if !c.paths.iter().any(|p| p.matches(url.path())) {
        return err(at, fix("paths"));
    }
    if c.methods.as_ref().is_some_and(|m| !m.contains(&super::Method::Post)) {
        return err(at, format!("credential {:?} does not allow POST, which every MCP message is", c.name));
    }
    Ok(())
}

fn rules(v: Option<&Value>, field: &str) -> Check<ToolRules> {
    let Some(v) = v else {
        return err(field, "is required: {\"allow\": [globs]} (an upstream without allow exposes nothing)");
    };
    let map = object(v, field, &["allow", "deny", "approve"])?;
    let allow = glob_list(
        map.get("allow").ok_or_else(|| (format!("{field}.allow"), "is required (no allow exposes nothing)".to_owned()))?,
        &format!("{field}.allow"),
    )?;
    let opt = |k: &str| map.get(k).map(|v| glob_list(v, &format!("{field}.{k}"))).transpose().map(Option::unwrap_or_default);
    Ok(ToolRules { allow, deny: opt("deny")?, approve: opt("approve")? })
}

/// `resources` / `prompts`: `{"allow": [globs], "deny": [globs]}`, `allow` required.
fn item_rules(v: &Value, field: &str) -> Check<ItemRules> {
    let map = object(v, field, &["allow", "deny"])?;
    let allow = glob_list(
        map.get("allow").ok_or_else(|| (format!("{field}.allow"), "is required (no allow relays nothing)".to_owned()))?,
        &format!("{field}.allow"),
    )?;
    let deny = map.get("deny").map(|v| glob_list(v, &format!("{field}.deny"))).transpose()?.unwrap_or_default();
    Ok(ItemRules { allow, deny })
}

fn glob_list(v: &Value, field: &str) -> Check<Vec<Glob>> {
    let items = list(v, field)?;
    if items.len() > MAX_GLOBS {
        return err(field, format!("must hold at most {MAX_GLOBS} globs"));
    }
    items
        .iter()
        .enumerate()
        .map(|(i, g)| {
            let at = format!("{field}[{i}]");
            Glob::new(string(g, &at)?).map_err(|e| (at, e.to_string()))
        })
        .collect()
}

// `auth.oauth` (issue 33 §2).
mod oauth;
#[cfg(test)]
mod tests;
