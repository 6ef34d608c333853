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

mod digests;
mod platforms;
mod rules;

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
    for dir in ["bundle", "catalog", "config", "charts"] {
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
        // The chart's templates are YAML only once Helm has rendered them (tests/chart.rs).
        if path.ends_with(".yaml") && !path.contains("/templates/") {
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

/// The first YAML document of the rendered file `path`.
fn first_document(files: &Files, path: &str) -> serde_json::Value {
    let text = files
        .get(path)
        .unwrap_or_else(|| panic!("{path} is written"));
    yaml::documents(text).expect("parses").remove(0)
}

#[test]
fn config_names_the_webhook_service_certificate_and_secret_that_it_creates() {
    let files = plan().render().expect("renders");
    let read = |path: &str| first_document(&files, path);
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
fn config_issues_the_serving_certificate_from_a_ca_that_a_self_signed_issuer_signs() {
    let files = plan().render().expect("renders");
    let read = |path: &str| first_document(&files, path);
    let kustomization = read("config/certmanager/kustomization.yaml");
    let resources: Vec<&str> = kustomization["resources"]
        .as_array()
        .expect("resources")
        .iter()
        .filter_map(|r| r.as_str())
        .collect();
    let objects: Vec<serde_json::Value> = resources
        .iter()
        .map(|file| read(&format!("config/certmanager/{file}")))
        .collect();
    let find = |kind: &str, name: &str| {
        objects
            .iter()
            .find(|o| o["kind"] == kind && o["metadata"]["name"] == name)
            .unwrap_or_else(|| panic!("config/certmanager has no {kind} {name}"))
            .clone()
    };

    let serving = read("config/certmanager/certificate.yaml");
    assert_eq!(serving["spec"]["issuerRef"]["kind"], "Issuer");
    assert_eq!(serving["spec"]["privateKey"]["rotationPolicy"], "Always");
    assert!(serving["spec"].get("isCA").is_none());
    let ca_issuer = find(
        "Issuer",
        serving["spec"]["issuerRef"]["name"].as_str().expect("name"),
    );
    let ca_secret = ca_issuer["spec"]["ca"]["secretName"]
        .as_str()
        .expect("the serving certificate's issuer is a CA Issuer");
    let ca = objects
        .iter()
        .find(|o| o["kind"] == "Certificate" && o["spec"]["secretName"] == ca_secret)
        .expect("a Certificate writes the CA Issuer's Secret");
    assert_eq!(ca["spec"]["isCA"], true);
    assert_eq!(ca["spec"]["privateKey"]["rotationPolicy"], "Never");
    let root = find(
        "Issuer",
        ca["spec"]["issuerRef"]["name"].as_str().expect("name"),
    );
    assert!(root["spec"]["selfSigned"].is_object(), "{root}");
    assert_ne!(ca_issuer["metadata"]["name"], root["metadata"]["name"]);
}
