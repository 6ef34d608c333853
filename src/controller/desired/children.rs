//! Builds the objects a Memcached owns: a StatefulSet of memcached servers, the headless
//! Service that gives each a stable address, and a PodDisruptionBudget.
//!
//! Pure functions of a Memcached whose spec has been defaulted; they never talk to the API
//! server. What secures the clients (TLS, authentication) is in [`security`]; how a server
//! stops and restarts (preStop, grace period, memory file) is in [`lifecycle`]; the
//! supervisor memcached runs under with authentication is in [`supervision`]; its metrics
//! (the exporter and its relay) are in [`monitoring`]; who each container runs as is in
//! [`identity`]. The containers of a pod never share a process namespace. Every child
//! carries the `app.kubernetes.io/*` labels and a controller owner reference (with
//! blockOwnerDeletion), so deleting the Memcached deletes them.

use std::collections::BTreeMap;

use k8s_openapi::api::apps::v1::{
    RollingUpdateStatefulSetStrategy, StatefulSet, StatefulSetSpec, StatefulSetUpdateStrategy,
};
use k8s_openapi::api::core::v1::{
    Affinity, Container, ContainerPort, PodAffinityTerm, PodAntiAffinity, PodSecurityContext,
    PodSpec, PodTemplateSpec, Probe, SeccompProfile, Service, ServicePort, ServiceSpec,
    TCPSocketAction, VolumeMount, WeightedPodAffinityTerm,
};
use k8s_openapi::api::policy::v1::{PodDisruptionBudget, PodDisruptionBudgetSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta, OwnerReference};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use kube::{Resource, ResourceExt};
use sha2::{Digest, Sha256};

use crate::api::v1beta1::{
    DEFAULT_MAX_CONNECTIONS, DEFAULT_MAX_ITEM_SIZE, DEFAULT_MAX_UNAVAILABLE,
    DEFAULT_MEMORY_LIMIT_MB, DEFAULT_PORT, DEFAULT_REPLICAS, DEFAULT_THREADS, DEFAULT_VERBOSITY,
    Memcached,
};
use crate::operator;

pub mod certificate;
pub mod identity;
pub mod lifecycle;
pub mod monitoring;
pub mod network;
pub mod probes;
pub mod prometheus_rule;
pub mod security;
pub mod service_monitor;
pub mod supervision;

pub use identity::{MEMCACHED_IMAGE_UID, Platform};

/// The memcached container's name.
pub const CONTAINER_NAME: &str = "memcached";
/// The name of the client port, on the container and the Service.
pub const PORT_NAME: &str = "memcache";
/// The pod-template annotation holding a hash of memcached's configuration.
pub const CONFIG_HASH_ANNOTATION: &str = "cache.f2367556.dev/config-hash";

/// The labels every child and every pod carries.
pub fn labels(memcached: &Memcached) -> BTreeMap<String, String> {
    let mut labels = selector_labels(memcached);
    labels.insert("app.kubernetes.io/component".into(), "cache".into());
    labels.insert("app.kubernetes.io/managed-by".into(), operator::NAME.into());
    labels
}

/// The labels that select a Memcached's pods.
pub fn selector_labels(memcached: &Memcached) -> BTreeMap<String, String> {
    BTreeMap::from([
        (
            "app.kubernetes.io/name".to_string(),
            "memcached".to_string(),
        ),
        (
            "app.kubernetes.io/instance".to_string(),
            memcached.name_any(),
        ),
    ])
}

/// The pod selector as a string, for `status.selector` and the scale subresource.
pub fn selector_string(memcached: &Memcached) -> String {
    selector_labels(memcached)
        .iter()
        .map(|(key, value)| format!("{key}={value}"))
        .collect::<Vec<_>>()
        .join(",")
}

fn metadata(memcached: &Memcached) -> ObjectMeta {
    ObjectMeta {
        name: Some(memcached.name_any()),
        namespace: memcached.namespace(),
        labels: Some(labels(memcached)),
        owner_references: memcached.controller_owner_ref(&()).map(|owner| {
            vec![OwnerReference {
                block_owner_deletion: Some(true),
                ..owner
            }]
        }),
        ..ObjectMeta::default()
    }
}

/// [`metadata`] with the labels a spec adds for a selector of someone else's (a Prometheus's
/// `serviceMonitorSelector` or `ruleSelector`), none of which replaces the children's own: the
/// Memcached's own selectors depend on those.
fn metadata_with_labels(
    memcached: &Memcached,
    extra: Option<&BTreeMap<String, String>>,
) -> ObjectMeta {
    let mut metadata = metadata(memcached);
    if let Some(extra) = extra {
        let labels = metadata.labels.get_or_insert_with(BTreeMap::new);
        for (key, value) in extra {
            labels.entry(key.clone()).or_insert_with(|| value.clone());
        }
    }
    metadata
}

/// The names a server certificate covers: the Service's, and every server's under it
/// (`NAME-i.NAME.NS.svc`), short and fully qualified.
pub fn secured_names(memcached: &Memcached) -> Vec<String> {
    let name = memcached.name_any();
    let namespace = memcached.namespace().unwrap_or_default();
    let service = format!("{name}.{namespace}.svc");
    vec![
        name.clone(),
        format!("{name}.{namespace}"),
        service.clone(),
        format!("*.{service}"),
        format!("{service}.cluster.local"),
        format!("*.{service}.cluster.local"),
    ]
}

/// The client port.
pub fn port(memcached: &Memcached) -> i32 {
    memcached
        .spec
        .service
        .as_ref()
        .and_then(|s| s.port)
        .unwrap_or(DEFAULT_PORT)
}

/// The ports memcached serves, by name: the client port, and the plaintext one beside TLS.
fn named_ports(memcached: &Memcached) -> impl Iterator<Item = (&'static str, i32)> {
    let plaintext = security::plaintext_port(memcached);
    std::iter::once((PORT_NAME, port(memcached)))
        .chain(plaintext.map(|port| (security::PLAINTEXT_PORT_NAME, port)))
}

/// The probe ports of the sidecars that run the operator's binary: the first free ones past
/// memcached's ports and the metrics port.
fn health_ports(memcached: &Memcached) -> probes::HealthPorts {
    probes::health_ports([
        Some(port(memcached)),
        security::plaintext_port(memcached),
        monitoring::metrics_port(memcached),
    ])
}

/// The supervisor's metrics port, on memcached's container: with monitoring, where memcached
/// runs under the supervisor (`supervision::supervised`).
fn supervisor_port(memcached: &Memcached) -> Option<i32> {
    (supervision::supervised(memcached) && monitoring::metrics_port(memcached).is_some())
        .then(|| health_ports(memcached).supervisor)
}

/// The ports Prometheus scrapes on each server's pod, by name, with monitoring on: the
/// exporter's metrics port, the certificate refresher's probe port with TLS, the stats
/// relay's where it runs (both serve `/metrics` beside their probes, `sidecar::metrics`), and
/// the supervisor's where memcached runs under it. The Service names them, the ServiceMonitor
/// scrapes them, and the NetworkPolicy opens them to the metrics sources only.
pub fn scraped_ports(memcached: &Memcached) -> Vec<(&'static str, i32)> {
    let Some(metrics) = monitoring::metrics_port(memcached) else {
        return Vec::new();
    };
    let health = health_ports(memcached);
    let mut ports = vec![(monitoring::METRICS_PORT_NAME, metrics)];
    if memcached.spec.tls.is_some() {
        ports.push((probes::REFRESHER_PORT_NAME, health.refresher));
    }
    if monitoring::relayed(memcached) {
        ports.push((probes::RELAY_PORT_NAME, health.relay));
    }
    if let Some(port) = supervisor_port(memcached) {
        ports.push((probes::SUPERVISOR_PORT_NAME, port));
    }
    ports
}

/// memcached's arguments: the managed flags from the spec, then `extraArgs`.
pub fn memcached_args(memcached: &Memcached) -> Vec<String> {
    let config = memcached.spec.memcached.clone().unwrap_or_default();
    let mut args = vec![
        "-m".to_string(),
        config
            .memory_limit_mb
            .unwrap_or(DEFAULT_MEMORY_LIMIT_MB)
            .to_string(),
        "-c".to_string(),
        config
            .max_connections
            .unwrap_or(DEFAULT_MAX_CONNECTIONS)
            .to_string(),
        "-t".to_string(),
        config.threads.unwrap_or(DEFAULT_THREADS).to_string(),
        "-I".to_string(),
        config
            .max_item_size
            .unwrap_or_else(|| DEFAULT_MAX_ITEM_SIZE.to_string()),
        "-p".to_string(),
        port(memcached).to_string(),
        "-U".to_string(),
        "0".to_string(),
    ];
    match config.verbosity.unwrap_or(DEFAULT_VERBOSITY) {
        1 => args.push("-v".into()),
        2 => args.push("-vv".into()),
        _ => {}
    }
    args.extend(security::args(memcached, port(memcached)));
    args.extend(lifecycle::args(memcached));
    args.extend(config.extra_args.unwrap_or_default());
    args
}

fn memcached_container(memcached: &Memcached, mounts: Vec<VolumeMount>) -> Container {
    let probe = |initial_delay, period| Probe {
        tcp_socket: Some(TCPSocketAction {
            port: IntOrString::String(PORT_NAME.into()),
            host: None,
        }),
        initial_delay_seconds: Some(initial_delay),
        period_seconds: Some(period),
        timeout_seconds: Some(2),
        failure_threshold: Some(3),
        ..Probe::default()
    };
    Container {
        name: CONTAINER_NAME.into(),
        image: memcached.spec.image.clone(),
        command: supervision::command(memcached, supervisor_port(memcached))
            .or_else(|| lifecycle::command(memcached)),
        args: Some(memcached_args(memcached)),
        ports: Some(
            named_ports(memcached)
                .chain(supervisor_port(memcached).map(|port| (probes::SUPERVISOR_PORT_NAME, port)))
                .map(|(name, port)| ContainerPort {
                    name: Some(name.into()),
                    container_port: port,
                    protocol: Some("TCP".into()),
                    ..ContainerPort::default()
                })
                .collect(),
        ),
        volume_mounts: (!mounts.is_empty()).then_some(mounts),
        lifecycle: lifecycle::lifecycle(memcached, supervision::supervised(memcached)),
        readiness_probe: Some(probe(2, 5)),
        liveness_probe: Some(probe(10, 10)),
        resources: memcached.spec.resources.clone(),
        security_context: Some(identity::restricted()),
        ..Container::default()
    }
}

/// A hash of everything that configures the memcached process: image, arguments, port and
/// resources. It changes exactly when the servers must restart.
pub fn config_hash(container: &Container) -> String {
    let config = serde_json::json!({
        "image": container.image,
        "args": container.args,
        "ports": container.ports,
        "resources": container.resources,
    });
    let digest = Sha256::digest(config.to_string().as_bytes());
    digest.iter().take(8).map(|b| format!("{b:02x}")).collect()
}

/// A preference for spreading the pods that carry `labels` over distinct nodes. Shared by the
/// memcached pods and the operator's own Deployment.
pub fn prefer_distinct_nodes(labels: BTreeMap<String, String>) -> Affinity {
    Affinity {
        pod_anti_affinity: Some(PodAntiAffinity {
            preferred_during_scheduling_ignored_during_execution: Some(vec![
                WeightedPodAffinityTerm {
                    weight: 100,
                    pod_affinity_term: PodAffinityTerm {
                        label_selector: Some(LabelSelector {
                            match_labels: Some(labels),
                            match_expressions: None,
                        }),
                        topology_key: "kubernetes.io/hostname".into(),
                        ..PodAffinityTerm::default()
                    },
                },
            ]),
            required_during_scheduling_ignored_during_execution: None,
        }),
        ..Affinity::default()
    }
}

/// The StatefulSet `<name>`: one pod per server, in parallel, behind the headless Service.
pub fn desired_statefulset(memcached: &Memcached, platform: Platform) -> StatefulSet {
    let spec = &memcached.spec;
    let secret_volumes = security::volumes(memcached);
    let (mut volumes, mut mounts) = (secret_volumes.volumes, secret_volumes.memcached);
    let secrets = !volumes.is_empty();
    let health = health_ports(memcached);
    let refresher = security::refresher(
        memcached,
        port(memcached),
        &secret_volumes.refresher,
        identity::sidecar(identity::REFRESHER, platform),
        health.refresher,
    );
    let (monitors, monitor_volumes) = monitoring::sidecars(
        memcached,
        port(memcached),
        &secret_volumes.relay,
        platform,
        health.relay,
    );
    volumes.extend(monitor_volumes);
    // The installer first: init containers start in order, and it must end before memcached.
    let init_containers: Vec<Container> = supervision::installer(memcached)
        .into_iter()
        .chain(refresher)
        .chain(monitors)
        .collect();
    for (volume, mount) in [
        lifecycle::volume(memcached),
        supervision::volume(memcached),
        supervision::request_volume(memcached),
    ]
    .into_iter()
    .flatten()
    {
        volumes.push(volume);
        mounts.push(mount);
    }
    let container = memcached_container(memcached, mounts);
    let user_scheduling = spec.affinity.is_some() || spec.topology_spread_constraints.is_some();
    let pod_labels = labels(memcached);
    StatefulSet {
        metadata: metadata(memcached),
        spec: Some(StatefulSetSpec {
            service_name: Some(memcached.name_any()),
            replicas: Some(spec.replicas.unwrap_or(DEFAULT_REPLICAS)),
            pod_management_policy: Some("Parallel".into()),
            update_strategy: Some(StatefulSetUpdateStrategy {
                type_: Some("RollingUpdate".into()),
                rolling_update: Some(RollingUpdateStatefulSetStrategy {
                    partition: Some(0),
                    max_unavailable: None,
                }),
            }),
            selector: LabelSelector {
                match_labels: Some(selector_labels(memcached)),
                match_expressions: None,
            },
            template: PodTemplateSpec {
                metadata: Some(ObjectMeta {
                    labels: Some(pod_labels),
                    annotations: Some(BTreeMap::from([(
                        CONFIG_HASH_ANNOTATION.to_string(),
                        config_hash(&container),
                    )])),
                    ..ObjectMeta::default()
                }),
                spec: Some(PodSpec {
                    init_containers: (!init_containers.is_empty()).then_some(init_containers),
                    containers: vec![container],
                    affinity: if user_scheduling {
                        spec.affinity.clone()
                    } else {
                        Some(prefer_distinct_nodes(selector_labels(memcached)))
                    },
                    tolerations: spec.tolerations.clone(),
                    node_selector: spec.node_selector.clone(),
                    priority_class_name: spec.priority_class_name.clone(),
                    topology_spread_constraints: spec.topology_spread_constraints.clone(),
                    automount_service_account_token: Some(false),
                    enable_service_links: Some(false),
                    termination_grace_period_seconds: Some(lifecycle::grace_period(memcached)),
                    security_context: Some(PodSecurityContext {
                        run_as_non_root: Some(true),
                        run_as_user: match platform {
                            Platform::OpenShift => None,
                            Platform::Kubernetes => Some(MEMCACHED_IMAGE_UID),
                        },
                        // The Secrets' files are readable by the pod's group only; OpenShift's
                        // SCC assigns that group from the namespace's range.
                        fs_group: match platform {
                            Platform::Kubernetes if secrets => Some(MEMCACHED_IMAGE_UID),
                            _ => None,
                        },
                        seccomp_profile: Some(SeccompProfile {
                            type_: "RuntimeDefault".into(),
                            localhost_profile: None,
                        }),
                        ..PodSecurityContext::default()
                    }),
                    volumes: (!volumes.is_empty()).then_some(volumes),
                    ..PodSpec::default()
                }),
            },
            ..StatefulSetSpec::default()
        }),
        status: None,
    }
}

/// The headless Service `<name>`: a DNS record per server, `<name>-<i>.<name>.<ns>.svc`. With
/// `spec.tls.openShiftServiceCA`, annotated for OpenShift's service CA to issue the servers'
/// certificate into the TLS Secret.
pub fn desired_service(memcached: &Memcached) -> Service {
    let mut metadata = metadata(memcached);
    if let Some(secret) = security::service_ca_secret(memcached) {
        metadata.annotations = Some(BTreeMap::from([(
            security::SERVICE_CA_ANNOTATION.to_string(),
            secret,
        )]));
    }
    Service {
        metadata,
        spec: Some(ServiceSpec {
            cluster_ip: Some("None".into()),
            selector: Some(selector_labels(memcached)),
            ports: Some(
                named_ports(memcached)
                    .chain(scraped_ports(memcached))
                    .map(|(name, port)| ServicePort {
                        name: Some(name.into()),
                        port,
                        target_port: Some(IntOrString::String(name.into())),
                        protocol: Some("TCP".into()),
                        ..ServicePort::default()
                    })
                    .collect(),
            ),
            ..ServiceSpec::default()
        }),
        status: None,
    }
}

/// The PodDisruptionBudget `<name>`, wanted only with two or more replicas (with one, any
/// budget would either block every drain or protect nothing).
pub fn desired_pdb(memcached: &Memcached) -> Option<PodDisruptionBudget> {
    if memcached.spec.replicas.unwrap_or(DEFAULT_REPLICAS) < 2 {
        return None;
    }
    let max_unavailable = memcached
        .spec
        .pod_disruption_budget
        .as_ref()
        .and_then(|p| p.max_unavailable.clone())
        .unwrap_or(IntOrString::Int(DEFAULT_MAX_UNAVAILABLE));
    Some(PodDisruptionBudget {
        metadata: metadata(memcached),
        spec: Some(PodDisruptionBudgetSpec {
            max_unavailable: Some(max_unavailable),
            selector: Some(LabelSelector {
                match_labels: Some(selector_labels(memcached)),
                match_expressions: None,
            }),
            ..PodDisruptionBudgetSpec::default()
        }),
        status: None,
    })
}

#[cfg(test)]
mod tests;
