//! Memcached objects that end-to-end tests send through a cluster's webhooks, each with what
//! the operator's own rules say of it, so a test compares the cluster's answer with the
//! operator's code instead of spelling the answer a second time.

use memcached_operator::admission::{Defaults, default_spec, validate_create};
use memcached_operator::api::v1beta1;

/// A Memcached that only the validating webhook refuses (the CRD's schema and CEL admit it):
/// memcached's memory above the container's limit. Returns the object as JSON, and the
/// validator's message for it once defaulted with `defaults`, which names
/// `spec.memcached.memoryLimitMB`.
pub fn over_the_memory_limit(name: &str, namespace: &str, defaults: &Defaults) -> (String, String) {
    let object = serde_json::json!({
        "apiVersion": "cache.f2367556.dev/v1beta1",
        "kind": "Memcached",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"memcached": {"memoryLimitMB": 1024}, "resources": {"limits": {"memory": "512Mi"}}}
    });
    let case: v1beta1::Memcached = serde_json::from_value(object.clone()).expect("the case parses");
    let message = validate_create(
        &v1beta1::Memcached {
            spec: default_spec(&case.spec, defaults),
            ..case
        },
        &defaults.allowed_issuers,
    )
    .expect_err("the case is invalid")
    .message;
    assert!(
        message.contains("spec.memcached.memoryLimitMB"),
        "{message}"
    );
    (object.to_string(), message)
}

/// What kubectl says when the validating webhook of v1beta1 denies a request.
pub const DENIED_BY_VALIDATOR: &str =
    "admission webhook \"vmemcached-v1beta1.cache.f2367556.dev\" denied the request";
