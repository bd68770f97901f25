//! Destination safety (SSRF): resolve once, check every address, connect only there.
//!
//! An authorized request names a host; this module decides which addresses it may reach.
//! The host is resolved exactly once per request (an IP literal is used as is; a name goes
//! through a [`Lookup`], bounded by the request timeout). **Every** address in the answer
//! is classified; if any one is refused the whole request is refused with `SP_BLOCKED`
//! before a byte is sent (and before the credential is read). The checked addresses are
//! then handed to ureq through [`PinnedResolver`], which answers only for that host and
//! port, so ureq never looks the name up again: a second DNS answer (DNS rebinding) cannot
//! change the target.
//!
//! Hosts reach this module already normalised by the `url` crate (`http/url.rs`): decimal
//! `2130706433`, octal `0177.1`, hex `0x7f.1` and short `127.1` are all `127.0.0.1` by the
//! time the policy matches and this module checks.
//!
//! Which addresses are public, private or blocked is [`super::class`]'s to say (its
//! module docs have the table): every class is re-exported here.
//!
//!
//! `localhost` and names under `.localhost` never reach a resolver: they are the loopback
//! addresses `127.0.0.1` and `::1` (RFC 6761 section 6.3, [`localhost_addrs`]), here and
//! for SSH host addresses, so a static `sp` in an empty root (no `/etc/hosts`) reaches
//! them. They are loopback, so only a rule that names the host exactly reaches them.
//!
//! A lookup's ports are ignored: the addresses are used with the URL's port, which is the
//! one the policy matched.

use std::fmt;
use std::io;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr, ToSocketAddrs};
use std::sync::{mpsc, Arc, Mutex};
use std::time::Duration;

use ureq::http::Uri;
use ureq::unversioned::resolver::{ResolvedSocketAddrs, Resolver};
use ureq::unversioned::transport::NextTimeout;

pub use super::class::{classify, classify_v4, classify_v6, stays_on_host, Blocked, Class, Form, Private, Verdict};

/// Name resolution, pluggable so tests can inject answers. Called at most once per request,
/// from a helper thread (so the request timeout bounds it).
pub trait Lookup: Send + Sync + 'static {
    fn lookup(&self, host: &str, port: u16) -> io::Result<Vec<SocketAddr>>;
}

impl<F> Lookup for F
where
    F: Fn(&str, u16) -> io::Result<Vec<SocketAddr>> + Send + Sync + 'static,
{
    fn lookup(&self, host: &str, port: u16) -> io::Result<Vec<SocketAddr>> {
        self(host, port)
    }
}

/// RFC 6761 section 6.3: `localhost` and every name under `.localhost` are the loopback
/// addresses, answered here without asking any resolver (in an empty root with
/// no `/etc/hosts`, `getaddrinfo("localhost")` waits for DNS and fails). Case-insensitive,
/// with or without the trailing dot. IPv4 first: hosts without IPv6 try it first.
pub fn localhost_addrs(host: &str) -> Option<[IpAddr; 2]> {
    let name = host.strip_suffix('.').unwrap_or(host).to_ascii_lowercase();
    let special = name == "localhost" || (name.ends_with(".localhost") && !name.starts_with('.') && !name.contains(".."));
    special.then_some([IpAddr::V4(Ipv4Addr::LOCALHOST), IpAddr::V6(Ipv6Addr::LOCALHOST)])
}

/// Every lookup goes through here: the RFC 6761 names first ([`localhost_addrs`]), then
/// `lookup`. Used for HTTP destinations ([`resolve_and_check`]) and SSH host addresses.
pub fn lookup_host(lookup: &dyn Lookup, host: &str, port: u16) -> io::Result<Vec<SocketAddr>> {
    match localhost_addrs(host) {
        Some(ips) => Ok(ips.iter().map(|ip| SocketAddr::new(*ip, port)).collect()),
        None => lookup.lookup(host, port),
    }
}

/// The system resolver (`getaddrinfo` through std's `ToSocketAddrs`).
#[derive(Debug, Default, Clone, Copy)]
pub struct SystemLookup;

impl Lookup for SystemLookup {
    fn lookup(&self, host: &str, port: u16) -> io::Result<Vec<SocketAddr>> {
        Ok((host, port).to_socket_addrs()?.collect())
    }
}

/// Why a destination was not accepted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DestError {
    /// Refused by the address check: the message names the host and the class.
    Blocked(String),
    NotFound(String),
    Timeout(String),
    Failed(String),
}

impl fmt::Display for DestError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DestError::Blocked(m) | DestError::NotFound(m) | DestError::Timeout(m) | DestError::Failed(m) => f.write_str(m),
        }
    }
}

impl std::error::Error for DestError {}

/// A host and port whose every address passed the check. Only [`resolve_and_check`]
/// builds one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Checked {
    host: String,
    port: u16,
    addrs: Vec<SocketAddr>,
}

impl Checked {
    pub fn host(&self) -> &str {
        &self.host
    }
    pub fn port(&self) -> u16 {
        self.port
    }
    /// In the order the lookup gave them, without duplicates; never empty.
    pub fn addrs(&self) -> &[SocketAddr] {
        &self.addrs
    }
}

/// Checks every address; the first refused one (most restrictive class first) decides the
/// message. `literal`: the host is the address itself ("is" rather than "resolves to").
pub fn check(host: &str, literal: bool, ips: &[IpAddr], named_exactly: bool) -> Result<(), DestError> {
    let mut worst: Option<(IpAddr, Verdict)> = None;
    for ip in ips {
        let v = classify(*ip);
        let refused = match v.class {
            Class::Public => false,
            Class::Private(_) => !named_exactly,
            Class::Blocked(_) => true,
        };
        if refused && worst.is_none_or(|(_, w)| v.class.severity() > w.class.severity()) {
            worst = Some((*ip, v));
        }
    }
    let Some((ip, verdict)) = worst else { return Ok(()) };
    let verb = if literal { "is" } else { "resolves to" };
    let why = match verdict.class {
        Class::Blocked(_) => "such destinations are never reachable",
        _ => "private destinations are reachable only through an http.allow rule that names the host exactly (not a *. wildcard)",
    };
    log::warn!("blocked: {host} {verb} {ip} ({verdict})");
    Err(DestError::Blocked(format!("{host} {verb} {verdict}; {why}")))
}

/// Resolves the URL's host once (an IP literal as is; a name through `lookup`, within
/// `timeout`) and checks every address.
pub fn resolve_and_check(lookup: &Arc<dyn Lookup>, url: &url::Url, named_exactly: bool, timeout: Duration) -> Result<Checked, DestError> {
    let port = url.port_or_known_default().unwrap_or(0);
    // As the URL spells it, which is what ureq will ask the pinned resolver for
    // (`[::ffff:7f00:1]`, where `Ipv6Addr` would print `::ffff:127.0.0.1`).
    let host = url.host_str().unwrap_or_default().to_owned();
    let (literal, ips) = match url.host() {
        None => return Err(DestError::Failed("the URL has no host".into())),
        Some(url::Host::Ipv4(a)) => (true, vec![IpAddr::V4(a)]),
        Some(url::Host::Ipv6(a)) => (true, vec![IpAddr::V6(a)]),
        Some(url::Host::Domain(name)) => match localhost_addrs(name) {
            Some(loopback) => (false, loopback.to_vec()),
            None => (false, lookup_within(lookup, name, port, timeout)?),
        },
    };
    let mut unique: Vec<IpAddr> = Vec::with_capacity(ips.len());
    for ip in ips {
        if !unique.contains(&ip) {
            unique.push(ip);
        }
    }
    check(&host, literal, &unique, named_exactly)?;
    Ok(Checked { addrs: unique.into_iter().map(|ip| SocketAddr::new(ip, port)).collect(), host, port })
}

fn lookup_within(lookup: &Arc<dyn Lookup>, host: &str, port: u16, timeout: Duration) -> Result<Vec<IpAddr>, DestError> {
    let target = format!("{host}:{port}");
    let (tx, rx) = mpsc::sync_channel(1);
    let (l, h) = (lookup.clone(), host.to_owned());
    std::thread::Builder::new()
        .name("sp-lookup".into())
        .spawn(move || tx.send(l.lookup(&h, port)).ok())
        .map_err(|e| DestError::Failed(format!("{target}: could not start the lookup: {e}")))?;
    match rx.recv_timeout(timeout) {
        Ok(Ok(addrs)) if !addrs.is_empty() => Ok(addrs.into_iter().map(|a| a.ip()).collect()),
        Ok(Ok(_)) => Err(DestError::NotFound(format!("{target}: host not found"))),
        Ok(Err(e)) => {
            log::debug!("lookup of {host} failed: {e}");
            Err(DestError::NotFound(format!("{target}: host not found")))
        }
        Err(mpsc::RecvTimeoutError::Timeout) => Err(DestError::Timeout(format!("{target}: timed out resolving the host"))),
        Err(mpsc::RecvTimeoutError::Disconnected) => Err(DestError::Failed(format!("{target}: the lookup failed"))),
    }
}

/// What [`PinnedResolver`] answers: one checked destination at a time.
#[derive(Debug, Default)]
pub struct Pins {
    current: Option<Checked>,
    /// How many times ureq was handed addresses to connect to.
    pub dials: u64,
}

/// The error ureq reports when it asks for a host and port that was not checked.
#[derive(Debug)]
pub struct Unpinned(pub String);

impl fmt::Display for Unpinned {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} was not checked for this request", self.0)
    }
}

impl std::error::Error for Unpinned {}

/// ureq's resolver seam (`ureq::unversioned::resolver`, ureq `~3.5`): answers with the
/// checked addresses of the current request and refuses every other host or port. It
/// never looks anything up.
#[derive(Debug, Clone, Default)]
pub struct PinnedResolver {
    pins: Arc<Mutex<Pins>>,
}

impl PinnedResolver {
    pub fn new() -> PinnedResolver {
        PinnedResolver::default()
    }

    /// Pins `checked` for the next request (replacing the previous pin).
    pub fn pin(&self, checked: Checked) {
        self.lock().current = Some(checked);
    }

    pub fn unpin(&self) {
        self.lock().current = None;
    }

    pub fn dials(&self) -> u64 {
        self.lock().dials
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Pins> {
        self.pins.lock().unwrap_or_else(|e| e.into_inner())
    }
}

impl Resolver for PinnedResolver {
    fn resolve(&self, uri: &Uri, _config: &ureq::config::Config, _timeout: NextTimeout) -> Result<ResolvedSocketAddrs, ureq::Error> {
        let host = uri.host().unwrap_or_default();
        let port = uri.port_u16().or(match uri.scheme_str() {
            Some("http") => Some(80),
            Some("https") => Some(443),
            _ => None,
        });
        let mut pins = self.lock();
        let refuse = || ureq::Error::Io(io::Error::other(Unpinned(format!("{host}:{}", port.unwrap_or(0)))));
        let Some(checked) = pins.current.as_ref() else { return Err(refuse()) };
        if !checked.host.eq_ignore_ascii_case(host) || Some(checked.port) != port {
            return Err(refuse());
        }
        let mut out = self.empty();
        // ureq keeps at most 16; all of them were checked, the rest are not dialed.
        for a in &checked.addrs {
            if out.try_push(*a).is_err() {
                break;
            }
        }
        pins.dials += 1;
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ips(list: &[&str]) -> Vec<IpAddr> {
        list.iter().map(|s| s.parse().unwrap()).collect()
    }

    #[test]
    fn check_rules() {
        // private: only with exact naming
        assert!(check("db.corp", false, &ips(&["10.0.0.5"]), true).is_ok());
        let e = check("db.corp", false, &ips(&["10.0.0.5"]), false).unwrap_err();
        assert_eq!(
            e,
            DestError::Blocked("db.corp resolves to a private (RFC 1918) address; private destinations are reachable only through an http.allow rule that names the host exactly (not a *. wildcard)".into())
        );
        // always blocked, even named exactly
        let DestError::Blocked(m) = check("169.254.169.254", true, &ips(&["169.254.169.254"]), true).unwrap_err() else { panic!() };
        assert!(m.starts_with("169.254.169.254 is a link-local address; such destinations are never reachable"), "{m}");
        // every address counts, whatever its position
        assert!(check("x.test", false, &ips(&["192.0.2.1", "127.0.0.1"]), false).is_err());
        assert!(check("x.test", false, &ips(&["192.0.2.1", "2001:db8::1"]), false).is_ok());
        // the most restrictive class names the refusal
        let DestError::Blocked(m) = check("x.test", false, &ips(&["10.0.0.1", "fe80::1"]), true).unwrap_err() else { panic!() };
        assert!(m.contains("link-local"), "{m}");
    }

    fn literal(url: &str, exact: bool) -> Result<Checked, DestError> {
        let never: Arc<dyn Lookup> = Arc::new(|h: &str, _p: u16| -> io::Result<Vec<SocketAddr>> { panic!("looked up {h}") });
        resolve_and_check(&never, &url::Url::parse(url).unwrap(), exact, Duration::from_secs(1))
    }

    #[test]
    fn url_spellings_are_normalised_before_the_check() {
        for spelling in ["2130706433", "0177.1", "0x7f.1", "127.1", "0x7f000001", "017700000001", "127.0.1", "0x7F.0.0.1"] {
            let url = format!("http://{spelling}:8080/");
            let c = literal(&url, true).unwrap();
            assert_eq!((c.host(), c.addrs()), ("127.0.0.1", &["127.0.0.1:8080".parse().unwrap()][..]), "{spelling}");
            assert!(literal(&url, false).is_err(), "{spelling}");
        }
        for spelling in ["2852039166", "0251.0376.0251.0376", "0xa9.0xfe.0xa9.0xfe", "169.16689662", "0xa9fea9fe"] {
            let DestError::Blocked(m) = literal(&format!("http://{spelling}/"), true).unwrap_err() else { panic!() };
            assert!(m.starts_with("169.254.169.254 is a link-local address"), "{spelling}: {m}");
        }
        let c = literal("http://[::FFFF:127.0.0.1]:1/", true).unwrap();
        assert_eq!(c.host(), "[::ffff:7f00:1]");
        assert!(literal("https://[fe80::1]/", true).is_err());
        assert_eq!(literal("https://[::1]/", true).unwrap().addrs(), &["[::1]:443".parse().unwrap()][..]);
    }

    #[test]
    fn lookup_answers_are_deduplicated_and_use_the_url_port() {
        let l: Arc<dyn Lookup> = Arc::new(|_h: &str, _p: u16| -> io::Result<Vec<SocketAddr>> {
            Ok(vec!["127.0.0.1:1".parse().unwrap(), "127.0.0.1:2".parse().unwrap(), "[::1]:3".parse().unwrap()])
        });
        let c = resolve_and_check(&l, &url::Url::parse("http://a.test:8080/").unwrap(), true, Duration::from_secs(1)).unwrap();
        assert_eq!(c.addrs(), &["127.0.0.1:8080".parse().unwrap(), "[::1]:8080".parse().unwrap()][..]);
        let empty: Arc<dyn Lookup> = Arc::new(|_h: &str, _p: u16| -> io::Result<Vec<SocketAddr>> { Ok(vec![]) });
        let e = resolve_and_check(&empty, &url::Url::parse("http://a.test/").unwrap(), true, Duration::from_secs(1));
        assert_eq!(e, Err(DestError::NotFound("a.test:80: host not found".into())));
    }

    #[test]
    fn a_dest_error_displays_its_reason_and_is_a_std_error() {
        fn is_error<E: std::error::Error>(_: &E) {}
        let e = DestError::NotFound("a.test:80: host not found".into());
        is_error(&e);
        assert_eq!(e.to_string(), "a.test:80: host not found");
    }

    #[test]
    fn lookup_is_bounded_by_the_timeout() {
        let slow: Arc<dyn Lookup> = Arc::new(|_h: &str, _p: u16| -> io::Result<Vec<SocketAddr>> {
            std::thread::sleep(Duration::from_secs(5));
            Ok(vec!["127.0.0.1:1".parse().unwrap()])
        });
        let start = std::time::Instant::now();
        let e = resolve_and_check(&slow, &url::Url::parse("http://slow.test/").unwrap(), true, Duration::from_millis(100));
        assert!(matches!(e, Err(DestError::Timeout(_))), "{e:?}");
        assert!(start.elapsed() < Duration::from_secs(2));
    }

    #[test]
    fn resolver_answers_only_the_pin() {
        let r = PinnedResolver::new();
        let config = ureq::config::Config::default();
        let ask = |u: &str| r.resolve(&u.parse().unwrap(), &config, NextTimeout::default()).map(|a| a.to_vec());
        assert!(ask("http://a.test/").is_err(), "nothing pinned");
        r.pin(Checked { host: "a.test".into(), port: 80, addrs: vec!["127.0.0.1:80".parse().unwrap()] });
        assert_eq!(ask("http://A.test/x").unwrap(), vec!["127.0.0.1:80".parse::<SocketAddr>().unwrap()]);
        assert_eq!(ask("http://a.test:80/").unwrap().len(), 1);
        assert!(ask("https://a.test/").is_err(), "other port");
        assert!(ask("http://b.test/").is_err(), "other host");
        assert!(ask("http://a.test:81/").is_err(), "other port");
        assert_eq!(r.dials(), 2);
        r.pin(Checked { host: "[::ffff:7f00:1]".into(), port: 8080, addrs: vec!["[::ffff:7f00:1]:8080".parse().unwrap()] });
        assert_eq!(ask("http://[::ffff:7f00:1]:8080/").unwrap().len(), 1, "IPv6 hosts keep their brackets");
        assert!(ask("http://a.test/").is_err(), "the previous pin is gone");
        r.unpin();
        assert!(ask("http://[::ffff:7f00:1]:8080/").is_err());
    }
}
