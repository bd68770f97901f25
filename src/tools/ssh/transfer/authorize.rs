//! The authorization step of `ssh_get` and `ssh_put`: the host must exist and have
//! `files` rules for the direction, the requested path must match one of them, and a
//! put's content must be within `files.max_bytes`. What the server resolves the path to
//! is checked again at run time against the same rules (`sftp.rs`).

use std::fmt;

use crate::gate::authorize::Rules;
use crate::policy::ssh::{SshHost, SshPolicy};
use crate::policy::ssh::files::{FileRules, PathGlob};
use crate::policy::Policy;
use crate::tools::ssh::authorize::SshAction;

use super::args::{SshGet, SshPut};

/// Which way a file moves.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Direction {
    Read,
    Write,
}

impl Direction {
    /// The `files` key of its rules.
    pub fn key(self) -> &'static str {
        match self {
            Direction::Read => "read",
            Direction::Write => "write",
        }
    }
}

/// What one transfer does.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Op {
    Get,
    Put { content: Vec<u8>, overwrite: bool },
}

/// Everything the executor needs for one transfer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TransferAction {
    /// The connection (the host's, as `ssh_exec` has it: the same kept session);
    /// `command` says what moves, for the logs.
    pub conn: SshAction,
    pub path: String,
    pub op: Op,
    /// The direction's patterns: the server's `realpath` must match one of them too.
    pub rules: Vec<PathGlob>,
    pub max_bytes: u64,
    /// `ssh.max_output_bytes`: what a get's `content` may take, encoded.
    pub max_response_bytes: u64,
    /// Permission bits of a put file.
    pub mode: u32,
}

impl TransferAction {
    pub fn direction(&self) -> Direction {
        match self.op {
            Op::Get => Direction::Read,
            Op::Put { .. } => Direction::Write,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TransferDenial {
    UnknownHost { host: String },
    NoRules { host: String, direction: Direction },
    PathNotAllowed { host: String, direction: Direction, path: String },
    TooLarge { bytes: u64, limit: u64 },
}

impl fmt::Display for TransferDenial {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TransferDenial::UnknownHost { host } => write!(f, "there is no ssh host named {host:?} (see sp_inventory)"),
            TransferDenial::NoRules { host, direction } => {
                write!(
                    f,
                    "ssh host {host:?} has no files.{} patterns: the operator allows no file {} there",
                    direction.key(),
                    match direction {
                        Direction::Read => "reads",
                        Direction::Write => "writes",
                    }
                )
            }
            TransferDenial::PathNotAllowed { host, direction, path } => {
                let shown = crate::sys::short(path, 256, crate::sys::Ellipsis::Marked);
                write!(f, "ssh host {host:?}: {shown:?} matches none of its files.{} patterns (see sp_inventory)", direction.key())
            }
            TransferDenial::TooLarge { bytes, limit } => write!(f, "the content is {bytes} bytes, above the host's files.max_bytes ({limit})"),
        }
    }
}

impl std::error::Error for TransferDenial {}

fn host<'p>(policy: &'p SshPolicy, name: &str, direction: Direction) -> Result<(&'p SshHost, &'p FileRules), TransferDenial> {
    let h = policy.hosts.get(name).ok_or_else(|| TransferDenial::UnknownHost { host: name.to_owned() })?;
    let rules = h.files.as_ref().filter(|f| !list(f, direction).is_empty()).ok_or_else(|| TransferDenial::NoRules { host: h.name.clone(), direction })?;
    Ok((h, rules))
}

fn list(f: &FileRules, direction: Direction) -> &[PathGlob] {
    match direction {
        Direction::Read => &f.read,
        Direction::Write => &f.write,
    }
}

/// The transfer half of authorization.
pub(crate) fn authorize(policy: &SshPolicy, host_name: &str, path: String, op: Op) -> Result<TransferAction, TransferDenial> {
    let direction = match op {
        Op::Get => Direction::Read,
        Op::Put { .. } => Direction::Write,
    };
    let (h, files) = host(policy, host_name, direction)?;
    let rules = list(files, direction);
    let Some(i) = FileRules::find(rules, &path) else {
        return Err(TransferDenial::PathNotAllowed { host: h.name.clone(), direction, path });
    };
    if let Op::Put { content, .. } = &op
        && content.len() as u64 > files.max_bytes
    {
        return Err(TransferDenial::TooLarge { bytes: content.len() as u64, limit: files.max_bytes });
    }
    let what = match op {
        Op::Get => format!("sftp get {path}"),
        Op::Put { .. } => format!("sftp put {path}"),
    };
    let call = crate::tools::ssh::SshExec { host: h.name.clone(), command: what, timeout_s: None, stdin: None };
    // The connection facts exactly as ssh_exec's authorization copies them; its command
    // check does not apply (a host's command list is about commands, and none runs).
    let mut conn = crate::tools::ssh::authorize::connection(policy, h, call);
    conn.rule = format!("ssh.hosts.{}.files.{}[{i}]", h.name, direction.key());
    // A transfer is recorded as a command is (`transfer/record.rs`).
    conn.recording = policy.recordings.clone();
    Ok(TransferAction { conn, path, op, rules: rules.to_vec(), max_bytes: files.max_bytes, max_response_bytes: policy.max_output_bytes, mode: files.mode })
}

impl Rules<SshGet> for TransferAction {
    type Denial = TransferDenial;
    fn check(policy: &Policy, call: SshGet) -> Result<TransferAction, TransferDenial> {
        authorize(&policy.ssh, &call.host, call.path, Op::Get)
    }
}

impl Rules<SshPut> for TransferAction {
    type Denial = TransferDenial;
    fn check(policy: &Policy, call: SshPut) -> Result<TransferAction, TransferDenial> {
        authorize(&policy.ssh, &call.host, call.path, Op::Put { content: call.content, overwrite: call.overwrite })
    }
}
