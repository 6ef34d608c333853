//! A cluster-wide proxy set through the Subscription's `spec.config.env`, as OLM sets one on
//! every operator it installs where the cluster has one: `HTTPS_PROXY` and `HTTP_PROXY` name
//! a proxy in a pod that records every connection's first line and closes it unanswered
//! (`testkit::proxy_pod`), and `NO_PROXY` is what OpenShift derives for a cluster (its pod and
//! service networks, the cluster's domain, `.svc`, `localhost`). OLM rewrites the Deployment;
//! the replaced replicas keep working (leader election, reconciles, the webhooks), log that
//! NO_PROXY covers the API server, and send the proxy nothing. The Subscription's environment
//! is set back at the end.

use std::sync::Arc;

use serde_json::{Value, json};
use testkit::proxy_pod::{
    RecordingProxy, has_variables, replaced_replicas, works_without_the_proxy,
};

use crate::cluster::Env;

/// The Subscription's `spec.config.env`.
fn subscription_env(env: &Env) -> Vec<Value> {
    let (ok, stdout, stderr) = env.kubectl(
        &[
            "get",
            "subscription",
            "memcached-operator",
            "-n",
            &env.installed.namespace,
            "-o",
            "json",
        ],
        None,
    );
    assert!(ok, "kubectl get subscription: {stderr}");
    let subscription: Value = serde_json::from_str(&stdout).expect("JSON");
    subscription["spec"]["config"]["env"]
        .as_array()
        .cloned()
        .unwrap_or_default()
}

/// Sets the Subscription's `spec.config.env` to `variables`.
fn set_subscription_env(env: &Env, variables: &[Value]) {
    let patch = json!({"spec": {"config": {"env": variables}}}).to_string();
    let (ok, _, stderr) = env.kubectl(
        &[
            "patch",
            "subscription",
            "memcached-operator",
            "-n",
            &env.installed.namespace,
            "--type=merge",
            "-p",
            &patch,
        ],
        None,
    );
    assert!(ok, "kubectl patch subscription: {stderr}");
}

pub async fn a_proxy_set_in_the_subscription_is_never_asked_for_what_no_proxy_covers(
    env: Arc<Env>,
) {
    let namespace = env.create_namespace("olm-proxy").await;
    let proxy = RecordingProxy::start(&env.client, &namespace).await;
    let variables = proxy.variables();
    let original = subscription_env(&env);
    let before: Vec<String> = env
        .operator_pods()
        .await
        .iter()
        .filter_map(|p| p.metadata.name.clone())
        .collect();
    let mut with_proxy = original.clone();
    with_proxy.extend(
        variables
            .iter()
            .map(|(name, value)| json!({"name": name, "value": value})),
    );
    set_subscription_env(&env, &with_proxy);
    let replicas = replaced_replicas(&env.client, &env.installed.namespace, &before, |p| {
        has_variables(p, &variables)
    })
    .await;
    let work = env.create_namespace("olm-proxied").await;
    let leader = works_without_the_proxy(
        &env.client,
        &env.installed.namespace,
        &replicas,
        &proxy,
        &work,
    )
    .await;

    // The Subscription's environment set back: OLM takes the variables out again.
    set_subscription_env(&env, &original);
    let proxied: Vec<String> = replicas
        .iter()
        .filter_map(|p| p.metadata.name.clone())
        .collect();
    replaced_replicas(&env.client, &env.installed.namespace, &proxied, |p| {
        !has_variables(p, &variables[..1])
    })
    .await;
    eprintln!(
        "figures: the Subscription's config.env HTTPS_PROXY={} with OpenShift's kind of NO_PROXY: \
         2 replicas replaced, {leader} leads, a Memcached Available, a webhook denial; the proxy \
         recorded only the test's line",
        proxy.url
    );
}
