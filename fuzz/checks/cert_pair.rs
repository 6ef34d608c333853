//! Loads one input as a serving certificate and key, the way the webhook server loads the
//! files OLM mounts: the same bytes are the certificate file and the key file, so one PEM
//! holding a chain and a key is a pair. Fuzzed by fuzz/fuzz_targets/cert_pair.rs; its seeds
//! and past crashes are replayed by tests/fuzz_seeds.rs.

use std::path::PathBuf;
use std::sync::LazyLock;

use memcached_operator::tls::certs::{CertPaths, crypto_provider, load_pair};

static PATHS: LazyLock<CertPaths> = LazyLock::new(|| CertPaths {
    cert: PathBuf::from("tls.crt"),
    key: PathBuf::from("tls.key"),
});

pub fn check(pem: &[u8]) {
    let provider = crypto_provider();
    match load_pair(&PATHS, pem, pem, &provider) {
        Ok(serving) => assert!(!serving.key.cert.is_empty()),
        Err(error) => assert!(!error.to_string().is_empty()),
    }
}
