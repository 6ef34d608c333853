//! Issues a throwaway CA and a serving certificate for localhost with rcgen, and writes them
//! where OLM mounts a webhook certificate, under a temporary root for `--cert-root`.

use std::path::Path;

use memcached_operator::webhook::certs::OLM_SERVING_CERTS_DIR;
use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, Issuer, KeyPair, KeyUsagePurpose};

/// A serving certificate and the CA that signed it, all PEM.
pub struct Issued {
    /// The CA certificate clients trust.
    pub ca_pem: String,
    /// The serving certificate.
    pub cert_pem: String,
    /// Its ECDSA P-256 key.
    pub key_pem: String,
}

/// Issues a CA and a serving certificate for `localhost` and `127.0.0.1`.
pub fn issue() -> Issued {
    let ca_key = KeyPair::generate().expect("an EC key");
    let mut ca = CertificateParams::new(Vec::<String>::new()).expect("no names");
    ca.distinguished_name
        .push(DnType::CommonName, "memcached-operator bench CA");
    ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
    let ca_cert = ca.self_signed(&ca_key).expect("a self-signed CA");
    let issuer = Issuer::new(ca, ca_key);
    let key = KeyPair::generate().expect("an EC key");
    let mut leaf = CertificateParams::new(vec!["localhost".to_string(), "127.0.0.1".to_string()])
        .expect("valid names");
    leaf.distinguished_name
        .push(DnType::CommonName, "memcached-operator-webhook-service");
    let cert = leaf
        .signed_by(&key, &issuer)
        .expect("a serving certificate");
    Issued {
        ca_pem: ca_cert.pem(),
        cert_pem: cert.pem(),
        key_pem: key.serialize_pem(),
    }
}

/// Writes the serving certificate at OLM's path under `root`:
/// `tmp/k8s-webhook-server/serving-certs/tls.{crt,key}`.
pub fn write_olm_layout(root: &Path, issued: &Issued) {
    let dir = root.join(OLM_SERVING_CERTS_DIR);
    std::fs::create_dir_all(&dir).expect("create the OLM certificate directory");
    std::fs::write(dir.join("tls.key"), &issued.key_pem).expect("write tls.key");
    std::fs::write(dir.join("tls.crt"), &issued.cert_pem).expect("write tls.crt");
}
