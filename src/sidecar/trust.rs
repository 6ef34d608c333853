//! Which client CAs a running memcached may still trust, as the certificate refresher tells
//! it: memcached's `refresh_certs` loads the CAs of `ca.crt` into the ones it already trusts
//! and removes none (OpenSSL's `SSL_CTX_load_verify_locations` adds to the store), so a CA
//! withdrawn from `ca.crt` stays trusted until memcached starts again. The refresher records
//! the CAs of every `ca.crt` it had the server read since the server started, and counts
//! those the file no longer holds; a new start of the server (its `stats` `time` less
//! `uptime` changes) clears the record, since memcached then read the file anew.
//!
//! The record begins when the refresher first has the server read `ca.crt`: a CA withdrawn
//! from the file between memcached's start and that moment is not seen.

use std::collections::BTreeSet;

use rustls_pki_types::CertificateDer;
use rustls_pki_types::pem::PemObject;
use sha2::{Digest, Sha256};

/// A CA certificate, by the SHA-256 of its DER.
pub type Fingerprint = [u8; 32];

/// The CA certificates of a PEM file's content; a block that is not a certificate is skipped
/// (memcached would refuse the file, and a refusal is counted apart).
pub fn fingerprints(pem: &[u8]) -> BTreeSet<Fingerprint> {
    CertificateDer::pem_slice_iter(pem)
        .filter_map(Result::ok)
        .map(|der| Sha256::digest(der.as_ref()).into())
        .collect()
}

/// The CAs a running memcached was had read, since it started.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Loaded {
    /// When the server started, as it says (Unix seconds); `None` until it said.
    started: Option<i64>,
    /// Every CA of every `ca.crt` it was had read.
    cas: BTreeSet<Fingerprint>,
}

impl Loaded {
    /// Records that the server, started at `started` when it said, has read `cas`. A server
    /// started at another time than the one recorded read its file anew: the record starts
    /// again from `cas`.
    pub fn read(&mut self, cas: &BTreeSet<Fingerprint>, started: Option<i64>) {
        if self.restarted(started) {
            self.cas.clear();
        }
        self.cas.extend(cas.iter().copied());
        if started.is_some() {
            self.started = started;
        }
    }

    /// Whether a server that says it started at `started` is another start than the one
    /// recorded.
    pub fn restarted(&self, started: Option<i64>) -> bool {
        matches!((self.started, started), (Some(was), Some(now)) if was != now)
    }

    /// How many CAs the server may still trust that `current` (the file now) no longer
    /// holds.
    pub fn withdrawn(&self, current: &BTreeSet<Fingerprint>) -> usize {
        self.cas.difference(current).count()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pem(cas: &[&testkit::pki::Ca]) -> Vec<u8> {
        cas.iter()
            .flat_map(|ca| ca.pem.clone().into_bytes())
            .collect()
    }

    #[test]
    fn a_withdrawn_ca_counts_until_the_server_starts_again() {
        let (one, two) = (testkit::pki::Ca::root(), testkit::pki::Ca::root());
        let (only_one, both, only_two) = (
            fingerprints(&pem(&[&one])),
            fingerprints(&pem(&[&one, &two])),
            fingerprints(&pem(&[&two])),
        );
        assert_eq!((only_one.len(), both.len(), only_two.len()), (1, 2, 1));
        let mut loaded = Loaded::default();
        loaded.read(&only_one, Some(100));
        assert_eq!(loaded.withdrawn(&only_one), 0);
        // The new CA joins: nothing withdrawn.
        loaded.read(&both, Some(100));
        assert_eq!(loaded.withdrawn(&both), 0);
        // The old one leaves the file; the server, sent refresh_certs, still trusts it.
        loaded.read(&only_two, Some(100));
        assert_eq!(loaded.withdrawn(&only_two), 1);
        assert!(!loaded.restarted(Some(100)));
        assert!(
            !loaded.restarted(None),
            "a server that did not say is no restart"
        );
        // It started again: it read the file as it is.
        assert!(loaded.restarted(Some(160)));
        loaded.read(&only_two, Some(160));
        assert_eq!(loaded.withdrawn(&only_two), 0);
        // A file whose blocks are not certificates holds no CA.
        assert!(
            fingerprints(b"-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n")
                .is_empty()
        );
        assert!(fingerprints(b"not PEM").is_empty());
    }
}
