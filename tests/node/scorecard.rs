//! `operator-sdk scorecard` on the shipped bundle, with all six tests of its configuration,
//! run by `hack/scorecard.sh` (what `make scorecard` runs) against this cluster as a user runs
//! it, with nothing but KUBECONFIG: the script recognises the local cluster by its API server
//! (the kubeconfig is the suite's own, not `.local/kubeconfig`), so the test pods pull the
//! images built here through the node's mirror, scorecard-test rebuilt from the pinned
//! operator-sdk and the busybox stand-in (storage and untar images), as Red Hat's
//! certification runs them. scorecard's own helper images, and upstream's scorecard-test,
//! cannot be pulled here.

use std::process::Command;
use std::sync::Arc;

use testkit::repository;

use crate::cluster::{Env, image_reference};

/// The tests bundle/tests/scorecard/config.yaml lists.
const TESTS: usize = 6;

pub async fn scorecard_passes_every_test_of_the_shipped_configuration(env: Arc<Env>) {
    let rebuilt = image_reference("scorecard-test");
    let script = repository::hack("scorecard.sh");
    let kubeconfig = env.plane.kubeconfig();
    let output = tokio::task::spawn_blocking(move || {
        Command::new(&script)
            .env("KUBECONFIG", kubeconfig)
            .env_remove("STORAGE_IMAGE")
            .env_remove("UNTAR_IMAGE")
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
    assert!(
        stderr.contains("KUBECONFIG names this checkout's local cluster"),
        "the script recognised the local cluster: {stderr}"
    );
    // scorecard deletes its pods when done; the kubelet's Pulled events stay.
    let pulled = env
        .plane
        .kubectl(
            &[
                "get",
                "events",
                "-n",
                "scorecard",
                "--field-selector",
                "reason=Pulled",
                "-o",
                "jsonpath={range .items[*]}{.message}{\"\\n\"}{end}",
            ],
            None,
        )
        .expect("kubectl runs");
    assert!(pulled.success, "kubectl get events: {}", pulled.stderr);
    eprintln!(
        "the node's image events in namespace scorecard:\n{}",
        pulled.stdout
    );
    let busybox = image_reference("busybox");
    let events: Vec<&str> = pulled
        .stdout
        .lines()
        .filter(|l| !l.trim().is_empty())
        .collect();
    assert!(
        events
            .iter()
            .any(|event| event.contains(&format!("\"{rebuilt}\""))),
        "a test pod ran {rebuilt}: {events:#?}"
    );
    assert!(
        events
            .iter()
            .all(|event| event.contains(&format!("\"{rebuilt}\""))
                || event.contains(&format!("\"{busybox}\""))),
        "the test pods ran nothing but {rebuilt} and {busybox}: {events:#?}"
    );
}
