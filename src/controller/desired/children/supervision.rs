//! The parts of a memcached pod that run memcached under the supervisor: the init container
//! `install-supervisor`, which copies the operator's static binary from its image into an
//! `emptyDir`, and memcached's command, which runs that binary as the container's first
//! process with memcached as its child (`memcached-operator supervise`, `sidecar::supervisor`).
//!
//! Only a server with authentication is supervised: something must have memcached reread a
//! changed auth file (SIGHUP), and with no process namespace shared between the pod's
//! containers only a process of memcached's own container can signal it. A server without
//! authentication needs nothing from inside its container (the preStop hook signals it
//! directly), so its pod is written as before: memcached is the container's first process.

use k8s_openapi::api::core::v1::{Container, EmptyDirVolumeSource, Volume, VolumeMount};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;

use super::identity::restricted;
use super::lifecycle::warm_restart;
use super::security::{self, REFRESHER_CPU, REFRESHER_MEMORY};
use crate::admission::defaults::memory_bound;
use crate::api::v1beta1::Memcached;
use crate::operator;
use crate::sidecar::supervisor::{INSTALL_DIR, INSTALLED_BINARY, INSTALLER_CONTAINER_NAME};

/// The volume the binary is copied into.
const SUPERVISOR_VOLUME: &str = "supervisor";
/// The most the volume may hold: the operator's static binary, with room.
pub const SUPERVISOR_VOLUME_SIZE: &str = "64Mi";

/// Whether memcached runs under the supervisor: with authentication.
pub fn supervised(memcached: &Memcached) -> bool {
    memcached.spec.auth.is_some()
}

/// The memcached container's command under the supervisor: the installed binary's
/// `supervise` (serving its metrics on `metrics_port` when given), then `memcached`, to which
/// the container's arguments are added. `None` when memcached is not supervised.
pub fn command(memcached: &Memcached, metrics_port: Option<i32>) -> Option<Vec<String>> {
    if !supervised(memcached) {
        return None;
    }
    let mut command = vec![
        format!("{INSTALL_DIR}/{INSTALLED_BINARY}"),
        "supervise".to_string(),
        format!("--auth-file={}", security::auth_file()),
    ];
    if warm_restart(memcached) {
        command.push("--warm-restart".into());
    }
    if let Some(port) = metrics_port {
        command.push(format!("--metrics-port={port}"));
    }
    command.push("--".into());
    command.push("memcached".into());
    Some(command)
}

/// The init container that copies the binary, from the operator's image
/// (`spec.auth.reloaderImage`), as the pod's user; `None` when memcached is not supervised.
pub fn installer(memcached: &Memcached) -> Option<Container> {
    let auth = memcached.spec.auth.as_ref()?;
    Some(Container {
        name: INSTALLER_CONTAINER_NAME.into(),
        image: auth.reloader_image.clone(),
        command: Some(vec![operator::BINARY_PATH.into()]),
        args: Some(vec![
            "install-supervisor".to_string(),
            format!("--into={INSTALL_DIR}"),
        ]),
        resources: Some(memory_bound(REFRESHER_CPU, REFRESHER_MEMORY)),
        volume_mounts: Some(vec![mount(false)]),
        security_context: Some(restricted()),
        ..Container::default()
    })
}

/// The binary's volume, and its mount in memcached's container (read-only); `None` when
/// memcached is not supervised.
pub fn volume(memcached: &Memcached) -> Option<(Volume, VolumeMount)> {
    if !supervised(memcached) {
        return None;
    }
    let volume = Volume {
        name: SUPERVISOR_VOLUME.into(),
        empty_dir: Some(EmptyDirVolumeSource {
            medium: None,
            size_limit: Some(Quantity(SUPERVISOR_VOLUME_SIZE.into())),
        }),
        ..Volume::default()
    };
    Some((volume, mount(true)))
}

fn mount(read_only: bool) -> VolumeMount {
    VolumeMount {
        name: SUPERVISOR_VOLUME.into(),
        mount_path: INSTALL_DIR.into(),
        read_only: read_only.then_some(true),
        ..VolumeMount::default()
    }
}
