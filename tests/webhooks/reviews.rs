//! Builds AdmissionReview and ConversionReview bodies as the API server sends them.

use memcached_operator::api;
use memcached_operator::webhook::{WebhookKind, webhook};
use serde_json::{Value, json};

/// The path of a webhook, from the webhook table.
pub fn path(kind: WebhookKind) -> &'static str {
    webhook(kind).path
}

/// A v1beta1 Memcached named `name` in namespace `shop` with `spec`.
pub fn memcached(name: &str, spec: Value) -> Value {
    json!({
        "apiVersion": api::api_version(api::STORAGE_VERSION),
        "kind": api::KIND,
        "metadata": {
            "name": name,
            "namespace": "shop",
            "uid": "8b0f5f9e-2d0a-4a57-a0c1-6f2b3f1d9a44",
            "creationTimestamp": "2026-11-20T09:14:02Z",
            "generation": 1,
        },
        "spec": spec,
    })
}

/// An `admission.k8s.io/v1` AdmissionReview of `operation` on Memcached `object`/`old`.
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
            "namespace": "shop",
            "operation": operation,
            "userInfo": {"username": "kubernetes-admin", "groups": ["system:authenticated"]},
            "object": object,
            "oldObject": old,
            "dryRun": false,
        }
    })
}

/// An `apiextensions.k8s.io/v1` ConversionReview of `objects` to `desired`.
pub fn conversion(desired: &str, objects: &[Value]) -> Value {
    json!({
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "ConversionReview",
        "request": {
            "uid": "0f6b1a3c-7d7e-4b0a-8a55-2c9d4e6f7a81",
            "desiredAPIVersion": desired,
            "objects": objects,
        }
    })
}

/// The body of a review, serialised.
pub fn body(review: &Value) -> Vec<u8> {
    serde_json::to_vec(review).expect("a review serialises")
}
