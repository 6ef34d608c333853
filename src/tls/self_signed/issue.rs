//! Decides, from what the self-signed certificate Secret holds and the time, whether its CA or
//! its serving certificate must be issued again, and issues them: no I/O, so that every rule
//! below is tested on its own.
//!
//! - The CA is issued when there is none (or it does not load, or its key is not its own), and
//!   again once two thirds of its validity have passed, as cert-manager renews by default.
//! - `ca.crt` is what the API server is to trust: the current CA first, then every earlier CA
//!   that has not expired, so that a pair an earlier CA signed, still served by a replica that
//!   has not switched yet, stays trusted through a CA change. An expired earlier CA is dropped.
//! - The serving certificate is issued when there is none, when it does not load or its key is
//!   not its own, when the current CA did not sign it, when it names other hosts than asked,
//!   and once two thirds of its validity have passed. It never outlives its CA.
//!
//! Keys are ECDSA P-256. Each CA's common name carries the second it was issued and its key's
//! fingerprint, so that a leaf's issuer names the one CA that signed it.

use std::collections::BTreeMap;
use std::time::Duration;

use k8s_openapi::ByteString;
use rcgen::{
    BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair,
    KeyUsagePurpose, PublicKeyData,
};
use rustls_pki_types::CertificateDer;
use rustls_pki_types::pem::PemObject;
use sha2::{Digest, Sha256};
use x509_parser::certificate::X509Certificate;

/// The Secret's key holding the CAs to trust, the current one first.
pub const CA_CERT: &str = "ca.crt";
/// The Secret's key holding the current CA's private key.
pub const CA_KEY: &str = "ca.key";
/// The Secret's key holding the serving certificate.
pub const TLS_CERT: &str = "tls.crt";
/// The Secret's key holding the serving certificate's private key.
pub const TLS_KEY: &str = "tls.key";

/// How far back a new certificate's validity starts, for clocks a little behind: five
/// minutes, or a tenth of a shorter validity.
const BACKDATE: i64 = 300;

/// How long a new CA is in the bundles before a serving certificate it signed replaces one an
/// earlier CA signed, so that every API server has read the new bundles first.
pub const TRUST_DELAY: i64 = 10;

/// How far back a certificate valid for `validity` seconds from now starts.
fn backdate(validity: i64) -> i64 {
    (validity / 10).min(BACKDATE)
}

/// When a certificate issued here was issued, from its validity span (`validity` plus its
/// [`backdate`]).
fn issued_at(not_before: i64, not_after: i64) -> i64 {
    let span = not_after - not_before;
    let back = if span >= 11 * BACKDATE {
        BACKDATE
    } else {
        span / 11
    };
    not_before + back
}

/// What to issue, and for how long.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Settings {
    /// The serving certificate's DNS names.
    pub names: Vec<String>,
    /// How long a CA is valid.
    pub ca_validity: Duration,
    /// How long a serving certificate is valid (at most its CA's remaining life).
    pub cert_validity: Duration,
}

/// What a look at the Secret decided.
#[derive(Debug, PartialEq, Eq)]
pub struct Plan {
    /// The Secret's new data, when something changes.
    pub data: Option<BTreeMap<String, ByteString>>,
    /// Why, for the log: what was issued or dropped.
    pub reasons: Vec<String>,
    /// When to look again (seconds since the epoch): the next renewal or expiry.
    pub next: i64,
}

/// A certificate or key that could not be made.
#[derive(Debug, thiserror::Error)]
#[error("cannot issue the webhooks' self-signed {what}: {message}")]
pub struct IssueError {
    what: &'static str,
    message: String,
}

fn issue_error(what: &'static str) -> impl Fn(rcgen::Error) -> IssueError {
    move |error| IssueError {
        what,
        message: error.to_string(),
    }
}

/// A certificate with the key that goes with it, as stored.
struct Held {
    cert_pem: String,
    key_pem: String,
    der: CertificateDer<'static>,
    not_before: i64,
    not_after: i64,
}

impl Held {
    /// A certificate just made, with its key.
    fn made(cert: &rcgen::Certificate, key: &KeyPair, not_before: i64, not_after: i64) -> Held {
        Held {
            cert_pem: cert.pem(),
            key_pem: key.serialize_pem(),
            der: cert.der().clone(),
            not_before,
            not_after,
        }
    }

    /// When two thirds of its validity have passed.
    fn renewal(&self) -> i64 {
        self.not_before + (self.not_after - self.not_before) * 2 / 3
    }

    fn parsed(&self) -> Option<X509Certificate<'_>> {
        x509_parser::parse_x509_certificate(&self.der)
            .ok()
            .map(|(_, cert)| cert)
    }
}

/// Every certificate in `pem`, with its validity; those that do not parse are left out.
fn certificates(pem: &[u8]) -> Vec<(CertificateDer<'static>, i64, i64)> {
    CertificateDer::pem_slice_iter(pem)
        .filter_map(Result::ok)
        .filter_map(|der| {
            let (_, cert) = x509_parser::parse_x509_certificate(&der).ok()?;
            let validity = cert.validity();
            let (from, until) = (
                validity.not_before.timestamp(),
                validity.not_after.timestamp(),
            );
            Some((der.clone(), from, until))
        })
        .collect()
}

/// The certificate first in `cert_pem` when `key_pem` holds its key.
fn held(cert_pem: &[u8], key_pem: &[u8]) -> Option<Held> {
    let (der, not_before, not_after) = certificates(cert_pem).into_iter().next()?;
    let key_text = std::str::from_utf8(key_pem).ok()?;
    let key = KeyPair::from_pem(key_text).ok()?;
    let (_, cert) = x509_parser::parse_x509_certificate(&der).ok()?;
    if cert.public_key().raw != key.subject_public_key_info().as_slice() {
        return None;
    }
    Some(Held {
        cert_pem: pem_of(&der),
        key_pem: key_text.to_string(),
        der,
        not_before,
        not_after,
    })
}

fn pem_of(der: &CertificateDer<'_>) -> String {
    pem::encode(&pem::Pem::new("CERTIFICATE", der.as_ref().to_vec()))
}

fn timestamp(seconds: i64) -> Result<time::OffsetDateTime, IssueError> {
    time::OffsetDateTime::from_unix_timestamp(seconds).map_err(|error| IssueError {
        what: "validity",
        message: error.to_string(),
    })
}

fn seconds(duration: Duration) -> i64 {
    i64::try_from(duration.as_secs()).unwrap_or(i64::MAX / 4)
}

/// A new CA, valid from `now` (less [`BACKDATE`]) for `validity`.
fn new_ca(now: i64, validity: Duration) -> Result<Held, IssueError> {
    let key = KeyPair::generate().map_err(issue_error("CA key"))?;
    let mut params = CertificateParams::default();
    // The key's fingerprint in the name: a leaf's issuer names one CA, even among CAs made
    // in the same second.
    let fingerprint: String = Sha256::digest(key.subject_public_key_info())
        .iter()
        .take(8)
        .map(|byte| format!("{byte:02x}"))
        .collect();
    params.distinguished_name.push(
        DnType::CommonName,
        format!("{}-webhook-ca@{now}-{fingerprint}", crate::operator::NAME),
    );
    params.is_ca = IsCa::Ca(BasicConstraints::Constrained(0));
    params.key_usages = vec![
        KeyUsagePurpose::KeyCertSign,
        KeyUsagePurpose::CrlSign,
        KeyUsagePurpose::DigitalSignature,
    ];
    let (not_before, not_after) = valid(&mut params, now, validity, i64::MAX)?;
    let cert = params.self_signed(&key).map_err(issue_error("CA"))?;
    Ok(Held::made(&cert, &key, not_before, not_after))
}

/// Sets the validity of `params`: from `now` (less its [`backdate`]) for `validity`, but not
/// past `until`; returns it.
fn valid(
    params: &mut CertificateParams,
    now: i64,
    validity: Duration,
    until: i64,
) -> Result<(i64, i64), IssueError> {
    let not_before = now - backdate(seconds(validity));
    let not_after = now.saturating_add(seconds(validity)).min(until);
    params.not_before = timestamp(not_before)?;
    params.not_after = timestamp(not_after)?;
    Ok((not_before, not_after))
}

/// A serving certificate for `names`, signed by `ca`, valid for `validity` but not past the
/// CA.
fn new_leaf(ca: &Held, names: &[String], now: i64, validity: Duration) -> Result<Held, IssueError> {
    let ca_key = KeyPair::from_pem(&ca.key_pem).map_err(issue_error("CA key"))?;
    let issuer = Issuer::from_ca_cert_der(&ca.der, ca_key).map_err(issue_error("CA"))?;
    let key = KeyPair::generate().map_err(issue_error("serving key"))?;
    let mut params =
        CertificateParams::new(names.to_vec()).map_err(issue_error("serving certificate"))?;
    if let Some(first) = names.first() {
        params
            .distinguished_name
            .push(DnType::CommonName, first.clone());
    }
    params.key_usages = vec![KeyUsagePurpose::DigitalSignature];
    params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
    let (not_before, not_after) = valid(&mut params, now, validity, ca.not_after)?;
    let cert = params
        .signed_by(&key, &issuer)
        .map_err(issue_error("serving certificate"))?;
    Ok(Held::made(&cert, &key, not_before, not_after))
}

/// Whether `leaf` names exactly `names`.
fn names_match(leaf: &Held, names: &[String]) -> bool {
    let Some(leaf) = leaf.parsed() else {
        return false;
    };
    let mut served: Vec<String> = leaf
        .subject_alternative_name()
        .ok()
        .flatten()
        .map(|san| {
            san.value
                .general_names
                .iter()
                .filter_map(|name| match name {
                    x509_parser::extensions::GeneralName::DNSName(dns) => Some(dns.to_string()),
                    _ => None,
                })
                .collect()
        })
        .unwrap_or_default();
    let mut wanted = names.to_vec();
    served.sort();
    wanted.sort();
    served == wanted
}

/// Whether the CA `ca` (DER) issued `leaf`: its subject is the leaf's issuer.
fn signed_by(leaf: &Held, ca: &CertificateDer<'_>) -> bool {
    let Some(leaf) = leaf.parsed() else {
        return false;
    };
    x509_parser::parse_x509_certificate(ca)
        .is_ok_and(|(_, ca)| leaf.issuer().as_raw() == ca.subject().as_raw())
}

/// What to do with the serving certificate held.
#[derive(Debug, PartialEq, Eq)]
enum Leaf {
    /// Keep it; look again at this time.
    Keep(i64),
    /// Issue one, for this reason.
    Issue(&'static str),
}

/// What to do with `leaf` under the current CA `ca` and the CAs `bundle` trusts.
fn judge_leaf(
    leaf: Option<&Held>,
    ca: &Held,
    bundle: &[CertificateDer<'static>],
    names: &[String],
    now: i64,
) -> Leaf {
    let Some(leaf) = leaf else {
        return Leaf::Issue("none usable in the Secret");
    };
    if !names_match(leaf, names) {
        return Leaf::Issue("the one held names other hosts");
    }
    if signed_by(leaf, &ca.der) {
        return if now >= leaf.renewal() {
            Leaf::Issue("two thirds of its validity passed")
        } else {
            Leaf::Keep(leaf.renewal())
        };
    }
    if !bundle.iter().any(|trusted| signed_by(leaf, trusted)) {
        return Leaf::Issue("no CA in ca.crt signed the one held");
    }
    // An earlier CA's, still trusted: replaced once the new CA has been in the bundles for
    // TRUST_DELAY, unless it expires first.
    let ready = issued_at(ca.not_before, ca.not_after) + TRUST_DELAY;
    if now < ready && leaf.not_after > ready {
        Leaf::Keep(ready)
    } else {
        Leaf::Issue("the current CA's replaces an earlier CA's")
    }
}

fn bytes(data: Option<&BTreeMap<String, ByteString>>, key: &str) -> Vec<u8> {
    data.and_then(|data| data.get(key))
        .map(|value| value.0.clone())
        .unwrap_or_default()
}

/// What the Secret holding `data` (none when it does not exist) needs at `now` (seconds
/// since the epoch).
pub fn plan(
    data: Option<&BTreeMap<String, ByteString>>,
    settings: &Settings,
    now: i64,
) -> Result<Plan, IssueError> {
    let mut reasons = Vec::new();
    let trusted = certificates(&bytes(data, CA_CERT));
    let (ca, ca_changed) = match held(&bytes(data, CA_CERT), &bytes(data, CA_KEY)) {
        Some(current) if now < current.renewal() => (current, false),
        Some(_) => {
            reasons.push("issued a CA (two thirds of the last one's validity passed)".to_string());
            (new_ca(now, settings.ca_validity)?, true)
        }
        None => {
            reasons.push("issued a CA (none usable in the Secret)".to_string());
            (new_ca(now, settings.ca_validity)?, true)
        }
    };
    // The current CA, then every other one still valid, in the order they were trusted.
    let mut bundle = vec![ca.der.clone()];
    let mut dropped = 0;
    for (der, _, not_after) in &trusted {
        if bundle.contains(der) {
            continue;
        }
        if *not_after <= now {
            dropped += 1;
        } else {
            bundle.push(der.clone());
        }
    }
    if dropped > 0 {
        reasons.push(format!("dropped {dropped} expired CA(s) from ca.crt"));
    }
    let bundle_changed = ca_changed
        || dropped > 0
        || bundle.len() != trusted.len()
        || bundle.iter().zip(&trusted).any(|(a, (b, _, _))| a != b);

    let held_leaf = held(&bytes(data, TLS_CERT), &bytes(data, TLS_KEY));
    let (leaf_pair, leaf_next) =
        match judge_leaf(held_leaf.as_ref(), &ca, &bundle, &settings.names, now) {
            Leaf::Keep(next) => (None, next),
            Leaf::Issue(why) => {
                reasons.push(format!("issued a serving certificate ({why})"));
                let new = new_leaf(&ca, &settings.names, now, settings.cert_validity)?;
                let next = new.renewal();
                (Some((new.cert_pem, new.key_pem)), next)
            }
        };

    let earliest_expiry = trusted
        .iter()
        .map(|(_, _, until)| *until)
        .filter(|until| *until > now)
        .min();
    let next = [Some(ca.renewal()), Some(leaf_next), earliest_expiry]
        .into_iter()
        .flatten()
        .min()
        .unwrap_or(now)
        .max(now + 1);

    if !bundle_changed && leaf_pair.is_none() {
        return Ok(Plan {
            data: None,
            reasons,
            next,
        });
    }
    let mut new = data.cloned().unwrap_or_default();
    let bundle_pem: String = bundle.iter().map(pem_of).collect();
    new.insert(CA_CERT.to_string(), ByteString(bundle_pem.into_bytes()));
    new.insert(CA_KEY.to_string(), ByteString(ca.key_pem.into_bytes()));
    if let Some((cert, key)) = leaf_pair {
        new.insert(TLS_CERT.to_string(), ByteString(cert.into_bytes()));
        new.insert(TLS_KEY.to_string(), ByteString(key.into_bytes()));
    }
    Ok(Plan {
        data: Some(new),
        reasons,
        next,
    })
}

#[cfg(test)]
mod tests;
