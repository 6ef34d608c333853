//! What a listener's TLS comes to: the protocol versions and cipher suites a profile settles
//! on, and how they read in logs.

use std::sync::Arc;

use rustls::crypto::CryptoProvider;
use rustls::{SupportedCipherSuite, SupportedProtocolVersion};

/// What a listener's TLS is configured with: the protocol versions and the cipher suites, in
/// order of preference, that a profile comes to.
#[derive(Clone, Debug)]
pub struct TlsSettings {
    /// The profile these settings come from (`Intermediate`, `Custom`, …).
    pub profile: &'static str,
    /// The versions served, TLS 1.3 first; never empty.
    pub versions: Vec<&'static SupportedProtocolVersion>,
    /// The suites offered; at least one for each version in `versions`.
    pub suites: Vec<SupportedCipherSuite>,
}

impl TlsSettings {
    /// `base` with its cipher suites replaced by these settings' suites.
    pub fn provider(&self, base: &CryptoProvider) -> Arc<CryptoProvider> {
        Arc::new(CryptoProvider {
            cipher_suites: self.suites.clone(),
            ..base.clone()
        })
    }

    /// The versions, for logs: `["TLS 1.3", "TLS 1.2"]`.
    pub fn version_labels(&self) -> Vec<&'static str> {
        self.versions
            .iter()
            .map(|version| match version.version {
                rustls::ProtocolVersion::TLSv1_3 => "TLS 1.3",
                rustls::ProtocolVersion::TLSv1_2 => "TLS 1.2",
                _ => "another TLS version",
            })
            .collect()
    }

    /// The suites' IANA names, for logs: `TLS13_AES_128_GCM_SHA256`, ….
    pub fn suite_names(&self) -> Vec<&'static str> {
        self.suites
            .iter()
            .map(|suite| suite.suite().as_str().unwrap_or("an unnamed suite"))
            .collect()
    }

    /// Whether `other` serves the same versions and suites.
    pub fn same_as(&self, other: &TlsSettings) -> bool {
        self.version_labels() == other.version_labels() && self.suite_names() == other.suite_names()
    }
}
