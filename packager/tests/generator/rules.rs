//! Every OLM rule refuses a CSV that breaks it, naming the rule, and writes nothing.

use super::*;

/// Writes `plan` into a fresh directory, expects a refusal naming `rule` and mentioning
/// `needle`, and checks the directory stayed empty.
fn refused(plan: Plan, rule: Rule, needle: &str) {
    let out = tempfile::tempdir().expect("tempdir");
    match plan.write(out.path()) {
        Err(GenerateError::Rules(violations)) => {
            let lines: Vec<String> = violations.iter().map(|v| v.to_string()).collect();
            assert!(
                violations
                    .iter()
                    .any(|v| v.rule == rule && v.to_string().contains(needle)),
                "expected {rule} mentioning {needle:?}, got {lines:#?}"
            );
            for line in &lines {
                assert!(line.contains(": webhook "), "{line}");
            }
        }
        other => panic!("expected a refusal for {rule}, got {other:?}"),
    }
    let left: Vec<_> = std::fs::read_dir(out.path()).expect("readable").collect();
    assert!(left.is_empty(), "{rule}: wrote {left:?}");
}

fn admission_rule(plan: &mut Plan) -> &mut RuleWithOperations {
    &mut plan.csv.spec.webhookdefinitions[1].rules[0]
}

#[test]
fn the_release_breaks_no_rule() {
    assert_eq!(plan().violations(), vec![]);
}

#[test]
fn a_rule_on_all_groups_is_refused() {
    let mut plan = plan();
    admission_rule(&mut plan).api_groups = Some(vec!["*".to_string()]);
    refused(
        plan,
        Rule::AllGroups,
        "vmemcached-v1beta1.cache.f2367556.dev",
    );
}

#[test]
fn a_rule_on_the_olm_group_is_refused() {
    let mut plan = plan();
    admission_rule(&mut plan).api_groups = Some(vec!["operators.coreos.com".to_string()]);
    refused(plan, Rule::OlmGroup, "operators.coreos.com");
}

#[test]
fn rules_on_webhook_configurations_are_refused_in_each_spelling_an_olm_refuses() {
    // OLM v0 compares `*` and the Kinds exactly; OLM v1 compares lowercased Kinds and plurals.
    for resource in [
        "*",
        "ValidatingWebhookConfiguration",
        "mutatingwebhookconfigurations",
        "MutatingWebhookConfigurations",
    ] {
        let mut plan = plan();
        let rule = admission_rule(&mut plan);
        rule.api_groups = Some(vec!["admissionregistration.k8s.io".to_string()]);
        rule.resources = Some(vec![resource.to_string()]);
        refused(plan, Rule::WebhookConfigurations, &format!("{resource:?}"));
    }
}

#[test]
fn a_conversion_webhook_with_another_install_mode_is_refused() {
    let mut plan = plan();
    plan.csv.spec.install_modes = vec![
        InstallMode {
            mode: "OwnNamespace".to_string(),
            supported: true,
        },
        InstallMode {
            mode: "AllNamespaces".to_string(),
            supported: true,
        },
    ];
    refused(plan, Rule::ConversionInstallModes, "OwnNamespace");
}

#[test]
fn a_conversion_webhook_without_crds_is_refused() {
    let mut plan = plan();
    plan.csv.spec.webhookdefinitions[2].conversion_crds.clear();
    refused(
        plan,
        Rule::ConversionWithoutCrds,
        "cmemcached.cache.f2367556.dev",
    );
}

#[test]
fn a_conversion_webhook_for_a_crd_the_csv_does_not_own_is_refused() {
    let mut plan = plan();
    plan.csv.spec.webhookdefinitions[2].conversion_crds = vec!["others.example.com".to_string()];
    refused(plan, Rule::ConversionCrdNotOwned, "others.example.com");
}

#[test]
fn a_conversion_webhook_for_a_crd_preserving_unknown_fields_is_refused() {
    let mut plan = plan();
    plan.crd.spec.preserve_unknown_fields = Some(true);
    refused(
        plan,
        Rule::ConversionCrdPreservesUnknownFields,
        "preserveUnknownFields: true",
    );
}

#[test]
fn duplicate_generate_names_are_refused() {
    let mut plan = plan();
    let name = plan.csv.spec.webhookdefinitions[0].generate_name.clone();
    plan.csv.spec.webhookdefinitions[1].generate_name = name;
    refused(plan, Rule::DuplicateGenerateName, "webhookdefinitions[0]");
}

#[test]
fn a_deployment_name_that_names_no_deployment_is_refused() {
    let mut plan = plan();
    plan.csv.spec.webhookdefinitions[0].deployment_name = "controller-manager".to_string();
    refused(plan, Rule::UnknownDeployment, "\"controller-manager\"");
}

#[test]
fn admission_review_versions_without_v1_are_refused() {
    let mut plan = plan();
    plan.csv.spec.webhookdefinitions[1].admission_review_versions = vec!["v1beta1".to_string()];
    refused(plan, Rule::ReviewVersionsWithoutV1, "[v1beta1]");
}

#[test]
fn side_effects_other_than_none_are_refused() {
    for side_effects in [Some("Some"), Some("Unknown"), None] {
        let mut plan = plan();
        plan.csv.spec.webhookdefinitions[0].side_effects = side_effects.map(str::to_string);
        refused(plan, Rule::SideEffects, side_effects.unwrap_or("(unset)"));
    }
}

#[test]
fn a_webhook_path_the_server_does_not_route_is_refused() {
    let mut plan = plan();
    plan.csv.spec.webhookdefinitions[0].webhook_path =
        Some("/mutate-v1beta1-memcached".to_string());
    refused(plan, Rule::UnroutedPath, "/mutate-v1beta1-memcached");
}
