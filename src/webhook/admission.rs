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
mod tests {
    use http::StatusCode;
    use kube::core::admission::AdmissionReview;
    use serde_json::Value;

    use super::*;
    use crate::webhook::captured::{defaults, response_of};
    use crate::webhook::{WebhookKind, answer};
    use testkit::captured::{CONVERSION_REVIEW, CREATE_REVIEW, create_review_with as with_request};

    #[test]
    fn a_captured_create_review_decodes_into_a_memcached() {
        let review: AdmissionReview<DynamicObject> =
            serde_json::from_str(CREATE_REVIEW).expect("decodes");
        let request: AdmissionRequest<DynamicObject> = review.try_into().expect("has a request");
        let object = memcached("object", request.object.map(AdmissionObject::from_dynamic))
            .map_err(|Unjudgeable(message)| message)
            .expect("a Memcached");
        assert_eq!(object.spec.replicas, Some(3));
        assert_eq!(object.metadata.name.as_deref(), Some("sessions"));
        assert_eq!(request.uid, "3e1c7b1a-5f7e-4c43-9c55-0a4c1a7e2f11");
    }

    #[test]
    fn the_validator_answers_with_the_uid_and_code_200() {
        let reply = answer(
            WebhookKind::Validating,
            CREATE_REVIEW.as_bytes(),
            &defaults(),
        );
        assert_eq!(reply.status, StatusCode::OK);
        let review: Value = serde_json::from_slice(&reply.body).expect("JSON");
        assert_eq!(review["apiVersion"], "admission.k8s.io/v1");
        assert_eq!(review["kind"], "AdmissionReview");
        let response = &review["response"];
        assert_eq!(response["uid"], "3e1c7b1a-5f7e-4c43-9c55-0a4c1a7e2f11");
        assert_eq!(response["allowed"], true);
        assert_eq!(response["status"]["code"], 200);
    }

    #[test]
    fn a_denial_has_code_403_reason_forbidden_and_the_validators_message() {
        let body = with_request(|request| request["object"]["spec"]["replicas"] = 1000.into());
        let reply = answer(WebhookKind::Validating, &body, &defaults());
        assert_eq!(reply.decision, Some(Decision::Denied));
        let response = response_of(&reply);
        let expected = {
            let mut object: v1beta1::Memcached = serde_json::from_value(
                serde_json::from_slice::<Value>(&body).expect("JSON")["request"]["object"].clone(),
            )
            .expect("a Memcached");
            object.spec.replicas = Some(1000);
            validate_create(&object, &defaults().allowed_issuers)
                .expect_err("1000 replicas are refused")
        };
        assert_eq!(response["allowed"], false);
        assert_eq!(response["status"]["code"], 403);
        assert_eq!(response["status"]["reason"], "Forbidden");
        assert_eq!(response["status"]["message"], expected.message.as_str());
    }

    #[test]
    fn defaulting_patches_a_sparse_object_and_not_a_defaulted_one() {
        let reply = answer(WebhookKind::Mutating, CREATE_REVIEW.as_bytes(), &defaults());
        assert_eq!(reply.decision, Some(Decision::Patched));
        let response = response_of(&reply);
        assert_eq!(response["patchType"], "JSONPatch");
        // kube-core writes the patch bytes as a JSON array of numbers, which the API server
        // decodes into its []byte as readily as base64.
        let bytes: Vec<u8> = serde_json::from_value(response["patch"].clone()).expect("bytes");
        let patch: json_patch::Patch = serde_json::from_slice(&bytes).expect("a JSON patch");
        let mut object: Value =
            serde_json::from_str::<Value>(CREATE_REVIEW).expect("JSON")["request"]["object"]
                .clone();
        json_patch::patch(&mut object, &patch).expect("the patch applies");
        let expected = default_spec(
            &v1beta1::MemcachedSpec {
                replicas: Some(3),
                ..Default::default()
            },
            &defaults(),
        );
        assert_eq!(
            object["spec"],
            serde_json::to_value(&expected).expect("serialises")
        );

        let spec = default_spec(
            &v1beta1::MemcachedSpec {
                replicas: Some(3),
                ..Default::default()
            },
            &defaults(),
        );
        let body = with_request(|request| {
            request["object"]["spec"] = serde_json::to_value(&spec).expect("serialises")
        });
        let reply = answer(WebhookKind::Mutating, &body, &defaults());
        assert_eq!(reply.decision, Some(Decision::Allowed));
        let response = response_of(&reply);
        assert_eq!(response.get("patch"), None);
        assert_eq!(response.get("patchType"), None);
    }

    #[test]
    fn a_pod_is_refused_with_code_400_naming_its_kind() {
        let body = with_request(|request| {
            request["kind"] = serde_json::json!({"group": "", "version": "v1", "kind": "Pod"})
        });
        let reply = answer(WebhookKind::Validating, &body, &defaults());
        assert_eq!(reply.status, StatusCode::OK);
        let response = response_of(&reply);
        assert_eq!(response["allowed"], false);
        assert_eq!(response["status"]["code"], 400);
        let message = response["status"]["message"].as_str().unwrap_or_default();
        assert!(message.contains("v1 Pod"), "{message}");
    }

    #[test]
    fn an_object_of_the_wrong_shape_is_refused_naming_the_field() {
        let body = with_request(|request| request["object"]["spec"]["replicas"] = "three".into());
        let response = response_of(&answer(WebhookKind::Validating, &body, &defaults()));
        assert_eq!(response["status"]["code"], 400);
        let message = response["status"]["message"].as_str().unwrap_or_default();
        assert!(
            message.starts_with("request.object.spec.replicas: "),
            "{message}"
        );
    }

    #[test]
    fn malformed_json_and_wrong_reviews_are_bad_requests() {
        let reply = answer(WebhookKind::Validating, b"{not json", &defaults());
        assert_eq!(reply.status, StatusCode::BAD_REQUEST);
        let text = String::from_utf8_lossy(&reply.body).to_string();
        assert!(
            text.starts_with("malformed admission.k8s.io/v1 AdmissionReview"),
            "{text}"
        );

        let reply = answer(
            WebhookKind::Validating,
            CONVERSION_REVIEW.as_bytes(),
            &defaults(),
        );
        assert_eq!(reply.status, StatusCode::BAD_REQUEST);
        let text = String::from_utf8_lossy(&reply.body).to_string();
        assert_eq!(
            text.trim(),
            "expected admission.k8s.io/v1 AdmissionReview, got apiextensions.k8s.io/v1 ConversionReview"
        );

        let old = CREATE_REVIEW.replace("admission.k8s.io/v1", "admission.k8s.io/v1beta1");
        let reply = answer(WebhookKind::Mutating, old.as_bytes(), &defaults());
        assert_eq!(reply.status, StatusCode::BAD_REQUEST);
        assert!(String::from_utf8_lossy(&reply.body).contains("got admission.k8s.io/v1beta1"));
    }
}
