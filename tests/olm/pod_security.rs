//! Pod Security: with `pod-security.kubernetes.io/enforce: restricted` on the operator's
//! namespace and on a Memcached's, the real API server admits every pod: the operator's
//! replicas as OLM's Deployment makes them, and the memcached servers the StatefulSet makes.
//! A privileged pod in the same namespace is refused, so the label is really enforced.

use std::sync::Arc;

use k8s_openapi::api::core::v1::{Namespace, Pod};
use kube::api::{Api, DeleteParams, PostParams};
use memcached_operator::api::v1beta1::{Memcached, MemcachedSpec};
use serde_json::json;

use crate::cluster::{Env, WAIT, eventually};

const ENFORCE: &str = "pod-security.kubernetes.io/enforce";

/// Whether the pod reports Ready.
fn ready(pod: &Pod) -> bool {
    pod.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|c| c.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
}

pub async fn restricted_pod_security_admits_the_operator_and_memcached(env: Arc<Env>) {
    // A Memcached's namespace that enforces restricted from the start.
    let name = "olm-restricted";
    let namespaces: Api<Namespace> = Api::all(env.client.clone());
    let namespace: Namespace = serde_json::from_value(json!({
        "metadata": {"name": name, "labels": {ENFORCE: "restricted", "pod-security.kubernetes.io/enforce-version": "latest"}}
    }))
    .expect("a namespace");
    namespaces
        .create(&PostParams::default(), &namespace)
        .await
        .expect("create the namespace");

    // The label is enforced: a privileged pod is refused.
    let pods: Api<Pod> = Api::namespaced(env.client.clone(), name);
    let privileged: Pod = serde_json::from_value(json!({
        "metadata": {"name": "privileged"},
        "spec": {"containers": [{"name": "c", "image": "docker.io/library/memcached:1.6.39-alpine",
                                  "securityContext": {"privileged": true}}]}
    }))
    .expect("a pod");
    match pods.create(&PostParams::default(), &privileged).await {
        Err(kube::Error::Api(status)) => assert!(
            status.code == 403
                && status
                    .message
                    .contains("violates PodSecurity \"restricted:latest\""),
            "{status:?}"
        ),
        other => panic!("a privileged pod was not refused: {other:?}"),
    }

    let memcacheds: Api<Memcached> = Api::namespaced(env.client.clone(), name);
    let mut object = Memcached::new(
        "cache",
        MemcachedSpec {
            replicas: Some(1),
            ..MemcachedSpec::default()
        },
    );
    object.metadata.namespace = Some(name.to_string());
    memcacheds
        .create(&PostParams::default(), &object)
        .await
        .expect("create");
    eventually("the memcached pod is admitted and Ready", WAIT, || async {
        pods.get_opt("cache-0")
            .await
            .ok()
            .flatten()
            .filter(ready)
            .map(|_| ())
    })
    .await;

    // The operator's namespace: enforcing restricted on it reports no existing pod as
    // violating (the API server checks them when the label is set), and a replica the
    // ReplicaSet makes anew is admitted.
    let operators = env.installed.namespace.clone();
    let label = format!("{ENFORCE}=restricted");
    let (ok, _, stderr) = env.kubectl(
        &["label", "--overwrite", "namespace", &operators, &label],
        None,
    );
    assert!(ok, "kubectl label: {stderr}");
    assert!(
        !stderr.contains("Warning"),
        "enforcing restricted on {operators} warns about existing pods: {stderr}"
    );
    let before = env.operator_pods().await;
    let replaced = before[0].metadata.name.clone().unwrap_or_default();
    let operator_pods: Api<Pod> = Api::namespaced(env.client.clone(), &operators);
    operator_pods
        .delete(&replaced, &DeleteParams::default())
        .await
        .expect("delete one operator pod");
    eventually(
        "a new operator pod is admitted and both replicas are Ready",
        WAIT,
        || async {
            let pods = env.operator_pods().await;
            let fresh = pods
                .iter()
                .filter(|p| p.metadata.name.as_deref() != Some(replaced.as_str()))
                .filter(|p| ready(p))
                .count();
            (fresh == 2).then_some(())
        },
    )
    .await;
    let (ok, _, stderr) = env.kubectl(&["delete", "memcached", "cache", "-n", name], None);
    assert!(ok, "kubectl delete: {stderr}");
    eprintln!(
        "figures: restricted enforced on {operators} and {name}: the operator's replacement pod and memcached's pod admitted, a privileged pod refused"
    );
}
