//! `sp audit`'s own arguments (everything after `audit`): `verify`, `tail`, `show`,
//! `export`. Pure, like the rest of `args`: `--since 1h` stays an age here and becomes a
//! time when the command runs.

use std::ffi::OsString;
use std::path::PathBuf;

use super::{lexopt, UsageError};
use crate::audit::export::Format;

pub(crate) const AUDIT_USAGE: &str = "\
Usage:
  sp audit verify FILE [--anchor HASH]
  sp audit tail FILE [-n N] [--json]
  sp audit show FILE [SEQ] [--json | --recording]
  sp audit export FILE [--format ndjson|cef|ocsf] [--since TIME] [--follow]

  verify   check the hash chain (and the session recordings rows name);
           exit 0 only when the journal is whole
  tail     print the last N rows (default 10)
  show     print every row, or the row SEQ
  export   print the rows for a SIEM, checking the chain as it goes; exit 1 at
           the first break (after the rows before it)

Options:
      --anchor HASH    a hash recorded earlier (the last line of a previous verify,
                       the syslog copy): it must be in the file, or be the first
                       row's prev
  -n, --lines N        how many rows tail prints
      --json           the rows as stored, one JSON object per line
      --recording      with show SEQ: that call's session recording (asciicast
                       v2), checked against its row first
      --format FORMAT  export: ndjson (default), cef or ocsf
      --since TIME     export: only rows from TIME on (RFC 3339, or an age: 30s,
                       15m, 1h, 7d); the rows before are still checked
      --follow         export: keep reading as rows are appended, until killed
  -h, --help           this help
";

#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Sub {
    Verify { anchor: Option<String> },
    Tail { lines: usize, json: bool },
    Show { json: bool, seq: Option<u64>, recording: bool },
    Export { format: Format, since: Option<Since>, follow: bool },
    Help,
}

/// `--since`: a time, or an age resolved against the clock when the export starts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Since {
    /// Milliseconds since the epoch.
    At(i64),
    /// Seconds before now.
    Ago(u64),
}

impl Since {
    /// `2026-12-05T12:00:00Z` (any RFC 3339 date-time), or `N` followed by `s`, `m`,
    /// `h` or `d`.
    pub(crate) fn parse(s: &str) -> Option<Since> {
        if let Some(ms) = crate::audit::export::parse_rfc3339(s) {
            return Some(Since::At(ms));
        }
        let unit = match s.chars().last()? {
            's' => 1,
            'm' => 60,
            'h' => 3600,
            'd' => 86_400,
            _ => return None,
        };
        let n = &s[..s.len() - 1];
        if n.is_empty() || !n.bytes().all(|b| b.is_ascii_digit()) {
            return None;
        }
        n.parse::<u64>().ok()?.checked_mul(unit).map(Since::Ago)
    }
}

#[derive(Debug, PartialEq, Eq)]
pub(crate) struct AuditArgs {
    pub sub: Sub,
    pub file: PathBuf,
}

/// What follows `audit` on the command line.
pub(crate) fn parse_audit(argv: impl IntoIterator<Item = OsString>) -> Result<AuditArgs, UsageError> {
    use lexopt::prelude::*;
    let mut p = lexopt::Parser::from_args(argv);
    let mut sub = None;
    let mut file = None;
    let (mut anchor, mut lines, mut json, mut seq, mut recording) = (None, None, false, None, false);
    let (mut format, mut since, mut follow) = (None, None, false);
    while let Some(arg) = p.next().map_err(lexopt)? {
        match arg {
            Short('h') | Long("help") => return Ok(AuditArgs { sub: Sub::Help, file: PathBuf::new() }),
            Long("anchor") => {
                // Checked here, not by verify: a malformed anchor is a usage error (exit
                // 2), not a broken journal (exit 1). Upper case hex is accepted.
                let v = p.value().map_err(lexopt)?;
                let a = v.to_str().filter(|a| a.len() == 64 && a.bytes().all(|b| b.is_ascii_hexdigit()));
                anchor = Some(a.ok_or(UsageError::Anchor)?.to_ascii_lowercase());
            }
            Short('n') | Long("lines") => {
                let v = p.value().map_err(lexopt)?;
                lines = Some(v.to_str().and_then(|s| s.parse::<usize>().ok()).ok_or(UsageError::Lines)?);
            }
            Long("json") => json = true,
            Long("format") => {
                let v = p.value().map_err(lexopt)?;
                format = Some(v.to_str().and_then(Format::parse).ok_or(UsageError::Format)?);
            }
            Long("since") => {
                let v = p.value().map_err(lexopt)?;
                since = Some(v.to_str().and_then(Since::parse).ok_or(UsageError::Since)?);
            }
            Long("follow") => follow = true,
            Long("recording") => recording = true,
            Value(v) if sub.is_none() => sub = Some(v.to_string_lossy().into_owned()),
            Value(v) if file.is_none() => file = Some(PathBuf::from(v)),
            Value(v) if seq.is_none() && sub.as_deref() == Some("show") => seq = Some(v.to_str().and_then(|s| s.parse::<u64>().ok()).ok_or(UsageError::Seq)?),
            other => return Err(lexopt(other.unexpected())),
        }
    }
    let sub = sub.ok_or(UsageError::NoSubcommand { command: "audit" })?;
    let file = file.ok_or_else(|| UsageError::NoFile { sub: sub.clone() })?;
    let only = |flag, ok: bool| if ok { Ok(()) } else { Err(UsageError::NotFor { flag, command: "audit", sub: sub.clone() }) };
    if sub != "export" {
        only("--format", format.is_none())?;
        only("--since", since.is_none())?;
        only("--follow", !follow)?;
    }
    let sub = match sub.as_str() {
        _ if recording && sub != "show" => return Err(UsageError::NotFor { flag: "--recording", command: "audit", sub: sub.clone() }),
        "show" if recording && (seq.is_none() || json) => return Err(UsageError::Seq),
        "verify" => {
            only("-n", lines.is_none())?;
            only("--json", !json)?;
            Sub::Verify { anchor }
        }
        "tail" => {
            only("--anchor", anchor.is_none())?;
            Sub::Tail { lines: lines.unwrap_or(10), json }
        }
        "show" => {
            only("--anchor", anchor.is_none())?;
            only("-n", lines.is_none())?;
            Sub::Show { json, seq, recording }
        }
        "export" => {
            only("--anchor", anchor.is_none())?;
            only("-n", lines.is_none())?;
            only("--json", !json)?;
            Sub::Export { format: format.unwrap_or(Format::Ndjson), since, follow }
        }
        other => return Err(UsageError::UnknownSubcommand { command: "audit", name: other.to_owned() }),
    };
    Ok(AuditArgs { sub, file })
}
