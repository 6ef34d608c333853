//! Brings a renewed certificate into a running memcached without restarting it, so its items
//! stay: the `refresh-certs` subcommand, run in each memcached pod as a native sidecar.
//!
//! The kubelet rewrites the TLS Secret's files in the pod when the Secret changes (within its
//! sync period). memcached keeps the certificate it loaded until it is sent `refresh_certs`.
//! This loop reads the certificate file every `--interval`; when it differs from the one the
//! server presents on its client port, it sends `refresh_certs` over TLS to the server on the
//! pod's loopback (authenticating with the auth file's first credentials when there is one,
//! and presenting the files' certificate when the server asks for a client certificate), then
//! checks that the server now presents the file's certificate. It reads only files mounted
//! into the pod and talks only to its own pod's server: it needs no Kubernetes API access.

use std::path::PathBuf;
use std::pin::Pin;
use std::time::Duration;

use clap::Args;
use thiserror::Error;
use tracing::{debug, info, warn};

use crate::tls::certs::ServingCert;

use super::session::{Files, SessionError, presented_certificate, refresh};

/// The container name of the sidecar in memcached pods.
pub const CONTAINER_NAME: &str = "cert-refresher";

/// Flags of `memcached-operator refresh-certs`.
#[derive(Args, Debug, Clone)]
pub struct RefreshArgs {
    /// Directory of the TLS Secret's files (`tls.crt`, `tls.key`, optional `ca.crt`).
    #[arg(long, default_value = "/etc/memcached/tls")]
    pub cert_dir: PathBuf,

    /// memcached's auth file, when clients must authenticate; its first credentials are used.
    #[arg(long)]
    pub auth_file: Option<PathBuf>,

    /// memcached's TLS client port on the pod's loopback.
    #[arg(long, default_value_t = 11211, value_parser = clap::value_parser!(u16).range(1..))]
    pub port: u16,

    /// How often to compare the certificate file with the served certificate.
    #[arg(long, default_value = "5s", value_parser = crate::flag_bounds::duration)]
    pub interval: Duration,
}

/// Why the refresher stopped.
#[derive(Debug, Error)]
pub enum RefreshError {
    /// The certificate directory does not exist: the TLS Secret is not mounted where it says.
    #[error("--cert-dir {0}: not a directory (is the TLS Secret mounted there?)")]
    NoCertDir(PathBuf),
}

/// Runs until `shutdown` completes: compares the certificate file with the served certificate
/// every `interval`, and refreshes the server when they differ.
pub async fn run(
    args: RefreshArgs,
    mut shutdown: Pin<Box<dyn Future<Output = ()> + Send>>,
) -> Result<(), RefreshError> {
    if !args.cert_dir.is_dir() {
        return Err(RefreshError::NoCertDir(args.cert_dir));
    }
    let files = Files {
        cert_dir: args.cert_dir.clone(),
        auth_file: args.auth_file.clone(),
        port: args.port,
    };
    info!(cert_dir = %args.cert_dir.display(), port = args.port, "watching the certificate files");
    // The serial the server was last seen presenting; None until it answered once.
    let mut served: Option<String> = None;
    loop {
        tokio::select! {
            () = &mut shutdown => return Ok(()),
            () = tokio::time::sleep(args.interval) => {}
        }
        let on_disk = match files.certificate().await {
            Ok(on_disk) => on_disk,
            Err(error) => {
                warn!(%error, "cannot read the certificate file");
                continue;
            }
        };
        if served.as_deref() == Some(on_disk.serial.as_str()) {
            continue;
        }
        match step(&files, &on_disk, served.is_some()).await {
            Ok(now) => served = Some(now),
            // Beside a server still starting (the sidecar starts first): not worth a warning.
            Err(error @ SessionError::Connection { .. }) if served.is_none() => {
                debug!(%error, "the server does not answer yet");
            }
            Err(error) => {
                warn!(%error, file_serial = %on_disk.serial, "the server is not refreshed yet")
            }
        }
    }
}

/// Brings the server to `on_disk`, the files' certificate, if it presents another one; returns
/// the serial it presents afterwards.
async fn step(
    files: &Files,
    on_disk: &ServingCert,
    seen_before: bool,
) -> Result<String, SessionError> {
    let file_serial = on_disk.serial.as_str();
    let presented = presented_certificate(files, on_disk).await?;
    if presented == file_serial {
        if !seen_before {
            info!(serial = %presented, "the server presents the certificate file's certificate");
        }
        return Ok(presented);
    }
    info!(served = %presented, file = %file_serial, "the certificate file changed; sending refresh_certs");
    refresh(files, on_disk).await?;
    let now = presented_certificate(files, on_disk).await?;
    if now == file_serial {
        info!(serial = %now, "the server presents the renewed certificate");
    } else {
        warn!(served = %now, file = %file_serial, "after refresh_certs the server still presents another certificate");
    }
    Ok(now)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_missing_certificate_directory_stops_the_refresher_with_its_name() {
        let args = RefreshArgs {
            cert_dir: PathBuf::from("/nonexistent/memcached/tls"),
            auth_file: None,
            port: 11211,
            interval: Duration::from_secs(5),
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
