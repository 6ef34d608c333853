//! Runs `memcached-packager check-bundle` on the committed bundle and on crafted bad ones, and
//! checks its exit codes: 0 clean, 1 with every violation listed, 2 for unreadable input.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use serde_json::Value;

const BIN: &str = env!("CARGO_BIN_EXE_memcached-packager");
const CSV_FILE: &str = "memcached-operator.clusterserviceversion.yaml";

fn bundle() -> PathBuf {
    PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../bundle"))
}

fn check(dir: &Path, json: bool) -> Output {
    let mut command = Command::new(BIN);
    command.arg("check-bundle").arg(dir);
    if json {
        command.args(["--output", "json"]);
    }
    command.output().expect("runs")
}

/// A copy of the committed bundle's manifests whose CSV has been edited by `edit`.
fn crafted(edit: impl FnOnce(&mut Value)) -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("tempdir");
    let manifests = dir.path().join("manifests");
    std::fs::create_dir_all(&manifests).expect("mkdir");
    for entry in std::fs::read_dir(bundle().join("manifests")).expect("committed bundle") {
        let path = entry.expect("entry").path();
        let name = path.file_name().expect("a file name");
        std::fs::copy(&path, manifests.join(name)).expect("copies");
    }
    let csv_path = manifests.join(CSV_FILE);
    let text = std::fs::read_to_string(&csv_path).expect("the CSV");
    let mut csv: Value = serde_saphyr::from_str(&text).expect("parses");
    edit(&mut csv);
    std::fs::write(&csv_path, serde_json::to_string(&csv).expect("json")).expect("writes");
    dir
}

fn stdout(output: &Output) -> String {
    String::from_utf8_lossy(&output.stdout).into_owned()
}

#[test]
fn the_committed_bundle_is_clean() {
    let output = check(&bundle(), false);
    assert_eq!(output.status.code(), Some(0), "{output:?}");
    assert!(
        stdout(&output).contains("no rule of OLM v0, OLM v1 or this operator broken"),
        "{output:?}"
    );
}

#[test]
fn the_committed_bundle_is_clean_as_json() {
    let output = check(&bundle(), true);
    assert_eq!(output.status.code(), Some(0), "{output:?}");
    let report: Value = serde_json::from_slice(&output.stdout).expect("json");
    assert_eq!(report["csv"], "memcached-operator.v0.1.0");
    assert_eq!(report["violations"], serde_json::json!([]));
    assert_eq!(
        report["refused"],
        serde_json::json!({"olm-v0": false, "olm-v1": false, "this-operator": false})
    );
}

#[test]
fn a_bundle_breaking_several_rules_lists_every_violation_and_exits_1() {
    let dir = crafted(|csv| {
        let hooks = &mut csv["spec"]["webhookdefinitions"];
        hooks[0]["rules"][0]["apiGroups"] = serde_json::json!(["*"]);
        hooks[1]["sideEffects"] = serde_json::json!("Some");
        hooks[1]["deploymentName"] = serde_json::json!("elsewhere");
        hooks[2]["conversionCRDs"] = serde_json::json!(["others.example.com"]);
    });
    let output = check(dir.path(), false);
    assert_eq!(output.status.code(), Some(1), "{output:?}");
    let text = stdout(&output);
    for expected in [
        "webhook-rules-all-groups [OLM v0, OLM v1]: webhook mmemcached-v1beta1.cache.f2367556.dev:",
        "side-effects [OLM v0, OLM v1]: webhook vmemcached-v1beta1.cache.f2367556.dev: sideEffects Some",
        "unknown-deployment [OLM v0, OLM v1]: webhook vmemcached-v1beta1.cache.f2367556.dev: deploymentName \"elsewhere\"",
        "conversion-crd-not-owned [OLM v0, OLM v1]: webhook cmemcached.cache.f2367556.dev: conversionCRDs names others.example.com",
    ] {
        assert!(text.contains(expected), "missing {expected:?} in\n{text}");
    }
    assert!(
        text.contains("breaks 4 rule(s): 4 refused by OLM v0, 4 refused by OLM v1"),
        "{text}"
    );
}

#[test]
fn violations_are_reported_as_json() {
    let dir = crafted(|csv| {
        csv["spec"]["webhookdefinitions"][0]["admissionReviewVersions"] =
            serde_json::json!(["v1beta1"]);
    });
    let output = check(dir.path(), true);
    assert_eq!(output.status.code(), Some(1), "{output:?}");
    let report: Value = serde_json::from_slice(&output.stdout).expect("json");
    assert_eq!(
        report["violations"][0]["rule"],
        "admission-review-versions-without-v1"
    );
    assert_eq!(
        report["violations"][0]["enforcers"],
        serde_json::json!(["this-operator"])
    );
    assert_eq!(
        report["violations"][0]["webhook"],
        "mmemcached-v1beta1.cache.f2367556.dev"
    );
    assert_eq!(
        report["refused"],
        serde_json::json!({"olm-v0": false, "olm-v1": false, "this-operator": true})
    );
}

#[test]
fn another_operators_webhook_paths_are_not_checked_against_our_routes() {
    let dir = crafted(|csv| {
        csv["metadata"]["name"] = serde_json::json!("other-operator.v1.0.0");
        csv["spec"]["webhookdefinitions"][0]["webhookPath"] = serde_json::json!("/other");
    });
    let output = check(dir.path(), false);
    assert_eq!(output.status.code(), Some(0), "{output:?}");
}

#[test]
fn a_bundle_named_like_ours_that_owns_another_crd_is_not_checked_against_our_routes() {
    // operator-sdk's memcached sample is `memcached-operator.v0.0.1`, owning
    // memcacheds.cache.example.com, with its own server's paths.
    let dir = crafted(|csv| {
        csv["metadata"]["name"] = serde_json::json!("memcached-operator.v0.0.1");
        for owned in csv["spec"]["customresourcedefinitions"]["owned"]
            .as_array_mut()
            .expect("owned CRDs")
        {
            owned["name"] = serde_json::json!("memcacheds.cache.example.com");
        }
        for webhook in csv["spec"]["webhookdefinitions"]
            .as_array_mut()
            .expect("webhooks")
        {
            webhook["webhookPath"] =
                serde_json::json!("/validate-cache-example-com-v1alpha1-memcached");
            if let Some(crds) = webhook.get_mut("conversionCRDs") {
                *crds = serde_json::json!(["memcacheds.cache.example.com"]);
            }
        }
    });
    let output = check(dir.path(), false);
    assert!(
        !stdout(&output).contains("unrouted-webhook-path"),
        "{output:?}"
    );
}

#[test]
fn our_csv_with_a_path_the_server_does_not_route_exits_1() {
    let dir = crafted(|csv| {
        csv["spec"]["webhookdefinitions"][2]["webhookPath"] = serde_json::json!("/");
    });
    let output = check(dir.path(), false);
    assert_eq!(output.status.code(), Some(1), "{output:?}");
    assert!(stdout(&output).contains(
        "unrouted-webhook-path [this operator]: webhook cmemcached.cache.f2367556.dev: webhookPath / is not routed"
    ));
}

#[test]
fn a_legacy_crd_preserves_unknown_fields_unless_told_otherwise() {
    let dir = crafted(|_| {});
    let crd_path = dir
        .path()
        .join("manifests/cache.f2367556.dev_memcacheds.yaml");
    std::fs::write(
        &crd_path,
        "apiVersion: apiextensions.k8s.io/v1beta1\nkind: CustomResourceDefinition\nmetadata:\n  name: memcacheds.cache.f2367556.dev\nspec: {}\n",
    )
    .expect("writes");
    let output = check(dir.path(), false);
    assert_eq!(output.status.code(), Some(1), "{output:?}");
    assert!(stdout(&output).contains("conversion-crd-preserves-unknown-fields"));
}

#[test]
fn a_missing_directory_exits_2_naming_it() {
    let output = check(Path::new("/nonexistent/bundle"), false);
    assert_eq!(output.status.code(), Some(2), "{output:?}");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("/nonexistent/bundle/manifests"), "{stderr}");
}

#[test]
fn a_file_that_is_not_yaml_exits_2_naming_it() {
    let dir = crafted(|_| {});
    let bad = dir.path().join("manifests/broken.yaml");
    std::fs::write(&bad, "kind: [unclosed\n  - : :\n").expect("writes");
    let output = check(dir.path(), true);
    assert_eq!(output.status.code(), Some(2), "{output:?}");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("broken.yaml"), "{stderr}");
    let report: Value = serde_json::from_slice(&output.stdout).expect("json");
    assert!(
        report["error"]
            .as_str()
            .is_some_and(|e| e.contains("broken.yaml"))
    );
}

#[test]
fn a_malformed_csv_exits_2_naming_the_file() {
    let dir = crafted(|csv| {
        csv["spec"]["webhookdefinitions"] = serde_json::json!("not a list");
    });
    let output = check(dir.path(), false);
    assert_eq!(output.status.code(), Some(2), "{output:?}");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains(CSV_FILE), "{stderr}");
    assert!(
        stderr.contains("malformed ClusterServiceVersion"),
        "{stderr}"
    );
}

#[test]
fn a_bundle_without_a_csv_exits_2() {
    let dir = crafted(|_| {});
    std::fs::remove_file(dir.path().join("manifests").join(CSV_FILE)).expect("removes");
    let output = check(dir.path(), false);
    assert_eq!(output.status.code(), Some(2), "{output:?}");
    assert!(String::from_utf8_lossy(&output.stderr).contains("no ClusterServiceVersion"));
}
