//! Translates AdmissionReview and ConversionReview bodies into calls of the pure admission and
//! conversion functions, and their results into review responses.
//!
//! This is the thin wire adapter: it decodes (`admission.k8s.io/v1` AdmissionReview,
//! `apiextensions.k8s.io/v1` ConversionReview), checks that the request is about a
//! `cache.f2367556.dev/v1beta1` Memcached, calls `admission` or `api::convert`, and serialises
//! the response once. It holds no rules of its own and knows nothing of HTTP beyond the status
//! code of a body it cannot answer with a review.
//!
//! Responses follow controller-runtime: an allowed request has `status.code` 200; a denial has
//! `allowed: false`, code 403, reason `Forbidden` and the validator's message; a request that
//! cannot be judged (an object of the wrong kind or shape) has `allowed: false` and code 400.

use http::StatusCode;
use kube::core::admission::{
    AdmissionRequest, AdmissionResponse, AdmissionReview,
    META_API_VERSION_V1 as ADMISSION_API_VERSION, META_KIND as ADMISSION_KIND, Operation,
};
use kube::core::conversion::{ConversionRequest, ConversionResponse, ConversionReview};
use kube::core::{DynamicObject, Status, TypeMeta};
use serde_json::Value;

use crate::admission::defaults::{Defaults, default_spec};
use crate::admission::validate::{
    Denial, Warnings, validate_create, validate_delete, validate_update,
};
use crate::api::{self, convert, v1beta1};
use crate::telemetry::Decision;
use crate::webhook::WebhookKind;

/// The `apiVersion` of the ConversionReview served (kube-core keeps its own constant private).
const CONVERSION_API_VERSION: &str = "apiextensions.k8s.io/v1";
/// The `kind` of a ConversionReview.
const CONVERSION_KIND: &str = "ConversionReview";

/// The `Content-Type` of review responses.
pub const JSON_CONTENT_TYPE: &str = "application/json";
/// The `Content-Type` of error messages.
pub const TEXT_CONTENT_TYPE: &str = "text/plain; charset=utf-8";

/// Why a body could not be answered with a review at all.
#[derive(Debug, thiserror::Error)]
pub enum ReviewError {
    /// The body is not JSON of the review's shape.
    #[error("malformed {expected}: {source}")]
    Malformed {
        /// The review expected, e.g. `admission.k8s.io/v1 AdmissionReview`.
        expected: String,
        /// What the decoder said.
        #[source]
        source: serde_json::Error,
    },
    /// The body is a review of another kind or version.
    #[error("expected {expected}, got {found}")]
    WrongReview {
        /// The review expected.
        expected: String,
        /// The `apiVersion` and `kind` of the body.
        found: String,
    },
    /// The review carries no request.
    #[error("{expected} has no request")]
    MissingRequest {
        /// The review expected.
        expected: String,
    },
    /// The response could not be serialised.
    #[error("cannot serialise the response: {0}")]
    Serialize(#[source] serde_json::Error),
}

impl ReviewError {
    /// The HTTP status answering this error.
    pub fn status(&self) -> StatusCode {
        match self {
            ReviewError::Serialize(_) => StatusCode::INTERNAL_SERVER_ERROR,
            _ => StatusCode::BAD_REQUEST,
        }
    }
}

/// An answer to one webhook request body.
#[derive(Debug)]
pub struct Reply {
    /// The HTTP status.
    pub status: StatusCode,
    /// The `Content-Type` of `body`.
    pub content_type: &'static str,
    /// A serialised review, or an error message.
    pub body: Vec<u8>,
    /// What was decided, when a review was answered.
    pub decision: Option<Decision>,
}

impl Reply {
    fn review(body: Vec<u8>, decision: Decision) -> Self {
        Reply {
            status: StatusCode::OK,
            content_type: JSON_CONTENT_TYPE,
            body,
            decision: Some(decision),
        }
    }

    /// A plain-text error answer.
    pub fn error(status: StatusCode, message: impl Into<String>) -> Self {
        let mut body = message.into().into_bytes();
        body.push(b'\n');
        Reply {
            status,
            content_type: TEXT_CONTENT_TYPE,
            body,
            decision: None,
        }
    }
}

/// Answers one request body sent to a webhook.
///
/// Once the review is decoded, every log line is emitted in a `review` span carrying the
/// webhook and the request's uid, operation and object (`namespace/name`), or for a
/// conversion its uid, desired version and object count.
pub fn answer(kind: WebhookKind, body: &[u8], defaults: &Defaults) -> Reply {
    let webhook = kind.label();
    let answered = match kind {
        WebhookKind::Mutating => admit(webhook, body, |request| mutate(request, defaults)),
        WebhookKind::Validating => admit(webhook, body, validate),
        WebhookKind::Conversion => convert_review(webhook, body),
    };
    match answered {
        Ok(reply) => reply,
        Err(error) => {
            tracing::info!(webhook, %error, "bad webhook request");
            Reply::error(error.status(), error.to_string())
        }
    }
}

fn expected(api_version: &str, kind: &str) -> String {
    format!("{api_version} {kind}")
}

/// Turns a decoding failure into the most useful error: a review of the wrong kind or
/// version is named as such, anything else is malformed.
fn decode_error(
    body: &[u8],
    source: serde_json::Error,
    api_version: &str,
    kind: &str,
) -> ReviewError {
    match serde_json::from_slice::<TypeMeta>(body) {
        Ok(types) if types.api_version != api_version || types.kind != kind => {
            ReviewError::WrongReview {
                expected: expected(api_version, kind),
                found: expected(&types.api_version, &types.kind),
            }
        }
        _ => ReviewError::Malformed {
            expected: expected(api_version, kind),
            source,
        },
    }
}

fn check_types(types: &TypeMeta, api_version: &str, kind: &str) -> Result<(), ReviewError> {
    if types.api_version == api_version && types.kind == kind {
        Ok(())
    } else {
        Err(ReviewError::WrongReview {
            expected: expected(api_version, kind),
            found: expected(&types.api_version, &types.kind),
        })
    }
}

/// Why an admission request cannot be judged: answered with `allowed: false`, code 400.
struct Unjudgeable(String);

/// Decodes an AdmissionReview, lets `decide` answer its request, and serialises the response.
fn admit(
    webhook: &'static str,
    body: &[u8],
    decide: impl FnOnce(
        &mut AdmissionRequest<DynamicObject>,
    ) -> Result<(AdmissionResponse, Decision), Unjudgeable>,
) -> Result<Reply, ReviewError> {
    let review: AdmissionReview<DynamicObject> = serde_json::from_slice(body)
        .map_err(|source| decode_error(body, source, ADMISSION_API_VERSION, ADMISSION_KIND))?;
    check_types(&review.types, ADMISSION_API_VERSION, ADMISSION_KIND)?;
    let mut request: AdmissionRequest<DynamicObject> =
        review.try_into().map_err(|_| ReviewError::MissingRequest {
            expected: expected(ADMISSION_API_VERSION, ADMISSION_KIND),
        })?;
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
    let (response, decision) = match decide(&mut request) {
        Ok(decided) => decided,
        Err(Unjudgeable(message)) => {
            tracing::info!(reason = %message, "cannot judge the request");
            let mut response = AdmissionResponse::from(&request).deny(message);
            response.result.code = StatusCode::BAD_REQUEST.as_u16();
            (response, Decision::Denied)
        }
    };
    match decision {
        Decision::Denied => tracing::info!(reason = %response.result.message, "denied"),
        Decision::Allowed => tracing::debug!("allowed"),
        Decision::Patched => tracing::debug!("allowed with a patch"),
    }
    let body = serde_json::to_vec(&response.into_review()).map_err(ReviewError::Serialize)?;
    Ok(Reply::review(body, decision))
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
    object: Option<DynamicObject>,
) -> Result<v1beta1::Memcached, Unjudgeable> {
    let mut object = object.ok_or_else(|| Unjudgeable(format!("request.{field} is missing")))?;
    let expected_api_version = api::api_version(api::STORAGE_VERSION);
    match &object.types {
        Some(types) if types.api_version == expected_api_version && types.kind == api::KIND => {}
        Some(types) => {
            return Err(Unjudgeable(format!(
                "request.{field}: expected {expected_api_version} {}, got {} {}",
                api::KIND,
                types.api_version,
                types.kind
            )));
        }
        None => {
            return Err(Unjudgeable(format!(
                "request.{field}: apiVersion and kind are missing, expected {expected_api_version} {}",
                api::KIND
            )));
        }
    }
    let mut take = |key: &str| {
        object
            .data
            .as_object_mut()
            .and_then(|data| data.remove(key))
    };
    let spec = match take("spec") {
        None | Some(Value::Null) => v1beta1::MemcachedSpec::default(),
        Some(spec) => serde_path_to_error::deserialize(spec).map_err(|error| {
            Unjudgeable(format!(
                "request.{field}.spec.{}: {}",
                error.path(),
                error.inner()
            ))
        })?,
    };
    let status = match take("status") {
        None | Some(Value::Null) => None,
        Some(status) => Some(serde_path_to_error::deserialize(status).map_err(|error| {
            Unjudgeable(format!(
                "request.{field}.status.{}: {}",
                error.path(),
                error.inner()
            ))
        })?),
    };
    Ok(v1beta1::Memcached {
        metadata: object.metadata,
        spec,
        status,
    })
}

fn allowed(request: &AdmissionRequest<DynamicObject>) -> AdmissionResponse {
    let mut response = AdmissionResponse::from(request);
    response.result.code = StatusCode::OK.as_u16();
    response
}

/// Defaults the object's spec and answers with the JSON patch from the object before to the
/// object after, or with no patch at all when defaulting changes nothing.
fn mutate(
    request: &mut AdmissionRequest<DynamicObject>,
    defaults: &Defaults,
) -> Result<(AdmissionResponse, Decision), Unjudgeable> {
    check_request_kind(request)?;
    if !matches!(request.operation, Operation::Create | Operation::Update) {
        return Ok((allowed(request), Decision::Allowed));
    }
    let had_spec = request
        .object
        .as_ref()
        .is_some_and(|o| o.data.get("spec").is_some_and(Value::is_object));
    let object = memcached("object", request.object.take())?;
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
fn validate(
    request: &mut AdmissionRequest<DynamicObject>,
) -> Result<(AdmissionResponse, Decision), Unjudgeable> {
    check_request_kind(request)?;
    let verdict: Result<Warnings, Denial> = match request.operation {
        Operation::Create => validate_create(&memcached("object", request.object.take())?),
        Operation::Update => validate_update(
            &memcached("oldObject", request.old_object.take())?,
            &memcached("object", request.object.take())?,
        ),
        Operation::Delete => validate_delete(&memcached("oldObject", request.old_object.take())?),
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
        Err(denial) => {
            let mut response = AdmissionResponse::from(&*request).deny(denial.message);
            response.result.code = StatusCode::FORBIDDEN.as_u16();
            response.result.reason = "Forbidden".to_string();
            (response, Decision::Denied)
        }
    })
}

/// Decodes a ConversionReview, converts every object or none, and serialises the response.
fn convert_review(webhook: &'static str, body: &[u8]) -> Result<Reply, ReviewError> {
    let review: ConversionReview = serde_json::from_slice(body)
        .map_err(|source| decode_error(body, source, CONVERSION_API_VERSION, CONVERSION_KIND))?;
    check_types(&review.types, CONVERSION_API_VERSION, CONVERSION_KIND)?;
    let mut request =
        ConversionRequest::try_from(review).map_err(|_| ReviewError::MissingRequest {
            expected: expected(CONVERSION_API_VERSION, CONVERSION_KIND),
        })?;
    let span = tracing::info_span!(
        "review",
        webhook,
        uid = %request.uid,
        desired_api_version = %request.desired_api_version,
        objects = request.objects.len(),
    );
    let _entered = span.enter();
    let objects = std::mem::take(&mut request.objects);
    let desired = request.desired_api_version.clone();
    let response = ConversionResponse::for_request(request);
    let converted: Result<Vec<Value>, String> = convert::desired_version(&desired)
        .map_err(|error| error.to_string())
        .and_then(|_| {
            objects
                .into_iter()
                .enumerate()
                .map(|(position, object)| {
                    convert::convert_nth(object, &desired, position)
                        .map_err(|error| error.to_string())
                })
                .collect()
        });
    let (response, decision) = match converted {
        Ok(objects) => {
            tracing::debug!("converted");
            (response.success(objects), Decision::Allowed)
        }
        Err(message) => {
            tracing::info!(reason = %message, "conversion failed");
            (
                response.failure(Status::failure(&message, "")),
                Decision::Denied,
            )
        }
    };
    let body = serde_json::to_vec(&response.into_review()).map_err(ReviewError::Serialize)?;
    Ok(Reply::review(body, decision))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An AdmissionReview as a v1.33 API server sends it for `kubectl apply` of a new
    /// Memcached (uid and timestamps from a kind cluster).
    const CREATE_REVIEW: &str = r#"{"kind":"AdmissionReview","apiVersion":"admission.k8s.io/v1","request":{"uid":"3e1c7b1a-5f7e-4c43-9c55-0a4c1a7e2f11","kind":{"group":"cache.f2367556.dev","version":"v1beta1","kind":"Memcached"},"resource":{"group":"cache.f2367556.dev","version":"v1beta1","resource":"memcacheds"},"requestKind":{"group":"cache.f2367556.dev","version":"v1beta1","kind":"Memcached"},"requestResource":{"group":"cache.f2367556.dev","version":"v1beta1","resource":"memcacheds"},"name":"sessions","namespace":"shop","operation":"CREATE","userInfo":{"username":"kubernetes-admin","groups":["kubeadm:cluster-admins","system:authenticated"]},"object":{"apiVersion":"cache.f2367556.dev/v1beta1","kind":"Memcached","metadata":{"annotations":{"kubectl.kubernetes.io/last-applied-configuration":"{\"apiVersion\":\"cache.f2367556.dev/v1beta1\",\"kind\":\"Memcached\",\"metadata\":{\"annotations\":{},\"name\":\"sessions\",\"namespace\":\"shop\"},\"spec\":{\"replicas\":3}}\n"},"creationTimestamp":"2026-11-20T09:14:02Z","generation":1,"managedFields":[{"apiVersion":"cache.f2367556.dev/v1beta1","fieldsType":"FieldsV1","fieldsV1":{"f:metadata":{"f:annotations":{".":{},"f:kubectl.kubernetes.io/last-applied-configuration":{}}},"f:spec":{".":{},"f:replicas":{}}},"manager":"kubectl-client-side-apply","operation":"Update","time":"2026-11-20T09:14:02Z"}],"name":"sessions","namespace":"shop","uid":"8b0f5f9e-2d0a-4a57-a0c1-6f2b3f1d9a44"},"spec":{"replicas":3}},"oldObject":null,"dryRun":false,"options":{"kind":"CreateOptions","apiVersion":"meta.k8s.io/v1","fieldManager":"kubectl-client-side-apply","fieldValidation":"Strict"}}}"#;

    /// A ConversionReview as the API server sends it to read a v1beta1 object as v1alpha1.
    const CONVERSION_REVIEW: &str = r#"{"kind":"ConversionReview","apiVersion":"apiextensions.k8s.io/v1","request":{"uid":"0f6b1a3c-7d7e-4b0a-8a55-2c9d4e6f7a81","desiredAPIVersion":"cache.f2367556.dev/v1alpha1","objects":[{"apiVersion":"cache.f2367556.dev/v1beta1","kind":"Memcached","metadata":{"creationTimestamp":"2026-11-20T09:14:02Z","generation":1,"name":"sessions","namespace":"shop","resourceVersion":"1712","uid":"8b0f5f9e-2d0a-4a57-a0c1-6f2b3f1d9a44"},"spec":{"replicas":3,"service":{"port":11211}}}]}}"#;

    fn response_of(reply: &Reply) -> Value {
        let review: Value = serde_json::from_slice(&reply.body).expect("a JSON review");
        review["response"].clone()
    }

    fn with_request(edit: impl FnOnce(&mut Value)) -> Vec<u8> {
        let mut review: Value = serde_json::from_str(CREATE_REVIEW).expect("valid JSON");
        edit(&mut review["request"]);
        serde_json::to_vec(&review).expect("serialises")
    }

    fn defaults() -> Defaults {
        Defaults {
            image: "registry.example/memcached:1.6".to_string(),
        }
    }

    #[test]
    fn a_captured_create_review_decodes_into_a_memcached() {
        let review: AdmissionReview<DynamicObject> =
            serde_json::from_str(CREATE_REVIEW).expect("decodes");
        let request: AdmissionRequest<DynamicObject> = review.try_into().expect("has a request");
        let object = memcached("object", request.object)
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
            validate_create(&object).expect_err("1000 replicas are refused")
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

    #[test]
    fn a_captured_conversion_review_converts_every_object() {
        let reply = answer(
            WebhookKind::Conversion,
            CONVERSION_REVIEW.as_bytes(),
            &defaults(),
        );
        assert_eq!(reply.status, StatusCode::OK);
        assert_eq!(reply.decision, Some(Decision::Allowed));
        let response = response_of(&reply);
        assert_eq!(response["uid"], "0f6b1a3c-7d7e-4b0a-8a55-2c9d4e6f7a81");
        assert_eq!(response["result"]["status"], "Success");
        let objects = response["convertedObjects"].as_array().expect("objects");
        assert_eq!(objects.len(), 1);
        assert_eq!(objects[0]["apiVersion"], "cache.f2367556.dev/v1alpha1");
    }

    #[test]
    fn an_unknown_desired_version_fails_the_conversion_naming_it() {
        let body = CONVERSION_REVIEW.replace(
            "\"desiredAPIVersion\":\"cache.f2367556.dev/v1alpha1\"",
            "\"desiredAPIVersion\":\"cache.f2367556.dev/v9\"",
        );
        let reply = answer(WebhookKind::Conversion, body.as_bytes(), &defaults());
        assert_eq!(reply.decision, Some(Decision::Denied));
        let response = response_of(&reply);
        assert_eq!(response["result"]["status"], "Failure");
        let message = response["result"]["message"].as_str().unwrap_or_default();
        assert!(message.contains("cache.f2367556.dev/v9"), "{message}");
        assert_eq!(response["convertedObjects"], serde_json::json!([]));
    }
}
