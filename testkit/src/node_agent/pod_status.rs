//! Computes a pod's status from what its processes are doing, with the kubelet's rules for
//! phase, conditions and container statuses.
//!
//! Pure: the pod worker records each container's state ([`ContainerRecord`]) and asks this
//! module for the status to write. `PodScheduled` and any condition the kubelet does not own
//! are kept from the status the API server holds.

use k8s_openapi::api::core::v1::{
    ContainerState, ContainerStateRunning, ContainerStateTerminated, ContainerStateWaiting,
    ContainerStatus, HostIP, Pod, PodCondition, PodIP, PodStatus,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

/// The conditions the kubelet owns.
const KUBELET_CONDITIONS: [&str; 4] = [
    "PodReadyToStartContainers",
    "Initialized",
    "ContainersReady",
    "Ready",
];

/// What one container is doing.
#[derive(Clone, Debug, PartialEq)]
pub enum RunState {
    /// Not running: not started yet, or waiting to restart.
    Waiting {
        /// `ContainerCreating`, `ErrImagePull`, `CrashLoopBackOff`, ...
        reason: String,
        /// Details, e.g. the image error.
        message: Option<String>,
    },
    /// Its process runs.
    Running {
        /// When it started.
        started_at: jiff::Timestamp,
    },
    /// Its process has exited.
    Terminated(Exit),
}

/// How a process ended.
#[derive(Clone, Debug, PartialEq)]
pub struct Exit {
    /// Its exit code (128 + signal when killed by one).
    pub exit_code: i32,
    /// The signal that killed it, if one did.
    pub signal: Option<i32>,
    /// `Completed` or `Error`.
    pub reason: String,
    /// When it started.
    pub started_at: jiff::Timestamp,
    /// When it ended.
    pub finished_at: jiff::Timestamp,
}

impl Exit {
    /// An exit with the kubelet's reason: `Completed` for 0, else `Error`.
    pub fn new(
        exit_code: i32,
        signal: Option<i32>,
        started_at: jiff::Timestamp,
        finished_at: jiff::Timestamp,
    ) -> Exit {
        Exit {
            exit_code,
            signal,
            reason: if exit_code == 0 { "Completed" } else { "Error" }.to_string(),
            started_at,
            finished_at,
        }
    }
}

/// One container as the agent tracks it.
#[derive(Clone, Debug, PartialEq)]
pub struct ContainerRecord {
    /// Its name.
    pub name: String,
    /// Its image, as the spec spells it.
    pub image: String,
    /// The image's ID (`docker.io/...@sha256:` on a real node; here the host program).
    pub image_id: String,
    /// What it does now.
    pub state: RunState,
    /// How its previous run ended.
    pub last: Option<Exit>,
    /// Restarts so far.
    pub restart_count: i32,
    /// Whether its readiness probe passes (true when it has none and runs).
    pub ready: bool,
    /// Whether its startup probe passed (true when it has none and runs).
    pub started: bool,
}

/// Everything the status is computed from.
#[derive(Clone, Debug)]
pub struct StatusInput<'a> {
    /// The pod as the API server holds it.
    pub pod: &'a Pod,
    /// Init containers, in spec order.
    pub init: &'a [ContainerRecord],
    /// Containers, in spec order.
    pub containers: &'a [ContainerRecord],
    /// The pod's IP, once given.
    pub pod_ip: Option<&'a str>,
    /// The node's IP.
    pub host_ip: &'a str,
    /// When the agent took the pod on.
    pub start_time: jiff::Timestamp,
    /// Whether the sandbox (IP, volumes) is ready.
    pub sandbox_ready: bool,
    /// Now, for transition times of changed conditions.
    pub now: jiff::Timestamp,
}

/// The pod's phase by the kubelet's `getPhase`.
pub fn phase(input: &StatusInput) -> &'static str {
    let policy = restart_policy(input.pod);
    let init_failed_for_good = policy == "Never"
        && input
            .init
            .iter()
            .any(|c| matches!(&c.state, RunState::Terminated(e) if e.exit_code != 0));
    if init_failed_for_good {
        return "Failed";
    }
    let pending_init = input
        .init
        .iter()
        .any(|c| !matches!(&c.state, RunState::Terminated(e) if e.exit_code == 0));
    if pending_init {
        return "Pending";
    }
    let (mut running, mut waiting, mut stopped, mut succeeded) = (0, 0, 0, 0);
    for c in input.containers {
        match &c.state {
            RunState::Running { .. } => running += 1,
            RunState::Terminated(exit) => {
                stopped += 1;
                if exit.exit_code == 0 {
                    succeeded += 1;
                }
            }
            RunState::Waiting { .. } => match &c.last {
                Some(exit) => {
                    stopped += 1;
                    if exit.exit_code == 0 {
                        succeeded += 1;
                    }
                }
                None => waiting += 1,
            },
        }
    }
    if waiting > 0 {
        "Pending"
    } else if running > 0 {
        "Running"
    } else if stopped > 0 {
        if policy == "Always" {
            "Running"
        } else if stopped == succeeded {
            "Succeeded"
        } else if policy == "Never" {
            "Failed"
        } else {
            "Running"
        }
    } else {
        "Pending"
    }
}

/// Whether a container that exited with `exit_code` is started again under the pod's
/// `restartPolicy`: `Always` restarts a container whatever its exit, `OnFailure` after a
/// failure; an init container that succeeded is done under any policy.
pub fn restarts(policy: &str, init: bool, exit_code: i32) -> bool {
    match policy {
        "Never" => false,
        _ if exit_code != 0 => true,
        "Always" => !init,
        _ => false,
    }
}

fn restart_policy(pod: &Pod) -> &str {
    pod.spec
        .as_ref()
        .and_then(|s| s.restart_policy.as_deref())
        .unwrap_or("Always")
}

/// The status to write: the one the API server holds with the kubelet's part replaced.
pub fn pod_status(input: &StatusInput) -> PodStatus {
    let old = input.pod.status.clone().unwrap_or_default();
    let phase = phase(input);
    let unready: Vec<&str> = input
        .containers
        .iter()
        .filter(|c| !c.ready)
        .map(|c| c.name.as_str())
        .collect();
    let init_done = input
        .init
        .iter()
        .all(|c| matches!(&c.state, RunState::Terminated(e) if e.exit_code == 0));
    let pending_init: Vec<&str> = input
        .init
        .iter()
        .filter(|c| !matches!(&c.state, RunState::Terminated(e) if e.exit_code == 0))
        .map(|c| c.name.as_str())
        .collect();
    let completed = phase == "Succeeded" || phase == "Failed";
    let (ready_status, ready_reason, ready_message) = if completed {
        ("False", Some("PodCompleted".to_string()), None)
    } else if unready.is_empty() && init_done {
        ("True", None, None)
    } else {
        (
            "False",
            Some("ContainersNotReady".to_string()),
            Some(format!(
                "containers with unready status: [{}]",
                unready.join(" ")
            )),
        )
    };
    let mut conditions: Vec<PodCondition> = old
        .conditions
        .clone()
        .unwrap_or_default()
        .into_iter()
        .filter(|c| !KUBELET_CONDITIONS.contains(&c.type_.as_str()))
        .collect();
    let ours = [
        (
            "PodReadyToStartContainers",
            if input.sandbox_ready && !completed {
                "True"
            } else {
                "False"
            },
            None,
            None,
        ),
        (
            "Initialized",
            if init_done { "True" } else { "False" },
            (!init_done).then(|| "ContainersNotInitialized".to_string()),
            (!init_done).then(|| {
                format!(
                    "containers with incomplete status: [{}]",
                    pending_init.join(" ")
                )
            }),
        ),
        (
            "Ready",
            ready_status,
            ready_reason.clone(),
            ready_message.clone(),
        ),
        ("ContainersReady", ready_status, ready_reason, ready_message),
    ];
    let previous = old.conditions.unwrap_or_default();
    for (type_, status, reason, message) in ours {
        let transition = previous
            .iter()
            .find(|c| c.type_ == type_ && c.status == status)
            .and_then(|c| c.last_transition_time.clone())
            .unwrap_or(Time(input.now));
        conditions.push(PodCondition {
            type_: type_.to_string(),
            status: status.to_string(),
            reason,
            message,
            last_transition_time: Some(transition),
            last_probe_time: None,
            observed_generation: input.pod.metadata.generation,
        });
    }
    PodStatus {
        phase: Some(phase.to_string()),
        conditions: Some(conditions),
        host_ip: Some(input.host_ip.to_string()),
        host_ips: Some(vec![HostIP {
            ip: input.host_ip.to_string(),
        }]),
        pod_ip: input.pod_ip.map(str::to_string),
        pod_ips: input.pod_ip.map(|ip| vec![PodIP { ip: ip.to_string() }]),
        start_time: Some(Time(input.start_time)),
        init_container_statuses: (!input.init.is_empty())
            .then(|| input.init.iter().map(container_status).collect()),
        container_statuses: Some(input.containers.iter().map(container_status).collect()),
        // PodObservedGenerationTracking (on by default since 1.34): the generation of the
        // spec this status describes.
        observed_generation: input.pod.metadata.generation,
        qos_class: old.qos_class,
        nominated_node_name: old.nominated_node_name,
        ..PodStatus::default()
    }
}

/// The status of one container.
pub fn container_status(record: &ContainerRecord) -> ContainerStatus {
    let running = matches!(record.state, RunState::Running { .. });
    ContainerStatus {
        name: record.name.clone(),
        image: record.image.clone(),
        image_id: record.image_id.clone(),
        container_id: None,
        ready: record.ready && running,
        started: Some(running && record.started),
        restart_count: record.restart_count,
        state: Some(state(&record.state)),
        last_state: Some(
            record
                .last
                .as_ref()
                .map(|exit| state(&RunState::Terminated(exit.clone())))
                .unwrap_or_default(),
        ),
        ..ContainerStatus::default()
    }
}

fn state(state: &RunState) -> ContainerState {
    match state {
        RunState::Waiting { reason, message } => ContainerState {
            waiting: Some(ContainerStateWaiting {
                reason: Some(reason.clone()),
                message: message.clone(),
            }),
            ..ContainerState::default()
        },
        RunState::Running { started_at } => ContainerState {
            running: Some(ContainerStateRunning {
                started_at: Some(Time(*started_at)),
            }),
            ..ContainerState::default()
        },
        RunState::Terminated(exit) => ContainerState {
            terminated: Some(ContainerStateTerminated {
                exit_code: exit.exit_code,
                signal: exit.signal,
                reason: Some(exit.reason.clone()),
                started_at: Some(Time(exit.started_at)),
                finished_at: Some(Time(exit.finished_at)),
                ..ContainerStateTerminated::default()
            }),
            ..ContainerState::default()
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::PodSpec;

    fn pod(policy: &str) -> Pod {
        Pod {
            metadata: k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta {
                generation: Some(3),
                ..Default::default()
            },
            spec: Some(PodSpec {
                restart_policy: Some(policy.to_string()),
                ..PodSpec::default()
            }),
            status: Some(PodStatus {
                conditions: Some(vec![PodCondition {
                    type_: "PodScheduled".into(),
                    status: "True".into(),
                    ..PodCondition::default()
                }]),
                ..PodStatus::default()
            }),
        }
    }

    fn t0() -> jiff::Timestamp {
        jiff::Timestamp::from_second(1_700_000_000).unwrap()
    }

    fn record(name: &str, state: RunState, ready: bool) -> ContainerRecord {
        ContainerRecord {
            name: name.into(),
            image: "memcached:1".into(),
            image_id: "memcached:1".into(),
            state,
            last: None,
            restart_count: 0,
            ready,
            started: true,
        }
    }

    fn input<'a>(
        pod: &'a Pod,
        init: &'a [ContainerRecord],
        containers: &'a [ContainerRecord],
    ) -> StatusInput<'a> {
        StatusInput {
            pod,
            init,
            containers,
            pod_ip: Some("127.0.100.2"),
            host_ip: "127.0.0.1",
            start_time: t0(),
            sandbox_ready: true,
            now: t0(),
        }
    }

    fn condition<'a>(status: &'a PodStatus, type_: &str) -> &'a PodCondition {
        status
            .conditions
            .as_ref()
            .unwrap()
            .iter()
            .find(|c| c.type_ == type_)
            .unwrap()
    }

    fn exited(code: i32) -> RunState {
        RunState::Terminated(Exit::new(code, None, t0(), t0()))
    }

    #[test]
    fn a_running_ready_container_makes_the_pod_running_and_ready() {
        let pod = pod("Always");
        let containers = [record("main", RunState::Running { started_at: t0() }, true)];
        let status = pod_status(&input(&pod, &[], &containers));
        assert_eq!(status.phase.as_deref(), Some("Running"));
        assert_eq!(condition(&status, "Ready").status, "True");
        assert_eq!(condition(&status, "ContainersReady").status, "True");
        assert_eq!(condition(&status, "PodScheduled").status, "True");
        assert_eq!(status.observed_generation, Some(3));
        assert_eq!(condition(&status, "Ready").observed_generation, Some(3));
        assert_eq!(status.pod_ip.as_deref(), Some("127.0.100.2"));
        assert!(status.container_statuses.unwrap()[0].ready);
    }

    #[test]
    fn an_unready_container_is_named_in_the_ready_condition() {
        let pod = pod("Always");
        let containers = [
            record("a", RunState::Running { started_at: t0() }, true),
            record("b", RunState::Running { started_at: t0() }, false),
        ];
        let status = pod_status(&input(&pod, &[], &containers));
        let ready = condition(&status, "Ready");
        assert_eq!(ready.status, "False");
        assert_eq!(ready.reason.as_deref(), Some("ContainersNotReady"));
        assert_eq!(
            ready.message.as_deref(),
            Some("containers with unready status: [b]")
        );
    }

    #[test]
    fn a_pending_init_container_keeps_the_pod_pending_and_uninitialized() {
        let pod = pod("Always");
        let init = [
            record("util", exited(0), false),
            record("pull", RunState::Running { started_at: t0() }, false),
        ];
        let containers = [record(
            "main",
            RunState::Waiting {
                reason: "PodInitializing".into(),
                message: None,
            },
            false,
        )];
        let status = pod_status(&input(&pod, &init, &containers));
        assert_eq!(status.phase.as_deref(), Some("Pending"));
        let initialized = condition(&status, "Initialized");
        assert_eq!(initialized.status, "False");
        assert_eq!(
            initialized.message.as_deref(),
            Some("containers with incomplete status: [pull]")
        );
    }

    #[test]
    fn a_job_pod_whose_containers_exit_zero_succeeds() {
        let pod = pod("Never");
        let containers = [record("extract", exited(0), false)];
        let status = pod_status(&input(&pod, &[], &containers));
        assert_eq!(status.phase.as_deref(), Some("Succeeded"));
        assert_eq!(
            condition(&status, "Ready").reason.as_deref(),
            Some("PodCompleted")
        );
    }

    #[test]
    fn a_failure_fails_the_pod_only_when_it_will_not_restart() {
        let containers = [record("main", exited(1), false)];
        let never = pod("Never");
        assert_eq!(phase(&input(&never, &[], &containers)), "Failed");
        let on_failure = pod("OnFailure");
        assert_eq!(phase(&input(&on_failure, &[], &containers)), "Running");
        let init = [record("util", exited(1), false)];
        assert_eq!(phase(&input(&never, &init, &containers)), "Failed");
    }

    #[test]
    fn restarts_follow_the_policy_and_a_succeeded_init_container_is_done() {
        assert!(restarts("Always", false, 0));
        assert!(restarts("Always", false, 1));
        assert!(!restarts("Always", true, 0));
        assert!(restarts("Always", true, 1));
        assert!(!restarts("OnFailure", false, 0));
        assert!(restarts("OnFailure", false, 2));
        assert!(!restarts("Never", false, 1));
        assert!(!restarts("Never", true, 1));
    }

    #[test]
    fn an_image_error_is_reported_as_waiting_with_its_message() {
        let pod = pod("Always");
        let containers = [record(
            "main",
            RunState::Waiting {
                reason: "ErrImagePull".into(),
                message: Some("image \"x:1\" is not in the node agent's image table".into()),
            },
            false,
        )];
        let status = pod_status(&input(&pod, &[], &containers));
        assert_eq!(status.phase.as_deref(), Some("Pending"));
        let waiting = status.container_statuses.unwrap()[0]
            .state
            .clone()
            .unwrap()
            .waiting
            .unwrap();
        assert_eq!(waiting.reason.as_deref(), Some("ErrImagePull"));
        assert!(waiting.message.unwrap().contains("x:1"));
    }
}
