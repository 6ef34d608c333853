//! Builds one example Memcached per served version, from the Rust types: the CSV's
//! `alm-examples` and `config/samples/` both come from here.
//!
//! The examples are valid against the CRD's schema and CEL rules: the item memory fits in the
//! memory limit and the item size is at most half the item memory.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::ResourceRequirements;
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use serde_json::Value;

use memcached_operator::api::{v1alpha1, v1beta1};

/// The name of the v1beta1 example.
pub const NAME: &str = "memcached-sample";
/// The name of the v1alpha1 example: distinct, so applying both samples creates two objects.
pub const V1ALPHA1_NAME: &str = "memcached-sample-v1alpha1";

/// The v1beta1 example: three servers of 64 MiB each.
pub fn v1beta1() -> v1beta1::Memcached {
    v1beta1::Memcached::new(
        NAME,
        v1beta1::MemcachedSpec {
            replicas: Some(3),
            memcached: Some(v1beta1::MemcachedConfig {
                memory_limit_mb: Some(64),
                max_connections: Some(1024),
                threads: Some(4),
                max_item_size: Some("1m".to_string()),
                ..v1beta1::MemcachedConfig::default()
            }),
            resources: Some(ResourceRequirements {
                requests: Some(BTreeMap::from([
                    ("cpu".to_string(), Quantity("100m".to_string())),
                    ("memory".to_string(), Quantity("96Mi".to_string())),
                ])),
                limits: Some(BTreeMap::from([(
                    "memory".to_string(),
                    Quantity("128Mi".to_string()),
                )])),
                ..ResourceRequirements::default()
            }),
            service: Some(v1beta1::ServiceSpec { port: Some(11211) }),
            pod_disruption_budget: Some(v1beta1::PodDisruptionBudgetSpec {
                max_unavailable: Some(IntOrString::Int(1)),
            }),
            ..v1beta1::MemcachedSpec::default()
        },
    )
}

/// The v1alpha1 example, in the deprecated shape.
pub fn v1alpha1() -> v1alpha1::Memcached {
    v1alpha1::Memcached::new(
        V1ALPHA1_NAME,
        v1alpha1::MemcachedSpec {
            size: Some(3),
            container_port: Some(11211),
        },
    )
}

/// Both examples as JSON, oldest version first.
pub fn all() -> Result<Vec<(&'static str, Value)>, serde_json::Error> {
    Ok(vec![
        (
            memcached_operator::api::DEPRECATED_VERSION,
            serde_json::to_value(v1alpha1())?,
        ),
        (
            memcached_operator::api::STORAGE_VERSION,
            serde_json::to_value(v1beta1())?,
        ),
    ])
}

#[cfg(test)]
mod tests {
    use super::*;
    use memcached_operator::admission::AllowedIssuers;
    use memcached_operator::admission::validate::validate_create;
    use memcached_operator::api::convert;

    #[test]
    fn the_v1beta1_example_passes_the_crd_rules_and_the_validating_webhook() {
        let example = v1beta1();
        assert!(
            example.validate_cel().is_ok(),
            "{:?}",
            example.validate_cel()
        );
        assert!(
            validate_create(&example, &AllowedIssuers::default()).is_ok(),
            "{:?}",
            validate_create(&example, &AllowedIssuers::default())
        );
    }

    #[test]
    fn the_v1alpha1_example_converts_to_a_valid_v1beta1_object() {
        let hub = convert::to_v1beta1(&v1alpha1()).expect("converts");
        assert!(hub.validate_cel().is_ok(), "{:?}", hub.validate_cel());
        assert!(
            validate_create(&hub, &AllowedIssuers::default()).is_ok(),
            "{:?}",
            validate_create(&hub, &AllowedIssuers::default())
        );
    }

    #[test]
    fn there_is_one_example_per_served_version() {
        let versions: Vec<&str> = all().expect("serializes").iter().map(|(v, _)| *v).collect();
        assert_eq!(versions, memcached_operator::api::SERVED_VERSIONS.to_vec());
    }
}
