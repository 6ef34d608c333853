//! An upgrade through OLM: the next release (the packaging tool's output at version 0.1.1,
//! its catalog skipping every older version) gets its images, built as this release's are
//! (the operator's from the same Dockerfile and binary, its bundle and catalog from its own
//! bundle.Dockerfile and catalog.Dockerfile); the CatalogSource is pointed at its catalog
//! image, and OLM replaces the running CSV, unpacking the new bundle image and rolling the
//! operator's Deployment onto the new operator image. A writer loop runs through it in both API versions, and
//! objects stored before it come through with the same spec, byte for byte. The new CSV gets a
//! new CA from OLM, so the writes meet the same certificate switch as a rotation.

use std::sync::Arc;
use std::time::{Duration, Instant};

use memcached_packager::bundle::Options;
use memcached_packager::release;
use testkit::repository;

use crate::cluster::{Env, WAIT, build_release_images, eventually, release_image, write_release};
use testkit::writer::Writer;

/// The release the scenario upgrades to.
const NEXT: &str = "0.1.1";

/// The stored v1beta1 spec of each Memcached in `namespace`, as the API server serializes it.
fn stored_specs(env: &Env, namespace: &str) -> Vec<(String, String)> {
    let (ok, stdout, stderr) = env.kubectl(
        &[
            "get",
            "memcacheds.v1beta1.cache.f2367556.dev",
            "-n",
            namespace,
            "-o",
            "json",
        ],
        None,
    );
    assert!(ok, "kubectl get memcacheds: {stderr}");
    let list: serde_json::Value = serde_json::from_str(&stdout).expect("JSON");
    let mut specs: Vec<(String, String)> = list["items"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|item| {
            let name = item["metadata"]["name"]
                .as_str()
                .unwrap_or_default()
                .to_string();
            (name, item["spec"].to_string())
        })
        .collect();
    specs.sort();
    specs
}

pub async fn upgrading_to_the_next_release_keeps_every_object_and_write(env: Arc<Env>) {
    let from = env.current_csv();
    let namespace = env.create_namespace("olm-upgrade").await;
    for manifest in [
        "cache_v1alpha1_memcached.yaml",
        "cache_v1beta1_memcached.yaml",
    ] {
        let path = repository::root().join("config/samples").join(manifest);
        let path = path.display().to_string();
        let (ok, _, stderr) = env.kubectl(&["apply", "-n", &namespace, "-f", &path], None);
        assert!(ok, "kubectl apply {manifest}: {stderr}");
    }
    let before = stored_specs(&env, &namespace);
    assert_eq!(before.len(), 2, "{before:?}");

    // The next release, and its images in the registry the node pulls from.
    let dir = tempfile::tempdir().expect("a directory");
    write_release(
        &Options::for_version(NEXT, "2026-11-24T00:00:00Z"),
        dir.path(),
    );
    build_release_images(dir.path(), NEXT, &["operator", "bundle", "catalog"]).await;
    assert_eq!(
        release_image(dir.path(), NEXT, "operator"),
        release::operator_image(NEXT),
        "the next release's CSV names the operator image built for it"
    );
    let catalog = release_image(dir.path(), NEXT, "catalog");

    let writer = Writer::start(&env.client, &namespace, "written-through-upgrade").await;
    writer.wait_for_writes(20).await;

    // The CatalogSource pointed at the next release's catalog image.
    let started = Instant::now();
    env.point_catalog_source_at(&catalog);

    let to = release::csv_name(NEXT);
    eventually(
        &format!("OLM installs {to}"),
        Duration::from_secs(240),
        || async { (env.current_csv() == to).then_some(()) },
    )
    .await;
    let resolved = started.elapsed();
    eventually(&format!("{to} Succeeded and {from} gone"), WAIT, || async {
        let succeeded = crate::install::csv(&env)["status"]["phase"] == "Succeeded";
        let (_, old, _) = env.kubectl(
            &[
                "get",
                "csv",
                "-n",
                &env.installed.namespace,
                &from,
                "--ignore-not-found",
                "-o",
                "name",
            ],
            None,
        );
        (succeeded && old.trim().is_empty()).then_some(())
    })
    .await;
    let succeeded = started.elapsed();
    let image = release::operator_image(NEXT);
    eventually(
        "the Deployment runs the new image on every ready replica",
        WAIT,
        || async {
            let deployment = env.deployment().await;
            let spec = deployment.spec.as_ref()?;
            let status = deployment.status.as_ref()?;
            let want = spec.replicas.unwrap_or(1);
            let on_new = spec
                .template
                .spec
                .as_ref()?
                .containers
                .first()?
                .image
                .as_deref()
                == Some(image.as_str());
            (on_new
                && status.observed_generation == deployment.metadata.generation
                && status.updated_replicas == Some(want)
                && status.ready_replicas == Some(want)
                && status.replicas == Some(want))
            .then_some(())
        },
    )
    .await;
    let rolled = started.elapsed();
    let settled_at = crate::lifecycle::ca_switch_settled(&env).await;
    writer.wait_for_writes(30).await;
    let tally = writer.stop().await;

    let mut after = stored_specs(&env, &namespace);
    after.retain(|(name, _)| name != "written-through-upgrade");
    assert_eq!(after, before, "specs changed through the upgrade");
    let (ok, _, stderr) = env.kubectl(
        &[
            "get",
            "memcacheds.v1alpha1.cache.f2367556.dev",
            "-n",
            &namespace,
            "-o",
            "name",
        ],
        None,
    );
    assert!(ok, "v1alpha1 reads after the upgrade: {stderr}");
    eprintln!(
        "figures: upgrade {from} -> {to}: resolved {:.1} s after the CatalogSource changed, \
         CSV Succeeded at {:.1} s, rollout done at {:.1} s; {} writes, {} failed (the API server \
         refusing the old certificate in OLM's CA switch); {} objects' specs \
         byte-identical",
        resolved.as_secs_f64(),
        succeeded.as_secs_f64(),
        rolled.as_secs_f64(),
        tally.attempts,
        tally.failures.len(),
        before.len(),
    );
    let when: Vec<String> = tally
        .failures
        .iter()
        .map(|(at, _)| format!("{:.1}", at.saturating_duration_since(started).as_secs_f64()))
        .collect();
    eprintln!(
        "failures at {when:?} s; CA switch settled at {:.1} s",
        settled_at.saturating_duration_since(started).as_secs_f64()
    );
    // Only OLM's CA switch may fail a write, and only before it settled.
    let ours = tally.unexplained(settled_at);
    assert!(
        ours.is_empty(),
        "failed writes during the upgrade: {ours:#?}"
    );
}
