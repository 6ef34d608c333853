//! Which client CAs a running memcached may still trust, as the certificate refresher tells
//! it: memcached's `refresh_certs` loads the CAs of `ca.crt` into the ones it already trusts
//! and removes none (OpenSSL's `SSL_CTX_load_verify_locations` adds to the store), so a CA
//! withdrawn from `ca.crt` stays trusted until memcached starts again. The refresher records
//! the CAs of every `ca.crt` it had the server read since the server started, and counts
//! those the file no longer holds.
//!
//! A new memcached process read the file anew, so its start replaces the record with the
//! CAs of the files seen since the last look at the server (the one it read at its start is
//! among them, as far as the refresher's rounds see every version). The start is
//! told from `stats` ([`Life`]): the start time (`time` less `uptime`) changes with a cold
//! start, but a warm restart restores memcached's clock with its items, so its start time
//! stays; the counters `total_connections` and CPU time (`rusage_user` plus
//! `rusage_system`) only grow while one process runs, and start again near zero with the
//! next. A start may be missed (the new process outgrew the old one's counters between two
//! looks): the withdrawn CA is then still counted, never wrongly cleared.
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

/// What tells one memcached process from the next, from its `stats`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Life {
    /// When it started, by its own clock (Unix seconds): `time` less `uptime`.
    pub started: i64,
    /// The connections it has accepted (`total_connections`).
    pub connections: u64,
    /// The CPU time it has used, in microseconds (`rusage_user` plus `rusage_system`).
    pub cpu_micros: u64,
}

impl Life {
    /// Whether `now` was seen from another process than `self`: another start time, or a
    /// counter lower than before.
    pub fn ended_before(&self, now: &Life) -> bool {
        self.started != now.started
            || now.connections < self.connections
            || now.cpu_micros < self.cpu_micros
    }
}

/// The CAs a running memcached was had read, since it started.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Loaded {
    /// The process, as last seen; `None` until it said.
    life: Option<Life>,
    /// Every CA of every `ca.crt` it was had read.
    cas: BTreeSet<Fingerprint>,
    /// Every CA of every `ca.crt` the refresher saw since that look: what a process that
    /// started in the meantime may have read at its start.
    observed: BTreeSet<Fingerprint>,
}

impl Loaded {
    /// Records that the server, seen as `life` when it said, has read `cas`. Another process
    /// than the one last seen read its file anew: the record starts again from `cas`.
    pub fn read(&mut self, cas: &BTreeSet<Fingerprint>, life: Option<Life>) {
        if let Some(now) = life {
            self.seen(now);
        }
        self.cas.extend(cas.iter().copied());
    }

    /// Records that `ca.crt` holds `cas` now (every round).
    pub fn saw_file(&mut self, cas: &BTreeSet<Fingerprint>) {
        self.observed.extend(cas.iter().copied());
    }

    /// Records a look at the server. Another process than the one last seen read at its
    /// start one of the files seen since that look: the record starts again from their CAs.
    /// Returns whether it did.
    pub fn seen(&mut self, now: Life) -> bool {
        let restarted = self.life.is_some_and(|was| was.ended_before(&now));
        if restarted {
            self.cas = std::mem::take(&mut self.observed);
        }
        self.observed.clear();
        self.life = Some(now);
        restarted
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

    fn life(started: i64, connections: u64, cpu_micros: u64) -> Option<Life> {
        Some(Life {
            started,
            connections,
            cpu_micros,
        })
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
        loaded.saw_file(&only_one);
        loaded.read(&only_one, life(100, 10, 5_000));
        assert_eq!(loaded.withdrawn(&only_one), 0);
        // The new CA joins: nothing withdrawn.
        loaded.saw_file(&both);
        loaded.read(&both, life(100, 40, 9_000));
        assert_eq!(loaded.withdrawn(&both), 0);
        // The old one leaves the file; the server, sent refresh_certs, still trusts it.
        loaded.saw_file(&only_two);
        loaded.read(&only_two, life(100, 90, 12_000));
        assert_eq!(loaded.withdrawn(&only_two), 1);
        // The same process, busier: still trusted.
        assert!(!loaded.seen(Life {
            started: 100,
            connections: 95,
            cpu_micros: 12_500
        }));
        assert_eq!(loaded.withdrawn(&only_two), 1);
        // A read the server did not say of keeps what was seen.
        loaded.read(&only_two, None);
        assert_eq!(loaded.withdrawn(&only_two), 1);
        // A warm restart keeps the start time; its counters start again.
        let mut warm = loaded.clone();
        warm.saw_file(&only_two);
        assert!(warm.seen(Life {
            started: 100,
            connections: 2,
            cpu_micros: 3_000
        }));
        assert_eq!(warm.withdrawn(&only_two), 0);
        // So does a cold start, by its start time alone.
        loaded.saw_file(&only_two);
        assert!(loaded.seen(Life {
            started: 160,
            connections: 900,
            cpu_micros: 90_000
        }));
        loaded.read(&only_two, life(160, 901, 90_100));
        assert_eq!(loaded.withdrawn(&only_two), 0);

        // A server that restarted while the file still held the old CA, withdrawn only
        // after: it read the old CA at its start, and still trusts it.
        let mut late = Loaded::default();
        late.saw_file(&both);
        late.read(&both, life(100, 50, 8_000));
        late.saw_file(&both); // the restart happens here, unseen
        late.saw_file(&only_two);
        late.read(&only_two, life(100, 3, 2_000));
        assert_eq!(late.withdrawn(&only_two), 1);
    }

    #[test]
    fn only_certificates_are_cas() {
        let key = b"-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n";
        assert!(fingerprints(key).is_empty());
        assert!(fingerprints(b"not PEM").is_empty());
    }
}
