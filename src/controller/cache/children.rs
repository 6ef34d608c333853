//! Starts the watches of the controller's children and holds their caches: the kinds every
//! cluster serves (StatefulSets, Services, PodDisruptionBudgets, NetworkPolicies, and the pods
//! of the StatefulSets), required, and the kinds other projects define (Certificates,
//! ServiceMonitors, PrometheusRules), optional; and the ConfigMaps client CAs come from
//! (`config_maps`), which no reconcile waits for.
//!
//! The required watches are handed to kube's `Controller`, which keeps polling them; reconciles
//! start judging children once each of their caches has been listed ([`Children::listed`], as
//! controller-runtime starts its workers once its informers have synced), and until then the
//! controller says which are not, every [`LISTING_PATIENCE`]. The optional kinds are never
//! waited for ([`optional`](super::optional)).

use std::sync::Arc;
use std::time::Duration;

use futures::channel::mpsc;
use futures::future::FutureExt;
use futures::stream::BoxStream;
use kube::api::{Api, PartialObjectMeta};
use kube::runtime::reflector::{ObjectRef, Store};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Client, Resource};
use tokio::task::JoinHandle;
use tracing::warn;

use super::child::{Kept, kept, ours};
use super::compact::{
    CachedBudget, CachedCertificate, CachedConfigMap, CachedNetworkPolicy, CachedPod,
    CachedPrometheusRule, CachedService, CachedServiceMonitor, CachedStatefulSet,
};
use super::config_maps::config_maps;
use super::health::Health;
use super::known::KnownChildren;
use super::optional::{self, Optional, Wakes};
use super::pods::pods;
use super::watch;
use crate::api::v1beta1::Memcached;

/// How long the controller waits for the required caches before it says which one is not
/// listed yet (and again each time that long passes).
pub const LISTING_PATIENCE: Duration = Duration::from_secs(30);

/// The caches of the controller's children.
pub struct Children {
    /// StatefulSets, as [`CachedStatefulSet`]s.
    pub statefulsets: Store<CachedStatefulSet>,
    /// Services, metadata only.
    pub services: Store<CachedService>,
    /// PodDisruptionBudgets, metadata only.
    pub budgets: Store<CachedBudget>,
    /// NetworkPolicies, metadata only.
    pub network_policies: Store<CachedNetworkPolicy>,
    /// Pods, reduced by [`reduce_pod`](super::pods::reduce_pod).
    pub pods: Store<CachedPod>,
    /// Every ConfigMap's name, namespace and resource version.
    pub config_maps: Store<CachedConfigMap>,
    /// cert-manager Certificates, metadata only, where and once `cert-manager.io/v1` is served.
    pub certificates: Arc<Optional<CachedCertificate>>,
    /// ServiceMonitors, metadata only, where and once `monitoring.coreos.com/v1` is served.
    pub service_monitors: Arc<Optional<CachedServiceMonitor>>,
    /// PrometheusRules, metadata only, where and once `monitoring.coreos.com/v1` serves them.
    pub prometheus_rules: Arc<Optional<CachedPrometheusRule>>,
    optional_tasks: Vec<JoinHandle<()>>,
}

impl Drop for Children {
    fn drop(&mut self) {
        for task in &self.optional_tasks {
            task.abort();
        }
    }
}

/// What wakes a Memcached because of its children, for kube's `Controller`: the changed
/// children of each required kind (to map to their owners), the Memcacheds whose optional
/// children changed, and a signal to look at every Memcached (an optional kind's availability
/// changed).
pub struct Triggers {
    /// Changed StatefulSets.
    pub statefulsets: BoxStream<'static, CachedStatefulSet>,
    /// Changed Services.
    pub services: BoxStream<'static, CachedService>,
    /// Changed PodDisruptionBudgets.
    pub budgets: BoxStream<'static, CachedBudget>,
    /// Changed NetworkPolicies.
    pub network_policies: BoxStream<'static, CachedNetworkPolicy>,
    /// Changed pods.
    pub pods: BoxStream<'static, CachedPod>,
    /// Changed ConfigMaps.
    pub config_maps: BoxStream<'static, CachedConfigMap>,
    /// The owners of changed Certificates, ServiceMonitors and PrometheusRules.
    pub optional: mpsc::UnboundedReceiver<ObjectRef<Memcached>>,
    /// Every Memcached.
    pub all: mpsc::UnboundedReceiver<()>,
}

impl Children {
    /// Builds the watches of every kind of child; the optional kinds' start on tasks of their
    /// own. Deletions and listings make `known` forget the children concerned; `health` hears
    /// of every listing and failure.
    pub fn follow(client: Client, known: Arc<KnownChildren>, health: &Health) -> (Self, Triggers) {
        let (statefulsets, sts_changed) = required(
            "StatefulSets",
            full_watch::<CachedStatefulSet>(client.clone()),
            known.clone(),
            health,
        );
        let (services, svc_changed) = required(
            "Services",
            metadata_watch::<CachedService>(client.clone()),
            known.clone(),
            health,
        );
        let (budgets, pdb_changed) = required(
            "PodDisruptionBudgets",
            metadata_watch::<CachedBudget>(client.clone()),
            known.clone(),
            health,
        );
        let (network_policies, policies_changed) = required(
            "NetworkPolicies",
            metadata_watch::<CachedNetworkPolicy>(client.clone()),
            known.clone(),
            health,
        );
        let (pods, pods_changed) = pods(client.clone(), health.listing("Pods"));
        let (config_maps, config_maps_changed) =
            config_maps(client.clone(), health.listing("ConfigMaps"));
        let (owner, optional_owners) = mpsc::unbounded();
        let (all, everything) = mpsc::unbounded();
        let wakes = Wakes { owner, all };
        let certificates = Arc::new(Optional::new(
            "Certificate",
            "cert-manager.io/v1",
            "certificates.cert-manager.io",
        ));
        let service_monitors = Arc::new(Optional::new(
            "ServiceMonitor",
            "monitoring.coreos.com/v1",
            "servicemonitors.monitoring.coreos.com",
        ));
        let prometheus_rules = Arc::new(Optional::new(
            "PrometheusRule",
            "monitoring.coreos.com/v1",
            "prometheusrules.monitoring.coreos.com",
        ));
        let optional_tasks = vec![
            optional::follow(
                client.clone(),
                certificates.clone(),
                known.clone(),
                wakes.clone(),
                health.listing("Certificates"),
            ),
            optional::follow(
                client.clone(),
                service_monitors.clone(),
                known.clone(),
                wakes.clone(),
                health.listing("ServiceMonitors"),
            ),
            optional::follow(
                client,
                prometheus_rules.clone(),
                known,
                wakes,
                health.listing("PrometheusRules"),
            ),
        ];
        let children = Self {
            statefulsets,
            services,
            budgets,
            network_policies,
            pods,
            config_maps,
            certificates,
            service_monitors,
            prometheus_rules,
            optional_tasks,
        };
        let triggers = Triggers {
            statefulsets: sts_changed,
            services: svc_changed,
            budgets: pdb_changed,
            network_policies: policies_changed,
            pods: pods_changed,
            config_maps: config_maps_changed,
            optional: optional_owners,
            all: everything,
        };
        (children, triggers)
    }

    /// The required kinds whose cache has not been listed yet.
    pub fn unlisted(&self) -> Vec<&'static str> {
        let listed = |ready: Option<Result<(), _>>| ready.is_some();
        [
            (
                "StatefulSets",
                listed(self.statefulsets.wait_until_ready().now_or_never()),
            ),
            (
                "Services",
                listed(self.services.wait_until_ready().now_or_never()),
            ),
            (
                "PodDisruptionBudgets",
                listed(self.budgets.wait_until_ready().now_or_never()),
            ),
            (
                "NetworkPolicies",
                listed(self.network_policies.wait_until_ready().now_or_never()),
            ),
            ("Pods", listed(self.pods.wait_until_ready().now_or_never())),
        ]
        .into_iter()
        .filter_map(|(kind, listed)| (!listed).then_some(kind))
        .collect()
    }

    /// Completes once every required cache has been listed (at once, after the first time).
    pub async fn listed(&self) {
        let _ = futures::join!(
            self.statefulsets.wait_until_ready(),
            self.services.wait_until_ready(),
            self.budgets.wait_until_ready(),
            self.network_policies.wait_until_ready(),
            self.pods.wait_until_ready(),
        );
    }

    /// Completes once every required cache has been listed; says which are not, every
    /// [`LISTING_PATIENCE`] until then.
    pub async fn listed_or_say_which_not(&self) {
        let mut listed = std::pin::pin!(self.listed());
        let mut waited = Duration::ZERO;
        loop {
            tokio::select! {
                () = &mut listed => return,
                () = tokio::time::sleep(LISTING_PATIENCE) => {
                    waited += LISTING_PATIENCE;
                    warn!(
                        waited_s = waited.as_secs(),
                        unlisted = ?self.unlisted(),
                        "reconciling waits until every required cache of children has been listed"
                    );
                }
            }
        }
    }
}

/// A watch of the operator's children of kind `C`, whole objects decoded as `C`.
fn full_watch<C>(client: Client) -> watch::Events<C>
where
    C: Resource<DynamicType = ()>
        + Clone
        + serde::de::DeserializeOwned
        + std::fmt::Debug
        + Send
        + 'static,
{
    use futures::StreamExt;
    watcher(Api::<C>::all(client), ours())
        .default_backoff()
        .boxed()
}

/// A metadata-only watch of the operator's children of kind `C`.
fn metadata_watch<C>(client: Client) -> watch::Events<C>
where
    C: Resource<DynamicType = ()>
        + From<PartialObjectMeta<C>>
        + Clone
        + std::fmt::Debug
        + Send
        + 'static,
    PartialObjectMeta<C>: Resource<DynamicType = ()>,
{
    use futures::StreamExt;
    let api = Api::<PartialObjectMeta<C>>::all(client);
    watcher(api, ours())
        .default_backoff()
        .map(|event| event.map(|event| watch::map_events(event, C::from)))
        .boxed()
}

/// A required kind's cache and changed children: deletions and listings make `known` forget.
fn required<C: Kept>(
    kind: &'static str,
    events: watch::Events<C>,
    known: Arc<KnownChildren>,
    health: &Health,
) -> (Store<C>, BoxStream<'static, C>) {
    let records = move |event: &watcher::Event<C>| match event {
        watcher::Event::Delete(child) => known.forget(C::KIND, child.meta()),
        watcher::Event::Init => known.relisting(C::KIND),
        _ => {}
    };
    watch::follow(kind, events, records, health.listing(kind), kept::<C>)
}
