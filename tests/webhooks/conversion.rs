//! Round-trips Memcached objects between versions through `/convert`.

use memcached_operator::api;
use memcached_operator::webhook::WebhookKind;
use memcached_operator::webhook::conversion::convert_object;
use serde_json::{Value, json};
use testkit::reviews::{self, conversion, path};

use crate::start_ready;

fn v1alpha1() -> Value {
    json!({
        "apiVersion": api::api_version(api::DEPRECATED_VERSION),
        "kind": api::KIND,
        "metadata": {"name": "sessions", "namespace": "shop", "resourceVersion": "1712"},
        "spec": {"size": 3, "containerPort": 11311},
    })
}

#[tokio::test]
async fn v1alpha1_converts_to_v1beta1_and_back_unchanged() {
    let running = start_ready(&[]).await;
    let original = v1alpha1();
    let beta = api::api_version(api::STORAGE_VERSION);
    let answer = running
        .client
        .post(
            path(WebhookKind::Conversion),
            reviews::body(&conversion(&beta, std::slice::from_ref(&original))),
        )
        .await
        .expect("an answer");
    assert_eq!(answer.status, 200);
    let response = &answer.json()["response"];
    assert_eq!(response["uid"], reviews::CONVERSION_UID);
    assert_eq!(response["result"]["status"], "Success");
    let converted = response["convertedObjects"][0].clone();
    assert_eq!(converted["apiVersion"], beta.as_str());
    assert_eq!(
        converted,
        convert_object(original.clone(), &beta).expect("converts"),
        "the server answers what the conversion function computes"
    );
    assert_eq!(converted["spec"]["replicas"], 3);

    let alpha = api::api_version(api::DEPRECATED_VERSION);
    let answer = running
        .client
        .post(
            path(WebhookKind::Conversion),
            reviews::body(&conversion(&alpha, &[converted])),
        )
        .await
        .expect("an answer");
    let response = &answer.json()["response"];
    assert_eq!(response["result"]["status"], "Success");
    assert_eq!(response["convertedObjects"], json!([original]));
}

#[tokio::test]
async fn an_unknown_desired_version_fails_the_review_naming_it() {
    let running = start_ready(&[]).await;
    let answer = running
        .client
        .post(
            path(WebhookKind::Conversion),
            reviews::body(&conversion("cache.f2367556.dev/v2", &[v1alpha1()])),
        )
        .await
        .expect("an answer");
    assert_eq!(answer.status, 200);
    let response = &answer.json()["response"];
    assert_eq!(response["result"]["status"], "Failure");
    let message = response["result"]["message"].as_str().unwrap_or_default();
    assert!(message.contains("cache.f2367556.dev/v2"), "{message}");
    assert_eq!(response["convertedObjects"], json!([]));
}

#[tokio::test]
async fn one_object_of_the_wrong_kind_fails_the_whole_review() {
    let running = start_ready(&[]).await;
    let pod = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "web", "namespace": "shop"}});
    let answer = running
        .client
        .post(
            path(WebhookKind::Conversion),
            reviews::body(&conversion(
                &api::api_version(api::STORAGE_VERSION),
                &[v1alpha1(), pod],
            )),
        )
        .await
        .expect("an answer");
    let response = &answer.json()["response"];
    assert_eq!(response["result"]["status"], "Failure");
    let message = response["result"]["message"].as_str().unwrap_or_default();
    assert!(message.contains("shop/web"), "{message}");
    assert!(message.contains("Pod"), "{message}");
    assert_eq!(
        response["convertedObjects"],
        json!([]),
        "nothing half converted"
    );
}
