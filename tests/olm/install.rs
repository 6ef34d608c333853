//! What OLM made of the bundle: a Succeeded CSV; its Deployment's two replicas running in
//! containers on the node as the CSV's ServiceAccount, serving on the certificate OLM mounted at OLM's
//! path; and the mutating, validating and conversion webhooks wired by OLM to the Service in
//! front of them.

use std::sync::Arc;

use k8s_openapi::api::admissionregistration::v1::{
    MutatingWebhookConfiguration, ValidatingWebhookConfiguration,
};
use k8s_openapi::api::core::v1::Service;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, ListParams};
use memcached_operator::tls::certs::OLM_SERVING_CERTS_DIR;
use serde_json::Value;

use crate::cluster::{Env, WAIT, eventually, operator_process};

/// The CSV as OLM stored it.
pub fn csv(env: &Env) -> Value {
    let name = env.current_csv();
    let (ok, stdout, stderr) = env.kubectl(
        &[
            "get",
            "csv",
            "-n",
            &env.installed.namespace,
            &name,
            "-o",
            "json",
        ],
        None,
    );
    assert!(ok, "kubectl get csv: {stderr}");
    serde_json::from_str(&stdout).expect("the CSV is JSON")
}

/// The ServiceAccount the CSV's one Deployment runs as.
pub fn csv_service_account(csv: &Value) -> String {
    csv["spec"]["install"]["spec"]["deployments"][0]["spec"]["template"]["spec"]
        ["serviceAccountName"]
        .as_str()
        .expect("the CSV's Deployment names a ServiceAccount")
        .to_string()
}

/// The reasons the CSV's conditions went through, in order.
fn reasons(csv: &Value) -> Vec<String> {
    csv["status"]["conditions"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|c| c["reason"].as_str().map(str::to_string))
        .collect()
}

pub async fn olm_runs_two_replicas_on_its_certificates_and_wires_every_webhook(env: Arc<Env>) {
    let installed = &env.installed;
    // OLM may take a Succeeded CSV back to Pending (`NeedsReinstall`, "calculated deployment
    // install is bad") when its caches lag behind what it just made, and install it again
    // (new certificates, the Deployment rolled): what a user sees is the CSV Succeeded and
    // the Deployment rolled out in the end. Wait for both, and say when OLM went round.
    let csv = eventually(
        "the CSV Succeeded and its Deployment rolled out, two pods",
        WAIT,
        || async {
            let csv = csv(&env);
            let deployment = env.deployment().await;
            let (spec, status) = (deployment.spec?, deployment.status?);
            let rolled = status.observed_generation == deployment.metadata.generation
                && status.updated_replicas == spec.replicas
                && status.ready_replicas == spec.replicas
                && status.replicas == spec.replicas;
            let pods = env.operator_pods().await;
            let settled =
                pods.len() == 2 && pods.iter().all(|p| p.metadata.deletion_timestamp.is_none());
            (csv["status"]["phase"] == "Succeeded" && rolled && settled).then_some(csv)
        },
    )
    .await;
    let went = reasons(&csv);
    if went.iter().any(|r| r == "NeedsReinstall") {
        eprintln!("figures: OLM installed the CSV again after it had Succeeded: {went:?}");
    }
    let account = csv_service_account(&csv);

    let deployment = env.deployment().await;
    let spec = deployment.spec.clone().expect("a Deployment spec");
    assert_eq!(spec.replicas, Some(2), "the CSV asks for two replicas");
    let status = deployment.status.clone().expect("a Deployment status");
    assert_eq!(status.ready_replicas, Some(2), "{status:?}");
    let template = spec.template.spec.expect("a pod template");
    let mounts: Vec<(String, String)> = template.containers[0]
        .volume_mounts
        .iter()
        .flatten()
        .map(|m| (m.name.clone(), m.mount_path.clone()))
        .collect();
    let cert_dir = format!("/{OLM_SERVING_CERTS_DIR}");
    assert!(
        mounts.contains(&("webhook-cert".into(), cert_dir.clone())),
        "OLM mounts its certificate at {cert_dir}: {mounts:?}"
    );

    let pods = env.operator_pods().await;
    assert_eq!(pods.len(), 2, "two operator pods");
    for pod in &pods {
        let name = pod.metadata.name.clone().unwrap_or_default();
        let spec = pod.spec.clone().expect("a pod spec");
        assert_eq!(
            spec.node_name.as_deref(),
            Some("local"),
            "{name} is on the node"
        );
        assert_eq!(spec.service_account_name.as_deref(), Some(account.as_str()));
        let status = pod.status.clone().expect("a pod status");
        assert_eq!(
            status.phase.as_deref(),
            Some("Running"),
            "{name}: {status:?}"
        );
        let ready = status
            .conditions
            .iter()
            .flatten()
            .any(|c| c.type_ == "Ready" && c.status == "True");
        assert!(ready, "{name} is Ready: {:?}", status.conditions);
        assert!(
            operator_process(pod).is_some(),
            "{name} runs the operator in a container on this machine"
        );
        let logs = env.pod_logs(pod).await;
        let certificate = format!("{cert_dir}/tls.crt");
        assert!(
            logs.lines()
                .any(|l| l.contains("serving certificate loaded") && l.contains(&certificate)),
            "{name} serves on OLM's certificate at {certificate}:\n{logs}"
        );
    }

    // OLM's Service in front of the webhooks, and the three kinds of wiring pointing at it.
    let service_name = format!("{}-service", installed.deployment);
    let services: Api<Service> = Api::namespaced(env.client.clone(), &installed.namespace);
    services
        .get(&service_name)
        .await
        .unwrap_or_else(|e| panic!("OLM's webhook Service {service_name}: {e}"));
    let owned = ListParams::default().labels(&format!("olm.owner={}", installed.csv));
    let mutating: Api<MutatingWebhookConfiguration> = Api::all(env.client.clone());
    let mutating = mutating
        .list(&owned)
        .await
        .expect("mutating configurations")
        .items;
    let validating: Api<ValidatingWebhookConfiguration> = Api::all(env.client.clone());
    let validating = validating
        .list(&owned)
        .await
        .expect("validating configurations")
        .items;
    assert_eq!(
        (mutating.len(), validating.len()),
        (1, 1),
        "one of each, owned by the CSV"
    );
    let mut clients = Vec::new();
    for webhook in mutating[0].webhooks.iter().flatten() {
        clients.push((webhook.name.clone(), webhook.client_config.clone()));
    }
    for webhook in validating[0].webhooks.iter().flatten() {
        clients.push((webhook.name.clone(), webhook.client_config.clone()));
    }
    assert!(clients.len() >= 2, "{clients:?}");
    for (name, client) in &clients {
        let service = client.service.as_ref().expect("a service reference");
        assert_eq!(
            (service.name.as_str(), service.namespace.as_str()),
            (service_name.as_str(), installed.namespace.as_str()),
            "{name}"
        );
        assert!(
            client.ca_bundle.as_ref().is_some_and(|b| !b.0.is_empty()),
            "{name}: caBundle"
        );
    }
    let crds: Api<CustomResourceDefinition> = Api::all(env.client.clone());
    let crd = crds
        .get("memcacheds.cache.f2367556.dev")
        .await
        .expect("the Memcached CRD");
    let conversion = crd.spec.conversion.expect("a conversion stanza");
    assert_eq!(conversion.strategy, "Webhook");
    let client = conversion
        .webhook
        .and_then(|w| w.client_config)
        .expect("the conversion webhook's client config");
    let service = client.service.expect("a service reference");
    assert_eq!(service.name, service_name);
    assert!(
        client.ca_bundle.is_some_and(|b| !b.0.is_empty()),
        "conversion caBundle"
    );

    // The bundle's network policies, which OLM v0.46 installs like any supported kind.
    let (ok, stdout, stderr) = env.kubectl(
        &[
            "get",
            "networkpolicies",
            "-n",
            &installed.namespace,
            "-o",
            "name",
        ],
        None,
    );
    assert!(ok, "kubectl get networkpolicies: {stderr}");
    for policy in ["allow-metrics-traffic", "allow-webhook-traffic"] {
        assert!(
            stdout.contains(&format!("memcached-operator-{policy}")),
            "OLM installed the bundle's {policy} policy: {stdout:?}"
        );
    }

    eprintln!(
        "figures: CSV Succeeded {:.1} s after the install began, webhooks answering after {:.1} s; \
         {} webhooks and the conversion webhook wired by OLM to {}/{service_name}",
        installed.csv_succeeded_after.as_secs_f64(),
        installed.ready_after.as_secs_f64(),
        clients.len(),
        installed.namespace,
    );
}

/// The webhooks of a configuration as the API server stores them, without what legitimately
/// differs between OLM and `config/`: the client configuration (OLM's Service, or config's)
/// and the namespace selector OLM derives from the OperatorGroup.
fn comparable(configuration: &Value) -> Vec<Value> {
    configuration["webhooks"]
        .as_array()
        .cloned()
        .unwrap_or_default()
        .into_iter()
        .map(|mut webhook| {
            if let Some(webhook) = webhook.as_object_mut() {
                webhook.remove("clientConfig");
                webhook.remove("namespaceSelector");
            }
            webhook
        })
        .collect()
}

/// The service path of each webhook of a configuration.
fn paths(configuration: &Value) -> Vec<Value> {
    configuration["webhooks"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|w| w["clientConfig"]["service"]["path"].clone())
        .collect()
}

pub async fn olms_webhooks_are_the_ones_config_installs_without_olm(env: Arc<Env>) {
    let root = testkit::repository::root();
    let owned = format!("olm.owner={}", env.installed.csv);
    for (kind, file) in [
        (
            "mutatingwebhookconfigurations",
            "config/webhook/mutating.yaml",
        ),
        (
            "validatingwebhookconfigurations",
            "config/webhook/validating.yaml",
        ),
    ] {
        let (ok, stdout, stderr) = env.kubectl(&["get", kind, "-l", &owned, "-o", "json"], None);
        assert!(ok, "kubectl get {kind}: {stderr}");
        let list: Value = serde_json::from_str(&stdout).expect("JSON");
        let from_olm = &list["items"][0];
        // config/'s object, defaulted by the same API server (a server-side dry run).
        let path = root.join(file).display().to_string();
        let (ok, stdout, stderr) = env.kubectl(
            &["create", "--dry-run=server", "-f", &path, "-o", "json"],
            None,
        );
        assert!(ok, "kubectl create --dry-run=server -f {file}: {stderr}");
        let from_config: Value = serde_json::from_str(&stdout).expect("JSON");
        assert!(
            !comparable(from_olm).is_empty(),
            "{kind}: OLM wrote no webhooks: {list}"
        );
        assert_eq!(
            comparable(from_olm),
            comparable(&from_config),
            "{kind}: OLM's webhooks and {file}'s differ"
        );
        assert_eq!(paths(from_olm), paths(&from_config), "{kind}: paths");
    }
    let (ok, stdout, stderr) = env.kubectl(
        &["get", "crd", "memcacheds.cache.f2367556.dev", "-o", "json"],
        None,
    );
    assert!(ok, "kubectl get crd: {stderr}");
    let crd: Value = serde_json::from_str(&stdout).expect("JSON");
    let patch = std::fs::read_to_string(root.join("config/crd/patches/webhook_in_memcacheds.yaml"))
        .expect("config's conversion patch");
    let patch = memcached_packager::yaml::documents(&patch)
        .expect("YAML")
        .remove(0);
    let pointer = "/spec/conversion/webhook/clientConfig/service/path";
    assert_eq!(
        crd.pointer(pointer),
        patch.pointer(pointer),
        "the conversion path"
    );
    let pointer = "/spec/conversion/webhook/conversionReviewVersions";
    assert_eq!(
        crd.pointer(pointer),
        patch.pointer(pointer),
        "the conversion review versions"
    );
}
