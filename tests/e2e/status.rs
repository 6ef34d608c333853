//! The status says what is in force, and nothing that no longer is: TLS, its plaintext port,
//! authentication and monitoring turned on, then off one by one, each status field read after
//! every step; a status cleared by hand is written again; a status that cannot be written does
//! not lose the Event of the changes made.

use std::sync::Arc;
use std::time::Duration;

use kube::api::{Api, Patch, PatchParams, PostParams};
use memcached_operator::api::v1beta1::{Memcached, MemcachedStatus};
use serde_json::{Value, json};

use crate::cluster::{Env, eventually};
use crate::optional_children::event_about;
use crate::restricted::Restricted;

const WAIT: Duration = Duration::from_secs(60);

/// The status once it describes the Memcached's current generation and the servers run it
/// (`Progressing` False: every server runs the current configuration).
async fn settled(api: &Api<Memcached>, step: &str) -> MemcachedStatus {
    eventually(&format!("the status describes {step}"), WAIT, || async {
        let memcached = api.get("cache").await.ok()?;
        let status = memcached.status?;
        let progressing = status
            .conditions
            .iter()
            .flatten()
            .find(|c| c.type_ == "Progressing")?;
        (status.observed_generation == memcached.metadata.generation
            && progressing.status == "False")
            .then_some(status)
    })
    .await
}

async fn change(api: &Api<Memcached>, spec: Value) {
    api.patch(
        "cache",
        &PatchParams::default(),
        &Patch::Merge(json!({ "spec": spec })),
    )
    .await
    .expect("the Memcached is patched");
}

pub async fn each_status_field_follows_the_features_turned_on_and_off(env: Arc<Env>) {
    let namespace = env.create_namespace("e2e-status").await;
    let api: Api<Memcached> = Api::namespaced(env.client.clone(), &namespace);
    let object: Memcached = serde_json::from_value(json!({
        "apiVersion": "cache.f2367556.dev/v1beta1",
        "kind": "Memcached",
        "metadata": { "name": "cache" },
        "spec": { "replicas": 0 },
    }))
    .expect("a Memcached");
    api.create(&PostParams::default(), &object)
        .await
        .expect("the Memcached is created");
    let plain = settled(&api, "a plain server").await;
    assert_eq!((plain.tls, plain.auth), (None, None));

    change(
        &api,
        json!({
            "tls": { "secretName": "cache-tls", "clientAuth": "Request", "plaintextPort": 11212 },
            "auth": { "secretName": "cache-auth" },
            "monitoring": {},
        }),
    )
    .await;
    let on = settled(
        &api,
        "TLS, its plaintext port, authentication and monitoring",
    )
    .await;
    let tls = serde_json::to_value(&on.tls).expect("JSON");
    assert_eq!(
        tls,
        json!({ "secretName": "cache-tls", "clientAuth": "Request", "plaintextPort": 11212 })
    );
    assert_eq!(
        serde_json::to_value(&on.auth).expect("JSON"),
        json!({ "secretName": "cache-auth" })
    );

    change(&api, json!({ "tls": { "plaintextPort": null } })).await;
    let no_plaintext = settled(&api, "TLS without its plaintext port").await;
    assert_eq!(
        serde_json::to_value(&no_plaintext.tls).expect("JSON"),
        json!({ "secretName": "cache-tls", "clientAuth": "Request" }),
        "the plaintext port is gone from the status"
    );
    assert_eq!(no_plaintext.auth, on.auth);

    change(&api, json!({ "tls": null })).await;
    let no_tls = settled(&api, "no TLS").await;
    assert_eq!(no_tls.tls, None, "TLS is gone from the status");
    assert_eq!(no_tls.auth, on.auth);

    change(&api, json!({ "auth": null })).await;
    let no_auth = settled(&api, "no authentication").await;
    assert_eq!(no_auth.auth, None, "authentication is gone from the status");

    change(&api, json!({ "monitoring": null })).await;
    let none = settled(&api, "no monitoring").await;
    let stored = serde_json::to_value(&none).expect("JSON");
    let mut fields: Vec<&String> = stored.as_object().expect("an object").keys().collect();
    fields.sort();
    assert_eq!(
        fields,
        [
            "conditions",
            "observedGeneration",
            "readyReplicas",
            "replicas",
            "selector",
            "servers"
        ],
        "{stored}"
    );
    eprintln!("status after every feature was turned off: {stored}");

    // Cleared by hand: written again, as it was but for the conditions' times.
    api.patch_status(
        "cache",
        &PatchParams::default(),
        &Patch::Merge(json!({ "status": null })),
    )
    .await
    .expect("the status is cleared");
    let repaired = settled(&api, "the same Memcached again").await;
    assert_eq!(repaired.selector, none.selector);
    assert_eq!(repaired.replicas, Some(0));
    let reasons = |status: &MemcachedStatus| {
        status
            .conditions
            .iter()
            .flatten()
            .map(|c| (c.type_.clone(), c.status.clone(), c.reason.clone()))
            .collect::<Vec<_>>()
    };
    assert_eq!(reasons(&repaired), reasons(&none));
}

/// A status write that fails does not lose the Event of the changes the reconcile made: an
/// operator that may not write statuses still says which children it created, then why the
/// status is not written.
pub async fn a_failed_status_write_still_reports_the_changes_made(env: Arc<Env>) {
    let namespace = env.create_namespace("e2e-status-forbidden").await;
    let restricted = Restricted::start(&env, &namespace, "e2e-operator-without-status", |rule| {
        rule.resources
            .iter()
            .flatten()
            .any(|r| r == "memcacheds/status")
    })
    .await;
    let api: Api<Memcached> = Api::namespaced(env.client.clone(), &namespace);
    let object: Memcached = serde_json::from_value(json!({
        "apiVersion": "cache.f2367556.dev/v1beta1",
        "kind": "Memcached",
        "metadata": { "name": "cache" },
        "spec": { "replicas": 0 },
    }))
    .expect("a Memcached");
    api.create(&PostParams::default(), &object)
        .await
        .expect("the Memcached is created");
    let failed = event_about(&env, &namespace, "cache", "ReconcileFailed").await;
    let note = failed.note.unwrap_or_default();
    assert!(
        note.contains("apply status of Memcached") && note.contains("forbidden"),
        "{note}"
    );
    let created = event_about(&env, &namespace, "cache", "Created").await;
    assert_eq!(created.type_.as_deref(), Some("Normal"));
    assert_eq!(
        created.note.as_deref(),
        Some("StatefulSet cache created; Service cache created")
    );
    assert_eq!(
        api.get("cache").await.expect("the Memcached").status,
        None,
        "no status could be written"
    );
    restricted.stop(&env).await;
}
