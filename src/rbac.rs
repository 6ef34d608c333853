//! Declares the permissions the operator needs, once: the CSV's `clusterPermissions` and
//! `permissions` and the `config/rbac` roles are all written from these two lists. Also
//! declares what a scraper needs to read the metrics (the `metrics-reader` ClusterRole).
//!
//! No rule uses a wildcard. Cluster-wide rules cover what the controller watches and owns in
//! every namespace; namespaced rules cover what it only touches in its own namespace (the
//! leader-election Lease).

use k8s_openapi::api::rbac::v1::PolicyRule;

use crate::tls::profile::profiles;
use crate::{api, operator};

/// Verbs to read and watch a resource.
const READ: &[&str] = &["get", "list", "watch"];
/// Verbs to own a resource: read it, apply it (create/patch/update) and delete it.
const OWN: &[&str] = &[
    "get", "list", "watch", "create", "update", "patch", "delete",
];

fn rule(group: &str, resources: &[&str], verbs: &[&str]) -> PolicyRule {
    PolicyRule {
        api_groups: Some(vec![group.to_string()]),
        resources: Some(resources.iter().map(|r| r.to_string()).collect()),
        verbs: verbs.iter().map(|v| v.to_string()).collect(),
        ..PolicyRule::default()
    }
}

/// Rules granted in every namespace (a ClusterRole).
pub fn cluster_rules() -> Vec<PolicyRule> {
    vec![
        // The API it reconciles: read and update the objects (finalizers), write status.
        rule(
            api::GROUP,
            &[api::PLURAL],
            &["get", "list", "watch", "update", "patch"],
        ),
        rule(
            api::GROUP,
            &[&format!("{}/status", api::PLURAL)],
            &["get", "update", "patch"],
        ),
        rule(
            api::GROUP,
            &[&format!("{}/finalizers", api::PLURAL)],
            &["update"],
        ),
        // What it creates for each Memcached.
        rule("apps", &["statefulsets"], OWN),
        rule("", &["services"], OWN),
        rule("policy", &["poddisruptionbudgets"], OWN),
        rule("networking.k8s.io", &["networkpolicies"], OWN),
        // The certificates, for `spec.tls.issuerRef`, and the ServiceMonitor and PrometheusRule,
        // where cert-manager and the Prometheus Operator serve their APIs.
        rule("cert-manager.io", &["certificates"], OWN),
        rule(
            "monitoring.coreos.com",
            &["servicemonitors", "prometheusrules"],
            OWN,
        ),
        // Pods, to report which servers are ready; patched (an annotation) to ask a server to
        // restart in place when a client CA is withdrawn (`controller::client_cas`).
        rule("", &["pods"], READ),
        rule("", &["pods"], &["patch"]),
        // ConfigMaps, the client CAs of `spec.tls.clientCA`: every one's metadata is watched,
        // and one is read when it changed.
        rule("", &["configmaps"], READ),
        // Events about the objects it reconciles, through either API.
        rule("events.k8s.io", &["events"], &["create", "patch"]),
        rule("", &["events"], &["create", "patch"]),
        // Who may read the metrics: callers' tokens and rights are reviewed by the API server.
        rule("authentication.k8s.io", &["tokenreviews"], &["create"]),
        rule(
            "authorization.k8s.io",
            &["subjectaccessreviews"],
            &["create"],
        ),
        // The cluster's TLS security profile (OpenShift), which every TLS listener follows.
        rule(
            profiles::APISERVER_GROUP,
            &[profiles::APISERVER_PLURAL],
            READ,
        ),
        // The CA bundles the API server calls the webhooks with, read before a renewed
        // serving certificate is served (`tls::trust_watch`).
        rule(
            "admissionregistration.k8s.io",
            &[
                "mutatingwebhookconfigurations",
                "validatingwebhookconfigurations",
            ],
            READ,
        ),
        rule("apiextensions.k8s.io", &["customresourcedefinitions"], READ),
    ]
}

/// The verb a scraper needs on [`operator::METRICS_PATH`]: what the metrics server asks a
/// SubjectAccessReview for a `GET`.
pub const METRICS_VERB: &str = "get";

/// Rules of the `metrics-reader` ClusterRole: `get` on the non-resource URL of the metrics.
/// Bind it to a scraper's ServiceAccount (Prometheus's) to let it read them.
pub fn metrics_reader_rules() -> Vec<PolicyRule> {
    vec![PolicyRule {
        non_resource_urls: Some(vec![operator::METRICS_PATH.to_string()]),
        verbs: vec![METRICS_VERB.to_string()],
        ..PolicyRule::default()
    }]
}

/// Rules granted only in the operator's own namespace (a Role): leader election, and reading
/// (and watching) the webhook certificate's Secret by name (`tls::cert_secret`), nothing
/// else of Secrets.
pub fn namespaced_rules() -> Vec<PolicyRule> {
    vec![
        rule(
            "coordination.k8s.io",
            &["leases"],
            &[
                "get", "list", "watch", "create", "update", "patch", "delete",
            ],
        ),
        PolicyRule {
            api_groups: Some(vec![String::new()]),
            resources: Some(vec!["secrets".to_string()]),
            resource_names: Some(
                operator::CERT_SECRET_NAMES
                    .iter()
                    .map(|name| name.to_string())
                    .collect(),
            ),
            verbs: READ.iter().map(|verb| verb.to_string()).collect(),
            ..PolicyRule::default()
        },
    ]
}

/// Rules of a namespaced Role for `--self-signed-cert-secret=SECRET`: create the Secret
/// (`create` cannot be limited to a name) and update that one by name.
pub fn self_signed_namespaced_rules(secret: &str) -> Vec<PolicyRule> {
    vec![
        rule("", &["secrets"], &["create"]),
        PolicyRule {
            resource_names: Some(vec![secret.to_string()]),
            ..rule("", &["secrets"], &["get", "update"])
        },
    ]
}

/// Rules of a ClusterRole for `--self-signed-cert-secret`: write the CA bundle into this
/// operator's webhook configurations and CRD, by name (`tls::self_signed::inject`).
pub fn self_signed_cluster_rules() -> Vec<PolicyRule> {
    let named = |group: &str, resource: &str, name: &str| PolicyRule {
        resource_names: Some(vec![name.to_string()]),
        ..rule(group, &[resource], &["get", "patch"])
    };
    vec![
        named(
            "admissionregistration.k8s.io",
            "mutatingwebhookconfigurations",
            operator::MUTATING_CONFIGURATION_NAME,
        ),
        named(
            "admissionregistration.k8s.io",
            "validatingwebhookconfigurations",
            operator::VALIDATING_CONFIGURATION_NAME,
        ),
        named(
            "apiextensions.k8s.io",
            "customresourcedefinitions",
            api::CRD_NAME,
        ),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    fn all_rules() -> Vec<PolicyRule> {
        cluster_rules()
            .into_iter()
            .chain(namespaced_rules())
            .chain(metrics_reader_rules())
            .collect()
    }

    #[test]
    fn no_rule_uses_a_wildcard() {
        for rule in all_rules() {
            let words = rule
                .api_groups
                .iter()
                .flatten()
                .chain(rule.resources.iter().flatten())
                .chain(rule.non_resource_urls.iter().flatten())
                .chain(rule.verbs.iter());
            for word in words {
                assert!(!word.contains('*'), "{rule:?}");
            }
        }
    }

    #[test]
    fn leases_are_only_granted_in_the_operator_namespace() {
        let grants_leases = |rules: Vec<PolicyRule>| {
            rules
                .iter()
                .any(|r| r.resources.iter().flatten().any(|res| res == "leases"))
        };
        assert!(!grants_leases(cluster_rules()));
        assert!(grants_leases(namespaced_rules()));
    }

    #[test]
    fn pods_are_read_and_patched_only_and_no_pod_subresource_is_granted() {
        // Patched to annotate a server asked to restart for a withdrawn client CA; never
        // created, updated, deleted, evicted or exec'd into, and their status is the kubelet's.
        let mut verbs = Vec::new();
        for rule in all_rules() {
            let resources: Vec<_> = rule.resources.iter().flatten().collect();
            assert!(
                !resources.iter().any(|r| r.starts_with("pods/")),
                "{rule:?}"
            );
            if resources.iter().any(|r| *r == "pods") {
                assert_eq!(resources, ["pods"], "{rule:?}");
                verbs.extend(rule.verbs.clone());
            }
        }
        verbs.sort();
        assert_eq!(verbs, ["get", "list", "patch", "watch"]);
    }

    #[test]
    fn crds_and_webhook_configurations_are_only_read() {
        // OLM (or kustomize) installs and wires them; the operator reads their CA bundles.
        for rule in all_rules() {
            let groups: Vec<_> = rule.api_groups.iter().flatten().collect();
            if groups
                .iter()
                .any(|g| *g == "apiextensions.k8s.io" || *g == "admissionregistration.k8s.io")
            {
                assert_eq!(rule.verbs, vec!["get", "list", "watch"], "{rule:?}");
            }
        }
    }

    #[test]
    fn the_operator_may_review_tokens_and_access_and_nothing_more_of_those_apis() {
        let rules = cluster_rules();
        let grants = |group: &str, resource: &str| {
            rules
                .iter()
                .find(|r| {
                    r.api_groups.iter().flatten().any(|g| g == group)
                        && r.resources.iter().flatten().any(|res| res == resource)
                })
                .map(|r| r.verbs.clone())
        };
        assert_eq!(
            grants("authentication.k8s.io", "tokenreviews"),
            Some(vec!["create".to_string()])
        );
        assert_eq!(
            grants("authorization.k8s.io", "subjectaccessreviews"),
            Some(vec!["create".to_string()])
        );
    }

    #[test]
    fn the_metrics_reader_may_get_the_metrics_path_only() {
        let rules = metrics_reader_rules();
        assert_eq!(rules.len(), 1);
        assert_eq!(
            rules[0].non_resource_urls,
            Some(vec![operator::METRICS_PATH.to_string()])
        );
        assert_eq!(rules[0].verbs, vec![METRICS_VERB.to_string()]);
        assert_eq!(rules[0].api_groups, None);
        assert_eq!(rules[0].resources, None);
    }
}
