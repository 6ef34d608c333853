//! Sets up what the scenarios run against: a local control plane whose one node is the test
//! kit's node agent, with the operator installed by the real OLM from the shipped catalog
//! (`testkit::olm_install`), and the helpers the scenarios share to look at what OLM made.

use std::time::Duration;

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::Pod;
use kube::Client;
use kube::api::{Api, ListParams};
use memcached_operator::manager::DEFAULT_LEASE_NAME;
use testkit::control_plane::ControlPlane;
use testkit::olm_install::{InstallSource, Installed, install};

/// The operator binary cargo built for these tests: what the operator image runs.
pub const OPERATOR: &str = env!("CARGO_BIN_EXE_memcached-operator");

/// How long a scenario waits for the cluster to act.
pub const WAIT: Duration = Duration::from_secs(90);

/// Everything the scenarios share.
pub struct Env {
    /// The admin client.
    pub client: Client,
    /// What OLM installed.
    pub installed: Installed,
    /// Drops last: stops the node agent, opm, OLM and the control plane.
    pub plane: ControlPlane,
}

impl Env {
    /// Starts the control plane and installs the operator through OLM.
    pub async fn start() -> Result<Env, String> {
        let (plane, client) = ControlPlane::start_with_client().await?;
        let source = InstallSource::shipped(std::path::Path::new(OPERATOR));
        let (plane, installed) = tokio::task::spawn_blocking(move || {
            let installed = install(&plane, &source);
            (plane, installed)
        })
        .await
        .map_err(|e| format!("the install through OLM did not finish: {e}"))?;
        let installed = installed.map_err(|e| e.to_string())?;
        eprintln!(
            "installed through OLM: CSV {} Succeeded after {:.1} s, webhooks answering after {:.1} s",
            installed.csv,
            installed.csv_succeeded_after.as_secs_f64(),
            installed.ready_after.as_secs_f64()
        );
        Ok(Env {
            client,
            installed,
            plane,
        })
    }

    /// Creates a namespace for a scenario and returns its name.
    pub async fn create_namespace(&self, name: &str) -> String {
        testkit::control_plane::create_namespace(&self.client, name).await
    }

    /// The CSV the Subscription has installed now (the install's, or an upgrade's).
    pub fn current_csv(&self) -> String {
        let (ok, stdout, stderr) = self.kubectl(
            &[
                "get",
                "subscription",
                "memcached-operator",
                "-n",
                &self.installed.namespace,
                "-o",
                "jsonpath={.status.installedCSV}",
            ],
            None,
        );
        assert!(
            ok && !stdout.is_empty(),
            "the Subscription's installedCSV: {stderr}"
        );
        stdout
    }

    /// The operator's Deployment, as OLM wrote it.
    pub async fn deployment(&self) -> Deployment {
        let api: Api<Deployment> = Api::namespaced(self.client.clone(), &self.installed.namespace);
        api.get(&self.installed.deployment)
            .await
            .unwrap_or_else(|e| panic!("Deployment {}: {e}", self.installed.deployment))
    }

    /// The operator's pods (the Deployment's), by name.
    pub async fn operator_pods(&self) -> Vec<Pod> {
        let deployment = self.deployment().await;
        let selector = deployment
            .spec
            .and_then(|spec| spec.selector.match_labels)
            .unwrap_or_default()
            .iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect::<Vec<_>>()
            .join(",");
        let api: Api<Pod> = Api::namespaced(self.client.clone(), &self.installed.namespace);
        let mut pods = api
            .list(&ListParams::default().labels(&selector))
            .await
            .unwrap_or_else(|e| panic!("the operator's pods ({selector}): {e}"))
            .items;
        pods.sort_by(|a, b| a.metadata.name.cmp(&b.metadata.name));
        pods
    }

    /// The operator's leader Lease.
    pub async fn lease(&self) -> Lease {
        let api: Api<Lease> = Api::namespaced(self.client.clone(), &self.installed.namespace);
        api.get(DEFAULT_LEASE_NAME)
            .await
            .unwrap_or_else(|e| panic!("Lease {DEFAULT_LEASE_NAME}: {e}"))
    }

    /// The name of the pod whose replica holds the lease (the identity is `POD_PID_RANDOM`).
    pub async fn leader_pod(&self) -> Option<String> {
        let identity = self.lease().await.spec?.holder_identity?;
        identity.split('_').next().map(str::to_string)
    }

    /// Runs the project's kubectl against the control plane; returns (success, stdout,
    /// stderr).
    pub fn kubectl(&self, args: &[&str], stdin: Option<&str>) -> (bool, String, String) {
        match self.plane.kubectl(args, stdin) {
            Ok(output) => (output.success, output.stdout, output.stderr),
            Err(error) => panic!("kubectl {}: {error}", args.join(" ")),
        }
    }
}

pub use testkit::node_pods::pod_ip;

pub use testkit::scenarios::eventually;

/// Serves the file-based catalog in `catalog` with `opm serve` on a free port, its termination
/// log and temporary files in `scratch`, until the returned child is dropped; returns when it
/// answers.
pub async fn serve_catalog(
    catalog: &std::path::Path,
    scratch: &std::path::Path,
) -> (tokio::process::Child, u16) {
    use testkit::ports::free_port;
    let port = free_port();
    let opm = tokio::process::Command::new(testkit::repository::tool("opm"))
        .arg("serve")
        .arg(catalog)
        .args([
            "-p",
            &port.to_string(),
            "--pprof-addr",
            &format!("127.0.0.1:{}", free_port()),
        ])
        .arg("-t")
        .arg(scratch.join("termination.log"))
        .env("TMPDIR", scratch)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .expect("start opm serve");
    eventually("the catalog answers", WAIT, || async {
        tokio::net::TcpStream::connect(("127.0.0.1", port))
            .await
            .ok()
            .map(|_| ())
    })
    .await;
    (opm, port)
}
