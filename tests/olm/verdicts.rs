//! `check-bundle` judged by the real OLM v0: every bundle variant (`variants`) is checked by
//! `check-bundle` from disk, published in a catalog served by a second `opm serve`, and
//! subscribed to in a namespace of its own with an AllNamespaces OperatorGroup. OLM's verdict is
//! what it does: the CSV Succeeded (installs), or the CSV, its InstallPlan or its Subscription's
//! resolution Failed (refuses, with OLM's words quoted). It must equal `check-bundle`'s verdict
//! for OLM v0 on every variant; a disagreement is a bug in `check-bundle`.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use kube::Client;
use kube::api::{Api, ApiResource, DynamicObject, GroupVersionKind, ListParams};
use memcached_packager::check::check_bundle;
use memcached_packager::rules::Enforcer;
use serde_json::{Value, json};

use crate::cluster::{Env, WAIT, eventually};
use crate::variants::{self, CHANNEL, Variant};

/// The CatalogSource that serves the variants.
const CATALOG_SOURCE: &str = "check-bundle-variants";
/// How long OLM may take to decide on every variant.
const DECIDE: Duration = Duration::from_secs(300);
/// How long a CSV may stay between phases, neither Succeeded nor Failed, before it counts as
/// never installing. Each of the others is decided within seconds of its CSV's creation.
const UNDECIDED: Duration = Duration::from_secs(90);

/// What OLM v0 did with a variant.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Verdict {
    /// The CSV Succeeded.
    Installs,
    /// Something OLM owns reported Failed; OLM's words.
    Refuses(String),
    /// The CSV stayed between phases for [`UNDECIDED`]; its last words.
    NeverInstalls(String),
}

/// The namespace a variant is subscribed in.
fn namespace(variant: &Variant) -> String {
    format!("verdict-{}", variant.id)
}

/// OLM's objects in every namespace, as JSON, by (plural, namespace): read once a round.
struct Snapshot(BTreeMap<(&'static str, String), Vec<Value>>);

impl Snapshot {
    /// Lists the CSVs (not OLM's copies), InstallPlans and Subscriptions of every namespace.
    async fn take(client: &Client) -> Snapshot {
        let mut objects: BTreeMap<(&'static str, String), Vec<Value>> = BTreeMap::new();
        for (kind, plural, labels) in [
            (
                "ClusterServiceVersion",
                "clusterserviceversions",
                "!olm.copiedFrom",
            ),
            ("InstallPlan", "installplans", ""),
            ("Subscription", "subscriptions", ""),
        ] {
            let gvk = GroupVersionKind::gvk("operators.coreos.com", "v1alpha1", kind);
            let resource = ApiResource::from_gvk_with_plural(&gvk, plural);
            let api: Api<DynamicObject> = Api::all_with(client.clone(), &resource);
            let list = api
                .list(&ListParams::default().labels(labels))
                .await
                .unwrap_or_else(|e| panic!("list {plural}: {e}"));
            for object in list.items {
                let namespace = object.metadata.namespace.clone().unwrap_or_default();
                let value = serde_json::to_value(&object).expect("JSON");
                objects.entry((plural, namespace)).or_default().push(value);
            }
        }
        Snapshot(objects)
    }

    /// The objects of `plural` in `namespace`.
    fn items(&self, plural: &'static str, namespace: &str) -> &[Value] {
        self.0
            .get(&(plural, namespace.to_string()))
            .map(Vec::as_slice)
            .unwrap_or_default()
    }
}

/// OLM's verdict on `variant` so far, if it has given one. `seen` holds when each CSV was
/// first seen.
fn verdict(
    snapshot: &Snapshot,
    variant: &Variant,
    seen: &mut BTreeMap<String, Instant>,
) -> Option<Verdict> {
    let namespace = namespace(variant);
    for csv in snapshot.items("clusterserviceversions", &namespace) {
        if csv["metadata"]["name"] != variant.csv_name().as_str() {
            continue;
        }
        let first_seen = *seen.entry(variant.csv_name()).or_insert_with(Instant::now);
        match csv["status"]["phase"].as_str() {
            Some("Succeeded") => return Some(Verdict::Installs),
            Some("Failed") => {
                return Some(Verdict::Refuses(format!(
                    "CSV Failed ({}): {}",
                    csv["status"]["reason"].as_str().unwrap_or_default(),
                    csv["status"]["message"].as_str().unwrap_or_default()
                )));
            }
            phase if first_seen.elapsed() >= UNDECIDED => {
                // The words of its phase history, most recent last, without repeats.
                let mut words: Vec<String> = Vec::new();
                for condition in csv["status"]["conditions"].as_array().into_iter().flatten() {
                    let said = format!(
                        "{} ({}): {}",
                        condition["phase"].as_str().unwrap_or_default(),
                        condition["reason"].as_str().unwrap_or_default(),
                        condition["message"].as_str().unwrap_or_default()
                    );
                    if !words.contains(&said) {
                        words.push(said);
                    }
                }
                return Some(Verdict::NeverInstalls(format!(
                    "CSV still {} after {} s; it said: {}",
                    phase.unwrap_or("(no phase)"),
                    UNDECIDED.as_secs(),
                    words.join("; ")
                )));
            }
            _ => {}
        }
    }
    for plan in snapshot.items("installplans", &namespace) {
        if plan["status"]["phase"] == "Failed" {
            let message = plan["status"]["conditions"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|c| c["message"].as_str())
                .collect::<Vec<_>>()
                .join("; ");
            return Some(Verdict::Refuses(format!("InstallPlan Failed: {message}")));
        }
    }
    for subscription in snapshot.items("subscriptions", &namespace) {
        for condition in subscription["status"]["conditions"]
            .as_array()
            .into_iter()
            .flatten()
        {
            if condition["type"] == "ResolutionFailed" && condition["status"] == "True" {
                return Some(Verdict::Refuses(format!(
                    "Subscription ResolutionFailed: {}",
                    condition["message"].as_str().unwrap_or_default()
                )));
            }
        }
    }
    None
}

/// Where a variant stands when OLM has said nothing decisive: its CSV's phase and message.
fn standing(snapshot: &Snapshot, variant: &Variant) -> String {
    let csvs: Vec<String> = snapshot
        .items("clusterserviceversions", &namespace(variant))
        .iter()
        .map(|csv| {
            format!(
                "CSV {} {} ({}): {}",
                csv["metadata"]["name"].as_str().unwrap_or_default(),
                csv["status"]["phase"].as_str().unwrap_or("(no phase)"),
                csv["status"]["reason"].as_str().unwrap_or_default(),
                csv["status"]["message"].as_str().unwrap_or_default()
            )
        })
        .collect();
    if csvs.is_empty() {
        "no CSV".to_string()
    } else {
        csvs.join("; ")
    }
}

fn apply(env: &Env, object: &Value) {
    let text = object.to_string();
    let (ok, _, stderr) = env.kubectl(&["apply", "-f", "-"], Some(&text));
    assert!(ok, "kubectl apply {text}: {stderr}");
}

pub async fn check_bundle_and_olm_agree_on_every_bundle_variant(env: Arc<Env>) {
    let variants = variants::all();
    let dir = tempfile::tempdir().expect("a directory");

    // check-bundle's verdicts, from the bundles on disk.
    let mut expected = BTreeMap::new();
    for variant in &variants {
        let bundle = dir.path().join("bundles").join(variant.id);
        variant.write_bundle(&bundle);
        let report =
            check_bundle(&bundle).unwrap_or_else(|e| panic!("check-bundle {}: {e}", variant.id));
        let rules: Vec<_> = report.violations.iter().map(|v| v.rule).collect();
        match variant.breaks {
            Some(rule) => assert!(
                rules.contains(&rule),
                "variant {} should break {rule}; check-bundle found {rules:?}",
                variant.id
            ),
            None => assert!(
                !report.refused_by(Enforcer::OlmV0),
                "variant {} should break no OLM v0 rule; check-bundle found {:?}",
                variant.id,
                report.violations
            ),
        }
        let findings: Vec<String> = report.violations.iter().map(|v| v.to_string()).collect();
        expected.insert(variant.id, (report.refused_by(Enforcer::OlmV0), findings));
    }

    // The variants' catalog, served and subscribed to.
    let catalog = dir.path().join("catalog");
    variants::write_catalog(&variants, &catalog);
    let (mut opm, port) = crate::cluster::serve_catalog(&catalog, dir.path()).await;
    apply(
        &env,
        &json!({
            "apiVersion": "operators.coreos.com/v1alpha1",
            "kind": "CatalogSource",
            "metadata": {"name": CATALOG_SOURCE, "namespace": "olm"},
            "spec": {
                "sourceType": "grpc",
                "address": format!("127.0.0.1:{port}"),
                "displayName": "check-bundle variants",
            },
        }),
    );
    let started = Instant::now();
    for variant in &variants {
        let namespace = namespace(variant);
        env.create_namespace(&namespace).await;
        apply(
            &env,
            &json!({
                "apiVersion": "operators.coreos.com/v1",
                "kind": "OperatorGroup",
                "metadata": {"name": "all-namespaces", "namespace": namespace},
                "spec": {},
            }),
        );
        apply(
            &env,
            &json!({
                "apiVersion": "operators.coreos.com/v1alpha1",
                "kind": "Subscription",
                "metadata": {"name": variant.id, "namespace": namespace},
                "spec": {
                    "channel": CHANNEL,
                    "name": variant.id,
                    "source": CATALOG_SOURCE,
                    "sourceNamespace": "olm",
                    "installPlanApproval": "Automatic",
                },
            }),
        );
    }

    // OLM's verdicts.
    let mut verdicts: BTreeMap<&str, (Verdict, Duration)> = BTreeMap::new();
    let mut seen = BTreeMap::new();
    let mut snapshot = Snapshot::take(&env.client).await;
    while verdicts.len() < variants.len() && started.elapsed() < DECIDE {
        for variant in &variants {
            if verdicts.contains_key(variant.id) {
                continue;
            }
            if let Some(verdict) = verdict(&snapshot, variant, &mut seen) {
                verdicts.insert(variant.id, (verdict, started.elapsed()));
            }
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
        snapshot = Snapshot::take(&env.client).await;
    }

    let mut agreed = 0;
    let mut disagreements = Vec::new();
    for variant in &variants {
        let (refused, findings) = &expected[variant.id];
        let said = if *refused { "refuses" } else { "installs" };
        let findings = if findings.is_empty() {
            "no finding".to_string()
        } else {
            findings.join(" | ")
        };
        let (olm, agrees) = match verdicts.get(variant.id) {
            Some((Verdict::Installs, after)) => (
                format!("installs (Succeeded after {:.1} s)", after.as_secs_f64()),
                !refused && variant.olm_says.is_none(),
            ),
            Some((Verdict::Refuses(words) | Verdict::NeverInstalls(words), after)) => (
                format!("refuses after {:.1} s: {words}", after.as_secs_f64()),
                // The refusal must be the one the variant is for.
                *refused && variant.olm_says.is_some_and(|says| words.contains(says)),
            ),
            None => (
                format!(
                    "no verdict within {} s: {}",
                    DECIDE.as_secs(),
                    standing(&snapshot, variant)
                ),
                false,
            ),
        };
        eprintln!(
            "variant {}: check-bundle says OLM v0 {said} ({findings}); OLM v0 {olm}",
            variant.id
        );
        if agrees {
            agreed += 1;
        } else {
            disagreements.push(variant.id);
        }
    }
    eprintln!(
        "check-bundle and the real OLM v0 agree on {agreed} of {} bundle variants",
        variants.len()
    );

    // Leave nothing behind: the CSVs (and with them OLM's webhook configurations), the
    // namespaces, the variants' CRDs and the catalog.
    for variant in &variants {
        let namespace = namespace(variant);
        let (ok, _, stderr) = env.kubectl(
            &[
                "delete",
                "subscriptions,clusterserviceversions",
                "--all",
                "-n",
                &namespace,
                "--wait=true",
            ],
            None,
        );
        assert!(ok, "delete the CSVs of {namespace}: {stderr}");
    }
    for variant in &variants {
        let namespace = namespace(variant);
        let crd = variant.crd_name();
        let (ok, _, stderr) =
            env.kubectl(&["delete", "namespace", &namespace, "--wait=false"], None);
        assert!(ok, "delete namespace {namespace}: {stderr}");
        let (ok, _, stderr) = env.kubectl(
            &["delete", "crd", &crd, "--ignore-not-found", "--wait=false"],
            None,
        );
        assert!(ok, "delete crd {crd}: {stderr}");
    }
    let (ok, _, stderr) = env.kubectl(
        &["delete", "catalogsource", CATALOG_SOURCE, "-n", "olm"],
        None,
    );
    assert!(ok, "delete the variants' CatalogSource: {stderr}");
    opm.start_kill().ok();
    eventually(
        "no webhook configuration of a variant is left",
        WAIT,
        || async {
            let (_, stdout, _) = env.kubectl(
                &[
                    "get",
                    "mutatingwebhookconfigurations,validatingwebhookconfigurations",
                    "-o",
                    "name",
                ],
                None,
            );
            (!stdout.contains(variants::GROUP_SUFFIX)).then_some(())
        },
    )
    .await;

    assert!(
        disagreements.is_empty(),
        "check-bundle and OLM v0 disagree on {disagreements:?} (see the lines above)"
    );
}
