//! Runs one pod bound to the node from its spec, as the kubelet's pod worker does: prepares
//! its volumes, runs its init containers in order and then its containers as sandboxed local
//! processes, probes them, restarts them by the pod's restart policy with the kubelet's
//! back-off, writes the pod's status, and on deletion stops them (SIGTERM, then SIGKILL after
//! the grace period), removes every file and mount point it made, and deletes the pod with
//! grace period 0.
//!
//! One worker per pod; it learns about changes to its pod through a watch channel fed by
//! the agent. Status rules live in `pod_status`, environment in `env`, volumes in `volumes`,
//! process start in `sandbox`.

use std::collections::BTreeMap;
use std::net::IpAddr;
use std::os::fd::OwnedFd;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::{ConfigMap, Container, Pod, PodStatus, Secret, Service};
use kube::Client;
use kube::api::{Api, DeleteParams, ListParams, PostParams, Preconditions};
use rustix::process::Signal;
use tokio::process::Child;
use tokio::sync::watch;
use tokio::task::JoinHandle;

use super::env::{self, EnvSources};
use super::image_table::ImageTable;
use super::pod_status::{self, ContainerRecord, Exit, RunState, StatusInput};
use super::probes::{self, ProbeAction, ProbeTracker, Timings};
use super::sandbox::{self, Launch, Mount, MountPoints, ProcessGroups};
use super::volumes::PodVolumes;

mod launch;
mod probing;

/// How often the worker looks at its processes and probes.
const TICK: Duration = Duration::from_millis(100);
/// How often volumes are brought up to date (the kubelet: about a minute).
const VOLUME_RESYNC: Duration = Duration::from_secs(1);
/// The kubelet's first restart back-off, doubled up to [`MAX_BACKOFF`].
const INITIAL_BACKOFF: Duration = Duration::from_secs(10);
/// The kubelet's longest restart back-off.
const MAX_BACKOFF: Duration = Duration::from_secs(300);
/// The grace period when neither the deletion nor the spec gives one.
const DEFAULT_GRACE: Duration = Duration::from_secs(30);
/// The longest grace period processes get when the agent itself stops.
const SHUTDOWN_GRACE: Duration = Duration::from_secs(10);

/// What every worker shares.
#[derive(Clone)]
pub struct NodeContext {
    /// The API client.
    pub client: Client,
    /// The node's name.
    pub node_name: String,
    /// The node's IP (`status.hostIP`).
    pub host_ip: String,
    /// The node's allocatable resources, by name.
    pub allocatable: BTreeMap<String, String>,
    /// The image table.
    pub images: Arc<ImageTable>,
    /// The agent's state directory (pods live under `pods/UID`).
    pub state_dir: PathBuf,
    /// Mount points made on the host.
    pub mount_points: MountPoints,
    /// Process groups of the processes started and not yet waited for.
    pub processes: ProcessGroups,
}

/// A started process and what it holds.
struct Process {
    child: Child,
    pgid: u32,
    namespace: Option<OwnedFd>,
    held: Vec<Vec<PathBuf>>,
    started_at: jiff::Timestamp,
    started: Instant,
    env: Vec<(String, String)>,
    mounts: Vec<(PathBuf, PathBuf)>,
}

/// A probe of one container: its action, tracker, next run and the run under way.
struct ProbeSlot {
    action: ProbeAction,
    tracker: ProbeTracker,
    due: Instant,
    running: Option<JoinHandle<bool>>,
}

/// One init container or container.
struct Slot {
    spec: Container,
    record: ContainerRecord,
    process: Option<Process>,
    backoff: Duration,
    retry_at: Option<Instant>,
    readiness: Option<ProbeSlot>,
    liveness: Option<ProbeSlot>,
    startup: Option<ProbeSlot>,
}

impl Slot {
    fn new(spec: &Container, reason: &str) -> Slot {
        Slot {
            record: ContainerRecord {
                name: spec.name.clone(),
                image: spec.image.clone().unwrap_or_default(),
                image_id: String::new(),
                state: RunState::Waiting {
                    reason: reason.to_string(),
                    message: None,
                },
                last: None,
                restart_count: 0,
                ready: false,
                started: false,
            },
            spec: spec.clone(),
            process: None,
            backoff: INITIAL_BACKOFF,
            retry_at: None,
            readiness: None,
            liveness: None,
            startup: None,
        }
    }

    fn succeeded(&self) -> bool {
        matches!(&self.record.state, RunState::Terminated(e) if e.exit_code == 0)
    }
}

/// Runs the pod until it is deleted (or gone) or `stop` turns true; returns when every
/// process it started has exited and its files are removed.
pub async fn run(
    context: Arc<NodeContext>,
    pod_ip: IpAddr,
    mut pod: watch::Receiver<Option<Pod>>,
    mut stop: watch::Receiver<bool>,
) {
    let Some(first) = pod.borrow_and_update().clone() else {
        return;
    };
    let uid = first.metadata.uid.clone().unwrap_or_default();
    let mut worker = Worker::new(context, first, pod_ip, &uid);
    let mut ticker = tokio::time::interval(TICK);
    ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = ticker.tick() => {}
            changed = pod.changed() => {
                if changed.is_err() {
                    worker.shutdown(SHUTDOWN_GRACE).await;
                    return;
                }
            }
            _ = stop.changed() => {}
        }
        if *stop.borrow() {
            worker.shutdown(SHUTDOWN_GRACE).await;
            return;
        }
        let latest = pod.borrow_and_update().clone();
        match latest {
            None => {
                // Deleted by someone else (force deletion): stop at once.
                worker.terminate(Duration::ZERO).await;
                worker.clean_up();
                return;
            }
            Some(latest) if latest.metadata.deletion_timestamp.is_some() => {
                worker.pod = latest;
                let grace = worker.grace();
                worker.terminate(grace).await;
                worker.write_status().await;
                worker.clean_up();
                worker.delete().await;
                return;
            }
            Some(latest) => {
                worker.pod = latest;
                worker.step().await;
            }
        }
    }
}

struct Worker {
    context: Arc<NodeContext>,
    pod: Pod,
    pod_ip: IpAddr,
    dir: PathBuf,
    volumes: PodVolumes,
    sandbox_ready: bool,
    volumes_synced: Option<Instant>,
    start_time: jiff::Timestamp,
    init: Vec<Slot>,
    containers: Vec<Slot>,
    written: Option<PodStatus>,
}

impl Worker {
    fn new(context: Arc<NodeContext>, pod: Pod, pod_ip: IpAddr, uid: &str) -> Worker {
        let dir = context.state_dir.join("pods").join(uid);
        let spec = pod.spec.clone().unwrap_or_default();
        let init = spec
            .init_containers
            .iter()
            .flatten()
            .map(|c| Slot::new(c, "PodInitializing"))
            .collect();
        let waiting = if spec.init_containers.as_ref().is_some_and(|i| !i.is_empty()) {
            "PodInitializing"
        } else {
            "ContainerCreating"
        };
        let containers = spec
            .containers
            .iter()
            .map(|c| Slot::new(c, waiting))
            .collect();
        let start_time = pod
            .status
            .as_ref()
            .and_then(|s| s.start_time.as_ref())
            .map(|t| t.0)
            .unwrap_or_else(jiff::Timestamp::now);
        Worker {
            volumes: PodVolumes::new(&dir),
            context,
            pod,
            pod_ip,
            dir,
            sandbox_ready: false,
            volumes_synced: None,
            start_time,
            init,
            containers,
            written: None,
        }
    }

    fn name(&self) -> String {
        format!(
            "{}/{}",
            self.pod.metadata.namespace.as_deref().unwrap_or_default(),
            self.pod.metadata.name.as_deref().unwrap_or_default()
        )
    }

    fn namespace(&self) -> String {
        self.pod.metadata.namespace.clone().unwrap_or_default()
    }

    fn restart_policy(&self) -> String {
        self.pod
            .spec
            .as_ref()
            .and_then(|s| s.restart_policy.clone())
            .unwrap_or_else(|| "Always".to_string())
    }

    fn env_sources_base(&self) -> EnvSources {
        EnvSources {
            pod_ip: self.pod_ip.to_string(),
            host_ip: self.context.host_ip.clone(),
            allocatable: self.context.allocatable.clone(),
            ..EnvSources::default()
        }
    }

    /// One round: volumes, init containers, containers, probes, status.
    async fn step(&mut self) {
        let due = self
            .volumes_synced
            .is_none_or(|at| at.elapsed() >= VOLUME_RESYNC);
        if due {
            self.volumes_synced = Some(Instant::now());
            let base = self.env_sources_base();
            match self
                .volumes
                .sync(&self.context.client, &self.pod, &base)
                .await
            {
                Ok(changed) => {
                    if !changed.is_empty() {
                        tracing::info!(pod = %self.name(), volumes = ?changed, "volumes updated");
                    }
                    self.sandbox_ready = true;
                }
                Err(error) => {
                    tracing::warn!(pod = %self.name(), %error, "cannot prepare volumes");
                    if !self.sandbox_ready {
                        let message = error.to_string();
                        for slot in self.init.iter_mut().chain(self.containers.iter_mut()) {
                            if slot.process.is_none() && slot.record.last.is_none() {
                                slot.record.state = RunState::Waiting {
                                    reason: "ContainerCreating".to_string(),
                                    message: Some(message.clone()),
                                };
                            }
                        }
                    }
                }
            }
        }
        if self.sandbox_ready {
            self.advance().await;
        }
        self.write_status().await;
    }

    async fn advance(&mut self) {
        let policy = self.restart_policy();
        // Init containers: one at a time, in order.
        if let Some(index) = self.init.iter().position(|s| !s.succeeded()) {
            self.reap(true, index);
            let failed_for_good = policy == "Never"
                && matches!(&self.init[index].record.state, RunState::Terminated(e) if e.exit_code != 0);
            if failed_for_good {
                return;
            }
            if self.init[index].process.is_none() && !self.init[index].succeeded() {
                self.start(true, index).await;
            }
            return;
        }
        for index in 0..self.containers.len() {
            self.reap(false, index);
            let slot = &self.containers[index];
            let never_ran =
                slot.record.last.is_none() && !matches!(slot.record.state, RunState::Terminated(_));
            if slot.process.is_none() && (never_ran || self.should_restart(&policy, index)) {
                self.start(false, index).await;
            }
            self.probe(index).await;
        }
    }

    fn should_restart(&self, policy: &str, index: usize) -> bool {
        let slot = &self.containers[index];
        let exit = match (&slot.record.state, &slot.record.last) {
            (RunState::Terminated(e), _) => Some(e),
            (RunState::Waiting { .. }, Some(e)) => Some(e),
            _ => None,
        };
        match exit {
            Some(e) => pod_status::restarts(policy, false, e.exit_code),
            None => true,
        }
    }

    /// Notices a process that has exited and records how.
    fn reap(&mut self, init: bool, index: usize) {
        let policy = self.restart_policy();
        let mount_points = self.context.mount_points.clone();
        let processes = self.context.processes.clone();
        let pod = self.name();
        let slot = if init {
            &mut self.init[index]
        } else {
            &mut self.containers[index]
        };
        let Some(process) = slot.process.as_mut() else {
            return;
        };
        let Ok(Some(status)) = process.child.try_wait() else {
            return;
        };
        // Whatever the main process left in its group goes with it.
        sandbox::signal_group(process.pgid, Signal::KILL);
        let Some(process) = slot.process.take() else {
            return;
        };
        processes.remove(process.pgid);
        for held in &process.held {
            mount_points.release(held);
        }
        let exit = exit_of(status, process.started_at);
        tracing::info!(container = %slot.spec.name, code = exit.exit_code, "container exited");
        if process.started.elapsed() > Duration::from_secs(600) {
            slot.backoff = INITIAL_BACKOFF;
        }
        let restarts = pod_status::restarts(&policy, init, exit.exit_code);
        slot.record.ready = false;
        slot.record.started = false;
        slot.readiness = None;
        slot.liveness = None;
        slot.startup = None;
        if restarts {
            slot.record.last = Some(exit);
            slot.record.restart_count += 1;
            slot.record.state = RunState::Waiting {
                reason: "CrashLoopBackOff".to_string(),
                message: Some(format!(
                    "back-off {}s restarting failed container={} pod={}",
                    slot.backoff.as_secs(),
                    slot.spec.name,
                    pod
                )),
            };
            slot.retry_at = Some(Instant::now() + slot.backoff);
            slot.backoff = (slot.backoff * 2).min(MAX_BACKOFF);
        } else {
            slot.record.state = RunState::Terminated(exit);
        }
    }

    /// The grace period of a deletion.
    fn grace(&self) -> Duration {
        let seconds = self.pod.metadata.deletion_grace_period_seconds.or_else(|| {
            self.pod
                .spec
                .as_ref()
                .and_then(|s| s.termination_grace_period_seconds)
        });
        seconds
            .map(|s| Duration::from_secs(s.max(0) as u64))
            .unwrap_or(DEFAULT_GRACE)
    }

    /// SIGTERM to every process, SIGKILL to what is left after `grace`, and waits for all.
    async fn terminate(&mut self, grace: Duration) {
        let mount_points = self.context.mount_points.clone();
        for slot in self.init.iter_mut().chain(self.containers.iter_mut()) {
            if let Some(process) = &slot.process {
                sandbox::signal_group(process.pgid, Signal::TERM);
            }
        }
        let deadline = Instant::now() + grace;
        for slot in self.init.iter_mut().chain(self.containers.iter_mut()) {
            let Some(mut process) = slot.process.take() else {
                continue;
            };
            let left = deadline.saturating_duration_since(Instant::now());
            let status = match tokio::time::timeout(left, process.child.wait()).await {
                Ok(status) => status,
                Err(_) => {
                    sandbox::signal_group(process.pgid, Signal::KILL);
                    process.child.wait().await
                }
            };
            sandbox::signal_group(process.pgid, Signal::KILL);
            self.context.processes.remove(process.pgid);
            for held in &process.held {
                mount_points.release(held);
            }
            if let Ok(status) = status {
                slot.record.state = RunState::Terminated(exit_of(status, process.started_at));
            }
            slot.record.ready = false;
        }
    }

    /// Stops everything when the agent itself stops.
    async fn shutdown(&mut self, grace: Duration) {
        self.terminate(grace.min(self.grace())).await;
        self.clean_up();
    }

    /// Removes the pod's directory (volumes, logs).
    fn clean_up(&mut self) {
        if self.dir.exists()
            && let Err(error) = std::fs::remove_dir_all(&self.dir)
        {
            tracing::warn!(dir = %self.dir.display(), %error, "cannot remove the pod's directory");
        }
    }

    /// Deletes the pod with grace period 0, as the kubelet does once its containers are gone.
    async fn delete(&self) {
        let api: Api<Pod> = Api::namespaced(self.context.client.clone(), &self.namespace());
        let params = DeleteParams {
            grace_period_seconds: Some(0),
            preconditions: Some(Preconditions {
                uid: self.pod.metadata.uid.clone(),
                resource_version: None,
            }),
            ..DeleteParams::default()
        };
        let name = self.pod.metadata.name.clone().unwrap_or_default();
        match api.delete(&name, &params).await {
            Ok(_) => tracing::info!(pod = %self.name(), "pod deleted"),
            Err(kube::Error::Api(e)) if e.code == 404 || e.code == 409 => {}
            Err(error) => tracing::warn!(pod = %self.name(), %error, "cannot delete the pod"),
        }
    }

    /// Writes the status when it differs from the last one written.
    async fn write_status(&mut self) {
        let init: Vec<ContainerRecord> = self.init.iter().map(|s| s.record.clone()).collect();
        let containers: Vec<ContainerRecord> =
            self.containers.iter().map(|s| s.record.clone()).collect();
        let ip = self.pod_ip.to_string();
        let compute = |pod: &Pod| {
            pod_status::pod_status(&StatusInput {
                pod,
                init: &init,
                containers: &containers,
                pod_ip: Some(&ip),
                host_ip: &self.context.host_ip,
                start_time: self.start_time,
                sandbox_ready: self.sandbox_ready,
                now: jiff::Timestamp::now(),
            })
        };
        let status = compute(&self.pod);
        if self.written.as_ref() == Some(&status) || self.pod.status.as_ref() == Some(&status) {
            return;
        }
        let api: Api<Pod> = Api::namespaced(self.context.client.clone(), &self.namespace());
        let name = self.pod.metadata.name.clone().unwrap_or_default();
        let mut current = self.pod.clone();
        for _ in 0..3 {
            current.status = Some(compute(&current));
            match api
                .replace_status(&name, &PostParams::default(), &current)
                .await
            {
                Ok(updated) => {
                    self.written = current.status.clone();
                    self.pod = updated;
                    return;
                }
                Err(kube::Error::Api(e)) if e.code == 409 => match api.get_opt(&name).await {
                    Ok(Some(latest)) if latest.metadata.uid == self.pod.metadata.uid => {
                        current = latest
                    }
                    _ => return,
                },
                Err(error) => {
                    tracing::warn!(pod = %self.name(), %error, "cannot write the pod's status");
                    return;
                }
            }
        }
    }
}

fn exit_of(status: std::process::ExitStatus, started_at: jiff::Timestamp) -> Exit {
    use std::os::unix::process::ExitStatusExt;
    let signal = status.signal();
    let code = status
        .code()
        .unwrap_or_else(|| 128 + signal.unwrap_or_default());
    Exit::new(code, signal, started_at, jiff::Timestamp::now())
}
