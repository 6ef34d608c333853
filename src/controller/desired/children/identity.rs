//! Says who each container of a memcached pod runs as, in one place: memcached (with the
//! supervisor it runs under, and the init container that installs it) keeps the official
//! image's `memcache` user, the pod's, and each sidecar has a user and group of its own, so
//! that none can signal another's processes or open files another owns.
//!
//! Every container runs restricted (non-root, no privilege escalation, no capability, a
//! read-only root filesystem). The users are set off OpenShift only: there the restricted-v2
//! SCC assigns one user from the namespace's range to every container of the pod, and a user
//! outside that range would be refused. The pod's containers never share a process namespace,
//! so on OpenShift too no container sees or signals another's processes, and each reaches only
//! the volumes mounted into it.

use k8s_openapi::api::core::v1::{Capabilities, SecurityContext};

/// How pods must run on this cluster.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Platform {
    /// OpenShift: the restricted-v2 SCC assigns a UID from the namespace's range, so none is
    /// set.
    OpenShift,
    /// Other Kubernetes: the official images name their user (`memcache`) rather than number
    /// it, so the kubelet could not verify `runAsNonRoot`; the image's own UID is set.
    Kubernetes,
}

/// A user and its primary group.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Identity {
    /// The user id.
    pub user: i64,
    /// The primary group id.
    pub group: i64,
}

/// The UID of the `memcache` user in the official memcached images: the pod's user, which
/// memcached, the supervisor and its installer run as, and the pod's `fsGroup`, the group the
/// Secrets' files are readable by. memcached's primary group is left as the runtime gives it,
/// so that a pod without sidecars is written as before.
pub const MEMCACHED_IMAGE_UID: i64 = 11211;
/// The certificate refresher (`cert-refresher`).
pub const REFRESHER: Identity = Identity {
    user: 11220,
    group: 11220,
};
/// The stats relay (`stats-relay`).
pub const RELAY: Identity = Identity {
    user: 11221,
    group: 11221,
};
/// memcached_exporter (`exporter`).
pub const EXPORTER: Identity = Identity {
    user: 11222,
    group: 11222,
};

/// The security context of every container in a memcached pod, without a user.
pub fn restricted() -> SecurityContext {
    SecurityContext {
        allow_privilege_escalation: Some(false),
        capabilities: Some(Capabilities {
            drop: Some(vec!["ALL".into()]),
            add: None,
        }),
        read_only_root_filesystem: Some(true),
        run_as_non_root: Some(true),
        ..SecurityContext::default()
    }
}

/// The security context of a sidecar running as `identity` on `platform`.
pub fn sidecar(identity: Identity, platform: Platform) -> SecurityContext {
    match platform {
        Platform::OpenShift => restricted(),
        Platform::Kubernetes => SecurityContext {
            run_as_user: Some(identity.user),
            run_as_group: Some(identity.group),
            ..restricted()
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_container_has_a_user_and_group_of_its_own() {
        let memcached = Identity {
            user: MEMCACHED_IMAGE_UID,
            group: MEMCACHED_IMAGE_UID,
        };
        let all = [memcached, REFRESHER, RELAY, EXPORTER];
        for (i, one) in all.iter().enumerate() {
            for other in &all[i + 1..] {
                assert_ne!(one.user, other.user);
                assert_ne!(one.group, other.group);
                assert_ne!(one.group, other.user);
            }
            assert!(one.user > 0 && one.group > 0, "never root: {one:?}");
        }
    }

    #[test]
    fn users_are_left_to_openshifts_scc() {
        let openshift = sidecar(EXPORTER, Platform::OpenShift);
        assert_eq!(openshift.run_as_user, None);
        assert_eq!(openshift.run_as_group, None);
        let kubernetes = sidecar(EXPORTER, Platform::Kubernetes);
        assert_eq!(kubernetes.run_as_user, Some(11222));
        assert_eq!(kubernetes.run_as_group, Some(11222));
        assert_eq!(kubernetes.run_as_non_root, Some(true));
    }
}
