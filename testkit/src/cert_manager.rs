//! Holds cert-manager's cainjector still, as a busy cluster's can be: `hack/cert-manager.sh`
//! runs it as a process on this machine (its pid in the control plane's state directory), and
//! a stopped process is a cainjector that has not yet written a renewed CA into the caBundles.
//! What the API server trusts then stays as it was, for as long as a test needs to look.

use std::path::{Path, PathBuf};

use rustix::process::{Pid, Signal, kill_process};

use crate::control_plane::ControlPlane;

/// cainjector's name, as `hack/cert-manager.sh` launches it.
const CAINJECTOR: &str = "cert-manager-cainjector";

/// A stopped cainjector; it goes on (`SIGCONT`) when this is dropped, a panic included.
#[derive(Debug)]
pub struct PausedCainjector {
    pid: Pid,
}

impl PausedCainjector {
    /// Stops the cainjector running on `plane` (`SIGSTOP`).
    ///
    /// # Errors
    /// When its pid file is missing or unreadable, the pid is not a running cainjector, or the
    /// signal cannot be sent; each names the file or the pid.
    pub fn pause(plane: &ControlPlane) -> Result<PausedCainjector, String> {
        let file = pid_file(plane.state_dir());
        let text = std::fs::read_to_string(&file)
            .map_err(|error| format!("cannot read {}: {error}", file.display()))?;
        let raw: i32 = text
            .trim()
            .parse()
            .map_err(|error| format!("{} holds {text:?}, not a pid: {error}", file.display()))?;
        let pid = Pid::from_raw(raw)
            .ok_or_else(|| format!("{} holds {raw}, not a pid", file.display()))?;
        let exe = std::fs::read_link(format!("/proc/{raw}/exe"))
            .map_err(|error| format!("pid {raw} from {} does not run: {error}", file.display()))?;
        if exe.file_name().and_then(|n| n.to_str()) != Some(CAINJECTOR) {
            return Err(format!(
                "pid {raw} from {} runs {}, not {CAINJECTOR}",
                file.display(),
                exe.display()
            ));
        }
        kill_process(pid, Signal::STOP)
            .map_err(|error| format!("cannot stop {CAINJECTOR} (pid {raw}): {error}"))?;
        Ok(PausedCainjector { pid })
    }

    /// Lets it go on.
    pub fn resume(self) {}
}

impl Drop for PausedCainjector {
    fn drop(&mut self) {
        if let Err(error) = kill_process(self.pid, Signal::CONT) {
            eprintln!(
                "cannot let {CAINJECTOR} (pid {:?}) go on: {error}",
                self.pid
            );
        }
    }
}

/// Where `hack/cert-manager.sh` writes cainjector's pid, under the control plane's state.
fn pid_file(state: &Path) -> PathBuf {
    state
        .join("cert-manager")
        .join("run")
        .join(format!("{CAINJECTOR}.pid"))
}
