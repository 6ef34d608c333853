//! Sets up what the scenarios run against: a local control plane with a real node (kubelet,
//! containerd, the images built from the shipped Dockerfiles), with the operator installed by
//! the real OLM from the shipped catalog's image (`testkit::olm_install`), and the helpers the
//! scenarios share to look at what OLM made and to publish another catalog.

use std::time::Duration;

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::Pod;
use kube::Client;
use kube::api::{Api, ListParams};
use testkit::control_plane::{ControlPlane, Node};
use testkit::olm_install::{Installed, install};

/// The operator binary cargo built for these tests, for the drills that run it as a process
/// of their own.
pub const OPERATOR: &str = env!("CARGO_BIN_EXE_memcached-operator");

/// How long a scenario waits for the cluster to act: a kubelet brings a changed Secret into a
/// pod at its next sync, up to a minute.
pub const WAIT: Duration = Duration::from_secs(180);

/// Everything the scenarios share.
pub struct Env {
    /// The admin client.
    pub client: Client,
    /// What OLM installed.
    pub installed: Installed,
    /// Drops last: stops the node (and with it OLM's pods and the operator's) and the control
    /// plane.
    pub plane: ControlPlane,
}

impl Env {
    /// Starts the control plane and installs the operator through OLM.
    pub async fn start() -> Result<Env, String> {
        let (plane, client) = ControlPlane::start_as_with_client(Node::Kubelet).await?;
        let (plane, installed) = tokio::task::spawn_blocking(move || {
            let installed = install(&plane);
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

    /// Runs the project's kubectl against the control plane; returns (success, stdout,
    /// stderr).
    pub fn kubectl(&self, args: &[&str], stdin: Option<&str>) -> (bool, String, String) {
        match self.plane.kubectl(args, stdin) {
            Ok(output) => (output.success, output.stdout, output.stderr),
            Err(error) => panic!("kubectl {}: {error}", args.join(" ")),
        }
    }

    /// Everything the containers of `pod` wrote (`testkit::containers::pod_logs`).
    pub async fn pod_logs(&self, pod: &Pod) -> String {
        testkit::containers::pod_logs(&self.client, pod).await
    }

    /// Waits until OLM reaches the registry pod of CatalogSource `olm/name` (READY): a
    /// Subscription made before fails to resolve ("no registry client established") until it
    /// does, so a scenario subscribes once it is, as hack/olm-install.sh does.
    pub async fn catalog_source_ready(&self, name: &str) {
        eventually(&format!("CatalogSource {name} READY"), WAIT, || async {
            let (_, state, _) = self.kubectl(
                &[
                    "get",
                    "catalogsource",
                    name,
                    "-n",
                    "olm",
                    "-o",
                    "jsonpath={.status.connectionState.lastObservedState}",
                ],
                None,
            );
            (state.trim() == "READY").then_some(())
        })
        .await;
    }

    /// Points the CatalogSource the Subscription follows at the catalog image `image`; OLM
    /// replaces its registry pod with one of that image.
    pub fn point_catalog_source_at(&self, image: &str) {
        let patch = serde_json::json!({"spec": {"image": image}}).to_string();
        let (ok, _, stderr) = self.kubectl(
            &[
                "patch",
                "catalogsource",
                "memcached-operator",
                "-n",
                "olm",
                "--type=merge",
                "-p",
                &patch,
            ],
            None,
        );
        assert!(ok, "kubectl patch catalogsource: {stderr}");
    }
}

pub use testkit::containers::pod_ip;

pub use testkit::scenarios::eventually;

pub use testkit::containers::operator_process;

/// Builds the images `names` of the release whose packaging output is in `dir`, tagged
/// `version` (`testkit::images`), without blocking the runtime.
pub async fn build_release_images(dir: &std::path::Path, version: &str, names: &[&str]) {
    let dir = dir.to_path_buf();
    let version = version.to_string();
    let names: Vec<String> = names.iter().map(|n| n.to_string()).collect();
    tokio::task::spawn_blocking(move || {
        let names: Vec<&str> = names.iter().map(String::as_str).collect();
        let release = testkit::images::Release {
            dir: &dir,
            version: &version,
        };
        testkit::images::build_release(release, &names)
    })
    .await
    .expect("the image build finishes")
    .unwrap_or_else(|error| panic!("{error}"));
}

/// The reference of image `name` of the release tagged `version`.
pub fn release_image(dir: &std::path::Path, version: &str, name: &str) -> String {
    let release = testkit::images::Release { dir, version };
    testkit::images::release_reference(release, name).unwrap_or_else(|error| panic!("{error}"))
}

/// Writes what the images of the release `options` describe are built from below `dir`: its
/// bundle and catalog, and the Dockerfiles of their images, as `memcached-packager generate`
/// writes them.
pub fn write_release(options: &memcached_packager::bundle::Options, dir: &std::path::Path) {
    let files = memcached_packager::generate::Plan::new(options.clone())
        .and_then(|plan| plan.render())
        .expect("the release renders");
    for path in files.paths() {
        let image_input = path.starts_with("bundle/")
            || path.starts_with("catalog/")
            || path == "bundle.Dockerfile"
            || path == "catalog.Dockerfile";
        if !image_input {
            continue;
        }
        let target = dir.join(path);
        std::fs::create_dir_all(target.parent().expect("a parent")).expect("mkdir");
        std::fs::write(&target, files.get(path).expect("content")).expect("write");
    }
}

/// `--registry-mirror`s sending each host the images built here name (`quay.io`,
/// `registry.invalid`) to `registry`, below a path of the host's name, as the local registry
/// stores them.
pub fn mirrors_at(registry: &str) -> Vec<memcached_packager::pin::Mirror> {
    ["quay.io", "registry.invalid"]
        .iter()
        .map(|host| {
            format!("{host}=http://{registry}/{host}")
                .parse()
                .expect("a mirror")
        })
        .collect()
}
