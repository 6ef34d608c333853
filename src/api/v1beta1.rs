//! Declares `v1beta1`, the storage version of Memcached and the hub of conversion.
//!
//! Every field is optional on the wire; the defaulting rules (`admission::defaults`) fill them
//! in, and the values they fill in are the `DEFAULT_*` constants (`v1beta1/limits.rs`), which
//! the schema's descriptions and CEL rules quote too.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{
    Affinity, ResourceRequirements, Toleration, TopologySpreadConstraint,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use kube::{CustomResource, KubeSchema};
use serde::{Deserialize, Serialize};

use super::cel;

pub mod limits;
mod monitoring;
mod network;
mod security;

pub use limits::{
    DEFAULT_MAX_CONNECTIONS, DEFAULT_MAX_ITEM_SIZE, DEFAULT_MAX_UNAVAILABLE,
    DEFAULT_MEMORY_LIMIT_MB, DEFAULT_METRICS_PORT, DEFAULT_PORT, DEFAULT_REPLICAS,
    DEFAULT_SLAB_CHUNK_MAX_BYTES, DEFAULT_TERMINATION_GRACE_SECONDS, DEFAULT_THREADS,
    DEFAULT_VERBOSITY, MAX_REPLICAS, MIN_ITEM_SIZE_BYTES, MIN_WARM_RESTART_MEMORY_MB,
};
pub use monitoring::{MonitoringSpec, RulesSpec, ServiceMonitorSpec};
pub use network::{MAX_ALLOWED_SOURCES, NetworkPolicySpec};

pub use security::{
    AUTH_FILE_KEY, AuthSpec, AuthStatus, ClientAuth, ClientCaSource, ClientCaTrust, IssuerRef,
    MAX_AUTH_ENTRIES, TLS_CA_KEY, TLS_CERT_KEY, TLS_KEY_KEY, TlsSpec, TlsStatus,
};

/// The desired state of a memcached cluster.
#[derive(CustomResource, KubeSchema, Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[kube(
    group = "cache.f2367556.dev",
    version = "v1beta1",
    kind = "Memcached",
    plural = "memcacheds",
    shortname = "mc",
    category = "all",
    namespaced,
    cel,
    doc = "A memcached cluster: a StatefulSet of memcached servers behind a headless Service, with a PodDisruptionBudget.",
    status = "MemcachedStatus",
    derive = "Default",
    derive = "PartialEq",
    scale(
        spec_replicas_path = ".spec.replicas",
        status_replicas_path = ".status.replicas",
        label_selector_path = ".status.selector"
    ),
    printcolumn = r#"{"name":"Replicas","type":"integer","jsonPath":".spec.replicas","description":"Desired memcached servers"}"#,
    printcolumn = r#"{"name":"Ready","type":"integer","jsonPath":".status.readyReplicas","description":"Servers ready to take traffic"}"#,
    printcolumn = r#"{"name":"Memory","type":"integer","jsonPath":".spec.memcached.memoryLimitMB","description":"Item memory per server, MiB"}"#,
    printcolumn = r#"{"name":"Age","type":"date","jsonPath":".metadata.creationTimestamp"}"#
)]
#[serde(rename_all = "camelCase")]
#[x_kube(validation = cel::plaintext_port_is_not_the_client_port())]
#[x_kube(validation = cel::metrics_port_is_its_own())]
#[x_kube(validation = cel::metrics_sources_are_listed())]
pub struct MemcachedSpec {
    /// Number of memcached servers (0 to 64). Defaults to 1.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0, max = 64))]
    pub replicas: Option<i32>,

    /// memcached container image, as an OCI reference. Defaults to the image the operator was
    /// released with (`RELATED_IMAGE_MEMCACHED`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 512), regex(pattern = cel::IMAGE_REFERENCE_PATTERN))]
    pub image: Option<String>,

    /// memcached's own settings.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memcached: Option<MemcachedConfig>,

    /// Compute resources of each memcached container. Defaults to the item memory plus
    /// headroom for connections and the hash table.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resources: Option<ResourceRequirements>,

    /// The client Service.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub service: Option<ServiceSpec>,

    /// The PodDisruptionBudget, created when there are two or more replicas.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pod_disruption_budget: Option<PodDisruptionBudgetSpec>,

    /// Scheduling constraints of the memcached pods. When none of affinity and
    /// topologySpreadConstraints is given, pods prefer distinct nodes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub affinity: Option<Affinity>,

    /// Tolerations of the memcached pods.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tolerations: Option<Vec<Toleration>>,

    /// Node labels the memcached pods must run on.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node_selector: Option<BTreeMap<String, String>>,

    /// PriorityClass of the memcached pods.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 253))]
    pub priority_class_name: Option<String>,

    /// How the memcached pods spread across topology domains.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub topology_spread_constraints: Option<Vec<TopologySpreadConstraint>>,

    /// TLS on the client port. Off when unset.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tls: Option<TlsSpec>,

    /// Authentication of clients by user and password. Off when unset.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub auth: Option<AuthSpec>,

    /// How a memcached server stops: how long it keeps serving after it is told to stop, and
    /// how long it then has before it is killed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub graceful_shutdown: Option<GracefulShutdownSpec>,

    /// A NetworkPolicy that lets only the listed sources reach the servers. None when unset.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub network_policy: Option<NetworkPolicySpec>,

    /// Prometheus metrics of every server, from a memcached_exporter sidecar. Off when unset.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub monitoring: Option<MonitoringSpec>,
}

/// How a memcached server stops.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[x_kube(validation = cel::grace_period_outlasts_the_delay())]
#[serde(rename_all = "camelCase")]
pub struct GracefulShutdownSpec {
    /// Seconds a stopping server keeps serving before memcached is signalled (a preStop sleep),
    /// so that clients see it leave the Service's endpoints first (0 to 600). None when unset.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0, max = 600))]
    pub pre_stop_delay_seconds: Option<i32>,

    /// Seconds from the start of the stop to the kill: the preStop delay plus memcached's own
    /// shutdown; longer than `preStopDelaySeconds` (1 to 3600). Defaults to 30.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 3600))]
    pub termination_grace_period_seconds: Option<i64>,
}

/// memcached's own settings, passed to it as command-line flags.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[x_kube(validation = cel::max_item_size_in_range())]
#[x_kube(validation = cel::max_item_size_fits_slab_chunks())]
#[x_kube(validation = cel::warm_restart_has_its_memory())]
#[serde(rename_all = "camelCase")]
pub struct MemcachedConfig {
    /// Item memory in MiB (`-m`). Defaults to 64.
    #[serde(
        default,
        rename = "memoryLimitMB",
        skip_serializing_if = "Option::is_none"
    )]
    #[schemars(range(min = 1, max = 1048576))]
    pub memory_limit_mb: Option<i32>,

    /// Most simultaneous client connections (`-c`). Defaults to 1024.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 1048576))]
    pub max_connections: Option<i32>,

    /// Worker threads (`-t`). Defaults to 4.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 256))]
    pub threads: Option<i32>,

    /// Largest item (`-I`), in memcached's notation: bytes, or a number followed by `k` or `m`
    /// (powers of 1024). At most half the item memory, and a multiple of memcached's largest
    /// slab chunk (`slab_chunk_max`, 512k unless `extraArgs` sets it): 512k, 1m, 1536k, 2m...
    /// Defaults to `1m`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 10), regex(pattern = cel::ITEM_SIZE_PATTERN))]
    pub max_item_size: Option<String>,

    /// Logging detail (`-v`, `-vv`): 0, 1 or 2. Defaults to 0.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0, max = 2))]
    pub verbosity: Option<i32>,

    /// Keep the items across a restart of the memcached container: memcached keeps them in a
    /// memory file (`-e`) on a memory-backed volume, saves it when stopped gracefully (SIGUSR1,
    /// which the container's preStop hook sends) and restores it when it starts again with the
    /// same memory settings. A deleted pod, a SIGKILL, an OOM kill or changed memory settings
    /// still start it empty. Needs at least 64 MiB of item memory. The image must hold a shell
    /// (`/bin/sh` with `kill` and `sleep`, as the official images do). Off when unset.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub warm_restart: Option<bool>,

    /// Further memcached flags, appended after the ones the operator sets. Flags the operator
    /// manages (memory, connections, threads, ports, listen address, item size, verbosity,
    /// TLS, auth file, memory file) are refused in every spelling memcached accepts, and so
    /// are the `-o` sub-options it sets or that would weaken the spec (`ssl_*`, `ext_*`,
    /// `no_*`, `proxy_*`, `modern`, `relaxed_privileges`, `sock_cookie_id`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 64), inner(length(max = 256)))]
    #[x_kube(validation = cel::no_managed_flags())]
    #[x_kube(validation = cel::no_reserved_suboptions())]
    pub extra_args: Option<Vec<String>>,
}

/// The client Service.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct ServiceSpec {
    /// The port memcached listens on and the Service exposes. Defaults to 11211.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 65535))]
    pub port: Option<i32>,
}

/// The PodDisruptionBudget.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct PodDisruptionBudgetSpec {
    /// How many servers a voluntary disruption may take down at once: a number or a
    /// percentage. Defaults to 1.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[x_kube(validation = cel::max_unavailable_is_count_or_percent())]
    pub max_unavailable: Option<IntOrString>,
}

/// The observed state of a memcached cluster.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct MemcachedStatus {
    /// The generation of the spec this status describes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,

    /// memcached servers that exist.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replicas: Option<i32>,

    /// memcached servers ready to take traffic.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ready_replicas: Option<i32>,

    /// Label selector of the servers, for the scale subresource.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub selector: Option<String>,

    /// Addresses (`host:port`) of the ready servers, in pod order, for clients to hash over.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub servers: Option<Vec<String>>,

    /// TLS as the servers' pod template configures it; absent when off.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tls: Option<TlsStatus>,

    /// Authentication as the servers' pod template configures it; absent when off.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub auth: Option<AuthStatus>,

    /// Which client CAs the servers trust, where the operator restarts them for a CA
    /// withdrawn from `spec.tls.clientCA`'s ConfigMap.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        rename = "clientCATrust"
    )]
    pub client_ca_trust: Option<ClientCaTrust>,

    /// Available, Progressing and Degraded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[x_kube(merge_strategy = kube::core::ListMerge::Map(vec!["type".into()]))]
    pub conditions: Option<Vec<Condition>>,
}
