//! Follows the cluster's TLS security profile on every TLS listener the operator serves (the
//! webhooks and the HTTPS metrics): OpenShift's `apiservers.config.openshift.io/cluster`
//! `.spec.tlsSecurityProfile`, or Intermediate where that API does not exist.
//!
//! `profiles` reads what the cluster asks for (pure), `ciphers` settles it against rustls
//! (pure) into [`TlsSettings`] (`settings`), `cluster` reads and watches the object and
//! publishes them, and `apply`
//! swaps each listener's rustls configuration for new handshakes, keeping its certificate
//! resolver, so connections already open and requests in flight are not touched.

pub mod apply;
pub mod ciphers;
pub mod cluster;
pub mod profiles;
pub mod settings;

pub use settings::TlsSettings;
