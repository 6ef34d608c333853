//! Declares the operator's webhooks once, and answers a request body sent to one of them.
//!
//! [`WEBHOOKS`] is the table the server routes from and the packaging tool writes
//! `webhookdefinitions` and webhook configurations from: a path, a rule or a port spelled
//! anywhere else is a bug. A body enters at `server`, which hands it to [`answer`]; the body is
//! decoded in `wire`, decided by the pure rules (`crate::admission`, `crate::api::convert`)
//! through `admission` or `conversion`, and answered with what `response` builds.

pub mod admission;
pub mod conversion;
pub mod metrics;
pub mod response;
pub mod server;
pub mod wire;

#[cfg(test)]
mod captured;

use crate::admission::Defaults;
use crate::api;
use response::Reply;

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

/// The `generateName` of every webhook, as OLM and `config/` name the configurations' entries.
pub fn names() -> Vec<&'static str> {
    WEBHOOKS.iter().map(|w| w.generate_name).collect()
}

/// The webhook of a kind.
pub fn webhook(kind: WebhookKind) -> &'static Webhook {
    match kind {
        WebhookKind::Mutating => &WEBHOOKS[0],
        WebhookKind::Validating => &WEBHOOKS[1],
        WebhookKind::Conversion => &WEBHOOKS[2],
    }
}

/// Answers one request body sent to a webhook: a review, or a plain-text error when the body
/// cannot be answered with one.
pub fn answer(kind: WebhookKind, body: &[u8], defaults: &Defaults) -> Reply {
    let webhook = kind.label();
    let answered = match kind {
        WebhookKind::Mutating => admission::mutating(webhook, body, defaults),
        WebhookKind::Validating => admission::validating(webhook, body, defaults),
        WebhookKind::Conversion => conversion::answer(webhook, body),
    };
    answered.unwrap_or_else(|error| {
        tracing::info!(webhook, %error, "bad webhook request");
        Reply::from_error(&error)
    })
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
