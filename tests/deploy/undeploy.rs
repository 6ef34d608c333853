//! `make undeploy`: everything `config/default` made is deleted, and so is what the operator
//! made for it (the children of deleted Memcacheds) and cert-manager's Secrets (in the
//! operator's namespace); the operator's processes stop on the node.

use std::path::Path;
use std::sync::Arc;

use k8s_openapi::api::admissionregistration::v1::{
    MutatingWebhookConfiguration, ValidatingWebhookConfiguration,
};
use k8s_openapi::api::apps::v1::StatefulSet;
use k8s_openapi::api::core::v1::Namespace;
use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::Api;
use memcached_operator::api::CRD_NAME;
use testkit::control_plane::names_of_ours;
use testkit::deploy::undeploy;

use crate::cluster::{Env, MUTATING, VALIDATING, WAIT, eventually, operator_process};

pub async fn make_undeploy_removes_everything_it_made(env: Arc<Env>) {
    let namespace = env.create_namespace("deploy-undeploy").await;
    let sample = format!(
        "apiVersion: cache.f2367556.dev/v1beta1\nkind: Memcached\n\
         metadata: {{name: left-behind, namespace: {namespace}}}\nspec: {{replicas: 1}}\n"
    );
    let (ok, _, stderr) = env.kubectl(&["apply", "-f", "-"], Some(&sample));
    assert!(ok, "kubectl apply: {stderr}");
    let statefulsets: Api<StatefulSet> = Api::namespaced(env.client.clone(), &namespace);
    eventually("the Memcached's StatefulSet", WAIT, || async {
        statefulsets.get_opt("left-behind").await.ok().flatten()
    })
    .await;
    let pids: Vec<u32> = env
        .operator_pods()
        .await
        .iter()
        .filter_map(operator_process)
        .collect();
    assert_eq!(pids.len(), 2, "both replicas run the operator: {pids:?}");

    let shared = env.clone();
    let said = tokio::task::spawn_blocking(move || undeploy(&shared.plane))
        .await
        .expect("make undeploy finished")
        .expect("make undeploy");
    eprintln!("{}", said.lines().last().unwrap_or_default());

    let client = &env.client;
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    assert!(crds.get_opt(CRD_NAME).await.expect("get").is_none());
    let namespaces: Api<Namespace> = Api::all(client.clone());
    assert!(
        namespaces
            .get_opt(&env.deployed.namespace)
            .await
            .expect("get")
            .is_none(),
        "the operator's namespace, with the Secrets cert-manager wrote, is gone"
    );
    let mutating: Api<MutatingWebhookConfiguration> = Api::all(client.clone());
    assert!(mutating.get_opt(MUTATING).await.expect("get").is_none());
    let validating: Api<ValidatingWebhookConfiguration> = Api::all(client.clone());
    assert!(validating.get_opt(VALIDATING).await.expect("get").is_none());
    let roles: Vec<String> = names_of_ours::<ClusterRole>(client).await;
    assert!(roles.is_empty(), "ClusterRoles left: {roles:?}");
    let bindings: Vec<String> = names_of_ours::<ClusterRoleBinding>(client).await;
    assert!(
        bindings.is_empty(),
        "ClusterRoleBindings left: {bindings:?}"
    );
    eventually(
        "the deleted Memcached's StatefulSet is collected",
        WAIT,
        || async {
            statefulsets
                .get_opt("left-behind")
                .await
                .ok()
                .filter(Option::is_none)
                .map(|_| ())
        },
    )
    .await;
    eventually("the operator's processes stopped", WAIT, || async {
        pids.iter()
            .all(|pid| !Path::new(&format!("/proc/{pid}")).exists())
            .then_some(())
    })
    .await;
}
