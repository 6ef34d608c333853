//! Installs the operator on a local control plane the way a cluster without OLM does, through
//! `hack/deploy.sh` (what `make deploy` runs): cert-manager's controller and cainjector, and
//! `config/default` applied. On a control plane with a real node ([`deploy_on_real_node`])
//! the images are built from the shipped Dockerfiles and pulled by containerd; otherwise the
//! node agent is the one node ([`deploy`]; `node_pods` finds its pods' logs and processes).
//! `undeploy` deletes it again.
//!
//! The node agent and cert-manager stop with the control plane (`hack/control-plane.sh stop`
//! stops them first), so there is nothing to drop here.

use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::control_plane::ControlPlane;
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

/// Deploys `config/default` on `plane` with the operator binary given and the repository's
/// node agent, and waits until the operator's webhooks answer. Blocks; from async code call it
/// through `spawn_blocking`.
pub fn deploy(plane: &ControlPlane, operator_binary: &Path) -> Result<Deployed, ScriptError> {
    let node_agent = repository::built_binary("node-agent");
    let operator_binary = operator_binary.to_path_buf();
    require_built([&operator_binary, &node_agent])?;
    let report = install_script::run(
        plane,
        SCRIPT,
        "start",
        [
            ("OPERATOR_BINARY", &operator_binary),
            ("NODE_AGENT", &node_agent),
        ],
    )?;
    Ok(Deployed {
        namespace: report.value("NAMESPACE")?,
        deployment: report.value("DEPLOYMENT")?,
        certificate: report.value("CERTIFICATE")?,
        secret: report.value("SECRET")?,
        node_state: PathBuf::from(report.value("NODE_STATE")?),
        ready_after: report.seconds("READY_SECONDS")?,
    })
}

/// Deploys `config/default` on `plane`, whose node is real ([`crate::control_plane::Node::Kubelet`]):
/// the operator and memcached images are built and pushed first, and the operand's image is
/// the Debian memcached stand-in (`hack/node/deploy`). Waits until the webhooks answer.
/// Blocks; from async code call it through `spawn_blocking`.
pub fn deploy_on_real_node(plane: &ControlPlane) -> Result<Deployed, ScriptError> {
    let no_env: [(&str, &str); 0] = [];
    let report = install_script::run(plane, SCRIPT, "start", no_env)?;
    Ok(Deployed {
        namespace: report.value("NAMESPACE")?,
        deployment: report.value("DEPLOYMENT")?,
        certificate: report.value("CERTIFICATE")?,
        secret: report.value("SECRET")?,
        node_state: PathBuf::from(report.value("NODE_STATE")?),
        ready_after: report.seconds("READY_SECONDS")?,
    })
}

/// Deletes everything `config/default` made on `plane` (`make undeploy`) and waits until it
/// is gone; returns the script's account of the steps and of what is left.
pub fn undeploy(plane: &ControlPlane) -> Result<String, ScriptError> {
    let no_env: [(&str, &str); 0] = [];
    Ok(install_script::run(plane, SCRIPT, "undeploy", no_env)?.stderr)
}
