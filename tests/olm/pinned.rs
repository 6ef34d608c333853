//! A release pinned by digest, installed by OLM through a mirror that serves digests only, as
//! on a disconnected cluster. The packaging tool pins every image through the registry API
//! (`pin::pin_images`, what `generate --image-digests` runs), asking the local registry as the
//! mirror of each image's host: the operator's image, and as default operand and exporter the
//! ones built here (the memcached stand-in and the memcached_exporter rebuild, as a user
//! pins their mirror's copies). Its bundle image is built, the catalog is pinned to it, and its
//! catalog image is built. Then the node's mirror stops resolving tags (`hack/node.sh mirror
//! by-digest`, containerd's `hosts.toml` without `resolve`, as an ImageDigestMirrorSet): a pod
//! naming an image by tag cannot pull it, the same image named by digest can. OLM installs the
//! pinned catalog's operator (the install before is removed first), whose Deployment and
//! Memcacheds run only images named by digest, each the digest the registry itself gives, and
//! every pull the kubelet reports names a digest.

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, PostParams};
use memcached_operator::api::v1beta1::Memcached;
use memcached_packager::bundle::Options;
use memcached_packager::pin::{self, Mirror};
use memcached_packager::release;
use serde_json::{Value, json};

use crate::cluster::{
    Env, WAIT, build_release_images, eventually, mirrors_at, release_image, write_release,
};

/// The tag the pinned release's bundle and catalog images are built under (a tag of their
/// own, so that the bundle image pinned is this bundle's, not the shipped one's).
const PINNED: &str = "0.1.0-pinned";
/// The CatalogSource of the pinned catalog.
const SOURCE: &str = "memcached-operator-pinned";
/// The Memcached the pinned operator runs.
const NAME: &str = "pinned";

/// Puts the node's mirror back to resolving tags when the scenario ends, passed or not.
struct ByTagAgain<'a>(&'a Env);

impl Drop for ByTagAgain<'_> {
    fn drop(&mut self) {
        if let Err(error) = self.0.plane.node_mirror("by-tag") {
            eprintln!("the node's mirror is not back to by-tag: {error}");
        }
    }
}

fn blocking<T: Send + 'static>(
    f: impl FnOnce() -> T + Send + 'static,
) -> tokio::task::JoinHandle<T> {
    tokio::task::spawn_blocking(f)
}

/// The options of the pinned release: the release's, with the images built here as defaults,
/// every image pinned through the local registry as each host's mirror.
async fn pinned_options() -> (Options, Vec<String>) {
    blocking(|| {
        let registry = testkit::images::registry_address().unwrap_or_else(|e| panic!("{e}"));
        let reference =
            |name: &str| testkit::images::reference(name).unwrap_or_else(|e| panic!("{e}"));
        let mut options = Options::for_release();
        options.images.memcached = reference("memcached");
        options.images.exporter = reference("memcached-exporter");
        options.bundle_image = release::bundle_image(PINNED);
        let mirrors = mirrors_at(&registry);
        let said = pin::pin_images(&mut options, &mirrors, None).unwrap_or_else(|e| panic!("{e}"));
        (options, said)
    })
    .await
    .expect("pinned")
}

/// A pod of the busybox stand-in named `image`, pulled whatever the node holds.
fn pull_probe(name: &str, image: &str) -> Value {
    json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name},
        "spec": {
            "restartPolicy": "Never",
            "securityContext": {"runAsNonRoot": true, "runAsUser": 65532,
                "seccompProfile": {"type": "RuntimeDefault"}},
            "containers": [{
                "name": "probe", "image": image, "imagePullPolicy": "Always",
                "command": ["sh", "-c", "true"],
                "securityContext": {"allowPrivilegeEscalation": false,
                    "capabilities": {"drop": ["ALL"]}},
            }],
        },
    })
}

/// The reason a pod's container waits or ended with, once it has one of `reasons`.
async fn container_reason(env: &Env, namespace: &str, name: &str, reasons: &[&str]) -> String {
    let pods: Api<Pod> = Api::namespaced(env.client.clone(), namespace);
    eventually(
        &format!("pod {name} reaching one of {reasons:?}"),
        Duration::from_secs(120),
        || async {
            let pod = pods.get(name).await.ok()?;
            let state = pod.status?.container_statuses?.first()?.state.clone()?;
            let reason = state
                .waiting
                .and_then(|w| w.reason)
                .or(state.terminated.and_then(|t| t.reason))?;
            reasons.contains(&reason.as_str()).then_some(reason)
        },
    )
    .await
}

/// The kubelet's image events (Pulling, Pulled, Failed, BackOff) in `namespace` about the pods
/// `pods` names (every pod when `None`): `REASON: MESSAGE`.
fn image_events(env: &Env, namespace: &str, pods: Option<&[String]>) -> Vec<String> {
    let (ok, stdout, stderr) = env.kubectl(
        &[
            "get",
            "events",
            "-n",
            namespace,
            "-o",
            "jsonpath={range .items[?(@.source.component==\"kubelet\")]}{.involvedObject.name} {.reason}: {.message}{\"\\n\"}{end}",
        ],
        None,
    );
    assert!(ok, "kubectl get events: {stderr}");
    stdout
        .lines()
        .filter_map(|line| {
            let (pod, event) = line.split_once(' ')?;
            pods.is_none_or(|pods| pods.iter().any(|p| p == pod))
                .then_some(event)
        })
        .filter(|line| {
            [
                "Pulling:",
                "Pulled:",
                "Failed:",
                "ErrImagePull:",
                "BackOff:",
            ]
            .iter()
            .any(|reason| line.starts_with(reason))
        })
        .map(str::to_string)
        .collect()
}

/// Removes the operator's install, if one is there (the uninstall scenario may have done so),
/// and the CatalogSource of the catalog by tag, whose registry pod OLM pulls by tag.
fn remove_install(env: &Env) {
    let (ok, _, stderr) = env.kubectl(
        &[
            "delete",
            "catalogsource",
            "memcached-operator",
            "-n",
            "olm",
            "--ignore-not-found",
        ],
        None,
    );
    assert!(ok, "kubectl delete catalogsource: {stderr}");
    let namespace = &env.installed.namespace;
    let (_, csvs, _) = env.kubectl(
        &[
            "get",
            "csv",
            "-n",
            namespace,
            "-o",
            "name",
            "--ignore-not-found",
        ],
        None,
    );
    let (ok, _, stderr) = env.kubectl(
        &[
            "delete",
            "subscription",
            "memcached-operator",
            "-n",
            namespace,
            "--ignore-not-found",
        ],
        None,
    );
    assert!(ok, "kubectl delete subscription: {stderr}");
    for csv in csvs.lines().filter(|l| !l.trim().is_empty()) {
        let (ok, _, stderr) = env.kubectl(&["delete", csv, "-n", namespace, "--wait=true"], None);
        assert!(ok, "kubectl delete {csv}: {stderr}");
    }
}

pub async fn a_release_pinned_by_digest_installs_through_a_digest_only_mirror(env: Arc<Env>) {
    // The pinned release, and its bundle and catalog images.
    let (options, said) = pinned_options().await;
    eprintln!("{}", said.join("\n"));
    assert!(options.images.all_by_digest(), "{:?}", options.images);
    assert!(
        said.iter()
            .any(|line| line.starts_with("warning: the catalog names the bundle")),
        "the bundle image is not built yet: {said:?}"
    );
    let dir = tempfile::tempdir().expect("a directory");
    write_release(&options, dir.path());
    build_release_images(dir.path(), PINNED, &["bundle"]).await;
    // Pinned again, now that the bundle image is there: the catalog names it by digest.
    let (options, said) = blocking(move || {
        let mut options = options;
        let registry = testkit::images::registry_address().unwrap_or_else(|e| panic!("{e}"));
        let mirror: Mirror = format!("quay.io=http://{registry}/quay.io")
            .parse()
            .expect("a mirror");
        let said = pin::pin_images(&mut options, &[mirror], None).unwrap_or_else(|e| panic!("{e}"));
        (options, said)
    })
    .await
    .expect("pinned again");
    eprintln!("{}", said.join("\n"));
    assert!(
        options.bundle_image.contains("@sha256:"),
        "the catalog names the bundle by digest: {said:?}"
    );
    write_release(&options, dir.path());
    build_release_images(dir.path(), PINNED, &["catalog"]).await;

    // Each pinned digest is the one the registry itself gives (asked without the packager).
    let path = dir.path().to_path_buf();
    let (digests, catalog) = blocking(move || {
        let digest = |name: &str| testkit::images::digest(name).unwrap_or_else(|e| panic!("{e}"));
        let release = testkit::images::Release {
            dir: &path,
            version: PINNED,
        };
        let catalog = format!(
            "{}@{}",
            memcached_packager::images::parts(&release_image(&path, PINNED, "catalog")).repository,
            testkit::images::release_digest(release, "catalog").unwrap_or_else(|e| panic!("{e}")),
        );
        let bundle =
            testkit::images::release_digest(release, "bundle").unwrap_or_else(|e| panic!("{e}"));
        (
            [
                digest("operator"),
                digest("memcached"),
                digest("memcached-exporter"),
                bundle,
            ],
            catalog,
        )
    })
    .await
    .expect("the registry's digests");
    let pinned = [
        options.images.operator.as_str(),
        options.images.memcached.as_str(),
        options.images.exporter.as_str(),
        options.bundle_image.as_str(),
    ];
    for (image, digest) in pinned.iter().zip(&digests) {
        assert!(
            image.ends_with(&format!("@{digest}")),
            "{image}: the registry gives {digest}"
        );
    }

    // From here the node pulls digests only.
    env.plane
        .node_mirror("by-digest")
        .unwrap_or_else(|e| panic!("{e}"));
    let _by_tag_again = ByTagAgain(&env);
    let probes = env.create_namespace("olm-pinned-probes").await;
    let busybox = blocking(|| testkit::images::reference("busybox"))
        .await
        .expect("a reference")
        .unwrap_or_else(|e| panic!("{e}"));
    let busybox_digest = blocking(|| testkit::images::digest("busybox"))
        .await
        .expect("a digest")
        .unwrap_or_else(|e| panic!("{e}"));
    let by_digest = format!(
        "{}@{busybox_digest}",
        memcached_packager::images::parts(&busybox).repository
    );
    for (name, image) in [
        ("by-tag", busybox.as_str()),
        ("by-digest", by_digest.as_str()),
    ] {
        let (ok, _, stderr) = env.kubectl(
            &["apply", "-n", &probes, "-f", "-"],
            Some(&pull_probe(name, image).to_string()),
        );
        assert!(ok, "kubectl apply pod {name}: {stderr}");
    }
    let refused = container_reason(
        &env,
        &probes,
        "by-tag",
        &["ErrImagePull", "ImagePullBackOff"],
    )
    .await;
    let pulled = container_reason(&env, &probes, "by-digest", &["Completed"]).await;
    eprintln!("figures: through the digest-only mirror, {busybox} {refused}, its digest {pulled}");

    // OLM installs the pinned catalog's operator.
    remove_install(&env);
    let namespace = env.installed.namespace.clone();
    let manifests = format!(
        "apiVersion: operators.coreos.com/v1alpha1
kind: CatalogSource
metadata: {{name: {SOURCE}, namespace: olm}}
spec: {{sourceType: grpc, image: \"{catalog}\", grpcPodConfig: {{securityContextConfig: restricted}}}}
"
    );
    let (ok, _, stderr) = env.kubectl(&["apply", "-f", "-"], Some(&manifests));
    assert!(ok, "kubectl apply the CatalogSource: {stderr}");
    env.catalog_source_ready(SOURCE).await;
    let subscription = format!(
        "apiVersion: operators.coreos.com/v1alpha1
kind: Subscription
metadata: {{name: memcached-operator, namespace: {namespace}}}
spec: {{channel: {channel}, name: memcached-operator, source: {SOURCE}, sourceNamespace: olm}}
",
        channel = release::CHANNEL
    );
    let (ok, _, stderr) = env.kubectl(&["apply", "-f", "-"], Some(&subscription));
    assert!(ok, "kubectl apply the Subscription: {stderr}");
    let csv_name = release::csv_name(release::VERSION);
    eventually(
        &format!("{csv_name} Succeeded from the pinned catalog"),
        Duration::from_secs(300),
        || async {
            let (_, phase, _) = env.kubectl(
                &[
                    "get",
                    "csv",
                    &csv_name,
                    "-n",
                    &namespace,
                    "-o",
                    "jsonpath={.status.phase}",
                ],
                None,
            );
            (phase.trim() == "Succeeded").then_some(())
        },
    )
    .await;
    let (_, disconnected, _) = env.kubectl(
        &[
            "get",
            "csv",
            &csv_name,
            "-n",
            &namespace,
            "-o",
            "jsonpath={.metadata.annotations.features\\.operators\\.openshift\\.io/disconnected}",
        ],
        None,
    );
    assert_eq!(
        disconnected.trim(),
        "true",
        "the pinned CSV says disconnected"
    );
    // The Deployment OLM writes for the pinned CSV (the one before is garbage collected).
    let container = eventually(
        "the operator's Deployment naming the pinned image",
        WAIT,
        || async {
            let deployment = env.deployment().await;
            let ready = deployment.status.as_ref()?.ready_replicas? == 2;
            let container = deployment
                .spec
                .and_then(|s| s.template.spec)
                .and_then(|s| s.containers.into_iter().next())?;
            (ready && container.image.as_deref() == Some(options.images.operator.as_str()))
                .then_some(container)
        },
    )
    .await;
    for variable in [
        "RELATED_IMAGE_MEMCACHED",
        "RELATED_IMAGE_MEMCACHED_EXPORTER",
        "RELATED_IMAGE_CERT_REFRESHER",
    ] {
        let value = container
            .env
            .iter()
            .flatten()
            .find(|e| e.name == variable)
            .and_then(|e| e.value.clone())
            .unwrap_or_default();
        assert!(value.contains("@sha256:"), "{variable}={value}");
    }

    // A Memcached with metrics runs the pinned memcached and exporter.
    let cache = env.create_namespace("olm-pinned").await;
    let api: Api<Memcached> = Api::namespaced(env.client.clone(), &cache);
    let object: Memcached = serde_json::from_value(json!({
        "apiVersion": "cache.f2367556.dev/v1beta1",
        "kind": "Memcached",
        "metadata": {"name": NAME, "namespace": cache},
        "spec": {"replicas": 1, "memcached": {"memoryLimitMB": 16}, "monitoring": {}},
    }))
    .expect("a Memcached");
    // A ready Deployment is not yet a Service kube-proxy routes to: until it does, the API
    // server's calls to the webhooks are refused. A server-side dry run calls them too.
    let dry_run = PostParams {
        dry_run: true,
        ..PostParams::default()
    };
    eventually(
        "the pinned operator's webhooks answer a dry run",
        WAIT,
        || async { api.create(&dry_run, &object).await.ok().map(|_| ()) },
    )
    .await;
    let created = api
        .create(&PostParams::default(), &object)
        .await
        .expect("create");
    let spec = serde_json::to_value(&created.spec).expect("JSON");
    assert_eq!(
        spec["image"],
        json!(options.images.memcached),
        "defaulted to the pinned operand"
    );
    assert_eq!(
        spec["monitoring"]["exporterImage"],
        json!(options.images.exporter),
        "defaulted to the pinned exporter"
    );
    testkit::control_plane::memcached_available(&env.client, &cache, NAME, Some(1), WAIT).await;
    let pods: Api<Pod> = Api::namespaced(env.client.clone(), &cache);
    let pod = pods
        .get(&format!("{NAME}-0"))
        .await
        .expect("the server's pod");
    let spec = pod.spec.expect("a pod spec");
    let images: Vec<String> = spec
        .init_containers
        .iter()
        .flatten()
        .chain(spec.containers.iter())
        .filter_map(|c| c.image.clone())
        .collect();
    assert!(
        !images.is_empty() && images.iter().all(|image| image.contains("@sha256:")),
        "every container of the server's pod names its image by digest: {images:?}"
    );

    // What the kubelet said of the images of the pinned operator's pods and of the server's.
    let operator_pods: Vec<String> = env
        .operator_pods()
        .await
        .into_iter()
        .filter(|p| {
            p.spec
                .as_ref()
                .and_then(|s| s.containers.first()?.image.as_deref())
                == Some(options.images.operator.as_str())
        })
        .filter_map(|p| p.metadata.name)
        .collect();
    assert_eq!(
        operator_pods.len(),
        2,
        "two pods of the pinned operator: {operator_pods:?}"
    );
    let events: Vec<String> = image_events(&env, &namespace, Some(&operator_pods))
        .into_iter()
        .chain(image_events(&env, &cache, None))
        .collect();
    eprintln!("the kubelet's image events:\n{}", events.join("\n"));
    assert!(
        events
            .iter()
            .any(|e| e.starts_with("Pulled:") || e.starts_with("Pulling:")),
        "the kubelet reported its images: {events:?}"
    );
    assert!(
        events
            .iter()
            .all(|e| (e.starts_with("Pulled:") || e.starts_with("Pulling:"))
                && e.contains("@sha256:")),
        "every image event names a digest, and none failed: {events:?}"
    );
}
