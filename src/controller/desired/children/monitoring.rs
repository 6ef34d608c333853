//! The parts of a memcached pod that export its metrics: memcached_exporter as a native
//! sidecar (an init container that keeps running) on the metrics port, and, when clients must
//! authenticate, the stats relay it reads the server through.
//!
//! memcached_exporter reaches its own pod's server on loopback. With TLS it speaks TLS itself,
//! presenting the Secret's certificate when the server asks for client certificates, and does
//! not verify the server's name (the server is its own pod's, on loopback, under whatever
//! names the user's certificate holds). With authentication it cannot log in, so it talks to the
//! stats relay (`memcached-operator relay-stats`) on a Unix socket in a memory-backed volume of
//! the pod, and the relay authenticates, over TLS when the server serves it.

use k8s_openapi::api::core::v1::{
    Container, ContainerPort, EmptyDirVolumeSource, SecurityContext, Volume, VolumeMount,
};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;

use super::security::{self, TLS_DIR};
use crate::admission::defaults::memory_bound;
use crate::api::v1beta1::{ClientAuth, DEFAULT_METRICS_PORT, Memcached, TLS_CERT_KEY, TLS_KEY_KEY};
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

/// The exporter's and the relay's containers, and the relay's socket volume; nothing when
/// monitoring is off. `port` is memcached's client port, `secret_mounts` the mounts of the
/// TLS and authentication Secrets.
pub fn sidecars(
    memcached: &Memcached,
    port: i32,
    secret_mounts: &[VolumeMount],
    security: SecurityContext,
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
    if auth {
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
            format!("--auth-file={}", security::auth_file()),
            format!("--port={port}"),
        ];
        if tls.is_some() {
            relay_args.push(format!("--cert-dir={TLS_DIR}"));
        }
        let mut relay_mounts = secret_mounts.to_vec();
        relay_mounts.push(socket_mount.clone());
        containers.push(Container {
            name: relay::CONTAINER_NAME.into(),
            image: monitoring.relay_image.clone(),
            command: Some(vec![operator::BINARY_PATH.into()]),
            args: Some(relay_args),
            restart_policy: Some("Always".into()),
            resources: Some(memory_bound(
                security::REFRESHER_CPU,
                security::REFRESHER_MEMORY,
            )),
            volume_mounts: Some(relay_mounts),
            security_context: Some(security.clone()),
            ..Container::default()
        });
        exporter_mounts.push(socket_mount);
    } else {
        args.push(format!("--memcached.address=127.0.0.1:{port}"));
        if let Some(tls) = tls {
            args.push("--memcached.tls.enable".into());
            args.push("--memcached.tls.insecure-skip-verify".into());
            // Only a server that asks for a client certificate needs the exporter to hold
            // the Secret (and present its certificate); otherwise it mounts no Secret at all.
            if tls.client_auth.unwrap_or_default() != ClientAuth::None {
                args.push(format!(
                    "--memcached.tls.cert-file={TLS_DIR}/{TLS_CERT_KEY}"
                ));
                args.push(format!("--memcached.tls.key-file={TLS_DIR}/{TLS_KEY_KEY}"));
                exporter_mounts.extend(
                    secret_mounts
                        .iter()
                        .filter(|mount| mount.mount_path == TLS_DIR)
                        .cloned(),
                );
            }
        }
    }
    containers.push(Container {
        name: EXPORTER_CONTAINER_NAME.into(),
        image: monitoring.exporter_image.clone(),
        args: Some(args),
        ports: Some(vec![ContainerPort {
            name: Some(METRICS_PORT_NAME.into()),
            container_port: metrics_port,
            protocol: Some("TCP".into()),
            ..ContainerPort::default()
        }]),
        restart_policy: Some("Always".into()),
        resources: Some(
            monitoring
                .exporter_resources
                .clone()
                .unwrap_or_else(|| memory_bound(EXPORTER_CPU, EXPORTER_MEMORY)),
        ),
        volume_mounts: (!exporter_mounts.is_empty()).then_some(exporter_mounts),
        security_context: Some(security),
        ..Container::default()
    });
    (containers, volumes)
}
