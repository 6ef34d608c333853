//! `certificates.source=operator`: the chart installed with no cert-manager object at all, the
//! operator issuing its own self-signed webhook certificate. The release the scenarios before
//! left (cert-manager's) is uninstalled, and the Secret cert-manager wrote deleted, so the
//! operator starts from nothing. It writes the Secret and the CA into every caBundle; a
//! sample is Available, the webhooks refuse what is invalid and the conversion answers. With
//! short validities (a CA of two minutes, serving certificates of one) it then renews both
//! while a client writes through the webhooks: not one write fails, the new CA is trusted
//! beside the old one until the old one expires, then alone, and both replicas serve the
//! last serving certificate issued. Last, since it leaves this install in place.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::{Duration, Instant};

use k8s_openapi::api::admissionregistration::v1::{
    MutatingWebhookConfiguration, ValidatingWebhookConfiguration,
};
use k8s_openapi::api::core::v1::{Pod, Secret};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, LogParams};
use memcached_operator::admission::Defaults;
use memcached_operator::api::{CRD_NAME, v1alpha1};
use memcached_operator::operator::{
    CERT_MANAGER_CERT_SECRET_NAME as SECRET, MUTATING_CONFIGURATION_NAME,
    VALIDATING_CONFIGURATION_NAME,
};
use testkit::cases::{DENIED_BY_VALIDATOR, over_the_memory_limit};
use testkit::writer::Writer;

use crate::cluster::{Env, WAIT, eventually};

/// The validities installed: renewals every 38 s or so, a new CA every 76 s.
const VALUES: &str = "certificates.caValidity=2m certificates.certValidity=1m";
/// The longest the renewals below may take to happen.
const RENEWALS: Duration = Duration::from_secs(300);

/// What the Secret held at one look.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Held {
    /// Each CA in `ca.crt`, as PEM, the current one first.
    cas: Vec<String>,
    /// The serving certificate's serial.
    serial: String,
}

fn cas(pem: &[u8]) -> Vec<String> {
    let text = String::from_utf8_lossy(pem);
    text.split_inclusive("-----END CERTIFICATE-----")
        .map(str::trim)
        .filter(|block| block.contains("BEGIN CERTIFICATE"))
        .map(str::to_string)
        .collect()
}

async fn held(secrets: &Api<Secret>) -> Option<Held> {
    let secret = secrets.get_opt(SECRET).await.ok()??;
    let data = secret.data?;
    let (_, serial, _) = memcached_operator::tls::certs::parse_chain(
        std::path::Path::new("tls.crt"),
        &data.get("tls.crt")?.0,
    )
    .ok()?;
    Some(Held {
        cas: cas(&data.get("ca.crt")?.0),
        serial,
    })
}

/// Every caBundle of the operator's: both configurations' entries and the CRD's conversion.
async fn bundles(env: &Env) -> Vec<Vec<u8>> {
    let mut all = Vec::new();
    let mutating: Api<MutatingWebhookConfiguration> = Api::all(env.client.clone());
    if let Ok(config) = mutating.get(MUTATING_CONFIGURATION_NAME).await {
        for webhook in config.webhooks.unwrap_or_default() {
            all.push(webhook.client_config.ca_bundle.unwrap_or_default().0);
        }
    }
    let validating: Api<ValidatingWebhookConfiguration> = Api::all(env.client.clone());
    if let Ok(config) = validating.get(VALIDATING_CONFIGURATION_NAME).await {
        for webhook in config.webhooks.unwrap_or_default() {
            all.push(webhook.client_config.ca_bundle.unwrap_or_default().0);
        }
    }
    let crds: Api<CustomResourceDefinition> = Api::all(env.client.clone());
    if let Ok(crd) = crds.get(CRD_NAME).await {
        let bundle = crd
            .spec
            .conversion
            .and_then(|c| c.webhook)
            .and_then(|w| w.client_config)
            .and_then(|c| c.ca_bundle)
            .unwrap_or_default();
        all.push(bundle.0);
    }
    all
}

/// The serials each operator pod's manager logged as loaded, by pod.
async fn loaded_serials(env: &Env) -> Vec<(String, BTreeSet<String>)> {
    let pods: Api<Pod> = Api::namespaced(env.client.clone(), &env.installed.namespace);
    let mut all = Vec::new();
    for pod in env.operator_pods().await {
        let name = pod.metadata.name.unwrap_or_default();
        let params = LogParams {
            container: Some("manager".to_string()),
            ..LogParams::default()
        };
        let log = pods.logs(&name, &params).await.unwrap_or_default();
        let serials = log
            .lines()
            .filter_map(|line| serde_json::from_str::<serde_json::Value>(line).ok())
            .filter(|line| line["message"] == "serving certificate loaded")
            .filter_map(|line| line["serial"].as_str().map(str::to_string))
            .collect();
        all.push((name, serials));
    }
    all
}

pub async fn the_operators_own_certificate_serves_and_renews_without_a_failed_write(env: Arc<Env>) {
    let installed = &env.installed;
    let shared = env.clone();
    tokio::task::spawn_blocking(move || testkit::helm::uninstall(&shared.plane))
        .await
        .expect("helm uninstall finished")
        .unwrap_or_else(|error| panic!("{error}"));
    let secrets: Api<Secret> = Api::namespaced(env.client.clone(), &installed.namespace);
    let (ok, _, stderr) = env.kubectl(
        &[
            "delete",
            "secret",
            SECRET,
            "-n",
            &installed.namespace,
            "--ignore-not-found",
        ],
        None,
    );
    assert!(ok, "kubectl delete secret: {stderr}");

    let shared = env.clone();
    let again = tokio::task::spawn_blocking(move || {
        testkit::helm::install_with(
            &shared.plane,
            &[("CERTIFICATES", "operator"), ("HELM_SET", VALUES)],
        )
    })
    .await
    .expect("helm install finished")
    .unwrap_or_else(|error| panic!("{error}"));

    // Nothing of cert-manager's: the operator made the Secret and wrote every caBundle.
    let (ok, listed, stderr) = env.kubectl(
        &[
            "get",
            "certificates,issuers",
            "-n",
            &installed.namespace,
            "-o",
            "name",
        ],
        None,
    );
    assert!(ok, "kubectl get certificates,issuers: {stderr}");
    assert_eq!(listed.trim(), "", "no cert-manager object in the release");
    let secret = secrets.get(SECRET).await.expect("the operator's Secret");
    assert_eq!(
        secret
            .metadata
            .labels
            .unwrap_or_default()
            .get("app.kubernetes.io/managed-by")
            .map(String::as_str),
        Some("memcached-operator")
    );
    let first = held(&secrets)
        .await
        .expect("a CA and a serving certificate");
    assert_eq!(first.cas.len(), 1, "one CA at first");

    let namespace = env.create_namespace("helm-self-signed").await;
    let (ok, _, stderr) = env.kubectl(
        &["apply", "-n", &namespace, "-f", "-"],
        Some("apiVersion: cache.f2367556.dev/v1beta1\nkind: Memcached\nmetadata: {name: sample}\nspec: {replicas: 1}\n"),
    );
    assert!(ok, "kubectl apply: {stderr}");
    env.available(&namespace, "sample", 1).await;
    let (over_limit, expected) =
        over_the_memory_limit("over-limit", &namespace, &Defaults::default());
    let (ok, _, stderr) = env.kubectl(&["apply", "-f", "-"], Some(&over_limit));
    assert!(
        !ok && stderr.contains(DENIED_BY_VALIDATOR) && stderr.contains(&expected),
        "the validator refuses: {stderr:?}"
    );
    let alpha: Api<v1alpha1::Memcached> = Api::namespaced(env.client.clone(), &namespace);
    let read = alpha.get("sample").await.expect("read as v1alpha1");
    assert_eq!(read.spec.size, Some(1));

    // Renewals under a writer, until a second CA was trusted beside the first and then the
    // first expired and went.
    let writer = Writer::start(&env.client, &namespace, "written-through-renewals").await;
    writer.wait_for_writes(20).await;
    let started = Instant::now();
    let mut seen = vec![first.clone()];
    let mut most_cas = 1;
    let done = loop {
        if let Some(now) = held(&secrets).await
            && seen.last() != Some(&now)
        {
            most_cas = most_cas.max(now.cas.len());
            seen.push(now);
        }
        let last = seen.last().expect("one look at least");
        let ca_changed = last.cas.first() != first.cas.first();
        if ca_changed && most_cas == 2 && last.cas.len() == 1 {
            break true;
        }
        if started.elapsed() > RENEWALS {
            break false;
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    };
    let last = seen.last().expect("one look at least").clone();
    // Every caBundle the Secret's ca.crt, and both replicas serving its certificate.
    let final_bundle: String = last.cas.join("\n");
    eventually("every caBundle is the Secret's ca.crt", WAIT, || async {
        let bundles = bundles(&env).await;
        (bundles.len() == 3 && bundles.iter().all(|b| cas(b).join("\n") == final_bundle))
            .then_some(())
    })
    .await;
    let serving = eventually("both replicas serve the last certificate", WAIT, || async {
        let loaded = loaded_serials(&env).await;
        (loaded.len() == 2 && loaded.iter().all(|(_, s)| s.contains(&last.serial)))
            .then_some(loaded)
    })
    .await;
    writer.wait_for_writes(20).await;
    let tally = writer.stop().await;

    let serials: BTreeSet<&str> = seen.iter().map(|h| h.serial.as_str()).collect();
    let ca_count: BTreeSet<&str> = seen
        .iter()
        .filter_map(|h| h.cas.first().map(String::as_str))
        .collect();
    eprintln!(
        "figures: installed with the operator's own certificate in {:.1} s; in {:.1} s of \
         renewals {} serving certificates and {} CAs, at most {most_cas} CAs trusted at once; \
         {} of {} writes failed; loaded by the replicas: {:?}",
        again.ready_after.as_secs_f64(),
        started.elapsed().as_secs_f64(),
        serials.len(),
        ca_count.len(),
        tally.failures.len(),
        tally.attempts,
        serving
            .iter()
            .map(|(pod, serials)| (pod, serials.len()))
            .collect::<Vec<_>>()
    );
    assert!(
        done,
        "within {RENEWALS:?} a new CA was trusted beside the first, then alone: {seen:?}"
    );
    assert!(
        serials.len() >= 3,
        "serving certificates renewed under both CAs: {seen:?}"
    );
    assert!(
        tally.failures.is_empty(),
        "{} of {} writes failed through the renewals: {:?}",
        tally.failures.len(),
        tally.attempts,
        tally.failures
    );
    assert!(tally.attempts > 100, "the writer wrote: {}", tally.attempts);
    let (ok, _, stderr) = env.kubectl(&["delete", "memcacheds", "--all", "-n", &namespace], None);
    assert!(ok, "kubectl delete memcacheds: {stderr}");
}
