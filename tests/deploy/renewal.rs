//! Certificate renewals in place, as cert-manager does them for `config/default` (and as
//! OLM v1 relies on): the Secret is rewritten, no pod restarts, and the operator serves the
//! new pair while writes go on.
//!
//! - Under a stable CA (`config/default`'s chain), a renewed leaf changes the serial and the key
//!   but no caBundle: the operator may switch at once.
//! - With a self-signed Issuer (the serving Certificate issued by it directly, as OLM v1 sets it
//!   up), every renewal changes the CA, which the API server trusts only once cainjector has
//!   rewritten the caBundles. The operator reads the Secret itself and keeps serving the old
//!   pair until a caBundle accepts the new one (`--wait-for-ca-trust`, on by default). Without
//!   that it serves what the mounted files hold as soon as they change, as controller-runtime's
//!   certwatcher does; the files land after the caBundles (the kubelet brings a Secret's new
//!   files into a pod at its next sync of it, up to its sync period, a minute), and the calls
//!   in between fail.
//!
//! Each renewal is triggered as `cmctl renew` does it: the Certificate's `Issuing` condition.
//! In the first two, cainjector is held still (stopped) from the trigger until `HOLD` after the
//! Secret changed, as a busy one can be: for that long every caBundle is the old one, and the
//! test asks each replica which certificate it presents. In the third it is left to be as
//! quick as it is, so the caBundles change before the files land.

use std::sync::Arc;
use std::time::{Duration, Instant};

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, Patch, PatchParams};
use serde_json::json;
use testkit::cert_manager::PausedCainjector;
use testkit::writer::{Tally, Writer};

use crate::cluster::{
    Env, Issued, SELFSIGNED_ISSUER, WAIT, all_bundles_are, eventually, operator_process, restarts,
};
use crate::install::{certificates, condition};

/// Concurrent writers during a renewal: enough that the API server keeps several connections
/// to the webhooks and makes new ones while the certificate changes.
pub(crate) const WRITERS: usize = 8;
/// How many more writes each writer makes after the new serial is served everywhere.
pub(crate) const WRITES_AFTER: u64 = 40;
/// How often the timeline looks.
const POLL: Duration = Duration::from_millis(50);
/// How long cainjector is held still once the Secret holds the renewed certificate: long
/// enough to ask each replica many times which certificate it presents.
const HOLD: Duration = Duration::from_secs(3);
/// How long a renewal may take from its trigger until both replicas serve the new
/// certificate: the kubelet's sync period (a minute), after which the Secret's files are in the
/// pods, and then some.
pub(crate) const RENEWAL_LIMIT: Duration = Duration::from_secs(180);

/// When each step of a renewal was first seen.
#[derive(Debug)]
struct Timeline {
    /// The renewal was triggered.
    triggered: Instant,
    /// The Secret held the new certificate.
    secret: Instant,
    /// A caBundle held the new certificate's CA.
    first_bundle: Instant,
    /// Every caBundle held the new certificate's CA.
    bundles: Instant,
    /// Every replica served the new certificate (when the last handshake that showed it ended).
    served: Instant,
    /// When the last read of the caBundles that found none holding the new CA began.
    last_untrusting_read: Option<Instant>,
    /// What the replicas served while cainjector was held still, when it was.
    held: Option<Held>,
    /// What the Secret holds now.
    issued: Issued,
    /// Every distinct set of caBundles seen from the trigger on, in order.
    bundles_seen: Vec<Vec<Option<String>>>,
}

/// What the replicas served while cainjector was held still after the Secret changed, so
/// that no caBundle could change.
#[derive(Debug)]
struct Held {
    /// How many times both replicas were asked.
    looks: usize,
    /// How long after the Secret a replica first presented another certificate than the one
    /// served before the renewal.
    switched: Option<Duration>,
    /// When every replica first presented the new certificate.
    served: Option<Instant>,
    /// Whether the caBundles stayed as they were throughout.
    bundles_unchanged: bool,
}

impl Timeline {
    fn seconds(from: Instant, to: Instant) -> f64 {
        to.saturating_duration_since(from).as_secs_f64()
    }
}

/// Triggers a renewal of the serving Certificate (with cert-manager's cainjector held still
/// until `HOLD` after the Secret changed when `hold_cainjector`), and follows it until every
/// replica serves the new serial.
async fn follow_renewal(
    env: &Env,
    pods: &[Pod],
    before: &Issued,
    hold_cainjector: bool,
) -> Timeline {
    let unchanged = env.ca_bundles().await;
    let paused = hold_cainjector
        .then(|| PausedCainjector::pause(&env.plane).unwrap_or_else(|error| panic!("{error}")));
    let triggered = Instant::now();
    testkit::certificates::renew(&certificates(env), &env.deployed.certificate)
        .await
        .expect("cert-manager is asked to renew the certificate");
    let deadline = triggered + RENEWAL_LIMIT;
    let (secret, issued) = loop {
        assert!(
            Instant::now() < deadline,
            "the Secret did not change within {RENEWAL_LIMIT:?}"
        );
        if let Some(now) = env.issued().await.filter(|i| i.serial != before.serial) {
            break (Instant::now(), now);
        }
        tokio::time::sleep(POLL).await;
    };
    let held = match paused {
        Some(paused) => {
            let held = hold(env, pods, before, &issued, secret, &unchanged).await;
            paused.resume();
            Some(held)
        }
        None => None,
    };

    let mut served = held.as_ref().and_then(|h| h.served);
    let (mut first_bundle, mut bundles, mut last_untrusting_read) = (None, None, None);
    let mut bundles_seen = vec![unchanged];
    loop {
        assert!(
            Instant::now() < deadline,
            "the renewal did not finish within {RENEWAL_LIMIT:?}: bundles at {bundles:?}, served at {served:?}"
        );
        let read = Instant::now();
        let current = env.ca_bundles().await;
        if bundles_seen.last() != Some(&current) {
            bundles_seen.push(current.clone());
        }
        if !current
            .iter()
            .any(|b| b.as_deref() == Some(issued.ca.as_str()))
        {
            last_untrusting_read = Some(read);
        } else if first_bundle.is_none() {
            first_bundle = Some(Instant::now());
        }
        if bundles.is_none() && all_bundles_are(&current, &issued.ca) {
            bundles = Some(Instant::now());
        }
        if served.is_none()
            && every_one_serves(&env.served_serials(pods, &issued.ca).await, &issued.serial)
        {
            served = Some(Instant::now());
        }
        if let (Some(first_bundle), Some(bundles), Some(served)) = (first_bundle, bundles, served) {
            return Timeline {
                triggered,
                secret,
                first_bundle,
                bundles,
                served,
                last_untrusting_read,
                held,
                issued,
                bundles_seen,
            };
        }
        tokio::time::sleep(POLL).await;
    }
}

/// Asks both replicas, for `HOLD` from the Secret's change, which certificate they present
/// (trusting the CAs of before and after the renewal); checks the caBundles too.
async fn hold(
    env: &Env,
    pods: &[Pod],
    before: &Issued,
    issued: &Issued,
    secret: Instant,
    unchanged: &[Option<String>],
) -> Held {
    let mut held = Held {
        looks: 0,
        switched: None,
        served: None,
        bundles_unchanged: true,
    };
    let either = format!("{}\n{}", before.ca.trim_end(), issued.ca);
    while secret.elapsed() < HOLD {
        let serials = env.served_serials(pods, &either).await;
        held.looks += 1;
        if held.switched.is_none()
            && serials
                .iter()
                .any(|s| s.as_deref() != Some(before.serial.as_str()))
        {
            held.switched = Some(secret.elapsed());
        }
        if held.served.is_none() && every_one_serves(&serials, &issued.serial) {
            held.served = Some(Instant::now());
        }
        held.bundles_unchanged &= env.ca_bundles().await == unchanged;
        tokio::time::sleep(POLL).await;
    }
    held
}

/// Whether every replica presented the certificate with `serial`.
pub(crate) fn every_one_serves(serials: &[Option<String>], serial: &str) -> bool {
    serials.iter().all(|s| s.as_deref() == Some(serial))
}

/// Starts `WRITERS` writer loops in `namespace`.
pub(crate) async fn start_writers(env: &Env, namespace: &str) -> Vec<Writer> {
    let mut writers = Vec::new();
    for i in 0..WRITERS {
        writers.push(Writer::start(&env.client, namespace, &format!("written-{i}")).await);
    }
    writers
}

/// Stops the writers; returns every write's outcome, merged.
pub(crate) async fn stop_writers(writers: Vec<Writer>) -> Tally {
    let mut all = Tally::default();
    for writer in writers {
        let tally = writer.stop().await;
        all.attempts += tally.attempts;
        all.failures.extend(tally.failures);
    }
    all.failures.sort_by_key(|(at, _)| *at);
    all
}

/// The operator's process in each pod's container.
fn processes(pods: &[Pod]) -> Vec<Option<u32>> {
    pods.iter().map(operator_process).collect()
}

/// Waits until the serving Secret is what every caBundle trusts and every replica serves it;
/// returns it.
pub(crate) async fn settled(env: &Env, pods: &[Pod]) -> Issued {
    eventually(
        "every caBundle trusts the Secret's CA and every replica serves its certificate",
        WAIT,
        || async {
            let issued = env.issued().await?;
            if !env.every_bundle_is(&issued.ca).await {
                return None;
            }
            every_one_serves(&env.served_serials(pods, &issued.ca).await, &issued.serial)
                .then_some(issued)
        },
    )
    .await
}

/// What one measured renewal did.
struct Measured {
    timeline: Timeline,
    tally: Tally,
    before: Issued,
}

/// Renews the serving certificate under `WRITERS` writers and measures it; checks that no
/// operator process was restarted.
async fn measured_renewal(env: &Env, scenario: &str, hold_cainjector: bool) -> Measured {
    let pods = env.operator_pods().await;
    assert_eq!(pods.len(), 2, "two replicas: {pods:?}");
    let before = settled(env, &pods).await;
    let pids = processes(&pods);
    assert!(pids.iter().all(Option::is_some), "{pids:?}");
    let restarted = restarts(&pods);
    let namespace = env.create_namespace(scenario).await;
    let writers = start_writers(env, &namespace).await;
    futures::future::join_all(writers.iter().map(|writer| writer.wait_for_writes(10))).await;
    let timeline = follow_renewal(env, &pods, &before, hold_cainjector).await;
    futures::future::join_all(
        writers
            .iter()
            .map(|writer| writer.wait_for_writes(WRITES_AFTER)),
    )
    .await;
    let tally = stop_writers(writers).await;

    let after = env.operator_pods().await;
    assert_eq!(
        after.iter().map(|p| &p.metadata.uid).collect::<Vec<_>>(),
        pods.iter().map(|p| &p.metadata.uid).collect::<Vec<_>>(),
        "the same pods serve after the renewal"
    );
    assert_eq!(processes(&after), pids, "no operator process was restarted");
    assert_eq!(restarts(&after), restarted, "no container restarted");
    assert!(
        restarted.iter().all(|(_, n)| *n == 0),
        "no restarts at all: {restarted:?}"
    );
    assert_ne!(
        timeline.issued.key, before.key,
        "the renewal made a new key"
    );
    let (ok, _, stderr) = env.kubectl(&["delete", "namespace", &namespace, "--wait=false"], None);
    assert!(ok, "delete namespace {namespace}: {stderr}");
    Measured {
        timeline,
        tally,
        before,
    }
}

fn report(label: &str, m: &Measured) {
    let t = &m.timeline;
    let bundles = if t.bundles_seen.len() == 1 {
        "caBundles unchanged".to_string()
    } else {
        format!(
            "caBundles rewritten {:.2}-{:.2} s after the Secret (first-last)",
            Timeline::seconds(t.secret, t.first_bundle),
            Timeline::seconds(t.secret, t.bundles)
        )
    };
    let held = match &t.held {
        Some(Held {
            switched: Some(at),
            looks,
            ..
        }) => format!(
            "cainjector held {:.0} s: replicas switched {:.2} s after the Secret ({looks} looks); ",
            HOLD.as_secs_f64(),
            at.as_secs_f64()
        ),
        Some(Held { looks, .. }) => format!(
            "cainjector held {:.0} s: replicas kept the old certificate ({looks} looks); ",
            HOLD.as_secs_f64()
        ),
        None => String::new(),
    };
    eprintln!(
        "figures ({label}): {} of {} writes failed ({WRITERS} writers); Secret rewritten {:.2} s after the trigger; \
         {held}{bundles}; new serial served by both \
         replicas {:.2} s after the Secret; 0 restarts, same processes",
        m.tally.failures.len(),
        m.tally.attempts,
        Timeline::seconds(t.triggered, t.secret),
        Timeline::seconds(t.secret, t.served),
    );
    for (at, error) in m.tally.failures.iter().take(3) {
        let short: String = error.chars().take(240).collect();
        eprintln!(
            "  failed {:.2} s after the Secret: {short}...",
            at.saturating_duration_since(t.secret).as_secs_f64()
        );
    }
}

/// Checks that cainjector was held, that holding it kept every caBundle as it was, and that
/// the replicas were asked often enough to tell; returns what they served.
fn assert_held(held: &Option<Held>) -> &Held {
    let held = held.as_ref().expect("cainjector was held");
    assert!(
        held.bundles_unchanged,
        "a caBundle changed while cainjector was stopped: {held:?}"
    );
    assert!(held.looks >= 3, "too few looks while held: {held:?}");
    held
}

pub async fn renewing_the_leaf_under_a_stable_ca_loses_no_write_and_restarts_nothing(
    env: Arc<Env>,
) {
    let measured = measured_renewal(&env, "deploy-leaf-renewal", true).await;
    let t = &measured.timeline;
    report("leaf renewal, stable CA", &measured);
    let held = assert_held(&t.held);
    assert!(
        held.switched.is_some(),
        "under a stable CA the new leaf is served without waiting for cainjector: {held:?}"
    );
    assert_ne!(t.issued.serial, measured.before.serial);
    assert_eq!(t.issued.ca, measured.before.ca, "the CA did not change");
    assert_eq!(
        t.bundles_seen.len(),
        1,
        "no caBundle changed during the renewal: {:?}",
        t.bundles_seen.len()
    );
    assert_eq!(
        condition(&env, &env.deployed.certificate, "Ready")
            .await
            .as_deref(),
        Some("True")
    );
    assert!(
        measured.tally.failures.is_empty(),
        "writes failed through a leaf renewal under a stable CA: {:?}",
        measured.tally.failures
    );
}

/// Issues the serving certificate from the self-signed Issuer directly, as OLM v1 does: its CA
/// is then the certificate itself, and changes at every renewal.
async fn issue_self_signed(env: &Env) {
    let patch = json!({"spec": {"issuerRef": {"kind": "Issuer", "name": SELFSIGNED_ISSUER}}});
    certificates(env)
        .patch(
            &env.deployed.certificate,
            &PatchParams::default(),
            &Patch::Merge(&patch),
        )
        .await
        .expect("point the serving Certificate at the self-signed Issuer");
    eventually(
        "the serving Secret holds a self-signed certificate",
        WAIT,
        || async {
            let issued = env.issued().await?;
            (issued.certificate.trim() == issued.ca.trim()).then_some(())
        },
    )
    .await;
}

pub async fn a_self_signed_renewal_is_served_once_the_ca_bundles_trust_it(env: Arc<Env>) {
    issue_self_signed(&env).await;
    let measured = measured_renewal(&env, "deploy-self-signed", true).await;
    let t = &measured.timeline;
    report("self-signed renewal, waiting for the caBundles", &measured);
    assert_ne!(
        t.issued.ca, measured.before.ca,
        "the CA changed with the certificate"
    );
    if let Some(at) = assert_held(&t.held).switched {
        panic!(
            "a replica presented the new certificate {:.2} s after the Secret changed, while no \
             caBundle held its CA",
            at.as_secs_f64()
        );
    }
    // The operator switches once one caBundle trusts the new certificate (the API server makes
    // new connections for a configuration whose bundle changed; the others go on with theirs).
    // One look reads the caBundles, then asks each replica what it serves, so a switch made
    // while the look was under way shows as served first. It was a switch too early only if a
    // read of the caBundles begun after the new certificate was served found none with its CA.
    if let Some(read) = t.last_untrusting_read {
        assert!(
            read < t.served,
            "a read of the caBundles begun {:.2} s after the new certificate was served found \
             none holding its CA",
            Timeline::seconds(t.served, read)
        );
    }
    // What is left is a race between the API server's informer and the operator's watch of
    // the same caBundle rewrite: a handshake or two refused just after the switch.
    let unexplained = measured
        .tally
        .unexplained(t.served + Duration::from_secs(1));
    assert!(
        unexplained.is_empty() && measured.tally.failures.len() <= 2,
        "writes failed beyond the race the operator cannot see: {:?}",
        measured.tally.failures
    );
}

pub async fn without_waiting_for_the_ca_bundles_a_self_signed_renewal_fails_writes(env: Arc<Env>) {
    let deployments: Api<Deployment> = Api::namespaced(env.client.clone(), &env.deployed.namespace);
    let patch = json!([{
        "op": "add",
        "path": "/spec/template/spec/containers/0/args/-",
        "value": "--wait-for-ca-trust=false",
    }]);
    deployments
        .patch(
            &env.deployed.deployment,
            &PatchParams::default(),
            &Patch::<()>::Json(serde_json::from_value(patch).expect("a JSON patch")),
        )
        .await
        .expect("turn --wait-for-ca-trust off");
    eventually("the Deployment rolled out", WAIT, || async {
        let d = deployments.get(&env.deployed.deployment).await.ok()?;
        let (spec, status) = (d.spec?, d.status?);
        let want = spec.replicas.unwrap_or(1);
        (status.observed_generation == d.metadata.generation
            && status.updated_replicas == Some(want)
            && status.ready_replicas == Some(want)
            && status.replicas == Some(want))
        .then_some(())
    })
    .await;
    eventually("only the new replicas remain", WAIT, || async {
        let pods = env.operator_pods().await;
        (pods.len() == 2).then_some(())
    })
    .await;
    let measured = measured_renewal(&env, "deploy-self-signed-at-once", false).await;
    let t = &measured.timeline;
    report("self-signed renewal, from the files", &measured);
    assert_ne!(
        t.issued.ca, measured.before.ca,
        "the CA changed with the certificate"
    );
    // cainjector is as quick as it gets here, so the caBundles change before the files land:
    // the API server's new connections meet the old certificate.
    assert!(
        !measured.tally.failures.is_empty(),
        "no write failed while the caBundles trusted only the new CA and the replicas served \
         the old certificate ({} attempts)",
        measured.tally.attempts
    );
    // Every failure is the API server refusing a certificate its caBundle does not trust, in
    // the window before the new files were served; nothing else broke.
    let unexplained = measured
        .tally
        .unexplained(t.served + Duration::from_secs(1));
    assert!(
        unexplained.is_empty(),
        "writes failed for another reason than the window: {unexplained:?}"
    );
}
