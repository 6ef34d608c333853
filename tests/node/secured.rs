//! memcached secured as a production team runs it, on real pods: TLS on the client port from a
//! Secret, client certificates required, the auth file's credentials required, a plaintext port
//! beside TLS for migrating clients, and a graceful shutdown; then TLS alone. Every client
//! connects from this machine to the pod's own address, and each refusal is one the server
//! itself makes.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Instant;

use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::{Pod, Secret};
use kube::api::{Api, ObjectMeta, PostParams};
use serde_json::{Value, json};
use testkit::memcache::{Connection, Tls};
use testkit::pki::{Ca, Leaf};

use crate::cluster::{Env, WAIT, eventually, pod_address};

const USER: &str = "alice";
const PASSWORD: &str = "wonderland-7f3a";

pub async fn tls_client_certificates_and_credentials_are_required_of_every_client(env: Arc<Env>) {
    let namespace = env.create_namespace("secured").await;
    let ca = Ca::root();
    let server = ca.serving_for(&[&format!("*.secured.{namespace}.svc")]);
    create_secret(&env, &namespace, "secured-tls", tls_data(&server, &ca)).await;
    create_secret(
        &env,
        &namespace,
        "secured-client-tls",
        client_data(&ca.client("secured-sidecars")),
    )
    .await;
    create_auth_secret(&env, &namespace, "secured-auth", USER, PASSWORD).await;
    let started = Instant::now();
    let status = create_and_wait(
        &env,
        &namespace,
        "secured",
        json!({
            "tls": {
                "secretName": "secured-tls",
                "clientAuth": "Require",
                "clientSecretName": "secured-client-tls",
                "plaintextPort": 11212,
            },
            "auth": { "secretName": "secured-auth" },
            "gracefulShutdown": { "preStopDelaySeconds": 2, "terminationGracePeriodSeconds": 10 },
        }),
    )
    .await;
    eprintln!(
        "secured: ready and reported in {:.1} s; status.tls {} status.auth {}",
        started.elapsed().as_secs_f64(),
        status["tls"],
        status["auth"]
    );
    assert_eq!(
        status["tls"],
        json!({ "secretName": "secured-tls", "clientAuth": "Require", "plaintextPort": 11212 })
    );
    assert_eq!(status["auth"], json!({ "secretName": "secured-auth" }));

    let pod = pod(&env, &namespace, "secured-0").await;
    let tls_port = pod_address(&pod, 11211);
    let plain_port = pod_address(&pod, 11212);
    let server_name = format!("secured-0.secured.{namespace}.svc");
    let mut refused = 0;

    // Plaintext on the TLS port: the server never answers a memcached command there.
    let plain_on_tls = first_reply(tls_port, None).await;
    eprintln!("plaintext on the TLS port: {plain_on_tls:?}");
    assert!(
        !matches!(&plain_on_tls, Ok(reply) if reply.starts_with("VERSION")),
        "a plaintext client is refused on the TLS port: {plain_on_tls:?}"
    );
    refused += 1;

    // TLS without a client certificate, and with one from another CA: refused.
    let anonymous = Tls::new(&ca.pem, &server_name, None);
    let no_certificate = first_reply(tls_port, Some(&anonymous)).await;
    eprintln!("TLS without a client certificate: {no_certificate:?}");
    assert!(no_certificate.is_err(), "{no_certificate:?}");
    refused += 1;
    let stranger = Ca::root().serving_for(&["memcached-client"]);
    let foreign = Tls::new(&ca.pem, &server_name, Some(&stranger));
    let foreign_certificate = first_reply(tls_port, Some(&foreign)).await;
    eprintln!("TLS with a certificate of another CA: {foreign_certificate:?}");
    assert!(foreign_certificate.is_err(), "{foreign_certificate:?}");
    refused += 1;

    // A client certificate signed by the Secret's CA: the handshake passes, and the auth file
    // decides.
    let client = ca.serving_for(&["memcached-client"]);
    let trusted = Tls::new(&ca.pem, &server_name, Some(&client));
    let mut connection = Connection::open(tls_port, Some(&trusted))
        .await
        .expect("a TLS connection with a client certificate");
    assert_eq!(
        connection.serial.as_deref(),
        Some(server.serial.as_str()),
        "the server presents the Secret's certificate"
    );
    let unauthenticated = connection.get("greeting").await;
    eprintln!("TLS with a client certificate, no credentials: {unauthenticated:?}");
    assert!(
        matches!(&unauthenticated, Err(e) if e.contains("CLIENT_ERROR unauthenticated")),
        "{unauthenticated:?}"
    );
    refused += 1;
    let mut connection = Connection::open(tls_port, Some(&trusted))
        .await
        .expect("a TLS connection with a client certificate");
    let wrong = connection.authenticate(USER, "not-the-password").await;
    eprintln!("TLS with a wrong password: {wrong:?}");
    assert!(
        !matches!(&wrong, Ok(reply) if reply == "STORED\r\n"),
        "{wrong:?}"
    );
    refused += 1;
    let mut connection = Connection::open(tls_port, Some(&trusted))
        .await
        .expect("a TLS connection with a client certificate");
    assert_eq!(
        connection.authenticate(USER, PASSWORD).await.as_deref(),
        Ok("STORED\r\n")
    );
    assert_eq!(
        connection.set("greeting", "hello").await.as_deref(),
        Ok("STORED\r\n")
    );
    assert_eq!(
        connection.get("greeting").await,
        Ok(Some("hello".to_string()))
    );

    // The plaintext port serves the same items, to authenticated clients only.
    let mut plain = Connection::open(plain_port, None)
        .await
        .expect("a plaintext connection to the plaintext port");
    let unauthenticated = plain.get("greeting").await;
    assert!(
        matches!(&unauthenticated, Err(e) if e.contains("CLIENT_ERROR unauthenticated")),
        "{unauthenticated:?}"
    );
    refused += 1;
    let mut plain = Connection::open(plain_port, None)
        .await
        .expect("a plaintext connection to the plaintext port");
    assert_eq!(
        plain.authenticate(USER, PASSWORD).await.as_deref(),
        Ok("STORED\r\n")
    );
    assert_eq!(plain.get("greeting").await, Ok(Some("hello".to_string())));
    eprintln!(
        "secured: {refused} clients refused as they should be; 2 authenticated clients set and read the item"
    );

    // The shutdown: a preStop sleep, and a grace period that outlasts it.
    let spec = pod.spec.expect("a pod spec");
    assert_eq!(spec.termination_grace_period_seconds, Some(10));
    let sleep = spec.containers[0]
        .lifecycle
        .as_ref()
        .and_then(|l| l.pre_stop.as_ref()?.sleep.as_ref())
        .map(|s| s.seconds);
    assert_eq!(sleep, Some(2));
}

pub async fn tls_alone_serves_tls_clients_and_refuses_plaintext(env: Arc<Env>) {
    let namespace = env.create_namespace("tls-only").await;
    let ca = Ca::root();
    let server = ca.serving_for(&[&format!("*.cache.{namespace}.svc")]);
    create_secret(&env, &namespace, "cache-tls", tls_data(&server, &ca)).await;
    let status = create_and_wait(
        &env,
        &namespace,
        "cache",
        json!({ "tls": { "secretName": "cache-tls" } }),
    )
    .await;
    assert_eq!(
        status["tls"],
        json!({ "secretName": "cache-tls", "clientAuth": "None" })
    );
    assert_eq!(status.get("auth"), None);
    let pod = pod(&env, &namespace, "cache-0").await;
    let address = pod_address(&pod, 11211);
    let tls = Tls::new(&ca.pem, &format!("cache-0.cache.{namespace}.svc"), None);
    let mut connection = Connection::open(address, Some(&tls))
        .await
        .expect("a TLS connection");
    assert_eq!(
        connection.serial.as_deref(),
        Some(server.serial.as_str()),
        "the server presents the Secret's certificate"
    );
    assert_eq!(connection.set("k", "v").await.as_deref(), Ok("STORED\r\n"));
    assert_eq!(connection.get("k").await, Ok(Some("v".to_string())));
    let plain = first_reply(address, None).await;
    eprintln!("TLS alone: a TLS client set and read an item; plaintext got {plain:?}");
    assert!(
        !matches!(&plain, Ok(reply) if reply.starts_with("VERSION")),
        "a plaintext client is refused: {plain:?}"
    );
    // No plaintext port is opened when none is asked for.
    let closed = Connection::open(pod_address(&pod, 11212), None).await;
    assert!(
        closed.is_err(),
        "nothing listens on 11212: {:?}",
        closed.is_ok()
    );
}

/// The Secret data of the sidecars' client certificate: the certificate and its key.
pub fn client_data(client: &Leaf) -> BTreeMap<&'static str, String> {
    BTreeMap::from([
        ("tls.crt", client.cert_pem.clone()),
        ("tls.key", client.key_pem.clone()),
    ])
}

/// The Secret data of a TLS Secret: the serving certificate, its key, and the CA.
pub fn tls_data(server: &Leaf, ca: &Ca) -> BTreeMap<&'static str, String> {
    BTreeMap::from([
        ("tls.crt", server.cert_pem.clone()),
        ("tls.key", server.key_pem.clone()),
        ("ca.crt", ca.pem.clone()),
    ])
}

/// Creates the Secret `name` holding an auth file with one user's credentials.
pub async fn create_auth_secret(
    env: &Env,
    namespace: &str,
    name: &str,
    user: &str,
    password: &str,
) {
    let authfile = format!("{user}:{password}\n");
    create_secret(
        env,
        namespace,
        name,
        BTreeMap::from([("authfile", authfile)]),
    )
    .await;
}

pub async fn create_secret(
    env: &Env,
    namespace: &str,
    name: &str,
    data: BTreeMap<&'static str, String>,
) {
    let secrets: Api<Secret> = Api::namespaced(env.client.clone(), namespace);
    let secret = Secret {
        metadata: ObjectMeta {
            name: Some(name.into()),
            ..ObjectMeta::default()
        },
        data: Some(
            data.into_iter()
                .map(|(key, value)| (key.to_string(), ByteString(value.into_bytes())))
                .collect(),
        ),
        ..Secret::default()
    };
    if let Err(error) = secrets.create(&PostParams::default(), &secret).await {
        panic!("cannot create Secret {namespace}/{name}: {error}");
    }
}

/// Creates a Memcached of one small server with `extra` merged into its spec, and waits for
/// its server to be ready and its status to say so; returns the status.
pub async fn create_and_wait(env: &Env, namespace: &str, name: &str, extra: Value) -> Value {
    let mut spec = json!({
        "replicas": 1,
        "memcached": { "memoryLimitMB": 16 },
        "resources": { "limits": { "memory": "64Mi" } },
    });
    for (key, value) in extra.as_object().expect("an object").clone() {
        spec[key] = value;
    }
    let memcacheds = env.create_memcached(namespace, name, spec).await;
    eventually(
        &format!("{name}'s server ready and reported"),
        WAIT,
        || async {
            let status = memcacheds.get(name).await.ok()?.data["status"].clone();
            (status["readyReplicas"] == json!(1) && status.get("tls").is_some()).then_some(status)
        },
    )
    .await
}

pub async fn pod(env: &Env, namespace: &str, name: &str) -> Pod {
    let pods: Api<Pod> = Api::namespaced(env.client.clone(), namespace);
    pods.get(name)
        .await
        .unwrap_or_else(|error| panic!("cannot read pod {namespace}/{name}: {error}"))
}

/// Connects (over TLS when `tls` is given) and asks for the version: the server's first reply,
/// or why there was none.
async fn first_reply(address: SocketAddr, tls: Option<&Tls>) -> Result<String, String> {
    let mut connection = Connection::open(address, tls).await?;
    connection.command("version\r\n").await
}
