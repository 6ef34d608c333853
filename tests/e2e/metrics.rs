//! Proves who may read the operator's metrics, against the real API server's TokenReview and
//! SubjectAccessReview: 401 without a token or with a forged one, 403 for a ServiceAccount
//! without the `metrics-reader` ClusterRole, 200 for one bound to it; that the metrics are
//! never served in clear; and that a scrape whose decisions are cached makes no API call,
//! counted by the API server itself.

use std::sync::Arc;

use kube::Client;
use testkit::client;

use crate::cluster::Env;

/// Review requests the API server has served so far: (TokenReviews, SubjectAccessReviews),
/// from its own `apiserver_request_total`.
async fn reviews_served(client: &Client) -> (u64, u64) {
    let request = http::Request::get("/metrics")
        .body(Vec::new())
        .expect("a request");
    let text = client
        .request_text(request)
        .await
        .expect("the API server's metrics");
    let sum = |resource: &str| -> u64 {
        let label = format!("resource=\"{resource}\"");
        text.lines()
            .filter(|line| line.starts_with("apiserver_request_total{") && line.contains(&label))
            .filter_map(|line| line.rsplit(' ').next()?.parse::<f64>().ok())
            .sum::<f64>() as u64
    };
    (sum("tokenreviews"), sum("subjectaccessreviews"))
}

/// The operator's own count of the reviews it asked for: (token, access).
fn reviews_asked(metrics: &str) -> (u64, u64) {
    let count = |review: &str| {
        let prefix =
            format!("memcached_operator_metrics_auth_reviews_total{{review=\"{review}\"}} ");
        metrics
            .lines()
            .find_map(|line| line.strip_prefix(&prefix)?.trim().parse().ok())
            .unwrap_or(0)
    };
    (count("token"), count("access"))
}

pub async fn metrics_answer_401_without_a_token_403_without_the_right_and_200_with_metrics_reader(
    env: Arc<Env>,
) {
    let namespace = env.create_namespace("e2e-metrics").await;
    let reader = env.token(&namespace, "reader").await;
    let stranger = env.token(&namespace, "stranger").await;
    env.bind_metrics_reader(&namespace, "reader").await;
    let stranger_user = format!("system:serviceaccount:{namespace}:stranger");
    assert!(
        !env.may_read_metrics(&stranger_user).await,
        "the stranger has no binding"
    );

    let guard = env.operator.lock().await;
    let operator = guard.as_ref().expect("the operator runs");
    assert!(
        operator.metrics_https,
        "the operator serves metrics over HTTPS"
    );

    let (status, body) = operator.get_metrics(None).await.expect("an answer");
    assert_eq!(status, 401, "no token: {body}");
    let (status, body) = operator
        .get_metrics(Some("forged.token.value"))
        .await
        .expect("an answer");
    assert_eq!(status, 401, "a forged token: {body}");
    let (status, body) = operator
        .get_metrics(Some(&stranger))
        .await
        .expect("an answer");
    assert_eq!(status, 403, "no metrics-reader binding: {body}");
    assert_eq!(
        body,
        format!("Authorization denied for user {stranger_user}\n")
    );
    let (status, body) = operator
        .get_metrics(Some(&reader))
        .await
        .expect("an answer");
    assert_eq!(status, 200, "bound to metrics-reader: {body}");
    assert!(
        body.contains("memcached_operator_controller_leader"),
        "the operator's metrics: {body}"
    );

    // The listener speaks TLS only: a plain HTTP request gets no metrics.
    let plain = client::plain_get(operator.metrics, "/metrics").await;
    assert!(
        !matches!(plain, Ok((200, _))),
        "metrics served in clear: {plain:?}"
    );
    // Outside OpenShift the certificate is self-signed, and the log says so once.
    let said = operator.logs_containing("serving a self-signed certificate made at start-up");
    assert_eq!(said.len(), 1, "{said:?}");
}

pub async fn a_scrape_with_a_cached_authorization_makes_no_api_call(env: Arc<Env>) {
    let guard = env.operator.lock().await;
    let operator = guard.as_ref().expect("the operator runs");
    // The first scrape may need the reviews (or find them cached from an earlier scenario).
    let first = operator.metrics().await;
    let asked = reviews_asked(&first);
    assert!(
        asked.0 >= 1 && asked.1 >= 1,
        "the scraper's token was reviewed at least once: {asked:?}"
    );
    let served = reviews_served(&env.client).await;
    const SCRAPES: usize = 20;
    let mut last = String::new();
    for _ in 0..SCRAPES {
        last = operator.metrics().await;
    }
    let served_after = reviews_served(&env.client).await;
    println!(
        "{SCRAPES} scrapes with a cached authorization: the API server served \
         {} TokenReviews and {} SubjectAccessReviews",
        served_after.0 - served.0,
        served_after.1 - served.1
    );
    assert_eq!(
        served_after, served,
        "the API server served no review for {SCRAPES} cached scrapes"
    );
    assert_eq!(
        reviews_asked(&last),
        asked,
        "the operator asked for no review for {SCRAPES} cached scrapes"
    );
    // The counter counts: a token it has not seen costs one TokenReview.
    let (status, _) = operator
        .get_metrics(Some("another-forged-token"))
        .await
        .expect("an answer");
    assert_eq!(status, 401);
    let counted = reviews_asked(&operator.metrics().await);
    assert_eq!(counted, (asked.0 + 1, asked.1), "one more TokenReview");
    assert_eq!(
        reviews_served(&env.client).await.0,
        served.0 + 1,
        "the API server served that one TokenReview"
    );
}
