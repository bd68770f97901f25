//! Compressed response bodies through the built `sp mcp` against a real HTTP server on
//! loopback (`support::http_server`): whatever the headers claim, a body whose
//! compressed content holds the credential's secret never reaches the agent. A
//! declared gzip or deflate coding is decoded and scrubbed like any body; compressed
//! content under no declared coding is searched and withheld when the secret is inside
//! or when it cannot be searched (`src/http/coding.rs`).
//!
//! Attacks tried (each a route below; none passed the secret):
//! - gzip as `application/gzip` without `Content-Encoding`, zlib as
//!   `application/octet-stream`, `Content-Encoding: IDENTITY` over gzip: withheld;
//! - `Content-Encoding: GZIP` and `Deflate` (upper and mixed case): decoded, then the
//!   echo is scrubbed as in a plain body;
//! - gzip inside gzip, a second gzip member after a clean one, a zip entry: withheld;
//! - zstd (not decoded by sp), `Content-Encoding: br`: withheld, cannot be searched;
//! - a bomb (a few KB of gzip that decompress to 8 MiB with the secret at the end),
//!   undeclared: withheld past `max_response_bytes`; declared: decoded up to the limit,
//!   `truncated`, the secret beyond it never decoded;
//! - clean gzip as `application/gzip`: passed on as the bytes it was (`body_base64`);
//! - gzip whose only block is stored (the secret literal in the bytes): scrubbed in
//!   place before the search, so what decodes holds the marker, not the secret.
#![allow(
    clippy::disallowed_methods,
    reason = "tests and benchmarks start sp, sshd and clients and read their environment; the fence in clippy.toml is for src/"
)]

use crate::support;

use std::io::Write as _;

use base64::Engine as _;
use flate2::write::{DeflateEncoder, GzEncoder, ZlibEncoder};
use flate2::Compression;
use serde_json::{json, Value};

use support::http_server::{Recorded, Reply, TestServer};
use support::process::{canary, Launch, Session, TempDir};

const LIMIT: u64 = 64 * 1024;

fn gzip(b: &[u8]) -> Vec<u8> {
    let mut e = GzEncoder::new(Vec::new(), Compression::default());
    e.write_all(b).unwrap();
    e.finish().unwrap()
}

fn zlib(b: &[u8]) -> Vec<u8> {
    let mut e = ZlibEncoder::new(Vec::new(), Compression::default());
    e.write_all(b).unwrap();
    e.finish().unwrap()
}

fn deflate(b: &[u8]) -> Vec<u8> {
    let mut e = DeflateEncoder::new(Vec::new(), Compression::default());
    e.write_all(b).unwrap();
    e.finish().unwrap()
}

/// A zip with one deflated entry (local file header and data).
fn zip(data: &[u8]) -> Vec<u8> {
    let packed = deflate(data);
    let mut z = b"PK\x03\x04\x14\x00\x00\x00\x08\x00".to_vec();
    z.extend_from_slice(&[0; 8]);
    z.extend_from_slice(&(packed.len() as u32).to_le_bytes());
    z.extend_from_slice(&(data.len() as u32).to_le_bytes());
    z.extend_from_slice(&5u16.to_le_bytes());
    z.extend_from_slice(&0u16.to_le_bytes());
    z.extend_from_slice(b"a.txt");
    z.extend_from_slice(&packed);
    z
}

fn reply(headers: &[(&str, &str)], body: Vec<u8>) -> Reply {
    Reply { status: 200, headers: headers.iter().map(|(n, v)| (n.to_string(), v.to_string())).collect(), body, delay_ms: 0 }
}

/// What each route sends, computed from the request's `Authorization` (the echo). The
/// echo is padded so deflate codes it (a short input is sent as a stored block, where
/// the secret stays literal and is scrubbed in place: `/v1/stored`).
fn answer(path: &str, header: &[u8]) -> Reply {
    let padded = [header, b" ", &b"padding ".repeat(40)].concat();
    let echo = &padded[..];
    let echo_json = |e: &[u8]| format!("{{\"echo\":\"{}\"}}", String::from_utf8_lossy(e)).into_bytes();
    let bomb = |e: &[u8]| [vec![0u8; 8 << 20], e.to_vec()].concat();
    match path {
        "/v1/gzip-file" => reply(&[("Content-Type", "application/gzip")], gzip(echo)),
        "/v1/zlib-octets" => reply(&[("Content-Type", "application/octet-stream")], zlib(echo)),
        "/v1/identity" => reply(&[("Content-Encoding", "IDENTITY")], gzip(echo)),
        "/v1/declared-gzip" => reply(&[("Content-Type", "application/json"), ("CONTENT-ENCODING", "GZIP")], gzip(&echo_json(echo))),
        "/v1/declared-deflate" => reply(&[("Content-Type", "application/json"), ("Content-Encoding", "Deflate")], zlib(&echo_json(echo))),
        "/v1/nested" => reply(&[("Content-Type", "application/gzip")], gzip(&gzip(echo))),
        "/v1/members" => reply(&[], [gzip(b"clean first member"), gzip(echo)].concat()),
        "/v1/zip" => reply(&[("Content-Type", "application/zip")], zip(echo)),
        "/v1/zstd" => reply(&[("Content-Type", "application/zstd")], [&[0x28, 0xb5, 0x2f, 0xfd][..], echo].concat()),
        "/v1/brotli" => reply(&[("Content-Encoding", "br")], [&[0x8b, 0xff][..], echo].concat()),
        "/v1/bomb" => reply(&[("Content-Type", "application/gzip")], gzip(&bomb(echo))),
        "/v1/declared-bomb" => reply(&[("Content-Encoding", "gzip")], gzip(&bomb(echo))),
        "/v1/clean" => reply(&[("Content-Type", "application/gzip")], gzip(b"nothing secret")),
        "/v1/stored" => {
            let mut e = GzEncoder::new(Vec::new(), Compression::none());
            e.write_all(header).unwrap();
            reply(&[("Content-Type", "application/gzip")], e.finish().unwrap())
        }
        _ => Reply::text(404, "no such route"),
    }
}

const ROUTES: &[&str] = &[
    "/v1/gzip-file",
    "/v1/zlib-octets",
    "/v1/identity",
    "/v1/declared-gzip",
    "/v1/declared-deflate",
    "/v1/nested",
    "/v1/members",
    "/v1/zip",
    "/v1/zstd",
    "/v1/brotli",
    "/v1/bomb",
    "/v1/declared-bomb",
    "/v1/clean",
    "/v1/stored",
];

#[test]
fn compressed_echoes_of_the_secret_never_reach_the_agent() {
    let server = TestServer::start();
    for route in ROUTES {
        let path = route.to_string();
        server.handle(route, move |r: &Recorded| answer(&path, r.header("authorization").unwrap_or_default().as_bytes()));
    }
    let dir = TempDir::new("compressed");
    let secret = canary();
    let token = dir.file("api.token", secret.as_bytes(), 0o600);
    let host = format!("127.0.0.1:{}", server.port);
    let policy = json!({
        "credentials": {"api": {"source": {"file": token.display().to_string()}, "inject": {"bearer": {}}, "hosts": [host], "paths": ["/v1/*"]}},
        "http": {"allow": [{"hosts": [host], "methods": ["GET"]}], "max_response_bytes": LIMIT}
    });
    let policy = dir.file("policy.json", policy.to_string().as_bytes(), 0o600);
    let mut s = Session::start(Launch::mcp(&policy, &[]));
    s.ready("2025-06-18");
    let mut results = Vec::new();
    for (id, route) in ROUTES.iter().enumerate() {
        let r = s.tool(id as i64 + 1, "http_request", json!({"method": "GET", "url": format!("http://{host}{route}")}));
        assert_eq!(r["isError"], false, "{route}: {r}");
        results.push((route, r["structuredContent"].clone()));
    }
    let run = s.finish();
    let out = String::from_utf8_lossy(&run.stdout);
    assert!(!out.contains(&secret), "the secret reached the agent\n{}", run.context());

    let withheld =
        |coding: &str| format!("the response body is {coding} data that holds the secret of credential \"api\" once decompressed, so it is withheld");
    let b64 = |b: &[u8]| base64::engine::general_purpose::STANDARD.encode(b);
    for (route, sc) in results {
        let body_withheld = sc.get("body_withheld").and_then(Value::as_str).map(str::to_owned);
        match *route {
            "/v1/gzip-file" | "/v1/identity" | "/v1/nested" | "/v1/members" => assert_eq!(body_withheld, Some(withheld("gzip")), "{route}: {sc}"),
            "/v1/zlib-octets" => assert_eq!(body_withheld, Some(withheld("zlib")), "{route}: {sc}"),
            "/v1/zip" => assert_eq!(body_withheld, Some(withheld("zip")), "{route}: {sc}"),
            "/v1/zstd" => assert_eq!(
                body_withheld.as_deref(),
                Some("the response body holds zstd data, which sp cannot decompress to search for secrets, so it is withheld"),
                "{route}: {sc}"
            ),
            "/v1/brotli" => assert_eq!(
                body_withheld.as_deref(),
                Some("the response body is compressed (br) in a way sp cannot decode, so it cannot be searched for secrets and is withheld"),
                "{route}: {sc}"
            ),
            "/v1/bomb" => assert_eq!(
                body_withheld.as_deref(),
                Some(
                    "the response body is gzip data that decompresses to more than max_response_bytes (65536), so it cannot be searched for secrets and is withheld"
                ),
                "{route}: {sc}"
            ),
            "/v1/declared-gzip" | "/v1/declared-deflate" => {
                // Decoded like a browser would, then scrubbed; the wire headers are gone.
                assert_eq!(sc["json"], json!({"echo": format!("Bearer [REDACTED:api] {}", "padding ".repeat(40))}), "{route}: {sc}");
                assert_eq!(sc["headers"], json!({"content-type": "application/json", "connection": "close"}), "{route}: {sc}");
                assert_eq!(sc["truncated"], false, "{route}: {sc}");
            }
            "/v1/declared-bomb" => {
                assert_eq!((sc["truncated"].as_bool(), sc["body"].as_str().map(str::len)), (Some(true), Some(LIMIT as usize)), "{route}");
                assert!(sc["body"].as_str().unwrap().bytes().all(|b| b == 0), "{route}");
            }
            "/v1/clean" => assert_eq!(sc["body_base64"].as_str(), Some(b64(&gzip(b"nothing secret")).as_str()), "{route}: {sc}"),
            "/v1/stored" => {
                // The literal secret inside the stored block was scrubbed in place.
                let bytes = base64::engine::general_purpose::STANDARD.decode(sc["body_base64"].as_str().unwrap()).unwrap();
                assert!(bytes.windows(14).any(|w| w == b"[REDACTED:api]"), "{route}: {sc}");
            }
            other => panic!("{other}"),
        }
    }
}

/// Before any secret is read there is nothing to find: compressed bodies pass as they
/// came (an undecodable declared coding too), so a session that never used a credential
/// is not denied its downloads.
#[test]
fn without_a_secret_read_compressed_bodies_pass_as_bytes() {
    let server = TestServer::start();
    let gz = gzip(b"archive");
    server.route("/open/a.gz", reply(&[("Content-Type", "application/gzip")], gz.clone()));
    server.route("/open/br", reply(&[("Content-Encoding", "br")], vec![0x8b, 0xff, 0x01]));
    let dir = TempDir::new("compressed-open");
    let host = format!("127.0.0.1:{}", server.port);
    let policy = json!({"http": {"allow": [{"hosts": [host], "methods": ["GET"]}]}});
    let policy = dir.file("policy.json", policy.to_string().as_bytes(), 0o600);
    let mut s = Session::start(Launch::mcp(&policy, &[]));
    s.ready("2025-06-18");
    let b64 = |b: &[u8]| base64::engine::general_purpose::STANDARD.encode(b);
    let r = s.tool(1, "http_request", json!({"method": "GET", "url": format!("http://{host}/open/a.gz")}));
    assert_eq!(r["structuredContent"]["body_base64"].as_str(), Some(b64(&gz).as_str()), "{r}");
    let r = s.tool(2, "http_request", json!({"method": "GET", "url": format!("http://{host}/open/br")}));
    assert_eq!(r["structuredContent"]["body_base64"].as_str(), Some(b64(&[0x8b, 0xff, 0x01]).as_str()), "{r}");
    s.finish();
}
