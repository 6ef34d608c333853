//! Elects one leader among the operator's replicas with a coordination.k8s.io Lease, as
//! client-go's leader election does.
//!
//! The holder renews every retry period and steps down when it cannot renew within the renew
//! deadline, so a replica cut off from the API server stops reconciling before its lease
//! (which others wait out) expires. Another holder's lease counts as expired by this
//! replica's own clock, measured from when it last saw the lease change, so clock skew
//! between nodes does not matter. On shutdown the holder releases the lease at once.

use std::time::Duration;

use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
use kube::api::{Api, PostParams};
use tokio::sync::watch;
use tokio::time::Instant;
use tracing::{info, warn};

/// Timing of the election.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Timing {
    /// How long others wait before taking over an unrenewed lease.
    pub lease_duration: Duration,
    /// How long the holder keeps trying to renew before it steps down.
    pub renew_deadline: Duration,
    /// How often to try to acquire or renew.
    pub retry_period: Duration,
}

/// Timing that cannot work, as client-go's leader election refuses it.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum TimingError {
    /// The holder would give up before others may take over only if the deadline is shorter.
    #[error("--renew-deadline ({renew:?}) must be shorter than --lease-duration ({lease:?})")]
    RenewNotBeforeExpiry {
        /// The renew deadline.
        renew: Duration,
        /// The lease duration.
        lease: Duration,
    },
    /// The holder must be able to try to renew more than once before its deadline.
    #[error(
        "--retry-period ({retry:?}) must be shorter than --renew-deadline ({renew:?}) by a fifth \
         of itself (client-go's jitter factor, 1.2)"
    )]
    RetryNotBeforeDeadline {
        /// The retry period.
        retry: Duration,
        /// The renew deadline.
        renew: Duration,
    },
}

impl Timing {
    /// Whether this timing can work: the renew deadline shorter than the lease, and longer than
    /// 1.2 retry periods (client-go's `JitterFactor`), as client-go's leader election demands.
    pub fn check(&self) -> Result<(), TimingError> {
        if self.renew_deadline >= self.lease_duration {
            return Err(TimingError::RenewNotBeforeExpiry {
                renew: self.renew_deadline,
                lease: self.lease_duration,
            });
        }
        if self.renew_deadline <= self.retry_period.mul_f64(1.2) {
            return Err(TimingError::RetryNotBeforeDeadline {
                retry: self.retry_period,
                renew: self.renew_deadline,
            });
        }
        Ok(())
    }

    /// The lease duration as the Lease records it: whole seconds, rounded up, at least one (a
    /// shorter one written as 0 would read as expired).
    pub fn lease_seconds(&self) -> i32 {
        let nanos = self.lease_duration.as_nanos();
        let seconds = nanos.div_ceil(1_000_000_000).max(1);
        i32::try_from(seconds).unwrap_or(i32::MAX)
    }
}

impl Default for Timing {
    /// client-go's defaults: 15 s, 10 s, 2 s.
    fn default() -> Self {
        Self {
            lease_duration: Duration::from_secs(15),
            renew_deadline: Duration::from_secs(10),
            retry_period: Duration::from_secs(2),
        }
    }
}

/// What this replica saw of the lease the last time it changed.
#[derive(Clone, Debug, PartialEq)]
struct Observation {
    holder: Option<String>,
    renew_time: Option<MicroTime>,
    lease_duration: Duration,
    seen_at: Instant,
}

/// Why an attempt to acquire or renew failed.
#[derive(Debug, thiserror::Error)]
enum AttemptError {
    /// The API server refused or failed the request.
    #[error(transparent)]
    Api(#[from] kube::Error),
    /// No answer came before the renew deadline.
    #[error("no answer from the API server within {0:?}")]
    TimedOut(Duration),
}

/// One replica's side of the election.
pub struct Elector {
    api: Api<Lease>,
    name: String,
    identity: String,
    timing: Timing,
    observed: Option<Observation>,
}

/// The outcome of one attempt to acquire or renew.
#[derive(Debug, PartialEq, Eq)]
enum Attempt {
    /// This replica holds the lease.
    Held,
    /// Another replica holds an unexpired lease.
    HeldByOther(String),
}

impl Elector {
    /// Creates an elector for the Lease `name` in `api`'s namespace.
    pub fn new(api: Api<Lease>, name: &str, identity: &str, timing: Timing) -> Self {
        Self {
            api,
            name: name.into(),
            identity: identity.into(),
            timing,
            observed: None,
        }
    }

    /// Campaigns and holds the lease until `shutdown` fires, publishing whether this replica
    /// leads on `leading`; releases the lease on the way out if it holds it.
    pub async fn run(mut self, leading: watch::Sender<bool>, mut shutdown: watch::Receiver<bool>) {
        let mut last_renewal: Option<Instant> = None;
        // The holder last logged as the one this replica waits for.
        let mut waiting_for: Option<String> = None;
        loop {
            let is_leader = *leading.borrow();
            // An attempt never outlasts the renew deadline, as client-go's renew runs under a
            // context that ends there: cut off from the API server, a request may hang for
            // minutes (a dropped packet is retransmitted, not refused), and the holder must
            // step down before the lease others wait out expires.
            let limit = match last_renewal {
                Some(renewed) if is_leader => {
                    self.timing.renew_deadline.saturating_sub(renewed.elapsed())
                }
                _ => self.timing.renew_deadline,
            };
            let attempted = Instant::now();
            let attempt = tokio::time::timeout(limit, self.try_acquire_or_renew())
                .await
                .unwrap_or(Err(AttemptError::TimedOut(limit)));
            match attempt {
                Ok(Attempt::Held) => {
                    // The renew time written is the attempt's start: count from it.
                    last_renewal = Some(attempted);
                    waiting_for = None;
                    if !is_leader {
                        info!(identity = %self.identity, lease = %self.name, "became leader");
                        leading.send_replace(true);
                    }
                }
                Ok(Attempt::HeldByOther(holder)) => {
                    if is_leader {
                        warn!(identity = %self.identity, %holder, "lost the lease to another replica; stepping down");
                        leading.send_replace(false);
                    } else if waiting_for.as_ref() != Some(&holder) {
                        info!(identity = %self.identity, %holder, "another replica holds the lease; waiting until it expires unrenewed or is released");
                    }
                    waiting_for = Some(holder);
                }
                Err(error) => {
                    let overdue =
                        last_renewal.is_none_or(|t| t.elapsed() >= self.timing.renew_deadline);
                    warn!(identity = %self.identity, %error, "could not acquire or renew the lease");
                    if is_leader && overdue {
                        warn!(identity = %self.identity, "renew deadline passed; stepping down");
                        leading.send_replace(false);
                    }
                }
            }
            tokio::select! {
                _ = tokio::time::sleep(self.timing.retry_period) => {}
                _ = shutdown.wait_for(|stop| *stop) => break,
            }
        }
        if *leading.borrow() {
            leading.send_replace(false);
            match self.release().await {
                Ok(()) => info!(identity = %self.identity, "released the lease"),
                Err(error) => {
                    warn!(identity = %self.identity, %error, "could not release the lease")
                }
            }
        }
    }

    async fn try_acquire_or_renew(&mut self) -> Result<Attempt, AttemptError> {
        let now = MicroTime(jiff::Timestamp::now());
        let duration_secs = self.timing.lease_seconds();
        let Some(mut lease) = self.api.get_opt(&self.name).await? else {
            let lease = Lease {
                metadata: ObjectMeta {
                    name: Some(self.name.clone()),
                    ..ObjectMeta::default()
                },
                spec: Some(LeaseSpec {
                    holder_identity: Some(self.identity.clone()),
                    lease_duration_seconds: Some(duration_secs),
                    acquire_time: Some(now.clone()),
                    renew_time: Some(now),
                    lease_transitions: Some(0),
                    ..LeaseSpec::default()
                }),
            };
            return match self.api.create(&PostParams::default(), &lease).await {
                Ok(_) => Ok(Attempt::Held),
                Err(kube::Error::Api(status)) if status.code == 409 => Ok(Attempt::HeldByOther(
                    "a replica that created it first".into(),
                )),
                Err(error) => Err(error.into()),
            };
        };
        let spec = lease.spec.clone().unwrap_or_default();
        let holder = spec.holder_identity.clone().filter(|h| !h.is_empty());
        self.observe(&spec);
        if let Some(holder) = &holder
            && *holder != self.identity
            && !self.observed_expired()
        {
            return Ok(Attempt::HeldByOther(holder.clone()));
        }
        let taking_over = holder.as_deref() != Some(self.identity.as_str());
        lease.spec = Some(LeaseSpec {
            holder_identity: Some(self.identity.clone()),
            lease_duration_seconds: Some(duration_secs),
            acquire_time: if taking_over {
                Some(now.clone())
            } else {
                spec.acquire_time
            },
            renew_time: Some(now),
            lease_transitions: Some(spec.lease_transitions.unwrap_or(0) + i32::from(taking_over)),
            ..spec
        });
        match self
            .api
            .replace(&self.name, &PostParams::default(), &lease)
            .await
        {
            Ok(_) => {
                if let Some(previous) = holder.filter(|_| taking_over) {
                    info!(identity = %self.identity, %previous, "took over the lease: its holder stopped renewing it");
                }
                Ok(Attempt::Held)
            }
            Err(kube::Error::Api(status)) if status.code == 409 => Ok(Attempt::HeldByOther(
                "a replica that renewed it first".into(),
            )),
            Err(error) => Err(error.into()),
        }
    }

    /// Records the lease as seen now if its holder or renew time changed.
    fn observe(&mut self, spec: &LeaseSpec) {
        let holder = spec.holder_identity.clone().filter(|h| !h.is_empty());
        let changed = self
            .observed
            .as_ref()
            .is_none_or(|o| o.holder != holder || o.renew_time != spec.renew_time);
        if changed {
            let seconds = spec.lease_duration_seconds.unwrap_or(0).max(0);
            self.observed = Some(Observation {
                holder,
                renew_time: spec.renew_time.clone(),
                lease_duration: Duration::from_secs(u64::try_from(seconds).unwrap_or(0)),
                seen_at: Instant::now(),
            });
        }
    }

    fn observed_expired(&self) -> bool {
        self.observed
            .as_ref()
            .is_none_or(|o| o.seen_at.elapsed() > o.lease_duration)
    }

    async fn release(&self) -> Result<(), kube::Error> {
        let Some(mut lease) = self.api.get_opt(&self.name).await? else {
            return Ok(());
        };
        let spec = lease.spec.clone().unwrap_or_default();
        if spec.holder_identity.as_deref() != Some(self.identity.as_str()) {
            return Ok(());
        }
        lease.spec = Some(LeaseSpec {
            holder_identity: None,
            lease_duration_seconds: Some(1),
            renew_time: Some(MicroTime(jiff::Timestamp::now())),
            ..spec
        });
        self.api
            .replace(&self.name, &PostParams::default(), &lease)
            .await
            .map(|_| ())
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, Ordering};

    use super::*;

    fn timing(lease_ms: u64, renew_ms: u64, retry_ms: u64) -> Timing {
        Timing {
            lease_duration: Duration::from_millis(lease_ms),
            renew_deadline: Duration::from_millis(renew_ms),
            retry_period: Duration::from_millis(retry_ms),
        }
    }

    #[test]
    fn a_lease_of_a_fraction_of_a_second_is_recorded_rounded_up() {
        assert_eq!(Timing::default().lease_seconds(), 15);
        assert_eq!(timing(1_500, 1_000, 100).lease_seconds(), 2);
        assert_eq!(timing(900, 500, 100).lease_seconds(), 1, "not 0");
        assert_eq!(timing(0, 0, 0).lease_seconds(), 1);
    }

    /// A fake API server: the Lease is missing and created, until `cut` is set; from then on
    /// no request is ever answered, as for a replica whose packets are dropped.
    fn api_cut_off_when(cut: Arc<AtomicBool>) -> Api<Lease> {
        let service = tower::service_fn(move |request: http::Request<kube::client::Body>| {
            let cut = cut.load(Ordering::SeqCst);
            async move {
                if cut {
                    std::future::pending::<()>().await;
                }
                let (status, body) = if request.method() == http::Method::GET {
                    (
                        404,
                        serde_json::json!({"kind": "Status", "apiVersion": "v1",
                        "status": "Failure", "reason": "NotFound", "code": 404}),
                    )
                } else {
                    (
                        201,
                        serde_json::json!({"apiVersion": "coordination.k8s.io/v1",
                        "kind": "Lease", "metadata": {"name": "lease", "namespace": "ns"}}),
                    )
                };
                let body = kube::client::Body::from(serde_json::to_vec(&body).unwrap_or_default());
                http::Response::builder()
                    .status(status)
                    .body(body)
                    .map_err(|e| Box::new(e) as Box<dyn std::error::Error + Send + Sync>)
            }
        });
        Api::namespaced(kube::Client::new(service, "ns"), "ns")
    }

    /// A fake API server holding a Lease released by its holder (no holder, as `release`
    /// leaves it) with `transitions`; records the body of every replace in `written`.
    fn api_with_released_lease(
        transitions: i32,
        written: Arc<std::sync::Mutex<Vec<serde_json::Value>>>,
    ) -> Api<Lease> {
        let service = tower::service_fn(move |request: http::Request<kube::client::Body>| {
            let written = written.clone();
            async move {
                let lease = serde_json::json!({"apiVersion": "coordination.k8s.io/v1",
                    "kind": "Lease", "metadata": {"name": "lease", "namespace": "ns",
                    "resourceVersion": "7"},
                    "spec": {"leaseDurationSeconds": 1, "leaseTransitions": transitions,
                    "renewTime": "2026-01-01T00:00:00.000000Z"}});
                let body = if request.method() == http::Method::PUT {
                    let bytes = http_body_util::BodyExt::collect(request.into_body())
                        .await
                        .map(|b| b.to_bytes())
                        .unwrap_or_default();
                    let body: serde_json::Value =
                        serde_json::from_slice(&bytes).unwrap_or_default();
                    written.lock().map(|mut w| w.push(body.clone())).ok();
                    body
                } else {
                    lease
                };
                let body = kube::client::Body::from(serde_json::to_vec(&body).unwrap_or_default());
                http::Response::builder()
                    .status(200)
                    .body(body)
                    .map_err(|e| Box::new(e) as Box<dyn std::error::Error + Send + Sync>)
            }
        });
        Api::namespaced(kube::Client::new(service, "ns"), "ns")
    }

    #[tokio::test]
    async fn taking_a_released_lease_counts_a_transition_as_client_go_does() {
        let written = Arc::new(std::sync::Mutex::new(Vec::new()));
        let mut elector = Elector::new(
            api_with_released_lease(2, written.clone()),
            "lease",
            "me",
            Timing::default(),
        );
        let attempt = elector.try_acquire_or_renew().await;
        assert!(matches!(attempt, Ok(Attempt::Held)), "{attempt:?}");
        let written = written.lock().expect("the writes").clone();
        assert_eq!(written.len(), 1, "one replace: {written:?}");
        assert_eq!(written[0]["spec"]["holderIdentity"], "me");
        assert_eq!(written[0]["spec"]["leaseTransitions"], 3);
    }

    #[tokio::test(start_paused = true)]
    async fn a_holder_cut_off_from_the_api_server_steps_down_within_the_renew_deadline() {
        let cut = Arc::new(AtomicBool::new(false));
        let elector = Elector::new(
            api_cut_off_when(cut.clone()),
            "lease",
            "me",
            Timing::default(),
        );
        let (leading_sender, mut leading) = watch::channel(false);
        let (_stop, stop) = watch::channel(false);
        tokio::spawn(elector.run(leading_sender, stop));
        leading.wait_for(|leads| *leads).await.expect("it leads");
        let renewed = Instant::now();
        cut.store(true, Ordering::SeqCst);
        // Bounded by the lease: a holder still leading then leads beside its successor.
        tokio::time::timeout(
            Timing::default().lease_duration,
            leading.wait_for(|leads| !*leads),
        )
        .await
        .expect("it steps down before its lease expires")
        .expect("the elector runs");
        let stepped_down = renewed.elapsed();
        assert!(
            stepped_down <= Timing::default().renew_deadline,
            "stepped down {stepped_down:?} after its last renewal, past the renew deadline"
        );
    }

    #[test]
    fn timing_is_checked_as_client_go_checks_it() {
        assert_eq!(Timing::default().check(), Ok(()));
        assert!(matches!(
            timing(10_000, 10_000, 2_000).check(),
            Err(TimingError::RenewNotBeforeExpiry { .. })
        ));
        let error = timing(15_000, 10_000, 9_000).check().expect_err("refused");
        assert!(matches!(error, TimingError::RetryNotBeforeDeadline { .. }));
        assert!(error.to_string().contains("--retry-period"), "{error}");
        assert!(
            matches!(
                timing(15_000, 12_000, 10_000).check(),
                Err(TimingError::RetryNotBeforeDeadline { .. })
            ),
            "1.2 retry periods is the deadline itself"
        );
        assert_eq!(timing(15_000, 12_001, 10_000).check(), Ok(()));
    }
}
