//! The children a Memcached asks for: the golden files, ownership, scheduling, the restricted
//! pod security, the config hash, the Service and the budget; secured and monitored servers in
//! the modules below, and the isolation of their containers.

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
                warm_restart: None,
                extra_args: Some(vec!["-o".into(), "hashpower=20".into()]),
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
        std::fs::create_dir_all(path.parent().expect("has a parent")).expect("creates testdata");
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
            "-m",
            "1024",
            "-c",
            "4096",
            "-t",
            "8",
            "-I",
            "4m",
            "-p",
            "11211",
            "-U",
            "0",
            "-v",
            "-o",
            "hashpower=20"
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

mod isolated;
mod monitored;
mod secured;
