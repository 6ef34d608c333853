//! The ServiceMonitor `<name>` a Memcached asks for with `spec.monitoring.serviceMonitor`: it
//! tells a Prometheus run by the Prometheus Operator to scrape the `metrics` port of the
//! Memcached's Service.
//!
//! Only the fields the operator sets are declared here; the Prometheus Operator's own CRD is
//! the schema.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use kube::{CustomResource, ResourceExt};
use serde::{Deserialize, Serialize};

use super::{metadata_with_labels, scraped_ports, selector_labels};
use crate::api::v1beta1::Memcached;
use crate::controller::cache::child::Child;
use crate::controller::cache::compact::CachedServiceMonitor;

impl Child for ServiceMonitor {
    type Cached = CachedServiceMonitor;
    fn cached(full: Self) -> CachedServiceMonitor {
        CachedServiceMonitor::from(full.metadata)
    }
}

/// The group of the Prometheus Operator's API.
pub const GROUP: &str = "monitoring.coreos.com";

/// `spec` of a `ServiceMonitor`, as far as the operator sets it.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[kube(
    group = "monitoring.coreos.com",
    version = "v1",
    kind = "ServiceMonitor",
    namespaced,
    schema = "disabled"
)]
#[serde(rename_all = "camelCase")]
pub struct ServiceMonitorSpec {
    /// The Services to scrape.
    pub selector: LabelSelector,
    /// The namespaces they are in.
    pub namespace_selector: NamespaceSelector,
    /// What to scrape on them.
    pub endpoints: Vec<Endpoint>,
}

/// The namespaces a ServiceMonitor looks in.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct NamespaceSelector {
    /// Their names.
    pub match_names: Vec<String>,
}

/// One scraped port.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct Endpoint {
    /// The Service port's name.
    pub port: String,
    /// The HTTP path.
    pub path: String,
    /// `http`.
    pub scheme: String,
    /// How often; Prometheus's own interval when unset.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub interval: Option<String>,
    /// How long a scrape may take; Prometheus's own when unset.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scrape_timeout: Option<String>,
}

/// The ServiceMonitor, when `spec.monitoring.serviceMonitor` asks for one. It carries the
/// children's labels and the ones the spec adds (which a Prometheus's
/// `serviceMonitorSelector` usually matches).
pub fn desired_service_monitor(memcached: &Memcached) -> Option<ServiceMonitor> {
    let wanted = memcached
        .spec
        .monitoring
        .as_ref()?
        .service_monitor
        .as_ref()?;
    Some(ServiceMonitor {
        metadata: metadata_with_labels(memcached, wanted.labels.as_ref()),
        spec: ServiceMonitorSpec {
            selector: LabelSelector {
                match_labels: Some(selector_labels(memcached)),
                match_expressions: None,
            },
            namespace_selector: NamespaceSelector {
                match_names: memcached.namespace().into_iter().collect(),
            },
            endpoints: scraped_ports(memcached)
                .into_iter()
                .map(|(port, _)| Endpoint {
                    port: port.into(),
                    path: "/metrics".into(),
                    scheme: "http".into(),
                    interval: wanted.interval.clone(),
                    scrape_timeout: wanted.scrape_timeout.clone(),
                })
                .collect(),
        },
    })
}
