//! Measures the validating webhook under load: 64 keep-alive connections for a few seconds.
//!
//! Ignored by default; run it against an optimised server with
//! `cargo test --release --test webhooks -- --ignored --nocapture load`.

use std::time::{Duration, Instant};

use bytes::Bytes;
use memcached_operator::webhook::WebhookKind;
use serde_json::json;
use testkit::reviews::{self, admission, memcached, path};

use crate::start_ready;

const CONCURRENCY: usize = 64;
const DURATION: Duration = Duration::from_secs(5);

#[tokio::test(flavor = "multi_thread")]
#[ignore = "a load measurement; run with --release --ignored --nocapture"]
async fn load_validate_at_concurrency_64_without_errors() {
    let running = start_ready(&[]).await;
    tokio::time::sleep(Duration::from_millis(200)).await;
    let idle_rss = running.server.rss_kib();
    let object = memcached("sessions", json!({"replicas": 3}));
    let body = Bytes::from(reviews::body(&admission("CREATE", Some(&object), None)));
    let started = Instant::now();
    let mut workers = Vec::new();
    for _ in 0..CONCURRENCY {
        let client = running.client.clone();
        let body = body.clone();
        workers.push(tokio::spawn(async move {
            let mut connection = client.keep_alive().await.expect("a connection");
            let mut latencies = Vec::new();
            let mut errors = 0usize;
            while started.elapsed() < DURATION {
                let sent = Instant::now();
                match connection
                    .post(path(WebhookKind::Validating), body.clone())
                    .await
                {
                    Ok(200) => latencies.push(sent.elapsed()),
                    _ => errors += 1,
                }
            }
            (latencies, errors)
        }));
    }
    let mut latencies = Vec::new();
    let mut errors = 0;
    for worker in workers {
        let (mut l, e) = worker.await.expect("a worker");
        latencies.append(&mut l);
        errors += e;
    }
    let elapsed = started.elapsed();
    latencies.sort();
    let percentile = |p: f64| {
        latencies
            .get(((latencies.len() as f64 * p) as usize).min(latencies.len().saturating_sub(1)))
            .copied()
            .unwrap_or_default()
    };
    println!(
        "load: {} requests in {elapsed:?} = {:.0} req/s at concurrency {CONCURRENCY}; p50 {:?}, p99 {:?}, max {:?}; {errors} errors; server RSS idle {idle_rss} KiB, after load {} KiB",
        latencies.len(),
        latencies.len() as f64 / elapsed.as_secs_f64(),
        percentile(0.50),
        percentile(0.99),
        latencies.last().copied().unwrap_or_default(),
        running.server.rss_kib(),
    );
    assert_eq!(errors, 0);
    assert!(!latencies.is_empty());
}
