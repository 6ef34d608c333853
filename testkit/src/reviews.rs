//! Builds AdmissionReview and ConversionReview bodies as a v1.33 API server sends them to the
//! operator's webhooks, from the operator's own API group, versions and webhook table.
//!
//! Two kinds of object go in them: a sparse Memcached with the spec a test chooses
//! ([`memcached`]), and the fully specified Memcached a user writes and `kubectl apply`
//! creates, with the metadata the API server fills in (about 3.4 KiB: [`create_review`], and
//! [`stored_object`] as etcd holds it, for conversion reviews of many objects). The
//! benchmarks, the load harness and the instruction counter all send the latter, so they
//! measure the same bytes.

use memcached_operator::api;
use memcached_operator::webhook::conversion::convert_object;
use memcached_operator::webhook::{WebhookKind, webhook};
use serde_json::{Value, json};

/// The `uid` of every ConversionReview built here (the API server makes a fresh one each).
pub const CONVERSION_UID: &str = "0f6b1a3c-7d7e-4b0a-8a55-2c9d4e6f7a81";
/// The `uid` of the fully specified CREATE and UPDATE reviews.
pub const FULL_REVIEW_UID: &str = "3e1c7b1a-5f7e-4c43-9c55-0a4c1a7e2f11";
/// The namespace every object here lives in.
pub const NAMESPACE: &str = "shop";
/// The `uid` of every object here.
const OBJECT_UID: &str = "8b0f5f9e-2d0a-4a57-a0c1-6f2b3f1d9a44";
/// When every object here was created.
const CREATED: &str = "2026-11-20T09:14:02Z";

/// The path of a webhook, from the webhook table.
pub fn path(kind: WebhookKind) -> &'static str {
    webhook(kind).path
}

/// `apiVersion` of the storage version's objects (v1beta1).
pub fn v1beta1() -> String {
    api::api_version(api::STORAGE_VERSION)
}

/// `apiVersion` of the deprecated version's objects (v1alpha1).
pub fn v1alpha1() -> String {
    api::api_version(api::DEPRECATED_VERSION)
}

/// A v1beta1 Memcached named `name` in namespace [`NAMESPACE`] with `spec`.
pub fn memcached(name: &str, spec: Value) -> Value {
    json!({
        "apiVersion": v1beta1(),
        "kind": api::KIND,
        "metadata": {
            "name": name,
            "namespace": NAMESPACE,
            "uid": OBJECT_UID,
            "creationTimestamp": CREATED,
            "generation": 1,
        },
        "spec": spec,
    })
}

/// An `admission.k8s.io/v1` AdmissionReview of `operation` (`CREATE`, `UPDATE`, `DELETE`) on
/// Memcached `object` (the new one) and `old`; its `uid` is `uid-OPERATION-NAME`.
pub fn admission(operation: &str, object: Option<&Value>, old: Option<&Value>) -> Value {
    let name = object
        .or(old)
        .and_then(|o| o["metadata"]["name"].as_str())
        .unwrap_or_default();
    json!({
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": format!("uid-{operation}-{name}"),
            "kind": {"group": api::GROUP, "version": api::STORAGE_VERSION, "kind": api::KIND},
            "resource": {"group": api::GROUP, "version": api::STORAGE_VERSION, "resource": api::PLURAL},
            "requestKind": {"group": api::GROUP, "version": api::STORAGE_VERSION, "kind": api::KIND},
            "requestResource": {"group": api::GROUP, "version": api::STORAGE_VERSION, "resource": api::PLURAL},
            "name": name,
            "namespace": NAMESPACE,
            "operation": operation,
            "userInfo": {"username": "kubernetes-admin", "groups": ["system:authenticated"]},
            "object": object,
            "oldObject": old,
            "dryRun": false,
        }
    })
}

/// An `apiextensions.k8s.io/v1` ConversionReview of `objects` to `desired` (an `apiVersion`),
/// with `uid` [`CONVERSION_UID`].
pub fn conversion(desired: &str, objects: &[Value]) -> Value {
    json!({
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "ConversionReview",
        "request": {
            "uid": CONVERSION_UID,
            "desiredAPIVersion": desired,
            "objects": objects,
        }
    })
}

/// The body of a review: its JSON, compact, keys in order.
pub fn body(review: &Value) -> Vec<u8> {
    // A `Value` always serialises: its map keys are strings.
    serde_json::to_vec(review).unwrap_or_default()
}

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
            "extraArgs": ["-o", "hashpower=20", "--lock-memory"]
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

/// Metadata as the API server fills it in for a new object created by `kubectl apply`
/// (last-applied annotation, managed fields), with a `resourceVersion` once stored.
fn applied_metadata(name: &str, spec: &Value, resource_version: Option<u64>) -> Value {
    let applied = json!({
        "apiVersion": v1beta1(),
        "kind": api::KIND,
        "metadata": {"annotations": {"team": "storefront"}, "name": name, "namespace": NAMESPACE},
        "spec": spec,
    });
    let mut metadata = json!({
        "annotations": {
            "team": "storefront",
            "kubectl.kubernetes.io/last-applied-configuration": format!("{applied}\n"),
        },
        "labels": {"app.kubernetes.io/name": "memcached", "app.kubernetes.io/part-of": NAMESPACE},
        "creationTimestamp": CREATED,
        "generation": 1,
        "managedFields": [{
            "apiVersion": v1beta1(),
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
            "time": CREATED
        }],
        "name": name,
        "namespace": NAMESPACE,
        "uid": OBJECT_UID
    });
    if let Some(version) = resource_version {
        metadata["resourceVersion"] = json!(version.to_string());
    }
    metadata
}

/// The AdmissionReview of `kubectl apply` creating the fully specified Memcached `sessions`,
/// as a tree.
pub fn full_create() -> Value {
    let spec = user_spec();
    let object = json!({
        "apiVersion": v1beta1(),
        "kind": api::KIND,
        "metadata": applied_metadata("sessions", &spec, None),
        "spec": spec,
    });
    let mut review = admission("CREATE", Some(&object), None);
    let request = &mut review["request"];
    request["uid"] = json!(FULL_REVIEW_UID);
    request["userInfo"]["groups"] = json!(["kubeadm:cluster-admins", "system:authenticated"]);
    request["options"] = json!({
        "kind": "CreateOptions",
        "apiVersion": "meta.k8s.io/v1",
        "fieldManager": "kubectl-client-side-apply",
        "fieldValidation": "Strict"
    });
    review
}

/// The body of [`full_create`].
pub fn create_review() -> Vec<u8> {
    body(&full_create())
}

/// The AdmissionReview of an UPDATE of the same Memcached that scales it from 3 to 5.
pub fn update_review() -> Vec<u8> {
    let mut review = full_create();
    let request = &mut review["request"];
    request["operation"] = json!("UPDATE");
    request["oldObject"] = request["object"].clone();
    request["object"]["spec"]["replicas"] = json!(5);
    request["object"]["metadata"]["generation"] = json!(2);
    request["options"] = json!({"kind": "UpdateOptions", "apiVersion": "meta.k8s.io/v1"});
    body(&review)
}

/// A stored v1beta1 Memcached, defaulted and with a status, as the API server reads it from
/// etcd (the `n`th of a list, so names differ).
pub fn stored_object(n: usize) -> Value {
    let mut spec = user_spec();
    spec["memcached"]["verbosity"] = json!(0);
    spec["podDisruptionBudget"] = json!({"maxUnavailable": 1});
    let name = format!("sessions-{n}");
    json!({
        "apiVersion": v1beta1(),
        "kind": api::KIND,
        "metadata": applied_metadata(&name, &spec, Some(1712 + n as u64)),
        "spec": spec,
        "status": {
            "observedGeneration": 1,
            "replicas": 3,
            "readyReplicas": 3,
            "selector": format!("app.kubernetes.io/instance={name},app.kubernetes.io/name=memcached"),
            "servers": [
                format!("{name}-0.{name}.{NAMESPACE}.svc:11211"),
                format!("{name}-1.{name}.{NAMESPACE}.svc:11211"),
                format!("{name}-2.{name}.{NAMESPACE}.svc:11211")
            ],
            "conditions": [
                {"type": "Available", "status": "True", "reason": "ServersReady", "message": "3 of 3 servers ready", "lastTransitionTime": "2026-11-20T09:14:40Z", "observedGeneration": 1},
                {"type": "Progressing", "status": "False", "reason": "RolloutComplete", "message": "every server runs the desired spec", "lastTransitionTime": "2026-11-20T09:14:40Z", "observedGeneration": 1},
                {"type": "Degraded", "status": "False", "reason": "AsDesired", "message": "", "lastTransitionTime": CREATED, "observedGeneration": 1}
            ]
        }
    })
}

/// A ConversionReview of `count` stored v1beta1 objects down to v1alpha1.
pub fn down_review(count: usize) -> Vec<u8> {
    let objects: Vec<Value> = (0..count).map(stored_object).collect();
    body(&conversion(&v1alpha1(), &objects))
}

/// A ConversionReview of `count` v1alpha1 objects (as the conversion down wrote them, stash
/// annotation included) back up to v1beta1.
///
/// # Panics
/// If the operator cannot convert a stored object down, which its own tests rule out.
pub fn up_review(count: usize) -> Vec<u8> {
    let alpha = v1alpha1();
    let objects: Vec<Value> = (0..count)
        .map(|n| {
            convert_object(stored_object(n), &alpha)
                .unwrap_or_else(|error| panic!("stored object {n} does not convert down: {error}"))
        })
        .collect();
    body(&conversion(&v1beta1(), &objects))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_admission_review_names_the_object_and_is_uid_by_operation() {
        let object = memcached("sessions", json!({"replicas": 3}));
        let review = admission("CREATE", Some(&object), None);
        assert_eq!(review["request"]["uid"], "uid-CREATE-sessions");
        assert_eq!(review["request"]["name"], "sessions");
        assert_eq!(review["request"]["oldObject"], Value::Null);
    }

    #[test]
    fn a_delete_review_takes_its_name_from_the_old_object() {
        let old = memcached("gone", json!({}));
        let review = admission("DELETE", None, Some(&old));
        assert_eq!(review["request"]["name"], "gone");
        assert_eq!(review["request"]["object"], Value::Null);
    }

    #[test]
    fn the_full_create_review_is_a_few_kib_and_carries_the_options_kubectl_sends() {
        let body = create_review();
        assert!((3000..4000).contains(&body.len()), "{} bytes", body.len());
        let review: Value = serde_json::from_slice(&body).expect("JSON");
        assert_eq!(review["request"]["options"]["fieldValidation"], "Strict");
        assert_eq!(review["request"]["object"]["spec"], user_spec());
    }

    #[test]
    fn the_update_review_scales_from_three_to_five() {
        let review: Value = serde_json::from_slice(&update_review()).expect("JSON");
        assert_eq!(review["request"]["operation"], "UPDATE");
        assert_eq!(review["request"]["oldObject"]["spec"]["replicas"], 3);
        assert_eq!(review["request"]["object"]["spec"]["replicas"], 5);
    }

    #[test]
    fn conversion_reviews_hold_every_object_in_the_source_version() {
        let down: Value = serde_json::from_slice(&down_review(3)).expect("JSON");
        let up: Value = serde_json::from_slice(&up_review(3)).expect("JSON");
        for (review, desired, source) in
            [(&down, v1alpha1(), v1beta1()), (&up, v1beta1(), v1alpha1())]
        {
            assert_eq!(review["request"]["desiredAPIVersion"], desired.as_str());
            let objects = review["request"]["objects"].as_array().expect("objects");
            assert_eq!(objects.len(), 3);
            assert!(objects.iter().all(|o| o["apiVersion"] == source.as_str()));
        }
    }
}
