//! Decodes ConversionReviews into a request whose objects are read lazily, in one pass when it
//! can and with kube's types when it must.
//!
//! Each object is a [`ConversionObject`]: its members, its metadata's members and its
//! annotations (where the conversion stash lives) are read; every other value (spec, status,
//! labels, managedFields...) stays the raw text of the body, to be copied back as it came.

use kube::core::conversion::{ConversionRequest, ConversionResponse, ConversionReview};
use serde::Deserialize;
use serde::de::{DeserializeSeed, Deserializer};
#[cfg(test)]
use serde_json::Value;

use super::lazy::{Expand, Lazy};
use super::{
    CONVERSION_API_VERSION, CONVERSION_KIND, ReviewError, check_types, decode_error, expected,
};

/// The path of an object that conversion reads member by member: the metadata and its
/// annotations, where the stash lives. Everything else is kept as raw text.
const EDITED_PATH: &[&str] = &["metadata", "annotations"];

/// An object of a ConversionReview, read in one pass along [`EDITED_PATH`].
#[derive(Clone, Debug)]
pub struct ConversionObject<'a>(pub Lazy<'a>);

impl<'de: 'a, 'a> Deserialize<'de> for ConversionObject<'a> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        Expand(EDITED_PATH)
            .deserialize(deserializer)
            .map(ConversionObject)
    }
}

#[cfg(test)]
impl ConversionObject<'_> {
    /// The object as a tree.
    pub fn to_value(&self) -> Result<Value, serde_json::Error> {
        self.0.to_value()
    }
}

/// The fields of kube's `ConversionReview`, decoded straight from the body.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct WireReview<'a> {
    api_version: String,
    kind: String,
    #[serde(borrow)]
    request: Option<Request<'a>>,
    #[serde(default)]
    #[allow(dead_code)] // Decoded only to refuse what kube's types refuse.
    response: Option<ConversionResponse>,
}

/// The fields of kube's `ConversionRequest`, the objects read lazily.
#[derive(Deserialize)]
pub struct Request<'a> {
    /// The review's uid, echoed in the response.
    pub uid: String,
    /// The `apiVersion` every object is to be converted to.
    #[serde(rename = "desiredAPIVersion")]
    pub desired_api_version: String,
    /// The objects, in order.
    #[serde(borrow)]
    pub objects: Vec<ConversionObject<'a>>,
}

/// Decodes the request of a ConversionReview in one pass, or `None` when the body is not an
/// `apiextensions.k8s.io/v1` ConversionReview with a request.
pub fn decode_fast(body: &[u8]) -> Option<Request<'_>> {
    let review: WireReview<'_> = serde_json::from_slice(body).ok()?;
    if review.api_version != CONVERSION_API_VERSION || review.kind != CONVERSION_KIND {
        return None;
    }
    review.request
}

/// Decodes a ConversionReview with kube's types: what [`decode_fast`] does not read is
/// answered exactly as kube's decoder and these checks answer it.
pub fn decode_strictly(body: &[u8]) -> Result<ConversionRequest, ReviewError> {
    let review: ConversionReview = serde_json::from_slice(body)
        .map_err(|source| decode_error(body, source, CONVERSION_API_VERSION, CONVERSION_KIND))?;
    check_types(&review.types, CONVERSION_API_VERSION, CONVERSION_KIND)?;
    ConversionRequest::try_from(review).map_err(|_| ReviewError::MissingRequest {
        expected: expected(CONVERSION_API_VERSION, CONVERSION_KIND),
    })
}
