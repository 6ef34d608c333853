//! Certificate drills: an expired certificate, one from another CA, one without the dialed
//! address, and none at all. Each asserts what the API server and the operator say, lays the
//! documented fix out under the suite's certificate root, and asserts recovery.

use super::*;

/// Replaces the operator: stops the running one, lays `leaf` out under the suite's root and
/// starts again, so that the API server's next connection meets `leaf` (its kept-alive
/// connections to the old process are gone).
async fn restart_serving(env: &Env, leaf: &Leaf) {
    env.stop_operator().await;
    cert_layout::write(
        env.cert_root.path(),
        Layout::ServingCerts,
        &leaf.cert_pem,
        &leaf.key_pem,
    );
    env.start_operator(env.cert_root.path()).await;
}

/// Lays a good certificate out under the suite's root and waits until the running operator
/// says it serves it: the fix of every certificate drill.
async fn rotate_to_good_certificate(env: &Env) -> Leaf {
    let leaf = env.lay_out_suite_pair();
    wait_for_log(env, "serving certificate loaded", |entry| {
        entry["serial"] == leaf.serial.as_str()
    })
    .await;
    leaf
}

pub async fn drill_an_expired_certificate_fails_the_tls_handshake(env: Arc<Env>) {
    let namespace = env.create_namespace("drill-expired").await;
    let api: Api<Memcached> = Api::namespaced(env.client.clone(), &namespace);
    let expired = env.ca.expired_serving();
    restart_serving(&env, &expired).await;
    {
        let guard = env.operator.lock().await;
        let operator = guard.as_ref().expect("the operator runs");
        let warned = operator.logs_containing("the serving certificate has expired");
        assert!(
            warned
                .iter()
                .any(|entry| entry["serial"] == expired.serial.as_str()),
            "the operator warns about the expired certificate: {warned:?}"
        );
        assert!(
            operator
                .metrics()
                .await
                .lines()
                .any(|line| line.starts_with(
                    "memcached_operator_webhook_certificate_expiry_timestamp_seconds 1609459200"
                )),
            "the expiry metric shows 2021-01-01"
        );
    }
    let message = refusal(
        "a create with an expired serving certificate",
        api.create(&PostParams::default(), &memcached("expired"))
            .await,
    );
    assert_starts_with(
        &message,
        &format!(
            "{}tls: failed to verify certificate: x509: certificate has expired or is not yet \
             valid: current time ",
            failed_calling(&env, MUTATING, MUTATE_PATH)
        ),
    );
    assert!(
        message.ends_with("is after 2021-01-01T00:00:00Z"),
        "{message}"
    );

    rotate_to_good_certificate(&env).await;
    create_eventually(&api, "renewed").await;
}

pub async fn drill_a_certificate_from_another_ca_is_an_unknown_authority(env: Arc<Env>) {
    let namespace = env.create_namespace("drill-unknown-ca").await;
    let api: Api<Memcached> = Api::namespaced(env.client.clone(), &namespace);
    let stranger = Ca::root().serving(KeyForm::EcPkcs8);
    restart_serving(&env, &stranger).await;
    let message = refusal(
        "a create with a certificate the caBundle did not sign",
        api.create(&PostParams::default(), &memcached("unknown-ca"))
            .await,
    );
    assert_eq!(
        message,
        format!(
            "{}tls: failed to verify certificate: x509: certificate signed by unknown authority \
             (possibly because of \"x509: ECDSA verification failure\" while trying to verify \
             candidate authority certificate \"memcached-operator test root\")",
            failed_calling(&env, MUTATING, MUTATE_PATH)
        )
    );

    rotate_to_good_certificate(&env).await;
    create_eventually(&api, "known-ca").await;
}

pub async fn drill_a_certificate_without_the_dialed_address_fails_verification(env: Arc<Env>) {
    let namespace = env.create_namespace("drill-san").await;
    let api: Api<Memcached> = Api::namespaced(env.client.clone(), &namespace);
    // Issued for the in-cluster Service name only; the wiring dials an IP address.
    let wrong_names = env
        .ca
        .serving_for(&["memcached-operator-webhook-service.memcached-operator-system.svc"]);
    restart_serving(&env, &wrong_names).await;
    let message = refusal(
        "a create with a certificate for other names",
        api.create(&PostParams::default(), &memcached("wrong-san"))
            .await,
    );
    assert_eq!(
        message,
        format!(
            "{}tls: failed to verify certificate: x509: cannot validate certificate for {} \
             because it doesn't contain any IP SANs",
            failed_calling(&env, MUTATING, MUTATE_PATH),
            env.webhook_address().ip()
        )
    );

    rotate_to_good_certificate(&env).await;
    create_eventually(&api, "right-san").await;
}

pub async fn drill_missing_certificates_keep_the_operator_unready(env: Arc<Env>) {
    let namespace = env.create_namespace("drill-no-certs").await;
    let api: Api<Memcached> = Api::namespaced(env.client.clone(), &namespace);
    let empty_root = tempfile::tempdir().expect("a certificate root");
    env.stop_operator().await;
    let operator = env.spawn_operator(empty_root.path(), &[]).await;
    let looked = eventually(
        "the operator logs that it has no usable certificate",
        WAIT,
        || async {
            let looked = operator.logs_containing("no usable certificate");
            (!looked.is_empty()).then_some(looked)
        },
    )
    .await;
    let (status, body) = client::plain_get(operator.probes, "/readyz")
        .await
        .expect("an answer from /readyz");
    assert_eq!(
        (status, String::from_utf8_lossy(&body).as_ref()),
        (503, "no usable serving certificate yet\n"),
        "not ready without a certificate"
    );
    let root = empty_root.path().display().to_string();
    let line = looked
        .first()
        .and_then(|entry| entry["message"].as_str())
        .unwrap_or_else(|| panic!("no log line names the missing certificate: {looked:?}"));
    for tried in [
        "/tmp/k8s-webhook-server/serving-certs/tls.crt",
        "/tmp/k8s-webhook-server/serving-certs/tls.cert",
        "/apiserver.local.config/certificates/apiserver.crt",
    ] {
        assert!(
            line.contains(&format!("{root}{tried}: does not exist")),
            "the log line names {root}{tried}: {line}"
        );
    }
    assert!(line.ends_with("not ready, still looking"), "{line}");
    let message = refusal(
        "a create while the operator has no certificate",
        api.create(&PostParams::default(), &memcached("no-certs"))
            .await,
    );
    assert_eq!(
        message,
        format!(
            "{}remote error: tls: access denied",
            failed_calling(&env, MUTATING, MUTATE_PATH)
        )
    );

    // Fix: the certificate appears where OLM mounts it (the Secret is mounted late).
    let leaf = env.ca.serving(KeyForm::EcPkcs8);
    cert_layout::write(
        empty_root.path(),
        Layout::ServingCerts,
        &leaf.cert_pem,
        &leaf.key_pem,
    );
    let took = operator.wait_ready(READY_WITHIN).await;
    println!("ready {took:?} after the certificate appeared");
    *env.operator.lock().await = Some(operator);
    create_eventually(&api, "certs-appeared").await;
    env.stop_operator().await;
    env.start_operator(env.cert_root.path()).await;
}
