//! Builds the operator's Deployment: the one OLM installs from the CSV and the one
//! `config/manager` installs without OLM.
//!
//! Ports, names and environment come from `operator`; the security context is the restricted
//! Pod Security Standard and fits OpenShift's restricted-v2 SCC (no fixed user: OpenShift
//! assigns one from the namespace's range). A required node affinity keeps the pods on the
//! platforms the image is built for (`release::PLATFORMS`). The metrics serving certificate is
//! mounted from an optional Secret (OpenShift's service-ca writes it; elsewhere it does not
//! exist and the operator makes a self-signed one).

use std::collections::BTreeMap;

use k8s_openapi::api::apps::v1::{DeploymentSpec, DeploymentStrategy, RollingUpdateDeployment};
use k8s_openapi::api::core::v1::{
    Affinity, Capabilities, Container, ContainerPort, EnvVar, EnvVarSource, HTTPGetAction,
    NodeAffinity, NodeSelector, NodeSelectorRequirement, NodeSelectorTerm, ObjectFieldSelector,
    PodSecurityContext, PodSpec, PodTemplateSpec, Probe, ResourceRequirements, SeccompProfile,
    SecretVolumeSource, SecurityContext, Volume, VolumeMount,
};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;

use super::images::Images;
use super::release;
use memcached_operator::admission::issuers::ALLOWED_ISSUERS_ENV;
use memcached_operator::controller::desired::children::prefer_distinct_nodes;
use memcached_operator::operator;

/// Replicas of the operator; one leads, the other serves webhooks and stands by.
pub const REPLICAS: i32 = 2;
/// Name of the webhook container port.
pub const WEBHOOK_PORT_NAME: &str = "webhook-server";
/// Name of the probe port.
pub const PROBE_PORT_NAME: &str = "health";
/// Name of the metrics port.
pub const METRICS_PORT_NAME: &str = "metrics";
/// The Secret holding the metrics serving certificate: OpenShift's service-ca writes it when
/// the metrics Service asks; elsewhere it does not exist and the volume stays empty.
pub const METRICS_CERT_SECRET_NAME: &str = "memcached-operator-metrics-cert";
/// The volume the metrics serving certificate is mounted from.
pub const METRICS_CERT_VOLUME: &str = "metrics-cert";
/// Path of the liveness probe.
pub const LIVENESS_PATH: &str = "/healthz";
/// Path of the readiness probe.
pub const READINESS_PATH: &str = "/readyz";

/// The well-known node label with the node's operating system.
pub const OS_NODE_LABEL: &str = "kubernetes.io/os";
/// The well-known node label with the node's CPU architecture.
pub const ARCH_NODE_LABEL: &str = "kubernetes.io/arch";

/// Labels of the operator's pods; Services select them.
pub fn pod_labels() -> BTreeMap<String, String> {
    BTreeMap::from([
        (
            "app.kubernetes.io/name".to_string(),
            operator::NAME.to_string(),
        ),
        (
            "control-plane".to_string(),
            "controller-manager".to_string(),
        ),
    ])
}

fn quantities(pairs: &[(&str, &str)]) -> BTreeMap<String, Quantity> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), Quantity(v.to_string())))
        .collect()
}

fn port(name: &str, number: u16) -> ContainerPort {
    ContainerPort {
        name: Some(name.to_string()),
        container_port: i32::from(number),
        protocol: Some("TCP".to_string()),
        ..ContainerPort::default()
    }
}

fn probe(path: &str, initial_delay: i32, period: i32) -> Probe {
    Probe {
        http_get: Some(HTTPGetAction {
            path: Some(path.to_string()),
            port: IntOrString::String(PROBE_PORT_NAME.to_string()),
            scheme: Some("HTTP".to_string()),
            ..HTTPGetAction::default()
        }),
        initial_delay_seconds: Some(initial_delay),
        period_seconds: Some(period),
        ..Probe::default()
    }
}

/// The operator's container, running `memcached-operator run` from the operator's image, and
/// naming the other images in its `RELATED_IMAGE_*` variables.
pub fn container(images: &Images) -> Container {
    Container {
        name: operator::CONTAINER_NAME.to_string(),
        image: Some(images.operator.clone()),
        image_pull_policy: Some("IfNotPresent".to_string()),
        command: Some(vec![release::BINARY_PATH.to_string()]),
        args: Some(vec![
            "run".to_string(),
            format!("--metrics-port={}", operator::METRICS_PORT),
            "--metrics-secure=true".to_string(),
            format!("--metrics-cert-dir={}", operator::METRICS_CERT_DIR),
            format!("--cert-secret={}", operator::OLM_CERT_SECRET_NAME),
            format!("--cert-secret={}", operator::CERT_MANAGER_CERT_SECRET_NAME),
        ]),
        volume_mounts: Some(vec![VolumeMount {
            name: METRICS_CERT_VOLUME.to_string(),
            mount_path: operator::METRICS_CERT_DIR.to_string(),
            read_only: Some(true),
            ..VolumeMount::default()
        }]),
        env: Some(vec![
            EnvVar {
                name: operator::RELATED_IMAGE_ENV.to_string(),
                value: Some(images.memcached.clone()),
                ..EnvVar::default()
            },
            // The certificate refresher and the stats relay beside memcached servers are this
            // same image.
            EnvVar {
                name: operator::RELATED_IMAGE_REFRESHER_ENV.to_string(),
                value: Some(images.operator.clone()),
                ..EnvVar::default()
            },
            EnvVar {
                name: operator::RELATED_IMAGE_EXPORTER_ENV.to_string(),
                value: Some(images.exporter.clone()),
                ..EnvVar::default()
            },
            // Which issuers a Memcached may name beyond an Issuer in its own namespace: none
            // until a cluster admin says otherwise, here or through the Subscription's
            // spec.config.env, whose variables replace the CSV's of the same name.
            EnvVar {
                name: ALLOWED_ISSUERS_ENV.to_string(),
                value: Some(String::new()),
                ..EnvVar::default()
            },
            EnvVar {
                name: operator::POD_NAMESPACE_ENV.to_string(),
                value_from: Some(EnvVarSource {
                    field_ref: Some(ObjectFieldSelector {
                        api_version: Some("v1".to_string()),
                        field_path: "metadata.namespace".to_string(),
                    }),
                    ..EnvVarSource::default()
                }),
                ..EnvVar::default()
            },
        ]),
        ports: Some(vec![
            port(WEBHOOK_PORT_NAME, operator::WEBHOOK_PORT),
            port(PROBE_PORT_NAME, operator::PROBE_PORT),
            port(METRICS_PORT_NAME, operator::METRICS_PORT),
        ]),
        liveness_probe: Some(probe(LIVENESS_PATH, 15, 20)),
        readiness_probe: Some(probe(READINESS_PATH, 5, 10)),
        resources: Some(ResourceRequirements {
            requests: Some(quantities(&[("cpu", "10m"), ("memory", "64Mi")])),
            limits: Some(quantities(&[("cpu", "500m"), ("memory", "256Mi")])),
            ..ResourceRequirements::default()
        }),
        security_context: Some(SecurityContext {
            allow_privilege_escalation: Some(false),
            capabilities: Some(Capabilities {
                drop: Some(vec!["ALL".to_string()]),
                ..Capabilities::default()
            }),
            read_only_root_filesystem: Some(true),
            run_as_non_root: Some(true),
            ..SecurityContext::default()
        }),
        termination_message_policy: Some("FallbackToLogsOnError".to_string()),
        ..Container::default()
    }
}

fn node_requirement(key: &str, value: &str) -> NodeSelectorRequirement {
    NodeSelectorRequirement {
        key: key.to_string(),
        operator: "In".to_string(),
        values: Some(vec![value.to_string()]),
    }
}

/// One node selector term per platform of `release::PLATFORMS`: the node's OS and
/// architecture are that platform's. Terms are ORed, so a node of any listed platform fits.
pub fn platform_terms() -> Vec<NodeSelectorTerm> {
    release::PLATFORMS
        .iter()
        .map(|platform| NodeSelectorTerm {
            match_expressions: Some(vec![
                node_requirement(OS_NODE_LABEL, platform.os),
                node_requirement(ARCH_NODE_LABEL, platform.arch),
            ]),
            match_fields: None,
        })
        .collect()
}

/// `affinity` with the platforms made a scheduling requirement. Pod (anti-)affinity and
/// preferred node terms are kept; required node terms that were already there are each
/// narrowed to every platform (a term ANDs its expressions), so a pod needs both what was
/// required and a listed platform.
pub fn require_platforms(affinity: Affinity) -> Affinity {
    let mut node_affinity: NodeAffinity = affinity.node_affinity.unwrap_or_default();
    let existing = node_affinity
        .required_during_scheduling_ignored_during_execution
        .take()
        .map(|selector| selector.node_selector_terms)
        .unwrap_or_default();
    let platforms = platform_terms();
    let terms = if existing.is_empty() {
        platforms
    } else {
        existing
            .iter()
            .flat_map(|term| {
                platforms.iter().map(move |platform| {
                    let mut narrowed = term.clone();
                    narrowed
                        .match_expressions
                        .get_or_insert_with(Vec::new)
                        .extend(platform.match_expressions.iter().flatten().cloned());
                    narrowed
                })
            })
            .collect()
    };
    node_affinity.required_during_scheduling_ignored_during_execution = Some(NodeSelector {
        node_selector_terms: terms,
    });
    Affinity {
        node_affinity: Some(node_affinity),
        ..affinity
    }
}

/// The Deployment's spec, running the operator's image.
pub fn spec(images: &Images) -> DeploymentSpec {
    let labels = pod_labels();
    DeploymentSpec {
        replicas: Some(REPLICAS),
        selector: LabelSelector {
            match_labels: Some(labels.clone()),
            ..LabelSelector::default()
        },
        strategy: Some(DeploymentStrategy {
            type_: Some("RollingUpdate".to_string()),
            rolling_update: Some(RollingUpdateDeployment {
                max_unavailable: Some(IntOrString::Int(1)),
                max_surge: Some(IntOrString::Int(1)),
            }),
        }),
        template: PodTemplateSpec {
            metadata: Some(ObjectMeta {
                labels: Some(labels.clone()),
                annotations: Some(BTreeMap::from([(
                    "kubectl.kubernetes.io/default-container".to_string(),
                    operator::CONTAINER_NAME.to_string(),
                )])),
                ..ObjectMeta::default()
            }),
            spec: Some(PodSpec {
                service_account_name: Some(operator::SERVICE_ACCOUNT_NAME.to_string()),
                containers: vec![container(images)],
                security_context: Some(PodSecurityContext {
                    run_as_non_root: Some(true),
                    seccomp_profile: Some(SeccompProfile {
                        type_: "RuntimeDefault".to_string(),
                        ..SeccompProfile::default()
                    }),
                    ..PodSecurityContext::default()
                }),
                termination_grace_period_seconds: Some(10),
                affinity: Some(require_platforms(prefer_distinct_nodes(labels))),
                volumes: Some(vec![Volume {
                    name: METRICS_CERT_VOLUME.to_string(),
                    secret: Some(SecretVolumeSource {
                        secret_name: Some(METRICS_CERT_SECRET_NAME.to_string()),
                        optional: Some(true),
                        ..SecretVolumeSource::default()
                    }),
                    ..Volume::default()
                }]),
                ..PodSpec::default()
            }),
        },
        ..DeploymentSpec::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn example() -> Images {
        Images {
            operator: "example.com/operator:v1".to_string(),
            ..Images::for_release("1.0.0")
        }
    }

    #[test]
    fn the_security_context_fits_restricted_v2_without_a_fixed_user() {
        let spec = spec(&example());
        let pod = spec.template.spec.expect("pod spec");
        let pod_ctx = pod.security_context.expect("pod security context");
        assert_eq!(pod_ctx.run_as_non_root, Some(true));
        assert_eq!(pod_ctx.run_as_user, None);
        let ctx = pod.containers[0].security_context.clone().expect("ctx");
        assert_eq!(ctx.run_as_user, None);
        assert_eq!(ctx.allow_privilege_escalation, Some(false));
        assert_eq!(ctx.read_only_root_filesystem, Some(true));
        assert_eq!(
            ctx.capabilities.and_then(|c| c.drop),
            Some(vec!["ALL".to_string()])
        );
    }

    fn term(pairs: &[(&str, &str)]) -> NodeSelectorTerm {
        NodeSelectorTerm {
            match_expressions: Some(pairs.iter().map(|(k, v)| node_requirement(k, v)).collect()),
            match_fields: None,
        }
    }

    #[test]
    fn requiring_platforms_keeps_pod_anti_affinity_and_preferred_node_terms() {
        let preferred = vec![k8s_openapi::api::core::v1::PreferredSchedulingTerm {
            weight: 10,
            preference: term(&[("disk", "ssd")]),
        }];
        let before = Affinity {
            node_affinity: Some(NodeAffinity {
                preferred_during_scheduling_ignored_during_execution: Some(preferred.clone()),
                required_during_scheduling_ignored_during_execution: None,
            }),
            ..prefer_distinct_nodes(pod_labels())
        };
        let after = require_platforms(before.clone());
        assert_eq!(after.pod_anti_affinity, before.pod_anti_affinity);
        let node = after.node_affinity.expect("node affinity");
        assert_eq!(
            node.preferred_during_scheduling_ignored_during_execution,
            Some(preferred)
        );
        assert_eq!(
            node.required_during_scheduling_ignored_during_execution
                .map(|s| s.node_selector_terms),
            Some(platform_terms())
        );
    }

    #[test]
    fn requiring_platforms_narrows_each_required_term_already_there() {
        let before = Affinity {
            node_affinity: Some(NodeAffinity {
                required_during_scheduling_ignored_during_execution: Some(NodeSelector {
                    node_selector_terms: vec![term(&[("zone", "a")]), term(&[("zone", "b")])],
                }),
                ..NodeAffinity::default()
            }),
            ..Affinity::default()
        };
        let terms = require_platforms(before)
            .node_affinity
            .and_then(|n| n.required_during_scheduling_ignored_during_execution)
            .map(|s| s.node_selector_terms)
            .expect("required terms");
        assert_eq!(terms.len(), 2 * release::PLATFORMS.len());
        for zone in ["a", "b"] {
            for platform in release::PLATFORMS {
                assert!(
                    terms.contains(&term(&[
                        ("zone", zone),
                        (OS_NODE_LABEL, platform.os),
                        (ARCH_NODE_LABEL, platform.arch),
                    ])),
                    "{terms:?}"
                );
            }
        }
    }

    #[test]
    fn the_container_listens_on_the_operator_ports() {
        let c = container(&example());
        let ports: Vec<i32> = c.ports.iter().flatten().map(|p| p.container_port).collect();
        assert_eq!(ports, vec![9443, 8081, 8443]);
        assert_eq!(c.name, operator::CONTAINER_NAME);
    }

    #[test]
    fn metrics_are_secure_with_the_certificate_of_an_optional_secret() {
        let spec = spec(&example());
        let pod = spec.template.spec.expect("pod spec");
        let args = pod.containers[0].args.clone().expect("args");
        assert!(
            args.contains(&"--metrics-secure=true".to_string()),
            "{args:?}"
        );
        let volume = pod
            .volumes
            .iter()
            .flatten()
            .find(|v| v.name == METRICS_CERT_VOLUME)
            .and_then(|v| v.secret.clone())
            .expect("a secret volume");
        assert_eq!(
            volume.secret_name.as_deref(),
            Some(METRICS_CERT_SECRET_NAME)
        );
        assert_eq!(
            volume.optional,
            Some(true),
            "vanilla clusters have no such Secret"
        );
        let mount = pod.containers[0]
            .volume_mounts
            .iter()
            .flatten()
            .find(|m| m.name == METRICS_CERT_VOLUME)
            .cloned()
            .expect("mounted");
        assert_eq!(mount.mount_path, operator::METRICS_CERT_DIR);
        assert_eq!(mount.read_only, Some(true));
    }
}
