//! Names the operator's own pieces: its Deployment, ServiceAccount, container, ports and
//! environment, so that the server, the controller and the generator agree on them.

/// The operator's name: the OLM package, the CSV prefix and the field manager.
pub const NAME: &str = "memcached-operator";
/// The User-Agent of the operator's requests to the API server, in client-go's form
/// (`name/version (os/arch)`), so that audit logs and API server metrics can tell them apart.
pub fn user_agent() -> String {
    format!(
        "{NAME}/v{} ({}/{})",
        env!("CARGO_PKG_VERSION"),
        std::env::consts::OS,
        std::env::consts::ARCH
    )
}
/// The Deployment in the CSV's install strategy; webhook definitions point at it.
pub const DEPLOYMENT_NAME: &str = "memcached-operator-controller-manager";
/// The ServiceAccount the Deployment runs as.
pub const SERVICE_ACCOUNT_NAME: &str = "memcached-operator-controller-manager";
/// The operator's container in the Deployment.
pub const CONTAINER_NAME: &str = "manager";
/// Where the webhook server listens (controller-runtime's default).
pub const WEBHOOK_PORT: u16 = 9443;
/// The port OLM's webhook Service exposes and the API server calls.
pub const WEBHOOK_SERVICE_PORT: u16 = 443;
/// Where `/healthz` and `/readyz` answer.
pub const PROBE_PORT: u16 = 8081;
/// Where Prometheus metrics are served: HTTPS to authorized callers, as kubebuilder's
/// scaffolds do (plain HTTP with `--metrics-secure=false`).
pub const METRICS_PORT: u16 = 8443;
/// The path of the metrics, and the non-resource URL a scraper needs `get` on.
pub const METRICS_PATH: &str = "/metrics";
/// The Service in front of the metrics port; its name is in the self-signed certificate.
pub const METRICS_SERVICE_NAME: &str = "memcached-operator-controller-manager-metrics-service";
/// Where the metrics serving certificate is mounted when there is one (kubebuilder's path).
pub const METRICS_CERT_DIR: &str = "/tmp/k8s-metrics-server/metrics-certs";
/// The environment variable naming the memcached image the operator was released with.
pub const RELATED_IMAGE_ENV: &str = "RELATED_IMAGE_MEMCACHED";
/// The environment variable with the operator's own namespace (downward API).
pub const POD_NAMESPACE_ENV: &str = "POD_NAMESPACE";
/// The Secret OLM v0 keeps the webhook serving certificate in: `<deployment>-service-cert`.
/// OLM v1 names the Secret it asks cert-manager for the same way.
pub const OLM_CERT_SECRET_NAME: &str = "memcached-operator-controller-manager-service-cert";
/// The Secret cert-manager issues the webhook serving certificate into (`config/default`).
pub const CERT_MANAGER_CERT_SECRET_NAME: &str = "memcached-operator-webhook-server-cert";
/// The webhook Service of `config/default` and the chart (OLM makes its own).
pub const WEBHOOK_SERVICE_NAME: &str = "memcached-operator-webhook-service";
/// The MutatingWebhookConfiguration of `config/default` and the chart.
pub const MUTATING_CONFIGURATION_NAME: &str = "memcached-operator-mutating-webhook-configuration";
/// The ValidatingWebhookConfiguration of `config/default` and the chart.
pub const VALIDATING_CONFIGURATION_NAME: &str =
    "memcached-operator-validating-webhook-configuration";
/// The Secrets the Deployment names with `--cert-secret`, and the only ones it may read.
pub const CERT_SECRET_NAMES: [&str; 2] = [OLM_CERT_SECRET_NAME, CERT_MANAGER_CERT_SECRET_NAME];
/// The environment variable naming the image of the certificate refresher that runs beside
/// memcached (`memcached-operator refresh-certs`): the operator's own image.
pub const RELATED_IMAGE_REFRESHER_ENV: &str = "RELATED_IMAGE_CERT_REFRESHER";
/// The environment variable naming the memcached_exporter image the operator was released
/// with, the metrics sidecar of memcached pods.
pub const RELATED_IMAGE_EXPORTER_ENV: &str = "RELATED_IMAGE_MEMCACHED_EXPORTER";
/// The memcached_exporter image used when `RELATED_IMAGE_MEMCACHED_EXPORTER` is unset: the
/// version the project builds its exporter image from (hack/memcached-exporter), pinned.
pub const DEFAULT_EXPORTER_IMAGE: &str = "quay.io/prometheus/memcached-exporter:v0.14.4";
/// The registry and organisation the operator's images are published under.
pub const IMAGE_REPOSITORY: &str = "quay.io/f2367556";
/// Where the binary sits in the operator's image (the Dockerfile copies it there).
pub const BINARY_PATH: &str = "/usr/local/bin/memcached-operator";

/// The operator's image for a version.
pub fn image(version: &str) -> String {
    format!("{IMAGE_REPOSITORY}/{NAME}:v{version}")
}

/// The image this build of the operator is released as.
pub fn own_image() -> String {
    image(env!("CARGO_PKG_VERSION"))
}

/// The memcached image used when `RELATED_IMAGE_MEMCACHED` is unset: memcached 1.6, pinned.
pub const DEFAULT_MEMCACHED_IMAGE: &str = "docker.io/library/memcached:1.6.39-alpine";

#[cfg(test)]
mod tests {
    #[test]
    fn the_user_agent_names_the_operator_its_version_and_platform() {
        let agent = super::user_agent();
        assert!(
            agent.starts_with(&format!(
                "memcached-operator/v{} (",
                env!("CARGO_PKG_VERSION")
            )),
            "{agent}"
        );
        assert!(agent.ends_with(')') && agent.contains('/'), "{agent}");
        assert!(http::HeaderValue::from_str(&agent).is_ok(), "{agent}");
    }
}
