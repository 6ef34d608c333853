//! The operand as users get it: real memcached servers, in the containers the kubelet starts
//! for the StatefulSet's pods (the image `RELATED_IMAGE_MEMCACHED` names through the
//! Subscription's `config.env`), answer `set` and `get` on every address in `status.servers`;
//! `kubectl scale` changes how many there are, and the status follows.
//!
//! The servers' DNS names (`POD.SERVICE.NAMESPACE.svc:PORT`) resolve through cluster DNS
//! inside pods (tests/node asks it), not on this machine, so each is reached here as cluster
//! DNS answers: the pod named by its first label, at its pod IP on the node's bridge.

use std::sync::Arc;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, PostParams};
use memcached_operator::api::v1beta1::{Memcached, MemcachedConfig, MemcachedSpec};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use crate::cluster::{Env, WAIT, eventually, pod_ip};

const NAME: &str = "cache";

/// `status.servers` once the Memcached is Available with `count` servers.
async fn available_servers(api: &Api<Memcached>, count: usize) -> Vec<String> {
    eventually(
        &format!("Memcached {NAME} Available with {count} servers"),
        WAIT,
        || async {
            let status = api.get(NAME).await.ok()?.status?;
            let available = status
                .conditions
                .iter()
                .flatten()
                .any(|c| c.type_ == "Available" && c.status == "True");
            let servers = status.servers.unwrap_or_default();
            (available && servers.len() == count).then_some(servers)
        },
    )
    .await
}

/// Sends `request` to memcached at `address` and reads until the answer ends with `end`.
async fn exchange(address: &str, request: &str, end: &str) -> String {
    let mut stream = TcpStream::connect(address)
        .await
        .unwrap_or_else(|e| panic!("connect to memcached at {address}: {e}"));
    stream.write_all(request.as_bytes()).await.expect("write");
    let mut answer = Vec::new();
    let mut buffer = [0u8; 4096];
    let deadline = Instant::now() + Duration::from_secs(60);
    while !String::from_utf8_lossy(&answer).ends_with(end) {
        assert!(
            Instant::now() < deadline,
            "{address}: no {end:?} in {answer:?}"
        );
        let read = tokio::time::timeout(Duration::from_secs(60), stream.read(&mut buffer))
            .await
            .unwrap_or_else(|_| panic!("{address}: no answer to {request:?}"))
            .expect("read");
        assert!(read > 0, "{address} closed the connection after {answer:?}");
        answer.extend_from_slice(&buffer[..read]);
    }
    String::from_utf8_lossy(&answer).into_owned()
}

/// Stores a value on every server and reads it back; returns how many answered.
async fn set_and_get_on_each(env: &Env, namespace: &str, servers: &[String]) -> usize {
    let pods: Api<Pod> = Api::namespaced(env.client.clone(), namespace);
    for server in servers {
        let (host, port) = server.rsplit_once(':').expect("HOST:PORT");
        let pod_name = host.split('.').next().expect("a pod name");
        let pod = pods
            .get(pod_name)
            .await
            .unwrap_or_else(|e| panic!("pod {pod_name}: {e}"));
        let ip = pod_ip(&pod).unwrap_or_else(|| panic!("{pod_name} has no IP"));
        let address = format!("{ip}:{port}");
        let value = format!("served-by-{pod_name}");
        let stored = exchange(
            &address,
            &format!("set probe 0 0 {}\r\n{value}\r\n", value.len()),
            "\r\n",
        )
        .await;
        assert_eq!(stored, "STORED\r\n", "{server} ({address})");
        let got = exchange(&address, "get probe\r\n", "END\r\n").await;
        assert_eq!(
            got,
            format!("VALUE probe 0 {}\r\n{value}\r\nEND\r\n", value.len()),
            "{server} ({address})"
        );
    }
    servers.len()
}

pub async fn memcached_answers_on_every_server_and_follows_kubectl_scale(env: Arc<Env>) {
    let namespace = env.create_namespace("olm-operand").await;
    let api: Api<Memcached> = Api::namespaced(env.client.clone(), &namespace);
    let mut object = Memcached::new(
        NAME,
        MemcachedSpec {
            replicas: Some(2),
            memcached: Some(MemcachedConfig {
                memory_limit_mb: Some(16),
                ..MemcachedConfig::default()
            }),
            ..MemcachedSpec::default()
        },
    );
    object.metadata.namespace = Some(namespace.clone());
    let started = Instant::now();
    api.create(&PostParams::default(), &object)
        .await
        .expect("create");
    let servers = available_servers(&api, 2).await;
    let available_after = started.elapsed();
    let status = api.get(NAME).await.expect("get").status.expect("a status");
    assert_eq!(status.ready_replicas, Some(2));
    assert_eq!(
        servers,
        vec![
            format!("{NAME}-0.{NAME}.{namespace}.svc:11211"),
            format!("{NAME}-1.{NAME}.{namespace}.svc:11211"),
        ]
    );
    let condition = |type_: &str| {
        status
            .conditions
            .iter()
            .flatten()
            .find(|c| c.type_ == type_)
            .map(|c| (c.status.clone(), c.reason.clone()))
    };
    assert_eq!(
        condition("Available"),
        Some(("True".into(), "AllServersReady".into()))
    );
    assert_eq!(condition("Degraded").map(|c| c.0), Some("False".into()));
    assert_eq!(set_and_get_on_each(&env, &namespace, &servers).await, 2);

    let mut figures = vec![format!(
        "2 servers Available {:.1} s after create",
        available_after.as_secs_f64()
    )];
    for replicas in [3, 1] {
        let started = Instant::now();
        let (ok, _, stderr) = env.kubectl(
            &[
                "scale",
                "memcached",
                NAME,
                "-n",
                &namespace,
                &format!("--replicas={replicas}"),
            ],
            None,
        );
        assert!(ok, "kubectl scale --replicas={replicas}: {stderr}");
        let servers = available_servers(&api, replicas).await;
        figures.push(format!(
            "scaled to {replicas}: status followed in {:.1} s",
            started.elapsed().as_secs_f64()
        ));
        assert_eq!(
            set_and_get_on_each(&env, &namespace, &servers).await,
            replicas
        );
        let stored = api.get(NAME).await.expect("get");
        assert_eq!(stored.spec.replicas, Some(replicas as i32));
    }
    let (ok, _, stderr) = env.kubectl(&["delete", "memcached", NAME, "-n", &namespace], None);
    assert!(ok, "kubectl delete: {stderr}");
    eprintln!("figures: {}", figures.join("; "));
}
