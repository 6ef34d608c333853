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

mod verdicts;

use std::collections::BTreeMap;

use self::verdicts::{BOTH, CSV_SUBJECT, OURS, V0, V1};
pub use self::verdicts::{CrdFacts, ENFORCERS, Enforcer, Routes, Rule, Violation};
use super::csv::{ALL_NAMESPACES, ClusterServiceVersion, WebhookDescription, webhook_type};

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
mod tests;
