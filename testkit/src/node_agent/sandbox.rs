//! Starts a container's process as a pod would see it, without a container engine: in a
//! private mount namespace of its own where each volume is bind-mounted at its mount path
//! (and each mapped image path at its in-image path), in a session and process group of its
//! own, with the bind shim preloaded so that wildcard binds land on the pod's IP.
//!
//! Mount points that do not exist on the host are made before the process starts and removed
//! when the last process that needs them is gone ([`MountPoints`]); the rest of the machine
//! never sees what is mounted on them. What to run and what to mount is decided elsewhere
//! (`image_table`, `pod_worker`); this module only does it.

use std::collections::BTreeMap;
use std::ffi::CString;
use std::os::fd::{AsRawFd, BorrowedFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::{Arc, Mutex};

use rustix::mount::{MountFlags, MountPropagationFlags};
use tokio::process::{Child, Command};

/// The shared object `build.rs` made from `shim/bind_pod_ip.c`.
pub const BIND_SHIM: &str = env!("NODE_AGENT_BIND_SHIM");
/// The variable the shim reads the pod IP from.
pub const POD_IP_VARIABLE: &str = "NODE_AGENT_POD_IP";

/// Why a process could not be started.
#[derive(Debug, thiserror::Error)]
pub enum SandboxError {
    /// A path holds a NUL byte.
    #[error("path or argument {0:?} holds a NUL byte")]
    Nul(String),
    /// A mount point could not be made on the host.
    #[error("cannot create mount point {}: {error}", .path.display())]
    MountPoint {
        /// The mount point.
        path: PathBuf,
        /// What the system said.
        error: std::io::Error,
    },
    /// The log file could not be opened.
    #[error("cannot open log file {}: {error}", .path.display())]
    Log {
        /// The file.
        path: PathBuf,
        /// What the system said.
        error: std::io::Error,
    },
    /// The process could not be started (including a failed mount in the child).
    #[error("cannot start {}: {error}", .program.display())]
    Spawn {
        /// The program.
        program: PathBuf,
        /// What the system said.
        error: std::io::Error,
    },
}

/// One bind mount inside the process's namespace.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Mount {
    /// The host file or directory.
    pub source: PathBuf,
    /// Where the process sees it.
    pub target: PathBuf,
    /// Whether it is read-only.
    pub read_only: bool,
}

/// What to start.
#[derive(Clone, Debug)]
pub struct Launch {
    /// The host program.
    pub program: PathBuf,
    /// argv (argv[0] as the container spells it).
    pub argv: Vec<String>,
    /// The whole environment.
    pub env: Vec<(String, String)>,
    /// The working directory, inside the namespace.
    pub working_dir: Option<PathBuf>,
    /// The user and group ids to run as (after the mounts are made); `None`: the agent's.
    pub user: Option<(u32, u32)>,
    /// Bind mounts, in order.
    pub mounts: Vec<Mount>,
    /// The pod's IP, for the shim.
    pub pod_ip: String,
    /// Where standard output and error go.
    pub log: PathBuf,
}

/// Mount points the agent made on the host, with how many started processes use each.
#[derive(Clone, Debug, Default)]
pub struct MountPoints {
    made: Arc<Mutex<BTreeMap<PathBuf, usize>>>,
}

impl MountPoints {
    /// Makes sure `target` exists as a directory (or, when `file`, a file), noting every path
    /// made for it; returns what this caller must give back with [`MountPoints::release`].
    pub fn acquire(&self, target: &Path, file: bool) -> Result<Vec<PathBuf>, SandboxError> {
        let mut made = self.made.lock().unwrap_or_else(|p| p.into_inner());
        let mut missing = Vec::new();
        let mut at = Some(target);
        while let Some(path) = at {
            if std::fs::symlink_metadata(path).is_ok() {
                break;
            }
            missing.push(path.to_path_buf());
            at = path.parent();
        }
        for path in missing.iter().rev() {
            let result = if file && path == target {
                std::fs::File::create(path).map(drop)
            } else {
                std::fs::create_dir(path)
            };
            result.map_err(|error| SandboxError::MountPoint {
                path: path.clone(),
                error,
            })?;
            made.insert(path.clone(), 0);
        }
        // Every path along target that the agent made counts one more user.
        let mut held = Vec::new();
        let mut at = Some(target);
        while let Some(path) = at {
            if let Some(count) = made.get_mut(path) {
                *count += 1;
                held.push(path.to_path_buf());
            }
            at = path.parent();
        }
        Ok(held)
    }

    /// Gives back paths from [`MountPoints::acquire`]; those no process uses any more are
    /// removed from the host, deepest first.
    pub fn release(&self, held: &[PathBuf]) {
        let mut made = self.made.lock().unwrap_or_else(|p| p.into_inner());
        let mut unused = Vec::new();
        for path in held {
            if let Some(count) = made.get_mut(path) {
                *count = count.saturating_sub(1);
                if *count == 0 {
                    unused.push(path.clone());
                }
            }
        }
        unused.sort_by_key(|p| std::cmp::Reverse(p.components().count()));
        for path in unused {
            let removed = match std::fs::symlink_metadata(&path) {
                Ok(meta) if meta.is_dir() => std::fs::remove_dir(&path),
                Ok(_) => std::fs::remove_file(&path),
                Err(_) => Ok(()),
            };
            match removed {
                Ok(()) => {
                    made.remove(&path);
                }
                Err(error) => {
                    tracing::warn!(path = %path.display(), %error, "cannot remove a mount point the agent made");
                }
            }
        }
    }

    /// Removes every path the agent made, whoever still uses it (the agent is going away).
    pub fn release_all(&self) {
        let held: Vec<PathBuf> = {
            let mut made = self.made.lock().unwrap_or_else(|p| p.into_inner());
            for count in made.values_mut() {
                *count = 1;
            }
            made.keys().cloned().collect()
        };
        self.release(&held);
    }

    /// The paths the agent has made and not yet removed.
    pub fn outstanding(&self) -> Vec<PathBuf> {
        let made = self.made.lock().unwrap_or_else(|p| p.into_inner());
        made.keys().cloned().collect()
    }
}

/// The process groups of every container process the agent has started and not yet seen
/// exit, each with its leader's start time, so that an agent dropped without stopping (a
/// panicking test) can still kill them, and only them.
#[derive(Clone, Debug, Default)]
pub struct ProcessGroups {
    groups: Arc<Mutex<BTreeMap<u32, u64>>>,
}

impl ProcessGroups {
    /// Notes a started process (its pid, which leads its group) and its start time.
    pub fn add(&self, pgid: u32) {
        let started = crate::procfs::start_ticks(pgid).unwrap_or_default();
        self.groups
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(pgid, started);
    }

    /// Forgets a process that has been waited for.
    pub fn remove(&self, pgid: u32) {
        self.groups
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(&pgid);
    }

    /// SIGKILLs every group still noted whose leader is still the process that was started
    /// (same pid, same start time): a pid reused since is left alone.
    pub fn kill_all(&self) {
        let groups = self.groups.lock().unwrap_or_else(|p| p.into_inner());
        for (pgid, started) in groups.iter() {
            if crate::procfs::start_ticks(*pgid).ok() == Some(*started) {
                signal_group(*pgid, rustix::process::Signal::KILL);
            }
        }
    }
}

fn c_path(path: &Path) -> Result<CString, SandboxError> {
    CString::new(path.as_os_str().as_bytes())
        .map_err(|_| SandboxError::Nul(path.display().to_string()))
}

/// Starts `launch`; mount points must have been acquired.
pub fn spawn(launch: &Launch) -> Result<Child, SandboxError> {
    let log = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&launch.log)
        .map_err(|error| SandboxError::Log {
            path: launch.log.clone(),
            error,
        })?;
    let log_err = log.try_clone().map_err(|error| SandboxError::Log {
        path: launch.log.clone(),
        error,
    })?;
    let mounts: Vec<(CString, CString, bool)> = launch
        .mounts
        .iter()
        .map(|m| Ok((c_path(&m.source)?, c_path(&m.target)?, m.read_only)))
        .collect::<Result<_, SandboxError>>()?;
    let working_dir = launch.working_dir.as_deref().map(c_path).transpose()?;
    let user = launch.user;
    let mut command = Command::new(&launch.program);
    command
        .arg0(launch.argv.first().cloned().unwrap_or_default())
        .args(launch.argv.iter().skip(1))
        .env_clear()
        .envs(launch.env.iter().map(|(k, v)| (k, v)))
        .env("LD_PRELOAD", BIND_SHIM)
        .env(POD_IP_VARIABLE, &launch.pod_ip)
        .stdin(Stdio::null())
        .stdout(Stdio::from(log))
        .stderr(Stdio::from(log_err))
        .kill_on_drop(false);
    // SAFETY: the closure runs in the forked child before exec and only makes system calls
    // on data prepared above (no allocation, no locks).
    unsafe {
        command.pre_exec(move || {
            rustix::process::setsid()?;
            rustix::thread::unshare_unsafe(rustix::thread::UnshareFlags::NEWNS)?;
            rustix::mount::mount_change(
                c"/",
                MountPropagationFlags::PRIVATE | MountPropagationFlags::REC,
            )?;
            for (source, target, read_only) in &mounts {
                rustix::mount::mount_bind(source.as_c_str(), target.as_c_str())?;
                if *read_only {
                    rustix::mount::mount_remount(
                        target.as_c_str(),
                        MountFlags::BIND | MountFlags::RDONLY,
                        c"",
                    )?;
                }
            }
            if let Some(dir) = &working_dir {
                rustix::process::chdir(dir.as_c_str())?;
            }
            // The only thread of the forked child: its credentials become the process's.
            if let Some((uid, gid)) = user {
                let gid = rustix::process::Gid::from_raw(gid);
                rustix::thread::set_thread_groups(&[gid])?;
                rustix::thread::set_thread_gid(gid)?;
                rustix::thread::set_thread_uid(rustix::process::Uid::from_raw(uid))?;
            }
            Ok(())
        });
    }
    command.spawn().map_err(|error| SandboxError::Spawn {
        program: launch.program.clone(),
        error,
    })
}

/// Runs `argv` (a probe's command) in the mount namespace of the running process whose
/// namespace file is open as `namespace`, with `env`, and returns its exit code (`None`
/// when killed) and output. `program` is the host file to run.
pub async fn exec_in(
    namespace: &OwnedFd,
    program: &Path,
    argv: &[String],
    env: &[(String, String)],
    timeout: std::time::Duration,
) -> Result<Option<i32>, SandboxError> {
    let fd = namespace.as_raw_fd();
    let mut command = Command::new(program);
    command
        .arg0(argv.first().cloned().unwrap_or_default())
        .args(argv.iter().skip(1))
        .env_clear()
        .envs(env.iter().map(|(k, v)| (k, v)))
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .kill_on_drop(true);
    // SAFETY: as in `spawn`; the descriptor stays open in the parent until the child has
    // been waited for.
    unsafe {
        command.pre_exec(move || {
            let fd = BorrowedFd::borrow_raw(fd);
            rustix::thread::move_into_link_name_space(
                fd,
                Some(rustix::thread::LinkNameSpaceType::Mount),
            )?;
            Ok(())
        });
    }
    let mut child = command.spawn().map_err(|error| SandboxError::Spawn {
        program: program.to_path_buf(),
        error,
    })?;
    match tokio::time::timeout(timeout, child.wait()).await {
        Ok(Ok(status)) => Ok(status.code()),
        Ok(Err(error)) => Err(SandboxError::Spawn {
            program: program.to_path_buf(),
            error,
        }),
        Err(_) => {
            let _ = child.start_kill();
            let _ = child.wait().await;
            Ok(None)
        }
    }
}

/// Signals the process group `pgid` (each container process leads its own).
pub fn signal_group(pgid: u32, signal: rustix::process::Signal) {
    if let Some(pid) = rustix::process::Pid::from_raw(pgid as i32) {
        let _ = rustix::process::kill_process_group(pid, signal);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mount_points_made_for_a_pod_are_removed_when_the_last_user_releases_them() {
        let tmp = tempfile::tempdir().unwrap();
        let points = MountPoints::default();
        let target = tmp.path().join("a/b/c");
        let first = points.acquire(&target, false).unwrap();
        let second = points.acquire(&target, false).unwrap();
        assert!(target.is_dir());
        points.release(&first);
        assert!(target.is_dir(), "still used by the second process");
        points.release(&second);
        assert!(!tmp.path().join("a").exists());
        assert!(points.outstanding().is_empty());
    }

    #[test]
    fn paths_that_existed_before_are_never_removed() {
        let tmp = tempfile::tempdir().unwrap();
        let points = MountPoints::default();
        std::fs::create_dir(tmp.path().join("kept")).unwrap();
        let held = points.acquire(&tmp.path().join("kept/file"), true).unwrap();
        assert!(tmp.path().join("kept/file").is_file());
        points.release(&held);
        assert!(tmp.path().join("kept").is_dir());
        assert!(!tmp.path().join("kept/file").exists());
    }
}
