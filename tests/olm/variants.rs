//! Bundle variants for judging `check-bundle` by the real OLM: the shipped bundle's CSV and CRD,
//! each variant breaking one rule (or none), and a file-based catalog that publishes them.
//!
//! Every variant is made installable next to the operator and to the others: its API group is
//! `<id>.vt.f2367556.dev` (so no two provide the same API, and no OperatorGroups conflict),
//! its Deployment has 0 replicas (nothing runs; a Deployment of 0 replicas is available), and
//! its admission webhooks fail open (nothing they could intercept stops the cluster). None of
//! that touches a rule `check-bundle` enforces. A variant's bundle holds its CSV and CRD only.
//!
//! The catalog carries each bundle's objects inline (`olm.bundle.object`), so OLM installs it
//! without an unpack Job or an image.

use std::path::Path;

use base64::Engine;
use serde_json::{Value, json};
use testkit::repository;

use memcached_packager::rules::Rule;
use memcached_packager::yaml;

/// The shipped API group, replaced in each variant.
const GROUP: &str = "cache.f2367556.dev";
/// What every variant's group ends with.
pub const GROUP_SUFFIX: &str = ".vt.f2367556.dev";
/// The version every variant is published at.
const VERSION: &str = "0.1.0";
/// The channel every variant is published in.
pub const CHANNEL: &str = "alpha";

/// One bundle variant.
pub struct Variant {
    /// Package, namespace suffix and group prefix: a DNS label.
    pub id: &'static str,
    /// The rule it breaks, or None for a variant every OLM v0 rule allows.
    pub breaks: Option<Rule>,
    /// Words OLM v0's refusal must contain; None when OLM v0 installs it.
    pub olm_says: Option<&'static str>,
    /// Its CSV.
    pub csv: Value,
    /// Its CRD.
    pub crd: Value,
}

impl Variant {
    /// The CSV's name.
    pub fn csv_name(&self) -> String {
        format!("{}.v{VERSION}", self.id)
    }

    /// Its CRD's name.
    pub fn crd_name(&self) -> String {
        self.crd["metadata"]["name"]
            .as_str()
            .unwrap_or_default()
            .to_string()
    }

    /// Writes its bundle (`manifests/` and `metadata/`) below `dir`.
    pub fn write_bundle(&self, dir: &Path) {
        let manifests = dir.join("manifests");
        let metadata = dir.join("metadata");
        std::fs::create_dir_all(&manifests).expect("mkdir manifests");
        std::fs::create_dir_all(&metadata).expect("mkdir metadata");
        let write = |path: std::path::PathBuf, value: &Value| {
            std::fs::write(&path, serde_json::to_vec_pretty(value).expect("JSON"))
                .unwrap_or_else(|e| panic!("write {}: {e}", path.display()))
        };
        write(manifests.join("csv.json"), &self.csv);
        write(manifests.join("crd.json"), &self.crd);
        let annotations = format!(
            "annotations:\n  operators.operatorframework.io.bundle.mediatype.v1: registry+v1\n  \
             operators.operatorframework.io.bundle.manifests.v1: manifests/\n  \
             operators.operatorframework.io.bundle.metadata.v1: metadata/\n  \
             operators.operatorframework.io.bundle.package.v1: {}\n  \
             operators.operatorframework.io.bundle.channels.v1: {CHANNEL}\n",
            self.id
        );
        std::fs::write(metadata.join("annotations.yaml"), annotations).expect("annotations");
    }

    /// Its package, channel and bundle, as file-based catalog objects.
    fn catalog_entries(&self) -> Vec<Value> {
        let object = |value: &Value| {
            let data = base64::engine::general_purpose::STANDARD
                .encode(serde_json::to_vec(value).expect("JSON"));
            json!({"type": "olm.bundle.object", "value": {"data": data}})
        };
        let mut properties = vec![json!({
            "type": "olm.package",
            "value": {"packageName": self.id, "version": VERSION},
        })];
        let group = self.crd["spec"]["group"].clone();
        let kind = self.crd["spec"]["names"]["kind"].clone();
        for version in self.crd["spec"]["versions"]
            .as_array()
            .into_iter()
            .flatten()
        {
            properties.push(json!({
                "type": "olm.gvk",
                "value": {"group": group, "kind": kind, "version": version["name"]},
            }));
        }
        properties.push(object(&self.csv));
        properties.push(object(&self.crd));
        vec![
            json!({"schema": "olm.package", "name": self.id, "defaultChannel": CHANNEL}),
            json!({
                "schema": "olm.channel",
                "package": self.id,
                "name": CHANNEL,
                "entries": [{"name": self.csv_name()}],
            }),
            json!({
                "schema": "olm.bundle",
                "name": self.csv_name(),
                "package": self.id,
                "image": "",
                "properties": properties,
            }),
        ]
    }
}

/// Writes a file-based catalog of `variants` into `dir` (one `catalog.json` stream).
pub fn write_catalog(variants: &[Variant], dir: &Path) {
    std::fs::create_dir_all(dir).expect("mkdir catalog");
    let mut text = String::new();
    for entry in variants.iter().flat_map(Variant::catalog_entries) {
        text.push_str(&serde_json::to_string(&entry).expect("JSON"));
        text.push('\n');
    }
    std::fs::write(dir.join("catalog.json"), text).expect("write the catalog");
}

/// The shipped bundle's CSV and CRD.
fn shipped() -> (Value, Value) {
    let manifests = repository::root().join("bundle/manifests");
    let mut csv = None;
    let mut crd = None;
    for entry in std::fs::read_dir(&manifests).expect("bundle/manifests") {
        let path = entry.expect("an entry").path();
        let text = std::fs::read_to_string(&path).expect("a manifest");
        for object in yaml::documents(&text).expect("YAML") {
            match object["kind"].as_str() {
                Some("ClusterServiceVersion") => csv = Some(object),
                Some("CustomResourceDefinition") => crd = Some(object),
                _ => {}
            }
        }
    }
    (csv.expect("the shipped CSV"), crd.expect("the shipped CRD"))
}

/// The shipped CSV and CRD, made a variant named `id` that breaks `breaks` through `edit`.
fn variant(
    id: &'static str,
    breaks: Option<Rule>,
    olm_says: Option<&'static str>,
    edit: impl FnOnce(&mut Value, &mut Value),
) -> Variant {
    let (csv, crd) = shipped();
    let group = format!("{id}{GROUP_SUFFIX}");
    let rename = |value: &Value| -> Value {
        serde_json::from_str(&value.to_string().replace(GROUP, &group)).expect("JSON")
    };
    let mut csv = rename(&csv);
    let mut crd = rename(&crd);
    csv["metadata"]["name"] = json!(format!("{id}.v{VERSION}"));
    if let Some(annotations) = csv["metadata"]["annotations"].as_object_mut() {
        annotations.remove("olm.skipRange");
    }
    csv["spec"]["version"] = json!(VERSION);
    if let Some(spec) = csv["spec"].as_object_mut() {
        spec.remove("replaces");
    }
    for deployment in csv["spec"]["install"]["spec"]["deployments"]
        .as_array_mut()
        .expect("deployments")
    {
        deployment["spec"]["replicas"] = json!(0);
    }
    for webhook in webhooks(&mut csv) {
        if webhook["type"] != "ConversionWebhook" {
            webhook["failurePolicy"] = json!("Ignore");
        }
    }
    edit(&mut csv, &mut crd);
    Variant {
        id,
        breaks,
        olm_says,
        csv,
        crd,
    }
}

/// The CSV's webhook definitions.
fn webhooks(csv: &mut Value) -> impl Iterator<Item = &mut Value> {
    csv["spec"]["webhookdefinitions"]
        .as_array_mut()
        .expect("webhookdefinitions")
        .iter_mut()
}

/// The webhook definition of `kind`.
fn webhook<'a>(csv: &'a mut Value, kind: &str) -> &'a mut Value {
    webhooks(csv)
        .find(|w| w["type"] == kind)
        .unwrap_or_else(|| panic!("a {kind} webhook"))
}

const MUTATING: &str = "MutatingAdmissionWebhook";
const VALIDATING: &str = "ValidatingAdmissionWebhook";
const CONVERSION: &str = "ConversionWebhook";

/// One variant per rule whose OLM v0 verdict the bundle decides, plus the control: the rules
/// OLM v0 enforces must fail it, the rules only OLM v1 enforces must not.
///
/// Not here, and why: `all-namespaces-unsupported` (whether OLM v0 installs it depends on the
/// OperatorGroup, not on the bundle), `apiservice-definitions` (OLM v0 would register an
/// aggregated API whose server never runs, breaking discovery for every client of the shared
/// cluster), and this operator's own rules (`unrouted-webhook-path`,
/// `admission-review-versions-without-v1`: a variant is not this operator's bundle, and both
/// OLMs install such a bundle).
pub fn all() -> Vec<Variant> {
    vec![
        variant("clean", None, None, |_, _| {}),
        variant(
            "all-groups",
            Some(Rule::AllGroups),
            Some("webhook rules cannot include all groups"),
            |csv, _| {
                webhook(csv, MUTATING)["rules"][0]["apiGroups"] = json!(["*"]);
            },
        ),
        variant(
            "conversion-rules-all-groups",
            Some(Rule::AllGroups),
            Some("webhook rules cannot include all groups"),
            |csv, _| {
                let rules = webhook(csv, MUTATING)["rules"].clone();
                let conversion = webhook(csv, CONVERSION);
                conversion["rules"] = rules;
                conversion["rules"][0]["apiGroups"] = json!(["*"]);
            },
        ),
        variant(
            "olm-group",
            Some(Rule::OlmGroup),
            Some("webhook rules cannot include the OLM group"),
            |csv, _| {
                webhook(csv, VALIDATING)["rules"][0]["apiGroups"] = json!(["operators.coreos.com"]);
            },
        ),
        variant("olm-v1-group", Some(Rule::OlmV1Group), None, |csv, _| {
            webhook(csv, VALIDATING)["rules"][0]["apiGroups"] = json!(["olm.operatorframework.io"]);
        }),
        variant(
            "webhook-config-kind",
            Some(Rule::WebhookConfigurations),
            Some("cannot include MutatingWebhookConfiguration or ValidatingWebhookConfiguration"),
            |csv, _| {
                let rule = &mut webhook(csv, VALIDATING)["rules"][0];
                rule["apiGroups"] = json!(["admissionregistration.k8s.io"]);
                rule["resources"] = json!(["ValidatingWebhookConfiguration"]);
            },
        ),
        variant(
            "webhook-config-plural",
            Some(Rule::WebhookConfigurations),
            None,
            |csv, _| {
                let rule = &mut webhook(csv, VALIDATING)["rules"][0];
                rule["apiGroups"] = json!(["admissionregistration.k8s.io"]);
                rule["resources"] = json!(["validatingwebhookconfigurations"]);
            },
        ),
        variant(
            "conversion-install-modes",
            Some(Rule::ConversionInstallModes),
            Some("CSVs with conversion webhooks must support only AllNamespaces"),
            |csv, _| {
                for mode in csv["spec"]["installModes"]
                    .as_array_mut()
                    .expect("installModes")
                {
                    if mode["type"] == "OwnNamespace" {
                        mode["supported"] = json!(true);
                    }
                }
            },
        ),
        variant(
            "conversion-without-crds",
            Some(Rule::ConversionWithoutCrds),
            Some("conversion webhook must have at least one CRD specified"),
            |csv, _| {
                webhook(csv, CONVERSION)["conversionCRDs"] = json!([]);
            },
        ),
        variant(
            "conversion-crd-not-owned",
            Some(Rule::ConversionCrdNotOwned),
            Some("does not own CRD memcacheds.cache.f2367556.dev"),
            |csv, _| {
                // The CRD the installed operator owns: a CRD on the cluster, not this CSV's.
                webhook(csv, CONVERSION)["conversionCRDs"] =
                    json!([memcached_operator::api::CRD_NAME]);
            },
        ),
        variant(
            "preserve-unknown-fields",
            Some(Rule::ConversionCrdPreservesUnknownFields),
            Some("spec.preserveUnknownFields: Invalid value: true"),
            |_, crd| {
                crd["spec"]["preserveUnknownFields"] = json!(true);
            },
        ),
        variant(
            "conversion-crd-twice",
            Some(Rule::ConversionCrdTwice),
            None,
            |csv, _| {
                let mut second = webhook(csv, CONVERSION).clone();
                second["generateName"] = json!(format!(
                    "c2-{}",
                    second["generateName"].as_str().unwrap_or_default()
                ));
                csv["spec"]["webhookdefinitions"]
                    .as_array_mut()
                    .expect("webhookdefinitions")
                    .push(second);
            },
        ),
        variant(
            "duplicate-name",
            Some(Rule::DuplicateGenerateName),
            Some("CSV contains repeated WebhookDescription name"),
            |csv, _| {
                let copy = webhook(csv, VALIDATING).clone();
                csv["spec"]["webhookdefinitions"]
                    .as_array_mut()
                    .expect("webhookdefinitions")
                    .push(copy);
            },
        ),
        variant(
            "duplicate-name-across-types",
            Some(Rule::DuplicateGenerateName),
            Some("CSV contains repeated WebhookDescription name"),
            |csv, _| {
                let name = webhook(csv, MUTATING)["generateName"].clone();
                webhook(csv, VALIDATING)["generateName"] = name;
            },
        ),
        variant(
            "invalid-name",
            Some(Rule::InvalidGenerateName),
            Some(
                "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters",
            ),
            |csv, _| {
                let hook = webhook(csv, VALIDATING);
                let name = hook["generateName"]
                    .as_str()
                    .unwrap_or_default()
                    .to_string();
                hook["generateName"] = json!(format!("V{name}"));
            },
        ),
        variant(
            "unqualified-name",
            Some(Rule::UnqualifiedGenerateName),
            Some("should be a domain with at least three segments separated by dots"),
            |csv, _| {
                webhook(csv, VALIDATING)["generateName"] = json!("vmemcached");
            },
        ),
        variant(
            "unknown-deployment",
            Some(Rule::UnknownDeployment),
            Some("calculated deployment install is bad"),
            |csv, _| {
                webhook(csv, VALIDATING)["deploymentName"] = json!("elsewhere");
            },
        ),
        variant(
            "long-name",
            Some(Rule::GenerateNameTooLong),
            Some("must be no more than 63 bytes"),
            |csv, _| {
                let hook = webhook(csv, VALIDATING);
                let name = hook["generateName"]
                    .as_str()
                    .unwrap_or_default()
                    .to_string();
                hook["generateName"] = json!(format!("{}-{name}", "x".repeat(63 - name.len())));
            },
        ),
        variant(
            "review-versions-unknown",
            Some(Rule::ReviewVersionsUnknown),
            Some("must include at least one of v1, v1beta1"),
            |csv, _| {
                webhook(csv, VALIDATING)["admissionReviewVersions"] = json!(["v2"]);
            },
        ),
        variant("review-versions-v1beta1", None, None, |csv, _| {
            webhook(csv, VALIDATING)["admissionReviewVersions"] = json!(["v1beta1"]);
        }),
        variant(
            "side-effects",
            Some(Rule::SideEffects),
            Some("Unsupported value: \"Some\""),
            |csv, _| {
                webhook(csv, VALIDATING)["sideEffects"] = json!("Some");
            },
        ),
    ]
}
