//! Issues test certificates with rcgen and lays them out on disk the way OLM and the kubelet do.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use memcached_operator::webhook::certs::{OLM_APISERVER_CERTS_DIR, OLM_SERVING_CERTS_DIR};
use rcgen::{
    BasicConstraints, CertificateParams, DnType, IsCa, Issuer, KeyPair, KeyUsagePurpose,
    SerialNumber,
};

/// The RSA key of the PKCS#1 case, as PKCS#8 (for rcgen) and PKCS#1 (for the server).
const RSA_PKCS8: &str = include_str!("keys/rsa.pkcs8.pem");
const RSA_PKCS1: &str = include_str!("keys/rsa.pkcs1.pem");
/// The EC key of the SEC1 case, as PKCS#8 (for rcgen) and SEC1 (for the server).
const EC_PKCS8: &str = include_str!("keys/ec.pkcs8.pem");
const EC_SEC1: &str = include_str!("keys/ec.sec1.pem");

static NEXT_SERIAL: AtomicU64 = AtomicU64::new(1000);

/// A serial number no other certificate of this test run has.
fn next_serial() -> u64 {
    NEXT_SERIAL.fetch_add(1, Ordering::Relaxed)
}

/// The private key of a serving certificate, in one of the PEM forms the server accepts.
#[derive(Clone, Copy, Debug)]
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
    pub fn root() -> Ca {
        let key = KeyPair::generate().expect("an EC key");
        let params = ca_params("memcached-operator test root");
        let cert = params.self_signed(&key).expect("a self-signed CA");
        Ca {
            pem: cert.pem(),
            issuer: Issuer::new(params, key),
        }
    }

    /// An intermediate CA signed by this one.
    pub fn intermediate(&self) -> Ca {
        let key = KeyPair::generate().expect("an EC key");
        let params = ca_params("memcached-operator test intermediate");
        let cert = params
            .signed_by(&key, &self.issuer)
            .expect("an intermediate");
        Ca {
            pem: cert.pem(),
            issuer: Issuer::new(params, key),
        }
    }

    /// A serving certificate for localhost and 127.0.0.1 with a key in `form`.
    pub fn serving(&self, form: KeyForm) -> Leaf {
        let (signing_pem, served_key_pem) = match form {
            KeyForm::EcPkcs8 => {
                let key = KeyPair::generate().expect("an EC key");
                let pem = key.serialize_pem();
                (pem.clone(), pem)
            }
            KeyForm::EcSec1 => (EC_PKCS8.to_string(), EC_SEC1.to_string()),
            KeyForm::RsaPkcs1 => (RSA_PKCS8.to_string(), RSA_PKCS1.to_string()),
            KeyForm::RsaPkcs8 => (RSA_PKCS8.to_string(), RSA_PKCS8.to_string()),
        };
        let key = KeyPair::from_pem(&signing_pem).expect("a PKCS#8 key rcgen reads");
        self.sign(
            &key,
            served_key_pem,
            serving_params(&["localhost", "127.0.0.1"]),
        )
    }

    /// A serving certificate (fresh EC key) for exactly `names`, which may leave out the
    /// address a client dials.
    pub fn serving_for(&self, names: &[&str]) -> Leaf {
        let key = KeyPair::generate().expect("an EC key");
        let pem = key.serialize_pem();
        self.sign(&key, pem, serving_params(names))
    }

    /// A serving certificate for localhost and 127.0.0.1 that expired at the end of 2020.
    pub fn expired_serving(&self) -> Leaf {
        let key = KeyPair::generate().expect("an EC key");
        let pem = key.serialize_pem();
        let mut params = serving_params(&["localhost", "127.0.0.1"]);
        params.not_before = rcgen::date_time_ymd(2020, 1, 1);
        params.not_after = rcgen::date_time_ymd(2021, 1, 1);
        self.sign(&key, pem, params)
    }

    fn sign(&self, key: &KeyPair, served_key_pem: String, params: CertificateParams) -> Leaf {
        let cert = params.signed_by(key, &self.issuer).expect("a serving cert");
        Leaf {
            serial: serial_of(cert.der()),
            cert_pem: cert.pem(),
            key_pem: served_key_pem,
        }
    }
}

fn serving_params(names: &[&str]) -> CertificateParams {
    let names = names
        .iter()
        .map(|name| name.to_string())
        .collect::<Vec<_>>();
    let mut params = CertificateParams::new(names).expect("valid names");
    params
        .distinguished_name
        .push(DnType::CommonName, "memcached-operator-webhook-service");
    params.serial_number = Some(SerialNumber::from(next_serial()));
    params
}

fn ca_params(name: &str) -> CertificateParams {
    let mut params = CertificateParams::new(Vec::<String>::new()).expect("no names");
    params.distinguished_name.push(DnType::CommonName, name);
    params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    params.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
    params.serial_number = Some(SerialNumber::from(next_serial()));
    params
}

/// The serial number of a DER certificate as the server logs it: hex bytes with colons.
pub fn serial_of(der: &[u8]) -> String {
    let (_, cert) = x509_parser::parse_x509_certificate(der).expect("an X.509 certificate");
    cert.raw_serial_as_string()
}

/// A serving certificate and its key.
#[derive(Clone)]
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

/// Where a test writes the certificate, relative to the OLM root.
#[derive(Clone, Copy, Debug)]
pub enum Layout {
    /// `tmp/k8s-webhook-server/serving-certs/tls.crt` + `tls.key`.
    ServingCerts,
    /// `tmp/k8s-webhook-server/serving-certs/tls.cert` + `tls.key` (OLM's docs' spelling).
    ServingCertsTlsCert,
    /// `apiserver.local.config/certificates/apiserver.crt` + `apiserver.key`.
    ApiServer,
}

impl Layout {
    /// The directory and the certificate and key file names.
    pub fn files(self, root: &Path) -> (PathBuf, &'static str, &'static str) {
        match self {
            Layout::ServingCerts => (root.join(OLM_SERVING_CERTS_DIR), "tls.crt", "tls.key"),
            Layout::ServingCertsTlsCert => {
                (root.join(OLM_SERVING_CERTS_DIR), "tls.cert", "tls.key")
            }
            Layout::ApiServer => (
                root.join(OLM_APISERVER_CERTS_DIR),
                "apiserver.crt",
                "apiserver.key",
            ),
        }
    }
}

/// Writes a certificate and key under `root` in `layout`, each file atomically (written aside,
/// then renamed), key first.
pub fn write(root: &Path, layout: Layout, cert_pem: &str, key_pem: &str) {
    let (dir, cert, key) = layout.files(root);
    std::fs::create_dir_all(&dir).expect("create the certificate directory");
    for (name, contents) in [(key, key_pem), (cert, cert_pem)] {
        let aside = dir.join(format!(".{name}.tmp"));
        std::fs::write(&aside, contents).expect("write a certificate file");
        std::fs::rename(&aside, dir.join(name)).expect("rename a certificate file");
    }
}

/// A Secret volume as the kubelet maintains it: the files live in a timestamped directory,
/// `..data` links to it, and `tls.crt`/`tls.key` link through `..data`. An update writes a new
/// directory and renames a fresh `..data_tmp` link over `..data`.
pub struct KubeletVolume {
    dir: PathBuf,
    generation: u32,
}

impl KubeletVolume {
    /// A volume at `dir` (created) publishing `tls.crt` and `tls.key`.
    pub fn new(dir: &Path) -> KubeletVolume {
        std::fs::create_dir_all(dir).expect("create the volume directory");
        KubeletVolume {
            dir: dir.to_path_buf(),
            generation: 0,
        }
    }

    /// Publishes a new certificate and key the way the kubelet's atomic writer does.
    pub fn publish(&mut self, cert_pem: &str, key_pem: &str) {
        self.generation += 1;
        let timestamped = format!("..2026_11_22_13_00_00.{:010}", self.generation);
        let data = self.dir.join(&timestamped);
        std::fs::create_dir(&data).expect("create the timestamped directory");
        std::fs::write(data.join("tls.crt"), cert_pem).expect("write tls.crt");
        std::fs::write(data.join("tls.key"), key_pem).expect("write tls.key");
        let old = std::fs::read_link(self.dir.join("..data")).ok();
        let tmp = self.dir.join("..data_tmp");
        std::os::unix::fs::symlink(&timestamped, &tmp).expect("create ..data_tmp");
        std::fs::rename(&tmp, self.dir.join("..data")).expect("swap ..data");
        for name in ["tls.crt", "tls.key"] {
            let link = self.dir.join(name);
            if std::fs::symlink_metadata(&link).is_err() {
                std::os::unix::fs::symlink(format!("..data/{name}"), &link)
                    .expect("link a file through ..data");
            }
        }
        if let Some(old) = old {
            std::fs::remove_dir_all(self.dir.join(old)).expect("remove the old directory");
        }
    }
}
