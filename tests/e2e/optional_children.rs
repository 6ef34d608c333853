//! The children of kinds other projects define: the cert-manager Certificate of
//! `spec.tls.issuerRef` and the ServiceMonitor of `spec.monitoring.serviceMonitor`. Where the
//! cluster does not serve their APIs the Memcached is told so by a warning Event and the rest is
//! reconciled; once the real CRDs (cert-manager's, the Prometheus Operator's) are installed and
//! the operator restarted, both are written, owned, and accepted by those CRDs' own schemas,
//! and removed when no longer asked for. Issuing is cert-manager's: the node suite proves it.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::events::v1::Event;
use kube::ResourceExt;
use kube::api::{Api, ApiResource, DynamicObject, ListParams, Patch, PatchParams, PostParams};
use kube::core::GroupVersionKind;
use memcached_operator::api::v1beta1::Memcached;
use serde_json::json;
use testkit::repository;

use crate::cluster::{Env, eventually, kubectl};

const WAIT: Duration = Duration::from_secs(60);
const CERT_MANAGER_CRDS: &str = ".tools/cert-manager/crds/cert-manager.crds.yaml";
const SERVICE_MONITOR_CRD: &str =
    ".tools/prometheus-operator/crds/monitoring.coreos.com_servicemonitors.yaml";

pub async fn certificates_and_service_monitors_are_written_where_their_apis_are_served(
    env: Arc<Env>,
) {
    let namespace = env.create_namespace("e2e-optional-children").await;
    let memcacheds: Api<Memcached> = Api::namespaced(env.client.clone(), &namespace);
    let object: Memcached = serde_json::from_value(json!({
        "apiVersion": "cache.f2367556.dev/v1beta1",
        "kind": "Memcached",
        "metadata": { "name": "cache" },
        "spec": {
            "replicas": 0,
            "tls": {
                "secretName": "cache-tls",
                "clientAuth": "Require",
                "issuerRef": { "name": "cache-ca", "kind": "Issuer" },
            },
            "monitoring": {
                "serviceMonitor": { "interval": "30s", "labels": { "release": "prometheus" } },
            },
        },
    }))
    .expect("a Memcached");
    let created = memcacheds
        .create(&PostParams::default(), &object)
        .await
        .expect("the Memcached is created");

    // Neither API is served: a warning says so, and the rest is reconciled.
    let events: Api<Event> = Api::namespaced(env.client.clone(), &namespace);
    let warning = eventually("the warning that the APIs are not served", WAIT, || async {
        events
            .list(&ListParams::default())
            .await
            .ok()?
            .items
            .into_iter()
            .find(|e| e.reason.as_deref() == Some("APIUnavailable"))
    })
    .await;
    let note = warning.note.unwrap_or_default();
    eprintln!("optional children, APIs absent: {note}");
    assert_eq!(warning.type_.as_deref(), Some("Warning"));
    assert!(
        note.contains("no Certificate is written") && note.contains("cert-manager.io/v1"),
        "{note}"
    );
    assert!(
        note.contains("no ServiceMonitor is written") && note.contains("monitoring.coreos.com/v1"),
        "{note}"
    );
    let statefulsets: Api<k8s_openapi::api::apps::v1::StatefulSet> =
        Api::namespaced(env.client.clone(), &namespace);
    eventually("the StatefulSet is written all the same", WAIT, || async {
        statefulsets.get_opt("cache").await.ok().flatten()
    })
    .await;

    // The real CRDs, then a restart: the operator looks for the APIs when it starts.
    for crd in [CERT_MANAGER_CRDS, SERVICE_MONITOR_CRD] {
        install_crds(&env, &repository::root().join(crd));
    }
    env.restart_operator(&[]).await;
    let certificates = api(&env, &namespace, "cert-manager.io", "Certificate");
    let monitors = api(&env, &namespace, "monitoring.coreos.com", "ServiceMonitor");
    let certificate = eventually("the Certificate is written", WAIT, || async {
        certificates.get_opt("cache").await.ok().flatten()
    })
    .await;
    let monitor = eventually("the ServiceMonitor is written", WAIT, || async {
        monitors.get_opt("cache").await.ok().flatten()
    })
    .await;
    for child in [&certificate, &monitor] {
        let owners = child.owner_references();
        assert_eq!(owners.len(), 1, "{owners:?}");
        assert_eq!(Some(owners[0].uid.clone()), created.uid());
        assert_eq!(owners[0].controller, Some(true));
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
        monitor.labels().get("release").map(String::as_str),
        Some("prometheus")
    );
    assert_eq!(
        monitor.data["spec"]["endpoints"],
        json!([{ "port": "metrics", "path": "/metrics", "scheme": "http", "interval": "30s" }])
    );
    eprintln!(
        "optional children: after the CRDs and a restart, Certificate {} and ServiceMonitor {} \
         written and owned",
        certificate.name_any(),
        monitor.name_any()
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

fn api(env: &Env, namespace: &str, group: &str, kind: &str) -> Api<DynamicObject> {
    let resource = ApiResource::from_gvk(&GroupVersionKind::gvk(group, "v1", kind));
    Api::namespaced_with(env.client.clone(), namespace, &resource)
}

/// Applies the CRDs of `path` and waits until they are established.
fn install_crds(env: &Env, path: &Path) {
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
    let (ok, _, stderr) = kubectl(
        env,
        &[
            "wait",
            "--for=condition=Established",
            "--timeout=60s",
            "-f",
            &file,
        ],
        None,
    );
    assert!(ok, "the CRDs of {file} are established: {stderr}");
}
