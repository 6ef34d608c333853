//! Counts and times reconciliations, says whether this replica leads, how many per-object
//! records the controller holds, and which of its watches fail.

use std::time::Instant;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;

use super::cache::health::Health;

/// Labels of the error counter.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ErrorLabels {
    /// A short, bounded reason (`apply_statefulset`, `invalid_spec`, ...).
    pub reason: String,
}

/// Labels of the child-write counter.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ChildLabels {
    /// The child's kind.
    pub kind: String,
}

/// Labels of the records gauge.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct RecordLabels {
    /// `backoff` (consecutive failures of a Memcached), `last_warning` (the last warning
    /// Event of a Memcached) or `known_children` (what the controller last applied or verified
    /// of a child).
    pub record: String,
}

/// The per-object records the controller keeps.
pub const RECORDS: [&str; 4] = [
    "backoff",
    "last_warning",
    "known_children",
    "reported_restarts",
];

/// The controller's metrics.
#[derive(Clone, Debug)]
pub struct Metrics {
    /// Reconciliations started.
    pub reconciliations: Counter,
    /// Reconciliation durations, seconds.
    pub duration: Histogram,
    /// Failed reconciliations and invalid specs, by reason.
    pub errors: Family<ErrorLabels, Counter>,
    /// 1 while this replica holds the leader lease (or runs without leader election).
    pub leader: Gauge,
    /// Children written (applied or deleted), by kind.
    pub child_writes: Family<ChildLabels, Counter>,
    /// Status writes (server-side applies of a Memcached's status).
    pub status_writes: Counter,
    /// The per-object records held, by record.
    pub records: Family<RecordLabels, Gauge>,
    /// Which watches fail, by kind.
    pub health: Health,
}

impl Default for Metrics {
    fn default() -> Self {
        Self {
            reconciliations: Counter::default(),
            duration: Histogram::new(exponential_buckets(0.001, 2.0, 14)),
            errors: Family::default(),
            leader: Gauge::default(),
            child_writes: Family::default(),
            status_writes: Counter::default(),
            records: Family::default(),
            health: Health::default(),
        }
    }
}

impl Metrics {
    /// Creates the metrics and registers them as `controller_*` in `registry` (whose prefix makes
    /// them `memcached_operator_controller_*`).
    pub fn register(registry: &mut Registry) -> Self {
        let metrics = Self::default();
        registry.register(
            "controller_reconciliations",
            "Reconciliations started",
            metrics.reconciliations.clone(),
        );
        registry.register(
            "controller_reconcile_duration_seconds",
            "How long reconciliations take",
            metrics.duration.clone(),
        );
        registry.register(
            "controller_errors",
            "Failed reconciliations and invalid specs, by reason",
            metrics.errors.clone(),
        );
        registry.register(
            "controller_child_writes",
            "Children written (applied or deleted), by kind",
            metrics.child_writes.clone(),
        );
        registry.register(
            "controller_status_writes",
            "Status writes (server-side applies of a Memcached's status)",
            metrics.status_writes.clone(),
        );
        for record in RECORDS {
            metrics.record(record).set(0);
        }
        registry.register(
            "controller_records",
            "Per-object records the controller holds, by record: backoff, last_warning, \
             known_children, reported_restarts (all forgotten with their object)",
            metrics.records.clone(),
        );
        registry.register(
            "controller_watch_failing",
            "1 while the watch of a kind fails (it cannot be listed or watched), by kind",
            metrics.health.gauges(),
        );
        registry.register(
            "controller_leader",
            "1 while this replica reconciles (holds the leader lease)",
            metrics.leader.clone(),
        );
        metrics
    }

    /// Counts a reconciliation and times it until the returned guard is dropped.
    pub fn measure(&self) -> ReconcileTimer<'_> {
        self.reconciliations.inc();
        ReconcileTimer {
            histogram: &self.duration,
            start: Instant::now(),
        }
    }

    /// Counts a write of a child.
    pub fn child_written(&self, kind: &str) {
        self.child_writes
            .get_or_create(&ChildLabels {
                kind: kind.to_string(),
            })
            .inc();
    }

    /// The gauge of the per-object record `record` (one of [`RECORDS`]).
    pub fn record(&self, record: &str) -> Gauge {
        self.records
            .get_or_create(&RecordLabels {
                record: record.to_string(),
            })
            .clone()
    }

    /// Counts an error.
    pub fn error(&self, reason: &str) {
        self.errors
            .get_or_create(&ErrorLabels {
                reason: reason.to_string(),
            })
            .inc();
    }
}

/// Observes a reconciliation's duration when dropped, so timing stays out of its body.
pub struct ReconcileTimer<'a> {
    histogram: &'a Histogram,
    start: Instant,
}

impl Drop for ReconcileTimer<'_> {
    fn drop(&mut self) {
        self.histogram.observe(self.start.elapsed().as_secs_f64());
    }
}
