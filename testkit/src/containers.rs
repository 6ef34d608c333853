//! Looks at what the local cluster's real node (`hack/node.sh`) runs for a pod, from this
//! machine: a container's main process (from containerd's task state) and what the kernel says
//! of it: its user, capabilities, no_new_privs and seccomp, its root mount, its memory cgroup's
//! limit, and the digest of the program it runs; and what its containers wrote, as `kubectl
//! logs` reads it.

use std::path::{Path, PathBuf};

use k8s_openapi::api::core::v1::Pod;
use kube::Client;
use kube::api::{Api, LogParams};
use memcached_operator::operator::CONTAINER_NAME;
use sha2::{Digest, Sha256};

/// Where containerd keeps its tasks' state (`state` in the node's containerd configuration,
/// under `NODE_SOCKETS` of `hack/lib/node-network.sh`), for the CRI's namespace.
const TASKS: &str = "/run/memcached-operator-node/containerd/io.containerd.runtime.v2.task/k8s.io";

/// Why a container's process could not be looked at.
#[derive(Debug, thiserror::Error)]
pub enum ContainerError {
    /// The pod has no running container of that name.
    #[error("pod {pod} has no started container {container} (status: {status})")]
    NotStarted {
        /// The pod.
        pod: String,
        /// The container.
        container: String,
        /// What the pod's status says of it.
        status: String,
    },
    /// A file of containerd or of `/proc` could not be read.
    #[error("cannot read {}: {error}", .path.display())]
    Read {
        /// The file.
        path: PathBuf,
        /// What the system said.
        error: std::io::Error,
    },
    /// A file held something else than expected.
    #[error("{} holds no {what}: {text:?}", .path.display())]
    Unexpected {
        /// The file.
        path: PathBuf,
        /// What was looked for.
        what: &'static str,
        /// What it held.
        text: String,
    },
}

fn read(path: &Path) -> Result<String, ContainerError> {
    std::fs::read_to_string(path).map_err(|error| ContainerError::Read {
        path: path.to_path_buf(),
        error,
    })
}

/// The pod's IP, once the kubelet reported one.
pub fn pod_ip(pod: &Pod) -> Option<String> {
    pod.status.as_ref()?.pod_ip.clone()
}

/// Everything the containers of `pod` wrote, as `kubectl logs` reads it (through the API
/// server, from the kubelet): for each container, the output of the instance before its last
/// restart, if it restarted, then the current one's, each under a `==> CONTAINER <==` header.
/// A container whose log cannot be read contributes its header and the error.
pub async fn pod_logs(client: &Client, pod: &Pod) -> String {
    let name = pod.metadata.name.clone().unwrap_or_default();
    let namespace = pod.metadata.namespace.clone().unwrap_or_default();
    let api: Api<Pod> = Api::namespaced(client.clone(), &namespace);
    let mut text = String::new();
    for status in pod
        .status
        .as_ref()
        .and_then(|status| status.container_statuses.clone())
        .unwrap_or_default()
    {
        text.push_str(&format!("==> {} <==\n", status.name));
        let params = |previous| LogParams {
            container: Some(status.name.clone()),
            previous,
            ..LogParams::default()
        };
        if status.restart_count > 0 {
            match api.logs(&name, &params(true)).await {
                Ok(logs) => text.push_str(&logs),
                Err(error) => text.push_str(&format!("(the previous instance's log: {error})\n")),
            }
        }
        match api.logs(&name, &params(false)).await {
            Ok(logs) => text.push_str(&logs),
            Err(error) => text.push_str(&format!("(its log: {error})\n")),
        }
    }
    text
}

/// The id containerd knows the running container `container` of `pod` by: one of its
/// containers, or of its init containers (a native sidecar keeps running among them).
pub fn container_id(pod: &Pod, container: &str) -> Result<String, ContainerError> {
    let statuses: Vec<_> = pod
        .status
        .as_ref()
        .map(|status| {
            let containers = status.container_statuses.iter().flatten();
            containers
                .chain(status.init_container_statuses.iter().flatten())
                .cloned()
                .collect()
        })
        .unwrap_or_default();
    let status = statuses.iter().find(|status| status.name == container);
    let id = status
        .filter(|status| status.state.as_ref().is_some_and(|s| s.running.is_some()))
        .and_then(|status| status.container_id.as_deref())
        .and_then(|id| id.strip_prefix("containerd://"));
    id.map(str::to_string)
        .ok_or_else(|| ContainerError::NotStarted {
            pod: pod.metadata.name.clone().unwrap_or_default(),
            container: container.to_string(),
            status: format!("{:?}", status.and_then(|s| s.state.clone())),
        })
}

/// The process id of the running container `container` of `pod`: its init process, which is
/// the image's entrypoint.
pub fn main_pid(pod: &Pod, container: &str) -> Result<u32, ContainerError> {
    let path = Path::new(TASKS)
        .join(container_id(pod, container)?)
        .join("init.pid");
    let text = read(&path)?;
    text.trim().parse().map_err(|_| ContainerError::Unexpected {
        path,
        what: "process id",
        text,
    })
}

/// The process id of memcached itself in `pod`'s memcached container: the container's main
/// process, or, under the supervisor (a server with authentication), its child named
/// `memcached`.
pub fn memcached_pid(pod: &Pod) -> Result<u32, ContainerError> {
    let main = main_pid(pod, "memcached")?;
    let beside =
        crate::access::processes_beside(main).map_err(|error| ContainerError::Unexpected {
            path: PathBuf::from(format!("/proc/{main}/ns/pid")),
            what: "process namespace",
            text: error,
        })?;
    beside
        .iter()
        .find(|(_, comm)| comm == "memcached")
        .map(|(pid, _)| *pid)
        .ok_or_else(|| ContainerError::Unexpected {
            path: PathBuf::from(format!("/proc/{main}")),
            what: "memcached process in its namespace",
            text: format!("{beside:?}"),
        })
}

/// The process id of the operator's container (`operator::CONTAINER_NAME`) in `pod`: its
/// entrypoint, as containerd started it; `None` when the pod runs none.
pub fn operator_process(pod: &Pod) -> Option<u32> {
    main_pid(pod, CONTAINER_NAME).ok()
}

/// What the kernel says of a container's process.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Confinement {
    /// The `Uid:` line: real, effective, saved and filesystem user ids.
    pub uids: Vec<u32>,
    /// Effective capabilities (`CapEff`), as the kernel's hexadecimal mask.
    pub effective_capabilities: u64,
    /// Bounding set (`CapBnd`).
    pub bounding_capabilities: u64,
    /// `NoNewPrivs`: 1 when the process can gain no privilege (no setuid, no file capability).
    pub no_new_privs: u32,
    /// `Seccomp`: 0 none, 1 strict, 2 filter.
    pub seccomp: u32,
    /// The mount options of its root filesystem (`/` in its mount namespace).
    pub root_options: Vec<String>,
    /// Its memory cgroup's limit in bytes (cgroup v1 `memory.limit_in_bytes`, or v2
    /// `memory.max`; `None` for no limit).
    pub memory_limit: Option<u64>,
    /// The SHA-256 of the program it runs (`/proc/PID/exe`), hexadecimal.
    pub program_sha256: String,
}

/// The `/proc/PID/status` field `name`.
fn status_field<'a>(status: &'a str, name: &str) -> Option<&'a str> {
    status
        .lines()
        .find_map(|line| line.strip_prefix(name)?.strip_prefix(':'))
        .map(str::trim)
}

/// Reads [`Confinement`] of process `pid`.
pub fn confinement(pid: u32) -> Result<Confinement, ContainerError> {
    let proc = PathBuf::from(format!("/proc/{pid}"));
    let status_path = proc.join("status");
    let status = read(&status_path)?;
    let field = |name: &'static str| {
        status_field(&status, name).ok_or_else(|| ContainerError::Unexpected {
            path: status_path.clone(),
            what: name,
            text: status.clone(),
        })
    };
    let hex = |name: &'static str| -> Result<u64, ContainerError> {
        u64::from_str_radix(field(name)?, 16).map_err(|_| ContainerError::Unexpected {
            path: status_path.clone(),
            what: name,
            text: status.clone(),
        })
    };
    let number = |name: &'static str| -> Result<u32, ContainerError> {
        field(name)?
            .parse()
            .map_err(|_| ContainerError::Unexpected {
                path: status_path.clone(),
                what: name,
                text: status.clone(),
            })
    };
    let uids = field("Uid")?
        .split_whitespace()
        .filter_map(|uid| uid.parse().ok())
        .collect();
    let mountinfo_path = proc.join("mountinfo");
    let mountinfo = read(&mountinfo_path)?;
    // Fields: id parent major:minor root mount-point options ...
    let root_options = mountinfo
        .lines()
        .map(|line| line.split(' ').collect::<Vec<_>>())
        .rfind(|fields| fields.len() > 5 && fields[4] == "/")
        .map(|fields| fields[5].split(',').map(str::to_string).collect())
        .ok_or_else(|| ContainerError::Unexpected {
            path: mountinfo_path,
            what: "root mount",
            text: mountinfo.clone(),
        })?;
    let program = std::fs::read(proc.join("exe")).map_err(|error| ContainerError::Read {
        path: proc.join("exe"),
        error,
    })?;
    Ok(Confinement {
        uids,
        effective_capabilities: hex("CapEff")?,
        bounding_capabilities: hex("CapBnd")?,
        no_new_privs: number("NoNewPrivs")?,
        seccomp: number("Seccomp")?,
        root_options,
        memory_limit: memory_limit(&proc)?,
        program_sha256: sha256_hex(&program),
    })
}

/// The memory limit of the cgroup the process at `proc` is in.
fn memory_limit(proc: &Path) -> Result<Option<u64>, ContainerError> {
    let cgroup_path = proc.join("cgroup");
    let cgroup = read(&cgroup_path)?;
    // v1: "N:memory:/kubepods/..."; v2: "0::/kubepods/...".
    let (file, dir) = if let Some(dir) = cgroup.lines().find_map(|line| {
        let mut parts = line.splitn(3, ':');
        let (_, controllers, dir) = (parts.next()?, parts.next()?, parts.next()?);
        controllers.split(',').any(|c| c == "memory").then_some(dir)
    }) {
        (
            PathBuf::from(format!("/sys/fs/cgroup/memory{dir}/memory.limit_in_bytes")),
            dir,
        )
    } else {
        let dir = cgroup
            .lines()
            .find_map(|line| line.strip_prefix("0::"))
            .ok_or_else(|| ContainerError::Unexpected {
                path: cgroup_path.clone(),
                what: "memory cgroup",
                text: cgroup.clone(),
            })?;
        (
            PathBuf::from(format!("/sys/fs/cgroup{dir}/memory.max")),
            dir,
        )
    };
    let text = read(&file)?;
    let text = text.trim();
    if text == "max" {
        return Ok(None);
    }
    let limit: u64 = text.parse().map_err(|_| ContainerError::Unexpected {
        path: file.clone(),
        what: "memory limit",
        text: format!("{text} (cgroup {dir})"),
    })?;
    // cgroup v1 spells "no limit" as the largest page-aligned i64.
    Ok((limit < (i64::MAX as u64) & !0xfff).then_some(limit))
}

/// The SHA-256 of `bytes`, hexadecimal.
pub fn sha256_hex(bytes: &[u8]) -> String {
    Sha256::digest(bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_status_field_is_found_by_its_whole_name() {
        let status = "Name:\tx\nCapEff:\t0000000000000000\nCapBnd:\t00000000a80425fb\n";
        assert_eq!(status_field(status, "CapBnd"), Some("00000000a80425fb"));
        assert_eq!(status_field(status, "Cap"), None);
    }

    #[test]
    fn this_process_has_a_confinement_to_read() {
        let confinement = confinement(std::process::id()).expect("this process");
        assert!(!confinement.uids.is_empty());
        assert!(!confinement.root_options.is_empty());
        assert_eq!(confinement.program_sha256.len(), 64);
    }
}
