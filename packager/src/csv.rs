//! Models OLM's ClusterServiceVersion as plain serde structs, with the field names of
//! operator-framework/api's `operators/v1alpha1` types.
//!
//! Only what this project writes or checks is modelled; unknown fields are ignored when a CSV
//! is read, so `check-bundle` can read any operator's bundle. Missing lists read as empty.
//! Building the operator's own CSV is `bundle`'s job; this module only says what a CSV
//! is.

use std::collections::BTreeMap;

use k8s_openapi::api::admissionregistration::v1::RuleWithOperations;
use k8s_openapi::api::apps::v1::DeploymentSpec;
use k8s_openapi::api::rbac::v1::PolicyRule;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use serde::{Deserialize, Serialize};

/// The CSV's `apiVersion`.
pub const API_VERSION: &str = "operators.coreos.com/v1alpha1";
/// The CSV's `kind`.
pub const KIND: &str = "ClusterServiceVersion";

/// A ClusterServiceVersion.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ClusterServiceVersion {
    /// `operators.coreos.com/v1alpha1`.
    pub api_version: String,
    /// `ClusterServiceVersion`.
    pub kind: String,
    /// Name (`<package>.v<version>`) and annotations.
    #[serde(default)]
    pub metadata: ObjectMeta,
    /// What is installed, how, and what it provides.
    #[serde(default)]
    pub spec: CsvSpec,
}

/// `spec` of a ClusterServiceVersion.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct CsvSpec {
    /// Name shown in consoles.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub display_name: String,
    /// Markdown description.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub description: String,
    /// Exactly one icon for OperatorHub.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub icon: Vec<Icon>,
    /// Search keywords.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub keywords: Vec<String>,
    /// Links to documentation and source.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub links: Vec<Link>,
    /// Maintainers, each with a name and an email address.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub maintainers: Vec<Maintainer>,
    /// Who provides the operator.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub provider: Option<Provider>,
    /// alpha, beta, stable...
    #[serde(skip_serializing_if = "String::is_empty")]
    pub maturity: String,
    /// Semantic version of the operator.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub version: String,
    /// The CSV this one upgrades from.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub replaces: Option<String>,
    /// CSVs this one may skip.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub skips: Vec<String>,
    /// The oldest Kubernetes it runs on.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub min_kube_version: Option<String>,
    /// Which OperatorGroup shapes it supports.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub install_modes: Vec<InstallMode>,
    /// How it is installed.
    pub install: NamedInstallStrategy,
    /// CRDs it owns and requires.
    pub customresourcedefinitions: CustomResourceDefinitions,
    /// API services it serves (this operator serves none; read from other bundles).
    #[serde(skip_serializing_if = "ApiServiceDefinitions::is_empty")]
    pub apiservicedefinitions: ApiServiceDefinitions,
    /// Webhooks OLM creates for it.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub webhookdefinitions: Vec<WebhookDescription>,
    /// Images it uses, for disconnected mirroring.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub related_images: Vec<RelatedImage>,
    /// Labels of the CSV's resources.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub labels: BTreeMap<String, String>,
    /// Selector of the CSV's resources.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub selector: Option<LabelSelector>,
}

/// An icon, base64-encoded.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct Icon {
    /// The image, base64.
    pub base64data: String,
    /// `image/svg+xml`, `image/png`...
    pub mediatype: String,
}

/// A named link.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct Link {
    /// What it points at.
    pub name: String,
    /// Where.
    pub url: String,
}

/// A maintainer.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct Maintainer {
    /// A person or team.
    pub name: String,
    /// How to reach them.
    pub email: String,
}

/// The provider.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct Provider {
    /// Name.
    pub name: String,
    /// Home page.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
}

/// Whether an install mode is supported.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct InstallMode {
    /// OwnNamespace, SingleNamespace, MultiNamespace or AllNamespaces.
    #[serde(rename = "type")]
    pub mode: String,
    /// Whether it is supported.
    pub supported: bool,
}

/// The install mode a conversion webhook requires.
pub const ALL_NAMESPACES: &str = "AllNamespaces";

/// `spec.install`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct NamedInstallStrategy {
    /// Always `deployment`.
    pub strategy: String,
    /// The deployments and their permissions.
    pub spec: StrategyDetailsDeployment,
}

/// `spec.install.spec`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct StrategyDetailsDeployment {
    /// Deployments OLM creates.
    pub deployments: Vec<DeploymentSpecNamed>,
    /// Namespaced permissions (a Role in the operator's namespace).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub permissions: Vec<StrategyDeploymentPermissions>,
    /// Cluster-wide permissions (a ClusterRole).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub cluster_permissions: Vec<StrategyDeploymentPermissions>,
}

/// A Deployment OLM creates.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct DeploymentSpecNamed {
    /// Its name; webhook descriptions refer to it.
    pub name: String,
    /// Labels OLM puts on it.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub label: BTreeMap<String, String>,
    /// The Deployment's spec.
    pub spec: DeploymentSpec,
}

/// Rules granted to a service account.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct StrategyDeploymentPermissions {
    /// The ServiceAccount OLM creates and binds.
    pub service_account_name: String,
    /// The rules.
    pub rules: Vec<PolicyRule>,
}

/// `spec.customresourcedefinitions`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct CustomResourceDefinitions {
    /// CRDs the operator provides, one entry per served version.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub owned: Vec<CrdDescription>,
    /// CRDs it needs from others.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub required: Vec<CrdDescription>,
}

/// The aggregated API services a CSV owns and requires.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct ApiServiceDefinitions {
    /// API services the operator serves.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub owned: Vec<ApiServiceDescription>,
    /// API services it needs from others.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub required: Vec<ApiServiceDescription>,
}

impl ApiServiceDefinitions {
    /// Whether it lists none.
    pub fn is_empty(&self) -> bool {
        self.owned.is_empty() && self.required.is_empty()
    }
}

/// One aggregated API service (as much of it as the checks read).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct ApiServiceDescription {
    /// `<version>.<group>`.
    pub name: String,
    /// Its group.
    pub group: String,
    /// Its version.
    pub version: String,
    /// The Deployment that serves it.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub deployment_name: String,
}

/// One version of an owned or required CRD, and how a console shows it.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct CrdDescription {
    /// `<plural>.<group>`.
    pub name: String,
    /// The version described.
    pub version: String,
    /// The kind.
    pub kind: String,
    /// Name shown in consoles.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub display_name: String,
    /// What it is.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub description: String,
    /// Kinds the operator creates for each object.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub resources: Vec<ApiResourceReference>,
    /// Form fields of `spec`.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub spec_descriptors: Vec<Descriptor>,
    /// Displayed fields of `status`.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub status_descriptors: Vec<Descriptor>,
}

/// A kind created for each object.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct ApiResourceReference {
    /// Kind.
    pub kind: String,
    /// Resource name, or empty.
    pub name: String,
    /// Version.
    pub version: String,
}

/// How a console shows one field.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct Descriptor {
    /// Dotted path below `spec` or `status`.
    pub path: String,
    /// Label.
    pub display_name: String,
    /// Help text.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub description: String,
    /// `urn:alm:descriptor:...` widgets.
    #[serde(rename = "x-descriptors", skip_serializing_if = "Vec::is_empty")]
    pub x_descriptors: Vec<String>,
}

/// One of `spec.webhookdefinitions`: a webhook OLM creates, serves certificates for and points
/// at a Deployment.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct WebhookDescription {
    /// ValidatingAdmissionWebhook, MutatingAdmissionWebhook or ConversionWebhook.
    #[serde(rename = "type")]
    pub kind: String,
    /// The webhook's name; unique in the CSV.
    pub generate_name: String,
    /// The Deployment that serves it.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub deployment_name: String,
    /// The port of OLM's Service (443 when unset).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub container_port: Option<i32>,
    /// The container port the Service forwards to.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub target_port: Option<IntOrString>,
    /// Admission rules (admission webhooks only).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub rules: Vec<RuleWithOperations>,
    /// Fail or Ignore.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub failure_policy: Option<String>,
    /// Exact or Equivalent.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub match_policy: Option<String>,
    /// Objects it applies to.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub object_selector: Option<LabelSelector>,
    /// None, NoneOnDryRun, Some or Unknown.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub side_effects: Option<String>,
    /// Call timeout.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub timeout_seconds: Option<i32>,
    /// AdmissionReview (or ConversionReview) versions it speaks.
    pub admission_review_versions: Vec<String>,
    /// Never or IfNeeded (mutating only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reinvocation_policy: Option<String>,
    /// URL path the API server calls.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub webhook_path: Option<String>,
    /// CRDs whose conversion it serves (conversion only).
    #[serde(rename = "conversionCRDs", skip_serializing_if = "Vec::is_empty")]
    pub conversion_crds: Vec<String>,
}

/// The `type` of each webhook description.
pub mod webhook_type {
    /// A validating admission webhook.
    pub const VALIDATING: &str = "ValidatingAdmissionWebhook";
    /// A mutating admission webhook.
    pub const MUTATING: &str = "MutatingAdmissionWebhook";
    /// A conversion webhook.
    pub const CONVERSION: &str = "ConversionWebhook";
}

/// An image the operator uses.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct RelatedImage {
    /// A short name.
    pub name: String,
    /// The reference.
    pub image: String,
}

impl ClusterServiceVersion {
    /// The CSV's name, or `""`.
    pub fn name(&self) -> &str {
        self.metadata.name.as_deref().unwrap_or_default()
    }

    /// Names of the Deployments in the install strategy.
    pub fn deployment_names(&self) -> impl Iterator<Item = &str> {
        self.spec
            .install
            .spec
            .deployments
            .iter()
            .map(|d| d.name.as_str())
    }

    /// Whether an install mode is declared supported.
    pub fn supports(&self, mode: &str) -> bool {
        self.spec
            .install_modes
            .iter()
            .any(|m| m.mode == mode && m.supported)
    }

    /// The annotation of that name, if any.
    pub fn annotation(&self, key: &str) -> Option<&str> {
        self.metadata
            .annotations
            .as_ref()
            .and_then(|a| a.get(key))
            .map(String::as_str)
    }
}
