//! Holds reviews captured from real API servers, and the few helpers the webhook tests share
//! to edit them and read the answers.

use serde_json::Value;

use super::response::Reply;
use crate::admission::Defaults;

/// An AdmissionReview as a v1.33 API server sends it for `kubectl apply` of a new Memcached
/// (uid and timestamps from a kind cluster).
pub const CREATE_REVIEW: &str = include_str!("testdata/create-review.json");

/// A ConversionReview as the API server sends it to read a v1beta1 object as v1alpha1.
pub const CONVERSION_REVIEW: &str = include_str!("testdata/conversion-review.json");

/// The `response` of a review answer.
pub fn response_of(reply: &Reply) -> Value {
    let review: Value = serde_json::from_slice(&reply.body).expect("a JSON review");
    review["response"].clone()
}

/// [`CREATE_REVIEW`] with its request edited by `edit`.
pub fn with_request(edit: impl FnOnce(&mut Value)) -> Vec<u8> {
    let mut review: Value = serde_json::from_str(CREATE_REVIEW).expect("valid JSON");
    edit(&mut review["request"]);
    serde_json::to_vec(&review).expect("serialises")
}

/// The defaults the webhook tests run with.
pub fn defaults() -> Defaults {
    Defaults {
        image: "registry.example/memcached:1.6".to_string(),
    }
}
