//! The alerting rules of a monitored Memcached, as a Prometheus Operator `PrometheusRule`
//! `<name>` (unless `spec.monitoring.rules.enabled` is false): over the metrics its servers'
//! exporters serve (scraped through its ServiceMonitor, whose targets carry the `namespace`
//! and `service` labels) and, with `spec.tls.issuerRef`, over cert-manager's metrics of its
//! Certificate.
//!
//! Only the fields the operator sets are declared here; the Prometheus Operator's own CRD is
//! the schema. `tests/alerts` checks every alert with Prometheus's own `promtool test rules`.

use std::collections::BTreeMap;

use kube::{CustomResource, ResourceExt};
use serde::{Deserialize, Serialize};

use super::monitoring::{EXPORTER_CONTAINER_NAME, METRICS_PORT_NAME};
use super::{CONTAINER_NAME, metadata_with_labels};
use crate::api::v1beta1::Memcached;
use crate::controller::cache::child::Child;
use crate::controller::cache::compact::CachedPrometheusRule;
use crate::sidecar::metrics::{AUTH_REFUSED, EXPIRY, REFRESH_PENDING, WITHDRAWN_CAS};
use crate::sidecar::{refresher, relay};

impl Child for PrometheusRule {
    type Cached = CachedPrometheusRule;
    fn cached(full: Self) -> CachedPrometheusRule {
        CachedPrometheusRule::from(full.metadata)
    }
}

/// How long before its expiry a certificate cert-manager has not renewed is alerted on.
pub const CERTIFICATE_EXPIRY_DAYS: u32 = 7;
/// The share of `maxConnections` in use that is alerted on.
pub const CONNECTIONS_NEAR_LIMIT: f64 = 0.9;
/// How far back a container's restart is alerted on, in minutes.
pub const RESTART_WINDOW_MINUTES: u32 = 10;

/// `spec` of a `PrometheusRule`, as far as the operator sets it.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[kube(
    group = "monitoring.coreos.com",
    version = "v1",
    kind = "PrometheusRule",
    namespaced,
    schema = "disabled"
)]
pub struct PrometheusRuleSpec {
    /// The rule groups.
    pub groups: Vec<RuleGroup>,
}

/// A group of rules, evaluated together.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
pub struct RuleGroup {
    /// The group's name.
    pub name: String,
    /// Its rules.
    pub rules: Vec<AlertingRule>,
}

/// One alerting rule.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
pub struct AlertingRule {
    /// The alert's name.
    pub alert: String,
    /// The PromQL expression; each series it returns is an alert.
    pub expr: String,
    /// How long the expression must hold before the alert fires.
    #[serde(rename = "for", default, skip_serializing_if = "Option::is_none")]
    pub for_: Option<String>,
    /// Labels added to the alert (`severity`).
    pub labels: BTreeMap<String, String>,
    /// `summary` and `description`, templated with the series' labels.
    pub annotations: BTreeMap<String, String>,
}

fn rule(
    alert: &str,
    expr: String,
    for_: Option<&str>,
    severity: &str,
    summary: &str,
    description: String,
) -> AlertingRule {
    AlertingRule {
        alert: alert.into(),
        expr,
        for_: for_.map(str::to_string),
        labels: BTreeMap::from([("severity".to_string(), severity.to_string())]),
        annotations: BTreeMap::from([
            ("summary".to_string(), summary.to_string()),
            ("description".to_string(), description),
        ]),
    }
}

/// The alerting rules of `memcached`: its servers down or missing, connections near the
/// limit, evictions, items refused for lack of memory, a container of its pods restarted
/// (memcached, or a sidecar that stopped: the refresher or the relay stop when they cannot
/// present their client certificate); with authentication, an auth file memcached would
/// refuse (the supervisor's metrics); with TLS, a server that does not serve its mounted
/// certificate (the refresher's metrics) and, without an issuer, that certificate about to
/// expire; with `spec.tls.issuerRef`, its certificate not renewed or not ready.
pub fn alerting_rules(memcached: &Memcached) -> Vec<RuleGroup> {
    let name = memcached.name_any();
    let namespace = memcached.namespace().unwrap_or_default();
    let servers = format!("namespace=\"{namespace}\",service=\"{name}\"");
    let object = format!("Memcached {namespace}/{name}");
    let mut rules = vec![
        rule(
            "MemcachedDown",
            format!(
                "memcached_up{{{servers}}} == 0 or \
                 up{{{servers},endpoint=\"{METRICS_PORT_NAME}\"}} == 0"
            ),
            Some("1m"),
            "critical",
            "A memcached server cannot be reached",
            format!(
                "{object}: the server of pod {{{{ $labels.pod }}}} has been unreachable for a \
                 minute (its exporter cannot reach it, or Prometheus cannot scrape the exporter)."
            ),
        ),
        rule(
            "MemcachedConnectionsNearLimit",
            format!(
                "memcached_current_connections{{{servers}}} / \
                 memcached_max_connections{{{servers}}} > {CONNECTIONS_NEAR_LIMIT}"
            ),
            Some("5m"),
            "warning",
            "A memcached server is near its connection limit",
            format!(
                "{object}: pod {{{{ $labels.pod }}}} has used more than {}% of \
                 spec.memcached.maxConnections for 5 minutes; new connections are refused at \
                 the limit.",
                CONNECTIONS_NEAR_LIMIT * 100.0
            ),
        ),
        rule(
            "MemcachedEvicting",
            format!("rate(memcached_items_evicted_total{{{servers}}}[5m]) > 0"),
            Some("15m"),
            "warning",
            "A memcached server keeps evicting items",
            format!(
                "{object}: pod {{{{ $labels.pod }}}} has evicted items that had not expired for \
                 15 minutes: its item memory (spec.memcached.memoryLimitMB) is too small for \
                 what clients store."
            ),
        ),
        rule(
            "MemcachedOutOfMemory",
            format!("increase(memcached_item_no_memory_total{{{servers}}}[5m]) > 0"),
            None,
            "warning",
            "A memcached server refused items for lack of memory",
            format!(
                "{object}: pod {{{{ $labels.pod }}}} could not store items for lack of memory in \
                 the last 5 minutes (SERVER_ERROR out of memory to clients)."
            ),
        ),
        restarted(&namespace, &name, &object),
    ];
    let replicas = memcached.spec.replicas.unwrap_or_default();
    if replicas > 0 {
        rules.insert(
            1,
            rule(
                "MemcachedServersMissing",
                format!("(count(memcached_up{{{servers}}} == 1) or vector(0)) < {replicas}"),
                Some("5m"),
                "warning",
                "Fewer memcached servers answer than the Memcached asks for",
                format!(
                    "{object}: {{{{ $value }}}} of {replicas} servers have answered for 5 \
                     minutes."
                ),
            ),
        );
    }
    if memcached.spec.auth.is_some() {
        rules.push(rule(
            "MemcachedAuthFileRefused",
            format!("{AUTH_REFUSED}{{{servers}}} == 1"),
            Some("1m"),
            "critical",
            "A memcached server's auth file is one memcached refuses",
            format!(
                "{object}: the auth file mounted in pod {{{{ $labels.pod }}}} is one memcached \
                 would refuse or misread: the server keeps the credentials it had, and would not \
                 start with this file (its log says which line and why: kubectl logs \
                 {{{{ $labels.pod }}}} -c memcached -n {namespace})."
            ),
        ));
    }
    if let Some(tls) = &memcached.spec.tls {
        rules.push(rule(
            "MemcachedCertificateNotRefreshed",
            format!("{REFRESH_PENDING}{{{servers}}} == 1"),
            Some("10m"),
            "warning",
            "A memcached server does not serve its mounted certificate",
            format!(
                "{object}: for 10 minutes the server of pod {{{{ $labels.pod }}}} has presented \
                 another certificate than its TLS Secret's, or not read its ca.crt: its \
                 certificate refresher cannot bring them in (kubectl logs {{{{ $labels.pod }}}} \
                 -c {} -n {namespace}).",
                refresher::CONTAINER_NAME
            ),
        ));
        if tls.client_auth.unwrap_or_default().verify_mode() > 0 {
            rules.push(rule(
                "MemcachedWithdrawnClientCATrusted",
                format!("{WITHDRAWN_CAS}{{{servers}}} > 0"),
                Some("15m"),
                "warning",
                "A memcached server still trusts a client CA its ca.crt no longer holds",
                format!(
                    "{object}: for 15 minutes the server of pod {{{{ $labels.pod }}}} has still \
                     trusted {{{{ $value }}}} client CA(s) withdrawn from its ca.crt: memcached \
                     drops a CA only when it starts again. Restart each server in place, one at \
                     a time once the one before is Ready (kubectl exec {{{{ $labels.pod }}}} -c \
                     memcached -n {namespace} -- kill -USR1 1; with warmRestart its items are \
                     kept)."
                ),
            ));
        }
        // With an issuer, cert-manager's own metrics say more (below).
        if tls.issuer_ref.is_none() {
            rules.push(rule(
                "MemcachedCertificateFileExpiresSoon",
                format!(
                    "{EXPIRY}{{{servers}}} - time() < {} * 86400",
                    CERTIFICATE_EXPIRY_DAYS
                ),
                Some("10m"),
                "critical",
                "The memcached servers' certificate expires soon",
                format!(
                    "{object}: the certificate of its TLS Secret, as mounted in pod \
                     {{{{ $labels.pod }}}}, expires in less than {CERTIFICATE_EXPIRY_DAYS} days; \
                     nothing renews it but whoever writes the Secret."
                ),
            ));
        }
    }
    if memcached
        .spec
        .tls
        .as_ref()
        .is_some_and(|tls| tls.issuer_ref.is_some())
    {
        let certificate = format!("namespace=\"{namespace}\",name=\"{name}\"");
        rules.push(rule(
            "MemcachedCertificateExpiresSoon",
            format!(
                "certmanager_certificate_expiration_timestamp_seconds{{{certificate}}} - time() \
                 < {} * 86400",
                CERTIFICATE_EXPIRY_DAYS
            ),
            Some("10m"),
            "critical",
            "The memcached servers' certificate expires soon",
            format!(
                "{object}: the Certificate cert-manager keeps for it expires in less than \
                 {CERTIFICATE_EXPIRY_DAYS} days and has not been renewed."
            ),
        ));
        rules.push(rule(
            "MemcachedCertificateNotReady",
            format!(
                "certmanager_certificate_ready_status{{{certificate},condition=\"False\"}} == 1"
            ),
            Some("15m"),
            "warning",
            "The memcached servers' certificate is not ready",
            format!(
                "{object}: the Certificate cert-manager keeps for it has not been Ready for 15 \
                 minutes (kubectl describe certificate {name} -n {namespace})."
            ),
        ));
    }
    vec![RuleGroup {
        name: format!("memcached.{namespace}.{name}"),
        rules,
    }]
}

/// A container of `name`'s pods restarted, from kube-state-metrics' restart counters:
/// memcached (its items are lost unless it restarted warm), or one of the sidecars: the
/// refresher and the relay stop when they cannot present their client certificate (the
/// Memcached's `SidecarStopped` says why), and the kubelet runs them again. Native sidecars
/// are init containers to kube-state-metrics.
fn restarted(namespace: &str, name: &str, object: &str) -> AlertingRule {
    let pods = format!("namespace=\"{namespace}\",pod=~\"{name}-[0-9]+\"");
    let sidecars = [
        refresher::CONTAINER_NAME,
        relay::CONTAINER_NAME,
        EXPORTER_CONTAINER_NAME,
    ]
    .join("|");
    let window = RESTART_WINDOW_MINUTES;
    rule(
        "MemcachedContainerRestarted",
        format!(
            "increase(kube_pod_container_status_restarts_total{{{pods},container=\"{CONTAINER_NAME}\"}}[{window}m]) > 0 \
             or increase(kube_pod_init_container_status_restarts_total{{{pods},container=~\"{sidecars}\"}}[{window}m]) > 0"
        ),
        None,
        "warning",
        "A container of a memcached server restarted",
        format!(
            "{object}: container {{{{ $labels.container }}}} of pod {{{{ $labels.pod }}}} \
             restarted in the last {window} minutes (a sidecar stops when it cannot do its \
             work; the Memcached's Degraded condition and Events say why: kubectl describe \
             memcached {name} -n {namespace})."
        ),
    )
}

/// The PrometheusRule of a monitored Memcached, unless `spec.monitoring.rules.enabled` is
/// false: its alerting rules, labelled as its other children and with the labels the spec
/// adds (which a Prometheus's `ruleSelector` usually matches).
pub fn desired_prometheus_rule(memcached: &Memcached) -> Option<PrometheusRule> {
    let monitoring = memcached.spec.monitoring.as_ref()?;
    if !monitoring.rules_enabled() {
        return None;
    }
    let extra = monitoring.rules.as_ref().and_then(|r| r.labels.as_ref());
    Some(PrometheusRule {
        metadata: metadata_with_labels(memcached, extra),
        spec: PrometheusRuleSpec {
            groups: alerting_rules(memcached),
        },
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::v1beta1::{IssuerRef, MemcachedSpec, MonitoringSpec, RulesSpec, TlsSpec};
    use crate::fixtures::memcached;

    fn monitored(replicas: i32, issuer: bool) -> Memcached {
        let mut object = memcached(
            "cache",
            MemcachedSpec {
                replicas: Some(replicas),
                monitoring: Some(MonitoringSpec::default()),
                tls: issuer.then(|| TlsSpec {
                    secret_name: Some("cache-tls".into()),
                    issuer_ref: Some(IssuerRef {
                        name: "cache-ca".into(),
                        ..IssuerRef::default()
                    }),
                    ..TlsSpec::default()
                }),
                ..MemcachedSpec::default()
            },
        );
        object.metadata.namespace = Some("shop".into());
        object
    }

    fn alerts(object: &Memcached) -> Vec<String> {
        alerting_rules(object)
            .into_iter()
            .flat_map(|group| group.rules)
            .map(|rule| rule.alert)
            .collect()
    }

    #[test]
    fn every_monitored_memcached_gets_the_server_alerts_and_issuer_ones_with_an_issuer() {
        assert_eq!(
            alerts(&monitored(3, false)),
            [
                "MemcachedDown",
                "MemcachedServersMissing",
                "MemcachedConnectionsNearLimit",
                "MemcachedEvicting",
                "MemcachedOutOfMemory",
                "MemcachedContainerRestarted"
            ]
        );
        assert_eq!(
            alerts(&monitored(0, true)),
            [
                "MemcachedDown",
                "MemcachedConnectionsNearLimit",
                "MemcachedEvicting",
                "MemcachedOutOfMemory",
                "MemcachedContainerRestarted",
                "MemcachedCertificateNotRefreshed",
                "MemcachedCertificateExpiresSoon",
                "MemcachedCertificateNotReady"
            ]
        );
    }

    #[test]
    fn servers_that_verify_client_certificates_get_the_withdrawn_ca_alert() {
        let mut object = monitored(3, true);
        if let Some(tls) = object.spec.tls.as_mut() {
            tls.client_auth = Some(crate::api::v1beta1::ClientAuth::Require);
        }
        let names = alerts(&object);
        let at = names
            .iter()
            .position(|name| name == "MemcachedCertificateNotRefreshed")
            .expect("the refresher's alert");
        assert_eq!(names[at + 1], "MemcachedWithdrawnClientCATrusted");
        let rule = alerting_rules(&object)
            .into_iter()
            .flat_map(|group| group.rules)
            .find(|rule| rule.alert == "MemcachedWithdrawnClientCATrusted")
            .expect("the rule");
        assert_eq!(
            rule.expr,
            "memcached_client_cas_withdrawn_trusted{namespace=\"shop\",service=\"cache\"} > 0"
        );
        // Without client certificates no CA is trusted for clients.
        assert!(!alerts(&monitored(3, true)).contains(&"MemcachedWithdrawnClientCATrusted".into()));
    }

    #[test]
    fn a_certificate_from_a_secret_gets_the_refresher_alerts_and_its_expiry() {
        let mut object = monitored(3, true);
        if let Some(tls) = object.spec.tls.as_mut() {
            tls.issuer_ref = None;
        }
        let names = alerts(&object);
        assert_eq!(
            names[names.len() - 2..],
            [
                "MemcachedCertificateNotRefreshed",
                "MemcachedCertificateFileExpiresSoon"
            ]
        );
        let rules: Vec<AlertingRule> = alerting_rules(&object)
            .into_iter()
            .flat_map(|group| group.rules)
            .collect();
        let down = &rules[0];
        assert!(
            down.expr.contains("endpoint=\"metrics\""),
            "a sidecar's target down is not the server down: {}",
            down.expr
        );
    }

    #[test]
    fn the_rules_select_this_memcacheds_servers_only() {
        for group in alerting_rules(&monitored(3, true)) {
            assert_eq!(group.name, "memcached.shop.cache");
            for rule in group.rules {
                assert!(
                    rule.expr.contains("namespace=\"shop\"")
                        && (rule.expr.contains("service=\"cache\"")
                            || rule.expr.contains("name=\"cache\"")
                            || rule.expr.contains("pod=~\"cache-[0-9]+\"")),
                    "{}: {}",
                    rule.alert,
                    rule.expr
                );
            }
        }
    }

    #[test]
    fn only_a_monitored_memcached_gets_a_prometheus_rule() {
        let rule = desired_prometheus_rule(&monitored(3, false)).expect("monitored");
        assert_eq!(rule.metadata.name.as_deref(), Some("cache"));
        let mut unmonitored = monitored(3, false);
        unmonitored.spec.monitoring = None;
        assert!(desired_prometheus_rule(&unmonitored).is_none());
    }

    #[test]
    fn the_rules_are_on_unless_turned_off_and_carry_the_labels_asked_for() {
        let mut object = monitored(3, false);
        let rules = |enabled, labels: &[(&str, &str)]| RulesSpec {
            enabled,
            labels: Some(
                labels
                    .iter()
                    .map(|(k, v)| (k.to_string(), v.to_string()))
                    .collect(),
            ),
        };
        object.spec.monitoring.as_mut().expect("set").rules = Some(rules(
            None,
            &[("role", "alert-rules"), ("app.kubernetes.io/name", "other")],
        ));
        let rule = desired_prometheus_rule(&object).expect("on when enabled is unset");
        let labels = rule.metadata.labels.expect("labels");
        assert_eq!(labels["role"], "alert-rules");
        // The children's own labels are kept: the selectors depend on them.
        assert_eq!(labels["app.kubernetes.io/name"], "memcached");
        object.spec.monitoring.as_mut().expect("set").rules = Some(rules(Some(false), &[]));
        assert!(desired_prometheus_rule(&object).is_none());
        object.spec.monitoring.as_mut().expect("set").rules = Some(rules(Some(true), &[]));
        assert!(desired_prometheus_rule(&object).is_some());
    }
}
