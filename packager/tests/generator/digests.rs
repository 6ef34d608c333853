//! `generate --image-digests`: every place the output names an image names it by digest once
//! the images are pinned, the CSV then says it works disconnected, and a registry that cannot
//! be asked stops the generation before anything is written, naming the image.

use std::process::Command;

use memcached_packager::bundle::Options;
use memcached_packager::generate::Plan;
use memcached_packager::images::Images;

use super::BIN;

fn digest(n: char) -> String {
    format!("sha256:{}", n.to_string().repeat(64))
}

#[test]
fn pinned_images_are_named_by_digest_everywhere_and_the_csv_says_disconnected() {
    let released = Images::for_release(memcached_packager::release::VERSION);
    let mut options = Options::for_release();
    options.images.operator = format!("quay.io/f2367556/memcached-operator@{}", digest('a'));
    options.images.memcached = format!("docker.io/library/memcached@{}", digest('b'));
    options.images.exporter = format!("quay.io/prometheus/memcached-exporter@{}", digest('c'));
    options.bundle_image = format!("quay.io/f2367556/memcached-operator-bundle@{}", digest('d'));
    let files = Plan::new(options.clone())
        .expect("plans")
        .render()
        .expect("renders");
    let mut named = 0;
    for (path, text) in files.iter() {
        for (name, tagged) in released.named() {
            assert!(
                !text.contains(tagged),
                "{path} still names {name} by tag ({tagged})"
            );
        }
        named += text.matches("@sha256:").count();
    }
    assert!(named >= 10, "the pinned images are named: {named} times");
    let csv: serde_json::Value = files
        .iter()
        .find(|(path, _)| path.ends_with(".clusterserviceversion.yaml"))
        .map(|(_, text)| serde_saphyr::from_str(text).expect("YAML"))
        .expect("a CSV");
    let annotations = &csv["metadata"]["annotations"];
    assert_eq!(
        annotations["features.operators.openshift.io/disconnected"],
        "true"
    );
    assert_eq!(
        annotations["containerImage"],
        options.images.operator.as_str()
    );
    let related: Vec<&str> = csv["spec"]["relatedImages"]
        .as_array()
        .expect("relatedImages")
        .iter()
        .filter_map(|r| r["image"].as_str())
        .collect();
    for (_, image) in options.images.named() {
        assert!(
            related.contains(&image),
            "relatedImages names {image}: {related:?}"
        );
    }
    let container = &csv["spec"]["install"]["spec"]["deployments"][0]["spec"]["template"]["spec"]["containers"]
        [0];
    assert_eq!(container["image"], options.images.operator.as_str());
    for variable in [
        "RELATED_IMAGE_MEMCACHED",
        "RELATED_IMAGE_MEMCACHED_EXPORTER",
        "RELATED_IMAGE_CERT_REFRESHER",
    ] {
        let value = container["env"]
            .as_array()
            .expect("env")
            .iter()
            .find(|e| e["name"] == variable)
            .and_then(|e| e["value"].as_str())
            .unwrap_or_default();
        assert!(value.contains("@sha256:"), "{variable}: {value}");
    }
    let catalog = files
        .iter()
        .filter(|(path, _)| path.starts_with("catalog/"))
        .map(|(_, text)| text)
        .collect::<String>();
    assert!(
        catalog.contains(&options.bundle_image),
        "the catalog names the pinned bundle"
    );
    let values = files
        .get("charts/memcached-operator/values.yaml")
        .expect("the chart's values");
    assert!(
        values.contains(&format!("digest: {}", digest('a'))),
        "the chart pins the operator: {values}"
    );
}

#[test]
fn the_release_names_its_images_by_tag_and_does_not_claim_disconnected() {
    let files = Plan::new(Options::for_release())
        .expect("plans")
        .render()
        .expect("renders");
    let csv = files
        .iter()
        .find(|(path, _)| path.ends_with(".clusterserviceversion.yaml"))
        .map(|(_, text)| text)
        .expect("a CSV");
    let parsed: serde_json::Value = serde_saphyr::from_str(csv).expect("YAML");
    assert_eq!(
        parsed["metadata"]["annotations"]["features.operators.openshift.io/disconnected"],
        "false"
    );
    assert!(!csv.contains("@sha256:"));
}

#[test]
fn a_registry_that_cannot_be_asked_stops_the_generation_before_anything_is_written() {
    let dir = tempfile::tempdir().expect("tempdir");
    // Port 1 of the loopback: refused at once, nothing leaves the machine.
    let output = Command::new(BIN)
        .args(["generate", "--image-digests", "--output-dir"])
        .arg(dir.path())
        .args([
            "--registry-mirror",
            "quay.io=http://127.0.0.1:1/quay.io",
            "--registry-mirror",
            "docker.io=http://127.0.0.1:1/docker.io",
        ])
        .output()
        .expect("runs");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("cannot resolve quay.io/f2367556/memcached-operator:v")
            && stderr.contains("127.0.0.1:1/quay.io/f2367556/memcached-operator")
            && stderr.contains("nothing was written"),
        "{stderr}"
    );
    assert_eq!(
        std::fs::read_dir(dir.path()).expect("readable").count(),
        0,
        "nothing was written"
    );
}

#[test]
fn a_mirror_without_image_digests_or_of_the_wrong_shape_is_refused() {
    let dir = tempfile::tempdir().expect("tempdir");
    for (args, said) in [
        (
            vec!["--registry-mirror", "quay.io=http://127.0.0.1:1"],
            "--image-digests",
        ),
        (
            vec!["--image-digests", "--registry-mirror", "quay.io"],
            "expected HOST=URL",
        ),
    ] {
        let output = Command::new(BIN)
            .args(["generate", "--output-dir"])
            .arg(dir.path())
            .args(&args)
            .output()
            .expect("runs");
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(2), "{args:?}: {stderr}");
        assert!(stderr.contains(said), "{args:?}: {stderr}");
    }
    assert_eq!(std::fs::read_dir(dir.path()).expect("readable").count(), 0);
}
