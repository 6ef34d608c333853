//! Runs memcached as the child of its container's first process: the `supervise` subcommand,
//! which the init container `install-supervisor` copies into memcached's container
//! ([`super::install`]) for servers with authentication.
//!
//! With no process namespace shared between a pod's containers, only a process inside
//! memcached's container can signal it. The supervisor is that process, PID 1 of the
//! container, and memcached its only child:
//! - it starts memcached with the arguments after `--`, on its own standard streams;
//! - it passes on the signals it receives (SIGINT, SIGQUIT, SIGUSR1, SIGUSR2, SIGTERM), so
//!   the kubelet's stop signal and the preStop hook's `kill -USR1 1` reach memcached; with
//!   `--warm-restart`, SIGTERM is passed on as SIGUSR1, memcached's graceful stop that saves
//!   its memory file, and memcached starts one second late (it refuses a memory file saved
//!   in the second it starts in);
//! - it reads the auth file every `--interval` (and when it receives SIGHUP) and has memcached
//!   reread it (SIGHUP) only when it changed to one memcached reads as written
//!   ([`super::auth_watch`]); a file memcached would refuse is logged with its line and rule
//!   and never sent;
//! - it reaps every child that ends (PID 1 inherits orphans), and exits as memcached did: its
//!   exit status, or 128 plus the signal that killed it, as a shell reports it;
//! - with `--client-ca-request`, it restarts memcached in place, warm, once per request of the
//!   operator's, when the mounted `ca.crt` has the requested digest ([`super::ca_restart`]),
//!   so that memcached stops trusting the client CAs withdrawn from it;
//! - with `--metrics-port`, it serves on that port `/metrics` (`super::metrics`: whether the
//!   mounted auth file is one memcached would refuse, rereads sent and refused) for the
//!   Memcached's ServiceMonitor, and `/healthz` and `/readyz` from its loop's heartbeat.
//!
//! It has no Kubernetes credentials and reads nothing but the auth file, `ca.crt` and the
//! request projected from its pod's annotation.

use std::path::PathBuf;
use std::process::Command;
use std::time::Duration;

use clap::Args;
use rustix::process::{Pid, Signal, WaitOptions, kill_process};
use thiserror::Error;
use tokio::signal::unix::{SignalKind, signal};
use tracing::{debug, error, info, warn};

use super::auth_watch::{AuthWatch, Look};
use super::ca_restart::{self, CaRestart, Trusted};
use super::health::{self, Heartbeat};
use super::metrics::{FAILED, SUCCEEDED, SupervisorMetrics};
use crate::listener::ServerError;

/// The init container that copies the operator's binary into memcached's pod.
pub const INSTALLER_CONTAINER_NAME: &str = "install-supervisor";
/// Where the binary is copied to, and mounted read-only in memcached's container.
pub const INSTALL_DIR: &str = "/opt/memcached-operator";
/// The binary's name in [`INSTALL_DIR`].
pub const INSTALLED_BINARY: &str = "memcached-operator";
/// How long memcached starts late with `--warm-restart`.
pub const WARM_START_DELAY: Duration = Duration::from_secs(1);

/// Flags of `memcached-operator supervise`.
#[derive(Args, Debug, Clone)]
pub struct SuperviseArgs {
    /// memcached's auth file: memcached rereads it (SIGHUP) when it changes to one memcached
    /// reads as written.
    #[arg(long)]
    pub auth_file: Option<PathBuf>,

    /// How often to read the auth file.
    #[arg(long, default_value = "5s", value_parser = crate::flag_bounds::duration)]
    pub interval: Duration,

    /// memcached keeps its items across restarts: SIGTERM is passed on as SIGUSR1, and
    /// memcached starts one second late.
    #[arg(long)]
    pub warm_restart: bool,

    /// A file holding the operator's request for a restart (the pod annotation
    /// `cache.f2367556.dev/client-ca-sha256`, projected by the downward API): the SHA-256 of
    /// the `--client-ca` content memcached must trust. Needs `--warm-restart`.
    #[arg(long, requires_all = ["client_ca", "warm_restart", "restarted_file"])]
    pub client_ca_request: Option<PathBuf>,

    /// The client CAs memcached verifies client certificates against (its `ca.crt`).
    #[arg(long, requires = "client_ca_request")]
    pub client_ca: Option<PathBuf>,

    /// Where the requests acted on are recorded: on the memory file's volume, which outlives
    /// the container.
    #[arg(long, requires = "client_ca_request")]
    pub restarted_file: Option<PathBuf>,

    /// Port of `/metrics` (and `/healthz`, `/readyz`), plain HTTP on every address; without
    /// it, none are served.
    #[arg(long, value_parser = clap::value_parser!(u16).range(1..))]
    pub metrics_port: Option<u16>,

    /// memcached's command line: the program, then its arguments.
    #[arg(last = true, required = true, num_args = 1..)]
    pub command: Vec<String>,
}

/// Why the supervisor stopped without memcached's status.
#[derive(Debug, Error)]
pub enum SuperviseError {
    /// A signal handler could not be installed.
    #[error("cannot listen for {signal}: {error}")]
    Signal {
        /// The signal.
        signal: &'static str,
        /// What the system said.
        error: std::io::Error,
    },
    /// memcached could not be started.
    #[error("cannot start {program}: {error}")]
    Start {
        /// The program.
        program: String,
        /// What the system said.
        error: std::io::Error,
    },
    /// The metrics port cannot be listened on.
    #[error(transparent)]
    Metrics(#[from] ServerError),
}

/// The signals the supervisor handles, by name.
const HANDLED: [(&str, Signal); 7] = [
    ("SIGTERM", Signal::TERM),
    ("SIGINT", Signal::INT),
    ("SIGQUIT", Signal::QUIT),
    ("SIGUSR1", Signal::USR1),
    ("SIGUSR2", Signal::USR2),
    ("SIGHUP", Signal::HUP),
    ("SIGCHLD", Signal::CHILD),
];

/// What the supervisor does with a signal it receives.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Action {
    /// Sends memcached this signal.
    Forward(Signal),
    /// Reads the auth file now, and has memcached reread it if it changed to one it accepts.
    CheckAuthFile,
    /// Reaps the children that ended.
    Reap,
}

/// What the supervisor does with `received`: with `warm_restart`, SIGTERM becomes SIGUSR1;
/// with an auth file, SIGHUP is a request to check it (never passed on unchecked).
pub fn action(received: Signal, warm_restart: bool, auth_file: bool) -> Action {
    match received {
        Signal::CHILD => Action::Reap,
        Signal::TERM if warm_restart => Action::Forward(Signal::USR1),
        Signal::HUP if auth_file => Action::CheckAuthFile,
        other => Action::Forward(other),
    }
}

/// The exit code of a process that ended with `exit_status`, or was killed by `signal`: its
/// exit status, or 128 plus the signal, as a shell reports it.
pub fn exit_code(exit_status: Option<i32>, signal: Option<i32>) -> u8 {
    let code = match (exit_status, signal) {
        (Some(code), _) => code,
        (None, Some(signal)) => 128 + signal,
        (None, None) => 1,
    };
    u8::try_from(code & 0xff).unwrap_or(1)
}

/// Runs memcached until it ends; returns the exit code the container should end with.
pub async fn run(args: SuperviseArgs) -> Result<u8, SuperviseError> {
    // Listening before memcached starts, so that no signal is missed.
    let mut streams = Vec::new();
    for (name, handled) in HANDLED {
        let stream = signal(SignalKind::from_raw(handled.as_raw())).map_err(|error| {
            SuperviseError::Signal {
                signal: name,
                error,
            }
        })?;
        streams.push((handled, stream));
    }
    // Orphans come to the supervisor even where it is not PID 1 (a PID 1 gets them anyway).
    if let Err(error) = rustix::process::set_child_subreaper(Some(rustix::process::getpid())) {
        debug!(%error, "cannot become the subreaper of memcached's descendants");
    }
    let listener = health::listen(args.metrics_port).await?;
    let (metrics, registry) = SupervisorMetrics::registered(args.client_ca_request.is_some());
    let heartbeat = Heartbeat::default();
    heartbeat.beat();
    health::beside(
        listener,
        heartbeat.clone(),
        registry,
        supervise(&args, streams, &heartbeat, &metrics),
    )
    .await
}

/// Starts memcached and supervises it until it ends, beating `heartbeat` at every look at the
/// auth file, which `metrics` records.
async fn supervise(
    args: &SuperviseArgs,
    mut streams: Vec<(Signal, tokio::signal::unix::Signal)>,
    heartbeat: &Heartbeat,
    metrics: &SupervisorMetrics,
) -> Result<u8, SuperviseError> {
    let mut auth = args.auth_file.clone().map(AuthWatch::new);
    let ca_restart = match (
        &args.client_ca_request,
        &args.client_ca,
        &args.restarted_file,
    ) {
        (Some(request), Some(ca), Some(done)) => {
            Some(CaRestart::new(request.clone(), ca.clone(), done.clone()))
        }
        _ => None,
    };
    let mut restarting = false;
    let mut waiting_for = None;
    let mut trusted = Trusted::default();
    // What memcached is about to read, judged before it starts.
    if let Some(watch) = &mut auth {
        check_auth_file(watch, None, metrics);
    }
    if args.warm_restart {
        tokio::select! {
            () = tokio::time::sleep(WARM_START_DELAY) => {}
            received = next_signal(&mut streams) => {
                if matches!(received, Signal::TERM | Signal::INT) {
                    info!(signal = ?received, "stopped before memcached started");
                    return Ok(128 + u8::try_from(received.as_raw()).unwrap_or(0));
                }
            }
        }
    }
    // What memcached may trust: the file it is about to read, then every version seen.
    if let Some(watch) = &ca_restart {
        count_withdrawn(watch, &mut trusted, metrics);
    }
    let (program, arguments) = args
        .command
        .split_first()
        .map(|(program, arguments)| (program.clone(), arguments.to_vec()))
        .unwrap_or_default();
    // Reaped by `reap`, with every other child that ends: wait(2) on any process.
    #[allow(clippy::zombie_processes)]
    let child = Command::new(&program)
        .args(&arguments)
        .spawn()
        .map_err(|error| SuperviseError::Start {
            program: program.clone(),
            error,
        })?;
    let memcached = Pid::from_child(&child);
    info!(
        pid = memcached.as_raw_nonzero().get(),
        program,
        warm_restart = args.warm_restart,
        auth_file = ?args.auth_file,
        "started memcached"
    );
    let mut tick = tokio::time::interval(args.interval);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        let received = tokio::select! {
            received = next_signal(&mut streams) => received,
            _ = tick.tick() => {
                heartbeat.beat();
                if let Some(status) = reap(memcached) {
                    return Ok(ended(status));
                }
                if let Some(watch) = &mut auth {
                    check_auth_file(watch, Some(memcached), metrics);
                }
                if let Some(watch) = &ca_restart {
                    count_withdrawn(watch, &mut trusted, metrics);
                    if !restarting {
                        restarting = check_ca_request(watch, memcached, &mut waiting_for);
                    }
                }
                continue;
            }
        };
        match action(received, args.warm_restart, auth.is_some()) {
            Action::Reap => {
                if let Some(status) = reap(memcached) {
                    return Ok(ended(status));
                }
            }
            Action::CheckAuthFile => {
                if let Some(watch) = &mut auth {
                    check_auth_file(watch, Some(memcached), metrics);
                }
            }
            Action::Forward(sent) => {
                info!(received = ?received, sent = ?sent, "passing a signal on to memcached");
                if let Err(error) = kill_process(memcached, sent) {
                    warn!(%error, signal = ?sent, "cannot signal memcached");
                }
            }
        }
    }
}

/// Logs how memcached ended; returns the container's exit code.
fn ended(status: rustix::process::WaitStatus) -> u8 {
    let code = exit_code(status.exit_status(), status.terminating_signal());
    info!(
        exit_status = status.exit_status(),
        signal = status.terminating_signal(),
        code,
        "memcached ended"
    );
    code
}

/// The next signal received on any of `streams`.
async fn next_signal(streams: &mut [(Signal, tokio::signal::unix::Signal)]) -> Signal {
    let waits = streams.iter_mut().map(|(handled, stream)| {
        let handled = *handled;
        Box::pin(async move {
            stream.recv().await;
            handled
        })
    });
    futures::future::select_all(waits).await.0
}

/// Reaps every child that ended; returns memcached's status if it was among them.
fn reap(memcached: Pid) -> Option<rustix::process::WaitStatus> {
    let mut found = None;
    loop {
        match rustix::process::wait(WaitOptions::NOHANG) {
            Ok(Some((pid, status))) => {
                if pid == memcached {
                    found = Some(status);
                } else {
                    debug!(pid = pid.as_raw_nonzero().get(), "reaped a process");
                }
            }
            // Children left, none ended; or no child at all.
            Ok(None) | Err(_) => return found,
        }
    }
}

/// Reads `ca.crt` into what memcached may trust, and counts the CAs it no longer holds.
fn count_withdrawn(watch: &CaRestart, trusted: &mut Trusted, metrics: &SupervisorMetrics) {
    match std::fs::read(watch.ca_path()) {
        Ok(content) => {
            let withdrawn = i64::try_from(trusted.saw(&content)).unwrap_or(i64::MAX);
            if withdrawn != metrics.withdrawn_cas.get() {
                if withdrawn > 0 {
                    warn!(
                        withdrawn,
                        "CAs withdrawn from ca.crt are still trusted by memcached until the \
                         operator asks for its restart in place"
                    );
                }
                metrics.withdrawn_cas.set(withdrawn);
            }
        }
        Err(error) => debug!(%error, "cannot read ca.crt"),
    }
}

/// Acts on the operator's request for a restart, if `ca.crt` has its digest: records it, says
/// why in the termination message and stops memcached with SIGUSR1 (which saves its items);
/// returns whether memcached was stopped. A request that cannot be recorded is not acted on,
/// since the next supervisor would act on it again. `waiting_for` keeps the request last
/// logged as waiting, so that each is logged once.
fn check_ca_request(watch: &CaRestart, memcached: Pid, waiting_for: &mut Option<String>) -> bool {
    match watch.look() {
        ca_restart::Look::Idle => false,
        ca_restart::Look::Waiting { request, mounted } => {
            if waiting_for.as_ref() != Some(&request) {
                info!(
                    request,
                    mounted, "a restart is asked for; waiting for the kubelet to bring that ca.crt"
                );
                *waiting_for = Some(request);
            }
            false
        }
        ca_restart::Look::Restart { request } => {
            if let Err(error) = watch.record(&request) {
                error!(
                    %error,
                    file = %watch.done_path().display(),
                    "cannot record the restart asked for; not restarting"
                );
                return false;
            }
            let why = ca_restart::reason(&request);
            super::termination::say_why(
                std::path::Path::new(super::termination::TERMINATION_LOG),
                &why,
            );
            info!(
                request,
                "restarting memcached in place (SIGUSR1 saves its items): {why}"
            );
            match kill_process(memcached, Signal::USR1) {
                Ok(()) => true,
                // Asked again at the next look.
                Err(error) => {
                    warn!(%error, "cannot signal memcached");
                    let _ = std::fs::remove_file(watch.done_path());
                    false
                }
            }
        }
    }
}

/// Reads the auth file and acts on what it finds: memcached (when running) rereads a changed
/// file it accepts; a file it would refuse is logged, never sent. `metrics` records both.
fn check_auth_file(watch: &mut AuthWatch, memcached: Option<Pid>, metrics: &SupervisorMetrics) {
    let (look, unreadable) = watch.look();
    metrics.refused.set(i64::from(watch.refusing()));
    let file = watch.path().display().to_string();
    if let Some(error) = unreadable {
        warn!(%error, auth_file = file, "cannot read the auth file");
    }
    match look {
        Look::Unchanged => {}
        Look::StartedRefused(refusal) => error!(
            auth_file = file,
            reason = %refusal,
            "memcached starts with an auth file it refuses or misreads"
        ),
        Look::Refused(refusal) => {
            metrics.reloads.get_or_create(&FAILED).inc();
            error!(
                auth_file = file,
                reason = %refusal,
                "the auth file changed to one memcached would refuse or misread; not sent: \
                 memcached keeps the credentials it has"
            );
        }
        Look::Changed {
            credentials,
            digest,
        } => {
            let Some(pid) = memcached else {
                return;
            };
            match kill_process(pid, Signal::HUP) {
                Ok(()) => {
                    metrics.reloads.get_or_create(&SUCCEEDED).inc();
                    info!(
                        credentials,
                        "the auth file changed; sent memcached SIGHUP to reread it"
                    );
                    watch.sent(digest);
                }
                // Tried again at the next look.
                Err(error) => {
                    metrics.reloads.get_or_create(&FAILED).inc();
                    warn!(%error, "the auth file changed; cannot signal memcached");
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sigterm_becomes_memcacheds_graceful_stop_only_with_a_warm_restart() {
        assert_eq!(
            action(Signal::TERM, true, false),
            Action::Forward(Signal::USR1)
        );
        assert_eq!(
            action(Signal::TERM, false, true),
            Action::Forward(Signal::TERM)
        );
        for passed in [Signal::INT, Signal::QUIT, Signal::USR1, Signal::USR2] {
            assert_eq!(action(passed, true, true), Action::Forward(passed));
        }
    }

    #[test]
    fn the_metrics_say_a_refused_file_and_count_the_rereads_sent_and_refused() {
        let dir = tempfile::tempdir().expect("a directory");
        let path = dir.path().join("authfile");
        std::fs::write(&path, "app:one\n").expect("written");
        let mut watch = AuthWatch::new(path.clone());
        let (metrics, _) = SupervisorMetrics::registered(false);
        let count = |outcome| metrics.reloads.get_or_create(&outcome).get();
        check_auth_file(&mut watch, None, &metrics);
        assert_eq!(
            (metrics.refused.get(), count(SUCCEEDED), count(FAILED)),
            (0, 0, 0)
        );
        // A process to send SIGHUP to, in memcached's place.
        let mut child = Command::new("sleep").arg("30").spawn().expect("sleep runs");
        let pid = Pid::from_child(&child);
        std::fs::write(&path, "app:one\n\napp:two\n").expect("written");
        check_auth_file(&mut watch, Some(pid), &metrics);
        assert_eq!(
            (metrics.refused.get(), count(SUCCEEDED), count(FAILED)),
            (1, 0, 1)
        );
        check_auth_file(&mut watch, Some(pid), &metrics);
        assert_eq!(
            (metrics.refused.get(), count(FAILED)),
            (1, 1),
            "still refused, counted once"
        );
        std::fs::write(&path, "app:one\napp:two\n").expect("written");
        check_auth_file(&mut watch, Some(pid), &metrics);
        assert_eq!(
            (metrics.refused.get(), count(SUCCEEDED), count(FAILED)),
            (0, 1, 1)
        );
        let status = child.wait().expect("sleep ended");
        assert_eq!(
            std::os::unix::process::ExitStatusExt::signal(&status),
            Some(Signal::HUP.as_raw()),
            "the reread was sent"
        );
    }

    #[test]
    fn sighup_is_checked_against_the_auth_file_never_passed_on_unchecked() {
        assert_eq!(action(Signal::HUP, false, true), Action::CheckAuthFile);
        assert_eq!(
            action(Signal::HUP, false, false),
            Action::Forward(Signal::HUP)
        );
        assert_eq!(action(Signal::CHILD, true, true), Action::Reap);
    }

    #[test]
    fn the_exit_code_is_memcacheds_status_or_128_plus_its_signal() {
        assert_eq!(exit_code(Some(0), None), 0);
        assert_eq!(exit_code(Some(71), None), 71);
        assert_eq!(exit_code(None, Some(9)), 137);
        assert_eq!(exit_code(None, Some(15)), 143);
    }

    #[test]
    fn a_command_is_required_after_the_flags() {
        use clap::Parser;
        #[derive(Parser)]
        struct Cli {
            #[command(flatten)]
            args: SuperviseArgs,
        }
        let parsed =
            Cli::try_parse_from(["supervise", "--warm-restart", "--", "memcached", "-m", "64"])
                .expect("parses");
        assert_eq!(parsed.args.command, ["memcached", "-m", "64"]);
        assert!(parsed.args.warm_restart);
        assert!(Cli::try_parse_from(["supervise", "--"]).is_err());
    }
}
