//! Installs the operator on a local control plane with a real node the way a Helm user does,
//! through `hack/helm.sh`: the chart pushed to the local registry as an OCI artifact and
//! `helm install`ed from there, with cert-manager issuing the webhooks' certificate. Also
//! pushes another chart (the next release's), runs the pinned helm against the cluster, and
//! uninstalls.
//!
//! cert-manager stops with the control plane (`hack/control-plane.sh stop` stops it first),
//! and the operator's pods with the node, so there is nothing to drop here.

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use kube::Client;

use crate::control_plane::{ControlPlane, Node};
use crate::install_script::{self, ScriptError};

/// The script that installs with Helm.
const SCRIPT: &str = "helm.sh";

/// What `helm install` installed.
#[derive(Clone, Debug)]
pub struct Installed {
    /// The release's namespace: the Deployment's, the Certificates' and the Secret's.
    pub namespace: String,
    /// The release's name.
    pub release: String,
    /// The chart's OCI reference, without its version (`oci://ADDRESS/charts/NAME`).
    pub chart: String,
    /// The chart's version.
    pub version: String,
    /// The operator's Deployment.
    pub deployment: String,
    /// The operand image the release was installed with (`relatedImages.memcached`).
    pub memcached_image: String,
    /// From the start of the script to webhooks that answer.
    pub ready_after: Duration,
}

/// A chart pushed to the local registry.
#[derive(Clone, Debug)]
pub struct Pushed {
    /// Its OCI reference, without its version.
    pub chart: String,
    /// Its version.
    pub version: String,
}

/// What the pinned helm printed, and whether it succeeded.
#[derive(Clone, Debug)]
pub struct HelmOutput {
    /// Whether it exited 0.
    pub success: bool,
    /// Its standard output.
    pub stdout: String,
    /// Its standard error.
    pub stderr: String,
}

/// Installs the chart on `plane`, whose node is a real one ([`Node::Kubelet`]), and waits
/// until the operator's webhooks answer. Blocks; from async code call it through
/// `spawn_blocking`.
pub fn install(plane: &ControlPlane) -> Result<Installed, ScriptError> {
    install_with(plane, &[])
}

/// [`install`] with more of the script's variables: `CERTIFICATES` (`operator` for the
/// operator's own self-signed certificate, without cert-manager) and `HELM_SET` (more
/// values, space-separated `KEY=VALUE`).
pub fn install_with(plane: &ControlPlane, env: &[(&str, &str)]) -> Result<Installed, ScriptError> {
    let report = install_script::run(plane, SCRIPT, "start", env.iter().copied())?;
    Ok(Installed {
        namespace: report.value("NAMESPACE")?,
        release: report.value("RELEASE")?,
        chart: report.value("CHART")?,
        version: report.value("VERSION")?,
        deployment: report.value("DEPLOYMENT")?,
        memcached_image: report.value("MEMCACHED_IMAGE")?,
        ready_after: report.seconds("READY_SECONDS")?,
    })
}

/// Starts a control plane with a real node and installs the chart on it, from async code;
/// returns the plane, an admin client and what was installed, or which step failed, for a
/// scenario runner.
pub async fn start_and_install() -> Result<(ControlPlane, Client, Installed), String> {
    let plane = tokio::task::spawn_blocking(|| ControlPlane::start_with(Node::Kubelet, None))
        .await
        .map_err(|e| format!("the control plane's start did not finish: {e}"))?
        .map_err(|e| e.to_string())?;
    let client = plane.client().await.map_err(|e| e.to_string())?;
    let (plane, installed) = tokio::task::spawn_blocking(move || {
        let installed = install(&plane);
        (plane, installed)
    })
    .await
    .map_err(|e| format!("helm install did not finish: {e}"))?;
    let installed = installed.map_err(|e| e.to_string())?;
    eprintln!(
        "installed {} {} with helm: webhooks answering after {:.1} s",
        installed.chart,
        installed.version,
        installed.ready_after.as_secs_f64()
    );
    Ok((plane, client, installed))
}

/// Packages the chart in `dir` and pushes it to the local registry. Blocks.
pub fn push(plane: &ControlPlane, dir: &Path) -> Result<Pushed, ScriptError> {
    let no_env: [(&str, &str); 0] = [];
    let report = install_script::run_with_args(plane, SCRIPT, "push", &[dir.as_os_str()], no_env)?;
    Ok(Pushed {
        chart: report.value("CHART")?,
        version: report.value("VERSION")?,
    })
}

/// Runs the pinned helm with `args` against the control plane whose state directory is
/// `state` ([`ControlPlane::state_dir`]). Blocks.
pub fn run_in(state: &Path, args: &[&str]) -> HelmOutput {
    let script = crate::repository::hack(SCRIPT);
    match Command::new(&script)
        .arg("run")
        .args(args)
        .env("CONTROL_PLANE_DIR", state)
        .output()
    {
        Ok(output) => HelmOutput {
            success: output.status.success(),
            stdout: String::from_utf8_lossy(&output.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
        },
        Err(error) => HelmOutput {
            success: false,
            stdout: String::new(),
            stderr: format!("cannot run {}: {error}", script.display()),
        },
    }
}

/// `helm uninstall`s the release and waits until nothing of the operator is left but the CRD,
/// the Memcacheds and cert-manager's Secrets; returns the script's account of the steps and
/// of what was kept.
pub fn uninstall(plane: &ControlPlane) -> Result<String, ScriptError> {
    let no_env: [(&str, &str); 0] = [];
    Ok(install_script::run(plane, SCRIPT, "uninstall", no_env)?.stderr)
}
