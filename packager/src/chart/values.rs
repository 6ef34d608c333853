//! Declares what the chart lets users tune, once: each setting's key, default and schema.
//! `values.yaml` (the defaults, each top-level setting under a comment) and
//! `values.schema.json` (closed at every level) are both written from this one list, and the
//! defaults come from the declarations the bundle and `config/` are written from: the
//! Deployment (replicas, resources, affinity, images) and the operator's own flags.

use k8s_openapi::api::core::v1::{
    Affinity, EnvVar, LocalObjectReference, ResourceRequirements, Toleration,
};
use serde_json::{Map, Value, json};

use super::super::deployment;
use super::super::images::{self, Images};
use super::super::release;
use super::super::yaml::{YamlError, to_yaml};
use super::flags::{UnknownFlag, default_of, number_default, possible_values};
use super::schema::{
    boolean, closed, decimal, integer, kubernetes, kubernetes_list, non_empty, one_of, string,
    string_map,
};

/// One setting: a leaf, or a group of settings.
#[derive(Clone, Debug)]
pub struct Setting {
    /// Its key in `values.yaml`.
    pub key: &'static str,
    /// Its default.
    pub value: Value,
    /// Its schema.
    pub schema: Value,
}

fn leaf(key: &'static str, value: impl Into<Value>, schema: Value) -> Setting {
    Setting {
        key,
        value: value.into(),
        schema,
    }
}

fn group(key: &'static str, description: &str, children: Vec<Setting>) -> Setting {
    let mut values = Map::new();
    let mut schemas = Map::new();
    for child in children {
        values.insert(child.key.to_string(), child.value);
        schemas.insert(child.key.to_string(), child.schema);
    }
    Setting {
        key,
        value: Value::Object(values),
        schema: closed(description, schemas),
    }
}

/// The Prometheus Operator's duration, as its CRDs check it (or empty: Prometheus's default).
const PROMETHEUS_DURATION: &str = "^$|^(0|(([0-9]+)y)?(([0-9]+)w)?(([0-9]+)d)?(([0-9]+)h)?(([0-9]+)m)?(([0-9]+)s)?(([0-9]+)ms)?)$";

fn flag_string(key: &'static str, flag: &str, description: &str) -> Result<Setting, UnknownFlag> {
    Ok(leaf(key, default_of(flag)?, non_empty(description)))
}

fn images(image: &str) -> Setting {
    let parts = images::parts(image);
    let (repository, tag, digest) = (
        parts.repository,
        parts.tag.unwrap_or_default(),
        parts.digest.unwrap_or_default(),
    );
    group(
        "image",
        "The operator's image",
        vec![
            leaf(
                "repository",
                repository,
                non_empty("The operator image's repository"),
            ),
            leaf(
                "tag",
                tag,
                string("Its tag; empty: v followed by the chart's appVersion"),
            ),
            leaf(
                "digest",
                digest,
                json!({
                    "type": "string",
                    "pattern": "^$|^sha256:[0-9a-f]{64}$",
                    "description": "Its digest (sha256:...); when set, the image is pulled by digest and the tag is ignored",
                }),
            ),
            leaf(
                "pullPolicy",
                "IfNotPresent",
                one_of(
                    "When the kubelet pulls the images",
                    &["Always", "IfNotPresent", "Never"],
                ),
            ),
        ],
    )
}

fn related_images(images: &Images) -> Setting {
    group(
        "relatedImages",
        "The images the operator runs beside memcached (its RELATED_IMAGE_* variables)",
        vec![
            leaf(
                "memcached",
                images.memcached.as_str(),
                non_empty("memcached, for Memcacheds that name no image (RELATED_IMAGE_MEMCACHED)"),
            ),
            leaf(
                "memcachedExporter",
                images.exporter.as_str(),
                non_empty(
                    "memcached_exporter, the metrics sidecar (RELATED_IMAGE_MEMCACHED_EXPORTER)",
                ),
            ),
            leaf(
                "certRefresher",
                "",
                string(
                    "The certificate refresher, credentials reloader and stats relay sidecars (RELATED_IMAGE_CERT_REFRESHER); empty: the operator's image",
                ),
            ),
        ],
    )
}

fn placement() -> Result<Vec<Setting>, YamlError> {
    let spec = deployment::spec(&Images::for_release(release::VERSION));
    let pod = spec.template.spec.unwrap_or_default();
    let container = pod.containers.first().cloned().unwrap_or_default();
    Ok(vec![
        leaf(
            "replicaCount",
            spec.replicas.unwrap_or(1),
            integer(
                "Operator replicas: one leads and reconciles, every one serves the webhooks",
                0,
                None,
            ),
        ),
        leaf(
            "imagePullSecrets",
            json!([]),
            kubernetes_list::<LocalObjectReference>(
                "Secrets the kubelet pulls the operator's image with",
            ),
        ),
        leaf(
            "resources",
            serde_json::to_value(container.resources)?,
            kubernetes::<ResourceRequirements>("The operator container's requests and limits"),
        ),
        leaf(
            "nodeSelector",
            json!({}),
            string_map("Node labels the operator's pods require"),
        ),
        leaf(
            "tolerations",
            json!([]),
            kubernetes_list::<Toleration>("Taints the operator's pods tolerate"),
        ),
        leaf(
            "affinity",
            serde_json::to_value(pod.affinity)?,
            kubernetes::<Affinity>(
                "The operator pods' affinity; the default requires the platforms the image is built for and spreads the replicas over nodes. A value replaces it whole",
            ),
        ),
        leaf(
            "priorityClassName",
            "",
            string("The operator pods' PriorityClass; empty: none"),
        ),
        leaf(
            "extraEnv",
            json!([]),
            kubernetes_list::<EnvVar>(
                "More environment variables of the operator's container (HTTP_PROXY, HTTPS_PROXY, NO_PROXY, ...)",
            ),
        ),
    ])
}

fn operator_flags() -> Result<Vec<Setting>, UnknownFlag> {
    Ok(vec![
        group(
            "leaderElection",
            "Leader election among the replicas (--leader-elect and its timing)",
            vec![
                leaf(
                    "enabled",
                    default_of("leader-elect")? == "true",
                    boolean("Elect a leader, so that exactly one replica reconciles"),
                ),
                flag_string(
                    "leaseDuration",
                    "lease-duration",
                    "How long the others wait before taking over an unrenewed Lease",
                )?,
                flag_string(
                    "renewDeadline",
                    "renew-deadline",
                    "How long the leader tries to renew before it stops reconciling",
                )?,
                flag_string(
                    "retryPeriod",
                    "retry-period",
                    "How often the Lease is tried",
                )?,
            ],
        ),
        group(
            "controller",
            "How much the controller asks of the API server",
            vec![
                leaf(
                    "maxConcurrentReconciles",
                    number_default("max-concurrent-reconciles")?,
                    integer(
                        "Memcacheds reconciled at once (0: no bound)",
                        0,
                        Some(u16::MAX.into()),
                    ),
                ),
                leaf(
                    "maxRequestsInFlight",
                    number_default("max-requests-in-flight")?,
                    integer(
                        "API requests in flight at once (0: no bound)",
                        0,
                        Some(u16::MAX.into()),
                    ),
                ),
                leaf(
                    "kubeApiQps",
                    number_default("kube-api-qps")?,
                    decimal("API requests a second on average (0: no bound)"),
                ),
                leaf(
                    "kubeApiBurst",
                    number_default("kube-api-burst")?,
                    integer(
                        "API requests at once beyond kubeApiQps after a quiet while",
                        0,
                        Some(u32::MAX.into()),
                    ),
                ),
            ],
        ),
        group(
            "webhooks",
            "The webhook server",
            vec![
                flag_string(
                    "requestTimeout",
                    "request-timeout",
                    "Time to receive a review and answer it",
                )?,
                leaf(
                    "enableHttp2",
                    false,
                    boolean("Offer HTTP/2 (off by default: rapid-reset attacks)"),
                ),
                leaf(
                    "allowedIssuers",
                    "",
                    string(
                        "The cert-manager issuers spec.tls.issuerRef may name beyond an Issuer of the Memcached's namespace (KIND.GROUP, KIND.GROUP/NAME or *, comma-separated)",
                    ),
                ),
            ],
        ),
        group(
            "certificates",
            "Where the webhooks' serving certificate comes from",
            vec![
                leaf(
                    "source",
                    "certManager",
                    one_of(
                        "certManager: the chart's Issuers and Certificate, renewed by cert-manager (which must be installed), its cainjector writing the CA bundles; operator: the operator issues a self-signed CA and certificate into a Secret, renews each at two thirds of its validity, and writes the CA bundles itself",
                        &["certManager", "operator"],
                    ),
                ),
                flag_string(
                    "caValidity",
                    "self-signed-ca-validity",
                    "With source operator: how long its CA is valid",
                )?,
                flag_string(
                    "certValidity",
                    "self-signed-cert-validity",
                    "With source operator: how long its serving certificate is valid (never past its CA)",
                )?,
            ],
        ),
        group(
            "log",
            "The operator's logs",
            vec![
                leaf(
                    "level",
                    "",
                    string("A filter in RUST_LOG syntax; empty: info"),
                ),
                leaf(
                    "format",
                    default_of("log-format")?,
                    one_of(
                        "json, text, or auto (json when not on a terminal)",
                        &possible_values("log-format")
                            .iter()
                            .map(String::as_str)
                            .collect::<Vec<_>>(),
                    ),
                ),
            ],
        ),
    ])
}

fn metrics_and_network() -> Vec<Setting> {
    vec![
        group(
            "metrics",
            "The operator's metrics (HTTPS on the metrics Service)",
            vec![
                leaf(
                    "secure",
                    true,
                    boolean(
                        "HTTPS to callers that may get /metrics (the metrics-reader ClusterRole); false: plain HTTP to anyone",
                    ),
                ),
                group(
                    "serviceMonitor",
                    "A ServiceMonitor for the Prometheus Operator (its CRDs must be installed)",
                    vec![
                        leaf("enabled", false, boolean("Install the ServiceMonitor")),
                        leaf(
                            "interval",
                            "",
                            json!({"type": "string", "pattern": PROMETHEUS_DURATION, "description": "How often Prometheus scrapes; empty: its default"}),
                        ),
                        leaf(
                            "scrapeTimeout",
                            "",
                            json!({"type": "string", "pattern": PROMETHEUS_DURATION, "description": "How long a scrape may take; empty: its default"}),
                        ),
                        leaf(
                            "labels",
                            json!({}),
                            string_map(
                                "More labels of the ServiceMonitor (for a Prometheus's serviceMonitorSelector)",
                            ),
                        ),
                    ],
                ),
            ],
        ),
        group(
            "networkPolicy",
            "The NetworkPolicies that admit only metrics scrapes (from namespaces labelled metrics: enabled) and webhook calls to the operator's pods",
            vec![leaf("enabled", true, boolean("Install them"))],
        ),
    ]
}

/// Why the settings could not be declared.
#[derive(Debug, thiserror::Error)]
pub enum SettingsError {
    /// A default did not convert.
    #[error(transparent)]
    Yaml(#[from] YamlError),
    /// A flag the chart passes is not the operator's.
    #[error(transparent)]
    Flag(#[from] UnknownFlag),
}

impl From<serde_json::Error> for SettingsError {
    fn from(error: serde_json::Error) -> Self {
        SettingsError::Yaml(error.into())
    }
}

/// Every setting, in the order `values.yaml` lists them.
pub fn settings(images: &Images) -> Result<Vec<Setting>, SettingsError> {
    let mut settings = vec![self::images(&images.operator), related_images(images)];
    settings.extend(placement()?);
    settings.extend(operator_flags()?);
    settings.extend(metrics_and_network());
    Ok(settings)
}

/// `values.schema.json`: every setting, nothing else.
pub fn schema(settings: &[Setting]) -> Value {
    let properties = settings
        .iter()
        .map(|s| (s.key.to_string(), s.schema.clone()))
        .collect();
    let mut schema = closed("The values of the memcached-operator chart", properties);
    schema["$schema"] = json!("http://json-schema.org/draft-07/schema#");
    schema
}

/// `values.yaml`: each setting under its description, in the order declared.
pub fn values_yaml(settings: &[Setting]) -> Result<String, YamlError> {
    let mut text = String::from(
        "# Default values of the memcached-operator chart; values.schema.json refuses any other\n\
         # key, and a value of the wrong type. The operator follows the cluster's TLS security\n\
         # profile by itself (OpenShift's apiservers/cluster; Intermediate elsewhere): no value.\n",
    );
    for setting in settings {
        let description = setting.schema["description"].as_str().unwrap_or_default();
        text.push('\n');
        text.push_str(&format!("# {description}\n"));
        let mut one = Map::new();
        one.insert(setting.key.to_string(), setting.value.clone());
        text.push_str(&to_yaml(&Value::Object(one))?);
    }
    Ok(text)
}
