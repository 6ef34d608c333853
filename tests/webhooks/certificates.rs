//! Checks certificate lookup, late arrival, rotation and refusal, observed through TLS handshakes.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use bytes::Bytes;
use memcached_operator::tls::certs::{OLM_APISERVER_CERTS_DIR, OLM_SERVING_CERTS_DIR};
use memcached_operator::webhook::WebhookKind;
use serde_json::json;
use tempfile::TempDir;
use testkit::cert_layout::{self, KubeletVolume, Layout, olm_root};
use testkit::client::TlsClient;
use testkit::pki::{Ca, KeyForm};
use testkit::process::{Certs, READY_WITHIN, Server};
use testkit::reviews::{self, admission, memcached, path};

use crate::OPERATOR;

/// A generous bound on a wait for the server to act on a change of its files.
const WAIT: Duration = Duration::from_secs(120);

fn validate_body() -> Bytes {
    let object = memcached("sessions", json!({"replicas": 3}));
    Bytes::from(reviews::body(&admission("CREATE", Some(&object), None)))
}

/// Starts a server on `root`, waits until ready, and checks it presents `serial`.
async fn assert_serves(certs: Certs<'_>, ca: &Ca, serial: &str) -> Server {
    let server = OPERATOR.webhooks(certs, &[]).await;
    server.wait_ready(READY_WITHIN).await;
    let answer = TlsClient::new(server.webhook, &ca.pem)
        .post(path(WebhookKind::Validating), validate_body())
        .await
        .expect("a TLS answer");
    assert_eq!(answer.status, 200);
    assert_eq!(answer.serial, serial);
    server
}

#[tokio::test]
async fn the_apiserver_local_config_layout_alone_is_served() {
    let root = TempDir::new().expect("tempdir");
    let ca = Ca::root();
    let leaf = ca.serving(KeyForm::EcPkcs8);
    cert_layout::write(
        root.path(),
        Layout::ApiServer,
        &leaf.cert_pem,
        &leaf.key_pem,
    );
    assert!(!root.path().join(OLM_SERVING_CERTS_DIR).exists());
    let server = assert_serves(Certs::Root(root.path()), &ca, &leaf.serial).await;
    let loaded = server.logs_containing("serving certificate loaded");
    assert_eq!(loaded.len(), 1);
    assert!(
        loaded[0]["source"]
            .as_str()
            .is_some_and(|s| s.contains(OLM_APISERVER_CERTS_DIR)),
        "{}",
        loaded[0]
    );
}

#[tokio::test]
async fn the_tls_cert_spelling_of_olms_docs_is_accepted() {
    let root = TempDir::new().expect("tempdir");
    let ca = Ca::root();
    let leaf = ca.serving(KeyForm::EcPkcs8);
    cert_layout::write(
        root.path(),
        Layout::ServingCertsTlsCert,
        &leaf.cert_pem,
        &leaf.key_pem,
    );
    assert_serves(Certs::Root(root.path()), &ca, &leaf.serial).await;
}

#[tokio::test]
async fn the_first_olm_path_wins_over_the_apiserver_one() {
    let root = TempDir::new().expect("tempdir");
    let ca = Ca::root();
    let first = ca.serving(KeyForm::EcPkcs8);
    let second = ca.serving(KeyForm::EcPkcs8);
    cert_layout::write(
        root.path(),
        Layout::ServingCerts,
        &first.cert_pem,
        &first.key_pem,
    );
    cert_layout::write(
        root.path(),
        Layout::ApiServer,
        &second.cert_pem,
        &second.key_pem,
    );
    assert_serves(Certs::Root(root.path()), &ca, &first.serial).await;
}

#[tokio::test]
async fn an_explicit_cert_dir_is_served() {
    let dir = TempDir::new().expect("tempdir");
    let ca = Ca::root();
    let leaf = ca.serving(KeyForm::EcPkcs8);
    std::fs::write(dir.path().join("tls.crt"), &leaf.cert_pem).expect("write");
    std::fs::write(dir.path().join("tls.key"), &leaf.key_pem).expect("write");
    assert_serves(Certs::Dir(dir.path()), &ca, &leaf.serial).await;
}

#[tokio::test]
async fn pkcs1_pkcs8_and_sec1_keys_are_all_served() {
    let ca = Ca::root();
    for form in [
        KeyForm::RsaPkcs1,
        KeyForm::RsaPkcs8,
        KeyForm::EcSec1,
        KeyForm::EcPkcs8,
    ] {
        let root = TempDir::new().expect("tempdir");
        let leaf = ca.serving(form);
        cert_layout::write(
            root.path(),
            Layout::ServingCerts,
            &leaf.cert_pem,
            &leaf.key_pem,
        );
        assert_serves(Certs::Root(root.path()), &ca, &leaf.serial).await;
    }
}

#[tokio::test]
async fn a_chain_is_served_whole() {
    let root = TempDir::new().expect("tempdir");
    let ca = Ca::root();
    let intermediate = ca.intermediate();
    let leaf = intermediate
        .serving(KeyForm::EcPkcs8)
        .with_chain(&intermediate);
    cert_layout::write(
        root.path(),
        Layout::ServingCerts,
        &leaf.cert_pem,
        &leaf.key_pem,
    );
    let server = OPERATOR.webhooks(Certs::Root(root.path()), &[]).await;
    server.wait_ready(READY_WITHIN).await;
    // The client trusts the root only: the handshake needs the intermediate from the server.
    let answer = TlsClient::new(server.webhook, &ca.pem)
        .post(path(WebhookKind::Validating), validate_body())
        .await
        .expect("a TLS answer through the intermediate");
    assert_eq!(answer.status, 200);
    assert_eq!(answer.chain_length, 2);
    assert_eq!(answer.serial, leaf.serial);
}

#[tokio::test]
async fn certificates_appearing_late_make_the_server_ready_after_one_log_line() {
    let root = TempDir::new().expect("tempdir");
    let server = OPERATOR
        .webhooks(Certs::Root(root.path()), &["--cert-poll-interval", "100ms"])
        .await;
    // Several polls pass with the same reasons.
    tokio::time::sleep(Duration::from_millis(800)).await;
    assert_eq!(server.readyz().await, 503);
    let ca = Ca::root();
    let client = TlsClient::new(server.webhook, &ca.pem);
    assert!(
        client
            .post(path(WebhookKind::Validating), validate_body())
            .await
            .is_err(),
        "no handshake without a certificate"
    );
    let complaints = server.logs_containing("no usable certificate");
    assert_eq!(complaints.len(), 1, "{complaints:?}");
    let line = complaints[0]["message"].as_str().unwrap_or_default();
    for tried in [
        "tmp/k8s-webhook-server/serving-certs/tls.crt: does not exist",
        "tmp/k8s-webhook-server/serving-certs/tls.cert: does not exist",
        "apiserver.local.config/certificates/apiserver.crt: does not exist",
    ] {
        assert!(line.contains(tried), "{line}");
    }

    let leaf = ca.serving(KeyForm::EcPkcs8);
    let written = Instant::now();
    cert_layout::write(
        root.path(),
        Layout::ServingCerts,
        &leaf.cert_pem,
        &leaf.key_pem,
    );
    server.wait_ready(READY_WITHIN).await;
    println!(
        "late certificate: ready {:?} after the files appeared",
        written.elapsed()
    );
    let answer = client
        .post(path(WebhookKind::Validating), validate_body())
        .await
        .expect("served once the certificate appeared");
    assert_eq!(answer.serial, leaf.serial);
    assert_eq!(server.logs_containing("no usable certificate").len(), 1);
}

#[tokio::test]
async fn a_kubelet_symlink_swap_rotates_the_certificate_under_load_without_failures() {
    let root = TempDir::new().expect("tempdir");
    let ca = Ca::root();
    let old = ca.serving(KeyForm::EcPkcs8);
    let mut volume = KubeletVolume::new(&root.path().join(OLM_SERVING_CERTS_DIR));
    volume.publish(&old.cert_pem, &old.key_pem);
    // A long poll: only the directory watch can make the rotation quick.
    let server = OPERATOR
        .webhooks(Certs::Root(root.path()), &["--cert-poll-interval", "60s"])
        .await;
    server.wait_ready(READY_WITHIN).await;
    let client = TlsClient::new(server.webhook, &ca.pem);

    let stop = Arc::new(AtomicBool::new(false));
    let served = Arc::new(AtomicUsize::new(0));
    let failed = Arc::new(std::sync::Mutex::new(Vec::<String>::new()));
    let new_seen = Arc::new(std::sync::Mutex::new(None::<Instant>));
    let new = ca.serving(KeyForm::EcPkcs8);
    let mut workers = Vec::new();
    for _ in 0..4 {
        let (client, stop, served, failed, new_seen, new_serial) = (
            client.clone(),
            stop.clone(),
            served.clone(),
            failed.clone(),
            new_seen.clone(),
            new.serial.clone(),
        );
        workers.push(tokio::spawn(async move {
            while !stop.load(Ordering::Relaxed) {
                match client
                    .post(path(WebhookKind::Validating), validate_body())
                    .await
                {
                    Ok(answer) if answer.status == 200 => {
                        served.fetch_add(1, Ordering::Relaxed);
                        if answer.serial == new_serial
                            && let Ok(mut seen) = new_seen.lock()
                        {
                            seen.get_or_insert_with(Instant::now);
                        }
                    }
                    Ok(answer) => failed
                        .lock()
                        .expect("lock")
                        .push(format!("status {}", answer.status)),
                    Err(error) => failed.lock().expect("lock").push(error.to_string()),
                }
            }
        }));
    }
    // One connection kept open across the rotation keeps working too.
    let mut kept = client.keep_alive().await.expect("a connection");
    let keep_stop = stop.clone();
    let kept_failed = failed.clone();
    let kept_worker = tokio::spawn(async move {
        let mut answered = 0;
        while !keep_stop.load(Ordering::Relaxed) {
            match kept
                .post(path(WebhookKind::Validating), validate_body())
                .await
            {
                Ok(200) => answered += 1,
                Ok(status) => kept_failed
                    .lock()
                    .expect("lock")
                    .push(format!("kept: {status}")),
                Err(error) => kept_failed
                    .lock()
                    .expect("lock")
                    .push(format!("kept: {error}")),
            }
        }
        answered
    });

    tokio::time::sleep(Duration::from_millis(300)).await;
    let swapped = Instant::now();
    volume.publish(&new.cert_pem, &new.key_pem);
    while new_seen.lock().expect("lock").is_none() && swapped.elapsed() < WAIT {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    tokio::time::sleep(Duration::from_millis(300)).await;
    stop.store(true, Ordering::Relaxed);
    for worker in workers {
        worker.await.expect("a worker");
    }
    let kept_answered = kept_worker.await.expect("the kept connection");
    let seen = new_seen
        .lock()
        .expect("lock")
        .expect("the new certificate is presented within the wait");
    let took = seen.duration_since(swapped);
    println!(
        "rotation: new certificate presented {took:?} after the ..data swap; {} requests on new connections and {kept_answered} on one kept connection, none failed",
        served.load(Ordering::Relaxed)
    );
    let failed = failed.lock().expect("lock");
    assert!(failed.is_empty(), "failed requests: {failed:?}");
    assert!(kept_answered > 0);
    assert_eq!(
        server.logs_containing("serving certificate loaded").len(),
        2
    );
}

#[tokio::test]
async fn a_mismatched_pair_is_refused_and_the_old_certificate_kept() {
    let root = TempDir::new().expect("tempdir");
    let ca = Ca::root();
    let old = ca.serving(KeyForm::EcPkcs8);
    cert_layout::write(
        root.path(),
        Layout::ServingCerts,
        &old.cert_pem,
        &old.key_pem,
    );
    let server = OPERATOR
        .webhooks(Certs::Root(root.path()), &["--cert-poll-interval", "100ms"])
        .await;
    server.wait_ready(READY_WITHIN).await;

    let other = ca.serving(KeyForm::EcPkcs8);
    cert_layout::write(
        root.path(),
        Layout::ServingCerts,
        &other.cert_pem,
        &old.key_pem,
    );
    let start = Instant::now();
    while server
        .logs_containing("refusing the changed certificate files")
        .is_empty()
    {
        assert!(start.elapsed() < WAIT, "no refusal logged");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let refusal = &server.logs_containing("refusing the changed certificate files")[0];
    let message = refusal["message"].as_str().unwrap_or_default();
    assert!(
        message.contains("does not match the public key"),
        "{message}"
    );
    assert_eq!(server.readyz().await, 200);
    let answer = TlsClient::new(server.webhook, &ca.pem)
        .post(path(WebhookKind::Validating), validate_body())
        .await
        .expect("still served");
    assert_eq!(answer.serial, old.serial, "the old certificate is kept");
    assert!(
        server
            .metrics()
            .await
            .contains("memcached_operator_webhook_certificate_reload_failures_total 1"),
    );
}

#[tokio::test]
async fn the_watch_goes_quiet_after_a_change_instead_of_reacting_to_its_own_reads() {
    let (root, _, _) = olm_root();
    let server = OPERATOR
        .webhooks(Certs::Root(root.path()), &["--cert-poll-interval", "60s"])
        .await;
    server.wait_ready(READY_WITHIN).await;
    // A change in the watched directory makes the server read the certificate files once.
    std::fs::write(
        root.path().join(OLM_SERVING_CERTS_DIR).join("unrelated"),
        "x",
    )
    .expect("write");
    tokio::time::sleep(Duration::from_millis(500)).await;
    let before = server.read_syscalls();
    tokio::time::sleep(Duration::from_secs(1)).await;
    let reads = server.read_syscalls() - before;
    assert!(reads < 20, "{reads} reads in a second of idleness");
}
