//! Builds what lets Prometheus read the operator's metrics, for the bundle and for
//! `config/`: the metrics Service (HTTPS on the metrics port, asking OpenShift's service-ca for
//! a serving certificate), the `metrics-reader` ClusterRole a scraper is bound to, and a
//! ServiceMonitor shaped as kubebuilder v4 scaffolds it.
//!
//! Port, path and rules come from `operator` and `rbac`; the Secret the Service asks for is the
//! one the Deployment mounts (`deployment`). Nothing is spelled twice.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{Service, ServicePort, ServiceSpec};
use k8s_openapi::api::rbac::v1::ClusterRole;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use serde_json::{Value, json};

use super::deployment;
use memcached_operator::{operator, rbac};

/// The metrics Service's name.
pub const METRICS_SERVICE_NAME: &str = operator::METRICS_SERVICE_NAME;
/// The name of the metrics Service's port, which the ServiceMonitor scrapes.
pub const METRICS_SERVICE_PORT_NAME: &str = "https";
/// The ClusterRole that lets a scraper read the metrics.
pub const METRICS_READER_ROLE_NAME: &str = "memcached-operator-metrics-reader";
/// The ServiceMonitor.
pub const SERVICE_MONITOR_NAME: &str = "memcached-operator-controller-manager-metrics-monitor";
/// The annotation that makes OpenShift's service-ca write a serving certificate for a
/// Service into the named Secret.
pub const SERVING_CERT_ANNOTATION: &str = "service.beta.openshift.io/serving-cert-secret-name";
/// Where a pod's ServiceAccount token is mounted: Prometheus presents its own.
const SERVICE_ACCOUNT_TOKEN: &str = "/var/run/secrets/kubernetes.io/serviceaccount/token";

/// The Service in front of the metrics port, in `namespace` (none in a bundle: OLM puts it in
/// the operator's). On OpenShift its annotation gets a service-ca certificate written to the
/// Secret the Deployment mounts (optionally) where the operator reads it.
pub fn metrics_service(namespace: Option<&str>) -> Service {
    Service {
        metadata: ObjectMeta {
            name: Some(METRICS_SERVICE_NAME.to_string()),
            namespace: namespace.map(str::to_string),
            labels: Some(deployment::pod_labels()),
            annotations: Some(BTreeMap::from([(
                SERVING_CERT_ANNOTATION.to_string(),
                deployment::METRICS_CERT_SECRET_NAME.to_string(),
            )])),
            ..ObjectMeta::default()
        },
        spec: Some(ServiceSpec {
            ports: Some(vec![ServicePort {
                name: Some(METRICS_SERVICE_PORT_NAME.to_string()),
                port: i32::from(operator::METRICS_PORT),
                protocol: Some("TCP".to_string()),
                target_port: Some(IntOrString::String(
                    deployment::METRICS_PORT_NAME.to_string(),
                )),
                ..ServicePort::default()
            }]),
            selector: Some(deployment::pod_labels()),
            ..ServiceSpec::default()
        }),
        ..Service::default()
    }
}

/// The `metrics-reader` ClusterRole: `get` on the metrics path. Bind it to the scraper's
/// ServiceAccount.
pub fn metrics_reader_role() -> ClusterRole {
    ClusterRole {
        metadata: ObjectMeta {
            name: Some(METRICS_READER_ROLE_NAME.to_string()),
            labels: Some(BTreeMap::from([(
                "app.kubernetes.io/name".to_string(),
                operator::NAME.to_string(),
            )])),
            ..ObjectMeta::default()
        },
        rules: Some(rbac::metrics_reader_rules()),
        ..ClusterRole::default()
    }
}

/// The ServiceMonitor (Prometheus Operator's `monitoring.coreos.com/v1`), in `namespace`:
/// HTTPS to the metrics Service's port, Prometheus's own ServiceAccount token as the bearer
/// token, and certificate verification skipped, as kubebuilder's scaffold does, since outside
/// OpenShift the certificate is self-signed.
pub fn service_monitor(namespace: Option<&str>) -> Value {
    let mut metadata = json!({
        "name": SERVICE_MONITOR_NAME,
        "labels": deployment::pod_labels(),
    });
    if let Some(namespace) = namespace {
        metadata["namespace"] = json!(namespace);
    }
    json!({
        "apiVersion": "monitoring.coreos.com/v1",
        "kind": "ServiceMonitor",
        "metadata": metadata,
        "spec": {
            "endpoints": [{
                "path": operator::METRICS_PATH,
                "port": METRICS_SERVICE_PORT_NAME,
                "scheme": "https",
                "bearerTokenFile": SERVICE_ACCOUNT_TOKEN,
                "tlsConfig": {"insecureSkipVerify": true},
            }],
            "selector": {"matchLabels": deployment::pod_labels()},
        },
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_service_monitor_scrapes_the_services_https_port_with_a_token() {
        let monitor = service_monitor(Some("ops"));
        let endpoint = &monitor["spec"]["endpoints"][0];
        let service = metrics_service(None);
        let port = &service.spec.expect("a spec").ports.expect("ports")[0];
        assert_eq!(endpoint["port"], json!(port.name.clone()));
        assert_eq!(port.port, i32::from(operator::METRICS_PORT));
        assert_eq!(endpoint["scheme"], "https");
        assert_eq!(endpoint["path"], operator::METRICS_PATH);
        assert_eq!(endpoint["bearerTokenFile"], SERVICE_ACCOUNT_TOKEN);
        assert_eq!(
            monitor["spec"]["selector"]["matchLabels"],
            json!(service.metadata.labels),
            "it selects the metrics Service"
        );
        assert_eq!(monitor["metadata"]["namespace"], "ops");
        assert_eq!(service_monitor(None)["metadata"].get("namespace"), None);
    }

    #[test]
    fn the_service_asks_service_ca_for_the_secret_the_deployment_mounts() {
        let service = metrics_service(Some("ops"));
        let annotations = service.metadata.annotations.expect("annotations");
        assert_eq!(
            annotations.get(SERVING_CERT_ANNOTATION).map(String::as_str),
            Some(deployment::METRICS_CERT_SECRET_NAME)
        );
    }
}
