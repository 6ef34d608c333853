use std::path::Path;

use k8s_openapi::api::core::v1::Toleration;
use serde_json::Value;

use super::*;
use crate::admission::{Defaults, default_spec};
use crate::api::v1beta1::{MemcachedConfig, MemcachedSpec};
use crate::fixtures::memcached;

fn defaulted(name: &str, spec: MemcachedSpec) -> Memcached {
    let mut object = memcached(name, default_spec(&spec, &Defaults::default()));
    object.metadata.uid = Some("0f8a3c2e-1111-4222-8333-944455556666".into());
    object
}

fn minimal() -> Memcached {
    defaulted("cache", MemcachedSpec::default())
}

fn customised() -> Memcached {
    defaulted(
        "sessions",
        MemcachedSpec {
            replicas: Some(3),
            image: Some("registry.example.com/memcached:1.6.39".into()),
            memcached: Some(MemcachedConfig {
                memory_limit_mb: Some(1024),
                max_connections: Some(4096),
                threads: Some(8),
                max_item_size: Some("4m".into()),
                verbosity: Some(1),
                warm_restart: None,
                extra_args: Some(vec!["-o".into(), "modern".into()]),
            }),
            tolerations: Some(vec![Toleration {
                key: Some("dedicated".into()),
                operator: Some("Equal".into()),
                value: Some("cache".into()),
                effect: Some("NoSchedule".into()),
                toleration_seconds: None,
            }]),
            node_selector: Some(BTreeMap::from([("pool".into(), "cache".into())])),
            priority_class_name: Some("high".into()),
            topology_spread_constraints: Some(vec![]),
            ..MemcachedSpec::default()
        },
    )
}

/// Compares `value` with `testdata/<name>.json`; `UPDATE_GOLDEN=1` rewrites the file.
fn golden(name: &str, value: &impl serde::Serialize) {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("src/controller/testdata")
        .join(format!("{name}.json"));
    let actual = serde_json::to_string_pretty(value).expect("serialises") + "\n";
    if std::env::var_os("UPDATE_GOLDEN").is_some() {
        std::fs::create_dir_all(path.parent().expect("has a parent")).expect("creates testdata");
        std::fs::write(&path, &actual).expect("writes golden file");
    }
    let expected = std::fs::read_to_string(&path).unwrap_or_else(|e| {
        panic!(
            "{}: {e} (run with UPDATE_GOLDEN=1 to create it)",
            path.display()
        )
    });
    assert_eq!(actual, expected, "{name} differs from {}", path.display());
}

#[test]
fn children_of_a_minimal_memcached_match_the_golden_files() {
    let object = minimal();
    golden(
        "minimal-statefulset",
        &desired_statefulset(&object, Platform::Kubernetes),
    );
    golden("minimal-service", &desired_service(&object));
    assert_eq!(desired_pdb(&object), None, "one replica gets no budget");
}

#[test]
fn children_of_a_customised_memcached_match_the_golden_files() {
    let object = customised();
    golden(
        "customised-statefulset",
        &desired_statefulset(&object, Platform::OpenShift),
    );
    golden("customised-service", &desired_service(&object));
    golden("customised-pdb", &desired_pdb(&object));
}

#[test]
fn arguments_follow_the_spec_then_extra_args() {
    assert_eq!(
        memcached_args(&customised()),
        [
            "-m", "1024", "-c", "4096", "-t", "8", "-I", "4m", "-p", "11211", "-U", "0", "-v",
            "-o", "modern"
        ]
    );
    assert_eq!(
        memcached_args(&minimal()),
        [
            "-m", "64", "-c", "1024", "-t", "4", "-I", "1m", "-p", "11211", "-U", "0"
        ]
    );
}

#[test]
fn every_child_is_owned_by_the_memcached_as_controller() {
    let object = customised();
    let owners = [
        desired_statefulset(&object, Platform::Kubernetes)
            .metadata
            .owner_references,
        desired_service(&object).metadata.owner_references,
        desired_pdb(&object).and_then(|p| p.metadata.owner_references),
    ];
    for owner in owners {
        let owner = owner.expect("owner references").pop().expect("one owner");
        assert_eq!(
            (owner.kind.as_str(), owner.name.as_str()),
            ("Memcached", "sessions")
        );
        assert_eq!(owner.controller, Some(true));
        assert_eq!(owner.block_owner_deletion, Some(true));
    }
}

#[test]
fn pods_prefer_distinct_nodes_unless_the_user_schedules_them() {
    let pod = |object: &Memcached| {
        desired_statefulset(object, Platform::Kubernetes)
            .spec
            .and_then(|s| s.template.spec)
            .expect("pod spec")
    };
    let affinity = pod(&minimal())
        .affinity
        .and_then(|a| a.pod_anti_affinity)
        .expect("default anti-affinity");
    assert!(
        affinity
            .preferred_during_scheduling_ignored_during_execution
            .is_some()
    );
    assert_eq!(
        pod(&customised()).affinity,
        None,
        "spread constraints given: no default"
    );
}

#[test]
fn pods_run_restricted_with_a_uid_only_off_openshift() {
    let pod = |platform| {
        desired_statefulset(&minimal(), platform)
            .spec
            .and_then(|s| s.template.spec)
            .expect("pod spec")
    };
    let openshift = pod(Platform::OpenShift);
    let security = openshift.security_context.expect("pod security context");
    assert_eq!(security.run_as_non_root, Some(true));
    assert_eq!(security.run_as_user, None);
    assert_eq!(
        security.seccomp_profile.map(|s| s.type_).as_deref(),
        Some("RuntimeDefault")
    );
    let container = openshift.containers[0]
        .security_context
        .clone()
        .expect("container security context");
    assert_eq!(container.allow_privilege_escalation, Some(false));
    assert_eq!(container.read_only_root_filesystem, Some(true));
    assert_eq!(
        container.capabilities.and_then(|c| c.drop),
        Some(vec!["ALL".to_string()])
    );
    let kubernetes = pod(Platform::Kubernetes)
        .security_context
        .expect("pod security context");
    assert_eq!(kubernetes.run_as_user, Some(MEMCACHED_IMAGE_UID));
}

#[test]
fn the_config_hash_changes_with_configuration_but_not_with_scale() {
    let hash = |object: &Memcached| -> Value {
        serde_json::to_value(desired_statefulset(object, Platform::Kubernetes)).expect("json")
            ["spec"]["template"]["metadata"]["annotations"][CONFIG_HASH_ANNOTATION].clone()
    };
    let base = minimal();
    let mut scaled = base.clone();
    scaled.spec.replicas = Some(5);
    assert_eq!(hash(&base), hash(&scaled));
    let mut resized = base.clone();
    if let Some(config) = &mut resized.spec.memcached {
        config.memory_limit_mb = Some(128);
    }
    assert_ne!(hash(&base), hash(&resized));
}

#[test]
fn the_service_is_headless_with_the_memcache_port() {
    let spec = desired_service(&minimal()).spec.expect("spec");
    assert_eq!(spec.cluster_ip.as_deref(), Some("None"));
    let port = &spec.ports.expect("ports")[0];
    assert_eq!((port.name.as_deref(), port.port), (Some("memcache"), 11211));
}

#[test]
fn a_budget_exists_from_two_replicas() {
    let mut object = minimal();
    object.spec.replicas = Some(2);
    let budget = desired_pdb(&object).and_then(|p| p.spec).expect("a budget");
    assert_eq!(budget.max_unavailable, Some(IntOrString::Int(1)));
    object.spec.replicas = Some(0);
    assert_eq!(desired_pdb(&object), None);
}

fn secured() -> Memcached {
    use crate::api::v1beta1::{AuthSpec, ClientAuth, GracefulShutdownSpec, TlsSpec};
    defaulted(
        "secured",
        MemcachedSpec {
            replicas: Some(2),
            tls: Some(TlsSpec {
                secret_name: Some("secured-tls".into()),
                plaintext_port: Some(11212),
                client_auth: Some(ClientAuth::Require),
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
    assert_eq!(secrets, ["secured-tls", "secured-auth"]);
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
    let sidecars = pod.init_containers.expect("init containers");
    // The certificate refresher, then the credentials reloader (the server requires both).
    assert_eq!(sidecars.len(), 2);
    assert_eq!(sidecars[1].name, "auth-reloader");
    assert_eq!(
        sidecars[1].args.clone().unwrap_or_default(),
        ["reload-auth", "--auth-file=/etc/memcached/auth/authfile"]
    );
    // It signals memcached: the pod's containers share one process namespace.
    assert_eq!(pod.share_process_namespace, Some(true));
    let refresher = &sidecars[0];
    assert_eq!(refresher.name, "cert-refresher");
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
            "--auth-file=/etc/memcached/auth/authfile"
        ]
    );
    assert_eq!(refresher.volume_mounts, pod.containers[0].volume_mounts);
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
    // its pid (the shell's, which it keeps) is where the hook reads it.
    assert_eq!(
        pod.containers[0].command.clone().unwrap_or_default(),
        [
            "/bin/sh",
            "-c",
            r#"echo $$ > /var/cache/memcached/memcached.pid; sleep 1; exec memcached "$@""#,
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

/// `secured()` with monitoring on.
fn monitored(auth: bool) -> Memcached {
    let mut object = secured();
    if !auth {
        object.spec.auth = None;
    }
    object.spec.monitoring = Some(crate::api::v1beta1::MonitoringSpec::default());
    object.spec = default_spec(&object.spec, &Defaults::default());
    object
}

fn sidecars_of(object: &Memcached) -> Vec<Container> {
    desired_statefulset(object, Platform::Kubernetes)
        .spec
        .and_then(|s| s.template.spec)
        .and_then(|pod| pod.init_containers)
        .unwrap_or_default()
}

#[test]
fn children_of_a_monitored_memcached_match_the_golden_files() {
    let object = monitored(true);
    golden(
        "monitored-statefulset",
        &desired_statefulset(&object, Platform::Kubernetes),
    );
    golden("monitored-service", &desired_service(&object));
}

#[test]
fn with_authentication_the_exporter_reads_through_the_stats_relay() {
    let object = monitored(true);
    let sidecars = sidecars_of(&object);
    let names: Vec<&str> = sidecars.iter().map(|c| c.name.as_str()).collect();
    assert_eq!(
        names,
        ["cert-refresher", "auth-reloader", "stats-relay", "exporter"]
    );
    let (relay, exporter) = (&sidecars[2], &sidecars[3]);
    assert_eq!(relay.restart_policy.as_deref(), Some("Always"));
    assert_eq!(exporter.restart_policy.as_deref(), Some("Always"));
    assert_eq!(
        relay.args.clone().unwrap_or_default(),
        [
            "relay-stats",
            "--listen=/run/stats-relay/stats.sock",
            "--auth-file=/etc/memcached/auth/authfile",
            "--port=11211",
            "--cert-dir=/etc/memcached/tls",
        ]
    );
    assert_eq!(
        exporter.args.clone().unwrap_or_default(),
        [
            "--web.listen-address=:9150",
            "--memcached.address=/run/stats-relay/stats.sock"
        ]
    );
    // The exporter sees the socket only, never the Secrets.
    let mounts: Vec<&str> = exporter
        .volume_mounts
        .iter()
        .flatten()
        .map(|m| m.mount_path.as_str())
        .collect();
    assert_eq!(mounts, ["/run/stats-relay"]);
    assert_eq!(
        exporter.image.as_deref(),
        Some(crate::operator::DEFAULT_EXPORTER_IMAGE)
    );
    assert_eq!(
        relay.image.as_deref(),
        Some(crate::operator::own_image().as_str())
    );
}

#[test]
fn without_authentication_the_exporter_speaks_tls_itself() {
    let object = monitored(false);
    let sidecars = sidecars_of(&object);
    let names: Vec<&str> = sidecars.iter().map(|c| c.name.as_str()).collect();
    assert_eq!(names, ["cert-refresher", "exporter"]);
    // clientAuth Require: the Secret's certificate is the exporter's client certificate.
    assert_eq!(
        sidecars[1].args.clone().unwrap_or_default(),
        [
            "--web.listen-address=:9150",
            "--memcached.address=127.0.0.1:11211",
            "--memcached.tls.enable",
            "--memcached.tls.insecure-skip-verify",
            "--memcached.tls.cert-file=/etc/memcached/tls/tls.crt",
            "--memcached.tls.key-file=/etc/memcached/tls/tls.key",
        ]
    );
    let mut plain = minimal();
    plain.spec.monitoring = Some(crate::api::v1beta1::MonitoringSpec {
        port: Some(9200),
        ..Default::default()
    });
    let sidecars = sidecars_of(&plain);
    assert_eq!(sidecars.len(), 1);
    assert_eq!(
        sidecars[0].args.clone().unwrap_or_default(),
        [
            "--web.listen-address=:9200",
            "--memcached.address=127.0.0.1:11211"
        ]
    );
    assert_eq!(sidecars[0].volume_mounts, None);
}

#[test]
fn the_metrics_port_is_on_the_service_and_open_to_the_metrics_sources_only() {
    use k8s_openapi::api::networking::v1::NetworkPolicyPeer;
    let mut object = monitored(true);
    let ports: Vec<(Option<String>, i32)> = desired_service(&object)
        .spec
        .and_then(|s| s.ports)
        .unwrap_or_default()
        .into_iter()
        .map(|p| (p.name, p.port))
        .collect();
    assert_eq!(
        ports,
        [
            (Some("memcache".into()), 11211),
            (Some("memcache-plain".into()), 11212),
            (Some("metrics".into()), 9150)
        ]
    );
    let clients = vec![NetworkPolicyPeer {
        ip_block: Some(k8s_openapi::api::networking::v1::IPBlock {
            cidr: "10.1.0.0/16".into(),
            except: None,
        }),
        ..NetworkPolicyPeer::default()
    }];
    let scrapers = vec![NetworkPolicyPeer {
        namespace_selector: Some(
            k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector {
                match_labels: Some(BTreeMap::from([(
                    "kubernetes.io/metadata.name".into(),
                    "monitoring".into(),
                )])),
                match_expressions: None,
            },
        ),
        ..NetworkPolicyPeer::default()
    }];
    object.spec.network_policy = Some(crate::api::v1beta1::NetworkPolicySpec {
        allowed_sources: Some(clients.clone()),
        metrics_sources: Some(scrapers.clone()),
    });
    let rules = network::desired_network_policy(&object)
        .and_then(|p| p.spec)
        .and_then(|s| s.ingress)
        .expect("ingress rules");
    assert_eq!(rules.len(), 2);
    assert_eq!(rules[0].from, Some(clients));
    assert_eq!(rules[1].from, Some(scrapers));
    let metrics: Vec<_> = rules[1]
        .ports
        .iter()
        .flatten()
        .map(|p| p.port.clone())
        .collect();
    assert_eq!(metrics, [Some(IntOrString::Int(9150))]);
}

#[test]
fn an_issuer_gets_a_certificate_for_every_server_s_names_into_the_tls_secret() {
    use crate::api::v1beta1::IssuerRef;
    assert!(certificate::desired_certificate(&secured()).is_none());
    let mut object = secured();
    object.spec.tls.as_mut().expect("TLS").issuer_ref = Some(IssuerRef {
        name: "cache-ca".into(),
        kind: None,
        group: None,
    });
    let certificate = certificate::desired_certificate(&object).expect("a Certificate");
    assert_eq!(certificate.metadata.name.as_deref(), Some("secured"));
    assert_eq!(certificate.metadata.labels, Some(labels(&object)));
    assert!(certificate.metadata.owner_references.is_some());
    let spec = certificate.spec;
    assert_eq!(spec.secret_name, "secured-tls");
    assert_eq!(
        (
            spec.issuer_ref.name.as_str(),
            spec.issuer_ref.kind.as_str(),
            spec.issuer_ref.group.as_str()
        ),
        ("cache-ca", "Issuer", "cert-manager.io")
    );
    assert!(
        spec.dns_names
            .contains(&"*.secured.default.svc".to_string()),
        "{:?}",
        spec.dns_names
    );
    assert!(
        spec.dns_names
            .contains(&"secured.default.svc.cluster.local".to_string())
    );
    // The sidecars present it as a client certificate.
    assert!(spec.usages.contains(&"client auth".to_string()));
    assert_eq!(spec.private_key.rotation_policy, "Always");
    let value =
        serde_json::to_value(certificate::desired_certificate(&object)).expect("serialises");
    assert_eq!(value["apiVersion"], "cert-manager.io/v1");
    assert_eq!(value["kind"], "Certificate");
}

#[test]
fn the_openshift_service_ca_is_asked_by_the_service_s_annotation() {
    let mut object = secured();
    assert_eq!(desired_service(&object).metadata.annotations, None);
    let tls = object.spec.tls.as_mut().expect("TLS");
    tls.openshift_service_ca = Some(true);
    tls.client_auth = Some(crate::api::v1beta1::ClientAuth::None);
    assert_eq!(
        desired_service(&object).metadata.annotations,
        Some(BTreeMap::from([(
            "service.beta.openshift.io/serving-cert-secret-name".to_string(),
            "secured-tls".to_string()
        )]))
    );
}

#[test]
fn a_service_monitor_scrapes_the_metrics_port_of_the_memcached_s_service() {
    let mut object = monitored(true);
    assert!(service_monitor::desired_service_monitor(&object).is_none());
    object
        .spec
        .monitoring
        .as_mut()
        .expect("monitoring")
        .service_monitor = Some(crate::api::v1beta1::ServiceMonitorSpec {
        interval: Some("30s".into()),
        scrape_timeout: None,
        labels: Some(BTreeMap::from([("release".into(), "prometheus".into())])),
    });
    let monitor = service_monitor::desired_service_monitor(&object).expect("a ServiceMonitor");
    let value = serde_json::to_value(&monitor).expect("serialises");
    assert_eq!(value["apiVersion"], "monitoring.coreos.com/v1");
    assert_eq!(value["kind"], "ServiceMonitor");
    assert_eq!(value["metadata"]["labels"]["release"], "prometheus");
    assert_eq!(
        value["spec"]["selector"]["matchLabels"],
        serde_json::to_value(selector_labels(&object)).expect("labels")
    );
    assert_eq!(
        value["spec"]["namespaceSelector"]["matchNames"],
        serde_json::json!(["default"])
    );
    assert_eq!(
        value["spec"]["endpoints"],
        serde_json::json!([{"port": "metrics", "path": "/metrics", "scheme": "http", "interval": "30s"}])
    );
}
