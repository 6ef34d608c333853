//! Sets up what the scenarios run against: a control plane whose node is real, with
//! `make deploy` done on it, and the helpers they share: a Memcached created, pods by label, a
//! pod that runs a script to its end, the node's addresses, and items set and counted.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::time::Duration;

use k8s_openapi::api::core::v1::{ContainerStatus, Pod};
use kube::Client;
use kube::api::{Api, DeleteParams, DynamicObject, ListParams, LogParams, PostParams};
use kube::core::{ApiResource, GroupVersionKind};
use memcached_operator::api::{GROUP, STORAGE_VERSION};
use testkit::control_plane::ControlPlane;
use testkit::deploy::{Deployed, start_and_deploy_with};
use testkit::memcache::Connection;

pub use testkit::scenarios::eventually;

/// `port` on `pod`'s own address, which this machine reaches over the node's bridge.
///
/// # Panics
/// When the pod has no address yet.
pub fn pod_address(pod: &Pod, port: u16) -> SocketAddr {
    let ip = testkit::containers::pod_ip(pod).and_then(|ip| ip.parse().ok());
    let ip = ip.unwrap_or_else(|| panic!("pod {:?} has no address", pod.metadata.name));
    SocketAddr::new(ip, port)
}

/// The status of `pod`'s memcached container.
pub fn memcached_status(pod: &Pod) -> Option<&ContainerStatus> {
    pod.status
        .as_ref()?
        .container_statuses
        .as_ref()?
        .iter()
        .find(|c| c.name == "memcached")
}

/// How long a scenario waits for the cluster to act.
pub const WAIT: Duration = Duration::from_secs(120);

/// Everything the scenarios share.
pub struct Env {
    /// The admin client.
    pub client: Client,
    /// What `make deploy` installed.
    pub deployed: Deployed,
    /// Drops last: stops cert-manager, the node and the control plane.
    pub plane: ControlPlane,
}

impl Env {
    /// Starts the control plane with a real node and deploys `config/default` on it.
    pub async fn start() -> Result<Env, String> {
        let policy = testkit::repository::root().join("tests/node/audit-policy.yaml");
        let (plane, client, deployed) = start_and_deploy_with(Some(policy)).await?;
        Ok(Env {
            client,
            deployed,
            plane,
        })
    }

    /// Creates a namespace for a scenario and returns its name.
    pub async fn create_namespace(&self, name: &str) -> String {
        testkit::control_plane::create_namespace(&self.client, name).await
    }

    /// Creates the v1beta1 Memcached `name` in `namespace` with `spec`, through the webhooks;
    /// returns the Memcacheds of that namespace.
    pub async fn create_memcached(
        &self,
        namespace: &str,
        name: &str,
        spec: serde_json::Value,
    ) -> Api<DynamicObject> {
        let gvk = GroupVersionKind::gvk(GROUP, STORAGE_VERSION, "Memcached");
        let memcacheds: Api<DynamicObject> =
            Api::namespaced_with(self.client.clone(), namespace, &ApiResource::from_gvk(&gvk));
        let object: DynamicObject = serde_json::from_value(serde_json::json!({
            "apiVersion": format!("{GROUP}/{STORAGE_VERSION}"),
            "kind": "Memcached",
            "metadata": { "name": name },
            "spec": spec,
        }))
        .expect("a Memcached");
        if let Err(error) = memcacheds.create(&PostParams::default(), &object).await {
            panic!("the Memcached {namespace}/{name} is not admitted: {error}");
        }
        memcacheds
    }

    /// The pods of `namespace` that match `selector`.
    pub async fn pods(&self, namespace: &str, selector: &str) -> Vec<Pod> {
        let pods: Api<Pod> = Api::namespaced(self.client.clone(), namespace);
        match pods.list(&ListParams::default().labels(selector)).await {
            Ok(list) => list.items,
            Err(error) => panic!("cannot list pods {selector} in {namespace}: {error}"),
        }
    }

    /// Runs `pod` (created in `namespace`) until it ends; returns its phase, its container's
    /// termination reason and its log. The pod is deleted afterwards.
    pub async fn run_to_end(&self, namespace: &str, pod: Pod) -> Ended {
        let pods: Api<Pod> = Api::namespaced(self.client.clone(), namespace);
        let name = pod.metadata.name.clone().unwrap_or_default();
        if let Err(error) = pods.create(&PostParams::default(), &pod).await {
            panic!("cannot create pod {namespace}/{name}: {error}");
        }
        let ended = eventually(&format!("pod {name} ends"), WAIT, || async {
            let pod = pods.get(&name).await.ok()?;
            let status = pod.status?;
            let phase = status.phase.unwrap_or_default();
            let waiting = status
                .container_statuses
                .as_ref()
                .and_then(|s| s.first()?.state.as_ref()?.waiting.clone())
                .and_then(|w| w.reason);
            let terminated = status
                .container_statuses
                .as_ref()
                .and_then(|s| s.first()?.state.as_ref()?.terminated.clone());
            match (phase.as_str(), waiting) {
                ("Succeeded" | "Failed", _) => Some(Ended {
                    phase,
                    reason: terminated.as_ref().and_then(|t| t.reason.clone()),
                    log: String::new(),
                }),
                // A container the kubelet refuses to start never ends: its reason is the end.
                (_, Some(reason)) if reason.ends_with("Error") => Some(Ended {
                    phase,
                    reason: Some(reason),
                    log: String::new(),
                }),
                _ => None,
            }
        })
        .await;
        let log = pods
            .logs(&name, &LogParams::default())
            .await
            .unwrap_or_default();
        let _ = pods
            .delete(&name, &DeleteParams::default().grace_period(0))
            .await;
        Ended { log, ..ended }
    }
}

/// How a pod ended.
#[derive(Clone, Debug)]
pub struct Ended {
    /// Its phase: Succeeded or Failed (or Pending, when the kubelet refused its container).
    pub phase: String,
    /// Its container's reason: `Completed`, `Error`, `OOMKilled`, `CreateContainerConfigError`.
    pub reason: Option<String>,
    /// What its container wrote.
    pub log: String,
}

/// A pod of one busybox container (the stand-in image built here) running `script` with
/// `sh -c`, with the security context given; it never restarts.
pub fn busybox_pod(
    name: &str,
    script: &str,
    security: serde_json::Value,
    memory_limit: Option<&str>,
) -> Pod {
    let image = image_reference("busybox");
    let mut resources = BTreeMap::new();
    if let Some(limit) = memory_limit {
        resources.insert("limits", serde_json::json!({ "memory": limit }));
    }
    let pod = serde_json::json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": { "name": name },
        "spec": {
            "restartPolicy": "Never",
            "terminationGracePeriodSeconds": 0,
            "containers": [{
                "name": "main",
                "image": image,
                "command": ["/bin/sh", "-c", script],
                "securityContext": security,
                "resources": resources,
            }],
        },
    });
    match serde_json::from_value(pod) {
        Ok(pod) => pod,
        Err(error) => panic!("the test's pod {name} is not a Pod: {error}"),
    }
}

/// The reference of one of the images `hack/images.sh` builds (`testkit::images`).
pub fn image_reference(name: &str) -> String {
    testkit::images::reference(name).unwrap_or_else(|error| panic!("{error}"))
}

/// Runs `program` with `args` on this machine; returns its standard output, or panics with
/// what it said.
pub fn host(program: &str, args: &[&str]) -> String {
    match std::process::Command::new(program).args(args).output() {
        Ok(output) if output.status.success() => String::from_utf8_lossy(&output.stdout).into(),
        Ok(output) => panic!(
            "{program} {}: {}",
            args.join(" "),
            String::from_utf8_lossy(&output.stderr)
        ),
        Err(error) => panic!("cannot run {program}: {error}"),
    }
}

/// Sets `count` items `prefix-N` to `value-N` through `connection`, each answered `STORED`.
pub async fn set_items(connection: &mut Connection, prefix: &str, count: usize) {
    for i in 0..count {
        let stored = connection
            .set(&format!("{prefix}-{i}"), &format!("value-{i}"))
            .await;
        assert_eq!(stored.as_deref(), Ok("STORED\r\n"), "set {prefix}-{i}");
    }
}

/// How many of the `count` items `prefix-N` `connection` reads back as `value-N`.
pub async fn count_items(connection: &mut Connection, prefix: &str, count: usize) -> usize {
    let mut found = 0;
    for i in 0..count {
        match connection.get(&format!("{prefix}-{i}")).await {
            Ok(Some(value)) if value == format!("value-{i}") => found += 1,
            Ok(_) => {}
            Err(error) => panic!("get {prefix}-{i}: {error}"),
        }
    }
    found
}
