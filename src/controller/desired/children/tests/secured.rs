//! The children of a Memcached with TLS, authentication, a graceful shutdown, a warm restart
//! and a NetworkPolicy.

use super::*;

pub(super) fn secured() -> Memcached {
    use crate::api::v1beta1::{AuthSpec, ClientAuth, GracefulShutdownSpec, TlsSpec};
    defaulted(
        "secured",
        MemcachedSpec {
            replicas: Some(2),
            tls: Some(TlsSpec {
                secret_name: Some("secured-tls".into()),
                plaintext_port: Some(11212),
                client_auth: Some(ClientAuth::Require),
                client_secret_name: Some("secured-client-tls".into()),
                refresher_image: Some("registry.example.com/memcached-operator:v0.1.0".into()),
                ..TlsSpec::default()
            }),
            auth: Some(AuthSpec {
                secret_name: Some("secured-auth".into()),
                reloader_image: None,
            }),
            graceful_shutdown: Some(GracefulShutdownSpec {
                pre_stop_delay_seconds: Some(5),
                termination_grace_period_seconds: Some(20),
            }),
            ..MemcachedSpec::default()
        },
    )
}

#[test]
fn children_of_a_secured_memcached_match_the_golden_files() {
    let object = secured();
    golden(
        "secured-statefulset",
        &desired_statefulset(&object, Platform::Kubernetes),
    );
    golden("secured-service", &desired_service(&object));
}

#[test]
fn tls_and_auth_become_flags_volumes_and_ports() {
    let object = secured();
    let args = memcached_args(&object);
    let tail: Vec<&str> = args.iter().map(String::as_str).skip(12).collect();
    assert_eq!(
        tail,
        [
            "--enable-ssl",
            "-o",
            "ssl_chain_cert=/etc/memcached/tls/tls.crt,ssl_key=/etc/memcached/tls/tls.key,\
             ssl_ca_cert=/etc/memcached/tls/ca.crt,ssl_verify_mode=2",
            "-l",
            "*:11211,notls:*:11212",
            "--auth-file=/etc/memcached/auth/authfile",
        ]
    );
    let sts = desired_statefulset(&object, Platform::OpenShift);
    let pod = sts.spec.and_then(|s| s.template.spec).expect("a pod spec");
    let secrets: Vec<_> = pod
        .volumes
        .iter()
        .flatten()
        .filter_map(|v| v.secret.as_ref()?.secret_name.clone())
        .collect();
    // The server's Secret twice (whole for memcached, without its key for the refresher), the
    // sidecars' client certificate, the credentials.
    assert_eq!(
        secrets,
        [
            "secured-tls",
            "secured-tls",
            "secured-client-tls",
            "secured-auth"
        ]
    );
    // OpenShift's SCC picks the group that may read the Secrets' files.
    assert_eq!(pod.security_context.and_then(|s| s.fs_group), None);
    let container = &pod.containers[0];
    let ports: Vec<_> = container
        .ports
        .iter()
        .flatten()
        .map(|p| (p.name.clone().unwrap_or_default(), p.container_port))
        .collect();
    assert_eq!(
        ports,
        [("memcache".into(), 11211), ("memcache-plain".into(), 11212)]
    );
    let service_ports = desired_service(&object).spec.and_then(|s| s.ports);
    assert_eq!(service_ports.map(|p| p.len()), Some(2));

    // Client certificates off: no CA is read, and without a plaintext port no -l is given.
    let mut plain = object.clone();
    let tls = plain.spec.tls.as_mut().expect("tls");
    tls.client_auth = Some(crate::api::v1beta1::ClientAuth::None);
    tls.plaintext_port = None;
    plain.spec.auth = None;
    let args = memcached_args(&plain);
    assert_eq!(
        args[12..],
        [
            "--enable-ssl",
            "-o",
            "ssl_chain_cert=/etc/memcached/tls/tls.crt,ssl_key=/etc/memcached/tls/tls.key"
        ]
    );
}

#[test]
fn shutdown_sets_the_pre_stop_sleep_and_the_grace_period() {
    let sts = desired_statefulset(&secured(), Platform::Kubernetes);
    let pod = sts.spec.and_then(|s| s.template.spec).expect("a pod spec");
    assert_eq!(pod.termination_grace_period_seconds, Some(20));
    let sleep = pod.containers[0]
        .lifecycle
        .as_ref()
        .and_then(|l| l.pre_stop.as_ref()?.sleep.as_ref())
        .map(|s| s.seconds);
    assert_eq!(sleep, Some(5));
    let minimal = desired_statefulset(&minimal(), Platform::Kubernetes);
    let pod = minimal
        .spec
        .and_then(|s| s.template.spec)
        .expect("a pod spec");
    assert_eq!(pod.termination_grace_period_seconds, Some(30));
    assert_eq!(pod.containers[0].lifecycle, None);
}

#[test]
fn a_tls_server_has_the_certificate_refresher_beside_it() {
    let sts = desired_statefulset(&secured(), Platform::Kubernetes);
    let pod = sts.spec.and_then(|s| s.template.spec).expect("a pod spec");
    let init = pod.init_containers.expect("init containers");
    // The supervisor's installer (the server requires credentials), then the refresher.
    let names: Vec<&str> = init.iter().map(|c| c.name.as_str()).collect();
    assert_eq!(names, ["install-supervisor", "cert-refresher"]);
    let refresher = &init[1];
    // A native sidecar: it keeps running beside memcached, and starts before it.
    assert_eq!(refresher.restart_policy.as_deref(), Some("Always"));
    assert_eq!(
        refresher.image.as_deref(),
        Some("registry.example.com/memcached-operator:v0.1.0")
    );
    assert_eq!(
        refresher.args.clone().unwrap_or_default(),
        [
            "refresh-certs",
            "--cert-dir=/etc/memcached/tls",
            "--port=11211",
            "--client-cert-dir=/etc/memcached/client-tls",
            "--auth-file=/etc/memcached/auth/authfile",
            "--health-port=9151"
        ]
    );
    // The kubelet probes its heartbeat on the port it listens on.
    let ports = refresher.ports.clone().unwrap_or_default();
    assert_eq!(
        (ports[0].name.as_deref(), ports[0].container_port),
        (Some("refresh-health"), 9151)
    );
    for (probe, path) in [
        (&refresher.liveness_probe, "/healthz"),
        (&refresher.readiness_probe, "/readyz"),
    ] {
        let get = probe
            .as_ref()
            .and_then(|p| p.http_get.clone())
            .expect("HTTP");
        assert_eq!(get.path.as_deref(), Some(path));
        assert_eq!(get.port, IntOrString::String("refresh-health".into()));
    }
    // memcached mounts the two Secrets and nothing else of the refresher's; the refresher
    // the server's certificate and CA (not its key), the sidecars' client certificate and the
    // credentials.
    let paths = |container: &Container| -> Vec<String> {
        container
            .volume_mounts
            .iter()
            .flatten()
            .map(|m| m.mount_path.clone())
            .collect()
    };
    assert_eq!(
        paths(refresher),
        [
            "/etc/memcached/tls",
            "/etc/memcached/client-tls",
            "/etc/memcached/auth"
        ]
    );
    let volume = |mount: &str| -> (String, Vec<String>) {
        let name = refresher
            .volume_mounts
            .iter()
            .flatten()
            .find(|m| m.mount_path == mount)
            .map(|m| m.name.clone())
            .expect("mounted");
        let secret = pod
            .volumes
            .iter()
            .flatten()
            .find(|v| v.name == name)
            .and_then(|v| v.secret.clone())
            .expect("a Secret volume");
        let keys = secret
            .items
            .iter()
            .flatten()
            .map(|item| item.key.clone())
            .collect();
        (secret.secret_name.unwrap_or_default(), keys)
    };
    assert_eq!(
        volume("/etc/memcached/tls"),
        (
            "secured-tls".into(),
            vec!["tls.crt".into(), "ca.crt".into()]
        )
    );
    assert_eq!(
        volume("/etc/memcached/client-tls"),
        (
            "secured-client-tls".into(),
            vec!["tls.crt".into(), "tls.key".into()]
        )
    );
    assert_eq!(
        paths(&pod.containers[0]),
        [
            "/etc/memcached/tls",
            "/etc/memcached/auth",
            "/opt/memcached-operator"
        ]
    );
    // Its own user and group.
    let security = refresher
        .security_context
        .clone()
        .expect("a security context");
    assert_eq!(
        (security.run_as_user, security.run_as_group),
        (Some(11220), Some(11220))
    );
    let minimal = desired_statefulset(&minimal(), Platform::Kubernetes);
    let pod = minimal
        .spec
        .and_then(|s| s.template.spec)
        .expect("a pod spec");
    assert_eq!(pod.init_containers, None);
}

#[test]
fn a_warm_restart_keeps_the_memory_file_in_memory_and_stops_memcached_gracefully() {
    let mut object = minimal();
    let config = object.spec.memcached.as_mut().expect("memcached settings");
    config.warm_restart = Some(true);
    object.spec.graceful_shutdown = Some(crate::api::v1beta1::GracefulShutdownSpec {
        pre_stop_delay_seconds: Some(5),
        termination_grace_period_seconds: Some(60),
    });
    let args = memcached_args(&object);
    assert_eq!(
        args[12..],
        ["--memory-file=/var/cache/memcached/memory_file"]
    );
    let sts = desired_statefulset(&object, Platform::Kubernetes);
    let pod = sts.spec.and_then(|s| s.template.spec).expect("a pod spec");
    let volume = pod
        .volumes
        .iter()
        .flatten()
        .find(|v| v.name == "memory-file")
        .and_then(|v| v.empty_dir.clone())
        .expect("the memory file's volume");
    assert_eq!(volume.medium.as_deref(), Some("Memory"));
    // The item memory (64 MiB by default) and a MiB for the metadata.
    assert_eq!(volume.size_limit.map(|q| q.0), Some("65Mi".to_string()));
    // No Secret is mounted, so no group is set for reading one.
    assert_eq!(pod.security_context.and_then(|s| s.fs_group), None);
    let hook = pod.containers[0]
        .lifecycle
        .as_ref()
        .and_then(|l| l.pre_stop.as_ref()?.exec.as_ref()?.command.clone());
    assert_eq!(
        hook,
        Some(vec![
            "/bin/sh".to_string(),
            "-c".to_string(),
            r#"sleep 5; read -r pid < /var/cache/memcached/memcached.pid; kill -USR1 "$pid"; exec sleep 60"#
                .to_string()
        ])
    );
    // memcached starts a second late, so that a memory file saved moments ago is in the past;
    // its pid (the shell's, which it keeps) is where the hook reads it. The kubelet turns the
    // command's `$$$$` into the shell's `$$`.
    assert_eq!(
        pod.containers[0].command.clone().unwrap_or_default(),
        [
            "/bin/sh",
            "-c",
            r#"echo $$$$ > /var/cache/memcached/memcached.pid; sleep 1; exec memcached "$@""#,
            "memcached"
        ]
    );
    assert_eq!(minimal().spec.memcached.and_then(|m| m.warm_restart), None);
    let mounts = pod.containers[0].volume_mounts.clone().unwrap_or_default();
    assert_eq!(mounts.len(), 1);
    assert_eq!(mounts[0].mount_path, "/var/cache/memcached");
}

#[test]
fn a_network_policy_admits_the_allowed_sources_to_memcached_s_ports_only() {
    use k8s_openapi::api::networking::v1::NetworkPolicyPeer;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
    assert_eq!(network::desired_network_policy(&minimal()), None);
    let mut object = secured();
    let sources = vec![NetworkPolicyPeer {
        pod_selector: Some(LabelSelector {
            match_labels: Some(BTreeMap::from([("role".into(), "client".into())])),
            match_expressions: None,
        }),
        ..NetworkPolicyPeer::default()
    }];
    object.spec.network_policy = Some(crate::api::v1beta1::NetworkPolicySpec {
        allowed_sources: Some(sources.clone()),
        metrics_sources: None,
    });
    let policy = network::desired_network_policy(&object).expect("a NetworkPolicy");
    assert_eq!(policy.metadata.name.as_deref(), Some("secured"));
    let spec = policy.spec.expect("a spec");
    assert_eq!(
        spec.pod_selector.and_then(|s| s.match_labels),
        Some(selector_labels(&object))
    );
    assert_eq!(spec.policy_types, Some(vec!["Ingress".to_string()]));
    let rules = spec.ingress.expect("ingress rules");
    assert_eq!(rules.len(), 1);
    assert_eq!(rules[0].from, Some(sources));
    let ports: Vec<_> = rules[0]
        .ports
        .iter()
        .flatten()
        .map(|p| p.port.clone())
        .collect();
    // The TLS client port and the plaintext port beside it.
    assert_eq!(
        ports,
        [Some(IntOrString::Int(11211)), Some(IntOrString::Int(11212))]
    );
}

#[test]
fn client_cas_from_a_config_map_are_ca_crt_beside_the_secret_s_files() {
    use crate::api::v1beta1::ClientCaSource;
    let mut object = secured();
    object.spec.tls.as_mut().expect("tls").client_ca = Some(ClientCaSource {
        config_map_name: "cache-trust".into(),
        key: Some("trust-bundle.pem".into()),
    });
    // memcached reads the same path: the ConfigMap's key is its ca.crt.
    assert!(
        memcached_args(&object)
            .iter()
            .any(|arg| arg.contains("ssl_ca_cert=/etc/memcached/tls/ca.crt")),
        "{:?}",
        memcached_args(&object)
    );
    let sts = desired_statefulset(&object, Platform::Kubernetes);
    let pod = sts.spec.and_then(|s| s.template.spec).expect("a pod spec");
    let sources = |name: &str| -> Vec<(String, Vec<(String, String)>)> {
        let volume = pod
            .volumes
            .iter()
            .flatten()
            .find(|v| v.name == name)
            .unwrap_or_else(|| panic!("a volume {name}"));
        let projected = volume.projected.clone().expect("a projected volume");
        assert_eq!(projected.default_mode, Some(0o440), "{name}");
        let items = |items: Option<Vec<k8s_openapi::api::core::v1::KeyToPath>>| {
            items
                .unwrap_or_default()
                .into_iter()
                .map(|item| (item.key, item.path))
                .collect::<Vec<_>>()
        };
        projected
            .sources
            .unwrap_or_default()
            .into_iter()
            .map(|source| match (source.secret, source.config_map) {
                (Some(secret), None) => (format!("Secret {}", secret.name), items(secret.items)),
                (None, Some(map)) => (format!("ConfigMap {}", map.name), items(map.items)),
                other => panic!("{name}: one Secret or ConfigMap a source: {other:?}"),
            })
            .collect()
    };
    let pair = |key: &str, path: &str| (key.to_string(), path.to_string());
    let trust = (
        "ConfigMap cache-trust".to_string(),
        vec![pair("trust-bundle.pem", "ca.crt")],
    );
    // memcached's: the certificate and key from the Secret, ca.crt from the ConfigMap.
    assert_eq!(
        sources("tls"),
        [
            (
                "Secret secured-tls".to_string(),
                vec![pair("tls.crt", "tls.crt"), pair("tls.key", "tls.key")]
            ),
            trust.clone()
        ]
    );
    // The refresher's: the same without the key.
    assert_eq!(
        sources("tls-public"),
        [
            (
                "Secret secured-tls".to_string(),
                vec![pair("tls.crt", "tls.crt")]
            ),
            trust
        ]
    );
    // Without client certificates nothing is verified, so the ConfigMap is not mounted.
    object.spec.tls.as_mut().expect("tls").client_auth = None;
    let sts = desired_statefulset(&object, Platform::Kubernetes);
    let volumes = sts
        .spec
        .and_then(|s| s.template.spec)
        .and_then(|p| p.volumes)
        .unwrap_or_default();
    assert!(volumes.iter().all(|v| v.projected.is_none()), "{volumes:?}");
}
