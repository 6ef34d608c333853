//! Checks start-up, readiness, metrics and graceful shutdown of the server process.

use std::time::{Duration, Instant};

use memcached_operator::webhook::WebhookKind;
use rustls::pki_types::pem::PemObject;
use serde_json::json;
use tempfile::TempDir;
use testkit::client;
use testkit::process::Certs;
use testkit::reviews::{self, admission, conversion, memcached, path};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::{OPERATOR, start_ready};

#[tokio::test]
async fn without_certificates_readyz_fails_and_healthz_passes() {
    let root = TempDir::new().expect("tempdir");
    let server = OPERATOR.webhooks(Certs::Root(root.path()), &[]).await;
    let (status, body) = client::plain_get(server.probes, "/readyz")
        .await
        .expect("an answer from /readyz");
    assert_eq!(status, 503);
    assert!(String::from_utf8_lossy(&body).contains("certificate"));
    let (status, _) = client::plain_get(server.probes, "/healthz")
        .await
        .expect("an answer from /healthz");
    assert_eq!(status, 200);
}

#[tokio::test]
async fn sigterm_lets_a_request_in_flight_finish() {
    // No shutdown delay: the server stops accepting at once.
    let mut running = start_ready(&["--shutdown-delay", "0s"]).await;
    let object = memcached("sessions", json!({"replicas": 3}));
    let body = reviews::body(&admission("CREATE", Some(&object), None));
    let (first, rest) = body.split_at(body.len() / 2);
    let mut tls = running.client.connect().await.expect("TLS");
    let head = format!(
        "POST {} HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\nConnection: close\r\nContent-Length: {}\r\n\r\n",
        path(WebhookKind::Validating),
        body.len()
    );
    tls.write_all(head.as_bytes())
        .await
        .expect("write the head");
    tls.write_all(first).await.expect("write half the body");
    tls.flush().await.expect("flush");
    tokio::time::sleep(Duration::from_millis(200)).await;

    running.server.terminate();
    refused_from_now_on(&running).await;
    tls.write_all(rest)
        .await
        .expect("write the rest of the body");
    let mut answer = Vec::new();
    tokio::time::timeout(WAIT, tls.read_to_end(&mut answer))
        .await
        .expect("answered in time")
        .expect("read the answer");
    let answer = String::from_utf8_lossy(&answer).to_string();
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    assert!(answer.contains("\"allowed\":true"), "{answer}");
    let status = running.server.exit_status(WAIT).await;
    assert!(status.success(), "{status:?}");
    assert_eq!(running.server.logs_containing("stopped").len(), 1);
}

#[tokio::test]
async fn sigterm_keeps_answering_with_connection_close_for_the_shutdown_delay() {
    const DELAY: Duration = Duration::from_secs(10);
    let mut running = start_ready(&["--shutdown-delay", "10s"]).await;
    let terminated = Instant::now();
    running.server.terminate();
    eventually_not_ready(&running).await;

    // A new connection is still accepted and answered, and closed after its answer although
    // the request asked to keep it alive.
    let body = reviews::body(&admission(
        "CREATE",
        Some(&memcached("late", json!({}))),
        None,
    ));
    let mut tls = running
        .client
        .connect()
        .await
        .expect("TLS during the shutdown delay");
    let head = format!(
        "POST {} HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\nConnection: keep-alive\r\nContent-Length: {}\r\n\r\n",
        path(WebhookKind::Validating),
        body.len()
    );
    tls.write_all(head.as_bytes())
        .await
        .expect("write the head");
    tls.write_all(&body).await.expect("write the body");
    let mut answer = Vec::new();
    tokio::time::timeout(WAIT, tls.read_to_end(&mut answer))
        .await
        .expect("the server closes the connection after its answer")
        .expect("read the answer");
    let answer = String::from_utf8_lossy(&answer).to_string();
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    assert!(
        answer.to_ascii_lowercase().contains("connection: close"),
        "{answer}"
    );

    refused_from_now_on(&running).await;
    let refused = terminated.elapsed();
    assert!(
        refused >= DELAY,
        "new connections were refused {refused:?} after SIGTERM, before the 10 s delay"
    );
    let status = running.server.exit_status(WAIT).await;
    assert!(status.success(), "{status:?}");
}

/// A generous bound on the waits for the server to act on a signal.
const WAIT: Duration = Duration::from_secs(60);

/// Waits until `/readyz` answers 503: the server is shutting down.
async fn eventually_not_ready(running: &crate::Running) {
    let started = Instant::now();
    loop {
        match client::plain_get(running.server.probes, "/readyz").await {
            Ok((503, _)) => return,
            other => assert!(
                started.elapsed() < WAIT,
                "/readyz still answers {other:?} {WAIT:?} after SIGTERM"
            ),
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Waits until the server accepts no new connection.
async fn refused_from_now_on(running: &crate::Running) {
    let started = Instant::now();
    while running.client.connect().await.is_ok() {
        assert!(
            started.elapsed() < WAIT,
            "new connections still accepted {WAIT:?} after SIGTERM"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test]
async fn metrics_expose_every_family_with_sane_values() {
    let running = start_ready(&[]).await;
    let denied = memcached("big", json!({"replicas": 1000}));
    let sparse = memcached("sparse", json!({"replicas": 3}));
    for (kind, review) in [
        (
            WebhookKind::Validating,
            admission("CREATE", Some(&denied), None),
        ),
        (
            WebhookKind::Mutating,
            admission("CREATE", Some(&sparse), None),
        ),
        (
            WebhookKind::Conversion,
            conversion(&reviews::v1beta1(), std::slice::from_ref(&sparse)),
        ),
    ] {
        let answer = running
            .client
            .post(path(kind), reviews::body(&review))
            .await
            .expect("an answer");
        assert_eq!(answer.status, 200);
    }
    let metrics = running.server.metrics().await;
    for line in [
        "memcached_operator_webhook_requests_total{webhook=\"validating\",code=\"200\"} 1",
        "memcached_operator_webhook_requests_total{webhook=\"mutating\",code=\"200\"} 1",
        "memcached_operator_webhook_requests_total{webhook=\"conversion\",code=\"200\"} 1",
        "memcached_operator_webhook_decisions_total{webhook=\"validating\",decision=\"denied\"} 1",
        "memcached_operator_webhook_decisions_total{webhook=\"mutating\",decision=\"patched\"} 1",
        "memcached_operator_webhook_decisions_total{webhook=\"conversion\",decision=\"allowed\"} 1",
        "memcached_operator_webhook_latency_seconds_count{webhook=\"validating\"} 1",
        "memcached_operator_webhook_requests_in_flight{webhook=\"validating\"} 0",
        "memcached_operator_webhook_certificate_reloads_total 1",
        "memcached_operator_webhook_certificate_reload_failures_total 0",
        "# EOF",
    ] {
        assert!(metrics.contains(line), "missing {line:?} in\n{metrics}");
    }
    let expiry: i64 = metrics
        .lines()
        .find_map(|l| {
            l.strip_prefix("memcached_operator_webhook_certificate_expiry_timestamp_seconds ")
        })
        .and_then(|v| v.trim().parse().ok())
        .expect("the expiry gauge");
    let pem = rustls::pki_types::CertificateDer::from_pem_slice(running.leaf.cert_pem.as_bytes())
        .expect("the leaf");
    let (_, leaf) = x509_parser::parse_x509_certificate(&pem).expect("X.509");
    assert_eq!(expiry, leaf.validity().not_after.timestamp());
    let latency_sum: f64 = metrics
        .lines()
        .find_map(|l| {
            l.strip_prefix(
                "memcached_operator_webhook_latency_seconds_sum{webhook=\"validating\"} ",
            )
        })
        .and_then(|v| v.trim().parse().ok())
        .expect("the latency sum");
    assert!(latency_sum > 0.0 && latency_sum < 1.0, "{latency_sum}");
}
