//! A warm restart on real pods: memcached with its memory file on a memory-backed volume is
//! stopped with SIGUSR1 (the signal its preStop hook sends it), the kubelet starts its
//! container again in the same pod, and every item set before is read back. Then memcached is
//! SIGKILLed: it comes back empty, as the docs say.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Instant;

use k8s_openapi::api::core::v1::Pod;
use kube::api::Api;
use serde_json::json;
use testkit::containers::main_pid;
use testkit::memcache::Connection;

use crate::cluster::{Env, WAIT, eventually, host, pod_address};

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

    // The graceful stop: SIGUSR1 to memcached, as the preStop hook sends it.
    let pid = main_pid(&pod, "memcached").expect("memcached's process");
    let stopped = Instant::now();
    host("kill", &["-USR1", &pid.to_string()]);
    let pod = ready(&pods, 1).await;
    let back_after = stopped.elapsed();
    assert_eq!(
        pod.metadata.uid,
        pods.get("cache-0").await.expect("the pod").metadata.uid,
        "the same pod"
    );
    let kept = count_items(pod_address(&pod, 11211), "first").await;
    // What memcached said of its memory file as it stopped and started again.
    let logs = testkit::containers::pod_logs(&env.client, &pod).await;
    let said: Vec<&str> = logs
        .lines()
        .filter(|line| line.contains("restart") || line.contains("Graceful"))
        .collect();
    eprintln!("memcached said: {said:?}");
    eprintln!(
        "warm restart: memcached stopped with SIGUSR1 served again after {:.1} s in the same \
         pod (restart 1); {kept} of {ITEMS} items read back",
        back_after.as_secs_f64()
    );
    assert_eq!(kept, ITEMS, "every item survives a graceful restart");

    // SIGKILL: no save, so memcached starts empty.
    let pid = main_pid(&pod, "memcached").expect("memcached's process");
    host("kill", &["-KILL", &pid.to_string()]);
    let pod = ready(&pods, 2).await;
    let left = count_items(pod_address(&pod, 11211), "first").await;
    eprintln!("after SIGKILL (restart 2): {left} of {ITEMS} items left");
    assert_eq!(left, 0, "a SIGKILLed memcached comes back empty");
}

/// Waits until `cache-0`'s memcached container has restarted `restarts` times and is ready.
async fn ready(pods: &Api<Pod>, restarts: i32) -> Pod {
    eventually(
        &format!("cache-0 ready after {restarts} restarts"),
        WAIT,
        || async {
            let pod = pods.get("cache-0").await.ok()?;
            let status = pod.status.as_ref()?;
            let memcached = status
                .container_statuses
                .as_ref()?
                .iter()
                .find(|c| c.name == "memcached")?;
            (memcached.ready && memcached.restart_count == restarts).then_some(pod)
        },
    )
    .await
}

async fn set_items(address: SocketAddr, prefix: &str) {
    let mut connection = Connection::open(address, None).await.expect("a connection");
    for i in 0..ITEMS {
        assert_eq!(
            connection
                .set(&format!("{prefix}-{i}"), &format!("value-{i}"))
                .await
                .as_deref(),
            Ok("STORED\r\n")
        );
    }
}

async fn count_items(address: SocketAddr, prefix: &str) -> usize {
    let mut connection = Connection::open(address, None).await.expect("a connection");
    let mut found = 0;
    for i in 0..ITEMS {
        match connection.get(&format!("{prefix}-{i}")).await {
            Ok(Some(value)) if value == format!("value-{i}") => found += 1,
            Ok(_) => {}
            Err(error) => panic!("get {prefix}-{i}: {error}"),
        }
    }
    found
}
