//! Builds the objects a Memcached owns: a StatefulSet of memcached servers, the headless
//! Service that gives each a stable address, and a PodDisruptionBudget.
//!
//! Pure functions of a Memcached whose spec has been defaulted; they never talk to the API
//! server. Every child carries the `app.kubernetes.io/*` labels and a controller owner
//! reference (with blockOwnerDeletion), so deleting the Memcached deletes them.

use std::collections::BTreeMap;

use k8s_openapi::api::apps::v1::{
    RollingUpdateStatefulSetStrategy, StatefulSet, StatefulSetSpec, StatefulSetUpdateStrategy,
};
use k8s_openapi::api::core::v1::{
    Affinity, Capabilities, Container, ContainerPort, PodAffinityTerm, PodAntiAffinity,
    PodSecurityContext, PodSpec, PodTemplateSpec, Probe, SeccompProfile, SecurityContext, Service,
    ServicePort, ServiceSpec, TCPSocketAction, WeightedPodAffinityTerm,
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

/// The memcached container's name.
pub const CONTAINER_NAME: &str = "memcached";
/// The name of the client port, on the container and the Service.
pub const PORT_NAME: &str = "memcache";
/// The pod-template annotation holding a hash of memcached's configuration.
pub const CONFIG_HASH_ANNOTATION: &str = "cache.f2367556.dev/config-hash";
/// The UID of the `memcache` user in the official memcached images.
pub const MEMCACHED_IMAGE_UID: i64 = 11211;

/// How pods must run on this cluster.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Platform {
    /// OpenShift: the restricted-v2 SCC assigns a UID from the namespace's range, so none is
    /// set.
    OpenShift,
    /// Other Kubernetes: the official images name their user (`memcache`) rather than number
    /// it, so the kubelet could not verify `runAsNonRoot`; the image's own UID is set.
    Kubernetes,
}

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

/// The client port.
pub fn port(memcached: &Memcached) -> i32 {
    memcached
        .spec
        .service
        .as_ref()
        .and_then(|s| s.port)
        .unwrap_or(DEFAULT_PORT)
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
    args.extend(config.extra_args.unwrap_or_default());
    args
}

fn memcached_container(memcached: &Memcached) -> Container {
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
        args: Some(memcached_args(memcached)),
        ports: Some(vec![ContainerPort {
            name: Some(PORT_NAME.into()),
            container_port: port(memcached),
            protocol: Some("TCP".into()),
            ..ContainerPort::default()
        }]),
        readiness_probe: Some(probe(2, 5)),
        liveness_probe: Some(probe(10, 10)),
        resources: memcached.spec.resources.clone(),
        security_context: Some(SecurityContext {
            allow_privilege_escalation: Some(false),
            capabilities: Some(Capabilities {
                drop: Some(vec!["ALL".into()]),
                add: None,
            }),
            read_only_root_filesystem: Some(true),
            run_as_non_root: Some(true),
            ..SecurityContext::default()
        }),
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
    let container = memcached_container(memcached);
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
                    termination_grace_period_seconds: Some(30),
                    security_context: Some(PodSecurityContext {
                        run_as_non_root: Some(true),
                        run_as_user: match platform {
                            Platform::OpenShift => None,
                            Platform::Kubernetes => Some(MEMCACHED_IMAGE_UID),
                        },
                        seccomp_profile: Some(SeccompProfile {
                            type_: "RuntimeDefault".into(),
                            localhost_profile: None,
                        }),
                        ..PodSecurityContext::default()
                    }),
                    ..PodSpec::default()
                }),
            },
            ..StatefulSetSpec::default()
        }),
        status: None,
    }
}

/// The headless Service `<name>`: a DNS record per server, `<name>-<i>.<name>.<ns>.svc`.
pub fn desired_service(memcached: &Memcached) -> Service {
    Service {
        metadata: metadata(memcached),
        spec: Some(ServiceSpec {
            cluster_ip: Some("None".into()),
            selector: Some(selector_labels(memcached)),
            ports: Some(vec![ServicePort {
                name: Some(PORT_NAME.into()),
                port: port(memcached),
                target_port: Some(IntOrString::String(PORT_NAME.into())),
                protocol: Some("TCP".into()),
                ..ServicePort::default()
            }]),
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
mod tests {
    use std::path::Path;

    use k8s_openapi::api::core::v1::Toleration;
    use serde_json::Value;

    use super::*;
    use crate::admission::{Defaults, default_spec};
    use crate::api::v1beta1::{MemcachedConfig, MemcachedSpec};
    use crate::fixtures::memcached;

    fn defaulted(name: &str, spec: MemcachedSpec) -> Memcached {
        let mut object = memcached(name, default_spec(&spec, &Defaults::default()));
        object.metadata.uid = Some("0f8a3c2e-1111-4222-8333-944455556666".into());
        object
    }

    fn minimal() -> Memcached {
        defaulted("cache", MemcachedSpec::default())
    }

    fn customised() -> Memcached {
        defaulted(
            "sessions",
            MemcachedSpec {
                replicas: Some(3),
                image: Some("registry.example.com/memcached:1.6.39".into()),
                memcached: Some(MemcachedConfig {
                    memory_limit_mb: Some(1024),
                    max_connections: Some(4096),
                    threads: Some(8),
                    max_item_size: Some("4m".into()),
                    verbosity: Some(1),
                    extra_args: Some(vec!["-o".into(), "modern".into()]),
                }),
                tolerations: Some(vec![Toleration {
                    key: Some("dedicated".into()),
                    operator: Some("Equal".into()),
                    value: Some("cache".into()),
                    effect: Some("NoSchedule".into()),
                    toleration_seconds: None,
                }]),
                node_selector: Some(BTreeMap::from([("pool".into(), "cache".into())])),
                priority_class_name: Some("high".into()),
                topology_spread_constraints: Some(vec![]),
                ..MemcachedSpec::default()
            },
        )
    }

    /// Compares `value` with `testdata/<name>.json`; `UPDATE_GOLDEN=1` rewrites the file.
    fn golden(name: &str, value: &impl serde::Serialize) {
        let path = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("src/controller/testdata")
            .join(format!("{name}.json"));
        let actual = serde_json::to_string_pretty(value).expect("serialises") + "\n";
        if std::env::var_os("UPDATE_GOLDEN").is_some() {
            std::fs::create_dir_all(path.parent().expect("has a parent"))
                .expect("creates testdata");
            std::fs::write(&path, &actual).expect("writes golden file");
        }
        let expected = std::fs::read_to_string(&path).unwrap_or_else(|e| {
            panic!(
                "{}: {e} (run with UPDATE_GOLDEN=1 to create it)",
                path.display()
            )
        });
        assert_eq!(actual, expected, "{name} differs from {}", path.display());
    }

    #[test]
    fn children_of_a_minimal_memcached_match_the_golden_files() {
        let object = minimal();
        golden(
            "minimal-statefulset",
            &desired_statefulset(&object, Platform::Kubernetes),
        );
        golden("minimal-service", &desired_service(&object));
        assert_eq!(desired_pdb(&object), None, "one replica gets no budget");
    }

    #[test]
    fn children_of_a_customised_memcached_match_the_golden_files() {
        let object = customised();
        golden(
            "customised-statefulset",
            &desired_statefulset(&object, Platform::OpenShift),
        );
        golden("customised-service", &desired_service(&object));
        golden("customised-pdb", &desired_pdb(&object));
    }

    #[test]
    fn arguments_follow_the_spec_then_extra_args() {
        assert_eq!(
            memcached_args(&customised()),
            [
                "-m", "1024", "-c", "4096", "-t", "8", "-I", "4m", "-p", "11211", "-U", "0", "-v",
                "-o", "modern"
            ]
        );
        assert_eq!(
            memcached_args(&minimal()),
            [
                "-m", "64", "-c", "1024", "-t", "4", "-I", "1m", "-p", "11211", "-U", "0"
            ]
        );
    }

    #[test]
    fn every_child_is_owned_by_the_memcached_as_controller() {
        let object = customised();
        let owners = [
            desired_statefulset(&object, Platform::Kubernetes)
                .metadata
                .owner_references,
            desired_service(&object).metadata.owner_references,
            desired_pdb(&object).and_then(|p| p.metadata.owner_references),
        ];
        for owner in owners {
            let owner = owner.expect("owner references").pop().expect("one owner");
            assert_eq!(
                (owner.kind.as_str(), owner.name.as_str()),
                ("Memcached", "sessions")
            );
            assert_eq!(owner.controller, Some(true));
            assert_eq!(owner.block_owner_deletion, Some(true));
        }
    }

    #[test]
    fn pods_prefer_distinct_nodes_unless_the_user_schedules_them() {
        let pod = |object: &Memcached| {
            desired_statefulset(object, Platform::Kubernetes)
                .spec
                .and_then(|s| s.template.spec)
                .expect("pod spec")
        };
        let affinity = pod(&minimal())
            .affinity
            .and_then(|a| a.pod_anti_affinity)
            .expect("default anti-affinity");
        assert!(
            affinity
                .preferred_during_scheduling_ignored_during_execution
                .is_some()
        );
        assert_eq!(
            pod(&customised()).affinity,
            None,
            "spread constraints given: no default"
        );
    }

    #[test]
    fn pods_run_restricted_with_a_uid_only_off_openshift() {
        let pod = |platform| {
            desired_statefulset(&minimal(), platform)
                .spec
                .and_then(|s| s.template.spec)
                .expect("pod spec")
        };
        let openshift = pod(Platform::OpenShift);
        let security = openshift.security_context.expect("pod security context");
        assert_eq!(security.run_as_non_root, Some(true));
        assert_eq!(security.run_as_user, None);
        assert_eq!(
            security.seccomp_profile.map(|s| s.type_).as_deref(),
            Some("RuntimeDefault")
        );
        let container = openshift.containers[0]
            .security_context
            .clone()
            .expect("container security context");
        assert_eq!(container.allow_privilege_escalation, Some(false));
        assert_eq!(container.read_only_root_filesystem, Some(true));
        assert_eq!(
            container.capabilities.and_then(|c| c.drop),
            Some(vec!["ALL".to_string()])
        );
        let kubernetes = pod(Platform::Kubernetes)
            .security_context
            .expect("pod security context");
        assert_eq!(kubernetes.run_as_user, Some(MEMCACHED_IMAGE_UID));
    }

    #[test]
    fn the_config_hash_changes_with_configuration_but_not_with_scale() {
        let hash = |object: &Memcached| -> Value {
            serde_json::to_value(desired_statefulset(object, Platform::Kubernetes)).expect("json")
                ["spec"]["template"]["metadata"]["annotations"][CONFIG_HASH_ANNOTATION].clone()
        };
        let base = minimal();
        let mut scaled = base.clone();
        scaled.spec.replicas = Some(5);
        assert_eq!(hash(&base), hash(&scaled));
        let mut resized = base.clone();
        if let Some(config) = &mut resized.spec.memcached {
            config.memory_limit_mb = Some(128);
        }
        assert_ne!(hash(&base), hash(&resized));
    }

    #[test]
    fn the_service_is_headless_with_the_memcache_port() {
        let spec = desired_service(&minimal()).spec.expect("spec");
        assert_eq!(spec.cluster_ip.as_deref(), Some("None"));
        let port = &spec.ports.expect("ports")[0];
        assert_eq!((port.name.as_deref(), port.port), (Some("memcache"), 11211));
    }

    #[test]
    fn a_budget_exists_from_two_replicas() {
        let mut object = minimal();
        object.spec.replicas = Some(2);
        let budget = desired_pdb(&object).and_then(|p| p.spec).expect("a budget");
        assert_eq!(budget.max_unavailable, Some(IntOrString::Int(1)));
        object.spec.replicas = Some(0);
        assert_eq!(desired_pdb(&object), None);
    }
}
