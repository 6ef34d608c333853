//! A cluster-wide proxy set through the chart's values (`extraEnv`), as OLM and OpenShift set
//! one on every operator: `HTTPS_PROXY` and `HTTP_PROXY` name a proxy in a pod that records
//! every connection's first line and closes it unanswered (`testkit::proxy_pod`), and
//! `NO_PROXY` is what OpenShift derives for a cluster (its pod and service networks, the
//! cluster's domain, `.svc`, `localhost`). The replaced replicas keep working (leader
//! election, reconciles, the webhooks), log that NO_PROXY covers the API server, and send the
//! proxy nothing. The values are set back at the end.

use std::sync::Arc;

use serde_json::json;
use testkit::proxy_pod::{
    RecordingProxy, has_variables, replaced_replicas, works_without_the_proxy,
};

use crate::cluster::Env;

pub async fn a_proxy_set_in_the_values_is_never_asked_for_what_no_proxy_covers(env: Arc<Env>) {
    let namespace = env.create_namespace("helm-proxy").await;
    let proxy = RecordingProxy::start(&env.client, &namespace).await;
    let variables = proxy.variables();
    let before: Vec<String> = env
        .operator_pods()
        .await
        .iter()
        .filter_map(|p| p.metadata.name.clone())
        .collect();
    let extra_env: Vec<_> = variables
        .iter()
        .map(|(name, value)| json!({"name": name, "value": value}))
        .collect();
    let installed = &env.installed;
    env.upgrade(
        &installed.chart,
        &installed.version,
        &["--set-json", &format!("extraEnv={}", json!(extra_env))],
    )
    .await;
    let replicas = replaced_replicas(&env.client, &installed.namespace, &before, |p| {
        has_variables(p, &variables)
    })
    .await;
    let work = env.create_namespace("helm-proxied").await;
    let leader =
        works_without_the_proxy(&env.client, &installed.namespace, &replicas, &proxy, &work).await;

    // The values set back.
    env.upgrade(
        &installed.chart,
        &installed.version,
        &["--set-json", "extraEnv=[]"],
    )
    .await;
    eprintln!(
        "figures: extraEnv HTTPS_PROXY={} with OpenShift's kind of NO_PROXY: 2 replicas replaced, \
         {leader} leads, a Memcached Available, a webhook denial; the proxy recorded only the test's line",
        proxy.url
    );
}
