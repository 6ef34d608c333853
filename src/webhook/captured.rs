//! Reads the answers of the webhooks in their unit tests; the reviews they answer are the
//! captured ones of the test kit (`testkit::captured`).

use serde_json::Value;

use super::response::Reply;
use crate::admission::{AllowedIssuers, Defaults};

/// The `response` of a review answer.
pub fn response_of(reply: &Reply) -> Value {
    let review: Value = serde_json::from_slice(&reply.body).expect("a JSON review");
    review["response"].clone()
}

/// The defaults the webhook tests run with.
pub fn defaults() -> Defaults {
    Defaults {
        image: "registry.example/memcached:1.6".to_string(),
        refresher_image: "registry.example/memcached-operator:v1".to_string(),
        exporter_image: "registry.example/memcached-exporter:v0".to_string(),
        allowed_issuers: AllowedIssuers::default(),
    }
}
