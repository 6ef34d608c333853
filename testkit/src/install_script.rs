//! Runs one of the repository's install scripts (`hack/olm-install.sh`, `hack/deploy.sh`,
//! `hack/helm.sh`) against a local control plane and reads what it reports: the `KEY=VALUE`
//! lines it prints on standard output, and how long it took.

use std::ffi::OsStr;
use std::path::PathBuf;
use std::process::Command;
use std::time::{Duration, Instant};

use crate::control_plane::ControlPlane;
use crate::repository;

/// Why a script did not do its job.
#[derive(Debug, thiserror::Error)]
pub enum ScriptError {
    /// The script could not be run at all.
    #[error("cannot run {}: {error}", .script.display())]
    Run {
        /// The script.
        script: PathBuf,
        /// What the system said.
        error: std::io::Error,
    },
    /// The script failed; its standard error says at which step.
    #[error("{} {action} failed ({status}):\n{stderr}", .script.display())]
    Failed {
        /// The script.
        script: PathBuf,
        /// What it was asked to do.
        action: String,
        /// How it exited.
        status: std::process::ExitStatus,
        /// What it wrote to standard error.
        stderr: String,
    },
    /// The script succeeded but did not report a value.
    #[error("{} printed no {key}=: {stdout:?}", .script.display())]
    Unreported {
        /// The script.
        script: PathBuf,
        /// The missing key.
        key: &'static str,
        /// What it printed.
        stdout: String,
    },
}

/// What a script that succeeded printed.
#[derive(Debug)]
pub struct Report {
    script: PathBuf,
    /// Its standard output.
    pub stdout: String,
    /// Its standard error: the steps it took.
    pub stderr: String,
    /// From its start to its exit.
    pub elapsed: Duration,
}

impl Report {
    /// The value of its `KEY=VALUE` line.
    pub fn value(&self, key: &'static str) -> Result<String, ScriptError> {
        self.stdout
            .lines()
            .find_map(|line| line.strip_prefix(key)?.strip_prefix('='))
            .map(str::to_string)
            .ok_or_else(|| ScriptError::Unreported {
                script: self.script.clone(),
                key,
                stdout: self.stdout.clone(),
            })
    }

    /// The value of its `KEY=VALUE` line, a number of seconds.
    pub fn seconds(&self, key: &'static str) -> Result<Duration, ScriptError> {
        self.value(key)?
            .parse::<f64>()
            .ok()
            .and_then(|s| Duration::try_from_secs_f64(s).ok())
            .ok_or_else(|| ScriptError::Unreported {
                script: self.script.clone(),
                key,
                stdout: self.stdout.clone(),
            })
    }
}

/// Runs `hack/SCRIPT ACTION` against `plane` (its state directory as `CONTROL_PLANE_DIR`)
/// with `envs` besides. Blocks; from async code call it through `spawn_blocking`.
pub fn run<K: AsRef<OsStr>, V: AsRef<OsStr>>(
    plane: &ControlPlane,
    script: &str,
    action: &str,
    envs: impl IntoIterator<Item = (K, V)>,
) -> Result<Report, ScriptError> {
    run_with_args(plane, script, action, &[], envs)
}

/// [`run`], with `args` after the action.
pub fn run_with_args<K: AsRef<OsStr>, V: AsRef<OsStr>>(
    plane: &ControlPlane,
    script: &str,
    action: &str,
    args: &[&OsStr],
    envs: impl IntoIterator<Item = (K, V)>,
) -> Result<Report, ScriptError> {
    let script = repository::hack(script);
    let started = Instant::now();
    let output = Command::new(&script)
        .arg(action)
        .args(args)
        .env("CONTROL_PLANE_DIR", plane.state_dir())
        .envs(envs)
        .output()
        .map_err(|error| ScriptError::Run {
            script: script.clone(),
            error,
        })?;
    let elapsed = started.elapsed();
    let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
    if !output.status.success() {
        return Err(ScriptError::Failed {
            script,
            action: action.to_string(),
            status: output.status,
            stderr,
        });
    }
    Ok(Report {
        script,
        stdout: String::from_utf8_lossy(&output.stdout).into_owned(),
        stderr,
        elapsed,
    })
}
