//! Installs the operator on a local control plane the way a user's cluster does, through
//! `hack/olm-install.sh`: the node agent as the one node, the real OLM, `opm serve` of a
//! catalog and a Subscription. It then finds what OLM made on the node: each pod's container
//! logs and processes.
//!
//! What the install started stops with the control plane (`hack/control-plane.sh stop` stops
//! the node agent, opm and OLM first), so there is nothing to drop here.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use crate::control_plane::ControlPlane;
use crate::repository;

/// The script that installs through OLM.
const SCRIPT: &str = "olm-install.sh";

/// The environment variable through which the node agent hands each container its pod IP.
const POD_IP_VARIABLE: &str = crate::node_agent::sandbox::POD_IP_VARIABLE;

/// Why the install did not finish.
#[derive(Debug, thiserror::Error)]
pub enum InstallError {
    /// A binary the install runs is not built.
    #[error("{} is missing: run `make build` (cargo build --workspace --bins)", .0.display())]
    NotBuilt(PathBuf),
    /// The script could not be run at all.
    #[error("cannot run {}: {error}", .script.display())]
    Run {
        /// The script.
        script: PathBuf,
        /// What the system said.
        error: std::io::Error,
    },
    /// The script failed; its standard error says at which step.
    #[error("the install through OLM failed ({} start: {status}):\n{stderr}", .script.display())]
    Failed {
        /// The script.
        script: PathBuf,
        /// How it exited.
        status: std::process::ExitStatus,
        /// What it wrote to standard error.
        stderr: String,
    },
    /// The script succeeded but did not say what it installed.
    #[error("{} start printed no {key}=: {stdout:?}", .script.display())]
    Unreported {
        /// The script.
        script: PathBuf,
        /// The missing key.
        key: &'static str,
        /// What it printed.
        stdout: String,
    },
}

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
    for built in [&source.operator_binary, &source.node_agent] {
        if !built.is_file() {
            return Err(InstallError::NotBuilt(built.clone()));
        }
    }
    let script = repository::hack(SCRIPT);
    let started = Instant::now();
    let output = Command::new(&script)
        .arg("start")
        .env("CONTROL_PLANE_DIR", plane.state_dir())
        .env("OPERATOR_BINARY", &source.operator_binary)
        .env("NODE_AGENT", &source.node_agent)
        .env("CATALOG", &source.catalog)
        .output()
        .map_err(|error| InstallError::Run {
            script: script.clone(),
            error,
        })?;
    let ready_after = started.elapsed();
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    if !output.status.success() {
        return Err(InstallError::Failed {
            script,
            status: output.status,
            stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
        });
    }
    let value = |key: &'static str| {
        stdout
            .lines()
            .find_map(|line| line.strip_prefix(key)?.strip_prefix('='))
            .map(str::to_string)
            .ok_or_else(|| InstallError::Unreported {
                script: script.clone(),
                key,
                stdout: stdout.clone(),
            })
    };
    let csv_seconds = value("CSV_SECONDS")?;
    Ok(Installed {
        csv: value("CSV")?,
        deployment: value("DEPLOYMENT")?,
        namespace: value("NAMESPACE")?,
        node_state: PathBuf::from(value("NODE_STATE")?),
        images_dir: PathBuf::from(value("IMAGES_DIR")?),
        csv_succeeded_after: csv_seconds
            .parse::<f64>()
            .ok()
            .and_then(|s| Duration::try_from_secs_f64(s).ok())
            .ok_or(InstallError::Unreported {
                script,
                key: "CSV_SECONDS",
                stdout,
            })?,
        ready_after,
    })
}

impl Installed {
    /// Everything the containers of the pod with `uid` wrote so far (every container's log,
    /// each under a `==> NAME.log <==` header), or an empty string for a pod the node agent
    /// does not run.
    pub fn pod_logs(&self, uid: &str) -> String {
        let dir = self.node_state.join("pods").join(uid).join("logs");
        let Ok(entries) = std::fs::read_dir(&dir) else {
            return String::new();
        };
        let mut files: Vec<PathBuf> = entries.flatten().map(|e| e.path()).collect();
        files.sort();
        files
            .iter()
            .filter_map(|file| {
                let text = std::fs::read_to_string(file).ok()?;
                let name = file.file_name()?.to_string_lossy().into_owned();
                Some(format!("==> {name} <==\n{text}"))
            })
            .collect()
    }
}

/// The processes the node agent runs for the pod at `pod_ip` whose program is `program`.
pub fn pod_processes(pod_ip: &str, program: &Path) -> Vec<u32> {
    let wanted = format!("{POD_IP_VARIABLE}={pod_ip}");
    let program = program.canonicalize().unwrap_or_else(|_| program.into());
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    let mut pids: Vec<u32> = entries
        .flatten()
        .filter_map(|entry| entry.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| {
            let exe = std::fs::read_link(format!("/proc/{pid}/exe")).ok();
            let runs = exe.is_some_and(|exe| {
                exe == program
                    || exe.to_string_lossy() == format!("{} (deleted)", program.display())
            });
            runs && std::fs::read(format!("/proc/{pid}/environ")).is_ok_and(|environ| {
                environ
                    .split(|b| *b == 0)
                    .any(|variable| variable == wanted.as_bytes())
            })
        })
        .collect();
    pids.sort_unstable();
    pids
}
