//! Says why a sidecar stopped where the kubelet reads it: the container's termination message
//! file (`/dev/termination-log`, Kubernetes' default `terminationMessagePath`), which becomes
//! `lastState.terminated.message` in the pod's status, where the operator reads it and reports
//! it on the Memcached (`Degraded`, reason `SidecarStopped`).
//!
//! Best effort: outside a pod the file does not exist and nothing is written; the sidecars'
//! containers also set `terminationMessagePolicy: FallbackToLogsOnError`, so the kubelet takes
//! the log's tail when the file could not be written.

use std::io::Write;
use std::path::Path;

/// Where the kubelet reads a container's termination message (its default path).
pub const TERMINATION_LOG: &str = "/dev/termination-log";

/// The most the kubelet keeps of a termination message, in bytes.
pub const MAX_MESSAGE: usize = 4096;

/// Writes `message` (cut to [`MAX_MESSAGE`] bytes at a character boundary) into the
/// termination message file at `path`, if it exists; says whether it was written.
pub fn say_why(path: &Path, message: &str) -> bool {
    let mut end = message.len().min(MAX_MESSAGE);
    while !message.is_char_boundary(end) {
        end -= 1;
    }
    std::fs::OpenOptions::new()
        .write(true)
        .truncate(true)
        .open(path)
        .and_then(|mut file| file.write_all(&message.as_bytes()[..end]))
        .is_ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_message_is_written_into_an_existing_file_only_and_cut_to_the_kubelet_s_limit() {
        let dir = tempfile::tempdir().expect("a directory");
        let absent = dir.path().join("termination-log");
        assert!(!say_why(&absent, "stopped"));
        assert!(!absent.exists(), "no file is made");
        std::fs::write(&absent, "an older message that is longer").expect("written");
        assert!(say_why(&absent, "stopped"));
        assert_eq!(std::fs::read_to_string(&absent).expect("read"), "stopped");
        let long = "é".repeat(MAX_MESSAGE);
        assert!(say_why(&absent, &long));
        let kept = std::fs::read_to_string(&absent).expect("whole characters");
        assert!(kept.len() <= MAX_MESSAGE && kept.chars().all(|c| c == 'é'));
    }
}
