//! Reads what a running process costs from `/proc`: resident memory, CPU time and read
//! system calls. Linux only, like the operator's image.

use std::path::PathBuf;
use std::time::Duration;

/// Clock ticks per second of `/proc/PID/stat` (USER_HZ, 100 on every Linux this runs on).
const CLOCK_TICKS: u64 = 100;

/// Why a value could not be read.
#[derive(Debug, thiserror::Error)]
pub enum ProcfsError {
    /// The file could not be read: the process has exited, or this is not Linux.
    #[error("cannot read {}: {error}", .path.display())]
    Unreadable {
        /// The file under `/proc`.
        path: PathBuf,
        /// What the system said.
        error: std::io::Error,
    },
    /// The file does not hold the field, or holds it in a form that is not a number.
    #[error("{}: no number in field {field}", .path.display())]
    MissingField {
        /// The file under `/proc`.
        path: PathBuf,
        /// The field.
        field: &'static str,
    },
}

/// Resident memory of a process, in KiB.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Memory {
    /// `VmRSS`: resident now.
    pub rss_kib: u64,
    /// `VmHWM`: the most it has been resident.
    pub hwm_kib: u64,
}

/// `VmRSS` and `VmHWM` of process `pid`, from `/proc/PID/status`.
pub fn memory(pid: u32) -> Result<Memory, ProcfsError> {
    let (path, status) = read(pid, "status")?;
    let field = |field: &'static str| {
        status
            .lines()
            .find_map(|line| line.strip_prefix(field))
            .and_then(|value| value.trim().trim_end_matches("kB").trim().parse().ok())
            .ok_or_else(|| ProcfsError::MissingField {
                path: path.clone(),
                field,
            })
    };
    Ok(Memory {
        rss_kib: field("VmRSS:")?,
        hwm_kib: field("VmHWM:")?,
    })
}

/// User plus system CPU time of process `pid`, from `/proc/PID/stat`.
pub fn cpu_time(pid: u32) -> Result<Duration, ProcfsError> {
    let (path, stat) = read(pid, "stat")?;
    // The command name may hold spaces and parentheses; the fields after its last `)` are
    // fixed. utime and stime are fields 14 and 15 of stat(5); field 3 (state) comes first.
    let after_name = stat.rsplit_once(')').map_or("", |(_, rest)| rest);
    let fields: Vec<&str> = after_name.split_whitespace().collect();
    let ticks = |index: usize, field: &'static str| {
        fields
            .get(index)
            .and_then(|value| value.parse::<u64>().ok())
            .ok_or_else(|| ProcfsError::MissingField {
                path: path.clone(),
                field,
            })
    };
    let total = ticks(11, "utime")? + ticks(12, "stime")?;
    Ok(Duration::from_millis(total * 1000 / CLOCK_TICKS))
}

/// When process `pid` started, in clock ticks after boot (`starttime`, field 22 of
/// `/proc/PID/stat`): with the pid, it names one process, even after its pid is reused.
pub fn start_ticks(pid: u32) -> Result<u64, ProcfsError> {
    let (path, stat) = read(pid, "stat")?;
    let after_name = stat.rsplit_once(')').map_or("", |(_, rest)| rest);
    after_name
        .split_whitespace()
        .nth(19)
        .and_then(|value| value.parse::<u64>().ok())
        .ok_or(ProcfsError::MissingField {
            path,
            field: "starttime",
        })
}

/// The read system calls process `pid` has made: `syscr` of `/proc/PID/io`.
pub fn read_syscalls(pid: u32) -> Result<u64, ProcfsError> {
    let (path, io) = read(pid, "io")?;
    io.lines()
        .find_map(|line| line.strip_prefix("syscr:"))
        .and_then(|value| value.trim().parse().ok())
        .ok_or(ProcfsError::MissingField {
            path,
            field: "syscr",
        })
}

fn read(pid: u32, file: &str) -> Result<(PathBuf, String), ProcfsError> {
    let path = PathBuf::from(format!("/proc/{pid}/{file}"));
    match std::fs::read_to_string(&path) {
        Ok(text) => Ok((path, text)),
        Err(error) => Err(ProcfsError::Unreadable { path, error }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_process_keeps_its_start_time() {
        let me = std::process::id();
        let first = start_ticks(me).unwrap();
        assert_eq!(start_ticks(me).unwrap(), first);
        assert!(first > 0);
    }

    #[test]
    fn this_process_has_resident_memory_cpu_time_and_reads() {
        let pid = std::process::id();
        let memory = memory(pid).expect("this process's memory");
        assert!(memory.rss_kib > 0 && memory.hwm_kib >= memory.rss_kib);
        cpu_time(pid).expect("this process's CPU time");
        assert!(read_syscalls(pid).expect("this process's reads") > 0);
    }

    #[test]
    fn a_process_that_does_not_exist_is_named_in_the_error() {
        let error = memory(u32::MAX).expect_err("no such process");
        assert!(
            error
                .to_string()
                .contains(&format!("/proc/{}/status", u32::MAX)),
            "{error}"
        );
    }
}
