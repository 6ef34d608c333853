//! Installs the operator on a local control plane with a real node the way a user's cluster
//! does, through `hack/olm-install.sh`: OLM running in the cluster, the shipped catalog's image
//! as a CatalogSource, and a Subscription whose `config.env` points the operand at the
//! memcached stand-in. OLM's registry pod, its bundle-unpack Job and the operator's Deployment
//! run on the node, from images built here.
//!
//! What OLM made stops with the node (`hack/control-plane.sh stop`), so there is nothing to
//! drop here.

use std::time::Duration;

use crate::control_plane::ControlPlane;
use crate::install_script::{self, ScriptError};

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
    /// From the start of the install to the CSV's Succeeded, as the script measured it.
    pub csv_succeeded_after: Duration,
    /// From the start of the install to webhooks that answer.
    pub ready_after: Duration,
}

/// Installs through OLM on `plane`, whose node is a real one ([`crate::control_plane::Node::Kubelet`]),
/// and waits until the operator's webhooks answer. Blocks; from async code call it through
/// `spawn_blocking`.
pub fn install(plane: &ControlPlane) -> Result<Installed, InstallError> {
    let no_env: [(&str, &str); 0] = [];
    let report = install_script::run(plane, SCRIPT, "start", no_env)?;
    Ok(Installed {
        csv: report.value("CSV")?,
        deployment: report.value("DEPLOYMENT")?,
        namespace: report.value("NAMESPACE")?,
        csv_succeeded_after: report.seconds("CSV_SECONDS")?,
        ready_after: report.elapsed,
    })
}
