//! `check-bundle` judged by the real OLM v0: every bundle variant (`variants`) is checked by
//! `check-bundle` from disk, published in a catalog image of its own (built from the shipped
//! catalog.Dockerfile, whose registry pod OLM runs for a second CatalogSource), and
//! subscribed to in a namespace of its own with an AllNamespaces OperatorGroup, a few at a
//! time, each unsubscribed as soon as OLM has decided on it. OLM's verdict is what it does:
//! the CSV Succeeded (installs), or the CSV, its InstallPlan or its Subscription's resolution
//! Failed (refuses, with OLM's words quoted). It must equal `check-bundle`'s verdict for OLM v0
//! on every variant; a disagreement is a bug in `check-bundle`.

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

/// What OLM says while it has no connection to a catalog's registry pod.
const REGISTRY_NOT_CONNECTED: &str = "no registry client established";
/// The CatalogSource that serves the variants.
const CATALOG_SOURCE: &str = "check-bundle-variants";
/// The version the variants' catalog image is tagged with.
const CATALOG_VERSION: &str = "0.0.0-check-bundle-variants";
/// How many variants are subscribed at once. Each CSV that OLM keeps retrying is copied into
/// every namespace, so a bounded number keeps the API server's load bounded too.
const IN_FLIGHT: usize = 4;
/// How long OLM may take to decide on one variant, from its Subscription.
const DECIDE: Duration = Duration::from_secs(180);
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

/// The label selector of the CSVs that are not OLM's copies of a CSV in another namespace.
const NOT_COPIES: &str = "!olm.copiedFrom";

/// The objects of OLM's `kind` (`plural`) in `namespace` that match `labels`.
async fn list(
    client: &Client,
    namespace: &str,
    kind: &str,
    plural: &str,
    labels: &str,
) -> Result<Vec<DynamicObject>, String> {
    let gvk = GroupVersionKind::gvk("operators.coreos.com", "v1alpha1", kind);
    let resource = ApiResource::from_gvk_with_plural(&gvk, plural);
    let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), namespace, &resource);
    api.list(&ListParams::default().labels(labels))
        .await
        .map(|list| list.items)
        .map_err(|e| format!("list {plural} in {namespace}: {e}"))
}

/// OLM's objects in one variant's namespace, as JSON, by plural: read once a round.
#[derive(Default)]
struct Snapshot(BTreeMap<&'static str, Vec<Value>>);

impl Snapshot {
    /// Lists the CSVs (not OLM's copies), InstallPlans and Subscriptions of `namespace`.
    async fn take(client: &Client, namespace: &str) -> Result<Snapshot, String> {
        let mut objects: BTreeMap<&'static str, Vec<Value>> = BTreeMap::new();
        for (kind, plural, labels) in [
            (
                "ClusterServiceVersion",
                "clusterserviceversions",
                NOT_COPIES,
            ),
            ("InstallPlan", "installplans", ""),
            ("Subscription", "subscriptions", ""),
        ] {
            let items = list(client, namespace, kind, plural, labels)
                .await?
                .iter()
                .map(|object| serde_json::to_value(object).expect("JSON"))
                .collect();
            objects.insert(plural, items);
        }
        Ok(Snapshot(objects))
    }

    /// The objects of `plural`.
    fn items(&self, plural: &'static str) -> &[Value] {
        self.0.get(plural).map(Vec::as_slice).unwrap_or_default()
    }
}

/// The variants subscribed: `live` those still subscribed, `leaving` those unsubscribed whose
/// CSV may still be there, `made` every one whose namespace was made. Whatever is left when it
/// drops (a panic included) is removed then, namespaces and CRDs last, so a failure leaves no
/// CSV for OLM to keep retrying.
struct Subscribed<'a> {
    env: &'a Env,
    live: Vec<&'a Variant>,
    leaving: Vec<&'a Variant>,
    made: Vec<&'a Variant>,
}

impl<'a> Subscribed<'a> {
    fn new(env: &'a Env) -> Self {
        Subscribed {
            env,
            live: Vec::new(),
            leaving: Vec::new(),
            made: Vec::new(),
        }
    }

    /// Creates `variant`'s namespace, its AllNamespaces OperatorGroup and its Subscription.
    async fn subscribe(&mut self, variant: &'a Variant) {
        let namespace = namespace(variant);
        self.env.create_namespace(&namespace).await;
        self.made.push(variant);
        self.live.push(variant);
        apply(
            self.env,
            &json!({
                "apiVersion": "operators.coreos.com/v1",
                "kind": "OperatorGroup",
                "metadata": {"name": "all-namespaces", "namespace": namespace},
                "spec": {},
            }),
        );
        apply(
            self.env,
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

    /// Deletes `variant`'s Subscription and InstallPlan, then its CSV (and with it OLM's
    /// webhook configurations and its copies of the CSV). Its namespace and CRD stay until the
    /// end: OLM slows down while namespaces it copies CSVs into are terminating.
    fn unsubscribe(&mut self, variant: &'a Variant) -> Result<(), String> {
        self.live.retain(|live| live.id != variant.id);
        self.leaving.push(variant);
        let namespace = namespace(variant);
        self.kubectl(&[
            "delete",
            "subscriptions,installplans",
            "--all",
            "-n",
            &namespace,
        ])?;
        self.delete_csvs(&namespace)
    }

    /// Deletes the CSVs of `namespace` that are not OLM's copies, without waiting.
    fn delete_csvs(&self, namespace: &str) -> Result<(), String> {
        self.kubectl(&[
            "delete",
            "clusterserviceversions",
            &format!("--selector={NOT_COPIES}"),
            "-n",
            namespace,
            "--wait=false",
        ])
    }

    /// Deletes again the CSV of an unsubscribed variant that is still there and not being
    /// deleted: the catalog operator may have been running its InstallPlan while it was
    /// deleted, and made the CSV again. A variant leaves `leaving` once it has no CSV.
    async fn tidy(&mut self) -> Result<(), String> {
        let mut left = Vec::new();
        for variant in std::mem::take(&mut self.leaving) {
            let namespace = namespace(variant);
            let csvs = list(
                &self.env.client,
                &namespace,
                "ClusterServiceVersion",
                "clusterserviceversions",
                NOT_COPIES,
            )
            .await?;
            if csvs
                .iter()
                .any(|csv| csv.metadata.deletion_timestamp.is_none())
            {
                self.delete_csvs(&namespace)?;
            }
            if !csvs.is_empty() {
                left.push(variant);
            }
        }
        self.leaving = left;
        Ok(())
    }

    /// Deletes every namespace and CRD of a variant, once none is subscribed.
    fn remove_namespaces(&mut self) -> Result<(), String> {
        for variant in std::mem::take(&mut self.live) {
            self.unsubscribe(variant)?;
        }
        self.leaving.clear();
        for variant in std::mem::take(&mut self.made) {
            self.kubectl(&["delete", "namespace", &namespace(variant), "--wait=false"])?;
            let crd = variant.crd_name();
            self.kubectl(&["delete", "crd", &crd, "--ignore-not-found", "--wait=false"])?;
        }
        Ok(())
    }

    fn kubectl(&self, args: &[&str]) -> Result<(), String> {
        let (ok, _, stderr) = self.env.kubectl(args, None);
        ok.then_some(())
            .ok_or_else(|| format!("kubectl {}: {stderr}", args.join(" ")))
    }
}

impl Drop for Subscribed<'_> {
    fn drop(&mut self) {
        if let Err(e) = self.remove_namespaces() {
            eprintln!("removing the variants: {e}");
        }
    }
}

/// OLM's verdict on `variant` so far, if it has given one. `seen` holds when each CSV was
/// first seen.
fn verdict(
    snapshot: &Snapshot,
    variant: &Variant,
    seen: &mut BTreeMap<String, Instant>,
) -> Option<Verdict> {
    for csv in snapshot.items("clusterserviceversions") {
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
    for plan in snapshot.items("installplans") {
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
    for subscription in snapshot.items("subscriptions") {
        for condition in subscription["status"]["conditions"]
            .as_array()
            .into_iter()
            .flatten()
        {
            let message = condition["message"].as_str().unwrap_or_default();
            // OLM not connected to the catalog's registry (yet, or for a moment): it resolves
            // again once it is, so this is no verdict on the bundle.
            if condition["type"] == "ResolutionFailed"
                && condition["status"] == "True"
                && !message.contains(REGISTRY_NOT_CONNECTED)
            {
                return Some(Verdict::Refuses(format!(
                    "Subscription ResolutionFailed: {message}"
                )));
            }
        }
    }
    None
}

/// Where a variant stands when OLM has said nothing decisive: its CSV's phase and message.
fn standing(snapshot: &Snapshot) -> String {
    let csvs: Vec<String> = snapshot
        .items("clusterserviceversions")
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

    // The variants' catalog, as an image, served and subscribed to.
    let release = dir.path().join("release");
    variants::write_catalog(&variants, &release.join("catalog"));
    let dockerfile = testkit::repository::root().join("catalog.Dockerfile");
    std::fs::copy(&dockerfile, release.join("catalog.Dockerfile"))
        .unwrap_or_else(|e| panic!("copy {}: {e}", dockerfile.display()));
    crate::cluster::build_release_images(&release, CATALOG_VERSION, &["catalog"]).await;
    let image = crate::cluster::release_image(&release, CATALOG_VERSION, "catalog");
    apply(
        &env,
        &json!({
            "apiVersion": "operators.coreos.com/v1alpha1",
            "kind": "CatalogSource",
            "metadata": {"name": CATALOG_SOURCE, "namespace": "olm"},
            "spec": {
                "sourceType": "grpc",
                "image": image,
                "grpcPodConfig": {"securityContextConfig": "restricted"},
                "displayName": "check-bundle variants",
            },
        }),
    );
    env.catalog_source_ready(CATALOG_SOURCE).await;
    // OLM's verdicts, IN_FLIGHT variants at a time; each is removed once OLM has decided.
    let mut subscribed = Subscribed::new(&env);
    let mut queue = variants.iter();
    let mut waiting: Vec<(&Variant, Instant, Snapshot)> = Vec::new();
    let mut decided: BTreeMap<&str, Result<(Verdict, Duration), String>> = BTreeMap::new();
    let mut seen = BTreeMap::new();
    loop {
        while waiting.len() < IN_FLIGHT {
            let Some(variant) = queue.next() else { break };
            subscribed.subscribe(variant).await;
            waiting.push((variant, Instant::now(), Snapshot::default()));
        }
        if waiting.is_empty() {
            break;
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
        subscribed
            .tidy()
            .await
            .unwrap_or_else(|e| panic!("the unsubscribed variants' CSVs: {e}"));
        let mut still = Vec::new();
        for (variant, since, last) in waiting {
            // An API error is a round without news; DECIDE bounds how many there can be.
            let (snapshot, error) = match Snapshot::take(&env.client, &namespace(variant)).await {
                Ok(snapshot) => (snapshot, None),
                Err(e) => (last, Some(e)),
            };
            let outcome = match verdict(&snapshot, variant, &mut seen) {
                Some(verdict) => Some(Ok((verdict, since.elapsed()))),
                None if since.elapsed() >= DECIDE => Some(Err(format!(
                    "no verdict within {} s: {}{}",
                    DECIDE.as_secs(),
                    standing(&snapshot),
                    error
                        .map(|e| format!("; last read failed: {e}"))
                        .unwrap_or_default()
                ))),
                None => None,
            };
            match outcome {
                Some(outcome) => {
                    decided.insert(variant.id, outcome);
                    subscribed
                        .unsubscribe(variant)
                        .unwrap_or_else(|e| panic!("unsubscribe variant {}: {e}", variant.id));
                }
                None => still.push((variant, since, snapshot)),
            }
        }
        waiting = still;
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
        let (olm, agrees) = match &decided[variant.id] {
            Ok((Verdict::Installs, after)) => (
                format!("installs (Succeeded after {:.1} s)", after.as_secs_f64()),
                !refused && variant.olm_says.is_none(),
            ),
            Ok((Verdict::Refuses(words) | Verdict::NeverInstalls(words), after)) => (
                format!("refuses after {:.1} s: {words}", after.as_secs_f64()),
                // The refusal must be the one the variant is for.
                *refused && variant.olm_says.is_some_and(|says| words.contains(says)),
            ),
            Err(undecided) => (undecided.clone(), false),
        };
        let line = format!(
            "variant {}: check-bundle says OLM v0 {said} ({findings}); OLM v0 {olm}",
            variant.id
        );
        eprintln!("{line}");
        if agrees {
            agreed += 1;
        } else {
            disagreements.push(line);
        }
    }
    eprintln!(
        "check-bundle and the real OLM v0 agree on {agreed} of {} bundle variants",
        variants.len()
    );

    // The variants' namespaces and CRDs, and the catalog.
    subscribed
        .remove_namespaces()
        .unwrap_or_else(|e| panic!("remove the variants: {e}"));
    let (ok, _, stderr) = env.kubectl(
        &["delete", "catalogsource", CATALOG_SOURCE, "-n", "olm"],
        None,
    );
    assert!(ok, "delete the variants' CatalogSource: {stderr}");
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

    // The disagreements are repeated here, so that the end of a long log shows them.
    assert!(
        disagreements.is_empty(),
        "check-bundle and OLM v0 disagree on {} variants:\n{}",
        disagreements.len(),
        disagreements.join("\n")
    );
}
