//! Serves the webhooks of [`WEBHOOKS`] over TLS, and the health probes and metrics over plain
//! HTTP, until told to shut down.
//!
//! The webhook listener speaks TLS 1.2 and 1.3 with the certificate [`certs`] finds and
//! reloads; it offers ALPN `http/1.1` only, and serves HTTP/1 only, unless `--enable-http2`
//! (HTTP/2 stays off by default because of the rapid-reset attacks GHSA-qppj-fm5r-hxr3 and
//! GHSA-4374-p667-p6c8). Each request body is bounded in size and time, then handed to
//! [`review`], which decides nothing itself either: the rules live in `admission` and
//! `api::convert`. On shutdown the server stops accepting, reports not ready, and lets requests
//! in flight finish within a deadline.

use std::future::Future;
use std::io;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use axum::Router;
use axum::body::Bytes;
use axum::extract::{DefaultBodyLimit, FromRequest, Request, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum_server::Handle;
use axum_server::accept::NoDelayAcceptor;
use axum_server::tls_rustls::RustlsConfig;
use rustls::ServerConfig;
use rustls::crypto::CryptoProvider;
use tokio::sync::watch;
use tower_http::timeout::TimeoutLayer;

use crate::admission::defaults::Defaults;
use crate::operator;
use crate::telemetry::{Metrics, OPENMETRICS_CONTENT_TYPE};
use crate::webhook::certs::{self, CertReloader, CertResolver};
use crate::webhook::review::{self, Reply};
use crate::webhook::{WEBHOOKS, Webhook};

/// The default bound on a request body: 7 MiB, as controller-runtime's, since an
/// AdmissionReview of an UPDATE carries two objects of up to 3 MiB each (etcd's limit).
pub const DEFAULT_MAX_REQUEST_BYTES: usize = 7 * 1024 * 1024;

/// Flags of `memcached-operator webhooks`.
#[derive(clap::Args, Clone, Debug)]
pub struct WebhooksArgs {
    /// Address every listener binds to.
    #[arg(long, default_value_t = IpAddr::V4(Ipv4Addr::UNSPECIFIED))]
    pub bind_address: IpAddr,

    /// Port of the TLS webhook listener (0 picks a free port and logs it).
    #[arg(long, default_value_t = operator::WEBHOOK_PORT)]
    pub webhook_port: u16,

    /// Port of `/healthz` and `/readyz` (plain HTTP).
    #[arg(long, default_value_t = operator::PROBE_PORT)]
    pub probe_port: u16,

    /// Port of `/metrics` (plain HTTP, OpenMetrics text).
    #[arg(long, default_value_t = operator::METRICS_PORT)]
    pub metrics_port: u16,

    /// Directory holding `tls.crt` and `tls.key`; when given, the OLM paths are not tried.
    #[arg(long)]
    pub cert_dir: Option<PathBuf>,

    /// Directory the OLM certificate paths are looked up under.
    #[arg(long, default_value = "/")]
    pub cert_root: PathBuf,

    /// How often the certificate files are read again, besides watching them.
    #[arg(long, default_value = "10s", value_parser = humantime::parse_duration)]
    pub cert_poll_interval: Duration,

    /// Offer and serve HTTP/2 (off by default: rapid-reset attacks).
    #[arg(long)]
    pub enable_http2: bool,

    /// Largest request body accepted, in bytes; larger ones get 413.
    #[arg(long, default_value_t = DEFAULT_MAX_REQUEST_BYTES)]
    pub max_request_bytes: usize,

    /// Time allowed to receive a request and answer it; slower ones get 408.
    #[arg(long, default_value = "10s", value_parser = humantime::parse_duration)]
    pub request_timeout: Duration,

    /// Time requests in flight get to finish after SIGTERM or SIGINT.
    #[arg(long, default_value = "15s", value_parser = humantime::parse_duration)]
    pub shutdown_timeout: Duration,

    /// Holds every webhook answer back this long, to rehearse a webhook slower than the API
    /// server's `timeoutSeconds`. A fault for drills: debug builds only, absent from release.
    #[cfg(debug_assertions)]
    #[arg(long, hide = true, value_parser = humantime::parse_duration)]
    pub debug_delay_webhooks: Option<Duration>,
}

impl Default for WebhooksArgs {
    fn default() -> Self {
        WebhooksArgs {
            bind_address: IpAddr::V4(Ipv4Addr::UNSPECIFIED),
            webhook_port: operator::WEBHOOK_PORT,
            probe_port: operator::PROBE_PORT,
            metrics_port: operator::METRICS_PORT,
            cert_dir: None,
            cert_root: PathBuf::from("/"),
            cert_poll_interval: Duration::from_secs(10),
            enable_http2: false,
            max_request_bytes: DEFAULT_MAX_REQUEST_BYTES,
            request_timeout: Duration::from_secs(10),
            shutdown_timeout: Duration::from_secs(15),
            #[cfg(debug_assertions)]
            debug_delay_webhooks: None,
        }
    }
}

/// Why the server could not start or stopped on its own.
#[derive(Debug, thiserror::Error)]
pub enum ServerError {
    /// A listener could not be bound.
    #[error("cannot listen on {address} for {server}: {source}")]
    Bind {
        /// Which listener.
        server: &'static str,
        /// Where.
        address: SocketAddr,
        /// Why.
        #[source]
        source: io::Error,
    },
    /// The TLS configuration was refused.
    #[error("cannot configure TLS: {0}")]
    Tls(#[source] rustls::Error),
    /// A server stopped with an error.
    #[error("the {server} server failed: {source}")]
    Serve {
        /// Which server.
        server: &'static str,
        /// Why.
        #[source]
        source: io::Error,
    },
}

/// What the webhook handlers share.
struct App {
    defaults: Defaults,
    metrics: Arc<Metrics>,
    max_request_bytes: usize,
    #[cfg(debug_assertions)]
    debug_delay: Option<Duration>,
}

/// Whether the server should receive traffic: a certificate is loaded and it is serving.
struct Readiness {
    resolver: Arc<CertResolver>,
    serving: AtomicBool,
    /// False when the webhooks are not served: readiness then needs no certificate.
    needs_certificate: bool,
}

impl Readiness {
    fn check(&self) -> Result<(), &'static str> {
        if self.needs_certificate && !self.resolver.is_loaded() {
            return Err("no usable serving certificate yet");
        }
        if !self.serving.load(Ordering::Acquire) {
            return Err("not serving");
        }
        Ok(())
    }
}

/// Builds the TLS configuration: TLS 1.2 and 1.3, certificates from `resolver`, ALPN
/// `http/1.1` (and `h2` first when HTTP/2 is enabled).
pub fn tls_config(
    resolver: Arc<CertResolver>,
    provider: Arc<CryptoProvider>,
    enable_http2: bool,
) -> Result<ServerConfig, rustls::Error> {
    let mut config = ServerConfig::builder_with_provider(provider)
        .with_protocol_versions(&[&rustls::version::TLS13, &rustls::version::TLS12])?
        .with_no_client_auth()
        .with_cert_resolver(resolver);
    config.alpn_protocols = if enable_http2 {
        vec![b"h2".to_vec(), b"http/1.1".to_vec()]
    } else {
        vec![b"http/1.1".to_vec()]
    };
    Ok(config)
}

/// Serves the webhooks, probes and metrics until `shutdown` completes, then drains requests in
/// flight for at most `--shutdown-timeout`.
pub async fn serve(
    args: WebhooksArgs,
    shutdown: impl Future<Output = ()> + Send,
) -> Result<(), ServerError> {
    serve_with(args, Arc::new(Metrics::new()), true, shutdown).await
}

/// Serves the probes and metrics (recording into `metrics`) and, when `webhooks` is true, the
/// webhooks, until `shutdown` completes. Without webhooks, `/readyz` needs no certificate and
/// no TLS listener is opened.
pub async fn serve_with(
    args: WebhooksArgs,
    metrics: Arc<Metrics>,
    webhooks: bool,
    shutdown: impl Future<Output = ()> + Send,
) -> Result<(), ServerError> {
    let started = Instant::now();
    let provider = certs::crypto_provider();
    let resolver = Arc::new(CertResolver::default());
    let mut reloader = CertReloader::new(
        certs::candidates(args.cert_dir.as_deref(), &args.cert_root),
        resolver.clone(),
        provider.clone(),
        metrics.clone(),
    );
    if webhooks {
        reloader.check();
    }
    let readiness = Arc::new(Readiness {
        resolver: resolver.clone(),
        serving: AtomicBool::new(false),
        needs_certificate: webhooks,
    });
    let (stop, stopped) = watch::channel(false);

    let probes = bind("probes", args.bind_address, args.probe_port).await?;
    let probe_task = tokio::spawn(serve_plain(
        "probes",
        probes,
        probe_router(readiness.clone()),
        stopped.clone(),
    ));
    let metrics_listener = bind("metrics", args.bind_address, args.metrics_port).await?;
    let metrics_task = tokio::spawn(serve_plain(
        "metrics",
        metrics_listener,
        metrics_router(metrics.clone()),
        stopped,
    ));

    if !webhooks {
        readiness.serving.store(true, Ordering::Release);
        tracing::info!("serving probes and metrics; webhooks are disabled");
        shutdown.await;
        readiness.serving.store(false, Ordering::Release);
        let _ = stop.send(true);
        for (server, result) in [
            ("probes", probe_task.await),
            ("metrics", metrics_task.await),
        ] {
            finished_cleanly(server, result)?;
        }
        return Ok(());
    }
    let webhook_listener = bind("webhooks", args.bind_address, args.webhook_port).await?;
    let webhook_address = local_address("webhooks", &webhook_listener)?;
    let webhook_listener = webhook_listener
        .into_std()
        .map_err(|source| ServerError::Bind {
            server: "webhooks",
            address: webhook_address,
            source,
        })?;
    let tls = tls_config(resolver, provider, args.enable_http2).map_err(ServerError::Tls)?;
    let handle = Handle::<SocketAddr>::new();
    let mut server =
        axum_server::from_tcp_rustls(webhook_listener, RustlsConfig::from_config(Arc::new(tls)))
            .map_err(|source| ServerError::Bind {
                server: "webhooks",
                address: webhook_address,
                source,
            })?
            .handle(handle.clone())
            // Answers leave at once: with Nagle's algorithm, the last segment of a response
            // waits for the client's delayed ACK (40 ms on Linux) on new connections.
            .map(|tls| tls.acceptor(NoDelayAcceptor::new()));
    if !args.enable_http2 {
        server = server.http1_only();
    }
    server
        .http_builder()
        .http1()
        .header_read_timeout(args.request_timeout);
    server.http_builder().http2().max_concurrent_streams(100);
    let app = Arc::new(App {
        defaults: Defaults::from_env(),
        metrics,
        max_request_bytes: args.max_request_bytes,
        #[cfg(debug_assertions)]
        debug_delay: args.debug_delay_webhooks,
    });
    #[cfg(debug_assertions)]
    if let Some(delay) = args.debug_delay_webhooks {
        tracing::warn!(
            delay_s = delay.as_secs_f64(),
            "debug fault: every webhook answer is held back"
        );
    }
    let router = webhook_router(app, args.max_request_bytes, args.request_timeout);
    let mut webhook_task = tokio::spawn(server.serve(router.into_make_service()));
    readiness.serving.store(true, Ordering::Release);
    tracing::info!(
        elapsed_ms = started.elapsed().as_secs_f64() * 1000.0,
        certificate_loaded = readiness.resolver.is_loaded(),
        http2 = args.enable_http2,
        "serving webhooks"
    );
    let reloader_task = tokio::spawn(reloader.run(args.cert_poll_interval));

    let failure = tokio::select! {
        () = shutdown => None,
        finished = &mut webhook_task => Some(finished),
    };
    readiness.serving.store(false, Ordering::Release);
    let finished = match failure {
        Some(finished) => finished,
        None => {
            tracing::info!(
                deadline_s = args.shutdown_timeout.as_secs_f64(),
                in_flight_connections = handle.connection_count(),
                "shutting down: finishing requests in flight"
            );
            handle.graceful_shutdown(Some(args.shutdown_timeout));
            webhook_task.await
        }
    };
    let _ = stop.send(true);
    reloader_task.abort();
    let probes_finished = probe_task.await;
    let metrics_finished = metrics_task.await;
    for (server, result) in [
        ("webhooks", finished),
        ("probes", probes_finished),
        ("metrics", metrics_finished),
    ] {
        finished_cleanly(server, result)?;
    }
    tracing::info!("stopped");
    Ok(())
}

/// Turns a server task's outcome into an error naming the server.
fn finished_cleanly(
    server: &'static str,
    result: Result<io::Result<()>, tokio::task::JoinError>,
) -> Result<(), ServerError> {
    match result {
        Ok(Ok(())) => Ok(()),
        Ok(Err(source)) => Err(ServerError::Serve { server, source }),
        Err(join) => Err(ServerError::Serve {
            server,
            source: io::Error::other(join.to_string()),
        }),
    }
}

async fn bind(
    server: &'static str,
    ip: IpAddr,
    port: u16,
) -> Result<tokio::net::TcpListener, ServerError> {
    let address = SocketAddr::new(ip, port);
    let listener = tokio::net::TcpListener::bind(address)
        .await
        .map_err(|source| ServerError::Bind {
            server,
            address,
            source,
        })?;
    let bound = local_address(server, &listener)?;
    tracing::info!(server, address = %bound, "listening");
    Ok(listener)
}

fn local_address(
    server: &'static str,
    listener: &tokio::net::TcpListener,
) -> Result<SocketAddr, ServerError> {
    listener
        .local_addr()
        .map_err(|source| ServerError::Serve { server, source })
}

async fn serve_plain(
    server: &'static str,
    listener: tokio::net::TcpListener,
    router: Router,
    mut stopped: watch::Receiver<bool>,
) -> io::Result<()> {
    let result = axum::serve(listener, router)
        .with_graceful_shutdown(async move {
            let _ = stopped.wait_for(|stop| *stop).await;
        })
        .await;
    tracing::debug!(server, "stopped");
    result
}

fn webhook_router(app: Arc<App>, max_request_bytes: usize, request_timeout: Duration) -> Router {
    let mut router = Router::new();
    for webhook in &WEBHOOKS {
        router = router.route(
            webhook.path,
            post(move |State(app): State<Arc<App>>, request: Request| {
                handle_review(app, webhook, request)
            }),
        );
    }
    router
        .fallback(|| async {
            text_response(StatusCode::NOT_FOUND, "no webhook is served at this path")
        })
        .method_not_allowed_fallback(|| async {
            text_response(StatusCode::METHOD_NOT_ALLOWED, "webhooks accept POST only")
        })
        .layer(DefaultBodyLimit::max(max_request_bytes))
        .layer(TimeoutLayer::with_status_code(
            StatusCode::REQUEST_TIMEOUT,
            request_timeout,
        ))
        .with_state(app)
}

async fn handle_review(app: Arc<App>, webhook: &'static Webhook, request: Request) -> Response {
    let label = webhook.kind.label();
    let mut measurer = app.metrics.measure_request(label);
    #[cfg(debug_assertions)]
    if let Some(delay) = app.debug_delay {
        tokio::time::sleep(delay).await;
    }
    let reply = match Bytes::from_request(request, &()).await {
        Ok(body) => review::answer(webhook.kind, &body, &app.defaults),
        Err(rejection) if rejection.status() == StatusCode::PAYLOAD_TOO_LARGE => Reply::error(
            StatusCode::PAYLOAD_TOO_LARGE,
            format!(
                "request body exceeds the limit of {} bytes",
                app.max_request_bytes
            ),
        ),
        Err(rejection) => Reply::error(rejection.status(), rejection.body_text()),
    };
    if let Some(decision) = reply.decision {
        app.metrics.record_decision(label, decision);
    }
    measurer.finish(reply.status.as_u16());
    (
        reply.status,
        [(
            header::CONTENT_TYPE,
            HeaderValue::from_static(reply.content_type),
        )],
        reply.body,
    )
        .into_response()
}

fn text_response(status: StatusCode, message: &'static str) -> Response {
    (
        status,
        [(
            header::CONTENT_TYPE,
            HeaderValue::from_static(review::TEXT_CONTENT_TYPE),
        )],
        message,
    )
        .into_response()
}

fn probe_router(readiness: Arc<Readiness>) -> Router {
    Router::new()
        .route("/healthz", get(|| async { "ok\n" }))
        .route(
            "/readyz",
            get(move || async move {
                match readiness.check() {
                    Ok(()) => (StatusCode::OK, "ok\n".to_string()),
                    Err(reason) => (StatusCode::SERVICE_UNAVAILABLE, format!("{reason}\n")),
                }
            }),
        )
}

fn metrics_router(metrics: Arc<Metrics>) -> Router {
    Router::new().route(
        "/metrics",
        get(move || async move {
            match metrics.encode() {
                Ok(text) => (
                    StatusCode::OK,
                    [(
                        header::CONTENT_TYPE,
                        HeaderValue::from_static(OPENMETRICS_CONTENT_TYPE),
                    )],
                    text,
                )
                    .into_response(),
                Err(_) => text_response(
                    StatusCode::INTERNAL_SERVER_ERROR,
                    "cannot encode the metrics",
                ),
            }
        }),
    )
}
