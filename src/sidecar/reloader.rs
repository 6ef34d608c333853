//! Brings changed credentials into a running memcached without restarting it, so its items
//! stay: the `reload-auth` subcommand, run in each memcached pod with authentication as a
//! native sidecar.
//!
//! The kubelet rewrites the auth Secret's file in the pod when the Secret changes (within its
//! sync period). memcached reads its auth file when it starts, and again on SIGHUP (on its next
//! one-second clock tick). This loop reads the file every `--interval`; when its content
//! differs from what it saw last, it sends SIGHUP to memcached, which it finds by name among
//! the pod's processes: a pod with authentication shares one process namespace, and every
//! container runs as the pod's user, so no capability is needed. It reads only the mounted
//! file and signals only its own pod's memcached: it needs no Kubernetes API access.

use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::time::Duration;

use clap::Args;
use rustix::process::{Pid, Signal, kill_process};
use sha2::{Digest, Sha256};
use thiserror::Error;
use tracing::{debug, info, warn};

/// The container name of the sidecar in memcached pods.
pub const CONTAINER_NAME: &str = "auth-reloader";

/// Flags of `memcached-operator reload-auth`.
#[derive(Args, Debug, Clone)]
pub struct ReloadArgs {
    /// memcached's auth file, as mounted in this container too.
    #[arg(long, default_value = "/etc/memcached/auth/authfile")]
    pub auth_file: PathBuf,

    /// The name of the process to signal (its `/proc/PID/comm`).
    #[arg(long, default_value = "memcached")]
    pub process: String,

    /// How often to read the auth file.
    #[arg(long, default_value = "5s", value_parser = crate::flag_bounds::duration)]
    pub interval: Duration,
}

/// Why the reloader stopped.
#[derive(Debug, Error)]
pub enum ReloadError {
    /// The auth file's directory does not exist: the Secret is not mounted where it says.
    #[error("--auth-file {0}: its directory does not exist (is the auth Secret mounted there?)")]
    NoAuthDir(PathBuf),
}

/// Runs until `shutdown` completes: reads the auth file every `interval`, and sends memcached
/// SIGHUP once for each change of its content.
pub async fn run(
    args: ReloadArgs,
    mut shutdown: Pin<Box<dyn Future<Output = ()> + Send>>,
) -> Result<(), ReloadError> {
    if !args.auth_file.parent().is_some_and(Path::is_dir) {
        return Err(ReloadError::NoAuthDir(args.auth_file));
    }
    info!(auth_file = %args.auth_file.display(), process = %args.process, "watching the auth file");
    // The content memcached is known to have read: what it started with (the file as first
    // seen), or what it was last signalled to read.
    let mut loaded: Option<[u8; 32]> = None;
    loop {
        let now = match tokio::fs::read(&args.auth_file).await {
            Ok(content) => <[u8; 32]>::from(Sha256::digest(&content)),
            Err(error) => {
                warn!(%error, auth_file = %args.auth_file.display(), "cannot read the auth file");
                [0; 32]
            }
        };
        match loaded {
            None => loaded = Some(now),
            Some(seen) if seen != now => match signal(&args.process) {
                Ok(pid) => {
                    info!(
                        pid,
                        "the auth file changed; sent memcached SIGHUP to reread it"
                    );
                    loaded = Some(now);
                }
                // Tried again at the next look; a memcached that starts meanwhile reads the
                // new file itself.
                Err(error) => {
                    warn!(%error, "the auth file changed; memcached is not signalled yet")
                }
            },
            Some(_) => {}
        }
        tokio::select! {
            () = &mut shutdown => return Ok(()),
            () = tokio::time::sleep(args.interval) => {}
        }
    }
}

/// Sends SIGHUP to the process named `name`; returns its pid.
fn signal(name: &str) -> Result<i32, String> {
    let pid = find_process(Path::new("/proc"), name)?;
    let target = Pid::from_raw(pid).ok_or_else(|| format!("{pid} is not a process id"))?;
    kill_process(target, Signal::HUP).map_err(|error| format!("kill -HUP {pid}: {error}"))?;
    Ok(pid)
}

/// The lowest pid under `proc` whose `comm` is `name`, other than this process.
fn find_process(proc: &Path, name: &str) -> Result<i32, String> {
    let own = std::process::id();
    let entries =
        std::fs::read_dir(proc).map_err(|error| format!("{}: {error}", proc.display()))?;
    let mut found: Option<i32> = None;
    for entry in entries.flatten() {
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|n| n.parse::<i32>().ok())
        else {
            continue;
        };
        if u32::try_from(pid).is_ok_and(|pid| pid == own) {
            continue;
        }
        let comm = std::fs::read_to_string(entry.path().join("comm")).unwrap_or_default();
        if comm.trim_end() == name {
            found = Some(found.map_or(pid, |other| other.min(pid)));
        }
    }
    found.ok_or_else(|| {
        debug!(name, "no such process");
        format!("no process named {name} in this pod's process namespace")
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn memcached_is_found_by_its_name_among_the_processes() {
        let dir = tempfile::tempdir().expect("a directory");
        for (pid, comm) in [
            ("1", "pause\n"),
            ("7", "memcached\n"),
            ("12", "memcached-operator\n"),
        ] {
            std::fs::create_dir(dir.path().join(pid)).expect("a process directory");
            std::fs::write(dir.path().join(pid).join("comm"), comm).expect("a comm file");
        }
        std::fs::create_dir(dir.path().join("self")).expect("not a process");
        assert_eq!(find_process(dir.path(), "memcached"), Ok(7));
        let missing = find_process(dir.path(), "redis").expect_err("absent");
        assert!(missing.contains("no process named redis"), "{missing}");
    }

    #[tokio::test]
    async fn a_missing_auth_directory_stops_the_reloader_with_its_name() {
        let args = ReloadArgs {
            auth_file: PathBuf::from("/nonexistent/memcached/auth/authfile"),
            process: "memcached".into(),
            interval: Duration::from_secs(5),
        };
        let error = run(args, Box::pin(std::future::pending()))
            .await
            .expect_err("refused");
        assert!(
            error.to_string().contains("/nonexistent/memcached/auth"),
            "{error}"
        );
    }
}
