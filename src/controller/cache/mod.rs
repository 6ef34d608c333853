//! Decides what the controller keeps in memory of each kind it watches, and builds the watches
//! that fill those caches and wake the controller, from kube-runtime's parts.
//!
//! Reconciling reads only these caches: an unchanged Memcached costs no request at all. Per
//! kind, what is kept and why:
//!
//! - **Memcached** (`memcacheds`: a full watch): the object as stored, less its write history.
//! - **StatefulSet** (a full watch of the ones labelled as ours, decoded as the compact
//!   [`CachedStatefulSet`](compact::CachedStatefulSet)): name, namespace, uid,
//!   resourceVersion and generation; of the labels, ownerReferences and applied-hash annotation
//!   only their [`Marks`](compact::Marks); and of the status the three fields status reads
//!   (`replicas`, `updatedReplicas`, `observedGeneration`). No spec: the hash says what was
//!   applied, the generation says whether anyone changed the spec since.
//! - **Service, PodDisruptionBudget, NetworkPolicy, Certificate, ServiceMonitor**
//!   (metadata-only watches of the ones labelled as ours: the API server sends
//!   `PartialObjectMetadata`): the same metadata and marks. Certificates and ServiceMonitors
//!   are watched where and once the cluster serves their API (`optional`).
//! - **Pod** (`pods`: a full watch of the ones labelled as ours): name, namespace, the
//!   `app.kubernetes.io/instance` label, the creation and deletion timestamps, the two
//!   annotations that ask a server to restart for a withdrawn client CA, the Ready condition's
//!   status, and what the kubelet says of memcached's restarts and of stopped sidecars.
//! - **ConfigMap** (`config_maps`: a metadata-only watch of all of them, since the ones client
//!   CAs come from carry no label of ours): name, namespace and resource version.
//!
//! Each watch is kube's `watcher`, `reflector` and `predicate_filter` (`watch`): it wakes the
//! controller only for a change of what its cache keeps (`child::kept`), and always for a
//! deletion. Deletions and listings make the controller's record of its children (`known`)
//! forget what they concern.
//!
//! The modules: `compact` (the types kept), `child` (the kinds applied), `watch` (one watch from
//! kube's parts), `memcacheds`, `pods`, `config_maps`, `children` (the children's caches,
//! required and optional), `optional` (a kind another project defines, followed through its
//! CustomResourceDefinition), `health` (which watches fail), `known` (what the controller last
//! knew of each child) and `sweep` (every Memcached looked at again once per resync period).
//! No reconciling logic is here; nothing here imports the layers above it.

pub mod child;
pub mod children;
pub mod compact;
pub mod config_maps;
pub mod health;
pub mod known;
pub mod memcacheds;
pub mod optional;
pub mod pods;
pub mod sweep;
pub mod watch;

#[cfg(test)]
mod tests;
