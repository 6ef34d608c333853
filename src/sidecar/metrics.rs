//! What the certificate refresher, the stats relay and the supervisor tell Prometheus, at
//! `/metrics` on their own port (`health`): which certificate the server presents, whether it
//! presents the one and reads the CA file the kubelet mounted, when that certificate expires,
//! how many `refresh_certs` were sent and how many failed, how many client CAs withdrawn from
//! that file the server may still trust; how many relayed connections failed; whether
//! the mounted auth file is one memcached would refuse, and how many rereads were sent and
//! refused. The Memcached's ServiceMonitor scrapes these ports beside the exporter's, and its
//! PrometheusRule alerts on them: the failures these processes otherwise only log.

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

/// The metric names, as the exposition writes them (a counter gains `_total`); the alerting
/// rules and their tests quote these.
pub const REFRESHES: &str = "memcached_certificate_refreshes";
/// See [`REFRESHES`].
pub const REFRESH_PENDING: &str = "memcached_certificate_refresh_pending";
/// See [`REFRESHES`].
pub const EXPIRY: &str = "memcached_certificate_expiry_timestamp_seconds";
/// See [`REFRESHES`].
pub const SERVED: &str = "memcached_certificate_served";
/// See [`REFRESHES`].
pub const WITHDRAWN_CAS: &str = "memcached_client_cas_withdrawn_trusted";
/// See [`REFRESHES`].
pub const RELAYED: &str = "memcached_stats_relay_connections";
/// See [`REFRESHES`].
pub const AUTH_RELOADS: &str = "memcached_auth_reloads";
/// See [`REFRESHES`].
pub const AUTH_REFUSED: &str = "memcached_auth_file_refused";

/// How an attempt ended: `result="succeeded"` or `result="failed"`.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct Outcome {
    /// `succeeded` or `failed`.
    pub result: &'static str,
}

/// The succeeded outcome.
pub const SUCCEEDED: Outcome = Outcome {
    result: "succeeded",
};
/// The failed outcome.
pub const FAILED: Outcome = Outcome { result: "failed" };

/// A certificate's serial number (hex, with colons), which it presents to every client.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct Serial {
    /// The serial.
    pub serial: String,
}

/// Both outcomes of `counter` from the start, so that a rate over either is defined before the
/// first attempt ends.
fn both_outcomes(counter: &Family<Outcome, Counter>) {
    for outcome in [SUCCEEDED, FAILED] {
        let _ = counter.get_or_create(&outcome);
    }
}

/// The certificate refresher's metrics.
#[derive(Clone, Debug, Default)]
pub struct RefresherMetrics {
    /// `refresh_certs` sent to the server, by outcome: failed when the server refused it or
    /// could not be reached for it, or still presented another certificate afterwards.
    pub refreshes: Family<Outcome, Counter>,
    /// 1 while the server presents another certificate than the file's, or has not read the
    /// file's `ca.crt`; 0 once it presents and reads what the files hold.
    pub pending: Gauge,
    /// The notAfter of the certificate file's leaf, in Unix seconds.
    pub expiry: Gauge,
    /// 1, labelled with the serial of the certificate the server was last seen presenting.
    pub served: Family<Serial, Gauge>,
    /// How many client CAs the server may still trust that `ca.crt` no longer holds
    /// (`sidecar::trust`): 0 until one is withdrawn, and again once the server restarts.
    pub withdrawn_cas: Gauge,
}

impl RefresherMetrics {
    /// Records that the server presents the certificate with `serial`, and no other.
    pub fn serving(&self, serial: &str) {
        let serial = Serial {
            serial: serial.to_string(),
        };
        if self.served.get(&serial).is_none() {
            self.served.clear();
            self.served.get_or_create(&serial).set(1);
        }
    }

    /// The metrics, registered in a registry of their own; the withdrawn client CAs only when
    /// `counts_withdrawn` (the supervisor counts them where it restarts memcached for them).
    pub fn registered(counts_withdrawn: bool) -> (Self, Registry) {
        let metrics = Self::default();
        let mut registry = Registry::default();
        registry.register(
            REFRESHES,
            "refresh_certs sent to the server, by result",
            metrics.refreshes.clone(),
        );
        registry.register(
            REFRESH_PENDING,
            "1 while the server presents another certificate than the mounted file's, or has \
             not read the mounted ca.crt",
            metrics.pending.clone(),
        );
        registry.register(
            EXPIRY,
            "When the mounted certificate's leaf expires, in Unix seconds",
            metrics.expiry.clone(),
        );
        registry.register(
            SERVED,
            "1, labelled with the serial of the certificate the server presents",
            metrics.served.clone(),
        );
        if counts_withdrawn {
            register_withdrawn(&mut registry, &metrics.withdrawn_cas);
        }
        both_outcomes(&metrics.refreshes);
        (metrics, registry)
    }
}

/// The stats relay's metrics.
#[derive(Clone, Debug, Default)]
pub struct RelayMetrics {
    /// Relayed connections that ended, by outcome: failed when the server could not be
    /// reached, refused the relay, or did not answer.
    pub connections: Family<Outcome, Counter>,
}

impl RelayMetrics {
    /// The metrics, registered in a registry of their own.
    pub fn registered() -> (Self, Registry) {
        let metrics = Self::default();
        let mut registry = Registry::default();
        registry.register(
            RELAYED,
            "Connections the stats relay relayed to the server, by result",
            metrics.connections.clone(),
        );
        both_outcomes(&metrics.connections);
        (metrics, registry)
    }
}

/// The supervisor's metrics.
#[derive(Clone, Debug, Default)]
pub struct SupervisorMetrics {
    /// Changes of the auth file, by outcome: succeeded when memcached was sent SIGHUP to
    /// reread it, failed when the file was one memcached would refuse or misread (never sent)
    /// or memcached could not be signalled.
    pub reloads: Family<Outcome, Counter>,
    /// 1 while the mounted auth file is one memcached would refuse or misread: memcached keeps
    /// the credentials it has, and would not start with it; 0 otherwise.
    pub refused: Gauge,
    /// Client CAs memcached may still trust that the mounted `ca.crt` no longer holds, where
    /// the supervisor restarts memcached for them (`sidecar::ca_restart`): it knows the file
    /// memcached started with, which the refresher cannot tell.
    pub withdrawn_cas: Gauge,
}

/// Registers the count of withdrawn client CAs still trusted.
fn register_withdrawn(registry: &mut Registry, gauge: &Gauge) {
    registry.register(
        WITHDRAWN_CAS,
        "Client CAs the server may still trust that the mounted ca.crt no longer holds: \
         memcached drops them only when it starts again",
        gauge.clone(),
    );
}

impl SupervisorMetrics {
    /// The metrics, registered in a registry of their own; the withdrawn client CAs only when
    /// `counts_withdrawn`.
    pub fn registered(counts_withdrawn: bool) -> (Self, Registry) {
        let metrics = Self::default();
        let mut registry = Registry::default();
        registry.register(
            AUTH_RELOADS,
            "Changes of the auth file memcached was sent to reread, by result",
            metrics.reloads.clone(),
        );
        registry.register(
            AUTH_REFUSED,
            "1 while the mounted auth file is one memcached would refuse or misread",
            metrics.refused.clone(),
        );
        if counts_withdrawn {
            register_withdrawn(&mut registry, &metrics.withdrawn_cas);
        }
        both_outcomes(&metrics.reloads);
        (metrics, registry)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use prometheus_client::encoding::text::encode;

    #[test]
    fn both_outcomes_are_exposed_from_the_start_under_the_names_the_rules_quote() {
        let (refresher, registry) = RefresherMetrics::registered(true);
        refresher.refreshes.get_or_create(&FAILED).inc();
        refresher.pending.set(1);
        refresher.expiry.set(1_900_000_000);
        refresher.serving("0A:01");
        refresher.serving("0B:02");
        let mut text = String::new();
        encode(&mut text, &registry).expect("encodes");
        for line in [
            "memcached_certificate_refreshes_total{result=\"succeeded\"} 0",
            "memcached_certificate_refreshes_total{result=\"failed\"} 1",
            "memcached_certificate_refresh_pending 1",
            "memcached_certificate_expiry_timestamp_seconds 1900000000",
            "memcached_certificate_served{serial=\"0B:02\"} 1",
        ] {
            assert!(text.lines().any(|l| l == line), "{line} in:\n{text}");
        }
        assert!(
            !text.contains("0A:01"),
            "only the serial presented now: {text}"
        );
        let (_, registry) = RelayMetrics::registered();
        let mut text = String::new();
        encode(&mut text, &registry).expect("encodes");
        for line in [
            "memcached_stats_relay_connections_total{result=\"succeeded\"} 0",
            "memcached_stats_relay_connections_total{result=\"failed\"} 0",
        ] {
            assert!(text.lines().any(|l| l == line), "{line} in:\n{text}");
        }
        let (supervisor, registry) = SupervisorMetrics::registered(true);
        supervisor.refused.set(1);
        let mut text = String::new();
        encode(&mut text, &registry).expect("encodes");
        for line in [
            "memcached_auth_reloads_total{result=\"succeeded\"} 0",
            "memcached_auth_reloads_total{result=\"failed\"} 0",
            "memcached_auth_file_refused 1",
            "memcached_client_cas_withdrawn_trusted 0",
        ] {
            assert!(text.lines().any(|l| l == line), "{line} in:\n{text}");
        }
        // Counted by one of the two only: the supervisor where it restarts memcached for a
        // withdrawn CA, the refresher elsewhere.
        for registry in [
            RefresherMetrics::registered(false).1,
            SupervisorMetrics::registered(false).1,
        ] {
            let mut text = String::new();
            encode(&mut text, &registry).expect("encodes");
            assert!(!text.contains(WITHDRAWN_CAS), "{text}");
        }
    }
}
