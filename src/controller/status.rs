//! Computes a Memcached's status from what its children report: how many servers exist and
//! are ready, their addresses, and the Available, Progressing and Degraded conditions.
//!
//! Pure: the caller supplies the observations and the current time. A condition's
//! lastTransitionTime moves only when its status changes; reason and message follow the
//! latest observation.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use kube::ResourceExt;

use super::children::{port, selector_string};
use super::compact::{CachedPod, CachedStatefulSet};
use crate::api::v1beta1::{DEFAULT_REPLICAS, Memcached, MemcachedStatus};

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
}

/// What the controller saw of a Memcached's children.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Observed {
    /// The StatefulSet, if it exists.
    pub statefulset: Option<CachedStatefulSet>,
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

    MemcachedStatus {
        observed_generation: generation,
        replicas: Some(existing),
        ready_replicas: Some(ready_count),
        selector: Some(selector_string(memcached)),
        servers: Some(servers),
        conditions: Some(conditions),
    }
}

#[cfg(test)]
mod tests {
    use crate::controller::compact::Rollout;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

    use super::*;
    use crate::api::v1beta1::MemcachedSpec;
    use crate::fixtures::memcached;

    fn at(seconds: i64) -> Time {
        Time(jiff::Timestamp::from_second(seconds).expect("a valid time"))
    }

    fn object(replicas: i32) -> Memcached {
        let mut object = memcached(
            "cache",
            MemcachedSpec {
                replicas: Some(replicas),
                ..MemcachedSpec::default()
            },
        );
        object.metadata.generation = Some(2);
        object
    }

    fn statefulset(replicas: i32, updated: i32, current: bool) -> CachedStatefulSet {
        CachedStatefulSet {
            metadata: ObjectMeta {
                generation: Some(5),
                ..ObjectMeta::default()
            },
            status: Some(Rollout {
                replicas,
                updated_replicas: Some(updated),
                observed_generation: Some(if current { 5 } else { 4 }),
            }),
            ..CachedStatefulSet::default()
        }
    }

    fn get<'a>(status: &'a MemcachedStatus, kind: &str) -> &'a Condition {
        status
            .conditions
            .iter()
            .flatten()
            .find(|c| c.type_ == kind)
            .expect("condition present")
    }

    #[test]
    fn all_servers_ready_is_available_and_not_progressing() {
        let observed = Observed {
            statefulset: Some(statefulset(3, 3, true)),
            ready_ordinals: vec![2, 0, 1],
        };
        let status = desired_status(&object(3), &observed, None, &at(100));
        assert_eq!(get(&status, AVAILABLE).status, "True");
        assert_eq!(get(&status, AVAILABLE).reason, "AllServersReady");
        assert_eq!(get(&status, PROGRESSING).status, "False");
        assert_eq!(get(&status, DEGRADED).status, "False");
        assert_eq!(status.ready_replicas, Some(3));
        assert_eq!(status.observed_generation, Some(2));
        assert_eq!(
            status.servers,
            Some(vec![
                "cache-0.cache.default.svc:11211".to_string(),
                "cache-1.cache.default.svc:11211".to_string(),
                "cache-2.cache.default.svc:11211".to_string(),
            ])
        );
        assert_eq!(
            status.selector.as_deref(),
            Some("app.kubernetes.io/instance=cache,app.kubernetes.io/name=memcached")
        );
    }

    #[test]
    fn servers_list_only_ready_pods_in_order() {
        let observed = Observed {
            statefulset: Some(statefulset(3, 3, true)),
            ready_ordinals: vec![2, 0, 7],
        };
        let status = desired_status(&object(3), &observed, None, &at(100));
        assert_eq!(
            status.servers,
            Some(vec![
                "cache-0.cache.default.svc:11211".to_string(),
                "cache-2.cache.default.svc:11211".to_string()
            ])
        );
        assert_eq!(get(&status, AVAILABLE).reason, "SomeServersReady");
        assert_eq!(get(&status, PROGRESSING).reason, "WaitingForReadiness");
    }

    #[test]
    fn a_missing_statefulset_is_progressing_and_unavailable() {
        let status = desired_status(&object(2), &Observed::default(), None, &at(100));
        assert_eq!(get(&status, AVAILABLE).status, "False");
        assert_eq!(get(&status, PROGRESSING).reason, "Creating");
    }

    #[test]
    fn an_outdated_statefulset_is_rolling_out() {
        let observed = Observed {
            statefulset: Some(statefulset(3, 1, true)),
            ready_ordinals: vec![0, 1, 2],
        };
        let status = desired_status(&object(3), &observed, None, &at(100));
        assert_eq!(get(&status, PROGRESSING).reason, "RollingOut");
        let observed = Observed {
            statefulset: Some(statefulset(3, 3, false)),
            ready_ordinals: vec![0, 1, 2],
        };
        assert_eq!(
            get(
                &desired_status(&object(3), &observed, None, &at(100)),
                PROGRESSING
            )
            .reason,
            "RollingOut"
        );
    }

    #[test]
    fn an_invalid_spec_is_degraded_with_the_webhook_message() {
        let problem = Problem::InvalidSpec("spec.replicas: 65 is outside 0 to 64".into());
        let status = desired_status(&object(3), &Observed::default(), Some(&problem), &at(100));
        let degraded = get(&status, DEGRADED);
        assert_eq!(
            (degraded.status.as_str(), degraded.reason.as_str()),
            ("True", "InvalidSpec")
        );
        assert_eq!(degraded.message, "spec.replicas: 65 is outside 0 to 64");
        assert_eq!(get(&status, PROGRESSING).reason, "InvalidSpec");
    }

    #[test]
    fn transition_times_move_only_when_a_status_flips() {
        let ready = Observed {
            statefulset: Some(statefulset(1, 1, true)),
            ready_ordinals: vec![0],
        };
        let mut object = object(1);
        object.status = Some(desired_status(&object, &ready, None, &at(100)));
        let again = desired_status(&object, &ready, None, &at(200));
        assert_eq!(get(&again, AVAILABLE).last_transition_time, at(100));
        assert_eq!(
            object.status.as_ref(),
            Some(&again),
            "nothing changed, nothing to write"
        );
        let not_ready = Observed {
            statefulset: Some(statefulset(1, 1, true)),
            ready_ordinals: vec![],
        };
        let flipped = desired_status(&object, &not_ready, None, &at(300));
        assert_eq!(get(&flipped, AVAILABLE).last_transition_time, at(300));
        assert_eq!(
            get(&flipped, DEGRADED).last_transition_time,
            at(100),
            "Degraded stayed False"
        );
    }

    #[test]
    fn a_pod_serves_when_ready_and_not_being_deleted() {
        let pod = |ready: Option<&str>, deleting: bool| -> CachedPod {
            serde_json::from_value(serde_json::json!({
                "metadata": {
                    "name": "cache-0",
                    "deletionTimestamp": deleting.then_some("2026-05-02T09:14:08Z"),
                },
                "status": {"conditions": ready.map(|status| vec![
                    serde_json::json!({"type": "PodScheduled", "status": "True"}),
                    serde_json::json!({"type": "Ready", "status": status}),
                ])},
            }))
            .expect("a pod")
        };
        assert!(serving(&pod(Some("True"), false)));
        assert!(!serving(&pod(Some("True"), true)));
        assert!(!serving(&pod(Some("False"), false)));
        assert!(!serving(&pod(None, false)));
    }

    #[test]
    fn zero_replicas_is_scaled_to_zero() {
        let status = desired_status(
            &object(0),
            &Observed {
                statefulset: Some(statefulset(0, 0, true)),
                ready_ordinals: vec![],
            },
            None,
            &at(1),
        );
        assert_eq!(get(&status, AVAILABLE).reason, "ScaledToZero");
        assert_eq!(get(&status, PROGRESSING).status, "False");
    }
}
