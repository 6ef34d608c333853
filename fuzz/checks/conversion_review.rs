//! Feeds one input to the conversion webhook, through the function the HTTPS server calls
//! with a request body, and checks that a review converts every object or none. Fuzzed by
//! fuzz/fuzz_targets/conversion_review.rs; its seeds and past crashes are replayed by
//! tests/fuzz_seeds.rs.

use memcached_operator::admission::defaults::Defaults;
use memcached_operator::webhook::WebhookKind;
use memcached_operator::webhook::answer;
use memcached_operator::webhook::response::{JSON_CONTENT_TYPE, TEXT_CONTENT_TYPE};
use serde_json::Value;

pub fn check(body: &[u8]) {
    let reply = answer(WebhookKind::Conversion, body, &Defaults::default());
    if reply.status != 200 {
        assert_eq!(reply.content_type, TEXT_CONTENT_TYPE);
        assert!(reply.decision.is_none());
        return;
    }
    assert_eq!(reply.content_type, JSON_CONTENT_TYPE);
    let review: Value = serde_json::from_slice(&reply.body).expect("a JSON review");
    assert_eq!(review["kind"], "ConversionReview");
    let response = &review["response"];
    let converted = response["convertedObjects"].as_array().map_or(0, Vec::len);
    if response["result"]["status"] == "Success" {
        // Every object of the request, each in the desired version. The body may not parse as
        // a JSON tree even so: serde_json skips the fields a review does not have without
        // checking that their strings are UTF-8.
        if let Ok(request) = serde_json::from_slice::<Value>(body) {
            let objects = request["request"]["objects"].as_array().map_or(0, Vec::len);
            assert_eq!(converted, objects, "{review}");
        }
    } else {
        assert_eq!(converted, 0, "nothing is half converted: {review}");
    }
}
