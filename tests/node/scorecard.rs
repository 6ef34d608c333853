//! `operator-sdk scorecard` on the shipped bundle, with all six tests of its configuration,
//! run by `hack/scorecard.sh` (what `make scorecard` runs) against this cluster: the test pods
//! pull scorecard-test (built from the pinned operator-sdk) and the busybox stand-in (storage
//! and untar images) through the node's mirror, as Red Hat's certification runs them.

use std::process::Command;
use std::sync::Arc;

use testkit::repository;

use crate::cluster::{Env, image_reference};

/// The tests bundle/tests/scorecard/config.yaml lists.
const TESTS: usize = 6;

pub async fn scorecard_passes_every_test_of_the_shipped_configuration(env: Arc<Env>) {
    let busybox = image_reference("busybox");
    let script = repository::hack("scorecard.sh");
    let kubeconfig = env.plane.kubeconfig();
    let output = tokio::task::spawn_blocking(move || {
        // A cluster of its own pulls the test image from its registries; this one, from the
        // local registry, where it is built first.
        testkit::images::build(&["scorecard-test"]).unwrap_or_else(|error| panic!("{error}"));
        Command::new(&script)
            .env("KUBECONFIG", kubeconfig)
            .env("STORAGE_IMAGE", &busybox)
            .env("UNTAR_IMAGE", &busybox)
            .env("OUTPUT", "json")
            .output()
    })
    .await
    .expect("the scorecard run finishes")
    .expect("hack/scorecard.sh runs");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    let list: serde_json::Value = serde_json::from_str(&stdout)
        .unwrap_or_else(|e| panic!("scorecard printed no JSON ({e}): {stdout}\n{stderr}"));
    let results: Vec<(String, String, String)> = list["items"]
        .as_array()
        .unwrap_or_else(|| panic!("no items: {stdout}"))
        .iter()
        .flat_map(|item| {
            item["status"]["results"]
                .as_array()
                .cloned()
                .unwrap_or_default()
        })
        .map(|result| {
            (
                result["name"].as_str().unwrap_or_default().to_string(),
                result["state"].as_str().unwrap_or_default().to_string(),
                result["errors"].to_string(),
            )
        })
        .collect();
    for (name, state, errors) in &results {
        eprintln!("{name}: {state} {errors}");
    }
    assert_eq!(results.len(), TESTS, "every test ran: {stdout}\n{stderr}");
    assert!(
        results.iter().all(|(_, state, _)| state == "pass"),
        "every test passed: {results:#?}"
    );
    assert!(output.status.success(), "scorecard exits 0: {stderr}");
}
