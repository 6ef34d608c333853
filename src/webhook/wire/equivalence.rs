//! Proves that the fast decoders answer every body exactly as kube's types (the strict
//! decoders) do: the same status, decision and bytes, for well-formed reviews and for every
//! kind of malformed one.

use serde_json::Value;

use super::{admission, conversion};
use crate::api::DELETION_PROTECTION_ANNOTATION;
use crate::api::convert::STASH_ANNOTATION;
use crate::webhook::admission::{judge, mutate, validate};
use crate::webhook::captured::defaults;
use crate::webhook::response::Reply;
use crate::webhook::{WebhookKind, answer};
use testkit::captured::{CONVERSION_REVIEW, CREATE_REVIEW, create_review_with as with_request};

/// Answers `body` the way the server did before the one-pass decoder: with kube's types.
fn answer_strictly(kind: WebhookKind, body: &[u8]) -> Reply {
    let answered = match kind {
        WebhookKind::Conversion => panic!("admission only"),
        _ => admission::decode_strictly(body).and_then(|(request, objects)| match kind {
            WebhookKind::Mutating => judge("mutating", &request, objects, |r, o| {
                mutate(r, o, &defaults())
            }),
            _ => judge("validating", &request, objects, |r, o| {
                validate(r, o, &defaults().allowed_issuers)
            }),
        }),
    };
    answered.unwrap_or_else(|error| Reply::from_error(&error))
}

#[test]
fn the_one_pass_decoder_answers_exactly_as_kubes_types() {
    let bodies = [
        CREATE_REVIEW.as_bytes().to_vec(),
        with_request(|request| request["object"]["spec"]["replicas"] = 1000.into()),
        with_request(|request| request["object"]["spec"]["replicas"] = "three".into()),
        with_request(|request| request["object"]["spec"] = Value::Null),
        with_request(|request| request["object"]["spec"] = serde_json::json!([1])),
        with_request(|request| request["object"]["status"] = serde_json::json!({"replicas": "x"})),
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
    assert!(admission::decode_fast(CREATE_REVIEW.as_bytes()).is_some());
    assert!(conversion::decode_fast(CONVERSION_REVIEW.as_bytes()).is_some());
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
    let fast = conversion::decode_fast(CONVERSION_REVIEW.as_bytes()).expect("decodes");
    let strict = conversion::decode_strictly(CONVERSION_REVIEW.as_bytes()).expect("decodes");
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
        assert!(conversion::decode_fast(body.as_bytes()).is_none(), "{body}");
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
        let strict = crate::webhook::conversion::answer_strictly("conversion", body)
            .unwrap_or_else(|error| Reply::from_error(&error));
        let text = String::from_utf8_lossy(body);
        assert_eq!(fast.status, strict.status, "{text}");
        assert_eq!(fast.decision, strict.decision, "{text}");
        let fast: Value = serde_json::from_slice(&fast.body).expect("JSON");
        let strict: Value = serde_json::from_slice(&strict.body).expect("JSON");
        assert_eq!(fast, strict, "{text}");
    }
}
