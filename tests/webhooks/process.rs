//! Starts the `memcached-operator webhooks` binary on free loopback ports and watches its logs.

use std::net::SocketAddr;
use std::path::Path;
use std::process::{ExitStatus, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::Value;
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, Command};
use tokio::sync::watch;

use crate::client;

/// The image the server defaults `spec.image` to in these tests.
pub const RELATED_IMAGE: &str = "registry.example/memcached:1.6.39";

/// A running server process. Killed when dropped.
pub struct Server {
    child: Child,
    /// The TLS webhook listener.
    pub webhook: SocketAddr,
    /// `/healthz` and `/readyz`.
    pub probes: SocketAddr,
    /// `/metrics`.
    pub metrics: SocketAddr,
    logs: Arc<Mutex<Vec<Value>>>,
}

/// Where a server looks for its certificate.
pub enum Certs<'a> {
    /// `--cert-root DIR`.
    Root(&'a Path),
    /// `--cert-dir DIR`.
    Dir(&'a Path),
}

impl Server {
    /// Starts a server with the certificate source and further flags, and waits until its
    /// three listeners are bound (not until it is ready).
    pub async fn start(certs: Certs<'_>, flags: &[&str]) -> Server {
        let mut args: Vec<String> = ["webhooks", "--bind-address", "127.0.0.1"]
            .iter()
            .chain(&[
                "--webhook-port",
                "0",
                "--probe-port",
                "0",
                "--metrics-port",
                "0",
            ])
            .map(|a| a.to_string())
            .collect();
        match certs {
            Certs::Root(root) => args.extend(["--cert-root".into(), root.display().to_string()]),
            Certs::Dir(dir) => args.extend(["--cert-dir".into(), dir.display().to_string()]),
        };
        args.extend(flags.iter().map(|f| f.to_string()));
        Server::start_command(&args, &[], &["webhooks", "probes", "metrics"]).await
    }

    /// Starts the binary with `args` (a subcommand and its flags) and extra environment, and
    /// waits until the named listeners are bound.
    pub async fn start_command(
        args: &[String],
        env: &[(&str, &str)],
        listeners: &[&str],
    ) -> Server {
        let mut command = Command::new(env!("CARGO_BIN_EXE_memcached-operator"));
        command
            .args(["--log-format", "json", "--log-level", "info"])
            .args(args)
            .env("RELATED_IMAGE_MEMCACHED", RELATED_IMAGE)
            .env_remove("RUST_LOG")
            .envs(env.iter().copied())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .kill_on_drop(true);
        let mut child = command.spawn().expect("start memcached-operator");
        let stdout = child.stdout.take().expect("piped stdout");
        let logs = Arc::new(Mutex::new(Vec::new()));
        let (addresses_tx, mut addresses) = watch::channel(Vec::<(String, SocketAddr)>::new());
        let sink = logs.clone();
        tokio::spawn(async move {
            let mut lines = BufReader::new(stdout).lines();
            while let Ok(Some(line)) = lines.next_line().await {
                // A line that is not JSON is kept as a string, and fails the tests that look.
                let entry = serde_json::from_str::<Value>(&line).unwrap_or(Value::String(line));
                if entry["message"] == "listening" {
                    let server = entry["server"].as_str().unwrap_or_default().to_string();
                    let address = entry["address"].as_str().and_then(|a| a.parse().ok());
                    if let Some(address) = address {
                        addresses_tx.send_modify(|found| found.push((server, address)));
                    }
                }
                if let Ok(mut logs) = sink.lock() {
                    logs.push(entry);
                }
            }
        });
        let found = tokio::time::timeout(
            Duration::from_secs(10),
            addresses.wait_for(|found| found.len() == listeners.len()),
        )
        .await
        .expect("the server binds its listeners within 10 s")
        .expect("the log reader is running")
        .clone();
        let address = |name: &str| {
            found
                .iter()
                .find(|(server, _)| server == name)
                .map(|(_, address)| *address)
                .unwrap_or_else(|| SocketAddr::from(([127, 0, 0, 1], 0)))
        };
        Server {
            webhook: address("webhooks"),
            probes: address("probes"),
            metrics: address("metrics"),
            child,
            logs,
        }
    }

    /// Log lines so far whose message contains `text`.
    pub fn logs_containing(&self, text: &str) -> Vec<Value> {
        self.logs
            .lock()
            .map(|logs| {
                logs.iter()
                    .filter(|entry| {
                        entry["message"]
                            .as_str()
                            .is_some_and(|message| message.contains(text))
                    })
                    .cloned()
                    .collect()
            })
            .unwrap_or_default()
    }

    /// The status of `GET /readyz`.
    pub async fn readyz(&self) -> u16 {
        client::plain_get(self.probes, "/readyz").await.0
    }

    /// Waits until `/readyz` answers 200, and returns how long that took.
    pub async fn wait_ready(&self, within: Duration) -> Duration {
        let start = Instant::now();
        while start.elapsed() < within {
            if self.readyz().await == 200 {
                return start.elapsed();
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        panic!("not ready within {within:?}");
    }

    /// The text of `GET /metrics`.
    pub async fn metrics(&self) -> String {
        let (status, body) = client::plain_get(self.metrics, "/metrics").await;
        assert_eq!(status, 200);
        String::from_utf8(body).expect("UTF-8 metrics")
    }

    /// The resident set size of the process, in KiB (`VmRSS` of `/proc/PID/status`).
    pub fn rss_kib(&self) -> u64 {
        let pid = self.child.id().expect("the server is running");
        let status = std::fs::read_to_string(format!("/proc/{pid}/status")).expect("proc status");
        status
            .lines()
            .find_map(|line| line.strip_prefix("VmRSS:"))
            .and_then(|value| value.trim().trim_end_matches("kB").trim().parse().ok())
            .expect("VmRSS")
    }

    /// The read system calls the process has made (`syscr` of `/proc/PID/io`).
    pub fn read_syscalls(&self) -> u64 {
        let pid = self.child.id().expect("the server is running");
        let io = std::fs::read_to_string(format!("/proc/{pid}/io")).expect("proc io");
        io.lines()
            .find_map(|line| line.strip_prefix("syscr:"))
            .and_then(|value| value.trim().parse().ok())
            .expect("syscr")
    }

    /// Sends SIGTERM.
    pub fn terminate(&self) {
        let pid = self.child.id().expect("the server is running");
        let status = std::process::Command::new("kill")
            .args(["-TERM", &pid.to_string()])
            .status()
            .expect("run kill");
        assert!(status.success());
    }

    /// Waits for the process to exit.
    pub async fn exit_status(&mut self, within: Duration) -> ExitStatus {
        match tokio::time::timeout(within, self.child.wait()).await {
            Ok(status) => status.expect("wait for the server"),
            Err(_) => {
                let logs = self.logs.lock().map(|l| l.clone()).unwrap_or_default();
                let last: Vec<String> = logs
                    .iter()
                    .rev()
                    .take(20)
                    .rev()
                    .map(Value::to_string)
                    .collect();
                panic!(
                    "the server did not exit within {within:?}; its last log lines:\n{}",
                    last.join("\n")
                )
            }
        }
    }
}
