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
//! # Address classes
//!
//! **Always blocked**, whatever the policy says:
//!
//! | class | ranges |
//! |---|---|
//! | unspecified | `0.0.0.0/8` ("this network"), `::` |
//! | link-local | `169.254.0.0/16`, `fe80::/10` (the cloud metadata services live here) |
//! | cloud metadata | `fd00:ec2::254` (AWS), `fd20:ce::254` (GCP), `100.100.100.200` (Alibaba), `168.63.129.16` (Azure WireServer) |
//! | multicast | `224.0.0.0/4`, `ff00::/8` |
//! | broadcast | `255.255.255.255` |
//! | reserved | `240.0.0.0/4` (future use), `192.0.0.0/24` (IETF protocol assignments: DS-Lite, NAT64 discovery, PCP/TURN anycast), `100::/64` (discard-only) |
//!
//! **Private**, reachable only when an `http.allow` rule that permits the request names
//! the host exactly (no `*.` wildcard; any such rule, not only the first match;
//! `HttpAction::host_named_exactly`):
//!
//! | class | ranges |
//! |---|---|
//! | loopback | `127.0.0.0/8`, `::1` |
//! | private (RFC 1918) | `10.0.0.0/8`, `172.16.0.0/12`, `192.168.0.0/16` |
//! | shared (CGNAT) | `100.64.0.0/10` |
//! | unique-local | `fc00::/7` |
//! | site-local | `fec0::/10` (deprecated, still private in meaning) |
//!
//! **IPv6 forms that carry an IPv4 address are classified by that address**: IPv4-mapped
//! `::ffff:a.b.c.d`, IPv4-compatible `::a.b.c.d` (except `::` and `::1` themselves),
//! IPv4-translated `::ffff:0:a.b.c.d`, NAT64 `64:ff9b::/96`, local-use NAT64
//! `64:ff9b:1::/48`, 6to4 `2002::/16` and Teredo `2001::/32`. Where the position of the
//! IPv4 address is not fixed (local-use NAT64 can use a /48, /56, /64 or /96 prefix; Teredo
//! carries a server and an obfuscated client address) every reading is classified and the
//! most restrictive wins. Translators ignore the suffix bits (RFC 6052), so those are not
//! used to rule a reading out; the price is that a network whose own NAT64 prefix lies
//! inside `64:ff9b:1::/48` with zero bits where a reading looks can find public
//! destinations blocked. Nobody else pays it.
//!
//! **Everything else is public**, including on purpose the documentation ranges
//! (`192.0.2.0/24`, `198.51.100.0/24`, `203.0.113.0/24`, `2001:db8::/32`) and benchmarking
//! `198.18.0.0/15`: they are not routed on the internet, so there is nothing behind them to
//! protect (and `198.18.0.0/15` is what "fake-IP" DNS proxies hand out for public names).
//! The tests use the documentation ranges as public answers that must never be dialed.
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
/// addresses, answered here without asking any resolver (issue 11: in an empty root with
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

/// Addresses that may never be reached.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Blocked {
    Unspecified,
    LinkLocal,
    Metadata,
    Multicast,
    Broadcast,
    Reserved,
}

/// Addresses reachable only through a rule that names the host exactly.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Private {
    Loopback,
    Rfc1918,
    Cgnat,
    UniqueLocal,
    SiteLocal,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Class {
    Public,
    Private(Private),
    Blocked(Blocked),
}

impl Class {
    fn severity(self) -> u8 {
        match self {
            Class::Public => 0,
            Class::Private(_) => 1,
            Class::Blocked(_) => 2,
        }
    }

    /// With its article: "a link-local address".
    pub fn describe(self) -> &'static str {
        match self {
            Class::Public => "a public address",
            Class::Blocked(Blocked::Unspecified) => "an unspecified address",
            Class::Blocked(Blocked::LinkLocal) => "a link-local address",
            Class::Blocked(Blocked::Metadata) => "a cloud metadata address",
            Class::Blocked(Blocked::Multicast) => "a multicast address",
            Class::Blocked(Blocked::Broadcast) => "a broadcast address",
            Class::Blocked(Blocked::Reserved) => "a reserved address",
            Class::Private(Private::Loopback) => "a loopback address",
            Class::Private(Private::Rfc1918) => "a private (RFC 1918) address",
            Class::Private(Private::Cgnat) => "a shared (CGNAT) address",
            Class::Private(Private::UniqueLocal) => "a unique-local address",
            Class::Private(Private::SiteLocal) => "a site-local address",
        }
    }
}

/// An IPv6 form that carries an IPv4 address.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Form {
    Mapped,
    Compatible,
    Translated,
    Nat64,
    SixToFour,
    Teredo,
}

impl Form {
    fn describe(self) -> &'static str {
        match self {
            Form::Mapped => "IPv4-mapped IPv6",
            Form::Compatible => "IPv4-compatible IPv6",
            Form::Translated => "IPv4-translated IPv6",
            Form::Nat64 => "NAT64",
            Form::SixToFour => "6to4",
            Form::Teredo => "Teredo",
        }
    }
}

/// The class of one address, and the IPv6 form it was found in, if any.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Verdict {
    pub class: Class,
    pub form: Option<Form>,
}

impl fmt::Display for Verdict {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.class.describe())?;
        if let Some(form) = self.form {
            write!(f, " in {} form", form.describe())?;
        }
        Ok(())
    }
}

pub fn classify(ip: IpAddr) -> Verdict {
    match ip {
        IpAddr::V4(a) => Verdict { class: classify_v4(a), form: None },
        IpAddr::V6(a) => classify_v6(a),
    }
}

pub fn classify_v4(a: Ipv4Addr) -> Class {
    let o = a.octets();
    let u = u32::from(a);
    let within = |net: u32, bits: u32| (u ^ net) >> (32 - bits) == 0;
    if matches!(o, [100, 100, 100, 200] | [168, 63, 129, 16]) {
        Class::Blocked(Blocked::Metadata)
    } else if o[0] == 0 {
        Class::Blocked(Blocked::Unspecified)
    } else if o[0] == 127 {
        Class::Private(Private::Loopback)
    } else if o[0] == 10 || within(0xac10_0000, 12) || within(0xc0a8_0000, 16) {
        Class::Private(Private::Rfc1918)
    } else if within(0x6440_0000, 10) {
        Class::Private(Private::Cgnat)
    } else if within(0xa9fe_0000, 16) {
        Class::Blocked(Blocked::LinkLocal)
    } else if within(0xc000_0000, 24) {
        Class::Blocked(Blocked::Reserved)
    } else if within(0xe000_0000, 4) {
        Class::Blocked(Blocked::Multicast)
    } else if u == u32::MAX {
        Class::Blocked(Blocked::Broadcast)
    } else if within(0xf000_0000, 4) {
        Class::Blocked(Blocked::Reserved)
    } else {
        Class::Public
    }
}

fn v4(b: [u8; 4]) -> Ipv4Addr {
    Ipv4Addr::from(b)
}

/// The first of the most restrictive classes.
fn most_restrictive(candidates: impl IntoIterator<Item = Ipv4Addr>) -> Class {
    candidates.into_iter().map(classify_v4).fold(Class::Public, |worst, c| if c.severity() > worst.severity() { c } else { worst })
}

pub fn classify_v6(a: Ipv6Addr) -> Verdict {
    let s = a.segments();
    let b = a.octets();
    let embedded = |class: Class, form: Form| Verdict { class, form: Some(form) };
    let plain = |class: Class| Verdict { class, form: None };
    let tail = v4([b[12], b[13], b[14], b[15]]);
    if let Some(m) = a.to_ipv4_mapped() {
        return embedded(classify_v4(m), Form::Mapped);
    }
    if a.is_unspecified() {
        return plain(Class::Blocked(Blocked::Unspecified));
    }
    if a.is_loopback() {
        return plain(Class::Private(Private::Loopback));
    }
    if s[..6] == [0; 6] {
        return embedded(classify_v4(tail), Form::Compatible);
    }
    if s[..4] == [0; 4] && s[4] == 0xffff && s[5] == 0 {
        return embedded(classify_v4(tail), Form::Translated);
    }
    if s[..6] == [0x64, 0xff9b, 0, 0, 0, 0] {
        return embedded(classify_v4(tail), Form::Nat64);
    }
    if s[..3] == [0x64, 0xff9b, 1] {
        // RFC 6052 layouts for a /48, /56, /64 and /96 prefix (bits 64..72 skipped).
        let readings = [
            v4([b[6], b[7], b[9], b[10]]),
            v4([b[7], b[9], b[10], b[11]]),
            v4([b[9], b[10], b[11], b[12]]),
            tail,
        ];
        return embedded(most_restrictive(readings), Form::Nat64);
    }
    if s[0] == 0x2002 {
        return embedded(classify_v4(v4([b[2], b[3], b[4], b[5]])), Form::SixToFour);
    }
    if s[..2] == [0x2001, 0] {
        let server = v4([b[4], b[5], b[6], b[7]]);
        let client = v4([!b[12], !b[13], !b[14], !b[15]]);
        return embedded(most_restrictive([server, client]), Form::Teredo);
    }
    let class = if a == Ipv6Addr::new(0xfd00, 0xec2, 0, 0, 0, 0, 0, 0x254) || a == Ipv6Addr::new(0xfd20, 0xce, 0, 0, 0, 0, 0, 0x254) {
        Class::Blocked(Blocked::Metadata)
    } else if s[0] & 0xffc0 == 0xfe80 {
        Class::Blocked(Blocked::LinkLocal)
    } else if s[0] & 0xffc0 == 0xfec0 {
        Class::Private(Private::SiteLocal)
    } else if s[0] & 0xfe00 == 0xfc00 {
        Class::Private(Private::UniqueLocal)
    } else if s[0] & 0xff00 == 0xff00 {
        Class::Blocked(Blocked::Multicast)
    } else if s[..4] == [0x100, 0, 0, 0] {
        Class::Blocked(Blocked::Reserved)
    } else {
        Class::Public
    };
    plain(class)
}

/// Addresses that never leave this host when dialed (loopback, unspecified, and their
/// IPv4-mapped forms). The tests restrict dialing to these.
pub fn stays_on_host(ip: IpAddr) -> bool {
    let ip = match ip {
        IpAddr::V6(a) => a.to_ipv4_mapped().map_or(ip, IpAddr::V4),
        v4 => v4,
    };
    ip.is_loopback() || ip.is_unspecified() || matches!(ip, IpAddr::V4(a) if a.octets()[0] == 0)
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
pub fn resolve_and_check(
    lookup: &Arc<dyn Lookup>,
    url: &url::Url,
    named_exactly: bool,
    timeout: Duration,
) -> Result<Checked, DestError> {
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

    fn class(s: &str) -> Class {
        classify(s.parse().unwrap()).class
    }

    const LOOP: Class = Class::Private(Private::Loopback);
    const RFC: Class = Class::Private(Private::Rfc1918);
    const CGNAT: Class = Class::Private(Private::Cgnat);
    const ULA: Class = Class::Private(Private::UniqueLocal);
    const LL: Class = Class::Blocked(Blocked::LinkLocal);
    const META: Class = Class::Blocked(Blocked::Metadata);
    const UNSPEC: Class = Class::Blocked(Blocked::Unspecified);
    const MCAST: Class = Class::Blocked(Blocked::Multicast);
    const RES: Class = Class::Blocked(Blocked::Reserved);
    const PUB: Class = Class::Public;

    #[test]
    fn ipv4_classes() {
        let cases = [
            ("0.0.0.0", UNSPEC),
            ("0.255.255.255", UNSPEC),
            ("1.1.1.1", PUB),
            ("8.8.8.8", PUB),
            ("9.255.255.255", PUB),
            ("10.0.0.0", RFC),
            ("10.255.255.255", RFC),
            ("11.0.0.0", PUB),
            ("100.63.255.255", PUB),
            ("100.64.0.0", CGNAT),
            ("100.127.255.255", CGNAT),
            ("100.128.0.0", PUB),
            ("100.100.100.200", META),
            ("126.255.255.255", PUB),
            ("127.0.0.1", LOOP),
            ("127.255.255.254", LOOP),
            ("128.0.0.0", PUB),
            ("168.63.129.16", META),
            ("169.253.255.255", PUB),
            ("169.254.0.0", LL),
            ("169.254.169.254", LL),
            ("169.254.170.2", LL),
            ("169.255.0.0", PUB),
            ("172.15.255.255", PUB),
            ("172.16.0.0", RFC),
            ("172.31.255.255", RFC),
            ("172.32.0.0", PUB),
            ("192.0.0.0", RES),
            ("192.0.0.170", RES),
            ("192.0.1.0", PUB),
            ("192.0.2.1", PUB),
            ("198.18.0.1", PUB),
            ("198.51.100.7", PUB),
            ("203.0.113.9", PUB),
            ("192.167.255.255", PUB),
            ("192.168.0.0", RFC),
            ("192.168.255.255", RFC),
            ("192.169.0.0", PUB),
            ("223.255.255.255", PUB),
            ("224.0.0.0", MCAST),
            ("224.0.0.1", MCAST),
            ("239.255.255.255", MCAST),
            ("240.0.0.0", RES),
            ("254.255.255.255", RES),
            ("255.255.255.254", RES),
            ("255.255.255.255", Class::Blocked(Blocked::Broadcast)),
        ];
        for (ip, want) in cases {
            assert_eq!(class(ip), want, "{ip}");
        }
    }

    #[test]
    fn ipv6_classes() {
        let cases = [
            ("::", UNSPEC),
            ("::1", LOOP),
            ("::2", UNSPEC), // IPv4-compatible 0.0.0.2
            ("2606:4700:4700::1111", PUB),
            ("2001:db8::1", PUB),
            ("fe80::1", LL),
            ("febf:ffff::1", LL),
            ("fec0::1", Class::Private(Private::SiteLocal)),
            ("fc00::1", ULA),
            ("fdff:ffff::1", ULA),
            ("fd00:ec2::254", META),
            ("fd00:ec2::253", ULA),
            ("fd20:ce::254", META),
            ("ff00::", MCAST),
            ("ff02::1", MCAST),
            ("100::1", RES),
            ("100:0:0:1::1", PUB),
            // IPv4-mapped
            ("::ffff:127.0.0.1", LOOP),
            ("::ffff:7f00:1", LOOP),
            ("::ffff:169.254.169.254", LL),
            ("::ffff:10.1.2.3", RFC),
            ("::ffff:0.0.0.0", UNSPEC),
            ("::ffff:8.8.8.8", PUB),
            ("::ffff:255.255.255.255", Class::Blocked(Blocked::Broadcast)),
            // IPv4-compatible
            ("::127.0.0.1", LOOP),
            ("::169.254.169.254", LL),
            ("::8.8.8.8", PUB),
            // IPv4-translated (SIIT)
            ("::ffff:0:127.0.0.1", LOOP),
            ("::ffff:0:169.254.169.254", LL),
            // NAT64 well-known prefix
            ("64:ff9b::7f00:1", LOOP),
            ("64:ff9b::169.254.169.254", LL),
            ("64:ff9b::192.168.1.1", RFC),
            ("64:ff9b::8.8.8.8", PUB),
            ("64:ff9b::e000:1", MCAST),
            // local-use NAT64: every layout is read, the most restrictive wins; with zero
            // prefix bits the /48 reading is 0.0.0.0 (the documented over-blocking)
            ("64:ff9b:1::a9fe:a9fe", UNSPEC),
            ("64:ff9b:1:808:8:808:a9fe:a9fe", LL),
            ("64:ff9b:1:a9fe:a9:fe00:808:808", LL),
            ("64:ff9b:1::", UNSPEC),
            ("64:ff9b:1:a01:1:108:808:808", RFC),
            ("64:ff9b:1:808:8:808:808:808", PUB),
            // 6to4
            ("2002:7f00:1::", LOOP),
            ("2002:a9fe:a9fe::1", LL),
            ("2002:808:808::1", PUB),
            // Teredo: server 65.54.227.120, client obfuscated
            ("2001:0:4136:e378:8000:63bf:3fff:fdd2", PUB),
            ("2001:0:a9fe:a9fe::", LL),
            ("2001:0:4136:e378::80ff:fffe", LOOP), // client !80ff:fffe = 127.0.0.1
        ];
        for (ip, want) in cases {
            assert_eq!(class(ip), want, "{ip}");
        }
    }

    #[test]
    fn forms_are_named() {
        let v = classify("::ffff:127.0.0.1".parse().unwrap());
        assert_eq!(v.to_string(), "a loopback address in IPv4-mapped IPv6 form");
        let v = classify("64:ff9b::a9fe:a9fe".parse().unwrap());
        assert_eq!(v.to_string(), "a link-local address in NAT64 form");
        assert_eq!(classify("169.254.169.254".parse().unwrap()).to_string(), "a link-local address");
    }

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
        let DestError::Blocked(m) = check("169.254.169.254", true, &ips(&["169.254.169.254"]), true).unwrap_err() else {
            panic!()
        };
        assert!(m.starts_with("169.254.169.254 is a link-local address; such destinations are never reachable"), "{m}");
        // every address counts, whatever its position
        assert!(check("x.test", false, &ips(&["192.0.2.1", "127.0.0.1"]), false).is_err());
        assert!(check("x.test", false, &ips(&["192.0.2.1", "2001:db8::1"]), false).is_ok());
        // the most restrictive class names the refusal
        let DestError::Blocked(m) = check("x.test", false, &ips(&["10.0.0.1", "fe80::1"]), true).unwrap_err() else {
            panic!()
        };
        assert!(m.contains("link-local"), "{m}");
    }

    #[test]
    fn on_host() {
        for ip in ["127.0.0.1", "127.9.9.9", "::1", "::ffff:127.0.0.1", "0.0.0.0", "::"] {
            assert!(stays_on_host(ip.parse().unwrap()), "{ip}");
        }
        for ip in ["10.0.0.1", "192.0.2.1", "64:ff9b::7f00:1", "::127.0.0.1", "169.254.169.254"] {
            assert!(!stays_on_host(ip.parse().unwrap()), "{ip}");
        }
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
