//! Checks the metrics settings: the exporter's port is a port and none of memcached's, its and
//! the relay's images are images, the ServiceMonitor's durations are Prometheus durations, and
//! a NetworkPolicy says who may scrape. The CRD's schema and CEL rules (`api::cel`) say the
//! same.

use std::sync::LazyLock;

use regex::Regex;

use super::image::check_image;
use super::security::check_sources;
use crate::admission::violation::{Violation, Warnings};
use crate::api::v1beta1::{DEFAULT_METRICS_PORT, DEFAULT_PORT, MemcachedSpec};

/// A Prometheus duration's grammar, compiled once: the CRD's own pattern.
static PROMETHEUS_DURATION: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(crate::api::cel::PROMETHEUS_DURATION_PATTERN)
        .expect("the CRD's duration pattern compiles")
});

/// Adds a violation for every metrics setting of `spec` that is wrong.
pub(super) fn check(
    spec: &MemcachedSpec,
    violations: &mut Vec<Violation>,
    warnings: &mut Warnings,
) {
    let Some(monitoring) = &spec.monitoring else {
        return;
    };
    for (field, image) in [
        ("spec.monitoring.exporterImage", &monitoring.exporter_image),
        ("spec.monitoring.relayImage", &monitoring.relay_image),
    ] {
        if let Some(image) = image {
            check_image(field, image, violations, warnings);
        }
    }
    let port = monitoring.port.unwrap_or(DEFAULT_METRICS_PORT);
    let client_port = spec
        .service
        .as_ref()
        .and_then(|s| s.port)
        .unwrap_or(DEFAULT_PORT);
    let plaintext_port = spec.tls.as_ref().and_then(|t| t.plaintext_port);
    if !(1..=65535).contains(&port) {
        violations.push(Violation::new(
            "spec.monitoring.port",
            format!("{port} is not a port (1 to 65535)"),
        ));
    } else if port == client_port {
        violations.push(Violation::new(
            "spec.monitoring.port",
            format!("{port} is memcached's client port (spec.service.port); pick another"),
        ));
    } else if Some(port) == plaintext_port {
        violations.push(Violation::new(
            "spec.monitoring.port",
            format!("{port} is memcached's plaintext port (spec.tls.plaintextPort); pick another"),
        ));
    }
    if let Some(monitor) = &monitoring.service_monitor {
        for (field, value) in [
            ("spec.monitoring.serviceMonitor.interval", &monitor.interval),
            (
                "spec.monitoring.serviceMonitor.scrapeTimeout",
                &monitor.scrape_timeout,
            ),
        ] {
            if let Some(value) = value
                && !PROMETHEUS_DURATION.is_match(value)
            {
                violations.push(Violation::new(
                    field,
                    format!("{value:?} is not a Prometheus duration (such as 30s, 1m or 1m30s)"),
                ));
            }
        }
    }
    if let Some(policy) = &spec.network_policy {
        check_sources(
            "spec.networkPolicy.metricsSources",
            policy.metrics_sources.as_deref(),
            "must list who may scrape the exporter (such as the monitoring namespace) when \
             spec.monitoring is on; without one no scraper could reach it",
            violations,
        );
    }
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::networking::v1::NetworkPolicyPeer;

    use super::*;
    use crate::api::v1beta1::{MonitoringSpec, NetworkPolicySpec, ServiceSpec, TlsSpec};

    fn violations(spec: &MemcachedSpec) -> Vec<String> {
        let mut violations = Vec::new();
        check(spec, &mut violations, &mut Vec::new());
        violations.iter().map(ToString::to_string).collect()
    }

    fn monitored(port: Option<i32>) -> MemcachedSpec {
        MemcachedSpec {
            monitoring: Some(MonitoringSpec {
                port,
                ..MonitoringSpec::default()
            }),
            ..MemcachedSpec::default()
        }
    }

    #[test]
    fn the_metrics_port_is_none_of_memcached_s_ports() {
        assert_eq!(violations(&monitored(None)), Vec::<String>::new());
        assert!(violations(&monitored(Some(11211)))[0].contains("client port"));
        assert!(violations(&monitored(Some(0)))[0].contains("not a port"));
        let mut spec = monitored(Some(12000));
        spec.service = Some(ServiceSpec { port: Some(12000) });
        assert!(violations(&spec)[0].contains("client port"));
        let mut spec = monitored(None);
        spec.tls = Some(TlsSpec {
            secret_name: Some("cache-tls".into()),
            plaintext_port: Some(DEFAULT_METRICS_PORT),
            ..TlsSpec::default()
        });
        assert!(violations(&spec)[0].contains("plaintext port"));
    }

    #[test]
    fn a_network_policy_says_who_may_scrape() {
        let mut spec = monitored(None);
        spec.network_policy = Some(NetworkPolicySpec {
            allowed_sources: Some(vec![NetworkPolicyPeer::default()]),
            metrics_sources: None,
        });
        assert!(violations(&spec)[0].contains("spec.networkPolicy.metricsSources"));
        spec.network_policy.as_mut().expect("set").metrics_sources =
            Some(vec![NetworkPolicyPeer::default()]);
        assert_eq!(violations(&spec), Vec::<String>::new());
    }

    #[test]
    fn the_images_are_judged_as_images() {
        let mut spec = monitored(None);
        spec.monitoring.as_mut().expect("set").exporter_image = Some("not an image".into());
        assert!(violations(&spec)[0].contains("spec.monitoring.exporterImage"));
    }
}
