//! `helm uninstall`, then `helm install` again: everything the release made goes (the
//! Deployment and its processes, the webhook configurations, the roles, the Services, the
//! NetworkPolicies, the Certificates and Issuers), and what Helm keeps by design stays: the
//! CRD (in crds/, never deleted), so every Memcached and the servers it owns, which run on
//! without the operator, and the Secrets cert-manager wrote. The leader tries to release its
//! Lease on the way out, as its log says; Helm deletes the operator's roles and its
//! ServiceAccount in the same pass as its Deployment, so the release may be refused, or the
//! leader, its token no longer valid, may step down when its renew deadline passes before it
//! gets to release it; then the Lease names the gone leader until it expires. A new install serves what was kept: one of its replicas leads, a Memcached
//! made before is scaled and its status follows, the webhooks refuse what is invalid and the
//! conversion answers again.

use std::path::Path;
use std::sync::Arc;

use futures::{AsyncBufReadExt, StreamExt};
use k8s_openapi::api::admissionregistration::v1::{
    MutatingWebhookConfiguration, ValidatingWebhookConfiguration,
};
use k8s_openapi::api::apps::v1::{Deployment, StatefulSet};
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, LogParams, Patch, PatchParams};
use memcached_operator::admission::Defaults;
use memcached_operator::api::CRD_NAME;
use memcached_operator::api::{v1alpha1, v1beta1::Memcached};
use serde_json::json;
use testkit::cases::{DENIED_BY_VALIDATOR, over_the_memory_limit};
use testkit::control_plane::names_of_ours;

use crate::cluster::{Env, WAIT, eventually, operator_process};

/// Follows the log of the operator container of pod `name` from now to its end (the
/// container's exit); the task returns what it read.
async fn follow_log(env: &Env, name: &str) -> tokio::task::JoinHandle<String> {
    let pods: Api<Pod> = Api::namespaced(env.client.clone(), &env.installed.namespace);
    let params = LogParams {
        follow: true,
        container: Some("manager".to_string()),
        since_seconds: Some(1),
        ..LogParams::default()
    };
    let stream = pods
        .log_stream(name, &params)
        .await
        .unwrap_or_else(|e| panic!("follow {name}'s log: {e}"));
    tokio::spawn(async move {
        let mut lines = stream.lines();
        let mut text = String::new();
        while let Some(Ok(line)) = lines.next().await {
            text.push_str(&line);
            text.push('\n');
        }
        text
    })
}

pub async fn uninstalling_keeps_the_crd_and_the_memcacheds_which_a_new_install_serves(
    env: Arc<Env>,
) {
    let namespace = env.create_namespace("helm-kept").await;
    let (ok, _, stderr) = env.kubectl(
        &["apply", "-n", &namespace, "-f", "-"],
        Some("apiVersion: cache.f2367556.dev/v1beta1\nkind: Memcached\nmetadata: {name: survivor}\nspec: {replicas: 1}\n"),
    );
    assert!(ok, "kubectl apply: {stderr}");
    env.available(&namespace, "survivor", 1).await;
    let pods = env.operator_pods().await;
    let pids: Vec<u32> = pods.iter().filter_map(operator_process).collect();
    assert_eq!(pids.len(), 2, "both replicas run the operator: {pids:?}");
    let replicas: Vec<String> = pods
        .iter()
        .filter_map(|p| p.metadata.name.clone())
        .collect();
    let leader = eventually("a replica holds the lease", WAIT, || async {
        let holder = testkit::lease::holder(&env.client, &env.installed.namespace)
            .await
            .ok()?;
        let pod = holder.pod()?.to_string();
        replicas.contains(&pod).then_some(pod)
    })
    .await;
    // The leader's log, followed to its end, says how it left the lease.
    let leaders_log = follow_log(&env, &leader).await;

    let shared = env.clone();
    let said = tokio::task::spawn_blocking(move || testkit::helm::uninstall(&shared.plane))
        .await
        .expect("helm uninstall finished")
        .unwrap_or_else(|error| panic!("{error}"));
    eprintln!("{}", said.lines().last().unwrap_or_default());

    let client = &env.client;
    let installed = &env.installed;
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), &installed.namespace);
    assert!(
        deployments
            .get_opt(&installed.deployment)
            .await
            .expect("get")
            .is_none()
    );
    assert_eq!(
        names_of_ours::<MutatingWebhookConfiguration>(&env.client).await,
        Vec::<String>::new()
    );
    assert_eq!(
        names_of_ours::<ValidatingWebhookConfiguration>(&env.client).await,
        Vec::<String>::new()
    );
    eventually("the operator's processes stopped", WAIT, || async {
        pids.iter()
            .all(|pid| !Path::new(&format!("/proc/{pid}")).exists())
            .then_some(())
    })
    .await;
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    assert!(
        crds.get_opt(CRD_NAME).await.expect("get").is_some(),
        "Helm keeps the CRD"
    );
    let api: Api<Memcached> = Api::namespaced(client.clone(), &namespace);
    let kept = api.get("survivor").await.expect("the Memcached is kept");
    assert_eq!(kept.spec.replicas, Some(1));
    let statefulsets: Api<StatefulSet> = Api::namespaced(client.clone(), &namespace);
    assert!(
        statefulsets
            .get_opt("survivor")
            .await
            .expect("get")
            .is_some(),
        "the Memcached's servers run on"
    );
    let said = leaders_log.await.expect("the leader's log ends");
    let lease_lines: Vec<serde_json::Value> = said
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .filter(|l| {
            l["message"] == "released the lease"
                || l["message"] == "could not release the lease"
                || l["message"] == "renew deadline passed; stepping down"
        })
        .collect();
    assert_eq!(
        lease_lines.len(),
        1,
        "the leader tried to release its lease on the way out, or stepped down first: {said}"
    );
    // What it said, without the Status the error repeats.
    let outcome = match lease_lines[0]["error"].as_str() {
        Some(error) => format!(
            "could not release the lease: {}",
            error.split(" (Status").next().unwrap_or(error)
        ),
        None => lease_lines[0]["message"]
            .as_str()
            .unwrap_or_default()
            .to_string(),
    };
    let lease = testkit::lease::holder(client, &installed.namespace)
        .await
        .expect("the Lease is kept");
    let released = lease.identity.is_empty();
    assert!(
        released || lease.pod() == Some(leader.as_str()),
        "the Lease is released or still names the uninstalled leader: {lease:?}"
    );

    // A new install serves what was kept.
    let shared = env.clone();
    let again = tokio::task::spawn_blocking(move || testkit::helm::install(&shared.plane))
        .await
        .expect("helm install finished")
        .unwrap_or_else(|error| panic!("{error}"));
    api.patch(
        "survivor",
        &PatchParams::default(),
        &Patch::Merge(json!({"spec": {"replicas": 2}})),
    )
    .await
    .expect("scale the kept Memcached");
    env.available(&namespace, "survivor", 2).await;
    let new_replicas: Vec<String> = env
        .operator_pods()
        .await
        .iter()
        .filter_map(|p| p.metadata.name.clone())
        .collect();
    let new_leader = eventually("a new replica holds the lease", WAIT, || async {
        let holder = testkit::lease::holder(client, &installed.namespace)
            .await
            .ok()?;
        let pod = holder.pod()?.to_string();
        new_replicas.contains(&pod).then_some(pod)
    })
    .await;
    let (over_limit, expected) =
        over_the_memory_limit("over-limit", &namespace, &Defaults::default());
    let (ok, _, stderr) = env.kubectl(&["apply", "-f", "-"], Some(&over_limit));
    assert!(
        !ok && stderr.contains(DENIED_BY_VALIDATOR) && stderr.contains(&expected),
        "the validator refuses again: {stderr:?}"
    );
    let alpha: Api<v1alpha1::Memcached> = Api::namespaced(client.clone(), &namespace);
    let read = alpha.get("survivor").await.expect("read as v1alpha1 again");
    assert_eq!(read.spec.size, Some(2));
    let (ok, _, stderr) = env.kubectl(&["delete", "memcacheds", "--all", "-n", &namespace], None);
    assert!(ok, "kubectl delete memcacheds: {stderr}");
    eprintln!(
        "figures: uninstalled, the CRD and a Memcached with its StatefulSet kept; the leader {leader} \
         said {outcome:?}, the Lease {}; installed again in {:.1} s, {new_leader} leads, the kept Memcached \
         scaled to 2 servers Available, a webhook denial, read as v1alpha1",
        if released {
            "released"
        } else {
            "left to expire"
        },
        again.ready_after.as_secs_f64()
    );
}
