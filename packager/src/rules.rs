//! Checks a CSV against the rules OLM enforces when it installs webhooks, so that a bundle OLM
//! would fail is refused before it is written or published.
//!
//! The checks are pure: a CSV, facts about the bundle's CRDs and the paths the webhook server
//! routes go in, every violation comes out. They follow operator-lifecycle-manager's
//! `install/webhook.go` and `operators/olm/operator.go`, and are a little stricter where OLM
//! only compares one spelling (webhook configuration resources are refused as Kind or plural,
//! in any case, and as `*/*`). They say nothing about what `operator-sdk bundle validate`
//! already checks.

use std::collections::BTreeMap;
use std::fmt;

use super::csv::{ALL_NAMESPACES, ClusterServiceVersion, WebhookDescription, webhook_type};

/// A rule OLM enforces on webhook definitions.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Rule {
    /// A rule's apiGroups contains `*`.
    AllGroups,
    /// A rule's apiGroups contains `operators.coreos.com`.
    OlmGroup,
    /// A rule on `admissionregistration.k8s.io` covers webhook configurations.
    WebhookConfigurations,
    /// A conversion webhook with an install mode other than AllNamespaces supported.
    ConversionInstallModes,
    /// A conversion webhook that names no CRD.
    ConversionWithoutCrds,
    /// A conversion webhook for a CRD the CSV does not own.
    ConversionCrdNotOwned,
    /// A conversion webhook for a CRD with `preserveUnknownFields: true`.
    ConversionCrdPreservesUnknownFields,
    /// Two webhook descriptions with the same generateName.
    DuplicateGenerateName,
    /// A deploymentName that names no Deployment of the install strategy.
    UnknownDeployment,
    /// admissionReviewVersions without `v1`.
    ReviewVersionsWithoutV1,
    /// sideEffects other than None or NoneOnDryRun.
    SideEffects,
    /// A webhookPath the webhook server does not route.
    UnroutedPath,
}

impl Rule {
    /// The rule's name, as printed.
    pub fn id(self) -> &'static str {
        match self {
            Rule::AllGroups => "webhook-rules-all-groups",
            Rule::OlmGroup => "webhook-rules-olm-group",
            Rule::WebhookConfigurations => "webhook-rules-webhook-configurations",
            Rule::ConversionInstallModes => "conversion-webhook-install-modes",
            Rule::ConversionWithoutCrds => "conversion-webhook-without-crds",
            Rule::ConversionCrdNotOwned => "conversion-crd-not-owned",
            Rule::ConversionCrdPreservesUnknownFields => "conversion-crd-preserves-unknown-fields",
            Rule::DuplicateGenerateName => "duplicate-generate-name",
            Rule::UnknownDeployment => "unknown-deployment",
            Rule::ReviewVersionsWithoutV1 => "admission-review-versions-without-v1",
            Rule::SideEffects => "side-effects",
            Rule::UnroutedPath => "unrouted-webhook-path",
        }
    }
}

impl fmt::Display for Rule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.id())
    }
}

/// One broken rule, naming the webhook description that breaks it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Violation {
    /// Which rule.
    pub rule: Rule,
    /// The webhook description's generateName (or its index when it has none).
    pub webhook: String,
    /// What is wrong, naming the field and the offending value.
    pub message: String,
}

impl fmt::Display for Violation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}: webhook {}: {}",
            self.rule, self.webhook, self.message
        )
    }
}

/// What the rules need to know about a CRD of the bundle.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CrdFacts {
    /// `<plural>.<group>`.
    pub name: String,
    /// `spec.preserveUnknownFields`, false when unset.
    pub preserve_unknown_fields: bool,
}

/// Which webhook paths the server behind the CSV routes.
#[derive(Clone, Copy, Debug)]
pub enum Routes<'a> {
    /// Unknown (another operator's bundle): paths are not checked.
    Unknown,
    /// Exactly these.
    Only(&'a [&'a str]),
}

/// The OLM group no webhook may intercept.
const OLM_GROUP: &str = "operators.coreos.com";
/// The group of webhook configurations.
const ADMISSION_GROUP: &str = "admissionregistration.k8s.io";
/// Spellings of the webhook configuration resources, lowercased (Kind and plural).
const WEBHOOK_CONFIGURATION_RESOURCES: &[&str] = &[
    "mutatingwebhookconfiguration",
    "mutatingwebhookconfigurations",
    "validatingwebhookconfiguration",
    "validatingwebhookconfigurations",
];

/// Returns every rule the CSV's webhook definitions break, in definition order.
pub fn check(csv: &ClusterServiceVersion, crds: &[CrdFacts], routes: Routes<'_>) -> Vec<Violation> {
    let mut violations = Vec::new();
    let mut seen: BTreeMap<&str, usize> = BTreeMap::new();
    for (index, webhook) in csv.spec.webhookdefinitions.iter().enumerate() {
        let name = if webhook.generate_name.is_empty() {
            format!("#{index}")
        } else {
            webhook.generate_name.clone()
        };
        let mut report = |rule: Rule, message: String| {
            violations.push(Violation {
                rule,
                webhook: name.clone(),
                message,
            })
        };
        if let Some(first) = seen.insert(webhook.generate_name.as_str(), index) {
            report(
                Rule::DuplicateGenerateName,
                format!(
                    "generateName {:?} is also used by webhookdefinitions[{first}]; OLM needs it unique",
                    webhook.generate_name
                ),
            );
        }
        check_rules(webhook, &mut report);
        check_deployment(csv, webhook, &mut report);
        check_review_versions(webhook, &mut report);
        check_side_effects(webhook, &mut report);
        check_path(webhook, routes, &mut report);
        if webhook.kind == webhook_type::CONVERSION {
            check_conversion(csv, crds, webhook, &mut report);
        }
    }
    violations
}

fn check_rules(webhook: &WebhookDescription, report: &mut impl FnMut(Rule, String)) {
    for (i, rule) in webhook.rules.iter().enumerate() {
        let groups = rule.api_groups.iter().flatten();
        for group in groups {
            if group == "*" {
                report(
                    Rule::AllGroups,
                    format!(
                        "rules[{i}].apiGroups contains \"*\": webhook rules cannot include all groups"
                    ),
                );
            } else if group == OLM_GROUP {
                report(
                    Rule::OlmGroup,
                    format!(
                        "rules[{i}].apiGroups contains {OLM_GROUP}: webhook rules cannot include the OLM group"
                    ),
                );
            } else if group == ADMISSION_GROUP {
                for resource in rule.resources.iter().flatten() {
                    if covers_webhook_configurations(resource) {
                        report(
                            Rule::WebhookConfigurations,
                            format!(
                                "rules[{i}] on {ADMISSION_GROUP} lists resource {resource:?}: webhook rules cannot include \
                                 MutatingWebhookConfiguration or ValidatingWebhookConfiguration resources"
                            ),
                        );
                    }
                }
            }
        }
    }
}

/// Whether a rule's resource matches a webhook configuration: a wildcard, or either
/// configuration (or one of its subresources) spelled as Kind or plural, in any case.
fn covers_webhook_configurations(resource: &str) -> bool {
    let resource = resource.trim().to_ascii_lowercase();
    let base = resource.split('/').next().unwrap_or_default();
    base == "*" || WEBHOOK_CONFIGURATION_RESOURCES.contains(&base)
}

fn check_deployment(
    csv: &ClusterServiceVersion,
    webhook: &WebhookDescription,
    report: &mut impl FnMut(Rule, String),
) {
    if !csv.deployment_names().any(|d| d == webhook.deployment_name) {
        let known: Vec<&str> = csv.deployment_names().collect();
        report(
            Rule::UnknownDeployment,
            format!(
                "deploymentName {:?} names no deployment of spec.install (deployments: [{}])",
                webhook.deployment_name,
                known.join(", ")
            ),
        );
    }
}

fn check_review_versions(webhook: &WebhookDescription, report: &mut impl FnMut(Rule, String)) {
    if !webhook.admission_review_versions.iter().any(|v| v == "v1") {
        report(
            Rule::ReviewVersionsWithoutV1,
            format!(
                "admissionReviewVersions [{}] does not include v1, the only version current API servers send",
                webhook.admission_review_versions.join(", ")
            ),
        );
    }
}

fn check_side_effects(webhook: &WebhookDescription, report: &mut impl FnMut(Rule, String)) {
    match webhook.side_effects.as_deref() {
        Some("None") | Some("NoneOnDryRun") => {}
        other => report(
            Rule::SideEffects,
            format!(
                "sideEffects {}: admissionregistration/v1 accepts only None or NoneOnDryRun",
                other.unwrap_or("(unset)")
            ),
        ),
    }
}

fn check_path(
    webhook: &WebhookDescription,
    routes: Routes<'_>,
    report: &mut impl FnMut(Rule, String),
) {
    if let Routes::Only(paths) = routes {
        let path = webhook.webhook_path.as_deref().unwrap_or("/");
        if !paths.contains(&path) {
            report(
                Rule::UnroutedPath,
                format!(
                    "webhookPath {path} is not routed by the webhook server (routes: {})",
                    paths.join(", ")
                ),
            );
        }
    }
}

fn check_conversion(
    csv: &ClusterServiceVersion,
    crds: &[CrdFacts],
    webhook: &WebhookDescription,
    report: &mut impl FnMut(Rule, String),
) {
    let other_modes: Vec<&str> = csv
        .spec
        .install_modes
        .iter()
        .filter(|m| m.supported && m.mode != ALL_NAMESPACES)
        .map(|m| m.mode.as_str())
        .collect();
    if !other_modes.is_empty() || !csv.supports(ALL_NAMESPACES) {
        let supported: Vec<&str> = csv
            .spec
            .install_modes
            .iter()
            .filter(|m| m.supported)
            .map(|m| m.mode.as_str())
            .collect();
        report(
            Rule::ConversionInstallModes,
            format!(
                "a conversion webhook requires AllNamespaces to be the only supported install mode \
                 (supported: [{}])",
                supported.join(", ")
            ),
        );
    }
    if webhook.conversion_crds.is_empty() {
        report(
            Rule::ConversionWithoutCrds,
            "conversionCRDs is empty: a conversion webhook must name the CRDs it converts"
                .to_string(),
        );
    }
    for name in &webhook.conversion_crds {
        let owned = csv
            .spec
            .customresourcedefinitions
            .owned
            .iter()
            .any(|o| &o.name == name);
        if !owned {
            report(
                Rule::ConversionCrdNotOwned,
                format!(
                    "conversionCRDs names {name}, which spec.customresourcedefinitions.owned does not list"
                ),
            );
        }
        if crds
            .iter()
            .any(|crd| &crd.name == name && crd.preserve_unknown_fields)
        {
            report(
                Rule::ConversionCrdPreservesUnknownFields,
                format!(
                    "conversionCRDs names {name}, whose CRD sets spec.preserveUnknownFields: true; \
                     conversion needs structural pruning"
                ),
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::csv::{DeploymentSpecNamed, InstallMode};

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

    #[test]
    fn a_fine_webhook_breaks_nothing_and_unknown_routes_are_not_checked() {
        let csv = csv_with(fine_webhook(), &[("AllNamespaces", true)]);
        assert_eq!(check(&csv, &[], Routes::Unknown), vec![]);
        assert_eq!(check(&csv, &[], Routes::Only(&["/validate"])), vec![]);
        let unrouted = check(&csv, &[], Routes::Only(&["/other"]));
        assert_eq!(unrouted.len(), 1);
        assert_eq!(unrouted[0].rule, Rule::UnroutedPath);
    }

    #[test]
    fn a_violation_prints_its_rule_its_webhook_and_what_is_wrong() {
        let mut webhook = fine_webhook();
        webhook.side_effects = Some("Some".to_string());
        let csv = csv_with(webhook, &[("AllNamespaces", true)]);
        let violations = check(&csv, &[], Routes::Unknown);
        assert_eq!(
            violations[0].to_string(),
            "side-effects: webhook vthing.example.com: sideEffects Some: admissionregistration/v1 \
             accepts only None or NoneOnDryRun"
        );
    }

    #[test]
    fn a_webhook_without_a_name_is_named_by_its_index() {
        let mut webhook = fine_webhook();
        webhook.generate_name.clear();
        webhook.admission_review_versions = vec!["v1beta1".to_string()];
        let csv = csv_with(webhook, &[("AllNamespaces", true)]);
        assert_eq!(check(&csv, &[], Routes::Unknown)[0].webhook, "#0");
    }

    #[test]
    fn a_conversion_webhook_needs_all_namespaces_supported() {
        let mut webhook = fine_webhook();
        webhook.kind = webhook_type::CONVERSION.to_string();
        webhook.conversion_crds = vec!["things.example.com".to_string()];
        let csv = csv_with(webhook, &[("AllNamespaces", false), ("OwnNamespace", true)]);
        let rules: Vec<Rule> = check(&csv, &[], Routes::Unknown)
            .iter()
            .map(|v| v.rule)
            .collect();
        assert!(rules.contains(&Rule::ConversionInstallModes), "{rules:?}");
        assert!(rules.contains(&Rule::ConversionCrdNotOwned), "{rules:?}");
    }

    #[test]
    fn webhook_configurations_are_matched_in_any_spelling_but_other_resources_are_not() {
        for resource in [
            "*",
            "*/*",
            "*/status",
            "MutatingWebhookConfiguration",
            "validatingwebhookconfigurations",
            "VALIDATINGWEBHOOKCONFIGURATIONS/status",
        ] {
            assert!(covers_webhook_configurations(resource), "{resource}");
        }
        for resource in [
            "validatingadmissionpolicies",
            "mutatingadmissionpolicybindings",
        ] {
            assert!(!covers_webhook_configurations(resource), "{resource}");
        }
    }
}
