//! A certificate renewed by cert-manager reaches every memcached server without a restart and
//! without losing an item, under client certificates and authentication: the servers of a
//! two-server Memcached require both (`clientAuth: Require`, `spec.auth`, so memcached runs
//! under the supervisor and the refresher authenticates too) and take their certificate from
//! the cert-manager
//! Certificate the operator writes for `spec.tls.issuerRef` (a CA issuer), server
//! authentication only; the operator also writes the sidecars' own Certificate
//! (`cache-client`, client authentication only), which the certificate refresher presents and
//! the test's clients present too. Items are set, a client loop sets and reads items over fresh
//! TLS connections throughout, and the server Certificate is renewed. The kubelet brings the
//! new files into the pods, the certificate refresher beside each server sends it
//! `refresh_certs` (presenting its own certificate: it cannot read the server's key), and
//! every server then presents the new serial: with the same memcached processes (container
//! restart counts and process start times), and every item still there.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, RwLock};
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::{Pod, Secret};
use kube::api::{Api, DynamicObject, PostParams};
use kube::core::{ApiResource, GroupVersionKind};
use rustls_pki_types::pem::PemObject;
use serde_json::json;
use testkit::containers::memcached_pid;
use testkit::memcache::{Connection, Tls};
use testkit::pki::Leaf;
use testkit::procfs::start_ticks;

use crate::cluster::{Env, WAIT, eventually, pod_address};
use crate::secured::create_auth_secret;

/// Items set before the renewal, spread over both servers.
const ITEMS: usize = 100;
/// How long the renewal may take to reach every server: the kubelet's sync period (about a
/// minute) before the files change in the pods, the refresher's interval, and margin.
const ROTATION_LIMIT: Duration = Duration::from_secs(240);

/// The credentials every client of the scenario authenticates with.
pub const USER: &str = "rotation";
pub const PASSWORD: &str = "renewed-under-auth-7c2e";

pub async fn a_renewed_certificate_is_served_without_a_restart_or_a_lost_item(env: Arc<Env>) {
    let namespace = env.create_namespace("rotation").await;
    create_ca_issuer(&env, &namespace).await;
    create_auth_secret(&env, &namespace, "cache-auth", USER, PASSWORD).await;
    let spec = json!({
        "replicas": 2,
        "memcached": { "memoryLimitMB": 16 },
        "resources": { "limits": { "memory": "64Mi" } },
        "tls": {
            "secretName": "cache-tls",
            "issuerRef": { "name": "cache-ca" },
            "clientAuth": "Require",
        },
        "auth": { "secretName": "cache-auth" },
    });
    let memcacheds = env.create_memcached(&namespace, "cache", spec).await;
    let certificates = testkit::certificates::certificates(&env.client, &namespace);
    let certificate = eventually(
        "the operator writes the Certificate cache",
        WAIT,
        || async { certificates.get_opt("cache").await.ok().flatten() },
    )
    .await;
    let owner = memcacheds.get("cache").await.expect("the Memcached");
    assert_eq!(
        certificate
            .metadata
            .owner_references
            .as_ref()
            .map(|o| o[0].uid.clone()),
        owner.metadata.uid,
        "the Memcached owns its Certificate"
    );
    let client_certificate = eventually(
        "the operator writes the sidecars' Certificate cache-client",
        WAIT,
        || async { certificates.get_opt("cache-client").await.ok().flatten() },
    )
    .await;
    assert_eq!(
        client_certificate
            .metadata
            .owner_references
            .as_ref()
            .map(|o| o[0].uid.clone()),
        owner.metadata.uid,
        "the Memcached owns the sidecars' Certificate"
    );
    let secrets: Api<Secret> = Api::namespaced(env.client.clone(), &namespace);
    let first = eventually("cert-manager issues cache-tls", WAIT, || async {
        let secret = secrets.get("cache-tls").await.ok()?;
        leaf_serial(&secret)
    })
    .await;
    let client = eventually("cert-manager issues cache-client-tls", WAIT, || async {
        leaf_of(&secrets.get("cache-client-tls").await.ok()?)
    })
    .await;
    let usages = |secret: &str| {
        let secrets = secrets.clone();
        let secret = secret.to_string();
        async move {
            let object = secrets.get(&secret).await.expect("the Secret");
            let pem = object.data.unwrap_or_default()["tls.crt"].0.clone();
            let der = rustls_pki_types::CertificateDer::pem_slice_iter(&pem)
                .next()
                .expect("a certificate")
                .expect("a PEM certificate");
            let (_, parsed) = x509_parser::parse_x509_certificate(&der).expect("X.509");
            let usage = parsed
                .extended_key_usage()
                .expect("a well-formed extension")
                .expect("an extended key usage")
                .value;
            (usage.server_auth, usage.client_auth)
        }
    };
    assert_eq!(
        usages("cache-tls").await,
        (true, false),
        "the servers' certificate is for server authentication only"
    );
    assert_eq!(
        usages("cache-client-tls").await,
        (false, true),
        "the sidecars' certificate is for client authentication only"
    );
    let ca_pem = {
        let secret = secrets.get("cache-tls").await.expect("the Secret");
        let data = secret.data.unwrap_or_default();
        String::from_utf8(data["ca.crt"].0.clone()).expect("a PEM CA")
    };
    eventually("both servers ready", WAIT, || async {
        let object = memcacheds.get("cache").await.ok()?;
        (object.data["status"]["readyReplicas"] == json!(2)).then_some(())
    })
    .await;

    let servers = servers(&env, &namespace, &ca_pem, &client).await;
    let before: Vec<Identity> = servers.iter().map(|s| s.identity()).collect();
    for server in &servers {
        let served = presented(server).await.expect("a TLS handshake");
        assert_eq!(
            served, first,
            "{} presents the issued certificate",
            server.pod
        );
    }
    store_items(&servers, ITEMS).await;

    let looping = ClientLoop::start(servers.clone());

    let triggered = Instant::now();
    testkit::certificates::renew(&certificates, "cache")
        .await
        .expect("cert-manager is asked to renew the Certificate cache");
    let renewed = eventually("cert-manager renews cache-tls", WAIT, || async {
        let secret = secrets.get("cache-tls").await.ok()?;
        leaf_serial(&secret).filter(|serial| *serial != first)
    })
    .await;
    let secret_changed = triggered.elapsed();
    let mut served_after = Vec::new();
    for server in &servers {
        let took = eventually(
            &format!("{} presents serial {renewed}", server.pod),
            ROTATION_LIMIT,
            || async { (presented(server).await.ok()? == renewed).then(|| triggered.elapsed()) },
        )
        .await;
        served_after.push((server.pod.clone(), took));
    }
    // A few more seconds of the loop with the new certificate everywhere.
    tokio::time::sleep(Duration::from_secs(3)).await;
    let (done, failures) = looping.stop().await;

    let missing = missing_items(&servers, ITEMS).await;
    let after: Vec<Identity> = servers_now(&env, &namespace).await;
    eprintln!(
        "rotation: the Secret changed {:.1} s after the trigger; served {}; client loop {} \
         operations, {} failed; {} of {ITEMS} items set before are there after; restart \
         counts and memcached start times before {before:?}, after {after:?}",
        secret_changed.as_secs_f64(),
        served_after
            .iter()
            .map(|(pod, took)| format!("by {pod} at {:.1} s", took.as_secs_f64()))
            .collect::<Vec<_>>()
            .join(", "),
        done,
        failures.len(),
        ITEMS - missing.len(),
    );
    nothing_lost(done, &failures, &missing, &before, &after);
}

/// A change under a client loop lost nothing: the loop did work and none of it failed, every
/// item set before is still there (`missing` is empty), and no memcached restarted.
pub fn nothing_lost(
    done: u64,
    failures: &[String],
    missing: &[String],
    before: &[Identity],
    after: &[Identity],
) {
    assert!(done > 0, "the client loop did work");
    assert_eq!(failures, &[] as &[String], "no client operation failed");
    assert_eq!(
        missing,
        &[] as &[String],
        "every item set before is still there"
    );
    assert_eq!(after, before, "no memcached restarted");
}

/// Sets `before-I` to `value-I` for each I below `items`, on the servers in turn.
pub async fn store_items(servers: &[Server], items: usize) {
    for i in 0..items {
        let server = &servers[i % servers.len()];
        let mut connection = server.connect().await.expect("a TLS connection");
        assert_eq!(
            connection
                .set(&format!("before-{i}"), &format!("value-{i}"))
                .await
                .as_deref(),
            Ok("STORED\r\n")
        );
    }
}

/// The items [`store_items`] set that the servers no longer hold, each with what was read.
pub async fn missing_items(servers: &[Server], items: usize) -> Vec<String> {
    let mut missing = Vec::new();
    for i in 0..items {
        let server = &servers[i % servers.len()];
        let mut connection = server.connect().await.expect("a TLS connection");
        let value = connection.get(&format!("before-{i}")).await;
        if value != Ok(Some(format!("value-{i}"))) {
            missing.push(format!("before-{i} on {}: {value:?}", server.pod));
        }
    }
    missing
}

/// A client working throughout a change: a fresh TLS connection per operation, so every
/// handshake of the change is tried, each operation a set then a get of the same key, on
/// the servers in turn, as they are reached now ([`ClientLoop::reach`]).
pub struct ClientLoop {
    servers: Arc<RwLock<Vec<Server>>>,
    stop: Arc<AtomicBool>,
    done: Arc<AtomicU64>,
    task: tokio::task::JoinHandle<Vec<String>>,
}

impl ClientLoop {
    pub fn start(servers: Vec<Server>) -> ClientLoop {
        let servers = Arc::new(RwLock::new(servers));
        let stop = Arc::new(AtomicBool::new(false));
        let done = Arc::new(AtomicU64::new(0));
        let task = {
            let (servers, stop, done) = (servers.clone(), stop.clone(), done.clone());
            tokio::spawn(async move {
                let mut n = 0usize;
                let mut failures = Vec::new();
                while !stop.load(Ordering::Relaxed) {
                    let server = {
                        let servers = servers.read().expect("the servers");
                        servers[n % servers.len()].clone()
                    };
                    let key = format!("during-{n}");
                    let outcome = async {
                        let mut connection = server.connect().await?;
                        let stored = connection.set(&key, "x").await?;
                        let read = connection.get(&key).await?;
                        (stored == "STORED\r\n" && read.as_deref() == Some("x"))
                            .then_some(())
                            .ok_or(format!("{key}: stored {stored:?}, read {read:?}"))
                    }
                    .await;
                    match outcome {
                        Ok(()) => {
                            done.fetch_add(1, Ordering::Relaxed);
                        }
                        Err(error) => failures.push(format!("{}: {error}", server.pod)),
                    }
                    n += 1;
                    tokio::time::sleep(Duration::from_millis(20)).await;
                }
                failures
            })
        };
        ClientLoop {
            servers,
            stop,
            done,
            task,
        }
    }

    /// From the next operation on, reaches the servers as `servers` do.
    pub fn reach(&self, servers: Vec<Server>) {
        *self.servers.write().expect("the servers") = servers;
    }

    /// Stops the loop: the operations that succeeded, and each failure.
    pub async fn stop(self) -> (u64, Vec<String>) {
        self.stop.store(true, Ordering::Relaxed);
        let failures = self.task.await.expect("the client loop ends");
        (self.done.load(Ordering::Relaxed), failures)
    }
}

/// A self-signed issuer, a CA Certificate from it, and the CA issuer `cache-ca` of that CA, which
/// the Memcached names (so a renewal keeps the CA and changes the leaf).
async fn create_ca_issuer(env: &Env, namespace: &str) {
    create_cas(env, namespace, &["cache-ca"]).await;
    create_issuer(env, namespace, "cache-ca", "cache-ca").await;
}

/// cert-manager's Issuers of `namespace`.
pub fn issuers(env: &Env, namespace: &str) -> Api<DynamicObject> {
    Api::namespaced_with(
        env.client.clone(),
        namespace,
        &ApiResource::from_gvk(&GroupVersionKind::gvk("cert-manager.io", "v1", "Issuer")),
    )
}

async fn create(api: &Api<DynamicObject>, value: serde_json::Value) {
    let object: DynamicObject = serde_json::from_value(value).expect("an object");
    let name = object.metadata.name.clone().unwrap_or_default();
    if let Err(error) = api.create(&PostParams::default(), &object).await {
        panic!("cannot create {name}: {error}");
    }
}

/// A self-signed issuer and, from it, a CA Certificate (ECDSA P-256) for each of `cas`, each
/// issued into a Secret of its name.
pub async fn create_cas(env: &Env, namespace: &str, cas: &[&str]) {
    let certificates = testkit::certificates::certificates(&env.client, namespace);
    create(
        &issuers(env, namespace),
        json!({
            "apiVersion": "cert-manager.io/v1", "kind": "Issuer",
            "metadata": { "name": "self-signed" },
            "spec": { "selfSigned": {} },
        }),
    )
    .await;
    for ca in cas {
        create(
            &certificates,
            json!({
                "apiVersion": "cert-manager.io/v1", "kind": "Certificate",
                "metadata": { "name": ca },
                "spec": {
                    "isCA": true, "commonName": ca, "secretName": ca,
                    "privateKey": { "algorithm": "ECDSA", "size": 256 },
                    "issuerRef": { "name": "self-signed", "kind": "Issuer" },
                },
            }),
        )
        .await;
    }
}

/// The CA issuer `name`, signing with the CA in the Secret `ca`.
pub async fn create_issuer(env: &Env, namespace: &str, name: &str, ca: &str) {
    create(
        &issuers(env, namespace),
        json!({
            "apiVersion": "cert-manager.io/v1", "kind": "Issuer",
            "metadata": { "name": name },
            "spec": { "ca": { "secretName": ca } },
        }),
    )
    .await;
}

/// The certificate and key of a TLS Secret, as a client presents them.
pub fn leaf_of(secret: &Secret) -> Option<Leaf> {
    let data = secret.data.as_ref()?;
    let text = |key: &str| String::from_utf8(data.get(key)?.0.clone()).ok();
    let cert_pem = text("tls.crt")?;
    let der = rustls_pki_types::CertificateDer::pem_slice_iter(cert_pem.as_bytes())
        .next()?
        .ok()?;
    Some(Leaf {
        serial: testkit::pki::serial_of(&der),
        key_pem: text("tls.key")?,
        cert_pem,
    })
}

/// The serial of the leaf certificate in a TLS Secret.
pub fn leaf_serial(secret: &Secret) -> Option<String> {
    let pem = secret.data.as_ref()?.get("tls.crt")?.0.clone();
    let der = rustls_pki_types::CertificateDer::pem_slice_iter(&pem)
        .next()?
        .ok()?;
    Some(testkit::pki::serial_of(&der))
}

/// One server, as its clients reach it.
#[derive(Clone)]
pub struct Server {
    pub pod: String,
    /// The name its certificate is checked for.
    name: String,
    address: SocketAddr,
    tls: Tls,
    restarts: i32,
    start_ticks: u64,
}

/// What identifies a running memcached: its pod, its container's restart count and its
/// process's start time.
pub type Identity = (String, i32, u64);

impl Server {
    pub fn identity(&self) -> Identity {
        (self.pod.clone(), self.restarts, self.start_ticks)
    }

    /// The same server, reached trusting `ca_pem` and presenting `client`.
    pub fn presenting(&self, ca_pem: &str, client: &Leaf) -> Server {
        Server {
            tls: Tls::new(ca_pem, &self.name, Some(client)),
            ..self.clone()
        }
    }

    /// A fresh TLS connection, authenticated.
    pub async fn connect(&self) -> Result<Connection, String> {
        let mut connection = Connection::open(self.address, Some(&self.tls)).await?;
        let answer = connection.authenticate(USER, PASSWORD).await?;
        if answer != "STORED\r\n" {
            return Err(format!("{}: authentication answered {answer:?}", self.pod));
        }
        Ok(connection)
    }
}

/// The serial the server presents to a new connection.
pub async fn presented(server: &Server) -> Result<String, String> {
    let connection = server.connect().await?;
    connection
        .serial
        .ok_or_else(|| format!("{} presented no certificate", server.pod))
}

async fn pods(env: &Env, namespace: &str) -> Vec<Pod> {
    let mut pods = env
        .pods(namespace, "app.kubernetes.io/instance=cache")
        .await;
    pods.sort_by_key(|p| p.metadata.name.clone());
    pods
}

pub fn identity_of(pod: &Pod) -> Identity {
    let name = pod.metadata.name.clone().unwrap_or_default();
    let restarts = pod
        .status
        .as_ref()
        .and_then(|s| s.container_statuses.as_ref())
        .and_then(|statuses| statuses.iter().find(|c| c.name == "memcached"))
        .map_or(-1, |c| c.restart_count);
    let pid = memcached_pid(pod)
        .unwrap_or_else(|error| panic!("no memcached process in {name}: {error}"));
    let ticks = start_ticks(pid)
        .unwrap_or_else(|error| panic!("no start time of {name}'s memcached: {error}"));
    (name, restarts, ticks)
}

/// The servers of the Memcached `cache`, trusting `ca_pem` and presenting `client`.
pub async fn servers(env: &Env, namespace: &str, ca_pem: &str, client: &Leaf) -> Vec<Server> {
    pods(env, namespace)
        .await
        .iter()
        .map(|pod| {
            let (pod_name, restarts, start_ticks) = identity_of(pod);
            let name = format!("{pod_name}.cache.{namespace}.svc");
            Server {
                tls: Tls::new(ca_pem, &name, Some(client)),
                name,
                address: pod_address(pod, 11211),
                pod: pod_name,
                restarts,
                start_ticks,
            }
        })
        .collect()
}

/// What identifies each running memcached of the Memcached `cache` now.
pub async fn servers_now(env: &Env, namespace: &str) -> Vec<Identity> {
    pods(env, namespace).await.iter().map(identity_of).collect()
}
