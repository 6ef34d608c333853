//! Checks the alerting rules the operator writes for a monitored Memcached with Prometheus's
//! own promtool (`hack/tools.sh promtool`): `promtool check rules` on them, and `promtool
//! test rules` on the unit tests in `memcached.test.yaml` (a Memcached whose certificate
//! cert-manager issues) and `secret-tls.test.yaml` (one whose certificate is a Secret of the
//! user's), which together must fire every alert the rules hold; and has promtool's parser read every query of the Grafana dashboard the
//! packager writes (`make validate` runs that one). A plain `cargo test` lists these as
//! ignored (they need .tools/bin/promtool); `make test` runs them.

use std::path::Path;
use std::process::Command;

use memcached_operator::api::v1beta1::{
    AuthSpec, ClientAuth, IssuerRef, Memcached, MemcachedSpec, MonitoringSpec, TlsSpec,
};
use memcached_operator::controller::desired::children::prometheus_rule::alerting_rules;
use memcached_packager::dashboard;
use serde_json::{Value, json};
use testkit::repository;

/// The Memcacheds the unit tests are written for, each with its tests: "cache" in "shop", 3
/// replicas, monitored, with authentication and client certificates required, its
/// certificate from a cert-manager Issuer
/// (`memcached.test.yaml`); and "sessions" in "shop", the same with its certificate from a
/// Secret of the user's (`secret-tls.test.yaml`).
fn memcacheds() -> [(Memcached, &'static str); 2] {
    let tls = |issuer: bool| TlsSpec {
        secret_name: Some("cache-tls".into()),
        issuer_ref: issuer.then(|| IssuerRef {
            name: "cache-ca".into(),
            ..IssuerRef::default()
        }),
        client_auth: Some(ClientAuth::Require),
        ..TlsSpec::default()
    };
    let memcached = |name: &str, issuer: bool| {
        let mut object = Memcached::new(
            name,
            MemcachedSpec {
                replicas: Some(3),
                monitoring: Some(MonitoringSpec::default()),
                tls: Some(tls(issuer)),
                auth: Some(AuthSpec {
                    secret_name: Some("cache-auth".into()),
                    ..AuthSpec::default()
                }),
                ..MemcachedSpec::default()
            },
        );
        object.metadata.namespace = Some("shop".into());
        object
    };
    [
        (memcached("cache", true), "memcached.test.yaml"),
        (memcached("sessions", false), "secret-tls.test.yaml"),
    ]
}

fn promtool(args: &[&str], dir: &Path) -> String {
    let promtool = repository::tool("promtool");
    let output = Command::new(&promtool)
        .args(args)
        .current_dir(dir)
        .output()
        .unwrap_or_else(|e| {
            panic!(
                "cannot run {} (hack/tools.sh promtool): {e}",
                promtool.display()
            )
        });
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(
        output.status.success(),
        "promtool {}:\n{text}",
        args.join(" ")
    );
    text
}

/// The alert names the unit tests expect to fire at least once.
fn alerts_tested(tests: &Value) -> Vec<String> {
    let mut fired: Vec<String> = tests["tests"]
        .as_array()
        .into_iter()
        .flatten()
        .flat_map(|test| {
            test["alert_rule_test"]
                .as_array()
                .cloned()
                .unwrap_or_default()
        })
        .filter(|case| {
            case["exp_alerts"]
                .as_array()
                .is_some_and(|alerts| !alerts.is_empty())
        })
        .filter_map(|case| case["alertname"].as_str().map(str::to_string))
        .collect();
    fired.sort();
    fired.dedup();
    fired
}

#[test]
#[ignore = "needs .tools/bin/promtool (hack/tools.sh promtool): make test"]
fn every_alert_passes_promtools_unit_tests() {
    let mut written = Vec::new();
    let mut tested = Vec::new();
    for (memcached, tests) in memcacheds() {
        let dir = tempfile::tempdir().expect("a temporary directory");
        let groups = alerting_rules(&memcached);
        let rules = json!({ "groups": groups });
        // JSON is YAML: promtool reads it as the rule file the PrometheusRule's spec holds.
        std::fs::write(dir.path().join("rules.yaml"), rules.to_string()).expect("rules written");
        let source = repository::root().join("tests/alerts").join(tests);
        let text = std::fs::read_to_string(&source).expect("the unit tests read");
        std::fs::write(dir.path().join(tests), &text).expect("tests copied");

        let checked = promtool(&["check", "rules", "rules.yaml"], dir.path());
        assert!(checked.contains("SUCCESS"), "{checked}");

        let unit_tests = memcached_packager::yaml::documents(&text)
            .expect("the unit tests are YAML")
            .into_iter()
            .next()
            .expect("one document");
        tested.extend(alerts_tested(&unit_tests));
        written.extend(
            groups
                .iter()
                .flat_map(|group| group.rules.iter().map(|rule| rule.alert.clone())),
        );
        let passed = promtool(&["test", "rules", tests], dir.path());
        assert!(passed.contains("SUCCESS"), "{tests}: {passed}");
    }
    for names in [&mut written, &mut tested] {
        names.sort();
        names.dedup();
    }
    assert_eq!(
        tested, written,
        "every alert the rules hold is tested firing, and no other"
    );
}

#[test]
#[ignore = "needs .tools/bin/promtool (hack/tools.sh promtool): make validate"]
fn the_dashboards_queries_are_promql_that_promtool_reads() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    // Each query as a recording rule, its Grafana variables replaced by values, so that
    // `promtool check rules` parses it with Prometheus's own parser.
    let rules: Vec<Value> = dashboard::queries()
        .iter()
        .enumerate()
        .map(|(index, query)| {
            json!({
                "record": format!("dashboard:query_{index}"),
                "expr": query.replace("$namespace", "shop").replace("$memcached", "cache|other"),
            })
        })
        .collect();
    assert!(!rules.is_empty());
    let file = json!({"groups": [{"name": "dashboard", "rules": rules}]});
    std::fs::write(dir.path().join("dashboard.yaml"), file.to_string()).expect("written");
    let checked = promtool(&["check", "rules", "dashboard.yaml"], dir.path());
    assert!(
        checked.contains(&format!("SUCCESS: {} rules found", rules.len())),
        "{checked}"
    );
}
