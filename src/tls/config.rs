//! A listener's rustls configuration: the versions and cipher suites of the cluster's TLS
//! profile, the certificate of a resolver, and the ALPN protocols the server speaks.

use std::sync::Arc;

use rustls::ServerConfig;
use rustls::crypto::CryptoProvider;

use super::certs::CertResolver;
use super::profile::TlsSettings;

/// Builds the TLS configuration: the versions and cipher suites of `settings` (the cluster's
/// TLS profile), the rest of `provider`, certificates from `resolver`, ALPN `http/1.1` (and
/// `h2` first when HTTP/2 is enabled).
pub fn tls_config(
    resolver: Arc<CertResolver>,
    provider: Arc<CryptoProvider>,
    settings: &TlsSettings,
    enable_http2: bool,
) -> Result<ServerConfig, rustls::Error> {
    let mut config = ServerConfig::builder_with_provider(settings.provider(&provider))
        .with_protocol_versions(&settings.versions)?
        .with_no_client_auth()
        .with_cert_resolver(resolver);
    config.alpn_protocols = if enable_http2 {
        vec![b"h2".to_vec(), b"http/1.1".to_vec()]
    } else {
        vec![b"http/1.1".to_vec()]
    };
    Ok(config)
}
