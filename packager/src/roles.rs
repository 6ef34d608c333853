//! Builds the operator's ServiceAccount and RBAC objects as installed without OLM (by
//! `config/rbac` and by the Helm chart): the manager ClusterRole and the leader-election Role
//! from `rbac`, each bound to the ServiceAccount the Deployment runs as.
//!
//! OLM writes the same rules from the CSV's permissions; the rules are declared once, in
//! `src/rbac.rs`. The chart adds, with `certificates.source: operator`, a Role and a
//! ClusterRole for the operator to keep its self-signed certificate's Secret and write the CA
//! bundles (`rbac::self_signed_*`).

use k8s_openapi::api::core::v1::ServiceAccount;
use k8s_openapi::api::rbac::v1::{
    ClusterRole, ClusterRoleBinding, Role, RoleBinding, RoleRef, Subject,
};

use super::config::{
    CERTIFICATE_SECRET_NAME, LEADER_ELECTION_ROLE_NAME, MANAGER_ROLE_NAME, NAMESPACE, meta,
};
use memcached_operator::{operator, rbac};

fn subject() -> Subject {
    Subject {
        kind: "ServiceAccount".to_string(),
        name: operator::SERVICE_ACCOUNT_NAME.to_string(),
        namespace: Some(NAMESPACE.to_string()),
        ..Subject::default()
    }
}

fn role_ref(kind: &str, name: &str) -> RoleRef {
    RoleRef {
        api_group: "rbac.authorization.k8s.io".to_string(),
        kind: kind.to_string(),
        name: name.to_string(),
    }
}

/// The ServiceAccount the Deployment runs as.
pub fn service_account() -> ServiceAccount {
    ServiceAccount {
        metadata: meta(operator::SERVICE_ACCOUNT_NAME, Some(NAMESPACE)),
        ..ServiceAccount::default()
    }
}

/// The manager ClusterRole: `rbac::cluster_rules`.
pub fn manager_role() -> ClusterRole {
    ClusterRole {
        metadata: meta(MANAGER_ROLE_NAME, None),
        rules: Some(rbac::cluster_rules()),
        ..ClusterRole::default()
    }
}

/// The manager ClusterRole bound to the ServiceAccount.
pub fn manager_role_binding() -> ClusterRoleBinding {
    ClusterRoleBinding {
        metadata: meta(&format!("{MANAGER_ROLE_NAME}binding"), None),
        role_ref: role_ref("ClusterRole", MANAGER_ROLE_NAME),
        subjects: Some(vec![subject()]),
    }
}

/// The leader-election Role in the operator's namespace: `rbac::namespaced_rules`.
pub fn leader_election_role() -> Role {
    Role {
        metadata: meta(LEADER_ELECTION_ROLE_NAME, Some(NAMESPACE)),
        rules: Some(rbac::namespaced_rules()),
    }
}

/// The leader-election Role bound to the ServiceAccount.
pub fn leader_election_role_binding() -> RoleBinding {
    RoleBinding {
        metadata: meta(
            &format!("{LEADER_ELECTION_ROLE_NAME}binding"),
            Some(NAMESPACE),
        ),
        role_ref: role_ref("Role", LEADER_ELECTION_ROLE_NAME),
        subjects: Some(vec![subject()]),
    }
}

/// The Role and ClusterRole of `--self-signed-cert-secret`, and what binds them.
pub const SELF_SIGNED_ROLE_NAME: &str = "memcached-operator-self-signed-cert-role";

/// The Role that lets the operator keep its self-signed certificate's Secret.
pub fn self_signed_role() -> Role {
    Role {
        metadata: meta(SELF_SIGNED_ROLE_NAME, Some(NAMESPACE)),
        rules: Some(rbac::self_signed_namespaced_rules(CERTIFICATE_SECRET_NAME)),
    }
}

/// The self-signed Role bound to the ServiceAccount.
pub fn self_signed_role_binding() -> RoleBinding {
    RoleBinding {
        metadata: meta(&format!("{SELF_SIGNED_ROLE_NAME}binding"), Some(NAMESPACE)),
        role_ref: role_ref("Role", SELF_SIGNED_ROLE_NAME),
        subjects: Some(vec![subject()]),
    }
}

/// The ClusterRole that lets the operator write its CA bundles.
pub fn self_signed_cluster_role() -> ClusterRole {
    ClusterRole {
        metadata: meta(SELF_SIGNED_ROLE_NAME, None),
        rules: Some(rbac::self_signed_cluster_rules()),
        ..ClusterRole::default()
    }
}

/// The self-signed ClusterRole bound to the ServiceAccount.
pub fn self_signed_cluster_role_binding() -> ClusterRoleBinding {
    ClusterRoleBinding {
        metadata: meta(&format!("{SELF_SIGNED_ROLE_NAME}binding"), None),
        role_ref: role_ref("ClusterRole", SELF_SIGNED_ROLE_NAME),
        subjects: Some(vec![subject()]),
    }
}
