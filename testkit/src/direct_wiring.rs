//! Wires the local control plane's API server to an operator process that a test runs and
//! controls on this machine (stops, restarts, hands other certificates): the webhook objects
//! OLM creates from the CSV's `webhookdefinitions`, with a URL client configuration instead of
//! OLM's Service reference. The install path itself is proven by the real OLM
//! ([`crate::olm_install`]); this exists for the scenarios that break the operator's process
//! or certificates on purpose, which an OLM-managed Deployment would not let them do.
//!
//! Per description OLM creates one Validating/MutatingWebhookConfiguration named from
//! `generateName`, labelled with its owner and the description, holding one webhook named
//! `generateName` whose rules, policies and review versions are copied as written; a conversion
//! description overwrites `spec.conversion` of each listed CRD. [`Endpoint::Service`] produces
//! OLM's Service reference, for comparison with what OLM itself wrote.

use std::collections::BTreeMap;

use k8s_openapi::ByteString;
use k8s_openapi::api::admissionregistration::v1::{
    MutatingWebhook, MutatingWebhookConfiguration, ServiceReference, ValidatingWebhook,
    ValidatingWebhookConfiguration, WebhookClientConfig,
};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::{
    CustomResourceConversion, CustomResourceDefinition, ServiceReference as CrdServiceReference,
    WebhookClientConfig as CrdWebhookClientConfig, WebhookConversion,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::{Api, ListParams, Patch, PatchParams, PostParams};
use kube::{Client, ResourceExt};
use serde_json::Value;
use sha2::{Digest, Sha256};
use thiserror::Error;

use memcached_operator::operator;
use memcached_packager::csv::{WebhookDescription, webhook_type};

/// The label naming the description a configuration came from (OLM's `WebhookDescKey`).
pub const DESCRIPTION_LABEL: &str = "olm.webhook-description-generate-name";
/// The label holding a hash of the description (OLM's `WebhookHashKey`).
pub const DESCRIPTION_HASH_LABEL: &str = "olm.webhook-description-hash";

/// Where the API server reaches the webhooks.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Endpoint {
    /// `https://host:port`, followed by each description's webhookPath.
    Url(String),
    /// OLM's own choice: the Service `<deploymentName>-service` in the CSV's namespace.
    Service,
}

/// Why the wiring could not be built or applied.
#[derive(Debug, Error)]
pub enum WiringError {
    /// The CSV lacks something the wiring needs.
    #[error("CSV: {0}")]
    Csv(String),
    /// A webhook description does not read as OLM's WebhookDescription.
    #[error("CSV spec.webhookdefinitions[{index}]: {reason}")]
    Description {
        /// Its position.
        index: usize,
        /// The decoder's message.
        reason: String,
    },
    /// A call to the API server failed.
    #[error("{action}: {source}")]
    Api {
        /// What was being done.
        action: String,
        /// The client's error.
        #[source]
        source: kube::Error,
    },
}

/// OLM's Service name for a description: the deployment name with dots as dashes, then
/// `-service`.
pub fn service_name(description: &WebhookDescription) -> String {
    format!("{}-service", description.deployment_name.replace('.', "-"))
}

/// OLM's Service port for a description: `containerPort`, or 443 when it is 0 or unset.
fn service_port(description: &WebhookDescription) -> i32 {
    match description.container_port {
        Some(port) if port != 0 => port,
        _ => i32::from(operator::WEBHOOK_SERVICE_PORT),
    }
}

/// A short, stable digest of a description, for the description-hash label.
fn description_hash(description: &WebhookDescription) -> String {
    let json = serde_json::to_vec(description).unwrap_or_default();
    Sha256::digest(&json)
        .iter()
        .take(6)
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// The objects OLM would create or change for a CSV.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Wiring {
    /// One per mutating description.
    pub mutating: Vec<MutatingWebhookConfiguration>,
    /// One per validating description.
    pub validating: Vec<ValidatingWebhookConfiguration>,
    /// `spec.conversion` for each CRD named by a conversion description.
    pub conversions: Vec<(String, CustomResourceConversion)>,
}

/// Builds the wiring for `csv` (the CSV as JSON) installed in `namespace`.
pub fn wiring(
    csv: &Value,
    namespace: &str,
    endpoint: &Endpoint,
    ca_bundle: &[u8],
) -> Result<Wiring, WiringError> {
    let csv_name = csv
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .ok_or_else(|| WiringError::Csv("metadata.name is missing".into()))?;
    let descriptions = csv
        .pointer("/spec/webhookdefinitions")
        .and_then(Value::as_array)
        .ok_or_else(|| WiringError::Csv("spec.webhookdefinitions is missing".into()))?;
    let mut wiring = Wiring::default();
    for (index, raw) in descriptions.iter().enumerate() {
        let description: WebhookDescription =
            serde_json::from_value(raw.clone()).map_err(|e| WiringError::Description {
                index,
                reason: e.to_string(),
            })?;
        let labels = BTreeMap::from([
            ("olm.owner".to_string(), csv_name.to_string()),
            ("olm.owner.namespace".to_string(), namespace.to_string()),
            (
                "olm.owner.kind".to_string(),
                "ClusterServiceVersion".to_string(),
            ),
            (
                DESCRIPTION_LABEL.to_string(),
                description.generate_name.clone(),
            ),
            (
                DESCRIPTION_HASH_LABEL.to_string(),
                description_hash(&description),
            ),
        ]);
        let metadata = ObjectMeta {
            generate_name: Some(format!("{}-", description.generate_name)),
            labels: Some(labels),
            ..ObjectMeta::default()
        };
        let client_config = admission_client_config(&description, namespace, endpoint, ca_bundle);
        let rules = (!description.rules.is_empty()).then(|| description.rules.clone());
        match description.kind.as_str() {
            webhook_type::VALIDATING => wiring.validating.push(ValidatingWebhookConfiguration {
                metadata,
                webhooks: Some(vec![ValidatingWebhook {
                    name: description.generate_name.clone(),
                    rules: rules.clone(),
                    failure_policy: description.failure_policy.clone(),
                    match_policy: description.match_policy.clone(),
                    object_selector: description.object_selector.clone(),
                    side_effects: description.side_effects.clone().unwrap_or_default(),
                    timeout_seconds: description.timeout_seconds,
                    admission_review_versions: description.admission_review_versions.clone(),
                    client_config,
                    ..ValidatingWebhook::default()
                }]),
            }),
            webhook_type::MUTATING => wiring.mutating.push(MutatingWebhookConfiguration {
                metadata,
                webhooks: Some(vec![MutatingWebhook {
                    name: description.generate_name.clone(),
                    rules: rules.clone(),
                    failure_policy: description.failure_policy.clone(),
                    match_policy: description.match_policy.clone(),
                    object_selector: description.object_selector.clone(),
                    side_effects: description.side_effects.clone().unwrap_or_default(),
                    timeout_seconds: description.timeout_seconds,
                    admission_review_versions: description.admission_review_versions.clone(),
                    reinvocation_policy: description.reinvocation_policy.clone(),
                    client_config,
                    ..MutatingWebhook::default()
                }]),
            }),
            webhook_type::CONVERSION => {
                let path = description
                    .webhook_path
                    .clone()
                    .unwrap_or_else(|| "/".into());
                let client_config = match endpoint {
                    Endpoint::Url(base) => CrdWebhookClientConfig {
                        url: Some(format!("{base}{path}")),
                        ca_bundle: Some(ByteString(ca_bundle.to_vec())),
                        service: None,
                    },
                    Endpoint::Service => CrdWebhookClientConfig {
                        service: Some(CrdServiceReference {
                            name: service_name(&description),
                            namespace: namespace.into(),
                            path: Some(path),
                            port: Some(service_port(&description)),
                        }),
                        ca_bundle: Some(ByteString(ca_bundle.to_vec())),
                        url: None,
                    },
                };
                for crd in &description.conversion_crds {
                    wiring.conversions.push((
                        crd.clone(),
                        CustomResourceConversion {
                            strategy: "Webhook".into(),
                            webhook: Some(WebhookConversion {
                                client_config: Some(client_config.clone()),
                                conversion_review_versions: description
                                    .admission_review_versions
                                    .clone(),
                            }),
                        },
                    ));
                }
            }
            other => {
                return Err(WiringError::Description {
                    index,
                    reason: format!("unknown type {other:?}"),
                });
            }
        }
    }
    Ok(wiring)
}

fn admission_client_config(
    description: &WebhookDescription,
    namespace: &str,
    endpoint: &Endpoint,
    ca_bundle: &[u8],
) -> WebhookClientConfig {
    let ca_bundle = Some(ByteString(ca_bundle.to_vec()));
    match endpoint {
        Endpoint::Url(base) => WebhookClientConfig {
            url: Some(format!(
                "{base}{}",
                description.webhook_path.as_deref().unwrap_or_default()
            )),
            ca_bundle,
            service: None,
        },
        Endpoint::Service => WebhookClientConfig {
            service: Some(ServiceReference {
                name: service_name(description),
                namespace: namespace.into(),
                path: description.webhook_path.clone(),
                port: Some(service_port(description)),
            }),
            ca_bundle,
            url: None,
        },
    }
}

fn api_error(action: impl Into<String>) -> impl FnOnce(kube::Error) -> WiringError {
    let action = action.into();
    move |source| WiringError::Api { action, source }
}

/// Creates or updates the wiring's objects as OLM does: configurations are found by their
/// owner and description labels, created with generateName when absent and updated when
/// present; each CRD's `spec.conversion` is overwritten.
pub async fn apply(client: &Client, wiring: &Wiring) -> Result<(), WiringError> {
    let mutating: Api<MutatingWebhookConfiguration> = Api::all(client.clone());
    for desired in &wiring.mutating {
        upsert(&mutating, desired).await?;
    }
    let validating: Api<ValidatingWebhookConfiguration> = Api::all(client.clone());
    for desired in &wiring.validating {
        upsert(&validating, desired).await?;
    }
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    for (name, conversion) in &wiring.conversions {
        let patch = serde_json::json!({ "spec": { "conversion": conversion } });
        crds.patch(name, &PatchParams::default(), &Patch::Merge(&patch))
            .await
            .map_err(api_error(format!("set spec.conversion of CRD {name}")))?;
    }
    Ok(())
}

async fn upsert<K>(api: &Api<K>, desired: &K) -> Result<(), WiringError>
where
    K: kube::Resource<DynamicType = ()>
        + Clone
        + serde::Serialize
        + serde::de::DeserializeOwned
        + std::fmt::Debug,
{
    let labels = desired.labels();
    let selector = [
        "olm.owner",
        "olm.owner.namespace",
        "olm.owner.kind",
        DESCRIPTION_LABEL,
    ]
    .iter()
    .filter_map(|key| labels.get(*key).map(|value| format!("{key}={value}")))
    .collect::<Vec<_>>()
    .join(",");
    let kind = K::kind(&());
    let existing = api
        .list(&ListParams::default().labels(&selector))
        .await
        .map_err(api_error(format!("list {kind} with {selector}")))?;
    if existing.items.is_empty() {
        api.create(&PostParams::default(), desired)
            .await
            .map_err(api_error(format!("create {kind} {selector}")))?;
        return Ok(());
    }
    for live in existing.items {
        let mut updated = desired.clone();
        let metadata = updated.meta_mut();
        metadata.name = live.meta().name.clone();
        metadata.generate_name = live.meta().generate_name.clone();
        metadata.resource_version = live.meta().resource_version.clone();
        api.replace(&live.name_any(), &PostParams::default(), &updated)
            .await
            .map_err(api_error(format!("update {kind} {}", live.name_any())))?;
    }
    Ok(())
}

/// What [`install`] installs, and where the webhooks are.
#[derive(Clone, Debug)]
pub struct InstallArgs {
    /// The bundle's manifests directory: its CRDs are applied and its CSV wired.
    pub bundle: std::path::PathBuf,
    /// Where the API server reaches the webhooks, e.g. `https://127.0.0.1:9443`.
    pub url: String,
    /// PEM file with the CA that signed the webhooks' serving certificate.
    pub ca_file: std::path::PathBuf,
    /// The namespace the operator is installed in (for OLM's owner labels).
    pub namespace: String,
}

/// Installs a bundle as far as the API server is concerned: applies its CRDs, then creates the
/// webhook configurations and CRD conversion OLM would, calling the webhooks at `--url`.
pub async fn install(args: &InstallArgs, client: &Client) -> Result<Wiring, WiringError> {
    let ca_bundle = std::fs::read(&args.ca_file).map_err(|e| {
        WiringError::Csv(format!(
            "cannot read the CA file {}: {e}",
            args.ca_file.display()
        ))
    })?;
    let mut csv = None;
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    let mut entries: Vec<_> = std::fs::read_dir(&args.bundle)
        .map_err(|e| WiringError::Csv(format!("cannot read {}: {e}", args.bundle.display())))?
        .filter_map(Result::ok)
        .map(|entry| entry.path())
        .collect();
    entries.sort();
    for path in entries {
        let text = std::fs::read_to_string(&path)
            .map_err(|e| WiringError::Csv(format!("cannot read {}: {e}", path.display())))?;
        let documents = memcached_packager::yaml::documents(&text)
            .map_err(|e| WiringError::Csv(format!("{}: {e}", path.display())))?;
        for document in documents {
            match document.get("kind").and_then(Value::as_str) {
                Some("ClusterServiceVersion") => csv = Some(document),
                Some("CustomResourceDefinition") => {
                    let crd: CustomResourceDefinition = serde_json::from_value(document)
                        .map_err(|e| WiringError::Csv(format!("{}: {e}", path.display())))?;
                    let name = crd.name_any();
                    crds.patch(
                        &name,
                        &PatchParams::apply(operator::NAME).force(),
                        &Patch::Apply(&crd),
                    )
                    .await
                    .map_err(api_error(format!("apply CRD {name}")))?;
                }
                _ => {}
            }
        }
    }
    let csv = csv.ok_or_else(|| {
        WiringError::Csv(format!(
            "no ClusterServiceVersion in {}",
            args.bundle.display()
        ))
    })?;
    let wiring = wiring(
        &csv,
        &args.namespace,
        &Endpoint::Url(args.url.clone()),
        &ca_bundle,
    )?;
    apply(client, &wiring).await?;
    Ok(wiring)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn csv() -> Value {
        json!({
            "metadata": {"name": "memcached-operator.v0.1.0"},
            "spec": {"webhookdefinitions": [
                {"type": "ValidatingAdmissionWebhook", "generateName": "vmemcached.example.dev",
                 "deploymentName": "op.manager", "containerPort": 443, "targetPort": 9443,
                 "webhookPath": "/validate", "sideEffects": "None", "failurePolicy": "Fail",
                 "matchPolicy": "Equivalent", "timeoutSeconds": 10, "admissionReviewVersions": ["v1"],
                 "rules": [{"apiGroups": ["cache.example.dev"], "apiVersions": ["v1"], "operations": ["CREATE"], "resources": ["memcacheds"]}]},
                {"type": "MutatingAdmissionWebhook", "generateName": "mmemcached.example.dev",
                 "deploymentName": "op.manager", "webhookPath": "/mutate", "sideEffects": "None",
                 "admissionReviewVersions": ["v1"], "reinvocationPolicy": "IfNeeded"},
                {"type": "ConversionWebhook", "generateName": "cmemcached.example.dev",
                 "deploymentName": "op.manager", "containerPort": 443, "sideEffects": "None",
                 "admissionReviewVersions": ["v1"], "conversionCRDs": ["memcacheds.example.dev"]}
            ]}
        })
    }

    #[test]
    fn configurations_are_named_and_labelled_as_olm_names_and_labels_them() {
        let wiring = wiring(&csv(), "operators", &Endpoint::Service, b"CA").expect("wires");
        let validating = &wiring.validating[0];
        assert_eq!(
            validating.metadata.generate_name.as_deref(),
            Some("vmemcached.example.dev-")
        );
        let labels = validating.metadata.labels.clone().unwrap_or_default();
        assert_eq!(labels["olm.owner"], "memcached-operator.v0.1.0");
        assert_eq!(labels["olm.owner.namespace"], "operators");
        assert_eq!(labels["olm.owner.kind"], "ClusterServiceVersion");
        assert_eq!(labels[DESCRIPTION_LABEL], "vmemcached.example.dev");
        let webhook = &validating.webhooks.as_ref().expect("webhooks")[0];
        assert_eq!(webhook.name, "vmemcached.example.dev");
        assert_eq!(webhook.failure_policy.as_deref(), Some("Fail"));
        assert_eq!(webhook.match_policy.as_deref(), Some("Equivalent"));
        assert_eq!(webhook.timeout_seconds, Some(10));
        assert_eq!(
            webhook.namespace_selector, None,
            "AllNamespaces: no selector"
        );
        let service = webhook
            .client_config
            .service
            .as_ref()
            .expect("a service reference");
        assert_eq!(
            (
                service.name.as_str(),
                service.namespace.as_str(),
                service.path.as_deref(),
                service.port
            ),
            (
                "op-manager-service",
                "operators",
                Some("/validate"),
                Some(443)
            )
        );
        assert_eq!(
            webhook.client_config.ca_bundle,
            Some(ByteString(b"CA".to_vec()))
        );
        let mutating = &wiring.mutating[0].webhooks.as_ref().expect("webhooks")[0];
        assert_eq!(mutating.reinvocation_policy.as_deref(), Some("IfNeeded"));
        assert_eq!(
            mutating.client_config.service.as_ref().and_then(|s| s.port),
            Some(443),
            "0/unset means 443"
        );
    }

    #[test]
    fn a_url_endpoint_replaces_only_the_service_reference() {
        let wiring = wiring(
            &csv(),
            "operators",
            &Endpoint::Url("https://127.0.0.1:19443".into()),
            b"CA",
        )
        .expect("wires");
        let webhook = &wiring.validating[0].webhooks.as_ref().expect("webhooks")[0];
        assert_eq!(
            webhook.client_config.url.as_deref(),
            Some("https://127.0.0.1:19443/validate")
        );
        assert_eq!(webhook.client_config.service, None);
        let (crd, conversion) = &wiring.conversions[0];
        assert_eq!(crd, "memcacheds.example.dev");
        let webhook = conversion.webhook.as_ref().expect("a webhook conversion");
        assert_eq!(
            webhook
                .client_config
                .as_ref()
                .and_then(|c| c.url.as_deref()),
            Some("https://127.0.0.1:19443/"),
            "no webhookPath: OLM uses /"
        );
        assert_eq!(webhook.conversion_review_versions, vec!["v1".to_string()]);
        assert_eq!(conversion.strategy, "Webhook");
    }

    #[test]
    fn a_description_of_unknown_type_is_refused_by_position() {
        let mut csv = csv();
        csv["spec"]["webhookdefinitions"][1]["type"] = json!("AuditWebhook");
        let error = wiring(&csv, "ns", &Endpoint::Service, b"").expect_err("unknown type");
        assert_eq!(
            error.to_string(),
            "CSV spec.webhookdefinitions[1]: unknown type \"AuditWebhook\""
        );
    }

    #[test]
    fn a_csv_without_webhooks_is_refused() {
        let error = wiring(
            &json!({"metadata": {"name": "x"}, "spec": {}}),
            "ns",
            &Endpoint::Service,
            b"",
        )
        .expect_err("no definitions");
        assert_eq!(error.to_string(), "CSV: spec.webhookdefinitions is missing");
    }
}
