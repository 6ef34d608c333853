//! Builds Memcached objects for tests: named examples and proptest strategies that cover
//! every field of both versions.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{
    Affinity, NodeAffinity, NodeSelector, NodeSelectorRequirement, NodeSelectorTerm,
    ResourceRequirements, Toleration, TopologySpreadConstraint,
};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, ObjectMeta, Time};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use proptest::collection::{btree_map, vec};
use proptest::option;
use proptest::prelude::*;

use crate::api::{v1alpha1, v1beta1};

/// A v1beta1 Memcached named `name` in namespace `default` with `spec`.
pub fn memcached(name: &str, spec: v1beta1::MemcachedSpec) -> v1beta1::Memcached {
    let mut object = v1beta1::Memcached::new(name, spec);
    object.metadata.namespace = Some("default".into());
    object
}

fn condition() -> impl Strategy<Value = Condition> {
    (
        prop_oneof![Just("Available"), Just("Progressing"), Just("Degraded")],
        prop_oneof![Just("True"), Just("False"), Just("Unknown")],
        0i64..2_000_000_000,
        "[A-Z][a-zA-Z]{0,12}",
        ".{0,24}",
        option::of(0i64..50),
    )
        .prop_map(
            |(kind, status, seconds, reason, message, generation)| Condition {
                type_: kind.into(),
                status: status.into(),
                last_transition_time: time(seconds),
                reason,
                message,
                observed_generation: generation,
            },
        )
}

fn time(seconds: i64) -> Time {
    Time(jiff::Timestamp::from_second(seconds).unwrap_or(jiff::Timestamp::UNIX_EPOCH))
}

fn conditions() -> impl Strategy<Value = Option<Vec<Condition>>> {
    option::of(vec(condition(), 0..3))
}

fn quantity_map() -> impl Strategy<Value = Option<BTreeMap<String, Quantity>>> {
    option::of(btree_map(
        prop_oneof![Just("cpu".to_string()), Just("memory".to_string())],
        "[1-9][0-9]{0,3}(Mi|Gi|m)?".prop_map(Quantity),
        0..3,
    ))
}

fn resources() -> impl Strategy<Value = ResourceRequirements> {
    (quantity_map(), quantity_map()).prop_map(|(limits, requests)| ResourceRequirements {
        limits,
        requests,
        ..ResourceRequirements::default()
    })
}

fn affinity() -> impl Strategy<Value = Affinity> {
    prop_oneof![
        Just(Affinity::default()),
        "[a-z]{1,8}".prop_map(|key| Affinity {
            node_affinity: Some(NodeAffinity {
                required_during_scheduling_ignored_during_execution: Some(NodeSelector {
                    node_selector_terms: vec![NodeSelectorTerm {
                        match_expressions: Some(vec![NodeSelectorRequirement {
                            key,
                            operator: "Exists".into(),
                            values: None,
                        }]),
                        match_fields: None,
                    }],
                }),
                preferred_during_scheduling_ignored_during_execution: None,
            }),
            ..Affinity::default()
        }),
    ]
}

fn toleration() -> impl Strategy<Value = Toleration> {
    (
        option::of("[a-z]{1,6}"),
        option::of(prop_oneof![
            Just("Exists".to_string()),
            Just("Equal".to_string())
        ]),
        option::of("[a-z]{0,6}"),
        option::of(prop_oneof![
            Just("NoSchedule".to_string()),
            Just("NoExecute".to_string())
        ]),
        option::of(0i64..600),
    )
        .prop_map(|(key, operator, value, effect, seconds)| Toleration {
            key,
            operator,
            value,
            effect,
            toleration_seconds: seconds,
        })
}

fn spread() -> impl Strategy<Value = TopologySpreadConstraint> {
    (1i32..4, "[a-z./-]{1,20}").prop_map(|(max_skew, topology_key)| TopologySpreadConstraint {
        max_skew,
        topology_key,
        when_unsatisfiable: "ScheduleAnyway".into(),
        ..TopologySpreadConstraint::default()
    })
}

/// Any v1beta1 memcached settings, valid or not.
pub fn memcached_config() -> impl Strategy<Value = v1beta1::MemcachedConfig> {
    (
        option::of(1i32..4096),
        option::of(1i32..100_000),
        option::of(1i32..64),
        option::of("[0-9]{1,4}[km]?"),
        option::of(0i32..3),
        option::of(vec("[-a-zA-Z0-9=,_]{0,10}", 0..4)),
        option::of(any::<bool>()),
    )
        .prop_map(
            |(memory, connections, threads, item, verbosity, extra, warm_restart)| {
                v1beta1::MemcachedConfig {
                    memory_limit_mb: memory,
                    max_connections: connections,
                    threads,
                    max_item_size: item,
                    verbosity,
                    warm_restart,
                    extra_args: extra,
                }
            },
        )
}

/// Any v1beta1 spec: every field present or absent, including scheduling.
pub fn beta_spec() -> impl Strategy<Value = v1beta1::MemcachedSpec> {
    let core = (
        option::of(0i32..=64),
        option::of("[a-z]{1,8}(/[a-z]{1,8})?(:[0-9]\\.[0-9]{1,2})?"),
        option::of(memcached_config()),
        option::of(resources()),
        option::of(option::of(1i32..=65535).prop_map(|port| v1beta1::ServiceSpec { port })),
        option::of(
            option::of(prop_oneof![
                (0i32..5).prop_map(IntOrString::Int),
                "[0-9]{1,2}%".prop_map(IntOrString::String),
            ])
            .prop_map(|max_unavailable| v1beta1::PodDisruptionBudgetSpec { max_unavailable }),
        ),
    );
    let scheduling = (
        option::of(affinity()),
        option::of(vec(toleration(), 0..3)),
        option::of(btree_map("[a-z]{1,5}", "[a-z]{0,5}", 0..3)),
        option::of("[a-z-]{1,12}"),
        option::of(vec(spread(), 0..2)),
    );
    let security = (
        option::of(tls()),
        option::of(
            (
                option::of("[a-z]{1,8}"),
                option::of("[a-z]{1,8}/reloader:v[0-9]"),
            )
                .prop_map(|(secret_name, reloader_image)| v1beta1::AuthSpec {
                    secret_name,
                    reloader_image,
                }),
        ),
        option::of((option::of(0i32..=600), option::of(1i64..=3600)).prop_map(
            |(pre_stop_delay_seconds, termination_grace_period_seconds)| {
                v1beta1::GracefulShutdownSpec {
                    pre_stop_delay_seconds,
                    termination_grace_period_seconds,
                }
            },
        )),
        option::of(network_policy()),
        option::of(monitoring()),
    );
    // Boxed: the three groups' strategies nested in one type overflow a test thread's stack.
    (core.boxed(), scheduling.boxed(), security.boxed()).prop_map(
        |(
            (replicas, image, memcached, resources, service, pod_disruption_budget),
            (
                affinity,
                tolerations,
                node_selector,
                priority_class_name,
                topology_spread_constraints,
            ),
            (tls, auth, graceful_shutdown, network_policy, monitoring),
        )| v1beta1::MemcachedSpec {
            replicas,
            image,
            memcached,
            resources,
            service,
            pod_disruption_budget,
            affinity,
            tolerations,
            node_selector,
            priority_class_name,
            topology_spread_constraints,
            tls,
            auth,
            graceful_shutdown,
            network_policy,
            monitoring,
        },
    )
}

/// Any metrics settings.
fn monitoring() -> impl Strategy<Value = v1beta1::MonitoringSpec> {
    (
        option::of(1i32..=65535),
        option::of("[a-z]{1,8}/exporter:v[0-9]"),
        option::of(resources()),
        option::of("[a-z]{1,8}/relay:v[0-9]"),
        option::of(
            (
                option::of("[1-9][0-9]?s"),
                option::of("[1-9]s"),
                option::of(btree_map("[a-z]{1,5}", "[a-z]{0,5}", 0..2)),
            )
                .prop_map(|(interval, scrape_timeout, labels)| {
                    v1beta1::ServiceMonitorSpec {
                        interval,
                        scrape_timeout,
                        labels,
                    }
                }),
        ),
        option::of(
            (
                option::of(any::<bool>()),
                option::of(btree_map("[a-z]{1,5}", "[a-z]{0,5}", 0..2)),
            )
                .prop_map(|(enabled, labels)| v1beta1::RulesSpec { enabled, labels }),
        ),
    )
        .prop_map(
            |(port, exporter_image, exporter_resources, relay_image, service_monitor, rules)| {
                v1beta1::MonitoringSpec {
                    port,
                    exporter_image,
                    exporter_resources,
                    relay_image,
                    service_monitor,
                    rules,
                }
            },
        )
}

/// Any NetworkPolicy settings: sources selected by pod or namespace labels, or address blocks.
fn network_policy() -> impl Strategy<Value = v1beta1::NetworkPolicySpec> {
    use k8s_openapi::api::networking::v1::{IPBlock, NetworkPolicyPeer};
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
    let selector = || {
        btree_map("[a-z]{1,5}", "[a-z]{0,5}", 1..3).prop_map(|labels| LabelSelector {
            match_labels: Some(labels),
            match_expressions: None,
        })
    };
    let peer = (
        option::of(selector()),
        option::of(selector()),
        option::of("10\\.[0-9]{1,2}\\.0\\.0/16".prop_map(|cidr| IPBlock { cidr, except: None })),
    )
        .prop_map(
            |(pod_selector, namespace_selector, ip_block)| NetworkPolicyPeer {
                pod_selector,
                namespace_selector,
                ip_block,
            },
        );
    (
        option::of(vec(peer.clone(), 0..3)),
        option::of(vec(peer, 0..2)),
    )
        .prop_map(
            |(allowed_sources, metrics_sources)| v1beta1::NetworkPolicySpec {
                allowed_sources,
                metrics_sources,
            },
        )
}

fn client_auth() -> impl Strategy<Value = v1beta1::ClientAuth> {
    prop_oneof![
        Just(v1beta1::ClientAuth::None),
        Just(v1beta1::ClientAuth::Request),
        Just(v1beta1::ClientAuth::Require),
    ]
}

/// Any TLS settings.
fn tls() -> impl Strategy<Value = v1beta1::TlsSpec> {
    let issuer = (
        "[a-z]{1,8}",
        option::of(prop_oneof![Just("Issuer"), Just("ClusterIssuer")]),
        option::of(Just("cert-manager.io")),
    )
        .prop_map(|(name, kind, group)| v1beta1::IssuerRef {
            name,
            kind: kind.map(String::from),
            group: group.map(String::from),
        });
    (
        option::of("[a-z]{1,8}(-tls)?"),
        option::of(1i32..=65535),
        option::of(client_auth()),
        option::of("[a-z]{1,8}/refresher:v[0-9]"),
        option::of(issuer),
        option::of(any::<bool>()),
        option::of("[a-z]{1,8}-client"),
        option::of(("[a-z]{1,8}-trust", option::of("[a-z.]{1,8}")).prop_map(
            |(config_map_name, key)| v1beta1::ClientCaSource {
                config_map_name,
                key,
            },
        )),
    )
        .prop_map(
            |(
                secret_name,
                plaintext_port,
                client_auth,
                refresher_image,
                issuer_ref,
                service_ca,
                client_secret_name,
                client_ca,
            )| {
                v1beta1::TlsSpec {
                    secret_name,
                    plaintext_port,
                    client_auth,
                    client_ca,
                    client_secret_name,
                    refresher_image,
                    issuer_ref,
                    openshift_service_ca: service_ca,
                }
            },
        )
}

/// Any v1beta1 status.
pub fn beta_status() -> impl Strategy<Value = v1beta1::MemcachedStatus> {
    (
        option::of(0i64..100),
        option::of(0i32..=64),
        option::of(0i32..=64),
        option::of("app=[a-z]{1,8}"),
        option::of(vec(
            "[a-z]{1,8}-[0-9]\\.[a-z]{1,8}\\.default\\.svc:11211",
            0..4,
        )),
        conditions(),
        option::of(tls().prop_map(|tls| v1beta1::TlsStatus {
            secret_name: tls.secret_name,
            client_auth: tls.client_auth,
            client_ca: tls.client_ca,
            plaintext_port: tls.plaintext_port,
        })),
        option::of(
            option::of("[a-z]{1,8}").prop_map(|secret_name| v1beta1::AuthStatus { secret_name }),
        ),
    )
        .prop_map(
            |(
                observed_generation,
                replicas,
                ready_replicas,
                selector,
                servers,
                conditions,
                tls,
                auth,
            )| {
                v1beta1::MemcachedStatus {
                    observed_generation,
                    replicas,
                    ready_replicas,
                    selector,
                    servers,
                    tls,
                    auth,
                    client_ca_trust: None,
                    conditions,
                }
            },
        )
}

/// Metadata with any user annotations (never the reserved stash annotation) and labels.
pub fn metadata() -> impl Strategy<Value = ObjectMeta> {
    (
        "[a-z][a-z0-9-]{0,20}",
        // The API server never stores an empty annotation map (Go's omitempty).
        option::of(btree_map("[a-z]{1,6}(\\.io/[a-z]{1,6})?", ".{0,12}", 1..3)),
        option::of(btree_map("[a-z]{1,6}", "[a-z0-9]{0,6}", 0..3)),
        option::of(1i64..100),
    )
        .prop_map(|(name, annotations, labels, generation)| ObjectMeta {
            name: Some(name),
            namespace: Some("default".into()),
            annotations,
            labels,
            generation,
            uid: Some("6b2f4c1e-5d7a-4b8e-9f01-23456789abcd".into()),
            resource_version: Some("42".into()),
            ..ObjectMeta::default()
        })
}

/// Any v1beta1 object.
pub fn beta_object() -> impl Strategy<Value = v1beta1::Memcached> {
    (metadata(), beta_spec(), option::of(beta_status())).prop_map(|(metadata, spec, status)| {
        v1beta1::Memcached {
            metadata,
            spec,
            status,
        }
    })
}

/// Any v1alpha1 object without a stash.
pub fn alpha_object() -> impl Strategy<Value = v1alpha1::Memcached> {
    (
        metadata(),
        option::of(0i32..=64),
        option::of(1i32..=65535),
        option::of(conditions().prop_map(|conditions| v1alpha1::MemcachedStatus { conditions })),
    )
        .prop_map(
            |(metadata, size, container_port, status)| v1alpha1::Memcached {
                metadata,
                spec: v1alpha1::MemcachedSpec {
                    size,
                    container_port,
                },
                status,
            },
        )
}
