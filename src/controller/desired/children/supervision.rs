//! The parts of a memcached pod that run memcached under the supervisor: the init container
//! `install-supervisor`, which copies the operator's static binary from its image into an
//! `emptyDir`, and memcached's command, which runs that binary as the container's first
//! process with memcached as its child (`memcached-operator supervise`, `sidecar::supervisor`).
//!
//! A server is supervised where something must act on memcached from inside its container,
//! since with no process namespace shared between the pod's containers only a process of
//! memcached's own container can signal it: with authentication (memcached must reread a
//! changed auth file, SIGHUP), and with a warm restart and client CAs from a ConfigMap
//! (`spec.tls.clientCA`), where the operator asks for a restart in place once a CA is
//! withdrawn (`sidecar::ca_restart`): the pod's annotation that asks is projected into
//! memcached's container by the downward API. Any other server needs nothing from inside its
//! container (the preStop hook signals it directly), so its pod is written as before:
//! memcached is the container's first process.

use k8s_openapi::api::core::v1::{
    Container, DownwardAPIVolumeFile, DownwardAPIVolumeSource, EmptyDirVolumeSource,
    ObjectFieldSelector, Volume, VolumeMount,
};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;

use super::identity::restricted;
use super::lifecycle::{MEMORY_FILE_DIR, warm_restart};
pub use super::security::restarts_for_client_ca;
use super::security::{self, REFRESHER_CPU, REFRESHER_MEMORY, TLS_DIR};
use crate::admission::defaults::memory_bound;
use crate::api::v1beta1::{Memcached, TLS_CA_KEY};
use crate::operator;
use crate::sidecar::ca_restart::REQUEST_ANNOTATION;
use crate::sidecar::supervisor::{INSTALL_DIR, INSTALLED_BINARY, INSTALLER_CONTAINER_NAME};

/// The volume the binary is copied into.
const SUPERVISOR_VOLUME: &str = "supervisor";
/// The most the volume may hold: the operator's static binary, with room.
pub const SUPERVISOR_VOLUME_SIZE: &str = "64Mi";

/// The downward API volume that holds the pod's restart request.
const POD_VOLUME: &str = "pod-request";
/// Where it is mounted in memcached's container.
pub const POD_DIR: &str = "/etc/memcached/pod";
/// The file of the restart request, in [`POD_DIR`].
pub const REQUEST_FILE: &str = "client-ca-sha256";
/// Where the supervisor records the requests it acted on: beside the memory file, on a volume
/// that outlives the container.
pub const RESTARTED_FILE: &str = "client-ca-restarted";

/// Whether memcached runs under the supervisor: with authentication, or where the operator
/// restarts it for a withdrawn client CA.
pub fn supervised(memcached: &Memcached) -> bool {
    memcached.spec.auth.is_some() || restarts_for_client_ca(memcached)
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
    ];
    if memcached.spec.auth.is_some() {
        command.push(format!("--auth-file={}", security::auth_file()));
    }
    if warm_restart(memcached) {
        command.push("--warm-restart".into());
    }
    if restarts_for_client_ca(memcached) {
        command.extend([
            format!("--client-ca-request={POD_DIR}/{REQUEST_FILE}"),
            format!("--client-ca={TLS_DIR}/{TLS_CA_KEY}"),
            format!("--restarted-file={MEMORY_FILE_DIR}/{RESTARTED_FILE}"),
        ]);
    }
    if let Some(port) = metrics_port {
        command.push(format!("--metrics-port={port}"));
    }
    command.push("--".into());
    command.push("memcached".into());
    Some(command)
}

/// The init container that copies the binary, from the operator's image
/// (`spec.auth.reloaderImage` with authentication, otherwise the refresher's,
/// `spec.tls.refresherImage`), as the pod's user; `None` when memcached is not supervised.
pub fn installer(memcached: &Memcached) -> Option<Container> {
    if !supervised(memcached) {
        return None;
    }
    let image = match (&memcached.spec.auth, &memcached.spec.tls) {
        (Some(auth), _) => auth.reloader_image.clone(),
        (None, Some(tls)) => tls.refresher_image.clone(),
        (None, None) => None,
    };
    Some(Container {
        name: INSTALLER_CONTAINER_NAME.into(),
        image,
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

/// The downward API volume that projects the pod's restart request
/// ([`REQUEST_ANNOTATION`]) into memcached's container, and its mount; `None` unless the
/// operator restarts the servers for a withdrawn client CA. The file is empty while the pod
/// has no such annotation.
pub fn request_volume(memcached: &Memcached) -> Option<(Volume, VolumeMount)> {
    if !restarts_for_client_ca(memcached) {
        return None;
    }
    let volume = Volume {
        name: POD_VOLUME.into(),
        downward_api: Some(DownwardAPIVolumeSource {
            items: Some(vec![DownwardAPIVolumeFile {
                path: REQUEST_FILE.into(),
                field_ref: Some(ObjectFieldSelector {
                    api_version: Some("v1".into()),
                    field_path: format!("metadata.annotations['{REQUEST_ANNOTATION}']"),
                }),
                ..DownwardAPIVolumeFile::default()
            }]),
            ..DownwardAPIVolumeSource::default()
        }),
        ..Volume::default()
    };
    let mount = VolumeMount {
        name: POD_VOLUME.into(),
        mount_path: POD_DIR.into(),
        read_only: Some(true),
        ..VolumeMount::default()
    };
    Some((volume, mount))
}

fn mount(read_only: bool) -> VolumeMount {
    VolumeMount {
        name: SUPERVISOR_VOLUME.into(),
        mount_path: INSTALL_DIR.into(),
        read_only: read_only.then_some(true),
        ..VolumeMount::default()
    }
}
