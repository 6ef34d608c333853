//! Runs the operator's binary as `supervise` over a shell standing in for memcached, as a
//! process of its own: it exits as its child did (its status, or 128 plus the signal that
//! killed it), passes signals on (SIGTERM as SIGUSR1 with `--warm-restart`), and reaps the
//! orphans its child leaves. The auth file's reload is shown with the real memcached in the
//! end-to-end suite (`tests/e2e/supervisor.rs`).

use std::io::{BufRead, BufReader};
use std::process::{Child, ChildStdout, Command, Stdio};
use std::time::{Duration, Instant};

const OPERATOR: &str = env!("CARGO_BIN_EXE_memcached-operator");

/// The supervisor over `sh -c script`, its output piped.
fn supervise(flags: &[&str], script: &str) -> (Child, BufReader<ChildStdout>) {
    let mut child = Command::new(OPERATOR)
        .arg("supervise")
        .args(flags)
        .args(["--", "sh", "-c", script])
        .stdout(Stdio::piped())
        .spawn()
        .expect("the operator's binary starts");
    let stdout = BufReader::new(child.stdout.take().expect("its output"));
    (child, stdout)
}

/// The next line the child wrote: the supervisor's own lines on the same output, JSON logs,
/// are passed over.
fn line(stdout: &mut BufReader<ChildStdout>) -> String {
    loop {
        let mut line = String::new();
        stdout
            .read_line(&mut line)
            .expect("reads the child's output");
        if !line.starts_with('{') {
            return line.trim_end().to_string();
        }
    }
}

fn signal(child: &Child, signal: &str) {
    let status = Command::new("kill")
        .args([&format!("-{signal}"), &child.id().to_string()])
        .status()
        .expect("kill runs");
    assert!(status.success(), "kill -{signal}");
}

/// Waits for `child` to end; its exit code.
fn exit_code(mut child: Child) -> i32 {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        if let Some(status) = child.try_wait().expect("its status") {
            return status.code().expect("the supervisor exits, never killed");
        }
        assert!(Instant::now() < deadline, "the supervisor did not end");
        std::thread::sleep(Duration::from_millis(20));
    }
}

// The scripts loop on short sleeps, so that a trap runs at once.
const WAIT: &str = "while :; do sleep 0.05; done";

#[test]
fn the_supervisor_exits_with_its_child_s_status_or_128_plus_its_signal() {
    let (child, _) = supervise(&[], "exit 3");
    assert_eq!(exit_code(child), 3);
    let (child, _) = supervise(&[], "kill -KILL $$");
    assert_eq!(exit_code(child), 128 + 9);
}

#[test]
fn sigterm_is_passed_on_or_turned_into_sigusr1_with_a_warm_restart() {
    let script = format!(
        "trap 'echo TERM; exit 21' TERM; trap 'echo USR1; exit 22' USR1; echo ready; {WAIT}"
    );
    let (child, mut stdout) = supervise(&[], &script);
    assert_eq!(line(&mut stdout), "ready");
    signal(&child, "TERM");
    assert_eq!(line(&mut stdout), "TERM");
    assert_eq!(exit_code(child), 21);

    let (child, mut stdout) = supervise(&["--warm-restart"], &script);
    assert_eq!(line(&mut stdout), "ready");
    signal(&child, "TERM");
    assert_eq!(line(&mut stdout), "USR1", "memcached's graceful stop");
    assert_eq!(exit_code(child), 22);

    // The preStop hook's `kill -USR1 1` reaches the child as it was sent.
    let (child, mut stdout) = supervise(&[], &script);
    assert_eq!(line(&mut stdout), "ready");
    signal(&child, "USR1");
    assert_eq!(line(&mut stdout), "USR1");
    assert_eq!(exit_code(child), 22);
}

#[test]
fn with_a_warm_restart_the_child_starts_a_second_late() {
    let started = Instant::now();
    let (child, mut stdout) = supervise(&["--warm-restart"], "echo started");
    assert_eq!(line(&mut stdout), "started");
    assert!(
        started.elapsed() >= Duration::from_secs(1),
        "started after {:?}",
        started.elapsed()
    );
    assert_eq!(exit_code(child), 0);
}

#[test]
fn the_orphans_the_child_leaves_are_reaped() {
    // The subshell's sleep outlives the subshell: it is orphaned, and comes to the
    // supervisor (its subreaper here, as PID 1 of a container).
    let script = format!("(sleep 0.2 &); echo ready; {WAIT}");
    let (child, mut stdout) = supervise(&[], &script);
    assert_eq!(line(&mut stdout), "ready");
    std::thread::sleep(Duration::from_millis(800));
    let supervisor = child.id().to_string();
    let zombies: Vec<String> = std::fs::read_dir("/proc")
        .expect("/proc")
        .flatten()
        .filter_map(|entry| std::fs::read_to_string(entry.path().join("status")).ok())
        .filter(|status| {
            let field = |name: &str| {
                status
                    .lines()
                    .find_map(|line| line.strip_prefix(name))
                    .map(str::trim)
                    .unwrap_or_default()
                    .to_string()
            };
            field("PPid:") == supervisor && field("State:").starts_with('Z')
        })
        .collect();
    signal(&child, "TERM");
    assert_eq!(
        exit_code(child),
        128 + 15,
        "the child was killed by the SIGTERM passed on"
    );
    assert_eq!(
        zombies,
        Vec::<String>::new(),
        "no zombie under the supervisor"
    );
}
