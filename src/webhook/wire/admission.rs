//! Decodes AdmissionReviews into a request and its objects, in one pass when it can and with
//! kube's types when it must.
//!
//! kube's `AdmissionReview<DynamicObject>` flattens `apiVersion` and `kind` into the review and
//! into each object, which makes serde buffer the whole body into an intermediate tree before
//! decoding it again, and keeps each object's spec and status as a second tree. [`decode`]
//! reads the same fields in one pass and leaves spec and status as [`Lazy`] slices of the body;
//! it requires and checks the same fields, and anything it refuses is decoded again by
//! [`decode_strictly`], so a malformed review gets the very same answer either way.

use k8s_openapi::api::authentication::v1::UserInfo;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::core::admission::{AdmissionRequest, AdmissionResponse, AdmissionReview, Operation};
use kube::core::{DynamicObject, GroupVersionKind, GroupVersionResource, TypeMeta};
use serde::Deserialize;
use serde::de::IgnoredAny;

use super::lazy::Lazy;
use super::metadata::without_managed_fields;
use super::{
    ADMISSION_API_VERSION, ADMISSION_KIND, ReviewError, check_types, decode_error, expected,
};

/// An object of an admission request: its types and metadata decoded (without
/// `managedFields`), its spec and status not yet, since they are typed (with the path of any
/// error) only once the request is known to be about a Memcached.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AdmissionObject<'a> {
    /// `apiVersion`, when given.
    pub api_version: Option<String>,
    /// `kind`, when given.
    pub kind: Option<String>,
    /// `metadata` without `managedFields`.
    #[serde(default, deserialize_with = "without_managed_fields")]
    pub metadata: ObjectMeta,
    /// `spec`, as it came.
    #[serde(borrow)]
    pub spec: Option<Lazy<'a>>,
    /// `status`, as it came.
    #[serde(borrow)]
    pub status: Option<Lazy<'a>>,
}

impl AdmissionObject<'_> {
    /// Takes `spec` and `status` out of an object kube's types decoded.
    pub(crate) fn from_dynamic(object: DynamicObject) -> AdmissionObject<'static> {
        let mut data = object.data;
        let mut take = |key: &str| {
            data.as_object_mut()
                .and_then(|data| data.remove(key))
                .map(Lazy::Value)
        };
        let (api_version, kind) = match object.types {
            Some(types) => (Some(types.api_version), Some(types.kind)),
            None => (None, None),
        };
        AdmissionObject {
            spec: take("spec"),
            status: take("status"),
            api_version,
            kind,
            metadata: object.metadata,
        }
    }
}

/// The object and old object of an admission request.
#[derive(Default)]
pub struct AdmissionObjects<'a> {
    /// `request.object`.
    pub object: Option<AdmissionObject<'a>>,
    /// `request.oldObject`.
    pub old_object: Option<AdmissionObject<'a>>,
}

/// A decoded admission request: kube's request without its objects, and the objects.
pub type Decoded<'a> = (AdmissionRequest<DynamicObject>, AdmissionObjects<'a>);

/// The fields of kube's `AdmissionReview<DynamicObject>`, decoded straight from the body.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct WireReview<'a> {
    api_version: String,
    kind: String,
    #[serde(borrow)]
    request: Option<WireRequest<'a>>,
    #[serde(default)]
    #[allow(dead_code)] // Decoded only to refuse what kube's types refuse.
    response: Option<AdmissionResponse>,
}

/// The fields of kube's `AdmissionRequest<DynamicObject>`; see [`WireReview`]. `options` is
/// checked and dropped: nothing reads it, and kube reads it into a tree.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct WireRequest<'a> {
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
    object: Option<AdmissionObject<'a>>,
    #[serde(borrow)]
    old_object: Option<AdmissionObject<'a>>,
    #[serde(default)]
    dry_run: bool,
    #[serde(default)]
    #[allow(dead_code)] // Decoded only to refuse what kube's types refuse; no rule reads it.
    options: Option<IgnoredAny>,
}

/// Decodes an AdmissionReview: in one pass ([`decode_fast`]), or with kube's types
/// ([`decode_strictly`]) when the one pass refuses the body.
pub fn decode(body: &[u8]) -> Result<Decoded<'_>, ReviewError> {
    match decode_fast(body) {
        Some(decoded) => Ok(decoded),
        None => decode_strictly(body),
    }
}

/// Decodes the request of an AdmissionReview in one pass, or `None` when the body is not an
/// `admission.k8s.io/v1` AdmissionReview with a request that this shape reads.
pub fn decode_fast(body: &[u8]) -> Option<Decoded<'_>> {
    let review: WireReview<'_> = serde_json::from_slice(body).ok()?;
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
    let objects = AdmissionObjects {
        object: wire.object,
        old_object: wire.old_object,
    };
    Some((request, objects))
}

/// Decodes an AdmissionReview with kube's types: what [`decode_fast`] does not read is
/// answered exactly as kube's decoder and these checks answer it.
pub fn decode_strictly(body: &[u8]) -> Result<Decoded<'static>, ReviewError> {
    let review: AdmissionReview<DynamicObject> = serde_json::from_slice(body)
        .map_err(|source| decode_error(body, source, ADMISSION_API_VERSION, ADMISSION_KIND))?;
    check_types(&review.types, ADMISSION_API_VERSION, ADMISSION_KIND)?;
    let mut request: AdmissionRequest<DynamicObject> =
        review.try_into().map_err(|_| ReviewError::MissingRequest {
            expected: expected(ADMISSION_API_VERSION, ADMISSION_KIND),
        })?;
    let objects = AdmissionObjects {
        object: request.object.take().map(AdmissionObject::from_dynamic),
        old_object: request.old_object.take().map(AdmissionObject::from_dynamic),
    };
    Ok((request, objects))
}
