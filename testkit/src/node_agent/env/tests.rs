//! Tests the container environment: `$(VAR)` expansion, every `valueFrom` source, `envFrom`
//! and the Service variables.

use super::*;
use k8s_openapi::api::core::v1::{
    EnvVar, EnvVarSource, ObjectFieldSelector, PodSpec, SecretKeySelector, ServicePort, ServiceSpec,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

fn vars(pairs: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> {
    let map: BTreeMap<String, String> = pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    move |name| map.get(name).cloned()
}

#[test]
fn a_defined_reference_is_replaced_and_an_undefined_one_kept() {
    let lookup = vars(&[("A", "1")]);
    assert_eq!(expand("x$(A)y$(B)z", &lookup), "x1y$(B)z");
}

#[test]
fn a_double_dollar_escapes_a_reference() {
    let lookup = vars(&[("A", "1")]);
    assert_eq!(expand("$$(A) $$ $(A)", &lookup), "$(A) $ 1");
}

#[test]
fn an_unterminated_or_bare_dollar_is_kept() {
    let lookup = vars(&[("A", "1")]);
    assert_eq!(expand("$(A", &lookup), "$(A");
    assert_eq!(expand("a$b$", &lookup), "a$b$");
    assert_eq!(expand("é$é", &lookup), "é$é");
}

fn pod() -> Pod {
    Pod {
        metadata: ObjectMeta {
            name: Some("web-0".into()),
            namespace: Some("ns".into()),
            uid: Some("u-1".into()),
            labels: Some(BTreeMap::from([("app".into(), "web".into())])),
            ..ObjectMeta::default()
        },
        spec: Some(PodSpec {
            node_name: Some("node-a".into()),
            containers: vec![],
            ..PodSpec::default()
        }),
        ..Pod::default()
    }
}

fn field(name: &str, path: &str) -> EnvVar {
    EnvVar {
        name: name.into(),
        value_from: Some(EnvVarSource {
            field_ref: Some(ObjectFieldSelector {
                field_path: path.into(),
                ..ObjectFieldSelector::default()
            }),
            ..EnvVarSource::default()
        }),
        ..EnvVar::default()
    }
}

#[test]
fn field_refs_come_from_the_pod_and_later_values_expand_earlier_ones() {
    let container = Container {
        name: "main".into(),
        env: Some(vec![
            field("NAME", "metadata.name"),
            field("APP", "metadata.labels['app']"),
            field("IP", "status.podIP"),
            field("NODE", "spec.nodeName"),
            EnvVar {
                name: "URL".into(),
                value: Some("http://$(IP):80/$(NAME)/$(NOPE)".into()),
                ..EnvVar::default()
            },
        ]),
        ..Container::default()
    };
    let sources = EnvSources {
        pod_ip: "127.0.100.2".into(),
        ..EnvSources::default()
    };
    let env = container_env(&pod(), &container, &sources).unwrap();
    let get = |n: &str| env.iter().find(|(k, _)| k == n).map(|(_, v)| v.as_str());
    assert_eq!(get("NAME"), Some("web-0"));
    assert_eq!(get("APP"), Some("web"));
    assert_eq!(get("NODE"), Some("node-a"));
    assert_eq!(get("URL"), Some("http://127.0.100.2:80/web-0/$(NOPE)"));
}

#[test]
fn a_missing_secret_key_names_the_secret_key_and_variable() {
    let container = Container {
        name: "main".into(),
        env: Some(vec![EnvVar {
            name: "PASSWORD".into(),
            value_from: Some(EnvVarSource {
                secret_key_ref: Some(SecretKeySelector {
                    name: "creds".into(),
                    key: "password".into(),
                    optional: None,
                }),
                ..EnvVarSource::default()
            }),
            ..EnvVar::default()
        }]),
        ..Container::default()
    };
    let mut sources = EnvSources::default();
    sources.secrets.insert("creds".into(), Secret::default());
    let error = container_env(&pod(), &container, &sources).unwrap_err();
    assert_eq!(
        error.to_string(),
        "couldn't find key password in Secret \"creds\" (container \"main\", env \"PASSWORD\")"
    );
}

#[test]
fn a_resource_reference_without_a_limit_is_the_nodes_allocatable() {
    let container = Container {
        name: "main".into(),
        ..Container::default()
    };
    let field =
        |resource: &str, divisor: Option<&str>| k8s_openapi::api::core::v1::ResourceFieldSelector {
            resource: resource.into(),
            divisor: divisor
                .map(|d| k8s_openapi::apimachinery::pkg::api::resource::Quantity(d.into())),
            container_name: None,
        };
    let allocatable = BTreeMap::from([
        ("cpu".to_string(), "2".to_string()),
        ("memory".to_string(), "1024Mi".to_string()),
    ]);
    let value = |f| resource_value(&pod(), &container, &f, &allocatable);
    assert_eq!(value(field("limits.cpu", None)).as_deref(), Some("2"));
    assert_eq!(
        value(field("limits.memory", Some("1Mi"))).as_deref(),
        Some("1024")
    );
    assert_eq!(
        value(field("requests.cpu", Some("1m"))).as_deref(),
        Some("0")
    );
}

#[test]
fn the_kubernetes_service_gives_the_in_cluster_client_variables() {
    let service = Service {
        metadata: ObjectMeta {
            name: Some("kubernetes".into()),
            ..ObjectMeta::default()
        },
        spec: Some(ServiceSpec {
            cluster_ip: Some("127.0.96.1".into()),
            ports: Some(vec![ServicePort {
                name: Some("https".into()),
                port: 443,
                ..ServicePort::default()
            }]),
            ..ServiceSpec::default()
        }),
        ..Service::default()
    };
    let env = service_env(&[service]);
    let get = |n: &str| env.iter().find(|(k, _)| k == n).map(|(_, v)| v.as_str());
    assert_eq!(get("KUBERNETES_SERVICE_HOST"), Some("127.0.96.1"));
    assert_eq!(get("KUBERNETES_SERVICE_PORT"), Some("443"));
    assert_eq!(get("KUBERNETES_SERVICE_PORT_HTTPS"), Some("443"));
    assert_eq!(get("KUBERNETES_PORT"), Some("tcp://127.0.96.1:443"));
    assert_eq!(get("KUBERNETES_PORT_443_TCP_ADDR"), Some("127.0.96.1"));
}
