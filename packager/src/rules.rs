//! Checks a CSV against the rules its installers enforce on webhooks, so that a bundle one of
//! them would fail is refused before it is written or published.
//!
//! Each finding names who refuses it ([`Enforcer`]):
//! - **OLM v0**: olm-operator fails the CSV (`operators/olm/operator.go`,
//!   `install/webhook.go`), or the API server refuses a configuration OLM v0 writes from it.
//!   The OLM end-to-end tests install one bundle variant per OLM v0 rule through the real OLM
//!   and check that it fails there, and that a bundle with only other findings installs.
//! - **OLM v1**: operator-controller refuses the registry+v1 bundle (its bundle validators and
//!   renderer), or the API server refuses what it would apply.
//! - **this operator**: both OLMs would install it, but this operator's server would not answer
//!   (a path it does not route, a review version it does not speak). Checked only on this
//!   operator's own bundle.
//!
//! The checks are pure: a CSV, facts about the bundle's CRDs and the paths the webhook server
//! routes go in, every violation comes out. Spellings are compared exactly as each enforcer
//! compares them. They say nothing about what `operator-sdk bundle validate` already checks.

use std::collections::BTreeMap;
use std::fmt;

use super::csv::{ALL_NAMESPACES, ClusterServiceVersion, WebhookDescription, webhook_type};

/// Who refuses a bundle that breaks a rule.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Enforcer {
    /// OLM v0 (olm-operator, or the API server refusing what it writes).
    OlmV0,
    /// OLM v1 (operator-controller, or the API server refusing what it applies).
    OlmV1,
    /// This operator's webhook server.
    ThisOperator,
}

impl Enforcer {
    /// As printed.
    pub fn label(self) -> &'static str {
        match self {
            Enforcer::OlmV0 => "OLM v0",
            Enforcer::OlmV1 => "OLM v1",
            Enforcer::ThisOperator => "this operator",
        }
    }

    /// As printed in JSON.
    pub fn id(self) -> &'static str {
        match self {
            Enforcer::OlmV0 => "olm-v0",
            Enforcer::OlmV1 => "olm-v1",
            Enforcer::ThisOperator => "this-operator",
        }
    }
}

impl fmt::Display for Enforcer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.label())
    }
}

/// Every enforcer, in the order reports list them.
pub const ENFORCERS: &[Enforcer] = &[Enforcer::OlmV0, Enforcer::OlmV1, Enforcer::ThisOperator];

/// Refused by both OLMs.
const BOTH: &[Enforcer] = &[Enforcer::OlmV0, Enforcer::OlmV1];
/// Refused by OLM v0 only.
const V0: &[Enforcer] = &[Enforcer::OlmV0];
/// Refused by OLM v1 only.
const V1: &[Enforcer] = &[Enforcer::OlmV1];
/// Refused by this operator's server only.
const OURS: &[Enforcer] = &[Enforcer::ThisOperator];

/// A rule on webhook definitions.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Rule {
    /// A rule's apiGroups contains `*`.
    AllGroups,
    /// A rule's apiGroups contains `operators.coreos.com` (OLM v0's group).
    OlmGroup,
    /// A rule's apiGroups contains `olm.operatorframework.io` (OLM v1's group).
    OlmV1Group,
    /// A rule on `admissionregistration.k8s.io` covers webhook configurations.
    WebhookConfigurations,
    /// A conversion webhook in a CSV that does not support AllNamespaces alone.
    ConversionInstallModes,
    /// A conversion webhook that names no CRD.
    ConversionWithoutCrds,
    /// A conversion webhook for a CRD the CSV does not own.
    ConversionCrdNotOwned,
    /// A conversion webhook for a CRD with `preserveUnknownFields: true`.
    ConversionCrdPreservesUnknownFields,
    /// Two conversion webhooks for the same CRD.
    ConversionCrdTwice,
    /// Two webhook descriptions with the same generateName.
    DuplicateGenerateName,
    /// A generateName that is not a DNS-1123 subdomain.
    InvalidGenerateName,
    /// An admission webhook's generateName with fewer than three dot-separated segments.
    UnqualifiedGenerateName,
    /// An admission webhook's generateName longer than a label value may be (63).
    GenerateNameTooLong,
    /// A deploymentName that names no Deployment of the install strategy.
    UnknownDeployment,
    /// admissionReviewVersions with no version the API server speaks (v1, v1beta1).
    ReviewVersionsUnknown,
    /// admissionReviewVersions without `v1`, the only version this operator's server speaks.
    ReviewVersionsWithoutV1,
    /// An admission webhook's sideEffects other than None or NoneOnDryRun.
    SideEffects,
    /// A webhookPath the webhook server does not route.
    UnroutedPath,
    /// The CSV does not support the AllNamespaces install mode.
    AllNamespacesUnsupported,
    /// The CSV owns an aggregated API service.
    ApiServiceDefinitions,
}

impl Rule {
    /// The rule's name, as printed.
    pub fn id(self) -> &'static str {
        match self {
            Rule::AllGroups => "webhook-rules-all-groups",
            Rule::OlmGroup => "webhook-rules-olm-group",
            Rule::OlmV1Group => "webhook-rules-olm-v1-group",
            Rule::WebhookConfigurations => "webhook-rules-webhook-configurations",
            Rule::ConversionInstallModes => "conversion-webhook-install-modes",
            Rule::ConversionWithoutCrds => "conversion-webhook-without-crds",
            Rule::ConversionCrdNotOwned => "conversion-crd-not-owned",
            Rule::ConversionCrdPreservesUnknownFields => "conversion-crd-preserves-unknown-fields",
            Rule::ConversionCrdTwice => "conversion-crd-in-two-webhooks",
            Rule::DuplicateGenerateName => "duplicate-generate-name",
            Rule::InvalidGenerateName => "generate-name-not-dns-1123",
            Rule::UnqualifiedGenerateName => "generate-name-not-qualified",
            Rule::GenerateNameTooLong => "generate-name-too-long",
            Rule::UnknownDeployment => "unknown-deployment",
            Rule::ReviewVersionsUnknown => "admission-review-versions-unknown",
            Rule::ReviewVersionsWithoutV1 => "admission-review-versions-without-v1",
            Rule::SideEffects => "side-effects",
            Rule::UnroutedPath => "unrouted-webhook-path",
            Rule::AllNamespacesUnsupported => "all-namespaces-unsupported",
            Rule::ApiServiceDefinitions => "apiservice-definitions",
        }
    }
}

impl fmt::Display for Rule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.id())
    }
}

/// One broken rule, naming the webhook description that breaks it and who refuses it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Violation {
    /// Which rule.
    pub rule: Rule,
    /// Who refuses it; never empty.
    pub enforcers: Vec<Enforcer>,
    /// The webhook description's generateName (or its index when it has none); `csv` for a
    /// finding about the CSV as a whole.
    pub webhook: String,
    /// What is wrong, naming the field and the offending value.
    pub message: String,
}

impl Violation {
    /// Whether `enforcer` refuses it.
    pub fn refused_by(&self, enforcer: Enforcer) -> bool {
        self.enforcers.contains(&enforcer)
    }
}

impl fmt::Display for Violation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let enforcers: Vec<&str> = self.enforcers.iter().map(|e| e.label()).collect();
        let subject = if self.webhook == CSV_SUBJECT {
            "csv".to_string()
        } else {
            format!("webhook {}", self.webhook)
        };
        write!(
            f,
            "{} [{}]: {subject}: {}",
            self.rule,
            enforcers.join(", "),
            self.message
        )
    }
}

/// The subject of a finding about the CSV as a whole.
const CSV_SUBJECT: &str = "";

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
    /// Unknown (another operator's bundle): this operator's rules are not checked.
    Unknown,
    /// Exactly these: the bundle is this operator's.
    Only(&'a [&'a str]),
}

/// OLM v0's group, which no webhook of an OLM v0 bundle may intercept.
const OLM_GROUP: &str = "operators.coreos.com";
/// OLM v1's group, which no admission webhook of an OLM v1 bundle may intercept.
const OLM_V1_GROUP: &str = "olm.operatorframework.io";
/// The group of webhook configurations.
const ADMISSION_GROUP: &str = "admissionregistration.k8s.io";
/// The resources OLM v0 refuses in a rule on [`ADMISSION_GROUP`], compared exactly.
const OLM_V0_WEBHOOK_RESOURCES: &[&str] = &[
    "*",
    "MutatingWebhookConfiguration",
    "ValidatingWebhookConfiguration",
];
/// The resources OLM v1 refuses in a rule on [`ADMISSION_GROUP`], compared lowercased.
const OLM_V1_WEBHOOK_RESOURCES: &[&str] = &[
    "*",
    "mutatingwebhookconfiguration",
    "mutatingwebhookconfigurations",
    "validatingwebhookconfiguration",
    "validatingwebhookconfigurations",
];
/// The longest label value Kubernetes accepts.
const LABEL_VALUE_MAX: usize = 63;
/// The AdmissionReview and ConversionReview versions the API server sends.
const REVIEW_VERSIONS: &[&str] = &["v1", "v1beta1"];

/// Collects findings.
struct Findings {
    violations: Vec<Violation>,
}

impl Findings {
    fn report(&mut self, rule: Rule, enforcers: &[Enforcer], webhook: &str, message: String) {
        self.violations.push(Violation {
            rule,
            enforcers: enforcers.to_vec(),
            webhook: webhook.to_string(),
            message,
        });
    }
}

/// Returns every rule the CSV breaks: first the CSV's own, then each webhook definition's, in
/// definition order.
pub fn check(csv: &ClusterServiceVersion, crds: &[CrdFacts], routes: Routes<'_>) -> Vec<Violation> {
    let mut findings = Findings {
        violations: Vec::new(),
    };
    check_csv(csv, &mut findings);
    let mut seen: BTreeMap<&str, (usize, &str)> = BTreeMap::new();
    let mut converted: BTreeMap<&str, usize> = BTreeMap::new();
    for (index, webhook) in csv.spec.webhookdefinitions.iter().enumerate() {
        let name = if webhook.generate_name.is_empty() {
            format!("#{index}")
        } else {
            webhook.generate_name.clone()
        };
        let admission = webhook.kind != webhook_type::CONVERSION;
        if let Some((first, kind)) = seen.insert(
            webhook.generate_name.as_str(),
            (index, webhook.kind.as_str()),
        ) {
            // OLM v0 wants generateName unique in the CSV, OLM v1 unique per webhook type.
            let enforcers = if kind == webhook.kind { BOTH } else { V0 };
            findings.report(
                Rule::DuplicateGenerateName,
                enforcers,
                &name,
                format!(
                    "generateName {:?} is also used by webhookdefinitions[{first}] ({kind})",
                    webhook.generate_name
                ),
            );
        }
        check_name(webhook, admission, &name, &mut findings);
        check_rules(webhook, admission, &name, &mut findings);
        check_deployment(csv, webhook, &name, &mut findings);
        check_review_versions(webhook, routes, &name, &mut findings);
        if admission {
            check_side_effects(webhook, &name, &mut findings);
        }
        check_path(webhook, routes, &name, &mut findings);
        if !admission {
            check_conversion(csv, crds, webhook, &name, &mut findings);
            for crd in &webhook.conversion_crds {
                if let Some(first) = converted.insert(crd.as_str(), index) {
                    findings.report(
                        Rule::ConversionCrdTwice,
                        V1,
                        &name,
                        format!(
                            "conversionCRDs names {crd}, which webhookdefinitions[{first}] also converts"
                        ),
                    );
                }
            }
        }
    }
    findings.violations
}

/// What OLM v1 refuses of the CSV as a whole.
fn check_csv(csv: &ClusterServiceVersion, findings: &mut Findings) {
    if !csv.supports(ALL_NAMESPACES) {
        findings.report(
            Rule::AllNamespacesUnsupported,
            V1,
            CSV_SUBJECT,
            format!(
                "installModes do not support AllNamespaces (supported: [{}]); OLM v1 installs \
                 bundles for all namespaces",
                supported_modes(csv).join(", ")
            ),
        );
    }
    for api in &csv.spec.apiservicedefinitions.owned {
        findings.report(
            Rule::ApiServiceDefinitions,
            V1,
            CSV_SUBJECT,
            format!(
                "apiservicedefinitions.owned lists {}: OLM v1 does not install API services",
                if api.name.is_empty() {
                    format!("{}.{}", api.version, api.group)
                } else {
                    api.name.clone()
                }
            ),
        );
    }
}

fn supported_modes(csv: &ClusterServiceVersion) -> Vec<&str> {
    csv.spec
        .install_modes
        .iter()
        .filter(|m| m.supported)
        .map(|m| m.mode.as_str())
        .collect()
}

/// Whether `name` is a DNS-1123 subdomain, as Kubernetes validates object names.
fn is_dns1123_subdomain(name: &str) -> bool {
    let label_ok = |label: &str| {
        let bytes = label.as_bytes();
        !bytes.is_empty()
            && bytes
                .iter()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || *b == b'-')
            && bytes[0] != b'-'
            && bytes[bytes.len() - 1] != b'-'
    };
    !name.is_empty() && name.len() <= 253 && name.split('.').all(label_ok)
}

fn check_name(webhook: &WebhookDescription, admission: bool, name: &str, findings: &mut Findings) {
    if !is_dns1123_subdomain(&webhook.generate_name) {
        // OLM v1 validates every type's name; both OLMs name the admission webhook after it,
        // and the API server refuses a webhook name that is not a DNS-1123 subdomain.
        let enforcers = if admission { BOTH } else { V1 };
        findings.report(
            Rule::InvalidGenerateName,
            enforcers,
            name,
            format!(
                "generateName {:?} is not a DNS-1123 subdomain (lowercase letters, digits, '-' \
                 and '.', at most 253 characters)",
                webhook.generate_name
            ),
        );
    } else if admission && webhook.generate_name.len() > LABEL_VALUE_MAX {
        findings.report(
            Rule::GenerateNameTooLong,
            V0,
            name,
            format!(
                "generateName {:?} is {} characters long; OLM v0 labels the webhook configuration \
                 with it (olm.webhook-description-generate-name), and a label value holds at most \
                 {LABEL_VALUE_MAX}",
                webhook.generate_name,
                webhook.generate_name.len()
            ),
        );
    } else if admission && webhook.generate_name.split('.').count() < 3 {
        findings.report(
            Rule::UnqualifiedGenerateName,
            BOTH,
            name,
            format!(
                "generateName {:?} has fewer than three dot-separated segments; the API server \
                 wants an admission webhook's name fully qualified",
                webhook.generate_name
            ),
        );
    }
}

fn check_rules(webhook: &WebhookDescription, admission: bool, name: &str, findings: &mut Findings) {
    // OLM v1 ignores a conversion webhook's rules; OLM v0 checks every description's.
    let both = if admission { BOTH } else { V0 };
    for (i, rule) in webhook.rules.iter().enumerate() {
        for group in rule.api_groups.iter().flatten() {
            if group == "*" {
                findings.report(
                    Rule::AllGroups,
                    both,
                    name,
                    format!(
                        "rules[{i}].apiGroups contains \"*\": webhook rules cannot include all groups"
                    ),
                );
            } else if group == OLM_GROUP {
                findings.report(
                    Rule::OlmGroup,
                    V0,
                    name,
                    format!(
                        "rules[{i}].apiGroups contains {OLM_GROUP}: webhook rules cannot include the OLM group"
                    ),
                );
            } else if group == OLM_V1_GROUP && admission {
                findings.report(
                    Rule::OlmV1Group,
                    V1,
                    name,
                    format!(
                        "rules[{i}].apiGroups contains {OLM_V1_GROUP}: admission webhook rules cannot \
                         include OLM v1's group"
                    ),
                );
            } else if group == ADMISSION_GROUP {
                for resource in rule.resources.iter().flatten() {
                    let v0 = OLM_V0_WEBHOOK_RESOURCES.contains(&resource.as_str());
                    let v1 = admission
                        && OLM_V1_WEBHOOK_RESOURCES.contains(&resource.to_lowercase().as_str());
                    let enforcers = match (v0, v1) {
                        (true, true) => BOTH,
                        (true, false) => V0,
                        (false, true) => V1,
                        (false, false) => continue,
                    };
                    findings.report(
                        Rule::WebhookConfigurations,
                        enforcers,
                        name,
                        format!(
                            "rules[{i}] on {ADMISSION_GROUP} lists resource {resource:?}: webhook rules \
                             cannot include MutatingWebhookConfiguration or \
                             ValidatingWebhookConfiguration resources"
                        ),
                    );
                }
            }
        }
    }
}

fn check_deployment(
    csv: &ClusterServiceVersion,
    webhook: &WebhookDescription,
    name: &str,
    findings: &mut Findings,
) {
    if !csv.deployment_names().any(|d| d == webhook.deployment_name) {
        let known: Vec<&str> = csv.deployment_names().collect();
        // OLM v1 refuses the bundle. OLM v0 never creates the webhook, so it cannot compute the
        // Deployment it expects ("calculated deployment install is bad") and reinstalls the
        // CSV without end: it never Succeeds.
        findings.report(
            Rule::UnknownDeployment,
            BOTH,
            name,
            format!(
                "deploymentName {:?} names no deployment of spec.install (deployments: [{}])",
                webhook.deployment_name,
                known.join(", ")
            ),
        );
    }
}

fn check_review_versions(
    webhook: &WebhookDescription,
    routes: Routes<'_>,
    name: &str,
    findings: &mut Findings,
) {
    let versions = &webhook.admission_review_versions;
    if !versions
        .iter()
        .any(|v| REVIEW_VERSIONS.contains(&v.as_str()))
    {
        findings.report(
            Rule::ReviewVersionsUnknown,
            BOTH,
            name,
            format!(
                "admissionReviewVersions [{}] lists no version the API server sends ({})",
                versions.join(", "),
                REVIEW_VERSIONS.join(", ")
            ),
        );
    } else if matches!(routes, Routes::Only(_)) && !versions.iter().any(|v| v == "v1") {
        findings.report(
            Rule::ReviewVersionsWithoutV1,
            OURS,
            name,
            format!(
                "admissionReviewVersions [{}] does not include v1, the only version this \
                 operator's server answers",
                versions.join(", ")
            ),
        );
    }
}

fn check_side_effects(webhook: &WebhookDescription, name: &str, findings: &mut Findings) {
    match webhook.side_effects.as_deref() {
        Some("None") | Some("NoneOnDryRun") => {}
        other => findings.report(
            Rule::SideEffects,
            BOTH,
            name,
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
    name: &str,
    findings: &mut Findings,
) {
    if let Routes::Only(paths) = routes {
        let path = webhook.webhook_path.as_deref().unwrap_or("/");
        if !paths.contains(&path) {
            findings.report(
                Rule::UnroutedPath,
                OURS,
                name,
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
    name: &str,
    findings: &mut Findings,
) {
    let modes = &csv.spec.install_modes;
    // OLM v0 (`isSingletonOperator`): AllNamespaces not declared unsupported, nothing else
    // supported. OLM v1: exactly AllNamespaces supported.
    let v0_singleton = modes.iter().all(|m| {
        if m.mode == ALL_NAMESPACES {
            m.supported
        } else {
            !m.supported
        }
    });
    let supported = supported_modes(csv);
    let v1_singleton =
        csv.supports(ALL_NAMESPACES) && supported.iter().all(|m| *m == ALL_NAMESPACES);
    let enforcers = match (v0_singleton, v1_singleton) {
        (true, true) => None,
        (false, false) => Some(BOTH),
        (false, true) => Some(V0),
        (true, false) => Some(V1),
    };
    if let Some(enforcers) = enforcers {
        findings.report(
            Rule::ConversionInstallModes,
            enforcers,
            name,
            format!(
                "a conversion webhook requires AllNamespaces to be the only supported install mode \
                 (supported: [{}])",
                supported.join(", ")
            ),
        );
    }
    if webhook.conversion_crds.is_empty() {
        findings.report(
            Rule::ConversionWithoutCrds,
            V0,
            name,
            "conversionCRDs is empty: a conversion webhook must name the CRDs it converts"
                .to_string(),
        );
    }
    for crd in &webhook.conversion_crds {
        let owned = csv
            .spec
            .customresourcedefinitions
            .owned
            .iter()
            .any(|o| &o.name == crd);
        if !owned {
            findings.report(
                Rule::ConversionCrdNotOwned,
                BOTH,
                name,
                format!(
                    "conversionCRDs names {crd}, which spec.customresourcedefinitions.owned does not list"
                ),
            );
        }
        if crds
            .iter()
            .any(|facts| &facts.name == crd && facts.preserve_unknown_fields)
        {
            findings.report(
                Rule::ConversionCrdPreservesUnknownFields,
                BOTH,
                name,
                format!(
                    "conversionCRDs names {crd}, whose CRD sets spec.preserveUnknownFields: true; \
                     conversion needs structural pruning"
                ),
            );
        }
    }
}

#[cfg(test)]
mod tests {
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
}
