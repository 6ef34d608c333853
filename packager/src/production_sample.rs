//! Builds the production example, `config/samples/production/`: a Memcached as a production
//! team would run it, with what it needs beside it. TLS from a cert-manager CA issuer (a
//! self-signed issuer, the CA certificate it issues, and the CA issuer the Memcached names),
//! client credentials from a Secret, memcached_exporter's metrics, a NetworkPolicy, a graceful
//! shutdown and warm restarts. It needs cert-manager; `make run` starts it before the operator.
//!
//! The Secret's password is an example: replace it before use.

use std::collections::BTreeMap;

use k8s_openapi::api::networking::v1::NetworkPolicyPeer;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use serde_json::{Value, json};

use memcached_operator::api::v1beta1;

/// The production example's name.
pub const NAME: &str = "memcached-production";
/// The CA issuer that issues its servers' certificate.
pub const CA_ISSUER: &str = "memcached-production-ca";
/// The Secret of its credentials.
pub const AUTH_SECRET: &str = "memcached-production-auth";
/// The Secret its certificate is issued into.
pub const TLS_SECRET: &str = "memcached-production-tls";
/// The label of the pods allowed to connect.
pub const CLIENT_LABEL: &str = "memcached-production-client";

/// The example Memcached.
pub fn memcached() -> v1beta1::Memcached {
    let labelled = |key: &str, value: &str| NetworkPolicyPeer {
        namespace_selector: None,
        pod_selector: Some(LabelSelector {
            match_labels: Some(BTreeMap::from([(key.to_string(), value.to_string())])),
            match_expressions: None,
        }),
        ip_block: None,
    };
    let monitoring_namespace = NetworkPolicyPeer {
        namespace_selector: Some(LabelSelector {
            match_labels: Some(BTreeMap::from([(
                "kubernetes.io/metadata.name".to_string(),
                "monitoring".to_string(),
            )])),
            match_expressions: None,
        }),
        pod_selector: None,
        ip_block: None,
    };
    v1beta1::Memcached::new(
        NAME,
        v1beta1::MemcachedSpec {
            replicas: Some(3),
            memcached: Some(v1beta1::MemcachedConfig {
                memory_limit_mb: Some(64),
                max_item_size: Some("1m".to_string()),
                warm_restart: Some(true),
                ..v1beta1::MemcachedConfig::default()
            }),
            tls: Some(v1beta1::TlsSpec {
                secret_name: Some(TLS_SECRET.to_string()),
                issuer_ref: Some(v1beta1::IssuerRef {
                    name: CA_ISSUER.to_string(),
                    kind: Some("Issuer".to_string()),
                    group: None,
                }),
                client_auth: Some(v1beta1::ClientAuth::Request),
                ..v1beta1::TlsSpec::default()
            }),
            auth: Some(v1beta1::AuthSpec {
                secret_name: Some(AUTH_SECRET.to_string()),
                reloader_image: None,
            }),
            monitoring: Some(v1beta1::MonitoringSpec::default()),
            network_policy: Some(v1beta1::NetworkPolicySpec {
                allowed_sources: Some(vec![labelled(CLIENT_LABEL, "true")]),
                metrics_sources: Some(vec![monitoring_namespace]),
            }),
            graceful_shutdown: Some(v1beta1::GracefulShutdownSpec {
                pre_stop_delay_seconds: Some(5),
                termination_grace_period_seconds: Some(30),
            }),
            ..v1beta1::MemcachedSpec::default()
        },
    )
}

/// Every object of the example, by file name, in the order they are applied.
pub fn files() -> Result<Vec<(&'static str, Value)>, serde_json::Error> {
    let issuer = |name: &str, spec: Value| {
        json!({
            "apiVersion": "cert-manager.io/v1",
            "kind": "Issuer",
            "metadata": { "name": name },
            "spec": spec,
        })
    };
    Ok(vec![
        (
            "self_signed_issuer.yaml",
            issuer(
                "memcached-production-self-signed",
                json!({ "selfSigned": {} }),
            ),
        ),
        (
            "ca_certificate.yaml",
            json!({
                "apiVersion": "cert-manager.io/v1",
                "kind": "Certificate",
                "metadata": { "name": CA_ISSUER },
                "spec": {
                    "isCA": true,
                    "commonName": CA_ISSUER,
                    "secretName": CA_ISSUER,
                    "privateKey": { "algorithm": "ECDSA", "size": 256 },
                    "issuerRef": {
                        "name": "memcached-production-self-signed",
                        "kind": "Issuer",
                        "group": "cert-manager.io",
                    },
                },
            }),
        ),
        (
            "ca_issuer.yaml",
            issuer(CA_ISSUER, json!({ "ca": { "secretName": CA_ISSUER } })),
        ),
        (
            "auth_secret.yaml",
            json!({
                "apiVersion": "v1",
                "kind": "Secret",
                "metadata": {
                    "name": AUTH_SECRET,
                    "annotations": {
                        "cache.f2367556.dev/example": "replace this password before use",
                    },
                },
                "type": "Opaque",
                "stringData": { v1beta1::AUTH_FILE_KEY: "app:example-password-replace-me\n" },
            }),
        ),
        ("memcached.yaml", serde_json::to_value(memcached())?),
    ])
}

#[cfg(test)]
mod tests {
    use super::*;
    use memcached_operator::admission::AllowedIssuers;
    use memcached_operator::admission::validate::validate_create;

    #[test]
    fn the_production_example_passes_the_crd_rules_and_the_validating_webhook() {
        let example = memcached();
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
    fn the_memcached_names_the_issuer_and_secrets_the_example_makes() {
        let files = files().expect("serializes");
        let names: Vec<&str> = files
            .iter()
            .filter_map(|(_, object)| object["metadata"]["name"].as_str())
            .collect();
        let spec = &files.last().expect("the Memcached").1["spec"];
        assert!(
            names.contains(
                &spec["tls"]["issuerRef"]["name"]
                    .as_str()
                    .expect("an issuer")
            )
        );
        assert!(names.contains(&spec["auth"]["secretName"].as_str().expect("a Secret")));
    }
}
