//! The rules against CSVs that break one of them at a time.

use super::*;
use crate::csv::{ApiServiceDescription, CrdDescription, DeploymentSpecNamed, InstallMode};
use k8s_openapi::api::admissionregistration::v1::RuleWithOperations;

fn csv_with(webhook: WebhookDescription, modes: &[(&str, bool)]) -> ClusterServiceVersion {
    let mut csv = ClusterServiceVersion::default();
    csv.spec.install.spec.deployments.push(DeploymentSpecNamed {
        name: "manager".to_string(),
        ..DeploymentSpecNamed::default()
    });
    csv.spec.install_modes = modes
        .iter()
        .map(|(mode, supported)| InstallMode {
            mode: mode.to_string(),
            supported: *supported,
        })
        .collect();
    csv.spec.webhookdefinitions.push(webhook);
    csv
}

fn fine_webhook() -> WebhookDescription {
    WebhookDescription {
        kind: webhook_type::VALIDATING.to_string(),
        generate_name: "vthing.example.com".to_string(),
        deployment_name: "manager".to_string(),
        side_effects: Some("NoneOnDryRun".to_string()),
        admission_review_versions: vec!["v1".to_string(), "v1beta1".to_string()],
        webhook_path: Some("/validate".to_string()),
        ..WebhookDescription::default()
    }
}

fn conversion_webhook() -> WebhookDescription {
    WebhookDescription {
        kind: webhook_type::CONVERSION.to_string(),
        generate_name: "cthing.example.com".to_string(),
        conversion_crds: vec!["things.example.com".to_string()],
        side_effects: None,
        ..fine_webhook()
    }
}

fn owning_things(mut csv: ClusterServiceVersion) -> ClusterServiceVersion {
    csv.spec
        .customresourcedefinitions
        .owned
        .push(CrdDescription {
            name: "things.example.com".to_string(),
            ..CrdDescription::default()
        });
    csv
}

/// Each finding as `rule [enforcers]`.
fn findings(csv: &ClusterServiceVersion, routes: Routes<'_>) -> Vec<String> {
    check(csv, &[], routes)
        .iter()
        .map(|v| {
            let enforcers: Vec<&str> = v.enforcers.iter().map(|e| e.id()).collect();
            format!("{} [{}]", v.rule, enforcers.join(" "))
        })
        .collect()
}

const ALL: &[(&str, bool)] = &[("AllNamespaces", true)];

#[test]
fn a_fine_webhook_breaks_nothing_and_unknown_routes_are_not_checked() {
    let csv = csv_with(fine_webhook(), ALL);
    assert_eq!(check(&csv, &[], Routes::Unknown), vec![]);
    assert_eq!(check(&csv, &[], Routes::Only(&["/validate"])), vec![]);
    assert_eq!(
        findings(&csv, Routes::Only(&["/other"])),
        ["unrouted-webhook-path [this-operator]"]
    );
}

#[test]
fn a_violation_prints_its_rule_who_refuses_it_its_webhook_and_what_is_wrong() {
    let mut webhook = fine_webhook();
    webhook.side_effects = Some("Some".to_string());
    let csv = csv_with(webhook, ALL);
    let violations = check(&csv, &[], Routes::Unknown);
    assert_eq!(
        violations[0].to_string(),
        "side-effects [OLM v0, OLM v1]: webhook vthing.example.com: sideEffects Some: \
         admissionregistration/v1 accepts only None or NoneOnDryRun"
    );
    assert!(violations[0].refused_by(Enforcer::OlmV0));
    assert!(!violations[0].refused_by(Enforcer::ThisOperator));
}

#[test]
fn a_webhook_without_a_name_is_named_by_its_index() {
    let mut webhook = fine_webhook();
    webhook.generate_name.clear();
    let csv = csv_with(webhook, ALL);
    let violations = check(&csv, &[], Routes::Unknown);
    assert_eq!(violations[0].webhook, "#0");
    assert_eq!(violations[0].rule, Rule::InvalidGenerateName);
}

#[test]
fn rule_groups_are_refused_by_the_olm_that_owns_them() {
    for (group, expected) in [
        ("*", "webhook-rules-all-groups [olm-v0 olm-v1]"),
        ("operators.coreos.com", "webhook-rules-olm-group [olm-v0]"),
        (
            "olm.operatorframework.io",
            "webhook-rules-olm-v1-group [olm-v1]",
        ),
    ] {
        let mut webhook = fine_webhook();
        webhook.rules = vec![rule_on(group, "things")];
        let csv = csv_with(webhook, ALL);
        assert_eq!(findings(&csv, Routes::Unknown), [expected], "{group}");
    }
}

#[test]
fn webhook_configurations_are_matched_as_each_olm_spells_them() {
    for (resource, expected) in [
        ("*", Some("olm-v0 olm-v1")),
        ("MutatingWebhookConfiguration", Some("olm-v0 olm-v1")),
        ("ValidatingWebhookConfiguration", Some("olm-v0 olm-v1")),
        ("validatingwebhookconfigurations", Some("olm-v1")),
        ("MUTATINGWEBHOOKCONFIGURATION", Some("olm-v1")),
        ("*/*", None),
        ("validatingwebhookconfigurations/status", None),
        ("validatingadmissionpolicies", None),
    ] {
        let mut webhook = fine_webhook();
        webhook.rules = vec![rule_on("admissionregistration.k8s.io", resource)];
        let csv = csv_with(webhook, ALL);
        let expected: Vec<String> = expected
            .map(|e| format!("webhook-rules-webhook-configurations [{e}]"))
            .into_iter()
            .collect();
        assert_eq!(findings(&csv, Routes::Unknown), expected, "{resource}");
    }
}

#[test]
fn a_conversion_webhooks_rules_concern_olm_v0_alone() {
    let mut webhook = conversion_webhook();
    webhook.rules = vec![rule_on("*", "things")];
    let csv = owning_things(csv_with(webhook, ALL));
    assert_eq!(
        findings(&csv, Routes::Unknown),
        ["webhook-rules-all-groups [olm-v0]"]
    );
}

#[test]
fn install_modes_of_a_conversion_webhook_follow_each_olm() {
    for (modes, expected) in [
        (vec![("AllNamespaces", true)], vec![]),
        (
            vec![("AllNamespaces", true), ("OwnNamespace", true)],
            vec!["conversion-webhook-install-modes [olm-v0 olm-v1]"],
        ),
        (
            vec![("AllNamespaces", false), ("OwnNamespace", false)],
            vec![
                "all-namespaces-unsupported [olm-v1]",
                "conversion-webhook-install-modes [olm-v0 olm-v1]",
            ],
        ),
        // OLM v0 counts a CSV that declares no mode at all as a singleton.
        (
            vec![],
            vec![
                "all-namespaces-unsupported [olm-v1]",
                "conversion-webhook-install-modes [olm-v1]",
            ],
        ),
    ] {
        let csv = owning_things(csv_with(conversion_webhook(), &modes));
        assert_eq!(findings(&csv, Routes::Unknown), expected, "{modes:?}");
    }
}

#[test]
fn conversion_crds_must_be_named_owned_pruned_and_converted_once() {
    let mut empty = conversion_webhook();
    empty.conversion_crds.clear();
    assert_eq!(
        findings(&owning_things(csv_with(empty, ALL)), Routes::Unknown),
        ["conversion-webhook-without-crds [olm-v0]"]
    );
    assert_eq!(
        findings(&csv_with(conversion_webhook(), ALL), Routes::Unknown),
        ["conversion-crd-not-owned [olm-v0 olm-v1]"]
    );
    let csv = owning_things(csv_with(conversion_webhook(), ALL));
    let preserving = [CrdFacts {
        name: "things.example.com".to_string(),
        preserve_unknown_fields: true,
    }];
    let rules: Vec<Rule> = check(&csv, &preserving, Routes::Unknown)
        .iter()
        .map(|v| v.rule)
        .collect();
    assert_eq!(rules, [Rule::ConversionCrdPreservesUnknownFields]);
    let mut twice = csv.clone();
    let mut second = conversion_webhook();
    second.generate_name = "cthing2.example.com".to_string();
    twice.spec.webhookdefinitions.push(second);
    assert_eq!(
        findings(&twice, Routes::Unknown),
        ["conversion-crd-in-two-webhooks [olm-v1]"]
    );
}

#[test]
fn names_are_unique_in_the_csv_for_olm_v0_and_per_type_for_olm_v1() {
    let mut csv = csv_with(fine_webhook(), ALL);
    csv.spec.webhookdefinitions.push(fine_webhook());
    assert_eq!(
        findings(&csv, Routes::Unknown),
        ["duplicate-generate-name [olm-v0 olm-v1]"]
    );
    let mut mutating = fine_webhook();
    mutating.kind = webhook_type::MUTATING.to_string();
    let mut csv = csv_with(fine_webhook(), ALL);
    csv.spec.webhookdefinitions.push(mutating);
    assert_eq!(
        findings(&csv, Routes::Unknown),
        ["duplicate-generate-name [olm-v0]"]
    );
}

#[test]
fn names_must_be_dns_subdomains_and_admission_names_fully_qualified() {
    for (name, expected) in [
        ("vthing.example.com", None),
        (
            "VThing.example.com",
            Some("generate-name-not-dns-1123 [olm-v0 olm-v1]"),
        ),
        (
            "vthing_.example.com",
            Some("generate-name-not-dns-1123 [olm-v0 olm-v1]"),
        ),
        (
            "vthing.example",
            Some("generate-name-not-qualified [olm-v0 olm-v1]"),
        ),
    ] {
        let mut webhook = fine_webhook();
        webhook.generate_name = name.to_string();
        let csv = csv_with(webhook, ALL);
        let expected: Vec<&str> = expected.into_iter().collect();
        assert_eq!(findings(&csv, Routes::Unknown), expected, "{name}");
    }
    // A conversion webhook's name only names OLM's Service: OLM v1 still validates it.
    let mut webhook = conversion_webhook();
    webhook.generate_name = "Cthing".to_string();
    let csv = owning_things(csv_with(webhook, ALL));
    assert_eq!(
        findings(&csv, Routes::Unknown),
        ["generate-name-not-dns-1123 [olm-v1]"]
    );
    assert!(is_dns1123_subdomain(&"a".repeat(253)));
    assert!(!is_dns1123_subdomain(&"a".repeat(254)));
    assert!(!is_dns1123_subdomain("a..b"));
    assert!(!is_dns1123_subdomain("-a.b.c"));
}

#[test]
fn review_versions_the_api_server_does_not_send_fail_everywhere_but_v1beta1_only_here() {
    let mut webhook = fine_webhook();
    webhook.admission_review_versions = vec!["v2".to_string()];
    assert_eq!(
        findings(&csv_with(webhook, ALL), Routes::Unknown),
        ["admission-review-versions-unknown [olm-v0 olm-v1]"]
    );
    let mut webhook = fine_webhook();
    webhook.admission_review_versions = vec!["v1beta1".to_string()];
    let csv = csv_with(webhook, ALL);
    assert_eq!(findings(&csv, Routes::Unknown), Vec::<String>::new());
    assert_eq!(
        findings(&csv, Routes::Only(&["/validate"])),
        ["admission-review-versions-without-v1 [this-operator]"]
    );
}

#[test]
fn side_effects_concern_admission_webhooks_only() {
    for side_effects in [None, Some("Some"), Some("Unknown")] {
        let mut webhook = fine_webhook();
        webhook.side_effects = side_effects.map(str::to_string);
        assert_eq!(
            findings(&csv_with(webhook, ALL), Routes::Unknown),
            ["side-effects [olm-v0 olm-v1]"]
        );
        let mut webhook = conversion_webhook();
        webhook.side_effects = side_effects.map(str::to_string);
        assert_eq!(
            findings(&owning_things(csv_with(webhook, ALL)), Routes::Unknown),
            Vec::<String>::new()
        );
    }
}

#[test]
fn an_admission_webhook_name_must_fit_olm_v0s_label() {
    let long = format!("v{}.example.com", "x".repeat(51));
    assert_eq!(long.len(), 64);
    let mut webhook = fine_webhook();
    webhook.generate_name = long.clone();
    assert_eq!(
        findings(&csv_with(webhook, ALL), Routes::Unknown),
        ["generate-name-too-long [olm-v0]"]
    );
    let mut webhook = fine_webhook();
    webhook.generate_name = long[1..].to_string();
    assert_eq!(
        findings(&csv_with(webhook, ALL), Routes::Unknown),
        Vec::<String>::new()
    );
    let mut webhook = conversion_webhook();
    webhook.generate_name = long;
    assert_eq!(
        findings(&owning_things(csv_with(webhook, ALL)), Routes::Unknown),
        Vec::<String>::new()
    );
}

#[test]
fn an_unknown_deployment_fails_both_olms_and_an_api_service_olm_v1() {
    let mut webhook = fine_webhook();
    webhook.deployment_name = "elsewhere".to_string();
    let mut csv = csv_with(webhook, ALL);
    csv.spec
        .apiservicedefinitions
        .owned
        .push(ApiServiceDescription {
            name: "v1.things.example.com".to_string(),
            ..ApiServiceDescription::default()
        });
    assert_eq!(
        findings(&csv, Routes::Unknown),
        [
            "apiservice-definitions [olm-v1]",
            "unknown-deployment [olm-v0 olm-v1]"
        ]
    );
}

/// An admission rule on one group and resource.
fn rule_on(group: &str, resource: &str) -> RuleWithOperations {
    RuleWithOperations {
        api_groups: Some(vec![group.to_string()]),
        api_versions: Some(vec!["v1".to_string()]),
        operations: Some(vec!["CREATE".to_string()]),
        resources: Some(vec![resource.to_string()]),
        scope: None,
    }
}
