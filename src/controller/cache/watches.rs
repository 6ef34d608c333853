//! Runs the watches of the controller's children on a task of their own, and tells when each
//! of their caches has been listed once.
//!
//! The children's caches fill whether or not reconciles are running: a watch polled only by the
//! controller's queue would stop filling its cache whenever the queue is not polled, and a
//! reconcile waiting for that cache would then wait forever. Here the task keeps every watch
//! moving, a child's change becomes the name of the Memcached it belongs to, and a reconcile
//! starts judging children only once every cache has been listed ([`Children::listed`]), as
//! controller-runtime starts its workers only once its informers have synced. Each watch
//! retries with kube's default backoff when it fails, and says so.

use std::time::Duration;

use futures::channel::mpsc;
use futures::future::FutureExt;
use futures::stream::{self, BoxStream, StreamExt};
use kube::runtime::reflector::{ObjectRef, Store};
use kube::{Client, Resource};
use std::sync::Arc;
use tokio::task::JoinHandle;
use tracing::warn;

use super::compact::{
    CachedBudget, CachedCertificate, CachedNetworkPolicy, CachedPod, CachedService,
    CachedServiceMonitor, CachedStatefulSet, Marked,
};
use super::known::KnownChildren;
use super::{self as cache, Objects};
use crate::api::v1beta1::Memcached;
use crate::controller::ServedApis;

/// How long the controller waits for the children's caches before it says which one is not
/// listed yet (and again each time that long passes).
pub const LISTING_PATIENCE: Duration = Duration::from_secs(30);

/// The caches of the controller's children, filled by their own task while this lives.
pub struct Children {
    /// StatefulSets, as [`CachedStatefulSet`]s.
    pub statefulsets: Store<CachedStatefulSet>,
    /// Services, metadata only.
    pub services: Store<CachedService>,
    /// PodDisruptionBudgets, metadata only.
    pub budgets: Store<CachedBudget>,
    /// NetworkPolicies, metadata only.
    pub network_policies: Store<CachedNetworkPolicy>,
    /// cert-manager Certificates, metadata only; `None` where `cert-manager.io/v1` was not
    /// served when the controller started.
    pub certificates: Option<Store<CachedCertificate>>,
    /// ServiceMonitors, metadata only; `None` where `monitoring.coreos.com/v1` was not served
    /// when the controller started.
    pub service_monitors: Option<Store<CachedServiceMonitor>>,
    /// Pods, reduced by [`cache::reduce_pod`].
    pub pods: Store<CachedPod>,
    task: JoinHandle<()>,
}

impl Drop for Children {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// A Memcached to reconcile because one of its children changed.
pub type Woken = mpsc::UnboundedReceiver<ObjectRef<Memcached>>;

impl Children {
    /// Starts the watches of every kind of child the cluster serves (`apis`: the kinds others
    /// define); returns their caches and the names of the Memcacheds whose children changed.
    /// Deletions and relists make `known` forget the children concerned.
    pub fn follow(client: Client, known: Arc<KnownChildren>, apis: ServedApis) -> (Self, Woken) {
        let (statefulsets, statefulsets_touched) =
            cache::statefulsets(client.clone(), known.clone());
        let (services, services_touched) = cache::services(client.clone(), known.clone());
        let (budgets, budgets_touched) = cache::budgets(client.clone(), known.clone());
        let (network_policies, network_policies_touched) =
            cache::network_policies(client.clone(), known.clone());
        let mut optional = Vec::new();
        let certificates = apis.certificates.then(|| {
            let (store, touched) = cache::certificates(client.clone(), known.clone());
            optional.push(owners("Certificates", touched, |c| owner_of(&c)));
            store
        });
        let service_monitors = apis.service_monitors.then(|| {
            let (store, touched) = cache::service_monitors(client.clone(), known);
            optional.push(owners("ServiceMonitors", touched, |m| owner_of(&m)));
            store
        });
        let (pods, pods_changed) = cache::pods(client);
        let owners = stream::select_all(
            [
                owners("StatefulSets", statefulsets_touched, |s| owner_of(&s)),
                owners("Services", services_touched, |s| owner_of(&s)),
                owners("PodDisruptionBudgets", budgets_touched, |b| owner_of(&b)),
                owners("NetworkPolicies", network_policies_touched, |n| {
                    owner_of(&n)
                }),
                owners("Pods", pods_changed, |pod| cache::owner_of_pod(&pod)),
            ]
            .into_iter()
            .chain(optional),
        );
        let (wake, woken) = mpsc::unbounded();
        let task = tokio::spawn(owners.for_each(move |owner| {
            // The controller is gone only when this task is about to be aborted.
            let _ = wake.unbounded_send(owner);
            futures::future::ready(())
        }));
        let children = Self {
            statefulsets,
            services,
            budgets,
            network_policies,
            certificates,
            service_monitors,
            pods,
            task,
        };
        (children, woken)
    }

    /// The kinds whose cache has not been listed yet.
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
            (
                "Certificates",
                self.certificates
                    .as_ref()
                    .is_none_or(|s| listed(s.wait_until_ready().now_or_never())),
            ),
            (
                "ServiceMonitors",
                self.service_monitors
                    .as_ref()
                    .is_none_or(|s| listed(s.wait_until_ready().now_or_never())),
            ),
            ("Pods", listed(self.pods.wait_until_ready().now_or_never())),
        ]
        .into_iter()
        .filter_map(|(kind, listed)| (!listed).then_some(kind))
        .collect()
    }

    /// Completes once every cache has been listed.
    pub async fn listed(&self) {
        let _ = futures::join!(
            self.statefulsets.wait_until_ready(),
            self.services.wait_until_ready(),
            self.budgets.wait_until_ready(),
            self.network_policies.wait_until_ready(),
            self.pods.wait_until_ready(),
            async {
                if let Some(store) = &self.certificates {
                    let _ = store.wait_until_ready().await;
                }
            },
            async {
                if let Some(store) = &self.service_monitors {
                    let _ = store.wait_until_ready().await;
                }
            },
        );
    }

    /// Completes once every cache has been listed; says which are not, every
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
                        "reconciling waits until every cache of children has been listed"
                    );
                }
            }
        }
    }
}

/// The Memcacheds woken by a watch of `kind`; its failures are logged, and it retries with
/// backoff.
fn owners<K: Send + 'static>(
    kind: &'static str,
    changed: Objects<K>,
    owner: impl Fn(K) -> Option<ObjectRef<Memcached>> + Send + 'static,
) -> BoxStream<'static, ObjectRef<Memcached>> {
    changed
        .filter_map(move |changed| {
            futures::future::ready(match changed {
                Ok(child) => owner(child),
                Err(error) => {
                    warn!(%error, kind, "watching failed; retrying with backoff");
                    None
                }
            })
        })
        .boxed()
}

/// The Memcached that controls a child: its controller owner reference, when that names a
/// Memcached of this API group (read into the child's [`Marks`](super::compact::Marks)).
pub fn owner_of<C: Resource + Marked>(child: &C) -> Option<ObjectRef<Memcached>> {
    let metadata = child.meta();
    let namespace = metadata.namespace.as_deref()?;
    let owner = child.marks().owner.as_ref()?;
    let name = owner.name.as_deref().or(metadata.name.as_deref())?;
    Some(ObjectRef::new(name).within(namespace))
}

#[cfg(test)]
mod tests {
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};

    use super::*;

    fn owned_by(kind: &str, api_version: &str, controller: Option<bool>) -> CachedService {
        CachedService::from(metadata_owned_by(kind, api_version, controller))
    }

    fn metadata_owned_by(kind: &str, api_version: &str, controller: Option<bool>) -> ObjectMeta {
        ObjectMeta {
            name: Some("cache".into()),
            namespace: Some("shop".into()),
            owner_references: Some(vec![OwnerReference {
                api_version: api_version.into(),
                kind: kind.into(),
                name: "cache-owner".into(),
                uid: "u".into(),
                controller,
                ..OwnerReference::default()
            }]),
            ..ObjectMeta::default()
        }
    }

    #[test]
    fn a_child_belongs_to_the_memcached_that_controls_it() {
        assert_eq!(
            owner_of(&owned_by(
                "Memcached",
                "cache.f2367556.dev/v1beta1",
                Some(true)
            )),
            Some(ObjectRef::new("cache-owner").within("shop"))
        );
        assert_eq!(
            owner_of(&owned_by(
                "Memcached",
                "cache.f2367556.dev/v1alpha1",
                Some(true)
            )),
            Some(ObjectRef::new("cache-owner").within("shop")),
            "any version of the group"
        );
    }

    #[test]
    fn other_owners_wake_nothing() {
        for (kind, api_version, controller) in [
            ("Memcached", "cache.f2367556.dev/v1beta1", None),
            ("Memcached", "cache.f2367556.dev/v1beta1", Some(false)),
            ("Memcached", "other.example.com/v1", Some(true)),
            ("StatefulSet", "apps/v1", Some(true)),
        ] {
            assert_eq!(
                owner_of(&owned_by(kind, api_version, controller)),
                None,
                "{kind} {api_version} {controller:?}"
            );
        }
        let mut cluster_scoped = owned_by("Memcached", "cache.f2367556.dev/v1beta1", Some(true));
        cluster_scoped.metadata.namespace = None;
        assert_eq!(owner_of(&cluster_scoped), None);
    }

    #[test]
    fn an_owner_of_the_childs_own_name_is_kept_without_its_name() {
        let mut same = metadata_owned_by("Memcached", "cache.f2367556.dev/v1beta1", Some(true));
        same.owner_references.get_or_insert_default()[0].name = "cache".into();
        let child = CachedService::from(same);
        assert_eq!(
            child.marks.owner.as_ref().map(|o| o.name.clone()),
            Some(None)
        );
        assert_eq!(
            owner_of(&child),
            Some(ObjectRef::new("cache").within("shop"))
        );
    }
}
