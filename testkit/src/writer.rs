//! A writer loop that runs through a lifecycle event (a certificate renewal, an upgrade) and
//! counts what failed: it updates one Memcached over and over, alternating between v1beta1 and
//! v1alpha1, so every write passes the mutating and validating webhooks, and every other one
//! the conversion webhook too.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use kube::Client;
use kube::api::{Api, Patch, PatchParams, PostParams};
use memcached_operator::api::v1alpha1;
use memcached_operator::api::v1beta1::{Memcached, MemcachedSpec};
use serde_json::json;
use tokio::task::JoinHandle;

/// What a writer did.
#[derive(Debug, Default)]
pub struct Tally {
    /// Writes attempted.
    pub attempts: u64,
    /// The writes that failed, in order: when, and the error.
    pub failures: Vec<(Instant, String)>,
}

/// A running writer loop.
pub struct Writer {
    stop: Arc<AtomicBool>,
    attempts: Arc<AtomicU64>,
    handle: JoinHandle<Tally>,
}

impl Tally {
    /// The failures a switch of CA does not explain. When a new CA is issued (OLM's rotation,
    /// the new CSV of an upgrade) it reaches the webhook configurations and the serving pods at
    /// different moments, so the API server may refuse a certificate for a moment. That, before
    /// the switch settled (`settled`: every connection serves a certificate the API server's
    /// CA trusts), is the only failure allowed; anything else (a connection closed under a
    /// request, a failure after the switch) is the operator's.
    pub fn unexplained(&self, settled: Instant) -> Vec<&str> {
        self.failures
            .iter()
            .filter(|(at, error)| {
                !(error.contains("x509: certificate signed by unknown authority") && *at < settled)
            })
            .map(|(_, error)| error.as_str())
            .collect()
    }
}

impl Writer {
    /// Creates Memcached `name` in `namespace` (one replica) and starts writing to it.
    pub async fn start(client: &Client, namespace: &str, name: &str) -> Writer {
        let beta: Api<Memcached> = Api::namespaced(client.clone(), namespace);
        let mut object = Memcached::new(
            name,
            MemcachedSpec {
                replicas: Some(1),
                ..MemcachedSpec::default()
            },
        );
        object.metadata.namespace = Some(namespace.to_string());
        beta.create(&PostParams::default(), &object)
            .await
            .expect("create the written Memcached");
        let alpha: Api<v1alpha1::Memcached> = Api::namespaced(client.clone(), namespace);
        let stop = Arc::new(AtomicBool::new(false));
        let stopping = stop.clone();
        let attempts = Arc::new(AtomicU64::new(0));
        let counted = attempts.clone();
        let name = name.to_string();
        let handle = tokio::spawn(async move {
            let mut tally = Tally::default();
            while !stopping.load(Ordering::Relaxed) {
                let patch = json!({"metadata": {"labels": {"write": tally.attempts.to_string()}}});
                let params = PatchParams::default();
                let written = if tally.attempts % 2 == 0 {
                    beta.patch(&name, &params, &Patch::Merge(&patch))
                        .await
                        .map(|_| ())
                } else {
                    alpha
                        .patch(&name, &params, &Patch::Merge(&patch))
                        .await
                        .map(|_| ())
                };
                tally.attempts += 1;
                counted.store(tally.attempts, Ordering::Relaxed);
                if let Err(error) = written {
                    tally.failures.push((Instant::now(), error.to_string()));
                }
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
            tally
        });
        Writer {
            stop,
            attempts,
            handle,
        }
    }

    /// Waits until the loop has attempted `more` writes beyond those it had when called: a
    /// window of writes counted in writes, not in seconds.
    ///
    /// # Panics
    /// If it has not within two minutes (the loop writes every 50 ms when the API server
    /// answers).
    pub async fn wait_for_writes(&self, more: u64) {
        let target = self.attempts.load(Ordering::Relaxed) + more;
        let started = Instant::now();
        while self.attempts.load(Ordering::Relaxed) < target {
            assert!(
                started.elapsed() < Duration::from_secs(120),
                "the writer made {} of {more} writes in 120 s",
                more + self.attempts.load(Ordering::Relaxed) - target
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// Stops the loop and returns what it did.
    pub async fn stop(self) -> Tally {
        self.stop.store(true, Ordering::Relaxed);
        self.handle.await.expect("the writer loop ends")
    }
}
