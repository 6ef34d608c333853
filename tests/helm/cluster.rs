//! Sets up what the scenarios run against: a local control plane with a real node, with
//! cert-manager, and the operator installed from the chart in the local registry
//! (`testkit::helm`); and the helpers the scenarios share: helm and kubectl against the
//! cluster, the operator's pods, and a Memcached's availability.

use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use kube::Client;
use testkit::control_plane::ControlPlane;
use testkit::helm::{HelmOutput, Installed, start_and_install};

pub use testkit::containers::operator_process;
pub use testkit::scenarios::eventually;

/// How long a scenario waits for the cluster to act.
pub const WAIT: Duration = Duration::from_secs(120);

/// Everything the scenarios share.
pub struct Env {
    /// The admin client.
    pub client: Client,
    /// What `helm install` installed.
    pub installed: Installed,
    /// Drops last: stops cert-manager, the node and the control plane.
    pub plane: ControlPlane,
}

impl Env {
    /// Starts the control plane and installs the chart from the local registry.
    pub async fn start() -> Result<Env, String> {
        let (plane, client, installed) = start_and_install().await?;
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

    /// Runs the project's kubectl against the control plane; returns (success, stdout,
    /// stderr).
    pub fn kubectl(&self, args: &[&str], stdin: Option<&str>) -> (bool, String, String) {
        match self.plane.kubectl(args, stdin) {
            Ok(output) => (output.success, output.stdout, output.stderr),
            Err(error) => panic!("kubectl {}: {error}", args.join(" ")),
        }
    }

    /// Runs the pinned helm with `args` against the cluster, from async code.
    pub async fn helm(&self, args: &[&str]) -> HelmOutput {
        let args: Vec<String> = args.iter().map(|a| a.to_string()).collect();
        let state = self.plane.state_dir().to_path_buf();
        tokio::task::spawn_blocking(move || {
            let args: Vec<&str> = args.iter().map(String::as_str).collect();
            testkit::helm::run_in(&state, &args)
        })
        .await
        .expect("helm finished")
    }

    /// `helm upgrade` of the release to `chart` at `version` with `values` (`--set` and
    /// `--set-json` arguments) on top of the values it was installed with, waiting for the
    /// Deployment's rollout; panics with what helm said when it fails.
    pub async fn upgrade(&self, chart: &str, version: &str, values: &[&str]) -> HelmOutput {
        let installed = &self.installed;
        let mut args = vec![
            "upgrade",
            installed.release.as_str(),
            chart,
            "--version",
            version,
            "--plain-http",
            "--namespace",
            installed.namespace.as_str(),
            "--reset-then-reuse-values",
            "--wait",
            "--timeout",
            "180s",
        ];
        args.extend_from_slice(values);
        let output = self.helm(&args).await;
        assert!(output.success, "helm {}: {}", args.join(" "), output.stderr);
        output
    }

    /// The operator's pods (the Deployment's) that are not being deleted, by name.
    pub async fn operator_pods(&self) -> Vec<Pod> {
        testkit::control_plane::pods_of_deployment(
            &self.client,
            &self.installed.namespace,
            &self.installed.deployment,
        )
        .await
    }

    /// Waits until Memcached `namespace/name` is Available with `servers` servers; returns
    /// its `status.servers`.
    pub async fn available(&self, namespace: &str, name: &str, servers: usize) -> Vec<String> {
        testkit::control_plane::memcached_available(
            &self.client,
            namespace,
            name,
            Some(servers),
            WAIT,
        )
        .await
    }
}
