//! Installs the operator on a local control plane the way a cluster without OLM does, through
//! `hack/deploy.sh` (what `make deploy` runs): cert-manager's controller and cainjector, and
//! `config/default` applied. On a control plane with a real node ([`Target::RealNode`])
//! the images are built from the shipped Dockerfiles and pulled by containerd; otherwise the
//! node agent is the one node ([`deploy`]; `node_pods` finds its pods' logs and processes).
//! `undeploy` deletes it again.
//!
//! The node agent and cert-manager stop with the control plane (`hack/control-plane.sh stop`
//! stops them first), so there is nothing to drop here.

use std::path::{Path, PathBuf};
use std::time::Duration;

use kube::Client;

use crate::control_plane::{ControlPlane, Node};
use crate::install_script::{self, ScriptError, require_built};
use crate::repository;

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
    /// The node agent's state directory (pods' files and logs).
    pub node_state: PathBuf,
    /// From the start of the script to webhooks that answer.
    pub ready_after: Duration,
}

/// The node `config/default` is deployed on.
#[derive(Clone, Copy, Debug)]
pub enum Target<'a> {
    /// The node agent, whose operator image runs this binary.
    NodeAgent(&'a Path),
    /// A real node ([`Node::Kubelet`]): the operator and memcached images are built and pushed
    /// first, and the operand's image is the Debian memcached stand-in (`hack/node/deploy`).
    RealNode,
}

impl Target<'_> {
    /// The kind of node the control plane starts with.
    fn node(self) -> Node {
        match self {
            Target::NodeAgent(_) => Node::None,
            Target::RealNode => Node::Kubelet,
        }
    }
}

/// Deploys `config/default` on `plane`, whose node is `target`'s, and waits until the
/// operator's webhooks answer. Blocks; from async code call it through `spawn_blocking`.
pub fn deploy(plane: &ControlPlane, target: Target<'_>) -> Result<Deployed, ScriptError> {
    let report = match target {
        Target::NodeAgent(operator_binary) => {
            let node_agent = repository::built_binary("node-agent");
            let operator_binary = operator_binary.to_path_buf();
            require_built([&operator_binary, &node_agent])?;
            install_script::run(
                plane,
                SCRIPT,
                "start",
                [
                    ("OPERATOR_BINARY", &operator_binary),
                    ("NODE_AGENT", &node_agent),
                ],
            )?
        }
        Target::RealNode => {
            let no_env: [(&str, &str); 0] = [];
            install_script::run(plane, SCRIPT, "start", no_env)?
        }
    };
    Ok(Deployed {
        namespace: report.value("NAMESPACE")?,
        deployment: report.value("DEPLOYMENT")?,
        certificate: report.value("CERTIFICATE")?,
        secret: report.value("SECRET")?,
        node_state: PathBuf::from(report.value("NODE_STATE")?),
        ready_after: report.seconds("READY_SECONDS")?,
    })
}

/// Starts a control plane with `target`'s node and deploys on it, from async code; returns the
/// plane, an admin client and what was deployed, or which step failed, for a scenario runner.
pub async fn start_and_deploy(
    target: Target<'static>,
) -> Result<(ControlPlane, Client, Deployed), String> {
    let (plane, client) = ControlPlane::start_as_with_client(target.node()).await?;
    let (plane, deployed) = tokio::task::spawn_blocking(move || {
        let deployed = deploy(&plane, target);
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
