//! Brings a renewed certificate into a running memcached without restarting it, so its items
//! stay: the `refresh-certs` subcommand, run in each memcached pod as a native sidecar.
//!
//! The kubelet rewrites the TLS Secret's files in the pod when the Secret changes (within its
//! sync period). memcached keeps the certificate it loaded until it is sent `refresh_certs`.
//! This loop reads the certificate file every `--interval`; when it differs from the one the
//! server presents on its client port, it sends `refresh_certs` over TLS to the server on the
//! pod's loopback (authenticating with the auth file's first credentials when there is one,
//! and presenting the sidecars' own client certificate, `--client-cert-dir`, when the server
//! asks for one: it reads the server's certificate and `ca.crt`, never the server's key), then
//! checks that the server now presents the file's certificate. `refresh_certs` also has
//! memcached read `ca.crt` again (adding its CAs to those it trusts), so a change of `ca.crt`
//! alone, with the same certificate, is sent too: that is how a new CA comes to be trusted
//! before certificates signed by it are presented. Which `ca.crt` the server read when it
//! started cannot be told from outside, so the first time the server answers with the file's
//! certificate it is sent `refresh_certs` once, and `ca.crt` is compared from then on. A
//! client certificate it cannot present (unreadable, not a pair, or not for clients) stops it
//! with the reason, which its termination message carries to the Memcached's status. What it
//! sees (the serial served, a refresh pending, refreshes sent and failed, the file's expiry,
//! client CAs withdrawn from `ca.crt` that the server may still trust: `trust`, unless
//! memcached's supervisor counts them) it serves as metrics beside its probes (`metrics`). It
//! reads only files mounted into the pod and talks only to its own pod's server: it needs no
//! Kubernetes API access.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::time::Duration;

use clap::Args;
use sha2::{Digest, Sha256};
use thiserror::Error;
use tracing::{debug, info, warn};

use crate::api::v1beta1::{TLS_CA_KEY, TLS_CERT_KEY};
use crate::listener::ServerError;
use crate::tls::certs::{CertError, parse_chain};

use super::health::{self, Heartbeat};
use super::metrics::{FAILED, RefresherMetrics, SUCCEEDED};
use super::session::{self, Files, SessionError, presented_certificate, refresh, server_life};
use super::trust::{Fingerprint, Loaded, fingerprints};

/// The container name of the sidecar in memcached pods.
pub const CONTAINER_NAME: &str = "cert-refresher";

/// Flags of `memcached-operator refresh-certs`.
#[derive(Args, Debug, Clone)]
pub struct RefreshArgs {
    /// Directory of the server's certificate (`tls.crt`) and, with client certificates, the
    /// CA file the server reads (`ca.crt`); the server's key is not needed.
    #[arg(long, default_value = "/etc/memcached/tls")]
    pub cert_dir: PathBuf,

    /// Directory of the sidecars' client certificate (`tls.crt`, `tls.key`), presented when
    /// the server asks for one; without it none is presented.
    #[arg(long)]
    pub client_cert_dir: Option<PathBuf>,

    /// memcached's auth file, when clients must authenticate; its first credentials are used.
    #[arg(long)]
    pub auth_file: Option<PathBuf>,

    /// memcached's TLS client port on the pod's loopback.
    #[arg(long, default_value_t = 11211, value_parser = clap::value_parser!(u16).range(1..))]
    pub port: u16,

    /// How often to compare the certificate file with the served certificate.
    #[arg(long, default_value = "5s", value_parser = crate::flag_bounds::duration)]
    pub interval: Duration,

    /// Port of the kubelet's probes, `/healthz` and `/readyz` (plain HTTP, every address);
    /// without it, none are served.
    #[arg(long, value_parser = clap::value_parser!(u16).range(1..))]
    pub health_port: Option<u16>,

    /// The withdrawn client CAs still trusted are counted by memcached's supervisor, which
    /// restarts memcached for them and knows the file it started with: the refresher neither
    /// counts nor serves them.
    #[arg(long)]
    pub supervisor_counts_withdrawn_cas: bool,
}

/// Why the refresher stopped.
#[derive(Debug, Error)]
pub enum RefreshError {
    /// The certificate directory does not exist: the TLS Secret is not mounted where it says.
    #[error("--cert-dir {0}: not a directory (is the TLS Secret mounted there?)")]
    NoCertDir(PathBuf),
    /// The sidecars' client certificate cannot be presented, so no refresh can be sent.
    #[error("the sidecars' client certificate cannot be used: {0}")]
    ClientCertificate(#[source] SessionError),
    /// The probes' port cannot be listened on.
    #[error(transparent)]
    Health(#[from] ServerError),
}

/// Runs until `shutdown` completes: compares the certificate file with the served certificate
/// every `interval`, and refreshes the server when they differ; serves the kubelet's probes on
/// `--health-port` meanwhile.
pub async fn run(
    args: RefreshArgs,
    shutdown: Pin<Box<dyn Future<Output = ()> + Send>>,
) -> Result<(), RefreshError> {
    if !args.cert_dir.is_dir() {
        return Err(RefreshError::NoCertDir(args.cert_dir));
    }
    let files = Files {
        client_cert_dir: args.client_cert_dir.clone(),
        auth_file: args.auth_file.clone(),
        port: args.port,
    };
    info!(cert_dir = %args.cert_dir.display(), port = args.port, "watching the certificate files");
    // At once, so that a sidecar that cannot work stops before the kubelet sees it running.
    files
        .client_identity()
        .await
        .map_err(RefreshError::ClientCertificate)?;
    let listener = health::listen(args.health_port).await?;
    let heartbeat = Heartbeat::default();
    heartbeat.beat();
    let (metrics, registry) = RefresherMetrics::registered(!args.supervisor_counts_withdrawn_cas);
    health::beside(
        listener,
        heartbeat.clone(),
        registry,
        rounds(&args, &files, &heartbeat, &metrics, shutdown),
    )
    .await
}

/// The refresher's rounds, one every `interval`, each a beat of `heartbeat`, recorded in
/// `metrics`.
async fn rounds(
    args: &RefreshArgs,
    files: &Files,
    heartbeat: &Heartbeat,
    metrics: &RefresherMetrics,
    mut shutdown: Pin<Box<dyn Future<Output = ()> + Send>>,
) -> Result<(), RefreshError> {
    // The serial the server was last seen presenting; None until it answered once.
    let mut served: Option<String> = None;
    // The `ca.crt` the server is known to have read: as it was when the server was last
    // refreshed; None until then.
    let mut ca_loaded: Option<CaDigest> = None;
    // The CAs of every `ca.crt` the server was had read since it started.
    let mut loaded = Loaded::default();
    loop {
        tokio::select! {
            () = &mut shutdown => return Ok(()),
            () = tokio::time::sleep(args.interval) => {}
        }
        heartbeat.beat();
        let (on_disk, expiry) = match file_serial(&args.cert_dir).await {
            Ok(file) => file,
            Err(error) => {
                warn!(%error, "cannot read the certificate file");
                continue;
            }
        };
        metrics.expiry.set(expiry);
        // Checked every round: a Secret changed to an unusable certificate stops the
        // refresher with the reason, which the Memcached's status then shows.
        files
            .client_identity()
            .await
            .map_err(RefreshError::ClientCertificate)?;
        let (ca_now, cas_now) = ca_file(&args.cert_dir).await;
        loaded.saw_file(&cas_now);
        if served.as_deref() == Some(on_disk.as_str()) {
            if ca_loaded != Some(ca_now) {
                if ca_loaded.is_some() {
                    info!("ca.crt changed; sending refresh_certs so that the server reads it");
                } else {
                    debug!("sending refresh_certs once, so that the server has read this ca.crt");
                }
                match refresh(files).await {
                    Ok(()) => {
                        metrics.refreshes.get_or_create(&SUCCEEDED).inc();
                        if ca_loaded.is_some() {
                            info!("the server has read the changed ca.crt");
                        }
                        ca_loaded = Some(ca_now);
                        loaded.read(&cas_now, server_life(files).await.ok());
                    }
                    Err(error) => {
                        metrics.refreshes.get_or_create(&FAILED).inc();
                        warn!(%error, "the server has not read ca.crt yet");
                    }
                }
            }
        } else {
            match step(files, &on_disk, served.is_some(), metrics).await {
                Ok((now, refreshed)) => {
                    // A refresh has the server read this ca.crt too.
                    if refreshed {
                        ca_loaded = Some(ca_now);
                        loaded.read(&cas_now, server_life(files).await.ok());
                    }
                    metrics.serving(&now);
                    served = Some(now);
                }
                // Beside a server still starting (the sidecar starts first): not worth a
                // warning.
                Err(error @ SessionError::Connection { .. }) if served.is_none() => {
                    debug!(%error, "the server does not answer yet");
                }
                Err(error) => {
                    warn!(%error, file_serial = %on_disk, "the server is not refreshed yet")
                }
            }
        }
        let current = served.as_deref() == Some(on_disk.as_str()) && ca_loaded == Some(ca_now);
        metrics.pending.set(i64::from(!current));
        if args.supervisor_counts_withdrawn_cas {
            continue;
        }
        // Only while a withdrawn CA may still be trusted: did the server start again since?
        // Then it read the file anew (and is sent refresh_certs once more, which records it).
        if loaded.withdrawn(&cas_now) > 0
            && let Ok(life) = server_life(files).await
            && loaded.seen(life)
        {
            info!("the server started again: it read ca.crt anew");
            ca_loaded = None;
        }
        let withdrawn = i64::try_from(loaded.withdrawn(&cas_now)).unwrap_or(i64::MAX);
        if withdrawn != metrics.withdrawn_cas.get() {
            if withdrawn > 0 {
                warn!(
                    withdrawn,
                    "CAs withdrawn from ca.crt are still trusted by the server: memcached drops \
                     them only when it starts again (a warm restart in place keeps the items)"
                );
            }
            metrics.withdrawn_cas.set(withdrawn);
        }
    }
}

/// A digest of `ca.crt`.
type CaDigest = [u8; 32];

/// A digest of `ca.crt` (all zeros when it is absent or unreadable), and its CAs.
async fn ca_file(cert_dir: &Path) -> (CaDigest, BTreeSet<Fingerprint>) {
    match tokio::fs::read(cert_dir.join(TLS_CA_KEY)).await {
        Ok(content) => (Sha256::digest(&content).into(), fingerprints(&content)),
        Err(_) => ([0; 32], BTreeSet::new()),
    }
}

/// The serial and the notAfter (Unix seconds) of the leaf in the server's certificate file
/// (`tls.crt` in `cert_dir`).
async fn file_serial(cert_dir: &Path) -> Result<(String, i64), CertError> {
    let path = cert_dir.join(TLS_CERT_KEY);
    let pem = session::read(&path).await?;
    parse_chain(&path, &pem).map(|(_, serial, not_after)| (serial, not_after))
}

/// Brings the server to `file_serial`, the file's certificate, if it presents another one;
/// returns the serial it presents afterwards, and whether it was sent `refresh_certs`, which
/// `metrics` counts.
async fn step(
    files: &Files,
    file_serial: &str,
    seen_before: bool,
    metrics: &RefresherMetrics,
) -> Result<(String, bool), SessionError> {
    let presented = presented_certificate(files).await?;
    if presented == file_serial {
        if !seen_before {
            info!(serial = %presented, "the server presents the certificate file's certificate");
        }
        return Ok((presented, false));
    }
    info!(served = %presented, file = %file_serial, "the certificate file changed; sending refresh_certs");
    let refreshed = async {
        refresh(files).await?;
        presented_certificate(files).await
    };
    let now = refreshed.await.inspect_err(|_| {
        metrics.refreshes.get_or_create(&FAILED).inc();
    })?;
    if now == file_serial {
        metrics.refreshes.get_or_create(&SUCCEEDED).inc();
        info!(serial = %now, "the server presents the renewed certificate");
    } else {
        metrics.refreshes.get_or_create(&FAILED).inc();
        warn!(served = %now, file = %file_serial, "after refresh_certs the server still presents another certificate");
    }
    Ok((now, true))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn the_ca_files_digest_changes_with_its_content_and_tells_an_absent_one() {
        let dir = tempfile::tempdir().expect("a directory");
        let absent = ca_file(dir.path()).await.0;
        assert_eq!(absent, [0; 32]);
        std::fs::write(dir.path().join("ca.crt"), "old CA").expect("written");
        let old = ca_file(dir.path()).await.0;
        assert_ne!(old, absent);
        assert_eq!(ca_file(dir.path()).await.0, old);
        std::fs::write(dir.path().join("ca.crt"), "old CA and new CA").expect("written");
        assert_ne!(ca_file(dir.path()).await.0, old);
    }

    #[tokio::test]
    async fn a_client_certificate_for_servers_only_stops_the_refresher_saying_so() {
        let ca = testkit::pki::Ca::root();
        let (server_dir, client_dir) = (tempfile::tempdir(), tempfile::tempdir());
        let (server_dir, client_dir) = (server_dir.expect("a dir"), client_dir.expect("a dir"));
        let server = ca.serving(testkit::pki::KeyForm::EcPkcs8);
        std::fs::write(server_dir.path().join("tls.crt"), &server.cert_pem).expect("written");
        let servers_only = ca.server_only();
        std::fs::write(client_dir.path().join("tls.crt"), &servers_only.cert_pem).expect("w");
        std::fs::write(client_dir.path().join("tls.key"), &servers_only.key_pem).expect("w");
        let args = RefreshArgs {
            cert_dir: server_dir.path().to_path_buf(),
            client_cert_dir: Some(client_dir.path().to_path_buf()),
            auth_file: None,
            port: 11211,
            interval: Duration::from_millis(10),
            health_port: None,
            supervisor_counts_withdrawn_cas: false,
        };
        let error = tokio::time::timeout(
            Duration::from_secs(10),
            run(args, Box::pin(std::future::pending())),
        )
        .await
        .expect("stops at once")
        .expect_err("refused");
        let said = error.to_string();
        assert!(
            said.contains("client certificate cannot be used")
                && said.contains("allows serverAuth, not client authentication"),
            "{said}"
        );
    }

    #[tokio::test]
    async fn a_missing_certificate_directory_stops_the_refresher_with_its_name() {
        let args = RefreshArgs {
            cert_dir: PathBuf::from("/nonexistent/memcached/tls"),
            client_cert_dir: None,
            auth_file: None,
            port: 11211,
            interval: Duration::from_secs(5),
            health_port: None,
            supervisor_counts_withdrawn_cas: false,
        };
        let error = run(args, Box::pin(std::future::pending()))
            .await
            .expect_err("refused");
        assert!(
            error.to_string().contains("/nonexistent/memcached/tls"),
            "{error}"
        );
    }
}
