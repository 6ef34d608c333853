//! A renewal that changes the CA, the way cert-manager renews a self-signed certificate and
//! cainjector follows: the new pair lands in the operator's files first, and the CA bundles the
//! API server reads are rewritten a few seconds later. The operator keeps serving the old pair
//! until a bundle accepts the new one (`--wait-for-ca-trust`, on by default); the same renewal
//! with it turned off shows the window it closes. Writers run through both: v1beta1 patches
//! (mutating and validating webhooks) alternating with v1alpha1 reads (the conversion webhook).
//!
//! The window only hurts new connections: the API server's kept-alive ones finished their
//! handshake with the old pair. So the writers are more than the API server keeps idle
//! connections for, which makes it open new ones throughout, as any burst does.

use std::sync::Arc;
use std::time::{Duration, Instant};

use kube::api::{
    Api, ApiResource, DynamicObject, GroupVersionKind, Patch, PatchParams, PostParams,
};
use memcached_operator::api::v1beta1::{Memcached, MemcachedSpec};
use serde_json::json;
use testkit::cert_layout::{self, Layout};
use testkit::client::TlsClient;
use testkit::pki::{Ca, KeyForm};

use crate::cluster::{Env, eventually};

/// Writers at once: more calls than the API server keeps idle connections for, so that it
/// opens new ones (new handshakes) during the renewal, as it does under any burst.
const WRITERS: usize = 30;
/// How long the second half of a renewal lags behind the first.
const LAG: Duration = Duration::from_secs(3);
/// Calls that may fail in the race between the API server's informer and the operator's
/// watch seeing the same rewrite of a bundle.
const RACE: usize = 2;
/// The Secret the operator may read the serving certificate from, in its namespace.
const CERT_SECRET: &str = "e2e-serving-cert";

/// The serial the webhook port presents to a client that trusts `ca`.
async fn served_serial(env: &Env, ca: &Ca) -> Option<String> {
    let address = env.webhook_address();
    TlsClient::new(address, &ca.pem)
        .post("/convert", "{}")
        .await
        .ok()
        .map(|answer| answer.serial)
}

/// What one renewal under writes came to.
struct Renewal {
    writes: usize,
    failures: Vec<String>,
    /// From the bundles' rewrite to the new serial being served.
    served_after_bundles: Duration,
}

/// In which order a renewal reaches the operator and the API server.
#[derive(Clone, Copy)]
enum Order {
    /// The files, then (after [`LAG`]) the bundles: cert-manager's self-signed renewal when
    /// the kubelet is quick.
    FilesFirst,
    /// The Secret and the bundles, then (after [`LAG`]) the files: OLM v0's rotation, and
    /// cert-manager's when the kubelet delivers the Secret at its next sync.
    BundlesFirst,
}

/// Renews to a pair of the `to` CA in `order`, writing through it all.
async fn renew(env: &Env, namespace: &str, to: &Ca, order: Order) -> Renewal {
    let api: Api<Memcached> = Api::namespaced(env.client.clone(), namespace);
    let gvk = GroupVersionKind::gvk(memcached_operator::api::GROUP, "v1alpha1", "Memcached");
    let resource = ApiResource::from_gvk_with_plural(&gvk, memcached_operator::api::PLURAL);
    let old_api: Api<DynamicObject> =
        Api::namespaced_with(env.client.clone(), namespace, &resource);
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let writers: Vec<_> = (0..WRITERS)
        .map(|writer| {
            let stop = stop.clone();
            let api = api.clone();
            let old_api = old_api.clone();
            tokio::spawn(async move {
                let mut writes = 0;
                let mut failures = Vec::new();
                let mut round = 0u64;
                while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                    round += 1;
                    let result = if round.is_multiple_of(2) {
                        let label = format!("writer-{writer}");
                        let patch = json!({"metadata": {"labels": {label: round.to_string()}}});
                        api.patch("renewed", &PatchParams::default(), &Patch::Merge(&patch))
                            .await
                            .map(|_| ())
                    } else {
                        old_api.get("renewed").await.map(|_| ())
                    };
                    writes += 1;
                    if let Err(error) = result {
                        failures.push(error.to_string());
                    }
                    tokio::time::sleep(Duration::from_millis(20)).await;
                }
                (writes, failures)
            })
        })
        .collect();
    tokio::time::sleep(Duration::from_secs(1)).await;
    let leaf = to.serving(KeyForm::EcPkcs8);
    let write_files = || {
        cert_layout::write(
            env.cert_root.path(),
            Layout::ServingCerts,
            &leaf.cert_pem,
            &leaf.key_pem,
        )
    };
    if let Order::FilesFirst = order {
        write_files();
        tokio::time::sleep(LAG).await;
    } else {
        env.write_cert_secret(CERT_SECRET, &leaf.cert_pem, &leaf.key_pem)
            .await;
    }
    let rewritten = Instant::now();
    env.install_wiring_with(&to.pem)
        .await
        .expect("the bundles rewritten");
    let served = async {
        eventually(
            "the renewed certificate is served",
            Duration::from_secs(120),
            || async { (served_serial(env, to).await? == leaf.serial).then_some(()) },
        )
        .await;
        rewritten.elapsed()
    };
    let files_last = async {
        if let Order::BundlesFirst = order {
            tokio::time::sleep(LAG).await;
            write_files();
        }
    };
    let (served_after_bundles, ()) = tokio::join!(served, files_last);
    tokio::time::sleep(Duration::from_secs(1)).await;
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let mut writes = 0;
    let mut failures = Vec::new();
    for writer in writers {
        let (done, failed) = writer.await.expect("a writer finishes");
        writes += done;
        failures.extend(failed);
    }
    Renewal {
        writes,
        failures,
        served_after_bundles,
    }
}

pub async fn a_renewal_under_a_new_ca_is_served_once_the_api_server_trusts_it(env: Arc<Env>) {
    let namespace = env.create_namespace("e2e-renewal").await;
    let api: Api<Memcached> = Api::namespaced(env.client.clone(), &namespace);
    api.create(
        &PostParams::default(),
        &Memcached::new("renewed", MemcachedSpec::default()),
    )
    .await
    .expect("created");
    let secret_flag = format!("--cert-secret={CERT_SECRET}");

    // The files first, the operator waiting for the bundles (the default).
    let pid = env.operator_pid().await;
    let files_first = renew(&env, &namespace, &Ca::root(), Order::FilesFirst).await;
    let pid_after = env.operator_pid().await;
    let holding_logged = env
        .operator_logs_containing(
            "holding the renewed certificate until the API server trusts its CA",
        )
        .await;
    let held_ms: Vec<f64> = env
        .operator_logs_containing("the API server now trusts the held certificate")
        .await
        .iter()
        .filter_map(|line| line["held_ms"].as_f64())
        .collect();

    // The bundles first, the operator reading the certificate's Secret.
    env.restart_operator(&[&secret_flag]).await;
    let bundles_first = renew(&env, &namespace, &Ca::root(), Order::BundlesFirst).await;
    let from_secret = env
        .operator_logs_containing("serving certificate loaded")
        .await
        .iter()
        .any(|line| {
            line["source"]
                .as_str()
                .is_some_and(|source| source.contains(CERT_SECRET))
        });

    // Both orders without what closes their windows.
    env.restart_operator(&["--wait-for-ca-trust=false"]).await;
    let files_first_careless = renew(&env, &namespace, &Ca::root(), Order::FilesFirst).await;
    let bundles_first_careless = renew(&env, &namespace, &Ca::root(), Order::BundlesFirst).await;

    // Back to the suite's CA and the operator as the suite runs it.
    env.restart_operator(&[]).await;
    let back = renew(&env, &namespace, &env.ca, Order::FilesFirst).await;

    let count = |renewal: &Renewal| format!("{} of {}", renewal.failures.len(), renewal.writes);
    println!(
        "figures: renewals under a new CA, {WRITERS} writers, the second half {:.0} s after the \
         first. Files first: waiting for the bundles, {} calls failed (held {:.2} s, served \
         {:.2} s after the rewrite began); without, {}. Bundles first: reading the Secret, {} \
         failed (served {:.2} s after the rewrite began); without, {}. Back to the suite's CA: {}",
        LAG.as_secs_f64(),
        count(&files_first),
        held_ms.first().copied().unwrap_or_default() / 1000.0,
        files_first.served_after_bundles.as_secs_f64(),
        count(&files_first_careless),
        count(&bundles_first),
        bundles_first.served_after_bundles.as_secs_f64(),
        count(&bundles_first_careless),
        count(&back),
    );
    assert_eq!(pid, pid_after, "the same process served both pairs");
    assert!(
        !holding_logged.is_empty(),
        "the operator said it held the renewal"
    );
    assert!(
        !held_ms.is_empty(),
        "the operator said when it served the held renewal"
    );
    assert!(
        from_secret,
        "the operator served the pair read from the Secret"
    );
    // What is left is the race between the API server's informer and the operator's watch
    // of the same change: a handshake or two, not the seconds of the lag.
    for (what, renewal) in [
        ("files first", &files_first),
        ("bundles first", &bundles_first),
        ("back", &back),
    ] {
        assert!(
            renewal.failures.len() <= RACE && renewal.failures.iter().all(|f| f.contains("x509")),
            "{what}: more calls failed than the watch's race explains: {:?}",
            renewal.failures
        );
    }
    assert!(
        bundles_first_careless.failures.len() > 10 * RACE
            && bundles_first_careless
                .failures
                .iter()
                .all(|f| f.contains("x509") || f.contains("certificate")),
        "bundles first, with the files only: calls should fail until the files land: {:?}",
        bundles_first_careless.failures.len()
    );
}
