//! Reconciles each Memcached into a StatefulSet, a headless Service and a
//! PodDisruptionBudget (and, as it asks, a NetworkPolicy, a cert-manager Certificate and a
//! ServiceMonitor), and reports honest status; only the leader reconciles.
//!
//! kube-runtime's `Controller` drives it: the watch of Memcacheds, the watches of their children
//! (which wake the Memcached they belong to), the optional kinds' wake-ups, and a periodic
//! sweep. Each reconcile (`reconcile`) is a pure plan (`desired`), the writes that differ from
//! it (`apply`), and the status and Event that say so (`report`). Reconciling reads only the
//! caches (`cache`, the layer below everything else): a Memcached whose children and status are
//! as they should be costs no request. Specs are defaulted and validated here too (defense in
//! depth), so an invalid object that slipped past missing webhooks is reported as
//! Degraded/InvalidSpec and changes nothing.
//!
//! The layers, each importing only those below it: `cache` (what is kept, the watches);
//! `desired` (the pure plan); `context`, `error`, `events`, `metrics`, `field_owners`; then
//! `apply` and `report`; then `reconcile`; this module wires them and nothing imports it.
//!
//! The controller's requests go through a client of its own, bounded in flight and in rate
//! (built by the manager); the API server's Priority and Fairness shares it between clients.

pub mod apply;
pub mod cache;
pub mod client_cas;
pub mod context;
pub mod desired;
pub mod error;
pub mod events;
pub mod field_owners;
pub mod metrics;
pub mod reconcile;
pub mod report;

use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;

use futures::{FutureExt, StreamExt};
use kube::runtime::controller::{Action, Controller};
use kube::runtime::watcher;
use kube::{Client, ResourceExt};
use tokio::sync::watch;
use tracing::warn;

use self::cache::child::owner_of;
use self::cache::children::Children;
use self::cache::compact::uid_key;
use self::cache::known::KnownChildren;
use self::cache::memcacheds::memcacheds;
use self::cache::pods::owner_of_pod;
use self::cache::sweep;
use self::context::{Context, RESYNC, Run, backoff};
use self::desired::children::Platform;
use self::error::Error;
use self::reconcile::reconcile;
use crate::api::v1beta1::Memcached;

/// Looks at the cluster's API groups once, for OpenShift (by its security API group). The APIs
/// of other projects whose objects the controller writes (cert-manager's, the Prometheus
/// Operator's) are followed while it runs (`cache::optional`).
pub async fn discover(client: &Client) -> Platform {
    match client.list_api_groups().await {
        Ok(groups) => {
            if groups
                .groups
                .iter()
                .any(|g| g.name == "security.openshift.io")
            {
                Platform::OpenShift
            } else {
                Platform::Kubernetes
            }
        }
        Err(error) => {
            warn!(%error, "could not list API groups; assuming plain Kubernetes");
            Platform::Kubernetes
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

async fn controller(
    context: Arc<Context>,
    shutdown: impl std::future::Future<Output = ()> + Send + Sync + 'static,
) {
    let client = context.client.clone();
    let config = kube::runtime::controller::Config::default().concurrency(context.concurrency);
    let health = context.metrics.health.clone();
    let known = Arc::new(KnownChildren::new(context.metrics.record("known_children")));
    let (children, triggers) = Children::follow(client.clone(), known.clone(), &health);
    let (moved, memcacheds_moved) = watch::channel(());
    let (memcacheds, changed) = {
        let context = context.clone();
        let known = known.clone();
        let listed = std::sync::Mutex::new(HashSet::new());
        let on_event = move |event: &watcher::Event<Memcached>| {
            forget_records(&context, &known, &listed, event);
            moved.send_replace(());
        };
        memcacheds(client, on_event, health.listing("Memcacheds"))
    };
    let resync = sweep::sweep(memcacheds.clone(), RESYNC);
    let run = Arc::new(Run {
        context,
        memcacheds: memcacheds.clone(),
        memcacheds_moved,
        children,
        known,
    });
    let readers = memcacheds.clone();
    let reconciling = Controller::for_stream(changed, memcacheds)
        .with_config(config)
        .watches_stream(triggers.statefulsets.map(Ok), |s| owner_of(&s))
        .watches_stream(triggers.services.map(Ok), |s| owner_of(&s))
        .watches_stream(triggers.budgets.map(Ok), |b| owner_of(&b))
        .watches_stream(triggers.network_policies.map(Ok), |n| owner_of(&n))
        .watches_stream(triggers.pods.map(Ok), |pod| owner_of_pod(&pod))
        .watches_stream(triggers.config_maps.map(Ok), move |config_map| {
            client_cas::readers(&readers, &config_map)
        })
        .reconcile_on(triggers.optional)
        .reconcile_all_on(triggers.all)
        .reconcile_on(resync)
        .graceful_shutdown_on(shutdown)
        .run(reconcile, error_policy, run.clone())
        .for_each(|result| async move {
            match result {
                Ok((object, _)) => tracing::debug!(memcached = %object, "reconciled"),
                // Failed watches are logged where they fail (`cache::watch`), failed
                // reconciles by `error_policy`.
                Err(error) => tracing::debug!(%error, "reconcile loop"),
            }
        });
    // Reconciles wait for the required children's caches (`reconcile`); this says why, if it
    // lasts.
    let say_why = async {
        run.children.listed_or_say_which_not().await;
        std::future::pending::<()>().await
    };
    tokio::select! {
        () = reconciling => {}
        () = say_why => {}
    }
}

/// Drops the records of a deleted Memcached (and what is known of its children), and, once a
/// listing is complete, of every one it no longer holds (deleted while the watch was down);
/// `listed` collects a listing's uids.
fn forget_records(
    context: &Context,
    known: &KnownChildren,
    listed: &std::sync::Mutex<HashSet<u64>>,
    event: &watcher::Event<Memcached>,
) {
    let mut listed = listed.lock().unwrap_or_else(|e| e.into_inner());
    match event {
        watcher::Event::Delete(memcached) => {
            context.forget(&memcached.metadata);
            known.forget_named(&memcached.metadata);
        }
        watcher::Event::Init => listed.clear(),
        watcher::Event::InitApply(memcached) => {
            listed.insert(uid_key(&memcached.metadata));
        }
        watcher::Event::InitDone => {
            context.retain(&listed);
            *listed = HashSet::new();
        }
        watcher::Event::Apply(_) => {}
    }
}

fn error_policy(object: Arc<Memcached>, error: &Error, run: Arc<Run>) -> Action {
    let context = &run.context;
    let failures = context.record_failure(&object.metadata);
    run.forget_if_gone(&object);
    let delay = backoff(failures);
    context.metrics.error(&error.metric_reason());
    warn!(
        memcached = %format!("{}/{}", object.namespace().unwrap_or_default(), object.name_any()),
        %error, failures, retry_in = ?delay, "reconcile failed"
    );
    Action::requeue(delay)
}
