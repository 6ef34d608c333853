//! Builds the review bodies the benchmarks send: an AdmissionReview of a CREATE as a v1.33 API
//! server sends it for a fully specified Memcached (about 2 KiB), and ConversionReviews of many
//! stored objects, down to v1alpha1 and back up to v1beta1.
//!
//! Shared by the load harness and the micro-benchmarks, so both measure the same bytes.

#![allow(dead_code)] // Each benchmark uses part of this module.

use memcached_operator::api;
use memcached_operator::webhook::conversion::convert_object;
use serde_json::{Value, json};

/// `apiVersion` of v1beta1 Memcached objects.
pub const V1BETA1: &str = "cache.f2367556.dev/v1beta1";
/// `apiVersion` of v1alpha1 Memcached objects.
pub const V1ALPHA1: &str = "cache.f2367556.dev/v1alpha1";

/// The spec of a Memcached as a user writes it in full: resources, tolerations, extra
/// arguments, scheduling. `podDisruptionBudget` and `memcached.verbosity` are left out, so the
/// mutating webhook has a small patch to send back.
pub fn user_spec() -> Value {
    json!({
        "replicas": 3,
        "image": "registry.example/memcached:1.6.39",
        "memcached": {
            "memoryLimitMB": 256,
            "maxConnections": 4096,
            "threads": 4,
            "maxItemSize": "2m",
            "extraArgs": ["-o", "modern", "--lock-memory"]
        },
        "resources": {
            "requests": {"cpu": "250m", "memory": "320Mi"},
            "limits": {"cpu": "1", "memory": "320Mi"}
        },
        "service": {"port": 11211},
        "tolerations": [
            {"key": "dedicated", "operator": "Equal", "value": "cache", "effect": "NoSchedule"},
            {"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300}
        ],
        "nodeSelector": {"kubernetes.io/os": "linux", "node-role.example/cache": "true"},
        "priorityClassName": "cache-critical"
    })
}

/// Metadata as the API server fills it in for a new object created by `kubectl apply`.
fn metadata(name: &str, spec: &Value, resource_version: Option<u64>) -> Value {
    let applied = json!({
        "apiVersion": V1BETA1,
        "kind": api::KIND,
        "metadata": {"annotations": {"team": "storefront"}, "name": name, "namespace": "shop"},
        "spec": spec,
    });
    let mut metadata = json!({
        "annotations": {
            "team": "storefront",
            "kubectl.kubernetes.io/last-applied-configuration": format!("{applied}\n"),
        },
        "labels": {"app.kubernetes.io/name": "memcached", "app.kubernetes.io/part-of": "shop"},
        "creationTimestamp": "2026-11-20T09:14:02Z",
        "generation": 1,
        "managedFields": [{
            "apiVersion": V1BETA1,
            "fieldsType": "FieldsV1",
            "fieldsV1": {
                "f:metadata": {
                    "f:annotations": {".": {}, "f:kubectl.kubernetes.io/last-applied-configuration": {}, "f:team": {}},
                    "f:labels": {".": {}, "f:app.kubernetes.io/name": {}, "f:app.kubernetes.io/part-of": {}}
                },
                "f:spec": {
                    ".": {}, "f:image": {}, "f:memcached": {".": {}, "f:extraArgs": {}, "f:maxConnections": {}, "f:maxItemSize": {}, "f:memoryLimitMB": {}, "f:threads": {}},
                    "f:nodeSelector": {}, "f:priorityClassName": {}, "f:replicas": {}, "f:resources": {".": {}, "f:limits": {}, "f:requests": {}},
                    "f:service": {".": {}, "f:port": {}}, "f:tolerations": {}
                }
            },
            "manager": "kubectl-client-side-apply",
            "operation": "Update",
            "time": "2026-11-20T09:14:02Z"
        }],
        "name": name,
        "namespace": "shop",
        "uid": "8b0f5f9e-2d0a-4a57-a0c1-6f2b3f1d9a44"
    });
    if let Some(version) = resource_version {
        metadata["resourceVersion"] = json!(version.to_string());
    }
    metadata
}

/// The AdmissionReview of `kubectl apply` creating the fully specified Memcached.
pub fn create_review() -> Vec<u8> {
    let spec = user_spec();
    let review = json!({
        "kind": "AdmissionReview",
        "apiVersion": "admission.k8s.io/v1",
        "request": {
            "uid": "3e1c7b1a-5f7e-4c43-9c55-0a4c1a7e2f11",
            "kind": {"group": api::GROUP, "version": api::STORAGE_VERSION, "kind": api::KIND},
            "resource": {"group": api::GROUP, "version": api::STORAGE_VERSION, "resource": api::PLURAL},
            "requestKind": {"group": api::GROUP, "version": api::STORAGE_VERSION, "kind": api::KIND},
            "requestResource": {"group": api::GROUP, "version": api::STORAGE_VERSION, "resource": api::PLURAL},
            "name": "sessions",
            "namespace": "shop",
            "operation": "CREATE",
            "userInfo": {
                "username": "kubernetes-admin",
                "groups": ["kubeadm:cluster-admins", "system:authenticated"]
            },
            "object": {
                "apiVersion": V1BETA1,
                "kind": api::KIND,
                "metadata": metadata("sessions", &spec, None),
                "spec": spec,
            },
            "oldObject": null,
            "dryRun": false,
            "options": {
                "kind": "CreateOptions",
                "apiVersion": "meta.k8s.io/v1",
                "fieldManager": "kubectl-client-side-apply",
                "fieldValidation": "Strict"
            }
        }
    });
    serde_json::to_vec(&review).expect("a review serialises")
}

/// The AdmissionReview of an UPDATE of the same Memcached that scales it from 3 to 5.
pub fn update_review() -> Vec<u8> {
    let mut review: Value = serde_json::from_slice(&create_review()).expect("JSON");
    let request = &mut review["request"];
    request["operation"] = json!("UPDATE");
    request["oldObject"] = request["object"].clone();
    request["object"]["spec"]["replicas"] = json!(5);
    request["object"]["metadata"]["generation"] = json!(2);
    request["options"] = json!({"kind": "UpdateOptions", "apiVersion": "meta.k8s.io/v1"});
    serde_json::to_vec(&review).expect("a review serialises")
}

/// A stored v1beta1 Memcached, defaulted and with a status, as the API server reads it from
/// etcd (the `n`th of a list, so names differ).
pub fn stored_object(n: usize) -> Value {
    let mut spec = user_spec();
    spec["memcached"]["verbosity"] = json!(0);
    spec["podDisruptionBudget"] = json!({"maxUnavailable": 1});
    let name = format!("sessions-{n}");
    json!({
        "apiVersion": V1BETA1,
        "kind": api::KIND,
        "metadata": metadata(&name, &spec, Some(1712 + n as u64)),
        "spec": spec,
        "status": {
            "observedGeneration": 1,
            "replicas": 3,
            "readyReplicas": 3,
            "selector": format!("app.kubernetes.io/instance={name},app.kubernetes.io/name=memcached"),
            "servers": [
                format!("{name}-0.{name}.shop.svc:11211"),
                format!("{name}-1.{name}.shop.svc:11211"),
                format!("{name}-2.{name}.shop.svc:11211")
            ],
            "conditions": [
                {"type": "Available", "status": "True", "reason": "ServersReady", "message": "3 of 3 servers ready", "lastTransitionTime": "2026-11-20T09:14:40Z", "observedGeneration": 1},
                {"type": "Progressing", "status": "False", "reason": "RolloutComplete", "message": "every server runs the desired spec", "lastTransitionTime": "2026-11-20T09:14:40Z", "observedGeneration": 1},
                {"type": "Degraded", "status": "False", "reason": "AsDesired", "message": "", "lastTransitionTime": "2026-11-20T09:14:02Z", "observedGeneration": 1}
            ]
        }
    })
}

/// A ConversionReview of `objects` to `desired`.
pub fn conversion_review(desired: &str, objects: Vec<Value>) -> Vec<u8> {
    let review = json!({
        "kind": "ConversionReview",
        "apiVersion": "apiextensions.k8s.io/v1",
        "request": {
            "uid": "0f6b1a3c-7d7e-4b0a-8a55-2c9d4e6f7a81",
            "desiredAPIVersion": desired,
            "objects": objects,
        }
    });
    serde_json::to_vec(&review).expect("a review serialises")
}

/// A ConversionReview of `count` stored v1beta1 objects down to v1alpha1.
pub fn down_review(count: usize) -> Vec<u8> {
    conversion_review(V1ALPHA1, (0..count).map(stored_object).collect())
}

/// A ConversionReview of `count` v1alpha1 objects (as `down` wrote them, stash annotation
/// included) back up to v1beta1.
pub fn up_review(count: usize) -> Vec<u8> {
    let objects = (0..count)
        .map(|n| convert_object(stored_object(n), V1ALPHA1).expect("converts down"))
        .collect();
    conversion_review(V1BETA1, objects)
}
