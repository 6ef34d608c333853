//! memcached's container ended by the kernel: SIGKILL from this machine, and the out-of-memory
//! killer once the node's memory is full. The kubelet starts the container again in the same
//! pod, the Memcached's status passes through not-ready and back to Available, the operator's
//! Events on the Memcached say which server ended, how, and that it was restarted, and the
//! operator's own replicas stay up.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use futures::StreamExt;
use k8s_openapi::api::events::v1::Event;
use kube::api::{Api, DeleteParams, DynamicObject, ListParams, PostParams};
use kube::core::{ApiResource, GroupVersionKind};
use kube::runtime::watcher;
use memcached_operator::api::{GROUP, STORAGE_VERSION};
use testkit::containers::main_pid;

use super::{memcached_status, ready_server, server, small_spec};
use crate::cluster::{Env, WAIT, busybox_pod, eventually, host};
use testkit::memcache::Connection;

/// The node's pods' memory cgroup (the kubelet's `cgroupRoot`, hack/lib/node-config.sh).
const NODE_MEMORY: &str = "/sys/fs/cgroup/memory/memcached-operator-node";

pub async fn a_killed_memcached_is_restarted_and_the_status_and_events_follow(env: Arc<Env>) {
    let namespace = env.create_namespace("fault-kill").await;
    env.create_memcached(&namespace, "cache", small_spec())
        .await;
    let pod = ready_server(&env, &namespace, "cache", 0).await;
    let statuses = follow_status(&env, &namespace, "cache").await;
    let pid = main_pid(&pod, "memcached").expect("memcached's process");
    let killed = Instant::now();
    host("kill", &["-KILL", &pid.to_string()]);
    let after = ready_server(&env, &namespace, "cache", 1).await;
    let passed = wait_back_to_available(&statuses).await;
    let terminated = memcached_status(&after)
        .and_then(|s| s.last_state?.terminated)
        .expect("the killed container's last state");
    let note = restart_event(&env, &namespace, "cache").await;
    eprintln!(
        "figures: memcached SIGKILLed: restarted by the kubelet ({} exit {}), Available again \
         {:.1} s after the kill; the status went {}; the Event: {note}",
        terminated.reason.as_deref().unwrap_or("?"),
        terminated.exit_code,
        killed.elapsed().as_secs_f64(),
        passed.join(" -> "),
    );
    assert_eq!(terminated.exit_code, 137, "SIGKILL's exit code");
    assert_eq!(after.metadata.uid, pod.metadata.uid, "the same pod");
    assert!(
        note.contains("cache-0"),
        "the Event names the server: {note}"
    );
    assert!(note.contains("137"), "the Event says how it ended: {note}");
}

pub async fn memcached_out_of_memory_is_restarted_and_the_operator_stays_up(env: Arc<Env>) {
    let namespace = env.create_namespace("fault-oom").await;
    // A server that asks for little memory and uses much: 200 MiB of items on a request of
    // 24Mi. The kernel's choice of victim weighs what a process uses against what its pod
    // asked for (the kubelet's oom_score_adj), so it falls on memcached.
    let spec = serde_json::json!({
        "replicas": 1,
        "memcached": { "memoryLimitMB": 256 },
        "resources": {
            "requests": { "cpu": "1m", "memory": "24Mi" },
            "limits": { "memory": "320Mi" },
        },
    });
    env.create_memcached(&namespace, "cache", spec).await;
    let pod = ready_server(&env, &namespace, "cache", 0).await;
    fill(server(&pod), 200).await;
    let operator_before = super::restarts::operator_replicas(&env).await;
    let statuses = follow_status(&env, &namespace, "cache").await;

    // The node's memory full: its pods' cgroup limited to what they use now plus 64 MiB, and
    // a pod that takes that and 100 MiB more in one allocation (dd's buffer, touched as it
    // reads), beyond what the node could give back from its file cache. The pod is
    // Guaranteed, so the kernel's choice of victim falls on the pod whose use most exceeds its
    // request: memcached's, whose 200 MiB then leave room for the rest, and nothing else is
    // killed.
    let limit = NodeMemoryLimit::set_near_usage(Path::new(NODE_MEMORY), 64 << 20);
    let take = (64 << 20) + limit.file_cache() + (100 << 20);
    let mut filler = busybox_pod(
        "filler",
        &format!(
            "dd if=/dev/zero of=/dev/null bs={}M count=1 && sleep 3600",
            take >> 20
        ),
        serde_json::json!({}),
        None,
    );
    make_guaranteed(&mut filler, take + (64 << 20));
    let pods: Api<k8s_openapi::api::core::v1::Pod> =
        Api::namespaced(env.client.clone(), &namespace);
    let kills_before = limit.oom_kills();
    pods.create(&PostParams::default(), &filler)
        .await
        .expect("the filler pod");
    let filled = Instant::now();
    let kills = eventually("the node's out-of-memory killer acts", WAIT, || async {
        let kills = limit.oom_kills();
        if kills > kills_before {
            Ok(kills - kills_before)
        } else {
            Err(format!(
                "{} MiB of {} MiB in use",
                limit.usage() >> 20,
                limit.limit >> 20
            ))
        }
    })
    .await;
    let full_after = filled.elapsed();
    pods.delete("filler", &DeleteParams::default().grace_period(0))
        .await
        .expect("the filler pod deleted");
    drop(limit);

    let after = ready_server(&env, &namespace, "cache", 1).await;
    let passed = wait_back_to_available(&statuses).await;
    let terminated = memcached_status(&after)
        .and_then(|s| s.last_state?.terminated)
        .expect("the killed container's last state");
    let note = restart_event(&env, &namespace, "cache").await;
    let operator_after = super::restarts::operator_replicas(&env).await;
    eprintln!(
        "figures: the node's memory full after {:.1} s: {kills} process(es) killed for memory, \
         memcached's container ended {} and was restarted; the status went {}; the Event: \
         {note}; operator replicas' restarts {operator_before:?} -> {operator_after:?}",
        full_after.as_secs_f64(),
        terminated.reason.as_deref().unwrap_or("?"),
        passed.join(" -> "),
    );
    assert_eq!(terminated.reason.as_deref(), Some("OOMKilled"));
    assert!(
        note.contains("OOMKilled"),
        "the Event says how it ended: {note}"
    );
    assert_eq!(
        operator_before, operator_after,
        "an operator replica restarted"
    );
}

/// Sets `mib` items of 100 KiB on the server at `address`.
async fn fill(address: std::net::SocketAddr, mib: usize) {
    let mut connection = Connection::open(address, None)
        .await
        .unwrap_or_else(|e| panic!("a connection to {address}: {e}"));
    let value = "m".repeat(100 << 10);
    for i in 0..mib * 10 {
        let stored = connection.set(&format!("fill-{i}"), &value).await;
        assert_eq!(stored.as_deref(), Ok("STORED\r\n"), "set fill-{i}");
    }
}

/// The pod runs with requests equal to limits (Guaranteed), `memory` bytes of it.
fn make_guaranteed(pod: &mut k8s_openapi::api::core::v1::Pod, memory: u64) {
    let mut value = serde_json::to_value(&*pod).expect("a pod as JSON");
    let resources = serde_json::json!({"cpu": "10m", "memory": memory.to_string()});
    value["spec"]["containers"][0]["resources"] =
        serde_json::json!({"requests": resources, "limits": resources});
    *pod = serde_json::from_value(value).expect("a pod");
}

/// The node's memory cgroup limited to what its pods use now plus `headroom`, for as long as
/// this lives; unlimited again when dropped.
struct NodeMemoryLimit {
    dir: PathBuf,
    limit: u64,
}

impl NodeMemoryLimit {
    fn set_near_usage(dir: &Path, headroom: u64) -> NodeMemoryLimit {
        let read = |name: &str| -> u64 {
            let path = dir.join(name);
            std::fs::read_to_string(&path)
                .unwrap_or_else(|e| panic!("read {}: {e}", path.display()))
                .trim()
                .parse()
                .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
        };
        let limit = read("memory.usage_in_bytes") + headroom;
        let path = dir.join("memory.limit_in_bytes");
        std::fs::write(&path, limit.to_string())
            .unwrap_or_else(|e| panic!("write {}: {e}", path.display()));
        NodeMemoryLimit {
            dir: dir.to_path_buf(),
            limit,
        }
    }

    fn usage(&self) -> u64 {
        std::fs::read_to_string(self.dir.join("memory.usage_in_bytes"))
            .ok()
            .and_then(|text| text.trim().parse().ok())
            .unwrap_or_default()
    }

    /// The file cache its pods hold (which the kernel reclaims before it kills).
    fn file_cache(&self) -> u64 {
        let stat = std::fs::read_to_string(self.dir.join("memory.stat")).unwrap_or_default();
        stat.lines()
            .filter_map(|line| {
                let (name, value) = line.split_once(' ')?;
                ["total_active_file", "total_inactive_file"]
                    .contains(&name)
                    .then(|| value.trim().parse::<u64>().ok())?
            })
            .sum()
    }

    /// The kernel's count of processes it killed for memory in this cgroup.
    fn oom_kills(&self) -> u64 {
        std::fs::read_to_string(self.dir.join("memory.oom_control"))
            .ok()
            .and_then(|text| {
                text.lines()
                    .find_map(|line| line.strip_prefix("oom_kill ")?.trim().parse().ok())
            })
            .unwrap_or_default()
    }
}

impl Drop for NodeMemoryLimit {
    fn drop(&mut self) {
        let path = self.dir.join("memory.limit_in_bytes");
        if let Err(error) = std::fs::write(&path, "-1") {
            eprintln!("cannot lift the limit {}: {error}", path.display());
        }
    }
}

/// The Memcached's status as it changes, each as "ready N Available REASON", recorded by a
/// watch from now on.
async fn follow_status(env: &Env, namespace: &str, name: &str) -> Arc<Mutex<Vec<String>>> {
    let gvk = GroupVersionKind::gvk(GROUP, STORAGE_VERSION, "Memcached");
    let api: Api<DynamicObject> =
        Api::namespaced_with(env.client.clone(), namespace, &ApiResource::from_gvk(&gvk));
    let seen = Arc::new(Mutex::new(Vec::<String>::new()));
    let record = seen.clone();
    let config = watcher::Config::default().fields(&format!("metadata.name={name}"));
    tokio::spawn(async move {
        let mut events = watcher::watcher(api, config).boxed();
        while let Some(event) = events.next().await {
            let object = match event {
                Ok(watcher::Event::Apply(object) | watcher::Event::InitApply(object)) => object,
                _ => continue,
            };
            let status = &object.data["status"];
            let available = status["conditions"].as_array().and_then(|conditions| {
                conditions
                    .iter()
                    .find(|c| c["type"] == "Available")
                    .cloned()
            });
            let line = format!(
                "ready {} Available {}",
                status["readyReplicas"].as_i64().unwrap_or(0),
                available
                    .map(|c| format!("{} {}", c["status"], c["reason"]))
                    .unwrap_or_default()
                    .replace('"', ""),
            );
            let mut seen = record.lock().expect("the status record");
            if seen.last() != Some(&line) {
                seen.push(line);
            }
        }
    });
    // The watch's first event is the status now.
    eventually("the status watch starts", WAIT, || async {
        (!seen.lock().expect("the record").is_empty()).then_some(())
    })
    .await;
    seen
}

/// Waits until the followed status has gone not-ready and come back to Available with its
/// server ready; returns what it passed through.
async fn wait_back_to_available(statuses: &Arc<Mutex<Vec<String>>>) -> Vec<String> {
    eventually(
        "the status passes through not-ready and back to Available",
        WAIT,
        || async {
            let seen = statuses.lock().expect("the record").clone();
            let down = seen.iter().position(|s| s.starts_with("ready 0"));
            let back = down.and_then(|d| {
                seen[d..]
                    .iter()
                    .position(|s| s.starts_with("ready 1 Available True"))
            });
            if back.is_some() {
                Ok(seen)
            } else {
                Err(seen.join(" -> "))
            }
        },
    )
    .await
}

/// The note of the operator's Event saying that a server of Memcached `name` was restarted.
async fn restart_event(env: &Env, namespace: &str, name: &str) -> String {
    let events: Api<Event> = Api::namespaced(env.client.clone(), namespace);
    eventually("the operator's Event of the restart", WAIT, || async {
        let listed = events
            .list(&ListParams::default())
            .await
            .map_err(|e| e.to_string())?;
        let ours: Vec<_> = listed
            .items
            .iter()
            .filter(|e| {
                e.regarding.as_ref().is_some_and(|r| {
                    r.kind.as_deref() == Some("Memcached") && r.name.as_deref() == Some(name)
                })
            })
            .collect();
        ours.iter()
            .find(|e| e.reason.as_deref() == Some("ServerRestarted"))
            .and_then(|e| e.note.clone())
            .ok_or_else(|| {
                format!(
                    "the Memcached's Events: {:?}",
                    ours.iter()
                        .map(|e| (e.reason.clone(), e.note.clone()))
                        .collect::<Vec<_>>()
                )
            })
    })
    .await
}
