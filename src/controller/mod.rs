//! Reconciles each Memcached into a StatefulSet, a headless Service and a
//! PodDisruptionBudget, and reports honest status; only the leader reconciles.
//!
//! This is the shell around pure parts: `children` builds the desired objects, `drift`
//! decides whether a write is needed, `status` computes conditions; `cache` says what is kept
//! in memory of each kind watched, `own_writes` what the controller remembers of its own
//! writes, `events` publishes Events. Reconciling reads only the caches: a Memcached whose
//! children and status are as they should be costs no request. Specs are defaulted and
//! validated here too (defense in depth), so an invalid object that slipped past missing
//! webhooks is reported as Degraded/InvalidSpec and changes nothing.

pub mod budget;
pub mod cache;
pub mod children;
pub mod compact;
pub mod drift;
pub mod events;
pub mod field_owners;
pub mod metrics;
pub mod own_writes;
pub mod status;
pub mod sweep;
pub mod watches;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures::{FutureExt, StreamExt};
use k8s_openapi::api::apps::v1::StatefulSet;
use k8s_openapi::api::core::v1::ObjectReference;
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams, Preconditions};
use kube::runtime::controller::{Action, Controller};
use kube::runtime::reflector::{ObjectRef, Store};
use kube::{Client, Resource, ResourceExt};
use thiserror::Error;
use tracing::{info, warn};

use self::budget::RequestBudget;
use self::cache::{CachedBudget, Child};
use self::children::{Platform, desired_pdb, desired_service, desired_statefulset};
use self::compact::Marked;
use self::drift::Verdict;
use self::events::{Change, Events};
use self::metrics::Metrics;
use self::own_writes::{OwnWrites, hash64};
use self::status::{Observed, Problem, desired_status};
use self::watches::Children;
use crate::admission::{Defaults, default_spec, validate_create};
use crate::api::v1beta1::{DEFAULT_REPLICAS, MAX_REPLICAS, Memcached};
use crate::operator;

/// How often every Memcached is looked at again ([`sweep`]). Such a look reads only the
/// caches, so it costs no request unless something differs; it repairs what a lost watch event
/// would otherwise leave (a child deleted while a watch was re-listing).
pub const RESYNC: Duration = Duration::from_secs(300);
/// How long the status of a Memcached whose StatefulSet was just written waits for the
/// StatefulSet controller's report before it is written without it.
pub const REPORT_WAIT: Duration = Duration::from_secs(2);
/// How long a reconcile may run before the controller warns that it is still waiting.
pub const SLOW_RECONCILE: Duration = Duration::from_secs(30);
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
    /// The API client.
    pub client: Client,
    /// Defaults applied in memory (defense in depth).
    pub defaults: Defaults,
    /// How pods must run on this cluster.
    pub platform: Platform,
    /// Publishes Events.
    pub events: Events,
    /// Reconciliation metrics.
    pub metrics: Metrics,
    /// Consecutive failures per object, for the backoff.
    failures: Mutex<HashMap<ObjectRef<Memcached>, u32>>,
    /// Reconciles at once; 0 for no bound.
    pub concurrency: u16,
    /// The controller's API requests in flight at once (Events included).
    pub requests: Arc<RequestBudget>,
}

impl Context {
    /// Creates the shared context, with at most `requests_in_flight` API requests in flight
    /// (0: no bound).
    pub fn new(
        client: Client,
        defaults: Defaults,
        platform: Platform,
        metrics: Metrics,
        requests_in_flight: u16,
    ) -> Self {
        let requests = Arc::new(RequestBudget::new(requests_in_flight));
        Self {
            events: Events::new(
                client.clone(),
                operator::NAME,
                std::env::var("HOSTNAME").ok(),
                requests.clone(),
            ),
            requests,
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

/// What one run of the controller shares: the process's context, the caches of children this
/// run fills, and its memory of its own writes.
struct Run {
    context: Arc<Context>,
    own: Arc<OwnWrites>,
    children: Children,
}

async fn controller(
    context: Arc<Context>,
    shutdown: impl std::future::Future<Output = ()> + Send + Sync + 'static,
) {
    let client = context.client.clone();
    let config = kube::runtime::controller::Config::default().concurrency(context.concurrency);
    let own = Arc::new(OwnWrites::default());
    let (children, woken) = Children::follow(client.clone(), own.clone());
    let requests = context.requests.clone();
    let (memcacheds, changed) = cache::memcacheds(client, own.clone(), move || requests.arrived());
    let resync = sweep::sweep(memcacheds.clone(), RESYNC);
    let run = Arc::new(Run {
        context,
        own,
        children,
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
    // Reconciles wait for the children's caches (`reconcile_one`); this says why, if it lasts.
    let say_why = async {
        run.children.listed_or_say_which_not().await;
        std::future::pending::<()>().await
    };
    let (stopped, stop) = tokio::sync::oneshot::channel::<()>();
    let reconciling = async {
        tokio::select! {
            () = reconciling => {}
            () = say_why => {}
        }
        drop(stopped);
    };
    // The Events of the changes made are sent until reconciling stops, and the last ones
    // after it (within the same shutdown grace).
    let delivering = run.context.events.deliver(async {
        let _ = stop.await;
    });
    tokio::join!(reconciling, delivering);
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

/// Reconciles one Memcached, and says so every [`SLOW_RECONCILE`] while it has not finished:
/// its requests carry no deadline of their own, and a request the API server never answers
/// would otherwise hold the object (and a slot of `--max-concurrent-reconciles`) in silence.
async fn reconcile(object: Arc<Memcached>, run: Arc<Run>) -> Result<Action, Error> {
    let memcached = format!(
        "{}/{}",
        object.namespace().unwrap_or_default(),
        object.name_any()
    );
    let work = reconcile_one(object, run);
    let mut work = std::pin::pin!(work);
    let mut running = Duration::ZERO;
    loop {
        tokio::select! {
            done = &mut work => return done,
            () = tokio::time::sleep(SLOW_RECONCILE) => {
                running += SLOW_RECONCILE;
                warn!(%memcached, running_s = running.as_secs(), "a reconcile waits for the API server");
            }
        }
    }
}

async fn reconcile_one(object: Arc<Memcached>, run: Arc<Run>) -> Result<Action, Error> {
    let context = &run.context;
    let _timer = context.metrics.measure();
    if object.metadata.deletion_timestamp.is_some() {
        return Ok(Action::await_change()); // the garbage collector removes the children
    }
    // Judging a child from a cache still being filled would re-create what exists.
    run.children.listed().await;
    let namespace = object.namespace().unwrap_or_default();
    let name = object.name_any();
    let mut effective = (*object).clone();
    effective.spec = default_spec(&object.spec, &context.defaults);
    // A status this controller wrote whose echo the cache has not seen yet is the newer one.
    if let Some(written) = run.own.written_status(&object.metadata) {
        effective.status = Some(written);
    }
    let problem = match validate_create(&effective) {
        Ok(_) => None,
        Err(denial) => {
            context.metrics.error("invalid_spec");
            Some(Problem::InvalidSpec(denial.message))
        }
    };

    // The children are independent: they are judged, and written if need be, at once, so a
    // reconcile that writes them waits for one round trip rather than one per child.
    let mut failure = None;
    let mut statefulset = None;
    let mut changes = Vec::new();
    let mut statefulset_written = false;
    if problem.is_none() {
        let (mut sts_changes, mut svc_changes, mut pdb_changes) =
            (Vec::new(), Vec::new(), Vec::new());
        let (sts, svc, pdb) = futures::join!(
            ensure(
                &run,
                &object,
                desired_statefulset(&effective, context.platform),
                &run.children.statefulsets,
                &mut sts_changes,
            ),
            ensure(
                &run,
                &object,
                desired_service(&effective),
                &run.children.services,
                &mut svc_changes,
            ),
            async {
                match desired_pdb(&effective) {
                    Some(pdb) => {
                        ensure(&run, &object, pdb, &run.children.budgets, &mut pdb_changes)
                            .await
                            .map(drop)
                    }
                    None => remove_budget(&run, &object, &mut pdb_changes).await,
                }
            },
        );
        statefulset_written = !sts_changes.is_empty();
        changes = [sts_changes, svc_changes, pdb_changes].concat();
        match (sts, svc, pdb) {
            (Ok(sts), Ok(_), Ok(())) => statefulset = sts,
            (Err(error), _, _) | (_, Err(error), _) | (_, _, Err(error)) => failure = Some(error),
        }
    }
    let statefulset = statefulset.or_else(|| {
        let cached = run
            .children
            .statefulsets
            .get(&ObjectRef::new(&name).within(&namespace));
        cached.map(|sts| (*sts).clone())
    });
    let replicas = effective
        .spec
        .replicas
        .unwrap_or(DEFAULT_REPLICAS)
        .clamp(0, MAX_REPLICAS);
    let ready_ordinals = (0..replicas)
        .filter(|i| {
            cache::pod_of(
                &run.children.pods,
                &namespace,
                &format!("{name}-{i}"),
                &name,
            )
            .is_some_and(|pod| status::serving(&pod))
        })
        .collect();
    let problem = problem.or_else(|| {
        failure
            .as_ref()
            .map(|e| Problem::ReconcileFailed(e.to_string()))
    });
    let reported = statefulset.as_ref().is_some_and(status::reported);
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
    // One Event for what this reconcile changed, however many children that was, sent once
    // nothing more urgent waits ([`Events::deliver`]).
    if let Some((reason, note, related)) = events::summarize(changes) {
        context.events.changed(&object, reason, note, related);
    }
    // A StatefulSet just written has not been looked at by its controller yet, so the status
    // would only say so: it waits for that controller's report (which wakes a reconcile), for
    // at most `REPORT_WAIT` after the write. One status write then says more than two would,
    // and during a burst the children of the Memcacheds still waiting come first.
    // The StatefulSet is named as its Memcached, and `OwnWrites` files it by kind and name.
    let its_statefulset = &object.metadata;
    let started = Instant::now();
    if statefulset_written {
        run.own.await_report(
            <StatefulSet as Child>::KIND,
            its_statefulset,
            started + REPORT_WAIT,
        );
    }
    let awaited = if reported {
        run.own
            .reported(<StatefulSet as Child>::KIND, its_statefulset);
        None
    } else {
        run.own
            .report_awaited(<StatefulSet as Child>::KIND, its_statefulset, started)
    };
    let stale = effective.status.as_ref() != Some(&status);
    let hold = awaited.filter(|_| stale && failure.is_none() && problem.is_none());
    if stale && hold.is_none() {
        let memcacheds = Api::<Memcached>::namespaced(context.client.clone(), &namespace);
        let patch = Patch::Merge(serde_json::json!({ "status": status }));
        let patched = context
            .requests
            .spend(memcacheds.patch_status(&name, &PatchParams::default(), &patch))
            .await
            .map_err(|e| api_error("patch status of", "Memcached", &object, e))?;
        run.own.wrote_status(&patched.metadata, status);
    }
    if let Some(error) = failure {
        context
            .events
            .warn(&object, "ReconcileFailed", error.to_string())
            .await;
        return Err(error);
    }
    if let Some(Problem::InvalidSpec(message)) = &problem {
        context
            .events
            .warn(&object, "InvalidSpec", message.clone())
            .await;
        return Ok(Action::await_change());
    }
    context.clear_failures(&object);
    context.events.clear(&object.metadata);
    if let Some(until) = hold {
        return Ok(Action::requeue(until.saturating_duration_since(started)));
    }
    // Looked at again by the sweep (`RESYNC`), or sooner on a change.
    Ok(Action::await_change())
}

/// Brings one child to its desired state, judged from the cache; returns what the cache keeps
/// of it now, or `None` for a child written moments ago that the cache has yet to see.
///
/// The desired object is stamped with its hash ([`drift::stamp`]). A current child costs no
/// request; one the cache cannot judge is fetched and compared field by field; one that is
/// missing is created, and one that differs is written with server-side apply (after
/// [`hand_over_created_fields`]); the answer is remembered ([`OwnWrites`]) so that its echo on
/// the watch wakes nothing.
async fn ensure<K>(
    run: &Run,
    owner: &Memcached,
    mut desired: K,
    cache: &Store<K::Cached>,
    changes: &mut Vec<Change>,
) -> Result<Option<K::Cached>, Error>
where
    K: Child + Resource<Scope = k8s_openapi::NamespaceResourceScope>,
{
    let context = &run.context;
    let kind = K::KIND;
    let hash = drift::stamp(&mut desired);
    let name = owner.name_any();
    let namespace = owner.namespace().unwrap_or_default();
    let memcached = format!("{namespace}/{name}");
    let cached = cache.get(&ObjectRef::new(&name).within(&namespace));
    let known = run.own.known(kind, desired.meta());
    let judged = cached
        .as_deref()
        .map(|c| (c.meta(), c.marks(), K::spec_version(c.meta())));
    let api = Api::<K>::namespaced(context.client.clone(), &namespace);
    let mut exists = cached.is_some();
    // Whether a create of the controller's still owns fields of the child: from the cache, or
    // from the child itself when it is read below.
    let mut created = cached
        .as_ref()
        .map_or(Created::Unknown, |c| Created::Cached(c.marks().created));
    let echo_awaited = run.own.awaits_echo(kind, desired.meta());
    match (
        drift::judge(desired.meta(), judged, known, echo_awaited),
        cached,
    ) {
        (Verdict::Current, Some(cached)) => return Ok(Some((*cached).clone())),
        (Verdict::Unseen, _) => return Ok(None),
        (Verdict::Write(reason), _) if exists => {
            info!(memcached = %memcached, kind, field = %reason, "child differs from its desired state")
        }
        (Verdict::Write(_), _) => {}
        (Verdict::Current | Verdict::Verify, _) => {
            let live = context
                .requests
                .spend(api.get_opt(&name))
                .await
                .map_err(|e| api_error("get", kind, owner, e))?;
            exists = live.is_some();
            if let Some(live) = live {
                let (want, have) = (serde_json::to_value(&desired), serde_json::to_value(&live));
                let difference = match (want, have) {
                    (Ok(want), Ok(have)) => drift::first_difference(&want, &have),
                    _ => Some(String::new()),
                };
                match difference {
                    None => {
                        let version = K::spec_version(live.meta());
                        let kept = K::cached(live);
                        run.own.learn(
                            kind,
                            desired.meta(),
                            drift::known(kept.meta(), kept.marks(), version, hash),
                        );
                        return Ok(Some(kept));
                    }
                    Some(path) => {
                        info!(memcached = %memcached, kind, field = %path, "child differs from its desired state");
                        created = Created::Read(Box::new(live.meta().clone()));
                    }
                }
            }
        }
    }
    context.metrics.child_written(kind);
    // A missing child is created, which costs the API server about half of an apply; one that
    // exists (or turns out to) is applied, once the fields its create recorded are the apply's.
    let mut written = None;
    if !exists {
        let post = PostParams {
            dry_run: false,
            field_manager: Some(operator::NAME.into()),
        };
        match context.requests.spend(api.create(&post, &desired)).await {
            Ok(child) => written = Some(child),
            Err(kube::Error::Api(status)) if status.code == 409 => exists = true,
            Err(error) => return Err(api_error("create", kind, owner, error)),
        }
    }
    let applied = match written {
        Some(child) => child,
        None => {
            hand_over_created_fields(run, owner, &memcached, &api, created).await?;
            let apply = PatchParams::apply(operator::NAME).force();
            context
                .requests
                .spend(api.patch(&name, &apply, &Patch::Apply(&desired)))
                .await
                .map_err(|e| api_error("apply", kind, owner, e))?
        }
    };
    run.own.wrote(kind, applied.meta());
    let version = K::spec_version(applied.meta());
    let related = applied.object_ref(&());
    let kept = K::cached(applied);
    run.own.learn(
        kind,
        kept.meta(),
        drift::known(kept.meta(), kept.marks(), version, hash),
    );
    let (reason, verb) = if exists {
        ("Updated", "updated")
    } else {
        ("Created", "created")
    };
    info!(memcached = %memcached, kind, verb, "child written");
    changes.push(Change {
        reason,
        note: format!("{kind} {name} {verb}"),
        related,
    });
    Ok(Some(kept))
}

/// What is known of whether a create of the controller's still owns fields of a child.
enum Created {
    /// Nothing: the child is read (metadata only) if it comes to an apply.
    Unknown,
    /// What the cache keeps ([`compact::Marks::created`]).
    Cached(bool),
    /// The child's metadata, just read.
    Read(Box<ObjectMeta>),
}

/// Makes the fields a create of the controller's recorded (an `Update` entry of its field
/// manager) part of its `Apply` entry before an apply, so that the apply can remove what it no
/// longer sets ([`field_owners`]). Costs nothing for a child the cache says carries no such
/// entry; the write is conditional on the resourceVersion read, and a child changed in
/// between fails the reconcile, which is retried.
async fn hand_over_created_fields<K>(
    run: &Run,
    owner: &Memcached,
    memcached: &str,
    api: &Api<K>,
    created: Created,
) -> Result<(), Error>
where
    K: Child + Resource<Scope = k8s_openapi::NamespaceResourceScope>,
{
    let context = &run.context;
    let name = owner.name_any();
    let metadata = match created {
        Created::Cached(false) => return Ok(()),
        Created::Read(metadata) => *metadata,
        Created::Cached(true) | Created::Unknown => {
            let live = context
                .requests
                .spend(api.get_metadata_opt(&name))
                .await
                .map_err(|e| api_error("get", K::KIND, owner, e))?;
            match live {
                Some(live) => live.metadata,
                None => return Ok(()),
            }
        }
    };
    let entries = metadata.managed_fields.as_deref().unwrap_or_default();
    let Some(folded) = field_owners::fold_updates_into_apply(entries, operator::NAME) else {
        return Ok(());
    };
    let patch = serde_json::json!({
        "metadata": {"resourceVersion": metadata.resource_version, "managedFields": folded}
    });
    let patched = context
        .requests
        .spend(api.patch_metadata(&name, &PatchParams::default(), &Patch::Merge(&patch)))
        .await
        .map_err(|e| api_error("hand over fields of", K::KIND, owner, e))?;
    run.own.wrote(K::KIND, &patched.metadata);
    info!(
        memcached,
        kind = K::KIND,
        "the fields recorded by its create are now the controller's applied fields"
    );
    Ok(())
}

/// Deletes the Memcached's PodDisruptionBudget if one it owns exists.
///
/// Whether one exists comes from the cache of budgets, so the common case, none, costs no
/// request; only a budget the controller applied that the cache has not seen yet is looked
/// up (metadata only). The delete is conditional on the uid seen, and a budget already gone
/// counts as removed: the cache may lag behind a deletion.
async fn remove_budget(
    run: &Run,
    owner: &Memcached,
    changes: &mut Vec<Change>,
) -> Result<(), Error> {
    const KIND: &str = "PodDisruptionBudget";
    let context = &run.context;
    let name = owner.name_any();
    let namespace = owner.namespace().unwrap_or_default();
    let api = Api::<PodDisruptionBudget>::namespaced(context.client.clone(), &namespace);
    let owned_uid = |budget: &CachedBudget| {
        let owned = budget
            .marks
            .owner
            .as_ref()
            .is_some_and(|o| o.uid == hash64(owner.uid()));
        owned.then(|| budget.metadata.uid.clone()).flatten()
    };
    let cached = run
        .children
        .budgets
        .get(&ObjectRef::new(&name).within(&namespace));
    let unseen = ObjectMeta {
        name: Some(name.clone()),
        namespace: Some(namespace.clone()),
        ..ObjectMeta::default()
    };
    let uid = match cached {
        Some(budget) => owned_uid(&budget),
        None if run.own.known(KIND, &unseen).is_some() => context
            .requests
            .spend(api.get_metadata_opt(&name))
            .await
            .map_err(|e| api_error("get", KIND, owner, e))?
            .and_then(|budget| owned_uid(&CachedBudget::from(budget))),
        None => None,
    };
    let Some(uid) = uid else { return Ok(()) };
    context.metrics.child_written(KIND);
    let only_that_one = DeleteParams {
        preconditions: Some(Preconditions {
            uid: Some(uid.clone()),
            resource_version: None,
        }),
        ..DeleteParams::default()
    };
    match context
        .requests
        .spend(api.delete(&name, &only_that_one))
        .await
    {
        Ok(_) => {}
        Err(kube::Error::Api(status)) if status.code == 404 => return Ok(()),
        Err(error) => return Err(api_error("delete", KIND, owner, error)),
    }
    run.own.forget(KIND, &unseen);
    info!(memcached = %format!("{namespace}/{name}"), kind = KIND, verb = "deleted", "child written");
    let related = ObjectReference {
        api_version: Some("policy/v1".into()),
        kind: Some(KIND.into()),
        name: Some(name.clone()),
        namespace: Some(namespace),
        uid: Some(uid),
        ..ObjectReference::default()
    };
    changes.push(Change {
        reason: "Deleted",
        note: format!("{KIND} {name} deleted"),
        related,
    });
    Ok(())
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
