//! Finds what the node agent runs for a pod on this machine: its containers' logs under the
//! agent's state directory, and its processes (by the pod IP the agent hands each container).

use std::path::{Path, PathBuf};

use k8s_openapi::api::core::v1::Pod;

/// The environment variable through which the node agent hands each container its pod IP.
const POD_IP_VARIABLE: &str = crate::node_agent::sandbox::POD_IP_VARIABLE;

/// The pod's IP, once the node agent reported one.
pub fn pod_ip(pod: &Pod) -> Option<String> {
    pod.status.as_ref()?.pod_ip.clone()
}

/// Everything the containers of the pod with `uid` wrote so far (every container's log, each
/// under a `==> NAME.log <==` header), or an empty string for a pod the node agent whose state
/// directory is `node_state` does not run.
pub fn pod_logs(node_state: &Path, uid: &str) -> String {
    let dir = node_state.join("pods").join(uid).join("logs");
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
