//! Declares the Prometheus metrics of the memcached servers: memcached_exporter beside each
//! server, on a port of its own.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::ResourceRequirements;
use kube::KubeSchema;
use serde::{Deserialize, Serialize};

use crate::api::cel;

/// memcached_exporter as a native sidecar of every server, its port on the pods and the
/// Service. On when set.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct MonitoringSpec {
    /// The port the exporter serves `/metrics` on, named `metrics` on the pods and the Service;
    /// never one of memcached's ports. Defaults to 9150.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 65535))]
    pub port: Option<i32>,

    /// The memcached_exporter image. Defaults to the image the operator was released with
    /// (`RELATED_IMAGE_MEMCACHED_EXPORTER`) at the time monitoring is turned on.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 512), regex(pattern = cel::IMAGE_REFERENCE_PATTERN))]
    pub exporter_image: Option<String>,

    /// Compute resources of the exporter. Defaults to a small request and memory limit.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exporter_resources: Option<ResourceRequirements>,

    /// The image of the stats relay, the sidecar through which the exporter reads the
    /// statistics of servers that require authentication (`memcached-operator relay-stats`);
    /// used only with `spec.auth`. Defaults to the operator's own image at the time monitoring
    /// is turned on, so that upgrading the operator does not restart the servers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 512), regex(pattern = cel::IMAGE_REFERENCE_PATTERN))]
    pub relay_image: Option<String>,

    /// A ServiceMonitor `<name>` for the Prometheus Operator, selecting the Service's `metrics`
    /// port. Written when the cluster serves `monitoring.coreos.com/v1`; otherwise the
    /// Memcached's Events say it is not. None when unset.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub service_monitor: Option<ServiceMonitorSpec>,

    /// The servers' alerting rules, as a PrometheusRule `<name>` for the Prometheus Operator:
    /// a server down or missing, connections near `maxConnections`, evictions, items refused
    /// for lack of memory and, with `spec.tls.issuerRef`, the certificate expiring or not
    /// ready. Written when the cluster serves PrometheusRules (`monitoring.coreos.com/v1`). On
    /// when unset, where it does; with `enabled: true`, a cluster that does not is said so in
    /// the Memcached's Events and its Degraded condition.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rules: Option<RulesSpec>,
}

/// The PrometheusRule of a Memcached.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct RulesSpec {
    /// Whether the PrometheusRule is written. Defaults to true (where the cluster serves
    /// PrometheusRules); false removes it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub enabled: Option<bool>,

    /// Labels added to the PrometheusRule, such as the ones a Prometheus's `ruleSelector`
    /// matches.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub labels: Option<BTreeMap<String, String>>,
}

impl MonitoringSpec {
    /// Whether the servers' alerting rules are asked for: unless `rules.enabled` is false.
    pub fn rules_enabled(&self) -> bool {
        self.rules
            .as_ref()
            .and_then(|rules| rules.enabled)
            .unwrap_or(true)
    }

    /// Whether the alerting rules are asked for in so many words (`rules.enabled: true`), not
    /// only by default.
    pub fn rules_asked_for(&self) -> bool {
        self.rules.as_ref().and_then(|rules| rules.enabled) == Some(true)
    }
}

/// The ServiceMonitor of a Memcached.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct ServiceMonitorSpec {
    /// How often Prometheus scrapes, as a Prometheus duration (`30s`, `1m`). Prometheus's own
    /// interval when unset.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(regex(pattern = cel::PROMETHEUS_DURATION_PATTERN))]
    pub interval: Option<String>,

    /// How long a scrape may take, as a Prometheus duration. Prometheus's own when unset.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(regex(pattern = cel::PROMETHEUS_DURATION_PATTERN))]
    pub scrape_timeout: Option<String>,

    /// Labels added to the ServiceMonitor, such as the ones a Prometheus's
    /// `serviceMonitorSelector` matches.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub labels: Option<BTreeMap<String, String>>,
}
