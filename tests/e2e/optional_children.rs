//! The children of kinds other projects define: the cert-manager Certificates of
//! `spec.tls.issuerRef`, the ServiceMonitor of `spec.monitoring.serviceMonitor` and the
//! PrometheusRule of `spec.monitoring.rules` (on by default with monitoring).
//!
//! Where the cluster does not serve their APIs the Memcached says so (Degraded, reason
//! APIUnavailable, and a warning Event) and the rest is reconciled; the alerting rules only
//! when asked for in so many words (`rules.enabled: true`), since they are on by default. Once
//! the real CRDs (cert-manager's, the Prometheus Operator's) are installed, with the operator
//! running all along, all are written, owned, and accepted by those CRDs' own schemas, and
//! removed when no longer asked for. A Certificate API the operator may not list holds up no other Memcached:
//! an operator without that right reconciles every other Memcached and the rest of the one that
//! asks for a Certificate, says why on it, on an Event and a metric, and writes the Certificate
//! once it is given the right. Issuing is cert-manager's: the node suite proves it.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::apps::v1::StatefulSet;
use k8s_openapi::api::events::v1::Event;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use kube::ResourceExt;
use kube::api::{Api, ApiResource, DynamicObject, ListParams, Patch, PatchParams, PostParams};
use kube::core::GroupVersionKind;
use memcached_operator::api::v1beta1::Memcached;
use serde_json::{Value, json};
use testkit::repository;

use crate::cluster::{Env, eventually, kubectl};
use crate::restricted::{Restricted, metric};

const WAIT: Duration = Duration::from_secs(60);
const CERT_MANAGER_CRDS: &str = ".tools/cert-manager/crds/cert-manager.crds.yaml";
const SERVICE_MONITOR_CRD: &str =
    ".tools/prometheus-operator/crds/monitoring.coreos.com_servicemonitors.yaml";
const PROMETHEUS_RULE_CRD: &str =
    ".tools/prometheus-operator/crds/monitoring.coreos.com_prometheusrules.yaml";

fn memcached(name: &str, spec: Value) -> Memcached {
    serde_json::from_value(json!({
        "apiVersion": "cache.f2367556.dev/v1beta1",
        "kind": "Memcached",
        "metadata": { "name": name },
        "spec": spec,
    }))
    .expect("a Memcached")
}

fn secured_and_monitored() -> Value {
    json!({
        "replicas": 0,
        "tls": {
            "secretName": "cache-tls",
            "clientAuth": "Require",
            "issuerRef": { "name": "cache-ca", "kind": "Issuer" },
        },
        "monitoring": {
            "serviceMonitor": { "interval": "30s", "labels": { "release": "prometheus" } },
        },
    })
}

/// The Degraded condition of `name` once it is `status` at the current generation.
async fn degraded(api: &Api<Memcached>, name: &str, status: &str, why: &str) -> Condition {
    eventually(why, WAIT, || async {
        let memcached = api.get(name).await.ok()?;
        let condition = memcached
            .status?
            .conditions?
            .into_iter()
            .find(|c| c.type_ == "Degraded")?;
        (condition.status == status
            && condition.observed_generation == memcached.metadata.generation)
            .then_some(condition)
    })
    .await
}

/// The Event `reason` about the Memcached `name`.
pub async fn event_about(env: &Env, namespace: &str, name: &str, reason: &str) -> Event {
    let events: Api<Event> = Api::namespaced(env.client.clone(), namespace);
    eventually(
        &format!("the {reason} Event about {name}"),
        WAIT,
        || async {
            events
                .list(&ListParams::default())
                .await
                .ok()?
                .items
                .into_iter()
                .find(|e| {
                    e.reason.as_deref() == Some(reason)
                        && e.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some(name)
                })
        },
    )
    .await
}

pub async fn certificates_and_service_monitors_are_written_once_their_apis_are_installed(
    env: Arc<Env>,
) {
    let namespace = env.create_namespace("e2e-optional-children").await;
    let memcacheds: Api<Memcached> = Api::namespaced(env.client.clone(), &namespace);
    let created = memcacheds
        .create(
            &PostParams::default(),
            &memcached("cache", secured_and_monitored()),
        )
        .await
        .expect("the Memcached is created");
    // The alerting rules asked for in so many words, with the labels a ruleSelector matches.
    let alerted = memcacheds
        .create(
            &PostParams::default(),
            &memcached(
                "alerted",
                json!({
                    "replicas": 0,
                    "monitoring": {
                        "rules": { "enabled": true, "labels": { "role": "alert-rules" } },
                    },
                }),
            ),
        )
        .await
        .expect("the Memcached is created");

    // Neither API is served: the status and a warning say so, and the rest is reconciled.
    let unavailable = degraded(&memcacheds, "cache", "True", "Degraded: APIs not served").await;
    eprintln!("optional children, APIs absent: {}", unavailable.message);
    assert_eq!(unavailable.reason, "APIUnavailable");
    for said in [
        "no Certificate is written",
        "cert-manager.io/v1",
        "no ServiceMonitor is written",
        "monitoring.coreos.com/v1",
    ] {
        assert!(
            unavailable.message.contains(said),
            "{}",
            unavailable.message
        );
    }
    // On by default: not said where not served, unless asked for.
    assert!(
        !unavailable.message.contains("PrometheusRule"),
        "{}",
        unavailable.message
    );
    let warning = event_about(&env, &namespace, "cache", "APIUnavailable").await;
    assert_eq!(warning.type_.as_deref(), Some("Warning"));
    assert_eq!(warning.note.as_deref(), Some(unavailable.message.as_str()));
    let rules_unavailable = degraded(
        &memcacheds,
        "alerted",
        "True",
        "Degraded: PrometheusRules not served",
    )
    .await;
    assert_eq!(rules_unavailable.reason, "APIUnavailable");
    assert!(
        rules_unavailable
            .message
            .contains("no PrometheusRule is written")
            && rules_unavailable
                .message
                .contains("prometheusrules.monitoring.coreos.com"),
        "{}",
        rules_unavailable.message
    );
    let statefulsets: Api<StatefulSet> = Api::namespaced(env.client.clone(), &namespace);
    eventually("the StatefulSet is written all the same", WAIT, || async {
        statefulsets.get_opt("cache").await.ok().flatten()
    })
    .await;

    // The real CRDs, and no restart: the operator follows them.
    let pid = env.operator_pid().await;
    for crd in [CERT_MANAGER_CRDS, SERVICE_MONITOR_CRD, PROMETHEUS_RULE_CRD] {
        install_crds(&env, &repository::root().join(crd)).await;
    }
    let certificates = api(&env, &namespace, "cert-manager.io", "Certificate");
    let monitors = api(&env, &namespace, "monitoring.coreos.com", "ServiceMonitor");
    let rules = api(&env, &namespace, "monitoring.coreos.com", "PrometheusRule");
    let certificate = written(&certificates, "cache", "the Certificate").await;
    let monitor = written(&monitors, "cache", "the ServiceMonitor").await;
    let client_certificate =
        written(&certificates, "cache-client", "the sidecars' Certificate").await;
    let rule = written(&rules, "cache", "the PrometheusRule").await;
    let alerted_rule = written(&rules, "alerted", "the asked-for PrometheusRule").await;
    assert_eq!(env.operator_pid().await, pid, "the same operator process");
    let cleared = degraded(&memcacheds, "cache", "False", "Degraded cleared").await;
    assert_eq!(cleared.reason, "AsExpected");
    let cleared = degraded(&memcacheds, "alerted", "False", "Degraded cleared").await;
    assert_eq!(cleared.reason, "AsExpected");
    for child in [&certificate, &client_certificate, &monitor, &rule] {
        let owners = child.owner_references();
        assert_eq!(owners.len(), 1, "{owners:?}");
        assert_eq!(Some(owners[0].uid.clone()), created.uid());
        assert_eq!(owners[0].controller, Some(true));
    }
    assert_eq!(
        alerted_rule.owner_references()[0].uid,
        alerted.uid().expect("a uid")
    );
    assert_eq!(
        alerted_rule.labels().get("role").map(String::as_str),
        Some("alert-rules")
    );
    // The rules, as the CRD's schema accepted them: one group of this Memcached's alerts.
    let groups = rule.data["spec"]["groups"].as_array().expect("groups");
    assert_eq!(groups.len(), 1, "{groups:?}");
    assert_eq!(groups[0]["name"], format!("memcached.{namespace}.cache"));
    let alerts: Vec<&str> = groups[0]["rules"]
        .as_array()
        .expect("rules")
        .iter()
        .filter_map(|rule| rule["alert"].as_str())
        .collect();
    for alert in [
        "MemcachedDown",
        "MemcachedEvicting",
        "MemcachedCertificateExpiresSoon",
    ] {
        assert!(alerts.contains(&alert), "{alerts:?}");
    }
    let spec = &certificate.data["spec"];
    assert_eq!(spec["secretName"], "cache-tls");
    assert_eq!(
        spec["issuerRef"],
        json!({ "name": "cache-ca", "kind": "Issuer", "group": "cert-manager.io" })
    );
    assert!(
        spec["dnsNames"]
            .as_array()
            .is_some_and(|names| names.contains(&json!(format!("*.cache.{namespace}.svc")))),
        "{spec}"
    );
    assert_eq!(
        spec["usages"],
        json!(["digital signature", "key encipherment", "server auth"])
    );
    // The sidecars' own: client authentication only, into a Secret of their own.
    let client_spec = &client_certificate.data["spec"];
    assert_eq!(client_spec["secretName"], "cache-client-tls");
    assert_eq!(client_spec["commonName"], "cache-client");
    assert_eq!(client_spec["issuerRef"], spec["issuerRef"]);
    assert_eq!(
        client_spec["usages"],
        json!(["digital signature", "key encipherment", "client auth"])
    );
    assert!(client_spec.get("dnsNames").is_none(), "{client_spec}");
    assert_eq!(
        monitor.labels().get("release").map(String::as_str),
        Some("prometheus")
    );
    // The exporter's port, and the refresher's and the relay's, which serve their metrics.
    assert_eq!(
        monitor.data["spec"]["endpoints"],
        json!(["metrics", "refresh-health", "relay-health"].map(
            |port| json!({ "port": port, "path": "/metrics", "scheme": "http", "interval": "30s" })
        ))
    );
    eprintln!(
        "optional children: once the CRDs are installed, with no restart, Certificate {}, \
         ServiceMonitor {} and PrometheusRule {} ({} alerts) written and owned",
        certificate.name_any(),
        monitor.name_any(),
        rule.name_any(),
        alerts.len()
    );

    // The alerting rules turned off: the PrometheusRule goes, the ServiceMonitor stays.
    memcacheds
        .patch(
            "cache",
            &PatchParams::default(),
            &Patch::Merge(json!({ "spec": { "monitoring": { "rules": { "enabled": false } } } })),
        )
        .await
        .expect("the Memcached is patched");
    eventually("the PrometheusRule is removed", WAIT, || async {
        rules.get_opt("cache").await.ok()?.is_none().then_some(())
    })
    .await;
    assert!(
        monitors
            .get_opt("cache")
            .await
            .expect("the ServiceMonitors can be read")
            .is_some(),
        "the ServiceMonitor stays"
    );

    // No client certificate asked for: the sidecars' Certificate goes, the servers' stays.
    memcacheds
        .patch(
            "cache",
            &PatchParams::default(),
            &Patch::Merge(json!({ "spec": { "tls": { "clientAuth": "None" } } })),
        )
        .await
        .expect("the Memcached is patched");
    eventually("the sidecars' Certificate is removed", WAIT, || async {
        certificates
            .get_opt("cache-client")
            .await
            .ok()?
            .is_none()
            .then_some(())
    })
    .await;
    assert!(
        certificates
            .get_opt("cache")
            .await
            .expect("the Certificates can be read")
            .is_some(),
        "the servers' Certificate stays"
    );

    // No longer asked for: both go.
    memcacheds
        .patch(
            "cache",
            &PatchParams::default(),
            &Patch::Merge(json!({ "spec": { "tls": null, "monitoring": null } })),
        )
        .await
        .expect("the Memcached is patched");
    eventually(
        "the Certificate and the ServiceMonitor are removed",
        WAIT,
        || async {
            let certificate = certificates.get_opt("cache").await.ok()?;
            let monitor = monitors.get_opt("cache").await.ok()?;
            (certificate.is_none() && monitor.is_none()).then_some(())
        },
    )
    .await;
}

pub async fn a_certificate_api_that_cannot_be_listed_holds_up_no_other_memcached(env: Arc<Env>) {
    let namespace = env.create_namespace("e2e-unlistable").await;
    let restricted = Restricted::start(
        &env,
        &namespace,
        "e2e-operator-without-certificates",
        |rule| {
            rule.api_groups
                .iter()
                .flatten()
                .any(|g| g == "cert-manager.io")
        },
    )
    .await;
    let memcacheds: Api<Memcached> = Api::namespaced(env.client.clone(), &namespace);
    for (name, spec) in [
        ("secured", secured_and_monitored()),
        ("plain", json!({ "replicas": 0 })),
    ] {
        memcacheds
            .create(&PostParams::default(), &memcached(name, spec))
            .await
            .expect("the Memcached is created");
    }
    let plain = degraded(
        &memcacheds,
        "plain",
        "False",
        "the other Memcached is reconciled",
    )
    .await;
    assert_eq!(plain.reason, "AsExpected");
    let statefulsets: Api<StatefulSet> = Api::namespaced(env.client.clone(), &namespace);
    for name in ["plain", "secured"] {
        eventually(&format!("StatefulSet {name} is written"), WAIT, || async {
            statefulsets.get_opt(name).await.ok().flatten()
        })
        .await;
    }
    let unlistable = degraded(
        &memcacheds,
        "secured",
        "True",
        "Degraded: Certificates unlistable",
    )
    .await;
    eprintln!(
        "a Certificate API that cannot be listed: {}",
        unlistable.message
    );
    assert_eq!(unlistable.reason, "APIUnavailable");
    assert!(
        unlistable
            .message
            .contains("no Certificate is written: Certificates cannot be listed")
            && unlistable.message.contains("forbidden"),
        "{}",
        unlistable.message
    );
    let said = event_about(&env, &namespace, "secured", "APIUnavailable").await;
    assert_eq!(said.note.as_deref(), Some(unlistable.message.as_str()));
    let failing = "memcached_operator_controller_watch_failing";
    let server = &restricted.server;
    assert_eq!(metric(server, failing, "kind=\"Certificates\"").await, 1.0);
    assert_eq!(metric(server, failing, "kind=\"StatefulSets\"").await, 0.0);

    // The right given back: the Certificate is written, by the same process.
    restricted.restore_rights(&env).await;
    let certificates = api(&env, &namespace, "cert-manager.io", "Certificate");
    eventually(
        "the Certificate is written once it may be listed",
        WAIT,
        || async { certificates.get_opt("secured").await.ok().flatten() },
    )
    .await;
    let cleared = degraded(&memcacheds, "secured", "False", "Degraded cleared").await;
    assert_eq!(cleared.reason, "AsExpected");
    assert_eq!(metric(server, failing, "kind=\"Certificates\"").await, 0.0);
    restricted.stop(&env).await;
}

/// The object `name` of `api` once it exists; `what` names it in the wait.
async fn written(api: &Api<DynamicObject>, name: &str, what: &str) -> DynamicObject {
    eventually(&format!("{what} is written"), WAIT, || async {
        api.get_opt(name).await.ok().flatten()
    })
    .await
}

fn api(env: &Env, namespace: &str, group: &str, kind: &str) -> Api<DynamicObject> {
    let resource = ApiResource::from_gvk(&GroupVersionKind::gvk(group, "v1", kind));
    Api::namespaced_with(env.client.clone(), namespace, &resource)
}

/// Applies the CRDs of `path` and waits until they are established. `kubectl wait` fails at
/// once, rather than waiting, on a CRD whose status has no conditions yet (the API server's
/// controller writes them moments after the create, later on a busy machine), so it is asked
/// again, every second, until [`WAIT`].
async fn install_crds(env: &Env, path: &Path) {
    let file = path.to_string_lossy();
    let (ok, _, stderr) = kubectl(
        env,
        &["apply", "--server-side", "--force-conflicts", "-f", &file],
        None,
    );
    assert!(
        ok,
        "kubectl apply {file} (hack/tools.sh copies it): {stderr}"
    );
    let deadline = tokio::time::Instant::now() + WAIT;
    loop {
        let (ok, _, stderr) = kubectl(
            env,
            &[
                "wait",
                "--for=condition=Established",
                "--timeout=10s",
                "-f",
                &file,
            ],
            None,
        );
        if ok {
            return;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "the CRDs of {file} are not established after {WAIT:?}: {stderr}"
        );
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
}
