//! Test-time TLS: a private CA generated per test run (rcgen) and a loopback HTTPS
//! server (rustls) in front of the ordinary [`TestServer`] request handling.
//! Nothing here ships: these are dev-dependencies.

use std::net::TcpStream;
use std::sync::Arc;

use rcgen::{BasicConstraints, CertificateParams, CertifiedIssuer, DnType, IsCa, KeyPair};
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};

use super::http_server::{Conn, TestServer};

/// A CA and a server certificate for 127.0.0.1, ::1 and localhost, signed by it.
pub struct Pki {
    /// The CA certificate, PEM: what `http.ca_file` points at.
    pub ca_pem: String,
    server: Arc<rustls::ServerConfig>,
}

pub fn pki(ca_name: &str) -> Pki {
    let mut ca_params = CertificateParams::new(Vec::<String>::new()).expect("CA params");
    ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca_params.distinguished_name.push(DnType::CommonName, ca_name);
    let ca = CertifiedIssuer::self_signed(ca_params, KeyPair::generate().expect("CA key")).expect("CA cert");
    let leaf_key = KeyPair::generate().expect("leaf key");
    let leaf_params = CertificateParams::new(vec!["127.0.0.1".to_string(), "::1".to_string(), "localhost".to_string()]).expect("leaf params");
    let leaf = leaf_params.signed_by(&leaf_key, &ca).expect("leaf cert");
    let chain = vec![CertificateDer::from(leaf.der().to_vec())];
    let key = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(leaf_key.serialize_der()));
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let server = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .expect("protocol versions")
        .with_no_client_auth()
        .with_single_cert(chain, key)
        .expect("server config");
    Pki { ca_pem: ca.pem(), server: Arc::new(server) }
}

/// An HTTPS server on 127.0.0.1 presenting the [`Pki`]'s server certificate. Requests
/// are recorded and answered exactly as by [`TestServer::start`]; a connection whose
/// handshake fails is counted as accepted and never reaches request handling.
pub fn https_server(pki: &Pki) -> TestServer {
    let config = pki.server.clone();
    TestServer::start_wrapped(Arc::new(move |tcp: TcpStream| {
        let conn = rustls::ServerConnection::new(config.clone()).map_err(std::io::Error::other)?;
        let mut tls = rustls::StreamOwned::new(conn, tcp);
        // Finish the handshake here so a client that rejects the certificate never
        // counts as a request.
        while tls.conn.is_handshaking() {
            tls.conn.complete_io(&mut tls.sock)?;
        }
        Ok(Box::new(tls) as Box<dyn Conn>)
    }))
}
