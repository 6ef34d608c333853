//! Reconciles each Memcached into a StatefulSet, a headless Service and a
//! PodDisruptionBudget, and reports honest status; only the leader reconciles.
//!
//! kube-runtime's `Controller` drives it: a watch of Memcacheds, the watches of their children
//! (which wake the Memcached they belong to), and a periodic sweep. Each reconcile
//! (`reconcile`) is a pure plan (`desired`), the writes that differ from it (`apply`), and the
//! status and Event that say so (`report`). Reconciling reads only the caches (`cache`): a
//! Memcached whose children and status are as they should be costs no request. Specs are
//! defaulted and validated here too (defense in depth), so an invalid object that slipped past
//! missing webhooks is reported as Degraded/InvalidSpec and changes nothing.
//!
//! The controller's requests go through a client of its own, bounded in flight
//! (`--max-requests-in-flight`, a tower `ConcurrencyLimitLayer`, built by the manager); the
//! API server's Priority and Fairness shares it between clients.

pub mod apply;
pub mod cache;
pub mod desired;
pub mod events;
pub mod field_owners;
pub mod metrics;
pub mod reconcile;
pub mod report;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::{FutureExt, StreamExt};
use kube::runtime::controller::{Action, Controller};
use kube::runtime::reflector::{ObjectRef, Store};
use kube::{Client, ResourceExt};
use thiserror::Error;
use tracing::warn;

use self::cache::known::KnownChildren;
use self::cache::status_stand_in::StatusStandIn;
use self::cache::sweep;
use self::cache::watches::Children;
use self::desired::children::{self, Platform};
use self::events::Events;
use self::metrics::Metrics;
use self::reconcile::reconcile;
use crate::admission::Defaults;
use crate::api::v1beta1::Memcached;
use crate::operator;

/// How often every Memcached is looked at again ([`sweep`]). Such a look reads only the
/// caches, so it costs no request unless something differs; it repairs what a lost watch event
/// would otherwise leave (a child deleted while a watch was re-listing).
pub const RESYNC: Duration = Duration::from_secs(300);
/// The first retry delay after a failure; it doubles per consecutive failure.
pub const BACKOFF_BASE: Duration = Duration::from_secs(1);
/// The longest retry delay.
pub const BACKOFF_CAP: Duration = Duration::from_secs(300);

/// A failed reconciliation.
#[derive(Debug, Error)]
pub enum Error {
    /// A call to the API server failed.
    #[error("{action} {kind} {namespace}/{name}: {source}")]
    Api {
        /// What was being done (`create`, `apply`, `get`, `delete`, `patch status of`, ...).
        action: &'static str,
        /// The object's kind.
        kind: &'static str,
        /// Its namespace.
        namespace: String,
        /// Its name.
        name: String,
        /// The client's error.
        #[source]
        source: kube::Error,
    },
}

impl Error {
    /// A short, bounded label for metrics.
    pub fn metric_reason(&self) -> String {
        match self {
            Error::Api { action, kind, .. } => {
                format!("{}_{}", action.replace(' ', "_"), kind.to_lowercase())
            }
        }
    }
}

/// What every reconciliation shares.
pub struct Context {
    /// The controller's API client (bounded in flight by the manager).
    pub client: Client,
    /// Defaults applied in memory (defense in depth).
    pub defaults: Defaults,
    /// How pods must run on this cluster.
    pub platform: Platform,
    /// The APIs of other projects the cluster served when the controller started.
    pub apis: ServedApis,
    /// Publishes Events.
    pub events: Events,
    /// Reconciliation metrics.
    pub metrics: Metrics,
    /// Consecutive failures per object, for the backoff.
    failures: Mutex<HashMap<ObjectRef<Memcached>, u32>>,
    /// Reconciles at once; 0 for no bound.
    pub concurrency: u16,
}

impl Context {
    /// Creates the shared context.
    pub fn new(client: Client, defaults: Defaults, platform: Platform, metrics: Metrics) -> Self {
        Self {
            events: Events::new(
                client.clone(),
                operator::NAME,
                std::env::var("HOSTNAME").ok(),
            ),
            client,
            defaults,
            platform,
            apis: ServedApis::default(),
            metrics,
            failures: Mutex::new(HashMap::new()),
            concurrency: 0,
        }
    }

    fn record_failure(&self, object: &Memcached) -> u32 {
        let mut failures = self.failures.lock().unwrap_or_else(|e| e.into_inner());
        let count = failures.entry(ObjectRef::from(object)).or_insert(0);
        *count = count.saturating_add(1);
        *count
    }

    fn clear_failures(&self, object: &Memcached) {
        let mut failures = self.failures.lock().unwrap_or_else(|e| e.into_inner());
        failures.remove(&ObjectRef::from(object));
    }
}

/// The delay before retrying after `failures` consecutive failures: doubling from
/// [`BACKOFF_BASE`], capped at [`BACKOFF_CAP`].
pub fn backoff(failures: u32) -> Duration {
    let exponent = failures.saturating_sub(1).min(16);
    BACKOFF_BASE
        .saturating_mul(1u32 << exponent)
        .min(BACKOFF_CAP)
}

/// The APIs of other projects whose objects the controller writes, as far as the cluster
/// serves them.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ServedApis {
    /// cert-manager's `cert-manager.io/v1` (Certificates, for `spec.tls.issuerRef`).
    pub certificates: bool,
    /// The Prometheus Operator's `monitoring.coreos.com/v1` (ServiceMonitors).
    pub service_monitors: bool,
}

/// Looks at the cluster's API groups once: OpenShift by its security API group, and the APIs
/// of [`ServedApis`]. Objects of an API the cluster does not serve then are not written (the
/// Memcacheds that ask for them get a warning Event); one installed later is used from the
/// controller's next start, as controller-runtime's `Owns` of a kind that may be absent is.
pub async fn discover(client: &Client) -> (Platform, ServedApis) {
    match client.list_api_groups().await {
        Ok(groups) => {
            let serves = |group: &str, version: &str| {
                groups
                    .groups
                    .iter()
                    .any(|g| g.name == group && g.versions.iter().any(|v| v.version == version))
            };
            let platform = if groups
                .groups
                .iter()
                .any(|g| g.name == "security.openshift.io")
            {
                Platform::OpenShift
            } else {
                Platform::Kubernetes
            };
            let apis = ServedApis {
                certificates: serves(children::certificate::GROUP, "v1"),
                service_monitors: serves(children::service_monitor::GROUP, "v1"),
            };
            (platform, apis)
        }
        Err(error) => {
            warn!(%error, "could not list API groups; assuming plain Kubernetes without cert-manager or the Prometheus Operator");
            (Platform::Kubernetes, ServedApis::default())
        }
    }
}

/// Runs the controller until `shutdown` completes, then lets reconciliations in flight finish
/// for at most `grace` before abandoning them.
///
/// The bound matters: kube's controller holds its work until the cache of Memcacheds has been
/// listed once, so without it a shutdown that comes before that list succeeds (the CRD not yet
/// installed, or listing forbidden) would wait forever.
pub async fn run_controller(
    context: Arc<Context>,
    shutdown: impl std::future::Future<Output = ()> + Send + Sync + 'static,
    grace: Duration,
) {
    let shutdown = shutdown.shared();
    let deadline = {
        let shutdown = shutdown.clone();
        async move {
            shutdown.await;
            tokio::time::sleep(grace).await;
        }
    };
    tokio::select! {
        () = controller(context, shutdown) => {}
        () = deadline => warn!(
            grace_s = grace.as_secs_f64(),
            "the controller did not stop within the shutdown timeout; abandoning its work"
        ),
    }
}

/// What one run of the controller shares: the process's context, the caches this run fills,
/// what it knows of its children and the statuses it has just written.
pub struct Run {
    context: Arc<Context>,
    memcacheds: Store<Memcached>,
    children: Children,
    known: Arc<KnownChildren>,
    stand_in: Arc<StatusStandIn>,
}

async fn controller(
    context: Arc<Context>,
    shutdown: impl std::future::Future<Output = ()> + Send + Sync + 'static,
) {
    let client = context.client.clone();
    let config = kube::runtime::controller::Config::default().concurrency(context.concurrency);
    let known = Arc::new(KnownChildren::default());
    let stand_in = Arc::new(StatusStandIn::default());
    let (children, woken) = Children::follow(client.clone(), known.clone(), context.apis);
    let (memcacheds, changed) = cache::memcacheds(client, stand_in.clone());
    let resync = sweep::sweep(memcacheds.clone(), RESYNC);
    let run = Arc::new(Run {
        context,
        memcacheds: memcacheds.clone(),
        children,
        known,
        stand_in,
    });
    let reconciling = Controller::for_stream(changed, memcacheds)
        .with_config(config)
        .reconcile_on(woken)
        .reconcile_on(resync)
        .graceful_shutdown_on(shutdown)
        .run(reconcile, error_policy, run.clone())
        .for_each(|result| async move {
            match result {
                Ok((object, _)) => tracing::debug!(memcached = %object, "reconciled"),
                // A watch of Memcacheds that fails (the CRD missing, listing forbidden) keeps
                // everything from being reconciled: say so. Failed reconciles are logged by
                // `error_policy`, failed watches of children by `watches`.
                Err(kube::runtime::controller::Error::QueueError(error)) => {
                    warn!(%error, kind = "Memcacheds", "watching failed; retrying with backoff")
                }
                Err(error) => tracing::debug!(%error, "reconcile loop"),
            }
        });
    // Reconciles wait for the children's caches (`reconcile`); this says why, if it lasts.
    let say_why = async {
        run.children.listed_or_say_which_not().await;
        std::future::pending::<()>().await
    };
    tokio::select! {
        () = reconciling => {}
        () = say_why => {}
    }
}

fn error_policy(object: Arc<Memcached>, error: &Error, run: Arc<Run>) -> Action {
    let context = &run.context;
    let failures = context.record_failure(&object);
    let delay = backoff(failures);
    context.metrics.error(&error.metric_reason());
    warn!(
        memcached = %format!("{}/{}", object.namespace().unwrap_or_default(), object.name_any()),
        %error, failures, retry_in = ?delay, "reconcile failed"
    );
    Action::requeue(delay)
}

fn api_error(
    action: &'static str,
    kind: &'static str,
    object: &Memcached,
    source: kube::Error,
) -> Error {
    Error::Api {
        action,
        kind,
        namespace: object.namespace().unwrap_or_default(),
        name: object.name_any(),
        source,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_doubles_from_one_second_and_stops_at_five_minutes() {
        let delays: Vec<u64> = (1..=12).map(|n| backoff(n).as_secs()).collect();
        assert_eq!(
            delays,
            vec![1, 2, 4, 8, 16, 32, 64, 128, 256, 300, 300, 300]
        );
        assert_eq!(backoff(u32::MAX), BACKOFF_CAP);
        assert_eq!(backoff(0), BACKOFF_BASE);
    }
}
