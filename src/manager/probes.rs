//! Serves the health probes (`/healthz`, `/readyz`) over plain HTTP, as the kubelet expects
//! them.
//!
//! `/readyz` answers 200 only while the process is serving and every readiness check passes
//! (for the webhooks: a certificate is loaded and the listener is up), else 503 with the
//! first reason. The metrics have a listener of their own (`metrics`).

use std::future::Future;
use std::net::{IpAddr, Ipv4Addr};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use axum::Router;
use axum::http::StatusCode;
use axum::routing::get;

use crate::listener::{ServerError, bind};
use crate::operator;

/// Flags of the probe listener (and the address every listener binds to).
#[derive(clap::Args, Clone, Debug)]
pub struct ProbeArgs {
    /// Address every listener binds to.
    #[arg(long, default_value_t = IpAddr::V4(Ipv4Addr::UNSPECIFIED))]
    pub bind_address: IpAddr,

    /// Port of `/healthz` and `/readyz` (plain HTTP).
    #[arg(long, default_value_t = operator::PROBE_PORT)]
    pub probe_port: u16,
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

/// Serves the probes until `shutdown` completes.
pub async fn serve(
    args: &ProbeArgs,
    readiness: Arc<Readiness>,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> Result<(), ServerError> {
    let probes = bind("probes", args.bind_address, args.probe_port).await?;
    axum::serve(probes, probe_router(readiness))
        .with_graceful_shutdown(shutdown)
        .await
        .map_err(|source| ServerError::Serve {
            server: "probes",
            source,
        })
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
