//! Brings changed credentials into a running memcached without restarting it, so its items
//! stay: the `reload-auth` subcommand, run in each memcached pod with authentication as a
//! native sidecar.
//!
//! The kubelet rewrites the auth Secret's file in the pod when the Secret changes (within its
//! sync period). memcached reads its auth file when it starts, and again on SIGHUP (on its next
//! one-second clock tick), when it silently keeps its old credentials if it finds the new file
//! malformed. This loop reads the file every `--interval`; when its content differs from what
//! it saw last, it judges it as memcached reads it (`api::auth_file::check`): a file memcached
//! would refuse or read otherwise than written is never sent, and is logged as an error with
//! the line and the reason, once per content. Otherwise it sends SIGHUP to memcached, which it
//! finds by name among
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
use tracing::{debug, error, info, warn};

use crate::api::auth_file;

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
    let mut watch = Watch::default();
    loop {
        let (now, verdict) = match tokio::fs::read(&args.auth_file).await {
            Ok(content) => (
                <[u8; 32]>::from(Sha256::digest(&content)),
                auth_file::check(&content).map(|entries| entries.len()),
            ),
            Err(error) => {
                warn!(%error, auth_file = %args.auth_file.display(), "cannot read the auth file");
                ([0; 32], Err(auth_file::Refusal::Empty))
            }
        };
        match watch.look(now, verdict) {
            Look::Unchanged => {}
            Look::StartedRefused(refusal) => error!(
                reason = %refusal,
                "memcached started with an auth file it refuses or misreads"
            ),
            Look::Refused(refusal) => error!(
                reason = %refusal,
                "the auth file changed to one memcached would refuse or misread; not sent: \
                 memcached keeps the credentials it has"
            ),
            Look::Changed(entries) => match signal(&args.process) {
                Ok(pid) => {
                    info!(
                        pid,
                        credentials = entries,
                        "the auth file changed; sent memcached SIGHUP to reread it"
                    );
                    watch.signalled(now);
                }
                // Tried again at the next look; a memcached that starts meanwhile reads the
                // new file itself.
                Err(error) => {
                    warn!(%error, "the auth file changed; memcached is not signalled yet")
                }
            },
        }
        tokio::select! {
            () = &mut shutdown => return Ok(()),
            () = tokio::time::sleep(args.interval) => {}
        }
    }
}

/// What the reloader knows of the auth file's contents, by digest.
#[derive(Debug, Default)]
struct Watch {
    /// What memcached is known to have read: what it started with (the file as first seen),
    /// or what it was last signalled to read.
    loaded: Option<[u8; 32]>,
    /// The last content refused, so that each is reported once.
    refused: Option<[u8; 32]>,
}

/// What one look at the file found.
#[derive(Debug, PartialEq, Eq)]
enum Look {
    /// Nothing to do: memcached has this content, or it was refused already.
    Unchanged,
    /// The first look found a file memcached refuses or misreads.
    StartedRefused(auth_file::Refusal),
    /// A new content memcached would refuse or misread: it is not sent.
    Refused(auth_file::Refusal),
    /// A new content memcached reads as written, with this many credentials: to be sent.
    Changed(usize),
}

impl Watch {
    /// Judges the content `now` whose verdict is `verdict`.
    fn look(&mut self, now: [u8; 32], verdict: Result<usize, auth_file::Refusal>) -> Look {
        let Some(loaded) = self.loaded else {
            self.loaded = Some(now);
            return match verdict {
                Ok(_) => Look::Unchanged,
                Err(refusal) => {
                    self.refused = Some(now);
                    Look::StartedRefused(refusal)
                }
            };
        };
        match verdict {
            _ if loaded == now => Look::Unchanged,
            Err(_) if self.refused == Some(now) => Look::Unchanged,
            Err(refusal) => {
                self.refused = Some(now);
                Look::Refused(refusal)
            }
            Ok(entries) => Look::Changed(entries),
        }
    }

    /// memcached was told to read `now`: a refused content seen again is reported again.
    fn signalled(&mut self, now: [u8; 32]) {
        self.loaded = Some(now);
        self.refused = None;
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

    fn look(watch: &mut Watch, content: &[u8]) -> Look {
        let digest = <[u8; 32]>::from(Sha256::digest(content));
        let look = watch.look(digest, auth_file::check(content).map(|e| e.len()));
        if matches!(look, Look::Changed(_)) {
            watch.signalled(digest);
        }
        look
    }

    #[test]
    fn a_file_memcached_would_refuse_is_never_sent_and_reported_once() {
        let mut watch = Watch::default();
        assert_eq!(look(&mut watch, b"app:one\n"), Look::Unchanged);
        assert_eq!(look(&mut watch, b"app:one\n"), Look::Unchanged);
        let blank = b"app:one\n\napp:two\n";
        assert!(matches!(
            look(&mut watch, blank),
            Look::Refused(auth_file::Refusal::Malformed {
                line: 2,
                blank: true
            })
        ));
        assert_eq!(look(&mut watch, blank), Look::Unchanged, "reported once");
        assert_eq!(look(&mut watch, b"app:one\napp:two\n"), Look::Changed(2));
        assert_eq!(look(&mut watch, b"app:one\napp:two\n"), Look::Unchanged);
        // Back to a content refused before: reported again, since memcached moved on.
        let mut again = Watch::default();
        assert_eq!(look(&mut again, b"a:b\n"), Look::Unchanged);
        assert!(matches!(look(&mut again, b"a\n"), Look::Refused(_)));
        assert_eq!(look(&mut again, b"a:c\n"), Look::Changed(1));
        assert!(matches!(look(&mut again, b"a\n"), Look::Refused(_)));
    }

    #[test]
    fn a_refused_file_memcached_started_with_is_reported() {
        let mut watch = Watch::default();
        assert!(matches!(
            look(&mut watch, b"no colon\n"),
            Look::StartedRefused(_)
        ));
        assert_eq!(look(&mut watch, b"no colon\n"), Look::Unchanged);
        assert_eq!(look(&mut watch, b"app:fixed\n"), Look::Changed(1));
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
