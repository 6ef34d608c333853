//! Provides the metrics listener's serving certificate: the pair mounted in
//! `--metrics-cert-dir` (`tls.crt`, `tls.key`; on OpenShift, the service-ca Secret the metrics
//! Service asks for) when there is one, otherwise a self-signed certificate made at start-up.
//!
//! The directory is read again every poll interval: a pair that appears (the optional Secret
//! volume filled after start-up) or rotates is served from the next handshake on, through the
//! same [`CertResolver`] the webhooks use; a pair that does not load is refused and the served
//! certificate kept. A self-signed certificate is renewed a month before it expires. This
//! module decides nothing about callers and serves nothing.

use std::io;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use jiff::tz::TimeZone;
use jiff::{Span, Timestamp};
use rustls::crypto::CryptoProvider;
use rustls::sign::CertifiedKey;
use rustls_pki_types::{PrivateKeyDer, PrivatePkcs8KeyDer};

use crate::operator;
use crate::tls::certs::{CertPaths, CertResolver, load_pair};

/// How long a self-signed certificate is valid, in days.
const SELF_SIGNED_DAYS: i64 = 365;
/// How long before its expiry a self-signed certificate is replaced, in seconds (30 days).
const RENEW_BEFORE_SECONDS: i64 = 30 * 24 * 3600;

/// Why no self-signed certificate could be made.
#[derive(Debug, thiserror::Error)]
#[error("cannot make a self-signed metrics certificate: {0}")]
pub struct SelfSignError(String);

/// A self-signed certificate and its expiry.
pub struct SelfSigned {
    /// The certificate and key rustls serves.
    pub key: Arc<CertifiedKey>,
    /// Its notAfter, in Unix seconds.
    pub not_after: i64,
}

/// The names a self-signed metrics certificate is made for: `localhost`, and the metrics
/// Service's in-cluster names when the namespace is known.
pub fn names(namespace: Option<&str>) -> Vec<String> {
    let mut names = vec!["localhost".to_string()];
    if let Some(namespace) = namespace.filter(|n| !n.is_empty()) {
        let service = operator::METRICS_SERVICE_NAME;
        names.push(format!("{service}.{namespace}.svc"));
        names.push(format!("{service}.{namespace}.svc.cluster.local"));
    }
    names
}

/// Makes a self-signed certificate (ECDSA P-256) for `names`, valid from yesterday for
/// [`SELF_SIGNED_DAYS`] days.
pub fn self_signed(
    names: Vec<String>,
    provider: &CryptoProvider,
) -> Result<SelfSigned, SelfSignError> {
    let error = |what: &str, e: &dyn std::fmt::Display| SelfSignError(format!("{what}: {e}"));
    let key = rcgen::KeyPair::generate().map_err(|e| error("key", &e))?;
    let mut params = rcgen::CertificateParams::new(names).map_err(|e| error("names", &e))?;
    params
        .distinguished_name
        .push(rcgen::DnType::CommonName, operator::METRICS_SERVICE_NAME);
    params.extended_key_usages = vec![rcgen::ExtendedKeyUsagePurpose::ServerAuth];
    let today = Timestamp::now().to_zoned(TimeZone::UTC).date();
    let from = today.yesterday().map_err(|e| error("date", &e))?;
    let until = today
        .checked_add(Span::new().days(SELF_SIGNED_DAYS))
        .map_err(|e| error("date", &e))?;
    let ymd = |date: jiff::civil::Date| {
        // A civil date's month and day always fit in a u8.
        rcgen::date_time_ymd(
            i32::from(date.year()),
            u8::try_from(date.month()).unwrap_or(1),
            u8::try_from(date.day()).unwrap_or(1),
        )
    };
    params.not_before = ymd(from);
    params.not_after = ymd(until);
    let cert = params.self_signed(&key).map_err(|e| error("signing", &e))?;
    let not_after = x509_parser::parse_x509_certificate(cert.der())
        .map_err(|e| error("reading it back", &e))?
        .1
        .validity()
        .not_after
        .timestamp();
    let private = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(key.serialize_der()));
    let signing = provider
        .key_provider
        .load_private_key(private)
        .map_err(|e| error("loading the key", &e))?;
    Ok(SelfSigned {
        key: Arc::new(CertifiedKey::new(vec![cert.der().clone()], signing)),
        not_after,
    })
}

/// What is being served.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Serving {
    /// Nothing yet.
    Nothing,
    /// A self-signed certificate with this notAfter (Unix seconds).
    SelfSigned {
        /// Its notAfter.
        not_after: i64,
    },
    /// The mounted pair, with the leaf's serial number.
    Files {
        /// The serial number.
        serial: String,
    },
}

/// Keeps the metrics listener's [`CertResolver`] serving the mounted pair, or a self-signed
/// certificate while there is none.
pub struct MetricsCert {
    paths: CertPaths,
    names: Vec<String>,
    resolver: Arc<CertResolver>,
    provider: Arc<CryptoProvider>,
    serving: Serving,
    last_files: Option<(Vec<u8>, Vec<u8>)>,
}

impl MetricsCert {
    /// Serves into `resolver` from `dir`, self-signing for `names` when `dir` has no pair.
    pub fn new(
        dir: &Path,
        names: Vec<String>,
        resolver: Arc<CertResolver>,
        provider: Arc<CryptoProvider>,
    ) -> Self {
        MetricsCert {
            paths: CertPaths {
                cert: dir.join("tls.crt"),
                key: dir.join("tls.key"),
            },
            names,
            resolver,
            provider,
            serving: Serving::Nothing,
            last_files: None,
        }
    }

    /// What is served now.
    pub fn serving(&self) -> &Serving {
        &self.serving
    }

    /// Serves the mounted pair when it changed and loads, else keeps what is served, and
    /// makes a self-signed certificate when nothing is served or the self-signed one is a
    /// month from expiry.
    pub fn check(&mut self) -> Result<&Serving, SelfSignError> {
        match read(&self.paths) {
            Ok(Some(files)) => self.load(files),
            Ok(None) => {
                if matches!(self.serving, Serving::Files { .. }) && self.last_files.is_some() {
                    tracing::warn!(
                        dir = %self.paths.cert.parent().unwrap_or(Path::new("")).display(),
                        "the metrics certificate files are gone; keeping the loaded certificate"
                    );
                }
                self.last_files = None;
            }
            Err(error) => tracing::warn!(%error, "cannot read the metrics certificate files"),
        }
        let now = Timestamp::now().as_second();
        let renew = match self.serving {
            Serving::Nothing => true,
            Serving::SelfSigned { not_after } => not_after - now < RENEW_BEFORE_SECONDS,
            Serving::Files { .. } => false,
        };
        if renew {
            let made = self_signed(self.names.clone(), &self.provider)?;
            if self.serving == Serving::Nothing {
                tracing::info!(
                    dir = %self.paths.cert.parent().unwrap_or(Path::new("")).display(),
                    names = ?self.names,
                    not_after = made.not_after,
                    "no metrics serving certificate mounted: serving a self-signed certificate \
                     made at start-up (scrapers must skip verification, as the ServiceMonitor does)"
                );
            } else {
                tracing::info!(
                    not_after = made.not_after,
                    "renewed the self-signed metrics serving certificate"
                );
            }
            self.resolver.set(made.key);
            self.serving = Serving::SelfSigned {
                not_after: made.not_after,
            };
        }
        Ok(&self.serving)
    }

    fn load(&mut self, files: (Vec<u8>, Vec<u8>)) {
        if self.last_files.as_ref() == Some(&files) {
            return;
        }
        match load_pair(&self.paths, &files.0, &files.1, &self.provider) {
            Ok(loaded) => {
                tracing::info!(
                    source = %loaded.source,
                    serial = %loaded.serial,
                    not_after = loaded.not_after,
                    "metrics serving certificate loaded"
                );
                self.resolver.set(loaded.key);
                self.serving = Serving::Files {
                    serial: loaded.serial,
                };
            }
            Err(error) => tracing::warn!(
                serving = ?self.serving,
                "refusing the metrics certificate files, keeping the certificate served: {error}"
            ),
        }
        self.last_files = Some(files);
    }

    /// Checks the files every `poll_interval`, forever.
    pub async fn run(mut self, poll_interval: Duration) {
        loop {
            tokio::time::sleep(poll_interval).await;
            if let Err(error) = self.check() {
                tracing::warn!(%error, "keeping the metrics certificate served");
            }
        }
    }
}

/// Both files' bytes, `None` when the certificate file does not exist.
fn read(paths: &CertPaths) -> io::Result<Option<(Vec<u8>, Vec<u8>)>> {
    let cert = match std::fs::read(&paths.cert) {
        Ok(bytes) => bytes,
        Err(error) if error.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(error) => return Err(error),
    };
    let key = match std::fs::read(&paths.key) {
        Ok(bytes) => bytes,
        // A certificate without its key: the pair is refused as a whole when loaded.
        Err(error) if error.kind() == io::ErrorKind::NotFound => Vec::new(),
        Err(error) => return Err(error),
    };
    Ok(Some((cert, key)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tls::certs::crypto_provider;

    fn pair(name: &str) -> (String, String) {
        let made = rcgen::generate_simple_self_signed(vec![name.to_string()]).expect("a pair");
        (made.cert.pem(), made.signing_key.serialize_pem())
    }

    fn write(dir: &Path, (cert, key): &(String, String)) {
        std::fs::write(dir.join("tls.crt"), cert).expect("write tls.crt");
        std::fs::write(dir.join("tls.key"), key).expect("write tls.key");
    }

    fn cert(dir: &Path) -> (MetricsCert, Arc<CertResolver>) {
        let resolver = Arc::new(CertResolver::default());
        let cert = MetricsCert::new(dir, names(Some("ops")), resolver.clone(), crypto_provider());
        (cert, resolver)
    }

    #[test]
    fn without_files_a_self_signed_certificate_for_the_service_is_served() {
        let dir = tempfile::tempdir().expect("a directory");
        let (mut cert, resolver) = cert(&dir.path().join("absent"));
        assert!(!resolver.is_loaded());
        let serving = cert.check().expect("self-signed").clone();
        let Serving::SelfSigned { not_after } = serving else {
            panic!("expected a self-signed certificate, got {serving:?}")
        };
        let now = Timestamp::now().as_second();
        let days = (not_after - now) / 86_400;
        assert!((364..=365).contains(&days), "valid for {days} days");
        assert!(resolver.is_loaded());
    }

    #[test]
    fn the_self_signed_certificate_names_the_metrics_service() {
        let made = self_signed(names(Some("ops")), &crypto_provider()).expect("made");
        let (_, parsed) =
            x509_parser::parse_x509_certificate(&made.key.cert[0]).expect("an X.509 certificate");
        let sans: Vec<String> = parsed
            .subject_alternative_name()
            .expect("well-formed")
            .expect("present")
            .value
            .general_names
            .iter()
            .map(ToString::to_string)
            .collect();
        assert_eq!(
            sans,
            [
                "DNSName(localhost)".to_string(),
                format!("DNSName({}.ops.svc)", operator::METRICS_SERVICE_NAME),
                format!(
                    "DNSName({}.ops.svc.cluster.local)",
                    operator::METRICS_SERVICE_NAME
                ),
            ]
        );
        assert_eq!(names(None), ["localhost"]);
    }

    #[test]
    fn mounted_files_win_and_a_rotation_is_picked_up() {
        let dir = tempfile::tempdir().expect("a directory");
        write(dir.path(), &pair("first"));
        let (mut cert, _) = cert(dir.path());
        let first = cert.check().expect("loads").clone();
        assert!(matches!(first, Serving::Files { .. }), "{first:?}");
        assert_eq!(cert.check().expect("unchanged"), &first);
        write(dir.path(), &pair("second"));
        let second = cert.check().expect("loads").clone();
        assert!(matches!(second, Serving::Files { .. }), "{second:?}");
        assert_ne!(first, second, "the rotated pair is served");
    }

    #[test]
    fn files_that_appear_after_start_up_replace_the_self_signed_certificate() {
        let dir = tempfile::tempdir().expect("a directory");
        let (mut cert, _) = cert(dir.path());
        assert!(matches!(
            cert.check().expect("self-signed"),
            Serving::SelfSigned { .. }
        ));
        write(dir.path(), &pair("late"));
        assert!(matches!(
            cert.check().expect("loads"),
            Serving::Files { .. }
        ));
    }

    #[test]
    fn a_pair_that_does_not_load_is_refused_and_the_served_certificate_kept() {
        let dir = tempfile::tempdir().expect("a directory");
        let (good_cert, _) = pair("good");
        let (_, other_key) = pair("other");
        std::fs::write(dir.path().join("tls.crt"), &good_cert).expect("write");
        std::fs::write(dir.path().join("tls.key"), &other_key).expect("write");
        let (mut cert, resolver) = cert(dir.path());
        assert!(
            matches!(
                cert.check().expect("self-signed"),
                Serving::SelfSigned { .. }
            ),
            "a mismatched pair is never served"
        );
        assert!(resolver.is_loaded());
        write(dir.path(), &pair("good"));
        let loaded = cert.check().expect("loads").clone();
        std::fs::write(dir.path().join("tls.key"), "not a key").expect("write");
        assert_eq!(cert.check().expect("kept"), &loaded);
    }
}
