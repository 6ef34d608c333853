//! Computes a container's environment and expands `$(VAR)` references in its env values,
//! command and args exactly as the kubelet does.
//!
//! Pure: the Secrets, ConfigMaps and Services it reads from are fetched by the caller and
//! passed in ([`EnvSources`]). The order is the kubelet's: service variables, then `envFrom`
//! in order, then `env` in order, each `env` value expanded against what came before it.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{ConfigMap, Container, Pod, Secret, Service};

/// Why a container's environment cannot be made (the kubelet reports these as
/// `CreateContainerConfigError`).
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum EnvError {
    /// A referenced Secret or ConfigMap does not exist (and the reference is not optional).
    #[error("{kind} {name:?} not found (container {container:?}, env {variable:?})")]
    MissingObject {
        /// `secret` or `configmap`.
        kind: &'static str,
        /// Its name.
        name: String,
        /// The container.
        container: String,
        /// The variable, or `envFrom`.
        variable: String,
    },
    /// A referenced key is absent (and the reference is not optional).
    #[error(
        "couldn't find key {key} in {kind} {name:?} (container {container:?}, env {variable:?})"
    )]
    MissingKey {
        /// `Secret` or `ConfigMap`.
        kind: &'static str,
        /// Its name.
        name: String,
        /// The key.
        key: String,
        /// The container.
        container: String,
        /// The variable.
        variable: String,
    },
    /// A fieldRef or resourceFieldRef names a field the kubelet does not support.
    #[error("container {container:?}, env {variable:?}: unsupported field {field:?}")]
    UnsupportedField {
        /// The container.
        container: String,
        /// The variable.
        variable: String,
        /// The field path or resource.
        field: String,
    },
}

/// What a container's environment is made from, besides the pod itself.
#[derive(Clone, Debug, Default)]
pub struct EnvSources {
    /// Secrets of the pod's namespace, by name.
    pub secrets: BTreeMap<String, Secret>,
    /// ConfigMaps of the pod's namespace, by name.
    pub config_maps: BTreeMap<String, ConfigMap>,
    /// Service variables (`KUBERNETES_SERVICE_HOST` and the rest), see [`service_env`].
    pub services: Vec<(String, String)>,
    /// The pod's IP.
    pub pod_ip: String,
    /// The node's IP.
    pub host_ip: String,
    /// The node's allocatable resources (`cpu`, `memory`, ...), for limits a container does
    /// not set.
    pub allocatable: BTreeMap<String, String>,
}

/// Expands `$(VAR)` in `input` from `lookup` as the kubelet's `expansion.Expand`: `$$` is a
/// literal `$`, an undefined or unterminated reference stays as written.
pub fn expand(input: &str, lookup: &dyn Fn(&str) -> Option<String>) -> String {
    let bytes = input.as_bytes();
    let mut out = String::with_capacity(input.len());
    let mut checkpoint = 0;
    let mut cursor = 0;
    while cursor < bytes.len() {
        if bytes[cursor] == b'$' && cursor + 1 < bytes.len() {
            out.push_str(&input[checkpoint..cursor]);
            let rest = &input[cursor + 1..];
            let advance = match rest.as_bytes()[0] {
                b'$' => {
                    out.push('$');
                    1
                }
                b'(' => match rest.find(')') {
                    Some(end) => {
                        let name = &rest[1..end];
                        match lookup(name) {
                            Some(value) => out.push_str(&value),
                            None => {
                                out.push_str("$(");
                                out.push_str(name);
                                out.push(')');
                            }
                        }
                        end + 1
                    }
                    None => {
                        out.push_str("$(");
                        1
                    }
                },
                _ => {
                    // `$` then any other character: both kept (the character is a whole
                    // UTF-8 sequence, copied from the checkpoint below).
                    out.push('$');
                    0
                }
            };
            cursor += advance;
            checkpoint = cursor + 1;
        }
        cursor += 1;
    }
    if checkpoint < input.len() {
        out.push_str(&input[checkpoint..]);
    }
    out
}

/// The variables the kubelet gives every container for Services: for each Service with a
/// cluster IP (the `kubernetes` Service of `default` always, the pod's namespace's ones when
/// `enableServiceLinks` is not false), `NAME_SERVICE_HOST`, `NAME_SERVICE_PORT`,
/// `NAME_SERVICE_PORT_PORTNAME` and the Docker-link `NAME_PORT*` variables.
pub fn service_env(services: &[Service]) -> Vec<(String, String)> {
    let mut env = Vec::new();
    for service in services {
        let Some(spec) = &service.spec else { continue };
        let Some(ip) = spec
            .cluster_ip
            .as_deref()
            .filter(|ip| *ip != "None" && !ip.is_empty())
        else {
            continue;
        };
        let name = service
            .metadata
            .name
            .as_deref()
            .unwrap_or_default()
            .to_uppercase()
            .replace('-', "_");
        let ports = spec.ports.as_deref().unwrap_or_default();
        env.push((format!("{name}_SERVICE_HOST"), ip.to_string()));
        let Some(first) = ports.first() else { continue };
        env.push((format!("{name}_SERVICE_PORT"), first.port.to_string()));
        for port in ports {
            if let Some(port_name) = &port.name {
                env.push((
                    format!(
                        "{name}_SERVICE_PORT_{}",
                        port_name.to_uppercase().replace('-', "_")
                    ),
                    port.port.to_string(),
                ));
            }
        }
        let protocol = |p: &k8s_openapi::api::core::v1::ServicePort| {
            p.protocol.clone().unwrap_or_else(|| "TCP".to_string())
        };
        env.push((
            format!("{name}_PORT"),
            format!("{}://{ip}:{}", protocol(first).to_lowercase(), first.port),
        ));
        for port in ports {
            let proto = protocol(port);
            let prefix = format!("{name}_PORT_{}_{}", port.port, proto.to_uppercase());
            env.push((
                prefix.clone(),
                format!("{}://{ip}:{}", proto.to_lowercase(), port.port),
            ));
            env.push((format!("{prefix}_PROTO"), proto.to_lowercase()));
            env.push((format!("{prefix}_PORT"), port.port.to_string()));
            env.push((format!("{prefix}_ADDR"), ip.to_string()));
        }
    }
    env
}

/// The environment of `container` in `pod`, in order, values expanded.
pub fn container_env(
    pod: &Pod,
    container: &Container,
    sources: &EnvSources,
) -> Result<Vec<(String, String)>, EnvError> {
    let mut env: Vec<(String, String)> = sources.services.clone();
    let set = |env: &mut Vec<(String, String)>, name: String, value: String| {
        env.retain(|(n, _)| *n != name);
        env.push((name, value));
    };
    let container_name = container.name.clone();
    for from in container.env_from.as_deref().unwrap_or_default() {
        let prefix = from.prefix.clone().unwrap_or_default();
        if let Some(source) = &from.config_map_ref {
            match sources.config_maps.get(&source.name) {
                Some(map) => {
                    for (key, value) in map.data.iter().flatten() {
                        set(&mut env, format!("{prefix}{key}"), value.clone());
                    }
                }
                None if source.optional == Some(true) => {}
                None => {
                    return Err(EnvError::MissingObject {
                        kind: "configmap",
                        name: source.name.clone(),
                        container: container_name,
                        variable: "envFrom".to_string(),
                    });
                }
            }
        }
        if let Some(source) = &from.secret_ref {
            match sources.secrets.get(&source.name) {
                Some(secret) => {
                    for (key, value) in secret.data.iter().flatten() {
                        set(
                            &mut env,
                            format!("{prefix}{key}"),
                            String::from_utf8_lossy(&value.0).into_owned(),
                        );
                    }
                }
                None if source.optional == Some(true) => {}
                None => {
                    return Err(EnvError::MissingObject {
                        kind: "secret",
                        name: source.name.clone(),
                        container: container_name,
                        variable: "envFrom".to_string(),
                    });
                }
            }
        }
    }
    for var in container.env.as_deref().unwrap_or_default() {
        let value = match (&var.value, &var.value_from) {
            (Some(value), _) => {
                let defined = env.clone();
                expand(value, &|name| {
                    defined
                        .iter()
                        .rev()
                        .find(|(n, _)| n == name)
                        .map(|(_, v)| v.clone())
                })
            }
            (None, Some(from)) => {
                let missing_field = |field: &str| EnvError::UnsupportedField {
                    container: container_name.clone(),
                    variable: var.name.clone(),
                    field: field.to_string(),
                };
                if let Some(field) = &from.field_ref {
                    field_value(pod, &field.field_path, sources)
                        .ok_or_else(|| missing_field(&field.field_path))?
                } else if let Some(resource) = &from.resource_field_ref {
                    resource_value(pod, container, resource, &sources.allocatable)
                        .ok_or_else(|| missing_field(&resource.resource))?
                } else if let Some(key) = &from.secret_key_ref {
                    let value = sources.secrets.get(&key.name).map(|secret| {
                        secret
                            .data
                            .as_ref()
                            .and_then(|d| d.get(&key.key))
                            .map(|value| String::from_utf8_lossy(&value.0).into_owned())
                    });
                    let reference = KeyRef {
                        kinds: ("Secret", "secret"),
                        name: &key.name,
                        key: &key.key,
                        optional: key.optional == Some(true),
                    };
                    match reference.value(value, &container_name, &var.name)? {
                        Some(value) => value,
                        None => continue,
                    }
                } else if let Some(key) = &from.config_map_key_ref {
                    let value = sources
                        .config_maps
                        .get(&key.name)
                        .map(|map| map.data.as_ref().and_then(|d| d.get(&key.key)).cloned());
                    let reference = KeyRef {
                        kinds: ("ConfigMap", "configmap"),
                        name: &key.name,
                        key: &key.key,
                        optional: key.optional == Some(true),
                    };
                    match reference.value(value, &container_name, &var.name)? {
                        Some(value) => value,
                        None => continue,
                    }
                } else {
                    String::new()
                }
            }
            (None, None) => String::new(),
        };
        set(&mut env, var.name.clone(), value);
    }
    Ok(env)
}

/// A `secretKeyRef` or `configMapKeyRef`: which key of which object, and whether it may be
/// missing.
struct KeyRef<'a> {
    /// The kind as the two messages spell it: `Secret`/`secret`, `ConfigMap`/`configmap`.
    kinds: (&'static str, &'static str),
    name: &'a str,
    key: &'a str,
    optional: bool,
}

impl KeyRef<'_> {
    /// The selected value, from what the lookup found: `None` when the object is missing,
    /// `Some(None)` when the key is. `Ok(None)` means an optional reference selects nothing.
    fn value(
        &self,
        found: Option<Option<String>>,
        container: &str,
        variable: &str,
    ) -> Result<Option<String>, EnvError> {
        match found {
            Some(Some(value)) => Ok(Some(value)),
            _ if self.optional => Ok(None),
            Some(None) => Err(EnvError::MissingKey {
                kind: self.kinds.0,
                name: self.name.to_string(),
                key: self.key.to_string(),
                container: container.to_string(),
                variable: variable.to_string(),
            }),
            None => Err(EnvError::MissingObject {
                kind: self.kinds.1,
                name: self.name.to_string(),
                container: container.to_string(),
                variable: variable.to_string(),
            }),
        }
    }
}

/// The value of a downward API field path of `pod`, or `None` for a path the kubelet does not
/// support.
pub fn field_value(pod: &Pod, path: &str, sources: &EnvSources) -> Option<String> {
    let meta = &pod.metadata;
    let spec = pod.spec.as_ref();
    let keyed = |prefix: &str, map: Option<&BTreeMap<String, String>>| {
        let key = path
            .strip_prefix(prefix)?
            .strip_prefix("['")?
            .strip_suffix("']")?;
        Some(map.and_then(|m| m.get(key)).cloned().unwrap_or_default())
    };
    Some(match path {
        "metadata.name" => meta.name.clone().unwrap_or_default(),
        "metadata.namespace" => meta.namespace.clone().unwrap_or_default(),
        "metadata.uid" => meta.uid.clone().unwrap_or_default(),
        "spec.nodeName" => spec.and_then(|s| s.node_name.clone()).unwrap_or_default(),
        "spec.serviceAccountName" => spec
            .and_then(|s| s.service_account_name.clone())
            .unwrap_or_default(),
        "status.podIP" | "status.podIPs" => sources.pod_ip.clone(),
        "status.hostIP" | "status.hostIPs" => sources.host_ip.clone(),
        "metadata.labels" => format_map(meta.labels.as_ref()),
        "metadata.annotations" => format_map(meta.annotations.as_ref()),
        _ if path.starts_with("metadata.labels[") => {
            keyed("metadata.labels", meta.labels.as_ref())?
        }
        _ if path.starts_with("metadata.annotations[") => {
            keyed("metadata.annotations", meta.annotations.as_ref())?
        }
        _ => return None,
    })
}

/// `key="value"` lines, sorted, as the downward API writes a whole map.
fn format_map(map: Option<&BTreeMap<String, String>>) -> String {
    map.into_iter()
        .flatten()
        .map(|(k, v)| format!("{k}={v:?}"))
        .collect::<Vec<_>>()
        .join("\n")
}

/// The value of a resourceFieldRef as the kubelet computes it: the container's limit (for
/// `requests.*`, its request, 0 when unset), divided by the divisor and rounded up; an unset
/// limit is the node's allocatable amount (`allocatable`, by resource name).
pub fn resource_value(
    pod: &Pod,
    container: &Container,
    field: &k8s_openapi::api::core::v1::ResourceFieldSelector,
    allocatable: &BTreeMap<String, String>,
) -> Option<String> {
    let target = match &field.container_name {
        Some(name) if !name.is_empty() && *name != container.name => pod
            .spec
            .as_ref()?
            .containers
            .iter()
            .find(|c| c.name == *name)?,
        _ => container,
    };
    let resources = target.resources.clone().unwrap_or_default();
    let value = match field.resource.split_once('.') {
        Some(("limits", name)) => {
            let set = resources.limits.as_ref().and_then(|l| l.get(name));
            match set {
                Some(limit) => quantity(&limit.0)?,
                None => quantity(allocatable.get(name)?)?,
            }
        }
        Some(("requests", name)) => {
            let set = resources.requests.as_ref().and_then(|r| r.get(name));
            match set {
                Some(request) => quantity(&request.0)?,
                None => 0.0,
            }
        }
        _ => return None,
    };
    let divisor = match &field.divisor {
        Some(d) => quantity(&d.0)?,
        None => 1.0,
    };
    if divisor <= 0.0 {
        return None;
    }
    Some(format!("{}", (value / divisor).ceil() as i64))
}

/// A Kubernetes quantity as a number (`500m` = 0.5, `64Mi` = 67108864).
fn quantity(text: &str) -> Option<f64> {
    let suffixes: [(&str, f64); 13] = [
        ("Ki", 1024.0),
        ("Mi", 1024.0 * 1024.0),
        ("Gi", 1024.0 * 1024.0 * 1024.0),
        ("Ti", 1024f64.powi(4)),
        ("Pi", 1024f64.powi(5)),
        ("Ei", 1024f64.powi(6)),
        ("m", 0.001),
        ("k", 1e3),
        ("M", 1e6),
        ("G", 1e9),
        ("T", 1e12),
        ("P", 1e15),
        ("E", 1e18),
    ];
    for (suffix, factor) in suffixes {
        if let Some(number) = text.strip_suffix(suffix) {
            return number.parse::<f64>().ok().map(|n| n * factor);
        }
    }
    text.parse().ok()
}

#[cfg(test)]
mod tests;
