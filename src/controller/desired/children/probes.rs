//! The kubelet's probes of memcached's sidecars: the certificate refresher and the stats relay
//! answer `/healthz` and `/readyz` from their loops' heartbeats (`sidecar::health`) on a port
//! of their own, and memcached_exporter is probed on its metrics port.
//!
//! A native sidecar's readiness counts toward the pod's, so readiness says only that the
//! sidecar's loop runs: a refresh that fails (logged, memcached keeping the certificate it
//! has) does not take a serving pod out of its Service. The sidecars'
//! ports are the first free ones from [`FIRST_HEALTH_PORT`], past memcached's client and
//! plaintext ports and the metrics port, so that no spec can make two listeners meet.

use k8s_openapi::api::core::v1::{ContainerPort, HTTPGetAction, Probe};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;

use crate::sidecar::health::{LIVENESS_PATH, READINESS_PATH};

/// Where the sidecars' probe ports begin (just past the exporter's default metrics port).
pub const FIRST_HEALTH_PORT: i32 = 9151;
/// The refresher's probe port's name (at most 15 characters, unique in the pod).
pub const REFRESHER_PORT_NAME: &str = "refresh-health";
/// The relay's probe port's name.
pub const RELAY_PORT_NAME: &str = "relay-health";
/// The name of the supervisor's metrics port, on memcached's container (with authentication
/// and monitoring).
pub const SUPERVISOR_PORT_NAME: &str = "supervisor";
/// The path the exporter is probed on: its landing page, which reads nothing of memcached
/// (a scrape of `/metrics` would reach the server, whose own probes say how it is).
pub const EXPORTER_PROBE_PATH: &str = "/";

/// The probe ports of the refresher and of the relay, and the supervisor's metrics port.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct HealthPorts {
    /// The certificate refresher's.
    pub refresher: i32,
    /// The stats relay's.
    pub relay: i32,
    /// The supervisor's.
    pub supervisor: i32,
}

/// The sidecars' probe ports and the supervisor's port: the first three from
/// [`FIRST_HEALTH_PORT`] that none of the pod's other listeners uses (`taken`: memcached's
/// client and plaintext ports, the metrics port, where there are).
pub fn health_ports(taken: [Option<i32>; 3]) -> HealthPorts {
    let mut free = (FIRST_HEALTH_PORT..).filter(|port| !taken.contains(&Some(*port)));
    let refresher = free.next().unwrap_or(FIRST_HEALTH_PORT);
    let relay = free.next().unwrap_or(FIRST_HEALTH_PORT + 1);
    let supervisor = free.next().unwrap_or(FIRST_HEALTH_PORT + 2);
    HealthPorts {
        refresher,
        relay,
        supervisor,
    }
}

/// The container port a sidecar's probes are answered on.
pub fn port(name: &str, port: i32) -> ContainerPort {
    ContainerPort {
        name: Some(name.into()),
        container_port: port,
        protocol: Some("TCP".into()),
        ..ContainerPort::default()
    }
}

/// A sidecar's liveness and readiness probes on its named probe port: liveness every 10 s,
/// restarting it after three failures (its heartbeat tolerates a loop two minutes late);
/// readiness every 5 s from its start, so that it does not hold back the pod's.
pub fn sidecar(port_name: &str) -> (Probe, Probe) {
    (
        http(port_name, LIVENESS_PATH, 10),
        http(port_name, READINESS_PATH, 5),
    )
}

/// The exporter's liveness and readiness probes, on its metrics port.
pub fn exporter(port_name: &str) -> (Probe, Probe) {
    (
        http(port_name, EXPORTER_PROBE_PATH, 10),
        http(port_name, EXPORTER_PROBE_PATH, 5),
    )
}

fn http(port_name: &str, path: &str, period: i32) -> Probe {
    Probe {
        http_get: Some(HTTPGetAction {
            path: Some(path.into()),
            port: IntOrString::String(port_name.into()),
            scheme: Some("HTTP".into()),
            ..HTTPGetAction::default()
        }),
        period_seconds: Some(period),
        timeout_seconds: Some(2),
        failure_threshold: Some(3),
        ..Probe::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_probe_ports_are_the_first_that_no_other_listener_of_the_pod_uses() {
        assert_eq!(
            health_ports([Some(11211), None, None]),
            HealthPorts {
                refresher: 9151,
                relay: 9152,
                supervisor: 9153
            }
        );
        assert_eq!(
            health_ports([Some(9153), Some(9152), Some(9151)]),
            HealthPorts {
                refresher: 9154,
                relay: 9155,
                supervisor: 9156
            }
        );
        assert_eq!(
            health_ports([Some(11211), Some(9152), None]),
            HealthPorts {
                refresher: 9151,
                relay: 9153,
                supervisor: 9154
            }
        );
    }

    #[test]
    fn the_sidecars_probes_are_http_on_their_named_port_and_the_exporters_read_no_server() {
        let (liveness, readiness) = sidecar(REFRESHER_PORT_NAME);
        for (probe, path) in [(&liveness, LIVENESS_PATH), (&readiness, READINESS_PATH)] {
            let get = probe.http_get.as_ref().expect("an HTTP probe");
            assert_eq!(get.path.as_deref(), Some(path));
            assert_eq!(get.port, IntOrString::String(REFRESHER_PORT_NAME.into()));
        }
        assert!(REFRESHER_PORT_NAME.len() <= 15 && RELAY_PORT_NAME.len() <= 15);
        let (liveness, readiness) = exporter("metrics");
        for probe in [liveness, readiness] {
            let get = probe.http_get.expect("an HTTP probe");
            assert_eq!(get.path.as_deref(), Some("/"));
            assert_eq!(get.port, IntOrString::String("metrics".into()));
        }
    }
}
