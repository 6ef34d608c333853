//! Builds the production example, `config/samples/production/`: a Memcached as a production
//! team would run it, with what it needs beside it. TLS from a cert-manager CA issuer (a
//! self-signed issuer, the CA certificate it issues, and the CA issuer the Memcached names),
//! client credentials from a Secret, memcached_exporter's metrics, a NetworkPolicy, a graceful
//! shutdown and warm restarts. It needs cert-manager; `make run` starts it before the operator.
//!
//! The credentials Secret is not part of it, so that no password is ever shipped and served:
//! [`auth_secret_script`] (`config/samples/production/create-auth-secret.sh`, which `make run`
//! runs) makes one with a random password, and until it exists the servers wait for it.

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
/// Where the script that makes the credentials Secret is written.
pub const AUTH_SECRET_SCRIPT: &str = "create-auth-secret.sh";

/// A POSIX shell script that creates the credentials Secret in the current namespace unless it
/// exists, with a random password: one line `app:<48 hex digits>` and its newline, as
/// memcached's auth file wants it (`KUBECTL` names the kubectl to run).
pub fn auth_secret_script() -> String {
    let key = v1beta1::AUTH_FILE_KEY;
    format!(
        "#!/bin/sh\n\
         # Creates the Secret {AUTH_SECRET}, whose {key} key memcached-production's servers\n\
         # read their credentials from, with a random password, unless it exists. The example\n\
         # ships no password. Read it back with:\n\
         #   kubectl get secret {AUTH_SECRET} -o jsonpath='{{.data.{key}}}' | base64 -d\n\
         # Written by memcached-packager generate.\n\
         set -eu\n\
         kubectl=\"${{KUBECTL:-kubectl}}\"\n\
         if \"$kubectl\" get secret {AUTH_SECRET} >/dev/null 2>&1; then\n\
         \x20 echo \"secret/{AUTH_SECRET} exists: kept\"\n\
         \x20 exit 0\n\
         fi\n\
         printf 'app:%s\\n' \"$(openssl rand -hex 24)\" |\n\
         \x20 \"$kubectl\" create secret generic {AUTH_SECRET} --from-file={key}=/dev/stdin\n"
    )
}

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
        assert_eq!(spec["auth"]["secretName"], AUTH_SECRET);
    }

    #[test]
    fn no_password_is_shipped_and_the_command_that_makes_one_names_the_secret() {
        let files = files().expect("serializes");
        assert!(
            files.iter().all(|(_, object)| object["kind"] != "Secret"),
            "the example ships no Secret"
        );
        let script = auth_secret_script();
        assert!(script.starts_with("#!/bin/sh\n"), "{script}");
        assert!(
            script.contains(&format!(
                "create secret generic {AUTH_SECRET} --from-file={}=/dev/stdin",
                v1beta1::AUTH_FILE_KEY
            )),
            "{script}"
        );
        assert!(script.contains("openssl rand -hex 24"), "{script}");
    }
}
