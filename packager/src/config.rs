//! Builds the kustomize trees under `config/` that install the operator without OLM: the CRD
//! (with its conversion webhook), RBAC (the `metrics-reader` role included), the manager
//! Deployment and its metrics Service, the webhook Service and configurations, cert-manager's
//! CA chain (a self-signed Issuer, a CA Certificate, a CA Issuer, the serving Certificate),
//! the network policies, the ServiceMonitor (`prometheus/`, left out
//! of `default/` as kubebuilder does: it needs the Prometheus Operator's CRDs), samples, and
//! `default/` tying them together.
//!
//! Every name and namespace is written out in full (no `namePrefix`), so the Service named in
//! the webhook configurations, the CRD's conversion and the Certificate's DNS names is the
//! Service that exists. The webhook configurations are shaped from `webhook::WEBHOOKS`, the
//! roles from `rbac`, the Deployment from `deployment`: nothing is spelled twice.

use std::collections::BTreeMap;

use k8s_openapi::api::admissionregistration::v1::{
    MutatingWebhook, MutatingWebhookConfiguration, RuleWithOperations, ServiceReference,
    ValidatingWebhook, ValidatingWebhookConfiguration, WebhookClientConfig,
};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{Namespace, Service, ServicePort, ServiceSpec};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use serde_json::{Value, json};

use super::bundle::crd_file_name;
use super::certificates::{
    ca_certificate, ca_injection_patch, ca_issuer, certificate, selfsigned_issuer,
};
use super::deployment;
use super::files::{Files, FilesError};
use super::images::Images;
use super::monitoring::{metrics_reader_role, metrics_service, service_monitor};
use super::network_policy;
use super::yaml::to_yaml;
use super::{production_sample, samples};
use super::{release, roles};
use memcached_operator::webhook::{self, WebhookKind};
use memcached_operator::{api, operator};

/// The namespace the operator is installed into.
pub const NAMESPACE: &str = release::SUGGESTED_NAMESPACE;
/// The webhook Service.
pub const WEBHOOK_SERVICE_NAME: &str = operator::WEBHOOK_SERVICE_NAME;
/// The serving certificate.
pub const CERTIFICATE_NAME: &str = "memcached-operator-serving-cert";
/// The Secret cert-manager writes the certificate to.
pub const CERTIFICATE_SECRET_NAME: &str = operator::CERT_MANAGER_CERT_SECRET_NAME;
/// The self-signed Issuer, which issues only the CA.
pub const ISSUER_NAME: &str = "memcached-operator-selfsigned-issuer";
/// The CA Certificate, and the Secret cert-manager writes it to.
pub const CA_CERTIFICATE_NAME: &str = "memcached-operator-ca";
/// The CA Issuer, which issues the serving certificate.
pub const CA_ISSUER_NAME: &str = "memcached-operator-ca-issuer";
/// How long the CA lives. cert-manager renews it a third of that before it expires, with the
/// same key, and the serving Secret's `ca.crt` (what cainjector writes into every caBundle)
/// keeps the CA current when the leaf was issued until the leaf's next renewal (every 60 days
/// at cert-manager's defaults): so the CA must outlive that by a margin, or a caBundle would
/// name an expired CA.
pub const CA_DURATION: &str = "8760h";
/// The ValidatingWebhookConfiguration.
pub const VALIDATING_CONFIGURATION_NAME: &str = operator::VALIDATING_CONFIGURATION_NAME;
/// The MutatingWebhookConfiguration.
pub const MUTATING_CONFIGURATION_NAME: &str = operator::MUTATING_CONFIGURATION_NAME;
/// The ClusterRole (and its binding).
pub const MANAGER_ROLE_NAME: &str = "memcached-operator-manager-role";
/// The leader-election Role (and its binding).
pub const LEADER_ELECTION_ROLE_NAME: &str = "memcached-operator-leader-election-role";
/// Where controller-runtime (and the operator) read the serving certificate.
pub const CERT_DIR: &str = "/tmp/k8s-webhook-server/serving-certs";
pub(crate) fn meta(name: &str, namespace: Option<&str>) -> ObjectMeta {
    ObjectMeta {
        name: Some(name.to_string()),
        namespace: namespace.map(str::to_string),
        labels: Some(BTreeMap::from([(
            "app.kubernetes.io/name".to_string(),
            operator::NAME.to_string(),
        )])),
        ..ObjectMeta::default()
    }
}

/// Metadata of a namespaced object that k8s-openapi has no type for.
pub(crate) fn meta_value(name: &str) -> Value {
    json!({
        "name": name,
        "namespace": NAMESPACE,
        "labels": {"app.kubernetes.io/name": operator::NAME},
    })
}

fn kustomization(resources: &[&str]) -> Value {
    json!({
        "apiVersion": "kustomize.config.k8s.io/v1beta1",
        "kind": "Kustomization",
        "resources": resources,
    })
}

/// The Service reference of a webhook at `path`.
fn service_reference(path: &str) -> ServiceReference {
    ServiceReference {
        name: WEBHOOK_SERVICE_NAME.to_string(),
        namespace: NAMESPACE.to_string(),
        path: Some(path.to_string()),
        port: Some(i32::from(operator::WEBHOOK_SERVICE_PORT)),
    }
}

fn admission_rules(entry: &webhook::Webhook) -> Vec<RuleWithOperations> {
    vec![RuleWithOperations {
        api_groups: Some(vec![api::GROUP.to_string()]),
        api_versions: Some(vec![entry.api_version.to_string()]),
        operations: Some(entry.operations.iter().map(|o| o.to_string()).collect()),
        resources: Some(vec![api::PLURAL.to_string()]),
        scope: Some("Namespaced".to_string()),
    }]
}

fn review_versions() -> Vec<String> {
    webhook::REVIEW_VERSIONS
        .iter()
        .map(|v| v.to_string())
        .collect()
}

/// The ValidatingWebhookConfiguration, from the table's validating entry.
pub fn validating_configuration() -> ValidatingWebhookConfiguration {
    let entry = webhook::webhook(WebhookKind::Validating);
    ValidatingWebhookConfiguration {
        metadata: meta(VALIDATING_CONFIGURATION_NAME, None),
        webhooks: Some(vec![ValidatingWebhook {
            name: entry.generate_name.to_string(),
            admission_review_versions: review_versions(),
            client_config: WebhookClientConfig {
                service: Some(service_reference(entry.path)),
                ..WebhookClientConfig::default()
            },
            failure_policy: Some(entry.failure_policy.to_string()),
            match_policy: Some(entry.match_policy.to_string()),
            rules: Some(admission_rules(entry)),
            side_effects: entry.side_effects.to_string(),
            timeout_seconds: Some(entry.timeout_seconds),
            ..ValidatingWebhook::default()
        }]),
    }
}

/// The MutatingWebhookConfiguration, from the table's mutating entry.
pub fn mutating_configuration() -> MutatingWebhookConfiguration {
    let entry = webhook::webhook(WebhookKind::Mutating);
    MutatingWebhookConfiguration {
        metadata: meta(MUTATING_CONFIGURATION_NAME, None),
        webhooks: Some(vec![MutatingWebhook {
            name: entry.generate_name.to_string(),
            admission_review_versions: review_versions(),
            client_config: WebhookClientConfig {
                service: Some(service_reference(entry.path)),
                ..WebhookClientConfig::default()
            },
            failure_policy: Some(entry.failure_policy.to_string()),
            match_policy: Some(entry.match_policy.to_string()),
            reinvocation_policy: Some("Never".to_string()),
            rules: Some(admission_rules(entry)),
            side_effects: entry.side_effects.to_string(),
            timeout_seconds: Some(entry.timeout_seconds),
            ..MutatingWebhook::default()
        }]),
    }
}

/// The webhook Service: 443 to the container's webhook port.
pub fn webhook_service() -> Service {
    Service {
        metadata: meta(WEBHOOK_SERVICE_NAME, Some(NAMESPACE)),
        spec: Some(ServiceSpec {
            ports: Some(vec![ServicePort {
                name: Some("https".to_string()),
                port: i32::from(operator::WEBHOOK_SERVICE_PORT),
                protocol: Some("TCP".to_string()),
                target_port: Some(IntOrString::String(
                    deployment::WEBHOOK_PORT_NAME.to_string(),
                )),
                ..ServicePort::default()
            }]),
            selector: Some(deployment::pod_labels()),
            ..ServiceSpec::default()
        }),
        ..Service::default()
    }
}

/// The patch that makes the CRD convert through the webhook.
pub fn crd_conversion_patch() -> Value {
    let conversion = webhook::webhook(WebhookKind::Conversion);
    json!({
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": api::CRD_NAME},
        "spec": {"conversion": {
            "strategy": "Webhook",
            "webhook": {
                "clientConfig": {"service": {
                    "name": WEBHOOK_SERVICE_NAME,
                    "namespace": NAMESPACE,
                    "path": conversion.path,
                    "port": operator::WEBHOOK_SERVICE_PORT,
                }},
                "conversionReviewVersions": webhook::REVIEW_VERSIONS,
            },
        }},
    })
}

/// The patch that mounts the certificate where the webhook server reads it.
pub fn manager_webhook_patch() -> Value {
    json!({
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": operator::DEPLOYMENT_NAME, "namespace": NAMESPACE},
        "spec": {"template": {"spec": {
            "containers": [{
                "name": operator::CONTAINER_NAME,
                "volumeMounts": [{"name": "cert", "mountPath": CERT_DIR, "readOnly": true}],
            }],
            "volumes": [{"name": "cert", "secret": {"secretName": CERTIFICATE_SECRET_NAME}}],
        }}},
    })
}

fn rbac_files(files: &mut Files) -> Result<(), FilesError> {
    files.yaml(
        "config/rbac/service_account.yaml",
        &roles::service_account(),
    )?;
    files.yaml("config/rbac/role.yaml", &roles::manager_role())?;
    files.yaml(
        "config/rbac/role_binding.yaml",
        &roles::manager_role_binding(),
    )?;
    files.yaml(
        "config/rbac/leader_election_role.yaml",
        &roles::leader_election_role(),
    )?;
    files.yaml(
        "config/rbac/leader_election_role_binding.yaml",
        &roles::leader_election_role_binding(),
    )?;
    files.yaml(
        "config/rbac/metrics_reader_role.yaml",
        &metrics_reader_role(),
    )?;
    files.yaml(
        "config/rbac/kustomization.yaml",
        &kustomization(&[
            "service_account.yaml",
            "role.yaml",
            "role_binding.yaml",
            "leader_election_role.yaml",
            "leader_election_role_binding.yaml",
            "metrics_reader_role.yaml",
        ]),
    )
}

fn manager_files(files: &mut Files, images: &Images) -> Result<(), FilesError> {
    files.yaml(
        "config/manager/namespace.yaml",
        &Namespace {
            metadata: ObjectMeta {
                labels: Some(BTreeMap::from([
                    (
                        "app.kubernetes.io/name".to_string(),
                        operator::NAME.to_string(),
                    ),
                    // The operator's pods meet the restricted Pod Security Standard.
                    (
                        "pod-security.kubernetes.io/enforce".to_string(),
                        "restricted".to_string(),
                    ),
                ])),
                ..meta(NAMESPACE, None)
            },
            ..Namespace::default()
        },
    )?;
    files.yaml(
        "config/manager/manager.yaml",
        &Deployment {
            metadata: ObjectMeta {
                labels: Some(deployment::pod_labels()),
                ..meta(operator::DEPLOYMENT_NAME, Some(NAMESPACE))
            },
            spec: Some(deployment::spec(images)),
            ..Deployment::default()
        },
    )?;
    files.yaml(
        "config/manager/metrics_service.yaml",
        &metrics_service(Some(NAMESPACE)),
    )?;
    files.yaml(
        "config/manager/kustomization.yaml",
        &kustomization(&["namespace.yaml", "manager.yaml", "metrics_service.yaml"]),
    )
}

/// Renders `config/` for these objects.
pub fn files(crd: &CustomResourceDefinition, images: &Images) -> Result<Files, FilesError> {
    let mut files = Files::new();

    let crd_file = format!("bases/{}", crd_file_name());
    files.yaml(&format!("config/crd/{crd_file}"), crd)?;
    files.yaml(
        "config/crd/patches/webhook_in_memcacheds.yaml",
        &crd_conversion_patch(),
    )?;
    let mut crd_kustomization = kustomization(&[crd_file.as_str()]);
    crd_kustomization["patches"] = json!([{"path": "patches/webhook_in_memcacheds.yaml"}]);
    files.yaml("config/crd/kustomization.yaml", &crd_kustomization)?;

    rbac_files(&mut files)?;
    manager_files(&mut files, images)?;

    files.yaml("config/webhook/service.yaml", &webhook_service())?;
    files.yaml(
        "config/webhook/validating.yaml",
        &validating_configuration(),
    )?;
    files.yaml("config/webhook/mutating.yaml", &mutating_configuration())?;
    files.yaml(
        "config/webhook/kustomization.yaml",
        &kustomization(&["service.yaml", "validating.yaml", "mutating.yaml"]),
    )?;

    files.yaml(
        "config/prometheus/monitor.yaml",
        &service_monitor(Some(NAMESPACE)),
    )?;
    files.yaml(
        "config/prometheus/kustomization.yaml",
        &kustomization(&["monitor.yaml"]),
    )?;

    let [metrics_policy, webhook_policy] = network_policy::all(Some(NAMESPACE));
    files.yaml(
        "config/network-policy/allow-metrics-traffic.yaml",
        &metrics_policy,
    )?;
    files.yaml(
        "config/network-policy/allow-webhook-traffic.yaml",
        &webhook_policy,
    )?;
    files.yaml(
        "config/network-policy/kustomization.yaml",
        &kustomization(&["allow-metrics-traffic.yaml", "allow-webhook-traffic.yaml"]),
    )?;

    files.yaml("config/certmanager/issuer.yaml", &selfsigned_issuer())?;
    files.yaml("config/certmanager/ca.yaml", &ca_certificate())?;
    files.yaml("config/certmanager/ca_issuer.yaml", &ca_issuer())?;
    files.yaml("config/certmanager/certificate.yaml", &certificate())?;
    files.yaml(
        "config/certmanager/inject_ca_crd.yaml",
        &ca_injection_patch(
            "apiextensions.k8s.io/v1",
            "CustomResourceDefinition",
            api::CRD_NAME,
        ),
    )?;
    files.yaml(
        "config/certmanager/inject_ca_validating.yaml",
        &ca_injection_patch(
            "admissionregistration.k8s.io/v1",
            "ValidatingWebhookConfiguration",
            VALIDATING_CONFIGURATION_NAME,
        ),
    )?;
    files.yaml(
        "config/certmanager/inject_ca_mutating.yaml",
        &ca_injection_patch(
            "admissionregistration.k8s.io/v1",
            "MutatingWebhookConfiguration",
            MUTATING_CONFIGURATION_NAME,
        ),
    )?;
    // A Component, so that its patches reach the CRD and webhook configurations of the
    // kustomization that uses it.
    files.yaml(
        "config/certmanager/kustomization.yaml",
        &json!({
            "apiVersion": "kustomize.config.k8s.io/v1alpha1",
            "kind": "Component",
            "resources": ["issuer.yaml", "ca.yaml", "ca_issuer.yaml", "certificate.yaml"],
            "patches": [
                {"path": "inject_ca_crd.yaml"},
                {"path": "inject_ca_validating.yaml"},
                {"path": "inject_ca_mutating.yaml"},
            ],
        }),
    )?;

    let mut sample_files = Vec::new();
    for (version, example) in samples::all().map_err(|e| FilesError::Render {
        path: "config/samples".to_string(),
        source: e.into(),
    })? {
        let name = format!("cache_{version}_memcached.yaml");
        files.yaml(&format!("config/samples/{name}"), &example)?;
        sample_files.push(name);
    }
    let sample_refs: Vec<&str> = sample_files.iter().map(String::as_str).collect();
    files.yaml(
        "config/samples/kustomization.yaml",
        &kustomization(&sample_refs),
    )?;
    // The production example, apart: it needs cert-manager's API.
    let production = production_sample::files().map_err(|e| FilesError::Render {
        path: "config/samples/production".to_string(),
        source: e.into(),
    })?;
    for (name, object) in &production {
        files.yaml(&format!("config/samples/production/{name}"), object)?;
    }
    files.text(
        &format!(
            "config/samples/production/{}",
            production_sample::AUTH_SECRET_SCRIPT
        ),
        production_sample::auth_secret_script(),
    )?;
    let production_refs: Vec<&str> = production.iter().map(|(name, _)| *name).collect();
    files.yaml(
        "config/samples/production/kustomization.yaml",
        &kustomization(&production_refs),
    )?;

    files.yaml(
        "config/default/manager_webhook_patch.yaml",
        &manager_webhook_patch(),
    )?;
    let mut default = kustomization(&[
        "../crd",
        "../rbac",
        "../manager",
        "../webhook",
        "../network-policy",
    ]);
    default["namespace"] = json!(NAMESPACE);
    default["components"] = json!(["../certmanager"]);
    default["patches"] = json!([{"path": "manager_webhook_patch.yaml"}]);
    let path = "config/default/kustomization.yaml";
    let default = to_yaml(&default).map_err(|source| FilesError::Render {
        path: path.to_string(),
        source,
    })?;
    files.text(
        path,
        format!(
            "{default}# ../prometheus (the ServiceMonitor) needs the Prometheus Operator's CRDs: add it\n\
             # to resources where they are installed.\n"
        ),
    )?;
    Ok(files)
}
