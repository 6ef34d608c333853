//! Installs the operator on a local control plane the way a user's cluster does, through
//! `hack/olm-install.sh`: the node agent as the one node, the real OLM, `opm serve` of a
//! catalog and a Subscription. What OLM made runs on the node agent (`node_pods` finds its
//! pods' logs and processes).
//!
//! What the install started stops with the control plane (`hack/control-plane.sh stop` stops
//! the node agent, opm and OLM first), so there is nothing to drop here.

use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::control_plane::ControlPlane;
use crate::install_script::{self, ScriptError, require_built};
use crate::repository;

/// The script that installs through OLM.
const SCRIPT: &str = "olm-install.sh";

/// Why the install did not finish.
pub type InstallError = ScriptError;

/// What OLM installed.
#[derive(Clone, Debug)]
pub struct Installed {
    /// The ClusterServiceVersion's name.
    pub csv: String,
    /// The operator's Deployment, as OLM named it.
    pub deployment: String,
    /// The namespace of the Subscription, the CSV and the Deployment.
    pub namespace: String,
    /// The node agent's state directory (pods' files and logs).
    pub node_state: PathBuf,
    /// From the start of the install to the CSV's Succeeded, as the script measured it.
    pub csv_succeeded_after: Duration,
    /// From the start of the install to webhooks that answer.
    pub ready_after: Duration,
    /// Where JSON image tables reach the running node agent (a new release's images).
    pub images_dir: PathBuf,
}

/// The programs the install runs, and the catalog it serves.
#[derive(Clone, Debug)]
pub struct InstallSource {
    /// What the operator image runs.
    pub operator_binary: PathBuf,
    /// The node agent.
    pub node_agent: PathBuf,
    /// The file-based catalog `opm serve` serves.
    pub catalog: PathBuf,
}

impl InstallSource {
    /// The operator binary given, with the node agent and the shipped `catalog/` of this
    /// repository.
    pub fn shipped(operator_binary: &Path) -> InstallSource {
        InstallSource {
            operator_binary: operator_binary.to_path_buf(),
            node_agent: repository::built_binary("node-agent"),
            catalog: repository::root().join("catalog"),
        }
    }
}

/// Installs through OLM on `plane` and waits until the operator's webhooks answer. Blocks;
/// from async code call it through `spawn_blocking`.
pub fn install(plane: &ControlPlane, source: &InstallSource) -> Result<Installed, InstallError> {
    require_built([&source.operator_binary, &source.node_agent])?;
    let report = install_script::run(
        plane,
        SCRIPT,
        "start",
        [
            ("OPERATOR_BINARY", &source.operator_binary),
            ("NODE_AGENT", &source.node_agent),
            ("CATALOG", &source.catalog),
        ],
    )?;
    Ok(Installed {
        csv: report.value("CSV")?,
        deployment: report.value("DEPLOYMENT")?,
        namespace: report.value("NAMESPACE")?,
        node_state: PathBuf::from(report.value("NODE_STATE")?),
        images_dir: PathBuf::from(report.value("IMAGES_DIR")?),
        csv_succeeded_after: report.seconds("CSV_SECONDS")?,
        ready_after: report.elapsed,
    })
}

impl Installed {
    /// Everything the containers of the pod with `uid` wrote so far (`node_pods::pod_logs`).
    pub fn pod_logs(&self, uid: &str) -> String {
        crate::node_pods::pod_logs(&self.node_state, uid)
    }
}
