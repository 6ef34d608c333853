//! Shows the webhooks at work behind a real API server: defaulting, validation with the
//! validator's own messages (through kube-rs and kubectl), deletion protection, conversion
//! without loss, dry-run, and config/default.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::{ResourceRequirements, Toleration};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use memcached_operator::admission::{Defaults, default_spec, validate_create};
use memcached_operator::api::convert::STASH_ANNOTATION;
use memcached_operator::api::v1beta1::{Memcached, MemcachedConfig, MemcachedSpec};
use memcached_operator::api::{DELETION_PROTECTION_ANNOTATION, v1alpha1};
use serde_json::json;
use testkit::process::RELATED_IMAGE;
use testkit::repository;

use crate::cluster::{Env, eventually, kubectl};

const WAIT: Duration = Duration::from_secs(60);

fn defaults() -> Defaults {
    Defaults::with_related_image(Some(RELATED_IMAGE.to_string()))
}

fn object(namespace: &str, name: &str, spec: MemcachedSpec) -> Memcached {
    let mut object = Memcached::new(name, spec);
    object.metadata.namespace = Some(namespace.to_string());
    object
}

fn quantities(pairs: &[(&str, &str)]) -> Option<BTreeMap<String, Quantity>> {
    Some(
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), Quantity(v.to_string())))
            .collect(),
    )
}

fn with_memory(memory_mb: i32) -> Option<MemcachedConfig> {
    Some(MemcachedConfig {
        memory_limit_mb: Some(memory_mb),
        ..MemcachedConfig::default()
    })
}

/// Objects only the validating webhook refuses (the schema and CEL admit them), so the API
/// server's answer must carry the validator's own message.
fn webhook_only_invalid(namespace: &str) -> Vec<Memcached> {
    let resources = |requests: &[(&str, &str)], limits: &[(&str, &str)]| ResourceRequirements {
        requests: quantities(requests),
        limits: quantities(limits),
        ..ResourceRequirements::default()
    };
    let mut reserved = object(namespace, "reserved-annotation", MemcachedSpec::default());
    reserved.metadata.annotations = Some(BTreeMap::from([(
        STASH_ANNOTATION.to_string(),
        "{}".to_string(),
    )]));
    vec![
        object(
            namespace,
            "memory-over-limit",
            MemcachedSpec {
                memcached: with_memory(1024),
                resources: Some(resources(&[], &[("memory", "512Mi")])),
                ..MemcachedSpec::default()
            },
        ),
        object(
            namespace,
            "memory-over-decimal-limit",
            MemcachedSpec {
                memcached: with_memory(1000),
                resources: Some(resources(&[], &[("memory", "1G")])),
                ..MemcachedSpec::default()
            },
        ),
        object(
            namespace,
            "default-memory-over-limit",
            MemcachedSpec {
                resources: Some(resources(&[], &[("memory", "32Mi")])),
                ..MemcachedSpec::default()
            },
        ),
        object(
            namespace,
            "cpu-request-over-limit",
            MemcachedSpec {
                resources: Some(resources(
                    &[("cpu", "2")],
                    &[("cpu", "500m"), ("memory", "1Gi")],
                )),
                ..MemcachedSpec::default()
            },
        ),
        object(
            namespace,
            "memory-request-over-limit",
            MemcachedSpec {
                resources: Some(resources(&[("memory", "200Mi")], &[("memory", "128Mi")])),
                ..MemcachedSpec::default()
            },
        ),
        object(
            namespace,
            "unparsable-limit",
            MemcachedSpec {
                resources: Some(resources(&[], &[("memory", "lots")])),
                ..MemcachedSpec::default()
            },
        ),
        object(
            namespace,
            "unparsable-request",
            MemcachedSpec {
                resources: Some(resources(&[("cpu", "fast")], &[("memory", "1Gi")])),
                ..MemcachedSpec::default()
            },
        ),
        reserved,
        object(namespace, "dotted.name", MemcachedSpec::default()),
        object(namespace, &"n".repeat(53), MemcachedSpec::default()),
    ]
}

/// The message the validator gives for an object once the mutating webhook has defaulted it.
fn validator_message(object: &Memcached) -> String {
    let mut defaulted = object.clone();
    let defaults = defaults();
    defaulted.spec = default_spec(&object.spec, &defaults);
    validate_create(&defaulted, &defaults.allowed_issuers)
        .expect_err("the case is invalid")
        .message
}

pub async fn a_minimal_v1beta1_object_is_stored_with_every_default(env: Arc<Env>) {
    let namespace = env.create_namespace("e2e-defaults").await;
    let api: Api<Memcached> = Api::namespaced(env.client.clone(), &namespace);
    api.create(
        &PostParams::default(),
        &object(&namespace, "minimal", MemcachedSpec::default()),
    )
    .await
    .expect("a minimal object is admitted");
    let stored = api.get("minimal").await.expect("it is stored");
    assert_eq!(
        stored.spec,
        default_spec(&MemcachedSpec::default(), &defaults())
    );
    assert!(stored.spec.image.as_deref() == Some(RELATED_IMAGE));
}

pub async fn invalid_objects_are_refused_with_the_validators_message(env: Arc<Env>) {
    let namespace = env.create_namespace("e2e-invalid").await;
    let api: Api<Memcached> = Api::namespaced(env.client.clone(), &namespace);
    let cases = webhook_only_invalid(&namespace);
    assert!(cases.len() >= 10);
    for case in cases {
        let expected = validator_message(&case);
        let name = case.metadata.name.clone().unwrap_or_default();
        match api.create(&PostParams::default(), &case).await {
            Err(kube::Error::Api(status)) => {
                assert!(
                    status.message.contains(&expected),
                    "{name}: the API server said {:?}, expected the validator's {expected:?}",
                    status.message
                );
                assert!(
                    status
                        .message
                        .contains("vmemcached-v1beta1.cache.f2367556.dev"),
                    "{}",
                    status.message
                );
            }
            other => panic!("{name}: expected a denial, got {other:?}"),
        }
        assert!(
            api.get_opt(&name).await.expect("get").is_none(),
            "{name} was stored"
        );
    }
}

pub async fn invalid_objects_are_refused_through_kubectl_apply(env: Arc<Env>) {
    let namespace = env.create_namespace("e2e-kubectl").await;
    for case in webhook_only_invalid(&namespace) {
        let expected = validator_message(&case);
        let manifest = serde_json::to_string(&case).expect("serialises");
        let (ok, _, stderr) = kubectl(&env, &["apply", "-f", "-"], Some(&manifest));
        assert!(!ok, "kubectl apply admitted {manifest}");
        assert!(
            stderr.contains(&expected),
            "kubectl said {stderr:?}, expected {expected:?}"
        );
    }
}

pub async fn deletion_protection_blocks_delete_until_the_annotation_is_removed(env: Arc<Env>) {
    let namespace = env.create_namespace("e2e-protection").await;
    let api: Api<Memcached> = Api::namespaced(env.client.clone(), &namespace);
    let mut protected = object(&namespace, "protected", MemcachedSpec::default());
    protected.metadata.annotations = Some(BTreeMap::from([(
        DELETION_PROTECTION_ANNOTATION.to_string(),
        "true".to_string(),
    )]));
    api.create(&PostParams::default(), &protected)
        .await
        .expect("created");
    match api.delete("protected", &DeleteParams::default()).await {
        Err(kube::Error::Api(status)) => {
            assert!(
                status.message.contains("is protected from deletion"),
                "{}",
                status.message
            );
            assert!(
                status
                    .message
                    .contains("kubectl annotate memcacheds protected"),
                "{}",
                status.message
            );
        }
        other => panic!("expected the delete to be refused, got {other:?}"),
    }
    assert!(api.get_opt("protected").await.expect("get").is_some());
    let lift = json!({"metadata": {"annotations": {DELETION_PROTECTION_ANNOTATION: null}}});
    api.patch("protected", &PatchParams::default(), &Patch::Merge(&lift))
        .await
        .expect("annotation removed");
    api.delete("protected", &DeleteParams::default())
        .await
        .expect("now deletable");
    eventually("the object is gone", WAIT, || async {
        api.get_opt("protected")
            .await
            .expect("get")
            .is_none()
            .then_some(())
    })
    .await;
}

pub async fn a_v1alpha1_round_trip_through_v1beta1_loses_nothing(env: Arc<Env>) {
    let namespace = env.create_namespace("e2e-conversion").await;
    let alpha: Api<v1alpha1::Memcached> = Api::namespaced(env.client.clone(), &namespace);
    let beta: Api<Memcached> = Api::namespaced(env.client.clone(), &namespace);
    let created = v1alpha1::Memcached::new(
        "legacy",
        v1alpha1::MemcachedSpec {
            size: Some(2),
            container_port: Some(11311),
        },
    );
    alpha
        .create(&PostParams::default(), &created)
        .await
        .expect("a v1alpha1 object is admitted");

    // Read as v1beta1: size and port mapped, defaults filled in through the v1beta1 webhooks.
    let as_beta = beta.get("legacy").await.expect("readable as v1beta1");
    assert_eq!(as_beta.spec.replicas, Some(2));
    assert_eq!(
        as_beta.spec.service.as_ref().and_then(|s| s.port),
        Some(11311)
    );
    assert_eq!(as_beta.spec.image.as_deref(), Some(RELATED_IMAGE));

    // Give it fields v1alpha1 cannot hold, TLS (issued by cert-manager), authentication, the
    // shutdown, the warm restart, monitoring with a ServiceMonitor and the NetworkPolicy among
    // them.
    let richer = json!({"spec": {
        "memcached": {"threads": 8, "extraArgs": ["-o", "hashpower=20"], "warmRestart": true},
        "tolerations": [{"key": "dedicated", "operator": "Equal", "value": "cache", "effect": "NoSchedule"}],
        "priorityClassName": "cache-high",
        "tls": {
            "secretName": "legacy-tls", "clientAuth": "Require", "plaintextPort": 11312,
            "clientSecretName": "legacy-sidecars-tls",
            "issuerRef": {"name": "legacy-ca", "kind": "Issuer", "group": "cert-manager.io"},
        },
        "auth": {"secretName": "legacy-auth"},
        "gracefulShutdown": {"preStopDelaySeconds": 5, "terminationGracePeriodSeconds": 40},
        "monitoring": {
            "port": 9200,
            "serviceMonitor": {"interval": "30s", "labels": {"release": "prometheus"}},
        },
        "networkPolicy": {
            "allowedSources": [{"podSelector": {"matchLabels": {"role": "client"}}}],
            "metricsSources": [{"namespaceSelector": {"matchLabels": {"team": "monitoring"}}}],
        }
    }});
    beta.patch("legacy", &PatchParams::default(), &Patch::Merge(&richer))
        .await
        .expect("v1beta1 patch");
    let before = beta.get("legacy").await.expect("read back");

    // Read as v1alpha1: the extra fields ride in the stash annotation.
    let as_alpha = alpha.get("legacy").await.expect("readable as v1alpha1");
    assert_eq!(as_alpha.spec.size, Some(2));
    assert!(
        as_alpha
            .metadata
            .annotations
            .as_ref()
            .is_some_and(|a| a.contains_key(STASH_ANNOTATION))
    );

    // Write as v1alpha1 (size edited), then read as v1beta1: nothing lost, the edit wins.
    // The controller writes status meanwhile, so retry the read-modify-write on a conflict.
    for attempt in 1.. {
        let mut as_alpha = alpha.get("legacy").await.expect("readable as v1alpha1");
        as_alpha.spec.size = Some(3);
        match alpha
            .replace("legacy", &PostParams::default(), &as_alpha)
            .await
        {
            Ok(_) => break,
            Err(kube::Error::Api(status)) if status.code == 409 && attempt < 10 => continue,
            Err(error) => panic!("v1alpha1 update: {error}"),
        }
    }
    let after = beta.get("legacy").await.expect("read as v1beta1 again");
    assert_eq!(after.spec.replicas, Some(3));
    let mut expected = before.spec.clone();
    expected.replicas = Some(3);
    assert_eq!(after.spec, expected);
    assert_eq!(
        after.spec.memcached.as_ref().and_then(|m| m.threads),
        Some(8)
    );
    let tls = after.spec.tls.as_ref().expect("TLS survives v1alpha1");
    assert_eq!(tls.secret_name.as_deref(), Some("legacy-tls"));
    assert_eq!(tls.plaintext_port, Some(11312));
    assert!(
        tls.refresher_image.is_some(),
        "the refresher's image was defaulted"
    );
    assert_eq!(
        tls.issuer_ref.as_ref().map(|i| i.name.as_str()),
        Some("legacy-ca")
    );
    assert!(
        after
            .spec
            .auth
            .as_ref()
            .is_some_and(|a| a.reloader_image.is_some()),
        "the supervisor's image was defaulted"
    );
    let monitoring = after.spec.monitoring.as_ref().expect("monitoring survives");
    assert_eq!(monitoring.port, Some(9200));
    assert!(monitoring.exporter_image.is_some() && monitoring.service_monitor.is_some());
    assert!(
        after
            .spec
            .network_policy
            .as_ref()
            .is_some_and(|p| p.metrics_sources.is_some())
    );
    assert_eq!(
        after.spec.tolerations,
        Some(vec![Toleration {
            key: Some("dedicated".into()),
            operator: Some("Equal".into()),
            value: Some("cache".into()),
            effect: Some("NoSchedule".into()),
            toleration_seconds: None,
        }])
    );
    assert!(
        after
            .metadata
            .annotations
            .as_ref()
            .is_none_or(|a| !a.contains_key(STASH_ANNOTATION)),
        "the stash is removed on the way up"
    );
}

pub async fn a_server_side_dry_run_returns_the_defaulted_object_and_stores_nothing(env: Arc<Env>) {
    let namespace = env.create_namespace("e2e-dry-run").await;
    let api: Api<Memcached> = Api::namespaced(env.client.clone(), &namespace);
    let dry_run = PostParams {
        dry_run: true,
        ..PostParams::default()
    };
    let answered = api
        .create(
            &dry_run,
            &object(&namespace, "dry", MemcachedSpec::default()),
        )
        .await
        .expect("a dry run is admitted");
    assert_eq!(
        answered.spec,
        default_spec(&MemcachedSpec::default(), &defaults())
    );
    assert!(
        api.get_opt("dry").await.expect("get").is_none(),
        "a dry run stores nothing"
    );
}

pub async fn config_default_applies_with_a_server_side_dry_run(env: Arc<Env>) {
    let output = std::process::Command::new(repository::tool("kustomize"))
        .arg("build")
        .arg(repository::root().join("config/default"))
        .output()
        .expect("run .tools/bin/kustomize");
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let documents = memcached_packager::yaml::documents(&String::from_utf8_lossy(&output.stdout))
        .expect("kustomize writes YAML");
    let is_cert_manager = |d: &serde_json::Value| {
        d["apiVersion"]
            .as_str()
            .is_some_and(|v| v.starts_with("cert-manager.io/"))
    };
    let (namespaces, rest): (Vec<_>, Vec<_>) = documents
        .into_iter()
        .filter(|d| !d.is_null() && !is_cert_manager(d))
        .partition(|d| d["kind"] == "Namespace");
    assert!(!rest.is_empty());
    // A dry-run cannot create objects in a namespace a dry-run created: make it for real.
    for namespace in &namespaces {
        let name = namespace["metadata"]["name"]
            .as_str()
            .expect("a namespace name");
        env.create_namespace(name).await;
    }
    // The CRD exists already, wired by URL; server-side apply would merge config's Service
    // reference into that URL. Replace it whole, as a fresh install would create it.
    let (crds, rest): (Vec<_>, Vec<_>) = rest
        .into_iter()
        .partition(|d| d["kind"] == "CustomResourceDefinition");
    assert_eq!(crds.len(), 1);
    for (verb, items) in [("replace", crds), ("apply", rest)] {
        let list = json!({"apiVersion": "v1", "kind": "List", "items": items});
        let args: &[&str] = if verb == "replace" {
            &["replace", "--dry-run=server", "-f", "-"]
        } else {
            &[
                "apply",
                "--server-side",
                "--dry-run=server",
                "--force-conflicts",
                "-f",
                "-",
            ]
        };
        let (ok, stdout, stderr) = kubectl(&env, args, Some(&list.to_string()));
        assert!(ok, "config/default does not {verb}: {stderr}");
        assert!(stdout.contains("(server dry run)"), "{stdout}");
    }
}
