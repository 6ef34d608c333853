//! Reconciles each Memcached into a StatefulSet, a headless Service and a
//! PodDisruptionBudget, and reports honest status; only the leader reconciles.
//!
//! This is the shell around pure parts: `children` builds the desired objects, `drift`
//! decides whether a write is needed, `status` computes conditions; `cache` says what is kept
//! in memory of each kind watched. Specs are defaulted and validated here too (defense in
//! depth), so an invalid object that slipped past missing webhooks is reported as
//! Degraded/InvalidSpec and changes nothing.

pub mod cache;
pub mod children;
pub mod drift;
pub mod metrics;
pub mod status;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::{FutureExt, StreamExt};
use k8s_openapi::api::apps::v1::StatefulSet;
use k8s_openapi::api::core::v1::{Pod, Service};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, Preconditions};
use kube::runtime::controller::{Action, Controller};
use kube::runtime::events::{Event, EventType, Recorder, Reporter};
use kube::runtime::reflector::{ObjectRef, Store};
use kube::{Client, Resource, ResourceExt};
use serde::Serialize;
use serde::de::DeserializeOwned;
use thiserror::Error;
use tracing::{info, warn};

use self::cache::CachedBudget;
use self::children::{Platform, desired_pdb, desired_service, desired_statefulset};
use self::metrics::Metrics;
use self::status::{Observed, Problem, desired_status};
use crate::admission::{Defaults, default_spec, validate_create};
use crate::api::v1beta1::Memcached;
use crate::operator;

/// How long to wait before looking again at a Memcached that reconciled cleanly.
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
        /// What was being done (`apply`, `get`, `delete`, `list`, `patch status of`).
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
    /// The API client.
    pub client: Client,
    /// Defaults applied in memory (defense in depth).
    pub defaults: Defaults,
    /// How pods must run on this cluster.
    pub platform: Platform,
    /// Publishes Events.
    pub recorder: Recorder,
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
        let reporter = Reporter {
            controller: operator::NAME.into(),
            instance: std::env::var("HOSTNAME").ok(),
        };
        Self {
            recorder: Recorder::new(client.clone(), reporter),
            client,
            defaults,
            platform,
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

/// Detects OpenShift by its security API group.
pub async fn detect_platform(client: &Client) -> Platform {
    match client.list_api_groups().await {
        Ok(groups)
            if groups
                .groups
                .iter()
                .any(|g| g.name == "security.openshift.io") =>
        {
            Platform::OpenShift
        }
        Ok(_) => Platform::Kubernetes,
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

/// What one run of the controller shares: the process's context, and the caches this run
/// fills that reconciling reads besides the Memcached it is given.
struct Run {
    context: Arc<Context>,
    budgets: Store<CachedBudget>,
}

async fn controller(
    context: Arc<Context>,
    shutdown: impl std::future::Future<Output = ()> + Send + Sync + 'static,
) {
    let client = context.client.clone();
    let config = kube::runtime::controller::Config::default().concurrency(context.concurrency);
    let (memcacheds, changed) = cache::memcacheds(client.clone());
    let (budgets, budgets_touched) = cache::budgets(client.clone());
    Controller::for_stream(changed, memcacheds)
        .with_config(config)
        .owns(Api::<StatefulSet>::all(client.clone()), cache::ours())
        .owns(Api::<Service>::all(client), cache::ours())
        .owns_stream(budgets_touched)
        .graceful_shutdown_on(shutdown)
        .run(reconcile, error_policy, Arc::new(Run { context, budgets }))
        .for_each(|result| async move {
            match result {
                Ok((object, _)) => tracing::debug!(memcached = %object, "reconciled"),
                // A watch that fails (the CRD missing, listing forbidden) keeps everything from
                // being reconciled: say so. Failed reconciles are logged by `error_policy`.
                Err(kube::runtime::controller::Error::QueueError(error)) => {
                    warn!(%error, "watching failed; retrying with backoff")
                }
                Err(error) => tracing::debug!(%error, "reconcile loop"),
            }
        })
        .await;
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

async fn reconcile(object: Arc<Memcached>, run: Arc<Run>) -> Result<Action, Error> {
    let context = &run.context;
    let _timer = context.metrics.measure();
    if object.metadata.deletion_timestamp.is_some() {
        return Ok(Action::await_change()); // the garbage collector removes the children
    }
    let namespace = object.namespace().unwrap_or_default();
    let mut effective = (*object).clone();
    effective.spec = default_spec(&object.spec, &context.defaults);
    let problem = match validate_create(&effective) {
        Ok(_) => None,
        Err(denial) => {
            context.metrics.error("invalid_spec");
            Some(Problem::InvalidSpec(denial.message))
        }
    };

    let client = &context.client;
    let statefulsets = Api::<StatefulSet>::namespaced(client.clone(), &namespace);
    let mut failure = None;
    let statefulset = if problem.is_none() {
        let applied = async {
            let sts = ensure(
                context,
                &object,
                &statefulsets,
                "StatefulSet",
                desired_statefulset(&effective, context.platform),
            )
            .await?;
            let services = Api::<Service>::namespaced(client.clone(), &namespace);
            ensure(
                context,
                &object,
                &services,
                "Service",
                desired_service(&effective),
            )
            .await?;
            let pdbs = Api::<PodDisruptionBudget>::namespaced(client.clone(), &namespace);
            match desired_pdb(&effective) {
                Some(pdb) => {
                    ensure(context, &object, &pdbs, "PodDisruptionBudget", pdb).await?;
                }
                None => remove_budget(context, &run.budgets, &object, &pdbs).await?,
            }
            Ok::<_, Error>(sts)
        }
        .await;
        match applied {
            Ok(sts) => Some(sts),
            Err(error) => {
                failure = Some(error);
                None
            }
        }
    } else {
        None
    };
    let statefulset = match statefulset {
        Some(sts) => Some(sts),
        None => statefulsets
            .get_opt(&object.name_any())
            .await
            .map_err(|e| api_error("get", "StatefulSet", &object, e))?,
    };
    let ready_ordinals = ready_ordinals(context, &object).await?;
    let problem = problem.or_else(|| {
        failure
            .as_ref()
            .map(|e| Problem::ReconcileFailed(e.to_string()))
    });
    let now = Time(jiff::Timestamp::now());
    let status = desired_status(
        &effective,
        &Observed {
            statefulset,
            ready_ordinals,
        },
        problem.as_ref(),
        &now,
    );
    if object.status.as_ref() != Some(&status) {
        let memcacheds = Api::<Memcached>::namespaced(client.clone(), &namespace);
        memcacheds
            .patch_status(
                &object.name_any(),
                &PatchParams::default(),
                &Patch::Merge(serde_json::json!({ "status": status })),
            )
            .await
            .map_err(|e| api_error("patch status of", "Memcached", &object, e))?;
    }
    if let Some(error) = failure {
        publish(
            context,
            &object,
            EventType::Warning,
            "ReconcileFailed",
            error.to_string(),
            None,
        )
        .await;
        return Err(error);
    }
    if let Some(Problem::InvalidSpec(message)) = &problem {
        publish(
            context,
            &object,
            EventType::Warning,
            "InvalidSpec",
            message.clone(),
            None,
        )
        .await;
        return Ok(Action::await_change());
    }
    context.clear_failures(&object);
    Ok(Action::requeue(RESYNC))
}

/// Applies `desired` with server-side apply unless the live object already matches it.
async fn ensure<K>(
    context: &Context,
    owner: &Memcached,
    api: &Api<K>,
    kind: &'static str,
    desired: K,
) -> Result<K, Error>
where
    K: Resource<DynamicType = ()> + Clone + Serialize + DeserializeOwned + std::fmt::Debug,
{
    let name = owner.name_any();
    let live = api
        .get_opt(&name)
        .await
        .map_err(|e| api_error("get", kind, owner, e))?;
    if let Some(live) = &live {
        let (want, have) = (serde_json::to_value(&desired), serde_json::to_value(live));
        if let (Ok(want), Ok(have)) = (want, have) {
            match drift::first_difference(&want, &have) {
                None => return Ok(live.clone()),
                Some(path) => info!(
                    memcached = %format!("{}/{name}", owner.namespace().unwrap_or_default()),
                    kind, field = %path, "child differs from its desired state"
                ),
            }
        }
    }
    context.metrics.child_written(kind);
    let applied = api
        .patch(
            &name,
            &PatchParams::apply(operator::NAME).force(),
            &Patch::Apply(&desired),
        )
        .await
        .map_err(|e| api_error("apply", kind, owner, e))?;
    let (reason, verb) = if live.is_some() {
        ("Updated", "updated")
    } else {
        ("Created", "created")
    };
    info!(memcached = %format!("{}/{name}", owner.namespace().unwrap_or_default()), kind, verb, "child written");
    let related = applied.object_ref(&());
    publish(
        context,
        owner,
        EventType::Normal,
        reason,
        format!("{kind} {name} {verb}"),
        Some(related),
    )
    .await;
    Ok(applied)
}

/// Deletes the Memcached's PodDisruptionBudget if one it owns exists.
///
/// Whether one exists comes from the cache of budgets (those labelled as the operator's)
/// once that has been listed, so the common case, none, costs no request; before that, it is
/// fetched (metadata only). The delete is conditional on the uid seen, and a budget already
/// gone counts as removed: the cache may lag behind a deletion.
async fn remove_budget(
    context: &Context,
    budgets: &Store<CachedBudget>,
    owner: &Memcached,
    api: &Api<PodDisruptionBudget>,
) -> Result<(), Error> {
    const KIND: &str = "PodDisruptionBudget";
    let name = owner.name_any();
    let namespace = owner.namespace().unwrap_or_default();
    let owned_uid = |budget: &CachedBudget| {
        let owner_uid = owner.uid().unwrap_or_default();
        let owned = budget
            .metadata
            .owner_references
            .iter()
            .flatten()
            .any(|o| o.uid == owner_uid);
        owned.then(|| budget.metadata.uid.clone()).flatten()
    };
    let listed = budgets
        .wait_until_ready()
        .now_or_never()
        .is_some_and(|ready| ready.is_ok());
    let uid = if listed {
        budgets
            .get(&ObjectRef::new(&name).within(&namespace))
            .and_then(|budget| owned_uid(&budget))
    } else {
        api.get_metadata_opt(&name)
            .await
            .map_err(|e| api_error("get", KIND, owner, e))?
            .and_then(|budget| owned_uid(&budget))
    };
    let Some(uid) = uid else { return Ok(()) };
    context.metrics.child_written(KIND);
    let only_that_one = DeleteParams {
        preconditions: Some(Preconditions {
            uid: Some(uid),
            resource_version: None,
        }),
        ..DeleteParams::default()
    };
    match api.delete(&name, &only_that_one).await {
        Ok(_) => {}
        Err(kube::Error::Api(status)) if status.code == 404 => return Ok(()),
        Err(error) => return Err(api_error("delete", KIND, owner, error)),
    }
    publish(
        context,
        owner,
        EventType::Normal,
        "Deleted",
        format!("{KIND} {name} deleted"),
        None,
    )
    .await;
    Ok(())
}

/// Ordinals of the Memcached's pods that are Ready and not being deleted.
async fn ready_ordinals(context: &Context, object: &Memcached) -> Result<Vec<i32>, Error> {
    let pods = Api::<Pod>::namespaced(
        context.client.clone(),
        &object.namespace().unwrap_or_default(),
    );
    let list = pods
        .list(&ListParams::default().labels(&children::selector_string(object)))
        .await
        .map_err(|e| api_error("list", "Pod", object, e))?;
    let prefix = format!("{}-", object.name_any());
    Ok(list
        .items
        .iter()
        .filter(|pod| pod.metadata.deletion_timestamp.is_none())
        .filter(|pod| {
            pod.status
                .as_ref()
                .and_then(|s| s.conditions.as_ref())
                .is_some_and(|c| c.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
        })
        .filter_map(|pod| pod.name_any().strip_prefix(&prefix)?.parse().ok())
        .collect())
}

/// Publishes an Event about `object`; `related` names the child it concerns, which also keeps
/// events about different children from being folded into one series.
async fn publish(
    context: &Context,
    object: &Memcached,
    type_: EventType,
    reason: &str,
    note: String,
    related: Option<k8s_openapi::api::core::v1::ObjectReference>,
) {
    let event = Event {
        type_,
        reason: reason.into(),
        note: Some(note),
        action: "Reconcile".into(),
        secondary: related,
    };
    if let Err(error) = context
        .recorder
        .publish(&event, &object.object_ref(&()))
        .await
    {
        warn!(%error, "could not publish an event");
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
