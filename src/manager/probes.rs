//! Serves the health probes (`/healthz`, `/readyz`) and the Prometheus metrics (`/metrics`)
//! over plain HTTP, as the kubelet and a scraper expect them.
//!
//! `/readyz` answers 200 only while the process is serving and every readiness check passes
//! (for the webhooks: a certificate is loaded and the listener is up), else 503 with the
//! first reason. `/metrics` encodes the one registry every module registered its metrics in,
//! in the OpenMetrics text format.

use std::future::Future;
use std::net::{IpAddr, Ipv4Addr};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use axum::Router;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::IntoResponse;
use axum::routing::get;
use prometheus_client::encoding::text::encode;
use prometheus_client::registry::Registry;

use crate::listener::{ServerError, bind, finished_cleanly};
use crate::operator;

/// The `Content-Type` of the metrics endpoint.
pub const OPENMETRICS_CONTENT_TYPE: &str =
    "application/openmetrics-text; version=1.0.0; charset=utf-8";

/// Flags of the probe and metrics listeners (and the address every listener binds to).
#[derive(clap::Args, Clone, Debug)]
pub struct ProbeArgs {
    /// Address every listener binds to.
    #[arg(long, default_value_t = IpAddr::V4(Ipv4Addr::UNSPECIFIED))]
    pub bind_address: IpAddr,

    /// Port of `/healthz` and `/readyz` (plain HTTP).
    #[arg(long, default_value_t = operator::PROBE_PORT)]
    pub probe_port: u16,

    /// Port of `/metrics` (plain HTTP, OpenMetrics text).
    #[arg(long, default_value_t = operator::METRICS_PORT)]
    pub metrics_port: u16,
}

/// A readiness check: `Ok` when ready, else why not.
pub type Check = Box<dyn Fn() -> Result<(), &'static str> + Send + Sync>;

/// What `/readyz` answers from: whether the process serves, and its checks.
#[derive(Default)]
pub struct Readiness {
    serving: AtomicBool,
    checks: Vec<Check>,
}

impl Readiness {
    /// Readiness that needs every check of `checks` to pass once serving.
    pub fn new(checks: Vec<Check>) -> Self {
        Readiness {
            serving: AtomicBool::new(false),
            checks,
        }
    }

    /// Marks the process as serving, or no longer serving (shutting down).
    pub fn set_serving(&self, serving: bool) {
        self.serving.store(serving, Ordering::Release);
    }

    fn check(&self) -> Result<(), &'static str> {
        self.checks.iter().try_for_each(|check| check())?;
        if !self.serving.load(Ordering::Acquire) {
            return Err("not serving");
        }
        Ok(())
    }
}

/// Serves the probes and the metrics of `registry` until `shutdown` completes.
pub async fn serve(
    args: &ProbeArgs,
    readiness: Arc<Readiness>,
    registry: Arc<Registry>,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> Result<(), ServerError> {
    let probes = bind("probes", args.bind_address, args.probe_port).await?;
    let metrics = bind("metrics", args.bind_address, args.metrics_port).await?;
    let (stop, stopped) = tokio::sync::watch::channel(false);
    let serve_one = |listener, router| {
        let mut stopped = stopped.clone();
        tokio::spawn(async move {
            axum::serve(listener, router)
                .with_graceful_shutdown(async move {
                    let _ = stopped.wait_for(|stop| *stop).await;
                })
                .await
        })
    };
    let probe_task = serve_one(probes, probe_router(readiness));
    let metrics_task = serve_one(metrics, metrics_router(registry));
    shutdown.await;
    let _ = stop.send(true);
    finished_cleanly("probes", probe_task.await)?;
    finished_cleanly("metrics", metrics_task.await)?;
    Ok(())
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

fn metrics_router(registry: Arc<Registry>) -> Router {
    Router::new().route(
        "/metrics",
        get(move || async move {
            let mut text = String::with_capacity(4096);
            match encode(&mut text, &registry) {
                Ok(()) => (
                    StatusCode::OK,
                    [(
                        header::CONTENT_TYPE,
                        HeaderValue::from_static(OPENMETRICS_CONTENT_TYPE),
                    )],
                    text,
                )
                    .into_response(),
                Err(_) => (
                    StatusCode::INTERNAL_SERVER_ERROR,
                    "cannot encode the metrics\n",
                )
                    .into_response(),
            }
        }),
    )
}
