use crate::controller::cache::compact::Rollout;
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
        statefulset_unseen: false,
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
        statefulset_unseen: false,
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
fn a_statefulset_written_but_not_yet_cached_keeps_the_status_as_it_was() {
    let mut object = object(2);
    let written = Observed {
        statefulset: Some(statefulset(2, 0, false)),
        statefulset_unseen: false,
        ready_ordinals: vec![],
    };
    let rolling_out = desired_status(&object, &written, None, &at(100));
    assert_eq!(get(&rolling_out, PROGRESSING).reason, "RollingOut");
    object.status = Some(rolling_out.clone());

    let unseen = Observed {
        statefulset_unseen: true,
        ..Observed::default()
    };
    assert_eq!(
        desired_status(&object, &unseen, None, &at(101)),
        rolling_out,
        "not taken back to Creating"
    );
    let failed = Problem::ReconcileFailed("the Service: forbidden".into());
    let status = desired_status(&object, &unseen, Some(&failed), &at(101));
    assert_eq!(
        get(&status, DEGRADED).reason,
        "ReconcileFailed",
        "a failure is still said"
    );
    object.status = None;
    let first = desired_status(&object, &unseen, None, &at(101));
    assert_eq!(
        get(&first, PROGRESSING).reason,
        "Creating",
        "with no status yet"
    );
}

#[test]
fn an_outdated_statefulset_is_rolling_out() {
    let observed = Observed {
        statefulset: Some(statefulset(3, 1, true)),
        statefulset_unseen: false,
        ready_ordinals: vec![0, 1, 2],
    };
    let status = desired_status(&object(3), &observed, None, &at(100));
    assert_eq!(get(&status, PROGRESSING).reason, "RollingOut");
    let observed = Observed {
        statefulset: Some(statefulset(3, 3, false)),
        statefulset_unseen: false,
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
fn a_stopped_sidecar_degrades_the_memcached_with_what_it_said() {
    let said = "cache-0: the sidecar cert-refresher stopped (exit code 1, 3 restarts): the \
                sidecars' client certificate cannot be used";
    let problem = Problem::SidecarStopped(said.into());
    let status = desired_status(&object(3), &Observed::default(), Some(&problem), &at(100));
    let degraded = get(&status, DEGRADED);
    assert_eq!(
        (degraded.status.as_str(), degraded.reason.as_str()),
        ("True", "SidecarStopped")
    );
    assert_eq!(degraded.message, said);
}

#[test]
fn transition_times_move_only_when_a_status_flips() {
    let ready = Observed {
        statefulset: Some(statefulset(1, 1, true)),
        statefulset_unseen: false,
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
        statefulset_unseen: false,
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
            statefulset_unseen: false,
            ready_ordinals: vec![],
        },
        None,
        &at(1),
    );
    assert_eq!(get(&status, AVAILABLE).reason, "ScaledToZero");
    assert_eq!(get(&status, PROGRESSING).status, "False");
}

#[test]
fn status_tls_names_the_client_cas_only_where_they_are_verified() {
    use crate::api::v1beta1::{ClientAuth, ClientCaSource, TlsSpec};
    let mut memcached = object(1);
    memcached.spec.tls = Some(TlsSpec {
        secret_name: Some("cache-tls".into()),
        client_auth: Some(ClientAuth::Require),
        client_ca: Some(ClientCaSource {
            config_map_name: "cache-trust".into(),
            key: None,
        }),
        ..TlsSpec::default()
    });
    let (tls, _) = super::in_force(&memcached);
    let source = tls.and_then(|tls| tls.client_ca).expect("the client CAs");
    assert_eq!(
        (source.config_map_name.as_str(), source.key()),
        ("cache-trust", "ca.crt")
    );
    memcached.spec.tls.as_mut().expect("tls").client_auth = Some(ClientAuth::None);
    let (tls, _) = super::in_force(&memcached);
    assert_eq!(tls.and_then(|tls| tls.client_ca), None);
}
