//! What a pod can reach, tried from pods (every packet stays on this machine: the targets are
//! the node's own address and the local registry): among this machine's listeners only the
//! API server and the kubelet answer a pod, one the test opens on every interface does not;
//! the API server refuses pods that need more than Pod Security's `baseline` unless their
//! namespace opts out; and an image of any other registry is looked up in the local registry
//! alone. `network` reads the rules behind these.

use std::io::ErrorKind;
use std::net::TcpListener;
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::{Event, Namespace, Pod};
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams};
use serde_json::json;

use crate::cluster::{Env, WAIT, busybox_pod, eventually};

/// The node's address on its bridge, where this machine's listeners are reached from pods.
const NODE_IP: &str = "10.244.0.1";

/// The API server's port, from the URL the control plane wrote.
fn api_server_port(env: &Env) -> u16 {
    let url = std::fs::read_to_string(env.plane.state_dir().join("apiserver-url"))
        .expect("the control plane's apiserver-url");
    url.trim()
        .rsplit(':')
        .next()
        .and_then(|port| port.parse().ok())
        .expect("a port in the API server's URL")
}

pub async fn pods_reach_only_the_api_server_and_the_kubelet_on_this_machine(env: Arc<Env>) {
    let namespace = env.create_namespace("pod-reach").await;
    // A listener of this machine's on every interface, the node's bridge address among them:
    // this machine itself reaches it there, so a pod's failure to is the firewall's doing.
    let listener = TcpListener::bind("0.0.0.0:0").expect("a listener on every interface");
    listener
        .set_nonblocking(true)
        .expect("a non-blocking listener");
    let own = listener.local_addr().expect("its address").port();
    std::net::TcpStream::connect_timeout(
        &format!("{NODE_IP}:{own}").parse().expect("an address"),
        Duration::from_secs(5),
    )
    .expect("this machine reaches its own listener on the node's address");
    let (first, _) = listener.accept().expect("the machine's own connection");
    drop(first);

    let api = api_server_port(&env);
    let targets = [
        (api, true),
        (10250, true),
        (own, false),
        (10256, false),
        (10249, false),
    ];
    let script = targets
        .iter()
        .map(|(port, _)| {
            format!("if nc -w 3 {NODE_IP} {port} </dev/null; then echo {port} open; else echo {port} closed; fi")
        })
        .collect::<Vec<_>>()
        .join("; ");
    let ended = env
        .run_to_end(&namespace, busybox_pod("reach", &script, json!({}), None))
        .await;
    eprintln!("from a pod to {NODE_IP}: {:?}", ended.log);
    assert_eq!(ended.phase, "Succeeded", "{ended:?}");
    for (port, reachable) in targets {
        let said = if reachable { "open" } else { "closed" };
        assert!(
            ended
                .log
                .lines()
                .any(|line| line == format!("{port} {said}")),
            "port {port} is {said} to pods: {:?}",
            ended.log
        );
    }
    match listener.accept() {
        Err(error) if error.kind() == ErrorKind::WouldBlock => {}
        other => panic!("a pod's connection reached this machine's listener: {other:?}"),
    }
    eprintln!(
        "figures: from a pod, {NODE_IP}:{api} (API server) and :10250 (kubelet) answer; :{own} (a listener of this machine), :10256 and :10249 (kube-proxy) do not"
    );
}

pub async fn pod_security_baseline_is_enforced_unless_a_namespace_opts_out(env: Arc<Env>) {
    let namespace = env.create_namespace("pod-security-default").await;
    let pods: Api<Pod> = Api::namespaced(env.client.clone(), &namespace);
    let dry_run = PostParams {
        dry_run: true,
        ..PostParams::default()
    };
    let mut host_network = busybox_pod("host-network", "true", json!({}), None);
    if let Some(spec) = host_network.spec.as_mut() {
        spec.host_network = Some(true);
    }
    let privileged = busybox_pod("privileged", "true", json!({ "privileged": true }), None);
    for pod in [&host_network, &privileged] {
        match pods.create(&dry_run, pod).await {
            Err(kube::Error::Api(status)) if status.code == 403 => assert!(
                status
                    .message
                    .contains("violates PodSecurity \"baseline:latest\""),
                "refused by Pod Security's baseline: {}",
                status.message
            ),
            other => panic!(
                "{:?} was not refused in a namespace without labels: {other:?}",
                pod.metadata.name
            ),
        }
    }

    // A namespace that needs more says so, and gets it.
    let opted = env.create_namespace("pod-security-privileged").await;
    let namespaces: Api<Namespace> = Api::all(env.client.clone());
    let label =
        json!({ "metadata": { "labels": { "pod-security.kubernetes.io/enforce": "privileged" } } });
    namespaces
        .patch(&opted, &PatchParams::default(), &Patch::Merge(&label))
        .await
        .expect("the opt-out label");
    let opted_pods: Api<Pod> = Api::namespaced(env.client.clone(), &opted);
    for pod in [&host_network, &privileged] {
        opted_pods
            .create(&dry_run, pod)
            .await
            .unwrap_or_else(|error| {
                panic!("{:?} refused after the opt-out: {error}", pod.metadata.name)
            });
    }
    eprintln!(
        "figures: hostNetwork and privileged pods refused in {namespace} (baseline by default), admitted (dry run) in {opted} (enforce=privileged)"
    );
}

pub async fn every_image_is_pulled_from_the_local_registry_alone(env: Arc<Env>) {
    let namespace = env.create_namespace("registries").await;
    let pods: Api<Pod> = Api::namespaced(env.client.clone(), &namespace);
    // An image of a registry named nowhere in the node's configuration, on this machine's own
    // loopback, where nothing listens: containerd looks it up in the local registry, which says
    // it has no such image; had it gone to the registry the name says, the answer would be a
    // refused connection.
    let image = "localhost:1/probe/absent:1";
    let mut pod = busybox_pod("foreign", "true", json!({}), None);
    if let Some(container) = pod
        .spec
        .as_mut()
        .and_then(|spec| spec.containers.first_mut())
    {
        container.image = Some(image.to_string());
    }
    pods.create(&PostParams::default(), &pod)
        .await
        .expect("the pod of a foreign image");
    let events: Api<Event> = Api::namespaced(env.client.clone(), &namespace);
    let message = eventually(
        "the kubelet's pull failure of the foreign image",
        WAIT,
        || async {
            let list = events
                .list(&ListParams::default().fields("involvedObject.name=foreign"))
                .await
                .ok()?;
            list.items
                .into_iter()
                .filter_map(|event| event.message)
                .find(|message| message.starts_with("Failed to pull image"))
        },
    )
    .await;
    eprintln!("pull of {image}: {message}");
    assert!(
        message.contains(&format!("{image}: not found")),
        "the local registry answered for {image}: {message}"
    );
    assert!(!message.contains("connection refused"), "{message}");
    let _ = pods
        .delete("foreign", &DeleteParams::default().grace_period(0))
        .await;
}
