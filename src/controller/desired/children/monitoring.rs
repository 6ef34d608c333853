//! The parts of a memcached pod that export its metrics: memcached_exporter as a native
//! sidecar (an init container that keeps running) on the metrics port, and, when clients must
//! authenticate, the stats relay it reads the server through.
//!
//! memcached_exporter reaches its own pod's server on loopback, and never holds a Secret. With
//! TLS alone it speaks TLS itself and does not verify the server's name (the server is its own
//! pod's, on loopback, under whatever names the user's certificate holds). When the server
//! asks for client certificates (`clientAuth` `Request` or `Require`) or for credentials,
//! the exporter would need a client certificate or the auth file to talk to it, so instead it
//! talks to the stats relay (`memcached-operator relay-stats`) on a Unix socket in a
//! memory-backed volume only the two of them mount, and the relay authenticates, over TLS
//! when the server serves it, with the sidecars' own client certificate (never the server's
//! key). Each runs as its own user (`children::identity`).

use k8s_openapi::api::core::v1::{Container, EmptyDirVolumeSource, Volume, VolumeMount};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;

use super::identity::{self, EXPORTER, Platform, RELAY};
use super::probes;
use super::security::{self, CLIENT_TLS_DIR};
use crate::admission::defaults::memory_bound;
use crate::api::v1beta1::{ClientAuth, DEFAULT_METRICS_PORT, Memcached};
use crate::operator;
use crate::sidecar::relay;

/// The exporter's container name.
pub const EXPORTER_CONTAINER_NAME: &str = "exporter";
/// The name of the metrics port, on the exporter's container and the Service.
pub const METRICS_PORT_NAME: &str = "metrics";
/// The exporter's memory request and limit when `exporterResources` is unset.
pub const EXPORTER_MEMORY: &str = "64Mi";
/// The exporter's CPU request when `exporterResources` is unset.
pub const EXPORTER_CPU: &str = "10m";
/// Where the stats relay's socket is, in the exporter and the relay.
pub const RELAY_DIR: &str = "/run/stats-relay";

const RELAY_VOLUME: &str = "stats-relay";
const RELAY_SOCKET: &str = "stats.sock";

/// The metrics port, when monitoring is on.
pub fn metrics_port(memcached: &Memcached) -> Option<i32> {
    let monitoring = memcached.spec.monitoring.as_ref()?;
    Some(monitoring.port.unwrap_or(DEFAULT_METRICS_PORT))
}

/// Whether the exporter reads the server through the stats relay: when the server asks for
/// credentials or client certificates, which the exporter is not given.
pub fn relayed(memcached: &Memcached) -> bool {
    let client_auth = memcached
        .spec
        .tls
        .as_ref()
        .and_then(|tls| tls.client_auth)
        .unwrap_or_default();
    memcached.spec.auth.is_some() || client_auth != ClientAuth::None
}

/// The exporter's and the relay's containers, and the relay's socket volume; nothing when
/// monitoring is off. `port` is memcached's client port, `relay_mounts` the relay's Secret
/// mounts ([`SecretVolumes::relay`](super::security::SecretVolumes)), `health` the relay's
/// probe port.
pub fn sidecars(
    memcached: &Memcached,
    port: i32,
    relay_mounts: &[VolumeMount],
    platform: Platform,
    health: i32,
) -> (Vec<Container>, Vec<Volume>) {
    let (Some(monitoring), Some(metrics_port)) =
        (&memcached.spec.monitoring, metrics_port(memcached))
    else {
        return (Vec::new(), Vec::new());
    };
    let tls = memcached.spec.tls.as_ref();
    let auth = memcached.spec.auth.is_some();
    let mut args = vec![format!("--web.listen-address=:{metrics_port}")];
    let mut exporter_mounts = Vec::new();
    let mut containers = Vec::new();
    let mut volumes = Vec::new();
    if relayed(memcached) {
        let socket_mount = VolumeMount {
            name: RELAY_VOLUME.into(),
            mount_path: RELAY_DIR.into(),
            ..VolumeMount::default()
        };
        volumes.push(Volume {
            name: RELAY_VOLUME.into(),
            empty_dir: Some(EmptyDirVolumeSource {
                medium: Some("Memory".into()),
                size_limit: Some(Quantity("1Mi".into())),
            }),
            ..Volume::default()
        });
        args.push(format!("--memcached.address={RELAY_DIR}/{RELAY_SOCKET}"));
        let mut relay_args = vec![
            "relay-stats".to_string(),
            format!("--listen={RELAY_DIR}/{RELAY_SOCKET}"),
            format!("--port={port}"),
        ];
        if auth {
            relay_args.push(format!("--auth-file={}", security::auth_file()));
        }
        if tls.is_some() {
            relay_args.push("--tls".into());
        }
        if security::client_secret(memcached).is_some() {
            relay_args.push(format!("--client-cert-dir={CLIENT_TLS_DIR}"));
        }
        relay_args.push(format!("--health-port={health}"));
        let (liveness, readiness) = probes::sidecar(probes::RELAY_PORT_NAME);
        let mut relay_mounts = relay_mounts.to_vec();
        relay_mounts.push(socket_mount.clone());
        containers.push(Container {
            name: relay::CONTAINER_NAME.into(),
            image: monitoring.relay_image.clone(),
            command: Some(vec![operator::BINARY_PATH.into()]),
            args: Some(relay_args),
            ports: Some(vec![probes::port(probes::RELAY_PORT_NAME, health)]),
            liveness_probe: Some(liveness),
            readiness_probe: Some(readiness),
            restart_policy: Some("Always".into()),
            resources: Some(memory_bound(
                security::REFRESHER_CPU,
                security::REFRESHER_MEMORY,
            )),
            volume_mounts: Some(relay_mounts),
            security_context: Some(identity::sidecar(RELAY, platform)),
            // Why it stopped, as it says (`sidecar::termination`), or its log's tail.
            termination_message_policy: Some("FallbackToLogsOnError".into()),
            ..Container::default()
        });
        exporter_mounts.push(socket_mount);
    } else {
        args.push(format!("--memcached.address=127.0.0.1:{port}"));
        if tls.is_some() {
            args.push("--memcached.tls.enable".into());
            args.push("--memcached.tls.insecure-skip-verify".into());
        }
    }
    let (liveness, readiness) = probes::exporter(METRICS_PORT_NAME);
    containers.push(Container {
        name: EXPORTER_CONTAINER_NAME.into(),
        image: monitoring.exporter_image.clone(),
        args: Some(args),
        ports: Some(vec![probes::port(METRICS_PORT_NAME, metrics_port)]),
        liveness_probe: Some(liveness),
        readiness_probe: Some(readiness),
        restart_policy: Some("Always".into()),
        resources: Some(
            monitoring
                .exporter_resources
                .clone()
                .unwrap_or_else(|| memory_bound(EXPORTER_CPU, EXPORTER_MEMORY)),
        ),
        volume_mounts: (!exporter_mounts.is_empty()).then_some(exporter_mounts),
        security_context: Some(identity::sidecar(EXPORTER, platform)),
        ..Container::default()
    });
    (containers, volumes)
}
