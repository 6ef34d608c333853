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
use k8s_openapi::api::authentication::v1::UserInfo;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::core::admission::{
    AdmissionRequest, AdmissionResponse, AdmissionReview,
    META_API_VERSION_V1 as ADMISSION_API_VERSION, META_KIND as ADMISSION_KIND, Operation,
};
use kube::core::conversion::{ConversionRequest, ConversionResponse, ConversionReview};
use kube::core::{DynamicObject, GroupVersionKind, GroupVersionResource, Status, TypeMeta};
use serde::Deserialize;
use serde::de::{DeserializeOwned, IgnoredAny};
use serde_json::Value;
use serde_json::value::RawValue;

use crate::admission::defaults::{Defaults, default_spec};
use crate::admission::validate::{
    Denial, Warnings, validate_create, validate_delete, validate_update,
};
use crate::api::convert::ShallowObject;
use crate::api::{self, convert, v1beta1};
use crate::telemetry::Decision;
use crate::webhook::WebhookKind;
use crate::webhook::metadata::WireMeta;

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
        WebhookKind::Mutating => admit(webhook, body, |request, objects| {
            mutate(request, objects, defaults)
        }),
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

/// The object and old object of an admission request, with their spec and status still JSON.
#[derive(Default)]
struct Objects<'a> {
    object: Option<ReviewObject<'a>>,
    old_object: Option<ReviewObject<'a>>,
}

/// An object of an admission request: its types and metadata decoded, its spec and status
/// not yet, since they are typed (with the path of any error) only once the request's kind is
/// known to be a Memcached.
struct ReviewObject<'a> {
    types: Option<TypeMeta>,
    metadata: ObjectMeta,
    spec: Option<Json<'a>>,
    status: Option<Json<'a>>,
}

/// A JSON value: the bytes of the body, or already a tree.
enum Json<'a> {
    Raw(&'a RawValue),
    Tree(Value),
}

impl Json<'_> {
    fn is_null(&self) -> bool {
        match self {
            Json::Raw(raw) => raw.get() == "null",
            Json::Tree(value) => value.is_null(),
        }
    }

    fn is_object(&self) -> bool {
        match self {
            Json::Raw(raw) => raw.get().starts_with('{'),
            Json::Tree(value) => value.is_object(),
        }
    }
}

impl ReviewObject<'_> {
    /// Takes `spec` and `status` out of a decoded object.
    fn from_dynamic(object: DynamicObject) -> ReviewObject<'static> {
        let mut data = object.data;
        let mut take = |key: &str| {
            data.as_object_mut()
                .and_then(|data| data.remove(key))
                .map(Json::Tree)
        };
        ReviewObject {
            spec: take("spec"),
            status: take("status"),
            types: object.types,
            metadata: object.metadata,
        }
    }
}

/// The fields of kube's `AdmissionReview<DynamicObject>`, decoded straight from the body.
///
/// kube's types flatten `apiVersion` and `kind` into the review and into each object, which
/// makes serde buffer the whole body into an intermediate tree before decoding it again, and
/// keep each object's spec and status as a second tree. This shape decodes in one pass and
/// leaves spec and status as slices of the body. It requires and checks the same fields: any
/// body it refuses is decoded again by kube's types, so a malformed review gets the very same
/// answer as before.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct WireAdmissionReview<'a> {
    api_version: String,
    kind: String,
    #[serde(borrow)]
    request: Option<WireAdmissionRequest<'a>>,
    #[serde(default)]
    #[allow(dead_code)] // Decoded only to refuse what kube's types refuse.
    response: Option<AdmissionResponse>,
}

/// The fields of kube's `AdmissionRequest<DynamicObject>`; see [`WireAdmissionReview`].
/// `options` is checked and dropped: nothing reads it, and kube reads it into a tree.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct WireAdmissionRequest<'a> {
    uid: String,
    kind: GroupVersionKind,
    resource: GroupVersionResource,
    #[serde(default)]
    sub_resource: Option<String>,
    #[serde(default)]
    request_kind: Option<GroupVersionKind>,
    #[serde(default)]
    request_resource: Option<GroupVersionResource>,
    #[serde(default)]
    request_sub_resource: Option<String>,
    #[serde(default)]
    name: String,
    #[serde(default)]
    namespace: Option<String>,
    operation: Operation,
    user_info: UserInfo,
    #[serde(borrow)]
    object: Option<WireObject<'a>>,
    #[serde(borrow)]
    old_object: Option<WireObject<'a>>,
    #[serde(default)]
    dry_run: bool,
    #[serde(default)]
    #[allow(dead_code)] // Decoded only to refuse what kube's types refuse; no rule reads it.
    options: Option<IgnoredAny>,
}

/// The fields of a `DynamicObject` the webhooks read; see [`WireAdmissionReview`]. The
/// metadata lacks `managedFields`, which is checked and dropped ([`WireMeta`]).
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct WireObject<'a> {
    api_version: Option<String>,
    kind: Option<String>,
    #[serde(default)]
    metadata: WireMeta,
    #[serde(borrow)]
    spec: Option<&'a RawValue>,
    #[serde(borrow)]
    status: Option<&'a RawValue>,
}

impl<'a> WireObject<'a> {
    fn into_review_object(self) -> ReviewObject<'a> {
        let types = match (self.api_version, self.kind) {
            (Some(api_version), Some(kind)) => Some(TypeMeta { api_version, kind }),
            _ => None,
        };
        ReviewObject {
            types,
            metadata: self.metadata.0,
            spec: self.spec.map(Json::Raw),
            status: self.status.map(Json::Raw),
        }
    }
}

/// Decodes the request of an AdmissionReview in one pass, or `None` when the body is not an
/// `admission.k8s.io/v1` AdmissionReview with a request that this shape reads.
fn decode_admission(body: &[u8]) -> Option<(AdmissionRequest<DynamicObject>, Objects<'_>)> {
    let review: WireAdmissionReview<'_> = serde_json::from_slice(body).ok()?;
    if review.api_version != ADMISSION_API_VERSION || review.kind != ADMISSION_KIND {
        return None;
    }
    let wire = review.request?;
    let request = AdmissionRequest {
        types: TypeMeta {
            api_version: review.api_version,
            kind: review.kind,
        },
        uid: wire.uid,
        kind: wire.kind,
        resource: wire.resource,
        sub_resource: wire.sub_resource,
        request_kind: wire.request_kind,
        request_resource: wire.request_resource,
        request_sub_resource: wire.request_sub_resource,
        name: wire.name,
        namespace: wire.namespace,
        operation: wire.operation,
        user_info: wire.user_info,
        object: None,
        old_object: None,
        dry_run: wire.dry_run,
        options: None,
    };
    let objects = Objects {
        object: wire.object.map(WireObject::into_review_object),
        old_object: wire.old_object.map(WireObject::into_review_object),
    };
    Some((request, objects))
}

/// Decodes an AdmissionReview with kube's types: what [`decode_admission`] does not read is
/// answered exactly as kube's decoder and these checks answer it.
fn decode_admission_strictly(
    body: &[u8],
) -> Result<(AdmissionRequest<DynamicObject>, Objects<'static>), ReviewError> {
    let review: AdmissionReview<DynamicObject> = serde_json::from_slice(body)
        .map_err(|source| decode_error(body, source, ADMISSION_API_VERSION, ADMISSION_KIND))?;
    check_types(&review.types, ADMISSION_API_VERSION, ADMISSION_KIND)?;
    let mut request: AdmissionRequest<DynamicObject> =
        review.try_into().map_err(|_| ReviewError::MissingRequest {
            expected: expected(ADMISSION_API_VERSION, ADMISSION_KIND),
        })?;
    let objects = Objects {
        object: request.object.take().map(ReviewObject::from_dynamic),
        old_object: request.old_object.take().map(ReviewObject::from_dynamic),
    };
    Ok((request, objects))
}

/// Decodes an AdmissionReview, lets `decide` answer its request, and serialises the response.
fn admit(
    webhook: &'static str,
    body: &[u8],
    decide: impl FnOnce(
        &AdmissionRequest<DynamicObject>,
        Objects<'_>,
    ) -> Result<(AdmissionResponse, Decision), Unjudgeable>,
) -> Result<Reply, ReviewError> {
    let (request, objects) = match decode_admission(body) {
        Some(decoded) => decoded,
        None => decode_admission_strictly(body)?,
    };
    judge(webhook, &request, objects, decide)
}

/// Lets `decide` answer a decoded admission request, and serialises the response.
fn judge(
    webhook: &'static str,
    request: &AdmissionRequest<DynamicObject>,
    objects: Objects<'_>,
    decide: impl FnOnce(
        &AdmissionRequest<DynamicObject>,
        Objects<'_>,
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
            let mut response = AdmissionResponse::from(request).deny(message);
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
    object: Option<ReviewObject<'_>>,
) -> Result<v1beta1::Memcached, Unjudgeable> {
    let object = object.ok_or_else(|| Unjudgeable(format!("request.{field} is missing")))?;
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
    let spec = match object.spec {
        None => v1beta1::MemcachedSpec::default(),
        Some(spec) if spec.is_null() => v1beta1::MemcachedSpec::default(),
        Some(spec) => typed(spec, field, "spec")?,
    };
    let status = match object.status {
        None => None,
        Some(status) if status.is_null() => None,
        Some(status) => Some(typed(status, field, "status")?),
    };
    Ok(v1beta1::Memcached {
        metadata: object.metadata,
        spec,
        status,
    })
}

/// Types `request.FIELD.PART`, naming the path and the problem when it does not fit.
///
/// Bytes of the body are decoded straight into the type; only when that fails are they read as
/// a tree and decoded again with the path tracked, so the message is the same whichever way
/// the review was decoded.
fn typed<T: DeserializeOwned>(json: Json<'_>, field: &str, part: &str) -> Result<T, Unjudgeable> {
    let tree = match json {
        Json::Raw(raw) => match serde_json::from_str(raw.get()) {
            Ok(typed) => return Ok(typed),
            Err(_) => serde_json::from_str::<Value>(raw.get())
                .map_err(|error| Unjudgeable(format!("request.{field}.{part}: {error}")))?,
        },
        Json::Tree(tree) => tree,
    };
    serde_path_to_error::deserialize(tree).map_err(|error| {
        Unjudgeable(format!(
            "request.{field}.{part}.{}: {}",
            error.path(),
            error.inner()
        ))
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
    request: &AdmissionRequest<DynamicObject>,
    objects: Objects<'_>,
    defaults: &Defaults,
) -> Result<(AdmissionResponse, Decision), Unjudgeable> {
    check_request_kind(request)?;
    if !matches!(request.operation, Operation::Create | Operation::Update) {
        return Ok((allowed(request), Decision::Allowed));
    }
    let had_spec = objects
        .object
        .as_ref()
        .is_some_and(|o| o.spec.as_ref().is_some_and(Json::is_object));
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
fn validate(
    request: &AdmissionRequest<DynamicObject>,
    objects: Objects<'_>,
) -> Result<(AdmissionResponse, Decision), Unjudgeable> {
    check_request_kind(request)?;
    let verdict: Result<Warnings, Denial> = match request.operation {
        Operation::Create => validate_create(&memcached("object", objects.object)?),
        Operation::Update => validate_update(
            &memcached("oldObject", objects.old_object)?,
            &memcached("object", objects.object)?,
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
        Err(denial) => {
            let mut response = AdmissionResponse::from(request).deny(denial.message);
            response.result.code = StatusCode::FORBIDDEN.as_u16();
            response.result.reason = "Forbidden".to_string();
            (response, Decision::Denied)
        }
    })
}

/// The fields of kube's `ConversionReview`, decoded straight from the body; see
/// [`WireAdmissionReview`] for why. Each object is read shallowly ([`ShallowObject`]): its spec,
/// status and metadata other than the annotations stay slices of the body.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct WireConversionReview<'a> {
    api_version: String,
    kind: String,
    #[serde(borrow)]
    request: Option<WireConversionRequest<'a>>,
    #[serde(default)]
    #[allow(dead_code)] // Decoded only to refuse what kube's types refuse.
    response: Option<ConversionResponse>,
}

/// The fields of kube's `ConversionRequest`, the objects read shallowly.
#[derive(Deserialize)]
struct WireConversionRequest<'a> {
    uid: String,
    #[serde(rename = "desiredAPIVersion")]
    desired_api_version: String,
    #[serde(borrow)]
    objects: Vec<ShallowObject<'a>>,
}

/// Decodes the request of a ConversionReview in one pass, or `None` when the body is not an
/// `apiextensions.k8s.io/v1` ConversionReview with a request.
fn decode_conversion(body: &[u8]) -> Option<WireConversionRequest<'_>> {
    let review: WireConversionReview<'_> = serde_json::from_slice(body).ok()?;
    if review.api_version != CONVERSION_API_VERSION || review.kind != CONVERSION_KIND {
        return None;
    }
    review.request
}

/// Decodes a ConversionReview with kube's types: what [`decode_conversion`] does not read is
/// answered exactly as kube's decoder and these checks answer it.
fn decode_conversion_strictly(body: &[u8]) -> Result<ConversionRequest, ReviewError> {
    let review: ConversionReview = serde_json::from_slice(body)
        .map_err(|source| decode_error(body, source, CONVERSION_API_VERSION, CONVERSION_KIND))?;
    check_types(&review.types, CONVERSION_API_VERSION, CONVERSION_KIND)?;
    ConversionRequest::try_from(review).map_err(|_| ReviewError::MissingRequest {
        expected: expected(CONVERSION_API_VERSION, CONVERSION_KIND),
    })
}

/// Decodes a ConversionReview, converts every object or none, and serialises the response.
fn convert_review(webhook: &'static str, body: &[u8]) -> Result<Reply, ReviewError> {
    match decode_conversion(body) {
        Some(request) => answer_conversion(webhook, request, body.len()),
        None => convert_strictly(webhook, body),
    }
}

/// Decodes a ConversionReview with kube's types, converts every object or none, and
/// serialises the response: the answer to what [`decode_conversion`] does not read.
fn convert_strictly(webhook: &'static str, body: &[u8]) -> Result<Reply, ReviewError> {
    let request = decode_conversion_strictly(body)?;
    // Kube's types read the objects into trees; write them out again to read them shallowly.
    let texts: Vec<String> = request.objects.iter().map(Value::to_string).collect();
    let objects = texts
        .iter()
        .map(|text| serde_json::from_str(text))
        .collect::<Result<_, _>>()
        .map_err(|source| ReviewError::Malformed {
            expected: expected(CONVERSION_API_VERSION, CONVERSION_KIND),
            source,
        })?;
    let request = WireConversionRequest {
        uid: request.uid,
        desired_api_version: request.desired_api_version,
        objects,
    };
    answer_conversion(webhook, request, body.len())
}

/// Converts every object of a decoded ConversionReview, or none, and writes the response
/// (about `size` bytes) in one buffer: each object is written straight into it as it is
/// converted, and the buffer goes back to where the objects start when one fails.
fn answer_conversion(
    webhook: &'static str,
    request: WireConversionRequest<'_>,
    size: usize,
) -> Result<Reply, ReviewError> {
    let span = tracing::info_span!(
        "review",
        webhook,
        uid = %request.uid,
        desired_api_version = %request.desired_api_version,
        objects = request.objects.len(),
    );
    let _entered = span.enter();
    let desired = request.desired_api_version;
    // Going down, each object gains the stash annotation: a few hundred bytes.
    let mut body = Vec::with_capacity(size + size / 8 + 1024);
    body.extend_from_slice(br#"{"apiVersion":"#);
    write_json(&mut body, CONVERSION_API_VERSION)?;
    body.extend_from_slice(br#","kind":"#);
    write_json(&mut body, CONVERSION_KIND)?;
    body.extend_from_slice(br#","response":{"uid":"#);
    write_json(&mut body, &request.uid)?;
    body.extend_from_slice(br#","convertedObjects":["#);
    let objects_start = body.len();
    let converted = convert::desired_version(&desired).and_then(|_| {
        request
            .objects
            .into_iter()
            .enumerate()
            .try_for_each(|(position, object)| {
                if position > 0 {
                    body.push(b',');
                }
                convert::write_converted(object, &desired, position, &mut body)
            })
    });
    let (result, decision) = match converted {
        Ok(()) => {
            tracing::debug!("converted");
            (Status::success(), Decision::Allowed)
        }
        Err(error) => {
            let message = error.to_string();
            tracing::info!(reason = %message, "conversion failed");
            body.truncate(objects_start);
            (Status::failure(&message, ""), Decision::Denied)
        }
    };
    body.extend_from_slice(br#"],"result":"#);
    write_json(&mut body, &result)?;
    body.extend_from_slice(b"}}");
    Ok(Reply::review(body, decision))
}

/// Appends `value` as JSON.
fn write_json<T: serde::Serialize + ?Sized>(
    out: &mut Vec<u8>,
    value: &T,
) -> Result<(), ReviewError> {
    serde_json::to_writer(out, value).map_err(ReviewError::Serialize)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::DELETION_PROTECTION_ANNOTATION;
    use crate::api::convert::STASH_ANNOTATION;

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
        let object = memcached("object", request.object.map(ReviewObject::from_dynamic))
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

    /// Answers `body` the way the server did before the one-pass decoder: with kube's types.
    fn answer_strictly(kind: WebhookKind, body: &[u8]) -> Reply {
        let answered = match kind {
            WebhookKind::Conversion => panic!("admission only"),
            _ => decode_admission_strictly(body).and_then(|(request, objects)| match kind {
                WebhookKind::Mutating => judge("mutating", &request, objects, |r, o| {
                    mutate(r, o, &defaults())
                }),
                _ => judge("validating", &request, objects, validate),
            }),
        };
        answered.unwrap_or_else(|error| Reply::error(error.status(), error.to_string()))
    }

    #[test]
    fn the_one_pass_decoder_answers_exactly_as_kubes_types() {
        let bodies = [
            CREATE_REVIEW.as_bytes().to_vec(),
            with_request(|request| request["object"]["spec"]["replicas"] = 1000.into()),
            with_request(|request| request["object"]["spec"]["replicas"] = "three".into()),
            with_request(|request| request["object"]["spec"] = Value::Null),
            with_request(|request| request["object"]["spec"] = serde_json::json!([1])),
            with_request(|request| {
                request["object"]["status"] = serde_json::json!({"replicas": "x"})
            }),
            with_request(|request| request["object"]["apiVersion"] = 5.into()),
            with_request(|request| {
                request["object"].as_object_mut().map(|o| o.remove("kind"));
            }),
            with_request(|request| request["object"]["kind"] = "Pod".into()),
            with_request(|request| request["object"] = Value::Null),
            with_request(|request| request["operation"] = "UPDATE".into()),
            with_request(|request| {
                request["operation"] = "DELETE".into();
                request["oldObject"] = request["object"].take();
            }),
            with_request(|request| request["object"]["metadata"] = Value::Null),
            with_request(|request| request["object"]["metadata"]["name"] = 7.into()),
            with_request(|request| request["userInfo"] = Value::Null),
            with_request(|request| {
                request.as_object_mut().map(|o| o.remove("resource"));
            }),
            CREATE_REVIEW
                .replace("admission.k8s.io/v1", "admission.k8s.io/v1beta1")
                .into_bytes(),
            CREATE_REVIEW
                .replace(
                    r#""spec":{"replicas":3}}"#,
                    r#""spec":{"replicas":3},"spec":{"replicas":4}}"#,
                )
                .into_bytes(),
            br#"{"kind":"AdmissionReview","apiVersion":"admission.k8s.io/v1"}"#.to_vec(),
            b"{not json".to_vec(),
        ];
        assert_fast_answers_as_strict(&bodies);
        assert!(decode_admission(CREATE_REVIEW.as_bytes()).is_some());
        assert!(decode_conversion(CONVERSION_REVIEW.as_bytes()).is_some());
    }

    /// Both admission webhooks answer each body on the fast path exactly as kube's types do.
    fn assert_fast_answers_as_strict(bodies: &[Vec<u8>]) {
        for body in bodies {
            for kind in [WebhookKind::Mutating, WebhookKind::Validating] {
                let fast = answer(kind, body, &defaults());
                let strict = answer_strictly(kind, body);
                let text = String::from_utf8_lossy(body);
                assert_eq!(fast.status, strict.status, "{kind:?} {text}");
                assert_eq!(fast.decision, strict.decision, "{kind:?} {text}");
                assert_eq!(
                    String::from_utf8_lossy(&fast.body),
                    String::from_utf8_lossy(&strict.body),
                    "{kind:?} {text}"
                );
            }
        }
    }

    #[test]
    fn metadata_and_options_the_rules_do_not_read_are_still_checked_as_kubes_types_check_them() {
        let bodies = [
            with_request(|request| request["object"]["metadata"]["managedFields"] = 7.into()),
            with_request(|request| {
                request["object"]["metadata"]["managedFields"][0]["time"] = "noon".into()
            }),
            with_request(|request| {
                request["object"]["metadata"]["managedFields"][0] = serde_json::json!(["x"])
            }),
            with_request(|request| {
                request["object"]["metadata"]["managedFields"][0]["fieldsV1"] =
                    serde_json::json!([1, {"f:x": null}])
            }),
            with_request(|request| request["object"]["metadata"]["managedFields"] = Value::Null),
            with_request(|request| request["object"]["metadata"] = serde_json::json!([])),
            with_request(|request| request["object"]["metadata"]["annotations"] = 7.into()),
            with_request(|request| request["options"] = serde_json::json!([1, 2])),
            with_request(|request| {
                request["object"]["metadata"]["annotations"] = serde_json::json!({
                    STASH_ANNOTATION: "{}", DELETION_PROTECTION_ANNOTATION: "true"})
            }),
            with_request(|request| {
                request["operation"] = "DELETE".into();
                request["object"]["metadata"]["annotations"] =
                    serde_json::json!({DELETION_PROTECTION_ANNOTATION: "true"});
                request["oldObject"] = request["object"].take();
            }),
        ];
        assert_fast_answers_as_strict(&bodies);
    }

    #[test]
    fn the_one_pass_conversion_decoder_reads_what_kubes_types_read() {
        let fast = decode_conversion(CONVERSION_REVIEW.as_bytes()).expect("decodes");
        let strict = decode_conversion_strictly(CONVERSION_REVIEW.as_bytes()).expect("decodes");
        assert_eq!(fast.uid, strict.uid);
        assert_eq!(fast.desired_api_version, strict.desired_api_version);
        let objects: Vec<Value> = fast
            .objects
            .iter()
            .map(|object| object.to_value().expect("JSON"))
            .collect();
        assert_eq!(objects, strict.objects);
        for body in [
            CONVERSION_REVIEW.replace("apiextensions.k8s.io/v1", "apiextensions.k8s.io/v1beta1"),
            r#"{"kind":"ConversionReview","apiVersion":"apiextensions.k8s.io/v1"}"#.to_string(),
            CONVERSION_REVIEW.replace(r#""objects":["#, r#""objects":7,"x":["#),
        ] {
            assert!(decode_conversion(body.as_bytes()).is_none(), "{body}");
        }
    }

    #[test]
    fn the_one_pass_conversion_decoder_answers_exactly_as_kubes_types() {
        let object = |name: &str, spec: Value| {
            serde_json::json!({"apiVersion": "cache.f2367556.dev/v1beta1", "kind": "Memcached",
                "metadata": {"name": name, "namespace": "shop", "managedFields": [{"manager": "kubectl", "fieldsV1": {"f:spec": {}}}]},
                "spec": spec, "status": {"replicas": 1, "conditions": []}})
        };
        let review = |desired: &str, objects: Vec<Value>| {
            serde_json::to_vec(&serde_json::json!({"apiVersion": "apiextensions.k8s.io/v1",
                "kind": "ConversionReview",
                "request": {"uid": "u", "desiredAPIVersion": desired, "objects": objects}}))
            .expect("serialises")
        };
        let bodies = [
            CONVERSION_REVIEW.as_bytes().to_vec(),
            review(
                "cache.f2367556.dev/v1alpha1",
                vec![
                    object(
                        "a",
                        serde_json::json!({"replicas": 2, "image": "memcached:1.6"}),
                    ),
                    object("b", Value::Null),
                ],
            ),
            review(
                "cache.f2367556.dev/v1alpha1",
                vec![
                    object("a", serde_json::json!({})),
                    object("b", serde_json::json!({"replicas": "two"})),
                ],
            ),
            review(
                "cache.f2367556.dev/v1beta1",
                vec![object("a", serde_json::json!({}))],
            ),
            review(
                "cache.f2367556.dev/v1beta1",
                vec![serde_json::json!(["not", "an", "object"])],
            ),
            review("cache.f2367556.dev/v1beta1", vec![]),
            review(
                "cache.f2367556.dev/v9",
                vec![object("a", serde_json::json!({}))],
            ),
        ];
        for body in &bodies {
            let fast = answer(WebhookKind::Conversion, body, &defaults());
            let strict = convert_strictly("conversion", body)
                .unwrap_or_else(|error| Reply::error(error.status(), error.to_string()));
            let text = String::from_utf8_lossy(body);
            assert_eq!(fast.status, strict.status, "{text}");
            assert_eq!(fast.decision, strict.decision, "{text}");
            let fast: Value = serde_json::from_slice(&fast.body).expect("JSON");
            let strict: Value = serde_json::from_slice(&strict.body).expect("JSON");
            assert_eq!(fast, strict, "{text}");
        }
    }

    #[test]
    fn one_bad_object_fails_the_review_naming_it_and_converts_nothing() {
        let body = serde_json::to_vec(&serde_json::json!({"apiVersion": "apiextensions.k8s.io/v1",
            "kind": "ConversionReview",
            "request": {"uid": "u", "desiredAPIVersion": "cache.f2367556.dev/v1alpha1", "objects": [
                {"apiVersion": "cache.f2367556.dev/v1beta1", "kind": "Memcached", "metadata": {"name": "a"}, "spec": {}},
                {"apiVersion": "cache.f2367556.dev/v1beta1", "kind": "Memcached", "spec": {"replicas": "two"}},
            ]}}))
        .expect("serialises");
        let reply = answer(WebhookKind::Conversion, &body, &defaults());
        assert_eq!(reply.status, StatusCode::OK);
        assert_eq!(reply.decision, Some(Decision::Denied));
        let review: Value = serde_json::from_slice(&reply.body).expect("one JSON review");
        assert_eq!(review["apiVersion"], "apiextensions.k8s.io/v1");
        assert_eq!(review["kind"], "ConversionReview");
        let response = &review["response"];
        assert_eq!(response["uid"], "u");
        assert_eq!(response["result"]["status"], "Failure");
        let message = response["result"]["message"].as_str().unwrap_or_default();
        assert!(
            message.starts_with("object #1 (unnamed): spec does not match v1beta1: replicas: "),
            "{message}"
        );
        assert_eq!(response["convertedObjects"], serde_json::json!([]));
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

    /// `body` with `insert` spliced in right after the first `after`.
    fn splice(body: &str, after: &str, insert: &[u8]) -> Vec<u8> {
        let at = body.find(after).expect("present") + after.len();
        let mut bytes = body.as_bytes()[..at].to_vec();
        bytes.extend_from_slice(insert);
        bytes.extend_from_slice(&body.as_bytes()[at..]);
        bytes
    }

    /// Found by fuzzing (`fuzz/regressions/conversion_review/`): serde_json skips a field no
    /// review has without checking that its string is UTF-8, so such a body is answered,
    /// although it is no JSON tree; where a field is read, the byte makes the body malformed.
    #[test]
    fn a_byte_that_is_not_utf8_is_refused_only_where_a_field_is_read() {
        let body = splice(
            CONVERSION_REVIEW,
            r#""request":{"#,
            b"\"note\":\"caf\xe9\",",
        );
        assert!(serde_json::from_slice::<Value>(&body).is_err());
        let reply = answer(WebhookKind::Conversion, &body, &defaults());
        assert_eq!(reply.status, StatusCode::OK);
        assert_eq!(reply.decision, Some(Decision::Allowed));
        let converted = response_of(&reply)["convertedObjects"].clone();
        assert_eq!(converted.as_array().map(Vec::len), Some(1));

        let body = splice(CONVERSION_REVIEW, r#""uid":"0f6b"#, b"\xe9");
        let reply = answer(WebhookKind::Conversion, &body, &defaults());
        assert_eq!(reply.status, StatusCode::BAD_REQUEST);
        let text = String::from_utf8_lossy(&reply.body).to_string();
        assert!(
            text.starts_with("malformed apiextensions.k8s.io/v1 ConversionReview: "),
            "{text}"
        );
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
