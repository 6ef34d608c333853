//! Serves the webhooks of [`WEBHOOKS`] over TLS until told to shut down; this is where every
//! AdmissionReview and ConversionReview enters the operator.
//!
//! The listener speaks the TLS versions and cipher suites of the cluster's TLS profile
//! (`tls::profile`; they change for new connections as the profile does) with the certificate
//! `tls::certs` finds and reloads; it offers ALPN `http/1.1` only, and serves HTTP/1 only, unless `--enable-http2` (HTTP/2 stays
//! off by default because of the rapid-reset attacks GHSA-qppj-fm5r-hxr3 and
//! GHSA-4374-p667-p6c8). Each request body is bounded in size and time, then handed to
//! [`answer`](super::answer), which decides nothing itself either: the rules live in
//! `admission` and `api::convert`. On shutdown the server reports not ready at once, keeps
//! answering for `--shutdown-delay` while closing each connection after its answer (so the
//! API server's kept-alive connections move to another replica instead of meeting a closed
//! socket), then stops accepting and lets requests in flight finish within a deadline. Probes
//! and metrics are the manager's.

use std::future::Future;
use std::net::{IpAddr, SocketAddr};
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use axum::Router;
use axum::body::Bytes;
use axum::extract::{DefaultBodyLimit, FromRequest, Request, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use axum_server::Handle;
use axum_server::accept::NoDelayAcceptor;
use tower_http::timeout::TimeoutLayer;

use crate::admission::AllowedIssuers;
use crate::admission::defaults::Defaults;
use crate::listener::{ServerError, bind, finished_cleanly, local_address};
use crate::operator;
use crate::tls::cert_reloader::CertReloader;
use crate::tls::certs::SecretPairs;
use crate::tls::certs::{self, CertResolver};
use crate::tls::config::tls_config;
use crate::tls::profile::TlsSettings;
use crate::tls::profile::apply::ProfiledTls;
use crate::tls::profile::cluster::SettingsWatch;
use crate::tls::trust_watch::TrustWatch;
use crate::webhook::metrics::Metrics;
use crate::webhook::response::{Reply, TEXT_CONTENT_TYPE};
use crate::webhook::{WEBHOOKS, Webhook, answer};

/// The default bound on a request body: 7 MiB, as controller-runtime's, since an
/// AdmissionReview of an UPDATE carries two objects of up to 3 MiB each (etcd's limit).
pub const DEFAULT_MAX_REQUEST_BYTES: usize = 7 * 1024 * 1024;

/// Flags of the webhook listener.
#[derive(clap::Args, Clone, Debug)]
pub struct ServerArgs {
    /// Port of the TLS webhook listener (0 picks a free port and logs it).
    #[arg(long, default_value_t = operator::WEBHOOK_PORT)]
    pub webhook_port: u16,

    /// Directory holding `tls.crt` and `tls.key`; when given, the OLM paths are not tried.
    #[arg(long)]
    pub cert_dir: Option<PathBuf>,

    /// Directory the OLM certificate paths are looked up under.
    #[arg(long, default_value = "/")]
    pub cert_root: PathBuf,

    /// How often the certificate files are read again, besides watching them.
    #[arg(long, default_value = "10s", value_parser = crate::flag_bounds::duration)]
    pub cert_poll_interval: Duration,

    /// Serve a renewed certificate only once the API server's CA bundles (read from this
    /// operator's webhook configurations and CRD) accept it as much as the one served, keeping
    /// the served one until then. Needs a Kubernetes client and read access to those objects;
    /// without either, or with `false`, renewed files are served as soon as they are read.
    #[arg(long, default_value_t = true, action = clap::ArgAction::Set)]
    pub wait_for_ca_trust: bool,

    /// A Secret in the operator's namespace (`POD_NAMESPACE`) holding the serving certificate
    /// as `tls.crt` and `tls.key` (repeatable; missing ones are skipped). Watched, so that a
    /// renewal is served as soon as the API server's CA bundles accept it, before the kubelet
    /// delivers the new files. Needs `--wait-for-ca-trust`, and `get`, `list` and `watch` on
    /// the Secret.
    #[arg(long = "cert-secret")]
    pub cert_secrets: Vec<String>,

    /// Keep the webhooks' serving certificate in this Secret of the operator's namespace
    /// (`POD_NAMESPACE`), for installs with neither OLM nor cert-manager: a self-signed CA and a
    /// certificate for the webhook Service (`--webhook-service`), issued when missing and
    /// renewed when two thirds of their validity have passed, the CA written into the caBundle
    /// of the webhook configurations and CRD that `config/` and the Helm chart install. The
    /// Secret is also followed as a `--cert-secret`. Needs `get`, `list`, `watch`, `create` and
    /// `update` on the Secret, and `get` and `patch` on those three objects.
    #[arg(long)]
    pub self_signed_cert_secret: Option<String>,

    /// How long a self-signed CA is valid (`--self-signed-cert-secret`).
    #[arg(long, default_value = "8760h", value_parser = crate::flag_bounds::validity)]
    pub self_signed_ca_validity: Duration,

    /// How long a self-signed serving certificate is valid (`--self-signed-cert-secret`); never
    /// past its CA.
    #[arg(long, default_value = "2160h", value_parser = crate::flag_bounds::validity)]
    pub self_signed_cert_validity: Duration,

    /// The webhook Service, in the operator's namespace, whose names the self-signed serving
    /// certificate holds.
    #[arg(long, default_value = operator::WEBHOOK_SERVICE_NAME)]
    pub webhook_service: String,

    /// Offer and serve HTTP/2 (off by default: rapid-reset attacks).
    #[arg(long)]
    pub enable_http2: bool,

    /// Largest request body accepted, in bytes; larger ones get 413.
    #[arg(long, default_value_t = DEFAULT_MAX_REQUEST_BYTES, value_parser = crate::flag_bounds::request_bytes)]
    pub max_request_bytes: usize,

    /// Time allowed to receive a request and answer it; slower ones get 408.
    #[arg(long, default_value = "10s", value_parser = crate::flag_bounds::duration)]
    pub request_timeout: Duration,

    /// After SIGTERM or SIGINT, how long the server still accepts connections and answers,
    /// reporting not ready and closing each connection after its answer (`Connection:
    /// close`), so that clients holding kept-alive connections (the API server) move to
    /// another replica before it stops accepting.
    #[arg(long, default_value = "3s", value_parser = humantime::parse_duration)]
    pub shutdown_delay: Duration,

    /// Time requests in flight get to finish once the server stops accepting.
    #[arg(long, default_value = "15s", value_parser = humantime::parse_duration)]
    pub shutdown_timeout: Duration,

    /// The issuers `spec.tls.issuerRef` may name beyond an Issuer in the Memcached's own
    /// namespace, which is all a Memcached may name by default: comma-separated
    /// `KIND.GROUP` (every issuer of the kind) or `KIND.GROUP/NAME` entries, or `*` (any
    /// issuer), e.g. `ClusterIssuer.cert-manager.io/internal-ca`. The webhooks refuse the
    /// others, and the controller reports them.
    #[arg(
        long,
        env = crate::admission::issuers::ALLOWED_ISSUERS_ENV,
        default_value = "",
        hide_default_value = true,
        value_parser = crate::admission::issuers::parse
    )]
    pub allowed_issuers: AllowedIssuers,

    /// Holds every webhook answer back this long, to rehearse a webhook slower than the API
    /// server's `timeoutSeconds`. A fault for drills: debug builds only, absent from release.
    #[cfg(debug_assertions)]
    #[arg(long, hide = true, value_parser = humantime::parse_duration)]
    pub debug_delay_webhooks: Option<Duration>,
}

impl ServerArgs {
    /// What admission needs from outside the objects: the images of the environment, and the
    /// issuers `--allowed-issuers` allows. The controller judges by the same.
    pub fn defaults(&self) -> Defaults {
        Defaults::from_env().with_allowed_issuers(self.allowed_issuers.clone())
    }
}

impl Default for ServerArgs {
    fn default() -> Self {
        ServerArgs {
            webhook_port: operator::WEBHOOK_PORT,
            cert_dir: None,
            cert_root: PathBuf::from("/"),
            cert_poll_interval: Duration::from_secs(10),
            wait_for_ca_trust: true,
            cert_secrets: Vec::new(),
            self_signed_cert_secret: None,
            self_signed_ca_validity: Duration::from_secs(8760 * 3600),
            self_signed_cert_validity: Duration::from_secs(2160 * 3600),
            webhook_service: operator::WEBHOOK_SERVICE_NAME.to_string(),
            enable_http2: false,
            max_request_bytes: DEFAULT_MAX_REQUEST_BYTES,
            request_timeout: Duration::from_secs(10),
            shutdown_delay: Duration::from_secs(3),
            shutdown_timeout: Duration::from_secs(15),
            allowed_issuers: AllowedIssuers::default(),
            #[cfg(debug_assertions)]
            debug_delay_webhooks: None,
        }
    }
}

/// What the webhook handlers share.
struct App {
    defaults: Defaults,
    metrics: Metrics,
    max_request_bytes: usize,
    /// Set once shutting down: every answer closes its connection.
    draining: AtomicBool,
    #[cfg(debug_assertions)]
    debug_delay: Option<Duration>,
}

/// Whether the webhooks should receive traffic: a certificate is loaded and they are served.
#[derive(Default)]
pub struct Readiness {
    resolver: Arc<CertResolver>,
    serving: AtomicBool,
}

impl Readiness {
    /// `Ok` when the webhooks can answer, else why not.
    pub fn check(&self) -> Result<(), &'static str> {
        if !self.resolver.is_loaded() {
            return Err("no usable serving certificate yet");
        }
        if !self.serving.load(Ordering::Acquire) {
            return Err("webhooks not serving");
        }
        Ok(())
    }
}

/// How long a kept-alive connection waits for its next request. hyper bounds the wait between
/// requests and the reading of the next request's headers with one timer, so this outlasts the
/// idle connections of the API server's webhook client (client-go keeps Go's
/// `http.DefaultTransport` default, 90 s): the API server always closes an idle connection
/// first. A shorter bound closes connections the API server is about to reuse; its next POST
/// then fails with `broken pipe` or `connection reset`, which Go does not retry.
pub const KEEP_ALIVE_IDLE: Duration = Duration::from_secs(120);

/// Serves the webhooks on `bind_address` until `shutdown` completes, defaulting and judging
/// with [`ServerArgs::defaults`], recording into `metrics` and reporting through `readiness`, then drains
/// requests in flight for at most `--shutdown-timeout`.
pub async fn serve(
    args: ServerArgs,
    bind_address: IpAddr,
    metrics: Metrics,
    readiness: Arc<Readiness>,
    tls_settings: SettingsWatch,
    // Given only with `--wait-for-ca-trust` (the manager decides).
    trust: Option<(TrustWatch, Option<SecretPairs>)>,
    shutdown: impl Future<Output = ()> + Send,
) -> Result<(), ServerError> {
    let started = Instant::now();
    let provider = certs::crypto_provider();
    let resolver = readiness.resolver.clone();
    let mut reloader = CertReloader::new(
        certs::candidates(args.cert_dir.as_deref(), &args.cert_root),
        resolver.clone(),
        provider.clone(),
        metrics.clone(),
    );
    if let Some((trust, secrets)) = trust {
        reloader = reloader.with_trust(trust);
        if let Some(secrets) = secrets {
            reloader = reloader.with_secrets(secrets);
        }
    }
    reloader.check();
    let webhook_listener = bind("webhooks", bind_address, args.webhook_port).await?;
    let webhook_address = local_address("webhooks", &webhook_listener)?;
    let webhook_listener = webhook_listener
        .into_std()
        .map_err(|source| ServerError::Bind {
            server: "webhooks",
            address: webhook_address,
            source,
        })?;
    let enable_http2 = args.enable_http2;
    let tls = ProfiledTls::new("webhooks", tls_settings, move |settings: &TlsSettings| {
        tls_config(resolver.clone(), provider.clone(), settings, enable_http2)
    })
    .map_err(ServerError::Tls)?;
    let handle = Handle::<SocketAddr>::new();
    let mut server = axum_server::from_tcp_rustls(webhook_listener, tls.config())
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
        .header_read_timeout(KEEP_ALIVE_IDLE.max(args.request_timeout));
    server.http_builder().http2().max_concurrent_streams(100);
    let app = Arc::new(App {
        defaults: args.defaults(),
        metrics,
        max_request_bytes: args.max_request_bytes,
        draining: AtomicBool::new(false),
        #[cfg(debug_assertions)]
        debug_delay: args.debug_delay_webhooks,
    });
    let draining = app.clone();
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
    let tls_task = tokio::spawn(tls.run());

    let failure = tokio::select! {
        () = shutdown => None,
        finished = &mut webhook_task => Some(finished),
    };
    readiness.serving.store(false, Ordering::Release);
    let finished = match failure {
        Some(finished) => finished,
        None => {
            draining.draining.store(true, Ordering::Release);
            tracing::info!(
                delay_s = args.shutdown_delay.as_secs_f64(),
                "shutting down: still answering, each connection closed after its answer"
            );
            let delayed = tokio::select! {
                () = tokio::time::sleep(args.shutdown_delay) => None,
                finished = &mut webhook_task => Some(finished),
            };
            match delayed {
                Some(finished) => finished,
                None => {
                    tracing::info!(
                        deadline_s = args.shutdown_timeout.as_secs_f64(),
                        in_flight_connections = handle.connection_count(),
                        "shutting down: no new connections; finishing requests in flight"
                    );
                    handle.graceful_shutdown(Some(args.shutdown_timeout));
                    webhook_task.await
                }
            }
        }
    };
    reloader_task.abort();
    tls_task.abort();
    finished_cleanly("webhooks", finished)?;
    tracing::info!("finished the webhook requests in flight");
    Ok(())
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
        Ok(body) => answer(webhook.kind, &body, &app.defaults),
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
    let mut response = (
        reply.status,
        [(
            header::CONTENT_TYPE,
            HeaderValue::from_static(reply.content_type),
        )],
        reply.body,
    )
        .into_response();
    if app.draining.load(Ordering::Acquire) {
        response
            .headers_mut()
            .insert(header::CONNECTION, HeaderValue::from_static("close"));
    }
    response
}

fn text_response(status: StatusCode, message: &'static str) -> Response {
    (
        status,
        [(
            header::CONTENT_TYPE,
            HeaderValue::from_static(TEXT_CONTENT_TYPE),
        )],
        message,
    )
        .into_response()
}
