//! A CA rotation through cert-manager refuses no client: the servers of a two-server Memcached
//! require client certificates and credentials (`clientAuth: Require`, `spec.auth`) and
//! verify client certificates against a ConfigMap of CAs (`spec.tls.clientCA`, a trust
//! bundle), not against the `ca.crt` cert-manager writes. Their certificate and the sidecars'
//! come from the CA issuer `cache-ca`, first signing with the CA `ca-one`. A client loop sets
//! and reads items over fresh TLS connections throughout, presenting the sidecars' client
//! certificate. The rotation takes the documented steps:
//!
//! 1. the new CA `ca-two` joins `ca-one` in the ConfigMap: every server then accepts a client
//!    certificate of `ca-two`, which it refused before;
//! 2. the issuer signs with `ca-two` and both Certificates are renewed, the sidecars' (and the
//!    loop's) client certificate first, the order in which a server trusting only `ca.crt`
//!    would refuse it: every server then presents a certificate of `ca-two`.
//!
//! No operation of the loop fails, every item set before is still there, and no memcached
//! restarted (container restart counts and process start times).
//!
//! 3. `ca-one` is withdrawn from the ConfigMap. memcached adds CAs on `refresh_certs` and
//!    removes none, so the operator asks each server in turn, by an annotation of its pod, to
//!    restart in place; its supervisor does, warm, once its `ca.crt` lacks `ca-one`. Never
//!    more than one server is down at a time; each is then in the same pod with one restart
//!    more, says why in its termination message, refuses `ca-one` and holds its items (its
//!    refresher leaves `memcached_client_cas_withdrawn_trusted` to the supervisor); the status's
//!    `clientCATrust` lists no withdrawn CA, and Events say each step.

use std::sync::Arc;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::{ConfigMap, Pod, Secret};
use kube::api::{Api, Patch, PatchParams, PostParams};
use serde_json::json;

use crate::cluster::{Env, WAIT, eventually, memcached_status, pod_address};
use crate::metrics::{scrape, value};
use crate::rotation::{
    ClientLoop, Identity, PASSWORD, Server, USER, create_cas, create_issuer, issuers, leaf_of,
    leaf_serial, missing_items, nothing_lost, presented, servers, servers_now, store_items,
};
use crate::secured::create_auth_secret;

/// Items set before the rotation, spread over both servers.
const ITEMS: usize = 100;
/// How long a change of a mounted file may take to reach every server: the kubelet's sync
/// period (about a minute) before the files change in the pods, the refresher's interval,
/// and margin.
const FILE_LIMIT: Duration = Duration::from_secs(240);

pub async fn a_ca_rotation_through_cert_manager_refuses_no_client(env: Arc<Env>) {
    let namespace = env.create_namespace("ca-rotation").await;
    create_cas(&env, &namespace, &["ca-one", "ca-two"]).await;
    create_issuer(&env, &namespace, "cache-ca", "ca-one").await;
    // An issuer of the new CA alone, for a probe that tells whether a server trusts it.
    create_issuer(&env, &namespace, "ca-two", "ca-two").await;
    let certificates = testkit::certificates::certificates(&env.client, &namespace);
    certificates
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({
                "apiVersion": "cert-manager.io/v1", "kind": "Certificate",
                "metadata": { "name": "probe-two" },
                "spec": {
                    "commonName": "probe-two", "secretName": "probe-two",
                    "usages": ["client auth"],
                    "privateKey": { "algorithm": "ECDSA", "size": 256 },
                    "issuerRef": { "name": "ca-two", "kind": "Issuer" },
                },
            }))
            .expect("a Certificate"),
        )
        .await
        .expect("the probe's Certificate is created");
    let secrets: Api<Secret> = Api::namespaced(env.client.clone(), &namespace);
    let ca_of = |name: &'static str| {
        let secrets = secrets.clone();
        async move {
            eventually(
                &format!("cert-manager issues the CA {name}"),
                WAIT,
                || async {
                    let secret = secrets.get(name).await.ok()?;
                    String::from_utf8(secret.data?.get("tls.crt")?.0.clone()).ok()
                },
            )
            .await
        }
    };
    let (one, two) = (ca_of("ca-one").await, ca_of("ca-two").await);
    let both = format!("{one}{two}");

    let maps: Api<ConfigMap> = Api::namespaced(env.client.clone(), &namespace);
    maps.create(
        &PostParams::default(),
        &serde_json::from_value(json!({
            "metadata": { "name": "cache-trust" },
            "data": { "ca.crt": one },
        }))
        .expect("a ConfigMap"),
    )
    .await
    .expect("the trust bundle is created");
    create_auth_secret(&env, &namespace, "cache-auth", USER, PASSWORD).await;
    let spec = json!({
        "replicas": 2,
        "memcached": { "memoryLimitMB": 64, "warmRestart": true },
        "resources": { "limits": { "memory": "128Mi" } },
        "tls": {
            "secretName": "cache-tls",
            "issuerRef": { "name": "cache-ca" },
            "clientAuth": "Require",
            "clientCA": { "configMapName": "cache-trust" },
        },
        "auth": { "secretName": "cache-auth" },
    });
    let memcacheds = env.create_memcached(&namespace, "cache", spec).await;
    eventually("both servers ready", WAIT, || async {
        let object = memcacheds.get("cache").await.ok()?;
        (object.data["status"]["readyReplicas"] == json!(2)).then_some(())
    })
    .await;
    let status = memcacheds.get("cache").await.expect("the Memcached");
    assert_eq!(
        status.data["status"]["tls"]["clientCA"],
        json!({ "configMapName": "cache-trust" }),
        "the status names the client CAs in force"
    );
    let issued = |name: &'static str| {
        let secrets = secrets.clone();
        async move {
            eventually(&format!("cert-manager issues {name}"), WAIT, || async {
                leaf_of(&secrets.get(name).await.ok()?)
            })
            .await
        }
    };
    let client = issued("cache-client-tls").await;
    let probe = issued("probe-two").await;
    let first = leaf_serial(&secrets.get("cache-tls").await.expect("cache-tls"))
        .expect("a leaf in cache-tls");

    // The clients verify the servers against both CAs, as the bundle will hold them.
    let servers = servers(&env, &namespace, &both, &client).await;
    let before: Vec<Identity> = servers.iter().map(Server::identity).collect();
    let probes: Vec<Server> = servers
        .iter()
        .map(|s| s.presenting(&both, &probe))
        .collect();
    for (server, probe) in servers.iter().zip(&probes) {
        assert_eq!(presented(server).await.as_deref(), Ok(first.as_str()));
        assert!(
            probe.connect().await.is_err(),
            "{} refuses a client certificate of ca-two before the bundle holds it",
            server.pod
        );
    }
    store_items(&servers, ITEMS).await;
    let looping = ClientLoop::start(servers.clone());

    // 1. The new CA joins the bundle.
    let started = Instant::now();
    set_bundle(&maps, &both).await;
    let mut trusted = Vec::new();
    for (server, probe) in servers.iter().zip(&probes) {
        let took = eventually(
            &format!("{} accepts a client certificate of ca-two", server.pod),
            FILE_LIMIT,
            || async { probe.connect().await.ok().map(|_| started.elapsed()) },
        )
        .await;
        trusted.push(format!("{} at {:.1} s", server.pod, took.as_secs_f64()));
    }

    // 2. The issuer signs with the new CA; the client certificate is renewed first.
    let switched = Instant::now();
    issuers(&env, &namespace)
        .patch(
            "cache-ca",
            &PatchParams::default(),
            &Patch::Merge(json!({ "spec": { "ca": { "secretName": "ca-two" } } })),
        )
        .await
        .expect("the issuer signs with ca-two");
    let of_two = |name: &'static str| {
        let (secrets, two) = (secrets.clone(), two.clone());
        async move {
            eventually(&format!("{name} is signed by ca-two"), WAIT, || async {
                let secret = secrets.get(name).await.ok()?;
                let ca = String::from_utf8(secret.data.as_ref()?.get("ca.crt")?.0.clone()).ok()?;
                (ca.trim() == two.trim())
                    .then(|| leaf_of(&secret))
                    .flatten()
            })
            .await
        }
    };
    // cert-manager may still be judging the issuer: ask until the renewal is signed by ca-two.
    eventually("the issuer cache-ca is ready with ca-two", WAIT, || async {
        let issuer = issuers(&env, &namespace).get("cache-ca").await.ok()?;
        let ready = issuer.data["status"]["conditions"]
            .as_array()?
            .iter()
            .any(|c| c["type"] == "Ready" && c["status"] == "True");
        let generation = issuer.metadata.generation;
        let observed = issuer.data["status"]["conditions"][0]["observedGeneration"].as_i64();
        (ready && observed == generation).then_some(())
    })
    .await;
    testkit::certificates::renew(&certificates, "cache-client")
        .await
        .expect("cert-manager is asked to renew cache-client");
    let renewed_client = of_two("cache-client-tls").await;
    let renewed_servers: Vec<Server> = servers
        .iter()
        .map(|s| s.presenting(&both, &renewed_client))
        .collect();
    looping.reach(renewed_servers.clone());
    testkit::certificates::renew(&certificates, "cache")
        .await
        .expect("cert-manager is asked to renew cache");
    let renewed = of_two("cache-tls").await.serial;
    let mut served = Vec::new();
    for server in &servers {
        let took = eventually(
            &format!("{} presents serial {renewed} of ca-two", server.pod),
            FILE_LIMIT,
            || async { (presented(server).await.ok()? == renewed).then(|| switched.elapsed()) },
        )
        .await;
        served.push(format!("{} at {:.1} s", server.pod, took.as_secs_f64()));
    }
    // A few more seconds of the loop with certificates of the new CA on both sides.
    tokio::time::sleep(Duration::from_secs(3)).await;
    let (done, failures) = looping.stop().await;

    let missing = missing_items(&renewed_servers, ITEMS).await;
    let after = servers_now(&env, &namespace).await;
    eprintln!(
        "CA rotation: ca-two trusted by {}; certificates of ca-two served by {} after the \
         issuer changed; client loop {done} operations, {} failed; {} of {ITEMS} items set \
         before are there after; restart counts and memcached start times before {before:?}, \
         after {after:?}",
        trusted.join(", "),
        served.join(", "),
        failures.len(),
        ITEMS - missing.len(),
    );
    nothing_lost(done, &failures, &missing, &before, &after);

    // 3. The old CA is withdrawn. memcached's refresh_certs adds CAs and removes none, so the
    // operator asks each server, one at a time while the other is ready, to restart in place
    // (warm) once its ca.crt lacks ca-one; the restart drops ca-one and keeps the items.
    let pods: Api<Pod> = Api::namespaced(env.client.clone(), &namespace);
    let mut uids = Vec::new();
    for server in &servers {
        uids.push(pods.get(&server.pod).await.expect("the pod").metadata.uid);
    }
    let withdrawn_at = Instant::now();
    set_bundle(&maps, &two).await;
    let watching = Unready::watch(
        pods.clone(),
        servers.iter().map(|s| s.pod.clone()).collect(),
    );
    let status = eventually(
        "every server restarted since ca-one was withdrawn, as the status says",
        2 * FILE_LIMIT,
        || async {
            let status = memcacheds.get("cache").await.ok()?.data["status"].clone();
            let trust = &status["clientCATrust"];
            (trust["withdrawn"].as_array().is_none_or(Vec::is_empty)
                && trust["restartingSince"].is_null()
                && trust["cas"].as_array()?.len() == 1)
                .then_some(status)
        },
    )
    .await;
    let rolled = withdrawn_at.elapsed();
    let most_unready = watching.stop().await;
    let events = crate::warm_restart::events_of(&env, &namespace, "cache").await;
    let old_clients: Vec<Server> = servers
        .iter()
        .map(|s| s.presenting(&both, &client))
        .collect();
    let mut restarts = Vec::new();
    for (i, old_client) in old_clients.iter().enumerate() {
        let name = &old_client.pod;
        let pod = pods.get(name).await.expect("the pod");
        let memcached = memcached_status(&pod).expect("memcached's status");
        let said = memcached
            .last_state
            .as_ref()
            .and_then(|state| state.terminated.as_ref())
            .and_then(|ended| ended.message.clone())
            .unwrap_or_default();
        let refused = old_client.connect().await.is_err();
        // The supervisor counts the withdrawn CAs here (it knows the file memcached started
        // with); the refresher serves no count.
        let refresher_counts = withdrawn_trusted(&pod).await;
        let reader = &renewed_servers[i];
        let mut kept = 0;
        for item in (i..ITEMS).step_by(servers.len()) {
            if let Ok(mut connection) = reader.connect().await
                && connection.get(&format!("before-{item}")).await
                    == Ok(Some(format!("value-{item}")))
            {
                kept += 1;
            }
        }
        restarts.push((
            name.clone(),
            pod.metadata.uid == uids[i],
            memcached.restart_count - before[i].1,
            refused,
            kept,
            said,
            refresher_counts,
        ));
    }
    eprintln!(
        "CA withdrawn: every server restarted {:.1} s after the bundle changed, at most \
         {most_unready} server(s) not ready at once; (pod, same pod, restarts, ca-one refused \
         after, items kept of {}, termination message, the refresher's count): {restarts:?}; status.clientCATrust \
         {}; Events {events:?}",
        rolled.as_secs_f64(),
        ITEMS / servers.len(),
        status["clientCATrust"],
    );
    assert_eq!(most_unready, 1, "the servers restarted one at a time");
    for (name, same_pod, restarted, refused, kept, said, refresher_counts) in &restarts {
        assert_eq!(
            refresher_counts.as_ref().map_err(String::as_str),
            Err("no memcached_client_cas_withdrawn_trusted"),
            "{name}'s refresher leaves the count to the supervisor"
        );
        assert!(*same_pod, "{name} restarted in place, in the same pod");
        assert_eq!(*restarted, 1, "{name}'s memcached restarted once");
        assert!(
            said.contains(status["clientCATrust"]["sha256"].as_str().unwrap_or("?")),
            "{name}'s memcached says it restarted for the new bundle: {said}"
        );
        assert!(
            *refused,
            "{name} refuses a client certificate of ca-one once restarted"
        );
        assert_eq!(
            *kept,
            ITEMS / servers.len(),
            "{name} kept its items through the warm restart"
        );
    }
    for server in &servers {
        assert!(
            events
                .iter()
                .any(|e| e.starts_with("RestartingForClientCA: ")
                    && e.contains(&format!("asked {} ", server.pod))),
            "an Event says {} was asked to restart: {events:?}",
            server.pod
        );
    }
    assert!(
        events.iter().any(|e| e.starts_with("ClientCAsDropped: ")),
        "an Event says the withdrawn CA is trusted no more: {events:?}"
    );
}

/// Samples which of a Memcached's servers are not ready, from the start of a roll to its end.
struct Unready {
    stop: tokio::sync::oneshot::Sender<()>,
    most: tokio::task::JoinHandle<usize>,
}

impl Unready {
    /// Samples the memcached containers of `names` every 200 ms.
    fn watch(pods: Api<Pod>, names: Vec<String>) -> Self {
        let (stop, mut stopped) = tokio::sync::oneshot::channel();
        let most = tokio::spawn(async move {
            let mut most = 0;
            loop {
                let mut unready = 0;
                for name in &names {
                    let ready = pods
                        .get(name)
                        .await
                        .ok()
                        .and_then(|pod| memcached_status(&pod).map(|m| m.ready));
                    if ready != Some(true) {
                        unready += 1;
                    }
                }
                most = most.max(unready);
                tokio::select! {
                    _ = &mut stopped => return most,
                    () = tokio::time::sleep(Duration::from_millis(200)) => {}
                }
            }
        });
        Self { stop, most }
    }

    /// The most servers found not ready at once.
    async fn stop(self) -> usize {
        let _ = self.stop.send(());
        self.most.await.expect("the sampler ran")
    }
}

/// Has the trust bundle `cache-trust` hold the CAs of `pem`.
async fn set_bundle(maps: &Api<ConfigMap>, pem: &str) {
    if let Err(error) = maps
        .patch(
            "cache-trust",
            &PatchParams::default(),
            &Patch::Merge(json!({ "data": { "ca.crt": pem } })),
        )
        .await
    {
        panic!("cannot change the trust bundle: {error}");
    }
}

/// How many client CAs withdrawn from `ca.crt` the server of `pod` may still trust, as its
/// certificate refresher's metrics say.
async fn withdrawn_trusted(pod: &Pod) -> Result<f64, String> {
    let port = pod
        .spec
        .as_ref()
        .and_then(|spec| spec.init_containers.as_ref())
        .and_then(|init| init.iter().find(|c| c.name == "cert-refresher"))
        .and_then(|refresher| refresher.ports.as_ref()?.first().map(|p| p.container_port))
        .ok_or("no cert-refresher port in the pod")?;
    let port = u16::try_from(port).map_err(|_| format!("{port} is no port"))?;
    let text = scrape(pod_address(pod, port)).await?;
    value(&text, "memcached_client_cas_withdrawn_trusted")
        .ok_or_else(|| "no memcached_client_cas_withdrawn_trusted".into())
}
