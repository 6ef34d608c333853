//! `helm install` from the registry: the release is deployed from the OCI artifact, the
//! operator's two replicas run in containers, a sample Memcached becomes Available with its
//! servers, the webhooks refuse an object only they know to be invalid, and helm refuses a value
//! of the wrong type by the chart's schema, leaving the release as it was.

use std::sync::Arc;

use kube::api::Api;
use memcached_operator::admission::Defaults;
use memcached_operator::api::v1beta1::Memcached;
use testkit::cases::{DENIED_BY_VALIDATOR, over_the_memory_limit};
use testkit::repository;

use crate::cluster::{Env, operator_process};

/// The release's revision and status, as `helm status` reports them.
pub async fn revision(env: &Env) -> (u64, String) {
    let installed = &env.installed;
    let status = env
        .helm(&[
            "status",
            &installed.release,
            "--namespace",
            &installed.namespace,
            "--output",
            "json",
        ])
        .await;
    assert!(status.success, "helm status: {}", status.stderr);
    let status: serde_json::Value = serde_json::from_str(&status.stdout).expect("JSON");
    (
        status["version"].as_u64().unwrap_or_default(),
        status["info"]["status"]
            .as_str()
            .unwrap_or_default()
            .to_string(),
    )
}

pub async fn installed_from_the_registry_serves_a_sample_and_refuses_what_is_invalid(
    env: Arc<Env>,
) {
    let installed = &env.installed;
    assert!(
        installed.chart.starts_with("oci://"),
        "installed from the registry: {}",
        installed.chart
    );
    assert_eq!(revision(&env).await, (1, "deployed".to_string()));
    let pods = env.operator_pods().await;
    assert_eq!(pods.len(), 2, "the chart runs two replicas: {pods:?}");
    for pod in &pods {
        assert!(
            operator_process(pod).is_some(),
            "pod {:?} runs the operator in a container",
            pod.metadata.name
        );
    }

    // The sample, as a user applies it: three servers, Available.
    let namespace = env.create_namespace("helm-sample").await;
    let sample = repository::root().join("config/samples/cache_v1beta1_memcached.yaml");
    let sample = sample.display().to_string();
    let (ok, _, stderr) = env.kubectl(&["apply", "-n", &namespace, "-f", &sample], None);
    assert!(ok, "kubectl apply the sample: {stderr}");
    let servers = env.available(&namespace, "memcached-sample", 3).await;

    // A rule only the validating webhook knows: memcached's memory above the container's limit.
    let (over_limit, expected) =
        over_the_memory_limit("over-limit", &namespace, &Defaults::default());
    let (ok, _, stderr) = env.kubectl(&["apply", "-f", "-"], Some(&over_limit));
    assert!(!ok, "kubectl apply admitted memory above the limit");
    assert!(
        stderr.contains(DENIED_BY_VALIDATOR) && stderr.contains(&expected),
        "kubectl said {stderr:?}, expected the validator's {expected:?}"
    );
    let api: Api<Memcached> = Api::namespaced(env.client.clone(), &namespace);
    assert!(api.get_opt("over-limit").await.expect("get").is_none());

    // A value of the wrong type: refused by values.schema.json before anything is changed.
    let refused = env
        .helm(&[
            "upgrade",
            &installed.release,
            &installed.chart,
            "--version",
            &installed.version,
            "--plain-http",
            "--namespace",
            &installed.namespace,
            "--reuse-values",
            "--set",
            "replicaCount=two",
        ])
        .await;
    assert!(!refused.success, "helm upgrade took replicaCount=two");
    assert!(
        refused.stderr.contains("replicaCount") && refused.stderr.contains("schema"),
        "helm names the value and the schema: {}",
        refused.stderr
    );
    assert_eq!(
        revision(&env).await,
        (1, "deployed".to_string()),
        "the refused upgrade left the release as it was"
    );
    let (ok, _, stderr) = env.kubectl(&["delete", "memcacheds", "--all", "-n", &namespace], None);
    assert!(ok, "kubectl delete memcacheds: {stderr}");
    eprintln!(
        "figures: {} {} installed from the registry in {:.1} s (webhooks answering), 2 replicas, \
         the sample Available with {} servers, a webhook-only denial, a wrong value refused by the schema",
        installed.chart,
        installed.version,
        installed.ready_after.as_secs_f64(),
        servers.len()
    );
}
