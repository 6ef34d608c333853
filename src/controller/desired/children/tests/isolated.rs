//! The isolation of a memcached pod's containers: memcached under the supervisor with
//! authentication, no shared process namespace, and a user of its own for each sidecar.

use super::secured::secured;
use super::*;

fn pod_of(object: &Memcached, platform: Platform) -> PodSpec {
    desired_statefulset(object, platform)
        .spec
        .and_then(|s| s.template.spec)
        .expect("a pod spec")
}

fn with_warm_restart(mut object: Memcached) -> Memcached {
    object
        .spec
        .memcached
        .as_mut()
        .expect("memcached settings")
        .warm_restart = Some(true);
    object
}

#[test]
fn with_authentication_memcached_runs_under_the_supervisor_an_init_container_installs() {
    let object = secured();
    let pod = pod_of(&object, Platform::Kubernetes);
    assert_eq!(pod.share_process_namespace, None, "no shared processes");
    let installer = &pod.init_containers.clone().expect("init containers")[0];
    assert_eq!(installer.name, "install-supervisor");
    assert_eq!(installer.restart_policy, None, "it runs to its end first");
    assert_eq!(
        installer.image.as_deref(),
        Some(crate::operator::own_image().as_str())
    );
    assert_eq!(
        installer.command.clone().unwrap_or_default(),
        ["/usr/local/bin/memcached-operator"]
    );
    assert_eq!(
        installer.args.clone().unwrap_or_default(),
        ["install-supervisor", "--into=/opt/memcached-operator"]
    );
    let writable = installer.volume_mounts.clone().unwrap_or_default();
    assert_eq!(writable.len(), 1);
    assert_eq!(writable[0].mount_path, "/opt/memcached-operator");
    assert_eq!(writable[0].read_only, None);
    let memcached = &pod.containers[0];
    assert_eq!(
        memcached.command.clone().unwrap_or_default(),
        [
            "/opt/memcached-operator/memcached-operator",
            "supervise",
            "--auth-file=/etc/memcached/auth/authfile",
            "--",
            "memcached"
        ]
    );
    assert_eq!(memcached.args, Some(memcached_args(&object)));
    let binary = memcached
        .volume_mounts
        .iter()
        .flatten()
        .find(|m| m.mount_path == "/opt/memcached-operator")
        .expect("the supervisor's mount");
    assert_eq!(binary.read_only, Some(true));
    let volume = pod
        .volumes
        .iter()
        .flatten()
        .find(|v| v.name == binary.name)
        .and_then(|v| v.empty_dir.clone())
        .expect("the supervisor's volume");
    assert_eq!(
        volume.medium, None,
        "on disk: not charged to a memory limit"
    );
}

#[test]
fn the_pre_stop_hook_signals_the_supervisor_which_turns_sigterm_into_the_graceful_stop() {
    let object = with_warm_restart(secured());
    let pod = pod_of(&object, Platform::Kubernetes);
    let memcached = &pod.containers[0];
    let command = memcached.command.clone().unwrap_or_default();
    assert_eq!(
        command[2..],
        [
            "--auth-file=/etc/memcached/auth/authfile",
            "--warm-restart",
            "--",
            "memcached"
        ]
    );
    let hook = memcached
        .lifecycle
        .as_ref()
        .and_then(|l| l.pre_stop.as_ref()?.exec.as_ref()?.command.clone());
    assert_eq!(
        hook,
        Some(vec![
            "/bin/sh".to_string(),
            "-c".to_string(),
            "sleep 5; kill -USR1 1; exec sleep 20".to_string()
        ])
    );
}

#[test]
fn without_authentication_memcached_is_its_container_s_first_process_as_before() {
    let mut object = secured();
    object.spec.auth = None;
    let pod = pod_of(&object, Platform::Kubernetes);
    assert_eq!(pod.containers[0].command, None);
    let names: Vec<String> = pod
        .init_containers
        .iter()
        .flatten()
        .map(|c| c.name.clone())
        .collect();
    assert_eq!(names, ["cert-refresher"]);
    assert!(!pod.volumes.iter().flatten().any(|v| v.name == "supervisor"));
    let warm = pod_of(&with_warm_restart(minimal()), Platform::Kubernetes);
    assert_eq!(
        warm.containers[0].command.clone().unwrap_or_default()[0],
        "/bin/sh"
    );
}

#[test]
fn with_client_cas_from_a_config_map_and_a_warm_restart_the_supervisor_reads_the_restart_request() {
    use crate::api::v1beta1::{ClientAuth, ClientCaSource};
    let mut object = with_warm_restart(secured());
    object.spec.auth = None;
    let tls = object.spec.tls.as_mut().expect("tls");
    tls.client_auth = Some(ClientAuth::Require);
    tls.client_secret_name = Some("cache-client".into());
    tls.refresher_image = Some("registry.example/operator:1".into());
    tls.client_ca = Some(ClientCaSource {
        config_map_name: "trust".into(),
        key: None,
    });
    let pod = pod_of(&object, Platform::Kubernetes);
    let memcached = &pod.containers[0];
    assert_eq!(
        memcached.command.clone().unwrap_or_default()[1..],
        [
            "supervise",
            "--warm-restart",
            "--client-ca-request=/etc/memcached/pod/client-ca-sha256",
            "--client-ca=/etc/memcached/tls/ca.crt",
            "--restarted-file=/var/cache/memcached/client-ca-restarted",
            "--",
            "memcached"
        ],
        "no auth file without authentication"
    );
    let installer = &pod.init_containers.clone().expect("init containers")[0];
    assert_eq!(
        (installer.name.as_str(), installer.image.as_deref()),
        ("install-supervisor", Some("registry.example/operator:1")),
        "copied from the refresher's image"
    );
    let request = pod
        .volumes
        .iter()
        .flatten()
        .find(|v| v.name == "pod-request")
        .and_then(|v| v.downward_api.clone())
        .expect("the downward API volume");
    let field = request.items.unwrap_or_default()[0].field_ref.clone();
    assert_eq!(
        field.map(|f| f.field_path),
        Some("metadata.annotations['cache.f2367556.dev/client-ca-sha256']".into())
    );
    assert!(
        memcached
            .volume_mounts
            .iter()
            .flatten()
            .any(|m| m.name == "pod-request"
                && m.mount_path == "/etc/memcached/pod"
                && m.read_only == Some(true))
    );

    // Without a warm restart (a restart would lose the items) or without the ConfigMap, no
    // restart is asked for: memcached is not supervised for it.
    let mut cold = object.clone();
    cold.spec
        .memcached
        .as_mut()
        .expect("memcached")
        .warm_restart = None;
    assert_eq!(
        pod_of(&cold, Platform::Kubernetes).containers[0].command,
        None
    );
    let mut from_secret = object;
    from_secret.spec.tls.as_mut().expect("tls").client_ca = None;
    let pod = pod_of(&from_secret, Platform::Kubernetes);
    assert_eq!(
        pod.containers[0].command.clone().unwrap_or_default()[0],
        "/bin/sh"
    );
    assert!(
        !pod.volumes
            .iter()
            .flatten()
            .any(|v| v.name == "pod-request")
    );
}

#[test]
fn each_sidecar_runs_as_its_own_user_and_memcached_as_the_pods() {
    let mut object = secured();
    object.spec.monitoring = Some(crate::api::v1beta1::MonitoringSpec::default());
    object.spec = default_spec(&object.spec, &Defaults::default());
    let pod = pod_of(&object, Platform::Kubernetes);
    let security = pod
        .security_context
        .clone()
        .expect("a pod security context");
    assert_eq!(security.run_as_user, Some(MEMCACHED_IMAGE_UID));
    assert_eq!(security.fs_group, Some(MEMCACHED_IMAGE_UID));
    let users: Vec<(String, Option<i64>, Option<i64>)> = pod
        .init_containers
        .iter()
        .flatten()
        .chain(&pod.containers)
        .map(|c| {
            let security = c.security_context.clone().expect("a security context");
            assert_eq!(security.run_as_non_root, Some(true), "{}", c.name);
            assert_eq!(
                security.allow_privilege_escalation,
                Some(false),
                "{}",
                c.name
            );
            assert_eq!(security.read_only_root_filesystem, Some(true), "{}", c.name);
            (c.name.clone(), security.run_as_user, security.run_as_group)
        })
        .collect();
    assert_eq!(
        users,
        [
            ("install-supervisor".to_string(), None, None),
            ("cert-refresher".to_string(), Some(11220), Some(11220)),
            ("stats-relay".to_string(), Some(11221), Some(11221)),
            ("exporter".to_string(), Some(11222), Some(11222)),
            ("memcached".to_string(), None, None),
        ]
    );
    // On OpenShift the SCC assigns the user of every container.
    let openshift = pod_of(&object, Platform::OpenShift);
    for container in openshift.init_containers.iter().flatten() {
        let security = container.security_context.clone().unwrap_or_default();
        assert_eq!(security.run_as_user, None, "{}", container.name);
        assert_eq!(security.run_as_group, None, "{}", container.name);
    }
    assert_eq!(openshift.share_process_namespace, None);
}
