//! A warm restart on real pods, started by the kubelet and stopped through the real preStop
//! hook: memcached keeps its memory file on a memory-backed volume; its liveness probe is made
//! to fail (the test refuses the probe's port inside the pod's own network namespace, which
//! the node's CNI made for it), so the kubelet kills the container as it would a hung server,
//! running the preStop hook first, which sends memcached SIGUSR1. memcached saves its items
//! and exits 0, the kubelet starts the container again in the same pod, and once the port is
//! open again every item set before is read back. Then memcached is SIGKILLed: it comes back
//! empty, as the docs say.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Instant;

use k8s_openapi::api::core::v1::{Event, Pod};
use kube::api::{Api, ListParams};
use serde_json::json;
use testkit::containers::main_pid;
use testkit::memcache::Connection;

use crate::cluster::{Env, WAIT, eventually, host, memcached_status, pod_address};

/// Items set before each restart.
const ITEMS: usize = 200;

pub async fn a_graceful_restart_keeps_the_items_and_a_kill_loses_them(env: Arc<Env>) {
    let namespace = env.create_namespace("warm").await;
    let spec = json!({
        "replicas": 1,
        "memcached": { "memoryLimitMB": 64, "warmRestart": true },
        "resources": { "limits": { "memory": "128Mi" } },
    });
    env.create_memcached(&namespace, "cache", spec).await;
    let pods: Api<Pod> = Api::namespaced(env.client.clone(), &namespace);
    let pod = ready(&pods, 0).await;
    let hook = pod
        .spec
        .as_ref()
        .and_then(|s| {
            s.containers[0]
                .lifecycle
                .as_ref()?
                .pre_stop
                .as_ref()?
                .exec
                .clone()
        })
        .and_then(|e| e.command)
        .unwrap_or_default();
    assert!(
        hook.last().is_some_and(|script| script
            .contains("read -r pid < /var/cache/memcached/memcached.pid; kill -USR1 \"$pid\"")),
        "the preStop hook stops memcached gracefully: {hook:?}"
    );
    set_items(pod_address(&pod, 11211), "first").await;

    // The kubelet's stop: the liveness probe (TCP on 11211) refused inside the pod's network
    // namespace until the kubelet has killed the container, through its preStop hook.
    let pid = main_pid(&pod, "memcached").expect("memcached's process");
    // The hook signals the pid memcached's start wrote: memcached's own, in its container.
    let written = std::fs::read_to_string(format!(
        "/proc/{pid}/root/var/cache/memcached/memcached.pid"
    ))
    .expect("the pid file memcached's start writes");
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).expect("its status");
    let own = status
        .lines()
        .find_map(|line| line.strip_prefix("NSpid:"))
        .and_then(|pids| pids.split_whitespace().last())
        .expect("memcached's pid in its own namespace");
    assert_eq!(
        written.trim(),
        own,
        "the pid file names memcached, whose pid in its container is {own}"
    );
    let stopped = Instant::now();
    probe_port(pid, "-I");
    let restarted = eventually(
        "the kubelet restarts memcached after its liveness probe failed",
        WAIT,
        || async {
            let pod = pods.get("cache-0").await.ok()?;
            let memcached = memcached_status(&pod)?;
            (memcached.restart_count == 1 && memcached.state.as_ref()?.running.is_some())
                .then_some(pod)
        },
    )
    .await;
    let killed_after = stopped.elapsed();
    probe_port(
        main_pid(&restarted, "memcached").expect("the new memcached's process"),
        "-D",
    );
    let pod = ready(&pods, 1).await;
    let back_after = stopped.elapsed();
    assert_eq!(
        pod.metadata.uid, restarted.metadata.uid,
        "the same pod: its memory-backed volume kept"
    );
    let ended = memcached_status(&pod)
        .and_then(|c| c.last_state.clone())
        .and_then(|s| s.terminated)
        .expect("how the first memcached ended");
    let kubelet_said = events_of(&env, &namespace, "cache-0").await;
    let killing: Vec<&String> = kubelet_said
        .iter()
        .filter(|line| line.starts_with("Killing:") && line.contains("liveness probe"))
        .collect();
    let kept = count_items(pod_address(&pod, 11211), "first").await;
    // What memcached said of its memory file as it stopped and started again.
    let logs = testkit::containers::pod_logs(&env.client, &pod).await;
    let said: Vec<&str> = logs
        .lines()
        .filter(|line| line.contains("restart") || line.contains("Graceful"))
        .collect();
    eprintln!("memcached said: {said:?}; the kubelet said: {kubelet_said:?}");
    eprintln!(
        "warm restart: the liveness probe refused, the kubelet had memcached running again \
         after {:.1} s (it ended with exit code {}, reason {:?}), served again after {:.1} s in \
         the same pod (restart 1); {kept} of {ITEMS} items read back",
        killed_after.as_secs_f64(),
        ended.exit_code,
        ended.reason,
        back_after.as_secs_f64()
    );
    assert!(
        !killing.is_empty(),
        "the kubelet restarted memcached for its liveness probe: {kubelet_said:?}"
    );
    // memcached exits 0 on SIGTERM too; only SIGUSR1 has it say "Gracefully stopping".
    assert_eq!(ended.exit_code, 0, "memcached exited of itself, not killed");
    assert!(
        said.iter().any(|line| line.contains("Gracefully stopping")),
        "memcached stopped on the preStop hook's SIGUSR1, not on the kubelet's SIGTERM: {said:?}"
    );
    assert_eq!(
        kept, ITEMS,
        "every item survives a graceful restart; memcached's log:\n{logs}"
    );

    // SIGKILL: no save, so memcached starts empty.
    let pid = main_pid(&pod, "memcached").expect("memcached's process");
    host("kill", &["-KILL", &pid.to_string()]);
    let pod = ready(&pods, 2).await;
    let left = count_items(pod_address(&pod, 11211), "first").await;
    eprintln!("after SIGKILL (restart 2): {left} of {ITEMS} items left");
    assert_eq!(left, 0, "a SIGKILLed memcached comes back empty");
}

/// Refuses (`-I`) or opens again (`-D`) memcached's port 11211 inside the network namespace of
/// the pod whose process `pid` is: the rule lives in that namespace only, so only the pod's
/// own traffic, the kubelet's probes and the test's clients, meets it.
fn probe_port(pid: u32, action: &str) {
    host(
        "nsenter",
        &[
            "-t",
            &pid.to_string(),
            "-n",
            "iptables",
            action,
            "INPUT",
            "-p",
            "tcp",
            "--dport",
            "11211",
            "-j",
            "REJECT",
            "--reject-with",
            "tcp-reset",
        ],
    );
}

/// The Events about `name` in `namespace`, as `REASON: MESSAGE` lines.
pub async fn events_of(env: &Env, namespace: &str, name: &str) -> Vec<String> {
    let events: Api<Event> = Api::namespaced(env.client.clone(), namespace);
    let listed = events
        .list(&ListParams::default().fields(&format!("involvedObject.name={name}")))
        .await
        .expect("the Events");
    listed
        .items
        .into_iter()
        .map(|e| {
            format!(
                "{}: {}",
                e.reason.unwrap_or_default(),
                e.message.unwrap_or_default()
            )
        })
        .collect()
}

/// Waits until `cache-0`'s memcached container has restarted `restarts` times and is ready.
async fn ready(pods: &Api<Pod>, restarts: i32) -> Pod {
    eventually(
        &format!("cache-0 ready after {restarts} restarts"),
        WAIT,
        || async {
            let pod = pods.get("cache-0").await.ok()?;
            let memcached = memcached_status(&pod)?;
            (memcached.ready && memcached.restart_count == restarts).then_some(pod)
        },
    )
    .await
}

/// Sets [`ITEMS`] items named `prefix-N` on the server at `address`.
async fn set_items(address: SocketAddr, prefix: &str) {
    let mut connection = Connection::open(address, None).await.expect("a connection");
    crate::cluster::set_items(&mut connection, prefix, ITEMS).await;
}

/// How many of the [`ITEMS`] items `prefix-N` the server at `address` still holds.
async fn count_items(address: SocketAddr, prefix: &str) -> usize {
    let mut connection = Connection::open(address, None).await.expect("a connection");
    crate::cluster::count_items(&mut connection, prefix, ITEMS).await
}
