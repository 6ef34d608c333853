//! Tests the `memcached-operator webhooks` binary end to end: real processes on loopback ports
//! they pick themselves, real TLS with rcgen certificates laid out like OLM's mounts.

mod admission;
mod certificates;
mod conversion;
mod lifecycle;
mod load;
mod protocol;

use tempfile::TempDir;
use testkit::cert_layout::olm_root;
use testkit::client::TlsClient;
use testkit::pki::{Ca, Leaf};
use testkit::process::{Certs, OperatorBinary, READY_WITHIN, Server};

/// The operator binary cargo built for these tests.
pub const OPERATOR: OperatorBinary = OperatorBinary::new(env!("CARGO_BIN_EXE_memcached-operator"));

/// A server serving a fresh certificate from an OLM-style root.
pub struct Running {
    /// The OLM root (kept alive while the server runs).
    pub root: TempDir,
    /// The CA that signed the serving certificate.
    pub ca: Ca,
    /// The serving certificate.
    pub leaf: Leaf,
    /// The server.
    pub server: Server,
    /// A client trusting `ca`, offering http/1.1.
    pub client: TlsClient,
}

/// Starts a server with a valid certificate at OLM's first path and waits until it is ready.
pub async fn start_ready(flags: &[&str]) -> Running {
    let (root, ca, leaf) = olm_root();
    let server = OPERATOR.webhooks(Certs::Root(root.path()), flags).await;
    server.wait_ready(READY_WITHIN).await;
    let client = TlsClient::new(server.webhook, &ca.pem);
    Running {
        root,
        ca,
        leaf,
        server,
        client,
    }
}
