//! Runs the `memcached-operator` binary as a child process on loopback ports it picks itself,
//! reads the addresses it logs, waits for readiness, scrapes its metrics (over HTTPS with a
//! bearer token unless it was started with `--metrics-secure=false`), and keeps its JSON log
//! lines for tests to look at.
//!
//! The binary's path comes from the test crate that was built with it (cargo sets
//! `CARGO_BIN_EXE_memcached-operator` only there), so each test crate names it once:
//! `const OPERATOR: OperatorBinary = OperatorBinary::new(env!("CARGO_BIN_EXE_memcached-operator"));`

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
use crate::procfs;

/// The image the operator defaults `spec.image` to when a test starts it
/// (`RELATED_IMAGE_MEMCACHED`).
pub const RELATED_IMAGE: &str = "registry.example/memcached:1.6.39";

/// How long a started process may take to log the addresses of its listeners: a bound on a
/// wait for log lines, generous for a machine whose cores are busy with other work.
const BIND_TIMEOUT: Duration = Duration::from_secs(120);

/// A generous bound on a wait for `/readyz` to answer 200, for [`Server::wait_ready`].
pub const READY_WITHIN: Duration = Duration::from_secs(120);

/// The log line the operator writes for each listener it has bound.
const LISTENING: &str = "listening";

/// The flag that makes the operator serve its metrics over plain HTTP to anyone.
pub const METRICS_INSECURE: &str = "--metrics-secure=false";

/// The listener a JSON log line of the operator says it bound, if it is such a line: the
/// server's name (`webhooks`, `probes`, `metrics`) and its address.
pub fn listener_of(entry: &Value) -> Option<(String, SocketAddr)> {
    if entry["message"] != LISTENING {
        return None;
    }
    let server = entry["server"].as_str()?.to_string();
    let address = entry["address"].as_str()?.parse().ok()?;
    Some((server, address))
}

/// The operator binary a test crate was built with.
#[derive(Clone, Copy, Debug)]
pub struct OperatorBinary {
    path: &'static str,
}

/// Where a server looks for its certificate.
#[derive(Clone, Copy, Debug)]
pub enum Certs<'a> {
    /// `--cert-root DIR`: OLM's mount paths under DIR.
    Root(&'a Path),
    /// `--cert-dir DIR`: `tls.crt` and `tls.key` in DIR.
    Dir(&'a Path),
}

impl OperatorBinary {
    /// The binary at `path`; pass `env!("CARGO_BIN_EXE_memcached-operator")`.
    pub const fn new(path: &'static str) -> OperatorBinary {
        OperatorBinary { path }
    }

    /// Its path.
    pub fn path(&self) -> &Path {
        Path::new(self.path)
    }

    /// Starts `webhooks` on 127.0.0.1 (every listener on a port of its choosing) with the
    /// certificate source and further flags, and waits until its three listeners are bound
    /// (not until it is ready). Its metrics are plain HTTP (`--metrics-secure=false`): there
    /// is no API server to review callers.
    ///
    /// # Panics
    /// As [`OperatorBinary::start`].
    pub async fn webhooks(&self, certs: Certs<'_>, flags: &[&str]) -> Server {
        let mut args: Vec<String> = [
            "webhooks",
            "--bind-address",
            "127.0.0.1",
            "--webhook-port",
            "0",
            "--probe-port",
            "0",
            "--metrics-port",
            "0",
            METRICS_INSECURE,
        ]
        .iter()
        .map(|a| a.to_string())
        .collect();
        match certs {
            Certs::Root(root) => args.extend(["--cert-root".into(), root.display().to_string()]),
            Certs::Dir(dir) => args.extend(["--cert-dir".into(), dir.display().to_string()]),
        };
        args.extend(flags.iter().map(|f| f.to_string()));
        self.start(&args, &[], &["webhooks", "probes", "metrics"])
            .await
    }

    /// Starts `run` as the identity of `kubeconfig`, with the controller only (no webhooks,
    /// no leader election, 2 s for reconciliations at shutdown), probes and metrics on free
    /// loopback ports: an operator whose RBAC a test chooses.
    pub async fn controller_only(&self, kubeconfig: &Path) -> Server {
        let args: Vec<String> = [
            "run",
            "--bind-address",
            "127.0.0.1",
            "--probe-port",
            "0",
            "--metrics-port",
            "0",
            "--webhooks=false",
            "--leader-elect=false",
            "--reconcile-shutdown-timeout",
            "2s",
        ]
        .iter()
        .map(|a| a.to_string())
        .collect();
        let kubeconfig = kubeconfig.display().to_string();
        self.start(
            &args,
            &[("KUBECONFIG", &kubeconfig)],
            &["probes", "metrics"],
        )
        .await
    }

    /// Starts the binary with `args` (a subcommand and its flags) and extra environment,
    /// logging JSON at the filter `RUST_LOG` in `env` names, else at level info, and waits
    /// until the named listeners are bound. Its metrics
    /// are scraped over HTTPS unless `args` holds [`METRICS_INSECURE`].
    ///
    /// # Panics
    /// If the binary cannot be started, or does not log every listener in `listeners` within
    /// 120 s; the message shows its last log lines.
    pub async fn start(&self, args: &[String], env: &[(&str, &str)], listeners: &[&str]) -> Server {
        let level = env
            .iter()
            .find(|(name, _)| *name == "RUST_LOG")
            .map_or("info", |(_, filter)| *filter);
        let mut command = Command::new(self.path);
        command
            .args(["--log-format", "json", "--log-level", level])
            .args(args)
            .env("RELATED_IMAGE_MEMCACHED", RELATED_IMAGE)
            .env_remove("RUST_LOG")
            .envs(env.iter().copied())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .kill_on_drop(true);
        let mut child = command
            .spawn()
            .unwrap_or_else(|error| panic!("cannot start {}: {error}", self.path));
        let Some(stdout) = child.stdout.take() else {
            panic!("{}: its stdout is not piped", self.path)
        };
        let logs = Arc::new(Mutex::new(Vec::new()));
        let (addresses_tx, mut addresses) = watch::channel(Vec::<(String, SocketAddr)>::new());
        let sink = logs.clone();
        tokio::spawn(async move {
            let mut lines = BufReader::new(stdout).lines();
            while let Ok(Some(line)) = lines.next_line().await {
                // A line that is not JSON is kept as a string, and fails the tests that look.
                let entry = serde_json::from_str::<Value>(&line).unwrap_or(Value::String(line));
                if let Some(listener) = listener_of(&entry) {
                    addresses_tx.send_modify(|found| found.push(listener));
                }
                if let Ok(mut logs) = sink.lock() {
                    logs.push(entry);
                }
            }
        });
        let bound = tokio::time::timeout(
            BIND_TIMEOUT,
            addresses.wait_for(|found| found.len() == listeners.len()),
        )
        .await
        .map(|waited| waited.map(|found| found.clone()));
        let last_lines = || {
            logs.lock()
                .map(|logs| {
                    let skip = logs.len().saturating_sub(10);
                    logs[skip..]
                        .iter()
                        .map(Value::to_string)
                        .collect::<Vec<_>>()
                        .join("\n")
                })
                .unwrap_or_default()
        };
        let found = match bound {
            Ok(Ok(found)) => found,
            // The reader dropped the sender after its last line: every line is kept.
            Ok(Err(_)) => panic!(
                "{} exited before logging its listeners {listeners:?}; its last log lines:\n{}",
                self.path,
                last_lines()
            ),
            Err(_) => panic!(
                "{} did not log its listeners {listeners:?} within {BIND_TIMEOUT:?}; it logged \
                 {:?}; its last log lines:\n{}",
                self.path,
                addresses.borrow().clone(),
                last_lines()
            ),
        };
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
            metrics_https: !args.iter().any(|a| a == METRICS_INSECURE),
            metrics_token: None,
            child,
            logs,
        }
    }
}

/// A running operator process. Killed when dropped.
pub struct Server {
    child: Child,
    /// The TLS webhook listener (port 0 when the process serves no webhooks).
    pub webhook: SocketAddr,
    /// `/healthz` and `/readyz`.
    pub probes: SocketAddr,
    /// `/metrics`.
    pub metrics: SocketAddr,
    /// Whether `/metrics` is served over HTTPS (to reviewed callers).
    pub metrics_https: bool,
    metrics_token: Option<String>,
    logs: Arc<Mutex<Vec<Value>>>,
}

impl Server {
    /// The process id.
    ///
    /// # Panics
    /// If the process has been waited for.
    pub fn pid(&self) -> u32 {
        self.child
            .id()
            .unwrap_or_else(|| panic!("the server has exited and been waited for"))
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

    /// The last `count` log lines, one JSON object a line.
    pub fn last_logs(&self, count: usize) -> String {
        let logs = self.logs.lock().map(|l| l.clone()).unwrap_or_default();
        let skip = logs.len().saturating_sub(count);
        logs[skip..]
            .iter()
            .map(Value::to_string)
            .collect::<Vec<_>>()
            .join("\n")
    }

    /// The status of `GET /readyz`.
    ///
    /// # Panics
    /// If the probe listener does not answer.
    pub async fn readyz(&self) -> u16 {
        match client::plain_get(self.probes, "/readyz").await {
            Ok((status, _)) => status,
            Err(error) => panic!("GET /readyz on {}: {error}", self.probes),
        }
    }

    /// Waits until `/readyz` answers 200, and returns how long that took.
    ///
    /// # Panics
    /// If it does not within `within`; the message shows the last answer and the last log
    /// lines.
    pub async fn wait_ready(&self, within: Duration) -> Duration {
        let start = Instant::now();
        let mut last = String::from("no answer yet");
        while start.elapsed() < within {
            match client::plain_get(self.probes, "/readyz").await {
                Ok((200, _)) => return start.elapsed(),
                Ok((status, body)) => {
                    last = format!("{status} {}", String::from_utf8_lossy(&body).trim());
                }
                Err(error) => last = error.to_string(),
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        panic!(
            "/readyz on {} did not answer 200 within {within:?}; its last answer: {last}; the \
             process's last log lines:\n{}",
            self.probes,
            self.last_logs(20)
        );
    }

    /// Sends `token` with every scrape of [`Server::metrics`] from now on.
    pub fn set_metrics_token(&mut self, token: impl Into<String>) {
        self.metrics_token = Some(token.into());
    }

    /// `GET /metrics` with `token` as the bearer token (over HTTPS, trusting any certificate,
    /// or plain HTTP); returns the status and the body as text.
    ///
    /// # Errors
    /// When the metrics listener gives no answer.
    pub async fn get_metrics(
        &self,
        token: Option<&str>,
    ) -> Result<(u16, String), client::RequestError> {
        let (status, body) = if self.metrics_https {
            let answer = client::TlsClient::trusting_any_certificate(self.metrics)
                .get("/metrics", token)
                .await?;
            (answer.status, answer.body)
        } else {
            client::plain_get(self.metrics, "/metrics").await?
        };
        Ok((status, String::from_utf8_lossy(&body).into_owned()))
    }

    /// The text of `GET /metrics`, with the token of [`Server::set_metrics_token`].
    ///
    /// # Panics
    /// If the metrics listener does not answer 200.
    pub async fn metrics(&self) -> String {
        let (status, body) = match self.get_metrics(self.metrics_token.as_deref()).await {
            Ok(answer) => answer,
            Err(error) => panic!("GET /metrics on {}: {error}", self.metrics),
        };
        assert_eq!(status, 200, "GET /metrics on {}: {body}", self.metrics);
        body
    }

    /// The resident set size of the process, in KiB.
    ///
    /// # Panics
    /// If `/proc` does not tell.
    pub fn rss_kib(&self) -> u64 {
        procfs::memory(self.pid())
            .unwrap_or_else(|error| panic!("{error}"))
            .rss_kib
    }

    /// The read system calls the process has made.
    ///
    /// # Panics
    /// If `/proc` does not tell.
    pub fn read_syscalls(&self) -> u64 {
        procfs::read_syscalls(self.pid()).unwrap_or_else(|error| panic!("{error}"))
    }

    /// Sends SIGTERM.
    ///
    /// # Panics
    /// If `kill` cannot be run or fails.
    pub fn terminate(&self) {
        let pid = self.pid();
        let status = std::process::Command::new("kill")
            .args(["-TERM", &pid.to_string()])
            .status()
            .unwrap_or_else(|error| panic!("cannot run kill -TERM {pid}: {error}"));
        assert!(status.success(), "kill -TERM {pid}: {status}");
    }

    /// Waits for the process to exit, and returns how it exited.
    ///
    /// # Panics
    /// If it does not exit within `within`; the message shows its last log lines.
    pub async fn exit_status(&mut self, within: Duration) -> ExitStatus {
        match tokio::time::timeout(within, self.child.wait()).await {
            Ok(Ok(status)) => status,
            Ok(Err(error)) => panic!("cannot wait for the server: {error}"),
            Err(_) => panic!(
                "the server did not exit within {within:?}; its last log lines:\n{}",
                self.last_logs(20)
            ),
        }
    }
}
