//! Builds the operator's registry+v1 bundle: the CSV (from the API types, the webhook table,
//! the RBAC declaration and the release facts), the CRD, the metrics Service, the
//! `metrics-reader` ClusterRole, the network policies, the bundle metadata, the scorecard
//! configuration and `bundle.Dockerfile`.
//!
//! Building is pure: options in, objects and file contents out. Checking OLM's rules and
//! writing are `generate`'s job.

use std::collections::BTreeMap;

use base64::Engine;
use k8s_openapi::api::admissionregistration::v1::RuleWithOperations;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use serde_json::json;

use super::csv::{
    self, ApiServiceDefinitions, ClusterServiceVersion, CsvSpec, CustomResourceDefinitions,
    DeploymentSpecNamed, Icon, InstallMode, Link, Maintainer, NamedInstallStrategy, Provider,
    RelatedImage, StrategyDeploymentPermissions, StrategyDetailsDeployment, WebhookDescription,
};
use super::files::{Files, FilesError};
use super::images::Images;
use super::monitoring::{self, METRICS_READER_ROLE_NAME, METRICS_SERVICE_NAME};
use super::{deployment, descriptors, network_policy, release, samples};
use memcached_operator::webhook::{self, WebhookKind};
use memcached_operator::{api, operator, rbac};

/// The icon, an SVG.
pub const ICON_SVG: &str = include_str!("../../assets/icon.svg");

/// Where the bundle's files go, relative to the output directory.
pub const BUNDLE_DIR: &str = "bundle";

/// What varies between generations: everything else is fixed by the source.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Options {
    /// The operator's version (Cargo.toml's).
    pub version: String,
    /// The images the CSV deploys and names: the operator's, the default memcached and
    /// memcached_exporter.
    pub images: Images,
    /// The bundle image the catalog points at.
    pub bundle_image: String,
    /// The CSV's `createdAt`.
    pub created_at: String,
}

impl Options {
    /// The options of this release: Cargo.toml's version, the images under
    /// [`release::REGISTRY`] and the release date as `createdAt`.
    pub fn for_release() -> Self {
        Self::for_version(
            release::VERSION,
            release::release_date().unwrap_or(release::RELEASES[0].1),
        )
    }

    /// The options of release `version`, cut on `created_at`: its images under
    /// [`release::REGISTRY`], by tag (another release's, in the tests of an upgrade).
    pub fn for_version(version: &str, created_at: &str) -> Self {
        Self {
            version: version.to_string(),
            images: Images::for_release(version),
            bundle_image: release::bundle_image(version),
            created_at: created_at.to_string(),
        }
    }
}

/// The CSV's markdown description, with its placeholders filled in.
fn description() -> String {
    include_str!("../../assets/description.md")
        .replace("{group}", api::GROUP)
        .replace("{storage}", api::STORAGE_VERSION)
        .replace("{deprecated}", api::DEPRECATED_VERSION)
}

/// The `features.operators.openshift.io/*` annotations, with truthful values.
///
/// The operator works disconnected when every image the CSV names is named by digest (`generate
/// --image-digests`), which is what a disconnected cluster's mirror serves; the release's own
/// bundle names them by tag, since a digest is only known once the images are pushed. Its TLS stack (rustls with ring) is not FIPS-validated; it honours the
/// cluster proxy OLM passes it (`HTTPS_PROXY`, `NO_PROXY`) as client-go does for its one
/// outbound peer, the API server, and its operands open no connection off their own pod
/// (tests/olm and tests/helm set a proxy through the Subscription and through the chart's
/// values, and the operator works and sends the proxy nothing); it follows the cluster's TLS security profile on its webhook and metrics
/// listeners (proven end to end against OpenShift's real APIServer CRD); it uses no cloud
/// tokens and is no CNF, CNI or CSI plugin.
fn features(images: &Images) -> [(&'static str, &'static str); 10] {
    let disconnected = if images.all_by_digest() {
        "true"
    } else {
        "false"
    };
    [
        ("cnf", "false"),
        ("cni", "false"),
        ("csi", "false"),
        ("disconnected", disconnected),
        ("fips-compliant", "false"),
        ("proxy-aware", "true"),
        ("tls-profiles", "true"),
        ("token-auth-aws", "false"),
        ("token-auth-azure", "false"),
        ("token-auth-gcp", "false"),
    ]
}

/// The prefix of the CSV label that declares an operating system supported.
pub const OS_LABEL_PREFIX: &str = "operatorframework.io/os.";
/// The prefix of the CSV label that declares a CPU architecture supported.
pub const ARCH_LABEL_PREFIX: &str = "operatorframework.io/arch.";

/// The CSV's labels: `operatorframework.io/os.<os>` and `operatorframework.io/arch.<arch>`
/// set to `supported` for each platform of `release::PLATFORMS`, and nothing else. Consoles
/// and OperatorHub filter packages by them; the Deployment's node affinity requires the same
/// platforms.
pub fn platform_labels() -> BTreeMap<String, String> {
    release::PLATFORMS
        .iter()
        .flat_map(|platform| {
            [
                format!("{OS_LABEL_PREFIX}{}", platform.os),
                format!("{ARCH_LABEL_PREFIX}{}", platform.arch),
            ]
        })
        .map(|key| (key, "supported".to_string()))
        .collect()
}

/// The webhook description of one entry of the webhook table.
pub fn webhook_description(entry: &webhook::Webhook) -> WebhookDescription {
    let rules = match entry.kind {
        WebhookKind::Conversion => Vec::new(),
        WebhookKind::Mutating | WebhookKind::Validating => vec![RuleWithOperations {
            api_groups: Some(vec![api::GROUP.to_string()]),
            api_versions: Some(vec![entry.api_version.to_string()]),
            operations: Some(entry.operations.iter().map(|o| o.to_string()).collect()),
            resources: Some(vec![api::PLURAL.to_string()]),
            scope: Some("Namespaced".to_string()),
        }],
    };
    let conversion_crds = match entry.kind {
        WebhookKind::Conversion => vec![api::CRD_NAME.to_string()],
        WebhookKind::Mutating | WebhookKind::Validating => Vec::new(),
    };
    WebhookDescription {
        kind: entry.kind.olm_type().to_string(),
        generate_name: entry.generate_name.to_string(),
        deployment_name: operator::DEPLOYMENT_NAME.to_string(),
        container_port: Some(i32::from(operator::WEBHOOK_SERVICE_PORT)),
        target_port: Some(IntOrString::Int(i32::from(operator::WEBHOOK_PORT))),
        rules,
        failure_policy: Some(entry.failure_policy.to_string()),
        match_policy: Some(entry.match_policy.to_string()),
        side_effects: Some(entry.side_effects.to_string()),
        timeout_seconds: Some(entry.timeout_seconds),
        admission_review_versions: webhook::REVIEW_VERSIONS
            .iter()
            .map(|v| v.to_string())
            .collect(),
        reinvocation_policy: match entry.kind {
            WebhookKind::Mutating => Some("Never".to_string()),
            WebhookKind::Validating | WebhookKind::Conversion => None,
        },
        webhook_path: Some(entry.path.to_string()),
        conversion_crds,
        object_selector: None,
    }
}

/// Builds the CSV for these options.
pub fn cluster_service_version(
    options: &Options,
) -> Result<ClusterServiceVersion, serde_json::Error> {
    let examples: Vec<serde_json::Value> = samples::all()?
        .into_iter()
        .map(|(_, example)| example)
        .collect();
    let mut annotations = BTreeMap::from([
        (
            "alm-examples".to_string(),
            serde_json::to_string_pretty(&examples)?,
        ),
        (
            "capabilities".to_string(),
            release::CAPABILITIES.to_string(),
        ),
        ("categories".to_string(), release::CATEGORIES.to_string()),
        (
            "containerImage".to_string(),
            options.images.operator.clone(),
        ),
        ("createdAt".to_string(), options.created_at.clone()),
        (
            "description".to_string(),
            release::SHORT_DESCRIPTION.to_string(),
        ),
        ("repository".to_string(), release::REPOSITORY.to_string()),
        ("support".to_string(), release::SUPPORT.to_string()),
        (
            "operatorframework.io/suggested-namespace".to_string(),
            release::SUGGESTED_NAMESPACE.to_string(),
        ),
    ]);
    for (feature, value) in features(&options.images) {
        annotations.insert(
            format!("features.operators.openshift.io/{feature}"),
            value.to_string(),
        );
    }
    let service_account = operator::SERVICE_ACCOUNT_NAME.to_string();
    let install_modes = [
        "OwnNamespace",
        "SingleNamespace",
        "MultiNamespace",
        csv::ALL_NAMESPACES,
    ]
    .iter()
    .map(|mode| InstallMode {
        mode: mode.to_string(),
        supported: *mode == csv::ALL_NAMESPACES,
    })
    .collect();
    Ok(ClusterServiceVersion {
        api_version: csv::API_VERSION.to_string(),
        kind: csv::KIND.to_string(),
        metadata: ObjectMeta {
            name: Some(release::csv_name(&options.version)),
            annotations: Some(annotations),
            labels: Some(platform_labels()),
            ..ObjectMeta::default()
        },
        spec: CsvSpec {
            display_name: release::DISPLAY_NAME.to_string(),
            description: description(),
            icon: vec![Icon {
                base64data: base64::engine::general_purpose::STANDARD.encode(ICON_SVG),
                mediatype: "image/svg+xml".to_string(),
            }],
            keywords: release::KEYWORDS.iter().map(|k| k.to_string()).collect(),
            links: vec![
                Link {
                    name: "Source Code".to_string(),
                    url: release::REPOSITORY.to_string(),
                },
                Link {
                    name: "memcached".to_string(),
                    url: "https://memcached.org".to_string(),
                },
            ],
            maintainers: vec![Maintainer {
                name: release::MAINTAINER_NAME.to_string(),
                email: release::MAINTAINER_EMAIL.to_string(),
            }],
            provider: Some(Provider {
                name: release::PROVIDER.to_string(),
                url: Some(release::REPOSITORY.to_string()),
            }),
            maturity: release::MATURITY.to_string(),
            version: options.version.clone(),
            replaces: release::previous_version().map(release::csv_name),
            skips: Vec::new(),
            min_kube_version: Some(release::MIN_KUBE_VERSION.to_string()),
            install_modes,
            install: NamedInstallStrategy {
                strategy: "deployment".to_string(),
                spec: StrategyDetailsDeployment {
                    deployments: vec![DeploymentSpecNamed {
                        name: operator::DEPLOYMENT_NAME.to_string(),
                        label: deployment::pod_labels(),
                        spec: deployment::spec(&options.images),
                    }],
                    permissions: vec![StrategyDeploymentPermissions {
                        service_account_name: service_account.clone(),
                        rules: rbac::namespaced_rules(),
                    }],
                    cluster_permissions: vec![StrategyDeploymentPermissions {
                        service_account_name: service_account,
                        rules: rbac::cluster_rules(),
                    }],
                },
            },
            customresourcedefinitions: CustomResourceDefinitions {
                owned: descriptors::owned(),
                required: Vec::new(),
            },
            apiservicedefinitions: ApiServiceDefinitions::default(),
            webhookdefinitions: webhook::WEBHOOKS.iter().map(webhook_description).collect(),
            related_images: options
                .images
                .named()
                .iter()
                .map(|(name, image)| RelatedImage {
                    name: name.to_string(),
                    image: image.to_string(),
                })
                .collect(),
            labels: BTreeMap::new(),
            selector: None,
        },
    })
}

/// The bundle annotations, shared by `metadata/annotations.yaml` and `bundle.Dockerfile`.
pub fn annotations() -> Vec<(&'static str, String)> {
    vec![
        (
            "operators.operatorframework.io.bundle.mediatype.v1",
            "registry+v1".to_string(),
        ),
        (
            "operators.operatorframework.io.bundle.manifests.v1",
            "manifests/".to_string(),
        ),
        (
            "operators.operatorframework.io.bundle.metadata.v1",
            "metadata/".to_string(),
        ),
        (
            "operators.operatorframework.io.bundle.package.v1",
            release::PACKAGE.to_string(),
        ),
        (
            "operators.operatorframework.io.bundle.channels.v1",
            release::CHANNEL.to_string(),
        ),
        (
            "operators.operatorframework.io.bundle.channel.default.v1",
            release::CHANNEL.to_string(),
        ),
        (
            "operators.operatorframework.io.test.mediatype.v1",
            "scorecard+v1".to_string(),
        ),
        (
            "operators.operatorframework.io.test.config.v1",
            "tests/scorecard/".to_string(),
        ),
        (
            "com.redhat.openshift.versions",
            release::OPENSHIFT_VERSIONS.to_string(),
        ),
    ]
}

/// The scorecard configuration: the basic and OLM suites, run by operator-sdk's
/// scorecard-test image of the pinned version.
fn scorecard_config() -> serde_json::Value {
    let image = release::scorecard_image();
    let tests: Vec<serde_json::Value> = [
        ("basic-check-spec", "basic", "basic-check-spec-test"),
        ("olm-bundle-validation", "olm", "olm-bundle-validation-test"),
        (
            "olm-crds-have-validation",
            "olm",
            "olm-crds-have-validation-test",
        ),
        (
            "olm-crds-have-resources",
            "olm",
            "olm-crds-have-resources-test",
        ),
        ("olm-spec-descriptors", "olm", "olm-spec-descriptors-test"),
        (
            "olm-status-descriptors",
            "olm",
            "olm-status-descriptors-test",
        ),
    ]
    .iter()
    .map(|(entrypoint, suite, test)| {
        json!({
            "entrypoint": ["scorecard-test", entrypoint],
            "image": image,
            "labels": {"suite": suite, "test": test},
            "storage": {"spec": {"mountPath": {}}},
        })
    })
    .collect();
    json!({
        "apiVersion": "scorecard.operatorframework.io/v1alpha3",
        "kind": "Configuration",
        "metadata": {"name": "config"},
        "stages": [{"parallel": true, "tests": tests}],
        "storage": {"spec": {"mountPath": {}}},
    })
}

/// `bundle.Dockerfile`: the bundle image, FROM scratch, labelled like `annotations.yaml`.
fn dockerfile() -> String {
    let labels: Vec<String> = annotations()
        .into_iter()
        .map(|(key, value)| format!("      {key}={value}"))
        .collect();
    format!(
        "# Generated by `memcached-packager generate`; do not edit.\n\
         # The operator's registry+v1 bundle image.\n\
         FROM scratch\n\
         \n\
         # Core bundle labels: the same keys and values as bundle/metadata/annotations.yaml.\n\
         LABEL \\\n{labels}\n\
         \n\
         # Copy files to the locations the labels name.\n\
         COPY bundle/manifests /manifests/\n\
         COPY bundle/metadata /metadata/\n\
         COPY bundle/tests/scorecard /tests/scorecard/\n",
        labels = labels.join(" \\\n")
    )
}

/// The file name operator-sdk gives a CRD in a bundle.
pub fn crd_file_name() -> String {
    format!("{}_{}.yaml", api::GROUP, api::PLURAL)
}

/// Renders the bundle's files (below `bundle/`, plus `bundle.Dockerfile`).
pub fn files(
    csv: &ClusterServiceVersion,
    crd: &CustomResourceDefinition,
) -> Result<Files, FilesError> {
    let mut files = Files::new();
    let manifests = format!("{BUNDLE_DIR}/manifests");
    files.yaml(&format!("{manifests}/{}", crd_file_name()), crd)?;
    files.yaml(
        &format!(
            "{manifests}/{}.clusterserviceversion.yaml",
            release::PACKAGE
        ),
        csv,
    )?;
    files.yaml(
        &format!("{manifests}/{METRICS_SERVICE_NAME}_v1_service.yaml"),
        &monitoring::metrics_service(None),
    )?;
    files.yaml(
        &format!(
            "{manifests}/{METRICS_READER_ROLE_NAME}_rbac.authorization.k8s.io_v1_clusterrole.yaml"
        ),
        &monitoring::metrics_reader_role(),
    )?;
    // No ServiceMonitor: OLM v0.46 fails the whole InstallPlan on a cluster without the
    // Prometheus Operator's CRD (docs/packaging.md); it ships in config/prometheus only.
    for policy in network_policy::all(None) {
        let name = policy.metadata.name.clone().unwrap_or_default();
        files.yaml(
            &format!("{manifests}/{name}_networking.k8s.io_v1_networkpolicy.yaml"),
            &policy,
        )?;
    }
    let annotations: BTreeMap<&str, String> = annotations().into_iter().collect();
    files.yaml(
        &format!("{BUNDLE_DIR}/metadata/annotations.yaml"),
        &json!({ "annotations": annotations }),
    )?;
    files.yaml(
        &format!("{BUNDLE_DIR}/tests/scorecard/config.yaml"),
        &scorecard_config(),
    )?;
    files.text("bundle.Dockerfile", dockerfile())?;
    Ok(files)
}
