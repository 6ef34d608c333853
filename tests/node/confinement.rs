//! The operator runs as users install it: from the image built from the shipped Dockerfile,
//! holding the release binary for x86_64-unknown-linux-musl, in containers the kubelet and runc
//! confine the way the Deployment asks: non-root as the image's user, no capability, no new
//! privileges, seccomp's RuntimeDefault filter, a read-only root, and the memory limit as the
//! container's cgroup limit. Read from the kernel on this machine, per replica.

use std::sync::Arc;

use k8s_openapi::api::apps::v1::Deployment;
use kube::api::Api;
use memcached_operator::api::sizes::parse_quantity;
use memcached_operator::operator::CONTAINER_NAME;
use testkit::containers::{confinement, main_pid, sha256_hex};
use testkit::repository;

use crate::cluster::Env;

/// The user the operator's image names (`USER 65532:65532` in the Dockerfile).
const IMAGE_USER: u32 = 65532;

pub async fn the_operator_runs_from_its_image_as_the_deployment_confines_it(env: Arc<Env>) {
    let deployments: Api<Deployment> = Api::namespaced(env.client.clone(), &env.deployed.namespace);
    let deployment = deployments
        .get(&env.deployed.deployment)
        .await
        .expect("the operator's Deployment");
    let template = deployment
        .spec
        .and_then(|spec| spec.template.spec)
        .expect("a pod template");
    let manager = template
        .containers
        .iter()
        .find(|c| c.name == CONTAINER_NAME)
        .expect("the manager container");
    let limit = manager
        .resources
        .as_ref()
        .and_then(|r| r.limits.as_ref()?.get("memory").cloned())
        .expect("the manager's memory limit");
    let limit = parse_quantity(&limit.0)
        .and_then(|bytes| u64::try_from(bytes).ok())
        .expect("a memory quantity");
    let security = manager.security_context.clone().unwrap_or_default();
    assert_eq!(security.read_only_root_filesystem, Some(true));
    assert_eq!(security.allow_privilege_escalation, Some(false));

    let shipped =
        repository::root().join("target/x86_64-unknown-linux-musl/release/memcached-operator");
    let shipped = sha256_hex(&std::fs::read(&shipped).expect("the release binary the image holds"));
    let selector = "control-plane=controller-manager";
    let pods = env.pods(&env.deployed.namespace, selector).await;
    assert_eq!(pods.len(), 2, "two replicas ({selector})");
    for pod in &pods {
        let name = pod.metadata.name.clone().unwrap_or_default();
        let pid = main_pid(pod, CONTAINER_NAME).expect("the manager's process");
        let seen = confinement(pid).expect("what the kernel says of it");
        eprintln!("{name}: pid {pid} {seen:?}");
        assert!(
            seen.uids.iter().all(|&uid| uid == IMAGE_USER),
            "{name} runs as the image's user {IMAGE_USER}: {:?}",
            seen.uids
        );
        assert_eq!(seen.effective_capabilities, 0, "{name}: no capability");
        assert_eq!(seen.bounding_capabilities, 0, "{name}: none to gain either");
        assert_eq!(seen.no_new_privs, 1, "{name}: no new privileges");
        assert_eq!(seen.seccomp, 2, "{name}: a seccomp filter (RuntimeDefault)");
        assert!(
            seen.root_options.iter().any(|o| o == "ro"),
            "{name}: a read-only root: {:?}",
            seen.root_options
        );
        assert_eq!(
            seen.memory_limit,
            Some(limit),
            "{name}: the cgroup's limit is the Deployment's"
        );
        assert_eq!(
            seen.program_sha256, shipped,
            "{name} runs the release musl binary the image was built with"
        );
    }
}
