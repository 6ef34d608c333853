//! Tries, on this machine, what a user may do to another process and its files, the way the
//! kernel decides it: the processes of one container (those in its process namespace), the
//! user and groups a process runs with, and whether a given user and groups may open a file
//! or signal a process. The tries run `setpriv` (util-linux) as that user, so they need root,
//! as the node's tests have.

use std::path::{Path, PathBuf};

/// The user and groups a process runs with, from `/proc/PID/status`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Ids {
    /// The effective user id.
    pub user: u32,
    /// The effective group id.
    pub group: u32,
    /// The supplementary groups.
    pub groups: Vec<u32>,
}

impl Ids {
    /// Every group the process holds: its own and the supplementary ones.
    pub fn all_groups(&self) -> Vec<u32> {
        let mut all = vec![self.group];
        all.extend(self.groups.iter().filter(|g| **g != self.group));
        all
    }
}

/// The user and groups process `pid` runs with.
pub fn ids(pid: u32) -> Result<Ids, String> {
    let path = format!("/proc/{pid}/status");
    let status = std::fs::read_to_string(&path).map_err(|error| format!("{path}: {error}"))?;
    let field = |name: &str| -> Vec<u32> {
        status
            .lines()
            .find_map(|line| line.strip_prefix(name)?.strip_prefix(':'))
            .unwrap_or_default()
            .split_whitespace()
            .filter_map(|id| id.parse().ok())
            .collect()
    };
    let (uids, gids) = (field("Uid"), field("Gid"));
    match (uids.get(1), gids.get(1)) {
        (Some(&user), Some(&group)) => Ok(Ids {
            user,
            group,
            groups: field("Groups"),
        }),
        _ => Err(format!("{path} holds no Uid or Gid: {status:?}")),
    }
}

/// The process namespace of process `pid` (the target of `/proc/PID/ns/pid`).
pub fn pid_namespace(pid: u32) -> Result<PathBuf, String> {
    let path = format!("/proc/{pid}/ns/pid");
    std::fs::read_link(&path).map_err(|error| format!("{path}: {error}"))
}

/// Every process in the process namespace of `pid` (a container's main process): the
/// container's processes, seen from this machine, with their command names.
pub fn processes_beside(pid: u32) -> Result<Vec<(u32, String)>, String> {
    let namespace = pid_namespace(pid)?;
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc").map_err(|error| format!("/proc: {error}"))? {
        let Some(other) = entry
            .ok()
            .and_then(|e| e.file_name().to_str()?.parse::<u32>().ok())
        else {
            continue;
        };
        if pid_namespace(other).is_ok_and(|ns| ns == namespace) {
            let comm = std::fs::read_to_string(format!("/proc/{other}/comm")).unwrap_or_default();
            found.push((other, comm.trim_end().to_string()));
        }
    }
    found.sort();
    Ok(found)
}

/// Runs `program` with `args` as `user`, with primary group `group` and supplementary
/// `groups`, no capability; `Ok` when it succeeds, else what it said.
fn run_as(
    user: u32,
    group: u32,
    groups: &[u32],
    program: &str,
    args: &[&str],
) -> Result<(), String> {
    let groups = groups
        .iter()
        .map(u32::to_string)
        .collect::<Vec<_>>()
        .join(",");
    let mut command = std::process::Command::new("setpriv");
    command
        .arg(format!("--reuid={user}"))
        .arg(format!("--regid={group}"));
    if groups.is_empty() {
        command.arg("--clear-groups");
    } else {
        command.arg(format!("--groups={groups}"));
    }
    let output = command
        .args(["--inh-caps=-all", "--", program])
        .args(args)
        .output()
        .map_err(|error| format!("cannot run setpriv (util-linux): {error}"))?;
    if output.status.success() {
        Ok(())
    } else {
        Err(String::from_utf8_lossy(&output.stderr).trim().to_string())
    }
}

/// Whether `user` with `group` and `groups` may open `path` for reading: `Ok`, or why not
/// (as `head` says it: "Permission denied", "No such file or directory").
pub fn open_as(user: u32, group: u32, groups: &[u32], path: &Path) -> Result<(), String> {
    let path = path.to_str().ok_or("a path in UTF-8")?;
    run_as(user, group, groups, "head", &["-c", "1", path])
}

/// Whether `user` with `group` and `groups` may signal process `pid` (`kill -0`): `Ok`, or
/// why not.
pub fn signal_as(user: u32, group: u32, groups: &[u32], pid: u32) -> Result<(), String> {
    run_as(user, group, groups, "kill", &["-0", &pid.to_string()])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn this_process_has_ids_and_is_among_its_namespace_s_processes() {
        let me = std::process::id();
        let ids = ids(me).expect("this process's ids");
        assert!(ids.all_groups().contains(&ids.group));
        let beside = processes_beside(me).expect("the processes of this namespace");
        assert!(beside.iter().any(|(pid, _)| *pid == me));
    }
}
