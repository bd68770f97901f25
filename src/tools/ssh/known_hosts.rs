//! Host keys: an OpenSSH `known_hosts` file, read and matched here rather than by
//! libssh2, whose matcher silently ignores `@revoked` lines and lets a port-less entry
//! match any port.
//!
//! Format (sshd(8), "SSH_KNOWN_HOSTS FILE FORMAT"): `[@marker] hosts keytype base64
//! [comment]`, `#` comments and blank lines ignored. `hosts` is a comma-separated list of
//! patterns (`*` and `?` wildcards, `!` negation, `[host]:port`), or one hashed entry
//! `|1|base64(salt)|base64(HMAC-SHA1(salt, name))`.
//!
//! Rules, and the decisions the issue left open:
//! - **Port rule (OpenSSH's):** for port 22 the name looked up is the policy's `address`
//!   as is (`web1.example.com`, `10.0.0.5`, `::1`); for any other port it is
//!   `[address]:port`. An entry without brackets therefore matches port 22 only, never
//!   "any port" as libssh2 would have it. Hashed entries hash that same name.
//! - **`@revoked`:** a key on such a line is refused for every host, whatever patterns
//!   the line carries (a revoked key is revoked everywhere; OpenSSH only consults the
//!   lines matching the host, this is stricter).
//! - **`@cert-authority`:** host certificates are not supported; these lines are skipped
//!   and never make a key trusted.
//! - A host listed with keys of other types only (the server offered a type nobody
//!   recorded) is refused like a changed key: `sp` asks for the recorded types first,
//!   so a server that no longer offers them has changed.
//! - Malformed lines are skipped with a warning on stderr naming the line number; they
//!   never match anything.
//! - The file must be a regular file owned by the user running `sp` (or root) and not
//!   writable by group or others: whoever can write it can vouch for any server. It is
//!   at most 4 MiB. It is opened through `sys`: a symbolic link is
//!   resolved first, then a FIFO, socket or device is refused at once, never waited on.
//! - `accept-new` records a key with [`record`]: the file is opened for append (created
//!   with mode 0600 when missing), locked with `flock`, re-read and re-checked under the
//!   lock (another `sp` may have recorded a different key meanwhile), then one complete
//!   line is appended in a single `write` and synced. Entries are written unhashed
//!   (`name keytype base64`), readable by the operator who audits them.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::Duration;

use base64::engine::general_purpose::STANDARD;
use base64::Engine as _;
use hmac::{Hmac, Mac};
use sha1::Sha1;

use crate::sys::{LockError, SysError};

pub(crate) const MAX_KNOWN_HOSTS_BYTES: u64 = 4 * 1024 * 1024;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Marker {
    None,
    Revoked,
    CertAuthority,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Hosts {
    Hashed {
        salt: Vec<u8>,
        hash: Vec<u8>,
    },
    /// (negated, lowercase pattern)
    Patterns(Vec<(bool, String)>),
}

#[derive(Debug, Clone, PartialEq, Eq)]
struct Entry {
    line: usize,
    marker: Marker,
    hosts: Hosts,
    key_type: String,
    blob: Vec<u8>,
}

/// What the file says about a server's key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    Known {
        line: usize,
    },
    Unknown,
    /// A different key of the same type is recorded for this host.
    Changed {
        line: usize,
    },
    /// Only keys of other types are recorded for this host.
    OtherTypes {
        types: Vec<String>,
    },
    Revoked {
        line: usize,
    },
}

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct KnownHosts {
    entries: Vec<Entry>,
    /// Line numbers skipped as malformed.
    pub malformed: Vec<usize>,
}

/// The name an entry must match for `host` on `port` (the OpenSSH port rule).
pub fn lookup_name(host: &str, port: u16) -> String {
    if port == 22 { host.to_ascii_lowercase() } else { format!("[{}]:{port}", host.to_ascii_lowercase()) }
}

/// The key type inside an SSH public key blob (its first string).
pub fn blob_type(blob: &[u8]) -> Option<&str> {
    let len = u32::from_be_bytes(blob.get(..4)?.try_into().ok()?) as usize;
    std::str::from_utf8(blob.get(4..4 + len)?).ok()
}

/// OpenSSH-style wildcard match: `*` any run, `?` any one character.
fn wildcard(pattern: &[u8], name: &[u8]) -> bool {
    let (mut p, mut n) = (0, 0);
    let (mut star, mut mark) = (None, 0);
    while n < name.len() {
        if p < pattern.len() && (pattern[p] == b'?' || pattern[p] == name[n]) {
            p += 1;
            n += 1;
        } else if p < pattern.len() && pattern[p] == b'*' {
            star = Some(p);
            mark = n;
            p += 1;
        } else if let Some(s) = star {
            p = s + 1;
            mark += 1;
            n = mark;
        } else {
            return false;
        }
    }
    pattern[p..].iter().all(|c| *c == b'*')
}

fn hmac_sha1(salt: &[u8], name: &str) -> Vec<u8> {
    #[expect(
        clippy::expect_used,
        reason = "HMAC takes a key of any length (RFC 2104: a long one is hashed, a short one padded); new_from_slice returns a Result only because KeyInit serves fixed-size-key ciphers too"
    )]
    let mut mac = <Hmac<Sha1> as Mac>::new_from_slice(salt).expect("HMAC takes any key length");
    mac.update(name.as_bytes());
    mac.finalize().into_bytes().to_vec()
}

impl Hosts {
    fn matches(&self, name: &str) -> bool {
        match self {
            Hosts::Hashed { salt, hash } => hmac_sha1(salt, name) == *hash,
            Hosts::Patterns(patterns) => {
                let mut hit = false;
                for (negated, p) in patterns {
                    if wildcard(p.as_bytes(), name.as_bytes()) {
                        if *negated {
                            return false;
                        }
                        hit = true;
                    }
                }
                hit
            }
        }
    }
}

fn parse_line(line: &str, number: usize) -> Option<Option<Entry>> {
    let line = line.trim();
    if line.is_empty() || line.starts_with('#') {
        return Some(None);
    }
    let mut fields = line.split_ascii_whitespace();
    let mut first = fields.next()?;
    let marker = match first {
        "@revoked" => Marker::Revoked,
        "@cert-authority" => Marker::CertAuthority,
        m if m.starts_with('@') => return None,
        _ => Marker::None,
    };
    if marker != Marker::None {
        first = fields.next()?;
    }
    let hosts = if let Some(rest) = first.strip_prefix("|1|") {
        let (salt, hash) = rest.split_once('|')?;
        let (salt, hash) = (STANDARD.decode(salt).ok()?, STANDARD.decode(hash).ok()?);
        if salt.len() != 20 || hash.len() != 20 {
            return None;
        }
        Hosts::Hashed { salt, hash }
    } else {
        let patterns: Vec<(bool, String)> = first
            .split(',')
            .map(|p| match p.strip_prefix('!') {
                Some(neg) => (true, neg.to_ascii_lowercase()),
                None => (false, p.to_ascii_lowercase()),
            })
            .collect();
        if patterns.iter().any(|(_, p)| p.is_empty()) {
            return None;
        }
        Hosts::Patterns(patterns)
    };
    let key_type = fields.next()?.to_owned();
    let blob = STANDARD.decode(fields.next()?).ok()?;
    if blob_type(&blob)? != key_type {
        return None;
    }
    Some(Some(Entry { line: number, marker, hosts, key_type, blob }))
}

impl KnownHosts {
    pub fn parse(text: &str) -> KnownHosts {
        let mut kh = KnownHosts::default();
        for (i, line) in text.lines().enumerate() {
            match parse_line(line, i + 1) {
                Some(Some(e)) => kh.entries.push(e),
                Some(None) => {}
                None => kh.malformed.push(i + 1),
            }
        }
        kh
    }

    /// Reads `path` with the checks in the module docs. A missing file is empty.
    pub(crate) fn load(path: &Path) -> Result<KnownHosts, KnownHostsError> {
        let bytes = match crate::sys::read_within(path, RULES, crate::sys::READ_TIMEOUT) {
            Ok(b) => b,
            Err(crate::sys::SysError::Missing) => return Ok(KnownHosts::default()),
            Err(why) => return Err(KnownHostsError::Refused { path: path.to_owned(), why }),
        };
        let text = String::from_utf8(bytes.to_vec()).map_err(|_| KnownHostsError::NotUtf8 { path: path.to_owned() })?;
        let kh = KnownHosts::parse(&text);
        if !kh.malformed.is_empty() {
            log::warn!("{}: skipping malformed line(s) {:?}", path.display(), kh.malformed);
        }
        Ok(kh)
    }

    fn for_host<'a>(&'a self, host: &str, port: u16) -> impl Iterator<Item = &'a Entry> + 'a + use<'a> {
        let name = lookup_name(host, port);
        self.entries.iter().filter(move |e| e.marker == Marker::None && e.hosts.matches(&name))
    }

    pub fn check(&self, host: &str, port: u16, blob: &[u8]) -> Verdict {
        if let Some(e) = self.entries.iter().find(|e| e.marker == Marker::Revoked && e.blob == blob) {
            return Verdict::Revoked { line: e.line };
        }
        let mine: Vec<&Entry> = self.for_host(host, port).collect();
        if let Some(e) = mine.iter().find(|e| e.blob == blob) {
            return Verdict::Known { line: e.line };
        }
        let server_type = blob_type(blob).unwrap_or_default();
        if let Some(e) = mine.iter().find(|e| e.key_type == server_type) {
            return Verdict::Changed { line: e.line };
        }
        if mine.is_empty() {
            return Verdict::Unknown;
        }
        let mut types: Vec<String> = mine.iter().map(|e| e.key_type.clone()).collect();
        types.dedup();
        Verdict::OtherTypes { types }
    }

    /// Key types recorded for the host, in file order, without duplicates.
    pub fn known_types(&self, host: &str, port: u16) -> Vec<String> {
        let mut out: Vec<String> = Vec::new();
        for e in self.for_host(host, port) {
            if !out.contains(&e.key_type) {
                out.push(e.key_type.clone());
            }
        }
        out
    }
}

/// The host key algorithms to offer, most wanted first: the types already recorded for
/// this host, then modern defaults. SHA-1 `ssh-rsa` signatures and DSA are offered only
/// for a host whose recorded key needs them; certificate algorithms never.
pub(crate) fn host_key_preference(known_types: &[String]) -> String {
    const DEFAULTS: [&str; 6] = ["ssh-ed25519", "ecdsa-sha2-nistp256", "ecdsa-sha2-nistp384", "ecdsa-sha2-nistp521", "rsa-sha2-512", "rsa-sha2-256"];
    let mut out: Vec<&str> = Vec::new();
    for t in known_types {
        let algs: &[&str] = match t.as_str() {
            "ssh-rsa" => &["rsa-sha2-512", "rsa-sha2-256", "ssh-rsa"],
            "ssh-ed25519" => &["ssh-ed25519"],
            "ecdsa-sha2-nistp256" => &["ecdsa-sha2-nistp256"],
            "ecdsa-sha2-nistp384" => &["ecdsa-sha2-nistp384"],
            "ecdsa-sha2-nistp521" => &["ecdsa-sha2-nistp521"],
            "ssh-dss" => &["ssh-dss"],
            _ => &[],
        };
        out.extend(algs.iter().filter(|a| !out.contains(a)).collect::<Vec<_>>());
    }
    for a in DEFAULTS {
        if !out.contains(&a) {
            out.push(a);
        }
    }
    out.join(",")
}

/// Owned by root or this user, not writable by group or others, at most 4 MiB.
/// A symbolic link is followed (as OpenSSH does); the file reached is checked.
const RULES: crate::sys::Rules = crate::sys::Rules::owned(0o022, MAX_KNOWN_HOSTS_BYTES).following();

/// Under the lock in [`record`]: the same checks on the open descriptor, then the text.
fn read_checked(file: &std::fs::File, path: &Path) -> Result<String, KnownHostsError> {
    let refused = |why| KnownHostsError::Refused { path: path.to_owned(), why };
    crate::sys::check(file, RULES).map_err(refused)?;
    let bytes = crate::sys::read_capped(file, MAX_KNOWN_HOSTS_BYTES).map_err(refused)?;
    String::from_utf8(bytes.to_vec()).map_err(|_| KnownHostsError::NotUtf8 { path: path.to_owned() })
}

/// What [`record`] did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Recorded {
    Added,
    /// Someone recorded the same key meanwhile.
    AlreadyKnown,
}

/// `accept-new`: appends the key for `host`/`port`, under an exclusive lock, after
/// checking again that the file does not (now) say something else about this host.
pub(crate) fn record(path: &Path, host: &str, port: u16, blob: &[u8]) -> Result<Recorded, KnownHostsError> {
    let at = || path.to_owned();
    // No symlink, FIFO or device, and no wait on one.
    let (file, _) =
        crate::sys::open(path, crate::sys::Access::AppendCreate { mode: 0o600 }, RULES).map_err(|why| KnownHostsError::OpenForWrite { path: at(), why })?;
    // From here to the end of the function the lock is held.
    let _lock = crate::sys::lock_exclusive(&file, LOCK_WAIT).map_err(|why| KnownHostsError::Lock { path: at(), why })?;
    let text = read_checked(&file, path)?;
    match KnownHosts::parse(&text).check(host, port, blob) {
        Verdict::Known { .. } => return Ok(Recorded::AlreadyKnown),
        Verdict::Unknown => {}
        now => return Err(KnownHostsError::Changed { path: at(), now }),
    }
    let key_type = blob_type(blob).ok_or(KnownHostsError::MalformedBlob)?;
    let mut line = String::new();
    if !text.is_empty() && !text.ends_with('\n') {
        line.push('\n');
    }
    line.push_str(&format!("{} {key_type} {}\n", lookup_name(host, port), STANDARD.encode(blob)));
    let mut f = &file;
    f.write_all(line.as_bytes()).map_err(|e| KnownHostsError::Append { path: at(), why: crate::sys::io_reason(&e) })?;
    file.sync_all().map_err(|e| KnownHostsError::Sync { path: at(), why: crate::sys::io_reason(&e) })?;
    Ok(Recorded::Added)
}

/// Why `known_hosts` could not be read or written; each message names the file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum KnownHostsError {
    /// Refused by the checks of the module docs (or unreadable).
    Refused {
        path: PathBuf,
        why: SysError,
    },
    NotUtf8 {
        path: PathBuf,
    },
    /// `accept-new` could not open it for appending.
    OpenForWrite {
        path: PathBuf,
        why: SysError,
    },
    Lock {
        path: PathBuf,
        why: LockError,
    },
    /// Under the lock, the file says something else about the host than when the
    /// connection began: nothing is recorded.
    Changed {
        path: PathBuf,
        now: Verdict,
    },
    /// The server's host key blob has no readable type.
    MalformedBlob,
    Append {
        path: PathBuf,
        why: String,
    },
    Sync {
        path: PathBuf,
        why: String,
    },
}

impl std::fmt::Display for KnownHostsError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            KnownHostsError::Refused { path, why: why @ SysError::TooOpen { .. } } => {
                write!(f, "{}: {why}: chmod go-w it (whoever can write it vouches for every server)", path.display())
            }
            KnownHostsError::Refused { path, why } => write!(f, "{}: {why}", path.display()),
            KnownHostsError::NotUtf8 { path } => write!(f, "{}: not UTF-8", path.display()),
            KnownHostsError::OpenForWrite { path, why } => write!(f, "{}: cannot be opened for writing: {why}", path.display()),
            KnownHostsError::Lock { path, why } => write!(f, "{}: cannot be locked: {why}", path.display()),
            KnownHostsError::Changed { path, now } => write!(f, "{}: changed while connecting ({now:?}); nothing recorded", path.display()),
            KnownHostsError::MalformedBlob => f.write_str("the server's host key blob is malformed"),
            KnownHostsError::Append { path, why } => write!(f, "{}: append failed: {why}", path.display()),
            KnownHostsError::Sync { path, why } => write!(f, "{}: sync failed: {why}", path.display()),
        }
    }
}

impl std::error::Error for KnownHostsError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            KnownHostsError::Refused { why, .. } | KnownHostsError::OpenForWrite { why, .. } => Some(why),
            KnownHostsError::Lock { why, .. } => Some(why),
            _ => None,
        }
    }
}

/// How long [`record`] waits for another `sp` recording a key.
const LOCK_WAIT: Duration = Duration::from_secs(5);

#[cfg(test)]
mod tests {
    use super::*;

    fn blob(t: &str, body: &[u8]) -> Vec<u8> {
        let mut b = (t.len() as u32).to_be_bytes().to_vec();
        b.extend_from_slice(t.as_bytes());
        b.extend_from_slice(&(body.len() as u32).to_be_bytes());
        b.extend_from_slice(body);
        b
    }

    fn line(hosts: &str, b: &[u8]) -> String {
        format!("{hosts} {} {}", blob_type(b).unwrap(), STANDARD.encode(b))
    }

    fn hashed(name: &str) -> String {
        let salt = [7u8; 20];
        format!("|1|{}|{}", STANDARD.encode(salt), STANDARD.encode(hmac_sha1(&salt, name)))
    }

    #[test]
    fn hmac_sha1_vector() {
        // RFC 2202 test case 2
        let mac = hmac_sha1(b"Jefe", "what do ya want for nothing?");
        assert_eq!(mac.iter().map(|b| format!("{b:02x}")).collect::<String>(), "effcdf6ae5eb2fa2d27416d5f184df9c259a7c79");
    }

    #[test]
    fn matching() {
        let ed = blob("ssh-ed25519", b"A");
        let ed2 = blob("ssh-ed25519", b"B");
        let rsa = blob("ssh-rsa", b"C");
        let text = [
            "# comment",
            "",
            &line("web1.example.com,10.0.0.5", &ed),
            &line("[web2.example.com]:2222", &ed),
            &line(&hashed("[db]:2200"), &ed),
            &line(&hashed("db"), &rsa),
            &line("*.wild.org,!bad.wild.org", &ed),
            &line("rsaonly", &rsa),
            &format!("@revoked * {} {}", "ssh-ed25519", STANDARD.encode(&ed2)),
            &format!("@cert-authority * {} {}", "ssh-ed25519", STANDARD.encode(&ed2)),
            "garbage line",
            &format!("mismatch ssh-rsa {}", STANDARD.encode(&ed)),
        ]
        .join("\n");
        let kh = KnownHosts::parse(&text);
        assert_eq!(kh.malformed, vec![11, 12]);
        assert_eq!(kh.check("web1.example.com", 22, &ed), Verdict::Known { line: 3 });
        assert_eq!(kh.check("WEB1.example.com", 22, &ed), Verdict::Known { line: 3 });
        assert_eq!(kh.check("10.0.0.5", 22, &ed), Verdict::Known { line: 3 });
        // the port rule: a port-less entry is port 22 only
        assert_eq!(kh.check("web1.example.com", 2222, &ed), Verdict::Unknown);
        assert_eq!(kh.check("web2.example.com", 2222, &ed), Verdict::Known { line: 4 });
        assert_eq!(kh.check("web2.example.com", 22, &ed), Verdict::Unknown);
        assert_eq!(kh.check("db", 2200, &ed), Verdict::Known { line: 5 });
        assert_eq!(kh.check("db", 22, &rsa), Verdict::Known { line: 6 });
        assert_eq!(kh.check("db", 22, &ed), Verdict::OtherTypes { types: vec!["ssh-rsa".into()] });
        assert_eq!(kh.check("x.wild.org", 22, &ed), Verdict::Known { line: 7 });
        assert_eq!(kh.check("bad.wild.org", 22, &ed), Verdict::Unknown);
        assert_eq!(kh.check("wild.org", 22, &ed), Verdict::Unknown);
        assert_eq!(kh.check("web1.example.com", 22, &blob("ssh-ed25519", b"Z")), Verdict::Changed { line: 3 });
        // revoked everywhere, even where the host has no entry
        assert_eq!(kh.check("web1.example.com", 22, &ed2), Verdict::Revoked { line: 9 });
        assert_eq!(kh.check("elsewhere", 22, &ed2), Verdict::Revoked { line: 9 });
        // a cert-authority line trusts nothing
        assert_eq!(kh.check("anything", 22, &blob("ssh-rsa", b"Q")), Verdict::Unknown);
        assert_eq!(kh.known_types("db", 22), vec!["ssh-rsa".to_string()]);
        assert_eq!(kh.known_types("nowhere", 22), Vec::<String>::new());
    }

    #[test]
    fn preference_puts_known_types_first() {
        assert!(host_key_preference(&[]).starts_with("ssh-ed25519,"));
        assert!(!host_key_preference(&[]).contains("ssh-rsa,"));
        let p = host_key_preference(&["ssh-rsa".into(), "ecdsa-sha2-nistp256".into()]);
        assert!(p.starts_with("rsa-sha2-512,rsa-sha2-256,ssh-rsa,ecdsa-sha2-nistp256,ssh-ed25519"), "{p}");
    }

    #[test]
    fn wildcards() {
        for (p, n, want) in
            [("*", "a", true), ("a?c", "abc", true), ("a?c", "ac", false), ("*.x", "a.b.x", true), ("*.x", "x", false), ("[a]:22*", "[a]:2222", true)]
        {
            assert_eq!(wildcard(p.as_bytes(), n.as_bytes()), want, "{p} {n}");
        }
    }

    #[test]
    fn record_appends_once_and_refuses_conflicts() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("known_hosts");
        let ed = blob("ssh-ed25519", b"A");
        assert_eq!(record(&path, "h", 2222, &ed), Ok(Recorded::Added));
        assert_eq!(record(&path, "h", 2222, &ed), Ok(Recorded::AlreadyKnown));
        assert_eq!(std::fs::metadata(&path).unwrap().permissions().mode() & 0o777, 0o600);
        let text = std::fs::read_to_string(&path).unwrap();
        assert_eq!(text.lines().count(), 1);
        assert!(text.starts_with("[h]:2222 ssh-ed25519 "), "{text}");
        assert_eq!(KnownHosts::load(&path).unwrap().check("h", 2222, &ed), Verdict::Known { line: 1 });
        let changed = record(&path, "h", 2222, &blob("ssh-ed25519", b"B")).unwrap_err();
        assert_eq!(changed, KnownHostsError::Changed { path: path.clone(), now: Verdict::Changed { line: 1 } });
        assert_eq!(changed.to_string(), format!("{}: changed while connecting (Changed {{ line: 1 }}); nothing recorded", path.display()));
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o666)).unwrap();
        let too_open = SysError::TooOpen { mode: 0o666, forbidden: 0o022 };
        let refused = KnownHosts::load(&path).unwrap_err();
        assert_eq!(refused, KnownHostsError::Refused { path: path.clone(), why: too_open.clone() });
        assert_eq!(refused.to_string(), format!("{}: {too_open}: chmod go-w it (whoever can write it vouches for every server)", path.display()));
        let open = record(&path, "other", 22, &ed).unwrap_err();
        assert_eq!(open, KnownHostsError::OpenForWrite { path: path.clone(), why: too_open.clone() });
        assert_eq!(open.to_string(), format!("{}: cannot be opened for writing: {too_open}", path.display()));
    }
}
