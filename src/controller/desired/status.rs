//! Computes a Memcached's status from what its children report: how many servers exist and
//! are ready, their addresses, the TLS and authentication every server runs with, and the
//! Available, Progressing and Degraded conditions.
//!
//! Pure: the caller supplies the observations and the current time. A condition's
//! lastTransitionTime moves only when its status changes; reason and message follow the
//! latest observation.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use kube::ResourceExt;

use super::children::{port, selector_string};
use crate::api::v1beta1::{
    AuthStatus, ClientAuth, DEFAULT_REPLICAS, Memcached, MemcachedStatus, TlsStatus,
};
use crate::controller::cache::compact::{CachedPod, CachedStatefulSet};

/// Condition type: enough servers are ready to serve.
pub const AVAILABLE: &str = "Available";
/// Condition type: the servers are being created, updated or scaled.
pub const PROGRESSING: &str = "Progressing";
/// Condition type: the operator cannot bring the servers to the spec.
pub const DEGRADED: &str = "Degraded";

/// Why the operator cannot reconcile a Memcached, if it cannot.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Problem {
    /// The spec breaks the admission rules (the webhooks are not installed, or were
    /// bypassed); nothing was changed.
    InvalidSpec(String),
    /// Writing a child failed.
    ReconcileFailed(String),
    /// A child asked for is of a kind the cluster does not serve, or that cannot be listed
    /// now; the rest is reconciled.
    ApiUnavailable(String),
    /// A sidecar of the operator's stopped on an error and is not running again (a client
    /// certificate it cannot present, for one); what it said of its end.
    SidecarStopped(String),
}

/// What the controller saw of a Memcached's children.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Observed {
    /// The StatefulSet, if it exists.
    pub statefulset: Option<CachedStatefulSet>,
    /// The StatefulSet was written moments ago and the cache has yet to see it.
    pub statefulset_unseen: bool,
    /// Ordinals of the pods that are Ready.
    pub ready_ordinals: Vec<i32>,
}

/// Whether a pod serves: its Ready condition is True and it is not being deleted.
pub fn serving(pod: &CachedPod) -> bool {
    pod.metadata.deletion_timestamp.is_none()
        && pod.status.as_ref().is_some_and(|s| {
            s.conditions
                .iter()
                .flatten()
                .any(|c| c.type_ == "Ready" && c.status == "True")
        })
}

/// Whether the StatefulSet controller has reported on the StatefulSet's current generation.
pub fn reported(statefulset: &CachedStatefulSet) -> bool {
    statefulset.metadata.generation.is_some()
        && statefulset.metadata.generation
            == statefulset
                .status
                .as_ref()
                .and_then(|s| s.observed_generation)
}

fn condition(
    kind: &str,
    status: bool,
    reason: &str,
    message: String,
    generation: Option<i64>,
    now: &Time,
) -> Condition {
    Condition {
        type_: kind.into(),
        status: if status { "True" } else { "False" }.into(),
        reason: reason.into(),
        message,
        observed_generation: generation,
        last_transition_time: now.clone(),
    }
}

/// Puts `new` into `conditions`, keeping the old lastTransitionTime when the status did not
/// change.
pub fn set_condition(conditions: &mut Vec<Condition>, mut new: Condition) {
    match conditions.iter_mut().find(|c| c.type_ == new.type_) {
        Some(old) => {
            if old.status == new.status {
                new.last_transition_time = old.last_transition_time.clone();
            }
            *old = new;
        }
        None => conditions.push(new),
    }
}

/// The status a Memcached should have now.
pub fn desired_status(
    memcached: &Memcached,
    observed: &Observed,
    problem: Option<&Problem>,
    now: &Time,
) -> MemcachedStatus {
    let generation = memcached.metadata.generation;
    // A StatefulSet the cache has yet to see would read as none at all, taking a status that
    // says more back to "Creating"; its watch event wakes the Memcached again soon.
    if observed.statefulset_unseen
        && observed.statefulset.is_none()
        && problem.is_none()
        && let Some(previous) = &memcached.status
    {
        return previous.clone();
    }
    let previous = memcached.status.clone().unwrap_or_default();
    let desired = memcached.spec.replicas.unwrap_or(DEFAULT_REPLICAS);
    let sts_status = observed
        .statefulset
        .as_ref()
        .and_then(|s| s.status)
        .unwrap_or_default();
    let sts_current = observed.statefulset.as_ref().is_some_and(reported);
    let mut ready: Vec<i32> = observed
        .ready_ordinals
        .iter()
        .copied()
        .filter(|i| (0..desired).contains(i))
        .collect();
    ready.sort_unstable();
    ready.dedup();
    let ready_count = i32::try_from(ready.len()).unwrap_or(i32::MAX);
    let name = memcached.name_any();
    let namespace = memcached.namespace().unwrap_or_default();
    let servers: Vec<String> = ready
        .iter()
        .map(|i| format!("{name}-{i}.{name}.{namespace}.svc:{}", port(memcached)))
        .collect();

    let mut conditions = previous.conditions.clone().unwrap_or_default();
    let (available, available_reason, available_message) = if desired == 0 {
        (false, "ScaledToZero", "spec.replicas is 0".to_string())
    } else if ready_count >= desired {
        (
            true,
            "AllServersReady",
            format!("{ready_count}/{desired} memcached servers are ready"),
        )
    } else if ready_count > 0 {
        (
            true,
            "SomeServersReady",
            format!("{ready_count}/{desired} memcached servers are ready"),
        )
    } else {
        (
            false,
            "NoServersReady",
            format!("0/{desired} memcached servers are ready"),
        )
    };
    let updated = sts_status.updated_replicas.unwrap_or(0);
    let existing = sts_status.replicas;
    let (progressing, progressing_reason, progressing_message) =
        if let Some(Problem::InvalidSpec(_)) = problem {
            (
                false,
                "InvalidSpec",
                "the spec is invalid; nothing is being changed".to_string(),
            )
        } else if observed.statefulset.is_none() {
            (true, "Creating", "creating the StatefulSet".to_string())
        } else if !sts_current || updated < desired || existing != desired {
            (
                true,
                "RollingOut",
                format!("{updated}/{desired} servers updated, {existing} exist"),
            )
        } else if ready_count < desired {
            (
                true,
                "WaitingForReadiness",
                format!("{ready_count}/{desired} servers ready"),
            )
        } else {
            (
                false,
                "UpToDate",
                format!("all {desired} servers run the current configuration"),
            )
        };
    let (degraded, degraded_reason, degraded_message) = match problem {
        Some(Problem::InvalidSpec(message)) => (true, "InvalidSpec", message.clone()),
        Some(Problem::ReconcileFailed(message)) => (true, "ReconcileFailed", message.clone()),
        Some(Problem::ApiUnavailable(message)) => (true, "APIUnavailable", message.clone()),
        Some(Problem::SidecarStopped(message)) => (true, "SidecarStopped", message.clone()),
        None => (
            false,
            "AsExpected",
            "the servers match the spec".to_string(),
        ),
    };
    set_condition(
        &mut conditions,
        condition(
            AVAILABLE,
            available,
            available_reason,
            available_message,
            generation,
            now,
        ),
    );
    set_condition(
        &mut conditions,
        condition(
            PROGRESSING,
            progressing,
            progressing_reason,
            progressing_message,
            generation,
            now,
        ),
    );
    set_condition(
        &mut conditions,
        condition(
            DEGRADED,
            degraded,
            degraded_reason,
            degraded_message,
            generation,
            now,
        ),
    );

    // What every server runs with changes once the StatefulSet has rolled the spec out to all
    // of them; until then the servers still run with what the status said before.
    let rolled_out = matches!(progressing_reason, "UpToDate" | "WaitingForReadiness");
    let (tls, auth) = if rolled_out {
        in_force(memcached)
    } else {
        (previous.tls.clone(), previous.auth.clone())
    };
    MemcachedStatus {
        observed_generation: generation,
        replicas: Some(existing),
        ready_replicas: Some(ready_count),
        selector: Some(selector_string(memcached)),
        servers: Some(servers),
        tls,
        auth,
        client_ca_trust: previous.client_ca_trust.clone(),
        conditions: Some(conditions),
    }
}

/// The TLS and authentication a (defaulted) spec configures the servers with.
fn in_force(memcached: &Memcached) -> (Option<TlsStatus>, Option<AuthStatus>) {
    let tls = memcached.spec.tls.as_ref().map(|tls| TlsStatus {
        secret_name: tls.secret_name.clone(),
        client_auth: Some(tls.client_auth.unwrap_or_default()),
        client_ca: tls
            .client_ca
            .clone()
            .filter(|_| tls.client_auth.unwrap_or_default() != ClientAuth::None),
        plaintext_port: tls.plaintext_port,
    });
    let auth = memcached.spec.auth.as_ref().map(|auth| AuthStatus {
        secret_name: auth.secret_name.clone(),
    });
    (tls, auth)
}

#[cfg(test)]
mod tests;
