//! Each container of a memcached pod reaches only its own processes and files, read on the
//! real node (kubelet, containerd, runc) from `/proc` of each container's processes: a server
//! with TLS under client certificates, authentication, a warm restart's memory file and
//! monitoring. memcached runs under the supervisor as its container's first process; each
//! sidecar runs as its own user, in its own process namespace; the exporter can neither see
//! nor signal memcached, nor open the server's key, the sidecars' client key, the auth file or
//! the memory file, even holding memcached's groups; the refresher and the relay open what
//! they need (the sidecars' own client certificate, the credentials; the refresher the server's
//! certificate) and never the server's key nor anything of memcached's own. A user that holds
//! memcached's ids opens the server's key, the auth file and the memory file, so the paths are
//! right.

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::sync::Arc;

use serde_json::json;
use testkit::access::{Ids, ids, open_as, pid_namespace, processes_beside, signal_as};
use testkit::containers::{main_pid, memcached_pid};
use testkit::pki::Ca;

use crate::cluster::{Env, WAIT, eventually, pod_address};
use crate::metrics::{scrape, value};
use crate::secured::{client_data, create_and_wait, create_secret, pod, tls_data};

const KEY: &str = "/etc/memcached/tls/tls.key";
const CERTIFICATE: &str = "/etc/memcached/tls/tls.crt";
const CLIENT_KEY: &str = "/etc/memcached/client-tls/tls.key";
const AUTH_FILE: &str = "/etc/memcached/auth/authfile";
const MEMORY_FILE: &str = "/var/cache/memcached/memory_file";
/// The sidecars and the user and group each runs as (`children::identity`).
const SIDECARS: [(&str, u32); 3] = [
    ("cert-refresher", 11220),
    ("stats-relay", 11221),
    ("exporter", 11222),
];

/// `path` as seen in the container of process `pid`.
fn inside(pid: u32, path: &str) -> PathBuf {
    PathBuf::from(format!("/proc/{pid}/root{path}"))
}

pub async fn each_container_reaches_only_its_own_processes_and_files(env: Arc<Env>) {
    let namespace = env.create_namespace("isolation").await;
    let ca = Ca::root();
    let server = ca.serving_for(&[&format!("*.isolated.{namespace}.svc")]);
    create_secret(&env, &namespace, "isolated-tls", tls_data(&server, &ca)).await;
    create_secret(
        &env,
        &namespace,
        "isolated-auth",
        BTreeMap::from([("authfile", "isolated:reader-5e1b\n".to_string())]),
    )
    .await;
    create_secret(
        &env,
        &namespace,
        "isolated-client-tls",
        client_data(&ca.client("isolated-sidecars")),
    )
    .await;
    create_and_wait(
        &env,
        &namespace,
        "isolated",
        json!({
            "memcached": { "memoryLimitMB": 64, "warmRestart": true },
            "resources": { "limits": { "memory": "160Mi" } },
            "tls": {
                "secretName": "isolated-tls",
                "clientAuth": "Require",
                "clientSecretName": "isolated-client-tls",
            },
            "auth": { "secretName": "isolated-auth" },
            "monitoring": {},
        }),
    )
    .await;
    let pod = pod(&env, &namespace, "isolated-0").await;
    let spec = pod.spec.clone().expect("a pod spec");
    assert_eq!(
        spec.share_process_namespace, None,
        "no shared process namespace"
    );

    // memcached's container: the supervisor first, memcached its child, as the pod's user.
    let supervisor = main_pid(&pod, "memcached").expect("memcached's container");
    let memcached = memcached_pid(&pod).expect("memcached's process");
    let in_memcached = processes_beside(supervisor).expect("memcached's container's processes");
    let program = std::fs::read_link(format!("/proc/{supervisor}/exe")).expect("its program");
    eprintln!(
        "isolation: memcached's container runs {in_memcached:?}; its first process {supervisor} \
         runs {}",
        program.display()
    );
    assert_eq!(
        program,
        PathBuf::from("/opt/memcached-operator/memcached-operator"),
        "the supervisor is the container's first process"
    );
    assert_eq!(in_memcached.len(), 2, "the supervisor and memcached only");
    assert_ne!(memcached, supervisor);
    let memcached_ids = ids(memcached).expect("memcached's ids");
    assert_eq!(memcached_ids.user, 11211);
    assert_eq!(ids(supervisor).expect("the supervisor's ids").user, 11211);

    // Each sidecar: its own user and group, its own process namespace, no other's process.
    let mut namespaces = BTreeSet::from([pid_namespace(supervisor).expect("memcached's")]);
    let mut sidecars: BTreeMap<&str, (u32, Ids)> = BTreeMap::new();
    for (name, user) in SIDECARS {
        let pid = main_pid(&pod, name).unwrap_or_else(|e| panic!("{name}: {e}"));
        let seen = ids(pid).unwrap_or_else(|e| panic!("{name}: {e}"));
        let beside = processes_beside(pid).unwrap_or_else(|e| panic!("{name}: {e}"));
        eprintln!("isolation: {name} runs as {seen:?}, beside {beside:?}");
        assert_eq!(
            (seen.user, seen.group),
            (user, user),
            "{name}'s user and group"
        );
        assert!(
            beside.iter().all(|(_, comm)| comm != "memcached"),
            "{name} sees no memcached process: {beside:?}"
        );
        assert!(
            namespaces.insert(pid_namespace(pid).expect("its namespace")),
            "{name} has a process namespace of its own"
        );
        sidecars.insert(name, (pid, seen));
    }

    // The exporter, as the kernel lets it: what its own /proc shows, what it may signal, and
    // what it may open, with memcached's groups added to its own.
    let (exporter, exporter_ids) = sidecars["exporter"].clone();
    let its_proc: Vec<String> = std::fs::read_dir(inside(exporter, "/proc"))
        .expect("the exporter's /proc")
        .flatten()
        .filter(|e| {
            e.file_name()
                .to_str()
                .is_some_and(|n| n.parse::<u32>().is_ok())
        })
        .filter_map(|e| std::fs::read_to_string(e.path().join("comm")).ok())
        .map(|comm| comm.trim_end().to_string())
        .collect();
    eprintln!("isolation: the exporter's /proc lists {its_proc:?}");
    assert!(!its_proc.is_empty() && its_proc.iter().all(|c| c != "memcached"));
    let (user, group) = (exporter_ids.user, exporter_ids.group);
    let mut groups = exporter_ids.all_groups();
    groups.extend(memcached_ids.all_groups());
    for target in [memcached, supervisor] {
        let refused = signal_as(user, group, &groups, target);
        eprintln!("isolation: the exporter's kill -0 {target}: {refused:?}");
        assert!(
            refused
                .as_ref()
                .is_err_and(|e| e.contains("Operation not permitted")),
            "the exporter may not signal {target}: {refused:?}"
        );
    }
    let in_exporter = open_as(user, group, &groups, &inside(exporter, CLIENT_KEY));
    assert!(
        in_exporter.is_err(),
        "{CLIENT_KEY} in the exporter's root: {in_exporter:?}"
    );
    for path in [KEY, AUTH_FILE, MEMORY_FILE] {
        // Through memcached's root, as the issue's /proc/PID/root path went.
        let through_memcached = open_as(user, group, &groups, &inside(memcached, path));
        // In its own root, where nothing of memcached's is mounted.
        let own = open_as(user, group, &groups, &inside(exporter, path));
        eprintln!(
            "isolation: the exporter opens {path}: through memcached's root \
             {through_memcached:?}, in its own {own:?}"
        );
        assert!(
            through_memcached.is_err(),
            "{path} through memcached's root"
        );
        assert!(own.is_err(), "{path} in the exporter's root");
        // memcached's own ids open it: the path is right.
        let allowed = open_as(
            memcached_ids.user,
            memcached_ids.group,
            &memcached_ids.all_groups(),
            &inside(memcached, path),
        );
        assert_eq!(allowed, Ok(()), "memcached opens {path}");
    }

    // The refresher and the relay open what they need: their own client certificate and the
    // credentials, the refresher the server's certificate; never the server's key, nor
    // memcached's memory file.
    for (name, needs) in [
        ("cert-refresher", &[CLIENT_KEY, AUTH_FILE, CERTIFICATE][..]),
        ("stats-relay", &[CLIENT_KEY, AUTH_FILE][..]),
    ] {
        let (pid, seen) = sidecars[name].clone();
        let groups = seen.all_groups();
        for path in needs {
            assert_eq!(
                open_as(seen.user, seen.group, &groups, &inside(pid, path)),
                Ok(()),
                "{name} reads {path}"
            );
        }
        for target in [
            inside(pid, KEY),
            inside(pid, MEMORY_FILE),
            inside(memcached, KEY),
        ] {
            let refused = open_as(seen.user, seen.group, &groups, &target);
            assert!(
                refused.is_err(),
                "{name} opens {}: {refused:?}",
                target.display()
            );
        }
        let refused = signal_as(seen.user, seen.group, &groups, memcached);
        assert!(
            refused.is_err(),
            "{name} may not signal memcached: {refused:?}"
        );
    }

    // The exporter, as its own user, still reads the server through the relay's socket.
    let metrics_at = pod_address(&pod, 9150);
    eventually("the exporter reports the server up", WAIT, || async {
        let metrics = scrape(metrics_at).await.ok()?;
        (value(&metrics, "memcached_up") == Some(1.0)).then_some(())
    })
    .await;
}
