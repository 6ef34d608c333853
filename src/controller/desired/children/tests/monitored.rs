//! The children of a monitored Memcached, and of one whose certificate comes from an issuer.

use super::secured::secured;
use super::*;

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
        [
            "install-supervisor",
            "cert-refresher",
            "stats-relay",
            "exporter"
        ]
    );
    let (relay, exporter) = (&sidecars[2], &sidecars[3]);
    assert_eq!(relay.restart_policy.as_deref(), Some("Always"));
    assert_eq!(exporter.restart_policy.as_deref(), Some("Always"));
    assert_eq!(
        relay.args.clone().unwrap_or_default(),
        [
            "relay-stats",
            "--listen=/run/stats-relay/stats.sock",
            "--port=11211",
            "--auth-file=/etc/memcached/auth/authfile",
            "--tls",
            "--client-cert-dir=/etc/memcached/client-tls",
            "--health-port=9152",
        ]
    );
    // The refresher's probes answer on 9151, the relay's on the next port, the exporter's on
    // its metrics port.
    let probed = |container: &Container| {
        let get = container
            .liveness_probe
            .as_ref()
            .and_then(|p| p.http_get.clone());
        get.map(|get| (get.path, get.port))
    };
    assert_eq!(
        probed(relay),
        Some((
            Some("/healthz".into()),
            IntOrString::String("relay-health".into())
        ))
    );
    assert_eq!(
        relay.ports.clone().unwrap_or_default()[0].container_port,
        9152
    );
    assert_eq!(
        probed(exporter),
        Some((Some("/".into()), IntOrString::String("metrics".into())))
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
fn under_client_certificates_the_exporter_reads_through_the_relay_and_holds_no_key() {
    let object = monitored(false);
    let sidecars = sidecars_of(&object);
    let names: Vec<&str> = sidecars.iter().map(|c| c.name.as_str()).collect();
    assert_eq!(names, ["cert-refresher", "stats-relay", "exporter"]);
    let mounts = |sidecar: &Container| -> Vec<String> {
        sidecar
            .volume_mounts
            .iter()
            .flatten()
            .map(|m| m.mount_path.clone())
            .collect()
    };
    // clientAuth Require: the relay presents the sidecars' client certificate, and mounts
    // neither the server's Secret nor credentials.
    assert_eq!(
        sidecars[1].args.clone().unwrap_or_default(),
        [
            "relay-stats",
            "--listen=/run/stats-relay/stats.sock",
            "--port=11211",
            "--tls",
            "--client-cert-dir=/etc/memcached/client-tls",
            "--health-port=9152",
        ]
    );
    assert_eq!(
        mounts(&sidecars[1]),
        ["/etc/memcached/client-tls", "/run/stats-relay"]
    );
    // clientAuth Request without a client Secret: the relay presents no certificate.
    let mut request = monitored(false);
    let tls = request.spec.tls.as_mut().expect("TLS");
    tls.client_auth = Some(crate::api::v1beta1::ClientAuth::Request);
    tls.client_secret_name = None;
    let relay = &sidecars_of(&request)[1];
    assert_eq!(
        relay.args.clone().unwrap_or_default(),
        [
            "relay-stats",
            "--listen=/run/stats-relay/stats.sock",
            "--port=11211",
            "--tls",
            "--health-port=9152",
        ]
    );
    assert_eq!(mounts(relay), ["/run/stats-relay"]);
    assert_eq!(
        sidecars[2].args.clone().unwrap_or_default(),
        [
            "--web.listen-address=:9150",
            "--memcached.address=/run/stats-relay/stats.sock"
        ]
    );
    assert_eq!(mounts(&sidecars[2]), ["/run/stats-relay"]);
    // clientAuth None: the exporter speaks TLS without a certificate, and mounts no Secret,
    // so it cannot read the server's key.
    let mut no_client_auth = monitored(false);
    let tls = no_client_auth.spec.tls.as_mut().expect("TLS");
    tls.client_auth = Some(crate::api::v1beta1::ClientAuth::None);
    tls.client_secret_name = None;
    let sidecars = sidecars_of(&no_client_auth);
    assert_eq!(
        sidecars[1].args.clone().unwrap_or_default(),
        [
            "--web.listen-address=:9150",
            "--memcached.address=127.0.0.1:11211",
            "--memcached.tls.enable",
            "--memcached.tls.insecure-skip-verify",
        ]
    );
    assert_eq!(mounts(&sidecars[1]), Vec::<String>::new());
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
fn only_the_exporters_port_is_scraped_where_no_sidecar_of_the_operator_runs() {
    let mut plain = minimal();
    plain.spec.monitoring = Some(crate::api::v1beta1::MonitoringSpec::default());
    assert_eq!(scraped_ports(&plain), [("metrics", 9150)]);
    plain.spec.monitoring = None;
    assert_eq!(scraped_ports(&plain), []);
}

/// The exporter's metrics port, the refresher's and the relay's probe ports, which serve
/// their metrics too, and the supervisor's metrics port on memcached's container.
#[test]
fn the_scraped_ports_are_on_the_service_and_open_to_the_metrics_sources_only() {
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
            (Some("metrics".into()), 9150),
            (Some("refresh-health".into()), 9151),
            (Some("relay-health".into()), 9152),
            (Some("supervisor".into()), 9153)
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
    assert_eq!(
        metrics,
        [9150, 9151, 9152, 9153].map(|port| Some(IntOrString::Int(port)))
    );
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
    // A server certificate only: the sidecars have one of their own.
    assert_eq!(
        spec.usages,
        ["digital signature", "key encipherment", "server auth"]
    );
    assert_eq!(spec.private_key.rotation_policy, "Always");
    let value =
        serde_json::to_value(certificate::desired_certificate(&object)).expect("serialises");
    assert_eq!(value["apiVersion"], "cert-manager.io/v1");
    assert_eq!(value["kind"], "Certificate");
    assert!(value["spec"].get("commonName").is_none(), "{value}");
}

#[test]
fn under_client_certificates_an_issuer_also_issues_the_sidecars_their_own() {
    use crate::api::v1beta1::{ClientAuth, IssuerRef};
    let mut object = secured();
    let tls = object.spec.tls.as_mut().expect("TLS");
    tls.issuer_ref = Some(IssuerRef {
        name: "cache-ca".into(),
        kind: None,
        group: None,
    });
    tls.client_secret_name = None;
    let client = certificate::desired_client_certificate(&object).expect("a client Certificate");
    assert_eq!(client.metadata.name.as_deref(), Some("secured-client"));
    assert!(client.metadata.owner_references.is_some());
    assert_eq!(client.spec.secret_name, "secured-client-tls");
    assert_eq!(client.spec.common_name.as_deref(), Some("secured-client"));
    assert_eq!(
        client.spec.usages,
        ["digital signature", "key encipherment", "client auth"]
    );
    assert_eq!(client.spec.issuer_ref.name, "cache-ca");
    let value = serde_json::to_value(&client).expect("serialises");
    assert!(value["spec"].get("dnsNames").is_none(), "{value}");
    // The refresher and the relay mount it; memcached does not.
    let pod = desired_statefulset(&object, Platform::Kubernetes)
        .spec
        .and_then(|s| s.template.spec)
        .expect("a pod spec");
    let secrets: Vec<String> = pod
        .volumes
        .iter()
        .flatten()
        .filter_map(|v| v.secret.as_ref()?.secret_name.clone())
        .collect();
    assert!(
        secrets.contains(&"secured-client-tls".to_string()),
        "{secrets:?}"
    );
    let memcached_mounts: Vec<&str> = pod.containers[0]
        .volume_mounts
        .iter()
        .flatten()
        .map(|m| m.mount_path.as_str())
        .collect();
    assert!(!memcached_mounts.contains(&"/etc/memcached/client-tls"));
    // A named Secret is used as given.
    object.spec.tls.as_mut().expect("TLS").client_secret_name = Some("sidecars".into());
    let client = certificate::desired_client_certificate(&object).expect("a client Certificate");
    assert_eq!(client.spec.secret_name, "sidecars");
    // No client certificate asked for, or no issuer: none.
    object.spec.tls.as_mut().expect("TLS").client_auth = Some(ClientAuth::None);
    object.spec.tls.as_mut().expect("TLS").client_secret_name = None;
    assert!(certificate::desired_client_certificate(&object).is_none());
    assert!(certificate::desired_client_certificate(&secured()).is_none());
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
fn a_service_monitor_scrapes_the_exporter_and_the_sidecars_on_the_memcached_s_service() {
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
        serde_json::json!(["metrics", "refresh-health", "relay-health", "supervisor"].map(
            |port| serde_json::json!({"port": port, "path": "/metrics", "scheme": "http", "interval": "30s"})
        ))
    );
}
