//! Checks admission round trips: defaulting patches, denials and warnings.

use memcached_operator::admission::AllowedIssuers;
use memcached_operator::admission::defaults::{Defaults, default_spec};
use memcached_operator::admission::validate::{validate_create, validate_delete, validate_update};
use memcached_operator::api::{self, v1beta1};
use memcached_operator::webhook::WebhookKind;
use serde_json::{Value, json};
use testkit::process::RELATED_IMAGE;
use testkit::reviews::{self, admission, memcached, path};

use crate::start_ready;

fn typed(object: &Value) -> v1beta1::Memcached {
    serde_json::from_value(object.clone()).expect("a v1beta1 Memcached")
}

/// The JSON patch of an admission response; kube-core writes its bytes as a number array.
fn patch_of(response: &Value) -> json_patch::Patch {
    let bytes: Vec<u8> = serde_json::from_value(response["patch"].clone()).expect("patch bytes");
    serde_json::from_slice(&bytes).expect("a JSON patch")
}

#[tokio::test]
async fn the_mutating_patch_applied_equals_defaulting_and_a_second_pass_has_no_patch() {
    let running = start_ready(&[]).await;
    let object = memcached("sessions", json!({"replicas": 3}));
    let review = admission("CREATE", Some(&object), None);
    let answer = running
        .client
        .post(path(WebhookKind::Mutating), reviews::body(&review))
        .await
        .expect("an answer");
    assert_eq!(answer.status, 200);
    let response = &answer.json()["response"];
    assert_eq!(response["uid"], "uid-CREATE-sessions");
    assert_eq!(response["allowed"], true);
    assert_eq!(response["patchType"], "JSONPatch");

    let mut patched = object.clone();
    json_patch::patch(&mut patched, &patch_of(response)).expect("the patch applies");
    let expected = default_spec(
        &typed(&object).spec,
        &Defaults::with_related_image(Some(RELATED_IMAGE.to_string())),
    );
    assert_eq!(
        patched["spec"],
        serde_json::to_value(&expected).expect("JSON")
    );
    assert_eq!(
        patched["metadata"], object["metadata"],
        "metadata untouched"
    );

    let review = admission("UPDATE", Some(&patched), Some(&patched));
    let answer = running
        .client
        .post(path(WebhookKind::Mutating), reviews::body(&review))
        .await
        .expect("an answer");
    let response = &answer.json()["response"];
    assert_eq!(response["allowed"], true);
    assert_eq!(response.get("patch"), None, "{response}");
    assert_eq!(response.get("patchType"), None, "{response}");
}

#[tokio::test]
async fn the_validator_denies_with_403_forbidden_and_its_message() {
    let running = start_ready(&[]).await;
    let object = memcached("sessions", json!({"replicas": v1beta1::MAX_REPLICAS + 1}));
    let expected = validate_create(&typed(&object), &AllowedIssuers::default())
        .expect_err("too many replicas");
    let review = admission("CREATE", Some(&object), None);
    let answer = running
        .client
        .post(path(WebhookKind::Validating), reviews::body(&review))
        .await
        .expect("an answer");
    assert_eq!(answer.status, 200);
    let response = &answer.json()["response"];
    assert_eq!(response["allowed"], false);
    assert_eq!(response["status"]["code"], 403);
    assert_eq!(response["status"]["reason"], "Forbidden");
    assert_eq!(response["status"]["message"], expected.message.as_str());
    assert!(
        expected.message.contains("spec.replicas"),
        "{}",
        expected.message
    );
}

#[tokio::test]
async fn the_validators_warnings_reach_the_response() {
    let running = start_ready(&[]).await;
    let object = memcached(
        "sessions",
        json!({"image": "docker.io/library/memcached:latest", "memcached": {"verbosity": 2}}),
    );
    let expected = validate_create(&typed(&object), &AllowedIssuers::default()).expect("admitted");
    assert!(
        !expected.is_empty(),
        "the validator warns about this object"
    );
    let review = admission("CREATE", Some(&object), None);
    let answer = running
        .client
        .post(path(WebhookKind::Validating), reviews::body(&review))
        .await
        .expect("an answer");
    let response = &answer.json()["response"];
    assert_eq!(response["allowed"], true);
    assert_eq!(response["status"]["code"], 200);
    assert_eq!(response["warnings"], json!(expected));
}

#[tokio::test]
async fn updates_and_deletes_are_judged_with_the_old_object() {
    let running = start_ready(&[]).await;
    let old = memcached("sessions", json!({"replicas": 10}));
    let new = memcached("sessions", json!({"replicas": 2}));
    let expected =
        validate_update(&typed(&old), &typed(&new), &AllowedIssuers::default()).expect("admitted");
    assert!(!expected.is_empty(), "scaling 10 -> 2 warns");
    let answer = running
        .client
        .post(
            path(WebhookKind::Validating),
            reviews::body(&admission("UPDATE", Some(&new), Some(&old))),
        )
        .await
        .expect("an answer");
    assert_eq!(answer.json()["response"]["warnings"], json!(expected));

    let mut protected = old.clone();
    protected["metadata"]["annotations"] = json!({ (api::DELETION_PROTECTION_ANNOTATION): "true" });
    let expected = validate_delete(&typed(&protected)).expect_err("protected");
    let answer = running
        .client
        .post(
            path(WebhookKind::Validating),
            reviews::body(&admission("DELETE", None, Some(&protected))),
        )
        .await
        .expect("an answer");
    let response = &answer.json()["response"];
    assert_eq!(response["allowed"], false);
    assert_eq!(response["status"]["code"], 403);
    assert_eq!(response["status"]["message"], expected.message.as_str());
}
