//! Both API versions through the wiring OLM wrote: a v1alpha1 object is converted and
//! defaulted into storage and reads back in both versions; a rule only the validating webhook
//! knows is denied with a message that names the field; a warning reaches kubectl.

use std::sync::Arc;

use kube::api::Api;
use memcached_operator::admission::{Defaults, default_spec};
use memcached_operator::api::{v1alpha1, v1beta1};
use memcached_operator::operator::RELATED_IMAGE_ENV;
use testkit::cases::{DENIED_BY_VALIDATOR, over_the_memory_limit};

use crate::cluster::Env;

/// The memcached image OLM's Deployment hands the operator (the CSV's related image).
async fn related_image(env: &Env) -> String {
    let deployment = env.deployment().await;
    let containers = deployment
        .spec
        .and_then(|s| s.template.spec)
        .map(|s| s.containers)
        .unwrap_or_default();
    containers
        .iter()
        .flat_map(|c| c.env.iter().flatten())
        .find(|e| e.name == RELATED_IMAGE_ENV)
        .and_then(|e| e.value.clone())
        .unwrap_or_else(|| panic!("OLM's Deployment sets no {RELATED_IMAGE_ENV}"))
}

pub async fn both_api_versions_go_through_olms_wiring(env: Arc<Env>) {
    let namespace = env.create_namespace("olm-api").await;
    let defaults = Defaults::with_related_image(Some(related_image(&env).await));

    // v1alpha1 in: the API server warns that it is deprecated, the conversion webhook turns
    // it into v1beta1, the mutating webhook defaults it.
    let alpha = format!(
        "apiVersion: cache.f2367556.dev/v1alpha1\nkind: Memcached\n\
         metadata: {{name: from-alpha, namespace: {namespace}}}\nspec: {{size: 2}}\n"
    );
    let (ok, _, stderr) = env.kubectl(&["apply", "-f", "-"], Some(&alpha));
    assert!(ok, "kubectl apply v1alpha1: {stderr}");
    assert!(
        stderr.contains("cache.f2367556.dev/v1alpha1 Memcached is deprecated"),
        "kubectl shows the deprecation warning: {stderr:?}"
    );
    let beta: Api<v1beta1::Memcached> = Api::namespaced(env.client.clone(), &namespace);
    let stored = beta.get("from-alpha").await.expect("read as v1beta1");
    assert_eq!(stored.spec.replicas, Some(2), "size became replicas");
    assert_eq!(
        stored.spec,
        default_spec(&stored.spec, &defaults),
        "every default is stored"
    );
    assert_eq!(stored.spec.image.as_deref(), Some(defaults.image.as_str()));
    let alpha_api: Api<v1alpha1::Memcached> = Api::namespaced(env.client.clone(), &namespace);
    let read_back = alpha_api.get("from-alpha").await.expect("read as v1alpha1");
    assert_eq!(
        read_back.spec.size,
        Some(2),
        "size reads back through the conversion webhook"
    );

    // A rule only the validating webhook knows: memcached's memory above the container's limit.
    let (over_limit, expected) = over_the_memory_limit("over-limit", &namespace, &defaults);
    let (ok, _, stderr) = env.kubectl(&["apply", "-f", "-"], Some(&over_limit));
    assert!(!ok, "kubectl apply admitted memory above the limit");
    assert!(
        stderr.contains(DENIED_BY_VALIDATOR) && stderr.contains(&expected),
        "kubectl said {stderr:?}, expected the validator's {expected:?}"
    );
    assert!(beta.get_opt("over-limit").await.expect("get").is_none());

    // A warning: an image on the latest tag is admitted, with the validator's warning.
    let latest = serde_json::json!({
        "apiVersion": "cache.f2367556.dev/v1beta1",
        "kind": "Memcached",
        "metadata": {"name": "on-latest", "namespace": namespace},
        "spec": {"image": "docker.io/library/memcached:latest"}
    })
    .to_string();
    let (ok, _, stderr) = env.kubectl(&["apply", "-f", "-"], Some(&latest));
    assert!(ok, "kubectl apply of an image on latest: {stderr}");
    assert!(
        stderr.contains(
            "Warning: spec.image: \"docker.io/library/memcached:latest\" uses the latest tag"
        ),
        "kubectl shows the validator's warning: {stderr:?}"
    );
    // Their memcached pods would only load the machine for the scenarios that follow.
    let (ok, _, stderr) = env.kubectl(&["delete", "memcacheds", "--all", "-n", &namespace], None);
    assert!(ok, "kubectl delete memcacheds: {stderr}");
    eprintln!(
        "figures: v1alpha1 converted and defaulted, a webhook-only denial naming spec.memcached.memoryLimitMB, a warning on kubectl"
    );
}
