//! Proves the node agent on the real local control plane: a pod running Debian's memcached
//! with a Secret volume, the service account token the API server projects, environment from
//! field references, a TCP startup probe and an exec readiness probe becomes Running and
//! Ready through the agent's status; the process sees its files at their mount paths; its token authenticates through
//! the `kubernetes` Service's ClusterIP; a Secret update arrives as a `..data` swap; an
//! image the table does not know is refused in the container status; and deleting the pod
//! stops the process and leaves no file behind.
//!
//! Needs `.tools` (the control plane), root (mount namespaces), and `memcached` installed
//! (`apt-get install -y memcached`): ignored by a plain `cargo test`; run with
//! `cargo test -p testkit --test node_agent -- --ignored`.

use std::collections::BTreeMap;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use k8s_openapi::ByteString;
use k8s_openapi::api::authentication::v1::SelfSubjectReview;
use k8s_openapi::api::core::v1::{Namespace, Pod, Secret, ServiceAccount};
use kube::api::{Api, DeleteParams, PostParams};
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::{Client, Config};
use testkit::control_plane::ControlPlane;
use testkit::node_agent::image_table::{ImageEntry, ImageTable};
use testkit::node_agent::pod_ips::PodIps;
use testkit::node_agent::{AgentConfig, NodeAgent};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

const NAMESPACE: &str = "node-agent";
const NODE: &str = "local";
const MEMCACHED_IMAGE: &str = "docker.io/library/memcached:1.6";
const CONFIG_MOUNT: &str = "/etc/memcached-config";
const TOKEN_DIR: &str = "/var/run/secrets/kubernetes.io/serviceaccount";
const KUBERNETES_SERVICE: &str = "127.0.96.1:443";

async fn until<T, F, Fut>(what: &str, timeout: Duration, mut check: F) -> T
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Option<T>>,
{
    let deadline = Instant::now() + timeout;
    loop {
        if let Some(value) = check().await {
            return value;
        }
        assert!(
            Instant::now() < deadline,
            "timed out after {timeout:?} waiting for {what}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

fn pod_spec(name: &str, image: &str) -> Pod {
    serde_json::from_value(serde_json::json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": NAMESPACE, "labels": {"app": "memcached"}},
        "spec": {
            "nodeName": NODE,
            "terminationGracePeriodSeconds": 5,
            "containers": [{
                "name": "memcached",
                "image": image,
                "args": ["-u", "memcache", "-p", "11211", "-m", "16", "-v"],
                "ports": [{"name": "memcache", "containerPort": 11211}],
                "env": [
                    {"name": "POD_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
                    {"name": "POD_IP", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}},
                    {"name": "APP", "valueFrom": {"fieldRef": {"fieldPath": "metadata.labels['app']"}}},
                    {"name": "ADDRESS", "value": "$(POD_IP):11211"}
                ],
                // Started once memcached accepts connections; ready once the Secret's file
                // is there, as seen from inside the pod's mount namespace.
                "startupProbe": {"tcpSocket": {"port": "memcache"}, "periodSeconds": 1},
                "readinessProbe": {
                    "exec": {"command": ["/bin/sh", "-c", format!("test -f {CONFIG_MOUNT}/greeting")]},
                    "periodSeconds": 1
                },
                "volumeMounts": [{"name": "config", "mountPath": CONFIG_MOUNT}]
            }],
            "volumes": [{"name": "config", "secret": {"secretName": "memcached-config"}}]
        }
    }))
    .expect("the pod literal is a Pod")
}

/// Processes whose environment holds `NODE_AGENT_POD_IP=ip`.
fn processes_of(ip: &str) -> Vec<u32> {
    let wanted = format!("NODE_AGENT_POD_IP={ip}");
    let mut pids = Vec::new();
    for entry in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        let Ok(environ) = std::fs::read(format!("/proc/{pid}/environ")) else {
            continue;
        };
        if environ.split(|b| *b == 0).any(|v| v == wanted.as_bytes()) {
            pids.push(pid);
        }
    }
    pids
}

fn environment(pid: u32) -> BTreeMap<String, String> {
    let environ = std::fs::read(format!("/proc/{pid}/environ")).unwrap_or_default();
    environ
        .split(|b| *b == 0)
        .filter_map(|v| {
            let text = String::from_utf8_lossy(v);
            let (k, v) = text.split_once('=')?;
            Some((k.to_string(), v.to_string()))
        })
        .collect()
}

/// A path as process `pid` sees it (through its mount namespace). The host part of the path
/// is resolved first: an absolute symbolic link such as `/var/run -> /run` would otherwise be
/// followed from the reader's root, not the process's.
fn seen_by(pid: u32, path: &str) -> PathBuf {
    let mut existing = Path::new(path);
    let mut rest = Vec::new();
    while !existing.exists() {
        let (Some(parent), Some(name)) = (existing.parent(), existing.file_name()) else {
            break;
        };
        rest.push(name.to_os_string());
        existing = parent;
    }
    let mut resolved = std::fs::canonicalize(existing).unwrap_or_else(|_| existing.to_path_buf());
    for name in rest.iter().rev() {
        resolved.push(name);
    }
    PathBuf::from(format!("/proc/{pid}/root{}", resolved.display()))
}

fn condition(pod: &Pod, type_: &str) -> Option<String> {
    pod.status
        .as_ref()?
        .conditions
        .as_ref()?
        .iter()
        .find(|c| c.type_ == type_)
        .map(|c| c.status.clone())
}

async fn memcached_version(address: SocketAddr) -> Option<String> {
    let mut stream = tokio::net::TcpStream::connect(address).await.ok()?;
    stream.write_all(b"version\r\n").await.ok()?;
    let mut buffer = [0u8; 64];
    let n = stream.read(&mut buffer).await.ok()?;
    Some(String::from_utf8_lossy(&buffer[..n]).trim().to_string())
}

/// A client that authenticates with `token` and trusts `ca`, dialing `server`.
async fn token_client(server: &str, ca: &Path, token: &str, dir: &Path) -> Client {
    let file = dir.join("token.kubeconfig");
    let text = format!(
        "apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster:\n    server: https://{server}\n    certificate-authority: {}\nusers:\n- name: u\n  user:\n    token: {token}\ncontexts:\n- name: x\n  context: {{cluster: c, user: u}}\ncurrent-context: x\n",
        ca.display()
    );
    std::fs::write(&file, text).expect("writing the token kubeconfig");
    let kubeconfig = Kubeconfig::read_from(&file).expect("reading the token kubeconfig");
    let config = Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default())
        .await
        .expect("loading the token kubeconfig");
    Client::try_from(config).expect("making the token client")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs .tools, root and memcached: cargo test -p testkit --test node_agent -- --ignored"]
async fn a_memcached_pod_runs_is_ready_gets_updates_and_leaves_nothing_behind() {
    let _ = tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::new("testkit=info"))
        .with_test_writer()
        .try_init();
    assert!(
        rustix::process::geteuid().is_root(),
        "the node agent needs root (mount namespaces)"
    );
    assert!(
        Path::new("/usr/bin/memcached").is_file(),
        "apt-get install -y memcached"
    );
    let host_config_dir_existed = Path::new(CONFIG_MOUNT).exists();
    let host_token_dir_existed = Path::new(TOKEN_DIR).exists();
    let plane = tokio::task::spawn_blocking(ControlPlane::start)
        .await
        .expect("the control plane's start panicked")
        .expect("the control plane starts");
    let client = plane.client().await.expect("an admin client");
    let apiserver: SocketAddr = std::fs::read_to_string(plane.state_dir().join("apiserver-url"))
        .expect("reading apiserver-url")
        .trim()
        .trim_start_matches("https://")
        .parse()
        .expect("apiserver-url holds https://IP:PORT");

    let namespaces: Api<Namespace> = Api::all(client.clone());
    let namespace: Namespace =
        serde_json::from_value(serde_json::json!({"metadata": {"name": NAMESPACE}})).unwrap();
    namespaces
        .create(&PostParams::default(), &namespace)
        .await
        .expect("creating the namespace");
    let accounts: Api<ServiceAccount> = Api::namespaced(client.clone(), NAMESPACE);
    until(
        "the default ServiceAccount",
        Duration::from_secs(30),
        || async { accounts.get_opt("default").await.ok().flatten() },
    )
    .await;

    let state = tempfile::tempdir().expect("a state directory");
    let images = ImageTable::new().with(
        MEMCACHED_IMAGE,
        ImageEntry {
            paths: BTreeMap::from([
                (
                    "/usr/bin/memcached".to_string(),
                    PathBuf::from("/usr/bin/memcached"),
                ),
                // For the exec probe.
                ("/bin/sh".to_string(), PathBuf::from("/bin/sh")),
            ]),
            entrypoint: vec!["memcached".to_string()],
            ..ImageEntry::default()
        },
    );
    let agent = NodeAgent::start(
        client.clone(),
        AgentConfig {
            node_name: NODE.to_string(),
            state_dir: state.path().join("node"),
            pod_ips: PodIps::parse("127.0.100.0/24").unwrap(),
            host_ip: Ipv4Addr::LOCALHOST,
            images,
            apiserver,
        },
    )
    .await
    .expect("the agent starts");

    let nodes: Api<k8s_openapi::api::core::v1::Node> = Api::all(client.clone());
    let node = nodes
        .get(NODE)
        .await
        .expect("the agent registered its Node");
    let ready = node
        .status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .and_then(|c| c.iter().find(|c| c.type_ == "Ready"))
        .map(|c| c.status.clone());
    assert_eq!(ready.as_deref(), Some("True"));

    let leases: Api<k8s_openapi::api::coordination::v1::Lease> =
        Api::namespaced(client.clone(), "kube-node-lease");
    let lease = leases
        .get(NODE)
        .await
        .expect("the agent keeps a node Lease");
    let holder = lease.spec.and_then(|s| s.holder_identity);
    assert_eq!(holder.as_deref(), Some(NODE));

    let secrets: Api<Secret> = Api::namespaced(client.clone(), NAMESPACE);
    let mut secret = Secret {
        metadata: kube::api::ObjectMeta {
            name: Some("memcached-config".to_string()),
            ..Default::default()
        },
        data: Some(BTreeMap::from([(
            "greeting".to_string(),
            ByteString(b"hello".to_vec()),
        )])),
        ..Secret::default()
    };
    secrets
        .create(&PostParams::default(), &secret)
        .await
        .expect("creating the Secret");

    // An image the table does not know is refused, in the container status.
    let pods: Api<Pod> = Api::namespaced(client.clone(), NAMESPACE);
    pods.create(
        &PostParams::default(),
        &pod_spec("unknown-image", "example.invalid/nope:1"),
    )
    .await
    .expect("creating the unknown-image pod");
    let waiting = until(
        "ErrImagePull in the status",
        Duration::from_secs(20),
        || async {
            let pod = pods.get("unknown-image").await.ok()?;
            let state = pod.status?.container_statuses?.first()?.state.clone()?;
            let waiting = state.waiting?;
            (waiting.reason.as_deref() == Some("ErrImagePull")).then_some(waiting)
        },
    )
    .await;
    let message = waiting.message.unwrap_or_default();
    assert!(message.contains("example.invalid/nope:1"), "{message}");

    // The memcached pod becomes Running and Ready.
    let created = Instant::now();
    pods.create(
        &PostParams::default(),
        &pod_spec("memcached", MEMCACHED_IMAGE),
    )
    .await
    .expect("creating the pod");
    let pod = until(
        "the pod Running and Ready",
        Duration::from_secs(60),
        || async {
            let pod = pods.get("memcached").await.ok()?;
            let running = pod.status.as_ref()?.phase.as_deref() == Some("Running");
            (running && condition(&pod, "Ready").as_deref() == Some("True")).then_some(pod)
        },
    )
    .await;
    let to_ready = created.elapsed();
    eprintln!("pod created -> Ready: {to_ready:?}");
    let status = pod.status.clone().unwrap_or_default();
    let ip = status.pod_ip.clone().expect("a pod IP");
    assert!(ip.starts_with("127.0.100."), "{ip}");
    assert_eq!(status.host_ip.as_deref(), Some("127.0.0.1"));
    for type_ in [
        "PodReadyToStartContainers",
        "Initialized",
        "ContainersReady",
        "Ready",
    ] {
        assert_eq!(condition(&pod, type_).as_deref(), Some("True"), "{type_}");
    }
    let container = &status.container_statuses.unwrap_or_default()[0];
    assert!(container.ready && container.started == Some(true));
    assert!(
        container
            .state
            .as_ref()
            .and_then(|s| s.running.as_ref())
            .is_some()
    );

    // The process: its environment, and its files where the pod spec mounts them.
    let pids = processes_of(&ip);
    assert_eq!(pids.len(), 1, "one process for the pod, found {pids:?}");
    let pid = pids[0];
    let env = environment(pid);
    assert_eq!(env.get("POD_NAME").map(String::as_str), Some("memcached"));
    assert_eq!(env.get("POD_IP"), Some(&ip));
    assert_eq!(env.get("APP").map(String::as_str), Some("memcached"));
    assert_eq!(env.get("ADDRESS"), Some(&format!("{ip}:11211")));
    assert_eq!(
        env.get("KUBERNETES_SERVICE_HOST").map(String::as_str),
        Some("127.0.96.1")
    );
    assert_eq!(
        env.get("KUBERNETES_SERVICE_PORT").map(String::as_str),
        Some("443")
    );
    let greeting = seen_by(pid, &format!("{CONFIG_MOUNT}/greeting"));
    assert_eq!(
        std::fs::read_to_string(&greeting).expect("the Secret's key at its mount path"),
        "hello"
    );
    assert!(
        !Path::new(&format!("{CONFIG_MOUNT}/greeting")).exists(),
        "the host does not see the pod's mount"
    );
    let namespace_file = std::fs::read_to_string(seen_by(pid, &format!("{TOKEN_DIR}/namespace")))
        .expect("the projected namespace");
    assert_eq!(namespace_file, NAMESPACE);

    // memcached asked for every address; the shim gave it the pod IP.
    let pod_address = SocketAddr::new(ip.parse::<IpAddr>().unwrap(), 11211);
    let version = memcached_version(pod_address)
        .await
        .expect("memcached answers on the pod IP");
    assert!(version.starts_with("VERSION "), "{version}");

    // A Service selecting the pod reaches it through its ClusterIP.
    let services: Api<k8s_openapi::api::core::v1::Service> =
        Api::namespaced(client.clone(), NAMESPACE);
    let service = serde_json::from_value(serde_json::json!({
        "metadata": {"name": "memcached"},
        "spec": {
            "selector": {"app": "memcached"},
            "ports": [{"name": "memcache", "port": 11211, "targetPort": "memcache"}]
        }
    }))
    .expect("the Service literal is a Service");
    let service = services
        .create(&PostParams::default(), &service)
        .await
        .expect("creating the Service");
    let cluster_ip: IpAddr = service
        .spec
        .and_then(|s| s.cluster_ip)
        .and_then(|ip| ip.parse().ok())
        .expect("a ClusterIP");
    assert!(
        cluster_ip.to_string().starts_with("127.0.96."),
        "{cluster_ip}"
    );
    let through_service = until(
        "memcached through the Service",
        Duration::from_secs(10),
        || memcached_version(SocketAddr::new(cluster_ip, 11211)),
    )
    .await;
    assert!(through_service.starts_with("VERSION "), "{through_service}");

    // The projected token authenticates through the `kubernetes` Service's ClusterIP.
    let token =
        std::fs::read_to_string(seen_by(pid, &format!("{TOKEN_DIR}/token"))).expect("the token");
    let ca = seen_by(pid, &format!("{TOKEN_DIR}/ca.crt"));
    let ca_copy = state.path().join("ca.crt");
    std::fs::copy(&ca, &ca_copy).expect("copying ca.crt");
    let as_pod = token_client(KUBERNETES_SERVICE, &ca_copy, token.trim(), state.path()).await;
    let review = Api::<SelfSubjectReview>::all(as_pod)
        .create(&PostParams::default(), &SelfSubjectReview::default())
        .await
        .expect("the token authenticates through 127.0.96.1:443");
    let user = review
        .status
        .and_then(|s| s.user_info)
        .and_then(|u| u.username);
    assert_eq!(
        user.as_deref(),
        Some("system:serviceaccount:node-agent:default")
    );

    // A Secret update arrives by swapping ..data.
    let data_link = seen_by(pid, &format!("{CONFIG_MOUNT}/..data"));
    let before = std::fs::read_link(&data_link).expect("..data is a link");
    secret = secrets
        .get("memcached-config")
        .await
        .expect("reading the Secret");
    secret.data = Some(BTreeMap::from([(
        "greeting".to_string(),
        ByteString(b"world".to_vec()),
    )]));
    let updated = Instant::now();
    secrets
        .replace("memcached-config", &PostParams::default(), &secret)
        .await
        .expect("updating the Secret");
    until("the new greeting", Duration::from_secs(30), || async {
        (std::fs::read_to_string(&greeting).ok()? == "world").then_some(())
    })
    .await;
    let delivered = updated.elapsed();
    eprintln!("Secret update -> file: {delivered:?}");
    let after = std::fs::read_link(&data_link).expect("..data is still a link");
    assert_ne!(before, after, "the update swapped ..data");
    assert!(
        !seen_by(pid, &format!("{CONFIG_MOUNT}/{}", before.display())).exists(),
        "the old payload is gone"
    );

    // Deletion stops the process and removes every file.
    let deleted = Instant::now();
    pods.delete("memcached", &DeleteParams::default())
        .await
        .expect("deleting the pod");
    until("the pod gone", Duration::from_secs(30), || async {
        pods.get_opt("memcached")
            .await
            .ok()?
            .is_none()
            .then_some(())
    })
    .await;
    eprintln!("pod deleted -> gone: {:?}", deleted.elapsed());
    assert!(
        !Path::new(&format!("/proc/{pid}")).exists(),
        "memcached (pid {pid}) still runs"
    );
    assert!(processes_of(&ip).is_empty());
    assert!(memcached_version(pod_address).await.is_none());
    assert_eq!(
        Path::new(CONFIG_MOUNT).exists(),
        host_config_dir_existed,
        "{CONFIG_MOUNT}"
    );
    assert_eq!(
        Path::new(TOKEN_DIR).exists(),
        host_token_dir_existed,
        "{TOKEN_DIR}"
    );
    let uid = pod.metadata.uid.unwrap_or_default();
    assert!(
        !state.path().join("node/pods").join(&uid).exists(),
        "the pod's directory is gone"
    );

    pods.delete("unknown-image", &DeleteParams::default())
        .await
        .expect("deleting the unknown-image pod");
    until(
        "the unknown-image pod gone",
        Duration::from_secs(30),
        || async {
            pods.get_opt("unknown-image")
                .await
                .ok()?
                .is_none()
                .then_some(())
        },
    )
    .await;
    agent.stop().await;
    drop(plane);
}
