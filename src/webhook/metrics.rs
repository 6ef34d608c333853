//! Counts and times the webhooks' requests and decisions, and records the serving
//! certificate's reloads and expiry.
//!
//! Names follow controller-runtime's webhook metrics; the manager's registry prefixes them with
//! `memcached_operator_`. This module records only: it neither serves metrics nor decides what a
//! request means.

use std::fmt;
use std::time::Instant;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::{Registry, Unit};

use super::response::Decision;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct WebhookLabels {
    webhook: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct RequestLabels {
    webhook: &'static str,
    code: u16,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct DecisionLabels {
    webhook: &'static str,
    decision: &'static str,
}

/// Latency buckets from 100 µs to about 0.4 s: the webhooks answer in well under a
/// millisecond, so the Prometheus defaults (from 5 ms) would put every request in one bucket.
fn latency_histogram() -> Histogram {
    Histogram::new(exponential_buckets(0.0001, 2.5, 10))
}

/// The webhooks' metrics, after controller-runtime's (`webhook_latency_seconds`,
/// `webhook_requests_total`, `webhook_requests_in_flight`), plus decisions and the serving
/// certificate's reloads and expiry.
#[derive(Clone)]
pub struct Metrics {
    latency: Family<WebhookLabels, Histogram, fn() -> Histogram>,
    requests: Family<RequestLabels, Counter>,
    in_flight: Family<WebhookLabels, Gauge>,
    decisions: Family<DecisionLabels, Counter>,
    certificate_reloads: Counter,
    certificate_reload_failures: Counter,
    certificate_expiry: Gauge,
}

impl fmt::Debug for Metrics {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Metrics").finish_non_exhaustive()
    }
}

impl Default for Metrics {
    /// Metrics that record but are registered nowhere (for tests and examples).
    fn default() -> Self {
        Self::register(&mut Registry::default())
    }
}

impl Metrics {
    /// Creates the metrics and registers them as `webhook_*` in `registry` (whose prefix makes
    /// them `memcached_operator_webhook_*`).
    pub fn register(registry: &mut Registry) -> Self {
        let latency = Family::<WebhookLabels, Histogram, fn() -> Histogram>::new_with_constructor(
            latency_histogram,
        );
        let requests = Family::<RequestLabels, Counter>::default();
        let in_flight = Family::<WebhookLabels, Gauge>::default();
        let decisions = Family::<DecisionLabels, Counter>::default();
        let certificate_reloads = Counter::default();
        let certificate_reload_failures = Counter::default();
        let certificate_expiry = Gauge::default();
        registry.register_with_unit(
            "webhook_latency",
            "Time from receiving a webhook request to sending its response",
            Unit::Seconds,
            latency.clone(),
        );
        registry.register(
            "webhook_requests",
            "Webhook requests answered, by webhook and HTTP status code",
            requests.clone(),
        );
        registry.register(
            "webhook_requests_in_flight",
            "Webhook requests being answered",
            in_flight.clone(),
        );
        registry.register(
            "webhook_decisions",
            "Webhook decisions: allowed, denied or patched (conversions count as allowed or denied)",
            decisions.clone(),
        );
        registry.register(
            "webhook_certificate_reloads",
            "Serving certificates loaded, the first one included",
            certificate_reloads.clone(),
        );
        registry.register(
            "webhook_certificate_reload_failures",
            "Changed certificate files that could not be loaded",
            certificate_reload_failures.clone(),
        );
        registry.register(
            "webhook_certificate_expiry_timestamp_seconds",
            "notAfter of the serving certificate, in Unix seconds (0 when none is loaded)",
            certificate_expiry.clone(),
        );
        Metrics {
            latency,
            requests,
            in_flight,
            decisions,
            certificate_reloads,
            certificate_reload_failures,
            certificate_expiry,
        }
    }

    /// Starts measuring one request to a webhook; the measurement is recorded when the
    /// returned guard is dropped.
    pub fn measure_request(&self, webhook: &'static str) -> RequestMeasurer<'_> {
        self.in_flight
            .get_or_create(&WebhookLabels { webhook })
            .inc();
        RequestMeasurer {
            metrics: self,
            webhook,
            start: Instant::now(),
            code: None,
        }
    }

    /// Counts a decision of a webhook.
    pub fn record_decision(&self, webhook: &'static str, decision: Decision) {
        self.decisions
            .get_or_create(&DecisionLabels {
                webhook,
                decision: decision.label(),
            })
            .inc();
    }

    /// Records that a serving certificate was loaded, with its notAfter in Unix seconds.
    pub fn record_certificate_loaded(&self, not_after_unix: i64) {
        self.certificate_reloads.inc();
        self.certificate_expiry.set(not_after_unix);
    }

    /// Records that changed certificate files could not be loaded.
    pub fn record_certificate_failure(&self) {
        self.certificate_reload_failures.inc();
    }
}

impl crate::tls::cert_reloader::ReloadRecorder for Metrics {
    fn loaded(&self, not_after_unix: i64) {
        self.record_certificate_loaded(not_after_unix);
    }

    fn failed(&self) {
        self.record_certificate_failure();
    }
}

/// Times one webhook request: counts it in flight while alive and, when dropped, records its
/// latency and status code. A request dropped before [`RequestMeasurer::finish`] (the request
/// timed out, or the client went away) is counted with code 408.
#[must_use = "the measurement is recorded when the guard is dropped"]
pub struct RequestMeasurer<'a> {
    metrics: &'a Metrics,
    webhook: &'static str,
    start: Instant,
    code: Option<u16>,
}

impl RequestMeasurer<'_> {
    /// Sets the HTTP status code the request was answered with.
    pub fn finish(&mut self, code: u16) {
        self.code = Some(code);
    }
}

impl Drop for RequestMeasurer<'_> {
    fn drop(&mut self) {
        let labels = WebhookLabels {
            webhook: self.webhook,
        };
        self.metrics.in_flight.get_or_create(&labels).dec();
        self.metrics
            .latency
            .get_or_create(&labels)
            .observe(self.start.elapsed().as_secs_f64());
        self.metrics
            .requests
            .get_or_create(&RequestLabels {
                webhook: self.webhook,
                code: self.code.unwrap_or(408),
            })
            .inc();
    }
}

#[cfg(test)]
mod tests {
    use prometheus_client::encoding::text::encode;

    use super::*;

    /// Registers the metrics under the manager's prefix, and encodes them after `record`.
    fn recorded(record: impl FnOnce(&Metrics)) -> String {
        let mut registry = Registry::with_prefix("memcached_operator");
        let metrics = Metrics::register(&mut registry);
        record(&metrics);
        let mut text = String::new();
        encode(&mut text, &registry).expect("encodes");
        text
    }

    #[test]
    fn a_measured_request_shows_up_in_every_webhook_family() {
        let text = recorded(|metrics| {
            {
                let mut measurer = metrics.measure_request("validating");
                measurer.finish(200);
            }
            metrics.record_decision("validating", Decision::Denied);
        });
        assert!(
            text.contains(
                "memcached_operator_webhook_requests_total{webhook=\"validating\",code=\"200\"} 1"
            ),
            "{text}"
        );
        assert!(
            text.contains(
                "memcached_operator_webhook_requests_in_flight{webhook=\"validating\"} 0"
            ),
            "{text}"
        );
        assert!(
            text.contains(
                "memcached_operator_webhook_latency_seconds_count{webhook=\"validating\"} 1"
            ),
            "{text}"
        );
        assert!(
            text.contains(
                "memcached_operator_webhook_decisions_total{webhook=\"validating\",decision=\"denied\"} 1"
            ),
            "{text}"
        );
    }

    #[test]
    fn a_dropped_request_counts_as_timed_out() {
        let text = recorded(|metrics| drop(metrics.measure_request("mutating")));
        assert!(
            text.contains(
                "memcached_operator_webhook_requests_total{webhook=\"mutating\",code=\"408\"} 1"
            ),
            "{text}"
        );
    }

    #[test]
    fn certificate_metrics_record_loads_failures_and_expiry() {
        let text = recorded(|metrics| {
            metrics.record_certificate_loaded(1_900_000_000);
            metrics.record_certificate_failure();
        });
        assert!(
            text.contains("memcached_operator_webhook_certificate_reloads_total 1"),
            "{text}"
        );
        assert!(
            text.contains("memcached_operator_webhook_certificate_reload_failures_total 1"),
            "{text}"
        );
        assert!(
            text.contains(
                "memcached_operator_webhook_certificate_expiry_timestamp_seconds 1900000000"
            ),
            "{text}"
        );
    }
}
