//! Finds the webhook serving certificate where OLM mounts it, loads it, and swaps in a new one
//! when the files change.
//!
//! Lookup order: `--cert-dir` (`tls.crt`, `tls.key`) when given; otherwise, under `--cert-root`,
//! controller-runtime's `tmp/k8s-webhook-server/serving-certs/tls.crt` (or `tls.cert`, as OLM's
//! docs spell it) with `tls.key`, then `apiserver.local.config/certificates/apiserver.crt` with
//! `apiserver.key`. The first pair that loads wins.
//!
//! The server never reads files itself: it asks [`CertResolver`] for the current key during
//! each TLS handshake, and `cert_reloader` replaces that key when the files change. This module
//! does not decide readiness or serve anything.

use std::fmt;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use arc_swap::ArcSwapOption;
use rustls::crypto::CryptoProvider;
use rustls::server::{ClientHello, ResolvesServerCert};
use rustls::sign::CertifiedKey;
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer};
use tokio::sync::watch;

/// Where controller-runtime (and OLM's first mount) keeps the serving certificate, relative to
/// the certificate root.
pub const OLM_SERVING_CERTS_DIR: &str = "tmp/k8s-webhook-server/serving-certs";
/// Where OLM's second mount keeps the same certificate, relative to the certificate root.
pub const OLM_APISERVER_CERTS_DIR: &str = "apiserver.local.config/certificates";

/// Returns the process-wide rustls crypto provider, installing `ring` as the default when no
/// provider is installed yet.
pub fn crypto_provider() -> Arc<CryptoProvider> {
    if let Some(provider) = CryptoProvider::get_default() {
        return provider.clone();
    }
    // Losing a race with another installer is fine: use whichever provider won.
    let _ = rustls::crypto::ring::default_provider().install_default();
    CryptoProvider::get_default()
        .cloned()
        .unwrap_or_else(|| Arc::new(rustls::crypto::ring::default_provider()))
}

/// A certificate file and its key file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CertPaths {
    /// The PEM certificate chain, leaf first.
    pub cert: PathBuf,
    /// The PEM private key (PKCS#8, PKCS#1 or SEC1).
    pub key: PathBuf,
}

impl fmt::Display for CertPaths {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} + {}", self.cert.display(), self.key.display())
    }
}

/// Lists the certificate pairs to try, in order.
pub fn candidates(cert_dir: Option<&Path>, cert_root: &Path) -> Vec<CertPaths> {
    if let Some(dir) = cert_dir {
        return vec![CertPaths {
            cert: dir.join("tls.crt"),
            key: dir.join("tls.key"),
        }];
    }
    let serving = cert_root.join(OLM_SERVING_CERTS_DIR);
    let apiserver = cert_root.join(OLM_APISERVER_CERTS_DIR);
    vec![
        CertPaths {
            cert: serving.join("tls.crt"),
            key: serving.join("tls.key"),
        },
        CertPaths {
            cert: serving.join("tls.cert"),
            key: serving.join("tls.key"),
        },
        CertPaths {
            cert: apiserver.join("apiserver.crt"),
            key: apiserver.join("apiserver.key"),
        },
    ]
}

/// Why one certificate pair could not be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CertError {
    /// The file does not exist.
    #[error("{}: does not exist", .0.display())]
    Missing(PathBuf),
    /// The file exists but could not be read.
    #[error("{}: cannot be read: {message}", .path.display())]
    Unreadable {
        /// The file.
        path: PathBuf,
        /// The I/O error.
        message: String,
    },
    /// The certificate file holds no PEM certificate, or a broken one.
    #[error("{}: no valid PEM certificate: {message}", .path.display())]
    BadCertificate {
        /// The file.
        path: PathBuf,
        /// What was wrong.
        message: String,
    },
    /// The key file holds no usable PEM private key.
    #[error("{}: no usable PEM private key (PKCS#8, PKCS#1 or SEC1): {message}", .path.display())]
    BadKey {
        /// The file.
        path: PathBuf,
        /// What was wrong.
        message: String,
    },
    /// The key does not belong to the certificate.
    #[error("{}: the key does not match the public key of {}", .key.display(), .cert.display())]
    Mismatch {
        /// The certificate file.
        cert: PathBuf,
        /// The key file.
        key: PathBuf,
    },
}

/// Why no certificate pair could be used: one reason per path tried, in lookup order.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("no usable certificate: {}", join_reasons(.0))]
pub struct LookupError(pub Vec<CertError>);

fn join_reasons(reasons: &[CertError]) -> String {
    reasons
        .iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join("; ")
}

/// The contents of one file, or why it could not be read; comparable, so that unchanged files
/// are not parsed again.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum FileContents {
    Read(Vec<u8>),
    Missing,
    Unreadable(String),
}

impl FileContents {
    fn read(path: &Path) -> Self {
        match std::fs::read(path) {
            Ok(bytes) => FileContents::Read(bytes),
            Err(error) if error.kind() == io::ErrorKind::NotFound => FileContents::Missing,
            Err(error) => FileContents::Unreadable(error.to_string()),
        }
    }

    fn bytes(&self, path: &Path) -> Result<&[u8], CertError> {
        match self {
            FileContents::Read(bytes) => Ok(bytes),
            FileContents::Missing => Err(CertError::Missing(path.to_path_buf())),
            FileContents::Unreadable(message) => Err(CertError::Unreadable {
                path: path.to_path_buf(),
                message: message.clone(),
            }),
        }
    }
}

/// The files of every candidate pair, read at one moment.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Snapshot(Vec<(FileContents, FileContents)>);

impl Snapshot {
    pub(crate) fn read(candidates: &[CertPaths]) -> Self {
        Snapshot(
            candidates
                .iter()
                .map(|paths| {
                    let cert = FileContents::read(&paths.cert);
                    // A missing certificate makes the key irrelevant; skip reading it.
                    let key = match cert {
                        FileContents::Missing => FileContents::Missing,
                        _ => FileContents::read(&paths.key),
                    };
                    (cert, key)
                })
                .collect(),
        )
    }
}

/// A loaded serving certificate and what is worth knowing about it.
#[derive(Clone, Debug)]
pub struct ServingCert {
    /// The chain and signing key rustls serves.
    pub key: Arc<CertifiedKey>,
    /// The files it came from.
    pub source: CertPaths,
    /// The leaf's serial number, hex with colons.
    pub serial: String,
    /// The leaf's notAfter, in Unix seconds.
    pub not_after: i64,
}

/// A certificate chain read from the PEM bytes of the file at `path`, and its leaf's serial
/// (hex with colons) and notAfter (Unix seconds).
pub fn parse_chain(
    path: &Path,
    cert_pem: &[u8],
) -> Result<(Vec<CertificateDer<'static>>, String, i64), CertError> {
    let bad_cert = |message: String| CertError::BadCertificate {
        path: path.to_path_buf(),
        message,
    };
    let chain = CertificateDer::pem_slice_iter(cert_pem)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|error| bad_cert(error.to_string()))?;
    let leaf = chain
        .first()
        .ok_or_else(|| bad_cert("no CERTIFICATE block".to_string()))?;
    let (_, parsed) = x509_parser::parse_x509_certificate(leaf)
        .map_err(|error| bad_cert(format!("not an X.509 certificate: {error}")))?;
    let serial = parsed.raw_serial_as_string();
    let not_after = parsed.validity().not_after.timestamp();
    Ok((chain, serial, not_after))
}

/// Loads a certificate chain and its key from PEM bytes, refusing a key that does not match
/// the leaf certificate.
pub fn load_pair(
    paths: &CertPaths,
    cert_pem: &[u8],
    key_pem: &[u8],
    provider: &CryptoProvider,
) -> Result<ServingCert, CertError> {
    let (chain, serial, not_after) = parse_chain(&paths.cert, cert_pem)?;
    let bad_key = |message: String| CertError::BadKey {
        path: paths.key.clone(),
        message,
    };
    let key = PrivateKeyDer::from_pem_slice(key_pem).map_err(|error| bad_key(error.to_string()))?;
    let signing_key = provider
        .key_provider
        .load_private_key(key)
        .map_err(|error| bad_key(error.to_string()))?;
    let certified = CertifiedKey::new(chain, signing_key);
    match certified.keys_match() {
        Ok(()) => {}
        // The provider cannot tell the key's public half: nothing to compare, accept it.
        Err(rustls::Error::InconsistentKeys(rustls::InconsistentKeys::Unknown)) => {}
        Err(_) => {
            return Err(CertError::Mismatch {
                cert: paths.cert.clone(),
                key: paths.key.clone(),
            });
        }
    }
    Ok(ServingCert {
        key: Arc::new(certified),
        source: paths.clone(),
        serial,
        not_after,
    })
}

/// Tries every candidate in order and returns the first pair that loads.
pub(crate) fn lookup(
    candidates: &[CertPaths],
    snapshot: &Snapshot,
    provider: &CryptoProvider,
) -> Result<ServingCert, LookupError> {
    let mut reasons = Vec::new();
    for (paths, (cert, key)) in candidates.iter().zip(&snapshot.0) {
        let loaded = cert.bytes(&paths.cert).and_then(|cert_pem| {
            let key_pem = key.bytes(&paths.key)?;
            load_pair(paths, cert_pem, key_pem, provider)
        });
        match loaded {
            Ok(serving) => return Ok(serving),
            Err(reason) => reasons.push(reason),
        }
    }
    Err(LookupError(reasons))
}

/// Hands rustls the current serving certificate during each handshake.
///
/// Swapping the certificate is one atomic pointer store: handshakes in progress keep the
/// certificate they started with, new ones get the new one, and no request fails.
#[derive(Debug, Default)]
pub struct CertResolver {
    current: ArcSwapOption<CertifiedKey>,
}

impl CertResolver {
    /// Whether a certificate is loaded.
    pub fn is_loaded(&self) -> bool {
        self.current.load().is_some()
    }

    /// Serves this certificate from now on.
    pub fn set(&self, key: Arc<CertifiedKey>) {
        self.current.store(Some(key));
    }
}

impl ResolvesServerCert for CertResolver {
    fn resolve(&self, _client_hello: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        self.current.load_full()
    }
}

/// The newest usable pair read from the certificate Secrets, if any: what `cert_secret`
/// publishes and `cert_reloader::CertReloader::with_secrets` serves.
pub type SecretPairs = watch::Receiver<Option<ServingCert>>;

#[cfg(test)]
mod tests;
