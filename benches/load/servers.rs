//! Starts the servers under test as child processes on loopback ports they choose themselves
//! (port 0), reads the addresses they report, and tells when they are ready. Start-up is
//! timed from the spawn, the reading of those addresses included.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::Path;
use std::process::{Child, ChildStdout, Command, Stdio};
use std::time::{Duration, Instant};

use testkit::process::{RELATED_IMAGE, listener_of};
use testkit::procfs;

/// The release build of the operator, built by cargo for this benchmark.
pub const OPERATOR: &str = env!("CARGO_BIN_EXE_memcached-operator");

/// The release build of the packaging tool, beside the operator's (`make bench-load` builds
/// it first); panics naming the command that builds it when it is missing.
pub fn packager() -> std::path::PathBuf {
    let packager = std::path::Path::new(OPERATOR).with_file_name("memcached-packager");
    assert!(
        packager.is_file(),
        "{} is missing: cargo build --release -p memcached-packager",
        packager.display()
    );
    packager
}

/// A server process, killed when dropped.
pub struct Process {
    child: Child,
    /// Its TLS listener.
    pub address: SocketAddr,
}

impl Process {
    /// The process id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// `VmRSS` and `VmHWM` of the process, in KiB.
    pub fn memory_kib(&self) -> (u64, u64) {
        let memory = procfs::memory(self.pid()).unwrap_or_else(|error| panic!("{error}"));
        (memory.rss_kib, memory.hwm_kib)
    }
}

impl Drop for Process {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A `memcached-operator webhooks` process and where it listens.
pub struct Spawned {
    /// The process.
    pub child: Child,
    /// The TLS webhook listener.
    pub webhook: SocketAddr,
    /// `/readyz`.
    pub probe: SocketAddr,
}

/// Starts `memcached-operator webhooks --cert-root ROOT`, every listener on a port of its
/// choosing, logging JSON at the default level (`info`), as in a cluster; its metrics are
/// plain HTTP, since no API server reviews callers here. Returns once it has logged where its
/// webhooks and probes listen; the rest of its log is read and dropped.
pub fn spawn_operator(cert_root: &Path) -> Spawned {
    let mut child = Command::new(OPERATOR)
        .args(["webhooks", "--bind-address", "127.0.0.1"])
        .args([
            "--webhook-port",
            "0",
            "--probe-port",
            "0",
            "--metrics-port",
            "0",
        ])
        .arg("--metrics-secure=false")
        .arg("--cert-root")
        .arg(cert_root)
        .args(["--log-format", "json"])
        .env("RELATED_IMAGE_MEMCACHED", RELATED_IMAGE)
        .env_remove("RUST_LOG")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("start memcached-operator webhooks");
    let stdout = child.stdout.take().expect("its stdout is piped");
    let (mut webhook, mut probe) = (None, None);
    let mut lines = BufReader::new(stdout);
    let mut line = String::new();
    while webhook.is_none() || probe.is_none() {
        line.clear();
        let read = lines.read_line(&mut line).expect("read the operator's log");
        assert!(read > 0, "the operator exited before logging its listeners");
        let entry = serde_json::from_str(&line).unwrap_or(serde_json::Value::Null);
        match listener_of(&entry) {
            Some((server, address)) if server == "webhooks" => webhook = Some(address),
            Some((server, address)) if server == "probes" => probe = Some(address),
            _ => {}
        }
    }
    drain(lines);
    Spawned {
        child,
        webhook: webhook.expect("the webhooks' address"),
        probe: probe.expect("the probes' address"),
    }
}

/// Reads and drops the rest of a child's output, so that it never blocks on a full pipe.
fn drain(mut output: BufReader<ChildStdout>) {
    std::thread::spawn(move || {
        let _ = std::io::copy(&mut output, &mut std::io::sink());
    });
}

/// Starts the operator's webhooks and waits until `/readyz` answers 200.
pub fn start_operator(cert_root: &Path) -> Process {
    let spawned = spawn_operator(cert_root);
    wait_ready(spawned.probe, Duration::from_secs(120)).expect("the webhooks become ready");
    Process {
        child: spawned.child,
        address: spawned.webhook,
    }
}

/// Starts this benchmark's own binary as the TLS echo server, which binds a port of its
/// choosing and prints its address once it accepts.
pub fn start_echo(cert_dir: &Path, responses: &Path) -> Process {
    let mut child = Command::new(std::env::current_exe().expect("the benchmark binary"))
        .arg("echo-server")
        .arg(cert_dir)
        .arg(responses)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("start the echo server");
    let mut lines = BufReader::new(child.stdout.take().expect("its stdout is piped"));
    let mut line = String::new();
    lines
        .read_line(&mut line)
        .expect("read the echo server's address");
    let address = line
        .trim()
        .parse()
        .unwrap_or_else(|_| panic!("the echo server printed {line:?}, not its address"));
    drain(lines);
    Process { child, address }
}

/// Polls `GET /readyz` at `address` until it answers 200; returns how long that took.
pub fn wait_ready(address: SocketAddr, within: Duration) -> Result<Duration, String> {
    let started = Instant::now();
    loop {
        if readyz(address) == Some(200) {
            return Ok(started.elapsed());
        }
        if started.elapsed() > within {
            return Err(format!("not ready within {within:?}"));
        }
        std::thread::sleep(Duration::from_micros(500));
    }
}

/// The status of `GET /readyz`, or `None` when nothing answers.
fn readyz(address: SocketAddr) -> Option<u16> {
    let mut stream = TcpStream::connect(address).ok()?;
    stream
        .write_all(b"GET /readyz HTTP/1.1\r\nhost: localhost\r\nconnection: close\r\n\r\n")
        .ok()?;
    let mut answer = Vec::new();
    stream.read_to_end(&mut answer).ok()?;
    let line = answer.split(|b| *b == b'\r').next()?;
    std::str::from_utf8(line)
        .ok()?
        .split(' ')
        .nth(1)?
        .parse()
        .ok()
}
