//! Installs the operator on a local control plane with a real node the way a cluster without
//! OLM does, through `hack/deploy.sh` (what `make deploy` runs): the images built from the
//! shipped Dockerfiles and pushed to the registry the node pulls from, cert-manager's
//! controller and cainjector, and `config/default` applied through `hack/node/deploy` (the
//! operand's image set to the memcached stand-in). `undeploy` deletes it again.
//!
//! cert-manager stops with the control plane (`hack/control-plane.sh stop` stops it first),
//! and the operator's pods with the node, so there is nothing to drop here.

use std::time::Duration;

use kube::Client;

use crate::control_plane::{ControlPlane, Node};
use crate::install_script::{self, ScriptError};

/// The script that deploys.
const SCRIPT: &str = "deploy.sh";

/// What `config/default` installed.
#[derive(Clone, Debug)]
pub struct Deployed {
    /// The namespace of the Deployment, the Certificates and the Secret.
    pub namespace: String,
    /// The operator's Deployment.
    pub deployment: String,
    /// The serving Certificate.
    pub certificate: String,
    /// The Secret cert-manager writes the serving certificate to.
    pub secret: String,
    /// From the start of the script to webhooks that answer.
    pub ready_after: Duration,
}

/// Deploys `config/default` on `plane`, whose node is a real one ([`Node::Kubelet`]), and
/// waits until the operator's webhooks answer. Blocks; from async code call it through
/// `spawn_blocking`.
pub fn deploy(plane: &ControlPlane) -> Result<Deployed, ScriptError> {
    let no_env: [(&str, &str); 0] = [];
    let report = install_script::run(plane, SCRIPT, "start", no_env)?;
    Ok(Deployed {
        namespace: report.value("NAMESPACE")?,
        deployment: report.value("DEPLOYMENT")?,
        certificate: report.value("CERTIFICATE")?,
        secret: report.value("SECRET")?,
        ready_after: report.seconds("READY_SECONDS")?,
    })
}

/// Starts a control plane with a real node and deploys on it, from async code; returns the
/// plane, an admin client and what was deployed, or which step failed, for a scenario runner.
pub async fn start_and_deploy() -> Result<(ControlPlane, Client, Deployed), String> {
    start_and_deploy_with(None).await
}

/// [`start_and_deploy`], the API server writing an audit log by `audit_policy` when given
/// ([`ControlPlane::start_with`]).
pub async fn start_and_deploy_with(
    audit_policy: Option<std::path::PathBuf>,
) -> Result<(ControlPlane, Client, Deployed), String> {
    let plane = tokio::task::spawn_blocking(move || {
        ControlPlane::start_with(Node::Kubelet, audit_policy.as_deref())
    })
    .await
    .map_err(|e| format!("the control plane's start did not finish: {e}"))?
    .map_err(|e| e.to_string())?;
    let client = plane.client().await.map_err(|e| e.to_string())?;
    let (plane, deployed) = tokio::task::spawn_blocking(move || {
        let deployed = deploy(&plane);
        (plane, deployed)
    })
    .await
    .map_err(|e| format!("make deploy did not finish: {e}"))?;
    let deployed = deployed.map_err(|e| e.to_string())?;
    eprintln!(
        "deployed config/default with cert-manager: webhooks answering after {:.1} s",
        deployed.ready_after.as_secs_f64()
    );
    Ok((plane, client, deployed))
}

/// Deletes everything `config/default` made on `plane` (`make undeploy`) and waits until it
/// is gone; returns the script's account of the steps and of what is left.
pub fn undeploy(plane: &ControlPlane) -> Result<String, ScriptError> {
    let no_env: [(&str, &str); 0] = [];
    Ok(install_script::run(plane, SCRIPT, "undeploy", no_env)?.stderr)
}
