//! The NetworkPolicy a Memcached asks for: written with the sources asked for and memcached's
//! ports, changed when they change, removed when no longer asked for. The local control plane
//! runs no network plugin that enforces NetworkPolicies (the real node's CNI bridge does not
//! either), so this shows the object the operator writes, not enforcement.

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::networking::v1::NetworkPolicy;
use kube::ResourceExt;
use kube::api::{Api, Patch, PatchParams, PostParams};
use memcached_operator::api::v1beta1::Memcached;
use serde_json::json;

use crate::cluster::{Env, eventually};

const WAIT: Duration = Duration::from_secs(60);

pub async fn a_network_policy_follows_the_sources_asked_for_and_goes_when_no_longer_asked_for(
    env: Arc<Env>,
) {
    let namespace = env.create_namespace("e2e-network-policy").await;
    let memcacheds: Api<Memcached> = Api::namespaced(env.client.clone(), &namespace);
    let clients = json!({ "podSelector": { "matchLabels": { "role": "client" } } });
    let object: Memcached = serde_json::from_value(json!({
        "apiVersion": "cache.f2367556.dev/v1beta1",
        "kind": "Memcached",
        "metadata": { "name": "cache" },
        "spec": {
            "replicas": 0,
            "networkPolicy": { "allowedSources": [clients] },
        },
    }))
    .expect("a Memcached");
    let created = memcacheds
        .create(&PostParams::default(), &object)
        .await
        .expect("the Memcached is created");
    let policies: Api<NetworkPolicy> = Api::namespaced(env.client.clone(), &namespace);
    let policy = eventually("the NetworkPolicy is written", WAIT, || async {
        policies.get_opt("cache").await.ok().flatten()
    })
    .await;
    let owners = policy.owner_references();
    assert_eq!(owners.len(), 1, "{owners:?}");
    assert_eq!(Some(owners[0].uid.clone()), created.uid());
    let spec = serde_json::to_value(policy.spec.expect("a spec")).expect("json");
    assert_eq!(
        spec["podSelector"]["matchLabels"],
        json!({ "app.kubernetes.io/instance": "cache", "app.kubernetes.io/name": "memcached" })
    );
    assert_eq!(spec["policyTypes"], json!(["Ingress"]));
    assert_eq!(spec["ingress"][0]["from"], json!([clients]));
    assert_eq!(
        spec["ingress"][0]["ports"],
        json!([{ "port": 11211, "protocol": "TCP" }])
    );

    // The sources change: the policy follows.
    let monitoring = json!({
        "namespaceSelector": { "matchLabels": { "kubernetes.io/metadata.name": "monitoring" } }
    });
    let patch = json!({ "spec": { "networkPolicy": { "allowedSources": [clients, monitoring] } } });
    memcacheds
        .patch("cache", &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .expect("the sources change");
    eventually("the NetworkPolicy lists both sources", WAIT, || async {
        let policy = policies.get_opt("cache").await.ok().flatten()?;
        let spec = serde_json::to_value(policy.spec?).ok()?;
        (spec["ingress"][0]["from"] == json!([clients, monitoring])).then_some(())
    })
    .await;

    // No longer asked for: removed.
    let patch = json!({ "spec": { "networkPolicy": null } });
    memcacheds
        .patch("cache", &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .expect("the policy is no longer asked for");
    eventually("the NetworkPolicy is removed", WAIT, || async {
        policies
            .get_opt("cache")
            .await
            .ok()
            .and_then(|p| p.is_none().then_some(()))
    })
    .await;
    eprintln!(
        "network policy: written with 1 source, changed to 2, removed; no network plugin here \
         enforces NetworkPolicies, so enforcement is not shown"
    );
}
