//! Finds the webhook serving certificate where OLM mounts it, loads it, and swaps in a new one
//! when the files change.
//!
//! Lookup order: `--cert-dir` (`tls.crt`, `tls.key`) when given; otherwise, under `--cert-root`,
//! controller-runtime's `tmp/k8s-webhook-server/serving-certs/tls.crt` (or `tls.cert`, as OLM's
//! docs spell it) with `tls.key`, then `apiserver.local.config/certificates/apiserver.crt` with
//! `apiserver.key`. The first pair that loads wins.
//!
//! The server never reads files itself: it asks [`CertResolver`] for the current key during
//! each TLS handshake, and [`CertReloader`] replaces that key when the files change (watched
//! with `notify`, plus a periodic poll). A pair that does not load, for instance a key that does
//! not match the certificate, is refused and the loaded one kept. This module does not decide
//! readiness or serve anything.
//!
//! Given the API server's trust (`trust_watch`), a renewed pair that none of its CA bundles
//! accept yet is held, and the served one kept, until one of them does: a renewal that changes
//! the CA (cert-manager with a self-signed issuer) whose files land before cainjector rewrites
//! the bundles then fails no call on a new connection. A pair is never held against one that
//! has expired or that no bundle accepts either.

use std::collections::BTreeSet;
use std::fmt;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use arc_swap::ArcSwapOption;
use notify::{RecursiveMode, Watcher};
use rustls::crypto::CryptoProvider;
use rustls::server::{ClientHello, ResolvesServerCert};
use rustls::sign::CertifiedKey;
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer};
use tokio::sync::{Notify, watch};

use super::trust_watch::TrustWatch;

/// Where controller-runtime (and OLM's first mount) keeps the serving certificate, relative to
/// the certificate root.
pub const OLM_SERVING_CERTS_DIR: &str = "tmp/k8s-webhook-server/serving-certs";
/// Where OLM's second mount keeps the same certificate, relative to the certificate root.
pub const OLM_APISERVER_CERTS_DIR: &str = "apiserver.local.config/certificates";

/// How long to wait after a file event before reading, so that a burst of events (a kubelet
/// `..data` swap makes several) leads to one reload.
const DEBOUNCE: Duration = Duration::from_millis(50);

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
enum FileContents {
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
struct Snapshot(Vec<(FileContents, FileContents)>);

impl Snapshot {
    fn read(candidates: &[CertPaths]) -> Self {
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

/// Loads a certificate chain and its key from PEM bytes, refusing a key that does not match
/// the leaf certificate.
pub fn load_pair(
    paths: &CertPaths,
    cert_pem: &[u8],
    key_pem: &[u8],
    provider: &CryptoProvider,
) -> Result<ServingCert, CertError> {
    let bad_cert = |message: String| CertError::BadCertificate {
        path: paths.cert.clone(),
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
fn lookup(
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

/// What one check of the certificate files found.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum CheckOutcome {
    /// The files are as they were last time.
    Unchanged,
    /// A new certificate is being served.
    Loaded {
        /// The leaf's serial number.
        serial: String,
    },
    /// The files changed but none of them load; the previous certificate, if any, is kept.
    Refused(LookupError),
    /// A new certificate loaded, but fewer of the API server's CA bundles accept it than the
    /// one served, which is kept until they do.
    Held {
        /// The held leaf's serial number.
        serial: String,
        /// The trust points that refuse it.
        refused_by: Vec<String>,
    },
}

/// The newest usable pair read from the certificate Secrets, if any: what `cert_secret`
/// publishes and [`CertReloader::with_secrets`] serves.
pub type SecretPairs = watch::Receiver<Option<ServingCert>>;

/// Where a [`CertReloader`] reports what it loads: the metrics of the server it feeds.
pub trait ReloadRecorder: Send + Sync + 'static {
    /// A pair was loaded and is served; its certificate expires at `not_after_unix`.
    fn loaded(&self, not_after_unix: i64);
    /// Changed files could not be loaded; the served pair stays.
    fn failed(&self);
}

/// Watches the certificate files and keeps [`CertResolver`] serving the newest pair that loads.
///
/// # Example
///
/// ```no_run
/// use std::path::Path;
/// use std::sync::Arc;
/// use std::time::Duration;
///
/// use memcached_operator::tls::profile::TlsSettings;
/// use memcached_operator::webhook::metrics::Metrics;
/// use memcached_operator::tls::certs::{self, CertReloader, CertResolver};
/// use memcached_operator::tls::config::tls_config;
///
/// # async fn serve() -> Result<(), rustls::Error> {
/// let resolver = Arc::new(CertResolver::default());
/// let mut reloader = CertReloader::new(
///     certs::candidates(None, Path::new("/")),
///     resolver.clone(),
///     certs::crypto_provider(),
///     Metrics::default(),
/// );
/// reloader.check(); // load whatever is there now, before serving
/// tokio::spawn(reloader.run(Duration::from_secs(10)));
/// let settings = TlsSettings::intermediate();
/// let config = tls_config(resolver, certs::crypto_provider(), &settings, false)?;
/// // Serve with `config`: every handshake gets the newest certificate.
/// # Ok(())
/// # }
/// ```
pub struct CertReloader {
    candidates: Vec<CertPaths>,
    resolver: Arc<CertResolver>,
    provider: Arc<CryptoProvider>,
    recorder: Box<dyn ReloadRecorder>,
    last_snapshot: Option<Snapshot>,
    current: Option<ServingCert>,
    last_logged_failure: Option<LookupError>,
    trust: Option<TrustWatch>,
    held: Option<(ServingCert, std::time::Instant)>,
    secrets: Option<SecretPairs>,
}

impl fmt::Debug for CertReloader {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CertReloader")
            .field("candidates", &self.candidates)
            .field("current", &self.current.as_ref().map(|c| &c.serial))
            .finish_non_exhaustive()
    }
}

impl CertReloader {
    /// Creates a reloader for the candidate pairs, feeding `resolver` and reporting to
    /// `recorder`.
    pub fn new(
        candidates: Vec<CertPaths>,
        resolver: Arc<CertResolver>,
        provider: Arc<CryptoProvider>,
        recorder: impl ReloadRecorder,
    ) -> Self {
        CertReloader {
            candidates,
            resolver,
            provider,
            recorder: Box::new(recorder),
            last_snapshot: None,
            current: None,
            last_logged_failure: None,
            trust: None,
            held: None,
            secrets: None,
        }
    }

    /// Also serves the pairs read from the certificate Secrets, judged like the files' pairs.
    pub fn with_secrets(mut self, secrets: SecretPairs) -> Self {
        self.secrets = Some(secrets);
        self
    }

    /// Judges renewed pairs by the API server's trust before serving them.
    pub fn with_trust(mut self, trust: TrustWatch) -> Self {
        self.trust = Some(trust);
        self
    }

    /// When the held pair, if any, may be served now: serves it.
    pub fn reconsider(&mut self) -> CheckOutcome {
        match self.held.take() {
            Some((held, since)) => {
                let outcome = self.serve(held);
                if let CheckOutcome::Loaded { serial } = &outcome {
                    tracing::info!(
                        %serial,
                        held_ms = since.elapsed().as_secs_f64() * 1000.0,
                        "the API server now trusts the held certificate"
                    );
                } else if let Some((_, held_since)) = self.held.as_mut() {
                    *held_since = since;
                }
                outcome
            }
            None => CheckOutcome::Unchanged,
        }
    }

    /// When `serving` should wait: no trust point accepts it yet while some accept the served
    /// certificate. Returns the points that refuse it.
    ///
    /// One accepting point is enough to switch: the API server builds a new client, and so
    /// makes new connections, for a configuration whose bundle changed, and those need the new
    /// pair at once; the clients of bundles not rewritten yet go on with the connections they
    /// have.
    fn refused_in_favour_of_current(&self, serving: &ServingCert) -> Option<Vec<String>> {
        let trust = self.trust.as_ref()?.borrow().clone();
        let current = self.current.as_ref()?;
        if trust.is_unknown() {
            return None;
        }
        let now = rustls_pki_types::UnixTime::now();
        let refusing_new = trust.refusing(&serving.key.cert, now, &self.provider);
        let refusing_current = trust.refusing(&current.key.cert, now, &self.provider);
        let everywhere = trust.points.len();
        (refusing_new.len() == everywhere && refusing_current.len() < everywhere)
            .then(|| refusing_new.into_iter().map(str::to_string).collect())
    }

    /// Reads the files and, when they changed, loads the first usable pair. Logs a failure
    /// only when its reasons differ from the last failure logged.
    pub fn check(&mut self) -> CheckOutcome {
        let snapshot = Snapshot::read(&self.candidates);
        if self.last_snapshot.as_ref() == Some(&snapshot) {
            return CheckOutcome::Unchanged;
        }
        let outcome = match lookup(&self.candidates, &snapshot, &self.provider) {
            Ok(serving) => self.serve(serving),
            Err(failure) => {
                self.recorder.failed();
                if self.last_logged_failure.as_ref() != Some(&failure) {
                    match &self.current {
                        None => tracing::warn!("{failure}; not ready, still looking"),
                        Some(current) => tracing::warn!(
                            serial = %current.serial,
                            source = %current.source,
                            "refusing the changed certificate files, keeping the loaded certificate: {failure}"
                        ),
                    }
                    self.last_logged_failure = Some(failure.clone());
                }
                CheckOutcome::Refused(failure)
            }
        };
        self.last_snapshot = Some(snapshot);
        outcome
    }

    fn serve(&mut self, serving: ServingCert) -> CheckOutcome {
        self.last_logged_failure = None;
        let unchanged = self
            .current
            .as_ref()
            .is_some_and(|current| current.key.cert == serving.key.cert);
        if unchanged {
            self.held = None;
            return CheckOutcome::Unchanged;
        }
        if let Some(refused_by) = self.refused_in_favour_of_current(&serving) {
            let already_held = self
                .held
                .as_ref()
                .is_some_and(|(held, _)| held.key.cert == serving.key.cert);
            if !already_held {
                tracing::info!(
                    serial = %serving.serial,
                    serving = %self.current.as_ref().map(|c| c.serial.as_str()).unwrap_or_default(),
                    refused_by = %refused_by.join(", "),
                    "holding the renewed certificate until the API server trusts its CA"
                );
            }
            let serial = serving.serial.clone();
            let since = self
                .held
                .take()
                .map_or_else(std::time::Instant::now, |(_, since)| since);
            self.held = Some((serving, since));
            return CheckOutcome::Held { serial, refused_by };
        }
        self.held = None;
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_secs())
            .unwrap_or_default();
        let expired = u64::try_from(serving.not_after).map_or(true, |not_after| not_after <= now);
        if expired {
            tracing::warn!(
                source = %serving.source,
                serial = %serving.serial,
                not_after = serving.not_after,
                "the serving certificate has expired; serving it until a new one appears"
            );
        }
        tracing::info!(
            source = %serving.source,
            serial = %serving.serial,
            not_after = serving.not_after,
            chain_length = serving.key.cert.len(),
            "serving certificate loaded"
        );
        self.resolver.set(serving.key.clone());
        self.recorder.loaded(serving.not_after);
        let serial = serving.serial.clone();
        self.current = Some(serving);
        CheckOutcome::Loaded { serial }
    }

    /// Directories that hold the candidate files: watched for changes, since the kubelet
    /// swaps a `..data` symlink in them rather than writing the files in place.
    fn directories(&self) -> BTreeSet<PathBuf> {
        self.candidates
            .iter()
            .flat_map(|paths| [paths.cert.parent(), paths.key.parent()])
            .flatten()
            .map(Path::to_path_buf)
            .collect()
    }

    /// Checks the files whenever a watched directory changes and every `poll_interval`,
    /// forever. Directories that do not exist yet are watched once they appear.
    pub async fn run(mut self, poll_interval: Duration) {
        let mut trust = self.trust.clone();
        let mut secrets = self.secrets.take();
        let changed = Arc::new(Notify::new());
        let notifier = changed.clone();
        let mut watcher =
            match notify::recommended_watcher(move |event: notify::Result<notify::Event>| {
                // Opening a file is an event too: reacting to it would make every check
                // trigger the next one.
                if event.is_ok_and(|event| !matches!(event.kind, notify::EventKind::Access(_))) {
                    notifier.notify_one();
                }
            }) {
                Ok(watcher) => Some(watcher),
                Err(error) => {
                    tracing::warn!(%error, "cannot watch certificate files; polling only");
                    None
                }
            };
        let mut watched = BTreeSet::new();
        loop {
            if let Some(watcher) = watcher.as_mut() {
                for dir in self.directories() {
                    if !watched.contains(&dir)
                        && dir.is_dir()
                        && watcher.watch(&dir, RecursiveMode::NonRecursive).is_ok()
                    {
                        tracing::debug!(dir = %dir.display(), "watching certificate directory");
                        watched.insert(dir);
                    }
                }
            }
            tokio::select! {
                () = changed.notified() => tokio::time::sleep(DEBOUNCE).await,
                Ok(()) = async {
                    match trust.as_mut() {
                        Some(trust) => trust.changed().await,
                        None => std::future::pending().await,
                    }
                } => {
                    self.reconsider();
                    continue;
                }
                Ok(()) = async {
                    match secrets.as_mut() {
                        Some(secrets) => secrets.changed().await,
                        None => std::future::pending().await,
                    }
                } => {
                    let pair = secrets.as_mut().and_then(|s| s.borrow_and_update().clone());
                    if let Some(pair) = pair {
                        self.serve(pair);
                    }
                    continue;
                }
                () = tokio::time::sleep(poll_interval) => {
                    // A directory removed and created again loses its watch: renew them all.
                    if let Some(watcher) = watcher.as_mut() {
                        for dir in std::mem::take(&mut watched) {
                            let _ = watcher.unwatch(&dir);
                        }
                    }
                }
            }
            self.check();
            self.reconsider();
        }
    }
}

#[cfg(test)]
mod tests;
