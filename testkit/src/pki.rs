//! Issues test certificates with rcgen: a root or intermediate CA, serving certificates for
//! loopback (valid, expired, or for other names) with the key forms the server accepts.
//!
//! Where the files go on disk is [`crate::cert_layout`]'s job.

use std::sync::atomic::{AtomicU64, Ordering};

use rcgen::{
    BasicConstraints, CertificateParams, DnType, IsCa, Issuer, KeyPair, KeyUsagePurpose,
    SerialNumber,
};

/// The RSA key of the PKCS#1 case, as PKCS#8 (for rcgen) and PKCS#1 (for the server).
const RSA_PKCS8: &str = include_str!("../keys/rsa.pkcs8.pem");
const RSA_PKCS1: &str = include_str!("../keys/rsa.pkcs1.pem");
/// The EC key of the SEC1 case, as PKCS#8 (for rcgen) and SEC1 (for the server).
const EC_PKCS8: &str = include_str!("../keys/ec.pkcs8.pem");
const EC_SEC1: &str = include_str!("../keys/ec.sec1.pem");

/// The names a serving certificate is valid for unless a test says otherwise: `localhost`,
/// `127.0.0.1` and this process's own loopback address ([`crate::loopback::own_address`]).
pub fn loopback_names() -> Vec<String> {
    vec![
        "localhost".to_string(),
        "127.0.0.1".to_string(),
        crate::loopback::own_address().to_string(),
    ]
}

static NEXT_SERIAL: AtomicU64 = AtomicU64::new(1000);

/// A serial number no other certificate of this process has.
fn next_serial() -> u64 {
    NEXT_SERIAL.fetch_add(1, Ordering::Relaxed)
}

/// The private key of a serving certificate, in one of the PEM forms the server accepts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum KeyForm {
    /// A fresh ECDSA P-256 key, PKCS#8 (`PRIVATE KEY`).
    EcPkcs8,
    /// A fixed ECDSA P-256 key, SEC1 (`EC PRIVATE KEY`).
    EcSec1,
    /// A fixed RSA 2048 key, PKCS#1 (`RSA PRIVATE KEY`).
    RsaPkcs1,
    /// The same RSA key, PKCS#8.
    RsaPkcs8,
}

/// A certificate authority that signs serving certificates (or intermediates).
pub struct Ca {
    issuer: Issuer<'static, KeyPair>,
    /// Its certificate, PEM.
    pub pem: String,
}

impl Ca {
    /// A self-signed root.
    ///
    /// # Panics
    /// If rcgen cannot make a key or sign, which fixed parameters never cause.
    pub fn root() -> Ca {
        Ca::root_named("memcached-operator test root")
    }

    /// A self-signed root with its own subject name, for tests that hold two roots at once
    /// (verifiers find a certificate's issuer by name).
    ///
    /// # Panics
    /// If rcgen cannot make a key or sign, which fixed parameters never cause.
    pub fn root_named(name: &str) -> Ca {
        let key = fresh_key();
        let params = ca_params(name);
        let cert = params
            .self_signed(&key)
            .unwrap_or_else(|error| panic!("cannot self-sign the test root CA: {error}"));
        Ca {
            pem: cert.pem(),
            issuer: Issuer::new(params, key),
        }
    }

    /// An intermediate CA signed by this one.
    ///
    /// # Panics
    /// If rcgen cannot make a key or sign, which fixed parameters never cause.
    pub fn intermediate(&self) -> Ca {
        let key = fresh_key();
        let params = ca_params("memcached-operator test intermediate");
        let cert = params
            .signed_by(&key, &self.issuer)
            .unwrap_or_else(|error| panic!("cannot sign a test intermediate CA: {error}"));
        Ca {
            pem: cert.pem(),
            issuer: Issuer::new(params, key),
        }
    }

    /// A serving certificate for [`loopback_names`] with a key in `form`.
    ///
    /// # Panics
    /// If rcgen cannot read one of the fixed keys or sign, which never happens.
    pub fn serving(&self, form: KeyForm) -> Leaf {
        let (signing_pem, served_key_pem) = match form {
            KeyForm::EcPkcs8 => {
                let pem = fresh_key().serialize_pem();
                (pem.clone(), pem)
            }
            KeyForm::EcSec1 => (EC_PKCS8.to_string(), EC_SEC1.to_string()),
            KeyForm::RsaPkcs1 => (RSA_PKCS8.to_string(), RSA_PKCS1.to_string()),
            KeyForm::RsaPkcs8 => (RSA_PKCS8.to_string(), RSA_PKCS8.to_string()),
        };
        let key = KeyPair::from_pem(&signing_pem)
            .unwrap_or_else(|error| panic!("rcgen cannot read the {form:?} test key: {error}"));
        self.sign(&key, served_key_pem, serving_params(&loopback_names()))
    }

    /// A serving certificate (fresh EC key) for exactly `names`, which may leave out the
    /// address a client dials.
    ///
    /// # Panics
    /// If a name is not a valid subject alternative name.
    pub fn serving_for(&self, names: &[&str]) -> Leaf {
        let key = fresh_key();
        let pem = key.serialize_pem();
        self.sign(&key, pem, serving_params(names))
    }

    /// A client certificate (fresh EC key) named `name`, whose extended key usage allows
    /// client authentication only: what cert-manager issues for `usages: [client auth]`.
    pub fn client(&self, name: &str) -> Leaf {
        let key = fresh_key();
        let pem = key.serialize_pem();
        let mut params = serving_params(&[] as &[&str]);
        params.distinguished_name = rcgen::DistinguishedName::new();
        params.distinguished_name.push(DnType::CommonName, name);
        params.extended_key_usages = vec![rcgen::ExtendedKeyUsagePurpose::ClientAuth];
        self.sign(&key, pem, params)
    }

    /// A serving certificate (fresh EC key) for [`loopback_names`] whose extended key usage
    /// allows server authentication only, as many a server certificate does.
    pub fn server_only(&self) -> Leaf {
        let key = fresh_key();
        let pem = key.serialize_pem();
        let mut params = serving_params(&loopback_names());
        params.extended_key_usages = vec![rcgen::ExtendedKeyUsagePurpose::ServerAuth];
        self.sign(&key, pem, params)
    }

    /// A serving certificate for [`loopback_names`] that expired at the end of 2020.
    pub fn expired_serving(&self) -> Leaf {
        let key = fresh_key();
        let pem = key.serialize_pem();
        let mut params = serving_params(&loopback_names());
        params.not_before = rcgen::date_time_ymd(2020, 1, 1);
        params.not_after = rcgen::date_time_ymd(2021, 1, 1);
        self.sign(&key, pem, params)
    }

    fn sign(&self, key: &KeyPair, served_key_pem: String, params: CertificateParams) -> Leaf {
        let cert = params
            .signed_by(key, &self.issuer)
            .unwrap_or_else(|error| panic!("cannot sign a test serving certificate: {error}"));
        Leaf {
            serial: serial_of(cert.der()),
            cert_pem: cert.pem(),
            key_pem: served_key_pem,
        }
    }
}

/// A fresh ECDSA P-256 key.
fn fresh_key() -> KeyPair {
    KeyPair::generate().unwrap_or_else(|error| panic!("cannot generate an EC test key: {error}"))
}

fn serving_params<S: AsRef<str>>(names: &[S]) -> CertificateParams {
    let names = names
        .iter()
        .map(|name| name.as_ref().to_string())
        .collect::<Vec<_>>();
    let mut params = CertificateParams::new(names.clone())
        .unwrap_or_else(|error| panic!("not valid certificate names {names:?}: {error}"));
    params
        .distinguished_name
        .push(DnType::CommonName, "memcached-operator-webhook-service");
    params.serial_number = Some(SerialNumber::from(next_serial()));
    params
}

fn ca_params(name: &str) -> CertificateParams {
    let mut params = CertificateParams::new(Vec::<String>::new())
        .unwrap_or_else(|error| panic!("cannot make CA parameters: {error}"));
    params.distinguished_name.push(DnType::CommonName, name);
    params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    params.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
    params.serial_number = Some(SerialNumber::from(next_serial()));
    params
}

/// The serial number of a DER certificate as the server logs it: hex bytes with colons.
///
/// # Panics
/// If `der` is not an X.509 certificate.
pub fn serial_of(der: &[u8]) -> String {
    let (_, cert) = x509_parser::parse_x509_certificate(der)
        .unwrap_or_else(|error| panic!("not an X.509 certificate: {error}"));
    cert.raw_serial_as_string()
}

/// A serving certificate and its key.
#[derive(Clone, Debug)]
pub struct Leaf {
    /// The certificate, PEM (more certificates may be appended to make a chain).
    pub cert_pem: String,
    /// The key, PEM.
    pub key_pem: String,
    /// The serial number, as [`serial_of`] gives it.
    pub serial: String,
}

impl Leaf {
    /// This certificate followed by `issuer`'s: a chain to serve whole.
    pub fn with_chain(mut self, issuer: &Ca) -> Leaf {
        self.cert_pem.push_str(&issuer.pem);
        self
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_serving_certificate_has_its_own_serial() {
        let ca = Ca::root();
        let first = ca.serving(KeyForm::EcPkcs8);
        let second = ca.serving(KeyForm::EcPkcs8);
        assert_ne!(first.serial, second.serial);
    }

    #[test]
    fn each_key_form_is_served_in_its_own_pem_label() {
        let ca = Ca::root();
        for (form, label) in [
            (KeyForm::EcPkcs8, "-----BEGIN PRIVATE KEY-----"),
            (KeyForm::EcSec1, "-----BEGIN EC PRIVATE KEY-----"),
            (KeyForm::RsaPkcs1, "-----BEGIN RSA PRIVATE KEY-----"),
            (KeyForm::RsaPkcs8, "-----BEGIN PRIVATE KEY-----"),
        ] {
            let leaf = ca.serving(form);
            assert!(
                leaf.key_pem.starts_with(label),
                "{form:?}: {}",
                leaf.key_pem
            );
        }
    }

    #[test]
    fn a_chain_ends_with_the_issuers_certificate() {
        let root = Ca::root();
        let intermediate = root.intermediate();
        let leaf = intermediate
            .serving(KeyForm::EcPkcs8)
            .with_chain(&intermediate);
        assert!(leaf.cert_pem.ends_with(&intermediate.pem));
        assert_eq!(leaf.cert_pem.matches("BEGIN CERTIFICATE").count(), 2);
    }
}
