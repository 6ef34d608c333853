//! Checks what the TLS listener accepts and refuses: HTTP/2, bad reviews, limits, methods,
//! paths and plain HTTP.

use std::time::Duration;

use bytes::Bytes;
use hyper::Method;
use memcached_operator::webhook::WebhookKind;
use serde_json::{Value, json};
use testkit::client::TlsClient;
use testkit::reviews::{self, admission, conversion, memcached, path};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use crate::start_ready;

fn validate_body() -> Bytes {
    let object = memcached("sessions", json!({"replicas": 3}));
    Bytes::from(reviews::body(&admission("CREATE", Some(&object), None)))
}

#[tokio::test]
async fn http2_is_refused_by_default() {
    let running = start_ready(&[]).await;
    let both = TlsClient::with_alpn(
        running.server.webhook,
        &running.ca.pem,
        &[b"h2", b"http/1.1"],
    );
    let answer = both
        .post(path(WebhookKind::Validating), validate_body())
        .await
        .expect("served over http/1.1");
    assert_eq!(answer.alpn.as_deref(), Some(&b"http/1.1"[..]));
    assert_eq!(answer.status, 200);

    let h2_only = TlsClient::with_alpn(running.server.webhook, &running.ca.pem, &[b"h2"]);
    assert!(
        h2_only.connect().await.is_err(),
        "an h2-only client gets no handshake"
    );

    let no_alpn = TlsClient::with_alpn(running.server.webhook, &running.ca.pem, &[]);
    let prior_knowledge = no_alpn
        .h2_prior_knowledge(path(WebhookKind::Validating))
        .await;
    assert!(
        prior_knowledge.is_err(),
        "h2 prior knowledge is not served: {prior_knowledge:?}"
    );

    // The server keeps serving afterwards.
    let answer = running
        .client
        .post(path(WebhookKind::Validating), validate_body())
        .await
        .expect("still serving");
    assert_eq!(answer.status, 200);
}

#[tokio::test]
async fn http2_is_served_with_enable_http2() {
    let running = start_ready(&["--enable-http2"]).await;
    let client = TlsClient::with_alpn(
        running.server.webhook,
        &running.ca.pem,
        &[b"h2", b"http/1.1"],
    );
    let answer = client
        .post(path(WebhookKind::Validating), validate_body())
        .await
        .expect("served over h2");
    assert_eq!(answer.alpn.as_deref(), Some(&b"h2"[..]));
    assert_eq!(answer.status, 200);
    assert_eq!(answer.json()["response"]["allowed"], true);
}

#[tokio::test]
async fn malformed_json_is_a_400_with_a_message() {
    let running = start_ready(&[]).await;
    let answer = running
        .client
        .post(
            path(WebhookKind::Validating),
            Bytes::from_static(b"{\"apiVersion\": "),
        )
        .await
        .expect("an answer");
    assert_eq!(answer.status, 400);
    assert!(
        answer
            .text()
            .starts_with("malformed admission.k8s.io/v1 AdmissionReview"),
        "{}",
        answer.text()
    );
}

#[tokio::test]
async fn a_review_of_the_wrong_kind_or_version_is_a_400() {
    let running = start_ready(&[]).await;
    let object = memcached("sessions", json!({"replicas": 3}));
    let mut v1beta1_review = admission("CREATE", Some(&object), None);
    v1beta1_review["apiVersion"] = json!("admission.k8s.io/v1beta1");
    let conversion_review = conversion(&reviews::v1alpha1(), std::slice::from_ref(&object));
    let admission_review = admission("CREATE", Some(&object), None);
    for (kind, review, expected) in [
        (
            WebhookKind::Validating,
            &v1beta1_review,
            "expected admission.k8s.io/v1 AdmissionReview, got admission.k8s.io/v1beta1 AdmissionReview",
        ),
        (
            WebhookKind::Mutating,
            &conversion_review,
            "expected admission.k8s.io/v1 AdmissionReview, got apiextensions.k8s.io/v1 ConversionReview",
        ),
        (
            WebhookKind::Conversion,
            &admission_review,
            "expected apiextensions.k8s.io/v1 ConversionReview, got admission.k8s.io/v1 AdmissionReview",
        ),
    ] {
        let answer = running
            .client
            .post(path(kind), reviews::body(review))
            .await
            .expect("an answer");
        assert_eq!(answer.status, 400, "{kind:?}");
        assert_eq!(answer.text().trim(), expected);
    }
}

#[tokio::test]
async fn an_object_that_is_not_a_v1beta1_memcached_is_denied_with_code_400_naming_it() {
    let running = start_ready(&[]).await;
    let pod = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "web", "namespace": "shop"}, "spec": {"containers": []}});
    let mut pod_review = admission("CREATE", Some(&pod), None);
    pod_review["request"]["kind"] = json!({"group": "", "version": "v1", "kind": "Pod"});
    let memcached_kind_pod_object = admission("CREATE", Some(&pod), None);
    for (review, named) in [
        (
            &pod_review,
            "request.kind: expected cache.f2367556.dev/v1beta1 Memcached, got v1 Pod",
        ),
        (
            &memcached_kind_pod_object,
            "request.object: expected cache.f2367556.dev/v1beta1 Memcached, got v1 Pod",
        ),
    ] {
        for kind in [WebhookKind::Validating, WebhookKind::Mutating] {
            let answer = running
                .client
                .post(path(kind), reviews::body(review))
                .await
                .expect("an answer");
            assert_eq!(answer.status, 200);
            let response: Value = answer.json()["response"].clone();
            assert_eq!(response["uid"], "uid-CREATE-web");
            assert_eq!(response["allowed"], false);
            assert_eq!(response["status"]["code"], 400);
            assert_eq!(response["status"]["message"], named, "{kind:?}");
        }
    }
}

#[tokio::test]
async fn a_huge_body_is_413_with_a_message() {
    let running = start_ready(&["--max-request-bytes", "65536"]).await;
    let huge = Bytes::from(vec![b' '; 65537]);
    let answer = running
        .client
        .post(path(WebhookKind::Validating), huge)
        .await
        .expect("an answer");
    assert_eq!(answer.status, 413);
    assert_eq!(
        answer.text().trim(),
        "request body exceeds the limit of 65536 bytes"
    );
}

#[tokio::test]
async fn a_wrong_method_is_405_and_an_unknown_path_is_404() {
    let running = start_ready(&[]).await;
    let answer = running
        .client
        .request(Method::GET, path(WebhookKind::Validating), Bytes::new())
        .await
        .expect("an answer");
    assert_eq!(answer.status, 405);
    let answer = running
        .client
        .post("/validate-something-else", validate_body())
        .await
        .expect("an answer");
    assert_eq!(answer.status, 404);
}

#[tokio::test]
async fn plain_http_on_the_tls_port_leaves_the_server_serving() {
    let running = start_ready(&[]).await;
    let mut plain = TcpStream::connect(running.server.webhook)
        .await
        .expect("connect");
    plain
        .write_all(b"POST /convert HTTP/1.1\r\nHost: localhost\r\nContent-Length: 2\r\n\r\n{}")
        .await
        .expect("write plain HTTP");
    let mut answer = Vec::new();
    let _ = tokio::time::timeout(Duration::from_secs(60), plain.read_to_end(&mut answer)).await;
    assert!(
        !answer.starts_with(b"HTTP/1.1 200"),
        "plain HTTP is not served"
    );
    let answer = running
        .client
        .post(path(WebhookKind::Validating), validate_body())
        .await
        .expect("TLS still served");
    assert_eq!(answer.status, 200);
    assert_eq!(running.server.readyz().await, 200);
}

#[tokio::test]
async fn a_request_slower_than_the_timeout_gets_408() {
    let running = start_ready(&["--request-timeout", "300ms"]).await;
    let mut tls = running.client.connect().await.expect("TLS");
    let head = format!(
        "POST {} HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{{\"apiVersion\"",
        path(WebhookKind::Validating)
    );
    tls.write_all(head.as_bytes())
        .await
        .expect("write the head");
    let mut answer = vec![0; 1024];
    let read = tokio::time::timeout(Duration::from_secs(60), tls.read(&mut answer))
        .await
        .expect("answered before the client gave up")
        .expect("read");
    let answer = String::from_utf8_lossy(&answer[..read]).to_string();
    assert!(answer.starts_with("HTTP/1.1 408"), "{answer}");
}

/// The API server keeps an idle connection to a webhook for 90 s and reuses it for its next
/// call; a connection closed sooner by the server turns that call into `broken pipe`. An idle
/// connection stays open well past `--request-timeout`.
#[tokio::test]
async fn a_kept_alive_connection_outlives_the_request_timeout_while_idle() {
    let running = start_ready(&["--request-timeout", "300ms"]).await;
    let mut kept = running
        .client
        .keep_alive()
        .await
        .expect("a kept-alive connection");
    let path = path(WebhookKind::Validating);
    let first = kept.post(path, validate_body()).await.expect("answered");
    assert_eq!(first, 200);
    tokio::time::sleep(Duration::from_secs(2)).await;
    let second = kept
        .post(path, validate_body())
        .await
        .expect("the idle connection still open 2 s after its last answer");
    assert_eq!(second, 200);
}
