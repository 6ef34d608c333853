//! Tests the `memcached-operator webhooks` binary end to end: real processes on free loopback
//! ports, real TLS with rcgen certificates laid out like OLM's mounts.

mod admission;
mod certificates;
mod client;
mod conversion;
mod lifecycle;
mod load;
mod pki;
mod process;
mod protocol;
mod reviews;

use std::time::Duration;

use tempfile::TempDir;

use crate::client::TlsClient;
use crate::pki::{Ca, KeyForm, Layout, Leaf};
use crate::process::{Certs, Server};

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

/// A temporary OLM root with a fresh CA's serving certificate at OLM's first path.
pub fn olm_root() -> (TempDir, Ca, Leaf) {
    let root = TempDir::new().expect("a temporary OLM root");
    let ca = Ca::root();
    let leaf = ca.serving(KeyForm::EcPkcs8);
    pki::write(
        root.path(),
        Layout::ServingCerts,
        &leaf.cert_pem,
        &leaf.key_pem,
    );
    (root, ca, leaf)
}

/// Starts a server with a valid certificate at OLM's first path and waits until it is ready.
pub async fn start_ready(flags: &[&str]) -> Running {
    let (root, ca, leaf) = olm_root();
    let server = Server::start(Certs::Root(root.path()), flags).await;
    server.wait_ready(Duration::from_secs(5)).await;
    let client = TlsClient::new(server.webhook, &ca.pem);
    Running {
        root,
        ca,
        leaf,
        server,
        client,
    }
}
