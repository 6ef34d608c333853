//! Declares the operator's webhooks once: the table the server routes from and the
//! generator writes `webhookdefinitions` and webhook configurations from.
//!
//! A path, a rule or a port spelled anywhere else is a bug: the server, the CSV and the
//! `config/` manifests all read this table.

pub mod certs;
mod metadata;
pub mod review;
pub mod server;

use crate::api;

/// What a webhook does.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum WebhookKind {
    /// Fills in defaults (MutatingAdmissionWebhook).
    Mutating,
    /// Admits or denies, with warnings (ValidatingAdmissionWebhook).
    Validating,
    /// Converts between API versions (ConversionWebhook).
    Conversion,
}

impl WebhookKind {
    /// The `type` OLM's WebhookDescription uses.
    pub fn olm_type(self) -> &'static str {
        match self {
            WebhookKind::Mutating => "MutatingAdmissionWebhook",
            WebhookKind::Validating => "ValidatingAdmissionWebhook",
            WebhookKind::Conversion => "ConversionWebhook",
        }
    }

    /// A short lowercase label for metrics and logs.
    pub fn label(self) -> &'static str {
        match self {
            WebhookKind::Mutating => "mutating",
            WebhookKind::Validating => "validating",
            WebhookKind::Conversion => "conversion",
        }
    }
}

/// One webhook: where it is served and how the API server is told to call it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Webhook {
    /// What it does.
    pub kind: WebhookKind,
    /// The URL path the server routes and the API server calls.
    pub path: &'static str,
    /// OLM's generateName (and the webhook's name in its configuration): unique and fully
    /// qualified.
    pub generate_name: &'static str,
    /// Admission operations it receives (empty for conversion).
    pub operations: &'static [&'static str],
    /// The API version whose objects it receives (admission webhooks get v1beta1; the API
    /// server converts older versions first under matchPolicy Equivalent).
    pub api_version: &'static str,
    /// `failurePolicy`.
    pub failure_policy: &'static str,
    /// `sideEffects`.
    pub side_effects: &'static str,
    /// `matchPolicy`.
    pub match_policy: &'static str,
    /// `timeoutSeconds`.
    pub timeout_seconds: i32,
}

/// The review versions every webhook speaks.
pub const REVIEW_VERSIONS: &[&str] = &["v1"];

/// Every webhook of the operator.
pub const WEBHOOKS: [Webhook; 3] = [
    Webhook {
        kind: WebhookKind::Mutating,
        path: "/mutate-cache-f2367556-dev-v1beta1-memcached",
        generate_name: "mmemcached-v1beta1.cache.f2367556.dev",
        operations: &["CREATE", "UPDATE"],
        api_version: api::STORAGE_VERSION,
        failure_policy: "Fail",
        side_effects: "None",
        match_policy: "Equivalent",
        timeout_seconds: 10,
    },
    Webhook {
        kind: WebhookKind::Validating,
        path: "/validate-cache-f2367556-dev-v1beta1-memcached",
        generate_name: "vmemcached-v1beta1.cache.f2367556.dev",
        operations: &["CREATE", "UPDATE", "DELETE"],
        api_version: api::STORAGE_VERSION,
        failure_policy: "Fail",
        side_effects: "None",
        match_policy: "Equivalent",
        timeout_seconds: 10,
    },
    Webhook {
        kind: WebhookKind::Conversion,
        path: "/convert",
        generate_name: "cmemcached.cache.f2367556.dev",
        operations: &[],
        api_version: api::STORAGE_VERSION,
        failure_policy: "Fail",
        side_effects: "None",
        match_policy: "Equivalent",
        timeout_seconds: 10,
    },
];

/// The webhook of a kind.
pub fn webhook(kind: WebhookKind) -> &'static Webhook {
    match kind {
        WebhookKind::Mutating => &WEBHOOKS[0],
        WebhookKind::Validating => &WEBHOOKS[1],
        WebhookKind::Conversion => &WEBHOOKS[2],
    }
}

/// The webhook served at a path, if any.
pub fn by_path(path: &str) -> Option<&'static Webhook> {
    WEBHOOKS.iter().find(|w| w.path == path)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_kind_has_exactly_one_webhook() {
        for kind in [
            WebhookKind::Mutating,
            WebhookKind::Validating,
            WebhookKind::Conversion,
        ] {
            assert_eq!(WEBHOOKS.iter().filter(|w| w.kind == kind).count(), 1);
            assert_eq!(webhook(kind).kind, kind);
        }
    }

    #[test]
    fn paths_and_generate_names_are_unique() {
        for (i, a) in WEBHOOKS.iter().enumerate() {
            for b in &WEBHOOKS[i + 1..] {
                assert_ne!(a.path, b.path);
                assert_ne!(a.generate_name, b.generate_name);
            }
        }
    }

    #[test]
    fn paths_are_found_by_path() {
        assert_eq!(
            by_path("/convert").map(|w| w.kind),
            Some(WebhookKind::Conversion)
        );
        assert_eq!(by_path("/nope"), None);
    }
}
