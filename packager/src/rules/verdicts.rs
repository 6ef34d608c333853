//! What the rules of `rules` say: who enforces each rule, the rules, the violations found,
//! and the facts about a bundle the rules need beside its CSV.

use std::fmt;

/// The subject of a finding about the CSV as a whole.
pub(crate) const CSV_SUBJECT: &str = "";

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
pub(crate) const BOTH: &[Enforcer] = &[Enforcer::OlmV0, Enforcer::OlmV1];
/// Refused by OLM v0 only.
pub(crate) const V0: &[Enforcer] = &[Enforcer::OlmV0];
/// Refused by OLM v1 only.
pub(crate) const V1: &[Enforcer] = &[Enforcer::OlmV1];
/// Refused by this operator's server only.
pub(crate) const OURS: &[Enforcer] = &[Enforcer::ThisOperator];

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
