//! Answers AdmissionReviews for the mutating and validating webhooks: checks that the request
//! is about a `cache.f2367556.dev/v1beta1` Memcached, types its objects, and lets the pure rules
//! of `admission` decide.
//!
//! This is the thin adapter between the wire and the rules: it holds no rule of its own.
//! Defaulting is answered with the JSON patch from the object before `default_spec` to the
//! object after it (no patch when nothing changes); validation with the validator's warnings or
//! its denial. Once the review is decoded, every log line is emitted in a `review` span carrying
//! the webhook and the request's uid, operation and object (`namespace/name`).

use kube::core::DynamicObject;
use kube::core::admission::{AdmissionRequest, AdmissionResponse, Operation};
use serde::de::DeserializeOwned;

use super::response::{Decision, Reply, admission_reply, allowed, forbidden, unjudgeable};
use super::wire::admission::{self as decoder, AdmissionObject, AdmissionObjects};
use super::wire::{Lazy, ReviewError};
use crate::admission::AllowedIssuers;
use crate::admission::defaults::{Defaults, default_spec};
use crate::admission::validate::{
    Denial, Warnings, validate_create, validate_delete, validate_update,
};
use crate::api::{self, v1beta1};

/// Why an admission request cannot be judged: answered with `allowed: false`, code 400.
pub(crate) struct Unjudgeable(pub(crate) String);

/// Answers one AdmissionReview body sent to the mutating webhook.
pub fn mutating(
    webhook: &'static str,
    body: &[u8],
    defaults: &Defaults,
) -> Result<Reply, ReviewError> {
    let (request, objects) = decoder::decode(body)?;
    judge(webhook, &request, objects, |request, objects| {
        mutate(request, objects, defaults)
    })
}

/// Answers one AdmissionReview body sent to the validating webhook; `defaults` holds the
/// issuers the cluster admin allows.
pub fn validating(
    webhook: &'static str,
    body: &[u8],
    defaults: &Defaults,
) -> Result<Reply, ReviewError> {
    let (request, objects) = decoder::decode(body)?;
    judge(webhook, &request, objects, |request, objects| {
        validate(request, objects, &defaults.allowed_issuers)
    })
}

/// Lets `decide` answer a decoded admission request, and serialises the response.
pub(crate) fn judge(
    webhook: &'static str,
    request: &AdmissionRequest<DynamicObject>,
    objects: AdmissionObjects<'_>,
    decide: impl FnOnce(
        &AdmissionRequest<DynamicObject>,
        AdmissionObjects<'_>,
    ) -> Result<(AdmissionResponse, Decision), Unjudgeable>,
) -> Result<Reply, ReviewError> {
    let object = match &request.namespace {
        Some(namespace) => format!("{namespace}/{}", request.name),
        None => request.name.clone(),
    };
    let span = tracing::info_span!(
        "review",
        webhook,
        uid = %request.uid,
        operation = operation_name(&request.operation),
        object = %object,
    );
    let _entered = span.enter();
    let (response, decision) = match decide(request, objects) {
        Ok(decided) => decided,
        Err(Unjudgeable(message)) => {
            tracing::info!(reason = %message, "cannot judge the request");
            (unjudgeable(request, message), Decision::Denied)
        }
    };
    match decision {
        Decision::Denied => tracing::info!(reason = %response.result.message, "denied"),
        Decision::Allowed => tracing::debug!("allowed"),
        Decision::Patched => tracing::debug!("allowed with a patch"),
    }
    admission_reply(response, decision)
}

fn operation_name(operation: &Operation) -> &'static str {
    match operation {
        Operation::Create => "CREATE",
        Operation::Update => "UPDATE",
        Operation::Delete => "DELETE",
        Operation::Connect => "CONNECT",
    }
}

/// Refuses a request about anything but a v1beta1 Memcached.
fn check_request_kind(request: &AdmissionRequest<DynamicObject>) -> Result<(), Unjudgeable> {
    let kind = &request.kind;
    if kind.group == api::GROUP && kind.version == api::STORAGE_VERSION && kind.kind == api::KIND {
        return Ok(());
    }
    let group_version = if kind.group.is_empty() {
        kind.version.clone()
    } else {
        format!("{}/{}", kind.group, kind.version)
    };
    Err(Unjudgeable(format!(
        "request.kind: expected {} {}, got {group_version} {}",
        api::api_version(api::STORAGE_VERSION),
        api::KIND,
        kind.kind
    )))
}

/// Turns `request.object` or `request.oldObject` into a typed Memcached, naming the field and
/// the problem when it is not one. Takes the object by value, so nothing is copied.
fn memcached(
    field: &str,
    object: Option<AdmissionObject<'_>>,
) -> Result<v1beta1::Memcached, Unjudgeable> {
    let object = object.ok_or_else(|| Unjudgeable(format!("request.{field} is missing")))?;
    let expected_api_version = api::api_version(api::STORAGE_VERSION);
    match (&object.api_version, &object.kind) {
        (Some(version), Some(kind)) if *version == expected_api_version && kind == api::KIND => {}
        (Some(version), Some(kind)) => {
            return Err(Unjudgeable(format!(
                "request.{field}: expected {expected_api_version} {}, got {version} {kind}",
                api::KIND,
            )));
        }
        _ => {
            return Err(Unjudgeable(format!(
                "request.{field}: apiVersion and kind are missing, expected {expected_api_version} {}",
                api::KIND
            )));
        }
    }
    let spec = match object.spec {
        None => v1beta1::MemcachedSpec::default(),
        Some(spec) if spec.is_null() => v1beta1::MemcachedSpec::default(),
        Some(spec) => typed(&spec, field, "spec")?,
    };
    let status = match object.status {
        None => None,
        Some(status) if status.is_null() => None,
        Some(status) => Some(typed(&status, field, "status")?),
    };
    Ok(v1beta1::Memcached {
        metadata: object.metadata,
        spec,
        status,
    })
}

/// Types `request.FIELD.PART`, naming the path and the problem when it does not fit. The
/// message is the same whichever decoder read the review.
fn typed<T: DeserializeOwned>(json: &Lazy<'_>, field: &str, part: &str) -> Result<T, Unjudgeable> {
    json.decode().map_err(|error| match error.path {
        None => Unjudgeable(format!("request.{field}.{part}: {}", error.message)),
        Some(path) => Unjudgeable(format!("request.{field}.{part}.{path}: {}", error.message)),
    })
}

/// Defaults the object's spec and answers with the JSON patch from the object before to the
/// object after, or with no patch at all when defaulting changes nothing.
pub(crate) fn mutate(
    request: &AdmissionRequest<DynamicObject>,
    objects: AdmissionObjects<'_>,
    defaults: &Defaults,
) -> Result<(AdmissionResponse, Decision), Unjudgeable> {
    check_request_kind(request)?;
    if !matches!(request.operation, Operation::Create | Operation::Update) {
        return Ok((allowed(request), Decision::Allowed));
    }
    let had_spec = objects
        .object
        .as_ref()
        .is_some_and(|o| o.spec.as_ref().is_some_and(Lazy::is_object));
    let object = memcached("object", objects.object)?;
    let defaulted = default_spec(&object.spec, defaults);
    if defaulted == object.spec {
        return Ok((allowed(request), Decision::Allowed));
    }
    let to_value = |spec: &v1beta1::MemcachedSpec| {
        serde_json::to_value(spec)
            .map_err(|error| Unjudgeable(format!("cannot serialise the spec: {error}")))
    };
    let before = if had_spec {
        serde_json::json!({ "spec": to_value(&object.spec)? })
    } else {
        serde_json::json!({})
    };
    let after = serde_json::json!({ "spec": to_value(&defaulted)? });
    let patch = json_patch::diff(&before, &after);
    if patch.0.is_empty() {
        return Ok((allowed(request), Decision::Allowed));
    }
    let response = allowed(request)
        .with_patch(patch)
        .map_err(|error| Unjudgeable(error.to_string()))?;
    Ok((response, Decision::Patched))
}

/// Calls the validator of the operation and answers with its warnings or its denial.
pub(crate) fn validate(
    request: &AdmissionRequest<DynamicObject>,
    objects: AdmissionObjects<'_>,
    issuers: &AllowedIssuers,
) -> Result<(AdmissionResponse, Decision), Unjudgeable> {
    check_request_kind(request)?;
    let verdict: Result<Warnings, Denial> = match request.operation {
        Operation::Create => validate_create(&memcached("object", objects.object)?, issuers),
        Operation::Update => validate_update(
            &memcached("oldObject", objects.old_object)?,
            &memcached("object", objects.object)?,
            issuers,
        ),
        Operation::Delete => validate_delete(&memcached("oldObject", objects.old_object)?),
        Operation::Connect => Ok(Vec::new()),
    };
    Ok(match verdict {
        Ok(warnings) => {
            let mut response = allowed(request);
            if !warnings.is_empty() {
                response.warnings = Some(warnings);
            }
            (response, Decision::Allowed)
        }
        Err(denial) => (forbidden(request, denial.message), Decision::Denied),
    })
}

#[cfg(test)]
mod tests;
