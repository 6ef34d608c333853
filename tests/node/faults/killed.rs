//! memcached's container ended by the kernel: SIGKILL from this machine, and the out-of-memory
//! killer once its container's memory is full. The kubelet starts the container again in the same
//! pod, the Memcached's status passes through not-ready and back to Available, the operator's
//! Events on the Memcached say which server ended, how, and that it was restarted, and the
//! operator's own replicas stay up.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use futures::StreamExt;
use k8s_openapi::api::events::v1::Event;
use kube::api::{Api, DynamicObject, ListParams};
use kube::core::{ApiResource, GroupVersionKind};
use kube::runtime::watcher;
use memcached_operator::api::{GROUP, STORAGE_VERSION};
use testkit::containers::main_pid;

use super::{ready_server, server, small_spec};
use crate::cluster::{Env, WAIT, eventually, host, memcached_status};
use testkit::memcache::Connection;

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
        .and_then(|s| s.last_state.clone()?.terminated)
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
    let spec = serde_json::json!({
        "replicas": 1,
        "memcached": { "memoryLimitMB": 256 },
        "resources": { "limits": { "memory": "320Mi" } },
    });
    env.create_memcached(&namespace, "cache", spec).await;
    let pod = ready_server(&env, &namespace, "cache", 0).await;
    let address = server(&pod);
    fill(address, 0..64).await.expect("64 MiB of items set");
    let operator_before = super::restarts::operator_replicas(&env).await;
    let statuses = follow_status(&env, &namespace, "cache").await;

    // memcached's container given less memory than its cache grows to: the memory cgroup
    // runc made for it limited to what it uses now plus 32 MiB (as a container limit set too
    // close to memoryLimitMB would), then 192 MiB more items set. The kernel's out-of-memory
    // killer ends the only process in that cgroup, memcached, when it allocates past the
    // limit; the kubelet starts the container again with the limit of the pod's spec.
    let pid = main_pid(&pod, "memcached").expect("memcached's process");
    let cgroup = ContainerMemory::of(pid);
    let kills_before = memory_kills(pid);
    let limit = cgroup.usage() + (32 << 20);
    cgroup.limit(limit);
    let filled = Instant::now();
    let stopped = fill(address, 64..256).await;
    let kills = memory_kills(pid).saturating_sub(kills_before);
    let full_after = filled.elapsed();

    let after = ready_server(&env, &namespace, "cache", 1).await;
    let passed = wait_back_to_available(&statuses).await;
    let terminated = memcached_status(&after)
        .and_then(|s| s.last_state.clone()?.terminated)
        .expect("the killed container's last state");
    let note = restart_event(&env, &namespace, "cache").await;
    let operator_after = super::restarts::operator_replicas(&env).await;
    eprintln!(
        "figures: memcached's container limited to {} MiB: the client's sets stopped after \
         {:.1} s ({stopped:?}); {kills} process(es) killed for memory; the container ended {} \
         (exit {}) and was restarted; the status went {}; the Event: {note}; operator \
         replicas' restarts {operator_before:?} -> {operator_after:?}",
        limit >> 20,
        full_after.as_secs_f64(),
        terminated.reason.as_deref().unwrap_or("?"),
        terminated.exit_code,
        passed.join(" -> "),
    );
    assert!(
        stopped.is_err(),
        "the sets outgrew the limit without an end: {stopped:?}"
    );
    assert_eq!(
        kills, 1,
        "the kernel's log counts one out-of-memory kill of memcached (pid {pid})"
    );
    assert_eq!(terminated.reason.as_deref(), Some("OOMKilled"));
    assert_eq!(after.metadata.uid, pod.metadata.uid, "the same pod");
    assert!(
        note.contains("OOMKilled"),
        "the Event says how it ended: {note}"
    );
    assert_eq!(
        operator_before, operator_after,
        "an operator replica restarted"
    );
}

/// Sets the items of 100 KiB numbered `mib * 10` up to `mibs.end * 10` on the server at
/// `address`; the first refused or unanswered set ends it, with what went wrong.
async fn fill(address: std::net::SocketAddr, mibs: std::ops::Range<usize>) -> Result<(), String> {
    let mut connection = Connection::open(address, None)
        .await
        .map_err(|e| format!("a connection to {address}: {e}"))?;
    let value = "m".repeat(100 << 10);
    for i in mibs.start * 10..mibs.end * 10 {
        match connection.set(&format!("fill-{i}"), &value).await {
            Ok(reply) if reply == "STORED\r\n" => {}
            Ok(reply) => return Err(format!("set fill-{i}: {}", reply.trim_end())),
            // The error quotes the request, a value of 100 KiB: its first words say enough.
            Err(error) => {
                let error: String = error.to_string().chars().take(80).collect();
                return Err(format!("set fill-{i}: {error}..."));
            }
        }
    }
    Ok(())
}

/// The memory cgroup (v1) of one container, found from its process.
struct ContainerMemory {
    dir: PathBuf,
}

impl ContainerMemory {
    fn of(pid: u32) -> ContainerMemory {
        let text = std::fs::read_to_string(format!("/proc/{pid}/cgroup"))
            .unwrap_or_else(|e| panic!("/proc/{pid}/cgroup: {e}"));
        let path = text
            .lines()
            .find_map(|line| {
                let (_, rest) = line.split_once(':')?;
                let (controllers, path) = rest.split_once(':')?;
                controllers
                    .split(',')
                    .any(|c| c == "memory")
                    .then_some(path)
            })
            .unwrap_or_else(|| panic!("no memory cgroup for process {pid}: {text}"));
        ContainerMemory {
            dir: Path::new("/sys/fs/cgroup/memory").join(path.trim_start_matches('/')),
        }
    }

    fn read(&self, file: &str) -> String {
        let path = self.dir.join(file);
        std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
    }

    fn usage(&self) -> u64 {
        self.read("memory.usage_in_bytes")
            .trim()
            .parse()
            .expect("memory.usage_in_bytes")
    }

    fn limit(&self, bytes: u64) {
        let path = self.dir.join("memory.limit_in_bytes");
        std::fs::write(&path, bytes.to_string())
            .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    }
}

/// How many times the kernel's log (`dmesg`) says its out-of-memory killer ended process `pid`
/// for its memory cgroup's limit ("Memory cgroup out of memory: Killed process PID (NAME)").
/// Not the cgroup's own count (`memory.oom_control`): the runtime removes a container's cgroup
/// as soon as the container ends, which on a busy machine comes before the test reads it, while
/// the log outlives it. Counted before and after, since pids are reused.
fn memory_kills(pid: u32) -> usize {
    let output = std::process::Command::new("dmesg")
        .output()
        .unwrap_or_else(|e| panic!("dmesg: {e}"));
    assert!(
        output.status.success(),
        "dmesg: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    let record = format!("Memory cgroup out of memory: Killed process {pid} (");
    String::from_utf8_lossy(&output.stdout)
        .lines()
        .filter(|line| line.contains(&record))
        .count()
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
