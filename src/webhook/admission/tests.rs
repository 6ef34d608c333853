//! The admission webhooks end to end in memory: captured reviews in, answers out.

use http::StatusCode;
use kube::core::admission::AdmissionReview;
use serde_json::Value;

use super::*;
use crate::webhook::captured::{defaults, response_of};
use crate::webhook::{WebhookKind, answer};
use testkit::captured::{CONVERSION_REVIEW, CREATE_REVIEW, create_review_with as with_request};

#[test]
fn a_captured_create_review_decodes_into_a_memcached() {
    let review: AdmissionReview<DynamicObject> =
        serde_json::from_str(CREATE_REVIEW).expect("decodes");
    let request: AdmissionRequest<DynamicObject> = review.try_into().expect("has a request");
    let object = memcached("object", request.object.map(AdmissionObject::from_dynamic))
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
        validate_create(&object, &defaults().allowed_issuers)
            .expect_err("1000 replicas are refused")
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
        serde_json::from_str::<Value>(CREATE_REVIEW).expect("JSON")["request"]["object"].clone();
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
