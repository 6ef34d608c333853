//! The sidecars' own client certificate, as a user supplies it, on real pods: one whose
//! extended key usage allows server authentication only (memcached refuses it from a client)
//! stops the certificate refresher at its start, which says why in its termination message,
//! and the Memcached reports it (`Degraded`, reason `SidecarStopped`, with that message, and a
//! warning Event), not only a failing container. The kubelet starts the containers after a
//! native sidecar once it runs, so whether the new pod's memcached started before the
//! refresher stopped is a race the kubelet decides; either way, once the Secret holds a
//! certificate for clients, the refresher starts and keeps running, the server is ready and
//! the report clears, and a memcached that had started is the same process.

use std::sync::Arc;
use std::time::{Duration, Instant};

use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::api::events::v1::Event;
use kube::api::{Api, ListParams, Patch, PatchParams};
use serde_json::{Value, json};
use testkit::containers::memcached_pid;
use testkit::pki::Ca;

use crate::cluster::{Env, WAIT, eventually};
use crate::rotation::identity_of;
use crate::secured::{client_data, create_secret, pod, tls_data};

/// How long the fixed certificate may take to clear the report: the kubelet's sync period
/// (about a minute) before the files change in the pod, and the refresher's restart back-off
/// (doubling from 10 s, at most 5 minutes; it has stopped a few times by then).
const RECOVERY_LIMIT: Duration = Duration::from_secs(360);
/// How long the fixed refresher is watched to keep running: more than its restart back-off
/// after one or two stops (10 s, then 20 s).
const STEADY: Duration = Duration::from_secs(25);

/// The Degraded condition of `name`, when it matches `wanted`.
async fn degraded_when(
    api: &Api<kube::api::DynamicObject>,
    name: &str,
    wanted: impl Fn(&Value) -> bool,
) -> Option<Value> {
    let object = api.get(name).await.ok()?;
    let condition = object.data["status"]["conditions"]
        .as_array()?
        .iter()
        .find(|c| c["type"] == "Degraded")?
        .clone();
    wanted(&condition).then_some(condition)
}

pub async fn a_client_certificate_for_servers_only_is_reported_on_the_memcached(env: Arc<Env>) {
    let namespace = env.create_namespace("identity").await;
    let ca = Ca::root();
    let server = ca.serving_for(&[&format!("*.identity.{namespace}.svc")]);
    create_secret(&env, &namespace, "identity-tls", tls_data(&server, &ca)).await;
    create_secret(
        &env,
        &namespace,
        "identity-client-tls",
        client_data(&ca.server_only()),
    )
    .await;
    let started = Instant::now();
    let memcacheds = env
        .create_memcached(
            &namespace,
            "identity",
            json!({
                "replicas": 1,
                "memcached": { "memoryLimitMB": 16 },
                "resources": { "limits": { "memory": "64Mi" } },
                "tls": {
                    "secretName": "identity-tls",
                    "clientAuth": "Require",
                    "clientSecretName": "identity-client-tls",
                },
            }),
        )
        .await;
    let reported = eventually(
        "the Memcached reports the refresher stopped",
        WAIT,
        || async {
            degraded_when(&memcacheds, "identity", |c| {
                c["status"] == "True" && c["reason"] == "SidecarStopped"
            })
            .await
        },
    )
    .await;
    let message = reported["message"].as_str().unwrap_or_default().to_string();
    eprintln!(
        "identity: reported {:.1} s after the create: {message}",
        started.elapsed().as_secs_f64()
    );
    for said in [
        "identity-0: the sidecar cert-refresher stopped",
        "/etc/memcached/client-tls/tls.crt",
        "allows serverAuth, not client authentication (clientAuth)",
    ] {
        assert!(message.contains(said), "{said:?} in {message:?}");
    }
    let events: Api<Event> = Api::namespaced(env.client.clone(), &namespace);
    let warned = eventually("a SidecarStopped warning Event", WAIT, || async {
        let listed = events.list(&ListParams::default()).await.ok()?;
        listed
            .items
            .into_iter()
            .find(|e| e.reason.as_deref() == Some("SidecarStopped"))
    })
    .await;
    assert_eq!(warned.type_.as_deref(), Some("Warning"));
    let memcached_state = pod(&env, &namespace, "identity-0")
        .await
        .status
        .and_then(|s| s.container_statuses)
        .unwrap_or_default()
        .into_iter()
        .find(|c| c.name == "memcached")
        .and_then(|c| c.state);
    eprintln!("identity: memcached's container meanwhile: {memcached_state:?}");
    // Started or not: the kubelet starts it once the refresher runs, which it did for a moment.
    let memcached_before = if memcached_state.is_some_and(|state| state.running.is_some()) {
        // Its supervisor, the container's first process, starts memcached a moment later.
        let started = eventually(
            "memcached's process in the started container",
            WAIT,
            || async {
                let pod = pod(&env, &namespace, "identity-0").await;
                memcached_pid(&pod).map(|_| pod)
            },
        )
        .await;
        Some(identity_of(&started))
    } else {
        None
    };

    // A certificate for clients, into the same Secret: the refresher runs again.
    let fixed = client_data(&ca.client("identity-sidecars"));
    let secrets: Api<Secret> = Api::namespaced(env.client.clone(), &namespace);
    let data: serde_json::Map<String, Value> = fixed
        .into_iter()
        .map(|(key, value)| {
            let encoded = serde_json::to_value(ByteString(value.into_bytes())).expect("base64");
            (key.to_string(), encoded)
        })
        .collect();
    secrets
        .patch(
            "identity-client-tls",
            &PatchParams::default(),
            &Patch::Merge(json!({ "data": data })),
        )
        .await
        .expect("the client Secret is fixed");
    let fixed_at = Instant::now();
    let cleared = eventually(
        "the report clears once the refresher runs again",
        RECOVERY_LIMIT,
        || async { degraded_when(&memcacheds, "identity", |c| c["status"] == "False").await },
    )
    .await;
    eventually("the server ready", RECOVERY_LIMIT, || async {
        let object = memcacheds.get("identity").await.ok()?;
        (object.data["status"]["readyReplicas"] == json!(1)).then_some(())
    })
    .await;
    eprintln!(
        "identity: cleared {:.1} s after the Secret was fixed: {}",
        fixed_at.elapsed().as_secs_f64(),
        cleared["reason"]
    );
    // Running for good, not between two stops: no further restart, and the report stays clear.
    let restarts = || async {
        let pod = pod(&env, &namespace, "identity-0").await;
        pod.status
            .and_then(|s| s.init_container_statuses)
            .unwrap_or_default()
            .into_iter()
            .find(|c| c.name == "cert-refresher")
            .map(|c| (c.restart_count, c.ready))
    };
    let running = restarts().await;
    tokio::time::sleep(STEADY).await;
    assert_eq!(restarts().await, running, "the refresher keeps running");
    assert_eq!(running.map(|(_, ready)| ready), Some(true));
    assert!(
        degraded_when(&memcacheds, "identity", |c| c["status"] == "False")
            .await
            .is_some(),
        "the report stays clear"
    );
    if let Some(before) = memcached_before {
        assert_eq!(
            identity_of(&pod(&env, &namespace, "identity-0").await),
            before,
            "the memcached that had started kept running through the refresher's stops"
        );
    }
}
