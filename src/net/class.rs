//! The class of an address: what the destination check ([`super::dest::check`]) decides
//! on. Pure functions of an `IpAddr`; no lookup, no I/O.
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

use std::fmt;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

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
    /// Public 0, private 1, blocked 2: the most restrictive class decides a refusal.
    pub(crate) fn severity(self) -> u8 {
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
        let readings = [v4([b[6], b[7], b[9], b[10]]), v4([b[7], b[9], b[10], b[11]]), v4([b[9], b[10], b[11], b[12]]), tail];
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

    #[test]
    fn on_host() {
        for ip in ["127.0.0.1", "127.9.9.9", "::1", "::ffff:127.0.0.1", "0.0.0.0", "::"] {
            assert!(stays_on_host(ip.parse().unwrap()), "{ip}");
        }
        for ip in ["10.0.0.1", "192.0.2.1", "64:ff9b::7f00:1", "::127.0.0.1", "169.254.169.254"] {
            assert!(!stays_on_host(ip.parse().unwrap()), "{ip}");
        }
    }
}
