//! Describes how the OpenShift console shows Memcached objects: one owned-CRD entry per served
//! version, with spec descriptors that make a usable form and status descriptors for the
//! details page.
//!
//! Paths are checked against the CRD's schema by a test, so a renamed field cannot leave a
//! descriptor pointing nowhere.

use super::csv::{ApiResourceReference, CrdDescription, Descriptor};
use memcached_operator::api;

const UI: &str = "urn:alm:descriptor:com.tectonic.ui:";
/// Marks a field to show under "Advanced configuration".
const ADVANCED: &str = "urn:alm:descriptor:com.tectonic.ui:advanced";

fn descriptor(path: &str, display_name: &str, description: &str, widgets: &[&str]) -> Descriptor {
    Descriptor {
        path: path.to_string(),
        display_name: display_name.to_string(),
        description: description.to_string(),
        x_descriptors: widgets.iter().map(|w| w.to_string()).collect(),
    }
}

fn ui(widget: &str) -> String {
    format!("{UI}{widget}")
}

/// Kinds the operator creates for each Memcached, Events about it included (listing them
/// also tells `operator-sdk bundle validate` that the `events.k8s.io` permission is for
/// `events.k8s.io/v1` Events, not the removed v1beta1 ones).
fn resources() -> Vec<ApiResourceReference> {
    [
        ("StatefulSet", "v1"),
        ("Service", "v1"),
        ("PodDisruptionBudget", "v1"),
        ("NetworkPolicy", "v1"),
        ("Certificate", "v1"),
        ("ServiceMonitor", "v1"),
        ("Event", "v1"),
    ]
    .iter()
    .map(|(kind, version)| ApiResourceReference {
        kind: kind.to_string(),
        name: String::new(),
        version: version.to_string(),
    })
    .collect()
}

fn conditions() -> Descriptor {
    descriptor(
        "conditions",
        "Conditions",
        "Available, Progressing and Degraded.",
        &["urn:alm:descriptor:io.kubernetes.conditions"],
    )
}

/// The owned-CRD entry of v1beta1, the storage version.
pub fn v1beta1() -> CrdDescription {
    let (pod_count, number, text, hidden) =
        (ui("podCount"), ui("number"), ui("text"), ui("hidden"));
    // scorecard's olm-spec-descriptors wants a descriptor for every top-level field of the
    // alm-examples, so each group of fields has one of its own, as a field group.
    let group = |name: &str| format!("{UI}fieldGroup:{name}");
    let spec = vec![
        descriptor(
            "memcached",
            "memcached",
            "How each memcached server runs: memory, connections, threads, item size.",
            &[&group("memcached")],
        ),
        descriptor(
            "service",
            "Service",
            "The headless Service that names each server.",
            &[&group("service")],
        ),
        descriptor(
            "podDisruptionBudget",
            "Disruption budget",
            "How many servers a voluntary disruption may take down at once.",
            &[&group("podDisruptionBudget"), ADVANCED],
        ),
        descriptor(
            "replicas",
            "Replicas",
            "Number of memcached servers (0 to 64).",
            &[&pod_count],
        ),
        descriptor(
            "memcached.memoryLimitMB",
            "Item memory (MiB)",
            "Memory memcached uses for items, per server.",
            &[&number],
        ),
        descriptor(
            "memcached.maxConnections",
            "Max connections",
            "Most simultaneous client connections per server.",
            &[&number],
        ),
        descriptor(
            "memcached.threads",
            "Threads",
            "Worker threads per server.",
            &[&number],
        ),
        descriptor(
            "memcached.maxItemSize",
            "Max item size",
            "Largest item, e.g. 1m or 512k; at most half the item memory.",
            &[&text],
        ),
        descriptor(
            "service.port",
            "Port",
            "The port clients connect to.",
            &[&number],
        ),
        descriptor(
            "resources",
            "Resources",
            "CPU and memory of each memcached container.",
            &[&ui("resourceRequirements")],
        ),
        descriptor(
            "image",
            "Image",
            "memcached image; defaults to the one the operator was released with.",
            &[&text, ADVANCED],
        ),
        descriptor(
            "memcached.verbosity",
            "Verbosity",
            "memcached logging detail: 0, 1 or 2.",
            &[&number, ADVANCED],
        ),
        descriptor(
            "memcached.extraArgs",
            "Extra arguments",
            "Further memcached flags.",
            &[&hidden],
        ),
        descriptor(
            "podDisruptionBudget.maxUnavailable",
            "Max unavailable",
            "How many servers a voluntary disruption may take down: a number or a percentage.",
            &[&text, ADVANCED],
        ),
        descriptor(
            "priorityClassName",
            "Priority class",
            "PriorityClass of the memcached pods.",
            &[&text, ADVANCED],
        ),
        descriptor(
            "affinity",
            "Affinity",
            "Scheduling constraints of the memcached pods.",
            &[&group("affinity"), ADVANCED],
        ),
        descriptor(
            "affinity.nodeAffinity",
            "Node affinity",
            "Nodes the memcached pods prefer or require.",
            &[&ui("nodeAffinity"), ADVANCED],
        ),
        descriptor(
            "affinity.podAntiAffinity",
            "Pod anti-affinity",
            "Pods the memcached pods avoid.",
            &[&ui("podAntiAffinity"), ADVANCED],
        ),
        descriptor(
            "nodeSelector",
            "Node selector",
            "Node labels the pods must run on.",
            &[&hidden],
        ),
        descriptor(
            "tolerations",
            "Tolerations",
            "Tolerations of the pods.",
            &[&hidden],
        ),
        descriptor(
            "topologySpreadConstraints",
            "Topology spread constraints",
            "How the pods spread across topology domains.",
            &[&hidden],
        ),
        descriptor(
            "tls",
            "TLS",
            "TLS on the client port, with the certificate from a Secret.",
            &[&group("tls")],
        ),
        descriptor(
            "tls.secretName",
            "TLS Secret",
            "The Secret with tls.crt and tls.key (and ca.crt for client certificates).",
            &["urn:alm:descriptor:io.kubernetes:Secret"],
        ),
        descriptor(
            "tls.clientAuth",
            "Client certificates",
            "None, Request or Require a client certificate signed by the Secret's ca.crt.",
            &[
                &ui("select:None"),
                &ui("select:Request"),
                &ui("select:Require"),
            ],
        ),
        descriptor(
            "tls.clientSecretName",
            "Sidecars' client certificate",
            "With client certificates: the Secret (tls.crt, tls.key) the certificate refresher and the stats relay present, never the server's key. Required with Require unless the cert-manager issuer issues it.",
            &["urn:alm:descriptor:io.kubernetes:Secret", ADVANCED],
        ),
        descriptor(
            "tls.plaintextPort",
            "Plaintext port",
            "A second port for plaintext clients beside TLS, while clients move over.",
            &[&number, ADVANCED],
        ),
        descriptor(
            "tls.issuerRef",
            "cert-manager issuer",
            "A cert-manager Issuer of this namespace (or an issuer the cluster admin allows) that issues the certificate into the Secret.",
            &[ADVANCED],
        ),
        descriptor(
            "tls.openShiftServiceCA",
            "OpenShift service CA",
            "OpenShift's service CA issues the certificate into the Secret.",
            &[&ui("booleanSwitch"), ADVANCED],
        ),
        descriptor(
            "auth",
            "Authentication",
            "Clients authenticate with a user and password from a Secret.",
            &[&group("auth")],
        ),
        descriptor(
            "auth.secretName",
            "Credentials Secret",
            "The Secret whose authfile key holds user:password lines.",
            &["urn:alm:descriptor:io.kubernetes:Secret"],
        ),
        descriptor(
            "networkPolicy",
            "Network policy",
            "A NetworkPolicy: only the allowed sources reach memcached's ports.",
            &[&group("networkPolicy"), ADVANCED],
        ),
        descriptor(
            "monitoring",
            "Monitoring",
            "memcached_exporter beside every server, on the Service's metrics port.",
            &[&group("monitoring")],
        ),
        descriptor(
            "monitoring.port",
            "Metrics port",
            "The port the exporter serves /metrics on.",
            &[&number, ADVANCED],
        ),
        descriptor(
            "monitoring.serviceMonitor",
            "ServiceMonitor",
            "A ServiceMonitor for the Prometheus Operator, where its API is served.",
            &[ADVANCED],
        ),
        descriptor(
            "monitoring.rules",
            "Alerting rules",
            "The servers' alerting rules as a PrometheusRule, where its API is served; on by default.",
            &[ADVANCED],
        ),
        descriptor(
            "gracefulShutdown",
            "Graceful shutdown",
            "How long a stopping server keeps serving, and its grace period.",
            &[&group("gracefulShutdown"), ADVANCED],
        ),
        descriptor(
            "gracefulShutdown.preStopDelaySeconds",
            "preStop delay (s)",
            "Seconds a stopping server keeps serving before memcached is signalled.",
            &[&number, ADVANCED],
        ),
        descriptor(
            "gracefulShutdown.terminationGracePeriodSeconds",
            "Grace period (s)",
            "Seconds from the stop to the kill; longer than the preStop delay.",
            &[&number, ADVANCED],
        ),
    ];
    let status = vec![
        conditions(),
        descriptor(
            "readyReplicas",
            "Ready servers",
            "memcached servers ready to take traffic.",
            &["urn:alm:descriptor:text"],
        ),
        descriptor(
            "replicas",
            "Servers",
            "memcached servers that exist.",
            &["urn:alm:descriptor:text"],
        ),
        descriptor(
            "servers",
            "Server addresses",
            "host:port of each ready server, in pod order.",
            &["urn:alm:descriptor:text"],
        ),
        descriptor(
            "observedGeneration",
            "Observed generation",
            "The generation of the spec this status describes.",
            &[&hidden],
        ),
        descriptor(
            "selector",
            "Selector",
            "Label selector of the servers.",
            &[&hidden],
        ),
        descriptor(
            "tls",
            "TLS",
            "The TLS every server runs with: its Secret, client certificates, plaintext port.",
            &["urn:alm:descriptor:text"],
        ),
        descriptor(
            "auth",
            "Authentication",
            "The credentials Secret every server runs with.",
            &["urn:alm:descriptor:text"],
        ),
    ];
    CrdDescription {
        name: api::CRD_NAME.to_string(),
        version: api::STORAGE_VERSION.to_string(),
        kind: api::KIND.to_string(),
        display_name: "Memcached".to_string(),
        description: "A memcached cluster: a StatefulSet of memcached servers behind a Service, \
                      with a PodDisruptionBudget."
            .to_string(),
        resources: resources(),
        spec_descriptors: spec,
        status_descriptors: status,
    }
}

/// The owned-CRD entry of v1alpha1, the deprecated version.
pub fn v1alpha1() -> CrdDescription {
    CrdDescription {
        name: api::CRD_NAME.to_string(),
        version: api::DEPRECATED_VERSION.to_string(),
        kind: api::KIND.to_string(),
        display_name: "Memcached (deprecated)".to_string(),
        description: "A memcached cluster, in the deprecated v1alpha1 shape; use v1beta1."
            .to_string(),
        resources: resources(),
        spec_descriptors: vec![
            descriptor(
                "size",
                "Size",
                "Number of memcached servers (0 to 64).",
                &[&ui("podCount")],
            ),
            descriptor(
                "containerPort",
                "Port",
                "The port memcached listens on.",
                &[&ui("number")],
            ),
        ],
        status_descriptors: vec![conditions()],
    }
}

/// The owned-CRD entries, one per served version, oldest first.
pub fn owned() -> Vec<CrdDescription> {
    vec![v1alpha1(), v1beta1()]
}

#[cfg(test)]
mod tests {
    use serde_json::Value;

    use super::*;

    /// The OpenAPI schema of `spec` or `status` of a version of the CRD.
    fn schema(version: &str, root: &str) -> Value {
        let crd = api::crd().expect("the CRD builds");
        let v = crd
            .spec
            .versions
            .iter()
            .find(|v| v.name == version)
            .expect("version served");
        let schema = serde_json::to_value(&v.schema).expect("schema serializes");
        schema["openAPIV3Schema"]["properties"][root].clone()
    }

    fn has_path(mut schema: &Value, path: &str) -> bool {
        for part in path.split('.') {
            match schema.get("properties").and_then(|p| p.get(part)) {
                Some(next) => schema = next,
                None => return false,
            }
        }
        true
    }

    #[test]
    fn every_descriptor_names_a_field_of_its_version() {
        for owned in owned() {
            let spec = schema(&owned.version, "spec");
            let status = schema(&owned.version, "status");
            for d in &owned.spec_descriptors {
                assert!(
                    has_path(&spec, &d.path),
                    "{} spec.{}",
                    owned.version,
                    d.path
                );
            }
            for d in &owned.status_descriptors {
                assert!(
                    has_path(&status, &d.path),
                    "{} status.{}",
                    owned.version,
                    d.path
                );
            }
        }
    }

    /// What scorecard's olm-spec-descriptors checks: every top-level field of a version's spec
    /// has a descriptor whose path is that field itself (one for a field inside it is not
    /// enough).
    #[test]
    fn every_top_level_spec_field_of_every_version_has_its_own_descriptor() {
        for owned in owned() {
            let spec = schema(&owned.version, "spec");
            let described: Vec<&str> = owned
                .spec_descriptors
                .iter()
                .map(|d| d.path.as_str())
                .collect();
            for field in spec["properties"].as_object().expect("properties").keys() {
                assert!(
                    described.contains(&field.as_str()),
                    "{}: spec.{field} has no descriptor of its own",
                    owned.version
                );
            }
        }
    }

    #[test]
    fn every_descriptor_has_a_widget_and_a_label() {
        for owned in owned() {
            for d in owned
                .spec_descriptors
                .iter()
                .chain(&owned.status_descriptors)
            {
                assert!(!d.x_descriptors.is_empty(), "{}", d.path);
                assert!(!d.display_name.is_empty(), "{}", d.path);
            }
        }
    }
}
