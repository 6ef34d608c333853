//! Changed credentials reach a running memcached without a restart and without losing an
//! item: the auth Secret of a server is rewritten with new credentials in place of the old
//! ones; the kubelet brings the new file into the pod, the supervisor memcached runs under
//! sends it SIGHUP, and memcached rereads its auth file. The new credentials are
//! then accepted and the old ones refused, by the same memcached process (container restart
//! count and process start time), with every item set before still there.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::Secret;
use kube::api::{Api, Patch, PatchParams};
use serde_json::json;
use testkit::memcache::Connection;

use crate::cluster::{Env, WAIT, eventually, pod_address};
use crate::rotation::identity_of;
use crate::secured::{create_secret, pod};

const ITEMS: usize = 50;
/// How long new credentials may take: the kubelet's sync period (about a minute) before the
/// file changes in the pod, the supervisor's interval, memcached's clock tick, and margin.
const RELOAD_LIMIT: Duration = Duration::from_secs(240);

pub async fn changed_credentials_reach_the_server_without_a_restart_or_a_lost_item(env: Arc<Env>) {
    let namespace = env.create_namespace("credentials").await;
    create_secret(
        &env,
        &namespace,
        "cache-auth",
        BTreeMap::from([("authfile", "before:old-password-1\n".to_string())]),
    )
    .await;
    let memcacheds = env
        .create_memcached(
            &namespace,
            "cache",
            json!({
                "replicas": 1,
                "memcached": { "memoryLimitMB": 16 },
                "resources": { "limits": { "memory": "64Mi" } },
                "auth": { "secretName": "cache-auth" },
            }),
        )
        .await;
    eventually("the server ready and reported", WAIT, || async {
        let status = memcacheds.get("cache").await.ok()?.data["status"].clone();
        (status["readyReplicas"] == json!(1) && status.get("auth").is_some()).then_some(())
    })
    .await;
    let server = pod(&env, &namespace, "cache-0").await;
    let spec = server.spec.clone().expect("a pod spec");
    let sidecars: Vec<String> = spec
        .init_containers
        .iter()
        .flatten()
        .map(|c| c.name.clone())
        .collect();
    // memcached runs under the supervisor the init container installs; no process namespace
    // is shared.
    assert_eq!(sidecars, ["install-supervisor"]);
    assert_eq!(spec.share_process_namespace, None);
    let address = pod_address(&server, 11211);
    let before = identity_of(&server);
    let login = |user: &'static str, password: &'static str| async move {
        let mut connection = Connection::open(address, None).await?;
        let reply = connection.authenticate(user, password).await?;
        (reply == "STORED\r\n")
            .then_some(connection)
            .ok_or_else(|| format!("{user}: {}", reply.trim_end()))
    };
    let mut connection = login("before", "old-password-1")
        .await
        .expect("the first credentials are accepted");
    for i in 0..ITEMS {
        assert_eq!(
            connection
                .set(&format!("key-{i}"), &format!("value-{i}"))
                .await
                .as_deref(),
            Ok("STORED\r\n")
        );
    }

    // New credentials replace the old ones.
    let secrets: Api<Secret> = Api::namespaced(env.client.clone(), &namespace);
    let changed = Instant::now();
    secrets
        .patch(
            "cache-auth",
            &PatchParams::default(),
            &Patch::Merge(json!({ "data": {
                "authfile": ByteString(b"after:new-password-2\n".to_vec()),
            }})),
        )
        .await
        .expect("the auth Secret is rewritten");
    let mut connection = eventually("the new credentials are accepted", RELOAD_LIMIT, || async {
        login("after", "new-password-2").await.ok()
    })
    .await;
    let took = changed.elapsed();
    let old = login("before", "old-password-1").await;
    let mut missing = Vec::new();
    for i in 0..ITEMS {
        let value = connection.get(&format!("key-{i}")).await;
        if value != Ok(Some(format!("value-{i}"))) {
            missing.push(format!("key-{i}: {value:?}"));
        }
    }
    let after = identity_of(&pod(&env, &namespace, "cache-0").await);
    eprintln!(
        "credentials: the new ones accepted {:.1} s after the Secret changed; the old ones \
         now get {:?}; {} of {ITEMS} items there after; restart count and memcached start \
         time before {before:?}, after {after:?}",
        took.as_secs_f64(),
        old.as_ref().err(),
        ITEMS - missing.len()
    );
    assert!(old.is_err(), "the old credentials are refused");
    assert_eq!(
        missing,
        Vec::<String>::new(),
        "every item set before is there"
    );
    assert_eq!(after, before, "memcached did not restart");
}
