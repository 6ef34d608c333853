//! The kubelet's probes of the sidecars that run the operator's binary (the certificate
//! refresher and the stats relay): a plain-HTTP listener on the pod's port `--health-port`,
//! answering `/healthz` (liveness) and `/readyz` (readiness) from the sidecar's heartbeat,
//! and `/metrics` with the sidecar's own metrics (`metrics`) for Prometheus.
//!
//! Each sidecar's loop beats once a round ([`Heartbeat::beat`]). Both paths answer 200 while
//! the last beat is at most `within` old, and 503 with the beat's age otherwise, or before
//! the first beat: a loop that hangs (a session that never ends, a task that stopped) is then
//! restarted by the kubelet, which says why in a `Unhealthy` Event. They tell nothing of the
//! server itself: memcached's own probes do that, and a sidecar that cannot do its job stops
//! with the reason (`termination`). The answers hold no detail of the pod beyond the age.

use std::future::{Future, IntoFuture};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use axum::Router;
use axum::http::StatusCode;
use axum::routing::get;
use prometheus_client::registry::Registry;
use tokio::net::TcpListener;

use crate::listener::{ServerError, bind};
use crate::telemetry::openmetrics;

/// How old the last beat may be before the sidecar is judged hung: a round of either sidecar
/// takes at most a few sessions of 5 s each (`session`), and the kubelet probes every few
/// seconds.
pub const WITHIN: Duration = Duration::from_secs(120);

/// The paths the kubelet probes.
pub const LIVENESS_PATH: &str = "/healthz";
/// See [`LIVENESS_PATH`].
pub const READINESS_PATH: &str = "/readyz";
/// Where the sidecar's metrics are scraped.
pub const METRICS_PATH: &str = "/metrics";

/// When a sidecar's loop last went round: milliseconds since the heartbeat was made, plus
/// one (0: never).
#[derive(Clone, Debug)]
pub struct Heartbeat {
    origin: Instant,
    last: Arc<AtomicU64>,
}

impl Default for Heartbeat {
    fn default() -> Self {
        Heartbeat {
            origin: Instant::now(),
            last: Arc::new(AtomicU64::new(0)),
        }
    }
}

impl Heartbeat {
    /// Records that the loop went round now.
    pub fn beat(&self) {
        let since = u64::try_from(self.origin.elapsed().as_millis()).unwrap_or(u64::MAX - 1);
        self.last.store(since + 1, Ordering::Release);
    }

    /// How long ago the loop last went round; None before its first round.
    pub fn age(&self) -> Option<Duration> {
        let last = self.last.load(Ordering::Acquire).checked_sub(1)?;
        let now = u64::try_from(self.origin.elapsed().as_millis()).unwrap_or(u64::MAX);
        Some(Duration::from_millis(now.saturating_sub(last)))
    }

    /// `Ok` while the last beat is at most `within` old, else why not.
    pub fn check(&self, within: Duration) -> Result<(), String> {
        match self.age() {
            None => Err("the sidecar's loop has not started yet".into()),
            Some(age) if age > within => Err(format!(
                "the sidecar's loop last went round {}s ago (more than {}s): it is hung",
                age.as_secs(),
                within.as_secs()
            )),
            Some(_) => Ok(()),
        }
    }
}

fn router(heartbeat: Heartbeat, within: Duration, metrics: Arc<Registry>) -> Router {
    let answer = move || {
        let heartbeat = heartbeat.clone();
        async move {
            match heartbeat.check(within) {
                Ok(()) => (StatusCode::OK, "ok\n".to_string()),
                Err(reason) => (StatusCode::SERVICE_UNAVAILABLE, format!("{reason}\n")),
            }
        }
    };
    Router::new()
        .route(LIVENESS_PATH, get(answer.clone()))
        .route(READINESS_PATH, get(answer))
        .route(
            METRICS_PATH,
            get(move || async move { openmetrics(&metrics) }),
        )
}

/// The probes' listener on `port` of every address, when a port is given: IPv6's unspecified
/// address, which takes IPv4 too (the kubelet probes the pod's address, of either family),
/// or IPv4's where the kernel has no IPv6. A port that cannot be bound stops the sidecar with
/// the reason.
pub async fn listen(port: Option<u16>) -> Result<Option<TcpListener>, ServerError> {
    let Some(port) = port else {
        return Ok(None);
    };
    match bind("health", IpAddr::V6(Ipv6Addr::UNSPECIFIED), port).await {
        Ok(listener) => Ok(Some(listener)),
        // In use is in use on either family; anything else (no IPv6 in this kernel) is
        // tried again on IPv4.
        Err(ServerError::Bind { source, .. }) if source.kind() != std::io::ErrorKind::AddrInUse => {
            Ok(Some(
                bind("health", IpAddr::V4(Ipv4Addr::UNSPECIFIED), port).await?,
            ))
        }
        Err(error) => Err(error),
    }
}

/// Runs `work` while serving the probes for `heartbeat` and the scrapes of `metrics` on
/// `listener` (when there is one); the listener is closed once `work` is done.
pub async fn beside<F: Future>(
    listener: Option<TcpListener>,
    heartbeat: Heartbeat,
    metrics: Registry,
    work: F,
) -> F::Output {
    let Some(listener) = listener else {
        return work.await;
    };
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let server = tokio::spawn(
        axum::serve(listener, router(heartbeat, WITHIN, Arc::new(metrics)))
            .with_graceful_shutdown(async move {
                let _ = stopped.await;
            })
            .into_future(),
    );
    let output = work.await;
    let _ = stop.send(());
    let _ = server.await;
    output
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_heartbeat_is_unhealthy_before_its_first_beat_and_once_it_is_too_old() {
        let heartbeat = Heartbeat::default();
        let said = heartbeat.check(WITHIN).expect_err("not started");
        assert!(said.contains("not started"), "{said}");
        heartbeat.beat();
        heartbeat.check(WITHIN).expect("just beat");
        assert!(heartbeat.age().expect("beat") < Duration::from_secs(1));
        std::thread::sleep(Duration::from_millis(30));
        let said = heartbeat
            .check(Duration::from_millis(10))
            .expect_err("older than 10 ms");
        assert!(
            said.contains("hung") && said.contains("more than 0s"),
            "{said}"
        );
        heartbeat.beat();
        heartbeat
            .check(Duration::from_millis(10))
            .expect("fresh again");
    }

    /// The answer to `GET path` on the loopback's `port`, once something listens there.
    async fn get(port: u16, path: &str) -> String {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        for _ in 0..250 {
            let Ok(mut stream) = tokio::net::TcpStream::connect(("127.0.0.1", port)).await else {
                tokio::time::sleep(Duration::from_millis(20)).await;
                continue;
            };
            let request = format!("GET {path} HTTP/1.1\r\nhost: x\r\nconnection: close\r\n\r\n");
            stream.write_all(request.as_bytes()).await.expect("sent");
            let mut answer = String::new();
            stream.read_to_string(&mut answer).await.expect("read");
            return answer;
        }
        panic!("nothing listens on port {port}");
    }

    #[tokio::test]
    async fn the_probe_paths_answer_from_the_heartbeat_and_stop_with_the_work() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("a port of its own");
        let port = listener.local_addr().expect("bound").port();
        let heartbeat = Heartbeat::default();
        let (release, released) = tokio::sync::oneshot::channel::<()>();
        let (metrics, registry) = super::super::metrics::RelayMetrics::registered();
        metrics
            .connections
            .get_or_create(&super::super::metrics::FAILED)
            .inc();
        let work = tokio::spawn(beside(
            Some(listener),
            heartbeat.clone(),
            registry,
            async move {
                let _ = released.await;
                "done"
            },
        ));
        let before = get(port, READINESS_PATH).await;
        assert!(
            before.starts_with("HTTP/1.1 503") && before.contains("not started"),
            "{before}"
        );
        heartbeat.beat();
        for path in [LIVENESS_PATH, READINESS_PATH] {
            let answer = get(port, path).await;
            assert!(answer.starts_with("HTTP/1.1 200"), "{path}: {answer}");
        }
        let scraped = get(port, METRICS_PATH).await;
        assert!(
            scraped.starts_with("HTTP/1.1 200")
                && scraped.contains("application/openmetrics-text")
                && scraped.contains("memcached_stats_relay_connections_total{result=\"failed\"} 1"),
            "{scraped}"
        );
        assert!(get(port, "/other").await.starts_with("HTTP/1.1 404"));
        release.send(()).expect("the work waits");
        let output = work.await.expect("joined");
        assert_eq!(output, "done");
        assert!(
            tokio::net::TcpStream::connect(("127.0.0.1", port))
                .await
                .is_err(),
            "the listener stopped with the work"
        );
    }

    #[tokio::test]
    async fn the_listener_on_every_address_takes_ipv4_clients() {
        let listener = listen(Some(0)).await.expect("bound").expect("a listener");
        let port = listener.local_addr().expect("bound").port();
        let heartbeat = Heartbeat::default();
        heartbeat.beat();
        let (release, released) = tokio::sync::oneshot::channel::<()>();
        let work = tokio::spawn(beside(
            Some(listener),
            heartbeat,
            Registry::default(),
            async move {
                let _ = released.await;
            },
        ));
        let answer = get(port, LIVENESS_PATH).await;
        assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
        release.send(()).expect("the work waits");
        work.await.expect("joined");
    }

    #[tokio::test]
    async fn without_a_port_the_work_runs_alone() {
        assert!(listen(None).await.expect("nothing to bind").is_none());
        let output = beside(None, Heartbeat::default(), Registry::default(), async { 7 }).await;
        assert_eq!(output, 7);
    }
}
