//! What the local registry holds, read from its catalogue once every image `hack/images.sh`
//! knows is built (the images OLM just pulled among them): each of them under its own name,
//! and nothing under an upstream name. An upstream program rebuilt here (opm, OLM,
//! memcached_exporter, scorecard-test, Prometheus, the Prometheus Operator and its config
//! reloader) differs from upstream's image in its base, Go version,
//! build stamps and digest, so it is named for what it is (`registry.invalid/rebuilt/...`), as
//! a stand-in is (`registry.invalid/stand-in/...`); the only names under a real registry are
//! the project's own releases (`quay.io/f2367556/...`), and Helm charts are pushed to the
//! registry itself (`charts/...`).

use std::collections::BTreeSet;
use std::sync::Arc;

use memcached_operator::operator::IMAGE_REPOSITORY;
use testkit::images;

use crate::cluster::Env;

/// Where the images built here that are not the project's own are named.
const LOCAL_HOST: &str = "registry.invalid/";
/// Where `hack/helm.sh push` stores the chart, outside every mirrored host.
const CHARTS: &str = "charts/";

pub async fn the_local_registry_holds_no_rebuild_under_an_upstream_name(_env: Arc<Env>) {
    let (listed, catalogue) = tokio::task::spawn_blocking(|| {
        let listed = images::list().unwrap_or_else(|error| panic!("{error}"));
        let names: Vec<&str> = listed.iter().map(|(name, _)| name.as_str()).collect();
        images::build(&names).unwrap_or_else(|error| panic!("{error}"));
        let catalogue = images::catalogue().unwrap_or_else(|error| panic!("{error}"));
        (listed, catalogue)
    })
    .await
    .expect("the images are built and listed");
    eprintln!("the local registry's catalogue:\n{}", catalogue.join("\n"));
    let stored: BTreeSet<&str> = catalogue.iter().map(String::as_str).collect();
    let ours = format!("{IMAGE_REPOSITORY}/");
    for (name, reference) in &listed {
        let repository = memcached_packager::images::parts(reference).repository;
        assert!(
            stored.contains(repository),
            "image {name} ({reference}) is stored as {repository}: {catalogue:#?}"
        );
        assert!(
            repository.starts_with(LOCAL_HOST) || repository.starts_with(&ours),
            "image {name} is built here, so it is named under {LOCAL_HOST} or is the project's \
             own ({ours}...), not {reference}"
        );
    }
    let upstream: Vec<&&str> = stored
        .iter()
        .filter(|repository| {
            !(repository.starts_with(LOCAL_HOST)
                || repository.starts_with(&ours)
                || repository.starts_with(CHARTS))
        })
        .collect();
    assert!(
        upstream.is_empty(),
        "the local registry stores images built here under upstream names: {upstream:?}"
    );
    let rebuilt = stored
        .iter()
        .filter(|repository| repository.starts_with("registry.invalid/rebuilt/"))
        .count();
    assert!(
        rebuilt >= 7,
        "opm, olm, memcached-exporter, scorecard-test, prometheus, prometheus-operator and \
         prometheus-config-reloader are rebuilt: {stored:?}"
    );
}
