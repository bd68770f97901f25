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

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

use serde_json::Value;

use super::fields::{abs_path, err, int, list, object, string, Check};
use super::Credential;
pub(crate) use super::sandbox::Sandbox;
use super::sandbox::{sandbox, user_name};

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
    /// Streamable HTTP; `credential` is injected into each request.
    Http { url: url::Url, credential: Option<String> },
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
    "command", "env", "cwd", "url", "credential", "tools", "arguments", "timeout_s", "startup_timeout_s", "max_output_bytes", "approve", "sandbox", "user", "pin",
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
            return err(&shown, format!("an upstream name is 1-{MAX_NAME_LEN} lowercase letters, digits or '-' (no '_': it joins the upstream and the tool in exposed names)"));
        }
        out.insert(name.clone(), upstream(name, def, &field, credentials)?);
    }
    Ok(out)
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
    let credential_ref = |v: &Value, at: &str| -> Check<String> {
        let c = string(v, at)?;
        if !credentials.contains_key(c) {
            return err(at, format!("names no credential of the credentials section ({:?})", crate::sys::short(c, 64, crate::sys::Ellipsis::Marked)));
        }
        Ok(c.to_owned())
    };
    let transport = match (map.get("command"), map.get("url")) {
        (Some(command), None) => {
            for k in ["credential"] {
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
            UpstreamTransport::Http { url: parsed, credential }
        }
        _ => return err(field, "must have exactly one of \"command\" (a stdio upstream) or \"url\" (Streamable HTTP)"),
    };
    let tools = rules(map.get("tools"), &format!("{field}.tools"))?;
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
    let max_output_bytes = map
        .get("max_output_bytes")
        .map(|t| int(t, &format!("{field}.max_output_bytes"), MIN_OUTPUT_BYTES, MAX_OUTPUT_BYTES_CEILING))
        .transpose()?;
    Ok(Upstream {
        name: name.to_owned(),
        approve_command_only,
        pin,
        transport,
        tools,
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
    let allow = glob_list(map.get("allow").ok_or_else(|| (format!("{field}.allow"), "is required (no allow exposes nothing)".to_owned()))?, &format!("{field}.allow"))?;
    let opt = |k: &str| map.get(k).map(|v| glob_list(v, &format!("{field}.{k}"))).transpose().map(Option::unwrap_or_default);
    Ok(ToolRules { allow, deny: opt("deny")?, approve: opt("approve")? })
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

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn creds() -> BTreeMap<String, Credential> {
        let def = |hosts: Value, extra: Value| {
            let mut d = json!({"source": {"env": "X"}, "inject": {"bearer": {}}, "hosts": hosts});
            d.as_object_mut().unwrap().extend(extra.as_object().unwrap().clone());
            d
        };
        [
            ("github", def(json!(["unused.invalid"]), json!({}))),
            ("tickets", def(json!(["mcp.tickets.example", "x"]), json!({}))),
            ("narrow", def(json!(["x"]), json!({"paths": ["/v1/*"], "methods": ["GET", "POST"]}))),
            ("getonly", def(json!(["x"]), json!({"methods": ["GET"]}))),
        ]
        .into_iter()
        .map(|(n, d)| (n.to_owned(), super::super::credentials::credential(n, &d, n).unwrap()))
        .collect()
    }

    fn one(def: Value) -> Check<Upstream> {
        parse(&json!({"u": def}), &creds()).map(|mut m| m.remove("u").unwrap())
    }

    #[test]
    fn the_issue_example_parses() {
        let all = parse(
            &json!({
              "github": {
                "command": ["/usr/local/bin/github-mcp-server", "stdio"],
                "env": {"GITHUB_PERSONAL_ACCESS_TOKEN": {"credential": "github"}, "GITHUB_TOOLSETS": "repos,issues"},
                "cwd": "/var/lib/sallyport/github",
                "tools": {"allow": ["get_*", "list_*", "search_*", "create_issue"], "deny": ["delete_*"], "approve": ["create_issue"]},
                "arguments": {"create_issue": {"owner": ["acme"], "repo": ["api", "web"]}},
                "timeout_s": 60,
                "max_output_bytes": 1048576
              },
              "tickets": {"url": "https://mcp.tickets.example/mcp", "credential": "tickets", "tools": {"allow": ["*"]}}
            }),
            &creds(),
        )
        .unwrap();
        let g = &all["github"];
        let env = BTreeMap::from([
            ("GITHUB_PERSONAL_ACCESS_TOKEN".to_owned(), EnvValue::Credential("github".into())),
            ("GITHUB_TOOLSETS".to_owned(), EnvValue::Literal("repos,issues".into())),
        ]);
        assert_eq!(
            g.transport,
            UpstreamTransport::Stdio {
                command: vec!["/usr/local/bin/github-mcp-server".into(), "stdio".into()],
                env,
                cwd: Some("/var/lib/sallyport/github".into()),
                sandbox: Some(Sandbox::default()),
                user: None
            }
        );
        assert_eq!((g.timeout, g.startup_timeout, g.max_output_bytes), (Duration::from_secs(60), Duration::from_secs(30), 1048576));
        assert!(g.tools.exposes("get_me") && g.tools.exposes("create_issue") && !g.tools.exposes("delete_repo") && !g.tools.exposes("fork"));
        assert!(g.tools.needs_approval("create_issue") && !g.tools.needs_approval("get_me"));
        assert_eq!(g.arguments["create_issue"]["repo"], vec![Glob::new("api").unwrap(), Glob::new("web").unwrap()]);
        let t = &all["tickets"];
        assert_eq!(
            t.transport,
            UpstreamTransport::Http { url: url::Url::parse("https://mcp.tickets.example/mcp").unwrap(), credential: Some("tickets".into()) }
        );
        assert_eq!((t.timeout, t.max_output_bytes), (Duration::from_secs(DEFAULT_TIMEOUT_S), DEFAULT_MAX_OUTPUT_BYTES));
    }

    #[test]
    fn errors_name_the_field() {
        let allow = json!({"allow": ["*"]});
        let cases: Vec<(Value, &str, &str)> = vec![
            (json!({"tools": allow}), "upstreams.u", "must have exactly one of \"command\" (a stdio upstream) or \"url\" (Streamable HTTP)"),
            (json!({"command": ["/a"], "url": "https://x/", "tools": allow}), "upstreams.u", "must have exactly one of \"command\" (a stdio upstream) or \"url\" (Streamable HTTP)"),
            (json!({"command": ["/a"]}), "upstreams.u.tools", "is required: {\"allow\": [globs]} (an upstream without allow exposes nothing)"),
            (json!({"command": ["/a"], "tools": {}}), "upstreams.u.tools.allow", "is required (no allow exposes nothing)"),
            (json!({"command": ["/a"], "tools": {"allow": []}}), "upstreams.u.tools.allow", "must not be empty"),
            (json!({"command": ["/a"], "tools": {"allow": ["*"], "denied": ["x"]}}), "upstreams.u.tools.denied", "unknown field (expected one of: allow, deny, approve)"),
            (json!({"command": ["/a"], "tools": {"allow": [""]}}), "upstreams.u.tools.allow[0]", "must not be empty"),
            (json!({"command": ["/a"], "tools": {"allow": ["a\u{7}"]}}), "upstreams.u.tools.allow[0]", "contains a control character"),
            (json!({"command": [], "tools": allow}), "upstreams.u.command", "must not be empty"),
            (json!({"command": ["bin/x"], "tools": allow}), "upstreams.u.command[0]", "must be an absolute path or a program name looked up in PATH"),
            (json!({"command": ["/a", 1], "tools": allow}), "upstreams.u.command[1]", "must be a string without NUL"),
            (json!({"command": ["/a"], "cwd": "rel", "tools": allow}), "upstreams.u.cwd", "must be an absolute path"),
            (json!({"command": ["/a"], "credential": "github", "tools": allow}), "upstreams.u.credential", "only applies to a url upstream (a command upstream takes secrets through env)"),
            (json!({"command": ["/a"], "env": {"A=B": "x"}, "tools": allow}), "upstreams.u.env.\"A=B\"", "must be a variable name ([A-Za-z_][A-Za-z0-9_]*)"),
            (json!({"command": ["/a"], "env": {"A": 1}, "tools": allow}), "upstreams.u.env.A", "must be a string or {\"credential\": NAME}"),
            (json!({"command": ["/a"], "env": {"A": {"credential": "nope"}}, "tools": allow}), "upstreams.u.env.A.credential", "names no credential of the credentials section (\"nope\")"),
            (json!({"command": ["/a"], "env": {"A": {"cred": "github"}}, "tools": allow}), "upstreams.u.env.A.cred", "unknown field (expected one of: credential)"),
            (json!({"url": "https://x/", "env": {}, "tools": allow}), "upstreams.u.env", "only applies to a command upstream"),
            (json!({"url": "ftp://x/", "tools": allow}), "upstreams.u.url", "must be an http or https URL with a host"),
            (json!({"url": "https://u:p@x/", "tools": allow}), "upstreams.u.url", "must hold no user, password or fragment (put secrets in a credential)"),
            (json!({"url": "https://x/", "credential": "nope", "tools": allow}), "upstreams.u.credential", "names no credential of the credentials section (\"nope\")"),
            (json!({"url": "https://evil.example/mcp", "credential": "tickets", "tools": allow}), "upstreams.u.credential", "credential \"tickets\" is bound to other hosts: add this URL's to credentials.tickets.hosts"),
            (json!({"url": "https://x:8443/mcp", "credential": "tickets", "tools": allow}), "upstreams.u.credential", "credential \"tickets\" is bound to other hosts: add this URL's to credentials.tickets.hosts"),
            (json!({"url": "https://x/mcp", "credential": "narrow", "tools": allow}), "upstreams.u.credential", "credential \"narrow\" is bound to other paths: add this URL's to credentials.narrow.paths"),
            (json!({"url": "https://x/mcp", "credential": "getonly", "tools": allow}), "upstreams.u.credential", "credential \"getonly\" does not allow POST, which every MCP message is"),
            (json!({"command": ["/a"], "tools": allow, "timeout_s": 0}), "upstreams.u.timeout_s", "must be an integer from 1 to 3600"),
            (json!({"command": ["/a"], "tools": allow, "startup_timeout_s": 301}), "upstreams.u.startup_timeout_s", "must be an integer from 1 to 300"),
            (json!({"command": ["/a"], "tools": allow, "max_output_bytes": 10}), "upstreams.u.max_output_bytes", "must be an integer from 4096 to 67108864"),
            (json!({"command": ["/a"], "tools": allow, "timeout": 5}), "upstreams.u.timeout", "unknown field (expected one of: command, env, cwd, url, credential, tools, arguments, timeout_s, startup_timeout_s, max_output_bytes, approve, sandbox, user, pin)"),
            (json!({"command": ["/a"], "tools": allow, "sandbox": "off"}), "upstreams.u.sandbox", "must be \"none\" or an object ({\"read\": [paths], \"write\": [paths], \"network\": bool, ...})"),
            (json!({"command": ["/a"], "tools": allow, "sandbox": {"read": ["rel"]}}), "upstreams.u.sandbox.read[0]", "must be an absolute path"),
            (json!({"command": ["/a"], "tools": allow, "sandbox": {"write": "/tmp"}}), "upstreams.u.sandbox.write", "must be an array"),
            (json!({"command": ["/a"], "tools": allow, "sandbox": {"network": "no"}}), "upstreams.u.sandbox.network", "must be true or false"),
            (json!({"command": ["/a"], "tools": allow, "sandbox": {"memory_mb": 1}}), "upstreams.u.sandbox.memory_mb", "must be an integer from 64 to 1048576"),
            (json!({"command": ["/a"], "tools": allow, "sandbox": {"exec": []}}), "upstreams.u.sandbox.exec", "unknown field (expected one of: read, write, network, memory_mb, processes, files)"),
            (json!({"command": ["/a"], "tools": allow, "user": "root"}), "upstreams.u.user", "must not be root (leave it out to run as sp's user)"),
            (json!({"command": ["/a"], "tools": allow, "user": "Bad Name"}), "upstreams.u.user", "must be a user name ([a-z_][a-z0-9_-]*, at most 32 characters)"),
            (json!({"url": "https://x/", "tools": allow, "sandbox": "none"}), "upstreams.u.sandbox", "only applies to a command upstream"),
            (json!({"url": "https://x/", "tools": allow, "user": "nobody"}), "upstreams.u.user", "only applies to a command upstream"),
            (json!({"command": ["/a"], "tools": allow, "pin": "tofu"}), "upstreams.u.pin", "must be \"first-use\", \"strict\" or \"off\""),
            (json!({"command": ["/a"], "tools": allow, "pin": true}), "upstreams.u.pin", "must be \"first-use\", \"strict\" or \"off\""),
            (json!({"command": ["/a"], "tools": {"allow": ["get_*"], "deny": ["get_secret"]}, "arguments": {"get_secret": {"a": ["x"]}}}), "upstreams.u.arguments.get_secret", "names a tool that tools.allow does not expose (or tools.deny removes): the pin could never apply"),
            (json!({"command": ["/a"], "tools": allow, "arguments": {"t": {}}}), "upstreams.u.arguments.t", "must pin 1 to 256 arguments"),
            (json!({"command": ["/a"], "tools": allow, "arguments": {"t": {"a": "x"}}}), "upstreams.u.arguments.t.a", "must be an array"),
        ];
        for (def, field, why) in cases {
            let shown = def.to_string();
            let (f, w) = one(def).unwrap_err();
            assert_eq!((f.as_str(), w.as_str()), (field, why), "{shown}");
        }
        for bad in ["", "GitHub", "git_hub", "a.b", "a b", "abcdefghijklmnopqrstuvwxy"] {
            let (f, w) = parse(&json!({bad: {"command": ["/a"], "tools": {"allow": ["*"]}}}), &creds()).unwrap_err();
            assert_eq!((f, w.starts_with("an upstream name is 1-24")), (format!("upstreams.{bad}"), true), "{bad:?}");
        }
        assert_eq!(parse(&json!([]), &creds()).unwrap_err().0, "upstreams");
        assert!(one(json!({"url": "https://x/v1/mcp", "credential": "narrow", "tools": {"allow": ["*"]}})).is_ok());
    }

    #[test]
    fn globs() {
        let g = |p: &str, s: &str| Glob::new(p).unwrap().matches(s);
        let cases = [
            ("*", "", true),
            ("*", "anything", true),
            ("get_*", "get_me", true),
            ("get_*", "get_", true),
            ("get_*", "xget_me", false),
            ("*_issue", "create_issue", true),
            ("a?c", "abc", true),
            ("a?c", "ac", false),
            ("a?c", "abbc", false),
            ("a*b*c", "aXbYbZc", true),
            ("a*b*c", "aXbYbZ", false),
            ("exact", "exact", true),
            ("exact", "exactly", false),
            ("/srv/data/*", "/srv/data/x/y.txt", true),
            ("/srv/data/*", "/srv/data/../../etc/passwd", false),
            ("/srv/data/*", "/srv/data/..", false),
            ("/srv/data/*", "/srv/data/..\\x", false),
            ("/srv/data/*", "/srv/data/x..y", true),
            ("/srv/data/../x", "/srv/data/../x", true),
            ("*", "a\nb", false),
            ("a?b", "a\u{0}b", false),
            ("*", "é", true),
            ("?", "é", true),
        ];
        for (p, s, want) in cases {
            assert_eq!(g(p, s), want, "{p:?} vs {s:?}");
        }
        // Linear enough on a long value: no exponential backtracking.
        let long = "a".repeat(100_000);
        let start = std::time::Instant::now();
        assert!(!g("*a*a*a*a*a*b", &long));
        assert!(start.elapsed() < Duration::from_secs(2));
    }
}
