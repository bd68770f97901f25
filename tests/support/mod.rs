//! Shared test fixtures. Each integration test binary uses a part of it.
#![allow(dead_code)]

pub mod corpus;
pub mod http_server;
pub mod process;
pub mod sshd;
pub mod tls;

/// What a confined test upstream must read beyond the system's directories (every
/// command upstream starts confined: sp-policy(5), SANDBOX): this checkout (fixtures,
/// node_modules, the venvs) and the Python that `make upstreams`'s venv was made from
/// (the `home` of its `pyvenv.cfg`, one level up).
pub fn upstream_read_paths() -> Vec<String> {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut read = vec![root.display().to_string()];
    let cfg = std::fs::read_to_string(root.join(".venv-upstreams/pyvenv.cfg")).unwrap_or_default();
    let home = cfg.lines().find_map(|l| l.strip_prefix("home = "));
    read.extend(home.and_then(|h| std::path::Path::new(h.trim()).parent()).map(|p| p.display().to_string()));
    read
}
