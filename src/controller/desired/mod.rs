//! The pure parts of reconciling: what a Memcached asks for, computed from its spec and what
//! the caches hold, with no request and no clock of their own.
//!
//! - [`plan`]: the effective (defaulted) Memcached and, unless its spec breaks the admission
//!   rules, its desired children;
//! - `children`: the desired StatefulSet, headless Service, PodDisruptionBudget, NetworkPolicy,
//!   cert-manager Certificates (the servers', the sidecars'), ServiceMonitor and
//!   PrometheusRule;
//! - `status`: the status and its conditions, from what the children report;
//! - `drift`: whether a cached child needs a write, or a field-by-field comparison.

pub mod children;
pub mod client_cas;
pub mod drift;
pub mod status;

use k8s_openapi::api::apps::v1::StatefulSet;
use k8s_openapi::api::core::v1::Service;
use k8s_openapi::api::networking::v1::NetworkPolicy;
use k8s_openapi::api::policy::v1::PodDisruptionBudget;

use self::children::certificate::{Certificate, desired_certificate, desired_client_certificate};
use self::children::network::desired_network_policy;
use self::children::prometheus_rule::{PrometheusRule, desired_prometheus_rule};
use self::children::service_monitor::{ServiceMonitor, desired_service_monitor};
use self::children::{Platform, desired_pdb, desired_service, desired_statefulset};
use crate::admission::{Defaults, default_spec, validate_create};
use crate::api::v1beta1::{DEFAULT_REPLICAS, MAX_REPLICAS, Memcached, MonitoringSpec};

/// What a Memcached asks for.
#[derive(Clone, Debug)]
pub struct Plan {
    /// The Memcached with its spec defaulted (defense in depth: as the mutating webhook would
    /// have), and the status to compare with.
    pub effective: Memcached,
    /// Its children, or why none can be made: the admission rules' denial of its spec.
    pub children: Result<DesiredChildren, String>,
}

/// The children a Memcached asks for.
#[derive(Clone, Debug)]
pub struct DesiredChildren {
    /// Its StatefulSet.
    pub statefulset: StatefulSet,
    /// Its headless Service.
    pub service: Service,
    /// Its PodDisruptionBudget; `None` when it should have none (fewer than two replicas).
    pub budget: Option<PodDisruptionBudget>,
    /// Its NetworkPolicy; `None` when `spec.networkPolicy` asks for none.
    pub network_policy: Option<NetworkPolicy>,
    /// Its cert-manager Certificate; `None` when `spec.tls.issuerRef` asks for none.
    pub certificate: Option<Certificate>,
    /// The cert-manager Certificate of its sidecars' client certificate (`<name>-client`);
    /// `None` unless `spec.tls.issuerRef` issues the certificates and clients must present one.
    pub client_certificate: Option<Certificate>,
    /// Its ServiceMonitor; `None` when `spec.monitoring.serviceMonitor` asks for none.
    pub service_monitor: Option<ServiceMonitor>,
    /// Its PrometheusRule (its alerting rules); `None` unless `spec.monitoring` is on and
    /// `spec.monitoring.rules.enabled` is not false.
    pub prometheus_rule: Option<PrometheusRule>,
    /// Whether `spec.monitoring.rules.enabled` asks for the PrometheusRule in so many words.
    /// The rules are on by default where the cluster serves PrometheusRules; only when asked
    /// for is a cluster that does not serve them reported.
    pub prometheus_rule_asked: bool,
}

/// The number of memcached servers `effective` asks for.
pub fn replicas(effective: &Memcached) -> i32 {
    effective
        .spec
        .replicas
        .unwrap_or(DEFAULT_REPLICAS)
        .clamp(0, MAX_REPLICAS)
}

/// Plans `object`: its spec defaulted with `defaults` and validated (an invalid spec, which
/// the webhooks would have refused, asks for no change), its children as they should be on
/// `platform`.
pub fn plan(object: &Memcached, defaults: &Defaults, platform: Platform) -> Plan {
    let mut effective = object.clone();
    effective.spec = default_spec(&object.spec, defaults);
    let children = match validate_create(&effective, &defaults.allowed_issuers) {
        Ok(_) => Ok(DesiredChildren {
            statefulset: desired_statefulset(&effective, platform),
            service: desired_service(&effective),
            budget: desired_pdb(&effective),
            network_policy: desired_network_policy(&effective),
            certificate: desired_certificate(&effective),
            client_certificate: desired_client_certificate(&effective),
            service_monitor: desired_service_monitor(&effective),
            prometheus_rule: desired_prometheus_rule(&effective),
            prometheus_rule_asked: effective
                .spec
                .monitoring
                .as_ref()
                .is_some_and(MonitoringSpec::rules_asked_for),
        }),
        Err(denial) => Err(denial.message),
    };
    Plan {
        effective,
        children,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::v1beta1::MemcachedSpec;

    #[test]
    fn a_valid_spec_plans_its_children_and_a_budget_from_two_replicas() {
        let object = crate::fixtures::memcached(
            "cache",
            MemcachedSpec {
                replicas: Some(3),
                ..MemcachedSpec::default()
            },
        );
        let plan = plan(&object, &Defaults::default(), Platform::Kubernetes);
        let children = plan.children.as_ref().expect("children");
        assert_eq!(children.statefulset.metadata.name.as_deref(), Some("cache"));
        assert_eq!(children.service.metadata.name.as_deref(), Some("cache"));
        assert!(children.budget.is_some());
        assert_eq!(replicas(&plan.effective), 3);
    }

    #[test]
    fn an_invalid_spec_plans_no_children_and_says_why() {
        let object = crate::fixtures::memcached(
            "cache",
            MemcachedSpec {
                replicas: Some(-1),
                ..MemcachedSpec::default()
            },
        );
        let plan = plan(&object, &Defaults::default(), Platform::Kubernetes);
        let why = plan.children.expect_err("refused");
        assert!(why.contains("replicas"), "{why}");
    }
}
