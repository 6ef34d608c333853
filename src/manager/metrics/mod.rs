//! Serves the Prometheus metrics (`/metrics`, OpenMetrics text) of the one registry every
//! module registered in: over HTTPS to callers the API server authenticates and authorizes, as
//! kubebuilder v4 scaffolds do, or with `--metrics-secure=false` over plain HTTP to anyone, for
//! local use.
//!
//! The HTTPS listener speaks HTTP/1 only, with the webhooks' TLS configuration (the versions
//! and cipher suites of the cluster's TLS profile, followed as it changes) and the certificate
//! `cert` provides (mounted, else self-signed); `auth` admits each request, asking the API
//! server through `reviews` and caching its decisions.
//! Probes stay on their own plain-HTTP listener (`probes`), as the kubelet expects.

pub mod auth;
pub mod cert;
pub mod reviews;

use std::future::Future;
use std::net::{IpAddr, SocketAddr};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::middleware;
use axum::routing::get;
use axum_server::Handle;
use clap::ArgAction;
use prometheus_client::registry::Registry;

use crate::listener::{ServerError, bind, finished_cleanly, local_address};
use crate::operator;
use crate::telemetry::openmetrics;
use crate::tls::certs::{self, CertResolver};
use crate::tls::config::tls_config;
use crate::tls::profile::TlsSettings;
use crate::tls::profile::apply::ProfiledTls;
use crate::tls::profile::cluster::SettingsWatch;
use auth::Gate;
use cert::MetricsCert;
use reviews::Reviews;

/// Time a scrape in flight gets to finish on shutdown.
const SHUTDOWN_GRACE: Duration = Duration::from_secs(5);

/// Flags of the metrics listener.
#[derive(clap::Args, Clone, Debug)]
pub struct MetricsArgs {
    /// Port of `/metrics` (0 picks a free port and logs it).
    #[arg(long, default_value_t = operator::METRICS_PORT)]
    pub metrics_port: u16,

    /// Serve `/metrics` over HTTPS to callers whose bearer token the API server authenticates
    /// (TokenReview) and who may `get` `/metrics` (SubjectAccessReview); with
    /// `--metrics-secure=false`, over plain HTTP to anyone (for local use).
    #[arg(long, default_value_t = true, action = ArgAction::Set)]
    pub metrics_secure: bool,

    /// Directory holding the metrics serving certificate (`tls.crt`, `tls.key`); while it has
    /// none, a self-signed certificate is served. Read again every `--cert-poll-interval`.
    #[arg(long, default_value = operator::METRICS_CERT_DIR)]
    pub metrics_cert_dir: PathBuf,
}

impl Default for MetricsArgs {
    fn default() -> Self {
        MetricsArgs {
            metrics_port: operator::METRICS_PORT,
            metrics_secure: true,
            metrics_cert_dir: PathBuf::from(operator::METRICS_CERT_DIR),
        }
    }
}

/// Who may read the metrics.
pub enum Audience<R> {
    /// Anyone, over plain HTTP (`--metrics-secure=false`).
    Anyone,
    /// Callers `gate` admits, over HTTPS with a certificate from `--metrics-cert-dir` or
    /// self-signed for these names.
    Admitted {
        /// Authenticates and authorizes each request.
        gate: Arc<Gate<R>>,
        /// The names of a self-signed certificate.
        names: Vec<String>,
        /// How often the certificate directory is read again.
        cert_poll_interval: Duration,
    },
}

/// Serves the metrics of `registry` on `bind_address` to `audience` until `shutdown`
/// completes.
pub async fn serve<R: Reviews>(
    args: &MetricsArgs,
    bind_address: IpAddr,
    registry: Arc<Registry>,
    audience: Audience<R>,
    tls_settings: SettingsWatch,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> Result<(), ServerError> {
    let listener = bind("metrics", bind_address, args.metrics_port).await?;
    let router = metrics_router(registry);
    let (gate, names, cert_poll_interval) = match audience {
        Audience::Anyone => {
            tracing::info!("metrics are served over plain HTTP to anyone (--metrics-secure=false)");
            return axum::serve(listener, router)
                .with_graceful_shutdown(shutdown)
                .await
                .map_err(|source| ServerError::Serve {
                    server: "metrics",
                    source,
                });
        }
        Audience::Admitted {
            gate,
            names,
            cert_poll_interval,
        } => (gate, names, cert_poll_interval),
    };
    let provider = certs::crypto_provider();
    let resolver = Arc::new(CertResolver::default());
    let mut cert = MetricsCert::new(
        &args.metrics_cert_dir,
        names,
        resolver.clone(),
        provider.clone(),
    );
    cert.check()
        .map_err(|error| ServerError::Tls(rustls::Error::General(error.to_string())))?;
    let tls = ProfiledTls::new("metrics", tls_settings, move |settings: &TlsSettings| {
        tls_config(resolver.clone(), provider.clone(), settings, false)
    })
    .map_err(ServerError::Tls)?;
    let address = local_address("metrics", &listener)?;
    let bind_error = |source| ServerError::Bind {
        server: "metrics",
        address,
        source,
    };
    let listener = listener.into_std().map_err(bind_error)?;
    let handle = Handle::<SocketAddr>::new();
    let mut server = axum_server::from_tcp_rustls(listener, tls.config())
        .map_err(bind_error)?
        .handle(handle.clone())
        .http1_only();
    // Scrapers keep connections alive between scrapes, often 10 s apart: the same bound as
    // the webhooks' lets the scraper close an idle connection first.
    server
        .http_builder()
        .http1()
        .header_read_timeout(crate::webhook::server::KEEP_ALIVE_IDLE);
    let router = router.layer(middleware::from_fn_with_state(gate, auth::guard::<R>));
    let mut task = tokio::spawn(server.serve(router.into_make_service()));
    let cert_task = tokio::spawn(cert.run(cert_poll_interval));
    let tls_task = tokio::spawn(tls.run());
    let finished = tokio::select! {
        () = shutdown => {
            handle.graceful_shutdown(Some(SHUTDOWN_GRACE));
            task.await
        }
        finished = &mut task => finished,
    };
    cert_task.abort();
    tls_task.abort();
    finished_cleanly("metrics", finished)
}

fn metrics_router(registry: Arc<Registry>) -> Router {
    Router::new().route(
        operator::METRICS_PATH,
        get(move || async move { openmetrics(&registry) }),
    )
}
