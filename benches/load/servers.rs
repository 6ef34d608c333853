//! Starts the servers under test as child processes on free loopback ports (known before
//! they start, so start-up is timed from the first instant), and tells when they are ready.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use testkit::ports::free_port;
use testkit::process::RELATED_IMAGE;
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

/// Ports of a `memcached-operator webhooks` process.
pub struct Ports {
    /// The TLS webhook listener.
    pub webhook: u16,
    /// `/readyz`.
    pub probe: u16,
    /// `/metrics`.
    pub metrics: u16,
}

impl Ports {
    /// Three free ports.
    pub fn free() -> Ports {
        Ports {
            webhook: free_port(),
            probe: free_port(),
            metrics: free_port(),
        }
    }
}

/// Starts `memcached-operator webhooks --cert-root ROOT` on `ports`, logging JSON at the
/// default level (`info`) to nowhere, as in a cluster; its metrics are plain HTTP, since no API
/// server reviews callers here.
pub fn spawn_operator(cert_root: &Path, ports: &Ports) -> Child {
    Command::new(OPERATOR)
        .args(["webhooks", "--bind-address", "127.0.0.1"])
        .arg("--webhook-port")
        .arg(ports.webhook.to_string())
        .arg("--probe-port")
        .arg(ports.probe.to_string())
        .arg("--metrics-port")
        .arg(ports.metrics.to_string())
        .arg("--metrics-secure=false")
        .arg("--cert-root")
        .arg(cert_root)
        .args(["--log-format", "json"])
        .env("RELATED_IMAGE_MEMCACHED", RELATED_IMAGE)
        .env_remove("RUST_LOG")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("start memcached-operator webhooks")
}

/// Starts the operator's webhooks and waits until `/readyz` answers 200.
pub fn start_operator(cert_root: &Path) -> Process {
    let ports = Ports::free();
    let child = spawn_operator(cert_root, &ports);
    wait_ready(ports.probe, Duration::from_secs(10)).expect("the webhooks become ready");
    Process {
        child,
        address: SocketAddr::from(([127, 0, 0, 1], ports.webhook)),
    }
}

/// Starts this benchmark's own binary as the TLS echo server and waits until it accepts.
pub fn start_echo(cert_dir: &Path, responses: &Path) -> Process {
    let port = free_port();
    let child = Command::new(std::env::current_exe().expect("the benchmark binary"))
        .arg("echo-server")
        .arg(cert_dir)
        .arg(responses)
        .arg(port.to_string())
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("start the echo server");
    let address = SocketAddr::from(([127, 0, 0, 1], port));
    let started = Instant::now();
    while TcpStream::connect(address).is_err() {
        assert!(
            started.elapsed() < Duration::from_secs(10),
            "the echo server listens within 10 s"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
    Process { child, address }
}

/// Polls `GET /readyz` on `port` until it answers 200; returns how long that took.
pub fn wait_ready(port: u16, within: Duration) -> Result<Duration, String> {
    let started = Instant::now();
    let address = SocketAddr::from(([127, 0, 0, 1], port));
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
