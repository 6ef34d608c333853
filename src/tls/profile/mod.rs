//! Follows the cluster's TLS security profile on every TLS listener the operator serves (the
//! webhooks and the HTTPS metrics): OpenShift's `apiservers.config.openshift.io/cluster`
//! `.spec.tlsSecurityProfile`, or Intermediate where that API does not exist.
//!
//! `profiles` reads what the cluster asks for (pure), `ciphers` settles it against rustls
//! (pure), `cluster` reads and watches the object and publishes [`TlsSettings`], and `apply`
//! swaps each listener's rustls configuration for new handshakes, keeping its certificate
//! resolver, so connections already open and requests in flight are not touched.

pub mod apply;
pub mod ciphers;
pub mod cluster;
pub mod profiles;

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
    /// Intermediate, as rustls with ring serves it: the settings where the cluster has no
    /// opinion or no `APIServer` API.
    pub fn intermediate() -> TlsSettings {
        ciphers::settle(
            &profiles::default_profile(),
            rustls::crypto::ring::ALL_CIPHER_SUITES,
        )
        .map(|(settings, _)| settings)
        // Unreachable: ring implements all of Intermediate's TLS 1.3 suites. Should it not,
        // TLS 1.2 and 1.3 with all of ring's suites is what rustls serves by default.
        .unwrap_or_else(|_| TlsSettings {
            profile: "Intermediate",
            versions: vec![&rustls::version::TLS13, &rustls::version::TLS12],
            suites: rustls::crypto::ring::ALL_CIPHER_SUITES.to_vec(),
        })
    }

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
