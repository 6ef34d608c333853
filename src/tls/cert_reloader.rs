//! Swaps in a new webhook serving certificate when its files change (watched with `notify`,
//! plus a periodic poll), or when a certificate Secret read through the API brings one: the
//! pairs `certs` finds and loads, served through its [`CertResolver`]. A pair that does not
//! load, for instance a key that does not match the certificate, is refused and the loaded one
//! kept.
//!
//! Given the API server's trust (`trust_watch`), a renewed pair that none of its CA bundles
//! accept yet is held, and the served one kept, until one of them does: a renewal that changes
//! the CA (cert-manager with a self-signed issuer) whose files land before cainjector rewrites
//! the bundles then fails no call on a new connection. A pair is never held against one that
//! has expired or that no bundle accepts either.

use std::collections::BTreeSet;
use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use notify::{RecursiveMode, Watcher};
use rustls::crypto::CryptoProvider;
use tokio::sync::Notify;

use super::certs::{
    CertPaths, CertResolver, LookupError, SecretPairs, ServingCert, Snapshot, lookup,
};
use super::trust_watch::TrustWatch;

/// How long to wait after a file event before reading, so that a burst of events (a kubelet
/// `..data` swap makes several) leads to one reload.
const DEBOUNCE: Duration = Duration::from_millis(50);

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
/// use memcached_operator::tls::cert_reloader::CertReloader;
/// use memcached_operator::tls::certs::{self, CertResolver};
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
