//! Tests the conversion webhook: the wire conversion equals the typed one, metadata passes
//! byte for byte, and one bad object fails the whole review.

use http::StatusCode;
use proptest::prelude::*;
use serde_json::json;

use super::*;
use crate::api::convert::to_v1alpha1;
use crate::fixtures::beta_object;
use crate::webhook::captured::{defaults, response_of};
use crate::webhook::response::Decision;
use crate::webhook::{WebhookKind, answer};
use testkit::captured::CONVERSION_REVIEW;

fn wire<T: Serialize>(object: &T) -> Value {
    serde_json::to_value(object).expect("test objects serialise")
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(10_000))]

    #[test]
    fn the_wire_conversion_matches_the_typed_one_and_keeps_metadata(hub in beta_object()) {
        let down_wire = convert_object(wire(&hub), "cache.f2367556.dev/v1alpha1").expect("converts");
        prop_assert_eq!(&down_wire, &wire(&to_v1alpha1(&hub)));
        let up_wire = convert_object(down_wire, "cache.f2367556.dev/v1beta1").expect("converts");
        prop_assert_eq!(up_wire, wire(&hub));
    }
}

#[test]
fn metadata_bytes_pass_through_untouched() {
    let object = json!({
        "apiVersion": "cache.f2367556.dev/v1alpha1",
        "kind": "Memcached",
        "metadata": {
            "name": "a", "namespace": "ns", "uid": "u", "resourceVersion": "7",
            "creationTimestamp": "2024-05-06T07:08:09Z",
            "managedFields": [{"manager": "kubectl", "operation": "Apply", "fieldsType": "FieldsV1", "fieldsV1": {"f:spec": {"f:size": {}}}}],
            "finalizers": ["example.com/keep"],
            "annotations": {"keep": "me"},
            "somethingNew": {"x": 1}
        },
        "spec": {"size": 2, "containerPort": 11311},
        "status": {"conditions": []}
    });
    let up = convert_object(object.clone(), "cache.f2367556.dev/v1beta1").expect("converts");
    assert_eq!(up["metadata"], object["metadata"]);
    assert_eq!(up["apiVersion"], json!("cache.f2367556.dev/v1beta1"));
    assert_eq!(
        up["spec"],
        json!({"replicas": 2, "service": {"port": 11311}})
    );
    let down = convert_object(up, "cache.f2367556.dev/v1alpha1").expect("converts");
    assert_eq!(down, object);
}

#[test]
fn an_unknown_desired_version_is_refused_by_name() {
    let object = wire(&to_v1alpha1(&v1beta1::Memcached::new(
        "a",
        Default::default(),
    )));
    let error = convert_object(object, "cache.f2367556.dev/v2").expect_err("v2 is not served");
    assert_eq!(
        error.to_string(),
        "unsupported desired apiVersion \"cache.f2367556.dev/v2\": cache.f2367556.dev serves v1alpha1 and v1beta1"
    );
}

#[test]
fn objects_of_another_kind_or_group_are_refused_by_name() {
    let pod =
        json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "n"}});
    let error = convert_object(pod, "cache.f2367556.dev/v1beta1").expect_err("not a Memcached");
    assert!(
        error.to_string().starts_with("object n/p: kind is \"Pod\""),
        "{error}"
    );
    let other_group =
        json!({"apiVersion": "other.dev/v1", "kind": "Memcached", "metadata": {"name": "m"}});
    let error = convert_object(other_group, "cache.f2367556.dev/v1beta1").expect_err("wrong group");
    assert!(error.to_string().contains("other.dev/v1"), "{error}");
    let error =
        convert_nth(json!("text"), "cache.f2367556.dev/v1beta1", 3).expect_err("not an object");
    assert!(
        error.to_string().starts_with("object #3 (unnamed)"),
        "{error}"
    );
}

#[test]
fn a_malformed_spec_is_refused_naming_the_field() {
    let object = json!({"apiVersion": "cache.f2367556.dev/v1alpha1", "kind": "Memcached",
        "metadata": {"name": "m", "namespace": "n"}, "spec": {"size": "three"}});
    let error = convert_object(object, "cache.f2367556.dev/v1beta1").expect_err("size is a string");
    assert!(
        error
            .to_string()
            .starts_with("object n/m: spec does not match v1alpha1"),
        "{error}"
    );
}

#[test]
fn a_tampered_stash_is_refused_not_dropped() {
    let object = json!({"apiVersion": "cache.f2367556.dev/v1alpha1", "kind": "Memcached",
        "metadata": {"name": "m", "namespace": "n", "annotations": {STASH_ANNOTATION: "{not json"}},
        "spec": {"size": 1}});
    let error = convert_object(object, "cache.f2367556.dev/v1beta1").expect_err("bad stash");
    assert!(matches!(error, ConversionError::BadStash { .. }), "{error}");
    assert!(error.to_string().contains("n/m"), "{error}");
}

#[test]
fn the_same_version_passes_through() {
    let object = wire(&v1beta1::Memcached::new("a", Default::default()));
    assert_eq!(
        convert_object(object.clone(), "cache.f2367556.dev/v1beta1"),
        Ok(object)
    );
}

/// Converts the JSON text of an object at `position` of a review, as the webhook does.
fn converted_text(text: &str, desired: &str, position: usize) -> Result<String, ConversionError> {
    let object: ConversionObject<'_> = serde_json::from_str(text).expect("valid JSON");
    let mut out = b"[".to_vec();
    write_converted(object, desired, position, &mut out)?;
    out.push(b']');
    Ok(String::from_utf8(out).expect("UTF-8"))
}

#[test]
fn metadata_and_unknown_members_are_copied_as_they_came() {
    let managed_fields = r#"[{"apiVersion":"cache.f2367556.dev/v1beta1","fieldsType":"FieldsV1","fieldsV1":{"f:spec":{".":{},"f:replicas":{}}},"manager":"kubectl","operation":"Update","time":"2026-11-20T09:14:02Z"}]"#;
    let owner_references =
        r#"[{"apiVersion":"v1","kind":"ConfigMap","name":"owner","uid":"1b2c"}]"#;
    let labels = r#"{"app.kubernetes.io/name":"memcached","\u00e9t\u00e9":"caf\u00e9"}"#;
    let text = format!(
        r#"{{"apiVersion":"cache.f2367556.dev/v1beta1","kind":"Memcached","extra":{{"kept": [1, 2.50]}},"metadata":{{"name":"a","namespace":"ns","labels":{labels},"managedFields":{managed_fields},"ownerReferences":{owner_references},"annotations":{{"keep":"me","tab\there":"\u00e9"}},"somethingNew":{{"x":1}}}},"spec":{{"replicas":2,"memcached":{{"threads":8}}}},"status":{{"replicas":2,"conditions":[]}}}}"#
    );
    let down = converted_text(&text, "cache.f2367556.dev/v1alpha1", 0).expect("converts");
    for verbatim in [
        managed_fields,
        owner_references,
        labels,
        r#""extra":{"kept": [1, 2.50]}"#,
    ] {
        assert!(down.contains(verbatim), "{verbatim} not in {down}");
    }
    let down_value: Value = serde_json::from_str(&down).expect("JSON");
    let original: Value = serde_json::from_str(&text).expect("JSON");
    let mut metadata = down_value[0]["metadata"].clone();
    let stash = metadata["annotations"]
        .as_object_mut()
        .and_then(|a| a.remove(STASH_ANNOTATION))
        .expect("a stash");
    assert!(
        stash.as_str().is_some_and(|s| s.contains("\"threads\":8")),
        "{stash}"
    );
    assert_eq!(metadata, original["metadata"]);
    assert_eq!(down_value[0]["extra"], original["extra"]);

    let up_text = serde_json::to_string(&down_value[0]).expect("serialises");
    let up = converted_text(&up_text, "cache.f2367556.dev/v1beta1", 0).expect("converts");
    let up: Value = serde_json::from_str(&up).expect("JSON");
    assert_eq!(up[0], original);
}

#[test]
fn an_object_that_does_not_fit_is_refused_naming_it_and_the_field() {
    let text = r#"{"apiVersion":"cache.f2367556.dev/v1beta1","kind":"Memcached","metadata":{"name":"big","namespace":"ns"},"spec":{"replicas":1e40}}"#;
    let error = converted_text(text, "cache.f2367556.dev/v1alpha1", 4).expect_err("1e40");
    let message = error.to_string();
    assert!(
        message.starts_with("object ns/big: spec does not match v1beta1: replicas: "),
        "{message}"
    );
    let unnamed = r#"{"apiVersion":"cache.f2367556.dev/v1beta1","kind":"Memcached","spec":{"memcached":{"threads":"eight"}}}"#;
    let error = converted_text(unnamed, "cache.f2367556.dev/v1alpha1", 4).expect_err("a string");
    let message = error.to_string();
    assert!(
        message.starts_with(
            "object #4 (unnamed): spec does not match v1beta1: memcached.threads: invalid type"
        ),
        "{message}"
    );
}

#[test]
fn a_large_object_converts_with_its_annotations_intact() {
    let large = "x\\\"y".repeat(256 * 1024);
    let text = format!(
        r#"{{"apiVersion":"cache.f2367556.dev/v1beta1","kind":"Memcached","metadata":{{"name":"a","annotations":{{"large":"{large}"}}}},"spec":{{"replicas":1,"image":"memcached:1.6"}}}}"#
    );
    let down = converted_text(&text, "cache.f2367556.dev/v1alpha1", 0).expect("converts");
    assert!(down.contains(&format!(r#""large":"{large}""#)));
    let down: Value = serde_json::from_str(&down).expect("JSON");
    assert_eq!(down[0]["spec"], json!({"size": 1}));
}

#[test]
fn metadata_that_cannot_hold_the_stash_is_an_error_not_a_loss() {
    let with = |metadata: &str| {
        format!(
            r#"{{"apiVersion":"cache.f2367556.dev/v1beta1","kind":"Memcached","metadata":{metadata},"spec":{{"image":"memcached:1.6"}}}}"#
        )
    };
    for (metadata, problem) in [
        (r#""text""#, "metadata is not a JSON object"),
        (
            r#"{"name":"m","annotations":[1]}"#,
            "metadata.annotations is not a JSON object",
        ),
    ] {
        let error = converted_text(&with(metadata), "cache.f2367556.dev/v1alpha1", 2)
            .expect_err("nowhere to stash");
        assert!(error.to_string().contains(problem), "{error}");
    }
    for metadata in ["null", r#"{"annotations":null}"#] {
        let down =
            converted_text(&with(metadata), "cache.f2367556.dev/v1alpha1", 0).expect("converts");
        let down: Value = serde_json::from_str(&down).expect("JSON");
        assert!(
            down[0]["metadata"]["annotations"][STASH_ANNOTATION].is_string(),
            "{down}"
        );
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
