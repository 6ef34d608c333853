//! A proxy in a pod of the local cluster, for the scenarios that set a cluster-wide proxy on
//! the operator as OLM and OpenShift do (`HTTPS_PROXY`, `HTTP_PROXY`, `NO_PROXY`): busybox's
//! nc listening for good, running a script per connection that reads its first line, writes it
//! to the pod's log and closes the connection unanswered, so anything sent through it fails
//! and is recorded. [`RecordingProxy::start`] checks that it records, with a line of its own,
//! so that its silence afterwards means something; [`replaced_replicas`] waits for the
//! operator's rollout onto the variables, and [`works_without_the_proxy`] checks what the
//! operator does behind them.

use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use kube::Client;
use kube::api::{Api, ListParams, PostParams};
use memcached_operator::admission::Defaults;
use memcached_operator::api::v1beta1::{Memcached, MemcachedSpec};
use serde_json::json;
use tokio::io::AsyncWriteExt;
use tokio::net::TcpStream;

use crate::cases::{DENIED_BY_VALIDATOR, over_the_memory_limit};
use crate::containers::{pod_ip, pod_logs};
use crate::scenarios::eventually;

/// OpenShift's `NO_PROXY` for the local cluster (hack/lib/node-network.sh): the pod network,
/// the service network (the `kubernetes` Service, 10.96.0.1, the API server pods reach, among
/// it), the cluster's domain, `.svc` and `localhost`.
pub const CLUSTER_NO_PROXY: &str = ".cluster.local,.svc,10.244.0.0/22,10.96.0.0/24,localhost";
/// The line [`RecordingProxy::start`] sends to check that the proxy records.
pub const PROBE: &str = "PROBE the-test HTTP/1.1";
/// The operator's log line when it reaches the API server without a proxy because
/// `NO_PROXY` (or loopback) covers it.
pub const EXEMPTED: &str =
    "the API server is on a loopback address or localhost, or NO_PROXY covers it";
/// The proxy's port.
const PORT: u16 = 3128;
/// What the proxy writes before each line it records.
const RECORDED: &str = "request: ";
/// How long the proxy may take to run and to record.
const WAIT: Duration = Duration::from_secs(120);

/// The proxy, running.
pub struct RecordingProxy {
    client: Client,
    pod: Pod,
    /// `http://IP:PORT`, for `HTTPS_PROXY` and `HTTP_PROXY`.
    pub url: String,
}

/// The proxy's pod, named `proxy`, from `image` (a busybox).
fn pod(image: &str) -> Pod {
    let script = format!(
        "printf '#!/bin/sh\\nread -r line\\necho \"{RECORDED}$line\" >&2\\n' >/tmp/record && \
         chmod +x /tmp/record && exec nc -ll -p {PORT} -e /tmp/record"
    );
    serde_json::from_value(json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": { "name": "proxy" },
        "spec": {
            "terminationGracePeriodSeconds": 0,
            "containers": [{
                "name": "proxy",
                "image": image,
                "command": ["/bin/sh", "-c", script],
                "ports": [{ "containerPort": PORT }],
            }],
        },
    }))
    .expect("the proxy is a Pod")
}

impl RecordingProxy {
    /// Builds the busybox image if needed (`hack/images.sh`), runs the proxy in `namespace`,
    /// and sends it [`PROBE`] from this machine until it has recorded that and nothing else.
    pub async fn start(client: &Client, namespace: &str) -> RecordingProxy {
        let image = tokio::task::spawn_blocking(|| {
            crate::images::build(&["busybox"])?;
            crate::images::reference("busybox")
        })
        .await
        .expect("the image build finished")
        .unwrap_or_else(|error| panic!("{error}"));
        let pods: Api<Pod> = Api::namespaced(client.clone(), namespace);
        pods.create(&PostParams::default(), &pod(&image))
            .await
            .expect("create the proxy");
        let pod = eventually("the proxy runs", WAIT, || async {
            let pod = pods.get("proxy").await.ok()?;
            let running = pod.status.as_ref()?.phase.as_deref() == Some("Running");
            running.then_some(pod)
        })
        .await;
        let address = format!("{}:{PORT}", pod_ip(&pod).expect("the proxy's IP"));
        let proxy = RecordingProxy {
            client: client.clone(),
            pod,
            url: format!("http://{address}"),
        };
        let mut stream = eventually("the proxy accepts", WAIT, || async {
            TcpStream::connect(&address).await.ok()
        })
        .await;
        stream
            .write_all(format!("{PROBE}\r\n\r\n").as_bytes())
            .await
            .expect("write to the proxy");
        drop(stream);
        eventually("the proxy records the test's line", WAIT, || async {
            (proxy.recorded().await == [PROBE]).then_some(())
        })
        .await;
        proxy
    }

    /// The lines the proxy recorded, in order.
    pub async fn recorded(&self) -> Vec<String> {
        pod_logs(&self.client, &self.pod)
            .await
            .lines()
            .filter_map(|line| line.strip_prefix(RECORDED))
            .map(|line| line.trim_end().to_string())
            .collect()
    }

    /// The variables OLM and OpenShift set for a cluster-wide proxy: this proxy, and
    /// [`CLUSTER_NO_PROXY`], as (name, value).
    pub fn variables(&self) -> [(&'static str, String); 3] {
        [
            ("HTTPS_PROXY", self.url.clone()),
            ("HTTP_PROXY", self.url.clone()),
            ("NO_PROXY", CLUSTER_NO_PROXY.to_string()),
        ]
    }
}

/// Whether `pod`'s first container has each of `variables` with its value.
pub fn has_variables(pod: &Pod, variables: &[(&str, String)]) -> bool {
    let env = pod
        .spec
        .as_ref()
        .and_then(|s| s.containers.first())
        .and_then(|c| c.env.clone())
        .unwrap_or_default();
    variables.iter().all(|(name, value)| {
        env.iter()
            .any(|e| e.name == *name && e.value.as_deref() == Some(value.as_str()))
    })
}

/// The operator's replicas in `namespace` (its pods, `control-plane=controller-manager`, not
/// being deleted) once there are two, neither of `before`, both Ready, and `has` holds for
/// both: the rollout that a change of their environment makes.
pub async fn replaced_replicas(
    client: &Client,
    namespace: &str,
    before: &[String],
    has: impl Fn(&Pod) -> bool,
) -> Vec<Pod> {
    let pods: Api<Pod> = Api::namespaced(client.clone(), namespace);
    let selector = ListParams::default().labels("control-plane=controller-manager");
    eventually("both replicas replaced, ready", WAIT, || async {
        let listed: Vec<Pod> = pods
            .list(&selector)
            .await
            .ok()?
            .items
            .into_iter()
            .filter(|p| p.metadata.deletion_timestamp.is_none())
            .collect();
        let replaced = listed.len() == 2
            && listed.iter().all(|p| {
                let name = p.metadata.name.clone().unwrap_or_default();
                let ready = p
                    .status
                    .as_ref()
                    .and_then(|s| s.conditions.as_ref())
                    .is_some_and(|c| c.iter().any(|c| c.type_ == "Ready" && c.status == "True"));
                !before.contains(&name) && ready && has(p)
            });
        replaced.then_some(listed)
    })
    .await
}

/// Checks that the operator in `namespace`, whose `replicas` run with `proxy`'s variables,
/// works and leaves the proxy alone: a Memcached created in `work` becomes Available, the
/// validating webhook refuses one only it knows to be invalid, one of `replicas` holds the
/// Lease, each says in its log that `NO_PROXY` covers the API server, and the proxy recorded
/// nothing but [`PROBE`]. Returns the leader's pod name.
pub async fn works_without_the_proxy(
    client: &Client,
    namespace: &str,
    replicas: &[Pod],
    proxy: &RecordingProxy,
    work: &str,
) -> String {
    let api: Api<Memcached> = Api::namespaced(client.clone(), work);
    let mut object = Memcached::new(
        "behind-a-proxy",
        MemcachedSpec {
            replicas: Some(1),
            ..MemcachedSpec::default()
        },
    );
    object.metadata.namespace = Some(work.to_string());
    api.create(&PostParams::default(), &object)
        .await
        .expect("create a Memcached");
    crate::control_plane::memcached_available(client, work, "behind-a-proxy", None, WAIT).await;
    let (over_limit, expected) = over_the_memory_limit("over-limit", work, &Defaults::default());
    let over_limit: Memcached = serde_json::from_str(&over_limit).expect("a Memcached");
    let refused = api
        .create(&PostParams::default(), &over_limit)
        .await
        .expect_err("the validator refuses memory above the limit")
        .to_string();
    assert!(
        refused.contains(DENIED_BY_VALIDATOR) && refused.contains(&expected),
        "the validator refuses: {refused}"
    );
    let names: Vec<String> = replicas
        .iter()
        .filter_map(|p| p.metadata.name.clone())
        .collect();
    let leader = eventually("a replaced replica holds the lease", WAIT, || async {
        let holder = crate::lease::holder(client, namespace).await.ok()?;
        let pod = holder.pod()?.to_string();
        names.contains(&pod).then_some(pod)
    })
    .await;
    for pod in replicas {
        let logs = pod_logs(client, pod).await;
        assert!(
            logs.contains("the API server is reached directly") && logs.contains(EXEMPTED),
            "{:?} says NO_PROXY covers the API server: {logs}",
            pod.metadata.name
        );
    }
    assert_eq!(
        proxy.recorded().await,
        [PROBE],
        "the proxy saw only the test's line"
    );
    api.delete("behind-a-proxy", &Default::default())
        .await
        .expect("delete the Memcached");
    leader
}
