//! After the install: OLM rotating the webhooks' certificate while writes go on, and what an
//! uninstall leaves behind.

use std::sync::Arc;
use std::time::{Duration, Instant};

use k8s_openapi::api::admissionregistration::v1::{
    MutatingWebhookConfiguration, ValidatingWebhookConfiguration,
};
use k8s_openapi::api::apps::v1::{Deployment, StatefulSet};
use k8s_openapi::api::core::v1::{Secret, Service};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, ListParams};
use memcached_operator::api::{CRD_NAME, v1alpha1, v1beta1};
use rustls_pki_types::CertificateDer;
use rustls_pki_types::pem::PemObject;
use testkit::client::TlsClient;
use testkit::pki::serial_of;

use crate::cluster::{Env, WAIT, eventually};
use testkit::writer::Writer;

/// OLM's names: the Service in front of the webhooks, and its certificate Secret.
fn service_name(env: &Env) -> String {
    format!("{}-service", env.installed.deployment)
}

/// The serial of the first certificate in `pem`.
fn serial_of_pem(pem: &[u8]) -> Option<String> {
    let der = CertificateDer::pem_slice_iter(pem).next()?.ok()?;
    Some(serial_of(&der))
}

/// The Secret's serving certificate serial and CA (OLM's `olmCAKey`), once both are there.
async fn secret_state(env: &Env) -> Option<(String, String)> {
    let secrets: Api<Secret> = Api::namespaced(env.client.clone(), &env.installed.namespace);
    let secret = secrets
        .get(&format!("{}-cert", service_name(env)))
        .await
        .ok()?;
    let data = secret.data?;
    let serial = serial_of_pem(&data.get("tls.crt")?.0)?;
    let ca = String::from_utf8(data.get("olmCAKey")?.0.clone()).ok()?;
    Some((serial, ca))
}

/// The serial the webhook Service serves, through its ClusterIP as the API server dials it,
/// verified against `ca` for the Service's DNS name.
pub async fn served_serial(env: &Env, ca: &str) -> Option<String> {
    let services: Api<Service> = Api::namespaced(env.client.clone(), &env.installed.namespace);
    let service = services.get(&service_name(env)).await.ok()?;
    let ip = service.spec?.cluster_ip?;
    let address = format!("{ip}:443").parse().ok()?;
    let name = format!("{}.{}.svc", service_name(env), env.installed.namespace);
    TlsClient::new(address, ca)
        .with_server_name(&name)
        .served_serial()
        .await
}

/// The CA the API server trusts for the webhooks now: the caBundle OLM wrote into the
/// mutating configuration of the current CSV.
async fn trusted_ca(env: &Env) -> Option<String> {
    let owned = ListParams::default().labels(&format!("olm.owner={}", env.current_csv()));
    let api: Api<MutatingWebhookConfiguration> = Api::all(env.client.clone());
    let configuration = api.list(&owned).await.ok()?.items.into_iter().next()?;
    let bundle = configuration
        .webhooks?
        .first()?
        .client_config
        .ca_bundle
        .clone()?;
    String::from_utf8(bundle.0).ok()
}

/// Waits until the certificate every connection gets is trusted by the CA the API server
/// holds (six handshakes in a row), and that CA has then stayed the same for 5 s (OLM may
/// issue another one after the rollout, when it checks the new CSV's certificate); returns
/// when the last switch settled.
pub async fn ca_switch_settled(env: &Env) -> Instant {
    for _ in 0..5 {
        let (ca, settled) = eventually(
            "the served certificate is the one the API server trusts",
            WAIT,
            || async {
                let ca = trusted_ca(env).await?;
                for _ in 0..6 {
                    served_serial(env, &ca).await?;
                }
                Some((ca, Instant::now()))
            },
        )
        .await;
        tokio::time::sleep(Duration::from_secs(5)).await;
        if trusted_ca(env).await.as_deref() == Some(ca.as_str()) {
            return settled;
        }
    }
    panic!("OLM switched the webhooks' CA five times in a row without settling");
}

/// Whether the operator's Deployment has rolled out completely and every replica is ready.
fn rolled_out(deployment: &Deployment) -> bool {
    let (Some(spec), Some(status)) = (&deployment.spec, &deployment.status) else {
        return false;
    };
    let want = spec.replicas.unwrap_or(1);
    status.observed_generation == deployment.metadata.generation
        && status.updated_replicas == Some(want)
        && status.ready_replicas == Some(want)
        && status.replicas == Some(want)
}

pub async fn olm_rotates_the_certificate_under_continuous_writes(env: Arc<Env>) {
    let namespace = env.create_namespace("olm-rotation").await;
    let (old_serial, old_ca) =
        eventually("OLM's certificate Secret", WAIT, || secret_state(&env)).await;
    assert_eq!(
        served_serial(&env, &old_ca).await.as_deref(),
        Some(old_serial.as_str())
    );
    let old_hash = env
        .deployment()
        .await
        .spec
        .and_then(|s| s.template.metadata)
        .and_then(|m| m.annotations)
        .and_then(|a| a.get("olmcahash").cloned());
    let writer = Writer::start(&env.client, &namespace, "written").await;
    writer.wait_for_writes(20).await;

    // OLM rotates when the Secret no longer holds a valid CA (install/certresources.go,
    // shouldRotateCerts): take the CA away, as a corrupted or hand-edited Secret would.
    let started = Instant::now();
    let secret = format!("{}-cert", service_name(&env));
    let (ok, _, stderr) = env.kubectl(
        &[
            "patch",
            "secret",
            &secret,
            "-n",
            &env.installed.namespace,
            "--type=json",
            "-p",
            r#"[{"op": "remove", "path": "/data/olmCAKey"}]"#,
        ],
        None,
    );
    assert!(ok, "kubectl patch secret {secret}: {stderr}");
    let (new_serial, new_ca) = eventually("OLM issues a new certificate", WAIT, || async {
        secret_state(&env)
            .await
            .filter(|(serial, _)| *serial != old_serial)
    })
    .await;
    let issued = started.elapsed();
    eventually(
        "the Service serves the new serial on every connection",
        WAIT,
        || async {
            for _ in 0..6 {
                if served_serial(&env, &new_ca).await.as_deref() != Some(new_serial.as_str()) {
                    return None;
                }
            }
            Some(())
        },
    )
    .await;
    let served = started.elapsed();
    eventually(
        "OLM's rollout of the new CA hash completes",
        WAIT,
        || async {
            let deployment = env.deployment().await;
            let hash = deployment
                .spec
                .as_ref()
                .and_then(|s| s.template.metadata.as_ref())
                .and_then(|m| m.annotations.as_ref())
                .and_then(|a| a.get("olmcahash").cloned());
            (hash != old_hash && rolled_out(&deployment)).then_some(())
        },
    )
    .await;
    let rolled = started.elapsed();
    eventually("the CSV is Succeeded again", WAIT, || async {
        (crate::install::csv(&env)["status"]["phase"] == "Succeeded").then_some(())
    })
    .await;
    let succeeded = started.elapsed();
    let settled_at = ca_switch_settled(&env).await;
    // Writes go on a little after the last old pod has gone.
    writer.wait_for_writes(30).await;
    let tally = writer.stop().await;
    eprintln!(
        "figures: OLM rotation: new serial {new_serial} issued {:.1} s after the CA was taken away, \
         served on every connection at {:.1} s, rollout done at {:.1} s, CSV Succeeded at {:.1} s; \
         {} writes, {} failed (the API server refusing the old certificate in OLM's CA switch)",
        issued.as_secs_f64(),
        served.as_secs_f64(),
        rolled.as_secs_f64(),
        succeeded.as_secs_f64(),
        tally.attempts,
        tally.failures.len()
    );
    assert!(tally.attempts > 50, "the writer wrote: {tally:?}");
    // Only OLM's CA switch may fail a write, and only before it settled.
    let ours = tally.unexplained(settled_at);
    assert!(
        ours.is_empty(),
        "failed writes during OLM's rotation: {ours:#?}"
    );
    let (ok, _, stderr) = env.kubectl(&["delete", "memcached", "written", "-n", &namespace], None);
    assert!(ok, "kubectl delete: {stderr}");
}

pub async fn uninstalling_leaves_the_crd_and_memcacheds_with_conversion_turned_off(env: Arc<Env>) {
    let installed = &env.installed;
    let namespace = env.create_namespace("olm-uninstall").await;
    let writer = Writer::start(&env.client, &namespace, "left-behind").await;
    writer.stop().await;
    let statefulsets: Api<StatefulSet> = Api::namespaced(env.client.clone(), &namespace);
    eventually("the Memcached's StatefulSet", WAIT, || async {
        statefulsets.get_opt("left-behind").await.ok().flatten()
    })
    .await;

    let csv = env.current_csv();
    for (kind, name) in [
        ("subscription", "memcached-operator"),
        ("csv", csv.as_str()),
    ] {
        let (ok, _, stderr) =
            env.kubectl(&["delete", kind, name, "-n", &installed.namespace], None);
        assert!(ok, "kubectl delete {kind} {name}: {stderr}");
    }
    let owned = ListParams::default().labels(&format!("olm.owner={csv}"));
    let mutating: Api<MutatingWebhookConfiguration> = Api::all(env.client.clone());
    let validating: Api<ValidatingWebhookConfiguration> = Api::all(env.client.clone());
    let deployments: Api<Deployment> = Api::namespaced(env.client.clone(), &installed.namespace);
    let services: Api<Service> = Api::namespaced(env.client.clone(), &installed.namespace);
    let started = Instant::now();
    eventually(
        "the webhook configurations, the Deployment and the Service are gone",
        WAIT,
        || async {
            let left = mutating.list(&owned).await.ok()?.items.len()
                + validating.list(&owned).await.ok()?.items.len()
                + usize::from(
                    deployments
                        .get_opt(&installed.deployment)
                        .await
                        .ok()?
                        .is_some(),
                )
                + usize::from(services.get_opt(&service_name(&env)).await.ok()?.is_some());
            (left == 0).then_some(())
        },
    )
    .await;
    let gone = started.elapsed();

    // What stays: the CRD and the Memcacheds. OLM v0.46 does not leave the conversion stanza
    // pointing at the Service it deleted (OLM issue 2830): when a CSV that is not being
    // replaced goes, it sets the CRD's conversion strategy to None (olm/operator.go,
    // handleClusterServiceVersionDeletion). Reads in v1alpha1 then answer without converting:
    // the stored v1beta1 object relabelled, without v1alpha1's `size`.
    let crds: Api<CustomResourceDefinition> = Api::all(env.client.clone());
    let conversion = eventually("OLM turns the CRD's conversion off", WAIT, || async {
        let conversion = crds.get(CRD_NAME).await.ok()?.spec.conversion?;
        (conversion.strategy == "None").then_some(conversion)
    })
    .await;
    assert!(conversion.webhook.is_none(), "{conversion:?}");
    let beta: Api<v1beta1::Memcached> = Api::namespaced(env.client.clone(), &namespace);
    let stored = beta
        .get("left-behind")
        .await
        .expect("the Memcached reads in v1beta1");
    assert_eq!(stored.spec.replicas, Some(1));
    let alpha: Api<v1alpha1::Memcached> = Api::namespaced(env.client.clone(), &namespace);
    // The API server serves a CRD's new conversion strategy once its own informer has seen
    // the update, a moment after OLM wrote it.
    eventually("v1alpha1 reads are no longer converted", WAIT, || async {
        let read = alpha.get("left-behind").await.ok()?;
        read.spec.size.is_none().then_some(())
    })
    .await;

    // The cleanup the troubleshooting guide gives: the Memcacheds first, while the CRD still
    // serves their kind, so that the garbage collector can resolve their children's owner
    // references and delete the children; then the CRD. Deleting the CRD first races the
    // garbage collector: once its discovery no longer knows the kind, it cannot look an owner
    // up, and it retries such a dependent without end (kube-controller-manager's
    // garbagecollector.go, isDangling), so the StatefulSet would outlive everything.
    let (ok, _, stderr) = env.kubectl(
        &[
            "delete",
            "memcacheds",
            "--all",
            "-n",
            &namespace,
            "--wait=false",
        ],
        None,
    );
    assert!(ok, "kubectl delete memcacheds --all: {stderr}");
    let budgets: Api<PodDisruptionBudget> = Api::namespaced(env.client.clone(), &namespace);
    let namespace_services: Api<Service> = Api::namespaced(env.client.clone(), &namespace);
    let everything = ListParams::default();
    eventually(
        "the Memcached, its StatefulSet, Service and PodDisruptionBudget are gone",
        WAIT,
        || async {
            let left = beta.list(&everything).await.ok()?.items.len()
                + statefulsets.list(&everything).await.ok()?.items.len()
                + namespace_services.list(&everything).await.ok()?.items.len()
                + budgets.list(&everything).await.ok()?.items.len();
            (left == 0).then_some(())
        },
    )
    .await;
    let (ok, _, stderr) = env.kubectl(&["delete", "crd", CRD_NAME, "--wait=false"], None);
    assert!(ok, "kubectl delete crd: {stderr}");
    eventually("the CRD is gone", WAIT, || async {
        crds.get_opt(CRD_NAME).await.ok()?.is_none().then_some(())
    })
    .await;
    eprintln!(
        "figures: uninstall: webhook configurations, Deployment and Service gone {:.1} s after the \
         CSV's deletion; left: the CRD (conversion strategy None) and the Memcacheds, v1alpha1 \
         reads unconverted; deleting the Memcacheds, then the CRD, removed the rest",
        gone.as_secs_f64(),
    );
}
