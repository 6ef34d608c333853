//! A renewal that changes the CA, the way cert-manager renews a self-signed certificate and
//! cainjector follows: the new pair lands in the operator's files first, and the CA bundles the
//! API server reads are rewritten a few seconds later. The operator keeps serving the old pair
//! until a bundle accepts the new one (`--wait-for-ca-trust`, on by default); the same renewal
//! with it turned off shows the window it closes. Writers run through both: v1beta1 patches
//! (mutating and validating webhooks) alternating with v1alpha1 reads (the conversion webhook).
//!
//! Each writer has a Memcached of its own, so that what one writer sees is the renewal's doing
//! and not a conflict with the others over one object.
//!
//! The window only hurts new connections: the API server's kept-alive ones finished their
//! handshake with the old pair. So the writers are more than the API server keeps idle
//! connections for, which makes it open new ones throughout, as any burst does.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
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
/// Successful calls in a row, by every writer once the new serial is served, that show the
/// renewal's window closed.
const SETTLED: usize = 5;
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

/// One call a writer made through the webhooks.
struct Call {
    writer: usize,
    started: Instant,
    ended: Instant,
    error: Option<String>,
}

/// What the writers did: their calls in the order they ended, and when each writer's call in
/// flight began.
#[derive(Default)]
struct Ledger {
    calls: Vec<Call>,
    in_flight: [Option<Instant>; WRITERS],
}

/// The Memcached `writer` writes and reads.
fn object(writer: usize) -> String {
    format!("renewed-{writer}")
}

/// What one renewal under writes came to.
struct Renewal {
    calls: Vec<Call>,
    /// When the bundles' rewrite began.
    rewritten: Instant,
    /// When the bundles' rewrite was done.
    bundles_done: Instant,
    /// When the files landed.
    files_written: Instant,
    /// From the bundles' rewrite to the new serial being served.
    served_after_bundles: Duration,
}

impl Renewal {
    fn failures(&self) -> impl Iterator<Item = (&Call, &str)> {
        self.calls
            .iter()
            .filter_map(|call| call.error.as_deref().map(|error| (call, error)))
    }

    /// The failed calls that ended before `moment`.
    fn failed_before(&self, moment: Instant) -> Vec<&str> {
        self.failures()
            .filter(|(call, _)| call.ended < moment)
            .map(|(_, error)| error)
            .collect()
    }

    /// The failed calls that ran wholly between `from` and `to`.
    fn failed_between(&self, from: Instant, to: Instant) -> usize {
        self.failures()
            .filter(|(call, _)| call.started >= from && call.ended <= to)
            .count()
    }

    /// "N of M", when the first and the last failure came, from the bundles' rewrite, and how
    /// long the longest call took.
    fn describe(&self) -> String {
        let offset = |moment: Instant| {
            let secs = |d: Duration| d.as_secs_f64();
            match moment.checked_duration_since(self.rewritten) {
                Some(after) => format!("+{:.2} s", secs(after)),
                None => format!("-{:.2} s", secs(self.rewritten - moment)),
            }
        };
        let failed: Vec<_> = self.failures().map(|(call, _)| call).collect();
        let window = match (
            failed.iter().map(|call| call.ended).min(),
            failed.iter().map(|call| call.ended).max(),
        ) {
            (Some(first), Some(last)) => format!(" from {} to {}", offset(first), offset(last)),
            _ => String::new(),
        };
        let longest = self
            .calls
            .iter()
            .map(|call| call.ended - call.started)
            .max()
            .unwrap_or_default();
        format!(
            "{} of {} calls failed{window}, the longest took {:.2} s",
            failed.len(),
            self.calls.len(),
            longest.as_secs_f64()
        )
    }
}

/// Whether every writer's last [`SETTLED`] calls, all begun after `since`, succeeded; if not,
/// how many writers are not there yet, and what the first few of them last saw: their calls
/// since, the last one's outcome, and how long a call of theirs has been in flight.
fn settled(ledger: &Ledger, since: Instant) -> Result<(), String> {
    let mut streaks = [0usize; WRITERS];
    let mut counts = [0usize; WRITERS];
    let mut last: [Option<&Call>; WRITERS] = [None; WRITERS];
    for call in ledger.calls.iter().filter(|call| call.started >= since) {
        streaks[call.writer] = match call.error {
            None => streaks[call.writer] + 1,
            Some(_) => 0,
        };
        counts[call.writer] += 1;
        last[call.writer] = Some(call);
    }
    let behind: Vec<usize> = (0..WRITERS)
        .filter(|&writer| streaks[writer] < SETTLED)
        .collect();
    if behind.is_empty() {
        return Ok(());
    }
    let now = Instant::now();
    let ago = |moment: Instant| format!("{:.1} s ago", (now - moment).as_secs_f64());
    let seen: Vec<String> = behind
        .iter()
        .take(3)
        .map(|&writer| {
            let outcome = match last[writer] {
                None => "none ended".to_string(),
                Some(Call {
                    error: Some(error),
                    ended,
                    ..
                }) => format!("the last failed {}: {error}", ago(*ended)),
                Some(Call { ended, .. }) => format!("the last succeeded {}", ago(*ended)),
            };
            let flight = match ledger.in_flight[writer] {
                Some(began) => format!("a call in flight since {}", ago(began)),
                None => "no call in flight".to_string(),
            };
            format!(
                "writer {writer}: {} calls since, {} in a row succeeded, {outcome}; {flight}",
                counts[writer], streaks[writer]
            )
        })
        .collect();
    Err(format!(
        "{} of {WRITERS} writers without {SETTLED} successful calls in a row ({})",
        behind.len(),
        seen.join("; ")
    ))
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

/// Renews to a pair of the `to` CA in `order`, writing through it all until every writer's
/// calls succeed again.
async fn renew(env: &Env, namespace: &str, to: &Ca, order: Order) -> Renewal {
    let api: Api<Memcached> = Api::namespaced(env.client.clone(), namespace);
    let gvk = GroupVersionKind::gvk(memcached_operator::api::GROUP, "v1alpha1", "Memcached");
    let resource = ApiResource::from_gvk_with_plural(&gvk, memcached_operator::api::PLURAL);
    let old_api: Api<DynamicObject> =
        Api::namespaced_with(env.client.clone(), namespace, &resource);
    let stop = Arc::new(AtomicBool::new(false));
    let ledger: Arc<Mutex<Ledger>> = Arc::default();
    // Dropped with this future if the scenario fails: the writers stop with it.
    let mut writers = tokio::task::JoinSet::new();
    for writer in 0..WRITERS {
        let stop = stop.clone();
        let ledger = ledger.clone();
        let api = api.clone();
        let old_api = old_api.clone();
        writers.spawn(async move {
            let name = object(writer);
            let mut round = 0u64;
            while !stop.load(Ordering::Relaxed) {
                round += 1;
                let started = Instant::now();
                ledger.lock().expect("the ledger").in_flight[writer] = Some(started);
                let result = if round.is_multiple_of(2) {
                    let patch = json!({"metadata": {"labels": {"round": round.to_string()}}});
                    api.patch(&name, &PatchParams::default(), &Patch::Merge(&patch))
                        .await
                        .map(|_| ())
                } else {
                    old_api.get(&name).await.map(|_| ())
                };
                {
                    let mut ledger = ledger.lock().expect("the ledger");
                    ledger.in_flight[writer] = None;
                    ledger.calls.push(Call {
                        writer,
                        started,
                        ended: Instant::now(),
                        error: result.err().map(|error| error.to_string()),
                    });
                }
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        });
    }
    tokio::time::sleep(Duration::from_secs(1)).await;
    let leaf = to.serving(KeyForm::EcPkcs8);
    let write_files = || {
        cert_layout::write(
            env.cert_root.path(),
            Layout::ServingCerts,
            &leaf.cert_pem,
            &leaf.key_pem,
        );
        Instant::now()
    };
    let mut files_written = None;
    if let Order::FilesFirst = order {
        files_written = Some(write_files());
        tokio::time::sleep(LAG).await;
    } else {
        env.write_cert_secret(CERT_SECRET, &leaf.cert_pem, &leaf.key_pem)
            .await;
    }
    let rewritten = Instant::now();
    env.install_wiring_with(&to.pem)
        .await
        .expect("the bundles rewritten");
    let bundles_done = Instant::now();
    let served = async {
        eventually(
            "the renewed certificate is served",
            Duration::from_secs(120),
            || async { (served_serial(env, to).await? == leaf.serial).then_some(()) },
        )
        .await;
        Instant::now()
    };
    let files_last = async {
        if let Order::BundlesFirst = order {
            tokio::time::sleep(LAG).await;
            Some(write_files())
        } else {
            None
        }
    };
    let (served_at, written_last) = tokio::join!(served, files_last);
    let files_written = files_written
        .or(written_last)
        .expect("the files were written");
    let since = served_at.max(files_written);
    eventually(
        "every writer's calls succeed again once the renewal is served",
        Duration::from_secs(120),
        || async { settled(&ledger.lock().expect("the ledger"), since) },
    )
    .await;
    stop.store(true, Ordering::Relaxed);
    while let Some(finished) = writers.join_next().await {
        finished.expect("a writer finishes");
    }
    let calls = std::mem::take(&mut ledger.lock().expect("the ledger").calls);
    Renewal {
        calls,
        rewritten,
        bundles_done,
        files_written,
        served_after_bundles: served_at - rewritten,
    }
}

pub async fn a_renewal_under_a_new_ca_is_served_once_the_api_server_trusts_it(env: Arc<Env>) {
    let namespace = env.create_namespace("e2e-renewal").await;
    let api: Api<Memcached> = Api::namespaced(env.client.clone(), &namespace);
    for writer in 0..WRITERS {
        api.create(
            &PostParams::default(),
            &Memcached::new(&object(writer), MemcachedSpec::default()),
        )
        .await
        .expect("created");
    }
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

    println!(
        "figures: renewals under a new CA, {WRITERS} writers, the second half {:.0} s after the \
         first, failures timed from the bundles' rewrite. Files first: waiting for the bundles, \
         {} (held {:.2} s, served {:.2} s after the rewrite began); without, {}. Bundles \
         first: reading the Secret, {} (served {:.2} s after the rewrite \
         began); without, {}. Back to the suite's CA: {}",
        LAG.as_secs_f64(),
        files_first.describe(),
        held_ms.first().copied().unwrap_or_default() / 1000.0,
        files_first.served_after_bundles.as_secs_f64(),
        files_first_careless.describe(),
        bundles_first.describe(),
        bundles_first.served_after_bundles.as_secs_f64(),
        bundles_first_careless.describe(),
        back.describe(),
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
    // Held until the bundles change, the renewal fails no call before they do. What is left
    // is the race between the API server's informer and the operator's watch of the same
    // rewrite, as long as the slower of the two takes to see it: handshakes across the CA
    // switch, and nothing else. That the window closes, every writer's calls succeeding
    // again, `renew` has waited for.
    for (what, renewal) in [
        ("files first", &files_first),
        ("bundles first", &bundles_first),
        ("back", &back),
    ] {
        let early = renewal.failed_before(renewal.rewritten);
        assert!(
            early.is_empty(),
            "{what}: calls failed before the bundles were rewritten, while the operator held \
             the renewal: {early:?}"
        );
        let other: Vec<_> = renewal
            .failures()
            .map(|(_, error)| error)
            .filter(|error| !error.contains("x509"))
            .collect();
        assert!(
            other.is_empty(),
            "{what}: calls failed for more than the CA switch: {other:?}"
        );
    }
    // Without the Secret, the operator serves the old pair until the files land, while the
    // API server trusts only the new CA: calls fail in between.
    assert!(
        bundles_first_careless.failed_between(
            bundles_first_careless.bundles_done,
            bundles_first_careless.files_written
        ) > 0,
        "bundles first, with the files only: calls should fail until the files land: {}",
        bundles_first_careless.describe()
    );
    let other: Vec<_> = bundles_first_careless
        .failures()
        .map(|(_, error)| error)
        .filter(|error| !error.contains("x509") && !error.contains("certificate"))
        .collect();
    assert!(
        other.is_empty(),
        "bundles first, with the files only: calls failed for more than the CA switch: {other:?}"
    );
}
