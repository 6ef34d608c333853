//! Plays kubelet and kube-proxy for one Node of the local control plane, with no container
//! engine: registers the Node and keeps its Lease, runs the pods bound to it as local
//! processes from their real specs, writes their status as a kubelet does, and forwards
//! Service ClusterIPs to ready endpoints.
//!
//! It writes the status of its Node and its pods only (that is the kubelet's job); Jobs,
//! Deployments and StatefulSets get theirs from their controllers, which read the pods. How
//! this differs from a real node (no isolation besides a mount namespace, a bind shim instead
//! of a network namespace, an explicit image table) is written down in
//! `docs/local-cluster.md`.
//!
//! Modules, one job each: `node` (registration, heartbeats), `pod_ips` (addresses),
//! `pod_worker` (one pod's life), `pod_status` (status rules), `env` (environment),
//! `volumes` and `atomic_writer` (files), `sandbox` (processes and mounts), `probes`,
//! `image_table`, `service_proxy`.

pub mod atomic_writer;
pub mod env;
pub mod image_table;
pub mod node;
pub mod pod_ips;
pub mod pod_status;
pub mod pod_worker;
pub mod probes;
pub mod sandbox;
pub mod service_proxy;
pub mod volumes;

use std::collections::BTreeMap;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::Pod;
use kube::Client;
use kube::api::{Api, DeleteParams};
use kube::runtime::watcher::{self, Event};
use tokio::sync::watch;
use tokio::task::JoinHandle;

use self::image_table::ImageTable;
use self::node::{Machine, NodeError, NodeHeartbeat};
use self::pod_ips::PodIps;
use self::pod_worker::NodeContext;
use self::sandbox::{MountPoints, ProcessGroups};
use self::service_proxy::ServiceProxy;

/// What the agent needs to start.
#[derive(Clone, Debug)]
pub struct AgentConfig {
    /// The Node's name.
    pub node_name: String,
    /// Where pods' volumes and logs live (`pods/UID/`); made when missing.
    pub state_dir: PathBuf,
    /// The pod IP range.
    pub pod_ips: PodIps,
    /// The node's address (`status.hostIP`, the Node's InternalIP).
    pub host_ip: Ipv4Addr,
    /// The image table.
    pub images: ImageTable,
    /// The API server's address, endpoint of the `kubernetes` Service.
    pub apiserver: SocketAddr,
}

/// Why the agent could not start.
#[derive(Debug, thiserror::Error)]
pub enum AgentError {
    /// The Node could not be registered.
    #[error(transparent)]
    Node(#[from] NodeError),
    /// The state directory could not be made.
    #[error("cannot create the state directory {}: {error}", .path.display())]
    StateDir {
        /// The directory.
        path: PathBuf,
        /// What the system said.
        error: std::io::Error,
    },
}

/// A running agent. [`NodeAgent::stop`] stops every pod's processes gracefully; dropping it
/// without stopping (a panicking test) SIGKILLs them and removes the mount points and pod
/// directories it made.
pub struct NodeAgent {
    stop: watch::Sender<bool>,
    pods: Option<JoinHandle<()>>,
    heartbeat: JoinHandle<()>,
    _proxy: ServiceProxy,
    mount_points: MountPoints,
    processes: ProcessGroups,
    pods_dir: PathBuf,
}

impl NodeAgent {
    /// Registers the Node, starts the proxy, and starts running the pods bound to it.
    pub async fn start(client: Client, config: AgentConfig) -> Result<NodeAgent, AgentError> {
        std::fs::create_dir_all(&config.state_dir).map_err(|error| AgentError::StateDir {
            path: config.state_dir.clone(),
            error,
        })?;
        let version = client
            .apiserver_version()
            .await
            .map(|v| v.git_version)
            .unwrap_or_else(|_| "v0.0.0".to_string());
        let host_ip = config.host_ip.to_string();
        let machine = Machine::read(&version);
        let allocatable = machine
            .allocatable()
            .into_iter()
            .map(|(name, quantity)| (name, quantity.0))
            .collect();
        let heartbeat =
            NodeHeartbeat::register(client.clone(), &config.node_name, &host_ip, machine).await?;
        let heartbeat = tokio::spawn(async move {
            let mut reported = Instant::now();
            loop {
                tokio::time::sleep(node::LEASE_RENEW).await;
                if let Err(error) = heartbeat.renew_lease().await {
                    tracing::warn!(%error, "cannot renew the node lease");
                }
                if reported.elapsed() >= node::STATUS_REPORT {
                    reported = Instant::now();
                    if let Err(error) = heartbeat.update_status().await {
                        tracing::warn!(%error, "cannot update the node status");
                    }
                }
            }
        });
        let proxy = ServiceProxy::start(client.clone(), config.apiserver);
        let mount_points = MountPoints::default();
        let processes = ProcessGroups::default();
        let pods_dir = config.state_dir.join("pods");
        let context = Arc::new(NodeContext {
            client: client.clone(),
            node_name: config.node_name.clone(),
            host_ip,
            allocatable,
            images: Arc::new(config.images),
            state_dir: config.state_dir,
            mount_points: mount_points.clone(),
            processes: processes.clone(),
        });
        let (stop, stopped) = watch::channel(false);
        let pods = tokio::spawn(run_pods(context, config.pod_ips, stopped));
        Ok(NodeAgent {
            stop,
            pods: Some(pods),
            heartbeat,
            _proxy: proxy,
            mount_points,
            processes,
            pods_dir,
        })
    }

    /// Stops every pod's processes, removes their files and mount points, and stops the
    /// heartbeats and the proxy. The Node and the pods stay in the API, as with a kubelet
    /// that stops.
    pub async fn stop(mut self) {
        let _ = self.stop.send(true);
        if let Some(pods) = self.pods.take() {
            let _ = pods.await;
        }
        self.heartbeat.abort();
        let left = self.mount_points.outstanding();
        if !left.is_empty() {
            tracing::warn!(?left, "mount points left behind");
        }
    }
}

impl Drop for NodeAgent {
    fn drop(&mut self) {
        self.heartbeat.abort();
        let Some(pods) = self.pods.take() else {
            return;
        };
        // Killed while the workers still hold their children (unwaited, so no pid reused).
        self.processes.kill_all();
        pods.abort();
        self.mount_points.release_all();
        if self.pods_dir.exists()
            && let Err(error) = std::fs::remove_dir_all(&self.pods_dir)
        {
            tracing::warn!(dir = %self.pods_dir.display(), %error, "cannot remove the pods' directories");
        }
    }
}

struct Running {
    sender: watch::Sender<Option<Pod>>,
    task: JoinHandle<()>,
    ip: Ipv4Addr,
}

/// Watches the pods bound to the node and keeps one worker per pod.
async fn run_pods(context: Arc<NodeContext>, mut ips: PodIps, mut stop: watch::Receiver<bool>) {
    let api: Api<Pod> = Api::all(context.client.clone());
    let config = watcher::Config::default().fields(&format!("spec.nodeName={}", context.node_name));
    let mut events = watcher::watcher(api, config).boxed();
    let mut workers: BTreeMap<String, Running> = BTreeMap::new();
    let mut listing: Option<Vec<String>> = None;
    let mut reap = tokio::time::interval(Duration::from_millis(500));
    loop {
        tokio::select! {
            _ = stop.changed() => break,
            _ = reap.tick() => {
                workers.retain(|_, w| {
                    if w.task.is_finished() {
                        ips.release(w.ip);
                        false
                    } else {
                        true
                    }
                });
            }
            event = events.try_next() => match event {
                Ok(Some(Event::Init)) => listing = Some(Vec::new()),
                Ok(Some(Event::InitApply(pod))) => {
                    if let (Some(seen), Some(uid)) = (listing.as_mut(), pod.metadata.uid.clone()) {
                        seen.push(uid);
                    }
                    apply(&context, &mut ips, &mut workers, &stop, pod).await;
                }
                Ok(Some(Event::InitDone)) => {
                    if let Some(seen) = listing.take() {
                        for (uid, worker) in &workers {
                            if !seen.contains(uid) {
                                let _ = worker.sender.send(None);
                            }
                        }
                    }
                }
                Ok(Some(Event::Apply(pod))) => apply(&context, &mut ips, &mut workers, &stop, pod).await,
                Ok(Some(Event::Delete(pod))) => {
                    if let Some(worker) = pod.metadata.uid.as_ref().and_then(|uid| workers.get(uid)) {
                        let _ = worker.sender.send(None);
                    }
                }
                Ok(None) => break,
                Err(error) => {
                    tracing::warn!(%error, "pod watch failed; retrying");
                    tokio::time::sleep(Duration::from_secs(1)).await;
                }
            },
        }
    }
    for (_, worker) in workers {
        let _ = worker.task.await;
    }
}

/// Hands a pod to its worker, starting one for a pod seen the first time.
async fn apply(
    context: &Arc<NodeContext>,
    ips: &mut PodIps,
    workers: &mut BTreeMap<String, Running>,
    stop: &watch::Receiver<bool>,
    pod: Pod,
) {
    let Some(uid) = pod.metadata.uid.clone() else {
        return;
    };
    if let Some(worker) = workers.get(&uid) {
        let _ = worker.sender.send(Some(pod));
        return;
    }
    let phase = pod.status.as_ref().and_then(|s| s.phase.as_deref());
    let terminal = matches!(phase, Some("Succeeded") | Some("Failed"));
    if terminal {
        // Nothing runs for a finished pod; a deletion only needs the final delete.
        if pod.metadata.deletion_timestamp.is_some() {
            let api: Api<Pod> = Api::namespaced(
                context.client.clone(),
                pod.metadata.namespace.as_deref().unwrap_or_default(),
            );
            let params = DeleteParams {
                grace_period_seconds: Some(0),
                ..DeleteParams::default()
            };
            let _ = api
                .delete(pod.metadata.name.as_deref().unwrap_or_default(), &params)
                .await;
        }
        return;
    }
    let wanted = pod
        .status
        .as_ref()
        .and_then(|s| s.pod_ip.as_deref())
        .and_then(|ip| ip.parse().ok());
    let Some(ip) = ips.take(wanted) else {
        tracing::warn!(pod = ?pod.metadata.name, "no pod IP left in the range");
        return;
    };
    let (sender, receiver) = watch::channel(Some(pod));
    let task = tokio::spawn(pod_worker::run(
        context.clone(),
        IpAddr::V4(ip),
        receiver,
        stop.clone(),
    ));
    workers.insert(uid, Running { sender, task, ip });
}
