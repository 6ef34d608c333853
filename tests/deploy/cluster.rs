//! Sets up what the scenarios run against: a local control plane with a real node (kubelet,
//! containerd, the images built from the shipped Dockerfiles), with cert-manager and `config/default` deployed (`testkit::deploy`), and
//! the helpers the scenarios share to look at the certificates: what the Secret holds, what
//! each caBundle holds, what each replica serves.

use std::time::Duration;

use k8s_openapi::api::admissionregistration::v1::{
    MutatingWebhookConfiguration, ValidatingWebhookConfiguration,
};
use k8s_openapi::api::core::v1::{Pod, Secret};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::Client;
use kube::api::Api;
use memcached_operator::api::CRD_NAME;
use memcached_operator::operator::WEBHOOK_PORT;
use rustls_pki_types::CertificateDer;
use rustls_pki_types::pem::PemObject;
use testkit::client::TlsClient;
use testkit::control_plane::ControlPlane;
use testkit::deploy::{Deployed, start_and_deploy};
use testkit::pki::serial_of;

pub use testkit::scenarios::eventually;

/// How long a scenario waits for the cluster to act.
pub const WAIT: Duration = Duration::from_secs(90);

/// What `config/default` names, as the generator writes it.
pub use memcached_packager::config::{
    CA_CERTIFICATE_NAME as CA_CERTIFICATE, ISSUER_NAME as SELFSIGNED_ISSUER,
    MUTATING_CONFIGURATION_NAME as MUTATING, VALIDATING_CONFIGURATION_NAME as VALIDATING,
    WEBHOOK_SERVICE_NAME as WEBHOOK_SERVICE,
};

/// Everything the scenarios share.
pub struct Env {
    /// The admin client.
    pub client: Client,
    /// What `make deploy` installed.
    pub deployed: Deployed,
    /// Drops last: stops cert-manager, the node and the control plane.
    pub plane: ControlPlane,
}

/// The serving Secret's state: the serial of its certificate, and its `ca.crt`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Issued {
    /// The serial of `tls.crt`'s first certificate.
    pub serial: String,
    /// `tls.crt`, PEM.
    pub certificate: String,
    /// `ca.crt`, PEM.
    pub ca: String,
    /// `tls.key`, PEM.
    pub key: String,
}

impl Env {
    /// Starts the control plane and deploys `config/default` with cert-manager.
    pub async fn start() -> Result<Env, String> {
        let (plane, client, deployed) = start_and_deploy().await?;
        Ok(Env {
            client,
            deployed,
            plane,
        })
    }

    /// Creates a namespace for a scenario and returns its name.
    pub async fn create_namespace(&self, name: &str) -> String {
        testkit::control_plane::create_namespace(&self.client, name).await
    }

    /// Runs the project's kubectl against the control plane; returns (success, stdout,
    /// stderr).
    pub fn kubectl(&self, args: &[&str], stdin: Option<&str>) -> (bool, String, String) {
        match self.plane.kubectl(args, stdin) {
            Ok(output) => (output.success, output.stdout, output.stderr),
            Err(error) => panic!("kubectl {}: {error}", args.join(" ")),
        }
    }

    /// What the Secret named `name` in the operator's namespace holds, once it holds a
    /// certificate, its key and a CA.
    pub async fn issued_in(&self, name: &str) -> Option<Issued> {
        let secrets: Api<Secret> = Api::namespaced(self.client.clone(), &self.deployed.namespace);
        let data = secrets.get(name).await.ok()?.data?;
        let text = |key: &str| String::from_utf8(data.get(key)?.0.clone()).ok();
        let crt = text("tls.crt")?;
        let der = CertificateDer::pem_slice_iter(crt.as_bytes())
            .next()?
            .ok()?;
        Some(Issued {
            serial: serial_of(&der),
            certificate: crt,
            ca: text("ca.crt")?,
            key: text("tls.key")?,
        })
    }

    /// What the serving Secret holds.
    pub async fn issued(&self) -> Option<Issued> {
        self.issued_in(&self.deployed.secret).await
    }

    /// Every caBundle the API server uses to call the operator: each entry of both webhook
    /// configurations, and the CRD's conversion; `None` for an entry without one.
    pub async fn ca_bundles(&self) -> Vec<Option<String>> {
        let text = |b: Option<k8s_openapi::ByteString>| b.and_then(|b| String::from_utf8(b.0).ok());
        let mut bundles = Vec::new();
        let mutating: Api<MutatingWebhookConfiguration> = Api::all(self.client.clone());
        if let Ok(configuration) = mutating.get(MUTATING).await {
            for webhook in configuration.webhooks.unwrap_or_default() {
                bundles.push(text(webhook.client_config.ca_bundle));
            }
        }
        let validating: Api<ValidatingWebhookConfiguration> = Api::all(self.client.clone());
        if let Ok(configuration) = validating.get(VALIDATING).await {
            for webhook in configuration.webhooks.unwrap_or_default() {
                bundles.push(text(webhook.client_config.ca_bundle));
            }
        }
        let crds: Api<CustomResourceDefinition> = Api::all(self.client.clone());
        let conversion = crds
            .get(CRD_NAME)
            .await
            .ok()
            .and_then(|crd| crd.spec.conversion)
            .and_then(|c| c.webhook)
            .and_then(|w| w.client_config)
            .and_then(|c| c.ca_bundle);
        bundles.push(text(conversion));
        bundles
    }

    /// Whether every caBundle is `ca`.
    pub async fn every_bundle_is(&self, ca: &str) -> bool {
        all_bundles_are(&self.ca_bundles().await, ca)
    }

    /// The operator's pods (the Deployment's), by name.
    pub async fn operator_pods(&self) -> Vec<Pod> {
        testkit::control_plane::pods_of_deployment(
            &self.client,
            &self.deployed.namespace,
            &self.deployed.deployment,
        )
        .await
    }

    /// The serial each replica serves on its webhook port, verified against `ca` for the
    /// Service's DNS name as the API server dials it; `None` where the handshake fails.
    pub async fn served_serials(&self, pods: &[Pod], ca: &str) -> Vec<Option<String>> {
        let name = format!("{WEBHOOK_SERVICE}.{}.svc", self.deployed.namespace);
        let mut serials = Vec::new();
        for pod in pods {
            let serial = match pod_ip(pod).and_then(|ip| ip.parse().ok()) {
                Some(ip) => {
                    let address = std::net::SocketAddr::new(ip, WEBHOOK_PORT);
                    TlsClient::new(address, ca)
                        .with_server_name(&name)
                        .served_serial()
                        .await
                }
                None => None,
            };
            serials.push(serial);
        }
        serials
    }
}

/// Whether `bundles` (as [`Env::ca_bundles`] reads them: two webhooks and the conversion at
/// least) are all `ca`.
pub fn all_bundles_are(bundles: &[Option<String>], ca: &str) -> bool {
    bundles.len() >= 3 && bundles.iter().all(|b| b.as_deref() == Some(ca))
}

/// Each pod's containers' restart counts, summed, by pod name.
pub fn restarts(pods: &[Pod]) -> Vec<(String, i32)> {
    pods.iter()
        .map(|pod| {
            let count = pod
                .status
                .as_ref()
                .and_then(|s| s.container_statuses.as_ref())
                .map(|c| c.iter().map(|c| c.restart_count).sum())
                .unwrap_or(0);
            (pod.metadata.name.clone().unwrap_or_default(), count)
        })
        .collect()
}

pub use testkit::containers::pod_ip;

pub use testkit::containers::operator_process;
