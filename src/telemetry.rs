//! Sets up logging and holds the Prometheus metrics every server of the operator records.
//!
//! Logs go to stdout through `tracing`: JSON when stdout is not a terminal (in a cluster),
//! human-readable text on a terminal. Metrics use `prometheus-client` and are encoded in the
//! OpenMetrics text format; their names follow controller-runtime's webhook metrics with the
//! `memcached_operator_` prefix. This module neither serves metrics over HTTP nor decides what
//! a request means: the servers call it.

use std::fmt;
use std::io::IsTerminal;
use std::time::Instant;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::encoding::text::encode;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::{Registry, Unit};
use tracing_subscriber::EnvFilter;

/// The prefix of every metric name.
pub const METRICS_PREFIX: &str = "memcached_operator";

/// The `Content-Type` of the metrics endpoint.
pub const OPENMETRICS_CONTENT_TYPE: &str =
    "application/openmetrics-text; version=1.0.0; charset=utf-8";

/// How logs are written.
#[derive(clap::ValueEnum, Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum LogFormat {
    /// JSON when stdout is not a terminal, text otherwise.
    #[default]
    Auto,
    /// One JSON object per line.
    Json,
    /// Human-readable text.
    Text,
}

/// Logging flags, shared by every subcommand.
#[derive(clap::Args, Clone, Debug, Default)]
pub struct LogArgs {
    /// Log format.
    #[arg(long, value_enum, default_value_t = LogFormat::Auto, global = true)]
    pub log_format: LogFormat,

    /// Log filter, in `RUST_LOG` syntax (e.g. `info` or `memcached_operator=debug`). Overrides
    /// `RUST_LOG`; without either, `info`.
    #[arg(long, global = true)]
    pub log_level: Option<String>,
}

/// Why logging could not be set up.
#[derive(Debug, thiserror::Error)]
pub enum TelemetryError {
    /// The log filter does not parse.
    #[error("invalid log filter {filter:?}: {source}")]
    Filter {
        /// The filter as given.
        filter: String,
        /// What the parser said.
        #[source]
        source: tracing_subscriber::filter::ParseError,
    },
    /// A global subscriber was already installed.
    #[error("logging is already initialised")]
    AlreadyInitialised,
}

/// Installs the global `tracing` subscriber.
pub fn init_logging(args: &LogArgs) -> Result<(), TelemetryError> {
    let filter = args
        .log_level
        .clone()
        .or_else(|| std::env::var(EnvFilter::DEFAULT_ENV).ok())
        .filter(|filter| !filter.trim().is_empty())
        .unwrap_or_else(|| "info".to_string());
    let env_filter =
        EnvFilter::builder()
            .parse(&filter)
            .map_err(|source| TelemetryError::Filter {
                filter: filter.clone(),
                source,
            })?;
    let json = match args.log_format {
        LogFormat::Json => true,
        LogFormat::Text => false,
        LogFormat::Auto => !std::io::stdout().is_terminal(),
    };
    let builder = tracing_subscriber::fmt()
        .with_env_filter(env_filter)
        .with_writer(std::io::stdout);
    let installed = if json {
        builder
            .json()
            .flatten_event(true)
            .with_current_span(true)
            .with_span_list(false)
            .try_init()
    } else {
        builder.try_init()
    };
    installed.map_err(|_| TelemetryError::AlreadyInitialised)
}

/// What an admission or conversion webhook decided.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Decision {
    /// Admitted unchanged (or converted).
    Allowed,
    /// Refused (or the conversion failed).
    Denied,
    /// Admitted with a JSON patch.
    Patched,
}

impl Decision {
    /// The `decision` label value.
    pub fn label(self) -> &'static str {
        match self {
            Decision::Allowed => "allowed",
            Decision::Denied => "denied",
            Decision::Patched => "patched",
        }
    }
}

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

/// Every metric of the operator, registered once.
pub struct Metrics {
    registry: Registry,
    latency: Family<WebhookLabels, Histogram, fn() -> Histogram>,
    requests: Family<RequestLabels, Counter>,
    in_flight: Family<WebhookLabels, Gauge>,
    decisions: Family<DecisionLabels, Counter>,
    certificate_reloads: Counter,
    certificate_reload_failures: Counter,
    certificate_expiry: Gauge,
    /// The controller's reconciliation metrics, in the same registry.
    pub controller: crate::controller::metrics::Metrics,
}

impl fmt::Debug for Metrics {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Metrics").finish_non_exhaustive()
    }
}

impl Default for Metrics {
    fn default() -> Self {
        Self::new()
    }
}

impl Metrics {
    /// Creates and registers every metric.
    pub fn new() -> Self {
        let mut registry = Registry::with_prefix(METRICS_PREFIX);
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
        let controller = crate::controller::metrics::Metrics::register(&mut registry);
        Metrics {
            registry,
            latency,
            requests,
            in_flight,
            decisions,
            certificate_reloads,
            certificate_reload_failures,
            certificate_expiry,
            controller,
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

    /// Encodes every metric in the OpenMetrics text format.
    pub fn encode(&self) -> Result<String, fmt::Error> {
        let mut text = String::with_capacity(4096);
        encode(&mut text, &self.registry)?;
        Ok(text)
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
    use super::*;

    #[test]
    fn a_measured_request_shows_up_in_every_webhook_family() {
        let metrics = Metrics::new();
        {
            let mut measurer = metrics.measure_request("validating");
            measurer.finish(200);
        }
        metrics.record_decision("validating", Decision::Denied);
        let text = metrics.encode().expect("encodes");
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
        let metrics = Metrics::new();
        drop(metrics.measure_request("mutating"));
        let text = metrics.encode().expect("encodes");
        assert!(
            text.contains(
                "memcached_operator_webhook_requests_total{webhook=\"mutating\",code=\"408\"} 1"
            ),
            "{text}"
        );
    }

    #[test]
    fn certificate_metrics_record_loads_failures_and_expiry() {
        let metrics = Metrics::new();
        metrics.record_certificate_loaded(1_900_000_000);
        metrics.record_certificate_failure();
        let text = metrics.encode().expect("encodes");
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
