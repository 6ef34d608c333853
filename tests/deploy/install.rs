//! `make deploy`: cert-manager issues the CA and the serving certificate, cainjector writes
//! the CA into every caBundle, two replicas serve the Secret cert-manager wrote, and the API
//! server calls all three webhooks through the wiring `config/default` declares.

use std::sync::Arc;

use k8s_openapi::api::apps::v1::Deployment;
use kube::api::{Api, DynamicObject};
use kube::core::{ApiResource, GroupVersionKind};
use memcached_operator::admission::{Defaults, default_spec};
use memcached_operator::api::{v1alpha1, v1beta1};
use testkit::cases::{DENIED_BY_VALIDATOR, over_the_memory_limit};

use crate::cluster::{CA_CERTIFICATE, Env, WAIT, eventually, operator_process};

/// cert-manager's Certificate kind.
pub fn certificates(env: &Env) -> Api<DynamicObject> {
    let gvk = GroupVersionKind::gvk("cert-manager.io", "v1", "Certificate");
    Api::namespaced_with(
        env.client.clone(),
        &env.deployed.namespace,
        &ApiResource::from_gvk(&gvk),
    )
}

/// The status of the Certificate's condition `type_`, if it has one.
pub async fn condition(env: &Env, certificate: &str, type_: &str) -> Option<String> {
    let object = certificates(env).get(certificate).await.ok()?;
    object.data["status"]["conditions"]
        .as_array()?
        .iter()
        .find(|c| c["type"] == type_)
        .and_then(|c| c["status"].as_str().map(str::to_string))
}

pub async fn make_deploy_issues_the_certificate_and_wires_every_webhook(env: Arc<Env>) {
    for certificate in [CA_CERTIFICATE, env.deployed.certificate.as_str()] {
        assert_eq!(
            condition(&env, certificate, "Ready").await.as_deref(),
            Some("True"),
            "Certificate {certificate} is Ready"
        );
    }
    let ca = env
        .issued_in(CA_CERTIFICATE)
        .await
        .expect("the CA's Secret holds the CA");
    let serving = env.issued().await.expect("the serving Secret");
    assert_eq!(
        serving.ca.trim(),
        ca.ca.trim(),
        "the serving certificate is signed by the CA, whose Secret's ca.crt is itself"
    );
    assert_ne!(serving.serial, ca.serial, "the leaf is not the CA");
    let bundles = env.ca_bundles().await;
    assert_eq!(bundles.len(), 3, "two webhooks and the CRD's conversion");
    for bundle in &bundles {
        assert_eq!(
            bundle.as_deref().map(str::trim),
            Some(ca.ca.trim()),
            "cainjector wrote the CA into every caBundle"
        );
    }

    let deployments: Api<Deployment> = Api::namespaced(env.client.clone(), &env.deployed.namespace);
    let deployment = deployments
        .get(&env.deployed.deployment)
        .await
        .expect("the Deployment");
    let replicas = deployment.spec.and_then(|s| s.replicas).unwrap_or(1);
    assert_eq!(replicas, 2, "config/default runs two replicas");
    let pods = env.operator_pods().await;
    assert_eq!(pods.len(), 2, "{pods:?}");
    let served = env.served_serials(&pods, &ca.ca).await;
    for (pod, serial) in pods.iter().zip(&served) {
        assert!(
            operator_process(pod).is_some(),
            "pod {:?} runs the operator in a container",
            pod.metadata.name
        );
        assert_eq!(
            serial.as_deref(),
            Some(serving.serial.as_str()),
            "pod {:?} serves the certificate cert-manager issued",
            pod.metadata.name
        );
    }

    // Conversion: v1alpha1 in, read as v1beta1 (defaulted), read back as v1alpha1.
    let namespace = env.create_namespace("deploy-api").await;
    let alpha = format!(
        "apiVersion: cache.f2367556.dev/v1alpha1\nkind: Memcached\n\
         metadata: {{name: from-alpha, namespace: {namespace}}}\nspec: {{size: 0}}\n"
    );
    let (ok, _, stderr) = env.kubectl(&["apply", "-f", "-"], Some(&alpha));
    assert!(ok, "kubectl apply v1alpha1: {stderr}");
    let beta: Api<v1beta1::Memcached> = Api::namespaced(env.client.clone(), &namespace);
    let stored = beta.get("from-alpha").await.expect("read as v1beta1");
    assert_eq!(stored.spec.replicas, Some(0), "size became replicas");
    assert_eq!(
        stored.spec,
        default_spec(&stored.spec, &Defaults::default()),
        "the mutating webhook stored every default"
    );
    let alpha_api: Api<v1alpha1::Memcached> = Api::namespaced(env.client.clone(), &namespace);
    let read_back = alpha_api.get("from-alpha").await.expect("read as v1alpha1");
    assert_eq!(read_back.spec.size, Some(0), "size reads back as v1alpha1");

    // A rule only the validating webhook knows: memcached's memory above the container's limit.
    let (over_limit, expected) =
        over_the_memory_limit("over-limit", &namespace, &Defaults::default());
    let (ok, _, stderr) = env.kubectl(&["apply", "-f", "-"], Some(&over_limit));
    assert!(!ok, "kubectl apply admitted memory above the limit");
    assert!(
        stderr.contains(DENIED_BY_VALIDATOR) && stderr.contains(&expected),
        "kubectl said {stderr:?}, expected the validator's {expected:?}"
    );
    assert!(beta.get_opt("over-limit").await.expect("get").is_none());

    // The status the controller wrote comes back through the conversion webhook too.
    eventually("the Memcached is reconciled", WAIT, || async {
        let object = alpha_api.get("from-alpha").await.ok()?;
        object
            .status?
            .conditions
            .filter(|c| !c.is_empty())
            .map(|_| ())
    })
    .await;
    let (ok, _, stderr) = env.kubectl(&["delete", "memcacheds", "--all", "-n", &namespace], None);
    assert!(ok, "kubectl delete memcacheds: {stderr}");
    eprintln!(
        "figures: CA and serving Certificates Ready, {} caBundles = the CA, 2 replicas serving serial {}, \
         v1alpha1 converted and defaulted, a webhook-only denial",
        bundles.len(),
        serving.serial
    );
}
