//! Checks the Helm chart the generator writes: its values schema is closed at every level, and,
//! with the real helm and kustomize (`.tools/bin`, ignored by plain `cargo test`; `make
//! validate` runs them), that the schema refuses unknown keys and wrong types, that the chart
//! installs into its namespace only, that the operator accepts every argument the chart passes,
//! and that the chart renders the objects `config/default` installs, the same.

use std::collections::BTreeSet;
use std::path::PathBuf;
use std::process::Command;

use memcached_packager::bundle::Options;
use memcached_packager::chart::{CHART_DIR, open_objects, run_command};
use memcached_packager::config::NAMESPACE;
use memcached_packager::generate::Plan;
use memcached_packager::yaml;
use serde_json::Value;

fn repo() -> PathBuf {
    PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/.."))
}

fn tool(name: &str) -> PathBuf {
    repo().join(".tools/bin").join(name)
}

fn chart() -> PathBuf {
    repo().join(CHART_DIR)
}

/// `helm template` of the committed chart with `args`; (success, stdout, stderr).
fn helm_template(namespace: &str, args: &[&str]) -> (bool, String, String) {
    let output = Command::new(tool("helm"))
        .args(["template", "memcached-operator"])
        .arg(chart())
        .args(["--namespace", namespace])
        .args(args)
        .output()
        .expect("helm runs");
    (
        output.status.success(),
        String::from_utf8_lossy(&output.stdout).into_owned(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

fn rendered(args: &[&str]) -> Vec<Value> {
    let (ok, stdout, stderr) = helm_template(NAMESPACE, args);
    assert!(ok, "helm template {args:?}: {stderr}");
    yaml::documents(&stdout).expect("helm renders YAML")
}

fn identity(object: &Value) -> (String, String) {
    (
        object["kind"].as_str().unwrap_or_default().to_string(),
        object["metadata"]["name"]
            .as_str()
            .unwrap_or_default()
            .to_string(),
    )
}

fn find<'a>(objects: &'a [Value], kind: &str) -> &'a Value {
    objects
        .iter()
        .find(|o| o["kind"] == kind)
        .unwrap_or_else(|| panic!("no {kind} in {objects:#?}"))
}

#[test]
fn the_values_schema_is_closed_at_every_level() {
    let files = Plan::new(Options::for_release())
        .and_then(|plan| plan.render())
        .expect("renders");
    let text = files
        .get(&format!("{CHART_DIR}/values.schema.json"))
        .expect("a schema");
    let schema: Value = serde_json::from_str(text).expect("JSON");
    assert_eq!(open_objects(&schema, "values"), Vec::<String>::new());
    let values = yaml::documents(
        files
            .get(&format!("{CHART_DIR}/values.yaml"))
            .expect("values"),
    )
    .expect("YAML");
    let keys: BTreeSet<&String> = values[0].as_object().expect("a map").keys().collect();
    let declared: BTreeSet<&String> = schema["properties"]
        .as_object()
        .expect("properties")
        .keys()
        .collect();
    assert_eq!(keys, declared, "values.yaml sets what the schema declares");
}

#[test]
#[ignore = "needs .tools/bin/helm and kustomize: make validate runs it"]
fn the_schema_refuses_unknown_keys_and_wrong_types() {
    let refused: &[&[&str]] = &[
        &["--set", "replicas=2"],
        &["--set", "image.name=x"],
        &["--set", "leaderElection.leaseDurationSeconds=15"],
        &["--set", "affinity.nodeAffinity.preferred=x"],
        &["--set", "tolerations[0].keys=a"],
        &["--set", "extraEnv[0].nam=HTTP_PROXY"],
        &["--set", "resources.limit.cpu=1"],
        &["--set", "metrics.serviceMonitor.enable=true"],
        &["--set", "replicaCount=two"],
        &["--set-string", "replicaCount=2"],
        &["--set", "leaderElection.enabled=maybe"],
        &["--set", "image.pullPolicy=Sometimes"],
        &["--set", "controller.kubeApiQps=-1"],
        &["--set", "controller.kubeApiQps=fast"],
        &["--set", "metrics.serviceMonitor.interval=5 minutes"],
        &["--set", "image.digest=latest"],
    ];
    for args in refused {
        let (ok, _, stderr) = helm_template(NAMESPACE, args);
        assert!(!ok, "helm template {args:?} was accepted");
        assert!(
            stderr.contains("values don't meet the specifications of the schema"),
            "helm template {args:?}: {stderr}"
        );
    }
    let accepted: &[&[&str]] = &[
        &["--set", "resources.limits.cpu=2"],
        &["--set", "resources.limits.memory=512Mi"],
        &["--set", "controller.kubeApiQps=2.5"],
        &["--set-json", "controller.kubeApiQps=2.5"],
        &["--set", "metrics.serviceMonitor.interval=30s"],
    ];
    for args in accepted {
        let (ok, _, stderr) = helm_template(NAMESPACE, args);
        assert!(ok, "helm template {args:?}: {stderr}");
    }
}

#[test]
#[ignore = "needs .tools/bin/helm and kustomize: make validate runs it"]
fn the_chart_installs_into_its_namespace_only() {
    let (ok, _, stderr) = helm_template("default", &[]);
    assert!(!ok, "rendered for the namespace default");
    assert!(
        stderr.contains(&format!("installs into the namespace {NAMESPACE} only")),
        "{stderr}"
    );
}

fn manager_args(objects: &[Value]) -> Vec<String> {
    find(objects, "Deployment")["spec"]["template"]["spec"]["containers"][0]["args"]
        .as_array()
        .expect("args")
        .iter()
        .map(|a| a.as_str().expect("a string").to_string())
        .collect()
}

#[test]
#[ignore = "needs .tools/bin/helm and kustomize: make validate runs it"]
fn the_operator_accepts_every_argument_the_chart_passes() {
    let tuned: &[&str] = &[
        "--set",
        "webhooks.enableHttp2=true,log.level=debug,log.format=text,controller.kubeApiQps=2.5",
        "--set",
        "controller.maxRequestsInFlight=4,leaderElection.enabled=false,metrics.secure=false",
    ];
    let self_signed: &[&str] = &[
        "--set",
        "certificates.source=operator,certificates.caValidity=2m,certificates.certValidity=1m",
    ];
    for args in [&[][..], tuned, self_signed] {
        let objects = rendered(args);
        let arguments = manager_args(&objects);
        let matches = run_command()
            .try_get_matches_from(&arguments)
            .unwrap_or_else(|e| panic!("memcached-operator {arguments:?}: {e}"));
        assert_eq!(
            matches
                .get_one::<String>("self_signed_cert_secret")
                .is_some(),
            args == self_signed,
            "{arguments:?}"
        );
        if args == self_signed {
            assert_eq!(
                matches.get_one::<std::time::Duration>("self_signed_ca_validity"),
                Some(&std::time::Duration::from_secs(120)),
                "{arguments:?}"
            );
            continue;
        }
        if !args.is_empty() {
            assert!(matches.get_flag("enable_http2"), "{arguments:?}");
            assert_eq!(
                matches.get_one::<f64>("kube_api_qps"),
                Some(&2.5),
                "{arguments:?}"
            );
        }
    }
}

fn kustomize_default() -> Vec<Value> {
    let output = Command::new(tool("kustomize"))
        .arg("build")
        .arg(repo().join("config/default"))
        .output()
        .expect("kustomize runs");
    assert!(output.status.success(), "{output:?}");
    yaml::documents(&String::from_utf8_lossy(&output.stdout)).expect("YAML")
}

/// `value` with every whole number written as an integer: the generator writes the CRD's
/// bounds as `64.0`, kustomize as `64`, the same number.
fn whole(value: &Value) -> Value {
    match value {
        Value::Number(n) => match n.as_f64() {
            Some(f) if f.fract() == 0.0 && n.is_f64() => Value::from(f as i64),
            _ => value.clone(),
        },
        Value::Array(items) => Value::Array(items.iter().map(whole).collect()),
        Value::Object(map) => {
            Value::Object(map.iter().map(|(k, v)| (k.clone(), whole(v))).collect())
        }
        other => other.clone(),
    }
}

/// The object without the labels Helm adds, its numbers [`whole`].
fn comparable(object: &Value) -> Value {
    let mut object = whole(object);
    if let Some(labels) = object["metadata"]["labels"].as_object_mut() {
        labels.retain(|key, _| key == "app.kubernetes.io/name" || key == "control-plane");
    }
    object
}

#[test]
#[ignore = "needs .tools/bin/helm and kustomize: make validate runs it"]
fn the_chart_installs_what_config_default_installs() {
    let chart = rendered(&["--set", "metrics.serviceMonitor.enabled=true"]);
    let mut config = kustomize_default();
    config.retain(|o| o["kind"] != "Namespace");
    let monitor = std::fs::read_to_string(repo().join("config/prometheus/monitor.yaml"))
        .expect("config/prometheus");
    config.extend(yaml::documents(&monitor).expect("YAML"));
    let chart_ids: BTreeSet<_> = chart.iter().map(identity).collect();
    // helm template leaves crds/ out; the CRD is compared below.
    let config_ids: BTreeSet<_> = config
        .iter()
        .filter(|o| o["kind"] != "CustomResourceDefinition")
        .map(identity)
        .collect();
    assert_eq!(chart_ids, config_ids, "the same objects");
    for object in &config {
        if object["kind"] == "CustomResourceDefinition" {
            continue;
        }
        let twin = chart
            .iter()
            .find(|o| identity(o) == identity(object))
            .expect("a twin");
        let (mine, theirs) = (comparable(twin), comparable(object));
        if object["kind"] == "Deployment" {
            let pod = |o: &Value| {
                let mut pod = o["spec"]["template"].clone();
                let container = &mut pod["spec"]["containers"][0];
                // The chart passes every tunable flag, at the operator's own defaults.
                let args = container["args"].as_array().cloned().unwrap_or_default();
                container["args"] = Value::Array(args.into_iter().take(6).collect());
                pod
            };
            assert_eq!(pod(&mine), pod(&theirs), "the Deployment's pod");
            assert_eq!(mine["spec"]["replicas"], theirs["spec"]["replicas"]);
            continue;
        }
        assert_eq!(mine, theirs, "{:?}", identity(object));
    }
    let crd = std::fs::read_to_string(repo().join(format!(
        "{CHART_DIR}/crds/cache.f2367556.dev_memcacheds.yaml"
    )))
    .expect("crds/");
    let crd = &yaml::documents(&crd).expect("YAML")[0];
    let theirs = find(&config, "CustomResourceDefinition");
    assert_eq!(
        whole(crd),
        whole(theirs),
        "crds/ holds the CRD config/default installs"
    );
}
