//! Graceful shutdown on a real pod: a server with `spec.gracefulShutdown` is deleted, and
//! through its preStop delay (the kubelet's own `sleep` action) it keeps serving while it
//! leaves its Service's endpoints; only then does the kubelet send SIGTERM, and memcached
//! stops, well within the grace period.

use std::sync::Arc;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::discovery::v1::EndpointSlice;
use kube::api::{Api, DeleteParams, ListParams};
use serde_json::json;
use testkit::memcache::Connection;

use crate::cluster::{Env, WAIT, eventually, pod_address};

/// The spec's preStop delay, and its grace period.
const DELAY_SECONDS: u64 = 5;
const GRACE_SECONDS: u64 = 30;
/// How long the test follows the deleted server: past its grace period.
const FOLLOW: Duration = Duration::from_secs(GRACE_SECONDS + 10);

pub async fn a_deleted_server_serves_through_its_pre_stop_delay_out_of_its_endpoints(
    env: Arc<Env>,
) {
    let namespace = env.create_namespace("graceful").await;
    let spec = json!({
        "replicas": 1,
        "memcached": { "memoryLimitMB": 16 },
        "resources": { "limits": { "memory": "64Mi" } },
        "gracefulShutdown": {
            "preStopDelaySeconds": DELAY_SECONDS,
            "terminationGracePeriodSeconds": GRACE_SECONDS,
        },
    });
    env.create_memcached(&namespace, "cache", spec).await;
    let pods: Api<Pod> = Api::namespaced(env.client.clone(), &namespace);
    let pod = eventually("cache-0 ready", WAIT, || async {
        let pod = pods.get("cache-0").await.ok()?;
        let ready = pod
            .status
            .as_ref()?
            .container_statuses
            .as_ref()?
            .iter()
            .all(|c| c.ready);
        ready.then_some(pod)
    })
    .await;
    let address = pod_address(&pod, 11211);
    let ip = address.ip().to_string();
    let slices: Api<EndpointSlice> = Api::namespaced(env.client.clone(), &namespace);
    // Whether the Service's endpoints offer the server as ready.
    let offered = || {
        let (slices, ip) = (slices.clone(), ip.clone());
        async move {
            let listed = slices
                .list(&ListParams::default().labels("kubernetes.io/service-name=cache"))
                .await
                .ok()?;
            let endpoint = listed
                .items
                .into_iter()
                .flat_map(|slice| slice.endpoints)
                .find(|endpoint| endpoint.addresses.contains(&ip))?;
            Some(endpoint.conditions?.ready.unwrap_or(false))
        }
    };
    assert_eq!(offered().await, Some(true), "the ready server is offered");

    pods.delete("cache-0", &DeleteParams::default())
        .await
        .expect("cache-0 deleted");
    let deleted = Instant::now();
    let mut last_served = None;
    let mut withdrawn = None;
    while deleted.elapsed() < FOLLOW {
        let served = async {
            let mut connection = Connection::open(address, None).await?;
            connection.command("version\r\n").await
        }
        .await
        .is_ok_and(|reply| reply.starts_with("VERSION "));
        if served {
            last_served = Some(deleted.elapsed());
        } else if last_served.is_some() || deleted.elapsed() > Duration::from_secs(2) {
            break;
        }
        if withdrawn.is_none() && offered().await != Some(true) {
            withdrawn = Some(deleted.elapsed());
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let stopped = deleted.elapsed();
    eprintln!(
        "graceful shutdown: deleted; out of the endpoints after {withdrawn:?}, served until \
         {last_served:?}, refused from {:.1} s (preStop delay {DELAY_SECONDS} s, grace period \
         {GRACE_SECONDS} s)",
        stopped.as_secs_f64()
    );
    let withdrawn = withdrawn.expect("the server left the Service's endpoints");
    let last_served = last_served.expect("the server was served after the delete");
    assert!(
        withdrawn < Duration::from_secs(DELAY_SECONDS),
        "out of the endpoints within the preStop delay: {withdrawn:?}"
    );
    assert!(
        last_served >= Duration::from_secs(DELAY_SECONDS - 1),
        "served through the preStop delay: until {last_served:?}"
    );
    assert!(
        stopped < Duration::from_secs(GRACE_SECONDS),
        "stopped on SIGTERM after the delay, not killed at the grace period's end: {stopped:?}"
    );
}
