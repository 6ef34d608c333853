//! `helm upgrade` to the next chart version: the packaging tool's chart at version 0.1.1 (its
//! values naming the operator image of 0.1.1, built from the same Dockerfile and binary),
//! pushed to the registry beside this one, and the release upgraded to it with the values it
//! was installed with. The Deployment rolls its replicas onto the new image one at a time; a
//! client writes through the webhooks all along, alternating both API versions, and not one
//! write fails; a Memcached made before comes through with the same spec, Available.

use std::path::Path;
use std::sync::Arc;
use std::time::Instant;

use kube::api::Api;
use memcached_operator::api::v1beta1::Memcached;
use memcached_packager::bundle::Options;
use memcached_packager::generate::Plan;
use memcached_packager::release;
use testkit::writer::Writer;

use crate::cluster::{Env, WAIT, eventually};
use crate::install::revision;

/// The chart version the scenario upgrades to.
const NEXT: &str = "0.1.1";
/// The chart's folder in the packaging tool's output.
const CHART: &str = "charts/memcached-operator";

/// Writes the next release's chart below `dir`; returns its folder.
fn render_next_chart(dir: &Path) -> std::path::PathBuf {
    let options = Options::for_version(NEXT, "2026-11-24T00:00:00Z");
    let files = Plan::new(options)
        .and_then(|plan| plan.render())
        .expect("the next release renders");
    for path in files.paths() {
        if !path.starts_with(CHART) {
            continue;
        }
        let target = dir.join(path);
        std::fs::create_dir_all(target.parent().expect("a parent")).expect("mkdir");
        std::fs::write(&target, files.get(path).expect("content")).expect("write");
    }
    dir.join(CHART)
}

/// The image of each operator pod's manager container.
async fn images(env: &Env) -> Vec<String> {
    env.operator_pods()
        .await
        .iter()
        .filter_map(|p| p.spec.as_ref()?.containers.first()?.image.clone())
        .collect()
}

pub async fn upgrading_to_the_next_chart_fails_no_write(env: Arc<Env>) {
    let (from, _) = revision(&env).await;
    let namespace = env.create_namespace("helm-upgrade").await;
    let (ok, _, stderr) = env.kubectl(
        &["apply", "-n", &namespace, "-f", "-"],
        Some("apiVersion: cache.f2367556.dev/v1beta1\nkind: Memcached\nmetadata: {name: kept}\nspec: {replicas: 1}\n"),
    );
    assert!(ok, "kubectl apply: {stderr}");
    env.available(&namespace, "kept", 1).await;
    let api: Api<Memcached> = Api::namespaced(env.client.clone(), &namespace);
    let spec_before = api.get("kept").await.expect("get").spec;

    // The next chart in the registry, and its operator image in the registry the node pulls from.
    let dir = tempfile::tempdir().expect("a directory");
    let chart_dir = render_next_chart(dir.path());
    let release_dir = dir.path().to_path_buf();
    let shared = env.clone();
    let pushed = tokio::task::spawn_blocking(move || {
        let release = testkit::images::Release {
            dir: &release_dir,
            version: NEXT,
        };
        testkit::images::build_release(release, &["operator"])?;
        testkit::helm::push(&shared.plane, &chart_dir).map_err(|e| e.to_string())
    })
    .await
    .expect("the build and push finished")
    .unwrap_or_else(|error| panic!("{error}"));
    assert_eq!(pushed.version, NEXT);
    let next_image = release::operator_image(NEXT);

    let writer = Writer::start(&env.client, &namespace, "written-through-upgrade").await;
    writer.wait_for_writes(20).await;
    let started = Instant::now();
    env.upgrade(&pushed.chart, NEXT, &[]).await;
    let rolled = started.elapsed();
    eventually("both replicas run the next image", WAIT, || async {
        let images = images(&env).await;
        (images.len() == 2 && images.iter().all(|i| *i == next_image)).then_some(())
    })
    .await;
    writer.wait_for_writes(40).await;
    let tally = writer.stop().await;

    let (to, status) = revision(&env).await;
    assert_eq!((to, status.as_str()), (from + 1, "deployed"));
    assert!(
        tally.failures.is_empty(),
        "{} of {} writes failed through the upgrade: {:?}",
        tally.failures.len(),
        tally.attempts,
        tally.failures
    );
    assert_eq!(
        api.get("kept").await.expect("get").spec,
        spec_before,
        "the Memcached made before comes through with the same spec"
    );
    env.available(&namespace, "kept", 1).await;
    let (ok, _, stderr) = env.kubectl(&["delete", "memcacheds", "--all", "-n", &namespace], None);
    assert!(ok, "kubectl delete memcacheds: {stderr}");
    eprintln!(
        "figures: helm upgrade to {} {NEXT} (revision {from} to {to}) rolled both replicas onto \
         {next_image} in {:.1} s; 0 of {} writes failed",
        pushed.chart,
        rolled.as_secs_f64(),
        tally.attempts
    );
}
