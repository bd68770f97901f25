//! `sp init [FILE | -]`: a starting policy for a first use (issue 32, section 1).
//!
//! JSON has no comments, and the policy parser refuses every key it does not know (a
//! typo must not silently allow or deny), so the policy written carries none: the
//! commentary, one paragraph per part of the file, is printed beside it on stdout and
//! points at the sections of sp-policy(5). The policy is a working one: `sp check`
//! loads it, and `sp mcp` serves it (GET on an example host, POST there only after
//! approval, one credential read from an environment variable at use).
//!
//! Where: FILE, else the first default place `sp mcp` looks after `$SP_CONFIG`
//! (`$XDG_CONFIG_HOME/sallyport/policy.json`, else `~/.config/sallyport/policy.json`);
//! `-` prints the policy on stdout instead. The file is created owner-only (0600, its
//! new directories 0700) and never replaces one that exists. The approver named is the
//! `sp-approve` installed beside this `sp` when there is one, else
//! `/usr/local/bin/sp-approve` (where `make install` puts it).

use std::io::Write;
use std::path::{Path, PathBuf};

use super::Env;

/// The starting policy; `@APPROVER@` becomes the approver's path (a JSON string).
const POLICY: &str = r#"{
  "http": {
    "allow": [
      {"hosts": ["api.example.com"], "methods": ["GET"], "paths": ["/v1/*"]},
      {"hosts": ["api.example.com"], "methods": ["POST"], "paths": ["/v1/*"], "approve": true}
    ],
    "timeout_s": 30
  },
  "credentials": {
    "example_api": {
      "source": {"env": "EXAMPLE_API_TOKEN"},
      "inject": {"bearer": {}},
      "hosts": ["api.example.com"],
      "paths": ["/v1/*"]
    }
  },
  "approval": {"command": [@APPROVER@], "timeout_s": 90},
  "audit": {"fsync": true}
}
"#;

/// What each part does, printed beside the file (JSON has no comments).
const COMMENTARY: &str = "\
What this policy does (sp-policy(5) has every field):
  http.allow[0]   the agent may GET https://api.example.com/v1/... (HTTP, HOST PATTERNS,
                  PATH PATTERNS); nothing else is reachable: deny by default
  http.allow[1]   POST there too, each call only after the approver says yes
                  (\"approve\": true; APPROVAL)
  credentials     example_api: the token in $EXAMPLE_API_TOKEN (read when a call needs
                  it, never shown to the agent), sent as a bearer token to that host and
                  path only (CREDENTIALS); put that variable in the MCP client's env
  approval        the approver asked before approve-flagged calls; sp-approve asks on
                  the terminal named by $SP_APPROVE_TTY or on the desktop (sp-approve(1))
  audit           every call is journaled, by default to ~/.local/state/sallyport/audit.jsonl
                  (AUDIT; read it with sp audit tail FILE)
Tools the agent sees: http_request, http_get, sp_inventory (ssh_exec appears once
\"ssh\" names a host: SSH).
Next: replace api.example.com and the credential with yours, run `sp check`, then
wire `sp mcp` into the client (README, \"Wiring it to a client\").
";

/// Why `sp init` wrote nothing.
#[derive(Debug)]
pub(crate) enum InitError {
    /// No FILE, and neither `XDG_CONFIG_HOME` nor `HOME` is set.
    NoPlace,
    Exists {
        path: PathBuf,
    },
    Write {
        path: PathBuf,
        why: String,
    },
}

impl std::fmt::Display for InitError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            InitError::NoPlace => f.write_str("sp init: no FILE given and neither XDG_CONFIG_HOME nor HOME is set; name the file (sp init FILE)"),
            InitError::Exists { path } => {
                write!(f, "sp init: {} exists; it is left as it is (remove it, or name another FILE)", path.display())
            }
            InitError::Write { path, why } => write!(f, "sp init: cannot write {}: {why}", path.display()),
        }
    }
}

impl std::error::Error for InitError {}

/// The policy text, naming `approver`.
pub(crate) fn policy_text(approver: &str) -> String {
    POLICY.replace("@APPROVER@", &serde_json::Value::String(approver.to_owned()).to_string())
}

/// The approver to name: `sp-approve` beside `exe` (this `sp`), else the `make install` place.
pub(crate) fn approver_beside(exe: Option<&Path>) -> String {
    exe.and_then(|e| Some(e.parent()?.join("sp-approve")))
        .filter(|p| p.is_file())
        .map_or_else(|| "/usr/local/bin/sp-approve".to_owned(), |p| p.display().to_string())
}

/// Where `sp init` without FILE writes: where `sp mcp` looks first after `$SP_CONFIG`.
pub(crate) fn default_place(env: &Env) -> Option<PathBuf> {
    let base = match env.get("XDG_CONFIG_HOME").filter(|v| Path::new(v).is_absolute()) {
        Some(x) => PathBuf::from(x),
        None => PathBuf::from(env.get("HOME").filter(|h| Path::new(h).is_absolute())?).join(".config"),
    };
    Some(base.join("sallyport").join("policy.json"))
}

/// Writes `text` to `path`, owner-only, new directories 0700; never over an existing file.
fn write_new(path: &Path, text: &str) -> Result<(), InitError> {
    use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
    let failed = |e: std::io::Error| match e.kind() {
        std::io::ErrorKind::AlreadyExists => InitError::Exists { path: path.to_owned() },
        _ => InitError::Write { path: path.to_owned(), why: crate::sys::io_reason(&e) },
    };
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::DirBuilder::new().recursive(true).mode(0o700).create(dir).map_err(failed)?;
    }
    let mut f = std::fs::OpenOptions::new().write(true).create_new(true).mode(0o600).open(path).map_err(failed)?;
    f.write_all(text.as_bytes()).and_then(|()| f.sync_all()).map_err(failed)
}

/// `sp init`: writes the policy (or prints it for `-`) and returns what to print on
/// stdout: the commentary, after a line naming the file.
pub(crate) fn run(file: Option<&Path>, env: &Env, exe: Option<&Path>) -> Result<String, InitError> {
    let text = policy_text(&approver_beside(exe));
    if file == Some(Path::new("-")) {
        return Ok(text);
    }
    let path = match file {
        Some(p) => p.to_owned(),
        None => default_place(env).ok_or(InitError::NoPlace)?,
    };
    write_new(&path, &text)?;
    Ok(format!("wrote {} (mode 0600)\n\n{COMMENTARY}", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The starting policy loads, lists what the commentary says, and asks approval
    /// for POST only; `-` prints it; an existing file is left alone; the default place
    /// is where `sp mcp` looks.
    #[test]
    fn the_starting_policy_loads_and_is_never_written_over_a_file() {
        let text = policy_text("/usr/local/bin/sp-approve");
        let p = crate::policy::Policy::from_text(&text, Path::new("init.json")).unwrap();
        assert_eq!(p.http.allow.iter().map(|r| r.approve.needed()).collect::<Vec<_>>(), [false, true]);
        assert_eq!(p.approval.command.as_deref(), Some(&["/usr/local/bin/sp-approve".to_owned()][..]));
        let listed = crate::tools::Listed::of(&p);
        assert_eq!((listed.http, listed.get, listed.ssh), (true, true, false), "the commentary's tool list");
        let env = Env::from_pairs(&[("HOME", "/home/u")]);
        assert_eq!(default_place(&env), Some(PathBuf::from("/home/u/.config/sallyport/policy.json")));
        let env = Env::from_pairs(&[("HOME", "/home/u"), ("XDG_CONFIG_HOME", "/x")]);
        assert_eq!(default_place(&env), Some(PathBuf::from("/x/sallyport/policy.json")));
        assert_eq!(default_place(&Env::default()), None);
        assert_eq!(run(Some(Path::new("-")), &env, None).unwrap(), text);
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("new/policy.json");
        let said = run(Some(&file), &env, None).unwrap();
        assert!(said.starts_with(&format!("wrote {} (mode 0600)\n", file.display())), "{said}");
        assert_eq!(std::fs::read_to_string(&file).unwrap(), text);
        use std::os::unix::fs::PermissionsExt;
        assert_eq!(std::fs::metadata(&file).unwrap().permissions().mode() & 0o777, 0o600);
        assert_eq!(std::fs::metadata(file.parent().unwrap()).unwrap().permissions().mode() & 0o777, 0o700);
        std::fs::write(&file, "{\"mine\": 1}").unwrap();
        let e = run(Some(&file), &env, None).unwrap_err();
        assert_eq!(e.to_string(), format!("sp init: {} exists; it is left as it is (remove it, or name another FILE)", file.display()));
        assert_eq!(std::fs::read_to_string(&file).unwrap(), "{\"mine\": 1}");
        // An sp-approve beside sp is the one named.
        std::fs::write(dir.path().join("sp-approve"), "#!/bin/sh\n").unwrap();
        assert_eq!(approver_beside(Some(&dir.path().join("sp"))), dir.path().join("sp-approve").display().to_string());
        assert_eq!(approver_beside(Some(Path::new("/nonexistent/sp"))), "/usr/local/bin/sp-approve");
    }
}
