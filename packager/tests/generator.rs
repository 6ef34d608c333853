//! Runs the generator as a user does (the built binary) and as a library: output is
//! byte-identical across runs, the committed files are exactly what it writes, the CSV agrees
//! with what the webhook server routes and the Deployment runs, and every OLM rule refuses a
//! CSV that breaks it without writing anything.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::Command;

use k8s_openapi::api::admissionregistration::v1::RuleWithOperations;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::PodSpec;
use k8s_openapi::api::networking::v1::NetworkPolicy;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use memcached_operator::webhook::{self, WebhookKind};
use memcached_operator::{api, operator};
use memcached_packager::bundle::Options;
use memcached_packager::csv::{ClusterServiceVersion, InstallMode};
use memcached_packager::files::Files;
use memcached_packager::generate::{GenerateError, Plan};
use memcached_packager::rules::Rule;
use memcached_packager::{release, yaml};

const BIN: &str = env!("CARGO_BIN_EXE_memcached-packager");

fn repo() -> PathBuf {
    PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/.."))
}

/// Runs `generate` into `dir` with no SOURCE_DATE_EPOCH.
fn generate_into(dir: &Path) {
    let output = Command::new(BIN)
        .args(["generate", "--output-dir"])
        .arg(dir)
        .env_remove("SOURCE_DATE_EPOCH")
        .output()
        .expect("runs");
    assert!(output.status.success(), "{output:?}");
}

/// Every file below `dir`, relative path to bytes.
fn tree(dir: &Path) -> BTreeMap<String, Vec<u8>> {
    fn walk(root: &Path, dir: &Path, out: &mut BTreeMap<String, Vec<u8>>) {
        for entry in std::fs::read_dir(dir).expect("readable") {
            let path = entry.expect("entry").path();
            if path.is_dir() {
                walk(root, &path, out);
            } else {
                let relative = path.strip_prefix(root).expect("below root");
                out.insert(
                    relative.to_string_lossy().replace('\\', "/"),
                    std::fs::read(&path).expect("readable"),
                );
            }
        }
    }
    let mut out = BTreeMap::new();
    walk(dir, dir, &mut out);
    out
}

fn plan() -> Plan {
    Plan::new(Options::for_release()).expect("the release plans")
}

#[test]
fn generate_is_byte_identical_across_runs() {
    let first = tempfile::tempdir().expect("tempdir");
    let second = tempfile::tempdir().expect("tempdir");
    generate_into(first.path());
    generate_into(second.path());
    let a = tree(first.path());
    assert!(a.len() > 30, "{:?}", a.keys());
    assert_eq!(a, tree(second.path()));
}

#[test]
fn committed_files_are_what_the_generator_writes() {
    let out = tempfile::tempdir().expect("tempdir");
    generate_into(out.path());
    let generated = tree(out.path());
    let mut committed = BTreeMap::new();
    for dir in ["bundle", "catalog", "config"] {
        for (path, bytes) in tree(&repo().join(dir)) {
            committed.insert(format!("{dir}/{path}"), bytes);
        }
    }
    for file in ["bundle.Dockerfile", "catalog.Dockerfile"] {
        committed.insert(
            file.to_string(),
            std::fs::read(repo().join(file)).expect("committed"),
        );
    }
    let stale: Vec<_> = committed
        .keys()
        .filter(|p| !generated.contains_key(*p))
        .collect();
    assert!(
        stale.is_empty(),
        "committed but no longer generated: {stale:?}"
    );
    for (path, bytes) in &generated {
        assert!(
            committed.get(path) == Some(bytes),
            "{path} differs from what `memcached-packager generate` writes; run it and commit"
        );
    }
}

#[test]
fn source_date_epoch_sets_created_at() {
    let out = tempfile::tempdir().expect("tempdir");
    let status = Command::new(BIN)
        .args(["generate", "--output-dir"])
        .arg(out.path())
        .env("SOURCE_DATE_EPOCH", "1700000000")
        .status()
        .expect("runs");
    assert!(status.success());
    let csv = std::fs::read_to_string(
        out.path()
            .join("bundle/manifests/memcached-operator.clusterserviceversion.yaml"),
    )
    .expect("written");
    assert!(csv.contains("createdAt: \"2023-11-14T22:13:20Z\""), "{csv}");
}

#[test]
fn every_generated_file_parses_back_as_yaml() {
    let files = plan().render().expect("renders");
    for (path, text) in files.iter() {
        if path.ends_with(".yaml") {
            let docs = yaml::documents(text).unwrap_or_else(|e| panic!("{path}: {e}"));
            assert_eq!(docs.len(), 1, "{path}");
        }
    }
}

#[test]
fn the_csv_webhooks_match_what_the_server_routes_and_the_deployment_runs() {
    let files = plan().render().expect("renders");
    let text = files
        .get("bundle/manifests/memcached-operator.clusterserviceversion.yaml")
        .expect("the CSV is written");
    let docs = yaml::documents(text).expect("parses");
    let csv: ClusterServiceVersion = serde_json::from_value(docs[0].clone()).expect("a CSV");

    let deployment = &csv.spec.install.spec.deployments[0];
    assert_eq!(deployment.name, operator::DEPLOYMENT_NAME);
    let pod = deployment.spec.template.spec.as_ref().expect("pod spec");
    let container = pod
        .containers
        .iter()
        .find(|c| c.name == operator::CONTAINER_NAME)
        .expect("the operator container");
    let container_ports: Vec<i32> = container
        .ports
        .iter()
        .flatten()
        .map(|p| p.container_port)
        .collect();

    assert_eq!(csv.spec.webhookdefinitions.len(), webhook::WEBHOOKS.len());
    for (description, entry) in csv.spec.webhookdefinitions.iter().zip(&webhook::WEBHOOKS) {
        assert_eq!(description.kind, entry.kind.olm_type());
        assert_eq!(description.generate_name, entry.generate_name);
        assert_eq!(description.webhook_path.as_deref(), Some(entry.path));
        assert_eq!(
            webhook::by_path(entry.path).map(|w| w.kind),
            Some(entry.kind)
        );
        assert_eq!(description.deployment_name, deployment.name);
        assert_eq!(description.container_port, Some(443));
        let target = match &description.target_port {
            Some(IntOrString::Int(p)) => *p,
            other => panic!("targetPort {other:?}"),
        };
        assert_eq!(target, i32::from(operator::WEBHOOK_PORT));
        assert!(container_ports.contains(&target), "{container_ports:?}");
        assert_eq!(description.admission_review_versions, vec!["v1"]);
        assert_eq!(description.side_effects.as_deref(), Some("None"));
        assert_eq!(description.failure_policy.as_deref(), Some("Fail"));
        assert_eq!(description.match_policy.as_deref(), Some("Equivalent"));
        match entry.kind {
            WebhookKind::Conversion => {
                assert_eq!(description.conversion_crds, vec![api::CRD_NAME]);
                assert!(description.rules.is_empty());
            }
            WebhookKind::Mutating | WebhookKind::Validating => {
                let rule = &description.rules[0];
                assert_eq!(rule.api_groups, Some(vec![api::GROUP.to_string()]));
                assert_eq!(
                    rule.api_versions,
                    Some(vec![api::STORAGE_VERSION.to_string()])
                );
                assert_eq!(rule.resources, Some(vec![api::PLURAL.to_string()]));
                let operations: Vec<&str> = rule
                    .operations
                    .iter()
                    .flatten()
                    .map(String::as_str)
                    .collect();
                assert_eq!(operations, entry.operations);
            }
        }
    }
    for port in [
        operator::WEBHOOK_PORT,
        operator::PROBE_PORT,
        operator::METRICS_PORT,
    ] {
        assert!(container_ports.contains(&i32::from(port)), "{port}");
    }
    let probe_port = |probe: &Option<k8s_openapi::api::core::v1::Probe>| {
        probe
            .as_ref()
            .and_then(|p| p.http_get.as_ref())
            .map(|h| (h.path.clone(), h.port.clone()))
    };
    let health = container
        .ports
        .iter()
        .flatten()
        .find(|p| p.container_port == i32::from(operator::PROBE_PORT))
        .and_then(|p| p.name.clone())
        .expect("the probe port is named");
    assert_eq!(
        probe_port(&container.liveness_probe),
        Some((
            Some("/healthz".to_string()),
            IntOrString::String(health.clone())
        ))
    );
    assert_eq!(
        probe_port(&container.readiness_probe),
        Some((Some("/readyz".to_string()), IntOrString::String(health)))
    );
}

/// The one object in the rendered file at `path`.
fn rendered<T: serde::de::DeserializeOwned>(files: &Files, path: &str) -> T {
    let text = files
        .get(path)
        .unwrap_or_else(|| panic!("{path} is not generated"));
    let docs = yaml::documents(text).unwrap_or_else(|e| panic!("{path}: {e}"));
    serde_json::from_value(docs[0].clone()).unwrap_or_else(|e| panic!("{path}: {e}"))
}

/// The platforms of `release::PLATFORMS`, as (os, arch).
fn listed_platforms() -> BTreeSet<(String, String)> {
    release::PLATFORMS
        .iter()
        .map(|p| (p.os.to_string(), p.arch.to_string()))
        .collect()
}

/// The (os, arch) pairs a pod's required node affinity admits, read the way operator-sdk's
/// multiarch validator reads them: per term, every `In` OS with every `In` architecture.
fn required_platforms(pod: &PodSpec) -> BTreeSet<(String, String)> {
    let terms = pod
        .affinity
        .as_ref()
        .and_then(|a| a.node_affinity.as_ref())
        .and_then(|n| {
            n.required_during_scheduling_ignored_during_execution
                .as_ref()
        })
        .map(|s| s.node_selector_terms.clone())
        .unwrap_or_default();
    let mut platforms = BTreeSet::new();
    for term in terms {
        let values = |key: &str| -> Vec<String> {
            term.match_expressions
                .iter()
                .flatten()
                .filter(|e| e.key == key && e.operator == "In")
                .flat_map(|e| e.values.clone().unwrap_or_default())
                .collect()
        };
        for os in values("kubernetes.io/os") {
            for arch in values("kubernetes.io/arch") {
                platforms.insert((os.clone(), arch));
            }
        }
    }
    platforms
}

const CSV_PATH: &str = "bundle/manifests/memcached-operator.clusterserviceversion.yaml";

#[test]
fn the_csv_labels_declare_exactly_the_listed_platforms() {
    let files = plan().render().expect("renders");
    let csv: ClusterServiceVersion = rendered(&files, CSV_PATH);
    let labels = csv.metadata.labels.clone().unwrap_or_default();
    let mut expected = BTreeMap::new();
    for (os, arch) in listed_platforms() {
        expected.insert(
            format!("operatorframework.io/os.{os}"),
            "supported".to_string(),
        );
        expected.insert(
            format!("operatorframework.io/arch.{arch}"),
            "supported".to_string(),
        );
    }
    assert_eq!(labels, expected);
    // The catalog carries the same labels, as `opm render` copies them from the CSV.
    let bundle: serde_json::Value =
        rendered(&files, "catalog/memcached-operator/bundle-v0.1.0.yaml");
    let metadata = bundle["properties"]
        .as_array()
        .expect("properties")
        .iter()
        .find(|p| p["type"] == "olm.csv.metadata")
        .expect("olm.csv.metadata");
    assert_eq!(
        metadata["value"]["labels"],
        serde_json::to_value(&expected).expect("json")
    );
}

#[test]
fn the_deployment_requires_nodes_of_the_listed_platforms_with_and_without_olm() {
    let files = plan().render().expect("renders");
    let csv: ClusterServiceVersion = rendered(&files, CSV_PATH);
    let in_csv = csv.spec.install.spec.deployments[0]
        .spec
        .template
        .spec
        .clone()
        .expect("pod spec");
    let manager: Deployment = rendered(&files, "config/manager/manager.yaml");
    let in_config = manager
        .spec
        .and_then(|s| s.template.spec)
        .expect("pod spec");
    for pod in [&in_csv, &in_config] {
        assert_eq!(required_platforms(pod), listed_platforms());
        // The platforms are added to the affinity already there, not put in its place.
        assert!(
            pod.affinity
                .as_ref()
                .and_then(|a| a.pod_anti_affinity.as_ref())
                .is_some(),
            "{pod:?}"
        );
    }
}

#[test]
fn the_network_policies_select_the_operator_pods_and_admit_only_the_metrics_and_webhook_ports() {
    let files = plan().render().expect("renders");
    let manager: Deployment = rendered(&files, "config/manager/manager.yaml");
    let pod_labels = manager
        .spec
        .and_then(|s| s.template.metadata)
        .and_then(|m| m.labels)
        .expect("pod labels");
    let metrics = i32::from(operator::METRICS_PORT);
    let webhook = i32::from(operator::WEBHOOK_PORT);
    for (dir, suffix) in [
        (
            "bundle/manifests/memcached-operator-",
            "_networking.k8s.io_v1_networkpolicy.yaml",
        ),
        ("config/network-policy/", ".yaml"),
    ] {
        let mut admitted = BTreeMap::new();
        for name in ["allow-metrics-traffic", "allow-webhook-traffic"] {
            let policy: NetworkPolicy = rendered(&files, &format!("{dir}{name}{suffix}"));
            let spec = policy.spec.expect("spec");
            assert_eq!(
                spec.pod_selector.and_then(|s| s.match_labels).as_ref(),
                Some(&pod_labels),
                "{name}"
            );
            assert_eq!(spec.policy_types, Some(vec!["Ingress".to_string()]));
            let rules = spec.ingress.expect("ingress");
            assert_eq!(rules.len(), 1, "{name}");
            let ports: Vec<(Option<IntOrString>, Option<String>, Option<i32>)> = rules[0]
                .ports
                .iter()
                .flatten()
                .map(|p| (p.port.clone(), p.protocol.clone(), p.end_port))
                .collect();
            admitted.insert(name, (ports, rules[0].from.clone()));
        }
        let tcp = |port| vec![(Some(IntOrString::Int(port)), Some("TCP".to_string()), None)];
        let (metrics_ports, metrics_from) = &admitted["allow-metrics-traffic"];
        assert_eq!(metrics_ports, &tcp(metrics));
        let peers = metrics_from
            .clone()
            .expect("metrics come from labelled namespaces");
        assert_eq!(peers.len(), 1);
        assert_eq!(peers[0].pod_selector, None);
        assert_eq!(peers[0].ip_block, None);
        assert_eq!(
            peers[0]
                .namespace_selector
                .clone()
                .and_then(|s| s.match_labels),
            Some(BTreeMap::from([(
                "metrics".to_string(),
                "enabled".to_string()
            )]))
        );
        let (webhook_ports, webhook_from) = &admitted["allow-webhook-traffic"];
        assert_eq!(webhook_ports, &tcp(webhook));
        assert_eq!(webhook_from, &None, "webhook calls may come from anywhere");
    }

    let default: serde_json::Value = rendered(&files, "config/default/kustomization.yaml");
    assert!(
        default["resources"]
            .as_array()
            .expect("resources")
            .contains(&serde_json::json!("../network-policy")),
        "{default}"
    );
}

#[test]
fn the_dockerfile_installs_the_binary_where_the_deployment_runs_it() {
    let dockerfile = std::fs::read_to_string(repo().join("Dockerfile")).expect("Dockerfile");
    assert!(dockerfile.contains(release::BINARY_PATH), "{dockerfile}");
    assert!(dockerfile.contains("USER 65532"), "{dockerfile}");
}

/// The version a wrapper module hack/TOOL/go.mod requires `module` at.
fn pinned(tool: &str, module: &str) -> String {
    let go_mod =
        std::fs::read_to_string(repo().join("hack").join(tool).join("go.mod")).expect("go.mod");
    go_mod
        .lines()
        .map(|l| l.trim_start_matches("require").trim())
        .find_map(|l| l.strip_prefix(module).map(|v| v.trim().to_string()))
        .unwrap_or_else(|| panic!("hack/{tool}/go.mod requires no {module}"))
}

#[test]
fn scorecard_and_opm_images_match_the_pinned_tools() {
    assert_eq!(
        pinned(
            "operator-sdk",
            "github.com/operator-framework/operator-sdk "
        ),
        release::OPERATOR_SDK_VERSION
    );
    assert_eq!(
        pinned("opm", "github.com/operator-framework/operator-registry "),
        release::OPM_VERSION
    );
}

// ---- One refusal per OLM rule: the right message, and nothing written. ----

/// Writes `plan` into a fresh directory, expects a refusal naming `rule` and mentioning
/// `needle`, and checks the directory stayed empty.
fn refused(plan: Plan, rule: Rule, needle: &str) {
    let out = tempfile::tempdir().expect("tempdir");
    match plan.write(out.path()) {
        Err(GenerateError::Rules(violations)) => {
            let lines: Vec<String> = violations.iter().map(|v| v.to_string()).collect();
            assert!(
                violations
                    .iter()
                    .any(|v| v.rule == rule && v.to_string().contains(needle)),
                "expected {rule} mentioning {needle:?}, got {lines:#?}"
            );
            for line in &lines {
                assert!(line.contains(": webhook "), "{line}");
            }
        }
        other => panic!("expected a refusal for {rule}, got {other:?}"),
    }
    let left: Vec<_> = std::fs::read_dir(out.path()).expect("readable").collect();
    assert!(left.is_empty(), "{rule}: wrote {left:?}");
}

fn admission_rule(plan: &mut Plan) -> &mut RuleWithOperations {
    &mut plan.csv.spec.webhookdefinitions[1].rules[0]
}

#[test]
fn the_release_breaks_no_rule() {
    assert_eq!(plan().violations(), vec![]);
}

#[test]
fn a_rule_on_all_groups_is_refused() {
    let mut plan = plan();
    admission_rule(&mut plan).api_groups = Some(vec!["*".to_string()]);
    refused(
        plan,
        Rule::AllGroups,
        "vmemcached-v1beta1.cache.f2367556.dev",
    );
}

#[test]
fn a_rule_on_the_olm_group_is_refused() {
    let mut plan = plan();
    admission_rule(&mut plan).api_groups = Some(vec!["operators.coreos.com".to_string()]);
    refused(plan, Rule::OlmGroup, "operators.coreos.com");
}

#[test]
fn rules_on_webhook_configurations_are_refused_in_every_spelling() {
    for resource in [
        "*",
        "*/*",
        "ValidatingWebhookConfiguration",
        "mutatingwebhookconfigurations",
        "MutatingWebhookConfigurations",
        "validatingwebhookconfigurations/status",
    ] {
        let mut plan = plan();
        let rule = admission_rule(&mut plan);
        rule.api_groups = Some(vec!["admissionregistration.k8s.io".to_string()]);
        rule.resources = Some(vec![resource.to_string()]);
        refused(plan, Rule::WebhookConfigurations, &format!("{resource:?}"));
    }
}

#[test]
fn a_conversion_webhook_with_another_install_mode_is_refused() {
    let mut plan = plan();
    plan.csv.spec.install_modes = vec![
        InstallMode {
            mode: "OwnNamespace".to_string(),
            supported: true,
        },
        InstallMode {
            mode: "AllNamespaces".to_string(),
            supported: true,
        },
    ];
    refused(plan, Rule::ConversionInstallModes, "OwnNamespace");
}

#[test]
fn a_conversion_webhook_without_crds_is_refused() {
    let mut plan = plan();
    plan.csv.spec.webhookdefinitions[2].conversion_crds.clear();
    refused(
        plan,
        Rule::ConversionWithoutCrds,
        "cmemcached.cache.f2367556.dev",
    );
}

#[test]
fn a_conversion_webhook_for_a_crd_the_csv_does_not_own_is_refused() {
    let mut plan = plan();
    plan.csv.spec.webhookdefinitions[2].conversion_crds = vec!["others.example.com".to_string()];
    refused(plan, Rule::ConversionCrdNotOwned, "others.example.com");
}

#[test]
fn a_conversion_webhook_for_a_crd_preserving_unknown_fields_is_refused() {
    let mut plan = plan();
    plan.crd.spec.preserve_unknown_fields = Some(true);
    refused(
        plan,
        Rule::ConversionCrdPreservesUnknownFields,
        "preserveUnknownFields: true",
    );
}

#[test]
fn duplicate_generate_names_are_refused() {
    let mut plan = plan();
    let name = plan.csv.spec.webhookdefinitions[0].generate_name.clone();
    plan.csv.spec.webhookdefinitions[1].generate_name = name;
    refused(plan, Rule::DuplicateGenerateName, "webhookdefinitions[0]");
}

#[test]
fn a_deployment_name_that_names_no_deployment_is_refused() {
    let mut plan = plan();
    plan.csv.spec.webhookdefinitions[0].deployment_name = "controller-manager".to_string();
    refused(plan, Rule::UnknownDeployment, "\"controller-manager\"");
}

#[test]
fn admission_review_versions_without_v1_are_refused() {
    let mut plan = plan();
    plan.csv.spec.webhookdefinitions[1].admission_review_versions = vec!["v1beta1".to_string()];
    refused(plan, Rule::ReviewVersionsWithoutV1, "[v1beta1]");
}

#[test]
fn side_effects_other_than_none_are_refused() {
    for side_effects in [Some("Some"), Some("Unknown"), None] {
        let mut plan = plan();
        plan.csv.spec.webhookdefinitions[0].side_effects = side_effects.map(str::to_string);
        refused(plan, Rule::SideEffects, side_effects.unwrap_or("(unset)"));
    }
}

#[test]
fn a_webhook_path_the_server_does_not_route_is_refused() {
    let mut plan = plan();
    plan.csv.spec.webhookdefinitions[0].webhook_path =
        Some("/mutate-v1beta1-memcached".to_string());
    refused(plan, Rule::UnroutedPath, "/mutate-v1beta1-memcached");
}

#[test]
fn an_unusable_source_date_epoch_exits_2_and_writes_nothing() {
    let out = tempfile::tempdir().expect("tempdir");
    let output = Command::new(BIN)
        .args(["generate", "--output-dir"])
        .arg(out.path())
        .env("SOURCE_DATE_EPOCH", "yesterday")
        .output()
        .expect("runs");
    assert_eq!(output.status.code(), Some(2), "{output:?}");
    assert!(String::from_utf8_lossy(&output.stderr).contains("SOURCE_DATE_EPOCH"));
    assert_eq!(std::fs::read_dir(out.path()).expect("readable").count(), 0);
}

#[test]
fn config_names_the_webhook_service_certificate_and_secret_that_it_creates() {
    let files = plan().render().expect("renders");
    let read = |path: &str| -> serde_json::Value {
        let text = files
            .get(path)
            .unwrap_or_else(|| panic!("{path} is written"));
        yaml::documents(text).expect("parses").remove(0)
    };
    let service = read("config/webhook/service.yaml");
    let name = service["metadata"]["name"].clone();
    let namespace = service["metadata"]["namespace"].clone();
    let default = read("config/default/kustomization.yaml");
    assert_eq!(default["namespace"], namespace);
    assert!(default.get("namePrefix").is_none());

    for (path, pointer) in [
        (
            "config/webhook/validating.yaml",
            "/webhooks/0/clientConfig/service",
        ),
        (
            "config/webhook/mutating.yaml",
            "/webhooks/0/clientConfig/service",
        ),
        (
            "config/crd/patches/webhook_in_memcacheds.yaml",
            "/spec/conversion/webhook/clientConfig/service",
        ),
    ] {
        let reference = read(path).pointer(pointer).cloned().expect("a service");
        assert_eq!(reference["name"], name, "{path}");
        assert_eq!(reference["namespace"], namespace, "{path}");
        assert_eq!(reference["port"], 443, "{path}");
        let routed = reference["path"].as_str().expect("a path");
        assert!(webhook::by_path(routed).is_some(), "{path}: {routed}");
    }

    let certificate = read("config/certmanager/certificate.yaml");
    let dns = format!(
        "{}.{}.svc",
        name.as_str().expect("name"),
        namespace.as_str().expect("namespace")
    );
    assert!(
        certificate["spec"]["dnsNames"]
            .as_array()
            .expect("dnsNames")
            .contains(&serde_json::Value::String(dns))
    );
    let injected = format!(
        "{}/{}",
        namespace.as_str().expect("namespace"),
        certificate["metadata"]["name"].as_str().expect("name")
    );
    for path in [
        "config/certmanager/inject_ca_crd.yaml",
        "config/certmanager/inject_ca_validating.yaml",
        "config/certmanager/inject_ca_mutating.yaml",
    ] {
        assert_eq!(
            read(path)["metadata"]["annotations"]["cert-manager.io/inject-ca-from"],
            injected.as_str(),
            "{path}"
        );
    }
    let patch = read("config/default/manager_webhook_patch.yaml");
    assert_eq!(
        patch["spec"]["template"]["spec"]["volumes"][0]["secret"]["secretName"],
        certificate["spec"]["secretName"]
    );
    assert_eq!(
        patch["spec"]["template"]["spec"]["containers"][0]["volumeMounts"][0]["mountPath"],
        "/tmp/k8s-webhook-server/serving-certs"
    );
}

#[test]
fn olm_and_config_install_the_same_webhooks() {
    use k8s_openapi::api::admissionregistration::v1::{
        MutatingWebhookConfiguration, ValidatingWebhookConfiguration,
    };
    use memcached_packager::wiring::{Endpoint, wiring};

    let files = plan().render().expect("renders");
    let read = |path: &str| -> serde_json::Value {
        let text = files
            .get(path)
            .unwrap_or_else(|| panic!("{path} is written"));
        yaml::documents(text).expect("parses").remove(0)
    };
    let csv = read("bundle/manifests/memcached-operator.clusterserviceversion.yaml");
    let olm = wiring(&csv, "memcached-operator-system", &Endpoint::Service, b"").expect("wires");

    // Everything but the metadata and the client configuration (a Service OLM names after
    // the Deployment, here one config/ names itself; both route the same path).
    let mut validating: ValidatingWebhookConfiguration =
        serde_json::from_value(read("config/webhook/validating.yaml")).expect("validating");
    let mut mutating: MutatingWebhookConfiguration =
        serde_json::from_value(read("config/webhook/mutating.yaml")).expect("mutating");
    let mut from_olm_validating = olm.validating[0].webhooks.clone().expect("webhooks");
    let mut from_olm_mutating = olm.mutating[0].webhooks.clone().expect("webhooks");
    for webhook in validating.webhooks.iter_mut().flatten() {
        let path = webhook
            .client_config
            .service
            .as_ref()
            .and_then(|s| s.path.clone());
        let olm_path = from_olm_validating[0]
            .client_config
            .service
            .as_ref()
            .and_then(|s| s.path.clone());
        assert_eq!(path, olm_path);
        webhook.client_config = Default::default();
    }
    for webhook in mutating.webhooks.iter_mut().flatten() {
        webhook.client_config = Default::default();
    }
    for webhook in &mut from_olm_validating {
        webhook.client_config = Default::default();
        webhook.namespace_selector = None;
    }
    for webhook in &mut from_olm_mutating {
        webhook.client_config = Default::default();
        webhook.namespace_selector = None;
    }
    assert_eq!(validating.webhooks, Some(from_olm_validating));
    assert_eq!(mutating.webhooks, Some(from_olm_mutating));
    assert_eq!(olm.conversions.len(), 1);
    assert_eq!(olm.conversions[0].0, api::CRD_NAME);
    let olm_conversion_path = olm.conversions[0]
        .1
        .webhook
        .as_ref()
        .and_then(|w| w.client_config.as_ref())
        .and_then(|c| c.service.as_ref())
        .and_then(|s| s.path.clone());
    let config_conversion = read("config/crd/patches/webhook_in_memcacheds.yaml");
    assert_eq!(
        olm_conversion_path.as_deref(),
        config_conversion
            .pointer("/spec/conversion/webhook/clientConfig/service/path")
            .and_then(serde_json::Value::as_str)
    );
}
