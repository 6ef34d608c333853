//! Proves the operator under a cluster-wide proxy, as OLM sets one: `HTTP_PROXY`,
//! `HTTPS_PROXY` and `NO_PROXY` in its environment, the proxy a local port that answers every
//! request with 403 and records its request line. With OpenShift's kind of `NO_PROXY` the
//! operator reaches the API server directly and works (webhooks, reconciles, the lease), and
//! the proxy sees nothing. An API server named by a host `NO_PROXY` does not cover is asked
//! for through the proxy (`CONNECT`), as client-go asks; one it covers is not.

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use k8s_openapi::api::apps::v1::StatefulSet;
use k8s_openapi::api::coordination::v1::Lease;
use kube::api::{Api, PostParams};
use kube::config::Kubeconfig;
use memcached_operator::api::v1beta1::{Memcached, MemcachedSpec};
use memcached_operator::manager::DEFAULT_LEASE_NAME;
use testkit::loopback;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::net::TcpListener;

use crate::cluster::{Env, OPERATOR_NAMESPACE, eventually};

const WAIT: Duration = Duration::from_secs(60);

/// A host no resolver knows (RFC 2606), for an API server reached only through the proxy.
const UNRESOLVABLE: &str = "apiserver.proxied.invalid";

/// Another such host, for the API server once `NO_PROXY` covers it: a name of its own, so a
/// late request of the operator stopped before it (still in flight to the proxy when that
/// operator was killed) is not taken for one of this operator's.
const COVERED: &str = "apiserver.covered.invalid";

/// OpenShift's `NO_PROXY` for a cluster with the default networks, less the API server's
/// names: the pod and service networks, the cluster's domain, `.svc` and `localhost`.
const NO_PROXY: &str = ".cluster.local,.svc,10.128.0.0/14,172.30.0.0/16,localhost";

/// A proxy that refuses everything: each request line is recorded, and answered
/// with 403.
struct RefusingProxy {
    address: SocketAddr,
    requests: Arc<Mutex<Vec<String>>>,
    task: tokio::task::JoinHandle<()>,
}

impl RefusingProxy {
    async fn start() -> RefusingProxy {
        let ip = loopback::own_address();
        let listener = TcpListener::bind((ip, 0)).await.expect("the proxy binds");
        let address = listener.local_addr().expect("the proxy's address");
        let requests: Arc<Mutex<Vec<String>>> = Arc::default();
        let seen = requests.clone();
        let task = tokio::spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                let seen = seen.clone();
                tokio::spawn(async move {
                    let mut stream = BufReader::new(stream);
                    let mut line = String::new();
                    let _ = stream.read_line(&mut line).await;
                    // A connection closed before its first line asked nothing: a client
                    // stopped while it connected (the previous operator, killed) leaves one.
                    let line = line.trim_end();
                    if !line.is_empty() {
                        seen.lock().expect("the requests").push(line.to_string());
                    }
                    let _ = stream
                        .get_mut()
                        .write_all(b"HTTP/1.1 403 Forbidden\r\ncontent-length: 0\r\n\r\n")
                        .await;
                });
            }
        });
        RefusingProxy {
            address,
            requests,
            task,
        }
    }

    fn url(&self) -> String {
        format!("http://{}", self.address)
    }

    fn requests(&self) -> Vec<String> {
        self.requests.lock().expect("the requests").clone()
    }
}

impl Drop for RefusingProxy {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// The admin kubeconfig with the API server named `host` (same port), written under `dir`.
fn kubeconfig_naming(env: &Env, host: &str, dir: &std::path::Path) -> (String, String) {
    let mut kubeconfig =
        Kubeconfig::read_from(env.plane.kubeconfig()).expect("the admin kubeconfig reads");
    let mut authority = String::new();
    for named in &mut kubeconfig.clusters {
        if let Some(cluster) = named.cluster.as_mut()
            && let Some(server) = cluster.server.as_mut()
        {
            let uri: http::Uri = server.parse().expect("the server is a URL");
            let port = uri.port_u16().expect("the server's port");
            authority = format!("{host}:{port}");
            *server = format!("https://{authority}");
        }
    }
    let path = dir.join("kubeconfig");
    std::fs::write(
        &path,
        serde_json::to_vec(&kubeconfig).expect("the kubeconfig serialises"),
    )
    .expect("the kubeconfig is written");
    (path.display().to_string(), authority)
}

pub async fn a_cluster_proxy_is_used_where_client_go_would_use_it(env: Arc<Env>) {
    let proxy = RefusingProxy::start().await;
    let url = proxy.url();
    let variables = [
        ("HTTP_PROXY", url.as_str()),
        ("HTTPS_PROXY", url.as_str()),
        ("NO_PROXY", NO_PROXY),
    ];

    // The operator as OLM runs it under a cluster-wide proxy: the API server is on a
    // loopback address here (a service-network address NO_PROXY names, in a cluster).
    env.restart_operator_with_env(&[], &variables).await;
    let direct = env
        .operator_logs_containing("the API server is reached directly")
        .await;
    let namespace = env.create_namespace("e2e-proxy").await;
    let api: Api<Memcached> = Api::namespaced(env.client.clone(), &namespace);
    api.create(
        &PostParams::default(),
        &Memcached::new("behind-a-proxy", MemcachedSpec::default()),
    )
    .await
    .expect("created through the webhooks of the operator under the proxy");
    let statefulsets: Api<StatefulSet> = Api::namespaced(env.client.clone(), &namespace);
    eventually("the StatefulSet is written", WAIT, || async {
        statefulsets.get_opt("behind-a-proxy").await.ok().flatten()
    })
    .await;
    let leases: Api<Lease> = Api::namespaced(env.client.clone(), OPERATOR_NAMESPACE);
    let pid = env.operator_pid().await.expect("the operator runs");
    eventually("the operator holds the lease", WAIT, || async {
        let lease = leases.get_opt(DEFAULT_LEASE_NAME).await;
        let holder = lease
            .map_err(|error| error.to_string())?
            .and_then(|lease| lease.spec?.holder_identity)
            .unwrap_or_default();
        if holder.contains(&format!("_{pid}_")) {
            Ok(())
        } else {
            Err(format!("held by {holder:?}"))
        }
    })
    .await;
    let while_working = proxy.requests();

    // An API server NO_PROXY does not cover: asked for through the proxy.
    let dir = tempfile::tempdir().expect("a temporary directory");
    let covered_dir = tempfile::tempdir().expect("a temporary directory");
    let (kubeconfig, authority) = kubeconfig_naming(&env, UNRESOLVABLE, dir.path());
    let proxied = [
        ("HTTPS_PROXY", url.as_str()),
        ("NO_PROXY", NO_PROXY),
        ("KUBECONFIG", kubeconfig.as_str()),
    ];
    let through = env
        .spawn_operator_with_env(env.cert_root.path(), &["--webhooks=false"], &proxied)
        .await;
    let connect = format!("CONNECT {authority} HTTP/1.1");
    eventually("the proxy is asked for the API server", WAIT, || async {
        let requests = proxy.requests();
        if requests.contains(&connect) {
            Ok(())
        } else {
            Err(format!("requests so far: {requests:?}"))
        }
    })
    .await;
    let said_proxy = through.logs_containing("the API server is reached through a proxy");
    drop(through);

    // An API server under a domain NO_PROXY covers: never asked for through it. The name
    // resolves nowhere, so the operator's own attempt at discovery fails, and says so; had it
    // gone through the proxy, the proxy would have recorded it before answering.
    let (covered_kubeconfig, covered_authority) =
        kubeconfig_naming(&env, COVERED, covered_dir.path());
    let no_proxy = format!("{NO_PROXY},.invalid");
    let covered = [
        ("HTTPS_PROXY", url.as_str()),
        ("NO_PROXY", no_proxy.as_str()),
        ("KUBECONFIG", covered_kubeconfig.as_str()),
    ];
    let direct_named = env
        .spawn_operator_with_env(env.cert_root.path(), &["--webhooks=false"], &covered)
        .await;
    eventually(
        "the operator's own attempt at the API server fails",
        WAIT,
        || async {
            let failed = direct_named.logs_containing("could not list API groups");
            (!failed.is_empty()).then_some(())
        },
    )
    .await;
    let said_direct = direct_named.logs_containing("the API server is reached directly");
    let after = proxy.requests();
    drop(direct_named);
    env.restart_operator(&[]).await;

    println!(
        "figures: under HTTPS_PROXY with NO_PROXY {NO_PROXY:?}, the proxy saw {} requests \
         while the operator worked; for an API server it does not cover, {:?}",
        while_working.len(),
        after
    );
    assert!(
        !direct.is_empty(),
        "the operator said it reaches the API server directly"
    );
    assert!(
        while_working.is_empty(),
        "nothing goes to the proxy while the API server is reached directly: {while_working:?}"
    );
    assert_eq!(
        said_proxy.len(),
        1,
        "the operator said it goes through the proxy: {said_proxy:?}"
    );
    assert_eq!(
        said_proxy[0]["proxy"].as_str(),
        Some(url.as_str()),
        "{said_proxy:?}"
    );
    assert_eq!(said_direct.len(), 1, "{said_direct:?}");
    let asked_for_covered: Vec<&String> = after
        .iter()
        .filter(|request| request.contains(&covered_authority))
        .collect();
    assert!(
        asked_for_covered.is_empty(),
        "nothing goes to the proxy once NO_PROXY covers the API server: {after:?}"
    );
}
