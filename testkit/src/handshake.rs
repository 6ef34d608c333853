//! Opens TLS handshakes restricted to chosen protocol versions and cipher suites, and reports
//! what the server agreed to: the prober behind the tests of the operator's TLS profile.
//!
//! A handshake here sends no request: it proves what a client limited this way can or cannot
//! negotiate. The server's certificate is trusted whatever it is (the listeners under test
//! serve a test CA's or a self-signed one), but the handshake's signatures are still checked.

use std::net::SocketAddr;
use std::sync::Arc;

use rustls::crypto::CryptoProvider;
use rustls::pki_types::ServerName;
use rustls::{CipherSuite, ProtocolVersion, SupportedCipherSuite, SupportedProtocolVersion};
use tokio::net::TcpStream;
use tokio_rustls::TlsConnector;

use crate::client::{AnyCertificate, SERVER_NAME};

/// What a handshake came to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Negotiated {
    /// The protocol version.
    pub version: ProtocolVersion,
    /// The cipher suite.
    pub suite: CipherSuite,
}

/// Every cipher suite the client side can offer (ring's).
pub fn all_suites() -> &'static [SupportedCipherSuite] {
    rustls::crypto::ring::ALL_CIPHER_SUITES
}

/// The suites of `version` among [`all_suites`].
pub fn suites_of(version: &SupportedProtocolVersion) -> Vec<SupportedCipherSuite> {
    all_suites()
        .iter()
        .filter(|suite| suite.version() == version)
        .copied()
        .collect()
}

/// Handshakes with `address` offering only `versions` and `suites`; returns what was agreed, or
/// the error (a refusal shows as a handshake failure alert).
///
/// # Errors
/// When the TCP connection or the handshake fails, or the client cannot be configured (no
/// suite of the versions offered).
pub async fn handshake(
    address: SocketAddr,
    versions: &[&'static SupportedProtocolVersion],
    suites: &[SupportedCipherSuite],
) -> Result<Negotiated, String> {
    let base = rustls::crypto::ring::default_provider();
    let provider = Arc::new(CryptoProvider {
        cipher_suites: suites.to_vec(),
        ..base
    });
    let mut config = rustls::ClientConfig::builder_with_provider(provider.clone())
        .with_protocol_versions(versions)
        .map_err(|error| format!("cannot configure the client: {error}"))?
        .dangerous()
        .with_custom_certificate_verifier(Arc::new(AnyCertificate(provider)))
        .with_no_client_auth();
    config.resumption = rustls::client::Resumption::disabled();
    let name = ServerName::try_from(SERVER_NAME).map_err(|error| error.to_string())?;
    let tcp = TcpStream::connect(address)
        .await
        .map_err(|error| format!("connect to {address}: {error}"))?;
    let tls = TlsConnector::from(Arc::new(config))
        .connect(name, tcp)
        .await
        .map_err(|error| format!("handshake with {address}: {error}"))?;
    let (_, connection) = tls.get_ref();
    match (
        connection.protocol_version(),
        connection.negotiated_cipher_suite(),
    ) {
        (Some(version), Some(suite)) => Ok(Negotiated {
            version,
            suite: suite.suite(),
        }),
        _ => Err(format!("handshake with {address}: nothing negotiated")),
    }
}
