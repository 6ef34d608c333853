//! How a memcached server stops and starts again: its preStop hook (a delay while it leaves
//! the Service's endpoints, and, with a warm restart, the graceful stop that saves its items),
//! its grace period, and the memory-backed volume its memory file lives on.
//!
//! memcached saves its memory file only when stopped with SIGUSR1; the kubelet stops a
//! container with SIGTERM (or the image's own stop signal, which the official images leave
//! unset), on which memcached exits without saving. So the preStop hook sends SIGUSR1 and
//! waits: memcached saves and exits, and the kubelet finds the container stopped before its
//! SIGTERM is due. Under the supervisor (`children::supervision`), the hook sends it to the
//! container's first process, the supervisor, which passes it on (and turns a SIGTERM into
//! SIGUSR1 too); otherwise to memcached, whose pid its start wrote beside the memory file.
//!
//! memcached also refuses a memory file saved in the same second it starts in (its saved stop
//! time must be in the past), and the kubelet may start a container again within that second:
//! so with a warm restart memcached starts one second late, through the image's shell or
//! under the supervisor.

use k8s_openapi::api::core::v1::{
    EmptyDirVolumeSource, ExecAction, Lifecycle, LifecycleHandler, SleepAction, Volume, VolumeMount,
};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;

use crate::api::v1beta1::{DEFAULT_MEMORY_LIMIT_MB, DEFAULT_TERMINATION_GRACE_SECONDS, Memcached};

/// Where the memory file's volume is mounted.
pub const MEMORY_FILE_DIR: &str = "/var/cache/memcached";
/// The memory file memcached keeps its items in.
pub const MEMORY_FILE: &str = "/var/cache/memcached/memory_file";
/// Where memcached's pid is written when it starts, for the preStop hook.
pub const PID_FILE: &str = "/var/cache/memcached/memcached.pid";
/// Room on the memory file's volume beyond the item memory, in MiB, for its metadata file.
pub const MEMORY_FILE_SLACK_MB: i32 = 1;

const MEMORY_FILE_VOLUME: &str = "memory-file";

/// Whether the servers keep their items across a restart of their container.
pub fn warm_restart(memcached: &Memcached) -> bool {
    memcached
        .spec
        .memcached
        .as_ref()
        .and_then(|m| m.warm_restart)
        .unwrap_or(false)
}

/// The grace period, in seconds.
pub fn grace_period(memcached: &Memcached) -> i64 {
    memcached
        .spec
        .graceful_shutdown
        .as_ref()
        .and_then(|s| s.termination_grace_period_seconds)
        .unwrap_or(DEFAULT_TERMINATION_GRACE_SECONDS)
}

/// The preStop delay, in seconds (0 when none is asked for).
fn pre_stop_delay(memcached: &Memcached) -> i32 {
    memcached
        .spec
        .graceful_shutdown
        .as_ref()
        .and_then(|s| s.pre_stop_delay_seconds)
        .unwrap_or(0)
        .max(0)
}

/// The memcached container's command, when warm restarts are on: the image's shell writes its
/// pid (which memcached keeps), waits a second, then becomes memcached, with the container's
/// arguments. `None` keeps the image's entrypoint.
///
/// The kubelet expands a container's command and arguments before it runs them: `$(NAME)`
/// becomes the variable's value and `$$` a single `$`. So the shell's `$$` is written `$$$$`
/// here (the hook, an exec action, is not expanded).
pub fn command(memcached: &Memcached) -> Option<Vec<String>> {
    warm_restart(memcached).then(|| {
        vec![
            "/bin/sh".into(),
            "-c".into(),
            format!(r#"echo $$$$ > {PID_FILE}; sleep 1; exec memcached "$@""#),
            "memcached".into(),
        ]
    })
}

/// memcached's flag for the memory file, when warm restarts are on.
pub fn args(memcached: &Memcached) -> Vec<String> {
    if warm_restart(memcached) {
        vec![format!("--memory-file={MEMORY_FILE}")]
    } else {
        Vec::new()
    }
}

/// The memcached container's lifecycle: the graceful stop with a warm restart (after the
/// delay, if any), else the kubelet's own sleep for the delay, else none. `supervised` says
/// whether memcached runs under the supervisor, the container's first process.
pub fn lifecycle(memcached: &Memcached, supervised: bool) -> Option<Lifecycle> {
    let delay = pre_stop_delay(memcached);
    let handler = if warm_restart(memcached) {
        let wait = if delay > 0 {
            format!("sleep {delay}; ")
        } else {
            String::new()
        };
        // memcached saves and exits; the wait ends with the container.
        // `read` is the shell's own: the image needs no `cat`.
        let stop = if supervised {
            "kill -USR1 1".to_string()
        } else {
            format!("read -r pid < {PID_FILE}; kill -USR1 \"$pid\"")
        };
        let script = format!("{wait}{stop}; exec sleep {}", grace_period(memcached));
        LifecycleHandler {
            exec: Some(ExecAction {
                command: Some(vec!["/bin/sh".into(), "-c".into(), script]),
            }),
            ..LifecycleHandler::default()
        }
    } else if delay > 0 {
        LifecycleHandler {
            sleep: Some(SleepAction {
                seconds: i64::from(delay),
            }),
            ..LifecycleHandler::default()
        }
    } else {
        return None;
    };
    Some(Lifecycle {
        pre_stop: Some(handler),
        post_start: None,
        stop_signal: None,
    })
}

/// The memory file's volume, in memory and as large as the item memory (it is that memory,
/// mapped, so it counts once against the container's limit), and its mount.
pub fn volume(memcached: &Memcached) -> Option<(Volume, VolumeMount)> {
    if !warm_restart(memcached) {
        return None;
    }
    let memory_mb = memcached
        .spec
        .memcached
        .as_ref()
        .and_then(|m| m.memory_limit_mb)
        .unwrap_or(DEFAULT_MEMORY_LIMIT_MB);
    let volume = Volume {
        name: MEMORY_FILE_VOLUME.into(),
        empty_dir: Some(EmptyDirVolumeSource {
            medium: Some("Memory".into()),
            size_limit: Some(Quantity(format!(
                "{}Mi",
                i64::from(memory_mb) + i64::from(MEMORY_FILE_SLACK_MB)
            ))),
        }),
        ..Volume::default()
    };
    let mount = VolumeMount {
        name: MEMORY_FILE_VOLUME.into(),
        mount_path: MEMORY_FILE_DIR.into(),
        ..VolumeMount::default()
    };
    Some((volume, mount))
}
