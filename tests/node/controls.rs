//! Positive controls for what the confinement scenario reads: the same runtime, asked by a pod,
//! does refuse a write to a read-only root (and takes it on a writable one), kills a container
//! over its memory limit, and refuses to start an image whose user is root under
//! runAsNonRoot. Without these, a node that enforced nothing would pass the reading too.

use std::sync::Arc;

use serde_json::json;

use crate::cluster::{Env, busybox_pod};

pub async fn the_runtime_refuses_what_a_container_may_not_do(env: Arc<Env>) {
    let namespace = env.create_namespace("controls").await;
    let write = "echo x > /written && echo wrote || echo refused: $?";
    let unprivileged = json!({
        "runAsNonRoot": true,
        "runAsUser": 65532,
        "allowPrivilegeEscalation": false,
        "capabilities": { "drop": ["ALL"] },
        "seccompProfile": { "type": "RuntimeDefault" },
    });

    let mut read_only = unprivileged.clone();
    read_only["readOnlyRootFilesystem"] = json!(true);
    let ended = env
        .run_to_end(&namespace, busybox_pod("read-only", write, read_only, None))
        .await;
    eprintln!("read-only root: {ended:?}");
    assert_eq!(ended.phase, "Succeeded");
    assert!(
        ended.log.contains("Read-only file system") && ended.log.contains("refused"),
        "a write to a read-only root fails: {:?}",
        ended.log
    );

    // Root may write to /, so a root-owned image's / takes the write when the root is writable.
    let writable = json!({ "readOnlyRootFilesystem": false });
    let ended = env
        .run_to_end(&namespace, busybox_pod("writable", write, writable, None))
        .await;
    eprintln!("writable root: {ended:?}");
    assert!(ended.log.contains("wrote"), "{:?}", ended.log);

    // dd's 64 MiB buffer does not fit in 32 MiB: the kernel kills it, the kubelet says so.
    let hog = "dd if=/dev/zero of=/dev/null bs=64M count=4 && echo survived";
    let ended = env
        .run_to_end(
            &namespace,
            busybox_pod("hog", hog, unprivileged.clone(), Some("32Mi")),
        )
        .await;
    eprintln!("over the memory limit: {ended:?}");
    assert_eq!(ended.reason.as_deref(), Some("OOMKilled"), "{ended:?}");
    assert!(!ended.log.contains("survived"));

    // The busybox image's user is root: runAsNonRoot without a runAsUser must refuse it.
    let non_root = json!({ "runAsNonRoot": true });
    let ended = env
        .run_to_end(&namespace, busybox_pod("as-root", "id", non_root, None))
        .await;
    eprintln!("root image under runAsNonRoot: {ended:?}");
    assert_eq!(
        ended.reason.as_deref(),
        Some("CreateContainerConfigError"),
        "{ended:?}"
    );
}
