//! Drills of the node's own failures, on the real node: the API server, etcd, containerd and
//! the kubelet restarted under work, the operator's leader partitioned from the API server,
//! and memcached's container killed or out of memory. Each provokes the failure for real (a
//! daemon stopped and started again as a service manager would, a firewall rule, a signal, a
//! cgroup limit), prints its figures on a `figures:` line (failed writes or operations, lost
//! items, seconds to recover), and fails when a figure whose goal is 0 is not, saying why.

mod killed;
mod partition;
mod restarts;

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Pod;
use kube::api::Api;
use testkit::memcache::Connection;
use tokio::task::JoinHandle;

use crate::cluster::{Env, WAIT, eventually, memcached_status, pod_address};

pub use killed::{
    a_killed_memcached_is_restarted_and_the_status_and_events_follow,
    memcached_out_of_memory_is_restarted_and_the_operator_stays_up,
};
pub use partition::the_partitioned_leader_steps_down_and_no_two_replicas_ever_write;
pub use restarts::{
    containerd_restarted_memcached_serves_through_it,
    etcd_restarted_while_memcacheds_are_created_every_one_ends_available,
    kube_apiserver_restarted_while_memcacheds_are_created_every_one_ends_available,
    kubelet_restarted_memcached_serves_through_it,
};

/// Items set before a fault and read back after it.
const ITEMS: usize = 200;

/// A memcached small enough that hundreds fit on the node: 16 MiB of items, 1m of CPU.
fn small_spec() -> serde_json::Value {
    serde_json::json!({
        "replicas": 1,
        "memcached": { "memoryLimitMB": 16 },
        "resources": {
            "requests": { "cpu": "1m", "memory": "24Mi" },
            "limits": { "memory": "32Mi" },
        },
    })
}

/// `name-0` of `namespace` once its memcached container is ready, with `restarts` restarts.
async fn ready_server(env: &Env, namespace: &str, name: &str, restarts: i32) -> Pod {
    let pods: Api<Pod> = Api::namespaced(env.client.clone(), namespace);
    let pod = format!("{name}-0");
    eventually(
        &format!("{namespace}/{pod} ready after {restarts} restarts"),
        WAIT,
        || async {
            let found = pods.get(&pod).await.map_err(|e| e.to_string())?;
            let status = memcached_status(&found).ok_or("no memcached container status yet")?;
            if status.ready && status.restart_count == restarts {
                Ok(found)
            } else {
                Err(format!(
                    "ready {}, {} restarts",
                    status.ready, status.restart_count
                ))
            }
        },
    )
    .await
}

/// Sets [`ITEMS`] items named `prefix-N` on the server at `address`.
async fn set_items(address: SocketAddr, prefix: &str) {
    let mut connection = Connection::open(address, None)
        .await
        .unwrap_or_else(|e| panic!("a connection to {address}: {e}"));
    crate::cluster::set_items(&mut connection, prefix, ITEMS).await;
}

/// How many of the [`ITEMS`] items `prefix-N` the server at `address` still holds.
async fn count_items(address: SocketAddr, prefix: &str) -> usize {
    let mut connection = Connection::open(address, None)
        .await
        .unwrap_or_else(|e| panic!("a connection to {address}: {e}"));
    crate::cluster::count_items(&mut connection, prefix, ITEMS).await
}

/// A client that sets and reads back an item over and over on one server, reconnecting
/// after a failure, and counts what it did and what failed.
struct ClientLoop {
    stop: Arc<AtomicBool>,
    operations: Arc<AtomicU64>,
    handle: JoinHandle<Vec<String>>,
}

impl ClientLoop {
    /// Starts the loop against `address`.
    fn start(address: SocketAddr) -> ClientLoop {
        let stop = Arc::new(AtomicBool::new(false));
        let operations = Arc::new(AtomicU64::new(0));
        let (stopping, counted) = (stop.clone(), operations.clone());
        let handle = tokio::spawn(async move {
            let mut failures = Vec::new();
            let mut connection = None;
            let mut n = 0u64;
            while !stopping.load(Ordering::Relaxed) {
                n += 1;
                if connection.is_none() {
                    match Connection::open(address, None).await {
                        Ok(opened) => connection = Some(opened),
                        Err(error) => {
                            failures.push(format!("connect: {error}"));
                            counted.fetch_add(1, Ordering::Relaxed);
                            tokio::time::sleep(Duration::from_millis(100)).await;
                            continue;
                        }
                    }
                }
                let Some(open) = connection.as_mut() else {
                    continue;
                };
                let key = format!("loop-{}", n % 1000);
                let value = format!("value-{n}");
                let outcome = match open.set(&key, &value).await {
                    Ok(answer) if answer == "STORED\r\n" => match open.get(&key).await {
                        Ok(Some(read)) if read == value => Ok(()),
                        other => Err(format!("get {key}: {other:?}")),
                    },
                    other => Err(format!("set {key}: {other:?}")),
                };
                counted.fetch_add(1, Ordering::Relaxed);
                if let Err(failure) = outcome {
                    failures.push(failure);
                    connection = None;
                }
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
            failures
        });
        ClientLoop {
            stop,
            operations,
            handle,
        }
    }

    /// Waits until the loop has made `more` operations beyond those it had made when called.
    async fn wait_for_operations(&self, more: u64) {
        let target = self.operations.load(Ordering::Relaxed) + more;
        eventually(&format!("{more} more client operations"), WAIT, || async {
            let done = self.operations.load(Ordering::Relaxed);
            if done >= target {
                Ok(())
            } else {
                Err(format!("{done} of {target}"))
            }
        })
        .await;
    }

    /// Stops the loop; returns how many operations it made and the failures.
    async fn stop(self) -> (u64, Vec<String>) {
        self.stop.store(true, Ordering::Relaxed);
        let failures = self.handle.await.expect("the client loop ends");
        (self.operations.load(Ordering::Relaxed), failures)
    }
}

/// Restarts `daemon` of the node's cluster (the runtime's other tasks, client loops among
/// them, run on meanwhile); returns how long it took.
fn restart(env: &Env, daemon: &str) -> Duration {
    let started = Instant::now();
    tokio::task::block_in_place(|| env.plane.restart(daemon))
        .unwrap_or_else(|error| panic!("{error}"));
    started.elapsed()
}

/// A server of `pod` at memcached's port, as this machine reaches it over the bridge.
fn server(pod: &Pod) -> SocketAddr {
    pod_address(pod, 11211)
}
