//! Feeds one input to the mutating and the validating webhook, through the function the HTTPS
//! server calls with a request body, and checks the shape of every answer. Fuzzed by
//! fuzz/fuzz_targets/admission_review.rs; its seeds and past crashes are replayed by
//! tests/fuzz_seeds.rs.

use memcached_operator::admission::defaults::Defaults;
use memcached_operator::webhook::WebhookKind;
use memcached_operator::webhook::answer;
use memcached_operator::webhook::response::{JSON_CONTENT_TYPE, TEXT_CONTENT_TYPE};
use serde_json::Value;

pub fn check(body: &[u8]) {
    let defaults = Defaults::default();
    for kind in [WebhookKind::Mutating, WebhookKind::Validating] {
        let reply = answer(kind, body, &defaults);
        if reply.status == 200 {
            // A review was answered: an AdmissionReview whose response carries the verdict.
            assert_eq!(reply.content_type, JSON_CONTENT_TYPE);
            assert!(reply.decision.is_some());
            let review: Value = serde_json::from_slice(&reply.body).expect("a JSON review");
            assert_eq!(review["kind"], "AdmissionReview");
            assert!(review["response"]["allowed"].is_boolean(), "{review}");
        } else {
            // The body could not be answered with a review: a one-line message says why.
            assert_eq!(reply.content_type, TEXT_CONTENT_TYPE);
            assert!(reply.decision.is_none());
            assert!(!reply.body.is_empty());
        }
    }
}
